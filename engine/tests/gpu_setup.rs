//! Session set-up for GPUs, checked without one: the bound-buffer path (I/O binding) computes
//! what the plain path computes, run after run (the CPU stands in for the device); CUDA
//! registered with every tuning option fails cleanly on ONNX Runtime's CPU build; instances
//! sharing one session are served in turn. Needs the library (`cargo xtask test` sets
//! `STEMFLOW_ORT_LIB`).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stemflow_engine::runtime::{
    build_session, build_session_with, live_session_count, read_model_file, run_graph_io, runtime,
    ConvSearch, DeviceChoice, DeviceId, GpuTuning, GraphIo, ModelRunner, SessionSlot,
};

/// `models/test/waveform_gain.onnx`: `mix` [1, 2, 4096] → `stems` [1, 4, 2, 4096].
const FRAMES: usize = 4096;

fn waveform_model() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/test/waveform_gain.onnx")
}

fn waveform_io() -> GraphIo {
    GraphIo::single("mix", "stems", vec![1, 2, FRAMES])
}

fn require_runtime() {
    if let Err(error) = runtime() {
        panic!("these tests need ONNX Runtime (run them with `cargo xtask test`): {error}");
    }
}

fn mix(seed: usize) -> Vec<f32> {
    (0..2 * FRAMES)
        .map(|i| ((i * 7 + seed * 13) as f32 * 0.011).sin() * 0.5)
        .collect()
}

/// A session of the waveform model whose runs go through bound buffers, the CPU standing in
/// for the device (the same binding, copies and runs as on a GPU), warmed up. With
/// `tuning`'s graph capture the buffers are placed on the "device" and copied to and from
/// host twins; without, the host buffers are bound directly.
fn bound_slot_with(io: &GraphIo, tuning: GpuTuning) -> SessionSlot {
    require_runtime();
    let bytes = std::fs::read(waveform_model()).unwrap();
    let session = build_session(DeviceId::CPU, &bytes, 1, None).unwrap();
    let mut slot = SessionSlot::new(session, DeviceId::CPU, tuning).binding_on_any_device();
    assert!(slot.binds_io());
    slot.warm_up(io).unwrap();
    slot
}

fn bound_slot(io: &GraphIo) -> SessionSlot {
    bound_slot_with(io, GpuTuning::default())
}

#[test]
fn bound_buffers_compute_what_the_plain_run_computes_run_after_run() {
    let io = waveform_io();
    let on_device = GpuTuning {
        should_capture_graph: true,
        ..GpuTuning::default()
    };
    for (placement, tuning) in [("host", GpuTuning::default()), ("device", on_device)] {
        let mut slot = bound_slot_with(&io, tuning);
        check_bound_runs(&mut slot, &io, placement);
    }
}

/// Three runs through `slot`'s bound buffers give the plain runs' outputs; a wrong input
/// length is refused.
fn check_bound_runs(slot: &mut SessionSlot, io: &GraphIo, placement: &str) {
    for seed in 0..3 {
        // A new input each run: the bound buffers must carry it (a stale one would pass a
        // single run).
        let input = vec![mix(seed)];
        let plain = run_graph_io(&mut slot.session, io, &input).unwrap();
        let mut bound = Vec::new();
        let mut read = Some(|outputs: &[&[f32]]| {
            bound = outputs[0].to_vec();
            Ok(())
        });
        slot.run_bound(io, &input, &mut read)
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(
            read.is_none(),
            "{placement}: read is called once the run worked"
        );
        assert_eq!(bound.len(), 4 * 2 * FRAMES);
        assert_eq!(bound, plain[0], "{placement}: run {seed}");
    }
    // A wrong input length is `read`'s kind of error (the run never starts), not a panic.
    let mut read = Some(|_: &[&[f32]]| Ok(()));
    let short = slot
        .run_bound(io, &[vec![0.0; 5]], &mut read)
        .unwrap()
        .unwrap();
    assert!(short.unwrap_err().contains("an input of 5 values"));
}

#[test]
fn a_session_that_gives_up_its_bound_buffers_runs_the_plain_way() {
    let io = waveform_io();
    let mut slot = bound_slot(&io);
    // What the runner does when a run through the buffers fails (CUDA refused a bound copy on
    // an H200): the session stops binding and stays usable.
    slot.give_up_binding("CopyTensorAsync: dst_data != src_data".into());
    assert!(!slot.binds_io());
    let mut read = Some(|_: &[&[f32]]| Ok(()));
    assert!(
        slot.run_bound(&io, &[mix(0)], &mut read).is_none(),
        "no run through the buffers after giving them up"
    );
    assert!(read.is_some(), "read is left for the plain run");
    let plain = run_graph_io(&mut slot.session, &io, &[mix(0)]).unwrap();
    assert_eq!(plain[0].len(), 4 * 2 * FRAMES);
    slot.warm_up(&io).unwrap();
    assert!(!slot.binds_io(), "a warm-up does not bind them again");
}

#[test]
fn cuda_with_every_tuning_option_fails_cleanly_on_the_cpu_build() {
    require_runtime();
    let bytes = std::fs::read(waveform_model()).unwrap();
    let tuning = GpuTuning {
        should_use_tf32: false,
        conv_search: ConvSearch::Heuristic,
        should_capture_graph: true,
        should_bind_io: true,
    };
    let cuda: DeviceId = "cuda:0".parse().unwrap();
    match build_session_with(cuda, &bytes, 1, None, &tuning) {
        // A CUDA machine: the options were taken.
        Ok(_) => {}
        Err(reason) => assert!(reason.to_lowercase().contains("cuda"), "{reason}"),
    }
    // Through a runner, the CPU takes over and its output is the CPU's.
    let model = Arc::new(read_model_file(&waveform_model()).unwrap());
    let mut runner = ModelRunner::new(model, DeviceChoice::Device(cuda), waveform_io()).unwrap();
    let input = mix(1);
    let mut output = Vec::new();
    runner
        .run_with(
            |values| {
                values.copy_from_slice(&input);
                Ok(())
            },
            |values| {
                output = values.to_vec();
                Ok(())
            },
        )
        .unwrap();
    // drums = 0.5 × left, 0.25 × right (the model's gains).
    assert_eq!(output[0], input[0] * 0.5);
    assert_eq!(output[FRAMES], input[FRAMES] * 0.25);
}

#[test]
fn instances_sharing_a_session_take_turns() {
    require_runtime();
    let model = Arc::new(read_model_file(&waveform_model()).unwrap());
    let runners: Vec<ModelRunner> = (0..4)
        .map(|_| {
            ModelRunner::new(
                model.clone(),
                DeviceChoice::Device(DeviceId::CPU),
                waveform_io(),
            )
            .unwrap()
        })
        .collect();
    assert!(live_session_count() >= 1);
    let shared = runners[0].session().session.clone();
    assert!(runners
        .iter()
        .all(|r| Arc::ptr_eq(&r.session().session, &shared)));
    // Each instance runs back to back; `read` runs under the session's lock, and holding it a
    // while makes every instance queue, as long model runs do.
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = runners
        .into_iter()
        .enumerate()
        .map(|(instance, mut runner)| {
            let order = order.clone();
            std::thread::spawn(move || {
                for _ in 0..20 {
                    runner
                        .run_with(
                            |values| {
                                values.fill(0.1);
                                Ok(())
                            },
                            |_| {
                                order.lock().unwrap().push(instance);
                                std::thread::sleep(Duration::from_millis(3));
                                Ok(())
                            },
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order.len(), 80);
    // In the middle of the run, where all four queue, every 12 consecutive turns (3 rounds,
    // slack for a loaded machine) serve every instance: none is starved by another's runs.
    for window in order[16..64].windows(12) {
        for instance in 0..4 {
            assert!(
                window.contains(&instance),
                "{instance} waited too long: {window:?}"
            );
        }
    }
}
