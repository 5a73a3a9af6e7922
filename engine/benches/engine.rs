//! Speed of the built-in separator and of the audio-thread side of a running stream.
//!
//! `cargo bench -p stemflow-engine`. Real-time factors: the separator processes
//! `BUILTIN_HOP_SAMPLES / 44_100` s of audio per hop; `process()` at 128 frames/48 kHz has 2.67 ms.

// criterion's `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};
use stemflow_engine::{
    BuiltinSeparator, PlanarBlock, Separator, BUILTIN_HOP_SAMPLES, BUILTIN_SAMPLE_RATE_HZ,
    SEPARATED_CHANNELS,
};
use stemflow_kit::demo_song::DemoSong;

fn builtin_separator(c: &mut Criterion) {
    let song = DemoSong::generate(BUILTIN_SAMPLE_RATE_HZ, 4.0);
    let mix = song.mix();
    let mut separator = BuiltinSeparator::new();
    let mut input = PlanarBlock::new(2, BUILTIN_HOP_SAMPLES);
    let mut stems = PlanarBlock::new(SEPARATED_CHANNELS, BUILTIN_HOP_SAMPLES);
    let num_hops = mix[0].len() / BUILTIN_HOP_SAMPLES;
    let mut hop = 0;
    let mut group = c.benchmark_group("builtin_separator");
    group.throughput(Throughput::Elements(BUILTIN_HOP_SAMPLES as u64));
    group.bench_function("hop_1024_frames_44k1", |b| {
        b.iter(|| {
            let range = hop * BUILTIN_HOP_SAMPLES..(hop + 1) * BUILTIN_HOP_SAMPLES;
            input.channel_mut(0).copy_from_slice(&mix[0][range.clone()]);
            input.channel_mut(1).copy_from_slice(&mix[1][range]);
            separator.process_hop(&input, &mut stems).unwrap();
            hop = (hop + 1) % num_hops;
        })
    });
    group.finish();
}

/// Times only `StemStreamHandle::process` with a running worker, each block timed once its
/// stems are ready (the steady state of real-time playback, without underruns).
fn handle_process(c: &mut Criterion) {
    const BLOCK_FRAMES: usize = 128;
    const SAMPLE_RATE_HZ: u32 = 48_000;
    let song = DemoSong::generate(SAMPLE_RATE_HZ, 4.0);
    let mix = song.mix();
    let config = StreamConfig {
        host_sample_rate_hz: SAMPLE_RATE_HZ as f32,
        max_block_frames: BLOCK_FRAMES,
        mode: ProcessingMode::Realtime,
        is_offline_only: false,
    };
    let (mut handle, _worker) = spawn_stream(Box::new(BuiltinSeparator::new()), &config).unwrap();
    let num_blocks = mix[0].len() / BLOCK_FRAMES;
    let mut block = 0;
    c.bench_function("stream_handle_process_128_frames_48k", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let wait_start = Instant::now();
                while handle.ready_frames() < BLOCK_FRAMES
                    && wait_start.elapsed() < Duration::from_millis(200)
                {
                    std::thread::yield_now();
                }
                let range = block * BLOCK_FRAMES..(block + 1) * BLOCK_FRAMES;
                let start = Instant::now();
                handle.process(&mix[0][range.clone()], &mix[1][range]);
                total += start.elapsed();
                block = (block + 1) % num_blocks;
            }
            total
        })
    });
    println!(
        "underrun blocks during the benchmark: {}",
        handle.stats().underrun_blocks()
    );
}

criterion_group!(benches, builtin_separator, handle_process);
criterion_main!(benches);
