//! Property tests: whatever bytes or shapes a client sends, decoding never panics, never
//! allocates for more elements than the body can hold, and every refusal is a 400.

use http::StatusCode;
use proptest::prelude::*;
use skiff_http::HttpError;

use super::{v1, v2};
use crate::error::Result;
use crate::model::{ModelSpec, TensorSpec};
use crate::tensor::{Datatype, Tensor};

fn config() -> ProptestConfig {
    ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
}

fn spec(inputs: &[(&str, Datatype, &[i64])]) -> ModelSpec {
    let inputs = inputs
        .iter()
        .map(|(name, datatype, shape)| TensorSpec { name: (*name).into(), datatype: *datatype, shape: shape.to_vec() })
        .collect();
    ModelSpec { name: "m".into(), inputs, outputs: vec![] }
}

/// Decodes a V2 body all the way to tensors, as the handler does.
fn v2_tensors(body: &[u8]) -> Result<Vec<Tensor>> {
    v2::decode(body)?.take_inputs(&[])
}

/// An `Ok` holds as many elements as its shape; an `Err` is a 400.
fn well_formed(outcome: Result<Vec<Tensor>>) -> std::result::Result<(), TestCaseError> {
    match outcome {
        Ok(tensors) => {
            for t in tensors {
                let n: usize = t.shape.iter().product();
                prop_assert_eq!(t.data.len(), n);
            }
        }
        Err(e) => prop_assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{}", e),
    }
    Ok(())
}

/// A JSON leaf of any kind, including values no tensor type holds.
fn leaf() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|v| v.to_string()),
        any::<u64>().prop_map(|v| v.to_string()),
        any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(|v| format!("{v:e}")),
        Just("1e39".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        "[a-z\\x00]{0,8}".prop_map(|s| serde_json::to_string(&s).unwrap()),
        Just("{}".to_owned()),
    ]
}

/// Nested JSON arrays of leaves, ragged or not.
fn data() -> impl Strategy<Value = String> {
    leaf().prop_recursive(4, 64, 6, |inner| {
        prop::collection::vec(inner, 0..6).prop_map(|items| format!("[{}]", items.join(",")))
    })
}

fn datatype() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(Datatype::ALL.map(Datatype::as_str).to_vec()).prop_map(str::to_owned),
        "[A-Z0-9]{1,6}",
    ]
}

fn shape() -> impl Strategy<Value = Vec<i64>> {
    prop::collection::vec(prop_oneof![-2i64..8, any::<i64>(), Just(i64::MAX), Just(1 << 62)], 0..40)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn any_bytes_are_a_400_or_tensors(body in prop::collection::vec(any::<u8>(), 0..256)) {
        well_formed(v2_tensors(&body))?;
        let iris = spec(&[("input", Datatype::F32, &[-1, 4])]);
        if let Err(e) = v1::decode(&body, &iris) {
            prop_assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        }
    }

    #[test]
    fn any_v2_input_is_a_400_or_matches_its_shape(
        shape in shape(),
        datatype in datatype(),
        data in data(),
    ) {
        let body = serde_json::json!({
            "inputs": [{ "name": "x", "shape": shape, "datatype": datatype, "data": serde_json::from_str::<serde_json::Value>(&data).unwrap() }]
        });
        well_formed(v2_tensors(body.to_string().as_bytes()))?;
    }

    #[test]
    fn any_v1_instances_are_a_400_or_a_rectangular_batch(instances in data(), two in any::<bool>()) {
        let body = format!(r#"{{"instances":{instances}}}"#);
        let model = if two {
            spec(&[("a", Datatype::I64, &[-1]), ("b", Datatype::Bytes, &[-1])])
        } else {
            spec(&[("x", Datatype::F16, &[-1, -1])])
        };
        well_formed(v1::decode(body.as_bytes(), &model))?;
    }
}
