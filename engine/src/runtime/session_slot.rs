//! [`SessionSlot`]: what a shared session's lock guards — the ONNX Runtime session, the device
//! and set-up it was built for, and (on a GPU with I/O binding) its bound buffers.

use ort::session::Session;

use super::bound_io::{BoundIo, Placement};
use super::device_id::DeviceId;
use super::gpu_tuning::GpuTuning;
use super::graph_io::GraphIo;
use super::plain_run::run_graph_io;

/// A session and what runs with it. One thread at a time (behind the shared session's lock).
pub struct SessionSlot {
    /// The session.
    pub session: Session,
    device: DeviceId,
    tuning: GpuTuning,
    /// The bound buffers, made at the first run through them (or the warm-up).
    bound: Option<BoundIo>,
    /// Why the buffers could not be bound, when they could not: runs then go the plain way.
    binding_error: Option<String>,
    /// Bind even on the CPU (tests: the CPU stands in for a device).
    is_binding_forced: bool,
}

impl SessionSlot {
    /// A session built for `device` with `tuning`.
    pub fn new(session: Session, device: DeviceId, tuning: GpuTuning) -> Self {
        SessionSlot {
            session,
            device,
            tuning,
            bound: None,
            binding_error: None,
            is_binding_forced: false,
        }
    }

    /// The slot, binding its buffers even on the CPU: the CPU stands in for a device, so the
    /// binding path is tested without a GPU. Not realtime-safe.
    pub fn binding_on_any_device(mut self) -> Self {
        self.is_binding_forced = true;
        self
    }

    /// Whether runs go through bound buffers ([`GpuTuning::binds_io`]) and binding
    /// them has not failed.
    pub fn binds_io(&self) -> bool {
        (self.is_binding_forced || self.tuning.binds_io(self.device))
            && self.binding_error.is_none()
    }

    /// Runs once on zeros, so the session is warm before it serves audio: through the bound
    /// buffers where they are used (graph capture must see the addresses later runs use),
    /// else a plain run of `io`'s inputs. Not realtime-safe: runs the model.
    pub fn warm_up(&mut self, io: &GraphIo) -> Result<(), String> {
        if self.binds_io() && self.bound_io(io).is_ok() {
            Ok(())
        } else if self.tuning.should_capture_graph && self.device != DeviceId::CPU {
            // A captured graph replays the addresses it saw: no binding, no graph.
            Err(format!(
                "graph capture needs I/O binding, which failed: {}",
                self.binding_error.as_deref().unwrap_or("?")
            ))
        } else {
            let zeros: Vec<Vec<f32>> = io
                .inputs
                .iter()
                .map(|(_, shape)| vec![0.0; shape.iter().product()])
                .collect();
            run_graph_io(&mut self.session, io, &zeros).map(|_| ())
        }
    }

    /// One run through the bound buffers of `io` (made first if needed) on `inputs` (in `io`'s
    /// order), the outputs handed to `read` (taken only when the run worked, so a caller can
    /// run again elsewhere). `None` when the buffers cannot be bound (the caller runs the plain
    /// way); else the outer error is the inference's, the inner one `read`'s. Not
    /// realtime-safe: runs the model.
    pub fn run_bound(
        &mut self,
        io: &GraphIo,
        inputs: &[Vec<f32>],
        read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
    ) -> Option<Result<Result<(), String>, String>> {
        if !self.binds_io() || self.bound_io(io).is_err() {
            return None;
        }
        let SessionSlot { session, bound, .. } = self;
        let bound = bound.as_mut().expect("made just above");
        Some(bound.run(
            session,
            |host| {
                for (host, values) in host.iter_mut().zip(inputs) {
                    if host.len() != values.len() {
                        return Err(format!(
                            "an input of {} values where the graph takes {}",
                            values.len(),
                            host.len()
                        ));
                    }
                    host.copy_from_slice(values);
                }
                Ok(())
            },
            |outputs| (read.take().expect("read once, after the run that worked"))(outputs),
        ))
    }

    /// Gives up the bound buffers after a run through them failed (`error`, said once as a
    /// warning): this session's later runs go the plain way, on the same device. Not
    /// realtime-safe: frees the buffers.
    pub fn give_up_binding(&mut self, error: String) {
        log::warn!(
            "{}: a run through bound buffers failed ({error}); running on host tensors",
            self.device
        );
        self.bound = None;
        self.binding_error = Some(error);
    }

    /// The bound buffers, made (with one run on zeros) when missing. A failure is kept: the
    /// session then runs the plain way, with a warning once.
    fn bound_io(&mut self, io: &GraphIo) -> Result<&mut BoundIo, String> {
        if let Some(error) = &self.binding_error {
            return Err(error.clone());
        }
        if self.bound.is_none() {
            // Graph capture replays device addresses: its buffers must be on the device.
            let placement = match self.tuning.should_capture_graph {
                true => Placement::Device,
                false => Placement::Host,
            };
            match BoundIo::new(&mut self.session, io, self.device, placement) {
                Ok(bound) => self.bound = Some(bound),
                Err(error) => {
                    log::warn!(
                        "{}: I/O binding failed ({error}); running on host tensors",
                        self.device
                    );
                    self.binding_error = Some(error.clone());
                    return Err(error);
                }
            }
        }
        Ok(self.bound.as_mut().expect("made just above"))
    }
}
