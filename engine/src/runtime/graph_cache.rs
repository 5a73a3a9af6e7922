//! Optimised graphs, cached per model, device and ONNX Runtime version in the user data folder,
//! so that a model's later starts skip ONNX Runtime's graph optimisation.
//!
//! For HTDemucs the optimisation, with its constants computed first
//! ([`super::constant_fold`]), takes ~4 s on these 2-core machines. The cache keeps the graph optimised
//! to the portable level (`Level2`: constants folded, nodes fused, no hardware-specific layouts);
//! a cached start loads it and applies the remaining layout passes, which find nothing left to
//! fold (~1.7 s, 0.5 GB). Only CPU sessions use that entry: ONNX Runtime's `Level2` graphs may
//! hold fusions of the provider they were made for, and what the GPU providers would make of one
//! has not been measured here. Sessions on other devices use the *folded* graph instead: the model
//! with its constants computed (after ONNX Runtime's basic passes, which every provider's graph
//! goes through), the same for every device; it spares them the folding (HTDemucs: ~3 s). An empty
//! folded entry says the model has nothing to fold.
//!
//! Entries are named by the model's SHA-256, so an edited model never meets a stale graph; they are
//! written under a temporary name and renamed, so a crash never leaves half a graph; an entry ONNX
//! Runtime refuses is removed and rebuilt at the next start.

use std::path::{Path, PathBuf};

use super::device_id::DeviceId;

/// Disables the cache when set to `0` (benchmarks of cold starts).
pub const GRAPH_CACHE_ENV: &str = "STEMFLOW_GRAPH_CACHE";

/// The folder of cached graphs: `graph-cache` in the user data folder, `None` when there is no
/// user data folder or `STEMFLOW_GRAPH_CACHE=0`.
pub fn graph_cache_dir() -> Option<PathBuf> {
    if std::env::var_os(GRAPH_CACHE_ENV).is_some_and(|v| v == "0") {
        return None;
    }
    stemflow_paths::user_data_dir().map(|d| d.join("graph-cache"))
}

/// Where the optimised graph of the model with `model_sha256` on `device` lives in `dir`, for
/// ONNX Runtime `ort_version`; `None` for devices whose graphs are not cached.
pub fn cached_graph_path(
    dir: &Path,
    model_sha256: &str,
    device: DeviceId,
    ort_version: &str,
) -> Option<PathBuf> {
    (device == DeviceId::CPU).then(|| {
        let device = device.to_string().replace(':', "-");
        dir.join(format!("{model_sha256}-{device}-ort{ort_version}.onnx"))
    })
}

/// Where the folded graph of the model with `model_sha256` (see the module docs) lives in `dir`,
/// for ONNX Runtime `ort_version`.
pub fn folded_graph_path(dir: &Path, model_sha256: &str, ort_version: &str) -> PathBuf {
    dir.join(format!("{model_sha256}-folded-ort{ort_version}.onnx"))
}

/// A cache entry, and what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheEntry {
    /// The optimised graph ([`cached_graph_path`]): CPU sessions.
    Optimised(PathBuf),
    /// The folded graph ([`folded_graph_path`]): sessions on other devices.
    Folded(PathBuf),
}

/// This process's cache entry for a model on a device: in [`graph_cache_dir`], for the loaded
/// ONNX Runtime; `None` without a cache folder or a runtime.
pub fn cache_entry(model_sha256: &str, device: DeviceId) -> Option<CacheEntry> {
    let version = super::library::runtime().ok()?.version();
    let dir = graph_cache_dir()?;
    Some(
        match cached_graph_path(&dir, model_sha256, device, version) {
            Some(path) => CacheEntry::Optimised(path),
            None => CacheEntry::Folded(folded_graph_path(&dir, model_sha256, version)),
        },
    )
}

/// The temporary name an entry is written under before it is renamed into place (unique per
/// process, so two processes filling the cache at once never write the same file).
pub fn partial_path(entry: &Path) -> PathBuf {
    let mut name = entry.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".partial-{}", std::process::id()));
    entry.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_per_model_device_and_runtime_and_only_for_the_cpu() {
        let dir = Path::new("/cache");
        let a = cached_graph_path(dir, "ab12", DeviceId::CPU, "1.31.0").unwrap();
        assert_eq!(a, dir.join("ab12-cpu-ort1.31.0.onnx"));
        assert_ne!(
            a,
            cached_graph_path(dir, "cd34", DeviceId::CPU, "1.31.0").unwrap()
        );
        assert_ne!(
            a,
            cached_graph_path(dir, "ab12", DeviceId::CPU, "1.32.0").unwrap()
        );
        let cuda: DeviceId = "cuda:0".parse().unwrap();
        assert_eq!(cached_graph_path(dir, "ab12", cuda, "1.31.0"), None);
        // The folded graph is one for every device, and not the optimised one.
        let folded = folded_graph_path(dir, "ab12", "1.31.0");
        assert_ne!(folded, a);
        assert_ne!(folded, folded_graph_path(dir, "ab12", "1.32.0"));
        assert_ne!(folded, folded_graph_path(dir, "cd34", "1.31.0"));
        let partial = partial_path(&a);
        assert_eq!(partial.parent(), a.parent());
        assert_ne!(partial, a);
    }
}
