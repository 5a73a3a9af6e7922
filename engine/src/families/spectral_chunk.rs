//! What a spectral family's codec (MDX-Net, RoFormer) reuses from one chunk to the next: the
//! STFT, both channels' spectra, the spectrum of the waveform to invert next, and the chunk's
//! decoded waveforms.

use super::stft::{Complex64, Stft};

/// A chunk's spectra and waveforms, allocated once. Not realtime-safe to create; the rest is.
pub(super) struct SpectralChunk {
    pub stft: Stft,
    pub chunk_frames: usize,
    /// The chunk's spectra, `[channel][bin][frame]`.
    pub spectra: [Vec<Complex64>; 2],
    /// The spectrum [`SpectralChunk::synthesise`] inverts, `[bin][frame]`.
    pub inverse_spectrum: Vec<Complex64>,
    /// One inverse STFT.
    inverse_output: Vec<f64>,
    /// The chunk's waveforms, `chunk_frames` each: `[channel]`, or `[stem][channel]`.
    pub decoded: Vec<f32>,
}

impl SpectralChunk {
    /// Buffers for chunks of `chunk_frames` and `num_waveforms` decoded waveforms.
    pub fn new(n_fft: usize, hop_frames: usize, chunk_frames: usize, num_waveforms: usize) -> Self {
        let stft = Stft::new(n_fft, hop_frames);
        let spectrum_len = stft.num_bins() * stft.num_frames(chunk_frames);
        Self {
            decoded: vec![0.0; num_waveforms * chunk_frames],
            spectra: [
                vec![Complex64::default(); spectrum_len],
                vec![Complex64::default(); spectrum_len],
            ],
            inverse_spectrum: vec![Complex64::default(); spectrum_len],
            inverse_output: vec![0.0; chunk_frames],
            chunk_frames,
            stft,
        }
    }

    /// The spectra of the chunk's two channels. Realtime-safe.
    pub fn analyse(&mut self, input: [&[f32]; 2]) {
        for (channel, signal) in input.into_iter().enumerate() {
            self.stft.forward(signal, &mut self.spectra[channel]);
        }
    }

    /// The inverse STFT of [`SpectralChunk::inverse_spectrum`] (`num_frames` frames) as
    /// decoded waveform `waveform`. Realtime-safe.
    pub fn synthesise(&mut self, num_frames: usize, waveform: usize) {
        let chunk = self.chunk_frames;
        self.stft
            .inverse(&self.inverse_spectrum, num_frames, &mut self.inverse_output);
        for (out, &v) in self.decoded[waveform * chunk..][..chunk]
            .iter_mut()
            .zip(&self.inverse_output)
        {
            *out = v as f32;
        }
    }
}
