//! The graph builder: [`OnnxGraph`] collects inputs, outputs, initializers, nodes and model
//! metadata, and [`OnnxGraph::write_model`] encodes them as an ONNX `ModelProto`.
//!
//! What it can express is what Stemflow's converters need and no more: one graph in the default
//! operator set ([`OPSET_VERSION`]), float32 and int64 initializers stored as little-endian
//! `raw_data`, float32 graph inputs and outputs with fixed or symbolic dimensions, and node
//! attributes of type INT, INTS, FLOAT, FLOATS and STRING.
//!
//! Fields are written in field-number order, scalars unpacked, as the reference protobuf
//! serializer does, so a model written here is byte-for-byte what `onnx.helper` builds from
//! the same parts (the unit tests hold such bytes, produced and checked with the `onnx`
//! Python package).
//!
//! Initializers borrow their data where they can ([`Cow`]), and [`OnnxGraph::write_model`]
//! streams it to the writer in small chunks: a 40 MB checkpoint is never copied whole.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::io::Write;

use crate::encode::{
    encode_attribute, encode_node, encode_string_entry, encode_tensor_head, encode_value_info,
    Attribute, Dim,
};
use crate::field::{data_type, graph as graph_field, model as model_field, opset_id};
use crate::wire::{key_len, put_bytes, put_int64, put_key, put_varint, varint_len, WIRE_LEN};

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
    /// int64 values (shape and axes constants).
    I64(Vec<i64>),
}

impl InitializerData<'_> {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            InitializerData::F32(values) => values.len(),
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
            InitializerData::I64(values) => values.len() * 8,
        }
    }

    /// `TensorProto.DataType` of the values.
    fn data_type(&self) -> i64 {
        match self {
            InitializerData::F32(_) => data_type::FLOAT,
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
    /// The operator, in the default domain (`"Conv"`, `"Relu"`, …).
    pub op_type: String,
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
        self.nodes.push(Node {
            name: name.to_owned(),
            op_type: op_type.to_owned(),
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

    /// The model's size in bytes once written.
    pub fn model_len_bytes(&self) -> usize {
        ModelParts::new(self, PRODUCER_VERSION).model_len_bytes()
    }

    /// The whole model as bytes (one allocation of [`OnnxGraph::model_len_bytes`]).
    pub fn to_model_bytes(&self) -> Vec<u8> {
        let parts = ModelParts::new(self, PRODUCER_VERSION);
        let mut bytes = Vec::with_capacity(parts.model_len_bytes());
        parts
            .write(self, &mut bytes)
            .expect("writing to a Vec cannot fail");
        bytes
    }

    /// Writes the model (`ModelProto`: IR [`IR_VERSION`], opset [`OPSET_VERSION`], the
    /// producer, this graph and the metadata) to `writer`. Initializer data is streamed in
    /// chunks of 16 Ki values; nothing else large is allocated. The writes are many and small:
    /// give a file behind a [`std::io::BufWriter`]. Does not call [`OnnxGraph::validate`].
    pub fn write_model(&self, writer: &mut impl Write) -> std::io::Result<()> {
        ModelParts::new(self, PRODUCER_VERSION).write(self, writer)
    }
}

/// The small, pre-encoded pieces of a model and the lengths that frame its initializers.
struct ModelParts {
    /// `ir_version`, `producer_name`, `producer_version`.
    model_head: Vec<u8>,
    /// The graph's `node` and `name` fields.
    graph_head: Vec<u8>,
    /// Per initializer: its `TensorProto` fields before the raw bytes, ending with the
    /// `raw_data` key and length.
    initializer_heads: Vec<Vec<u8>>,
    /// The graph's `input` and `output` fields.
    graph_tail: Vec<u8>,
    /// `opset_import` and `metadata_props`.
    model_tail: Vec<u8>,
    /// Bytes of the graph message body.
    graph_len_bytes: usize,
}

impl ModelParts {
    fn new(graph: &OnnxGraph<'_>, producer_version: &str) -> Self {
        let mut model_head = Vec::new();
        put_int64(&mut model_head, model_field::IR_VERSION, IR_VERSION);
        put_bytes(
            &mut model_head,
            model_field::PRODUCER_NAME,
            PRODUCER_NAME.as_bytes(),
        );
        put_bytes(
            &mut model_head,
            model_field::PRODUCER_VERSION,
            producer_version.as_bytes(),
        );

        let mut graph_head = Vec::new();
        for node in &graph.nodes {
            put_bytes(&mut graph_head, graph_field::NODE, &encode_graph_node(node));
        }
        put_bytes(&mut graph_head, graph_field::NAME, graph.name.as_bytes());

        let initializer_heads: Vec<Vec<u8>> = graph
            .initializers
            .iter()
            .map(encode_initializer_head)
            .collect();

        let mut graph_tail = Vec::new();
        for input in &graph.inputs {
            put_bytes(
                &mut graph_tail,
                graph_field::INPUT,
                &encode_value_info(&input.name, &input.dims),
            );
        }
        for output in &graph.outputs {
            put_bytes(
                &mut graph_tail,
                graph_field::OUTPUT,
                &encode_value_info(&output.name, &output.dims),
            );
        }

        let mut model_tail = Vec::new();
        let mut opset = Vec::new();
        put_bytes(&mut opset, opset_id::DOMAIN, b"");
        put_int64(&mut opset, opset_id::VERSION, OPSET_VERSION);
        put_bytes(&mut model_tail, model_field::OPSET_IMPORT, &opset);
        for (key, value) in &graph.metadata {
            let entry = encode_string_entry(key, value);
            put_bytes(&mut model_tail, model_field::METADATA_PROPS, &entry);
        }

        let initializers_len_bytes: usize = graph
            .initializers
            .iter()
            .zip(&initializer_heads)
            .map(|(init, head)| {
                let body = head.len() + init.data.raw_len_bytes();
                key_len(graph_field::INITIALIZER) + varint_len(body as u64) + body
            })
            .sum();
        let graph_len_bytes = graph_head.len() + initializers_len_bytes + graph_tail.len();
        ModelParts {
            model_head,
            graph_head,
            initializer_heads,
            graph_tail,
            model_tail,
            graph_len_bytes,
        }
    }

    fn model_len_bytes(&self) -> usize {
        self.model_head.len()
            + key_len(model_field::GRAPH)
            + varint_len(self.graph_len_bytes as u64)
            + self.graph_len_bytes
            + self.model_tail.len()
    }

    fn write(&self, graph: &OnnxGraph<'_>, writer: &mut impl Write) -> std::io::Result<()> {
        writer.write_all(&self.model_head)?;
        let mut frame = Vec::new();
        put_key(&mut frame, model_field::GRAPH, WIRE_LEN);
        put_varint(&mut frame, self.graph_len_bytes as u64);
        writer.write_all(&frame)?;
        writer.write_all(&self.graph_head)?;
        let mut chunk = Vec::with_capacity(STREAM_CHUNK_VALUES * 8);
        for (init, head) in graph.initializers.iter().zip(&self.initializer_heads) {
            frame.clear();
            put_key(&mut frame, graph_field::INITIALIZER, WIRE_LEN);
            put_varint(&mut frame, (head.len() + init.data.raw_len_bytes()) as u64);
            writer.write_all(&frame)?;
            writer.write_all(head)?;
            match &init.data {
                InitializerData::F32(values) => {
                    for part in values.chunks(STREAM_CHUNK_VALUES) {
                        chunk.clear();
                        part.iter()
                            .for_each(|v| chunk.extend_from_slice(&v.to_le_bytes()));
                        writer.write_all(&chunk)?;
                    }
                }
                InitializerData::I64(values) => {
                    for part in values.chunks(STREAM_CHUNK_VALUES) {
                        chunk.clear();
                        part.iter()
                            .for_each(|v| chunk.extend_from_slice(&v.to_le_bytes()));
                        writer.write_all(&chunk)?;
                    }
                }
            }
        }
        writer.write_all(&self.graph_tail)?;
        writer.write_all(&self.model_tail)
    }
}

fn encode_graph_node(node: &Node) -> Vec<u8> {
    let attributes: Vec<Vec<u8>> = node
        .attributes
        .iter()
        .map(|(name, value)| encode_attribute(name, value))
        .collect();
    let attributes: Vec<&[u8]> = attributes.iter().map(Vec::as_slice).collect();
    let inputs: Vec<&str> = node.inputs.iter().map(String::as_str).collect();
    let outputs: Vec<&str> = node.outputs.iter().map(String::as_str).collect();
    encode_node(
        &node.op_type,
        "",
        &node.name,
        &inputs,
        &outputs,
        &attributes,
    )
}

/// A `TensorProto`'s fields up to and including the `raw_data` key and length; the raw bytes
/// follow when writing.
fn encode_initializer_head(init: &Initializer<'_>) -> Vec<u8> {
    encode_tensor_head(
        &init.name,
        &init.dims,
        init.data.data_type(),
        init.data.raw_len_bytes(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{WIRE_FIXED32, WIRE_VARINT};

    /// A decoded protobuf field: its number and its value.
    #[derive(Debug, Clone, PartialEq)]
    enum Field<'b> {
        Varint(u32, u64),
        Fixed32(u32, [u8; 4]),
        Bytes(u32, &'b [u8]),
    }

    impl<'b> Field<'b> {
        fn number(&self) -> u32 {
            match self {
                Field::Varint(n, _) | Field::Fixed32(n, _) | Field::Bytes(n, _) => *n,
            }
        }
    }

    fn read_varint(bytes: &[u8], pos: &mut usize) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = bytes[*pos];
            *pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return value;
            }
        }
        panic!("varint longer than 10 bytes");
    }

    /// Splits one message into its fields; panics on anything malformed.
    fn fields(bytes: &[u8]) -> Vec<Field<'_>> {
        let mut pos = 0;
        let mut out = Vec::new();
        while pos < bytes.len() {
            let key = read_varint(bytes, &mut pos);
            let number = (key >> 3) as u32;
            match (key & 7) as u8 {
                WIRE_VARINT => out.push(Field::Varint(number, read_varint(bytes, &mut pos))),
                WIRE_FIXED32 => {
                    out.push(Field::Fixed32(
                        number,
                        bytes[pos..pos + 4].try_into().unwrap(),
                    ));
                    pos += 4;
                }
                WIRE_LEN => {
                    let len = read_varint(bytes, &mut pos) as usize;
                    out.push(Field::Bytes(number, &bytes[pos..pos + len]));
                    pos += len;
                }
                other => panic!("unexpected wire type {other}"),
            }
        }
        assert_eq!(pos, bytes.len(), "message overruns its end");
        out
    }

    fn bytes_of<'b>(fields: &[Field<'b>], number: u32) -> Vec<&'b [u8]> {
        fields
            .iter()
            .filter_map(|f| match f {
                Field::Bytes(n, b) if *n == number => Some(*b),
                _ => None,
            })
            .collect()
    }

    fn varints_of(fields: &[Field<'_>], number: u32) -> Vec<u64> {
        fields
            .iter()
            .filter_map(|f| match f {
                Field::Varint(n, v) if *n == number => Some(*v),
                _ => None,
            })
            .collect()
    }

    /// `y = x + bias` with `x` `[batch, 3]`, `bias` `[3]` = 1, 2, 3.
    fn tiny_add_graph() -> OnnxGraph<'static> {
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

    /// What `onnx.helper` (onnx 1.23.2) serialises for [`tiny_add_graph`] with producer
    /// version "0.1.0" (`make_model(..., ir_version=8, opset_imports=[make_opsetid("", 17)],
    /// producer_name="stemflow-convert", producer_version="0.1.0")`, `make_tensor(...,
    /// raw=True)`, `set_model_props`); `onnx.checker.check_model(full_check=True)` accepts it
    /// and onnxruntime 1.32 runs it.
    const TINY_ADD_MODEL_HEX: &str = "\
        080812107374656d666c6f772d636f6e766572741a05302e312e303a6c0a160a01780a04626961731201\
        791a036164642203416464120474696e792a18080310014204626961734a0c0000803f00000040000040\
        405a180a017812130a110801120d0a07120562617463680a02080362180a017912130a110801120d0a07\
        120562617463680a02080342040a00101172170a0f7374656d666c6f772e66616d696c79120474657374";

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn tiny_model_matches_the_reference_serializer_byte_for_byte() {
        let graph = tiny_add_graph();
        let parts = ModelParts::new(&graph, "0.1.0");
        let mut bytes = Vec::new();
        parts.write(&graph, &mut bytes).unwrap();
        assert_eq!(bytes.len(), parts.model_len_bytes());
        assert_eq!(hex(&bytes), TINY_ADD_MODEL_HEX);
    }

    #[test]
    fn model_fields_decode_to_what_was_built() {
        let graph = tiny_add_graph();
        let bytes = graph.to_model_bytes();
        assert_eq!(bytes.len(), graph.model_len_bytes());
        let model = fields(&bytes);
        let numbers: Vec<u32> = model.iter().map(Field::number).collect();
        assert_eq!(numbers, [1, 2, 3, 7, 8, 14], "model fields in field order");
        assert_eq!(varints_of(&model, 1), [IR_VERSION as u64]);
        assert_eq!(bytes_of(&model, 2), [PRODUCER_NAME.as_bytes()]);

        let opset = fields(bytes_of(&model, 8)[0]);
        assert_eq!(opset, [Field::Bytes(1, b""), Field::Varint(2, 17)]);
        let entry = fields(bytes_of(&model, 14)[0]);
        assert_eq!(
            entry,
            [
                Field::Bytes(1, b"stemflow.family"),
                Field::Bytes(2, b"test")
            ]
        );

        let graph_fields = fields(bytes_of(&model, 7)[0]);
        assert_eq!(bytes_of(&graph_fields, 2), [b"tiny".as_slice()]);
        let node = fields(bytes_of(&graph_fields, 1)[0]);
        assert_eq!(bytes_of(&node, 1), [b"x".as_slice(), b"bias"]);
        assert_eq!(bytes_of(&node, 2), [b"y".as_slice()]);
        assert_eq!(bytes_of(&node, 4), [b"Add".as_slice()]);

        let tensor = fields(bytes_of(&graph_fields, 5)[0]);
        assert_eq!(varints_of(&tensor, 1), [3]);
        assert_eq!(varints_of(&tensor, 2), [data_type::FLOAT as u64]);
        assert_eq!(bytes_of(&tensor, 8), [b"bias".as_slice()]);
        let raw = bytes_of(&tensor, 9)[0];
        let values: Vec<f32> = raw
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(values, [1.0, 2.0, 3.0]);

        // input: ValueInfo { name, type: TypeProto { tensor_type { elem_type, shape } } }
        let input = fields(bytes_of(&graph_fields, 11)[0]);
        assert_eq!(bytes_of(&input, 1), [b"x".as_slice()]);
        let tensor_type = fields(bytes_of(&fields(bytes_of(&input, 2)[0]), 1)[0]);
        assert_eq!(varints_of(&tensor_type, 1), [data_type::FLOAT as u64]);
        let dims = bytes_of(&fields(bytes_of(&tensor_type, 2)[0]), 1);
        assert_eq!(fields(dims[0]), [Field::Bytes(2, b"batch")]);
        assert_eq!(fields(dims[1]), [Field::Varint(1, 3)]);
        assert_eq!(bytes_of(&graph_fields, 12).len(), 1);
    }

    #[test]
    fn attributes_carry_their_type_and_unpacked_values() {
        let cases = [
            (Attribute::Int(-1), 2, vec![Field::Varint(3, u64::MAX)]),
            (
                Attribute::Ints(vec![1, 300]),
                7,
                vec![Field::Varint(8, 1), Field::Varint(8, 300)],
            ),
            (
                Attribute::Float(0.5),
                1,
                vec![Field::Fixed32(2, 0.5f32.to_le_bytes())],
            ),
            (
                Attribute::Floats(vec![1.0, -2.0]),
                6,
                vec![
                    Field::Fixed32(7, 1.0f32.to_le_bytes()),
                    Field::Fixed32(7, (-2.0f32).to_le_bytes()),
                ],
            ),
            (
                Attribute::String("SAME_UPPER".into()),
                3,
                vec![Field::Bytes(4, b"SAME_UPPER")],
            ),
        ];
        for (value, attribute_type, value_fields) in cases {
            let bytes = encode_attribute("a", &value);
            let mut expected = vec![Field::Bytes(1, b"a")];
            expected.extend(value_fields);
            expected.push(Field::Varint(20, attribute_type));
            assert_eq!(fields(&bytes), expected, "{value:?}");
        }
    }

    #[test]
    fn large_initializers_stream_in_chunks_and_keep_their_values() {
        let values: Vec<f32> = (0..STREAM_CHUNK_VALUES * 2 + 5).map(|i| i as f32).collect();
        let mut graph = OnnxGraph::new("big");
        graph
            .add_initializer_f32("w", &[values.len()], values.as_slice())
            .unwrap();
        graph
            .add_initializer_i64("axes", &[2], vec![1, -1])
            .unwrap();
        let bytes = graph.to_model_bytes();
        assert_eq!(bytes.len(), graph.model_len_bytes());
        let model = fields(&bytes);
        let graph_fields = fields(bytes_of(&model, 7)[0]);
        let tensors = bytes_of(&graph_fields, 5);
        let raw = bytes_of(&fields(tensors[0]), 9)[0];
        assert_eq!(raw.len(), values.len() * 4);
        assert!(raw
            .chunks(4)
            .zip(&values)
            .all(|(c, v)| f32::from_le_bytes(c.try_into().unwrap()) == *v));
        let axes = fields(tensors[1]);
        assert_eq!(varints_of(&axes, 2), [data_type::INT64 as u64]);
        let raw = bytes_of(&axes, 9)[0];
        assert_eq!(&raw[..8], &1i64.to_le_bytes());
        assert_eq!(&raw[8..], &(-1i64).to_le_bytes());
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
