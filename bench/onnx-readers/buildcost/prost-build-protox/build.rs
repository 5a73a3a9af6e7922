fn main() {
    let fds = protox::compile(["onnx.proto"], ["../../proto"]).unwrap();
    prost_build::Config::new().compile_fds(fds).unwrap();
}
