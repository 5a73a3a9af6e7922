fn main() {
    let fds = protox::compile(["onnx.proto"], ["../../third_party/onnx"]).unwrap();
    prost_build::Config::new().compile_fds(fds).unwrap();
}
