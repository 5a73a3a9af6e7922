pub use onnx_protobuf::*;
