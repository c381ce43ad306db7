//! Probes (pure part): what a Kubernetes probe asks for, how results accumulate into a
//! success/failure verdict (thresholds), and the tiny HTTP/1.1 exchange used by `httpGet`.
//! Running probes against a live process is in [`crate::probe_run`].

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe as K8sProbe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Which of a container's three probes this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeRole {
    /// readinessProbe: drives `ready`; starts as failed.
    Readiness,
    /// livenessProbe: failure restarts the container; starts as succeeded.
    Liveness,
    /// startupProbe: holds back the other probes until it succeeds; failure restarts the container.
    Startup,
}

/// The check a probe performs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeCheck {
    /// HTTP GET; success is a status in 200..400.
    HttpGet {
        /// Host to connect to; the pod IP when `None`.
        host: Option<String>,
        /// Port (named ports resolved).
        port: u16,
        /// Request path.
        path: String,
        /// Extra request headers.
        headers: Vec<(String, String)>,
        /// True for `scheme: HTTPS` (not supported: always fails with a message).
        https: bool,
    },
    /// TCP connect.
    Tcp {
        /// Host to connect to; the pod IP when `None`.
        host: Option<String>,
        /// Port (named ports resolved).
        port: u16,
    },
    /// Run a command in the container's namespaces; success is exit code 0.
    Exec {
        /// The command line.
        command: Vec<String>,
    },
}

/// Timing and thresholds of a probe (Kubernetes defaults applied).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeTiming {
    /// Delay after the container starts before the first check.
    pub initial_delay: Duration,
    /// Time between checks.
    pub period: Duration,
    /// Limit for one check.
    pub timeout: Duration,
    /// Consecutive successes needed to flip to success.
    pub success_threshold: u32,
    /// Consecutive failures needed to flip to failure.
    pub failure_threshold: u32,
}

/// A probe ready to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Which probe.
    pub role: ProbeRole,
    /// What to check.
    pub check: ProbeCheck,
    /// When and how often.
    pub timing: ProbeTiming,
    /// Per-probe `terminationGracePeriodSeconds` (liveness and startup only).
    pub termination_grace: Option<Duration>,
}

fn secs(v: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(v.map(|s| s.max(0) as u64).unwrap_or(default))
}

fn threshold(v: Option<i32>, default: u32) -> u32 {
    v.map(|t| t.max(1) as u32).unwrap_or(default)
}

/// Resolves a probe port (number or the name of one of the container's ports).
pub fn resolve_port(container: &Container, port: &IntOrString) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n).map_err(|_| format!("invalid port {n}")),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<u16>() {
                return Ok(n);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("named port {name:?} not found in container {:?}", container.name))
        }
    }
}

impl ProbeSpec {
    /// Translates a Kubernetes probe. Errors name what is unsupported (gRPC probes).
    pub fn from_k8s(role: ProbeRole, probe: &K8sProbe, container: &Container) -> Result<ProbeSpec, String> {
        let check = if let Some(h) = &probe.http_get {
            ProbeCheck::HttpGet {
                host: h.host.clone().filter(|s| !s.is_empty()),
                port: resolve_port(container, &h.port)?,
                path: h.path.clone().filter(|p| !p.is_empty()).unwrap_or_else(|| "/".into()),
                headers: h.http_headers.iter().flatten().map(|x| (x.name.clone(), x.value.clone())).collect(),
                https: h.scheme.as_deref().is_some_and(|s| s.eq_ignore_ascii_case("HTTPS")),
            }
        } else if let Some(t) = &probe.tcp_socket {
            ProbeCheck::Tcp { host: t.host.clone().filter(|s| !s.is_empty()), port: resolve_port(container, &t.port)? }
        } else if let Some(e) = &probe.exec {
            ProbeCheck::Exec { command: e.command.clone().unwrap_or_default() }
        } else if probe.grpc.is_some() {
            return Err("grpc probes are not supported by the skiff node agent".into());
        } else {
            return Err("probe has no handler".into());
        };
        let success_threshold = match role {
            // The API requires 1 for liveness and startup probes.
            ProbeRole::Readiness => threshold(probe.success_threshold, 1),
            ProbeRole::Liveness | ProbeRole::Startup => 1,
        };
        Ok(ProbeSpec {
            role,
            check,
            timing: ProbeTiming {
                initial_delay: secs(probe.initial_delay_seconds, 0),
                period: secs(probe.period_seconds, 10).max(Duration::from_secs(1)),
                timeout: secs(probe.timeout_seconds, 1).max(Duration::from_secs(1)),
                success_threshold,
                failure_threshold: threshold(probe.failure_threshold, 3),
            },
            termination_grace: probe.termination_grace_period_seconds.map(|s| Duration::from_secs(s.max(0) as u64)),
        })
    }
}

/// Accumulates check results into a verdict, as the kubelet's prober workers do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTracker {
    success_threshold: u32,
    failure_threshold: u32,
    successes: u32,
    failures: u32,
    verdict: Option<bool>,
}

impl ProbeTracker {
    /// A tracker with the role's initial verdict: readiness starts failed, liveness succeeded,
    /// startup unknown.
    pub fn new(role: ProbeRole, timing: &ProbeTiming) -> Self {
        let verdict = match role {
            ProbeRole::Readiness => Some(false),
            ProbeRole::Liveness => Some(true),
            ProbeRole::Startup => None,
        };
        ProbeTracker {
            success_threshold: timing.success_threshold.max(1),
            failure_threshold: timing.failure_threshold.max(1),
            successes: 0,
            failures: 0,
            verdict,
        }
    }

    /// The current verdict (`None`: not decided yet).
    pub fn verdict(&self) -> Option<bool> {
        self.verdict
    }

    /// Records one check; returns the new verdict when it changes.
    pub fn observe(&mut self, ok: bool) -> Option<bool> {
        if ok {
            self.successes = self.successes.saturating_add(1);
            self.failures = 0;
            if self.successes >= self.success_threshold && self.verdict != Some(true) {
                self.verdict = Some(true);
                return self.verdict;
            }
        } else {
            self.failures = self.failures.saturating_add(1);
            self.successes = 0;
            if self.failures >= self.failure_threshold && self.verdict != Some(false) {
                self.verdict = Some(false);
                return self.verdict;
            }
        }
        None
    }
}

/// What a container's supervisor does when a probe's verdict changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeAction {
    /// The startup probe passed: mark the container started (ready too when it has no readiness
    /// probe) and start the liveness and readiness probes.
    Started {
        /// Ready at once (there is no readiness probe).
        ready: bool,
    },
    /// Set the container's readiness.
    SetReady(bool),
    /// Kill the container (it is restarted according to the restart policy).
    Kill,
}

/// Maps a verdict change to the supervisor's action (`None`: nothing to do).
pub fn action(role: ProbeRole, success: bool, has_readiness_probe: bool) -> Option<ProbeAction> {
    match (role, success) {
        (ProbeRole::Startup, true) => Some(ProbeAction::Started { ready: !has_readiness_probe }),
        (ProbeRole::Readiness, ready) => Some(ProbeAction::SetReady(ready)),
        // Liveness starts as success, so a success verdict changes nothing.
        (ProbeRole::Liveness, true) => None,
        (ProbeRole::Liveness | ProbeRole::Startup, false) => Some(ProbeAction::Kill),
    }
}

/// The request an `httpGet` probe sends (HTTP/1.1, `Connection: close`, kubelet's User-Agent).
pub fn http_request(host: &str, port: u16, path: &str, headers: &[(String, String)]) -> String {
    let path = if path.starts_with('/') { path.to_string() } else { format!("/{path}") };
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut req = format!("GET {path} HTTP/1.1\r\n");
    if !has("host") {
        req.push_str(&format!("Host: {host}:{port}\r\n"));
    }
    if !has("user-agent") {
        req.push_str("User-Agent: kube-probe/1.35\r\n");
    }
    if !has("accept") {
        req.push_str("Accept: */*\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("Connection: close\r\n\r\n");
    req
}

/// The status code of an HTTP response's first line, once it is complete.
pub fn parse_status_line(buf: &[u8]) -> Option<u16> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    let line = std::str::from_utf8(&buf[..end]).ok()?;
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// Whether an HTTP status counts as a probe success (200 ≤ code < 400).
pub fn http_success(code: u16) -> bool {
    (200..400).contains(&code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, TCPSocketAction};

    fn timing(success: u32, failure: u32) -> ProbeTiming {
        ProbeTiming {
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
        }
    }

    #[test]
    fn readiness_needs_consecutive_successes_and_failures() {
        let mut t = ProbeTracker::new(ProbeRole::Readiness, &timing(2, 3));
        assert_eq!(t.verdict(), Some(false));
        assert_eq!(t.observe(true), None);
        assert_eq!(t.observe(false), None);
        assert_eq!(t.observe(true), None);
        assert_eq!(t.observe(true), Some(true));
        assert_eq!(t.observe(true), None);
        assert_eq!(t.observe(false), None);
        assert_eq!(t.observe(false), None);
        assert_eq!(t.observe(true), None, "a success resets the failure count");
        assert_eq!(t.observe(false), None);
        assert_eq!(t.observe(false), None);
        assert_eq!(t.observe(false), Some(false));
        assert_eq!(t.verdict(), Some(false));
    }

    #[test]
    fn liveness_starts_alive_and_startup_unknown() {
        let mut l = ProbeTracker::new(ProbeRole::Liveness, &timing(1, 2));
        assert_eq!(l.verdict(), Some(true));
        assert_eq!(l.observe(true), None);
        assert_eq!(l.observe(false), None);
        assert_eq!(l.observe(false), Some(false));
        let mut s = ProbeTracker::new(ProbeRole::Startup, &timing(1, 5));
        assert_eq!(s.verdict(), None);
        assert_eq!(s.observe(false), None);
        assert_eq!(s.observe(true), Some(true));
    }

    #[test]
    fn from_k8s_applies_defaults_and_named_ports() {
        let c = Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort { name: Some("http".into()), container_port: 8080, ..Default::default() }]),
            ..Default::default()
        };
        let p = K8sProbe {
            http_get: Some(HTTPGetAction { port: IntOrString::String("http".into()), ..Default::default() }),
            success_threshold: Some(3),
            ..Default::default()
        };
        let spec = ProbeSpec::from_k8s(ProbeRole::Liveness, &p, &c).unwrap();
        assert_eq!(
            spec.check,
            ProbeCheck::HttpGet { host: None, port: 8080, path: "/".into(), headers: vec![], https: false }
        );
        assert_eq!(spec.timing, ProbeTiming { period: Duration::from_secs(10), failure_threshold: 3, ..timing(1, 3) });
        let readiness = ProbeSpec::from_k8s(ProbeRole::Readiness, &p, &c).unwrap();
        assert_eq!(readiness.timing.success_threshold, 3);
        let tcp = K8sProbe {
            tcp_socket: Some(TCPSocketAction { port: IntOrString::String("nope".into()), ..Default::default() }),
            ..Default::default()
        };
        assert!(ProbeSpec::from_k8s(ProbeRole::Readiness, &tcp, &c).unwrap_err().contains("nope"));
        assert!(ProbeSpec::from_k8s(ProbeRole::Readiness, &K8sProbe::default(), &c).is_err());
    }

    #[test]
    fn verdicts_map_to_actions() {
        assert_eq!(action(ProbeRole::Startup, true, false), Some(ProbeAction::Started { ready: true }));
        assert_eq!(action(ProbeRole::Startup, true, true), Some(ProbeAction::Started { ready: false }));
        assert_eq!(action(ProbeRole::Startup, false, true), Some(ProbeAction::Kill));
        assert_eq!(action(ProbeRole::Readiness, false, true), Some(ProbeAction::SetReady(false)));
        assert_eq!(action(ProbeRole::Readiness, true, true), Some(ProbeAction::SetReady(true)));
        assert_eq!(action(ProbeRole::Liveness, false, false), Some(ProbeAction::Kill));
        assert_eq!(action(ProbeRole::Liveness, true, false), None);
    }

    #[test]
    fn http_exchange() {
        let req = http_request("10.244.0.2", 8080, "healthz", &[("X-A".into(), "1".into())]);
        assert!(req.starts_with("GET /healthz HTTP/1.1\r\nHost: 10.244.0.2:8080\r\n"), "{req}");
        assert!(req.contains("X-A: 1\r\n") && req.ends_with("\r\n\r\n"));
        assert_eq!(parse_status_line(b"HTTP/1.0 200 OK\r\nServer: x\r\n"), Some(200));
        assert_eq!(parse_status_line(b"HTTP/1.1 503 Service Unavailable\r\n"), Some(503));
        assert_eq!(parse_status_line(b"HTTP/1.1 200"), None, "incomplete line");
        assert_eq!(parse_status_line(b"SSH-2.0\r\n"), None);
        assert!(http_success(200) && http_success(302) && !http_success(404) && !http_success(500));
    }
}
