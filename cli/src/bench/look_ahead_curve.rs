//! `stemflow bench --look-ahead-curve`: separation quality against latency. For each model and
//! each Look-ahead setting, the synthetic demo song (whose stems are known) goes through the
//! whole offline path; the table gives the latency a real-time stream reports, how many times
//! as often the model runs, the real-time factor on this machine and the SDR of each stem. The
//! built-in separator is one point. `--plot FILE.png` draws the curve.

use std::path::Path;
use std::time::Instant;

use stemflow_engine::models_dirs;
use stemflow_engine::runtime::DeviceChoice;
use stemflow_engine::whole_file::{SeparationMode, WholeFileOptions, WholeFileSeparator};
use stemflow_engine::{LookAhead, ModelSpec, SeparatorChoice, Stem, LOOK_AHEAD_CHOICES};
use stemflow_kit::demo_song::DemoSong;
use stemflow_kit::metrics::sdr_db;

use crate::plot::{LinePlot, Marker, Rgb, Series};

const RATE_HZ: u32 = 44_100;

/// One model at one setting.
struct Point {
    model: String,
    latency_s: f64,
    compute_factor: f64,
    real_time_factor: f64,
    /// SDR per stem (vocals, drums, bass, other); `None` where the model leaves the stem silent.
    sdr_db: [Option<f64>; 4],
}

/// Measures every model (plus the built-in) at every setting, prints the table and, with
/// `plot`, writes the PNG.
pub fn look_ahead_curve(
    models: &[String],
    device: DeviceChoice,
    seconds: f32,
    plot: Option<&Path>,
) -> Result<(), String> {
    let mut choices = vec![SeparatorChoice::Builtin];
    for arg in models {
        let choice = SeparatorChoice::resolve(arg, &models_dirs(&[])).map_err(|e| e.to_string())?;
        if !choices.contains(&choice) {
            choices.push(choice);
        }
    }
    let song = DemoSong::generate(RATE_HZ, seconds);
    let mix = song.mix();
    let mut points = Vec::new();
    println!(
        "{:<22} {:>10} {:>10} {:>8} {:>7} {:>9} {:>7} {:>7} {:>7} {:>7}",
        "MODEL",
        "LOOK-AHEAD",
        "LATENCY",
        "COMPUTE",
        "RTF",
        "REALTIME",
        "VOCALS",
        "DRUMS",
        "BASS",
        "OTHER"
    );
    for choice in &choices {
        let settings: &[LookAhead] = if *choice == SeparatorChoice::Builtin {
            &[LookAhead::Full]
        } else {
            &LOOK_AHEAD_CHOICES
        };
        let mut last_latency = None;
        for &look_ahead in settings {
            crate::output::say_err!("Measuring {} at {look_ahead}…", choice.label());
            let point = measure(choice, device, look_ahead, &song, &mix)?;
            // A setting at or above the model's own latency runs as Full: one row is enough.
            if last_latency == Some(point.latency_s) {
                continue;
            }
            last_latency = Some(point.latency_s);
            let sdr = point
                .sdr_db
                .map(|s| s.map_or("–".to_owned(), |v| format!("{v:.2}")));
            println!(
                "{:<22} {:>10} {:>8.0}ms {:>7.1}× {:>7.3} {:>9} {:>7} {:>7} {:>7} {:>7}",
                point.model,
                if *choice == SeparatorChoice::Builtin {
                    "–".to_owned()
                } else {
                    look_ahead.label()
                },
                point.latency_s * 1000.0,
                point.compute_factor,
                point.real_time_factor,
                if point.real_time_factor < 1.0 {
                    "yes"
                } else {
                    "no"
                },
                sdr[0],
                sdr[1],
                sdr[2],
                sdr[3]
            );
            crate::output::flush();
            points.push(point);
        }
    }
    println!(
        "LATENCY: what a real-time stream reports; COMPUTE: model runs relative to Full; RTF: \
         processing time / audio time of the whole offline path on this machine (REALTIME: below \
         1); SDR in dB against the demo song's own {seconds} s stems (– where the model leaves \
         the stem to Other)."
    );
    if let Some(path) = plot {
        plot_points(&points, seconds).write_png(path)?;
        crate::output::say_err!("Wrote {}", path.display());
    }
    Ok(())
}

fn measure(
    choice: &SeparatorChoice,
    device: DeviceChoice,
    look_ahead: LookAhead,
    song: &DemoSong,
    mix: &[Vec<f32>; 2],
) -> Result<Point, String> {
    let options = WholeFileOptions {
        device,
        mode: SeparationMode::Stream(look_ahead),
        ..WholeFileOptions::default()
    };
    let mut separator = WholeFileSeparator::load(&ModelSpec::One(choice.clone()), &options)
        .map_err(|e| e.to_string())?;
    let compute_factor = separator.info().compute_factor();
    let start = Instant::now();
    let separated = separator
        .separate(mix, RATE_HZ, |_| {})
        .map_err(|e| e.to_string())?;
    let elapsed_s = start.elapsed().as_secs_f64();
    // What the plugin reports at this rate (for blocks up to the stream's 100 ms margin).
    let latency_s = separated.latency_samples as f64 / f64::from(RATE_HZ);
    let stems = Stem::FOUR.map(|stem| separated.stem(stem));
    let truth = song.stems();
    let sdr = std::array::from_fn(|i| {
        let is_silent = stems[i].iter().flatten().all(|&x| x == 0.0);
        (!is_silent).then(|| sdr_db(truth[i], stems[i]))
    });
    Ok(Point {
        model: choice.label(),
        latency_s,
        compute_factor,
        real_time_factor: elapsed_s / (mix[0].len() as f64 / f64::from(RATE_HZ)),
        sdr_db: sdr,
    })
}

/// Separator colours: Tableau 10, whose hues stay apart on screen and in print.
const SEPARATOR_PALETTE: [Rgb; 10] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [127, 127, 127],
    [188, 189, 34],
    [23, 190, 207],
];

/// The colour of the `index`-th separator on the chart: the palette, then hues a golden angle
/// apart, so no two separators share a colour however many are measured.
fn separator_colour(index: usize) -> Rgb {
    if let Some(&colour) = SEPARATOR_PALETTE.get(index) {
        return colour;
    }
    let hue = ((index - SEPARATOR_PALETTE.len()) as f64 * 137.507_764 + 15.0).rem_euclid(360.0);
    // HSV with saturation 0.7 and value 0.7.
    let (value, chroma) = (0.7, 0.7 * 0.7);
    let x = chroma * (1.0 - ((hue / 60.0).rem_euclid(2.0) - 1.0).abs());
    let (r, g, b) = match (hue / 60.0) as u32 {
        0 => (chroma, x, 0.0),
        1 => (x, chroma, 0.0),
        2 => (0.0, chroma, x),
        3 => (0.0, x, chroma),
        4 => (x, 0.0, chroma),
        _ => (chroma, 0.0, x),
    };
    let m = value - chroma;
    [r, g, b].map(|c| ((c + m) * 255.0).round() as u8)
}

/// The chart: one colour per separator, one marker per stem.
fn plot_points(points: &[Point], seconds: f32) -> LinePlot {
    let mut series = Vec::new();
    let mut models: Vec<&str> = Vec::new();
    for point in points {
        if !models.contains(&point.model.as_str()) {
            models.push(&point.model);
        }
    }
    for (m, model) in models.iter().enumerate() {
        for (i, stem) in Stem::FOUR.into_iter().enumerate() {
            let line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.model == *model)
                .filter_map(|p| p.sdr_db[i].map(|sdr| (p.latency_s, sdr)))
                .collect();
            if line.is_empty() {
                continue;
            }
            series.push(Series {
                group: (*model).to_owned(),
                variant: stem.file_name().to_owned(),
                colour: separator_colour(m),
                marker: Marker::ALL[i],
                points: line,
            });
        }
    }
    LinePlot {
        title: format!("SDR against latency, demo song {seconds} s"),
        x_label: "latency (s)".into(),
        y_label: "SDR (dB)".into(),
        group_title: "Separator".into(),
        variant_title: "Stem".into(),
        series,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(model: &str, latency_s: f64, sdr_db: [Option<f64>; 4]) -> Point {
        Point {
            model: model.into(),
            latency_s,
            compute_factor: 1.0,
            real_time_factor: 0.5,
            sdr_db,
        }
    }

    #[test]
    fn no_two_separators_share_a_colour() {
        let colours: Vec<Rgb> = (0..64).map(separator_colour).collect();
        for (i, a) in colours.iter().enumerate() {
            for (j, b) in colours.iter().enumerate().skip(i + 1) {
                assert_ne!(a, b, "separators {i} and {j} share a colour");
            }
        }
    }

    #[test]
    fn each_separator_has_one_colour_and_each_stem_one_marker() {
        let all = [Some(1.0), Some(2.0), Some(3.0), Some(4.0)];
        let two_stems = [Some(5.0), None, None, Some(6.0)];
        let points = [
            point("builtin", 0.25, all),
            point("spleeter-2stems", 0.5, two_stems),
            point("spleeter-2stems", 12.0, two_stems),
            point("hybrid-spleeter", 0.5, all),
            point("hybrid-spleeter", 12.0, all),
        ];
        let plot = plot_points(&points, 10.0);
        assert_eq!(plot.series.len(), 4 + 2 + 4);
        let mut colour_of: Vec<(&str, Rgb)> = Vec::new();
        for series in &plot.series {
            match colour_of.iter().find(|(g, _)| *g == series.group) {
                Some((_, colour)) => assert_eq!(*colour, series.colour, "{}", series.group),
                None => {
                    assert!(
                        colour_of.iter().all(|(_, c)| *c != series.colour),
                        "{} repeats a colour",
                        series.group
                    );
                    colour_of.push((&series.group, series.colour));
                }
            }
            let stem = Stem::FOUR
                .iter()
                .position(|s| s.file_name() == series.variant)
                .unwrap();
            assert_eq!(series.marker, Marker::ALL[stem]);
        }
        assert_eq!(colour_of.len(), 3);
        // Spleeter's two stems keep vocals and other, at both latencies.
        let spleeter: Vec<_> = plot
            .series
            .iter()
            .filter(|s| s.group == "spleeter-2stems")
            .map(|s| (s.variant.as_str(), s.points.len()))
            .collect();
        assert_eq!(spleeter, [("vocals", 2), ("other", 2)]);
    }
}
