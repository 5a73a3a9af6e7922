//! The source bar: the model chooser (with the catalogue's models to download), the owner's
//! terms before a download and its progress, the Device button with its details, the
//! Look-ahead setting for models, and the Guitar & Piano switch for six-stem models.

use egui::{vec2, Button, RichText, Stroke, Ui, WidgetInfo};
use nice_plug::prelude::ParamSetter;
use stemflow_engine::builtin::BUILTIN_STEMS;
use stemflow_engine::choice::SeparatorChoice;
use stemflow_engine::runtime::devices::{DeviceChoice, DeviceInfo, DeviceStatus};
use stemflow_engine::Stem;

use super::model::{
    choice_short_name, device_short_name, resolve_choice, step_device, AvailableModel,
    DownloadStage, DownloadTask, EditorAction, EditorModel, ModelList, ModelTask,
};
use super::theme;
use super::view_state::ViewState;
use super::widgets::{format_download_size, format_memory, warning_icon};
use crate::params::{GuitarPianoOutput, LookAheadSetting, StemflowParams};

/// The model chooser, a model download (its terms, then its progress), the Device button and,
/// for six-stem models, where guitar and piano go.
pub(super) fn source_controls(
    ui: &mut Ui,
    model: &EditorModel,
    view: &mut ViewState,
    params: &StemflowParams,
    setter: &ParamSetter,
    actions: &mut Vec<EditorAction>,
) {
    egui::Grid::new("stemflow-source")
        .num_columns(2)
        .spacing(vec2(10.0, 6.0))
        .show(ui, |ui| {
            ui.label(RichText::new("MODEL").small().color(theme::TEXT_DIM));
            ui.horizontal(|ui| model_chooser(ui, model, view, actions));
            ui.end_row();
            if let Some(row) = download_row(model, view) {
                ui.label("");
                ui.vertical(|ui| match row {
                    DownloadRow::Terms(available) => terms_prompt(ui, available, view, actions),
                    DownloadRow::Progress => download_progress(ui, model, actions),
                    DownloadRow::BuiltinHint(htdemucs) => builtin_hint(ui, htdemucs, view, actions),
                });
                ui.end_row();
            }
            ui.label(RichText::new("DEVICE").small().color(theme::TEXT_DIM));
            ui.horizontal(|ui| device_button(ui, model, actions));
            ui.end_row();
            if model.separator != SeparatorChoice::Builtin {
                ui.label(RichText::new("LOOK-AHEAD").small().color(theme::TEXT_DIM));
                ui.horizontal(|ui| look_ahead_button(ui, model, params, setter));
                ui.end_row();
            }
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
    Stem::EXTRA
        .into_iter()
        .any(|stem| delivers_stem(model, stem) == Some(true))
}

/// Whether the chosen separator delivers `stem` (`Other` always); `None` while that is not
/// known (the models are being scanned, or the chosen file is not among them).
pub(super) fn delivers_stem(model: &EditorModel, stem: Stem) -> Option<bool> {
    match &model.separator {
        SeparatorChoice::Builtin => Some(stem == Stem::Other || BUILTIN_STEMS.contains(&stem)),
        SeparatorChoice::Model(path) => {
            let ModelList::Ready(models) = &model.models else {
                return None;
            };
            let info = models
                .iter()
                .find(|info| &info.path == path && info.is_usable())?;
            Some(info.delivers.iter().any(|name| name == stem.file_name()))
        }
    }
}
/// Cycles the "Look-ahead" parameter, saying what the running setting costs: its latency in
/// milliseconds and how many times as often the model runs.
fn look_ahead_button(
    ui: &mut Ui,
    model: &EditorModel,
    params: &StemflowParams,
    setter: &ParamSetter,
) {
    let param = &params.look_ahead;
    let current = param.value();
    let text = current.look_ahead().label();
    let response = ui
        .add(Button::new(text.as_str()).min_size(vec2(80.0, 22.0)))
        .on_hover_text(
            "How far past the audio the model may look. Full: the reference pipeline, the best \
             quality, a whole chunk of latency (seconds). Shorter settings cut the latency so a \
             track can be played and monitored, cost quality and run the model more often \
             (see the Worker RTF: above 1 the device cannot keep up). Click for the next setting.",
        );
    let label = format!("Look-ahead: {text}");
    response.widget_info(|| WidgetInfo::labeled(egui::Role::Button, true, &label));
    if let Some(stream) = &model.stream {
        let latency_ms =
            stream.latency_samples as f64 * 1000.0 / f64::from(stream.sample_rate_hz.max(1.0));
        ui.label(
            RichText::new(format!(
                "{latency_ms:.0} ms latency · model runs {:.1}× as often as at Full",
                stream.compute_factor
            ))
            .small()
            .color(theme::TEXT_DIM),
        );
    }
    if response.clicked() {
        let next = match current {
            LookAheadSetting::Full => LookAheadSetting::Seconds4,
            LookAheadSetting::Seconds4 => LookAheadSetting::Seconds2,
            LookAheadSetting::Seconds2 => LookAheadSetting::Seconds1,
            LookAheadSetting::Seconds1 => LookAheadSetting::Millis500,
            LookAheadSetting::Millis500 => LookAheadSetting::Millis250,
            LookAheadSetting::Millis250 => LookAheadSetting::Full,
        };
        setter.begin_set_parameter(param);
        setter.set_parameter(param, next);
        setter.end_set_parameter(param);
    }
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
fn model_chooser(
    ui: &mut Ui,
    model: &EditorModel,
    view: &mut ViewState,
    actions: &mut Vec<EditorAction>,
) {
    let models = match &model.models {
        ModelList::Ready(models) => Some(models.as_slice()),
        ModelList::Scanning => None,
    };
    let selected_text = separator_label(&model.separator, models.unwrap_or(&[]));
    egui::ComboBox::from_id_salt("stemflow-model")
        .width(300.0)
        // Tall enough for the installed models and the catalogue's without scrolling.
        .height(440.0)
        .selected_text(selected_text)
        .show_ui(ui, |ui| {
            let is_builtin = model.separator == SeparatorChoice::Builtin;
            if ui
                .selectable_label(is_builtin, stemflow_engine::builtin::BUILTIN_DISPLAY_NAME)
                .on_hover_text(BUILTIN_HOVER)
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
                        RichText::new("No models in the models folder yet").color(theme::TEXT_DIM),
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
            if models.is_some() && !model.available.is_empty() {
                ui.separator();
                ui.label(
                    RichText::new("Download from the model's owner")
                        .small()
                        .color(theme::TEXT_DIM),
                );
                let is_downloading = matches!(model.download, DownloadTask::Running { .. });
                for available in model.available.iter() {
                    let response = ui
                        .add_enabled(
                            !is_downloading,
                            Button::selectable(false, download_label(available)),
                        )
                        .on_hover_text(format!(
                            "{} · {}\n{}\nTerms: {}",
                            available.stems, available.source, available.quality, available.terms
                        ))
                        .on_disabled_hover_text("Another model is downloading");
                    if response.clicked() {
                        if available.is_terms_accepted {
                            actions.push(EditorAction::DownloadModel(available.name.clone()));
                        } else {
                            view.terms_prompt = Some(available.name.clone());
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
/// What the built-in separator is, said plainly where it is chosen.
const BUILTIN_HOVER: &str = "A fallback that works with no model file: DSP on the CPU, low \
     latency. On recorded songs it only roughs the stems out (about 1.3 dB SDR on average, bass \
     below zero); for real stems download a model below (HTDemucs: vocals, drums, bass, other).";

/// "htdemucs — 84 MB, download".
pub fn download_label(available: &AvailableModel) -> String {
    match available.download_bytes {
        Some(bytes) => format!(
            "{} — {}, download",
            available.name,
            format_download_size(bytes)
        ),
        None => format!("{} — download", available.name),
    }
}

/// What the row under the model chooser shows, if anything.
enum DownloadRow<'a> {
    /// The owner's terms of the model about to be downloaded.
    Terms(&'a AvailableModel),
    /// A download's progress (or the built-in hint's place taken by it).
    Progress,
    /// The built-in is chosen: say what it is, and offer HTDemucs when it is not installed.
    BuiltinHint(Option<&'a AvailableModel>),
}

fn download_row<'a>(model: &'a EditorModel, view: &mut ViewState) -> Option<DownloadRow<'a>> {
    if let DownloadTask::Running { .. } = model.download {
        view.terms_prompt = None;
        return Some(DownloadRow::Progress);
    }
    if let Some(name) = &view.terms_prompt {
        match model.available.iter().find(|a| &a.name == name) {
            Some(available) => return Some(DownloadRow::Terms(available)),
            // Installed meanwhile, or no longer offered.
            None => view.terms_prompt = None,
        }
    }
    (model.separator == SeparatorChoice::Builtin)
        .then(|| DownloadRow::BuiltinHint(model.available.iter().find(|a| a.name == "htdemucs")))
}

/// The owner's terms, with Accept (which starts the download) and Cancel.
fn terms_prompt(
    ui: &mut Ui,
    available: &AvailableModel,
    view: &mut ViewState,
    actions: &mut Vec<EditorAction>,
) {
    egui::Frame::new()
        .stroke(Stroke::new(1.0, theme::ACCENT))
        .inner_margin(egui::Margin::same(8))
        .corner_radius(4.0)
        .show(ui, |ui| {
            ui.set_max_width(560.0);
            ui.label(
                RichText::new(format!(
                    "{} ({}) from {}",
                    available.name,
                    available
                        .download_bytes
                        .map(format_download_size)
                        .unwrap_or_else(|| "size unknown".to_owned()),
                    available.source
                ))
                .strong(),
            );
            ui.label(
                RichText::new(format!("The owner's terms: {}", available.terms)).color(theme::TEXT),
            );
            ui.label(
                RichText::new(
                    "Stemflow downloads it from its owner, checks it and installs it in the \
                     models folder; the current separator keeps playing.",
                )
                .small()
                .color(theme::TEXT_DIM),
            );
            ui.horizontal(|ui| {
                if ui
                    .button(RichText::new("Accept terms and download").color(theme::ACCENT))
                    .clicked()
                {
                    actions.push(EditorAction::DownloadModel(available.name.clone()));
                    view.terms_prompt = None;
                }
                if ui.button("Cancel").clicked() {
                    view.terms_prompt = None;
                }
            });
        });
}

/// "Downloading htdemucs [=====     ] 42 % · 35.3 of 84 MB · 5.1 MB/s · 10 s left [Cancel]".
fn download_progress(ui: &mut Ui, model: &EditorModel, actions: &mut Vec<EditorAction>) {
    let DownloadTask::Running {
        name,
        progress,
        is_cancelling,
    } = &model.download
    else {
        return;
    };
    ui.horizontal(|ui| {
        let stage = progress.map(|p| p.stage);
        let verb = match stage {
            None | Some(DownloadStage::Downloading) => "Downloading",
            Some(DownloadStage::Checking) => "Checking",
            Some(DownloadStage::Converting) => "Converting",
            Some(DownloadStage::Installing) => "Installing",
        };
        ui.label(RichText::new(format!("{verb} {name}")).color(theme::TEXT));
        let fraction = progress.and_then(|p| p.fraction()).unwrap_or(0.0) as f32;
        let text = match progress {
            Some(p) if stage == Some(DownloadStage::Downloading) => download_text(p),
            Some(p) if stage == Some(DownloadStage::Converting) => {
                format!("{} · converting…", format_download_size(p.done_bytes))
            }
            _ => String::new(),
        };
        ui.add(egui::ProgressBar::new(fraction).desired_width(160.0));
        ui.label(RichText::new(text).small().color(theme::TEXT));
        let cancel = if *is_cancelling {
            "Cancelling…"
        } else {
            "Cancel"
        };
        if ui
            .add_enabled(!is_cancelling, Button::new(cancel))
            .on_hover_text("Stop the download; what arrived is kept and resumed next time")
            .clicked()
        {
            actions.push(EditorAction::CancelDownload);
        }
    });
    ui.ctx()
        .request_repaint_after(std::time::Duration::from_millis(100));
}

/// "42 % · 35.3 of 84 MB · 5.1 MB/s · 10 s left".
pub fn download_text(progress: &super::model::DownloadProgress) -> String {
    let done_mb = progress.done_bytes as f64 / 1_000_000.0;
    let mut text = match (progress.fraction(), progress.total_bytes) {
        (Some(fraction), Some(total)) => format!(
            "{:.0} % · {done_mb:.1} of {}",
            fraction * 100.0,
            format_download_size(total)
        ),
        _ => format!("{done_mb:.1} MB"),
    };
    if let Some(speed) = progress.bytes_per_s {
        text += &format!(" · {:.1} MB/s", speed / 1_000_000.0);
    }
    if let Some(eta_s) = progress.eta_s() {
        let eta_s = eta_s.round() as u64;
        text += &if eta_s < 60 {
            format!(" · {eta_s} s left")
        } else {
            format!(" · {} min left", eta_s.div_ceil(60))
        };
    }
    text
}

/// Under the built-in separator: what it is, and the way to a real model.
fn builtin_hint(
    ui: &mut Ui,
    htdemucs: Option<&AvailableModel>,
    view: &mut ViewState,
    actions: &mut Vec<EditorAction>,
) {
    ui.horizontal_wrapped(|ui| {
        ui.label(
            RichText::new(
                "Built-in: a fallback that works with no model, rough on real recordings.",
            )
            .small()
            .color(theme::TEXT_DIM),
        );
        match htdemucs {
            Some(available) => {
                let text = match available.download_bytes {
                    Some(bytes) => format!(
                        "Download {} ({})…",
                        available.name,
                        format_download_size(bytes)
                    ),
                    None => format!("Download {}…", available.name),
                };
                if ui
                    .link(RichText::new(text).small())
                    .on_hover_text(
                        "HTDemucs (Meta): vocals, drums, bass and other from a trained network \
                         (9.0 dB SDR on MUSDB18-HQ)",
                    )
                    .clicked()
                {
                    if available.is_terms_accepted {
                        actions.push(EditorAction::DownloadModel(available.name.clone()));
                    } else {
                        view.terms_prompt = Some(available.name.clone());
                    }
                }
            }
            None => {
                ui.label(
                    RichText::new("Choose a model above for real stems.")
                        .small()
                        .color(theme::TEXT_DIM),
                );
            }
        }
    });
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
        SeparatorChoice::Builtin => stemflow_engine::builtin::BUILTIN_DISPLAY_NAME.to_owned(),
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
