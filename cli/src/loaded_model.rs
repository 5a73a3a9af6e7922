//! [`LoadedModel`]: a [`ModelSpec`] built — one model as a [`WholeFileSeparator`] (whole files
//! as its reference runs them, or the plugin's stream with `--mode stream`), or an ensemble's
//! members — and [`ModelStream`], one input separated by it block by block. An ensemble's
//! members always stream, as the plugin renders them, their stems combined at the file's rate
//! (as MSST's `ensemble.py` combines the members' files).

use stemflow_engine::ensemble::{EnsembleMethod, EnsembleOfflineStream};
use stemflow_engine::runtime::ActiveDevice;
use stemflow_engine::whole_file::{
    OtherStem, SeparationMode, WholeFileOptions, WholeFileSeparator, WholeFileStream,
};
use stemflow_engine::{
    EngineError, ExtraStems, LookAhead, ModelError, Separator, SeparatorInfo, Stem, StemFrames,
    StereoInput,
};

use crate::model_spec::ModelSpec;

/// Built separators, kept from input to input so models load once per run.
pub enum LoadedModel {
    /// One model (or route, or the built-in separator).
    One(WholeFileSeparator),
    /// An ensemble's members, in order, and how they combine.
    Ensemble {
        /// The members (empty after a member's worker died: load the ensemble again).
        members: Vec<Box<dyn Separator>>,
        /// Their combination.
        method: EnsembleMethod,
        /// The ensemble's label.
        label: String,
    },
}

impl LoadedModel {
    /// Builds `spec` with `options` (an ensemble's members stream, with the look-ahead of
    /// `--mode stream` or Full). Not realtime-safe: loads models.
    pub fn load(spec: &ModelSpec, options: &WholeFileOptions) -> Result<Self, ModelError> {
        match spec {
            ModelSpec::One(choice) => {
                Ok(LoadedModel::One(WholeFileSeparator::load(choice, options)?))
            }
            ModelSpec::Ensemble(spec) => {
                if options.other == OtherStem::Model {
                    return Err(ModelError::Params {
                        model: spec.label(),
                        message: "an ensemble's other stem is the residual: --other model \
                                  applies to one model"
                            .into(),
                    });
                }
                let look_ahead = match options.mode {
                    SeparationMode::Stream(look_ahead) => look_ahead,
                    SeparationMode::WholeFile => LookAhead::Full,
                };
                Ok(LoadedModel::Ensemble {
                    members: spec
                        .members
                        .iter()
                        .map(|member| member.build_with(options.device, look_ahead))
                        .collect::<Result<_, _>>()?,
                    method: spec.method.clone(),
                    label: spec.label(),
                })
            }
        }
    }

    /// What its separators are, in order.
    fn infos(&self) -> impl Iterator<Item = &SeparatorInfo> + Clone {
        let (one, members) = match self {
            LoadedModel::One(separator) => (Some(separator.info()), &[][..]),
            LoadedModel::Ensemble { members, .. } => (None, members.as_slice()),
        };
        one.into_iter().chain(members.iter().map(|m| m.info()))
    }

    /// Its name in messages: the separator's, or the ensemble's label.
    pub fn name(&self) -> String {
        match self {
            LoadedModel::One(separator) => separator.info().name().to_owned(),
            LoadedModel::Ensemble { label, .. } => label.clone(),
        }
    }

    /// How it separates a file, in messages.
    pub fn describe_mode(&self) -> &'static str {
        match self {
            LoadedModel::One(separator) if separator.is_whole_file() => {
                "whole files, as its reference runs them"
            }
            LoadedModel::One(_) => "streamed, as the plugin renders",
            LoadedModel::Ensemble { .. } => {
                "members streamed as the plugin renders, combined per file"
            }
        }
    }

    /// Whether it delivers `stem` (an ensemble: whether a member does).
    pub fn delivers_stem(&self, stem: Stem) -> bool {
        self.infos().any(|info| info.delivers_stem(stem))
    }

    /// The device running its models (an ensemble's first member's that has one).
    pub fn device(&self) -> Option<ActiveDevice> {
        match self {
            LoadedModel::One(separator) => separator.device(),
            LoadedModel::Ensemble { members, .. } => members.iter().find_map(|s| s.device()),
        }
    }

    /// Whether one of its models is float16.
    pub fn is_float16(&self) -> bool {
        self.infos().any(SeparatorInfo::is_float16)
    }

    /// How many times as often as at Full look-ahead its costliest model runs.
    pub fn compute_factor(&self) -> f64 {
        self.infos()
            .map(SeparatorInfo::compute_factor)
            .fold(1.0, f64::max)
    }

    /// Seconds of model time per second of audio, measured (summed over an ensemble's members).
    pub fn predicted_real_time_factor(&self) -> Option<f64> {
        self.infos()
            .filter_map(SeparatorInfo::predicted_real_time_factor)
            .reduce(|a, b| a + b)
    }

    /// Whether it can separate another input: not an ensemble whose member's worker died (load
    /// it again). A single model rebuilds its own stream separator.
    pub fn is_usable(&self) -> bool {
        !matches!(self, LoadedModel::Ensemble { members, .. } if members.is_empty())
    }

    /// Starts separating an input at `sample_rate_hz`, six-stem models' guitar and piano put
    /// as `extra_stems` says. Not realtime-safe: spawns workers.
    pub fn open(
        &mut self,
        sample_rate_hz: u32,
        extra_stems: ExtraStems,
    ) -> Result<ModelStream<'_>, EngineError> {
        Ok(match self {
            LoadedModel::One(separator) => {
                separator.set_extra_stems(extra_stems);
                ModelStream::One(separator.stream(sample_rate_hz)?)
            }
            LoadedModel::Ensemble {
                members, method, ..
            } => {
                let mut stream = EnsembleOfflineStream::new(
                    std::mem::take(members),
                    method.clone(),
                    sample_rate_hz,
                )?;
                stream.set_extra_stems(extra_stems);
                ModelStream::Ensemble(EnsembleRun {
                    stream: Some(Box::new(stream)),
                    members,
                })
            }
        })
    }
}

/// One input being separated by a [`LoadedModel`]. Dropping it before
/// [`ModelStream::finish`] abandons the input; the model serves the next one.
pub enum ModelStream<'a> {
    /// One model, a whole file or the plugin's stream.
    One(WholeFileStream<'a>),
    /// An ensemble.
    Ensemble(EnsembleRun<'a>),
}

/// An ensemble's stream, which gives the members back to their [`LoadedModel`] when it ends.
pub struct EnsembleRun<'a> {
    stream: Option<Box<EnsembleOfflineStream>>,
    members: &'a mut Vec<Box<dyn Separator>>,
}

impl EnsembleRun<'_> {
    fn stream(&self) -> &EnsembleOfflineStream {
        self.stream.as_ref().expect("the stream runs until dropped")
    }
}

impl Drop for EnsembleRun<'_> {
    fn drop(&mut self) {
        if let Some(stream) = self.stream.take() {
            *self.members = (*stream).into_separators().unwrap_or_default();
        }
    }
}

impl ModelStream<'_> {
    /// The latency the stream removes (0 for a whole file; an ensemble: its slowest member's).
    pub fn latency_samples(&self) -> usize {
        match self {
            ModelStream::One(stream) => stream.latency_samples(),
            ModelStream::Ensemble(run) => run.stream().latency_samples(),
        }
    }

    /// Input samples that were NaN or infinite (treated as silence).
    pub fn non_finite_input_samples(&self) -> u64 {
        match self {
            ModelStream::One(stream) => stream.non_finite_input_samples(),
            ModelStream::Ensemble(run) => run.stream().non_finite_input_samples(),
        }
    }

    /// Separates the next frames; `sink` gets the stems that became ready.
    pub fn push<E: From<EngineError>>(
        &mut self,
        input: StereoInput<'_>,
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            ModelStream::One(stream) => stream.push(input, sink),
            ModelStream::Ensemble(run) => run
                .stream
                .as_mut()
                .expect("the stream runs until dropped")
                .push(input, sink),
        }
    }

    /// Ends the input; `sink` gets the rest of the stems.
    pub fn finish<E: From<EngineError>>(
        self,
        sink: impl FnMut(StemFrames<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        match self {
            ModelStream::One(stream) => stream.finish(sink),
            ModelStream::Ensemble(mut run) => run
                .stream
                .as_mut()
                .expect("the stream runs until dropped")
                .finish(sink),
        }
    }
}
