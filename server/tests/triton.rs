//! Triton's protocol extensions on the real server, over REST and gRPC (tonic's generated client
//! over real HTTP/2 sockets): model configuration, statistics, the repository index and its
//! refused load and unload, `ModelReady` false for an unknown model, `ModelStreamInfer` (answers
//! in order, one per request, errors in band, nothing buffered, each message under the body limit)
//! an open stream counted in flight for its whole life, and an unknown method refused from its
//! headers while its body is still open.

mod common;

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use skiff_server::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use skiff_server::proto::model_infer_request::InferInputTensor;
use skiff_server::proto::*;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

type Grpc = GrpcInferenceServiceClient<Client<HttpConnector, tonic::body::Body>>;

fn models() -> String {
    repo().join("examples/models").display().to_string()
}

fn grpc(server: &Server) -> Grpc {
    let client = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
    GrpcInferenceServiceClient::with_origin(client, server.url("").parse().unwrap())
}

/// Iris's `one-row` or `five-rows` case as a gRPC request with typed contents.
fn iris_request(case: usize, id: &str) -> ModelInferRequest {
    let input = &expectations("iris")["cases"][case]["inputs"][0];
    let data: Vec<f32> = input["data"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
    ModelInferRequest {
        model_name: "iris".into(),
        id: id.into(),
        inputs: vec![InferInputTensor {
            name: "input".into(),
            datatype: "FP32".into(),
            shape: serde_json::from_value(input["shape"].clone()).unwrap(),
            contents: Some(InferTensorContents { fp32_contents: data, ..Default::default() }),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Asserts a gRPC answer to [`iris_request`] matches ONNX Runtime's outputs.
fn assert_iris(response: &ModelInferResponse, case: usize) {
    let want = &expectations("iris")["cases"][case]["outputs"];
    let got: Vec<Value> = response
        .outputs
        .iter()
        .map(|o| {
            let contents = o.contents.clone().unwrap_or_default();
            let data = match o.datatype.as_str() {
                "INT64" => json!(contents.int64_contents),
                "FP32" => json!(contents.fp32_contents),
                other => panic!("unexpected datatype {other}"),
            };
            json!({ "name": o.name, "datatype": o.datatype, "shape": o.shape, "data": data })
        })
        .collect();
    assert_outputs_match(&Value::Array(got), want, &format!("iris case {case} over gRPC"));
}

#[tokio::test]
async fn model_config_follows_the_graph_over_rest_and_grpc() {
    let server = Server::start_ready(&["--model-dir", &models(), "--workers", "2"]).await;
    let (status, config) = get(&server.url("/v2/models/iris/config")).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(
        (&config["name"], &config["platform"], &config["backend"], &config["max_batch_size"]),
        (&json!("iris"), &json!("onnxruntime_onnx"), &json!("onnxruntime"), &json!(32))
    );
    assert_eq!(config["input"][0]["name"], "input");
    assert_eq!(config["input"][0]["data_type"], "TYPE_FP32");
    assert_eq!(config["input"][0]["dims"], json!([4]));
    assert_eq!(config["output"][0]["name"], "label");
    assert_eq!(config["output"][0]["data_type"], "TYPE_INT64");
    assert_eq!((&config["output"][0]["dims"], &config["output"][0]["reshape"]), (&json!([1]), &json!({"shape": []})));
    assert_eq!(config["output"][1]["dims"], json!([3]));
    assert_eq!(config["instance_group"][0]["kind"], "KIND_CPU");
    assert_eq!(config["instance_group"][0]["count"], 2);
    assert!(config.get("dynamic_batching").is_none(), "{config}");
    let (status, versioned) = get(&server.url("/v2/models/iris/versions/1/config")).await;
    assert_eq!((status, &versioned), (StatusCode::OK, &config));

    let mut client = grpc(&server);
    let answer = client.model_config(ModelConfigRequest { name: "adder".into(), version: String::new() }).await;
    let adder = answer.unwrap().into_inner().config.unwrap();
    assert_eq!((adder.name.as_str(), adder.max_batch_size, adder.input.len()), ("adder", 32, 2));
    assert_eq!((adder.input[0].dims.as_slice(), adder.input[0].data_type), (&[3][..], DataType::TypeInt64 as i32));
    assert_eq!((adder.output[1].name.as_str(), adder.output[1].data_type), ("half", DataType::TypeFp64 as i32));

    let (status, body) = get(&server.url("/v2/models/nope/config")).await;
    assert_eq!((status, body["error"].as_str().unwrap()), (StatusCode::NOT_FOUND, "model 'nope' not found"));
    let missing = client.model_config(ModelConfigRequest { name: "iris".into(), version: "2".into() }).await;
    let status = missing.unwrap_err();
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains("has no version '2'"), "{}", status.message());
}

#[tokio::test]
async fn the_batcher_shows_as_dynamic_batching() {
    let server = Server::start_ready(&[
        "--model-dir",
        &models(),
        "--enable-batching",
        "--max-batch-size",
        "8",
        "--max-latency-ms",
        "3",
    ])
    .await;
    let (status, config) = get(&server.url("/v2/models/mlp/config")).await;
    assert_eq!(status, StatusCode::OK, "{config}");
    assert_eq!(config["max_batch_size"], 8);
    assert_eq!(config["dynamic_batching"]["max_queue_delay_microseconds"], 3000);
    assert_eq!(config["input"][0]["dims"], json!([8]));
}

#[tokio::test]
async fn statistics_count_requests_runs_and_failures_over_both_protocols() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let (_, before) = get(&server.url("/v2/models/iris/stats")).await;
    let fresh = &before["model_stats"][0];
    assert_eq!(
        (&fresh["name"], &fresh["version"], &fresh["inference_count"]),
        (&json!("iris"), &json!("1"), &json!(0))
    );
    assert_eq!(fresh["last_inference"], 0);

    for case in expectations("iris")["cases"].as_array().unwrap() {
        let (status, body) = post(&server.url("/v2/models/iris/infer"), &json!({ "inputs": case["inputs"] })).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let mut client = grpc(&server);
    let response = client.model_infer(iris_request(0, "g")).await.unwrap().into_inner();
    assert_iris(&response, 0);
    let bad = json!({ "inputs": [{ "name": "input", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3] }] });
    let (status, _) = post(&server.url("/v2/models/iris/infer"), &bad).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let (status, after) = get(&server.url("/v2/models/iris/versions/1/stats")).await;
    assert_eq!(status, StatusCode::OK, "{after}");
    let iris = &after["model_stats"][0];
    // Rows: 1 + 5 over REST, 1 over gRPC; three runs, one request failed.
    assert_eq!((&iris["inference_count"], &iris["execution_count"]), (&json!(7), &json!(3)));
    let inference = &iris["inference_stats"];
    assert_eq!((&inference["success"]["count"], &inference["fail"]["count"]), (&json!(3), &json!(1)));
    for phase in ["success", "fail", "compute_infer"] {
        assert!(inference[phase]["ns"].as_u64().unwrap() > 0, "{phase}: {inference}");
    }
    for phase in ["queue", "compute_input", "compute_infer", "compute_output"] {
        assert_eq!(inference[phase]["count"], 3, "{phase}: {inference}");
    }
    assert!(iris["last_inference"].as_u64().unwrap() > 1_700_000_000_000, "{iris}");
    let sizes: Vec<&Value> = iris["batch_stats"].as_array().unwrap().iter().map(|b| &b["batch_size"]).collect();
    assert_eq!(sizes, [&json!(1), &json!(5)]);

    let all = client.model_statistics(ModelStatisticsRequest::default()).await.unwrap().into_inner();
    let names: Vec<&str> = all.model_stats.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["adder", "iris", "mlp"]);
    let (_, rest_all) = get(&server.url("/v2/models/stats")).await;
    assert_eq!(rest_all["model_stats"].as_array().unwrap().len(), 3);
    let grpc_iris = &all.model_stats[1];
    assert_eq!((grpc_iris.inference_count, grpc_iris.execution_count), (7, 3));
    let missing = client.model_statistics(ModelStatisticsRequest { name: "nope".into(), version: String::new() }).await;
    assert_eq!(missing.unwrap_err().code(), tonic::Code::NotFound);

    let metadata = client.server_metadata(ServerMetadataRequest {}).await.unwrap().into_inner();
    assert_eq!(metadata.extensions, ["binary_tensor_data", "model_configuration", "statistics", "model_repository"]);
    let (_, rest_metadata) = get(&server.url("/v2")).await;
    assert_eq!(rest_metadata["extensions"], json!(metadata.extensions));
}

#[tokio::test]
async fn the_repository_index_lists_the_models_and_load_and_unload_answer_clearly() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let index = send(Method::POST, &server.url("/v2/repository/index"), "").await;
    assert_eq!(index.status, StatusCode::OK);
    assert_eq!(
        index.json(),
        json!([
            { "name": "adder", "version": "1", "state": "READY", "reason": "" },
            { "name": "iris", "version": "1", "state": "READY", "reason": "" },
            { "name": "mlp", "version": "1", "state": "READY", "reason": "" },
        ])
    );
    let (status, ready_only) = post(&server.url("/v2/repository/index"), &json!({ "ready": true })).await;
    assert_eq!((status, ready_only.as_array().unwrap().len()), (StatusCode::OK, 3));

    let loaded = send(Method::POST, &server.url("/v2/repository/models/iris/load"), "").await;
    assert_eq!(loaded.status, StatusCode::OK);
    let (status, body) = post(&server.url("/v2/repository/models/resnet/load"), &json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body["error"],
        "skiff-server serves the models it was started with; load/unload is not supported: model 'resnet' is not one of them (adder, iris, mlp)"
    );
    let with_files = json!({ "parameters": { "config": "{}" } });
    let (status, body) = post(&server.url("/v2/repository/models/iris/load"), &with_files).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = post(&server.url("/v2/repository/models/iris/unload"), &json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"].as_str().unwrap().ends_with("model 'iris' cannot be unloaded"), "{body}");

    let mut client = grpc(&server);
    let index = client.repository_index(RepositoryIndexRequest::default()).await.unwrap().into_inner();
    let entries: Vec<(&str, &str)> = index.models.iter().map(|m| (m.name.as_str(), m.state.as_str())).collect();
    assert_eq!(entries, [("adder", "READY"), ("iris", "READY"), ("mlp", "READY")]);
    let load = RepositoryModelLoadRequest { model_name: "iris".into(), ..Default::default() };
    client.repository_model_load(load).await.unwrap();
    let load = RepositoryModelLoadRequest { model_name: "resnet".into(), ..Default::default() };
    assert_eq!(client.repository_model_load(load).await.unwrap_err().code(), tonic::Code::FailedPrecondition);
    let unload = RepositoryModelUnloadRequest { model_name: "iris".into(), ..Default::default() };
    let refused = client.repository_model_unload(unload).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
    assert!(
        refused.message().starts_with("skiff-server serves the models it was started with"),
        "{}",
        refused.message()
    );
}

#[tokio::test]
async fn model_ready_is_false_for_an_unknown_model_or_version() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let mut client = grpc(&server);
    for (name, version, want) in [("iris", "", true), ("iris", "1", true), ("iris", "2", false), ("nope", "", false)] {
        let request = ModelReadyRequest { name: name.into(), version: version.into() };
        let ready = client.model_ready(request).await.unwrap().into_inner().ready;
        assert_eq!(ready, want, "{name} version '{version}'");
    }
}

/// Each request is sent only once the previous answer came back, so a server that buffered the
/// stream (or waited for its end) would never answer the first.
#[tokio::test]
async fn a_stream_answers_each_request_in_order_with_errors_in_band() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let mut client = grpc(&server);
    let (requests, outgoing) = mpsc::channel(1);
    let mut answers = client.model_stream_infer(ReceiverStream::new(outgoing)).await.unwrap().into_inner();
    let mut unknown = iris_request(0, "c");
    unknown.model_name = "nope".into();
    let mut wrong_shape = iris_request(0, "d");
    wrong_shape.inputs[0].shape = vec![2, 4];
    let sent = [iris_request(0, "a"), iris_request(1, "b"), unknown, wrong_shape, iris_request(1, "e")];
    let mut got = Vec::new();
    for request in sent {
        requests.send(request).await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(30), answers.message()).await;
        got.push(answer.expect("an answer while the stream is open").unwrap().expect("one answer per request"));
    }
    let ids: Vec<&str> = got.iter().map(|a| a.infer_response.as_ref().map_or("", |r| r.id.as_str())).collect();
    assert_eq!(ids, ["a", "b", "", "", "e"]);
    assert_iris(got[0].infer_response.as_ref().unwrap(), 0);
    assert_iris(got[1].infer_response.as_ref().unwrap(), 1);
    assert_iris(got[4].infer_response.as_ref().unwrap(), 1);
    assert_eq!(got[2].error_message, "model 'nope' not found");
    assert!(got[3].error_message.contains("input 'input'"), "{}", got[3].error_message);
    assert!(got.iter().filter(|a| a.infer_response.is_some()).all(|a| a.error_message.is_empty()));
    drop(requests);
    assert!(answers.message().await.unwrap().is_none(), "the stream ends when the client's does");
}

/// The server's in-flight gauge, which the autoscaler reads.
async fn in_flight(server: &Server) -> String {
    let text = String::from_utf8(send(Method::GET, &server.url("/metrics"), "").await.body.to_vec()).unwrap();
    text.lines().find(|l| l.starts_with("skiff_inflight_requests ")).unwrap_or("no gauge").to_owned()
}

/// An open stream holds a slot of the replica's concurrency for its whole life, idle or not (as
/// Knative's queue-proxy counts it): it counts as one request in flight, which the autoscaler
/// reads, until it ends, and not once more while one of its messages is served.
#[tokio::test]
async fn an_open_stream_counts_as_one_in_flight_until_it_ends() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let mut client = grpc(&server);
    let (requests, outgoing) = mpsc::channel(1);
    let mut answers = client.model_stream_infer(ReceiverStream::new(outgoing)).await.unwrap().into_inner();
    requests.send(iris_request(0, "a")).await.unwrap();
    assert_eq!(answers.message().await.unwrap().unwrap().infer_response.unwrap().id, "a");
    // Idle now, between messages: still in flight.
    assert_eq!(in_flight(&server).await, "skiff_inflight_requests 1");
    drop(requests);
    assert!(answers.message().await.unwrap().is_none());
    drop(answers);
    let mut gauge = in_flight(&server).await;
    for _ in 0..300 {
        if gauge == "skiff_inflight_requests 0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        gauge = in_flight(&server).await;
    }
    assert_eq!(gauge, "skiff_inflight_requests 0", "an ended stream is no longer in flight");
}

/// Each message of a stream is bounded by the body limit: one past it ends the stream with its
/// status, after the answers to the messages before it.
#[tokio::test]
async fn a_stream_message_over_the_body_limit_ends_the_stream() {
    let server = Server::start_ready(&["--model-dir", &models(), "--max-body-bytes", "1024"]).await;
    let mut client = grpc(&server);
    let (requests, outgoing) = mpsc::channel(2);
    let mut answers = client.model_stream_infer(ReceiverStream::new(outgoing)).await.unwrap().into_inner();
    requests.send(iris_request(0, "small")).await.unwrap();
    let first = answers.message().await.unwrap().unwrap();
    assert_eq!(first.infer_response.unwrap().id, "small");
    requests.send(iris_request(0, &"x".repeat(2048))).await.unwrap();
    let status = answers.message().await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
    assert!(status.message().contains("1024"), "{}", status.message());
    let after = client.model_infer(iris_request(1, "after")).await.unwrap().into_inner();
    assert_iris(&after, 1);
}

/// The request's body never ends: the refusal must come from its headers.
#[tokio::test]
async fn an_unknown_method_is_refused_while_its_body_is_still_open() {
    let server = Server::start_ready(&["--model-dir", &models()]).await;
    let (body, frames) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
    body.send(Ok(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0])))).await.unwrap();
    let request = http::Request::post(server.url("/inference.GRPCInferenceService/SystemSharedMemoryStatus"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(StreamBody::new(ReceiverStream::new(frames)))
        .unwrap();
    let client = Client::builder(TokioExecutor::new()).http2_only(true).build_http();
    // `body` is held until the end: had the server waited for the body's end, this would answer
    // only at the body deadline, with DEADLINE_EXCEEDED.
    let response = client.request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let (parts, rest) = response.into_parts();
    let trailers = rest.collect().await.unwrap().trailers().cloned();
    let status = trailers.as_ref().and_then(|t| t.get("grpc-status")).or(parts.headers.get("grpc-status"));
    assert_eq!(status.unwrap(), "12");
    let message = trailers.as_ref().and_then(|t| t.get("grpc-message")).or(parts.headers.get("grpc-message"));
    let message = message.unwrap().to_str().unwrap();
    assert!(message.contains("/inference.GRPCInferenceService/SystemSharedMemoryStatus"), "{message}");
    assert!(message.contains("ModelStreamInfer"), "{message}");
    drop(body);
}
