//! Test fixtures: tiny hyper servers standing in for replicas and the activator, a router on
//! loopback, and an HTTP client.

#![allow(dead_code)]

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use skiff_api::traffic::TrafficTarget;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints};
use skiff_router::{DownstreamLimits, Router, RouterConfig, RouterHandle, ServiceRoute};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What a fake upstream saw: its id, the path and query, and the `x-skiff-revision` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub id: String,
    pub path: String,
    pub revision_header: Option<String>,
}

/// A fake upstream: answers every request with a JSON echo of what it saw, after a permit from `gate`
/// when one is set (so a test can hold requests in flight).
pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

pub async fn upstream(id: &str) -> Upstream {
    upstream_gated(id, None).await
}

pub async fn upstream_gated(id: &str, gate: Option<Arc<Semaphore>>) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (id, log) = (id.to_owned(), seen.clone());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { return };
            let (id, log, gate) = (id.clone(), log.clone(), gate.clone());
            let service = service_fn(move |req: Request<Incoming>| {
                let (id, log, gate) = (id.clone(), log.clone(), gate.clone());
                async move {
                    if let Some(gate) = gate {
                        gate.acquire().await.unwrap().forget();
                    }
                    let seen = Seen {
                        id: id.clone(),
                        path: req.uri().path_and_query().map_or("/", |p| p.as_str()).to_owned(),
                        revision_header: req.headers().get("x-skiff-revision").map(|v| v.to_str().unwrap().to_owned()),
                    };
                    log.lock().unwrap().push(seen.clone());
                    let body = json!({"id": seen.id, "path": seen.path, "revision": seen.revision_header});
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body.to_string()))))
                }
            });
            tokio::spawn(async move {
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    Upstream { addr, seen }
}

impl Upstream {
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

pub fn target(revision: &str, percent: u32, tag: Option<&str>) -> TrafficTarget {
    TrafficTarget {
        revision_name: revision.to_owned(),
        percent,
        tag: tag.map(str::to_owned),
        latest_revision: tag == Some("latest"),
    }
}

pub fn service(namespace: &str, name: &str, targets: Vec<TrafficTarget>) -> ServiceRoute {
    ServiceRoute { namespace: namespace.to_owned(), name: name.to_owned(), targets, ..ServiceRoute::default() }
}

/// Registers `revision` (`namespace/name`) with the given ready replicas.
pub fn revision(
    endpoints: &Endpoints,
    revision: &str,
    container_concurrency: usize,
    replicas: &[SocketAddr],
) -> Arc<RevisionEndpoints> {
    let key = RevisionKey::parse(revision).expect("namespace/name");
    let revision = RevisionEndpoints::new(key, container_concurrency);
    revision.set_ready(replicas.iter().map(|addr| revision.replica(*addr)).collect());
    endpoints.insert(revision.clone());
    revision
}

/// A router on a free loopback port with the given activator, grace period 0.
pub fn router(endpoints: Arc<Endpoints>, activator: SocketAddr) -> (Router, RouterHandle) {
    router_with(endpoints, activator, DownstreamLimits::default())
}

/// A router as [`router`] makes, with `downstream` bounds.
pub fn router_with(
    endpoints: Arc<Endpoints>,
    activator: SocketAddr,
    downstream: DownstreamLimits,
) -> (Router, RouterHandle) {
    // Access logs show up with a failing test's output.
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter("skiff_router=info").try_init();
    let config = RouterConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        domain: "example.com".to_owned(),
        activator: Some(activator),
        threads: 1,
        grace_period: Duration::ZERO,
        downstream,
    };
    let router = Router::new(config, endpoints).unwrap();
    let handle = router.start().unwrap();
    (router, handle)
}

/// Two revisions of `<namespace>/iris`, each with one replica (`new` for 00002, `old` for 00001) and
/// no containerConcurrency limit, published with `targets`; plus the router's handle and a caller.
pub struct TwoRevisions {
    pub new: Upstream,
    pub old: Upstream,
    pub endpoints: Arc<Endpoints>,
    pub handle: RouterHandle,
    pub caller: Caller,
}

pub async fn two_revisions(namespace: &str, targets: Vec<TrafficTarget>) -> TwoRevisions {
    let (new, old, activator) = (upstream("new").await, upstream("old").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, &format!("{namespace}/iris-predictor-00002"), 0, &[new.addr]);
    revision(&endpoints, &format!("{namespace}/iris-predictor-00001"), 0, &[old.addr]);
    let (router, handle) = router(endpoints.clone(), activator.addr);
    router.publish(vec![service(namespace, "iris", targets)]);
    let caller = Caller::new(handle.listen_addr());
    TwoRevisions { new, old, endpoints, handle, caller }
}

/// Waits until the router's metrics contain `needle`: the client can see a response before the
/// router has logged it. Panics with the metrics after a generous bound (a liveness check, not a timing one).
pub async fn metrics_eventually_contain(router: &Router, needle: &str) {
    for _ in 0..2000 {
        if router.metrics_text().contains(needle) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("metrics never contained {needle}:\n{}", router.metrics_text());
}

/// An HTTP/1 client for the router.
pub struct Caller {
    client: Client<HttpConnector, Full<Bytes>>,
    base: SocketAddr,
}

impl Caller {
    pub fn new(base: SocketAddr) -> Caller {
        Caller { client: Client::builder(TokioExecutor::new()).build_http(), base }
    }

    /// Sends `method path` with `Host: host`; returns the status and the body as JSON (or a string).
    pub async fn call(&self, method: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut req = Request::builder().method(method).uri(format!("http://{}{path}", self.base)).header("host", host);
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let body = if method == "POST" { Bytes::from_static(br#"{"instances":[[1.0]]}"#) } else { Bytes::new() };
        let response = self.client.request(req.body(Full::new(body)).unwrap()).await.unwrap();
        let status = response.status().as_u16();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
        (status, body)
    }

    pub async fn get(&self, host: &str, path: &str) -> (u16, Value) {
        self.call("GET", host, path, &[]).await
    }

    pub async fn post(&self, host: &str, path: &str) -> (u16, Value) {
        self.call("POST", host, path, &[]).await
    }
}
