//! The I/O around [`crate::graph::exec`]: one graph request through the router. The body is read whole
//! (KServe's router reads it whole too), every InferenceService the graph can reach that is at zero
//! is poked at once (a Sequence of three cold models waits for about one cold start, not three),
//! and each step is sent as a direct request is: the route table, the canary split, a replica with
//! room or else the activator, over the router's pooled connections.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, header};
use http_body_util::{BodyExt, Either, Full};
use pingora::protocols::http::ServerSession;
use skiff_api::graph::{Target, reachable_services};
use skiff_api::serving::COLD_START_HEADER;
use skiff_dataplane::{Poker, RevisionKey};

use super::Proxy;
use crate::DEFAULT_TIMEOUT;
use crate::graph::GraphRoute;
use crate::graph::exec::{Answer, BoxFuture, Caller, Executor, GraphError, StepId, StepTiming, steps_header};
use crate::split;
use crate::upstream::{Upstream, UpstreamError};

/// The header that carries each step's time and cold start.
pub const STEPS_HEADER: &str = "x-skiff-graph-steps";
/// The largest graph request read (KServe's router reads any size; Skiff bounds memory).
const MAX_BODY: usize = 64 * 1024 * 1024;
/// Time allowed to open a connection to a replica, an activator or a URL.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time given to the activator, which bounds the request itself and answers 504.
const ACTIVATOR_MARGIN: Duration = Duration::from_secs(5);

/// The autoscaler's poke, where the process runs one (`skiff up`); set once.
#[derive(Default, Clone)]
pub struct Waker(pub(crate) Arc<OnceLock<Arc<dyn Poker>>>);

impl std::fmt::Debug for Waker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() { "Waker(set)" } else { "Waker(unset)" })
    }
}

/// Go's `CanonicalMIMEHeaderKey`: the form KServe's header patterns are matched against.
pub fn canonical(name: &str) -> String {
    let mut upper = true;
    name.chars()
        .map(|c| {
            let out = if upper { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() };
            upper = c == '-';
            out
        })
        .collect()
}

struct StepCaller<'a> {
    proxy: &'a Proxy,
    graph: &'a GraphRoute,
    headers: HeaderMap,
    timings: Mutex<Vec<StepTiming>>,
    deadline: tokio::time::Instant,
}

impl Caller for StepCaller<'_> {
    fn call<'a>(&'a self, step: &'a StepId, target: Target<'a>, body: Bytes) -> BoxFuture<'a, Result<Answer, String>> {
        Box::pin(async move {
            let started = Instant::now();
            let (name, result) = match target {
                Target::Service(service) => (service.to_owned(), self.service(service, body).await),
                Target::Url(url) => (url.to_owned(), self.url(url, body).await),
                Target::Node(node) => (node.to_owned(), Err(format!("node {node} is not a call"))),
            };
            let (status, cold) = match &result {
                Ok((answer, cold)) => (answer.status, *cold),
                Err(_) => (0, None),
            };
            let timing = StepTiming { step: step.clone(), target: name, status, took: started.elapsed(), cold };
            self.timings.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(timing);
            result.map(|(answer, _)| answer)
        })
    }
}

type Called = Result<(Answer, Option<Duration>), String>;

impl StepCaller<'_> {
    /// A step's call to an InferenceService of the graph's namespace, at its predict path.
    async fn service(&self, service: &str, body: Bytes) -> Called {
        let path = self.graph.service_paths.get(service).ok_or_else(|| {
            format!(
                "InferenceService {}/{service} is not served here (is it in the folder, and valid?)",
                self.graph.namespace
            )
        })?;
        let table = self.proxy.table.load_full();
        let route = format!("/serving/{}/{service}{path}", self.graph.namespace);
        let resolved = table
            .resolve("", &route)
            .ok_or_else(|| format!("InferenceService {}/{service} has no route", self.graph.namespace))?;
        let timeout = resolved.service.timeout.unwrap_or(DEFAULT_TIMEOUT);
        self.send_to_service(&resolved, body, timeout).await
    }

    async fn send_to_service(&self, resolved: &crate::table::Resolved, body: Bytes, timeout: Duration) -> Called {
        let target = split::choose(resolved.targets(), resolved.tag.as_deref(), &mut rand::rng())
            .ok_or_else(|| format!("InferenceService {} has no revision with traffic", resolved.service.key()))?;
        let key = RevisionKey::new(resolved.service.namespace.as_str(), target.revision_name.as_str());
        let revision = self.proxy.endpoints.get(&key);
        let replica = revision.as_ref().and_then(|r| {
            r.arrived();
            r.try_acquire()
        });
        let (slot, via_activator) = match replica {
            Some(slot) => (slot, false),
            None => {
                (self.proxy.activators.try_acquire().ok_or_else(|| format!("no activator for revision {key}"))?, true)
            }
        };
        let limit = timeout + if via_activator { ACTIVATOR_MARGIN } else { Duration::ZERO };
        let limit = self.graph.step_timeout().map_or(limit, |t| t.min(limit));
        let deadline = self.deadline.min(tokio::time::Instant::now() + limit);
        let mut request = self.request(&resolved.path, body)?;
        if via_activator {
            let value = HeaderValue::try_from(key.to_string()).map_err(|e| e.to_string())?;
            request.headers_mut().insert(crate::REVISION_HEADER, value);
        }
        let addr = slot.replica().addr;
        let answer = self.exchange(addr, request, deadline, limit).await;
        drop(slot);
        answer
    }

    /// A step's call to a URL: through the route table when it names a service the router serves
    /// (its host, or a `/serving/...` path), else straight to the host (plain HTTP).
    async fn url(&self, url: &str, body: Bytes) -> Called {
        let uri: http::Uri = url.parse().map_err(|e| format!("serviceUrl {url:?}: {e}"))?;
        let authority = uri.authority().ok_or_else(|| format!("serviceUrl {url:?} has no host"))?.clone();
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let table = self.proxy.table.load_full();
        if table.is_service_host(authority.as_str())
            && let Some(resolved) = table.resolve(authority.as_str(), &path)
        {
            let timeout = resolved.service.timeout.unwrap_or(DEFAULT_TIMEOUT);
            return self.send_to_service(&resolved, body, timeout).await;
        }
        if uri.scheme_str() != Some("http") {
            return Err(format!(
                "serviceUrl {url:?}: the router calls services it does not serve over plain http:// only"
            ));
        }
        let port = authority.port_u16().unwrap_or(80);
        let addr = tokio::net::lookup_host((authority.host(), port))
            .await
            .map_err(|e| format!("serviceUrl {url:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("serviceUrl {url:?}: the host has no address"))?;
        let limit = self.graph.step_timeout().unwrap_or(DEFAULT_TIMEOUT);
        let deadline = self.deadline.min(tokio::time::Instant::now() + limit);
        let mut request = self.request(&path, body)?;
        request
            .headers_mut()
            .insert(header::HOST, HeaderValue::from_str(authority.as_str()).map_err(|e| e.to_string())?);
        self.exchange(addr, request, deadline, limit).await
    }

    /// The POST of `body` to `path`, with the propagated headers and a JSON content type unless one
    /// was propagated (KServe's `callService`).
    fn request(&self, path: &str, body: Bytes) -> Result<http::Request<crate::upstream::UpstreamBody>, String> {
        let mut request = http::Request::builder()
            .method(http::Method::POST)
            .uri(path)
            .body(Either::Left(Full::new(body)))
            .map_err(|e| e.to_string())?;
        let headers = request.headers_mut();
        for (name, value) in &self.headers {
            headers.append(name.clone(), value.clone());
        }
        if !headers.contains_key(header::CONTENT_TYPE) {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        Ok(request)
    }

    /// Sends `request` to `addr` and reads the whole answer before `deadline`.
    async fn exchange(
        &self,
        addr: SocketAddr,
        request: http::Request<crate::upstream::UpstreamBody>,
        deadline: tokio::time::Instant,
        limit: Duration,
    ) -> Called {
        let late = || format!("no answer within {limit:?}");
        let work = async {
            let mut upstream = Upstream::get(&self.proxy.pool, addr, false, CONNECT_TIMEOUT).await.map_err(describe)?;
            let response = upstream.send(request).await.map_err(describe)?;
            let (parts, body) = response.into_parts();
            let body = upstream
                .drive(body.collect())
                .await
                .map_err(describe)?
                .map_err(|e| format!("reading the answer: {e}"))?
                .to_bytes();
            upstream.release(&self.proxy.pool).await;
            let cold = parts
                .headers
                .get(COLD_START_HEADER)
                .and_then(|v| v.to_str().ok()?.trim().parse::<u64>().ok())
                .map(Duration::from_millis);
            Ok((Answer { status: parts.status.as_u16(), body }, cold))
        };
        tokio::time::timeout_at(deadline, work).await.map_err(|_| late())?
    }
}

fn describe(error: UpstreamError) -> String {
    match error {
        UpstreamError::Connect(e) => format!("cannot connect: {e}"),
        UpstreamError::ConnectTimeout => "cannot connect in time".to_owned(),
        UpstreamError::Failed(e) => format!("the connection failed: {e}"),
    }
}

impl Proxy {
    /// The graph the request in `session` is for, if any (services win a name both have).
    pub(crate) fn graph_for(&self, session: &ServerSession) -> Option<Arc<GraphRoute>> {
        let graphs = self.graphs.load();
        if graphs.is_empty() {
            return None;
        }
        let req = session.req_header();
        let host = super::host_of(req);
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        graphs.resolve(host, path)
    }

    /// Pokes the autoscaler for every revision with traffic of every InferenceService `graph` can
    /// reach that has no ready replica: they all start waking now, not one after another.
    fn wake(&self, graph: &GraphRoute) {
        let Some(poker) = self.waker.0.get() else { return };
        let table = self.table.load_full();
        for service in reachable_services(&graph.spec) {
            let Some(path) = graph.service_paths.get(service) else { continue };
            let Some(resolved) = table.resolve("", &format!("/serving/{}/{service}{path}", graph.namespace)) else {
                continue;
            };
            for target in resolved.targets().iter().filter(|t| t.percent > 0) {
                let key = RevisionKey::new(graph.namespace.as_str(), target.revision_name.as_str());
                if self.endpoints.get(&key).is_none_or(|r| r.ready().is_empty()) {
                    tracing::debug!(graph = %graph.key(), revision = %key, "graph wakes a revision at zero");
                    poker.poke(&key, 1);
                }
            }
        }
    }

    /// Answers a request for `graph`; false when the connection must close.
    pub(crate) async fn serve_graph(&self, session: &mut ServerSession, graph: Arc<GraphRoute>) -> bool {
        let started = Instant::now();
        let input = match read_body(session).await {
            Ok(body) => body,
            Err((status, cause)) => {
                let error = GraphError { status, cause };
                return crate::failure::respond(session, status, "application/json", error.body()).await;
            }
        };
        let graphs = self.graphs.load_full();
        let mut headers = HeaderMap::new();
        for (name, value) in &session.req_header().headers {
            if graphs.propagates(&canonical(name.as_str())) {
                headers.append(name.clone(), value.clone());
            }
        }
        self.wake(&graph);
        let limit = graph.timeout();
        let deadline = tokio::time::Instant::now() + limit;
        let caller = StepCaller { proxy: self, graph: &graph, headers, timings: Mutex::default(), deadline };
        let point = || rand::random_range(0..100u32);
        let executor = Executor::new(&graph.spec, &caller, &point);
        let timed_out = || GraphError {
            status: 504,
            cause: format!("the graph did not answer within its timeout ({}s)", limit.as_secs()),
        };
        let outcome = match tokio::time::timeout_at(deadline, executor.run(input)).await {
            // A step cut short by the graph's deadline fails as the graph's timeout, not its own.
            Ok(Err(_)) if tokio::time::Instant::now() >= deadline => Err(timed_out()),
            Ok(outcome) => outcome,
            Err(_) => Err(timed_out()),
        };
        let timings = caller.timings.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (status, body) = match &outcome {
            Ok(answer) => (answer.status, answer.body.clone()),
            Err(error) => (error.status, error.body()),
        };
        let json = serde_json::from_slice::<serde_json::Value>(&body).is_ok();
        let steps = steps_header(&timings);
        let cold = timings.iter().filter_map(|t| t.cold).max().map(|c| c.as_millis().to_string());
        let mut extra: Vec<(header::HeaderName, &str)> = vec![(header::HeaderName::from_static(STEPS_HEADER), &steps)];
        if let Some(cold) = &cold {
            extra.push((header::HeaderName::from_static(COLD_START_HEADER), cold));
        }
        let content_type = if json { "application/json" } else { "text/plain; charset=utf-8" };
        if let Err(error) = &outcome {
            tracing::warn!(graph = %graph.key(), status, cause = %error.cause, "graph failed");
        }
        tracing::debug!(
            target: "skiff_router::access",
            graph = %graph.key(), status, steps = %steps, duration_ms = started.elapsed().as_secs_f64() * 1e3, "graph"
        );
        crate::failure::respond_with(session, status, content_type, &extra, body).await
    }
}

/// Reads the request body whole, up to [`MAX_BODY`].
async fn read_body(session: &mut ServerSession) -> Result<Bytes, (u16, String)> {
    let mut body = bytes::BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > MAX_BODY {
                    return Err((413, format!("a graph request is at most {MAX_BODY} bytes")));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body.freeze()),
            Err(e) => return Err((400, format!("reading the body: {e}"))),
        }
    }
}
