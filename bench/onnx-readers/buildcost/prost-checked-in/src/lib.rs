#[allow(clippy::all)]
pub mod onnx;
