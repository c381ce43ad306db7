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
use pingora::proxy::{ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorType};
use skiff_api::endpoints::{Endpoints, Slot};

use crate::metrics::{RouterMetrics, Via};
use crate::split;
use crate::table::RouteTable;
use crate::{DEFAULT_TIMEOUT, HEALTHZ_PATH, REVISION_HEADER};

/// Time allowed to open a connection to a replica or the activator.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra read time given to the activator: it enforces the revision timeout itself and answers 504 with
/// a message, so the router must not time out first.
const ACTIVATOR_MARGIN: Duration = Duration::from_secs(5);

/// The router's [`ProxyHttp`] implementation.
pub(crate) struct Proxy {
    pub(crate) table: Arc<ArcSwap<RouteTable>>,
    pub(crate) endpoints: Arc<Endpoints>,
    pub(crate) activator: SocketAddr,
    pub(crate) metrics: RouterMetrics,
}

/// Where this request is being sent.
enum Upstream {
    /// A replica, with the slot that counts this request against its containerConcurrency.
    Replica(Slot),
    /// The activator, which holds the request until the revision has room.
    Activator,
}

/// What the router knows about one request.
pub(crate) struct RequestCtx {
    started: Instant,
    healthz: bool,
    service: String,
    revision: String,
    /// Upstream path and query when the route rewrites it.
    path: Option<String>,
    timeout: Duration,
    upstream: Option<Upstream>,
}

/// Requests the router answers itself; the only place such outcomes become HTTP statuses.
enum Rejection {
    NoRoute { host: String, path: String },
    NoRevision { service: String },
}

impl Rejection {
    fn status(&self) -> u16 {
        match self {
            Rejection::NoRoute { .. } => 404,
            Rejection::NoRevision { .. } => 503,
        }
    }

    fn message(&self) -> String {
        match self {
            Rejection::NoRoute { host, path } => format!("no InferenceService matches host {host} and path {path}"),
            Rejection::NoRevision { service } => format!("InferenceService {service} has no revision taking traffic"),
        }
    }
}

impl Proxy {
    /// Resolves the route and picks the revision and upstream, filling `ctx`.
    fn route(&self, host: &str, path: &str, ctx: &mut RequestCtx) -> Result<(), Rejection> {
        let table = self.table.load();
        let Some(resolved) = table.resolve(host, path) else {
            return Err(Rejection::NoRoute { host: host.to_owned(), path: path.to_owned() });
        };
        ctx.service = resolved.service.key();
        ctx.timeout = resolved.service.timeout.unwrap_or(DEFAULT_TIMEOUT);
        ctx.path = (resolved.path != path).then_some(resolved.path);
        let target = split::choose(&resolved.service.targets, resolved.tag.as_deref(), &mut rand::rng());
        let Some(target) = target else { return Err(Rejection::NoRevision { service: ctx.service.clone() }) };
        ctx.revision = target.revision_name.clone();
        let slot = self.endpoints.get(&ctx.revision).and_then(|revision| {
            revision.arrived();
            revision.try_acquire()
        });
        ctx.upstream = Some(slot.map_or(Upstream::Activator, Upstream::Replica));
        Ok(())
    }

    fn upstream_addr(&self, upstream: Option<&Upstream>) -> SocketAddr {
        match upstream {
            Some(Upstream::Replica(slot)) => slot.replica().addr,
            Some(Upstream::Activator) | None => self.activator,
        }
    }
}

fn via(upstream: &Upstream) -> Via {
    match upstream {
        Upstream::Replica(_) => Via::Direct,
        Upstream::Activator => Via::Activator,
    }
}

/// The request's host: the Host header, else the authority of an absolute URI.
fn host_of(req: &RequestHeader) -> &str {
    req.headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .unwrap_or("")
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
            revision: String::new(),
            path: None,
            timeout: DEFAULT_TIMEOUT,
            upstream: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<bool> {
        let req = session.req_header();
        if req.uri.path() == HEALTHZ_PATH {
            ctx.healthz = true;
            respond(session, 200, "text/plain", Bytes::from_static(b"ok\n")).await?;
            return Ok(true);
        }
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str());
        let Err(rejection) = self.route(host_of(req), path, ctx) else { return Ok(false) };
        let body = serde_json::json!({ "error": rejection.message() }).to_string();
        respond(session, rejection.status(), "application/json", Bytes::from(body)).await?;
        Ok(true)
    }

    async fn upstream_peer(&self, _session: &mut Session, ctx: &mut RequestCtx) -> pingora::Result<Box<HttpPeer>> {
        let mut peer = HttpPeer::new(self.upstream_addr(ctx.upstream.as_ref()), false, String::new());
        peer.options.connection_timeout = Some(CONNECT_TIMEOUT);
        let via_activator = matches!(ctx.upstream, Some(Upstream::Activator));
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
        match ctx.upstream {
            Some(Upstream::Activator) => upstream_request.insert_header(REVISION_HEADER, ctx.revision.as_str())?,
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
        upstream_response.insert_header(REVISION_HEADER, ctx.revision.as_str())?;
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
        // the activator hold the request instead. Nothing was sent yet, so retrying is safe.
        let direct = matches!(ctx.upstream, Some(Upstream::Replica(_)));
        if direct {
            ctx.upstream = Some(Upstream::Activator);
        }
        e.set_retry(direct);
        e
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut RequestCtx) {
        // Taking the upstream drops the replica slot: the request no longer counts as in flight.
        let upstream = ctx.upstream.take();
        if ctx.healthz {
            return;
        }
        let elapsed = ctx.started.elapsed();
        // 499 (as nginx): the request failed before any response could be written, e.g. the client left.
        let status = session.response_written().map_or(if e.is_some() { 499 } else { 0 }, |r| r.status.as_u16());
        self.metrics.answered(&ctx.service, &ctx.revision, status, elapsed);
        if let Some(upstream) = &upstream {
            self.metrics.sent(&ctx.service, &ctx.revision, via(upstream));
        }
        let req = session.req_header();
        if let Some(error) = e {
            tracing::warn!(service = %ctx.service, revision = %ctx.revision, path = %req.uri, status, %error, "proxying failed");
        }
        // The access log is off by default (a line per request costs throughput): RUST_LOG=skiff_router::access=debug.
        tracing::debug!(
            target: "skiff_router::access",
            method = %req.method,
            host = host_of(req),
            path = %req.uri,
            service = %ctx.service,
            revision = %ctx.revision,
            upstream = %upstream.as_ref().map_or_else(|| "-".to_owned(), |u| self.upstream_addr(Some(u)).to_string()),
            via = upstream.as_ref().map_or("-", |u| via(u).as_str()),
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            error = e.map(tracing::field::display),
            "request"
        );
    }
}
