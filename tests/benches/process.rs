//! `process()` of the built plugin, through the CLAP interface as a host calls it: Stemflow
//! (a stereo main output and one stereo output per stem) and Stemflow Single Bus (one
//! 10-channel output), at blocks of 128 and 1024 frames, live (the audio thread never waits for
//! the separator). Each iteration renders one second of a test song at 48 kHz; criterion's
//! time is divided by the blocks rendered (`Throughput::Elements`).
//!
//! Run on a release bundle (`cargo xtask bundle stemflow --release`, then
//! `STEMFLOW_TEST_CLAP=target/bundled/Stemflow.clap cargo bench -p stemflow-host-tests --bench
//! process`): the test build's allocation checks cost more than what is measured.

// criterion's `criterion_group!` generates an undocumented `pub fn`.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use stemflow_host_tests::{plugin_path, signal, BlockSizes, RenderMode, TestPlugin};

const SAMPLE_RATE_HZ: f64 = 48_000.0;
/// The plugins in the bundle: (CLAP id, the name the bench shows).
const PLUGINS: [(&str, &str); 2] = [
    ("audio.stemflow.stemflow", "stemflow"),
    ("audio.stemflow.stemflow-single-bus", "single-bus"),
];

fn process(c: &mut Criterion) {
    let path = plugin_path();
    let input = signal::test_song(SAMPLE_RATE_HZ as u32, 1.0, 7);
    let num_frames = input[0].len();
    let mut group = c.benchmark_group("process");
    for (plugin_id, name) in PLUGINS {
        for block_frames in [128usize, 1024] {
            let mut plugin = TestPlugin::load_id(&path, plugin_id);
            plugin.set_render_mode(RenderMode::Realtime);
            plugin.activate(SAMPLE_RATE_HZ, 1, block_frames);
            let blocks = num_frames.div_ceil(block_frames);
            group.throughput(Throughput::Elements(blocks as u64));
            group.bench_function(BenchmarkId::new(name, block_frames), |b| {
                b.iter(|| plugin.process_buffer(&input, BlockSizes::Fixed(block_frames), &[], None))
            });
            plugin.deactivate();
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = process
}
criterion_main!(benches);
