//! Pod status (pure): the agent's view of a pod's containers → the API's `PodStatus`
//! (phase, conditions, container statuses), following the kubelet's rules.

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting, ContainerStatus, HostIP,
    PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::restart::RestartPolicy;

/// How a finished run of a container ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Termination {
    /// Exit code (128 + signal when killed).
    pub exit_code: i32,
    /// The signal that killed it, if any.
    pub signal: Option<i32>,
    /// `Completed`, `Error`, `StartError`, ...
    pub reason: String,
    /// Human-readable detail.
    pub message: Option<String>,
    /// When the run started (absent if it never started).
    pub started_at: Option<Timestamp>,
    /// When it ended.
    pub finished_at: Timestamp,
    /// The run's container ID.
    pub container_id: Option<String>,
}

/// The current state of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Not running: being created, in back-off, image not mapped, ...
    Waiting {
        /// `ContainerCreating`, `PodInitializing`, `CrashLoopBackOff`, `ErrImagePull`, ...
        reason: String,
        /// Detail.
        message: Option<String>,
    },
    /// Running since `started_at`.
    Running {
        /// Start time.
        started_at: Timestamp,
    },
    /// Ended and not restarted (yet).
    Terminated(Termination),
}

/// What the agent knows about one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    /// Container name.
    pub name: String,
    /// Image as written in the spec.
    pub image: String,
    /// Reported image ID.
    pub image_id: String,
    /// ID of the current (or last) run.
    pub container_id: Option<String>,
    /// Current state.
    pub state: RunState,
    /// How the previous run ended.
    pub last_termination: Option<Termination>,
    /// Number of restarts.
    pub restart_count: i32,
    /// Readiness (probe verdict, or running when there is no readiness probe).
    pub ready: bool,
    /// Startup probe passed (or running when there is none).
    pub started: bool,
    /// An init container with `restartPolicy: Always` (a native sidecar).
    pub sidecar: bool,
}

impl ContainerRun {
    /// A container that has not been started yet.
    pub fn waiting(name: &str, image: &str, image_id: String, reason: &str, sidecar: bool) -> Self {
        ContainerRun {
            name: name.to_string(),
            image: image.to_string(),
            image_id,
            container_id: None,
            state: RunState::Waiting { reason: reason.to_string(), message: None },
            last_termination: None,
            restart_count: 0,
            ready: false,
            started: false,
            sidecar,
        }
    }

    /// True for an init container that let initialization proceed: exited 0, or (a sidecar)
    /// started.
    pub fn init_done(&self) -> bool {
        if self.sidecar {
            self.started && matches!(self.state, RunState::Running { .. })
        } else {
            matches!(&self.state, RunState::Terminated(t) if t.exit_code == 0)
        }
    }
}

/// What the agent knows about a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRun {
    /// The pod's IP once its sandbox exists.
    pub pod_ip: Option<String>,
    /// The node's IP.
    pub host_ip: String,
    /// The sandbox (network namespace, volumes) is set up.
    pub sandbox_ready: bool,
    /// When the agent accepted the pod.
    pub start_time: Timestamp,
    /// Init containers, in spec order.
    pub init: Vec<ContainerRun>,
    /// App containers, in spec order.
    pub containers: Vec<ContainerRun>,
    /// The pod's restart policy.
    pub restart_policy: RestartPolicy,
    /// A pod-level problem (reason, message), e.g. the sandbox could not be created.
    pub problem: Option<(String, String)>,
    /// Initialization completed once (latched: sidecars stopping later do not undo it).
    pub initialized: bool,
}

impl PodRun {
    /// True once every init container let initialization proceed (or it did so before).
    pub fn is_initialized(&self) -> bool {
        self.initialized || self.init.iter().all(ContainerRun::init_done)
    }
}

/// The pod phase from container states (the kubelet's `getPhase`).
pub fn phase(run: &PodRun) -> &'static str {
    let init_failed_for_good = run.restart_policy == RestartPolicy::Never
        && run.init.iter().any(|c| !c.sidecar && matches!(&c.state, RunState::Terminated(t) if t.exit_code != 0));
    if init_failed_for_good {
        return "Failed";
    }
    if !run.is_initialized() {
        return "Pending";
    }
    let (mut waiting, mut running, mut stopped, mut succeeded) = (0, 0, 0, 0);
    for c in &run.containers {
        match &c.state {
            RunState::Running { .. } => running += 1,
            RunState::Terminated(t) => {
                stopped += 1;
                if t.exit_code == 0 {
                    succeeded += 1;
                }
            }
            RunState::Waiting { .. } if c.last_termination.is_some() => stopped += 1,
            RunState::Waiting { .. } => waiting += 1,
        }
    }
    if waiting > 0 || run.containers.is_empty() {
        "Pending"
    } else if running > 0 {
        "Running"
    } else if stopped > 0 {
        match run.restart_policy {
            RestartPolicy::Always => "Running",
            RestartPolicy::OnFailure if stopped == succeeded => "Succeeded",
            RestartPolicy::OnFailure => "Running",
            RestartPolicy::Never if stopped == succeeded => "Succeeded",
            RestartPolicy::Never => "Failed",
        }
    } else {
        "Pending"
    }
}

/// True once the pod can no longer change (Succeeded or Failed).
pub fn is_terminal(phase: &str) -> bool {
    phase == "Succeeded" || phase == "Failed"
}

fn condition(
    type_: &str,
    ok: bool,
    reason: Option<&str>,
    message: Option<String>,
    previous: Option<&PodStatus>,
    generation: Option<i64>,
    now: Timestamp,
) -> PodCondition {
    let status = if ok { "True" } else { "False" };
    let prev = previous.and_then(|p| p.conditions.as_ref()).and_then(|cs| cs.iter().find(|c| c.type_ == type_));
    let since = match prev {
        Some(p) if p.status == status => p.last_transition_time.clone().unwrap_or(Time(now)),
        _ => Time(now),
    };
    PodCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: if ok { None } else { reason.map(str::to_string) },
        message: if ok { None } else { message },
        last_transition_time: Some(since),
        last_probe_time: None,
        observed_generation: generation,
    }
}

fn names(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(" "))
}

fn to_terminated(t: &Termination) -> ContainerStateTerminated {
    ContainerStateTerminated {
        exit_code: t.exit_code,
        signal: t.signal,
        reason: Some(t.reason.clone()),
        message: t.message.clone(),
        started_at: t.started_at.map(Time),
        finished_at: Some(Time(t.finished_at)),
        container_id: t.container_id.clone(),
    }
}

fn container_status(c: &ContainerRun) -> ContainerStatus {
    let state = match &c.state {
        RunState::Waiting { reason, message } => ContainerState {
            waiting: Some(ContainerStateWaiting { reason: Some(reason.clone()), message: message.clone() }),
            ..Default::default()
        },
        RunState::Running { started_at } => ContainerState {
            running: Some(ContainerStateRunning { started_at: Some(Time(*started_at)) }),
            ..Default::default()
        },
        RunState::Terminated(t) => ContainerState { terminated: Some(to_terminated(t)), ..Default::default() },
    };
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        container_id: c.container_id.clone(),
        ready: c.ready,
        started: Some(c.started),
        restart_count: c.restart_count,
        state: Some(state),
        last_state: Some(
            c.last_termination
                .as_ref()
                .map(|t| ContainerState { terminated: Some(to_terminated(t)), ..Default::default() })
                .unwrap_or_default(),
        ),
        ..Default::default()
    }
}

/// Computes the status to write. `previous` is the status currently in the API (for condition
/// transition times and readiness gates); `readiness_gates` are the spec's gate condition types.
pub fn compute(
    run: &PodRun,
    previous: Option<&PodStatus>,
    readiness_gates: &[String],
    generation: Option<i64>,
    now: Timestamp,
) -> PodStatus {
    let phase = phase(run);
    let terminal = is_terminal(phase);
    let cond = |type_: &str, ok: bool, reason: Option<&str>, message: Option<String>| {
        condition(type_, ok, reason, message, previous, generation, now)
    };

    let init_pending: Vec<String> = run.init.iter().filter(|c| !c.init_done()).map(|c| c.name.clone()).collect();
    let initialized = run.is_initialized() || (terminal && phase == "Succeeded");
    let unready: Vec<String> = run
        .init
        .iter()
        .filter(|c| c.sidecar && !c.ready && !terminal)
        .chain(run.containers.iter().filter(|c| !c.ready))
        .map(|c| c.name.clone())
        .collect();
    let containers_ready = unready.is_empty() && !terminal && !run.containers.is_empty();
    let gate_missing: Vec<String> = readiness_gates
        .iter()
        .filter(|g| {
            !previous
                .and_then(|p| p.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| &c.type_ == *g && c.status == "True"))
        })
        .cloned()
        .collect();
    let ready = containers_ready && gate_missing.is_empty();
    let (cr_reason, cr_message) = if terminal {
        ("PodCompleted", None)
    } else {
        ("ContainersNotReady", Some(format!("containers with unready status: {}", names(unready.iter().cloned()))))
    };
    let ready_reason = if terminal {
        "PodCompleted"
    } else if containers_ready {
        "ReadinessGatesNotReady"
    } else {
        "ContainersNotReady"
    };
    let ready_message = if terminal {
        None
    } else if containers_ready {
        Some(format!(
            "corresponding condition of pod readiness gate {} does not exist or is not True",
            names(gate_missing.into_iter())
        ))
    } else {
        cr_message.clone()
    };

    let mut conditions = vec![
        cond("PodReadyToStartContainers", run.sandbox_ready, None, None),
        cond(
            "Initialized",
            initialized,
            Some("ContainersNotInitialized"),
            Some(format!("containers with incomplete status: {}", names(init_pending.into_iter()))),
        ),
        cond("Ready", ready, Some(ready_reason), ready_message),
        cond("ContainersReady", containers_ready, Some(cr_reason), cr_message),
        cond("PodScheduled", true, None, None),
    ];
    // Keep conditions owned by others (readiness gates, DisruptionTarget, ...).
    if let Some(prev) = previous.and_then(|p| p.conditions.as_ref()) {
        for c in prev {
            if !conditions.iter().any(|x| x.type_ == c.type_) {
                conditions.push(c.clone());
            }
        }
    }

    let ips = |ip: &Option<String>| ip.as_ref().map(|ip| vec![PodIP { ip: ip.clone() }]);
    PodStatus {
        phase: Some(phase.to_string()),
        conditions: Some(conditions),
        host_ip: Some(run.host_ip.clone()),
        host_ips: Some(vec![HostIP { ip: run.host_ip.clone() }]),
        pod_ip: run.pod_ip.clone(),
        pod_ips: ips(&run.pod_ip),
        start_time: Some(Time(run.start_time)),
        init_container_statuses: if run.init.is_empty() {
            None
        } else {
            Some(run.init.iter().map(container_status).collect())
        },
        container_statuses: Some(run.containers.iter().map(container_status).collect()),
        reason: run.problem.as_ref().map(|(r, _)| r.clone()),
        message: run.problem.as_ref().map(|(_, m)| m.clone()),
        observed_generation: generation,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn term(code: i32) -> Termination {
        Termination {
            exit_code: code,
            signal: None,
            reason: crate::restart::terminated_reason(code).into(),
            message: None,
            started_at: Some(ts(1)),
            finished_at: ts(2),
            container_id: None,
        }
    }

    fn c(name: &str, state: RunState, ready: bool) -> ContainerRun {
        ContainerRun {
            state,
            ready,
            started: ready,
            ..ContainerRun::waiting(name, "img", "skiff-local://img".into(), "ContainerCreating", false)
        }
    }

    fn running() -> RunState {
        RunState::Running { started_at: ts(1) }
    }

    fn pod(init: Vec<ContainerRun>, containers: Vec<ContainerRun>, policy: RestartPolicy) -> PodRun {
        PodRun {
            pod_ip: Some("10.244.0.2".into()),
            host_ip: "10.244.0.1".into(),
            sandbox_ready: true,
            start_time: ts(0),
            init,
            containers,
            restart_policy: policy,
            problem: None,
            initialized: false,
        }
    }

    fn cond_of<'a>(s: &'a PodStatus, t: &str) -> &'a PodCondition {
        s.conditions.as_ref().unwrap().iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn phases() {
        use RestartPolicy::*;
        let waiting = || c("a", RunState::Waiting { reason: "ContainerCreating".into(), message: None }, false);
        assert_eq!(phase(&pod(vec![], vec![waiting()], Always)), "Pending");
        assert_eq!(phase(&pod(vec![], vec![c("a", running(), true)], Always)), "Running");
        assert_eq!(phase(&pod(vec![], vec![c("a", RunState::Terminated(term(0)), false)], Never)), "Succeeded");
        assert_eq!(phase(&pod(vec![], vec![c("a", RunState::Terminated(term(1)), false)], Never)), "Failed");
        assert_eq!(phase(&pod(vec![], vec![c("a", RunState::Terminated(term(1)), false)], OnFailure)), "Running");
        assert_eq!(phase(&pod(vec![], vec![c("a", RunState::Terminated(term(0)), false)], OnFailure)), "Succeeded");
        assert_eq!(phase(&pod(vec![], vec![c("a", RunState::Terminated(term(0)), false)], Always)), "Running");
        let mut backoff = c("a", RunState::Waiting { reason: "CrashLoopBackOff".into(), message: None }, false);
        backoff.last_termination = Some(term(1));
        assert_eq!(phase(&pod(vec![], vec![backoff], Always)), "Running", "restarting counts as stopped");
        // Init containers gate everything.
        let init_running = c("init", running(), false);
        assert_eq!(phase(&pod(vec![init_running], vec![waiting()], Always)), "Pending");
        let init_failed = c("init", RunState::Terminated(term(2)), false);
        assert_eq!(phase(&pod(vec![init_failed.clone()], vec![waiting()], Never)), "Failed");
        assert_eq!(phase(&pod(vec![init_failed], vec![waiting()], Always)), "Pending");
        let init_ok = c("init", RunState::Terminated(term(0)), false);
        assert_eq!(phase(&pod(vec![init_ok], vec![c("a", running(), false)], Always)), "Running");
        let mut sidecar = c("side", running(), true);
        sidecar.sidecar = true;
        assert_eq!(phase(&pod(vec![sidecar], vec![c("a", running(), true)], Always)), "Running");
    }

    #[test]
    fn conditions_follow_readiness_and_keep_transition_times() {
        let p = pod(vec![], vec![c("a", running(), false), c("b", running(), true)], RestartPolicy::Always);
        let s1 = compute(&p, None, &[], Some(1), ts(10));
        assert_eq!(s1.phase.as_deref(), Some("Running"));
        let ready = cond_of(&s1, "Ready");
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(ready.message.as_deref(), Some("containers with unready status: [a]"));
        assert_eq!(cond_of(&s1, "Initialized").status, "True");
        assert_eq!(cond_of(&s1, "PodScheduled").status, "True");
        assert_eq!(s1.pod_ips.as_ref().unwrap()[0].ip, "10.244.0.2");

        // Same statuses later: transition times stay.
        let s2 = compute(&p, Some(&s1), &[], Some(1), ts(20));
        assert_eq!(cond_of(&s2, "Ready").last_transition_time, Some(Time(ts(10))));
        assert_eq!(s1, s2);

        // Both ready: Ready flips, with a new transition time.
        let p3 = pod(vec![], vec![c("a", running(), true), c("b", running(), true)], RestartPolicy::Always);
        let s3 = compute(&p3, Some(&s2), &[], Some(1), ts(30));
        let r3 = cond_of(&s3, "Ready");
        assert_eq!((r3.status.as_str(), r3.last_transition_time.clone()), ("True", Some(Time(ts(30)))));
        assert_eq!(cond_of(&s3, "ContainersReady").status, "True");
        assert_eq!(cond_of(&s3, "Initialized").last_transition_time, Some(Time(ts(10))));
    }

    #[test]
    fn readiness_gates_and_foreign_conditions() {
        let p = pod(vec![], vec![c("a", running(), true)], RestartPolicy::Always);
        let gates = vec!["example.com/gate".to_string()];
        let s = compute(&p, None, &gates, None, ts(1));
        assert_eq!(cond_of(&s, "Ready").status, "False");
        assert_eq!(cond_of(&s, "Ready").reason.as_deref(), Some("ReadinessGatesNotReady"));
        let mut prev = s.clone();
        prev.conditions.as_mut().unwrap().push(PodCondition {
            type_: "example.com/gate".into(),
            status: "True".into(),
            ..Default::default()
        });
        let s2 = compute(&p, Some(&prev), &gates, None, ts(2));
        assert_eq!(cond_of(&s2, "Ready").status, "True");
        assert_eq!(cond_of(&s2, "example.com/gate").status, "True", "kept");
    }

    #[test]
    fn container_statuses_and_init() {
        let mut a =
            c("a", RunState::Waiting { reason: "CrashLoopBackOff".into(), message: Some("back-off".into()) }, false);
        a.last_termination = Some(term(3));
        a.restart_count = 2;
        let init = c("init", RunState::Terminated(term(0)), false);
        let s = compute(&pod(vec![init], vec![a], RestartPolicy::Always), None, &[], None, ts(5));
        let cs = &s.container_statuses.as_ref().unwrap()[0];
        assert_eq!(cs.restart_count, 2);
        assert_eq!(cs.state.as_ref().unwrap().waiting.as_ref().unwrap().reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(cs.last_state.as_ref().unwrap().terminated.as_ref().unwrap().exit_code, 3);
        assert_eq!(cs.image_id, "skiff-local://img");
        let is = &s.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!(is.state.as_ref().unwrap().terminated.as_ref().unwrap().reason.as_deref(), Some("Completed"));

        let pending = compute(
            &pod(
                vec![c("init", running(), false)],
                vec![c("a", RunState::Waiting { reason: "PodInitializing".into(), message: None }, false)],
                RestartPolicy::Always,
            ),
            None,
            &[],
            None,
            ts(5),
        );
        assert_eq!(pending.phase.as_deref(), Some("Pending"));
        assert_eq!(
            cond_of(&pending, "Initialized").message.as_deref(),
            Some("containers with incomplete status: [init]")
        );
    }

    #[test]
    fn sidecars_stopping_after_initialization_do_not_undo_it() {
        let mut sidecar = c("side", RunState::Terminated(term(143)), false);
        sidecar.sidecar = true;
        let mut p = pod(vec![sidecar], vec![c("a", RunState::Terminated(term(0)), false)], RestartPolicy::OnFailure);
        assert_eq!(phase(&p), "Pending", "never initialized");
        p.initialized = true;
        assert_eq!(phase(&p), "Succeeded");
        let s = compute(&p, None, &[], None, ts(1));
        assert_eq!(cond_of(&s, "Initialized").status, "True");
    }

    #[test]
    fn terminal_pods_are_not_ready() {
        let s = compute(
            &pod(vec![], vec![c("a", RunState::Terminated(term(0)), false)], RestartPolicy::Never),
            None,
            &[],
            None,
            ts(1),
        );
        assert_eq!(s.phase.as_deref(), Some("Succeeded"));
        assert_eq!(cond_of(&s, "Ready").reason.as_deref(), Some("PodCompleted"));
        assert!(is_terminal("Failed") && !is_terminal("Running"));
    }
}
