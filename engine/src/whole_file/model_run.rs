//! [`ModelRun`]: a model run over a whole file as its reference runs it — the family's
//! [`FileEdges`] plan each chunk, the codec runs them in batches
//! ([`crate::families::description::ChunkCodec::run_chunks`]), and the weighted outputs are
//! handed out as stems as soon as no later chunk reaches them. It holds about two chunks of
//! input and one of sums whatever the file's length.

use crate::families::file_edges::{FileEdges, FileLength, FilePadding, Fill, PlannedChunk};
use crate::families::stem_sources::StemSource;
use crate::families::ModelCore;
use crate::runtime::devices::ActiveDevice;
use crate::separator::{SeparatorError, SeparatorInfo};
use crate::stem::NUM_SEPARATED_STEMS;

use super::file_run::{FileRun, FrameQueue, MIX_PLANE, OTHER_PLANE};
use super::options::{OtherStem, WholeFileOptions};
use super::overlap_sums::OverlapSums;
use super::padded_signal::PaddedSignal;

/// A model separating whole files with its reference's edges: the whole-file adapter of a
/// [`ModelCore`].
pub struct ModelRun {
    core: ModelCore,
    info: SeparatorInfo,
    edges: Box<dyn FileEdges>,
    stem_sources: [StemSource; NUM_SEPARATED_STEMS],
    other_source: Option<StemSource>,
    batch_chunks: usize,
    chunk_frames: usize,
    signal: PaddedSignal,
    sums: OverlapSums,
    /// The next chunk to plan.
    next_chunk: usize,
    /// No chunk from `next_chunk` on changes the file.
    is_planned_out: bool,
    /// The next padded frame to hand out.
    emitted: usize,
    /// One batch's inputs, reused.
    chunk_inputs: Vec<[Vec<f32>; 2]>,
    output: FrameQueue,
    model_runs: u64,
}

impl ModelRun {
    /// Runs `core`'s model (chunked as its reference chunks) with `options`' batch size and
    /// `Other`. Not realtime-safe: allocates.
    pub fn new(core: ModelCore, options: &WholeFileOptions) -> Self {
        let description = core.description();
        let pipeline = description.pipeline.clone();
        let edges = pipeline.file_edges(description);
        let (stem_sources, other_source) = match options.other {
            OtherStem::Residual => (description.stem_sources, None),
            OtherStem::Model => {
                let reference = pipeline.reference_sources(description);
                (reference.separated, reference.other)
            }
        };
        let device = core.device().actual;
        // A whole file has no hop or latency of its own.
        let info = core.separator_info(1, 0);
        let mut run = Self {
            edges,
            stem_sources,
            other_source,
            batch_chunks: 1,
            chunk_frames: description.layout.chunk_frames,
            signal: PaddedSignal::default(),
            sums: OverlapSums::new(description.stems.len()),
            next_chunk: 0,
            is_planned_out: false,
            emitted: 0,
            chunk_inputs: Vec::new(),
            output: FrameQueue::new(),
            model_runs: 0,
            info,
            core,
        };
        // Grouped this many at a time; the codec runs up to its graph's batch at once.
        run.batch_chunks = options.batch_chunks_on(device);
        run
    }

    /// Plans and runs every chunk the input allows, and hands out what became final.
    fn advance(&mut self) -> Result<(), SeparatorError> {
        let length = self.signal.length();
        let padding = match self.signal.padding() {
            Some(padding) => padding,
            None => match self.edges.padding(length) {
                Some(padding) => {
                    self.signal.set_padding(padding);
                    padding
                }
                None => return Ok(()),
            },
        };
        loop {
            let batch = self.plan_batch(&padding, length);
            if batch.is_empty() {
                break;
            }
            self.run_batch(&batch)?;
            self.hand_out(&padding, length);
        }
        self.hand_out(&padding, length);
        let lead = padding.lead_frames;
        let next_input = self
            .edges
            .dest(self.next_chunk)
            .saturating_sub(lead + self.chunk_frames);
        self.signal
            .forget_before(next_input.min(self.emitted.saturating_sub(lead)));
        Ok(())
    }

    /// The next chunks to run together: up to a batch, fewer only at the file's end or for a
    /// chunk that runs alone (one whose codec must know where the file ends).
    fn plan_batch(&mut self, padding: &FilePadding, length: FileLength) -> Vec<PlannedChunk> {
        let mut batch: Vec<PlannedChunk> = Vec::new();
        while batch.len() < self.batch_chunks && !self.is_planned_out {
            match self.edges.plan(self.next_chunk, padding, length) {
                Some(plan) => {
                    let is_alone = plan.file_end.is_some();
                    if is_alone && !batch.is_empty() {
                        break;
                    }
                    batch.push(plan);
                    self.next_chunk += 1;
                    if is_alone {
                        break;
                    }
                }
                None => {
                    self.is_planned_out = matches!(length, FileLength::Exactly(_));
                    break;
                }
            }
        }
        let is_waiting = matches!(length, FileLength::AtLeast(_))
            && batch.len() < self.batch_chunks
            && batch.iter().all(|plan| plan.file_end.is_none());
        if is_waiting {
            self.next_chunk -= batch.len();
            batch.clear();
        }
        batch
    }

    /// Runs `batch` and adds its outputs to the sums.
    fn run_batch(&mut self, batch: &[PlannedChunk]) -> Result<(), SeparatorError> {
        let chunk = self.chunk_frames;
        while self.chunk_inputs.len() < batch.len() {
            self.chunk_inputs.push([vec![0.0; chunk], vec![0.0; chunk]]);
        }
        for (plan, input) in batch.iter().zip(&mut self.chunk_inputs) {
            for (channel, samples) in input.iter_mut().enumerate() {
                fill_chunk(&self.signal, channel, plan, samples);
            }
        }
        let chunks: Vec<[&[f32]; 2]> = self.chunk_inputs[..batch.len()]
            .iter()
            .map(|[left, right]| [&left[..], &right[..]])
            .collect();
        let sums = &mut self.sums;
        let mut num_non_finite = 0;
        let result = self
            .core
            .run_chunks(&chunks, batch[0].file_end, &mut |index, values| {
                let bad = values.iter().filter(|v| !v.is_finite()).count();
                if bad == 0 {
                    sums.add(&batch[index], values, chunk);
                }
                num_non_finite += bad;
            });
        self.model_runs += batch.len() as u64;
        result
            .and_then(|()| match num_non_finite {
                0 => Ok(()),
                n => Err(format!("its output held {n} NaN or infinite values")),
            })
            .map_err(|reason| SeparatorError {
                separator: self.info.name().to_owned(),
                reason,
            })
    }

    /// Hands out the file's frames no chunk still to run reaches.
    fn hand_out(&mut self, padding: &FilePadding, length: FileLength) {
        let lead = padding.lead_frames;
        let final_end = if self.is_planned_out {
            usize::MAX
        } else {
            self.edges.dest(self.next_chunk)
        };
        let end = final_end.min(lead + length.known_frames());
        let from = self.emitted.max(lead);
        if end > from {
            for channel in 0..2 {
                let mix: Vec<f32> = (from - lead..end - lead)
                    .map(|t| self.signal.file_frame(channel, t))
                    .collect();
                for (stem, &source) in self.stem_sources.iter().enumerate() {
                    let plane = self.output.plane_mut(stem * 2 + channel);
                    push_source(plane, source, &self.sums, channel, from, &mix);
                }
                let other = self.other_source.unwrap_or(StemSource::Silent);
                let plane = self.output.plane_mut(OTHER_PLANE + channel);
                push_source(plane, other, &self.sums, channel, from, &mix);
                self.output
                    .plane_mut(MIX_PLANE + channel)
                    .extend_from_slice(&mix);
            }
        }
        self.emitted = self.emitted.max(end);
        self.sums.forget_before(self.emitted);
    }
}

/// Appends a stem made from the sums by `source` for padded frames `from..` (as many as `mix`
/// holds, the input of those frames).
fn push_source(
    plane: &mut Vec<f32>,
    source: StemSource,
    sums: &OverlapSums,
    channel: usize,
    from: usize,
    mix: &[f32],
) {
    let frames = (from..from + mix.len()).zip(mix);
    match source {
        StemSource::Silent => plane.resize(plane.len() + mix.len(), 0.0),
        StemSource::Output(output, gain) => {
            plane.extend(frames.map(|(u, _)| (sums.value(output, channel, u) as f32) * gain))
        }
        StemSource::MixMinus(output, gain) => {
            plane.extend(frames.map(|(u, &x)| x - (sums.value(output, channel, u) as f32) * gain))
        }
    }
}

/// A chunk's input for one channel: what `plan` takes of the padded signal, completed by its
/// fill (a reflection of what it took, or silence).
fn fill_chunk(signal: &PaddedSignal, channel: usize, plan: &PlannedChunk, out: &mut [f32]) {
    let taken = plan.input_frames.min(out.len());
    signal.read(channel, plan.input_start, &mut out[..taken]);
    for j in taken..out.len() {
        out[j] = match plan.fill {
            // `x[2·taken − 2 − j]`: mirrored about the last frame taken, without repeating it.
            Fill::Reflect if 2 * taken >= j + 2 => out[2 * taken - 2 - j],
            _ => 0.0,
        };
    }
}

impl FileRun for ModelRun {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn device(&self) -> Option<ActiveDevice> {
        Some(self.core.device())
    }

    fn model_runs(&self) -> u64 {
        self.model_runs
    }

    fn has_model_other(&self) -> bool {
        self.other_source.is_some()
    }

    fn start(&mut self) {
        self.signal.clear();
        self.sums.clear();
        self.next_chunk = 0;
        self.is_planned_out = false;
        self.emitted = 0;
        self.output.clear();
    }

    fn push(&mut self, left: &[f32], right: &[f32]) -> Result<(), SeparatorError> {
        self.signal.push(left, right);
        self.advance()
    }

    fn finish(&mut self) -> Result<(), SeparatorError> {
        self.signal.finish();
        self.advance()
    }

    fn output(&mut self) -> &mut FrameQueue {
        &mut self.output
    }
}
