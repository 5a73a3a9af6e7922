//! A float16 version of an ONNX model, for GPU providers (`stemflow quantize --fp16`), in Rust.
//!
//! GPUs compute float16 at two to eight times their float32 rate and move half the bytes. The
//! model's inputs and outputs stay float32 (a `Cast` after each input and before each output),
//! so the engine feeds it exactly as it feeds the float model.
//!
//! Which nodes compute in float16 follows the audio, not the file: a float tensor is **data**
//! when it derives from the model's inputs, an **island** when it derives only from integers
//! (shape arithmetic: `Cast(Shape(x)) / 2` — lengths of 343 980 samples would overflow
//! float16's 65 504), or a **constant** (weights, `Constant`, `ConstantOfShape`), which takes
//! the precision of the nodes that read it. A node computes in float16 when it reads data and
//! no island; a node reading both computes in float32 and hands its result back as float16;
//! islands stay float32 throughout. Operators float16 cannot serve (`Range`, `CumSum`, `TopK`,
//! …, and other domains' operators) compute in float32 with casts around them; `Resize` and
//! `Upsample` scales stay float32, as their schemas require. A weight read only by float16
//! nodes is stored as float16 (half the file); one also read in float32 keeps its float32
//! copy and the float16 readers get a `Cast`, which ONNX Runtime folds when it loads the model.
//!
//! Weights beyond float16's range clamp to ±65 504 ([`values`]); the report counts them. The
//! model gains the metadata property [`FLOAT16_METADATA_KEY`], so it is not converted twice.

mod types;
pub mod values;

use std::collections::{HashMap, HashSet};

use stemflow_onnx::encode::{
    encode_attribute, encode_node, encode_tensor_attribute, encode_tensor_head, put_initializer,
};
use stemflow_onnx::field::{data_type, graph as graph_field};
use stemflow_onnx::view::{fresh_name, raw_fields};
use stemflow_onnx::wire::put_bytes;
use stemflow_onnx::{
    Attribute, AttributeView, GraphPart, ModelView, NodeView, RawField, TensorView,
};

use crate::error::ConvertError;
use crate::quantize::QUANTIZATION_METADATA_KEY;
use values::to_half;

/// Metadata property a float16 model carries.
pub const FLOAT16_METADATA_KEY: &str = "stemflow.float16";

/// Operators that compute in float32 whatever they read: float16 loses their meaning
/// (positions, running sums, rankings), overflows inside them (a norm's sum of squares: float16
/// ends at 65504, so any vector longer than 256 — a RoFormer's band of spectrum, where one
/// bin of a loud song is in the hundreds — became infinite and its tokens zero), or ONNX
/// Runtime has no float16 kernel for them.
const FLOAT32_OPS: [&str; 12] = [
    "ReduceL2",
    "ReduceSumSquare",
    "LpNormalization",
    "Range",
    "CumSum",
    "TopK",
    "NonMaxSuppression",
    "RoiAlign",
    "RandomNormalLike",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
];

/// What [`convert_model`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Float16Report {
    /// Nodes computing in float16.
    pub num_half_nodes: usize,
    /// Nodes reading or writing float tensors that stay float32 (shape arithmetic, the
    /// operators float16 cannot serve, other domains' operators).
    pub num_float_nodes: usize,
    /// `Cast` nodes added.
    pub num_casts: usize,
    /// Bytes of the float32 weights now stored as float16.
    pub weight_bytes_before: u64,
    /// Their bytes as float16.
    pub weight_bytes_after: u64,
    /// Weights beyond float16's range, clamped to ±65 504.
    pub num_clamped: usize,
}

/// Where a float tensor's values come from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Role {
    /// Derived from the model's inputs: float16.
    Data,
    /// Derived from integers (shape arithmetic): float32, and float32 where it meets data.
    Island,
    /// Computed from constants only (an embedding looked up by position): float32, cast to
    /// float16 where data reads it.
    Derived,
    /// A weight or constant: the precision its readers need.
    Constant,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
enum Precision {
    Half,
    Single,
}

impl Precision {
    fn data_type(self) -> i64 {
        match self {
            Precision::Half => data_type::FLOAT16,
            Precision::Single => data_type::FLOAT,
        }
    }
}

/// Converts `model` (the bytes of an `.onnx` file) to float16. Returns the new model's bytes
/// and what changed; errors (in words for the user) when the file is not a readable model, is
/// already float16 or int8, has sub-graphs, or computes nothing in float from its inputs.
pub fn convert_model(model: &[u8]) -> Result<(Vec<u8>, Float16Report), ConvertError> {
    let refuse = |m: String| ConvertError::Float16(m);
    let model = ModelView::read(model).map_err(|e| refuse(format!("not an ONNX model ({e})")))?;
    if model
        .metadata_value(FLOAT16_METADATA_KEY)
        .map_err(refuse)?
        .is_some()
    {
        return Err(refuse("the model is already float16".into()));
    }
    if let Some(how) = model
        .metadata_value(QUANTIZATION_METADATA_KEY)
        .map_err(refuse)?
    {
        return Err(refuse(format!(
            "the model is quantized ({how}); convert the float model instead"
        )));
    }
    let graph_body = model.graph().map_err(refuse)?;
    let (graph, report) = convert_graph(graph_body).map_err(refuse)?;
    let how = format!(
        "float16 weights and computation (stemflow quantize --fp16), inputs and outputs float32; \
         {} nodes in float16, {} kept float32",
        report.num_half_nodes, report.num_float_nodes
    );
    let out = model.with_graph(&graph, Some((FLOAT16_METADATA_KEY, &how)));
    Ok((out, report))
}

/// A graph, read.
struct Graph<'a> {
    nodes: Vec<(usize, NodeView<'a>)>,
    initializers: HashMap<&'a str, TensorView<'a>>,
    inputs: HashSet<&'a str>,
    outputs: HashSet<&'a str>,
    /// Element type of every tensor whose type is known.
    types: HashMap<&'a str, i64>,
    /// Every name in the graph, so new names are fresh.
    names: HashSet<String>,
}

impl<'a> Graph<'a> {
    fn read(fields: &[RawField<'a>]) -> Result<Self, String> {
        let mut graph = Graph {
            nodes: Vec::new(),
            initializers: HashMap::new(),
            inputs: HashSet::new(),
            outputs: HashSet::new(),
            types: HashMap::new(),
            names: HashSet::new(),
        };
        let mut input_types = Vec::new();
        for (index, field) in fields.iter().enumerate() {
            match GraphPart::read(field)? {
                GraphPart::Node(node) => {
                    if node.has_subgraph {
                        return Err(format!(
                            "node {} ({}) holds a sub-graph; models with If/Loop/Scan are not supported",
                            node.name, node.op_type
                        ));
                    }
                    graph.names.insert(node.name.to_owned());
                    graph
                        .names
                        .extend(node.outputs.iter().map(|s| s.to_string()));
                    graph.nodes.push((index, node));
                }
                GraphPart::Initializer(tensor) => {
                    graph.types.insert(tensor.name, tensor.data_type);
                    graph.names.insert(tensor.name.to_owned());
                    graph.initializers.insert(tensor.name, tensor);
                }
                GraphPart::Input(info) => {
                    graph.inputs.insert(info.name);
                    graph.names.insert(info.name.to_owned());
                    input_types.push((info.name, info.elem_type));
                }
                GraphPart::Output(info) => {
                    graph.outputs.insert(info.name);
                }
                GraphPart::SparseInitializer(_) => {
                    return Err("sparse initializers are not supported".into())
                }
                GraphPart::Other => {}
            }
        }
        for (name, elem_type) in input_types {
            if let Some(elem_type) = elem_type {
                graph.types.insert(name, elem_type);
            }
        }
        Ok(graph)
    }

    fn is_float(&self, name: &str) -> bool {
        !name.is_empty() && self.types.get(name) == Some(&data_type::FLOAT)
    }
}

/// Whether input `slot` of `node` must stay float32 (its schema allows nothing else).
fn is_float32_slot(node: &NodeView<'_>, slot: usize) -> bool {
    (node.is("Resize") && slot >= 1) || (node.is("Upsample") && slot == 1)
}

/// How one node is computed.
struct NodePlan {
    compute: Precision,
    /// It reads only its inputs' shapes (`Shape`, `Size`): they are passed as they are.
    reads_shapes_only: bool,
}

/// A constant (initializer, `Constant`, `ConstantOfShape`) and the precisions its readers need.
#[derive(Default, Clone, Copy)]
struct Wants {
    half: bool,
    single: bool,
    /// Whether its values can be written as float16 here.
    is_convertible: bool,
}

fn convert_graph(body: &[u8]) -> Result<(Vec<u8>, Float16Report), String> {
    let fields = raw_fields(body)?;
    let mut graph = Graph::read(&fields)?;
    let plan = Plan::of(&mut graph)?;
    write_graph(body, &fields, graph, plan)
}

/// What becomes of a graph: each float tensor's role, each constant's readers, each node's
/// precision, and the counts so far.
struct Plan<'a> {
    roles: HashMap<&'a str, Role>,
    constants: HashMap<&'a str, Wants>,
    nodes: HashMap<usize, NodePlan>,
    report: Float16Report,
}

impl<'a> Plan<'a> {
    /// Follows the graph's nodes in order from its inputs and weights (recording the element
    /// type of what they write in `graph.types`); an error for a graph where nothing computes
    /// in float from the inputs.
    fn of(graph: &mut Graph<'a>) -> Result<Self, String> {
        let mut plan = Plan {
            roles: HashMap::new(),
            constants: HashMap::new(),
            nodes: HashMap::new(),
            report: Float16Report::default(),
        };
        for (&name, tensor) in &graph.initializers {
            if tensor.data_type == data_type::FLOAT && !graph.inputs.contains(name) {
                plan.roles.insert(name, Role::Constant);
                let wants = Wants {
                    is_convertible: tensor.has_f32_values(),
                    ..Wants::default()
                };
                plan.constants.insert(name, wants);
            }
        }
        for &name in &graph.inputs {
            if graph.is_float(name) {
                plan.roles.insert(name, Role::Data);
            }
        }
        for (index, node) in &graph.nodes {
            let node_plan = plan.node(node, &mut graph.types)?;
            plan.nodes.insert(*index, node_plan);
        }
        if plan.report.num_half_nodes == 0 {
            return Err("no node computes in float from the model's inputs".into());
        }
        // Graph outputs and inputs are float32: a constant that is one keeps its float32 values.
        for name in graph.outputs.iter().chain(&graph.inputs) {
            if let Some(wants) = plan.constants.get_mut(name) {
                wants.single = true;
            }
        }
        Ok(plan)
    }

    /// One node's precision, from what it reads; records the roles and types of what it writes
    /// and what it needs of the constants it reads.
    fn node(
        &mut self,
        node: &NodeView<'a>,
        types: &mut HashMap<&'a str, i64>,
    ) -> Result<NodePlan, String> {
        let is_float = |types: &HashMap<&str, i64>, name: &str| {
            !name.is_empty() && types.get(name) == Some(&data_type::FLOAT)
        };
        let input_types: Vec<Option<i64>> = node
            .inputs
            .iter()
            .map(|name| types.get(name).copied())
            .collect();
        let (mut has_data, mut has_island, mut reads_float) = (false, false, false);
        for (slot, name) in node.inputs.iter().enumerate() {
            if is_float(types, name) && !is_float32_slot(node, slot) {
                reads_float = true;
                match self.roles.get(name) {
                    Some(Role::Data) => has_data = true,
                    Some(Role::Constant | Role::Derived) => {}
                    Some(Role::Island) | None => has_island = true,
                }
            }
        }
        let reads_shapes_only = node.is("Shape") || node.is("Size");
        if reads_shapes_only {
            for (slot, &output) in node.outputs.iter().enumerate() {
                if let Some(t) = types::output_type(node, slot, &input_types)? {
                    types.insert(output, t);
                }
            }
            return Ok(NodePlan {
                compute: Precision::Single,
                reads_shapes_only,
            });
        }
        let is_float32_op = !node.is_default_domain() || FLOAT32_OPS.contains(&node.op_type);
        let compute = if has_data && !has_island && !is_float32_op {
            Precision::Half
        } else {
            Precision::Single
        };
        for (slot, name) in node.inputs.iter().enumerate() {
            if let Some(wants) = self.constants.get_mut(name) {
                if compute == Precision::Half && !is_float32_slot(node, slot) {
                    wants.half = true;
                } else {
                    wants.single = true;
                }
            }
        }
        let generated = generated_constant(node)?;
        let mut writes_float = false;
        for (slot, &output) in node.outputs.iter().enumerate() {
            if output.is_empty() {
                continue;
            }
            let Some(output_type) = types::output_type(node, slot, &input_types)? else {
                continue;
            };
            types.insert(output, output_type);
            if output_type != data_type::FLOAT {
                continue;
            }
            writes_float = true;
            let role = if has_data {
                Role::Data
            } else if has_island {
                Role::Island
            } else if let Some(is_convertible) = generated {
                self.constants.insert(
                    output,
                    Wants {
                        is_convertible,
                        ..Wants::default()
                    },
                );
                Role::Constant
            } else if reads_float {
                Role::Derived
            } else {
                // Written from integers only: `Cast(Shape(x))`.
                Role::Island
            };
            self.roles.insert(output, role);
        }
        if compute == Precision::Half {
            self.report.num_half_nodes += 1;
        } else if (reads_float || writes_float) && generated.is_none() {
            self.report.num_float_nodes += 1;
        }
        Ok(NodePlan {
            compute,
            reads_shapes_only,
        })
    }
}

/// The graph's fields again as `plan` has them: nodes with their casts, converted weights in
/// float16, the other fields as they were (intermediate type hints dropped).
fn write_graph(
    body: &[u8],
    fields: &[RawField<'_>],
    mut graph: Graph<'_>,
    plan: Plan<'_>,
) -> Result<(Vec<u8>, Float16Report), String> {
    let Plan {
        roles,
        constants,
        nodes: plans,
        report,
    } = plan;
    let converted: HashSet<&str> = constants
        .iter()
        .filter(|(_, w)| w.half && !w.single && w.is_convertible)
        .map(|(&name, _)| name)
        .collect();

    let mut emitter = Emitter {
        names: std::mem::take(&mut graph.names),
        casts: HashMap::new(),
        renamed: HashMap::new(),
        report,
    };
    for &output in &graph.outputs {
        if graph.is_float(output)
            && roles.get(output) == Some(&Role::Data)
            && !graph.inputs.contains(output)
        {
            let inner = emitter.fresh(&format!("{output}_fp16"));
            emitter.renamed.insert(output.to_owned(), inner);
        }
    }
    let physical = |name: &str| -> Precision {
        match roles.get(name) {
            Some(Role::Data) if !graph.inputs.contains(name) => Precision::Half,
            Some(Role::Constant) if converted.contains(name) => Precision::Half,
            _ => Precision::Single,
        }
    };

    let mut out = Vec::with_capacity(body.len() / 2);
    for (index, field) in fields.iter().enumerate() {
        match (field.number, field.body()) {
            (graph_field::NODE, _) => {
                let Some((_, node)) = graph.nodes.iter().find(|(i, _)| *i == index) else {
                    continue;
                };
                let plan = &plans[&index];
                emitter.node(
                    node,
                    field.bytes,
                    plan,
                    &graph,
                    &physical,
                    &converted,
                    &mut out,
                )?;
            }
            (graph_field::INITIALIZER, Some(value)) => {
                let tensor = TensorView::read(value)?;
                if converted.contains(tensor.name) {
                    let values = tensor
                        .f32_values()
                        .ok_or_else(|| format!("weight {} cannot be read", tensor.name))?;
                    let half = to_half(&values);
                    let dims: Vec<usize> = tensor.dims.iter().map(|&d| d as usize).collect();
                    put_initializer(
                        &mut out,
                        tensor.name,
                        &dims,
                        data_type::FLOAT16,
                        &half.bytes,
                    );
                    emitter.report.weight_bytes_before += values.len() as u64 * 4;
                    emitter.report.weight_bytes_after += half.bytes.len() as u64;
                    emitter.report.num_clamped += half.num_clamped;
                } else {
                    out.extend_from_slice(field.bytes);
                }
            }
            // Intermediate types are hints ONNX Runtime infers again; many change here.
            (graph_field::VALUE_INFO, _) => {}
            _ => out.extend_from_slice(field.bytes),
        }
    }
    Ok((out, emitter.report))
}

/// For a node that writes a constant (`Constant`, `ConstantOfShape`): whether its value can be
/// written as float16 here. `None` for any other node.
fn generated_constant(node: &NodeView<'_>) -> Result<Option<bool>, String> {
    if node.is("ConstantOfShape") {
        return Ok(Some(true));
    }
    if !node.is("Constant") {
        return Ok(None);
    }
    for body in &node.attributes {
        let attribute = AttributeView::read(body)?;
        if attribute.name == "value" {
            let is_readable = match attribute.tensor {
                Some(tensor) => TensorView::read(tensor)?.has_f32_values(),
                None => false,
            };
            return Ok(Some(is_readable));
        }
    }
    // value_float(s): kept float32, its float16 readers get a Cast.
    Ok(Some(false))
}

/// Writes the new graph's nodes.
struct Emitter {
    names: HashSet<String>,
    /// Casts already written: (tensor, precision) → the cast's output.
    casts: HashMap<(String, Precision), String>,
    /// Graph outputs computed in float16 under another name, cast to float32 at the end.
    renamed: HashMap<String, String>,
    report: Float16Report,
}

impl Emitter {
    fn fresh(&mut self, base: &str) -> String {
        fresh_name(&mut self.names, base)
    }

    /// The name `name` is written under inside the graph.
    fn inner<'n>(&'n self, name: &'n str) -> &'n str {
        self.renamed.get(name).map_or(name, String::as_str)
    }

    /// `name` in `precision`, writing its Cast the first time.
    fn cast(&mut self, name: &str, precision: Precision, out: &mut Vec<u8>) -> String {
        let key = (name.to_owned(), precision);
        if let Some(done) = self.casts.get(&key) {
            return done.clone();
        }
        let suffix = match precision {
            Precision::Half => "fp16",
            Precision::Single => "fp32",
        };
        let cast = self.fresh(&format!("{name}_{suffix}"));
        let source = self.inner(name).to_owned();
        self.put_cast(&source, &cast, precision, out);
        self.casts.insert(key, cast.clone());
        cast
    }

    fn put_cast(&mut self, from: &str, to: &str, precision: Precision, out: &mut Vec<u8>) {
        let name = self.fresh(&format!("{to}_cast"));
        let to_type = encode_attribute("to", &Attribute::Int(precision.data_type()));
        let node = encode_node("Cast", "", &name, &[from], &[to], &[&to_type[..]]);
        put_bytes(out, graph_field::NODE, &node);
        self.report.num_casts += 1;
    }

    #[allow(clippy::too_many_arguments)]
    fn node(
        &mut self,
        node: &NodeView<'_>,
        bytes: &[u8],
        plan: &NodePlan,
        graph: &Graph<'_>,
        physical: &dyn Fn(&str) -> Precision,
        converted: &HashSet<&str>,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let mut changed = false;
        let mut inputs = Vec::with_capacity(node.inputs.len());
        for (slot, &name) in node.inputs.iter().enumerate() {
            let input = if graph.is_float(name) && !plan.reads_shapes_only {
                let needed = if plan.compute == Precision::Half && !is_float32_slot(node, slot) {
                    Precision::Half
                } else {
                    Precision::Single
                };
                if physical(name) == needed {
                    self.inner(name).to_owned()
                } else {
                    self.cast(name, needed, out)
                }
            } else {
                self.inner(name).to_owned()
            };
            changed |= input != name;
            inputs.push(input);
        }
        let is_generator = node.is("Constant") || node.is("ConstantOfShape");
        let mut outputs = Vec::with_capacity(node.outputs.len());
        let mut after = Vec::new();
        for &name in &node.outputs {
            let mut output = self.inner(name).to_owned();
            if graph.is_float(name) && !is_generator {
                let stored = physical(name);
                if stored != plan.compute {
                    let produced = self.fresh(&format!("{name}_fp32"));
                    after.push((produced.clone(), output.clone(), stored));
                    output = produced;
                }
            }
            changed |= output != name;
            outputs.push(output);
        }
        let mut attributes: Vec<Vec<u8>> = Vec::new();
        for body in &node.attributes {
            let attribute = AttributeView::read(body)?;
            let rewritten = match attribute.name {
                "to" if node.is("Cast")
                    && plan.compute == Precision::Half
                    && attribute.int == Some(data_type::FLOAT) =>
                {
                    Some(encode_attribute("to", &Attribute::Int(data_type::FLOAT16)))
                }
                "value" if is_generator && node.outputs.iter().any(|o| converted.contains(o)) => {
                    let tensor = attribute
                        .tensor
                        .ok_or_else(|| format!("{} has no tensor value", node.name))?;
                    Some(self.half_tensor_attribute(&TensorView::read(tensor)?)?)
                }
                _ => None,
            };
            changed |= rewritten.is_some();
            attributes.push(rewritten.unwrap_or_else(|| body.to_vec()));
        }
        let has_value = node
            .attributes
            .iter()
            .any(|b| AttributeView::read(b).is_ok_and(|a| a.name == "value"));
        if node.is("ConstantOfShape") && !has_value && converted.contains(node.outputs[0]) {
            // The default value, float32 0, as float16 0.
            attributes.push(self.half_tensor_attribute_of("", &[1], &[0.0]));
            changed = true;
        }

        if changed {
            let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            let outputs: Vec<&str> = outputs.iter().map(String::as_str).collect();
            let attributes: Vec<&[u8]> = attributes.iter().map(Vec::as_slice).collect();
            let encoded = encode_node(
                node.op_type,
                node.domain,
                node.name,
                &inputs,
                &outputs,
                &attributes,
            );
            put_bytes(out, graph_field::NODE, &encoded);
        } else {
            out.extend_from_slice(bytes);
        }
        for (produced, stored_name, stored) in after {
            self.put_cast(&produced, &stored_name, stored, out);
        }
        for &name in &node.outputs {
            if let Some(inner) = self.renamed.get(name).cloned() {
                self.put_cast(&inner, name, Precision::Single, out);
            }
        }
        Ok(())
    }

    /// A `value` attribute holding `tensor`'s values as float16.
    fn half_tensor_attribute(&mut self, tensor: &TensorView<'_>) -> Result<Vec<u8>, String> {
        let values = tensor
            .f32_values()
            .ok_or_else(|| format!("constant {} cannot be read", tensor.name))?;
        let dims: Vec<usize> = tensor.dims.iter().map(|&d| d as usize).collect();
        Ok(self.half_tensor_attribute_of(tensor.name, &dims, &values))
    }

    fn half_tensor_attribute_of(&mut self, name: &str, dims: &[usize], values: &[f32]) -> Vec<u8> {
        let half = to_half(values);
        self.report.num_clamped += half.num_clamped;
        let mut body = encode_tensor_head(name, dims, data_type::FLOAT16, half.bytes.len());
        body.extend_from_slice(&half.bytes);
        encode_tensor_attribute("value", &body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quantize::{quantize_model, QuantizeOptions};
    use stemflow_onnx::{Dim, OnnxGraph};

    fn scale_graph(weights: Vec<f32>) -> Vec<u8> {
        let mut graph = OnnxGraph::new("scale");
        graph.add_input("x", vec![Dim::Fixed(2), Dim::Fixed(2)]);
        graph.add_initializer_f32("w", &[2, 2], weights).unwrap();
        graph.add_node("MatMul", "mm", &["x", "w"], &["y"], vec![]);
        graph.add_output("y", vec![Dim::Fixed(2), Dim::Fixed(2)]);
        graph.to_model_bytes()
    }

    /// A node's operator and the tensors it reads then writes.
    type NodeSummary = (String, Vec<String>);

    /// The nodes and the initializers' names and types of a converted model.
    fn graph_parts(model: &[u8]) -> (Vec<NodeSummary>, Vec<(String, i64)>) {
        let model = ModelView::read(model).unwrap();
        let mut nodes = Vec::new();
        let mut tensors = Vec::new();
        for field in raw_fields(model.graph().unwrap()).unwrap() {
            match GraphPart::read(&field).unwrap() {
                GraphPart::Node(node) => {
                    let io = node.inputs.iter().chain(&node.outputs);
                    nodes.push((node.op_type.to_owned(), io.map(|s| s.to_string()).collect()));
                }
                GraphPart::Initializer(tensor) => {
                    tensors.push((tensor.name.to_owned(), tensor.data_type));
                }
                _ => {}
            }
        }
        (nodes, tensors)
    }

    #[test]
    fn weights_become_float16_between_casts_of_the_float32_input_and_output() {
        let (half, report) = convert_model(&scale_graph(vec![1.0, 2.0, 1e6, -0.5])).unwrap();
        assert_eq!(report.num_half_nodes, 1);
        assert_eq!(report.num_clamped, 1, "1e6 clamps to 65504");
        assert_eq!(
            (report.weight_bytes_before, report.weight_bytes_after),
            (16, 8)
        );
        let (nodes, tensors) = graph_parts(&half);
        assert_eq!(tensors, vec![("w".to_owned(), data_type::FLOAT16)]);
        let ops: Vec<&str> = nodes.iter().map(|(op, _)| op.as_str()).collect();
        assert_eq!(ops, ["Cast", "MatMul", "Cast"]);
        // x → x_fp16 → MatMul → y_fp16 → y: the graph's own names stay float32.
        assert_eq!(nodes[0].1, ["x", "x_fp16"]);
        assert_eq!(nodes[1].1, ["x_fp16", "w", "y_fp16"]);
        assert_eq!(nodes[2].1, ["y_fp16", "y"]);
    }

    #[test]
    fn int8_float16_and_integer_only_models_are_refused_in_words() {
        let float = scale_graph(vec![1.0, 2.0, 3.0, 4.0]);
        let (half, _) = convert_model(&float).unwrap();
        let again = convert_model(&half).unwrap_err().to_string();
        assert_eq!(
            again,
            "cannot convert to float16: the model is already float16"
        );
        let (int8, _) = quantize_model(&float, QuantizeOptions::default()).unwrap();
        let quantized = convert_model(&int8).unwrap_err().to_string();
        assert!(
            quantized.contains("convert the float model instead"),
            "{quantized}"
        );
        assert!(convert_model(b"not a model").is_err());

        // Only shape arithmetic: nothing computes in float from the inputs.
        let mut graph = OnnxGraph::new("shape");
        graph.add_input("x", vec![Dim::Fixed(2)]);
        graph.add_node("Shape", "shape", &["x"], &["s"], vec![]);
        graph.add_output("s", vec![Dim::Fixed(1)]);
        let none = convert_model(&graph.to_model_bytes())
            .unwrap_err()
            .to_string();
        assert!(none.contains("no node computes in float"), "{none}");
    }
}
