//! The models web app's pages follow the service, in `skiff up`, in a real headless Chromium, and
//! its canary changes keep the YAML the user wrote: a detail page turns Ready by itself after a
//! create; set canary, roll back and promote show their traffic once the status does, without a
//! reload; the manifest file keeps its comments, order and quoting, with only the one field
//! changed, and a change it cannot make in place is refused naming the field; events and the logs
//! tab's replicas follow changes made by hand. After a full rollout, "Roll back" restores the
//! previous revision's spec in the file (only the fields that differ, in place), and the page
//! shows the kept revision taking all traffic again with no new revision. Screenshots:
//! `target/web-screenshots/skiff-up-live/` and `target/web-screenshots/skiff-up-rollback/`.

mod common;

use std::time::{Duration, Instant};

use common::browser::{Browser, WAIT};
use common::{Up, folder};
use serde_json::Value;

const CONFIG: &str = "autoscaler:\n  stable-window: 6s\n  scale-to-zero-grace-period: 1s\n  tick-interval: 1s\n";

/// The user's manifest: comments above, beside and below fields, keys in their own order, quotes.
const WRITTEN: &str = "\
# Iris, as the team serves it.
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris   # the host's first label
spec:
  predictor:
    # One replica at all times.
    minReplicas: 1
    model:
      storageUri: 'file://./models/iris'   # beside this file
      modelFormat:
        name: onnx
# end of iris
";

/// Marks the page, so that a reload (which clears the mark) can be told apart from a live update.
const MARK: &str = "window.notReloaded = true";
const MARKED: &str = "return window.notReloaded === true";

/// The traffic table as `revision percent` pairs.
async fn traffic(b: &Browser) -> Vec<String> {
    let rows = b
        .eval(
            "return [...document.querySelectorAll('#revisions tr[data-revision]')]\
             .map(r => r.dataset.revision + ' ' + r.dataset.percent)",
        )
        .await;
    serde_json::from_value(rows).unwrap()
}

/// Clicks `css`, a canary button, and waits until the page says its result shows (the pending
/// note's state, cleared before the click, becomes `shown`).
async fn act(b: &Browser, css: &str, what: &str) {
    b.eval("document.querySelector('#pending').dataset.state = ''").await;
    b.click(css).await;
    let deadline = Instant::now() + WAIT;
    loop {
        let state = b.eval("return document.querySelector('#pending').dataset.state").await;
        if state == "shown" {
            return;
        }
        assert!(Instant::now() < deadline, "{what} never showed ({state}): {:?}", traffic(b).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_follow_the_service_and_canary_edits_keep_the_users_yaml() {
    let dir = folder(&["iris"]);
    let file = dir.path().join("iris.yaml");
    std::fs::write(&file, WRITTEN).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    let base = format!("http://{}/models", up.admin);
    let browser = Browser::start("skiff-up-live").await;
    let file_ref = &file;
    browser
        .run(async |b| {
            let file = file_ref;
            // A create from the form: its detail page turns Ready by itself.
            b.open(&format!("{base}/new?ns=default"), "new").await;
            b.fill("input[name=name]", "setosa").await;
            b.fill("input[name=storageUri]", "file://./models/iris").await;
            b.click("#create-form").await;
            b.wait_text("h1", "the detail page", |t| t.starts_with("setosa")).await;
            b.eval(MARK).await;
            b.shot("created").await;
            b.wait_text("h1 .status", "Ready: True without a reload", |t| t == "Ready: True").await;
            let condition =
                "return document.querySelector('table[data-part=conditions] tbody td:nth-child(2)').textContent";
            assert_eq!(b.eval(condition).await, "True", "the Ready condition");
            assert_eq!(b.eval(MARKED).await, true, "the page was reloaded");
            b.shot("ready-by-itself").await;

            // A canary from the revisions tab: the page shows it, and the file gains one line.
            let revisions = format!("{base}/details/default/iris?tab=revisions");
            b.open(&revisions, "revisions").await;
            b.eval(MARK).await;
            b.fill("#canary-percent", "20").await;
            b.click("#set-canary").await;
            b.wait_text("#canary", "the canary setting", |t| t == "20%").await;
            let with_canary =
                WRITTEN.replace("        name: onnx\n", "        name: onnx\n    canaryTrafficPercent: 20\n");
            assert_eq!(std::fs::read_to_string(file).unwrap(), with_canary, "only the canary line is new");

            // A change by hand makes a second revision: the canary takes its 20% on the open page.
            let edited =
                with_canary.replace("    minReplicas: 1\n", "    minReplicas: 1\n    containerConcurrency: 8\n");
            std::fs::write(file, &edited).unwrap();
            b.wait_text("#revisions tbody", "a 20% canary", |t| t.contains("20%") && t.contains("80%")).await;
            let split = traffic(b).await;
            assert_eq!(split, ["iris-predictor-00002 20", "iris-predictor-00001 80"], "{split:?}");
            b.shot("canary").await;

            // Roll back: the page shows the new split once the status has it, and the pending note
            // until then.
            act(b, "#rollback", "the rollback").await;
            let split = traffic(b).await;
            assert!(split.contains(&"iris-predictor-00002 0".to_owned()), "{split:?}");
            assert!(split.contains(&"iris-predictor-00001 100".to_owned()), "{split:?}");
            assert_eq!(b.text("#canary").await, "0%");
            assert_eq!(
                std::fs::read_to_string(file).unwrap(),
                edited.replace("canaryTrafficPercent: 20", "canaryTrafficPercent: 0"),
                "only the canary's value changed"
            );
            b.shot("rolled-back").await;

            // Promote: the latest takes all traffic, and the file is as the user wrote it.
            act(b, "#promote", "the promotion").await;
            assert!(b.text("#canary").await.starts_with("not set"));
            let rows = b.text("#revisions tbody").await;
            assert!(!rows.contains("80%") && !rows.contains("20%"), "{rows}");
            let split = traffic(b).await;
            assert!(split.contains(&"iris-predictor-00002 100".to_owned()), "{split:?}");
            let promoted = edited.replace("    canaryTrafficPercent: 20\n", "");
            assert_eq!(std::fs::read_to_string(file).unwrap(), promoted, "the file is as written, promoted");
            assert_eq!(b.eval(MARKED).await, true, "the page was reloaded");
            b.shot("promoted").await;

            // Events and the logs tab's replicas follow a change made by hand.
            b.open(&format!("{base}/details/default/iris?tab=events"), "events").await;
            b.eval(MARK).await;
            std::fs::write(file, promoted.replace("containerConcurrency: 8", "containerConcurrency: 4")).unwrap();
            b.wait_text("[data-part=events]", "the third revision's event", |t| t.contains("iris-predictor-00003"))
                .await;
            b.shot("events-followed").await;
            b.open(&format!("{base}/details/default/iris?tab=logs"), "logs").await;
            b.eval(MARK).await;
            b.wait_text("#logs", "log lines", |t| !t.is_empty()).await;
            std::fs::write(file, promoted.replace("containerConcurrency: 8", "containerConcurrency: 2")).unwrap();
            b.wait_text("#pod", "the fourth revision's replica", |t| t.contains("iris-predictor-00004")).await;
            assert_eq!(b.eval(MARKED).await, true, "the page was reloaded");
            b.shot("replicas-followed").await;

            // A flow mapping cannot gain a key in place: the change is refused naming the file and
            // the field, and the file stays as written.
            let flow = file.with_file_name("petal.yaml");
            let written = "# Flow style.\napiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: petal}\nspec:\n  predictor: {minReplicas: 0, model: {modelFormat: {name: onnx}, storageUri: 'file://./models/iris'}}\n";
            std::fs::write(&flow, written).unwrap();
            let deadline = Instant::now() + WAIT;
            while b.eval("return document.querySelector('#set-canary') === null").await == true {
                assert!(Instant::now() < deadline, "skiff up never read petal.yaml");
                tokio::time::sleep(Duration::from_millis(250)).await;
                b.open(&format!("{base}/details/default/petal?tab=revisions"), "flow").await;
            }
            b.click("#set-canary").await;
            let refusal = b.wait_text("#error", "the refusal", |t| !t.is_empty()).await;
            assert!(
                refusal.contains("petal.yaml: spec.predictor: a flow mapping")
                    && refusal.contains("spec.predictor.canaryTrafficPercent"),
                "{refusal}"
            );
            assert_eq!(std::fs::read_to_string(&flow).unwrap(), written, "the refused change wrote nothing");
            b.shot("flow-refused").await;
        })
        .await;
    up.stop();
}

/// The user's manifest at `model` (`v1`, `v2`): commented, with a quoted storageUri.
fn versioned(model: &str) -> String {
    format!(
        "# Iris, as the team serves it.\napiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  \
         name: iris\nspec:\n  predictor:\n    minReplicas: 1   # always one\n    model:\n      # the model version\n      \
         storageUri: 'file://./models/{model}'\n      modelFormat: {{name: onnx}}\n# end of iris\n"
    )
}

/// Whether `skiff get -o json`'s `status` has `<name>-predictor-0000<latest>` rolled out and
/// ready, after `…0000<previous>`.
fn rolled_out(status: &Value, name: &str, latest: u32, previous: u32) -> bool {
    let services = status["services"].as_array().cloned().unwrap_or_default();
    let Some(service) = services.iter().find(|s| s["name"] == name) else { return false };
    let revision = |n: u32| format!("{name}-predictor-{n:05}");
    service["latestRolledoutRevision"] == revision(latest).as_str()
        && service["previousRolledoutRevision"] == revision(previous).as_str()
        && service["revisions"][0]["ready"].as_u64() >= Some(1)
}

/// Opens `url`, the revisions tab, until its Roll back button offers to restore `revision` (the
/// page may have been rendered before the rollout).
async fn open_restorable(b: &mut Browser, url: &str, revision: &str) {
    b.open(url, "revisions").await;
    let offered = format!("return document.querySelector('#rollback')?.dataset.restore === '{revision}'");
    let deadline = Instant::now() + WAIT;
    while b.eval(&offered).await != true {
        assert!(Instant::now() < deadline, "Roll back never offered to restore {revision}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roll_back_after_a_full_rollout_restores_the_previous_spec_in_place() {
    let dir = folder(&["v1", "v2"]);
    let file = dir.path().join("iris.yaml");
    std::fs::write(&file, versioned("v1")).unwrap();
    let up = Up::start(dir.path(), CONFIG);
    let limit = Duration::from_secs(60);
    up.wait_for("v1 rolled out", limit, |s| {
        s["services"][0]["latestRolledoutRevision"] == "iris-predictor-00001"
            && s["services"][0]["revisions"][0]["ready"].as_u64() >= Some(1)
    })
    .await;
    std::fs::write(&file, versioned("v2")).unwrap();
    up.wait_for("v2 rolled out after v1", limit, |s| rolled_out(s, "iris", 2, 1)).await;
    let base = format!("http://{}/models", up.admin);
    let browser = Browser::start("skiff-up-rollback").await;
    let (file_ref, up_ref) = (&file, &up);
    browser
        .run(async |b| {
            let (file, up) = (file_ref, up_ref);
            open_restorable(b, &format!("{base}/details/default/iris?tab=revisions"), "iris-predictor-00001").await;
            b.eval(MARK).await;
            b.shot("rolled-out").await;

            // Roll back: the file is v1's again, comments and all, and the page shows v1 taking all
            // traffic once the status does, with no third revision.
            act(b, "#rollback", "the restored v1").await;
            assert_eq!(std::fs::read_to_string(file).unwrap(), versioned("v1"), "v1's file, byte for byte");
            assert_eq!(traffic(b).await, ["iris-predictor-00001 100"]);
            assert!(b.text("#canary").await.starts_with("not set"));
            assert_eq!(b.eval(MARKED).await, true, "the page was reloaded");
            let status = up.status().await;
            let service = &status["services"][0];
            assert_eq!(service["latestCreatedRevision"], "iris-predictor-00001", "no new revision: {status:#}");
            assert_eq!(service["keptRevisions"], serde_json::json!(["iris-predictor-00002"]), "{status:#}");
            let reply = up.infer("iris").await.unwrap();
            assert_eq!((reply.status.as_u16(), reply.revision.as_deref()), (200, Some("iris-predictor-00001")));
            // The button now offers the way forward: v2's spec, kept at zero.
            let offered = "return document.querySelector('#rollback').dataset.restore";
            assert_eq!(b.eval(offered).await, "iris-predictor-00002");
            b.shot("restored").await;

            // A spec that cannot be restored in place (a flow mapping gaining a key) is refused
            // naming the file and the field, and the file stays as written.
            let petal = file.with_file_name("petal.yaml");
            let block = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: petal\nspec:\n  predictor:\n    minReplicas: 1\n    model: {modelFormat: {name: onnx}, storageUri: 'file://./models/v1'}\n";
            std::fs::write(&petal, block).unwrap();
            up.wait_for("petal v1", limit, |s| {
                s["services"].as_array().is_some_and(|all| {
                    all.iter().any(|s| {
                        s["name"] == "petal" && s["latestRolledoutRevision"] == "petal-predictor-00001"
                            && s["revisions"][0]["ready"].as_u64() >= Some(1)
                    })
                })
            })
            .await;
            let flow = "# Flow style.\napiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata: {name: petal}\nspec:\n  predictor: {model: {modelFormat: {name: onnx}, storageUri: 'file://./models/v2'}}\n";
            std::fs::write(&petal, flow).unwrap();
            up.wait_for("petal v2 after v1", limit, |s| rolled_out(s, "petal", 2, 1)).await;
            open_restorable(b, &format!("{base}/details/default/petal?tab=revisions"), "petal-predictor-00001").await;
            b.click("#rollback").await;
            let refusal = b.wait_text("#error", "the refusal", |t| !t.is_empty()).await;
            assert!(
                refusal.contains("petal.yaml: restoring the spec of petal-predictor-00001: spec.predictor: a flow mapping")
                    && refusal.contains("spec.predictor.minReplicas"),
                "{refusal}"
            );
            assert_eq!(std::fs::read_to_string(&petal).unwrap(), flow, "the refused rollback wrote nothing");
            b.shot("restore-refused").await;
        })
        .await;
    up.stop();
}
