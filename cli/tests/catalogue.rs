//! Catalogues: `stemflow separate --manifest` with `--json` result lines, resumable reruns,
//! `--shard`, a long-lived standard-input worker, and the Ray and Kubernetes examples built on
//! them (`examples/`).

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::*;

/// Writes `count` short songs of different content into `dir/songs/`, and a manifest listing
/// them (relative paths) with one named output, one missing file and one bad line.
fn catalogue(dir: &Path, count: usize) -> PathBuf {
    let songs = dir.join("songs");
    std::fs::create_dir_all(&songs).unwrap();
    let mut lines = Vec::new();
    for i in 0..count {
        let frames = 30_000 + 1_000 * i;
        let left: Vec<f32> = music(frames, 44_100, 0)
            .iter()
            .map(|x| x * (1.0 - 0.05 * i as f32))
            .collect();
        let right = music(frames, 44_100, 1 + i);
        write_wav(
            &songs.join(format!("song{i}.wav")),
            44_100,
            &[left, right],
            16,
            false,
        );
        lines.push(if i == 0 {
            r#"{"input": "songs/song0.wav", "output": "first"}"#.to_owned()
        } else {
            format!(r#"{{"input": "songs/song{i}.wav"}}"#)
        });
    }
    let manifest = dir.join("list.jsonl");
    std::fs::write(&manifest, lines.join("\n") + "\n").unwrap();
    manifest
}

fn result_lines(stdout: &[u8]) -> Vec<serde_json::Value> {
    text(stdout)
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))
        })
        .collect()
}

fn by_input(lines: &[serde_json::Value]) -> BTreeMap<String, serde_json::Value> {
    let mut map = BTreeMap::new();
    for line in lines {
        let input = line["input"].as_str().unwrap().to_owned();
        assert!(
            map.insert(input.clone(), line.clone()).is_none(),
            "{input} reported twice"
        );
    }
    map
}

fn modified(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

#[test]
fn a_manifest_run_reports_each_input_and_a_rerun_skips_what_is_done() {
    let dir = scratch_dir("manifest");
    let manifest = catalogue(&dir, 3);
    // A missing file and a bad line fail alone; the rest is separated.
    let mut text_lines = std::fs::read_to_string(&manifest).unwrap();
    text_lines.push_str("{\"input\": \"songs/missing.wav\"}\n{\"input\": 3}\n");
    std::fs::write(&manifest, text_lines).unwrap();
    let out = dir.join("stems");
    let args = manifest_args(&manifest, &out, &["--json"]);
    let first = run(&args);
    assert_eq!(first.status.code(), Some(1), "{}", text(&first.stderr));
    let lines = result_lines(&first.stdout);
    assert_eq!(
        lines.len(),
        5,
        "one line per manifest line: {}",
        text(&first.stdout)
    );
    let results = by_input(&lines);
    for song in ["songs/song0.wav", "songs/song1.wav", "songs/song2.wav"] {
        let line = &results[song];
        assert_eq!(line["status"], "separated", "{line}");
        assert_eq!(line["outputs"].as_array().unwrap().len(), 4, "{line}");
        assert!(line["real_time_factor"].as_f64().unwrap() > 0.0, "{line}");
        assert!(line["error"].is_null(), "{line}");
    }
    assert_eq!(results["songs/missing.wav"]["status"], "failed");
    assert!(results["songs/missing.wav"]["error"]
        .as_str()
        .unwrap()
        .contains("missing.wav"));
    let bad = lines
        .iter()
        .find(|l| l["error"].as_str().is_some_and(|e| e.contains("line 5")))
        .unwrap();
    assert_eq!(bad["status"], "failed");
    assert!(
        out.join("first/vocals.wav").is_file(),
        "the manifest's output name is used"
    );
    assert!(out.join("song1/stemflow-result.json").is_file());
    assert!(
        !out.join("missing").exists(),
        "a failed input leaves no folder"
    );

    // The stems are exactly what a plain run writes.
    let plain = dir.join("plain");
    let single = run(&separate_args(
        &dir.join("songs/song1.wav"),
        &plain,
        &["--quiet"],
    ));
    assert!(single.status.success(), "{}", text(&single.stderr));
    for stem in ["vocals", "drums", "bass", "other"] {
        let a = std::fs::read(out.join(format!("song1/{stem}.wav"))).unwrap();
        let b = std::fs::read(plain.join(format!("song1/{stem}.wav"))).unwrap();
        assert!(a == b, "{stem} differs from a plain run");
    }

    // A rerun skips every done input and writes nothing.
    let before = modified(&out.join("song2/drums.wav"));
    let rerun = run(&args);
    let results = by_input(&result_lines(&rerun.stdout));
    for song in ["songs/song0.wav", "songs/song1.wav", "songs/song2.wav"] {
        assert_eq!(results[song]["status"], "skipped", "{}", results[song]);
        assert_eq!(results[song]["outputs"].as_array().unwrap().len(), 4);
    }
    assert_eq!(
        modified(&out.join("song2/drums.wav")),
        before,
        "a skipped input was rewritten"
    );

    // A changed input, a changed setting or a lost stem is done again.
    let (_, mut channels) = read_wav(&dir.join("songs/song2.wav"));
    channels[0][100] += 0.25;
    write_wav(&dir.join("songs/song2.wav"), 44_100, &channels, 16, false);
    std::fs::remove_file(out.join("song1/bass.wav")).unwrap();
    let third = run(&args);
    let results = by_input(&result_lines(&third.stdout));
    assert_eq!(results["songs/song0.wav"]["status"], "skipped");
    assert_eq!(
        results["songs/song1.wav"]["status"], "separated",
        "a lost stem is redone"
    );
    assert_eq!(
        results["songs/song2.wav"]["status"], "separated",
        "a changed input is redone"
    );
    let other_depth = run(&[&args[..], &["--bit-depth", "24"]].concat());
    let results = by_input(&result_lines(&other_depth.stdout));
    assert_eq!(
        results["songs/song0.wav"]["status"], "separated",
        "a changed setting is redone"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shards_split_a_manifest_so_every_input_is_separated_exactly_once() {
    let dir = scratch_dir("shards");
    let manifest = catalogue(&dir, 6);
    let out = dir.join("stems");
    let mut seen = BTreeMap::new();
    for shard in ["0/3", "1/3", "2/3"] {
        let output = run(&manifest_args(
            &manifest,
            &out,
            &["--json", "--shard", shard],
        ));
        assert!(output.status.success(), "{shard}: {}", text(&output.stderr));
        for line in result_lines(&output.stdout) {
            assert_eq!(line["status"], "separated", "{line}");
            let input = line["input"].as_str().unwrap().to_owned();
            assert!(seen.insert(input, shard).is_none(), "{line} in two shards");
        }
    }
    assert_eq!(seen.len(), 6, "{seen:?}");
    for bad in ["3/3", "x", "1/0"] {
        let output = run(&[
            "separate",
            "--manifest",
            path_str(&manifest),
            "--shard",
            bad,
        ]);
        assert_eq!(output.status.code(), Some(2), "--shard {bad}");
    }
    let both = run(&["separate", "a.wav", "--manifest", path_str(&manifest)]);
    assert_eq!(
        both.status.code(),
        Some(2),
        "inputs and a manifest together"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn inputs_named_on_the_command_line_get_result_lines_and_shards_too() {
    let dir = scratch_dir("path-json");
    catalogue(&dir, 4);
    let songs: Vec<String> = (0..4)
        .map(|i| path_str(&dir.join(format!("songs/song{i}.wav"))).to_owned())
        .collect();
    let out = dir.join("stems");
    let mut seen = BTreeMap::new();
    for shard in ["0/2", "1/2"] {
        let mut args = vec!["separate", "--json", "--shard", shard, "-o", path_str(&out)];
        args.extend(songs.iter().map(String::as_str));
        let output = run(&args);
        assert!(output.status.success(), "{shard}: {}", text(&output.stderr));
        for line in result_lines(&output.stdout) {
            assert_eq!(line["status"], "separated", "{line}");
            assert!(line["audio_seconds"].as_f64().unwrap() > 0.6, "{line}");
            let input = line["input"].as_str().unwrap().to_owned();
            assert!(seen.insert(input, shard).is_none(), "{line} in two shards");
        }
    }
    assert_eq!(seen.len(), 4, "every input in one shard: {seen:?}");
}

#[test]
fn a_standard_input_worker_answers_each_line_before_reading_the_next() {
    let dir = scratch_dir("stdin-worker");
    catalogue(&dir, 2);
    let out = dir.join("stems");
    let mut worker = Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args([
            "separate",
            "--manifest",
            "-",
            "--json",
            "-o",
            path_str(&out),
        ])
        .current_dir(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("STEMFLOW_ORT_LIB")
        .spawn()
        .unwrap();
    let mut stdin = worker.stdin.take().unwrap();
    let mut stdout = BufReader::new(worker.stdout.take().unwrap());
    for i in 0..2 {
        // The line is answered while standard input stays open.
        writeln!(stdin, r#"{{"input": "songs/song{i}.wav"}}"#).unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let result: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(result["status"], "separated", "{result}");
        assert!(out.join(format!("song{i}/vocals.wav")).is_file());
    }
    drop(stdin);
    let status = worker.wait().unwrap();
    assert!(status.success());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The Kubernetes example: each pod of the Indexed Job runs its own shard of the manifest.
#[test]
fn the_kubernetes_job_runs_one_shard_per_completion_index() {
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/kubernetes/stemflow-job.yaml");
    let yaml = std::fs::read_to_string(&example).unwrap();
    let completions: u64 = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("completions:"))
        .expect("completions")
        .trim()
        .parse()
        .unwrap();
    assert!(yaml.contains("completionMode: Indexed"), "an Indexed Job");
    let parallelism_ok = yaml.lines().any(|l| l.trim().starts_with("parallelism:"));
    assert!(parallelism_ok);
    // The container's command, as the pod's shell would run it with its index.
    let start = yaml.find("STEMFLOW_COMMAND_BEGIN").expect("command marker");
    let end = yaml.find("STEMFLOW_COMMAND_END").expect("command marker");
    let script = yaml[start..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "args:" && *l != "- >-" && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let command = script
        .strip_prefix("exec ")
        .expect("the pod execs stemflow");
    let mut shards = Vec::new();
    for index in 0..completions {
        let rendered = Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s\\n' {command}"))
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("SHARDS", completions.to_string())
            .output()
            .unwrap();
        let argv: Vec<String> = text(&rendered.stdout).lines().map(str::to_owned).collect();
        assert_eq!(argv[0], "stemflow", "{argv:?}");
        assert_eq!(argv[1], "separate");
        let flag = |name: &str| {
            argv.iter()
                .position(|a| a == name)
                .map(|i| argv[i + 1].clone())
        };
        assert_eq!(
            flag("--manifest").as_deref(),
            Some("/data/manifest.jsonl"),
            "{argv:?}"
        );
        assert_eq!(
            flag("--shard"),
            Some(format!("{index}/{completions}")),
            "{argv:?}"
        );
        assert!(flag("-o").unwrap().starts_with("/data/"), "{argv:?}");
        assert!(argv.iter().any(|a| a == "--json"), "{argv:?}");
        shards.push(flag("--shard").unwrap());
    }
    // The pods' shards cover the manifest: each is a valid, distinct shard of the same split.
    shards.dedup();
    assert_eq!(shards.len() as u64, completions);
}

/// Runs `examples/ray/stemflow_ray.py` on a local Ray with two workers.
fn run_ray_example(
    python: &str,
    manifest: &Path,
    out: &Path,
    results: &Path,
) -> std::process::Output {
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/ray/stemflow_ray.py");
    Command::new(python)
        .arg(example)
        .args(["--manifest", path_str(manifest), "--output", path_str(out)])
        .args(["--results", path_str(results)])
        .args([
            "--stemflow",
            env!("CARGO_BIN_EXE_stemflow"),
            "--workers",
            "2",
            "--local",
        ])
        .env_remove("STEMFLOW_ORT_LIB")
        .output()
        .unwrap()
}

/// The Ray example on a local Ray instance with two workers: every input is separated exactly
/// once and the stems equal a single-process run. Needs the Python environment with Ray that
/// `cargo xtask test` prepares (`STEMFLOW_TEST_RAY_PYTHON`).
#[test]
fn the_ray_example_separates_every_input_exactly_once_like_one_process() {
    let python = std::env::var("STEMFLOW_TEST_RAY_PYTHON").expect(
        "STEMFLOW_TEST_RAY_PYTHON must name a Python with ray[data]: run the tests with `cargo xtask test`",
    );
    let dir = scratch_dir("ray");
    let manifest = catalogue(&dir, 6);
    let out = dir.join("ray-stems");
    let results = dir.join("results");
    let output = run_ray_example(&python, &manifest, &out, &results);
    assert!(
        output.status.success(),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(&results).unwrap() {
        let path = entry.unwrap().path();
        if path
            .extension()
            .is_some_and(|e| e == "json" || e == "jsonl")
        {
            for line in std::fs::read_to_string(&path)
                .unwrap()
                .lines()
                .filter(|l| !l.trim().is_empty())
            {
                lines.push(serde_json::from_str::<serde_json::Value>(line).unwrap());
            }
        }
    }
    let results_by_input = by_input(&lines);
    assert_eq!(results_by_input.len(), 6, "every input once: {lines:?}");
    assert!(
        lines.iter().all(|l| l["status"] == "separated"),
        "{lines:?}"
    );
    let plain = dir.join("plain");
    let single = run(&manifest_args(&manifest, &plain, &["--quiet"]));
    assert!(single.status.success(), "{}", text(&single.stderr));
    for folder in ["first", "song1", "song2", "song3", "song4", "song5"] {
        for stem in ["vocals", "drums", "bass", "other"] {
            let a = std::fs::read(out.join(folder).join(format!("{stem}.wav"))).unwrap();
            let b = std::fs::read(plain.join(folder).join(format!("{stem}.wav"))).unwrap();
            assert!(a == b, "{folder}/{stem} differs from a single-process run");
        }
    }
    // Resumed: a second run finds everything done.
    let again = run_ray_example(&python, &manifest, &out, &dir.join("results2"));
    assert!(again.status.success(), "{}", text(&again.stderr));
    let summary = text(&again.stdout);
    assert!(summary.contains("skipped 6"), "{summary}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A job's stems are never written over a later job's input: the manifest's inputs are all
/// known before the first job runs.
#[test]
fn a_manifest_never_overwrites_a_later_input() {
    let dir = scratch_dir("manifest-victim");
    catalogue(&dir, 1);
    std::fs::create_dir_all(dir.join("victims")).unwrap();
    std::fs::copy(dir.join("songs/song0.wav"), dir.join("victims/vocals.wav")).unwrap();
    let before = std::fs::read(dir.join("victims/vocals.wav")).unwrap();
    let manifest = dir.join("victim.jsonl");
    std::fs::write(
        &manifest,
        "{\"input\": \"songs/song0.wav\", \"output\": \"victims\"}\n{\"input\": \"victims/vocals.wav\", \"output\": \"later\"}\n",
    )
    .unwrap();
    let output = run(&manifest_args(&manifest, &dir, &["--json"]));
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    let results = by_input(&result_lines(&output.stdout));
    assert_eq!(results["songs/song0.wav"]["status"], "failed");
    assert!(
        results["songs/song0.wav"]["error"]
            .as_str()
            .unwrap()
            .contains("would overwrite the input"),
        "{}",
        results["songs/song0.wav"]
    );
    assert_eq!(results["victims/vocals.wav"]["status"], "separated");
    assert_eq!(
        std::fs::read(dir.join("victims/vocals.wav")).unwrap(),
        before,
        "an input was overwritten"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A manifest of `count` songs of `seconds` each in `dir/songs/`.
fn long_catalogue(dir: &Path, count: usize, seconds: f32) -> PathBuf {
    let songs = dir.join("songs");
    std::fs::create_dir_all(&songs).unwrap();
    let frames = (seconds * 44_100.0) as usize;
    let mut lines = Vec::new();
    for i in 0..count {
        let left = music(frames, 44_100, i);
        let right = music(frames, 44_100, i + 7);
        write_wav(
            &songs.join(format!("s{i}.wav")),
            44_100,
            &[left, right],
            16,
            false,
        );
        lines.push(format!(r#"{{"input": "songs/s{i}.wav"}}"#));
    }
    let manifest = dir.join("list.jsonl");
    std::fs::write(&manifest, lines.join("\n") + "\n").unwrap();
    manifest
}

/// `separate --manifest MANIFEST -o OUT` and then `extra`.
fn manifest_args<'a>(manifest: &'a Path, out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "separate",
        "--manifest",
        path_str(manifest),
        "-o",
        path_str(out),
    ];
    args.extend_from_slice(extra);
    args
}

/// Starts `stemflow` with `args` (not waiting for it).
fn spawn_stemflow(args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args(args)
        .env_remove("STEMFLOW_ORT_LIB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("stemflow runs")
}

#[test]
fn two_workers_on_one_manifest_separate_each_input_once_and_neither_fails() {
    let dir = scratch_dir("two-workers");
    let manifest = long_catalogue(&dir, 6, 20.0);
    let out = dir.join("stems");
    let args = manifest_args(&manifest, &out, &["--json"]);
    // Started together, both go for s0 first.
    let workers = [spawn_stemflow(&args), spawn_stemflow(&args)];
    let outputs: Vec<_> = workers
        .into_iter()
        .map(|w| w.wait_with_output().unwrap())
        .collect();
    let mut separated = BTreeMap::<String, usize>::new();
    for output in &outputs {
        assert!(
            output.status.success(),
            "a worker failed: {}",
            text(&output.stderr)
        );
        let lines = result_lines(&output.stdout);
        assert_eq!(
            lines.len(),
            6,
            "every input answered: {}",
            text(&output.stdout)
        );
        for line in lines {
            let status = line["status"].as_str().unwrap().to_owned();
            assert!(status == "separated" || status == "skipped", "{line}");
            if status == "separated" {
                *separated
                    .entry(line["input"].as_str().unwrap().into())
                    .or_default() += 1;
            }
        }
    }
    assert_eq!(
        separated.len(),
        6,
        "each input separated by one of them: {separated:?}"
    );
    assert!(
        separated.values().all(|&n| n == 1),
        "an input separated twice: {separated:?}"
    );
    let said: String = outputs.iter().map(|o| text(&o.stderr)).collect();
    assert!(
        said.contains("being separated by another worker")
            || said.contains("waiting for another worker"),
        "neither worker met the other's claim:\n{said}"
    );
    for i in 0..6 {
        let folder = out.join(format!("s{i}"));
        let mut names: Vec<String> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "bass.wav",
                "drums.wav",
                "other.wav",
                "stemflow-result.json",
                "vocals.wav"
            ],
            "s{i}: a complete set, no claim or partial file left"
        );
    }
}

#[test]
fn a_killed_workers_claim_is_taken_over_by_the_next_worker() {
    let dir = scratch_dir("killed-worker");
    let manifest = long_catalogue(&dir, 1, 120.0);
    let out = dir.join("stems");
    let args = manifest_args(&manifest, &out, &["--json"]);
    let mut first = spawn_stemflow(&args);
    let claim = out.join("s0/.stemflow-claim");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !claim.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first worker never claimed s0"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    assert!(claim.exists(), "a killed worker cannot remove its claim");
    let second = run(&args);
    assert!(second.status.success(), "{}", text(&second.stderr));
    let lines = result_lines(&second.stdout);
    assert_eq!(lines[0]["status"], "separated", "{}", text(&second.stdout));
    assert!(!claim.exists(), "the second worker's claim is gone too");
    let (_, vocals) = read_wav(&out.join("s0/vocals.wav"));
    assert_eq!(vocals[0].len(), 120 * 44_100);
}
