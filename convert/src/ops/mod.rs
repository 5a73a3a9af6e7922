//! [`Builder`]: the ONNX operators the converted graphs (HTDemucs, BS- and Mel-RoFormer,
//! Spleeter) are made of, on tensors whose shapes are tracked here (every shape is static per
//! segment), so each reshape is a constant and each layer's output shape is checked as it is
//! built.
//!
//! The same network code builds a graph for the CPU and one for GPUs ([`Target`]): the
//! operators that differ (norms, attention, GELU) choose by the target, and a GPU graph's batch
//! axis and float16 activations are tracked on each tensor ([`T`]).

mod attention;
pub mod conv;
mod fused;
mod norms;
pub mod spectral;
mod tensor;

use std::borrow::Cow;

use stemflow_onnx::{Attribute, OnnxGraph};

use self::tensor::{broadcast_batch_axis, broadcast_shape, reshaped_batch_axis};
pub use self::tensor::{DataType, Precision, Target, GPU_GRAPH_METADATA_KEY, T};
use crate::error::ConvertError;
use crate::float16::values::to_half;

/// PyTorch's default `eps` of `GroupNorm` and `LayerNorm`.
pub const NORM_EPSILON: f32 = 1e-5;
/// `torch.nn.functional.normalize`'s floor of the norm (`eps`).
pub const NORMALIZE_EPSILON: f32 = 1e-12;
/// ONNX Runtime's own operators' domain.
const MICROSOFT_DOMAIN: &str = "com.microsoft";

/// The graph, what it is built for and a counter for fresh value names.
pub struct Builder<'a> {
    /// The graph.
    pub graph: OnnxGraph<'a>,
    /// What the graph is built for.
    pub target: Target,
    next_id: usize,
    /// What fresh names start with (to keep clear of another graph's names).
    name_prefix: String,
    /// The name of the next node and its output, when the caller chose one ([`Builder::named`]).
    next_name: Option<String>,
}

fn ints(values: &[usize]) -> Attribute {
    Attribute::Ints(values.iter().map(|&v| v as i64).collect())
}

impl<'a> Builder<'a> {
    /// A builder of the graph `name` for `target`.
    pub fn for_target(name: &str, target: Target) -> Self {
        Builder {
            graph: OnnxGraph::new(name),
            target,
            next_id: 0,
            name_prefix: String::new(),
            next_name: None,
        }
    }

    /// Whether the graph is built for GPUs.
    pub fn is_gpu(&self) -> bool {
        matches!(self.target, Target::Gpu(_))
    }

    /// The element type of weights and activations: float16 in a float16 GPU graph.
    pub fn compute_type(&self) -> DataType {
        match self.target {
            Target::Gpu(Precision::Float16) => DataType::Float16,
            _ => DataType::Float32,
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
        format!("{}{hint}_{}", self.name_prefix, self.next_id)
    }

    /// Starts every fresh name with `prefix` from now on: for nodes joined to another graph's.
    pub fn prefix_names(&mut self, prefix: &str) {
        self.name_prefix = prefix.to_owned();
    }

    /// Adds a node of `domain` with one output; returns the output's name.
    fn emit(
        &mut self,
        domain: &str,
        op_type: &str,
        inputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
    ) -> String {
        let name = match self.next_name.take() {
            Some(name) => name,
            None => self.fresh(op_type),
        };
        self.graph
            .add_node_in(domain, op_type, &name, inputs, &[&name], attributes);
        name
    }

    /// A node with one output of `shape` whose element type and batch are `like`'s.
    pub fn op_like(
        &mut self,
        like: &T,
        op_type: &str,
        inputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
        shape: Vec<usize>,
    ) -> T {
        let name = self.emit("", op_type, inputs, attributes);
        like.like(name, shape)
    }

    /// An ONNX Runtime operator (`com.microsoft` domain) with one output shaped like `like`.
    pub fn microsoft_op(
        &mut self,
        like: &T,
        op_type: &str,
        inputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
    ) -> T {
        let name = self.emit(MICROSOFT_DOMAIN, op_type, inputs, attributes);
        like.like(name, like.shape.clone())
    }

    /// A constant in the compute type ([`Builder::compute_type`]) (weights are taken from the
    /// checkpoint with [`Builder::weight`]).
    pub fn constant(
        &mut self,
        hint: &str,
        shape: &[usize],
        values: Vec<f32>,
    ) -> Result<T, ConvertError> {
        let name = self.fresh(hint);
        self.weight(&name, shape, values)
    }

    /// A float32 constant, whatever the compute type.
    pub fn constant_f32(
        &mut self,
        hint: &str,
        shape: &[usize],
        values: Vec<f32>,
    ) -> Result<T, ConvertError> {
        let name = self.fresh(hint);
        self.weight_f32(&name, shape, values)
    }

    /// A checkpoint tensor as the initializer `name`, reshaped to `shape`, in the compute type;
    /// float32 `values` may be borrowed from the checkpoint (kept as they are until the model
    /// is written).
    pub fn weight(
        &mut self,
        name: &str,
        shape: &[usize],
        values: impl Into<Cow<'a, [f32]>>,
    ) -> Result<T, ConvertError> {
        if self.compute_type() == DataType::Float16 {
            let half = to_half(&values.into());
            let bits = half
                .bytes
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]))
                .collect();
            self.graph.add_initializer_f16(name, shape, bits)?;
            return Ok(T {
                dtype: DataType::Float16,
                ..T::new(name, shape)
            });
        }
        self.weight_f32(name, shape, values)
    }

    /// A checkpoint tensor as the float32 initializer `name`, whatever the compute type.
    pub fn weight_f32(
        &mut self,
        name: &str,
        shape: &[usize],
        values: impl Into<Cow<'a, [f32]>>,
    ) -> Result<T, ConvertError> {
        self.graph.add_initializer_f32(name, shape, values)?;
        Ok(T::new(name, shape))
    }

    /// A scalar constant in the compute type.
    pub fn scalar(&mut self, value: f32) -> Result<T, ConvertError> {
        self.constant("scalar", &[], vec![value])
    }

    /// A float32 scalar constant.
    pub fn scalar_f32(&mut self, value: f32) -> Result<T, ConvertError> {
        self.constant_f32("scalar", &[], vec![value])
    }

    fn i64s(&mut self, values: &[i64]) -> Result<String, ConvertError> {
        let name = self.fresh("i64");
        self.graph
            .add_initializer_i64(&name, &[values.len()], values.to_vec())?;
        Ok(name)
    }

    /// `x` converted to `to`.
    pub fn cast(&mut self, x: &T, to: DataType) -> T {
        let mut cast = self.op_like(
            x,
            "Cast",
            &[&x.name],
            vec![("to", Attribute::Int(to.onnx_code()))],
            x.shape.clone(),
        );
        cast.dtype = to;
        cast
    }

    /// `x` in `to`: itself when it already is.
    pub fn as_type(&mut self, x: &T, to: DataType) -> T {
        if x.dtype == to {
            x.clone()
        } else {
            self.cast(x, to)
        }
    }

    /// `x` reshaped to `shape` (same number of values per item; a batch stays on the axis whose
    /// preceding dimensions hold as many values as before, its size `-1` in the constant).
    pub fn reshape(&mut self, x: &T, shape: &[usize]) -> Result<T, ConvertError> {
        let (from, to): (usize, usize) = (x.shape.iter().product(), shape.iter().product());
        if from != to {
            return Err(ConvertError::Layout(format!(
                "internal: reshape of {:?} to {shape:?}",
                x.shape
            )));
        }
        let batch = reshaped_batch_axis(&x.shape, x.batch, shape)?;
        let dims: Vec<i64> = shape
            .iter()
            .enumerate()
            .map(|(axis, &d)| if Some(axis) == batch { -1 } else { d as i64 })
            .collect();
        let shape_name = self.i64s(&dims)?;
        let mut out = self.op_like(
            x,
            "Reshape",
            &[&x.name, &shape_name],
            vec![],
            shape.to_vec(),
        );
        out.batch = batch;
        Ok(out)
    }

    /// `x` with its axes permuted.
    pub fn transpose(&mut self, x: &T, perm: &[usize]) -> T {
        if let Some(axis) = x.batch.filter(|&axis| perm[0] != axis) {
            // Each item's axes are permuted: the batch stays the first axis' outer factor.
            let apart = self.batch_apart(x);
            let mut moved = vec![axis];
            moved.extend(perm.iter().map(|&p| if p >= axis { p + 1 } else { p }));
            let transposed = self.transpose(&apart, &moved);
            return self.batch_together(&transposed);
        }
        let shape = perm.iter().map(|&p| x.shape[p]).collect();
        let mut out = self.op_like(
            x,
            "Transpose",
            &[&x.name],
            vec![("perm", ints(perm))],
            shape,
        );
        out.batch = x.batch.and_then(|b| perm.iter().position(|&p| p == b));
        out
    }

    /// `x` with its batch as an axis of its own: `[…, B·s, …]` seen as `[…, B, s, …]`, the
    /// batch on the inserted axis (one per item), the axes after it one further.
    fn batch_apart(&mut self, x: &T) -> T {
        let axis = x.batch.expect("a batched tensor");
        let mut shape = x.shape.clone();
        shape.insert(axis, 1);
        self.reshape(x, &shape)
            .expect("a batch comes apart from its axis")
    }

    /// Undoes [`Builder::batch_apart`]: the batch axis merged into the axis after it.
    fn batch_together(&mut self, x: &T) -> T {
        let axis = x.batch.expect("a batched tensor");
        let mut shape = x.shape.clone();
        shape.remove(axis);
        self.reshape(x, &shape)
            .expect("a batch merges into the axis after it")
    }

    /// `op` along `axis` of `x`, with the batch apart (`op` gets the axis after it) when
    /// `axis` carries it; `together` merges the batch back into the result.
    fn along_batch<R>(
        &mut self,
        x: &T,
        axis: usize,
        op: impl FnOnce(&mut Self, &T, usize) -> Result<R, ConvertError>,
        together: impl FnOnce(&mut Self, R) -> R,
    ) -> Result<R, ConvertError> {
        let apart = self.batch_apart(x);
        let result = op(self, &apart, axis + 1)?;
        Ok(together(self, result))
    }

    /// An elementwise binary operator with broadcasting. A batched tensor meeting a per-item
    /// table along its batch axis has its batch split off around the operation.
    pub fn binary(&mut self, op_type: &str, a: &T, b: &T) -> T {
        match self.try_binary(op_type, a, b) {
            Ok(out) => out,
            Err(error) => panic!("{error}"),
        }
    }

    fn try_binary(&mut self, op_type: &str, a: &T, b: &T) -> Result<T, ConvertError> {
        // A constant of the other element type (a float32 statistic's scalar in a float16
        // graph) is cast, which ONNX Runtime folds when it loads the graph.
        let b = &self.as_type(b, a.dtype);
        if let Ok(axis) = broadcast_batch_axis(a, b)? {
            let shape = broadcast_shape(&a.shape, &b.shape);
            let name = self.emit("", op_type, &[&a.name, &b.name], vec![]);
            return Ok(T {
                name,
                shape,
                batch: axis,
                dtype: a.dtype,
            });
        }
        // Split the batch off as an axis of its own (in each batched operand), then merge it
        // back.
        let apart = |b: &mut Self, t: &T| match t.batch {
            Some(_) => b.batch_apart(t),
            None => t.clone(),
        };
        let (x, y) = (apart(self, a), apart(self, b));
        let merged = self.try_binary(op_type, &x, &y)?;
        let Some(batch_axis) = merged.batch else {
            return Err(ConvertError::Layout(format!(
                "internal: {op_type} of {} and {} lost the batch",
                a.name, b.name
            )));
        };
        let mut shape = merged.shape.clone();
        shape.remove(batch_axis);
        self.reshape(&merged, &shape)
    }

    /// `x` with `slice` of `axis` (`start..end`).
    pub fn slice(
        &mut self,
        x: &T,
        axis: usize,
        start: usize,
        end: usize,
    ) -> Result<T, ConvertError> {
        if x.batch == Some(axis) {
            return self.along_batch(
                x,
                axis,
                |b, x, axis| b.slice(x, axis, start, end),
                |b, t| b.batch_together(&t),
            );
        }
        let starts = self.i64s(&[start as i64])?;
        let ends = self.i64s(&[end as i64])?;
        let axes = self.i64s(&[axis as i64])?;
        let mut shape = x.shape.clone();
        shape[axis] = end - start;
        Ok(self.op_like(x, "Slice", &[&x.name, &starts, &ends, &axes], vec![], shape))
    }

    /// `x` zero-padded at the end of `axis` by `count`.
    pub fn pad_end(&mut self, x: &T, axis: usize, count: usize) -> Result<T, ConvertError> {
        self.pad(x, axis, (0, count), None)
    }

    /// The exact GELU of PyTorch (`0.5·x·(1 + erf(x/√2))`): ONNX Runtime's `Gelu` kernel in a
    /// GPU graph, else the form ONNX Runtime fuses into it.
    pub fn gelu(&mut self, x: &T) -> Result<T, ConvertError> {
        if self.is_gpu() {
            return Ok(self.microsoft_op(x, "Gelu", &[&x.name], vec![]));
        }
        let sqrt2 = self.scalar(std::f32::consts::SQRT_2)?;
        let one = self.scalar(1.0)?;
        let half = self.scalar(0.5)?;
        let scaled = self.binary("Div", x, &sqrt2);
        let erf = self.unary("Erf", &scaled);
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
        let a = x.like(a, shape.clone());
        let b = x.like(b, shape);
        let gate = self.unary("Sigmoid", &b);
        self.binary("Mul", &a, &gate)
    }

    /// `x @ weightᵀ + bias` for `x` `[rows, in]`, `weight` `[out, in]` (a `Linear`).
    pub fn linear(&mut self, x: &T, weight: &T, bias: &T) -> T {
        self.op_like(
            x,
            "Gemm",
            &[&x.name, &weight.name, &bias.name],
            vec![("transB", Attribute::Int(1))],
            vec![x.shape[0], weight.shape[0]],
        )
    }

    /// `a @ b` (ONNX `MatMul`: the last two axes multiplied, the others broadcast). `b` may be
    /// batched only on an axis before its last two.
    pub fn matmul(&mut self, a: &T, b: &T) -> Result<T, ConvertError> {
        let (ra, rb) = (a.shape.len(), b.shape.len());
        if ra < 2 || rb < 2 || a.shape[ra - 1] != b.shape[rb - 2] {
            return Err(ConvertError::Layout(format!(
                "internal: MatMul of {:?} and {:?}",
                a.shape, b.shape
            )));
        }
        let (lead_a, lead_b) = (ra - 2, rb - 2);
        let mut shape = broadcast_shape(&a.shape[..lead_a], &b.shape[..lead_b]);
        let lead = shape.len();
        shape.extend([a.shape[ra - 2], b.shape[rb - 1]]);
        let error = || {
            ConvertError::Layout(format!(
                "internal: MatMul of {} (batch {:?}) and {} (batch {:?})",
                a.name, a.batch, b.name, b.batch
            ))
        };
        // Each operand's batch axis on the output, and its dimension there (1 when absent).
        let dim_at = |t: &T, lead_t: usize, axis: usize| {
            if axis >= lead - lead_t {
                t.shape[axis + lead_t - lead]
            } else {
                1
            }
        };
        let out_a = match a.batch {
            Some(p) if p == ra - 1 => return Err(error()),
            p => p.map(|p| p + lead - lead_a),
        };
        let out_b = match b.batch {
            Some(q) if q >= lead_b => return Err(error()),
            q => q.map(|q| q + lead - lead_b),
        };
        let batch = match (out_a, out_b) {
            (None, None) => None,
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(x), None) if x >= lead || dim_at(b, lead_b, x) == 1 => Some(x),
            (None, Some(y)) if dim_at(a, lead_a, y) == 1 => Some(y),
            // `a`'s batch meets `b`'s per-item matrices along a leading axis: apart.
            (Some(_), None) => {
                let apart = self.batch_apart(a);
                let product = self.matmul(&apart, b)?;
                return Ok(self.batch_together(&product));
            }
            _ => return Err(error()),
        };
        let name = self.emit("", "MatMul", &[&a.name, &b.name], vec![]);
        Ok(T {
            name,
            shape,
            batch,
            dtype: a.dtype,
        })
    }

    /// `x` cut along `axis` into consecutive parts of `sizes`.
    pub fn split(&mut self, x: &T, axis: usize, sizes: &[usize]) -> Result<Vec<T>, ConvertError> {
        if x.batch == Some(axis) {
            return self.along_batch(
                x,
                axis,
                |b, x, axis| b.split(x, axis, sizes),
                |b, parts| parts.iter().map(|p| b.batch_together(p)).collect(),
            );
        }
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
                x.like(self.fresh("split"), shape)
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
        debug_assert!(xs.iter().all(|x| x.batch == xs[0].batch));
        if xs[0].batch == Some(axis) {
            let name = self.next_name.take();
            let apart: Vec<T> = xs.iter().map(|x| self.batch_apart(x)).collect();
            self.next_name = name;
            let joined = self.concat(&apart, axis + 1);
            return self.batch_together(&joined);
        }
        let mut shape = xs[0].shape.clone();
        shape[axis] = xs.iter().map(|t| t.shape[axis]).sum();
        let names: Vec<&str> = xs.iter().map(|t| t.name.as_str()).collect();
        self.op_like(
            &xs[0],
            "Concat",
            &names,
            vec![("axis", Attribute::Int(axis as i64))],
            shape,
        )
    }

    /// An elementwise operator of one input (`Tanh`, `Sigmoid`, `Exp`, …).
    pub fn unary(&mut self, op_type: &str, x: &T) -> T {
        self.op_like(x, op_type, &[&x.name], vec![], x.shape.clone())
    }

    /// The rows of `x` along `axis` at `indices` (ONNX `Gather`).
    pub fn gather(&mut self, x: &T, axis: usize, indices: &[usize]) -> Result<T, ConvertError> {
        if x.batch == Some(axis) {
            return self.along_batch(
                x,
                axis,
                |b, x, axis| b.gather(x, axis, indices),
                |b, t| b.batch_together(&t),
            );
        }
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
        Ok(self.op_like(
            x,
            "Gather",
            &[&x.name, &indices_name],
            vec![("axis", Attribute::Int(axis as i64))],
            shape,
        ))
    }

    /// The mean over `axes` (kept as size-1 axes).
    pub fn mean(&mut self, x: &T, axes: &[usize]) -> T {
        self.reduce("ReduceMean", x, axes)
    }

    /// A reduction (`ReduceMean`, `ReduceSumSquare`, `ReduceL2`, …) over `axes`, kept as size-1
    /// axes.
    pub fn reduce(&mut self, op_type: &str, x: &T, axes: &[usize]) -> T {
        debug_assert!(axes.iter().all(|&a| x.batch != Some(a)));
        let mut shape = x.shape.clone();
        for &axis in axes {
            shape[axis] = 1;
        }
        if op_type == "ReduceSum" {
            // Opset 13 moved ReduceSum's axes (alone of the reductions here) into an input.
            let values: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
            let axes = self.i64s(&values).expect("axes fit their shape");
            return self.op_like(
                x,
                op_type,
                &[&x.name, &axes],
                vec![("keepdims", Attribute::Int(1))],
                shape,
            );
        }
        self.op_like(
            x,
            op_type,
            &[&x.name],
            vec![("axes", ints(axes)), ("keepdims", Attribute::Int(1))],
            shape,
        )
    }
}
