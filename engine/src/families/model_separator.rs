//! [`ModelSeparator`]: a model of any family, streamed chunk by chunk through the family's
//! codec and the overlap-add its reference uses — the real-time adapter of a [`ModelCore`].

use std::path::Path;

use super::description::ModelDescription;
use super::look_ahead_schedule::look_ahead_schedule;
use super::model_core::ModelCore;
use super::overlap_add::{OverlapAdd, ReadyChunk};
use super::stem_sources::StemSource;
use crate::look_ahead::LookAhead;
use crate::model_error::ModelError;
use crate::planar::PlanarBlock;
use crate::runtime::devices::{ActiveDevice, DeviceChoice, DeviceEvent};
use crate::runtime::graph_files::GraphChoice;
use crate::runtime::session::{AcquiredSession, Precision, DEFAULT_GPU_PRECISION};
use crate::separator::{stem_channel, Separator, SeparatorError, SeparatorInfo, SeparatorRequest};
use crate::stream::SCHEDULING_MARGIN_MS;

/// A separator running a model of any family, streamed chunk by chunk.
pub struct ModelSeparator {
    core: ModelCore,
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

    /// [`ModelSeparator::load_with`] running GPU graphs at `precision` (see
    /// [`ModelCore::load`]). Not realtime-safe.
    pub fn load_at(
        path: &Path,
        device: DeviceChoice,
        look_ahead: LookAhead,
        precision: Precision,
    ) -> Result<Self, ModelError> {
        Ok(Self::new(
            ModelCore::load(path, device, precision)?,
            look_ahead,
        ))
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
        Ok(Self::new(
            ModelCore::load_exactly(path, graph, device)?,
            LookAhead::Full,
        ))
    }

    /// Streams `core` with `look_ahead`. Not realtime-safe: allocates, and with a shorter
    /// look-ahead times the model.
    fn new(mut core: ModelCore, look_ahead: LookAhead) -> Self {
        let mut layout = core.description().layout;
        let sample_rate_hz = core.description().sample_rate_hz;
        let num_outputs = core.description().stems.len();
        let (mut first_window, mut window) =
            core.description().pipeline.windows(layout.chunk_frames);
        let mut compute_factor = 1.0;
        let mut margin_frames = layout.hop_frames();
        let mut is_shortened = false;
        if let Some(target) = look_ahead.target_frames(sample_rate_hz) {
            // The stream adds its fixed scheduling margin to what the separator reports.
            let stream_margin =
                (SCHEDULING_MARGIN_MS / 1000.0 * f64::from(sample_rate_hz)).ceil() as usize;
            let target = target.saturating_sub(stream_margin);
            if let Some(schedule) = look_ahead_schedule(layout, &window, target) {
                compute_factor = layout.step_frames as f64 / schedule.layout.step_frames as f64;
                layout = schedule.layout;
                margin_frames = schedule.layout.step_frames;
                is_shortened = true;
                first_window.clone_from(&schedule.window);
                window = schedule.window;
                core.set_layout(layout);
            }
        }
        let overlap_add = OverlapAdd::new(layout, num_outputs);
        let info = core
            .separator_info(overlap_add.hop_frames(), overlap_add.latency_frames())
            .with_scheduling_margin_frames(margin_frames)
            .with_compute_factor(compute_factor);
        let mut separator = Self {
            overlap_add,
            first_window: (first_window != window).then(|| as_f32(&first_window)),
            window: as_f32(&window),
            core,
            info,
            model_runs: 0,
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
        let layout = self.core.description().layout;
        let silence = vec![0.0f32; layout.chunk_frames];
        let mut fastest_s = f64::INFINITY;
        for _ in 0..2 {
            let start = std::time::Instant::now();
            self.core
                .run_chunk([&silence, &silence], &mut |_| {})
                .ok()?;
            fastest_s = fastest_s.min(start.elapsed().as_secs_f64());
        }
        let runs_per_second =
            f64::from(self.core.description().sample_rate_hz) / layout.step_frames as f64;
        Some(fastest_s * runs_per_second)
    }

    /// The model's description.
    pub fn description(&self) -> &ModelDescription {
        self.core.description()
    }

    /// The session in use.
    pub fn session(&self) -> &AcquiredSession {
        self.core.session()
    }

    /// The graph file running now (the model's GPU graph or its CPU graph).
    pub fn graph_path(&self) -> &Path {
        self.core.graph_path()
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
            let result = self.core.run_chunk([left, right], &mut |outputs| {
                num_non_finite = outputs.iter().filter(|x| !x.is_finite()).count();
                if num_non_finite == 0 {
                    sums.add(outputs, window);
                }
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
        let stem_sources = self.core.description().stem_sources;
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
            SeparatorRequest::SetDevice(choice) => self.core.request_device(choice),
        }
    }

    fn poll_events(&mut self, events: &mut dyn FnMut(DeviceEvent)) {
        self.core.poll_events(events);
    }

    fn device(&self) -> Option<ActiveDevice> {
        Some(self.core.device())
    }

    fn model_runs(&self) -> u64 {
        self.model_runs
    }
}

/// A window computed in float64, as the overlap-add uses it.
fn as_f32(window: &[f64]) -> Vec<f32> {
    window.iter().map(|&w| w as f32).collect()
}
