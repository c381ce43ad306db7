//! Forwarding, the one place both modes send a request to a replica: the outgoing request is
//! built from the incoming one (hop-by-hop headers and `x-skiff-revision` dropped, body buffered so
//! it can be sent again), sent over a pooled HTTP/1.1 client, and failures are split into "never
//! sent" (safe to retry on another replica) and "sent" (never retried).

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
}

impl Outgoing {
    /// The request to pass on for `parts` and its buffered `body`.
    pub fn new(parts: &http::request::Parts, body: Bytes) -> Outgoing {
        let mut headers = parts.headers.clone();
        strip_hop_by_hop(&mut headers);
        headers.remove(REVISION_HEADER);
        if !headers.contains_key(header::HOST)
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
        Outgoing { method: parts.method.clone(), path_and_query, headers, body }
    }

    /// The HTTP/1.1 request for the replica at `addr`.
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
        *request.version_mut() = Version::HTTP_11;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// A pooled HTTP/1.1 client to replicas.
#[derive(Clone)]
pub struct Forwarder {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Default for Forwarder {
    fn default() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let client = Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE_TIMEOUT).build(connector);
        Forwarder { client }
    }
}

impl Forwarder {
    /// Sends `request` to `addr` and returns the replica's answer with hop-by-hop headers removed.
    /// [`Error::Connect`] means the request was never sent; [`Error::Upstream`] means it may have
    /// been, and no response head came back.
    pub async fn send(&self, addr: SocketAddr, request: &Outgoing) -> Result<Response<Incoming>> {
        match self.client.request(request.to(addr)).await {
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
    fn http2_authority_becomes_the_host_header() {
        let mut incoming = parts(Request::get("http://iris.example.com/v2/health/ready").body(()).unwrap());
        incoming.version = Version::HTTP_2;
        let request = Outgoing::new(&incoming, Bytes::new()).to(SocketAddr::from(([127, 0, 0, 1], 9000)));
        assert_eq!(request.headers()["host"], "iris.example.com");
        assert_eq!(request.version(), Version::HTTP_11);
    }

    #[test]
    fn a_request_without_a_path_goes_to_the_root() {
        let mut incoming = parts(Request::get("/").body(()).unwrap());
        incoming.uri = Uri::from_static("*");
        let request = Outgoing::new(&incoming, Bytes::new()).to(SocketAddr::from(([127, 0, 0, 1], 1)));
        assert_eq!(request.uri().path(), "/");
    }
}
