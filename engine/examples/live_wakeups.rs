//! How often a live stream's worker thread wakes up: runs the built-in separator as a plugin
//! would in a DAW playing (real-time mode, blocks of `BLOCK` frames at 48 kHz, one block every
//! block's duration) and prints, per second of audio, the worker's context switches (voluntary:
//! it slept and was woken; involuntary: it was preempted) and the blocks the audio side
//! processed, so a wake-up per block (or per idle poll) shows as a number.
//!
//! `cargo run --release -p stemflow-engine --example live_wakeups -- [BLOCK] [SECONDS] [silence]`
//! (`silence`: the track plays digital silence, as a track whose audio starts later; Linux:
//! reads `/proc/self/task/*/status`).

use std::time::{Duration, Instant};

use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};
use stemflow_engine::BuiltinSeparator;

const HOST_RATE_HZ: u32 = 48_000;

/// The context switches (voluntary, involuntary) of the thread named `name`.
fn context_switches(name: &str) -> Option<(u64, u64)> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        let field = |key: &str| {
            status
                .lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        };
        return Some((
            field("voluntary_ctxt_switches:")?,
            field("nonvoluntary_ctxt_switches:")?,
        ));
    }
    None
}

fn main() {
    let mut args = std::env::args().skip(1);
    let block_frames: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(64);
    let seconds: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5.0);
    let level = if args.next().as_deref() == Some("silence") {
        0.0
    } else {
        1.0
    };
    let config = StreamConfig {
        host_sample_rate_hz: HOST_RATE_HZ as f32,
        max_block_frames: block_frames,
        mode: ProcessingMode::Realtime,
        is_offline_only: false,
    };
    let (mut handle, controller) =
        spawn_stream(Box::new(BuiltinSeparator::new()), &config).expect("the stream starts");
    let block_duration = Duration::from_secs_f64(block_frames as f64 / f64::from(HOST_RATE_HZ));
    let num_blocks = (seconds * f64::from(HOST_RATE_HZ) / block_frames as f64) as usize;
    let (mut left, mut right) = (vec![0.0f32; block_frames], vec![0.0f32; block_frames]);
    // Let the worker settle, then count.
    std::thread::sleep(Duration::from_millis(200));
    let before = context_switches("stemflow-worker").expect("the worker thread is found");
    let start = Instant::now();
    let mut phase = 0.0f32;
    for block in 0..num_blocks {
        for (l, r) in left.iter_mut().zip(right.iter_mut()) {
            *l = (phase * 0.0575).sin() * 0.3 * level;
            *r = (phase * 0.0311).sin() * 0.2 * level;
            phase += 1.0;
        }
        handle.process(&left, &right);
        // One block per block's duration, as a DAW's audio callback comes.
        let due = start + block_duration * (block as u32 + 1);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let elapsed_s = start.elapsed().as_secs_f64();
    let after = context_switches("stemflow-worker").expect("the worker thread is found");
    let underruns = controller.stats().underrun_frames();
    println!(
        "block {block_frames} frames at {HOST_RATE_HZ} Hz, {}, {elapsed_s:.1} s: {:.0} blocks/s; worker wake-ups {:.0}/s (voluntary), preemptions {:.0}/s; underrun frames {underruns}",
        if level == 0.0 { "silence" } else { "signal" },
        num_blocks as f64 / elapsed_s,
        (after.0 - before.0) as f64 / elapsed_s,
        (after.1 - before.1) as f64 / elapsed_s,
    );
}
