//! What a recognised model is: its family, stems, chunking and the family's processing, and
//! the traits each family file implements.

use std::path::Path;

use super::file_edges::{FileEdges, StreamEdges};
use super::overlap_add::ChunkLayout;
use super::params::ModelParams;
use super::stem_sources::{ReferenceSources, StemSource};
use crate::model_error::ModelError;
pub use crate::runtime::runner::GraphIo;
use crate::runtime::runner::ModelRunner;
use crate::runtime::signature::{GraphSignature, TensorSignature};
use crate::stem::NUM_SEPARATED_STEMS;

/// The rate every supported family runs at unless its config says otherwise.
pub const MODEL_SAMPLE_RATE_HZ: u32 = 44_100;
/// Largest chunk accepted: a hostile file cannot make Stemflow allocate gigabytes.
pub const MAX_CHUNK_FRAMES: usize = 1 << 22;
/// Largest spectrogram dimension accepted (bins or frames).
pub(super) const MAX_SPECTRAL_DIM: i64 = 1 << 14;
/// Largest number of stems accepted.
pub(super) const MAX_MODEL_STEMS: i64 = 16;

/// The signatures Stemflow supports, for messages.
pub(super) const EXPECTED_SIGNATURES: &str = "HTDemucs `mix` [1, 2, T] → `stems` [1, 4|6, 2, T]; \
     converted HTDemucs `mix` [1, 2, T], `spec` [1, 4, F, frames] → `wave_stems` [1, S, 2, T], \
     `spec_stems` [1, S, 4, F, frames]; \
     MDX-Net [1, 4, dim_f, dim_t] → [1, 4, dim_f, dim_t]; \
     RoFormer [1, 2·(n_fft/2+1), frames, 2] → [1, N, 2·(n_fft/2+1), frames, 2]; \
     Spleeter [1, 2, T, 1024] → [1, S, 2, T, 1024]";

/// A family of separation models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ModelFamily {
    /// Hybrid Transformer Demucs exported to ONNX (waveform in, waveform stems out).
    HtDemucs,
    /// UVR's MDX-Net (spectrogram in, spectrogram out).
    MdxNet,
    /// BS-RoFormer / Mel-RoFormer with the STFT outside the graph (spectrogram in, complex masks out).
    RoFormer,
    /// Deezer's Spleeter U-Nets (magnitude in, masked magnitudes out).
    Spleeter,
    /// Not a graph: a route file chaining separators stem by stem ([`crate::hybrid`]).
    Hybrid,
    /// Not a graph: a route file with an ensemble stage, several separators' stems combined
    /// ([`crate::ensemble`]).
    Ensemble,
}

impl std::fmt::Display for ModelFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ModelFamily::HtDemucs => "HTDemucs",
            ModelFamily::MdxNet => "MDX-Net",
            ModelFamily::RoFormer => "RoFormer",
            ModelFamily::Spleeter => "Spleeter",
            ModelFamily::Hybrid => "Hybrid",
            ModelFamily::Ensemble => "Ensemble",
        })
    }
}

/// Everything known about a model file once its graph has been checked.
#[derive(Clone)]
pub struct ModelDescription {
    /// The family.
    pub family: ModelFamily,
    /// What runs around the graph: the family's parameters, weights and codec.
    pub pipeline: std::sync::Arc<dyn FamilyPipeline>,
    /// The model's own stem names, in output order.
    pub stems: Vec<String>,
    /// The separated stems (vocals, drums, bass, guitar, piano) from the outputs.
    pub stem_sources: [StemSource; NUM_SEPARATED_STEMS],
    /// The chunking.
    pub layout: ChunkLayout,
    /// Sample rate the model runs at.
    pub sample_rate_hz: u32,
    /// The graph's inputs and outputs, as the codec fills and reads them.
    pub io: GraphIo,
    /// Where the parameters came from.
    pub params_source: String,
    /// Whether the graph computes in float16 (`stemflow quantize --fp16` marks it): made for
    /// GPUs, slower than its float32 original on the CPU.
    pub is_float16: bool,
}

impl std::fmt::Debug for ModelDescription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelDescription")
            .field("family", &self.family)
            .field("pipeline", &self.pipeline)
            .field("stems", &self.stems)
            .field("stem_sources", &self.stem_sources)
            .field("layout", &self.layout)
            .field("sample_rate_hz", &self.sample_rate_hz)
            .field("io", &self.io)
            .field("params_source", &self.params_source)
            .field("is_float16", &self.is_float16)
            .finish()
    }
}

/// A family's processing around its graph, made from its parameters: the overlap-add weights
/// and the codec of each chunk. Each family file implements it on its parameters.
pub trait FamilyPipeline: std::fmt::Debug + Send + Sync {
    /// The overlap-add weights of a chunk of `chunk_frames`: `(first chunk, every other chunk)`.
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>);

    /// A codec for `description`'s chunks. Not realtime-safe: allocates.
    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec>;

    /// How the family's reference chunks a whole file (its edges); by default the stream's
    /// chunking run on the whole file. Not realtime-safe: allocates.
    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(StreamEdges::new(
            description.layout,
            self.windows(description.layout.chunk_frames),
        ))
    }

    /// Every stem as the reference writes it, `Other` the model's own where it has one
    /// ([`ReferenceSources::by_name`] unless the family scales its stems).
    fn reference_sources(&self, description: &ModelDescription) -> ReferenceSources {
        ReferenceSources::by_name(&description.stems, description.stem_sources)
    }
}

/// What [`ChunkCodec::run_chunk`] is given: the chunk, the graph's runner and where the
/// outputs go.
pub struct ChunkRun<'a> {
    /// Runs the family's graph.
    pub runner: &'a mut ModelRunner,
    /// The chunk, `[left, right]`, `chunk_frames` each.
    pub input: [&'a [f32]; 2],
    /// Takes the chunk's outputs as waveforms, `[output][channel][frame]` planar: once, as the
    /// last step of a run that worked (a waveform model hands ONNX Runtime's output itself,
    /// uncopied).
    pub outputs: &'a mut dyn FnMut(&[f32]),
}

/// What runs around a family's graph for one chunk: encode the chunk, run the graph, decode its
/// outputs as waveforms.
pub trait ChunkCodec: Send {
    /// Runs the model on one chunk and hands the outputs to [`ChunkRun::outputs`]. Not
    /// realtime-safe: inference.
    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String>;

    /// The most chunks one call of [`ChunkCodec::run_chunks`] runs in a single model run: 1
    /// unless the graph has a batch dimension.
    fn max_batch_chunks(&self) -> usize {
        1
    }

    /// Runs the model on several chunks (`chunks[i]` = `[left, right]`, `chunk_frames` each)
    /// and hands chunk `i`'s outputs, laid out as [`ChunkCodec::run_chunk`] hands them, to
    /// `outputs(i, …)`, in order. A codec whose graph takes a batch runs up to
    /// [`ChunkCodec::max_batch_chunks`] of them at once; the default runs them one by one.
    /// Not realtime-safe: inference.
    fn run_chunks(
        &mut self,
        runner: &mut ModelRunner,
        chunks: &[[&[f32]; 2]],
        outputs: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), String> {
        for (index, &input) in chunks.iter().enumerate() {
            self.run_chunk(ChunkRun {
                runner: &mut *runner,
                input,
                outputs: &mut |values| outputs(index, values),
            })?;
        }
        Ok(())
    }

    /// Whole files: the next chunks' input ends with the file `file_end` frames in (`None`:
    /// they run as in a stream). A family whose reference treats the end of the file inside
    /// its codec (Spleeter zeroes the magnitudes past the file's last STFT frame) uses it; the
    /// others ignore it.
    fn set_file_end(&mut self, _file_end: Option<usize>) {}
}

/// A graph's output must have exactly the length its signature declares.
pub(super) fn check_output_len(found: usize, expected: usize) -> Result<(), String> {
    if found == expected {
        Ok(())
    } else {
        Err(format!(
            "the model returned {found} values where its signature declares {expected}"
        ))
    }
}

/// Whether a dimension is fixed and within `1..=max`.
pub(super) fn is_fixed(dim: i64, max: i64) -> bool {
    dim > 0 && dim <= max
}

/// A dimension a family reads from its graph, for range checks: what it is, in what unit, and
/// the most accepted.
pub(super) struct DimRange {
    /// What the dimension is ("segment").
    pub what: &'static str,
    /// Its unit ("samples").
    pub unit: &'static str,
    /// "longer than", "more than".
    pub beyond: &'static str,
    /// The largest value accepted.
    pub max: i64,
}

/// A chunk of audio, in samples ([`MAX_CHUNK_FRAMES`]: 95 s at 44.1 kHz).
pub(super) const SEGMENT_RANGE: DimRange = DimRange {
    what: "segment",
    unit: "samples",
    beyond: "longer than",
    max: MAX_CHUNK_FRAMES as i64,
};
/// The stems a graph returns ([`MAX_MODEL_STEMS`]).
pub(super) const STEMS_RANGE: DimRange = DimRange {
    what: "number of stems",
    unit: "stems",
    beyond: "more than",
    max: MAX_MODEL_STEMS,
};
/// A spectrogram's frequency bins ([`MAX_SPECTRAL_DIM`]).
pub(super) const BINS_RANGE: DimRange = DimRange {
    what: "number of frequency bins",
    unit: "bins",
    beyond: "more than",
    max: MAX_SPECTRAL_DIM,
};
/// A spectrogram's frames ([`MAX_SPECTRAL_DIM`]).
pub(super) const FRAMES_RANGE: DimRange = DimRange {
    what: "number of STFT frames",
    unit: "frames",
    beyond: "more than",
    max: MAX_SPECTRAL_DIM,
};

/// What the family recognisers look at.
pub(super) struct Recognition<'a> {
    pub signature: &'a GraphSignature,
    pub input: &'a TensorSignature,
    pub output: &'a TensorSignature,
    pub path: &'a Path,
    pub model_name: &'a str,
    pub bytes: &'a [u8],
    pub sidecar: Option<ModelParams>,
}

impl Recognition<'_> {
    pub fn mismatch(&self) -> ModelError {
        ModelError::SignatureMismatch {
            model: self.model_name.to_owned(),
            expected: EXPECTED_SIGNATURES.to_owned(),
            found: self.signature.to_string(),
        }
    }

    /// Refuses the graph when axis `axis` of `tensor`, the family's `range`, is fixed but
    /// outside `1..=range.max`: [`ModelError::OutOfRange`] with the number and the limit. A
    /// symbolic dimension (negative) or a missing axis passes, for the family's signature check
    /// to judge.
    pub fn check_range(
        &self,
        range: &DimRange,
        tensor: &TensorSignature,
        axis: usize,
    ) -> Result<(), ModelError> {
        let Some(&dim) = tensor.dims.get(axis) else {
            return Ok(());
        };
        let DimRange {
            what,
            unit,
            beyond,
            max,
        } = range;
        let message = match dim {
            0 => format!("its {what} is 0 {unit} ({tensor}); it must be at least 1"),
            d if d > *max => format!(
                "its {what} is {d} {unit} ({tensor}), {beyond} the {max} {unit} Stemflow accepts"
            ),
            _ => return Ok(()),
        };
        Err(ModelError::OutOfRange {
            model: self.model_name.to_owned(),
            message,
        })
    }

    pub fn params_error(&self, message: String) -> ModelError {
        ModelError::Params {
            model: self.model_name.to_owned(),
            message,
        }
    }

    /// The file name of a sidecar with `extension` next to the model.
    pub fn sidecar_name(&self, extension: &str) -> String {
        self.path
            .with_extension(extension)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}
