//! HTDemucs' cross-transformer (`demucs/transformer.py`, `CrossTransformerEncoder`): the
//! frequency branch as `frames × freqs` tokens with a 2-d sinusoidal embedding, the time
//! branch with a 1-d one, layers alternating self-attention and cross-attention between the
//! branches. Tokens are `[tokens, channels]` matrices (batch 1).

use super::config::PositionalEmbedding;
use super::network::Network;
use crate::error::ConvertError;
use crate::ops::T;

/// Attention scores computed at once (per block of queries): 16 MB of float32. Each attention's
/// blocks have shapes of their own, and ONNX Runtime's allocation planner keeps a buffer for each
/// shape from the first layer that uses it to the last: 64 MB blocks held 0.5 GB that way.
const MAX_SCORES_PER_BLOCK: usize = 4 << 20;

/// `create_2d_sin_embedding(d_model, height, width)` rearranged `b c fr t1 -> (t1 fr) c`,
/// computed in float32 as PyTorch does.
fn embedding_2d(dim: usize, freqs: usize, frames: usize, max_period: f64) -> Vec<f32> {
    let half = dim / 2;
    // div_term = exp(arange(0, half, 2) * -(log(max_period) / half))
    let factor = (-(max_period.ln() / half as f64)) as f32;
    let div: Vec<f32> = (0..half)
        .step_by(2)
        .map(|i| f64::from(i as f32 * factor).exp() as f32)
        .collect();
    let mut values = vec![0.0f32; frames * freqs * dim];
    for t in 0..frames {
        for f in 0..freqs {
            let token = &mut values[(t * freqs + f) * dim..][..dim];
            for (i, &d) in div.iter().enumerate() {
                let (pw, ph) = (f64::from(t as f32 * d), f64::from(f as f32 * d));
                token[2 * i] = pw.sin() as f32;
                token[2 * i + 1] = pw.cos() as f32;
                token[half + 2 * i] = ph.sin() as f32;
                token[half + 2 * i + 1] = ph.cos() as f32;
            }
        }
    }
    values
}

/// `create_sin_embedding(length, dim)` (or CAPE's at inference, positions centred when
/// `centred`) as `[length, dim]`, in float32 as PyTorch computes it.
fn embedding_1d(length: usize, dim: usize, max_period: f64, centred: bool) -> Vec<f32> {
    let half = dim / 2;
    let offset = if centred {
        (length as f32 - 1.0) / 2.0
    } else {
        0.0
    };
    let periods: Vec<f32> = (0..half)
        .map(|c| {
            let exponent = c as f32 / (half as f32 - 1.0);
            (max_period as f32 as f64).powf(f64::from(exponent)) as f32
        })
        .collect();
    let mut values = vec![0.0f32; length * dim];
    for t in 0..length {
        let position = t as f32 - offset;
        for (c, &period) in periods.iter().enumerate() {
            let phase = f64::from(position / period);
            values[t * dim + c] = phase.cos() as f32;
            values[t * dim + half + c] = phase.sin() as f32;
        }
    }
    values
}

impl Network<'_, '_, '_, '_> {
    /// The optional 1×1 convolutions around the transformer, and the transformer.
    pub(super) fn transformer_with_bottom(
        &mut self,
        x: &T,
        xt: &T,
    ) -> Result<(T, T), ConvertError> {
        let bottom = self.config.bottom_channels;
        let (channels, freqs, frames) = (x.shape[1], x.shape[2], x.shape[3]);
        let (mut x, mut xt) = (x.clone(), xt.clone());
        if bottom > 0 {
            let flat = self.b.reshape(&x, &[1, channels, freqs * frames])?;
            let up = self.conv(&flat, "channel_upsampler", bottom, 1, 1, 0, false, false)?;
            x = self.b.reshape(&up, &[1, bottom, freqs, frames])?;
            xt = self.conv(&xt, "channel_upsampler_t", bottom, 1, 1, 0, false, false)?;
        }
        let (mut x, mut xt) = cross_transformer(self, &x, &xt)?;
        if bottom > 0 {
            let flat = self.b.reshape(&x, &[1, bottom, freqs * frames])?;
            let down = self.conv(
                &flat,
                "channel_downsampler",
                channels,
                1,
                1,
                0,
                false,
                false,
            )?;
            x = self.b.reshape(&down, &[1, channels, freqs, frames])?;
            xt = self.conv(
                &xt,
                "channel_downsampler_t",
                channels,
                1,
                1,
                0,
                false,
                false,
            )?;
        }
        Ok((x, xt))
    }

    /// `LayerNorm` (or, with `group`, `MyGroupNorm` of one group: over every token and
    /// channel) `key` on tokens `[n, dim]`.
    fn token_norm(&mut self, x: &T, key: &str, group: bool) -> Result<T, ConvertError> {
        let dim = x.shape[1];
        if group {
            let scale = self.values(&format!("{key}.weight"), &[dim])?;
            let shift = self.values(&format!("{key}.bias"), &[dim])?;
            let name = format!("{}{key}", self.prefix);
            self.b.token_group_norm(x, scale, shift, &name)
        } else {
            let scale = self.weight(&format!("{key}.weight"), &[dim], &[dim])?;
            let shift = self.weight(&format!("{key}.bias"), &[dim], &[dim])?;
            Ok(self.b.layer_norm(x, &scale, &shift))
        }
    }

    /// `nn.Linear` `key` on `[n, in]`.
    fn dense(&mut self, x: &T, key: &str, out: usize) -> Result<T, ConvertError> {
        let chin = x.shape[1];
        let weight = self.weight(&format!("{key}.weight"), &[out, chin], &[out, chin])?;
        let bias = self.weight(&format!("{key}.bias"), &[out], &[out])?;
        Ok(self.b.linear(x, &weight, &bias))
    }

    /// `nn.MultiheadAttention` `key` (packed `in_proj`, `out_proj`) of `query` over `memory`.
    fn attention(&mut self, query: &T, memory: &T, key: &str) -> Result<T, ConvertError> {
        let dim = query.shape[1];
        let heads = self.config.t_heads;
        let head_dim = dim / heads;
        let (nq, nk) = (query.shape[0], memory.shape[0]);
        let mut packed = self.values(&format!("{key}.in_proj_weight"), &[3 * dim, dim])?;
        let mut packed_bias = self.values(&format!("{key}.in_proj_bias"), &[3 * dim])?;
        // PyTorch scales the scores by 1/√head_dim; scale the query projection instead.
        let scale = (1.0 / (head_dim as f64).sqrt()) as f32;
        packed[..dim * dim].iter_mut().for_each(|w| *w *= scale);
        packed_bias[..dim].iter_mut().for_each(|w| *w *= scale);
        let mut projections = Vec::new();
        for (i, (input, name)) in [(query, "q"), (memory, "k"), (memory, "v")]
            .into_iter()
            .enumerate()
        {
            let w = packed[i * dim * dim..(i + 1) * dim * dim].to_vec();
            let bias = packed_bias[i * dim..(i + 1) * dim].to_vec();
            let w = self.b.weight(
                &format!("{}{key}.{name}_weight", self.prefix),
                &[dim, dim],
                w,
            )?;
            let bias = self
                .b
                .weight(&format!("{}{key}.{name}_bias", self.prefix), &[dim], bias)?;
            projections.push(self.b.linear(input, &w, &bias));
        }
        if self.b.is_gpu() {
            // One fused kernel: `[1, tokens, dim]` per item, the scale already in q.
            let q = self.b.reshape(&projections[0], &[1, nq, dim])?;
            let k = self.b.reshape(&projections[1], &[1, nk, dim])?;
            let v = self.b.reshape(&projections[2], &[1, nk, dim])?;
            let attended = self.b.multi_head_attention([&q, &k, &v], heads, 1.0);
            let merged = self.b.reshape(&attended, &[nq, dim])?;
            return self.dense(&merged, &format!("{key}.out_proj"), dim);
        }
        let q = self.b.reshape(&projections[0], &[nq, heads, head_dim])?;
        let q = self.b.transpose(&q, &[1, 0, 2]);
        let k = self.b.reshape(&projections[1], &[nk, heads, head_dim])?;
        let k = self.b.transpose(&k, &[1, 2, 0]);
        let v = self.b.reshape(&projections[2], &[nk, heads, head_dim])?;
        let v = self.b.transpose(&v, &[1, 0, 2]);
        // Queries in blocks, so that one block's scores live at a time (a segment's 2,688
        // frequency tokens would hold 2 × 231 MB of scores and weights at once).
        let heads_out = self
            .b
            .attention_in_blocks(&q, &k, &v, 1, MAX_SCORES_PER_BLOCK)?;
        let merged = self.b.transpose(&heads_out, &[1, 0, 2]);
        let merged = self.b.reshape(&merged, &[nq, dim])?;
        self.dense(&merged, &format!("{key}.out_proj"), dim)
    }

    /// `linear2(activation(linear1(x)))`.
    fn feed_forward(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        let dim = x.shape[1];
        let hidden = (dim as f64 * self.config.t_hidden_scale) as usize;
        let h = self.dense(x, &format!("{key}.linear1"), hidden)?;
        let h = if self.config.t_gelu {
            self.b.gelu(&h)?
        } else {
            self.b.unary("Relu", &h)
        };
        self.dense(&h, &format!("{key}.linear2"), dim)
    }

    /// `gamma.scale * x` when the layers have layer scales.
    fn layer_scale(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        if !self.config.t_layer_scale {
            return Ok(x.clone());
        }
        let dim = x.shape[1];
        let scale = self.weight(&format!("{key}.scale"), &[dim], &[dim])?;
        Ok(self.b.binary("Mul", x, &scale))
    }

    /// `MyTransformerEncoderLayer` (`memory` `None`) or `CrossTransformerEncoderLayer` `key`.
    fn transformer_layer(
        &mut self,
        x: &T,
        memory: Option<&T>,
        key: &str,
    ) -> Result<T, ConvertError> {
        let group = self.config.t_group_norm;
        let attention_key = if memory.is_some() {
            "cross_attn"
        } else {
            "self_attn"
        };
        let ff_norm = if memory.is_some() { "norm3" } else { "norm2" };
        if self.config.t_norm_first {
            let h = self.token_norm(x, &format!("{key}.norm1"), group)?;
            let a = match memory {
                Some(memory) => {
                    let m = self.token_norm(memory, &format!("{key}.norm2"), group)?;
                    self.attention(&h, &m, &format!("{key}.{attention_key}"))?
                }
                None => self.attention(&h, &h, &format!("{key}.{attention_key}"))?,
            };
            let a = self.layer_scale(&a, &format!("{key}.gamma_1"))?;
            let x = self.b.binary("Add", x, &a);
            let h = self.token_norm(&x, &format!("{key}.{ff_norm}"), group)?;
            let f = self.feed_forward(&h, key)?;
            let f = self.layer_scale(&f, &format!("{key}.gamma_2"))?;
            let x = self.b.binary("Add", &x, &f);
            if self.config.t_norm_out {
                self.token_norm(&x, &format!("{key}.norm_out"), true)
            } else {
                Ok(x)
            }
        } else {
            let a = match memory {
                Some(memory) => self.attention(x, memory, &format!("{key}.{attention_key}"))?,
                None => self.attention(x, x, &format!("{key}.{attention_key}"))?,
            };
            let a = self.layer_scale(&a, &format!("{key}.gamma_1"))?;
            let sum = self.b.binary("Add", x, &a);
            let x = self.token_norm(&sum, &format!("{key}.norm1"), group)?;
            let f = self.feed_forward(&x, key)?;
            let f = self.layer_scale(&f, &format!("{key}.gamma_2"))?;
            let sum = self.b.binary("Add", &x, &f);
            self.token_norm(&sum, &format!("{key}.norm2"), group)
        }
    }

    /// The transformer's input norm `key` (layer norm, one-group norm or none).
    fn input_norm(&mut self, x: &T, key: &str) -> Result<T, ConvertError> {
        if self.config.t_norm_in {
            self.token_norm(x, key, false)
        } else if self.config.t_norm_in_group {
            self.token_norm(x, key, true)
        } else {
            Ok(x.clone())
        }
    }
}

/// `CrossTransformerEncoder.forward(x, xt)` for `x` `[1, C, F, T1]` and `xt` `[1, C, T2]`.
pub(super) fn cross_transformer(
    net: &mut Network<'_, '_, '_, '_>,
    x: &T,
    xt: &T,
) -> Result<(T, T), ConvertError> {
    let config = net.config;
    let (dim, freqs, frames) = (x.shape[1], x.shape[2], x.shape[3]);
    let length = xt.shape[2];
    if dim % config.t_heads != 0 || dim % 4 != 0 || xt.shape[1] != dim {
        return Err(ConvertError::Layout(format!(
            "this HTDemucs cannot be converted: transformer width {dim} (time branch {}) with \
             {} heads",
            xt.shape[1], config.t_heads
        )));
    }
    let weight = config.t_weight_pos_embed as f32;
    // Frequency tokens, frame-major: `b c fr t1 -> b (t1 fr) c`.
    let tokens = net.b.transpose(x, &[0, 3, 2, 1]);
    let tokens = net.b.reshape(&tokens, &[frames * freqs, dim])?;
    let tokens = net.input_norm(&tokens, "crosstransformer.norm_in")?;
    let emb: Vec<f32> = embedding_2d(dim, freqs, frames, config.t_max_period)
        .into_iter()
        .map(|v| weight * v)
        .collect();
    let emb = net.b.constant("pos_emb_2d", &[frames * freqs, dim], emb)?;
    let mut x = net.b.binary("Add", &tokens, &emb);

    let time = net.b.transpose(xt, &[0, 2, 1]);
    let time = net.b.reshape(&time, &[length, dim])?;
    let time = net.input_norm(&time, "crosstransformer.norm_in_t")?;
    let centred = matches!(
        config.t_emb,
        PositionalEmbedding::Cape {
            mean_normalize: true
        }
    );
    let emb: Vec<f32> = embedding_1d(length, dim, config.t_max_period, centred)
        .into_iter()
        .map(|v| weight * v)
        .collect();
    let emb = net.b.constant("pos_emb", &[length, dim], emb)?;
    let mut xt = net.b.binary("Add", &time, &emb);

    let classic_parity = usize::from(config.t_cross_first);
    for index in 0..config.t_layers {
        let (key, key_t) = (
            format!("crosstransformer.layers.{index}"),
            format!("crosstransformer.layers_t.{index}"),
        );
        if index % 2 == classic_parity {
            x = net.transformer_layer(&x, None, &key)?;
            xt = net.transformer_layer(&xt, None, &key_t)?;
        } else {
            let old_x = x.clone();
            x = net.transformer_layer(&x, Some(&xt), &key)?;
            xt = net.transformer_layer(&xt, Some(&old_x), &key_t)?;
        }
    }
    let x = net.b.reshape(&x, &[1, frames, freqs, dim])?;
    let x = net.b.transpose(&x, &[0, 3, 2, 1]);
    let xt = net.b.reshape(&xt, &[1, length, dim])?;
    let xt = net.b.transpose(&xt, &[0, 2, 1]);
    Ok((x, xt))
}
