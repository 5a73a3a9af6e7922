//! [`WholeFileSeparator`]: a [`ModelSpec`] (one separator, a route, an ensemble) loaded once
//! to separate whole files, one after the other, with the reference's edges or the stream's
//! ([`SeparationMode`]).

use crate::builtin::BuiltinSeparator;
use crate::choice::{models_dirs, SeparatorChoice};
use crate::ensemble::EnsembleSpec;
use crate::error::EngineError;
use crate::families::ModelCore;
use crate::hybrid::{combined_file_info, is_route_file, RouteFile, StageSeparator};
use crate::look_ahead::LookAhead;
use crate::model_error::ModelError;
use crate::model_spec::ModelSpec;
use crate::runtime::devices::ActiveDevice;
use crate::runtime::session::DEFAULT_GPU_PRECISION;
use crate::separator::{Separator, SeparatorInfo};
use crate::stem::{ExtraStems, Stem};

use super::ensemble_run::EnsembleRun;
use super::file_run::FileRun;
use super::hop_run::HopRun;
use super::model_run::ModelRun;
use super::options::{OtherStem, SeparationMode, WholeFileOptions};
use super::route_run::RouteRun;

/// What runs the files.
pub(super) enum Loaded {
    /// The stream, as the plugin renders offline: the separator between files (`None` while a
    /// file streams, or after its worker died: built again for the next file).
    Stream(Option<Box<dyn Separator>>),
    /// The reference's whole-file edges.
    WholeFile(Box<dyn FileRun>),
    /// An ensemble: each member as it separates a file alone, combined at the file's rate.
    Ensemble(EnsembleMembers),
}

/// An ensemble's members, between files (empty while a file holds them).
pub(super) struct EnsembleMembers {
    pub(super) members: Vec<WholeFileSeparator>,
    pub(super) method: crate::ensemble::EnsembleMethod,
    pub(super) label: String,
}

/// A separator for whole files: load it once, then separate file after file with the models
/// kept loaded (`WholeFileSeparator::stream` and `WholeFileSeparator::separate`, in
/// `stream.rs`). Every caller that separates files — `stemflow separate`, `eval`, `bench` —
/// goes through it. Not realtime-safe: everything here loads models or runs them.
pub struct WholeFileSeparator {
    pub(super) spec: ModelSpec,
    pub(super) options: WholeFileOptions,
    pub(super) loaded: Loaded,
    info: SeparatorInfo,
}

impl WholeFileSeparator {
    /// Loads `spec` (the built-in, a model, a route, an ensemble) on `options.device`. The
    /// built-in separator has no whole-file reference: it runs as the stream in either mode.
    /// An ensemble's members each run as a whole file of their own. A model's own `Other`
    /// exists only with the whole-file edges and for one separator: asking for it in the
    /// stream mode or of an ensemble is an error.
    pub fn load(spec: &ModelSpec, options: &WholeFileOptions) -> Result<Self, ModelError> {
        if options.other == OtherStem::Model {
            let refusal = match (options.mode, spec) {
                (SeparationMode::Stream(_), _) => Some(
                    "the model's own other stem is computed only for whole files (the \
                     stream's Other is always the residual)",
                ),
                (_, ModelSpec::Ensemble(_)) => Some(
                    "an ensemble's other stem is the residual: --other model applies to one \
                     model",
                ),
                _ => None,
            };
            if let Some(message) = refusal {
                return Err(ModelError::Params {
                    model: spec.display_name(),
                    message: message.into(),
                });
            }
        }
        let loaded = match (options.mode, spec) {
            (SeparationMode::Stream(look_ahead), _) => {
                Loaded::Stream(Some(spec.build_with(options.device, look_ahead)?))
            }
            (SeparationMode::WholeFile, ModelSpec::One(SeparatorChoice::Builtin)) => {
                Loaded::Stream(Some(spec.build_with(options.device, LookAhead::Full)?))
            }
            (SeparationMode::WholeFile, ModelSpec::One(choice)) => {
                Loaded::WholeFile(build_run(choice, options)?)
            }
            (SeparationMode::WholeFile, ModelSpec::Ensemble(ensemble)) => {
                Loaded::Ensemble(load_members(ensemble, options)?)
            }
        };
        let info = match &loaded {
            Loaded::Stream(Some(separator)) => separator.info().clone(),
            Loaded::Stream(None) => unreachable!("a stream separator was just built"),
            Loaded::WholeFile(run) => run.info().clone(),
            Loaded::Ensemble(ensemble) => {
                let infos = ensemble.members.iter().map(WholeFileSeparator::info);
                let delivered: Vec<Stem> = Stem::ALL
                    .into_iter()
                    .filter(|&stem| {
                        stem != Stem::Other && infos.clone().any(|i| i.delivers_stem(stem))
                    })
                    .collect();
                combined_file_info(ensemble.label.clone(), infos, delivered).map_err(|message| {
                    ModelError::Params {
                        model: ensemble.label.clone(),
                        message,
                    }
                })?
            }
        };
        Ok(Self {
            spec: spec.clone(),
            options: *options,
            loaded,
            info,
        })
    }

    /// What it is: name, the model's rate, the stems it delivers, its costs (an ensemble's
    /// and a route's summed over their separators).
    pub fn info(&self) -> &SeparatorInfo {
        &self.info
    }

    /// Its name in messages: the separator's, or the ensemble's label.
    pub fn name(&self) -> &str {
        self.info.name()
    }

    /// Whether it delivers `stem` (an ensemble: whether a member does).
    pub fn delivers_stem(&self, stem: Stem) -> bool {
        self.info.delivers_stem(stem)
    }

    /// How it separates a file, in messages.
    pub fn describe_mode(&self) -> &'static str {
        match &self.loaded {
            Loaded::Ensemble(_) => "each member as it separates the file alone, combined per file",
            Loaded::WholeFile(_) => "whole files, as its reference runs them",
            Loaded::Stream(_) => "streamed, as the plugin renders",
        }
    }

    /// How it separates.
    pub fn options(&self) -> &WholeFileOptions {
        &self.options
    }

    /// Puts six-stem models' guitar and piano as `extra_stems` says from the next file on.
    pub fn set_extra_stems(&mut self, extra_stems: ExtraStems) {
        self.options.extra_stems = extra_stems;
    }

    /// Whether files run with the reference's edges (false: the stream's, as for the
    /// built-in separator).
    pub fn is_whole_file(&self) -> bool {
        !matches!(self.loaded, Loaded::Stream(_))
    }

    /// Whether `Other` is a model's own output ([`OtherStem::Model`] and a model that has one).
    pub fn has_model_other(&self) -> bool {
        match &self.loaded {
            Loaded::WholeFile(run) => run.has_model_other(),
            Loaded::Stream(_) | Loaded::Ensemble(_) => false,
        }
    }

    /// The device the model runs on (`None` for DSP, or while a file holds the stream's
    /// separator or an ensemble's members).
    pub fn device(&self) -> Option<ActiveDevice> {
        match &self.loaded {
            Loaded::Stream(separator) => separator.as_ref().and_then(|s| s.device()),
            Loaded::WholeFile(run) => run.device(),
            Loaded::Ensemble(ensemble) => ensemble.members.iter().find_map(|m| m.device()),
        }
    }

    /// Chunks its models ran since it was loaded (as far as a file does not hold them).
    pub fn model_runs(&self) -> u64 {
        match &self.loaded {
            Loaded::Stream(separator) => separator.as_ref().map_or(0, |s| s.model_runs()),
            Loaded::WholeFile(run) => run.model_runs(),
            Loaded::Ensemble(ensemble) => ensemble.members.iter().map(|m| m.model_runs()).sum(),
        }
    }

    /// The stream mode's separator for the next file, built again if the last one's worker
    /// died.
    pub(super) fn take_stream_separator(&mut self) -> Result<Box<dyn Separator>, EngineError> {
        let look_ahead = match self.options.mode {
            SeparationMode::Stream(look_ahead) => look_ahead,
            SeparationMode::WholeFile => LookAhead::Full,
        };
        match &mut self.loaded {
            Loaded::Stream(slot) => match slot.take() {
                Some(separator) => Ok(separator),
                None => self
                    .spec
                    .build_with(self.options.device, look_ahead)
                    .map_err(EngineError::Model),
            },
            Loaded::WholeFile(_) | Loaded::Ensemble(_) => {
                unreachable!("only the stream mode streams")
            }
        }
    }
}

/// The whole-file run of `choice`: a model with its family's edges, a route of such runs, or
/// a DSP separator hop by hop.
fn build_run(
    choice: &SeparatorChoice,
    options: &WholeFileOptions,
) -> Result<Box<dyn FileRun>, ModelError> {
    match choice {
        SeparatorChoice::Model(path) if is_route_file(path) => {
            let route = RouteFile::read(path, &models_dirs(&[]))?;
            let mut stages = Vec::new();
            for stage in &route.stages {
                let run = match &stage.separator {
                    StageSeparator::One(choice) => build_run(choice, options)?,
                    StageSeparator::Ensemble(spec) => build_ensemble_run(spec, options)?,
                };
                stages.push((run, stage.stems.clone()));
            }
            let run = RouteRun::new(&route.name, stages).map_err(|message| ModelError::Params {
                model: route.name.clone(),
                message,
            })?;
            Ok(Box::new(run))
        }
        SeparatorChoice::Model(path) if !is_fault_plan(path) => {
            let core = ModelCore::load(path, options.device, DEFAULT_GPU_PRECISION)?;
            Ok(Box::new(ModelRun::new(core, options)))
        }
        SeparatorChoice::Builtin => Ok(Box::new(HopRun::new(Box::new(BuiltinSeparator::new())))),
        SeparatorChoice::Model(_) => Ok(Box::new(HopRun::new(
            choice.build_with(options.device, LookAhead::Full)?,
        ))),
    }
}

/// An ensemble's members, each loaded as it would be alone (its `Other` the residual).
fn load_members(
    spec: &EnsembleSpec,
    options: &WholeFileOptions,
) -> Result<EnsembleMembers, ModelError> {
    let member_options = WholeFileOptions {
        other: OtherStem::Residual,
        ..*options
    };
    Ok(EnsembleMembers {
        members: spec
            .members
            .iter()
            .map(|member| {
                WholeFileSeparator::load(&ModelSpec::One(member.clone()), &member_options)
            })
            .collect::<Result<_, _>>()?,
        method: spec.method.clone(),
        label: spec.label(),
    })
}

/// The whole-file run of a route's ensemble stage: each member's own whole-file run (its `Other` the
/// residual), their stems combined to the file's last sample.
fn build_ensemble_run(
    spec: &EnsembleSpec,
    options: &WholeFileOptions,
) -> Result<Box<dyn FileRun>, ModelError> {
    let member_options = WholeFileOptions {
        other: OtherStem::Residual,
        ..*options
    };
    let members = spec
        .members
        .iter()
        .map(|member| build_run(member, &member_options))
        .collect::<Result<Vec<_>, _>>()?;
    let run = EnsembleRun::new(spec.label(), &spec.method, members).map_err(|message| {
        ModelError::Params {
            model: spec.label(),
            message,
        }
    })?;
    Ok(Box::new(run))
}

/// Whether `path` is a fault plan (test builds only), which runs as a DSP separator.
fn is_fault_plan(path: &std::path::Path) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        path.extension()
            .is_some_and(|e| e == crate::fault::FAULT_PLAN_EXTENSION)
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = path;
        false
    }
}
