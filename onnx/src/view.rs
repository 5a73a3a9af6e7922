//! Borrowed views of ONNX messages — nodes, attributes, tensors, value infos — read from a
//! file's bytes without copying them, and every field of a message with its own bytes kept, so
//! a rewriter copies what it does not change as it was.

use crate::field::{
    attribute, data_type, dimension, graph, node, shape, tensor, tensor_type, type_proto,
    value_info, DATA_LOCATION_EXTERNAL,
};
use crate::wire::{read_varint, FieldValue, Fields};

/// One field of a message: its number, value and the bytes it was read from.
#[derive(Debug, Clone, Copy)]
pub struct RawField<'a> {
    /// The field number.
    pub number: u32,
    /// Its value.
    pub value: FieldValue<'a>,
    /// The field's bytes, key included.
    pub bytes: &'a [u8],
}

impl<'a> RawField<'a> {
    /// The body of a length-delimited field (a string, bytes or a message), else `None`.
    pub fn body(&self) -> Option<&'a [u8]> {
        match self.value {
            FieldValue::Bytes(body) => Some(body),
            _ => None,
        }
    }
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
pub(crate) fn text(body: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(body).map_err(|_| "a name is not UTF-8".to_owned())
}

/// The body of the first length-delimited field `number` of `message`.
fn first_body(message: &[u8], number: u32) -> Result<Option<&[u8]>, String> {
    for field in Fields::new(message) {
        if let (n, FieldValue::Bytes(body)) = field? {
            if n == number {
                return Ok(Some(body));
            }
        }
    }
    Ok(None)
}

/// What one graph field holds: the part of a `GraphProto` the readers tell apart.
#[derive(Debug)]
pub enum GraphPart<'a> {
    /// A `node`.
    Node(NodeView<'a>),
    /// An `initializer`.
    Initializer(TensorView<'a>),
    /// A graph `input`.
    Input(ValueInfoView<'a>),
    /// A graph `output`.
    Output(ValueInfoView<'a>),
    /// A `sparse_initializer` (its values' name).
    SparseInitializer(&'a str),
    /// Anything else (the name, `value_info`, doc strings…).
    Other,
}

impl<'a> GraphPart<'a> {
    /// Reads one field of a `GraphProto`.
    pub fn read(field: &RawField<'a>) -> Result<Self, String> {
        let Some(body) = field.body() else {
            return Ok(GraphPart::Other);
        };
        Ok(match field.number {
            graph::NODE => GraphPart::Node(NodeView::read(body)?),
            graph::INITIALIZER => GraphPart::Initializer(TensorView::read(body)?),
            graph::INPUT => GraphPart::Input(ValueInfoView::read(body)?),
            graph::OUTPUT => GraphPart::Output(ValueInfoView::read(body)?),
            graph::SPARSE_INITIALIZER => {
                let values = first_body(body, crate::field::sparse_tensor::VALUES)?;
                let name = match values {
                    Some(values) => TensorView::read(values)?.name,
                    None => "",
                };
                GraphPart::SparseInitializer(name)
            }
            _ => GraphPart::Other,
        })
    }
}

/// One dimension of a value's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DimView<'a> {
    /// A fixed size (`dim_value`).
    Fixed(i64),
    /// A size named by a symbol (`dim_param`).
    Symbolic(&'a str),
    /// Neither (an unknown size).
    Unknown,
}

/// A `ValueInfoProto` (a graph input, output or intermediate value), borrowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueInfoView<'a> {
    /// Its name ("" when it has none).
    pub name: &'a str,
    /// Its tensor element type (`TensorProto.DataType`), if it states one.
    pub elem_type: Option<i64>,
    /// Its dimensions, when it states a shape.
    pub dims: Vec<DimView<'a>>,
}

impl<'a> ValueInfoView<'a> {
    /// Reads a `ValueInfoProto`: `name` and `type` → `tensor_type` → `elem_type` and `shape`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut info = ValueInfoView::default();
        for field in Fields::new(body) {
            match field? {
                (value_info::NAME, FieldValue::Bytes(name)) => info.name = text(name)?,
                (value_info::TYPE, FieldValue::Bytes(type_body)) => {
                    let Some(tensor_body) = first_body(type_body, type_proto::TENSOR_TYPE)? else {
                        continue;
                    };
                    for field in Fields::new(tensor_body) {
                        match field? {
                            (tensor_type::ELEM_TYPE, FieldValue::Varint(elem_type)) => {
                                info.elem_type = Some(elem_type as i64)
                            }
                            (tensor_type::SHAPE, FieldValue::Bytes(shape_body)) => {
                                for field in Fields::new(shape_body) {
                                    if let (shape::DIM, FieldValue::Bytes(dim)) = field? {
                                        info.dims.push(read_dimension(dim)?);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(info)
    }
}

/// A `TensorShapeProto.Dimension`.
fn read_dimension(body: &[u8]) -> Result<DimView<'_>, String> {
    let mut dim = DimView::Unknown;
    for field in Fields::new(body) {
        match field? {
            (dimension::DIM_VALUE, FieldValue::Varint(value)) => dim = DimView::Fixed(value as i64),
            (dimension::DIM_PARAM, FieldValue::Bytes(symbol)) => {
                dim = DimView::Symbolic(text(symbol)?)
            }
            _ => {}
        }
    }
    Ok(dim)
}

/// An `AttributeProto`, borrowed: the parts the rewriters read.
#[derive(Debug, Default)]
pub struct AttributeView<'a> {
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
    /// Whether it holds a subgraph (`g` or `graphs`: If, Loop, Scan bodies).
    pub has_subgraph: bool,
}

impl<'a> AttributeView<'a> {
    /// Reads an `AttributeProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut view = AttributeView::default();
        for field in Fields::new(body) {
            match field? {
                (attribute::NAME, FieldValue::Bytes(name)) => view.name = text(name)?,
                (attribute::I, FieldValue::Varint(i)) => view.int = Some(i as i64),
                (attribute::T, FieldValue::Bytes(tensor)) => view.tensor = Some(tensor),
                (attribute::F | attribute::FLOATS, _) => view.has_floats = true,
                (attribute::INTS, _) => view.has_ints = true,
                (attribute::S | attribute::STRINGS, _) => view.has_strings = true,
                (attribute::G | attribute::GRAPHS, _) => view.has_subgraph = true,
                _ => {}
            }
        }
        Ok(view)
    }
}

/// A `NodeProto`, borrowed.
#[derive(Debug, Default)]
pub struct NodeView<'a> {
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

impl<'a> NodeView<'a> {
    /// Reads a `NodeProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut view = NodeView::default();
        for field in Fields::new(body) {
            let (number, FieldValue::Bytes(value)) = field? else {
                continue;
            };
            match number {
                node::INPUT => view.inputs.push(text(value)?),
                node::OUTPUT => view.outputs.push(text(value)?),
                node::NAME => view.name = text(value)?,
                node::OP_TYPE => view.op_type = text(value)?,
                node::ATTRIBUTE => {
                    view.attributes.push(value);
                    view.has_subgraph |= AttributeView::read(value)?.has_subgraph;
                }
                node::DOMAIN => view.domain = text(value)?,
                _ => {}
            }
        }
        Ok(view)
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

/// A `TensorProto` (an initializer or a tensor attribute), borrowed.
#[derive(Debug, Default)]
pub struct TensorView<'a> {
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
    /// Whether the values are stored outside the file (`data_location` EXTERNAL).
    pub is_external: bool,
    /// Whether the values are stored in a form not read here (unpacked `float_data`).
    is_unreadable: bool,
}

impl<'a> TensorView<'a> {
    /// Reads a `TensorProto`.
    pub fn read(body: &'a [u8]) -> Result<Self, String> {
        let mut view = TensorView::default();
        for field in Fields::new(body) {
            match field? {
                (tensor::DIMS, FieldValue::Varint(dim)) => view.dims.push(dim as i64),
                (tensor::DIMS, FieldValue::Bytes(packed)) => {
                    let mut pos = 0;
                    while pos < packed.len() {
                        view.dims.push(read_varint(packed, &mut pos)? as i64);
                    }
                }
                (tensor::DATA_TYPE, FieldValue::Varint(data_type)) => {
                    view.data_type = data_type as i64
                }
                (tensor::FLOAT_DATA, FieldValue::Bytes(floats)) => {
                    view.packed_floats = Some(floats)
                }
                (tensor::FLOAT_DATA, FieldValue::Fixed) => view.is_unreadable = true,
                (tensor::NAME, FieldValue::Bytes(name)) => view.name = text(name)?,
                (tensor::RAW_DATA, FieldValue::Bytes(raw)) => view.raw_data = Some(raw),
                (tensor::DATA_LOCATION, FieldValue::Varint(location)) => {
                    view.is_external = location == DATA_LOCATION_EXTERNAL
                }
                _ => {}
            }
        }
        Ok(view)
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

    /// Whether [`TensorView::f32_values`] has values to give.
    pub fn has_f32_values(&self) -> bool {
        self.f32_bytes().is_some()
    }

    fn f32_bytes(&self) -> Option<&'a [u8]> {
        if self.data_type != data_type::FLOAT || self.is_external || self.is_unreadable {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensors_stored_elsewhere_or_short_have_no_values() {
        // dims [2], FLOAT, external (data_location = 1).
        let external = [0x08, 2, 0x10, 1, 0x70, 1];
        let view = TensorView::read(&external).unwrap();
        assert!(view.is_external);
        assert_eq!(view.f32_values(), None);
        // dims [2], FLOAT, raw_data of one float.
        let short = [0x08, 2, 0x10, 1, 0x4a, 4, 0, 0, 128, 63];
        assert_eq!(TensorView::read(&short).unwrap().f32_values(), None);
        // dims [1], FLOAT, packed float_data 1.0.
        let packed = [0x08, 1, 0x10, 1, 0x22, 4, 0, 0, 128, 63];
        assert_eq!(
            TensorView::read(&packed).unwrap().f32_values(),
            Some(vec![1.0])
        );
    }

    #[test]
    fn value_infos_read_fixed_symbolic_and_unknown_dimensions() {
        // name "x", type { tensor_type { elem_type 1, shape { dim {2}, dim {"b"}, dim {} } } }.
        let shape = [0x0a, 2, 0x08, 2, 0x0a, 3, 0x12, 1, b'b', 0x0a, 0];
        let mut tensor_type_body = vec![0x08, 1, 0x12, shape.len() as u8];
        tensor_type_body.extend_from_slice(&shape);
        let mut type_body = vec![0x0a, tensor_type_body.len() as u8];
        type_body.extend_from_slice(&tensor_type_body);
        let mut info = vec![0x0a, 1, b'x', 0x12, type_body.len() as u8];
        info.extend_from_slice(&type_body);
        let view = ValueInfoView::read(&info).unwrap();
        assert_eq!(view.name, "x");
        assert_eq!(view.elem_type, Some(data_type::FLOAT));
        assert_eq!(
            view.dims,
            [DimView::Fixed(2), DimView::Symbolic("b"), DimView::Unknown]
        );
        assert!(ValueInfoView::read(&info[..info.len() - 2]).is_err());
    }

    #[test]
    fn fresh_names_never_repeat() {
        let mut names = std::collections::HashSet::from(["w".to_owned(), "w_1".to_owned()]);
        assert_eq!(fresh_name(&mut names, "w"), "w_2");
        assert_eq!(fresh_name(&mut names, "v"), "v");
        assert_eq!(fresh_name(&mut names, "v"), "v_1");
    }
}
