//! Deterministic tiny checkpoints of the published layout, for tests of the converter and of
//! the engine's Spleeter family.

use super::{Tensor, TensorMap, INPUT_CHANNELS, NUM_STAGES};

/// The 74 arrays of a Spleeter 2-stem checkpoint (same keys, in the published order, and
/// the same ranks) with `channels` channels in every hidden layer: `down1` 2 → `channels`,
/// `up1` `channels` → `channels`, `up2`…`up5` `2·channels` → `channels`, `up6`
/// `2·channels` → 1, `up7` `[2, 1, 4, 4]`. Values come from a generator seeded with
/// `seed`: weights uniform in ±1/√fan-in, biases and BN shifts and means in ±0.1, BN
/// scales and variances in [0.5, 1.5]. Each item is `(key, shape, values)`.
pub fn tiny_unet_arrays(seed: u64, channels: usize) -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let mut random = SplitMix64(seed);
    let mut arrays = Vec::with_capacity(74);
    let mut push = |key: String, shape: Vec<usize>, low: f32, high: f32| {
        let len = shape.iter().product();
        let values = (0..len).map(|_| random.uniform(low, high)).collect();
        arrays.push((key, shape, values));
    };
    let mut in_channels = INPUT_CHANNELS;
    for stage in 1..=NUM_STAGES {
        let bound = 1.0 / ((in_channels * 25) as f32).sqrt();
        let weight_shape = vec![channels, in_channels, 5, 5];
        push(
            format!("down{stage}_conv.1.weight"),
            weight_shape,
            -bound,
            bound,
        );
        push(
            format!("down{stage}_conv.1.bias"),
            vec![channels],
            -0.1,
            0.1,
        );
        push_batch_norm(&mut push, &format!("down{stage}_act.0"), channels);
        in_channels = channels;
    }
    for stage in 1..=NUM_STAGES {
        let in_channels = if stage == 1 { channels } else { 2 * channels };
        let out_channels = if stage == NUM_STAGES { 1 } else { channels };
        let bound = 1.0 / ((in_channels * 25) as f32).sqrt();
        push(
            format!("up{stage}.0.weight"),
            vec![in_channels, out_channels, 5, 5],
            -bound,
            bound,
        );
        push(format!("up{stage}.0.bias"), vec![out_channels], -0.1, 0.1);
        push_batch_norm(&mut push, &format!("up{stage}.3"), out_channels);
    }
    push("up7.0.weight".to_owned(), vec![2, 1, 4, 4], -0.25, 0.25);
    push("up7.0.bias".to_owned(), vec![2], -0.1, 0.1);
    arrays
}

/// Borrows [`tiny_unet_arrays`]' output (or any `(key, shape, values)` list) as a
/// [`TensorMap`] for [`super::spleeter_graph`].
pub fn tensor_map(arrays: &[(String, Vec<usize>, Vec<f32>)]) -> TensorMap<'_> {
    arrays
        .iter()
        .map(|(key, shape, data)| (key.as_str(), Tensor { shape, data }))
        .collect()
}

fn push_batch_norm(
    push: &mut impl FnMut(String, Vec<usize>, f32, f32),
    prefix: &str,
    channels: usize,
) {
    push(format!("{prefix}.weight"), vec![channels], 0.5, 1.5);
    push(format!("{prefix}.bias"), vec![channels], -0.1, 0.1);
    push(format!("{prefix}.running_mean"), vec![channels], -0.1, 0.1);
    push(format!("{prefix}.running_var"), vec![channels], 0.5, 1.5);
}

/// Vigna's SplitMix64: tiny, deterministic, good enough for test weights.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[low, high)`.
    fn uniform(&mut self, low: f32, high: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        low + (high - low) * unit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_arrays_have_the_published_keys_and_ranks() {
        let arrays = tiny_unet_arrays(1, 4);
        assert_eq!(arrays.len(), 74);
        assert_eq!(arrays[0].0, "down1_conv.1.weight");
        assert_eq!(arrays[0].1, [4, 2, 5, 5]);
        assert_eq!(arrays[36].0, "up1.0.weight");
        assert_eq!(arrays[73].0, "up7.0.bias");
        let map = tensor_map(&arrays);
        assert_eq!(map["up2.0.weight"].shape, [8, 4, 5, 5]);
        assert_eq!(map["up6.0.weight"].shape, [8, 1, 5, 5]);
        assert_eq!(map["up7.0.weight"].shape, [2, 1, 4, 4]);
        assert!(map["up3.3.running_var"].data.iter().all(|v| *v > 0.0));
        assert_eq!(tiny_unet_arrays(1, 4), arrays, "deterministic");
        assert_ne!(tiny_unet_arrays(2, 4)[0].2, arrays[0].2);
    }
}
