//! Generates the V2 gRPC messages (not the service: `bench-grpc` frames calls itself over hyper's
//! HTTP/2 client) from the server's `proto/grpc_predict_v2.proto`, with `protox`, so the build
//! needs neither `protoc` nor a network.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "../server/proto/grpc_predict_v2.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["../server/proto"])?;
    tonic_prost_build::configure().build_client(false).build_server(false).compile_fds(descriptors)?;
    Ok(())
}
