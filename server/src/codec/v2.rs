//! KServe V2 (Open Inference Protocol) REST bodies: infer request in, infer response out.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use skiff_http::response::brief;

use super::scalar::{self, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::tensor::{Datatype, Tensor, TensorData};

/// `POST /v2/models/{name}/infer` body, borrowing from it. Unknown fields, such as `parameters`,
/// are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct InferRequest<'a> {
    /// Echoed in the response; generated when absent.
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    /// Input tensors.
    #[serde(borrow)]
    pub inputs: Vec<RequestInput<'a>>,
    /// Outputs to return; all of them when absent.
    #[serde(default)]
    pub outputs: Vec<RequestOutput>,
}

/// One input tensor as sent; its data stays raw JSON until the datatype and shape are known.
#[derive(Debug, Deserialize)]
pub struct RequestInput<'a> {
    /// Input name.
    pub name: String,
    /// Dimensions (at most [`MAX_DEPTH`] of them).
    #[serde(deserialize_with = "bounded_shape")]
    pub shape: Vec<i64>,
    /// V2 datatype name.
    pub datatype: String,
    /// Elements, nested or flat, row-major.
    #[serde(borrow)]
    pub data: &'a RawValue,
}

/// One requested output.
#[derive(Debug, Deserialize)]
pub struct RequestOutput {
    /// Output name.
    pub name: String,
}

/// Parses an infer request body.
pub fn decode(body: &[u8]) -> Result<InferRequest<'_>> {
    super::from_json_object(body, "infer request")
}

impl InferRequest<'_> {
    /// The requested output names, in request order.
    pub fn output_names(&self) -> Vec<String> {
        self.outputs.iter().map(|o| o.name.clone()).collect()
    }
}

impl RequestInput<'_> {
    /// Checks the shape, then types the data straight into the datatype's elements, taking no
    /// more than the shape holds.
    pub fn into_tensor(self) -> Result<Tensor> {
        let name = self.name;
        let datatype = Datatype::parse(&self.datatype).ok_or_else(|| {
            Error::invalid(format!(
                "input '{name}' has unknown datatype {} (one of {})",
                brief(&self.datatype),
                Datatype::ALL.map(Datatype::as_str).join(", ")
            ))
        })?;
        let shape = self.shape.iter().map(|&d| usize::try_from(d)).collect::<Result<Vec<_>, _>>().map_err(|_| {
            Error::invalid(format!("input '{name}' has a negative dimension in shape {}", brief(&self.shape)))
        })?;
        let raw = self.data.get();
        let needed = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d)).ok_or_else(|| {
            Error::invalid(format!("input '{name}' has shape {} whose element count overflows", brief(&shape)))
        })?;
        if needed > scalar::most_elements(raw.len()) {
            return Err(Error::invalid(format!(
                "input '{name}' has shape {} of {needed} elements, more than its {} bytes of data can hold",
                brief(&shape),
                raw.len()
            )));
        }
        let decoded = scalar::typed(datatype, self.data, needed, false)
            .map_err(|e| Error::invalid(format!("input '{name}': {e}")))?;
        let got = decoded.data.len();
        if got != needed {
            return Err(Error::invalid(format!(
                "input '{name}' has {got} elements but shape {} needs {needed}",
                brief(&shape)
            )));
        }
        Ok(Tensor { name, shape, data: decoded.data })
    }
}

/// A shape of at most [`MAX_DEPTH`] dimensions, refused as soon as it has more.
fn bounded_shape<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<i64>, D::Error> {
    struct Dims;
    impl<'de> Visitor<'de> for Dims {
        type Value = Vec<i64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "an array of at most {MAX_DEPTH} integers")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<i64>, A::Error> {
            let mut dims = Vec::new();
            while let Some(d) = seq.next_element()? {
                if dims.len() == MAX_DEPTH {
                    return Err(serde::de::Error::custom(format!("shape has more than {MAX_DEPTH} dimensions")));
                }
                dims.push(d);
            }
            Ok(dims)
        }
    }
    deserializer.deserialize_seq(Dims)
}

#[derive(Serialize)]
struct InferResponse<'a> {
    model_name: &'a str,
    id: &'a str,
    outputs: Vec<ResponseOutput<'a>>,
}

#[derive(Serialize)]
struct ResponseOutput<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [usize],
    data: &'a TensorData,
}

/// Writes an infer response with `outputs` in the given order.
pub fn encode(model_name: &str, id: &str, outputs: &[Tensor]) -> Vec<u8> {
    let response = InferResponse {
        model_name,
        id,
        outputs: outputs
            .iter()
            .map(|t| ResponseOutput {
                name: &t.name,
                datatype: t.data.datatype().as_str(),
                shape: &t.shape,
                data: &t.data,
            })
            .collect(),
    };
    serde_json::to_vec(&response).expect("a response of plain tensors always serialises")
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;

    use super::*;

    fn tensor(json: &str) -> Result<Tensor> {
        let body = format!(r#"{{"inputs":[{json}]}}"#);
        let mut req = decode(body.as_bytes())?;
        req.inputs.remove(0).into_tensor()
    }

    fn message(json: &str) -> String {
        tensor(json).unwrap_err().to_string()
    }

    #[test]
    fn decodes_nested_and_flat_data_alike() {
        let flat = tensor(r#"{"name":"x","shape":[2,2],"datatype":"INT32","data":[1,2,3,4]}"#).unwrap();
        let nested = tensor(r#"{"name":"x","shape":[2,2],"datatype":"INT32","data":[[1,2],[3,4]]}"#).unwrap();
        assert_eq!(flat, nested);
        assert_eq!(flat.data, TensorData::I32(vec![1, 2, 3, 4]));
    }

    #[test]
    fn every_request_error_is_a_400_that_says_what_is_wrong() {
        let cases = [
            (r#"{"name":"x","shape":[2],"datatype":"FLOAT","data":[1,2]}"#, "input 'x' has unknown datatype \"FLOAT\""),
            (
                r#"{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}"#,
                "input 'x' has a negative dimension in shape [-1]",
            ),
            (
                r#"{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}"#,
                "input 'x' has 2 elements but shape [3] needs 3",
            ),
            (
                r#"{"name":"x","shape":[1],"datatype":"UINT8","data":[300]}"#,
                "input 'x': element 0 is 300, which is not a valid UINT8 value",
            ),
            (r#"{"name":"x","shape":[1],"datatype":"FP32"}"#, "invalid infer request: missing field `data`"),
            (r#"{"name":"x","shape":[1],"datatype":"FP32","data":[null]}"#, "input 'x': invalid type: null"),
        ];
        for (json, want) in cases {
            let err = tensor(json).unwrap_err();
            assert_eq!(err.status(), http::StatusCode::BAD_REQUEST, "{json}");
            assert!(err.to_string().starts_with(want), "{json}: got {err}");
        }
        assert!(message(r#"{"name":"x"}"#).starts_with("invalid infer request: missing field"));
        assert!(
            decode(b"{not json").unwrap_err().to_string().starts_with("invalid infer request: key must be a string")
        );
    }

    #[test]
    fn requested_outputs_and_id_are_read() {
        let req =
            decode(br#"{"id":"r1","inputs":[],"outputs":[{"name":"b"},{"name":"a"}],"parameters":{"k":1}}"#).unwrap();
        assert_eq!(req.id.as_deref(), Some("r1"));
        assert_eq!(req.output_names(), ["b", "a"]);
    }

    #[test]
    fn encodes_the_v2_response_shape() {
        let out = Tensor { name: "y".into(), shape: vec![2], data: TensorData::I64(vec![1, -2]) };
        let body = encode("m", "id-1", &[out]);
        assert_eq!(
            String::from_utf8(body).unwrap(),
            r#"{"model_name":"m","id":"id-1","outputs":[{"name":"y","datatype":"INT64","shape":[2],"data":[1,-2]}]}"#
        );
    }
}
