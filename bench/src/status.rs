//! Reading a running `skiff up`'s admin `/status` document.

use std::net::SocketAddr;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `GET /status` from the admin endpoint.
pub async fn fetch(admin: SocketAddr) -> anyhow::Result<Value> {
    let mut stream = tokio::net::TcpStream::connect(admin).await?;
    let request = format!("GET /status HTTP/1.1\r\nHost: {admin}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n").ok_or_else(|| anyhow::anyhow!("no HTTP body"))?;
    Ok(serde_json::from_slice(&raw[at + 4..])?)
}

/// The first listed revision of `service`.
pub fn revision<'a>(status: &'a Value, service: &str) -> Option<&'a Value> {
    status["services"].as_array()?.iter().find(|s| s["name"] == service)?["revisions"].as_array()?.first()
}

/// `(desired, ready)` replicas of the first revision of `service`.
pub fn replicas(status: &Value, service: &str) -> (u64, u64) {
    revision(status, service).map_or((0, 0), |r| (r["desired"].as_u64().unwrap_or(0), r["ready"].as_u64().unwrap_or(0)))
}
