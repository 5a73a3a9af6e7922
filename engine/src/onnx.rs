//! Separators that run an ONNX model through [`crate::runtime`].
//!
//! [`WaveformSeparator`] runs the raw-waveform contract of exported Demucs-style models: input
//! `mix` `[1, 2, T]` at 44.1 kHz, output `stems` `[1, S, 2, T]` with S = 4 (drums, bass, other,
//! vocals) or 6 (+ guitar, piano), on fixed, non-overlapping segments of `T` frames (static
//! shapes, which every execution provider prefers and DirectML/MIGraphX need). Stems beyond
//! vocals, drums and bass land in `Other`, which the pipeline computes as the residual.

use std::path::Path;
use std::sync::Arc;

use ort::session::Session;
use ort::value::Tensor;

use crate::runtime::devices::{DeviceChoice, DeviceId};
use crate::runtime::session::{acquire_session, AcquiredSession, ModelBytes};
use crate::separator::{stem_channel, PlanarBlock, Separator};
use crate::stem::Stem;

/// The rate waveform models run at.
pub const WAVEFORM_SAMPLE_RATE_HZ: u32 = 44_100;
/// Largest segment accepted (a hostile file cannot make us allocate gigabytes).
const MAX_SEGMENT_FRAMES: i64 = 1 << 22;
/// Demucs' stem order in its output tensor.
const DEMUCS_STEM_ORDER: [Option<Stem>; 6] = [
    Some(Stem::Drums),
    Some(Stem::Bass),
    None, // other: the residual
    Some(Stem::Vocals),
    None, // guitar → Other
    None, // piano → Other
];

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

/// A raw-waveform model on fixed segments. See the module docs.
pub struct WaveformSeparator {
    source: SessionSource,
    session: AcquiredSession,
    active: ActiveDevice,
    segment_frames: usize,
    num_model_stems: usize,
    /// `[1, 2, T]` input, reused.
    input: Vec<f32>,
    /// The previous segment's stems, emitted one segment late: `[stem channel][frame]`.
    pending: PlanarBlock,
}

impl WaveformSeparator {
    /// Loads `path`, checks its signature and builds a warm session on `device` (falling back to
    /// the CPU with the reason recorded). Not realtime-safe.
    pub fn load(path: &Path, device: DeviceChoice) -> Result<Self, String> {
        let model = Arc::new(ModelBytes::read(path)?);
        let (segment_frames, num_model_stems) = {
            // Validate on a CPU session first: a broken file is refused before any device is tried.
            let session =
                crate::runtime::session::build_session(DeviceId::CPU, &model.bytes, 1)
                    .map_err(|e| format!("{}: not a usable ONNX model: {e}", model.name))?;
            validate_signature(&session).map_err(|e| format!("{}: {e}", model.name))?
        };
        let warm_up_segment = segment_frames;
        let warm_up: Arc<dyn Fn(&mut Session) -> Result<(), String> + Send + Sync> =
            Arc::new(move |session: &mut Session| {
                run_segment(session, &vec![0.0; 2 * warm_up_segment], warm_up_segment).map(|_| ())
            });
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
            segment_frames,
            num_model_stems,
            input: vec![0.0; 2 * segment_frames],
            pending: PlanarBlock::new(crate::separator::SEPARATED_CHANNELS, segment_frames),
        })
    }

    /// The session in use (shared with other instances running the same model on the same device).
    pub fn session(&self) -> &AcquiredSession {
        &self.session
    }

    fn infer(&mut self) -> Result<Vec<f32>, String> {
        let segment = self.segment_frames;
        let input = &self.input;
        self.session
            .session
            .with_session(|session| run_segment(session, input, segment))
    }
}

/// Checks `mix [1, 2, T]` → `stems [1, S, 2, T]`. Returns `(T, S)`.
fn validate_signature(session: &Session) -> Result<(usize, usize), String> {
    let describe = |outlets: &[ort::value::Outlet]| -> String {
        outlets
            .iter()
            .map(|o| match o.dtype().tensor_shape() {
                Some(shape) => format!("{} {:?}", o.name(), shape.iter().collect::<Vec<_>>()),
                None => format!("{} (not a tensor)", o.name()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let expected = "expected input `mix` [1, 2, T] and output `stems` [1, S, 2, T] (S = 4 or 6, T fixed)";
    let mismatch = || {
        format!(
            "signature mismatch: {expected}; found inputs {} and outputs {}",
            describe(session.inputs()),
            describe(session.outputs())
        )
    };
    let (Some(input), Some(output)) = (session.inputs().first(), session.outputs().first()) else {
        return Err(mismatch());
    };
    let input_shape: Vec<i64> = input.dtype().tensor_shape().ok_or_else(mismatch)?.iter().copied().collect();
    let output_shape: Vec<i64> =
        output.dtype().tensor_shape().ok_or_else(mismatch)?.iter().copied().collect();
    let is_f32 = |o: &ort::value::Outlet| {
        o.dtype().tensor_type() == Some(ort::value::TensorElementType::Float32)
    };
    let segment = *input_shape.get(2).unwrap_or(&-1);
    let valid = input.name() == "mix"
        && output.name() == "stems"
        && is_f32(input)
        && is_f32(output)
        && input_shape.len() == 3
        && input_shape[0] == 1
        && input_shape[1] == 2
        && segment > 0
        && segment <= MAX_SEGMENT_FRAMES
        && output_shape.len() == 4
        && output_shape[0] == 1
        && (output_shape[1] == 4 || output_shape[1] == 6)
        && output_shape[2] == 2
        && output_shape[3] == segment;
    if !valid {
        return Err(mismatch());
    }
    Ok((segment as usize, output_shape[1] as usize))
}

/// Runs one segment: `input` is `[2 × T]` planar. Returns the `stems` tensor flattened.
fn run_segment(session: &mut Session, input: &[f32], segment_frames: usize) -> Result<Vec<f32>, String> {
    let tensor = Tensor::from_array(([1usize, 2, segment_frames], input.to_vec()))
        .map_err(|e| e.to_string())?;
    let outputs = session
        .run(ort::inputs!["mix" => tensor])
        .map_err(|e| e.to_string())?;
    let stems = outputs["stems"]
        .try_extract_array::<f32>()
        .map_err(|e| e.to_string())?;
    Ok(stems.iter().copied().collect())
}

impl Separator for WaveformSeparator {
    fn name(&self) -> &str {
        &self.source.model.name
    }

    fn sample_rate_hz(&self) -> u32 {
        WAVEFORM_SAMPLE_RATE_HZ
    }

    fn hop_frames(&self) -> usize {
        self.segment_frames
    }

    fn latency_frames(&self) -> usize {
        // A segment's stems leave one hop after the segment is complete.
        self.segment_frames
    }

    fn reset(&mut self) {
        self.pending.clear();
    }

    fn process_hop(&mut self, input: &PlanarBlock, stems: &mut PlanarBlock) {
        let t = self.segment_frames;
        // Emit the previous segment's stems: output frame j = stems of input frame j − T.
        for channel in 0..stems.num_channels() {
            stems.channel_mut(channel).copy_from_slice(self.pending.channel(channel));
        }
        self.input[..t].copy_from_slice(input.channel(0));
        self.input[t..].copy_from_slice(input.channel(1));
        let result = self.infer().or_else(|error| {
            // The device failed mid-session: continue on the CPU, the same way a switch does.
            log::warn!("{}: inference failed on {}: {error}", self.source.model.name, self.active.actual);
            let session = acquire_session(
                &self.source.model,
                DeviceChoice::Device(DeviceId::CPU),
                self.source.warm_up.as_ref(),
            )?;
            self.active.fallback_reason = Some(format!("{} failed: {error}; running on cpu", self.active.actual));
            self.active.actual = session.device();
            self.session = session;
            self.infer()
        });
        self.pending.clear();
        match result {
            Ok(output) => {
                for (index, stem) in DEMUCS_STEM_ORDER.iter().enumerate().take(self.num_model_stems) {
                    let Some(stem) = stem else { continue };
                    for channel in 0..2 {
                        let start = (index * 2 + channel) * t;
                        self.pending
                            .channel_mut(stem_channel(stem.index(), channel))
                            .copy_from_slice(&output[start..start + t]);
                    }
                }
            }
            Err(error) => {
                // Nothing can run the model: its stems stay silent and Other carries the mix.
                log::error!("{}: {error}", self.source.model.name);
            }
        }
    }

    fn session_source(&self) -> Option<SessionSource> {
        Some(self.source.clone())
    }

    fn install_session(&mut self, session: AcquiredSession) {
        self.active = ActiveDevice {
            requested: session.requested,
            actual: session.device(),
            fallback_reason: session.fallback_reason(),
        };
        self.session = session;
    }

    fn active_device(&self) -> Option<ActiveDevice> {
        Some(self.active.clone())
    }
}
