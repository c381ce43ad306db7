//! In-cluster API access for pods: the `kubernetes` Service IP (10.96.0.1) is put on the bridge
//! and the agent forwards TCP connections on it to the API server. There is no kube-proxy; this
//! one forward is what in-cluster clients need (the serving certificate has 10.96.0.1 as a SAN).

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

use crate::error::{Error, Result};

/// Listens on `listen` and forwards every connection to `upstream` (`host:port`) until cancelled.
pub async fn start(listen: SocketAddr, upstream: String, cancel: CancellationToken) -> Result<()> {
    let listener = TcpListener::bind(listen).await.map_err(|e| Error::io(format!("listening on {listen}"), e))?;
    info!(%listen, %upstream, "forwarding the kubernetes Service address to the API server");
    tokio::spawn(async move {
        loop {
            let (mut inbound, peer) = tokio::select! {
                _ = cancel.cancelled() => return,
                r = listener.accept() => match r {
                    Ok(c) => c,
                    Err(e) => {
                        debug!(error = %e, "accept failed");
                        continue;
                    }
                },
            };
            let upstream = upstream.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(&upstream).await else {
                    debug!(%peer, %upstream, "API server unreachable");
                    return;
                };
                tokio::select! {
                    _ = cancel.cancelled() => {}
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                }
            });
        }
    });
    Ok(())
}

/// The Service environment variables the kubelet gives every container for `kubernetes`.
pub fn service_env(ip: std::net::Ipv4Addr, port: u16) -> Vec<(String, String)> {
    let url = format!("tcp://{ip}:{port}");
    [
        ("KUBERNETES_SERVICE_HOST", ip.to_string()),
        ("KUBERNETES_SERVICE_PORT", port.to_string()),
        ("KUBERNETES_SERVICE_PORT_HTTPS", port.to_string()),
        ("KUBERNETES_PORT", url.clone()),
        (&format!("KUBERNETES_PORT_{port}_TCP"), url),
        (&format!("KUBERNETES_PORT_{port}_TCP_PROTO"), "tcp".into()),
        (&format!("KUBERNETES_PORT_{port}_TCP_PORT"), port.to_string()),
        (&format!("KUBERNETES_PORT_{port}_TCP_ADDR"), ip.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn env_names() {
        let env = service_env(std::net::Ipv4Addr::new(10, 96, 0, 1), 443);
        assert!(env.contains(&("KUBERNETES_SERVICE_HOST".into(), "10.96.0.1".into())));
        assert!(env.contains(&("KUBERNETES_PORT_443_TCP_ADDR".into(), "10.96.0.1".into())));
    }

    #[tokio::test]
    async fn forwards_bytes() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let echo_addr = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = echo.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let free = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap();
        let cancel = CancellationToken::new();
        start(free, echo_addr.to_string(), cancel.clone()).await.unwrap();
        let mut c = TcpStream::connect(free).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        cancel.cancel();
    }
}
