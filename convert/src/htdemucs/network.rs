//! One HTDemucs network as graph nodes: the frequency and time encoders with their DConv
//! branches, the frequency embedding, the cross-transformer ([`super::transformer`]), the
//! decoders — exactly as demucs 4's `HTDemucs.forward` computes them (`demucs/htdemucs.py`,
//! `hdemucs.py` `HEncLayer`/`HDecLayer`, `demucs.py` `DConv`), from the normalised inputs to
//! the denormalised spectrogram and waveform stems. The STFT and its inverse run outside the
//! graph, in the engine.

use super::config::HtDemucsConfig;
use crate::error::ConvertError;
use crate::ops::{Builder, DataType, T};
use crate::state::ModelState;
use crate::torch::Tensor;

/// Blocks of frequencies a decoder's `DConv` goes through one after the other. ONNX Runtime's
/// allocation planner hands a freed buffer to the next tensor of exactly the same shape and keeps
/// it from the first tensor's start to the last one's end; the decoders' `DConv`s, shaped like the
/// encoders', held the encoders' buffers through the whole transformer (about 350 MB for
/// `htdemucs`). In two blocks the decoders' tensors have shapes of their own, and are half as big.
const DECODER_DCONV_ROW_BLOCKS: usize = 2;

/// One `DConv` layer's weights, in the graph.
struct DConvLayer {
    dilation: usize,
    conv_in: (T, T),
    norm_in: (T, T),
    conv_out: (T, T),
    norm_out: (T, T),
    scale: T,
}

/// The shapes of one encoder layer and of the decoder layer that mirrors it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LayerPlan {
    /// Input and output channels of the frequency encoder layer.
    freq_in: usize,
    freq_out: usize,
    /// Input and output channels of the time encoder layer.
    time_in: usize,
    time_out: usize,
    /// Output channels of the decoder layers (frequency, time).
    freq_dec_out: usize,
    time_dec_out: usize,
    /// Whether the layers use group normalisation.
    norm: bool,
}

/// The layer plan of `HTDemucs.__init__`, refusing the layouts not built here.
fn layer_plan(config: &HtDemucsConfig) -> Result<Vec<LayerPlan>, ConvertError> {
    let num_sources = config.sources.len();
    let (mut chin, mut chin_z) = (config.audio_channels, 2 * config.audio_channels);
    let (mut chout, mut chout_z) = (config.channels_time, config.channels);
    let mut freqs = config.nfft / 2;
    let mut plan = Vec::new();
    for index in 0..config.depth {
        if freqs <= config.kernel_size {
            return Err(ConvertError::Layout(format!(
                "this HTDemucs cannot be converted: its layer {index} merges the time and \
                 frequency branches ({freqs} frequencies left for a kernel of {}); Stemflow \
                 converts HTDemucs whose layers all keep both branches (depth ≤ {index})",
                config.kernel_size
            )));
        }
        let (dec_z, dec_t) = if index == 0 {
            (
                num_sources * 2 * config.audio_channels,
                num_sources * config.audio_channels,
            )
        } else {
            (chin_z, chin)
        };
        plan.push(LayerPlan {
            freq_in: chin_z,
            freq_out: chout_z,
            time_in: chin,
            time_out: chout,
            freq_dec_out: dec_z,
            time_dec_out: dec_t,
            norm: index >= config.norm_starts,
        });
        chin = chout;
        chin_z = chout_z;
        chout = (config.growth * chout as f64) as usize;
        chout_z = (config.growth * chout_z as f64) as usize;
        freqs /= config.stride;
    }
    Ok(plan)
}

/// The normalised inputs and the statistics to undo it, shared by the models of a bag.
pub struct Inputs {
    /// The spectrogram, normalised (`[1, 2·channels, bins, frames]`).
    pub spec: T,
    /// Its mean and standard deviation (`[1, 1, 1, 1]`).
    pub spec_mean: T,
    /// See `spec_mean`.
    pub spec_std: T,
    /// The waveform, normalised (`[1, channels, frames]`).
    pub mix: T,
    /// Its mean and standard deviation (`[1, 1, 1]`).
    pub mix_mean: T,
    /// See `mix_mean`.
    pub mix_std: T,
}

/// `(x − mean) / (1e-5 + std)` over every axis but the first, with PyTorch's unbiased `std`;
/// returns the normalised tensor, the mean and the std. The statistics are summed in float64:
/// a float32 sum of a segment's 2.75 million spectrogram values drifts by 1e-4 (PyTorch sums
/// pairwise), which the network carries to its output.
///
/// A GPU graph has no float64: its sums are float32 in two stages ([`Builder::mean_per_item`]),
/// and the statistics stay float32 in a float16 graph (the normalised tensor is cast).
pub fn normalise(b: &mut Builder<'_>, x: &T) -> Result<(T, T, T), ConvertError> {
    let count: usize = x.shape[1..].iter().product();
    let bessel = (count as f64 / (count as f64 - 1.0)) as f32;
    if b.is_gpu() {
        let mean = b.mean_per_item(x);
        let centred = b.binary("Sub", x, &mean);
        let squared = b.binary("Mul", &centred, &centred);
        let mean_square = b.mean_per_item(&squared);
        let bessel = b.scalar_f32(bessel)?;
        let variance = b.binary("Mul", &mean_square, &bessel);
        let std = b.unary("Sqrt", &variance);
        let epsilon = b.scalar_f32(1e-5)?;
        let divisor = b.binary("Add", &std, &epsilon);
        let normalised = b.binary("Div", &centred, &divisor);
        let normalised = b.as_type(&normalised, b.compute_type());
        return Ok((normalised, mean, std));
    }
    let axes: Vec<usize> = (1..x.shape.len()).collect();
    let wide = b.cast(x, DataType::Float64);
    let mean_wide = b.mean(&wide, &axes);
    let centred_wide = b.binary("Sub", &wide, &mean_wide);
    let squared = b.binary("Mul", &centred_wide, &centred_wide);
    let mean_square = b.mean(&squared, &axes);
    let mean_square = b.cast(&mean_square, DataType::Float32);
    let mean = b.cast(&mean_wide, DataType::Float32);
    let bessel = b.scalar(bessel)?;
    let variance = b.binary("Mul", &mean_square, &bessel);
    let std = b.unary("Sqrt", &variance);
    let epsilon = b.scalar(1e-5)?;
    let divisor = b.binary("Add", &std, &epsilon);
    let centred = b.binary("Sub", x, &mean);
    let normalised = b.binary("Div", &centred, &divisor);
    Ok((normalised, mean, std))
}

/// Builds one model of the bag on `inputs`; returns its spectrogram stems
/// `[1, S, 2·channels, bins, frames]` and waveform stems `[1, S, channels, frames]`, both
/// denormalised.
pub fn build_network(
    b: &mut Builder<'_>,
    state: ModelState<'_, Tensor<'_>>,
    config: &HtDemucsConfig,
    prefix: &str,
    inputs: &Inputs,
) -> Result<(T, T), ConvertError> {
    let mut net = Network {
        b,
        state,
        config,
        prefix: prefix.to_owned(),
    };
    let result = net.forward(inputs)?;
    net.state.finish()?;
    Ok(result)
}

/// A model under construction: the builder, the checkpoint's remaining tensors.
pub(super) struct Network<'x, 'a, 'c, 't> {
    pub(super) b: &'x mut Builder<'a>,
    pub(super) state: ModelState<'c, Tensor<'t>>,
    pub(super) config: &'x HtDemucsConfig,
    /// Prefix of the initializer names (the model's place in a bag).
    pub(super) prefix: String,
}

impl Network<'_, '_, '_, '_> {
    /// The checkpoint tensor `key` of `shape` as an initializer of shape `as_shape`.
    pub(super) fn weight(
        &mut self,
        key: &str,
        shape: &[usize],
        as_shape: &[usize],
    ) -> Result<T, ConvertError> {
        let values = self.state.take(key, shape)?;
        let name = format!("{}{key}", self.prefix);
        self.b.weight(&name, as_shape, values)
    }

    /// The checkpoint tensor `key` of `shape`, as values.
    pub(super) fn values(&mut self, key: &str, shape: &[usize]) -> Result<Vec<f32>, ConvertError> {
        self.state.take(key, shape)
    }

    /// A convolution `key` (`.weight` `[out, in, k…]`, `.bias`), `freq`: 2-d with kernels
    /// `[k, 1]` (or `[k, k]` when `square`), else 1-d.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn conv(
        &mut self,
        x: &T,
        key: &str,
        out: usize,
        kernel: usize,
        stride: usize,
        pad: usize,
        freq: bool,
        square: bool,
    ) -> Result<T, ConvertError> {
        let chin = x.shape[1];
        let kernel_dims: Vec<usize> = match (freq, square) {
            (true, true) => vec![kernel, kernel],
            (true, false) => vec![kernel, 1],
            (false, _) => vec![kernel],
        };
        let mut shape = vec![out, chin];
        shape.extend(&kernel_dims);
        let weight = self.weight(&format!("{key}.weight"), &shape, &shape)?;
        let bias = self.weight(&format!("{key}.bias"), &[out], &[out])?;
        let (strides, pads): (Vec<usize>, Vec<usize>) = match (freq, square) {
            (true, true) => (vec![stride, stride], vec![pad, pad]),
            (true, false) => (vec![stride, 1], vec![pad, 0]),
            (false, _) => (vec![stride], vec![pad]),
        };
        let dilations = vec![1; kernel_dims.len()];
        self.b.conv(x, &weight, &bias, &strides, &pads, &dilations)
    }

    /// `GroupNorm(groups, C)` `key` on `[N, C, …]`.
    pub(super) fn group_norm(
        &mut self,
        x: &T,
        groups: usize,
        key: &str,
    ) -> Result<T, ConvertError> {
        let channels = x.shape[1];
        if !channels.is_multiple_of(groups) {
            return Err(ConvertError::Layout(format!(
                "{key}: {channels} channels in {groups} groups"
            )));
        }
        let affine = self.group_norm_affine(channels, groups, key)?;
        self.b.group_norm(x, groups, &affine)
    }

    /// The affine part of the group norm `key` over `channels`, in the graph.
    fn group_norm_affine(
        &mut self,
        channels: usize,
        groups: usize,
        key: &str,
    ) -> Result<(T, T), ConvertError> {
        let scale = self.values(&format!("{key}.weight"), &[channels])?;
        let shift = self.values(&format!("{key}.bias"), &[channels])?;
        let name = format!("{}{key}", self.prefix);
        self.b
            .group_norm_affine(channels, groups, scale, shift, &name)
    }

    /// `DConv` `key` on `[1, C, F, T]` (`freq`: each frequency a batch item, as demucs
    /// reshapes it) or `[1, C, T]`. `row_blocks`: how many blocks of frequencies go through it
    /// one after the other (see [`DECODER_DCONV_ROW_BLOCKS`]); every operation is per frequency,
    /// so the result does not depend on it.
    fn dconv(
        &mut self,
        y: &T,
        key: &str,
        freq: bool,
        row_blocks: usize,
    ) -> Result<T, ConvertError> {
        let channels = y.shape[1];
        let x = if freq {
            let (f, t) = (y.shape[2], y.shape[3]);
            let moved = self.b.transpose(y, &[0, 2, 1, 3]);
            self.b.reshape(&moved, &[f, channels, t])?
        } else {
            y.clone()
        };
        let layers = self.dconv_layers(key, channels)?;
        let rows = x.shape[0];
        let block = rows.div_ceil(row_blocks.clamp(1, rows));
        let x = if block == rows {
            self.dconv_rows(&x, &layers)?
        } else {
            let mut parts = Vec::new();
            for start in (0..rows).step_by(block) {
                let part = self.b.slice(&x, 0, start, (start + block).min(rows))?;
                parts.push(self.dconv_rows(&part, &layers)?);
            }
            self.b.concat(&parts, 0)
        };
        if freq {
            let (f, t) = (y.shape[2], y.shape[3]);
            let unbatched = self.b.reshape(&x, &[1, f, channels, t])?;
            Ok(self.b.transpose(&unbatched, &[0, 2, 1, 3]))
        } else {
            Ok(x)
        }
    }

    /// The weights of `DConv` `key` over `channels`, in the graph.
    fn dconv_layers(
        &mut self,
        key: &str,
        channels: usize,
    ) -> Result<Vec<DConvLayer>, ConvertError> {
        let hidden = (channels as f64 / self.config.dconv_comp) as usize;
        if hidden == 0 {
            return Err(ConvertError::Layout(format!(
                "{key}: {channels} channels compressed by {} leave none",
                self.config.dconv_comp
            )));
        }
        let depth = self.config.dconv_depth.unsigned_abs() as usize;
        let mut layers = Vec::with_capacity(depth);
        for d in 0..depth {
            let dilation = if self.config.dconv_depth > 0 {
                1 << d
            } else {
                1
            };
            let layer = format!("{key}.layers.{d}");
            let shape = [hidden, channels, 3];
            let conv_in = (
                self.weight(&format!("{layer}.0.weight"), &shape, &shape)?,
                self.weight(&format!("{layer}.0.bias"), &[hidden], &[hidden])?,
            );
            let norm_in = self.group_norm_affine(hidden, 1, &format!("{layer}.1"))?;
            let shape = [2 * channels, hidden, 1];
            let conv_out = (
                self.weight(&format!("{layer}.3.weight"), &shape, &shape)?,
                self.weight(&format!("{layer}.3.bias"), &[2 * channels], &[2 * channels])?,
            );
            let norm_out = self.group_norm_affine(2 * channels, 1, &format!("{layer}.4"))?;
            let scale = self.weight(&format!("{layer}.6.scale"), &[channels], &[channels, 1])?;
            layers.push(DConvLayer {
                dilation,
                conv_in,
                norm_in,
                conv_out,
                norm_out,
                scale,
            });
        }
        Ok(layers)
    }

    /// The `DConv` `layers` on `x` `[rows, C, T]`.
    fn dconv_rows(&mut self, x: &T, layers: &[DConvLayer]) -> Result<T, ConvertError> {
        let mut x = x.clone();
        for layer in layers {
            let (w, bias) = &layer.conv_in;
            let d = layer.dilation;
            let h = self.b.conv(&x, w, bias, &[1], &[d], &[d])?;
            let h = self.b.group_norm(&h, 1, &layer.norm_in)?;
            let h = self.b.gelu(&h)?;
            let (w, bias) = &layer.conv_out;
            let h = self.b.conv(&h, w, bias, &[1], &[0], &[1])?;
            let h = self.b.group_norm(&h, 1, &layer.norm_out)?;
            let h = self.b.glu(&h, 1);
            let h = self.b.binary("Mul", &h, &layer.scale);
            x = self.b.binary("Add", &x, &h);
        }
        Ok(x)
    }

    /// `HEncLayer` `key`.
    fn encoder_layer(
        &mut self,
        x: &T,
        layer: &LayerPlan,
        key: &str,
        freq: bool,
    ) -> Result<T, ConvertError> {
        let c = self.config;
        let (kernel, stride) = (c.kernel_size, c.stride);
        let pad = kernel / 4;
        let out = if freq { layer.freq_out } else { layer.time_out };
        let mut x = x.clone();
        if !freq && !x.shape[2].is_multiple_of(stride) {
            let extra = stride - x.shape[2] % stride;
            x = self.b.pad_end(&x, 2, extra)?;
        }
        let mut y = self.conv(
            &x,
            &format!("{key}.conv"),
            out,
            kernel,
            stride,
            pad,
            freq,
            false,
        )?;
        if layer.norm {
            y = self.group_norm(&y, c.norm_groups, &format!("{key}.norm1"))?;
        }
        y = self.b.gelu(&y)?;
        if c.dconv_mode & 1 != 0 {
            y = self.dconv(&y, &format!("{key}.dconv"), freq, 1)?;
        }
        if !c.rewrite {
            return Ok(y);
        }
        self.rewrite(&y, key, c.context_enc, layer.norm.then_some("norm2"), freq)
    }

    /// A layer's rewrite: a `1 + 2·context` convolution to twice the channels, its group norm
    /// `norm` (when the layer has norms), a GLU back.
    fn rewrite(
        &mut self,
        y: &T,
        key: &str,
        context: usize,
        norm: Option<&str>,
        freq: bool,
    ) -> Result<T, ConvertError> {
        let channels = y.shape[1];
        let mut z = self.conv(
            y,
            &format!("{key}.rewrite"),
            2 * channels,
            1 + 2 * context,
            1,
            context,
            freq,
            true,
        )?;
        if let Some(norm) = norm {
            z = self.group_norm(&z, self.config.norm_groups, &format!("{key}.{norm}"))?;
        }
        Ok(self.b.glu(&z, 1))
    }

    /// `HDecLayer` `key`: `length` is the time layer's output length (frequency layers trim
    /// their padding).
    #[allow(clippy::too_many_arguments)]
    fn decoder_layer(
        &mut self,
        x: &T,
        skip: &T,
        layer: &LayerPlan,
        key: &str,
        freq: bool,
        last: bool,
        length: usize,
    ) -> Result<T, ConvertError> {
        let c = self.config;
        let (kernel, stride) = (c.kernel_size, c.stride);
        let pad = kernel / 4;
        let chin = x.shape[1];
        let out = if freq {
            layer.freq_dec_out
        } else {
            layer.time_dec_out
        };
        if x.shape != skip.shape {
            return Err(ConvertError::Layout(format!(
                "internal: {key} adds a skip of {:?} to {:?}",
                skip.shape, x.shape
            )));
        }
        let x = self.b.binary("Add", x, skip);
        let mut y = x;
        if c.rewrite {
            y = self.rewrite(&y, key, c.context, layer.norm.then_some("norm1"), freq)?;
        }
        if c.dconv_mode & 2 != 0 {
            // GPUs take the whole layer at once: the blocks are for the CPU's planner.
            let blocks = if self.b.is_gpu() {
                1
            } else {
                DECODER_DCONV_ROW_BLOCKS
            };
            y = self.dconv(&y, &format!("{key}.dconv"), freq, blocks)?;
        }
        let (shape, strides) = if freq {
            (vec![chin, out, kernel, 1], vec![stride, 1])
        } else {
            (vec![chin, out, kernel], vec![stride])
        };
        let weight = self.weight(&format!("{key}.conv_tr.weight"), &shape, &shape)?;
        let bias = self.weight(&format!("{key}.conv_tr.bias"), &[out], &[out])?;
        let mut z = self.b.conv_transpose(&y, &weight, &bias, &strides)?;
        if layer.norm {
            z = self.group_norm(&z, c.norm_groups, &format!("{key}.norm2"))?;
        }
        let len = z.shape[2];
        z = if freq {
            if pad > 0 {
                self.b.slice(&z, 2, pad, len - pad)?
            } else {
                z
            }
        } else {
            if pad + length > len {
                return Err(ConvertError::Layout(format!(
                    "internal: {key} gives {len} frames, {length} needed"
                )));
            }
            self.b.slice(&z, 2, pad, pad + length)?
        };
        if !last {
            z = self.b.gelu(&z)?;
        }
        Ok(z)
    }

    /// The frequency embedding added after the first frequency layer.
    fn freq_embedding(&mut self, x: &T) -> Result<T, ConvertError> {
        let (channels, freqs) = (x.shape[1], x.shape[2]);
        let weights = self.values("freq_emb.embedding.weight", &[freqs, channels])?;
        let (scale, weight) = (self.config.emb_scale as f32, self.config.freq_emb as f32);
        // `x + freq_emb_scale * (embedding(frs) * scale)ᵀ`, in float32 as PyTorch computes it.
        let mut values = vec![0.0f32; channels * freqs];
        for f in 0..freqs {
            for ch in 0..channels {
                values[ch * freqs + f] = weight * (weights[f * channels + ch] * scale);
            }
        }
        let name = format!("{}freq_emb", self.prefix);
        let emb = self.b.weight(&name, &[1, channels, freqs, 1], values)?;
        Ok(self.b.binary("Add", x, &emb))
    }

    /// An item's statistic (`[1, 1, …]`) with `rank` axes, so that a batch of them lines up
    /// with the batch of the tensor it scales (with one item, as on the CPU, it broadcasts
    /// as it is).
    fn item_scalar(&mut self, statistic: &T, rank: usize) -> Result<T, ConvertError> {
        if statistic.batch.is_none() || statistic.shape.len() == rank {
            return Ok(statistic.clone());
        }
        self.b.reshape(statistic, &vec![1; rank])
    }

    fn forward(&mut self, inputs: &Inputs) -> Result<(T, T), ConvertError> {
        let plan = layer_plan(self.config)?;
        let num_sources = self.config.sources.len();
        let mut x = inputs.spec.clone();
        let mut xt = inputs.mix.clone();
        let mut saved = Vec::new();
        let mut saved_t = Vec::new();
        let mut lengths_t = Vec::new();
        for (index, layer) in plan.iter().enumerate() {
            lengths_t.push(xt.shape[2]);
            xt = self.encoder_layer(&xt, layer, &format!("tencoder.{index}"), false)?;
            saved_t.push(xt.clone());
            x = self.encoder_layer(&x, layer, &format!("encoder.{index}"), true)?;
            if index == 0 && self.config.freq_emb != 0.0 {
                x = self.freq_embedding(&x)?;
            }
            saved.push(x.clone());
        }
        if self.config.t_layers > 0 {
            (x, xt) = self.transformer_with_bottom(&x, &xt)?;
        }
        for (index, layer) in plan.iter().enumerate().rev() {
            let last = index == 0;
            let skip = saved.pop().expect("one skip per layer");
            x = self.decoder_layer(
                &x,
                &skip,
                layer,
                &format!("decoder.{}", plan.len() - 1 - index),
                true,
                last,
                0,
            )?;
            let skip = saved_t.pop().expect("one skip per layer");
            let length = lengths_t.pop().expect("one length per layer");
            xt = self.decoder_layer(
                &xt,
                &skip,
                layer,
                &format!("tdecoder.{}", plan.len() - 1 - index),
                false,
                last,
                length,
            )?;
        }
        let (bins, frames) = (x.shape[2], x.shape[3]);
        let channels = self.config.audio_channels;
        let spec = self
            .b
            .reshape(&x, &[1, num_sources, 2 * channels, bins, frames])?;
        // Denormalised in float32, the statistics' type.
        let spec = self.b.as_type(&spec, DataType::Float32);
        let (spec_std, spec_mean) = (
            self.item_scalar(&inputs.spec_std, 5)?,
            self.item_scalar(&inputs.spec_mean, 5)?,
        );
        let spec = self.b.binary("Mul", &spec, &spec_std);
        let spec = self.b.binary("Add", &spec, &spec_mean);
        let length = xt.shape[2];
        let wave = self.b.reshape(&xt, &[1, num_sources, channels, length])?;
        let wave = self.b.as_type(&wave, DataType::Float32);
        let (mix_std, mix_mean) = (
            self.item_scalar(&inputs.mix_std, 4)?,
            self.item_scalar(&inputs.mix_mean, 4)?,
        );
        let wave = self.b.binary("Mul", &wave, &mix_std);
        let wave = self.b.binary("Add", &wave, &mix_mean);
        Ok((spec, wave))
    }
}
