//! The stem strips: per stem a gain fader with a post-fader meter, mute and solo.

use egui::{
    pos2, vec2, Align, Align2, Color32, CornerRadius, Frame, Layout, Margin, Rect, RichText, Sense,
    Stroke, StrokeKind, Ui, WidgetInfo,
};
use nice_plug::prelude::{FloatParam, Param, ParamSetter};
use nice_plug::util;
use stemflow_engine::Stem;

use super::model::EditorModel;
use super::source::{delivers_stem, visible_stems};
use super::theme;
use super::view_state::ViewState;
use super::widgets::{gain_readout, toggle_sized};
use crate::params::StemflowParams;

/// Fader ticks in dB, top to bottom (the bottom of the travel is −∞).
const FADER_TICKS_DB: [f32; 7] = [12.0, 6.0, 0.0, -6.0, -12.0, -24.0, -48.0];
/// Dragging with Shift (or Ctrl/Cmd) moves the fader this much slower.
const FINE_DRAG_FACTOR: f32 = 0.2;

pub(super) fn strips(
    ui: &mut Ui,
    view: &ViewState,
    model: &EditorModel,
    params: &StemflowParams,
    setter: &ParamSetter,
) {
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
                    let is_missing = delivers_stem(model, stem) == Some(false);
                    strip(
                        ui,
                        stem,
                        is_missing,
                        vec2(width, height),
                        view,
                        params,
                        setter,
                    );
                },
            );
        }
    });
}
/// One stem's strip; `is_missing`: the separator has no such stem (its output stays silent),
/// which the title says.
fn strip(
    ui: &mut Ui,
    stem: Stem,
    is_missing: bool,
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
            let (title_rect, title) =
                ui.allocate_exact_size(vec2(inner_width, 22.0), Sense::hover());
            let painter = ui.painter();
            painter.rect_filled(
                Rect::from_min_size(title_rect.left_top() + vec2(0.0, 3.0), vec2(4.0, 16.0)),
                CornerRadius::same(2),
                if is_missing { theme::TEXT_DIM } else { colour },
            );
            painter.text(
                title_rect.left_center() + vec2(12.0, 0.0),
                Align2::LEFT_CENTER,
                stem.display_name().to_uppercase(),
                egui::FontId::proportional(13.0),
                if is_missing {
                    theme::TEXT_DIM
                } else {
                    theme::TEXT
                },
            );
            if is_missing {
                // Said at the title's right where it fits beside the name (narrow strips: on
                // hover only).
                let name = stem.display_name();
                let name_width = painter
                    .layout_no_wrap(
                        name.to_uppercase(),
                        egui::FontId::proportional(13.0),
                        theme::TEXT_DIM,
                    )
                    .size()
                    .x;
                let note =
                    painter.layout_no_wrap("not in model".into(), theme::small_font(), theme::TEXT_DIM);
                if 12.0 + name_width + 8.0 + note.size().x <= title_rect.width() {
                    let size = note.size();
                    painter.galley(
                        pos2(title_rect.right() - size.x, title_rect.center().y - size.y / 2.0),
                        note,
                        theme::TEXT_DIM,
                    );
                }
                title
                    .on_hover_text(format!(
                        "The model has no {} stem: this output stays silent (what it would hold is in Other).",
                        name.to_lowercase()
                    ))
                    .widget_info(|| {
                        WidgetInfo::labeled(
                            egui::Role::Label,
                            true,
                            format!("{name}: not in this model"),
                        )
                    });
            }

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
/// Where a strip's scale, meter and fader go: the travel of 0 to full scale and the strip's centre.
#[derive(Clone, Copy)]
struct FaderGeometry {
    travel: Rect,
    centre_x: f32,
}

impl FaderGeometry {
    /// The height in the travel of a normalised gain.
    fn y_of(&self, normalized: f32) -> f32 {
        self.travel.bottom() - normalized.clamp(0.0, 1.0) * self.travel.height()
    }
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
    let geometry = FaderGeometry {
        travel: Rect::from_min_max(
            pos2(area.left(), area.top() + 8.0),
            pos2(area.right(), area.bottom() - 8.0),
        ),
        centre_x: area.center().x,
    };
    // The scale's ticks sit on both sides of the fader track, shared by the meter and the fader
    // (same gain mapping).
    let painter = ui.painter().clone();
    paint_scale(&painter, geometry, gain);
    paint_meter(&painter, geometry, stem, gain, meter_level, peak_hold);
    fader(ui, &painter, geometry, area, stem, gain, setter);
}

/// The dB scale: ticks beside the fader track and their labels.
fn paint_scale(painter: &egui::Painter, geometry: FaderGeometry, gain: &FloatParam) {
    let FaderGeometry { travel, centre_x } = geometry;
    let y_of = |normalized: f32| geometry.y_of(normalized);
    let scale_x = centre_x + 18.0;
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
}

/// The level meter left of the fader, with its peak hold.
fn paint_meter(
    painter: &egui::Painter,
    geometry: FaderGeometry,
    stem: Stem,
    gain: &FloatParam,
    meter_level: f32,
    peak_hold: f32,
) {
    let FaderGeometry { travel, centre_x } = geometry;
    let y_of = |normalized: f32| geometry.y_of(normalized);
    let colour = theme::stem_colour(stem);
    let meter_x = centre_x - 34.0;
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
}

/// The gain fader: its track, cap, interaction and accessibility.
fn fader(
    ui: &mut Ui,
    painter: &egui::Painter,
    geometry: FaderGeometry,
    area: Rect,
    stem: Stem,
    gain: &FloatParam,
    setter: &ParamSetter,
) {
    let FaderGeometry { travel, centre_x } = geometry;
    let y_of = |normalized: f32| geometry.y_of(normalized);
    let colour = theme::stem_colour(stem);
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
