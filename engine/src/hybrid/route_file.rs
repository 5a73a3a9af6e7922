//! [`RouteFile`]: a `*.stemflow-route` file, which says which separator serves which stems.
//!
//! ```json
//! {
//!   "name": "Spleeter vocals + built-in",
//!   "stages": [
//!     {"separator": "spleeter-2stems", "stems": ["vocals"]},
//!     {"separator": "builtin"}
//!   ]
//! }
//! ```
//!
//! Stages run in order, each on what the earlier ones left. `separator` is `builtin`, the name of
//! a model in the route's folder or a models folder, or a path (relative to the route's folder).
//! `stems` are vocals, drums, bass, guitar or piano (Other is always the residual); the last
//! stage may leave them out to serve every stem not served yet. A route cannot contain a route.
//!
//! A stage can be an ensemble instead ([`crate::ensemble`]): several separators on the same
//! input, their stems combined by an algorithm (default `avg_wave`), weights for the averages:
//!
//! ```json
//! {
//!   "name": "Vocals ensemble",
//!   "stages": [
//!     {"ensemble": ["bs_roformer_viperx_1297", "mel_roformer_kim"], "algorithm": "max_fft",
//!      "stems": ["vocals"]},
//!     {"separator": "htdemucs"}
//!   ]
//! }
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::choice::SeparatorChoice;
pub use crate::choice::ROUTE_EXTENSION;
use crate::ensemble::method::{EnsembleAlgorithm, EnsembleMethod};
use crate::ensemble::spec::EnsembleSpec;
use crate::model_error::ModelError;
use crate::stem::{Stem, NUM_SEPARATED_STEMS};

/// Route files are small; anything larger is not one.
const MAX_ROUTE_BYTES: u64 = 64 * 1024;
/// More stages than this make no sense for five separated stems.
const MAX_STAGES: usize = NUM_SEPARATED_STEMS;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteJson {
    #[serde(default)]
    name: Option<String>,
    stages: Vec<StageJson>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StageJson {
    #[serde(default)]
    separator: Option<String>,
    #[serde(default)]
    ensemble: Option<Vec<String>>,
    #[serde(default)]
    algorithm: Option<String>,
    #[serde(default)]
    weights: Option<Vec<f64>>,
    #[serde(default)]
    stems: Option<Vec<String>>,
}

/// What separates a stage: one separator or an ensemble of several.
#[derive(Debug, Clone, PartialEq)]
pub enum StageSeparator {
    /// One separator.
    One(SeparatorChoice),
    /// Several, their stems combined.
    Ensemble(EnsembleSpec),
}

impl StageSeparator {
    /// Every separator the stage runs.
    pub fn choices(&self) -> &[SeparatorChoice] {
        match self {
            StageSeparator::One(choice) => std::slice::from_ref(choice),
            StageSeparator::Ensemble(spec) => &spec.members,
        }
    }
}

/// One stage of a route: a separator (or an ensemble) and the stems taken from it.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteStage {
    /// What separates.
    pub separator: StageSeparator,
    /// The separated stems it serves.
    pub stems: Vec<Stem>,
}

/// A parsed and resolved route file.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its display name (the file name without the extension when it names none).
    pub name: String,
    /// The stages, in order.
    pub stages: Vec<RouteStage>,
}

/// Whether `path` names a route file.
pub fn is_route_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case(ROUTE_EXTENSION))
}

impl RouteFile {
    /// Reads and resolves a route file: separators by name in the route's folder and
    /// `models_dirs`. Every mistake is an error naming the file and what to fix. Not
    /// realtime-safe: reads the disk.
    pub fn read(path: &Path, models_dirs: &[PathBuf]) -> Result<Self, ModelError> {
        let model = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        let params = |message: String| ModelError::Params {
            model: model.clone(),
            message,
        };
        let unreadable = |reason: String| ModelError::Unreadable {
            path: path.to_path_buf(),
            reason,
        };
        let size = std::fs::metadata(path)
            .map_err(|e| unreadable(e.to_string()))?
            .len();
        if size > MAX_ROUTE_BYTES {
            return Err(unreadable(format!(
                "{size} bytes is too large for a route file (at most {MAX_ROUTE_BYTES})"
            )));
        }
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
        let json: RouteJson = serde_json::from_str(&text).map_err(|e| {
            params(format!(
                "not a valid route ({e}); see docs/models.md, routes"
            ))
        })?;
        if json.stages.is_empty() || json.stages.len() > MAX_STAGES {
            return Err(params(format!(
                "a route has 1 to {MAX_STAGES} stages, this one has {}",
                json.stages.len()
            )));
        }
        let folder = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut dirs = vec![folder.clone()];
        dirs.extend(models_dirs.iter().filter(|d| **d != folder).cloned());
        let mut served = [false; NUM_SEPARATED_STEMS];
        let num_stages = json.stages.len();
        let mut stages = Vec::with_capacity(num_stages);
        for (index, stage) in json.stages.into_iter().enumerate() {
            let in_stage = |message: String| params(format!("stage {}: {message}", index + 1));
            let separator = stage_separator(&stage, &folder, &dirs).map_err(in_stage)?;
            let is_last = index + 1 == num_stages;
            let stems = stage_stems(stage.stems.as_deref(), is_last, &served).map_err(in_stage)?;
            for stem in &stems {
                if std::mem::replace(&mut served[stem.index()], true) {
                    return Err(in_stage(format!(
                        "{} is already served by an earlier stage",
                        stem.file_name()
                    )));
                }
            }
            stages.push(RouteStage { separator, stems });
        }
        let name = json
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| {
                path.file_stem()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| model.clone())
            });
        Ok(Self {
            path: path.to_path_buf(),
            name,
            stages,
        })
    }
}

/// What separates `stage`: its `separator`, or its `ensemble` with `algorithm` (default
/// `avg_wave`) and `weights`.
fn stage_separator(
    stage: &StageJson,
    folder: &Path,
    dirs: &[PathBuf],
) -> Result<StageSeparator, String> {
    match (&stage.separator, &stage.ensemble) {
        (Some(reference), None) => {
            if stage.algorithm.is_some() || stage.weights.is_some() {
                return Err("`algorithm` and `weights` belong to an `ensemble` stage".into());
            }
            Ok(StageSeparator::One(resolve_stage_separator(
                reference, folder, dirs,
            )?))
        }
        (None, Some(references)) => {
            let members = references
                .iter()
                .map(|reference| resolve_stage_separator(reference, folder, dirs))
                .collect::<Result<Vec<_>, _>>()?;
            let algorithm = match &stage.algorithm {
                None => EnsembleAlgorithm::AvgWave,
                Some(name) => EnsembleAlgorithm::from_name(name)
                    .ok_or_else(|| format!("unknown algorithm `{name}` ({})", algorithm_names()))?,
            };
            let method = EnsembleMethod::new(algorithm, members.len(), stage.weights.clone())?;
            Ok(StageSeparator::Ensemble(EnsembleSpec::new(members, method)))
        }
        _ => Err("a stage needs either `separator` or `ensemble` (a list of separators)".into()),
    }
}

/// The stems a stage serves: its `names`, or (the last stage only) every stem not `served` yet.
fn stage_stems(
    names: Option<&[String]>,
    is_last: bool,
    served: &[bool; NUM_SEPARATED_STEMS],
) -> Result<Vec<Stem>, String> {
    match names {
        Some(names) => names
            .iter()
            .map(|name| match Stem::from_name(&name.to_lowercase()) {
                Some(Stem::Other) => Err("`other` is always what the stages leave; list vocals, drums, bass, guitar or piano".to_string()),
                Some(stem) => Ok(stem),
                None => Err(format!(
                    "unknown stem `{name}` (vocals, drums, bass, guitar, piano)"
                )),
            })
            .collect(),
        None if is_last => Ok(Stem::ALL
            .into_iter()
            .filter(|s| s.index() < NUM_SEPARATED_STEMS && !served[s.index()])
            .collect()),
        None => Err("lists no stems; only the last stage may take the rest".into()),
    }
}

/// The names `algorithm` takes, for error messages.
fn algorithm_names() -> String {
    let names: Vec<&str> = EnsembleAlgorithm::ALL.iter().map(|a| a.name()).collect();
    format!("{} or average", names.join(", "))
}

/// Resolves one separator of a stage: a path relative to the route's `folder`, or a name in
/// `dirs`. A route is refused (a route cannot contain a route).
fn resolve_stage_separator(
    reference: &str,
    folder: &Path,
    dirs: &[PathBuf],
) -> Result<SeparatorChoice, String> {
    let reference = reference.trim();
    let relative = folder.join(reference);
    let choice = if reference.contains(['/', '\\']) && relative.is_file() {
        SeparatorChoice::Model(relative)
    } else {
        SeparatorChoice::resolve(reference, dirs).map_err(|e| e.to_string())?
    };
    if let SeparatorChoice::Model(path) = &choice {
        if is_route_file(path) {
            return Err(format!(
                "{} is a route; a route cannot contain a route",
                path.display()
            ));
        }
    }
    Ok(choice)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(dir: &Path, name: &str, json: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("{name}.{ROUTE_EXTENSION}"));
        std::fs::write(&path, json).unwrap();
        path
    }

    fn temp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("stemflow-route-{name}-{}", std::process::id()))
    }

    #[test]
    fn the_last_stage_takes_the_rest_and_names_default_to_the_file() {
        let dir = temp("rest");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("voice.onnx"), b"x").unwrap();
        let path = route(
            &dir,
            "hybrid",
            r#"{"stages": [{"separator": "voice", "stems": ["Vocals"]}, {"separator": "builtin"}]}"#,
        );
        let parsed = RouteFile::read(&path, &[]).unwrap();
        assert_eq!(parsed.name, "hybrid");
        assert_eq!(
            parsed.stages,
            vec![
                RouteStage {
                    separator: StageSeparator::One(SeparatorChoice::Model(dir.join("voice.onnx"))),
                    stems: vec![Stem::Vocals],
                },
                RouteStage {
                    separator: StageSeparator::One(SeparatorChoice::Builtin),
                    stems: vec![Stem::Drums, Stem::Bass, Stem::Guitar, Stem::Piano],
                },
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_ensemble_stage_names_its_members_algorithm_and_weights() {
        let dir = temp("ensemble");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("voice.onnx"), b"x").unwrap();
        let path = route(
            &dir,
            "vocals",
            r#"{"stages": [{"ensemble": ["voice", "builtin"], "algorithm": "Avg FFT", "weights": [2, 1], "stems": ["vocals"]}, {"separator": "builtin"}]}"#,
        );
        let parsed = RouteFile::read(&path, &[]).unwrap();
        let StageSeparator::Ensemble(spec) = &parsed.stages[0].separator else {
            panic!("not an ensemble: {:?}", parsed.stages[0]);
        };
        assert_eq!(
            spec.members,
            [
                SeparatorChoice::Model(dir.join("voice.onnx")),
                SeparatorChoice::Builtin
            ]
        );
        assert_eq!(spec.method.to_string(), "avg_fft, weights 2, 1");
        assert_eq!(parsed.stages[0].separator.choices().len(), 2);
        // Without an algorithm, MSST's default.
        let plain = route(
            &dir,
            "plain",
            r#"{"stages": [{"ensemble": ["voice", "builtin"]}]}"#,
        );
        let parsed = RouteFile::read(&plain, &[]).unwrap();
        let StageSeparator::Ensemble(spec) = &parsed.stages[0].separator else {
            panic!("not an ensemble");
        };
        assert_eq!(spec.method.algorithm(), EnsembleAlgorithm::AvgWave);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn mistakes_say_what_to_fix() {
        let dir = temp("mistakes");
        let cases = [
            ("{", "not a valid route"),
            (r#"{"stages": []}"#, "1 to 5 stages"),
            (
                r#"{"stages": [{"separator": "builtin", "stems": ["other"]}]}"#,
                "`other` is always",
            ),
            (
                r#"{"stages": [{"separator": "builtin", "stems": ["kazoo"]}]}"#,
                "unknown stem `kazoo`",
            ),
            (
                r#"{"stages": [{"separator": "builtin"}, {"separator": "builtin"}]}"#,
                "only the last stage",
            ),
            (
                r#"{"stages": [{"separator": "builtin", "stems": ["bass"]}, {"separator": "builtin", "stems": ["bass"]}]}"#,
                "bass is already served",
            ),
            (
                r#"{"stages": [{"separator": "nonexistent-model"}]}"#,
                "unknown model `nonexistent-model`",
            ),
            (
                r#"{"stages": [{"separator": "builtin"}], "colour": 3}"#,
                "unknown field",
            ),
            (
                r#"{"stages": [{"ensemble": ["builtin", "builtin"], "algorithm": "loudest"}]}"#,
                "unknown algorithm `loudest`",
            ),
            (
                r#"{"stages": [{"ensemble": ["builtin", "builtin"], "algorithm": "max_fft", "weights": [2, 1]}]}"#,
                "max_fft takes no weights",
            ),
            (r#"{"stages": [{"ensemble": ["builtin"]}]}"#, "at least two"),
            (
                r#"{"stages": [{"separator": "builtin", "ensemble": ["builtin", "builtin"]}]}"#,
                "either `separator` or `ensemble`",
            ),
            (
                r#"{"stages": [{"separator": "builtin", "algorithm": "max_fft"}]}"#,
                "belong to an `ensemble` stage",
            ),
        ];
        for (index, (json, expected)) in cases.into_iter().enumerate() {
            let path = route(&dir, &format!("case{index}"), json);
            let error = RouteFile::read(&path, &[]).unwrap_err().to_string();
            assert!(error.contains(expected), "{json}: {error}");
        }
        let inner = route(&dir, "inner", r#"{"stages": [{"separator": "builtin"}]}"#);
        let outer = route(
            &dir,
            "outer",
            &format!(r#"{{"stages": [{{"separator": "{}"}}]}}"#, inner.display()),
        );
        let error = RouteFile::read(&outer, &[]).unwrap_err().to_string();
        assert!(error.contains("cannot contain a route"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
