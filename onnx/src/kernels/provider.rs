//! [`Provider`]: the ONNX Runtime execution providers the kernel table covers.

/// An ONNX Runtime execution provider the table covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Provider {
    /// `CPUExecutionProvider` (onnxruntime 1.31.0).
    Cpu,
    /// `CUDAExecutionProvider` (onnxruntime-gpu 1.31.0).
    Cuda,
    /// `DmlExecutionProvider` (onnxruntime-directml 1.24.4).
    DirectMl,
}

impl Provider {
    /// The three, in the order reports list them.
    pub const ALL: [Provider; 3] = [Provider::Cpu, Provider::Cuda, Provider::DirectMl];

    /// `cpu`, `cuda`, `directml`: the names the table and the command line use.
    pub fn table_name(self) -> &'static str {
        match self {
            Provider::Cpu => "cpu",
            Provider::Cuda => "cuda",
            Provider::DirectMl => "directml",
        }
    }

    /// The provider of a table name.
    pub fn from_table_name(name: &str) -> Option<Provider> {
        Provider::ALL.into_iter().find(|p| p.table_name() == name)
    }

    /// `CPU`, `CUDA`, `DirectML`, for messages.
    pub fn display_name(self) -> &'static str {
        match self {
            Provider::Cpu => "CPU",
            Provider::Cuda => "CUDA",
            Provider::DirectMl => "DirectML",
        }
    }
}
