//! HTDemucs converted by Stemflow (`stemflow models get htdemucs`, `stemflow models import
//! MODEL.th`): the network in the graph, its STFT and inverse STFT here, in Rust's FFT.
//!
//! Graph: `mix` `[1, 2, T]` and `spec` `[1, 4, nfft/2, frames]` → `wave_stems` `[1, S, 2, T]`
//! and `spec_stems` `[1, S, 4, nfft/2, frames]`. `spec` is demucs' `_spec` of the chunk
//! (reflect padding of `3·hop/2` and up to a whole hop, `torch.stft` normalised, frames 2…
//! of `center=True`, the Nyquist bin dropped) as complex-as-channels (left real, left
//! imaginary, right real, right imaginary); a stem is `wave_stems` plus `_ispec` of
//! `spec_stems` — `HTDemucs.forward` exactly. Chunks and their weights are the demucs-onnx
//! family's ([`super::htdemucs`]): `apply_model`'s.

use super::description::{
    is_fixed, ChunkCodec, ChunkRun, FamilyPipeline, GraphIo, ModelDescription, Recognition,
    BINS_RANGE, FRAMES_RANGE, MAX_CHUNK_FRAMES, MAX_MODEL_STEMS, MAX_SPECTRAL_DIM, SEGMENT_RANGE,
    STEMS_RANGE,
};
use super::file_edges::FileEdges;
use super::htdemucs::{demucs_setup, windows, DemucsEdges};
use super::stft::{Complex64, Stft};
use crate::model_error::ModelError;
use crate::runtime::signature::{GraphSignature, TensorSignature};

/// The graph's input and output names.
const MIX: &str = "mix";
const SPEC: &str = "spec";
const WAVE_STEMS: &str = "wave_stems";
const SPEC_STEMS: &str = "spec_stems";

/// A converted HTDemucs graph's two named inputs and two named outputs: `mix`, `spec`,
/// `wave_stems`, `spec_stems`; `None` when the graph does not have exactly these.
fn named_tensors(signature: &GraphSignature) -> Option<[&TensorSignature; 4]> {
    fn find<'a>(list: &'a [TensorSignature], name: &str) -> Option<&'a TensorSignature> {
        list.iter().find(|t| t.name == name)
    }
    if signature.inputs.len() != 2 || signature.outputs.len() != 2 {
        return None;
    }
    Some([
        find(&signature.inputs, MIX)?,
        find(&signature.inputs, SPEC)?,
        find(&signature.outputs, WAVE_STEMS)?,
        find(&signature.outputs, SPEC_STEMS)?,
    ])
}

/// Whether a graph is a converted HTDemucs graph, by its two named inputs and outputs.
pub(super) fn claims(recognition: &Recognition<'_>) -> bool {
    named_tensors(recognition.signature).is_some()
}

pub(super) fn describe(recognition: &Recognition<'_>) -> Result<ModelDescription, ModelError> {
    let [mix, spec, wave_stems, spec_stems] =
        named_tensors(recognition.signature).ok_or_else(|| recognition.mismatch())?;
    let all_f32 = [mix, spec, wave_stems, spec_stems].iter().all(|t| t.is_f32);
    let (m, s, w, o) = (&mix.dims, &spec.dims, &wave_stems.dims, &spec_stems.dims);
    let shaped = m.len() == 3
        && s.len() == 4
        && w.len() == 4
        && o.len() == 5
        && m[..2] == [1, 2]
        && s[..2] == [1, 4]
        && w[0] == 1
        && w[2..] == [2, m[2]]
        && o[..2] == w[..2]
        && o[2..] == s[1..];
    // The family's shape with a size out of range: say which, not "mismatch".
    if all_f32 && shaped {
        recognition.check_range(&SEGMENT_RANGE, mix, 2)?;
        recognition.check_range(&BINS_RANGE, spec, 2)?;
        recognition.check_range(&FRAMES_RANGE, spec, 3)?;
        recognition.check_range(&STEMS_RANGE, wave_stems, 1)?;
    }
    let shapes_ok = m.len() == 3
        && s.len() == 4
        && w.len() == 4
        && o.len() == 5
        && m[..2] == [1, 2]
        && is_fixed(m[2], MAX_CHUNK_FRAMES as i64)
        && s[..2] == [1, 4]
        && is_fixed(s[2], MAX_SPECTRAL_DIM)
        && is_fixed(s[3], MAX_SPECTRAL_DIM)
        && (s[2] as u64).is_power_of_two()
        && s[2] >= 8
        && w[0] == 1
        && is_fixed(w[1], MAX_MODEL_STEMS)
        && w[2..] == [2, m[2]]
        && o[..2] == w[..2]
        && o[2..] == s[1..];
    if !(all_f32 && shapes_ok) {
        return Err(recognition.mismatch());
    }
    let chunk_frames = m[2] as usize;
    let bins = s[2] as usize;
    let nfft = 2 * bins;
    let hop_frames = nfft / 4;
    let frames = s[3] as usize;
    if frames != chunk_frames.div_ceil(hop_frames) {
        return Err(recognition.params_error(format!(
            "its spectrogram has {frames} frames; a chunk of {chunk_frames} at nfft {nfft} \
             makes {}",
            chunk_frames.div_ceil(hop_frames)
        )));
    }
    let pipeline = HtDemucsStftPipeline { nfft };
    let setup = demucs_setup(recognition, pipeline, w[1] as usize, chunk_frames)?;
    Ok(setup.describe(GraphIo {
        inputs: vec![
            (MIX.to_owned(), vec![1, 2, chunk_frames]),
            (SPEC.to_owned(), vec![1, 4, bins, frames]),
        ],
        outputs: vec![WAVE_STEMS.to_owned(), SPEC_STEMS.to_owned()],
    }))
}

/// The STFT size is all there is to configure around the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HtDemucsStftPipeline {
    nfft: usize,
}

impl FamilyPipeline for HtDemucsStftPipeline {
    fn windows(&self, chunk_frames: usize) -> (Vec<f64>, Vec<f64>) {
        windows(chunk_frames)
    }

    fn file_edges(&self, description: &ModelDescription) -> Box<dyn FileEdges> {
        Box::new(DemucsEdges::new(description.layout))
    }

    fn codec(&self, description: &ModelDescription) -> Box<dyn ChunkCodec> {
        let chunk_frames = description.layout.chunk_frames;
        let hop_frames = self.nfft / 4;
        let frames = chunk_frames.div_ceil(hop_frames);
        // `_spec`: reflect padding of 3·hop/2 before, 3·hop/2 plus the rest of the last hop after.
        let pad_frames = hop_frames / 2 * 3;
        let padded_len = frames * hop_frames + 2 * pad_frames;
        let stft = Stft::new(self.nfft, hop_frames);
        // `center=True` frames of the padded chunk; demucs keeps frames 2 … 2 + frames.
        let all_frames = stft.num_frames(padded_len);
        Box::new(HtDemucsStftCodec {
            chunk_frames,
            num_stems: description.stems.len(),
            stems: vec![0.0; description.stems.len() * 2 * chunk_frames],
            transform: SpecTransform {
                bins: self.nfft / 2,
                frames,
                all_frames,
                pad_frames,
                norm: (self.nfft as f64).sqrt(),
                padded: vec![0.0; padded_len],
                spectrum: vec![Complex64::default(); stft.num_bins() * all_frames],
                waveform: vec![0.0; padded_len],
                stft,
            },
        })
    }
}

/// The STFT of each chunk into the graph, the inverse STFT of its spectrogram stems out.
struct HtDemucsStftCodec {
    chunk_frames: usize,
    num_stems: usize,
    /// The stems handed on, `[stem][channel][frame]`.
    stems: Vec<f32>,
    transform: SpecTransform,
}

/// demucs' `_spec` and `_ispec` with their buffers.
struct SpecTransform {
    /// Bins the graph sees (`nfft / 2`).
    bins: usize,
    /// Spectrogram frames the graph sees.
    frames: usize,
    /// Frames of the `center=True` STFT of the padded chunk (`frames + 4`).
    all_frames: usize,
    /// `3·hop/2`.
    pad_frames: usize,
    /// `√nfft`: `torch.stft(normalized=True)` divides by it, `istft` multiplies.
    norm: f64,
    stft: Stft,
    /// The reflect-padded chunk of one channel.
    padded: Vec<f32>,
    /// One channel's full spectrum, bin-major.
    spectrum: Vec<Complex64>,
    /// One inverse STFT.
    waveform: Vec<f64>,
}

impl SpecTransform {
    /// demucs' `_spec` of one channel into `spec` (`[2][bins][frames]`: real, imaginary).
    fn forward(&mut self, signal: &[f32], spec: &mut [f32]) {
        let len = signal.len() as isize;
        let pad = self.pad_frames as isize;
        for (i, value) in self.padded.iter_mut().enumerate() {
            // `F.pad(mode="reflect")`: mirrored without the edge sample.
            let mut index = i as isize - pad;
            if index < 0 {
                index = -index;
            }
            if index >= len {
                index = 2 * (len - 1) - index;
            }
            *value = signal[index.clamp(0, len - 1) as usize];
        }
        self.stft.forward(&self.padded, &mut self.spectrum);
        let (bins, frames, all) = (self.bins, self.frames, self.all_frames);
        let (re, im) = spec.split_at_mut(bins * frames);
        for bin in 0..bins {
            for frame in 0..frames {
                let value = self.spectrum[bin * all + frame + 2] / self.norm;
                re[bin * frames + frame] = value.re as f32;
                im[bin * frames + frame] = value.im as f32;
            }
        }
    }

    /// demucs' `_ispec` of one stem channel (`spec`: `[2][bins][frames]`) added to `out`.
    fn inverse(&mut self, spec: &[f32], out: &mut [f32]) {
        let (bins, frames, all) = (self.bins, self.frames, self.all_frames);
        let (re, im) = spec.split_at(bins * frames);
        self.spectrum.fill(Complex64::default());
        for bin in 0..bins {
            for frame in 0..frames {
                let i = bin * frames + frame;
                self.spectrum[bin * all + frame + 2] =
                    Complex64::new(f64::from(re[i]), f64::from(im[i])) * self.norm;
            }
        }
        self.stft.inverse(&self.spectrum, all, &mut self.waveform);
        for (o, w) in out.iter_mut().zip(&self.waveform[self.pad_frames..]) {
            *o += *w as f32;
        }
    }
}

impl ChunkCodec for HtDemucsStftCodec {
    fn run_chunk(&mut self, run: ChunkRun<'_>) -> Result<(), String> {
        let chunk = self.chunk_frames;
        let num_stems = self.num_stems;
        let plane = 2 * self.transform.bins * self.transform.frames;
        let mut stems = std::mem::take(&mut self.stems);
        let transform = std::cell::RefCell::new(&mut self.transform);
        let [left, right] = run.input;
        let result = run.runner.run_all(
            |inputs| {
                let [mix, spec] = inputs else {
                    return Err("the graph takes two inputs".into());
                };
                mix[..chunk].copy_from_slice(left);
                mix[chunk..].copy_from_slice(right);
                let (spec_left, spec_right) = spec.split_at_mut(plane);
                let mut transform = transform.borrow_mut();
                transform.forward(left, spec_left);
                transform.forward(right, spec_right);
                Ok(())
            },
            |values| {
                let [wave, spec] = values else {
                    return Err("the graph gives two outputs".into());
                };
                let expected = (num_stems * 2 * chunk, num_stems * 2 * plane);
                if (wave.len(), spec.len()) != expected {
                    return Err(format!(
                        "the model returned {} and {} values where its signature declares {} \
                         and {}",
                        wave.len(),
                        spec.len(),
                        expected.0,
                        expected.1
                    ));
                }
                stems.copy_from_slice(wave);
                let mut transform = transform.borrow_mut();
                for (index, out) in stems.chunks_exact_mut(chunk).enumerate() {
                    transform.inverse(&spec[index * plane..][..plane], out);
                }
                Ok(())
            },
        );
        if result.is_ok() {
            (run.outputs)(&stems);
        }
        self.stems = stems;
        result
    }
}
