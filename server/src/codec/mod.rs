//! Wire formats: KServe V1 and V2 JSON bodies to and from [`crate::tensor::Tensor`]s.

pub mod scalar;
pub mod v1;
pub mod v2;

#[cfg(test)]
mod proptests;

use serde::Deserialize;

use crate::error::{Error, Result};

/// Parses a request body that must be a JSON object; `what` names it in the error.
fn from_json_object<'a, T: Deserialize<'a>>(body: &'a [u8], what: &str) -> Result<T> {
    if body.trim_ascii_start().first() != Some(&b'{') {
        return Err(Error::invalid(format!("invalid {what}: the body must be a JSON object")));
    }
    serde_json::from_slice(body).map_err(|e| Error::invalid(format!("invalid {what}: {e}")))
}
