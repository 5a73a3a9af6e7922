//! The models folder: which `.onnx` files and routes (`.stemflow-route`, see [`crate::hybrid`])
//! the user has, what they are and whether they work.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::families::describe_model;
use crate::families::stem_sources::StemSource;
pub use crate::families::ModelFamily;
use crate::runtime::graph_files::{is_gpu_graph_beside_model, model_of_gpu_graph};
use crate::runtime::model_file::{read_model_file, ModelBytes};
use crate::runtime::session::discard_spare_session;
use crate::stem::Stem;

/// A model file found in a models folder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    /// Where it is.
    pub path: PathBuf,
    /// The file name without `.onnx`.
    pub name: String,
    /// The family its graph matches, when it matches one.
    pub family: Option<ModelFamily>,
    /// The model's stems, in output order (e.g. `["vocals"]`, `["drums", "bass", "other", "vocals"]`).
    pub stems: Vec<String>,
    /// The Stemflow stems it delivers, in output order, by file name (`vocals`, `drums`, …;
    /// `other` always): a vocals/instrumental model delivers `["vocals", "other"]`. Empty when
    /// it cannot be used.
    pub delivers: Vec<String>,
    /// The rate it runs at.
    pub sample_rate_hz: u32,
    /// SHA-256 of the file, lower-case hex (what the plugin saves to find it again).
    pub sha256: String,
    /// Algorithmic latency in frames at the model's rate (chunk look-ahead), when known.
    pub latency_frames: Option<usize>,
    /// Why it cannot be used; `None` when it validated.
    pub error: Option<String>,
}

impl ModelInfo {
    /// Whether the model validated.
    pub fn is_usable(&self) -> bool {
        self.error.is_none()
    }
}

pub use crate::choice::models_dirs;

/// Checks one model file: hash, family, stems. Never fails: problems land in
/// [`ModelInfo::error`]. Not realtime-safe: reads the file and builds a CPU session.
pub fn inspect_model(path: &Path) -> ModelInfo {
    if crate::hybrid::is_route_file(path) {
        return inspect_route(path);
    }
    let name = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let mut info = ModelInfo {
        path: path.to_path_buf(),
        name,
        family: None,
        stems: Vec::new(),
        delivers: Vec::new(),
        sample_rate_hz: crate::families::MODEL_SAMPLE_RATE_HZ,
        sha256: String::new(),
        latency_frames: None,
        error: None,
    };
    let model = match read_model_file(path) {
        Ok(model) => model,
        Err(error) => {
            info.error = Some(error.to_string());
            return info;
        }
    };
    info.sha256 = model.sha256.clone();
    if let Err(error) = crate::runtime::runtime() {
        info.error = Some(format!("cannot check the model: {error}"));
        return info;
    }
    let described = describe_model(path, &model);
    // A session built to read the signature is not kept for a model that is only listed.
    discard_spare_session();
    match described {
        Ok(description) => {
            info.family = Some(description.family);
            info.stems = description.stems.clone();
            info.delivers = delivered_names(|stem| {
                stem == Stem::Other || description.stem_sources[stem.index()] != StemSource::Silent
            });
            info.sample_rate_hz = description.sample_rate_hz;
            info.latency_frames = Some(description.layout.latency_frames());
        }
        Err(error) => info.error = Some(error.to_string()),
    }
    info
}

/// A route file as a model: its stages' stems, the sum of their latencies (an ensemble stage's
/// is its slowest member's, plus its combination's), and the first problem of any stage; an
/// ensemble when a stage is one. Not realtime-safe: inspects every stage's model.
fn inspect_route(path: &Path) -> ModelInfo {
    let mut info = ModelInfo {
        path: path.to_path_buf(),
        name: path
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.display().to_string()),
        family: Some(ModelFamily::Hybrid),
        stems: Vec::new(),
        delivers: Vec::new(),
        sample_rate_hz: crate::families::MODEL_SAMPLE_RATE_HZ,
        sha256: std::fs::read(path)
            .map(|bytes| ModelBytes::new("", bytes).sha256)
            .unwrap_or_default(),
        latency_frames: None,
        error: None,
    };
    let route = match crate::hybrid::RouteFile::read(path, &models_dirs(&[])) {
        Ok(route) => route,
        Err(error) => {
            info.error = Some(error.to_string());
            return info;
        }
    };
    let mut latency_frames = 0;
    for stage in &route.stages {
        let mut stage_latency = 0;
        let mut delivered: Vec<Stem> = Vec::new();
        for choice in stage.separator.choices() {
            let (latency, stems) = match choice_facts(choice, &mut info.sample_rate_hz) {
                Ok(facts) => facts,
                Err(error) => {
                    info.error = Some(error);
                    return info;
                }
            };
            stage_latency = stage_latency.max(latency);
            delivered.extend(stems);
        }
        if let crate::hybrid::StageSeparator::Ensemble(spec) = &stage.separator {
            info.family = Some(ModelFamily::Ensemble);
            stage_latency += crate::ensemble::delay_samples_of(spec.method.algorithm());
        }
        latency_frames += stage_latency;
        info.stems.extend(
            stage
                .stems
                .iter()
                .filter(|s| delivered.contains(s))
                .map(|s| s.file_name().to_string()),
        );
    }
    info.stems.push("other".into());
    info.delivers = delivered_names(|stem| info.stems.iter().any(|s| s == stem.file_name()));
    info.latency_frames = Some(latency_frames);
    info
}

/// A route stage's separator: its latency and the separated stems it delivers (the built-in's
/// three, what a model delivers), its rate into `sample_rate_hz`; or the first problem, with
/// the model's name.
fn choice_facts(
    choice: &crate::choice::SeparatorChoice,
    sample_rate_hz: &mut u32,
) -> Result<(usize, Vec<Stem>), String> {
    match choice {
        crate::choice::SeparatorChoice::Builtin => Ok((
            crate::separator::Separator::info(&crate::builtin::BuiltinSeparator::new())
                .latency_frames(),
            crate::builtin::BUILTIN_STEMS.to_vec(),
        )),
        crate::choice::SeparatorChoice::Model(model) => {
            let stage_info = inspect_model(model);
            if let Some(error) = stage_info.error {
                return Err(format!("{}: {error}", stage_info.name));
            }
            *sample_rate_hz = stage_info.sample_rate_hz;
            Ok((
                stage_info.latency_frames.unwrap_or(0),
                stage_info
                    .delivers
                    .iter()
                    .filter_map(|name| Stem::from_name(name))
                    .filter(|&stem| stem != Stem::Other)
                    .collect(),
            ))
        }
    }
}

/// The file names of the stems `delivers` holds for, in output order.
fn delivered_names(delivers: impl Fn(Stem) -> bool) -> Vec<String> {
    Stem::OUTPUT_ORDER
        .into_iter()
        .filter(|&stem| delivers(stem))
        .map(|stem| stem.file_name().to_owned())
        .collect()
}

/// Whether `path` is a model file or a route by its extension.
fn is_model_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| {
        e.eq_ignore_ascii_case("onnx") || e.eq_ignore_ascii_case(crate::hybrid::ROUTE_EXTENSION)
    })
}

/// Every `.onnx` file and route directly inside `dirs`, inspected, sorted by name; a model's
/// GPU graphs (`NAME.gpu.onnx`, `NAME.gpu-f16.onnx`) are part of it, not listed apart. Missing
/// folders are skipped. Not realtime-safe: may take seconds for large models.
pub fn scan_models(dirs: &[PathBuf]) -> Vec<ModelInfo> {
    let mut paths: Vec<PathBuf> = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())))
        .filter(|p| is_model_path(p) && p.is_file() && !is_gpu_graph_beside_model(p))
        .collect();
    paths.sort_by_key(|p| (p.file_name().map(|n| n.to_os_string()), p.clone()));
    paths.dedup();
    paths.iter().map(|p| inspect_model(p)).collect()
}

/// Finds a model by content hash in `dirs` (a saved model that was moved or renamed): the
/// file with that hash, or the model whose GPU graph has it. Not realtime-safe: hashes every
/// file.
pub fn find_by_sha256(sha256: &str, dirs: &[PathBuf]) -> Option<PathBuf> {
    let found = dirs
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flat_map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())))
        .filter(|p| is_model_path(p))
        .find(|p| {
            std::fs::read(p)
                .map(|bytes| ModelBytes::new("", bytes).sha256 == sha256)
                .unwrap_or(false)
        })?;
    Some(model_of_gpu_graph(&found).unwrap_or(found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_kit::testing::scratch_dir;

    #[test]
    fn a_moved_model_is_found_by_its_hash() {
        let dir = scratch_dir("models");
        std::fs::write(dir.join("My Model.onnx"), b"x").unwrap();
        let dirs = vec![dir.clone()];
        let sha = ModelBytes::new("", b"x".to_vec()).sha256;
        assert_eq!(find_by_sha256(&sha, &dirs), Some(dir.join("My Model.onnx")));
        assert_eq!(find_by_sha256("00", &dirs), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_model_is_listed_with_an_error() {
        let dir = scratch_dir("models-bad");
        std::fs::write(dir.join("broken.onnx"), [0xffu8; 16]).unwrap();
        std::fs::write(dir.join("notes.txt"), b"not a model").unwrap();
        let found = scan_models(std::slice::from_ref(&dir));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "broken");
        assert!(!found[0].is_usable());
        assert!(
            found[0]
                .error
                .as_ref()
                .unwrap()
                .contains("not an ONNX model"),
            "{:?}",
            found[0].error
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
