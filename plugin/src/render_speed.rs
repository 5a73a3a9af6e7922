//! [`RenderSpeedDetector`]: notices a host rendering clearly faster than real time without saying
//! it renders offline, so the plugin can wait for its worker there (an exact bounce) while never
//! blocking a genuinely live audio thread.
//!
//! The measure is audio time over the host's own time: the wall-clock time between `process()`
//! calls, excluding the time spent inside them. A live host delivers audio at real-time pace,
//! so the ratio stays near 1 however busy its other plugins are; a host bouncing in a loop calls
//! again at once, so the ratio is large. Waiting for the worker (inside `process()`) does not
//! count, so an offline render slowed down by a slow model still reads as fast.
//!
//! Hysteresis: the ratio must exceed [`ENTER_RATIO`] over [`ENTER_WINDOWS`] consecutive windows
//! of at least [`WINDOW_AUDIO_S`] of audio (and [`MIN_BLOCKS_PER_WINDOW`] blocks) before the
//! detector says "faster", so transport pre-roll, anticipative-processing bursts and catch-up
//! after a stall (short) never trigger it; one window below [`LEAVE_RATIO`] ends it.

use std::time::{Duration, Instant};

/// Audio per measuring window.
pub const WINDOW_AUDIO_S: f64 = 1.0;
/// Blocks per window at least, so one huge block cannot decide.
pub const MIN_BLOCKS_PER_WINDOW: u32 = 8;
/// Audio time over host time above which a window counts as faster than real time.
pub const ENTER_RATIO: f64 = 3.0;
/// Consecutive fast windows needed to switch.
pub const ENTER_WINDOWS: u32 = 2;
/// Audio time over host time below which a window ends the faster-than-real-time state.
pub const LEAVE_RATIO: f64 = 1.5;

/// Watches the pace of `process()` calls. Realtime-safe: reads the monotonic clock and does
/// arithmetic; never allocates.
#[derive(Debug, Clone)]
pub struct RenderSpeedDetector {
    sample_rate_hz: f64,
    /// When the last `process()` call returned.
    last_end: Option<Instant>,
    window_audio_s: f64,
    window_host_s: f64,
    window_blocks: u32,
    fast_windows: u32,
    is_faster: bool,
}

impl RenderSpeedDetector {
    /// A detector for audio at `sample_rate_hz`. Realtime-safe.
    pub fn new(sample_rate_hz: f32) -> Self {
        Self {
            sample_rate_hz: f64::from(sample_rate_hz).max(1.0),
            last_end: None,
            window_audio_s: 0.0,
            window_host_s: 0.0,
            window_blocks: 0,
            fast_windows: 0,
            is_faster: false,
        }
    }

    /// Forgets everything (after a transport jump or a reactivation). Realtime-safe.
    pub fn reset(&mut self) {
        *self = Self {
            sample_rate_hz: self.sample_rate_hz,
            ..Self::new(1.0)
        };
    }

    /// Whether the host currently runs clearly faster than real time. Realtime-safe.
    #[cfg(test)]
    pub fn is_faster_than_real_time(&self) -> bool {
        self.is_faster
    }

    /// Call at the start of `process()` with the block's length; returns whether the host runs
    /// clearly faster than real time. Realtime-safe.
    pub fn block_started(&mut self, num_frames: usize, now: Instant) -> bool {
        let Some(last_end) = self.last_end else {
            return self.is_faster;
        };
        let host_s = now.saturating_duration_since(last_end).as_secs_f64();
        self.window_host_s += host_s;
        self.window_audio_s += num_frames as f64 / self.sample_rate_hz;
        self.window_blocks += 1;
        if self.window_audio_s >= WINDOW_AUDIO_S && self.window_blocks >= MIN_BLOCKS_PER_WINDOW {
            let ratio = self.window_audio_s / self.window_host_s.max(1e-9);
            if self.is_faster {
                if ratio < LEAVE_RATIO {
                    self.is_faster = false;
                    self.fast_windows = 0;
                }
            } else if ratio > ENTER_RATIO {
                self.fast_windows += 1;
                if self.fast_windows >= ENTER_WINDOWS {
                    self.is_faster = true;
                }
            } else {
                self.fast_windows = 0;
            }
            self.window_audio_s = 0.0;
            self.window_host_s = 0.0;
            self.window_blocks = 0;
        }
        self.is_faster
    }

    /// Call when `process()` returns. Realtime-safe.
    pub fn block_finished(&mut self, now: Instant) {
        self.last_end = Some(now);
    }
}

/// The longest a block waits for the worker when the host did not say it renders offline but
/// runs faster than real time: long enough for a slow model's chunk, short enough that a wrong
/// guess cannot hang a host.
pub const DETECTED_OFFLINE_WAIT: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `num_blocks` blocks of `block_frames`, each followed by `host_gap` outside
    /// `process()` and `inside` in it; returns the detector's verdict after each block.
    fn run(
        detector: &mut RenderSpeedDetector,
        clock: &mut Instant,
        num_blocks: usize,
        block_frames: usize,
        host_gap: Duration,
        inside: Duration,
    ) -> Vec<bool> {
        (0..num_blocks)
            .map(|_| {
                *clock += host_gap;
                let verdict = detector.block_started(block_frames, *clock);
                *clock += inside;
                detector.block_finished(*clock);
                verdict
            })
            .collect()
    }

    const RATE: f32 = 48_000.0;
    /// 512 frames at 48 kHz.
    const BLOCK: Duration = Duration::from_micros(10_667);

    #[test]
    fn a_live_host_is_never_taken_for_a_render_even_when_busy_or_bursty() {
        let mut detector = RenderSpeedDetector::new(RATE);
        let mut clock = Instant::now();
        // Real-time pace with this plugin's own work inside process().
        let live = run(
            &mut detector,
            &mut clock,
            2_000,
            512,
            BLOCK - Duration::from_micros(500),
            Duration::from_micros(500),
        );
        assert!(live.iter().all(|&v| !v));
        // A burst: 40 blocks (0.4 s) processed back to back after a stall, then real time.
        run(
            &mut detector,
            &mut clock,
            1,
            512,
            Duration::from_millis(400),
            Duration::ZERO,
        );
        let burst = run(
            &mut detector,
            &mut clock,
            40,
            512,
            Duration::from_micros(50),
            Duration::from_micros(50),
        );
        let after = run(&mut detector, &mut clock, 500, 512, BLOCK, Duration::ZERO);
        assert!(
            burst.iter().chain(&after).all(|&v| !v),
            "a short burst must not switch"
        );
    }

    #[test]
    fn a_fast_render_is_detected_after_two_windows_and_released_when_it_slows() {
        let mut detector = RenderSpeedDetector::new(RATE);
        let mut clock = Instant::now();
        // 10× real time; a slow worker makes process() itself take long, which does not count.
        let fast = run(&mut detector, &mut clock, 400, 512, BLOCK / 10, BLOCK * 3);
        let first = fast
            .iter()
            .position(|&v| v)
            .expect("the render was not detected");
        // Two windows of at least 1 s of audio (94 blocks of 512 at 48 kHz) are needed.
        assert!(
            (188..=200).contains(&first),
            "detected after {first} blocks"
        );
        assert!(fast[first..].iter().all(|&v| v));
        // Back to real time: released within a window.
        let live = run(&mut detector, &mut clock, 200, 512, BLOCK, Duration::ZERO);
        let released = live.iter().position(|&v| !v).expect("never released");
        assert!(released <= 100, "released after {released} blocks");
        detector.reset();
        assert!(!detector.is_faster_than_real_time());
    }
}
