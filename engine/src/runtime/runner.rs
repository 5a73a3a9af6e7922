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
        let warm_up = warm_up_for(&io);
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
        self.run_batch(1, fill, read)
    }

    /// [`ModelRunner::run_all`] on a batch of `batch` items in one model run, for a graph whose
    /// inputs' first dimension is its batch ([`GraphIo`] holds one item's shapes, first
    /// dimension 1): `fill` writes item after item, `read` gets the outputs of all of them, item
    /// after item. Not realtime-safe.
    pub fn run_batch(
        &mut self,
        batch: usize,
        fill: impl FnOnce(&mut [Vec<f32>]) -> Result<(), String>,
        read: impl FnOnce(&[&[f32]]) -> Result<(), String>,
    ) -> Result<(), String> {
        let shapes: Vec<Vec<usize>> = self
            .io
            .inputs
            .iter()
            .map(|(_, shape)| batch_shape(shape, batch))
            .collect::<Result<_, _>>()?;
        let mut inputs: Vec<Vec<f32>> = shapes
            .iter()
            .map(|shape| vec![0.0f32; shape.iter().product()])
            .collect();
        fill(&mut inputs)?;
        let tensors = shapes
            .into_iter()
            .zip(inputs)
            .map(|(shape, values)| {
                Tensor::from_array((shape, values.into_boxed_slice())).map_err(|e| e.to_string())
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

    /// Runs another graph from now on: `session` (acquired with [`ModelRunner::acquire`]) for
    /// `model` with `io`. A graph switch made on a helper thread is installed this way (the same
    /// graph on another device: [`ModelRunner::request_device`]). Returns the device it runs
    /// on, reported as switched. Not realtime-safe: drops the old session.
    pub fn replace_graph(
        &mut self,
        session: AcquiredSession,
        model: ModelSource,
        io: GraphIo,
    ) -> ActiveDevice {
        self.active = ActiveDevice {
            requested: session.requested,
            actual: session.device(),
            fallback_reason: session.fallback_reason(),
        };
        self.warm_up = warm_up_for(&io);
        self.session = session;
        self.model = model;
        self.io = io;
        self.reported = self.active.clone();
        self.active.clone()
    }

    /// Records that `requested` ended up where this runner runs, for `reason` (a GPU graph given
    /// up for the CPU graph when the GPU failed). Not realtime-safe.
    pub fn record_fallback(&mut self, requested: DeviceChoice, reason: Option<String>) {
        self.active.requested = requested;
        if reason.is_some() {
            self.active.fallback_reason = reason;
        }
        self.reported = self.active.clone();
    }

    /// A warm session of `model` on `choice` for a graph of `io`, as [`ModelRunner::new`]
    /// builds one, for [`ModelRunner::replace_graph`]. Not realtime-safe.
    pub fn acquire(
        model: &ModelBytes,
        choice: DeviceChoice,
        io: &GraphIo,
    ) -> Result<AcquiredSession, ModelError> {
        acquire_session(model, choice, warm_up_for(io).as_ref())
    }

    /// The graph's inputs and outputs.
    pub fn io(&self) -> &GraphIo {
        &self.io
    }

    /// Starts moving the model to `choice`: the session is built and warmed up on a helper
    /// thread while this one keeps running; [`ModelRunner::poll_events`] swaps it in.
    pub fn request_device(&mut self, choice: DeviceChoice) {
        self.switch
            .start(self.model.clone(), choice, self.warm_up.clone());
    }

    /// Drops a device switch under way (another graph takes over instead).
    pub fn cancel_device_switch(&mut self) {
        self.switch = DeviceSwitch::default();
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

/// A run on silence of a graph of `io`, which makes a new session warm.
fn warm_up_for(io: &GraphIo) -> WarmUp {
    let io = io.clone();
    Arc::new(move |session: &mut Session| {
        let zeros: Vec<Vec<f32>> = io
            .inputs
            .iter()
            .map(|(_, shape)| vec![0.0; shape.iter().product()])
            .collect();
        run_graph_io(session, &io, &zeros).map(|_| ())
    })
}

/// `shape` (one item's, first dimension 1) for `batch` items.
fn batch_shape(shape: &[usize], batch: usize) -> Result<Vec<usize>, String> {
    match shape.split_first() {
        Some((1, rest)) if batch >= 1 => Ok(std::iter::once(batch).chain(rest.iter().copied()).collect()),
        _ if batch == 1 => Ok(shape.to_vec()),
        _ => Err(format!(
            "a batch of {batch} needs a graph whose inputs take a batch first; this one takes {shape:?}"
        )),
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
