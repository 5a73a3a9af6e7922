//! Where Stemflow keeps its files: the user data folder with the ONNX Runtime library, models and
//! settings; the graphs for GPUs beside a model ([`gpu_graph_file`]); and [`claim`]: one worker
//! at a time on a stem folder or a model being fetched.

pub mod claim;
mod gpu_graph;

use std::path::PathBuf;

pub use gpu_graph::{gpu_graph_file, model_of_gpu_graph, GPU_F16_GRAPH_SUFFIX, GPU_GRAPH_SUFFIX};

/// Overrides the user data folder (used by tests and portable installs).
pub const DATA_DIR_ENV: &str = "STEMFLOW_DATA_DIR";

/// The user data folder: `$STEMFLOW_DATA_DIR`, else the platform's data folder (`dirs`) with
/// `stemflow` in it: Linux `$XDG_DATA_HOME/stemflow` (`~/.local/share/stemflow`), macOS
/// `~/Library/Application Support/Stemflow`, Windows `%APPDATA%\Stemflow` (the roaming
/// application data known folder). `None` when the platform knows no such folder.
pub fn user_data_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os(DATA_DIR_ENV).filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let name = if cfg!(any(target_os = "macos", windows)) {
        "Stemflow"
    } else {
        "stemflow"
    };
    dirs::data_dir().map(|dir| dir.join(name))
}

/// Folder for the ONNX Runtime library inside the user data folder.
pub fn user_runtime_dir() -> Option<PathBuf> {
    user_data_dir().map(|d| d.join("runtime"))
}

/// The user's models folder.
pub fn user_models_dir() -> Option<PathBuf> {
    user_data_dir().map(|d| d.join("models"))
}

/// The settings file (JSON).
pub fn settings_file() -> Option<PathBuf> {
    user_data_dir().map(|d| d.join("settings.json"))
}

/// The file name of the ONNX Runtime library on this platform, without version suffixes.
pub fn onnxruntime_library_names() -> &'static [&'static str] {
    if cfg!(windows) {
        &["onnxruntime.dll"]
    } else if cfg!(target_os = "macos") {
        &["libonnxruntime.dylib"]
    } else {
        &["libonnxruntime.so"]
    }
}

/// Finds an ONNX Runtime library in `dir`: the plain name or a versioned one
/// (`libonnxruntime.so.1.31.0`, `libonnxruntime.1.31.0.dylib`). The newest version wins.
pub fn find_onnxruntime_in(dir: &std::path::Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let is_provider = name.contains("providers");
            !is_provider
                && (onnxruntime_library_names().contains(&name)
                    || (name.starts_with("libonnxruntime.so.") && cfg!(target_os = "linux"))
                    || (name.starts_with("libonnxruntime.") && name.ends_with(".dylib")))
        })
        .collect();
    found.sort();
    found.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn the_data_folder_follows_xdg_and_the_override() {
        // One test changes the environment, so the cases run in turn.
        let saved: Vec<_> = [DATA_DIR_ENV, "XDG_DATA_HOME", "HOME"]
            .iter()
            .map(|k| (k.to_string(), std::env::var_os(k)))
            .collect();
        // No other test in this crate reads or writes these variables.
        std::env::remove_var(DATA_DIR_ENV);
        std::env::set_var("XDG_DATA_HOME", "/xdg/data");
        assert_eq!(user_data_dir(), Some(PathBuf::from("/xdg/data/stemflow")));
        std::env::remove_var("XDG_DATA_HOME");
        std::env::set_var("HOME", "/home/someone");
        assert_eq!(
            user_data_dir(),
            Some(PathBuf::from("/home/someone/.local/share/stemflow"))
        );
        std::env::set_var(DATA_DIR_ENV, "/portable");
        assert_eq!(user_models_dir(), Some(PathBuf::from("/portable/models")));
        for (key, value) in saved {
            match value {
                Some(value) => std::env::set_var(key, value),
                None => std::env::remove_var(key),
            }
        }
    }

    #[test]
    fn finds_versioned_library_but_not_providers() {
        let dir = std::env::temp_dir().join(format!("stemflow-paths-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(find_onnxruntime_in(&dir), None);
        let name = if cfg!(windows) {
            "onnxruntime.dll"
        } else if cfg!(target_os = "macos") {
            "libonnxruntime.1.31.0.dylib"
        } else {
            "libonnxruntime.so.1.31.0"
        };
        std::fs::write(dir.join("libonnxruntime_providers_shared.so"), b"").unwrap();
        std::fs::write(dir.join(name), b"").unwrap();
        assert_eq!(find_onnxruntime_in(&dir), Some(dir.join(name)));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
