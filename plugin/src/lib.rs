//! Stemflow: splits the track it is inserted on into vocals, drums, bass and other (plus guitar
//! and piano from six-stem models), streamed
//! with a fixed reported latency, live and in offline renders.
//!
//! This crate is glue: parameters, ports and state around [`stemflow_engine`]'s
//! [`StemStreamHandle`] (audio thread) and the worker thread behind it (owned by a
//! `StemStreamController`), and the
//! egui [`editor`].

pub mod editor;
pub mod editor_size;
mod look_ahead_change;
mod output_stage;
mod params;
pub mod port_set;
mod render_speed;
pub mod shared;
mod state;
pub mod swap;

use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Instant;

use nice_plug::prelude::*;
use port_set::{MultiOutput, PortSet, SingleBus, TEN_CHANNEL_OUTPUT_CHANNELS};
use render_speed::{RenderSpeedDetector, DETECTED_OFFLINE_WAIT};
use stemflow_engine::runtime::{devices, DeviceChoice};
use stemflow_engine::stream::{
    spawn_stream, ProcessingMode, StemStreamHandle, StreamConfig, OFFLINE_RUN_LIMIT,
    OFFLINE_WAIT_TIMEOUT,
};
use stemflow_engine::{
    BuiltinSeparator, DenormalGuard, ExtraStems, LookAhead, Separator, SeparatorChoice, Stem,
    NUM_STEMS,
};
// The saved state and its loader: a crate of their own (the fuzz crate drives the loader),
// at the path the plugin's modules name them by (`crate::saved_state`).
use stemflow_plugin_state as saved_state;
use swap::{stream_swap_channel, StreamSwapHandle};

use look_ahead_change::{apply_look_ahead, PluginTask};
use output_stage::{HostBuffers, OutputLayout, OutputStage};
pub use params::{
    GuitarPianoOutput, StemParams, StemflowParams, GAIN_SMOOTHING_MS, MAX_STEM_GAIN_DB,
    SWITCH_SMOOTHING_MS,
};
pub use saved_state::{SavedState, StateNotice, SAVED_STATE_VERSION};
use shared::PluginShared;

/// The plugin, in one of its [`PortSet`]s: [`Stemflow`] (multi-output) or
/// [`StemflowSingleBus`].
pub struct StemflowPlugin<V: PortSet> {
    params: Arc<StemflowParams>,
    /// Shared with the editor: meters (written here, lock-free, only while the editor is open),
    /// the running worker (installed in `activate`, removed in `deactivate`; the audio thread
    /// never touches it) and a separator the editor prepared for the next activation.
    shared: Arc<PluginShared>,
    /// Audio-thread side of the stream. Created (or reused) in `activate`; kept while inactive.
    /// Boxed, so a swap moves a pointer.
    stream: Option<Box<StemStreamHandle>>,
    /// The audio thread's end of the mailbox through which the editor swaps in a new stream.
    swap: Option<StreamSwapHandle>,
    sample_rate_hz: f32,
    /// The layout, the scratch and the ramps of the outputs.
    output: OutputStage,
    /// Where the mute/solo ramps are heading, per stem.
    switch_targets: [f32; NUM_STEMS],
    /// Where the bypass crossfade is heading.
    bypass_target: f32,
    /// Notices a host bouncing faster than real time without saying so.
    render_speed: RenderSpeedDetector,
    /// The Look-ahead setting last applied (at activation) or requested (from `process()`).
    requested_look_ahead: LookAhead,
    _port_set: PhantomData<V>,
}

/// Stemflow with one output per stem.
pub type Stemflow = StemflowPlugin<MultiOutput>;
/// Stemflow with one 10-channel output.
pub type StemflowSingleBus = StemflowPlugin<SingleBus>;

impl<V: PortSet> Default for StemflowPlugin<V> {
    fn default() -> Self {
        Self {
            params: Arc::new(StemflowParams::default()),
            shared: Arc::new(PluginShared::default()),
            stream: None,
            swap: None,
            sample_rate_hz: 44_100.0,
            output: OutputStage::default(),
            switch_targets: [1.0; NUM_STEMS],
            bypass_target: 0.0,
            render_speed: RenderSpeedDetector::new(44_100.0),
            requested_look_ahead: LookAhead::Full,
            _port_set: PhantomData,
        }
    }
}

impl<V: PortSet> Plugin for StemflowPlugin<V> {
    const NAME: &'static str = V::NAME;
    const VENDOR: &'static str = "Stemflow";
    const URL: &'static str = env!("CARGO_PKG_HOMEPAGE");
    const EMAIL: &'static str = "support@stemflow.audio";
    const VERSION: &'static str = env!("CARGO_PKG_VERSION");

    const AUDIO_IO_LAYOUTS: &'static [AudioIOLayout] = V::AUDIO_IO_LAYOUTS;

    // Parameter changes land on their exact frame, so automated offline renders are identical for
    // any block size.
    const SAMPLE_ACCURATE_AUTOMATION: bool = true;

    type Editor = editor::StemflowEditor;
    type SysExMessage = ();
    type BackgroundTask = PluginTask;

    fn params(&self) -> Arc<dyn Params> {
        self.params.clone()
    }

    fn task_executor(&mut self) -> TaskExecutor<Self> {
        let shared = self.shared.clone();
        let params = self.params.clone();
        Box::new(move |task| match task {
            PluginTask::ApplyLookAhead => apply_look_ahead(&shared, &params),
        })
    }

    fn editor(&mut self, _async_executor: AsyncExecutor<Self>) -> Option<Self::Editor> {
        Some(editor::StemflowEditor::new(
            self.params.clone(),
            self.shared.clone(),
        ))
    }

    fn activate(
        &mut self,
        audio_io_layout: &AudioIOLayout,
        buffer_config: &BufferConfig,
        context: &mut impl ActivateContext<Self>,
    ) -> bool {
        let layout = match (
            audio_io_layout.main_input_channels.map(NonZeroU32::get),
            audio_io_layout.main_output_channels.map(NonZeroU32::get),
        ) {
            (Some(1), _) => OutputLayout::Mono,
            (_, Some(TEN_CHANNEL_OUTPUT_CHANNELS)) => OutputLayout::TenChannel,
            _ => OutputLayout::Stereo,
        };
        self.sample_rate_hz = buffer_config.sample_rate;
        let max_block_frames = buffer_config.max_buffer_size.max(1) as usize;
        let config = StreamConfig {
            host_sample_rate_hz: buffer_config.sample_rate,
            max_block_frames,
            mode: match buffer_config.process_mode {
                ProcessMode::Offline => ProcessingMode::Offline,
                ProcessMode::Realtime | ProcessMode::Buffered => ProcessingMode::Realtime,
            },
            // A host may switch to live playback at any time.
            is_offline_only: false,
        };

        let (choice, device) = self.saved_choice();
        #[cfg(feature = "fault-injection")]
        if let SeparatorChoice::Model(path) = &choice {
            stemflow_engine::fault::panic_if_planned_in_activate(path);
        }
        let look_ahead = self.params.look_ahead.value().look_ahead();
        self.requested_look_ahead = look_ahead;
        let Some((handle, running)) =
            self.start_or_reuse_stream(config, choice, device, look_ahead)
        else {
            return false;
        };
        context.set_latency_samples(handle.latency_samples() as u32);
        self.stream = Some(handle);
        drop(self.shared.replace_stream(Some(running)));
        self.output.activate(layout, max_block_frames);
        self.render_speed = RenderSpeedDetector::new(buffer_config.sample_rate);
        self.reset_smoothers();
        true
    }

    fn reset(&mut self) {
        if let Some(stream) = &mut self.stream {
            stream.reset();
        }
        self.render_speed.reset();
        self.reset_smoothers();
    }

    fn deactivate(&mut self) {
        // The stream stays (its worker idles): a reactivation with the same settings, such as the
        // restart a CLAP host makes after a latency change, reuses it instead of reloading the
        // model. It is freed when the plugin is destroyed or restarted with other settings.
    }

    fn process(
        &mut self,
        buffer: &mut Buffer,
        aux: &mut AuxiliaryBuffers,
        context: &mut impl ProcessContext<Self>,
    ) -> ProcessStatus {
        // The host's thread is left as it was when this returns.
        let _denormals = DenormalGuard::new();
        let num_frames = buffer.samples();
        let is_faster_than_real_time = self.render_speed.block_started(num_frames, Instant::now());
        self.update_switch_targets();
        let extra_stems = self.extra_stems();
        // A new Look-ahead setting: the separator is rebuilt in the background and swapped in
        // below, with its latency, like a model chosen in the editor.
        let look_ahead = self.params.look_ahead.value().look_ahead();
        if look_ahead != self.requested_look_ahead {
            self.requested_look_ahead = look_ahead;
            context.execute_background(PluginTask::ApplyLookAhead);
        }
        let (Some(stream), Some(swap)) = (self.stream.as_mut(), self.swap.as_mut()) else {
            return ProcessStatus::Normal;
        };
        // A model chosen in the editor while playing: installed here, with a fade; the host is
        // told the new latency (VST3 re-reads it, CLAP restarts the plugin, which keeps it).
        if let Some(latency_samples) = swap.begin_block(stream) {
            context.set_latency_samples(latency_samples as u32);
        }
        let is_fading = swap.is_fading();
        stream.set_extra_stems(extra_stems);
        // The mode can change per call (an export started without a reactivation), and some
        // hosts bounce without saying so: wait for the worker there too, but not as long.
        match context.process_mode() {
            ProcessMode::Offline => {
                stream.set_mode(ProcessingMode::Offline);
                stream.set_offline_wait(OFFLINE_WAIT_TIMEOUT, OFFLINE_RUN_LIMIT);
            }
            ProcessMode::Realtime | ProcessMode::Buffered if is_faster_than_real_time => {
                stream.set_mode(ProcessingMode::Offline);
                // Maybe a live host misread: never wait long on its audio thread.
                stream.set_offline_wait(DETECTED_OFFLINE_WAIT, DETECTED_OFFLINE_WAIT);
            }
            ProcessMode::Realtime | ProcessMode::Buffered => {
                stream.set_mode(ProcessingMode::Realtime)
            }
        }
        let max_block = stream.max_block_frames();
        let mut buffers = HostBuffers {
            main: buffer.as_slice(),
            aux_outputs: aux.outputs,
        };
        // Meters cost a max per sample, so they only run while someone looks at them.
        let should_meter = self.shared.is_editor_open();
        let mut peaks = [0.0f32; NUM_STEMS];
        let mut start = 0;
        // Hosts should never exceed the maximum block size, but if one does, split the block.
        while start < num_frames {
            let end = start + max_block.min(num_frames - start);
            self.output.render_block(
                &self.params,
                stream,
                is_fading.then_some(&mut *swap),
                &mut buffers,
                start..end,
                should_meter.then_some(&mut peaks),
            );
            start = end;
        }
        if should_meter {
            // Lock-free: one atomic max per stem (see `StemMeters`).
            for (stem_index, peak) in peaks.into_iter().enumerate() {
                self.shared.meters.record(stem_index, peak);
            }
        }
        let latency_samples = stream.latency_samples() as u32;
        self.render_speed.block_finished(Instant::now());
        // The stems of the last input come out one latency later: keep being called for it.
        ProcessStatus::Tail(latency_samples)
    }
}

impl<V: PortSet> StemflowPlugin<V> {
    /// The saved separator and device. A model that moved inside a models folder is found again
    /// by its hash; a saved device that is gone becomes Auto; both with a notice.
    /// Not realtime-safe: looks at the disk.
    fn saved_choice(&self) -> (SeparatorChoice, DeviceChoice) {
        let mut saved = self.params.saved.get();
        let mut choice = saved.separator.clone();
        if let (SeparatorChoice::Model(path), Some(sha256)) = (&choice, &saved.model_sha256) {
            if !path.is_file() {
                let dirs = stemflow_engine::models_dirs(&[]);
                if let Some(found) = stemflow_engine::find_by_sha256(sha256, &dirs) {
                    self.params.saved.set_notice(StateNotice::ModelMoved {
                        from: path.display().to_string(),
                        to: found.display().to_string(),
                    });
                    choice = SeparatorChoice::Model(found);
                    saved.separator = choice.clone();
                    self.params.saved.set_state(saved.clone());
                }
            }
        }
        let mut device = saved.device;
        if let (SeparatorChoice::Model(_), DeviceChoice::Device(id)) = (&choice, device) {
            if !devices().iter().any(|d| d.id == id) {
                self.params
                    .saved
                    .set_notice(StateNotice::UnknownDevice(id.to_string()));
                device = DeviceChoice::Auto;
            }
        }
        (choice, device)
    }

    /// The stream for this activation: the running one, reset, when it runs this separator at
    /// these settings; otherwise a new one, reusing the running separator when only the rate or
    /// block size changed, or the one the editor prepared, before loading the model again.
    /// Not realtime-safe: may join a worker, load a model and spawn a thread.
    fn start_or_reuse_stream(
        &mut self,
        config: StreamConfig,
        choice: SeparatorChoice,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Option<(Box<StemStreamHandle>, shared::RunningStream)> {
        let (swap_sender, swap_handle) = stream_swap_channel(config.host_sample_rate_hz);
        let old_swap = self.swap.replace(swap_handle);
        let mut old_handle = self.stream.take();
        let running = self.shared.take_stream();
        let mut reusable = None;
        if let Some(mut running) = running {
            // A stream the editor sent that the audio thread never installed is the newest one:
            // it belongs to `running.controller`.
            if let Some(mut old_swap) = old_swap {
                if let Some(unsent) = running.swap.take_unsent(&mut old_swap) {
                    old_handle = Some(unsent);
                }
            }
            let is_same_separator = running.choice == choice
                && running.device == device
                && running.look_ahead == look_ahead;
            let is_same_config = running.config.host_sample_rate_hz == config.host_sample_rate_hz
                && running.config.max_block_frames == config.max_block_frames;
            // Streams handed back or still in flight are freed here, joining their workers.
            drop(std::mem::take(&mut running.retiring));
            match old_handle.take() {
                Some(mut handle)
                    if is_same_separator && is_same_config && running.controller.is_alive() =>
                {
                    handle.reset();
                    handle.set_mode(config.mode);
                    running.config = config;
                    let swap = std::mem::replace(&mut running.swap, swap_sender);
                    drop(swap);
                    return Some((handle, running));
                }
                handle => {
                    drop(handle);
                    if is_same_separator {
                        reusable = running.controller.into_separator();
                    }
                }
            }
        }
        let separator =
            match reusable.or_else(|| self.shared.take_prepared(&choice, device, look_ahead)) {
                Some(separator) => separator,
                None => self.build_separator(&choice, device, look_ahead),
            };
        let facts = shared::SeparatorFacts::of(separator.as_ref());
        match spawn_stream(separator, &config) {
            Ok((handle, controller)) => Some((
                Box::new(handle),
                shared::RunningStream {
                    controller,
                    config,
                    choice,
                    device,
                    look_ahead,
                    facts,
                    swap: swap_sender,
                    retiring: Default::default(),
                },
            )),
            Err(error) => {
                nice_error!("Stemflow cannot start: {error}");
                None
            }
        }
    }

    /// Loads `choice` on `device`; a model that cannot run falls back to the built-in separator
    /// with a notice instead of failing. Not realtime-safe: may load a model.
    fn build_separator(
        &self,
        choice: &SeparatorChoice,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Box<dyn Separator> {
        let saved = self.params.saved.get();
        match choice.build_with(device, look_ahead) {
            Ok(separator) => {
                // Remember the model's hash, so it can be found again if it moves.
                let sha256 = separator.info().model_sha256().map(str::to_owned);
                if sha256 != saved.model_sha256 {
                    self.params.saved.set_state(SavedState {
                        model_sha256: sha256,
                        ..saved
                    });
                }
                separator
            }
            Err(error) => {
                self.params
                    .saved
                    .set_notice(StateNotice::ModelFailed(error.to_string()));
                Box::new(BuiltinSeparator::new())
            }
        }
    }

    /// Where guitar and piano go in the current layout.
    fn extra_stems(&self) -> ExtraStems {
        match self.output.layout {
            OutputLayout::TenChannel => ExtraStems::IntoOther,
            OutputLayout::Stereo | OutputLayout::Mono => {
                self.params.guitar_piano.value().extra_stems()
            }
        }
    }

    /// Mute/solo gain targets (0 or 1) per stem. Guitar and piano's solo only counts while they
    /// have their own outputs: hidden controls never silence the rest. Realtime-safe.
    fn switch_gain_targets(&self) -> [f32; NUM_STEMS] {
        let has_extra_outputs = self.extra_stems() == ExtraStems::Separate;
        let is_soloed = |stem: Stem| {
            (has_extra_outputs || !stem.is_extra()) && self.params.stem(stem).solo.value()
        };
        let any_solo = Stem::ALL.into_iter().any(is_soloed);
        Stem::ALL.map(|stem| {
            let is_audible = !self.params.stem(stem).mute.value() && (!any_solo || is_soloed(stem));
            if is_audible {
                1.0
            } else {
                0.0
            }
        })
    }

    /// Points the mute/solo and bypass ramps at the current parameter values. Realtime-safe.
    fn update_switch_targets(&mut self) {
        let targets = self.switch_gain_targets();
        for stem in Stem::ALL {
            let target = targets[stem.index()];
            if target != self.switch_targets[stem.index()] {
                self.switch_targets[stem.index()] = target;
                self.output.switch_gains[stem.index()].set_target(self.sample_rate_hz, target);
            }
        }
        let bypass_target = if self.params.bypass.value() { 1.0 } else { 0.0 };
        if bypass_target != self.bypass_target {
            self.bypass_target = bypass_target;
            self.output
                .bypass_mix
                .set_target(self.sample_rate_hz, bypass_target);
        }
    }

    /// Jumps all ramps to their targets (after activation or a reset). Realtime-safe.
    fn reset_smoothers(&mut self) {
        let targets = self.switch_gain_targets();
        for stem in Stem::ALL {
            let target = targets[stem.index()];
            self.switch_targets[stem.index()] = target;
            self.output.switch_gains[stem.index()].reset(target);
        }
        self.bypass_target = if self.params.bypass.value() { 1.0 } else { 0.0 };
        self.output.bypass_mix.reset(self.bypass_target);
    }
}

impl<V: PortSet> ClapPlugin for StemflowPlugin<V> {
    const CLAP_ID: &'static str = V::CLAP_ID;
    const CLAP_DESCRIPTION: Option<&'static str> = Some(V::DESCRIPTION);
    const CLAP_MANUAL_URL: Option<&'static str> = Some(Self::URL);
    const CLAP_SUPPORT_URL: Option<&'static str> = None;
    const CLAP_FEATURES: &'static [ClapFeature] = &[
        ClapFeature::AudioEffect,
        ClapFeature::Stereo,
        ClapFeature::Mono,
        ClapFeature::Utility,
        ClapFeature::Mixing,
    ];
}

impl<V: PortSet> Vst3Plugin for StemflowPlugin<V> {
    const VST3_CLASS_ID: [u8; 16] = V::VST3_CLASS_ID;
    const VST3_SUBCATEGORIES: &'static [Vst3SubCategory] =
        &[Vst3SubCategory::Fx, Vst3SubCategory::Tools];
}

nice_export_clap!(Stemflow, StemflowSingleBus);
nice_export_vst3!(Stemflow, StemflowSingleBus);
