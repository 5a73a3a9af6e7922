//! Many instances in one process: `cargo xtask soak` (release build) hosts N instances of the
//! plugin, each on its own thread, and renders M minutes of offline audio through each in
//! 512-frame blocks. Checked as it goes: every output sample finite, the stems of every block sum
//! to the input delayed by the latency, the main output equals the sum, and every instance's
//! output is bit-identical to the others' (a hash per minute). Reported: the process's resident
//! memory after each minute, per instance, and its growth from minute 2 to the last.
//!
//! Usage: `soak [INSTANCES] [MINUTES]` (defaults 16 and 10); the plugin is `$STEMFLOW_TEST_CLAP`.

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant;

use stemflow_host_tests::checks::{RECONSTRUCTION_TOLERANCE, ROUNDING_TOLERANCE};
use stemflow_host_tests::raw_host::RawPlugin;
use stemflow_host_tests::{ALL_STEMS, PLUGIN_ID};
use stemflow_kit::demo_song::DemoSong;

const SAMPLE_RATE_HZ: u32 = 44_100;
const BLOCK_FRAMES: usize = 512;
/// The input loops this much of the demo song.
const LOOP_SECONDS: f32 = 30.0;
/// Allowed resident-memory growth from minute 2 to the last.
const MAX_GROWTH: f64 = 0.01;

/// One instance's report for one minute of audio.
struct MinuteReport {
    instance: usize,
    minute: usize,
    /// FNV-1a over the output bits of the minute.
    hash: u64,
    /// Largest |Σ stems − delayed input| and |main − Σ stems| in the minute.
    reconstruction_error: f32,
    main_error: f32,
}

fn fnv1a(hash: &mut u64, value: f32) {
    for byte in value.to_bits().to_le_bytes() {
        *hash ^= u64::from(byte);
        *hash = hash.wrapping_mul(0x100_0000_01b3);
    }
}

/// Renders `minutes` of the looped song through one instance, reporting each minute.
fn run_instance(
    instance: usize,
    minutes: usize,
    song: &[Vec<f32>],
    reports: mpsc::Sender<MinuteReport>,
) -> Result<(), String> {
    let mut plugin = RawPlugin::create(PLUGIN_ID);
    plugin.set_offline(true);
    plugin.activate(f64::from(SAMPLE_RATE_HZ), BLOCK_FRAMES as u32);
    let latency = plugin.latency_samples() as usize;
    let period = song[0].len();
    let num_ports = 1 + ALL_STEMS.len();
    let mut input = vec![vec![0.0f32; BLOCK_FRAMES]; 2];
    let mut outputs = vec![vec![vec![0.0f32; BLOCK_FRAMES]; 2]; num_ports];
    let frames_per_minute = 60 * SAMPLE_RATE_HZ as usize;
    let total_frames = minutes * frames_per_minute;
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    let (mut reconstruction_error, mut main_error) = (0.0f32, 0.0f32);
    let mut frame = 0;
    while frame < total_frames {
        // Blocks end on minute boundaries, so each minute's report covers exactly its frames.
        let to_minute_end = frames_per_minute - frame % frames_per_minute;
        let len = BLOCK_FRAMES.min(to_minute_end);
        for (c, channel) in input.iter_mut().enumerate() {
            for (i, x) in channel[..len].iter_mut().enumerate() {
                *x = song[c][(frame + i) % period];
            }
        }
        let mut input_pointers: Vec<*mut f32> = input.iter_mut().map(|c| c.as_mut_ptr()).collect();
        let mut output_pointers: Vec<Option<Vec<*mut f32>>> = outputs
            .iter_mut()
            .map(|port| Some(port.iter_mut().map(|c| c.as_mut_ptr()).collect()))
            .collect();
        // SAFETY: every pointer addresses a live buffer of BLOCK_FRAMES ≥ len samples, and
        // none aliases another.
        unsafe { plugin.process(len as u32, &mut input_pointers, &mut output_pointers) };
        for c in 0..2 {
            for i in 0..len {
                let t = frame + i;
                let stems: f32 = (1..num_ports).map(|p| outputs[p][c][i]).sum();
                let main = outputs[0][c][i];
                if !main.is_finite() || !stems.is_finite() {
                    return Err(format!(
                        "instance {instance}: non-finite output at frame {t}"
                    ));
                }
                let expected = if t >= latency {
                    song[c][(t - latency) % period]
                } else {
                    0.0
                };
                reconstruction_error = reconstruction_error.max((stems - expected).abs());
                main_error = main_error.max((main - stems).abs());
                for port in &outputs {
                    fnv1a(&mut hash, port[c][i]);
                }
            }
        }
        frame += len;
        if frame % frames_per_minute == 0 {
            let report = MinuteReport {
                instance,
                minute: frame / frames_per_minute,
                hash,
                reconstruction_error,
                main_error,
            };
            if reports.send(report).is_err() {
                return Err("the reporter went away".into());
            }
            hash = 0xcbf2_9ce4_8422_2325;
            reconstruction_error = 0.0;
            main_error = 0.0;
        }
    }
    Ok(())
}

/// The process's resident memory in bytes (Linux), `None` elsewhere.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let instances: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(16);
    let minutes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    if instances == 0 || minutes < 2 {
        eprintln!("usage: soak [INSTANCES ≥ 1] [MINUTES ≥ 2]");
        return ExitCode::from(2);
    }
    let song: Vec<Vec<f32>> = DemoSong::generate(SAMPLE_RATE_HZ, LOOP_SECONDS)
        .mix()
        .to_vec();
    let baseline = resident_bytes().unwrap_or(0);
    println!(
        "soak: {instances} instances × {minutes} min offline at {SAMPLE_RATE_HZ} Hz, blocks of \
         {BLOCK_FRAMES}; baseline RSS {:.1} MiB",
        mib(baseline)
    );
    let started = Instant::now();
    let (sender, receiver) = mpsc::channel();
    let mut failures = Vec::new();
    let mut rss_after_minute = vec![0u64; minutes + 1];
    let mut hashes = vec![Vec::new(); minutes + 1];
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..instances)
            .map(|instance| {
                let sender = sender.clone();
                let song = &song;
                scope.spawn(move || run_instance(instance, minutes, song, sender))
            })
            .collect();
        drop(sender);
        for report in receiver {
            let minute = report.minute;
            if report.reconstruction_error > RECONSTRUCTION_TOLERANCE
                || report.main_error > ROUNDING_TOLERANCE
            {
                failures.push(format!(
                    "instance {} minute {minute}: Σ stems vs input {:e}, main vs Σ stems {:e}",
                    report.instance, report.reconstruction_error, report.main_error
                ));
            }
            hashes[minute].push((report.instance, report.hash));
            if hashes[minute].len() == instances {
                let rss = resident_bytes().unwrap_or(0);
                rss_after_minute[minute] = rss;
                let distinct: std::collections::BTreeSet<u64> =
                    hashes[minute].iter().map(|(_, h)| *h).collect();
                if distinct.len() != 1 {
                    failures.push(format!(
                        "minute {minute}: instances differ ({} distinct outputs)",
                        distinct.len()
                    ));
                }
                println!(
                    "minute {minute:>2}: RSS {:>8.1} MiB, {:>6.1} MiB per instance, {:.0} s elapsed",
                    mib(rss),
                    mib(rss.saturating_sub(baseline)) / instances as f64,
                    started.elapsed().as_secs_f64()
                );
            }
        }
        for (instance, worker) in workers.into_iter().enumerate() {
            match worker.join() {
                Ok(Ok(())) => {}
                Ok(Err(message)) => failures.push(message),
                Err(_) => failures.push(format!("instance {instance} panicked")),
            }
        }
    });
    let (early, late) = (rss_after_minute[2], rss_after_minute[minutes]);
    let growth = if early > 0 {
        (late as f64 - early as f64) / early as f64
    } else {
        f64::NAN
    };
    println!(
        "RSS growth minute 2 → {minutes}: {:+.2} % ({:.1} → {:.1} MiB; limit {:.0} %); {:.0} s in all",
        growth * 100.0,
        mib(early),
        mib(late),
        MAX_GROWTH * 100.0,
        started.elapsed().as_secs_f64()
    );
    if growth.is_nan() || growth >= MAX_GROWTH {
        failures.push(format!("memory grew {:+.2} %", growth * 100.0));
    }
    if failures.is_empty() {
        println!("soak passed: outputs exact and identical, no deadlock, memory flat");
        ExitCode::SUCCESS
    } else {
        for failure in &failures {
            eprintln!("soak FAILED: {failure}");
        }
        ExitCode::FAILURE
    }
}
