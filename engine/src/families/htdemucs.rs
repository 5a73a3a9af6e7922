//! HTDemucs exported by `demucs-onnx`: waveforms in, waveform stems out.
//!
//! Graph: `mix` `[1, 2, T]` → `stems` `[1, S, 2, T]`, S = 4 or 6. Segments of T every
//! `T − T/4` (overlap from an optional `<model>.json`), triangle transition weights, as
//! `demucs/apply.py` `apply_model` (demucs 4.1.0).

use super::description::{
    check_output_len, is_fixed, ChunkCodec, FamilyPipeline, GraphIo, ModelDescription, ModelFamily,
    Recognition, MAX_CHUNK_FRAMES, MODEL_SAMPLE_RATE_HZ,
};
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
