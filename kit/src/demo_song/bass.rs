//! The bass line of the bass stem.

use super::dsp::*;
use super::math::*;
use super::score::*;

/// Fraction of an eighth note a bass note is held (slightly detached).
pub(super) const BASS_GATE_FRACTION: f64 = 0.8;
/// Attack of a bass note.
pub(super) const BASS_ATTACK_S: f64 = 0.005;
/// Release of a bass note.
pub(super) const BASS_RELEASE_S: f64 = 0.03;
/// Time constant with which a bass note falls from its attack towards [`BASS_SUSTAIN`].
pub(super) const BASS_DECAY_S: f64 = 0.12;
/// Level a held bass note settles to.
pub(super) const BASS_SUSTAIN: f64 = 0.6;
/// Levels of the second and third harmonics, for a little growl on small speakers.
pub(super) const BASS_HARMONICS: [f64; 2] = [0.35, 0.12];

/// Renders the bass line as a mono track: root and fifth in eighth notes.
pub(super) fn render_bass(song: &Song) -> Vec<f32> {
    let gate_s = BASS_GATE_FRACTION * EIGHTH_S;
    let notes = song.eighths().map(|(start_s, bar, eighth)| {
        let midi = chord_of_bar(bar).bass_root_midi + BASS_PATTERN_SEMITONES[eighth];
        let velocity = if eighth % 2 == 0 { 1.0 } else { 0.8 };
        (start_s, gate_s + BASS_RELEASE_S, (midi, velocity))
    });
    song.render_events(notes, |span, (midi, velocity)| {
        let pitch_hz = midi_to_hz(f64::from(midi));
        bass_note(span, song.sample_rate_hz, pitch_hz, gate_s, velocity);
    })
}

/// One bass note: a sine with two soft harmonics, plucked-style envelope.
pub(super) fn bass_note(
    out: &mut [f32],
    sample_rate_hz: f64,
    pitch_hz: f64,
    gate_s: f64,
    velocity: f64,
) {
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
