//! Running ONNX graphs for separators: graph signatures, a runner with mid-session CPU fallback,
//! and what the worker needs to move a model to another device. The model families built on it
//! live in [`crate::families`].

use std::sync::Arc;

use ort::session::Session;
use ort::value::Tensor;

use crate::runtime::devices::{DeviceChoice, DeviceId};
use crate::runtime::session::{acquire_session, AcquiredSession, ModelBytes};

/// What the worker needs to build a new session for a separator on another device.
#[derive(Clone)]
pub struct SessionSource {
    /// The model.
    pub model: Arc<ModelBytes>,
    /// Runs the model once on silence, so a session is warm before it serves audio.
    pub warm_up: Arc<dyn Fn(&mut Session) -> Result<(), String> + Send + Sync>,
}

/// The device a model runs on and why, for the editor and the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveDevice {
    /// What was asked for.
    pub requested: DeviceChoice,
    /// What runs.
    pub actual: DeviceId,
    /// Why they differ (or a later failure), if they do.
    pub fallback_reason: Option<String>,
}

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
        Self {
            inputs: describe(session.inputs()),
            outputs: describe(session.outputs()),
        }
    }
}

/// Runs one graph with one f32 input and one f32 output on a shared session, falling back to the
/// CPU when the device fails mid-session.
pub struct ModelRunner {
    source: SessionSource,
    session: AcquiredSession,
    active: ActiveDevice,
    input_name: String,
    output_name: String,
    input_shape: Vec<usize>,
}

impl ModelRunner {
    /// Builds a warm session for `model` on `device`: one input `input_name` of `input_shape`, one
    /// output `output_name`. Not realtime-safe.
    pub fn new(
        model: Arc<ModelBytes>,
        device: DeviceChoice,
        input_name: &str,
        output_name: &str,
        input_shape: Vec<usize>,
    ) -> Result<Self, String> {
        let warm_up: Arc<dyn Fn(&mut Session) -> Result<(), String> + Send + Sync> = {
            let (input_name, output_name, shape) = (
                input_name.to_string(),
                output_name.to_string(),
                input_shape.clone(),
            );
            Arc::new(move |session: &mut Session| {
                let zeros = vec![0.0; shape.iter().product()];
                run_graph(session, &input_name, &output_name, &shape, &zeros).map(|_| ())
            })
        };
        let source = SessionSource { model, warm_up };
        let session = acquire_session(&source.model, device, source.warm_up.as_ref())?;
        let active = ActiveDevice {
            requested: device,
            actual: session.device(),
            fallback_reason: session.fallback_reason(),
        };
        Ok(Self {
            source,
            session,
            active,
            input_name: input_name.to_string(),
            output_name: output_name.to_string(),
            input_shape,
        })
    }

    /// The model's name (its file name).
    pub fn name(&self) -> &str {
        &self.source.model.name
    }

    /// The session in use (shared with other instances running the same model on the same device).
    pub fn session(&self) -> &AcquiredSession {
        &self.session
    }

    /// Runs the graph on `input` (laid out as the input shape). A device that fails is replaced by
    /// the CPU and the run repeated. Not realtime-safe: runs on the worker thread.
    pub fn run(&mut self, input: &[f32]) -> Result<Vec<f32>, String> {
        let run =
            |session: &AcquiredSession, shape: &[usize], input_name: &str, output_name: &str| {
                session
                    .session
                    .with_session(|s| run_graph(s, input_name, output_name, shape, input))
            };
        match run(
            &self.session,
            &self.input_shape,
            &self.input_name,
            &self.output_name,
        ) {
            Ok(output) => Ok(output),
            Err(error) if self.active.actual != DeviceId::CPU => {
                log::warn!(
                    "{}: inference failed on {}: {error}",
                    self.source.model.name,
                    self.active.actual
                );
                let session = acquire_session(
                    &self.source.model,
                    DeviceChoice::Device(DeviceId::CPU),
                    self.source.warm_up.as_ref(),
                )?;
                self.active.fallback_reason = Some(format!(
                    "{} failed: {error}; running on cpu",
                    self.active.actual
                ));
                self.active.actual = session.device();
                self.session = session;
                run(
                    &self.session,
                    &self.input_shape,
                    &self.input_name,
                    &self.output_name,
                )
            }
            Err(error) => Err(error),
        }
    }

    /// What a new session on another device is built from.
    pub fn session_source(&self) -> SessionSource {
        self.source.clone()
    }

    /// Swaps in a session built from [`ModelRunner::session_source`].
    pub fn install_session(&mut self, session: AcquiredSession) {
        self.active = ActiveDevice {
            requested: session.requested,
            actual: session.device(),
            fallback_reason: session.fallback_reason(),
        };
        self.session = session;
    }

    /// The device running the model.
    pub fn active_device(&self) -> ActiveDevice {
        self.active.clone()
    }
}

/// Runs `session` on one input tensor and returns its output flattened.
pub fn run_graph(
    session: &mut Session,
    input_name: &str,
    output_name: &str,
    shape: &[usize],
    input: &[f32],
) -> Result<Vec<f32>, String> {
    let tensor = Tensor::from_array((shape.to_vec(), input.to_vec())).map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs![input_name => tensor])
        .map_err(|e| e.to_string())?;
    let output = outputs
        .get(output_name)
        .ok_or_else(|| format!("the model produced no output `{output_name}`"))?
        .try_extract_array::<f32>()
        .map_err(|e| e.to_string())?;
    Ok(output.iter().copied().collect())
}
