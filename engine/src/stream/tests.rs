//! Stream tests: block-size identity, latency, resets, underruns, overflows, worker death.

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::builtin::BuiltinSeparator;
use crate::passthrough::{PassthroughSeparator, WeightedSixStems};
use crate::stem::{ExtraStems, Stem, NUM_STEMS};
use crate::testing::Scripted;
use stemflow_kit::testing::XorShift64;

/// Feeds `input` in blocks of the given sizes (cycled) and collects every stem's output.
fn render(
    handle: &mut StemStreamHandle,
    input: &[Vec<f32>; 2],
    block_sizes: &[usize],
) -> [[Vec<f32>; 2]; NUM_STEMS] {
    let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let mut position = 0;
    let mut i = 0;
    while position < input[0].len() {
        let block = block_sizes[i % block_sizes.len()].min(input[0].len() - position);
        i += 1;
        let n = handle.process(
            &input[0][position..position + block],
            &input[1][position..position + block],
        );
        assert_eq!(n, block);
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
        position += block;
    }
    out
}

fn test_signal(len: usize, seed: u64) -> [Vec<f32>; 2] {
    let mut rng = XorShift64::new(seed);
    let mut next = move || rng.next_unit() - 0.5;
    let left: Vec<f32> = (0..len)
        .map(|i| 0.3 * (i as f32 * 0.05).sin() + 0.2 * next())
        .collect();
    let right: Vec<f32> = (0..len)
        .map(|i| 0.3 * (i as f32 * 0.031).sin() + 0.2 * next())
        .collect();
    [left, right]
}

fn offline_config(rate_hz: f32, max_block_frames: usize) -> StreamConfig {
    StreamConfig {
        host_sample_rate_hz: rate_hz,
        max_block_frames,
        mode: ProcessingMode::Offline,
        is_offline_only: false,
    }
}

/// A stream of the built-in separator, offline at `rate_hz` in blocks of up to
/// `max_block_frames`.
fn spawn_builtin(
    rate_hz: f32,
    max_block_frames: usize,
) -> Result<(StemStreamHandle, StemStreamController), EngineError> {
    spawn_stream(
        Box::new(BuiltinSeparator::new()),
        &offline_config(rate_hz, max_block_frames),
    )
}

#[test]
fn offline_output_is_bit_identical_for_any_block_size() {
    let input = test_signal(48_000, 1);
    let mut reference = None;
    for block_sizes in [
        vec![4096],
        vec![64],
        vec![1000],
        vec![1, 7, 4096, 333, 2048, 5],
    ] {
        let (mut handle, _worker) = spawn_builtin(48_000.0, 4096).unwrap();
        let out = render(&mut handle, &input, &block_sizes);
        match &reference {
            None => reference = Some(out),
            Some(reference) => assert!(reference == &out, "block sizes {block_sizes:?} differ"),
        }
    }
}

#[test]
fn worker_counts_busy_time_and_separated_frames() {
    let input = test_signal(48_000, 2);
    let (mut handle, worker) = spawn_builtin(48_000.0, 512).unwrap();
    let stats = worker.stats().clone();
    assert_eq!(stats.worker_processed_frames(), 0);
    render(&mut handle, &input, &[512]);
    // Offline, every output frame waited for the worker, so nearly all input was separated.
    let frames = stats.worker_processed_frames();
    assert!(frames > 0 && frames <= 48_000, "{frames}");
    assert!(stats.worker_busy_ns() > 0);
}

#[test]
fn impulse_comes_out_exactly_at_the_reported_latency() {
    for rate_hz in [22_050.0, 44_100.0, 48_000.0, 96_000.0] {
        let (mut handle, _worker) = spawn_stream(
            Box::new(PassthroughSeparator::new(44_100, 512, 100)),
            &offline_config(rate_hz, 512),
        )
        .unwrap();
        let latency = handle.latency_samples();
        let mut input = [vec![0.0; latency + 5_000], vec![0.0; latency + 5_000]];
        input[0][1_000] = 1.0;
        input[1][1_000] = 1.0;
        let out = render(&mut handle, &input, &[512]);
        let mix: Vec<f32> = (0..input[0].len())
            .map(|t| (0..NUM_STEMS).map(|s| out[s][0][t]).sum())
            .collect();
        let peak = (0..mix.len())
            .max_by(|&a, &b| mix[a].abs().total_cmp(&mix[b].abs()))
            .unwrap();
        assert_eq!(peak, 1_000 + latency, "{rate_hz} Hz");
        assert!((mix[peak] - 1.0).abs() < 1e-6);
    }
}

#[test]
fn reset_restarts_the_timeline_as_if_new() {
    let input = test_signal(30_000, 2);
    let (mut fresh, _w1) = spawn_builtin(44_100.0, 256).unwrap();
    let expected = render(&mut fresh, &input, &[256]);

    let (mut handle, _w2) = spawn_builtin(44_100.0, 256).unwrap();
    let other = test_signal(7_777, 3);
    render(&mut handle, &other, &[100]);
    handle.reset();
    let after_reset = render(&mut handle, &input, &[256]);
    assert!(after_reset == expected);
}

/// A passthrough separator of `block_frames` hops and 700 frames of latency that stalls for
/// `stall` on the hops of `stalling_hops`, to provoke underruns.
fn stalling_passthrough(
    block_frames: usize,
    stalling_hops: std::ops::Range<usize>,
    stall: Duration,
) -> Scripted<PassthroughSeparator> {
    Scripted::around(PassthroughSeparator::new(44_100, block_frames, 700)).before_hop(
        move |hop_index| {
            if stalling_hops.contains(&hop_index) {
                std::thread::sleep(stall);
            }
            Ok(())
        },
    )
}

#[test]
fn underruns_keep_the_mix_complete_and_the_timeline_fixed() {
    let stats = stall_worker_and_check_timeline(Duration::from_millis(300));
    assert!(stats.underrun_blocks() > 0, "expected underruns");
    assert_eq!(stats.input_overflows(), 0);
}

#[test]
fn a_stall_longer_than_the_input_ring_restarts_without_losing_audio() {
    let stats = stall_worker_and_check_timeline(Duration::from_millis(1_300));
    assert!(
        stats.input_overflows() > 0,
        "expected the input ring to overflow"
    );
}

/// Stalls the worker for `stall` in the middle of a paced real-time run and checks that every
/// output frame is either separated exactly on time or dry on `Other`, and that separation
/// resumes afterwards.
fn stall_worker_and_check_timeline(stall: Duration) -> Arc<StreamStats> {
    const BLOCK: usize = 256;
    let separator = stalling_passthrough(BLOCK, 20..21, stall);
    let config = StreamConfig {
        host_sample_rate_hz: 44_100.0,
        max_block_frames: BLOCK,
        mode: ProcessingMode::Realtime,
        is_offline_only: false,
    };
    let (mut handle, _worker) = spawn_stream(Box::new(separator), &config).unwrap();
    let latency = handle.latency_samples();
    let num_blocks = (stall.as_secs_f64() / 0.0058) as usize + 80;
    let input = test_signal(latency + num_blocks * BLOCK, 4);
    // Paced at about real time (5.8 ms per block), so the worker keeps up except while stalled.
    let (out, _) = render_paced(&mut handle, &input, BLOCK, Duration::from_micros(5_800));
    let separated = passthrough_timeline(&out, &input, latency);
    // Sample `i` of the timeline is input frame `i / 2`, channel `i % 2`.
    let first_fallback =
        (0..separated.len()).find(|&i| !separated[i] && input[i % 2][i / 2] != 0.0);
    assert!(first_fallback.is_some(), "no fallback frames seen");
    let separated_after_underrun = separated[first_fallback.unwrap()..]
        .iter()
        .filter(|&&s| s)
        .count();
    assert!(separated_after_underrun > 0, "the stream never recovered");
    handle.stats().clone()
}

/// Feeds `input` to a real-time `handle` in blocks of `block_frames`, one every `pace` (as a
/// host's audio callback comes), and collects every stem's output and the frames ready before
/// each block.
fn render_paced(
    handle: &mut StemStreamHandle,
    input: &[Vec<f32>; 2],
    block_frames: usize,
    pace: Duration,
) -> ([[Vec<f32>; 2]; NUM_STEMS], Vec<usize>) {
    let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let mut ready_frames = Vec::new();
    for (left, right) in input[0]
        .chunks(block_frames)
        .zip(input[1].chunks(block_frames))
    {
        std::thread::sleep(pace);
        ready_frames.push(handle.ready_frames());
        handle.process(left, right);
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
    }
    (out, ready_frames)
}

/// Checks a passthrough stream's output from the latency on: each frame's stems sum to the
/// input delayed by the latency, and Vocals is either that input exactly (separated, on time,
/// never shifted) or silent (dry audio on Other). Returns, per sample (frame after frame, left
/// then right), whether it was separated.
fn passthrough_timeline(
    out: &[[Vec<f32>; 2]; NUM_STEMS],
    input: &[Vec<f32>; 2],
    latency: usize,
) -> Vec<bool> {
    let mut separated = Vec::new();
    for t in latency..input[0].len() {
        for channel in 0..2 {
            let expected = input[channel][t - latency];
            let sum: f32 = (0..NUM_STEMS).map(|s| out[s][channel][t]).sum();
            assert!((sum - expected).abs() < 1e-6, "mix incomplete at {t}");
            let vocals = out[Stem::Vocals.index()][channel][t];
            if vocals != 0.0 {
                assert!((vocals - expected).abs() < 1e-6, "shifted at {t}");
            }
            separated.push(vocals != 0.0);
        }
    }
    separated
}

#[test]
fn a_live_worker_is_woken_once_a_chunk_is_in_not_at_every_block() {
    const BLOCK: usize = 128;
    const HOP: usize = 1_024;
    let config = StreamConfig {
        host_sample_rate_hz: 44_100.0,
        max_block_frames: BLOCK,
        mode: ProcessingMode::Realtime,
        is_offline_only: false,
    };
    // From the first block on, and after seconds of silence (a track that starts later): the
    // worker looks for the signal's first frame a chunk at a time too.
    for leading_silent_blocks in [0, 60] {
        let separator = PassthroughSeparator::new(44_100, HOP, 0);
        let (mut handle, _worker) = spawn_stream(Box::new(separator), &config).unwrap();
        let latency = handle.latency_samples();
        let silent_frames = leading_silent_blocks * BLOCK;
        let mut input = test_signal(silent_frames + latency + 100 * BLOCK, 11);
        for channel in &mut input {
            channel[..silent_frames].fill(0.0);
        }
        let num_blocks = input[0].len().div_ceil(BLOCK);
        // Paced at about real time (2.9 ms a block).
        let (out, ready_frames) =
            render_paced(&mut handle, &input, BLOCK, Duration::from_micros(2_900));
        // A chunk is 8 blocks: about one wake-up a chunk, not one a block.
        let wakeups = handle.input_wakeups() as usize;
        assert!(
            wakeups <= num_blocks / 3,
            "{leading_silent_blocks} silent blocks first: {wakeups} wake-ups for {num_blocks} blocks"
        );
        // And in time: woken when its chunk is in, the worker has delivered it before the next
        // block comes, so the frames ready before a block never fall more than a chunk below
        // the latency (on average half a chunk below). A worker that slept until its idle
        // time-out fell behind by up to two chunks here (on average a chunk below, checked).
        let steady = &ready_frames[2 * HOP / BLOCK..];
        let mean_ready = steady.iter().sum::<usize>() / steady.len();
        assert!(
            mean_ready + 3 * HOP / 4 >= latency,
            "{mean_ready} frames ready on average, latency {latency}: the worker was woken late"
        );
        // The stems came out, on time (silence is never "separated": count the signal only).
        let separated = passthrough_timeline(&out, &input, latency);
        let num_separated = separated.iter().filter(|&&s| s).count();
        let signal_samples = separated.len() - 2 * silent_frames;
        assert!(
            num_separated * 10 >= signal_samples * 9,
            "{leading_silent_blocks} silent blocks first: only {num_separated} of \
             {signal_samples} samples separated ({} underrun frames)",
            handle.stats().underrun_frames()
        );
    }
}

#[test]
fn a_crashing_separator_leaves_dry_audio_on_other_and_recovers_on_reset() {
    // A passthrough that panics on its third hop, then works (its hop count survives resets).
    let separator = Scripted::around(PassthroughSeparator::new(44_100, 128, 0))
        .named("crashes.onnx")
        .before_hop(|hop_index| {
            if hop_index + 1 == 3 {
                panic!("model exploded");
            }
            Ok(())
        });
    let (mut handle, controller) =
        spawn_stream(Box::new(separator), &offline_config(44_100.0, 128)).unwrap();
    let latency = handle.latency_samples();
    let input = test_signal(latency + 4_000, 5);
    let out = render(&mut handle, &input, &[128]);
    assert!(
        controller.is_alive(),
        "a separator crash must not kill the worker"
    );
    let error = controller
        .stats()
        .separator_error()
        .expect("the crash is reported");
    assert_eq!(error.separator, "crashes.onnx");
    assert!(error.reason.contains("model exploded"), "{error}");
    for t in latency + 1_000..input[0].len() {
        assert_eq!(
            out[Stem::Other.index()][0][t],
            input[0][t - latency],
            "frame {t}"
        );
        assert_eq!(out[Stem::Vocals.index()][0][t], 0.0, "frame {t}");
    }

    // After a reset it separates again, exactly as a fresh stream does.
    handle.reset();
    let after_reset = render(&mut handle, &input, &[128]);
    let (mut fresh, _controller) = spawn_stream(
        Box::new(PassthroughSeparator::new(44_100, 128, 0)),
        &offline_config(44_100.0, 128),
    )
    .unwrap();
    let expected = render(&mut fresh, &input, &[128]);
    assert!(
        after_reset == expected,
        "the stream did not recover on reset"
    );
}

#[test]
fn non_finite_and_subnormal_input_never_reaches_the_output() {
    let (mut handle, _worker) = spawn_builtin(44_100.0, 512).unwrap();
    let latency = handle.latency_samples();
    let mut input = test_signal(latency + 8_192, 6);
    for t in (0..input[0].len()).step_by(97) {
        input[0][t] = f32::NAN;
        input[1][t] = if t % 2 == 0 { f32::INFINITY } else { 1e-40 };
    }
    let out = render(&mut handle, &input, &[512]);
    assert!(handle.stats().non_finite_input_samples() > 0);
    for stem in out.iter().flatten() {
        assert!(stem.iter().all(|x| x.is_finite() && !x.is_subnormal()));
    }
}

#[test]
fn bad_configurations_are_clear_errors() {
    let bad_rate = spawn_builtin(f32::NAN, 64);
    assert!(matches!(
        bad_rate,
        Err(EngineError::UnsupportedSampleRate(_))
    ));
    let too_low = spawn_builtin(100.0, 64);
    assert!(too_low
        .err()
        .unwrap()
        .to_string()
        .contains("unsupported sample rate"));
    let bad_block = spawn_builtin(48_000.0, 0);
    assert!(matches!(bad_block, Err(EngineError::InvalidBlockSize(0))));
}

#[test]
fn other_is_the_exact_residual_of_the_input_delayed_by_the_latency() {
    for has_extra_stems in [true, false] {
        for rate_hz in [44_100.0, 48_000.0] {
            let separator: Box<dyn Separator> = if has_extra_stems {
                Box::new(WeightedSixStems::new())
            } else {
                Box::new(BuiltinSeparator::new())
            };
            let (mut handle, _worker) =
                spawn_stream(separator, &offline_config(rate_hz, 4096)).unwrap();
            handle.set_extra_stems(ExtraStems::Separate);
            let latency = handle.latency_samples();
            let input = test_signal(latency + 20_000, 7);
            let out = render(&mut handle, &input, &[333, 4096, 1]);
            let case = format!(
                "{} at {rate_hz} Hz",
                if has_extra_stems { "six" } else { "four" }
            );
            for channel in 0..2 {
                for stem in Stem::EXTRA {
                    let is_silent = out[stem.index()][channel].iter().all(|&x| x == 0.0);
                    assert_eq!(is_silent, !has_extra_stems, "{case}: {stem:?}");
                }
                for t in 0..input[0].len() {
                    let dry = if t >= latency {
                        input[channel][t - latency]
                    } else {
                        0.0
                    };
                    let [v, d, b, g, p, other] = std::array::from_fn(|s| out[s][channel][t]);
                    let expected = crate::dsp::flush_subnormal(dry - (0.0 + v + d + b + g + p));
                    assert_eq!(other.to_bits(), expected.to_bits(), "{case}, frame {t}");
                    assert!(
                        (v + d + b + g + p + other - dry).abs() < 1e-6,
                        "{case}, frame {t}"
                    );
                }
                // The stems are separated, not silent: the residual is not the whole input.
                let separated = &out[Stem::Vocals.index()][channel][latency..];
                assert!(separated.iter().any(|&x| x != 0.0), "{case}");
            }
        }
    }
}

/// Renders `input` offline through a passthrough that stalls for `stall` on hop 5 (a long
/// model run), with the handle's no-progress timeout and run limit; returns the underruns.
fn render_offline_through_a_long_run(
    stall: Duration,
    timeout: Duration,
    run_limit: Duration,
) -> u64 {
    const BLOCK: usize = 512;
    let separator = stalling_passthrough(BLOCK, 5..6, stall);
    let (mut handle, _worker) =
        spawn_stream(Box::new(separator), &offline_config(44_100.0, BLOCK)).unwrap();
    handle.set_offline_wait(timeout, run_limit);
    let latency = handle.latency_samples();
    let mut input = test_signal(40 * BLOCK, 9);
    for channel in &mut input {
        channel.resize(40 * BLOCK + latency, 0.0);
    }
    let out = render(&mut handle, &input, &[BLOCK]);
    if handle.stats().underrun_frames() == 0 {
        // What a run is given in full is the passthrough's exact output.
        let separated = passthrough_timeline(&out, &input, latency);
        assert!(separated.iter().all(|&s| s));
    }
    handle.stats().underrun_frames()
}

#[test]
fn an_offline_render_waits_for_a_model_run_longer_than_its_timeout() {
    // A run of 600 ms against a 100 ms timeout: the worker is busy, not stuck.
    let underruns = render_offline_through_a_long_run(
        Duration::from_millis(600),
        Duration::from_millis(100),
        Duration::from_secs(60),
    );
    assert_eq!(underruns, 0);
}

#[test]
fn an_offline_render_gives_up_on_a_run_past_its_limit() {
    let underruns = render_offline_through_a_long_run(
        Duration::from_millis(900),
        Duration::from_millis(50),
        Duration::from_millis(150),
    );
    assert!(underruns > 0);
}

#[test]
fn an_offline_render_without_a_run_limit_waits_for_any_run() {
    // Whole-file separation's limit: `Duration::MAX` must not overflow the deadline.
    let underruns = render_offline_through_a_long_run(
        Duration::from_millis(900),
        Duration::from_millis(50),
        crate::offline::WHOLE_FILE_RUN_LIMIT,
    );
    assert_eq!(underruns, 0);
}
