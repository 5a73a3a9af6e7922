//! `stemflow models inspect`: a converted HTDemucs (today's CPU graph, float64 statistics) is
//! reported as CUDA runs it whole while DirectML lacks float64 kernels; a tiny RoFormer has no
//! float64; bad arguments are clear errors. No ONNX Runtime is needed.

mod common;

use std::path::PathBuf;

use common::{path_str, run, scratch_dir, text};

/// Converts the checkpoint fixture `path` into `dir` as `name` with `stemflow models import`.
fn import(path: &str, name: &str, dir: &std::path::Path) {
    let checkpoint = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../convert/tests/fixtures")
        .join(path);
    let args = ["models", "import", path_str(&checkpoint), "--name", name];
    let imported = run(&[&args[..], &["--models-dir", path_str(dir)]].concat());
    assert!(imported.status.success(), "{}", text(&imported.stderr));
}

/// `stemflow models inspect ARGS`.
fn inspect(args: &[&str]) -> std::process::Output {
    run(&[&["models", "inspect"], args].concat())
}

#[test]
fn a_converted_htdemucs_needs_float64_kernels_that_directml_lacks() {
    let dir = scratch_dir("inspect");
    import("htdemucs/small.th", "small", &dir);
    let output = inspect(&["small", "--models-dir", path_str(&dir), "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report["node_count"].as_u64().unwrap() > 1000);
    assert!(report["element_types"]["double"].as_u64().unwrap() > 0);
    let providers = report["providers"].as_array().unwrap();
    let names: Vec<&str> = providers
        .iter()
        .map(|p| p["provider"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cpu", "cuda", "directml"]);
    assert_eq!(
        providers[1]["runs_wholly_on_provider"], true,
        "CUDA registers double kernels"
    );
    let dml = providers[2]["unsupported"].as_array().unwrap();
    assert!(!dml.is_empty());
    assert!(dml
        .iter()
        .all(|f| f["reason"].as_str().unwrap().contains("is double")));

    let cuda = inspect(&[
        "small",
        "--models-dir",
        path_str(&dir),
        "--device",
        "cuda:0",
    ]);
    let cuda = text(&cuda.stdout);
    assert!(
        cuda.contains("CUDA: every node that runs has a kernel"),
        "{cuda}"
    );
    assert!(
        cuda.contains("float64: ") && !cuda.contains("DirectML:"),
        "{cuda}"
    );
}

#[test]
fn a_tiny_roformer_has_no_float64_and_bad_arguments_are_errors() {
    let dir = scratch_dir("inspect-roformer");
    import("roformer/bs_tiny.ckpt", "bs", &dir);
    let model = dir.join("bs.onnx");
    let output = inspect(&[path_str(&model), "--device", "directml"]);
    let said = text(&output.stdout);
    assert!(
        said.contains("float64: none") && said.contains("DirectML: every node"),
        "{said}"
    );

    let bad_device = inspect(&[path_str(&model), "--device", "tpu"]);
    assert_eq!(
        bad_device.status.code(),
        Some(2),
        "{}",
        text(&bad_device.stderr)
    );
    let missing = inspect(&["no-such-model", "--models-dir", path_str(&dir)]);
    assert_eq!(missing.status.code(), Some(1));
    let builtin = inspect(&["builtin"]);
    assert!(text(&builtin.stderr).contains("not a model"));
}
