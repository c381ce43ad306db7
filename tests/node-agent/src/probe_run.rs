//! Probes (I/O part): perform `httpGet`, `tcpSocket` and `exec` checks against a running
//! container and report verdict changes to its supervisor.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::probe::{ProbeCheck, ProbeRole, ProbeSpec, ProbeTracker, http_request, http_success, parse_status_line};
use crate::process::{Launch, Programs};

/// Where probes go: the pod IP, and the sandbox for exec probes.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    /// The pod's IP (default host of network probes).
    pub pod_ip: String,
    /// The container's sandbox (exec probes run in it).
    pub launch: Launch,
    /// Programs used to enter the sandbox.
    pub programs: Arc<Programs>,
}

/// A verdict change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeEvent {
    /// Which probe.
    pub role: ProbeRole,
    /// The new verdict.
    pub success: bool,
    /// Output or error of the last check.
    pub message: String,
}

/// Performs one check; returns success and a message.
pub async fn check(spec: &ProbeSpec, target: &ProbeTarget) -> (bool, String) {
    let timeout = spec.timing.timeout;
    match &spec.check {
        ProbeCheck::HttpGet { https: true, .. } => {
            (false, "HTTPS probes are not supported by the skiff node agent".into())
        }
        ProbeCheck::HttpGet { host, port, path, headers, .. } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.clone());
            match tokio::time::timeout(timeout, http_get(&host, *port, path, headers)).await {
                Ok(r) => r,
                Err(_) => (false, format!("Get \"http://{host}:{port}{path}\": context deadline exceeded")),
            }
        }
        ProbeCheck::Tcp { host, port } => {
            let host = host.clone().unwrap_or_else(|| target.pod_ip.clone());
            match tokio::time::timeout(timeout, TcpStream::connect((host.as_str(), *port))).await {
                Ok(Ok(_)) => (true, String::new()),
                Ok(Err(e)) => (false, format!("dial tcp {host}:{port}: {e}")),
                Err(_) => (false, format!("dial tcp {host}:{port}: i/o timeout")),
            }
        }
        ProbeCheck::Exec { command } => {
            if command.is_empty() {
                return (false, "exec probe has no command".into());
            }
            target.launch.run_probe(&target.programs, command, timeout).await
        }
    }
}

async fn http_get(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> (bool, String) {
    let url = format!("http://{host}:{port}{path}");
    let mut stream = match TcpStream::connect((host, port)).await {
        Ok(s) => s,
        Err(e) => return (false, format!("Get \"{url}\": dial tcp {host}:{port}: {e}")),
    };
    if let Err(e) = stream.write_all(http_request(host, port, path, headers).as_bytes()).await {
        return (false, format!("Get \"{url}\": {e}"));
    }
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    loop {
        if let Some(code) = parse_status_line(&buf) {
            let ok = http_success(code);
            return (ok, if ok { String::new() } else { format!("HTTP probe failed with statuscode: {code}") });
        }
        if buf.len() > 8192 {
            return (false, format!("Get \"{url}\": malformed HTTP response"));
        }
        match stream.read(&mut chunk).await {
            Ok(0) => return (false, format!("Get \"{url}\": EOF")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return (false, format!("Get \"{url}\": {e}")),
        }
    }
}

/// Runs a probe until cancelled: waits `initialDelaySeconds`, checks every `periodSeconds`, and
/// sends an event whenever the verdict changes. A startup probe stops after its first success; a
/// liveness or startup probe stops after reporting failure (the container is restarted).
pub async fn run(spec: ProbeSpec, target: ProbeTarget, events: mpsc::Sender<ProbeEvent>, cancel: CancellationToken) {
    let mut tracker = ProbeTracker::new(spec.role, &spec.timing);
    tokio::select! {
        _ = cancel.cancelled() => return,
        _ = tokio::time::sleep(spec.timing.initial_delay) => {}
    }
    loop {
        let (ok, message) = tokio::select! {
            _ = cancel.cancelled() => return,
            r = check(&spec, &target) => r,
        };
        if let Some(verdict) = tracker.observe(ok) {
            if events.send(ProbeEvent { role: spec.role, success: verdict, message }).await.is_err() {
                return;
            }
            let finished = match spec.role {
                ProbeRole::Startup => true,
                ProbeRole::Liveness => !verdict,
                ProbeRole::Readiness => false,
            };
            if finished {
                return;
            }
        }
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(spec.timing.period) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::ProbeTiming;
    use std::time::Duration;
    use tokio::net::TcpListener;

    fn target() -> ProbeTarget {
        ProbeTarget {
            pod_ip: "127.0.0.1".into(),
            launch: Launch {
                netns: None,
                binds: vec![],
                hostname: None,
                workdir: "/".into(),
                argv: vec![],
                env: vec![],
            },
            programs: Arc::new(Programs { ip: "/bin/false".into(), agent: "/bin/false".into() }),
        }
    }

    fn spec(role: ProbeRole, check: ProbeCheck, failure_threshold: u32) -> ProbeSpec {
        ProbeSpec {
            role,
            check,
            timing: ProbeTiming {
                initial_delay: Duration::ZERO,
                period: Duration::from_millis(20),
                timeout: Duration::from_secs(1),
                success_threshold: 1,
                failure_threshold,
            },
            termination_grace: None,
        }
    }

    /// Serves `status` to every connection.
    async fn server(status: u16) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let _ = s.write_all(format!("HTTP/1.1 {status} X\r\nContent-Length: 0\r\n\r\n").as_bytes()).await;
            }
        });
        port
    }

    fn http(port: u16) -> ProbeCheck {
        ProbeCheck::HttpGet { host: None, port, path: "/ready".into(), headers: vec![], https: false }
    }

    #[tokio::test]
    async fn http_and_tcp_checks() {
        let ok = server(200).await;
        let bad = server(503).await;
        assert!(check(&spec(ProbeRole::Readiness, http(ok), 1), &target()).await.0);
        let (success, msg) = check(&spec(ProbeRole::Readiness, http(bad), 1), &target()).await;
        assert!(!success && msg.contains("503"), "{msg}");
        assert!(check(&spec(ProbeRole::Readiness, ProbeCheck::Tcp { host: None, port: ok }, 1), &target()).await.0);
        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let (success, msg) = check(&spec(ProbeRole::Liveness, http(closed), 1), &target()).await;
        assert!(!success && msg.contains("dial tcp"), "{msg}");
    }

    #[tokio::test]
    async fn loop_reports_changes() {
        let ok = server(200).await;
        let (tx, mut rx) = mpsc::channel(4);
        let cancel = CancellationToken::new();
        tokio::spawn(run(spec(ProbeRole::Readiness, http(ok), 3), target(), tx, cancel.clone()));
        let ev = rx.recv().await.unwrap();
        assert_eq!((ev.role, ev.success), (ProbeRole::Readiness, true));
        cancel.cancel();

        let closed = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
        let (tx, mut rx) = mpsc::channel(4);
        tokio::spawn(run(spec(ProbeRole::Liveness, http(closed), 2), target(), tx, CancellationToken::new()));
        let ev = rx.recv().await.unwrap();
        assert_eq!((ev.role, ev.success), (ProbeRole::Liveness, false));
        assert!(rx.recv().await.is_none(), "a failed liveness probe stops");
    }
}
