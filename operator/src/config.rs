//! The controller's settings: one struct, read from flags or the environment, checked by
//! [`Settings::validate`]. The Kubernetes connection comes from `KUBECONFIG` or the in-cluster
//! service account (kube's `Config::infer`).

use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgAction, Parser};

use crate::error::{Error, Result};
use crate::leader::Timing;
use skiff_http::telemetry::LogFormat;

/// Command line of `skiff-controller`.
#[derive(Debug, Clone, Parser)]
#[command(name = "skiff-controller", version, about = "Skiff's operator for KServe InferenceServices")]
pub struct Settings {
    /// Namespace of the controller: its `inferenceservice-config` ConfigMap and leader Lease live there.
    #[arg(long, env = "POD_NAMESPACE", default_value = "skiff-system")]
    pub namespace: String,
    /// Address of the admin listener (`/metrics`, `/healthz`, `/readyz`).
    #[arg(long, env = "SKIFF_ADMIN_ADDR", default_value = "0.0.0.0:8081")]
    pub admin_addr: SocketAddr,
    /// Elect a leader through a Lease, so that several replicas are safe (`--leader-elect false` to skip).
    #[arg(long, env = "SKIFF_LEADER_ELECT", default_value_t = true, action = ArgAction::Set)]
    pub leader_elect: bool,
    /// Name of the leader Lease.
    #[arg(long, default_value = "skiff-controller")]
    pub lease_name: String,
    /// This replica's name in the Lease (default: `$POD_NAME`, else the host name and process id).
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Seconds a Lease lasts without renewal before another replica may take it.
    #[arg(long, default_value_t = 15)]
    pub lease_duration_secs: u64,
    /// Seconds between renewals by the leader (and between tries by the others).
    #[arg(long, default_value_t = 5)]
    pub lease_renew_secs: u64,
    /// InferenceServices reconciled at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: u16,
    /// Milliseconds a reconcile waits for more changes to the same InferenceService (bursts of events
    /// from its Deployment then make one reconcile).
    #[arg(long, default_value_t = 0)]
    pub debounce_ms: u64,
    /// Seconds a revision that lost its traffic is kept before it is collected (every router must
    /// have seen the new routes first).
    #[arg(long, default_value_t = 30)]
    pub revision_retention_secs: u64,
    /// The activator's ServiceAccount (in `--namespace`): the only caller of the autoscaler's API.
    #[arg(long, default_value = "skiff-activator")]
    pub activator_service_account: String,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl Settings {
    /// Checks what clap cannot; messages state the allowed range.
    pub fn validate(&self) -> Result<()> {
        if self.namespace.is_empty() {
            return Err(Error::Config("--namespace must not be empty".into()));
        }
        if self.lease_renew_secs == 0 || self.lease_renew_secs * 2 > self.lease_duration_secs {
            return Err(Error::Config(
                "--lease-renew-secs must be at least 1 and at most half of --lease-duration-secs".into(),
            ));
        }
        if self.concurrency == 0 {
            return Err(Error::Config("--concurrency must be at least 1".into()));
        }
        Ok(())
    }

    /// This replica's identity in the Lease.
    pub fn identity(&self) -> String {
        self.identity.clone().unwrap_or_else(|| {
            let host = std::env::var("HOSTNAME")
                .ok()
                .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "skiff-controller".into());
            format!("{host}_{}", std::process::id())
        })
    }

    /// How long a revision without traffic is kept.
    pub fn revision_retention(&self) -> Duration {
        Duration::from_secs(self.revision_retention_secs)
    }

    /// The reconcile debounce.
    pub fn debounce(&self) -> Duration {
        Duration::from_millis(self.debounce_ms)
    }

    /// How long a Lease lasts.
    pub fn lease_duration(&self) -> Duration {
        Duration::from_secs(self.lease_duration_secs)
    }

    /// How often the Lease is renewed or tried.
    pub fn lease_renew(&self) -> Duration {
        Duration::from_secs(self.lease_renew_secs)
    }

    /// The leader election's timing: the Lease, the renew deadline (two thirds of the Lease, as
    /// client-go's 10 s of 15 s: a leader that has not renewed by then steps down, a third of the
    /// Lease before another replica may take it), and the time between rounds.
    pub fn lease_timing(&self) -> Timing {
        let lease = self.lease_duration();
        Timing { lease, renew_deadline: lease * 2 / 3, retry: self.lease_renew() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn defaults_are_valid_and_ranges_are_checked() {
        let ok = Settings::parse_from(["skiff-controller"]);
        ok.validate().unwrap();
        assert!(ok.leader_elect);
        let off = Settings::parse_from(["skiff-controller", "--leader-elect", "false", "--namespace", "x"]);
        assert!(!off.leader_elect);
        let bad = Settings::parse_from(["skiff-controller", "--lease-renew-secs", "10"]);
        assert!(bad.validate().unwrap_err().to_string().contains("at most half"));
        let timing = ok.lease_timing();
        assert_eq!((timing.lease, timing.renew_deadline, timing.retry), (secs(15), secs(10), secs(5)));
        let e2e = Settings::parse_from(["skiff-controller", "--lease-duration-secs", "6", "--lease-renew-secs", "3"]);
        e2e.validate().unwrap();
        let timing = e2e.lease_timing();
        assert!(timing.retry < timing.renew_deadline && timing.renew_deadline < timing.lease, "{timing:?}");
        assert!(ok.identity().contains('_'));
    }
}
