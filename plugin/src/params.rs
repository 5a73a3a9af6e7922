//! The plugin's parameters and its persisted (non-automatable) state.

use nice_plug::prelude::*;
use stemflow_engine::Stem;

use crate::editor::EditorSizeField;
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
            bypass: BoolParam::new("Bypass", false)
                .with_value_to_string(formatters::v2s_bool_bypass())
                .make_bypass(),
            saved: SavedStateField::default(),
            editor_size: EditorSizeField::default(),
        }
    }
}
