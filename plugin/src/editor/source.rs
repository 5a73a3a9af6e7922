//! The source bar: the model chooser (with the catalogue's models to download), the owner's
//! terms before a download and its progress, the Device button with its details, the
//! Look-ahead setting for models, and the Guitar & Piano switch for six-stem models.

use egui::{vec2, Button, RichText, Ui, WidgetInfo};
use nice_plug::prelude::ParamSetter;
use stemflow_engine::{SeparatorChoice, Stem, BUILTIN_STEMS};

use super::device_button::device_button;
use super::download_row::{
    download_label, download_progress, download_row, terms_prompt, DownloadRow,
};
use super::model::{AvailableModel, DownloadTask, EditorAction, EditorModel, ModelList, ModelTask};
use super::theme;
use super::view_state::ViewState;
use super::widgets::{format_download_size, warning_icon};
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
                .selectable_label(is_builtin, stemflow_engine::BUILTIN_DISPLAY_NAME)
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
fn model_summary(info: &stemflow_engine::ModelInfo) -> String {
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
fn separator_label(separator: &SeparatorChoice, models: &[stemflow_engine::ModelInfo]) -> String {
    match separator {
        SeparatorChoice::Builtin => stemflow_engine::BUILTIN_DISPLAY_NAME.to_owned(),
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
