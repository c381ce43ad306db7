//! The models web app in `skiff up`, in a real headless Chromium: create a service with the form
//! (a refused one first), see it become Ready on the live index, send requests and see the
//! metrics chart move, set a canary and promote it with one click each, read a replica's logs,
//! delete the service; traffic sent while nobody looked shows on the metrics tab opened later
//! (`SKIFF_SCREENSHOTS=docs/images` saves it as `metrics.png`). And what a page of another
//! origin, or of a name rebound to this machine (DNS rebinding), can do with it: nothing.
//! Screenshots of every page: `target/web-screenshots/<test>/`.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::browser::{Browser, WAIT};
use common::{Up, folder};
use fantoccini::Locator;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

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
         return f ? f.dataset.last : null;"
    );
    let text = b.eval(&script).await;
    text.as_str()?.parse().ok()
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

            // A manifest written by hand that skiff up refuses shows on the open index with its
            // reason, and goes with its file, without a reload; so does a misspelled field's warning.
            let broken = common::manifest("broken", "iris", "minReplicas: 9\nmaxReplicas: 2");
            std::fs::write(dir.path().join("broken.yaml"), broken).unwrap();
            let refused = b.wait_text("#refused", "the refused manifest", |t| t.contains("broken.yaml")).await;
            assert!(
                refused.contains("broken.yaml: spec.predictor.minReplicas: 9 is more than maxReplicas 2"),
                "{refused}"
            );
            b.shot("index-refused").await;
            std::fs::remove_file(dir.path().join("broken.yaml")).unwrap();
            b.wait_text("#notices", "the refusal gone", str::is_empty).await;
            std::fs::write(dir.path().join("typo.yaml"), common::manifest("typo", "iris", "minReplica: 0")).unwrap();
            let warned = b.wait_text("#warnings", "the warning", |t| t.contains("typo.yaml")).await;
            assert!(warned.contains("spec.predictor.minReplica"), "{warned}");
            std::fs::remove_file(dir.path().join("typo.yaml")).unwrap();
            b.wait_text("#notices", "the warning gone", str::is_empty).await;
            b.wait_text("#services tbody", "the index empty again", |t| t.contains("No InferenceServices yet")).await;

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
            assert!(!logs.contains("{\"timestamp\"") && !logs.contains("\"fields\""), "raw JSON lines: {logs}");
            // As a log viewer shows them: time, level and message; the other fields on demand.
            let line = "[...document.querySelectorAll('#logs .log-line')].find(l => \
                        l.querySelector('.message')?.textContent.includes('listening'))";
            let shown = b
                .eval(&format!(
                    "const l = {line}; const f = l.querySelector('dl.fields'); \
                     return {{time: l.querySelector('time').textContent, level: l.querySelector('.level').textContent, \
                             message: l.querySelector('.message').textContent, expandable: l.tagName, \
                             fieldsShown: !!f && f.getBoundingClientRect().height > 0}}"
                ))
                .await;
            let time = shown["time"].as_str().unwrap_or_default();
            assert!(
                time.len() == 12 && time.as_bytes()[2] == b':' && time.as_bytes()[8] == b'.',
                "HH:MM:SS.mmm: {shown}"
            );
            assert_eq!(shown["level"], "INFO", "{shown}");
            assert_eq!((&shown["expandable"], &shown["fieldsShown"]), (&json!("DETAILS"), &json!(false)), "{shown}");
            b.eval(&format!("{line}.querySelector('summary').click()")).await;
            let fields = b
                .eval(&format!(
                    "const f = {line}.querySelector('dl.fields'); \
                     return {{shown: f.getBoundingClientRect().height > 0, names: [...f.querySelectorAll('dt')].map(d => d.textContent)}}"
                ))
                .await;
            assert_eq!(fields["shown"], true, "a click shows the fields: {fields}");
            assert!(fields["names"].as_array().is_some_and(|n| n.iter().any(|n| n == "target")), "{fields}");
            b.shot("logs-streamed").await;

            // Delete, after the confirmation.
            b.open(&format!("{base}/details/default/iris"), "overview").await;
            let curl = b.text("#curl").await;
            assert!(curl.contains(&up.addr.to_string()) && curl.contains("Host: iris.default"), "{curl}");
            assert!(curl.contains("/v2/models/iris/infer") && curl.contains(" -d '{"), "{curl}");
            // The command runs as shown.
            let (answer, status) = run_shown(&curl);
            assert_eq!(status, "200", "{curl}\n{answer}");
            let answer: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(answer["model_name"], "iris", "{answer}");
            assert!(answer["outputs"].as_array().is_some_and(|o| !o.is_empty()), "{answer}");
            b.click("#delete").await;
            b.client.accept_alert().await.unwrap();
            b.wait_text("#services tbody", "the empty index", |t| t.contains("No InferenceServices yet")).await;
            assert!(!dir.path().join("iris.yaml").exists(), "delete removes the file");
            b.shot("deleted").await;
        })
        .await;
    up.stop();
}

/// What the chart of panel `id` shows: its largest value, its time ticks, its value ticks and
/// its legend's revisions.
async fn drawn(b: &Browser, id: &str) -> Value {
    let script = format!(
        "const f = document.querySelector('figure[data-panel=\"{id}\"]'); if (!f) return null; \
         const texts = (css) => [...f.querySelectorAll(css)].map((e) => e.textContent); \
         return {{peak: Number(f.dataset.peak), times: texts('.xtick'), values: texts('.ytick'), \
                  legend: [...f.querySelectorAll('.legend span')].map((e) => e.dataset.revision)}};"
    );
    b.eval(&script).await
}

/// Traffic sent while no Metrics tab was open (and no metrics asked for) shows when the tab is
/// opened later: the app samples every revision from the start. The charts have clock times on
/// the time axis, units on the value axis and only the revisions in view in the legend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_tab_shows_traffic_sent_while_nobody_looked() {
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), common::manifest("iris", "iris", "minReplicas: 1")).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    up.wait_for("iris ready", WAIT, |s| s["services"][0]["ready"] == true).await;
    // Traffic for five sampling intervals (5 s each), faster then slower, nobody looking.
    for (seconds, pause) in [(13, 20), (12, 100)] {
        let until = Instant::now() + Duration::from_secs(seconds);
        while Instant::now() < until {
            for _ in 0..5 {
                assert_eq!(up.infer("iris").await.unwrap().status, 200);
            }
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }
    let browser = Browser::start("skiff-up-metrics").await;
    let base = format!("http://{}/models", up.admin);
    browser
        .run(async |b| {
            b.open(&format!("{base}/details/default/iris?tab=metrics"), "metrics-later").await;
            let deadline = Instant::now() + WAIT;
            let rate = loop {
                let rate = drawn(b, "rate").await;
                if rate["peak"].as_f64().is_some_and(|peak| peak > 0.0) {
                    break rate;
                }
                assert!(Instant::now() < deadline, "the rate chart shows none of the traffic sent before: {rate}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            let times: Vec<&str> = rate["times"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
            assert!(times.len() >= 2, "a time axis with clock times: {rate}");
            for time in &times {
                let digits: Vec<&str> = time.split(':').collect();
                assert!(
                    (2..=3).contains(&digits.len()) && digits.iter().all(|d| d.len() == 2 && d.parse::<u8>().is_ok()),
                    "{time} is not a clock time"
                );
            }
            for (id, unit) in [("rate", " req/s"), ("p50", " ms"), ("replicas", " replica")] {
                let chart = drawn(b, id).await;
                let values = chart["values"].as_array().unwrap();
                assert!(values.len() >= 2, "{id}: value ticks: {chart}");
                assert!(values.iter().all(|v| v.as_str().unwrap().contains(unit)), "{id}: ticks in {unit}: {chart}");
                assert_eq!(chart["legend"], json!(["iris-predictor-00001"]), "{id}: the revision in view");
            }
            assert!(drawn(b, "replicas").await["peak"].as_f64().unwrap() >= 1.0);
            b.shot("metrics-history").await;
            b.doc_shot("metrics.png").await;
        })
        .await;
    up.stop();
}

/// Runs `command` with bash as a user pastes it; curl's own config file (`CURL_HOME`) adds only
/// the status to what it prints. Returns the answer's body and status.
fn run_shown(command: &str) -> (String, String) {
    let curlrc = tempfile::tempdir().unwrap();
    std::fs::write(curlrc.path().join(".curlrc"), "write-out = \"\\n%{http_code}\"\n").unwrap();
    let ran = std::process::Command::new("bash")
        .args(["-c", command])
        .env("CURL_HOME", curlrc.path())
        .output()
        .expect("run the shown curl");
    let output = String::from_utf8_lossy(&ran.stdout).into_owned();
    let (answer, status) = output.rsplit_once('\n').unwrap_or_default();
    (answer.to_owned(), status.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_try_it_curl_of_a_service_at_zero_reads_its_metadata_without_waking_it_then_infers() {
    let dir = folder(&["iris"]);
    std::fs::write(dir.path().join("iris.yaml"), common::manifest("iris", "iris", "minReplicas: 0")).unwrap();
    // Revisions start at zero, and a woken one stays up for the default 60 s stable window.
    let config = "autoscaler:\n  allow-zero-initial-scale: \"true\"\n  initial-scale: \"0\"\n";
    let up = Up::start(dir.path(), config);
    up.wait_for("iris listed at zero", WAIT, |s| {
        let revision = &s["services"][0]["revisions"][0];
        revision["desired"] == 0 && revision["ready"] == 0 && s["services"][0]["ready"] == true
    })
    .await;
    let overview = format!("http://{}/models/details/default/iris", up.admin);
    let browser = Browser::start("skiff-up-try-it").await;
    let up_ref = &up;
    browser
        .run(async |b| {
            let up = up_ref;
            // At zero: the page reads nothing from the model; its curl reads the metadata.
            b.open(&overview, "at-zero").await;
            let curl = b.text("#curl").await;
            assert!(curl.ends_with("/v2/models/iris") && !curl.contains(" -d "), "{curl}");
            assert!(b.text("#curl-note").await.contains("once a replica is ready"));
            let status = up.status().await;
            assert_eq!(status["services"][0]["revisions"][0]["desired"], 0, "the page woke the service: {status}");
            let (answer, code) = run_shown(&curl);
            assert_eq!(code, "200", "{curl}\n{answer}");
            let metadata: Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(metadata["inputs"][0]["datatype"], "FP32", "{metadata}");

            // That request woke it: once a replica is ready, the curl predicts with an example body
            // (V1, KServe's default protocol, in this manifest).
            up.wait_for("a ready replica", WAIT, |s| s["services"][0]["revisions"][0]["ready"] == 1).await;
            b.open(&overview, "ready").await;
            let curl = b.text("#curl").await;
            assert!(curl.contains("/v1/models/iris:predict") && curl.contains(" -d '{\"instances\""), "{curl}");
            let (answer, code) = run_shown(&curl);
            assert_eq!(code, "200", "{curl}\n{answer}");
            let answer: Value = serde_json::from_str(&answer).unwrap();
            assert!(answer["predictions"].as_array().is_some_and(|p| p.len() == 1), "{answer}");
        })
        .await;
    up.stop();
}

/// Whether `css` lies whole inside the viewport and is what the page shows at its centre.
async fn in_view(b: &Browser, css: &str) -> Value {
    let script = format!(
        "const e = document.querySelector('{css}'); const r = e.getBoundingClientRect(); \
         const top = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2); \
         return {{bottom: r.bottom, right: r.right, height: innerHeight, width: innerWidth, \
                  shown: r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth \
                         && r.height > 0 && (top === e || e.contains(top))}};"
    );
    b.eval(&script).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_create_form_offers_what_can_run_here_and_creates_with_its_own_button() {
    let dir = folder(&["iris"]);
    // Triton's image mapped to a program that exists: its auto-selected formats are offered;
    // runtimes whose image is in no map (PaddleServer, PMMLServer, Hugging Face, MLServer's
    // mlflow, TorchServe's pytorch) are not.
    let programs = tempfile::tempdir().unwrap();
    let triton = programs.path().join("tritonserver");
    std::fs::write(&triton, "#!/bin/sh\n").unwrap();
    let map = programs.path().join("images.yaml");
    std::fs::write(&map, format!("nvcr.io/nvidia/tritonserver: {}\n", triton.display())).unwrap();
    let up = Up::start_with(dir.path(), CONFIG, &[], &["--image-map", map.to_str().unwrap(), "--web-allow-containers"]);
    let base = format!("http://{}/models", up.admin);
    let browser = Browser::start("skiff-up-create-form").await;
    let dir_ref = &dir;
    browser
        .run(async |b| {
            b.client.set_window_size(1400, 900).await.unwrap();
            b.open(&format!("{base}/new?ns=default"), "create-1400x900").await;
            let offered = b
                .eval("return [...document.querySelectorAll('select[name=modelFormat] option')].map(o => o.value)")
                .await;
            let offered: Vec<String> = serde_json::from_value(offered).unwrap();
            assert_eq!(offered.first().map(String::as_str), Some("onnx"), "{offered:?}");
            assert_eq!(offered.last().map(String::as_str), Some("custom-container"), "{offered:?}");
            for runnable in ["triton", "tensorrt", "tensorflow"] {
                assert!(offered.iter().any(|f| f == runnable), "{runnable} is not offered: {offered:?}");
            }
            for unrunnable in ["paddle", "pmml", "huggingface", "mlflow", "pytorch", "caffe"] {
                assert!(!offered.iter().any(|f| f == unrunnable), "{unrunnable} is offered: {offered:?}");
            }
            assert_eq!(offered.iter().filter(|f| *f == "onnx").count(), 1, "{offered:?}");

            let view = in_view(b, "#create-form").await;
            assert_eq!(view["shown"], true, "the form's Create button is not in view at 1400x900: {view}");
            let view = in_view(b, "#create").await;
            assert_eq!(view["shown"], true, "the YAML's Create button is not in view at 1400x900: {view}");
            b.client.set_window_size(1280, 720).await.unwrap();
            let view = in_view(b, "#create-form").await;
            assert_eq!(view["shown"], true, "the form's Create button is not in view at 1280x720: {view}");
            b.shot("create-1280x720").await;

            // The image field shows for a custom container only.
            let image_shown = "return document.querySelector('input[name=image]').offsetParent !== null";
            assert_eq!(b.eval(image_shown).await, false);
            b.eval(
                "const s = document.querySelector('select[name=modelFormat]'); s.value = 'custom-container'; \
                    s.dispatchEvent(new Event('input', {bubbles: true}));",
            )
            .await;
            assert_eq!(b.eval(image_shown).await, true);
            b.eval("document.querySelector('select[name=modelFormat]').value = 'onnx'").await;

            // The form's own Create button creates what the form says.
            b.fill("input[name=name]", "iris").await;
            b.fill("input[name=storageUri]", "file://./models/iris").await;
            b.click("#create-form").await;
            b.wait_text("h1", "the detail page", |t| t.starts_with("iris")).await;
            b.shot("created-from-the-form").await;
            let written = std::fs::read_to_string(dir_ref.path().join("iris.yaml")).unwrap();
            assert!(
                written.contains("name: onnx") && written.contains("storageUri: file://./models/iris"),
                "{written}"
            );
        })
        .await;
    up.stop();
}

/// Serves `html` at every path from a second HTTP server on 127.0.0.1 (the other site's).
async fn serve_page(html: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let html = html.clone();
            let service = service_fn(move |_| {
                let page = http::Response::builder()
                    .header("content-type", "text/html; charset=utf-8")
                    .body(Full::new(Bytes::from(html.clone())))
                    .unwrap();
                async move { Ok::<_, Infallible>(page) }
            });
            tokio::spawn(async move {
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}

/// A script for a page: from that page's origin, GETs `path`, then POSTs `manifest` to it with
/// `token` in X-XSRF-TOKEN (the page's own XSRF-TOKEN cookie when `token` is null) after setting
/// the XSRF-TOKEN cookie to `mint` when it is not null; returns both statuses and the POST's body.
fn page_script(path: &str, manifest: &str, token: Option<&str>, mint: Option<&str>) -> String {
    format!(
        "return (async () => {{\n\
           const mint = {mint};\n\
           if (mint !== null) {{ document.cookie = 'XSRF-TOKEN=' + mint + '; path=/models'; }}\n\
           const own = (document.cookie.split('; ').find(c => c.startsWith('XSRF-TOKEN=')) || '=').split('=')[1];\n\
           const token = {token} ?? own;\n\
           const list = await fetch({path});\n\
           const post = await fetch({path}, {{method: 'POST', credentials: 'same-origin',\n\
             headers: {{'Content-Type': 'application/yaml', 'X-XSRF-TOKEN': token}}, body: {manifest}}});\n\
           return {{list: list.status, post: post.status, body: await post.text()}};\n\
         }})();",
        path = json!(path),
        manifest = json!(manifest),
        token = json!(token),
        mint = json!(mint),
    )
}

/// The POST's error message in a [`page_script`] answer.
fn refusal(answer: &Value) -> String {
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap_or("")).unwrap_or_default();
    body["error"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_of_other_sites_and_rebound_names_cannot_use_the_web_app() {
    let dir = folder(&["iris"]);
    let up = Up::start_with(dir.path(), CONFIG, &[], &["--web-host", "models.test"]);
    let port = up.admin.port();
    let api = "/models/api/namespaces/default/inferenceservices";
    let marker = dir.path().join("ran");
    let shell = format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: shell\nspec:\n  \
         predictor:\n    containers:\n      - name: kserve-container\n        command: [touch, {}]\n",
        marker.display()
    );
    let iris = common::manifest("iris", "iris", "minReplicas: 0");

    // A plain client naming another Host: 421, saying why.
    let reply = common::send(
        http::Method::GET,
        &format!("http://{}/models/", up.admin),
        Bytes::new(),
        &[("host", "evil.example")],
    )
    .await
    .unwrap();
    assert_eq!(reply.status, http::StatusCode::MISDIRECTED_REQUEST);
    let error = reply.json()["error"].as_str().unwrap_or_default().to_owned();
    assert!(error.contains("Host \"evil.example\" is not a name this app answers to"), "{error}");
    // The rest of the admin port too (`skiff get`'s /status, /metrics), but for its own names.
    for path in ["/status", "/metrics"] {
        let url = format!("http://{}{path}", up.admin);
        let reply = common::send(http::Method::GET, &url, Bytes::new(), &[("host", "evil.example:80")]).await.unwrap();
        assert_eq!(reply.status, http::StatusCode::MISDIRECTED_REQUEST, "{path}");
        let reply = common::send(http::Method::GET, &url, Bytes::new(), &[("host", "localhost")]).await.unwrap();
        assert_eq!(reply.status, http::StatusCode::OK, "{path} at localhost");
    }

    // The other site: a page that submits a form into the app as soon as it loads.
    let form = format!(
        "<!doctype html><title>another site</title><form id=f method=POST enctype=text/plain \
         action='http://127.0.0.1:{port}{api}'><input name=kind value=InferenceService></form>\
         <script>document.getElementById('f').submit()</script>"
    );
    let other = serve_page(form).await;
    // evil.test, attacker.test and models.test all resolve to this machine, as a name an attacker
    // controls does once it is rebound.
    let rules = "--host-resolver-rules=MAP evil.test 127.0.0.1, MAP attacker.test 127.0.0.1, MAP models.test 127.0.0.1";
    let browser = Browser::start_with_args("web-security", &[rules]).await;
    let (shell_ref, iris_ref) = (&shell, &iris);
    browser
        .run(async |b| {
            let (shell, iris) = (shell_ref, iris_ref);
            // DNS rebinding: the app at a name that is not its own. Neither the page nor its
            // script, which may mint its own CSRF cookie and header, gets anything but 421.
            b.open(&format!("http://evil.test:{port}/models/"), "rebound-page").await;
            let page = b.text("body").await;
            assert!(page.contains("misdirected request") && page.contains("evil.test"), "{page}");
            let answer = b.eval(&page_script(api, shell, Some("minted"), Some("minted"))).await;
            assert_eq!((answer["list"].as_i64(), answer["post"].as_i64()), (Some(421), Some(421)), "{answer}");
            eprintln!("ok: at http://evil.test:{port} (rebound): page, GET and POST with a minted pair: 421");

            // A page of another site submits a form into the app: refused for its Sec-Fetch-Site.
            b.open(&format!("http://attacker.test:{}/", other.port()), "cross-site-form").await;
            let answer = b.wait_text("body", "the app's answer to the form", |t| t.contains("error")).await;
            assert!(answer.contains("403") && answer.contains("Sec-Fetch-Site is cross-site"), "{answer}");
            eprintln!("ok: a form on http://attacker.test submitting into the app: {answer}");
            // The same from another port of 127.0.0.1 (the same site, another origin).
            b.open(&format!("http://127.0.0.1:{}/", other.port()), "same-site-form").await;
            let answer = b.wait_text("body", "the app's answer to the form", |t| t.contains("error")).await;
            assert!(answer.contains("403") && answer.contains("Sec-Fetch-Site is same-site"), "{answer}");
            eprintln!("ok: a form on http://127.0.0.1:{} submitting into the app: {answer}", other.port());

            // The app's own page: a CSRF cookie the page minted for itself does not pass.
            b.open(&format!("http://127.0.0.1:{port}/models/"), "own-page").await;
            let answer = b.eval(&page_script(api, iris, Some("minted"), Some("minted"))).await;
            assert_eq!(answer["post"], 403, "{answer}");
            assert!(refusal(&answer).contains("not the token this app issued for this session"), "{answer}");
            eprintln!(
                "ok: a self-minted XSRF-TOKEN cookie and header pair on the app's page: 403 {}",
                refusal(&answer)
            );

            // With the token the app issued (restored by that answer): a custom container is refused.
            let answer = b.eval(&page_script(api, shell, None, None)).await;
            assert_eq!(answer["post"], 403, "{answer}");
            assert!(
                refusal(&answer).contains("spec.predictor.containers")
                    && refusal(&answer).contains("--web-allow-containers"),
                "{answer}"
            );
            eprintln!("ok: containers: from the web app without --web-allow-containers: 403 {}", refusal(&answer));

            // A name given with --web-host is the app's own: its page creates a service.
            b.open(&format!("http://models.test:{port}/models/"), "web-host-page").await;
            let answer = b.eval(&page_script(api, iris, None, None)).await;
            assert_eq!((answer["list"].as_i64(), answer["post"].as_i64()), (Some(200), Some(201)), "{answer}");
            eprintln!("ok: at http://models.test:{port} (--web-host): POST with the issued token: 201");
        })
        .await;
    assert!(dir.path().join("iris.yaml").is_file(), "the allowed create wrote its file");
    let files: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!files.iter().any(|f| f.contains("shell")), "no manifest with containers was written: {files:?}");
    assert!(!marker.exists(), "the container's command ran");
    up.stop();
}
