//! [`SavedState`]: the persisted, non-automatable part of the plugin state, with a version
//! number so that old, newer or corrupt state loads with defaults and a [`StateNotice`] instead
//! of failing. [`SavedState::from_json`] is the loader the host's bytes reach (through
//! nice-plug's state JSON); the fuzz crate (`fuzz/`) drives it with arbitrary JSON.

use serde::{Deserialize, Serialize};
use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::SeparatorChoice;

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

#[cfg(test)]
mod tests {
    use super::*;
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
}
