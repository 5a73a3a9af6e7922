//! The `stemflow` binary as a user runs it: runtime problems, device fallback, exit codes.

use std::path::PathBuf;
use std::process::{Command, Output};

fn stemflow(args: &[&str], ort_lib: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemflow"));
    command.args(args);
    match ort_lib {
        Some(path) => command.env("STEMFLOW_ORT_LIB", path),
        None => command.env_remove("STEMFLOW_ORT_LIB"),
    };
    command.output().expect("stemflow runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The real library, as `cargo xtask test` provides it.
fn real_runtime() -> String {
    std::env::var("STEMFLOW_ORT_LIB")
        .expect("STEMFLOW_ORT_LIB must point at ONNX Runtime: run the tests with `cargo xtask test`")
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stemflow-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_test_wav(path: &std::path::Path) {
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 44_100,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut writer = hound::WavWriter::create(path, spec).unwrap();
    for i in 0..20_000 {
        writer.write_sample((i as f32 * 0.01).sin() * 0.3).unwrap();
        writer.write_sample((i as f32 * 0.02).sin() * 0.2).unwrap();
    }
    writer.finalize().unwrap();
}

fn model() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models/test/waveform_gain.onnx")
        .display()
        .to_string()
}

#[test]
fn a_missing_library_is_explained_and_the_builtin_separator_still_works() {
    let dir = scratch_dir("missing");
    let missing = dir.join("nope/libonnxruntime.so");
    let output = stemflow(&["devices"], Some(missing.to_str().unwrap()));
    assert!(output.status.success());
    let stdout = text(&output.stdout);
    assert!(stdout.contains("ONNX Runtime was not found"), "{stdout}");
    assert!(stdout.contains(missing.to_str().unwrap()), "{stdout}");
    assert!(stdout.contains("cargo xtask fetch-runtime"), "{stdout}");

    let input = dir.join("song.wav");
    write_test_wav(&input);
    let output = stemflow(
        &["separate", input.to_str().unwrap(), "-o", dir.to_str().unwrap(), "--quiet"],
        Some(missing.to_str().unwrap()),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(dir.join("song/vocals.wav").is_file());
}

#[test]
fn a_garbage_file_posing_as_the_library_is_explained() {
    let dir = scratch_dir("garbage");
    let garbage = dir.join("libonnxruntime.so.1.31.0");
    std::fs::write(&garbage, b"not a library").unwrap();
    let output = stemflow(&["devices", "--json"], Some(garbage.to_str().unwrap()));
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["runtime"]["loaded"], false);
    let error = json["runtime"]["error"].as_str().unwrap();
    assert!(error.contains("could not be loaded"), "{error}");
    assert!(error.contains(garbage.to_str().unwrap()), "{error}");
    assert_eq!(json["auto"], "cpu");
}

#[test]
fn devices_lists_cpu_and_auto() {
    let output = stemflow(&["devices", "--json"], Some(&real_runtime()));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["runtime"]["loaded"], true, "{json}");
    let devices = json["devices"].as_array().unwrap();
    assert!(devices.iter().any(|d| d["id"] == "cpu" && d["status"]["state"] == "usable"));
    assert!(json["auto"].is_string());
}

#[test]
fn an_unusable_device_falls_back_to_cpu_with_a_warning_unless_strict() {
    let runtime = real_runtime();
    let devices = stemflow(&["devices", "--json"], Some(&runtime));
    let json: serde_json::Value = serde_json::from_slice(&devices.stdout).unwrap();
    let is_cuda_usable = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["id"] == "cuda:0" && d["status"]["state"] == "usable");

    let dir = scratch_dir("fallback");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    let model = model();
    let args = ["separate", input.to_str().unwrap(), "-o", dir.to_str().unwrap(), "--model", &model, "--device", "cuda:0"];
    let output = stemflow(&args, Some(&runtime));
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(dir.join("song/drums.wav").is_file());
    if is_cuda_usable {
        assert!(!stderr.contains("warning"), "{stderr}");
    } else {
        assert!(stderr.contains("warning: cuda:0 failed"), "{stderr}");
        assert!(text(&output.stdout).contains("on cpu"));
        let mut strict = args.to_vec();
        strict.push("--strict-device");
        let output = stemflow(&strict, Some(&runtime));
        assert_eq!(output.status.code(), Some(1));
        assert!(text(&output.stderr).contains("--strict-device"), "{}", text(&output.stderr));
    }
}

#[test]
fn an_unknown_device_is_a_usage_error() {
    let output = stemflow(&["separate", "x.wav", "--device", "tpu:0"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("unknown device"));
}
