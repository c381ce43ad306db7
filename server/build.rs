//! Generates the inference service from `proto/grpc_service.proto` (Triton's service and
//! extension messages, importing KServe's `grpc_predict_v2.proto` and Triton's
//! `model_config.proto`) at build time, with `protox` (a protobuf compiler in Rust), so the build
//! needs neither `protoc` nor a network. The descriptor set is kept too: the REST endpoints write
//! Triton's messages in protobuf's JSON mapping from it.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for proto in ["proto/grpc_service.proto", "proto/grpc_predict_v2.proto", "proto/model_config.proto"] {
        println!("cargo:rerun-if-changed={proto}");
    }
    let descriptors = protox::compile(["proto/grpc_service.proto"], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptors.bin"), prost::Message::encode_to_vec(&descriptors))?;
    let mut config = tonic_prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure().build_transport(false).compile_fds_with_config(descriptors, config)?;
    Ok(())
}
