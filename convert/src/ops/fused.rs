//! The operators of GPU graphs that the CPU graphs spell out: group norms as
//! `InstanceNormalization`, RMSNorm as `SimplifiedLayerNormalization`, attention as ONNX
//! Runtime's `MultiHeadAttention`, mean and standard deviation in two float32 stages. Their
//! statistics are float32 in a float16 graph too: `InstanceNormalization` gets its input cast,
//! the layer norms compute in float32 themselves (`stash_type` 1).

use stemflow_onnx::Attribute;

use super::{Builder, DataType, NORM_EPSILON, T};
use crate::error::ConvertError;

impl Builder<'_> {
    /// `(x − mean) / √(var + 1e-5)` over the last axis of `x` `[N, G, K]`, for each of its
    /// `N·G` rows, in float32 (`InstanceNormalization` with unit scale and zero shift).
    pub(super) fn instance_norm(&mut self, x: &T) -> Result<T, ConvertError> {
        let groups = x.shape[1];
        let input = self.as_type(x, DataType::Float32);
        let ones = self.constant_f32("ones", &[groups], vec![1.0; groups])?;
        let zeros = self.constant_f32("zeros", &[groups], vec![0.0; groups])?;
        let normalised = self.op_like(
            &input,
            "InstanceNormalization",
            &[&input.name, &ones.name, &zeros.name],
            vec![("epsilon", Attribute::Float(NORM_EPSILON))],
            input.shape.clone(),
        );
        Ok(self.as_type(&normalised, x.dtype))
    }

    /// [`Builder::group_norm`] in a GPU graph: `GroupNorm(groups, C)` on `x` `[N, C, …]`, seen
    /// as `[items, channels, size]`, with `weight` and `bias` `[C, 1]`: each group normalised by
    /// `InstanceNormalization` (float32), then scaled and shifted per channel.
    pub(super) fn instance_group_norm(
        &mut self,
        x: &T,
        [items, channels, size]: [usize; 3],
        groups: usize,
        (weight, bias): &(T, T),
    ) -> Result<T, ConvertError> {
        let grouped = self.reshape(x, &[items, groups, channels / groups * size])?;
        let normalised = self.instance_norm(&grouped)?;
        let channelled = self.reshape(&normalised, &[items, channels, size])?;
        let scaled = self.binary("Mul", &channelled, weight);
        let shifted = self.binary("Add", &scaled, bias);
        if shifted.shape == x.shape {
            return Ok(shifted);
        }
        self.reshape(&shifted, &x.shape)
    }

    /// RMSNorm over the last axis, `x / max(‖x‖, 1e-12) · √dim · scale`, as ONNX Runtime's
    /// `SimplifiedLayerNormalization` (`x / √(mean(x²) + ε) · scale`, its statistics in
    /// float32): the same for every `‖x‖` above 1e-12 to float32 precision (ε = 1e-24 / dim),
    /// and 0, like it, for a silent token. `scale` is `[dim]`; `None`: ones.
    pub fn rms_norm(&mut self, x: &T, scale: Option<&T>) -> Result<T, ConvertError> {
        let dim = x.shape[x.shape.len() - 1];
        let ones;
        let scale = match scale {
            Some(scale) => scale,
            None => {
                ones = self.constant("ones", &[dim], vec![1.0; dim])?;
                &ones
            }
        };
        Ok(self.op_like(
            x,
            "SimplifiedLayerNormalization",
            &[&x.name, &scale.name],
            vec![
                ("axis", Attribute::Int(-1)),
                ("epsilon", Attribute::Float(1e-24 / dim as f32)),
                ("stash_type", Attribute::Int(1)),
            ],
            x.shape.clone(),
        ))
    }

    /// The mean of `x` over every axis but the first (the batch's), in float32, summed in two
    /// stages (the last axis, then the rest) so that a long float32 sum does not drift.
    pub fn mean_per_item(&mut self, x: &T) -> T {
        let last = x.shape.len() - 1;
        let rows = self.mean(x, &[last]);
        let rest: Vec<usize> = (1..last).collect();
        if rest.is_empty() {
            rows
        } else {
            self.mean(&rows, &rest)
        }
    }

    /// `softmax(q·kᵀ·scale)·v` per head, for `q` `[N, Lq, heads·d]`, `k` `[N, Lk, heads·d]` and
    /// `v` `[N, Lk, heads·d]` (a batch on `N`): ONNX Runtime's `MultiHeadAttention`, which its
    /// CUDA and DirectML providers run as one fused kernel.
    pub fn multi_head_attention(&mut self, [q, k, v]: [&T; 3], heads: usize, scale: f32) -> T {
        let name = self.emit(
            super::MICROSOFT_DOMAIN,
            "MultiHeadAttention",
            &[&q.name, &k.name, &v.name],
            vec![
                ("num_heads", Attribute::Int(heads as i64)),
                ("scale", Attribute::Float(scale)),
            ],
        );
        q.like(name, q.shape.clone())
    }
}
