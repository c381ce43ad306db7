//! The decision on the candidate's own clock, and the shell against a fake Lease API under tokio's
//! paused clock: a leader whose calls hang steps down before a candidate takes over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kube::core::response::StatusDetails;

use super::*;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn wall(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn held_by(holder: &str, version: &str, renewed: Timestamp) -> Record {
    Record {
        version: Some(version.into()),
        spec: LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(renewed)),
            ..LeaseSpec::default()
        },
    }
}

#[test]
fn the_simple_decisions() {
    let t0 = Instant::now();
    let mut o = Observer::default();
    assert_eq!(o.decide(None, "a", t0), Decision::Create);
    assert_eq!(o.decide(Some(&held_by("a", "1", wall(0))), "a", t0), Decision::Renew);
    assert_eq!(o.decide(Some(&Record::default()), "a", t0), Decision::Take, "released");
}

#[test]
fn a_held_lease_expires_after_a_whole_lease_unchanged_on_the_candidates_clock() {
    let t0 = Instant::now();
    // renewTime is an hour in the past by our wall clock: not compared, so not expired.
    let stale_looking = held_by("b", "7", wall(-3600));
    let mut o = Observer::default();
    assert_eq!(o.decide(Some(&stale_looking), "a", t0), Decision::Wait, "first seen now");
    assert_eq!(o.decide(Some(&stale_looking), "a", t0 + secs(14)), Decision::Wait);
    assert_eq!(o.decide(Some(&stale_looking), "a", t0 + secs(15)), Decision::Take, "unchanged for 15 s");

    // renewTime an hour ahead of our wall clock: expires all the same once it stops changing.
    let ahead = held_by("b", "8", wall(3600));
    let mut o = Observer::default();
    assert_eq!(o.decide(Some(&ahead), "a", t0), Decision::Wait);
    assert_eq!(o.decide(Some(&ahead), "a", t0 + secs(15)), Decision::Take);
}

#[test]
fn every_change_of_the_lease_restarts_the_count() {
    let t0 = Instant::now();
    let mut o = Observer::default();
    assert_eq!(o.decide(Some(&held_by("b", "1", wall(0))), "a", t0), Decision::Wait);
    // Renewed (new renewTime and resourceVersion) at 10 s.
    assert_eq!(o.decide(Some(&held_by("b", "2", wall(10))), "a", t0 + secs(10)), Decision::Wait);
    assert_eq!(o.decide(Some(&held_by("b", "2", wall(10))), "a", t0 + secs(20)), Decision::Wait);
    // A write that leaves the spec alone still counts (the resourceVersion moved).
    assert_eq!(o.decide(Some(&held_by("b", "3", wall(10))), "a", t0 + secs(24)), Decision::Wait);
    assert_eq!(o.decide(Some(&held_by("b", "3", wall(10))), "a", t0 + secs(38)), Decision::Wait);
    assert_eq!(o.decide(Some(&held_by("b", "3", wall(10))), "a", t0 + secs(39)), Decision::Take);
}

#[test]
fn taking_counts_a_transition_and_renewing_keeps_the_acquire_time() {
    let old = held_by("b", "1", wall(0)).spec;
    let taken = next_spec(Some(&old), Decision::Take, "a", wall(20), secs(15));
    assert_eq!(taken.holder_identity.as_deref(), Some("a"));
    assert_eq!(taken.lease_transitions, Some(1));
    assert_eq!(taken.acquire_time, Some(MicroTime(wall(20))));
    let renewed = next_spec(Some(&taken), Decision::Renew, "a", wall(25), secs(15));
    assert_eq!(renewed.acquire_time, Some(MicroTime(wall(20))));
    assert_eq!(renewed.renew_time, Some(MicroTime(wall(25))));
    assert_eq!(renewed.lease_transitions, Some(1));
    let worn = LeaseSpec { lease_transitions: Some(i32::MAX), ..old };
    let taken = next_spec(Some(&worn), Decision::Take, "a", wall(20), secs(15));
    assert_eq!(taken.lease_transitions, Some(i32::MAX), "saturates, never wraps");
}

fn api_error(code: u16, kind: &str) -> Error {
    let details = StatusDetails {
        name: "x".into(),
        group: String::new(),
        kind: kind.into(),
        uid: String::new(),
        causes: Vec::new(),
        retry_after_seconds: 0,
    };
    Error::Kube(kube::Error::Api(
        kube::core::Status::failure("x", "NotFound").with_code(code).with_details(details).boxed(),
    ))
}

#[test]
fn a_missing_namespace_is_told_apart() {
    assert!(missing_namespace(&api_error(404, "namespaces")));
    assert!(!missing_namespace(&api_error(404, "leases")));
    assert!(!missing_namespace(&api_error(409, "namespaces")));
}

/// The API server's copy of the Lease, shared by the fakes of several replicas.
#[derive(Default)]
struct Store {
    lease: Mutex<Option<Lease>>,
    version: AtomicU64,
}

/// One replica's view of the API: it can hang (every call pends forever) or fail.
struct FakeApi {
    store: Arc<Store>,
    hang: AtomicBool,
    missing_namespace: bool,
}

impl FakeApi {
    fn new(store: &Arc<Store>) -> Arc<FakeApi> {
        Arc::new(FakeApi { store: store.clone(), hang: AtomicBool::new(false), missing_namespace: false })
    }

    async fn gate(&self) {
        if self.hang.load(Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
    }

    fn stamp(&self, mut lease: Lease) -> Lease {
        let version = self.store.version.fetch_add(1, Ordering::SeqCst) + 1;
        lease.metadata.resource_version = Some(version.to_string());
        lease
    }
}

impl LeaseApi for Arc<FakeApi> {
    async fn get(&self, _name: &str) -> Result<Option<Lease>> {
        self.gate().await;
        Ok(self.store.lease.lock().unwrap().clone())
    }

    async fn create(&self, lease: &Lease) -> Result<()> {
        self.gate().await;
        if self.missing_namespace {
            return Err(api_error(404, "namespaces"));
        }
        let mut stored = self.store.lease.lock().unwrap();
        if stored.is_some() {
            return Err(api_error(409, "leases"));
        }
        *stored = Some(self.stamp(lease.clone()));
        Ok(())
    }

    async fn replace(&self, lease: &Lease) -> Result<()> {
        self.gate().await;
        let mut stored = self.store.lease.lock().unwrap();
        let current = stored.as_ref().and_then(|l| l.metadata.resource_version.clone());
        if current != lease.metadata.resource_version {
            return Err(api_error(409, "leases"));
        }
        *stored = Some(self.stamp(lease.clone()));
        Ok(())
    }
}

fn timing() -> Timing {
    Timing { lease: secs(15), renew_deadline: secs(10), retry: secs(2) }
}

fn holder(store: &Store) -> Option<String> {
    store.lease.lock().unwrap().as_ref()?.spec.as_ref()?.holder_identity.clone()
}

#[tokio::test(start_paused = true)]
async fn a_leader_whose_calls_hang_steps_down_before_a_candidate_takes_over() {
    let store = Arc::new(Store::default());
    let (api_a, api_b) = (FakeApi::new(&store), FakeApi::new(&store));
    let a = Arc::new(Elector::new(api_a.clone(), "skiff-system", "lease", "a".into(), timing()));
    let b = Elector::new(api_b, "skiff-system", "lease", "b".into(), timing());
    let t0 = Instant::now();
    let term = a.acquire(&CancellationToken::new()).await.expect("a leads");
    let leader = a.clone();
    let keeping = tokio::spawn(async move { (leader.keep(term).await, Instant::now()) });
    let candidate = tokio::spawn(async move { (b.acquire(&CancellationToken::new()).await, Instant::now()) });

    // a renews at 2, 4 and 6 s; from 7 s on, its API calls hang.
    tokio::time::sleep(secs(7)).await;
    api_a.hang.store(true, Ordering::SeqCst);
    let (lost, stepped_down) = keeping.await.unwrap();
    assert!(lost.to_string().contains("not renewed within the renew deadline"), "{lost}");
    assert_eq!(stepped_down - t0, secs(16), "the renew deadline after the last renewal (6 s)");

    let (taken, took_over) = candidate.await.unwrap();
    assert!(taken.is_some());
    assert_eq!(holder(&store).as_deref(), Some("b"));
    assert!(
        took_over >= stepped_down + (timing().lease - timing().renew_deadline),
        "b took over {:?} after a stepped down: a whole Lease after the last renewal it saw",
        took_over - stepped_down
    );
}

#[tokio::test(start_paused = true)]
async fn a_candidate_waits_while_the_leader_renews() {
    let store = Arc::new(Store::default());
    let a = Arc::new(Elector::new(FakeApi::new(&store), "skiff-system", "lease", "a".into(), timing()));
    let b = Elector::new(FakeApi::new(&store), "skiff-system", "lease", "b".into(), timing());
    let term = a.acquire(&CancellationToken::new()).await.unwrap();
    let leader = a.clone();
    let keeping = tokio::spawn(async move { leader.keep(term).await });
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(secs(120)).await;
        cancel.cancel();
    });
    assert_eq!(b.acquire(&stop).await, None, "two minutes of renewals: never expired");
    assert!(!keeping.is_finished(), "a still leads");
    keeping.abort();
    a.release().await;
    let after_release = Instant::now();
    assert!(b.acquire(&CancellationToken::new()).await.is_some());
    assert!(Instant::now() - after_release < secs(3), "a released Lease is taken at the next round");
}

/// Log lines written while a test runs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_missing_namespace_is_logged_as_an_error_at_every_try() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt().with_ansi(false).with_writer(move || writer.clone()).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let store = Arc::new(Store::default());
    let api = Arc::new(FakeApi { store, hang: AtomicBool::new(false), missing_namespace: true });
    let elector = Elector::new(api, "skiff-sytem", "lease", "a".into(), timing());
    let stop = CancellationToken::new();
    let cancel = stop.clone();
    tokio::spawn(async move {
        tokio::time::sleep(secs(5)).await;
        cancel.cancel();
    });
    assert_eq!(elector.acquire(&stop).await, None);
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let errors =
        text.lines().filter(|l| l.contains("ERROR") && l.contains("namespace skiff-sytem does not exist")).count();
    assert_eq!(errors, 3, "tries at 0, 2 and 4 s:\n{text}");
}
