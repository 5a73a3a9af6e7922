//! A stand-in for `stemflow_engine::models` (being written on main) with the same shape, so the
//! editor's model chooser can be built and tested now. It lists `.onnx` files without validating
//! them. Replace `use crate::models_standin as models` in `editor/backend.rs` with
//! `stemflow_engine::models` and delete this file once the engine module is merged.

use std::fmt;
use std::path::{Path, PathBuf};

/// The architecture a model file belongs to.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFamily {
    /// Hybrid Transformer Demucs.
    HtDemucs,
    /// UVR's MDX-Net.
    MdxNet,
    /// Band-split / mel-band RoFormer.
    RoFormer,
}

impl fmt::Display for ModelFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelFamily::HtDemucs => "HTDemucs",
            ModelFamily::MdxNet => "MDX-Net",
            ModelFamily::RoFormer => "RoFormer",
        })
    }
}

/// One model file found in a models folder.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The file.
    pub path: PathBuf,
    /// Display name.
    pub name: String,
    /// The architecture, where recognised.
    pub family: Option<ModelFamily>,
    /// The stems it outputs.
    pub stems: Vec<String>,
    /// The rate it runs at.
    pub sample_rate_hz: u32,
    /// Hash of the file (empty in this stand-in).
    pub sha256: String,
    /// Why it cannot be used; `None` = validated.
    pub error: Option<String>,
}

/// The folders searched for models: the user models folder first, then `extra`.
pub fn models_dirs(extra: &[PathBuf]) -> Vec<PathBuf> {
    stemflow_engine::paths::user_models_dir()
        .into_iter()
        .chain(extra.iter().cloned())
        .collect()
}

/// Every `.onnx` file in `dirs`, sorted by name. Not realtime-safe: reads folders.
pub fn scan_models(dirs: &[PathBuf]) -> Vec<ModelInfo> {
    let mut found: Vec<ModelInfo> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
        })
        .map(|path| ModelInfo {
            name: file_stem(&path),
            family: None,
            stems: Vec::new(),
            sample_rate_hz: 44_100,
            sha256: String::new(),
            error: None,
            path,
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}
