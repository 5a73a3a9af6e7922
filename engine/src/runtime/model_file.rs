//! A model file in memory: its bytes, its content hash, and the checks made before ONNX Runtime
//! sees it (size, external data).

use std::path::Path;

use sha2::{Digest, Sha256};

use super::protobuf::external_data_locations;
use crate::model_error::ModelError;

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
}

impl ModelBytes {
    /// Wraps bytes, hashing them.
    pub fn new(name: impl Into<String>, bytes: Vec<u8>) -> Self {
        let sha256 = format!("{:x}", Sha256::digest(&bytes));
        Self {
            name: name.into(),
            sha256,
            bytes,
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
        Ok(Self::new(name, bytes))
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
