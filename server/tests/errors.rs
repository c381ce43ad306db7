//! Bad input gets a 4xx with a message that says what is wrong, from the real server over HTTP.

mod common;

use common::*;
use http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn malformed_infer_requests_are_400_with_the_reason() {
    let models = repo().join("examples/models").display().to_string();
    let server = Server::start_ready(&["--model-dir", &models]).await;
    let iris = server.url("/v2/models/iris/infer");
    let input = |name: &str, shape: &str, datatype: &str, data: &str| {
        format!(r#"{{"inputs":[{{"name":"{name}","shape":{shape},"datatype":"{datatype}","data":{data}}}]}}"#)
    };
    let cases = [
        ("{\"inputs\": [".to_owned(), "invalid infer request: EOF while parsing"),
        ("[]".to_owned(), "invalid infer request: the body must be a JSON object"),
        ("".to_owned(), "invalid infer request: the body must be a JSON object"),
        (r#"{"outputs":[]}"#.to_owned(), "invalid infer request: missing field `inputs`"),
        (input("petals", "[1,4]", "FP32", "[1,2,3,4]"), "missing input 'input' for model 'iris'"),
        (input("input", "[1,4]", "FP64", "[1,2,3,4]"), "input 'input' has datatype FP64 but model 'iris' expects FP32"),
        (input("input", "[1,4]", "FLOAT32", "[1,2,3,4]"), "input 'input' has unknown datatype \"FLOAT32\""),
        (input("input", "[1,3]", "FP32", "[1,2,3]"), "input 'input' has shape [1, 3] but model 'iris' expects [-1, 4]"),
        (input("input", "[4]", "FP32", "[1,2,3,4]"), "input 'input' has shape [4] but model 'iris' expects [-1, 4]"),
        (input("input", "[2,4]", "FP32", "[1.0,2.0,3.0,4.0]"), "input 'input' has 4 elements but shape [2, 4] needs 8"),
        (input("input", "[1,4]", "FP32", r#"[1,2,"x",4]"#), "input 'input': element 2 is \"x\", which is not a valid FP32 value"),
        (
            r#"{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}],"outputs":[{"name":"scores"}]}"#.to_owned(),
            "unknown output 'scores' for model 'iris' (has 'label', 'probabilities')",
        ),
        (
            r#"{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]},{"name":"extra","shape":[1],"datatype":"FP32","data":[1]}]}"#.to_owned(),
            "unknown input 'extra' for model 'iris' (expects 'input')",
        ),
    ];
    for (body, want) in cases {
        let reply = send(Method::POST, &iris, body.clone()).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{body}");
        let message = reply.json()["error"].as_str().unwrap().to_owned();
        assert!(message.starts_with(want), "{body}\n got: {message}\nwant: {want}");
    }

    let (status, body) = post(&server.url("/v1/models/iris:predict"), &json!({ "instances": [[1, 2, 3]] })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "input 'input' has shape [1, 3] but model 'iris' expects [-1, 4] (-1 = any size)");
    let (status, body) = post(&server.url("/v1/models/iris:predict"), &json!({ "data": [] })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "predict request needs \"instances\" (or \"inputs\")");
}

#[tokio::test]
async fn unknown_models_paths_and_methods() {
    let models = repo().join("examples/models").display().to_string();
    let server = Server::start_ready(&["--model-dir", &models]).await;
    let (status, body) = post(&server.url("/v2/models/nope/infer"), &json!({ "inputs": [] })).await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, json!({ "error": "model 'nope' not found" })));
    let (status, _) = post(&server.url("/v1/models/nope:predict"), &json!({ "instances": [[1]] })).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = get(&server.url("/v2/models/nope/ready")).await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, json!({ "error": "model 'nope' not found" })));
    let (status, body) = get(&server.url("/v3/whatever")).await;
    assert_eq!((status, body), (StatusCode::NOT_FOUND, json!({ "error": "no route for GET /v3/whatever" })));
    let (status, body) = get(&server.url("/v2/models/iris/infer")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["error"], "method GET is not allowed on /v2/models/iris/infer");
}

#[tokio::test]
async fn bodies_over_the_limit_are_413() {
    let models = repo().join("examples/models").display().to_string();
    let server = Server::start_ready(&["--model-dir", &models, "--max-body-bytes", "1024"]).await;
    let data = vec![1.0f32; 400];
    let big = json!({ "inputs": [{ "name": "input", "shape": [100, 4], "datatype": "FP32", "data": data }] });
    let (status, body) = post(&server.url("/v2/models/iris/infer"), &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(body["error"], "request body is larger than the limit of 1024 bytes");
    let small = json!({ "inputs": [{ "name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4] }] });
    assert_eq!(post(&server.url("/v2/models/iris/infer"), &small).await.0, StatusCode::OK);
}
