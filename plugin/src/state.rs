//! The persisted, non-automatable part of the plugin state, with a version number so that old,
//! newer or corrupt state loads with defaults and a logged notice instead of failing.

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use stemflow_engine::runtime::devices::DeviceChoice;
use stemflow_engine::separator::SeparatorChoice;

/// The current version of [`SavedState`]'s format.
pub const SAVED_STATE_VERSION: u32 = 1;

/// The device choice when nothing is saved: pick the best available.
pub const AUTO_DEVICE_ID: &str = "auto";

/// What the plugin saves beyond its parameters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    /// Format version, [`SAVED_STATE_VERSION`].
    pub version: u32,
    /// Separator id ([`SeparatorChoice::id`]).
    pub separator: String,
    /// Device id (`auto`, `cpu`, `cuda:0`, …), used once neural models arrive.
    pub device: String,
    /// SHA-256 of the model file, so a model that was moved or renamed inside a models folder is
    /// found again. Absent for the built-in separator and in older saves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
}

impl Default for SavedState {
    fn default() -> Self {
        Self {
            version: SAVED_STATE_VERSION,
            separator: SeparatorChoice::Builtin.id(),
            device: AUTO_DEVICE_ID.to_owned(),
            model_sha256: None,
        }
    }
}

/// Why saved state was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateNotice {
    /// The state has a version this build does not know.
    UnknownVersion(u64),
    /// The state is not in the expected shape.
    Malformed(String),
    /// The saved separator does not exist in this build.
    UnknownSeparator(String),
    /// The saved device id is not one Stemflow knows, or the device is absent.
    UnknownDevice(String),
    /// The saved model could not be loaded; the built-in separator runs instead.
    ModelFailed(String),
    /// The saved model was not at its saved path but was found by its hash.
    ModelMoved {
        /// Where it was saved.
        from: String,
        /// Where it was found.
        to: String,
    },
}

impl std::fmt::Display for StateNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateNotice::UnknownVersion(v) => write!(
                f,
                "saved state has version {v}, this Stemflow reads version {SAVED_STATE_VERSION}; using defaults"
            ),
            StateNotice::Malformed(e) => write!(f, "saved state is corrupt ({e}); using defaults"),
            StateNotice::UnknownSeparator(s) => {
                write!(f, "saved separator '{s}' is not available; using the built-in separator")
            }
            StateNotice::UnknownDevice(d) => {
                write!(f, "saved device '{d}' is not available; using Auto")
            }
            StateNotice::ModelFailed(e) => {
                write!(f, "the saved model could not be loaded ({e}); using the built-in separator")
            }
            StateNotice::ModelMoved { from, to } => {
                write!(f, "the saved model is no longer at {from}; found the same file at {to}")
            }
        }
    }
}

impl SavedState {
    /// Interprets saved JSON. Anything unusable gives the defaults and the reason.
    pub fn from_json(value: &serde_json::Value) -> (Self, Option<StateNotice>) {
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        match version {
            Some(v) if v == SAVED_STATE_VERSION as u64 => {}
            Some(v) => return (Self::default(), Some(StateNotice::UnknownVersion(v))),
            None => {
                return (
                    Self::default(),
                    Some(StateNotice::Malformed("no version number".into())),
                )
            }
        }
        match serde_json::from_value::<SavedState>(value.clone()) {
            Ok(state) if SeparatorChoice::from_id(&state.separator).is_none() => {
                let notice = StateNotice::UnknownSeparator(state.separator.clone());
                (
                    Self {
                        separator: SeparatorChoice::Builtin.id(),
                        ..state
                    },
                    Some(notice),
                )
            }
            Ok(state) if state.device.parse::<DeviceChoice>().is_err() => {
                let notice = StateNotice::UnknownDevice(state.device.clone());
                (
                    Self {
                        device: AUTO_DEVICE_ID.to_owned(),
                        ..state
                    },
                    Some(notice),
                )
            }
            Ok(state) => (state, None),
            Err(e) => (Self::default(), Some(StateNotice::Malformed(e.to_string()))),
        }
    }

    /// The separator to run.
    pub fn separator_choice(&self) -> SeparatorChoice {
        SeparatorChoice::from_id(&self.separator).unwrap_or_default()
    }

    /// The device to run models on.
    pub fn device_choice(&self) -> DeviceChoice {
        self.device.parse().unwrap_or_default()
    }
}

/// The `#[persist]` field holding [`SavedState`]. It accepts any JSON so that nice-plug never
/// rejects it; [`SavedState::from_json`] decides what to keep.
#[derive(Debug, Default)]
pub struct SavedStateField {
    state: RwLock<SavedState>,
    /// The notice from the last load, shown by the editor and logged.
    last_notice: RwLock<Option<StateNotice>>,
}

impl SavedStateField {
    /// A copy of the current state. Not realtime-safe: locks and clones.
    pub fn get(&self) -> SavedState {
        self.state.read().clone()
    }

    /// Replaces the state. Not realtime-safe.
    pub fn set_state(&self, state: SavedState) {
        *self.state.write() = state;
    }

    /// The notice from the last load, if the saved state could not be used as it was.
    pub fn last_notice(&self) -> Option<StateNotice> {
        self.last_notice.read().clone()
    }

    /// Records a problem found after loading (a model that fails, a device that is gone).
    pub fn set_notice(&self, notice: StateNotice) {
        nice_plug::nice_log!("Stemflow: {notice}");
        *self.last_notice.write() = Some(notice);
    }
}

impl<'a> nice_plug::params::persist::PersistentField<'a, serde_json::Value> for SavedStateField {
    fn set(&self, new_value: serde_json::Value) {
        let (state, notice) = SavedState::from_json(&new_value);
        if let Some(notice) = &notice {
            nice_plug::nice_log!("Stemflow: {notice}");
        }
        *self.state.write() = state;
        *self.last_notice.write() = notice;
    }

    fn map<F, R>(&self, f: F) -> R
    where
        F: Fn(&serde_json::Value) -> R,
    {
        let value = serde_json::to_value(&*self.state.read()).unwrap_or_default();
        f(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn current_state_round_trips() {
        let state = SavedState {
            device: "cpu".into(),
            ..SavedState::default()
        };
        let (loaded, notice) = SavedState::from_json(&serde_json::to_value(&state).unwrap());
        assert_eq!(loaded, state);
        assert_eq!(notice, None);
    }

    #[test]
    fn unknown_version_and_garbage_give_defaults_with_a_notice() {
        let (loaded, notice) =
            SavedState::from_json(&json!({"version": 999, "separator": "x", "device": "y"}));
        assert_eq!(loaded, SavedState::default());
        assert_eq!(notice, Some(StateNotice::UnknownVersion(999)));

        for garbage in [
            json!("hello"),
            json!(null),
            json!({"version": 1, "device": 5}),
            json!([1, 2]),
        ] {
            let (loaded, notice) = SavedState::from_json(&garbage);
            assert_eq!(loaded, SavedState::default(), "{garbage}");
            assert!(
                matches!(notice, Some(StateNotice::Malformed(_))),
                "{garbage}"
            );
        }
    }

    #[test]
    fn unknown_separator_falls_back_to_builtin_and_keeps_device() {
        let (loaded, notice) =
            SavedState::from_json(&json!({"version": 1, "separator": "mdx:abc", "device": "cpu"}));
        assert_eq!(loaded.separator, "builtin");
        assert_eq!(loaded.device, "cpu");
        assert_eq!(
            notice,
            Some(StateNotice::UnknownSeparator("mdx:abc".into()))
        );
    }

    #[test]
    fn unknown_device_falls_back_to_auto_and_keeps_separator() {
        let (loaded, notice) = SavedState::from_json(
            &json!({"version": 1, "separator": "builtin", "device": "tpu:3"}),
        );
        assert_eq!(loaded.device, "auto");
        assert_eq!(loaded.device_choice(), DeviceChoice::Auto);
        assert_eq!(notice, Some(StateNotice::UnknownDevice("tpu:3".into())));
        let (loaded, notice) = SavedState::from_json(
            &json!({"version": 1, "separator": "builtin", "device": "cuda:1"}),
        );
        assert_eq!(loaded.device_choice().id(), "cuda:1");
        assert_eq!(notice, None);
    }
}
