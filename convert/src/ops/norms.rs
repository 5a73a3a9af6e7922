//! Normalisations: group norms (in two stages, float64 where float32 sums drift), layer norms
//! and the L2 norm of RMSNorms.

use stemflow_onnx::Attribute;

use super::{Builder, DataType, NORMALIZE_EPSILON, NORM_EPSILON, T};
use crate::error::ConvertError;

impl Builder<'_> {
    /// A group norm's affine part as the initializers `{name}.weight` and `{name}.bias`
    /// (`[groups, C / groups]`; `[C, 1]` in a GPU graph), for [`Builder::group_norm`].
    pub fn group_norm_affine(
        &mut self,
        channels: usize,
        groups: usize,
        weight: Vec<f32>,
        bias: Vec<f32>,
        name: &str,
    ) -> Result<(T, T), ConvertError> {
        let shape = if self.is_gpu() {
            [channels, 1]
        } else {
            [groups, channels / groups]
        };
        let weight = self.weight(&format!("{name}.weight"), &shape, weight)?;
        let bias = self.weight(&format!("{name}.bias"), &shape, bias)?;
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
    /// tensors can share it: `affine` is its `(weight, bias)`. A GPU graph normalises with
    /// `InstanceNormalization` (`instance_group_norm`).
    pub fn group_norm(&mut self, x: &T, groups: usize, affine: &(T, T)) -> Result<T, ConvertError> {
        let (items, channels) = (x.shape[0], x.shape[1]);
        let size: usize = x.shape[2..].iter().product();
        if self.is_gpu() {
            return self.instance_group_norm(x, [items, channels, size], groups, affine);
        }
        let (weight, bias) = affine;
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
        let normalised = self.op_like(
            &batched,
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
        if self.is_gpu() {
            let weight = self.weight(&format!("{name}.weight"), &[dim], weight)?;
            let bias = self.weight(&format!("{name}.bias"), &[dim], bias)?;
            let all = self.reshape(x, &[1, 1, tokens * dim])?;
            let normalised = self.instance_norm(&all)?;
            let normalised = self.reshape(&normalised, &[tokens, dim])?;
            let scaled = self.binary("Mul", &normalised, &weight);
            return Ok(self.binary("Add", &scaled, &bias));
        }
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
        let sum_squares = self.reduce("ReduceSumSquare", x, &[axis]);
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
        let std = self.unary("Sqrt", &shifted);
        let inverse = self.unary("Reciprocal", &std);
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
        self.op_like(
            x,
            "LayerNormalization",
            &[&x.name, &scale.name, &shift.name],
            vec![
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(NORM_EPSILON)),
            ],
            x.shape.clone(),
        )
    }

    /// `max(‖x‖₂, 1e-12)` over the last axis, kept as a size-1 axis: the divisor of
    /// `torch.nn.functional.normalize(x, dim=-1)`.
    pub fn l2_norm_divisor(&mut self, x: &T) -> Result<T, ConvertError> {
        let last = x.shape.len() - 1;
        // A float16 sum of squares overflows: float32 in a float16 graph.
        let wide = self.as_type(x, DataType::Float32);
        let norm = self.reduce("ReduceL2", &wide, &[last]);
        let floor = self.scalar_f32(NORMALIZE_EPSILON)?;
        let divisor = self.binary("Max", &norm, &floor);
        Ok(self.as_type(&divisor, x.dtype))
    }
}
