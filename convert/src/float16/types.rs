//! The element type each node writes, inferred from what it reads, for the default domain's
//! operators: enough to tell float tensors (which the conversion moves to float16) from
//! integers, booleans and shapes (which it leaves alone). No value_info is needed.

use stemflow_onnx::field::data_type;
use stemflow_onnx::{AttributeView, NodeView, TensorView};

/// The element type of `node`'s output number `output`, given its inputs' types
/// (`None` where unknown).
pub fn output_type(
    node: &NodeView<'_>,
    output: usize,
    input_types: &[Option<i64>],
) -> Result<Option<i64>, String> {
    let attribute = |name: &str| -> Result<Option<AttributeView<'_>>, String> {
        for body in &node.attributes {
            let attribute = AttributeView::read(body)?;
            if attribute.name == name {
                return Ok(Some(attribute));
            }
        }
        Ok(None)
    };
    let tensor_type = |body: &[u8]| TensorView::read(body).map(|t| Some(t.data_type));
    let first_known = || input_types.iter().flatten().next().copied();
    let input = |i: usize| input_types.get(i).copied().flatten();
    if !node.is_default_domain() {
        // Another domain's operator: its types are not known here.
        return Ok(first_known());
    }
    Ok(match (node.op_type, output) {
        ("Cast", _) => attribute("to")?.and_then(|a| a.int),
        ("CastLike", _) => input(1),
        ("Shape" | "Size" | "NonZero" | "ArgMax" | "ArgMin" | "NonMaxSuppression", _)
        | ("TopK" | "MaxPool", 1)
        | ("Unique", 1..) => Some(data_type::INT64),
        (
            "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" | "And" | "Or" | "Xor"
            | "Not" | "IsNaN" | "IsInf",
            _,
        )
        | ("Dropout", 1) => Some(data_type::BOOL),
        ("ConstantOfShape", _) => match attribute("value")?.and_then(|a| a.tensor) {
            Some(tensor) => tensor_type(tensor)?,
            None => Some(data_type::FLOAT),
        },
        ("Constant", _) => constant_type(node)?,
        ("Where", _) => input(1).or(input(2)),
        ("DequantizeLinear", _) => Some(data_type::FLOAT),
        ("QuantizeLinear" | "DynamicQuantizeLinear", 0) => Some(data_type::UINT8),
        ("DynamicQuantizeLinear", 1) => Some(data_type::FLOAT),
        ("DynamicQuantizeLinear", 2) => Some(data_type::UINT8),
        ("MatMulInteger" | "ConvInteger", _) => Some(6),
        (
            "EyeLike" | "RandomNormal" | "RandomUniform" | "RandomNormalLike" | "RandomUniformLike",
            _,
        ) => match attribute("dtype")?.and_then(|a| a.int) {
            Some(dtype) => Some(dtype),
            None if node.op_type.ends_with("Like") || node.op_type == "EyeLike" => input(0),
            None => Some(data_type::FLOAT),
        },
        _ => input(0).or_else(first_known),
    })
}

/// The element type of a `Constant` node's value.
fn constant_type(node: &NodeView<'_>) -> Result<Option<i64>, String> {
    for body in &node.attributes {
        let attribute = AttributeView::read(body)?;
        let value_type = match attribute.name {
            "value" => match attribute.tensor {
                Some(tensor) => Some(TensorView::read(tensor)?.data_type),
                None => None,
            },
            "value_float" | "value_floats" => Some(data_type::FLOAT),
            "value_int" | "value_ints" => Some(data_type::INT64),
            "value_string" | "value_strings" => Some(8),
            _ => None,
        };
        if value_type.is_some() {
            return Ok(value_type);
        }
    }
    Ok(None)
}
