//! Mel-RoFormer's overlapping bands: which STFT bins each of `num_bands` mel filters covers,
//! as `MelBandRoformer.__init__` derives them from `librosa.filters.mel(sr, n_fft, n_mels)`
//! (librosa 0.11: Slaney's mel scale and area normalisation, `fmin` 0, `fmax` sr/2). Only
//! whether a weight is positive matters (the bands are binary), and the normalisation only
//! scales a filter by a positive factor, so this computes the triangles' sign in float64 as
//! librosa does, then forces the two corners MSST forces (`[0][0]` and `[-1][-1]` set to 1).

use crate::error::ConvertError;

/// Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above.
const LINEAR_HZ_PER_MEL: f64 = 200.0 / 3.0;
/// Where the mel scale turns logarithmic.
const LOG_START_HZ: f64 = 1000.0;

/// `librosa.hz_to_mel(hz, htk=False)`.
fn hz_to_mel(hz: f64) -> f64 {
    let log_start_mel = LOG_START_HZ / LINEAR_HZ_PER_MEL;
    let log_step = 6.4f64.ln() / 27.0;
    if hz >= LOG_START_HZ {
        log_start_mel + (hz / LOG_START_HZ).ln() / log_step
    } else {
        hz / LINEAR_HZ_PER_MEL
    }
}

/// `librosa.mel_to_hz(mel, htk=False)`.
fn mel_to_hz(mel: f64) -> f64 {
    let log_start_mel = LOG_START_HZ / LINEAR_HZ_PER_MEL;
    let log_step = 6.4f64.ln() / 27.0;
    if mel >= log_start_mel {
        LOG_START_HZ * (log_step * (mel - log_start_mel)).exp()
    } else {
        LINEAR_HZ_PER_MEL * mel
    }
}

/// For each of `num_bands` bands, the STFT bins (`0..n_fft/2+1`) it covers, ascending; fails
/// when a bin is in no band (MSST asserts the same).
pub fn mel_band_bins(
    sample_rate_hz: usize,
    n_fft: usize,
    num_bands: usize,
) -> Result<Vec<Vec<usize>>, ConvertError> {
    let num_bins = n_fft / 2 + 1;
    // np.fft.rfftfreq(n_fft, 1/sr): k · (1 / (n_fft · (1/sr))).
    let bin_step_hz = 1.0 / (n_fft as f64 * (1.0 / sample_rate_hz as f64));
    let bins_hz: Vec<f64> = (0..num_bins).map(|k| k as f64 * bin_step_hz).collect();
    // mel_frequencies(num_bands + 2, 0, sr/2): np.linspace over mels, the last point exact.
    let (low_mel, high_mel) = (hz_to_mel(0.0), hz_to_mel(sample_rate_hz as f64 / 2.0));
    let num_points = num_bands + 2;
    let step = (high_mel - low_mel) / (num_points - 1) as f64;
    let edges_hz: Vec<f64> = (0..num_points)
        .map(|i| {
            let mel = if i == num_points - 1 {
                high_mel
            } else {
                i as f64 * step + low_mel
            };
            mel_to_hz(mel)
        })
        .collect();
    let mut bands = Vec::with_capacity(num_bands);
    let mut covered = vec![false; num_bins];
    for band in 0..num_bands {
        let (rise_hz, fall_hz) = (
            edges_hz[band + 1] - edges_hz[band],
            edges_hz[band + 2] - edges_hz[band + 1],
        );
        let bins: Vec<usize> = (0..num_bins)
            .filter(|&k| {
                let is_corner =
                    (band == 0 && k == 0) || (band == num_bands - 1 && k == num_bins - 1);
                let lower = -(edges_hz[band] - bins_hz[k]) / rise_hz;
                let upper = (edges_hz[band + 2] - bins_hz[k]) / fall_hz;
                is_corner || lower.min(upper) > 0.0
            })
            .collect();
        if bins.is_empty() {
            return Err(ConvertError::Layout(format!(
                "num_bands {num_bands} mel bands at n_fft {n_fft} and {sample_rate_hz} Hz: band \
                 {} covers no STFT bin",
                band + 1
            )));
        }
        for &k in &bins {
            covered[k] = true;
        }
        bands.push(bins);
    }
    if let Some(bin) = covered.iter().position(|&c| !c) {
        return Err(ConvertError::Layout(format!(
            "num_bands {num_bands} mel bands at n_fft {n_fft} and {sample_rate_hz} Hz leave STFT \
             bin {bin} in no band (MSST refuses such a model too)"
        )));
    }
    Ok(bands)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(freqs_per_band > 0).sum(1)` for `librosa.filters.mel(sr=44100, n_fft=2048,
    /// n_mels=60)` with MSST's two corners, computed with librosa 0.11.0.
    const BINS_PER_BAND_60: [usize; 60] = [
        7, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 9, 9, 9, 10, 10, 11, 13, 13, 13, 15,
        16, 17, 19, 20, 20, 22, 24, 26, 28, 29, 31, 33, 36, 39, 41, 44, 47, 50, 54, 57, 61, 66, 71,
        76, 80, 86, 93, 99, 105, 113, 122, 130,
    ];
    /// The same for `n_fft=256, n_mels=8` (the tiny test model's bands).
    const BINS_PER_BAND_8: [usize; 8] = [6, 6, 7, 12, 20, 31, 48, 77];

    #[test]
    fn mel_scale_round_trips_and_turns_logarithmic_at_1_khz() {
        for hz in [0.0, 440.0, 999.0, 1000.0, 5000.0, 22050.0] {
            assert!((mel_to_hz(hz_to_mel(hz)) - hz).abs() < 1e-9 * hz.max(1.0));
        }
        assert!((hz_to_mel(1000.0) - 15.0).abs() < 1e-12);
    }

    #[test]
    fn bands_match_librosa_for_the_released_mel_roformers() {
        let bands = mel_band_bins(44100, 2048, 60).unwrap();
        let counts: Vec<usize> = bands.iter().map(Vec::len).collect();
        assert_eq!(counts, BINS_PER_BAND_60);
        assert_eq!(bands[0], [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(*bands[59].last().unwrap(), 1024);
        let counts: Vec<usize> = mel_band_bins(44100, 256, 8)
            .unwrap()
            .iter()
            .map(Vec::len)
            .collect();
        assert_eq!(counts, BINS_PER_BAND_8);
        // Bands are contiguous runs of bins.
        for band in &bands {
            assert!(band.windows(2).all(|w| w[1] == w[0] + 1), "{band:?}");
        }
    }

    #[test]
    fn too_many_bands_for_the_fft_leave_bands_empty_and_are_refused() {
        let error = mel_band_bins(44100, 64, 60).unwrap_err().to_string();
        assert!(error.contains("band 2 covers no"), "{error}");
    }
}
