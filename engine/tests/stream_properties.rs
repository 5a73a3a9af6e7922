//! Properties of the streaming engine under random use: any sequence of block sizes gives the
//! same offline output as one fixed block size; after a reset the stream is a fresh one; at any
//! host rate the stems sum to the input and nothing is NaN or infinite.

use proptest::prelude::*;
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StemStreamHandle, StreamConfig};
use stemflow_engine::{BuiltinSeparator, PassthroughSeparator, Separator, Stem, NUM_STEMS};
use stemflow_kit::testing::XorShift64;

const MAX_BLOCK: usize = 1024;

type Stems = [[Vec<f32>; 2]; NUM_STEMS];

fn signal(len: usize, seed: u64) -> [Vec<f32>; 2] {
    let mut rng = XorShift64::new(seed);
    let mut next = move || rng.next_unit() - 0.5;
    let left = (0..len)
        .map(|i| 0.3 * (i as f32 * 0.013).sin() + 0.3 * next())
        .collect();
    let right = (0..len)
        .map(|i| 0.3 * (i as f32 * 0.021).cos() + 0.3 * next())
        .collect();
    [left, right]
}

fn offline(rate_hz: f32) -> StreamConfig {
    StreamConfig {
        host_sample_rate_hz: rate_hz,
        max_block_frames: MAX_BLOCK,
        mode: ProcessingMode::Offline,
        is_offline_only: false,
    }
}

/// Feeds `input[range]` in the given block sizes (cycled) and appends every stem's output.
fn feed(
    handle: &mut StemStreamHandle,
    input: &[Vec<f32>; 2],
    range: std::ops::Range<usize>,
    blocks: &[usize],
    out: &mut Stems,
) {
    let mut position = range.start;
    let mut i = 0;
    while position < range.end {
        let block = blocks[i % blocks.len()].min(range.end - position);
        i += 1;
        handle.process(
            &input[0][position..position + block],
            &input[1][position..position + block],
        );
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
        position += block;
    }
}

fn render(
    separator: Box<dyn Separator>,
    rate_hz: f32,
    input: &[Vec<f32>; 2],
    blocks: &[usize],
) -> (Stems, usize) {
    let (mut handle, _controller) = spawn_stream(separator, &offline(rate_hz)).unwrap();
    let mut out = Stems::default();
    feed(&mut handle, input, 0..input[0].len(), blocks, &mut out);
    (out, handle.latency_samples())
}

fn block_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..=MAX_BLOCK, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn any_block_sizes_give_the_one_block_reference(blocks in block_sizes(), seed in any::<u64>()) {
        let input = signal(20_000, seed);
        let (reference, _) = render(Box::new(BuiltinSeparator::new()), 44_100.0, &input, &[MAX_BLOCK]);
        let (got, _) = render(Box::new(BuiltinSeparator::new()), 44_100.0, &input, &blocks);
        prop_assert!(got == reference, "block sizes {:?} changed the output", blocks);
    }

    #[test]
    fn after_a_reset_the_stream_is_a_fresh_one(
        blocks in block_sizes(),
        reset_at in 1usize..15_000,
        seed in any::<u64>(),
    ) {
        let input = signal(15_000, seed);
        let later = signal(12_000, seed.wrapping_add(1));
        let (fresh, _) = render(Box::new(BuiltinSeparator::new()), 48_000.0, &later, &blocks);
        let (mut handle, _controller) =
            spawn_stream(Box::new(BuiltinSeparator::new()), &offline(48_000.0)).unwrap();
        let mut ignored = Stems::default();
        feed(&mut handle, &input, 0..reset_at, &blocks, &mut ignored);
        handle.reset();
        let mut after = Stems::default();
        feed(&mut handle, &later, 0..later[0].len(), &blocks, &mut after);
        prop_assert!(after == fresh, "a reset at {} left history behind", reset_at);
    }

    #[test]
    fn at_any_rate_the_stems_sum_to_the_input_and_stay_finite(
        rate_index in 0usize..9,
        blocks in block_sizes(),
        seed in any::<u64>(),
    ) {
        let rates = [1_000.0, 8_000.0, 22_050.0, 44_100.0, 44_100.5, 48_000.0, 96_000.0, 192_000.0, 768_000.0];
        let rate = rates[rate_index];
        // Long enough to get past the latency (a 100 ms margin and more) at every rate.
        let input = signal((rate * 0.25) as usize + 12_000, seed);
        let (out, latency) = render(
            Box::new(PassthroughSeparator::new(44_100, 256, 100)),
            rate,
            &input,
            &blocks,
        );
        for channel in 0..2 {
            for t in 0..input[0].len() {
                let sum: f32 = (0..NUM_STEMS).map(|s| out[s][channel][t]).sum();
                prop_assert!(sum.is_finite());
                let expected = if t >= latency { input[channel][t - latency] } else { 0.0 };
                prop_assert!((sum - expected).abs() <= 1e-5, "{} Hz, frame {}: {} vs {}", rate, t, sum, expected);
            }
        }
    }
}
