//! A model file in memory: its bytes, its content hash, and the checks made before ONNX Runtime
//! sees it (size, external data).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::model_error::ModelError;
use stemflow_onnx::external_data::external_data_locations;

/// Largest model file accepted.
pub const MAX_MODEL_FILE_BYTES: u64 = 4 << 30;

/// A model file's bytes and content hash.
#[derive(Debug)]
pub struct ModelBytes {
    /// A short name for messages (the file name).
    pub name: String,
    /// SHA-256 of the bytes, lower-case hex.
    pub sha256: String,
    /// The file's contents.
    pub bytes: Vec<u8>,
    /// The file they were read from (`None` for bytes made in memory).
    pub path: Option<PathBuf>,
}

impl ModelBytes {
    /// Wraps bytes, hashing them.
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        Self {
            name: name.into(),
            sha256,
            bytes,
            path: None,
        }
    }

    /// Reads a model file without checking it. Not realtime-safe.
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::Unreadable {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string());
        Ok(Self {
            path: Some(path.to_path_buf()),
            ..Self::new(name, bytes)
        })
    }
}

/// Where a loaded model's bytes can be had again: its file, read anew and checked against the
/// hash it had when loaded, or (for models made in memory) the bytes themselves. A model's session
/// keeps what it needs, so a loaded model need not keep a copy of its file (HTDemucs: 314 MB per
/// plugin instance); the bytes are read again only when a session must be rebuilt (a device
/// switch, a fallback to the CPU).
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// A model file.
    File {
        /// A short name for messages.
        name: String,
        /// SHA-256 of the bytes it was loaded with.
        sha256: String,
        /// The file.
        path: PathBuf,
    },
    /// Bytes made in memory.
    Memory(Arc<ModelBytes>),
}

impl ModelSource {
    /// The source of `model`: its file when it came from one.
    pub fn of(model: &Arc<ModelBytes>) -> Self {
        match &model.path {
            Some(path) => Self::File {
                name: model.name.clone(),
                sha256: model.sha256.clone(),
                path: path.clone(),
            },
            None => Self::Memory(model.clone()),
        }
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        match self {
            Self::File { name, .. } => name,
            Self::Memory(model) => &model.name,
        }
    }

    /// The model's SHA-256.
    pub fn sha256(&self) -> &str {
        match self {
            Self::File { sha256, .. } => sha256,
            Self::Memory(model) => &model.sha256,
        }
    }

    /// The model's bytes, read again from its file: an error when the file is gone or no longer
    /// holds the model that was loaded. Not realtime-safe.
    pub fn bytes(&self) -> Result<Arc<ModelBytes>, ModelError> {
        match self {
            Self::Memory(model) => Ok(model.clone()),
            Self::File { sha256, path, .. } => {
                let model = ModelBytes::read(path)?;
                if model.sha256 != *sha256 {
                    return Err(ModelError::Unreadable {
                        path: path.clone(),
                        reason: "the file changed since the model was loaded; choose it again"
                            .into(),
                    });
                }
                Ok(Arc::new(model))
            }
        }
    }
}

/// Reads a model file, refusing folders, files that are too big and graphs with external data.
/// Not realtime-safe.
pub fn read_model_file(path: &Path) -> Result<ModelBytes, ModelError> {
    let metadata = std::fs::metadata(path).map_err(|e| ModelError::Unreadable {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if metadata.is_dir() {
        return Err(ModelError::IsFolder(path.to_path_buf()));
    }
    if metadata.len() > MAX_MODEL_FILE_BYTES {
        return Err(ModelError::TooLarge {
            path: path.to_path_buf(),
            num_bytes: metadata.len(),
        });
    }
    let model = ModelBytes::read(path)?;
    check_external_data(&model.bytes, path)?;
    Ok(model)
}

/// Refuses graphs whose tensors point at external data: Stemflow loads models from memory, and a
/// hostile path (`../../…`, absolute) must never be followed.
fn check_external_data(bytes: &[u8], path: &Path) -> Result<(), ModelError> {
    match external_data_locations(bytes) {
        Ok(locations) if locations.is_empty() => Ok(()),
        Ok(locations) => Err(ModelError::ExternalData {
            path: path.to_path_buf(),
            locations,
        }),
        Err(reason) => Err(ModelError::NotOnnx {
            path: path.to_path_buf(),
            reason,
        }),
    }
}
