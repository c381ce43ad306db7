//! The router over real sockets: fake replicas and a fake activator on 127.0.0.1.

mod support;

use std::sync::Arc;

use serde_json::{Value, json};
use skiff_dataplane::RevisionKey;
use skiff_dataplane::endpoints::Endpoints;
use support::*;
use tokio::sync::Semaphore;

fn id(body: &Value) -> &str {
    body["id"].as_str().unwrap_or_else(|| panic!("no id in {body}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_paths_and_model_names_reach_the_service() {
    let (a, activator) = (upstream("iris-1").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[a.addr]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, Some("latest"))])]);
    let c = Caller::new(handle.listen_addr());

    let (status, body) = c.post("iris.default.example.com", "/v1/models/iris:predict").await;
    assert_eq!((status, id(&body), body["path"].as_str()), (200, "iris-1", Some("/v1/models/iris:predict")));

    let (status, body) = c.get("iris.default.example.com:8080", "/v2/health/ready").await;
    assert_eq!((status, id(&body)), (200, "iris-1"), "port in Host ignored");

    let (status, body) = c.post("localhost", "/serving/default/iris/v2/models/iris/infer?trace=1").await;
    assert_eq!((status, id(&body), body["path"].as_str()), (200, "iris-1", Some("/v2/models/iris/infer?trace=1")));

    let (status, body) = c.post("10.1.2.3:8080", "/v1/models/iris:predict").await;
    assert_eq!((status, id(&body), body["path"].as_str()), (200, "iris-1", Some("/v1/models/iris:predict")));
    let (status, body) = c.get("10.1.2.3", "/v2/models/iris/ready").await;
    assert_eq!((status, id(&body)), (200, "iris-1"));

    assert!(activator.seen().is_empty(), "a ready replica with room is used directly");
    let line = r#"skiff_router_requests_total{service="default/iris",revision="iris-predictor-00001",status="200"} 5"#;
    metrics_eventually_contain(&router, line).await;
    metrics_eventually_contain(&router, r#"via="direct"} 5"#).await;
    metrics_eventually_contain(&router, "skiff_router_request_duration_seconds_bucket").await;
    drop(handle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_services_get_404_json_and_healthz_answers_locally() {
    let activator = upstream("activator").await;
    let (router, handle) = router(Arc::new(Endpoints::default()), activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let c = Caller::new(handle.listen_addr());

    let (status, body) = c.post("nope.default.example.com", "/v1/models/iris:predict").await;
    assert_eq!(status, 404);
    assert_eq!(
        body,
        json!({"error": "no InferenceService matches host nope.default.example.com and path /v1/models/iris:predict"})
    );
    let (status, body) = c.get("localhost", "/v1/models/bert").await;
    assert_eq!((status, body["error"].as_str().is_some()), (404, true));

    let (status, body) = c.get("anything", "/healthz").await;
    assert_eq!((status, body), (200, Value::String("ok\n".into())));
    assert!(activator.seen().is_empty());
    metrics_eventually_contain(&router, r#"skiff_router_requests_total{service="",revision="",status="404"} 2"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_hosts_reach_only_the_tagged_revision() {
    // The latest revision takes no weight (not yet ready for a canary) but stays reachable by its tag.
    let setup = two_revisions(
        "ml",
        vec![target("iris-predictor-00002", 0, Some("latest")), target("iris-predictor-00001", 100, Some("prev"))],
    )
    .await;
    let c = &setup.caller;
    for _ in 0..20 {
        assert_eq!(id(&c.get("latest-iris.ml.example.com", "/").await.1), "new");
        assert_eq!(id(&c.get("prev-iris.ml.example.com", "/").await.1), "old");
        assert_eq!(id(&c.get("iris.ml.example.com", "/").await.1), "old", "0% is never chosen by weight");
    }
    assert_eq!(c.get("canary-iris.ml.example.com", "/").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_80_split_holds_over_2000_requests() {
    let setup = two_revisions(
        "default",
        vec![target("iris-predictor-00002", 20, Some("latest")), target("iris-predictor-00001", 80, Some("prev"))],
    )
    .await;
    let (c, endpoints) = (&setup.caller, &setup.endpoints);
    let mut to_new = 0;
    for _ in 0..2000 {
        if id(&c.post("iris.default.example.com", "/v1/models/iris:predict").await.1) == "new" {
            to_new += 1;
        }
    }
    // Binomial(2000, 0.2): mean 400, sd ~17.9; +-100 (5 points of the split) is ~5.6 sd.
    assert!((300..=500).contains(&to_new), "{to_new} of 2000 went to the 20% revision");
    assert_eq!(setup.new.seen().len() + setup.old.seen().len(), 2000);
    let arrivals = |name: &str| endpoints.get(&RevisionKey::new("default", name)).unwrap().arrivals();
    assert_eq!(
        (arrivals("iris-predictor-00002"), arrivals("iris-predictor-00001")),
        (to_new as u64, 2000 - to_new as u64),
        "the autoscaler's rps signal counts every routed request"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_without_ready_replicas_go_to_the_activator() {
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[]); // scaled to zero
    let (router, handle) = router(endpoints.clone(), activator.addr);
    router.publish(vec![
        service("default", "iris", vec![target("iris-predictor-00001", 100, None)]),
        service("default", "mnist", vec![target("mnist-predictor-00001", 100, None)]), // not registered at all
    ]);
    let c = Caller::new(handle.listen_addr());

    let (status, body) = c.post("localhost", "/serving/default/iris/v1/models/iris:predict").await;
    assert_eq!((status, id(&body)), (200, "activator"));
    assert_eq!(body["revision"], "default/iris-predictor-00001");
    assert_eq!(body["path"], "/v1/models/iris:predict", "the rewrite applies on the way to the activator too");
    let (_, body) = c.get("mnist.default.example.com", "/v2/models/mnist").await;
    assert_eq!(body["revision"], "default/mnist-predictor-00001");
    assert_eq!(activator.seen().len(), 2);
    assert_eq!(
        endpoints.get(&RevisionKey::new("default", "iris-predictor-00001")).unwrap().arrivals(),
        1,
        "counted on the way to the activator"
    );
    metrics_eventually_contain(&router, r#"via="activator"} 1"#).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_at_container_concurrency_sends_the_rest_to_the_activator() {
    let gate = Arc::new(Semaphore::new(0));
    let (replica, activator) = (upstream_gated("replica", Some(gate.clone())).await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    let rev = revision(&endpoints, "default/iris-predictor-00001", 1, &[replica.addr]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let c = Arc::new(Caller::new(handle.listen_addr()));

    // The first request takes the only slot and is held by the replica.
    let first = tokio::spawn({
        let c = c.clone();
        async move { c.post("iris.default.example.com", "/v1/models/iris:predict").await }
    });
    while rev.has_capacity() {
        tokio::task::yield_now().await;
    }
    let (status, body) = c.post("iris.default.example.com", "/v1/models/iris:predict").await;
    assert_eq!((status, id(&body)), (200, "activator"));
    assert_eq!(body["revision"], "default/iris-predictor-00001");

    gate.add_permits(1);
    assert_eq!(id(&first.await.unwrap().1), "replica");
    let replica_record = rev.ready()[0].clone();
    while replica_record.in_flight() != 0 {
        tokio::task::yield_now().await; // released once the router has logged the response
    }
    gate.add_permits(1);
    assert_eq!(id(&c.post("iris.default.example.com", "/v1/models/iris:predict").await.1), "replica");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_replica_falls_back_to_the_activator_and_clients_cannot_spoof_the_revision() {
    let (live, activator) = (upstream("live").await, upstream("activator").await);
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap(); // closed again
    let endpoints = Arc::new(Endpoints::default());
    let gone = revision(&endpoints, "default/gone-predictor-00001", 0, &[dead]);
    revision(&endpoints, "default/live-predictor-00001", 0, &[live.addr]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![
        service("default", "gone", vec![target("gone-predictor-00001", 100, None)]),
        service("default", "live", vec![target("live-predictor-00001", 100, None)]),
    ]);
    let c = Caller::new(handle.listen_addr());

    let (status, body) = c.get("gone.default.example.com", "/v2/health/ready").await;
    assert_eq!(
        (status, id(&body), body["revision"].as_str()),
        (200, "activator", Some("default/gone-predictor-00001"))
    );
    while gone.ready()[0].in_flight() != 0 {
        tokio::task::yield_now().await;
    }

    let (_, body) = c.call("GET", "live.default.example.com", "/", &[("x-skiff-revision", "other")]).await;
    assert_eq!((id(&body), &body["revision"]), ("live", &Value::Null));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_swaps_routes_while_serving() {
    let (a, b, activator) = (upstream("a").await, upstream("b").await, upstream("activator").await);
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[a.addr]);
    revision(&endpoints, "default/iris-predictor-00002", 0, &[b.addr]);
    let (router, handle) = router(endpoints, activator.addr);
    let c = Arc::new(Caller::new(handle.listen_addr()));
    assert_eq!(c.get("iris.default.example.com", "/").await.0, 404, "no routes yet");

    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    assert_eq!(id(&c.get("iris.default.example.com", "/").await.1), "a");

    // Keep requests flowing while the routes change under them: each answer is from a or from b.
    let load = tokio::spawn({
        let c = c.clone();
        async move {
            let mut ids = Vec::new();
            for _ in 0..200 {
                let (status, body) = c.get("iris.default.example.com", "/").await;
                assert_eq!(status, 200);
                ids.push(id(&body).to_owned());
            }
            ids
        }
    });
    for i in 0..50 {
        let revision = if i % 2 == 0 { "iris-predictor-00002" } else { "iris-predictor-00001" };
        router.publish(vec![service("default", "iris", vec![target(revision, 100, None)])]);
        tokio::task::yield_now().await;
    }
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00002", 100, None)])]);
    let ids = load.await.unwrap();
    assert!(ids.iter().all(|id| id == "a" || id == "b"), "{ids:?}");
    assert_eq!(id(&c.get("iris.default.example.com", "/").await.1), "b");
    assert_eq!(router.routes().len(), 1);

    router.publish(Vec::new());
    assert_eq!(c.get("iris.default.example.com", "/").await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_stops_the_listener() {
    let activator = upstream("activator").await;
    let (_router, handle) = router(Arc::new(Endpoints::default()), activator.addr);
    let addr = handle.listen_addr();
    assert_eq!(Caller::new(addr).get("x", "/healthz").await.0, 200);
    tokio::task::spawn_blocking(move || handle.shutdown()).await.unwrap();
    assert!(std::net::TcpStream::connect(addr).is_err(), "nothing listens after shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_fails_mid_request_is_a_json_502() {
    // Accepts, reads the request, and closes without answering.
    let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closer_addr = closer.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = closer.accept().await else { return };
            let mut buffer = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut buffer).await;
        }
    });
    let activator = upstream("activator").await;
    let endpoints = Arc::new(Endpoints::default());
    revision(&endpoints, "default/iris-predictor-00001", 0, &[closer_addr]);
    let (router, handle) = router(endpoints, activator.addr);
    router.publish(vec![service("default", "iris", vec![target("iris-predictor-00001", 100, None)])]);
    let (status, body) =
        Caller::new(handle.listen_addr()).post("iris.default.example.com", "/v2/models/iris/infer").await;
    assert_eq!(status, 502, "{body}");
    let message = body["error"].as_str().unwrap_or_default();
    assert!(message.starts_with("the upstream failed"), "a JSON error, not Pingora's page: {body}");
    assert!(activator.seen().is_empty(), "a fresh connection that failed after sending is not replayed");
}
