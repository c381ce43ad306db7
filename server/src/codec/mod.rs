//! Wire formats to and from [`crate::tensor::Tensor`]s: KServe V1 and V2 JSON bodies, V2's binary
//! tensor data and its gRPC messages.

pub mod grpc;
pub mod raw;
pub mod scalar;
pub mod v1;
pub mod v2;

#[cfg(test)]
mod proptests;

use std::fmt;

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::tensor::Datatype;
use skiff_http::response::brief;

/// Parses a request body that must be a JSON object; `what` names it in the error.
fn from_json_object<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(Error::invalid(format!("invalid {what}: the body must be a JSON object")));
    }
    serde_json::from_slice(body).map_err(|e| Error::invalid(format!("invalid {what}: {e}")))
}

/// Reads a request tensor's datatype and shape, whichever protocol it came in: the datatype, the
/// dimensions and the element count they hold; `what` names the tensor in errors (written only
/// for one: a request's every tensor passes here).
fn tensor_header(what: &dyn fmt::Display, datatype: &str, shape: &[i64]) -> Result<(Datatype, Vec<usize>, usize)> {
    let datatype = Datatype::parse(datatype).ok_or_else(|| {
        Error::invalid(format!(
            "{what} has unknown datatype {} (one of {})",
            brief(datatype),
            Datatype::ALL.map(Datatype::as_str).join(", ")
        ))
    })?;
    let dims = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| Error::invalid(format!("{what} has a negative dimension in shape {}", brief(shape))))?;
    let count = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| Error::invalid(format!("{what} has shape {} whose element count overflows", brief(&dims))))?;
    Ok((datatype, dims, count))
}
