//! Encoding ONNX messages from their parts: nodes, attributes, tensors, value infos and
//! metadata entries, each field where `onnx.proto` numbers it and in field-number order, as the
//! reference serializer writes them.

use crate::field::{
    attribute, attribute_type, data_type, dimension, graph, node, shape, string_entry, tensor,
    tensor_type, type_proto, value_info,
};
use crate::wire::{put_bytes, put_float, put_int64, put_key, put_varint, WIRE_LEN};

/// A node attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    /// One 64-bit integer (`INT`).
    Int(i64),
    /// A list of 64-bit integers (`INTS`), such as `pads` or `kernel_shape`.
    Ints(Vec<i64>),
    /// One float (`FLOAT`), such as `epsilon` or `alpha`.
    Float(f32),
    /// A list of floats (`FLOATS`).
    Floats(Vec<f32>),
    /// A UTF-8 string (`STRING`), such as `auto_pad`.
    String(String),
}

/// One dimension of a graph input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dim {
    /// A fixed size (`dim_value`).
    Fixed(usize),
    /// A size named by a symbol and chosen at run time (`dim_param`), such as `"batch"`.
    Symbolic(String),
}

/// A `NodeProto` from its parts, each attribute an encoded `AttributeProto` (as
/// [`encode_attribute`] writes one, or copied from another model); `domain` "" is the default
/// one and is not written.
pub fn encode_node(
    op_type: &str,
    domain: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: &[&[u8]],
) -> Vec<u8> {
    let mut out = Vec::new();
    for input in inputs {
        put_bytes(&mut out, node::INPUT, input.as_bytes());
    }
    for output in outputs {
        put_bytes(&mut out, node::OUTPUT, output.as_bytes());
    }
    put_bytes(&mut out, node::NAME, name.as_bytes());
    put_bytes(&mut out, node::OP_TYPE, op_type.as_bytes());
    for attribute in attributes {
        put_bytes(&mut out, node::ATTRIBUTE, attribute);
    }
    if !domain.is_empty() {
        put_bytes(&mut out, node::DOMAIN, domain.as_bytes());
    }
    out
}

/// An `AttributeProto` named `name` holding `value`.
pub fn encode_attribute(name: &str, value: &Attribute) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, attribute::NAME, name.as_bytes());
    let value_type = match value {
        Attribute::Float(f) => {
            put_float(&mut out, attribute::F, *f);
            attribute_type::FLOAT
        }
        Attribute::Int(i) => {
            put_int64(&mut out, attribute::I, *i);
            attribute_type::INT
        }
        Attribute::String(s) => {
            put_bytes(&mut out, attribute::S, s.as_bytes());
            attribute_type::STRING
        }
        Attribute::Floats(fs) => {
            // proto2 `repeated float` without `packed`: one key per value.
            for f in fs {
                put_float(&mut out, attribute::FLOATS, *f);
            }
            attribute_type::FLOATS
        }
        Attribute::Ints(is) => {
            for i in is {
                put_int64(&mut out, attribute::INTS, *i);
            }
            attribute_type::INTS
        }
    };
    put_int64(&mut out, attribute::TYPE, value_type);
    out
}

/// An `AttributeProto` named `name` holding a tensor (`tensor_body`, an encoded `TensorProto`).
pub fn encode_tensor_attribute(name: &str, tensor_body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, attribute::NAME, name.as_bytes());
    put_bytes(&mut out, attribute::T, tensor_body);
    put_int64(&mut out, attribute::TYPE, attribute_type::TENSOR);
    out
}

/// A `TensorProto`'s fields up to and including the `raw_data` key and length (`raw_len_bytes`
/// bytes of little-endian values follow).
pub fn encode_tensor_head(
    name: &str,
    dims: &[usize],
    data_type: i64,
    raw_len_bytes: usize,
) -> Vec<u8> {
    let mut out = Vec::new();
    for &dim in dims {
        put_int64(&mut out, tensor::DIMS, dim as i64);
    }
    put_int64(&mut out, tensor::DATA_TYPE, data_type);
    put_bytes(&mut out, tensor::NAME, name.as_bytes());
    put_key(&mut out, tensor::RAW_DATA, WIRE_LEN);
    put_varint(&mut out, raw_len_bytes as u64);
    out
}

/// A whole `TensorProto` with its values in `raw_data`.
pub fn encode_tensor(name: &str, dims: &[usize], data_type: i64, raw: &[u8]) -> Vec<u8> {
    let mut tensor = encode_tensor_head(name, dims, data_type, raw.len());
    tensor.extend_from_slice(raw);
    tensor
}

/// A float32 `ValueInfoProto` of the given dimensions.
pub fn encode_value_info(name: &str, dims: &[Dim]) -> Vec<u8> {
    let mut shape_body = Vec::new();
    for dim in dims {
        let mut dimension_body = Vec::new();
        match dim {
            Dim::Fixed(size) => put_int64(&mut dimension_body, dimension::DIM_VALUE, *size as i64),
            Dim::Symbolic(symbol) => {
                put_bytes(&mut dimension_body, dimension::DIM_PARAM, symbol.as_bytes())
            }
        }
        put_bytes(&mut shape_body, shape::DIM, &dimension_body);
    }
    let mut tensor_type_body = Vec::new();
    put_int64(
        &mut tensor_type_body,
        tensor_type::ELEM_TYPE,
        data_type::FLOAT,
    );
    put_bytes(&mut tensor_type_body, tensor_type::SHAPE, &shape_body);
    let mut type_body = Vec::new();
    put_bytes(&mut type_body, type_proto::TENSOR_TYPE, &tensor_type_body);
    let mut out = Vec::new();
    put_bytes(&mut out, value_info::NAME, name.as_bytes());
    put_bytes(&mut out, value_info::TYPE, &type_body);
    out
}

/// A `ValueInfoProto` that names a value and says nothing of its type (what a graph output
/// needs when ONNX Runtime infers the rest).
pub fn encode_value_name(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, value_info::NAME, name.as_bytes());
    out
}

/// A `StringStringEntryProto` (a metadata property).
pub fn encode_string_entry(key: &str, value: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, string_entry::KEY, key.as_bytes());
    put_bytes(&mut out, string_entry::VALUE, value.as_bytes());
    out
}

/// Appends a graph `node` field of the default domain.
pub fn put_node(
    graph_body: &mut Vec<u8>,
    op_type: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attributes: &[&[u8]],
) {
    let node_body = encode_node(op_type, "", name, inputs, outputs, attributes);
    put_bytes(graph_body, graph::NODE, &node_body);
}

/// Appends a graph `initializer` field.
pub fn put_initializer(
    graph_body: &mut Vec<u8>,
    name: &str,
    dims: &[usize],
    data_type: i64,
    raw: &[u8],
) {
    put_bytes(
        graph_body,
        graph::INITIALIZER,
        &encode_tensor(name, dims, data_type, raw),
    );
}
