//! Sessions: built on the device the user picked with a visible fallback, warmed up, and shared
//! between plugin instances that run the same model on the same device.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use ort::session::Session;
use parking_lot::Mutex;

use super::build::{build_session_with, default_intra_threads, thread_budget, ThreadBudget};
use super::devices::{candidates_for, devices, DeviceChoice, DeviceId};
use super::fair_mutex::FairMutex;
use super::gpu_tuning::GpuTuning;
use super::graph_cache::cache_entry;
use super::library::runtime;
use super::model_file::ModelBytes;
use super::session_slot::SessionSlot;
use crate::model_error::ModelError;

/// Runs a new session once on silence, so it is warm before it serves audio
/// ([`SessionSlot::warm_up`]).
pub type WarmUp = Arc<dyn Fn(&mut SessionSlot) -> Result<(), String> + Send + Sync>;

/// Numeric precision a session runs at. On a GPU it picks the graph: `NAME.gpu.onnx` (float32)
/// or `NAME.gpu-f16.onnx` (float16: matrix products and convolutions in float16, norms,
/// softmax and the STFT in float32); the CPU always runs `NAME.onnx` in float32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// 32-bit float.
    #[default]
    F32,
    /// 16-bit float where it pays (GPUs only).
    F16,
}

/// The precision GPU graphs run at unless the user picks the other one: float32. No GPU was
/// lent when this was chosen; float16 becomes the default once a measurement on one shows it
/// faster at an SDR that does not matter (its SDR against float32 on the CPU: docs/models.md).
pub const DEFAULT_GPU_PRECISION: Precision = Precision::F32;

impl Precision {
    /// The id used on the command line and in saved state: `f32` or `f16`.
    pub fn id(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
        }
    }

    /// Parses [`Precision::id`] (also `float32`, `float16`, any case).
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "f32" | "float32" | "fp32" => Some(Precision::F32),
            "f16" | "float16" | "fp16" | "half" => Some(Precision::F16),
            _ => None,
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "float32",
            Precision::F16 => "float16",
        })
    }
}

/// What makes two sessions interchangeable.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionKey {
    /// The model's SHA-256.
    pub model_sha256: String,
    /// Where it runs.
    pub device: DeviceId,
    /// At what precision.
    pub precision: Precision,
    /// How it is set up on a GPU (the default on the CPU, where none of it applies).
    pub tuning: GpuTuning,
}

/// A session that several plugin instances may share. Inference locks it (off the audio
/// thread); the lock serves instances in the order they asked ([`FairMutex`]), so one running
/// back to back never starves another.
pub struct SharedSession {
    key: SessionKey,
    slot: FairMutex<SessionSlot>,
}

impl SharedSession {
    /// The device it runs on.
    pub fn device(&self) -> DeviceId {
        self.key.device
    }

    /// Its cache key.
    pub fn key(&self) -> &SessionKey {
        &self.key
    }

    /// Runs `f` with exclusive use of the session, after the instances that asked before. Not
    /// realtime-safe: locks.
    pub fn with_session<R>(&self, f: impl FnOnce(&mut Session) -> R) -> R {
        f(&mut self.slot.lock().session)
    }

    /// [`SharedSession::with_session`] with the whole slot (bound buffers included). Not
    /// realtime-safe: locks.
    pub fn with_slot<R>(&self, f: impl FnOnce(&mut SessionSlot) -> R) -> R {
        f(&mut self.slot.lock())
    }

    /// Whether runs go through bound buffers (a GPU with I/O binding).
    pub fn binds_io(&self) -> bool {
        self.key.tuning.binds_io(self.key.device)
    }

    /// How many instances wait for the session now (diagnostics). Not realtime-safe: locks
    /// briefly.
    pub fn waiting(&self) -> u64 {
        self.slot.waiting()
    }
}

/// A session and how it came to run where it runs.
#[derive(Clone)]
pub struct AcquiredSession {
    /// The session.
    pub session: Arc<SharedSession>,
    /// What was asked for.
    pub requested: DeviceChoice,
    /// Devices tried before, with their errors.
    pub failures: Vec<(DeviceId, String)>,
}

impl AcquiredSession {
    /// The device it runs on.
    pub fn device(&self) -> DeviceId {
        self.session.device()
    }

    /// Why it does not run on the requested device, if it does not.
    pub fn fallback_reason(&self) -> Option<String> {
        if self.failures.is_empty() {
            return None;
        }
        Some(
            self.failures
                .iter()
                .map(|(id, e)| format!("{id} failed: {e}"))
                .collect::<Vec<_>>()
                .join("; ")
                + &format!("; running on {}", self.device()),
        )
    }
}

/// Whether a new session on `device` runs once on silence before it serves audio. In a plugin
/// always: the first run is slow (the audio thread would see an underrun) and a GPU provider that
/// fails must fall back before play. A command-line run on the CPU skips it: it runs no inference
/// the reference pipelines don't, and a model that fails shows at its first chunk anyway.
fn needs_warm_up(device: DeviceId) -> bool {
    thread_budget() == ThreadBudget::Plugin || device != DeviceId::CPU
}

static SESSIONS: Mutex<Option<HashMap<SessionKey, Weak<SharedSession>>>> = Mutex::new(None);

/// A CPU session built to read a model's signature, by model SHA-256, kept for that model's own
/// session: a start then builds one session, not two (HTDemucs, cached: 1.7 s saved).
static SPARE_CPU_SESSION: Mutex<Option<(String, Session)>> = Mutex::new(None);

/// Builds a CPU session of `model` as [`acquire_session`] would (same threads, same graph cache),
/// runs `f` on it and keeps it as the spare that `acquire_session` takes for the same model on
/// the CPU. Whoever asks must [`discard_spare_session`] once the model is loaded or listed.
/// Not realtime-safe.
pub fn with_spare_cpu_session<R>(
    model: &ModelBytes,
    f: impl FnOnce(&Session) -> R,
) -> Result<R, String> {
    let session = build_session_with(
        DeviceId::CPU,
        &model.bytes,
        default_intra_threads(),
        cache_entry(&model.sha256, DeviceId::CPU).as_ref(),
        &GpuTuning::default(),
    )?;
    let result = f(&session);
    *SPARE_CPU_SESSION.lock() = Some((model.sha256.clone(), session));
    Ok(result)
}

/// Drops the spare session, if any (see [`with_spare_cpu_session`]). Not realtime-safe.
pub fn discard_spare_session() {
    SPARE_CPU_SESSION.lock().take();
}

/// The spare session when it is `model_sha256`'s.
fn take_spare_session(model_sha256: &str) -> Option<Session> {
    let mut spare = SPARE_CPU_SESSION.lock();
    match spare.as_ref() {
        Some((sha256, _)) if sha256 == model_sha256 => spare.take().map(|(_, session)| session),
        _ => None,
    }
}

/// Gets a session for `model` on the best device for `choice`: shared if another instance already
/// has one for the same model, device and precision, else built and warmed up with `warm_up`.
/// Devices that fail are recorded and the next is tried, the CPU last. Not realtime-safe.
pub fn acquire_session(
    model: &ModelBytes,
    choice: DeviceChoice,
    warm_up: &dyn Fn(&mut SessionSlot) -> Result<(), String>,
) -> Result<AcquiredSession, ModelError> {
    runtime().map_err(|e| ModelError::Runtime(e.to_string()))?;
    let mut failures = Vec::new();
    // Read once, and only when a GPU is tried (the CPU's sessions take none of it).
    let mut gpu_tuning = None;
    for device in candidates_for(choice, devices()) {
        let tuning = if device == DeviceId::CPU {
            GpuTuning::default()
        } else {
            *gpu_tuning.get_or_insert_with(GpuTuning::current)
        };
        let key = SessionKey {
            model_sha256: model.sha256.clone(),
            device,
            precision: Precision::F32,
            tuning,
        };
        // Held while building, so two instances asking at once share one session.
        let mut sessions = SESSIONS.lock();
        let sessions = sessions.get_or_insert_with(HashMap::new);
        sessions.retain(|_, weak| weak.strong_count() > 0);
        if let Some(session) = sessions.get(&key).and_then(Weak::upgrade) {
            return Ok(AcquiredSession {
                session,
                requested: choice,
                failures,
            });
        }
        let started = std::time::Instant::now();
        let spare = (device == DeviceId::CPU)
            .then(|| take_spare_session(&model.sha256))
            .flatten();
        let built = match spare {
            Some(session) => Ok(session),
            None => build_session_with(
                device,
                &model.bytes,
                default_intra_threads(),
                cache_entry(&model.sha256, device).as_ref(),
                &tuning,
            ),
        }
        .map(|session| SessionSlot::new(session, device, tuning))
        .and_then(|mut slot| match needs_warm_up(device) {
            true => warm_up(&mut slot).map(|()| slot),
            false => Ok(slot),
        });
        match built {
            Ok(slot) => {
                if device != DeviceId::CPU {
                    // The time tells a slow start (libraries, cuDNN's search, the warm-up)
                    // from slow runs.
                    log::info!(
                        "{}: {device}: {}; session ready in {} ms",
                        model.name,
                        tuning.summary(),
                        started.elapsed().as_millis()
                    );
                }
                let session = Arc::new(SharedSession {
                    key: key.clone(),
                    slot: FairMutex::new(slot),
                });
                sessions.insert(key, Arc::downgrade(&session));
                if !failures.is_empty() {
                    // (Info: every front end shows the fallback itself, from `failures`.)
                    let failed: Vec<String> = failures
                        .iter()
                        .map(|(device, error)| format!("{device}: {error}"))
                        .collect();
                    log::info!(
                        "{}: falling back to {device} ({})",
                        model.name,
                        failed.join("; ")
                    );
                }
                return Ok(AcquiredSession {
                    session,
                    requested: choice,
                    failures,
                });
            }
            Err(error) => failures.push((device, error)),
        }
    }
    Err(ModelError::Session {
        model: model.name.clone(),
        reason: failures
            .iter()
            .map(|(id, e)| format!("{id}: {e}"))
            .collect::<Vec<_>>()
            .join("; "),
    })
}

/// How many distinct live sessions exist (for tests and diagnostics).
pub fn live_session_count() -> usize {
    SESSIONS
        .lock()
        .as_ref()
        .map(|s| s.values().filter(|w| w.strong_count() > 0).count())
        .unwrap_or(0)
}
