//! One VST3 fuzz seed, as far as a host without a GUI goes: components created and released on
//! one or several threads, initialised, given states (their own, corrupted, naming another
//! model) and read back, set up at random rates, block sizes and process modes with random bus
//! arrangements and bus activations, activated, processed with parameter changes and per-call
//! mode switches while the main thread loads state, deactivated, terminated and released.

use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use vst3::Steinberg::Vst::{
    AudioBusBuffers, AudioBusBuffers__type0, BusDirections_, BusInfo, IAudioProcessor,
    IAudioProcessorTrait, IComponent, IComponentTrait, IEditController, IEditControllerTrait,
    IParamValueQueue, IParamValueQueueTrait, IParameterChanges, IParameterChangesTrait,
    MediaTypes_, ParameterInfo, ProcessData, ProcessModes_, ProcessSetup, SpeakerArr,
    SymbolicSampleSizes_,
};
use vst3::Steinberg::{kInvalidArgument, kResultFalse, kResultOk, tresult};
use vst3::{Class, ComPtr, ComWrapper};

use super::clap_instance::channel_pointers;
use super::lives::run_lives;
use super::rng::Rng;
use super::signal::InputSignal;
use super::state_edit::corrupt_state;
use super::target::{first_bad_sample, SeedReport, Target};
use crate::vst3_host::{component_classes, module, stream, stream_bytes, Module, Vst3Component};

/// One parameter's changes in one block.
struct ParamQueue {
    id: u32,
    points: Vec<(i32, f64)>,
}

impl Class for ParamQueue {
    type Interfaces = (IParamValueQueue,);
}

impl IParamValueQueueTrait for ParamQueue {
    unsafe fn getParameterId(&self) -> u32 {
        self.id
    }

    unsafe fn getPointCount(&self) -> i32 {
        self.points.len() as i32
    }

    unsafe fn getPoint(&self, index: i32, sample_offset: *mut i32, value: *mut f64) -> tresult {
        let Some(&(offset, point)) = usize::try_from(index).ok().and_then(|i| self.points.get(i))
        else {
            return kInvalidArgument;
        };
        if sample_offset.is_null() || value.is_null() {
            return kInvalidArgument;
        }
        // SAFETY: valid pointers from the plugin.
        unsafe {
            *sample_offset = offset;
            *value = point;
        }
        kResultOk
    }

    unsafe fn addPoint(&self, _: i32, _: f64, _: *mut i32) -> tresult {
        kResultFalse
    }
}

/// The parameter changes of one block.
struct ParamChanges {
    queues: Vec<ComPtr<IParamValueQueue>>,
}

impl Class for ParamChanges {
    type Interfaces = (IParameterChanges,);
}

impl IParameterChangesTrait for ParamChanges {
    unsafe fn getParameterCount(&self) -> i32 {
        self.queues.len() as i32
    }

    unsafe fn getParameterData(&self, index: i32) -> *mut IParamValueQueue {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.queues.get(i))
            .map_or(null_mut(), |q| q.as_ptr())
    }

    unsafe fn addParameterData(&self, _: *const u32, _: *mut i32) -> *mut IParamValueQueue {
        null_mut()
    }
}

/// Runs VST3 seed `seed` against `target`.
pub fn run(target: &Target, seed: u64) -> Result<SeedReport, String> {
    let bundle = target
        .vst3
        .as_ref()
        .ok_or("no VST3 bundle to fuzz (STEMFLOW_TEST_VST3)")?;
    let module = module(bundle)?;
    let classes = component_classes(module);
    if classes.is_empty() {
        return Err("the VST3 factory lists no audio components".into());
    }
    let mut rng = Rng::new(seed);
    run_lives(&mut rng, |life_rng, report| {
        component_life(module, &classes, target, life_rng, report)
            .map_err(|error| format!("VST3: {error}"))
    })
}

/// One component from creation to release.
fn component_life(
    module: &Module,
    classes: &[[i8; 16]],
    target: &Target,
    mut rng: Rng,
    report: &Mutex<SeedReport>,
) -> Result<(), String> {
    let class = *rng.pick(classes);
    let instance = Vst3Component::create(module, &class)?;
    let component = instance.component();
    report.lock().unwrap_or_else(|e| e.into_inner()).instances += 1;
    // SAFETY: every call below follows the VST3 call order on an object we own; pointers passed
    // point at live locals.
    unsafe {
        let processor = component
            .cast::<IAudioProcessor>()
            .ok_or("no IAudioProcessor")?;
        let controller = component.cast::<IEditController>();
        if rng.chance(0.1) {
            return Ok(());
        }
        if rng.chance(0.4) {
            swap_separator(component, target, &mut rng)?;
        }
        let params = controller.as_ref().map_or_else(Vec::new, |c| {
            (0..c.getParameterCount())
                .filter_map(|i| {
                    let mut info: ParameterInfo = std::mem::zeroed();
                    (c.getParameterInfo(i, &mut info) == kResultOk)
                        .then_some((info.id, info.stepCount))
                })
                .collect::<Vec<_>>()
        });
        if let Some(c) = &controller {
            for _ in 0..rng.range_usize(0, 4) {
                if params.is_empty() {
                    break;
                }
                let (id, _) = *rng.pick(&params);
                let mut text = [0u16; 128];
                c.getParamStringByValue(id, rng.unit(), &mut text);
                let mut value = 0.0;
                c.getParamValueByString(id, text.as_mut_ptr(), &mut value);
                c.setParamNormalized(id, rng.unit());
                c.getParamNormalized(id);
            }
        }
        for config_index in 0..rng.range_usize(1, 3) {
            let rate_hz = *rng.pick(&[22_050.0, 44_100.0, 48_000.0, 96_000.0, 192_000.0, 11_025.0]);
            let max_block = *rng.pick(&[1, 32, 64, 256, 512, 1024, 4096, 8192]);
            let mode = *rng.pick(&[
                ProcessModes_::kRealtime,
                ProcessModes_::kOffline,
                ProcessModes_::kPrefetch,
            ]) as i32;
            if rng.chance(0.3) {
                let mut inputs = [*rng.pick(&[SpeakerArr::kStereo, SpeakerArr::kMono])];
                let num_outputs = rng.range_usize(1, 7);
                let mut outputs: Vec<u64> = (0..num_outputs).map(|_| inputs[0]).collect();
                // Any answer is fine; the plugin keeps a layout it supports.
                processor.setBusArrangements(
                    inputs.as_mut_ptr(),
                    1,
                    outputs.as_mut_ptr(),
                    outputs.len() as i32,
                );
            }
            let mut setup = ProcessSetup {
                processMode: mode,
                symbolicSampleSize: SymbolicSampleSizes_::kSample32 as i32,
                maxSamplesPerBlock: max_block,
                sampleRate: rate_hz,
            };
            if processor.setupProcessing(&mut setup) != kResultOk {
                return Err(format!(
                    "config {config_index}: setupProcessing({rate_hz} Hz, {max_block}) failed"
                ));
            }
            let num_outputs =
                component.getBusCount(MediaTypes_::kAudio as i32, BusDirections_::kOutput as i32);
            for bus in 1..num_outputs {
                if rng.chance(0.2) {
                    component.activateBus(
                        MediaTypes_::kAudio as i32,
                        BusDirections_::kOutput as i32,
                        bus,
                        rng.chance(0.5) as u8,
                    );
                }
            }
            if component.setActive(1) != kResultOk {
                return Err(format!(
                    "config {config_index}: setActive(true) failed ({rate_hz} Hz, {max_block})"
                ));
            }
            processor.getLatencySamples();
            processor.getTailSamples();
            let buses = |direction: i32| -> Vec<i32> {
                (0..component.getBusCount(MediaTypes_::kAudio as i32, direction))
                    .map(|i| {
                        let mut info: BusInfo = std::mem::zeroed();
                        if component.getBusInfo(MediaTypes_::kAudio as i32, direction, i, &mut info)
                            == kResultOk
                        {
                            info.channelCount
                        } else {
                            0
                        }
                    })
                    .collect()
            };
            let run = Vst3Run {
                rate_hz,
                max_block: max_block as usize,
                mode,
                total_frames: rng.range_usize(2_000, 30_000),
                inputs: buses(BusDirections_::kInput as i32),
                outputs: buses(BusDirections_::kOutput as i32),
                params: &params,
            };
            let is_done = AtomicBool::new(false);
            let processor_ptr = SendPtr(processor.as_ptr());
            let mut audio_rng = rng.fork();
            let mut main_rng = rng.fork();
            let audio_result = std::thread::scope(|scope| {
                let audio = scope.spawn(|| {
                    let result = process_blocks(processor_ptr, &run, &mut audio_rng);
                    is_done.store(true, Ordering::SeqCst);
                    result
                });
                let mut last_state = None;
                let mut main_result = Ok(());
                for _ in 0..main_rng.range_usize(0, 6) {
                    if is_done.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(main_rng.range_u64(0, 3_000)));
                    main_result = state_move(
                        component,
                        controller.as_ref(),
                        target,
                        &mut main_rng,
                        &mut last_state,
                    );
                    if main_result.is_err() {
                        break;
                    }
                }
                let audio_result = audio
                    .join()
                    .unwrap_or_else(|_| Err("the fuzzer's VST3 audio thread panicked".into()));
                main_result.and(audio_result)
            });
            let stats = audio_result.map_err(|e| {
                format!("config {config_index} ({rate_hz} Hz, {max_block}, mode {mode}): {e}")
            })?;
            {
                let mut report = report.lock().unwrap_or_else(|e| e.into_inner());
                report.process_calls += stats.0;
                report.frames += stats.1;
                report.activations += 1;
            }
            if component.setActive(0) != kResultOk {
                return Err(format!("config {config_index}: setActive(false) failed"));
            }
        }
    }
    Ok(())
}

/// A raw interface pointer handed to the audio thread.
#[derive(Clone, Copy)]
struct SendPtr(*mut IAudioProcessor);
// SAFETY: VST3 calls `process` from one audio thread at a time; the component outlives the
// scoped audio thread that uses this.
unsafe impl Send for SendPtr {}
// SAFETY: as above (shared only by reference into the scoped thread).
unsafe impl Sync for SendPtr {}

/// What an activation processes.
struct Vst3Run<'a> {
    rate_hz: f64,
    max_block: usize,
    mode: i32,
    total_frames: usize,
    inputs: Vec<i32>,
    outputs: Vec<i32>,
    params: &'a [(u32, i32)],
}

/// setProcessing(true), blocks, setProcessing(false). Returns (process calls, frames).
fn process_blocks(processor: SendPtr, run: &Vst3Run, rng: &mut Rng) -> Result<(u64, u64), String> {
    // SAFETY: see `SendPtr`; the reference is borrowed, not released.
    let processor = unsafe { vst3::ComRef::from_raw(processor.0) }.ok_or("null processor")?;
    let max = run.max_block;
    let mut inputs: Vec<Vec<Vec<f32>>> = run
        .inputs
        .iter()
        .map(|&c| vec![vec![0.0; max]; c.max(0) as usize])
        .collect();
    let mut outputs: Vec<Vec<Vec<f32>>> = run
        .outputs
        .iter()
        .map(|&c| vec![vec![0.0; max]; c.max(0) as usize])
        .collect();
    let mut signals: Vec<Vec<InputSignal>> = inputs
        .iter()
        .map(|bus| {
            bus.iter()
                .map(|_| InputSignal::random(rng, run.rate_hz))
                .collect()
        })
        .collect();
    let (mut calls, mut frames_done) = (0u64, 0u64);
    // SAFETY: the VST3 processing calls on an active component; buffers live across each call.
    unsafe {
        processor.setProcessing(1);
        let mut left = run.total_frames;
        while left > 0 {
            let frames = if rng.chance(0.5) {
                max
            } else {
                rng.range_usize(1, max)
            };
            for (bus, channels) in inputs.iter_mut().enumerate() {
                for (channel, samples) in channels.iter_mut().enumerate() {
                    signals[bus][channel].fill(&mut samples[..frames]);
                }
            }
            for channel in outputs.iter_mut().flatten() {
                channel[..frames].fill(f32::NAN);
            }
            let mut input_ptrs = channel_pointers(&mut inputs);
            let mut output_ptrs = channel_pointers(&mut outputs);
            // Now and then a host passes a bus with no buffers (a deactivated bus).
            let missing_output = (rng.chance(0.03) && output_ptrs.len() > 1)
                .then(|| rng.range_usize(1, output_ptrs.len() - 1));
            let bus = |ptrs: &mut Vec<*mut f32>, is_missing: bool| AudioBusBuffers {
                numChannels: if is_missing { 0 } else { ptrs.len() as i32 },
                silenceFlags: 0,
                __field0: AudioBusBuffers__type0 {
                    channelBuffers32: if is_missing {
                        null_mut()
                    } else {
                        ptrs.as_mut_ptr()
                    },
                },
            };
            let mut input_buses: Vec<AudioBusBuffers> =
                input_ptrs.iter_mut().map(|p| bus(p, false)).collect();
            let mut output_buses: Vec<AudioBusBuffers> = output_ptrs
                .iter_mut()
                .enumerate()
                .map(|(i, p)| bus(p, Some(i) == missing_output))
                .collect();
            let changes = if !run.params.is_empty() && rng.chance(0.5) {
                let queues = (0..rng.range_usize(1, 3))
                    .map(|_| {
                        let (id, steps) = *rng.pick(run.params);
                        let mut points: Vec<(i32, f64)> = (0..rng.range_usize(1, 3))
                            .map(|_| {
                                let value = if steps > 0 {
                                    rng.range_u64(0, steps as u64) as f64 / steps as f64
                                } else {
                                    rng.unit()
                                };
                                (rng.range_usize(0, frames - 1) as i32, value)
                            })
                            .collect();
                        points.sort_by_key(|p| p.0);
                        ComWrapper::new(ParamQueue { id, points })
                            .to_com_ptr::<IParamValueQueue>()
                            .expect("ParamQueue implements IParamValueQueue")
                    })
                    .collect();
                Some(
                    ComWrapper::new(ParamChanges { queues })
                        .to_com_ptr::<IParameterChanges>()
                        .expect("ParamChanges implements IParameterChanges"),
                )
            } else {
                None
            };
            let mode = if rng.chance(0.05) {
                *rng.pick(&[ProcessModes_::kRealtime, ProcessModes_::kOffline]) as i32
            } else {
                run.mode
            };
            let mut data = ProcessData {
                processMode: mode,
                symbolicSampleSize: SymbolicSampleSizes_::kSample32 as i32,
                numSamples: frames as i32,
                numInputs: input_buses.len() as i32,
                numOutputs: output_buses.len() as i32,
                inputs: input_buses.as_mut_ptr(),
                outputs: output_buses.as_mut_ptr(),
                inputParameterChanges: changes.as_ref().map_or(null_mut(), |c| c.as_ptr()),
                outputParameterChanges: null_mut(),
                inputEvents: null_mut(),
                outputEvents: null_mut(),
                processContext: null_mut(),
            };
            let result = processor.process(&mut data);
            calls += 1;
            frames_done += frames as u64;
            if result != kResultOk {
                return Err(format!("process returned {result} ({frames} frames)"));
            }
            for (bus, channels) in outputs.iter().enumerate() {
                if Some(bus) == missing_output {
                    continue;
                }
                for (channel, samples) in channels.iter().enumerate() {
                    if let Some((frame, x)) = first_bad_sample(&samples[..frames]) {
                        return Err(format!("output bus {bus} channel {channel} frame {frame} is {x} ({frames} frames)"));
                    }
                }
            }
            left = left.saturating_sub(frames);
        }
        processor.setProcessing(0);
    }
    Ok((calls, frames_done))
}

/// A state move on the main thread: save, reload, corrupt, or load another separator.
///
/// # Safety
///
/// `component` and `controller` must be initialised.
unsafe fn state_move(
    component: &ComPtr<IComponent>,
    controller: Option<&ComPtr<IEditController>>,
    target: &Target,
    rng: &mut Rng,
    last_state: &mut Option<Vec<u8>>,
) -> Result<(), String> {
    let chunk = if rng.chance(0.5) {
        rng.range_usize(1, 64)
    } else {
        0
    };
    // SAFETY: the caller's contract; streams are our own objects.
    unsafe {
        match rng.range_usize(0, 3) {
            0 => {
                let out = stream(Vec::new(), 0);
                if component.getState(out.as_ptr()) == kResultOk {
                    *last_state = Some(stream_bytes(&out));
                }
            }
            1 => {
                if let Some(state) = last_state.clone() {
                    // A stream may deliver fewer bytes per read than asked for.
                    let input = stream(state.clone(), chunk);
                    let result = component.setState(input.as_ptr());
                    if result != kResultOk {
                        return Err(format!(
                            "reloading the component's own state ({} bytes, read {} at a time) returned {result}",
                            state.len(),
                            if chunk == 0 { "all".to_string() } else { chunk.to_string() }
                        ));
                    }
                    if let Some(c) = controller {
                        let again = stream(state, chunk);
                        c.setComponentState(again.as_ptr());
                    }
                }
            }
            2 => {
                if let Some(state) = last_state.clone() {
                    let input = stream(corrupt_state(&state, rng), chunk);
                    component.setState(input.as_ptr());
                }
            }
            _ => swap_separator(component, target, rng)?,
        }
    }
    Ok(())
}

/// Loads a state naming another separator. The VST3 state is nice-plug's JSON, unframed.
///
/// # Safety
///
/// `component` must be initialised.
unsafe fn swap_separator(
    component: &ComPtr<IComponent>,
    target: &Target,
    rng: &mut Rng,
) -> Result<(), String> {
    let out = stream(Vec::new(), 0);
    // SAFETY: the caller's contract; the stream is our own object.
    unsafe {
        if component.getState(out.as_ptr()) != kResultOk {
            return Err("getState failed".into());
        }
        let json = stream_bytes(&out);
        let mut framed = (json.len() as u64).to_le_bytes().to_vec();
        framed.extend_from_slice(&json);
        let separator = rng.pick(&target.separators).clone();
        let swapped = super::state_edit::state_with_separator(&framed, &separator)
            .ok_or("the component's own state is not nice-plug's JSON")?;
        let input = stream(swapped[8..].to_vec(), 0);
        if component.setState(input.as_ptr()) != kResultOk {
            return Err(format!("setState naming separator {separator:?} failed"));
        }
    }
    Ok(())
}
