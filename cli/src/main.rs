//! `stemflow`: the command-line tool over Stemflow's engine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use stemflow_engine::builtin::BuiltinSeparator;
use stemflow_engine::demo_song::{DemoSong, DEMO_DURATION_S, DEMO_SAMPLE_RATE_HZ};
use stemflow_engine::metrics::sdr_db;
use stemflow_engine::offline::{separate_with_progress, SeparatedStems};
use stemflow_engine::separator::{PlanarBlock, Separator, SeparatorChoice, SEPARATED_CHANNELS};
use stemflow_engine::runtime::devices::{auto_device, devices, DeviceChoice, DeviceId, DeviceStatus};
use stemflow_engine::runtime::runtime;
use stemflow_engine::wav::{read_wav, write_wav};
use stemflow_engine::Stem;

#[derive(Parser)]
#[command(
    name = "stemflow",
    version,
    about = "Split audio into vocals, drums, bass and other"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Separate a WAV file into DIR/<name>/{vocals,drums,bass,other}.wav (32-bit float, aligned).
    Separate {
        /// The mono or stereo WAV file to separate.
        input: PathBuf,
        /// Output folder; the stems go into a subfolder named after the input file.
        #[arg(short, long, default_value = "stemflow-output")]
        output: PathBuf,
        /// Separator: `builtin` (the embedded DSP separator).
        #[arg(long, default_value = "builtin")]
        separator: String,
        /// An ONNX model file to separate with instead of the built-in separator.
        #[arg(long, value_name = "PATH")]
        model: Option<PathBuf>,
        /// Device for models: auto, cpu, cuda:N, directml:N, migraphx:N or coreml.
        #[arg(long, default_value = "auto", value_name = "ID")]
        device: String,
        /// Fail instead of falling back to the CPU when the device cannot run the model.
        #[arg(long)]
        strict_device: bool,
        /// Print nothing but errors.
        #[arg(short, long)]
        quiet: bool,
    },
    /// Generate the synthetic demo song, separate it and report each stem's SDR.
    Demo {
        /// Output folder.
        #[arg(short, long, default_value = "stemflow-demo")]
        output: PathBuf,
        /// Song length in seconds.
        #[arg(long, default_value_t = DEMO_DURATION_S)]
        duration_s: f32,
    },
    /// List the devices ONNX Runtime can use, and which one Auto picks.
    Devices {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Measure the built-in separator's speed on one core, or a model's on each device.
    Bench {
        /// Seconds of audio to separate.
        #[arg(long, default_value_t = 20.0)]
        duration_s: f32,
        /// An ONNX model to time instead of the built-in separator.
        #[arg(long, value_name = "PATH")]
        model: Option<PathBuf>,
        /// Devices to time the model on (repeat or comma-separate); default: cpu and Auto's pick.
        #[arg(long, value_name = "ID", value_delimiter = ',')]
        device: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Separate {
            input,
            output,
            separator,
            model,
            device,
            strict_device,
            quiet,
        } => {
            let separator = match model {
                Some(path) => SeparatorChoice::Model(path),
                None => match SeparatorChoice::from_id(&separator) {
                    Some(choice) => choice,
                    None => {
                        eprintln!("stemflow: error: unknown separator '{separator}' (use builtin or --model PATH)");
                        return ExitCode::from(2);
                    }
                },
            };
            let device = match device.parse::<DeviceChoice>() {
                Ok(device) => device,
                Err(e) => {
                    eprintln!("stemflow: error: {e}");
                    return ExitCode::from(2);
                }
            };
            let options = SeparateOptions {
                separator,
                device,
                is_strict_device: strict_device,
                is_quiet: quiet,
            };
            separate_file(&input, &output, &options).map(|_| ())
        }
        Command::Devices { json } => list_devices(json),
        Command::Demo { output, duration_s } => demo(&output, duration_s),
        Command::Bench {
            duration_s,
            model: Some(model),
            device,
        } => bench_model(&model, &device, duration_s),
        Command::Bench { duration_s, .. } => bench(duration_s),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("stemflow: error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// How to separate.
struct SeparateOptions {
    separator: SeparatorChoice,
    device: DeviceChoice,
    is_strict_device: bool,
    is_quiet: bool,
}

/// Builds the separator and reports (or, when strict, refuses) a device fallback.
fn build_separator(options: &SeparateOptions) -> Result<Box<dyn Separator>, String> {
    let separator = options.separator.build(options.device)?;
    match separator.active_device() {
        Some(active) => {
            if let Some(reason) = &active.fallback_reason {
                if options.is_strict_device {
                    return Err(format!(
                        "device {} cannot run the model ({reason}); --strict-device forbids the fallback",
                        active.requested.id()
                    ));
                }
                eprintln!("stemflow: warning: {reason}");
            }
            if !options.is_quiet {
                println!("Running {} on {}", separator.name(), active.actual);
            }
        }
        None if options.device != DeviceChoice::Auto
            && options.device != DeviceChoice::Device(DeviceId::CPU) =>
        {
            let message = format!(
                "the built-in separator runs on the CPU, not on {}",
                options.device.id()
            );
            if options.is_strict_device {
                return Err(message);
            }
            eprintln!("stemflow: warning: {message}");
        }
        None => {}
    }
    Ok(separator)
}

/// Separates `input` into `output/<stem of input>/`. Returns the folder written.
fn separate_file(input: &Path, output: &Path, options: &SeparateOptions) -> Result<PathBuf, String> {
    let is_quiet = options.is_quiet;
    let separator = build_separator(options)?;
    let audio = read_wav(input).map_err(|e| e.to_string())?;
    stemflow_engine::validate_sample_rate(audio.sample_rate_hz as f32)
        .map_err(|e| e.to_string())?;
    let name = input
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "input".into());
    let folder = output.join(&name);
    std::fs::create_dir_all(&folder)
        .map_err(|e| format!("cannot create {}: {e}", folder.display()))?;

    let start = Instant::now();
    let stems = separate_with_progress(
        separator,
        &audio.channels,
        audio.sample_rate_hz,
        |_| {},
    )
    .map_err(|e| e.to_string())?;
    let elapsed_s = start.elapsed().as_secs_f64();
    write_stems(&folder, &stems)?;
    if !is_quiet {
        let duration_s = audio.channels[0].len() as f64 / audio.sample_rate_hz as f64;
        println!(
            "Separated {} ({:.1} s, {} Hz, {}) in {:.2} s ({:.0}x real time) into {}",
            input.display(),
            duration_s,
            audio.sample_rate_hz,
            if audio.source_channels == 1 {
                "mono"
            } else {
                "stereo"
            },
            elapsed_s,
            duration_s / elapsed_s.max(1e-9),
            folder.display()
        );
        for stem in Stem::ALL {
            println!(
                "  {}",
                folder.join(format!("{}.wav", stem.file_name())).display()
            );
        }
    }
    Ok(folder)
}

fn write_stems(folder: &Path, stems: &SeparatedStems) -> Result<(), String> {
    for stem in Stem::ALL {
        let path = folder.join(format!("{}.wav", stem.file_name()));
        write_wav(&path, stems.sample_rate_hz, stems.stem(stem)).map_err(|e| e.to_string())?;
    }
    Ok(())
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
    for (stem, truth) in Stem::ALL.into_iter().zip(song.stems()) {
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
        is_quiet: false,
    };
    let folder = separate_file(&song_path, output, &options)?;
    let estimate = read_stems(&folder)?;
    println!();
    println!("{}", sdr_table(&song, &estimate));
    println!("Listen to the stems in {}", folder.display());
    Ok(())
}

fn read_stems(folder: &Path) -> Result<Vec<[Vec<f32>; 2]>, String> {
    Stem::ALL
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
    for (stem, truth) in Stem::ALL.into_iter().zip(song.stems()) {
        table.push_str(&format!(
            "{:<10} {:>17.2} {:>9.2} {:>9.2}\n",
            stem.display_name(),
            sdr_db(truth, &estimate[stem.index()]),
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
        println!("{}", serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?);
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

/// Times a model's inference per segment on each device, and the whole offline path.
fn bench_model(model: &Path, device_ids: &[String], duration_s: f32) -> Result<(), String> {
    let mut choices: Vec<DeviceChoice> = device_ids
        .iter()
        .map(|id| id.parse::<DeviceChoice>())
        .collect::<Result<_, _>>()?;
    if choices.is_empty() {
        choices.push(DeviceChoice::Device(DeviceId::CPU));
        let auto = auto_device(devices());
        if auto != DeviceId::CPU {
            choices.push(DeviceChoice::Device(auto));
        }
    }
    let song = DemoSong::generate(DEMO_SAMPLE_RATE_HZ, duration_s.clamp(1.0, 600.0));
    let mix = song.mix();
    println!(
        "{:<10} {:>10} {:>12} {:>12} {:>12} {:>14} {:>10}",
        "DEVICE", "SEGMENT", "MIN ms", "MEDIAN ms", "MAX ms", "REAL TIME", "OVERHEAD"
    );
    for choice in choices {
        let mut separator = SeparatorChoice::Model(model.to_path_buf()).build(choice)?;
        let active = separator.active_device().ok_or("not a model")?;
        if let Some(reason) = &active.fallback_reason {
            eprintln!("stemflow: warning: {reason}");
        }
        let hop = separator.hop_frames();
        let mut input = PlanarBlock::new(2, hop);
        let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
        let mut times_ms = Vec::new();
        let num_hops = (mix[0].len() / hop).max(1);
        for index in 0..num_hops.max(3) {
            let start = (index % num_hops) * hop;
            for channel in 0..2 {
                let source = &mix[channel][start..(start + hop).min(mix[channel].len())];
                input.channel_mut(channel)[..source.len()].copy_from_slice(source);
            }
            let t = Instant::now();
            separator.process_hop(&input, &mut stems);
            times_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times_ms.sort_by(f64::total_cmp);
        let median_ms = times_ms[times_ms.len() / 2];
        let segment_s = hop as f64 / separator.sample_rate_hz() as f64;

        // The whole offline path (resampling, streaming, residual) on the same device.
        let separator = SeparatorChoice::Model(model.to_path_buf()).build(choice)?;
        let start = Instant::now();
        stemflow_engine::offline::separate(separator, &mix, DEMO_SAMPLE_RATE_HZ).map_err(|e| e.to_string())?;
        let total_s = start.elapsed().as_secs_f64();
        let audio_s = mix[0].len() as f64 / DEMO_SAMPLE_RATE_HZ as f64;
        let inference_s = median_ms / 1000.0 * (audio_s / segment_s).ceil();
        println!(
            "{:<10} {:>9.2}s {:>12.2} {:>12.2} {:>12.2} {:>13.1}x {:>9.2}x",
            active.actual.to_string(),
            segment_s,
            times_ms[0],
            median_ms,
            times_ms[times_ms.len() - 1],
            audio_s / total_s,
            total_s / inference_s.max(1e-9),
        );
    }
    Ok(())
}

/// Times the built-in separator alone (one thread, no resampling) and the whole offline path.
fn bench(duration_s: f32) -> Result<(), String> {
    let duration_s = duration_s.clamp(1.0, 600.0);
    let song = DemoSong::generate(DEMO_SAMPLE_RATE_HZ, duration_s);
    let mix = song.mix();

    let mut separator = BuiltinSeparator::new();
    let hop = separator.hop_frames();
    let mut input = PlanarBlock::new(2, hop);
    let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, hop);
    let start = Instant::now();
    let mut num_frames = 0;
    for (left, right) in mix[0].chunks_exact(hop).zip(mix[1].chunks_exact(hop)) {
        input.channel_mut(0).copy_from_slice(left);
        input.channel_mut(1).copy_from_slice(right);
        separator.process_hop(&input, &mut stems);
        num_frames += hop;
    }
    let separator_s = start.elapsed().as_secs_f64();
    let audio_s = num_frames as f64 / DEMO_SAMPLE_RATE_HZ as f64;
    println!(
        "built-in separator: {audio_s:.1} s of audio in {separator_s:.3} s = {:.0}x real time (one core)",
        audio_s / separator_s
    );

    for rate_hz in [44_100u32, 48_000] {
        let song = DemoSong::generate(rate_hz, duration_s);
        let start = Instant::now();
        let result = stemflow_engine::offline::separate(
            Box::new(BuiltinSeparator::new()),
            &song.mix(),
            rate_hz,
        )
        .map_err(|e| e.to_string())?;
        let elapsed_s = start.elapsed().as_secs_f64();
        println!(
            "offline stream at {rate_hz} Hz (resampling {}): {:.0}x real time, latency {} samples ({:.1} ms)",
            if rate_hz == DEMO_SAMPLE_RATE_HZ { "off" } else { "on" },
            duration_s as f64 / elapsed_s,
            result.latency_samples,
            result.latency_samples as f64 * 1000.0 / rate_hz as f64
        );
    }
    Ok(())
}
