//! `stemflow bench --instances N`: N separators of the same model on the same device in one
//! process, as N plugin instances are — sharing one session (the weights once), its runs
//! served first come, first served — each separating the demo song hop by hop at once. Rows for
//! 1 and N instances: sessions alive, peak RSS, wall time, model runs per second (all together
//! and per instance, slowest and fastest) and each run's time including the wait for the
//! session (median, 95th percentile, max).

use std::sync::{Arc, Barrier};
use std::time::Instant;

use stemflow_engine::runtime::{live_session_count, DeviceChoice};
use stemflow_engine::SeparatorChoice;
use stemflow_kit::demo_song::DemoSong;

use super::hop_timing::run_hops;
use crate::memory::{peak_rss_bytes, reset_peak_rss};

/// One row: `instances` separators at once.
struct InstancesRow {
    instances: usize,
    device: String,
    sessions: usize,
    peak_rss_bytes: Option<u64>,
    wall_s: f64,
    /// Per instance: model runs and their times (ms, wait included), and its wall time.
    per_instance: Vec<(Vec<f64>, f64)>,
}

impl InstancesRow {
    fn runs(&self) -> usize {
        self.per_instance.iter().map(|(runs, _)| runs.len()).sum()
    }

    /// Runs per second of each instance over its own wall time, slowest first.
    fn instance_rates(&self) -> Vec<f64> {
        let mut rates: Vec<f64> = self
            .per_instance
            .iter()
            .map(|(runs, wall_s)| runs.len() as f64 / wall_s.max(1e-9))
            .collect();
        rates.sort_by(f64::total_cmp);
        rates
    }

    /// Every run's time (ms, wait included), sorted.
    fn run_ms(&self) -> Vec<f64> {
        let mut all: Vec<f64> = self
            .per_instance
            .iter()
            .flat_map(|(runs, _)| runs.iter().copied())
            .collect();
        all.sort_by(f64::total_cmp);
        all
    }
}

/// Runs 1 and `instances` separators of `model` on `choice` at once over `seconds` of the demo
/// song, and prints the rows (JSON with `is_json`).
pub fn bench_instances(
    model_arg: &str,
    choice: DeviceChoice,
    seconds: f32,
    instances: usize,
    is_json: bool,
) -> Result<(), String> {
    let dirs = stemflow_engine::models_dirs(&[]);
    let model = SeparatorChoice::resolve(model_arg, &dirs).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for count in [1, instances.max(1)] {
        if rows.iter().any(|r: &InstancesRow| r.instances == count) {
            continue;
        }
        if !is_json {
            crate::output::say_err!(
                "Measuring {} instance(s) of {} on {}…",
                count,
                model.label(),
                choice.id()
            );
        }
        rows.push(measure(&model, choice, seconds, count)?);
    }
    if is_json {
        let rows: Vec<serde_json::Value> = rows.iter().map(row_json).collect();
        let value = serde_json::json!({"model": model.label(), "seconds": seconds, "rows": rows});
        crate::output::say!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    crate::output::say!(
        "{} on {}: {seconds:.1} s of the demo song per instance; run ms = one model run, waiting \
         for the shared session included",
        model.label(),
        rows[0].device
    );
    crate::output::say!(
        "{:>9} {:>8} {:>9} {:>8} {:>7} {:>11} {:>17} {:>10} {:>9} {:>9}",
        "INSTANCES",
        "SESSIONS",
        "PEAK RSS",
        "WALL s",
        "RUNS",
        "RUNS/s ALL",
        "RUNS/s PER INST.",
        "RUN ms MED",
        "p95",
        "max"
    );
    for row in &rows {
        let rates = row.instance_rates();
        let ms = row.run_ms();
        let pick = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
        crate::output::say!(
            "{:>9} {:>8} {:>9} {:>8.1} {:>7} {:>11.3} {:>17} {:>10.0} {:>9.0} {:>9.0}",
            row.instances,
            row.sessions,
            row.peak_rss_bytes
                .map_or_else(|| "n/a".into(), |b| format!("{:.0} MB", b as f64 / 1e6)),
            row.wall_s,
            row.runs(),
            row.runs() as f64 / row.wall_s,
            format!("{:.3}–{:.3}", rates[0], rates[rates.len() - 1]),
            pick(0.5),
            pick(0.95),
            pick(1.0)
        );
    }
    Ok(())
}

/// `count` separators built (sharing their session), then run at once from a barrier.
fn measure(
    model: &SeparatorChoice,
    choice: DeviceChoice,
    seconds: f32,
    count: usize,
) -> Result<InstancesRow, String> {
    reset_peak_rss();
    let mut separators = Vec::with_capacity(count);
    for _ in 0..count {
        separators.push(model.build(choice).map_err(|e| e.to_string())?);
    }
    let device = separators[0]
        .device()
        .map_or_else(|| "cpu".to_owned(), |a| a.actual.to_string());
    let rate_hz = separators[0].info().sample_rate_hz();
    let mix = Arc::new(DemoSong::generate(rate_hz, seconds).mix());
    let sessions = live_session_count();
    let start = Arc::new(Barrier::new(count));
    let began = Instant::now();
    let threads: Vec<_> = separators
        .into_iter()
        .map(|mut separator| {
            let (start, mix) = (start.clone(), mix.clone());
            std::thread::spawn(move || -> Result<(Vec<f64>, f64), String> {
                start.wait();
                let t = Instant::now();
                let (_, runs) = run_hops(separator.as_mut(), &mix)?;
                Ok((runs, t.elapsed().as_secs_f64()))
            })
        })
        .collect();
    let mut per_instance = Vec::with_capacity(count);
    for thread in threads {
        per_instance.push(
            thread
                .join()
                .map_err(|_| "an instance panicked".to_owned())??,
        );
    }
    let row = InstancesRow {
        instances: count,
        device,
        sessions,
        peak_rss_bytes: peak_rss_bytes(),
        wall_s: began.elapsed().as_secs_f64(),
        per_instance,
    };
    if row.runs() == 0 {
        return Err(format!(
            "{} ran no model (the built-in separator?)",
            model.label()
        ));
    }
    Ok(row)
}

fn row_json(row: &InstancesRow) -> serde_json::Value {
    let ms = row.run_ms();
    serde_json::json!({
        "instances": row.instances,
        "device": row.device,
        "sessions": row.sessions,
        "peak_rss_bytes": row.peak_rss_bytes,
        "wall_s": row.wall_s,
        "runs": row.runs(),
        "runs_per_s": row.runs() as f64 / row.wall_s,
        "instance_runs_per_s": row.instance_rates(),
        "run_ms_median": ms[ms.len() / 2],
        "run_ms_p95": ms[((ms.len() - 1) as f64 * 0.95).round() as usize],
        "run_ms_max": ms[ms.len() - 1],
    })
}
