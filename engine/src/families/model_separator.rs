//! [`ModelSeparator`]: a model of any family, streamed chunk by chunk through the family's
//! codec and the overlap-add its reference uses.

use std::path::{Path, PathBuf};

use super::description::{ChunkCodec, ChunkRun, ModelDescription};
use super::device_graph::{
    graph_for_choice, load_exact, load_graph, prepare_graph, LoadedGraph, ReadyGraph,
};
use super::look_ahead_schedule::look_ahead_schedule;
use super::overlap_add::{ChunkLayout, OverlapAdd, ReadyChunk};
use super::stem_sources::StemSource;
use crate::look_ahead::LookAhead;
use crate::model_error::ModelError;
use crate::planar::PlanarBlock;
use crate::runtime::device_id::DeviceId;
use crate::runtime::device_switch::DeviceSwitch;
use crate::runtime::devices::{ActiveDevice, DeviceChoice, DeviceEvent};
use crate::runtime::graph_files::{graph_for, GraphChoice};
use crate::runtime::runner::ModelRunner;
use crate::runtime::session::{AcquiredSession, Precision, DEFAULT_GPU_PRECISION};
use crate::separator::{stem_channel, Separator, SeparatorError, SeparatorInfo, SeparatorRequest};
use crate::stem::Stem;
use crate::stream::SCHEDULING_MARGIN_MS;

/// A separator running a model of any family, streamed chunk by chunk.
pub struct ModelSeparator {
    runner: ModelRunner,
    description: ModelDescription,
    codec: Box<dyn ChunkCodec>,
    overlap_add: OverlapAdd,
    /// The first chunk's overlap-add weights where they differ from the others'.
    first_window: Option<Vec<f32>>,
    /// Every chunk's overlap-add weights (float32, as they are added).
    window: Vec<f32>,
    /// What it is, fixed once built. Its scheduling margin is the output buffering real time
    /// needs for a model run: a hop at `Full`, a step with a shorter look-ahead (a run every
    /// step must fit in one); its predicted real-time factor is measured on the device it was
    /// built on.
    info: SeparatorInfo,
    /// Chunks run through the model so far.
    model_runs: u64,
    /// The model as chosen: where its graphs for every device lie.
    model_path: PathBuf,
    /// The graph running now.
    graph: GraphChoice,
    /// The precision of GPU graphs.
    precision: Precision,
    /// The chunking of the model's reference (before a shorter look-ahead): another graph of
    /// the model must chunk alike to take over.
    reference_layout: ChunkLayout,
    /// Another graph being made ready on a helper thread (a device switch across graphs).
    graph_switch: DeviceSwitch<ReadyGraph>,
    /// Whether a mid-run fallback of a GPU graph to the CPU was answered with the CPU graph.
    is_fallback_answered: bool,
}

impl ModelSeparator {
    /// Loads `path`, checks its graph against the families, and builds a warm session on
    /// `device` (falling back to the CPU with the reason recorded). Not realtime-safe.
    pub fn load(path: &Path, device: DeviceChoice) -> Result<Self, ModelError> {
        Self::load_with(path, device, LookAhead::Full)
    }

    /// [`ModelSeparator::load`] to run with `look_ahead`. Not realtime-safe.
    pub fn load_with(
        path: &Path,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Result<Self, ModelError> {
        Self::load_at(path, device, look_ahead, DEFAULT_GPU_PRECISION)
    }

    /// [`ModelSeparator::load_with`] running GPU graphs at `precision`: the graph that runs is
    /// the model's GPU graph of that precision on a GPU (`NAME.gpu.onnx`, `NAME.gpu-f16.onnx`,
    /// see `runtime/graph_files.rs`), its CPU graph on the CPU. Not realtime-safe.
    pub fn load_at(
        path: &Path,
        device: DeviceChoice,
        look_ahead: LookAhead,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        let loaded = load_graph(path, device, precision)?;
        Ok(Self::from_loaded(loaded, path, look_ahead, precision))
    }

    /// The separator of a graph `loaded` for the model `path`.
    fn from_loaded(
        loaded: LoadedGraph,
        path: &Path,
        look_ahead: LookAhead,
        precision: Precision,
    ) -> Self {
        let reference_layout = loaded.description.layout;
        let mut separator =
            Self::with_runner(loaded.runner, loaded.description, loaded.name, look_ahead);
        separator.model_path = path.to_path_buf();
        separator.graph = loaded.graph;
        separator.precision = precision;
        separator.reference_layout = reference_layout;
        separator
    }

    /// For tests: runs exactly `graph` of the model `path` on `device` (a GPU graph on the
    /// CPU, say), whatever it is made for; device switches then choose as usual. Not
    /// realtime-safe.
    #[doc(hidden)]
    pub fn load_exactly(
        path: &Path,
        graph: GraphChoice,
        device: DeviceChoice,
    ) -> Result<Self, ModelError> {
        let loaded = load_exact(&graph, device)?;
        Ok(Self::from_loaded(
            loaded,
            path,
            LookAhead::Full,
            DEFAULT_GPU_PRECISION,
        ))
    }

    fn with_runner(
        runner: ModelRunner,
        mut description: ModelDescription,
        name: String,
        look_ahead: LookAhead,
    ) -> Self {
        let reference_layout = description.layout;
        let num_outputs = description.stems.len();
        let chunk = description.layout.chunk_frames;
        let (mut first_window, mut window) = description.pipeline.windows(chunk);
        let mut compute_factor = 1.0;
        let mut margin_frames = description.layout.hop_frames();
        let mut is_shortened = false;
        if let Some(target) = look_ahead.target_frames(description.sample_rate_hz) {
            // The stream adds its fixed scheduling margin to what the separator reports.
            let stream_margin = (SCHEDULING_MARGIN_MS / 1000.0
                * f64::from(description.sample_rate_hz))
            .ceil() as usize;
            let target = target.saturating_sub(stream_margin);
            if let Some(schedule) = look_ahead_schedule(description.layout, &window, target) {
                compute_factor =
                    description.layout.step_frames as f64 / schedule.layout.step_frames as f64;
                description.layout = schedule.layout;
                margin_frames = schedule.layout.step_frames;
                is_shortened = true;
                first_window.clone_from(&schedule.window);
                window = schedule.window;
            }
        }
        let overlap_add = OverlapAdd::new(description.layout, num_outputs);
        let stem_sources = description.stem_sources;
        let info = SeparatorInfo::new(
            name,
            description.sample_rate_hz,
            overlap_add.hop_frames(),
            overlap_add.latency_frames(),
        )
        .with_scheduling_margin_frames(margin_frames)
        .with_delivered_stems(Stem::ALL.into_iter().filter(|&stem| {
            stem != Stem::Other && stem_sources[stem.index()] != StemSource::Silent
        }))
        .with_model_sha256(runner.model_sha256().to_owned())
        .with_compute_factor(compute_factor)
        .with_float16(description.is_float16);
        let mut separator = Self {
            overlap_add,
            codec: description.pipeline.codec(&description),
            first_window: (first_window != window).then(|| as_f32(&first_window)),
            window: as_f32(&window),
            runner,
            description,
            info,
            model_runs: 0,
            model_path: PathBuf::new(),
            graph: GraphChoice {
                path: PathBuf::new(),
                gpu_precision: None,
            },
            precision: DEFAULT_GPU_PRECISION,
            reference_layout,
            graph_switch: DeviceSwitch::default(),
            is_fallback_answered: false,
        };
        if is_shortened {
            let factor = separator.measure_real_time_factor();
            separator.info = separator
                .info
                .clone()
                .with_predicted_real_time_factor(factor);
        }
        separator
    }

    /// Times two runs of the model on silence (the first may include lazy initialisation: the
    /// faster counts) and returns model seconds per second of audio at the current step.
    /// `None` when the model fails (the first real chunk will say why). Not realtime-safe.
    fn measure_real_time_factor(&mut self) -> Option<f64> {
        let chunk = self.description.layout.chunk_frames;
        let silence = vec![0.0f32; chunk];
        let mut fastest_s = f64::INFINITY;
        for _ in 0..2 {
            let start = std::time::Instant::now();
            self.codec
                .run_chunk(ChunkRun {
                    runner: &mut self.runner,
                    input: [&silence, &silence],
                    outputs: &mut |_| {},
                })
                .ok()?;
            fastest_s = fastest_s.min(start.elapsed().as_secs_f64());
        }
        let runs_per_second =
            f64::from(self.description.sample_rate_hz) / self.description.layout.step_frames as f64;
        Some(fastest_s * runs_per_second)
    }

    /// The model's description.
    pub fn description(&self) -> &ModelDescription {
        &self.description
    }

    /// The session in use.
    pub fn session(&self) -> &AcquiredSession {
        self.runner.session()
    }

    /// The graph file running now (the model's GPU graph or its CPU graph).
    pub fn graph_path(&self) -> &Path {
        &self.graph.path
    }

    /// Moves the model to `choice`: on the same graph through the runner; to the model's other
    /// graph (a GPU graph on a GPU, the CPU graph on the CPU) built on a helper thread and
    /// swapped in with its codec by [`ModelSeparator::poll_graph_switch`]. Not realtime-safe:
    /// may spawn a thread.
    fn request_device(&mut self, choice: DeviceChoice) {
        let graph = graph_for_choice(&self.model_path, choice, self.precision);
        // A newer request replaces an older one of either kind.
        self.graph_switch = DeviceSwitch::default();
        if self.model_path.as_os_str().is_empty() || graph.path == self.graph.path {
            self.runner.request_device(choice);
            return;
        }
        self.runner.cancel_device_switch();
        self.start_graph_switch(graph, choice);
    }

    fn start_graph_switch(&mut self, graph: GraphChoice, choice: DeviceChoice) {
        let cpu_graph = graph_for(&self.model_path, DeviceId::CPU, self.precision).path;
        let name = self.info.name().to_owned();
        self.graph_switch
            .start_job(name, move || prepare_graph(graph, cpu_graph, choice));
    }

    /// Installs a graph made ready by a switch, with its codec, when it chunks as the running
    /// one does; reports the switch (or why it failed). A GPU graph that fell back to the CPU
    /// mid-run gives way to the CPU graph. Not realtime-safe: drops the old session.
    fn poll_graph_switch(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        match self.graph_switch.poll() {
            Some(Ok(ready)) => {
                let same = ready.description.layout == self.reference_layout
                    && ready.description.stems == self.description.stems
                    && ready.description.sample_rate_hz == self.description.sample_rate_hz;
                if !same {
                    events(DeviceEvent::DeviceSwitchFailed(format!(
                        "{} chunks or names its stems differently from {}: it is not the same \
                         model's graph",
                        ready.graph.path.display(),
                        self.graph.path.display()
                    )));
                    return;
                }
                let mut description = ready.description;
                description.layout = self.description.layout;
                self.codec = description.pipeline.codec(&description);
                let mut active =
                    self.runner
                        .replace_graph(ready.session, ready.source, description.io.clone());
                if let Some(reason) = ready.fallback {
                    active.fallback_reason = Some(reason);
                }
                self.description = description;
                self.graph = ready.graph;
                events(DeviceEvent::DeviceSwitched(active));
            }
            Some(Err(error)) => events(DeviceEvent::DeviceSwitchFailed(error.to_string())),
            None => {}
        }
        let fell_back = self.graph.gpu_precision.is_some()
            && self.runner.active_device().actual == DeviceId::CPU;
        if fell_back && !self.is_fallback_answered && !self.graph_switch.is_pending() {
            self.is_fallback_answered = true;
            let cpu_graph = graph_for(&self.model_path, DeviceId::CPU, self.precision);
            if cpu_graph.path != self.graph.path {
                self.start_graph_switch(cpu_graph, DeviceChoice::Device(DeviceId::CPU));
            }
        }
    }

    /// The model's runner and its family's codec, for whole files (`whole_file`), which
    /// chunk as the reference does rather than as a stream.
    pub(crate) fn runner_and_codec(&mut self) -> (&mut ModelRunner, &mut dyn ChunkCodec) {
        (&mut self.runner, self.codec.as_mut())
    }
}

impl Separator for ModelSeparator {
    fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    fn reset(&mut self) {
        self.overlap_add.reset();
    }

    fn process_hop(
        &mut self,
        input: &PlanarBlock,
        stems: &mut PlanarBlock,
    ) -> Result<(), SeparatorError> {
        self.overlap_add
            .push_hop(input.channel(0), input.channel(1));
        let mut first_error = None;
        while let Some(ready) = self.overlap_add.ready_chunk() {
            let ReadyChunk {
                index,
                input: [left, right],
                mut sums,
            } = ready;
            let window = match &self.first_window {
                Some(first_window) if index == 0 => first_window,
                _ => &self.window,
            };
            // The outputs go straight from the model's output into the sums, unless they hold
            // NaN or infinite values: then its stems stay silent and Other carries the mix (the
            // worker reports it).
            let mut num_non_finite = 0;
            let result = self.codec.run_chunk(ChunkRun {
                runner: &mut self.runner,
                input: [left, right],
                outputs: &mut |outputs| {
                    num_non_finite = outputs.iter().filter(|x| !x.is_finite()).count();
                    if num_non_finite == 0 {
                        sums.add(outputs, window);
                    }
                },
            });
            sums.finish(window);
            self.model_runs += 1;
            let result = result.and_then(|()| match num_non_finite {
                0 => Ok(()),
                n => Err(format!("its output held {n} NaN or infinite values")),
            });
            if let Err(reason) = result {
                first_error.get_or_insert(SeparatorError {
                    separator: self.info.name().to_owned(),
                    reason,
                });
            }
        }
        let stem_sources = self.description.stem_sources;
        self.overlap_add.emit_hop(|frame, view| {
            for (stem_index, source) in stem_sources.iter().enumerate() {
                for channel in 0..2 {
                    let value = match (&view, *source) {
                        (None, _) | (_, StemSource::Silent) => 0.0,
                        (Some(v), StemSource::Output(k, gain)) => {
                            (v.value(k, channel) as f32) * gain
                        }
                        (Some(v), StemSource::MixMinus(k, gain)) => {
                            v.mix(channel) - (v.value(k, channel) as f32) * gain
                        }
                    };
                    stems.channel_mut(stem_channel(stem_index, channel))[frame] = value;
                }
            }
        });
        first_error.map_or(Ok(()), Err)
    }

    fn request(&mut self, request: SeparatorRequest) {
        match request {
            SeparatorRequest::SetDevice(choice) => self.request_device(choice),
        }
    }

    fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        self.runner.poll_events(events);
        self.poll_graph_switch(events);
    }

    fn device(&self) -> Option<ActiveDevice> {
        Some(self.runner.active_device())
    }

    fn model_runs(&self) -> u64 {
        self.model_runs
    }
}

/// A window computed in float64, as the overlap-add uses it.
fn as_f32(window: &[f64]) -> Vec<f32> {
    window.iter().map(|&w| w as f32).collect()
}
