//! The STFT and its inverse inside a graph, as a convolution with a DFT basis and a transposed
//! convolution over the frames: operators every provider has (CUDA has no `DFT` or `STFT`
//! kernel; DirectML and the CPU have both), in float32 whatever the graph's precision.
//!
//! The basis is not stored: with `n = j·N₀ + i`, `cos(2πkn/N)` is
//! `cos(2πkjN₀/N)·cos(2πki/N) − sin(…)·sin(…)` (and `sin` alike), so the graph multiplies
//! tables of `bins × N/N₀` and `bins × N₀` values (each rounded once from float64) into it,
//! then windows and scales it. These nodes read only constants: ONNX Runtime (or the engine's
//! constant folding) computes the basis once when the session is built, and the file carries
//! 2 MB of tables instead of a `2·bins × N` matrix (67 MB at N = 4096).

use stemflow_onnx::Attribute;

use super::{ints, Builder, T};
use crate::error::ConvertError;

/// An STFT's framing: FFT size, hop, the bins kept (from 0) and torch's `normalized`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpectralFrames {
    /// FFT (and window) size.
    pub n_fft: usize,
    /// Samples between frames.
    pub hop: usize,
    /// Bins kept, from bin 0: `n_fft / 2 + 1` for all of them.
    pub bins: usize,
    /// `torch.stft(normalized=True)`: the forward transform divided by `√n_fft`, the inverse
    /// multiplied by it.
    pub normalized: bool,
}

impl SpectralFrames {
    /// Frames of a signal of `len` samples without padding.
    pub fn num_frames(&self, len: usize) -> usize {
        (len - self.n_fft) / self.hop + 1
    }

    /// Samples the inverse of `frames` frames spans.
    pub fn span(&self, frames: usize) -> usize {
        (frames - 1) * self.hop + self.n_fft
    }
}

/// torch's `hann_window(n)` (periodic), in float64.
pub fn periodic_hann(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / n as f64).cos())
        .collect()
}

/// `Σ_t window²[i − t·hop]` over `frames` frames: what `torch.istft` divides its overlap-add
/// by, in float64.
pub fn window_envelope(window: &[f64], hop: usize, frames: usize) -> Vec<f64> {
    let n = window.len();
    let mut envelope = vec![0.0; (frames - 1) * hop + n];
    for t in 0..frames {
        for (i, w) in window.iter().enumerate() {
            envelope[t * hop + i] += w * w;
        }
    }
    envelope
}

/// `cos(2πm/n)` and `sin(2πm/n)`, exact at the quarter turns.
fn unit_circle(m: usize, n: usize) -> (f32, f32) {
    let m = m % n;
    if (4 * m).is_multiple_of(n) {
        // 0, 1/4, 1/2, 3/4 of a turn: exactly (±1, 0) or (0, ±1).
        return match 4 * m / n {
            0 => (1.0, 0.0),
            1 => (0.0, 1.0),
            2 => (-1.0, 0.0),
            _ => (0.0, -1.0),
        };
    }
    let angle = 2.0 * std::f64::consts::PI * m as f64 / n as f64;
    (angle.cos() as f32, angle.sin() as f32)
}

/// The split `N = N₁·N₀` with `N₀` the smallest divisor of `N` at least `√N`.
fn split_size(n: usize) -> (usize, usize) {
    let root = (n as f64).sqrt().ceil() as usize;
    let fine = (root..=n).find(|&d| n.is_multiple_of(d)).unwrap_or(n);
    (n / fine, fine)
}

/// `cos` and `sin` of `2π·k·step·index/n` for `k < bins`, `index < count`: `[bins, count]`.
fn angle_tables(bins: usize, count: usize, step: usize, n: usize) -> (Vec<f32>, Vec<f32>) {
    let mut cos = Vec::with_capacity(bins * count);
    let mut sin = Vec::with_capacity(bins * count);
    for k in 0..bins {
        for index in 0..count {
            let (c, s) = unit_circle((k * step % n) * index % n, n);
            cos.push(c);
            sin.push(s);
        }
    }
    (cos, sin)
}

impl Builder<'_> {
    /// The `[2·bins, 1, n_fft]` basis `window[n]·cos_scale_k·cos(2πkn/N)` (rows `k < bins`),
    /// then `window[n]·sin_scale_k·sin(2πkn/N)`, computed by the graph from small tables.
    fn dft_basis(
        &mut self,
        frames: &SpectralFrames,
        cos_scale: &[f64],
        sin_scale: &[f64],
    ) -> Result<T, ConvertError> {
        let (n, bins) = (frames.n_fft, frames.bins);
        if n < 2 || bins > n / 2 + 1 {
            return Err(ConvertError::Layout(format!(
                "an STFT of {n} points keeping {bins} bins is out of range"
            )));
        }
        let (coarse, fine) = split_size(n);
        // cos(2πk(jN₀ + i)/N) from the coarse angles kjN₀ and the fine ones ki.
        let (coarse_cos, coarse_sin) = angle_tables(bins, coarse, fine, n);
        let (fine_cos, fine_sin) = angle_tables(bins, fine, 1, n);
        let coarse_shape = [bins, coarse, 1];
        let fine_shape = [bins, 1, fine];
        let coarse_cos = self.constant_f32("dft_coarse_cos", &coarse_shape, coarse_cos)?;
        let coarse_sin = self.constant_f32("dft_coarse_sin", &coarse_shape, coarse_sin)?;
        let fine_cos = self.constant_f32("dft_fine_cos", &fine_shape, fine_cos)?;
        let fine_sin = self.constant_f32("dft_fine_sin", &fine_shape, fine_sin)?;
        let cc = self.binary("Mul", &coarse_cos, &fine_cos);
        let ss = self.binary("Mul", &coarse_sin, &fine_sin);
        let sc = self.binary("Mul", &coarse_sin, &fine_cos);
        let cs = self.binary("Mul", &coarse_cos, &fine_sin);
        let cos = self.binary("Sub", &cc, &ss);
        let sin = self.binary("Add", &sc, &cs);
        let window: Vec<f32> = periodic_hann(n).iter().map(|&w| w as f32).collect();
        let window = self.constant_f32("dft_window", &[1, n], window)?;
        let mut rows = Vec::with_capacity(2);
        for (table, scale) in [(cos, cos_scale), (sin, sin_scale)] {
            let table = self.reshape(&table, &[bins, n])?;
            let windowed = self.binary("Mul", &table, &window);
            let scale: Vec<f32> = scale.iter().map(|&s| s as f32).collect();
            let scale = self.constant_f32("dft_scale", &[bins, 1], scale)?;
            rows.push(self.binary("Mul", &windowed, &scale));
        }
        let basis = self.concat(&rows, 0);
        self.reshape(&basis, &[2 * bins, 1, n])
    }

    /// The STFT of each row of `x` `[N, L]` (float32; a batch on `N`), frames of `n_fft` every
    /// `hop` from sample 0 without padding: `[N, 2·bins, frames]`, the real parts of bins
    /// `0..bins` then their imaginary parts, as `torch.stft(center=False)` with a periodic Hann
    /// window.
    pub fn stft(&mut self, x: &T, frames: &SpectralFrames) -> Result<T, ConvertError> {
        let (rows, len) = (x.shape[0], x.shape[1]);
        let scale = if frames.normalized {
            1.0 / (frames.n_fft as f64).sqrt()
        } else {
            1.0
        };
        let basis = self.dft_basis(
            frames,
            &vec![scale; frames.bins],
            &vec![-scale; frames.bins],
        )?;
        let signals = self.reshape(x, &[rows, 1, len])?;
        let num_frames = frames.num_frames(len);
        Ok(self.op_like(
            &signals,
            "Conv",
            &[&signals.name, &basis.name],
            vec![
                ("dilations", ints(&[1])),
                ("kernel_shape", ints(&[frames.n_fft])),
                ("pads", ints(&[0, 0])),
                ("strides", ints(&[frames.hop])),
            ],
            vec![rows, 2 * frames.bins, num_frames],
        ))
    }

    /// The windowed inverse FFTs of `z` `[N, 2·bins, frames]` (laid out as [`Builder::stft`]
    /// gives; bins past `bins` are zero, the imaginary parts of bin 0 and of the Nyquist bin
    /// ignored, as `irfft` does), overlapped and added: `[N, span]`. `torch.istft` divides this
    /// by [`window_envelope`]; the caller does, over the samples it keeps.
    pub fn istft_overlap_add(&mut self, z: &T, frames: &SpectralFrames) -> Result<T, ConvertError> {
        let n = frames.n_fft as f64;
        let norm = if frames.normalized { n.sqrt() } else { 1.0 };
        // irfft: (1/N)·Σ c_k (Re X_k cos − Im X_k sin), c_k = 1 at bin 0 and Nyquist, else 2.
        let factor = |k: usize| {
            let edge = k == 0 || 2 * k == frames.n_fft;
            (if edge { 1.0 } else { 2.0 }) * norm / n
        };
        let cos_scale: Vec<f64> = (0..frames.bins).map(factor).collect();
        let sin_scale: Vec<f64> = cos_scale.iter().map(|c| -c).collect();
        let basis = self.dft_basis(frames, &cos_scale, &sin_scale)?;
        let (rows, channels, num_frames) = (z.shape[0], z.shape[1], z.shape[2]);
        if channels != 2 * frames.bins {
            return Err(ConvertError::Layout(format!(
                "internal: an inverse STFT of {channels} channels for {} bins",
                frames.bins
            )));
        }
        let span = frames.span(num_frames);
        let added = self.op_like(
            z,
            "ConvTranspose",
            &[&z.name, &basis.name],
            vec![
                ("kernel_shape", ints(&[frames.n_fft])),
                ("strides", ints(&[frames.hop])),
            ],
            vec![rows, 1, span],
        );
        self.reshape(&added, &[rows, span])
    }

    /// `added` (an [`Builder::istft_overlap_add`] of `num_frames` frames, cut to the samples
    /// from `start` on) divided by the periodic Hann window's envelope over those samples, as
    /// `torch.istft` divides it (0 where the envelope is).
    pub fn divide_by_envelope(
        &mut self,
        added: &T,
        frames: &SpectralFrames,
        num_frames: usize,
        start: usize,
    ) -> Result<T, ConvertError> {
        let length = added.shape[added.shape.len() - 1];
        let envelope = window_envelope(&periodic_hann(frames.n_fft), frames.hop, num_frames);
        let reciprocal: Vec<f32> = envelope[start..start + length]
            .iter()
            .map(|&e| if e > 0.0 { (1.0 / e) as f32 } else { 0.0 })
            .collect();
        let reciprocal = self.constant_f32("istft_envelope", &[length], reciprocal)?;
        Ok(self.binary("Mul", added, &reciprocal))
    }

    /// `x` padded along `axis` by `before` and `after` values: ONNX `Pad` with `mode`
    /// `reflect` (mirrored without the edge value, as `F.pad(mode="reflect")`), or zeros
    /// (`None`: the attribute left out).
    pub fn pad(
        &mut self,
        x: &T,
        axis: usize,
        (before, after): (usize, usize),
        mode: Option<&str>,
    ) -> Result<T, ConvertError> {
        if x.batch == Some(axis) {
            return self.along_batch(
                x,
                axis,
                |b, x, axis| b.pad(x, axis, (before, after), mode),
                |b, t| b.batch_together(&t),
            );
        }
        let rank = x.shape.len();
        let mut pads = vec![0i64; 2 * rank];
        pads[axis] = before as i64;
        pads[rank + axis] = after as i64;
        let pads = self.i64s(&pads)?;
        let mut shape = x.shape.clone();
        shape[axis] += before + after;
        Ok(self.op_like(
            x,
            "Pad",
            &[&x.name, &pads],
            mode.map(|m| ("mode", Attribute::String(m.to_owned())))
                .into_iter()
                .collect(),
            shape,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_envelope_sums_the_squared_windows_of_every_frame() {
        let window = periodic_hann(8);
        let envelope = window_envelope(&window, 2, 5);
        assert_eq!(envelope.len(), 16);
        // Hann² with 75 % overlap sums to 1.5 where four frames cover a sample.
        for value in &envelope[6..10] {
            assert!((value - 1.5).abs() < 1e-12, "{value}");
        }
        assert_eq!(envelope[0], 0.0);
    }

    #[test]
    fn the_unit_circle_is_exact_at_quarter_turns() {
        assert_eq!(unit_circle(0, 8), (1.0, 0.0));
        assert_eq!(unit_circle(2, 8), (0.0, 1.0));
        assert_eq!(unit_circle(12, 8), (-1.0, 0.0));
        assert_eq!(unit_circle(6, 8), (0.0, -1.0));
        assert!((unit_circle(1, 8).0 - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-7);
    }

    #[test]
    fn sizes_split_into_two_factors_near_the_root() {
        assert_eq!(split_size(4096), (64, 64));
        assert_eq!(split_size(2048), (32, 64));
        assert_eq!(split_size(6144), (64, 96));
        assert_eq!(split_size(7680), (80, 96));
        assert_eq!(split_size(16), (4, 4));
        assert_eq!(split_size(13), (1, 13));
    }
}
