//! SDR as museval computes it for MUSDB18 (BSSEval v4 as `museval.eval_mus_track` runs it), and
//! the MDX challenge's uSDR.
//!
//! museval's BSSEval v4 ("images" version, time-invariant distortion filters) splits each
//! estimate into the reference, spatial distortion, interference and artefacts; its SDR is the
//! reference's energy over that of the three error terms, whose sum is exactly the estimate
//! minus the reference. The 512-tap filters it solves a large linear system for change the
//! split (SIR, SAR, ISR), not the sum: per window, SDR = `10·log10(Σ s² / Σ (ŝ − s)²)` over both
//! channels, which needs no linear algebra (checked against museval 0.4.1 to 1e-5 dB). As
//! `eval_mus_track` runs it: windows of one second (`int(rate)` samples), hop one second, only
//! whole windows (a signal shorter than a window is one window); a window where any target's
//! reference or estimate is silent (its channels sum to zero at every sample) is NaN for every
//! target; a track's score is the median of its windows, NaN left out (`np.nanmedian`). museval
//! refuses a track outright when a reference or estimate is silent throughout.
//!
//! ISR, SIR and SAR are not computed.

/// museval's scores of one target of a track, and its uSDR.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetScore {
    /// SDR of each window in dB (NaN where museval's is NaN, +inf for an exact window).
    pub sdr_frames_db: Vec<f64>,
    /// The median of the windows without NaN (`np.nanmedian`); NaN when every window is.
    pub sdr_db: f64,
    /// The MDX challenge's SDR of the whole stem ([`usdr_db`]).
    pub usdr_db: f64,
}

/// Why museval would not score a track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A reference is silent throughout (museval: "All the reference sources should be
    /// non-silent").
    SilentReference(usize),
    /// An estimate is silent throughout (museval: "All the estimated sources should be
    /// non-silent").
    SilentEstimate(usize),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::SilentReference(_) => write!(f, "a reference is silent throughout"),
            Refusal::SilentEstimate(_) => write!(f, "an estimate is silent throughout"),
        }
    }
}

/// One target's sums over one window (or a whole track).
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    /// Σ s² and Σ (ŝ − s)² over both channels.
    signal: f64,
    error: f64,
    /// Whether the reference's and the estimate's channels sum to something other than zero
    /// at some sample (museval's "not silent").
    is_reference_heard: bool,
    is_estimate_heard: bool,
}

impl Sums {
    fn add(&mut self, reference: [&[f32]; 2], estimate: [&[f32]; 2]) {
        for channel in 0..2 {
            for (&s, &e) in reference[channel].iter().zip(estimate[channel]) {
                let (s, e) = (f64::from(s), f64::from(e));
                self.signal += s * s;
                self.error += (e - s) * (e - s);
            }
        }
        let heard = |signal: [&[f32]; 2]| {
            signal[0]
                .iter()
                .zip(signal[1])
                .any(|(&l, &r)| f64::from(l) + f64::from(r) != 0.0)
        };
        self.is_reference_heard |= heard(reference);
        self.is_estimate_heard |= heard(estimate);
    }

    fn is_silent(&self) -> bool {
        !self.is_reference_heard || !self.is_estimate_heard
    }

    fn sdr_db(&self) -> f64 {
        if self.error == 0.0 {
            f64::INFINITY
        } else {
            10.0 * (self.signal / self.error).log10()
        }
    }
}

/// museval's SDR of every target of a track, evaluated together (the silent-window rule couples
/// them), and their uSDR, from the track's frames pushed in order in blocks of any size: memory
/// does not grow with the track.
pub struct TrackScorer {
    window_frames: usize,
    /// Each target's sums over the window under way, and over the whole track.
    current: Vec<Sums>,
    whole: Vec<Sums>,
    /// Each whole window's sums, target by target.
    windows: Vec<Vec<Sums>>,
    /// Frames of the window under way.
    frames_in_window: usize,
}

impl TrackScorer {
    /// Scores `num_targets` targets at `sample_rate_hz` (windows of `int(rate)` samples).
    pub fn new(num_targets: usize, sample_rate_hz: u32) -> Self {
        Self {
            window_frames: (sample_rate_hz as usize).max(1),
            current: vec![Sums::default(); num_targets],
            whole: vec![Sums::default(); num_targets],
            windows: Vec::new(),
            frames_in_window: 0,
        }
    }

    /// The next frames of every target: `references[i]` and `estimates[i]` (stereo, all the
    /// same length) for target `i`.
    ///
    /// # Panics
    /// If the counts or lengths differ.
    pub fn push(&mut self, references: &[[&[f32]; 2]], estimates: &[[&[f32]; 2]]) {
        assert!(references.len() == self.current.len() && estimates.len() == self.current.len());
        let len = references.first().map_or(0, |r| r[0].len());
        for signal in references.iter().chain(estimates) {
            assert!(
                signal[0].len() == len && signal[1].len() == len,
                "lengths differ"
            );
        }
        let mut start = 0;
        while start < len {
            let take = (self.window_frames - self.frames_in_window).min(len - start);
            let range = start..start + take;
            for (index, (reference, estimate)) in references.iter().zip(estimates).enumerate() {
                let reference = [&reference[0][range.clone()], &reference[1][range.clone()]];
                let estimate = [&estimate[0][range.clone()], &estimate[1][range.clone()]];
                self.current[index].add(reference, estimate);
                self.whole[index].add(reference, estimate);
            }
            self.frames_in_window += take;
            start += take;
            if self.frames_in_window == self.window_frames {
                self.windows.push(std::mem::take(&mut self.current));
                self.current = vec![Sums::default(); self.whole.len()];
                self.frames_in_window = 0;
            }
        }
    }

    /// The scores, once every frame was pushed: only whole windows count, unless the track is
    /// shorter than one (then it is one window). When museval would refuse the track, the
    /// refusal, and every target's SDR NaN without windows (the uSDR stays).
    pub fn finish(mut self) -> TrackScores {
        let refusal = if let Some(index) = self.whole.iter().position(|s| !s.is_reference_heard) {
            Some(Refusal::SilentReference(index))
        } else {
            self.whole
                .iter()
                .position(|s| !s.is_estimate_heard)
                .map(Refusal::SilentEstimate)
        };
        if refusal.is_some() {
            self.windows.clear();
            self.current.clear();
        } else if self.windows.is_empty() {
            self.windows.push(std::mem::take(&mut self.current));
        }
        let targets = (0..self.whole.len())
            .map(|target| {
                let sdr_frames_db: Vec<f64> = self
                    .windows
                    .iter()
                    .map(|window| {
                        if window.iter().any(Sums::is_silent) {
                            f64::NAN
                        } else {
                            window[target].sdr_db()
                        }
                    })
                    .collect();
                let whole = &self.whole[target];
                TargetScore {
                    sdr_db: nan_median(&sdr_frames_db),
                    sdr_frames_db,
                    usdr_db: usdr_from_sums(whole.signal, whole.error),
                }
            })
            .collect();
        TrackScores { targets, refusal }
    }
}

/// A track's scores, target by target.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackScores {
    /// In the order the targets were pushed.
    pub targets: Vec<TargetScore>,
    /// Why museval would refuse the track (then every SDR is NaN).
    pub refusal: Option<Refusal>,
}

/// `np.nanmedian`: the median of the values that are not NaN (the mean of the middle two for
/// an even count); NaN when all are.
pub fn nan_median(values: &[f64]) -> f64 {
    let mut kept: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
    if kept.is_empty() {
        return f64::NAN;
    }
    kept.sort_by(f64::total_cmp);
    let middle = kept.len() / 2;
    if kept.len() % 2 == 1 {
        kept[middle]
    } else {
        (kept[middle - 1] + kept[middle]) / 2.0
    }
}

/// The MDX challenge's SDR of a whole stem ("uSDR", as its evaluator and demucs' `nsdr` compute
/// it): `10·log10((Σ s² + δ) / (Σ (s − ŝ)² + δ))` over both channels, δ = 1e-7. MSST's
/// `valid.py` uses δ = 1e-8, which differs only for stems that are nearly silent.
///
/// Not realtime-safe: walks whole buffers.
pub fn usdr_db(reference: &[Vec<f32>; 2], estimate: &[Vec<f32>; 2]) -> f64 {
    let mut sums = Sums::default();
    sums.add([&reference[0], &reference[1]], [&estimate[0], &estimate[1]]);
    usdr_from_sums(sums.signal, sums.error)
}

fn usdr_from_sums(signal: f64, error: f64) -> f64 {
    const DELTA: f64 = 1e-7;
    10.0 * ((signal + DELTA) / (error + DELTA)).log10()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stereo(left: Vec<f32>, right: Vec<f32>) -> [Vec<f32>; 2] {
        [left, right]
    }

    /// A target's reference and estimate.
    type Pair<'a> = (&'a [Vec<f32>; 2], &'a [Vec<f32>; 2]);

    /// Scores whole buffers, pushed in blocks of `block` frames.
    fn score(targets: &[Pair<'_>], rate: u32, block: usize) -> Result<Vec<TargetScore>, Refusal> {
        let mut scorer = TrackScorer::new(targets.len(), rate);
        let len = targets[0].0[0].len();
        let mut start = 0;
        while start < len {
            let end = (start + block).min(len);
            fn cut(s: &[Vec<f32>; 2], range: std::ops::Range<usize>) -> [&[f32]; 2] {
                [&s[0][range.clone()], &s[1][range]]
            }
            let references: Vec<_> = targets.iter().map(|t| cut(t.0, start..end)).collect();
            let estimates: Vec<_> = targets.iter().map(|t| cut(t.1, start..end)).collect();
            scorer.push(&references, &estimates);
            start = end;
        }
        let scores = scorer.finish();
        match scores.refusal {
            Some(refusal) => {
                assert!(scores
                    .targets
                    .iter()
                    .all(|t| t.sdr_db.is_nan() && t.usdr_db.is_finite()));
                Err(refusal)
            }
            None => Ok(scores.targets),
        }
    }

    #[test]
    fn windows_are_whole_seconds_or_the_whole_signal() {
        let signal = stereo((0..10).map(|i| i as f32 + 1.0).collect(), vec![0.5; 10]);
        let estimate = stereo((0..10).map(|i| i as f32 + 1.5).collect(), vec![0.5; 10]);
        for block in [1, 3, 10] {
            let scores = score(&[(&signal, &estimate)], 4, block).unwrap();
            // Two windows of four; the last two frames are left out.
            assert_eq!(scores[0].sdr_frames_db.len(), 2, "{block}");
            let first = 10.0 * ((1.0 + 4.0 + 9.0 + 16.0 + 4.0 * 0.25f64) / 1.0).log10();
            assert!((scores[0].sdr_frames_db[0] - first).abs() < 1e-9);
            let short = score(&[(&signal, &estimate)], 40, block).unwrap();
            assert_eq!(short[0].sdr_frames_db.len(), 1);
        }
    }

    #[test]
    fn a_silent_window_of_one_target_is_nan_for_all() {
        let reference = stereo(vec![1.0, 1.0, 0.5, 0.0], vec![1.0, 1.0, 0.0, 0.0]);
        let estimate = stereo(vec![0.9, 1.1, 0.1, 0.0], vec![1.0, 1.0, 0.0, 0.0]);
        // The second target's channels cancel in the first window: museval calls it silent.
        let cancelling = stereo(vec![0.5, -0.5, 0.3, 0.3], vec![-0.5, 0.5, 0.3, 0.3]);
        let scores = score(&[(&reference, &estimate), (&cancelling, &cancelling)], 2, 3).unwrap();
        assert!(scores[0].sdr_frames_db[0].is_nan() && scores[1].sdr_frames_db[0].is_nan());
        let expected = 10.0 * (0.25f64 / 0.16).log10();
        assert!((scores[0].sdr_frames_db[1] - expected).abs() < 1e-5);
        assert_eq!(scores[1].sdr_frames_db[1], f64::INFINITY);
        assert!((scores[0].sdr_db - expected).abs() < 1e-5);
        // Silent throughout: museval refuses the track.
        let silent = stereo(vec![0.0; 4], vec![0.0; 4]);
        let refused = score(&[(&reference, &estimate), (&silent, &estimate)], 2, 4);
        assert_eq!(refused.unwrap_err(), Refusal::SilentReference(1));
        let refused = score(&[(&reference, &silent)], 2, 4);
        assert_eq!(refused.unwrap_err(), Refusal::SilentEstimate(0));
    }

    #[test]
    fn medians_leave_nan_out() {
        assert_eq!(nan_median(&[3.0, f64::NAN, 1.0, 2.0]), 2.0);
        assert_eq!(nan_median(&[4.0, 1.0, f64::NAN, 2.0, 3.0]), 2.5);
        assert!(nan_median(&[f64::NAN]).is_nan());
    }

    #[test]
    fn usdr_has_the_mdx_delta() {
        let silent = stereo(vec![0.0; 4], vec![0.0; 4]);
        assert_eq!(usdr_db(&silent, &silent), 0.0);
        let reference = stereo(vec![1.0; 4], vec![1.0; 4]);
        let estimate = stereo(vec![0.9; 4], vec![1.1; 4]);
        let expected = 10.0 * ((8.0 + 1e-7) / (0.08 + 1e-7f64)).log10();
        assert!((usdr_db(&reference, &estimate) - expected).abs() < 1e-5);
    }
}
