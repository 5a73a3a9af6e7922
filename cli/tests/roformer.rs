//! BS-RoFormer and Mel-RoFormer from MSST checkpoints, converted in Rust and run by the engine,
//! against MSST itself: `convert/tests/fixtures/roformer/` holds tiny random-weight checkpoints
//! built by MSST's own model classes with their YAML configs, and the output of MSST's `demix`
//! on a fixed input, made once by `models/roformer_reference.py` (its README says how). Never
//! downloads.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use stemflow_convert::roformer::{roformer_to_onnx, roformer_to_onnx_for, ConvertedRoFormer};
use stemflow_convert::{Precision, Target};
use stemflow_engine::whole_file::OtherStem;
use stemflow_engine::{ExtraStems, Stem, NUM_STEMS};
use stemflow_kit::npy::read_npy;

/// The largest difference from MSST accepted (issue 36: 1e-4).
const MAX_ABS_ERROR: f32 = 1e-4;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../convert/tests/fixtures/roformer")
        .join(name)
}

/// Converts `name`.ckpt with `name`.yaml (its `batch_size: 1` made `batch_size`) and checks
/// Vocals (the model's vocals) and Other (the mix minus them, Stemflow's residual, or the
/// model's own other when it has one) against MSST's `demix` in `reference` of `input`: a whole
/// file (`stemflow separate`) over every frame, the stream (the plugin) away from the file's
/// end. `target`: the CPU graph or a graph for GPUs (run here on the CPU).
fn check_parity(
    name: &str,
    target: Target,
    batch_size: usize,
    input: &str,
    reference: &str,
) -> f32 {
    let checkpoint = std::fs::read(fixture(&format!("{name}.ckpt"))).unwrap();
    let yaml = std::fs::read_to_string(fixture(&format!("{name}.yaml"))).unwrap();
    let yaml = yaml.replacen("batch_size: 1", &format!("batch_size: {batch_size}"), 1);
    let converted = roformer_to_onnx_for(&checkpoint, &yaml, target).unwrap();
    let dir = scratch_dir(&format!("roformer-{name}-{batch_size}-{target:?}"));
    let model = dir.join(format!("{name}.onnx"));
    std::fs::write(&model, &converted.onnx).unwrap();

    let (shape, samples) = read_npy(&fixture(input));
    let frames = shape[1];
    let input: [Vec<f32>; 2] = [samples[..frames].to_vec(), samples[frames..].to_vec()];
    let (shape, expected) = read_npy(&fixture(reference));
    assert_eq!(shape, [converted.stems.len(), 2, frames]);
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let stem_of = |stem: &str, channel: usize| -> Option<Vec<f32>> {
        let index = converted.stems.iter().position(|s| s == stem)?;
        Some(expected[(index * 2 + channel) * frames..][..frames].to_vec())
    };
    // Both fixtures: chunks of 8192 frames, 2 overlaps.
    let valid = stemflow_kit::metrics::frames_before_end_chunks(frames, converted.chunk_frames, 2);
    let mut worst = 0.0f32;
    for (what, other, compared, got) in parity_separations(&model, &input, valid) {
        let mut run_worst = 0.0f32;
        for channel in 0..2 {
            let vocals = stem_of("vocals", channel).unwrap();
            let residual: Vec<f32> = (0..frames).map(|i| input[channel][i] - vocals[i]).collect();
            let other = match other {
                OtherStem::Model => stem_of("other", channel).unwrap_or(residual),
                OtherStem::Residual => residual,
            };
            for (stem, reference) in [(Stem::Vocals, &vocals), (Stem::Other, &other)] {
                let error = assert_within(
                    reference,
                    &got[stem.index()][channel],
                    compared,
                    MAX_ABS_ERROR,
                    &format!("{name}, {what}: {stem:?} channel {channel}"),
                    "MSST",
                );
                run_worst = run_worst.max(error);
            }
        }
        let energy: f32 = got[Stem::Vocals.index()][0][..compared]
            .iter()
            .map(|v| v * v)
            .sum();
        assert!(energy > 0.1, "{what}: vocals are nearly silent ({energy})");
        println!("{name}, {what}: largest difference from MSST {run_worst:.2e} over {compared} of {frames} frames");
        worst = worst.max(run_worst);
    }
    worst
}

#[test]
fn a_converted_bs_roformer_matches_msst() {
    check_parity(
        "bs_tiny",
        Target::Cpu,
        1,
        "input.npy",
        "bs_tiny_reference.npy",
    );
}

#[test]
fn a_converted_mel_roformer_matches_msst() {
    check_parity(
        "mel_tiny",
        Target::Cpu,
        1,
        "input.npy",
        "mel_tiny_reference.npy",
    );
}

/// MSST's released configs run 4 chunks a batch, and `demix` drops the fade-out of every chunk
/// of its last batch: on this 0.5 s input (6 chunks of 8192 frames every 4096, the last batch
/// chunks 4 and 5) the fade between chunks 3 and 4 differs from a batch of 1 by up to 0.027.
/// The converted graph keeps the config's batch size, and a whole file fades as `demix` does.
#[test]
fn a_roformer_fades_a_whole_file_as_msst_does_with_its_configs_batch_size() {
    check_parity(
        "bs_tiny",
        Target::Cpu,
        4,
        "input_batch4.npy",
        "bs_tiny_batch4_reference.npy",
    );
}

#[test]
fn configs_that_do_not_fit_the_checkpoint_are_refused_by_name() {
    let checkpoint = std::fs::read(fixture("bs_tiny.ckpt")).unwrap();
    let yaml = std::fs::read_to_string(fixture("bs_tiny.yaml")).unwrap();
    let cases = [
        ("  dim: 16\n", "  dim: 24\n", "has shape [16"),
        (
            "  depth: 2\n",
            "  depth: 1\n",
            "tensors of the checkpoint have no place",
        ),
        ("  depth: 2\n", "  depth: 3\n", "no tensor layers.2"),
        (
            "  heads: 2\n",
            "  heads: 2\n  rope_theta: 5\n",
            "model.rope_theta",
        ),
        (
            "  skip_connection: true\n",
            "  skip_connection: true\n  use_pope: true\n",
            "use_pope",
        ),
    ];
    for (from, to, expected) in cases {
        let changed = yaml.replacen(from, to, 1);
        assert_ne!(changed, yaml, "{from}");
        let message = roformer_to_onnx(&checkpoint, &changed)
            .unwrap_err()
            .to_string();
        assert!(message.contains(expected), "{expected}: {message}");
    }
    let mel_yaml = std::fs::read_to_string(fixture("mel_tiny.yaml")).unwrap();
    let message = roformer_to_onnx(&checkpoint, &mel_yaml)
        .unwrap_err()
        .to_string();
    assert!(message.contains("num_bands"), "{message}");
    let message = roformer_to_onnx(&checkpoint[..checkpoint.len() / 2], &yaml)
        .unwrap_err()
        .to_string();
    assert!(!message.is_empty());
}

#[test]
fn a_wrong_config_is_reported_as_the_config_s_error_before_any_conversion() {
    let dir = scratch_dir("roformer-wrong-config");
    let models = dir.join("models");
    let checkpoint = dir.join("bs_tiny.ckpt");
    std::fs::copy(fixture("bs_tiny.ckpt"), &checkpoint).unwrap();
    let yaml = std::fs::read_to_string(fixture("bs_tiny.yaml")).unwrap();
    let dim_line = 1 + yaml[..yaml.find("  dim: 16\n").unwrap()]
        .matches('\n')
        .count();
    let anchor =
        format!("YAML anchors and aliases (`&name`, `*name`) are not supported (line {dim_line})");
    let cases = [
        ("  dim: 16\n", "  dim: &width 16\n", anchor.as_str()),
        (
            "  chunk_size: 8192\n",
            "  chunk_size: 100000000000\n",
            "`audio.chunk_size` 100000000000 is larger than 4194304",
        ),
        (
            "  hop_length: 64\n",
            "  hop_length: 0\n",
            "`audio.hop_length` is 0",
        ),
        (
            "  stft_hop_length: 64\n",
            "  stft_hop_length: 0\n",
            "`model.stft_hop_length` is 0",
        ),
    ];
    for (from, to, expected) in cases {
        let changed = yaml.replacen(from, to, 1);
        assert_ne!(changed, yaml, "{from}");
        let config = dir.join("wrong.yaml");
        std::fs::write(&config, changed).unwrap();
        let output = run(&[
            "models",
            "import",
            path_str(&checkpoint),
            "--config",
            path_str(&config),
            "--models-dir",
            path_str(&models),
        ]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("{}: {expected}", config.display())),
            "{expected}: {stderr}"
        );
        assert!(
            !stderr.contains("checkpoint layout") && !stderr.contains("graph for GPUs"),
            "{stderr}"
        );
        let installed = std::fs::read_dir(&models).map_or(0, |entries| entries.count());
        assert_eq!(installed, 0, "nothing is installed for a wrong config");
    }
}

#[test]
fn a_converted_roformer_quantizes_to_int8_and_float16_and_stays_close() {
    use stemflow_convert::float16::convert_model;
    use stemflow_convert::quantize::{quantize_model, QuantizeOptions};
    use stemflow_kit::metrics::sdr_db_of_samples;

    let checkpoint = std::fs::read(fixture("bs_tiny.ckpt")).unwrap();
    let yaml = std::fs::read_to_string(fixture("bs_tiny.yaml")).unwrap();
    let converted = roformer_to_onnx(&checkpoint, &yaml).unwrap();
    let dir = scratch_dir("roformer-reduced");
    let (shape, input) = read_npy(&fixture("input.npy"));
    let frames = shape[1];
    let input: [Vec<f32>; 2] = [input[..frames].to_vec(), input[frames..].to_vec()];
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let run = |name: &str, bytes: &[u8]| {
        let model = dir.join(format!("{name}.onnx"));
        std::fs::write(&model, bytes).unwrap();
        separate(&model, &input, ExtraStems::Separate)[Stem::Vocals.index()].concat()
    };
    let float = run("float", &converted.onnx);

    // Every MatMul with weights, the per-band ones (3-D weights) included, is int8.
    let (int8, report) = quantize_model(&converted.onnx, QuantizeOptions::default()).unwrap();
    let attention_products = report.num_matmuls_left;
    assert!(report.num_matmuls > 0);
    assert!(
        report.weight_bytes_after * 3 < report.weight_bytes_before,
        "{report:?}"
    );
    let (float16, _) = convert_model(&converted.onnx).unwrap();
    for (name, bytes, min_db) in [("int8", &int8, 15.0), ("float16", &float16, 40.0)] {
        let reduced = run(name, bytes);
        assert_ne!(reduced, float, "{name}: nothing changed");
        let closeness = sdr_db_of_samples(&float, &reduced);
        println!("bs_tiny {name}: {closeness:.1} dB from float32 ({attention_products} MatMul of activations left in float)");
        assert!(
            closeness > min_db,
            "{name}: only {closeness:.1} dB from float32"
        );
    }
}

/// Every stem's two channels.
type Stems = [[Vec<f32>; 2]; NUM_STEMS];

/// The graphs made for GPUs (the STFT, masking and inverse STFT inside, a batch dimension), run
/// by the engine on the CPU, match MSST as the CPU graphs do, whole files and streams; float16
/// stays within [`MIN_FLOAT16_SDR_DB`] of float32.
#[test]
fn the_gpu_graphs_of_converted_roformers_match_msst() {
    use stemflow_kit::metrics::sdr_db;
    for name in ["bs_tiny", "mel_tiny"] {
        let reference = format!("{name}_reference.npy");
        check_parity(
            name,
            Target::Gpu(Precision::Float32),
            1,
            "input.npy",
            &reference,
        );
    }
    let (_, _, float32) = separate_converted("bs_tiny", Target::Gpu(Precision::Float32));
    let (_, _, float16) = separate_converted("bs_tiny", Target::Gpu(Precision::Float16));
    let sdr = sdr_db(
        &float32[Stem::Vocals.index()],
        &float16[Stem::Vocals.index()],
    );
    println!("bs_tiny: float16 is {sdr:.1} dB from float32");
    assert!(sdr >= MIN_FLOAT16_SDR_DB, "bs_tiny: {sdr:.1} dB");
}

/// How close the float16 GPU graph's vocals stay to the float32 graph's (SDR, dB): 58.8 dB
/// (BS-RoFormer) and 56.0 dB (Mel-RoFormer) measured per chunk against MSST in float32.
const MIN_FLOAT16_SDR_DB: f64 = 45.0;

/// `name` converted for `target` and separating the fixture's input on the CPU: the converted
/// model, the input and the stems.
fn separate_converted(name: &str, target: Target) -> (ConvertedRoFormer, [Vec<f32>; 2], Stems) {
    let checkpoint = std::fs::read(fixture(&format!("{name}.ckpt"))).unwrap();
    let yaml = std::fs::read_to_string(fixture(&format!("{name}.yaml"))).unwrap();
    let converted = roformer_to_onnx_for(&checkpoint, &yaml, target).unwrap();
    let model = scratch_dir(&format!("roformer-{name}-{target:?}")).join(format!("{name}.onnx"));
    std::fs::write(&model, &converted.onnx).unwrap();
    let (shape, input) = read_npy(&fixture("input.npy"));
    let frames = shape[1];
    let input: [Vec<f32>; 2] = [input[..frames].to_vec(), input[frames..].to_vec()];
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let got = separate(&model, &input, ExtraStems::Separate);
    (converted, input, got)
}
