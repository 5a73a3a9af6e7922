//! Spleeter's and MDX-Net's graphs made for GPUs (the STFT, masks and inverse STFT inside, a
//! batch dimension where the model allows) have no node CUDA or DirectML cannot run and no
//! float64, and, run by the engine on the CPU, give the stems the
//! CPU graphs give (within 1e-4); their float16 versions stay close. (HTDemucs' and RoFormer's
//! are checked against PyTorch in `htdemucs.rs` and `roformer.rs`.) Never downloads.

mod common;

use std::path::Path;

use common::*;
use stemflow_convert::mdx::{mdx_gpu_graph, MdxStft};
use stemflow_convert::spleeter::spleeter_graph_for;
use stemflow_convert::spleeter::testing::{tensor_map, tiny_unet_arrays};
use stemflow_convert::{Precision, Target};
use stemflow_engine::families::ModelSeparator;
use stemflow_engine::runtime::{DeviceChoice, DeviceId, GraphChoice, Precision as GraphPrecision};
use stemflow_engine::{ExtraStems, Stem, NUM_STEMS};
use stemflow_kit::metrics::sdr_db;
use stemflow_onnx::kernels::{check_gpu_graph, inspect, Provider};

/// The largest difference from the CPU graph's stems accepted.
const MAX_ABS_ERROR: f32 = 1e-4;
/// How close a float16 graph's vocals stay to the float32 graph's (SDR, dB).
const MIN_FLOAT16_SDR_DB: f64 = 40.0;

type Stems = [[Vec<f32>; 2]; NUM_STEMS];

/// `graph` of the model `model` (its CPU graph beside it) separating `input` on the CPU.
fn separate_graph(
    model: &Path,
    graph: &Path,
    precision: GraphPrecision,
    input: &[Vec<f32>; 2],
) -> Stems {
    let separator = ModelSeparator::load_exactly(
        model,
        GraphChoice {
            path: graph.to_path_buf(),
            gpu_precision: Some(precision),
        },
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
    separate_with(Box::new(separator), input, ExtraStems::Separate)
}

/// `graph`'s nodes, Casts and float64 values, as `stemflow models inspect` counts them.
fn counts(graph: &[u8]) -> (usize, usize, usize) {
    let report = inspect(graph, Provider::Cuda).unwrap();
    let count = |map: &std::collections::BTreeMap<String, usize>, key: &str| {
        map.get(key).copied().unwrap_or(0)
    };
    let casts = count(&report.ops, "Cast");
    (
        report.node_count,
        casts,
        count(&report.element_types, "double"),
    )
}

/// Checks that each of a model's GPU graphs runs wholly on CUDA and DirectML without float64,
/// printing their figures beside the CPU graph's.
fn check_kernels(model: &Path, graphs: [&Path; 2]) {
    let cpu = counts(&std::fs::read(model).unwrap());
    for graph in graphs {
        let bytes = std::fs::read(graph).unwrap();
        if let Err(problems) = check_gpu_graph(&bytes) {
            panic!("{}:\n{problems}", graph.display());
        }
        let (nodes, casts, float64) = counts(&bytes);
        assert_eq!(float64, 0, "{}", graph.display());
        println!(
            "{}: {nodes} nodes, {casts} Casts (CPU graph: {} nodes, {} Casts, {} float64 values)",
            graph.display(),
            cpu.0,
            cpu.1,
            cpu.2
        );
    }
}

/// Checks a model's GPU graphs against its CPU graph on `input`.
fn check_gpu_graphs(model: &Path, graphs: [&Path; 2], input: &[Vec<f32>; 2]) {
    check_kernels(model, graphs);
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let cpu = separate(model, input, ExtraStems::Separate);
    let float32 = separate_graph(model, graphs[0], GraphPrecision::F32, input);
    let mut worst = 0.0f32;
    for stem in Stem::ALL {
        for channel in 0..2 {
            for (t, (a, b)) in cpu[stem.index()][channel]
                .iter()
                .zip(&float32[stem.index()][channel])
                .enumerate()
            {
                let error = (a - b).abs();
                assert!(
                    error <= MAX_ABS_ERROR,
                    "{stem:?} {channel} frame {t}: {a} vs {b}"
                );
                worst = worst.max(error);
            }
        }
    }
    let energy: f32 = cpu[Stem::Vocals.index()][0].iter().map(|v| v * v).sum();
    assert!(energy > 1e-3, "vocals are nearly silent ({energy})");
    let float16 = separate_graph(model, graphs[1], GraphPrecision::F16, input);
    let sdr = sdr_db(
        &float32[Stem::Vocals.index()],
        &float16[Stem::Vocals.index()],
    );
    println!(
        "{}: GPU graph {worst:.2e} from the CPU graph; float16 {sdr:.1} dB from float32",
        model.display()
    );
    assert!(sdr >= MIN_FLOAT16_SDR_DB, "float16: {sdr:.1} dB");
}

#[test]
fn spleeter_gpu_graphs_give_the_cpu_graphs_stems() {
    let (vocals, accompaniment) = (tiny_unet_arrays(21, 4), tiny_unet_arrays(22, 4));
    let stems = [
        ("vocals", tensor_map(&vocals)),
        ("accompaniment", tensor_map(&accompaniment)),
    ];
    let dir = scratch_dir("gpu-graphs-spleeter");
    let model = dir.join("tiny.onnx");
    let graphs = [dir.join("tiny.gpu.onnx"), dir.join("tiny.gpu-f16.onnx")];
    for (path, target) in [
        (&model, Target::Cpu),
        (&graphs[0], Target::Gpu(Precision::Float32)),
        (&graphs[1], Target::Gpu(Precision::Float16)),
    ] {
        let graph = spleeter_graph_for(&stems, 64, &[], target).unwrap();
        std::fs::write(path, graph.to_model_bytes()).unwrap();
    }
    // Two and a half segments of 64 frames.
    let frames = 170_000;
    let input = [music(frames, 44_100, 0), music(frames, 44_100, 1)];
    check_gpu_graphs(&model, [&graphs[0], &graphs[1]], &input);
}

#[test]
fn mdx_net_gpu_graphs_give_the_cpu_graphs_stems() {
    let dir = scratch_dir("gpu-graphs-mdx");
    let model = dir.join("mdx.onnx");
    let published = std::fs::read(fixtures_dir().join("mdx_vocals_test.onnx")).unwrap();
    std::fs::write(&model, &published).unwrap();
    std::fs::copy(
        fixtures_dir().join("mdx_vocals_test.json"),
        dir.join("mdx.json"),
    )
    .unwrap();
    let stft = MdxStft {
        n_fft: 2048,
        hop: 1024,
    };
    let graphs = [dir.join("mdx.gpu.onnx"), dir.join("mdx.gpu-f16.onnx")];
    for (path, precision) in [
        (&graphs[0], Precision::Float32),
        (&graphs[1], Precision::Float16),
    ] {
        std::fs::write(path, mdx_gpu_graph(&published, stft, precision).unwrap()).unwrap();
    }
    let frames = 200_000;
    let input = [music(frames, 44_100, 0), music(frames, 44_100, 1)];
    check_gpu_graphs(&model, [&graphs[0], &graphs[1]], &input);
}
