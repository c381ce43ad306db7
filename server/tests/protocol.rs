//! V1 and V2 answers of the real server on the fixture models, checked against ONNX Runtime's
//! Python reference outputs (`tests/fixtures/expected`, made by `tests/fixtures/build_fixtures.py`).

mod common;

use common::*;
use http::StatusCode;
use serde_json::{Value, json};

fn dir(relative: &str) -> String {
    repo().join(relative).display().to_string()
}

#[tokio::test]
async fn v2_infer_matches_the_reference_for_every_example_model() {
    let server = Server::start_ready(&["--model-dir", &dir("examples/models")]).await;
    for model in ["iris", "mlp", "adder"] {
        for case in expectations(model)["cases"].as_array().unwrap() {
            let context = format!("{model}/{}", case["name"]);
            let request = json!({ "id": context, "inputs": case["inputs"] });
            let (status, body) = post(&server.url(&format!("/v2/models/{model}/infer")), &request).await;
            assert_eq!(status, StatusCode::OK, "{context}: {body}");
            assert_eq!(body["model_name"], model);
            assert_eq!(body["id"], context);
            assert_outputs_match(&body["outputs"], &case["outputs"], &context);
        }
    }
}

#[tokio::test]
async fn every_datatype_round_trips_through_onnx_runtime() {
    let server = Server::start_ready(&["--model-dir", &dir("tests/fixtures/models/dtypes")]).await;
    let case = &expectations("dtypes")["cases"][0];
    let (status, body) = post(&server.url("/v2/models/dtypes/infer"), &json!({ "inputs": case["inputs"] })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["outputs"].as_array().unwrap().len(), 14);
    assert_outputs_match(&body["outputs"], &case["outputs"], "dtypes");

    let nested: Vec<Value> = case["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|input| {
            let rows: Vec<Value> =
                input["data"].as_array().unwrap().chunks(2).map(|r| Value::from(r.to_vec())).collect();
            json!({ "name": input["name"], "datatype": input["datatype"], "shape": input["shape"], "data": rows })
        })
        .collect();
    let (status, nested_body) = post(&server.url("/v2/models/dtypes/infer"), &json!({ "inputs": nested })).await;
    assert_eq!(status, StatusCode::OK, "{nested_body}");
    assert_outputs_match(&nested_body["outputs"], &case["outputs"], "dtypes (nested data)");
}

/// Rows of a flat `[n, k]` input as V1 instances.
fn rows(input: &Value) -> Vec<Value> {
    let width = input["shape"][1].as_u64().unwrap() as usize;
    input["data"].as_array().unwrap().chunks(width).map(|r| Value::from(r.to_vec())).collect()
}

#[tokio::test]
async fn v1_predict_matches_the_reference() {
    let server = Server::start_ready(&["--model-dir", &dir("examples/models")]).await;

    let iris = &expectations("iris")["cases"][1];
    let (status, body) =
        post(&server.url("/v1/models/iris:predict"), &json!({ "instances": rows(&iris["inputs"][0]) })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let predictions = body["predictions"].as_array().unwrap();
    assert_eq!(predictions.len(), 5);
    let labels: Vec<Value> = predictions.iter().map(|p| p["label"].clone()).collect();
    assert_eq!(Value::from(labels), iris["outputs"][0]["data"]);
    let probabilities: Vec<Value> =
        predictions.iter().flat_map(|p| p["probabilities"].as_array().unwrap().clone()).collect();
    assert_data_match(&Value::from(probabilities), &iris["outputs"][1]["data"], "FP32", "iris probabilities");

    let mlp = &expectations("mlp")["cases"][1];
    let (status, body) =
        post(&server.url("/v1/models/mlp:predict"), &json!({ "inputs": rows(&mlp["inputs"][0]) })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let values: Vec<Value> = body["predictions"].as_array().unwrap().iter().map(|p| p[0].clone()).collect();
    assert_data_match(&Value::from(values), &mlp["outputs"][0]["data"], "FP32", "mlp");

    let adder = &expectations("adder")["cases"][0];
    let (a, b) = (rows(&adder["inputs"][0]), rows(&adder["inputs"][1]));
    let instances: Vec<Value> = a.iter().zip(&b).map(|(a, b)| json!({ "a": a, "b": b })).collect();
    let (status, body) = post(&server.url("/v1/models/adder:predict"), &json!({ "instances": instances })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sums: Vec<Value> =
        body["predictions"].as_array().unwrap().iter().flat_map(|p| p["sum"].as_array().unwrap().clone()).collect();
    assert_eq!(Value::from(sums), adder["outputs"][0]["data"]);
}

#[tokio::test]
async fn health_metadata_and_listing() {
    let server = Server::start_ready(&["--model-dir", &dir("examples/models")]).await;
    let ok = |url: &str| {
        let url = server.url(url);
        async move {
            let (status, body) = get(&url).await;
            assert_eq!(status, StatusCode::OK, "{url}: {body}");
            body
        }
    };
    assert_eq!(ok("/").await, json!({ "status": "alive" }));
    assert_eq!(ok("/v2/health/live").await, json!({ "live": true }));
    assert_eq!(ok("/v2/health/ready").await, json!({ "ready": true }));
    assert_eq!(ok("/v2").await["name"], "skiff-server");
    assert_eq!(ok("/v1/models").await, json!({ "models": ["adder", "iris", "mlp"] }));
    assert_eq!(ok("/v1/models/iris").await, json!({ "name": "iris", "ready": true }));
    assert_eq!(ok("/v2/models/iris/versions/1/ready").await, json!({ "name": "iris", "ready": true }));
    let metadata = ok("/v2/models/adder").await;
    assert_eq!(metadata["name"], "adder");
    assert_eq!(
        metadata["inputs"],
        json!([
            { "name": "a", "datatype": "INT64", "shape": [-1, 3] },
            { "name": "b", "datatype": "INT64", "shape": [-1, 3] }
        ])
    );
    assert_eq!(
        metadata["outputs"],
        json!([
            { "name": "sum", "datatype": "INT64", "shape": [-1, 3] },
            { "name": "half", "datatype": "FP64", "shape": [-1, 3] }
        ])
    );
}

#[tokio::test]
async fn requested_outputs_only_and_ids_generated_when_absent() {
    let server = Server::start_ready(&["--model-dir", &dir("examples/models")]).await;
    let case = &expectations("iris")["cases"][0];
    let request = json!({ "inputs": case["inputs"], "outputs": [{ "name": "probabilities" }] });
    let (status, first) = post(&server.url("/v2/models/iris/infer"), &request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first["outputs"].as_array().unwrap().len(), 1);
    assert_outputs_match(&first["outputs"], &json!([case["outputs"][1]]), "selected output");
    let (_, second) = post(&server.url("/v2/models/iris/infer"), &request).await;
    let (a, b) = (first["id"].as_str().unwrap(), second["id"].as_str().unwrap());
    assert!(!a.is_empty() && a != b, "generated ids {a} and {b}");
}

#[tokio::test]
async fn a_single_model_folder_takes_its_name_from_the_flag_or_the_storage_uri() {
    let uri = format!("file://{}", dir("examples/models/iris"));
    let server = Server::start_ready(&["--storage-uri", &uri, "--model-name", "flowers"]).await;
    assert_eq!(get(&server.url("/v1/models")).await.1, json!({ "models": ["flowers"] }));
    let (status, body) = get(&server.url("/v2/models/iris")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, json!({ "error": "model 'iris' not found" }));

    let unnamed = Server::start_ready(&["--model-dir", &dir("examples/models/mlp")]).await;
    assert_eq!(get(&unnamed.url("/v1/models")).await.1, json!({ "models": ["mlp"] }));
}
