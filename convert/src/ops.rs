//! [`Builder`]: the ONNX operators the converted graphs (HTDemucs, BS- and Mel-RoFormer) are
//! made of, on tensors whose shapes are tracked here (every shape is static: one segment per
//! run), so each reshape is a constant and each layer's output shape is checked as it is built.

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

/// The graph and a counter for fresh value names.
pub struct Builder<'a> {
    /// The graph.
    pub graph: OnnxGraph<'a>,
    next_id: usize,
}

fn ints(values: &[usize]) -> Attribute {
    Attribute::Ints(values.iter().map(|&v| v as i64).collect())
}

impl<'a> Builder<'a> {
    /// A builder of the graph `name`.
    pub fn new(name: &str) -> Self {
        Builder {
            graph: OnnxGraph::new(name),
            next_id: 0,
        }
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
        let name = self.fresh(op_type);
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

    /// A checkpoint tensor as the initializer `name`, reshaped to `shape`.
    pub fn weight(
        &mut self,
        name: &str,
        shape: &[usize],
        values: Vec<f32>,
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
        let rank = a.shape.len().max(b.shape.len());
        let dim = |s: &[usize], i: usize| {
            let offset = rank - s.len();
            if i < offset {
                1
            } else {
                s[i - offset]
            }
        };
        let shape = (0..rank)
            .map(|i| dim(&a.shape, i).max(dim(&b.shape, i)))
            .collect();
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
        let kernel = &weight.shape[2..];
        let mut shape = vec![x.shape[0], weight.shape[0]];
        for (i, &k) in kernel.iter().enumerate() {
            let span = dilations[i] * (k - 1) + 1;
            let padded = x.shape[2 + i] + 2 * pads[i];
            if padded < span {
                return Err(ConvertError::Layout(format!(
                    "internal: convolution of {:?} with kernel {kernel:?}",
                    x.shape
                )));
            }
            shape.push((padded - span) / strides[i] + 1);
        }
        if x.shape[1] != weight.shape[1] {
            return Err(ConvertError::Layout(format!(
                "{}: {} input channels, the layer takes {}",
                weight.name, x.shape[1], weight.shape[1]
            )));
        }
        let all_pads: Vec<usize> = pads.iter().chain(pads.iter()).copied().collect();
        Ok(self.op(
            "Conv",
            &[&x.name, &weight.name, &bias.name],
            vec![
                ("dilations", ints(dilations)),
                ("kernel_shape", ints(kernel)),
                ("pads", ints(&all_pads)),
                ("strides", ints(strides)),
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
        let kernel = &weight.shape[2..];
        if x.shape[1] != weight.shape[0] {
            return Err(ConvertError::Layout(format!(
                "{}: {} input channels, the layer takes {}",
                weight.name, x.shape[1], weight.shape[0]
            )));
        }
        let mut shape = vec![x.shape[0], weight.shape[1]];
        for (i, &k) in kernel.iter().enumerate() {
            shape.push((x.shape[2 + i] - 1) * strides[i] + k);
        }
        Ok(self.op(
            "ConvTranspose",
            &[&x.name, &weight.name, &bias.name],
            vec![("kernel_shape", ints(kernel)), ("strides", ints(strides))],
            shape,
        ))
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

    /// `GroupNorm(groups, C)` with its affine part on `x` `[N, C, …]`: statistics over each group
    /// of `C / groups` channels and everything after them, per item of `N`, then
    /// `weight · (x − mean) / √(var + eps) + bias` as one per-channel scale and shift
    /// (`BatchNormalization` with the computed scale and shift: one pass over `x`).
    ///
    /// Each channel's mean and mean square are summed over its last axes first and the channels
    /// of a group then summed in float64: ONNX Runtime sums a reduction over several axes (and
    /// its own `InstanceNormalization`) in one float32 run, 4e-4 off over the 8 million values of
    /// a time layer, where PyTorch is 1e-7 off.
    pub fn group_norm(
        &mut self,
        x: &T,
        groups: usize,
        weight: Vec<f32>,
        bias: Vec<f32>,
        name: &str,
    ) -> Result<T, ConvertError> {
        let (items, channels) = (x.shape[0], x.shape[1]);
        let size: usize = x.shape[2..].iter().product();
        let flat = self.reshape(x, &[items, channels, size])?;
        let per_group = channels / groups;
        let stats = self.channel_moments(&flat, 2)?;
        let (mean, inverse_std) =
            self.group_moments(stats, &[items, groups, per_group], 2, size)?;
        let weight = self.weight(&format!("{name}.weight"), &[groups, per_group], weight)?;
        let bias = self.weight(&format!("{name}.bias"), &[groups, per_group], bias)?;
        let (scale, shift) =
            self.scale_shift(&mean, &inverse_std, &weight, &bias, items * channels)?;
        let batched = self.reshape(x, &[1, items * channels, size])?;
        let zeros = self.constant("zeros", &[items * channels], vec![0.0; items * channels])?;
        let ones = self.constant("ones", &[items * channels], vec![1.0; items * channels])?;
        let normalised = self.op(
            "BatchNormalization",
            &[
                &batched.name,
                &scale.name,
                &shift.name,
                &zeros.name,
                &ones.name,
            ],
            vec![("epsilon", Attribute::Float(0.0))],
            batched.shape.clone(),
        );
        self.reshape(&normalised, &x.shape)
    }

    /// `GroupNorm` of one group over tokens `[n, dim]` (every token and channel), with a
    /// per-channel affine part (demucs' `MyGroupNorm(1, dim)`).
    pub fn token_group_norm(
        &mut self,
        x: &T,
        weight: Vec<f32>,
        bias: Vec<f32>,
        name: &str,
    ) -> Result<T, ConvertError> {
        let (tokens, dim) = (x.shape[0], x.shape[1]);
        let stats = self.channel_moments(x, 1)?;
        let (mean, inverse_std) = self.group_moments(stats, &[1, 1, tokens], 2, dim)?;
        let weight = self.weight(&format!("{name}.weight"), &[1, dim], weight)?;
        let bias = self.weight(&format!("{name}.bias"), &[1, dim], bias)?;
        let (scale, shift) = self.scale_shift(&mean, &inverse_std, &weight, &bias, dim)?;
        let scale = self.reshape(&scale, &[1, dim])?;
        let shift = self.reshape(&shift, &[1, dim])?;
        let scaled = self.binary("Mul", x, &scale);
        Ok(self.binary("Add", &scaled, &shift))
    }

    /// Each row's mean and sum of squares over `axis` (the last), float32 as `[rows…, 1]`.
    fn channel_moments(&mut self, x: &T, axis: usize) -> Result<(T, T), ConvertError> {
        let mean = self.mean(x, &[axis]);
        let mut shape = x.shape.clone();
        shape[axis] = 1;
        let sum_squares = self.op(
            "ReduceSumSquare",
            &[&x.name],
            vec![("axes", ints(&[axis])), ("keepdims", Attribute::Int(1))],
            shape,
        );
        Ok((mean, sum_squares))
    }

    /// From rows' means and sums of squares over `row_size` values each, grouped as `grouped`
    /// (the rows of a group along `axis`), the groups' mean and `1/√(var + eps)` in float64.
    fn group_moments(
        &mut self,
        (mean, sum_squares): (T, T),
        grouped: &[usize],
        axis: usize,
        row_size: usize,
    ) -> Result<(T, T), ConvertError> {
        let mean = self.cast(&mean, DataType::Float64);
        let mean = self.reshape(&mean, grouped)?;
        let group_mean = self.mean(&mean, &[axis]);
        let sum_squares = self.cast(&sum_squares, DataType::Float64);
        let sum_squares = self.reshape(&sum_squares, grouped)?;
        let row_size = self.scalar(row_size as f32)?;
        let row_size = self.cast(&row_size, DataType::Float64);
        let mean_squares = self.binary("Div", &sum_squares, &row_size);
        let group_mean_square = self.mean(&mean_squares, &[axis]);
        let squared_mean = self.binary("Mul", &group_mean, &group_mean);
        let variance = self.binary("Sub", &group_mean_square, &squared_mean);
        let epsilon = self.scalar(NORM_EPSILON)?;
        let epsilon = self.cast(&epsilon, DataType::Float64);
        let shifted = self.binary("Add", &variance, &epsilon);
        let std = self.op("Sqrt", &[&shifted.name], vec![], shifted.shape.clone());
        let inverse = self.op("Reciprocal", &[&std.name], vec![], std.shape.clone());
        Ok((group_mean, inverse))
    }

    /// The per-channel scale `weight / std` and shift `bias − mean · scale`, float32, flattened
    /// to `[len]`.
    fn scale_shift(
        &mut self,
        mean: &T,
        inverse_std: &T,
        weight: &T,
        bias: &T,
        len: usize,
    ) -> Result<(T, T), ConvertError> {
        let weight = self.cast(weight, DataType::Float64);
        let bias = self.cast(bias, DataType::Float64);
        let scale = self.binary("Mul", &weight, inverse_std);
        let offset = self.binary("Mul", mean, &scale);
        let shift = self.binary("Sub", &bias, &offset);
        let scale = self.cast(&scale, DataType::Float32);
        let shift = self.cast(&shift, DataType::Float32);
        Ok((self.reshape(&scale, &[len])?, self.reshape(&shift, &[len])?))
    }

    /// `LayerNorm` over the last axis, with its weight and bias.
    pub fn layer_norm(&mut self, x: &T, scale: &T, shift: &T) -> T {
        self.op(
            "LayerNormalization",
            &[&x.name, &scale.name, &shift.name],
            vec![
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(NORM_EPSILON)),
            ],
            x.shape.clone(),
        )
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
