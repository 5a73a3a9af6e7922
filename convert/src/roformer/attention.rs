//! RoFormer's attention: MSST's `Attention` (rotary embeddings, gates) along one axis of the
//! tokens, and `LinearAttention` over all of them.

use super::network::{transposed, Network};
use super::transformer::Axis;
use crate::error::ConvertError;
use crate::ops::{Builder, T};

/// Attention weights computed at once (per block of bands or frames): 128 MB of float32.
const MAX_SCORES_PER_BLOCK: usize = 32 << 20;

/// Rotary embeddings' buffers that caches leave in some checkpoints; they change nothing.
const ROTARY_CACHE_BUFFERS: [&str; 4] = ["cached_freqs", "cached_scales", "dummy", "scale"];

/// An attention layer's weights and rotary tables, shared by the blocks of tokens.
pub(super) struct AttentionWeights {
    projection: T,
    cos: T,
    sin: T,
    gate_bias: T,
    out: T,
}

/// `cos` and `sin` of the rotary angles `position · freq` (float32 products, as
/// `rotary_embedding_torch` computes them) for `length` positions, each frequency repeated
/// for its pair of channels: `[length, dim_head]` each.
fn rotary_tables(freqs: &[f32], length: usize) -> (Vec<f32>, Vec<f32>) {
    let dim_head = 2 * freqs.len();
    let (mut cos, mut sin) = (
        vec![0.0f32; length * dim_head],
        vec![0.0f32; length * dim_head],
    );
    for p in 0..length {
        for (j, &freq) in freqs.iter().enumerate() {
            let angle = f64::from(p as f32 * freq);
            for r in 0..2 {
                cos[p * dim_head + 2 * j + r] = angle.cos() as f32;
                sin[p * dim_head + 2 * j + r] = angle.sin() as f32;
            }
        }
    }
    (cos, sin)
}

impl Network<'_, '_, '_, '_> {
    /// The widest per-token activation of an attention or feed-forward layer along `axis` of
    /// `[bands, frames, dim]` tokens, in floats: the attention's projection (q, k, v, their
    /// rotations and the gates), its scores (one per head and token attended to), or the
    /// feed-forward's hidden layer.
    pub(super) fn widest_token_activation(&self, axis: Axis, shape: &[usize]) -> usize {
        let inner = self.config.heads * self.config.dim_head;
        let attended = match axis {
            Axis::Time => shape[1],
            Axis::Frequency => shape[0],
        };
        (5 * inner + self.config.heads)
            .max(4 * self.config.dim)
            .max(self.config.heads * attended)
    }

    /// The rotary embedding of `key`'s attention: its `freqs`, and any cache buffers dropped.
    fn rotary_freqs(&mut self, key: &str) -> Result<Vec<f32>, ConvertError> {
        for buffer in ROTARY_CACHE_BUFFERS {
            let name = format!("{key}.rotary_embed.{buffer}");
            if self.state.has(&name) {
                self.state.take_any(&name)?;
            }
        }
        let half = self.config.dim_head / 2;
        self.take(&format!("{key}.rotary_embed.freqs"), &[half])
    }

    /// The weights of an `Attention` module (`key`) along `axis` of `[bands, frames, dim]`
    /// tokens, as graph tensors made once for every block of tokens.
    pub(super) fn attention_weights(
        &mut self,
        key: &str,
        axis: Axis,
        tokens_shape: &[usize],
    ) -> Result<AttentionWeights, ConvertError> {
        let dim = tokens_shape[2];
        let (heads, dim_head) = (self.config.heads, self.config.dim_head);
        let inner = heads * dim_head;
        let scale = self.norm_scale(&format!("{key}.norm"), dim)?;
        let qkv = self.take(&format!("{key}.to_qkv.weight"), &[3 * inner, dim])?;
        let gates = self.take(&format!("{key}.to_gates.weight"), &[heads, dim])?;
        let gate_bias = self.take(&format!("{key}.to_gates.bias"), &[heads])?;
        let out = self.take(&format!("{key}.to_out.0.weight"), &[dim, inner])?;
        let freqs = self.rotary_freqs(key)?;

        // One projection to q·s, k, v, rotate_half(q·s), rotate_half(k), gates: rotate_half is
        // a signed permutation of each head's channels, so it is folded into the weights, and
        // the softmax scale s = dim_head^-½ into q's.
        let attention_scale = (dim_head as f64).powf(-0.5) as f32;
        let row = |w: &[f32], o: usize| w[o * dim..(o + 1) * dim].to_vec();
        let mut rows: Vec<Vec<f32>> = Vec::with_capacity(5 * inner + heads);
        let q_rows: Vec<Vec<f32>> = (0..inner)
            .map(|o| {
                row(&qkv, o)
                    .into_iter()
                    .map(|w| w * attention_scale)
                    .collect()
            })
            .collect();
        let k_rows: Vec<Vec<f32>> = (0..inner).map(|o| row(&qkv, inner + o)).collect();
        let rotated = |source: &[Vec<f32>]| -> Vec<Vec<f32>> {
            (0..inner)
                .map(|o| {
                    if o % 2 == 0 {
                        source[o + 1].iter().map(|w| -w).collect()
                    } else {
                        source[o - 1].clone()
                    }
                })
                .collect()
        };
        let (q_rotated, k_rotated) = (rotated(&q_rows), rotated(&k_rows));
        rows.extend(q_rows);
        rows.extend(k_rows);
        rows.extend((0..inner).map(|o| row(&qkv, 2 * inner + o)));
        rows.extend(q_rotated);
        rows.extend(k_rotated);
        rows.extend((0..heads).map(|h| row(&gates, h)));
        let width = rows.len();
        let flat: Vec<f32> = rows.into_iter().flatten().collect();
        let projection = transposed(&flat, width, dim, Some(&scale));
        let projection = self
            .b
            .weight(&format!("{key}.projection"), &[dim, width], projection)?;
        let (length, table_shape) = match axis {
            // A GPU graph attends along axis 1 whichever the transformer ([`Axis`]).
            _ if self.b.is_gpu() => (tokens_shape[1], vec![tokens_shape[1], 1, dim_head]),
            Axis::Time => (tokens_shape[1], vec![tokens_shape[1], 1, dim_head]),
            Axis::Frequency => (tokens_shape[0], vec![tokens_shape[0], 1, 1, dim_head]),
        };
        let (cos, sin) = rotary_tables(&freqs, length);
        let cos = self.b.constant("rotary_cos", &table_shape, cos)?;
        let sin = self.b.constant("rotary_sin", &table_shape, sin)?;
        let gate_bias = self
            .b
            .weight(&format!("{key}.to_gates.bias"), &[heads], gate_bias)?;
        let out = transposed(&out, dim, inner, None);
        let out = self
            .b
            .weight(&format!("{key}.to_out.0.weight"), &[inner, dim], out)?;
        Ok(AttentionWeights {
            projection,
            cos,
            sin,
            gate_bias,
            out,
        })
    }

    /// `x + Attention(x)` along `axis`, for a block of tokens `[bands, frames, dim]` (all of
    /// them along `axis`).
    pub(super) fn attention(
        &mut self,
        x: &T,
        w: &AttentionWeights,
        axis: Axis,
    ) -> Result<T, ConvertError> {
        let (bands, frames) = (x.shape[0], x.shape[1]);
        let (heads, dim_head) = (self.config.heads, self.config.dim_head);
        let inner = heads * dim_head;
        let projected = self.normed_matmul(x, &w.projection)?;
        let parts = self
            .b
            .split(&projected, 2, &[inner, inner, inner, inner, inner, heads])?;
        let heads_shape = [bands, frames, heads, dim_head];
        let rotate = |b: &mut Builder, plain: &T, turned: &T| -> Result<T, ConvertError> {
            let plain = b.reshape(plain, &heads_shape)?;
            let turned = b.reshape(turned, &heads_shape)?;
            let a = b.binary("Mul", &plain, &w.cos);
            let c = b.binary("Mul", &turned, &w.sin);
            Ok(b.binary("Add", &a, &c))
        };
        let q = rotate(self.b, &parts[0], &parts[3])?;
        let k = rotate(self.b, &parts[1], &parts[4])?;
        let v = match self.b.is_gpu() {
            true => parts[2].clone(),
            false => self.b.reshape(&parts[2], &heads_shape)?,
        };
        let attended = if self.b.is_gpu() {
            // One fused kernel over `[tokens along axis 0, sequence, heads · d]`.
            let sequence = [bands, frames, inner];
            let (q, k, v) = (
                self.b.reshape(&q, &sequence)?,
                self.b.reshape(&k, &sequence)?,
                self.b.reshape(&parts[2], &sequence)?,
            );
            let attended = self.b.multi_head_attention([&q, &k, &v], heads, 1.0);
            self.b.reshape(&attended, &heads_shape)?
        } else {
            self.attention_on_cpu([&q, &k, &v], axis)?
        };
        let gate = self.b.binary("Add", &parts[5], &w.gate_bias);
        let gate = self.b.unary("Sigmoid", &gate);
        let gate = self.b.reshape(&gate, &[bands, frames, heads, 1])?;
        let gated = self.b.binary("Mul", &attended, &gate);
        let gated = self.b.reshape(&gated, &[bands, frames, inner])?;
        let out = self.b.matmul(&gated, &w.out)?;
        Ok(self.b.binary("Add", x, &out))
    }

    /// Attention of `q`, `k`, `v` `[bands, frames, heads, d]` along `axis` as plain operators,
    /// in blocks.
    fn attention_on_cpu(&mut self, [q, k, v]: [&T; 3], axis: Axis) -> Result<T, ConvertError> {
        // [bands, frames, heads, d] → [batch, heads, sequence, d] and back.
        let (to_heads, to_keys, from_heads): (&[usize], &[usize], &[usize]) = match axis {
            Axis::Time => (&[0, 2, 1, 3], &[0, 2, 3, 1], &[0, 2, 1, 3]),
            Axis::Frequency => (&[1, 2, 0, 3], &[1, 2, 3, 0], &[2, 0, 1, 3]),
        };
        let q = self.b.transpose(q, to_heads);
        let k_t = self.b.transpose(k, to_keys);
        let v = self.b.transpose(v, to_heads);
        let attended = self
            .b
            .attention_in_blocks(&q, &k_t, &v, 0, MAX_SCORES_PER_BLOCK)?;
        Ok(self.b.transpose(&attended, from_heads))
    }

    /// `x + LinearAttention(x)` over all tokens at once (`key`: the module).
    pub(super) fn linear_attention(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        let dim = x.shape[2];
        let tokens = x.shape[0] * x.shape[1];
        let (heads, dim_head) = (self.config.heads, self.config.dim_head);
        let inner = heads * dim_head;
        let scale = self.norm_scale(&format!("{key}.norm"), dim)?;
        let qkv = self.take(&format!("{key}.to_qkv.0.weight"), &[3 * inner, dim])?;
        let temperature = self.take(&format!("{key}.temperature"), &[heads, 1, 1])?;
        let out = self.take(&format!("{key}.to_out.1.weight"), &[dim, inner])?;
        let flat = self.b.reshape(x, &[tokens, dim])?;
        let weight = transposed(&qkv, 3 * inner, dim, Some(&scale));
        let weight = self
            .b
            .weight(&format!("{key}.to_qkv.0.weight"), &[dim, 3 * inner], weight)?;
        let projected = self.normed_matmul(&flat, &weight)?;
        // 'b n (qkv h d) -> qkv b h d n'
        let projected = self.b.reshape(&projected, &[tokens, 3, heads, dim_head])?;
        let projected = self.b.transpose(&projected, &[1, 2, 3, 0]);
        let parts = self.b.split(&projected, 0, &[1, 1, 1])?;
        let mut qkv = Vec::new();
        for part in &parts {
            qkv.push(self.b.reshape(part, &[heads, dim_head, tokens])?);
        }
        // l2norm over the sequence, then q · exp(temperature) · 8 (Attend's scale).
        let q_divisor = self.b.l2_norm_divisor(&qkv[0])?;
        let k_divisor = self.b.l2_norm_divisor(&qkv[1])?;
        let q = self.b.binary("Div", &qkv[0], &q_divisor);
        let k = self.b.binary("Div", &qkv[1], &k_divisor);
        let factor: Vec<f32> = temperature
            .iter()
            .map(|&t| f64::from(t).exp() as f32)
            .collect();
        let factor = self
            .b
            .constant("linear_attention_temperature", &[heads, 1, 1], factor)?;
        let q = self.b.binary("Mul", &q, &factor);
        let eight = self.b.scalar(8.0)?;
        let q = self.b.binary("Mul", &q, &eight);
        let k_t = self.b.transpose(&k, &[0, 2, 1]);
        let attended = self
            .b
            .attention_in_blocks(&q, &k_t, &qkv[2], 0, MAX_SCORES_PER_BLOCK)?;
        // 'b h d n -> b n (h d)'
        let attended = self.b.transpose(&attended, &[2, 0, 1]);
        let attended = self.b.reshape(&attended, &[tokens, inner])?;
        let out = transposed(&out, dim, inner, None);
        let out = self
            .b
            .weight(&format!("{key}.to_out.1.weight"), &[inner, dim], out)?;
        let out = self.b.matmul(&attended, &out)?;
        let out = self.b.reshape(&out, &x.shape)?;
        Ok(self.b.binary("Add", x, &out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotary_tables_pair_channels_and_start_at_angle_zero() {
        let (cos, sin) = rotary_tables(&[1.0, 0.5], 3);
        assert_eq!(&cos[..4], &[1.0; 4]);
        assert_eq!(&sin[..4], &[0.0; 4]);
        // Position 2: angles 2 and 1, each for two channels.
        assert_eq!(cos[8], 2.0f64.cos() as f32);
        assert_eq!(cos[9], cos[8]);
        assert_eq!(sin[10], 1.0f64.sin() as f32);
    }
}
