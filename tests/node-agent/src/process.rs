//! Container processes (I/O): start a container's program in its pod's network namespace through
//! `ip netns exec <ns> skiff-node-agent sandbox-exec ...`, signal its process group, and run exec
//! probes the same way.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::error::{Error, Result};
use crate::sandbox::ExecArgs;
use crate::volumes::Bind;

/// Paths of the programs the agent runs.
#[derive(Debug, Clone)]
pub struct Programs {
    /// The `ip` command.
    pub ip: PathBuf,
    /// This binary (for `sandbox-exec`).
    pub agent: PathBuf,
}

impl Programs {
    /// Finds `ip` on the agent's PATH and this executable.
    pub fn discover() -> Result<Self> {
        let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/sbin:/usr/bin:/sbin:/bin".into());
        let ip = find_program("ip", &format!("{path}:/usr/sbin:/sbin"))
            .ok_or_else(|| Error::Config("the `ip` command (iproute2) is required".into()))?;
        let agent = std::env::current_exe().map_err(|e| Error::io("locating the agent binary", e))?;
        Ok(Programs { ip, agent })
    }
}

/// How to start one container process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Network namespace name (`None`: the host network).
    pub netns: Option<String>,
    /// Bind mounts.
    pub binds: Vec<Bind>,
    /// Hostname (the pod name; `None` keeps the host's, for hostNetwork pods).
    pub hostname: Option<String>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Complete environment.
    pub env: Vec<(String, String)>,
}

impl Launch {
    fn command(&self, programs: &Programs, argv: &[String]) -> Command {
        let helper = ExecArgs::to_args(&self.binds, self.hostname.as_deref(), Some(&self.workdir), argv);
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new(&programs.ip);
                c.arg("netns").arg("exec").arg(ns).arg(&programs.agent);
                c
            }
            None => Command::new(&programs.agent),
        };
        cmd.args(helper).env_clear().envs(self.env.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
        // Its own process group, so the whole container can be signalled at once.
        cmd.process_group(0);
        cmd
    }

    /// Starts the container, appending stdout and stderr to `log`.
    pub fn spawn(&self, programs: &Programs, log: &Path) -> Result<Child> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| Error::io(format!("opening {}", log.display()), e))?;
        let err = file.try_clone().map_err(|e| Error::io("duplicating the log file", e))?;
        let mut cmd = self.command(programs, &self.argv);
        cmd.stdout(Stdio::from(file)).stderr(Stdio::from(err)).kill_on_drop(false);
        cmd.spawn().map_err(|e| Error::io(format!("starting {:?}", self.argv), e))
    }

    /// Runs `argv` in the same sandbox (an exec probe); true if it exits 0 within `timeout`.
    pub async fn run_probe(&self, programs: &Programs, argv: &[String], timeout: Duration) -> (bool, String) {
        let mut cmd = self.command(programs, argv);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return (false, format!("exec probe {argv:?}: {e}")),
        };
        let pid = child.id();
        match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => {
                let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&out.stderr));
                text.truncate(1024);
                (out.status.success(), text)
            }
            Ok(Err(e)) => (false, format!("exec probe {argv:?}: {e}")),
            Err(_) => {
                if let Some(pid) = pid {
                    signal_group(pid, Signal::SIGKILL);
                }
                (false, format!("command {argv:?} timed out after {timeout:?}"))
            }
        }
    }
}

/// Sends `signal` to the process group `pgid` (gone groups are fine).
pub fn signal_group(pgid: u32, signal: Signal) {
    if let Ok(raw) = i32::try_from(pgid) {
        let _ = killpg(Pid::from_raw(raw), signal);
    }
}

/// Sends SIGKILL to each pid (best effort).
pub fn kill_pids(pids: &[u32]) {
    for pid in pids {
        if let Ok(raw) = i32::try_from(*pid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
}

/// Looks a program up like `execvp`: names with a `/` are used as they are; others are searched
/// in the `:`-separated `path`. Returns an executable regular file.
pub fn find_program(name: &str, path: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.contains('/') {
        let p = PathBuf::from(name);
        return executable(&p).then_some(p);
    }
    path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(name)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_lookup() {
        assert!(find_program("sh", "/nonexistent:/bin:/usr/bin").is_some());
        assert!(find_program("definitely-not-a-program-xyz", "/bin:/usr/bin").is_none());
        assert!(find_program("/bin/sh", "").is_some());
        assert!(find_program("/etc/passwd", "").is_none(), "not executable");
    }
}
