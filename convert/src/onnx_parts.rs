//! The parts of an ONNX model the graph rewriters (`quantize`, `float16`) read — opsets, nodes,
//! initializers — borrowed from the file's bytes, with each field's own bytes kept so what is not
//! changed is copied as is; and the graph fields they write.

use stemflow_proto::write::put_bytes;
use stemflow_proto::{read_varint, FieldValue, Fields};

use crate::onnx_writer::{encode_node_parts, encode_tensor_head};

/// `TensorProto.DataType` values the quantizer reads or writes.
pub mod data_type {
    /// float32.
    pub const FLOAT: i64 = 1;
    /// uint8.
    pub const UINT8: i64 = 2;
    /// int8.
    pub const INT8: i64 = 3;
    /// int64.
    pub const INT64: i64 = 7;
    /// bool.
    pub const BOOL: i64 = 9;
    /// float16.
    pub const FLOAT16: i64 = 10;
}

/// One field of a message: its number, value and the bytes it was read from.
pub struct RawField<'a> {
    /// The field number.
    pub number: u64,
    /// Its value.
    pub value: FieldValue<'a>,
    /// The field's bytes, key included.
    pub bytes: &'a [u8],
}

/// Every field of `message`, in order.
pub fn raw_fields(message: &[u8]) -> Result<Vec<RawField<'_>>, String> {
    let mut fields = Fields::new(message);
    let mut out = Vec::new();
    while let Some(field) = fields.next_with_bytes() {
        let (number, value, bytes) = field?;
        out.push(RawField {
            number,
            value,
            bytes,
        });
    }
    Ok(out)
}

/// A field's body as UTF-8.
fn text(body: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(body).map_err(|_| "a name is not UTF-8".to_owned())
}

/// A `ValueInfoProto`'s name ("" when it has none).
pub fn value_info_name(body: &[u8]) -> Result<&str, String> {
    for field in Fields::new(body) {
        if let (1, FieldValue::Bytes(name)) = field? {
            return text(name);
        }
    }
    Ok("")
}

/// A `ValueInfoProto`'s tensor element type (`TensorProto.DataType`), if it states one.
pub fn value_info_elem_type(body: &[u8]) -> Result<Option<i64>, String> {
    // ValueInfoProto.type (2) → TypeProto.tensor_type (1) → Tensor.elem_type (1).
    fn nested(body: &[u8], number: u64) -> Result<Option<&[u8]>, String> {
        for field in Fields::new(body) {
            if let (n, FieldValue::Bytes(value)) = field? {
                if n == number {
                    return Ok(Some(value));
                }
            }
        }
        Ok(None)
    }
    let Some(type_proto) = nested(body, 2)? else {
        return Ok(None);
    };
    let Some(tensor_type) = nested(type_proto, 1)? else {
        return Ok(None);
    };
    for field in Fields::new(tensor_type) {
        if let (1, FieldValue::Varint(elem_type)) = field? {
            return Ok(Some(elem_type as i64));
        }
    }
    Ok(None)
}

/// An `AttributeProto`, borrowed: the parts the rewriters read.
#[derive(Debug, Default)]
pub struct AttributeParts<'a> {
    /// Its name.
    pub name: &'a str,
    /// `i`, an integer value.
    pub int: Option<i64>,
    /// `t`, a tensor value (a `TensorProto` body).
    pub tensor: Option<&'a [u8]>,
    /// Whether it holds float values (`f` or `floats`).
    pub has_floats: bool,
    /// Whether it holds integers (`ints`).
    pub has_ints: bool,
    /// Whether it holds strings (`s` or `strings`).
    pub has_strings: bool,
}

impl<'a> AttributeParts<'a> {
    /// Reads an `AttributeProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut attribute = AttributeParts::default();
        for field in Fields::new(body) {
            match field? {
                (1, FieldValue::Bytes(name)) => attribute.name = text(name)?,
                (3, FieldValue::Varint(i)) => attribute.int = Some(i as i64),
                (5, FieldValue::Bytes(tensor)) => attribute.tensor = Some(tensor),
                (2 | 7, _) => attribute.has_floats = true,
                (8, _) => attribute.has_ints = true,
                (4 | 9, _) => attribute.has_strings = true,
                _ => {}
            }
        }
        Ok(attribute)
    }
}

/// A `NodeProto`, borrowed.
#[derive(Debug, Default)]
pub struct NodeParts<'a> {
    /// Tensors it reads ("" for an optional input left out).
    pub inputs: Vec<&'a str>,
    /// Tensors it writes.
    pub outputs: Vec<&'a str>,
    /// Its name.
    pub name: &'a str,
    /// The operator.
    pub op_type: &'a str,
    /// The operator's domain ("" or "ai.onnx" for the default one).
    pub domain: &'a str,
    /// Each attribute's `AttributeProto` body, unchanged.
    pub attributes: Vec<&'a [u8]>,
    /// Whether an attribute holds a subgraph (If, Loop, Scan bodies).
    pub has_subgraph: bool,
}

impl<'a> NodeParts<'a> {
    /// Reads a `NodeProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut node = NodeParts::default();
        for field in Fields::new(body) {
            let (number, FieldValue::Bytes(value)) = field? else {
                continue;
            };
            match number {
                1 => node.inputs.push(text(value)?),
                2 => node.outputs.push(text(value)?),
                3 => node.name = text(value)?,
                4 => node.op_type = text(value)?,
                5 => {
                    node.attributes.push(value);
                    for attribute_field in Fields::new(value) {
                        // `g` (6) and `graphs` (11) hold subgraphs.
                        if matches!(attribute_field?.0, 6 | 11) {
                            node.has_subgraph = true;
                        }
                    }
                }
                7 => node.domain = text(value)?,
                _ => {}
            }
        }
        Ok(node)
    }

    /// Whether the node is `op_type` of the default domain.
    pub fn is(&self, op_type: &str) -> bool {
        self.op_type == op_type && self.is_default_domain()
    }

    /// Whether the node's operator is of the default domain (`""` or `ai.onnx`).
    pub fn is_default_domain(&self) -> bool {
        matches!(self.domain, "" | "ai.onnx")
    }
}

/// A `TensorProto` (an initializer), borrowed.
#[derive(Debug, Default)]
pub struct TensorParts<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its dimensions.
    pub dims: Vec<i64>,
    /// `TensorProto.DataType`.
    pub data_type: i64,
    /// `raw_data`, little-endian.
    raw_data: Option<&'a [u8]>,
    /// `float_data`, packed.
    packed_floats: Option<&'a [u8]>,
    /// Whether the values are stored outside the file or in a form not read here (unpacked
    /// `float_data`).
    is_unreadable: bool,
}

impl<'a> TensorParts<'a> {
    /// Reads a `TensorProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut tensor = TensorParts::default();
        for field in Fields::new(body) {
            match field? {
                (1, FieldValue::Varint(dim)) => tensor.dims.push(dim as i64),
                (1, FieldValue::Bytes(packed)) => {
                    let mut pos = 0;
                    while pos < packed.len() {
                        tensor.dims.push(read_varint(packed, &mut pos)? as i64);
                    }
                }
                (2, FieldValue::Varint(data_type)) => tensor.data_type = data_type as i64,
                (4, FieldValue::Bytes(floats)) => tensor.packed_floats = Some(floats),
                (4, FieldValue::Fixed) => tensor.is_unreadable = true,
                (8, FieldValue::Bytes(name)) => tensor.name = text(name)?,
                (9, FieldValue::Bytes(raw)) => tensor.raw_data = Some(raw),
                (14, FieldValue::Varint(location)) => tensor.is_unreadable |= location == 1,
                _ => {}
            }
        }
        Ok(tensor)
    }

    /// The values of a float32 tensor, or `None` when it is not float32, stores its values
    /// outside the file, or holds fewer or more values than its dimensions say.
    pub fn f32_values(&self) -> Option<Vec<f32>> {
        let bytes = self.f32_bytes()?;
        Some(
            bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        )
    }
}

impl TensorParts<'_> {
    /// Whether [`TensorParts::f32_values`] has values to give.
    pub fn has_f32_values(&self) -> bool {
        self.f32_bytes().is_some()
    }

    fn f32_bytes(&self) -> Option<&[u8]> {
        if self.data_type != data_type::FLOAT || self.is_unreadable {
            return None;
        }
        let bytes = self.raw_data.or(self.packed_floats).unwrap_or_default();
        let num_values = self
            .dims
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?))?;
        (bytes.len() == num_values.checked_mul(4)?).then_some(bytes)
    }
}

/// A name not in `names` (`base`, else `base_1`, `base_2`, …), added to them.
pub fn fresh_name(names: &mut std::collections::HashSet<String>, base: &str) -> String {
    let mut name = base.to_owned();
    let mut n = 1;
    while !names.insert(name.clone()) {
        name = format!("{base}_{n}");
        n += 1;
    }
    name
}

/// The body of a `ModelProto`'s one graph.
pub fn single_graph<'a>(model_fields: &[RawField<'a>]) -> Result<&'a [u8], String> {
    let graph_bodies: Vec<&[u8]> = model_fields
        .iter()
        .filter_map(|f| match (f.number, f.value) {
            (7, FieldValue::Bytes(body)) => Some(body),
            _ => None,
        })
        .collect();
    match graph_bodies.as_slice() {
        [graph_body] => Ok(graph_body),
        _ => Err("not an ONNX model (no single graph)".into()),
    }
}

/// The `ModelProto` of `model_fields` with its graph replaced by `graph` and the metadata
/// property `key` = `value` added.
pub fn model_with_graph(
    model_fields: &[RawField<'_>],
    graph: &[u8],
    key: &str,
    value: &str,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(graph.len() + 4096);
    for field in model_fields {
        if field.number == 7 {
            put_bytes(&mut out, 7, graph);
        } else {
            out.extend_from_slice(field.bytes);
        }
    }
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, key.as_bytes());
    put_bytes(&mut entry, 2, value.as_bytes());
    put_bytes(&mut out, 14, &entry);
    out
}

/// The default domain's operator set version in a `ModelProto`, if it imports one.
pub fn default_opset(model_fields: &[RawField<'_>]) -> Result<Option<i64>, String> {
    for field in model_fields {
        if let (8, FieldValue::Bytes(opset)) = (field.number, field.value) {
            let mut domain = "";
            let mut version = None;
            for entry in Fields::new(opset) {
                match entry? {
                    (1, FieldValue::Bytes(name)) => domain = text(name)?,
                    (2, FieldValue::Varint(v)) => version = Some(v as i64),
                    _ => {}
                }
            }
            if matches!(domain, "" | "ai.onnx") {
                return Ok(version);
            }
        }
    }
    Ok(None)
}

/// The value of metadata property `key` in a `ModelProto`, if set.
pub fn metadata_value<'a>(
    model_fields: &[RawField<'a>],
    key: &str,
) -> Result<Option<&'a str>, String> {
    for field in model_fields {
        if let (14, FieldValue::Bytes(entry)) = (field.number, field.value) {
            let (mut k, mut v) = ("", "");
            for part in Fields::new(entry) {
                match part? {
                    (1, FieldValue::Bytes(b)) => k = text(b)?,
                    (2, FieldValue::Bytes(b)) => v = text(b)?,
                    _ => {}
                }
            }
            if k == key {
                return Ok(Some(v));
            }
        }
    }
    Ok(None)
}

/// Appends a graph `node` field (default domain).
pub fn put_node(
    out: &mut Vec<u8>,
    op_type: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: &[&[u8]],
) {
    let node = encode_node_parts(op_type, name, inputs, outputs, attributes);
    put_bytes(out, 1, &node);
}

/// Appends a graph `initializer` field.
pub fn put_tensor(out: &mut Vec<u8>, name: &str, dims: &[usize], data_type: i64, raw: &[u8]) {
    let mut tensor = encode_tensor_head(name, dims, data_type, raw.len());
    tensor.extend_from_slice(raw);
    put_bytes(out, 5, &tensor);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onnx_writer::{Attribute, Dim, OnnxGraph};

    #[test]
    fn nodes_tensors_opsets_and_metadata_are_read_from_a_written_model() {
        let mut graph = OnnxGraph::new("g");
        graph.add_input("x", vec![Dim::Fixed(1), Dim::Fixed(2)]);
        graph
            .add_initializer_f32("w", &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
            .unwrap();
        graph.add_node(
            "Gemm",
            "gemm",
            &["x", "w"],
            &["y"],
            vec![("alpha", Attribute::Float(0.5))],
        );
        graph.add_output("y", vec![Dim::Fixed(1), Dim::Fixed(3)]);
        graph.set_metadata("k", "v");
        let bytes = graph.to_model_bytes();

        let model = raw_fields(&bytes).unwrap();
        assert_eq!(default_opset(&model).unwrap(), Some(17));
        assert_eq!(metadata_value(&model, "k").unwrap(), Some("v"));
        assert_eq!(metadata_value(&model, "other").unwrap(), None);
        let copied: Vec<u8> = model.iter().flat_map(|f| f.bytes.to_vec()).collect();
        assert_eq!(copied, bytes, "the raw fields are the whole message");

        let FieldValue::Bytes(graph_body) = model.iter().find(|f| f.number == 7).unwrap().value
        else {
            panic!("no graph")
        };
        let graph_fields = raw_fields(graph_body).unwrap();
        let node = graph_fields.iter().find(|f| f.number == 1).unwrap();
        let FieldValue::Bytes(node_body) = node.value else {
            panic!()
        };
        let node = NodeParts::read(node_body).unwrap();
        assert!(node.is("Gemm") && !node.is("MatMul"));
        assert_eq!((node.inputs, node.outputs), (vec!["x", "w"], vec!["y"]));
        assert_eq!((node.name, node.attributes.len()), ("gemm", 1));
        assert!(!node.has_subgraph);

        let tensor = graph_fields.iter().find(|f| f.number == 5).unwrap();
        let FieldValue::Bytes(tensor_body) = tensor.value else {
            panic!()
        };
        let tensor = TensorParts::read(tensor_body).unwrap();
        assert_eq!((tensor.name, tensor.dims.as_slice()), ("w", &[2, 3][..]));
        assert_eq!(
            tensor.f32_values(),
            Some(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        );
    }

    #[test]
    fn tensors_stored_elsewhere_or_short_have_no_values() {
        // dims [2], FLOAT, external (data_location = 1).
        let external = [0x08, 2, 0x10, 1, 0x70, 1];
        assert_eq!(TensorParts::read(&external).unwrap().f32_values(), None);
        // dims [2], FLOAT, raw_data of one float.
        let short = [0x08, 2, 0x10, 1, 0x4a, 4, 0, 0, 128, 63];
        assert_eq!(TensorParts::read(&short).unwrap().f32_values(), None);
        // dims [1], FLOAT, packed float_data 1.0.
        let packed = [0x08, 1, 0x10, 1, 0x22, 4, 0, 0, 128, 63];
        assert_eq!(
            TensorParts::read(&packed).unwrap().f32_values(),
            Some(vec![1.0])
        );
    }
}
