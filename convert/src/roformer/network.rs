//! The RoFormer network (MSST `models/bs_roformer/bs_roformer.py` and `mel_band_roformer.py`):
//! band split, the axial transformers, the mask estimators.
//!
//! Tokens stay bands-major, `[bands, frames, dim]`, for the whole network: a time transformer
//! attends along axis 1 and a frequency transformer along axis 0, and the permutation each
//! needs is folded into the transposes that split heads off anyway, so the activations are
//! never transposed between transformers (MSST rearranges `b t f d` twice per block). Each
//! RMSNorm followed by a linear layer (every norm but the Mel-RoFormer transformers' output
//! norms) is folded into that layer's weights: `normalize(x)·√d·γ @ W = (x @ (√d·γ·W)) / ‖x‖`.

use super::config::{RoFormerConfig, Variant};
use crate::error::ConvertError;
use crate::ops::{Builder, T};
use crate::state::ModelState;
use crate::torch::Tensor;

/// Attention weights computed at once (per block of bands or frames): 128 MB of float32.
const MAX_SCORES_PER_BLOCK: usize = 32 << 20;

/// Rotary embeddings' buffers that caches leave in some checkpoints; they change nothing.
const ROTARY_CACHE_BUFFERS: [&str; 4] = ["cached_freqs", "cached_scales", "dummy", "scale"];

/// The largest activation of one block of a transformer layer, in bytes. ONNX Runtime's
/// allocation planner hands a freed buffer only to a tensor of the same shape and keeps it from
/// the first such tensor's start to the last one's end, so every distinct shape of a layer holds
/// its buffers through the whole network (the released BS-RoFormer: 5.1 GB, against 3.0 GB with
/// buffer reuse off, which the C API cannot ask for). Layers run in blocks of tokens, whose
/// buffers are this small.
const MAX_LAYER_ACTIVATION_BYTES: usize = 64 << 20;

/// An attention layer's weights and rotary tables, shared by the blocks of tokens.
struct AttentionWeights {
    projection: T,
    cos: T,
    sin: T,
    gate_bias: T,
    out: T,
}

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
enum Axis {
    /// Along frames, per band.
    Time,
    /// Along bands, per frame.
    Frequency,
}

/// The graph under construction with the checkpoint's tensors and the config.
pub(super) struct Network<'n, 'g, 'c, 'a> {
    /// The graph.
    pub b: &'n mut Builder<'g>,
    /// The tensors, each taken once.
    pub state: ModelState<'c, Tensor<'a>>,
    /// The hyper-parameters.
    pub config: &'n RoFormerConfig,
}

/// `weight` `[out, in]` transposed to `[in, out]`, each input row scaled by `scale[in]`.
fn transposed(weight: &[f32], out: usize, input: usize, scale: Option<&[f32]>) -> Vec<f32> {
    let mut values = vec![0.0f32; out * input];
    for o in 0..out {
        for i in 0..input {
            let factor = scale.map_or(1.0, |s| s[i]);
            values[i * out + o] = weight[o * input + i] * factor;
        }
    }
    values
}

/// Consecutive runs of equal sizes: `(first index, count, size)`.
pub(super) fn runs(sizes: &[usize]) -> Vec<(usize, usize, usize)> {
    let mut runs: Vec<(usize, usize, usize)> = Vec::new();
    for (index, &size) in sizes.iter().enumerate() {
        match runs.last_mut() {
            Some((_, count, last)) if *last == size => *count += 1,
            _ => runs.push((index, 1, size)),
        }
    }
    runs
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
    /// Takes `key` with `shape`.
    fn take(&mut self, key: &str, shape: &[usize]) -> Result<Vec<f32>, ConvertError> {
        self.state.take(key, shape)
    }

    /// An RMSNorm's `√dim · γ` (`key` is the norm's prefix).
    fn norm_scale(&mut self, key: &str, dim: usize) -> Result<Vec<f32>, ConvertError> {
        let scale = (dim as f64).sqrt() as f32;
        Ok(self
            .take(&format!("{key}.gamma"), &[dim])?
            .into_iter()
            .map(|g| scale * g)
            .collect())
    }

    /// `x / max(‖x‖, eps) · √dim · γ`: an RMSNorm that is not followed by a linear layer.
    fn rms_norm(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        let dim = *x.shape.last().expect("tokens");
        let scale = self.norm_scale(key, dim)?;
        let divisor = self.b.l2_norm_divisor(x)?;
        let normalised = self.b.binary("Div", x, &divisor);
        let scale = self.b.weight(&format!("{key}.scale"), &[dim], scale)?;
        Ok(self.b.binary("Mul", &normalised, &scale))
    }

    /// The band split: `[1, features, frames, 2]` spectrum rows (already gathered into band
    /// order) to tokens `[bands, frames, dim]`; `widths` are the bands' input features.
    pub fn band_split(&mut self, rows: &T, widths: &[usize]) -> Result<T, ConvertError> {
        let (features, frames) = (rows.shape[1], rows.shape[2]);
        let dim = self.config.dim;
        // 'b f t c -> b t (f c)'
        let x = self.b.transpose(rows, &[0, 2, 1, 3]);
        let x = self.b.reshape(&x, &[frames, features * 2])?;
        let mut groups = Vec::new();
        let mut offset = 0;
        for (first, count, width) in runs(widths) {
            let part = self.b.slice(&x, 1, offset, offset + count * width)?;
            offset += count * width;
            let part = if count == 1 {
                self.b.reshape(&part, &[1, frames, width])?
            } else {
                let part = self.b.reshape(&part, &[frames, count, width])?;
                self.b.transpose(&part, &[1, 0, 2])
            };
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in first..first + count {
                let key = format!("band_split.to_features.{band}");
                let scale = self.norm_scale(&format!("{key}.0"), width)?;
                let weight = self.take(&format!("{key}.1.weight"), &[dim, width])?;
                weights.extend(transposed(&weight, dim, width, Some(&scale)));
                biases.extend(self.take(&format!("{key}.1.bias"), &[dim])?);
            }
            let name = format!("band_split.{first}");
            let weight = self
                .b
                .weight(&format!("{name}.weight"), &[count, width, dim], weights)?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[count, 1, dim], biases)?;
            let divisor = self.b.l2_norm_divisor(&part)?;
            let projected = self.b.matmul(&part, &weight)?;
            let projected = self.b.binary("Div", &projected, &divisor);
            groups.push(self.b.binary("Add", &projected, &bias));
        }
        Ok(self.b.concat(&groups, 0))
    }

    /// The widest per-token activation of an attention or feed-forward layer along `axis` of
    /// `[bands, frames, dim]` tokens, in floats: the attention's projection (q, k, v, their
    /// rotations and the gates), its scores (one per head and token attended to), or the
    /// feed-forward's hidden layer.
    fn widest_token_activation(&self, axis: Axis, shape: &[usize]) -> usize {
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
    fn attention_weights(
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
    fn attention(&mut self, x: &T, w: &AttentionWeights, axis: Axis) -> Result<T, ConvertError> {
        let (bands, frames) = (x.shape[0], x.shape[1]);
        let (heads, dim_head) = (self.config.heads, self.config.dim_head);
        let inner = heads * dim_head;
        let divisor = self.b.l2_norm_divisor(x)?;
        let projected = self.b.matmul(x, &w.projection)?;
        let projected = self.b.binary("Div", &projected, &divisor);
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
        let v = self.b.reshape(&parts[2], &heads_shape)?;
        // [bands, frames, heads, d] → [batch, heads, sequence, d] and back.
        let (to_heads, to_keys, from_heads): (&[usize], &[usize], &[usize]) = match axis {
            Axis::Time => (&[0, 2, 1, 3], &[0, 2, 3, 1], &[0, 2, 1, 3]),
            Axis::Frequency => (&[1, 2, 0, 3], &[1, 2, 3, 0], &[2, 0, 1, 3]),
        };
        let q = self.b.transpose(&q, to_heads);
        let k_t = self.b.transpose(&k, to_keys);
        let v = self.b.transpose(&v, to_heads);
        let attended = self
            .b
            .attention_in_blocks(&q, &k_t, &v, 0, MAX_SCORES_PER_BLOCK)?;
        let attended = self.b.transpose(&attended, from_heads);
        let gate = self.b.binary("Add", &parts[5], &w.gate_bias);
        let gate = self.b.unary("Sigmoid", &gate);
        let gate = self.b.reshape(&gate, &[bands, frames, heads, 1])?;
        let gated = self.b.binary("Mul", &attended, &gate);
        let gated = self.b.reshape(&gated, &[bands, frames, inner])?;
        let out = self.b.matmul(&gated, &w.out)?;
        Ok(self.b.binary("Add", x, &out))
    }

    /// `x + LinearAttention(x)` over all tokens at once (`key`: the module).
    fn linear_attention(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
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
        let divisor = self.b.l2_norm_divisor(&flat)?;
        let projected = self.b.matmul(&flat, &weight)?;
        let projected = self.b.binary("Div", &projected, &divisor);
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
        let divisor = self.b.l2_norm_divisor(x)?;
        let h = self.b.matmul(x, &w.w1)?;
        let h = self.b.binary("Div", &h, &divisor);
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
                Axis::Time => 0,
                Axis::Frequency => 1,
            };
            let width = self.widest_token_activation(axis, &x.shape);
            let mut outputs = Vec::new();
            for (start, end) in layer_blocks(&x.shape, across, width) {
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

    /// One stem's mask estimator (`mask_estimators.{stem}`) on tokens `[bands, frames, dim]`
    /// (BS-RoFormer's `final_norm` folded into its first layer): the masks of each band's
    /// features, `[frames, Σ widths]`.
    pub fn mask_estimator(
        &mut self,
        x: &T,
        stem: usize,
        widths: &[usize],
        final_norm: Option<&[f32]>,
        divisor: Option<&T>,
    ) -> Result<T, ConvertError> {
        let (bands, frames, dim) = (x.shape[0], x.shape[1], x.shape[2]);
        let hidden = dim * self.config.mlp_expansion_factor;
        // MLP(dim, 2·width, hidden, depth): BS has depth linear layers, Mel depth + 1.
        let num_layers = match self.config.variant {
            Variant::BandSplit { .. } => self.config.mask_estimator_depth,
            Variant::MelBand { .. } => self.config.mask_estimator_depth + 1,
        };
        let key = |band: usize, layer: usize| {
            format!("mask_estimators.{stem}.to_freqs.{band}.0.{}", 2 * layer)
        };
        let mut h = x.clone();
        for layer in 0..num_layers - 1 {
            let input = if layer == 0 { dim } else { hidden };
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in 0..bands {
                let w = self.take(&format!("{}.weight", key(band, layer)), &[hidden, input])?;
                let scale = if layer == 0 { final_norm } else { None };
                weights.extend(transposed(&w, hidden, input, scale));
                biases.extend(self.take(&format!("{}.bias", key(band, layer)), &[hidden])?);
            }
            let name = format!("mask_estimators.{stem}.layer{layer}");
            let w = self
                .b
                .weight(&format!("{name}.weight"), &[bands, input, hidden], weights)?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[bands, 1, hidden], biases)?;
            h = self.b.matmul(&h, &w)?;
            if let (0, Some(divisor)) = (layer, divisor) {
                h = self.b.binary("Div", &h, divisor);
            }
            h = self.b.binary("Add", &h, &bias);
            h = self.b.unary("Tanh", &h);
        }
        let last = num_layers - 1;
        let input = if last == 0 { dim } else { hidden };
        let mut outputs = Vec::new();
        for (first, count, width) in runs(widths) {
            let (mut weights, mut biases) = (Vec::new(), Vec::new());
            for band in first..first + count {
                let w = self.take(&format!("{}.weight", key(band, last)), &[2 * width, input])?;
                let scale = if last == 0 { final_norm } else { None };
                weights.extend(transposed(&w, 2 * width, input, scale));
                biases.extend(self.take(&format!("{}.bias", key(band, last)), &[2 * width])?);
            }
            let name = format!("mask_estimators.{stem}.out{first}");
            let w = self.b.weight(
                &format!("{name}.weight"),
                &[count, input, 2 * width],
                weights,
            )?;
            let bias = self
                .b
                .weight(&format!("{name}.bias"), &[count, 1, 2 * width], biases)?;
            let part = if count == bands {
                h.clone()
            } else {
                self.b.slice(&h, 0, first, first + count)?
            };
            let mut y = self.b.matmul(&part, &w)?;
            if let (0, Some(divisor)) = (last, divisor) {
                let cut = if count == bands {
                    divisor.clone()
                } else {
                    self.b.slice(divisor, 0, first, first + count)?
                };
                y = self.b.binary("Div", &y, &cut);
            }
            let y = self.b.binary("Add", &y, &bias);
            let y = self.b.glu(&y, 2);
            let y = if count == 1 {
                self.b.reshape(&y, &[frames, width])?
            } else {
                let y = self.b.transpose(&y, &[1, 0, 2]);
                self.b.reshape(&y, &[frames, count * width])?
            };
            outputs.push(y);
        }
        Ok(self.b.concat(&outputs, 1))
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

    #[test]
    fn runs_group_equal_neighbours() {
        assert_eq!(runs(&[2, 2, 4, 4, 4, 2]), [(0, 2, 2), (2, 3, 4), (5, 1, 2)]);
        assert!(runs(&[]).is_empty());
    }

    #[test]
    fn weights_are_transposed_with_their_input_scale() {
        // [[1, 2, 3], [4, 5, 6]] (out 2, in 3), inputs scaled by 1, 10, 100.
        let t = transposed(
            &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
            2,
            3,
            Some(&[1.0, 10.0, 100.0]),
        );
        assert_eq!(t, [1.0, 4.0, 20.0, 50.0, 300.0, 600.0]);
    }

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
