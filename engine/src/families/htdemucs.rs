//! HTDemucs' chunking (demucs 4.1.0 `apply_model`): segments of the model's length every
//! `T − T/4` (overlap from an optional `<model>.json`), triangle transition weights, no padding
//! before the first. Its graphs: the demucs-onnx export and Stemflow's GPU graphs take the
//! waveform ([`super::waveform`]); Stemflow's CPU graph takes the spectrogram too
//! ([`super::htdemucs_stft_outside`]).

use super::description::{ModelFamily, Recognition, MODEL_SAMPLE_RATE_HZ};
use super::family_setup::FamilySetup;
use super::file_edges::{window_f32, FileEdges, FileLength, FilePadding, PlannedChunk};
use super::overlap_add::{ChunkLayout, Lead};
use super::stem_sources::stem_sources_by_name;
use crate::model_error::ModelError;

/// Demucs' source order.
pub(super) const DEMUCS_SOURCES: [&str; 6] =
    ["drums", "bass", "other", "vocals", "guitar", "piano"];

/// Metadata key of the stem names (comma-separated, in output order), as Stemflow's
/// converters write it.
pub(super) const STEMS_METADATA_KEY: &str = "stemflow.stems";

/// What an HTDemucs graph of `num_stems` outputs and `chunk_frames`-frame chunks is, run by a
/// pipeline of `params`: its stems ([`demucs_stems`]), `apply_model`'s chunks
/// ([`demucs_layout`]), and the sidecar's source or demucs' defaults.
pub(super) fn demucs_setup<P>(
    recognition: &Recognition<'_>,
    params: P,
    num_stems: usize,
    chunk_frames: usize,
) -> Result<FamilySetup<P>, ModelError> {
    let stems = demucs_stems(recognition, num_stems)?;
    Ok(FamilySetup {
        family: ModelFamily::HtDemucs,
        params,
        stem_sources: stem_sources_by_name(&stems, 1.0),
        stems,
        layout: demucs_layout(recognition, chunk_frames)?,
        sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
        source: recognition
            .sidecar
            .as_ref()
            .and_then(|p| p.source.clone())
            .unwrap_or_else(|| "demucs defaults".into()),
    })
}

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
    Ok(ChunkLayout::new(
        chunk_frames,
        step_frames.max(1),
        Lead::Zeros(0),
    ))
}

/// `apply_model`'s whole file (`split=True`, `shifts=0`): a segment at every multiple of the
/// stride below the file's length; a segment that reaches past the end has only the
/// `L = length − offset` frames of the file it covers, and runs as `TensorChunk.padded`
/// gives it to the model: centred, starting `(segment − L) / 2` frames before its offset (audio
/// from before it, or silence before the file), silence past the end; `center_trim` keeps the
/// middle `L` frames of its output, weighted by the first `L` weights.
#[derive(Debug)]
pub(super) struct DemucsEdges {
    segment_frames: usize,
    stride_frames: usize,
    window: std::sync::Arc<[f32]>,
}

impl DemucsEdges {
    pub(super) fn new(layout: ChunkLayout) -> Self {
        Self {
            segment_frames: layout.chunk_frames,
            stride_frames: layout.step_frames,
            window: window_f32(&window(layout.chunk_frames)),
        }
    }
}

impl FileEdges for DemucsEdges {
    fn padding(&self, _length: FileLength) -> Option<FilePadding> {
        Some(FilePadding::zeros(0))
    }

    fn dest(&self, index: usize) -> usize {
        index * self.stride_frames
    }

    fn plan(&self, index: usize, _: &FilePadding, length: FileLength) -> Option<PlannedChunk> {
        let segment = self.segment_frames;
        let offset = self.dest(index);
        let covered = match length {
            FileLength::AtLeast(n) if offset + segment <= n => segment,
            FileLength::AtLeast(_) => return None,
            FileLength::Exactly(n) if offset < n => (n - offset).min(segment),
            FileLength::Exactly(_) => return None,
        };
        let delta = segment - covered;
        Some(PlannedChunk {
            input_start: offset as isize - (delta / 2) as isize,
            output_from: delta / 2,
            ..PlannedChunk::at(offset, segment, covered, self.window.clone())
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn edges() -> DemucsEdges {
        DemucsEdges::new(ChunkLayout::new(100, 75, Lead::Zeros(0)))
    }

    #[test]
    fn a_segment_past_the_end_is_centred_on_audio_before_it_as_tensor_chunk_pads_it() {
        let edges = edges();
        let padding = edges.padding(FileLength::AtLeast(0)).unwrap();
        // 260 frames: offsets 0, 75, 150, 225; the last covers 35 frames.
        let length = FileLength::Exactly(260);
        let last = edges.plan(3, &padding, length).unwrap();
        // delta = 65: input from 225 − 32, the output's middle 35 frames from 32 on.
        assert_eq!(
            (
                last.input_start,
                last.output_from,
                last.output_frames,
                last.dest
            ),
            (193, 32, 35, 225)
        );
        assert!(edges.plan(4, &padding, length).is_none());
        let whole = edges.plan(2, &padding, length).unwrap();
        assert_eq!((whole.input_start, whole.output_frames), (150, 100));
        // Streaming: the segment at 150 runs once 250 frames are in, not before.
        assert!(edges.plan(2, &padding, FileLength::AtLeast(249)).is_none());
        assert_eq!(
            edges.plan(2, &padding, FileLength::AtLeast(250)),
            Some(whole)
        );
        // A file shorter than a segment sits in its middle, silence before and after.
        let short = edges.plan(0, &padding, FileLength::Exactly(40)).unwrap();
        assert_eq!(
            (short.input_start, short.output_from, short.output_frames),
            (-30, 30, 40)
        );
    }
}
