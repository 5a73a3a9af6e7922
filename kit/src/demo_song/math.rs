//! Deterministic maths and noise: the same bits on every platform (see the module documentation).

use std::f64::consts::{LN_2, LOG2_E};

/// Frequency of a (possibly fractional) MIDI note, A4 = 69 = 440 Hz.
pub(super) fn midi_to_hz(midi: f64) -> f64 {
    440.0 * semitones_to_ratio(midi - 69.0)
}

/// Frequency ratio of an interval in (possibly fractional) semitones.
pub(super) fn semitones_to_ratio(semitones: f64) -> f64 {
    exp_det(semitones * (LN_2 / 12.0))
}

/// `sin(2π·turns)`, to about 1e-11, from `+ − ×` and casts only, so bit-identical everywhere.
pub(super) fn sin_turns(turns: f64) -> f64 {
    // Reduce to r in [-1/4, 1/4] turn using sin(π − x) = sin(x), then a Taylor series to x¹⁷.
    // (A cast instead of `floor`, which is a library call on baseline x86-64.)
    let mut r = turns - (turns as i64) as f64;
    if r >= 0.5 {
        r -= 1.0;
    } else if r < -0.5 {
        r += 1.0;
    }
    if r > 0.25 {
        r = 0.5 - r;
    } else if r < -0.25 {
        r = -0.5 - r;
    }
    let x = r * std::f64::consts::TAU;
    let x2 = x * x;
    // Horner: x·(1 − x²/(2·3)·(1 − x²/(4·5)·(…))).
    let mut series = 1.0;
    for &coefficient in SIN_SERIES_COEFFICIENTS.iter().rev() {
        series = 1.0 - x2 * coefficient * series;
    }
    x * series
}

/// `1 / (2k·(2k + 1))` for k = 1..=8: the ratios of successive terms of the sine series.
pub(super) const SIN_SERIES_COEFFICIENTS: [f64; 8] = [
    1.0 / 6.0,
    1.0 / 20.0,
    1.0 / 42.0,
    1.0 / 72.0,
    1.0 / 110.0,
    1.0 / 156.0,
    1.0 / 210.0,
    1.0 / 272.0,
];

/// `cos(2π·turns)`, see [`sin_turns`].
pub(super) fn cos_turns(turns: f64) -> f64 {
    sin_turns(turns + 0.25)
}

/// `eˣ` to about 1e-15 relative, from `+ − ×` and casts only, so bit-identical everywhere.
/// Flushes to 0 below −700.
pub(super) fn exp_det(x: f64) -> f64 {
    if x < -700.0 {
        return 0.0;
    }
    let x = x.min(700.0);
    // eˣ = 2ᵏ · eʳ with |r| ≤ ln2 / 2, then a Taylor series to r¹³.
    let k_unrounded = x * LOG2_E;
    let k = (k_unrounded + if k_unrounded < 0.0 { -0.5 } else { 0.5 }) as i64;
    let r = x - k as f64 * LN_2;
    // Horner: 1 + r·(1 + r/2·(1 + r/3·(…))).
    let mut series = 1.0;
    for &coefficient in EXP_SERIES_COEFFICIENTS.iter().rev() {
        series = 1.0 + r * coefficient * series;
    }
    // 2ᵏ built from its bits: k is within the normal exponent range here.
    let two_to_k = f64::from_bits(((k + 1023) as u64) << 52);
    series * two_to_k
}

/// `1 / i` for i = 1..=13: the ratios of successive terms of the exponential series.
pub(super) const EXP_SERIES_COEFFICIENTS: [f64; 13] = [
    1.0,
    1.0 / 2.0,
    1.0 / 3.0,
    1.0 / 4.0,
    1.0 / 5.0,
    1.0 / 6.0,
    1.0 / 7.0,
    1.0 / 8.0,
    1.0 / 9.0,
    1.0 / 10.0,
    1.0 / 11.0,
    1.0 / 12.0,
    1.0 / 13.0,
];

/// SplitMix64: a tiny, fast, good-enough generator for noise. Ours, so the song never changes
/// with a dependency's version or the platform.
pub(super) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for the `event_index`-th event of an instrument, independent of all others.
    pub(super) fn for_event(instrument_seed: u64, event_index: usize) -> Self {
        let mut rng = Self {
            state: instrument_seed ^ (event_index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        rng.next_u64(); // Stir the seed once so neighbouring events start far apart.
        rng
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    pub(super) fn next_bipolar(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (2.0 / (1_u64 << 53) as f64) - 1.0
    }
}
