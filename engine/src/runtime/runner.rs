//! [`ModelRunner`]: one graph with f32 inputs and outputs on a shared session, with a
//! mid-session CPU fallback and background device switches.

use std::sync::Arc;

use ort::value::Tensor;

use super::device_switch::DeviceSwitch;
use super::devices::{ActiveDevice, DeviceChoice, DeviceEvent, DeviceId};
pub use super::graph_io::GraphIo;
use super::model_file::{ModelBytes, ModelSource};
use super::plain_run::run_tensors;
pub use super::plain_run::{run_graph, run_graph_io};
use super::session::{acquire_session, AcquiredSession, WarmUp};
use crate::model_error::ModelError;

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
    /// in [`GraphIo`] order, `read` the outputs. On a GPU with I/O binding the inputs go through
    /// the session's bound buffers ([`super::session_slot::SessionSlot::run_bound`]);
    /// elsewhere they are handed to ONNX Runtime as tensors. Not realtime-safe.
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
    /// after item. The session's bound buffers hold one item's shapes, so a batch of
    /// several is handed to ONNX Runtime as tensors. Not realtime-safe.
    pub fn run_batch(
        &mut self,
        batch: usize,
        fill: impl FnOnce(&mut [Vec<f32>]) -> Result<(), String>,
        read: impl FnOnce(&[&[f32]]) -> Result<(), String>,
    ) -> Result<(), String> {
        let io = GraphIo {
            inputs: self
                .io
                .inputs
                .iter()
                .map(|(name, shape)| Ok((name.clone(), batch_shape(shape, batch)?)))
                .collect::<Result<_, String>>()?,
            outputs: self.io.outputs.clone(),
        };
        let mut inputs: Vec<Vec<f32>> = io
            .inputs
            .iter()
            .map(|(_, shape)| vec![0.0f32; shape.iter().product()])
            .collect();
        fill(&mut inputs)?;
        let mut read = Some(read);
        let io = &io;
        let bound = match batch == 1 && self.session.session.binds_io() {
            true => self
                .session
                .session
                .with_slot(|slot| slot.run_bound(io, &inputs, &mut read)),
            false => None,
        };
        let result = match bound {
            Some(Err(error)) => {
                // The bound buffers failed, which need not mean the device did (ONNX Runtime
                // 1.31's CUDA build refuses some bound copies): the session gives them up and
                // runs on host tensors from now on, still on the device; only a failure there
                // moves the model to the CPU.
                self.session
                    .session
                    .with_slot(|slot| slot.give_up_binding(error));
                let tensors = to_tensors(io, inputs)?;
                self.run_plain(io, &tensors, &mut read)
            }
            Some(result) => result,
            None => {
                let tensors = to_tensors(io, inputs)?;
                self.run_plain(io, &tensors, &mut read)
            }
        };
        // Outer: the inference (falls back); inner: what `read` said.
        result?
    }

    /// One run on host tensors; a device that fails is replaced by the CPU and the run repeated
    /// there. The outer error is the inference's (or the CPU's model that could not be
    /// loaded), the inner one what `read` said. Not realtime-safe.
    fn run_plain(
        &mut self,
        io: &GraphIo,
        tensors: &[Tensor<f32>],
        read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
    ) -> Result<Result<(), String>, String> {
        match run_tensors_on(&self.session, io, tensors, read) {
            Err(error) if self.active.actual != DeviceId::CPU => {
                self.fall_back_to_cpu(error)?;
                run_tensors_on(&self.session, io, tensors, read)
            }
            result => result,
        }
    }

    /// Replaces a device that failed mid-session by the CPU (the model's session there).
    fn fall_back_to_cpu(&mut self, error: String) -> Result<(), String> {
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
        Ok(())
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
    /// failed one, or a fallback that happened inside a run ([`ModelRunner::run_with`],
    /// `run_all`, `run_batch`).
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

/// A run on silence of a graph of `io`, which makes a new session warm (and binds its buffers
/// where the device takes them).
fn warm_up_for(io: &GraphIo) -> WarmUp {
    let io = io.clone();
    Arc::new(move |slot| slot.warm_up(&io))
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

/// `io`'s inputs as tensors, taking the values.
fn to_tensors(io: &GraphIo, inputs: Vec<Vec<f32>>) -> Result<Vec<Tensor<f32>>, String> {
    io.inputs
        .iter()
        .zip(inputs)
        .map(|((_, shape), values)| {
            Tensor::from_array((shape.clone(), values.into_boxed_slice()))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// Runs `session`'s graph on host tensors (see [`run_tensors`]).
fn run_tensors_on(
    session: &AcquiredSession,
    io: &GraphIo,
    tensors: &[Tensor<f32>],
    read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
) -> Result<Result<(), String>, String> {
    session
        .session
        .with_session(|s| run_tensors(s, io, tensors, read))
}
