//! KServe V1 (TensorFlow-Serving style) REST bodies: `instances` in, `predictions` out.
//!
//! Each instance is one row. A model with one input takes the instance as that input's row; a model
//! with several inputs takes an object keyed by input name. The rows are stacked on a new first
//! dimension and typed with the model's declared input datatype. A model with one output answers one
//! prediction per row; with several outputs, each prediction is an object keyed by output name.

use std::collections::HashMap;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use super::scalar::{self, Decoded};
use crate::error::{Error, Result};
use crate::model::{ModelSpec, TensorSpec};
use crate::tensor::{Tensor, element_count};

#[derive(Deserialize)]
struct PredictRequest<'a> {
    #[serde(borrow)]
    instances: Option<&'a RawValue>,
    #[serde(borrow)]
    inputs: Option<&'a RawValue>,
}

/// Parses a predict body into one tensor per model input, in graph order. With one input the
/// instances are that input's rows, typed as they are parsed; with several, each instance is an
/// object keyed by input name.
pub fn decode(body: &[u8], spec: &ModelSpec) -> Result<Vec<Tensor>> {
    let request: PredictRequest =
        serde_json::from_slice(body).map_err(|e| Error::invalid(format!("invalid predict request: {e}")))?;
    let rows = match (request.instances, request.inputs) {
        (Some(rows), None) | (None, Some(rows)) => rows,
        (Some(_), Some(_)) => {
            return Err(Error::invalid("give either \"instances\" or \"inputs\", not both"));
        }
        (None, None) => {
            return Err(Error::invalid("predict request needs \"instances\" (or \"inputs\")"));
        }
    };
    match spec.inputs.as_slice() {
        [only] => {
            let Decoded { data, shape } = scalar::typed(only.datatype, rows, usize::MAX, true)
                .map_err(|e| Error::invalid(format!("\"instances\" of input '{}': {e}", only.name)))?;
            if shape.first().is_none_or(|&n| n == 0) {
                return Err(Error::invalid("\"instances\" is empty"));
            }
            Ok(vec![Tensor { name: only.name.clone(), shape, data }])
        }
        many => {
            let objects: Vec<HashMap<String, &RawValue>> = serde_json::from_str(rows.get()).map_err(|e| {
                Error::invalid(format!(
                    "\"instances\" must be objects keyed by input name (model '{}' has {} inputs): {e}",
                    spec.name,
                    many.len()
                ))
            })?;
            if objects.is_empty() {
                return Err(Error::invalid("\"instances\" is empty"));
            }
            many.iter().map(|input| stack_rows(spec, input, &objects)).collect()
        }
    }
}

/// Stacks each instance's value for `input` on a new first dimension.
fn stack_rows(spec: &ModelSpec, input: &TensorSpec, objects: &[HashMap<String, &RawValue>]) -> Result<Tensor> {
    let mut rows: Vec<Decoded> = Vec::with_capacity(objects.len());
    for (i, object) in objects.iter().enumerate() {
        let raw = object.get(&input.name).ok_or_else(|| {
            Error::invalid(format!(
                "instance {i} must be an object with a value for input '{}' (model '{}' has {} inputs)",
                input.name,
                spec.name,
                spec.inputs.len()
            ))
        })?;
        let row = scalar::typed_row(input.datatype, raw)
            .map_err(|e| Error::invalid(format!("instance {i} of input '{}': {e}", input.name)))?;
        if let Some(first) = rows.first()
            && first.shape != row.shape
        {
            return Err(Error::invalid(format!(
                "instance {i} of input '{}' has shape {:?} but instance 0 has {:?}",
                input.name, row.shape, first.shape
            )));
        }
        rows.push(row);
    }
    let mut shape = vec![rows.len()];
    shape.extend(rows.first().map(|r| r.shape.clone()).unwrap_or_default());
    let mut rows = rows.into_iter().map(|r| r.data);
    let mut data = rows.next().expect("instances are not empty");
    for row in rows {
        data.append(row).expect("every row is typed as the input's datatype");
    }
    Ok(Tensor { name: input.name.clone(), shape, data })
}

/// Writes `{"predictions": [...]}`, one entry per row (first dimension) of the outputs.
pub fn encode(outputs: &[Tensor]) -> Result<Vec<u8>> {
    let rows = outputs.first().map_or(0, Tensor::rows);
    if let Some(bad) = outputs.iter().find(|t| t.rows() != rows) {
        return Err(Error::Inference(format!(
            "output '{}' has {} rows but output '{}' has {rows}",
            bad.name,
            bad.rows(),
            outputs[0].name
        )));
    }
    let body = PredictResponse { predictions: Predictions { outputs, rows } };
    Ok(serde_json::to_vec(&body).expect("tensors serialise"))
}

#[derive(Serialize)]
struct PredictResponse<'a> {
    predictions: Predictions<'a>,
}

/// The `predictions` array: row `i` of the only output, or an object of row `i` of every output.
struct Predictions<'a> {
    outputs: &'a [Tensor],
    rows: usize,
}

impl Serialize for Predictions<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_seq((0..self.rows).map(|row| Prediction { outputs: self.outputs, row }))
    }
}

struct Prediction<'a> {
    outputs: &'a [Tensor],
    row: usize,
}

impl Serialize for Prediction<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.outputs {
            [only] => Nested::row(only, self.row).serialize(serializer),
            many => serializer.collect_map(many.iter().map(|t| (&t.name, Nested::row(t, self.row)))),
        }
    }
}

/// The elements from `start` laid out as `dims`, written as nested arrays (a bare element when `dims` is empty).
struct Nested<'a> {
    tensor: &'a Tensor,
    start: usize,
    dims: &'a [usize],
}

impl<'a> Nested<'a> {
    /// Row `row` of `tensor`; a scalar tensor's only row is its element.
    fn row(tensor: &'a Tensor, row: usize) -> Nested<'a> {
        let dims = tensor.shape.get(1..).unwrap_or_default();
        Nested { tensor, start: row * element_count(dims), dims }
    }
}

impl Serialize for Nested<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        match self.dims.split_first() {
            None => self.tensor.data.serialize_element(self.start, serializer),
            Some((&n, inner)) => {
                let step = element_count(inner);
                serializer.collect_seq((0..n).map(|i| Nested {
                    tensor: self.tensor,
                    start: self.start + i * step,
                    dims: inner,
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{Datatype, TensorData};

    fn spec(inputs: &[(&str, Datatype, &[i64])]) -> ModelSpec {
        ModelSpec {
            name: "m".into(),
            inputs: inputs
                .iter()
                .map(|(n, d, s)| TensorSpec { name: (*n).into(), datatype: *d, shape: s.to_vec() })
                .collect(),
            outputs: vec![],
        }
    }

    #[test]
    fn instances_stack_into_a_batch() {
        let s = spec(&[("x", Datatype::F32, &[-1, 2])]);
        let got = decode(br#"{"instances":[[1,2],[3,4.5]]}"#, &s).unwrap();
        assert_eq!(
            got,
            vec![Tensor { name: "x".into(), shape: vec![2, 2], data: TensorData::F32(vec![1.0, 2.0, 3.0, 4.5]) }]
        );
        assert_eq!(decode(br#"{"inputs":[[1,2],[3,4.5]]}"#, &s).unwrap(), got);
    }

    #[test]
    fn several_inputs_take_objects() {
        let s = spec(&[("a", Datatype::I64, &[-1]), ("b", Datatype::Bytes, &[-1])]);
        let got = decode(br#"{"instances":[{"a":1,"b":"x"},{"a":-2,"b":"y"}]}"#, &s).unwrap();
        assert_eq!(got[0].data, TensorData::I64(vec![1, -2]));
        assert_eq!(got[1].data, TensorData::Bytes(vec!["x".into(), "y".into()]));
        let err = decode(br#"{"instances":[{"a":1}]}"#, &s).unwrap_err().to_string();
        assert_eq!(err, "instance 0 must be an object with a value for input 'b' (model 'm' has 2 inputs)");
    }

    #[test]
    fn malformed_instances_are_named() {
        let s = spec(&[("x", Datatype::F32, &[-1, 2])]);
        let cases: [(&[u8], &str); 7] = [
            (
                br#"{"instances":[[1,2],[3]]}"#,
                "\"instances\" of input 'x': nested arrays are not rectangular (in row 1)",
            ),
            (
                br#"{"instances":[[[1],[2,3]]]}"#,
                "\"instances\" of input 'x': nested arrays are not rectangular (in row 0)",
            ),
            (
                br#"{"instances":[[1,null]]}"#,
                "\"instances\" of input 'x': invalid type: null, expected an array of numbers, booleans or strings at line 1 column 8",
            ),
            (br#"{"instances":[[],1]}"#, "\"instances\" of input 'x': nested arrays are not rectangular"),
            (br#"{"instances":[]}"#, "\"instances\" is empty"),
            (br#"{"rows":[]}"#, "predict request needs \"instances\" (or \"inputs\")"),
            (
                br#"{"instances":[["a","b"]]}"#,
                "\"instances\" of input 'x': element 0 is \"a\", which is not a valid FP32 value",
            ),
        ];
        for (body, want) in cases {
            assert_eq!(decode(body, &s).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn predictions_are_rows_or_objects_of_rows() {
        let label = Tensor { name: "label".into(), shape: vec![2], data: TensorData::I64(vec![1, 0]) };
        let probs = Tensor { name: "p".into(), shape: vec![2, 2], data: TensorData::F32(vec![0.25, 0.75, 1.0, 0.0]) };
        let one = String::from_utf8(encode(std::slice::from_ref(&probs)).unwrap()).unwrap();
        assert_eq!(one, r#"{"predictions":[[0.25,0.75],[1.0,0.0]]}"#);
        let cube = Tensor { name: "c".into(), shape: vec![1, 2, 2], data: TensorData::U8(vec![1, 2, 3, 4]) };
        assert_eq!(String::from_utf8(encode(&[cube]).unwrap()).unwrap(), r#"{"predictions":[[[1,2],[3,4]]]}"#);
        let ragged = [Tensor { name: "a".into(), shape: vec![1], data: TensorData::I8(vec![1]) }, probs.clone()];
        assert_eq!(
            encode(&ragged).unwrap_err().to_string(),
            "inference failed: output 'p' has 2 rows but output 'a' has 1"
        );
        let both = String::from_utf8(encode(&[label, probs]).unwrap()).unwrap();
        assert_eq!(both, r#"{"predictions":[{"label":1,"p":[0.25,0.75]},{"label":0,"p":[1.0,0.0]}]}"#);
    }
}
