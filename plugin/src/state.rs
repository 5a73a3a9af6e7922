//! [`SavedStateField`]: the `#[persist]` field holding the plugin's [`SavedState`], so that
//! state written by a newer Stemflow survives a round trip through this one.

use parking_lot::RwLock;

use crate::saved_state::{SavedState, StateNotice};

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
    use stemflow_engine::runtime::DeviceChoice;
    use stemflow_engine::SeparatorChoice;

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
