//! A real HTTP file server on 127.0.0.1 for the fetcher's tests: files of a folder with
//! `Content-Length`, `ETag` (a digest of the content), `Accept-Ranges` and 206 answers to ranges,
//! counting the bytes and requests it serves, and faults on demand (a connection cut after some
//! bytes, a bearer token required).

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;

pub mod archives;
pub mod stores;

type Body = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

/// Faults the server injects.
#[derive(Debug, Default)]
pub struct Faults {
    /// Cut the body after this many bytes, for the next `cuts` responses.
    pub cut_after: AtomicU64,
    /// Responses left to cut.
    pub cuts: AtomicUsize,
    /// A bearer token every request must carry.
    pub token: Mutex<Option<String>>,
    /// Serve `path?query` from the file named so, with one `Last-Modified` for all and no `ETag`:
    /// a store whose versions differ only in the query.
    pub by_query: AtomicBool,
}

/// A running server.
pub struct FileServer {
    /// Its address.
    pub addr: SocketAddr,
    /// The folder it serves.
    pub root: PathBuf,
    /// Faults to inject.
    pub faults: Arc<Faults>,
    /// Body bytes sent.
    pub sent: Arc<AtomicU64>,
    /// GET requests per path.
    pub gets: Arc<Mutex<HashMap<String, usize>>>,
}

impl FileServer {
    /// Serves `root` on an ephemeral port.
    pub async fn start(root: PathBuf) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = FileServer { addr, root, faults: Arc::default(), sent: Arc::default(), gets: Arc::default() };
        let shared = (server.root.clone(), server.faults.clone(), server.sent.clone(), server.gets.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { return };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(answer(request, &shared.0, &shared.1, &shared.2, &shared.3)) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                });
            }
        });
        server
    }

    /// The URL of a file under the root.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.addr)
    }

    /// GET requests of `path` so far.
    pub fn gets_of(&self, path: &str) -> usize {
        self.gets.lock().unwrap().get(&format!("/{path}")).copied().unwrap_or(0)
    }
}

fn full(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())).map_err(|e| match e {}).boxed());
    *response.status_mut() = status;
    response
}

fn answer(
    request: Request<Incoming>,
    root: &Path,
    faults: &Faults,
    sent: &Arc<AtomicU64>,
    gets: &Mutex<HashMap<String, usize>>,
) -> Response<Body> {
    if let Some(token) = faults.token.lock().unwrap().as_deref() {
        let given = request.headers().get("authorization").and_then(|v| v.to_str().ok());
        if given != Some(&format!("Bearer {token}")) {
            return full(StatusCode::UNAUTHORIZED, "a token is required");
        }
    }
    let by_query = faults.by_query.load(Ordering::SeqCst);
    let path = match request.uri().query() {
        Some(query) if by_query => format!("{}?{query}", request.uri().path()),
        _ => request.uri().path().to_owned(),
    };
    let Ok(content) = std::fs::read(root.join(path.trim_start_matches('/'))) else {
        return full(StatusCode::NOT_FOUND, "no such file");
    };
    let etag = format!(
        "\"{:x}-{}\"",
        content.iter().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(*b))),
        content.len()
    );
    let range = request
        .headers()
        .get("range")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("bytes="))
        .and_then(|v| v.split_once('-'))
        .and_then(|(a, b)| Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?)));
    let (status, body) = match range {
        Some((start, end)) if start <= end && end < content.len() => {
            (StatusCode::PARTIAL_CONTENT, content[start..=end].to_vec())
        }
        Some(_) => return full(StatusCode::RANGE_NOT_SATISFIABLE, "bad range"),
        None => (StatusCode::OK, content.clone()),
    };
    let builder = Response::builder().status(status);
    let builder = if by_query {
        builder.header("last-modified", "Sat, 28 Nov 2026 10:00:00 GMT")
    } else {
        builder.header("etag", etag)
    };
    let builder = builder.header("accept-ranges", "bytes").header("content-length", body.len());
    if request.method() == hyper::Method::HEAD {
        return builder.body(Full::new(Bytes::new()).map_err(|e| match e {}).boxed()).unwrap();
    }
    *gets.lock().unwrap().entry(path).or_default() += 1;
    let cut = faults.cuts.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
    let keep = if cut { (faults.cut_after.load(Ordering::SeqCst) as usize).min(body.len()) } else { body.len() };
    sent.fetch_add(keep as u64, Ordering::SeqCst);
    let mut frames: Vec<Result<Frame<Bytes>, std::io::Error>> =
        body[..keep].chunks(64 << 10).map(|c| Ok(Frame::data(Bytes::copy_from_slice(c)))).collect();
    if cut {
        frames.push(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "cut")));
    }
    builder.body(BodyExt::boxed(StreamBody::new(futures::stream::iter(frames)))).unwrap()
}
