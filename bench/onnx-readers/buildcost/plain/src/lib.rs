pub use stemflow_onnx::wire::*;
