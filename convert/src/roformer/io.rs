//! The graph's inputs and outputs. The CPU graph takes the chunk's spectrum (the engine's FFT
//! makes it) and gives the complex masks (the engine applies them and inverts the STFT). A GPU
//! graph takes a batch of chunks and gives their stems: MSST's `torch.stft` (centred, reflect
//! padding, periodic Hann), the masking (DC zeroed when the config says so) and `torch.istft`
//! are inside it ([`crate::ops::Builder::stft`]).

use stemflow_onnx::Dim;

use super::config::RoFormerConfig;
use crate::error::ConvertError;
use crate::ops::spectral::SpectralFrames;
use crate::ops::{Builder, DataType, T};

/// The symbolic batch dimension.
const BATCH_DIM: &str = "batch";

/// MSST's framing: all `n_fft / 2 + 1` bins, not normalised.
fn frames(config: &RoFormerConfig) -> SpectralFrames {
    SpectralFrames {
        n_fft: config.n_fft,
        hop: config.hop_frames,
        bins: config.num_bins(),
        normalized: false,
    }
}

/// The network's input, the chunk's spectrum `[1, 2F, frames, 2]` (stereo interleaved per bin,
/// real and imaginary last): the CPU graph's input, a GPU graph's STFT of its input `mix`.
pub(super) fn input_spectrum(
    b: &mut Builder<'_>,
    config: &RoFormerConfig,
) -> Result<T, ConvertError> {
    let (num_bins, frames_count) = (config.num_bins(), config.frames());
    let spec_shape = [1, 2 * num_bins, frames_count, 2];
    if !b.is_gpu() {
        b.graph
            .add_input("spec", spec_shape.iter().map(|&d| Dim::Fixed(d)).collect());
        return Ok(T::new("spec", &spec_shape));
    }
    let chunk = config.chunk_frames;
    b.graph.add_input(
        "mix",
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(2),
            Dim::Fixed(chunk),
        ],
    );
    let mix = T::batched("mix", &[1, 2, chunk]);
    let signals = b.reshape(&mix, &[2, chunk])?;
    let half = config.n_fft / 2;
    let padded = b.pad(&signals, 1, (half, half), Some("reflect"))?;
    let z = b.stft(&padded, &frames(config))?;
    // [channel, (re, im), bin, frame] → [bin, channel, frame, (re, im)].
    let z = b.reshape(&z, &[1, 2, 2, num_bins, frames_count])?;
    let z = b.transpose(&z, &[0, 3, 1, 4, 2]);
    let spec = b.reshape(&z, &spec_shape)?;
    Ok(b.as_type(&spec, b.compute_type()))
}

/// The graph's output from the masks `[1, N, 2F, frames, 2]`: the CPU graph's `mask`; a GPU
/// graph's `stems` `[B, N, 2, chunk]`, the masked spectrum `spec` inverted.
pub(super) fn output(
    b: &mut Builder<'_>,
    config: &RoFormerConfig,
    spec: &T,
    mask: &T,
) -> Result<(), ConvertError> {
    if !b.is_gpu() {
        b.graph
            .add_node("Identity", "mask", &[&mask.name], &["mask"], Vec::new());
        b.graph
            .add_output("mask", mask.shape.iter().map(|&d| Dim::Fixed(d)).collect());
        return Ok(());
    }
    let (stems, rows, frames_count) = (mask.shape[1], mask.shape[2], mask.shape[3]);
    let num_bins = rows / 2;
    let mask = b.as_type(mask, DataType::Float32);
    let spec = b.as_type(spec, DataType::Float32);
    let spec = b.reshape(&spec, &[1, 1, rows, frames_count, 2])?;
    let [m_re, m_im] = parts(b, &mask)?;
    let [s_re, s_im] = parts(b, &spec)?;
    let (a, c) = (b.binary("Mul", &s_re, &m_re), b.binary("Mul", &s_im, &m_im));
    let (d, e) = (b.binary("Mul", &s_re, &m_im), b.binary("Mul", &s_im, &m_re));
    let mut masked = [b.binary("Sub", &a, &c), b.binary("Add", &d, &e)];
    if config.zero_dc {
        // Both channels' bin 0.
        let keep: Vec<f32> = (0..rows).map(|r| if r < 2 { 0.0 } else { 1.0 }).collect();
        let keep = b.constant_f32("keep_bins", &[rows, 1, 1], keep)?;
        masked = masked.map(|part| b.binary("Mul", &part, &keep));
    }
    // [1, N, (bin, channel), frame, 1] → [N · channel, (re bins, im bins), frame].
    let planes: Vec<T> = masked
        .iter()
        .map(|part| {
            let part = b.reshape(part, &[1, stems, num_bins, 2, frames_count])?;
            Ok(b.transpose(&part, &[0, 1, 3, 2, 4]))
        })
        .collect::<Result<_, ConvertError>>()?;
    let z = b.concat(&planes, 3);
    let z = b.reshape(&z, &[stems * 2, rows, frames_count])?;
    let framing = frames(config);
    let added = b.istft_overlap_add(&z, &framing)?;
    // `torch.istft(center=True, length=chunk)`: from n_fft/2 on, divided by the envelope.
    let (chunk, half) = (config.chunk_frames, config.n_fft / 2);
    let kept = b.slice(&added, 1, half, half + chunk)?;
    let waveform = b.divide_by_envelope(&kept, &framing, frames_count, half)?;
    let stems_out = b.reshape(&waveform, &[1, stems, 2, chunk])?;
    b.graph.add_node(
        "Identity",
        "stems",
        &[&stems_out.name],
        &["stems"],
        Vec::new(),
    );
    b.graph.add_output(
        "stems",
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(stems),
            Dim::Fixed(2),
            Dim::Fixed(chunk),
        ],
    );
    Ok(())
}

/// The real and imaginary parts (the last axis, of 2) of `x`, each keeping a last axis of 1.
fn parts(b: &mut Builder<'_>, x: &T) -> Result<[T; 2], ConvertError> {
    let last = x.shape.len() - 1;
    let [re, im]: [T; 2] = b
        .split(x, last, &[1, 1])?
        .try_into()
        .map_err(|_| ConvertError::Layout("internal: a complex split".into()))?;
    Ok([re, im])
}
