//! [`ScoreChart`]: each target's per-track SDR as dots and its median as a bar, written as a
//! PNG with the look-ahead chart's font and size (`crate::plot`).

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

use crate::plot::{house_mesh, render, write_png, Area, FONT, INK};

/// Colours of the targets, in order (then again).
const COLOURS: [RGBColor; 6] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// One chart of scores.
pub struct ScoreChart {
    /// Caption above the chart.
    pub title: String,
    /// Description beside the y axis.
    pub y_label: String,
    /// Each target and its tracks' scores (NaN and infinite ones are left out).
    pub targets: Vec<(String, Vec<f64>)>,
}

/// The median of the finite values.
fn median(values: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!finite.is_empty()).then(|| stemflow_kit::bsseval::nan_median(&finite))
}

impl ScoreChart {
    /// Draws the chart and writes it to `path` as a PNG.
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        write_png(path, &render(|root| self.draw_on(root))?)
    }

    /// The y range: whole steps of 2 dB around every finite score.
    fn y_range(&self) -> std::ops::Range<f64> {
        let finite = self
            .targets
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .filter(|v| v.is_finite());
        let (lo, hi) = finite.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if lo > hi {
            return 0.0..10.0;
        }
        let lo = (lo / 2.0).floor() * 2.0;
        lo..((hi / 2.0).ceil() * 2.0).max(lo + 2.0)
    }

    fn draw_on(&self, root: &Area<'_>) -> Result<(), Box<dyn Error>> {
        root.fill(&WHITE)?;
        let root = root.titled(&self.title, (FONT, 24).into_font().color(&INK))?;
        let count = self.targets.len().max(1);
        let names: Vec<&str> = self.targets.iter().map(|(n, _)| n.as_str()).collect();
        let mut chart = ChartBuilder::on(&root)
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(-0.5..count as f64 - 0.5, self.y_range())?;
        house_mesh(
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(count)
                .x_label_formatter(&|x| {
                    let index = x.round();
                    let is_centre = (x - index).abs() < 1e-6 && index >= 0.0;
                    names
                        .get(index as usize)
                        .filter(|_| is_centre)
                        .map_or(String::new(), |n| n.to_string())
                })
                .y_desc(&self.y_label),
        )
        .draw()?;
        for (index, (_, values)) in self.targets.iter().enumerate() {
            let colour = COLOURS[index % COLOURS.len()];
            let x = index as f64;
            // Dots spread across the column in track order, so equal scores stay apart.
            let spread = values.len().max(2) as f64 - 1.0;
            for (track, &value) in values.iter().enumerate() {
                if value.is_finite() {
                    let offset = -0.25 + 0.5 * track as f64 / spread;
                    chart.draw_series([Circle::new((x + offset, value), 4, colour.filled())])?;
                }
            }
            if let Some(median) = median(values) {
                chart.draw_series(LineSeries::new(
                    [(x - 0.35, median), (x + 0.35, median)],
                    INK.stroke_width(3),
                ))?;
                chart.draw_series([Text::new(
                    format!("{median:.2}"),
                    (x + 0.36, median),
                    (FONT, 16).into_font().color(&INK),
                )])?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_of_scores_is_written() {
        let chart = ScoreChart {
            title: "SDR".into(),
            y_label: "SDR (dB)".into(),
            targets: vec![
                ("vocals".into(), vec![6.0, 7.5, f64::NAN, 8.0]),
                ("other".into(), vec![f64::INFINITY]),
            ],
        };
        let dir = std::env::temp_dir().join(format!("stemflow-scores-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scores.png");
        chart.write_png(&path).unwrap();
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        reader.next_frame(&mut pixels).unwrap();
        let red = pixels.chunks(3).filter(|p| *p == [214, 39, 40]).count();
        assert!(red > 50, "the vocals' dots are drawn: {red} pixels");
        assert_eq!(median(&chart.targets[0].1), Some(7.5));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
