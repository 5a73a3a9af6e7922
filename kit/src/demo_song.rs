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
//! development machine busy with another build; `cargo test --release -p stemflow-engine --lib
//! demo_song::tests::generation_time -- --ignored --nocapture` prints it).

use std::f64::consts::{LN_2, LOG2_E};

/// Sample rate the demo song is rendered at by default.
pub const DEMO_SAMPLE_RATE_HZ: u32 = 44_100;

/// Length of the default demo song (ten bars at 120 BPM).
pub const DEMO_DURATION_S: f32 = 20.0;

/// One stereo signal: `[left, right]`, equal lengths.
pub type StereoBuffer = [Vec<f32>; 2];

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

/// A centred stereo signal: the same samples left and right.
fn centred(mono: Vec<f32>) -> StereoBuffer {
    [mono.clone(), mono]
}

// ---------------------------------------------------------------------------------------------
// The score: tempo, chords, melody, patterns
// ---------------------------------------------------------------------------------------------

/// Tempo of the song.
const TEMPO_BPM: f64 = 120.0;
/// Length of one beat (a quarter note).
const BEAT_S: f64 = 60.0 / TEMPO_BPM;
/// Beats per bar (4/4 time); each bar holds one chord.
const NUM_BEATS_PER_BAR: usize = 4;
/// Eighth notes per bar, the grid of the drum, bass and guitar patterns.
const NUM_EIGHTHS_PER_BAR: usize = 2 * NUM_BEATS_PER_BAR;
/// Length of one eighth note.
const EIGHTH_S: f64 = BEAT_S / 2.0;
/// Length of one bar.
const BAR_S: f64 = BEAT_S * NUM_BEATS_PER_BAR as f64;

/// One chord of the progression, voiced for each instrument (MIDI note numbers).
struct Chord {
    /// Bass root, in octave 1 or 2.
    bass_root_midi: u8,
    /// Pad voicing, voice-led from chord to chord.
    pad_midi: [u8; 3],
    /// Guitar voicing, low to high, the arpeggio's notes.
    guitar_midi: [u8; 4],
}

/// The four-chord loop, one chord per bar.
const PROGRESSION: [Chord; 4] = [
    // Am: A C E
    Chord {
        bass_root_midi: 33,
        pad_midi: [57, 60, 64],
        guitar_midi: [57, 64, 69, 72],
    },
    // F: F A C
    Chord {
        bass_root_midi: 29,
        pad_midi: [57, 60, 65],
        guitar_midi: [53, 60, 65, 69],
    },
    // C: C E G
    Chord {
        bass_root_midi: 36,
        pad_midi: [55, 60, 64],
        guitar_midi: [60, 67, 72, 76],
    },
    // G: G B D
    Chord {
        bass_root_midi: 31,
        pad_midi: [55, 59, 62],
        guitar_midi: [55, 62, 67, 71],
    },
];

/// Length of the progression (and of the melody) in bars.
const NUM_BARS_PER_LOOP: usize = PROGRESSION.len();

/// One sung note of the melody.
struct MelodyNote {
    /// Start, in beats from the start of the loop.
    start_beat: f64,
    /// Held length in beats (the release rings on after it).
    num_beats: f64,
    /// Pitch as a MIDI note number.
    midi: u8,
}

const fn sung(start_beat: f64, num_beats: f64, midi: u8) -> MelodyNote {
    MelodyNote {
        start_beat,
        num_beats,
        midi,
    }
}

/// The tune, one loop (16 beats) long: two phrases, each followed by a one-beat rest.
const MELODY: [MelodyNote; 14] = [
    // Phrase 1, over Am and F: E D C E | F E C (rest)
    sung(0.0, 1.5, 64),
    sung(1.5, 0.5, 62),
    sung(2.0, 1.0, 60),
    sung(3.0, 1.0, 64),
    sung(4.0, 1.5, 65),
    sung(5.5, 0.5, 64),
    sung(6.0, 1.0, 60),
    // Phrase 2, over C and G: G F E C | D B D (rest), leading back to the E of phrase 1.
    sung(8.0, 1.5, 67),
    sung(9.5, 0.5, 65),
    sung(10.0, 1.0, 64),
    sung(11.0, 1.0, 60),
    sung(12.0, 1.5, 62),
    sung(13.5, 0.5, 59),
    sung(14.0, 1.0, 62),
];

/// The "lyrics": the vowel of each sung note, cycled over the whole song. Nine vowels against
/// fourteen notes per loop, so every loop is sung on different vowels.
const LYRIC_VOWELS: [Vowel; 9] = [
    Vowel::A,
    Vowel::O,
    Vowel::E,
    Vowel::A,
    Vowel::I,
    Vowel::U,
    Vowel::O,
    Vowel::E,
    Vowel::A,
];

/// Kick velocities on the eighth-note grid: 1, 3 and the "and" of 3.
const KICK_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] = [1.0, 0.0, 0.0, 0.0, 0.9, 0.7, 0.0, 0.0];
/// Snare velocities: the backbeat on 2 and 4.
const SNARE_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
/// Snare in the last bar of every loop: the backbeat plus a pickup into the next loop.
const SNARE_FILL_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] = [0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0, 0.8];
/// Closed hi-hat velocities: every eighth, accented on the beat.
const HAT_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] = [0.9, 0.5, 0.8, 0.5, 0.9, 0.5, 0.8, 0.5];

/// Bass notes on the eighth-note grid, in semitones above the chord root (root and fifth).
const BASS_PATTERN_SEMITONES: [u8; NUM_EIGHTHS_PER_BAR] = [0, 0, 7, 0, 0, 0, 7, 0];

/// Guitar arpeggio on the eighth-note grid: indices into [`Chord::guitar_midi`].
const GUITAR_PATTERN: [usize; NUM_EIGHTHS_PER_BAR] = [0, 1, 2, 3, 1, 2, 3, 2];

/// Where a render is going: sample rate, length and the bars that sound in it.
struct Song {
    sample_rate_hz: f64,
    num_samples: usize,
    /// Bars that start before the end of the render.
    num_bars: usize,
}

impl Song {
    fn new(sample_rate_hz: u32, duration_s: f32) -> Self {
        let num_samples = (f64::from(duration_s) * f64::from(sample_rate_hz)).round() as usize;
        let num_bars = (f64::from(duration_s) / BAR_S).ceil() as usize;
        Self {
            sample_rate_hz: f64::from(sample_rate_hz),
            num_samples,
            num_bars,
        }
    }

    /// The sample at which a time (in seconds from the start of the song) falls.
    fn sample_at(&self, time_s: f64) -> usize {
        (time_s * self.sample_rate_hz).round() as usize
    }

    /// Number of samples in a duration, rounded up.
    fn num_samples_in(&self, duration_s: f64) -> usize {
        (duration_s * self.sample_rate_hz).ceil() as usize
    }

    /// A silent mono track as long as the render.
    fn silence(&self) -> Vec<f32> {
        vec![0.0; self.num_samples]
    }

    /// The part of `track` that an event starting at `start_s` and lasting `duration_s` covers,
    /// cut at the end of the render (empty if it starts after the end).
    fn event_span<'a>(&self, track: &'a mut [f32], start_s: f64, duration_s: f64) -> &'a mut [f32] {
        let start = self.sample_at(start_s).min(track.len());
        let end = start
            .saturating_add(self.num_samples_in(duration_s))
            .min(track.len());
        &mut track[start..end]
    }

    /// Calls `play(start_s, bar, eighth)` for every eighth note of the song, in order.
    fn for_each_eighth(&self, mut play: impl FnMut(f64, usize, usize)) {
        for bar in 0..self.num_bars {
            for eighth in 0..NUM_EIGHTHS_PER_BAR {
                let start_s = bar as f64 * BAR_S + eighth as f64 * EIGHTH_S;
                play(start_s, bar, eighth);
            }
        }
    }
}

/// The chord of a bar.
fn chord_of_bar(bar: usize) -> &'static Chord {
    &PROGRESSION[bar % NUM_BARS_PER_LOOP]
}

/// Seeds of each instrument's noise; each event mixes its index in (see [`Rng::for_event`]).
const VOICE_SEED: u64 = 0x5745_4D46_4C4F_5701;
const KICK_SEED: u64 = 0x5745_4D46_4C4F_5702;
const SNARE_SEED: u64 = 0x5745_4D46_4C4F_5703;
const HAT_SEED: u64 = 0x5745_4D46_4C4F_5704;
const PAD_SEED: u64 = 0x5745_4D46_4C4F_5705;
const GUITAR_SEED: u64 = 0x5745_4D46_4C4F_5706;

// ---------------------------------------------------------------------------------------------
// Vocals: formant synthesis
// ---------------------------------------------------------------------------------------------

/// Vibrato rate.
const VIBRATO_RATE_HZ: f64 = 5.5;
/// Vibrato depth, each way.
const VIBRATO_DEPTH_SEMITONES: f64 = 0.5;
/// Time from the start of a note until the vibrato starts to fade in.
const VIBRATO_DELAY_S: f64 = 0.12;
/// Time the vibrato takes to reach full depth.
const VIBRATO_FADE_S: f64 = 0.3;
/// Attack of a sung note.
const VOICE_ATTACK_S: f64 = 0.04;
/// Release after a sung note; it overlaps the next note's attack like a slur.
const VOICE_RELEASE_S: f64 = 0.09;
/// Corner of the one-pole low-pass that gives the sawtooth a glottis-like −12 dB/octave slope.
const GLOTTAL_TILT_HZ: f64 = 700.0;
/// Level of the breath noise relative to the sawtooth.
const BREATH_LEVEL: f64 = 0.06;

/// The vowels the singer knows.
#[derive(Clone, Copy)]
enum Vowel {
    A,
    E,
    I,
    O,
    U,
}

/// One resonance of the vocal tract.
#[derive(Clone, Copy)]
struct Formant {
    hz: f64,
    bandwidth_hz: f64,
    /// Linear gain of the resonator's output.
    gain: f64,
}

const fn formant(hz: f64, bandwidth_hz: f64, gain: f64) -> Formant {
    Formant {
        hz,
        bandwidth_hz,
        gain,
    }
}

impl Vowel {
    /// The first three formants of a tenor singing the vowel (after the classic Csound formant
    /// table; gains 0 dB, then the listed level in dB, as linear factors). Bandwidths are a bit
    /// wider than the table's so that every note of the tune excites each formant.
    const fn formants(self) -> [Formant; 3] {
        match self {
            // 0 / −6 / −7 dB
            Vowel::A => [
                formant(650.0, 90.0, 1.0),
                formant(1080.0, 100.0, 0.501),
                formant(2650.0, 130.0, 0.447),
            ],
            // 0 / −14 / −12 dB
            Vowel::E => [
                formant(400.0, 80.0, 1.0),
                formant(1700.0, 100.0, 0.200),
                formant(2600.0, 120.0, 0.251),
            ],
            // 0 / −15 / −18 dB
            Vowel::I => [
                formant(290.0, 60.0, 1.0),
                formant(1870.0, 100.0, 0.178),
                formant(2800.0, 120.0, 0.126),
            ],
            // 0 / −10 / −12 dB
            Vowel::O => [
                formant(400.0, 60.0, 1.0),
                formant(800.0, 90.0, 0.316),
                formant(2600.0, 120.0, 0.251),
            ],
            // 0 / −20 / −17 dB
            Vowel::U => [
                formant(350.0, 60.0, 1.0),
                formant(600.0, 80.0, 0.100),
                formant(2700.0, 120.0, 0.141),
            ],
        }
    }
}

/// Renders the melody, looped over the song, as a mono track.
fn render_vocals(song: &Song) -> Vec<f32> {
    let mut track = song.silence();
    let num_loops = song.num_bars.div_ceil(NUM_BARS_PER_LOOP);
    let loop_s = BAR_S * NUM_BARS_PER_LOOP as f64;
    let mut note_index = 0;
    for loop_index in 0..num_loops {
        for note in &MELODY {
            let start_s = loop_index as f64 * loop_s + note.start_beat * BEAT_S;
            let gate_s = note.num_beats * BEAT_S;
            let span = song.event_span(&mut track, start_s, gate_s + VOICE_RELEASE_S);
            let vowel = LYRIC_VOWELS[note_index % LYRIC_VOWELS.len()];
            let mut rng = Rng::for_event(VOICE_SEED, note_index);
            sing(
                span,
                song.sample_rate_hz,
                midi_to_hz(f64::from(note.midi)),
                gate_s,
                vowel,
                &mut rng,
            );
            note_index += 1;
        }
    }
    track
}

/// Sings one note into `out`: a glottal source through three formant resonators.
fn sing(
    out: &mut [f32],
    sample_rate_hz: f64,
    pitch_hz: f64,
    gate_s: f64,
    vowel: Vowel,
    rng: &mut Rng,
) {
    let formants = vowel.formants();
    let mut resonators = formants.map(|f| Biquad::band_pass(sample_rate_hz, f.hz, f.bandwidth_hz));
    let mut glottis = PolyBlepSaw::default();
    let mut tilt = OnePoleLowPass::new(sample_rate_hz, GLOTTAL_TILT_HZ);
    for (n, sample) in out.iter_mut().enumerate() {
        let t_s = n as f64 / sample_rate_hz;

        let vibrato_depth =
            VIBRATO_DEPTH_SEMITONES * smoothstep((t_s - VIBRATO_DELAY_S) / VIBRATO_FADE_S);
        let vibrato_semitones = vibrato_depth * sin_turns(VIBRATO_RATE_HZ * t_s);
        let hz = pitch_hz * semitones_to_ratio(vibrato_semitones);

        let source =
            tilt.process(glottis.next(hz / sample_rate_hz)) + BREATH_LEVEL * rng.next_bipolar();
        let mut voiced = 0.0;
        for (resonator, f) in resonators.iter_mut().zip(&formants) {
            voiced += f.gain * resonator.process(source);
        }
        let envelope = gate_envelope(t_s, gate_s, VOICE_ATTACK_S, VOICE_RELEASE_S);
        *sample += (envelope * voiced) as f32;
    }
}

// ---------------------------------------------------------------------------------------------
// Drums
// ---------------------------------------------------------------------------------------------

/// Kick pitch at the hit.
const KICK_START_HZ: f64 = 160.0;
/// Kick pitch the sweep settles on.
const KICK_END_HZ: f64 = 48.0;
/// Time constant of the kick's pitch sweep.
const KICK_SWEEP_S: f64 = 0.03;
/// Time constant of the kick's amplitude decay.
const KICK_DECAY_S: f64 = 0.08;
/// Rendered length of a kick (−75 dB by then).
const KICK_LENGTH_S: f64 = 0.7;

/// Pitches of the snare's tone body (two drum-head modes).
const SNARE_BODY_HZ: [f64; 2] = [185.0, 330.0];
/// Time constant of the snare body's decay.
const SNARE_BODY_DECAY_S: f64 = 0.05;
/// Time constant of the snare wires' (noise) decay.
const SNARE_NOISE_DECAY_S: f64 = 0.09;
/// Corner of the high-pass on the snare noise.
const SNARE_NOISE_HIGH_PASS_HZ: f64 = 1500.0;
/// Rendered length of a snare (−48 dB by then).
const SNARE_LENGTH_S: f64 = 0.5;

/// Corner of the high-pass on the hi-hat noise.
const HAT_HIGH_PASS_HZ: f64 = 7000.0;
/// Time constant of the closed hi-hat's decay.
const HAT_DECAY_S: f64 = 0.03;
/// Rendered length of a hi-hat (−58 dB by then).
const HAT_LENGTH_S: f64 = 0.2;
/// Hi-hat pan: slightly (20 %) right.
const HAT_GAINS: [f32; 2] = [0.8, 1.0];
/// Random variation of the hi-hat's velocity, each way, so the hats sound played.
const HAT_HUMANIZE: f64 = 0.08;

/// Renders the drum kit: kick and snare centred, the hi-hat slightly right.
fn render_drums(song: &Song) -> StereoBuffer {
    let sample_rate_hz = song.sample_rate_hz;
    let mut centre = song.silence();
    let mut hats = song.silence();
    let mut hit_index = 0;
    song.for_each_eighth(|start_s, bar, eighth| {
        let is_fill_bar = bar % NUM_BARS_PER_LOOP == NUM_BARS_PER_LOOP - 1;
        let snare_pattern = if is_fill_bar {
            &SNARE_FILL_PATTERN
        } else {
            &SNARE_PATTERN
        };
        let kick_velocity = KICK_PATTERN[eighth];
        if kick_velocity > 0.0 {
            let span = song.event_span(&mut centre, start_s, KICK_LENGTH_S);
            kick(
                span,
                sample_rate_hz,
                kick_velocity,
                &mut Rng::for_event(KICK_SEED, hit_index),
            );
        }
        let snare_velocity = snare_pattern[eighth];
        if snare_velocity > 0.0 {
            let span = song.event_span(&mut centre, start_s, SNARE_LENGTH_S);
            snare(
                span,
                sample_rate_hz,
                snare_velocity,
                &mut Rng::for_event(SNARE_SEED, hit_index),
            );
        }
        // The hat makes room for the snare's pickup at the end of a fill bar.
        let is_pickup = is_fill_bar && eighth == NUM_EIGHTHS_PER_BAR - 1;
        if !is_pickup {
            let mut rng = Rng::for_event(HAT_SEED, hit_index);
            let velocity = HAT_PATTERN[eighth] * (1.0 + HAT_HUMANIZE * rng.next_bipolar());
            let span = song.event_span(&mut hats, start_s, HAT_LENGTH_S);
            hi_hat(span, sample_rate_hz, velocity, &mut rng);
        }
        hit_index += 1;
    });
    HAT_GAINS.map(|gain| {
        centre
            .iter()
            .zip(&hats)
            .map(|(c, h)| c + gain * h)
            .collect()
    })
}

/// A kick: a sine swept down from [`KICK_START_HZ`] to [`KICK_END_HZ`], with a click of noise.
fn kick(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
    let amplitude_decay = decay_per_sample(sample_rate_hz, KICK_DECAY_S);
    let sweep_decay = decay_per_sample(sample_rate_hz, KICK_SWEEP_S);
    let click_decay = decay_per_sample(sample_rate_hz, 0.002);
    let (mut amplitude, mut sweep, mut click) = (velocity, 1.0, 0.15 * velocity);
    let mut phase_turns = 0.0;
    for sample in out.iter_mut() {
        let body = amplitude * sin_turns(phase_turns);
        *sample += (body + click * rng.next_bipolar()) as f32;
        phase_turns += (KICK_END_HZ + (KICK_START_HZ - KICK_END_HZ) * sweep) / sample_rate_hz;
        amplitude *= amplitude_decay;
        sweep *= sweep_decay;
        click *= click_decay;
    }
}

/// A snare: two decaying drum-head tones and a burst of high-passed noise for the wires.
fn snare(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
    let body_decay = decay_per_sample(sample_rate_hz, SNARE_BODY_DECAY_S);
    let noise_decay = decay_per_sample(sample_rate_hz, SNARE_NOISE_DECAY_S);
    let mut wires = Biquad::high_pass(sample_rate_hz, SNARE_NOISE_HIGH_PASS_HZ, 0.7);
    let (mut body, mut noise) = (0.5 * velocity, 0.8 * velocity);
    for (n, sample) in out.iter_mut().enumerate() {
        let t_s = n as f64 / sample_rate_hz;
        let tone = sin_turns(SNARE_BODY_HZ[0] * t_s) + 0.6 * sin_turns(SNARE_BODY_HZ[1] * t_s);
        *sample += (body * tone + noise * wires.process(rng.next_bipolar())) as f32;
        body *= body_decay;
        noise *= noise_decay;
    }
}

/// A closed hi-hat: a short burst of high-passed noise.
fn hi_hat(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
    let decay = decay_per_sample(sample_rate_hz, HAT_DECAY_S);
    let mut filter = Biquad::high_pass(sample_rate_hz, HAT_HIGH_PASS_HZ, 0.7);
    let mut amplitude = 0.5 * velocity;
    for sample in out.iter_mut() {
        *sample += (amplitude * filter.process(rng.next_bipolar())) as f32;
        amplitude *= decay;
    }
}

// ---------------------------------------------------------------------------------------------
// Bass
// ---------------------------------------------------------------------------------------------

/// Fraction of an eighth note a bass note is held (slightly detached).
const BASS_GATE_FRACTION: f64 = 0.8;
/// Attack of a bass note.
const BASS_ATTACK_S: f64 = 0.005;
/// Release of a bass note.
const BASS_RELEASE_S: f64 = 0.03;
/// Time constant with which a bass note falls from its attack towards [`BASS_SUSTAIN`].
const BASS_DECAY_S: f64 = 0.12;
/// Level a held bass note settles to.
const BASS_SUSTAIN: f64 = 0.6;
/// Levels of the second and third harmonics, for a little growl on small speakers.
const BASS_HARMONICS: [f64; 2] = [0.35, 0.12];

/// Renders the bass line as a mono track: root and fifth in eighth notes.
fn render_bass(song: &Song) -> Vec<f32> {
    let mut track = song.silence();
    song.for_each_eighth(|start_s, bar, eighth| {
        let midi = chord_of_bar(bar).bass_root_midi + BASS_PATTERN_SEMITONES[eighth];
        let velocity = if eighth % 2 == 0 { 1.0 } else { 0.8 };
        let gate_s = BASS_GATE_FRACTION * EIGHTH_S;
        let span = song.event_span(&mut track, start_s, gate_s + BASS_RELEASE_S);
        bass_note(
            span,
            song.sample_rate_hz,
            midi_to_hz(f64::from(midi)),
            gate_s,
            velocity,
        );
    });
    track
}

/// One bass note: a sine with two soft harmonics, plucked-style envelope.
fn bass_note(out: &mut [f32], sample_rate_hz: f64, pitch_hz: f64, gate_s: f64, velocity: f64) {
    let decay = decay_per_sample(sample_rate_hz, BASS_DECAY_S);
    let mut excess = 1.0 - BASS_SUSTAIN;
    for (n, sample) in out.iter_mut().enumerate() {
        let t_s = n as f64 / sample_rate_hz;
        let phase_turns = pitch_hz * t_s;
        let tone = sin_turns(phase_turns)
            + BASS_HARMONICS[0] * sin_turns(2.0 * phase_turns)
            + BASS_HARMONICS[1] * sin_turns(3.0 * phase_turns);
        let envelope =
            gate_envelope(t_s, gate_s, BASS_ATTACK_S, BASS_RELEASE_S) * (BASS_SUSTAIN + excess);
        *sample += (velocity * envelope * tone) as f32;
        excess *= decay;
    }
}

// ---------------------------------------------------------------------------------------------
// Other: pad and plucked guitar
// ---------------------------------------------------------------------------------------------

/// Detune of the pad's two sawtooths per note, each way.
const PAD_DETUNE_CENTS: f64 = 7.0;
/// Slow attack of each pad chord.
const PAD_ATTACK_S: f64 = 0.45;
/// Release of each pad chord; it crossfades with the next chord's attack.
const PAD_RELEASE_S: f64 = 0.4;
/// Corner of the pad's low-pass.
const PAD_LOW_PASS_HZ: f64 = 1600.0;
/// Pad pan: clearly left.
const PAD_GAINS: [f32; 2] = [0.9, 0.35];

/// How long a plucked string rings until it is 60 dB down.
const GUITAR_T60_S: f64 = 0.9;
/// Rendered length of a pluck (past its T60).
const GUITAR_LENGTH_S: f64 = 1.0;
/// Corner of the low-pass on the pluck's noise burst: lower sounds softer, like a thumb.
const GUITAR_PICK_LOW_PASS_HZ: f64 = 2500.0;
/// Guitar pan: clearly right.
const GUITAR_GAINS: [f32; 2] = [0.3, 0.9];

/// Renders the pad (left) and the guitar arpeggio (right).
fn render_other(song: &Song) -> StereoBuffer {
    let pad = render_pad(song);
    let guitar = render_guitar(song);
    std::array::from_fn(|channel| {
        let (pad_gain, guitar_gain) = (PAD_GAINS[channel], GUITAR_GAINS[channel]);
        pad.iter()
            .zip(&guitar)
            .map(|(p, g)| pad_gain * p + guitar_gain * g)
            .collect()
    })
}

/// Renders one pad chord per bar, then low-passes the whole pad.
fn render_pad(song: &Song) -> Vec<f32> {
    let mut track = song.silence();
    for bar in 0..song.num_bars {
        let span = song.event_span(&mut track, bar as f64 * BAR_S, BAR_S + PAD_RELEASE_S);
        let mut rng = Rng::for_event(PAD_SEED, bar);
        pad_chord(
            span,
            song.sample_rate_hz,
            &chord_of_bar(bar).pad_midi,
            &mut rng,
        );
    }
    let mut low_pass = Biquad::low_pass(song.sample_rate_hz, PAD_LOW_PASS_HZ, 0.707);
    for sample in track.iter_mut() {
        *sample = low_pass.process(f64::from(*sample)) as f32;
    }
    track
}

/// One pad chord, a bar long: two detuned sawtooths per note, free-running phases.
fn pad_chord(out: &mut [f32], sample_rate_hz: f64, notes_midi: &[u8; 3], rng: &mut Rng) {
    let mut oscillators = [(); 6].map(|()| PolyBlepSaw {
        phase: 0.5 + 0.5 * rng.next_bipolar(),
    });
    let increments: [f64; 6] = std::array::from_fn(|i| {
        let detune_cents = if i % 2 == 0 {
            PAD_DETUNE_CENTS
        } else {
            -PAD_DETUNE_CENTS
        };
        let midi = f64::from(notes_midi[i / 2]) + detune_cents / 100.0;
        midi_to_hz(midi) / sample_rate_hz
    });
    let level = 1.0 / oscillators.len() as f64;
    for (n, sample) in out.iter_mut().enumerate() {
        let t_s = n as f64 / sample_rate_hz;
        let mut sum = 0.0;
        for (oscillator, &increment) in oscillators.iter_mut().zip(&increments) {
            sum += oscillator.next(increment);
        }
        *sample += (level * gate_envelope(t_s, BAR_S, PAD_ATTACK_S, PAD_RELEASE_S) * sum) as f32;
    }
}

/// Renders the guitar arpeggio as a mono track.
fn render_guitar(song: &Song) -> Vec<f32> {
    let mut track = song.silence();
    let mut pluck_index = 0;
    song.for_each_eighth(|start_s, bar, eighth| {
        let midi = chord_of_bar(bar).guitar_midi[GUITAR_PATTERN[eighth]];
        let velocity = if eighth % 2 == 0 { 1.0 } else { 0.75 };
        let span = song.event_span(&mut track, start_s, GUITAR_LENGTH_S);
        let mut rng = Rng::for_event(GUITAR_SEED, pluck_index);
        pluck(
            span,
            song.sample_rate_hz,
            midi_to_hz(f64::from(midi)),
            velocity,
            &mut rng,
        );
        pluck_index += 1;
    });
    track
}

/// One plucked string (Karplus–Strong): a delay line one period long, filled with a burst of
/// noise and fed back through a two-point average (the string's damping). A first-order
/// all-pass supplies the fractional part of the period so that every note is in tune.
fn pluck(out: &mut [f32], sample_rate_hz: f64, pitch_hz: f64, velocity: f64, rng: &mut Rng) {
    // Loop delay = whole samples + 0.5 (the average) + d (the all-pass), with d in [0.1, 1.1)
    // where the all-pass delay is flat enough.
    let period_samples = sample_rate_hz / pitch_hz;
    let num_delay_samples = ((period_samples - 0.6).floor() as usize).max(1);
    let fraction = period_samples - 0.5 - num_delay_samples as f64;
    let allpass_coefficient = (1.0 - fraction) / (1.0 + fraction);
    // Loss per trip round the loop for a 60 dB fall in GUITAR_T60_S.
    let loss_per_period = exp_det(-6.907_755_278_982_137 / (GUITAR_T60_S * pitch_hz));

    // The pluck: low-passed noise with its mean removed (no DC stuck in the loop).
    let mut pick = OnePoleLowPass::new(sample_rate_hz, GUITAR_PICK_LOW_PASS_HZ);
    let mut delay: Vec<f64> = (0..num_delay_samples)
        .map(|_| pick.process(rng.next_bipolar()))
        .collect();
    let mean = delay.iter().sum::<f64>() / num_delay_samples as f64;
    delay.iter_mut().for_each(|x| *x = velocity * (*x - mean));

    let (mut previous, mut allpass_in, mut allpass_out) = (0.0, 0.0, 0.0);
    let mut position = 0;
    for sample in out.iter_mut() {
        let current = delay[position];
        *sample += current as f32;
        let damped = loss_per_period * 0.5 * (current + previous);
        previous = current;
        allpass_out = allpass_coefficient * (damped - allpass_out) + allpass_in;
        allpass_in = damped;
        delay[position] = allpass_out;
        position += 1;
        if position == num_delay_samples {
            position = 0;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Building blocks: oscillator, filters, envelopes
// ---------------------------------------------------------------------------------------------

/// A sawtooth with PolyBLEP corrections at the wrap, so it is nearly free of aliasing.
#[derive(Default)]
struct PolyBlepSaw {
    /// Position in the cycle, in `[0, 1)`.
    phase: f64,
}

impl PolyBlepSaw {
    /// The next sample, in `[-1, 1]`, then advances by `increment` cycles (frequency / rate).
    fn next(&mut self, increment: f64) -> f64 {
        let out = 2.0 * self.phase - 1.0 - poly_blep(self.phase, increment);
        self.phase += increment;
        if self.phase >= 1.0 {
            self.phase -= 1.0;
        }
        out
    }
}

/// The polynomial band-limited step residual around a wrap at phase 0.
fn poly_blep(phase: f64, increment: f64) -> f64 {
    if phase < increment {
        let t = phase / increment;
        t + t - t * t - 1.0
    } else if phase > 1.0 - increment {
        let t = (phase - 1.0) / increment;
        t * t + t + t + 1.0
    } else {
        0.0
    }
}

/// A one-pole low-pass (6 dB/octave).
struct OnePoleLowPass {
    coefficient: f64,
    state: f64,
}

impl OnePoleLowPass {
    fn new(sample_rate_hz: f64, corner_hz: f64) -> Self {
        let coefficient = 1.0 - exp_det(-std::f64::consts::TAU * corner_hz / sample_rate_hz);
        Self {
            coefficient,
            state: 0.0,
        }
    }

    fn process(&mut self, x: f64) -> f64 {
        self.state += self.coefficient * (x - self.state);
        self.state
    }
}

/// A biquad (transposed direct form II) with the Audio EQ Cookbook's designs.
struct Biquad {
    b0: f64,
    b1: f64,
    b2: f64,
    a1: f64,
    a2: f64,
    z1: f64,
    z2: f64,
}

impl Biquad {
    fn low_pass(sample_rate_hz: f64, corner_hz: f64, q: f64) -> Self {
        let (cos_w0, alpha) = Self::cos_and_alpha(sample_rate_hz, corner_hz, q);
        let b1 = 1.0 - cos_w0;
        Self::normalized(
            [b1 / 2.0, b1, b1 / 2.0],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    fn high_pass(sample_rate_hz: f64, corner_hz: f64, q: f64) -> Self {
        let (cos_w0, alpha) = Self::cos_and_alpha(sample_rate_hz, corner_hz, q);
        let b1 = -(1.0 + cos_w0);
        Self::normalized(
            [-b1 / 2.0, b1, -b1 / 2.0],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    /// A resonator with 0 dB gain at its centre.
    fn band_pass(sample_rate_hz: f64, centre_hz: f64, bandwidth_hz: f64) -> Self {
        let (cos_w0, alpha) =
            Self::cos_and_alpha(sample_rate_hz, centre_hz, centre_hz / bandwidth_hz);
        Self::normalized(
            [alpha, 0.0, -alpha],
            [1.0 + alpha, -2.0 * cos_w0, 1.0 - alpha],
        )
    }

    /// `cos(ω₀)` and `α = sin(ω₀) / 2Q`, with the frequency kept safely below Nyquist so low
    /// sample rates still give stable filters.
    fn cos_and_alpha(sample_rate_hz: f64, hz: f64, q: f64) -> (f64, f64) {
        let turns = (hz / sample_rate_hz).min(0.45);
        (cos_turns(turns), sin_turns(turns) / (2.0 * q))
    }

    fn normalized(b: [f64; 3], a: [f64; 3]) -> Self {
        Self {
            b0: b[0] / a[0],
            b1: b[1] / a[0],
            b2: b[2] / a[0],
            a1: a[1] / a[0],
            a2: a[2] / a[0],
            z1: 0.0,
            z2: 0.0,
        }
    }

    fn process(&mut self, x: f64) -> f64 {
        let y = self.b0 * x + self.z1;
        self.z1 = self.b1 * x - self.a1 * y + self.z2;
        self.z2 = self.b2 * x - self.a2 * y;
        y
    }
}

/// A note envelope at `t_s` after note-on: smooth rise over `attack_s`, held until `gate_s`, then
/// a smooth fall over `release_s` from wherever the rise had got to.
fn gate_envelope(t_s: f64, gate_s: f64, attack_s: f64, release_s: f64) -> f64 {
    let rise = smoothstep(t_s.min(gate_s) / attack_s);
    let fall = 1.0 - smoothstep((t_s - gate_s) / release_s);
    rise * fall
}

/// 0 below 0, 1 above 1, and the cubic `3x² − 2x³` in between.
fn smoothstep(x: f64) -> f64 {
    let x = x.clamp(0.0, 1.0);
    x * x * (3.0 - 2.0 * x)
}

/// The factor that makes an exponential decay with time constant `time_constant_s` per sample.
fn decay_per_sample(sample_rate_hz: f64, time_constant_s: f64) -> f64 {
    exp_det(-1.0 / (time_constant_s * sample_rate_hz))
}

// ---------------------------------------------------------------------------------------------
// Deterministic maths and noise
// ---------------------------------------------------------------------------------------------

/// Frequency of a (possibly fractional) MIDI note, A4 = 69 = 440 Hz.
fn midi_to_hz(midi: f64) -> f64 {
    440.0 * semitones_to_ratio(midi - 69.0)
}

/// Frequency ratio of an interval in (possibly fractional) semitones.
fn semitones_to_ratio(semitones: f64) -> f64 {
    exp_det(semitones * (LN_2 / 12.0))
}

/// `sin(2π·turns)`, to about 1e-11, from `+ − ×` and casts only, so bit-identical everywhere.
fn sin_turns(turns: f64) -> f64 {
    // Reduce to r in [-1/4, 1/4] turn using sin(π − x) = sin(x), then a Taylor series to x¹⁷.
    // (A cast instead of `floor`, which is a library call on baseline x86-64.)
    let mut r = turns - (turns as i64) as f64;
    if r >= 0.5 {
        r -= 1.0;
    } else if r < -0.5 {
        r += 1.0;
    }
    if r > 0.25 {
        r = 0.5 - r;
    } else if r < -0.25 {
        r = -0.5 - r;
    }
    let x = r * std::f64::consts::TAU;
    let x2 = x * x;
    // Horner: x·(1 − x²/(2·3)·(1 − x²/(4·5)·(…))).
    let mut series = 1.0;
    for &coefficient in SIN_SERIES_COEFFICIENTS.iter().rev() {
        series = 1.0 - x2 * coefficient * series;
    }
    x * series
}

/// `1 / (2k·(2k + 1))` for k = 1..=8: the ratios of successive terms of the sine series.
const SIN_SERIES_COEFFICIENTS: [f64; 8] = [
    1.0 / 6.0,
    1.0 / 20.0,
    1.0 / 42.0,
    1.0 / 72.0,
    1.0 / 110.0,
    1.0 / 156.0,
    1.0 / 210.0,
    1.0 / 272.0,
];

/// `cos(2π·turns)`, see [`sin_turns`].
fn cos_turns(turns: f64) -> f64 {
    sin_turns(turns + 0.25)
}

/// `eˣ` to about 1e-15 relative, from `+ − ×` and casts only, so bit-identical everywhere.
/// Flushes to 0 below −700.
fn exp_det(x: f64) -> f64 {
    if x < -700.0 {
        return 0.0;
    }
    let x = x.min(700.0);
    // eˣ = 2ᵏ · eʳ with |r| ≤ ln2 / 2, then a Taylor series to r¹³.
    let k_unrounded = x * LOG2_E;
    let k = (k_unrounded + if k_unrounded < 0.0 { -0.5 } else { 0.5 }) as i64;
    let r = x - k as f64 * LN_2;
    // Horner: 1 + r·(1 + r/2·(1 + r/3·(…))).
    let mut series = 1.0;
    for &coefficient in EXP_SERIES_COEFFICIENTS.iter().rev() {
        series = 1.0 + r * coefficient * series;
    }
    // 2ᵏ built from its bits: k is within the normal exponent range here.
    let two_to_k = f64::from_bits(((k + 1023) as u64) << 52);
    series * two_to_k
}

/// `1 / i` for i = 1..=13: the ratios of successive terms of the exponential series.
const EXP_SERIES_COEFFICIENTS: [f64; 13] = [
    1.0,
    1.0 / 2.0,
    1.0 / 3.0,
    1.0 / 4.0,
    1.0 / 5.0,
    1.0 / 6.0,
    1.0 / 7.0,
    1.0 / 8.0,
    1.0 / 9.0,
    1.0 / 10.0,
    1.0 / 11.0,
    1.0 / 12.0,
    1.0 / 13.0,
];

/// SplitMix64: a tiny, fast, good-enough generator for noise. Ours, so the song never changes
/// with a dependency's version or the platform.
struct Rng {
    state: u64,
}

impl Rng {
    /// A generator for the `event_index`-th event of an instrument, independent of all others.
    fn for_event(instrument_seed: u64, event_index: usize) -> Self {
        let mut rng = Self {
            state: instrument_seed ^ (event_index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
        };
        rng.next_u64(); // Stir the seed once so neighbouring events start far apart.
        rng
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[-1, 1)`.
    fn next_bipolar(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (2.0 / (1_u64 << 53) as f64) - 1.0
    }
}

#[cfg(test)]
mod tests {
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
        for (name, stem) in ["vocals", "drums", "bass", "other"]
            .iter()
            .zip(song.stems())
        {
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
        for (name, stem) in ["vocals", "drums", "bass", "other"]
            .iter()
            .zip(song.stems())
        {
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
