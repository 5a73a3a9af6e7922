//! `stemflow eval` against museval: tracks and estimates made from integers by the generator of
//! `models/eval_reference.py` (repeated here sample for sample), scored by museval 0.4.1's
//! `eval_mus_track` once (`tests/fixtures/eval/museval.json`) and by Stemflow here; and a model's
//! scores against what `stemflow separate` writes.

mod common;

use std::path::{Path, PathBuf};

use common::{path_str, read_wav, run, scratch_dir, separate_args, text, write_wav};
use serde_json::Value;

const STEMS: [&str; 4] = ["vocals", "drums", "bass", "other"];
const AMPLITUDE: [i64; 4] = [6000, 5000, 4000, 3000];
/// The bound the issue sets.
const LIMIT_DB: f64 = 0.01;

/// One of the script's tracks: name, rate, frames, seed, silent reference spans, muted
/// estimate spans.
struct Track {
    name: &'static str,
    rate: u32,
    frames: usize,
    seed: u64,
    silences: &'static [(&'static str, usize, usize)],
    muted: &'static [(&'static str, usize, usize)],
}

const TRACKS: [Track; 4] = [
    Track {
        name: "Alpha",
        rate: 44_100,
        frames: 198_450,
        seed: 1,
        silences: &[("vocals", 44_100, 88_200)],
        muted: &[("drums", 88_200, 132_300)],
    },
    Track {
        name: "Beta",
        rate: 22_050,
        frames: 49_613,
        seed: 2,
        silences: &[("bass", 0, 30_000), ("other", 40_000, 49_613)],
        muted: &[],
    },
    Track {
        name: "Gamma",
        rate: 44_100,
        frames: 26_460,
        seed: 3,
        silences: &[],
        muted: &[],
    },
    Track {
        name: "Delta",
        rate: 44_100,
        frames: 60_000,
        seed: 4,
        silences: &[("bass", 0, 60_000)],
        muted: &[],
    },
];

/// `noise(seed, n, a)` of the script: a 32-bit LCG's `(x >> 16) % (2a + 1) − a`.
fn noise(seed: u64, n: usize, amplitude: i64) -> Vec<i64> {
    let mut x = seed & 0xFFFF_FFFF;
    (0..n)
        .map(|_| {
            x = (1_664_525 * x + 1_013_904_223) & 0xFFFF_FFFF;
            ((x >> 16) % (2 * amplitude as u64 + 1)) as i64 - amplitude
        })
        .collect()
}

type Stereo = [Vec<i64>; 2];

impl Track {
    /// The references and estimates, int16 values, as the script makes them.
    fn generate(&self) -> (Vec<Stereo>, Vec<Stereo>) {
        let n = self.frames;
        let references: Vec<Stereo> = STEMS
            .iter()
            .enumerate()
            .map(|(k, stem)| {
                let left = noise(self.seed * 16 + k as u64, n, AMPLITUDE[k]);
                let other = noise(self.seed * 16 + k as u64 + 8, n, AMPLITUDE[k]);
                let right: Vec<i64> = left.iter().zip(&other).map(|(a, b)| (a + b) >> 1).collect();
                let mut reference = [left, right];
                for &(name, start, end) in self.silences {
                    if name == *stem {
                        reference.iter_mut().for_each(|c| c[start..end].fill(0));
                    }
                }
                reference
            })
            .collect();
        let estimates = STEMS
            .iter()
            .enumerate()
            .map(|(k, stem)| {
                let extra = noise(self.seed * 16 + k as u64 + 4, n, 600);
                let mut estimate: Stereo = std::array::from_fn(|c| {
                    (0..n)
                        .map(|t| {
                            let value = references[k][c][t]
                                + (references[(k + 1) % 4][c][t] >> 3)
                                + extra[t];
                            value.clamp(-32_768, 32_767)
                        })
                        .collect()
                });
                for &(name, start, end) in self.muted {
                    if name == *stem {
                        estimate.iter_mut().for_each(|c| c[start..end].fill(0));
                    }
                }
                estimate
            })
            .collect();
        (references, estimates)
    }
}

fn write_int16(path: &Path, rate: u32, signal: &Stereo) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let channels: Vec<Vec<f32>> = signal
        .iter()
        .map(|c| c.iter().map(|&v| v as f32 / 32_768.0).collect())
        .collect();
    write_wav(path, rate, &channels, 16, false);
}

/// Writes the script's tracks in MUSDB18's layout under `dir/data`, their estimates under
/// `dir/estimates`.
fn write_dataset(dir: &Path) -> (PathBuf, PathBuf) {
    let data = dir.join("data");
    let estimates = dir.join("estimates");
    for track in &TRACKS {
        let (references, ests) = track.generate();
        let folder = data.join("test").join(track.name);
        let mixture: Stereo = std::array::from_fn(|c| {
            (0..track.frames)
                .map(|t| references.iter().map(|r| r[c][t]).sum())
                .collect()
        });
        write_int16(&folder.join("mixture.wav"), track.rate, &mixture);
        for (k, stem) in STEMS.iter().enumerate() {
            write_int16(
                &folder.join(format!("{stem}.wav")),
                track.rate,
                &references[k],
            );
            let est = estimates
                .join("test")
                .join(track.name)
                .join(format!("{stem}.wav"));
            write_int16(&est, track.rate, &ests[k]);
        }
    }
    (data, estimates)
}

fn museval() -> Value {
    let path = common::fixture("eval/museval.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Whether `ours` (a number or null) is museval's `theirs` within `LIMIT_DB` (NaN as null).
fn close(ours: &Value, theirs: &Value) -> bool {
    match (ours.as_f64(), theirs.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= LIMIT_DB,
        (None, None) => true,
        _ => false,
    }
}

/// The track called `name` in an eval report.
fn track<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} was not evaluated"))
}

#[test]
fn sdr_and_usdr_equal_musevals_on_the_fixture_tracks() {
    let dir = scratch_dir("eval-museval");
    let (data, estimates) = write_dataset(&dir);
    let output = run(&[
        "eval",
        path_str(&data),
        "--estimates",
        path_str(&estimates),
        "--json",
        "--quiet",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let ours: Value = serde_json::from_slice(&output.stdout).unwrap();
    let theirs = museval();
    let mut compared = 0;
    for expected in theirs["tracks"].as_array().unwrap() {
        let name = expected["name"].as_str().unwrap();
        let track = track(&ours, name);
        assert_eq!(
            track["museval_refuses"].is_string(),
            expected.get("error").is_some(),
            "{name}: museval's refusal"
        );
        for stem in STEMS {
            let (ours, theirs) = (&track["targets"][stem], &expected["targets"][stem]);
            assert!(
                close(&ours["usdr"], &theirs["usdr"]),
                "{name} {stem} uSDR: {ours} vs {theirs}"
            );
            if expected.get("error").is_some() {
                assert!(ours["sdr"].is_null(), "{name} {stem}: refused, yet {ours}");
                continue;
            }
            assert!(
                close(&ours["sdr"], &theirs["sdr"]),
                "{name} {stem} SDR: {ours} vs {theirs}"
            );
            let frames = (
                ours["sdr_frames"].as_array().unwrap(),
                theirs["sdr_frames"].as_array().unwrap(),
            );
            assert_eq!(frames.0.len(), frames.1.len(), "{name} {stem} windows");
            for (a, b) in frames.0.iter().zip(frames.1) {
                assert!(close(a, b), "{name} {stem} window: {a} vs {b}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 12, "three tracks of four targets scored");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn as_pair(signal: &[Vec<f32>]) -> [&[f32]; 2] {
    [signal[0].as_slice(), signal[1].as_slice()]
}

#[test]
fn a_models_scores_are_those_of_the_stems_separate_writes() {
    let dir = scratch_dir("eval-model");
    let (data, _) = write_dataset(&dir);
    // Two short tracks at 44.1 kHz with no silent reference.
    let tracks = data.join("test");
    for name in ["Alpha", "Delta"] {
        std::fs::remove_dir_all(tracks.join(name)).unwrap();
    }
    let eval = |extra: &[&str]| -> Value {
        let mut args = vec!["eval", path_str(&data), "--json", "--quiet"];
        args.extend_from_slice(extra);
        let output = run(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        serde_json::from_slice(&output.stdout).unwrap()
    };
    let builtin = eval(&["--model", "builtin"]);
    // An average of the same separator twice is that separator.
    let ensemble = eval(&["--model", "builtin+builtin", "--ensemble", "avg_wave"]);
    assert_eq!(ensemble["model"], "builtin + builtin (avg_wave)");
    for name in ["Beta", "Gamma"] {
        let out = dir.join("stems");
        let mixture = tracks.join(name).join("mixture.wav");
        let output = run(&separate_args(
            &mixture,
            &out,
            &["--bit-depth", "32f", "-q"],
        ));
        assert!(output.status.success(), "{}", text(&output.stderr));
        let (scored, averaged) = (track(&builtin, name), track(&ensemble, name));
        let mut scorer = None;
        let mut signals = Vec::new();
        for stem in STEMS {
            let (spec, reference) = read_wav(&tracks.join(name).join(format!("{stem}.wav")));
            let (_, estimate) = read_wav(&out.join("mixture").join(format!("{stem}.wav")));
            scorer.get_or_insert(spec.sample_rate);
            signals.push((reference, estimate));
        }
        let mut tracker = stemflow_kit::bsseval::TrackScorer::new(4, scorer.unwrap());
        let references: Vec<_> = signals.iter().map(|(r, _)| as_pair(r)).collect();
        let estimates: Vec<_> = signals.iter().map(|(_, e)| as_pair(e)).collect();
        tracker.push(&references, &estimates);
        let expected = tracker.finish();
        for (stem, score) in STEMS.iter().zip(&expected.targets) {
            let ours = &scored["targets"][stem];
            assert!(
                (ours["usdr"].as_f64().unwrap() - score.usdr_db).abs() < 1e-9,
                "{name} {stem}"
            );
            let sdr = ours["sdr"].as_f64().unwrap();
            assert!(
                (sdr - score.sdr_db).abs() < 1e-9,
                "{name} {stem}: {sdr} vs {}",
                score.sdr_db
            );
            // The ensemble computes Other (the input less the stems) itself, rounded otherwise.
            let averaged = averaged["targets"][stem]["usdr"].as_f64().unwrap();
            assert!(
                (averaged - score.usdr_db).abs() < 1e-6,
                "{name} {stem}: {averaged} vs {}",
                score.usdr_db
            );
        }
        std::fs::remove_dir_all(&out).unwrap();
    }
    // The table and the chart.
    let plot = dir.join("sdr.png");
    let output = run(&[
        "eval",
        path_str(&data),
        "--quiet",
        "--plot",
        path_str(&plot),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    assert!(
        table.contains("median over tracks") && table.contains("test/Gamma"),
        "{table}"
    );
    assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn musdb18s_stem_mp4_files_are_refused_with_what_to_do() {
    let dir = scratch_dir("eval-stem-mp4");
    std::fs::create_dir_all(dir.join("test")).unwrap();
    std::fs::write(dir.join("test").join("A Song.stem.mp4"), b"").unwrap();
    let output = run(&["eval", path_str(&dir), "--quiet"]);
    assert_eq!(output.status.code(), Some(1));
    let error = text(&output.stderr);
    assert!(
        error.contains(".stem.mp4") && error.contains("MUSDB18-HQ"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
