//! The pad and the plucked guitar of the other stem.

use super::dsp::*;
use super::math::*;
use super::score::*;

/// Detune of the pad's two sawtooths per note, each way.
pub(super) const PAD_DETUNE_CENTS: f64 = 7.0;
/// Slow attack of each pad chord.
pub(super) const PAD_ATTACK_S: f64 = 0.45;
/// Release of each pad chord; it crossfades with the next chord's attack.
pub(super) const PAD_RELEASE_S: f64 = 0.4;
/// Corner of the pad's low-pass.
pub(super) const PAD_LOW_PASS_HZ: f64 = 1600.0;
/// Pad pan: clearly left.
pub(super) const PAD_GAINS: [f32; 2] = [0.9, 0.35];

/// How long a plucked string rings until it is 60 dB down.
pub(super) const GUITAR_T60_S: f64 = 0.9;
/// Rendered length of a pluck (past its T60).
pub(super) const GUITAR_LENGTH_S: f64 = 1.0;
/// Corner of the low-pass on the pluck's noise burst: lower sounds softer, like a thumb.
pub(super) const GUITAR_PICK_LOW_PASS_HZ: f64 = 2500.0;
/// Guitar pan: clearly right.
pub(super) const GUITAR_GAINS: [f32; 2] = [0.3, 0.9];

/// Renders the pad (left) and the guitar arpeggio (right).
pub(super) fn render_other(song: &Song) -> StereoBuffer {
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
pub(super) fn render_pad(song: &Song) -> Vec<f32> {
    let chords = (0..song.num_bars).map(|bar| (bar as f64 * BAR_S, BAR_S + PAD_RELEASE_S, bar));
    let mut track = song.render_events(chords, |span, bar| {
        let mut rng = Rng::for_event(Instrument::Pad.seed(), bar);
        let notes_midi = &chord_of_bar(bar).pad_midi;
        pad_chord(span, song.sample_rate_hz, notes_midi, &mut rng);
    });
    let mut low_pass = Biquad::low_pass(song.sample_rate_hz, PAD_LOW_PASS_HZ, 0.707);
    for sample in track.iter_mut() {
        *sample = low_pass.process(f64::from(*sample)) as f32;
    }
    track
}

/// One pad chord, a bar long: two detuned sawtooths per note, free-running phases.
pub(super) fn pad_chord(out: &mut [f32], sample_rate_hz: f64, notes_midi: &[u8; 3], rng: &mut Rng) {
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
pub(super) fn render_guitar(song: &Song) -> Vec<f32> {
    let plucks = song
        .eighths()
        .enumerate()
        .map(|(pluck_index, (start_s, bar, eighth))| {
            let midi = chord_of_bar(bar).guitar_midi[GUITAR_PATTERN[eighth]];
            let velocity = if eighth % 2 == 0 { 1.0 } else { 0.75 };
            (start_s, GUITAR_LENGTH_S, (pluck_index, midi, velocity))
        });
    song.render_events(plucks, |span, (pluck_index, midi, velocity)| {
        let mut rng = Rng::for_event(Instrument::Guitar.seed(), pluck_index);
        let pitch_hz = midi_to_hz(f64::from(midi));
        pluck(span, song.sample_rate_hz, pitch_hz, velocity, &mut rng);
    })
}

/// One plucked string (Karplus–Strong): a delay line one period long, filled with a burst of
/// noise and fed back through a two-point average (the string's damping). A first-order
/// all-pass supplies the fractional part of the period so that every note is in tune.
pub(super) fn pluck(
    out: &mut [f32],
    sample_rate_hz: f64,
    pitch_hz: f64,
    velocity: f64,
    rng: &mut Rng,
) {
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
