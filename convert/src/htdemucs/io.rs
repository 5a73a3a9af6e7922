//! The graph's inputs and outputs. The CPU graph takes the waveform and its spectrogram (the
//! engine's FFT makes it, demucs' `_spec`) and gives both branches' stems apart (the engine adds
//! `_ispec` of the spectrogram stems). A GPU graph takes a batch of waveforms and gives their
//! stems: `_spec` and `_ispec` are inside it ([`crate::ops::Builder::stft`]).

use stemflow_onnx::Dim;

use super::config::HtDemucsConfig;
use crate::error::ConvertError;
use crate::ops::spectral::SpectralFrames;
use crate::ops::{Builder, T};

/// Name of a GPU graph's input and output.
const MIX: &str = "mix";
const STEMS: &str = "stems";
/// The symbolic batch dimension.
pub(crate) const BATCH_DIM: &str = "batch";

/// demucs' `_spec` framing: hop `nfft / 4`, the Nyquist bin dropped, normalised.
fn frames(config: &HtDemucsConfig) -> SpectralFrames {
    SpectralFrames {
        n_fft: config.nfft,
        hop: config.hop_frames(),
        bins: config.spec_bins(),
        normalized: true,
    }
}

/// The padding `_spec` puts before the segment (`3·hop/2`) and after it (as much, plus the
/// rest of the last hop).
fn spec_padding(config: &HtDemucsConfig) -> (usize, usize) {
    let hop = config.hop_frames();
    let pad = hop / 2 * 3;
    (
        pad,
        pad + config.spec_frames() * hop - config.segment_frames,
    )
}

/// The graph's inputs: the waveform `[1, channels, T]` and its spectrogram
/// `[1, 2·channels, bins, frames]` (complex as channels).
pub(super) fn inputs(b: &mut Builder<'_>, config: &HtDemucsConfig) -> Result<(T, T), ConvertError> {
    let (length, bins, frames_count) = (
        config.segment_frames,
        config.spec_bins(),
        config.spec_frames(),
    );
    let channels = config.audio_channels;
    if !b.is_gpu() {
        b.graph.add_input(
            "mix",
            vec![Dim::Fixed(1), Dim::Fixed(channels), Dim::Fixed(length)],
        );
        b.graph.add_input(
            "spec",
            vec![
                Dim::Fixed(1),
                Dim::Fixed(2 * channels),
                Dim::Fixed(bins),
                Dim::Fixed(frames_count),
            ],
        );
        let mix = T::new("mix", &[1, channels, length]);
        let spec = T::new("spec", &[1, 2 * channels, bins, frames_count]);
        return Ok((mix, spec));
    }
    b.graph.add_input(
        MIX,
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(channels),
            Dim::Fixed(length),
        ],
    );
    let mix = T::batched(MIX, &[1, channels, length]);
    let signals = b.reshape(&mix, &[channels, length])?;
    let padded = b.pad(&signals, 1, spec_padding(config), Some("reflect"))?;
    let z = b.stft(&padded, &frames(config))?;
    // [channels, (re, im), bins, frames] = demucs' complex-as-channels.
    let spec = b.reshape(&z, &[1, 2 * channels, bins, frames_count])?;
    Ok((mix, spec))
}

/// The graph's outputs from the spectrogram stems `[1, S, 2·channels, bins, frames]` and the
/// waveform stems `[1, S, channels, T]` (both denormalised, float32).
pub(super) fn outputs(
    b: &mut Builder<'_>,
    config: &HtDemucsConfig,
    spec_out: &T,
    wave_out: &T,
) -> Result<(), ConvertError> {
    if !b.is_gpu() {
        for (value, name) in [(spec_out, "spec_stems"), (wave_out, "wave_stems")] {
            b.graph
                .add_node("Identity", name, &[&value.name], &[name], Vec::new());
            b.graph
                .add_output(name, value.shape.iter().map(|&d| Dim::Fixed(d)).collect());
        }
        return Ok(());
    }
    let (sources, channels) = (spec_out.shape[1], config.audio_channels);
    let (bins, frames_count, length) = (
        config.spec_bins(),
        config.spec_frames(),
        config.segment_frames,
    );
    let framing = frames(config);
    let z = b.reshape(spec_out, &[sources * channels, 2 * bins, frames_count])?;
    let added = b.istft_overlap_add(&z, &framing)?;
    // `_ispec`: torch.istft over the frames with two silent ones on each side, centred, then
    // the segment from 3·hop/2 on; the overlap-add here starts at frame 2.
    let (pad, _) = spec_padding(config);
    let kept = b.slice(&added, 1, pad, pad + length)?;
    let start = 2 * framing.hop + pad;
    let waveform = b.divide_by_envelope(&kept, &framing, frames_count + 4, start)?;
    let waveform = b.reshape(&waveform, &[1, sources, channels, length])?;
    let stems = b.named(STEMS).binary("Add", wave_out, &waveform);
    b.graph.add_output(
        STEMS,
        vec![
            Dim::Symbolic(BATCH_DIM.into()),
            Dim::Fixed(stems.shape[1]),
            Dim::Fixed(channels),
            Dim::Fixed(length),
        ],
    );
    Ok(())
}
