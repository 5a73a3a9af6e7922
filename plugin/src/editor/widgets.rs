//! Small pieces the editor's parts share: toggles, warning icons, key/value labels, and the
//! text formats of gains, memory sizes and messages.

use egui::{pos2, vec2, Align2, Button, Color32, RichText, Sense, Stroke, Ui, WidgetInfo};
use nice_plug::prelude::{BoolParam, ParamSetter};
use nice_plug::util;

use super::theme;

/// A small filled warning triangle with an exclamation mark (the default fonts have no ⚠).
pub(super) fn warning_icon(ui: &mut Ui, colour: Color32) {
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
/// A download's size in decimal megabytes, as owners and browsers state them: "84 MB".
pub fn format_download_size(bytes: u64) -> String {
    format!("{:.0} MB", bytes as f64 / 1_000_000.0)
}

// ---------------------------------------------------------------------------------------------
// Stem strips
/// A toggle button bound to a [`BoolParam`], at least `width` wide (0: as wide as its text):
/// one gesture per click.
pub(super) fn toggle_sized(
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
pub(super) fn key_value(ui: &mut Ui, key: &str, value: String, colour: Color32) -> egui::Response {
    ui.horizontal(|ui| {
        ui.spacing_mut().item_spacing.x = 4.0;
        ui.label(RichText::new(key).color(theme::TEXT_DIM));
        ui.label(RichText::new(value).color(colour));
    })
    .response
}
pub(super) fn separator_dot(ui: &mut Ui) {
    ui.label(RichText::new("·").color(theme::LINE));
}
/// Up to the first ". " (keeping the full stop), or the whole text.
pub(super) fn first_sentence(text: &str) -> &str {
    match text.find(". ") {
        Some(end) => &text[..=end],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sentences_and_gains_format() {
        assert_eq!(format_memory(24 * 1024 * 1024 * 1024), "24.0 GB");
        assert_eq!(format_memory(512 * 1024 * 1024), "512 MB");
        assert_eq!(format_download_size(84_141_911), "84 MB");
        assert_eq!(format_download_size(4 * 84_141_271), "337 MB");
        assert_eq!(first_sentence("A b. C d."), "A b.");
        assert_eq!(first_sentence("no stop"), "no stop");
        assert_eq!(gain_readout(1.0), "+0.0 dB");
        assert_eq!(gain_readout(util::db_to_gain(-6.0)), "-6.0 dB");
        assert_eq!(gain_readout(0.0), "-∞ dB");
    }
}
