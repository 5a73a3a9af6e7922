//! Building blocks: oscillator, filters, envelopes.

use super::math::*;

/// A sawtooth with PolyBLEP corrections at the wrap, so it is nearly free of aliasing.
#[derive(Default)]
pub(super) struct PolyBlepSaw {
    /// Position in the cycle, in `[0, 1)`.
    pub(super) phase: f64,
}

impl PolyBlepSaw {
    /// The next sample, in `[-1, 1]`, then advances by `increment` cycles (frequency / rate).
    pub(super) fn next(&mut self, increment: f64) -> f64 {
        let out = 2.0 * self.phase - 1.0 - poly_blep(self.phase, increment);
        self.phase += increment;
        if self.phase >= 1.0 {
            self.phase -= 1.0;
        }
        out
    }
}

/// The polynomial band-limited step residual around a wrap at phase 0.
pub(super) fn poly_blep(phase: f64, increment: f64) -> f64 {
    if phase < increment {
        let t = phase / increment;
        t + t - t * t - 1.0
    } else if phase > 1.0 - increment {
        let t = (phase - 1.0) / increment;
        t * t + t + t + 1.0
    } else {
        0.0
    }
}

/// A one-pole low-pass (6 dB/octave).
pub(super) struct OnePoleLowPass {
    coefficient: f64,
    state: f64,
}

impl OnePoleLowPass {
    pub(super) fn new(sample_rate_hz: f64, corner_hz: f64) -> Self {
        let coefficient = 1.0 - exp_det(-std::f64::consts::TAU * corner_hz / sample_rate_hz);
        Self {
            coefficient,
            state: 0.0,
        }
    }

    pub(super) fn process(&mut self, x: f64) -> f64 {
        self.state += self.coefficient * (x - self.state);
        self.state
    }
}

/// A biquad (transposed direct form II) with the Audio EQ Cookbook's designs.
pub(super) struct Biquad {
    b0: f64,
    b1: f64,
    b2: f64,
    a1: f64,
    a2: f64,
    z1: f64,
    z2: f64,
}

impl Biquad {
    pub(super) fn low_pass(sample_rate_hz: f64, corner_hz: f64, q: f64) -> Self {
        let (cos_w0, alpha) = Self::cos_and_alpha(sample_rate_hz, corner_hz, q);
        let b1 = 1.0 - cos_w0;
        Self::normalized(
            [b1 / 2.0, b1, b1 / 2.0],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    pub(super) fn high_pass(sample_rate_hz: f64, corner_hz: f64, q: f64) -> Self {
        let (cos_w0, alpha) = Self::cos_and_alpha(sample_rate_hz, corner_hz, q);
        let b1 = -(1.0 + cos_w0);
        Self::normalized(
            [-b1 / 2.0, b1, -b1 / 2.0],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    /// A resonator with 0 dB gain at its centre.
    pub(super) fn band_pass(sample_rate_hz: f64, centre_hz: f64, bandwidth_hz: f64) -> Self {
        let (cos_w0, alpha) =
            Self::cos_and_alpha(sample_rate_hz, centre_hz, centre_hz / bandwidth_hz);
        Self::normalized(
            [alpha, 0.0, -alpha],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    /// `cos(ω₀)` and `α = sin(ω₀) / 2Q`, with the frequency kept safely below Nyquist so low
    /// sample rates still give stable filters.
    pub(super) fn cos_and_alpha(sample_rate_hz: f64, hz: f64, q: f64) -> (f64, f64) {
        let turns = (hz / sample_rate_hz).min(0.45);
        (cos_turns(turns), sin_turns(turns) / (2.0 * q))
    }

    pub(super) fn normalized(b: [f64; 3], a: [f64; 3]) -> Self {
        Self {
            b0: b[0] / a[0],
            b1: b[1] / a[0],
            b2: b[2] / a[0],
            a1: a[1] / a[0],
            a2: a[2] / a[0],
            z1: 0.0,
            z2: 0.0,
        }
    }

    pub(super) fn process(&mut self, x: f64) -> f64 {
        let y = self.b0 * x + self.z1;
        self.z1 = self.b1 * x - self.a1 * y + self.z2;
        self.z2 = self.b2 * x - self.a2 * y;
        y
    }
}

/// A note envelope at `t_s` after note-on: smooth rise over `attack_s`, held until `gate_s`, then
/// a smooth fall over `release_s` from wherever the rise had got to.
pub(super) fn gate_envelope(t_s: f64, gate_s: f64, attack_s: f64, release_s: f64) -> f64 {
    let rise = smoothstep(t_s.min(gate_s) / attack_s);
    let fall = 1.0 - smoothstep((t_s - gate_s) / release_s);
    rise * fall
}

/// 0 below 0, 1 above 1, and the cubic `3x² − 2x³` in between.
pub(super) fn smoothstep(x: f64) -> f64 {
    let x = x.clamp(0.0, 1.0);
    x * x * (3.0 - 2.0 * x)
}

/// The factor that makes an exponential decay with time constant `time_constant_s` per sample.
pub(super) fn decay_per_sample(sample_rate_hz: f64, time_constant_s: f64) -> f64 {
    exp_det(-1.0 / (time_constant_s * sample_rate_hz))
}

/// One stereo signal: `[left, right]`, equal lengths.
pub type StereoBuffer = [Vec<f32>; 2];

/// A centred stereo signal: the same samples left and right.
pub(super) fn centred(mono: Vec<f32>) -> StereoBuffer {
    [mono.clone(), mono]
}
