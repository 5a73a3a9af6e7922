//! A graph's signature: its inputs and outputs with element types and dimensions, as shown in
//! messages and matched against the model families.

use ort::session::Session;

use stemflow_proto::{FieldValue, Fields};

/// One tensor of a graph's signature: name, element type and dimensions (`-1` when dynamic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSignature {
    /// Input or output name.
    pub name: String,
    /// Whether the elements are 32-bit floats.
    pub is_f32: bool,
    /// Dimensions; negative when not fixed.
    pub dims: Vec<i64>,
}

impl std::fmt::Display for TensorSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|&d| {
                if d < 0 {
                    "?".to_string()
                } else {
                    d.to_string()
                }
            })
            .collect();
        write!(
            f,
            "`{}` [{}]{}",
            self.name,
            dims.join(", "),
            if self.is_f32 { "" } else { " (not f32)" }
        )
    }
}

/// A graph's inputs and outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphSignature {
    /// Inputs in order.
    pub inputs: Vec<TensorSignature>,
    /// Outputs in order.
    pub outputs: Vec<TensorSignature>,
    /// The model's custom metadata (`metadata_props`), such as the `stemflow.family` and
    /// `stemflow.stems` that Stemflow's converter writes.
    pub metadata: std::collections::BTreeMap<String, String>,
}

impl std::fmt::Display for GraphSignature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |t: &[TensorSignature]| {
            t.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "inputs {} → outputs {}",
            list(&self.inputs),
            list(&self.outputs)
        )
    }
}

impl GraphSignature {
    /// Reads a session's signature.
    pub fn of(session: &Session) -> Self {
        let describe = |outlets: &[ort::value::Outlet]| -> Vec<TensorSignature> {
            outlets
                .iter()
                .map(|o| TensorSignature {
                    name: o.name().to_string(),
                    is_f32: o.dtype().tensor_type() == Some(ort::value::TensorElementType::Float32),
                    dims: o
                        .dtype()
                        .tensor_shape()
                        .map(|s| s.iter().copied().collect())
                        .unwrap_or_default(),
                })
                .collect()
        };
        let metadata = session
            .metadata()
            .ok()
            .map(|metadata| {
                metadata
                    .custom_keys()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|key| metadata.custom(&key).map(|value| (key, value)))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            inputs: describe(session.inputs()),
            outputs: describe(session.outputs()),
            metadata,
        }
    }

    /// Reads the signature from an ONNX file's bytes without ONNX Runtime: the graph's inputs
    /// that are not initializers, its outputs and the model's `metadata_props`, as
    /// [`GraphSignature::of`] reports them for a session of the same file. Recognising a model
    /// this way costs no session: ONNX Runtime's graph optimisation of HTDemucs takes seconds.
    pub fn read(bytes: &[u8]) -> Result<Self, String> {
        let mut graph = None;
        let mut metadata = std::collections::BTreeMap::new();
        for field in Fields::new(bytes) {
            match field? {
                (7, FieldValue::Bytes(body)) => graph = Some(body),
                (14, FieldValue::Bytes(entry)) => {
                    let (mut key, mut value) = (String::new(), String::new());
                    for field in Fields::new(entry) {
                        match field? {
                            (1, FieldValue::Bytes(text)) => key = utf8(text),
                            (2, FieldValue::Bytes(text)) => value = utf8(text),
                            _ => {}
                        }
                    }
                    metadata.insert(key, value);
                }
                _ => {}
            }
        }
        let graph = graph.ok_or("no graph in the file")?;
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        let mut initializers = std::collections::HashSet::new();
        for field in Fields::new(graph) {
            match field? {
                (5, FieldValue::Bytes(tensor)) => {
                    initializers.insert(tensor_name(tensor)?);
                }
                (15, FieldValue::Bytes(sparse)) => {
                    for field in Fields::new(sparse) {
                        if let (1, FieldValue::Bytes(values)) = field? {
                            initializers.insert(tensor_name(values)?);
                        }
                    }
                }
                (11, FieldValue::Bytes(info)) => inputs.push(value_info(info)?),
                (12, FieldValue::Bytes(info)) => outputs.push(value_info(info)?),
                _ => {}
            }
        }
        inputs.retain(|input: &TensorSignature| !initializers.contains(&input.name));
        Ok(Self {
            inputs,
            outputs,
            metadata,
        })
    }
}

fn utf8(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A `TensorProto`'s name (field 8).
fn tensor_name(tensor: &[u8]) -> Result<String, String> {
    let mut name = String::new();
    for field in Fields::new(tensor) {
        if let (8, FieldValue::Bytes(text)) = field? {
            name = utf8(text);
        }
    }
    Ok(name)
}

/// A `ValueInfoProto`: name (1) and type (2: `TypeProto.tensor_type` (1) with `elem_type` (1,
/// 1 = float) and `shape` (2) of `dim` (1), each a `dim_value` (1) or a `dim_param` (2)).
fn value_info(info: &[u8]) -> Result<TensorSignature, String> {
    let mut signature = TensorSignature {
        name: String::new(),
        is_f32: false,
        dims: Vec::new(),
    };
    for field in Fields::new(info) {
        match field? {
            (1, FieldValue::Bytes(text)) => signature.name = utf8(text),
            (2, FieldValue::Bytes(type_proto)) => {
                for field in Fields::new(type_proto) {
                    let (1, FieldValue::Bytes(tensor_type)) = field? else {
                        continue;
                    };
                    for field in Fields::new(tensor_type) {
                        match field? {
                            (1, FieldValue::Varint(element_type)) => {
                                signature.is_f32 = element_type == 1
                            }
                            (2, FieldValue::Bytes(shape)) => {
                                for field in Fields::new(shape) {
                                    if let (1, FieldValue::Bytes(dim)) = field? {
                                        signature.dims.push(dimension(dim)?);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(signature)
}

/// A `TensorShapeProto.Dimension`: its fixed size, or -1 when symbolic or unknown.
fn dimension(dim: &[u8]) -> Result<i64, String> {
    let mut size = -1;
    for field in Fields::new(dim) {
        if let (1, FieldValue::Varint(value)) = field? {
            size = (value as i64).max(-1);
        }
    }
    Ok(size)
}
