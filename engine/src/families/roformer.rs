//! BS-RoFormer and Mel-RoFormer exported from Music-Source-Separation-Training with the STFT
//! outside the graph: spectrogram in, complex masks out.
//!
//! Graph: `[1, 2F, T, 2]` (stereo interleaved per bin, real/imag) → mask `[1, N, 2F, T, 2]`.
//! Around it: STFT (n_fft 2048, hop 441), complex mask, DC zeroed, iSTFT; chunks every
//! `chunk/num_overlap`, linear fades of `chunk/10` (none on the first chunk's start), `border`
//! reflect-padded before. Reference: `utils/model_utils.py` `demix` (MSST ccc011a). Parameters
//! come from the model's MSST config next to it (`<model>.yaml`), a JSON sidecar, or, for
//! models Stemflow converted from checkpoints, the graph's [`PARAMS_METADATA_KEY`] metadata.

use super::description::{
    check_output_len, is_fixed, ChunkCodec, ChunkRun, DimRange, FamilyPipeline, GraphIo,
    ModelDescription, ModelFamily, Recognition, FRAMES_RANGE, MAX_CHUNK_FRAMES, MAX_MODEL_STEMS,
    MAX_SPECTRAL_DIM, MODEL_SAMPLE_RATE_HZ, STEMS_RANGE,
};
use super::family_setup::FamilySetup;
use super::file_edges::{window_f32, FileEdges, FileLength, FilePadding, Fill, PlannedChunk};
use super::overlap_add::{ChunkLayout, Lead};
use super::params::ModelParams;
use super::spectral_chunk::SpectralChunk;
use super::stem_sources::stem_sources_by_name;
use super::stft::Complex64;
use super::waveform_family::WaveformFamily;
use crate::model_error::ModelError;

/// RoFormer's processing parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct RoFormerParams {
    /// FFT size.
    pub n_fft: usize,
    /// STFT hop.
    pub hop_frames: usize,
    /// STFT frames per chunk.
    pub frames: usize,
    /// Whether the DC bin is zeroed after masking.
    pub zero_dc: bool,
    /// The config's `inference.batch_size`: MSST's `demix` decides the fades of a whole file's
    /// first and last chunks per batch (1 when the config does not say).
    pub msst_batch_size: usize,
}

/// The spectrum's rows: both channels of each STFT bin.
const SPECTRUM_ROWS_RANGE: DimRange = DimRange {
    what: "number of spectrum rows (2 per STFT bin)",
    unit: "rows",
    beyond: "more than",
    max: 2 * MAX_SPECTRAL_DIM,
};

/// Whether a graph is a RoFormer's, by its shapes.
pub(super) fn claims(recognition: &Recognition<'_>) -> bool {
    let (i, o) = (&recognition.input.dims, &recognition.output.dims);
    i.len() == 4 && o.len() == 5 && i[3] == 2 && o[4] == 2
}

pub(super) fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let (input, output) = (recognition.input, recognition.output);
    let (i, o) = (&input.dims, &output.dims);
    let (bins2, frames, num_stems) = (i[1], i[2], o[1]);
    // The family's shape with a size out of range: say which, not "mismatch".
    if bins2 % 2 == 0 && o[2] == bins2 && o[3] == frames {
        recognition.check_range(&SPECTRUM_ROWS_RANGE, input, 1)?;
        recognition.check_range(&FRAMES_RANGE, input, 2)?;
        recognition.check_range(&STEMS_RANGE, output, 1)?;
    }
    if !(is_fixed(bins2, 2 * MAX_SPECTRAL_DIM)
        && bins2 % 2 == 0
        && is_fixed(frames, MAX_SPECTRAL_DIM)
        && is_fixed(num_stems, MAX_MODEL_STEMS)
        && o[2] == bins2
        && o[3] == frames)
    {
        return Err(recognition.mismatch());
    }
    let setup = setup(
        recognition,
        num_stems as usize,
        GraphShape::Spectrum { bins2, frames },
    )?;
    Ok(setup.describe(GraphIo::single(
        &input.name,
        &output.name,
        vec![1, bins2 as usize, frames as usize, 2],
    )))
}

/// The shape of a RoFormer graph's chunks.
#[derive(Debug, Clone, Copy)]
enum GraphShape {
    /// The spectrum contract: `2·(n_fft/2 + 1)` rows, `frames` frames.
    Spectrum { bins2: i64, frames: i64 },
    /// A waveform graph (a GPU graph): chunks of this many frames.
    Waveform { chunk_frames: usize },
}

/// The RoFormer of `num_stems` stems a waveform graph of `chunk_frames`-frame chunks is (a GPU
/// graph Stemflow converted: its parameters in the graph's metadata).
pub(super) fn waveform_family(
    recognition: &Recognition<'_>,
    chunk_frames: usize,
    num_stems: usize,
) -> Result<WaveformFamily, ModelError> {
    let setup = setup(
        recognition,
        num_stems,
        GraphShape::Waveform { chunk_frames },
    )?;
    Ok(setup.waveform(windows))
}

/// Reads and checks a RoFormer's parameters (sidecar, else the graph's metadata, else MSST's
/// defaults) against its graph.
fn setup(
    recognition: &Recognition<'_>,
    num_stems: usize,
    shape: GraphShape,
) -> Result<FamilySetup<RoFormerParams>, ModelError> {
    let params = match recognition.sidecar.clone() {
        Some(sidecar) => sidecar,
        None => metadata_params(recognition)?.unwrap_or_default(),
    };
    let source = params
        .source
        .clone()
        .unwrap_or_else(|| "RoFormer defaults (n_fft 2048, hop 441, 4 overlaps)".into());
    let find = |keys: &[&'static str]| -> Option<(&'static str, &serde_json::Value)> {
        keys.iter()
            .find_map(|&k| params.values.get(k).map(|v| (k, v)))
    };
    let get = |keys: &[&'static str], default: usize| -> Result<usize, ModelError> {
        match find(keys) {
            None => Ok(default),
            Some((key, value)) => value.as_u64().map(|v| v as usize).ok_or_else(|| {
                recognition.params_error(format!(
                    "{source}: {key} must be a whole number, found {value}"
                ))
            }),
        }
    };
    let n_fft = get(&["n_fft", "model.stft_n_fft", "audio.n_fft"], 2048)?;
    let hop_frames = get(
        &["hop_length", "model.stft_hop_length", "audio.hop_length"],
        441,
    )?;
    if hop_frames == 0 {
        return Err(
            recognition.params_error(format!("{source}: hop_length 0 is not a valid STFT hop"))
        );
    }
    let (chunk_frames, frames) = match shape {
        GraphShape::Spectrum { bins2, frames } => {
            if n_fft / 2 + 1 != bins2 as usize / 2 {
                return Err(recognition.params_error(format!(
                    "the graph takes {} bins per channel, which does not match n_fft {n_fft} from {source} (set `n_fft` in the sidecar)",
                    bins2 / 2
                )));
            }
            (hop_frames * (frames as usize - 1), frames as usize)
        }
        GraphShape::Waveform { chunk_frames } => {
            if !chunk_frames.is_multiple_of(hop_frames) {
                return Err(recognition.params_error(format!(
                    "{source}: a chunk of {chunk_frames} frames is not a whole number of hops of {hop_frames}"
                )));
            }
            (chunk_frames, chunk_frames / hop_frames + 1)
        }
    };
    if let Some((key, _)) = find(&["chunk_size", "inference.chunk_size", "audio.chunk_size"]) {
        let configured = get(&[key], 0)?;
        if configured != chunk_frames {
            return Err(recognition.params_error(format!(
                "{source}: {key} {configured} does not match the graph's chunk of {chunk_frames} frames ({frames} frames × hop {hop_frames})"
            )));
        }
    }
    if chunk_frames > MAX_CHUNK_FRAMES || chunk_frames <= n_fft {
        return Err(
            recognition.params_error(format!("a chunk of {chunk_frames} frames is out of range"))
        );
    }
    let num_overlap = get(&["num_overlap", "inference.num_overlap"], 4)?.max(1);
    let step_frames = chunk_frames / num_overlap;
    let target = ["target_instrument", "training.target_instrument"]
        .iter()
        .find_map(|k| params.str(k).map(str::to_string));
    let instruments = ["instruments", "training.instruments"]
        .iter()
        .find_map(|k| params.strings(k));
    let stems: Vec<String> = match (target, instruments) {
        (Some(target), _) => vec![target.to_lowercase()],
        (None, Some(list)) => list.iter().map(|s| s.to_lowercase()).collect(),
        (None, None) if num_stems == 1 => vec!["vocals".to_string()],
        (None, None) if params.source.is_some() => {
            return Err(recognition.params_error(format!(
                "{source} names no stems: a {num_stems}-stem RoFormer needs `training.instruments` \
                 (an MSST YAML config) or `instruments` (a JSON sidecar)"
            )))
        }
        (None, None) => {
            return Err(recognition.params_error(format!(
                "a {num_stems}-stem RoFormer model needs its stem names: put the MSST config next to it as `{}` \
                 (or a JSON sidecar with \"instruments\")",
                recognition.sidecar_name("yaml")
            )))
        }
    };
    if stems.len() != num_stems {
        return Err(recognition.params_error(format!(
            "{source} names {} stems but the graph has {num_stems}",
            stems.len()
        )));
    }
    let zero_dc = ["zero_dc", "model.zero_dc"]
        .iter()
        .find_map(|k| params.bool(k))
        .unwrap_or(true);
    let sample_rate_hz = get(
        &["sample_rate", "audio.sample_rate"],
        MODEL_SAMPLE_RATE_HZ as usize,
    )?;
    if crate::error::validate_sample_rate(sample_rate_hz as f32).is_err() {
        return Err(recognition.params_error(format!(
            "{source}: sample_rate {sample_rate_hz} is out of range"
        )));
    }
    let msst_batch_size = get(&["batch_size", "inference.batch_size"], 1)?.max(1);
    let border = chunk_frames - step_frames;
    Ok(FamilySetup {
        family: ModelFamily::RoFormer,
        params: RoFormerParams {
            n_fft,
            hop_frames,
            frames,
            zero_dc,
            msst_batch_size,
        },
        stem_sources: stem_sources_by_name(&stems, 1.0),
        stems,
        layout: ChunkLayout::new(chunk_frames, step_frames.max(1), Lead::Reflect(border)),
        sample_rate_hz: sample_rate_hz as u32,
        source,
    })
}

/// Metadata key under which Stemflow's converter (`stemflow models import MODEL.ckpt --config
/// MODEL.yaml`) keeps a RoFormer's parameters: a JSON object with a JSON sidecar's keys.
pub const PARAMS_METADATA_KEY: &str = "stemflow.roformer.params";

/// The parameters a converted RoFormer carries in its graph, if it does.
fn metadata_params(recognition: &Recognition<'_>) -> Result<Option<ModelParams>, ModelError> {
    let Some(text) = recognition.signature.metadata.get(PARAMS_METADATA_KEY) else {
        return Ok(None);
    };
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Object(map)) => Ok(Some(ModelParams {
            values: map.into_iter().collect(),
            source: Some(format!("the graph's {PARAMS_METADATA_KEY} metadata")),
        })),
        _ => Err(recognition.params_error(format!(
            "its {PARAMS_METADATA_KEY} metadata is not a JSON object"
        ))),
    }
}

impl FamilyPipeline for RoFormerParams {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        windows(chunk_frames)
    }

    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec> {
        Box::new(RoFormerCodec::new(
            self,
            description.stems.len(),
            description.layout.chunk_frames,
        ))
    }

    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(MsstEdges::new(description.layout, self.msst_batch_size))
    }
}

/// MSST `demix`'s whole file (generic mode): a file longer than twice the `border` (chunk
/// minus step) is reflect-padded by it at both ends, a shorter one not at all; chunks start at
/// every multiple of the step below the padded length, and one shorter than half a chunk is
/// completed with silence, a longer one by reflecting its own end. Fades: the chunks are run
/// `batch_size` at a time and the fades chosen per batch — a first batch of one chunk has no
/// fade-in, else every chunk of the last batch has no fade-out. A chunk that starts past the
/// file (in the padding after it) changes nothing and is not run.
#[derive(Debug)]
struct MsstEdges {
    chunk_frames: usize,
    step_frames: usize,
    border_frames: usize,
    batch_size: usize,
    /// `_getWindowingArray`, without its fade-in and without its fade-out.
    window: std::sync::Arc<[f32]>,
    no_fade_in: std::sync::Arc<[f32]>,
    no_fade_out: std::sync::Arc<[f32]>,
}

impl MsstEdges {
    fn new(layout: ChunkLayout, batch_size: usize) -> Self {
        let (no_fade_in, window) = windows(layout.chunk_frames);
        let fade = layout.chunk_frames / 10;
        let mut no_fade_out = window.clone();
        no_fade_out[layout.chunk_frames - fade..].fill(1.0);
        Self {
            chunk_frames: layout.chunk_frames,
            step_frames: layout.step_frames,
            border_frames: layout.chunk_frames - layout.step_frames,
            batch_size,
            window: window_f32(&window),
            no_fade_in: window_f32(&no_fade_in),
            no_fade_out: window_f32(&no_fade_out),
        }
    }

    /// The fades of chunk `index` of `num_chunks`, as `demix` picks them per batch.
    fn window_of(&self, index: usize, num_chunks: usize) -> &std::sync::Arc<[f32]> {
        let batch = self.batch_size;
        if index == 0 && (batch == 1 || num_chunks == 1) {
            &self.no_fade_in
        } else if index >= (num_chunks - 1) / batch * batch {
            &self.no_fade_out
        } else {
            &self.window
        }
    }
}

impl FileEdges for MsstEdges {
    fn padding(&self, length: FileLength) -> Option<FilePadding> {
        let border = self.border_frames;
        let is_padded = length.known_frames() > 2 * border && border > 0;
        match length {
            FileLength::AtLeast(_) if !is_padded && border > 0 => None,
            _ => Some(FilePadding {
                lead_frames: if is_padded { border } else { 0 },
                tail_frames: if is_padded { border } else { 0 },
                fill: Fill::Reflect,
            }),
        }
    }

    fn dest(&self, index: usize) -> usize {
        index * self.step_frames
    }

    fn plan(
        &self,
        index: usize,
        padding: &FilePadding,
        length: FileLength,
    ) -> Option<PlannedChunk> {
        let (chunk, step, batch) = (self.chunk_frames, self.step_frames, self.batch_size);
        let pad = padding.lead_frames;
        let start = self.dest(index);
        let (input_frames, window) = match length {
            FileLength::AtLeast(n) => {
                // Whole in what has arrived, and not in the last batch: a chunk of the next
                // batch exists already.
                let next_batch_start = (index / batch + 1) * batch * step;
                if start + chunk > pad + n || next_batch_start >= n + 2 * pad {
                    return None;
                }
                let window = if index == 0 && batch == 1 {
                    &self.no_fade_in
                } else {
                    &self.window
                };
                (chunk, window.clone())
            }
            FileLength::Exactly(n) => {
                let padded = n + 2 * pad;
                if start >= pad + n {
                    return None;
                }
                let num_chunks = padded.div_ceil(step);
                (
                    chunk.min(padded - start),
                    self.window_of(index, num_chunks).clone(),
                )
            }
        };
        Some(PlannedChunk {
            fill: if input_frames > chunk / 2 {
                Fill::Reflect
            } else {
                Fill::Zeros
            },
            ..PlannedChunk::at(start, input_frames, input_frames, window)
        })
    }
}

/// MSST's weights: ones with linspace fades of n/10 at both ends; the first chunk has no fade-in.
fn windows(chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
    let n = chunk_frames;
    let fade = n / 10;
    let mut window = vec![1.0; n];
    for i in 0..fade {
        let ramp = if fade > 1 {
            i as f64 / (fade - 1) as f64
        } else {
            1.0
        };
        window[i] = ramp;
        window[n - 1 - i] = ramp;
    }
    let mut first = window.clone();
    first[..fade].fill(1.0);
    (first, window)
}

/// STFT, the graph's complex masks applied to the mixture, inverse STFT per stem.
struct RoFormerCodec {
    params: RoFormerParams,
    num_stems: usize,
    /// Decodes `[stem][channel]` waveforms.
    chunk: SpectralChunk,
}

impl RoFormerCodec {
    fn new(params: &RoFormerParams, num_stems: usize, chunk_frames: usize) -> Self {
        let waveforms = num_stems * 2;
        Self {
            chunk: SpectralChunk::new(params.n_fft, params.hop_frames, chunk_frames, waveforms),
            params: params.clone(),
            num_stems,
        }
    }
}

impl ChunkCodec for RoFormerCodec {
    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String> {
        let frames = self.params.frames;
        let bins = self.chunk.stft.num_bins();
        self.chunk.analyse(run.input);
        let spectra = &self.chunk.spectra;
        let mask_len = self.num_stems * bins * 2 * frames * 2;
        let mut mask = Vec::new();
        run.runner.run_with(
            |input| {
                // [1, (f s), t, c]: stereo interleaved per bin.
                for f in 0..bins {
                    for s in 0..2 {
                        for t in 0..frames {
                            let value = spectra[s][f * frames + t];
                            let index = ((f * 2 + s) * frames + t) * 2;
                            input[index] = value.re as f32;
                            input[index + 1] = value.im as f32;
                        }
                    }
                }
                Ok(())
            },
            // Copied out so the decoding does not hold a session other instances share.
            |values| {
                check_output_len(values.len(), mask_len)?;
                mask = values.to_vec();
                Ok(())
            },
        )?;
        for n in 0..self.num_stems {
            for s in 0..2 {
                let chunk = &mut self.chunk;
                for f in 0..bins {
                    for t in 0..frames {
                        let index = (((n * bins + f) * 2 + s) * frames + t) * 2;
                        let m = Complex64::new(mask[index] as f64, mask[index + 1] as f64);
                        let x = chunk.spectra[s][f * frames + t];
                        chunk.inverse_spectrum[f * frames + t] = if self.params.zero_dc && f == 0 {
                            Complex64::default()
                        } else {
                            x * m
                        };
                    }
                }
                chunk.synthesise(frames, n * 2 + s);
            }
        }
        (run.outputs)(&self.chunk.decoded);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// MSST `demix`'s loop over chunks, batch by batch (ccc011a): which window each chunk gets.
    fn demix_windows(num_chunks: usize, batch: usize) -> Vec<&'static str> {
        let mut windows = Vec::new();
        let (mut i, mut pending) = (0, 0);
        while i < num_chunks {
            pending += 1;
            i += 1;
            if pending >= batch || i >= num_chunks {
                let window = if i - 1 == 0 {
                    "no fade-in"
                } else if i >= num_chunks {
                    "no fade-out"
                } else {
                    "both fades"
                };
                windows.extend(std::iter::repeat_n(window, pending));
                pending = 0;
            }
        }
        windows
    }

    #[test]
    fn the_fades_are_chosen_per_batch_as_demix_chooses_them() {
        let layout = ChunkLayout::new(100, 50, Lead::Reflect(50));
        for batch in [1, 2, 4] {
            let edges = MsstEdges::new(layout, batch);
            for num_chunks in 1..=10 {
                let expected = demix_windows(num_chunks, batch);
                for (index, &name) in expected.iter().enumerate() {
                    let window = edges.window_of(index, num_chunks);
                    let got = if window[0] == 1.0 {
                        "no fade-in"
                    } else if window[99] == 1.0 {
                        "no fade-out"
                    } else {
                        "both fades"
                    };
                    assert_eq!(
                        got, name,
                        "batch {batch}, {num_chunks} chunks, chunk {index}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_long_file_is_reflected_at_both_ends_a_short_one_is_not() {
        let layout = ChunkLayout::new(100, 50, Lead::Reflect(50));
        let edges = MsstEdges::new(layout, 1);
        // Up to twice the border the padding depends on the length still to come.
        assert_eq!(edges.padding(FileLength::AtLeast(100)), None);
        let padded = edges.padding(FileLength::AtLeast(101)).unwrap();
        assert_eq!((padded.lead_frames, padded.tail_frames), (50, 50));
        let short = edges.padding(FileLength::Exactly(100)).unwrap();
        assert_eq!(short.lead_frames, 0);
        // 100 frames unpadded: chunks at 0 (whole) and 50 (50 frames: not more than half a
        // chunk, so completed with silence).
        let length = FileLength::Exactly(100);
        let first = edges.plan(0, &short, length).unwrap();
        let second = edges.plan(1, &short, length).unwrap();
        assert_eq!((first.input_frames, second.input_frames), (100, 50));
        assert_eq!(second.fill, Fill::Zeros);
        assert!(edges.plan(2, &short, length).is_none());
        // 130 frames padded to 230: chunks at 0, 50, 100, 150 (130 − … reflected), none from
        // 180 on (only the padding after the file).
        let length = FileLength::Exactly(130);
        let padding = edges.padding(length).unwrap();
        let third = edges.plan(3, &padding, length).unwrap();
        assert_eq!((third.input_frames, third.fill), (80, Fill::Reflect));
        assert!(edges.plan(4, &padding, length).is_none());
    }
}
