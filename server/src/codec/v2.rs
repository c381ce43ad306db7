//! KServe V2 (Open Inference Protocol) REST bodies: infer request in, infer response out.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use skiff_http::response::brief;

use super::raw;
use super::scalar::{self, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::model::MODEL_VERSION;
use crate::tensor::{Datatype, Tensor, TensorData};

/// `POST /v2/models/{name}/infer` body (its JSON part, with the binary extension), borrowing
/// from it. Unknown fields and parameters are accepted and ignored.
#[derive(Debug, Deserialize)]
pub struct InferRequest<'a> {
    /// Echoed in the response; generated when absent.
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    /// Request parameters: `binary_data_output` asks for every output in binary.
    #[serde(default)]
    pub parameters: Parameters,
    /// Input tensors.
    #[serde(borrow)]
    pub inputs: Vec<RequestInput<'a>>,
    /// Outputs to return; all of them when absent.
    #[serde(default)]
    pub outputs: Vec<RequestOutput>,
}

/// The parameters of the binary tensor data extension, on a request, an input or an output.
#[derive(Debug, Default, Deserialize)]
pub struct Parameters {
    /// On an input: its data is this many bytes of the binary part, in input order.
    pub binary_data_size: Option<usize>,
    /// On a requested output: whether it is returned in binary.
    pub binary_data: Option<bool>,
    /// On the request: whether outputs without their own `binary_data` are returned in binary.
    pub binary_data_output: Option<bool>,
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
    /// `binary_data_size` when the data is in the binary part.
    #[serde(default)]
    pub parameters: Parameters,
    /// Elements, nested or flat, row-major; absent when the data is binary.
    #[serde(default, borrow)]
    pub data: Option<&'a RawValue>,
}

/// One requested output.
#[derive(Debug, Deserialize)]
pub struct RequestOutput {
    /// Output name.
    pub name: String,
    /// `binary_data` asks for it in binary.
    #[serde(default)]
    pub parameters: Parameters,
}

/// The header that marks a binary request or response: the length of its JSON part, which the
/// tensors' bytes follow.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// Splits a body into its JSON part and its binary part by [`HEADER_LENGTH`] (absent: all JSON).
pub fn split_binary<'a>(headers: &http::HeaderMap, body: &'a [u8]) -> Result<(&'a [u8], &'a [u8])> {
    let Some(value) = headers.get(HEADER_LENGTH) else { return Ok((body, &[])) };
    let length =
        value.to_str().ok().and_then(|v| v.trim().parse::<usize>().ok()).ok_or_else(|| {
            Error::invalid(format!("header {HEADER_LENGTH} must be a byte count, not {}", brief(value)))
        })?;
    if length > body.len() {
        return Err(Error::invalid(format!(
            "header {HEADER_LENGTH} is {length} but the body has only {} bytes",
            body.len()
        )));
    }
    Ok(body.split_at(length))
}

/// Parses an infer request's JSON part.
pub fn decode(json: &[u8]) -> Result<InferRequest<'_>> {
    super::from_json_object(json, "infer request")
}

impl InferRequest<'_> {
    /// The requested output names, in request order.
    pub fn output_names(&self) -> Vec<String> {
        self.outputs.iter().map(|o| o.name.clone()).collect()
    }

    /// Which answered outputs go in binary, in answer order (as [`Self::output_names`], or the
    /// model's outputs when none were named): an output's own `binary_data`, else the request's
    /// `binary_data_output`, else JSON.
    pub fn binary_outputs(&self, answered: usize) -> Vec<bool> {
        let all = self.parameters.binary_data_output.unwrap_or(false);
        if self.outputs.is_empty() {
            return vec![all; answered];
        }
        self.outputs.iter().map(|o| o.parameters.binary_data.unwrap_or(all)).collect()
    }

    /// Types every input, taking binary data from `binary` in input order; every byte of it must
    /// belong to an input.
    pub fn take_inputs(&mut self, mut binary: &[u8]) -> Result<Vec<Tensor>> {
        let tensors = std::mem::take(&mut self.inputs)
            .into_iter()
            .map(|input| input.into_tensor(&mut binary))
            .collect::<Result<Vec<_>>>()?;
        if !binary.is_empty() {
            return Err(Error::invalid(format!(
                "the body has {} bytes of binary data that no input's binary_data_size claims",
                binary.len()
            )));
        }
        Ok(tensors)
    }
}

impl RequestInput<'_> {
    /// Checks the shape, then types the data straight into the datatype's elements, taking no
    /// more than the shape holds: from JSON `data`, or from the front of `binary` when the input
    /// has a `binary_data_size`.
    pub fn into_tensor(self, binary: &mut &[u8]) -> Result<Tensor> {
        let name = self.name;
        let (datatype, shape, needed) =
            super::tensor_header(&format_args!("input '{name}'"), &self.datatype, &self.shape)?;
        let data = match (self.data, self.parameters.binary_data_size) {
            (Some(_), Some(_)) => {
                return Err(Error::invalid(format!("input '{name}' has both data and binary_data_size")));
            }
            (None, None) => {
                return Err(Error::invalid(format!("input '{name}' has neither data nor binary_data_size")));
            }
            (None, Some(size)) => {
                if size > binary.len() {
                    return Err(Error::invalid(format!(
                        "input '{name}' has binary_data_size {size} but only {} bytes of binary data remain",
                        binary.len()
                    )));
                }
                let (bytes, rest) = binary.split_at(size);
                *binary = rest;
                raw::decode(datatype, needed, bytes, &format!("input '{name}'"))?
            }
            (Some(json), None) => json_data(&name, datatype, &shape, needed, json)?,
        };
        Ok(Tensor { name, shape, data })
    }
}

/// JSON elements of one input, refused before parsing when the text is too short for the shape.
fn json_data(name: &str, datatype: Datatype, shape: &[usize], needed: usize, json: &RawValue) -> Result<TensorData> {
    let raw = json.get();
    if needed > scalar::most_elements(raw.len()) {
        return Err(Error::invalid(format!(
            "input '{name}' has shape {} of {needed} elements, more than its {} bytes of data can hold",
            brief(&shape),
            raw.len()
        )));
    }
    let decoded =
        scalar::typed(datatype, json, needed, false).map_err(|e| Error::invalid(format!("input '{name}': {e}")))?;
    let got = decoded.data.len();
    if got != needed {
        return Err(Error::invalid(format!(
            "input '{name}' has {got} elements but shape {} needs {needed}",
            brief(&shape)
        )));
    }
    Ok(decoded.data)
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
    model_version: &'a str,
    id: &'a str,
    outputs: Vec<ResponseOutput<'a>>,
}

#[derive(Serialize)]
struct ResponseOutput<'a> {
    name: &'a str,
    datatype: &'static str,
    shape: &'a [usize],
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BinarySize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a TensorData>,
}

#[derive(Serialize)]
struct BinarySize {
    binary_data_size: usize,
}

/// An encoded infer response: the body, and the length of its JSON part when binary outputs
/// follow it (sent as [`HEADER_LENGTH`]).
#[derive(Debug)]
pub struct Encoded {
    /// JSON, then each binary output's bytes in output order.
    pub body: Vec<u8>,
    /// `Some(json length)` when the body has a binary part.
    pub json_length: Option<usize>,
}

/// Writes an infer response with `outputs` in the given order; those whose `binary` flag is set
/// go after the JSON, as raw bytes.
pub fn encode(model_name: &str, id: &str, outputs: &[Tensor], binary: &[bool]) -> Encoded {
    let is_binary = |i: usize| binary.get(i).copied().unwrap_or(false);
    let raw: Vec<Option<Vec<u8>>> =
        outputs.iter().enumerate().map(|(i, t)| is_binary(i).then(|| raw::encode(&t.data))).collect();
    let response = InferResponse {
        model_name,
        model_version: MODEL_VERSION,
        id,
        outputs: outputs
            .iter()
            .zip(&raw)
            .map(|(t, raw)| ResponseOutput {
                name: &t.name,
                datatype: t.data.datatype().as_str(),
                shape: &t.shape,
                parameters: raw.as_ref().map(|r| BinarySize { binary_data_size: r.len() }),
                data: raw.is_none().then_some(&t.data),
            })
            .collect(),
    };
    let mut body = serde_json::to_vec(&response).expect("a response of plain tensors always serialises");
    if raw.iter().all(Option::is_none) {
        return Encoded { body, json_length: None };
    }
    let json_length = body.len();
    raw.into_iter().flatten().for_each(|r| body.extend_from_slice(&r));
    Encoded { body, json_length: Some(json_length) }
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;

    use super::*;

    fn tensor(json: &str) -> Result<Tensor> {
        let body = format!(r#"{{"inputs":[{json}]}}"#);
        let mut req = decode(body.as_bytes())?;
        req.inputs.remove(0).into_tensor(&mut &[][..])
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
            (r#"{"name":"x","shape":[1],"datatype":"FP32"}"#, "input 'x' has neither data nor binary_data_size"),
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
        let encoded = encode("m", "id-1", &[out], &[false]);
        assert_eq!(encoded.json_length, None);
        assert_eq!(
            String::from_utf8(encoded.body).unwrap(),
            r#"{"model_name":"m","model_version":"1","id":"id-1","outputs":[{"name":"y","datatype":"INT64","shape":[2],"data":[1,-2]}]}"#
        );
    }

    #[test]
    fn binary_inputs_come_from_the_part_after_the_json_in_input_order() {
        let json = r#"{"inputs":[{"name":"a","shape":[2],"datatype":"INT32","parameters":{"binary_data_size":8}},
            {"name":"b","shape":[1],"datatype":"FP32","data":[0.5]},
            {"name":"c","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}"#;
        let mut body = json.as_bytes().to_vec();
        body.extend(raw::encode(&TensorData::I32(vec![7, -1])));
        body.extend(raw::encode(&TensorData::Bytes(vec!["hi".into()])));
        let mut headers = http::HeaderMap::new();
        headers.insert(HEADER_LENGTH, json.len().into());
        let (json_part, binary) = split_binary(&headers, &body).unwrap();
        let mut request = decode(json_part).unwrap();
        let tensors = request.take_inputs(binary).unwrap();
        assert_eq!(tensors[0].data, TensorData::I32(vec![7, -1]));
        assert_eq!(tensors[1].data, TensorData::F32(vec![0.5]));
        assert_eq!(tensors[2].data, TensorData::Bytes(vec!["hi".into()]));

        let mut extra = decode(json_part).unwrap();
        let err = extra.take_inputs(&[binary, &[0]].concat()).unwrap_err();
        assert_eq!(err.to_string(), "the body has 1 bytes of binary data that no input's binary_data_size claims");
        let mut short = decode(json_part).unwrap();
        let err = short.take_inputs(&binary[..4]).unwrap_err();
        assert_eq!(err.to_string(), "input 'a' has binary_data_size 8 but only 4 bytes of binary data remain");
        headers.insert(HEADER_LENGTH, (body.len() + 1).into());
        assert!(split_binary(&headers, &body).unwrap_err().to_string().contains("has only"));
    }

    #[test]
    fn binary_outputs_follow_the_json_and_name_their_size() {
        let request = decode(br#"{"inputs":[],"parameters":{"binary_data_output":true},"outputs":[{"name":"a"},{"name":"b","parameters":{"binary_data":false}}]}"#).unwrap();
        assert_eq!(request.binary_outputs(2), [true, false]);
        assert_eq!(decode(br#"{"inputs":[]}"#).unwrap().binary_outputs(2), [false, false]);

        let a = Tensor { name: "a".into(), shape: vec![1], data: TensorData::F32(vec![1.0]) };
        let b = Tensor { name: "b".into(), shape: vec![1], data: TensorData::I64(vec![2]) };
        let encoded = encode("m", "i", &[a, b], &[true, false]);
        let length = encoded.json_length.unwrap();
        let json: serde_json::Value = serde_json::from_slice(&encoded.body[..length]).unwrap();
        assert_eq!(json["outputs"][0]["parameters"]["binary_data_size"], 4);
        assert!(json["outputs"][0].get("data").is_none());
        assert_eq!(json["outputs"][1]["data"], serde_json::json!([2]));
        assert_eq!(&encoded.body[length..], 1.0f32.to_le_bytes());
    }
}
