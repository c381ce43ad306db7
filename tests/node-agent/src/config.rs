//! The agent's configuration: one struct, read from flags or the environment by [`Cli::parse_args`].

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::error::{Error, Result};
use crate::ipam::Cidr;

/// Command line of `skiff-node-agent`.
#[derive(Debug, Parser)]
#[command(name = "skiff-node-agent", version, about = "Kubelet stand-in: runs pods' containers as local processes")]
pub struct Cli {
    /// Internal helper mode (used by the agent itself to start a container process).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Agent settings.
    #[command(flatten)]
    pub config: Config,
}

impl Cli {
    /// Parses `std::env::args`.
    pub fn parse_args() -> Self {
        Cli::parse()
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Sets up a container's mount and UTS namespaces, then executes its program (internal).
    #[command(hide = true)]
    SandboxExec(crate::sandbox::ExecArgs),
}

/// Settings of the agent (flags, or the environment variables named in `--help`).
#[derive(Debug, Clone, Args)]
pub struct Config {
    /// Name of the Node object.
    #[arg(long, env = "SKIFF_NODE_NAME", default_value = "skiff-node")]
    pub node_name: String,
    /// Kubeconfig to use. Default: $SKIFF_NODE_KUBECONFIG (the node's own identity), else
    /// $KUBECONFIG, else the usual inference.
    #[arg(long, env = "SKIFF_AGENT_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Image map file (JSON or YAML: image name → program path or argv list).
    #[arg(long, env = "SKIFF_IMAGE_MAP")]
    pub image_map: Option<PathBuf>,
    /// State directory: container logs go to `<dir>/pods/<ns>_<pod>_<container>.log`.
    #[arg(long, env = "SKIFF_CLUSTER_DIR", default_value = "/tmp/skiff-cluster")]
    pub cluster_dir: PathBuf,
    /// Host bridge for pod networking; also the prefix of the pods' network namespace names.
    #[arg(long, env = "SKIFF_BRIDGE", default_value = "skiff0")]
    pub bridge: String,
    /// Pod address range; the first address belongs to the bridge.
    #[arg(long, env = "SKIFF_POD_CIDR", default_value = "10.244.0.0/24")]
    pub pod_cidr: String,
    /// Node InternalIP (pods' hostIP). Default: the bridge address, which pods and host both reach.
    #[arg(long, env = "SKIFF_NODE_IP")]
    pub node_ip: Option<Ipv4Addr>,
    /// ClusterIP of the `kubernetes` Service; the agent puts it on the bridge and forwards it to
    /// the API server so pods can use in-cluster config.
    #[arg(long, env = "SKIFF_API_SERVICE_IP", default_value = "10.96.0.1")]
    pub api_service_ip: Ipv4Addr,
    /// Do not forward the `kubernetes` Service address to the API server.
    #[arg(long)]
    pub no_api_proxy: bool,
    /// First restart back-off, in seconds (the kubelet uses 10).
    #[arg(long, default_value_t = 1)]
    pub backoff_initial_secs: u64,
    /// Longest restart back-off, in seconds (the kubelet uses 300).
    #[arg(long, default_value_t = 30)]
    pub backoff_max_secs: u64,
    /// Grace period for containers when the agent itself stops, in seconds.
    #[arg(long, default_value_t = 3)]
    pub shutdown_grace_secs: u64,
    /// Seconds between node status and lease heartbeats.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_secs: u64,
    /// Reported pod capacity.
    #[arg(long, default_value_t = 110)]
    pub max_pods: u32,
    /// Reported CPU capacity (default: the number of CPUs).
    #[arg(long)]
    pub cpu: Option<String>,
    /// Reported memory capacity, e.g. 8Gi (default: MemTotal).
    #[arg(long)]
    pub memory: Option<String>,
    /// Address of the kubelet API (the container log endpoint, HTTPS on `--kubelet-port`). It is
    /// bound before the bridge is set up, so the bridge address (the default node IP) works only
    /// if the bridge is left from an earlier run; the default binds every address.
    #[arg(long, env = "SKIFF_KUBELET_ADDRESS", default_value = "0.0.0.0")]
    pub kubelet_address: Ipv4Addr,
    /// Port of the kubelet API, advertised in the Node's `daemonEndpoints`.
    #[arg(long, env = "SKIFF_KUBELET_PORT", default_value_t = 10250)]
    pub kubelet_port: u16,
    /// Serving certificate (PEM) of the kubelet API; with `--tls-private-key-file` and
    /// `--client-ca-file`. Without all three the kubelet API is off.
    #[arg(long, env = "SKIFF_KUBELET_TLS_CERT")]
    pub tls_cert_file: Option<PathBuf>,
    /// Private key (PEM) of the serving certificate.
    #[arg(long, env = "SKIFF_KUBELET_TLS_KEY")]
    pub tls_private_key_file: Option<PathBuf>,
    /// CA (PEM) that signs the client certificates the kubelet API accepts (the cluster CA).
    #[arg(long, env = "SKIFF_KUBELET_CLIENT_CA")]
    pub client_ca_file: Option<PathBuf>,
    /// Host environment variables passed to every container (before its own env).
    #[arg(long, value_delimiter = ',', default_value = "PATH,HOME,LANG,LC_ALL,TZ,USER,PYENV_ROOT")]
    pub pass_env: Vec<String>,
}

impl Config {
    /// Checks ranges and names; messages say what is allowed.
    pub fn validate(&self) -> Result<()> {
        Cidr::parse(&self.pod_cidr)?;
        if self.node_name.is_empty() || self.node_name.len() > 253 {
            return Err(Error::Config("--node-name must be 1 to 253 characters".into()));
        }
        if self.bridge.is_empty()
            || self.bridge.len() > 15
            || !self.bridge.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::Config("--bridge must be 1 to 15 characters of [A-Za-z0-9_-]".into()));
        }
        if self.backoff_initial_secs == 0 || self.backoff_max_secs < self.backoff_initial_secs {
            return Err(Error::Config("--backoff-initial-secs must be >= 1 and <= --backoff-max-secs".into()));
        }
        if !(1..=60).contains(&self.heartbeat_secs) {
            return Err(Error::Config("--heartbeat-secs must be between 1 and 60".into()));
        }
        let tls = [&self.tls_cert_file, &self.tls_private_key_file, &self.client_ca_file];
        if tls.iter().any(|f| f.is_some()) && self.kubelet_tls().is_none() {
            return Err(Error::Config(
                "--tls-cert-file, --tls-private-key-file and --client-ca-file go together (all or none)".into(),
            ));
        }
        if self.kubelet_port == 0 {
            return Err(Error::Config("--kubelet-port must be between 1 and 65535".into()));
        }
        if self.shutdown_grace_secs > 30 {
            return Err(Error::Config("--shutdown-grace-secs must be at most 30".into()));
        }
        Ok(())
    }

    /// The parsed pod CIDR.
    pub fn cidr(&self) -> Cidr {
        Cidr::parse(&self.pod_cidr).expect("validated")
    }

    /// The node's InternalIP.
    pub fn node_ip(&self) -> Ipv4Addr {
        self.node_ip.unwrap_or_else(|| self.cidr().gateway())
    }

    /// Directory of container logs and per-pod state.
    pub fn pods_dir(&self) -> PathBuf {
        self.cluster_dir.join("pods")
    }

    /// A container's log file: `<cluster dir>/pods/<namespace>_<pod>_<container>.log`.
    pub fn container_log(&self, namespace: &str, pod: &str, container: &str) -> PathBuf {
        self.pods_dir().join(format!("{namespace}_{pod}_{container}.log"))
    }

    /// The kubelet API's certificate, key and client CA, if all three are set.
    pub fn kubelet_tls(&self) -> Option<(&Path, &Path, &Path)> {
        Some((self.tls_cert_file.as_deref()?, self.tls_private_key_file.as_deref()?, self.client_ca_file.as_deref()?))
    }

    /// Restart back-off bounds.
    pub fn backoff(&self) -> (Duration, Duration) {
        (Duration::from_secs(self.backoff_initial_secs), Duration::from_secs(self.backoff_max_secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("skiff-node-agent").chain(args.iter().copied())).unwrap()
    }

    #[test]
    fn defaults_validate() {
        let cli = parse(&[]);
        assert!(cli.command.is_none());
        let c = cli.config;
        c.validate().unwrap();
        assert_eq!((c.kubelet_port, c.kubelet_tls()), (10250, None));
        assert_eq!(c.container_log("ns", "p", "c"), c.cluster_dir.join("pods/ns_p_c.log"));
        assert_eq!(c.node_ip(), Ipv4Addr::new(10, 244, 0, 1));
        assert!(c.pass_env.contains(&"PATH".to_string()));
    }

    #[test]
    fn bad_values_are_explained() {
        let c = parse(&["--bridge", "a-very-long-bridge-name"]).config;
        assert!(c.validate().unwrap_err().to_string().contains("15"));
        let c = parse(&["--pod-cidr", "10.0.0.0/32"]).config;
        assert!(c.validate().is_err());
        let c = parse(&["--backoff-initial-secs", "10", "--backoff-max-secs", "5"]).config;
        assert!(c.validate().is_err());
        let c = parse(&["--tls-cert-file", "/a.crt"]).config;
        assert!(c.validate().unwrap_err().to_string().contains("all or none"));
        let c = parse(&["--tls-cert-file", "/a", "--tls-private-key-file", "/b", "--client-ca-file", "/c"]).config;
        c.validate().unwrap();
        assert!(c.kubelet_tls().is_some());
    }

    #[test]
    fn sandbox_exec_subcommand() {
        let cli = parse(&["sandbox-exec", "--ro-bind", "/a", "/b", "--", "sleep", "1"]);
        let Some(Command::SandboxExec(args)) = cli.command else { panic!() };
        assert_eq!(args.argv, vec!["sleep".to_string(), "1".to_string()]);
    }
}
