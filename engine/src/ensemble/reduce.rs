//! The per-element reductions of an ensemble ([`Reduction`]): the members' values of one sample
//! or one STFT bin become one, as numpy computes them in MSST's and UVR's code.

use realfft::num_complex::{Complex32, Complex64};

use super::method::{Reduction, TieBreak};

/// The index of the member `key` picks: the largest or smallest key, ties to the first or last
/// member.
fn pick(keys: impl Iterator<Item = f32>, is_largest: bool, tie: TieBreak) -> usize {
    let mut best_index = 0;
    let mut best = f32::NAN;
    for (index, key) in keys.enumerate() {
        let is_better = if index == 0 {
            true
        } else if is_largest {
            key > best || (tie == TieBreak::Last && key == best)
        } else {
            key < best || (tie == TieBreak::Last && key == best)
        };
        if is_better {
            best = key;
            best_index = index;
        }
    }
    best_index
}

/// Combines the members' values of one sample. `weights` has one weight per value (used by
/// [`Reduction::Mean`]); `scratch` holds at least as many values (the median sorts there).
/// Realtime-safe.
pub fn reduce_samples(
    reduction: Reduction,
    values: &[f32],
    weights: &[f64],
    scratch: &mut [f32],
) -> f32 {
    match reduction {
        Reduction::Mean => {
            let mut sum = 0.0;
            for (&value, &weight) in values.iter().zip(weights) {
                sum += f64::from(value) * weight;
            }
            (sum / weights.iter().sum::<f64>()) as f32
        }
        Reduction::Median => {
            let sorted = &mut scratch[..values.len()];
            sorted.copy_from_slice(values);
            sorted.sort_unstable_by(f32::total_cmp);
            let middle = sorted.len() / 2;
            if sorted.len() % 2 == 1 {
                sorted[middle]
            } else {
                // numpy: the mean of the two middle values, in the values' precision.
                (sorted[middle - 1] + sorted[middle]) / 2.0
            }
        }
        Reduction::Smallest(tie) => values[pick(values.iter().map(|v| v.abs()), false, tie)],
        Reduction::Largest(tie) => values[pick(values.iter().map(|v| v.abs()), true, tie)],
    }
}

/// numpy's `np.abs` of a complex64: `hypotf`, in single precision, so that members whose
/// magnitudes differ in the last bit are ordered as numpy orders them.
fn magnitude(value: &Complex32) -> f32 {
    value.re.hypot(value.im)
}

/// numpy's order of complex numbers: by real part, then by imaginary part.
fn complex_order(a: &Complex32, b: &Complex32) -> std::cmp::Ordering {
    a.re.total_cmp(&b.re).then(a.im.total_cmp(&b.im))
}

/// Combines the members' values of one STFT bin (complex64, as librosa's STFT of float32 audio
/// gives them). `weights` and `scratch` as in [`reduce_samples`]. Realtime-safe.
pub fn reduce_bins(
    reduction: Reduction,
    values: &[Complex32],
    weights: &[f64],
    scratch: &mut [Complex32],
) -> Complex64 {
    let widen = |v: Complex32| Complex64::new(f64::from(v.re), f64::from(v.im));
    match reduction {
        Reduction::Mean => {
            let mut sum = Complex64::new(0.0, 0.0);
            for (&value, &weight) in values.iter().zip(weights) {
                sum += widen(value) * weight;
            }
            sum / weights.iter().sum::<f64>()
        }
        Reduction::Median => {
            let sorted = &mut scratch[..values.len()];
            sorted.copy_from_slice(values);
            sorted.sort_unstable_by(complex_order);
            let middle = sorted.len() / 2;
            if sorted.len() % 2 == 1 {
                widen(sorted[middle])
            } else {
                widen((sorted[middle - 1] + sorted[middle]) / 2.0)
            }
        }
        Reduction::Smallest(tie) => widen(values[pick(values.iter().map(magnitude), false, tie)]),
        Reduction::Largest(tie) => widen(values[pick(values.iter().map(magnitude), true, tie)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: TieBreak = TieBreak::First;
    const LAST: TieBreak = TieBreak::Last;

    fn samples(reduction: Reduction, values: &[f32], weights: &[f64]) -> f32 {
        reduce_samples(reduction, values, weights, &mut [0.0; 8])
    }

    #[test]
    fn sample_reductions_follow_numpy() {
        let ones = [1.0; 4];
        assert_eq!(samples(Reduction::Mean, &[1.0, 2.0], &[3.0, 1.0]), 1.25);
        assert_eq!(samples(Reduction::Median, &[3.0, -1.0, 2.0], &ones), 2.0);
        assert_eq!(
            samples(Reduction::Median, &[3.0, -1.0, 2.0, 0.0], &ones),
            1.0
        );
        assert_eq!(
            samples(Reduction::Largest(FIRST), &[0.5, -0.75, 0.25], &ones),
            -0.75
        );
        assert_eq!(
            samples(Reduction::Smallest(FIRST), &[0.5, -0.75, 0.25], &ones),
            0.25
        );
        // Equal magnitudes: numpy's argmax takes the first, UVR's folded `>=` the last.
        assert_eq!(samples(Reduction::Largest(FIRST), &[0.5, -0.5], &ones), 0.5);
        assert_eq!(samples(Reduction::Largest(LAST), &[0.5, -0.5], &ones), -0.5);
        assert_eq!(
            samples(Reduction::Smallest(LAST), &[0.5, -0.5], &ones),
            -0.5
        );
    }

    #[test]
    fn bin_reductions_follow_numpy() {
        let c = Complex32::new;
        let ones = [1.0; 4];
        let mut scratch = [Complex32::default(); 4];
        let values = [c(1.0, 5.0), c(1.0, -2.0), c(-3.0, 0.0)];
        // Ordered by real part, then imaginary part: (-3, 0), (1, -2), (1, 5).
        assert_eq!(
            reduce_bins(Reduction::Median, &values, &ones, &mut scratch),
            Complex64::new(1.0, -2.0)
        );
        assert_eq!(
            reduce_bins(Reduction::Largest(FIRST), &values, &ones, &mut scratch),
            Complex64::new(1.0, 5.0)
        );
        assert_eq!(
            reduce_bins(Reduction::Smallest(FIRST), &values, &ones, &mut scratch),
            Complex64::new(1.0, -2.0)
        );
        let tied = [c(3.0, 4.0), c(-5.0, 0.0)];
        assert_eq!(
            reduce_bins(Reduction::Largest(FIRST), &tied, &ones, &mut scratch),
            Complex64::new(3.0, 4.0)
        );
        assert_eq!(
            reduce_bins(Reduction::Largest(LAST), &tied, &ones, &mut scratch),
            Complex64::new(-5.0, 0.0)
        );
        assert_eq!(
            reduce_bins(Reduction::Mean, &tied, &[1.0, 3.0], &mut scratch),
            Complex64::new(-3.0, 1.0)
        );
    }
}
