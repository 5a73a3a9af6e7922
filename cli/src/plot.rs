//! [`LinePlot`]: a line chart with a logarithmic x axis, drawn with `plotters` and written as a
//! PNG, for benchmark curves checked into `docs/`.
//!
//! Each series has a colour that stands for its group (a separator) and a marker that stands for
//! its variant (a stem); the legend beside the chart gives one entry per group and one per
//! variant, so no colour appears twice in it. The text uses Ubuntu Light, embedded in the binary
//! from `epaint_default_fonts` (egui's fonts, already built for the plugin; the font stays under
//! the Ubuntu Font Licence 1.0, which allows embedding it in software): no system font is read.
//! Proportional rather than monospaced because plotters 0.3.7 places each glyph without its left
//! side bearing, which leaves gaps around narrow glyphs of a monospaced font.

use std::error::Error;
use std::path::Path;
use std::sync::OnceLock;

use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::prelude::*;

/// An RGB colour.
pub type Rgb = [u8; 3];

/// How a series marks its points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    /// A filled disc.
    Circle,
    /// A filled square.
    Square,
    /// A filled triangle, point up.
    Triangle,
    /// A diagonal cross.
    Cross,
}

impl Marker {
    /// The markers in the order variants take them.
    pub const ALL: [Marker; 4] = [
        Marker::Circle,
        Marker::Square,
        Marker::Triangle,
        Marker::Cross,
    ];
}

/// One line of the chart.
pub struct Series {
    /// What the colour stands for (the legend names each group once, with the colour of its
    /// first series).
    pub group: String,
    /// What the marker stands for (the legend names each variant once, with the marker of its
    /// first series).
    pub variant: String,
    /// Line and marker colour.
    pub colour: Rgb,
    /// Point marker.
    pub marker: Marker,
    /// Points `(x, y)`, in order; points with `x <= 0` or a non-finite value are left out.
    pub points: Vec<(f64, f64)>,
}

/// A chart with a logarithmic x axis and a linear y axis.
pub struct LinePlot {
    /// Caption above the chart.
    pub title: String,
    /// Description under the x axis.
    pub x_label: String,
    /// Description beside the y axis.
    pub y_label: String,
    /// Legend heading over the groups (the colours).
    pub group_title: String,
    /// Legend heading over the variants (the markers).
    pub variant_title: String,
    /// The lines, drawn in order.
    pub series: Vec<Series>,
}

/// What the legend lists.
struct Legend<'a> {
    /// Each group with its colour.
    groups: Vec<(&'a str, Rgb)>,
    /// Each variant with its marker.
    variants: Vec<(&'a str, Marker)>,
}

/// Image width in pixels.
const WIDTH_PX: u32 = 1120;
/// Image height in pixels.
const HEIGHT_PX: u32 = 600;
/// Width of the legend column on the right.
const LEGEND_WIDTH_PX: u32 = 250;
/// The family name the embedded font is registered under (plotters' default family).
pub(crate) const FONT: &str = "sans-serif";
/// Marker size (radius) in pixels.
const MARKER_PX: i32 = 6;
/// Colour of the text, axes and the legend's variant markers.
pub(crate) const INK: RGBColor = RGBColor(40, 40, 40);

/// The mesh every chart here has: whole numbers on the y axis, and the house fonts, axes and
/// grid lines. Returns `mesh`, to be drawn.
pub(crate) fn house_mesh<'m, 'a, 'b, X: Ranged, Y: Ranged<ValueType = f64>, DB: DrawingBackend>(
    mesh: &'m mut MeshStyle<'a, 'b, X, Y, DB>,
) -> &'m mut MeshStyle<'a, 'b, X, Y, DB> {
    mesh.y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 16).into_font().color(&INK))
        .axis_desc_style((FONT, 18).into_font().color(&INK))
        .axis_style(INK.stroke_width(2))
        .bold_line_style(RGBColor(200, 200, 200).stroke_width(1))
        .light_line_style(RGBColor(235, 235, 235).stroke_width(1))
}

/// Registers the embedded font with plotters once per process.
fn register_font() -> Result<(), String> {
    static IS_REGISTERED: OnceLock<bool> = OnceLock::new();
    let is_registered = *IS_REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    });
    if is_registered {
        Ok(())
    } else {
        Err("the embedded chart font does not load".into())
    }
}

impl LinePlot {
    /// Draws the chart and writes it to `path` as a PNG (through `FILE.png.partial`, so a failed
    /// write leaves no half file under the name).
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        write_png(path, &self.draw()?)
    }

    /// The chart as `WIDTH_PX × HEIGHT_PX` RGB pixels, row by row.
    fn draw(&self) -> Result<Vec<u8>, String> {
        render(|root| self.draw_on(root))
    }

    fn draw_on(&self, root: &DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), Box<dyn Error>> {
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, (FONT, 24).into_font().color(&INK))?;
        let (chart_area, legend_area) = root.split_horizontally(WIDTH_PX - LEGEND_WIDTH_PX);
        let (x_range, y_range) = self.ranges();
        let (x_ticks, x_minor) = log_ticks(x_range.clone());
        // Steps of 2 (plotters picks a round step, wider when that would crowd the axis).
        let num_y_ticks = ((y_range.end - y_range.start) / 2.0) as usize + 1;
        let mut chart = ChartBuilder::on(&chart_area)
            .margin(10)
            .x_label_area_size(60)
            .y_label_area_size(70)
            .build_cartesian_2d(
                x_range
                    .log_scale()
                    .with_key_points(x_ticks)
                    .with_light_points(x_minor),
                y_range,
            )?;
        house_mesh(
            chart
                .configure_mesh()
                .x_desc(&self.x_label)
                .y_desc(&self.y_label)
                .y_labels(num_y_ticks.min(16))
                .y_max_light_lines(1)
                .x_label_formatter(&|x| format_tick(*x)),
        )
        .draw()?;
        let points_of = |series: &Series| -> Vec<(f64, f64)> {
            let is_drawable = |&(x, y): &(f64, f64)| x > 0.0 && x.is_finite() && y.is_finite();
            series.points.iter().copied().filter(is_drawable).collect()
        };
        // All lines first, then all markers, so that no line hides a marker.
        for series in &self.series {
            let colour = to_colour(series.colour).stroke_width(2);
            chart.draw_series(LineSeries::new(points_of(series), colour))?;
        }
        for series in &self.series {
            for point in points_of(series) {
                let colour = to_colour(series.colour);
                draw_marker(chart.plotting_area(), point, series.marker, colour)?;
            }
        }
        self.draw_legend(&legend_area)?;
        Ok(())
    }

    /// The legend: the groups as coloured lines, then the variants as markers in ink.
    fn draw_legend(
        &self,
        area: &DrawingArea<BitMapBackend<'_>, Shift>,
    ) -> Result<(), Box<dyn Error>> {
        let heading = (FONT, 18).into_font().color(&INK);
        let text = (FONT, 16).into_font().color(&INK);
        let Legend { groups, variants } = self.legend();
        let x = 10;
        let mut y = 30;
        area.draw(&Text::new(
            self.group_title.as_str(),
            (x, y),
            heading.clone(),
        ))?;
        for (group, colour) in groups {
            y += 26;
            let colour = to_colour(colour);
            area.draw(&PathElement::new(
                vec![(x, y + 8), (x + 30, y + 8)],
                colour.stroke_width(3),
            ))?;
            area.draw(&Text::new(group, (x + 40, y), text.clone()))?;
        }
        y += 44;
        area.draw(&Text::new(self.variant_title.as_str(), (x, y), heading))?;
        for (variant, marker) in variants {
            y += 26;
            draw_marker(area, (x + 15, y + 8), marker, INK)?;
            area.draw(&Text::new(variant, (x + 40, y), text.clone()))?;
        }
        Ok(())
    }

    /// The legend's entries: each group once with the colour of its first series, each variant
    /// once with the marker of its first series, in the order they first appear.
    fn legend(&self) -> Legend<'_> {
        let mut legend = Legend {
            groups: Vec::new(),
            variants: Vec::new(),
        };
        for series in &self.series {
            if !legend.groups.iter().any(|(g, _)| *g == series.group) {
                legend.groups.push((&series.group, series.colour));
            }
            if !legend.variants.iter().any(|(v, _)| *v == series.variant) {
                legend.variants.push((&series.variant, series.marker));
            }
        }
        legend
    }

    /// The axis ranges: whole decades from below the data to a little past its last x, whole
    /// steps of 2 around its y.
    fn ranges(&self) -> (std::ops::Range<f64>, std::ops::Range<f64>) {
        let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for &(x, y) in self.series.iter().flat_map(|s| s.points.iter()) {
            if x > 0.0 && x.is_finite() && y.is_finite() {
                x_min = x_min.min(x);
                x_max = x_max.max(x);
                y_min = y_min.min(y);
                y_max = y_max.max(y);
            }
        }
        if x_min > x_max {
            (x_min, x_max, y_min, y_max) = (0.1, 10.0, 0.0, 1.0);
        }
        let x_lo = 10f64.powf(x_min.log10().floor());
        let x_hi = (x_max * 1.5).max(x_lo * 10.0);
        let y_lo = (y_min / 2.0).floor() * 2.0;
        let y_hi = ((y_max / 2.0).ceil() * 2.0).max(y_lo + 2.0);
        (x_lo..x_hi, y_lo..y_hi)
    }
}

/// Labelled ticks at 1, 2 and 5 times each power of ten in `range`, and minor grid lines at the
/// other whole multiples.
fn log_ticks(range: std::ops::Range<f64>) -> (Vec<f64>, Vec<f64>) {
    let (mut labelled, mut minor) = (Vec::new(), Vec::new());
    let mut decade = range.start.log10().floor() as i32;
    while 10f64.powi(decade) <= range.end {
        for factor in 1..10 {
            let x = f64::from(factor) * 10f64.powi(decade);
            if x < range.start * (1.0 - 1e-9) || x > range.end {
                continue;
            }
            if matches!(factor, 1 | 2 | 5) {
                labelled.push(x);
            } else {
                minor.push(x);
            }
        }
        decade += 1;
    }
    (labelled, minor)
}

/// Draws `marker` centred on `at` (in `area`'s coordinates).
fn draw_marker<DB, CT>(
    area: &DrawingArea<DB, CT>,
    at: CT::From,
    marker: Marker,
    colour: RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>>
where
    DB: DrawingBackend,
    CT: CoordTranslate,
    CT::From: Clone,
{
    let r = MARKER_PX;
    match marker {
        Marker::Circle => area.draw(&Circle::new(at, r, colour.filled())),
        Marker::Square => area.draw(
            &(EmptyElement::at(at)
                + Rectangle::new([(-r + 1, -r + 1), (r - 1, r - 1)], colour.filled())),
        ),
        Marker::Triangle => area.draw(&TriangleMarker::new(at, r + 2, colour.filled())),
        Marker::Cross => area.draw(&Cross::new(at, r - 1, colour.stroke_width(3))),
    }
}

fn to_colour([r, g, b]: Rgb) -> RGBColor {
    RGBColor(r, g, b)
}

/// "0.2", "1", "10".
fn format_tick(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        let digits = (-x.log10().floor()) as usize;
        format!("{x:.digits$}")
    }
}

/// What a chart draws on.
pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// `draw_on`'s drawing as `WIDTH_PX × HEIGHT_PX` RGB pixels, row by row, the font registered.
pub(crate) fn render(
    draw_on: impl FnOnce(&Area<'_>) -> Result<(), Box<dyn Error>>,
) -> Result<Vec<u8>, String> {
    register_font()?;
    let mut rgb = vec![255; WIDTH_PX as usize * HEIGHT_PX as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        draw_on(&root)
            .and_then(|()| root.present().map_err(Into::into))
            .map_err(|e| format!("cannot draw the chart: {e}"))?;
    }
    Ok(rgb)
}

/// Writes `rgb` (`WIDTH_PX × HEIGHT_PX`, 8-bit RGB) to `path` as a PNG, through
/// `FILE.png.partial`, so a failed write leaves no half file under the name.
pub(crate) fn write_png(path: &Path, rgb: &[u8]) -> Result<(), String> {
    let partial = path.with_extension("png.partial");
    encode_png(&partial, rgb)
        .and_then(|()| std::fs::rename(&partial, path).map_err(Into::into))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes `rgb` (`WIDTH_PX × HEIGHT_PX`, 8-bit RGB) to `path` as a PNG.
fn encode_png(path: &Path, rgb: &[u8]) -> Result<(), Box<dyn Error>> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, WIDTH_PX, HEIGHT_PX);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.set_compression(png::Compression::High);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plot(series: Vec<Series>) -> LinePlot {
        LinePlot {
            title: "test".into(),
            x_label: "latency (s)".into(),
            y_label: "SDR (dB)".into(),
            group_title: "separator".into(),
            variant_title: "stem".into(),
            series,
        }
    }

    fn series(group: &str, variant: &str, colour: Rgb, marker: Marker) -> Series {
        Series {
            group: group.into(),
            variant: variant.into(),
            colour,
            marker,
            points: vec![(0.25, 1.0), (1.0, 4.0), (12.0, 8.0)],
        }
    }

    #[test]
    fn writes_a_png_of_the_chart_that_decodes_to_the_drawn_pixels() {
        let plot = plot(vec![series("a", "vocals", [200, 0, 0], Marker::Circle)]);
        let dir = std::env::temp_dir().join(format!("stemflow-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("plot.png");
        plot.write_png(&path).unwrap();
        assert!(!path.with_extension("png.partial").exists());
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut decoded = vec![0; reader.output_buffer_size().unwrap()];
        let frame = reader.next_frame(&mut decoded).unwrap();
        assert_eq!((frame.width, frame.height), (WIDTH_PX, HEIGHT_PX));
        assert_eq!(frame.color_type, png::ColorType::Rgb);
        let drawn = plot.draw().unwrap();
        assert!(
            decoded[..frame.buffer_size()] == drawn[..],
            "the PNG holds the drawn pixels"
        );
        let red = drawn.chunks(3).filter(|p| *p == [200, 0, 0]).count();
        assert!(red > 500, "the series is drawn: {red} pixels");
        // Text is drawn: the title band holds ink-dark pixels.
        let title_band = &drawn[..WIDTH_PX as usize * 3 * 40];
        let dark = title_band
            .chunks(3)
            .filter(|p| p.iter().all(|&c| c < 100))
            .count();
        assert!(dark > 50, "the title is drawn: {dark} dark pixels");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_legend_names_each_group_and_each_variant_once() {
        let plot = plot(vec![
            series("a", "vocals", [1, 0, 0], Marker::Circle),
            series("a", "drums", [1, 0, 0], Marker::Square),
            series("b", "vocals", [0, 2, 0], Marker::Circle),
            series("b", "drums", [0, 2, 0], Marker::Square),
        ]);
        let Legend { groups, variants } = plot.legend();
        assert_eq!(groups, [("a", [1, 0, 0]), ("b", [0, 2, 0])]);
        assert_eq!(
            variants,
            [("vocals", Marker::Circle), ("drums", Marker::Square)]
        );
    }

    #[test]
    fn the_x_axis_has_ticks_at_1_2_5_per_decade() {
        let (labelled, minor) = log_ticks(0.1..18.0);
        assert_eq!(labelled, [0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]);
        assert_eq!(minor.len(), 12, "3, 4, 6, 7, 8 and 9 in two decades");
        assert_eq!(
            labelled.iter().map(|&x| format_tick(x)).collect::<Vec<_>>(),
            ["0.1", "0.2", "0.5", "1", "2", "5", "10"]
        );
    }

    #[test]
    fn a_chart_without_points_still_draws() {
        let mut empty = series("a", "vocals", [200, 0, 0], Marker::Circle);
        empty.points = vec![(0.0, 1.0), (f64::NAN, 2.0)];
        assert!(plot(vec![empty]).draw().is_ok());
    }
}
