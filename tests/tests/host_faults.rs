//! Hosts that destroy, misorder or misfeed: each test is a fault the fuzzer (`src/fuzz/`) found,
//! reduced to a fixed sequence, with the vendor patch that fixes it named in its doc.
//! Without the fix, each of these aborts the test process or fails its assertion.

use std::time::{Duration, Instant};

use clap_sys::audio_buffer::clap_audio_buffer;
use clap_sys::process::clap_process_status;
use stemflow_host_tests::fuzz::clap_instance::{
    audio_buffers32, channel_pointers, process_call, ClapInstance, HostCapabilities,
};
use stemflow_host_tests::fuzz::events::{self, EventList};
use stemflow_host_tests::fuzz::state_edit::state_with_separator;
use stemflow_host_tests::signal::nan_ports;
use stemflow_host_tests::state::{decode_state, encode_state};
use stemflow_host_tests::vst3_host::{component_classes, module, Module, Vst3Component};
use stemflow_host_tests::{param_hash, plugin_path, vst3_path, PLUGIN_ID};
use stemflow_kit::testing::{fixtures_dir, scratch_dir};

const RATE_HZ: f64 = 44_100.0;
const BLOCK: usize = 512;
/// The Look-ahead parameter's values (the enum's index).
const LOOK_AHEAD_FULL: f64 = 0.0;
const LOOK_AHEAD_1S: f64 = 3.0;

/// The VST3 bundle under test, loaded.
fn vst3_module() -> &'static Module {
    module(&vst3_path()).expect("the VST3 module loads")
}

/// A component of the bundle's first audio class.
fn first_vst3_component() -> Vst3Component {
    let module = vst3_module();
    let class = component_classes(module)[0];
    Vst3Component::create(module, &class).expect("a component")
}

/// Processes one block of a quiet tone on `instance` (main thread acting as the audio thread:
/// the calls are never concurrent) with `events`; returns the main output's channels.
fn process_block(instance: &ClapInstance, frames: usize, events: &EventList) -> Vec<Vec<f32>> {
    let ports = instance.ports();
    let mut inputs: Vec<Vec<Vec<f32>>> = ports
        .inputs
        .iter()
        .map(|p| {
            (0..p.channel_count)
                .map(|c| {
                    (0..frames)
                        .map(|i| ((i + c as usize) as f32 * 0.05).sin() * 0.25)
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut outputs = nan_ports(ports.outputs.iter().map(|p| p.channel_count), frames);
    let mut input_ptrs = channel_pointers(&mut inputs);
    let mut output_ptrs = channel_pointers(&mut outputs);
    let input_buffers = audio_buffers32(&mut input_ptrs);
    let mut output_buffers = audio_buffers32(&mut output_ptrs);
    // SAFETY: every buffer holds `frames` samples and lives until the call returns.
    let status = unsafe {
        process_status(
            instance,
            frames,
            &input_buffers,
            &mut output_buffers,
            events,
        )
    };
    assert_ne!(
        status,
        clap_sys::process::CLAP_PROCESS_ERROR,
        "process failed"
    );
    outputs.swap_remove(0)
}

/// One `process()` call on `instance` (from the main thread acting as the audio thread) with
/// these buffers and `events`; returns its status.
///
/// # Safety
/// Every channel of `inputs` and `outputs` holds `frames` samples and lives until the call
/// returns.
unsafe fn process_status(
    instance: &ClapInstance,
    frames: usize,
    inputs: &[clap_audio_buffer],
    outputs: &mut [clap_audio_buffer],
    events: &EventList,
) -> clap_process_status {
    let in_events = events.input();
    let out_events = EventList::output_sink(true);
    let process = process_call(
        0,
        frames as u32,
        std::ptr::null(),
        inputs,
        outputs,
        &in_events,
        &out_events,
    );
    // SAFETY: the caller vouches for the buffers; the event lists live for the call.
    unsafe { instance.audio().process(&process) }
}

fn look_ahead_event(value: f64) -> EventList {
    let mut list = EventList::with_capacity(1);
    list.push(events::param_value(0, param_hash("lookahead"), 0, value));
    list
}

/// `0007-background-thread-survives-destroyed-instances`: the background thread nice-plug
/// shares between a plugin's instances exited when it met a task of an instance destroyed
/// since. Every later background task of the other instances was lost (here: a Look-ahead
/// change never applied), and destroying the last instance then panicked inside the host's
/// `destroy` call ("Failed while sending worker thread shutdown request"), which aborts the
/// host. Instance A queues a task behind B's model build and is destroyed at once, ten times.
#[test]
fn destroying_an_instance_with_tasks_queued_leaves_the_others_working() {
    let clap = plugin_path();
    let model = fixtures_dir().join("htdemucs_test.onnx");
    let mut b = ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance B");
    let state = b.save_state(0).expect("B saves its state");
    let state =
        state_with_separator(&state, &format!("file:{}", model.display())).expect("own state");
    assert_eq!(b.load_state(&state, 0), Some(true), "B loads the model");
    assert!(b.activate(RATE_HZ, 1, BLOCK as u32));
    let full_latency = b.latency().expect("latency");
    assert!(b.audio().start_processing());
    for round in 0..6 {
        // B's change starts a model build on the shared background thread…
        let is_short = round % 2 == 0;
        let value = if is_short {
            LOOK_AHEAD_1S
        } else {
            LOOK_AHEAD_FULL
        };
        process_block(&b, BLOCK, &look_ahead_event(value));
        // …and A's task waits behind it while A is destroyed.
        let mut a =
            ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance A");
        assert!(a.activate(RATE_HZ, 1, BLOCK as u32));
        assert!(a.audio().start_processing());
        process_block(&a, BLOCK, &look_ahead_event(LOOK_AHEAD_1S));
        a.audio().stop_processing();
        a.deactivate();
        drop(a);
        // B's own change still reaches it: the background thread still runs B's tasks.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            process_block(&b, BLOCK, &EventList::default());
            b.pump();
            let latency = b.latency().expect("latency");
            if (latency != full_latency) == is_short {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: B's Look-ahead change was never applied (latency {latency}): its \
                 background task was lost"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    b.audio().stop_processing();
    // Without the fix the host aborts here.
    drop(b);
}

/// `0008-clap-events-out-of-order-or-past-the-block`: an event timed past the block (or before
/// the current slice, when a host sends them out of order) made the wrapper split the block
/// past the host's buffers (reading and writing outside them: outputs of 1e25 in release
/// builds) or underflow (a panic inside `process()`, which aborts the host). Now such an event
/// applies at the last frame or at the current slice: the output equals that of the
/// well-formed events it means.
#[test]
fn events_out_of_order_or_past_the_block_apply_where_they_can() {
    let clap = plugin_path();
    let gain = param_hash("vocals_gain");
    let render = |events: &[(u32, f64)]| -> Vec<Vec<f32>> {
        let mut plugin =
            ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance");
        assert!(plugin.set_render_offline(true).unwrap_or(false));
        assert!(plugin.activate(RATE_HZ, 1, BLOCK as u32));
        assert!(plugin.audio().start_processing());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(), Vec::new()];
        for block in 0..40 {
            let mut list = EventList::with_capacity(events.len());
            if block == 3 {
                for &(time, value) in events {
                    list.push(events::param_value(time, gain, 0, value));
                }
            }
            let main = process_block(&plugin, BLOCK, &list);
            for (c, channel) in main.into_iter().enumerate().take(2) {
                out[c].extend(channel);
            }
        }
        plugin.audio().stop_processing();
        plugin.deactivate();
        out
    };
    let hostile = render(&[(300, 0.2), (10, 0.7), (BLOCK as u32 + 5_000, 0.4)]);
    let meant = render(&[(300, 0.2), (300, 0.7), (BLOCK as u32 - 1, 0.4)]);
    for (c, (h, m)) in hostile.iter().zip(&meant).enumerate() {
        assert!(
            h.iter().all(|x| x.is_finite() && x.abs() < 4.0),
            "channel {c}: output out of bounds"
        );
        let first_difference = h
            .iter()
            .zip(m)
            .position(|(a, b)| a.to_bits() != b.to_bits());
        assert_eq!(
            first_difference, None,
            "channel {c}: differs from the well-formed events"
        );
    }
}

/// `0009-state-values-limited-to-parameter-ranges`: a state's parameter values were taken as
/// they were, so a damaged preset or one from a version with other ranges set a stem gain of
/// 3.4e38 (outputs of 1e28) or an enum index past its variants. Now values are limited to each
/// parameter's range.
#[test]
fn state_values_outside_a_parameters_range_are_limited_to_it() {
    let clap = plugin_path();
    let plugin = ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance");
    let mut state = decode_state(&plugin.save_state(0).expect("state")).expect("own state decodes");
    state["params"]["vocals_gain"] = serde_json::json!({ "f32": f32::MAX });
    state["params"]["drums_gain"] = serde_json::json!({ "f32": -7.5 });
    state["params"]["lookahead"] = serde_json::json!({ "i32": 99 });
    assert_eq!(plugin.load_state(&encode_state(&state), 0), Some(true));
    let value = |id: &str| plugin.param_value(param_hash(id)).expect("get_value");
    // CLAP values: continuous parameters are normalized, enums their index.
    assert_eq!(value("vocals_gain"), 1.0, "+12 dB, the top of the range");
    assert_eq!(value("drums_gain"), 0.0, "-inf dB, the bottom of the range");
    assert_eq!(value("lookahead"), 5.0, "the last Look-ahead setting");
    let saved = decode_state(&plugin.save_state(0).expect("state")).expect("decodes");
    let vocals = saved["params"]["vocals_gain"]["f32"]
        .as_f64()
        .expect("an f32");
    assert!(
        (vocals - 10f64.powf(12.0 / 20.0)).abs() < 1e-5,
        "saved back as {vocals}"
    );
}

/// `0010-vst3-state-read-until-complete`: `IComponent::setState` read the stream once and
/// refused the state when the stream returned fewer bytes than asked for, which a stream may
/// (a file, a host that streams project data). Now it reads until the state is complete.
#[test]
fn a_vst3_state_delivered_a_few_bytes_per_read_loads() {
    let module = vst3_module();
    for class in component_classes(module) {
        let component = Vst3Component::create(module, &class).expect("a component");
        let state = component.state().expect("getState");
        for chunk in [0, 1, 7, 64] {
            assert_eq!(
                component.set_state(&state, chunk),
                vst3::Steinberg::kResultOk,
                "a {}-byte state read {chunk} bytes at a time",
                state.len()
            );
        }
        assert_eq!(
            component.state().as_ref(),
            Some(&state),
            "state after reloading"
        );
    }
}

/// `0011-host-driven-paths-never-panic`: calls a host may make in the wrong order or with null
/// pointers panicked inside the plugin's C entry points, which aborts the host: `process()`
/// before `activate()` (CLAP) or `setupProcessing()` (VST3), a null host pointer at creation,
/// and host callbacks that are null function pointers (the latency change reported at
/// activation, parameter rescans after a state load). Now each is refused or skipped, with a
/// message in the log.
#[test]
fn calls_out_of_order_and_null_host_callbacks_get_errors_not_an_abort() {
    let clap = plugin_path();
    assert!(
        stemflow_host_tests::fuzz::clap_instance::create_with_null_host_is_refused(
            &clap, PLUGIN_ID
        )
        .expect("the factory"),
        "a null host was accepted"
    );

    let plugin = ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance");
    // SAFETY: no buffers (0 frames).
    let status = unsafe { process_status(&plugin, 0, &[], &mut [], &EventList::default()) };
    assert_eq!(
        status,
        clap_sys::process::CLAP_PROCESS_ERROR,
        "process before activate"
    );
    drop(plugin);

    let broken_host = HostCapabilities {
        null_callbacks: true,
        ..HostCapabilities::ALL
    };
    let mut plugin = ClapInstance::create(&clap, PLUGIN_ID, broken_host).expect("instance");
    let state = plugin.save_state(0).expect("state");
    assert_eq!(
        plugin.load_state(&state, 0),
        Some(true),
        "state load (rescans the values)"
    );
    assert!(
        plugin.activate(RATE_HZ, 1, BLOCK as u32),
        "activation (reports the latency)"
    );
    assert!(plugin.audio().start_processing());
    let mut gain = EventList::with_capacity(1);
    gain.push(events::param_value(7, param_hash("vocals_gain"), 0, 0.3));
    let no_events = EventList::default();
    for block in 0..20 {
        let events = if block == 3 { &gain } else { &no_events };
        let main = process_block(&plugin, BLOCK, events);
        assert!(
            main.iter().flatten().all(|x| x.is_finite()),
            "block {block}"
        );
    }
    plugin.audio().stop_processing();
    plugin.deactivate();
    drop(plugin);

    let component = first_vst3_component();
    let processor = component
        .component()
        .cast::<vst3::Steinberg::Vst::IAudioProcessor>()
        .expect("an IAudioProcessor");
    // SAFETY: `ProcessData` is plain data; all zeroes is 0 frames and no buffers.
    let mut data: vst3::Steinberg::Vst::ProcessData = unsafe { std::mem::zeroed() };
    // SAFETY: an initialised component, never set up; the data lives for the call.
    let result =
        unsafe { vst3::Steinberg::Vst::IAudioProcessorTrait::process(&processor, &mut data) };
    assert_eq!(
        result,
        vst3::Steinberg::kNotInitialized,
        "VST3 process before setupProcessing"
    );
}

/// `0012-guard-every-host-call`: any panic that reaches a CLAP or VST3 entry point (here one
/// the test build injects in the plugin's `activate()`, standing in for a bug not yet found)
/// aborted the host. Every entry point now catches it, logs it and answers as a failed call:
/// the activation fails, the host lives on, and the instance still works after a state that
/// does not panic.
#[test]
fn a_panic_on_a_host_driven_path_fails_the_call_instead_of_aborting_the_host() {
    let clap = plugin_path();
    let scratch = scratch_dir("host-faults");
    let plan = scratch.join("panic-in-activate.stemflow-fault");
    std::fs::write(&plan, "panic_in_activate=1").unwrap();
    let mut plugin =
        ClapInstance::create(&clap, PLUGIN_ID, HostCapabilities::ALL).expect("instance");
    let state = plugin.save_state(0).expect("state");
    let panicking = state_with_separator(&state, &format!("file:{}", plan.display())).unwrap();
    assert_eq!(plugin.load_state(&panicking, 0), Some(true));
    assert!(
        !plugin.activate(RATE_HZ, 1, BLOCK as u32),
        "the activation that panicked was reported as successful"
    );
    // The host goes on: the user picks another model, and the instance works.
    assert_eq!(plugin.load_state(&state, 0), Some(true));
    assert!(
        plugin.activate(RATE_HZ, 1, BLOCK as u32),
        "activation after the panic"
    );
    assert!(plugin.audio().start_processing());
    for _ in 0..8 {
        let main = process_block(&plugin, BLOCK, &EventList::default());
        assert!(main.iter().flatten().all(|x| x.is_finite()));
    }
    plugin.audio().stop_processing();
    plugin.deactivate();
    drop(plugin);

    let component = first_vst3_component();
    let json = component.state().expect("getState");
    let mut framed = (json.len() as u64).to_le_bytes().to_vec();
    framed.extend_from_slice(&json);
    let panicking = state_with_separator(&framed, &format!("file:{}", plan.display())).unwrap();
    assert_eq!(
        component.set_state(&panicking[8..], 0),
        vst3::Steinberg::kResultOk
    );
    let processor = component
        .component()
        .cast::<vst3::Steinberg::Vst::IAudioProcessor>()
        .expect("an IAudioProcessor");
    let mut setup = vst3::Steinberg::Vst::ProcessSetup {
        processMode: 0,
        symbolicSampleSize: 0,
        maxSamplesPerBlock: BLOCK as i32,
        sampleRate: RATE_HZ,
    };
    // SAFETY: an initialised component; the setup lives for the call.
    unsafe {
        use vst3::Steinberg::Vst::{IAudioProcessorTrait as _, IComponentTrait as _};
        assert_eq!(
            processor.setupProcessing(&mut setup),
            vst3::Steinberg::kResultOk
        );
        assert_ne!(
            component.component().setActive(1),
            vst3::Steinberg::kResultOk,
            "the VST3 activation that panicked was reported as successful"
        );
    }
}

/// `0013-gain-text-round-trip-at-minus-100-db`: a stem gain just above -100 dB was shown as
/// "-100.0 dB", which reads back as silence (nice-plug parses -100 dB as -inf), so a host that
/// stores values as text (or a user typing what they see) changed it; clap-validator's fuzz mode
/// warns about it. Now what is shown reads back to a value shown the same.
#[test]
fn gain_text_reads_back_as_a_value_shown_the_same() {
    let plugin =
        ClapInstance::create(&plugin_path(), PLUGIN_ID, HostCapabilities::ALL).expect("instance");
    let id = param_hash("vocals_gain");
    // Normalized values around the -100 dB threshold, and across the range.
    let values = (0..=2000)
        .map(|i| 0.1166 + f64::from(i) * 0.000_001)
        .chain((0..=100).map(|i| f64::from(i) / 100.0));
    for value in values {
        let text = plugin.value_to_text(id, value, 256).expect("value_to_text");
        let c_text = std::ffi::CString::new(text.clone()).unwrap();
        let read_back = plugin.text_to_value(id, &c_text).expect("text_to_value");
        let again = plugin
            .value_to_text(id, read_back, 256)
            .expect("value_to_text");
        assert_eq!(
            again, text,
            "{value} -> {text:?} -> {read_back} -> {again:?}"
        );
    }
}
