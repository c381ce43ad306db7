//! SIGTERM stops the router gracefully (its own test binary: the signal goes to the whole process).

mod support;

use std::sync::Arc;

use skiff_dataplane::endpoints::Endpoints;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_router() {
    let activator = upstream("activator").await;
    let (_router, handle) = router(Arc::new(Endpoints::default()), activator.addr);
    let addr = handle.listen_addr();
    assert_eq!(Caller::new(addr).get("x", "/healthz").await.0, 200);

    let status = std::process::Command::new("kill").args(["-TERM", &std::process::id().to_string()]).status().unwrap();
    assert!(status.success());
    tokio::task::spawn_blocking(move || handle.wait()).await.unwrap();
    assert!(std::net::TcpStream::connect(addr).is_err(), "nothing listens after SIGTERM");
}
