//! What `skiff up` reports and `skiff get` prints: each InferenceService with its URL and
//! readiness, and per revision its replicas and traffic, like `kubectl get isvc` and `kubectl get revisions`.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

/// Everything `skiff up` is serving.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// Services by name.
    pub services: Vec<ServiceStatus>,
    /// Manifests that were refused, `file: field: message`.
    pub errors: Vec<String>,
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
}

/// A `kubectl get`-style table.
pub fn table(status: &Status) -> String {
    let mut out = String::new();
    let header =
        ["NAME", "URL", "READY", "REVISION", "DESIRED", "READY", "TRAFFIC", "TAG", "RESTARTS", "COLD START LAST/P50"];
    let mut rows: Vec<Vec<String>> = vec![header.iter().map(|s| (*s).to_owned()).collect()];
    for service in &status.services {
        let ready = if service.ready { "True" } else { "False" };
        if service.revisions.is_empty() {
            rows.push(vec![service.name.clone(), service.url.clone(), ready.into(), "-".into()]);
        }
        for (i, revision) in service.revisions.iter().enumerate() {
            let (name, url, ready) = if i == 0 {
                (service.name.clone(), service.url.clone(), ready.to_owned())
            } else {
                (String::new(), String::new(), String::new())
            };
            rows.push(vec![
                name,
                url,
                ready,
                revision.name.clone(),
                revision.desired.to_string(),
                revision.ready.to_string(),
                format!("{}%", revision.percent),
                revision.tag.clone().unwrap_or_default(),
                revision.restarts.to_string(),
                match (revision.cold_start_last_ms, revision.cold_start_p50_ms) {
                    (Some(last), Some(p50)) => format!("{last}ms/{p50}ms"),
                    _ => "-".to_owned(),
                },
            ]);
        }
    }
    let widths: Vec<usize> =
        (0..header.len()).map(|c| rows.iter().map(|r| r.get(c).map_or(0, String::len)).max().unwrap_or(0)).collect();
    for row in rows {
        let line: Vec<String> = row.iter().enumerate().map(|(c, cell)| format!("{cell:<w$}", w = widths[c])).collect();
        let _ = writeln!(out, "{}", line.join("   ").trim_end());
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
            replicas: vec!["127.0.0.1:4000".into()],
            queued: 0,
            cold_start_last_ms: (tag == "latest").then_some(45),
            cold_start_p50_ms: (tag == "latest").then_some(40),
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
                revisions: vec![
                    revision("iris-predictor-00002", 20, "latest"),
                    revision("iris-predictor-00001", 80, "prev"),
                ],
            }],
            errors: vec!["bad.yaml: spec.predictor.timeout: 0 is less than 1".into()],
        };
        let text = table(&status);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAME"), "{text}");
        assert!(
            lines[1].contains("iris") && lines[1].contains("iris-predictor-00002") && lines[1].contains("20%"),
            "{text}"
        );
        assert!(lines[1].ends_with("45ms/40ms"), "{text}");
        assert!(lines[2].trim_start().starts_with("iris-predictor-00001") && lines[2].contains("80%"), "{text}");
        assert!(lines[2].ends_with('-'), "{text}");
        assert_eq!(lines[3], "refused: bad.yaml: spec.predictor.timeout: 0 is less than 1");
    }
}
