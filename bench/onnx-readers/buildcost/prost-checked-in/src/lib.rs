// prost-build's output for onnx.proto, checked in (it is generated code, so it stands under
// third_party/ with the schema it comes from).
#[allow(clippy::all)]
#[path = "../../../third_party/prost-generated/onnx.rs"]
pub mod onnx;
