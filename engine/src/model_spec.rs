//! [`ModelSpec`]: what separates — one separator (the built-in, a model, a route of them) or an
//! ensemble of several, their stems combined — as `--model` names it, and what every whole-file
//! caller ([`crate::whole_file::WholeFileSeparator`]) loads.

use crate::choice::SeparatorChoice;
use crate::ensemble::EnsembleSpec;

/// One separator or an ensemble of several.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSpec {
    /// One separator (a route is one too).
    One(SeparatorChoice),
    /// Several, their stems combined.
    Ensemble(EnsembleSpec),
}

impl ModelSpec {
    /// What tables and messages call it: the separator's label, or the ensemble's
    /// (`a + b (max_fft)`).
    pub fn label(&self) -> String {
        match self {
            ModelSpec::One(choice) => choice.label(),
            ModelSpec::Ensemble(spec) => spec.label(),
        }
    }

    /// The name users see: the separator's display name, or the ensemble's label.
    pub fn display_name(&self) -> String {
        match self {
            ModelSpec::One(choice) => choice.display_name(),
            ModelSpec::Ensemble(spec) => spec.label(),
        }
    }
}

impl From<SeparatorChoice> for ModelSpec {
    fn from(choice: SeparatorChoice) -> Self {
        ModelSpec::One(choice)
    }
}
