//! [`EditorSizeField`]: the editor's window size, saved with the project (a persisted field of
//! the parameters, so it lives beside them rather than inside the editor).

use std::sync::Arc;

use nice_plug::editor::dpi::LogicalSize;
use nice_plug_egui::EguiEditorState;
use parking_lot::RwLock;

use crate::editor::theme;

/// The persisted editor size (`#[persist = "editor-size"]`), in logical points.
///
/// nice-plug-egui's [`EguiEditorState`] is not serializable and its size cannot be set after
/// creation, so this field owns it: loading state replaces it with one of the saved size, and
/// saving reads the size the window has now (egui keeps it up to date on every resize).
#[derive(Debug)]
pub struct EditorSizeField {
    state: RwLock<Arc<EguiEditorState>>,
}

impl Default for EditorSizeField {
    fn default() -> Self {
        Self::with_size(theme::DEFAULT_SIZE.0, theme::DEFAULT_SIZE.1)
    }
}

impl EditorSizeField {
    fn with_size(width: f32, height: f32) -> Self {
        Self {
            state: RwLock::new(new_state(width, height)),
        }
    }

    /// The editor state a new window uses.
    pub fn egui_state(&self) -> Arc<EguiEditorState> {
        self.state.read().clone()
    }

    /// The current size in logical points.
    pub fn logical_size(&self) -> (f32, f32) {
        let size = self.state.read().logical_size();
        (size.width, size.height)
    }
}

fn new_state(width: f32, height: f32) -> Arc<EguiEditorState> {
    let clamp = |v: f32, min: f32, max: f32| {
        if v.is_finite() {
            v.clamp(min, max)
        } else {
            min
        }
    };
    EguiEditorState::from_size(
        LogicalSize::new(
            clamp(width, theme::MIN_SIZE.0, theme::MAX_SIZE.0),
            clamp(height, theme::MIN_SIZE.1, theme::MAX_SIZE.1),
        ),
        1.0,
    )
}

impl<'a> nice_plug::params::persist::PersistentField<'a, serde_json::Value> for EditorSizeField {
    fn set(&self, new_value: serde_json::Value) {
        let dimension = |key: &str| new_value.get(key).and_then(serde_json::Value::as_f64);
        match (dimension("width"), dimension("height")) {
            (Some(width), Some(height)) => {
                *self.state.write() = new_state(width as f32, height as f32);
            }
            _ => nice_plug::nice_log!(
                "Stemflow: ignoring a saved editor size without width and height"
            ),
        }
    }

    fn map<F, R>(&self, f: F) -> R
    where
        F: Fn(&serde_json::Value) -> R,
    {
        let (width, height) = self.logical_size();
        f(&serde_json::json!({ "width": width.round(), "height": height.round() }))
    }
}
