//! HTDemucs' chunking (demucs 4.1.0 `apply_model`): segments of the model's length every
//! `T − T/4` (overlap from an optional `<model>.json`), triangle transition weights, no padding
//! before the first. Its graphs: the demucs-onnx export and Stemflow's GPU graphs take the
//! waveform ([`super::waveform`]); Stemflow's CPU graph takes the spectrogram too
//! ([`super::htdemucs_stft_outside`]).

use super::description::Recognition;
use super::overlap_add::{ChunkLayout, Lead};
use crate::model_error::ModelError;

/// Demucs' source order.
pub(super) const DEMUCS_SOURCES: [&str; 6] =
    ["drums", "bass", "other", "vocals", "guitar", "piano"];

/// Metadata key of the stem names (comma-separated, in output order), as Stemflow's
/// converters write it.
pub(super) const STEMS_METADATA_KEY: &str = "stemflow.stems";

/// The stems of an HTDemucs graph with `num_stems` outputs: its [`STEMS_METADATA_KEY`]
/// metadata, else demucs' sources for 4 or 6.
pub(super) fn demucs_stems(
    recognition: &Recognition<'_>,
    num_stems: usize,
) -> Result<Vec<String>, ModelError> {
    match recognition.signature.metadata.get(STEMS_METADATA_KEY) {
        Some(names) => {
            let names: Vec<String> = names.split(',').map(|n| n.trim().to_owned()).collect();
            if names.len() != num_stems || names.iter().any(String::is_empty) {
                return Err(recognition.params_error(format!(
                    "its {STEMS_METADATA_KEY} metadata names {} stems, the graph has {num_stems}",
                    names.len()
                )));
            }
            Ok(names)
        }
        None if num_stems == 4 || num_stems == 6 => Ok(DEMUCS_SOURCES[..num_stems]
            .iter()
            .map(|s| s.to_string())
            .collect()),
        None => Err(recognition.params_error(format!(
            "a {num_stems}-stem HTDemucs graph needs its stem names in {STEMS_METADATA_KEY} \
             metadata"
        ))),
    }
}

/// `apply_model`'s chunks: the model's segment every `segment − segment·overlap` frames
/// (overlap 0.25 unless the sidecar says otherwise), no padding before the first.
pub(super) fn demucs_layout(
    recognition: &Recognition<'_>,
    chunk_frames: usize,
) -> Result<ChunkLayout, ModelError> {
    let overlap = recognition
        .sidecar
        .as_ref()
        .and_then(|p| p.f64("overlap"))
        .unwrap_or(0.25);
    if !(0.0..0.95).contains(&overlap) {
        return Err(recognition.params_error(format!("overlap {overlap} out of range 0–0.95")));
    }
    let step_frames = ((1.0 - overlap) * chunk_frames as f64) as usize;
    Ok(ChunkLayout {
        chunk_frames,
        step_frames: step_frames.max(1),
        lead: Lead::Zeros(0),
        window_start_frames: 0,
    })
}

/// demucs' transition weights: a triangle `1..n/2, n−n/2..1`, divided by its maximum
/// (transition_power 1). The same for every chunk.
pub(super) fn window(chunk_frames: usize) -> Vec<f64> {
    let n = chunk_frames;
    let w: Vec<f64> = (1..=n / 2)
        .chain((1..=n - n / 2).rev())
        .map(|v| v as f64)
        .collect();
    let max = w.iter().copied().fold(0.0, f64::max);
    w.into_iter().map(|v| v / max).collect()
}

/// [`window`] for the first chunk and every other.
pub(super) fn windows(chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
    let window = window(chunk_frames);
    (window.clone(), window)
}
