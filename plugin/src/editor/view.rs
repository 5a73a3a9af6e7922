//! Drawing the editor from an [`EditorModel`]: a pure function of the model, the parameters and
//! a little view state, returning what the user asked for. Parameter edits go straight through
//! nice-plug's [`ParamSetter`] with begin/set/end gestures, so hosts record drags as automation
//! and automation moves the controls.

use egui::{
    pos2, vec2, Align, Align2, Button, Color32, CornerRadius, Frame, Layout, Margin, Rect,
    RichText, Sense, Stroke, StrokeKind, Ui, WidgetInfo,
};
use nice_plug::prelude::{BoolParam, FloatParam, Param, ParamSetter};
use nice_plug::util;
use stemflow_engine::runtime::devices::{DeviceChoice, DeviceInfo, DeviceStatus};
use stemflow_engine::separator::SeparatorChoice;
use stemflow_engine::{Stem, NUM_STEMS};

use crate::params::GuitarPianoOutput;

use super::model::{
    choice_short_name, device_short_name, resolve_choice, step_device, EditorAction, EditorModel,
    ModelList, ModelTask, RuntimeStatus, StreamStatus,
};
use super::theme;
use crate::params::StemflowParams;

/// How fast a meter falls, in dB per second.
const METER_FALL_DB_PER_S: f32 = 24.0;
/// How long a meter's peak line holds before it falls.
const PEAK_HOLD_S: f32 = 1.2;
/// A real-time factor above this is shown as a warning: little headroom left.
const RTF_WARNING: f64 = 0.8;
/// Fader ticks in dB, top to bottom (the bottom of the travel is −∞).
const FADER_TICKS_DB: [f32; 7] = [12.0, 6.0, 0.0, -6.0, -12.0, -24.0, -48.0];
/// Dragging with Shift (or Ctrl/Cmd) moves the fader this much slower.
const FINE_DRAG_FACTOR: f32 = 0.2;

/// Display name of the built-in separator.
pub const BUILTIN_NAME: &str = "Built-in (DSP)";

/// What the editor remembers between frames: meter ballistics.
#[derive(Debug, Clone, Default)]
pub struct ViewState {
    /// Displayed meter level per stem, linear.
    meter_levels: [f32; NUM_STEMS],
    /// Peak-hold level per stem, linear, and how long it has been held.
    peak_holds: [(f32, f32); NUM_STEMS],
}

impl ViewState {
    /// Merges this frame's peaks into the meters, falling at [`METER_FALL_DB_PER_S`].
    pub fn update_meters(&mut self, peaks: &[f32; NUM_STEMS], dt_s: f32) {
        let fall = util::db_to_gain(-METER_FALL_DB_PER_S * dt_s.clamp(0.0, 0.25));
        for i in 0..NUM_STEMS {
            let peak = if peaks[i].is_finite() {
                peaks[i].max(0.0)
            } else {
                0.0
            };
            self.meter_levels[i] = (self.meter_levels[i] * fall).max(peak);
            if self.meter_levels[i] < util::MINUS_INFINITY_GAIN {
                self.meter_levels[i] = 0.0;
            }
            let (hold, age) = &mut self.peak_holds[i];
            if peak >= *hold {
                *hold = peak;
                *age = 0.0;
            } else {
                *age += dt_s;
                if *age > PEAK_HOLD_S {
                    *hold *= fall;
                }
            }
        }
    }

    /// The displayed meter level of a stem (linear).
    pub fn meter_level(&self, stem: Stem) -> f32 {
        self.meter_levels[stem.index()]
    }

    /// Sets the meters directly (for previews and snapshot tests).
    pub fn set_meters(&mut self, levels: [f32; NUM_STEMS]) {
        self.meter_levels = levels;
        self.peak_holds = levels.map(|l| (l, 0.0));
    }
}

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
        .frame(
            Frame::new()
                .fill(theme::BAR)
                .inner_margin(Margin::symmetric(16, 10))
                .stroke(Stroke::new(1.0, theme::LINE)),
        )
        .show(ui, |ui| {
            header(ui, params, setter);
            ui.add_space(6.0);
            source_controls(ui, model, params, setter, &mut actions);
        });
    egui::Panel::bottom("stemflow-status")
        .frame(
            Frame::new()
                .fill(theme::BAR)
                .inner_margin(Margin::symmetric(16, 8))
                .stroke(Stroke::new(1.0, theme::LINE)),
        )
        .show(ui, |ui| status(ui, model));
    egui::CentralPanel::default()
        .frame(
            Frame::new()
                .fill(theme::BACKGROUND)
                .inner_margin(Margin::symmetric(16, 12)),
        )
        .show(ui, |ui| strips(ui, view, params, setter));
    actions
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
            toggle(
                ui,
                &params.bypass,
                setter,
                "Bypass",
                "Bypass",
                theme::BYPASS_ON,
            )
            .on_hover_text("Pass the input through (delayed by the latency) and silence the stems");
        });
    });
}

/// The model chooser, the Device button and, for six-stem models, where guitar and piano go.
fn source_controls(
    ui: &mut Ui,
    model: &EditorModel,
    params: &StemflowParams,
    setter: &ParamSetter,
    actions: &mut Vec<EditorAction>,
) {
    egui::Grid::new("stemflow-source")
        .num_columns(2)
        .spacing(vec2(10.0, 6.0))
        .show(ui, |ui| {
            ui.label(RichText::new("MODEL").small().color(theme::TEXT_DIM));
            ui.horizontal(|ui| model_chooser(ui, model, actions));
            ui.end_row();
            ui.label(RichText::new("DEVICE").small().color(theme::TEXT_DIM));
            ui.horizontal(|ui| device_button(ui, model, actions));
            ui.end_row();
            let own_outputs = params.guitar_piano.value() == GuitarPianoOutput::OwnOutputs;
            if own_outputs || model_has_guitar_or_piano(model) {
                ui.label(
                    RichText::new("GUITAR & PIANO")
                        .small()
                        .color(theme::TEXT_DIM),
                );
                ui.horizontal(|ui| guitar_piano_button(ui, params, setter));
                ui.end_row();
            }
        });
}

/// Whether the chosen separator is a model with guitar or piano stems (a six-stem model).
fn model_has_guitar_or_piano(model: &EditorModel) -> bool {
    let (SeparatorChoice::Model(path), ModelList::Ready(models)) =
        (&model.separator, &model.models)
    else {
        return false;
    };
    models.iter().any(|info| {
        &info.path == path
            && info
                .stems
                .iter()
                .any(|stem| Stem::from_name(stem).is_some_and(Stem::is_extra))
    })
}

/// Switches the "Guitar & Piano" parameter between Into Other and Own Outputs.
fn guitar_piano_button(ui: &mut Ui, params: &StemflowParams, setter: &ParamSetter) {
    let param = &params.guitar_piano;
    let current = param.value();
    let text = match current {
        GuitarPianoOutput::IntoOther => "Into Other",
        GuitarPianoOutput::OwnOutputs => "Own outputs (Guitar, Piano)",
    };
    let response = ui
        .add(Button::new(text).min_size(vec2(120.0, 22.0)))
        .on_hover_text(
            "Where a six-stem model's guitar and piano go: into Other, or onto their own \
             Guitar and Piano outputs (stem outputs 5 and 6). Click to switch.",
        );
    let label = format!("Guitar & Piano: {text}");
    response.widget_info(|| WidgetInfo::labeled(egui::Role::Button, true, &label));
    if response.clicked() {
        let next = match current {
            GuitarPianoOutput::IntoOther => GuitarPianoOutput::OwnOutputs,
            GuitarPianoOutput::OwnOutputs => GuitarPianoOutput::IntoOther,
        };
        setter.begin_set_parameter(param);
        setter.set_parameter(param, next);
        setter.end_set_parameter(param);
    }
}

/// The stems with a strip, in output order: guitar and piano only when they have their own
/// outputs.
pub fn visible_stems(params: &StemflowParams) -> &'static [Stem] {
    match params.guitar_piano.value() {
        GuitarPianoOutput::IntoOther => &Stem::FOUR,
        GuitarPianoOutput::OwnOutputs => &Stem::OUTPUT_ORDER,
    }
}

// ---------------------------------------------------------------------------------------------
// Model chooser

fn model_chooser(ui: &mut Ui, model: &EditorModel, actions: &mut Vec<EditorAction>) {
    let models = match &model.models {
        ModelList::Ready(models) => Some(models.as_slice()),
        ModelList::Scanning => None,
    };
    let selected_text = separator_label(&model.separator, models.unwrap_or(&[]));
    egui::ComboBox::from_id_salt("stemflow-model")
        .width(300.0)
        .selected_text(selected_text)
        .show_ui(ui, |ui| {
            let is_builtin = model.separator == SeparatorChoice::Builtin;
            if ui
                .selectable_label(is_builtin, BUILTIN_NAME)
                .on_hover_text(
                    "Vocals, drums, bass, other · DSP on the CPU, no model file, low latency",
                )
                .clicked()
                && !is_builtin
            {
                actions.push(EditorAction::ChooseSeparator(SeparatorChoice::Builtin));
            }
            match models {
                None => {
                    ui.label(RichText::new("Scanning the models folder…").color(theme::TEXT_DIM));
                }
                Some([]) => {
                    ui.label(
                        RichText::new("No models found: put .onnx files in the models folder")
                            .color(theme::TEXT_DIM),
                    );
                }
                Some(models) => {
                    for info in models {
                        let choice = SeparatorChoice::Model(info.path.clone());
                        let is_selected = model.separator == choice;
                        let text = format!("{}   {}", info.name, model_summary(info));
                        let response = ui.add_enabled(
                            info.error.is_none(),
                            Button::selectable(is_selected, text),
                        );
                        let response = match &info.error {
                            Some(error) => response.on_disabled_hover_text(format!(
                                "{}\nCannot be used: {error}",
                                info.path.display()
                            )),
                            None => response.on_hover_text(info.path.display().to_string()),
                        };
                        if response.clicked() && !is_selected {
                            actions.push(EditorAction::ChooseSeparator(choice));
                        }
                    }
                }
            }
        })
        .response
        .on_hover_text("The separator: the built-in DSP or a model from the models folder");

    let folder_hover = match &model.models_folder {
        Some(folder) => format!("Open {} (created if missing)", folder.display()),
        None => "No user data folder is known on this system".to_owned(),
    };
    if ui
        .add_enabled(model.models_folder.is_some(), Button::new("Models folder…"))
        .on_hover_text(folder_hover)
        .clicked()
    {
        actions.push(EditorAction::OpenModelsFolder);
    }
    let is_scanning = model.models == ModelList::Scanning;
    if ui
        .add_enabled(!is_scanning, Button::new("Rescan"))
        .on_hover_text("Look for new model files")
        .clicked()
    {
        actions.push(EditorAction::RescanModels);
    }
    match &model.model_task {
        ModelTask::Idle => {}
        ModelTask::Loading(name) => {
            ui.label(RichText::new(format!("Loading {name}…")).color(theme::TEXT_DIM));
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(100));
        }
        ModelTask::Failed { name, .. } => {
            warning_icon(ui, theme::ERROR);
            ui.label(RichText::new(format!("{name} failed to load")).color(theme::ERROR));
        }
    }
}

/// "HTDemucs · vocals, drums, bass, other" (what is known of a model).
fn model_summary(info: &super::backend::models::ModelInfo) -> String {
    let family = info.family.map(|f| f.to_string());
    let stems = (!info.stems.is_empty()).then(|| info.stems.join(", "));
    match (family, stems) {
        (Some(f), Some(s)) => format!("{f} · {s}"),
        (Some(f), None) => f,
        (None, Some(s)) => s,
        (None, None) => String::new(),
    }
}

/// The name of the saved separator, looked up among the scanned models.
fn separator_label(
    separator: &SeparatorChoice,
    models: &[super::backend::models::ModelInfo],
) -> String {
    match separator {
        SeparatorChoice::Builtin => BUILTIN_NAME.to_owned(),
        SeparatorChoice::Model(path) => match models.iter().find(|m| &m.path == path) {
            Some(info) => match info.family {
                Some(family) => format!("{} ({family})", info.name),
                None => info.name.clone(),
            },
            None => path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Device button

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

fn device_button(ui: &mut Ui, model: &EditorModel, actions: &mut Vec<EditorAction>) {
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

/// A small filled warning triangle with an exclamation mark (the default fonts have no ⚠).
fn warning_icon(ui: &mut Ui, colour: Color32) {
    let (rect, _) = ui.allocate_exact_size(vec2(14.0, 14.0), Sense::hover());
    let centre = rect.center();
    let points = vec![
        pos2(centre.x, rect.top() + 1.0),
        pos2(rect.right() - 0.5, rect.bottom() - 1.0),
        pos2(rect.left() + 0.5, rect.bottom() - 1.0),
    ];
    let painter = ui.painter();
    painter.add(egui::Shape::convex_polygon(points, colour, Stroke::NONE));
    painter.text(
        pos2(centre.x, centre.y + 1.5),
        Align2::CENTER_CENTER,
        "!",
        egui::FontId::proportional(10.0),
        theme::BACKGROUND,
    );
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

/// "+1.5 dB", "-6.0 dB", "-∞ dB".
pub fn gain_readout(gain: f32) -> String {
    if gain < util::MINUS_INFINITY_GAIN {
        "-∞ dB".to_owned()
    } else {
        format!("{:+.1} dB", util::gain_to_db(gain))
    }
}

/// "24.0 GB", "512 MB".
pub fn format_memory(bytes: u64) -> String {
    const GB: f64 = 1024.0 * 1024.0 * 1024.0;
    const MB: f64 = 1024.0 * 1024.0;
    let bytes = bytes as f64;
    if bytes >= GB {
        format!("{:.1} GB", bytes / GB)
    } else {
        format!("{:.0} MB", bytes / MB)
    }
}

// ---------------------------------------------------------------------------------------------
// Stem strips

fn strips(ui: &mut Ui, view: &ViewState, params: &StemflowParams, setter: &ParamSetter) {
    let stems = visible_stems(params);
    let gap = if stems.len() > 4 { 8.0 } else { 12.0 };
    let available = ui.available_size();
    let count = stems.len() as f32;
    let width = ((available.x - gap * (count - 1.0)) / count).max(96.0);
    // Warnings in the status bar take room from the strips; the faders shrink to fit.
    let height = available.y.max(160.0);
    ui.horizontal_top(|ui| {
        ui.spacing_mut().item_spacing.x = gap;
        for &stem in stems {
            ui.allocate_ui_with_layout(
                vec2(width, height),
                Layout::top_down(Align::Center),
                |ui| {
                    strip(ui, stem, vec2(width, height), view, params, setter);
                },
            );
        }
    });
}

fn strip(
    ui: &mut Ui,
    stem: Stem,
    size: egui::Vec2,
    view: &ViewState,
    params: &StemflowParams,
    setter: &ParamSetter,
) {
    let colour = theme::stem_colour(stem);
    let stem_params = params.stem(stem);
    Frame::new()
        .fill(theme::STRIP)
        .stroke(Stroke::new(1.0, theme::LINE))
        .corner_radius(CornerRadius::same(8))
        .inner_margin(Margin::symmetric(10, 10))
        .show(ui, |ui| {
            let inner_width = size.x - 22.0;
            ui.set_width(inner_width);
            ui.set_min_height(size.y - 22.0);
            // Title: a colour bar and the name.
            let (title_rect, _) = ui.allocate_exact_size(vec2(inner_width, 22.0), Sense::hover());
            let painter = ui.painter();
            painter.rect_filled(
                Rect::from_min_size(title_rect.left_top() + vec2(0.0, 3.0), vec2(4.0, 16.0)),
                CornerRadius::same(2),
                colour,
            );
            painter.text(
                title_rect.left_center() + vec2(12.0, 0.0),
                Align2::LEFT_CENTER,
                stem.display_name().to_uppercase(),
                egui::FontId::proportional(13.0),
                theme::TEXT,
            );

            let buttons_height = 26.0;
            let readout_height = 22.0;
            let fader_height =
                (ui.available_height() - buttons_height - readout_height - 18.0).max(60.0);
            let (area, _) = ui.allocate_exact_size(vec2(inner_width, fader_height), Sense::hover());
            fader_and_meter(
                ui,
                area,
                stem,
                &stem_params.gain,
                view.meter_level(stem),
                view.peak_holds[stem.index()].0,
                setter,
            );

            ui.label(
                RichText::new(gain_readout(stem_params.gain.value()))
                    .monospace()
                    .color(theme::TEXT),
            );

            ui.horizontal(|ui| {
                let button_width = (inner_width - ui.spacing().item_spacing.x) / 2.0;
                ui.set_width(inner_width);
                let name = stem.display_name();
                toggle_sized(
                    ui,
                    &stem_params.mute,
                    setter,
                    "M",
                    &format!("Mute {name}"),
                    theme::MUTE_ON,
                    button_width,
                )
                .on_hover_text(format!("Mute {name}"));
                toggle_sized(
                    ui,
                    &stem_params.solo,
                    setter,
                    "S",
                    &format!("Solo {name}"),
                    theme::SOLO_ON,
                    button_width,
                )
                .on_hover_text(format!("Solo {name}: only soloed stems play"));
            });
        });
}

/// The meter (left), the fader (middle) and the dB scale (right) in `area`.
fn fader_and_meter(
    ui: &mut Ui,
    area: Rect,
    stem: Stem,
    gain: &FloatParam,
    meter_level: f32,
    peak_hold: f32,
    setter: &ParamSetter,
) {
    let colour = theme::stem_colour(stem);
    let travel = Rect::from_min_max(
        pos2(area.left(), area.top() + 8.0),
        pos2(area.right(), area.bottom() - 8.0),
    );
    let y_of = |normalized: f32| travel.bottom() - normalized.clamp(0.0, 1.0) * travel.height();
    let centre_x = area.center().x;
    let meter_x = centre_x - 34.0;
    let scale_x = centre_x + 18.0;

    // Scale: ticks on both sides of the fader track and labels, shared by the meter and the
    // fader (same gain mapping).
    let painter = ui.painter().clone();
    let mut last_label_y = f32::NEG_INFINITY;
    for db in FADER_TICKS_DB {
        let y = y_of(gain.preview_normalized(util::db_to_gain(db)));
        // On a short fader, labels that would touch the one above are left out (0 dB never is).
        if y - last_label_y < 11.0 && db != 0.0 {
            continue;
        }
        last_label_y = y;
        let tick = Stroke::new(
            1.0,
            if db == 0.0 {
                theme::TEXT_DIM
            } else {
                theme::LINE
            },
        );
        painter.line_segment([pos2(centre_x - 13.0, y), pos2(centre_x - 6.0, y)], tick);
        painter.line_segment([pos2(centre_x + 6.0, y), pos2(centre_x + 13.0, y)], tick);
        let text = if db > 0.0 {
            format!("+{db:.0}")
        } else {
            format!("{db:.0}")
        };
        painter.text(
            pos2(scale_x + 4.0, y),
            Align2::LEFT_CENTER,
            text,
            theme::small_font(),
            if db == 0.0 {
                theme::TEXT
            } else {
                theme::TEXT_DIM
            },
        );
    }
    painter.text(
        pos2(scale_x + 4.0, travel.bottom()),
        Align2::LEFT_CENTER,
        "-∞",
        theme::small_font(),
        theme::TEXT_DIM,
    );

    // Meter.
    let meter_rect = Rect::from_min_max(
        pos2(meter_x - 4.0, travel.top()),
        pos2(meter_x + 4.0, travel.bottom()),
    );
    painter.rect_filled(meter_rect, CornerRadius::same(2), theme::TRACK);
    let level_y = y_of(gain.preview_normalized(meter_level.min(gain.preview_plain(1.0))));
    if meter_level > util::MINUS_INFINITY_GAIN {
        let warn_y = y_of(gain.preview_normalized(util::db_to_gain(-6.0)));
        let clip_y = y_of(gain.preview_normalized(1.0));
        let segments = [
            (travel.bottom(), warn_y, colour),
            (warn_y, clip_y, theme::WARNING),
            (clip_y, travel.top(), theme::CLIP),
        ];
        for (bottom, top, segment_colour) in segments {
            let top = top.max(level_y);
            if top < bottom {
                painter.rect_filled(
                    Rect::from_min_max(
                        pos2(meter_rect.left(), top),
                        pos2(meter_rect.right(), bottom),
                    ),
                    CornerRadius::ZERO,
                    segment_colour,
                );
            }
        }
    }
    if peak_hold > util::MINUS_INFINITY_GAIN {
        let y = y_of(gain.preview_normalized(peak_hold.min(gain.preview_plain(1.0))));
        painter.line_segment(
            [pos2(meter_rect.left(), y), pos2(meter_rect.right(), y)],
            Stroke::new(1.5, theme::TEXT),
        );
    }

    // Fader.
    let label = format!("{} gain", stem.display_name());
    let fader_rect = Rect::from_min_max(
        pos2(centre_x - 18.0, area.top()),
        pos2(centre_x + 18.0, area.bottom()),
    );
    let id = ui.make_persistent_id(("stemflow-fader", stem.index()));
    let response = ui.interact(fader_rect, id, Sense::click_and_drag());
    fader_interaction(ui, &response, gain, setter, travel.height());
    let normalized = gain.unmodulated_normalized_value();
    let value_db = util::gain_to_db(gain.value()) as f64;
    response.widget_info(|| WidgetInfo::slider(true, value_db, &label));
    ui.ctx().accesskit_node_builder(id, |node| {
        node.set_min_numeric_value(util::MINUS_INFINITY_DB as f64);
        node.set_max_numeric_value(crate::params::MAX_STEM_GAIN_DB as f64);
        node.add_action(egui::accesskit::Action::SetValue);
        node.add_action(egui::accesskit::Action::Increment);
        node.add_action(egui::accesskit::Action::Decrement);
    });

    let track = Rect::from_center_size(
        pos2(centre_x, travel.center().y),
        vec2(4.0, travel.height()),
    );
    painter.rect_filled(track, CornerRadius::same(2), theme::TRACK);
    let cap_y = y_of(normalized);
    painter.rect_filled(
        Rect::from_min_max(pos2(track.left(), cap_y), track.right_bottom()),
        CornerRadius::same(2),
        colour.gamma_multiply(0.55),
    );
    let cap = Rect::from_center_size(pos2(centre_x, cap_y), vec2(30.0, 14.0));
    let is_active = response.hovered() || response.dragged() || response.has_focus();
    painter.rect_filled(
        cap,
        CornerRadius::same(3),
        if is_active {
            Color32::from_rgb(0xf2, 0xf4, 0xf7)
        } else {
            Color32::from_rgb(0xc9, 0xce, 0xd6)
        },
    );
    painter.rect_stroke(
        cap,
        CornerRadius::same(3),
        Stroke::new(1.0, theme::TRACK),
        StrokeKind::Inside,
    );
    painter.line_segment(
        [
            pos2(cap.left() + 5.0, cap_y),
            pos2(cap.right() - 5.0, cap_y),
        ],
        Stroke::new(2.0, colour),
    );
    if response.has_focus() {
        painter.rect_stroke(
            cap.expand(2.0),
            CornerRadius::same(4),
            Stroke::new(1.0, theme::ACCENT),
            StrokeKind::Outside,
        );
    }
    response.on_hover_text(format!(
        "{label}: drag to change (Shift: fine), double-click for 0 dB"
    ));
}

/// Turns drags, double-clicks, keys and accessibility requests on a fader into parameter
/// gestures: one begin … set … end per drag, so the host records it as automation.
fn fader_interaction(
    ui: &Ui,
    response: &egui::Response,
    gain: &FloatParam,
    setter: &ParamSetter,
    travel_height: f32,
) {
    let id = response.id;
    let set_once = |normalized: f32| {
        setter.begin_set_parameter(gain);
        setter.set_parameter_normalized(gain, normalized.clamp(0.0, 1.0));
        setter.end_set_parameter(gain);
    };
    if response.drag_started() {
        setter.begin_set_parameter(gain);
        ui.data_mut(|d| d.insert_temp(id, gain.unmodulated_normalized_value()));
    }
    if response.dragged() {
        let fine = ui.input(|i| i.modifiers.shift || i.modifiers.command);
        let factor = if fine { FINE_DRAG_FACTOR } else { 1.0 };
        let delta = -response.drag_delta().y / travel_height.max(1.0) * factor;
        if delta != 0.0 {
            let start = ui
                .data(|d| d.get_temp::<f32>(id))
                .unwrap_or_else(|| gain.unmodulated_normalized_value());
            let normalized = (start + delta).clamp(0.0, 1.0);
            ui.data_mut(|d| d.insert_temp(id, normalized));
            setter.set_parameter_normalized(gain, normalized);
        }
    }
    if response.drag_stopped() {
        setter.end_set_parameter(gain);
        ui.data_mut(|d| d.remove::<f32>(id));
    }
    if response.double_clicked() || (response.clicked() && ui.input(|i| i.modifiers.command)) {
        set_once(gain.default_normalized_value());
    }
    if response.has_focus() {
        let step = ui.input(|i| {
            let fine = i.modifiers.shift;
            let size = if fine { 0.002 } else { 0.01 };
            (i.key_pressed(egui::Key::ArrowUp) as i32 - i.key_pressed(egui::Key::ArrowDown) as i32)
                as f32
                * size
        });
        if step != 0.0 {
            set_once(gain.unmodulated_normalized_value() + step);
        }
    }
    let (set_value, increments) = ui.input(|i| {
        use egui::accesskit::{Action, ActionData};
        let set_value = i
            .accesskit_action_requests(id, Action::SetValue)
            .filter_map(|r| match r.data {
                Some(ActionData::NumericValue(db)) => Some(db),
                _ => None,
            })
            .last();
        let increments = i.num_accesskit_action_requests(id, Action::Increment) as i32
            - i.num_accesskit_action_requests(id, Action::Decrement) as i32;
        (set_value, increments)
    });
    if let Some(db) = set_value {
        let db = db as f32;
        let plain = if db <= util::MINUS_INFINITY_DB {
            0.0
        } else {
            util::db_to_gain(db)
        };
        set_once(gain.preview_normalized(plain));
    }
    if increments != 0 {
        set_once(gain.unmodulated_normalized_value() + increments as f32 * 0.01);
    }
}

/// A toggle button bound to a [`BoolParam`]: one gesture per click.
fn toggle(
    ui: &mut Ui,
    param: &BoolParam,
    setter: &ParamSetter,
    text: &str,
    accessible_label: &str,
    on_colour: Color32,
) -> egui::Response {
    toggle_sized(ui, param, setter, text, accessible_label, on_colour, 0.0)
}

fn toggle_sized(
    ui: &mut Ui,
    param: &BoolParam,
    setter: &ParamSetter,
    text: &str,
    accessible_label: &str,
    on_colour: Color32,
    width: f32,
) -> egui::Response {
    let is_on = param.value();
    let (fill, text_colour) = if is_on {
        (on_colour, Color32::from_rgb(0x15, 0x17, 0x1c))
    } else {
        (Color32::from_rgb(0x2a, 0x2f, 0x39), theme::TEXT_DIM)
    };
    let response = ui.add(
        Button::new(RichText::new(text).strong().color(text_colour))
            .fill(fill)
            .min_size(vec2(width, 24.0)),
    );
    let label = accessible_label.to_owned();
    response.widget_info(|| WidgetInfo::selected(egui::Role::Button, true, is_on, &label));
    if response.clicked() {
        setter.begin_set_parameter(param);
        setter.set_parameter(param, !is_on);
        setter.end_set_parameter(param);
    }
    response
}

// ---------------------------------------------------------------------------------------------
// Status line

/// The warnings shown under the status line, most important first.
pub fn warnings(model: &EditorModel) -> Vec<(String, Color32)> {
    let mut warnings = Vec::new();
    if let Some(stream) = &model.stream {
        if let Some(error) = &stream.worker_error {
            warnings.push((
                format!(
                    "The separator stopped ({error}); the stems fall back to the dry mix on Other"
                ),
                theme::ERROR,
            ));
        }
        if let Some(active) = stream.active_device.as_ref().filter(|_| stream.is_model) {
            if let Some(reason) = &active.fallback_reason {
                warnings.push((
                    format!(
                        "Device fallback: {} unavailable, running on {} ({reason})",
                        choice_short_name(active.requested),
                        device_short_name(active.actual)
                    ),
                    theme::WARNING,
                ));
            }
        }
        if let Some(warning) = &stream.device_warning {
            warnings.push((
                format!("Device switch failed, the previous device keeps running: {warning}"),
                theme::WARNING,
            ));
        }
    }
    if let ModelTask::Failed { name, error } = &model.model_task {
        warnings.push((
            format!(
                "Model {name} could not be loaded, the current separator keeps playing: {error}"
            ),
            theme::ERROR,
        ));
    }
    if let RuntimeStatus::Missing(reason) = &model.runtime {
        warnings.push((format!("Runtime missing: {reason}"), theme::WARNING));
    }
    for notice in &model.notices {
        warnings.push((notice.clone(), theme::WARNING));
    }
    warnings
}

fn status(ui: &mut Ui, model: &EditorModel) {
    ui.horizontal_wrapped(|ui| {
        ui.spacing_mut().item_spacing.x = 6.0;
        match &model.stream {
            Some(stream) => stream_status(ui, stream),
            None => {
                ui.label(
                    RichText::new("Not processing: the host has not activated the plugin")
                        .color(theme::TEXT_DIM),
                );
            }
        }
        separator_dot(ui);
        match &model.runtime {
            RuntimeStatus::Loading => {
                ui.label(RichText::new("ONNX Runtime: checking…").color(theme::TEXT_DIM));
            }
            RuntimeStatus::Loaded(version) => {
                key_value(ui, "ONNX Runtime", version.clone(), theme::TEXT);
            }
            RuntimeStatus::Missing(_) => {
                key_value(ui, "ONNX Runtime", "missing".to_owned(), theme::WARNING);
            }
        }
    });
    for (text, colour) in warnings(model) {
        // Long messages (the runtime's fix hint) are cut to one line; the hover shows them whole.
        let short = first_sentence(&text);
        ui.horizontal(|ui| {
            warning_icon(ui, colour);
            let response = ui.add(egui::Label::new(RichText::new(short).color(colour)).truncate());
            if short.len() < text.len() {
                response.on_hover_text(text.as_str());
            }
        });
    }
}

fn stream_status(ui: &mut Ui, stream: &StreamStatus) {
    let latency_ms = stream.latency_samples as f64 * 1000.0 / stream.sample_rate_hz.max(1.0) as f64;
    key_value(
        ui,
        "Latency",
        format!(
            "{latency_ms:.1} ms ({} samples @ {:.1} kHz)",
            stream.latency_samples,
            stream.sample_rate_hz / 1000.0
        ),
        theme::TEXT,
    );
    separator_dot(ui);
    let (rtf_text, rtf_colour) = match stream.real_time_factor {
        Some(rtf) if rtf > RTF_WARNING => (format!("{rtf:.2}"), theme::WARNING),
        Some(rtf) => (format!("{rtf:.2}"), theme::TEXT),
        None => ("–".to_owned(), theme::TEXT_DIM),
    };
    key_value(ui, "Worker RTF", rtf_text, rtf_colour)
        .on_hover_text("Worker time per second of audio: below 1 keeps up; near 1 risks underruns");
    separator_dot(ui);
    let underrun_colour = if stream.underrun_blocks > 0 {
        theme::WARNING
    } else {
        theme::TEXT
    };
    key_value(
        ui,
        "Underruns",
        stream.underrun_blocks.to_string(),
        underrun_colour,
    )
    .on_hover_text("Blocks whose stems were not ready in time since the plugin started");
}

fn key_value(ui: &mut Ui, key: &str, value: String, colour: Color32) -> egui::Response {
    ui.horizontal(|ui| {
        ui.spacing_mut().item_spacing.x = 4.0;
        ui.label(RichText::new(key).color(theme::TEXT_DIM));
        ui.label(RichText::new(value).color(colour));
    })
    .response
}

fn separator_dot(ui: &mut Ui) {
    ui.label(RichText::new("·").color(theme::LINE));
}

/// Up to the first ". " (keeping the full stop), or the whole text.
fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meters_fall_and_hold() {
        let mut view = ViewState::default();
        view.update_meters(&[1.0, 0.5, 0.0, 0.0, 0.0, f32::NAN], 0.0);
        assert_eq!(view.meter_level(Stem::Vocals), 1.0);
        assert_eq!(view.meter_level(Stem::Other), 0.0);
        view.update_meters(&[0.0; NUM_STEMS], 0.25);
        let fallen = util::gain_to_db(view.meter_level(Stem::Vocals));
        assert!((fallen + 6.0).abs() < 0.01, "{fallen}");
        // The hold stays for PEAK_HOLD_S.
        assert_eq!(view.peak_holds[0].0, 1.0);
    }

    #[test]
    fn memory_and_sentences_format() {
        assert_eq!(format_memory(24 * 1024 * 1024 * 1024), "24.0 GB");
        assert_eq!(format_memory(512 * 1024 * 1024), "512 MB");
        assert_eq!(first_sentence("A b. C d."), "A b.");
        assert_eq!(first_sentence("no stop"), "no stop");
        assert_eq!(gain_readout(1.0), "+0.0 dB");
        assert_eq!(gain_readout(util::db_to_gain(-6.0)), "-6.0 dB");
        assert_eq!(gain_readout(0.0), "-∞ dB");
    }
}
