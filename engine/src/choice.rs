//! [`SeparatorChoice`]: which separator runs. One type with one parser ([`SeparatorChoice::resolve`]
//! for what users type, [`SeparatorChoice::from_id`] for saved state) and one display name. It
//! is built into a separator by the engine's `opening` module.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::builtin::BUILTIN_DISPLAY_NAME;
use crate::model_error::ModelError;

/// The id of the built-in separator, in saved state and on the command line.
pub const BUILTIN_ID: &str = "builtin";
/// The prefix of a model file's id.
const FILE_ID_PREFIX: &str = "file:";
/// The extension of a route file (see [`crate::hybrid`]).
pub const ROUTE_EXTENSION: &str = "stemflow-route";

/// The folders searched for models and routes: the user's models folder first, then `extra`.
pub fn models_dirs(extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = stemflow_paths::user_models_dir().into_iter().collect();
    for dir in extra {
        if !dirs.contains(dir) {
            dirs.push(dir.clone());
        }
    }
    dirs
}

/// Which separator a stream runs. Saved in the plugin state as its [`SeparatorChoice::id`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum SeparatorChoice {
    /// The embedded DSP separator, no model file needed.
    #[default]
    Builtin,
    /// An ONNX model file.
    Model(PathBuf),
}

impl SeparatorChoice {
    /// Stable id used in saved state and on the command line: `builtin` or `file:<path>`.
    pub fn id(&self) -> String {
        match self {
            SeparatorChoice::Builtin => BUILTIN_ID.into(),
            SeparatorChoice::Model(path) => format!("{FILE_ID_PREFIX}{}", path.display()),
        }
    }

    /// Parses a saved id (see [`SeparatorChoice::id`]) without looking at the disk; a bare path
    /// ending in `.onnx` is a model.
    pub fn from_id(id: &str) -> Option<Self> {
        match id {
            BUILTIN_ID => Some(SeparatorChoice::Builtin),
            _ => id
                .strip_prefix(FILE_ID_PREFIX)
                .or_else(|| id.ends_with(".onnx").then_some(id))
                .filter(|p| !p.is_empty())
                .map(|p| SeparatorChoice::Model(p.into())),
        }
    }

    /// Resolves what a user typed (`--model`, the editor's chooser): `builtin`, the path of a
    /// model file (also as `file:PATH`), or the name of a model or route (see
    /// [`crate::hybrid`]) in `models_dirs` (with or without `.onnx` / `.stemflow-route`). A folder, a missing path or an unknown name is a typed error that says
    /// where Stemflow looked. Not realtime-safe: looks at the disk.
    pub fn resolve(arg: &str, models_dirs: &[PathBuf]) -> Result<Self, ModelError> {
        let arg = arg.trim();
        if arg.eq_ignore_ascii_case(BUILTIN_ID) {
            return Ok(SeparatorChoice::Builtin);
        }
        let path = Path::new(arg.strip_prefix(FILE_ID_PREFIX).unwrap_or(arg));
        if path.is_file() {
            return Ok(SeparatorChoice::Model(path.to_path_buf()));
        }
        if path.is_dir() {
            return Err(ModelError::IsFolder(path.to_path_buf()));
        }
        let looks_like_path = arg.contains(['/', '\\']) || arg.starts_with(FILE_ID_PREFIX);
        if looks_like_path {
            return Err(ModelError::Unreadable {
                path: path.to_path_buf(),
                reason: "model file not found".into(),
            });
        }
        let lower = arg.to_ascii_lowercase();
        let route_extension = format!(".{}", ROUTE_EXTENSION);
        let file_names = if lower.ends_with(".onnx") || lower.ends_with(&route_extension) {
            vec![arg.to_string()]
        } else {
            vec![format!("{arg}.onnx"), format!("{arg}{route_extension}")]
        };
        models_dirs
            .iter()
            .flat_map(|dir| file_names.iter().map(move |name| dir.join(name)))
            .find(|candidate| candidate.is_file())
            .map(SeparatorChoice::Model)
            .ok_or_else(|| ModelError::NotFound {
                name: arg.to_owned(),
                searched: models_dirs.to_vec(),
            })
    }

    /// The name users see: "Built-in (DSP)" or the model's name (its file name without
    /// `.onnx`, as `stemflow models` lists it and `--model` accepts it).
    pub fn display_name(&self) -> String {
        match self {
            SeparatorChoice::Builtin => BUILTIN_DISPLAY_NAME.to_owned(),
            SeparatorChoice::Model(path) => path
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string()),
        }
    }

    /// A short label for tables and command lines: `builtin` or the model's name.
    pub fn label(&self) -> String {
        match self {
            SeparatorChoice::Builtin => BUILTIN_ID.to_owned(),
            SeparatorChoice::Model(_) => self.display_name(),
        }
    }
}

impl Serialize for SeparatorChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.id())
    }
}

impl<'de> Deserialize<'de> for SeparatorChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let id = String::deserialize(deserializer)?;
        SeparatorChoice::from_id(&id)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown separator '{id}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_kit::testing::scratch_dir;

    #[test]
    fn ids_round_trip() {
        for choice in [
            SeparatorChoice::Builtin,
            SeparatorChoice::Model("/models/My Model.onnx".into()),
        ] {
            assert_eq!(SeparatorChoice::from_id(&choice.id()), Some(choice.clone()));
            let json = serde_json::to_string(&choice).unwrap();
            assert_eq!(
                serde_json::from_str::<SeparatorChoice>(&json).unwrap(),
                choice
            );
        }
        assert_eq!(SeparatorChoice::from_id("magic"), None);
        assert!(serde_json::from_str::<SeparatorChoice>("\"magic\"").is_err());
    }

    #[test]
    fn names_resolve_in_the_models_folders_and_unknown_ones_say_where_they_looked() {
        let dir = scratch_dir("choice");
        std::fs::create_dir_all(dir.join("a folder")).unwrap();
        std::fs::write(dir.join("My Model.onnx"), b"x").unwrap();
        let dirs = vec![dir.clone()];
        let model = SeparatorChoice::Model(dir.join("My Model.onnx"));
        assert_eq!(SeparatorChoice::resolve("My Model", &dirs).unwrap(), model);
        assert_eq!(
            SeparatorChoice::resolve("My Model.onnx", &dirs).unwrap(),
            model
        );
        assert_eq!(SeparatorChoice::resolve(&model.id(), &[]).unwrap(), model);
        assert_eq!(
            SeparatorChoice::resolve(" BuiltIn ", &dirs).unwrap(),
            SeparatorChoice::Builtin
        );
        assert_eq!(model.display_name(), "My Model");
        assert_eq!(
            SeparatorChoice::Builtin.display_name(),
            BUILTIN_DISPLAY_NAME
        );
        assert_eq!(SeparatorChoice::Builtin.label(), "builtin");

        let error = SeparatorChoice::resolve("nope", &dirs).unwrap_err();
        assert!(matches!(error, ModelError::NotFound { .. }));
        assert!(
            error.to_string().contains("nope")
                && error.to_string().contains(&dir.display().to_string()),
            "{error}"
        );
        let folder = dir.join("a folder");
        let error = SeparatorChoice::resolve(&folder.display().to_string(), &dirs).unwrap_err();
        assert_eq!(error, ModelError::IsFolder(folder));
        let error = SeparatorChoice::resolve("/nonexistent/x.onnx", &dirs).unwrap_err();
        assert!(error.to_string().contains("/nonexistent/x.onnx"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
