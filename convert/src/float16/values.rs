//! float32 values to float16: nearest, ties to even; finite values beyond float16's range
//! clamp to its largest finite value instead of becoming infinite, and nonzero values below its
//! smallest one stay nonzero.

use half::f16;

/// float16's largest finite value.
pub const MAX_FINITE_F16: f32 = 65504.0;
/// float16's smallest positive value (a subnormal, 2^-24).
pub const MIN_POSITIVE_F16: f32 = 5.960_464_5e-8;

/// Converted values, little-endian float16 bytes, and how many finite values had to clamp.
pub struct HalfValues {
    /// Two bytes per value.
    pub bytes: Vec<u8>,
    /// Finite values whose magnitude exceeds [`MAX_FINITE_F16`], now ±65504.
    pub num_clamped: usize,
}

/// Converts `values` to float16. Infinities and NaN stay what they are (masks of −∞ keep
/// masking); a finite value too large for float16 becomes ±65504, not ±∞, so one large weight
/// cannot turn a whole layer's output into infinities; a nonzero value too small for float16
/// becomes ±2^-24, not 0, so an epsilon stays one (a norm's `x / max(‖x‖, 1e-12)` of a silent
/// token is 0, not 0/0 = NaN).
pub fn to_half(values: &[f32]) -> HalfValues {
    let mut num_clamped = 0;
    let mut bytes = Vec::with_capacity(values.len() * 2);
    for &value in values {
        let value = if value.is_finite() && value.abs() > MAX_FINITE_F16 {
            num_clamped += 1;
            MAX_FINITE_F16.copysign(value)
        } else if value != 0.0 && value.abs() < MIN_POSITIVE_F16 {
            MIN_POSITIVE_F16.copysign(value)
        } else {
            value
        };
        bytes.extend_from_slice(&f16::from_f32(value).to_le_bytes());
    }
    HalfValues { bytes, num_clamped }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn back(bytes: &[u8]) -> Vec<f32> {
        bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect()
    }

    #[test]
    fn values_round_to_the_nearest_half_and_ties_go_to_even() {
        // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even (1). 1 + 3·2^-11 lies
        // halfway between 1 + 2^-10 and 1 + 2^-9: ties to even (1 + 2^-9).
        let halfway = 1.0 + 2f32.powi(-11);
        let next_halfway = 1.0 + 3.0 * 2f32.powi(-11);
        let out = to_half(&[0.0, -0.5, 1.0, halfway, next_halfway, 0.1]);
        let values = back(&out.bytes);
        assert_eq!(values[..4], [0.0, -0.5, 1.0, 1.0]);
        assert_eq!(values[4], 1.0 + 2f32.powi(-9));
        assert!(
            (values[5] - 0.1).abs() < 0.1 * 2f32.powi(-11),
            "{}",
            values[5]
        );
        assert_eq!(out.num_clamped, 0);
    }

    #[test]
    fn tiny_values_stay_nonzero_and_zeros_stay_zero() {
        let out = to_half(&[1e-12, -1e-30, 0.0, -0.0, 1e-7]);
        let values = back(&out.bytes);
        assert_eq!(values[..2], [MIN_POSITIVE_F16, -MIN_POSITIVE_F16]);
        assert_eq!(values[2].to_bits(), 0.0f32.to_bits());
        assert_eq!(values[3].to_bits(), (-0.0f32).to_bits());
        assert!((values[4] - 1e-7).abs() < MIN_POSITIVE_F16);
        assert_eq!(f16::from_f32(MIN_POSITIVE_F16).to_bits(), 1);
    }

    #[test]
    fn large_values_clamp_and_infinities_and_nan_stay() {
        let out = to_half(&[
            1e6,
            -70000.0,
            65504.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
        ]);
        let values = back(&out.bytes);
        assert_eq!(
            values[..5],
            [65504.0, -65504.0, 65504.0, f32::INFINITY, f32::NEG_INFINITY]
        );
        assert!(values[5].is_nan());
        assert_eq!(out.num_clamped, 2, "65504 itself fits");
    }

    #[test]
    fn tiny_values_become_subnormals_never_zero() {
        let smallest = 2f32.powi(-24);
        let values = back(&to_half(&[smallest, smallest * 0.4, -smallest * 3.0]).bytes);
        assert_eq!(values, [smallest, smallest, -smallest * 3.0]);
    }
}
