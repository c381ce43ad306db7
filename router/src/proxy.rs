//! One request through the router: resolve the route, pick the revision, take a slot on a replica
//! with room (or send to the activator), forward over a pooled upstream connection
//! ([`crate::upstream`]), answer, and log and count the outcome. Decisions live in
//! [`crate::table`] and [`crate::split`]; failures become answers in [`crate::failure`]. A
//! request body that streams keeps streaming while the answer comes back ([`pump`]), so a gRPC
//! bidirectional stream flows both ways. Requests to the router itself rather than a service
//! get its server-level V2 answers and OpenAI's model list ([`own`]), and gRPC calls and OpenAI
//! requests to it are routed by the model their body names ([`by_message`]).

pub(crate) mod graph;

mod by_message;
mod own;
mod pump;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use bytes::{Bytes, BytesMut};
use http::{HeaderValue, header};
use http_body_util::channel::Channel;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body as _, Incoming};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::protocols::http::{HttpTask, ServerSession};
use prometheus_client::metrics::gauge::Gauge;
use skiff_api::serving::{COLD_START_HEADER, is_own_header};
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints, Slot};
use tokio::time::Instant as Deadline;

use crate::failure::{self, Failure};
use crate::metrics::{ColdStartRequest, RouterMetrics, Via};
use crate::split;
use crate::table::RouteTable;
use crate::upstream::{Pool, Upstream, UpstreamError};
use crate::{DEFAULT_TIMEOUT, HEALTHZ_PATH, REVISION_HEADER};
pub(crate) use by_message::PeekBudget;
use pump::Pump;

/// Time allowed to open a connection to a replica or the activator.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time given to the activator: it enforces the revision timeout itself and answers 504 with
/// a message, so the router must not time out first.
const ACTIVATOR_MARGIN: Duration = Duration::from_secs(5);
/// Request bodies of at most this many bytes (by Content-Length) are read whole before sending:
/// they leave with the head in one write, and can be sent again when a kept-alive connection turns
/// out closed. Larger or chunked bodies stream.
const BUFFERED_BODY: usize = 64 * 1024;
/// Connections tried for one request: its upstream, then activators.
const ATTEMPTS: usize = 3;
/// Request headers not passed upstream: those that describe one hop, not the request (RFC 9110
/// §7.6.1), and `Expect`, which the router answers itself. (Clients may not set the revision header
/// either.)
const HOP_BY_HOP: [&str; 7] =
    ["connection", "keep-alive", "proxy-connection", "te", "transfer-encoding", "upgrade", "expect"];

/// What the router needs to route and forward.
pub(crate) struct Proxy {
    pub(crate) table: Arc<ArcSwap<RouteTable>>,
    pub(crate) endpoints: Arc<Endpoints>,
    pub(crate) activators: Arc<RevisionEndpoints>,
    pub(crate) metrics: RouterMetrics,
    pub(crate) pool: Pool,
    /// Set once SIGTERM has been received: the router's own readiness turns false.
    pub(crate) draining: Arc<AtomicBool>,
    /// How long a request routed by its body may take to send the bytes that name the model.
    pub(crate) peek_timeout: Duration,
    /// The bytes such bodies may hold at once, across connections.
    pub(crate) peek_budget: by_message::PeekBudget,
    /// How long an answer whose head is out may go with nothing flowing either way.
    pub(crate) stream_idle: Duration,
    /// When the router started, in Unix seconds: the `created` of its OpenAI model list.
    pub(crate) started: u64,
    /// The InferenceGraphs it runs ([`crate::graph`]).
    pub(crate) graphs: Arc<ArcSwap<crate::graph::GraphTable>>,
    /// The autoscaler's poke, which a graph uses to wake its steps at once.
    pub(crate) waker: graph::Waker,
}

/// The request body as it goes upstream.
enum Outgoing {
    /// Read whole: sent in one piece, and again on a retry.
    Whole(Bytes),
    /// Streamed from the client as it arrives, after these bytes already read (to route it).
    Stream(Option<Bytes>),
}

/// Where this request is being sent, with the slot that counts it there.
enum Target {
    /// A replica with room (its containerConcurrency).
    Replica(Slot),
    /// An activator, which holds the request until the revision has room.
    Activator(Slot),
}

impl Target {
    fn addr(&self) -> SocketAddr {
        match self {
            Target::Replica(slot) | Target::Activator(slot) => slot.replica().addr,
        }
    }

    fn via(&self) -> Via {
        match self {
            Target::Replica(_) => Via::Direct,
            Target::Activator(_) => Via::Activator,
        }
    }
}

/// What the router knows about one request.
struct RequestCtx {
    service: String,
    revision: Option<RevisionKey>,
    /// Upstream path and query when the route rewrites it.
    path: Option<String>,
    timeout: Duration,
    target: Option<Target>,
    /// The revision's in-flight gauge while this request counts in it.
    in_flight: Option<Gauge>,
    /// Set when this request began its revision's cold start.
    cold_start: Option<ColdStartRequest>,
    /// The response head went out: a failure now can only close the connection.
    responded: bool,
    /// The first bytes of the body, read to find the model a gRPC call names; sent first.
    peeked: Option<Bytes>,
}

impl Proxy {
    /// Answers the request whose head `session` has just read; false when the connection must close.
    pub(crate) async fn serve(&self, session: &mut ServerSession) -> bool {
        let started = Instant::now();
        if session.req_header().uri.path() == HEALTHZ_PATH {
            return failure::respond(session, 200, "text/plain", Bytes::from_static(b"ok\n")).await;
        }
        if !failure::refused_method(&session.req_header().method)
            && let Some(graph) = self.graph_for(session)
        {
            if expects_continue(session.req_header()) && continue_100(session).await.is_err() {
                return false;
            }
            return self.serve_graph(session, graph).await;
        }
        if let Some(reusable) = self.answer_own(session).await {
            return reusable;
        }
        let mut ctx = RequestCtx {
            service: String::new(),
            revision: None,
            path: None,
            timeout: DEFAULT_TIMEOUT,
            target: None,
            in_flight: None,
            cold_start: None,
            responded: false,
            peeked: None,
        };
        let outcome = if failure::refused_method(&session.req_header().method) {
            Err(Failure::MethodNotAllowed(session.req_header().method.clone()))
        } else {
            match self.route(session, &mut ctx).await {
                Ok(()) => self.forward(session, &mut ctx).await,
                Err(failure) => Err(failure),
            }
        };
        let (status, reusable) = match &outcome {
            Ok(status) => (*status, true),
            // The tunnel's bytes may follow a CONNECT: the connection ends after the answer.
            Err(failure @ Failure::MethodNotAllowed(method)) => {
                (failure.status(), failure::answer(session, failure).await && *method != http::Method::CONNECT)
            }
            Err(failure) if ctx.responded => (failure.status(), false),
            Err(failure) => (failure.status(), failure::answer(session, failure).await),
        };
        self.log(session.req_header(), &mut ctx, status, outcome.as_ref().err(), started.elapsed());
        reusable
    }

    /// Resolves the route and picks the revision and target, filling `ctx`. A gRPC call or an
    /// OpenAI request whose Host names no service is routed by the model its body names (read here).
    async fn route(&self, session: &mut ServerSession, ctx: &mut RequestCtx) -> Result<(), Failure> {
        let table = self.table.load_full();
        let req = session.req_header();
        let path = req.uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let host = host_of(req).to_owned();
        let resolved = match table.resolve(&host, &path) {
            Some(resolved) => resolved,
            None => match by_message::by_body(session, &table, &host)? {
                Some(by_body) => {
                    let (model, peeked) = by_body.model_name(session, self.peek_timeout, &self.peek_budget).await?;
                    ctx.peeked = Some(peeked);
                    let named_in = by_body.named_in();
                    table.resolve_model(&model, &path).ok_or(Failure::UnknownModel { model, named_in })?
                }
                None => return Err(Failure::UnknownService { host, path }),
            },
        };
        ctx.service = resolved.service.key();
        ctx.timeout = resolved.service.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let target = split::choose(resolved.targets(), resolved.tag.as_deref(), &mut rand::rng());
        ctx.path = (resolved.path != path).then(|| resolved.path.clone());
        let Some(target) = target else { return Err(Failure::NoRevision { service: ctx.service.clone() }) };
        let key = RevisionKey::new(resolved.service.namespace.as_str(), target.revision_name.as_str());
        let revision = self.endpoints.get(&key);
        let slot = revision.as_ref().and_then(|revision| {
            revision.arrived();
            revision.try_acquire()
        });
        let target = match slot {
            Some(slot) => Target::Replica(slot),
            None => match self.activators.try_acquire() {
                Some(slot) => Target::Activator(slot),
                None => return Err(Failure::NoActivator { revision: key.to_string() }),
            },
        };
        if matches!(target, Target::Activator(_)) && revision.is_none_or(|r| r.ready().is_empty()) {
            ctx.cold_start = self.metrics.at_zero(&ctx.service, &key.name);
        }
        ctx.in_flight = Some(self.metrics.started(&ctx.service, &key.name));
        ctx.revision = Some(key);
        ctx.target = Some(target);
        Ok(())
    }

    /// An activator other than the one at `failed`, or the same when it is the only one.
    fn another_activator(&self, failed: SocketAddr) -> Option<Slot> {
        let slot = self.activators.try_acquire()?;
        if slot.replica().addr != failed {
            return Some(slot);
        }
        self.activators.try_acquire().filter(|s| s.replica().addr != failed).or(Some(slot))
    }

    /// Sends the request upstream and streams the answer back; the answer's status.
    async fn forward(&self, session: &mut ServerSession, ctx: &mut RequestCtx) -> Result<u16, Failure> {
        let margin = if matches!(ctx.target, Some(Target::Activator(_))) { ACTIVATOR_MARGIN } else { Duration::ZERO };
        let limit = ctx.timeout + margin;
        let deadline = Deadline::now() + limit;
        let length = content_length(session.req_header());
        // HTTP/2 frames its body itself: without a Content-Length there is one unless the head ended the stream.
        let http2 = session.is_http2();
        let has_body =
            length.map_or_else(|| is_chunked(session.req_header()) || (http2 && !session.is_body_done()), |n| n > 0);
        // A body read to route the request was asked for then, if the client waits to be asked.
        if has_body && ctx.peeked.is_none() && expects_continue(session.req_header()) {
            continue_100(session).await?;
        }
        let outgoing = match (ctx.peeked.take(), length) {
            // Routed by the model its body names: whole if that was all, else the rest streams after it.
            (Some(peeked), _) if session.is_body_done() => Outgoing::Whole(peeked),
            // A small body is read whole as any other, after the bytes read to route it.
            (Some(peeked), Some(length)) if length <= BUFFERED_BODY => Outgoing::Whole(
                tokio::time::timeout_at(deadline, read_rest(session, peeked, length))
                    .await
                    .map_err(|_| timed_out(limit))??,
            ),
            (Some(peeked), _) => Outgoing::Stream(Some(peeked)),
            // Pingora bounds each HTTP/1 read (60 s) but no HTTP/2 one: those wait until the deadline at most.
            (None, Some(length)) if length <= BUFFERED_BODY && http2 => Outgoing::Whole(
                tokio::time::timeout_at(deadline, read_whole_body(session, length))
                    .await
                    .map_err(|_| timed_out(limit))??,
            ),
            (None, Some(length)) if length <= BUFFERED_BODY => Outgoing::Whole(read_whole_body(session, length).await?),
            (None, _) if has_body => Outgoing::Stream(None),
            (None, _) => Outgoing::Whole(Bytes::new()),
        };
        let (addr, mut upstream, response, mut pump) =
            self.send(session, ctx, outgoing, http2, (deadline, limit)).await?;
        let (parts, mut body) = response.into_parts();
        let status = parts.status.as_u16();
        let mut header = ResponseHeader::build(parts.status, Some(parts.headers.len() + 1))
            .map_err(|e| Failure::Upstream(e.to_string()))?;
        let via_activator = matches!(ctx.target, Some(Target::Activator(_)));
        for (name, value) in &parts.headers {
            if passes_back(name, via_activator) {
                header.append_header(name.clone(), value.clone()).map_err(|e| Failure::Upstream(e.to_string()))?;
            }
        }
        // Tell the client which revision answered (canary checks, debugging); never trust the upstream's value.
        header.insert_header(REVISION_HEADER, revision_name(ctx)).map_err(|e| Failure::Upstream(e.to_string()))?;
        if http2 && body.is_end_stream() {
            // A head that ends the stream (gRPC's trailers-only answer, its status in the head) must
            // reach the client the same way: gRPC clients refuse an empty body after it.
            session
                .response_duplex_vec(vec![HttpTask::Header(Box::new(header), true)])
                .await
                .map_err(|_| Failure::ClientGone)?;
            ctx.responded = true;
            upstream.release(&self.pool).await;
            return Ok(status);
        }
        session.write_response_header(Box::new(header)).await.map_err(|_| Failure::ClientGone)?;
        ctx.responded = true;
        // Once the head is out, an exchange with nothing flowing either way for the idle bound ends
        // (an open stream holds a slot on its replica), as Envoy's stream idle timeout does.
        let mut quiet_until = Deadline::now() + self.stream_idle;
        loop {
            // The client's body keeps flowing upstream while the answer comes back (a bidirectional stream).
            let idle_first = quiet_until < deadline;
            let next = tokio::select! {
                biased;
                next = tokio::time::timeout_at(deadline.min(quiet_until), upstream.drive(body.frame())) => next,
                pumped = pump.step(session), if pump.active() => {
                    pumped?;
                    quiet_until = Deadline::now() + self.stream_idle;
                    continue;
                }
            };
            let frame = match next {
                Err(_) if idle_first => {
                    let idle = Failure::StreamIdle(self.stream_idle);
                    if http2 && skiff_http::grpc::is_grpc(&session.req_header().headers) {
                        // A gRPC client hears why its stream ended in its status, not as a reset.
                        let trailers = skiff_http::grpc::trailers(idle.grpc_code(), &idle.message());
                        let _ = session.write_response_trailers(trailers).await;
                    }
                    return Err(idle);
                }
                Err(_) => return Err(timed_out(limit)),
                Ok(Err(error)) => return Err(Failure::upstream(error, addr)),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(Err(e)))) => return Err(Failure::Upstream(format!("reading the answer: {e}"))),
                Ok(Ok(Some(Ok(frame)))) => frame,
            };
            match frame.into_data() {
                Ok(data) => session.write_response_body(data, false).await.map_err(|_| Failure::ClientGone)?,
                // gRPC's status comes in trailers; HTTP/1.1 clients get none (Pingora writes them only over HTTP/2).
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        session.write_response_trailers(trailers).await.map_err(|_| Failure::ClientGone)?;
                    }
                }
            }
            // Counted from when the client took the frame: a slow reader is not an idle stream.
            quiet_until = Deadline::now() + self.stream_idle;
        }
        upstream.release(&self.pool).await;
        Ok(status)
    }

    /// Sends the request to its target (over HTTP/2 prior knowledge when `http2`), or to activators
    /// when the target cannot take it, until a response head arrives before `deadline` (`limit`
    /// after the start): the address that answered, its connection, the response, and the pump of
    /// a body that is still streaming.
    async fn send(
        &self,
        session: &mut ServerSession,
        ctx: &mut RequestCtx,
        outgoing: Outgoing,
        http2: bool,
        (deadline, limit): (Deadline, Duration),
    ) -> Result<(SocketAddr, Upstream, http::Response<Incoming>, Pump), Failure> {
        for attempt in 1..=ATTEMPTS {
            let Some(target) = &ctx.target else { break };
            let addr = target.addr();
            let mut upstream = match tokio::time::timeout_at(
                deadline,
                Upstream::get(&self.pool, addr, http2, CONNECT_TIMEOUT),
            )
            .await
            {
                Ok(Ok(upstream)) => upstream,
                // Nothing was sent: another activator may hold the request instead (a replica that
                // refuses is gone between endpoint updates; an activator that refuses is restarting).
                Ok(Err(_)) if attempt < ATTEMPTS && self.retry_elsewhere(ctx, addr) => continue,
                Ok(Err(error)) => return Err(Failure::upstream(error, addr)),
                Err(_) => return Err(timed_out(limit)),
            };
            let request = self.upstream_request(session.req_header(), ctx, http2)?;
            let (sent, pump) = match &outgoing {
                Outgoing::Whole(body) => {
                    let request = request.map(|()| Either::Left(Full::new(body.clone())));
                    let send = tokio::time::timeout_at(deadline, upstream.send(request));
                    // A client that leaves while its request is held (a cold start of minutes) takes
                    // it back: the upstream connection closes, and the activator lets the request go.
                    let sent = tokio::select! {
                        biased;
                        sent = send => sent,
                        gone = pump::client_gone(session) => return Err(gone),
                    };
                    (sent, Pump::done())
                }
                Outgoing::Stream(prefix) => {
                    let (sender, body) = Channel::new(1);
                    let request = request.map(|()| Either::Right(body));
                    let mut pump = Pump::new(sender, prefix.clone());
                    let send = tokio::time::timeout_at(deadline, upstream.send(request));
                    tokio::pin!(send);
                    // Until the answer's head arrives; the pump goes on while the answer streams.
                    let sent = loop {
                        tokio::select! {
                            biased;
                            sent = &mut send => break sent,
                            pumped = pump.step_or_watch(session) => pumped?,
                        }
                    };
                    (sent, pump)
                }
            };
            let buffered = matches!(outgoing, Outgoing::Whole(_));
            match sent {
                Ok(Ok(response)) => return Ok((addr, upstream, response, pump)),
                // A kept-alive connection the upstream closed just before this request (a replica draining
                // on scale-down) failed before anything was answered: safe to send a buffered body again,
                // as inference has no side effects; an activator picks a replica that is still there.
                Ok(Err(UpstreamError::Failed(_)))
                    if upstream.reused() && buffered && attempt < ATTEMPTS && self.retry_elsewhere(ctx, addr) => {}
                Ok(Err(error)) => return Err(Failure::upstream(error, addr)),
                Err(_) => return Err(timed_out(limit)),
            }
        }
        Err(Failure::NoActivator { revision: revision_name(ctx).to_owned() })
    }

    /// Moves the request to another activator after `failed` could not take it; false when none is ready.
    fn retry_elsewhere(&self, ctx: &mut RequestCtx, failed: SocketAddr) -> bool {
        ctx.target = self.another_activator(failed).map(Target::Activator);
        ctx.target.is_some()
    }

    /// The request as it goes upstream, without its body: the route's path, no hop-by-hop headers,
    /// and the revision header only towards an activator. Over HTTP/2 the URI is absolute (its
    /// `:scheme` and `:authority`, the client's authority kept) and `te: trailers` passes, as gRPC asks.
    fn upstream_request(
        &self,
        req: &RequestHeader,
        ctx: &RequestCtx,
        http2: bool,
    ) -> Result<http::Request<()>, Failure> {
        let bad_uri = |e: http::Error| Failure::BadRequest(format!("upstream URI: {e}"));
        let mut uri = match &ctx.path {
            Some(path) => path.parse().map_err(|e: http::uri::InvalidUri| bad_uri(e.into()))?,
            None => req.uri.clone(),
        };
        if http2 {
            let authority = Some(host_of(req)).filter(|host| !host.is_empty()).unwrap_or("localhost");
            let path = uri.path_and_query().map_or("/", |p| p.as_str());
            uri = http::Uri::builder()
                .scheme("http")
                .authority(authority)
                .path_and_query(path)
                .build()
                .map_err(bad_uri)?;
        }
        let mut request = http::Request::builder().method(req.method.clone()).uri(uri).body(()).expect("valid parts");
        let headers = request.headers_mut();
        headers.reserve(req.headers.len() + 1);
        for (name, value) in &req.headers {
            let passes = if http2 {
                // `:authority` carries the host; `te` may only say `trailers` over HTTP/2.
                name != header::HOST
                    && (!HOP_BY_HOP.contains(&name.as_str()) || (name == header::TE && value == "trailers"))
            } else {
                !HOP_BY_HOP.contains(&name.as_str())
            };
            if passes && name != REVISION_HEADER {
                headers.append(name.clone(), value.clone());
            }
        }
        if let (Some(Target::Activator(_)), Some(key)) = (&ctx.target, &ctx.revision) {
            let value = HeaderValue::try_from(key.to_string()).map_err(|e| Failure::BadRequest(e.to_string()))?;
            headers.insert(REVISION_HEADER, value);
        }
        Ok(request)
    }

    fn log(&self, req: &RequestHeader, ctx: &mut RequestCtx, status: u16, error: Option<&Failure>, elapsed: Duration) {
        // Taking the target drops the replica slot: the request no longer counts as in flight.
        let target = ctx.target.take();
        if let Some(in_flight) = ctx.in_flight.take() {
            in_flight.dec();
        }
        let cold_start = ctx.cold_start.take();
        let revision = revision_name(ctx);
        self.metrics.answered(&ctx.service, revision, status, elapsed);
        if let Some(cold_start) = cold_start {
            self.metrics.cold_start_ended(&ctx.service, revision, cold_start, error.is_none());
        }
        if let Some(target) = &target {
            self.metrics.sent(&ctx.service, revision, target.via());
        }
        if let Some(error) = error.filter(|e| {
            !matches!(
                e,
                Failure::UnknownService { .. }
                    | Failure::UnknownModel { .. }
                    | Failure::NoModelName { .. }
                    | Failure::NoJsonModel { .. }
                    | Failure::NotRoutable { .. }
                    | Failure::ClientGone
            )
        }) {
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
            upstream = %target.as_ref().map_or_else(|| "-".to_owned(), |t| t.addr().to_string()),
            via = target.as_ref().map_or("-", |t| t.via().as_str()),
            status,
            duration_ms = elapsed.as_secs_f64() * 1000.0,
            error = error.map(tracing::field::display),
            "request"
        );
    }
}

/// Whether an answer's header `name` reaches the client: not one about the hop, and none of the
/// data plane's own (`x-skiff-*`) unless the activator wrote it (it drops its replicas' own and
/// adds the cold start's); the router writes the revision itself.
fn passes_back(name: &http::HeaderName, via_activator: bool) -> bool {
    if is_own_header(name.as_str()) {
        return via_activator && name == COLD_START_HEADER;
    }
    name != header::CONNECTION && name != "keep-alive"
}

fn timed_out(limit: Duration) -> Failure {
    Failure::Timeout(format!("no answer within {limit:?}"))
}

/// The name of the revision the request went to ("" before one is chosen).
fn revision_name(ctx: &RequestCtx) -> &str {
    ctx.revision.as_ref().map_or("", |key| key.name.as_str())
}

/// The request's host: the Host header, else the authority of an absolute URI.
pub(crate) fn host_of(req: &RequestHeader) -> &str {
    req.headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri.authority().map(|a| a.as_str()))
        .unwrap_or("")
}

fn content_length(req: &RequestHeader) -> Option<usize> {
    req.headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

fn is_chunked(req: &RequestHeader) -> bool {
    req.headers.get(header::TRANSFER_ENCODING).is_some()
}

fn expects_continue(req: &RequestHeader) -> bool {
    req.headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
}

/// Tells a client that waits for it (`Expect: 100-continue`) to send its body: the router reads
/// bodies itself, so it answers for the upstream, as nginx does.
async fn continue_100(session: &mut ServerSession) -> Result<(), Failure> {
    let header = ResponseHeader::build(100, Some(0)).map_err(|e| Failure::BadRequest(e.to_string()))?;
    session.write_response_header(Box::new(header)).await.map_err(|_| Failure::ClientGone)
}

/// Reads a body of `length` bytes whole (one chunk needs no copy).
async fn read_whole_body(session: &mut ServerSession, length: usize) -> Result<Bytes, Failure> {
    if length == 0 {
        return Ok(Bytes::new());
    }
    let Some(first) = session.read_request_body().await.map_err(body_error)? else { return Ok(Bytes::new()) };
    if first.len() >= length {
        return Ok(first);
    }
    read_rest(session, first, length).await
}

/// Reads the rest of a body of `length` bytes whose first bytes, `read`, are already read.
async fn read_rest(session: &mut ServerSession, read: Bytes, length: usize) -> Result<Bytes, Failure> {
    let mut body = BytesMut::with_capacity(length.max(read.len()));
    body.extend_from_slice(&read);
    while let Some(chunk) = session.read_request_body().await.map_err(body_error)? {
        body.extend_from_slice(&chunk);
    }
    Ok(body.freeze())
}

fn body_error(e: Box<pingora::Error>) -> Failure {
    Failure::BadRequest(format!("reading the body: {e}"))
}
