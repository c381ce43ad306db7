//! Generates the V2 gRPC service from `proto/grpc_predict_v2.proto` at build time, with `protox`
//! (a protobuf compiler in Rust), so the build needs neither `protoc` nor a network.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/grpc_predict_v2.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure().build_client(false).compile_fds(descriptors)?;
    Ok(())
}
