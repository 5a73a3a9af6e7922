//! `stemflow models inspect`: each device is checked on the graph the engine runs there — a
//! converted HTDemucs's CPU graph (float64 statistics) on the CPU, its graph made for GPUs on
//! CUDA and DirectML, the CPU graph there too once no GPU graph lies beside it (then DirectML
//! lacks float64 kernels); a tiny RoFormer has no float64; bad arguments are clear errors. No ONNX Runtime is needed.

mod common;

use std::path::PathBuf;

use common::{path_str, run, scratch_dir, text};
use stemflow_onnx::kernels::{inspect as inspect_graph, Provider};

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

/// The node count `stemflow_onnx` reads from the graph file `path` (independent of the CLI).
fn node_count(path: &std::path::Path) -> usize {
    inspect_graph(&std::fs::read(path).unwrap(), Provider::Cpu)
        .unwrap()
        .node_count
}

#[test]
fn a_converted_htdemucs_needs_float64_kernels_on_its_cpu_graph_only() {
    let dir = scratch_dir("inspect");
    import("htdemucs/small.th", "small", &dir);
    let (cpu_graph, gpu_graph) = (dir.join("small.onnx"), dir.join("small.gpu.onnx"));
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
    let graphs: Vec<PathBuf> = providers
        .iter()
        .map(|p| PathBuf::from(p["graph"].as_str().unwrap()))
        .collect();
    assert_eq!(
        graphs,
        [cpu_graph.clone(), gpu_graph.clone(), gpu_graph.clone()]
    );
    for gpu in &providers[1..] {
        assert_eq!(
            gpu["node_count"].as_u64(),
            Some(node_count(&gpu_graph) as u64)
        );
        assert_eq!(gpu["float64_nodes"], 0, "{gpu}");
        assert_eq!(gpu["runs_wholly_on_provider"], true, "{gpu}");
    }

    // One device: the graph for its kind, said by name, with that graph's node count.
    let on = |device: &str| {
        let args = ["small", "--models-dir", path_str(&dir), "--device", device];
        let output = inspect(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        text(&output.stdout)
    };
    let cuda = on("cuda:0");
    assert!(
        cuda.contains("Graph for cuda:0: small.gpu.onnx (the float32 graph made for GPUs)"),
        "{cuda}"
    );
    let nodes = |graph: &std::path::Path| {
        format!(
            "{} ({:.1} MB): {} nodes",
            graph.display(),
            std::fs::metadata(graph).unwrap().len() as f64 / 1e6,
            node_count(graph)
        )
    };
    assert!(cuda.contains(&nodes(&gpu_graph)), "{cuda}");
    assert!(
        cuda.contains("float64: none") && !cuda.contains("DirectML:"),
        "{cuda}"
    );
    let cpu = on("cpu");
    assert!(
        cpu.contains("Graph for cpu: small.onnx (the CPU graph)"),
        "{cpu}"
    );
    assert!(cpu.contains(&nodes(&cpu_graph)), "{cpu}");
    assert!(node_count(&cpu_graph) > node_count(&gpu_graph));
    assert!(
        cpu.contains("float64: ") && !cpu.contains("float64: none"),
        "{cpu}"
    );

    // Only the float16 GPU graph: a GPU takes it, and the output says why.
    std::fs::remove_file(&gpu_graph).unwrap();
    let cuda = on("cuda");
    assert!(
        cuda.contains(
            "Graph for cuda:0: small.gpu-f16.onnx (the float16 graph made for GPUs: no \
             float32 one (small.gpu.onnx) lies beside the model"
        ),
        "{cuda}"
    );
    // No GPU graph at all: the engine's fallback, the CPU graph, whose float64 DirectML lacks.
    std::fs::remove_file(dir.join("small.gpu-f16.onnx")).unwrap();
    let dml = on("directml");
    assert!(
        dml.contains(
            "Graph for directml:0: small.onnx (the CPU graph: no graph made for GPUs \
             (small.gpu.onnx) lies beside it, so the engine runs the CPU graph on directml:0)"
        ),
        "{dml}"
    );
    assert!(dml.contains(&nodes(&cpu_graph)), "{dml}");
    assert!(
        dml.contains("DirectML: ") && dml.contains("is double"),
        "{dml}"
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
