//! [`DeviceSwitch`]: builds a session for another device (or, with [`DeviceSwitch::start_job`],
//! anything a switch needs: another graph, its description) on a helper thread while the
//! current one keeps running, so a separator can swap at a hop boundary without a gap.

use crossbeam_channel::{Receiver, TryRecvError};

use super::devices::DeviceChoice;
use super::model_file::ModelSource;
use super::session::{acquire_session, AcquiredSession, WarmUp};
use crate::model_error::ModelError;

/// One pending device switch at most: a newer request replaces an older one, whose result is
/// then dropped on its helper thread.
pub struct DeviceSwitch<R = AcquiredSession> {
    pending: Option<Receiver<Result<R, ModelError>>>,
}

impl<R> Default for DeviceSwitch<R> {
    fn default() -> Self {
        DeviceSwitch { pending: None }
    }
}

impl DeviceSwitch<AcquiredSession> {
    /// Starts building a warm session for `model` on `choice` on a helper thread. Returns at
    /// once; [`DeviceSwitch::poll`] delivers the result. Not realtime-safe: spawns a thread.
    pub fn start(&mut self, model: ModelSource, choice: DeviceChoice, warm_up: WarmUp) {
        let name = model.name().to_owned();
        self.start_job(name, move || {
            model
                .bytes()
                .and_then(|model| acquire_session(&model, choice, warm_up.as_ref()))
        });
    }
}

impl<R: Send + 'static> DeviceSwitch<R> {
    /// Starts `job` (building what the switch installs) on a helper thread; `name` names the
    /// model in an error. Returns at once; [`DeviceSwitch::poll`] delivers the result. Not
    /// realtime-safe: spawns a thread.
    pub fn start_job(
        &mut self,
        name: String,
        job: impl FnOnce() -> Result<R, ModelError> + Send + 'static,
    ) {
        let (sender, receiver) = crossbeam_channel::bounded(1);
        let thread_sender = sender.clone();
        let spawned = std::thread::Builder::new()
            .name("stemflow-session-builder".into())
            .spawn(move || {
                let _ = thread_sender.send(job());
            });
        if let Err(error) = spawned {
            let _ = sender.send(Err(ModelError::Session {
                model: name,
                reason: format!("cannot start the session builder: {error}"),
            }));
        }
        self.pending = Some(receiver);
    }

    /// Whether a switch is under way.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// The finished session (or why it failed), once; `None` while building or when nothing
    /// was requested. Realtime-safe: a non-blocking channel poll.
    pub fn poll(&mut self) -> Option<Result<R, ModelError>> {
        let receiver = self.pending.as_ref()?;
        match receiver.try_recv() {
            Ok(result) => {
                self.pending = None;
                Some(result)
            }
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.pending = None;
                Some(Err(ModelError::Session {
                    model: "the model".into(),
                    reason: "the session builder stopped unexpectedly".into(),
                }))
            }
        }
    }
}
