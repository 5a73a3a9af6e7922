//! Dynamic int8 quantization of an ONNX model (`stemflow quantize`), in Rust.
//!
//! What ONNX Runtime's `quantize_dynamic` does, for the operators where it pays:
//! - **MatMul** with a constant 2-D weight `[K, N]` or a batch of them `[B, K, N]` (a
//!   RoFormer's per-band layers): the weight becomes int8 with one scale per column (of each
//!   matrix of a batch) (symmetric, zero point 0, 7 bits unless asked for 8: [`weights`]); the activation is quantized at run time
//!   (`DynamicQuantizeLinear`: uint8, one scale and zero point per tensor, from its own range),
//!   then `MatMulInteger → Cast → Mul(activation scale × column scales)`. ONNX Runtime fuses that
//!   chain into one `DynamicQuantizeMatMul` kernel when it optimises the graph.
//! - **Conv** with constant weights, only when asked: ONNX Runtime's CPU `ConvInteger` takes
//!   uint8 weights with one zero point per tensor, so the weights are stored as uint8 around 128
//!   with one scale per output channel; `ConvInteger → Cast → Mul(scales) → Add(bias)`.
//!   On CPUs without VNNI it is slower than float convolution (measured, see docs/performance.md), hence
//!   off by default.
//!
//! Everything else (ConvTranspose, which has no integer operator, normalisations, the graph's
//! signature) is copied unchanged, field by field. A weight tensor is replaced only when every
//! node reading it was quantized. The model gains the metadata property
//! [`QUANTIZATION_METADATA_KEY`], so a quantized model is not quantized twice.

pub mod weights;

use std::collections::{HashMap, HashSet};

use crate::error::ConvertError;
use stemflow_onnx::encode::{encode_attribute, put_initializer, put_node};
use stemflow_onnx::field::{data_type, graph};
use stemflow_onnx::view::{fresh_name, raw_fields};
use stemflow_onnx::{Attribute, GraphPart, ModelView, NodeView, TensorView};
use weights::{quantize_per_channel, FULL_RANGE_LEVELS, REDUCED_RANGE_LEVELS};

/// Metadata property a quantized model carries (its value says how it was quantized).
pub const QUANTIZATION_METADATA_KEY: &str = "stemflow.quantization";

/// The operator set `DynamicQuantizeLinear` needs.
const MIN_OPSET: i64 = 11;

/// Zero point of the uint8 convolution weights (their int8 values shifted by it).
const CONV_WEIGHT_ZERO_POINT: u8 = 128;

/// Which operators to quantize, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuantizeOptions {
    /// MatMul with constant weights (on by default).
    pub matmul: bool,
    /// Conv with constant weights (off by default: slower than float on CPUs without VNNI).
    pub conv: bool,
    /// Weights over int8's whole range instead of 7 bits (only for models that never run on
    /// an x86 CPU without VNNI; see [`weights`]).
    pub full_range: bool,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        QuantizeOptions {
            matmul: true,
            conv: false,
            full_range: false,
        }
    }
}

/// What [`quantize_model`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuantizeReport {
    /// MatMul nodes now computed in int8.
    pub num_matmuls: usize,
    /// Conv nodes now computed in int8.
    pub num_convs: usize,
    /// MatMul nodes left in float (weight not a constant 2-D or 3-D float tensor, or not asked).
    pub num_matmuls_left: usize,
    /// Conv nodes left in float (weight not constant, or not asked).
    pub num_convs_left: usize,
    /// ConvTranspose nodes (no integer operator exists; always float).
    pub num_conv_transposes: usize,
    /// Bytes of the float weights replaced.
    pub weight_bytes_before: u64,
    /// Bytes of their int8 replacements (values and scales).
    pub weight_bytes_after: u64,
}

impl QuantizeReport {
    /// Nodes quantized.
    pub fn num_quantized(&self) -> usize {
        self.num_matmuls + self.num_convs
    }
}

/// How a node is rewritten.
#[derive(Clone, Copy)]
enum Plan<'a> {
    MatMul {
        weight: &'a str,
    },
    Conv {
        weight: &'a str,
        bias: Option<&'a str>,
    },
}

impl<'a> Plan<'a> {
    /// The constant weight the node reads.
    fn weight(self) -> &'a str {
        match self {
            Plan::MatMul { weight } | Plan::Conv { weight, .. } => weight,
        }
    }
}

/// Quantizes `model` (the bytes of an `.onnx` file). Returns the new model's bytes and what
/// changed; errors (in words for the user) when the file is not a readable model, is already
/// quantized, uses an operator set older than 11, or has nothing to quantize.
pub fn quantize_model(
    model: &[u8],
    ops: QuantizeOptions,
) -> Result<(Vec<u8>, QuantizeReport), ConvertError> {
    let refuse = |m: String| ConvertError::Quantize(m);
    let model = ModelView::read(model).map_err(|e| refuse(format!("not an ONNX model ({e})")))?;
    if let Some(how) = model
        .metadata_value(QUANTIZATION_METADATA_KEY)
        .map_err(refuse)?
    {
        return Err(refuse(format!("the model is already quantized ({how})")));
    }
    let opset = model.default_opset().map_err(refuse)?.unwrap_or(0);
    if opset < MIN_OPSET {
        return Err(refuse(format!(
            "the model uses operator set {opset}; int8 needs {MIN_OPSET} or later (DynamicQuantizeLinear)"
        )));
    }
    let graph_body = model.graph().map_err(refuse)?;
    let (graph, report) = quantize_graph(graph_body, ops).map_err(refuse)?;
    let range = if ops.full_range {
        "8-bit"
    } else {
        "7-bit (reduced range)"
    };
    let how = format!(
        "int8 dynamic (stemflow quantize): {range} weights per channel, activations at run time"
    );
    let out = model.with_graph(&graph, Some((QUANTIZATION_METADATA_KEY, &how)));
    Ok((out, report))
}

/// Rewrites a `GraphProto` body.
fn quantize_graph(body: &[u8], ops: QuantizeOptions) -> Result<(Vec<u8>, QuantizeReport), String> {
    let fields = raw_fields(body)?;
    let mut initializers: HashMap<&str, TensorView<'_>> = HashMap::new();
    let mut graph_inputs = HashSet::new();
    let mut graph_outputs = HashSet::new();
    let mut nodes = Vec::new();
    for (index, field) in fields.iter().enumerate() {
        match GraphPart::read(field)? {
            GraphPart::Node(node) => nodes.push((index, node)),
            GraphPart::Initializer(tensor) => {
                initializers.insert(tensor.name, tensor);
            }
            GraphPart::Input(info) => {
                graph_inputs.insert(info.name);
            }
            GraphPart::Output(info) => {
                graph_outputs.insert(info.name);
            }
            _ => {}
        }
    }
    let has_subgraph = nodes.iter().any(|(_, n)| n.has_subgraph);
    let mut names: HashSet<String> = graph_inputs.iter().map(|s| s.to_string()).collect();
    names.extend(initializers.keys().map(|s| s.to_string()));
    let mut uses: HashMap<&str, usize> = HashMap::new();
    for (_, node) in &nodes {
        names.extend(node.outputs.iter().map(|s| s.to_string()));
        names.insert(node.name.to_owned());
        for input in &node.inputs {
            *uses.entry(input).or_default() += 1;
        }
    }
    // A constant the graph's caller cannot override, with readable float values.
    let constant = |name: &str, ranks: Option<&[usize]>| {
        initializers.get(name).filter(|t| {
            !graph_inputs.contains(name)
                && ranks.is_none_or(|r| r.contains(&t.dims.len()))
                && t.has_f32_values()
        })
    };

    let mut report = QuantizeReport::default();
    let mut plans: HashMap<usize, (Plan<'_>, &NodeView<'_>)> = HashMap::new();
    for (index, node) in &nodes {
        if node.is("MatMul") {
            let is_constant =
                node.inputs.len() == 2 && constant(node.inputs[1], Some(&[2, 3])).is_some();
            if ops.matmul && is_constant {
                let plan = Plan::MatMul {
                    weight: node.inputs[1],
                };
                plans.insert(*index, (plan, node));
                report.num_matmuls += 1;
            } else {
                report.num_matmuls_left += 1;
            }
        } else if node.is("Conv") {
            let weight = node.inputs.get(1).and_then(|w| constant(w, None));
            let num_out = weight.and_then(|w| w.dims.first().copied());
            let bias = node.inputs.get(2).filter(|b| !b.is_empty());
            let is_bias_ok = bias.is_none_or(|b| {
                constant(b, Some(&[1])).is_some_and(|t| Some(t.dims[0]) == num_out)
            });
            if ops.conv && weight.is_some_and(|w| w.dims.len() >= 3) && is_bias_ok {
                let plan = Plan::Conv {
                    weight: node.inputs[1],
                    bias: bias.copied(),
                };
                plans.insert(*index, (plan, node));
                report.num_convs += 1;
            } else {
                report.num_convs_left += 1;
            }
        } else if node.is("ConvTranspose") {
            report.num_conv_transposes += 1;
        }
    }
    if plans.is_empty() {
        return Err(nothing_to_quantize(&report, ops));
    }

    let mut rewriter = Rewriter {
        levels: if ops.full_range {
            FULL_RANGE_LEVELS
        } else {
            REDUCED_RANGE_LEVELS
        },
        names,
        activations: HashMap::new(),
        weights: HashMap::new(),
        new_initializers: Vec::new(),
        report,
    };
    let mut replaced_uses: HashMap<&str, usize> = HashMap::new();
    for (plan, _) in plans.values() {
        *replaced_uses.entry(plan.weight()).or_default() += 1;
    }
    let mut out = Vec::with_capacity(body.len());
    for (index, field) in fields.iter().enumerate() {
        match (field.number, field.body(), plans.get(&index)) {
            (graph::NODE, _, Some(&(plan, node))) => {
                rewriter.rewrite(node, plan, &initializers, &mut out)?;
            }
            (graph::INITIALIZER, Some(value), _) => {
                let name = TensorView::read(value)?.name;
                let is_replaced = !has_subgraph
                    && !graph_outputs.contains(name)
                    && replaced_uses
                        .get(name)
                        .is_some_and(|n| uses.get(name) == Some(n));
                if !is_replaced {
                    out.extend_from_slice(field.bytes);
                }
            }
            _ => out.extend_from_slice(field.bytes),
        }
    }
    out.extend_from_slice(&rewriter.new_initializers);
    Ok((out, rewriter.report))
}

fn nothing_to_quantize(report: &QuantizeReport, ops: QuantizeOptions) -> String {
    let mut why = String::from("nothing to quantize: ");
    why += &match (ops.matmul, report.num_matmuls_left) {
        (false, _) => "MatMul not asked".to_owned(),
        (true, 0) => "no MatMul".to_owned(),
        (true, n) => format!("{n} MatMul, none with a constant 2-D or 3-D float weight"),
    };
    why += &match (ops.conv, report.num_convs_left) {
        (false, 0) | (true, 0) => ", no Conv".to_owned(),
        (false, n) => format!(", {n} Conv (add --ops matmul,conv to quantize them)"),
        (true, n) => format!(", {n} Conv, none with constant float weights"),
    };
    if report.num_conv_transposes > 0 {
        why += &format!(
            ", {} ConvTranspose (no integer operator exists)",
            report.num_conv_transposes
        );
    }
    why
}

/// Names of a quantized tensor's values, scale and zero point.
#[derive(Clone)]
struct Quantized {
    values: String,
    scale: String,
    zero_point: String,
}

/// Emits the replacement nodes and the new initializers.
struct Rewriter {
    /// Weight levels each side of zero.
    levels: f32,
    /// Every name in the graph, so new names are fresh.
    names: HashSet<String>,
    /// Activations already quantized at run time, by name.
    activations: HashMap<String, Quantized>,
    /// Weights already quantized, by name and layout.
    weights: HashMap<(String, bool), Quantized>,
    /// Encoded `initializer` fields to append to the graph.
    new_initializers: Vec<u8>,
    report: QuantizeReport,
}

impl Rewriter {
    fn fresh(&mut self, base: &str) -> String {
        fresh_name(&mut self.names, base)
    }

    fn rewrite(
        &mut self,
        node: &NodeView<'_>,
        plan: Plan<'_>,
        initializers: &HashMap<&str, TensorView<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let output = node.outputs.first().copied().unwrap_or_default();
        let base = if node.name.is_empty() {
            output
        } else {
            node.name
        };
        let activation = self.activation(node.inputs[0], out);
        let is_conv = matches!(plan, Plan::Conv { .. });
        let weight = self.weight(&initializers[plan.weight()], is_conv)?;
        let integer = self.fresh(&format!("{output}_int32"));
        let (op, attributes) = if is_conv {
            ("ConvInteger", node.attributes.clone())
        } else {
            ("MatMulInteger", Vec::new())
        };
        let name = self.fresh(&format!("{base}_quant"));
        put_node(
            out,
            op,
            &name,
            &[
                &activation.values,
                &weight.values,
                &activation.zero_point,
                &weight.zero_point,
            ],
            &[&integer],
            &attributes,
        );
        let float = self.fresh(&format!("{output}_float"));
        let to_float = encode_attribute("to", &Attribute::Int(data_type::FLOAT));
        let name = self.fresh(&format!("{base}_cast"));
        put_node(out, "Cast", &name, &[&integer], &[&float], &[&to_float[..]]);
        let scale = self.fresh(&format!("{output}_scale"));
        let name = self.fresh(&format!("{base}_scale"));
        put_node(
            out,
            "Mul",
            &name,
            &[&activation.scale, &weight.scale],
            &[&scale],
            &[],
        );
        let bias = match plan {
            Plan::Conv {
                bias: Some(bias), ..
            } => Some(self.bias(&initializers[bias], &initializers[plan.weight()])?),
            _ => None,
        };
        let name = self.fresh(&format!("{base}_rescale"));
        match bias {
            None => put_node(out, "Mul", &name, &[&float, &scale], &[output], &[]),
            Some(bias) => {
                let scaled = self.fresh(&format!("{output}_scaled"));
                put_node(out, "Mul", &name, &[&float, &scale], &[&scaled], &[]);
                let name = self.fresh(&format!("{base}_bias"));
                put_node(out, "Add", &name, &[&scaled, &bias], &[output], &[]);
            }
        }
        Ok(())
    }

    /// The run-time quantized form of `activation`, emitting its `DynamicQuantizeLinear` the
    /// first time.
    fn activation(&mut self, activation: &str, out: &mut Vec<u8>) -> Quantized {
        if let Some(done) = self.activations.get(activation) {
            return done.clone();
        }
        let quantized = Quantized {
            values: self.fresh(&format!("{activation}_quantized")),
            scale: self.fresh(&format!("{activation}_scale")),
            zero_point: self.fresh(&format!("{activation}_zero_point")),
        };
        let name = self.fresh(&format!("{activation}_quantize"));
        put_node(
            out,
            "DynamicQuantizeLinear",
            &name,
            &[activation],
            &[&quantized.values, &quantized.scale, &quantized.zero_point],
            &[],
        );
        self.activations
            .insert(activation.to_owned(), quantized.clone());
        quantized
    }

    /// The quantized form of a weight, adding its initializers the first time: int8 per column
    /// for a MatMul, uint8 around 128 per output channel for a Conv.
    fn weight(&mut self, tensor: &TensorView<'_>, is_conv: bool) -> Result<Quantized, String> {
        let key = (tensor.name.to_owned(), is_conv);
        if let Some(done) = self.weights.get(&key) {
            return Ok(done.clone());
        }
        let values = tensor
            .f32_values()
            .ok_or_else(|| format!("weight {} cannot be read", tensor.name))?;
        let dims: Vec<usize> = tensor.dims.iter().map(|&d| d as usize).collect();
        let quantized = Quantized {
            values: self.fresh(&format!("{}_quantized", tensor.name)),
            scale: self.fresh(&format!("{}_scale", tensor.name)),
            zero_point: self.fresh(&format!("{}_zero_point", tensor.name)),
        };
        let init = &mut self.new_initializers;
        let (scales, scale_dims) = if is_conv {
            let channels = dims[0];
            let q = quantize_per_channel(
                &values,
                1,
                channels,
                dims[1..].iter().product(),
                self.levels,
            )
            .map_err(|e| format!("weight {}: {e}", tensor.name))?;
            // Broadcast over [N, M, spatial…]: [M, 1, …].
            let mut scale_dims = vec![channels];
            scale_dims.resize(dims.len() - 1, 1);
            let bytes: Vec<u8> = q
                .values
                .iter()
                .map(|&v| (i16::from(v) + i16::from(CONV_WEIGHT_ZERO_POINT)) as u8)
                .collect();
            put_initializer(init, &quantized.values, &dims, data_type::UINT8, &bytes);
            put_initializer(
                init,
                &quantized.zero_point,
                &[],
                data_type::UINT8,
                &[CONV_WEIGHT_ZERO_POINT],
            );
            (q.scales, scale_dims)
        } else {
            // `[K, N]`, or a batch `[B, K, N]` quantized matrix by matrix: scales `[N]` or
            // `[B, 1, N]`, which broadcast over the product's `[…, M, N]`.
            let (batch, rows, columns) = match dims[..] {
                [rows, columns] => (1, rows, columns),
                [batch, rows, columns] => (batch, rows, columns),
                _ => return Err(format!("weight {} is not 2-D or 3-D", tensor.name)),
            };
            if rows * columns == 0 {
                return Err(format!("weight {} is empty", tensor.name));
            }
            let (mut bytes, mut scales) = (Vec::with_capacity(values.len()), Vec::new());
            for matrix in values.chunks_exact(rows * columns).take(batch) {
                let q = quantize_per_channel(matrix, rows, columns, 1, self.levels)
                    .map_err(|e| format!("weight {}: {e}", tensor.name))?;
                bytes.extend(q.values.iter().map(|&v| v as u8));
                scales.extend(q.scales);
            }
            put_initializer(init, &quantized.values, &dims, data_type::INT8, &bytes);
            if dims.len() == 2 {
                put_initializer(
                    init,
                    &quantized.zero_point,
                    &[columns],
                    data_type::INT8,
                    &vec![0; columns],
                );
                (scales, vec![columns])
            } else {
                // Symmetric: one zero point of 0 for the whole batch (ONNX Runtime's kernels
                // take a scalar zero point with any rank of weight).
                put_initializer(init, &quantized.zero_point, &[], data_type::INT8, &[0]);
                (scales, vec![batch, 1, columns])
            }
        };
        let scale_bytes: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
        put_initializer(
            init,
            &quantized.scale,
            &scale_dims,
            data_type::FLOAT,
            &scale_bytes,
        );
        self.report.weight_bytes_before += values.len() as u64 * 4;
        self.report.weight_bytes_after += (values.len() + scale_bytes.len()) as u64;
        self.weights.insert(key, quantized.clone());
        Ok(quantized)
    }

    /// A Conv's bias `[M]` as `[M, 1, …]`, to add after rescaling.
    fn bias(&mut self, bias: &TensorView<'_>, weight: &TensorView<'_>) -> Result<String, String> {
        let values = bias
            .f32_values()
            .ok_or_else(|| format!("bias {} cannot be read", bias.name))?;
        let mut dims = vec![values.len()];
        dims.resize(weight.dims.len() - 1, 1);
        let name = self.fresh(&format!("{}_per_channel", bias.name));
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        put_initializer(
            &mut self.new_initializers,
            &name,
            &dims,
            data_type::FLOAT,
            &bytes,
        );
        Ok(name)
    }
}
