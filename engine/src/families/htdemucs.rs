//! HTDemucs exported by `demucs-onnx`: waveforms in, waveform stems out.
//!
//! Graph: `mix` `[1, 2, T]` → `stems` `[1, S, 2, T]`, S = 4 or 6. Segments of T every
//! `T − T/4` (overlap from an optional `<model>.json`), triangle transition weights, as
//! `demucs/apply.py` `apply_model` (demucs 4.1.0).

use super::description::{
    check_output_len, is_fixed, ChunkCodec, FamilyPipeline, GraphIo, ModelDescription, ModelFamily,
    Recognition, MAX_CHUNK_FRAMES, MODEL_SAMPLE_RATE_HZ,
};
use super::file_edges::{window_f32, FileEdges, FileLength, FilePadding, PlannedChunk};
use super::overlap_add::{ChunkLayout, Lead};
use super::stem_sources::stem_sources_by_name;
use crate::model_error::ModelError;
use crate::runtime::runner::ModelRunner;

/// Demucs' source order.
pub(super) const DEMUCS_SOURCES: [&str; 6] =
    ["drums", "bass", "other", "vocals", "guitar", "piano"];

/// Recognises an HTDemucs graph; `None` when the ranks are not this family's.
pub(super) fn recognise(
    recognition: &Recognition<'_>,
) -> Option<Result<ModelDescription, ModelError>> {
    let (i, o) = (&recognition.input.dims, &recognition.output.dims);
    if !(i.len() == 3 && o.len() == 4) {
        return None;
    }
    Some(describe(recognition))
}

fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let (input, output) = (recognition.input, recognition.output);
    let (i, o) = (&input.dims, &output.dims);
    let t = i[2];
    let valid = input.name == "mix"
        && output.name == "stems"
        && i[1] == 2
        && is_fixed(t, MAX_CHUNK_FRAMES as i64)
        && (o[1] == 4 || o[1] == 6)
        && o[2] == 2
        && o[3] == t;
    if !valid {
        return Err(recognition.mismatch());
    }
    let chunk_frames = t as usize;
    let layout = demucs_layout(recognition, chunk_frames)?;
    let stems: Vec<String> = DEMUCS_SOURCES[..o[1] as usize]
        .iter()
        .map(|s| s.to_string())
        .collect();
    Ok(ModelDescription {
        family: ModelFamily::HtDemucs,
        pipeline: std::sync::Arc::new(HtDemucsPipeline),
        stem_sources: stem_sources_by_name(&stems, 1.0),
        stems,
        layout,
        sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
        io: GraphIo::single(&input.name, &output.name, vec![1, 2, chunk_frames]),
        params_source: recognition
            .sidecar
            .as_ref()
            .and_then(|p| p.source.clone())
            .unwrap_or_else(|| "demucs defaults".into()),
        is_float16: false,
    })
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

/// HTDemucs has nothing to configure around its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtDemucsPipeline;

impl FamilyPipeline for HtDemucsPipeline {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        let window = window(chunk_frames);
        (window.clone(), window)
    }

    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec> {
        Box::new(HtDemucsCodec {
            chunk_frames: description.layout.chunk_frames,
            num_outputs: description.stems.len(),
        })
    }

    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(DemucsEdges::new(description.layout))
    }
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

/// Feeds the waveform chunk to the graph (`[1, 2, T]`) and hands its stems (`[1, S, 2, T]`) on
/// where ONNX Runtime put them.
struct HtDemucsCodec {
    chunk_frames: usize,
    num_outputs: usize,
}

impl ChunkCodec for HtDemucsCodec {
    fn run_chunk(
        &mut self,
        runner: &mut ModelRunner,
        left: &[f32],
        right: &[f32],
        outputs: &mut dyn FnMut(&[f32]),
    ) -> Result<(), String> {
        let chunk = self.chunk_frames;
        runner.run_with(
            |input| {
                input[..chunk].copy_from_slice(left);
                input[chunk..].copy_from_slice(right);
                Ok(())
            },
            |stems| {
                check_output_len(stems.len(), self.num_outputs * 2 * chunk)?;
                outputs(stems);
                Ok(())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edges() -> DemucsEdges {
        DemucsEdges::new(ChunkLayout {
            chunk_frames: 100,
            step_frames: 75,
            lead: Lead::Zeros(0),
            window_start_frames: 0,
        })
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
