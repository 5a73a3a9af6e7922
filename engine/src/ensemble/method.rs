//! [`EnsembleMethod`]: how an ensemble combines its members' stems — one of MSST's `ensemble.py`
//! algorithms or UVR's ensemble modes, and the members' weights.

use std::fmt;

/// The combination, per sample (`*_wave`) or per bin of a 2048-point STFT (`*_fft`, UVR's
/// `*_spec`), of the members' versions of one stem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EnsembleAlgorithm {
    /// MSST `avg_wave` (and UVR's *Average*): the weighted mean of the samples.
    AvgWave,
    /// MSST `median_wave`: the median of the samples (the mean of the middle two for an even
    /// number of members).
    MedianWave,
    /// MSST `min_wave`: the sample of smallest magnitude (the first member's on a tie).
    MinWave,
    /// MSST `max_wave`: the sample of largest magnitude (the first member's on a tie).
    MaxWave,
    /// MSST `avg_fft`: the weighted mean of the STFT bins.
    AvgFft,
    /// MSST `median_fft`: numpy's median of the complex bins (ordered by real part, then
    /// imaginary part; the mean of the middle two for an even number of members).
    MedianFft,
    /// MSST `min_fft`: the bin of smallest magnitude (the first member's on a tie).
    MinFft,
    /// MSST `max_fft`: the bin of largest magnitude (the first member's on a tie).
    MaxFft,
    /// UVR *Min Spec*: the bin of smallest magnitude (the last member's on a tie).
    MinSpec,
    /// UVR *Max Spec*: the bin of largest magnitude (the last member's on a tie).
    MaxSpec,
}

/// Which member wins when two bins or samples are as large (or as small).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TieBreak {
    /// The first one (numpy's `argmax`/`argmin`, MSST).
    First,
    /// The last one (UVR's `np.where(abs(b) >= abs(a), b, a)` folded over the members).
    Last,
}

/// What a per-element combination does, independent of where the elements come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The weighted mean.
    Mean,
    /// The median.
    Median,
    /// The element of smallest magnitude.
    Smallest(TieBreak),
    /// The element of largest magnitude.
    Largest(TieBreak),
}

impl EnsembleAlgorithm {
    /// Every algorithm, in the order `--help` lists them.
    pub const ALL: [EnsembleAlgorithm; 10] = [
        EnsembleAlgorithm::AvgWave,
        EnsembleAlgorithm::MedianWave,
        EnsembleAlgorithm::MinWave,
        EnsembleAlgorithm::MaxWave,
        EnsembleAlgorithm::AvgFft,
        EnsembleAlgorithm::MedianFft,
        EnsembleAlgorithm::MinFft,
        EnsembleAlgorithm::MaxFft,
        EnsembleAlgorithm::MinSpec,
        EnsembleAlgorithm::MaxSpec,
    ];

    /// The name MSST's `--type` (or, for UVR's modes, Stemflow) gives it: `avg_wave`, …,
    /// `max_spec`.
    pub const fn name(self) -> &'static str {
        match self {
            EnsembleAlgorithm::AvgWave => "avg_wave",
            EnsembleAlgorithm::MedianWave => "median_wave",
            EnsembleAlgorithm::MinWave => "min_wave",
            EnsembleAlgorithm::MaxWave => "max_wave",
            EnsembleAlgorithm::AvgFft => "avg_fft",
            EnsembleAlgorithm::MedianFft => "median_fft",
            EnsembleAlgorithm::MinFft => "min_fft",
            EnsembleAlgorithm::MaxFft => "max_fft",
            EnsembleAlgorithm::MinSpec => "min_spec",
            EnsembleAlgorithm::MaxSpec => "max_spec",
        }
    }

    /// Parses a name: MSST's (`max_fft`), Stemflow's for UVR's modes (`max_spec`, `min_spec`,
    /// `average` = `avg_wave`) or UVR's own spelling (`Max Spec`, `Average`); case, spaces and
    /// dashes do not matter.
    pub fn from_name(name: &str) -> Option<Self> {
        let key: String = name
            .trim()
            .chars()
            .map(|c| match c {
                ' ' | '-' => '_',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        if key == "average" {
            return Some(EnsembleAlgorithm::AvgWave);
        }
        Self::ALL.into_iter().find(|a| a.name() == key)
    }

    /// Whether it works on the STFT (MSST's `*_fft`, UVR's `*_spec`) rather than on samples.
    pub const fn is_spectral(self) -> bool {
        !matches!(
            self,
            EnsembleAlgorithm::AvgWave
                | EnsembleAlgorithm::MedianWave
                | EnsembleAlgorithm::MinWave
                | EnsembleAlgorithm::MaxWave
        )
    }

    /// Whether members' weights change the result (MSST uses them only for the averages and
    /// ignores them otherwise).
    pub const fn uses_weights(self) -> bool {
        matches!(self, EnsembleAlgorithm::AvgWave | EnsembleAlgorithm::AvgFft)
    }

    /// What it does to the members' elements (samples or bins).
    pub const fn reduction(self) -> Reduction {
        match self {
            EnsembleAlgorithm::AvgWave | EnsembleAlgorithm::AvgFft => Reduction::Mean,
            EnsembleAlgorithm::MedianWave | EnsembleAlgorithm::MedianFft => Reduction::Median,
            EnsembleAlgorithm::MinWave | EnsembleAlgorithm::MinFft => {
                Reduction::Smallest(TieBreak::First)
            }
            EnsembleAlgorithm::MaxWave | EnsembleAlgorithm::MaxFft => {
                Reduction::Largest(TieBreak::First)
            }
            EnsembleAlgorithm::MinSpec => Reduction::Smallest(TieBreak::Last),
            EnsembleAlgorithm::MaxSpec => Reduction::Largest(TieBreak::Last),
        }
    }
}

impl fmt::Display for EnsembleAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An algorithm and, for the averages, the members' weights.
#[derive(Debug, Clone, PartialEq)]
pub struct EnsembleMethod {
    algorithm: EnsembleAlgorithm,
    /// One per member, finite, ≥ 0, summing to more than 0; all 1 when none were given.
    weights: Vec<f64>,
}

impl EnsembleMethod {
    /// `algorithm` over `num_members` members with `weights` (`None`: all 1). Errors say what
    /// to fix: fewer than two members, weights for an algorithm that ignores them (MSST ignores
    /// them silently), a count that does not match, a negative, non-finite or all-zero weight.
    pub fn new(
        algorithm: EnsembleAlgorithm,
        num_members: usize,
        weights: Option<Vec<f64>>,
    ) -> Result<Self, String> {
        if num_members < 2 {
            return Err(format!(
                "an ensemble needs at least two separators, this one has {num_members}"
            ));
        }
        let weights = match weights {
            None => vec![1.0; num_members],
            Some(_) if !algorithm.uses_weights() => {
                return Err(format!(
                    "{algorithm} takes no weights (only avg_wave, avg_fft and average do; MSST ignores them for the others)"
                ))
            }
            Some(weights) if weights.len() != num_members => {
                return Err(format!(
                    "{} weights for {num_members} separators: give one per separator",
                    weights.len()
                ))
            }
            Some(weights) => {
                if let Some(bad) = weights.iter().find(|w| !w.is_finite() || **w < 0.0) {
                    return Err(format!(
                        "weight {bad} is not a finite number ≥ 0"
                    ));
                }
                if weights.iter().sum::<f64>() <= 0.0 {
                    return Err("the weights sum to 0: at least one must be above 0".into());
                }
                weights
            }
        };
        Ok(Self { algorithm, weights })
    }

    /// The algorithm.
    pub fn algorithm(&self) -> EnsembleAlgorithm {
        self.algorithm
    }

    /// The members' weights, in member order (all 1 unless given).
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Whether weights other than all-equal were given.
    pub fn is_weighted(&self) -> bool {
        self.weights.iter().any(|&w| w != self.weights[0])
    }
}

impl fmt::Display for EnsembleMethod {
    /// `max_fft`, or `avg_wave, weights 2, 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.algorithm)?;
        if self.is_weighted() {
            let weights: Vec<String> = self.weights.iter().map(|w| format!("{w}")).collect();
            write!(f, ", weights {}", weights.join(", "))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_msst_uvr_and_stemflow_spellings() {
        for algorithm in EnsembleAlgorithm::ALL {
            assert_eq!(
                EnsembleAlgorithm::from_name(algorithm.name()),
                Some(algorithm)
            );
        }
        assert_eq!(
            EnsembleAlgorithm::from_name("Max Spec"),
            Some(EnsembleAlgorithm::MaxSpec)
        );
        assert_eq!(
            EnsembleAlgorithm::from_name(" min-spec "),
            Some(EnsembleAlgorithm::MinSpec)
        );
        assert_eq!(
            EnsembleAlgorithm::from_name("Average"),
            Some(EnsembleAlgorithm::AvgWave)
        );
        assert_eq!(EnsembleAlgorithm::from_name("loudest"), None);
    }

    #[test]
    fn weights_are_checked_and_say_what_to_fix() {
        let method = EnsembleMethod::new(EnsembleAlgorithm::AvgWave, 2, Some(vec![2.0, 1.0]));
        assert_eq!(method.unwrap().to_string(), "avg_wave, weights 2, 1");
        let plain = EnsembleMethod::new(EnsembleAlgorithm::MaxFft, 3, None).unwrap();
        assert_eq!(plain.weights(), [1.0; 3]);
        assert_eq!(plain.to_string(), "max_fft");
        let cases: [(EnsembleAlgorithm, usize, Option<Vec<f64>>, &str); 5] = [
            (EnsembleAlgorithm::AvgWave, 1, None, "at least two"),
            (
                EnsembleAlgorithm::MaxFft,
                2,
                Some(vec![2.0, 1.0]),
                "takes no weights",
            ),
            (
                EnsembleAlgorithm::AvgFft,
                3,
                Some(vec![2.0, 1.0]),
                "2 weights for 3",
            ),
            (
                EnsembleAlgorithm::AvgFft,
                2,
                Some(vec![-1.0, 1.0]),
                "finite number",
            ),
            (
                EnsembleAlgorithm::AvgFft,
                2,
                Some(vec![0.0, 0.0]),
                "sum to 0",
            ),
        ];
        for (algorithm, members, weights, expected) in cases {
            let error = EnsembleMethod::new(algorithm, members, weights).unwrap_err();
            assert!(error.contains(expected), "{error}");
        }
    }
}
