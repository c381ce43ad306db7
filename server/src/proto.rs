//! Messages and the service trait of KServe's V2 gRPC protocol, generated at build time from
//! `proto/grpc_predict_v2.proto`: what the codec ([`crate::codec::grpc`]) converts and the gRPC
//! service ([`crate::grpc`]) serves.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("inference");
