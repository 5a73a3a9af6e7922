//! The element type of every value of a graph: declared where the file declares it (inputs,
//! initializers, `value_info`), else inferred node by node from the operator's attributes and
//! from how ONNX Runtime's kernel registrations bind outputs to inputs.

use std::collections::HashMap;

use super::provider::Provider;
use super::table::{Bound, KernelTable, Registration};
use crate::field::data_type;
use crate::view::{AttributeView, NodeView, TensorView};

/// `TensorProto.DataType` of `string`.
const STRING: i64 = 8;

/// The element types known so far, by value name.
#[derive(Debug, Default)]
pub(crate) struct ValueTypes<'a> {
    types: HashMap<&'a str, i64>,
}

impl<'a> ValueTypes<'a> {
    /// Records a declared type (a graph input, an initializer, a `value_info`).
    pub fn declare(&mut self, name: &'a str, code: i64) {
        if !name.is_empty() && code != 0 {
            self.types.insert(name, code);
        }
    }

    /// The type of `name`, if known.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.types.get(name).copied()
    }

    /// How many values have a known type, by type.
    pub fn counts(&self) -> HashMap<i64, usize> {
        let mut counts = HashMap::new();
        for code in self.types.values() {
            *counts.entry(*code).or_insert(0) += 1;
        }
        counts
    }

    /// Infers the types of `node`'s outputs (where not declared) from its inputs' types.
    pub fn infer(&mut self, node: &NodeView<'a>, table: &KernelTable, domain: &str, version: i64) {
        let inputs: Vec<Option<i64>> = node.inputs.iter().map(|n| self.get(n)).collect();
        let inferred = output_types(node, &inputs, table, domain, version);
        for (output, code) in node.outputs.iter().zip(inferred) {
            if let (Some(code), None) = (code, self.get(output)) {
                self.declare(output, code);
            }
        }
    }
}

/// The registration a node of `version` binds its values by: the CPU's, else any provider's.
pub(crate) fn binding_registration<'t>(
    table: &'t KernelTable,
    domain: &str,
    op: &str,
    version: i64,
) -> Option<&'t Registration> {
    [Provider::Cpu, Provider::Cuda, Provider::DirectMl]
        .into_iter()
        .flat_map(|p| table.registrations(p, domain, op))
        .find(|r| r.covers(version))
}

/// The output types of `node` given its input types (`None`: unknown).
fn output_types(
    node: &NodeView<'_>,
    inputs: &[Option<i64>],
    table: &KernelTable,
    domain: &str,
    version: i64,
) -> Vec<Option<i64>> {
    let attributes: Vec<AttributeView<'_>> = node
        .attributes
        .iter()
        .filter_map(|body| AttributeView::read(body).ok())
        .collect();
    let attr = |name: &str| attributes.iter().find(|a| a.name == name);
    let attr_int = |name: &str| attr(name).and_then(|a| a.int);
    let input = |i: usize| inputs.get(i).copied().flatten();
    let n = node.outputs.len();
    if domain == "ai.onnx" {
        let special = match node.op_type {
            "Cast" => Some(vec![attr_int("to")]),
            "CastLike" => Some(vec![input(1)]),
            "Constant" => Some(vec![attributes.first().and_then(constant_type)]),
            "ConstantOfShape" => Some(vec![Some(
                attr("value")
                    .and_then(|a| a.tensor)
                    .and_then(|t| TensorView::read(t).ok())
                    .map_or(data_type::FLOAT, |t| t.data_type),
            )]),
            "RandomNormal" | "RandomUniform" => {
                Some(vec![Some(attr_int("dtype").unwrap_or(data_type::FLOAT))])
            }
            "EyeLike" | "RandomNormalLike" | "RandomUniformLike" | "Bernoulli" => {
                Some(vec![attr_int("dtype").or(input(0))])
            }
            "QuantizeLinear" => Some(vec![input(2)
                .or(attr_int("output_dtype"))
                .or(Some(data_type::UINT8))]),
            "DequantizeLinear" => Some(vec![input(1)]),
            _ => None,
        };
        if let Some(types) = special {
            return types;
        }
    }
    let Some(registration) = binding_registration(table, domain, node.op_type, version) else {
        // An operator ONNX Runtime does not know: assume the first input's type.
        return vec![input(0); n];
    };
    (0..n)
        .map(|i| {
            let (_, bound) = registration.output(i)?;
            match bound {
                Bound::Literal(code) => *code,
                Bound::Constraint(name) => node
                    .inputs
                    .iter()
                    .enumerate()
                    .find_map(|(j, _)| match registration.input(j) {
                        Some((_, Bound::Constraint(c))) if c == name => input(j),
                        _ => None,
                    })
                    .or_else(|| registration.constraints.get(name)?.single()),
            }
        })
        .collect()
}

/// The type of a `Constant` node's value attribute.
fn constant_type(attribute: &AttributeView<'_>) -> Option<i64> {
    match attribute.name {
        "value" => attribute
            .tensor
            .and_then(|t| TensorView::read(t).ok())
            .map(|t| t.data_type),
        "value_float" | "value_floats" => Some(data_type::FLOAT),
        "value_int" | "value_ints" => Some(data_type::INT64),
        "value_string" | "value_strings" => Some(STRING),
        _ => None,
    }
}
