//! Convolutions, transposed convolutions and batch normalisation, on `[N, C, …]` tensors (a
//! batch, if any, on `N`).

use stemflow_onnx::Attribute;

use super::{ints, Builder, T};
use crate::error::ConvertError;

/// Strides, padding (ONNX `pads`: the start of every spatial axis, then their ends) and
/// dilations of a convolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvSpec {
    /// Per spatial axis.
    pub strides: Vec<usize>,
    /// `[begin…, end…]`, two per spatial axis.
    pub pads: Vec<usize>,
    /// Per spatial axis.
    pub dilations: Vec<usize>,
}

impl ConvSpec {
    /// `pads` on both sides of each axis, no dilation.
    pub fn symmetric(strides: &[usize], pads: &[usize]) -> Self {
        ConvSpec {
            strides: strides.to_vec(),
            pads: pads.iter().chain(pads).copied().collect(),
            dilations: vec![1; strides.len()],
        }
    }
}

/// A convolution's input is batched on its first axis, if at all.
fn check_batch(x: &T) -> Result<(), ConvertError> {
    match x.batch {
        None | Some(0) => Ok(()),
        Some(axis) => Err(ConvertError::Layout(format!(
            "internal: a convolution of {} batched on axis {axis}",
            x.name
        ))),
    }
}

impl Builder<'_> {
    /// A convolution (1-d or 2-d by the kernel's rank) with `weight` `[out, in, k…]` and
    /// `bias` `[out]`; `pads` per spatial axis (both sides).
    pub fn conv(
        &mut self,
        x: &T,
        weight: &T,
        bias: &T,
        strides: &[usize],
        pads: &[usize],
        dilations: &[usize],
    ) -> Result<T, ConvertError> {
        let spec = ConvSpec {
            dilations: dilations.to_vec(),
            ..ConvSpec::symmetric(strides, pads)
        };
        self.conv_with(x, weight, bias, &spec)
    }

    /// A convolution with `weight` `[out, in, k…]`, `bias` `[out]` and any padding.
    pub fn conv_with(
        &mut self,
        x: &T,
        weight: &T,
        bias: &T,
        spec: &ConvSpec,
    ) -> Result<T, ConvertError> {
        check_batch(x)?;
        let kernel = &weight.shape[2..];
        let axes = kernel.len();
        let mut shape = vec![x.shape[0], weight.shape[0]];
        for (i, &k) in kernel.iter().enumerate() {
            let span = spec.dilations[i] * (k - 1) + 1;
            let padded = x.shape[2 + i] + spec.pads[i] + spec.pads[axes + i];
            if padded < span {
                return Err(ConvertError::Layout(format!(
                    "internal: convolution of {:?} with kernel {kernel:?}",
                    x.shape
                )));
            }
            shape.push((padded - span) / spec.strides[i] + 1);
        }
        if x.shape[1] != weight.shape[1] {
            return Err(ConvertError::Layout(format!(
                "{}: {} input channels, the layer takes {}",
                weight.name, x.shape[1], weight.shape[1]
            )));
        }
        Ok(self.op_like(
            x,
            "Conv",
            &[&x.name, &weight.name, &bias.name],
            vec![
                ("dilations", ints(&spec.dilations)),
                ("kernel_shape", ints(kernel)),
                ("pads", ints(&spec.pads)),
                ("strides", ints(&spec.strides)),
            ],
            shape,
        ))
    }

    /// A transposed convolution with `weight` `[in, out, k…]`, no padding.
    pub fn conv_transpose(
        &mut self,
        x: &T,
        weight: &T,
        bias: &T,
        strides: &[usize],
    ) -> Result<T, ConvertError> {
        self.conv_transpose_padded(x, weight, bias, strides, None)
    }

    /// A transposed convolution with `weight` `[in, out, k…]`, `bias` `[out]`, `strides` and
    /// ONNX `pads` (what is cut from each end of the output; none when `None`), no dilation.
    pub fn conv_transpose_padded(
        &mut self,
        x: &T,
        weight: &T,
        bias: &T,
        strides: &[usize],
        pads: Option<&[usize]>,
    ) -> Result<T, ConvertError> {
        check_batch(x)?;
        let kernel = &weight.shape[2..];
        let axes = kernel.len();
        if x.shape[1] != weight.shape[0] {
            return Err(ConvertError::Layout(format!(
                "{}: {} input channels, the layer takes {}",
                weight.name, x.shape[1], weight.shape[0]
            )));
        }
        let mut shape = vec![x.shape[0], weight.shape[1]];
        for (i, &k) in kernel.iter().enumerate() {
            let full = (x.shape[2 + i] - 1) * strides[i] + k;
            let cut = pads.map_or(0, |p| p[i] + p[axes + i]);
            if full <= cut {
                return Err(ConvertError::Layout(format!(
                    "internal: transposed convolution of {:?} with kernel {kernel:?}",
                    x.shape
                )));
            }
            shape.push(full - cut);
        }
        let mut attributes = vec![("kernel_shape", ints(kernel))];
        if let Some(pads) = pads {
            attributes.push(("pads", ints(pads)));
        }
        attributes.push(("strides", ints(strides)));
        Ok(self.op_like(
            x,
            "ConvTranspose",
            &[&x.name, &weight.name, &bias.name],
            attributes,
            shape,
        ))
    }

    /// Inference batch normalisation of `x` `[N, C, …]` with per-channel `scale`, `bias`,
    /// `mean` and `variance` (`[C]` each).
    pub fn batch_norm(&mut self, x: &T, [scale, bias, mean, variance]: [&T; 4], epsilon: f32) -> T {
        self.op_like(
            x,
            "BatchNormalization",
            &[&x.name, &scale.name, &bias.name, &mean.name, &variance.name],
            vec![("epsilon", Attribute::Float(epsilon))],
            x.shape.clone(),
        )
    }
}
