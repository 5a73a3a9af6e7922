//! Per-channel symmetric int8 quantization of constant weights.
//!
//! Each output channel gets its own scale, `max |w| / levels` over the channel, and its weights
//! become `round(w / scale)` in −levels..=levels: zero is exact, the range is symmetric (the
//! zero point is 0), and a channel of large weights does not coarsen a channel of small ones.
//!
//! `levels` is 63 by default ([`REDUCED_RANGE_LEVELS`], 7 bits): x86 CPUs without VNNI multiply
//! uint8 activations by int8 weights with `VPMADDUBSW`, which adds two products into a
//! saturating int16 — 255 × 127 × 2 overflows it and the layer's output comes out silently wrong
//! (measured: a test graph 13 dB from its float output at 127 levels, over 30 dB at 63). ONNX
//! Runtime's own quantizer calls this `reduce_range`. [`FULL_RANGE_LEVELS`] is for models
//! that only run on VNNI or ARM CPUs.

/// Weight levels that cannot saturate the int16 sums of CPUs without VNNI.
pub const REDUCED_RANGE_LEVELS: f32 = 63.0;
/// All of int8's symmetric range.
pub const FULL_RANGE_LEVELS: f32 = 127.0;

/// Weights quantized per channel, in their original layout.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelQuantized {
    /// The quantized weights, same order as the input.
    pub values: Vec<i8>,
    /// One scale per channel: weight ≈ value × scale.
    pub scales: Vec<f32>,
}

/// Quantizes `weights`, laid out as `[outer, channels, inner]` (row-major), per channel of the
/// middle axis: a MatMul's `[K, N]` weight is `outer = K, channels = N, inner = 1`; a Conv's
/// `[M, C, k…]` is `outer = 1, channels = M, inner = C·k…`.
///
/// Errors when the layout does not cover `weights` or a weight is not finite (a NaN or an
/// infinity has no int8 value; it would come out silently wrong).
pub fn quantize_per_channel(
    weights: &[f32],
    outer: usize,
    channels: usize,
    inner: usize,
    levels: f32,
) -> Result<ChannelQuantized, String> {
    if outer
        .checked_mul(channels)
        .and_then(|n| n.checked_mul(inner))
        != Some(weights.len())
    {
        return Err(format!(
            "{} weights do not fill [{outer}, {channels}, {inner}]",
            weights.len()
        ));
    }
    if weights.iter().any(|w| !w.is_finite()) {
        return Err("a weight is NaN or infinite".into());
    }
    let channel_of = |index: usize| (index / inner) % channels;
    let mut max_abs = vec![0.0f32; channels];
    for (index, w) in weights.iter().enumerate() {
        let channel = channel_of(index);
        max_abs[channel] = max_abs[channel].max(w.abs());
    }
    // An all-zero channel keeps scale 1 (its values are all 0 whatever the scale).
    let scales: Vec<f32> = max_abs
        .iter()
        .map(|&m| if m > 0.0 { m / levels } else { 1.0 })
        .collect();
    let values = weights
        .iter()
        .enumerate()
        .map(|(index, w)| {
            (w / scales[channel_of(index)])
                .round()
                .clamp(-levels, levels) as i8
        })
        .collect();
    Ok(ChannelQuantized { values, scales })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_a_matmul_weight_get_their_own_scales() {
        // [K = 3, N = 2]: column 0 is large, column 1 small.
        let weights = [100.0, 0.012, -50.0, -0.02, 25.0, 0.004];
        let q = quantize_per_channel(&weights, 3, 2, 1, FULL_RANGE_LEVELS).unwrap();
        assert_eq!(q.scales, vec![100.0 / 127.0, 0.02 / 127.0]);
        assert_eq!(q.values, vec![127, 76, -64, -127, 32, 25]);
        for (index, (&w, &v)) in weights.iter().zip(&q.values).enumerate() {
            let scale = q.scales[index % 2];
            assert!(
                (f32::from(v) * scale - w).abs() <= scale / 2.0 + 1e-6,
                "{index}"
            );
        }
    }

    #[test]
    fn rows_of_a_conv_weight_get_their_own_scales_and_zero_rows_stay_zero() {
        // [M = 3, C·k = 4].
        let weights = [
            1.0, -2.0, 0.5, 0.0, //
            0.0, 0.0, 0.0, 0.0, //
            -0.3, 0.1, 0.2, 0.3,
        ];
        let q = quantize_per_channel(&weights, 1, 3, 4, FULL_RANGE_LEVELS).unwrap();
        assert_eq!(q.scales, vec![2.0 / 127.0, 1.0, 0.3 / 127.0]);
        assert_eq!(&q.values[..4], &[64, -127, 32, 0]);
        assert_eq!(&q.values[4..8], &[0; 4]);
        assert_eq!(q.values[8], -127);
        assert_eq!(q.values[11], 127);
    }

    #[test]
    fn the_reduced_range_keeps_within_63_levels() {
        let q =
            quantize_per_channel(&[-4.0, 1.0, 3.0, 4.0], 1, 1, 4, REDUCED_RANGE_LEVELS).unwrap();
        assert_eq!(q.values, vec![-63, 16, 47, 63]);
        assert_eq!(q.scales, vec![4.0 / 63.0]);
    }

    #[test]
    fn non_finite_weights_and_wrong_layouts_are_refused() {
        assert!(quantize_per_channel(&[1.0, f32::NAN], 1, 2, 1, REDUCED_RANGE_LEVELS).is_err());
        assert!(
            quantize_per_channel(&[1.0, f32::INFINITY], 2, 1, 1, REDUCED_RANGE_LEVELS).is_err()
        );
        assert!(quantize_per_channel(&[1.0, 2.0, 3.0], 1, 2, 1, REDUCED_RANGE_LEVELS).is_err());
        assert!(quantize_per_channel(&[1.0; 4], usize::MAX, 2, 2, REDUCED_RANGE_LEVELS).is_err());
    }
}
