//! Messages and the service trait of the inference protocol over gRPC, generated at build time
//! from `proto/grpc_service.proto`: KServe's V2 messages (`grpc_predict_v2.proto`), Triton's
//! extensions and model configuration (`model_config.proto`). What the codec
//! ([`crate::codec::grpc`]) converts, the gRPC service ([`crate::grpc`]) serves and
//! [`crate::triton`] builds; the client is generated too, for tests and tools.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("inference");

/// The compiled descriptors of every message and the service (a `FileDescriptorSet`).
pub const DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptors.bin"));

/// [`DESCRIPTORS`], decoded once: the service's methods ([`crate::grpc::method_kind`]) and the
/// messages' fields ([`crate::triton::json`]).
pub fn pool() -> &'static prost_reflect::DescriptorPool {
    static POOL: std::sync::OnceLock<prost_reflect::DescriptorPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| prost_reflect::DescriptorPool::decode(DESCRIPTORS).expect("the build wrote valid descriptors"))
}
