//! One file over HTTP(S): its size and version from a `HEAD` (`Content-Length`, `ETag` or
//! `Last-Modified`), ranged reads where the server says `Accept-Ranges: bytes`.

use std::ops::Range;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use reqwest::header::{ACCEPT_RANGES, CONTENT_LENGTH, ETAG, HeaderMap, LAST_MODIFIED, RANGE};

use super::{Object, Remote, base_name, http_client, status_error, transfer_error};
use crate::error::Result;
use crate::guard::Reach;
use crate::uri::redact;

/// A file at a URL.
pub struct HttpRemote {
    shown: String,
    url: String,
    client: reqwest::Client,
}

impl HttpRemote {
    /// The file at `url`.
    pub fn new(url: &str, reach: Reach) -> Result<HttpRemote> {
        Ok(HttpRemote { shown: redact(url), url: url.to_owned(), client: http_client(reach)? })
    }
}

/// What a response's headers say of the file: its size, version and whether ranges are served.
pub(crate) fn describe(headers: &HeaderMap) -> (Option<u64>, Option<String>, bool) {
    let text = |name| headers.get(name).and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok());
    let size = text(CONTENT_LENGTH).and_then(|v| v.parse().ok());
    let version = text(ETAG).or_else(|| text(LAST_MODIFIED)).map(str::to_owned);
    let ranged = text(ACCEPT_RANGES).is_some_and(|v| v.eq_ignore_ascii_case("bytes"));
    (size, version, ranged)
}

/// The bytes of a response, checked: a status other than 200/206 is an error.
pub(crate) async fn body(
    shown: &str,
    request: reqwest::RequestBuilder,
    range: Option<Range<u64>>,
) -> Result<BoxStream<'static, Result<Bytes>>> {
    let request = match &range {
        Some(range) => request.header(RANGE, format!("bytes={}-{}", range.start, range.end - 1)),
        None => request,
    };
    let response = request.send().await.map_err(|e| transfer_error(shown, &e))?;
    let status = response.status();
    let expected = if range.is_some() { reqwest::StatusCode::PARTIAL_CONTENT } else { reqwest::StatusCode::OK };
    if status != expected {
        return Err(status_error(shown, status, "download"));
    }
    let shown = shown.to_owned();
    Ok(response.bytes_stream().map_err(move |e| transfer_error(&shown, &e)).boxed())
}

#[async_trait]
impl Remote for HttpRemote {
    fn uri(&self) -> &str {
        &self.shown
    }

    async fn list(&self) -> Result<Vec<Object>> {
        let response = self.client.head(&self.url).send().await.map_err(|e| transfer_error(&self.shown, &e))?;
        if !response.status().is_success() {
            return Err(status_error(&self.shown, response.status(), "HEAD"));
        }
        let (size, version, ranged) = describe(response.headers());
        let path = url::Url::parse(&self.url)
            .ok()
            .and_then(|url| url.path_segments().and_then(|mut s| s.next_back()).map(str::to_owned))
            .unwrap_or_default();
        Ok(vec![Object {
            source: self.url.clone(),
            path: base_name(&path).to_owned(),
            size,
            version,
            ranged: ranged && size.is_some(),
        }])
    }

    async fn read(&self, object: &Object, range: Option<Range<u64>>) -> Result<BoxStream<'static, Result<Bytes>>> {
        body(&self.shown, self.client.get(&object.source), range).await
    }
}
