//! What one local replica runs, and starting and stopping its processes. A model replica is one
//! `skiff-server`; a container replica is the container's process behind a queue-proxy
//! (`skiff-activator queue-proxy`, the cluster's sidecar), which enforces containerConcurrency,
//! exposes the in-flight gauge the autoscaler scrapes and answers readiness from the container's;
//! a collocated replica (KServe's collocation) is a container replica whose transformer calls a
//! `skiff-server` of its own on a free loopback port, ready when both are.
//! Either way the replica's address is the one its front process (server or queue-proxy) logs
//! in its JSON `listening` line, and the replica ends when any of its processes does.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use skiff_api::serving::{AdmissionArgs, QueueProxyArgs, ServerProcess};
use skiff_api::storage::StoreUri;
use skiff_server::config::Cli as ServerCommand;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};

use super::container::ContainerSpec;
use super::logs::Log;

/// What every replica of a revision runs.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaSpec {
    /// `skiff-server` with these arguments ([`skiff_api::serving::server_args`], with
    /// `--http-port 0`); the backend adds a loopback bind, JSON logs and the termination message's
    /// file ([`ServerProcess`]).
    Server {
        /// The server's arguments.
        args: Vec<String>,
        /// A `storageUri` fetched into the model cache before a replica starts; its folder takes
        /// the place of `--model-dir`'s ([`ReplicaSpec::with_model_dir`]).
        fetch: Option<StoreUri>,
    },
    /// A custom container behind a queue-proxy.
    Container(ContainerReplica),
    /// KServe's collocation: `skiff-server` with `server` (as [`ReplicaSpec::Server`]'s `args`) on a
    /// free loopback port, and the transformer container, pointed at that port
    /// ([`ContainerSpec::beside_model_server`]), behind a queue-proxy that takes the traffic.
    Collocated {
        /// The model server's arguments.
        server: Vec<String>,
        /// A `storageUri` fetched into the model cache before a replica starts.
        fetch: Option<StoreUri>,
        /// The transformer container and its queue-proxy's settings.
        transformer: ContainerReplica,
    },
}

/// A container replica: the container and its queue-proxy's settings.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerReplica {
    /// The container.
    pub container: ContainerSpec,
    /// Variables naming its component and revision ([`super::container::knative_env`]).
    pub env: Vec<(String, String)>,
    /// Requests sent to the container at once; 0 = unlimited.
    pub container_concurrency: usize,
    /// Bound on one request, in seconds.
    pub timeout_secs: u64,
    /// The queue-proxy's flags as KServe's agent (batcher, request logger:
    /// [`skiff_api::serving::batcher_args`], [`skiff_api::serving::logger_args`]), as the operator
    /// gives the cluster's queue-proxy.
    pub agent_args: Vec<String>,
    /// A runtime's `storageUri` fetched into the model cache before a replica starts; its folder
    /// takes the place of `/mnt/models` in the container ([`ReplicaSpec::with_model_dir`]).
    pub fetch: Option<StoreUri>,
}

/// The programs replicas run.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `skiff-server`.
    pub server: PathBuf,
    /// `skiff-activator` (its `queue-proxy` mode).
    pub queue_proxy: PathBuf,
    /// ONNX Runtime, for `skiff-server`.
    pub ort_dylib: PathBuf,
    /// The models' cached forms, for `skiff-server` (`SKIFF_ORT_CACHE_DIR`; `off`: none).
    pub ort_cache: PathBuf,
}

/// A started replica.
pub struct Launched {
    /// The process that serves the replica's address; its stderr is piped.
    pub front: Child,
    /// The processes behind the queue-proxy, for a container replica: the container, then a
    /// collocated model server.
    pub containers: Vec<Child>,
    /// A collocated model server's address: the replica is ready when it is too.
    pub model_server: Option<SocketAddr>,
    /// The front's readiness path.
    pub ready_path: &'static str,
    /// Whether the front's output is the replica's log (the server's is; a queue-proxy's is not:
    /// the container's output is the log, as `kserve-container` is the pod's log on a cluster).
    pub front_is_log: bool,
}

impl ReplicaSpec {
    /// What a replica would refuse before it starts, and why: for a model server, its models as
    /// it finds and checks them ([`skiff_server::model::preflight`]: a missing, empty, truncated,
    /// text or unreadable `model.onnx`). A container is not checked.
    pub fn preflight(&self) -> Result<(), String> {
        let (ReplicaSpec::Server { args, .. } | ReplicaSpec::Collocated { server: args, .. }) = self else {
            return Ok(());
        };
        let command = std::iter::once("skiff-server").chain(args.iter().map(String::as_str));
        let server = ServerCommand::try_parse_from(command).map_err(|e| e.to_string())?.config;
        let dir = server.model_dir().map_err(|e| e.to_string())?;
        skiff_server::model::preflight(&dir, server.model_name.as_deref()).map(drop).map_err(|e| e.to_string())
    }

    /// The storageUri a replica's model is fetched from, if it is.
    pub fn fetches(&self) -> Option<&StoreUri> {
        match self {
            ReplicaSpec::Server { fetch, .. } | ReplicaSpec::Collocated { fetch, .. } => fetch.as_ref(),
            ReplicaSpec::Container(replica) => replica.fetch.as_ref(),
        }
    }

    /// This spec serving the model in `dir` (a fetched model's folder in the cache).
    pub fn with_model_dir(&self, dir: &Path) -> ReplicaSpec {
        let with_dir = |args: &[String]| with_flag(args, "--model-dir", &dir.to_string_lossy());
        match self {
            ReplicaSpec::Server { args, .. } => ReplicaSpec::Server { args: with_dir(args), fetch: None },
            ReplicaSpec::Collocated { server, transformer, .. } => {
                ReplicaSpec::Collocated { server: with_dir(server), fetch: None, transformer: transformer.clone() }
            }
            ReplicaSpec::Container(replica) => {
                let container = replica.container.with_model_dir(dir);
                ReplicaSpec::Container(ContainerReplica { container, fetch: None, ..replica.clone() })
            }
        }
    }

    /// Starts a replica's processes; a container's output goes to `log`; a model server writes
    /// why it stopped, if it fails, to `termination_message`.
    pub fn launch(&self, programs: &Programs, log: &Arc<Log>, termination_message: &Path) -> std::io::Result<Launched> {
        match self {
            ReplicaSpec::Server { args, .. } => {
                let front = spawn(server(programs, args, termination_message), Stdio::null())?;
                let (containers, model_server) = (Vec::new(), None);
                Ok(Launched { front, containers, model_server, ready_path: "/v2/health/ready", front_is_log: true })
            }
            ReplicaSpec::Container(replica) => launch_container(replica, programs, log),
            ReplicaSpec::Collocated { server: args, transformer, .. } => {
                let port = free_port()?;
                let args = with_flag(args, "--http-port", &port.to_string());
                let mut model_server = spawn(server(programs, &args, termination_message), Stdio::null())?;
                if let Some(output) = model_server.stderr.take() {
                    tokio::spawn(copy_lines(boxed(output), log.clone()));
                }
                let container = transformer.container.beside_model_server(port);
                let replica = ContainerReplica { container, ..transformer.clone() };
                let mut launched = launch_container(&replica, programs, log)?;
                launched.containers.push(model_server);
                launched.model_server = Some(SocketAddr::new(LOOPBACK, port));
                Ok(launched)
            }
        }
    }
}

/// `skiff-server` with `args`, on loopback, logging JSON, writing why it stopped to
/// `termination_message`.
fn server(programs: &Programs, args: &[String], termination_message: &Path) -> Command {
    let process = ServerProcess {
        bind: Some(LOOPBACK),
        json_logs: true,
        termination_message_path: Some(termination_message.to_string_lossy().into_owned()),
    };
    let mut server = Command::new(&programs.server);
    server
        .args(args)
        .args(process.to_args())
        .env("ORT_DYLIB_PATH", &programs.ort_dylib)
        .env("SKIFF_ORT_CACHE_DIR", &programs.ort_cache);
    server
}

/// `args` with `flag`'s value (the argument after it) set to `value`, where `flag` is given.
fn with_flag(args: &[String], flag: &str, value: &str) -> Vec<String> {
    let mut args = args.to_vec();
    if let Some(slot) = args.iter().position(|a| a == flag).and_then(|at| args.get_mut(at + 1)) {
        *slot = value.to_owned();
    }
    args
}

/// A container replica's processes: the container on a free port (its output to `log`), and its
/// queue-proxy in front.
fn launch_container(replica: &ContainerReplica, programs: &Programs, log: &Arc<Log>) -> std::io::Result<Launched> {
    let port = free_port()?;
    let process = replica.container.process(port, &replica.env);
    let (program, args) = process.argv.split_first().expect("a container's argv is never empty");
    let mut command = Command::new(program);
    command.args(args).envs(process.env).current_dir(&replica.container.dir);
    let mut container = spawn(command, Stdio::piped())?;
    for output in [container.stdout.take().map(boxed), container.stderr.take().map(boxed)].into_iter().flatten() {
        tokio::spawn(copy_lines(output, log.clone()));
    }
    let mut queue_proxy = Command::new(&programs.queue_proxy);
    queue_proxy.args(replica.queue_proxy_args(port).to_args()).args(&replica.agent_args);
    // A queue-proxy that cannot start drops the container, which kills it.
    let front = spawn(queue_proxy, Stdio::null())?;
    Ok(Launched { front, containers: vec![container], model_server: None, ready_path: "/healthz", front_is_log: false })
}

/// Where replicas listen: loopback only.
const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

impl ContainerReplica {
    /// The queue-proxy's arguments in front of this container on loopback `port`, on a free port
    /// of its own, with JSON logs; the agent's arguments ([`ContainerReplica::agent_args`]) follow.
    fn queue_proxy_args(&self, port: u16) -> QueueProxyArgs {
        QueueProxyArgs {
            port: 0,
            bind: Some(LOOPBACK),
            upstream: SocketAddr::new(LOOPBACK, port),
            admission: AdmissionArgs { container_concurrency: self.container_concurrency, max_queued: None },
            timeout_secs: self.timeout_secs,
            readiness_path: self.container.readiness_path.clone(),
            json_logs: true,
            ..QueueProxyArgs::default()
        }
    }
}

/// Log targets whose info lines `skiff up` reads from a replica (its `listening` line gives its
/// address), whatever `RUST_LOG` says otherwise.
const ANNOUNCED: &[&str] = &["skiff_server=info", "skiff_activator=info"];

fn spawn(mut command: Command, stdout: Stdio) -> std::io::Result<Child> {
    let filter = skiff_http::telemetry::directives(super::env::rust_log(), "info", ANNOUNCED);
    command.env("RUST_LOG", filter);
    command.stdin(Stdio::null()).stdout(stdout).stderr(Stdio::piped()).kill_on_drop(true).spawn()
}

fn boxed(output: impl AsyncRead + Unpin + Send + 'static) -> Box<dyn AsyncRead + Unpin + Send> {
    Box::new(output)
}

async fn copy_lines(output: Box<dyn AsyncRead + Unpin + Send>, log: Arc<Log>) {
    let mut lines = BufReader::new(output).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        log.push(line);
    }
}

/// A loopback port free now, for a container to listen on (the container is told it in `PORT`; a
/// container that loses it to another process exits, and its replica is replaced).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// How long a container may take to exit after SIGTERM once its queue-proxy has gone.
const CONTAINER_GRACE: Duration = Duration::from_secs(10);

/// Waits until the replica's front process exits, or one of its `containers` does; then stops the
/// others, the front first (a queue-proxy drains before it exits, so its container has answered
/// everything it was sent), then the containers in order. Returns how the first of them ended.
pub async fn wait(mut front: Child, mut containers: Vec<Child>) -> Option<ExitStatus> {
    if containers.is_empty() {
        return front.wait().await.ok();
    }
    let (status, front_ended) = {
        let ends = futures::future::select_all(containers.iter_mut().map(|c| Box::pin(c.wait())));
        tokio::select! {
            status = front.wait() => (status.ok(), true),
            (status, _, _) = ends => (status.ok(), false),
        }
    };
    if !front_ended {
        stop(&mut front).await;
    }
    for container in &mut containers {
        stop(container).await;
    }
    status
}

/// SIGTERM, then SIGKILL after [`CONTAINER_GRACE`].
async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        terminate(pid).await;
    }
    if tokio::time::timeout(CONTAINER_GRACE, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}

/// Sends SIGTERM to `pid`.
pub async fn terminate(pid: u32) {
    let _ = Command::new("kill").args(["-TERM", &pid.to_string()]).status().await;
}
