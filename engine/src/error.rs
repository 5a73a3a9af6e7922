//! [`EngineError`]: what can go wrong setting up or feeding the engine, and the sample-rate
//! check every entry point shares.

use crate::model_error::ModelError;
use crate::separator::SeparatorError;

/// Errors from setting up or feeding the engine. Never produced on the audio thread.
#[derive(Debug)]
pub enum EngineError {
    /// The host sample rate cannot be used (zero, negative, not finite or out of range).
    UnsupportedSampleRate(f32),
    /// A block size of zero or one beyond what the stream was built for.
    InvalidBlockSize(usize),
    /// The resampler could not be built for this pair of rates.
    Resampler(String),
    /// Reading or writing an audio file failed.
    Io(String),
    /// The worker thread could not be started or died.
    Worker(String),
    /// The separator failed while separating (a model error or NaN output): the stems are
    /// incomplete.
    Separator(SeparatorError),
    /// The model cannot be loaded.
    Model(ModelError),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::UnsupportedSampleRate(sr) => write!(
                f,
                "unsupported sample rate {sr} Hz (Stemflow runs at {MIN_SAMPLE_RATE_HZ}–{MAX_SAMPLE_RATE_HZ} Hz)"
            ),
            EngineError::InvalidBlockSize(n) => write!(f, "invalid block size {n}"),
            EngineError::Resampler(e) => write!(f, "resampler: {e}"),
            EngineError::Io(e) => write!(f, "{e}"),
            EngineError::Worker(e) => write!(f, "worker thread: {e}"),
            EngineError::Separator(e) => write!(f, "{e}"),
            EngineError::Model(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EngineError {}

/// The lowest host sample rate Stemflow accepts.
pub const MIN_SAMPLE_RATE_HZ: u32 = 1_000;
/// The highest host sample rate Stemflow accepts.
pub const MAX_SAMPLE_RATE_HZ: u32 = 1_536_000;

/// Validates a host sample rate and rounds it to whole hertz.
pub fn validate_sample_rate(sample_rate_hz: f32) -> Result<u32, EngineError> {
    if !sample_rate_hz.is_finite() {
        return Err(EngineError::UnsupportedSampleRate(sample_rate_hz));
    }
    let rounded = sample_rate_hz.round();
    if rounded < MIN_SAMPLE_RATE_HZ as f32 || rounded > MAX_SAMPLE_RATE_HZ as f32 {
        return Err(EngineError::UnsupportedSampleRate(sample_rate_hz));
    }
    Ok(rounded as u32)
}
