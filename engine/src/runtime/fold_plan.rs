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

use stemflow_onnx::encode::{encode_tensor, encode_value_name};
use stemflow_onnx::field::graph;
use stemflow_onnx::view::raw_fields;
use stemflow_onnx::wire::put_bytes;
use stemflow_onnx::{GraphPart, ModelView, NodeView};

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
    pub dims: Vec<usize>,
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

fn is_constant(node: &NodeView<'_>) -> bool {
    node.is("Constant")
}

fn may_fold(node: &NodeView<'_>) -> bool {
    node.is_default_domain()
        && !node.has_subgraph
        && !NEVER_FOLDED.contains(&node.op_type)
        && node.inputs.iter().any(|name| !name.is_empty())
}

/// Plans the folding of `model`'s constant subgraphs; `None` when there is nothing to fold (or
/// the graph has subgraphs). An error when the model cannot be read.
pub fn plan(model: &[u8]) -> Result<Option<FoldPlan>, String> {
    let model = ModelView::read(model)?;
    let graph_fields = raw_fields(model.graph()?)?;
    let parsed = graph_fields
        .iter()
        .map(GraphPart::read)
        .collect::<Result<Vec<_>, _>>()?;
    if parsed
        .iter()
        .any(|f| matches!(f, GraphPart::Node(n) if n.has_subgraph))
    {
        return Ok(None);
    }
    // An initializer that is also a graph input can be replaced at run time: not a constant.
    let inputs: HashSet<&str> = parsed
        .iter()
        .filter_map(|f| match f {
            GraphPart::Input(info) => Some(info.name),
            _ => None,
        })
        .collect();
    let mut constants: HashSet<&str> = parsed
        .iter()
        .filter_map(|f| match f {
            GraphPart::Initializer(tensor) if !inputs.contains(tensor.name) => Some(tensor.name),
            _ => None,
        })
        .collect();
    let mut folded_values: HashSet<&str> = HashSet::new();
    let mut folded = vec![false; parsed.len()];
    for (index, field) in parsed.iter().enumerate() {
        let GraphPart::Node(node) = field else {
            continue;
        };
        if is_constant(node) {
            constants.extend(node.outputs.iter().copied());
        } else if may_fold(node)
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
            GraphPart::Node(node) if folded[index] => read_by_folded.extend(&node.inputs),
            GraphPart::Node(node) => read_by_rest.extend(&node.inputs),
            GraphPart::Output(info) => {
                read_by_rest.insert(info.name);
            }
            _ => {}
        }
    }
    let mut outputs = Vec::new();
    for (index, field) in parsed.iter().enumerate() {
        if let GraphPart::Node(node) = field {
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
    let mut graph_body = Vec::new();
    put_bytes(&mut graph_body, graph::NAME, b"stemflow-constant-fold");
    let mut dropped_fields = HashSet::new();
    for (index, field) in parsed.iter().enumerate() {
        let bytes = graph_fields[index].bytes;
        let (is_read_by_folded, is_read_by_rest) = match field {
            GraphPart::Node(_) if folded[index] => {
                graph_body.extend_from_slice(bytes);
                dropped_fields.insert(index);
                continue;
            }
            GraphPart::Node(node) if is_constant(node) => (
                node.outputs.iter().any(|n| read_by_folded.contains(n)),
                node.outputs.iter().any(|n| read_by_rest.contains(n)),
            ),
            GraphPart::Initializer(tensor) if !inputs.contains(tensor.name) => (
                read_by_folded.contains(tensor.name),
                read_by_rest.contains(tensor.name),
            ),
            _ => continue,
        };
        if is_read_by_folded {
            graph_body.extend_from_slice(bytes);
            if !is_read_by_rest {
                dropped_fields.insert(index);
            }
        }
    }
    for name in &outputs {
        put_bytes(&mut graph_body, graph::OUTPUT, &encode_value_name(name));
    }
    // The sub-model runs with the model's IR version and operators.
    let sub_model = model.sibling(&graph_body);
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
        let model_bytes = model;
        let model = ModelView::read(model_bytes)?;
        let graph_fields = raw_fields(model.graph()?)?;
        let mut graph_body = Vec::with_capacity(model_bytes.len());
        for (index, field) in graph_fields.iter().enumerate() {
            if !self.dropped_fields.contains(&index) {
                graph_body.extend_from_slice(field.bytes);
            }
        }
        for (name, value) in self.outputs.iter().zip(values) {
            let tensor = encode_tensor(name, &value.dims, value.data_type, &value.raw);
            put_bytes(&mut graph_body, graph::INITIALIZER, &tensor);
        }
        Ok(model.with_graph(&graph_body, None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_onnx::{Dim, OnnxGraph};

    /// The op types of a model's nodes and the names of its initializers, in order.
    fn contents(model: &[u8]) -> (Vec<String>, Vec<String>) {
        let model = ModelView::read(model).unwrap();
        let (mut ops, mut initializers) = (Vec::new(), Vec::new());
        for field in raw_fields(model.graph().unwrap()).unwrap() {
            match GraphPart::read(&field).unwrap() {
                GraphPart::Node(node) => ops.push(node.op_type.to_owned()),
                GraphPart::Initializer(tensor) => initializers.push(tensor.name.to_owned()),
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
