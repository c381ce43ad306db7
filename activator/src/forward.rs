//! Forwarding, the one place both modes send a request to a replica: the outgoing request is
//! built from the incoming one (hop-by-hop headers and `x-skiff-revision` dropped, body buffered so
//! it can be sent again), sent over a pooled HTTP/1.1 client — or, when it came in over HTTP/2, an
//! HTTP/2 prior-knowledge one, so that gRPC keeps its `te: trailers` and its answer's trailers —
//! and failures are split into "never sent" (safe to retry on another replica) and "sent" (never
//! retried).

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{Method, Request, Response, Uri, Version};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::REVISION_HEADER;
use crate::error::{Error, Result, chain};

/// How long a connection attempt to a replica may take before another replica is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Idle pooled connections to replicas are closed after this long: well before the replica's own
/// idle cut (`skiff_http::ServeLimits::header_timeout`, 20 s), so a pooled connection is never one
/// the replica is closing.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1), never passed on.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in HOP_BY_HOP.iter().chain(&named) {
        headers.remove(name);
    }
}

/// A request ready to be sent to any replica, as many times as connecting fails.
#[derive(Debug, Clone)]
pub struct Outgoing {
    method: Method,
    path_and_query: PathAndQuery,
    headers: HeaderMap,
    body: Bytes,
    /// It came in over HTTP/2 and leaves over HTTP/2.
    http2: bool,
}

impl Outgoing {
    /// The request to pass on for `parts` and its buffered `body`.
    pub fn new(parts: &http::request::Parts, body: Bytes) -> Outgoing {
        let http2 = parts.version == Version::HTTP_2;
        let mut headers = parts.headers.clone();
        let trailers = headers.get(header::TE).is_some_and(|te| te == "trailers");
        strip_hop_by_hop(&mut headers);
        headers.remove(REVISION_HEADER);
        if http2 && trailers {
            // The one `te` HTTP/2 allows, and gRPC sends it.
            headers.insert(header::TE, HeaderValue::from_static("trailers"));
        }
        if !http2
            && !headers.contains_key(header::HOST)
            && let Some(authority) = parts.uri.authority()
            && let Ok(host) = HeaderValue::from_str(authority.as_str())
        {
            // HTTP/2 carries the host in `:authority`; an HTTP/1.1 replica expects `Host`.
            headers.insert(header::HOST, host);
        }
        let path_and_query = match parts.uri.path_and_query() {
            Some(pq) if pq.path().starts_with('/') => pq.clone(),
            _ => PathAndQuery::from_static("/"),
        };
        Outgoing { method: parts.method.clone(), path_and_query, headers, body, http2 }
    }

    /// The request for the replica at `addr`: HTTP/2 when it came in over HTTP/2, else HTTP/1.1.
    pub fn to(&self, addr: SocketAddr) -> Request<Full<Bytes>> {
        let uri = Uri::builder()
            .scheme("http")
            .authority(addr.to_string())
            .path_and_query(self.path_and_query.clone())
            .build()
            .expect("a socket address and a parsed path make a URI");
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = uri;
        *request.version_mut() = if self.http2 { Version::HTTP_2 } else { Version::HTTP_11 };
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Pooled clients to replicas: HTTP/1.1, and HTTP/2 prior knowledge (one multiplexed connection
/// per replica) for requests that came in over HTTP/2.
#[derive(Clone)]
pub struct Forwarder {
    http1: Client<HttpConnector, Full<Bytes>>,
    http2: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let mut builder = Client::builder(TokioExecutor::new());
        builder.pool_idle_timeout(POOL_IDLE_TIMEOUT);
        let http1 = builder.build(connector.clone());
        let http2 = builder.http2_only(true).build(connector);
        Forwarder { http1, http2 }
    }
}

impl Forwarder {
    /// Sends `request` to `addr` and returns the replica's answer with hop-by-hop headers removed.
    /// [`Error::Connect`] means the request was never sent; [`Error::Upstream`] means it may have
    /// been, and no response head came back.
    pub async fn send(&self, addr: SocketAddr, request: &Outgoing) -> Result<Response<Incoming>> {
        let client = if request.http2 { &self.http2 } else { &self.http1 };
        match client.request(request.to(addr)).await {
            Ok(mut response) => {
                strip_hop_by_hop(response.headers_mut());
                *response.version_mut() = Version::default();
                Ok(response)
            }
            Err(e) if never_sent(&e) => Err(Error::Connect { addr, reason: chain(&e) }),
            Err(e) => Err(Error::Upstream { addr, reason: chain(&e) }),
        }
    }

    /// `GET path` on `addr` with an empty body; the status, or why there is none.
    pub async fn probe(&self, addr: SocketAddr, path: &PathAndQuery) -> Result<http::StatusCode> {
        let parts = Request::get(path.as_str()).body(Empty::<Bytes>::new()).expect("a valid path").into_parts().0;
        let response = self.send(addr, &Outgoing::new(&parts, Bytes::new())).await?;
        let status = response.status();
        // Read the answer so the connection goes back to the pool.
        let _ = response.into_body().collect().await;
        Ok(status)
    }
}

/// True when the client gave up before writing the request: the connection could not be made, or
/// hyper handed the request back unsent (the client's `Canceled` kind, which it has no accessor for).
fn never_sent(e: &hyper_util::client::legacy::Error) -> bool {
    e.is_connect() || format!("{e:?}").starts_with("hyper_util::client::legacy::Error(Canceled")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(request: Request<()>) -> http::request::Parts {
        request.into_parts().0
    }

    #[test]
    fn hop_by_hop_and_revision_headers_stay_behind() {
        let incoming = parts(
            Request::post("http://router.local/v2/models/iris/infer?x=1")
                .header("connection", "keep-alive, x-private")
                .header("keep-alive", "timeout=5")
                .header("x-private", "secret")
                .header("transfer-encoding", "chunked")
                .header("te", "trailers")
                .header("upgrade", "h2c")
                .header(REVISION_HEADER, "iris-predictor-00001")
                .header("content-type", "application/json")
                .header("host", "iris.example.com")
                .body(())
                .unwrap(),
        );
        let outgoing = Outgoing::new(&incoming, Bytes::from_static(b"{}"));
        let request = outgoing.to(SocketAddr::from(([127, 0, 0, 1], 9000)));
        assert_eq!(request.uri(), "http://127.0.0.1:9000/v2/models/iris/infer?x=1");
        assert_eq!(request.method(), Method::POST);
        assert_eq!(request.version(), Version::HTTP_11);
        let mut names: Vec<&str> = request.headers().keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["content-type", "host"], "only end-to-end headers are passed on");
        assert_eq!(request.headers()["host"], "iris.example.com", "the client's host is kept");
    }

    #[test]
    fn an_absolute_uri_becomes_the_host_header_over_http1() {
        let incoming = parts(Request::get("http://iris.example.com/v2/health/ready").body(()).unwrap());
        let request = Outgoing::new(&incoming, Bytes::new()).to(SocketAddr::from(([127, 0, 0, 1], 9000)));
        assert_eq!(request.headers()["host"], "iris.example.com");
        assert_eq!(request.version(), Version::HTTP_11);
    }

    #[test]
    fn http2_stays_http2_and_keeps_te_trailers() {
        let mut incoming = parts(
            Request::post("http://iris.example.com/inference.GRPCInferenceService/ModelInfer")
                .header("te", "trailers")
                .header("content-type", "application/grpc")
                .body(())
                .unwrap(),
        );
        incoming.version = Version::HTTP_2;
        let request = Outgoing::new(&incoming, Bytes::new()).to(SocketAddr::from(([127, 0, 0, 1], 9000)));
        assert_eq!(request.version(), Version::HTTP_2);
        assert_eq!(request.headers()["te"], "trailers");
        assert!(!request.headers().contains_key("host"), "HTTP/2 names the host in :authority");
    }

    #[test]
    fn a_request_without_a_path_goes_to_the_root() {
        let mut incoming = parts(Request::get("/").body(()).unwrap());
        incoming.uri = Uri::from_static("*");
        let request = Outgoing::new(&incoming, Bytes::new()).to(SocketAddr::from(([127, 0, 0, 1], 1)));
        assert_eq!(request.uri().path(), "/");
    }
}
