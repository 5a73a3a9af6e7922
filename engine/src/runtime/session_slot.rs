//! [`SessionSlot`]: what a shared session's lock guards — the ONNX Runtime session, the device
//! and set-up it was built for, and (on a GPU with I/O binding) its bound device buffers.

use ort::session::Session;

use super::bound_io::BoundIo;
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
}

impl SessionSlot {
    /// A session built for `device` with `tuning`.
    pub fn new(session: Session, device: DeviceId, tuning: GpuTuning) -> Self {
        SessionSlot {
            session,
            device,
            tuning,
            bound: None,
        }
    }

    /// Whether runs go through bound device buffers ([`GpuTuning::binds_io`]).
    pub fn binds_io(&self) -> bool {
        self.tuning.binds_io(self.device)
    }

    /// Runs once on zeros, so the session is warm before it serves audio: through the bound
    /// buffers where they are used (graph capture must see the addresses later runs use),
    /// else a plain run of `io`'s inputs. Not realtime-safe: runs the model.
    pub fn warm_up(&mut self, io: &GraphIo) -> Result<(), String> {
        if self.binds_io() {
            self.bound_io(io).map(|_| ())
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
    /// run again elsewhere). The outer error is the inference's, the inner one `read`'s. Not
    /// realtime-safe: runs the model.
    pub fn run_bound(
        &mut self,
        io: &GraphIo,
        inputs: &[Vec<f32>],
        read: &mut Option<impl FnOnce(&[&[f32]]) -> Result<(), String>>,
    ) -> Result<Result<(), String>, String> {
        self.bound_io(io)?;
        let SessionSlot { session, bound, .. } = self;
        let bound = bound.as_mut().expect("made just above");
        bound.run(
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
        )
    }

    /// The bound buffers, made (with one run on zeros) when missing.
    fn bound_io(&mut self, io: &GraphIo) -> Result<&mut BoundIo, String> {
        if self.bound.is_none() {
            self.bound = Some(BoundIo::new(&mut self.session, io, self.device)?);
        }
        Ok(self.bound.as_mut().expect("made just above"))
    }
}
