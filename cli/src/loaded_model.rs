//! [`LoadedModel`]: a [`ModelSpec`] built — one separator, or an ensemble's members — and
//! [`ModelStream`], one input separated by it block by block: through the plugin's offline path
//! for one separator, through every member's and combined at the file's rate for an ensemble
//! (as MSST's `ensemble.py` combines the members' files).

use stemflow_engine::ensemble::{EnsembleMethod, EnsembleOfflineStream};
use stemflow_engine::look_ahead::LookAhead;
use stemflow_engine::offline::{OfflineStream, StemFrames};
use stemflow_engine::runtime::devices::{ActiveDevice, DeviceChoice};
use stemflow_engine::separator::Separator;
use stemflow_engine::{EngineError, ExtraStems, ModelError, Stem};

use crate::model_spec::ModelSpec;

/// Built separators, kept from input to input so models load once per run.
pub enum LoadedModel {
    /// One separator.
    One(Box<dyn Separator>),
    /// An ensemble's members, in order, and how they combine.
    Ensemble {
        /// The members.
        members: Vec<Box<dyn Separator>>,
        /// Their combination.
        method: EnsembleMethod,
        /// The ensemble's label.
        label: String,
    },
}

impl LoadedModel {
    /// Builds `spec` on `device` with `look_ahead`. Not realtime-safe: loads models.
    pub fn load(
        spec: &ModelSpec,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Result<Self, ModelError> {
        match spec {
            ModelSpec::One(choice) => Ok(LoadedModel::One(choice.build_with(device, look_ahead)?)),
            ModelSpec::Ensemble(spec) => Ok(LoadedModel::Ensemble {
                members: spec
                    .members
                    .iter()
                    .map(|member| member.build_with(device, look_ahead))
                    .collect::<Result<_, _>>()?,
                method: spec.method.clone(),
                label: spec.label(),
            }),
        }
    }

    /// The separators, in order.
    pub fn separators(&self) -> impl Iterator<Item = &dyn Separator> + Clone {
        let slice: &[Box<dyn Separator>] = match self {
            LoadedModel::One(separator) => std::slice::from_ref(separator),
            LoadedModel::Ensemble { members, .. } => members,
        };
        slice.iter().map(|s| s.as_ref())
    }

    /// Its name in messages: the separator's, or the ensemble's label.
    pub fn name(&self) -> String {
        match self {
            LoadedModel::One(separator) => separator.info().name().to_owned(),
            LoadedModel::Ensemble { label, .. } => label.clone(),
        }
    }

    /// Whether it delivers `stem` (an ensemble: whether a member does).
    pub fn delivers_stem(&self, stem: Stem) -> bool {
        self.separators().any(|s| s.info().delivers_stem(stem))
    }

    /// The device running its models (an ensemble's first member's that has one).
    pub fn device(&self) -> Option<ActiveDevice> {
        self.separators().find_map(|s| s.device())
    }

    /// Whether one of its models is float16.
    pub fn is_float16(&self) -> bool {
        self.separators().any(|s| s.info().is_float16())
    }

    /// How many times as often as at Full look-ahead its costliest model runs.
    pub fn compute_factor(&self) -> f64 {
        self.separators()
            .map(|s| s.info().compute_factor())
            .fold(1.0, f64::max)
    }

    /// Seconds of model time per second of audio, measured (summed over an ensemble's members).
    pub fn predicted_real_time_factor(&self) -> Option<f64> {
        self.separators()
            .filter_map(|s| s.info().predicted_real_time_factor())
            .reduce(|a, b| a + b)
    }

    /// Starts separating an input at `sample_rate_hz`. Not realtime-safe: spawns workers.
    pub fn open(self, sample_rate_hz: u32) -> Result<ModelStream, EngineError> {
        Ok(match self {
            LoadedModel::One(separator) => {
                ModelStream::One(OfflineStream::new(separator, sample_rate_hz)?)
            }
            LoadedModel::Ensemble {
                members,
                method,
                label,
            } => ModelStream::Ensemble(
                EnsembleOfflineStream::new(members, method, sample_rate_hz)?,
                label,
            ),
        })
    }
}

/// One input being separated by a [`LoadedModel`].
pub enum ModelStream {
    /// One separator, the plugin's offline path.
    One(OfflineStream),
    /// An ensemble, and its label.
    Ensemble(EnsembleOfflineStream, String),
}

impl ModelStream {
    /// The latency the stream removes (an ensemble: its slowest member's).
    pub fn latency_samples(&self) -> usize {
        match self {
            ModelStream::One(stream) => stream.latency_samples(),
            ModelStream::Ensemble(stream, _) => stream.latency_samples(),
        }
    }

    /// Where six-stem models' guitar and piano go.
    pub fn set_extra_stems(&mut self, extra_stems: ExtraStems) {
        match self {
            ModelStream::One(stream) => stream.set_extra_stems(extra_stems),
            ModelStream::Ensemble(stream, _) => stream.set_extra_stems(extra_stems),
        }
    }

    /// Input samples that were NaN or infinite (treated as silence).
    pub fn non_finite_input_samples(&self) -> u64 {
        match self {
            ModelStream::One(stream) => stream.stats().non_finite_input_samples(),
            ModelStream::Ensemble(stream, _) => stream.non_finite_input_samples(),
        }
    }

    /// Separates the next frames; `sink` gets the stems that became ready.
    pub fn push<E: From<EngineError>>(
        &mut self,
        left: &[f32],
        right: &[f32],
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            ModelStream::One(stream) => stream.push(left, right, sink),
            ModelStream::Ensemble(stream, _) => stream.push(left, right, sink),
        }
    }

    /// Ends the input; `sink` gets the rest of the stems.
    pub fn finish<E: From<EngineError>>(
        &mut self,
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            ModelStream::One(stream) => stream.finish(sink),
            ModelStream::Ensemble(stream, _) => stream.finish(sink),
        }
    }

    /// The separators back, reset, for the next input; `None` when a worker died.
    pub fn into_model(self) -> Option<LoadedModel> {
        match self {
            ModelStream::One(stream) => stream.into_separator().map(LoadedModel::One),
            ModelStream::Ensemble(stream, label) => {
                let method = stream.method().clone();
                stream
                    .into_separators()
                    .map(|members| LoadedModel::Ensemble {
                        members,
                        method,
                        label,
                    })
            }
        }
    }
}
