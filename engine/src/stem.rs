//! The stems Stemflow produces.

/// Number of stems every separator delivers (missing ones are silent, `Other` is the residual).
pub const NUM_STEMS: usize = 4;

/// Number of stems a separator computes itself; the last stem, [`Stem::Other`], is always the
/// residual `input − (vocals + drums + bass)` computed by the pipeline, so the stems sum to the
/// input exactly.
pub const NUM_SEPARATED_STEMS: usize = NUM_STEMS - 1;

/// Samples per frame in the engine's interleaved stem frames: every stem in stereo.
pub const STEM_FRAME_SAMPLES: usize = NUM_STEMS * 2;

/// One stem of the separation, in output-port order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stem {
    /// Singing and speech.
    Vocals,
    /// Drum kit and percussion.
    Drums,
    /// Bass instruments.
    Bass,
    /// Everything else: the exact residual of the other stems.
    Other,
}

impl Stem {
    /// All stems in output-port order.
    pub const ALL: [Stem; NUM_STEMS] = [Stem::Vocals, Stem::Drums, Stem::Bass, Stem::Other];

    /// Position of the stem in [`Stem::ALL`] and in stem frames.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Display name, as used for the plugin's output ports ("Vocals", …).
    pub const fn display_name(self) -> &'static str {
        match self {
            Stem::Vocals => "Vocals",
            Stem::Drums => "Drums",
            Stem::Bass => "Bass",
            Stem::Other => "Other",
        }
    }

    /// Lower-case name, as used for file names and parameter ids ("vocals", …).
    pub const fn file_name(self) -> &'static str {
        match self {
            Stem::Vocals => "vocals",
            Stem::Drums => "drums",
            Stem::Bass => "bass",
            Stem::Other => "other",
        }
    }
}
