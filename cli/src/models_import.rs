//! `stemflow models import FILE`: a checkpoint the user has (their own fine-tuned HTDemucs, a
//! demucs bag, an MSST RoFormer checkpoint with its config, an ONNX export) into the models folder, through `stemflow_fetch::import`. An
//! ONNX model must be one the engine recognises; it is checked where it lies, with its sidecar.

use std::path::PathBuf;

use clap::Args;
use stemflow_convert::mdx::MdxStft;
use stemflow_engine::families::stft_of_model;
use stemflow_engine::ModelFamily;
use stemflow_fetch::import::{import_model, ImportKind, ImportOptions};

use crate::error::CliError;
use crate::model_folders::InstallFolder;

/// `stemflow models import`'s arguments.
#[derive(Args)]
pub struct ImportArgs {
    /// The file: an .onnx model, a demucs checkpoint (.th), a demucs bag (.yaml, its
    /// checkpoints `<sig>-*.th` beside it) or an MSST BS-/Mel-RoFormer checkpoint (.ckpt, with
    /// --config).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// The installed model's name (default: the file's name without its extension).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// The MSST config (.yaml) of a RoFormer .ckpt (default: MODEL.yaml next to it).
    #[arg(long, value_name = "FILE.yaml")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub install: InstallFolder,
}

/// Runs `stemflow models import`.
pub fn run(args: &ImportArgs) -> Result<(), CliError> {
    let models_dir = args.install.folder()?;
    let options = ImportOptions {
        name: args.name.clone(),
        config: args.config.clone(),
        force: args.install.force,
    };
    let mut description = None;
    let imported = import_model(&args.file, &models_dir, &options, &mut |path| {
        let info = stemflow_engine::inspect_model(path);
        match (info.error, info.family) {
            (Some(error), _) => Err(error),
            (None, None) => Err("no model family recognises its graph".into()),
            (None, Some(family)) => {
                description = Some(format!("{family}: {}", info.stems.join(", ")));
                // A published MDX-Net graph gets its graph for GPUs, the STFT around it.
                let stft = match family {
                    ModelFamily::MdxNet => stft_of_model(path),
                    _ => None,
                };
                Ok(stft.map(|(n_fft, hop)| MdxStft { n_fft, hop }))
            }
        }
    })
    .map_err(|e| CliError::Failed(e.to_string()))?;
    for path in imported.also.iter().chain([&imported.model]) {
        let state = if imported.unchanged.contains(path) {
            "already there"
        } else {
            "written"
        };
        crate::output::say!("{}  ({state})", path.display());
    }
    let what = match imported.kind {
        ImportKind::Onnx => description.unwrap_or_else(|| "ONNX model".into()),
        ImportKind::DemucsCheckpoint => "converted from a demucs checkpoint".into(),
        ImportKind::DemucsBag => "converted from a demucs bag".into(),
        ImportKind::MsstCheckpoint => "converted from an MSST RoFormer checkpoint".into(),
    };
    let name = imported
        .model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    crate::output::say!(
        "{name} ({what}, sha256 {}…) is ready: use it with `stemflow separate --model {name}`, or \
         choose it in the plugin's model list.",
        imported.model_sha256.get(..12).unwrap_or("?")
    );
    Ok(())
}
