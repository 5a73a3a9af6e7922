//! [`T`], a tensor of the graph under construction (name, shape of one item, where the batch
//! goes, element type), and what a graph is built for ([`Target`]).
//!
//! A graph for GPUs takes a batch of chunks: its input's first axis is symbolic. Shapes stay
//! static per item: `shape` is one item's, and `batch` names the axis the batch multiplies (the
//! batch is that axis' outermost factor: `[B·F, C, T]` is `shape` `[F, C, T]`, `batch`
//! `Some(0)`). Reshapes keep the batch as a factor of one axis ([`reshaped_batch_axis`]), so a
//! reshape constant holds `-1` there and every other dimension fixed.

use crate::error::ConvertError;

/// A tensor of the graph under construction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct T {
    /// The value's name in the graph.
    pub name: String,
    /// The shape of one item of the batch (the whole shape when there is no batch).
    pub shape: Vec<usize>,
    /// The axis the batch multiplies, as its outermost factor; `None`: no batch.
    pub batch: Option<usize>,
    /// The element type.
    pub dtype: DataType,
}

impl T {
    /// A float32 value of `shape` without a batch (a graph input, an initializer).
    pub fn new(name: &str, shape: &[usize]) -> Self {
        T {
            name: name.to_owned(),
            shape: shape.to_vec(),
            batch: None,
            dtype: DataType::Float32,
        }
    }

    /// A float32 value whose first axis is the batch, each item of `shape` (`shape[0]` is
    /// usually 1).
    pub fn batched(name: &str, shape: &[usize]) -> Self {
        T {
            batch: Some(0),
            ..T::new(name, shape)
        }
    }

    /// The value `name` of `shape` with this tensor's element type, and its batch axis when the
    /// rank is the same.
    pub(super) fn like(&self, name: String, shape: Vec<usize>) -> T {
        T {
            batch: self.batch.filter(|_| shape.len() == self.shape.len()),
            dtype: self.dtype,
            name,
            shape,
        }
    }
}

/// Element types of tensors and of [`super::Builder::cast`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataType {
    /// float32.
    Float32,
    /// float16.
    Float16,
    /// float64.
    Float64,
}

impl DataType {
    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i64 {
        use stemflow_onnx::field::data_type;
        match self {
            DataType::Float32 => data_type::FLOAT,
            DataType::Float16 => data_type::FLOAT16,
            DataType::Float64 => data_type::DOUBLE,
        }
    }
}

/// The precision a GPU graph computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precision {
    /// Everything in float32.
    Float32,
    /// Matrix products, convolutions and the activations between them in float16; norms'
    /// statistics, softmax, the STFT and its inverse in float32.
    Float16,
}

/// What a graph is built for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// ONNX Runtime's CPU provider: one segment per run, layers in blocks that keep its
    /// allocation planner's buffers small, statistics summed in float64 where float32 drifts.
    Cpu,
    /// GPU providers (CUDA, DirectML): a batch of segments per run, the STFT and its inverse in
    /// the graph, fused operators, no float64, no blocks.
    Gpu(Precision),
}

/// Metadata key a GPU graph carries: `float32` or `float16`, the precision it computes in.
pub const GPU_GRAPH_METADATA_KEY: &str = "stemflow.gpu";

impl Target {
    /// Writes what the graph is built for into its metadata: nothing for the CPU;
    /// [`GPU_GRAPH_METADATA_KEY`] (and `stemflow quantize --fp16`'s
    /// [`crate::float16::FLOAT16_METADATA_KEY`] in float16) for GPUs.
    pub fn write_metadata(self, graph: &mut stemflow_onnx::OnnxGraph<'_>) {
        match self {
            Target::Cpu => {}
            Target::Gpu(Precision::Float32) => {
                graph.set_metadata(GPU_GRAPH_METADATA_KEY, "float32")
            }
            Target::Gpu(Precision::Float16) => {
                graph.set_metadata(GPU_GRAPH_METADATA_KEY, "float16");
                graph.set_metadata(
                    crate::float16::FLOAT16_METADATA_KEY,
                    "built in float16 for GPUs: norms, softmax and the STFT in float32",
                );
            }
        }
    }
}

/// The shape `a` and `b` broadcast to (numpy's rule: aligned from the last axis).
pub(super) fn broadcast_shape(a: &[usize], b: &[usize]) -> Vec<usize> {
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

/// The batch axis of `from` (batch at `axis`) reshaped to `to`: the first axis of `to` whose
/// preceding dimensions hold as many values as those before `axis` in `from`. `None` when
/// `from` has no batch.
pub(super) fn reshaped_batch_axis(
    from: &[usize],
    axis: Option<usize>,
    to: &[usize],
) -> Result<Option<usize>, ConvertError> {
    let Some(axis) = axis else {
        return Ok(None);
    };
    let before: usize = from[..axis].iter().product();
    let mut product = 1;
    for (index, &dim) in to.iter().enumerate() {
        if product == before {
            return Ok(Some(index));
        }
        product *= dim;
    }
    Err(ConvertError::Layout(format!(
        "internal: a reshape of {from:?} (batch on axis {axis}) to {to:?} splits the batch"
    )))
}

/// Where the batch of an elementwise result over `a` and `b` lies, on the broadcast shape; an
/// error when the two are batched on different axes. Where the items would not line up (a
/// tensor without a batch that is not 1 along the other's batch axis, or two batched tensors of
/// other sizes there), the batch must come apart first (`Ok(Err(axis))`: that axis, on the
/// broadcast shape).
pub(super) fn broadcast_batch_axis(
    a: &T,
    b: &T,
) -> Result<Result<Option<usize>, usize>, ConvertError> {
    let rank = a.shape.len().max(b.shape.len());
    let aligned = |t: &T| t.batch.map(|axis| axis + rank - t.shape.len());
    let dim_at = |t: &T, axis: usize| {
        let offset = rank - t.shape.len();
        if axis < offset {
            1
        } else {
            t.shape[axis - offset]
        }
    };
    match (aligned(a), aligned(b)) {
        (None, None) => Ok(Ok(None)),
        // Batched alike: the items line up only where each item's dimensions are equal.
        (Some(p), Some(q)) if p == q && dim_at(a, p) == dim_at(b, p) => Ok(Ok(Some(p))),
        (Some(p), Some(q)) if p == q => Ok(Err(p)),
        (Some(p), Some(q)) => Err(ConvertError::Layout(format!(
            "internal: {} and {} are batched on different axes ({p}, {q})",
            a.name, b.name
        ))),
        (Some(p), None) if dim_at(b, p) == 1 => Ok(Ok(Some(p))),
        (None, Some(q)) if dim_at(a, q) == 1 => Ok(Ok(Some(q))),
        (Some(p), None) | (None, Some(p)) => Ok(Err(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(shape: &[usize], batch: Option<usize>) -> T {
        T {
            batch,
            ..T::new("x", shape)
        }
    }

    #[test]
    fn a_reshape_keeps_the_batch_as_a_factor_of_one_axis() {
        // [B, C, F, T] → [B·C·F? …]: the batch stays outermost.
        assert_eq!(
            reshaped_batch_axis(&[1, 4, 8], Some(0), &[4, 8]).unwrap(),
            Some(0)
        );
        assert_eq!(
            reshaped_batch_axis(&[4, 8], Some(0), &[1, 4, 8]).unwrap(),
            Some(0)
        );
        // [F, C, T] with the batch on F (rows B·F) back to [1, F, C, T].
        assert_eq!(
            reshaped_batch_axis(&[16, 3, 5], Some(0), &[1, 16, 3, 5]).unwrap(),
            Some(0)
        );
        // Batch behind the first axis: [C, B·T] → [C, 2, T/2] keeps it on axis 1.
        assert_eq!(
            reshaped_batch_axis(&[3, 8], Some(1), &[3, 2, 4]).unwrap(),
            Some(1)
        );
        // [C, B·T] → [C·2, T/2] would interleave items.
        assert!(reshaped_batch_axis(&[3, 8], Some(1), &[6, 4]).is_err());
        assert_eq!(reshaped_batch_axis(&[3, 8], None, &[6, 4]).unwrap(), None);
    }

    #[test]
    fn elementwise_results_keep_the_batch_or_say_it_must_come_apart() {
        let tokens = t(&[6, 4], Some(0));
        assert_eq!(
            broadcast_batch_axis(&tokens, &t(&[4], None)).unwrap(),
            Ok(Some(0))
        );
        assert_eq!(
            broadcast_batch_axis(&tokens, &t(&[1, 4], None)).unwrap(),
            Ok(Some(0))
        );
        // A per-item table over the rows: the batch must be split off first.
        assert_eq!(
            broadcast_batch_axis(&tokens, &t(&[6, 4], None)).unwrap(),
            Err(0)
        );
        assert!(broadcast_batch_axis(&tokens, &t(&[6, 4], Some(1))).is_err());
        assert_eq!(
            broadcast_batch_axis(&t(&[6, 4], None), &t(&[4], None)).unwrap(),
            Ok(None)
        );
    }
}
