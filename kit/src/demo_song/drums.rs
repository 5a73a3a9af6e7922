//! The drum kit: kick, snare and hi-hat of the drums stem.

use super::dsp::*;
use super::math::*;
use super::score::*;

/// Kick pitch at the hit.
pub(super) const KICK_START_HZ: f64 = 160.0;
/// Kick pitch the sweep settles on.
pub(super) const KICK_END_HZ: f64 = 48.0;
/// Time constant of the kick's pitch sweep.
pub(super) const KICK_SWEEP_S: f64 = 0.03;
/// Time constant of the kick's amplitude decay.
pub(super) const KICK_DECAY_S: f64 = 0.08;
/// Rendered length of a kick (−75 dB by then).
pub(super) const KICK_LENGTH_S: f64 = 0.7;

/// Pitches of the snare's tone body (two drum-head modes).
pub(super) const SNARE_BODY_HZ: [f64; 2] = [185.0, 330.0];
/// Time constant of the snare body's decay.
pub(super) const SNARE_BODY_DECAY_S: f64 = 0.05;
/// Time constant of the snare wires' (noise) decay.
pub(super) const SNARE_NOISE_DECAY_S: f64 = 0.09;
/// Corner of the high-pass on the snare noise.
pub(super) const SNARE_NOISE_HIGH_PASS_HZ: f64 = 1500.0;
/// Rendered length of a snare (−48 dB by then).
pub(super) const SNARE_LENGTH_S: f64 = 0.5;

/// Corner of the high-pass on the hi-hat noise.
pub(super) const HAT_HIGH_PASS_HZ: f64 = 7000.0;
/// Time constant of the closed hi-hat's decay.
pub(super) const HAT_DECAY_S: f64 = 0.03;
/// Rendered length of a hi-hat (−58 dB by then).
pub(super) const HAT_LENGTH_S: f64 = 0.2;
/// Hi-hat pan: slightly (20 %) right.
pub(super) const HAT_GAINS: [f32; 2] = [0.8, 1.0];
/// Random variation of the hi-hat's velocity, each way, so the hats sound played.
pub(super) const HAT_HUMANIZE: f64 = 0.08;

/// Renders the drum kit: kick and snare centred, the hi-hat slightly right.
pub(super) fn render_drums(song: &Song) -> StereoBuffer {
    let sample_rate_hz = song.sample_rate_hz;
    let mut centre = song.silence();
    let mut hats = song.silence();
    for (hit_index, (start_s, bar, eighth)) in song.eighths().enumerate() {
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
                &mut Rng::for_event(Instrument::Kick.seed(), hit_index),
            );
        }
        let snare_velocity = snare_pattern[eighth];
        if snare_velocity > 0.0 {
            let span = song.event_span(&mut centre, start_s, SNARE_LENGTH_S);
            snare(
                span,
                sample_rate_hz,
                snare_velocity,
                &mut Rng::for_event(Instrument::Snare.seed(), hit_index),
            );
        }
        // The hat makes room for the snare's pickup at the end of a fill bar.
        let is_pickup = is_fill_bar && eighth == NUM_EIGHTHS_PER_BAR - 1;
        if !is_pickup {
            let mut rng = Rng::for_event(Instrument::Hat.seed(), hit_index);
            let velocity = HAT_PATTERN[eighth] * (1.0 + HAT_HUMANIZE * rng.next_bipolar());
            let span = song.event_span(&mut hats, start_s, HAT_LENGTH_S);
            hi_hat(span, sample_rate_hz, velocity, &mut rng);
        }
    }
    HAT_GAINS.map(|gain| {
        centre
            .iter()
            .zip(&hats)
            .map(|(c, h)| c + gain * h)
            .collect()
    })
}

/// A kick: a sine swept down from [`KICK_START_HZ`] to [`KICK_END_HZ`], with a click of noise.
pub(super) fn kick(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
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
pub(super) fn snare(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
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
pub(super) fn hi_hat(out: &mut [f32], sample_rate_hz: f64, velocity: f64, rng: &mut Rng) {
    let decay = decay_per_sample(sample_rate_hz, HAT_DECAY_S);
    let mut filter = Biquad::high_pass(sample_rate_hz, HAT_HIGH_PASS_HZ, 0.7);
    let mut amplitude = 0.5 * velocity;
    for sample in out.iter_mut() {
        *sample += (amplitude * filter.process(rng.next_bipolar())) as f32;
        amplitude *= decay;
    }
}
