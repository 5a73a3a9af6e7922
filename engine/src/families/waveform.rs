//! Waveform in, waveform stems out: the graphs Stemflow's converters make for GPUs, of any
//! family (the STFT and its inverse inside, a batch of chunks per run), and HTDemucs as
//! demucs-onnx exports it.
//!
//! Graph: `mix` `[B, 2, T]` → `stems` `[B, S, 2, T]`, B fixed at 1 or symbolic (a batch).
//! The family — HTDemucs unless the graph's `stemflow.family` metadata names another — gives
//! the chunks, their overlap-add weights, the stems and the rate; the codec only copies the
//! chunks in and the stems out, several chunks per run when the graph takes a batch.

use std::sync::Arc;

use super::description::{
    check_output_len, is_fixed, ChunkCodec, ChunkRun, FamilyPipeline, GraphIo, ModelDescription,
    Recognition, MAX_CHUNK_FRAMES, MAX_MODEL_STEMS, SEGMENT_RANGE, STEMS_RANGE,
};
use super::file_edges::FileEdges;
use super::htdemucs::{demucs_setup, DemucsEdges};
use super::stem_sources::ReferenceSources;
use super::waveform_family::WaveformFamily;
use crate::model_error::ModelError;
use crate::runtime::device_id::DeviceId;
use crate::runtime::runner::ModelRunner;

/// The graph's input and output names.
const MIX: &str = "mix";
const STEMS: &str = "stems";
/// Metadata key naming the family, written by Stemflow's converters.
pub const FAMILY_METADATA_KEY: &str = "stemflow.family";
/// The most chunks one run of a graph that takes a batch is given on a GPU (what MSST runs at
/// once): memory grows with it, the speed-up flattens.
pub const MAX_BATCH_CHUNKS: usize = 4;

/// Whether a graph is a waveform graph, by its ranks (`[B, 2, T]` → `[B, S, 2, T]`).
pub(super) fn claims(recognition: &Recognition<'_>) -> bool {
    let (i, o) = (&recognition.input.dims, &recognition.output.dims);
    i.len() == 3 && o.len() == 4
}

pub(super) fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let (input, output) = (recognition.input, recognition.output);
    let (i, o) = (&input.dims, &output.dims);
    let t = i[2];
    let is_batch_ok = i[0] == o[0] || (i[0] < 0 && o[0] < 0);
    let shaped = input.name == MIX
        && output.name == STEMS
        && i[1] == 2
        && o[2] == 2
        && o[3] == t
        && is_batch_ok;
    // The family's shape with a size out of range: say which, not "mismatch".
    if shaped {
        recognition.check_range(&SEGMENT_RANGE, input, 2)?;
        recognition.check_range(&STEMS_RANGE, output, 1)?;
    }
    let valid = input.name == MIX
        && output.name == STEMS
        && i[1] == 2
        && is_fixed(t, MAX_CHUNK_FRAMES as i64)
        && is_fixed(o[1], MAX_MODEL_STEMS)
        && o[2] == 2
        && o[3] == t
        && (i[0] == o[0] || (i[0] < 0 && o[0] < 0));
    if !valid {
        return Err(recognition.mismatch());
    }
    let (chunk_frames, num_stems) = (t as usize, o[1] as usize);
    let family = recognition
        .signature
        .metadata
        .get(FAMILY_METADATA_KEY)
        .map(|f| f.to_ascii_lowercase());
    let family = match family.as_deref() {
        None | Some("htdemucs") => htdemucs_family(recognition, chunk_frames, num_stems)?,
        Some("roformer") => super::roformer::waveform_family(recognition, chunk_frames, num_stems)?,
        Some("spleeter") => super::spleeter::waveform_family(recognition, chunk_frames, num_stems)?,
        Some("mdx_net") => super::mdx_net::waveform_family(recognition, chunk_frames, num_stems)?,
        Some(other) => {
            return Err(recognition.params_error(format!(
                "a waveform graph of the {other} family, which this version of Stemflow does \
                 not run"
            )))
        }
    };
    Ok(ModelDescription {
        family: family.family,
        pipeline: Arc::new(WaveformPipeline {
            windows: family.windows,
            reference: family.reference,
            takes_batch: i[0] < 0,
        }),
        stem_sources: family.stem_sources,
        stems: family.stems,
        layout: family.layout,
        sample_rate_hz: family.sample_rate_hz,
        io: GraphIo::single(MIX, STEMS, vec![1, 2, chunk_frames]),
        params_source: family.params_source,
        is_float16: false,
    })
}

/// HTDemucs (a demucs-onnx export: 4 or 6 stems; a GPU graph: the stems in its metadata).
fn htdemucs_family(
    recognition: &Recognition<'_>,
    chunk_frames: usize,
    num_stems: usize,
) -> Result<WaveformFamily, ModelError> {
    let setup = demucs_setup(recognition, (), num_stems, chunk_frames)?;
    Ok(setup.waveform_with(super::htdemucs::windows, |()| None))
}

/// The family's overlap-add weights, and whether the graph takes a batch.
pub struct WaveformPipeline {
    windows: fn(usize) -> (Vec<f64>, Vec<f64>),
    /// The family's own pipeline, for its reference's whole files (`None`: HTDemucs).
    reference: Option<Arc<dyn FamilyPipeline>>,
    takes_batch: bool,
}

impl std::fmt::Debug for WaveformPipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaveformPipeline")
            .field("takes_batch", &self.takes_batch)
            .finish()
    }
}

impl FamilyPipeline for WaveformPipeline {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        (self.windows)(chunk_frames)
    }

    /// The family's reference chunking: the same chunks as its CPU graph's.
    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        match &self.reference {
            Some(reference) => reference.file_edges(description),
            None => Box::new(DemucsEdges::new(description.layout)),
        }
    }

    fn reference_sources(&self, description: &ModelDescription) -> ReferenceSources {
        match &self.reference {
            Some(reference) => reference.reference_sources(description),
            None => ReferenceSources::by_name(&description.stems, description.stem_sources),
        }
    }

    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec> {
        Box::new(WaveformCodec {
            chunk_frames: description.layout.chunk_frames,
            num_outputs: description.stems.len(),
            max_batch: if self.takes_batch {
                MAX_BATCH_CHUNKS
            } else {
                1
            },
        })
    }
}

/// Feeds chunks to the graph (`[B, 2, T]`) and hands their stems (`[B, S, 2, T]`) on where
/// ONNX Runtime put them.
struct WaveformCodec {
    chunk_frames: usize,
    num_outputs: usize,
    max_batch: usize,
}

impl ChunkCodec for WaveformCodec {
    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String> {
        let outputs = run.outputs;
        self.run_chunks(run.runner, &[run.input], &mut |_, values| outputs(values))
    }

    fn max_batch_chunks(&self) -> usize {
        self.max_batch
    }

    fn run_chunks(
        &mut self,
        runner: &mut ModelRunner,
        chunks: &[[&[f32]; 2]],
        outputs: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), String> {
        // On the CPU (a fallback) one chunk at a time: a batch only multiplies the memory.
        let batch = match runner.active_device().actual {
            DeviceId::CPU => 1,
            _ => self.max_batch,
        };
        let chunk = self.chunk_frames;
        let item_len = self.num_outputs * 2 * chunk;
        for (group_index, group) in chunks.chunks(batch.max(1)).enumerate() {
            let first = group_index * batch.max(1);
            runner.run_batch(
                group.len(),
                |inputs| {
                    for (item, [left, right]) in group.iter().enumerate() {
                        let input = &mut inputs[0][item * 2 * chunk..][..2 * chunk];
                        input[..chunk].copy_from_slice(left);
                        input[chunk..].copy_from_slice(right);
                    }
                    Ok(())
                },
                |values| {
                    let stems = values[0];
                    check_output_len(stems.len(), group.len() * item_len)?;
                    for (item, values) in stems.chunks_exact(item_len).enumerate() {
                        outputs(first + item, values);
                    }
                    Ok(())
                },
            )?;
        }
        Ok(())
    }
}
