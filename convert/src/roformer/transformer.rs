//! RoFormer's transformers: layers of attention and feed-forward along one axis of the tokens
//! (in blocks of the other axis on the CPU), and the stack of time and frequency transformers.

use super::config::Variant;
use super::network::{transposed, Network};
use crate::error::ConvertError;
use crate::ops::T;

/// The largest activation of one block of a transformer layer, in bytes. ONNX Runtime's
/// allocation planner hands a freed buffer only to a tensor of the same shape and keeps it from
/// the first such tensor's start to the last one's end, so every distinct shape of a layer holds
/// its buffers through the whole network (the released BS-RoFormer: 5.1 GB, against 3.0 GB with
/// buffer reuse off, which the C API cannot ask for). Layers run in blocks of tokens, whose
/// buffers are this small.
const MAX_LAYER_ACTIVATION_BYTES: usize = 64 << 20;

/// A feed-forward layer's weights, shared by the blocks of tokens.
struct FeedForwardWeights {
    w1: T,
    b1: T,
    w2: T,
    b2: T,
}

/// The blocks `(start, end)` along `axis` of `[bands, frames, dim]` tokens that keep a layer's
/// widest activation (`width` floats per token) under [`MAX_LAYER_ACTIVATION_BYTES`] (or one
/// row of the axis, where a row alone is more): equal blocks but the last, and at least two
/// where the axis allows (so the tiny models CI runs check the blocked graph too).
fn layer_blocks(shape: &[usize], axis: usize, width: usize) -> Vec<(usize, usize)> {
    let length = shape[axis];
    let row_bytes = shape[0] * shape[1] / length.max(1) * width * std::mem::size_of::<f32>();
    let block = (MAX_LAYER_ACTIVATION_BYTES / row_bytes.max(1)).clamp(1, length.div_ceil(2).max(1));
    (0..length)
        .step_by(block)
        .map(|start| (start, (start + block).min(length)))
        .collect()
}

/// Which axis of the `[bands, frames, dim]` tokens a transformer attends along.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Axis {
    /// Along frames, per band.
    Time,
    /// Along bands, per frame.
    Frequency,
}

impl Network<'_, '_, '_, '_> {
    /// The weights of a `FeedForward` module (`key`) on tokens of width `dim`.
    fn feed_forward_weights(
        &mut self,
        key: &str,
        dim: usize,
    ) -> Result<FeedForwardWeights, ConvertError> {
        let hidden = 4 * dim;
        let scale = self.norm_scale(&format!("{key}.net.0"), dim)?;
        let w1 = self.take(&format!("{key}.net.1.weight"), &[hidden, dim])?;
        let b1 = self.take(&format!("{key}.net.1.bias"), &[hidden])?;
        let w2 = self.take(&format!("{key}.net.4.weight"), &[dim, hidden])?;
        let b2 = self.take(&format!("{key}.net.4.bias"), &[dim])?;
        let w1 = transposed(&w1, hidden, dim, Some(&scale));
        let w1 = self
            .b
            .weight(&format!("{key}.net.1.weight"), &[dim, hidden], w1)?;
        let b1 = self.b.weight(&format!("{key}.net.1.bias"), &[hidden], b1)?;
        let w2 = transposed(&w2, dim, hidden, None);
        let w2 = self
            .b
            .weight(&format!("{key}.net.4.weight"), &[hidden, dim], w2)?;
        let b2 = self.b.weight(&format!("{key}.net.4.bias"), &[dim], b2)?;
        Ok(FeedForwardWeights { w1, b1, w2, b2 })
    }

    /// `x + FeedForward(x)`, for any block of tokens.
    fn feed_forward(&mut self, x: &T, w: &FeedForwardWeights) -> Result<T, ConvertError> {
        let h = self.normed_matmul(x, &w.w1)?;
        let h = self.b.binary("Add", &h, &w.b1);
        let h = self.b.gelu(&h)?;
        let h = self.b.matmul(&h, &w.w2)?;
        let h = self.b.binary("Add", &h, &w.b2);
        Ok(self.b.binary("Add", x, &h))
    }

    /// A `Transformer` (`key`) of `depth` layers along `axis` (`None`: linear attention).
    fn transformer(
        &mut self,
        x: &T,
        key: &str,
        depth: usize,
        axis: Option<Axis>,
    ) -> Result<T, ConvertError> {
        let mut x = x.clone();
        let dim = x.shape[2];
        // On a GPU every layer attends along axis 1: a frequency transformer runs on the tokens
        // frames-major, and in one block.
        let is_gpu = self.b.is_gpu();
        let frames_major = is_gpu && axis == Some(Axis::Frequency);
        if frames_major {
            x = self.b.transpose(&x, &[1, 0, 2]);
        }
        for layer in 0..depth {
            let layer_key = format!("{key}.layers.{layer}");
            let Some(axis) = axis else {
                x = self.linear_attention(&x, &format!("{layer_key}.0"))?;
                let ff = self.feed_forward_weights(&format!("{layer_key}.1"), dim)?;
                x = self.feed_forward(&x, &ff)?;
                continue;
            };
            let attention = self.attention_weights(&format!("{layer_key}.0"), axis, &x.shape)?;
            let ff = self.feed_forward_weights(&format!("{layer_key}.1"), dim)?;
            // Attention along one axis is independent along the other, and the feed-forward
            // per token: the layer runs in blocks of that other axis (see `layer_blocks`).
            let across = match axis {
                _ if is_gpu => 0,
                Axis::Time => 0,
                Axis::Frequency => 1,
            };
            let width = self.widest_token_activation(axis, &x.shape);
            let blocks = match is_gpu {
                true => vec![(0, x.shape[across])],
                false => layer_blocks(&x.shape, across, width),
            };
            let mut outputs = Vec::new();
            for (start, end) in blocks {
                let block = if end - start == x.shape[across] {
                    x.clone()
                } else {
                    self.b.slice(&x, across, start, end)?
                };
                let attended = self.attention(&block, &attention, axis)?;
                outputs.push(self.feed_forward(&attended, &ff)?);
            }
            x = self.b.concat(&outputs, across);
        }
        if frames_major {
            x = self.b.transpose(&x, &[1, 0, 2]);
        }
        // Mel-RoFormer's transformers end in a norm (`norm_output`); BS-RoFormer's do not.
        if matches!(self.config.variant, Variant::MelBand { .. }) {
            x = self.rms_norm(&x, &format!("{key}.norm"))?;
        }
        Ok(x)
    }

    /// The `depth` blocks of (linear,) time and frequency transformers.
    pub fn transformers(&mut self, x: &T) -> Result<T, ConvertError> {
        let config = self.config;
        let mut x = x.clone();
        let mut stored: Vec<T> = Vec::new();
        for block in 0..config.depth {
            let mut index = 0;
            if config.linear_transformer_depth > 0 {
                let key = format!("layers.{block}.0");
                x = self.transformer(&x, &key, config.linear_transformer_depth, None)?;
                index = 1;
            }
            if config.skip_connection {
                for earlier in &stored {
                    x = self.b.binary("Add", &x, earlier);
                }
            }
            let time = format!("layers.{block}.{index}");
            x = self.transformer(&x, &time, config.time_transformer_depth, Some(Axis::Time))?;
            let frequency = format!("layers.{block}.{}", index + 1);
            x = self.transformer(
                &x,
                &frequency,
                config.freq_transformer_depth,
                Some(Axis::Frequency),
            )?;
            if config.skip_connection {
                stored.push(x.clone());
            }
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_blocks_cover_the_axis_in_order_and_stay_under_the_budget() {
        // The released BS-RoFormer's time layers (62 bands, 801 frames, 8 heads: scores of
        // 6408 floats per token), its frequency layers (a 2568-float projection), a tiny model.
        for (shape, axis, width) in [
            ([62, 801, 384], 0, 6408),
            ([62, 801, 384], 1, 2568),
            ([15, 129, 16], 0, 80),
            ([1, 129, 16], 0, 80),
        ] {
            let blocks = layer_blocks(&shape, axis, width);
            assert_eq!(blocks[0].0, 0);
            assert_eq!(blocks.last().unwrap().1, shape[axis]);
            assert!(blocks
                .windows(2)
                .all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
            assert_eq!(blocks.len() >= 2, shape[axis] >= 2, "{shape:?}");
            let other = shape[1 - axis];
            for (start, end) in blocks {
                let bytes = (end - start) * other * width * 4;
                assert!(
                    bytes <= MAX_LAYER_ACTIVATION_BYTES || end - start == 1,
                    "{shape:?}: {bytes}"
                );
            }
        }
    }
}
