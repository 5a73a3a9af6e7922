//! The graphs Stemflow's converters make for GPUs lie beside a model's CPU graph `NAME.onnx`:
//! `NAME.gpu.onnx` (float32) and `NAME.gpu-f16.onnx` (float16). The converters write them, the
//! engine picks one by device, lists show the model once.

use std::path::{Path, PathBuf};

/// What a float32 GPU graph's file name adds before `.onnx`.
pub const GPU_GRAPH_SUFFIX: &str = ".gpu";
/// What a float16 GPU graph's file name adds before `.onnx`.
pub const GPU_F16_GRAPH_SUFFIX: &str = ".gpu-f16";

/// The GPU graph of `model` (float16 or float32), whether it exists or not.
pub fn gpu_graph_file(model: &Path, is_float16: bool) -> PathBuf {
    let suffix = if is_float16 {
        GPU_F16_GRAPH_SUFFIX
    } else {
        GPU_GRAPH_SUFFIX
    };
    let stem = model
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    model.with_file_name(format!("{stem}{suffix}.onnx"))
}

/// The model `NAME.onnx` that `path` is the GPU graph of, and whether that graph is float16;
/// `None` when `path` is not named as a GPU graph.
pub fn model_of_gpu_graph(path: &Path) -> Option<(PathBuf, bool)> {
    let name = path.file_name()?.to_str()?;
    let stem = name.strip_suffix(".onnx")?;
    let (base, is_float16) = match stem.strip_suffix(GPU_F16_GRAPH_SUFFIX) {
        Some(base) => (base, true),
        None => (stem.strip_suffix(GPU_GRAPH_SUFFIX)?, false),
    };
    (!base.is_empty()).then(|| (path.with_file_name(format!("{base}.onnx")), is_float16))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_graphs_are_named_beside_their_model_and_back() {
        let model = Path::new("/m/my.model.onnx");
        assert_eq!(
            gpu_graph_file(model, false),
            Path::new("/m/my.model.gpu.onnx")
        );
        assert_eq!(
            gpu_graph_file(model, true),
            Path::new("/m/my.model.gpu-f16.onnx")
        );
        assert_eq!(
            model_of_gpu_graph(Path::new("/m/my.model.gpu-f16.onnx")),
            Some((model.to_path_buf(), true))
        );
        assert_eq!(
            model_of_gpu_graph(Path::new("/m/my.model.gpu.onnx")),
            Some((model.to_path_buf(), false))
        );
        assert_eq!(model_of_gpu_graph(model), None);
        assert_eq!(model_of_gpu_graph(Path::new("/m/.gpu.onnx")), None);
    }
}
