use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

use skiff_autoscaler::{AutoscalerConfig, PredictorScaling};

use super::*;

/// A backend whose replicas become ready the moment they are asked for.
#[derive(Default)]
struct Immediate {
    replicas: AtomicU32,
    calls: Mutex<Vec<u32>>,
}

impl ReplicaBackend for Immediate {
    fn scale(&self, _: &RevisionKey, replicas: u32) {
        self.replicas.store(replicas, Ordering::SeqCst);
        self.calls.lock().unwrap().push(replicas);
    }
    fn ready_replicas(&self, _: &RevisionKey) -> u32 {
        self.replicas.load(Ordering::SeqCst)
    }
}

/// A metric source that reports whatever the test sets, for the metric it is asked for.
#[derive(Default)]
struct Load(Mutex<f64>, Mutex<Vec<Metric>>);

impl MetricSource for Load {
    fn observe(&self, _: &RevisionKey, metric: Metric) -> impl Future<Output = Option<f64>> + Send {
        self.1.lock().unwrap().push(metric);
        let value = *self.0.lock().unwrap();
        async move { Some(value) }
    }
}

fn r() -> RevisionKey {
    RevisionKey::new("default", "r")
}

fn spec_with(fields: PredictorScaling) -> ScalingSpec {
    let config = AutoscalerConfig::from_map(&BTreeMap::from([
        ("stable-window".to_owned(), "6s".to_owned()),
        ("scale-to-zero-grace-period".to_owned(), "2s".to_owned()),
    ]))
    .unwrap();
    ScalingSpec::resolve(&fields, &BTreeMap::new(), &config).unwrap()
}

fn spec(min: u32) -> ScalingSpec {
    spec_with(PredictorScaling { min_replicas: Some(min), container_concurrency: Some(10), ..Default::default() })
}

fn setup_with(spec: ScalingSpec) -> (Arc<Immediate>, Arc<Load>, Arc<Runner<Immediate, Load>>) {
    let backend = Arc::new(Immediate::default());
    let load = Arc::new(Load::default());
    let runner = Runner::new(backend.clone(), load.clone(), Duration::from_secs(2));
    runner.add(&r(), spec);
    (backend, load, runner)
}

fn setup(min: u32) -> (Arc<Immediate>, Arc<Load>, Arc<Runner<Immediate, Load>>) {
    setup_with(spec(min))
}

#[tokio::test(start_paused = true)]
async fn load_scales_up_at_the_tick_and_idle_goes_to_zero() {
    let (backend, load, runner) = setup(0);
    assert_eq!(backend.ready_replicas(&r()), 1, "initial scale");
    let task = tokio::spawn(runner.clone().run());
    *load.0.lock().unwrap() = 21.0;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(backend.ready_replicas(&r()), 3, "21 in flight / (10 × 70%)");
    *load.0.lock().unwrap() = 0.0;
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(backend.ready_replicas(&r()), 0, "idle past the stable window and grace period");
    assert_eq!(runner.decision(&r()).unwrap().desired_pods, 0);
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_poke_at_zero_scales_up_without_waiting_for_the_tick() {
    let (backend, _load, runner) = setup(0);
    backend.scale(&r(), 0);
    runner.poke(&r(), LOCAL_ACTIVATOR, 1);
    assert_eq!(backend.ready_replicas(&r()), 1);
    let calls = backend.calls.lock().unwrap().len();
    runner.poke(&r(), LOCAL_ACTIVATOR, 1);
    assert_eq!(backend.calls.lock().unwrap().len(), calls, "no decision while a replica is ready");
}

#[tokio::test(start_paused = true)]
async fn the_first_step_is_sized_for_the_requests_already_held() {
    let (backend, _load, runner) = setup(0);
    backend.scale(&r(), 0);
    runner.poke(&r(), LOCAL_ACTIVATOR, 20);
    assert_eq!(backend.ready_replicas(&r()), 3, "20 held / (10 × 70%) per replica");
}

#[tokio::test(start_paused = true)]
async fn min_replicas_hold_and_removed_revisions_are_forgotten() {
    let (backend, _load, runner) = setup(2);
    let task = tokio::spawn(runner.clone().run());
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(backend.ready_replicas(&r()), 2);
    runner.remove(&r());
    assert!(runner.decision(&r()).is_none());
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn an_rps_revision_is_sampled_and_scaled_on_requests_per_second() {
    let fields = PredictorScaling {
        min_replicas: Some(1),
        scale_metric: Some("rps".into()),
        scale_target: Some(5),
        ..Default::default()
    };
    let spec = spec_with(fields);
    let per_pod = spec.per_pod_target();
    let (backend, load, runner) = setup_with(spec);
    let task = tokio::spawn(runner.clone().run());
    *load.0.lock().unwrap() = 20.0;
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(load.1.lock().unwrap().iter().all(|m| *m == Metric::Rps), "asked for rps only");
    assert_eq!(backend.ready_replicas(&r()), (20.0 / per_pod).ceil() as u32, "20 rps / ({per_pod} per pod)");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn held_requests_the_activator_reports_count_as_concurrency() {
    let (backend, _load, runner) = setup(1);
    let task = tokio::spawn(runner.clone().run());
    runner.report_held(&r(), "a", 14);
    runner.report_held(&r(), "b", 7);
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(backend.ready_replicas(&r()), 3, "14 + 7 held by two activators / (10 × 70%)");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn a_resumed_revision_keeps_its_replicas() {
    let backend = Arc::new(Immediate::default());
    backend.scale(&r(), 4);
    let load = Arc::new(Load::default());
    *load.0.lock().unwrap() = 28.0;
    let runner = Runner::new(backend.clone(), load, Duration::from_secs(2));
    runner.resume(&r(), spec(0));
    assert_eq!(backend.calls.lock().unwrap().as_slice(), [4], "resuming writes nothing");
    let task = tokio::spawn(runner.clone().run());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(backend.ready_replicas(&r()), 4, "28 in flight / (10 × 70%): not back to the initial scale");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn two_namespaces_scale_apart() {
    let backend = Arc::new(PerKey::default());
    let runner = Runner::new(backend.clone(), Arc::new(Load::default()), Duration::from_secs(2));
    let (a, b) = (RevisionKey::new("a", "r"), RevisionKey::new("b", "r"));
    runner.add(&a, spec(0));
    runner.add(&b, spec(2));
    assert_eq!((backend.ready_replicas(&a), backend.ready_replicas(&b)), (1, 2));
}

/// Replicas per revision, ready as soon as asked for.
#[derive(Default)]
struct PerKey(Mutex<HashMap<RevisionKey, u32>>);

impl ReplicaBackend for PerKey {
    fn scale(&self, revision: &RevisionKey, replicas: u32) {
        self.0.lock().unwrap().insert(revision.clone(), replicas);
    }
    fn ready_replicas(&self, revision: &RevisionKey) -> u32 {
        self.0.lock().unwrap().get(revision).copied().unwrap_or(0)
    }
}

#[tokio::test(start_paused = true)]
async fn new_settings_never_drop_replicas_before_the_windows_have_data() {
    let (backend, _load, runner) = setup(0);
    assert_eq!(backend.ready_replicas(&r()), 1, "initial scale");
    let task = tokio::spawn(runner.clone().run());
    let calls = backend.calls.lock().unwrap().len();
    runner.update(&r(), spec(1));
    runner.update(&r(), spec(0));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(backend.ready_replicas(&r()), 1, "still one replica after the settings changed");
    assert!(backend.calls.lock().unwrap()[calls..].iter().all(|n| *n == 1), "never asked for fewer");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn pokes_from_two_activators_add_up_and_never_ask_for_less() {
    let (backend, _load, runner) = setup(0);
    backend.scale(&r(), 0);
    runner.poke(&r(), "a", 14);
    assert_eq!(backend.ready_replicas(&r()), 2, "14 / 7 per replica");
    backend.scale(&r(), 0); // nothing ready yet
    runner.poke(&r(), "b", 14);
    assert_eq!(backend.ready_replicas(&r()), 4, "28 held by both / 7");
    backend.scale(&r(), 0);
    runner.poke(&r(), "b", 1);
    assert_eq!(backend.ready_replicas(&r()), 4, "a smaller poke while nothing is ready asks for no fewer");
    tokio::time::sleep(Duration::from_secs(4)).await;
    backend.scale(&r(), 0);
    runner.poke(&r(), "a", 1);
    assert!(runner.decision(&r()).unwrap().desired_pods >= 4, "the earlier answer still stands at zero");
}

/// A source whose pods never answer.
struct Silent;

impl MetricSource for Silent {
    async fn observe(&self, _: &RevisionKey, _: Metric) -> Option<f64> {
        None
    }
}

#[tokio::test(start_paused = true)]
async fn pods_that_do_not_answer_are_not_read_as_idle() {
    let backend = Arc::new(Immediate::default());
    backend.scale(&r(), 3);
    let runner = Runner::new(backend.clone(), Arc::new(Silent), Duration::from_secs(2));
    runner.resume(&r(), spec(0));
    let task = tokio::spawn(runner.clone().run());
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(backend.ready_replicas(&r()), 3, "no reading for 30 s: nothing recorded, nothing scaled down");
    task.abort();
}

/// Issue 26: a burst at zero seen only through pokes, then pods that report little (fast requests
/// read as a low in-flight gauge). The pokes' stat puts the decider in panic, so it holds its peak
/// for the stable window instead of halving at every tick.
#[tokio::test(start_paused = true)]
async fn a_burst_at_zero_panics_through_the_poke_and_holds_for_the_stable_window() {
    let (backend, load, runner) = setup_with(spec_with(PredictorScaling {
        min_replicas: Some(0),
        max_replicas: Some(8),
        container_concurrency: Some(2),
        ..Default::default()
    }));
    backend.scale(&r(), 0);
    for held in 1..=16 {
        backend.scale(&r(), 0); // nothing ready yet
        runner.poke(&r(), LOCAL_ACTIVATOR, held);
    }
    let decision = runner.decision(&r()).unwrap();
    assert!(decision.panic, "16 held at zero is over the panic threshold: {decision:?}");
    assert_eq!(decision.desired_pods, 8, "ceil(16 / (2 × 70%)) = 12, capped at 8");
    *load.0.lock().unwrap() = 2.0;
    let task = tokio::spawn(runner.clone().run());
    for second in 1..=5 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let decision = runner.decision(&r()).unwrap();
        assert_eq!((decision.desired_pods, decision.panic), (8, true), "second {second}: {decision:?}");
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let decision = runner.decision(&r()).unwrap();
    assert!(!decision.panic && decision.desired_pods < 8, "a stable window (6 s) later, back to stable: {decision:?}");
    task.abort();
}

#[tokio::test(start_paused = true)]
async fn held_requests_a_poke_recorded_count_once_at_the_next_sample() {
    let (backend, _load, runner) = setup(0);
    backend.scale(&r(), 0);
    runner.poke(&r(), LOCAL_ACTIVATOR, 14);
    runner.report_held(&r(), LOCAL_ACTIVATOR, 14);
    let task = tokio::spawn(runner.clone().run());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    task.abort();
    let decision = runner.decision(&r()).unwrap();
    assert_eq!(decision.observed_stable, 14.0, "the poke's 14 and the sample's 14 are the same requests: {decision:?}");
}

/// A backend whose replicas never become ready (no node for them, or a server that never loads).
#[derive(Default)]
struct NeverReady(Mutex<Vec<u32>>);

impl ReplicaBackend for NeverReady {
    fn scale(&self, _: &RevisionKey, replicas: u32) {
        self.0.lock().unwrap().push(replicas);
    }
    fn ready_replicas(&self, _: &RevisionKey) -> u32 {
        0
    }
}

impl NeverReady {
    fn asked(&self) -> u32 {
        *self.0.lock().unwrap().last().expect("scaled at least once")
    }
}

/// Issue 25 (kserve#1247): a request wakes a revision whose replica never becomes ready and its
/// client leaves. The replica is kept past the stable window and the grace period (Knative keeps
/// an activating revision's pods), and given up only after the progress deadline plus Knative's
/// 30 s: then zero, the decision and the journal say so, and the next request starts it again.
#[tokio::test(start_paused = true)]
async fn a_revision_that_never_becomes_ready_is_kept_then_given_up_after_the_progress_deadline() {
    let backend = Arc::new(NeverReady::default());
    let runner = Runner::new(backend.clone(), Arc::new(Silent), Duration::from_secs(2));
    let mut spec = spec(0);
    spec.progress_deadline = Some(Duration::from_secs(20));
    assert_eq!(spec.activation_timeout(), Duration::from_secs(50));
    runner.resume(&r(), spec);
    let task = tokio::spawn(runner.clone().run());
    runner.poke(&r(), LOCAL_ACTIVATOR, 1);
    assert_eq!(backend.asked(), 1);
    for _ in 0..3 {
        runner.report_held(&r(), LOCAL_ACTIVATOR, 1);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // The client left: the activator holds nothing, and no pod answers.
    runner.report_held(&r(), LOCAL_ACTIVATOR, 0);
    tokio::time::sleep(Duration::from_secs(30)).await;
    let decision = runner.decision(&r()).unwrap();
    assert_eq!((backend.asked(), decision.activation_timed_out), (1, false), "kept while it starts: {decision:?}");
    tokio::time::sleep(Duration::from_secs(60)).await;
    let decision = runner.decision(&r()).unwrap();
    assert_eq!((backend.asked(), decision.activation_timed_out), (0, true), "given up: {decision:?}");
    let journal = runner.journal(&r()).unwrap();
    assert!(
        journal.iter().any(|s| matches!(s, Step::Decided { desired: 0, activation_timed_out: true, .. })),
        "the journal records it"
    );
    runner.poke(&r(), LOCAL_ACTIVATOR, 1);
    let decision = runner.decision(&r()).unwrap();
    assert_eq!((backend.asked(), decision.activation_timed_out), (1, false), "a new request: {decision:?}");
    task.abort();
}
