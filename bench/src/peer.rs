//! Peers under test: child processes started on a loopback port, polled until ready, measured
//! for memory, and stopped (when dropped too).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running peer.
pub struct Peer {
    /// Display name.
    pub name: String,
    /// `127.0.0.1:port`.
    pub address: String,
    /// Time from spawn to the first 200 from the readiness URL.
    pub startup: Duration,
    child: Child,
}

impl Peer {
    /// Spawns `command` (its stdout and stderr go to `log`) and waits up to `timeout` for
    /// `ready_path` to answer 200.
    pub async fn start(
        name: &str,
        mut command: Command,
        port: u16,
        ready_path: &str,
        log: &Path,
        timeout: Duration,
    ) -> anyhow::Result<Peer> {
        let log_file = std::fs::File::create(log)?;
        let started = Instant::now();
        let child = command.stdout(log_file.try_clone()?).stderr(log_file).stdin(Stdio::null()).spawn()?;
        let address = format!("127.0.0.1:{port}");
        let mut peer = Peer { name: name.to_owned(), address, startup: Duration::ZERO, child };
        while started.elapsed() < timeout {
            if let Some(status) = peer.child.try_wait()? {
                anyhow::bail!("{name} exited with {status} before it was ready; see {}", log.display());
            }
            if ready(&peer.address, ready_path).await {
                peer.startup = started.elapsed();
                return Ok(peer);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("{name} was not ready within {timeout:?}; see {}", log.display())
    }

    /// The peer's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the peer and all its descendants, in MiB.
    pub fn rss_mib(&self) -> f64 {
        let mut pids = vec![self.child.id()];
        let mut i = 0;
        while i < pids.len() {
            pids.extend(children(pids[i]));
            i += 1;
        }
        pids.iter().map(|&pid| rss_kib(pid)).sum::<u64>() as f64 / 1024.0
    }

    /// The peer process's own peak resident memory so far (`VmHWM`), in MiB.
    pub fn peak_rss_mib(&self) -> f64 {
        status_kib(self.child.id(), "VmHWM:") as f64 / 1024.0
    }

    /// Stops the peer (SIGTERM, then SIGKILL after 5 s), as dropping it does.
    pub fn stop(self) {
        drop(self);
    }

    fn halt(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A benchmark that fails part-way leaves no peer running (a `skiff up` left behind would load the
/// machine for the next run).
impl Drop for Peer {
    fn drop(&mut self) {
        self.halt();
    }
}

async fn ready(address: &str, path: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else { return false };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).await.is_ok() && &head[9..12] == b"200"
}

fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// CPU time (user + system, all threads) used so far by process `pid` and its live descendants,
/// in seconds (Linux's 100 ticks a second).
pub fn cpu_seconds(pid: u32) -> f64 {
    let mut pids = vec![pid];
    let mut i = 0;
    while i < pids.len() {
        pids.extend(children(pids[i]));
        i += 1;
    }
    pids.iter().map(|&pid| own_cpu_ticks(pid)).sum::<u64>() as f64 / 100.0
}

/// CPU time used so far by this process alone (not the peers it started), in seconds.
pub fn self_cpu_seconds() -> f64 {
    own_cpu_ticks(std::process::id()) as f64 / 100.0
}

/// utime + stime of one process (all its threads) from `/proc/PID/stat`, in clock ticks.
fn own_cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0 };
    // Fields after the command's closing parenthesis start at field 3 (state); utime and stime are
    // fields 14 and 15.
    let Some((_, rest)) = stat.rsplit_once(')') else { return 0 };
    rest.split_whitespace().skip(11).take(2).filter_map(|v| v.parse::<u64>().ok()).sum()
}

fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A `kB` field of `/proc/PID/status`.
fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(field).and_then(|v| v.trim().trim_end_matches(" kB").parse().ok()))
        })
        .unwrap_or(0)
}

/// A free loopback port (bound, then released).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
