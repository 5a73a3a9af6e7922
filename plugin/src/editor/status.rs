//! The status line: latency, the worker's real-time factor, underruns, the runtime and every
//! warning, each with its full text on hover.

use egui::{Color32, RichText, Ui};
use stemflow_engine::runtime::DeviceId;

use super::model::{
    choice_short_name, device_short_name, DownloadTask, EditorModel, ModelTask, RuntimeStatus,
    StreamStatus,
};
use super::theme;
use super::widgets::{first_sentence, key_value, separator_dot, warning_icon};

/// A real-time factor above this is shown as a warning: little headroom left.
const RTF_WARNING: f64 = 0.8;

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
        if let Some(error) = &stream.separator_error {
            warnings.push((format!("Separation failed: {error}"), theme::ERROR));
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
        let is_on_cpu = stream
            .active_device
            .as_ref()
            .is_some_and(|active| active.actual == DeviceId::CPU);
        if stream.is_model && stream.is_float16 && is_on_cpu {
            warnings.push((
                "Float16 model on the CPU: it is made for GPUs and runs slower here than its \
                 float32 original; choose a GPU device or the float32 model"
                    .to_owned(),
                theme::WARNING,
            ));
        }
        if let Some(rtf) = stream.predicted_rtf.filter(|&rtf| rtf > RTF_WARNING) {
            let verdict = if rtf >= 1.0 {
                "this device cannot keep up: expect underruns (the dry mix goes to Other)"
            } else {
                "little headroom left: underruns are likely"
            };
            warnings.push((
                format!(
                    "Look-ahead too heavy: the model needs {rtf:.2} s per second of audio here \
                     (measured when loaded); {verdict}. Choose a longer Look-ahead or a faster \
                     device."
                ),
                theme::WARNING,
            ));
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
    if let DownloadTask::Failed { name, error } = &model.download {
        warnings.push((
            format!("Download of {name} failed, nothing was installed: {error}"),
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

pub(super) fn status(ui: &mut Ui, model: &EditorModel) {
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
