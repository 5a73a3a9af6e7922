//! What `stemflow eval` prints: a table of every track's SDR and uSDR per target with the
//! medians and means over tracks, or the same as JSON (with each track's one-second windows).

use std::fmt::Write;

use serde_json::{json, Value};

use super::evaluate::TrackResult;

/// The targets in the order they first appear.
pub fn target_names(results: &[TrackResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for result in results {
        for name in &result.target_names {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
    }
    names
}

/// `(SDR, uSDR)` of `target` in `result`, when it has that target.
fn scores_of(result: &TrackResult, target: &str) -> Option<(f64, f64)> {
    let index = result.target_names.iter().position(|n| n == target)?;
    let score = &result.scores.targets[index];
    Some((score.sdr_db, score.usdr_db))
}

/// The finite values' median and mean, and how many there were.
pub fn aggregate(values: &[f64]) -> (f64, f64, usize) {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return (f64::NAN, f64::NAN, 0);
    }
    let mean = finite.iter().sum::<f64>() / finite.len() as f64;
    (
        stemflow_kit::bsseval::nan_median(&finite),
        mean,
        finite.len(),
    )
}

/// Each track's SDR (or uSDR when `usdr`) of `target`, NaN where a track has none.
pub fn column(results: &[TrackResult], target: &str, usdr: bool) -> Vec<f64> {
    results
        .iter()
        .map(|r| scores_of(r, target).map_or(f64::NAN, |(s, u)| if usdr { u } else { s }))
        .collect()
}

/// "6.21", "n/a", "+inf".
fn cell(value: f64) -> String {
    if value.is_nan() {
        "n/a".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+inf" } else { "-inf" }.into()
    } else {
        format!("{value:.2}")
    }
}

/// The table: a row per track (its targets' SDR and uSDR in dB, its time), then the median
/// and the mean over tracks.
pub fn table(results: &[TrackResult], failed: &[(String, String)]) -> String {
    let targets = target_names(results);
    let name_width = results
        .iter()
        .map(|r| label(r).chars().count())
        .chain([24])
        .max()
        .unwrap_or(24)
        .min(48);
    let mut out = String::new();
    let _ = write!(out, "{:name_width$}", "");
    for target in &targets {
        let _ = write!(out, "  {target:>15}");
    }
    let _ = writeln!(out, "  {:>18}", "time");
    let _ = write!(out, "{:name_width$}", "track");
    for _ in &targets {
        let _ = write!(out, "  {:>7} {:>7}", "SDR", "uSDR");
    }
    let _ = writeln!(out);
    for result in results {
        let name: String = label(result).chars().take(name_width).collect();
        let _ = write!(out, "{name:name_width$}");
        for target in &targets {
            let (sdr, usdr) = scores_of(result, target).unwrap_or((f64::NAN, f64::NAN));
            let _ = write!(out, "  {:>7} {:>7}", cell(sdr), cell(usdr));
        }
        let rtf = result.elapsed_s / result.audio_s.max(1e-9);
        let _ = write!(out, "  {:>7.1} s (RTF {rtf:.2})", result.elapsed_s);
        if let Some(refusal) = &result.scores.refusal {
            let _ = write!(out, "  museval refuses it: {refusal}");
        }
        let _ = writeln!(out);
    }
    for (row, pick) in [("median over tracks", 0), ("mean over tracks", 1)] {
        let _ = write!(out, "{row:name_width$}");
        for target in &targets {
            let sdr = aggregate(&column(results, target, false));
            let usdr = aggregate(&column(results, target, true));
            let (sdr, usdr) = if pick == 0 {
                (sdr.0, usdr.0)
            } else {
                (sdr.1, usdr.1)
            };
            let _ = write!(out, "  {:>7} {:>7}", cell(sdr), cell(usdr));
        }
        let _ = writeln!(out);
    }
    for (name, error) in failed {
        let _ = writeln!(out, "{name}: not evaluated: {error}");
    }
    out
}

/// "test/Track name", or the name alone outside MUSDB18's layout.
fn label(result: &TrackResult) -> String {
    match &result.track.subset {
        Some(subset) => format!("{subset}/{}", result.track.name),
        None => result.track.name.clone(),
    }
}

/// A finite number, or null (JSON has no NaN or infinity).
fn number(value: f64) -> Value {
    if value.is_finite() {
        json!(value)
    } else {
        Value::Null
    }
}

/// The results as JSON: every track's targets (SDR, uSDR, the one-second windows' SDR), the
/// tracks that failed, and per target the median and mean over tracks.
pub fn json(
    model: &str,
    dir: &std::path::Path,
    results: &[TrackResult],
    failed: &[(String, String)],
) -> Value {
    let tracks: Vec<Value> = results
        .iter()
        .map(|result| {
            let mut targets = serde_json::Map::new();
            for (name, score) in result.target_names.iter().zip(&result.scores.targets) {
                targets.insert(
                    name.clone(),
                    json!({
                        "sdr": number(score.sdr_db),
                        "usdr": number(score.usdr_db),
                        "sdr_frames": score.sdr_frames_db.iter().map(|&v| number(v)).collect::<Vec<_>>(),
                    }),
                );
            }
            json!({
                "name": result.track.name,
                "subset": result.track.subset,
                "audio_s": result.audio_s,
                "elapsed_s": result.elapsed_s,
                "real_time_factor": result.elapsed_s / result.audio_s.max(1e-9),
                "museval_refuses": result.scores.refusal.as_ref().map(ToString::to_string),
                "targets": targets,
            })
        })
        .collect();
    let mut summary = serde_json::Map::new();
    for target in target_names(results) {
        let (sdr_median, sdr_mean, count) = aggregate(&column(results, &target, false));
        let (usdr_median, usdr_mean, usdr_count) = aggregate(&column(results, &target, true));
        summary.insert(
            target,
            json!({
                "sdr_median": number(sdr_median),
                "sdr_mean": number(sdr_mean),
                "sdr_tracks": count,
                "usdr_median": number(usdr_median),
                "usdr_mean": number(usdr_mean),
                "usdr_tracks": usdr_count,
            }),
        );
    }
    json!({
        "model": model,
        "dataset": dir.display().to_string(),
        "metrics": {
            "sdr": "BSSEval v4 SDR as museval.eval_mus_track computes it: 1 s windows and hops, the median over windows",
            "usdr": "the MDX challenge's SDR of the whole track, 10·log10((Σs² + 1e-7) / (Σ(s − ŝ)² + 1e-7))",
        },
        "tracks": tracks,
        "failed": failed.iter().map(|(name, error)| json!({"name": name, "error": error})).collect::<Vec<_>>(),
        "summary": summary,
    })
}
