//! [`EnsembleSpec`]: which separators an ensemble runs and how it combines them — what a route
//! file's ensemble stage or `stemflow separate --model a+b --ensemble max_fft` says. The
//! engine's `opening` module builds it into an [`super::EnsembleSeparator`].

use super::method::EnsembleMethod;
use crate::choice::SeparatorChoice;

/// An ensemble's members and method.
#[derive(Debug, Clone, PartialEq)]
pub struct EnsembleSpec {
    /// The separators, in order (the weights follow it).
    pub members: Vec<SeparatorChoice>,
    /// How their stems combine; one weight per member.
    pub method: EnsembleMethod,
}

impl EnsembleSpec {
    /// An ensemble of `members` by `method`. Not realtime-safe: allocates.
    ///
    /// # Panics
    /// If `method` does not have one weight per member.
    pub fn new(members: Vec<SeparatorChoice>, method: EnsembleMethod) -> Self {
        assert_eq!(
            members.len(),
            method.weights().len(),
            "one weight per member"
        );
        Self { members, method }
    }

    /// `htdemucs + bs_roformer_viperx_1297 (max_fft)`: the members' labels and the method.
    pub fn label(&self) -> String {
        let members: Vec<String> = self.members.iter().map(SeparatorChoice::label).collect();
        format!("{} ({})", members.join(" + "), self.method)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ensemble::EnsembleAlgorithm;

    #[test]
    fn the_label_names_members_and_method() {
        let spec = EnsembleSpec::new(
            vec![
                SeparatorChoice::Builtin,
                SeparatorChoice::Model("/m/htdemucs.onnx".into()),
            ],
            EnsembleMethod::new(EnsembleAlgorithm::AvgFft, 2, Some(vec![1.0, 3.0])).unwrap(),
        );
        assert_eq!(spec.label(), "builtin + htdemucs (avg_fft, weights 1, 3)");
    }
}
