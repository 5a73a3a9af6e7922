//! Separation quality metrics over whole stereo buffers (`[left, right]`).
//!
//! All sums are accumulated in `f64`, so a 10-minute stem at 48 kHz loses no precision. These are
//! offline measurements for tests, benchmarks and the command-line tool, not for the audio thread.

/// Signal-to-distortion ratio in dB of `estimate` against `reference` (both stereo, same length):
/// `10·log10(Σ ref² / Σ (ref − est)²)`, summed over both channels.
///
/// Returns `+inf` for a perfect estimate (also when both are silent); when the reference is
/// silent it returns `-inf` unless the estimate is silent too. A silent estimate of a non-silent
/// reference scores exactly 0 dB. NaN in either input gives NaN.
///
/// # Panics
///
/// If the four channels do not all have the same length.
///
/// Not realtime-safe: walks whole buffers.
pub fn sdr_db(reference: &[Vec<f32>; 2], estimate: &[Vec<f32>; 2]) -> f64 {
    assert_same_lengths("sdr_db", "reference", reference, "estimate", estimate);
    sdr_db_of_pairs(
        reference
            .iter()
            .zip(estimate)
            .flat_map(|(r, e)| r.iter().zip(e)),
    )
}

/// [`sdr_db`] of any two signals laid out alike (a tensor, several stems flattened): the same
/// sums over every sample, the same infinities and NaN.
///
/// # Panics
///
/// If the two have different lengths.
///
/// Not realtime-safe: walks whole buffers.
pub fn sdr_db_of_samples(reference: &[f32], estimate: &[f32]) -> f64 {
    assert_eq!(
        reference.len(),
        estimate.len(),
        "sdr_db_of_samples: reference and estimate differ in length"
    );
    sdr_db_of_pairs(reference.iter().zip(estimate))
}

fn sdr_db_of_pairs<'a>(pairs: impl Iterator<Item = (&'a f32, &'a f32)>) -> f64 {
    let mut reference_energy = 0.0_f64;
    let mut error_energy = 0.0_f64;
    for (&r, &e) in pairs {
        let r = f64::from(r);
        let error = r - f64::from(e);
        reference_energy += r * r;
        error_energy += error * error;
    }
    if error_energy.is_nan() || reference_energy.is_nan() {
        f64::NAN
    } else if error_energy == 0.0 {
        f64::INFINITY
    } else if reference_energy == 0.0 {
        f64::NEG_INFINITY
    } else {
        10.0 * (reference_energy / error_energy).log10()
    }
}

/// Peak absolute difference between two stereo buffers (over both channels), in dBFS
/// (`20·log10`), `-inf` if they are identical. NaN in either input gives NaN.
///
/// # Panics
///
/// If the four channels do not all have the same length.
///
/// Not realtime-safe: walks whole buffers.
pub fn max_abs_diff_dbfs(a: &[Vec<f32>; 2], b: &[Vec<f32>; 2]) -> f64 {
    assert_same_lengths("max_abs_diff_dbfs", "a", a, "b", b);
    let mut max_abs_diff = 0.0_f64;
    for (a_channel, b_channel) in a.iter().zip(b) {
        for (&x, &y) in a_channel.iter().zip(b_channel) {
            let abs_diff = (f64::from(x) - f64::from(y)).abs();
            if abs_diff.is_nan() {
                return f64::NAN;
            }
            max_abs_diff = max_abs_diff.max(abs_diff);
        }
    }
    if max_abs_diff == 0.0 {
        f64::NEG_INFINITY
    } else {
        20.0 * max_abs_diff.log10()
    }
}

/// Panics with a message naming the function and the buffers unless all four channels of `a`
/// and `b` have the same length.
fn assert_same_lengths(
    function: &str,
    a_name: &str,
    a: &[Vec<f32>; 2],
    b_name: &str,
    b: &[Vec<f32>; 2],
) {
    let lengths = [a[0].len(), a[1].len(), b[0].len(), b[1].len()];
    assert!(
        lengths.iter().all(|&len| len == lengths[0]),
        "{function}: length mismatch: {a_name} has [{}, {}] samples (left, right), \
         {b_name} has [{}, {}]",
        lengths[0],
        lengths[1],
        lengths[2],
        lengths[3],
    );
}

/// The frames of a file that a stream's stems and a chunked reference (MSST's `demix`) can be
/// compared over: those before the first chunk that reaches past the file's end. `demix` fills
/// such a chunk with the file's end reflected, a stream (which cannot know where the file ends)
/// with the silence after it. Chunks of `chunk_frames` start every `chunk_frames / num_overlap`
/// frames of the input padded by `chunk_frames - step` at the start.
pub fn frames_before_end_chunks(frames: usize, chunk_frames: usize, num_overlap: usize) -> usize {
    let step = chunk_frames / num_overlap;
    let border = chunk_frames - step;
    let mut start = 0;
    while start + chunk_frames <= border + frames {
        start += step;
    }
    start.saturating_sub(border)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comparable_frames_end_before_the_first_chunk_past_the_end() {
        // 13230 frames, chunks of 8192 every 4096 (padded by 4096): chunks start at 0, 4096,
        // 8192 and 12288 of the padded input; the one at 12288 ends past 13230 + 4096.
        assert_eq!(frames_before_end_chunks(13_230, 8192, 2), 8192);
        assert_eq!(frames_before_end_chunks(100, 8192, 2), 0);
    }

    /// A deterministic non-silent stereo test signal of `num_samples` samples.
    fn test_signal(num_samples: usize) -> [Vec<f32>; 2] {
        let left = (0..num_samples)
            .map(|n| (n as f32 * 0.05).sin() * 0.5)
            .collect();
        let right = (0..num_samples)
            .map(|n| (n as f32 * 0.031).cos() * 0.3)
            .collect();
        [left, right]
    }

    fn scaled(signal: &[Vec<f32>; 2], gain: f32) -> [Vec<f32>; 2] {
        signal
            .clone()
            .map(|channel| channel.into_iter().map(|x| x * gain).collect())
    }

    #[test]
    fn silent_estimate_scores_exactly_zero_db() {
        let reference = test_signal(1000);
        let silence = [vec![0.0; 1000], vec![0.0; 1000]];
        assert_eq!(sdr_db(&reference, &silence), 0.0);
    }

    #[test]
    fn half_scaled_estimate_scores_six_db() {
        let reference = test_signal(1000);
        let estimate = scaled(&reference, 0.5);
        let sdr = sdr_db(&reference, &estimate);
        assert!((sdr - 20.0 * 2.0_f64.log10()).abs() < 1e-9, "sdr = {sdr}");
        assert!((sdr - 6.0206).abs() < 1e-4, "sdr = {sdr}");
    }

    #[test]
    fn identical_estimate_is_infinite() {
        let reference = test_signal(1000);
        assert_eq!(sdr_db(&reference, &reference.clone()), f64::INFINITY);
    }

    #[test]
    fn silent_reference_is_minus_infinity_unless_estimate_is_silent() {
        let silence = [vec![0.0; 100], vec![0.0; 100]];
        assert_eq!(sdr_db(&silence, &test_signal(100)), f64::NEG_INFINITY);
        assert_eq!(sdr_db(&silence, &silence), f64::INFINITY);
    }

    #[test]
    fn sdr_sums_over_both_channels() {
        // Error only in the right channel: 10·log10((L² + R²) / R²).
        let reference = [vec![1.0; 10], vec![1.0; 10]];
        let estimate = [vec![1.0; 10], vec![0.0; 10]];
        let sdr = sdr_db(&reference, &estimate);
        assert!((sdr - 10.0 * 2.0_f64.log10()).abs() < 1e-12, "sdr = {sdr}");
    }

    #[test]
    fn sdr_of_samples_is_sdr_of_the_channels_laid_end_to_end() {
        let reference = test_signal(50);
        let mut estimate = reference.clone();
        estimate[1][7] += 0.25;
        let flat = |s: &[Vec<f32>; 2]| [s[0].as_slice(), s[1].as_slice()].concat();
        assert_eq!(
            sdr_db_of_samples(&flat(&reference), &flat(&estimate)),
            sdr_db(&reference, &estimate)
        );
        assert_eq!(
            sdr_db_of_samples(&flat(&reference), &flat(&reference)),
            f64::INFINITY
        );
    }

    #[test]
    fn max_abs_diff_of_1e_minus_5_is_minus_100_dbfs() {
        let a = test_signal(500);
        let mut b = a.clone();
        b[1][123] += 1e-5;
        let diff_dbfs = max_abs_diff_dbfs(&a, &b);
        // f32 rounding of the nudged sample moves the result by well under 0.01 dB.
        assert!((diff_dbfs - -100.0).abs() < 0.01, "diff = {diff_dbfs} dBFS");
    }

    #[test]
    fn max_abs_diff_of_identical_buffers_is_minus_infinity() {
        let a = test_signal(500);
        assert_eq!(max_abs_diff_dbfs(&a, &a.clone()), f64::NEG_INFINITY);
    }

    #[test]
    fn nan_propagates() {
        let a = test_signal(10);
        let mut b = a.clone();
        b[0][3] = f32::NAN;
        assert!(sdr_db(&a, &b).is_nan());
        assert!(max_abs_diff_dbfs(&a, &b).is_nan());
    }

    #[test]
    #[should_panic(expected = "sdr_db: length mismatch")]
    fn sdr_panics_on_length_mismatch() {
        sdr_db(&test_signal(10), &test_signal(11));
    }

    #[test]
    #[should_panic(expected = "max_abs_diff_dbfs: length mismatch")]
    fn max_abs_diff_panics_on_channel_length_mismatch() {
        let a = test_signal(10);
        let mut b = test_signal(10);
        b[1].pop();
        max_abs_diff_dbfs(&a, &b);
    }
}
