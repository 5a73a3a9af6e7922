//! ONNX Runtime, devices and sessions. Needs the library: `cargo xtask test` fetches it and sets
//! `STEMFLOW_ORT_LIB`; without it these tests fail with the runtime's own message.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use stemflow_engine::families::{describe_model, ModelSeparator};
use stemflow_engine::runtime::{
    build_session, cached_graph_path, devices, folded_graph_path, partial_path, read_model_file,
    run_graph, runtime, CacheEntry, DeviceChoice, DeviceId, GraphSignature, Provider,
};
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StemStreamHandle, StreamConfig};
use stemflow_engine::{Separator, Stem, NUM_STEMS};
use stemflow_kit::testing::{fixtures_dir, scratch_dir};

/// Gains of `models/test/waveform_gain.onnx`, rows in Demucs order (drums, bass, other, vocals).
const GAINS: [[f32; 2]; 4] = [[0.5, 0.25], [0.25, 0.5], [0.125, 0.125], [0.0625, 0.03125]];
const SEGMENT: usize = 4096;

fn require_runtime() {
    if let Err(error) = runtime() {
        panic!("these tests need ONNX Runtime (run them with `cargo xtask test`): {error}");
    }
}

fn model_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../models/test")
        .join(name)
}

/// `models/test/waveform_gain.onnx`, loaded on the CPU.
fn waveform_gain_on_cpu() -> ModelSeparator {
    ModelSeparator::load(
        &model_path("waveform_gain.onnx"),
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap()
}

fn cuda0() -> DeviceChoice {
    DeviceChoice::Device("cuda:0".parse().unwrap())
}

fn is_cuda0_usable() -> bool {
    devices()
        .iter()
        .any(|d| d.id.to_string() == "cuda:0" && d.is_usable())
}

fn signal(len: usize) -> [Vec<f32>; 2] {
    [
        (0..len).map(|i| (i as f32 * 0.013).sin() * 0.5).collect(),
        (0..len).map(|i| (i as f32 * 0.007).cos() * 0.25).collect(),
    ]
}

fn render(
    handle: &mut StemStreamHandle,
    input: &[Vec<f32>; 2],
    range: std::ops::Range<usize>,
    out: &mut [[Vec<f32>; 2]; NUM_STEMS],
) {
    for start in range.clone().step_by(512) {
        let end = (start + 512).min(range.end);
        handle.process(&input[0][start..end], &input[1][start..end]);
        for stem in Stem::ALL {
            for channel in 0..2 {
                out[stem.index()][channel].extend_from_slice(handle.stem_output(stem, channel));
            }
        }
    }
}

fn offline(rate_hz: f32) -> StreamConfig {
    StreamConfig {
        host_sample_rate_hz: rate_hz,
        max_block_frames: 512,
        mode: ProcessingMode::Offline,
        is_offline_only: false,
    }
}

#[test]
fn the_runtime_loads_once_and_lists_a_usable_cpu() {
    require_runtime();
    let runtime = runtime().unwrap();
    assert!(runtime.version().starts_with("1."), "{}", runtime.version());
    let cpu = devices()
        .iter()
        .find(|d| d.id == DeviceId::CPU)
        .expect("cpu listed");
    assert!(cpu.is_usable(), "{:?}", cpu.status);
    assert_eq!(
        devices().last().unwrap().id,
        DeviceId::CPU,
        "cpu comes last"
    );
}

#[test]
fn the_waveform_model_runs_and_its_numbers_are_right() {
    require_runtime();
    let separator = waveform_gain_on_cpu();
    let (mut handle, _worker) = spawn_stream(Box::new(separator), &offline(44_100.0)).unwrap();
    let latency = handle.latency_samples();
    let input = signal(latency + 3 * SEGMENT);
    let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    render(&mut handle, &input, 0..input[0].len(), &mut out);
    for t in latency..input[0].len() {
        for channel in 0..2 {
            let x = input[channel][t - latency];
            let expect = |row: usize| x * GAINS[row][channel];
            assert!(
                (out[Stem::Drums.index()][channel][t] - expect(0)).abs() < 1e-6,
                "drums at {t}"
            );
            assert!(
                (out[Stem::Bass.index()][channel][t] - expect(1)).abs() < 1e-6,
                "bass at {t}"
            );
            assert!(
                (out[Stem::Vocals.index()][channel][t] - expect(3)).abs() < 1e-6,
                "vocals at {t}"
            );
            let sum: f32 = (0..NUM_STEMS).map(|s| out[s][channel][t]).sum();
            assert!((sum - x).abs() < 1e-6, "stems sum to the input at {t}");
        }
    }
}

#[test]
fn asking_for_cuda_without_it_runs_on_cpu_says_why_and_gives_the_cpu_output() {
    require_runtime();
    let on_cpu = waveform_gain_on_cpu();
    let on_cuda = ModelSeparator::load(&model_path("waveform_gain.onnx"), cuda0()).unwrap();
    let active = on_cuda.device().unwrap();
    assert_eq!(active.requested, cuda0());
    if is_cuda0_usable() {
        assert_eq!(active.actual.to_string(), "cuda:0");
        assert_eq!(active.fallback_reason, None);
    } else {
        assert_eq!(active.actual, DeviceId::CPU);
        let reason = active.fallback_reason.expect("a reason for the fallback");
        assert!(reason.contains("cuda:0 failed"), "{reason}");
    }
    let input = signal(4 * SEGMENT);
    let mut outputs = Vec::new();
    for separator in [on_cpu, on_cuda] {
        let (mut handle, _worker) = spawn_stream(Box::new(separator), &offline(48_000.0)).unwrap();
        let mut out: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
        render(&mut handle, &input, 0..input[0].len(), &mut out);
        outputs.push(out);
    }
    for (a, b) in outputs[0].iter().flatten().zip(outputs[1].iter().flatten()) {
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-6, "{x} vs {y}");
        }
    }
}

#[test]
fn two_instances_share_one_session() {
    require_runtime();
    let a = waveform_gain_on_cpu();
    let b = waveform_gain_on_cpu();
    assert!(Arc::ptr_eq(&a.session().session, &b.session().session));
}

#[test]
fn switching_device_while_streaming_leaves_no_gap() {
    require_runtime();
    let input = signal(10 * SEGMENT);

    let (mut handle, _worker) =
        spawn_stream(Box::new(waveform_gain_on_cpu()), &offline(44_100.0)).unwrap();
    let mut unswitched: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    render(&mut handle, &input, 0..input[0].len(), &mut unswitched);

    let (mut handle, controller) =
        spawn_stream(Box::new(waveform_gain_on_cpu()), &offline(44_100.0)).unwrap();
    let mut switched: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    let middle = 5 * SEGMENT;
    render(&mut handle, &input, 0..middle, &mut switched);
    controller.set_device(cuda0());
    let start = Instant::now();
    while controller.stats().device_switches() == 0 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the switch never happened: {:?}",
            controller.stats().device_warning()
        );
        // Keep the worker's loop turning (it handles commands between chunks).
        std::thread::sleep(Duration::from_millis(5));
    }
    let active = controller.stats().active_device().unwrap();
    assert_eq!(active.requested, cuda0());
    if !is_cuda0_usable() {
        assert!(active.fallback_reason.unwrap().contains("cuda:0"));
    }
    render(&mut handle, &input, middle..input[0].len(), &mut switched);
    assert_eq!(handle.stats().underrun_frames(), 0);
    for (a, b) in unswitched.iter().flatten().zip(switched.iter().flatten()) {
        assert_eq!(a.len(), b.len());
        for (t, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-6, "frame {t}: {x} vs {y}");
        }
    }
}

#[test]
fn a_model_with_the_wrong_signature_names_expected_and_found() {
    require_runtime();
    let error = ModelSeparator::load(&model_path("probe.onnx"), DeviceChoice::Auto)
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("HTDemucs `mix` [1, 2, T]")
            && error.contains("MDX-Net")
            && error.contains("RoFormer"),
        "{error}"
    );
    assert!(
        error.contains("found inputs `x` [1, 4] → outputs `y` [1, 4]"),
        "{error}"
    );
}

#[test]
fn a_corrupt_model_file_is_refused_cleanly() {
    require_runtime();
    let path = std::env::temp_dir().join(format!("stemflow-corrupt-{}.onnx", std::process::id()));
    std::fs::write(&path, b"\x08\x07garbage that is not protobuf at all").unwrap();
    let error = ModelSeparator::load(&path, DeviceChoice::Auto)
        .err()
        .unwrap()
        .to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(error.contains("not an ONNX model"), "{error}");
    let missing = ModelSeparator::load(&model_path("does-not-exist.onnx"), DeviceChoice::Auto)
        .err()
        .unwrap()
        .to_string();
    assert!(missing.contains("does-not-exist.onnx"), "{missing}");
}

/// Every ONNX file the tests use: the checked-in test graphs and the generated fixtures.
fn all_test_graphs() -> Vec<PathBuf> {
    let fixtures = fixtures_dir();
    let mut graphs = Vec::new();
    for dir in [model_path(""), fixtures] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "onnx") {
                graphs.push(path);
            }
        }
    }
    assert!(graphs.len() >= 8, "too few test graphs: {graphs:?}");
    graphs
}

#[test]
fn the_signature_read_from_the_file_is_the_one_onnx_runtime_reports() {
    require_runtime();
    let mut num_inferred = 0;
    for path in all_test_graphs() {
        let bytes = std::fs::read(&path).unwrap();
        let session = build_session(DeviceId::CPU, &bytes, 1, None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (read, reported) = (
            GraphSignature::read(&bytes).unwrap(),
            GraphSignature::of(&session),
        );
        assert_eq!(read.inputs, reported.inputs, "{}", path.display());
        assert_eq!(read.metadata, reported.metadata, "{}", path.display());
        // Outputs: what the file fixes is what the session reports; what it leaves symbolic
        // (-1) the session may have inferred.
        assert_eq!(read.outputs.len(), reported.outputs.len());
        for (file, session) in read.outputs.iter().zip(&reported.outputs) {
            assert_eq!((&file.name, file.is_f32), (&session.name, session.is_f32));
            assert_eq!(file.dims.len(), session.dims.len(), "{}", path.display());
            for (&in_file, &inferred) in file.dims.iter().zip(&session.dims) {
                assert!(in_file == inferred || in_file < 0, "{}", path.display());
            }
            num_inferred += usize::from(file.dims != session.dims);
        }
    }
    assert!(
        num_inferred > 0,
        "no test graph leaves its output shape to inference"
    );
    assert!(
        GraphSignature::read(b"\x3a\x05ab").is_err(),
        "a truncated graph"
    );
    assert!(GraphSignature::read(b"").is_err(), "no graph at all");
}

#[test]
fn a_model_whose_output_shape_only_onnx_runtime_infers_is_recognised() {
    require_runtime();
    // htdemucs6_test.onnx declares `stems` with symbolic dimensions, as torch.onnx exports do.
    let fixtures = fixtures_dir();
    let path = fixtures.join("htdemucs6_test.onnx");
    let model = read_model_file(&path).unwrap();
    assert!(GraphSignature::read(&model.bytes).unwrap().outputs[0]
        .dims
        .iter()
        .all(|&d| d < 0));
    let description = describe_model(&path, &model).unwrap();
    assert_eq!(description.stems.len(), 6);
    let separator = ModelSeparator::load(&path, DeviceChoice::Device(DeviceId::CPU)).unwrap();
    assert_eq!(separator.description().stems.len(), 6);
}

/// Runs `session` (one f32 input of fixed shape) on a deterministic signal.
fn run_once(session: &mut ort::session::Session, bytes: &[u8]) -> Vec<f32> {
    let signature = GraphSignature::read(bytes).unwrap();
    let (input, output) = (&signature.inputs[0], &signature.outputs[0]);
    let shape: Vec<usize> = input.dims.iter().map(|&d| d.max(1) as usize).collect();
    let len = shape.iter().product();
    let signal: Vec<f32> = (0..len).map(|i| (i as f32 * 0.0137).sin() * 0.5).collect();
    run_graph(session, &input.name, &output.name, &shape, &signal).unwrap()
}

#[test]
fn the_optimised_graph_is_cached_and_computes_what_the_model_computes() {
    require_runtime();
    let fixtures = fixtures_dir();
    let bytes = std::fs::read(fixtures.join("htdemucs_test.onnx")).unwrap();
    let dir = scratch_dir("graph-cache");
    let version = runtime().unwrap().version();
    let entry = cached_graph_path(&dir, "model-sha", DeviceId::CPU, version).unwrap();
    let through_cache = |bytes: &[u8], entry: &Path| {
        build_session(
            DeviceId::CPU,
            bytes,
            1,
            Some(&CacheEntry::Optimised(entry.to_path_buf())),
        )
    };

    let expected = run_once(
        &mut build_session(DeviceId::CPU, &bytes, 1, None).unwrap(),
        &bytes,
    );
    // First start: optimises, writes the entry (nothing partial left), runs.
    let mut first = through_cache(&bytes, &entry).unwrap();
    assert!(entry.is_file(), "no cache entry written");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a partial file was left"
    );
    assert_eq!(run_once(&mut first, &bytes), expected);
    // Later starts load the entry; the model's bytes are not even looked at.
    let mut cached = through_cache(b"not a model", &entry).unwrap();
    assert_eq!(run_once(&mut cached, &bytes), expected);

    // A damaged entry is removed and the session is built from the model all the same.
    std::fs::write(&entry, b"half a graph").unwrap();
    let mut rebuilt = through_cache(&bytes, &entry).unwrap();
    assert!(!entry.exists(), "the damaged entry was kept");
    assert_eq!(run_once(&mut rebuilt, &bytes), expected);

    // A cache that cannot be written (its folder is a file) costs nothing but the cache.
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, b"").unwrap();
    let entry_under_file =
        cached_graph_path(&blocked, "model-sha", DeviceId::CPU, version).unwrap();
    let mut uncached = through_cache(&bytes, &entry_under_file).unwrap();
    assert_eq!(run_once(&mut uncached, &bytes), expected);

    // A graph that cannot be written (a full disk; here a folder where its partial file goes)
    // costs only the cache too, though ONNX Runtime then fails the session it was saving.
    let unwritable = cached_graph_path(&dir, "other-sha", DeviceId::CPU, version).unwrap();
    std::fs::create_dir_all(partial_path(&unwritable)).unwrap();
    let mut unsaved = through_cache(&bytes, &unwritable).unwrap();
    assert!(!unwritable.exists(), "an entry was written");
    assert_eq!(run_once(&mut unsaved, &bytes), expected);

    // A model ONNX Runtime refuses is an error, whatever the cache.
    assert!(through_cache(b"not a model", &dir.join("x.onnx")).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A deterministic pseudo-random value in −1..1.
fn noise(i: usize, seed: usize) -> f32 {
    let x = (i * 7919 + seed * 104_729) as f32;
    (x * 0.618_034).fract() * 2.0 - 1.0
}

/// Runs a one-input, one-output graph on a session built from `bytes`.
fn run_bytes(bytes: &[u8], shape: &[usize], signal: &[f32]) -> Vec<f32> {
    let session = build_session(DeviceId::CPU, bytes, 1, None).unwrap();
    run_session(session, bytes, shape, signal)
}

/// Runs `session` of the one-input, one-output graph `bytes`.
fn run_session(
    mut session: ort::session::Session,
    bytes: &[u8],
    shape: &[usize],
    signal: &[f32],
) -> Vec<f32> {
    let signature = GraphSignature::read(bytes).unwrap();
    run_graph(
        &mut session,
        &signature.inputs[0].name,
        &signature.outputs[0].name,
        shape,
        signal,
    )
    .unwrap()
}

/// Asserts that the converted model's output differs from the float model's (something was
/// converted) but stays within `min_sdr_db` of it, and that the converted graph has the float
/// one's inputs and outputs (the engine feeds both alike). Each model is `(bytes, output)`.
/// Returns the converted graph's signature.
fn assert_converted_like_float(
    what: &str,
    (float, expected): (&[u8], &[f32]),
    (converted, output): (&[u8], &[f32]),
    min_sdr_db: f64,
) -> GraphSignature {
    assert_ne!(output, expected, "{what}: nothing was converted");
    let closeness = stemflow_kit::metrics::sdr_db_of_samples(expected, output);
    assert!(
        closeness > min_sdr_db,
        "{what} only {closeness:.1} dB from float"
    );
    let (signature, float_signature) = (
        GraphSignature::read(converted).unwrap(),
        GraphSignature::read(float).unwrap(),
    );
    assert_eq!(signature.inputs, float_signature.inputs);
    assert_eq!(signature.outputs, float_signature.outputs);
    signature
}

#[test]
fn a_batch_of_weights_is_quantized_matrix_by_matrix() {
    use stemflow_convert::quantize::{quantize_model, QuantizeOptions};
    use stemflow_kit::metrics::sdr_db_of_samples;
    use stemflow_onnx::{Dim, OnnxGraph};
    require_runtime();

    // A RoFormer's per-band layers: `[bands, frames, in] @ [bands, in, out]`, the second
    // band's weights 1000 times the first's, so one scale for both would leave the first band
    // with a few levels.
    let (bands, frames, input, output) = (2, 12, 16, 24);
    let weights: Vec<f32> = (0..bands * input * output)
        .map(|i| noise(i, 7) * if i < input * output { 1.0 } else { 1000.0 })
        .collect();
    let mut graph = OnnxGraph::new("batched");
    graph.add_input(
        "x",
        vec![Dim::Fixed(bands), Dim::Fixed(frames), Dim::Fixed(input)],
    );
    graph
        .add_initializer_f32("w", &[bands, input, output], weights)
        .unwrap();
    graph.add_node("MatMul", "mm", &["x", "w"], &["y"], vec![]);
    graph.add_output(
        "y",
        vec![Dim::Fixed(bands), Dim::Fixed(frames), Dim::Fixed(output)],
    );
    graph.validate().unwrap();
    let float = graph.to_model_bytes();
    let (int8, report) = quantize_model(&float, QuantizeOptions::default()).unwrap();
    assert_eq!((report.num_matmuls, report.num_matmuls_left), (1, 0));
    assert!(
        int8.len() < float.len() / 2,
        "{} vs {} bytes",
        int8.len(),
        float.len()
    );

    let shape = [bands, frames, input];
    let signal: Vec<f32> = (0..shape.iter().product()).map(|i| noise(i, 3)).collect();
    let expected = run_bytes(&float, &shape, &signal);
    let quantized = run_bytes(&int8, &shape, &signal);
    assert_ne!(quantized, expected, "nothing was quantized");
    for (band, (expected, quantized)) in expected
        .chunks(frames * output)
        .zip(quantized.chunks(frames * output))
        .enumerate()
    {
        let closeness = sdr_db_of_samples(expected, quantized);
        assert!(
            closeness > 30.0,
            "band {band}: int8 only {closeness:.1} dB from float"
        );
    }
}

#[test]
fn an_int8_quantized_graph_runs_and_stays_close_to_the_float_one() {
    use stemflow_convert::quantize::{quantize_model, QuantizeOptions};
    use stemflow_kit::metrics::sdr_db_of_samples;
    use stemflow_onnx::{Attribute, Dim, OnnxGraph};
    require_runtime();

    // Two MatMuls sharing their input (one run-time quantization serves both), then a Conv
    // with a bias on the result.
    let weights = |len: usize, seed: usize| -> Vec<f32> {
        (0..len)
            .map(|i| noise(i, seed) * (1.0 + (i % 5) as f32))
            .collect()
    };
    let mut graph = OnnxGraph::new("int8");
    graph.add_input(
        "x",
        vec![Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(12), Dim::Fixed(16)],
    );
    graph
        .add_initializer_f32("w1", &[16, 24], weights(16 * 24, 1))
        .unwrap();
    graph
        .add_initializer_f32("w2", &[16, 24], weights(16 * 24, 2))
        .unwrap();
    graph
        .add_initializer_f32("k", &[3, 2, 3, 3], weights(54, 3))
        .unwrap();
    graph
        .add_initializer_f32("b", &[3], vec![0.5, -1.0, 2.0])
        .unwrap();
    graph.add_node("MatMul", "mm1", &["x", "w1"], &["y1"], vec![]);
    graph.add_node("MatMul", "mm2", &["x", "w2"], &["y2"], vec![]);
    graph.add_node("Add", "add", &["y1", "y2"], &["y"], vec![]);
    let pads = ("pads", Attribute::Ints(vec![1, 1, 1, 1]));
    graph.add_node("Conv", "conv", &["y", "k", "b"], &["z"], vec![pads]);
    graph.add_output(
        "z",
        vec![Dim::Fixed(1), Dim::Fixed(3), Dim::Fixed(12), Dim::Fixed(24)],
    );
    graph.validate().unwrap();
    let float = graph.to_model_bytes();

    let shape = [1, 2, 12, 16];
    let signal: Vec<f32> = (0..shape.iter().product()).map(|i| noise(i, 9)).collect();
    let expected = run_bytes(&float, &shape, &signal);

    for (ops, num_matmuls, num_convs) in [
        (QuantizeOptions::default(), 2, 0),
        (
            QuantizeOptions {
                conv: true,
                ..QuantizeOptions::default()
            },
            2,
            1,
        ),
    ] {
        let (int8, report) = quantize_model(&float, ops).unwrap();
        assert_eq!(
            (report.num_matmuls, report.num_convs),
            (num_matmuls, num_convs)
        );
        assert_eq!(report.num_convs_left, 1 - num_convs);
        assert!(
            int8.len() < float.len(),
            "{} vs {} bytes",
            int8.len(),
            float.len()
        );
        let output = run_bytes(&int8, &shape, &signal);
        // Close to the float model, with its inputs and outputs; the file says it is quantized,
        // and quantizing it again is refused.
        let signature = assert_converted_like_float(
            &format!("{ops:?}: int8"),
            (&float, &expected),
            (&int8, &output),
            30.0,
        );
        assert!(signature.metadata["stemflow.quantization"].contains("7-bit"));
        let again = quantize_model(&int8, ops).unwrap_err().to_string();
        assert!(again.contains("already quantized"), "{again}");
    }

    // A weight another node reads as an activation stays, and the graph stays whole.
    let mut shared = OnnxGraph::new("shared");
    shared.add_input("x", vec![Dim::Fixed(4), Dim::Fixed(4)]);
    shared
        .add_initializer_f32("w", &[4, 4], weights(16, 4))
        .unwrap();
    shared.add_node("MatMul", "mm", &["x", "w"], &["y"], vec![]);
    shared.add_node("Add", "add", &["y", "w"], &["z"], vec![]);
    shared.add_output("z", vec![Dim::Fixed(4), Dim::Fixed(4)]);
    let float = shared.to_model_bytes();
    let signal: Vec<f32> = (0..16).map(|i| noise(i, 5)).collect();
    let (int8, _) = quantize_model(&float, QuantizeOptions::default()).unwrap();
    let closeness = sdr_db_of_samples(
        &run_bytes(&float, &[4, 4], &signal),
        &run_bytes(&int8, &[4, 4], &signal),
    );
    assert!(closeness > 30.0, "{closeness:.1} dB");

    // Nothing to quantize is said, with what there is.
    let conv_only = quantize_model(&graph_with_conv_only(), QuantizeOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        conv_only.contains("1 Conv (add --ops matmul,conv"),
        "{conv_only}"
    );
}

fn graph_with_conv_only() -> Vec<u8> {
    use stemflow_onnx::{Dim, OnnxGraph};
    let mut graph = OnnxGraph::new("conv");
    graph.add_input("x", vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(4)]);
    graph
        .add_initializer_f32("k", &[1, 1, 1], vec![2.0])
        .unwrap();
    graph.add_node("Conv", "conv", &["x", "k"], &["y"], vec![]);
    graph.add_output("y", vec![Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(4)]);
    graph.to_model_bytes()
}

/// A graph whose shape arithmetic overflows float16 (a length of 70 000 samples), beside
/// audio-path nodes of every kind the float16 conversion tells apart: a Conv reading data and
/// weights, data scaled by shape arithmetic (float32 where they meet), a zero tensor from
/// `ConstantOfShape`'s default value, an embedding looked up from constants, and `CumSum`
/// (kept float32).
fn graph_for_float16(len: usize) -> Vec<u8> {
    use stemflow_onnx::{Attribute, Dim, OnnxGraph};
    let mut graph = OnnxGraph::new("fp16");
    graph.add_input("x", vec![Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(len)]);
    graph.add_initializer_i64("axis2", &[1], vec![2]).unwrap();
    graph.add_initializer_i64("zero", &[1], vec![0]).unwrap();
    graph.add_initializer_f32("two", &[], vec![2.0]).unwrap();
    graph
        .add_initializer_f32("full_len", &[], vec![len as f32 * 0.5])
        .unwrap();
    let kernel: Vec<f32> = (0..3 * 2 * 5).map(|i| noise(i, 11) * 0.5).collect();
    graph.add_initializer_f32("k", &[3, 2, 5], kernel).unwrap();
    graph
        .add_initializer_f32("b", &[3], vec![0.1, -0.2, 0.3])
        .unwrap();
    let table: Vec<f32> = (0..4 * 3).map(|i| noise(i, 12)).collect();
    graph.add_initializer_f32("table", &[4, 3], table).unwrap();
    graph.add_initializer_i64("row", &[], vec![2]).unwrap();
    graph
        .add_initializer_i64("bias_shape", &[3], vec![1, 3, 1])
        .unwrap();
    // len → float (70 000 overflows float16) → len / 2 → int → the first half of x.
    graph.add_node("Shape", "shape", &["x"], &["shape"], vec![]);
    graph.add_node("Gather", "len", &["shape", "axis2"], &["len"], vec![]);
    let to_float = || vec![("to", Attribute::Int(1))];
    graph.add_node("Cast", "len_f", &["len"], &["len_f"], to_float());
    graph.add_node("Div", "half_f", &["len_f", "two"], &["half_f"], vec![]);
    graph.add_node(
        "Cast",
        "half",
        &["half_f"],
        &["half"],
        vec![("to", Attribute::Int(7))],
    );
    graph.add_node(
        "Slice",
        "first_half",
        &["x", "zero", "half", "axis2"],
        &["y"],
        vec![],
    );
    // Data scaled by shape arithmetic (half_f / full_len = 1).
    graph.add_node("Div", "ratio", &["half_f", "full_len"], &["ratio"], vec![]);
    graph.add_node("Mul", "scaled", &["y", "ratio"], &["y2"], vec![]);
    let pads = ("pads", Attribute::Ints(vec![2, 2]));
    graph.add_node("Conv", "conv", &["y2", "k", "b"], &["c"], vec![pads]);
    graph.add_node("Shape", "c_shape", &["c"], &["c_shape"], vec![]);
    graph.add_node("ConstantOfShape", "zeros", &["c_shape"], &["zeros"], vec![]);
    graph.add_node("Add", "plus_zeros", &["c", "zeros"], &["c2"], vec![]);
    graph.add_node("Gather", "embed", &["table", "row"], &["e"], vec![]);
    graph.add_node("Reshape", "embed_3d", &["e", "bias_shape"], &["e3"], vec![]);
    graph.add_node("Add", "plus_embed", &["c2", "e3"], &["c3"], vec![]);
    graph.add_node("CumSum", "cumsum", &["c3", "axis2"], &["s"], vec![]);
    graph.add_node("Div", "mean", &["s", "full_len"], &["z"], vec![]);
    graph.add_output(
        "z",
        vec![Dim::Fixed(1), Dim::Fixed(3), Dim::Symbolic("half".into())],
    );
    graph.validate().unwrap();
    graph.to_model_bytes()
}

#[test]
fn a_float16_graph_runs_close_to_the_float_one_and_keeps_shape_arithmetic_float32() {
    use stemflow_convert::float16::convert_model;
    require_runtime();

    let len = 70_000;
    let float = graph_for_float16(len);
    let shape = [1, 2, len];
    let signal: Vec<f32> = (0..2 * len).map(|i| noise(i, 13) * 0.5).collect();
    let expected = run_bytes(&float, &shape, &signal);
    assert_eq!(expected.len(), 3 * len / 2);

    let (half, report) = convert_model(&float).unwrap();
    // Conv, Slice, Shape, the Adds, the Reshape of the embedding's result... in float16; the
    // shape arithmetic, the data × shape-arithmetic product and CumSum in float32.
    assert!(report.num_half_nodes >= 5, "{report:?}");
    assert!(report.num_float_nodes >= 5, "{report:?}");
    assert!(report.num_casts >= 4, "{report:?}");
    assert_eq!(report.num_clamped, 0);
    assert!(
        report.weight_bytes_after > 0 && report.weight_bytes_after < report.weight_bytes_before
    );
    let output = run_bytes(&half, &shape, &signal);
    assert_eq!(
        output.len(),
        expected.len(),
        "the length computed in shape arithmetic changed (70 000 overflows float16)"
    );
    // The engine feeds it as it feeds the float model; it says what it is; never twice.
    let signature =
        assert_converted_like_float("float16", (&float, &expected), (&half, &output), 50.0);
    assert!(signature.metadata["stemflow.float16"].contains("float16"));
    let again = convert_model(&half).unwrap_err().to_string();
    assert!(again.contains("already float16"), "{again}");
}

/// Frames of the envelope graph below: its constants are larger than what ONNX Runtime folds in
/// the first step (`SMALL_FOLD_BYTES`), so the second step computes them.
const ENVELOPE_LEN: usize = 32_768;
const ENVELOPE_WINDOW: usize = 4096;
const ENVELOPE_HOP: usize = 1024;
const ENVELOPE_STEPS: usize = 8;

/// The window the envelope graph adds up: half a sine over [`ENVELOPE_WINDOW`] frames.
fn envelope_window() -> Vec<f32> {
    (0..ENVELOPE_WINDOW)
        .map(|j| (std::f32::consts::PI * j as f32 / ENVELOPE_WINDOW as f32).sin())
        .collect()
}

/// `y = x · envelope`, where the envelope is an overlap-add of a window built the way exported
/// ISTFTs build it: zeros as long as the input (`Shape` → `ConstantOfShape`), then one
/// `GatherND → Add → ScatterND` step per frame. Constant, but only once the input's shape is known.
/// With `in_float16`, `y` is instead the input and the envelope, both rounded to float16 and
/// stacked (`Concat`, which ONNX Runtime runs in float16 on the CPU, where it would turn a
/// float16 product back into a float32 one), so the value the rest of the graph reads from the
/// constants is a float16 tensor.
fn graph_with_an_envelope_chain(window: &[f32], in_float16: bool) -> Vec<u8> {
    use stemflow_onnx::{Attribute, Dim, OnnxGraph};
    let mut graph = OnnxGraph::new("envelope");
    graph.add_input("x", vec![Dim::Fixed(1), Dim::Fixed(ENVELOPE_LEN)]);
    graph
        .add_initializer_f32("window", &[ENVELOPE_WINDOW], window.to_vec())
        .unwrap();
    graph.add_initializer_i64("one", &[1], vec![1]).unwrap();
    graph.add_initializer_i64("two", &[1], vec![2]).unwrap();
    graph.add_node("Shape", "shape", &["x"], &["shape"], vec![]);
    graph.add_node("Slice", "len", &["shape", "one", "two"], &["len"], vec![]);
    graph.add_node("ConstantOfShape", "zeros", &["len"], &["env0"], vec![]);
    for k in 0..ENVELOPE_STEPS {
        let indices: Vec<i64> = (0..ENVELOPE_WINDOW)
            .map(|j| (k * ENVELOPE_HOP + j) as i64)
            .collect();
        let (idx, cur, sum) = (format!("idx{k}"), format!("cur{k}"), format!("sum{k}"));
        let (env, next) = (format!("env{k}"), format!("env{}", k + 1));
        graph
            .add_initializer_i64(&idx, &[ENVELOPE_WINDOW, 1], indices)
            .unwrap();
        graph.add_node("GatherND", &cur, &[&env, &idx], &[&cur], vec![]);
        graph.add_node("Add", &sum, &[&cur, "window"], &[&sum], vec![]);
        graph.add_node("ScatterND", &next, &[&env, &idx, &sum], &[&next], vec![]);
    }
    let last = format!("env{ENVELOPE_STEPS}");
    if in_float16 {
        let to = |t: i64| vec![("to", Attribute::Int(t))];
        graph.add_initializer_i64("zero", &[1], vec![0]).unwrap();
        graph.add_node("Cast", "x16", &["x"], &["x16"], to(10));
        graph.add_node("Cast", "env16", &[&last], &["env16"], to(10));
        graph.add_node("Unsqueeze", "row16", &["env16", "zero"], &["row16"], vec![]);
        let axis = vec![("axis", Attribute::Int(0))];
        graph.add_node("Concat", "y16", &["x16", "row16"], &["y16"], axis);
        graph.add_node("Cast", "y", &["y16"], &["y"], to(1));
        graph.add_output("y", vec![Dim::Fixed(2), Dim::Fixed(ENVELOPE_LEN)]);
    } else {
        graph.add_node("Mul", "y", &["x", &last], &["y"], vec![]);
        graph.add_output("y", vec![Dim::Fixed(1), Dim::Fixed(ENVELOPE_LEN)]);
    }
    graph.to_model_bytes()
}

#[test]
fn constants_are_computed_before_optimising_and_the_model_computes_the_same() {
    use stemflow_engine::runtime::{plan_folding as plan, try_fold};
    require_runtime();
    let window = envelope_window();
    let bytes = graph_with_an_envelope_chain(&window, false);
    // The same sums, in the same order, in Rust.
    let mut envelope = vec![0.0f32; ENVELOPE_LEN];
    for k in 0..ENVELOPE_STEPS {
        for (j, w) in window.iter().enumerate() {
            envelope[k * ENVELOPE_HOP + j] += w;
        }
    }
    let signal: Vec<f32> = (0..ENVELOPE_LEN).map(|i| noise(i, 3)).collect();
    let expected: Vec<f32> = signal.iter().zip(&envelope).map(|(x, e)| x * e).collect();

    let (folded, report) = try_fold(&bytes, 1).unwrap().expect("nothing was folded");
    assert_eq!(report.num_folded, 1 + 3 * ENVELOPE_STEPS, "{report:?}");
    assert_eq!(report.num_values, 1, "only the last envelope is read");
    assert!(
        plan(&folded).unwrap().is_none(),
        "constants left in the graph"
    );
    let shape = [1, ENVELOPE_LEN];
    assert_eq!(run_bytes(&folded, &shape, &signal), expected);
    // Sessions fold on their own (`build_session`), and compute the same.
    assert_eq!(run_bytes(&bytes, &shape, &signal), expected);
    // A model without constants to compute is given back as it is.
    let plain = graph_with_conv_only();
    assert!(try_fold(&plain, 1).unwrap().is_none());

    // A float16 value read by the rest of the graph (float16 models for GPUs are built afresh
    // at every start): folded too, and the model computes what it computed unfolded.
    let half = graph_with_an_envelope_chain(&window, true);
    let (half_folded, report) = try_fold(&half, 1)
        .unwrap()
        .expect("float16: nothing folded");
    assert_eq!(report.num_folded, 3 + 3 * ENVELOPE_STEPS, "{report:?}");
    assert!(plan(&half_folded).unwrap().is_none());
    let unfolded = run_unoptimised(&half, &shape, &signal);
    let envelope_in_half: Vec<f32> = envelope
        .iter()
        .map(|&e| half::f16::from_f32(e).to_f32())
        .collect();
    assert_eq!(unfolded[ENVELOPE_LEN..], envelope_in_half);
    assert_eq!(run_bytes(&half_folded, &shape, &signal), unfolded);
    assert_eq!(run_bytes(&half, &shape, &signal), unfolded);
}

#[test]
fn sessions_on_other_devices_get_the_folded_graph_cached() {
    use stemflow_engine::runtime::plan_folding as plan;
    require_runtime();
    let window = envelope_window();
    let bytes = graph_with_an_envelope_chain(&window, false);
    let shape = [1, ENVELOPE_LEN];
    let signal: Vec<f32> = (0..ENVELOPE_LEN).map(|i| noise(i, 5)).collect();
    let expected = run_bytes(&bytes, &shape, &signal);
    let dir = scratch_dir("folded-cache");
    let version = runtime().unwrap().version();
    // (The device does not matter to the folded graph: the CPU stands in for a GPU here.)
    let entry = folded_graph_path(&dir, "model-sha", version);
    let cache = CacheEntry::Folded(entry.clone());
    let is_folded = |graph: &[u8]| !graph.is_empty() && plan(graph).unwrap().is_none();

    // First start: folds, writes the folded model (nothing partial left), runs.
    let first = build_session(DeviceId::CPU, &bytes, 1, Some(&cache)).unwrap();
    let folded = std::fs::read(&entry).expect("no folded entry written");
    assert!(is_folded(&folded), "the entry is not the folded model");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "a partial file was left"
    );
    assert_eq!(run_session(first, &bytes, &shape, &signal), expected);
    // Later starts build from the entry; the model's bytes are not even looked at.
    let later = build_session(DeviceId::CPU, b"not a model", 1, Some(&cache)).unwrap();
    assert_eq!(run_session(later, &bytes, &shape, &signal), expected);

    // A damaged entry is replaced by the model folded afresh.
    std::fs::write(&entry, b"half a graph").unwrap();
    let rebuilt = build_session(DeviceId::CPU, &bytes, 1, Some(&cache)).unwrap();
    assert!(
        is_folded(&std::fs::read(&entry).unwrap()),
        "the damaged entry was kept"
    );
    assert_eq!(run_session(rebuilt, &bytes, &shape, &signal), expected);

    // A model with nothing to fold gets an empty entry, and later starts build it as it is.
    let plain = graph_with_conv_only();
    let plain_cache = CacheEntry::Folded(folded_graph_path(&dir, "plain-sha", version));
    let plain_expected = run_once(
        &mut build_session(DeviceId::CPU, &plain, 1, None).unwrap(),
        &plain,
    );
    build_session(DeviceId::CPU, &plain, 1, Some(&plain_cache)).unwrap();
    let CacheEntry::Folded(plain_entry) = &plain_cache else {
        unreachable!()
    };
    assert_eq!(
        std::fs::read(plain_entry).unwrap(),
        b"",
        "nothing to fold is an empty entry"
    );
    let mut plain_later = build_session(DeviceId::CPU, &plain, 1, Some(&plain_cache)).unwrap();
    assert_eq!(run_once(&mut plain_later, &plain), plain_expected);

    // A cache that cannot be written (its folder is a file) costs nothing but the cache.
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, b"").unwrap();
    let under_file = CacheEntry::Folded(folded_graph_path(&blocked, "model-sha", version));
    let uncached = build_session(DeviceId::CPU, &bytes, 1, Some(&under_file)).unwrap();
    assert_eq!(run_session(uncached, &bytes, &shape, &signal), expected);

    // A model ONNX Runtime refuses is an error, and nothing is cached for it.
    let refused = dir.join("refused.onnx");
    let refused_cache = CacheEntry::Folded(refused.clone());
    assert!(build_session(DeviceId::CPU, b"not a model", 1, Some(&refused_cache)).is_err());
    assert!(
        !refused.exists(),
        "an entry was written for a refused model"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs a one-input, one-output graph with every ONNX Runtime optimisation off (no folding).
fn run_unoptimised(bytes: &[u8], shape: &[usize], signal: &[f32]) -> Vec<f32> {
    use ort::session::builder::GraphOptimizationLevel;
    let session = ort::session::Session::builder(runtime().unwrap().environment())
        .unwrap()
        .with_optimization_level(GraphOptimizationLevel::Disable)
        .unwrap()
        .with_intra_threads(1)
        .unwrap()
        .commit_from_memory(bytes)
        .unwrap();
    run_session(session, bytes, shape, signal)
}

#[test]
fn a_directml_session_that_fails_is_tried_again_without_graph_fusion() {
    // No DirectML here (Linux): both tries fail, and the error says so; on Windows a session
    // whose graph fusion fails (as under Wine) runs with it off instead of falling back.
    require_runtime();
    let bytes = graph_with_conv_only();
    let directml = DeviceId {
        provider: Provider::DirectMl,
        index: 0,
    };
    let Err(error) = build_session(directml, &bytes, 1, None) else {
        panic!("a DirectML session on Linux");
    };
    assert!(error.contains("without DirectML's graph fusion"), "{error}");
}
