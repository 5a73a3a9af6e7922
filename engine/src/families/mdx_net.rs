//! UVR's MDX-Net: spectrogram in, spectrogram out.
//!
//! Graph: `[1, 4, dim_f, dim_t]` → the same (left re, left im, right re, right im). Around it:
//! STFT (n_fft, hop 1024, periodic Hann, centre reflect), bins ≥ dim_f dropped, bins 0–2 zeroed,
//! chunks of `hop·(dim_t − 1)` every 75 %, `np.hanning` overlap-add, `trim = n_fft/2` zeros
//! before; secondary = mix − compensate · primary. Reference: `mdx_separator.py` and
//! `uvr_lib_v5/stft.py` (audio-separator 0.47.1). Parameters come from UVR's model table (by
//! file hash) or a `<model>.json` sidecar with UVR's keys.

use super::description::{
    check_output_len, is_fixed, ChunkCodec, ChunkRun, FamilyPipeline, GraphIo, ModelDescription,
    ModelFamily, Recognition, BINS_RANGE, FRAMES_RANGE, MAX_CHUNK_FRAMES, MAX_SPECTRAL_DIM,
    MODEL_SAMPLE_RATE_HZ,
};
use super::family_setup::FamilySetup;
use super::file_edges::{window_f32, FileEdges, FileLength, FilePadding, PlannedChunk};
use super::overlap_add::{ChunkLayout, Lead};
use super::params::{read_sidecar, uvr_table_entry, ModelParams};
use super::spectral_chunk::SpectralChunk;
use super::stem_sources::{stem_for_name, ReferenceSources, StemSource};
use super::stft::Complex64;
use super::waveform_family::WaveformFamily;
use crate::model_error::ModelError;
use crate::runtime::graph_files::model_of_gpu_graph;
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// The range a model's `compensate` may take: UVR's values lie around 1.0–1.1; anything
/// outside this range is a broken sidecar, not a model.
const COMPENSATE_RANGE: std::ops::RangeInclusive<f64> = 0.01..=100.0;
/// The range of `overlap`.
const OVERLAP_RANGE: std::ops::Range<f64> = 0.0..0.95;

/// MDX-Net's processing parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct MdxParams {
    /// FFT size.
    pub n_fft: usize,
    /// STFT hop.
    pub hop_frames: usize,
    /// Bins given to the model.
    pub dim_f: usize,
    /// Frames per chunk.
    pub dim_t: usize,
    /// UVR's `compensate`.
    pub compensate: f32,
    /// UVR's `primary_stem`.
    pub primary_stem: String,
}

/// Whether a graph is MDX-Net's, by its shapes.
pub(super) fn claims(recognition: &Recognition<'_>) -> bool {
    let (i, o) = (&recognition.input.dims, &recognition.output.dims);
    i.len() == 4 && o.len() == 4 && i[1] == 4
}

pub(super) fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let (input, output) = (recognition.input, recognition.output);
    let (i, o) = (&input.dims, &output.dims);
    let (dim_f, dim_t) = (i[2], i[3]);
    // The family's shape with a size out of range: say which, not "mismatch".
    if o[1..] == i[1..] {
        recognition.check_range(&BINS_RANGE, input, 2)?;
        recognition.check_range(&FRAMES_RANGE, input, 3)?;
    }
    if !(is_fixed(dim_f, MAX_SPECTRAL_DIM) && is_fixed(dim_t, MAX_SPECTRAL_DIM) && o[1..] == i[1..])
    {
        return Err(recognition.mismatch());
    }
    let params: ModelParams = uvr_table_entry(recognition.bytes)
        .or_else(|| recognition.sidecar.clone())
        .ok_or_else(|| {
            recognition.params_error(format!(
                "an MDX-Net model that is not in UVR's model table and has no sidecar: put a `{}` next to it with \
                 {{\"mdx_n_fft_scale_set\": 6144, \"mdx_dim_f_set\": {dim_f}, \"mdx_dim_t_set\": {}, \"compensate\": 1.035, \"primary_stem\": \"Vocals\"}}",
                recognition.sidecar_name("json"),
                (dim_t as f64).log2().round() as i64
            ))
        })?;
    let setup = setup(recognition, &params, dim_f as usize, dim_t as usize)?;
    Ok(setup.describe(GraphIo::single(
        &input.name,
        &output.name,
        vec![1, 4, dim_f as usize, dim_t as usize],
    )))
}

/// The MDX-Net a waveform graph of `chunk_frames`-frame chunks is (a GPU graph Stemflow made
/// from a published MDX-Net graph: its parameters are the published graph's, `NAME.onnx` beside
/// it, by UVR's model table or its sidecar).
pub(super) fn waveform_family(
    recognition: &Recognition<'_>,
    chunk_frames: usize,
    num_stems: usize,
) -> Result<WaveformFamily, ModelError> {
    let model = model_of_gpu_graph(recognition.path).ok_or_else(|| {
        recognition.params_error(
            "an MDX-Net graph for GPUs needs its model beside it (NAME.onnx for NAME.gpu.onnx): \
             its parameters come from UVR's table by that file"
                .into(),
        )
    })?;
    let bytes = std::fs::read(&model)
        .map_err(|e| recognition.params_error(format!("{}: {e}", model.display())))?;
    let sidecar = read_sidecar(&model).map_err(|e| recognition.params_error(e))?;
    let params = uvr_table_entry(&bytes).or(sidecar).ok_or_else(|| {
        recognition.params_error(format!(
            "{} is neither in UVR's model table nor has a sidecar with its parameters",
            model.display()
        ))
    })?;
    let dim = |key: &str| params.usize(key).unwrap_or(0);
    let (dim_f, dim_t) = (dim("mdx_dim_f_set"), 1usize << dim("mdx_dim_t_set").min(20));
    let setup = setup(recognition, &params, dim_f, dim_t)?;
    if num_stems != 1 || setup.layout.chunk_frames != chunk_frames {
        return Err(recognition.params_error(format!(
            "its chunks ({chunk_frames} frames, {num_stems} stems) are not those of {} ({} \
             frames, 1 stem)",
            setup.source, setup.layout.chunk_frames
        )));
    }
    Ok(setup.waveform(equal_windows))
}

/// The STFT (`n_fft`, hop) of the MDX-Net model file `path`, from UVR's model table or its
/// sidecar: what its graph for GPUs wraps it in. `None` when neither gives one. Not
/// realtime-safe: reads the file.
pub fn stft_of_model(path: &std::path::Path) -> Option<(usize, usize)> {
    let bytes = std::fs::read(path).ok()?;
    let params = uvr_table_entry(&bytes).or_else(|| read_sidecar(path).ok().flatten())?;
    let n_fft = params.usize("mdx_n_fft_scale_set")?;
    let hop = match params.values.get("hop_length") {
        None => 1024,
        Some(_) => params.usize("hop_length").filter(|&h| h > 0)?,
    };
    Some((n_fft, hop))
}

/// Checks `params` against a graph of `dim_f` bins and `dim_t` frames.
fn setup(
    recognition: &Recognition<'_>,
    params: &ModelParams,
    dim_f: usize,
    dim_t: usize,
) -> Result<FamilySetup<MdxParams>, ModelError> {
    let source = params.source.clone().unwrap_or_default();
    let required = |key: &str| {
        params.usize(key).ok_or_else(|| {
            recognition.params_error(format!("{source}: {key} missing or not a whole number"))
        })
    };
    let n_fft = required("mdx_n_fft_scale_set")?;
    let want_f = required("mdx_dim_f_set")?;
    let dim_t_log2 = required("mdx_dim_t_set")?;
    if dim_t_log2 > 20 {
        return Err(recognition.params_error(format!(
            "{source}: mdx_dim_t_set {dim_t_log2} is out of range (it is log2 of the frames per chunk, at most 20)"
        )));
    }
    let want_t = 1usize << dim_t_log2;
    if want_f != dim_f || want_t != dim_t || want_f > n_fft / 2 + 1 || n_fft < 16 {
        return Err(recognition.params_error(format!(
            "{source} says dim_f {want_f}, dim_t {want_t}, n_fft {n_fft}, but the graph takes dim_f {dim_f}, dim_t {dim_t}"
        )));
    }
    let hop_frames = match params.values.get("hop_length") {
        None => 1024,
        Some(_) => params
            .usize("hop_length")
            .filter(|&h| h > 0)
            .ok_or_else(|| {
                recognition.params_error(format!(
                    "{source}: hop_length must be a whole number above 0"
                ))
            })?,
    };
    let overlap = checked_f64(params, "overlap", 0.25)
        .map_err(|m| recognition.params_error(format!("{source}: {m}")))?;
    if !OVERLAP_RANGE.contains(&overlap) {
        return Err(recognition.params_error(format!(
            "{source}: overlap {overlap} is out of range (0 to below 0.95)"
        )));
    }
    let chunk_frames = hop_frames * (dim_t - 1);
    if chunk_frames > MAX_CHUNK_FRAMES || chunk_frames <= n_fft {
        return Err(recognition.params_error(format!(
            "{source}: chunk of {chunk_frames} frames out of range"
        )));
    }
    let step_frames = ((1.0 - overlap) * chunk_frames as f64) as usize;
    let compensate = checked_f64(params, "compensate", 1.0)
        .map_err(|m| recognition.params_error(format!("{source}: {m}")))?;
    if !COMPENSATE_RANGE.contains(&compensate) {
        return Err(recognition.params_error(format!(
            "{source}: compensate {compensate:e} is absurd (UVR models use about 1.0–1.1; allowed {}–{})",
            COMPENSATE_RANGE.start(),
            COMPENSATE_RANGE.end()
        )));
    }
    let compensate = compensate as f32;
    let primary_stem = params.str("primary_stem").unwrap_or("Vocals").to_string();
    let primary = primary_stem.to_lowercase();
    let mut stem_sources = [StemSource::Silent; NUM_SEPARATED_STEMS];
    match stem_for_name(&primary) {
        // The secondary stem is the reference's `mix − compensate · primary`; the primary is
        // scaled the same way so that the stems sum to the input.
        Some(stem) => stem_sources[stem.index()] = StemSource::Output(0, compensate),
        None => stem_sources[Stem::Vocals.index()] = StemSource::MixMinus(0, compensate),
    }
    Ok(FamilySetup {
        family: ModelFamily::MdxNet,
        params: MdxParams {
            n_fft,
            hop_frames,
            dim_f,
            dim_t,
            compensate,
            primary_stem,
        },
        stems: vec![primary],
        stem_sources,
        layout: ChunkLayout::new(chunk_frames, step_frames.max(1), Lead::Zeros(n_fft / 2)),
        sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
        source,
    })
}

/// A number from the parameters: `default` when absent, an error naming the key when it is
/// not a finite number.
fn checked_f64(params: &ModelParams, key: &str, default: f64) -> Result<f64, String> {
    match params.values.get(key) {
        None => Ok(default),
        Some(value) => value
            .as_f64()
            .filter(|v| v.is_finite())
            .ok_or_else(|| format!("{key} must be a finite number, found {value}")),
    }
}

impl FamilyPipeline for MdxParams {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        equal_windows(chunk_frames)
    }

    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec> {
        Box::new(MdxCodec::new(self, description.layout.chunk_frames))
    }

    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(MdxEdges::new(description.layout, self.n_fft / 2))
    }

    /// audio-separator writes the primary stem as the model gives it (unscaled) and the
    /// secondary as `mix − compensate · primary`.
    fn reference_sources(&self, description: &ModelDescription) -> ReferenceSources {
        let mut separated = [StemSource::Silent; NUM_SEPARATED_STEMS];
        let primary = StemSource::Output(0, 1.0);
        let secondary = StemSource::MixMinus(0, self.compensate);
        let other = match stem_for_name(&self.primary_stem.to_lowercase()) {
            Some(stem) => {
                separated[stem.index()] = primary;
                secondary
            }
            None => {
                separated[Stem::Vocals.index()] = secondary;
                primary
            }
        };
        debug_assert_eq!(description.stems.len(), 1);
        ReferenceSources {
            separated,
            other: Some(other),
        }
    }
}

/// `MDXSeparator.demix`'s whole file: `trim` (n_fft / 2) zeros before the file and
/// `gen − length mod gen + trim` after it (`gen`: the chunk minus twice the trim), chunks every
/// step below that padded length; a chunk that reaches past it has only the frames before it,
/// weighted by `np.hanning` of that many frames (ones for overlap 0, as audio-separator weighs
/// without a window then). A chunk that starts past the file changes nothing and is not run.
#[derive(Debug)]
struct MdxEdges {
    chunk_frames: usize,
    step_frames: usize,
    trim_frames: usize,
    window: std::sync::Arc<[f32]>,
}

impl MdxEdges {
    fn new(layout: ChunkLayout, trim_frames: usize) -> Self {
        Self {
            chunk_frames: layout.chunk_frames,
            step_frames: layout.step_frames,
            trim_frames,
            window: window_f32(&edge_window(layout.chunk_frames, layout)),
        }
    }
}

/// The weights of a chunk of `frames` frames: `np.hanning(frames)`, or ones without overlap.
fn edge_window(frames: usize, layout: ChunkLayout) -> Vec<f64> {
    if layout.step_frames >= layout.chunk_frames {
        vec![1.0; frames]
    } else if frames == 1 {
        vec![1.0]
    } else {
        window(frames)
    }
}

impl FileEdges for MdxEdges {
    fn padding(&self, _length: FileLength) -> Option<FilePadding> {
        Some(FilePadding::zeros(self.trim_frames))
    }

    fn dest(&self, index: usize) -> usize {
        index * self.step_frames
    }

    fn plan(&self, index: usize, _: &FilePadding, length: FileLength) -> Option<PlannedChunk> {
        let (chunk, trim) = (self.chunk_frames, self.trim_frames);
        let generated = chunk - 2 * trim;
        let start = self.dest(index);
        let frames = match length {
            // The padded length is `chunk + gen · ⌊length / gen⌋`: whole once that reaches
            // past the chunk, and its input arrived.
            FileLength::AtLeast(n)
                if start <= n / generated * generated && start + chunk <= n + trim =>
            {
                chunk
            }
            FileLength::AtLeast(_) => return None,
            FileLength::Exactly(n) if start < trim + n => {
                chunk.min(chunk + n / generated * generated - start)
            }
            FileLength::Exactly(_) => return None,
        };
        let layout = ChunkLayout::new(chunk, self.step_frames, Lead::Zeros(trim));
        let window = if frames == chunk {
            self.window.clone()
        } else {
            window_f32(&edge_window(frames, layout))
        };
        Some(PlannedChunk::at(start, chunk, frames, window))
    }
}

/// [`window`] for the first chunk and every other.
fn equal_windows(chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
    let window = window(chunk_frames);
    (window.clone(), window)
}

/// `np.hanning(n)`: the symmetric Hann window, the same for every chunk.
fn window(chunk_frames: usize) -> Vec<f64> {
    let n = chunk_frames;
    (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / (n - 1) as f64).cos())
        .collect()
}

/// STFT, the graph, inverse STFT.
struct MdxCodec {
    params: MdxParams,
    /// Decodes `[channel]` waveforms.
    chunk: SpectralChunk,
}

impl MdxCodec {
    fn new(params: &MdxParams, chunk_frames: usize) -> Self {
        Self {
            chunk: SpectralChunk::new(params.n_fft, params.hop_frames, chunk_frames, 2),
            params: params.clone(),
        }
    }
}

impl ChunkCodec for MdxCodec {
    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String> {
        let (dim_f, dim_t) = (self.params.dim_f, self.params.dim_t);
        let frames = self.chunk.stft.num_frames(self.chunk.chunk_frames);
        let bins = self.chunk.stft.num_bins();
        debug_assert_eq!(frames, dim_t);
        self.chunk.analyse(run.input);
        let spectra = &self.chunk.spectra;
        let mut output = Vec::new();
        run.runner.run_with(
            |input| {
                // [1, 4, dim_f, dim_t]: L re, L im, R re, R im; bins 0–2 zeroed as the
                // reference does.
                for channel in 0..2 {
                    for f in 3..dim_f {
                        for t in 0..dim_t {
                            let value = spectra[channel][f * frames + t];
                            input[((2 * channel) * dim_f + f) * dim_t + t] = value.re as f32;
                            input[((2 * channel + 1) * dim_f + f) * dim_t + t] = value.im as f32;
                        }
                    }
                }
                Ok(())
            },
            // Copied out so the decoding does not hold a session other instances share.
            |values| {
                check_output_len(values.len(), 4 * dim_f * dim_t)?;
                output = values.to_vec();
                Ok(())
            },
        )?;
        for channel in 0..2 {
            let spectrum = &mut self.chunk.inverse_spectrum;
            spectrum.fill(Complex64::default());
            for f in 0..dim_f.min(bins) {
                for t in 0..dim_t {
                    spectrum[f * frames + t] = Complex64::new(
                        output[((2 * channel) * dim_f + f) * dim_t + t] as f64,
                        output[((2 * channel + 1) * dim_f + f) * dim_t + t] as f64,
                    );
                }
            }
            self.chunk.synthesise(frames, channel);
        }
        (run.outputs)(&self.chunk.decoded);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_chunks_weigh_only_the_frames_before_the_padded_end() {
        // Chunk 100, step 75, trim 10: gen 80. 230 frames: padded to 10 + 230 + 20 = 260.
        let layout = ChunkLayout::new(100, 75, Lead::Zeros(10));
        let edges = MdxEdges::new(layout, 10);
        let padding = edges.padding(FileLength::AtLeast(0)).unwrap();
        let length = FileLength::Exactly(230);
        let last = edges.plan(3, &padding, length).unwrap();
        assert_eq!((last.dest, last.output_frames), (225, 35));
        assert_eq!(last.window[0], 0.0);
        assert_eq!(last.window[17], 1.0);
        assert_eq!(edges.plan(2, &padding, length).unwrap().output_frames, 100);
        // A chunk starting in the padding after the file changes nothing.
        assert!(edges.plan(4, &padding, length).is_none());
        assert!(edges.plan(2, &padding, FileLength::AtLeast(239)).is_none());
        assert!(edges.plan(2, &padding, FileLength::AtLeast(240)).is_some());
        // Without overlap audio-separator weighs every frame 1.
        let no_overlap = ChunkLayout {
            step_frames: 100,
            ..layout
        };
        let edges = MdxEdges::new(no_overlap, 10);
        assert!(edges
            .plan(1, &padding, length)
            .unwrap()
            .window
            .iter()
            .all(|&w| w == 1.0));
    }
}
