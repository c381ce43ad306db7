//! Request handlers: health, metadata, metrics, inference and Triton's extensions, over the
//! shared [`App`] state and inference core ([`crate::app`]); Triton's messages are written in
//! protobuf's JSON mapping, as Triton's HTTP endpoints write them ([`crate::triton::json`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{Request, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::json;

use super::routes::{Route, route};
use crate::app::{App, EXTENSIONS, PLATFORM, SERVER_NAME, SERVER_VERSION, predict};
use crate::codec::{v1, v2};
use crate::error::{Error, Result};
use crate::model::{LoadedModel, MODEL_VERSION};
use crate::proto::ModelStatisticsResponse;
use crate::tensor::Tensor;
use crate::triton::{self, json};
use skiff_http::body::{Held, Reservation, read_body};
use skiff_http::logger::Half;
use skiff_http::response;

/// The response type of every handler: an inference answer holds its request's memory budget
/// until it is sent.
type HttpResponse = http::Response<Held<Full<Bytes>, Reservation>>;

#[derive(Clone, Copy)]
enum Protocol {
    V1,
    V2,
}

impl Protocol {
    fn label(self) -> &'static str {
        match self {
            Protocol::V1 => "v1",
            Protocol::V2 => "v2",
        }
    }
}

/// Answers one request; never fails (errors become JSON responses).
pub async fn handle(app: Arc<App>, request: Request<Incoming>) -> HttpResponse {
    let (parts, body) = request.into_parts();
    match route(&parts.method, parts.uri.path()) {
        Ok(Route::V1Predict(name)) => infer(&app, name, None, Protocol::V1, &parts.headers, body).await,
        Ok(Route::V2Infer(m)) => infer(&app, m.name, m.version, Protocol::V2, &parts.headers, body).await,
        Ok(route @ (Route::RepositoryIndex | Route::RepositoryLoad(_) | Route::RepositoryUnload(_))) => {
            repository(&app, route, &parts.headers, body).await.unwrap_or_else(|e| response::error(&e)).map(Held::from)
        }
        Ok(other) => read_only(&app, other).unwrap_or_else(|e| response::error(&e)).map(Held::from),
        Err(e) => response::error(&e).map(Held::from),
    }
}

fn read_only(app: &App, route: Route<'_>) -> Result<http::Response<Full<Bytes>>> {
    let ok = |value| Ok(response::json_value(StatusCode::OK, &value));
    match route {
        Route::Root => ok(json!({ "status": "alive" })),
        Route::Live => ok(json!({ "live": true })),
        Route::Ready if app.ready() => ok(json!({ "ready": true })),
        Route::Ready => Err(Error::ModelNotReady(not_ready_names(app))),
        Route::ServerMetadata => {
            ok(json!({ "name": SERVER_NAME, "version": SERVER_VERSION, "extensions": EXTENSIONS }))
        }
        Route::Metrics => {
            let mut response = response::json(StatusCode::OK, app.metrics.encode());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
            );
            Ok(response)
        }
        Route::V1List => ok(json!({ "models": app.models.names() })),
        Route::V1Model(name) => {
            app.models.get(name)?;
            ok(json!({ "name": name, "ready": true }))
        }
        Route::V2ModelReady(m) => {
            app.models.get_version(m.name, m.version)?;
            ok(json!({ "name": m.name, "ready": true }))
        }
        Route::V2Model(m) => {
            let spec = &app.models.get_version(m.name, m.version)?.spec;
            ok(json!({
                "name": m.name,
                "versions": [MODEL_VERSION],
                "platform": PLATFORM,
                "inputs": spec.inputs,
                "outputs": spec.outputs,
            }))
        }
        Route::V2ModelConfig(m) => {
            let model = app.models.get_version(m.name, m.version)?;
            ok(json::to_json(&triton::config::model_config(&model.spec, &model.serving)))
        }
        Route::V2ModelStats(m) => {
            let model = app.models.get_version(m.name, m.version)?;
            let model_stats = vec![triton::statistics(m.name, &model.stats.snapshot())];
            ok(json::to_json(&ModelStatisticsResponse { model_stats }))
        }
        Route::V2Stats => {
            let loaded = app.models.index().into_iter().filter_map(|(name, m)| Some((name, m?)));
            let model_stats = loaded.map(|(name, m)| triton::statistics(name, &m.stats.snapshot())).collect();
            ok(json::to_json(&ModelStatisticsResponse { model_stats }))
        }
        Route::V1Predict(_)
        | Route::V2Infer(_)
        | Route::RepositoryIndex
        | Route::RepositoryLoad(_)
        | Route::RepositoryUnload(_) => {
            unreachable!("routes with a body are handled by `infer` and `repository`")
        }
    }
}

/// The body of Triton's repository requests: `ready` (index), `parameters` (load, unload).
#[derive(Debug, Default, serde::Deserialize)]
struct RepositoryRequest {
    #[serde(default)]
    ready: bool,
    #[serde(default)]
    parameters: serde_json::Map<String, serde_json::Value>,
}

/// Triton's repository index (a JSON array, as Triton's HTTP endpoint answers), and load and
/// unload ([`triton::load`], [`triton::unload`]), answered 200 with no body when done.
async fn repository(
    app: &App,
    route: Route<'_>,
    headers: &http::HeaderMap,
    body: Incoming,
) -> Result<http::Response<Full<Bytes>>> {
    let (body, _held) = read_body(headers, body, &app.body).await?;
    let request: RepositoryRequest = if body.iter().all(u8::is_ascii_whitespace) {
        RepositoryRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| Error::invalid(format!("invalid repository request: {e}")))?
    };
    match route {
        Route::RepositoryIndex => {
            let models = app.models.index().into_iter().filter(|(_, loaded)| !request.ready || loaded.is_some());
            let index: Vec<_> =
                models.map(|(name, loaded)| json::to_json(&triton::index_entry(name, loaded))).collect();
            Ok(response::json_value(StatusCode::OK, &serde_json::Value::Array(index)))
        }
        Route::RepositoryLoad(name) => {
            triton::load(&app.models, name, !request.parameters.is_empty())?;
            Ok(response::json(StatusCode::OK, Bytes::new()))
        }
        Route::RepositoryUnload(name) => Err(triton::unload(name)),
        _ => unreachable!("only repository routes are handled here"),
    }
}

fn not_ready_names(app: &App) -> String {
    let loading: Vec<&str> = app.models.names().into_iter().filter(|n| app.models.get(n).is_err()).collect();
    if loading.is_empty() { "server is shutting down".to_owned() } else { loading.join(", ") }
}

async fn infer(
    app: &App,
    name: &str,
    version: Option<&str>,
    protocol: Protocol,
    headers: &http::HeaderMap,
    body: Incoming,
) -> HttpResponse {
    let started = Instant::now();
    let _in_flight = app.metrics.in_flight();
    let response = match app.models.get_version(name, version) {
        Ok(model) => run_inference(app, model, protocol, headers, body)
            .await
            .unwrap_or_else(|e| response::error(&e).map(Held::from)),
        Err(e) => return response::error(&e).map(Held::from),
    };
    app.metrics.observe(name, protocol.label(), response.status().as_u16(), started.elapsed());
    response
}

async fn run_inference(
    app: &App,
    model: &LoadedModel,
    protocol: Protocol,
    headers: &http::HeaderMap,
    body: Incoming,
) -> Result<HttpResponse> {
    let (body, mut held) = read_body(headers, body, &app.body).await?;
    let (inputs, reply) = match protocol {
        Protocol::V2 => {
            let (json, binary) = v2::split_binary(headers, &body)?;
            let mut request = v2::decode(json)?;
            let inputs = request.take_inputs(binary)?;
            let id = request.id.take().map_or_else(new_id, Cow::into_owned);
            (
                inputs,
                Reply::V2 {
                    id,
                    wanted: request.output_names(),
                    binary: request.binary_outputs(model.spec.outputs.len()),
                },
            )
        }
        Protocol::V1 => {
            let id = app
                .logger
                .as_ref()
                .map(|_| headers.get("x-request-id").and_then(|v| v.to_str().ok()).map_or_else(new_id, str::to_owned));
            (v1::decode(&body, &model.spec)?, Reply::V1 { id })
        }
    };
    if let (Some(logger), Some(id)) = (&app.logger, reply.id()) {
        let content_type = headers.get(header::CONTENT_TYPE).cloned().unwrap_or(APPLICATION_JSON);
        logger.log(Half::Request, id, content_type, body.clone());
    }
    let body_len = body.len();
    drop(body);
    let wanted = match &reply {
        Reply::V2 { wanted, .. } => wanted.as_slice(),
        Reply::V1 { .. } => &[],
    };
    let outputs = predict(app, model, inputs, wanted, &mut held, body_len).await?;
    let output_bytes = outputs.iter().map(Tensor::byte_size).sum();
    let (encoded, content_type, json_length) = match &reply {
        Reply::V2 { id, binary, .. } => {
            let encoded = v2::encode(&model.spec.name, id, &outputs, binary);
            let content_type = if encoded.json_length.is_some() { OCTET_STREAM } else { APPLICATION_JSON };
            (Bytes::from(encoded.body), content_type, encoded.json_length)
        }
        Reply::V1 { .. } => (Bytes::from(v1::encode(&outputs)?), APPLICATION_JSON, None),
    };
    drop(outputs);
    held.release(output_bytes);
    held.force(encoded.len());
    if let (Some(logger), Some(id)) = (&app.logger, reply.id()) {
        logger.log(Half::Response, id, content_type.clone(), encoded.clone());
    }
    let mut response = http::Response::new(Full::new(encoded));
    response.headers_mut().insert(header::CONTENT_TYPE, content_type);
    if let Some(length) = json_length {
        response.headers_mut().insert(v2::HEADER_LENGTH, length.into());
    }
    Ok(response.map(|body| Held::new(body, held)))
}

const APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
const OCTET_STREAM: HeaderValue = HeaderValue::from_static("application/octet-stream");

fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// How an inference is answered: V2 with its id, the outputs asked for and which of them go in
/// binary, or V1 (with an id only for the logger: `X-Request-Id`, else a new one).
enum Reply {
    V1 { id: Option<String> },
    V2 { id: String, wanted: Vec<String>, binary: Vec<bool> },
}

impl Reply {
    fn id(&self) -> Option<&str> {
        match self {
            Reply::V1 { id } => id.as_deref(),
            Reply::V2 { id, .. } => Some(id),
        }
    }
}
