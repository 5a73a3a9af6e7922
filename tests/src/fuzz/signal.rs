//! Input audio for the fuzzer: tones, noise, silence, DC, clicks, full-scale squares, subnormal
//! values, and now and then NaN and infinity (a broken upstream plugin), which the plugin must
//! never pass on.

use super::rng::Rng;

/// One channel's signal generator.
#[derive(Debug, Clone)]
pub enum InputSignal {
    /// A sine tone.
    Sine {
        /// Phase in radians.
        phase: f64,
        /// Phase step per frame.
        step: f64,
        /// Peak.
        amplitude: f32,
    },
    /// White noise.
    Noise {
        /// Its generator (forked from the case's).
        rng: Rng,
        /// Peak.
        amplitude: f32,
    },
    /// Digital silence.
    Silence,
    /// A constant.
    Dc(f32),
    /// A click every `period` frames.
    Clicks {
        /// Frames between clicks.
        period: usize,
        /// Frames since the last click.
        count: usize,
    },
    /// A full-scale square wave.
    Square {
        /// Half a period, in frames.
        half_period: usize,
        /// Frames into the current half.
        count: usize,
        /// The current level.
        level: f32,
    },
    /// Subnormal values (below `f32::MIN_POSITIVE`).
    Subnormal,
    /// Music-like noise with NaN, +Inf and −Inf sprinkled in.
    NonFinite {
        /// Its generator (forked from the case's).
        rng: Rng,
    },
}

impl InputSignal {
    /// A random generator for audio at `rate_hz`.
    pub fn random(rng: &mut Rng, rate_hz: f64) -> Self {
        match rng.range_usize(0, 99) {
            0..=29 => InputSignal::Sine {
                phase: 0.0,
                step: std::f64::consts::TAU * rng.range_f64(20.0, (rate_hz / 2.0).max(21.0))
                    / rate_hz,
                amplitude: rng.range_f64(0.0, 1.0) as f32,
            },
            30..=59 => InputSignal::Noise {
                rng: rng.fork(),
                amplitude: rng.range_f64(0.0, 1.0) as f32,
            },
            60..=69 => InputSignal::Silence,
            70..=74 => InputSignal::Dc(rng.range_f64(-1.0, 1.0) as f32),
            75..=81 => InputSignal::Clicks {
                period: rng.range_usize(1, 4096),
                count: 0,
            },
            82..=89 => InputSignal::Square {
                half_period: rng.range_usize(1, 2048),
                count: 0,
                level: 1.0,
            },
            90..=96 => InputSignal::Subnormal,
            _ => InputSignal::NonFinite { rng: rng.fork() },
        }
    }

    /// Writes the next `out.len()` frames.
    pub fn fill(&mut self, out: &mut [f32]) {
        for x in out {
            *x = self.next();
        }
    }

    fn next(&mut self) -> f32 {
        match self {
            InputSignal::Sine {
                phase,
                step,
                amplitude,
            } => {
                let value = phase.sin() as f32 * *amplitude;
                *phase = (*phase + *step) % std::f64::consts::TAU;
                value
            }
            InputSignal::Noise { rng, amplitude } => uniform(rng) * *amplitude,
            InputSignal::Silence => 0.0,
            InputSignal::Dc(value) => *value,
            InputSignal::Clicks { period, count } => {
                *count += 1;
                if *count >= *period {
                    *count = 0;
                    1.0
                } else {
                    0.0
                }
            }
            InputSignal::Square {
                half_period,
                count,
                level,
            } => {
                *count += 1;
                if *count >= *half_period {
                    *count = 0;
                    *level = -*level;
                }
                *level
            }
            InputSignal::Subnormal => 1e-40,
            InputSignal::NonFinite { rng } => {
                let x = uniform(rng);
                if x > 0.98 {
                    f32::NAN
                } else if x > 0.97 {
                    f32::INFINITY
                } else if x < -0.97 {
                    f32::NEG_INFINITY
                } else {
                    x * 0.5
                }
            }
        }
    }
}

/// Uniform in [−1, 1).
fn uniform(rng: &mut Rng) -> f32 {
    rng.range_f64(-1.0, 1.0) as f32
}
