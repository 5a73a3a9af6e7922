//! The Device button: which device runs the model (and why, when it is not the one asked for),
//! a click to step to the next, and its details on hover.

use egui::{vec2, Button, RichText, Stroke, Ui};
use stemflow_engine::runtime::{DeviceChoice, DeviceInfo, DeviceStatus};

use super::model::{
    choice_short_name, device_short_name, resolve_choice, step_device, EditorAction, EditorModel,
};
use super::theme;
use super::widgets::{format_memory, warning_icon};

/// What the Device button says and how.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceLabel {
    /// The button text: the choice, and where it differs the device actually running.
    pub text: String,
    /// Whether the running device is a fallback from the choice.
    pub is_fallback: bool,
    /// Why it fell back.
    pub fallback_reason: Option<String>,
}

impl DeviceLabel {
    /// The label for a model snapshot. With the built-in separator the device actually running is
    /// always the CPU: the choice is kept for models and shown first.
    pub fn new(model: &EditorModel) -> Self {
        let choice = choice_short_name(model.device_choice);
        let stream = model.stream.as_ref();
        match stream.and_then(|s| s.active_device.as_ref().filter(|_| s.is_model)) {
            Some(active) => {
                let actual = device_short_name(active.actual);
                let expected = model
                    .devices
                    .as_deref()
                    .map(|devices| resolve_choice(active.requested, devices));
                let is_fallback = active.fallback_reason.is_some()
                    || expected.is_some_and(|expected| expected != active.actual);
                let text = match (model.device_choice, is_fallback) {
                    (_, true) => format!("Device: {actual} (fallback from {choice})"),
                    (DeviceChoice::Auto, false) => format!("Device: Auto ({actual})"),
                    (DeviceChoice::Device(id), false) if id == active.actual => {
                        format!("Device: {actual}")
                    }
                    // The choice changed and the switch is still being prepared.
                    (DeviceChoice::Device(_), false) => {
                        format!("Device: {actual} (switching to {choice}…)")
                    }
                };
                Self {
                    text,
                    is_fallback,
                    fallback_reason: active.fallback_reason.clone(),
                }
            }
            None => {
                let text = if stream.is_some() {
                    format!("Device: {choice} · built-in runs on CPU")
                } else {
                    format!("Device: {choice} (not running)")
                };
                Self {
                    text,
                    is_fallback: false,
                    fallback_reason: None,
                }
            }
        }
    }
}
pub(super) fn device_button(ui: &mut Ui, model: &EditorModel, actions: &mut Vec<EditorAction>) {
    let label = DeviceLabel::new(model);
    let colour = if label.is_fallback {
        theme::WARNING
    } else {
        theme::TEXT
    };
    let mut button =
        Button::new(RichText::new(&label.text).color(colour)).min_size(vec2(300.0, 0.0));
    if label.is_fallback {
        button = button.stroke(Stroke::new(1.0, theme::WARNING));
    }
    let response = ui
        .add_enabled(model.devices.is_some(), button)
        .on_hover_ui(|ui| device_details(ui, model, &label))
        .on_disabled_hover_text("Looking for devices…");
    if let Some(devices) = model.devices.as_deref() {
        let backwards =
            response.secondary_clicked() || (response.clicked() && ui.input(|i| i.modifiers.shift));
        if response.clicked() || response.secondary_clicked() {
            let next = step_device(model.device_choice, devices, !backwards);
            actions.push(EditorAction::SetDevice(next));
        }
    }
    if model.devices.is_none() {
        ui.label(RichText::new("looking for devices…").color(theme::TEXT_DIM));
        ui.ctx()
            .request_repaint_after(std::time::Duration::from_millis(100));
    } else if label.is_fallback {
        let note = match &model.stream.as_ref().and_then(|s| s.active_device.as_ref()) {
            Some(active) => format!(
                "{} unavailable, running on {}",
                choice_short_name(model.device_choice),
                device_short_name(active.actual)
            ),
            None => "fallback".to_owned(),
        };
        warning_icon(ui, theme::WARNING);
        ui.label(RichText::new(note).color(theme::WARNING));
    }
}

/// The Device button's hover: the choice, what runs, and the details of the devices involved.
fn device_details(ui: &mut Ui, model: &EditorModel, label: &DeviceLabel) {
    ui.set_max_width(420.0);
    let Some(devices) = model.devices.as_deref() else {
        ui.label("Looking for devices…");
        return;
    };
    let resolved = resolve_choice(model.device_choice, devices);
    match model.device_choice {
        DeviceChoice::Auto => ui.label(format!(
            "Choice: Auto, which resolves to {}",
            device_short_name(resolved)
        )),
        DeviceChoice::Device(id) => ui.label(format!("Choice: {}", device_short_name(id))),
    };
    let stream = model.stream.as_ref();
    let active = stream.and_then(|s| s.active_device.as_ref().filter(|_| s.is_model));
    match (stream, active) {
        (None, _) => {
            ui.label(
                RichText::new("Not running: the host has not activated the plugin")
                    .color(theme::TEXT_DIM),
            );
        }
        (Some(_), None) => {
            ui.label("Running: the built-in separator, on the CPU (DSP).");
            ui.label(
                RichText::new("The device choice is saved and applies when a model is loaded.")
                    .color(theme::TEXT_DIM),
            );
        }
        (Some(_), Some(active)) => {
            let running = format!("Running: {}", device_short_name(active.actual));
            if label.is_fallback {
                ui.label(RichText::new(format!("{running} (fallback)")).color(theme::WARNING));
                if let Some(reason) = &label.fallback_reason {
                    ui.label(RichText::new(format!("Reason: {reason}")).color(theme::WARNING));
                }
            } else {
                ui.label(running);
            }
        }
    }
    ui.separator();
    let mut shown = vec![resolved];
    if let Some(active) = active {
        if !shown.contains(&active.actual) {
            shown.push(active.actual);
        }
    }
    for id in shown {
        match devices.iter().find(|d| d.id == id) {
            Some(info) => device_info_grid(ui, info),
            None => {
                ui.label(
                    RichText::new(format!(
                        "{}: not found on this system",
                        device_short_name(id)
                    ))
                    .color(theme::WARNING),
                );
            }
        }
    }
    let unusable: Vec<&DeviceInfo> = devices.iter().filter(|d| !d.is_usable()).collect();
    if !unusable.is_empty() {
        ui.separator();
        ui.label(RichText::new("Skipped (not usable):").color(theme::TEXT_DIM));
        for info in unusable {
            if let DeviceStatus::Unusable(reason) = &info.status {
                ui.label(
                    RichText::new(format!("{}: {reason}", device_short_name(info.id)))
                        .color(theme::TEXT_DIM),
                );
            }
        }
    }
    ui.separator();
    ui.label(
        RichText::new("Click: next device · Shift-click or right-click: previous")
            .small()
            .color(theme::TEXT_DIM),
    );
}

fn device_info_grid(ui: &mut Ui, info: &DeviceInfo) {
    ui.label(RichText::new(format!("{} — {}", device_short_name(info.id), info.name)).strong());
    egui::Grid::new(("stemflow-device", info.id.to_string()))
        .num_columns(2)
        .spacing(vec2(12.0, 2.0))
        .show(ui, |ui| {
            let row = |ui: &mut Ui, key: &str, value: String| {
                ui.label(RichText::new(key).color(theme::TEXT_DIM));
                ui.label(value);
                ui.end_row();
            };
            row(
                ui,
                "Vendor",
                if info.vendor.is_empty() {
                    "unknown".to_owned()
                } else {
                    info.vendor.clone()
                },
            );
            row(
                ui,
                "Provider",
                info.provider.execution_provider_name().to_owned(),
            );
            row(
                ui,
                "Memory",
                info.memory_bytes
                    .map(format_memory)
                    .unwrap_or_else(|| "unknown".to_owned()),
            );
            row(
                ui,
                "Status",
                match &info.status {
                    DeviceStatus::Usable => "usable".to_owned(),
                    DeviceStatus::Unusable(reason) => format!("not usable: {reason}"),
                },
            );
        });
}
