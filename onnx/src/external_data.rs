//! The external-data references of an ONNX file, found before ONNX Runtime sees it: every
//! graph, node, attribute and tensor, subgraphs included, walked without building anything.

use crate::field::DATA_LOCATION_EXTERNAL;
use crate::field::{attribute, graph, model, node, sparse_tensor, string_entry, tensor};
use crate::wire::{FieldValue, Fields};

/// Nesting deeper than this is refused (a hostile file could otherwise exhaust the stack).
const MAX_DEPTH: usize = 64;

/// What kind of message a byte range holds.
#[derive(Clone, Copy)]
enum Message {
    Model,
    Graph,
    Node,
    Attribute,
    Tensor,
    SparseTensor,
    StringEntry,
}

/// Every `location` of a tensor stored outside the file. An error when the bytes are not a
/// well-formed protobuf message.
pub fn external_data_locations(bytes: &[u8]) -> Result<Vec<String>, String> {
    if bytes.is_empty() {
        return Err("empty file".into());
    }
    let mut locations = Vec::new();
    walk(bytes, Message::Model, 0, &mut locations)?;
    Ok(locations)
}

/// Walks a message; returns (for tensors) whether it is external and its location.
fn walk(
    bytes: &[u8],
    message: Message,
    depth: usize,
    locations: &mut Vec<String>,
) -> Result<(bool, Option<String>), String> {
    if depth > MAX_DEPTH {
        return Err("nested too deeply".into());
    }
    let mut is_external = false;
    let mut location = None;
    let mut entry_key = None;
    let mut entry_value = None;
    for field in Fields::new(bytes) {
        let (field, body) = match field? {
            (tensor::DATA_LOCATION, FieldValue::Varint(value)) => {
                if let Message::Tensor = message {
                    is_external = value == DATA_LOCATION_EXTERNAL;
                }
                continue;
            }
            (field, FieldValue::Bytes(body)) => (field, body),
            _ => continue,
        };
        let child = match (message, field) {
            (Message::Model, model::GRAPH) => Some(Message::Graph),
            (Message::Graph, graph::NODE) => Some(Message::Node),
            (Message::Graph, graph::INITIALIZER) => Some(Message::Tensor),
            (Message::Graph, graph::SPARSE_INITIALIZER) => Some(Message::SparseTensor),
            (Message::Node, node::ATTRIBUTE) => Some(Message::Attribute),
            (Message::Attribute, attribute::T | attribute::TENSORS) => Some(Message::Tensor),
            (Message::Attribute, attribute::G | attribute::GRAPHS) => Some(Message::Graph),
            (Message::Attribute, attribute::SPARSE_TENSOR | attribute::SPARSE_TENSORS) => {
                Some(Message::SparseTensor)
            }
            (Message::SparseTensor, sparse_tensor::VALUES | sparse_tensor::INDICES) => {
                Some(Message::Tensor)
            }
            (Message::Tensor, tensor::EXTERNAL_DATA) => Some(Message::StringEntry),
            (Message::StringEntry, string_entry::KEY) => {
                entry_key = Some(String::from_utf8_lossy(body).into_owned());
                None
            }
            (Message::StringEntry, string_entry::VALUE) => {
                entry_value = Some(String::from_utf8_lossy(body).into_owned());
                None
            }
            _ => None,
        };
        match child {
            Some(Message::StringEntry) => {
                let (_, entry) = walk(body, Message::StringEntry, depth + 1, locations)?;
                if let Some(value) = entry {
                    location = Some(value);
                }
            }
            Some(Message::Tensor) => {
                let (external, tensor_location) =
                    walk(body, Message::Tensor, depth + 1, locations)?;
                if external || tensor_location.is_some() {
                    locations.push(tensor_location.unwrap_or_else(|| "(no location)".into()));
                }
            }
            Some(child) => {
                walk(body, child, depth + 1, locations)?;
            }
            None => {}
        }
    }
    if let Message::StringEntry = message {
        let location = (entry_key.as_deref() == Some("location"))
            .then_some(entry_value)
            .flatten();
        return Ok((false, location));
    }
    Ok((is_external, location))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u32, body: &[u8]) -> Vec<u8> {
        let mut out = vec![((number << 3) | 2) as u8, body.len() as u8]; // wire type 2: length-delimited
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn finds_an_external_initializer_and_accepts_a_plain_one() {
        let entry = [field(1, b"location"), field(2, b"../../etc/passwd")].concat();
        let external_tensor = [field(13, &entry), vec![(14 << 3) as u8, 1]].concat();
        let graph = field(5, &external_tensor);
        let model = [vec![(1 << 3) as u8, 9], field(7, &graph)].concat();
        assert_eq!(
            external_data_locations(&model).unwrap(),
            vec!["../../etc/passwd".to_string()]
        );

        let plain_tensor = [field(8, b"w"), vec![(14 << 3) as u8, 0]].concat();
        let model = field(7, &field(5, &plain_tensor));
        assert!(external_data_locations(&model).unwrap().is_empty());
    }

    #[test]
    fn garbage_and_truncation_are_errors() {
        assert!(external_data_locations(b"").is_err());
        assert!(external_data_locations(&[0x3a, 50, 1, 2]).is_err());
        assert!(external_data_locations(&[0x07]).is_err());
    }

    #[test]
    fn the_checked_in_models_have_no_external_data() {
        for name in ["probe.onnx", "waveform_gain.onnx"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../models/test")
                .join(name);
            assert!(external_data_locations(&std::fs::read(path).unwrap())
                .unwrap()
                .is_empty());
        }
    }
}
