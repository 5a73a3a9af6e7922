//! Colours, sizes and the egui style of the editor: a dark mixer look with one colour per stem.

use egui::{Color32, CornerRadius, FontFamily, FontId, Stroke, TextStyle, Visuals};
use stemflow_engine::Stem;

/// Window background.
pub const BACKGROUND: Color32 = Color32::from_rgb(0x13, 0x15, 0x1a);
/// Header and status bar background.
pub const BAR: Color32 = Color32::from_rgb(0x1a, 0x1d, 0x24);
/// A stem strip's card.
pub const STRIP: Color32 = Color32::from_rgb(0x1f, 0x23, 0x2b);
/// Hairlines between areas.
pub const LINE: Color32 = Color32::from_rgb(0x2c, 0x31, 0x3b);
/// Meter and fader tracks.
pub const TRACK: Color32 = Color32::from_rgb(0x0d, 0x0f, 0x13);
/// Body text.
pub const TEXT: Color32 = Color32::from_rgb(0xdc, 0xe0, 0xe7);
/// Secondary text: labels, units, hints.
pub const TEXT_DIM: Color32 = Color32::from_rgb(0x8b, 0x93, 0xa1);
/// Brand accent.
pub const ACCENT: Color32 = Color32::from_rgb(0x5c, 0xc8, 0xe8);
/// Something works differently than asked (device fallback, missing runtime).
pub const WARNING: Color32 = Color32::from_rgb(0xf2, 0xb1, 0x3c);
/// Something failed.
pub const ERROR: Color32 = Color32::from_rgb(0xf0, 0x5d, 0x5e);
/// Meter above 0 dBFS.
pub const CLIP: Color32 = Color32::from_rgb(0xf0, 0x5d, 0x5e);
/// Mute button when on.
pub const MUTE_ON: Color32 = Color32::from_rgb(0xe0, 0x6c, 0x3c);
/// Solo button when on.
pub const SOLO_ON: Color32 = Color32::from_rgb(0xe6, 0xc2, 0x3a);
/// Bypass button when on.
pub const BYPASS_ON: Color32 = Color32::from_rgb(0xe0, 0x6c, 0x3c);

/// The default editor size in logical points.
pub const DEFAULT_SIZE: (f32, f32) = (780.0, 520.0);
/// The smallest size the editor lays out well in.
pub const MIN_SIZE: (f32, f32) = (640.0, 460.0);
/// The largest size accepted from saved state.
pub const MAX_SIZE: (f32, f32) = (2400.0, 1600.0);

/// Each stem's colour, used for its name, fader and meter.
pub fn stem_colour(stem: Stem) -> Color32 {
    match stem {
        Stem::Vocals => Color32::from_rgb(0xee, 0x72, 0xa0),
        Stem::Drums => Color32::from_rgb(0xf4, 0xa2, 0x5b),
        Stem::Bass => Color32::from_rgb(0x6a, 0x9b, 0xf4),
        Stem::Other => Color32::from_rgb(0x6c, 0xcf, 0x8e),
        Stem::Guitar => Color32::from_rgb(0xb4, 0x8c, 0xf2),
        Stem::Piano => Color32::from_rgb(0x5c, 0xc8, 0xd6),
    }
}

/// Small text: scale labels, units.
pub fn small_font() -> FontId {
    FontId::new(10.5, FontFamily::Proportional)
}

/// Applies the editor's look to a context. Cheap; called when an editor window opens.
pub fn apply(ctx: &egui::Context) {
    ctx.set_theme(egui::Theme::Dark);
    ctx.set_visuals_of(egui::Theme::Dark, visuals());
    ctx.style_mut_of(egui::Theme::Dark, |style| {
        style.spacing.item_spacing = egui::vec2(8.0, 6.0);
        style.spacing.button_padding = egui::vec2(10.0, 4.0);
        style.spacing.interact_size.y = 24.0;
        style.interaction.tooltip_delay = 0.3;
        style
            .text_styles
            .insert(TextStyle::Body, FontId::new(13.0, FontFamily::Proportional));
        style.text_styles.insert(
            TextStyle::Button,
            FontId::new(13.0, FontFamily::Proportional),
        );
        style.text_styles.insert(
            TextStyle::Small,
            FontId::new(10.5, FontFamily::Proportional),
        );
        style.text_styles.insert(
            TextStyle::Heading,
            FontId::new(18.0, FontFamily::Proportional),
        );
    });
}

fn visuals() -> Visuals {
    let mut visuals = Visuals::dark();
    visuals.panel_fill = BACKGROUND;
    visuals.window_fill = BAR;
    visuals.extreme_bg_color = TRACK;
    visuals.faint_bg_color = STRIP;
    visuals.override_text_color = None;
    visuals.selection.bg_fill = ACCENT.gamma_multiply(0.45);
    visuals.selection.stroke = Stroke::new(1.0, ACCENT);
    visuals.hyperlink_color = ACCENT;
    visuals.warn_fg_color = WARNING;
    visuals.error_fg_color = ERROR;
    let radius = CornerRadius::same(4);
    let widgets = &mut visuals.widgets;
    widgets.noninteractive.bg_fill = STRIP;
    widgets.noninteractive.weak_bg_fill = STRIP;
    widgets.noninteractive.bg_stroke = Stroke::new(1.0, LINE);
    widgets.noninteractive.fg_stroke = Stroke::new(1.0, TEXT);
    widgets.inactive.bg_fill = Color32::from_rgb(0x2a, 0x2f, 0x39);
    widgets.inactive.weak_bg_fill = Color32::from_rgb(0x2a, 0x2f, 0x39);
    widgets.inactive.bg_stroke = Stroke::new(1.0, Color32::from_rgb(0x36, 0x3c, 0x48));
    widgets.inactive.fg_stroke = Stroke::new(1.0, TEXT);
    widgets.hovered.bg_fill = Color32::from_rgb(0x33, 0x39, 0x45);
    widgets.hovered.weak_bg_fill = Color32::from_rgb(0x33, 0x39, 0x45);
    widgets.hovered.bg_stroke = Stroke::new(1.0, ACCENT.gamma_multiply(0.7));
    widgets.hovered.fg_stroke = Stroke::new(1.5, Color32::WHITE);
    widgets.active.bg_fill = Color32::from_rgb(0x3a, 0x41, 0x4e);
    widgets.active.weak_bg_fill = Color32::from_rgb(0x3a, 0x41, 0x4e);
    widgets.active.bg_stroke = Stroke::new(1.0, ACCENT);
    widgets.active.fg_stroke = Stroke::new(1.5, Color32::WHITE);
    widgets.open = widgets.active;
    for style in [
        &mut widgets.noninteractive,
        &mut widgets.inactive,
        &mut widgets.hovered,
        &mut widgets.active,
        &mut widgets.open,
    ] {
        style.corner_radius = radius;
    }
    visuals.window_corner_radius = CornerRadius::same(6);
    visuals.menu_corner_radius = CornerRadius::same(6);
    visuals
}
