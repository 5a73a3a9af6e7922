//! The singer: formant synthesis of the vocals stem.

use super::dsp::*;
use super::math::*;
use super::score::*;

/// Vibrato rate.
pub(super) const VIBRATO_RATE_HZ: f64 = 5.5;
/// Vibrato depth, each way.
pub(super) const VIBRATO_DEPTH_SEMITONES: f64 = 0.5;
/// Time from the start of a note until the vibrato starts to fade in.
pub(super) const VIBRATO_DELAY_S: f64 = 0.12;
/// Time the vibrato takes to reach full depth.
pub(super) const VIBRATO_FADE_S: f64 = 0.3;
/// Attack of a sung note.
pub(super) const VOICE_ATTACK_S: f64 = 0.04;
/// Release after a sung note; it overlaps the next note's attack like a slur.
pub(super) const VOICE_RELEASE_S: f64 = 0.09;
/// Corner of the one-pole low-pass that gives the sawtooth a glottis-like −12 dB/octave slope.
pub(super) const GLOTTAL_TILT_HZ: f64 = 700.0;
/// Level of the breath noise relative to the sawtooth.
pub(super) const BREATH_LEVEL: f64 = 0.06;

/// The vowels the singer knows.
#[derive(Clone, Copy)]
pub(super) enum Vowel {
    A,
    E,
    I,
    O,
    U,
}

/// One resonance of the vocal tract.
#[derive(Clone, Copy)]
pub(super) struct Formant {
    hz: f64,
    bandwidth_hz: f64,
    /// Linear gain of the resonator's output.
    gain: f64,
}

pub(super) const fn formant(hz: f64, bandwidth_hz: f64, gain: f64) -> Formant {
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
    pub(super) const fn formants(self) -> [Formant; 3] {
        FORMANTS[self as usize]
    }
}

/// [`Vowel::formants`] of each vowel, in the order of the variants.
const FORMANTS: [[Formant; 3]; 5] = [
    // A: 0 / −6 / −7 dB
    [
        formant(650.0, 90.0, 1.0),
        formant(1080.0, 100.0, 0.501),
        formant(2650.0, 130.0, 0.447),
    ],
    // E: 0 / −14 / −12 dB
    [
        formant(400.0, 80.0, 1.0),
        formant(1700.0, 100.0, 0.200),
        formant(2600.0, 120.0, 0.251),
    ],
    // I: 0 / −15 / −18 dB
    [
        formant(290.0, 60.0, 1.0),
        formant(1870.0, 100.0, 0.178),
        formant(2800.0, 120.0, 0.126),
    ],
    // O: 0 / −10 / −12 dB
    [
        formant(400.0, 60.0, 1.0),
        formant(800.0, 90.0, 0.316),
        formant(2600.0, 120.0, 0.251),
    ],
    // U: 0 / −20 / −17 dB
    [
        formant(350.0, 60.0, 1.0),
        formant(600.0, 80.0, 0.100),
        formant(2700.0, 120.0, 0.141),
    ],
];

/// Renders the melody, looped over the song, as a mono track.
pub(super) fn render_vocals(song: &Song) -> Vec<f32> {
    let num_loops = song.num_bars.div_ceil(NUM_BARS_PER_LOOP);
    let loop_s = BAR_S * NUM_BARS_PER_LOOP as f64;
    let notes = (0..num_loops)
        .flat_map(|loop_index| MELODY.iter().map(move |note| (loop_index, note)))
        .enumerate()
        .map(|(note_index, (loop_index, note))| {
            let start_s = loop_index as f64 * loop_s + note.start_beat * BEAT_S;
            let gate_s = note.num_beats * BEAT_S;
            (
                start_s,
                gate_s + VOICE_RELEASE_S,
                (note_index, note, gate_s),
            )
        });
    song.render_events(notes, |span, (note_index, note, gate_s)| {
        let vowel = LYRIC_VOWELS[note_index % LYRIC_VOWELS.len()];
        let mut rng = Rng::for_event(Instrument::Voice.seed(), note_index);
        let pitch_hz = midi_to_hz(f64::from(note.midi));
        sing(span, song.sample_rate_hz, pitch_hz, gate_s, vowel, &mut rng);
    })
}

/// Sings one note into `out`: a glottal source through three formant resonators.
pub(super) fn sing(
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

/// The "lyrics": the vowel of each sung note, cycled over the whole song. Nine vowels against
/// fourteen notes per loop, so every loop is sung on different vowels.
pub(super) const LYRIC_VOWELS: [Vowel; 9] = [
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
