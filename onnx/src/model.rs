//! A `ModelProto` read field by field: its one graph, its operator set, its metadata, and the
//! model rebuilt around a rewritten graph with everything else copied as it was.

use crate::encode::encode_string_entry;
use crate::field::{model, opset_id, string_entry};
use crate::view::{raw_fields, text, RawField};
use crate::wire::{put_bytes, FieldValue, Fields};

/// A model's fields, borrowed from its bytes.
#[derive(Debug)]
pub struct ModelView<'a> {
    /// Every field of the `ModelProto`, in order.
    pub fields: Vec<RawField<'a>>,
}

impl<'a> ModelView<'a> {
    /// Reads a `ModelProto`'s fields; an error when the bytes are not a protobuf message.
    pub fn read(bytes: &'a [u8]) -> Result<Self, String> {
        if bytes.is_empty() {
            return Err("empty file".into());
        }
        Ok(Self {
            fields: raw_fields(bytes)?,
        })
    }

    /// The body of the model's one graph.
    pub fn graph(&self) -> Result<&'a [u8], String> {
        let mut graphs = self
            .fields
            .iter()
            .filter(|f| f.number == model::GRAPH)
            .filter_map(RawField::body);
        match (graphs.next(), graphs.next()) {
            (Some(graph), None) => Ok(graph),
            (None, _) => Err("not an ONNX model (no graph)".into()),
            (Some(_), Some(_)) => Err("not an ONNX model (more than one graph)".into()),
        }
    }

    /// The default domain's operator set version, if the model imports one.
    pub fn default_opset(&self) -> Result<Option<i64>, String> {
        Ok(self.opsets()?.get("ai.onnx").copied())
    }

    /// Every operator set the model imports, by domain (`ai.onnx` for the default one, which
    /// files write as `""` or `ai.onnx`).
    pub fn opsets(&self) -> Result<std::collections::HashMap<String, i64>, String> {
        let mut opsets = std::collections::HashMap::new();
        for body in self.bodies(model::OPSET_IMPORT) {
            let mut domain = "";
            let mut version = 1;
            for entry in Fields::new(body) {
                match entry? {
                    (opset_id::DOMAIN, FieldValue::Bytes(name)) => domain = text(name)?,
                    (opset_id::VERSION, FieldValue::Varint(v)) => version = v as i64,
                    _ => {}
                }
            }
            let domain = if domain.is_empty() { "ai.onnx" } else { domain };
            opsets.insert(domain.to_owned(), version);
        }
        Ok(opsets)
    }

    /// Every metadata property (`metadata_props`), in order, as UTF-8 (lossy where it is not).
    pub fn metadata(&self) -> Result<Vec<(String, String)>, String> {
        let lossy = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        self.metadata_entries()
            .map(|entry| entry.map(|(key, value)| (lossy(key), lossy(value))))
            .collect()
    }

    /// The value of metadata property `key`, if set.
    pub fn metadata_value(&self, key: &str) -> Result<Option<&'a str>, String> {
        for entry in self.metadata_entries() {
            let (k, v) = entry?;
            let (k, v) = (text(k)?, text(v)?);
            if k == key {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Each `metadata_props` entry's key and value bytes ("" when left out), in order.
    fn metadata_entries(&self) -> impl Iterator<Item = Result<(&'a [u8], &'a [u8]), String>> + '_ {
        self.bodies(model::METADATA_PROPS).map(|body| {
            let (mut key, mut value): (&[u8], &[u8]) = (b"", b"");
            for part in Fields::new(body) {
                match part? {
                    (string_entry::KEY, FieldValue::Bytes(b)) => key = b,
                    (string_entry::VALUE, FieldValue::Bytes(b)) => value = b,
                    _ => {}
                }
            }
            Ok((key, value))
        })
    }

    /// The model with its graph replaced by `graph_body` and, when given, the metadata
    /// property `(key, value)` added; every other field copied as it was.
    pub fn with_graph(&self, graph_body: &[u8], property: Option<(&str, &str)>) -> Vec<u8> {
        let mut out = Vec::with_capacity(graph_body.len() + 4096);
        for field in &self.fields {
            if field.number == model::GRAPH {
                put_bytes(&mut out, model::GRAPH, graph_body);
            } else {
                out.extend_from_slice(field.bytes);
            }
        }
        if let Some((key, value)) = property {
            put_bytes(
                &mut out,
                model::METADATA_PROPS,
                &encode_string_entry(key, value),
            );
        }
        out
    }

    /// A model of `graph_body` that runs with this model's IR version and operator sets (its
    /// `ir_version` and `opset_import` copied, nothing else).
    pub fn sibling(&self, graph_body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(graph_body.len() + 64);
        for field in &self.fields {
            if matches!(field.number, model::IR_VERSION | model::OPSET_IMPORT) {
                out.extend_from_slice(field.bytes);
            }
        }
        put_bytes(&mut out, model::GRAPH, graph_body);
        out
    }

    fn bodies(&self, number: u32) -> impl Iterator<Item = &'a [u8]> + '_ {
        self.fields
            .iter()
            .filter(move |f| f.number == number)
            .filter_map(RawField::body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{Attribute, Dim};
    use crate::field::graph;
    use crate::graph::OnnxGraph;
    use crate::view::{GraphPart, NodeView, TensorView};

    fn gemm_model() -> Vec<u8> {
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
        graph.to_model_bytes()
    }

    #[test]
    fn nodes_tensors_opsets_and_metadata_are_read_from_a_written_model() {
        let bytes = gemm_model();
        let model = ModelView::read(&bytes).unwrap();
        assert_eq!(model.default_opset().unwrap(), Some(17));
        assert_eq!(model.metadata_value("k").unwrap(), Some("v"));
        assert_eq!(model.metadata_value("other").unwrap(), None);
        assert_eq!(
            model.metadata().unwrap(),
            [("k".to_owned(), "v".to_owned())]
        );
        let copied: Vec<u8> = model.fields.iter().flat_map(|f| f.bytes.to_vec()).collect();
        assert_eq!(copied, bytes, "the raw fields are the whole message");

        let graph_fields = raw_fields(model.graph().unwrap()).unwrap();
        let node = graph_fields
            .iter()
            .find(|f| f.number == graph::NODE)
            .unwrap();
        let node = NodeView::read(node.body().unwrap()).unwrap();
        assert!(node.is("Gemm") && !node.is("MatMul"));
        assert_eq!((node.inputs, node.outputs), (vec!["x", "w"], vec!["y"]));
        assert_eq!((node.name, node.attributes.len()), ("gemm", 1));
        assert!(!node.has_subgraph);

        let tensor = graph_fields
            .iter()
            .find(|f| f.number == graph::INITIALIZER)
            .unwrap();
        let tensor = TensorView::read(tensor.body().unwrap()).unwrap();
        assert_eq!((tensor.name, tensor.dims.as_slice()), ("w", &[2, 3][..]));
        assert_eq!(
            tensor.f32_values(),
            Some(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        );

        let parts: Vec<&str> = graph_fields
            .iter()
            .map(|f| match GraphPart::read(f).unwrap() {
                GraphPart::Node(_) => "node",
                GraphPart::Initializer(_) => "initializer",
                GraphPart::Input(_) => "input",
                GraphPart::Output(_) => "output",
                GraphPart::SparseInitializer(_) => "sparse",
                GraphPart::Other => "other",
            })
            .collect();
        assert_eq!(parts, ["node", "other", "initializer", "input", "output"]);
    }

    #[test]
    fn a_rewritten_graph_keeps_the_other_fields_and_gains_a_property() {
        let bytes = gemm_model();
        let model = ModelView::read(&bytes).unwrap();
        let same = model.with_graph(model.graph().unwrap(), None);
        assert_eq!(same, bytes);
        let marked = model.with_graph(b"", Some(("stemflow.x", "1")));
        let marked = ModelView::read(&marked).unwrap();
        assert_eq!(marked.graph().unwrap(), b"");
        assert_eq!(marked.metadata_value("k").unwrap(), Some("v"));
        assert_eq!(marked.metadata_value("stemflow.x").unwrap(), Some("1"));

        let sibling = model.sibling(b"");
        let sibling = ModelView::read(&sibling).unwrap();
        assert_eq!(sibling.default_opset().unwrap(), Some(17));
        assert!(sibling.metadata().unwrap().is_empty());
    }

    #[test]
    fn models_without_one_graph_and_garbage_are_errors() {
        assert!(ModelView::read(b"").is_err());
        assert!(ModelView::read(&[0x3a, 50, 1, 2]).is_err());
        let no_graph = ModelView::read(&[0x08, 8]).unwrap();
        assert!(no_graph.graph().unwrap_err().contains("no graph"));
        let mut two = Vec::new();
        put_bytes(&mut two, model::GRAPH, b"");
        put_bytes(&mut two, model::GRAPH, b"");
        let two = ModelView::read(&two).unwrap();
        assert!(two.graph().unwrap_err().contains("more than one"));
    }
}
