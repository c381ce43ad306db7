//! Pod networking (I/O through the `ip` command): a host bridge holding the gateway address,
//! one network namespace and veth pair per pod, loopback up, no default route and no NAT, so
//! traffic stays on this machine. The host reaches pods through the bridge.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use tokio::process::Command;

use crate::error::{Error, Result};
use crate::ipam::Cidr;
use crate::process::kill_pids;

/// The node's pod network.
#[derive(Debug, Clone)]
pub struct Network {
    ip: PathBuf,
    bridge: String,
    cidr: Cidr,
}

impl Network {
    /// A network on `bridge` with addresses from `cidr`, managed with the `ip` binary at `ip`.
    pub fn new(ip: PathBuf, bridge: &str, cidr: Cidr) -> Self {
        Network { ip, bridge: bridge.to_string(), cidr }
    }

    /// The bridge name.
    pub fn bridge(&self) -> &str {
        &self.bridge
    }

    async fn ip(&self, args: &[&str]) -> Result<String> {
        let out = Command::new(&self.ip)
            .args(args)
            .output()
            .await
            .map_err(|e| Error::io(format!("running ip {}", args.join(" ")), e))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(Error::Command {
                command: format!("ip {}", args.join(" ")),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            })
        }
    }

    /// Creates the bridge if needed and gives it the gateway address.
    pub async fn ensure_bridge(&self) -> Result<()> {
        if self.ip(&["link", "show", "dev", &self.bridge]).await.is_err() {
            self.ip(&["link", "add", "name", &self.bridge, "type", "bridge"]).await?;
        }
        let gw = format!("{}/{}", self.cidr.gateway(), self.cidr.prefix);
        self.ip(&["addr", "replace", &gw, "dev", &self.bridge]).await?;
        self.ip(&["link", "set", "dev", &self.bridge, "up"]).await?;
        Ok(())
    }

    /// Adds a /32 address to the bridge (the `kubernetes` Service IP).
    pub async fn add_local_address(&self, addr: Ipv4Addr) -> Result<()> {
        self.ip(&["addr", "replace", &format!("{addr}/32"), "dev", &self.bridge]).await.map(drop)
    }

    /// Deletes the bridge (and with it its addresses).
    pub async fn remove_bridge(&self) -> Result<()> {
        self.ip(&["link", "del", "dev", &self.bridge]).await.map(drop)
    }

    /// Creates a pod's namespace `netns` with `eth0` at `addr` (host end `veth` on the bridge),
    /// loopback up, and a host route to each of `extra_routes` through the gateway.
    pub async fn create_pod(&self, netns: &str, veth: &str, addr: Ipv4Addr, extra_routes: &[Ipv4Addr]) -> Result<()> {
        // A leftover from a crash would make `netns add` fail.
        self.delete_pod(netns, veth).await;
        let result = self.create_pod_inner(netns, veth, addr, extra_routes).await;
        if result.is_err() {
            self.delete_pod(netns, veth).await;
        }
        result
    }

    async fn create_pod_inner(&self, netns: &str, veth: &str, addr: Ipv4Addr, extra_routes: &[Ipv4Addr]) -> Result<()> {
        self.ip(&["netns", "add", netns]).await?;
        self.ip(&["link", "add", "name", veth, "type", "veth", "peer", "name", "eth0", "netns", netns]).await?;
        self.ip(&["link", "set", "dev", veth, "master", &self.bridge]).await?;
        self.ip(&["link", "set", "dev", veth, "up"]).await?;
        let cidr = format!("{addr}/{}", self.cidr.prefix);
        self.ip(&["-n", netns, "addr", "add", &cidr, "dev", "eth0"]).await?;
        self.ip(&["-n", netns, "link", "set", "dev", "lo", "up"]).await?;
        self.ip(&["-n", netns, "link", "set", "dev", "eth0", "up"]).await?;
        // The host may still map this address to an earlier pod's MAC (until the entry goes stale,
        // tens of seconds): forget it so that the first probe asks again.
        self.ip(&["neigh", "flush", "to", &addr.to_string(), "dev", &self.bridge]).await?;
        let gw = self.cidr.gateway().to_string();
        for r in extra_routes {
            self.ip(&["-n", netns, "route", "replace", &format!("{r}/32"), "via", &gw, "dev", "eth0"]).await?;
        }
        Ok(())
    }

    /// Pids of processes that live in `netns`.
    pub async fn pids_in(&self, netns: &str) -> Vec<u32> {
        match self.ip(&["netns", "pids", netns]).await {
            Ok(out) => out.split_whitespace().filter_map(|p| p.parse().ok()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Kills whatever still runs in the pod's namespace, then deletes the namespace and the
    /// veth. Errors are ignored (the pieces may already be gone).
    pub async fn delete_pod(&self, netns: &str, veth: &str) {
        for _ in 0..20 {
            let pids = self.pids_in(netns).await;
            if pids.is_empty() {
                break;
            }
            kill_pids(&pids);
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The host end goes first: deleting it removes both ends at once, while a deleted
        // namespace takes its devices down later, in the kernel's own time.
        let _ = self.ip(&["link", "del", "dev", veth]).await;
        let _ = self.ip(&["netns", "del", netns]).await;
    }

    /// Names of network namespaces that belong to this bridge (`<bridge>-*`).
    pub async fn list_pod_namespaces(&self) -> Vec<String> {
        let prefix = format!("{}-", self.bridge);
        match self.ip(&["netns", "list"]).await {
            Ok(out) => out
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(&prefix))
                .map(str::to_string)
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Names of veths enslaved to the bridge.
    pub async fn list_bridge_ports(&self) -> Vec<String> {
        match self.ip(&["-o", "link", "show", "master", &self.bridge]).await {
            Ok(out) => out
                .lines()
                .filter_map(|l| l.split(':').nth(1))
                .map(|n| n.trim().split('@').next().unwrap_or("").to_string())
                .filter(|n| !n.is_empty())
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Removes every pod namespace and veth of this bridge (start-up and shutdown sweep).
    /// The bridge's ports are deleted before the namespaces, for the reason `delete_pod` gives.
    pub async fn sweep(&self) -> usize {
        for port in self.list_bridge_ports().await {
            let _ = self.ip(&["link", "del", "dev", &port]).await;
        }
        let namespaces = self.list_pod_namespaces().await;
        for ns in &namespaces {
            self.delete_pod(ns, "skv-none").await;
        }
        namespaces.len()
    }
}
