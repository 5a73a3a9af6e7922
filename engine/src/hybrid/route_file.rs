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

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::choice::SeparatorChoice;
pub use crate::choice::ROUTE_EXTENSION;
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
    separator: String,
    #[serde(default)]
    stems: Option<Vec<String>>,
}

/// One stage of a route: a separator and the stems taken from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteStage {
    /// The separator.
    pub choice: SeparatorChoice,
    /// The separated stems it serves.
    pub stems: Vec<Stem>,
}

/// A parsed and resolved route file.
#[derive(Debug, Clone, PartialEq, Eq)]
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
            let reference = stage.separator.trim();
            let relative = folder.join(reference);
            let choice = if reference.contains(['/', '\\']) && relative.is_file() {
                SeparatorChoice::Model(relative)
            } else {
                SeparatorChoice::resolve(reference, &dirs)
                    .map_err(|e| params(format!("stage {}: {e}", index + 1)))?
            };
            if let SeparatorChoice::Model(stage_path) = &choice {
                if is_route_file(stage_path) {
                    return Err(params(format!(
                        "stage {}: {} is a route; a route cannot contain a route",
                        index + 1,
                        stage_path.display()
                    )));
                }
            }
            let stems = match stage.stems {
                Some(names) => names
                    .iter()
                    .map(|name| match Stem::from_name(&name.to_lowercase()) {
                        Some(Stem::Other) => Err(params(format!(
                            "stage {}: `other` is always what the stages leave; list vocals, drums, bass, guitar or piano",
                            index + 1
                        ))),
                        Some(stem) => Ok(stem),
                        None => Err(params(format!(
                            "stage {}: unknown stem `{name}` (vocals, drums, bass, guitar, piano)",
                            index + 1
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                None if index + 1 == num_stages => Stem::ALL
                    .into_iter()
                    .filter(|s| s.index() < NUM_SEPARATED_STEMS && !served[s.index()])
                    .collect(),
                None => {
                    return Err(params(format!(
                        "stage {} lists no stems; only the last stage may take the rest",
                        index + 1
                    )))
                }
            };
            for stem in &stems {
                if std::mem::replace(&mut served[stem.index()], true) {
                    return Err(params(format!(
                        "stage {}: {} is already served by an earlier stage",
                        index + 1,
                        stem.file_name()
                    )));
                }
            }
            stages.push(RouteStage { choice, stems });
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
                    choice: SeparatorChoice::Model(dir.join("voice.onnx")),
                    stems: vec![Stem::Vocals],
                },
                RouteStage {
                    choice: SeparatorChoice::Builtin,
                    stems: vec![Stem::Drums, Stem::Bass, Stem::Guitar, Stem::Piano],
                },
            ]
        );
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
