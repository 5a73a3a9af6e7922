//! Opening a separator: [`SeparatorChoice::build`] turns a choice into a running
//! [`Separator`] (the built-in, a model, or a route's chain of them), [`EnsembleSpec::build_with`]
//! an ensemble. It sits above the choice, the families, the routes and the ensembles, so none of
//! them needs another to be built.

use crate::builtin::BuiltinSeparator;
use crate::choice::{models_dirs, SeparatorChoice};
use crate::ensemble::{EnsembleSeparator, EnsembleSpec};
use crate::families::ModelSeparator;
use crate::hybrid::{is_route_file, RouteFile, RoutedSeparator, StageSeparator};
use crate::look_ahead::LookAhead;
use crate::model_error::ModelError;
use crate::model_spec::ModelSpec;
use crate::runtime::devices::DeviceChoice;
use crate::separator::Separator;
use crate::stem::Stem;

impl SeparatorChoice {
    /// Builds the separator on the chosen device (models only) with the reference look-ahead.
    /// A model that cannot be loaded is an error that says why. Not realtime-safe: allocates,
    /// may load a model.
    pub fn build(&self, device: DeviceChoice) -> Result<Box<dyn Separator>, ModelError> {
        self.build_with(device, LookAhead::Full)
    }

    /// [`SeparatorChoice::build`] with a chosen look-ahead for neural models (the built-in
    /// separator's latency is fixed and short). Not realtime-safe.
    pub fn build_with(
        &self,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Result<Box<dyn Separator>, ModelError> {
        match self {
            SeparatorChoice::Builtin => Ok(Box::new(BuiltinSeparator::new())),
            #[cfg(feature = "fault-injection")]
            SeparatorChoice::Model(path)
                if path
                    .extension()
                    .is_some_and(|e| e == crate::fault::FAULT_PLAN_EXTENSION) =>
            {
                Ok(Box::new(crate::fault::FaultSeparator::from_file(path)?))
            }
            SeparatorChoice::Model(path) if is_route_file(path) => {
                let route = RouteFile::read(path, &models_dirs(&[]))?;
                Ok(Box::new(build_route(&route, device, look_ahead)?))
            }
            SeparatorChoice::Model(path) => Ok(Box::new(ModelSeparator::load_with(
                path, device, look_ahead,
            )?)),
        }
    }
}

/// Loads every stage's separator of `route` on `device` with `look_ahead` and chains them.
/// Not realtime-safe: loads models.
pub fn build_route(
    route: &RouteFile,
    device: DeviceChoice,
    look_ahead: LookAhead,
) -> Result<RoutedSeparator, ModelError> {
    let mut stages: Vec<(Box<dyn Separator>, Vec<Stem>)> = Vec::new();
    for stage in &route.stages {
        let separator: Box<dyn Separator> = match &stage.separator {
            StageSeparator::One(choice) => choice.build_with(device, look_ahead)?,
            StageSeparator::Ensemble(spec) => Box::new(spec.build_with(device, look_ahead)?),
        };
        stages.push((separator, stage.stems.clone()));
    }
    RoutedSeparator::new(route.name.clone(), stages).map_err(|message| ModelError::Params {
        model: route.name.clone(),
        message,
    })
}

impl ModelSpec {
    /// Builds the separator (an ensemble's members combined) on `device` with `look_ahead`,
    /// as the plugin runs it. Not realtime-safe: loads models.
    pub fn build_with(
        &self,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Result<Box<dyn Separator>, ModelError> {
        let ensemble = match self {
            ModelSpec::One(choice) => return choice.build_with(device, look_ahead),
            ModelSpec::Ensemble(spec) => spec.build_with(device, look_ahead)?,
        };
        Ok(Box::new(ensemble))
    }
}

impl EnsembleSpec {
    /// Loads every member on `device` with `look_ahead` and combines them. Not realtime-safe:
    /// loads models.
    pub fn build_with(
        &self,
        device: DeviceChoice,
        look_ahead: LookAhead,
    ) -> Result<EnsembleSeparator, ModelError> {
        let members = self
            .members
            .iter()
            .map(|member| member.build_with(device, look_ahead))
            .collect::<Result<Vec<_>, _>>()?;
        EnsembleSeparator::new(self.label(), self.method.clone(), members).map_err(|message| {
            ModelError::Params {
                model: self.label(),
                message,
            }
        })
    }
}
