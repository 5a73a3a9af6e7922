//! Generates ONNX types with prost from onnx.proto, compiled by protox (no protoc):
//! `$OUT_DIR/vec/onnx.rs` (bytes fields as Vec<u8>), `$OUT_DIR/bytes/onnx.rs` (bytes::Bytes),
//! `$OUT_DIR/lite/onnx_lite.rs` (a trimmed schema without initializers).
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=third_party/onnx");
    let fds = protox::compile(["onnx.proto"], ["third_party/onnx"]).unwrap();
    for (dir, bytes) in [("vec", false), ("bytes", true)] {
        let dir = out.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut config = prost_build::Config::new();
        config.out_dir(&dir);
        if bytes {
            config.bytes(["."]);
        }
        config.compile_fds(fds.clone()).unwrap();
    }
    let lite = protox::compile(["onnx_lite.proto"], ["third_party/onnx"]).unwrap();
    let dir = out.join("lite");
    std::fs::create_dir_all(&dir).unwrap();
    prost_build::Config::new().out_dir(&dir).compile_fds(lite).unwrap();
}
