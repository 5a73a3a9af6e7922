//! Small sample-level helpers shared by the audio side and the worker.

/// Replaces NaN and ±Inf with silence and flushes subnormals to zero.
///
/// Realtime-safe.
#[inline]
pub fn sanitize_sample(sample: f32) -> f32 {
    // `is_normal()` is false for zero, subnormals, infinities and NaN: all become 0.0.
    if sample.is_normal() {
        sample
    } else {
        0.0
    }
}

/// Sanitizes a slice in place, see [`sanitize_sample`]. Returns how many samples were not finite.
///
/// Realtime-safe.
#[inline]
pub fn sanitize_in_place(samples: &mut [f32]) -> usize {
    let mut num_non_finite = 0;
    for sample in samples.iter_mut() {
        num_non_finite += usize::from(!sample.is_finite());
        *sample = sanitize_sample(*sample);
    }
    num_non_finite
}

/// Flushes a subnormal value to zero, leaving everything else as it is.
///
/// Realtime-safe.
#[inline]
pub fn flush_subnormal(sample: f32) -> f32 {
    if sample.is_subnormal() {
        0.0
    } else {
        sample
    }
}

/// A periodic Hann window of `len` samples, raised to the power `exponent` (0.5 gives the
/// square-root Hann used for 50 % overlap analysis/synthesis pairs).
///
/// Not realtime-safe: allocates.
pub fn periodic_hann(len: usize, exponent: f64) -> Vec<f32> {
    (0..len)
        .map(|n| {
            let phase = 2.0 * std::f64::consts::PI * n as f64 / len as f64;
            (0.5 - 0.5 * phase.cos()).powf(exponent) as f32
        })
        .collect()
}

/// A raised-cosine ramp: 0 at or below `start`, 1 at or above `end`, smooth in between.
/// With `start > end` the ramp falls instead.
#[inline]
pub fn raised_cosine_step(x: f32, start: f32, end: f32) -> f32 {
    let t = ((x - start) / (end - start)).clamp(0.0, 1.0);
    0.5 - 0.5 * (std::f32::consts::PI * t).cos()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_non_finite_and_subnormal() {
        let mut samples = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -0.5,
            0.25,
            0.0,
        ];
        let num_bad = sanitize_in_place(&mut samples);
        assert_eq!(num_bad, 3);
        assert_eq!(samples, [0.0, 0.0, 0.0, 0.0, -0.5, 0.25, 0.0]);
    }

    #[test]
    fn sqrt_hann_pairs_sum_to_one_at_half_overlap() {
        let len = 64;
        let window = periodic_hann(len, 0.5);
        for n in 0..len / 2 {
            let sum = window[n] * window[n] + window[n + len / 2] * window[n + len / 2];
            assert!((sum - 1.0).abs() < 1e-6, "n={n} sum={sum}");
        }
    }

    #[test]
    fn raised_cosine_step_is_monotonic_and_bounded() {
        assert_eq!(raised_cosine_step(100.0, 150.0, 250.0), 0.0);
        assert_eq!(raised_cosine_step(300.0, 150.0, 250.0), 1.0);
        assert!((raised_cosine_step(200.0, 150.0, 250.0) - 0.5).abs() < 1e-6);
        // Falling ramp.
        assert_eq!(raised_cosine_step(100.0, 250.0, 150.0), 1.0);
        assert_eq!(raised_cosine_step(300.0, 250.0, 150.0), 0.0);
    }
}
