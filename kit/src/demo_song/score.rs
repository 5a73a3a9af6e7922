//! The score: tempo, chords, melody, the patterns of each instrument, the song's timing and
//! each instrument's noise seeds.

// ---------------------------------------------------------------------------------------------
// The score: tempo, chords, melody, patterns
// ---------------------------------------------------------------------------------------------

/// Tempo of the song.
pub(super) const TEMPO_BPM: f64 = 120.0;
/// Length of one beat (a quarter note).
pub(super) const BEAT_S: f64 = 60.0 / TEMPO_BPM;
/// Beats per bar (4/4 time); each bar holds one chord.
pub(super) const NUM_BEATS_PER_BAR: usize = 4;
/// Eighth notes per bar, the grid of the drum, bass and guitar patterns.
pub(super) const NUM_EIGHTHS_PER_BAR: usize = 2 * NUM_BEATS_PER_BAR;
/// Length of one eighth note.
pub(super) const EIGHTH_S: f64 = BEAT_S / 2.0;
/// Length of one bar.
pub(super) const BAR_S: f64 = BEAT_S * NUM_BEATS_PER_BAR as f64;

/// One chord of the progression, voiced for each instrument (MIDI note numbers).
pub(super) struct Chord {
    /// Bass root, in octave 1 or 2.
    pub(super) bass_root_midi: u8,
    /// Pad voicing, voice-led from chord to chord.
    pub(super) pad_midi: [u8; 3],
    /// Guitar voicing, low to high, the arpeggio's notes.
    pub(super) guitar_midi: [u8; 4],
}

pub(super) const fn chord(bass_root_midi: u8, pad_midi: [u8; 3], guitar_midi: [u8; 4]) -> Chord {
    Chord {
        bass_root_midi,
        pad_midi,
        guitar_midi,
    }
}

/// The four-chord loop, one chord per bar.
pub(super) const PROGRESSION: [Chord; 4] = [
    // Am: A C E
    chord(33, [57, 60, 64], [57, 64, 69, 72]),
    // F: F A C
    chord(29, [57, 60, 65], [53, 60, 65, 69]),
    // C: C E G
    chord(36, [55, 60, 64], [60, 67, 72, 76]),
    // G: G B D
    chord(31, [55, 59, 62], [55, 62, 67, 71]),
];

/// Length of the progression (and of the melody) in bars.
pub(super) const NUM_BARS_PER_LOOP: usize = PROGRESSION.len();

/// One sung note of the melody.
pub(super) struct MelodyNote {
    /// Start, in beats from the start of the loop.
    pub(super) start_beat: f64,
    /// Held length in beats (the release rings on after it).
    pub(super) num_beats: f64,
    /// Pitch as a MIDI note number.
    pub(super) midi: u8,
}

pub(super) const fn sung(start_beat: f64, num_beats: f64, midi: u8) -> MelodyNote {
    MelodyNote {
        start_beat,
        num_beats,
        midi,
    }
}

/// The tune, one loop (16 beats) long: two phrases, each followed by a one-beat rest.
pub(super) const MELODY: [MelodyNote; 14] = [
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

/// Kick velocities on the eighth-note grid: 1, 3 and the "and" of 3.
pub(super) const KICK_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] =
    [1.0, 0.0, 0.0, 0.0, 0.9, 0.7, 0.0, 0.0];
/// Snare velocities: the backbeat on 2 and 4.
pub(super) const SNARE_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] =
    [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
/// Snare in the last bar of every loop: the backbeat plus a pickup into the next loop.
pub(super) const SNARE_FILL_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] =
    [0.0, 0.0, 1.0, 0.0, 0.0, 0.5, 1.0, 0.8];
/// Closed hi-hat velocities: every eighth, accented on the beat.
pub(super) const HAT_PATTERN: [f64; NUM_EIGHTHS_PER_BAR] = [0.9, 0.5, 0.8, 0.5, 0.9, 0.5, 0.8, 0.5];

/// Bass notes on the eighth-note grid, in semitones above the chord root (root and fifth).
pub(super) const BASS_PATTERN_SEMITONES: [u8; NUM_EIGHTHS_PER_BAR] = [0, 0, 7, 0, 0, 0, 7, 0];

/// Guitar arpeggio on the eighth-note grid: indices into [`Chord::guitar_midi`].
pub(super) const GUITAR_PATTERN: [usize; NUM_EIGHTHS_PER_BAR] = [0, 1, 2, 3, 1, 2, 3, 2];

/// Where a render is going: sample rate, length and the bars that sound in it.
pub(super) struct Song {
    pub(super) sample_rate_hz: f64,
    pub(super) num_samples: usize,
    /// Bars that start before the end of the render.
    pub(super) num_bars: usize,
}

impl Song {
    pub(super) fn new(sample_rate_hz: u32, duration_s: f32) -> Self {
        let num_samples = (f64::from(duration_s) * f64::from(sample_rate_hz)).round() as usize;
        let num_bars = (f64::from(duration_s) / BAR_S).ceil() as usize;
        Self {
            sample_rate_hz: f64::from(sample_rate_hz),
            num_samples,
            num_bars,
        }
    }

    /// The sample at which a time (in seconds from the start of the song) falls.
    pub(super) fn sample_at(&self, time_s: f64) -> usize {
        (time_s * self.sample_rate_hz).round() as usize
    }

    /// Number of samples in a duration, rounded up.
    pub(super) fn num_samples_in(&self, duration_s: f64) -> usize {
        (duration_s * self.sample_rate_hz).ceil() as usize
    }

    /// A silent mono track as long as the render.
    pub(super) fn silence(&self) -> Vec<f32> {
        vec![0.0; self.num_samples]
    }

    /// The part of `track` that an event starting at `start_s` and lasting `duration_s` covers,
    /// cut at the end of the render (empty if it starts after the end).
    pub(super) fn event_span<'a>(
        &self,
        track: &'a mut [f32],
        start_s: f64,
        duration_s: f64,
    ) -> &'a mut [f32] {
        let start = self.sample_at(start_s).min(track.len());
        let end = start
            .saturating_add(self.num_samples_in(duration_s))
            .min(track.len());
        &mut track[start..end]
    }

    /// Every eighth note of the song, in order, as `(start_s, bar, eighth)`.
    pub(super) fn eighths(&self) -> impl Iterator<Item = (f64, usize, usize)> {
        (0..self.num_bars).flat_map(|bar| {
            (0..NUM_EIGHTHS_PER_BAR).map(move |eighth| {
                let start_s = bar as f64 * BAR_S + eighth as f64 * EIGHTH_S;
                (start_s, bar, eighth)
            })
        })
    }

    /// Renders a part's events, in order, into a silent track: for each `(start_s, duration_s,
    /// event)`, `play(span, event)` adds the event into the span of the track it covers (see
    /// [`Song::event_span`]).
    pub(super) fn render_events<E>(
        &self,
        events: impl IntoIterator<Item = (f64, f64, E)>,
        mut play: impl FnMut(&mut [f32], E),
    ) -> Vec<f32> {
        let mut track = self.silence();
        for (start_s, duration_s, event) in events {
            play(self.event_span(&mut track, start_s, duration_s), event);
        }
        track
    }
}

/// The chord of a bar.
pub(super) fn chord_of_bar(bar: usize) -> &'static Chord {
    &PROGRESSION[bar % NUM_BARS_PER_LOOP]
}

/// The instruments that play noise, each with its own seed ([`Instrument::seed`]); each event
/// mixes its index in (see [`Rng::for_event`]).
#[derive(Clone, Copy)]
pub(super) enum Instrument {
    Voice = 1,
    Kick,
    Snare,
    Hat,
    Pad,
    Guitar,
}

impl Instrument {
    /// The seed of the instrument's noise: its number over a common base.
    pub(super) const fn seed(self) -> u64 {
        0x5745_4D46_4C4F_5700 + self as u64
    }
}
