//! The graphs made for GPUs beside a converted model: `NAME.gpu.onnx` (float32) and
//! `NAME.gpu-f16.onnx` (float16) ([`stemflow_paths::gpu_graph_file`]), each converted like the
//! CPU graph for [`Target::Gpu`]. They are converted and written to temporary files first, one
//! at a time (one graph in memory), and renamed into place once the model itself is: a failed
//! conversion leaves the models folder as it was.

use std::path::{Path, PathBuf};

use stemflow_convert::{Precision, Target};

use crate::error::FetchError;
use crate::files::write_error;

/// The precisions GPU graphs are written in.
pub const GPU_PRECISIONS: [Precision; 2] = [Precision::Float32, Precision::Float16];

/// A conversion of the model for a target (`None`: the model has no graph for it).
pub type ConvertFor<'a> = dyn Fn(Target) -> Result<Option<Vec<u8>>, FetchError> + 'a;

/// GPU graphs converted and written next to where they go, not yet in place. Dropped without
/// [`PendingGpuGraphs::install`], they are removed.
#[derive(Debug)]
pub struct PendingGpuGraphs {
    /// `(temporary file, destination)`.
    files: Vec<(PathBuf, PathBuf)>,
}

impl PendingGpuGraphs {
    /// Converts the GPU graphs of the model that goes to `model` with `convert`, each written
    /// to a temporary file beside its destination. Fails with the conversion's error (the files
    /// written so far removed). Not realtime-safe.
    pub fn convert(model: &Path, convert: &ConvertFor<'_>) -> Result<Self, FetchError> {
        let mut pending = PendingGpuGraphs { files: Vec::new() };
        for precision in GPU_PRECISIONS {
            let bytes = convert(Target::Gpu(precision))
                .map_err(|error| error.with_context("its graph for GPUs: ", ""))?;
            let Some(bytes) = bytes else {
                continue;
            };
            let destination =
                stemflow_paths::gpu_graph_file(model, precision == Precision::Float16);
            let name = destination
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let temporary =
                destination.with_file_name(format!(".{name}.{}.gpu-partial", std::process::id()));
            if let Some(dir) = temporary.parent() {
                std::fs::create_dir_all(dir).map_err(|e| write_error(dir, &e))?;
            }
            pending.files.push((temporary.clone(), destination));
            write_synced(&temporary, &bytes)?;
        }
        Ok(pending)
    }

    /// Renames the graphs into place (replacing older ones: they are derived from the model
    /// just installed); returns where they are.
    pub fn install(mut self) -> Result<Vec<PathBuf>, FetchError> {
        let mut installed = Vec::new();
        for (temporary, destination) in std::mem::take(&mut self.files) {
            if let Err(error) = std::fs::rename(&temporary, &destination) {
                let _ = std::fs::remove_file(&temporary);
                return Err(write_error(&destination, &error));
            }
            installed.push(destination);
        }
        Ok(installed)
    }
}

impl Drop for PendingGpuGraphs {
    fn drop(&mut self) {
        for (temporary, _) in &self.files {
            let _ = std::fs::remove_file(temporary);
        }
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), FetchError> {
    use std::io::Write;
    let mut file = std::fs::File::create(path).map_err(|e| write_error(path, &e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| write_error(path, &e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_graphs_appear_only_when_installed_and_a_failure_leaves_nothing() {
        let dir = stemflow_kit::testing::scratch_dir("gpu-graphs");
        let model = dir.join("m.onnx");
        let listing = || {
            let mut names: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        let failing = PendingGpuGraphs::convert(&model, &|target| match target {
            Target::Gpu(Precision::Float16) => Err(FetchError::layout("no".into())),
            _ => Ok(Some(vec![1])),
        });
        assert!(failing.unwrap_err().to_string().contains("graph for GPUs"));
        assert!(listing().is_empty(), "{:?}", listing());

        let none = PendingGpuGraphs::convert(&model, &|_| Ok(None)).unwrap();
        assert!(none.install().unwrap().is_empty());
        let pending = PendingGpuGraphs::convert(&model, &|_| Ok(Some(vec![2]))).unwrap();
        assert_eq!(listing().len(), 2, "temporary files");
        let installed = pending.install().unwrap();
        assert_eq!(listing(), ["m.gpu-f16.onnx", "m.gpu.onnx"]);
        assert_eq!(installed.len(), 2);
        assert_eq!(std::fs::read(dir.join("m.gpu.onnx")).unwrap(), [2]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
