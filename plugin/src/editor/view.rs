//! Drawing the editor from an [`EditorModel`]: a pure function of the model, the parameters and
//! a little view state, returning what the user asked for. Parameter edits go straight through
//! nice-plug's [`ParamSetter`] with begin/set/end gestures, so hosts record drags as automation
//! and automation moves the controls.
//!
//! This file lays the window out (header, source bar, strips, status line); the parts live in
//! `source.rs` (model and device), `strips.rs` (faders, meters, mute/solo), `status.rs` (the
//! status line and warnings) and `widgets.rs` (small shared pieces).

use egui::{Align, Frame, Layout, Margin, RichText, Stroke, Ui};
use nice_plug::prelude::ParamSetter;

use super::model::{EditorAction, EditorModel};
use super::source::source_controls;
use super::status::status;
use super::strips::strips;
use super::theme;
use super::view_state::ViewState;
use super::widgets::toggle_sized;
use crate::params::StemflowParams;

/// Draws the whole editor into `ui` and returns the actions the user took this frame.
pub fn draw(
    ui: &mut Ui,
    model: &EditorModel,
    view: &mut ViewState,
    params: &StemflowParams,
    setter: &ParamSetter,
) -> Vec<EditorAction> {
    let mut actions = Vec::new();
    egui::Panel::top("stemflow-header")
        .frame(bar_frame(10))
        .show(ui, |ui| {
            header(ui, params, setter);
            ui.add_space(6.0);
            source_controls(ui, model, view, params, setter, &mut actions);
        });
    egui::Panel::bottom("stemflow-status")
        .frame(bar_frame(8))
        .show(ui, |ui| status(ui, model));
    egui::CentralPanel::default()
        .frame(
            Frame::new()
                .fill(theme::BACKGROUND)
                .inner_margin(Margin::symmetric(16, 12)),
        )
        .show(ui, |ui| strips(ui, view, model, params, setter));
    actions
}
/// The frame of the header and the status bar: the bar colour, a hairline, `margin_y` pixels
/// above and below.
fn bar_frame(margin_y: i8) -> Frame {
    Frame::new()
        .fill(theme::BAR)
        .inner_margin(Margin::symmetric(16, margin_y))
        .stroke(Stroke::new(1.0, theme::LINE))
}

fn header(ui: &mut Ui, params: &StemflowParams, setter: &ParamSetter) {
    ui.horizontal(|ui| {
        ui.label(
            RichText::new("STEMFLOW")
                .heading()
                .strong()
                .color(theme::ACCENT),
        );
        ui.label(RichText::new("stem splitter").color(theme::TEXT_DIM));
        ui.with_layout(Layout::right_to_left(Align::Center), |ui| {
            toggle_sized(
                ui,
                &params.bypass,
                setter,
                "Bypass",
                "Bypass",
                theme::BYPASS_ON,
                0.0,
            )
            .on_hover_text("Pass the input through (delayed by the latency) and silence the stems");
        });
    });
}
