//! What `--model` names — one separator (`builtin`, a model file or name, a route) or, with
//! `a+b` and `--ensemble`, an ensemble of several ([`EnsembleArgs`]) — resolved into the
//! engine's [`ModelSpec`].

use std::path::PathBuf;

use clap::Args;
use stemflow_engine::ensemble::{EnsembleAlgorithm, EnsembleMethod, EnsembleSpec};
pub use stemflow_engine::ModelSpec;
use stemflow_engine::SeparatorChoice;

use crate::error::CliError;

/// How several models' stems combine (with `--model a+b`).
#[derive(Args, Clone, Default)]
pub struct EnsembleArgs {
    /// Combine the stems of `--model a+b+…` stem by stem: avg_wave (the default), median_wave,
    /// min_wave, max_wave, avg_fft, median_fft, min_fft, max_fft (MSST's ensemble.py), max_spec,
    /// min_spec, average (UVR's ensemble modes).
    #[arg(long, value_name = "ALGORITHM")]
    pub ensemble: Option<String>,
    /// The models' weights for avg_wave, avg_fft and average, in `--model` order (e.g. 2,1).
    #[arg(long, value_name = "W,...", value_delimiter = ',')]
    pub weights: Option<Vec<f64>>,
}

/// Resolves `model` in `models_dirs`: a separator, or `a+b+…` (a name that is not a file of
/// its own) as an ensemble by `ensemble`'s algorithm and weights. An unknown model is
/// [`CliError::Failed`]; an algorithm, weights or `--ensemble` that do not fit is
/// [`CliError::Usage`].
pub fn resolve(
    model: &str,
    ensemble: &EnsembleArgs,
    models_dirs: &[PathBuf],
) -> Result<ModelSpec, CliError> {
    let whole = SeparatorChoice::resolve(model, models_dirs);
    let parts: Vec<&str> = model.split('+').map(str::trim).collect();
    if parts.len() == 1 || whole.is_ok() {
        if ensemble.ensemble.is_some() || ensemble.weights.is_some() {
            return Err(CliError::Usage(format!(
                "--ensemble and --weights combine several models: name them as --model {model}+OTHER"
            )));
        }
        return whole
            .map(ModelSpec::One)
            .map_err(|e| CliError::Failed(e.to_string()));
    }
    let members = parts
        .iter()
        .map(|part| {
            SeparatorChoice::resolve(part, models_dirs).map_err(|e| CliError::Failed(e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let algorithm = match &ensemble.ensemble {
        None => EnsembleAlgorithm::AvgWave,
        Some(name) => EnsembleAlgorithm::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = EnsembleAlgorithm::ALL.iter().map(|a| a.name()).collect();
            CliError::Usage(format!(
                "unknown --ensemble `{name}`: use {} or average",
                names.join(", ")
            ))
        })?,
    };
    let method = EnsembleMethod::new(algorithm, members.len(), ensemble.weights.clone())
        .map_err(CliError::Usage)?;
    Ok(ModelSpec::Ensemble(EnsembleSpec::new(members, method)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("stemflow-spec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for model in ["alpha.onnx", "beta.onnx", "a+b.onnx"] {
            std::fs::write(dir.join(model), b"x").unwrap();
        }
        dir
    }

    fn args(ensemble: Option<&str>, weights: Option<Vec<f64>>) -> EnsembleArgs {
        EnsembleArgs {
            ensemble: ensemble.map(str::to_owned),
            weights,
        }
    }

    #[test]
    fn plus_makes_an_ensemble_unless_a_model_has_that_name() {
        let dir = folder("plus");
        let dirs = [dir.clone()];
        let spec = resolve("alpha + beta", &args(Some("Max Spec"), None), &dirs);
        let ModelSpec::Ensemble(spec) = spec.unwrap() else {
            panic!("not an ensemble")
        };
        assert_eq!(spec.label(), "alpha + beta (max_spec)");
        let default = resolve("alpha+beta+builtin", &args(None, None), &dirs).unwrap();
        assert_eq!(default.label(), "alpha + beta + builtin (avg_wave)");
        assert_eq!(
            resolve("a+b", &args(None, None), &dirs).unwrap(),
            ModelSpec::One(SeparatorChoice::Model(dir.join("a+b.onnx")))
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mistakes_are_usage_errors_that_say_what_to_fix() {
        let dir = folder("mistakes");
        let dirs = [dir.clone()];
        let usage = |model: &str, ensemble: EnsembleArgs| match resolve(model, &ensemble, &dirs) {
            Err(CliError::Usage(message)) => message,
            other => panic!("{model}: {other:?}"),
        };
        assert!(usage("alpha", args(Some("max_fft"), None)).contains("--model alpha+OTHER"));
        assert!(usage("alpha+beta", args(Some("loud"), None)).contains("unknown --ensemble `loud`"));
        assert!(
            usage("alpha+beta", args(Some("max_fft"), Some(vec![2.0, 1.0])))
                .contains("takes no weights")
        );
        assert!(usage("alpha+beta", args(None, Some(vec![1.0]))).contains("1 weights for 2"));
        match resolve("alpha+gamma", &args(None, None), &dirs) {
            Err(CliError::Failed(message)) => assert!(message.contains("gamma"), "{message}"),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
