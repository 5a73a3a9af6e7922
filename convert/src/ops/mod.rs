//! [`Builder`]: the ONNX operators the converted graphs (HTDemucs, BS- and Mel-RoFormer) are
//! made of, on tensors whose shapes are tracked here (every shape is static: one segment per
//! run), so each reshape is a constant and each layer's output shape is checked as it is built.

mod attention;
mod norms;

use std::borrow::Cow;

use stemflow_onnx::{Attribute, OnnxGraph};

use crate::error::ConvertError;

/// A tensor of the graph under construction: its name and static shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct T {
    /// The value's name in the graph.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
}

/// Element types a [`Builder::cast`] converts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// float32.
    Float32,
    /// float64.
    Float64,
}

/// PyTorch's default `eps` of `GroupNorm` and `LayerNorm`.
pub const NORM_EPSILON: f32 = 1e-5;
/// `torch.nn.functional.normalize`'s floor of the norm (`eps`).
pub const NORMALIZE_EPSILON: f32 = 1e-12;

/// The graph and a counter for fresh value names.
pub struct Builder<'a> {
    /// The graph.
    pub graph: OnnxGraph<'a>,
    next_id: usize,
    /// The name of the next node and its output, when the caller chose one ([`Builder::named`]).
    next_name: Option<String>,
}

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

fn ints(values: &[usize]) -> Attribute {
    Attribute::Ints(values.iter().map(|&v| v as i64).collect())
}

/// The shape `a` and `b` broadcast to (numpy's rule: aligned from the last axis).
fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| {
        let offset = rank - s.len();
        if i < offset {
            1
        } else {
            s[i - offset]
        }
    };
    (0..rank).map(|i| dim(a, i).max(dim(b, i))).collect()
}

impl<'a> Builder<'a> {
    /// A builder of the graph `name`.
    pub fn new(name: &str) -> Self {
        Builder {
            graph: OnnxGraph::new(name),
            next_id: 0,
            next_name: None,
        }
    }

    /// Names the next node and its output `name` (instead of a fresh name): for graphs whose
    /// values are named after the layers they come from.
    pub fn named(&mut self, name: &str) -> &mut Self {
        self.next_name = Some(name.to_owned());
        self
    }

    fn fresh(&mut self, hint: &str) -> String {
        self.next_id += 1;
        format!("{hint}_{}", self.next_id)
    }

    /// A node with one output of `shape`.
    pub fn op(
        &mut self,
        op_type: &str,
        inputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
        shape: Vec<usize>,
    ) -> T {
        let name = match self.next_name.take() {
            Some(name) => name,
            None => self.fresh(op_type),
        };
        self.graph
            .add_node(op_type, &name, inputs, &[&name], attributes);
        T { name, shape }
    }

    /// A float32 constant (weights are taken from the checkpoint with [`Builder::weight`]).
    pub fn constant(
        &mut self,
        hint: &str,
        shape: &[usize],
        values: Vec<f32>,
    ) -> Result<T, ConvertError> {
        let name = self.fresh(hint);
        self.graph.add_initializer_f32(&name, shape, values)?;
        Ok(T {
            name,
            shape: shape.to_vec(),
        })
    }

    /// A checkpoint tensor as the initializer `name`, reshaped to `shape`; `values` may be
    /// borrowed from the checkpoint (kept as they are until the model is written).
    pub fn weight(
        &mut self,
        name: &str,
        shape: &[usize],
        values: impl Into<Cow<'a, [f32]>>,
    ) -> Result<T, ConvertError> {
        self.graph.add_initializer_f32(name, shape, values)?;
        Ok(T {
            name: name.to_owned(),
            shape: shape.to_vec(),
        })
    }

    /// A float32 scalar constant.
    pub fn scalar(&mut self, value: f32) -> Result<T, ConvertError> {
        self.constant("scalar", &[], vec![value])
    }

    fn i64s(&mut self, values: &[i64]) -> Result<String, ConvertError> {
        let name = self.fresh("i64");
        self.graph
            .add_initializer_i64(&name, &[values.len()], values.to_vec())?;
        Ok(name)
    }

    /// `x` converted to `to`.
    pub fn cast(&mut self, x: &T, to: DataType) -> T {
        let to = match to {
            DataType::Float32 => stemflow_onnx::field::data_type::FLOAT,
            DataType::Float64 => stemflow_onnx::field::data_type::DOUBLE,
        };
        self.op(
            "Cast",
            &[&x.name],
            vec![("to", Attribute::Int(to))],
            x.shape.clone(),
        )
    }

    /// `x` reshaped to `shape` (same number of values).
    pub fn reshape(&mut self, x: &T, shape: &[usize]) -> Result<T, ConvertError> {
        let (from, to): (usize, usize) = (x.shape.iter().product(), shape.iter().product());
        if from != to {
            return Err(ConvertError::Layout(format!(
                "internal: reshape of {:?} to {shape:?}",
                x.shape
            )));
        }
        let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        let shape_name = self.i64s(&dims)?;
        Ok(self.op("Reshape", &[&x.name, &shape_name], vec![], shape.to_vec()))
    }

    /// `x` with its axes permuted.
    pub fn transpose(&mut self, x: &T, perm: &[usize]) -> T {
        let shape = perm.iter().map(|&p| x.shape[p]).collect();
        self.op("Transpose", &[&x.name], vec![("perm", ints(perm))], shape)
    }

    /// An elementwise binary operator with broadcasting.
    pub fn binary(&mut self, op_type: &str, a: &T, b: &T) -> T {
        let shape = broadcast_shape(&a.shape, &b.shape);
        self.op(op_type, &[&a.name, &b.name], vec![], shape)
    }

    /// `x` with `slice` of `axis` (`start..end`).
    pub fn slice(
        &mut self,
        x: &T,
        axis: usize,
        start: usize,
        end: usize,
    ) -> Result<T, ConvertError> {
        let starts = self.i64s(&[start as i64])?;
        let ends = self.i64s(&[end as i64])?;
        let axes = self.i64s(&[axis as i64])?;
        let mut shape = x.shape.clone();
        shape[axis] = end - start;
        Ok(self.op("Slice", &[&x.name, &starts, &ends, &axes], vec![], shape))
    }

    /// `x` zero-padded at the end of `axis` by `count`.
    pub fn pad_end(&mut self, x: &T, axis: usize, count: usize) -> Result<T, ConvertError> {
        let rank = x.shape.len();
        let mut pads = vec![0i64; 2 * rank];
        pads[rank + axis] = count as i64;
        let pads = self.i64s(&pads)?;
        let mut shape = x.shape.clone();
        shape[axis] += count;
        Ok(self.op("Pad", &[&x.name, &pads], vec![], shape))
    }

    /// The exact GELU of PyTorch (`0.5·x·(1 + erf(x/√2))`), in the form ONNX Runtime fuses
    /// into one kernel.
    pub fn gelu(&mut self, x: &T) -> Result<T, ConvertError> {
        let sqrt2 = self.scalar(std::f32::consts::SQRT_2)?;
        let one = self.scalar(1.0)?;
        let half = self.scalar(0.5)?;
        let scaled = self.binary("Div", x, &sqrt2);
        let erf = self.op("Erf", &[&scaled.name], vec![], x.shape.clone());
        let plus = self.binary("Add", &erf, &one);
        let product = self.binary("Mul", x, &plus);
        Ok(self.binary("Mul", &product, &half))
    }

    /// `torch.nn.functional.glu(x, dim=axis)`: the first half times the sigmoid of the second.
    pub fn glu(&mut self, x: &T, axis: usize) -> T {
        let mut shape = x.shape.clone();
        shape[axis] /= 2;
        let (a, b) = (self.fresh("glu_a"), self.fresh("glu_b"));
        let name = self.fresh("Split");
        self.graph.add_node(
            "Split",
            &name,
            &[&x.name],
            &[&a, &b],
            vec![("axis", Attribute::Int(axis as i64))],
        );
        let a = T {
            name: a,
            shape: shape.clone(),
        };
        let b = T { name: b, shape };
        let gate = self.op("Sigmoid", &[&b.name], vec![], b.shape.clone());
        self.binary("Mul", &a, &gate)
    }

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
        Ok(self.op(
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
        Ok(self.op(
            "ConvTranspose",
            &[&x.name, &weight.name, &bias.name],
            attributes,
            shape,
        ))
    }

    /// Inference batch normalisation of `x` `[N, C, …]` with per-channel `scale`, `bias`,
    /// `mean` and `variance` (`[C]` each).
    pub fn batch_norm(&mut self, x: &T, [scale, bias, mean, variance]: [&T; 4], epsilon: f32) -> T {
        self.op(
            "BatchNormalization",
            &[&x.name, &scale.name, &bias.name, &mean.name, &variance.name],
            vec![("epsilon", Attribute::Float(epsilon))],
            x.shape.clone(),
        )
    }

    /// `x @ weightᵀ + bias` for `x` `[rows, in]`, `weight` `[out, in]` (a `Linear`).
    pub fn linear(&mut self, x: &T, weight: &T, bias: &T) -> T {
        self.op(
            "Gemm",
            &[&x.name, &weight.name, &bias.name],
            vec![("transB", Attribute::Int(1))],
            vec![x.shape[0], weight.shape[0]],
        )
    }

    /// `a @ b` (ONNX `MatMul`: the last two axes multiplied, the others broadcast).
    pub fn matmul(&mut self, a: &T, b: &T) -> Result<T, ConvertError> {
        let (ra, rb) = (a.shape.len(), b.shape.len());
        if ra < 2 || rb < 2 || a.shape[ra - 1] != b.shape[rb - 2] {
            return Err(ConvertError::Layout(format!(
                "internal: MatMul of {:?} and {:?}",
                a.shape, b.shape
            )));
        }
        let mut shape = broadcast_shape(&a.shape[..ra - 2], &b.shape[..rb - 2]);
        shape.extend([a.shape[ra - 2], b.shape[rb - 1]]);
        Ok(self.op("MatMul", &[&a.name, &b.name], vec![], shape))
    }

    /// `x` cut along `axis` into consecutive parts of `sizes`.
    pub fn split(&mut self, x: &T, axis: usize, sizes: &[usize]) -> Result<Vec<T>, ConvertError> {
        if sizes.iter().sum::<usize>() != x.shape[axis] {
            return Err(ConvertError::Layout(format!(
                "internal: split of {:?} axis {axis} into {sizes:?}",
                x.shape
            )));
        }
        let split: Vec<i64> = sizes.iter().map(|&n| n as i64).collect();
        let split = self.i64s(&split)?;
        let parts: Vec<T> = sizes
            .iter()
            .map(|&n| {
                let mut shape = x.shape.clone();
                shape[axis] = n;
                T {
                    name: self.fresh("split"),
                    shape,
                }
            })
            .collect();
        let outputs: Vec<&str> = parts.iter().map(|t| t.name.as_str()).collect();
        let name = self.fresh("Split");
        self.graph.add_node(
            "Split",
            &name,
            &[&x.name, &split],
            &outputs,
            vec![("axis", Attribute::Int(axis as i64))],
        );
        Ok(parts)
    }

    /// `xs` joined along `axis` (the input itself when there is one, unless the node is
    /// [`Builder::named`]).
    pub fn concat(&mut self, xs: &[T], axis: usize) -> T {
        if let ([one], None) = (xs, &self.next_name) {
            return one.clone();
        }
        let mut shape = xs[0].shape.clone();
        shape[axis] = xs.iter().map(|t| t.shape[axis]).sum();
        let names: Vec<&str> = xs.iter().map(|t| t.name.as_str()).collect();
        self.op(
            "Concat",
            &names,
            vec![("axis", Attribute::Int(axis as i64))],
            shape,
        )
    }

    /// An elementwise operator of one input (`Tanh`, `Sigmoid`, `Exp`, …).
    pub fn unary(&mut self, op_type: &str, x: &T) -> T {
        self.op(op_type, &[&x.name], vec![], x.shape.clone())
    }

    /// The rows of `x` along `axis` at `indices` (ONNX `Gather`).
    pub fn gather(&mut self, x: &T, axis: usize, indices: &[usize]) -> Result<T, ConvertError> {
        if let Some(&bad) = indices.iter().find(|&&i| i >= x.shape[axis]) {
            return Err(ConvertError::Layout(format!(
                "internal: gather of row {bad} of {:?} axis {axis}",
                x.shape
            )));
        }
        let values: Vec<i64> = indices.iter().map(|&i| i as i64).collect();
        let indices_name = self.i64s(&values)?;
        let mut shape = x.shape.clone();
        shape[axis] = values.len();
        Ok(self.op(
            "Gather",
            &[&x.name, &indices_name],
            vec![("axis", Attribute::Int(axis as i64))],
            shape,
        ))
    }

    /// The mean over `axes` (kept as size-1 axes).
    pub fn mean(&mut self, x: &T, axes: &[usize]) -> T {
        let mut shape = x.shape.clone();
        for &axis in axes {
            shape[axis] = 1;
        }
        self.op(
            "ReduceMean",
            &[&x.name],
            vec![("axes", ints(axes)), ("keepdims", Attribute::Int(1))],
            shape,
        )
    }
}
