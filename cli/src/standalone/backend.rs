//! Local replicas: child processes on loopback ports ([`super::replica`]: `skiff-server`, or a
//! container behind a queue-proxy). One supervisor task per revision converges the replicas to the
//! desired count, publishes the ready ones to the endpoint registry (readiness =
//! `/v2/health/ready`, i.e. every model loaded, or the queue-proxy's `/healthz`, i.e. the
//! container is ready) and keeps probing them every second ([`skiff_dataplane::readiness`]: one
//! that fails 3 probes in a row, frozen or wedged, gets no new request until it passes again),
//! drains on scale-down with SIGTERM, and replaces (and counts) replicas that exit on their own,
//! except once `skiff up` is shutting down: then a replica that exits (Ctrl-C reaches the whole
//! process group) was asked to.
//!
//! A model at a store is fetched into the model cache before the first replica starts
//! ([`super::models`]; every later start reads the same folder), and held while any replica runs,
//! so it is never evicted under one; a failed fetch is a failure as below. Removing the revision
//! (its manifest deleted, or replaced and the old revision gone) aborts a fetch in flight, which
//! closes its download.
//!
//! A model server's models are checked before each start ([`ReplicaSpec::preflight`]); a refused
//! model, or a replica that exits on its own, is a failure: its reason ([`super::failure`]:
//! `ModelLoadFailed` with the server's termination message or the end of its log) goes to the
//! status and the log at warn, and the next start waits as the kubelet's CrashLoopBackOff does
//! ([`super::restart`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use skiff_dataplane::endpoints::{Replica, RevisionEndpoints};
use skiff_dataplane::failing::{Cause, Failing};
use skiff_dataplane::readiness::{self, ReadinessProbe};
use skiff_dataplane::{ReplicaBackend, RevisionKey};
use skiff_fetch::Lease;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

use super::failure::{self, Exit, LOG_TAIL_BYTES};
use super::logs::ReplicaLogs;
use super::models::{FetchStatus, ModelStore};
use super::replica::{Launched, Programs, ReplicaSpec, terminate, wait};
use super::restart::{BackOff, CrashLoop};
use super::status::{FailureInfo, ReplicaHealth};

/// A revision's replica counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaCounts {
    /// Asked for.
    pub desired: u32,
    /// Ready now.
    pub ready: u32,
    /// Replicas that exited without being asked to.
    pub restarts: u32,
    /// Spawn to ready of the latest replica, in milliseconds.
    pub last_start_ms: Option<u64>,
    /// Of that: spawn until the process listened (process start), in milliseconds.
    pub last_spawn_ms: Option<u64>,
    /// The latest fetch of its model from a store.
    pub fetched: Option<FetchStatus>,
    /// Starts, the latest failure and the back-off.
    pub health: ReplicaHealth,
}

struct Handle {
    desired: watch::Sender<u32>,
    counts: Arc<Counts>,
    supervisor: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Counts {
    ready: AtomicU32,
    restarts: AtomicU32,
    last_start_ms: AtomicU32,
    last_spawn_ms: AtomicU32,
    spawns: AtomicU32,
    /// The latest failure, and the wait before the next start while backing off.
    failing: Mutex<(Option<FailureInfo>, Option<Duration>)>,
    /// The latest fetch of the model.
    fetched: Mutex<Option<FetchStatus>>,
}

/// The standalone [`ReplicaBackend`].
pub struct LocalProcesses {
    programs: Programs,
    models: Arc<ModelStore>,
    backoff: BackOff,
    /// Where the replicas write their termination messages.
    messages: PathBuf,
    revisions: Mutex<HashMap<RevisionKey, Handle>>,
    draining: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Set when `skiff up` shuts down: no replica is started or replaced any more.
    shutting_down: Arc<AtomicBool>,
    /// The running replicas' output.
    pub logs: Arc<ReplicaLogs>,
}

impl LocalProcesses {
    /// Replicas run `programs` on models in `models`, and restart after failures backing off as
    /// `backoff` says.
    pub fn new(programs: Programs, models: Arc<ModelStore>, backoff: BackOff) -> Arc<LocalProcesses> {
        Arc::new(LocalProcesses {
            programs,
            models,
            backoff,
            messages: std::env::temp_dir().join(format!("skiff-up-{}", std::process::id())),
            revisions: Mutex::new(HashMap::new()),
            draining: Mutex::new(Vec::new()),
            shutting_down: Arc::new(AtomicBool::new(false)),
            logs: Arc::new(ReplicaLogs::default()),
        })
    }

    /// From now on no replica is started or replaced, and one that exits is not counted as a
    /// restart: `skiff up` is shutting down (and Ctrl-C has signalled the replicas too).
    pub fn shut_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// Starts supervising `revision` at zero replicas.
    pub fn add(&self, revision: &RevisionKey, spec: ReplicaSpec, endpoints: Arc<RevisionEndpoints>) {
        let (desired, wanted) = watch::channel(0);
        let counts = Arc::new(Counts::default());
        let supervisor = Supervisor {
            key: revision.clone(),
            logs: self.logs.clone(),
            revision: revision.to_string(),
            spec,
            programs: self.programs.clone(),
            models: self.models.clone(),
            endpoints,
            counts: counts.clone(),
            shutting_down: self.shutting_down.clone(),
            backoff: self.backoff,
            messages: self.messages.clone(),
        };
        let supervisor = tokio::spawn(supervisor.run(wanted));
        self.lock().insert(revision.clone(), Handle { desired, counts, supervisor });
    }

    /// Stops supervising `revision`; its replicas drain and exit in the background.
    pub fn remove(&self, revision: &RevisionKey) {
        if let Some(handle) = self.lock().remove(revision) {
            self.draining.lock().expect("replica backend lock").push(handle.supervisor);
        }
    }

    /// Waits until every removed revision's replicas have exited, then removes their
    /// termination messages' folder.
    pub async fn drained(&self) {
        let supervisors = std::mem::take(&mut *self.draining.lock().expect("replica backend lock"));
        for supervisor in supervisors {
            let _ = supervisor.await;
        }
        let _ = std::fs::remove_dir_all(&self.messages);
    }

    /// The counts of `revision`.
    pub fn counts(&self, revision: &RevisionKey) -> Option<ReplicaCounts> {
        self.lock().get(revision).map(|h| ReplicaCounts {
            desired: *h.desired.borrow(),
            ready: h.counts.ready.load(Ordering::Acquire),
            restarts: h.counts.restarts.load(Ordering::Acquire),
            last_start_ms: millis(&h.counts.last_start_ms),
            last_spawn_ms: millis(&h.counts.last_spawn_ms),
            fetched: h.counts.fetched.lock().expect("replica counts lock").clone(),
            health: h.counts.health(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RevisionKey, Handle>> {
        self.revisions.lock().expect("replica backend lock")
    }
}

impl Counts {
    fn health(&self) -> ReplicaHealth {
        let (failure, back_off) = self.failing.lock().expect("replica counts lock").clone();
        ReplicaHealth {
            spawns: self.spawns.load(Ordering::Acquire),
            last_failure_info: failure,
            back_off_ms: back_off.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    fn set_failing(&self, failure: Option<FailureInfo>, back_off: Option<Duration>) {
        *self.failing.lock().expect("replica counts lock") = (failure, back_off);
    }

    fn set_back_off(&self, back_off: Option<Duration>) {
        self.failing.lock().expect("replica counts lock").1 = back_off;
    }
}

fn millis(value: &AtomicU32) -> Option<u64> {
    match value.load(Ordering::Acquire) {
        0 => None,
        ms => Some(u64::from(ms)),
    }
}

/// A duration in whole milliseconds for the counters: at least 1 (0 means none yet), at most
/// `u32::MAX` (49 days), never wrapped.
fn elapsed_ms(duration: Duration) -> u32 {
    u32::try_from(duration.as_millis().max(1)).unwrap_or(u32::MAX)
}

impl ReplicaBackend for LocalProcesses {
    fn scale(&self, revision: &RevisionKey, replicas: u32) {
        if let Some(handle) = self.lock().get(revision) {
            handle.desired.send_if_modified(|n| std::mem::replace(n, replicas) != replicas);
        }
    }

    fn ready_replicas(&self, revision: &RevisionKey) -> u32 {
        self.lock().get(revision).map_or(0, |h| h.counts.ready.load(Ordering::Acquire))
    }
}

enum Event {
    Fetched(Result<Lease, (String, Cause)>),
    Ready { id: u64, addr: SocketAddr, started: Instant, listening: Instant, path: &'static str },
    Exited { id: u64, exit: Exit },
}

/// What an event meant for the restart back-off.
enum Outcome {
    Ready,
    /// A replica failed after running this long.
    Crashed(Duration, FailureInfo),
    Other,
}

struct Child {
    id: u64,
    pid: Option<u32>,
    replica: Option<Arc<Replica>>,
    stopping: bool,
    started: Instant,
    /// It has been ready.
    ready: bool,
}

struct Supervisor {
    key: RevisionKey,
    logs: Arc<ReplicaLogs>,
    revision: String,
    spec: ReplicaSpec,
    programs: Programs,
    models: Arc<ModelStore>,
    endpoints: Arc<RevisionEndpoints>,
    counts: Arc<Counts>,
    shutting_down: Arc<AtomicBool>,
    backoff: BackOff,
    messages: PathBuf,
}

impl Supervisor {
    async fn run(self, mut wanted: watch::Receiver<u32>) {
        let (events, mut inbox) = mpsc::unbounded_channel();
        let mut children: Vec<Child> = Vec::new();
        let mut next_id = 0;
        let mut removed = false;
        let mut crash_loop = CrashLoop::default();
        let mut hold_until: Option<tokio::time::Instant> = None;
        // The fetched model's folder, held while a replica may use it; a fetch in flight,
        // aborted (its download closed) once the revision is removed.
        let mut model: Option<Lease> = None;
        let mut fetching: Option<tokio::task::AbortHandle> = None;
        loop {
            let desired = if removed { 0 } else { *wanted.borrow_and_update() as usize };
            let live = children.iter().filter(|c| !c.stopping).count();
            let shutting_down = self.shutting_down.load(Ordering::Acquire);
            if !shutting_down && live < desired && hold_until.is_none_or(|t| t <= tokio::time::Instant::now()) {
                hold_until = None;
                match (self.spec.fetches(), &model) {
                    (Some(uri), None) => {
                        if fetching.is_none() {
                            let (models, uri, events) = (self.models.clone(), uri.to_owned(), events.clone());
                            let fetch = tokio::spawn(async move {
                                let _ = events.send(Event::Fetched(models.get(&uri).await));
                            });
                            fetching = Some(fetch.abort_handle());
                        }
                    }
                    (_, lease) => {
                        let spec =
                            lease.as_ref().map_or_else(|| self.spec.clone(), |l| self.spec.with_model_dir(&l.dir));
                        // A fetched model's refusal names where it came from, not only the cache's folder.
                        let checked = spec.preflight().map_err(|m| match lease {
                            Some(lease) => format!("{}: {m}", lease.report.uri),
                            None => m,
                        });
                        match checked {
                            Ok(()) => {
                                self.counts.set_back_off(None);
                                self.endpoints.set_failing(None);
                                for _ in live..desired {
                                    next_id += 1;
                                    children.push(self.spawn(&spec, next_id, events.clone()));
                                }
                            }
                            Err(message) => {
                                let wait = crash_loop.failed(&self.backoff, Duration::ZERO);
                                self.failed(failure::refused(message), wait, Cause::Refused);
                                hold_until = Some(tokio::time::Instant::now() + wait);
                            }
                        }
                    }
                }
            }
            for _ in desired..live {
                self.stop_one(&mut children);
            }
            if children.is_empty() && desired == 0 {
                // Nothing runs on the model: the cache may evict it (the next start looks again).
                model = None;
            }
            if removed {
                // Nothing will use the model: the download stops now, not at the fetch's bound.
                if let Some(fetch) = fetching.take() {
                    fetch.abort();
                    tracing::info!(revision = %self.revision, "model fetch stopped: the revision was removed");
                }
                if children.is_empty() {
                    return;
                }
            }
            let hold = hold_until.unwrap_or_else(tokio::time::Instant::now);
            tokio::select! {
                changed = wanted.changed(), if !removed => removed = changed.is_err(),
                Some(event) = inbox.recv() => match event {
                    Event::Fetched(fetched) => {
                        fetching = None;
                        match fetched {
                            Ok(lease) => {
                                tracing::info!(revision = %self.revision, uri = %lease.report.uri,
                                    downloaded = lease.report.downloaded, cached = lease.report.cached,
                                    seconds = lease.report.seconds, "model fetched");
                                *self.counts.fetched.lock().expect("replica counts lock") = Some(FetchStatus::from(&lease.report));
                                model = Some(lease);
                            }
                            Err((message, cause)) => {
                                let wait = crash_loop.failed(&self.backoff, Duration::ZERO);
                                self.failed(failure::refused(message), wait, cause);
                                hold_until = Some(tokio::time::Instant::now() + wait);
                            }
                        }
                    }
                    event => match self.handle(event, &mut children) {
                        Outcome::Crashed(ran, failure) => {
                            let wait = crash_loop.failed(&self.backoff, ran);
                            self.failed(failure, wait, Cause::Exited);
                            self.counts.restarts.fetch_add(1, Ordering::AcqRel);
                            hold_until = Some(tokio::time::Instant::now() + wait);
                        }
                        Outcome::Ready | Outcome::Other => {}
                    },
                },
                () = tokio::time::sleep_until(hold), if hold_until.is_some() => {}
            }
        }
    }

    fn handle(&self, event: Event, children: &mut Vec<Child>) -> Outcome {
        match event {
            Event::Ready { id, addr, started, listening, path } => {
                let Some(child) = children.iter_mut().find(|c| c.id == id && !c.stopping) else {
                    return Outcome::Other;
                };
                let replica = self.endpoints.replica(addr);
                tokio::spawn(readiness::watch(Arc::downgrade(&replica), path, ReadinessProbe::default()));
                child.replica = Some(replica);
                child.ready = true;
                self.counts.set_failing(None, None);
                self.endpoints.set_failing(None);
                let ms = elapsed_ms(started.elapsed());
                self.counts.last_start_ms.store(ms, Ordering::Release);
                let spawn_ms = elapsed_ms(listening.duration_since(started));
                self.counts.last_spawn_ms.store(spawn_ms, Ordering::Release);
                tracing::info!(revision = %self.revision, %addr, millis = ms, "replica ready");
                self.publish(children);
                Outcome::Ready
            }
            Event::Fetched(_) => Outcome::Other,
            Event::Exited { id, mut exit } => {
                let Some(at) = children.iter().position(|c| c.id == id) else { return Outcome::Other };
                let child = children.remove(at);
                self.publish(children);
                if child.stopping {
                    return Outcome::Other;
                }
                if self.shutting_down.load(Ordering::Acquire) {
                    tracing::debug!(revision = %self.revision, replica = id, "replica exited during shutdown");
                    return Outcome::Other;
                }
                exit.was_ready = child.ready;
                Outcome::Crashed(child.started.elapsed(), failure::exited(&exit))
            }
        }
    }

    /// Records why a replica failed (or was refused) and the wait before the next start (none
    /// after the first failure in a row, which starts again at once); says it at warn. While its
    /// `cause` is one a retry will not fix, the activator answers the revision's requests at once
    /// with the failure rather than holding them.
    fn failed(&self, failure: FailureInfo, wait: Duration, cause: Cause) {
        tracing::warn!(
            revision = %self.revision,
            reason = %failure.reason,
            message = %failure.message,
            exit_code = ?failure.exit_code,
            "replica failed"
        );
        // The status says it first: a request answered with the failure finds it there too.
        let failing = Failing { reason: failure.reason.clone(), message: failure.message.clone() };
        self.counts.set_failing(Some(failure), (!wait.is_zero()).then_some(wait));
        self.endpoints.set_failing((!cause.retry_helps()).then_some(failing));
    }

    fn publish(&self, children: &[Child]) {
        let ready: Vec<Arc<Replica>> =
            children.iter().filter(|c| !c.stopping).filter_map(|c| c.replica.clone()).collect();
        self.counts.ready.store(u32::try_from(ready.len()).unwrap_or(u32::MAX), Ordering::Release);
        self.endpoints.set_ready(ready);
    }

    /// Takes the replica doing least out of service (not yet ready first): unpublishes it, waits until
    /// the router and activator hold no slot on it (so nothing is sent over a connection it is about
    /// to close), then SIGTERMs its front process, which drains what it still has.
    fn stop_one(&self, children: &mut [Child]) {
        let victim = children
            .iter_mut()
            .filter(|c| !c.stopping)
            .min_by_key(|c| c.replica.as_ref().map_or(0, |r| r.in_flight() + 1));
        if let Some(child) = victim {
            child.stopping = true;
            if let Some(pid) = child.pid {
                tokio::spawn(terminate_when_unused(pid, child.replica.clone()));
            }
        }
        self.publish(children);
    }

    fn spawn(&self, spec: &ReplicaSpec, id: u64, events: mpsc::UnboundedSender<Event>) -> Child {
        let started = Instant::now();
        let revision = self.revision.clone();
        let (logs, key) = (self.logs.clone(), self.key.clone());
        let log = logs.start(&key, id);
        let message_path = self.messages.join(format!("{}_{}-{id}", key.namespace, key.name));
        let _ = std::fs::create_dir_all(&self.messages);
        let _ = std::fs::remove_file(&message_path);
        self.counts.spawns.fetch_add(1, Ordering::AcqRel);
        let launched = match spec.launch(&self.programs, &log, &message_path) {
            Ok(launched) => launched,
            Err(e) => {
                tracing::error!(%revision, error = %e, programs = ?self.programs, "cannot start a replica");
                logs.finish(&key, id);
                let exit =
                    Exit { termination_message: Some(format!("cannot start the replica: {e}")), ..Exit::default() };
                let _ = events.send(Event::Exited { id, exit });
                return Child { id, pid: None, replica: None, stopping: false, started, ready: false };
            }
        };
        let Launched { mut front, containers, model_server, ready_path, front_is_log } = launched;
        let pid = front.id();
        let stderr = front.stderr.take().expect("stderr is piped");
        let output = log.clone();
        tokio::spawn(async move {
            let reader = tokio::spawn(async move {
                let mut lines = BufReader::new(stderr).lines();
                let mut announced = false;
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(%revision, replica = id, "{line}");
                    if !announced && let Some(addr) = listening_address(&line) {
                        announced = true;
                        let listening = Instant::now();
                        let events = events.clone();
                        tokio::spawn(async move {
                            let limit = Duration::from_secs(120);
                            let model_ready = async {
                                match model_server {
                                    Some(server) => wait_ready(server, "/v2/health/ready", limit).await,
                                    None => true,
                                }
                            };
                            if wait_ready(addr, ready_path, limit).await && model_ready.await {
                                let _ = events.send(Event::Ready { id, addr, started, listening, path: ready_path });
                            }
                        });
                    }
                    if front_is_log {
                        log.push(line);
                    }
                }
                events
            });
            let status = wait(front, containers).await;
            let events = reader.await;
            let mut exit = Exit::of(status);
            exit.termination_message = std::fs::read_to_string(&message_path).ok();
            let _ = std::fs::remove_file(&message_path);
            exit.log_tail = output.tail(LOG_TAIL_BYTES);
            logs.finish(&key, id);
            if let Ok(events) = events {
                let _ = events.send(Event::Exited { id, exit });
            }
        });
        Child { id, pid, replica: None, stopping: false, started, ready: false }
    }
}

/// SIGTERMs `pid` once no request holds a slot on its replica (at most 30 s).
async fn terminate_when_unused(pid: u32, replica: Option<Arc<Replica>>) {
    if let Some(replica) = replica {
        let deadline = Instant::now() + Duration::from_secs(30);
        while replica.in_flight() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    terminate(pid).await;
}

/// The address in the `listening` log line of skiff-server or the queue-proxy.
fn listening_address(line: &str) -> Option<SocketAddr> {
    let log: serde_json::Value = serde_json::from_str(line).ok()?;
    (log["fields"]["message"] == "listening").then(|| log["fields"]["address"].as_str()?.parse().ok())?
}

/// Polls `path` every 2 ms until it answers 200, up to `limit`.
async fn wait_ready(addr: SocketAddr, path: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready_once(addr, path).await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    false
}

async fn ready_once(addr: SocketAddr, path: &str) -> bool {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else { return false };
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let mut head = [0u8; 12];
    stream.write_all(request.as_bytes()).await.is_ok()
        && stream.read_exact(&mut head).await.is_ok()
        && &head[9..12] == b"200"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_the_counters_saturate() {
        assert_eq!(elapsed_ms(Duration::ZERO), 1);
        assert_eq!(elapsed_ms(Duration::from_millis(1500)), 1500);
        assert_eq!(elapsed_ms(Duration::from_secs(u64::MAX)), u32::MAX);
    }

    #[test]
    fn reads_the_address_from_the_listening_line() {
        let line = r#"{"timestamp":"t","level":"INFO","fields":{"message":"listening","address":"127.0.0.1:4321"},"target":"skiff_server"}"#;
        assert_eq!(listening_address(line), Some("127.0.0.1:4321".parse().unwrap()));
        assert_eq!(listening_address(r#"{"fields":{"message":"model loaded"}}"#), None);
        assert_eq!(listening_address("not json"), None);
    }
}
