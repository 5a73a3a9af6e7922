//! `stemflow`: the command-line tool over Stemflow's engine.
//!
//! Exit codes: 0 success, 1 a failure (an input that could not be separated, an unknown model or
//! device, an unwritable folder), 2 a usage error.

mod bench;
mod decode;
mod encode;
mod memory;
mod progress;
mod separate;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use stemflow_engine::demo_song::{DemoSong, DEMO_DURATION_S, DEMO_SAMPLE_RATE_HZ};
use stemflow_engine::metrics::sdr_db;
use stemflow_engine::runtime::devices::{auto_device, devices, DeviceChoice, DeviceStatus};
use stemflow_engine::runtime::runtime;
use stemflow_engine::separator::SeparatorChoice;
use stemflow_engine::wav::{read_wav, write_wav};
use stemflow_engine::{ExtraStems, Stem};

use crate::bench::BenchOptions;
use crate::encode::{BitDepth, OutputFormat};
use crate::progress::ProgressMode;
use crate::separate::SeparateOptions;

const SEPARATE_EXAMPLES: &str = "\
Examples:
  stemflow separate song.mp3
      → stemflow-output/song/{vocals,drums,bass,other}.wav
  stemflow separate *.flac -o stems --format flac --bit-depth 24
  stemflow separate live.wav --stems vocals,drums --quiet
  stemflow separate song.wav --model models/htdemucs.onnx --device cuda:0
  stemflow separate song.wav --model htdemucs_6s --guitar-piano own
      → …/{vocals,drums,bass,other,guitar,piano}.wav

Reads WAV, AIFF, FLAC, MP3, OGG/Vorbis and M4A/AAC at any sample rate, mono or stereo; mono is
separated as mono (each stem is the average of the engine's two identical channels). Stems have
the input's length and rate and sum to the input. Default bit depth: the input's when it is
16- or 24-bit PCM, else 32-bit float (WAV) or 24-bit (FLAC). Integer formats are rounded without
dither and clipped at full scale (a warning says how often).

Exit codes: 0 all inputs separated; 1 any input failed (the others are still written), or the
model, device or output folder is unusable; 2 usage error.";

const DEVICES_EXAMPLES: &str = "\
Examples:
  stemflow devices
  stemflow devices --json | jq .auto

ONNX Runtime is found through STEMFLOW_ORT_LIB, next to the program, or the system loader path;
`cargo xtask fetch-runtime` downloads it. The built-in separator needs no runtime.";

const MODELS_EXAMPLES: &str = "\
Examples:
  stemflow models
  stemflow models --models-dir ~/uvr-models --json

Model files (.onnx) are recognised by their graph: HTDemucs, MDX-Net (parameters from UVR's table
or a <model>.json sidecar) and BS/Mel-RoFormer (an MSST <model>.yaml config next to the file).
Use a listed name with `stemflow separate --model NAME`.";

const BENCH_EXAMPLES: &str = "\
Examples:
  stemflow bench
  stemflow bench --seconds 60 --json
  stemflow bench --model builtin,models/htdemucs.onnx --device cpu,cuda:0

For each model × device: per-chunk inference time (min/median/max), the real-time factor of the
whole offline path (processing time / audio time; lower is faster), the overhead (whole path /
pure inference time) and the process's peak RSS (Linux; n/a elsewhere). By default models run
on the CPU and, if there is one, on the GPU Auto picks, side by side.";

const DEMO_EXAMPLES: &str = "\
Examples:
  stemflow demo
  stemflow demo -o /tmp/demo --duration-s 10";

#[derive(Parser)]
#[command(
    name = "stemflow",
    version,
    about = "Split audio into vocals, drums, bass and other",
    after_help = "Run `stemflow <COMMAND> --help` for examples."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// A stem name on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum StemArg {
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

/// Where a six-stem model's guitar and piano go (`--guitar-piano`).
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GuitarPianoArg {
    /// Into other.wav, as the plugin's default "Into Other".
    Other,
    /// Into guitar.wav and piano.wav; other.wav is what is left.
    Own,
}

/// The engine setting and the stems to write: guitar and piano have their own files when asked
/// for, by `--guitar-piano own` or by naming them in `--stems`.
fn stem_selection(
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

#[derive(Subcommand)]
enum Command {
    /// Separate audio files into DIR/<name>/<stem>.<ext>, one after the other.
    #[command(after_help = SEPARATE_EXAMPLES)]
    Separate {
        /// The audio files to separate.
        #[arg(required = true, value_name = "INPUT")]
        inputs: Vec<PathBuf>,
        /// Output folder; each input's stems go into a subfolder named after it.
        #[arg(short, long, value_name = "DIR", default_value = "stemflow-output")]
        output: PathBuf,
        /// The model: `builtin` (the embedded DSP separator, the default), an ONNX model file, or
        /// the name of a model in the models folder (see `stemflow models`).
        #[arg(long, value_name = "NAME|PATH")]
        model: Option<String>,
        /// Another folder to look for models in (besides the user models folder).
        #[arg(long, value_name = "DIR")]
        models_dir: Vec<PathBuf>,
        /// Same as `--model builtin` (kept for older scripts).
        #[arg(long, hide = true, conflicts_with = "model")]
        separator: Option<String>,
        /// Device for models: auto, cpu, cuda:N, directml:N, migraphx:N or coreml.
        #[arg(long, default_value = "auto", value_name = "ID")]
        device: String,
        /// Fail instead of falling back to the CPU when the device cannot run the model.
        #[arg(long)]
        strict_device: bool,
        /// The stems to write (comma-separated); default: vocals, drums, bass, other (plus
        /// guitar and piano with `--guitar-piano own`).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "STEM,...")]
        stems: Vec<StemArg>,
        /// Six-stem models: guitar and piano into other.wav (default) or their own files
        /// (`own`, also implied by naming them in --stems).
        #[arg(long, value_enum, value_name = "WHERE")]
        guitar_piano: Option<GuitarPianoArg>,
        /// File format of the stems.
        #[arg(long, value_enum, default_value = "wav")]
        format: OutputFormat,
        /// Sample format: 16, 24 or 32f (float, WAV only); default: see below.
        #[arg(long, value_enum, value_name = "BITS")]
        bit_depth: Option<BitDepth>,
        /// Print nothing but errors and warnings (no progress).
        #[arg(short, long)]
        quiet: bool,
    },
    /// Generate the synthetic demo song, separate it and report each stem's SDR.
    #[command(after_help = DEMO_EXAMPLES)]
    Demo {
        /// Output folder.
        #[arg(short, long, default_value = "stemflow-demo")]
        output: PathBuf,
        /// Song length in seconds.
        #[arg(long, default_value_t = DEMO_DURATION_S)]
        duration_s: f32,
    },
    /// List the devices ONNX Runtime can use, and which one Auto picks.
    #[command(after_help = DEVICES_EXAMPLES)]
    Devices {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List the models in the models folders: family, stems, sample rate, hash, whether they validated.
    #[command(after_help = MODELS_EXAMPLES)]
    Models {
        /// Another folder to look in (besides the user models folder).
        #[arg(long, value_name = "DIR")]
        models_dir: Vec<PathBuf>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Measure speed and memory of models on devices.
    #[command(after_help = BENCH_EXAMPLES)]
    Bench {
        /// Seconds of test audio (the synthetic demo song) to separate.
        #[arg(long, alias = "duration-s", default_value_t = 20.0, value_name = "N")]
        seconds: f32,
        /// Models to time (repeat or comma-separate): `builtin` or ONNX model files.
        #[arg(long, value_name = "NAME|PATH", value_delimiter = ',')]
        model: Vec<String>,
        /// Devices to time models on (repeat or comma-separate); default: cpu and Auto's pick.
        #[arg(long, value_name = "ID", value_delimiter = ',')]
        device: Vec<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    quiet_panics();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Separate {
            inputs,
            output,
            model,
            models_dir,
            separator,
            device,
            strict_device,
            stems,
            guitar_piano,
            format,
            bit_depth,
            quiet,
        } => {
            let (extra_stems, stems) = stem_selection(&stems, guitar_piano);
            if extra_stems == ExtraStems::IntoOther && stems.is_empty() {
                Cli::command()
                    .error(
                        ErrorKind::ArgumentConflict,
                        "--guitar-piano other keeps guitar and piano in other.wav: name other stems, or use --guitar-piano own",
                    )
                    .exit();
            }
            if format == OutputFormat::Flac && bit_depth == Some(BitDepth::Float32) {
                Cli::command()
                    .error(
                        ErrorKind::ArgumentConflict,
                        "FLAC has no float samples: use --bit-depth 16 or 24 with --format flac, or --format wav for 32f",
                    )
                    .exit();
            }
            let model = model.or(separator).unwrap_or_else(|| "builtin".into());
            let options = resolve_model_in(&model, &models_dir).and_then(|separator| {
                Ok(SeparateOptions {
                    separator,
                    device: device.parse::<DeviceChoice>()?,
                    is_strict_device: strict_device,
                    stems,
                    extra_stems,
                    format,
                    bit_depth,
                    progress: ProgressMode::detect(quiet),
                })
            });
            match options {
                Ok(options) => match separate::separate_all(&inputs, &output, &options) {
                    Ok(0) => Ok(()),
                    Ok(_) => return ExitCode::FAILURE,
                    Err(e) => Err(e),
                },
                Err(e) => Err(e),
            }
        }
        Command::Devices { json } => list_devices(json),
        Command::Models { models_dir, json } => list_models(&models_dir, json),
        Command::Demo { output, duration_s } => demo(&output, duration_s),
        Command::Bench {
            seconds,
            model,
            device,
            json,
        } => bench::bench(&BenchOptions {
            models: model,
            devices: device,
            seconds,
            is_json: json,
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("stemflow: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// A panic is a bug, but the user gets one line, not a trace: the default hook only runs when
/// `RUST_BACKTRACE` asks for details. The engine's worker catches its own panics and reports them
/// as errors.
fn quiet_panics() {
    if std::env::var_os("RUST_BACKTRACE").is_some() {
        return;
    }
    std::panic::set_hook(Box::new(|info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        if std::thread::current().name() != Some("stemflow-worker") {
            eprintln!("stemflow: error: internal error ({message}); please report it");
        }
    }));
}

/// Resolves `--model` against the user models folder.
pub(crate) fn resolve_model(arg: &str) -> Result<SeparatorChoice, String> {
    resolve_model_in(arg, &[])
}

/// Resolves `--model`: `builtin`, the path of an ONNX model file (also as `file:PATH`), or a model
/// name in the user models folder or `extra_dirs`.
pub(crate) fn resolve_model_in(
    arg: &str,
    extra_dirs: &[PathBuf],
) -> Result<SeparatorChoice, String> {
    let arg = arg.trim();
    if arg.eq_ignore_ascii_case("builtin") {
        return Ok(SeparatorChoice::Builtin);
    }
    let path = Path::new(arg.strip_prefix("file:").unwrap_or(arg));
    if path.is_file() {
        return Ok(SeparatorChoice::Model(path.to_path_buf()));
    }
    let looks_like_path = arg.contains(['/', '\\']);
    if looks_like_path || path.exists() {
        return Err(format!("model file not found: {}", path.display()));
    }
    let dirs = stemflow_engine::models::models_dirs(extra_dirs);
    stemflow_engine::models::resolve_model(arg, &dirs)
        .map(SeparatorChoice::Model)
        .map_err(|e| format!("{e} (use builtin, a model name from `stemflow models`, or the path of an .onnx file)"))
}

/// `stemflow models`: every model in the models folders, checked.
fn list_models(extra_dirs: &[PathBuf], is_json: bool) -> Result<(), String> {
    let dirs = stemflow_engine::models::models_dirs(extra_dirs);
    let models = stemflow_engine::models::scan_models(&dirs);
    if is_json {
        let value = serde_json::json!({
            "folders": dirs,
            "models": models,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    let folders: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    println!(
        "Models folders: {}",
        if folders.is_empty() {
            "none (no home folder)".into()
        } else {
            folders.join(", ")
        }
    );
    println!("  builtin  Built-in (DSP)  vocals, drums, bass, other  44100 Hz  always available");
    if models.is_empty() {
        println!("No .onnx models found. Put models in a folder above or pass --models-dir DIR.");
    }
    for model in &models {
        let family = model
            .family
            .map(|f| f.to_string())
            .unwrap_or_else(|| "?".into());
        let stems = if model.stems.is_empty() {
            "?".to_string()
        } else {
            model.stems.join(", ")
        };
        let hash = model.sha256.get(..12).unwrap_or("?");
        match &model.error {
            None => println!(
                "  {}  {family}  {stems}  {} Hz  sha256 {hash}…  ok",
                model.name, model.sample_rate_hz
            ),
            Some(error) => println!(
                "  {}  {family}  sha256 {hash}…  UNUSABLE: {error}",
                model.name
            ),
        }
    }
    Ok(())
}

/// A short name for a model in tables: `builtin` or the file name.
pub(crate) fn model_label(choice: &SeparatorChoice) -> String {
    match choice {
        SeparatorChoice::Builtin => "builtin".into(),
        SeparatorChoice::Model(path) => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string()),
    }
}

/// Writes the demo song and its true stems, separates it and prints the SDR table.
fn demo(output: &Path, duration_s: f32) -> Result<(), String> {
    let duration_s = duration_s.clamp(1.0, 600.0);
    println!("Generating the demo song ({duration_s:.0} s at {DEMO_SAMPLE_RATE_HZ} Hz)…");
    let song = DemoSong::generate(DEMO_SAMPLE_RATE_HZ, duration_s);
    let mix = song.mix();
    let truth_folder = output.join("truth");
    std::fs::create_dir_all(&truth_folder)
        .map_err(|e| format!("cannot create {}: {e}", truth_folder.display()))?;
    let song_path = output.join("demo-song.wav");
    write_wav(&song_path, DEMO_SAMPLE_RATE_HZ, &mix).map_err(|e| e.to_string())?;
    for (stem, truth) in Stem::FOUR.into_iter().zip(song.stems()) {
        write_wav(
            &truth_folder.join(format!("{}.wav", stem.file_name())),
            DEMO_SAMPLE_RATE_HZ,
            truth,
        )
        .map_err(|e| e.to_string())?;
    }
    println!(
        "Wrote {} and the true stems in {}",
        song_path.display(),
        truth_folder.display()
    );

    let options = SeparateOptions {
        separator: SeparatorChoice::Builtin,
        device: DeviceChoice::Auto,
        is_strict_device: false,
        stems: Stem::FOUR.to_vec(),
        extra_stems: ExtraStems::IntoOther,
        format: OutputFormat::Wav,
        bit_depth: Some(BitDepth::Float32),
        progress: ProgressMode::detect(false),
    };
    if separate::separate_all(std::slice::from_ref(&song_path), output, &options)? > 0 {
        return Err("the demo song could not be separated".into());
    }
    let folder = output.join("demo-song");
    let estimate = read_stems(&folder)?;
    println!();
    println!("{}", sdr_table(&song, &estimate));
    println!("Listen to the stems in {}", folder.display());
    Ok(())
}

/// The four stems of the demo, in [`Stem::FOUR`] order.
fn read_stems(folder: &Path) -> Result<Vec<[Vec<f32>; 2]>, String> {
    Stem::FOUR
        .iter()
        .map(|stem| {
            read_wav(&folder.join(format!("{}.wav", stem.file_name())))
                .map(|a| a.channels)
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// SDR of each estimated stem against the truth, next to the trivial baselines.
fn sdr_table(song: &DemoSong, estimate: &[[Vec<f32>; 2]]) -> String {
    let mix = song.mix();
    let quarter: [Vec<f32>; 2] = [
        mix[0].iter().map(|x| x * 0.25).collect(),
        mix[1].iter().map(|x| x * 0.25).collect(),
    ];
    let silence: [Vec<f32>; 2] = [vec![0.0; mix[0].len()], vec![0.0; mix[1].len()]];
    let mut table = String::from("SDR (dB)   Stemflow built-in   input/4   silence\n");
    for ((stem, truth), estimate) in Stem::FOUR.into_iter().zip(song.stems()).zip(estimate) {
        table.push_str(&format!(
            "{:<10} {:>17.2} {:>9.2} {:>9.2}\n",
            stem.display_name(),
            sdr_db(truth, estimate),
            sdr_db(truth, &quarter),
            sdr_db(truth, &silence),
        ));
    }
    table
}

/// `stemflow devices`: the runtime's state, every device and Auto's pick.
fn list_devices(is_json: bool) -> Result<(), String> {
    let runtime = runtime();
    let devices = devices();
    let auto = auto_device(devices);
    if is_json {
        let value = serde_json::json!({
            "runtime": match runtime {
                Ok(r) => serde_json::json!({
                    "loaded": true,
                    "version": r.version(),
                    "library": r.library_path(),
                    "source": r.source().to_string(),
                }),
                Err(e) => serde_json::json!({ "loaded": false, "error": e.to_string() }),
            },
            "auto": auto.to_string(),
            "devices": devices,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    match runtime {
        Ok(r) => println!(
            "ONNX Runtime {} from {} ({})",
            r.version(),
            r.library_path().display(),
            r.source()
        ),
        Err(e) => println!("{e}"),
    }
    println!();
    println!("{:<12} {:<40} {:<10} STATUS", "ID", "NAME", "PROVIDER");
    for device in devices {
        let status = match &device.status {
            DeviceStatus::Usable => "usable".to_owned(),
            DeviceStatus::Unusable(reason) => format!("unusable: {reason}"),
        };
        println!(
            "{:<12} {:<40} {:<10} {status}",
            device.id.to_string(),
            device.name,
            device.provider.prefix()
        );
    }
    println!();
    println!("Auto picks: {auto}");
    Ok(())
}
