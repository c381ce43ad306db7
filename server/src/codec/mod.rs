//! Wire formats: KServe V1 and V2 JSON bodies to and from [`crate::tensor::Tensor`]s.

pub mod scalar;
pub mod v1;
pub mod v2;
