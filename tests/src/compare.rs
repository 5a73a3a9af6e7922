//! Sample-exact comparisons with failure messages that say where and by how much.

/// `x` delayed by `delay` frames and cut (or zero-padded) to `len` frames: `y[t] = x[t - delay]`,
/// 0 before `delay`.
pub fn delayed(x: &[f32], delay: usize, len: usize) -> Vec<f32> {
    (0..len)
        .map(|t| {
            if t >= delay {
                x.get(t - delay).copied().unwrap_or(0.0)
            } else {
                0.0
            }
        })
        .collect()
}

/// The sample-wise sum of equally long channels.
pub fn sum(channels: &[&[f32]]) -> Vec<f32> {
    let len = channels.first().map_or(0, |c| c.len());
    let mut out = vec![0.0f32; len];
    for channel in channels {
        assert_eq!(channel.len(), len, "summing channels of different lengths");
        for (o, x) in out.iter_mut().zip(channel.iter()) {
            *o += *x;
        }
    }
    out
}

/// `x` scaled by `gain`.
pub fn scaled(x: &[f32], gain: f32) -> Vec<f32> {
    x.iter().map(|v| v * gain).collect()
}

/// The largest `|a[i] - b[i]|` over `range` with its index; a NaN anywhere counts as infinite.
pub fn max_abs_diff(a: &[f32], b: &[f32], range: std::ops::Range<usize>) -> (f32, usize) {
    let mut worst = (0.0f32, range.start);
    for i in range {
        let d = (a[i] - b[i]).abs();
        let d = if d.is_nan() { f32::INFINITY } else { d };
        if d > worst.0 {
            worst = (d, i);
        }
    }
    worst
}

/// The largest `|x[i]|` over `range` with its index; a NaN counts as infinite.
pub fn peak(x: &[f32], range: std::ops::Range<usize>) -> (f32, usize) {
    let mut worst = (0.0f32, range.start);
    for i in range {
        let v = if x[i].is_nan() {
            f32::INFINITY
        } else {
            x[i].abs()
        };
        if v > worst.0 {
            worst = (v, i);
        }
    }
    worst
}

/// The index of the largest `|x[i]|` over the whole channel (first one on ties).
pub fn argmax_abs(x: &[f32]) -> usize {
    peak(x, 0..x.len()).1
}

/// Panics unless `|actual[i] - expected[i]| <= tolerance` for every `i` in `range`.
#[track_caller]
pub fn assert_close(
    what: &str,
    actual: &[f32],
    expected: &[f32],
    range: std::ops::Range<usize>,
    tolerance: f32,
) {
    assert!(
        range.end <= actual.len() && range.end <= expected.len(),
        "{what}: range {range:?} outside the signals ({} and {} frames)",
        actual.len(),
        expected.len()
    );
    let (diff, at) = max_abs_diff(actual, expected, range.clone());
    assert!(
        diff <= tolerance,
        "{what}: max |error| {diff:e} (> {tolerance:e}) at frame {at} of {range:?}: \
         actual {} vs expected {}",
        actual[at],
        expected[at]
    );
}

/// Panics unless `|x[i]| <= tolerance` for every `i` in `range`.
#[track_caller]
pub fn assert_silent(what: &str, x: &[f32], range: std::ops::Range<usize>, tolerance: f32) {
    assert!(
        range.end <= x.len(),
        "{what}: range {range:?} outside the signal ({} frames)",
        x.len()
    );
    let (p, at) = peak(x, range.clone());
    assert!(
        p <= tolerance,
        "{what}: not silent over {range:?}: |x[{at}]| = {p:e} (> {tolerance:e})"
    );
}

/// Panics unless both channels have the same length and the same bits at every frame
/// (so `0.0` and `-0.0` differ, and NaNs compare by payload).
#[track_caller]
pub fn assert_bit_identical(what: &str, a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{what}: lengths differ");
    if let Some(i) = (0..a.len()).find(|&i| a[i].to_bits() != b[i].to_bits()) {
        let differing = (0..a.len())
            .filter(|&i| a[i].to_bits() != b[i].to_bits())
            .count();
        let (diff, at) = max_abs_diff(a, b, 0..a.len());
        panic!(
            "{what}: first difference at frame {i} ({:e} vs {:e}); {differing} of {} frames \
             differ; max |diff| {diff:e} at frame {at}",
            a[i],
            b[i],
            a.len()
        );
    }
}

/// [`assert_bit_identical`] for every channel of every port (`ports[port][channel][frame]`), the
/// port and channel named after `what`.
#[track_caller]
pub fn assert_ports_bit_identical(what: &str, a: &[Vec<Vec<f32>>], b: &[Vec<Vec<f32>>]) {
    for (p, (port_a, port_b)) in a.iter().zip(b).enumerate() {
        for (c, (x, y)) in port_a.iter().zip(port_b).enumerate() {
            assert_bit_identical(&format!("{what}, port {p} ch {c}"), x, y);
        }
    }
}

/// Whether `x` is a subnormal (denormal) float.
pub fn is_subnormal(x: f32) -> bool {
    x != 0.0 && x.abs() < f32::MIN_POSITIVE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delayed_shifts_and_pads() {
        assert_eq!(
            delayed(&[1.0, 2.0, 3.0], 2, 5),
            vec![0.0, 0.0, 1.0, 2.0, 3.0]
        );
        assert_eq!(delayed(&[1.0, 2.0, 3.0], 0, 2), vec![1.0, 2.0]);
    }

    #[test]
    fn nan_is_never_close() {
        let (d, at) = max_abs_diff(&[0.0, f32::NAN], &[0.0, 0.0], 0..2);
        assert!(d.is_infinite());
        assert_eq!(at, 1);
    }

    #[test]
    #[should_panic(expected = "first difference at frame 1")]
    fn bit_identity_sees_signed_zero() {
        assert_bit_identical("zeros", &[0.0, 0.0], &[0.0, -0.0]);
    }

    #[test]
    fn subnormals_are_detected() {
        assert!(is_subnormal(1e-40));
        assert!(!is_subnormal(0.0));
        assert!(!is_subnormal(f32::MIN_POSITIVE));
    }
}
