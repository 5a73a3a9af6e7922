//! HTDemucs from demucs checkpoints, converted in Rust and run by the engine, against PyTorch
//! demucs itself: `convert/tests/fixtures/htdemucs/` holds small random-weight HTDemucs
//! checkpoints written by demucs' own serialisation (float16 state) and the output of demucs
//! 4's `apply_model` (shifts 0, overlap 0.25) on a fixed input, made once by
//! `models/htdemucs_reference.py` (its README says how): `stemflow separate`'s whole file
//! equals it from the first frame to the last. Never downloads.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use stemflow_convert::htdemucs::{demucs_to_onnx, demucs_to_onnx_for, ConvertedDemucs};
use stemflow_convert::{Precision, Target};
use stemflow_engine::whole_file::OtherStem;
use stemflow_engine::{ExtraStems, Stem, NUM_STEMS};
use stemflow_kit::metrics::sdr_db;
use stemflow_kit::npy::read_npy;

/// The largest difference from PyTorch demucs accepted (issue 34: 1e-4).
const MAX_ABS_ERROR: f32 = 1e-4;
/// `apply_model`'s overlap.
const OVERLAP: f64 = 0.25;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../convert/tests/fixtures/htdemucs")
        .join(name)
}

/// Frames before the first chunk that reaches past the file's end: `apply_model` gives such a
/// chunk audio from before it (`TensorChunk.padded`, centred), a stream the silence after the end.
fn frames_before_last_chunk(frames: usize, segment_frames: usize) -> usize {
    let stride = ((1.0 - OVERLAP) * segment_frames as f64) as usize;
    match frames.checked_sub(segment_frames) {
        Some(rest) => (rest / stride + 1) * stride,
        None => 0,
    }
}

/// Stems of a separation: `[stem][channel][frame]`.
type Stems = [[Vec<f32>; 2]; NUM_STEMS];

/// Converts `checkpoint` for `target` and checks every stem against demucs' `apply_model`
/// output: a whole file (`stemflow separate`) over every frame, with Other the residual and the
/// model's own; the stream (the plugin) over the frames before the chunks that reach past the
/// end.
fn check_parity(checkpoint: &str, reference: &str, target: Target) -> f32 {
    let (converted, model) = convert(checkpoint, target);
    let input = fixture_input();
    let frames = input[0].len();
    let (shape, expected) = read_npy(&fixture(reference));
    assert_eq!(shape, [converted.sources.len(), 2, frames]);
    let valid = frames_before_last_chunk(frames, converted.segment_frames);
    assert!(
        valid > converted.segment_frames,
        "the fixture covers too few chunks: {valid} frames"
    );

    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let source = |name: &str, channel: usize| -> Vec<f32> {
        let s = converted.sources.iter().position(|n| n == name).unwrap();
        expected[(s * 2 + channel) * frames..][..frames].to_vec()
    };
    // Stemflow's stems from demucs': Other is the mix minus every stem routed elsewhere, or the
    // model's own `other`.
    let reference_of = |stem: Stem, channel: usize, other: OtherStem| -> Vec<f32> {
        match (stem, other) {
            (Stem::Other, OtherStem::Model) => source("other", channel),
            (Stem::Other, OtherStem::Residual) => (0..frames)
                .map(|i| {
                    let routed: f32 = converted
                        .sources
                        .iter()
                        .filter(|n| n.as_str() != "other")
                        .map(|n| source(n, channel)[i])
                        .sum();
                    input[channel][i] - routed
                })
                .collect(),
            _ => match converted
                .sources
                .iter()
                .find(|n| n.as_str() == stem.file_name())
            {
                Some(name) => source(name, channel),
                None => vec![0.0; frames],
            },
        }
    };
    let mut worst = 0.0f32;
    for (what, other, compared, got) in parity_separations(&model, &input, valid) {
        let mut run_worst = 0.0f32;
        for channel in 0..2 {
            for stem in Stem::ALL {
                let reference = reference_of(stem, channel, other);
                let error = assert_within(
                    &reference,
                    &got[stem.index()][channel],
                    compared,
                    MAX_ABS_ERROR,
                    &format!("{checkpoint}, {what}: {stem:?} channel {channel}"),
                    "demucs",
                );
                run_worst = run_worst.max(error);
            }
        }
        worst = worst.max(run_worst);
        // Not trivially silent.
        let energy: f32 = got[Stem::Drums.index()][0][..compared]
            .iter()
            .map(|v| v * v)
            .sum();
        assert!(energy > 1.0, "{what}: drums are nearly silent ({energy})");
        println!(
            "{checkpoint}, {what}: largest difference from PyTorch demucs {run_worst:.2e} over {compared} of {frames} frames"
        );
    }
    worst
}

#[test]
fn a_converted_htdemucs_matches_pytorch_demucs() {
    check_parity("small.th", "small_reference.npy", Target::Cpu);
}

#[test]
fn a_converted_six_stem_htdemucs_matches_pytorch_demucs() {
    check_parity("small6.th", "small6_reference.npy", Target::Cpu);
}

/// The graph made for GPUs (the STFT inside, a batch dimension), run by the engine on the CPU,
/// matches demucs as the CPU graph does, whole files and streams; its float16 version stays
/// within [`MIN_FLOAT16_SDR_DB`] of it.
#[test]
fn the_gpu_graphs_of_a_converted_htdemucs_match_pytorch_demucs() {
    for (checkpoint, reference) in [
        ("small.th", "small_reference.npy"),
        ("small6.th", "small6_reference.npy"),
    ] {
        check_parity(checkpoint, reference, Target::Gpu(Precision::Float32));
    }
    // One float16 check is enough: each graph's first session computes its STFT bases.
    let (_, _, float32) = separate_converted("small.th", Target::Gpu(Precision::Float32));
    let (_, _, float16) = separate_converted("small.th", Target::Gpu(Precision::Float16));
    for stem in [Stem::Drums, Stem::Bass, Stem::Vocals] {
        let sdr = sdr_db(&float32[stem.index()], &float16[stem.index()]);
        println!("small.th {stem:?}: float16 is {sdr:.1} dB from float32");
        assert!(sdr >= MIN_FLOAT16_SDR_DB, "small.th {stem:?}: {sdr:.1} dB");
    }
}

/// How close the float16 GPU graph's stems stay to the float32 graph's (SDR, dB): 60 dB and
/// 64 dB measured on the fixtures.
const MIN_FLOAT16_SDR_DB: f64 = 45.0;

/// `checkpoint` converted for `target`, written to a scratch folder: the conversion and the
/// model file.
fn convert(checkpoint: &str, target: Target) -> (ConvertedDemucs, PathBuf) {
    let bytes = std::fs::read(fixture(checkpoint)).unwrap();
    let converted = demucs_to_onnx_for(&[&bytes], None, target).unwrap();
    let model = scratch_dir(&format!("htdemucs-{checkpoint}-{target:?}")).join("small.onnx");
    std::fs::write(&model, &converted.onnx).unwrap();
    (converted, model)
}

/// The fixture's input, planar stereo.
fn fixture_input() -> [Vec<f32>; 2] {
    let (shape, input) = read_npy(&fixture("input.npy"));
    assert_eq!(shape[0], 2);
    let frames = shape[1];
    [input[..frames].to_vec(), input[frames..].to_vec()]
}

/// `checkpoint` converted for `target` and separating the fixture's input on the CPU as the
/// plugin streams it: the converted model, the input and the stems.
fn separate_converted(checkpoint: &str, target: Target) -> (ConvertedDemucs, [Vec<f32>; 2], Stems) {
    let (converted, model) = convert(checkpoint, target);
    let input = fixture_input();
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let got = separate(&model, &input, ExtraStems::Separate);
    (converted, input, got)
}

#[test]
fn a_bag_of_models_is_one_graph_taking_each_stem_from_its_models() {
    // Two copies of one model, each serving two stems (htdemucs_ft's weights are the 4 × 4
    // identity): the bag must give the single model's stems; with the second copy's weights
    // doubled for drums the drums are still the model's (weights are normalised per stem).
    let bytes = std::fs::read(fixture("small.th")).unwrap();
    let single = demucs_to_onnx(&[&bytes], None).unwrap();
    let weights: [&[f32]; 2] = [&[1.0, 1.0, 0.0, 0.0], &[2.0, 0.0, 1.0, 1.0]];
    let bag = demucs_to_onnx(&[&bytes, &bytes], Some(&weights)).unwrap();
    assert_eq!(bag.sources, single.sources);
    assert!(bag.onnx.len() > single.onnx.len() * 19 / 10);

    let dir = scratch_dir("htdemucs-bag");
    let (single_path, bag_path) = (dir.join("single.onnx"), dir.join("bag.onnx"));
    std::fs::write(&single_path, &single.onnx).unwrap();
    std::fs::write(&bag_path, &bag.onnx).unwrap();
    let (shape, input) = read_npy(&fixture("input.npy"));
    let frames = shape[1];
    let input: [Vec<f32>; 2] = [input[..frames].to_vec(), input[frames..].to_vec()];
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let a = separate(&single_path, &input, ExtraStems::Separate);
    let b = separate(&bag_path, &input, ExtraStems::Separate);
    for stem in Stem::ALL {
        for channel in 0..2 {
            let worst = a[stem.index()][channel]
                .iter()
                .zip(&b[stem.index()][channel])
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(worst <= 1e-6, "{stem:?} channel {channel}: {worst}");
        }
    }

    let wrong: [&[f32]; 1] = [&[1.0, 1.0, 1.0]];
    let message = demucs_to_onnx(&[&bytes, &bytes], Some(&wrong))
        .unwrap_err()
        .to_string();
    assert!(message.contains("2 rows of 4"), "{message}");
    let truncated = &bytes[..bytes.len() / 2];
    let message = demucs_to_onnx(&[&bytes, truncated], None)
        .unwrap_err()
        .to_string();
    assert!(message.contains("model 2 of the bag"), "{message}");
}

/// A graph made for GPUs runs a batch of chunks in one model run, and each chunk's stems are
/// what that chunk gives alone (within float32 rounding: ONNX Runtime picks other kernels for
/// another batch size).
#[test]
fn a_batch_of_chunks_gives_each_chunk_its_own_stems() {
    use stemflow_engine::runtime::{read_model_file, DeviceChoice, DeviceId, GraphIo, ModelRunner};

    let bytes = std::fs::read(fixture("small.th")).unwrap();
    let converted = demucs_to_onnx_for(&[&bytes], None, Target::Gpu(Precision::Float32)).unwrap();
    let dir = scratch_dir("htdemucs-batch");
    let path = dir.join("model.onnx");
    std::fs::write(&path, &converted.onnx).unwrap();
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let chunk = converted.segment_frames;
    let io = GraphIo::single("mix", "stems", vec![1, 2, chunk]);
    let model = std::sync::Arc::new(read_model_file(&path).unwrap());
    let mut runner = ModelRunner::new(model, DeviceChoice::Device(DeviceId::CPU), io).unwrap();
    let (_, input) = read_npy(&fixture("input.npy"));
    // Three different chunks (both channels) of the fixture's input.
    let chunks: Vec<Vec<f32>> = (0..3)
        .map(|i| input[i * 4000..][..2 * chunk].to_vec())
        .collect();
    let mut batched = Vec::new();
    runner
        .run_batch(
            chunks.len(),
            |inputs| {
                inputs[0].copy_from_slice(&chunks.concat());
                Ok(())
            },
            |outputs| {
                batched = outputs[0].to_vec();
                Ok(())
            },
        )
        .unwrap();
    let per_item = batched.len() / chunks.len();
    assert_eq!(per_item, converted.sources.len() * 2 * chunk);
    for (item, values) in chunks.iter().enumerate() {
        let mut single = Vec::new();
        runner
            .run_all(
                |inputs| {
                    inputs[0].copy_from_slice(values);
                    Ok(())
                },
                |outputs| {
                    single = outputs[0].to_vec();
                    Ok(())
                },
            )
            .unwrap();
        let worst = single
            .iter()
            .zip(&batched[item * per_item..][..per_item])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(worst <= 1e-5, "chunk {item}: {worst}");
    }
}

/// A device switch moves a model between its graphs, each with its own codec, at a hop
/// boundary: from the graph made for GPUs (run on the CPU here) to the CPU graph, without a
/// gap. What was out before the switch is the GPU graph's; frames whose chunks all needed input
/// past the switch are the CPU graph's, exactly.
#[test]
fn a_device_switch_moves_a_model_between_its_graphs_without_a_gap() {
    use std::time::{Duration, Instant};
    use stemflow_engine::families::ModelSeparator;
    use stemflow_engine::runtime::{
        gpu_graph_path, DeviceChoice, DeviceId, GraphChoice, Precision as GraphPrecision,
    };
    use stemflow_engine::stream::{spawn_stream, ProcessingMode, StreamConfig};

    let bytes = std::fs::read(fixture("small.th")).unwrap();
    let dir = scratch_dir("htdemucs-switch");
    let model = dir.join("small.onnx");
    let gpu = gpu_graph_path(&model, GraphPrecision::F32);
    std::fs::write(&model, demucs_to_onnx(&[&bytes], None).unwrap().onnx).unwrap();
    let converted = demucs_to_onnx_for(&[&bytes], None, Target::Gpu(Precision::Float32)).unwrap();
    std::fs::write(&gpu, &converted.onnx).unwrap();
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads (run with `cargo xtask test`)");
    let (shape, input) = read_npy(&fixture("input.npy"));
    let frames = shape[1];
    let input: [Vec<f32>; 2] = [input[..frames].to_vec(), input[frames..].to_vec()];
    let on_cpu_graph = separate(&model, &input, ExtraStems::Separate);
    // Alone (no CPU graph beside it), the GPU graph is what runs on the CPU.
    let alone = scratch_dir("htdemucs-switch-alone").join("small.gpu.onnx");
    std::fs::copy(&gpu, &alone).unwrap();
    let on_gpu_graph = separate(&alone, &input, ExtraStems::Separate);

    let separator = ModelSeparator::load_exactly(
        &model,
        GraphChoice {
            path: gpu.clone(),
            gpu_precision: Some(GraphPrecision::F32),
        },
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
    let config = StreamConfig {
        host_sample_rate_hz: 44_100.0,
        max_block_frames: 1024,
        mode: ProcessingMode::Offline,
        is_offline_only: false,
    };
    let (mut handle, controller) = spawn_stream(Box::new(separator), &config).unwrap();
    handle.set_extra_stems(ExtraStems::Separate);
    let latency = handle.latency_samples();
    let total = frames + latency;
    let padded: [Vec<f32>; 2] = std::array::from_fn(|c| {
        let mut v = input[c].clone();
        v.resize(total, 0.0);
        v
    });
    let mut out: Stems = Default::default();
    let mut switched_at = None;
    let mut position = 0;
    while position < total {
        let end = (position + 1024).min(total);
        if switched_at.is_none() && position >= latency + 1000 {
            switched_at = Some(position);
            controller.set_device(DeviceChoice::Device(DeviceId::CPU));
            let start = Instant::now();
            while controller.stats().device_switches() == 0 {
                assert!(start.elapsed() < Duration::from_secs(60), "no switch");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        handle.process(&padded[0][position..end], &padded[1][position..end]);
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
        position = end;
    }
    assert_eq!(handle.stats().underrun_frames(), 0);
    let out = out.map(|stem| stem.map(|channel| channel[latency..].to_vec()));
    // Out before the switch: frames up to its input position less the latency. Every chunk
    // covering a frame past its input position needed input the stream had not yet seen.
    let switched_at = switched_at.expect("the switch happened");
    let (before, after) = (switched_at - latency, switched_at);
    assert!(
        before >= 1000 && after < frames,
        "{before} {after} {frames}"
    );
    for stem in Stem::ALL {
        for channel in 0..2 {
            let (got, gpu, cpu) = (
                &out[stem.index()][channel],
                &on_gpu_graph[stem.index()][channel],
                &on_cpu_graph[stem.index()][channel],
            );
            assert_eq!(got[..before], gpu[..before], "{stem:?}: before the switch");
            assert_eq!(got[after..], cpu[after..], "{stem:?}: after the switch");
        }
    }
}
