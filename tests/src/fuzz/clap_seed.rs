//! One CLAP fuzz seed: instances created and destroyed on one or several threads, each driven
//! through random host capabilities, port configurations, render modes, sample rates and block
//! sizes, with parameter, transport and foreign events in `process()`, state saved and loaded
//! (also corrupted, also naming another model) from the main thread while the audio thread
//! processes, and the model swapped under it. See the module docs of [`super`] for what is
//! checked.

use std::ffi::CString;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use clap_sys::audio_buffer::clap_audio_buffer;
use clap_sys::events::{
    clap_event_transport, CLAP_TRANSPORT_HAS_BEATS_TIMELINE, CLAP_TRANSPORT_HAS_SECONDS_TIMELINE,
    CLAP_TRANSPORT_HAS_TEMPO, CLAP_TRANSPORT_HAS_TIME_SIGNATURE, CLAP_TRANSPORT_IS_LOOP_ACTIVE,
    CLAP_TRANSPORT_IS_PLAYING, CLAP_TRANSPORT_IS_RECORDING,
};
use clap_sys::fixedpoint::CLAP_BEATTIME_FACTOR;
use clap_sys::process::CLAP_PROCESS_ERROR;

use super::clap_instance::{
    audio_buffer, channel_pointers, mark_audio_thread, process_call, ClapAudio, ClapInstance,
    HostCapabilities, ParamInfo, Ports,
};
use super::events::{self, EventList};
use super::lives::run_lives;
use super::rng::Rng;
use super::signal::InputSignal;
use super::state_edit::{corrupt_state, state_with_separator};
use super::target::{first_bad_sample, SeedReport, Target};

/// Sample rates a host commonly uses; one in ten activations takes any rate in 1–200 kHz.
const SAMPLE_RATES_HZ: [f64; 9] = [
    8_000.0, 11_025.0, 22_050.0, 44_100.0, 48_000.0, 88_200.0, 96_000.0, 192_000.0, 384_000.0,
];
/// Block-size maxima a host commonly uses; one in ten activations takes any in 1–9,999.
const MAX_BLOCKS: [u32; 8] = [64, 128, 256, 512, 1024, 2048, 4096, 16384];

/// Runs CLAP seed `seed` against `target`.
pub fn run(target: &Target, seed: u64) -> Result<SeedReport, String> {
    let mut rng = Rng::new(seed);
    let ids = super::clap_instance::plugin_ids(&target.clap)?;
    if ids.is_empty() {
        return Err("the CLAP library lists no plugins".into());
    }
    run_lives(&mut rng, |life_rng, report| {
        instance_life(target, &ids, life_rng, report)
    })
}

/// A random sample rate (see [`SAMPLE_RATES_HZ`]).
fn sample_rate(rng: &mut Rng) -> f64 {
    if rng.chance(0.1) {
        rng.range_f64(1_000.0, 200_000.0).round()
    } else {
        *rng.pick(&SAMPLE_RATES_HZ)
    }
}

/// A random `(min, max)` block size range, as hosts announce them.
fn block_range(rng: &mut Rng) -> (u32, u32) {
    let max = if rng.chance(0.1) {
        rng.range_u64(1, 9_999) as u32
    } else {
        *rng.pick(&MAX_BLOCKS)
    };
    let min = if rng.chance(0.25) {
        max
    } else if rng.chance(0.25) {
        1
    } else {
        rng.range_u64(1, u64::from(max)) as u32
    };
    (min, max)
}

/// One instance from creation to destruction.
fn instance_life(
    target: &Target,
    ids: &[String],
    mut rng: Rng,
    report: &Mutex<SeedReport>,
) -> Result<(), String> {
    let plugin_id = rng.pick(ids).clone();
    let capabilities = HostCapabilities {
        latency: rng.chance(0.9),
        tail: rng.chance(0.9),
        state: rng.chance(0.9),
        params: rng.chance(0.9),
        audio_ports: rng.chance(0.9),
        audio_ports_config: rng.chance(0.9),
        thread_check: rng.chance(0.9),
        null_callbacks: rng.chance(0.02),
    };
    let mut instance = ClapInstance::create(&target.clap, &plugin_id, capabilities)?;
    report.lock().unwrap_or_else(|e| e.into_inner()).instances += 1;
    let context = |what: &str| format!("{plugin_id} ({capabilities:?}): {what}");
    // Some instances are destroyed right away (a host scanning, a project closed at once).
    if rng.chance(0.1) {
        return Ok(());
    }
    let params = instance.params();
    if !params.is_empty() && rng.chance(0.5) {
        let mut flush = EventList::with_capacity(params.len());
        for param in &params {
            if rng.chance(0.5) {
                flush.push(events::param_value(
                    0,
                    param.id,
                    param.cookie,
                    param_value(&mut rng, param, 0.0),
                ));
            }
        }
        instance.flush(&flush);
        instance.pump();
    }
    if rng.chance(0.3) {
        swap_separator(&instance, target, &mut rng).map_err(|e| context(&e))?;
    }
    let num_configs = rng.range_usize(1, 3);
    for config_index in 0..num_configs {
        if rng.chance(0.25) {
            let configs = instance.port_configs();
            if !configs.is_empty() {
                let id = *rng.pick(&configs);
                if !instance.select_port_config(id) {
                    return Err(context(&format!(
                        "audio-ports-config {id} (listed) was refused"
                    )));
                }
                instance.pump();
            }
        }
        if rng.chance(0.3) {
            instance.set_render_offline(rng.chance(0.5));
            instance.pump();
        }
        let rate_hz = sample_rate(&mut rng);
        let (min_frames, max_frames) = block_range(&mut rng);
        let what =
            format!("config {config_index}: {rate_hz} Hz, blocks {min_frames}..={max_frames}");
        if !instance.activate(rate_hz, min_frames, max_frames) {
            return Err(context(&format!("{what}: activate refused")));
        }
        instance.pump();
        if instance.latency().is_none() {
            return Err(context(&format!(
                "{what}: no latency extension while active"
            )));
        }
        let ports = instance.ports();
        let run = ProcessRun {
            rate_hz,
            min_frames,
            max_frames,
            total_frames: rng.range_u64(4_000, 40_000) as usize,
            params: &params,
            ports: &ports,
        };
        let audio_rng = rng.fork();
        let main_rng = rng.fork();
        let stats = run_concurrently(&instance, target, &run, audio_rng, main_rng)
            .map_err(|e| context(&format!("{what}: {e}")))?;
        {
            let mut report = report.lock().unwrap_or_else(|e| e.into_inner());
            report.process_calls += stats.process_calls;
            report.frames += stats.frames;
            report.state_loads += stats.state_loads;
            report.activations += 1;
        }
        let record = instance.record();
        let wrong = record.wrong_thread_calls.load(Ordering::SeqCst);
        if wrong > 0 {
            let first = record.first_wrong_thread_call.lock().ok().and_then(|f| *f);
            return Err(context(&format!(
                "{what}: the plugin made {wrong} main-thread-only host calls off the main thread (first: {})",
                first.unwrap_or("?")
            )));
        }
        // A restart the plugin asked for is honoured before the next configuration.
        let restart = record.restart_requested.swap(false, Ordering::SeqCst);
        if restart || rng.chance(0.6) || config_index + 1 == num_configs {
            instance.deactivate();
            instance.pump();
        } else {
            // The next configuration activates again; CLAP needs a deactivation first.
            instance.deactivate();
        }
    }
    if rng.chance(0.5) {
        // Destroyed while the background thread may still hold its tasks.
        instance.pump();
    }
    Ok(())
}

/// Loads a state that names another separator (a model, a route, a fault plan, a missing or
/// broken file), as a host restoring a project or a preset does.
fn swap_separator(instance: &ClapInstance, target: &Target, rng: &mut Rng) -> Result<(), String> {
    let Some(state) = instance.save_state(0) else {
        return Err("state save failed".into());
    };
    let separator = rng.pick(&target.separators).clone();
    let Some(swapped) = state_with_separator(&state, &separator) else {
        return Err("the plugin's own state does not decode".into());
    };
    match instance.load_state(&swapped, 0) {
        Some(true) => {
            instance.pump();
            Ok(())
        }
        other => Err(format!(
            "loading a state naming separator {separator:?} returned {other:?}"
        )),
    }
}

/// A value for `param`: in range, with an edge value or one out of range now and then.
fn param_value(rng: &mut Rng, param: &ParamInfo, hostile_chance: f64) -> f64 {
    if rng.chance(hostile_chance) {
        return *rng.pick(&[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e300, 1e300]);
    }
    let value = match rng.range_usize(0, 9) {
        0 => param.min_value,
        1 => param.max_value,
        _ => rng.range_f64(param.min_value, param.max_value),
    };
    if param.is_stepped {
        value.round()
    } else {
        value
    }
}

/// What one activation processes.
struct ProcessRun<'a> {
    rate_hz: f64,
    min_frames: u32,
    max_frames: u32,
    total_frames: usize,
    params: &'a [ParamInfo],
    ports: &'a Ports,
}

/// What the audio thread did.
#[derive(Default)]
struct ProcessStats {
    process_calls: u64,
    frames: u64,
    state_loads: u64,
}

/// Processes `run` on an audio thread while the main thread saves and loads state, converts
/// parameter text, switches the render mode and answers callbacks.
fn run_concurrently(
    instance: &ClapInstance,
    target: &Target,
    run: &ProcessRun,
    audio_rng: Rng,
    mut main_rng: Rng,
) -> Result<ProcessStats, String> {
    let is_done = AtomicBool::new(false);
    let audio = instance.audio();
    std::thread::scope(|scope| {
        let done = &is_done;
        let audio_thread = std::thread::Builder::new()
            .name("fuzz-audio".into())
            .spawn_scoped(scope, move || {
                let result = process_blocks(audio, run, audio_rng);
                done.store(true, Ordering::SeqCst);
                result
            })
            .map_err(|e| format!("cannot start the audio thread: {e}"))?;
        let mut stats_loads = 0u64;
        let mut last_state: Option<Vec<u8>> = None;
        let num_moves = main_rng.range_usize(0, 12);
        let mut main_result = Ok(());
        for _ in 0..num_moves {
            if is_done.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_micros(main_rng.range_u64(0, 3_000)));
            instance.pump();
            match main_move(instance, target, run, &mut main_rng, &mut last_state) {
                Ok(loads) => stats_loads += loads,
                Err(error) => {
                    main_result = Err(error);
                    break;
                }
            }
        }
        while !is_done.load(Ordering::SeqCst) {
            instance.pump();
            std::thread::sleep(Duration::from_millis(1));
        }
        instance.pump();
        let audio_result = audio_thread
            .join()
            .map_err(|_| "the fuzzer's audio thread panicked".to_string())?;
        main_result?;
        let mut stats = audio_result?;
        stats.state_loads += stats_loads;
        Ok(stats)
    })
}

/// The main-thread moves made while the audio thread processes, by name; a name twice is twice as
/// likely. `STEMFLOW_FUZZ_MOVES=save,load-corrupt` (or `none`) restricts a replay to some of
/// them, to find which one a failure needs.
const MAIN_MOVES: [&str; 10] = [
    "save",
    "save",
    "reload",
    "load-corrupt",
    "swap-model",
    "param-text",
    "param-text",
    "render-mode",
    "query",
    "query",
];

/// Whether `STEMFLOW_FUZZ_MOVES` (unset: all) allows move `kind`.
fn is_move_enabled(kind: &str) -> bool {
    std::env::var("STEMFLOW_FUZZ_MOVES")
        .map_or(true, |list| list.split(',').any(|k| k.trim() == kind))
}

/// One main-thread move while the audio thread processes. Returns the number of states loaded.
fn main_move(
    instance: &ClapInstance,
    target: &Target,
    run: &ProcessRun,
    rng: &mut Rng,
    last_state: &mut Option<Vec<u8>>,
) -> Result<u64, String> {
    let chunk = if rng.chance(0.5) {
        rng.range_usize(1, 64)
    } else {
        0
    };
    let kind = *rng.pick(&MAIN_MOVES);
    if !is_move_enabled(kind) {
        return Ok(0);
    }
    match kind {
        "save" => {
            let state = instance
                .save_state(chunk)
                .ok_or("state save failed while processing")?;
            *last_state = Some(state);
            Ok(0)
        }
        "reload" => {
            let Some(state) = last_state.clone() else {
                return Ok(0);
            };
            match instance.load_state(&state, chunk) {
                Some(true) => Ok(1),
                other => Err(format!(
                    "reloading the plugin's own state returned {other:?}"
                )),
            }
        }
        "load-corrupt" => {
            let Some(state) = last_state.clone() else {
                return Ok(0);
            };
            // Any answer is fine: the plugin must only survive it.
            let corrupted = corrupt_state(&state, rng);
            instance.load_state(&corrupted, chunk);
            Ok(1)
        }
        "swap-model" => {
            swap_separator(instance, target, rng)?;
            Ok(1)
        }
        "param-text" => {
            if run.params.is_empty() {
                return Ok(0);
            }
            let param = rng.pick(run.params).clone();
            let value = param_value(rng, &param, 0.05);
            let capacity = if rng.chance(0.1) {
                rng.range_usize(0, 4)
            } else {
                256
            };
            if let Some(text) = instance.value_to_text(param.id, value, capacity) {
                if let Ok(text) = CString::new(text) {
                    instance.text_to_value(param.id, &text);
                }
            }
            let garbage = CString::new(
                [
                    "",
                    "-inf",
                    "NaN",
                    "1e999",
                    "+12 dB dB",
                    "Own Outputs",
                    "\u{fffd}",
                ][rng.range_usize(0, 6)],
            )
            .unwrap_or_default();
            instance.text_to_value(param.id, &garbage);
            instance.param_value(param.id);
            Ok(0)
        }
        "render-mode" => {
            instance.set_render_offline(rng.chance(0.5));
            Ok(0)
        }
        _ => {
            instance.latency();
            instance.tail();
            instance.ports();
            instance.port_configs();
            Ok(0)
        }
    }
}

/// Buffers for one activation: every port's channels, as 32-bit and 64-bit storage.
struct PortBuffers {
    /// `[port][channel][frame]`.
    inputs: Vec<Vec<Vec<f32>>>,
    outputs: Vec<Vec<Vec<f32>>>,
    inputs64: Vec<Vec<Vec<f64>>>,
    outputs64: Vec<Vec<Vec<f64>>>,
}

impl PortBuffers {
    fn new(ports: &Ports, max_frames: usize) -> Self {
        let make = |list: &[super::clap_instance::PortInfo]| -> Vec<Vec<Vec<f32>>> {
            list.iter()
                .map(|p| vec![vec![0.0; max_frames]; p.channel_count as usize])
                .collect()
        };
        let make64 = |list: &[super::clap_instance::PortInfo]| -> Vec<Vec<Vec<f64>>> {
            list.iter()
                .map(|p| vec![vec![0.0; max_frames]; p.channel_count as usize])
                .collect()
        };
        Self {
            inputs: make(&ports.inputs),
            outputs: make(&ports.outputs),
            inputs64: make64(&ports.inputs),
            outputs64: make64(&ports.outputs),
        }
    }
}

/// How the host hands its buffers over in one block.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BufferMode {
    /// Separate inputs and outputs.
    OutOfPlace,
    /// The main output is the main input (in-place).
    InPlace,
    /// One auxiliary output comes as a null buffer (a bus the host left out).
    MissingAux,
    /// Only 64-bit buffers, which the plugin did not declare support for: it must survive,
    /// whatever it outputs.
    Only64Bit,
}

/// The audio thread's part: start, process `run.total_frames` in random blocks, stop.
fn process_blocks(
    audio: ClapAudio,
    run: &ProcessRun,
    mut rng: Rng,
) -> Result<ProcessStats, String> {
    mark_audio_thread();
    let mut stats = ProcessStats::default();
    if !audio.start_processing() {
        return Err("start_processing refused".into());
    }
    let max = run.max_frames as usize;
    let mut buffers = PortBuffers::new(run.ports, max);
    let mut signals: Vec<Vec<InputSignal>> = run
        .ports
        .inputs
        .iter()
        .map(|p| {
            (0..p.channel_count)
                .map(|_| InputSignal::random(&mut rng, run.rate_hz))
                .collect()
        })
        .collect();
    let mut input_events = EventList::with_capacity(64);
    let mut is_quiet = false;
    let mut steady_time = 0i64;
    let mut transport = random_transport(&mut rng);
    let has_in_place_pair = run
        .ports
        .inputs
        .first()
        .zip(run.ports.outputs.first())
        .is_some_and(|(i, o)| {
            i.has_in_place_pair && o.has_in_place_pair && i.channel_count == o.channel_count
        });
    let mut frames_left = run.total_frames;
    let mut block_index = 0usize;
    while frames_left > 0 {
        let frames = if rng.chance(0.5) {
            rng.range_u64(u64::from(run.min_frames), u64::from(run.max_frames)) as usize
        } else if rng.chance(0.5) {
            max
        } else {
            run.min_frames as usize
        };
        if rng.chance(0.02) {
            audio.reset();
        }
        if rng.chance(0.02) {
            audio.stop_processing();
            if !audio.start_processing() {
                return Err(format!(
                    "block {block_index}: start_processing refused after a stop"
                ));
            }
        }
        if rng.chance(0.01) {
            is_quiet = !is_quiet;
        }
        // Inputs.
        for (port, channels) in buffers.inputs.iter_mut().enumerate() {
            for (channel, samples) in channels.iter_mut().enumerate() {
                let signal = &mut signals[port][channel];
                if rng.chance(0.05) {
                    *signal = InputSignal::random(&mut rng, run.rate_hz);
                }
                if is_quiet {
                    samples[..frames].fill(0.0);
                } else {
                    signal.fill(&mut samples[..frames]);
                }
                for (x, y) in samples[..frames]
                    .iter()
                    .zip(&mut buffers.inputs64[port][channel][..frames])
                {
                    *y = f64::from(*x);
                }
            }
        }
        // Outputs start as NaN, so a sample the plugin leaves unwritten shows up.
        for channel in buffers.outputs.iter_mut().flatten() {
            channel[..frames].fill(f32::NAN);
        }
        let mode = match rng.range_usize(0, 99) {
            0 => BufferMode::Only64Bit,
            1..=3 => BufferMode::MissingAux,
            4..=49 if has_in_place_pair => BufferMode::InPlace,
            _ => BufferMode::OutOfPlace,
        };
        // Events.
        input_events.clear();
        let mut is_hostile = mode == BufferMode::Only64Bit;
        if !is_quiet {
            let num_events = rng.range_usize(0, 6);
            for _ in 0..num_events {
                let time = rng.range_u64(0, frames as u64 - 1) as u32;
                let roll = rng.range_usize(0, 99);
                if roll < 70 && !run.params.is_empty() {
                    let param = rng.pick(run.params);
                    let value = param_value(&mut rng, param, 0.01);
                    let cookie = if rng.chance(0.1) { 0 } else { param.cookie };
                    input_events.push(events::param_value(time, param.id, cookie, value));
                } else if roll < 75 {
                    // A parameter id the plugin does not have.
                    input_events.push(events::param_value(
                        time,
                        rng.next_u64() as u32,
                        0,
                        rng.unit(),
                    ));
                } else if roll < 80 && !run.params.is_empty() {
                    let param = rng.pick(run.params);
                    input_events.push(events::param_mod(time, param.id, rng.range_f64(-1.0, 1.0)));
                } else if roll < 85 && !run.params.is_empty() {
                    let param = rng.pick(run.params);
                    input_events.push(events::gesture(time, param.id, rng.chance(0.5)));
                } else if roll < 93 {
                    transport = random_transport(&mut rng);
                    input_events.push(events::transport(time, transport));
                } else if roll < 97 {
                    input_events.push(events::note_on(time, rng.range_u64(0, 127) as i16));
                } else {
                    input_events.push(events::midi(time, [0x90, rng.range_u64(0, 127) as u8, 100]));
                }
            }
            if rng.chance(0.01) {
                // Out of order, or past the block's end: a host bug the plugin must survive.
                is_hostile = true;
                input_events.push(events::param_value(
                    frames as u32 + rng.range_u64(0, 1000) as u32,
                    run.params.first().map_or(0, |p| p.id),
                    0,
                    0.5,
                ));
            } else {
                input_events.sort();
            }
        }
        if rng.chance(0.1) {
            transport = random_transport(&mut rng);
        }
        let transport_ptr = if rng.chance(0.1) {
            std::ptr::null()
        } else {
            &transport as *const clap_event_transport
        };
        let output_events = EventList::output_sink(rng.chance(0.95));
        let in_events = input_events.input();

        // Channel pointer tables; built per block (the mode changes).
        let mut input_ptrs = channel_pointers(&mut buffers.inputs);
        let mut output_ptrs = channel_pointers(&mut buffers.outputs);
        let mut input_ptrs64 = channel_pointers(&mut buffers.inputs64);
        let mut output_ptrs64 = channel_pointers(&mut buffers.outputs64);
        if mode == BufferMode::InPlace {
            output_ptrs[0] = input_ptrs[0].clone();
        }
        let missing_aux = (mode == BufferMode::MissingAux && output_ptrs.len() > 1)
            .then(|| rng.range_usize(1, output_ptrs.len() - 1));
        let constant_mask = if is_quiet { u64::MAX } else { 0 };
        let is_64_bit = mode == BufferMode::Only64Bit;
        let inputs: Vec<clap_audio_buffer> = (0..input_ptrs.len())
            .map(|port| {
                port_buffer(
                    &mut input_ptrs[port],
                    &mut input_ptrs64[port],
                    is_64_bit,
                    constant_mask,
                )
            })
            .collect();
        let mut outputs: Vec<clap_audio_buffer> = (0..output_ptrs.len())
            .map(|port| {
                if Some(port) == missing_aux {
                    audio_buffer(std::ptr::null_mut(), std::ptr::null_mut(), 0, 0)
                } else {
                    port_buffer(
                        &mut output_ptrs[port],
                        &mut output_ptrs64[port],
                        is_64_bit,
                        0,
                    )
                }
            })
            .collect();
        let process = process_call(
            steady_time,
            frames as u32,
            transport_ptr,
            &inputs,
            &mut outputs,
            &in_events,
            &output_events,
        );
        // SAFETY: every pointer addresses storage of `max ≥ frames` samples owned by this
        // function, alive until the call returns; the event lists live as long.
        let status = unsafe { audio.process(&process) };
        stats.process_calls += 1;
        stats.frames += frames as u64;
        steady_time += frames as i64;
        if status == CLAP_PROCESS_ERROR && !is_hostile {
            return Err(format!(
                "block {block_index} ({frames} frames, {mode:?}, {} events): process returned an error",
                input_events.len()
            ));
        }
        if mode != BufferMode::Only64Bit {
            for (port, channels) in buffers.outputs.iter().enumerate() {
                if Some(port) == missing_aux || (mode == BufferMode::InPlace && port == 0) {
                    continue;
                }
                for (channel, samples) in channels.iter().enumerate() {
                    if let Some((frame, x)) = first_bad_sample(&samples[..frames]) {
                        return Err(format!(
                            "block {block_index} ({frames} frames, {mode:?}): output port {port} channel {channel} frame {frame} is {x}; events {:?}; inputs {:?}",
                            input_events.events(),
                            signals
                        ));
                    }
                }
            }
            if mode == BufferMode::InPlace {
                for (channel, samples) in buffers.inputs[0].iter().enumerate() {
                    if let Some((frame, x)) = first_bad_sample(&samples[..frames]) {
                        return Err(format!(
                            "block {block_index} ({frames} frames, in place): main output channel {channel} frame {frame} is {x}"
                        ));
                    }
                }
            }
        }
        frames_left = frames_left.saturating_sub(frames);
        block_index += 1;
    }
    audio.stop_processing();
    Ok(stats)
}

/// A port's buffer over its 64-bit channels when `is_64_bit`, else over its 32-bit ones with
/// `constant_mask` (64-bit buffers are never marked constant).
fn port_buffer(
    pointers32: &mut [*mut f32],
    pointers64: &mut [*mut f64],
    is_64_bit: bool,
    constant_mask: u64,
) -> clap_audio_buffer {
    let channels = pointers32.len() as u32;
    if is_64_bit {
        audio_buffer(std::ptr::null_mut(), pointers64.as_mut_ptr(), channels, 0)
    } else {
        audio_buffer(
            pointers32.as_mut_ptr(),
            std::ptr::null_mut(),
            channels,
            constant_mask,
        )
    }
}

/// A transport with random flags and values, some of them odd (tempo 0, negative positions).
fn random_transport(rng: &mut Rng) -> clap_event_transport {
    let flag = |rng: &mut Rng, f: u32| if rng.chance(0.7) { f } else { 0 };
    let flags = flag(rng, CLAP_TRANSPORT_HAS_TEMPO)
        | flag(rng, CLAP_TRANSPORT_HAS_BEATS_TIMELINE)
        | flag(rng, CLAP_TRANSPORT_HAS_SECONDS_TIMELINE)
        | flag(rng, CLAP_TRANSPORT_HAS_TIME_SIGNATURE)
        | flag(rng, CLAP_TRANSPORT_IS_PLAYING)
        | if rng.chance(0.1) {
            CLAP_TRANSPORT_IS_RECORDING
        } else {
            0
        }
        | if rng.chance(0.2) {
            CLAP_TRANSPORT_IS_LOOP_ACTIVE
        } else {
            0
        };
    let beats = |rng: &mut Rng| (rng.range_f64(-4.0, 1000.0) * CLAP_BEATTIME_FACTOR as f64) as i64;
    // SAFETY: `clap_event_transport` is plain data; all zeroes is a valid value.
    let mut transport: clap_event_transport = unsafe { std::mem::zeroed() };
    transport.flags = flags;
    transport.song_pos_beats = beats(rng);
    transport.song_pos_seconds = beats(rng);
    transport.tempo = *rng.pick(&[0.0, 1.0, 60.0, 120.0, 174.5, 999.0]);
    transport.tempo_inc = rng.range_f64(-1.0, 1.0);
    transport.loop_start_beats = beats(rng);
    transport.loop_end_beats = beats(rng);
    transport.loop_start_seconds = beats(rng);
    transport.loop_end_seconds = beats(rng);
    transport.bar_start = beats(rng);
    transport.bar_number = rng.range_u64(0, 500) as i32 - 2;
    transport.tsig_num = *rng.pick(&[0u16, 3, 4, 7]);
    transport.tsig_denom = *rng.pick(&[0u16, 4, 8]);
    transport
}
