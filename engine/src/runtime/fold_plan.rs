//! Which nodes of a graph compute constants, the small model that computes them, and the graph
//! with their values in their place — the graph side of [`super::constant_fold`].
//!
//! A node is folded when every input is an initializer, a `Constant` node's output or a folded
//! node's output. Not folded: operators outside the default domain, nodes with subgraphs,
//! non-deterministic operators and quantization operators (ONNX Runtime fuses
//! `DequantizeLinear` of constant weights into integer kernels; folding it would turn int8
//! weights back into float). A graph that has subgraphs anywhere is left alone (a subgraph may
//! read a folded value by name).

use std::collections::HashSet;

use stemflow_proto::write::{put_bytes, put_int64};
use stemflow_proto::{FieldValue, Fields};

/// Operators never folded: non-deterministic, or fused by ONNX Runtime when their inputs are
/// constants (quantization).
const NEVER_FOLDED: &[&str] = &[
    "RandomUniform",
    "RandomNormal",
    "RandomUniformLike",
    "RandomNormalLike",
    "Multinomial",
    "Bernoulli",
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
];

/// A folded value: what replaces the nodes that computed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedTensor {
    /// Its dimensions.
    pub dims: Vec<i64>,
    /// `TensorProto.DataType`.
    pub data_type: i64,
    /// Its values, little-endian, as `TensorProto.raw_data` stores them.
    pub raw: Vec<u8>,
}

/// The constant part of a model: the nodes that compute constants and the values the rest of
/// the graph reads from them.
#[derive(Debug)]
pub struct FoldPlan {
    /// A model of the folded nodes (and the constants they read) whose outputs are
    /// [`FoldPlan::outputs`]; it has no inputs.
    pub sub_model: Vec<u8>,
    /// The folded values the rest of the graph (or the graph's outputs) reads, in the order of
    /// the sub-model's outputs.
    pub outputs: Vec<String>,
    /// Nodes folded.
    pub num_folded: usize,
    /// Index (among the graph's fields) of every field the folded graph leaves out: folded
    /// nodes, and constants only they read.
    dropped_fields: HashSet<usize>,
}

/// A graph node, borrowed.
struct Node<'a> {
    inputs: Vec<&'a str>,
    outputs: Vec<&'a str>,
    op_type: &'a str,
    domain: &'a str,
    has_subgraph: bool,
}

impl<'a> Node<'a> {
    fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut node = Node {
            inputs: Vec::new(),
            outputs: Vec::new(),
            op_type: "",
            domain: "",
            has_subgraph: false,
        };
        for field in Fields::new(body) {
            match field? {
                (1, FieldValue::Bytes(name)) => node.inputs.push(text(name)?),
                (2, FieldValue::Bytes(name)) => node.outputs.push(text(name)?),
                (4, FieldValue::Bytes(op)) => node.op_type = text(op)?,
                (7, FieldValue::Bytes(domain)) => node.domain = text(domain)?,
                (5, FieldValue::Bytes(attribute)) => {
                    for part in Fields::new(attribute) {
                        // AttributeProto.g (6) and .graphs (11).
                        if matches!(part?, (6 | 11, FieldValue::Bytes(_))) {
                            node.has_subgraph = true;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(node)
    }

    fn is_default_domain(&self) -> bool {
        matches!(self.domain, "" | "ai.onnx")
    }

    fn is_constant(&self) -> bool {
        self.is_default_domain() && self.op_type == "Constant"
    }

    fn may_fold(&self) -> bool {
        self.is_default_domain()
            && !self.has_subgraph
            && !NEVER_FOLDED.contains(&self.op_type)
            && self.inputs.iter().any(|name| !name.is_empty())
    }
}

fn text(bytes: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(bytes).map_err(|_| "a name is not UTF-8".to_owned())
}

/// The `name` (field 1 of a `ValueInfoProto`, 8 of a `TensorProto`) of a message.
fn name_field(body: &[u8], number: u64) -> Result<&str, String> {
    for field in Fields::new(body) {
        if let (n, FieldValue::Bytes(name)) = field? {
            if n == number {
                return text(name);
            }
        }
    }
    Ok("")
}

/// What the graph is made of, in field order.
enum GraphField<'a> {
    Node(Node<'a>),
    Initializer(&'a str),
    Input(&'a str),
    Output(&'a str),
    Other,
}

/// Splits a model into its fields and its one graph's fields.
#[allow(clippy::type_complexity)]
fn model_parts(model: &[u8]) -> Result<(Vec<(u64, &[u8])>, Vec<(u64, &[u8])>), String> {
    let mut model_fields = Vec::new();
    let mut graph = None;
    let mut fields = Fields::new(model);
    while let Some(field) = fields.next_with_bytes() {
        let (number, value, bytes) = field?;
        if let (7, FieldValue::Bytes(body)) = (number, value) {
            if graph.replace(body).is_some() {
                return Err("the model has more than one graph".into());
            }
        }
        model_fields.push((number, bytes));
    }
    let graph = graph.ok_or("the model has no graph")?;
    let mut graph_fields = Vec::new();
    let mut fields = Fields::new(graph);
    while let Some(field) = fields.next_with_bytes() {
        let (number, _, bytes) = field?;
        graph_fields.push((number, bytes));
    }
    Ok((model_fields, graph_fields))
}

/// The body of a field's bytes (key and length stripped).
fn body(bytes: &[u8]) -> Result<&[u8], String> {
    match Fields::new(bytes).next() {
        Some(Ok((_, FieldValue::Bytes(body)))) => Ok(body),
        _ => Err("a graph field is not a message".into()),
    }
}

/// Plans the folding of `model`'s constant subgraphs; `None` when there is nothing to fold (or
/// the graph has subgraphs). An error when the model cannot be read.
pub fn plan(model: &[u8]) -> Result<Option<FoldPlan>, String> {
    let (model_fields, graph_fields) = model_parts(model)?;
    let mut parsed = Vec::with_capacity(graph_fields.len());
    for &(number, bytes) in &graph_fields {
        parsed.push(match number {
            1 => GraphField::Node(Node::read(body(bytes)?)?),
            5 => GraphField::Initializer(name_field(body(bytes)?, 8)?),
            11 => GraphField::Input(name_field(body(bytes)?, 1)?),
            12 => GraphField::Output(name_field(body(bytes)?, 1)?),
            _ => GraphField::Other,
        });
    }
    if parsed
        .iter()
        .any(|f| matches!(f, GraphField::Node(n) if n.has_subgraph))
    {
        return Ok(None);
    }
    // An initializer that is also a graph input can be replaced at run time: not a constant.
    let inputs: HashSet<&str> = parsed
        .iter()
        .filter_map(|f| match f {
            GraphField::Input(name) => Some(*name),
            _ => None,
        })
        .collect();
    let mut constants: HashSet<&str> = parsed
        .iter()
        .filter_map(|f| match f {
            GraphField::Initializer(name) if !inputs.contains(name) => Some(*name),
            _ => None,
        })
        .collect();
    let mut folded_values: HashSet<&str> = HashSet::new();
    let mut folded = vec![false; parsed.len()];
    for (index, field) in parsed.iter().enumerate() {
        let GraphField::Node(node) = field else {
            continue;
        };
        if node.is_constant() {
            constants.extend(node.outputs.iter().copied());
        } else if node.may_fold()
            && node.inputs.iter().all(|name| {
                name.is_empty() || constants.contains(name) || folded_values.contains(name)
            })
        {
            folded[index] = true;
            folded_values.extend(node.outputs.iter().copied().filter(|n| !n.is_empty()));
        }
    }
    let num_folded = folded.iter().filter(|&&f| f).count();
    if num_folded == 0 {
        return Ok(None);
    }
    // What the graph left after folding reads.
    let mut read_by_rest: HashSet<&str> = HashSet::new();
    let mut read_by_folded: HashSet<&str> = HashSet::new();
    for (index, field) in parsed.iter().enumerate() {
        match field {
            GraphField::Node(node) if folded[index] => read_by_folded.extend(&node.inputs),
            GraphField::Node(node) => read_by_rest.extend(&node.inputs),
            GraphField::Output(name) => {
                read_by_rest.insert(name);
            }
            _ => {}
        }
    }
    let mut outputs = Vec::new();
    for (index, field) in parsed.iter().enumerate() {
        if let GraphField::Node(node) = field {
            if folded[index] {
                outputs.extend(
                    node.outputs
                        .iter()
                        .filter(|name| read_by_rest.contains(*name))
                        .map(|name| name.to_string()),
                );
            }
        }
    }
    if outputs.is_empty() {
        return Ok(None);
    }

    // The sub-model: the constants the folded nodes read, then the folded nodes, in order.
    let mut graph = Vec::new();
    put_bytes(&mut graph, 2, b"stemflow-constant-fold");
    let mut dropped_fields = HashSet::new();
    for (index, field) in parsed.iter().enumerate() {
        let bytes = graph_fields[index].1;
        let (is_read_by_folded, is_read_by_rest) = match field {
            GraphField::Node(_) if folded[index] => {
                graph.extend_from_slice(bytes);
                dropped_fields.insert(index);
                continue;
            }
            GraphField::Node(node) if node.is_constant() => (
                node.outputs.iter().any(|n| read_by_folded.contains(n)),
                node.outputs.iter().any(|n| read_by_rest.contains(n)),
            ),
            GraphField::Initializer(name) if !inputs.contains(name) => {
                (read_by_folded.contains(name), read_by_rest.contains(name))
            }
            _ => continue,
        };
        if is_read_by_folded {
            graph.extend_from_slice(bytes);
            if !is_read_by_rest {
                dropped_fields.insert(index);
            }
        }
    }
    for name in &outputs {
        let mut value_info = Vec::new();
        put_bytes(&mut value_info, 1, name.as_bytes());
        put_bytes(&mut graph, 12, &value_info);
    }
    let mut sub_model = Vec::with_capacity(graph.len() + 64);
    for &(number, bytes) in &model_fields {
        // ir_version (1) and opset_import (8): the sub-model runs with the model's operators.
        if matches!(number, 1 | 8) {
            sub_model.extend_from_slice(bytes);
        }
    }
    put_bytes(&mut sub_model, 7, &graph);
    Ok(Some(FoldPlan {
        sub_model,
        outputs,
        num_folded,
        dropped_fields,
    }))
}

impl FoldPlan {
    /// `model` (the one [`plan`] read) without the folded nodes and the constants only they read,
    /// with `values` (one per [`FoldPlan::outputs`], in order) as initializers.
    pub fn rewrite(&self, model: &[u8], values: &[FoldedTensor]) -> Result<Vec<u8>, String> {
        if values.len() != self.outputs.len() {
            return Err(format!(
                "{} folded values for {} outputs",
                values.len(),
                self.outputs.len()
            ));
        }
        let (model_fields, graph_fields) = model_parts(model)?;
        let mut graph = Vec::with_capacity(model.len());
        for (index, &(_, bytes)) in graph_fields.iter().enumerate() {
            if !self.dropped_fields.contains(&index) {
                graph.extend_from_slice(bytes);
            }
        }
        for (name, value) in self.outputs.iter().zip(values) {
            let mut tensor = Vec::with_capacity(value.raw.len() + name.len() + 64);
            for &dim in &value.dims {
                put_int64(&mut tensor, 1, dim);
            }
            put_int64(&mut tensor, 2, value.data_type);
            put_bytes(&mut tensor, 8, name.as_bytes());
            put_bytes(&mut tensor, 9, &value.raw);
            put_bytes(&mut graph, 5, &tensor);
        }
        let mut out = Vec::with_capacity(graph.len() + 4096);
        for &(number, bytes) in &model_fields {
            if number == 7 {
                put_bytes(&mut out, 7, &graph);
            } else {
                out.extend_from_slice(bytes);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_convert::onnx_writer::{Dim, OnnxGraph};

    /// The op types of a model's nodes and the names of its initializers, in order.
    fn contents(model: &[u8]) -> (Vec<String>, Vec<String>) {
        let (_, graph_fields) = model_parts(model).unwrap();
        let (mut ops, mut initializers) = (Vec::new(), Vec::new());
        for (number, bytes) in graph_fields {
            let body = body(bytes).unwrap();
            match number {
                1 => ops.push(Node::read(body).unwrap().op_type.to_owned()),
                5 => initializers.push(name_field(body, 8).unwrap().to_owned()),
                _ => {}
            }
        }
        (ops, initializers)
    }

    /// `y = x · ((a + b) · a) + a`: the bracket is constant, the rest reads the input.
    fn graph_with_a_constant_chain() -> Vec<u8> {
        let mut graph = OnnxGraph::new("chain");
        graph.add_input("x", vec![Dim::Fixed(4)]);
        graph
            .add_initializer_f32("a", &[4], vec![1.0, 2.0, 3.0, 4.0])
            .unwrap();
        graph.add_initializer_f32("b", &[4], vec![0.5; 4]).unwrap();
        graph.add_node("Add", "c", &["a", "b"], &["c"], vec![]);
        graph.add_node("Mul", "d", &["c", "a"], &["d"], vec![]);
        graph.add_node("Mul", "xd", &["x", "d"], &["xd"], vec![]);
        graph.add_node("Add", "y", &["xd", "a"], &["y"], vec![]);
        graph.add_output("y", vec![Dim::Fixed(4)]);
        graph.to_model_bytes()
    }

    #[test]
    fn a_constant_chain_is_planned_and_replaced_by_its_values() {
        let model = graph_with_a_constant_chain();
        let plan = plan(&model).unwrap().expect("nothing planned");
        assert_eq!(plan.num_folded, 2);
        assert_eq!(
            plan.outputs,
            vec!["d".to_owned()],
            "only d is read by the rest"
        );
        // The sub-model holds the two folded nodes and the constants they read.
        let (ops, initializers) = contents(&plan.sub_model);
        assert_eq!(ops, vec!["Add", "Mul"]);
        assert_eq!(initializers, vec!["a", "b"]);

        let d = FoldedTensor {
            dims: vec![4],
            data_type: 1,
            raw: [1.5f32, 5.0, 10.5, 18.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        let folded = plan.rewrite(&model, std::slice::from_ref(&d)).unwrap();
        let (ops, initializers) = contents(&folded);
        assert_eq!(ops, vec!["Mul", "Add"], "the folded nodes are gone");
        // `b` was read by the folded nodes only; `a` is still read by the last Add.
        assert_eq!(initializers, vec!["a", "d"]);
        assert!(
            super::plan(&folded).unwrap().is_none(),
            "nothing left to fold"
        );
        assert!(plan.rewrite(&model, &[]).is_err(), "a value per output");
    }

    #[test]
    fn quantization_random_operators_and_replaceable_initializers_are_not_folded() {
        let mut graph = OnnxGraph::new("kept");
        graph.add_input("x", vec![Dim::Fixed(4)]);
        // An initializer that is also a graph input may be given at run time.
        graph.add_input("given", vec![Dim::Fixed(4)]);
        graph
            .add_initializer_f32("given", &[4], vec![1.0; 4])
            .unwrap();
        graph.add_initializer_f32("w", &[4], vec![2.0; 4]).unwrap();
        graph.add_initializer_f32("s", &[], vec![0.5]).unwrap();
        graph.add_node("Add", "g", &["given", "w"], &["g"], vec![]);
        graph.add_node("DequantizeLinear", "dq", &["w", "s"], &["dq"], vec![]);
        graph.add_node("RandomNormalLike", "r", &["w"], &["r"], vec![]);
        graph.add_node("Sum", "y", &["x", "g", "dq", "r"], &["y"], vec![]);
        graph.add_output("y", vec![Dim::Fixed(4)]);
        assert!(plan(&graph.to_model_bytes()).unwrap().is_none());
    }

    #[test]
    fn a_graph_that_reads_only_its_input_has_nothing_to_fold_and_garbage_is_an_error() {
        let mut graph = OnnxGraph::new("plain");
        graph.add_input("x", vec![Dim::Fixed(4)]);
        graph.add_node("Relu", "y", &["x"], &["y"], vec![]);
        graph.add_output("y", vec![Dim::Fixed(4)]);
        assert!(plan(&graph.to_model_bytes()).unwrap().is_none());
        assert!(plan(&[0x3a, 50, 1, 2]).is_err());
    }
}
