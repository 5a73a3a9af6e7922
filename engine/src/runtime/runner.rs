//! [`ModelRunner`]: one graph with one f32 input and one f32 output on a shared session, with a
//! mid-session CPU fallback and background device switches.

use std::sync::Arc;

use ort::session::Session;
use ort::value::Tensor;

use super::device_switch::DeviceSwitch;
use super::devices::{ActiveDevice, DeviceChoice, DeviceId};
use super::model_file::{ModelBytes, ModelSource};
use super::session::{acquire_session, AcquiredSession, WarmUp};
use crate::model_error::ModelError;
use crate::separator::SeparatorEvent;

/// Runs one graph with one f32 input and one f32 output on a shared session, falling back to the
/// CPU when the device fails mid-session.
pub struct ModelRunner {
    model: ModelSource,
    warm_up: WarmUp,
    session: AcquiredSession,
    active: ActiveDevice,
    /// The device last reported through [`ModelRunner::poll_events`].
    reported: ActiveDevice,
    switch: DeviceSwitch,
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
    ) -> Result<Self, ModelError> {
        let warm_up: WarmUp = {
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
            input_name: input_name.to_string(),
            output_name: output_name.to_string(),
            input_shape,
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

    /// Runs the graph once: `fill` writes its input (laid out as the input shape, zeroed) straight
    /// into the tensor handed to ONNX Runtime, and `read` gets the output where ONNX Runtime left
    /// it — no copy of either is kept between runs. A device that fails is replaced by the CPU
    /// and the run repeated on the same input. An error of `fill` or `read` is returned as is.
    /// Not realtime-safe: runs on the worker thread.
    pub fn run_with(
        &mut self,
        fill: impl FnOnce(&mut [f32]) -> Result<(), String>,
        read: impl FnOnce(&[f32]) -> Result<(), String>,
    ) -> Result<(), String> {
        let mut input = vec![0.0f32; self.input_shape.iter().product()];
        fill(&mut input)?;
        let tensor = Tensor::from_array((self.input_shape.clone(), input.into_boxed_slice()))
            .map_err(|e| e.to_string())?;
        let mut read = Some(read);
        let (input_name, output_name) = (self.input_name.as_str(), self.output_name.as_str());
        let run = |session: &AcquiredSession, read: &mut Option<_>| {
            session
                .session
                .with_session(|s| run_tensor(s, input_name, output_name, &tensor, read))
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
    pub fn poll_events(&mut self, events: &mut dyn FnMut(SeparatorEvent)) {
        match self.switch.poll() {
            Some(Ok(session)) => {
                self.active = ActiveDevice {
                    requested: session.requested,
                    actual: session.device(),
                    fallback_reason: session.fallback_reason(),
                };
                self.session = session;
                self.reported = self.active.clone();
                events(SeparatorEvent::DeviceSwitched(self.active.clone()));
            }
            Some(Err(error)) => events(SeparatorEvent::DeviceSwitchFailed(error.to_string())),
            None => {}
        }
        if self.active != self.reported {
            self.reported = self.active.clone();
            events(SeparatorEvent::DeviceFellBack(self.active.clone()));
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

/// Runs `session` on `input` and hands its output to `read` (taken once, when the run
/// worked). The outer error is the inference's, the inner one `read`'s.
fn run_tensor(
    session: &mut Session,
    input_name: &str,
    output_name: &str,
    input: &Tensor<f32>,
    read: &mut Option<impl FnOnce(&[f32]) -> Result<(), String>>,
) -> Result<Result<(), String>, String> {
    let outputs = session
        .run(ort::inputs![input_name => input])
        .map_err(|e| e.to_string())?;
    let output = outputs
        .get(output_name)
        .ok_or_else(|| format!("the model produced no output `{output_name}`"))?;
    let (_, values) = output
        .try_extract_tensor::<f32>()
        .map_err(|e| e.to_string())?;
    let read = read.take().expect("read once, after the run that worked");
    Ok(read(values))
}
