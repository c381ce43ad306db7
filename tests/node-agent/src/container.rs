//! One container's supervisor (I/O shell): resolve, start, probe, restart with back-off, stop.

use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::EventType;
use nix::sys::signal::Signal;
use skiff_api::image::{Resolved, expand_all, image_id, resolve};
use std::os::unix::process::ExitStatusExt;
use tokio::process::Child;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::env::{PodFacts, container_env};
use crate::probe::{ProbeAction, ProbeRole, ProbeSpec, action};
use crate::probe_run::{self, ProbeEvent, ProbeTarget};
use crate::process::{Launch, find_program, signal_group};
use crate::restart::{Backoff, RestartPolicy, exit_code, terminated_reason};
pub use crate::shared::Kind;
use crate::shared::PodShared;
use crate::status::{RunState, Termination};
use crate::{termination, volumes};

/// What woke the supervisor of a running container.
enum Step {
    Exited(ExitStatus),
    Probe(ProbeEvent),
    Stop(Instant),
}

/// How a run ended.
enum End {
    Exited(ExitStatus, Option<String>),
    Stopped(ExitStatus),
}

/// Supervises one container until it is finished for good (by its restart policy) or asked to
/// stop. Cancels `done` on return.
pub async fn supervise(
    shared: Arc<PodShared>,
    kind: Kind,
    policy: RestartPolicy,
    mut stop: watch::Receiver<Option<Instant>>,
    done: CancellationToken,
) {
    let _done = done.drop_guard();
    let Some(container) = kind.spec(&shared) else { return };
    let field = Some(kind.field_path(&container.name));
    let (initial, max) = shared.ctx.config.backoff();
    let mut backoff = Backoff::new(initial, max, (max * 2).max(Duration::from_secs(60)));
    let mut first = true;
    loop {
        if stop.borrow().is_some() {
            return;
        }
        if !first {
            shared.update_container(kind, |c| c.restart_count += 1);
        }
        first = false;
        let started = Instant::now();
        let outcome = run_once(&shared, kind, &container, &mut stop).await;
        let (code, stopped) = match outcome {
            RunOutcome::Ended(code, stopped) => (code, stopped),
            RunOutcome::NotStarted { reason, message } => {
                // Image or configuration problem: wait and try again (no restart counted).
                let delay = backoff.next_delay(Duration::ZERO);
                let back_off_reason = if reason == "ErrImagePull" { "ImagePullBackOff" } else { reason.as_str() };
                shared.update_container(kind, |c| {
                    c.state = RunState::Waiting { reason: back_off_reason.into(), message: Some(message.clone()) }
                });
                first = true;
                if wait_or_stop(delay, &mut stop).await {
                    return;
                }
                continue;
            }
        };
        if stopped || !policy.should_restart(code) {
            return;
        }
        let delay = backoff.next_delay(started.elapsed());
        let pod_name = shared.name.clone();
        shared.update_container(kind, |c| {
            if let RunState::Terminated(t) = &c.state {
                c.last_termination = Some(t.clone());
            }
            c.state = RunState::Waiting {
                reason: "CrashLoopBackOff".into(),
                message: Some(format!("back-off {delay:?} restarting failed container={} pod={pod_name}", c.name)),
            };
        });
        shared.event(
            EventType::Warning,
            "BackOff",
            format!("Back-off restarting failed container {}", container.name),
            field.clone(),
        );
        if wait_or_stop(delay, &mut stop).await {
            return;
        }
    }
}

/// Sleeps `delay`; true if a stop was requested meanwhile.
async fn wait_or_stop(delay: Duration, stop: &mut watch::Receiver<Option<Instant>>) -> bool {
    let stopped = tokio::select! {
        _ = tokio::time::sleep(delay) => false,
        r = stop.wait_for(Option::is_some) => { drop(r); true }
    };
    stopped || stop.borrow().is_some()
}

enum RunOutcome {
    /// The process ran (or failed to start) and ended with this exit code; `true` if stopped on request.
    Ended(i32, bool),
    /// It could not be started at all (image not mapped, bad configuration).
    NotStarted { reason: String, message: String },
}

async fn run_once(
    shared: &Arc<PodShared>,
    kind: Kind,
    container: &Container,
    stop: &mut watch::Receiver<Option<Instant>>,
) -> RunOutcome {
    let ctx = &shared.ctx;
    let pod = shared.pod();
    let image = container.image.clone().unwrap_or_default();
    let field = Some(kind.field_path(&container.name));
    let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
    let map = ctx.image_map();
    let (pod_ip, netns, plans, refs, workdir, termination_file) = {
        let sb = shared.sandbox.lock().expect("sandbox lock");
        let termination_file = sb.dir.join(format!("{}.termination-log", container.name));
        (sb.pod_ip, sb.netns.clone(), sb.plans.clone(), sb.refs.clone(), sb.dir.join("work"), termination_file)
    };
    let pod_ip = pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
    let facts = PodFacts { pod_ip: pod_ip.clone(), host_ip: ctx.node_ip.to_string() };
    let mut base = ctx.base_env.clone();
    base.push(("HOSTNAME".into(), shared.name.clone()));
    let env = match container_env(&pod, container, &facts, &refs, &base) {
        Ok(env) => env,
        Err(message) => {
            shared.event(EventType::Warning, "Failed", format!("Error: {message}"), field.clone());
            return RunOutcome::NotStarted { reason: "CreateContainerConfigError".into(), message };
        }
    };
    let command = expand_all(container.command.as_deref().unwrap_or_default(), &env);
    let args = expand_all(container.args.as_deref().unwrap_or_default(), &env);
    let argv = match resolve(&map, &image, &command, &args) {
        Resolved::Argv(argv) => argv,
        Resolved::UnknownImage(message) => {
            shared.event(
                EventType::Warning,
                "Failed",
                format!("Failed to pull image {image:?}: {message}"),
                field.clone(),
            );
            return RunOutcome::NotStarted { reason: "ErrImagePull".into(), message };
        }
    };
    let mut binds = match volumes::binds(container, &plans) {
        Ok(b) => b,
        Err(message) => return RunOutcome::NotStarted { reason: "CreateContainerConfigError".into(), message },
    };
    // Each run starts with an empty termination message file of its own.
    if let Err(e) = std::fs::write(&termination_file, b"") {
        return RunOutcome::NotStarted { reason: "CreateContainerError".into(), message: e.to_string() };
    }
    let message_path = container.termination_message_path.as_deref().filter(|p| !p.is_empty());
    binds.push(volumes::Bind {
        source: termination_file.clone(),
        target: PathBuf::from(message_path.unwrap_or(termination::DEFAULT_PATH)),
        read_only: false,
    });
    {
        let mut created = ctx.mount_points.lock().expect("mount points lock");
        for b in &binds {
            if let Err(e) = crate::sandbox::ensure_mount_point(&b.source, &b.target, &mut created) {
                return RunOutcome::NotStarted { reason: "CreateContainerError".into(), message: e.to_string() };
            }
        }
    }
    let launch = Launch {
        netns,
        binds,
        hostname: if host_network { None } else { Some(shared.name.clone()) },
        workdir: container.working_dir.clone().filter(|w| !w.is_empty()).map(PathBuf::from).unwrap_or(workdir),
        argv: argv.clone(),
        env,
    };
    let path_var = launch.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).unwrap_or_default();
    let image_id = image_id(&map, &image);
    let now = Timestamp::now();
    let start_error = |message: String| Termination {
        exit_code: 128,
        signal: None,
        reason: "StartError".into(),
        message: Some(message),
        started_at: None,
        finished_at: now,
        container_id: None,
    };
    if find_program(&argv[0], &path_var).is_none() {
        let message = format!("exec: {:?}: executable file not found in $PATH", argv[0]);
        shared.event(EventType::Warning, "Failed", format!("Error: {message}"), field.clone());
        shared.update_container(kind, |c| {
            c.image_id = image_id.clone();
            c.state = RunState::Terminated(start_error(message.clone()));
            c.ready = false;
            c.started = false;
        });
        return RunOutcome::Ended(128, false);
    }
    let mut child = match launch
        .spawn(&ctx.programs, &ctx.config.container_log(&shared.namespace, &shared.name, &container.name))
    {
        Ok(c) => c,
        Err(e) => {
            shared.update_container(kind, |c| c.state = RunState::Terminated(start_error(e.to_string())));
            return RunOutcome::Ended(128, false);
        }
    };
    let pid = child.id().unwrap_or_default();
    let container_id = format!("skiff://{}-{pid}", &shared.uid[..shared.uid.len().min(8)]);
    let started_at = Timestamp::now();
    let startup = probe(container.startup_probe.as_ref(), ProbeRole::Startup, container);
    let liveness = probe(container.liveness_probe.as_ref(), ProbeRole::Liveness, container);
    let readiness = probe(container.readiness_probe.as_ref(), ProbeRole::Readiness, container);
    for (p, what) in [(&startup, "startup"), (&liveness, "liveness"), (&readiness, "readiness")] {
        if let Some(Err(e)) = p {
            warn!(pod = %shared.key(), container = %container.name, "{what} probe ignored: {e}");
        }
    }
    let (startup, liveness, readiness) =
        (startup.and_then(Result::ok), liveness.and_then(Result::ok), readiness.and_then(Result::ok));
    let started_now = startup.is_none();
    let ready_now = started_now && readiness.is_none() && !matches!(kind, Kind::Init(_));
    shared.update_container(kind, |c| {
        c.image_id = image_id.clone();
        c.container_id = Some(container_id.clone());
        c.state = RunState::Running { started_at };
        c.started = started_now;
        c.ready = ready_now;
    });
    info!(pod = %shared.key(), container = %container.name, pid, ?argv, "container started");
    shared.event(EventType::Normal, "Started", format!("Started container {}", container.name), field.clone());

    let target = ProbeTarget { pod_ip, launch, programs: ctx.programs.clone() };
    let probes_cancel = CancellationToken::new();
    let (tx, mut rx) = mpsc::channel::<ProbeEvent>(8);
    let spawn_probe = |spec: &Option<ProbeSpec>| {
        if let Some(spec) = spec {
            tokio::spawn(probe_run::run(spec.clone(), target.clone(), tx.clone(), probes_cancel.clone()));
        }
    };
    if startup.is_some() {
        spawn_probe(&startup);
    } else {
        spawn_probe(&liveness);
        spawn_probe(&readiness);
    }
    let pod_grace = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30).max(0) as u64;
    let end = loop {
        let step = tokio::select! {
            status = child.wait() => Step::Exited(status.unwrap_or_else(|_| ExitStatus::from_raw(255 << 8))),
            Some(ev) = rx.recv() => Step::Probe(ev),
            r = stop.wait_for(Option::is_some) => Step::Stop(r.map(|d| (*d).expect("checked")).unwrap_or_else(|_| Instant::now())),
        };
        match step {
            Step::Exited(status) => break End::Exited(status, None),
            Step::Stop(deadline) => {
                probes_cancel.cancel();
                shared.event(
                    EventType::Normal,
                    "Killing",
                    format!("Stopping container {}", container.name),
                    field.clone(),
                );
                let status = terminate(&mut child, pid, deadline, stop).await;
                break End::Stopped(status);
            }
            Step::Probe(ev) => match action(ev.role, ev.success, readiness.is_some()) {
                None => {}
                Some(ProbeAction::Started { ready }) => {
                    shared.update_container(kind, |c| {
                        c.started = true;
                        c.ready = ready;
                    });
                    spawn_probe(&liveness);
                    spawn_probe(&readiness);
                }
                Some(ProbeAction::SetReady(ready)) => {
                    if !ready {
                        shared.event(
                            EventType::Warning,
                            "Unhealthy",
                            format!("Readiness probe failed: {}", ev.message),
                            field.clone(),
                        );
                    }
                    shared.update_container(kind, |c| c.ready = ready);
                }
                Some(ProbeAction::Kill) => {
                    let role = ev.role;
                    let which = if role == ProbeRole::Startup { "Startup" } else { "Liveness" };
                    let spec = if role == ProbeRole::Startup { &startup } else { &liveness };
                    let grace =
                        spec.as_ref().and_then(|s| s.termination_grace).unwrap_or(Duration::from_secs(pod_grace));
                    let message = format!("{which} probe failed: {}", ev.message);
                    shared.event(EventType::Warning, "Unhealthy", message.clone(), field.clone());
                    shared.event(
                        EventType::Normal,
                        "Killing",
                        format!(
                            "Container {} failed {} probe, will be restarted",
                            container.name,
                            which.to_lowercase()
                        ),
                        field.clone(),
                    );
                    info!(pod = %shared.key(), container = %container.name, "{message}; restarting");
                    probes_cancel.cancel();
                    let status = terminate(&mut child, pid, Instant::now() + grace, stop).await;
                    break End::Exited(status, Some(message));
                }
            },
        }
    };
    probes_cancel.cancel();
    // The process group may hold leftovers; a container ends as a whole.
    signal_group(pid, Signal::SIGKILL);
    let (status, message, stopped) = match end {
        End::Exited(s, m) => (s, m, false),
        End::Stopped(s) => (s, None, true),
    };
    let code = exit_code(status.code(), status.signal());
    info!(pod = %shared.key(), container = %container.name, code, "container exited");
    let log_path = ctx.config.container_log(&shared.namespace, &shared.name, &container.name);
    let written = termination::message(
        &std::fs::read(&termination_file).unwrap_or_default(),
        container.termination_message_policy.as_deref(),
        code != 0,
        &log_tail(&log_path),
    );
    let message = written.or(message);
    let termination = Termination {
        exit_code: code,
        signal: status.signal(),
        reason: terminated_reason(code).into(),
        message,
        started_at: Some(started_at),
        finished_at: Timestamp::now(),
        container_id: Some(container_id),
    };
    shared.update_container(kind, |c| {
        c.state = RunState::Terminated(termination);
        c.ready = false;
        if !matches!(kind, Kind::Init(_)) {
            c.started = false;
        }
    });
    RunOutcome::Ended(code, stopped)
}

fn probe(
    p: Option<&k8s_openapi::api::core::v1::Probe>,
    role: ProbeRole,
    c: &Container,
) -> Option<Result<ProbeSpec, String>> {
    p.map(|p| ProbeSpec::from_k8s(role, p, c))
}

/// SIGTERM to the container's process group, SIGKILL at `deadline` (which a later stop request
/// may move earlier); returns the exit status.
async fn terminate(
    child: &mut Child,
    pgid: u32,
    mut deadline: Instant,
    stop: &mut watch::Receiver<Option<Instant>>,
) -> ExitStatus {
    signal_group(pgid, Signal::SIGTERM);
    loop {
        tokio::select! {
            status = child.wait() => {
                return status.unwrap_or_else(|_| ExitStatus::from_raw(255 << 8));
            }
            _ = tokio::time::sleep_until(deadline) => break,
            r = stop.changed() => {
                if r.is_err() {
                    break;
                }
                if let Some(d) = *stop.borrow() {
                    deadline = deadline.min(d);
                }
            }
        }
    }
    signal_group(pgid, Signal::SIGKILL);
    child.wait().await.unwrap_or_else(|_| ExitStatus::from_raw(9))
}

/// The last [`termination::FALLBACK_BYTES`] of a container's log (nothing when it cannot be read).
fn log_tail(path: &Path) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return Vec::new() };
    let len = file.metadata().map_or(0, |m| m.len());
    let mut tail = Vec::new();
    let from = len.saturating_sub(termination::FALLBACK_BYTES as u64);
    if file.seek(SeekFrom::Start(from)).is_ok() {
        let _ = file.read_to_end(&mut tail);
    }
    tail
}
