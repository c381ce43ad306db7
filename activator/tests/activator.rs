//! The activator over real sockets: requests at zero wait and poke the autoscaler, are forwarded
//! when a replica is published, honour containerConcurrency, are bounded in number and in time,
//! survive a replica that refuses connections, and unknown revisions get 404.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use common::{StreamingUpstream, Upstream, dead_addr, get, next_data, open, post, send_with, wait_until};
use http::{Method, StatusCode};
use skiff_activator::{Activator, Limits, Poker, RevisionConfig, RevisionStats};
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::{Endpoints, RevisionEndpoints};
use tokio::net::TcpListener;

/// Remembers every poke: the revision and the requests held.
#[derive(Default)]
struct Pokes(Mutex<Vec<(String, usize)>>);

impl Poker for Pokes {
    fn poke(&self, revision: &RevisionKey, held: usize) {
        self.0.lock().unwrap().push((revision.to_string(), held));
    }
}

/// The revision every test serves, and the header value naming it.
fn key() -> RevisionKey {
    RevisionKey::new("ns", "r")
}
const R: &str = "ns/r";

impl Pokes {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
}

struct Setup {
    activator: Arc<Activator>,
    revision: Arc<RevisionEndpoints>,
    pokes: Arc<Pokes>,
    addr: SocketAddr,
}

impl Setup {
    /// An activator serving revision `r` (containerConcurrency `cc`) on a free port.
    async fn start(cc: usize, config: RevisionConfig) -> Setup {
        Setup::start_with(cc, config, Limits::default()).await
    }

    /// As [`Setup::start`], with the activator's process-wide `limits`.
    async fn start_with(cc: usize, config: RevisionConfig, limits: Limits) -> Setup {
        let endpoints = Arc::new(Endpoints::default());
        let revision = RevisionEndpoints::new(config.key.clone(), cc);
        endpoints.insert(revision.clone());
        let pokes = Arc::new(Pokes::default());
        let activator = Activator::new(endpoints, pokes.clone(), limits);
        activator.upsert_revision(config).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(activator.clone().serve(listener, std::future::pending()));
        Setup { activator, revision, pokes, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn publish(&self, upstreams: &[SocketAddr]) {
        self.revision.set_ready(upstreams.iter().map(|a| self.revision.replica(*a)).collect());
    }

    fn stats(&self) -> RevisionStats {
        self.activator.stats(&key())
    }
}

fn config(max_pending: usize, timeout: Duration) -> RevisionConfig {
    RevisionConfig { key: key(), timeout, max_pending, progress_deadline: None }
}

#[tokio::test]
async fn a_request_at_zero_pokes_waits_and_is_forwarded_once_a_replica_is_ready() {
    let setup = Setup::start(1, RevisionConfig::new(key())).await;
    let upstream = Upstream::start("a").await;
    let url = setup.url("/v1/models/m:predict?trace=1");
    let waiting = tokio::spawn(async move { post(&url, Some(R), r#"{"instances":[1]}"#).await });

    wait_until("the poke", || setup.pokes.count() >= 1).await;
    assert_eq!(setup.pokes.0.lock().unwrap()[0], (R.to_owned(), 1), "the poke carries the held count");
    wait_until("the request to queue", || setup.stats().queued == 1).await;
    assert!(!waiting.is_finished());

    setup.publish(&[upstream.addr]);
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    let body = reply.json();
    assert_eq!(body["id"], "a");
    assert_eq!(body["path"], "/v1/models/m:predict");
    assert_eq!(body["body"], r#"{"instances":[1]}"#);
    assert_eq!(body["saw_revision"], false, "x-skiff-revision stays behind");
    let held = reply.headers.get("x-skiff-cold-start").map(|v| v.to_str().unwrap().to_owned());
    assert!(held.as_deref().is_some_and(|ms| ms.parse::<u64>().is_ok()), "the answer says it met zero: {held:?}");
    assert_eq!(setup.stats(), RevisionStats::default());
    let metrics = setup.activator.metrics_text();
    assert!(metrics.contains(r#"skiff_activator_requests_total{revision="ns/r",status="200"} 1"#), "{metrics}");
    assert!(metrics.contains(r#"skiff_activator_wait_seconds_count{revision="ns/r"} 1"#), "{metrics}");

    let warm = post(&setup.url("/v1/models/m:predict"), Some(R), r#"{"instances":[1]}"#).await;
    assert_eq!(warm.status, StatusCode::OK, "{}", warm.text());
    assert!(!warm.headers.contains_key("x-skiff-cold-start"), "a request that found a ready replica met no cold start");
}

#[tokio::test]
async fn held_requests_are_all_forwarded_within_container_concurrency() {
    let setup = Setup::start(2, RevisionConfig::new(key())).await;
    let (a, b) = (Upstream::start("a").await, Upstream::start("b").await);
    let requests: Vec<_> = (0..10)
        .map(|i| {
            let url = setup.url(&format!("/hold/{i}"));
            tokio::spawn(async move { get(&url, Some(R)).await })
        })
        .collect();
    wait_until("all ten to queue", || setup.stats().queued == 10).await;
    assert!(setup.pokes.count() >= 1);

    setup.publish(&[a.addr, b.addr]);
    wait_until("four to reach the replicas", || a.in_flight() + b.in_flight() == 4).await;
    wait_until("six to stay queued", || setup.stats() == RevisionStats { queued: 6, in_flight: 4 }).await;
    let metrics = setup.activator.metrics_text();
    assert!(metrics.contains(r#"skiff_activator_queued_requests{revision="ns/r"} 6"#), "{metrics}");
    assert!(metrics.contains(r#"skiff_activator_inflight_requests{revision="ns/r"} 4"#), "{metrics}");
    assert_eq!((a.in_flight(), b.in_flight()), (2, 2));

    a.release(100);
    b.release(100);
    let mut ids = Vec::new();
    for request in requests {
        let reply = request.await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        ids.push(reply.json()["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(a.received() + b.received(), 10);
    assert!(a.max_in_flight() <= 2 && b.max_in_flight() <= 2, "{} {}", a.max_in_flight(), b.max_in_flight());
    assert!(ids.contains(&"a".to_owned()) && ids.contains(&"b".to_owned()), "both replicas served: {ids:?}");
    assert_eq!(setup.stats(), RevisionStats::default());
}

#[tokio::test]
async fn a_full_queue_answers_503_with_retry_after() {
    let setup = Setup::start(1, config(2, Duration::from_secs(300))).await;
    let held: Vec<_> = (0..2)
        .map(|_| {
            let url = setup.url("/");
            tokio::spawn(async move { get(&url, Some(R)).await })
        })
        .collect();
    wait_until("two to queue", || setup.stats().queued == 2).await;

    let refused = get(&setup.url("/"), Some(R)).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.json()["error"], "revision ns/r already holds 2 pending requests");

    let upstream = Upstream::start("a").await;
    setup.publish(&[upstream.addr]);
    for request in held {
        assert_eq!(request.await.unwrap().status, StatusCode::OK);
    }
    assert!(
        setup.activator.metrics_text().contains(r#"skiff_activator_requests_total{revision="ns/r",status="503"} 1"#)
    );
}

#[tokio::test]
async fn no_replica_within_the_timeout_is_a_504_that_says_so() {
    let setup = Setup::start(1, config(10, Duration::from_secs(1))).await;
    let reply = get(&setup.url("/"), Some(R)).await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        reply.json()["error"],
        "revision ns/r had no ready replica within 1s, its timeout (serving.knative.dev/progress-deadline holds \
         requests longer while replicas start)"
    );
    assert_eq!(setup.stats(), RevisionStats::default());
}

#[tokio::test]
async fn a_progress_deadline_holds_requests_past_the_timeout_and_its_504_names_it() {
    let slow =
        RevisionConfig { progress_deadline: Some(Duration::from_secs(30)), ..config(10, Duration::from_secs(1)) };
    let setup = Setup::start(1, slow).await;
    let url = setup.url("/");
    let held = tokio::spawn(async move { get(&url, Some(R)).await });
    wait_until("the request to be held", || setup.stats().queued == 1).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!held.is_finished(), "held past its 1 s timeout, within its progress deadline");
    let upstream = Upstream::start("a").await;
    setup.publish(&[upstream.addr]);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);

    let short =
        RevisionConfig { progress_deadline: Some(Duration::from_secs(2)), ..config(10, Duration::from_secs(1)) };
    let setup = Setup::start(1, short).await;
    let reply = get(&setup.url("/"), Some(R)).await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(
        reply.json()["error"],
        "revision ns/r had no ready replica within 2s, its progress deadline (serving.knative.dev/progress-deadline)"
    );
}

#[tokio::test]
async fn a_replica_slower_than_the_timeout_is_a_504_and_frees_its_slot() {
    let setup = Setup::start(1, config(10, Duration::from_secs(1))).await;
    let upstream = Upstream::start("a").await;
    setup.publish(&[upstream.addr]);
    let reply = get(&setup.url("/hold"), Some(R)).await;
    assert_eq!(reply.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(reply.json()["error"], "revision ns/r did not answer within 1s");
    assert_eq!(setup.revision.ready()[0].in_flight(), 0, "the slot is given back");
    upstream.release(1);
    assert_eq!(get(&setup.url("/"), Some(R)).await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_replica_that_refuses_connections_is_skipped_for_another() {
    let setup = Setup::start(0, RevisionConfig::new(key())).await;
    let upstream = Upstream::start("good").await;
    setup.publish(&[dead_addr().await, upstream.addr]);
    for _ in 0..5 {
        let reply = get(&setup.url("/"), Some(R)).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        assert_eq!(reply.json()["id"], "good");
    }
    assert_eq!(upstream.received(), 5);
}

#[tokio::test]
async fn a_lone_refusing_replica_is_retried_until_it_is_replaced() {
    let setup = Setup::start(1, RevisionConfig::new(key())).await;
    setup.publish(&[dead_addr().await]);
    let url = setup.url("/");
    let waiting = tokio::spawn(async move { get(&url, Some(R)).await });
    // Give it time to try the dead replica a few times; it keeps trying while nothing else is ready.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "a refused connection is not an answer");

    let upstream = Upstream::start("replacement").await;
    setup.publish(&[upstream.addr]);
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["id"], "replacement");
}

#[tokio::test]
async fn unknown_or_missing_revisions_are_refused() {
    let setup = Setup::start(1, RevisionConfig::new(key())).await;
    let reply = get(&setup.url("/"), Some("other/r")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "the same name in another namespace is another revision");
    assert_eq!(reply.json()["error"], "unknown revision 'other/r'");
    let reply = get(&setup.url("/"), Some("r")).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"], "x-skiff-revision must be namespace/name, got \"r\"");
    let reply = get(&setup.url("/"), None).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"], "the request has no x-skiff-revision header");

    assert!(setup.activator.remove_revision(&key()));
    assert_eq!(get(&setup.url("/"), Some(R)).await.status, StatusCode::NOT_FOUND);
    assert_eq!(setup.pokes.count(), 0, "nothing to poke for unknown revisions");
}

#[tokio::test]
async fn h2c_requests_are_forwarded_to_http1_replicas() {
    let setup = Setup::start(1, RevisionConfig::new(key())).await;
    let upstream = Upstream::start("a").await;
    setup.publish(&[upstream.addr]);
    let reply = send_with(true, Method::POST, &setup.url("/v2/models/m/infer"), Some(R), Bytes::from_static(b"{}"))
        .await
        .unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["body"], "{}");
}

#[tokio::test]
async fn a_request_for_a_revision_not_yet_registered_waits_for_it() {
    let endpoints = Arc::new(Endpoints::default());
    let limits = Limits { unknown_revision_wait: Duration::from_secs(30), ..Limits::default() };
    let activator = Activator::new(endpoints.clone(), Arc::new(Pokes::default()), limits);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(activator.clone().serve(listener, std::future::pending()));
    let url = format!("http://{addr}/v2/models/m/infer");
    let waiting = tokio::spawn(async move { post(&url, Some(R), "{}").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "held while the revision's endpoints have not arrived");

    let upstream = Upstream::start("late").await;
    let revision = RevisionEndpoints::new(key(), 0);
    revision.set_ready(vec![revision.replica(upstream.addr)]);
    endpoints.insert(revision);
    activator.upsert_revision(RevisionConfig::new(key())).unwrap();
    let reply = waiting.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.json()["id"], "late");
}

/// Held bodies are budgeted in bytes per revision (and per process), not only counted: past the
/// budget a request is refused at once with 503 and Retry-After, naming whose budget it is; the
/// held ones still go through once a replica is ready.
#[tokio::test]
async fn held_bodies_past_the_byte_budget_are_refused_with_retry_after() {
    let limits = Limits { revision_held_bytes: 1000, max_held_bytes: 1500, ..Limits::default() };
    let setup = Setup::start_with(1, RevisionConfig::new(key()), limits).await;
    let body = "x".repeat(600);
    let held = {
        let (url, body) = (setup.url("/v1/models/m:predict"), body.clone());
        tokio::spawn(async move { post(&url, Some(R), &body).await })
    };
    wait_until("the first body to be held", || setup.stats().queued == 1).await;
    let refused = post(&setup.url("/v1/models/m:predict"), Some(R), &body).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.text());
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(
        refused.json()["error"],
        "revision ns/r already holds 600 bytes of request bodies (budget 1000 bytes); retry later"
    );
    let upstream = Upstream::start("a").await;
    setup.publish(&[upstream.addr]);
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
    let after = post(&setup.url("/v1/models/m:predict"), Some(R), &body).await;
    assert_eq!(after.status, StatusCode::OK, "the budget is given back: {}", after.text());
}

/// Requests held at zero are sent in the order they came once one slot frees at a time.
#[tokio::test]
async fn held_requests_go_out_first_come_first_served() {
    let setup = Setup::start(1, RevisionConfig::new(key())).await;
    let upstream = Upstream::start("a").await;
    let mut requests = Vec::new();
    for i in 0..5 {
        let url = setup.url(&format!("/hold/{i}"));
        requests.push(tokio::spawn(async move { get(&url, Some(R)).await }));
        wait_until("the request to queue", || setup.stats().queued == i + 1).await;
    }
    setup.publish(&[upstream.addr]);
    upstream.release(5);
    for request in requests {
        assert_eq!(request.await.unwrap().status, StatusCode::OK);
    }
    assert_eq!(upstream.max_in_flight(), 1);
    assert_eq!(upstream.arrival_order(), ["/hold/0", "/hold/1", "/hold/2", "/hold/3", "/hold/4"]);
}

#[tokio::test]
async fn a_streamed_answer_counts_as_in_flight_until_its_last_byte() {
    let setup = Setup::start(0, RevisionConfig::new(key())).await;
    let upstream = StreamingUpstream::start().await;
    setup.publish(&[upstream.addr]);
    let response = open(&setup.url("/v1/chat/completions"), Some(R)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    assert_eq!(next_data(&mut body).await.as_deref(), Some("data: first\n\n"));
    assert_eq!(setup.stats(), RevisionStats { queued: 0, in_flight: 1 }, "headers and an event sent, not the end");
    assert_eq!(setup.revision.ready()[0].in_flight(), 1, "the replica's slot is held too");
    upstream.finish();
    assert_eq!(next_data(&mut body).await.as_deref(), Some("data: [DONE]\n\n"));
    assert_eq!(next_data(&mut body).await, None);
    wait_until("the count to drop at the last byte", || setup.stats() == RevisionStats::default()).await;
    assert_eq!(setup.revision.ready()[0].in_flight(), 0);
}
