//! The plugin's egui editor: model chooser, Device button, one strip per stem (fader, meter, mute,
//! solo) and a status line.
//!
//! - [`view::draw`] draws from a plain [`model::EditorModel`] and returns
//!   [`model::EditorAction`]s; parameters change through nice-plug's `ParamSetter`.
//! - [`model::EditorBackend`] supplies the model and carries out actions;
//!   [`backend::PluginBackend`] is the real one, tests use a fake.
//! - [`StemflowEditor`] (`window.rs`) wraps nice-plug-egui's editor so that the window size is
//!   saved with the project ([`crate::editor_size::EditorSizeField`]) and the audio thread knows when
//!   meters are wanted; [`EditorApp`] (`app.rs`) is the egui app inside it.

mod app;
pub mod backend;
mod device_button;
mod download_row;
mod frame;
pub mod model;
mod source;
mod status;
mod strips;
pub mod theme;
pub mod view;
pub mod view_state;
mod widgets;
mod window;

#[cfg(test)]
mod tests;

pub use app::EditorApp;
pub use frame::run_frame;
pub use window::{OpenGuard, StemflowEditor, StemflowEditorHandle};
