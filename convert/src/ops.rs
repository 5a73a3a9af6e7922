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
/// `torch.nn.functional.normalize`'s floor of the norm (`eps`).
pub const NORMALIZE_EPSILON: f32 = 1e-12;

/// The graph and a counter for fresh value names.
pub struct Builder<'a> {
    /// The graph.
    pub graph: OnnxGraph<'a>,
    next_id: usize,
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

    /// A group norm's affine part as the initializers `{name}.weight` and `{name}.bias`
    /// (`[groups, C / groups]`), for [`Builder::group_norm`].
    pub fn group_norm_affine(
        &mut self,
        channels: usize,
        groups: usize,
        weight: Vec<f32>,
        bias: Vec<f32>,
        name: &str,
    ) -> Result<(T, T), ConvertError> {
        let per_group = channels / groups;
        let weight = self.weight(&format!("{name}.weight"), &[groups, per_group], weight)?;
        let bias = self.weight(&format!("{name}.bias"), &[groups, per_group], bias)?;
        Ok((weight, bias))
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
    ///
    /// The affine part is put in the graph first ([`Builder::group_norm_affine`]), so that several
    /// tensors can share it.
    pub fn group_norm(
        &mut self,
        x: &T,
        groups: usize,
        weight: &T,
        bias: &T,
    ) -> Result<T, ConvertError> {
        let (items, channels) = (x.shape[0], x.shape[1]);
        let size: usize = x.shape[2..].iter().product();
        let flat = self.reshape(x, &[items, channels, size])?;
        let per_group = channels / groups;
        let stats = self.channel_moments(&flat, 2)?;
        let (mean, inverse_std) =
            self.group_moments(stats, &[items, groups, per_group], 2, size)?;
        let (scale, shift) =
            self.scale_shift(&mean, &inverse_std, weight, bias, items * channels)?;
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

    /// `xs` joined along `axis` (the input itself when there is one).
    pub fn concat(&mut self, xs: &[T], axis: usize) -> T {
        if let [one] = xs {
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

    /// `max(‖x‖₂, 1e-12)` over the last axis, kept as a size-1 axis: the divisor of
    /// `torch.nn.functional.normalize(x, dim=-1)`.
    pub fn l2_norm_divisor(&mut self, x: &T) -> Result<T, ConvertError> {
        let last = x.shape.len() - 1;
        let mut shape = x.shape.clone();
        shape[last] = 1;
        let norm = self.op(
            "ReduceL2",
            &[&x.name],
            vec![("axes", ints(&[last])), ("keepdims", Attribute::Int(1))],
            shape,
        );
        let floor = self.scalar(NORMALIZE_EPSILON)?;
        Ok(self.binary("Max", &norm, &floor))
    }

    /// `softmax(q @ kᵀ) @ v` for `q` `[…, Lq, d]`, `k_t` (keys transposed) `[…, d, Lk]` and
    /// `v` `[…, Lk, d]` (scaling is the caller's, folded into `q`), computed in blocks along
    /// `axis` so that no more than `max_scores` attention weights live at once. `axis` is the
    /// queries' axis (`rank − 2`: only `q` is cut) or a batch axis before it (`q`, `k_t` and `v`
    /// are cut alike).
    pub fn attention_in_blocks(
        &mut self,
        q: &T,
        k_t: &T,
        v: &T,
        axis: usize,
        max_scores: usize,
    ) -> Result<T, ConvertError> {
        let rank = q.shape.len();
        let lk = k_t.shape[rank - 1];
        let scores_per_row =
            q.shape.iter().product::<usize>() / q.shape[rank - 1] * lk / q.shape[axis];
        let block = (max_scores / scores_per_row.max(1)).clamp(1, q.shape[axis]);
        let is_query_axis = axis == rank - 2;
        let mut outputs = Vec::new();
        for start in (0..q.shape[axis]).step_by(block) {
            let end = (start + block).min(q.shape[axis]);
            let cut = |b: &mut Self, x: &T| -> Result<T, ConvertError> {
                if block == x.shape[axis] {
                    Ok(x.clone())
                } else {
                    b.slice(x, axis, start, end)
                }
            };
            let q_block = cut(self, q)?;
            let (k_block, v_block) = if is_query_axis {
                (k_t.clone(), v.clone())
            } else {
                (cut(self, k_t)?, cut(self, v)?)
            };
            let scores = self.matmul(&q_block, &k_block)?;
            let weights = self.op(
                "Softmax",
                &[&scores.name],
                vec![("axis", Attribute::Int(-1))],
                scores.shape.clone(),
            );
            outputs.push(self.matmul(&weights, &v_block)?);
        }
        Ok(self.concat(&outputs, axis))
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
