//! [`EditorApp`]: the nice-plug-egui app inside the window: it creates the backend when the
//! first window opens and runs one frame per repaint.

use std::sync::Arc;

use nice_plug::context::gui::GuiContext;
use nice_plug_egui::NiceEguiApp;

use super::frame::run_frame;
use super::model::EditorBackend;
use super::view_state::ViewState;
use super::{backend, model, theme};
use crate::params::StemflowParams;
use crate::shared::PluginShared;

/// The nice-plug-egui app: the backend, the parameters and the view state.
pub struct EditorApp {
    pub(super) shared: Arc<PluginShared>,
    pub(super) params: Arc<StemflowParams>,
    /// Created when the first window opens, so a plugin whose editor is never opened starts no
    /// discovery or scan threads.
    pub(super) backend: Option<backend::PluginBackend>,
    pub(super) view: ViewState,
    pub(super) gui: Option<GuiContext>,
}

impl NiceEguiApp for EditorApp {
    fn build(
        &mut self,
        egui_ctx: egui::Context,
        nice_gui_ctx: GuiContext,
        _frame: &mut nice_plug_egui::Frame,
    ) -> Result<(), nice_plug_egui::baseview::HandlerError> {
        theme::apply(&egui_ctx);
        self.gui = Some(nice_gui_ctx);
        self.view = ViewState::default();
        match &mut self.backend {
            // Reopened: look for models added meanwhile.
            Some(backend) => backend.perform(model::EditorAction::RescanModels),
            None => {
                self.backend = Some(backend::PluginBackend::new(
                    self.shared.clone(),
                    self.params.clone(),
                ))
            }
        }
        Ok(())
    }

    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut nice_plug_egui::Frame) {
        if let (Some(gui), Some(backend)) = (&self.gui, &mut self.backend) {
            run_frame(ui, backend, &mut self.view, &self.params, gui);
        }
    }
}
