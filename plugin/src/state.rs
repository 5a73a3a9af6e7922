//! The persisted, non-automatable part of the plugin state, with a version number so that old,
//! newer or corrupt state loads with defaults and a logged notice instead of failing — and so
//! that state written by a newer Stemflow survives a round trip through this one.

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use stemflow_engine::choice::SeparatorChoice;
use stemflow_engine::runtime::devices::DeviceChoice;

/// The current version of [`SavedState`]'s format.
pub const SAVED_STATE_VERSION: u32 = 1;

/// What the plugin saves beyond its parameters. In the saved JSON the separator and the device
/// are their ids (`"builtin"`, `"file:/path/model.onnx"`; `"auto"`, `"cuda:0"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    /// Format version, [`SAVED_STATE_VERSION`].
    pub version: u32,
    /// The separator.
    pub separator: SeparatorChoice,
    /// The device models run on.
    pub device: DeviceChoice,
    /// SHA-256 of the model file, so a model that was moved or renamed inside a models folder is
    /// found again. Absent for the built-in separator and in older saves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_sha256: Option<String>,
}

impl Default for SavedState {
    fn default() -> Self {
        Self {
            version: SAVED_STATE_VERSION,
            separator: SeparatorChoice::Builtin,
            device: DeviceChoice::Auto,
            model_sha256: None,
        }
    }
}

/// Why saved state was not used as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateNotice {
    /// The state was written by a newer Stemflow: defaults run, and the state is kept as it was
    /// and saved back unless the user changes the model or device here.
    NewerVersion(u64),
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
            StateNotice::NewerVersion(v) => write!(
                f,
                "saved state has version {v} from a newer Stemflow (this one reads version {SAVED_STATE_VERSION}); using defaults and keeping the saved state unless you change the model or device"
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
    /// Interprets saved JSON. Anything unusable gives the defaults (field by field where the
    /// rest is fine) and the reason.
    pub fn from_json(value: &serde_json::Value) -> (Self, Option<StateNotice>) {
        let version = value.get("version").and_then(serde_json::Value::as_u64);
        match version {
            Some(v) if v == SAVED_STATE_VERSION as u64 => {}
            Some(v) if v > SAVED_STATE_VERSION as u64 => {
                return (Self::default(), Some(StateNotice::NewerVersion(v)))
            }
            Some(v) => {
                return (
                    Self::default(),
                    Some(StateNotice::Malformed(format!("unknown version {v}"))),
                )
            }
            None => {
                return (
                    Self::default(),
                    Some(StateNotice::Malformed("no version number".into())),
                )
            }
        }
        let text = |key: &str| -> Result<String, StateNotice> {
            value
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| StateNotice::Malformed(format!("`{key}` is missing or not text")))
        };
        let (separator_id, device_id) = match (text("separator"), text("device")) {
            (Ok(separator), Ok(device)) => (separator, device),
            (Err(notice), _) | (_, Err(notice)) => return (Self::default(), Some(notice)),
        };
        let model_sha256 = value
            .get("model_sha256")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        let mut notice = None;
        let separator = SeparatorChoice::from_id(&separator_id).unwrap_or_else(|| {
            notice = Some(StateNotice::UnknownSeparator(separator_id.clone()));
            SeparatorChoice::Builtin
        });
        let device = device_id.parse::<DeviceChoice>().unwrap_or_else(|_| {
            notice = Some(StateNotice::UnknownDevice(device_id.clone()));
            DeviceChoice::Auto
        });
        let state = Self {
            version: SAVED_STATE_VERSION,
            separator,
            device,
            model_sha256,
        };
        (state, notice)
    }
}

/// The `#[persist]` field holding [`SavedState`]. It accepts any JSON so that nice-plug never
/// rejects it; [`SavedState::from_json`] decides what to keep.
#[derive(Debug, Default)]
pub struct SavedStateField {
    state: RwLock<SavedState>,
    /// State from a newer Stemflow, saved back as it was until the user changes something
    /// here, so opening a project in an older version never loses its choices.
    newer_state: RwLock<Option<serde_json::Value>>,
    /// The notice from the last load, shown by the editor and logged.
    last_notice: RwLock<Option<StateNotice>>,
}

impl SavedStateField {
    /// A copy of the current state. Not realtime-safe: locks and clones.
    pub fn get(&self) -> SavedState {
        self.state.read().clone()
    }

    /// Replaces the state: the user (or a moved model) changed it, so state kept from a newer
    /// Stemflow is no longer written back. Not realtime-safe.
    pub fn set_state(&self, state: SavedState) {
        *self.newer_state.write() = None;
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
        *self.newer_state.write() =
            matches!(notice, Some(StateNotice::NewerVersion(_))).then_some(new_value);
        *self.state.write() = state;
        *self.last_notice.write() = notice;
    }

    fn map<F, R>(&self, f: F) -> R
    where
        F: Fn(&serde_json::Value) -> R,
    {
        if let Some(newer) = &*self.newer_state.read() {
            return f(newer);
        }
        let value = serde_json::to_value(&*self.state.read()).unwrap_or_default();
        f(&value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nice_plug::params::persist::PersistentField;
    use serde_json::json;

    #[test]
    fn current_state_round_trips_with_ids_in_the_json() {
        let state = SavedState {
            separator: SeparatorChoice::Model("/m/x.onnx".into()),
            device: "cpu".parse().unwrap(),
            ..SavedState::default()
        };
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["separator"], "file:/m/x.onnx");
        assert_eq!(json["device"], "cpu");
        let (loaded, notice) = SavedState::from_json(&json);
        assert_eq!(loaded, state);
        assert_eq!(notice, None);
    }

    #[test]
    fn newer_and_garbage_state_give_defaults_with_a_notice() {
        let (loaded, notice) =
            SavedState::from_json(&json!({"version": 999, "separator": "x", "device": "y"}));
        assert_eq!(loaded, SavedState::default());
        assert_eq!(notice, Some(StateNotice::NewerVersion(999)));

        for garbage in [
            json!("hello"),
            json!(null),
            json!({"version": 1, "device": 5}),
            json!({"version": 0, "separator": "builtin", "device": "auto"}),
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
    fn state_from_a_newer_version_is_saved_back_until_the_user_changes_it() {
        let newer =
            json!({"version": 7, "separator": "hybrid:x+y", "device": "npu:0", "extra": [1]});
        let field = SavedStateField::default();
        field.set(newer.clone());
        assert_eq!(field.get(), SavedState::default());
        assert_eq!(field.map(|v| v.clone()), newer, "written back unchanged");
        field.set_state(SavedState {
            device: DeviceChoice::Device("cpu".parse().unwrap()),
            ..SavedState::default()
        });
        let saved = field.map(|v| v.clone());
        assert_eq!(saved["version"], 1);
        assert_eq!(saved["device"], "cpu");
        // Loading current state clears what was kept.
        field.set(newer.clone());
        field.set(json!({"version": 1, "separator": "builtin", "device": "auto"}));
        assert_eq!(field.map(|v| v["version"].clone()), 1);
    }

    #[test]
    fn unknown_separator_falls_back_to_builtin_and_keeps_device() {
        let (loaded, notice) =
            SavedState::from_json(&json!({"version": 1, "separator": "mdx:abc", "device": "cpu"}));
        assert_eq!(loaded.separator, SeparatorChoice::Builtin);
        assert_eq!(loaded.device.id(), "cpu");
        assert_eq!(
            notice,
            Some(StateNotice::UnknownSeparator("mdx:abc".into()))
        );
    }

    #[test]
    fn unknown_device_falls_back_to_auto_and_keeps_separator() {
        let (loaded, notice) = SavedState::from_json(
            &json!({"version": 1, "separator": "file:/m/a.onnx", "device": "tpu:3"}),
        );
        assert_eq!(loaded.device, DeviceChoice::Auto);
        assert_eq!(loaded.separator, SeparatorChoice::Model("/m/a.onnx".into()));
        assert_eq!(notice, Some(StateNotice::UnknownDevice("tpu:3".into())));
        let (loaded, notice) = SavedState::from_json(
            &json!({"version": 1, "separator": "builtin", "device": "cuda:1"}),
        );
        assert_eq!(loaded.device.id(), "cuda:1");
        assert_eq!(notice, None);
    }
}
