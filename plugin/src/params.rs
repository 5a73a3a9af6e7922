//! The plugin's parameters and its persisted (non-automatable) state.

use nice_plug::prelude::*;
use stemflow_engine::{ExtraStems, LookAhead, Stem};

use crate::editor_size::EditorSizeField;
use crate::state::SavedStateField;

/// Highest stem gain: +12 dB.
pub const MAX_STEM_GAIN_DB: f32 = 12.0;
/// Gain ramp time, long enough to avoid zipper noise on automation.
pub const GAIN_SMOOTHING_MS: f32 = 20.0;
/// Ramp time of mute, solo and bypass switches: short, but click-free.
pub const SWITCH_SMOOTHING_MS: f32 = 10.0;

/// Gain, mute and solo of one stem.
#[derive(Params)]
pub struct StemParams {
    /// Linear gain (0 = −inf dB … +12 dB), shown in dB, smoothed.
    #[id = "gain"]
    pub gain: FloatParam,
    /// Silences the stem.
    #[id = "mute"]
    pub mute: BoolParam,
    /// Any soloed stem silences every stem that is not soloed.
    #[id = "solo"]
    pub solo: BoolParam,
}

impl StemParams {
    fn new(stem: Stem) -> Self {
        let name = stem.display_name();
        Self {
            gain: FloatParam::new(
                format!("{name} Gain"),
                1.0,
                FloatRange::Skewed {
                    min: 0.0,
                    max: util::db_to_gain(MAX_STEM_GAIN_DB),
                    factor: FloatRange::gain_skew_factor(-60.0, MAX_STEM_GAIN_DB),
                },
            )
            .with_smoother(SmoothingStyle::Linear(GAIN_SMOOTHING_MS))
            .with_unit(" dB")
            .with_value_to_string(formatters::v2s_f32_gain_to_db(1))
            .with_string_to_value(formatters::s2v_f32_gain_to_db()),
            mute: BoolParam::new(format!("{name} Mute"), false),
            solo: BoolParam::new(format!("{name} Solo"), false),
        }
    }
}

/// Where a six-stem model's guitar and piano go: the "Guitar & Piano" parameter.
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuitarPianoOutput {
    /// Folded into Other: the four usual outputs carry everything.
    #[id = "into-other"]
    #[name = "Into Other"]
    IntoOther,
    /// On the Guitar and Piano outputs (the fifth and sixth stem outputs).
    #[id = "own-outputs"]
    #[name = "Own Outputs"]
    OwnOutputs,
}

impl GuitarPianoOutput {
    /// The engine's setting.
    pub fn extra_stems(self) -> ExtraStems {
        match self {
            GuitarPianoOutput::IntoOther => ExtraStems::IntoOther,
            GuitarPianoOutput::OwnOutputs => ExtraStems::Separate,
        }
    }
}

/// How far past the audio a neural model may look: the "Look-ahead" parameter. Shorter
/// settings cut the latency and make the model run more often (see
/// [`stemflow_engine::look_ahead`]).
#[derive(Enum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookAheadSetting {
    /// The reference pipeline: a whole chunk of latency.
    #[id = "full"]
    #[name = "Full"]
    Full,
    #[id = "4s"]
    #[name = "4 s"]
    Seconds4,
    #[id = "2s"]
    #[name = "2 s"]
    Seconds2,
    #[id = "1s"]
    #[name = "1 s"]
    Seconds1,
    #[id = "500ms"]
    #[name = "500 ms"]
    Millis500,
    #[id = "250ms"]
    #[name = "250 ms"]
    Millis250,
}

impl LookAheadSetting {
    /// The engine's setting.
    pub fn look_ahead(self) -> LookAhead {
        match self {
            LookAheadSetting::Full => LookAhead::Full,
            LookAheadSetting::Seconds4 => LookAhead::Millis(4000),
            LookAheadSetting::Seconds2 => LookAhead::Millis(2000),
            LookAheadSetting::Seconds1 => LookAhead::Millis(1000),
            LookAheadSetting::Millis500 => LookAhead::Millis(500),
            LookAheadSetting::Millis250 => LookAhead::Millis(250),
        }
    }
}

/// Everything the host sees and saves.
#[derive(Params)]
pub struct StemflowParams {
    /// Vocals stem controls (ids `vocals_gain`, `vocals_mute`, `vocals_solo`).
    #[nested(id_prefix = "vocals", group = "Vocals")]
    pub vocals: StemParams,
    /// Drums stem controls.
    #[nested(id_prefix = "drums", group = "Drums")]
    pub drums: StemParams,
    /// Bass stem controls.
    #[nested(id_prefix = "bass", group = "Bass")]
    pub bass: StemParams,
    /// Other stem controls.
    #[nested(id_prefix = "other", group = "Other")]
    pub other: StemParams,
    /// Guitar stem controls (six-stem models with Guitar & Piano on their own outputs).
    #[nested(id_prefix = "guitar", group = "Guitar")]
    pub guitar: StemParams,
    /// Piano stem controls (six-stem models with Guitar & Piano on their own outputs).
    #[nested(id_prefix = "piano", group = "Piano")]
    pub piano: StemParams,
    /// Where a six-stem model's guitar and piano go: into Other (default) or onto the Guitar and
    /// Piano outputs. Saved with the project, not automatable.
    #[id = "guitar_piano"]
    pub guitar_piano: EnumParam<GuitarPianoOutput>,
    /// How far past the audio a model may look (latency against compute and quality). Saved
    /// with the project, not automatable: a change reloads the separator and reports the new
    /// latency.
    // Saved sessions hold this id: its spelling stays.
    #[id = "lookahead"]
    pub look_ahead: EnumParam<LookAheadSetting>,
    /// Passes the input, delayed by the reported latency, and silences the stems.
    #[id = "bypass"]
    pub bypass: BoolParam,
    /// Chosen separator and device: saved with the project, not automatable.
    #[persist = "stemflow-state"]
    pub saved: SavedStateField,
    /// The editor window's size, saved with the project (`{"width": …, "height": …}`).
    #[persist = "editor-size"]
    pub editor_size: EditorSizeField,
}

impl StemflowParams {
    /// The controls of `stem`.
    pub fn stem(&self, stem: Stem) -> &StemParams {
        match stem {
            Stem::Vocals => &self.vocals,
            Stem::Drums => &self.drums,
            Stem::Bass => &self.bass,
            Stem::Other => &self.other,
            Stem::Guitar => &self.guitar,
            Stem::Piano => &self.piano,
        }
    }
}

impl Default for StemflowParams {
    fn default() -> Self {
        Self {
            vocals: StemParams::new(Stem::Vocals),
            drums: StemParams::new(Stem::Drums),
            bass: StemParams::new(Stem::Bass),
            other: StemParams::new(Stem::Other),
            guitar: StemParams::new(Stem::Guitar),
            piano: StemParams::new(Stem::Piano),
            guitar_piano: EnumParam::new("Guitar & Piano", GuitarPianoOutput::IntoOther)
                .non_automatable(),
            look_ahead: EnumParam::new("Look-ahead", LookAheadSetting::Full).non_automatable(),
            bypass: BoolParam::new("Bypass", false)
                .with_value_to_string(formatters::v2s_bool_bypass())
                .with_string_to_value(formatters::s2v_bool_bypass())
                .make_bypass(),
            saved: SavedStateField::default(),
            editor_size: EditorSizeField::default(),
        }
    }
}
