//! ONNX Runtime, devices and sessions. Needs the library: `cargo xtask test` fetches it and sets
//! `STEMFLOW_ORT_LIB`; without it these tests fail with the runtime's own message.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stemflow_engine::families::ModelSeparator;
use stemflow_engine::runtime::devices::{devices, DeviceChoice, DeviceId};
use stemflow_engine::runtime::runtime;
use stemflow_engine::separator::Separator;
use stemflow_engine::stream::{spawn_stream, ProcessingMode, StemStreamHandle, StreamConfig};
use stemflow_engine::{Stem, NUM_STEMS};

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
    let separator = ModelSeparator::load(
        &model_path("waveform_gain.onnx"),
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
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
    let on_cpu = ModelSeparator::load(
        &model_path("waveform_gain.onnx"),
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
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
    let a = ModelSeparator::load(
        &model_path("waveform_gain.onnx"),
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
    let b = ModelSeparator::load(
        &model_path("waveform_gain.onnx"),
        DeviceChoice::Device(DeviceId::CPU),
    )
    .unwrap();
    assert!(Arc::ptr_eq(&a.session().session, &b.session().session));
}

#[test]
fn switching_device_while_streaming_leaves_no_gap() {
    require_runtime();
    let input = signal(10 * SEGMENT);
    let load = || {
        ModelSeparator::load(
            &model_path("waveform_gain.onnx"),
            DeviceChoice::Device(DeviceId::CPU),
        )
        .unwrap()
    };

    let (mut handle, _worker) = spawn_stream(Box::new(load()), &offline(44_100.0)).unwrap();
    let mut unswitched: [[Vec<f32>; 2]; NUM_STEMS] = Default::default();
    render(&mut handle, &input, 0..input[0].len(), &mut unswitched);

    let (mut handle, controller) = spawn_stream(Box::new(load()), &offline(44_100.0)).unwrap();
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
