//! `skiff load`'s HTTP/1.1 client: keep-alive connections over hyper's `client::conn`, one per
//! closed-loop worker or borrowed from a pool by open-loop requests, the kind of each failure, and
//! whether an answer met a cold start (Skiff's `x-skiff-cold-start` header).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::openai::{Chat, Stream, Tracker, sse};

/// What every request sends.
#[derive(Debug, Clone)]
pub struct Target {
    /// `host:port` to connect to.
    pub authority: String,
    /// The URL, for messages.
    pub url: String,
    /// Path and query.
    pub path: String,
    /// Method.
    pub method: Method,
    /// Headers, `Host` included.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
    /// Longest a request may take, connecting included.
    pub timeout: Duration,
    /// `--openai`: the chat completions sent in turn (instead of `body`), their answers timed
    /// as streams.
    pub chat: Option<Arc<Chat>>,
}

impl Target {
    /// A target for `url` (plain `http://` only).
    pub fn new(
        url: &str,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        timeout: Duration,
    ) -> Result<Target, String> {
        let uri: Uri = url.parse().map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => return Err(format!("{url}: only http:// is supported, not {other}://")),
            None => return Err(format!("{url}: give the scheme, http://")),
        }
        let host = uri.host().ok_or_else(|| format!("{url}: no host"))?;
        let authority = format!("{host}:{}", uri.port_u16().unwrap_or(80));
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let mut headers = headers;
        if !headers.contains_key(http::header::HOST) {
            let host = uri.authority().map_or(host, |a| a.as_str());
            headers.insert(http::header::HOST, host.parse().map_err(|e| format!("{url}: host: {e}"))?);
        }
        Ok(Target { authority, url: url.to_owned(), path, method, headers, body, timeout, chat: None })
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let body = self.chat.as_ref().map_or_else(|| self.body.clone(), |chat| chat.next_body());
        let mut request = Request::new(Full::new(body));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.path.parse().unwrap_or_else(|_| Uri::from_static("/"));
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// A request's outcome: its answer, or what went wrong.
pub type Outcome = Result<Answer, Failure>;

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// Its status.
    pub status: http::StatusCode,
    /// When the request met a cold start: how long Skiff's activator held it for a ready replica
    /// (its `x-skiff-cold-start` header).
    pub held: Option<Duration>,
    /// `--openai`: the answer's events, timed.
    pub stream: Option<Stream>,
}

impl Answer {
    /// An answer with `status` from `headers`.
    pub fn new(status: http::StatusCode, headers: &HeaderMap) -> Answer {
        let held = headers
            .get(skiff_api::serving::COLD_START_HEADER)
            .and_then(|v| v.to_str().ok()?.parse().ok())
            .map(Duration::from_millis);
        Answer { status, held, stream: None }
    }
}

/// Why a request got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// No answer within the timeout.
    Timeout,
    /// The connection could not be made (`ECONNREFUSED`, …).
    Connect(String),
    /// The connection broke while sending or receiving.
    Transport(String),
}

impl Failure {
    /// Its kind in the error table.
    pub fn kind(&self) -> String {
        match self {
            Failure::Timeout => "timeout".into(),
            Failure::Connect(e) => format!("connect: {e}"),
            Failure::Transport(e) => format!("transport: {e}"),
        }
    }
}

/// The kind of an outcome that is an error, `None` for a 2xx or 3xx answer.
pub fn error_kind(outcome: &Outcome) -> Option<String> {
    match outcome {
        Ok(answer) if answer.status.is_success() || answer.status.is_redirection() => None,
        Ok(answer) => Some(format!("HTTP {}", answer.status.as_u16())),
        Err(failure) => Some(failure.kind()),
    }
}

/// A keep-alive connection, or none yet.
pub type Connection = Option<SendRequest<Full<Bytes>>>;

async fn connect(authority: &str) -> Result<SendRequest<Full<Bytes>>, Failure> {
    let stream = TcpStream::connect(authority).await.map_err(|e| Failure::Connect(io_kind(&e)))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) =
        http1::handshake(TokioIo::new(stream)).await.map_err(|e| Failure::Transport(e.to_string()))?;
    tokio::spawn(connection);
    Ok(sender)
}

fn io_kind(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::ConnectionReset => "connection reset".into(),
        _ => error.to_string(),
    }
}

/// Sends one request on `connection` (opening one if there is none or it broke) and reads the
/// whole answer, within the target's timeout; the connection is kept only while it can be reused.
pub async fn exchange(target: &Target, connection: &mut Connection) -> Outcome {
    round_trip(target, connection).await.map(|(answer, _)| answer)
}

/// One request on a new connection; the status and the body.
pub async fn fetch(target: &Target) -> Result<(http::StatusCode, Bytes), Failure> {
    round_trip(target, &mut None).await.map(|(answer, body)| (answer.status, body))
}

async fn round_trip(target: &Target, connection: &mut Connection) -> Result<(Answer, Bytes), Failure> {
    match tokio::time::timeout(target.timeout, send(target, connection)).await {
        Ok(answer) => answer,
        Err(_) => {
            *connection = None;
            Err(Failure::Timeout)
        }
    }
}

async fn send(target: &Target, connection: &mut Connection) -> Result<(Answer, Bytes), Failure> {
    let reusable = match connection.take() {
        Some(mut sender) => sender.ready().await.is_ok().then_some(sender),
        None => None,
    };
    let mut sender = match reusable {
        Some(sender) => sender,
        None => connect(&target.authority).await?,
    };
    let sent = Instant::now();
    let response = sender.send_request(target.request()).await.map_err(|e| Failure::Transport(e.to_string()))?;
    let mut answer = Answer::new(response.status(), response.headers());
    let body = if target.chat.is_some() && answer.status.is_success() {
        let stream = timed(sent, response.into_body()).await?;
        answer.stream = Some(stream);
        Bytes::new()
    } else {
        response.into_body().collect().await.map_err(|e| Failure::Transport(e.to_string()))?.to_bytes()
    };
    if !sender.is_closed() {
        *connection = Some(sender);
    }
    Ok((answer, body))
}

/// Reads a streamed answer piece by piece, timing its server-sent events as they arrive.
async fn timed(sent: Instant, mut body: hyper::body::Incoming) -> Result<Stream, Failure> {
    let (mut parser, mut tracker) = (sse::Parser::new(), Tracker::new(sent));
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failure::Transport(e.to_string()))?;
        let at = Instant::now();
        if let Some(data) = frame.data_ref() {
            for event in parser.push(data) {
                tracker.event(at, &event);
            }
        }
    }
    Ok(tracker.finish(Instant::now()))
}

/// Idle keep-alive connections that open-loop requests borrow, at most `keep` of them.
pub struct Pool {
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
    keep: usize,
}

impl Pool {
    /// An empty pool that keeps at most `keep` idle connections.
    pub fn new(keep: usize) -> Pool {
        Pool { idle: Mutex::new(Vec::new()), keep }
    }

    /// Sends one request on an idle connection, or a new one.
    pub async fn exchange(&self, target: &Target) -> Outcome {
        let mut connection = self.idle.lock().expect("pool lock").pop();
        let outcome = exchange(target, &mut connection).await;
        if let Some(sender) = connection {
            let mut idle = self.idle.lock().expect("pool lock");
            if idle.len() < self.keep {
                idle.push(sender);
            }
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> Result<Target, String> {
        Target::new(url, Method::GET, HeaderMap::new(), Bytes::new(), Duration::from_secs(1))
    }

    #[test]
    fn a_target_connects_to_the_authority_and_sends_its_host() {
        let t = target("http://127.0.0.1:8080/v2/models/iris/infer?x=1").unwrap();
        assert_eq!((t.authority.as_str(), t.path.as_str()), ("127.0.0.1:8080", "/v2/models/iris/infer?x=1"));
        assert_eq!(t.headers[http::header::HOST], "127.0.0.1:8080");
        assert_eq!(target("http://example.com").unwrap().authority, "example.com:80");
        assert!(target("https://example.com").unwrap_err().contains("only http://"));
        assert!(target("example.com/x").is_err());
    }

    #[test]
    fn an_answer_held_at_zero_says_for_how_long() {
        let mut headers = HeaderMap::new();
        assert_eq!(Answer::new(http::StatusCode::OK, &headers).held, None);
        headers.insert("x-skiff-cold-start", "52".parse().unwrap());
        assert_eq!(Answer::new(http::StatusCode::OK, &headers).held, Some(Duration::from_millis(52)));
        headers.insert("x-skiff-cold-start", "soon".parse().unwrap());
        assert_eq!(Answer::new(http::StatusCode::OK, &headers).held, None, "a value that is not milliseconds");
    }

    #[test]
    fn non_success_answers_and_failures_are_error_kinds() {
        let answer = |status| Ok(Answer { status, held: None, stream: None });
        assert_eq!(error_kind(&answer(http::StatusCode::OK)), None);
        assert_eq!(error_kind(&answer(http::StatusCode::SERVICE_UNAVAILABLE)).as_deref(), Some("HTTP 503"));
        assert_eq!(error_kind(&Err(Failure::Timeout)).as_deref(), Some("timeout"));
        let refused = Failure::Connect("connection refused".into());
        assert_eq!(error_kind(&Err(refused)).as_deref(), Some("connect: connection refused"));
    }
}
