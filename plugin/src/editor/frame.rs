//! [`run_frame`]: one frame of the editor, shared by the plugin's window and the tests.

use nice_plug::context::gui::GuiContext;

use super::model::EditorBackend;
use super::view;
use super::view_state::ViewState;
use crate::params::StemflowParams;

/// How often the editor repaints for the meters.
const METER_REFRESH: std::time::Duration = std::time::Duration::from_millis(33);

/// One frame of the editor: gathers the model, draws it and carries out the actions. Shared by
/// the plugin's editor and the tests.
pub fn run_frame(
    ui: &mut egui::Ui,
    backend: &mut dyn EditorBackend,
    view: &mut ViewState,
    params: &StemflowParams,
    gui: &GuiContext,
) {
    let model = backend.model();
    let dt_s = ui.input(|i| i.stable_dt);
    view.update_meters(&model.meter_peaks, dt_s);
    let setter = gui.param_setter();
    let actions = view::draw(ui, &model, view, params, &setter);
    for action in actions {
        backend.perform(action);
    }
    ui.ctx().request_repaint_after(METER_REFRESH);
}
