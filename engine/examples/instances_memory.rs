//! What each further plugin instance with the same model costs in memory (issue 17's goal:
//! < 50 MB): loads the model as N instances would, each with its own separator and stream, and
//! prints the process's resident memory after each, and what the allocator has handed out
//! (resident memory alone hides a new instance that reuses pages an earlier one freed).
//!
//! `cargo run --release -p stemflow-engine --example instances_memory -- MODEL.onnx [N]`
//! (needs `STEMFLOW_ORT_LIB` or an installed runtime; Linux, reads `/proc/self/status`).

use std::path::PathBuf;

use stemflow_engine::families::ModelSeparator;
use stemflow_engine::runtime::{DeviceChoice, DeviceId};
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};

/// The process's resident set in MB (`VmRSS`), and its peak (`VmHWM`).
fn resident_mb() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Bytes the allocator has handed out and not had back, in MB (glibc's `mallinfo2`: arena
/// blocks in use plus mmapped blocks); NaN elsewhere.
fn allocated_mb() -> f64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        let info = unsafe { libc::mallinfo2() };
        (info.uordblks + info.hblkhd) as f64 / (1024.0 * 1024.0)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    f64::NAN
}

fn main() {
    let mut args = std::env::args().skip(1);
    let model = PathBuf::from(args.next().expect("usage: instances_memory MODEL.onnx [N]"));
    let instances: usize = args.next().map_or(4, |n| n.parse().expect("N: a number"));
    let (before, _) = resident_mb();
    println!("before any instance: {before:.0} MB resident");
    let mut streams = Vec::new();
    let mut previous = before;
    let mut previous_allocated = allocated_mb();
    for i in 1..=instances {
        let separator = ModelSeparator::load(&model, DeviceChoice::Device(DeviceId::CPU))
            .unwrap_or_else(|e| panic!("{}: {e}", model.display()));
        let (loaded, _) = resident_mb();
        let loaded_allocated = allocated_mb();
        let config = StreamConfig {
            host_sample_rate_hz: 44_100.0,
            max_block_frames: 1024,
            mode: ProcessingMode::Realtime,
            is_offline_only: false,
        };
        streams.push(spawn_stream(Box::new(separator), &config).expect("a stream"));
        // Let the stream's worker settle before reading.
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (now, peak) = resident_mb();
        let allocated = allocated_mb();
        println!(
            "instance {i}: {now:.0} MB resident (+{:.0} MB: separator {:.0} MB, stream {:.0} MB), \
             peak so far {peak:.0} MB; allocated +{:.0} MB (separator {:.0} MB, stream {:.0} MB)",
            now - previous,
            loaded - previous,
            now - loaded,
            allocated - previous_allocated,
            loaded_allocated - previous_allocated,
            allocated - loaded_allocated
        );
        previous = now;
        previous_allocated = allocated;
    }
}
