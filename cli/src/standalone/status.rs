//! What `skiff up` reports and `skiff get` prints: each InferenceService with its URL and
//! readiness, and per revision its replicas and traffic, like `kubectl get isvc` and `kubectl get revisions`,
//! and why its replicas fail (KServe's `lastFailureInfo`: `ModelLoadFailed` with the error) or why
//! it gave up starting (`ProgressDeadlineExceeded`).

use std::fmt::Write;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use skiff_api::revision::RevisionTemplate;

use super::models::FetchStatus;

/// Everything `skiff up` is serving.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Services by name.
    pub services: Vec<ServiceStatus>,
    /// Manifests that were refused, `file: field: message`.
    pub errors: Vec<String>,
    /// Unknown fields of the manifests that were accepted, `file: unknown field "path"`.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// InferenceGraphs by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub graphs: Vec<super::graphs::GraphStatus>,
}

/// One InferenceService.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceStatus {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `http://<name>.<namespace>.<domain>`.
    pub url: String,
    /// Some revision can serve.
    pub ready: bool,
    /// The manifest file.
    pub file: String,
    /// Newest revision.
    pub latest_created_revision: Option<String>,
    /// Newest revision that has been ready.
    pub latest_ready_revision: Option<String>,
    /// Revision that last took all traffic.
    pub latest_rolledout_revision: Option<String>,
    /// The one before it.
    pub previous_rolledout_revision: Option<String>,
    /// Revisions with traffic (or the newest).
    pub revisions: Vec<RevisionStatus>,
    /// Revisions without traffic kept at zero replicas for a rollback (restoring the spec one ran
    /// routes to it again), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_revisions: Vec<String>,
    /// The predictor spec of the previous rolled-out revision while it is kept: what the web app's
    /// "Roll back" restores. In process only (`skiff get` does not read it).
    #[serde(skip)]
    pub previous_template: Option<RevisionTemplate>,
}

/// One revision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevisionStatus {
    /// `<name>-predictor-NNNNN`.
    pub name: String,
    /// Traffic share.
    pub percent: u32,
    /// `latest` / `prev`.
    pub tag: Option<String>,
    /// Replicas the autoscaler asked for.
    pub desired: u32,
    /// Replicas ready now.
    pub ready: u32,
    /// Replicas that exited without being asked to.
    pub restarts: u32,
    /// Spawn to ready of its latest replica.
    pub last_start_ms: Option<u64>,
    /// Of that, spawn until the process listened; the rest is loading the model.
    pub last_spawn_ms: Option<u64>,
    /// The latest fetch of its model from a store (`s3://`, `gs://`, `https://`, `hf://`), before
    /// the replica started.
    #[serde(default)]
    pub fetched: Option<FetchStatus>,
    /// Addresses of its ready replicas.
    pub replicas: Vec<String>,
    /// Requests the activator holds for it.
    pub queued: u64,
    /// Its newest cold start, first held request to its answer (as the activator saw it).
    #[serde(default)]
    pub cold_start_last_ms: Option<u64>,
    /// The median of its recent cold starts.
    #[serde(default)]
    pub cold_start_p50_ms: Option<u64>,
    /// The autoscaler's latest decision.
    #[serde(default)]
    pub autoscaler: Option<AutoscalerStatus>,
    /// Replicas started, failures and back-off.
    #[serde(flatten, default)]
    pub health: ReplicaHealth,
}

/// A revision's replicas starting and failing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaHealth {
    /// Replica processes started so far (a model refused before its start is not one).
    #[serde(default)]
    pub spawns: u32,
    /// Why the latest replica failed, until one is ready again.
    #[serde(default)]
    pub last_failure_info: Option<FailureInfo>,
    /// While the revision backs off after a failure (CrashLoopBackOff): the wait before the next
    /// start, in milliseconds.
    #[serde(default)]
    pub back_off_ms: Option<u64>,
}

/// Why a replica failed, as KServe's `status.modelStatus.lastFailureInfo`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureInfo {
    /// `ModelLoadFailed` when it never became ready (its model was refused or did not load),
    /// `Error` when it failed after serving.
    pub reason: String,
    /// What went wrong: the server's termination message, else the end of the replica's log.
    pub message: String,
    /// The exit code, when it exited with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

impl ServiceStatus {
    /// The failure of its first revision that has one.
    pub fn failure(&self) -> Option<&FailureInfo> {
        self.revisions.iter().find_map(|r| r.health.last_failure_info.as_ref())
    }
}

/// What the autoscaler decided for a revision at its latest tick or poke.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerStatus {
    /// Pods it wants, before the backend converges.
    pub desired_pods: u32,
    /// Whether it is in panic mode (it never scales down while panicking).
    pub panic: bool,
    /// The metric's average over the stable window.
    pub observed_stable: f64,
    /// The metric's average over the panic window.
    pub observed_panic: f64,
    /// Spare capacity beyond the target burst capacity (negative: the activator stays in the path).
    pub excess_burst_capacity: i64,
    /// While the revision is at zero because it gave up starting (no replica ready within its
    /// progress deadline plus Knative's 30 s, and no request waiting): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timed_out: Option<String>,
}

impl AutoscalerStatus {
    /// The status of `decision`, for a revision with this progress deadline (`None`: Knative's
    /// default).
    pub fn of(decision: skiff_autoscaler::Decision, progress_deadline: Option<Duration>) -> Self {
        AutoscalerStatus {
            desired_pods: decision.desired_pods,
            panic: decision.panic,
            observed_stable: decision.observed_stable,
            observed_panic: decision.observed_panic,
            excess_burst_capacity: decision.excess_burst_capacity,
            timed_out: decision
                .activation_timed_out
                .then(|| skiff_autoscaler::activation::timed_out_message(progress_deadline)),
        }
    }
}

impl RevisionStatus {
    /// Why the revision does not serve, if it says: its replica's failure, else its activation
    /// timing out (`ProgressDeadlineExceeded`).
    pub fn reason(&self) -> Option<(&str, &str)> {
        let failure = self.health.last_failure_info.as_ref().map(|f| (f.reason.as_str(), f.message.as_str()));
        let timed_out = self.autoscaler.as_ref().and_then(|a| a.timed_out.as_deref());
        failure.or(timed_out.map(|message| (skiff_autoscaler::activation::TIMED_OUT_REASON, message)))
    }
}

/// The columns of [`table`], one name each.
const COLUMNS: [&str; 11] = [
    "NAMESPACE",
    "NAME",
    "URL",
    "READY",
    "REVISION",
    "TRAFFIC",
    "TAG",
    "REPLICAS",
    "RESTARTS",
    "COLD START LAST/P50",
    "REASON",
];

/// A `kubectl get -A`-style table: each service's namespace, name, URL and readiness, then per
/// revision its traffic and `REPLICAS` as ready/desired (as `kubectl get deployments` shows them).
pub fn table(status: &Status) -> String {
    let mut out = String::new();
    let mut rows: Vec<Vec<String>> = vec![COLUMNS.iter().map(|s| (*s).to_owned()).collect()];
    for service in &status.services {
        let ready = if service.ready { "True" } else { "False" };
        let first = [service.namespace.clone(), service.name.clone(), service.url.clone(), ready.to_owned()];
        if service.revisions.is_empty() {
            rows.push(first.iter().cloned().chain(["-".to_owned()]).collect());
        }
        for (i, revision) in service.revisions.iter().enumerate() {
            let mut row: Vec<String> = if i == 0 { first.to_vec() } else { vec![String::new(); first.len()] };
            row.extend([
                revision.name.clone(),
                format!("{}%", revision.percent),
                revision.tag.clone().unwrap_or_default(),
                format!("{}/{}", revision.ready, revision.desired),
                revision.restarts.to_string(),
                match (revision.cold_start_last_ms, revision.cold_start_p50_ms) {
                    (Some(last), Some(p50)) => format!("{last}ms/{p50}ms"),
                    _ => "-".to_owned(),
                },
                revision.reason().map(|(reason, _)| reason.to_owned()).unwrap_or_default(),
            ]);
            rows.push(row);
        }
    }
    let widths: Vec<usize> =
        (0..COLUMNS.len()).map(|c| rows.iter().map(|r| r.get(c).map_or(0, String::len)).max().unwrap_or(0)).collect();
    for row in rows {
        let line: Vec<String> = row.iter().enumerate().map(|(c, cell)| format!("{cell:<w$}", w = widths[c])).collect();
        let _ = writeln!(out, "{}", line.join("   ").trim_end());
    }
    for service in &status.services {
        for revision in &service.revisions {
            if let Some(failure) = &revision.health.last_failure_info {
                let back_off = revision.health.back_off_ms.map(|ms| format!(" (next start in {ms}ms)"));
                let _ = writeln!(
                    out,
                    "{}: {}: {}{}",
                    revision.name,
                    failure.reason,
                    failure.message,
                    back_off.unwrap_or_default()
                );
            } else if let Some((reason, message)) = revision.reason() {
                let _ = writeln!(out, "{}: {reason}: {message}", revision.name);
            }
        }
    }
    if !status.graphs.is_empty() {
        let _ = writeln!(out, "\nINFERENCEGRAPHS");
        for graph in &status.graphs {
            let ready = if graph.ready { "True" } else { "False" };
            let _ = writeln!(out, "{}   {}   {}   {ready}", graph.namespace, graph.name, graph.url);
            for node in &graph.nodes {
                let _ = writeln!(out, "  {node}");
            }
            if let Some(reason) = &graph.reason {
                let _ = writeln!(out, "  not ready: {reason}");
            }
        }
    }
    for warning in &status.warnings {
        let _ = writeln!(out, "warning: {warning}");
    }
    for error in &status.errors {
        let _ = writeln!(out, "refused: {error}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_canary_shows_both_revisions_under_one_service() {
        let revision = |name: &str, percent, tag: &str| RevisionStatus {
            name: name.into(),
            percent,
            tag: Some(tag.into()),
            desired: 1,
            ready: 1,
            restarts: 0,
            last_start_ms: Some(80),
            last_spawn_ms: Some(30),
            fetched: None,
            replicas: vec!["127.0.0.1:4000".into()],
            queued: 0,
            cold_start_last_ms: (tag == "latest").then_some(45),
            cold_start_p50_ms: (tag == "latest").then_some(40),
            autoscaler: None,
            health: ReplicaHealth { spawns: 1, ..ReplicaHealth::default() },
        };
        let status = Status {
            services: vec![ServiceStatus {
                name: "iris".into(),
                namespace: "default".into(),
                url: "http://iris.default.example.com".into(),
                ready: true,
                file: "examples/iris.yaml".into(),
                latest_created_revision: Some("iris-predictor-00002".into()),
                latest_ready_revision: Some("iris-predictor-00002".into()),
                latest_rolledout_revision: Some("iris-predictor-00001".into()),
                previous_rolledout_revision: None,
                kept_revisions: Vec::new(),
                previous_template: None,
                revisions: vec![
                    revision("iris-predictor-00002", 20, "latest"),
                    revision("iris-predictor-00001", 80, "prev"),
                ],
            }],
            errors: vec!["bad.yaml: spec.predictor.timeout: 0 is less than 1".into()],
            warnings: vec!["iris.yaml: unknown field \"spec.predictor.minReplica\"".into()],
            graphs: Vec::new(),
        };
        let text = table(&status);
        let lines: Vec<&str> = text.lines().collect();
        let columns: Vec<&str> = lines[0].split("   ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(columns, COLUMNS, "{text}");
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            cells[..9],
            [
                "default",
                "iris",
                "http://iris.default.example.com",
                "True",
                "iris-predictor-00002",
                "20%",
                "latest",
                "1/1",
                "0"
            ],
            "{text}"
        );
        assert!(lines[1].ends_with("45ms/40ms"), "{text}");
        assert!(lines[2].trim_start().starts_with("iris-predictor-00001") && lines[2].contains("80%"), "{text}");
        assert!(lines[2].ends_with('-'), "{text}");
        assert_eq!(lines[3], "warning: iris.yaml: unknown field \"spec.predictor.minReplica\"");
        assert_eq!(lines[4], "refused: bad.yaml: spec.predictor.timeout: 0 is less than 1");

        let mut other = status.services[0].clone();
        other.namespace = "team-a".into();
        let two = Status { services: vec![status.services[0].clone(), other], ..Status::default() };
        let text = table(&two);
        let firsts: Vec<(&str, &str)> = text
            .lines()
            .filter_map(|l| {
                let mut cells = l.split_whitespace();
                Some((cells.next()?, cells.next()?)).filter(|(_, name)| *name == "iris")
            })
            .collect();
        assert_eq!(firsts, [("default", "iris"), ("team-a", "iris")], "two iris in two namespaces: {text}");
    }

    #[test]
    fn a_failing_revision_says_why_in_the_table_and_the_document() {
        let failure = FailureInfo {
            reason: "ModelLoadFailed".into(),
            message: "cannot load model 'iris' from /m/model.onnx: not an ONNX model: the file is empty".into(),
            exit_code: None,
        };
        let revision = RevisionStatus {
            name: "iris-predictor-00001".into(),
            percent: 100,
            tag: None,
            desired: 1,
            ready: 0,
            restarts: 0,
            last_start_ms: None,
            last_spawn_ms: None,
            fetched: None,
            replicas: Vec::new(),
            queued: 0,
            cold_start_last_ms: None,
            cold_start_p50_ms: None,
            autoscaler: None,
            health: ReplicaHealth { spawns: 0, last_failure_info: Some(failure.clone()), back_off_ms: Some(20_000) },
        };
        let service = ServiceStatus {
            name: "iris".into(),
            namespace: "default".into(),
            url: "http://iris.default.example.com".into(),
            ready: false,
            file: "iris.yaml".into(),
            latest_created_revision: Some("iris-predictor-00001".into()),
            latest_ready_revision: None,
            latest_rolledout_revision: None,
            previous_rolledout_revision: None,
            kept_revisions: Vec::new(),
            previous_template: None,
            revisions: vec![revision],
        };
        assert_eq!(service.failure(), Some(&failure));
        let status = Status { services: vec![service], ..Status::default() };
        let text = table(&status);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("REASON") && lines[1].ends_with("ModelLoadFailed"), "{text}");
        assert_eq!(
            lines[2],
            "iris-predictor-00001: ModelLoadFailed: cannot load model 'iris' from /m/model.onnx: not an ONNX model: \
             the file is empty (next start in 20000ms)"
        );
        let json = serde_json::to_value(&status).unwrap();
        let revision = &json["services"][0]["revisions"][0];
        assert_eq!(revision["lastFailureInfo"]["reason"], "ModelLoadFailed");
        assert_eq!(revision["backOffMs"], 20_000);
        assert_eq!(revision["spawns"], 0);
        assert_eq!(serde_json::from_value::<Status>(json).unwrap(), status);
    }
}
