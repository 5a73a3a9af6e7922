//! A deterministic synthetic demo song with known stems.
//!
//! Stemflow's demo and its ground truth for separation tests: a short pop song in A minor at
//! 120 BPM, the four-chord loop Am–F–C–G (one chord per bar, 8 s per loop), rendered straight
//! into the four stems Stemflow separates:
//!
//! - **vocals**: a formant-synthesis singer, exactly centred (L == R). A band-limited sawtooth
//!   (PolyBLEP) with a spectral tilt stands in for the glottis, a breath of noise is added, and
//!   three parallel band-pass resonators shape it into the vowels a/e/i/o/u, which change from
//!   note to note. Each note has attack/release and a 5.5 Hz, ±0.5 semitone vibrato that fades
//!   in. Two phrases per loop, each followed by a one-beat rest.
//! - **drums**: a rock beat (kick on 1, 3 and the "and" of 3, snare on 2 and 4, closed hi-hat
//!   eighths) with a snare pickup every fourth bar. Kick: pitch-swept sine. Snare: tone body plus
//!   a noise burst. Hat: high-passed noise, slightly right (gains L 0.8 / R 1.0). Kick and snare
//!   are centred.
//! - **bass**: root–fifth eighth notes on the chord roots (43–98 Hz fundamentals), a sine with
//!   two soft harmonics, centred.
//! - **other**: a slow-attack pad of detuned, low-passed sawtooths panned left (L 0.9 / R 0.35)
//!   and a plucked Karplus–Strong guitar arpeggio panned right (L 0.3 / R 0.9).
//!
//! Measured peaks of the default song: vocals 0.28, drums 0.44, bass 0.23, other 0.25, mix 0.78.
//! Should a render ever peak above 0.95, all stems are scaled down together.
//!
//! # Determinism
//!
//! The same arguments give bit-identical stems on every platform: noise comes from our own
//! SplitMix64 generator, every event (note, hit, pluck) seeds its own generator from its index,
//! and sines, exponentials and pitch ratios come from the small polynomial routines at the
//! bottom of this file, built from `+ − × ÷` and integer casts only (all exactly rounded by
//! IEEE 754, and Rust never fuses them into FMAs behind our back), not from the platform's
//! `libm`. Because events are independent, a shorter render is a prefix of a
//! longer one.
//!
//! # Speed
//!
//! Measured: the default 20 s at 44.1 kHz renders in 0.16–0.22 s (release build, 2-core
//! development machine busy with another build; `cargo test --release -p stemflow-kit --lib
//! demo_song::tests::generation_time -- --ignored --nocapture` prints it).

mod bass;
mod drums;
mod dsp;
mod math;
mod other;
mod score;
mod vocals;

use bass::render_bass;
use drums::render_drums;
pub use dsp::StereoBuffer;
use dsp::*;
use other::render_other;
use score::*;
use vocals::render_vocals;

/// Sample rate the demo song is rendered at by default.
pub const DEMO_SAMPLE_RATE_HZ: u32 = 44_100;

/// Length of the default demo song (ten bars at 120 BPM).
pub const DEMO_DURATION_S: f32 = 20.0;

/// The demo song, stem by stem. The mix is their sum, see [`DemoSong::mix`].
#[derive(Debug, Clone, PartialEq)]
pub struct DemoSong {
    /// Sample rate of every stem.
    pub sample_rate_hz: u32,
    /// The singing voice, exactly centred (left == right).
    pub vocals: StereoBuffer,
    /// Kick, snare and hi-hat; the hat sits slightly right.
    pub drums: StereoBuffer,
    /// The bass line, centred.
    pub bass: StereoBuffer,
    /// Pad (left) and plucked guitar (right).
    pub other: StereoBuffer,
}

impl DemoSong {
    /// Renders the song at `sample_rate_hz` for `duration_s` seconds, that is
    /// `round(duration_s · sample_rate_hz)` samples per channel. Longer durations keep looping
    /// the four-bar progression.
    ///
    /// Deterministic: the same arguments give bit-identical output on every platform.
    ///
    /// # Panics
    ///
    /// If `sample_rate_hz` is zero or `duration_s` is negative or not finite.
    ///
    /// Not realtime-safe: allocates the stems, and takes about 8 ms per second of song in a
    /// release build.
    pub fn generate(sample_rate_hz: u32, duration_s: f32) -> Self {
        assert!(
            sample_rate_hz > 0,
            "DemoSong::generate: sample rate must be positive"
        );
        assert!(
            duration_s.is_finite() && duration_s >= 0.0,
            "DemoSong::generate: duration must be finite and non-negative, got {duration_s} s"
        );
        let song = Song::new(sample_rate_hz, duration_s);

        let mut stems = [
            centred(master(render_vocals(&song), VOCALS_GAIN, &song)),
            render_drums(&song).map(|channel| master(channel, DRUMS_GAIN, &song)),
            centred(master(render_bass(&song), BASS_GAIN, &song)),
            render_other(&song).map(|channel| master(channel, OTHER_GAIN, &song)),
        ];
        fit_below_ceiling(&mut stems);

        let [vocals, drums, bass, other] = stems;
        Self {
            sample_rate_hz,
            vocals,
            drums,
            bass,
            other,
        }
    }

    /// The sum of the four stems (the "mix"), `vocals + drums + bass + other` sample by sample.
    ///
    /// Not realtime-safe: allocates.
    pub fn mix(&self) -> StereoBuffer {
        std::array::from_fn(|channel| mixed_channel(self.stems(), channel).collect())
    }

    /// The stems in the order vocals, drums, bass, other (the order of [`crate::Stem::ALL`]).
    ///
    /// Realtime-safe.
    pub fn stems(&self) -> [&StereoBuffer; 4] {
        [&self.vocals, &self.drums, &self.bass, &self.other]
    }
}

// ---------------------------------------------------------------------------------------------
// Levels
// ---------------------------------------------------------------------------------------------

/// Output gain of the vocals, chosen so the stem peaks near 0.28.
const VOCALS_GAIN: f32 = 0.37;
/// Output gain of the drums, chosen so the stem peaks near 0.44.
const DRUMS_GAIN: f32 = 0.24;
/// Output gain of the bass, chosen so the stem peaks near 0.23.
const BASS_GAIN: f32 = 0.17;
/// Output gain of the pad and guitar, chosen so the stem peaks near 0.25.
const OTHER_GAIN: f32 = 0.32;

/// The mix never peaks above this. With the gains above the default song peaks at 0.78, so the
/// safety scaling in [`fit_below_ceiling`] leaves it alone (and shorter renders stay prefixes of
/// longer ones).
const MIX_CEILING: f32 = 0.95;

/// Scales all stems by the same factor if their sum would peak above [`MIX_CEILING`].
fn fit_below_ceiling(stems: &mut [StereoBuffer; 4]) {
    let mix_peak = (0..2)
        .flat_map(|channel| mixed_channel(stems.each_ref(), channel))
        .fold(0.0_f32, |peak, sample| peak.max(sample.abs()));
    if mix_peak > MIX_CEILING {
        // Leave a little room for the rounding of the scaled stems' sum.
        let gain = 0.99 * MIX_CEILING / mix_peak;
        for channel in stems.iter_mut().flatten() {
            channel.iter_mut().for_each(|x| *x *= gain);
        }
    }
}

/// One channel of the mix, sample by sample: `vocals + drums + bass + other`, in that order.
fn mixed_channel(stems: [&StereoBuffer; 4], channel: usize) -> impl Iterator<Item = f32> + '_ {
    let [vocals, drums, bass, other] = stems.map(|stem| &stem[channel]);
    vocals
        .iter()
        .zip(drums)
        .zip(bass)
        .zip(other)
        .map(|(((vocals, drums), bass), other)| vocals + drums + bass + other)
}

/// Corner of the low cut every stem gets, like a mixing desk's: it keeps the stems free of DC
/// (a decaying note that starts on a rising sine leaves a little behind).
const LOW_CUT_HZ: f64 = 20.0;

/// The last step of each track: its output gain and the [`LOW_CUT_HZ`] low cut.
fn master(mut track: Vec<f32>, gain: f32, song: &Song) -> Vec<f32> {
    let mut low_cut = Biquad::high_pass(song.sample_rate_hz, LOW_CUT_HZ, 0.707);
    for sample in track.iter_mut() {
        *sample = low_cut.process(f64::from(gain * *sample)) as f32;
    }
    track
}

#[cfg(test)]
mod tests {
    use super::math::*;
    use super::other::pluck;
    use super::*;
    use std::sync::OnceLock;

    /// The default song, rendered once for all tests that only read it.
    fn default_song() -> &'static DemoSong {
        static SONG: OnceLock<DemoSong> = OnceLock::new();
        SONG.get_or_init(|| DemoSong::generate(DEMO_SAMPLE_RATE_HZ, DEMO_DURATION_S))
    }

    fn peak(buffer: &StereoBuffer) -> f32 {
        buffer
            .iter()
            .flatten()
            .fold(0.0, |peak, x| peak.max(x.abs()))
    }

    /// The song's stems with their names, in the order of [`DemoSong::stems`].
    fn named_stems(song: &DemoSong) -> impl Iterator<Item = (&str, &StereoBuffer)> {
        ["vocals", "drums", "bass", "other"]
            .into_iter()
            .zip(song.stems())
    }

    fn energy(samples: &[f32]) -> f64 {
        samples.iter().map(|&x| f64::from(x) * f64::from(x)).sum()
    }

    #[test]
    fn generation_is_deterministic() {
        let first = DemoSong::generate(22_050, 4.5);
        let second = DemoSong::generate(22_050, 4.5);
        assert!(first == second, "two renders differ");
        // Bitwise, not just ==, so that even the sign of zeros agrees.
        for (a, b) in first.stems().iter().zip(second.stems()) {
            for (a, b) in a.iter().flatten().zip(b.iter().flatten()) {
                assert_eq!(a.to_bits(), b.to_bits());
            }
        }
    }

    #[test]
    fn a_shorter_render_is_a_prefix_of_a_longer_one() {
        let short = DemoSong::generate(16_000, 3.3);
        let long = DemoSong::generate(16_000, 6.0);
        for (short_stem, long_stem) in short.stems().iter().zip(long.stems()) {
            for channel in 0..2 {
                let len = short_stem[channel].len();
                assert_eq!(short_stem[channel][..], long_stem[channel][..len]);
            }
        }
    }

    #[test]
    fn lengths_are_duration_times_rate() {
        for (sample_rate_hz, duration_s) in [
            (44_100, 1.0),
            (48_000, 0.123_45),
            (8_000, 2.5),
            (44_100, 0.0),
        ] {
            let song = DemoSong::generate(sample_rate_hz, duration_s);
            let expected = (f64::from(duration_s) * f64::from(sample_rate_hz)).round() as usize;
            assert_eq!(song.sample_rate_hz, sample_rate_hz);
            for stem in song.stems().iter().chain([&&song.mix()]) {
                assert_eq!([stem[0].len(), stem[1].len()], [expected; 2]);
            }
        }
        let song = default_song();
        assert_eq!(song.vocals[0].len(), 882_000);
    }

    #[test]
    fn mix_is_the_sum_of_the_stems() {
        let song = default_song();
        let mix = song.mix();
        for (channel, mix_channel) in mix.iter().enumerate() {
            for (n, mixed) in mix_channel.iter().enumerate() {
                let sum = song.vocals[channel][n]
                    + song.drums[channel][n]
                    + song.bass[channel][n]
                    + song.other[channel][n];
                assert_eq!(
                    mixed.to_bits(),
                    sum.to_bits(),
                    "channel {channel} sample {n}"
                );
            }
        }
    }

    #[test]
    fn vocals_are_exactly_centred() {
        let song = default_song();
        assert_eq!(song.vocals[0], song.vocals[1]);
        assert!(energy(&song.vocals[0]) > 0.0);
    }

    #[test]
    fn other_is_not_centred() {
        let song = default_song();
        let [left, right] = &song.other;
        let (left_energy, right_energy) = (energy(left), energy(right));
        let balance_db = 10.0 * (left_energy / right_energy).log10();
        let cross: f64 = left
            .iter()
            .zip(right)
            .map(|(&l, &r)| f64::from(l) * f64::from(r))
            .sum();
        let correlation = cross / (left_energy * right_energy).sqrt();
        assert!(
            balance_db.abs() > 3.0 || correlation < 0.9,
            "other looks centred: balance {balance_db:.2} dB, correlation {correlation:.3}"
        );
        // Both instruments are clearly off-centre, so their sum is far from mono.
        assert!(correlation < 0.9, "correlation {correlation:.3}");
    }

    #[test]
    fn bass_energy_is_mostly_below_250_hz() {
        let song = default_song();
        let coefficient =
            1.0 - (-std::f64::consts::TAU * 250.0 / f64::from(song.sample_rate_hz)).exp();
        let mut state = 0.0;
        let low_passed: Vec<f32> = song.bass[0]
            .iter()
            .map(|&x| {
                state += coefficient * (f64::from(x) - state);
                state as f32
            })
            .collect();
        let ratio = energy(&low_passed) / energy(&song.bass[0]);
        assert!(
            ratio > 0.8,
            "only {:.1} % of the bass energy is below 250 Hz",
            100.0 * ratio
        );
        assert_eq!(song.bass[0], song.bass[1], "bass is centred");
    }

    #[test]
    fn levels_are_within_bounds() {
        let song = default_song();
        for (name, stem) in named_stems(song) {
            let stem_peak = peak(stem);
            assert!(
                (0.1..=0.5).contains(&stem_peak),
                "{name} peaks at {stem_peak}"
            );
        }
        let mix_peak = peak(&song.mix());
        assert!(mix_peak <= MIX_CEILING, "mix peaks at {mix_peak}");
    }

    #[test]
    fn no_non_finite_samples_and_no_dc() {
        let song = default_song();
        for (name, stem) in named_stems(song) {
            for channel in stem {
                assert!(
                    channel.iter().all(|x| x.is_finite()),
                    "{name} has a non-finite sample"
                );
                let mean =
                    channel.iter().map(|&x| f64::from(x)).sum::<f64>() / channel.len() as f64;
                assert!(mean.abs() < 1e-3, "{name} has a DC offset of {mean}");
            }
        }
    }

    #[test]
    fn low_and_high_sample_rates_stay_finite_and_bounded() {
        for sample_rate_hz in [8_000, 192_000] {
            let song = DemoSong::generate(sample_rate_hz, 2.0);
            let mix = song.mix();
            assert!(
                mix.iter().flatten().all(|x| x.is_finite()),
                "{sample_rate_hz} Hz"
            );
            assert!(
                peak(&mix) <= 0.99,
                "{sample_rate_hz} Hz mix peaks at {}",
                peak(&mix)
            );
        }
    }

    #[test]
    fn vocals_rest_between_phrases() {
        // Beat 7.5 of the first loop lies in the rest after phrase 1, past the release.
        let song = default_song();
        let start = (7.5 * BEAT_S * f64::from(song.sample_rate_hz)) as usize;
        let rest = &song.vocals[0][start..start + 1000];
        // Only the low cut's tail is left.
        assert!(
            rest.iter().all(|&x| x.abs() < 1e-3),
            "peak {}",
            peak(&[rest.to_vec(), rest.to_vec()])
        );
    }

    #[test]
    fn deterministic_maths_matches_std() {
        for i in -2000..=2000 {
            let turns = f64::from(i) * 0.001_37;
            let expected = (turns * std::f64::consts::TAU).sin();
            assert!(
                (sin_turns(turns) - expected).abs() < 1e-10,
                "sin at {turns} turns"
            );
            assert!((cos_turns(turns) - (turns * std::f64::consts::TAU).cos()).abs() < 1e-10);
            let x = f64::from(i) * 0.05;
            assert!((exp_det(x) / x.exp() - 1.0).abs() < 1e-13, "exp({x})");
        }
        assert_eq!(exp_det(-1000.0), 0.0);
        assert!((midi_to_hz(69.0) - 440.0).abs() < 1e-12);
        assert!((midi_to_hz(57.0) - 220.0).abs() < 1e-12);
    }

    /// The pitch of `samples`: the lag of the strongest autocorrelation within ±25 % of the
    /// expected period, refined by a parabola through its neighbours.
    fn measured_pitch_hz(samples: &[f32], sample_rate_hz: f64, expected_hz: f64) -> f64 {
        let expected_period = sample_rate_hz / expected_hz;
        let autocorrelation = |lag: usize| -> f64 {
            samples
                .iter()
                .zip(&samples[lag..])
                .map(|(&a, &b)| f64::from(a) * f64::from(b))
                .sum()
        };
        let lags = (0.8 * expected_period) as usize..(1.25 * expected_period) as usize;
        let best_lag = lags
            .max_by(|&a, &b| autocorrelation(a).total_cmp(&autocorrelation(b)))
            .unwrap();
        let [before, at, after] = [best_lag - 1, best_lag, best_lag + 1].map(autocorrelation);
        let offset = 0.5 * (before - after) / (before - 2.0 * at + after);
        sample_rate_hz / (best_lag as f64 + offset)
    }

    fn cents_between(measured_hz: f64, expected_hz: f64) -> f64 {
        1200.0 * (measured_hz / expected_hz).log2()
    }

    #[test]
    fn plucked_string_is_in_tune() {
        let sample_rate_hz = 44_100.0;
        for midi in [53.0, 64.0, 76.0] {
            let pitch_hz = midi_to_hz(midi);
            let mut out = vec![0.0_f32; 8192];
            pluck(
                &mut out,
                sample_rate_hz,
                pitch_hz,
                1.0,
                &mut Rng::for_event(1, 0),
            );
            let cents = cents_between(measured_pitch_hz(&out, sample_rate_hz, pitch_hz), pitch_hz);
            assert!(
                cents.abs() < 3.0,
                "MIDI {midi}: pluck is {cents:.2} cents off"
            );
        }
    }

    #[test]
    fn the_song_starts_on_the_right_notes() {
        // The singer's E4 before its vibrato sets in, and the bass's first A1, whole.
        let song = default_song();
        let sample_rate_hz = f64::from(song.sample_rate_hz);
        for (stem, midi, start_s, end_s) in [
            (&song.vocals, 64.0, 0.04, 0.12),
            (&song.bass, 33.0, 0.01, 0.2),
        ] {
            let window =
                &stem[0][(start_s * sample_rate_hz) as usize..(end_s * sample_rate_hz) as usize];
            let expected_hz = midi_to_hz(midi);
            let cents = cents_between(
                measured_pitch_hz(window, sample_rate_hz, expected_hz),
                expected_hz,
            );
            assert!(cents.abs() < 10.0, "MIDI {midi}: {cents:.2} cents off");
        }
    }

    /// Prints the time of a default render; run with `--release --ignored --nocapture`.
    #[test]
    #[ignore = "timing: run in release"]
    fn generation_time() {
        let start = std::time::Instant::now();
        let song = DemoSong::generate(DEMO_SAMPLE_RATE_HZ, DEMO_DURATION_S);
        let elapsed = start.elapsed();
        let peaks = song.stems().map(peak);
        println!(
            "generated {DEMO_DURATION_S} s in {elapsed:?}; stem peaks {peaks:?}, mix peak {}",
            peak(&song.mix())
        );
        if !cfg!(debug_assertions) {
            assert!(elapsed.as_secs_f64() < 1.0);
        }
    }
}
