//! SIGTERM stops the router gracefully, after its drain delay (its own test binary: the signal goes
//! to the whole process).

mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use skiff_dataplane::endpoints::Endpoints;
use skiff_router::DownstreamLimits;
use support::*;

/// During the drain delay the router says it is draining and still serves new connections; then
/// it closes its listener and stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_serves_on_for_the_drain_delay_then_stops_the_router() {
    let activator = upstream("activator").await;
    let limits = DownstreamLimits { drain_delay: Duration::from_millis(800), ..DownstreamLimits::default() };
    let (_router, handle) = router_with(Arc::new(Endpoints::default()), activator.addr, limits);
    let addr = handle.listen_addr();
    assert_eq!(Caller::new(addr).get("x", "/healthz").await.0, 200);
    let draining = handle.draining();
    assert!(!draining.load(Ordering::Acquire));

    let status = std::process::Command::new("kill").args(["-TERM", &std::process::id().to_string()]).status().unwrap();
    assert!(status.success());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(draining.load(Ordering::Acquire), "readiness off at once");
    assert_eq!(Caller::new(addr).get("x", "/healthz").await.0, 200, "a new connection is still served");
    let (status, body) = Caller::new(addr).get("x", "/v2/health/ready").await;
    assert_eq!(status, 503, "the router's own V2 readiness is off while draining");
    assert!(body["error"].as_str().unwrap().contains("draining"), "{body}");
    tokio::task::spawn_blocking(move || handle.wait()).await.unwrap();
    assert!(std::net::TcpStream::connect(addr).is_err(), "nothing listens after SIGTERM");
}
