//! KServe V2 (Open Inference Protocol) REST bodies: infer request in, infer response out.

use serde::{Deserialize, Serialize};

use super::scalar::{self, FlatData};
use crate::error::{Error, Result};
use crate::tensor::{Datatype, Tensor, TensorData, element_count};

/// `POST /v2/models/{name}/infer` body. Unknown fields, such as `parameters`, are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct InferRequest {
    /// Echoed in the response; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// Input tensors.
    pub inputs: Vec<RequestInput>,
    /// Outputs to return; all of them when absent.
    #[serde(default)]
    pub outputs: Vec<RequestOutput>,
}

/// One input tensor as sent.
#[derive(Debug, Deserialize)]
pub struct RequestInput {
    /// Input name.
    pub name: String,
    /// Dimensions.
    pub shape: Vec<i64>,
    /// V2 datatype name.
    pub datatype: String,
    /// Elements, nested or flat, row-major.
    pub data: FlatData,
}

/// One requested output.
#[derive(Debug, Deserialize)]
pub struct RequestOutput {
    /// Output name.
    pub name: String,
}

/// Parses an infer request body.
pub fn decode(body: &[u8]) -> Result<InferRequest> {
    super::from_json_object(body, "infer request")
}

impl InferRequest {
    /// The requested output names, in request order.
    pub fn output_names(&self) -> Vec<String> {
        self.outputs.iter().map(|o| o.name.clone()).collect()
    }
}

impl RequestInput {
    /// Types the data and checks it against the declared shape.
    pub fn into_tensor(self) -> Result<Tensor> {
        let name = self.name;
        let datatype = Datatype::parse(&self.datatype).ok_or_else(|| {
            Error::invalid(format!(
                "input '{name}' has unknown datatype '{}' (one of {})",
                self.datatype,
                Datatype::ALL.map(Datatype::as_str).join(", ")
            ))
        })?;
        let shape = self.shape.iter().map(|&d| usize::try_from(d)).collect::<Result<Vec<_>, _>>().map_err(|_| {
            Error::invalid(format!("input '{name}' has a negative dimension in shape {:?}", self.shape))
        })?;
        let leaves = self.data.0;
        if leaves.len() != element_count(&shape) {
            return Err(Error::invalid(format!(
                "input '{name}' has {} elements but shape {shape:?} needs {}",
                leaves.len(),
                element_count(&shape)
            )));
        }
        let data = scalar::typed(datatype, leaves).map_err(|e| Error::invalid(format!("input '{name}': {e}")))?;
        Ok(Tensor { name, shape, data })
    }
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
        let mut req = decode(format!(r#"{{"inputs":[{json}]}}"#).as_bytes())?;
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
            (r#"{"name":"x","shape":[2],"datatype":"FLOAT","data":[1,2]}"#, "input 'x' has unknown datatype 'FLOAT'"),
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
            (
                r#"{"name":"x","shape":[1],"datatype":"FP32","data":[null]}"#,
                "invalid infer request: invalid type: null",
            ),
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
