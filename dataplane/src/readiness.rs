//! Periodic readiness probing of a ready replica, as the kubelet's readiness probe does for a pod
//! (and, through the EndpointSlice it updates, for Knative's activator and Skiff's router on a
//! cluster): every `period` the replica's readiness path is asked, under `timeout`;
//! `failure_threshold` failures in a row take it out of service ([`Replica::set_probe_ready`]:
//! no new request is sent to it, by the router or the activator), `success_threshold` passes in a
//! row put it back. Requests already on it keep running under their own timeout. A replica that
//! is frozen (SIGSTOP), wedged or overloaded past the timeout stops getting new work until it
//! answers again. [`ProbeState`] is the decision, [`watch`] the loop around it.

use std::net::SocketAddr;
use std::sync::Weak;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::MissedTickBehavior;

use crate::endpoints::Replica;

/// A readiness probe's timing, in the kubelet's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessProbe {
    /// Between probes (`periodSeconds`).
    pub period: Duration,
    /// For one probe to answer 200 (`timeoutSeconds`).
    pub timeout: Duration,
    /// Failures in a row that take the replica out of service (`failureThreshold`).
    pub failure_threshold: u32,
    /// Passes in a row that put it back (`successThreshold`).
    pub success_threshold: u32,
}

impl Default for ReadinessProbe {
    /// Every second, a second to answer, out after 3 failures, back after 1 pass: the kubelet's
    /// thresholds and timeout, with Knative's 1 s period for the queue-proxy's readiness.
    fn default() -> ReadinessProbe {
        ReadinessProbe {
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(1),
            failure_threshold: 3,
            success_threshold: 1,
        }
    }
}

/// Consecutive probe outcomes and the verdict they add up to. A replica starts ready: it is probed
/// only once it has answered its readiness path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeState {
    ready: bool,
    failures: u32,
    passes: u32,
}

impl Default for ProbeState {
    fn default() -> ProbeState {
        ProbeState { ready: true, failures: 0, passes: 0 }
    }
}

impl ProbeState {
    /// Whether the replica is in service.
    pub fn ready(&self) -> bool {
        self.ready
    }

    /// Counts one probe's outcome under `probe`'s thresholds; the new verdict when it changes.
    pub fn observe(&mut self, probe: &ReadinessProbe, passed: bool) -> Option<bool> {
        if passed {
            self.failures = 0;
            self.passes = self.passes.saturating_add(1);
        } else {
            self.passes = 0;
            self.failures = self.failures.saturating_add(1);
        }
        let verdict = if self.ready {
            self.failures < probe.failure_threshold.max(1)
        } else {
            self.passes >= probe.success_threshold.max(1)
        };
        (verdict != self.ready).then(|| {
            self.ready = verdict;
            verdict
        })
    }
}

/// Probes `replica` on `path` under `probe` until the replica record is dropped (it left the
/// revision and no request holds it), marking it in or out of service as the verdict changes.
pub async fn watch(replica: Weak<Replica>, path: &'static str, probe: ReadinessProbe) {
    let mut state = ProbeState::default();
    let mut ticks = tokio::time::interval(probe.period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    // The first tick is immediate; the replica has just answered its readiness path.
    ticks.tick().await;
    loop {
        ticks.tick().await;
        let Some(addr) = replica.upgrade().map(|r| r.addr) else { return };
        let passed = tokio::time::timeout(probe.timeout, answers(addr, path)).await.unwrap_or(false);
        let Some(replica) = replica.upgrade() else { return };
        if let Some(ready) = state.observe(&probe, passed) {
            if ready {
                tracing::info!(%addr, path, "replica passes its readiness probe again: back in service");
            } else {
                tracing::warn!(
                    %addr,
                    path,
                    failures = probe.failure_threshold,
                    "replica failed its readiness probe: no new requests until it passes"
                );
            }
            replica.set_probe_ready(ready);
        }
    }
}

/// One probe: `GET path` on a new connection answers 200.
async fn answers(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut stream) = TcpStream::connect(addr).await else { return false };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    stream.write_all(request.as_bytes()).await.is_ok()
        && stream.read_exact(&mut head).await.is_ok()
        && head.starts_with(b"HTTP/1.")
        && &head[9..12] == b"200"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(probe: &ReadinessProbe, outcomes: &str) -> Vec<bool> {
        let mut state = ProbeState::default();
        outcomes
            .chars()
            .map(|c| {
                state.observe(probe, c == '+');
                state.ready()
            })
            .collect()
    }

    #[test]
    fn out_after_the_failure_threshold_in_a_row_and_back_after_the_success_threshold() {
        let kubelet = ReadinessProbe::default();
        let (t, f) = (true, false);
        assert_eq!(run(&kubelet, "--+--+"), [t, t, t, t, t, t], "failures not in a row");
        assert_eq!(run(&kubelet, "---+"), [t, t, f, t]);
        assert_eq!(run(&kubelet, "-----"), [t, t, f, f, f]);
        let strict = ReadinessProbe { failure_threshold: 1, success_threshold: 2, ..kubelet };
        assert_eq!(run(&strict, "-+-++"), [f, f, f, f, t], "two passes in a row to come back");
    }

    #[test]
    fn only_changes_are_reported() {
        let probe = ReadinessProbe { failure_threshold: 2, ..ReadinessProbe::default() };
        let mut state = ProbeState::default();
        let changes: Vec<Option<bool>> =
            [false, false, false, true, true].iter().map(|p| state.observe(&probe, *p)).collect();
        assert_eq!(changes, [None, Some(false), None, Some(true), None]);
    }
}
