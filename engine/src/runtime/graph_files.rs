//! Which of a model's graphs runs: the CPU graph `NAME.onnx`, or one of the graphs Stemflow's
//! converters make for GPUs beside it, `NAME.gpu.onnx` (float32) and `NAME.gpu-f16.onnx`
//! (float16) ([`stemflow_paths::gpu_graph_file`]). A GPU graph takes a batch of chunks and runs
//! the STFT and its inverse itself, so a run copies audio in and stems out once; the CPU keeps
//! the graph tuned for its memory. Lists show the model once, under `NAME`.

use std::path::{Path, PathBuf};

use stemflow_paths::{gpu_graph_file, model_of_gpu_graph as named_model};

use super::device_id::DeviceId;
use super::session::Precision;

/// Which of a model's graphs runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphChoice {
    /// The graph file.
    pub path: PathBuf,
    /// `Some(precision)` for a GPU graph, `None` for the CPU graph.
    pub gpu_precision: Option<Precision>,
}

/// The file of `model`'s GPU graph at `precision` (whether it exists or not).
pub fn gpu_graph_path(model: &Path, precision: Precision) -> PathBuf {
    gpu_graph_file(model, precision == Precision::F16)
}

/// The precision of the GPU graph `path` is, by its name; `None` for any other file.
pub fn gpu_graph_precision(path: &Path) -> Option<Precision> {
    named_model(path).map(|(_, is_float16)| match is_float16 {
        true => Precision::F16,
        false => Precision::F32,
    })
}

/// The model (CPU graph) `path` is a GPU graph of, when it lies beside it.
pub fn model_of_gpu_graph(path: &Path) -> Option<PathBuf> {
    named_model(path)
        .map(|(model, _)| model)
        .filter(|model| model.is_file())
}

/// Whether `path` is a GPU graph beside its model's CPU graph (so lists leave it out).
pub fn is_gpu_graph_beside_model(path: &Path) -> bool {
    model_of_gpu_graph(path).is_some()
}

/// The graph of `model` to run on `device` at `precision`: on a GPU the GPU graph of that
/// precision, else of the other one, else the CPU graph; on the CPU the CPU graph. A GPU graph
/// given as the model runs as it is, but on the CPU its model's CPU graph does when it lies
/// beside it.
pub fn graph_for(model: &Path, device: DeviceId, precision: Precision) -> GraphChoice {
    if let Some(own) = gpu_graph_precision(model) {
        match model_of_gpu_graph(model) {
            Some(base) if device == DeviceId::CPU => return graph_for(&base, device, precision),
            _ => {
                return GraphChoice {
                    path: model.to_path_buf(),
                    gpu_precision: Some(own),
                }
            }
        }
    }
    if device != DeviceId::CPU {
        let other = match precision {
            Precision::F32 => Precision::F16,
            Precision::F16 => Precision::F32,
        };
        for wanted in [precision, other] {
            let path = gpu_graph_path(model, wanted);
            if path.is_file() {
                return GraphChoice {
                    path,
                    gpu_precision: Some(wanted),
                };
            }
        }
    }
    GraphChoice {
        path: model.to_path_buf(),
        gpu_precision: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::device_id::Provider;

    #[test]
    fn each_device_gets_its_graph_when_it_lies_beside_the_model() {
        let cuda = DeviceId {
            provider: Provider::Cuda,
            index: 0,
        };
        let dir = std::env::temp_dir().join(format!("stemflow-graph-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let model = dir.join("my.model.onnx");
        std::fs::write(&model, b"cpu").unwrap();
        let f32_graph = gpu_graph_path(&model, Precision::F32);
        let f16_graph = gpu_graph_path(&model, Precision::F16);
        // Nothing beside it yet: the CPU graph everywhere (an install from before).
        let on_gpu = graph_for(&model, cuda, Precision::F32);
        assert_eq!((on_gpu.path, on_gpu.gpu_precision), (model.clone(), None));
        // Only float16 beside it: a GPU takes it whatever was asked.
        std::fs::write(&f16_graph, b"f16").unwrap();
        assert!(is_gpu_graph_beside_model(&f16_graph));
        assert_eq!(graph_for(&model, cuda, Precision::F32).path, f16_graph);
        std::fs::write(&f32_graph, b"f32").unwrap();
        assert_eq!(graph_for(&model, cuda, Precision::F32).path, f32_graph);
        assert_eq!(graph_for(&model, cuda, Precision::F16).path, f16_graph);
        assert_eq!(graph_for(&model, DeviceId::CPU, Precision::F16).path, model);
        // A GPU graph named as the model: itself on a GPU, its model's CPU graph on the CPU.
        assert_eq!(graph_for(&f16_graph, cuda, Precision::F32).path, f16_graph);
        assert_eq!(
            graph_for(&f16_graph, DeviceId::CPU, Precision::F32).path,
            model
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
