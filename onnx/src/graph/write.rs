//! Writing an [`OnnxGraph`] as a `ModelProto`: the small parts encoded once, the initializers'
//! values streamed in chunks.

use std::collections::BTreeSet;
use std::io::Write;

use super::{
    Initializer, InitializerData, Node, OnnxGraph, IR_VERSION, OPSET_VERSION, PRODUCER_NAME,
    PRODUCER_VERSION, STREAM_CHUNK_VALUES,
};
use crate::encode::{
    encode_attribute, encode_node, encode_string_entry, encode_tensor_head, encode_value_info,
};
use crate::field::{graph as graph_field, model as model_field, opset_id};
use crate::wire::{key_len, put_bytes, put_int64, put_key, put_varint, varint_len, WIRE_LEN};

impl OnnxGraph<'_> {
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
pub(super) struct ModelParts {
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
    pub(super) fn new(graph: &OnnxGraph<'_>, producer_version: &str) -> Self {
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
        let domains: BTreeSet<&str> = graph
            .nodes
            .iter()
            .map(|n| n.domain.as_str())
            .filter(|d| !d.is_empty())
            .collect();
        for domain in domains {
            let mut opset = Vec::new();
            put_bytes(&mut opset, opset_id::DOMAIN, domain.as_bytes());
            put_int64(&mut opset, opset_id::VERSION, 1);
            put_bytes(&mut model_tail, model_field::OPSET_IMPORT, &opset);
        }
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

    pub(super) fn model_len_bytes(&self) -> usize {
        self.model_head.len()
            + key_len(model_field::GRAPH)
            + varint_len(self.graph_len_bytes as u64)
            + self.graph_len_bytes
            + self.model_tail.len()
    }

    pub(super) fn write(
        &self,
        graph: &OnnxGraph<'_>,
        writer: &mut impl Write,
    ) -> std::io::Result<()> {
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
                    write_le(writer, &mut chunk, values, f32::to_le_bytes)?
                }
                InitializerData::F16(values) => {
                    write_le(writer, &mut chunk, values, u16::to_le_bytes)?
                }
                InitializerData::I64(values) => {
                    write_le(writer, &mut chunk, values, i64::to_le_bytes)?
                }
            }
        }
        writer.write_all(&self.graph_tail)?;
        writer.write_all(&self.model_tail)
    }
}

/// Writes `values` little-endian through `chunk`, [`STREAM_CHUNK_VALUES`] at a time.
fn write_le<V: Copy, const N: usize>(
    writer: &mut impl Write,
    chunk: &mut Vec<u8>,
    values: &[V],
    to_le: impl Fn(V) -> [u8; N],
) -> std::io::Result<()> {
    for part in values.chunks(STREAM_CHUNK_VALUES) {
        chunk.clear();
        part.iter()
            .for_each(|&v| chunk.extend_from_slice(&to_le(v)));
        writer.write_all(chunk)?;
    }
    Ok(())
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
        &node.domain,
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
    use crate::encode::Attribute;
    use crate::field::data_type;
    use crate::graph::tests::tiny_add_graph;
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
    fn other_domains_are_imported_and_float16_values_kept_as_bits() {
        let mut graph = tiny_add_graph();
        let half_one = 0x3c00u16;
        graph
            .add_initializer_f16("h", &[2], vec![half_one, 0xc000])
            .unwrap();
        graph.add_node_in("com.microsoft", "Gelu", "gelu", &["y"], &["g"], Vec::new());
        let bytes = graph.to_model_bytes();
        assert_eq!(bytes.len(), graph.model_len_bytes());
        let model = fields(&bytes);
        let opsets: Vec<Vec<Field<'_>>> = bytes_of(&model, 8).into_iter().map(fields).collect();
        assert_eq!(
            opsets,
            [
                vec![Field::Bytes(1, b""), Field::Varint(2, 17)],
                vec![Field::Bytes(1, b"com.microsoft"), Field::Varint(2, 1)],
            ]
        );
        let graph_fields = fields(bytes_of(&model, 7)[0]);
        let gelu = fields(bytes_of(&graph_fields, 1)[1]);
        assert_eq!(bytes_of(&gelu, 4), [b"Gelu".as_slice()]);
        assert_eq!(bytes_of(&gelu, 7), [b"com.microsoft".as_slice()]);
        let tensor = fields(bytes_of(&graph_fields, 5)[1]);
        assert_eq!(varints_of(&tensor, 2), [data_type::FLOAT16 as u64]);
        assert_eq!(bytes_of(&tensor, 9), [[0x00, 0x3c, 0x00, 0xc0].as_slice()]);
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
}
