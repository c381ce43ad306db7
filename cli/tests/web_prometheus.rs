//! The web app's metrics from a real Prometheus (Debian's `prometheus`) that scrapes `skiff up`'s
//! `/metrics`: with `PROMETHEUS_URL` set, the request rate and latency panels are Prometheus's
//! answers to the app's PromQL.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Up, folder, manifest, send};
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  tick-interval: 1s\n";

struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts Prometheus on `port`, scraping `target`'s `/metrics` every second.
fn prometheus(dir: &std::path::Path, port: u16, target: &str) -> Prometheus {
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: skiff\n    \
             static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let child = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus is missing: apt-get install prometheus");
    Prometheus(child)
}

fn panel<'a>(panels: &'a Value, id: &str) -> &'a Value {
    panels.as_array().unwrap().iter().find(|p| p["id"] == id).unwrap_or_else(|| panic!("no {id} panel: {panels}"))
}

fn last_point(panel: &Value) -> Option<f64> {
    panel["series"].as_array()?.iter().filter_map(|s| s["points"].as_array()?.last()?[1].as_f64()).reduce(f64::max)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_come_from_prometheus_when_it_is_set() {
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let tsdb = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}");
    let up = Up::start_with_env(dir.path(), CONFIG, &[("PROMETHEUS_URL", &url)]);
    let _prometheus = prometheus(tsdb.path(), port, &up.admin.to_string());
    up.wait_for("iris ready", Duration::from_secs(60), |s| s["services"][0]["ready"] == true).await;

    let metrics = format!("http://{}/models/api/namespaces/default/inferenceservices/iris/metrics?minutes=5", up.admin);
    let deadline = Instant::now() + Duration::from_secs(90);
    let panels = loop {
        for _ in 0..20 {
            assert_eq!(up.infer("iris").await.unwrap().status, 200);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let reply = send(http::Method::GET, &metrics, Bytes::new(), &[]).await.unwrap();
        let panels: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
        assert_eq!(reply.status, 200, "{panels}");
        if last_point(panel(&panels, "rate")).is_some_and(|v| v > 0.0) && last_point(panel(&panels, "p99")).is_some() {
            break panels;
        }
        assert!(Instant::now() < deadline, "Prometheus never answered with a rate: {panels}");
    };
    let series = &panel(&panels, "rate")["series"][0];
    assert_eq!(series["label"], "iris-predictor-00001", "one line per revision: {series}");
    assert!(last_point(panel(&panels, "p50")).is_some_and(|ms| ms > 0.0 && ms < 1000.0), "{panels}");
    let page = send(
        http::Method::GET,
        &format!("http://{}/models/details/default/iris?tab=metrics", up.admin),
        Bytes::new(),
        &[],
    )
    .await
    .unwrap();
    assert!(String::from_utf8_lossy(&page.body).contains("From Prometheus"), "the page says where figures come from");
    up.stop();
}
