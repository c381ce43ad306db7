//! V2 gRPC messages to and from [`Tensor`]s: typed `contents` or `raw_input_contents` in,
//! typed contents or `raw_output_contents` out.

use crate::codec::raw;
use crate::error::{Error, Result};
use crate::proto::model_infer_response::InferOutputTensor;
use crate::proto::{InferTensorContents, ModelInferRequest, ModelInferResponse};
use crate::tensor::{Datatype, Tensor, TensorData, element_count};
use skiff_http::response::brief;

/// A decoded `ModelInfer` request.
#[derive(Debug)]
pub struct Decoded {
    /// The input tensors, in request order.
    pub inputs: Vec<Tensor>,
    /// The outputs asked for, in request order; empty for all.
    pub wanted: Vec<String>,
    /// Whether the answer carries raw output contents (the request sent raw inputs).
    pub raw: bool,
}

/// Decodes the inputs of `request`, taking its raw contents when it has them.
pub fn decode(request: &mut ModelInferRequest) -> Result<Decoded> {
    let raw_contents = std::mem::take(&mut request.raw_input_contents);
    let raw = !raw_contents.is_empty();
    if raw && raw_contents.len() != request.inputs.len() {
        return Err(Error::invalid(format!(
            "raw_input_contents has {} entries but there are {} inputs",
            raw_contents.len(),
            request.inputs.len()
        )));
    }
    let mut raw_contents = raw_contents.into_iter();
    let mut inputs = Vec::with_capacity(request.inputs.len());
    for input in std::mem::take(&mut request.inputs) {
        let what = format!("input '{}'", input.name);
        let (datatype, shape, count) = super::tensor_header(&what, &input.datatype, &input.shape)?;
        let data = match raw_contents.next() {
            Some(_) if input.contents.is_some() => {
                return Err(Error::invalid(format!(
                    "{what} has contents although the request sends raw_input_contents"
                )));
            }
            Some(bytes) => raw::decode(datatype, count, &bytes, &what)?,
            None => {
                let contents = input.contents.ok_or_else(|| {
                    Error::invalid(format!("{what} has neither contents nor an entry in raw_input_contents"))
                })?;
                typed(datatype, contents, &what)?
            }
        };
        if data.len() != count {
            return Err(Error::invalid(format!(
                "{what} has {} elements but shape {} needs {count}",
                data.len(),
                brief(&shape)
            )));
        }
        inputs.push(Tensor { name: input.name, shape, data });
    }
    let wanted = request.outputs.iter().map(|o| o.name.clone()).collect();
    Ok(Decoded { inputs, wanted, raw })
}

/// The elements of `datatype` from its field of `contents`; narrow integers are range-checked.
fn typed(datatype: Datatype, contents: InferTensorContents, what: &str) -> Result<TensorData> {
    fn narrow<W: Copy + std::fmt::Display, N: TryFrom<W>>(
        values: Vec<W>,
        what: &str,
        datatype: Datatype,
    ) -> Result<Vec<N>> {
        values
            .into_iter()
            .enumerate()
            .map(|(i, v)| {
                N::try_from(v).map_err(|_| {
                    Error::invalid(format!("{what}: element {i} is {v}, which is not a valid {datatype} value"))
                })
            })
            .collect()
    }
    Ok(match datatype {
        Datatype::Bool => TensorData::Bool(contents.bool_contents),
        Datatype::I8 => TensorData::I8(narrow(contents.int_contents, what, datatype)?),
        Datatype::I16 => TensorData::I16(narrow(contents.int_contents, what, datatype)?),
        Datatype::I32 => TensorData::I32(contents.int_contents),
        Datatype::I64 => TensorData::I64(contents.int64_contents),
        Datatype::U8 => TensorData::U8(narrow(contents.uint_contents, what, datatype)?),
        Datatype::U16 => TensorData::U16(narrow(contents.uint_contents, what, datatype)?),
        Datatype::U32 => TensorData::U32(contents.uint_contents),
        Datatype::U64 => TensorData::U64(contents.uint64_contents),
        Datatype::F32 => TensorData::F32(contents.fp32_contents),
        Datatype::F64 => TensorData::F64(contents.fp64_contents),
        Datatype::Bytes => TensorData::Bytes(
            contents
                .bytes_contents
                .iter()
                .enumerate()
                .map(|(i, b)| raw::text(b, &format!("{what}: element {i}")))
                .collect::<Result<_>>()?,
        ),
        Datatype::F16 | Datatype::Bf16 => {
            return Err(Error::invalid(format!(
                "{what} is {datatype}, which has no typed contents field: send it in raw_input_contents"
            )));
        }
    })
}

/// Builds the answer. Outputs are raw when the request was, or when one of them is FP16/BF16
/// (which have no typed field); raw contents are all or nothing.
pub fn encode(
    model_name: &str,
    model_version: &str,
    id: String,
    outputs: Vec<Tensor>,
    raw: bool,
) -> ModelInferResponse {
    let raw = raw || outputs.iter().any(|t| matches!(t.data.datatype(), Datatype::F16 | Datatype::Bf16));
    let mut response = ModelInferResponse {
        model_name: model_name.to_owned(),
        model_version: model_version.to_owned(),
        id,
        ..ModelInferResponse::default()
    };
    for tensor in outputs {
        let mut output = InferOutputTensor {
            name: tensor.name,
            datatype: tensor.data.datatype().as_str().to_owned(),
            shape: tensor.shape.iter().map(|&d| d as i64).collect(),
            ..InferOutputTensor::default()
        };
        debug_assert_eq!(element_count(&tensor.shape), tensor.data.len());
        if raw {
            response.raw_output_contents.push(raw::encode(&tensor.data));
        } else {
            output.contents = Some(contents(tensor.data));
        }
        response.outputs.push(output);
    }
    response
}

/// Typed contents for any datatype but FP16/BF16.
fn contents(data: TensorData) -> InferTensorContents {
    let mut c = InferTensorContents::default();
    match data {
        TensorData::Bool(v) => c.bool_contents = v,
        TensorData::I8(v) => c.int_contents = v.into_iter().map(i32::from).collect(),
        TensorData::I16(v) => c.int_contents = v.into_iter().map(i32::from).collect(),
        TensorData::I32(v) => c.int_contents = v,
        TensorData::I64(v) => c.int64_contents = v,
        TensorData::U8(v) => c.uint_contents = v.into_iter().map(u32::from).collect(),
        TensorData::U16(v) => c.uint_contents = v.into_iter().map(u32::from).collect(),
        TensorData::U32(v) => c.uint_contents = v,
        TensorData::U64(v) => c.uint64_contents = v,
        TensorData::F32(v) => c.fp32_contents = v,
        TensorData::F64(v) => c.fp64_contents = v,
        TensorData::Bytes(v) => c.bytes_contents = v.into_iter().map(String::into_bytes).collect(),
        TensorData::F16(_) | TensorData::Bf16(_) => unreachable!("half precision is always sent raw"),
    }
    c
}

#[cfg(test)]
mod tests {
    use half::f16;

    use super::*;
    use crate::proto::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};

    fn input(name: &str, datatype: &str, shape: &[i64], contents: Option<InferTensorContents>) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            contents,
            ..InferInputTensor::default()
        }
    }

    #[test]
    fn typed_and_raw_inputs_decode_alike() {
        let fp32 = InferTensorContents { fp32_contents: vec![1.0, 2.0], ..Default::default() };
        let mut typed = ModelInferRequest {
            inputs: vec![input("x", "FP32", &[1, 2], Some(fp32))],
            outputs: vec![InferRequestedOutputTensor { name: "y".into(), ..Default::default() }],
            ..Default::default()
        };
        let mut raw = ModelInferRequest {
            inputs: vec![input("x", "FP32", &[1, 2], None)],
            raw_input_contents: vec![raw::encode(&TensorData::F32(vec![1.0, 2.0]))],
            ..Default::default()
        };
        let typed = decode(&mut typed).unwrap();
        let raw = decode(&mut raw).unwrap();
        assert_eq!(typed.inputs, raw.inputs);
        assert_eq!(typed.wanted, ["y"]);
        assert!(!typed.raw && raw.raw);
    }

    #[test]
    fn bad_requests_are_400s_naming_the_input() {
        let ints = |v: Vec<i32>| Some(InferTensorContents { int_contents: v, ..Default::default() });
        let cases = [
            (
                vec![input("x", "INT8", &[1], ints(vec![300]))],
                vec![],
                "input 'x': element 0 is 300, which is not a valid INT8 value",
            ),
            (vec![input("x", "INT32", &[3], ints(vec![1]))], vec![], "input 'x' has 1 elements but shape [3] needs 3"),
            (
                vec![input("x", "FP16", &[1], ints(vec![1]))],
                vec![],
                "input 'x' is FP16, which has no typed contents field",
            ),
            (vec![input("x", "FLOAT", &[1], None)], vec![], "input 'x' has unknown datatype \"FLOAT\""),
            (vec![input("x", "INT32", &[-1], None)], vec![], "input 'x' has a negative dimension"),
            (vec![input("x", "INT32", &[1], None)], vec![], "input 'x' has neither contents nor an entry"),
            (
                vec![input("x", "INT32", &[1], None), input("z", "INT32", &[1], None)],
                vec![vec![0; 4]],
                "raw_input_contents has 1 entries but there are 2 inputs",
            ),
            (vec![input("x", "INT32", &[1], ints(vec![1]))], vec![vec![0; 4]], "input 'x' has contents although"),
        ];
        for (inputs, raw_input_contents, want) in cases {
            let mut request = ModelInferRequest { inputs, raw_input_contents, ..Default::default() };
            let err = decode(&mut request).unwrap_err();
            assert!(matches!(err, Error::InvalidRequest(_)));
            assert!(err.to_string().starts_with(want), "want {want}, got {err}");
        }
    }

    #[test]
    fn outputs_are_typed_unless_raw_was_sent_or_half_precision_forces_it() {
        let out = |data| Tensor { name: "y".into(), shape: vec![2], data };
        let typed = encode("m", "1", "id".into(), vec![out(TensorData::I64(vec![1, -2]))], false);
        assert_eq!(typed.outputs[0].contents.as_ref().unwrap().int64_contents, [1, -2]);
        assert!(typed.raw_output_contents.is_empty());
        assert_eq!((typed.model_name.as_str(), typed.model_version.as_str(), typed.id.as_str()), ("m", "1", "id"));

        let raw = encode("m", "1", "id".into(), vec![out(TensorData::I64(vec![1, -2]))], true);
        assert!(raw.outputs[0].contents.is_none());
        assert_eq!(raw.raw_output_contents[0].len(), 16);

        let half = encode("m", "1", "id".into(), vec![out(TensorData::F16(vec![f16::ONE, f16::ZERO]))], false);
        assert_eq!(half.raw_output_contents.len(), 1);
        assert_eq!(half.outputs[0].shape, [2]);
    }
}
