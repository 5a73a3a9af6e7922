//! `stemflow eval`: a model's (or an ensemble's, or stems written before) separation quality on
//! MUSDB18-HQ or any folder of mixtures with their stems — per track and target, SDR as museval
//! computes it and the MDX challenge's uSDR, as a table, JSON and a chart.
//!
//! - `dataset.rs`: the tracks of a folder; `targets.rs`: what each score compares;
//! - `track.rs`: estimates and references paired as they are decoded and scored
//!   (`stemflow_kit::bsseval`); `evaluate.rs`: one track, separated or read and scored;
//! - `report.rs`: the table and the JSON; `chart.rs`: the PNG.

mod chart;
mod dataset;
mod evaluate;
mod report;
mod targets;
mod track;

use std::path::PathBuf;

use clap::Args;
use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::whole_file::{WholeFileOptions, WholeFileSeparator};
use stemflow_engine::LookAhead;

use crate::error::CliError;
use crate::model_folders::SearchFolders;
use crate::model_spec::EnsembleArgs;
use crate::progress::ProgressMode;
use crate::separate::args::{mode_selection, ModeArg};
use dataset::{find_tracks, Subset};
use evaluate::{evaluate_track, EstimateSource, TrackError, TrackResult};

const AFTER_HELP: &str = "\
Examples:
  stemflow eval ~/datasets/musdb18hq --model htdemucs            # the 50 test tracks
  stemflow eval ~/datasets/musdb18hq --model bs_roformer_viperx_1297+htdemucs --ensemble max_fft
  stemflow eval ~/datasets/musdb18hq --subset train --limit 5 --json > scores.json
  stemflow eval ~/datasets/musdb18hq --estimates my-stems/ --plot sdr.png   # stems written before

DIR is MUSDB18-HQ's folder (train/ and test/ with a folder per track holding mixture.wav and
vocals.wav, drums.wav, bass.wav, other.wav), one subset, a folder of such track folders (any
stems, any format stemflow reads) or one track folder. MUSDB18's .stem.mp4 files are not read:
use MUSDB18-HQ, or decode them to WAV folders first.

SDR is BSSEval v4 as museval.eval_mus_track computes it (1 s windows and hops; a window where
a reference or estimate is silent does not count; the median over the windows), uSDR the MDX
challenge's SDR of the whole track. The rows below the tracks are the median (museval's and
SiSEC's convention for SDR) and the mean (the MDX challenge's for uSDR) over tracks.

Exit codes: 0 every track evaluated; 1 a track failed (the others are still reported) or the
model is unusable; 2 usage error.";

/// Measure separation quality (SDR, uSDR) on MUSDB18-HQ or any folder of mixtures and stems.
#[derive(Args)]
#[command(after_help = AFTER_HELP)]
pub struct EvalArgs {
    /// The dataset: MUSDB18-HQ's folder, one subset, a folder of track folders, or one track.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// The model: `builtin` (the default), an ONNX model file, a model or route name, or
    /// `a+b+…` for an ensemble (with --ensemble).
    #[arg(long, value_name = "NAME|PATH")]
    pub model: Option<String>,
    /// Several models' stems combined (`--model a+b --ensemble max_fft`).
    #[command(flatten)]
    pub ensemble: EnsembleArgs,
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Score stems written before instead of separating: EST/[SUBSET/]TRACK/STEM.wav, as
    /// museval reads them (`accompaniment.wav` against all but the vocals).
    #[arg(long, value_name = "EST", conflicts_with = "model")]
    pub estimates: Option<PathBuf>,
    /// Which of MUSDB18's subsets.
    #[arg(long, value_enum, default_value = "test")]
    pub subset: Subset,
    /// Only the first N tracks (in name order).
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// Device for models: auto, cpu, cuda:N, directml:N, migraphx:N or coreml.
    #[arg(long, default_value = "auto", value_name = "ID")]
    pub device: String,
    /// How far past the audio a model may look (see `stemflow separate --help`).
    #[arg(long = "look-ahead", value_name = "full|TIME", default_value = "full", value_parser = LookAhead::parse)]
    pub look_ahead: LookAhead,
    /// `file` (default): a model separates each mixture as its reference runs a whole file;
    /// `stream`: as the plugin renders it (see `stemflow separate --help`).
    #[arg(long, value_enum, value_name = "file|stream")]
    pub mode: Option<ModeArg>,
    /// Print the results as JSON (with every track's 1 s windows) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Draw each target's per-track SDR and its median into a PNG.
    #[arg(long, value_name = "FILE.png")]
    pub plot: Option<PathBuf>,
    /// No progress.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Runs `stemflow eval`.
pub fn run(args: EvalArgs) -> Result<(), CliError> {
    let mut tracks = find_tracks(&args.dir, args.subset).map_err(CliError::Failed)?;
    if let Some(limit) = args.limit {
        tracks.truncate(limit);
    }
    let model = match &args.estimates {
        Some(_) => None,
        None => Some(crate::model_spec::resolve(
            args.model.as_deref().unwrap_or("builtin"),
            &args.ensemble,
            &args.models_dirs.dirs(),
        )?),
    };
    let device = args
        .device
        .parse::<DeviceChoice>()
        .map_err(CliError::Failed)?;
    let described = match (&model, &args.estimates) {
        (Some(model), _) => model.label(),
        (None, Some(dir)) => format!("the estimates in {}", dir.display()),
        (None, None) => unreachable!("a model or estimates"),
    };
    let progress = ProgressMode::detect(args.quiet);
    if progress != ProgressMode::Quiet {
        crate::output::say_err!(
            "Evaluating {described} on {} track{} of {}",
            tracks.len(),
            if tracks.len() == 1 { "" } else { "s" },
            args.dir.display()
        );
    }
    let (mode, _) = mode_selection(args.mode, args.look_ahead, None)?;
    let file_options = WholeFileOptions {
        device,
        mode,
        ..WholeFileOptions::default()
    };
    let mut slot: Option<WholeFileSeparator> = None;
    let load = || -> Result<WholeFileSeparator, String> {
        let spec = model.as_ref().expect("a model");
        WholeFileSeparator::load(spec, &file_options).map_err(|e| e.to_string())
    };
    let mut results: Vec<TrackResult> = Vec::new();
    let mut failed: Vec<(String, String)> = Vec::new();
    for (index, track) in tracks.iter().enumerate() {
        let label = format!("[{}/{}] {}", index + 1, tracks.len(), track.name);
        let source = match &args.estimates {
            Some(dir) => EstimateSource::Files(dir),
            None => EstimateSource::Model {
                slot: &mut slot,
                load: &load,
            },
        };
        match evaluate_track(track, source, progress, &label) {
            Ok(result) => results.push(result),
            Err(TrackError::Track(error)) => {
                crate::output::say_err!("stemflow: error: {}: {error}", track.name);
                failed.push((track.name.clone(), error));
            }
            Err(TrackError::Fatal(error)) => return Err(CliError::Failed(error)),
            Err(TrackError::Interrupted(signal)) => return Err(CliError::Interrupted(signal)),
        }
    }
    if args.json {
        let json = report::json(&described, &args.dir, &results, &failed);
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&json).expect("JSON values")
        );
    } else {
        crate::output::say!("{}", report::table(&results, &failed).trim_end());
    }
    if let Some(path) = &args.plot {
        let chart = chart::ScoreChart {
            title: format!("SDR (museval) of {described}, {} tracks", results.len()),
            y_label: "SDR (dB)".into(),
            targets: report::target_names(&results)
                .into_iter()
                .map(|name| {
                    let column = report::column(&results, &name, false);
                    (name, column)
                })
                .collect(),
        };
        chart.write_png(path).map_err(CliError::Failed)?;
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Reported)
    }
}
