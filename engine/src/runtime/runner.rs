//! [`ModelRunner`]: one graph with f32 inputs and outputs on a shared session, with a
//! mid-session CPU fallback and background device switches.

use std::sync::Arc;

use ort::session::Session;
use ort::value::Tensor;

use super::device_switch::DeviceSwitch;
use super::devices::{ActiveDevice, DeviceChoice, DeviceEvent, DeviceId};
use super::model_file::{ModelBytes, ModelSource};
use super::session::{acquire_session, AcquiredSession, WarmUp};
use crate::model_error::ModelError;

/// A graph's inputs (name and shape, in the order a codec fills them) and outputs (names, in
/// the order it reads them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphIo {
    /// Input names and shapes.
    pub inputs: Vec<(String, Vec<usize>)>,
    /// Output names.
    pub outputs: Vec<String>,
}

impl GraphIo {
    /// One input of `input_shape` and one output.
    pub fn single(input_name: &str, output_name: &str, input_shape: Vec<usize>) -> Self {
        GraphIo {
            inputs: vec![(input_name.to_owned(), input_shape)],
            outputs: vec![output_name.to_owned()],
        }
    }
}

/// Runs one graph with f32 inputs and outputs on a shared session, falling back to the CPU when
/// the device fails mid-session.
pub struct ModelRunner {
    model: ModelSource,
    warm_up: WarmUp,
    session: AcquiredSession,
    active: ActiveDevice,
    /// The device last reported through [`ModelRunner::poll_events`].
    reported: ActiveDevice,
    switch: DeviceSwitch,
    io: GraphIo,
}

impl ModelRunner {
    /// Builds a warm session for `model` on `device` with the inputs and outputs of `io`.
    /// Not realtime-safe.
    pub fn new(
        model: Arc<ModelBytes>,
        device: DeviceChoice,
        io: GraphIo,
    ) -> Result<Self, ModelError> {
        let warm_up: WarmUp = {
            let io = io.clone();
            Arc::new(move |session: &mut Session| {
                let zeros: Vec<Vec<f32>> = io
                    .inputs
                    .iter()
                    .map(|(_, shape)| vec![0.0; shape.iter().product()])
                    .collect();
                run_graph_io(session, &io, &zeros).map(|_| ())
            })
        };
        let session = acquire_session(&model, device, warm_up.as_ref())?;
        // The session holds what it needs: the bytes (the whole file) are not kept.
        let model = ModelSource::of(&model);
        let active = ActiveDevice {
            requested: device,
            actual: session.device(),
            fallback_reason: session.fallback_reason(),
        };
        Ok(Self {
            model,
            warm_up,
            session,
            reported: active.clone(),
            active,
            switch: DeviceSwitch::default(),
            io,
        })
    }

    /// The model's name (its file name).
    pub fn name(&self) -> &str {
        self.model.name()
    }

    /// The model's SHA-256.
    pub fn model_sha256(&self) -> &str {
        self.model.sha256()
    }

    /// The session in use (shared with other instances running the same model on the same device).
    pub fn session(&self) -> &AcquiredSession {
        &self.session
    }

    /// Runs a graph of one input and one output once: `fill` writes its input (laid out as the
    /// input shape, zeroed) straight into the tensor handed to ONNX Runtime, and `read` gets the
    /// output where ONNX Runtime left it — no copy of either is kept between runs. A device that
    /// fails is replaced by the CPU and the run repeated on the same input. An error of `fill`
    /// or `read` is returned as is. Not realtime-safe: runs on the worker thread.
    pub fn run_with(
        &mut self,
        fill: impl FnOnce(&mut [f32]) -> Result<(), String>,
        read: impl FnOnce(&[f32]) -> Result<(), String>,
    ) -> Result<(), String> {
        self.run_all(|inputs| fill(&mut inputs[0]), |outputs| read(outputs[0]))
    }

    /// [`ModelRunner::run_with`] for every input and output of the graph: `fill` gets the inputs
    /// in [`GraphIo`] order, `read` the outputs. Not realtime-safe.
    pub fn run_all(
        &mut self,
        fill: impl FnOnce(&mut [Vec<f32>]) -> Result<(), String>,
        read: impl FnOnce(&[&[f32]]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut inputs: Vec<Vec<f32>> = self
            .io
            .inputs
            .iter()
            .map(|(_, shape)| vec![0.0f32; shape.iter().product()])
            .collect();
        fill(&mut inputs)?;
        let tensors = self
            .io
            .inputs
            .iter()
            .zip(inputs)
            .map(|((_, shape), values)| {
                Tensor::from_array((shape.clone(), values.into_boxed_slice()))
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut read = Some(read);
        let io = &self.io;
        let run = |session: &AcquiredSession, read: &mut Option<_>| {
            session
                .session
                .with_session(|s| run_tensors(s, io, &tensors, read))
        };
        let result = match run(&self.session, &mut read) {
            Err(error) if self.active.actual != DeviceId::CPU => {
                log::warn!(
                    "{}: inference failed on {}: {error}",
                    self.model.name(),
                    self.active.actual
                );
                let model = self.model.bytes().map_err(|e| e.to_string())?;
                let session = acquire_session(
                    &model,
                    DeviceChoice::Device(DeviceId::CPU),
                    self.warm_up.as_ref(),
                )
                .map_err(|e| e.to_string())?;
                self.active.fallback_reason = Some(format!(
                    "{} failed: {error}; running on cpu",
                    self.active.actual
                ));
                self.active.actual = session.device();
                self.session = session;
                run(&self.session, &mut read)
            }
            result => result,
        };
        // Outer: the inference (falls back); inner: what `read` said.
        result?
    }

    /// Starts moving the model to `choice`: the session is built and warmed up on a helper
    /// thread while this one keeps running; [`ModelRunner::poll_events`] swaps it in.
    pub fn request_device(&mut self, choice: DeviceChoice) {
        self.switch
            .start(self.model.clone(), choice, self.warm_up.clone());
    }

    /// Installs a session that became ready and reports device changes: a finished switch, a
    /// failed one, or a fallback that happened inside [`ModelRunner::run`].
    pub fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        match self.switch.poll() {
            Some(Ok(session)) => {
                self.active = ActiveDevice {
                    requested: session.requested,
                    actual: session.device(),
                    fallback_reason: session.fallback_reason(),
                };
                self.session = session;
                self.reported = self.active.clone();
                events(DeviceEvent::DeviceSwitched(self.active.clone()));
            }
            Some(Err(error)) => events(DeviceEvent::DeviceSwitchFailed(error.to_string())),
            None => {}
        }
        if self.active != self.reported {
            self.reported = self.active.clone();
            events(DeviceEvent::DeviceFellBack(self.active.clone()));
        }
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

/// Runs `session` on inputs `values` (in `io`'s order) and returns its outputs flattened.
pub fn run_graph_io(
    session: &mut Session,
    io: &GraphIo,
    values: &[Vec<f32>],
) -> Result<Vec<Vec<f32>>, String> {
    let tensors = io
        .inputs
        .iter()
        .zip(values)
        .map(|((_, shape), values)| {
            Tensor::from_array((shape.clone(), values.clone())).map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut outputs = Vec::new();
    run_tensors(
        session,
        io,
        &tensors,
        &mut Some(|values: &[&[f32]]| {
            outputs = values.iter().map(|v| v.to_vec()).collect();
            Ok(())
        }),
    )??;
    Ok(outputs)
}

/// Runs `session` on `inputs` and hands its outputs to `read` (taken once, when the run
/// worked). The outer error is the inference's, the inner one `read`'s.
fn run_tensors(
    session: &mut Session,
    io: &GraphIo,
    inputs: &[Tensor<f32>],
    read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
) -> Result<Result<(), String>, String> {
    let named: Vec<(&str, &Tensor<f32>)> = io
        .inputs
        .iter()
        .map(|(name, _)| name.as_str())
        .zip(inputs)
        .collect();
    let outputs = session.run(named).map_err(|e| e.to_string())?;
    let mut values = Vec::with_capacity(io.outputs.len());
    for name in &io.outputs {
        let output = outputs
            .get(name.as_str())
            .ok_or_else(|| format!("the model produced no output `{name}`"))?;
        let (_, data) = output
            .try_extract_tensor::<f32>()
            .map_err(|e| e.to_string())?;
        values.push(data);
    }
    let read = read.take().expect("read once, after the run that worked");
    Ok(read(&values))
}
