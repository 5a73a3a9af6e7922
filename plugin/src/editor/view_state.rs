//! [`ViewState`]: what the editor remembers between frames — the meters' ballistics and the
//! terms prompt of a model about to be downloaded.

use nice_plug::util;
use stemflow_engine::{Stem, NUM_STEMS};

/// How fast a meter falls, in dB per second.
const METER_FALL_DB_PER_S: f32 = 24.0;
/// How long a meter's peak line holds before it falls.
const PEAK_HOLD_S: f32 = 1.2;

/// What the editor remembers between frames: meter ballistics, and which catalogue model's
/// terms are shown for the user to accept.
#[derive(Debug, Clone, Default)]
pub struct ViewState {
    /// The catalogue model whose owner's terms are shown, waiting for Accept or Cancel.
    pub terms_prompt: Option<String>,
    /// Displayed meter level per stem, linear.
    meter_levels: [f32; NUM_STEMS],
    /// Peak-hold level per stem, linear, and how long it has been held.
    pub(super) peak_holds: [(f32, f32); NUM_STEMS],
}
impl ViewState {
    /// Merges this frame's peaks into the meters, falling at [`METER_FALL_DB_PER_S`].
    pub fn update_meters(&mut self, peaks: &[f32; NUM_STEMS], dt_s: f32) {
        let fall = util::db_to_gain(-METER_FALL_DB_PER_S * dt_s.clamp(0.0, 0.25));
        for i in 0..NUM_STEMS {
            let peak = if peaks[i].is_finite() {
                peaks[i].max(0.0)
            } else {
                0.0
            };
            self.meter_levels[i] = (self.meter_levels[i] * fall).max(peak);
            if self.meter_levels[i] < util::MINUS_INFINITY_GAIN {
                self.meter_levels[i] = 0.0;
            }
            let (hold, age) = &mut self.peak_holds[i];
            if peak >= *hold {
                *hold = peak;
                *age = 0.0;
            } else {
                *age += dt_s;
                if *age > PEAK_HOLD_S {
                    *hold *= fall;
                }
            }
        }
    }

    /// The displayed meter level of a stem (linear).
    pub fn meter_level(&self, stem: Stem) -> f32 {
        self.meter_levels[stem.index()]
    }

    /// Sets the meters directly (for previews and snapshot tests).
    pub fn set_meters(&mut self, levels: [f32; NUM_STEMS]) {
        self.meter_levels = levels;
        self.peak_holds = levels.map(|l| (l, 0.0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_fall_and_hold() {
        let mut view = ViewState::default();
        view.update_meters(&[1.0, 0.5, 0.0, 0.0, 0.0, f32::NAN], 0.0);
        assert_eq!(view.meter_level(Stem::Vocals), 1.0);
        assert_eq!(view.meter_level(Stem::Other), 0.0);
        view.update_meters(&[0.0; NUM_STEMS], 0.25);
        let fallen = util::gain_to_db(view.meter_level(Stem::Vocals));
        assert!((fallen + 6.0).abs() < 0.01, "{fallen}");
        // The hold stays for PEAK_HOLD_S.
        assert_eq!(view.peak_holds[0].0, 1.0);
    }
}
