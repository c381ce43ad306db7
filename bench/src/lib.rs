//! Benchmark programs for Skiff: a closed-loop HTTP load generator ([`load`]), peer processes
//! started and stopped side by side ([`peer`]), the table that compares them ([`report`]), a
//! REST and gRPC load generator with HDR percentiles and byte counts ([`wire`]), and the storage
//! benchmark's MinIO ([`minio`]) and figures ([`storage`]), and NVIDIA's perf_analyzer as a
//! second load generator ([`perf_analyzer`]).
//! Benchmarks print figures; they never assert on timings.

pub mod load;
pub mod minio;
pub mod peer;
pub mod perf_analyzer;
pub mod report;
pub mod status;
pub mod storage;
pub mod wire;

/// The request every benchmark sends: a V2 infer of one iris row.
pub const IRIS_V2_BODY: &str =
    r#"{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[6.8,2.8,4.8,1.4]}]}"#;
