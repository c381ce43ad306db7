//! gRPC calls whose `:authority` names no service (a client dialling the router's address) are
//! routed by the model their first message names: each reaches its model's replica with every
//! byte it sent (the bytes read to route it come first), however large; a bidirectional stream
//! flows both ways, each answer arriving before the client sends its next message, so nothing is
//! held back; an unknown model is NOT_FOUND naming it; a message the router cannot read, or a
//! method that names no model, gets a clear status.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{HeaderMap, Request, Response};
use http_body_util::channel::Channel;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message;
use skiff_dataplane::endpoints::Endpoints;
use skiff_router::{DownstreamLimits, Router, RouterHandle};
use support::*;
use tokio::net::{TcpListener, TcpStream};

/// The leading fields of KServe's `ModelInferRequest` and its raw contents.
#[derive(Clone, PartialEq, prost::Message)]
struct ModelInferRequest {
    #[prost(string, tag = "1")]
    model_name: String,
    #[prost(string, tag = "2")]
    model_version: String,
    #[prost(string, tag = "3")]
    id: String,
    #[prost(bytes = "vec", repeated, tag = "7")]
    raw_input_contents: Vec<Vec<u8>>,
}

/// `RepositoryModelLoadRequest`: the model in field 2.
#[derive(Clone, PartialEq, prost::Message)]
struct RepositoryModelLoadRequest {
    #[prost(string, tag = "1")]
    repository_name: String,
    #[prost(string, tag = "2")]
    model_name: String,
}

fn infer(model: &str, id: &str, raw: usize) -> ModelInferRequest {
    ModelInferRequest {
        model_name: model.to_owned(),
        model_version: String::new(),
        id: id.to_owned(),
        raw_input_contents: vec![(0..raw).map(|i| (i % 251) as u8).collect()],
    }
}

/// `message` as one gRPC message.
fn frame(message: &impl Message) -> Bytes {
    let bytes = message.encode_to_vec();
    let mut frame = BytesMut::with_capacity(5 + bytes.len());
    frame.extend_from_slice(&[0]);
    frame.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    frame.extend_from_slice(&bytes);
    frame.freeze()
}

/// Splits whole gRPC messages off the front of `buffer`.
fn messages(buffer: &mut BytesMut) -> Vec<Bytes> {
    let mut out = Vec::new();
    while buffer.len() >= 5 {
        let length = u32::from_be_bytes(buffer[1..5].try_into().unwrap()) as usize;
        if buffer.len() < 5 + length {
            break;
        }
        buffer.advance(5);
        out.push(buffer.split_to(length).freeze());
    }
    out
}

/// A gRPC replica that answers each request message as soon as it is whole, on the same stream:
/// `<id>: <the message re-framed>` (an echo with the replica's id in front), then status 0.
async fn echo_replica(id: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let service = service_fn(move |request: Request<Incoming>| async move {
                let authority = request.uri().authority().map_or("-".to_owned(), |a| a.to_string());
                let path = request.uri().path().to_owned();
                let (mut sender, answers) = Channel::<Bytes, Infallible>::new(4);
                let mut body = request.into_body();
                tokio::spawn(async move {
                    let mut buffer = BytesMut::new();
                    while let Some(Ok(frame)) = body.frame().await {
                        let Ok(data) = frame.into_data() else { continue };
                        buffer.extend_from_slice(&data);
                        for message in messages(&mut buffer) {
                            let mut answer = BytesMut::from(format!("{id}: ").as_bytes());
                            answer.extend_from_slice(&message);
                            let mut framed = BytesMut::from(&[0u8][..]);
                            framed.extend_from_slice(&(answer.len() as u32).to_be_bytes());
                            framed.extend_from_slice(&answer);
                            if sender.send_data(framed.freeze()).await.is_err() {
                                return;
                            }
                        }
                    }
                    let mut trailers = HeaderMap::new();
                    trailers.insert("grpc-status", "0".parse().unwrap());
                    let _ = sender.send_trailers(trailers).await;
                });
                let mut response = Response::new(answers);
                response.headers_mut().insert("content-type", "application/grpc".parse().unwrap());
                response.headers_mut().insert("x-seen-authority", authority.parse().unwrap());
                response.headers_mut().insert("x-seen-path", path.parse().unwrap());
                Ok::<_, Infallible>(response)
            });
            tokio::spawn(async move {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// `iris` and `mnist` in namespace default, each with its echo replica; the router's handle.
async fn two_models() -> (Router, RouterHandle) {
    let (iris, mnist) = (echo_replica("iris-replica").await, echo_replica("mnist-replica").await);
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[iris]);
    revision(&endpoints, "default/mnist-predictor-00001", 0, &[mnist]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![
        service("default", "iris", vec![target("iris-predictor-00001", 100, None)]),
        service("default", "mnist", vec![target("mnist-predictor-00001", 100, None)]),
    ]);
    (router, handle)
}

/// What a call got back: the messages, the grpc-status and grpc-message, and the response headers.
struct Answer {
    messages: Vec<Bytes>,
    status: String,
    message: String,
    headers: HeaderMap,
}

/// A unary call: `body` as the request, authority the router's own address.
async fn call(router: SocketAddr, method: &str, body: Bytes) -> Answer {
    let stream = TcpStream::connect(router).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = Request::post(format!("http://{router}/inference.GRPCInferenceService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(Full::new(body))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let (parts, body) = response.into_parts();
    let collected = body.collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let mut buffer = BytesMut::from(&collected.to_bytes()[..]);
    let trailer = |name: &str| trailers.get(name).map_or("-".to_owned(), |v| v.to_str().unwrap().to_owned());
    Answer {
        messages: messages(&mut buffer),
        status: trailer("grpc-status"),
        message: trailer("grpc-message"),
        headers: parts.headers,
    }
}

/// The echo a replica `id` gives for `request`.
fn echo(id: &str, request: &Bytes) -> Bytes {
    let mut echo = BytesMut::from(format!("{id}: ").as_bytes());
    echo.extend_from_slice(&request[5..]);
    echo.freeze()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_call_reaches_the_replica_of_the_model_its_message_names() {
    let (_router, handle) = two_models().await;
    let addr = handle.listen_addr();
    for (model, replica) in [("iris", "iris-replica"), ("mnist", "mnist-replica"), ("iris", "iris-replica")] {
        let request = frame(&infer(model, "call-1", 32));
        let answer = call(addr, "ModelInfer", request.clone()).await;
        assert_eq!(answer.status, "0", "{}", answer.message);
        assert_eq!(answer.messages, [echo(replica, &request)], "every byte reached {replica}");
        assert_eq!(answer.headers["x-skiff-revision"], format!("{model}-predictor-00001"));
        assert_eq!(answer.headers["x-seen-authority"], addr.to_string(), "the client's authority is kept");
        assert_eq!(answer.headers["x-seen-path"], "/inference.GRPCInferenceService/ModelInfer");
    }
    let load = frame(&RepositoryModelLoadRequest { repository_name: "models".into(), model_name: "mnist".into() });
    let answer = call(addr, "RepositoryModelLoad", load.clone()).await;
    assert_eq!(answer.messages, [echo("mnist-replica", &load)], "model_name is field 2 there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_larger_than_the_peek_streams_through_whole() {
    let (_router, handle) = two_models().await;
    // Far past the router's peek (8 KiB) and its whole-body buffer (64 KiB), and many HTTP/2 frames.
    let request = frame(&infer("mnist", "big", 300 * 1024));
    let answer = call(handle.listen_addr(), "ModelInfer", request.clone()).await;
    assert_eq!(answer.status, "0", "{}", answer.message);
    assert_eq!(answer.messages.len(), 1);
    assert!(answer.messages[0] == echo("mnist-replica", &request), "the replica got the message byte for byte");
}

/// Opens `ModelStreamInfer` on the router at `addr` over HTTP/2 and sends `first`: the answer's
/// head, the sender of the stream's next messages, and the connection's handle (kept to keep it).
async fn open_stream(
    addr: SocketAddr,
    first: Bytes,
) -> (Response<Incoming>, http_body_util::channel::Sender<Bytes, Infallible>, impl Sized) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let (mut body_sender, body) = Channel::<Bytes, Infallible>::new(1);
    let request = Request::post(format!("http://{addr}/inference.GRPCInferenceService/ModelStreamInfer"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(body)
        .unwrap();
    body_sender.send_data(first).await.unwrap();
    let response = sender.send_request(request).await.unwrap();
    (response, body_sender, sender)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bidirectional_stream_gets_each_answer_before_it_sends_the_next_message() {
    let (_router, handle) = two_models().await;
    let addr = handle.listen_addr();
    // The first message goes before the response head can come: the router routes on it.
    let first = frame(&infer("iris", "0", 16));
    let (response, mut body_sender, _connection) = open_stream(addr, first.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-skiff-revision"], "iris-predictor-00001");
    let mut answers = response.into_body();
    let mut buffer = BytesMut::new();
    let mut next_answer = async || -> Bytes {
        loop {
            if let Some(message) = messages(&mut buffer).into_iter().next() {
                return message;
            }
            let frame = answers.frame().await.expect("the stream ended early").unwrap();
            buffer.extend_from_slice(&frame.into_data().expect("a message, not trailers"));
        }
    };
    // A liveness bound, not a timing check: a router that held the stream back would never answer
    // while the client still has messages to send.
    let bound = Duration::from_secs(30);
    let answer = tokio::time::timeout(bound, next_answer()).await.expect("the first answer was held back");
    assert_eq!(answer, echo("iris-replica", &first));
    for i in 1..5 {
        let request = frame(&infer("iris", &i.to_string(), 16 + i));
        body_sender.send_data(request.clone()).await.unwrap();
        let answer = tokio::time::timeout(bound, next_answer()).await.expect("an answer was held back");
        assert_eq!(answer, echo("iris-replica", &request), "message {i}");
    }
    drop(body_sender);
    let mut trailers = None;
    while let Some(frame) = tokio::time::timeout(bound, answers.frame()).await.expect("the stream did not end") {
        if let Ok(t) = frame.unwrap().into_trailers() {
            trailers = Some(t);
        }
    }
    assert_eq!(trailers.expect("status trailers")["grpc-status"], "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_is_not_found_and_names_the_model() {
    let (_router, handle) = two_models().await;
    let answer = call(handle.listen_addr(), "ModelInfer", frame(&infer("resnet", "x", 8))).await;
    assert_eq!(answer.status, "5", "NOT_FOUND");
    assert!(answer.message.contains("model resnet"), "{}", answer.message);
    assert!(answer.messages.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_whose_model_cannot_be_read_are_refused_with_the_reason() {
    let (_router, handle) = two_models().await;
    let addr = handle.listen_addr();

    let mut compressed = frame(&infer("iris", "x", 8)).to_vec();
    compressed[0] = 1;
    let answer = call(addr, "ModelInfer", Bytes::from(compressed)).await;
    assert_eq!(answer.status, "3", "INVALID_ARGUMENT");
    assert!(answer.message.contains("compressed"), "{}", answer.message);

    let unnamed = frame(&infer("", "x", 8));
    let answer = call(addr, "ModelInfer", unnamed).await;
    assert_eq!(answer.status, "3");
    assert!(answer.message.contains("names no model"), "{}", answer.message);

    let answer = call(addr, "ModelInfer", Bytes::from_static(&[0, 0, 0])).await;
    assert_eq!(answer.status, "3");
    assert!(answer.message.contains("ended before its first message"), "{}", answer.message);

    let answer = call(addr, "RepositoryIndex", Bytes::from_static(&[0, 0, 0, 0, 0])).await;
    assert_eq!(answer.status, "12", "UNIMPLEMENTED");
    assert!(answer.message.contains("RepositoryIndex names no model"), "{}", answer.message);
}

/// An idle stream holds its replica's slot (here the only one: containerConcurrency 1) until the
/// router's stream idle timeout ends it, with DEADLINE_EXCEEDED naming the bound; the slot is then
/// free, and the next call reaches the replica rather than the activator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_ends_at_the_idle_bound_and_frees_its_slot() {
    let iris = echo_replica("iris-replica").await;
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    let revision = revision(&endpoints, "default/iris-predictor-00001", 1, &[iris]);
    let limits = DownstreamLimits { stream_idle_timeout: Duration::from_secs(1), ..DownstreamLimits::default() };
    let (router, handle) = router_with(endpoints, activator.addr, limits);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let addr = handle.listen_addr();

    let (response, body_sender, _connection) = open_stream(addr, frame(&infer("iris", "0", 16))).await;
    assert_eq!(response.status(), 200);
    // The stream stays open, idle, after its first answer; the router ends it.
    let bound = Duration::from_secs(30);
    let collected = tokio::time::timeout(bound, response.into_body().collect())
        .await
        .expect("the idle stream was still open")
        .unwrap();
    let trailers = collected.trailers().cloned().expect("status trailers");
    let mut buffer = BytesMut::from(&collected.to_bytes()[..]);
    assert_eq!(messages(&mut buffer).len(), 1, "the first answer came before the end");
    assert_eq!(trailers["grpc-status"], "4", "DEADLINE_EXCEEDED");
    let message = trailers["grpc-message"].to_str().unwrap();
    assert!(message.contains("stream idle timeout") && message.contains("1s"), "{message}");
    drop(body_sender);

    // Its slot is freed once the router has logged the stream: the next call goes straight to the replica.
    let replica = revision.ready()[0].clone();
    for _ in 0..300 {
        if replica.in_flight() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(replica.in_flight(), 0, "the ended stream still holds its slot");
    let request = frame(&infer("iris", "after", 16));
    let answer = call(addr, "ModelInfer", request.clone()).await;
    assert_eq!(answer.status, "0", "{}", answer.message);
    assert_eq!(answer.messages, [echo("iris-replica", &request)]);
}
