//! `stemflow bench`: speed and memory of every requested model on every requested device.
//!
//! Per row (model × device):
//! - per-run inference time: the separator's hops over the test signal and then over its
//!   latency's silence (the flush that brings the last frames out, which the whole path makes
//!   too, so both make the same model runs), timed alone at the separator's own rate (min /
//!   median / max) — of a model, only the hops that ran it (a model separator streams in hops
//!   shorter than the model's chunk, and most hops only stitch); of a DSP separator, every hop;
//! - pure inference time: the sum of every hop's time;
//! - total time: the same signal through the whole offline path, as the plugin renders offline
//!   (`stemflow separate --mode stream`, through [`WholeFileSeparator`]: resampling, the stream
//!   and its worker thread, the residual), less the bench's own copy of the stems it keeps for
//!   scoring (`stemflow separate` hands them to its encoders instead; the copy was 2–3 % of the
//!   built-in separator's whole path);
//! - real-time factor: total time over audio time (below 1 is faster than real time);
//! - overhead: total time over pure inference time;
//! - a separator whose round (the two measurements above) takes a fraction of a second, as the
//!   built-in's does, is measured [`WARM_ROUNDS`] rounds more after a first, warm-up round, and
//!   its row holds the median of each time; a model is measured once;
//! - runs: how many times the whole path ran the model (0 for DSP separators), to show that it
//!   makes no run the reference pipelines don't;
//! - peak RSS of the process during the row (the peak is reset before each row on Linux; it
//!   includes the whole path's stems, kept for scoring: 32 bytes per frame);
//! - SDR per stem of the whole path's output against the demo song's own stems.
//!
//! Rows of a model `NAME` and its int8 or float16 version `NAME.int8`, `NAME.fp16` (as `stemflow
//! quantize [--fp16]` names them) on
//! the same device are compared after the table ([`variant_comparison`]).

mod hop_timing;
mod instances;
mod look_ahead_curve;
mod variant_comparison;

use std::time::Instant;

use clap::Args;
use stemflow_engine::models_dirs;
use stemflow_engine::runtime::{auto_device, devices, DeviceChoice, DeviceId};
use stemflow_engine::whole_file::{SeparationMode, WholeFileOptions, WholeFileSeparator};
use stemflow_engine::{
    EngineError, LookAhead, ModelSpec, SeparatorChoice, Stem, StemFrames, StereoInput,
};
use stemflow_kit::demo_song::DemoSong;
use stemflow_kit::metrics::sdr_db;

use crate::error::CliError;
use crate::memory::{describe_bytes, peak_rss_bytes, reset_peak_rss};
use hop_timing::run_hops;
use variant_comparison::{stem_values, StemAudio, Timed};

/// The host rate of the test signal fed through the whole path.
const BENCH_HOST_RATE_HZ: u32 = 44_100;

pub const BENCH_EXAMPLES: &str = "\
Examples:
  stemflow bench
  stemflow bench --seconds 60 --json
  stemflow bench --model builtin,models/htdemucs.onnx --device cpu,cuda:0
  stemflow bench --look-ahead-curve --model spleeter-2stems --plot curve.png
  stemflow bench --instances 4 --model htdemucs --device cuda:0 --seconds 30

For each model × device: the time of one model run (min/median/max), the real-time factor of the
whole offline path (processing time / audio time; lower is faster), the overhead (whole path /
pure inference time), the model runs of the whole path and the process's peak RSS (Linux; n/a elsewhere). By default models run
on the CPU and, if there is one, on the GPU Auto picks, side by side.";

/// `stemflow bench`'s arguments.
#[derive(Args)]
pub struct BenchArgs {
    /// Seconds of test audio (the synthetic demo song) to separate.
    #[arg(long, alias = "duration-s", default_value_t = 20.0, value_name = "N", value_parser = crate::values::seconds)]
    pub seconds: f32,
    /// Models to time (repeat or comma-separate): `builtin` or ONNX model files.
    #[arg(long, value_name = "NAME|PATH", value_delimiter = ',')]
    pub model: Vec<String>,
    /// Devices to time models on (repeat or comma-separate); default: cpu and Auto's pick.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub device: Vec<String>,
    /// Machine-readable output.
    #[arg(long, conflicts_with = "look_ahead_curve")]
    pub json: bool,
    /// Instead of timing: SDR per stem against latency at every Look-ahead setting, with the
    /// real-time factor at each, on the demo song (the built-in separator is one point).
    #[arg(long, alias = "lookahead-curve")]
    pub look_ahead_curve: bool,
    /// With --look-ahead-curve: also draw the curve into this PNG file.
    #[arg(long, value_name = "FILE.png", requires = "look_ahead_curve")]
    pub plot: Option<std::path::PathBuf>,
    /// Turn TF32 off on CUDA: float32 matrix products and convolutions in full float32 (slower
    /// on Ampere and newer GPUs). Same as STEMFLOW_CUDA_TF32=0.
    #[arg(long)]
    pub no_tf32: bool,
    /// Instead: 1 and N instances of one model on one device in this process, sharing one
    /// session as plugin instances do: memory, runs per second and each run's wait.
    #[arg(long, value_name = "N", conflicts_with = "look_ahead_curve")]
    pub instances: Option<usize>,
}

/// Runs `stemflow bench`.
pub fn run(args: BenchArgs) -> Result<(), CliError> {
    crate::devices::no_tf32_flag(args.no_tf32);
    if args.look_ahead_curve {
        let device = match args.device.as_slice() {
            [] => DeviceChoice::Device(DeviceId::CPU),
            [one] => one.parse::<DeviceChoice>().map_err(CliError::Failed)?,
            _ => {
                return Err(CliError::Usage(
                    "--look-ahead-curve measures on one device".into(),
                ))
            }
        };
        return look_ahead_curve::look_ahead_curve(
            &args.model,
            device,
            args.seconds,
            args.plot.as_deref(),
        )
        .map_err(CliError::Failed);
    }
    if let Some(instances) = args.instances {
        let (model, device) = match (args.model.as_slice(), args.device.as_slice()) {
            ([model], []) => (model, DeviceChoice::Device(DeviceId::CPU)),
            ([model], [device]) => (model, device.parse().map_err(CliError::Failed)?),
            _ => {
                return Err(CliError::Usage(
                    "--instances measures one --model on one --device".into(),
                ))
            }
        };
        return instances::bench_instances(model, device, args.seconds, instances, args.json)
            .map_err(CliError::Failed);
    }
    bench(&BenchOptions {
        models: args.model,
        devices: args.device,
        seconds: args.seconds,
        is_json: args.json,
    })
    .map_err(CliError::Failed)
}

/// What to measure.
pub struct BenchOptions {
    /// `--model` values (`builtin`, paths); empty: `builtin`.
    pub models: Vec<String>,
    /// `--device` values; empty: `cpu`, plus Auto's pick when it is not the CPU.
    pub devices: Vec<String>,
    /// Seconds of test signal.
    pub seconds: f32,
    /// Print JSON instead of a table.
    pub is_json: bool,
}

/// One measured model × device.
struct Row {
    model: String,
    requested_device: String,
    result: Result<Measurement, String>,
}

struct Measurement {
    device: String,
    fallback: Option<String>,
    hop_frames: usize,
    separator_rate_hz: u32,
    /// The separator's hops over the test signal, and how many of them were timed (those that ran
    /// the model; every hop of a DSP separator).
    hops: usize,
    timed_hops: usize,
    run_ms_min: f64,
    run_ms_median: f64,
    run_ms_max: f64,
    inference_s: f64,
    total_s: f64,
    audio_s: f64,
    /// Model runs of the whole path (0 for DSP separators).
    model_runs: u64,
    /// Rounds the times are the median of (after a warm-up round when more than 1).
    rounds: usize,
    peak_rss_bytes: Option<u64>,
    /// SDR per stem against the demo song's own (`None`: the model leaves the stem silent).
    sdr_db: [Option<f64>; 4],
    /// The whole path's output.
    stems: StemAudio,
}

impl Measurement {
    fn real_time_factor(&self) -> f64 {
        self.total_s / self.audio_s
    }

    fn overhead(&self) -> f64 {
        self.total_s / self.inference_s.max(1e-12)
    }
}

/// Runs the benchmark and prints it. Errors: a usage problem (unknown model or device) before
/// anything runs, or one or more rows that failed (the others are still printed).
pub fn bench(options: &BenchOptions) -> Result<(), String> {
    let seconds = options.seconds.clamp(1.0, 600.0);
    let model_args = if options.models.is_empty() {
        vec!["builtin".to_owned()]
    } else {
        options.models.clone()
    };
    let models: Vec<(String, SeparatorChoice)> = model_args
        .iter()
        .map(|arg| {
            SeparatorChoice::resolve(arg, &models_dirs(&[]))
                .map(|choice| (choice.label(), choice))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    let mut choices: Vec<DeviceChoice> = options
        .devices
        .iter()
        .map(|id| id.parse::<DeviceChoice>())
        .collect::<Result<_, _>>()?;
    if choices.is_empty() {
        choices.push(DeviceChoice::Device(DeviceId::CPU));
        if models.iter().any(|(_, m)| *m != SeparatorChoice::Builtin) {
            let auto = auto_device(devices());
            if auto != DeviceId::CPU {
                choices.push(DeviceChoice::Device(auto));
            }
        }
    }

    let song = DemoSong::generate(BENCH_HOST_RATE_HZ, seconds);
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for (label, model) in &models {
        for &choice in &choices {
            let is_cpu = matches!(choice, DeviceChoice::Auto)
                || choice == DeviceChoice::Device(DeviceId::CPU);
            if *model == SeparatorChoice::Builtin && !is_cpu {
                notes.push(format!(
                    "builtin × {}: skipped, the built-in separator runs on the CPU only",
                    choice.id()
                ));
                continue;
            }
            if !options.is_json {
                crate::output::say_err!("Measuring {label} on {}…", choice.id());
            }
            rows.push(Row {
                model: label.clone(),
                requested_device: choice.id(),
                result: measure(model, choice, &song, seconds),
            });
        }
    }

    let timed: Vec<Timed<'_>> = rows
        .iter()
        .filter_map(|row| {
            let m = row.result.as_ref().ok()?;
            Some(Timed {
                model: &row.model,
                requested_device: &row.requested_device,
                total_s: m.total_s,
                inference_s: m.inference_s,
                peak_rss_bytes: m.peak_rss_bytes,
                sdr_db: m.sdr_db,
                stems: &m.stems,
            })
        })
        .collect();
    let comparisons = variant_comparison::compare(&timed);
    if options.is_json {
        print_json(&rows, &comparisons, &notes, seconds)?;
    } else {
        print_table(&rows, &notes, seconds);
        variant_comparison::print_table(&comparisons);
    }
    let num_failed = rows.iter().filter(|r| r.result.is_err()).count();
    if num_failed > 0 {
        return Err(format!(
            "{num_failed} of {} measurements failed",
            rows.len()
        ));
    }
    Ok(())
}

/// A separator whose whole round (hops alone, then the whole path) takes a fraction of a second
/// is measured this many rounds more after the first, and its row holds the median of each:
/// its few milliseconds of stream start-up, first page touches and cold caches are then not
/// one cold round's noise (the built-in's single rounds scattered by ±2 %). A model's round
/// takes seconds: it is measured once.
const WARM_ROUNDS: usize = 5;
/// The most the warm rounds may take together (judged by the first round).
const WARM_ROUNDS_BUDGET_S: f64 = 3.0;

/// The separator's hops alone, timed one by one.
struct HopTimes {
    device: String,
    fallback: Option<String>,
    hop_frames: usize,
    separator_rate_hz: u32,
    /// Every hop's time.
    hop_ms: Vec<f64>,
    /// The times of the hops that ran the model (of a DSP separator: every hop).
    run_ms: Vec<f64>,
}

impl HopTimes {
    fn inference_s(&self) -> f64 {
        self.hop_ms.iter().sum::<f64>() / 1000.0
    }
}

fn measure(
    model: &SeparatorChoice,
    choice: DeviceChoice,
    song: &DemoSong,
    seconds: f32,
) -> Result<Measurement, String> {
    reset_peak_rss();
    let host_mix = &song.mix();
    // The stems are kept for scoring, which is the bench's business, not the path's: their
    // memory is written once before the clock starts, so its first-touch page faults (a tenth
    // of the built-in separator's whole path) are not timed.
    let mut stems = StemAudio::default();
    for channels in &mut stems {
        for channel in channels.iter_mut() {
            channel.resize(host_mix[0].len(), 0.0);
        }
    }
    let first_hops = time_hops(model, choice, host_mix, seconds)?;
    let (first_total_s, model_runs) = time_whole_path(model, choice, host_mix, &mut stems)?;
    let is_fast =
        (first_hops.inference_s() + first_total_s) * WARM_ROUNDS as f64 <= WARM_ROUNDS_BUDGET_S;
    let (hops, inference_s, total_s) = if is_fast {
        let mut rounds = Vec::with_capacity(WARM_ROUNDS);
        for _ in 0..WARM_ROUNDS {
            let hops = time_hops(model, choice, host_mix, seconds)?;
            let (total_s, _) = time_whole_path(model, choice, host_mix, &mut stems)?;
            rounds.push((hops, total_s));
        }
        let median = |mut values: Vec<f64>| {
            values.sort_by(f64::total_cmp);
            values[values.len() / 2]
        };
        let inference_s = median(rounds.iter().map(|(h, _)| h.inference_s()).collect());
        let total_s = median(rounds.iter().map(|(_, t)| *t).collect());
        let mut hops = rounds.swap_remove(0).0;
        for (round, _) in rounds {
            hops.run_ms.extend(round.run_ms);
        }
        (hops, inference_s, total_s)
    } else {
        let inference_s = first_hops.inference_s();
        (first_hops, inference_s, first_total_s)
    };
    let rounds = if is_fast { WARM_ROUNDS } else { 1 };
    let mut run_ms = hops.run_ms;
    run_ms.sort_by(f64::total_cmp);
    let truth = song.stems();
    let sdr_db = std::array::from_fn(|i| {
        let is_silent = stems[i].iter().flatten().all(|&x| x == 0.0);
        (!is_silent).then(|| sdr_db(truth[i], &stems[i]))
    });

    Ok(Measurement {
        device: hops.device,
        fallback: hops.fallback,
        hop_frames: hops.hop_frames,
        separator_rate_hz: hops.separator_rate_hz,
        hops: hops.hop_ms.len(),
        timed_hops: run_ms.len() / rounds,
        rounds,
        run_ms_min: run_ms[0],
        run_ms_median: run_ms[run_ms.len() / 2],
        run_ms_max: run_ms[run_ms.len() - 1],
        inference_s,
        total_s,
        audio_s: host_mix[0].len() as f64 / f64::from(BENCH_HOST_RATE_HZ),
        model_runs,
        peak_rss_bytes: peak_rss_bytes(),
        sdr_db,
        stems,
    })
}

/// Every hop alone, at the separator's rate: the signal, then silence until the separator has
/// brought out its last frame.
fn time_hops(
    model: &SeparatorChoice,
    choice: DeviceChoice,
    host_mix: &[Vec<f32>; 2],
    seconds: f32,
) -> Result<HopTimes, String> {
    let mut separator = model.build(choice).map_err(|e| e.to_string())?;
    let separator_rate_hz = separator.info().sample_rate_hz();
    let hop = separator.info().hop_frames();
    let other_rate_mix = (separator_rate_hz != BENCH_HOST_RATE_HZ)
        .then(|| DemoSong::generate(separator_rate_hz, seconds).mix());
    let mix = other_rate_mix.as_ref().unwrap_or(host_mix);
    let (hop_ms, mut run_ms) = run_hops(separator.as_mut(), mix)?;
    // Where the runs ran: read after them, since a device that fails in a run is replaced by
    // the CPU from that run on (the row then says so, instead of naming the device asked for).
    let active = separator.device();
    let device = active
        .as_ref()
        .map_or_else(|| "cpu".to_owned(), |a| a.actual.to_string());
    let fallback = active.and_then(|a| a.fallback_reason);
    // A DSP separator runs no model: each of its hops is a run.
    if run_ms.is_empty() {
        run_ms.clone_from(&hop_ms);
    }
    Ok(HopTimes {
        device,
        fallback,
        hop_frames: hop,
        separator_rate_hz,
        hop_ms,
        run_ms,
    })
}

/// The whole offline path at the host rate, as the plugin renders offline (`stemflow separate
/// --mode stream`), into `stems`. Returns its time (less the copy into `stems`) and its model
/// runs.
fn time_whole_path(
    model: &SeparatorChoice,
    choice: DeviceChoice,
    host_mix: &[Vec<f32>; 2],
    stems: &mut StemAudio,
) -> Result<(f64, u64), String> {
    let options = WholeFileOptions {
        device: choice,
        mode: SeparationMode::Stream(LookAhead::Full),
        ..WholeFileOptions::default()
    };
    let mut separator = WholeFileSeparator::load(&ModelSpec::One(model.clone()), &options)
        .map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut stream = separator
        .stream(BENCH_HOST_RATE_HZ)
        .map_err(|e| e.to_string())?;
    let mut scoring_copy_s = 0.0;
    let mut collect = |frames: StemFrames<'_>| -> Result<(), EngineError> {
        let copy_start = Instant::now();
        // The stream hands out exactly the input's frames, in order.
        let start = frames.first_frame() as usize;
        for (i, stem) in Stem::FOUR.into_iter().enumerate() {
            for (channel, samples) in stems[i].iter_mut().enumerate() {
                let source = frames.channel(stem, channel);
                let end = (start + source.len()).min(samples.len());
                samples[start.min(end)..end].copy_from_slice(&source[..end - start.min(end)]);
            }
        }
        scoring_copy_s += copy_start.elapsed().as_secs_f64();
        Ok(())
    };
    let input = StereoInput::planar(host_mix).map_err(|e| e.to_string())?;
    stream
        .push(input, &mut collect)
        .map_err(|e| e.to_string())?;
    stream.finish(&mut collect).map_err(|e| e.to_string())?;
    let total_s = start.elapsed().as_secs_f64() - scoring_copy_s;
    Ok((total_s, separator.model_runs()))
}

fn print_table(rows: &[Row], notes: &[String], seconds: f32) {
    crate::output::say!(
        "{seconds:.1} s of the demo song at {BENCH_HOST_RATE_HZ} Hz; RTF = processing time / audio time (lower is faster); overhead = whole path / pure inference; ms = one model run (one hop of a DSP separator); a separator whose round takes under {:.1} s: median of {WARM_ROUNDS} rounds after a warm-up",
        WARM_ROUNDS_BUDGET_S / WARM_ROUNDS as f64
    );
    crate::output::say!(
        "{:<24} {:<14} {:>13} {:>9} {:>10} {:>9} {:>8} {:>9} {:>9} {:>5} {:>9}",
        "MODEL",
        "DEVICE",
        "HOP",
        "MIN ms",
        "MEDIAN ms",
        "MAX ms",
        "RTF",
        "SPEED",
        "OVERHEAD",
        "RUNS",
        "PEAK RSS"
    );
    for row in rows {
        match &row.result {
            Ok(m) => crate::output::say!(
                "{:<24} {:<14} {:>13} {:>9.3} {:>10.3} {:>9.3} {:>8.4} {:>9} {:>8.2}x {:>5} {:>9}",
                row.model,
                if m.fallback.is_some() {
                    format!("{}→{}", row.requested_device, m.device)
                } else {
                    m.device.clone()
                },
                format!("{} @{}k", m.hop_frames, m.separator_rate_hz as f64 / 1000.0),
                m.run_ms_min,
                m.run_ms_median,
                m.run_ms_max,
                m.real_time_factor(),
                speed_column(m.real_time_factor()),
                m.overhead(),
                m.model_runs,
                describe_bytes(m.peak_rss_bytes),
            ),
            Err(e) => {
                crate::output::say!("{:<24} {:<10} error: {e}", row.model, row.requested_device)
            }
        }
    }
    for row in rows {
        if let Ok(Measurement {
            fallback: Some(reason),
            ..
        }) = &row.result
        {
            crate::output::say!(
                "note: {} asked for {}: {reason}",
                row.model,
                row.requested_device
            );
        }
    }
    for note in notes {
        crate::output::say!("note: {note}");
    }
}

fn print_json(
    rows: &[Row],
    comparisons: &[variant_comparison::Comparison],
    notes: &[String],
    seconds: f32,
) -> Result<(), String> {
    let rows: Vec<serde_json::Value> = rows
        .iter()
        .map(|row| match &row.result {
            Ok(m) => serde_json::json!({
                "model": row.model,
                "requested_device": row.requested_device,
                "device": m.device,
                "fallback_reason": m.fallback,
                "hop_frames": m.hop_frames,
                "separator_sample_rate_hz": m.separator_rate_hz,
                "hops": m.hops,
                "timed_hops": m.timed_hops,
                "rounds": m.rounds,
                "run_ms": {
                    "min": m.run_ms_min,
                    "median": m.run_ms_median,
                    "max": m.run_ms_max,
                },
                "inference_s": m.inference_s,
                "total_s": m.total_s,
                "audio_s": m.audio_s,
                "real_time_factor": m.real_time_factor(),
                "speed_x_real_time": 1.0 / m.real_time_factor().max(1e-12),
                "overhead": m.overhead(),
                "model_runs": m.model_runs,
                "peak_rss_bytes": m.peak_rss_bytes,
                "sdr_db": stem_values(&m.sdr_db),
            }),
            Err(e) => serde_json::json!({
                "model": row.model,
                "requested_device": row.requested_device,
                "error": e,
            }),
        })
        .collect();
    let value = serde_json::json!({
        "seconds": seconds,
        "host_sample_rate_hz": BENCH_HOST_RATE_HZ,
        "rows": rows,
        "variant_comparisons": comparisons.iter().map(variant_comparison::Comparison::to_json).collect::<Vec<_>>(),
        "notes": notes,
    });
    crate::output::say!(
        "{}",
        serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Times real time for the SPEED column: one decimal, or three below 0.1 (a RoFormer on a CPU
/// runs at 0.03x, which one decimal shows as 0.0x).
fn speed_column(real_time_factor: f64) -> String {
    let speed = 1.0 / real_time_factor.max(1e-12);
    if speed >= 0.1 {
        format!("{speed:.1}x")
    } else {
        format!("{speed:.3}x")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_column_never_shows_zero_for_a_slow_model() {
        assert_eq!(speed_column(0.25), "4.0x");
        assert_eq!(speed_column(31.61), "0.032x");
    }
}
