//! The Pingora adapter: per request it resolves the route, picks the revision, takes a slot on a
//! replica with room (or sends to the activator), rewrites the path, and logs and counts the
//! outcome. Decisions live in [`crate::table`] and [`crate::split`]; this file only wires them in.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use async_trait::async_trait;
use bytes::Bytes;
use http::header;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorSource, ErrorType};
use prometheus_client::metrics::gauge::Gauge;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints, Slot};
use skiff_http::response::brief_str;

use crate::downstream;
use crate::metrics::{ColdStartRequest, RouterMetrics, Via};
use crate::split;
use crate::table::RouteTable;
use crate::{DEFAULT_TIMEOUT, HEALTHZ_PATH, REVISION_HEADER};

/// Time allowed to open a connection to a replica or the activator.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Idle pooled connections to replicas and activators are closed after this long: well before
/// their own idle cut (`skiff_http::ServeLimits::header_timeout`, 20 s), so the router never sends
/// on a connection the upstream is closing.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra read time given to the activator: it enforces the revision timeout itself and answers 504 with
/// a message, so the router must not time out first.
const ACTIVATOR_MARGIN: Duration = Duration::from_secs(5);

/// The router's [`ProxyHttp`] implementation.
pub(crate) struct Proxy {
    pub(crate) table: Arc<ArcSwap<RouteTable>>,
    pub(crate) endpoints: Arc<Endpoints>,
    pub(crate) activators: Arc<RevisionEndpoints>,
    pub(crate) metrics: RouterMetrics,
}

/// Where this request is being sent.
enum Upstream {
    /// A replica, with the slot that counts this request against its containerConcurrency.
    Replica(Slot),
    /// An activator (with the slot that counts this request against it), which holds the request
    /// until the revision has room.
    Activator(Slot),
}

/// What the router knows about one request.
pub(crate) struct RequestCtx {
    started: Instant,
    healthz: bool,
    service: String,
    revision: Option<RevisionKey>,
    /// Upstream path and query when the route rewrites it.
    path: Option<String>,
    timeout: Duration,
    upstream: Option<Upstream>,
    /// The revision's in-flight gauge while this request counts in it.
    in_flight: Option<Gauge>,
    /// Set when this request began its revision's cold start.
    cold_start: Option<ColdStartRequest>,
}

/// Requests the router answers itself; the only place such outcomes become HTTP statuses.
enum Rejection {
    UnknownService { host: String, path: String },
    NoRevision { service: String },
    NoActivator { revision: String },
}

impl Rejection {
    fn status(&self) -> u16 {
        match self {
            Rejection::UnknownService { .. } => 404,
            Rejection::NoRevision { .. } | Rejection::NoActivator { .. } => 503,
        }
    }

    fn message(&self) -> String {
        match self {
            Rejection::UnknownService { host, path } => {
                format!("no InferenceService matches host {} and path {}", brief_str(host), brief_str(path))
            }
            Rejection::NoRevision { service } => format!("InferenceService {service} has no revision taking traffic"),
            Rejection::NoActivator { revision } => {
                format!("revision {revision} has no ready replica with room and no activator is ready")
            }
        }
    }
}

impl Proxy {
    /// Resolves the route and picks the revision and upstream, filling `ctx`.
    fn route(&self, host: &str, path: &str, ctx: &mut RequestCtx) -> Result<(), Rejection> {
        let table = self.table.load();
        let Some(resolved) = table.resolve(host, path) else {
            return Err(Rejection::UnknownService { host: host.to_owned(), path: path.to_owned() });
        };
        ctx.service = resolved.service.key();
        ctx.timeout = resolved.service.timeout.unwrap_or(DEFAULT_TIMEOUT);
        ctx.path = (resolved.path != path).then_some(resolved.path);
        let target = split::choose(&resolved.service.targets, resolved.tag.as_deref(), &mut rand::rng());
        let Some(target) = target else { return Err(Rejection::NoRevision { service: ctx.service.clone() }) };
        let key = RevisionKey::new(resolved.service.namespace.as_str(), target.revision_name.as_str());
        let revision = self.endpoints.get(&key);
        let slot = revision.as_ref().and_then(|revision| {
            revision.arrived();
            revision.try_acquire()
        });
        let upstream = match slot {
            Some(slot) => Upstream::Replica(slot),
            None => match self.activators.try_acquire() {
                Some(slot) => Upstream::Activator(slot),
                None => return Err(Rejection::NoActivator { revision: key.to_string() }),
            },
        };
        if matches!(upstream, Upstream::Activator(_)) && revision.is_none_or(|r| r.ready().is_empty()) {
            ctx.cold_start = self.metrics.at_zero(&ctx.service, &key.name);
        }
        ctx.in_flight = Some(self.metrics.started(&ctx.service, &key.name));
        ctx.revision = Some(key);
        ctx.upstream = Some(upstream);
        Ok(())
    }

    /// An activator other than `failed`'s, or the same when it is the only one.
    fn another_activator(&self, failed: Option<SocketAddr>) -> Option<Slot> {
        let slot = self.activators.try_acquire()?;
        if Some(slot.replica().addr) != failed {
            return Some(slot);
        }
        let other = self.activators.try_acquire().filter(|s| Some(s.replica().addr) != failed);
        other.or(Some(slot))
    }
}

fn upstream_addr(upstream: &Upstream) -> SocketAddr {
    match upstream {
        Upstream::Replica(slot) | Upstream::Activator(slot) => slot.replica().addr,
    }
}

fn via(upstream: &Upstream) -> Via {
    match upstream {
        Upstream::Replica(_) => Via::Direct,
        Upstream::Activator(_) => Via::Activator,
    }
}

/// The status and message a failed request is answered with (status 0: the client is gone, nothing
/// can be written): 504 when the upstream timed out, 502 for other upstream failures, 400 for a
/// broken request, 500 otherwise.
fn failure(e: &Error) -> (u16, String) {
    let what = || match e.context.as_ref() {
        Some(context) => format!("{} ({context})", e.etype().as_str()),
        None => e.etype().as_str().to_owned(),
    };
    match (e.etype(), e.esource()) {
        (ErrorType::HTTPStatus(code), _) => (*code, what()),
        (ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout, ErrorSource::Upstream) => {
            (504, format!("the upstream did not answer in time: {}", what()))
        }
        (_, ErrorSource::Upstream) => (502, format!("the upstream failed: {}", what())),
        (ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed, ErrorSource::Downstream) => {
            (0, String::new())
        }
        (_, ErrorSource::Downstream) => (400, format!("bad request: {}", what())),
        (_, ErrorSource::Internal | ErrorSource::Unset) => (500, format!("router error: {}", what())),
    }
}

/// The name of the revision the request went to ("" before one is chosen).
fn revision_name(ctx: &RequestCtx) -> &str {
    ctx.revision.as_ref().map_or("", |key| key.name.as_str())
}

/// The request's host: the Host header, else the authority of an absolute URI.
fn host_of(req: &RequestHeader) -> &str {
    req.headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .unwrap_or("")
}

/// `{"error": message}` with `status`: how every request the router answers itself fails, whether
/// it refused it ([`Rejection`]) or proxying failed ([`failure`]). (Pingora answers a head it
/// cannot parse with its own empty 400 before any hook runs.)
async fn respond_error(session: &mut Session, status: u16, message: &str) -> pingora::Result<()> {
    let body = serde_json::json!({ "error": message }).to_string();
    respond(session, status, "application/json", Bytes::from(body)).await
}

async fn respond(session: &mut Session, status: u16, content_type: &str, body: Bytes) -> pingora::Result<()> {
    let mut header = ResponseHeader::build(status, Some(2))?;
    header.insert_header(header::CONTENT_TYPE, content_type)?;
    header.insert_header(header::CONTENT_LENGTH, body.len())?;
    session.write_response_header(Box::new(header), false).await?;
    session.write_response_body(Some(body), true).await
}

#[async_trait]
impl ProxyHttp for Proxy {
    type CTX = RequestCtx;

    fn new_ctx(&self) -> RequestCtx {
        RequestCtx {
            started: Instant::now(),
            healthz: false,
            service: String::new(),
            revision: None,
            path: None,
            timeout: DEFAULT_TIMEOUT,
            upstream: None,
            in_flight: None,
            cold_start: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        downstream::head_read();
        let req = session.req_header();
        if req.uri.path() == HEALTHZ_PATH {
            ctx.healthz = true;
            respond(session, 200, "text/plain", Bytes::from_static(b"ok\n")).await?;
            return Ok(true);
        }
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let Err(rejection) = self.route(host_of(req), path, ctx) else { return Ok(false) };
        respond_error(session, rejection.status(), &rejection.message()).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<Box<HttpPeer>> {
        let Some(upstream) = ctx.upstream.as_ref() else {
            return Err(Error::explain(ErrorType::ConnectNoRoute, "no activator is ready"));
        };
        let mut peer = HttpPeer::new(upstream_addr(upstream), false, String::new());
        peer.options.connection_timeout = Some(CONNECT_TIMEOUT);
        peer.options.idle_timeout = Some(POOL_IDLE_TIMEOUT);
        let via_activator = matches!(ctx.upstream, Some(Upstream::Activator(_)));
        peer.options.read_timeout = Some(if via_activator { ctx.timeout + ACTIVATOR_MARGIN } else { ctx.timeout });
        Ok(Box::new(peer))
    }

    async fn upstream_request_filter(
        &self,
        _session: &mut Session,
        upstream_request: &mut RequestHeader,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        if let Some(path) = &ctx.path {
            let uri = path.parse().map_err(|e| Error::because(ErrorType::InternalError, "upstream path", e))?;
            upstream_request.set_uri(uri);
        }
        match (&ctx.upstream, &ctx.revision) {
            (Some(Upstream::Activator(_)), Some(key)) => {
                upstream_request.insert_header(REVISION_HEADER, key.to_string())?
            }
            _ => drop(upstream_request.remove_header(REVISION_HEADER)),
        }
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        upstream_response: &mut ResponseHeader,
        ctx: &mut RequestCtx,
    ) -> pingora::Result<()> {
        // Tell the client which revision answered (canary checks, debugging); never trust the upstream's value.
        upstream_response.insert_header(REVISION_HEADER, revision_name(ctx))?;
        Ok(())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut RequestCtx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        // A replica that refuses connections (gone between endpoint updates): give back its slot and let
        // an activator hold the request instead; an activator that refuses (killed, or not yet out of the
        // endpoints): another one. Nothing was sent yet, so retrying is safe; Pingora bounds the retries.
        let failed = ctx.upstream.take().map(|u| upstream_addr(&u));
        ctx.upstream = self.another_activator(failed).map(Upstream::Activator);
        e.set_retry(ctx.upstream.is_some());
        e
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut RequestCtx,
        client_reused: bool,
    ) -> Box<Error> {
        // A kept-alive connection the replica closed just before this request (a replica draining on
        // scale-down) failed before anything was answered: safe to send again while the body is still
        // buffered, as inference has no side effects. Pingora marks such errors "reused only"; the retry
        // goes through an activator, which picks a replica that is still there.
        let mut e = e.more_context(format!("Peer: {peer}"));
        if session.as_ref().retry_buffer_truncated() {
            e.set_retry(false);
        } else {
            e.retry.decide_reuse(client_reused);
        }
        if e.retry() {
            let failed = ctx.upstream.take().map(|u| upstream_addr(&u));
            ctx.upstream = self.another_activator(failed).map(Upstream::Activator);
            e.set_retry(ctx.upstream.is_some());
        }
        e
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, _ctx: &mut RequestCtx) -> FailToProxy {
        let (code, message) = failure(e);
        if code > 0
            && let Err(write) = respond_error(session, code, &message).await
        {
            tracing::debug!(error = %write, "cannot answer the client with the failure");
        }
        FailToProxy { error_code: code, can_reuse_downstream: false }
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        // Taking the upstream drops the replica slot: the request no longer counts as in flight.
        let upstream = ctx.upstream.take();
        let cold_start = ctx.cold_start.take();
        if let Some(in_flight) = ctx.in_flight.take() {
            in_flight.dec();
        }
        if ctx.healthz {
            return;
        }
        let elapsed = ctx.started.elapsed();
        // 499 (as nginx): the request failed before any response could be written, e.g. the client left.
        let status = session.response_written().map_or(if e.is_some() { 499 } else { 0 }, |r| r.status.as_u16());
        let revision = revision_name(ctx);
        self.metrics.answered(&ctx.service, revision, status, elapsed);
        if let Some(cold_start) = cold_start {
            self.metrics.cold_start_ended(&ctx.service, revision, cold_start, e.is_none() && status > 0);
        }
        if let Some(upstream) = &upstream {
            self.metrics.sent(&ctx.service, revision, via(upstream));
        }
        let req = session.req_header();
        if let Some(error) = e {
            tracing::warn!(service = %ctx.service, revision, path = %req.uri, status, %error, "proxying failed");
        }
        // The access log is off by default (a line per request costs throughput): RUST_LOG=skiff_router::access=debug.
        tracing::debug!(
            target: "skiff_router::access",
            method = %req.method,
            host = host_of(req),
            path = %req.uri,
            service = %ctx.service,
            revision,
            upstream = %upstream.as_ref().map_or_else(|| "-".to_owned(), |u| upstream_addr(u).to_string()),
            via = upstream.as_ref().map_or("-", |u| via(u).as_str()),
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            error = e.map(tracing::field::display),
            "request"
        );
    }
}
