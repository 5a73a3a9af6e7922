//! A model download in the source bar: the owner's terms to accept first, then its progress
//! with a Cancel button.

use egui::{Button, RichText, Stroke, Ui};
use stemflow_engine::SeparatorChoice;

use super::model::{AvailableModel, DownloadStage, DownloadTask, EditorAction, EditorModel};
use super::theme;
use super::view_state::ViewState;
use super::widgets::format_download_size;

/// "htdemucs — 84 MB, download" ("…, weakly verified" when only part of the file can be
/// checked).
pub fn download_label(available: &AvailableModel) -> String {
    let weak = if available.is_weakly_verified {
        ", weakly verified"
    } else {
        ""
    };
    match available.download_bytes {
        Some(bytes) => format!(
            "{} — {}, download{weak}",
            available.name,
            format_download_size(bytes)
        ),
        None => format!("{} — download{weak}", available.name),
    }
}

/// What the row under the model chooser shows, if anything.
pub(super) enum DownloadRow<'a> {
    /// The owner's terms of the model about to be downloaded.
    Terms(&'a AvailableModel),
    /// A download's progress (or the built-in hint's place taken by it).
    Progress,
    /// The built-in is chosen: say what it is, and offer HTDemucs when it is not installed.
    BuiltinHint(Option<&'a AvailableModel>),
}

pub(super) fn download_row<'a>(
    model: &'a EditorModel,
    view: &mut ViewState,
) -> Option<DownloadRow<'a>> {
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
pub(super) fn terms_prompt(
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
            if available.is_weakly_verified {
                ui.label(
                    RichText::new(
                        "Weakly verified: no hash of the whole file is published; only its last \
                         10 MB (UVR's key) can be checked.",
                    )
                    .color(theme::TEXT),
                );
            }
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
pub(super) fn download_progress(ui: &mut Ui, model: &EditorModel, actions: &mut Vec<EditorAction>) {
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
            Some(DownloadStage::Waiting) => "Another Stemflow is fetching",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weakly_verified_model_says_so_where_it_is_offered() {
        let mut available = AvailableModel {
            name: "mel_roformer_viperx_1143".into(),
            download_bytes: Some(913_000_000),
            stems: "vocals, instrumental".into(),
            source: "viperx".into(),
            terms: "none".into(),
            quality: "SDR 11.4".into(),
            is_terms_accepted: false,
            is_weakly_verified: true,
        };
        assert_eq!(
            download_label(&available),
            "mel_roformer_viperx_1143 — 913 MB, download, weakly verified"
        );
        available.is_weakly_verified = false;
        available.download_bytes = None;
        assert_eq!(
            download_label(&available),
            "mel_roformer_viperx_1143 — download"
        );
    }
}
