//! The models web app in `skiff up`, in a real headless Chromium: create a service with the form
//! (a refused one first), see it become Ready on the live index, send requests and see the
//! metrics chart move, set a canary and promote it with one click each, read a replica's logs,
//! delete the service. Screenshots of every page: `target/web-screenshots/<test>/`.

mod common;

use std::time::{Duration, Instant};

use common::browser::{Browser, WAIT};
use common::{Up, folder};
use fantoccini::Locator;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\nactivator:\n  maxPending: 1000\n";

/// Reloads `url` until the text of `css` satisfies `check`.
async fn reload_until(b: &mut Browser, url: &str, css: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        b.client.goto(url).await.unwrap();
        if let Ok(element) = b.client.find(Locator::Css(css)).await {
            let text = element.text().await.unwrap_or_default();
            if check(&text) {
                return text;
            }
            assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}; {css} says {text:?}");
        }
        assert!(Instant::now() < deadline, "waited {WAIT:?} for {what}; no {css}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The value of the last point of the panel `id`'s first line, once it has points.
async fn last_value(b: &Browser, id: &str) -> Option<f64> {
    let script = format!(
        "const f = document.querySelector('figure[data-panel=\"{id}\"] .legend span'); \
         return f ? f.textContent : null;"
    );
    let text = b.eval(&script).await;
    text.as_str()?.rsplit(": ").next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_app_manages_a_service_in_skiff_up() {
    let dir = folder(&["iris"]);
    let up = Up::start(dir.path(), CONFIG);
    let base = format!("http://{}/models", up.admin);
    let browser = Browser::start("skiff-up").await;
    let (up_ref, dir_ref) = (&up, &dir);
    browser
        .run(async |b| {
            let (up, dir) = (up_ref, dir_ref);
            b.open(&format!("{base}/"), "index-empty").await;
            b.wait_text("#services tbody", "the empty index", |t| t.contains("No InferenceServices yet")).await;

            // A manifest written by hand that skiff up refuses shows on the index with its reason.
            let broken = common::manifest("broken", "iris", "minReplicas: 9\nmaxReplicas: 2");
            std::fs::write(dir.path().join("broken.yaml"), broken).unwrap();
            let refused =
                reload_until(b, &format!("{base}/"), "#refused", "the refused manifest", |t| t.contains("broken.yaml"))
                    .await;
            assert!(
                refused.contains("broken.yaml: spec.predictor.minReplicas: 9 is more than maxReplicas 2"),
                "{refused}"
            );
            b.shot("index-refused").await;
            std::fs::remove_file(dir.path().join("broken.yaml")).unwrap();

            // The form shows the YAML it will submit; a refused manifest shows `file: field: message`.
            b.click("#new").await;
            b.fill("input[name=name]", "iris").await;
            b.fill("input[name=storageUri]", "file://./models/iris").await;
            b.fill("input[name=minReplicas]", "5").await;
            b.fill("input[name=maxReplicas]", "3").await;
            b.click("#use-form").await;
            let yaml = b.eval("return document.querySelector('#yaml').value").await;
            let deadline = Instant::now() + WAIT;
            let mut yaml = yaml.as_str().unwrap_or_default().to_owned();
            while !yaml.contains("maxReplicas: 3") {
                assert!(Instant::now() < deadline, "the form never showed its YAML: {yaml:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
                yaml = b.eval("return document.querySelector('#yaml').value").await.as_str().unwrap().to_owned();
            }
            assert!(yaml.contains("name: iris") && yaml.contains("namespace: default"), "{yaml}");
            b.shot("form").await;
            b.click("#create").await;
            let refusal = b.wait_text("#error", "the refusal", |t| !t.is_empty()).await;
            assert!(
                refusal.contains("iris.yaml: spec.predictor.minReplicas: 5 is more than maxReplicas 3"),
                "{refusal}"
            );
            b.shot("refused").await;

            b.fill("input[name=minReplicas]", "1").await;
            b.click("#use-form").await;
            tokio::time::sleep(Duration::from_millis(500)).await;
            b.click("#create").await;
            b.wait_text("h1", "the detail page", |t| t.starts_with("iris")).await;
            b.shot("created").await;
            assert!(dir.path().join("iris.yaml").is_file(), "create writes the file into the folder");

            // The live index turns Ready without a reload.
            b.open(&format!("{base}/?ns=default"), "index").await;
            b.wait_text("#services tbody", "iris on the index", |t| t.contains("iris")).await;
            let ready = b.client.wait().at_most(WAIT).for_element(Locator::Css("tr[data-ready=True]")).await;
            assert!(ready.is_ok(), "the row never turned Ready");
            b.shot("index-ready").await;

            // Requests move the metrics chart.
            b.open(&format!("{base}/details/default/iris?tab=metrics"), "metrics-before").await;
            let deadline = Instant::now() + WAIT;
            loop {
                for _ in 0..20 {
                    let reply = up.infer("iris").await.unwrap();
                    assert_eq!(reply.status, 200);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
                if last_value(b, "rate").await.is_some_and(|v| v > 0.0) {
                    break;
                }
                assert!(Instant::now() < deadline, "the request-rate chart never moved");
            }
            let points =
                b.eval("return document.querySelector('figure[data-panel=\"replicas\"]').dataset.points").await;
            assert_ne!(points, "0", "the replicas chart has points");
            b.shot("metrics").await;

            // A canary with one click, then a new revision takes that share, then promote.
            let revisions = format!("{base}/details/default/iris?tab=revisions");
            b.open(&revisions, "revisions").await;
            b.fill("#canary-percent", "20").await;
            b.click("#set-canary").await;
            reload_until(b, &revisions, "#canary", "the canary setting", |t| t == "20%").await;
            let manifest = std::fs::read_to_string(dir.path().join("iris.yaml")).unwrap();
            assert!(manifest.contains("canaryTrafficPercent: 20"), "{manifest}");
            let changed = manifest.replace("minReplicas: 1", "minReplicas: 1\n    containerConcurrency: 8");
            assert_ne!(changed, manifest);
            std::fs::write(dir.path().join("iris.yaml"), changed).unwrap();
            reload_until(b, &revisions, "#revisions tbody", "a 20% canary", |t| t.contains("20%") && t.contains("80%"))
                .await;
            b.shot("canary").await;
            b.click("#promote").await;
            reload_until(b, &revisions, "#revisions tbody", "the promotion", |t| {
                t.contains("iris-predictor-00002") && t.contains("100%") && !t.contains("80%")
            })
            .await;
            b.shot("promoted").await;

            // What happened, and the manifest as stored.
            b.open(&format!("{base}/details/default/iris?tab=events"), "events").await;
            let events = b.text("#events").await;
            for reason in ["Created", "RevisionCreated", "Ready", "Scaled"] {
                assert!(events.contains(reason), "no {reason} event: {events}");
            }
            b.open(&format!("{base}/details/default/iris?tab=yaml"), "yaml").await;
            let yaml = b.text("pre.yaml").await;
            assert!(
                yaml.contains("storageUri: file://./models/iris") && yaml.contains("containerConcurrency: 8"),
                "{yaml}"
            );

            // A replica's output, streamed.
            b.open(&format!("{base}/details/default/iris?tab=logs"), "logs").await;
            let logs = b.wait_text("#logs", "log lines", |t| t.contains("listening")).await;
            assert!(logs.lines().count() >= 1, "{logs}");
            b.shot("logs-streamed").await;

            // Delete, after the confirmation.
            b.open(&format!("{base}/details/default/iris"), "overview").await;
            let curl = b.text("#curl").await;
            assert!(curl.contains(&up.addr.to_string()) && curl.contains("Host: iris.default"), "{curl}");
            b.click("#delete").await;
            b.client.accept_alert().await.unwrap();
            b.wait_text("#services tbody", "the empty index", |t| t.contains("No InferenceServices yet")).await;
            assert!(!dir.path().join("iris.yaml").exists(), "delete removes the file");
            b.shot("deleted").await;
        })
        .await;
    up.stop();
}
