//! The graph builder: [`OnnxGraph`] collects inputs, outputs, initializers, nodes and model
//! metadata, and [`OnnxGraph::write_model`] encodes them as an ONNX `ModelProto`.
//!
//! What it can express is what Stemflow's converters need and no more: one graph in the default
//! operator set ([`OPSET_VERSION`]) and, for nodes of another domain (ONNX Runtime's
//! `com.microsoft` kernels), that domain's version 1; float32, float16 and int64 initializers
//! stored as little-endian `raw_data`, float32 graph inputs and outputs with fixed or symbolic
//! dimensions, and node attributes of type INT, INTS, FLOAT, FLOATS and STRING.
//!
//! Fields are written in field-number order, scalars unpacked, as the reference protobuf
//! serializer does, so a model written here is byte-for-byte what `onnx.helper` builds from
//! the same parts (the unit tests hold such bytes, produced and checked with the `onnx`
//! Python package).
//!
//! Initializers borrow their data where they can ([`Cow`]), and [`OnnxGraph::write_model`]
//! streams it to the writer in small chunks: a 40 MB checkpoint is never copied whole.

mod write;

use std::borrow::Cow;
use std::collections::BTreeSet;

use crate::encode::{Attribute, Dim};
use crate::field::data_type;

/// The ONNX IR version written (IR 8: the version of ONNX 1.10 to 1.13, which go to opset 18).
pub const IR_VERSION: i64 = 8;
/// The default-domain operator set version the graphs are written for.
pub const OPSET_VERSION: i64 = 17;
/// `producer_name` of the written models.
pub const PRODUCER_NAME: &str = "stemflow-convert";
/// `producer_version` of the written models: Stemflow's version.
pub const PRODUCER_VERSION: &str = env!("CARGO_PKG_VERSION");

/// Floats converted to bytes per `write_all` when streaming initializer data.
const STREAM_CHUNK_VALUES: usize = 16 * 1024;

/// A graph that is not well formed, in words naming the offending part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError(pub String);

impl std::fmt::Display for GraphError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GraphError {}

/// A graph input or output: a float32 tensor of the given dimensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueInfo {
    /// The tensor's name in the graph.
    pub name: String,
    /// Its dimensions, outermost first.
    pub dims: Vec<Dim>,
}

/// The values of an initializer.
#[derive(Debug, Clone, PartialEq)]
pub enum InitializerData<'a> {
    /// float32 values, borrowed from the checkpoint where possible.
    F32(Cow<'a, [f32]>),
    /// float16 values, as their bits.
    F16(Vec<u16>),
    /// int64 values (shape and axes constants).
    I64(Vec<i64>),
}

impl InitializerData<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            InitializerData::F32(values) => values.len(),
            InitializerData::F16(values) => values.len(),
            InitializerData::I64(values) => values.len(),
        }
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of `raw_data`.
    fn raw_len_bytes(&self) -> usize {
        match self {
            InitializerData::F32(values) => values.len() * 4,
            InitializerData::F16(values) => values.len() * 2,
            InitializerData::I64(values) => values.len() * 8,
        }
    }

    /// `TensorProto.DataType` of the values.
    fn data_type(&self) -> i64 {
        match self {
            InitializerData::F32(_) => data_type::FLOAT,
            InitializerData::F16(_) => data_type::FLOAT16,
            InitializerData::I64(_) => data_type::INT64,
        }
    }
}

/// A constant tensor of the graph (weights, biases, shape constants).
#[derive(Debug, Clone, PartialEq)]
pub struct Initializer<'a> {
    /// The tensor's name in the graph.
    pub name: String,
    /// Its dimensions, outermost first; their product is the number of values.
    pub dims: Vec<usize>,
    /// Its values, row-major.
    pub data: InitializerData<'a>,
}

/// One operator application.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's name (for diagnostics; unique in the graph).
    pub name: String,
    /// The operator (`"Conv"`, `"Relu"`, …).
    pub op_type: String,
    /// Its domain: "" for the default one, `com.microsoft` for ONNX Runtime's own operators.
    pub domain: String,
    /// Names of the tensors it reads, in the operator's input order.
    pub inputs: Vec<String>,
    /// Names of the tensors it produces.
    pub outputs: Vec<String>,
    /// Its attributes, written in this order.
    pub attributes: Vec<(String, Attribute)>,
}

/// An ONNX graph under construction, with the model-level metadata written around it.
///
/// Build it with the `add_*` methods in any order (nodes should be added in a topological
/// order, as ONNX requires), check it with [`OnnxGraph::validate`], then write it with
/// [`OnnxGraph::write_model`] or [`OnnxGraph::to_model_bytes`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OnnxGraph<'a> {
    name: String,
    inputs: Vec<ValueInfo>,
    outputs: Vec<ValueInfo>,
    initializers: Vec<Initializer<'a>>,
    nodes: Vec<Node>,
    metadata: Vec<(String, String)>,
}

impl<'a> OnnxGraph<'a> {
    /// An empty graph called `name`.
    pub fn new(name: &str) -> Self {
        OnnxGraph {
            name: name.to_owned(),
            ..OnnxGraph::default()
        }
    }

    /// Adds a float32 graph input.
    pub fn add_input(&mut self, name: &str, dims: Vec<Dim>) {
        self.inputs.push(ValueInfo {
            name: name.to_owned(),
            dims,
        });
    }

    /// Adds a float32 graph output.
    pub fn add_output(&mut self, name: &str, dims: Vec<Dim>) {
        self.outputs.push(ValueInfo {
            name: name.to_owned(),
            dims,
        });
    }

    /// Adds a float32 initializer. `data` may be borrowed (`&[f32]`, kept as is until writing)
    /// or owned (`Vec<f32>`).
    ///
    /// Fails with [`GraphError`] when `data` does not hold `dims`' product of values.
    pub fn add_initializer_f32(
        &mut self,
        name: &str,
        dims: &[usize],
        data: impl Into<Cow<'a, [f32]>>,
    ) -> Result<(), GraphError> {
        self.add_initializer(name, dims, InitializerData::F32(data.into()))
    }

    /// Adds a float16 initializer from the values' bits.
    ///
    /// Fails with [`GraphError`] when `bits` does not hold `dims`' product of values.
    pub fn add_initializer_f16(
        &mut self,
        name: &str,
        dims: &[usize],
        bits: Vec<u16>,
    ) -> Result<(), GraphError> {
        self.add_initializer(name, dims, InitializerData::F16(bits))
    }

    /// Adds an int64 initializer (shape or axes constants).
    ///
    /// Fails with [`GraphError`] when `data` does not hold `dims`' product of values.
    pub fn add_initializer_i64(
        &mut self,
        name: &str,
        dims: &[usize],
        data: Vec<i64>,
    ) -> Result<(), GraphError> {
        self.add_initializer(name, dims, InitializerData::I64(data))
    }

    fn add_initializer(
        &mut self,
        name: &str,
        dims: &[usize],
        data: InitializerData<'a>,
    ) -> Result<(), GraphError> {
        let num_values: usize = dims.iter().product();
        if num_values != data.len() {
            return Err(GraphError(format!(
                "initializer {name} has {} values, its shape {dims:?} needs {num_values}",
                data.len()
            )));
        }
        self.initializers.push(Initializer {
            name: name.to_owned(),
            dims: dims.to_vec(),
            data,
        });
        Ok(())
    }

    /// Adds a node of the default domain, named `name`, running `op_type` on `inputs` and
    /// producing `outputs`.
    pub fn add_node(
        &mut self,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
    ) {
        self.add_node_in("", op_type, name, inputs, outputs, attributes);
    }

    /// [`OnnxGraph::add_node`] for an operator of `domain` ("" for the default one); the model
    /// imports each domain its nodes use (a domain other than the default one at version 1).
    pub fn add_node_in(
        &mut self,
        domain: &str,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attributes: Vec<(&str, Attribute)>,
    ) {
        self.nodes.push(Node {
            name: name.to_owned(),
            op_type: op_type.to_owned(),
            domain: domain.to_owned(),
            inputs: inputs.iter().map(|s| (*s).to_owned()).collect(),
            outputs: outputs.iter().map(|s| (*s).to_owned()).collect(),
            attributes: attributes
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
        });
    }

    /// Sets a model metadata property (`metadata_props`), replacing an earlier value of `key`.
    pub fn set_metadata(&mut self, key: &str, value: &str) {
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value.to_owned(),
            None => self.metadata.push((key.to_owned(), value.to_owned())),
        }
    }

    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The graph inputs, in the order added.
    pub fn inputs(&self) -> &[ValueInfo] {
        &self.inputs
    }

    /// The graph outputs, in the order added.
    pub fn outputs(&self) -> &[ValueInfo] {
        &self.outputs
    }

    /// The initializers, in the order added.
    pub fn initializers(&self) -> &[Initializer<'a>] {
        &self.initializers
    }

    /// The nodes, in the order added.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The model metadata, in the order first set.
    pub fn metadata(&self) -> &[(String, String)] {
        &self.metadata
    }

    /// Checks that the graph is well formed: every name is defined once (as an input, an
    /// initializer or a node output), every node reads only names defined before it, and every
    /// graph output is computed (empty names, ONNX's "optional input or output left out", are
    /// skipped). Fails with [`GraphError`] naming the first offender.
    pub fn validate(&self) -> Result<(), GraphError> {
        let mut defined: BTreeSet<&str> = BTreeSet::new();
        let sources = self
            .inputs
            .iter()
            .map(|v| (v.name.as_str(), "graph input"))
            .chain(
                self.initializers
                    .iter()
                    .map(|i| (i.name.as_str(), "initializer")),
            );
        for (name, what) in sources {
            if name.is_empty() {
                return Err(GraphError(format!("a {what} has an empty name")));
            }
            if !defined.insert(name) {
                return Err(GraphError(format!("{what} {name} is defined twice")));
            }
        }
        for node in &self.nodes {
            for input in node.inputs.iter().filter(|i| !i.is_empty()) {
                if !defined.contains(input.as_str()) {
                    return Err(GraphError(format!(
                        "node {} reads {input}, which nothing before it defines",
                        node.name
                    )));
                }
            }
            // An empty name marks an optional input or output left out.
            for output in node.outputs.iter().filter(|o| !o.is_empty()) {
                if !defined.insert(output) {
                    return Err(GraphError(format!("node {} redefines {output}", node.name)));
                }
            }
        }
        for output in &self.outputs {
            if !defined.contains(output.name.as_str()) {
                return Err(GraphError(format!(
                    "graph output {} is never computed",
                    output.name
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `y = x + bias` with `x` `[batch, 3]`, `bias` `[3]` = 1, 2, 3.
    pub(crate) fn tiny_add_graph() -> OnnxGraph<'static> {
        let mut graph = OnnxGraph::new("tiny");
        graph.add_input("x", vec![Dim::Symbolic("batch".into()), Dim::Fixed(3)]);
        graph.add_output("y", vec![Dim::Symbolic("batch".into()), Dim::Fixed(3)]);
        graph
            .add_initializer_f32("bias", &[3], vec![1.0, 2.0, 3.0])
            .unwrap();
        graph.add_node("Add", "add", &["x", "bias"], &["y"], Vec::new());
        graph.set_metadata("stemflow.family", "test");
        graph
    }

    #[test]
    fn initializer_with_the_wrong_number_of_values_is_refused() {
        let mut graph = OnnxGraph::new("g");
        let error = graph
            .add_initializer_f32("w", &[2, 3], vec![0.0; 5])
            .unwrap_err();
        assert_eq!(
            error,
            GraphError("initializer w has 5 values, its shape [2, 3] needs 6".into())
        );
    }

    #[test]
    fn validate_finds_undefined_and_redefined_names() {
        assert_eq!(tiny_add_graph().validate(), Ok(()));

        let mut graph = tiny_add_graph();
        graph.add_node("Relu", "relu", &["z"], &["w"], Vec::new());
        assert!(matches!(graph.validate(), Err(GraphError(m)) if m.contains("reads z")));

        let mut graph = tiny_add_graph();
        graph.add_node("Relu", "relu", &["x"], &["y"], Vec::new());
        assert!(matches!(graph.validate(), Err(GraphError(m)) if m.contains("redefines y")));

        let mut graph = tiny_add_graph();
        graph.add_output("missing", vec![Dim::Fixed(1)]);
        assert!(matches!(graph.validate(), Err(GraphError(m)) if m.contains("never computed")));
    }

    #[test]
    fn metadata_keys_are_replaced_not_repeated() {
        let mut graph = tiny_add_graph();
        graph.set_metadata("stemflow.family", "spleeter");
        graph.set_metadata("source", "x");
        assert_eq!(
            graph.metadata(),
            [
                ("stemflow.family".to_owned(), "spleeter".to_owned()),
                ("source".to_owned(), "x".to_owned())
            ]
        );
    }
}
