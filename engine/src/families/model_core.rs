//! [`ModelCore`]: one loaded model of any family — its description, the runner of its graph, the
//! family's codec and the switch of graph when the device changes — driven by two adapters:
//! [`super::ModelSeparator`] streams it chunk by chunk (the plugin), `whole_file`'s
//! `ModelRun` chunks a whole file as the reference does.

use std::path::{Path, PathBuf};

use super::description::{ChunkCodec, ChunkRun, ModelDescription};
use super::device_graph::{
    graph_for_choice, load_exact, load_graph, prepare_graph, LoadedGraph, ReadyGraph,
};
use super::overlap_add::ChunkLayout;
use super::stem_sources::StemSource;
use crate::model_error::ModelError;
use crate::runtime::device_id::DeviceId;
use crate::runtime::device_switch::DeviceSwitch;
use crate::runtime::devices::{ActiveDevice, DeviceChoice, DeviceEvent};
use crate::runtime::graph_files::{graph_for, GraphChoice};
use crate::runtime::runner::ModelRunner;
use crate::runtime::session::{AcquiredSession, Precision, DEFAULT_GPU_PRECISION};
use crate::separator::SeparatorInfo;
use crate::stem::Stem;

/// A loaded model: what it is, what runs it, and the device it runs on.
pub struct ModelCore {
    runner: ModelRunner,
    description: ModelDescription,
    codec: Box<dyn ChunkCodec>,
    /// The model's name (its file name without `.onnx`).
    name: String,
    /// The model as chosen: where its graphs for every device lie (empty for a graph loaded
    /// on its own).
    model_path: PathBuf,
    /// The graph running now.
    graph: GraphChoice,
    /// The precision of GPU graphs.
    precision: Precision,
    /// The chunking of the model's reference: another graph of the model must chunk alike to
    /// take over.
    reference_layout: ChunkLayout,
    /// Another graph being made ready on a helper thread (a device switch across graphs).
    graph_switch: DeviceSwitch<ReadyGraph>,
    /// Whether a mid-run fallback of a GPU graph to the CPU was answered with the CPU graph.
    is_fallback_answered: bool,
}

impl ModelCore {
    /// Loads `path`, checks its graph against the families, and builds a warm session on
    /// `device` (falling back to the CPU with the reason recorded), running GPU graphs at
    /// `precision`: the model's GPU graph of that precision on a GPU (`NAME.gpu.onnx`,
    /// `NAME.gpu-f16.onnx`, see `runtime/graph_files.rs`), its CPU graph on the CPU. Not
    /// realtime-safe.
    pub fn load(
        path: &Path,
        device: DeviceChoice,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        let loaded = load_graph(path, device, precision)?;
        Ok(Self::from_loaded(loaded, path, precision))
    }

    /// Runs exactly `graph` of the model `path` on `device` (a GPU graph on the CPU, say),
    /// whatever it is made for; device switches then choose as usual. Not realtime-safe.
    pub fn load_exactly(
        path: &Path,
        graph: GraphChoice,
        device: DeviceChoice,
    ) -> Result<Self, ModelError> {
        let loaded = load_exact(&graph, device)?;
        Ok(Self::from_loaded(loaded, path, DEFAULT_GPU_PRECISION))
    }

    fn from_loaded(loaded: LoadedGraph, path: &Path, precision: Precision) -> Self {
        Self {
            codec: loaded.description.pipeline.codec(&loaded.description),
            reference_layout: loaded.description.layout,
            runner: loaded.runner,
            description: loaded.description,
            name: loaded.name,
            model_path: path.to_path_buf(),
            graph: loaded.graph,
            precision,
            graph_switch: DeviceSwitch::default(),
            is_fallback_answered: false,
        }
    }

    /// The model's description (its chunking: the reference's, or the shorter look-ahead's
    /// [`ModelCore::set_layout`] gave it).
    pub fn description(&self) -> &ModelDescription {
        &self.description
    }

    /// Chunks the model as `layout` does from now on (a shorter look-ahead's schedule of the
    /// same chunks), its codec made again for it. Not realtime-safe: allocates.
    pub fn set_layout(&mut self, layout: ChunkLayout) {
        self.description.layout = layout;
        self.codec = self.description.pipeline.codec(&self.description);
    }

    /// The chunking of the model's reference.
    pub fn reference_layout(&self) -> ChunkLayout {
        self.reference_layout
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What a separator of this model is, with `hop_frames` and `latency_frames` of its own:
    /// name, rate, the stems it delivers, the model's SHA-256, float16.
    pub fn separator_info(&self, hop_frames: usize, latency_frames: usize) -> SeparatorInfo {
        let stem_sources = self.description.stem_sources;
        SeparatorInfo::new(
            self.name.clone(),
            self.description.sample_rate_hz,
            hop_frames,
            latency_frames,
        )
        .with_delivered_stems(Stem::ALL.into_iter().filter(|&stem| {
            stem != Stem::Other && stem_sources[stem.index()] != StemSource::Silent
        }))
        .with_model_sha256(self.runner.model_sha256().to_owned())
        .with_float16(self.description.is_float16)
    }

    /// The session in use.
    pub fn session(&self) -> &AcquiredSession {
        self.runner.session()
    }

    /// The graph file running now (the model's GPU graph or its CPU graph).
    pub fn graph_path(&self) -> &Path {
        &self.graph.path
    }

    /// The device the model runs on now.
    pub fn device(&self) -> ActiveDevice {
        self.runner.active_device()
    }

    /// Runs the model on one chunk (see [`ChunkCodec::run_chunk`]). Not realtime-safe:
    /// inference.
    pub fn run_chunk(
        &mut self,
        input: [&[f32]; 2],
        outputs: &mut dyn FnMut(&[f32]),
    ) -> Result<(), String> {
        self.codec.run_chunk(ChunkRun {
            runner: &mut self.runner,
            input,
            outputs,
        })
    }

    /// Runs the model on several chunks, as many at once as its graph takes (see
    /// [`ChunkCodec::run_chunks`]); `file_end` is where the file ends within the first chunk,
    /// for the codecs that must know. Not realtime-safe: inference.
    pub fn run_chunks(
        &mut self,
        chunks: &[[&[f32]; 2]],
        file_end: Option<usize>,
        outputs: &mut dyn FnMut(usize, &[f32]),
    ) -> Result<(), String> {
        self.codec.set_file_end(file_end);
        let result = self.codec.run_chunks(&mut self.runner, chunks, outputs);
        self.codec.set_file_end(None);
        result
    }

    /// Moves the model to `choice`: on the same graph through the runner; to the model's other
    /// graph (a GPU graph on a GPU, the CPU graph on the CPU) built on a helper thread and
    /// swapped in with its codec by [`ModelCore::poll_events`]. Not realtime-safe: may spawn a
    /// thread.
    pub fn request_device(&mut self, choice: DeviceChoice) {
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
        let name = self.name.clone();
        self.graph_switch
            .start_job(name, move || prepare_graph(graph, cpu_graph, choice));
    }

    /// Reports the runner's device events, and installs a graph made ready by a switch, with
    /// its codec, when it chunks as the running one does (or reports why not). A GPU graph
    /// that fell back to the CPU mid-run gives way to the CPU graph. Not realtime-safe: drops
    /// the old session.
    pub fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        self.runner.poll_events(events);
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
}
