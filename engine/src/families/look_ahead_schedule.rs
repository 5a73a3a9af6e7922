//! A short look-ahead for a chunked model: the same chunk, run every `step` frames, keeping only
//! a crossfaded stretch of `2·step` frames that ends `look_ahead` frames before the chunk's end.
//! The chunk's earlier frames are the output's past (context the model sees), its last
//! `look_ahead` frames the future. Latency drops from about a chunk to about
//! `look_ahead + 4·step` (the crossfade, plus a step of hop quantization and one of scheduling
//! margin in a real-time stream); the model runs
//! `full step / step` times as often.
//!
//! Chunk `k` starts at padded frame `k·step`; its window is a periodic Hann of `2·step` frames
//! at `[s, s + 2·step)`, `s = chunk − look_ahead − 2·step`, so consecutive windows sum to one.
//! The stream is led by `s + step` zeros, so input frame 0 already has full weight.

use super::overlap_add::{ChunkLayout, Lead};
use crate::dsp::gcd;

/// What a short look-ahead runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LookAheadSchedule {
    /// The chunking: the model's chunk, a short step, a zero lead, the window's start.
    pub layout: ChunkLayout,
    /// Every chunk's window (zero outside `[s, s + 2·step)`).
    pub window: Vec<f64>,
    /// Future frames the model sees past the last frame it contributes to.
    pub look_ahead_frames: usize,
    /// Latency a real-time stream at the model's rate reports: the overlap-add's delay, a hop of
    /// quantization and a step of scheduling margin (one model run must fit in a step; see
    /// `pipeline.rs`).
    pub latency_frames: usize,
}

/// The smallest step tried: below it the model would run for every few blocks.
const MIN_STEP_FRAMES: usize = 256;

/// What the hop must be a multiple of when a step does not divide the chunk (the built-in
/// separator's hop: routes combine stage hops by their least common multiple).
const MIN_HOP_FRAMES: usize = 1024;

/// Fraction of the family window's peak below which a chunk's frames are not trusted (its
/// edges: STFT and padding effects).
const VALID_WINDOW_FRACTION: f64 = 0.01;

/// The schedule for a model whose reference chunking is `full` with chunk window
/// `family_window`, aiming at a reported latency of at most `target_latency_frames` (with the
/// step's scheduling margin). `None` when the reference pipeline's own latency is no longer (a
/// shorter look-ahead would only cost more). When the target is below what the chunk allows,
/// the shortest schedule possible.
pub fn look_ahead_schedule(
    full: ChunkLayout,
    family_window: &[f64],
    target_latency_frames: usize,
) -> Option<LookAheadSchedule> {
    let chunk = full.chunk_frames;
    let full_latency = full.latency_frames() + 2 * full.hop_frames();
    if target_latency_frames >= full_latency {
        return None;
    }
    let peak = family_window.iter().copied().fold(0.0, f64::max);
    let is_valid = |w: &f64| *w >= VALID_WINDOW_FRACTION * peak;
    let valid_start = family_window.iter().position(is_valid)?;
    let valid_end = family_window.len() - family_window.iter().rev().position(is_valid)?;
    // The model's output past `valid_end` is never used: that much look-ahead at least.
    let min_look_ahead = chunk - valid_end;
    // The stream steps in hops of gcd(chunk, step). A chunk that is a multiple of
    // `MIN_HOP_FRAMES` takes any step whose hop stays a multiple of it (so a hybrid route with
    // the built-in keeps a short common hop); another chunk takes the steps that divide it.
    // Longest first: the longest step that meets the target costs the least.
    let steps: Vec<usize> = (MIN_STEP_FRAMES..=full.step_frames.min(chunk / 2))
        .rev()
        .filter(|&step| {
            if chunk.is_multiple_of(MIN_HOP_FRAMES) {
                gcd(chunk, step).is_multiple_of(MIN_HOP_FRAMES)
            } else {
                chunk.is_multiple_of(step)
            }
        })
        .collect();
    let mut shortest: Option<LookAheadSchedule> = None;
    for &step in &steps {
        // Latency ≈ look-ahead + 4·step (crossfade, quantization, margin): a fifth of the target
        // per step leaves at least a fifth for the look-ahead itself.
        if 5 * step > target_latency_frames.max(5 * MIN_STEP_FRAMES) {
            continue;
        }
        let Some(mut look_ahead) = target_latency_frames.checked_sub(3 * step) else {
            continue;
        };
        look_ahead = look_ahead.max(min_look_ahead);
        // The exact latency depends on hop alignment: shrink the look-ahead until it fits.
        while let Some(schedule) = build(chunk, step, look_ahead, valid_start) {
            let excess = schedule
                .latency_frames
                .saturating_sub(target_latency_frames);
            if excess == 0 || look_ahead == min_look_ahead {
                if excess == 0 {
                    return Some(schedule);
                }
                if shortest
                    .as_ref()
                    .is_none_or(|s| schedule.latency_frames < s.latency_frames)
                {
                    shortest = Some(schedule);
                }
                break;
            }
            look_ahead = look_ahead.saturating_sub(excess).max(min_look_ahead);
        }
    }
    // Nothing meets the target: the shortest latency any step reaches with the least
    // look-ahead the model allows.
    for &step in steps.iter().rev().take(64) {
        if let Some(schedule) = build(chunk, step, min_look_ahead, valid_start) {
            if shortest
                .as_ref()
                .is_none_or(|s| schedule.latency_frames < s.latency_frames)
            {
                shortest = Some(schedule);
            }
        }
    }
    shortest.filter(|s| s.latency_frames < full_latency)
}

/// The schedule for one step and look-ahead; `None` when the window would start before the
/// chunk's valid frames.
fn build(
    chunk: usize,
    step: usize,
    look_ahead: usize,
    valid_start: usize,
) -> Option<LookAheadSchedule> {
    let window_start = chunk.checked_sub(look_ahead + 2 * step)?;
    if window_start < valid_start {
        return None;
    }
    let layout = ChunkLayout {
        chunk_frames: chunk,
        step_frames: step,
        lead: Lead::Zeros(window_start + step),
        window_start_frames: window_start,
    };
    let mut window = vec![0.0; chunk];
    for (i, w) in window[window_start..window_start + 2 * step]
        .iter_mut()
        .enumerate()
    {
        *w = 0.5 - 0.5 * (std::f64::consts::PI * i as f64 / step as f64).cos();
    }
    let latency_frames = layout.latency_frames() + layout.hop_frames() + step;
    Some(LookAheadSchedule {
        layout,
        window,
        look_ahead_frames: look_ahead,
        latency_frames,
    })
}

#[cfg(test)]
mod tests {
    use super::super::overlap_add::OverlapAdd;
    use super::*;

    fn full_layout() -> (ChunkLayout, Vec<f64>) {
        // An HTDemucs-like chunk: 7.8 s, a quarter overlapping, a triangle window.
        let chunk = 343_980;
        let window: Vec<f64> = (0..chunk)
            .map(|i| (1 + i.min(chunk - 1 - i)) as f64)
            .collect();
        (ChunkLayout::new(chunk, 257_985, Lead::Zeros(0)), window)
    }

    #[test]
    fn meets_each_target_with_the_longest_step_and_windows_that_sum_to_one() {
        let (full, family_window) = full_layout();
        for target_ms in [4000, 2000, 1000, 500, 250] {
            let target = target_ms * 44_100 / 1000;
            let schedule = look_ahead_schedule(full, &family_window, target).unwrap();
            assert!(
                schedule.latency_frames <= target,
                "{target_ms} ms: {} > {target}",
                schedule.latency_frames
            );
            // Not needlessly short: within one step and a bit of the target.
            let step = schedule.layout.step_frames;
            assert!(
                schedule.latency_frames + 2 * step >= target,
                "{target_ms} ms: {} step {step}",
                schedule.latency_frames
            );
            let hop = schedule.layout.hop_frames();
            assert!(
                hop == step || hop.is_multiple_of(MIN_HOP_FRAMES),
                "{schedule:?}"
            );
            assert!(schedule.look_ahead_frames >= target / 6, "{schedule:?}");
            // Overlapping windows, one step apart, add up to one.
            let s = schedule.layout.window_start_frames;
            for i in 0..step {
                let sum = schedule.window[s + step + i] + schedule.window[s + i];
                assert!((sum - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn no_schedule_where_full_is_as_short_and_the_shortest_below_the_chunks_limit() {
        let (full, family_window) = full_layout();
        assert!(look_ahead_schedule(full, &family_window, 20 * 44_100).is_none());
        // 10 ms is below what 256-frame steps reach: the shortest possible instead.
        let shortest = look_ahead_schedule(full, &family_window, 441).unwrap();
        assert!(shortest.latency_frames < 44_100 / 10, "{shortest:?}");
    }

    /// A model whose output is a delayed copy of its input (delay `d` within the chunk, as a
    /// network that looks ahead would "know" the future): the stitched output must be the input.
    #[test]
    fn stitching_a_perfect_model_gives_back_the_input_at_the_reported_latency() {
        let chunk = 4096;
        let family_window = vec![1.0; chunk];
        let full = ChunkLayout::new(chunk, 3072, Lead::Zeros(0));
        let schedule = look_ahead_schedule(full, &family_window, 1500).unwrap();
        let mut ola = OverlapAdd::new(schedule.layout, 1);
        let hop = ola.hop_frames();
        let latency = ola.latency_frames();
        assert_eq!(
            latency + hop + schedule.layout.step_frames,
            schedule.latency_frames
        );
        let n = 40 * hop;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 101) as f32) / 101.0 - 0.5)
            .collect();
        let mut outputs = vec![0.0f32; 2 * chunk];
        let window: Vec<f32> = schedule.window.iter().map(|&w| w as f32).collect();
        let mut got = Vec::new();
        for block in x.chunks(hop) {
            ola.push_hop(block, block);
            while let Some(mut ready) = ola.ready_chunk() {
                let [left, _] = ready.input;
                outputs[..chunk].copy_from_slice(left);
                outputs[chunk..].copy_from_slice(left);
                ready.sums.add(&outputs, &window);
                ready.sums.finish(&window);
            }
            ola.emit_hop(|_, view| got.push(view.map_or(0.0, |v| v.value(0, 0) as f32)));
        }
        for t in 0..n - latency {
            assert!((got[t + latency] - x[t]).abs() < 1e-6, "frame {t}");
        }
    }
}
