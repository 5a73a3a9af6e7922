//! Attention as plain operators: scores, softmax and weighted values, in blocks of queries.

use stemflow_onnx::Attribute;

use super::{Builder, T};
use crate::error::ConvertError;

impl Builder<'_> {
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
}
