//! A graph's signature: its inputs and outputs with element types and dimensions, as shown in
//! messages and matched against the model families.

use ort::session::Session;

use stemflow_onnx::field::data_type;
use stemflow_onnx::view::raw_fields;
use stemflow_onnx::{DimView, GraphPart, ModelView, ValueInfoView};

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
        let model = ModelView::read(bytes)?;
        let metadata = model.metadata()?.into_iter().collect();
        let (mut inputs, mut outputs) = (Vec::new(), Vec::new());
        let mut initializers = std::collections::HashSet::new();
        for field in raw_fields(model.graph()?)? {
            match GraphPart::read(&field)? {
                GraphPart::Initializer(tensor) => {
                    initializers.insert(tensor.name);
                }
                GraphPart::SparseInitializer(name) => {
                    initializers.insert(name);
                }
                GraphPart::Input(info) => inputs.push(info),
                GraphPart::Output(info) => outputs.push(signature(&info)),
                _ => {}
            }
        }
        Ok(Self {
            inputs: inputs
                .iter()
                .filter(|input| !initializers.contains(input.name))
                .map(signature)
                .collect(),
            outputs,
            metadata,
        })
    }
}

/// A graph input's or output's signature: a dimension not fixed (or out of range) is -1.
fn signature(info: &ValueInfoView<'_>) -> TensorSignature {
    TensorSignature {
        name: info.name.to_owned(),
        is_f32: info.elem_type == Some(data_type::FLOAT),
        dims: info
            .dims
            .iter()
            .map(|dim| match *dim {
                DimView::Fixed(size) => size.max(-1),
                DimView::Symbolic(_) | DimView::Unknown => -1,
            })
            .collect(),
    }
}
