//! InferenceGraphs in the folder `skiff up` watches: a `*.yaml` file whose `kind` is
//! `InferenceGraph` (KServe's `serving.kserve.io/v1alpha1`) is read here rather than as an
//! InferenceService ([`super::folder`] hands such files over), validated
//! ([`skiff_api::graph::validate_graph`]; a refusal names the file and the field), and run by the
//! router at `http://<graph>.<namespace>.<domain>` (the URL KServe gives a graph) or
//! `/serving/<namespace>/<graph>`. Its `serviceName` steps are POSTed where KServe's controller
//! sends them (`GetPredictorEndpoint`): `/v1/models/<isvc>:predict`, or `/v2/models/<isvc>/infer`
//! when the predictor's `protocolVersion` is `v2`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use skiff_api::InferenceService;
use skiff_api::graph::{InferenceGraph, graph_from_yaml, reachable_services, validate_graph};
use skiff_router::graph::GraphRoute;

use super::folder::MAX_MANIFEST_BYTES;

/// One valid graph of the folder.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphManifest {
    /// The file.
    pub path: PathBuf,
    /// The graph.
    pub graph: InferenceGraph,
}

impl GraphManifest {
    /// Its namespace, `default` when unset.
    pub fn namespace(&self) -> &str {
        self.graph.metadata.namespace.as_deref().unwrap_or("default")
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.graph.metadata.name.as_deref().unwrap_or_default()
    }
}

/// One graph as `skiff get` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GraphStatus {
    /// Name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// `http://<name>.<namespace>.<domain>`.
    pub url: String,
    /// Every InferenceService it names is in the folder and ready (KServe's `Ready`).
    pub ready: bool,
    /// Why not, naming the InferenceServices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The file.
    pub file: String,
    /// Its nodes: `name (RouterType): step, step`.
    pub nodes: Vec<String>,
}

/// Reads the graph files `paths`: the valid graphs, and `file: field: message` for the others.
/// A graph may not take the name of an InferenceService of its namespace (both would answer at
/// one host).
pub fn read(paths: &[PathBuf], services: &BTreeMap<String, InferenceService>) -> (Vec<GraphManifest>, Vec<String>) {
    let mut graphs: Vec<GraphManifest> = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match read_one(path, services) {
            Ok(graph) => {
                let key = (graph.namespace().to_owned(), graph.name().to_owned());
                if let Some(owner) = graphs.iter().find(|g| (g.namespace().to_owned(), g.name().to_owned()) == key) {
                    errors.push(format!(
                        "{}: metadata.name: {}/{} is already defined in {}",
                        path.display(),
                        key.0,
                        key.1,
                        owner.path.display()
                    ));
                } else {
                    graphs.push(graph);
                }
            }
            Err(message) => errors.push(format!("{}: {message}", path.display())),
        }
    }
    (graphs, errors)
}

fn read_one(path: &Path, services: &BTreeMap<String, InferenceService>) -> Result<GraphManifest, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if meta.len() > MAX_MANIFEST_BYTES {
        return Err(format!("{} bytes is more than a manifest may hold ({MAX_MANIFEST_BYTES})", meta.len()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot be read ({})", e.kind()))?;
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Head {
        api_version: Option<String>,
    }
    let head = serde_saphyr::from_str::<Head>(&text).ok().and_then(|h| h.api_version);
    if head.as_deref() != Some(skiff_api::graph::API_VERSION) {
        return Err(format!("apiVersion: an InferenceGraph is {}", skiff_api::graph::API_VERSION));
    }
    let graph = graph_from_yaml(&text).map_err(|e| e.to_string())?;
    let name = graph.metadata.name.clone().unwrap_or_default();
    validate_graph(&name, &graph.spec).map_err(|e| e.to_string())?;
    let manifest = GraphManifest { path: path.to_owned(), graph };
    if services.contains_key(&format!("{}/{name}", manifest.namespace())) {
        return Err(format!(
            "metadata.name: {name:?} is the name of an InferenceService of namespace {}; both would answer at one host",
            manifest.namespace()
        ));
    }
    Ok(manifest)
}

/// The path KServe's controller POSTs a `serviceName` step's request to.
pub fn predict_path(isvc: &InferenceService) -> String {
    let v2 = isvc.spec.predictor.model.as_ref().and_then(|m| m.protocol_version.as_deref()) == Some("v2");
    if v2 { format!("/v2/models/{}/infer", isvc.name()) } else { format!("/v1/models/{}:predict", isvc.name()) }
}

/// The router's view of `graph`, given the folder's InferenceServices by `namespace/name`.
pub fn route(graph: &GraphManifest, services: &BTreeMap<String, InferenceService>) -> GraphRoute {
    let namespace = graph.namespace().to_owned();
    let service_paths = reachable_services(&graph.graph.spec)
        .into_iter()
        .filter_map(|s| Some((s.to_owned(), predict_path(services.get(&format!("{namespace}/{s}"))?))))
        .collect();
    GraphRoute { namespace, name: graph.name().to_owned(), spec: Arc::new(graph.graph.spec.clone()), service_paths }
}

/// The InferenceServices `graph` names that are not in the folder.
pub fn missing<'a>(graph: &'a GraphManifest, services: &BTreeMap<String, InferenceService>) -> Vec<&'a str> {
    reachable_services(&graph.graph.spec)
        .into_iter()
        .filter(|s| !services.contains_key(&format!("{}/{s}", graph.namespace())))
        .collect()
}

/// Each node as `name (RouterType): target, target`.
pub fn nodes(graph: &GraphManifest) -> Vec<String> {
    use skiff_api::graph::Target;
    graph
        .graph
        .spec
        .nodes
        .iter()
        .map(|(name, node)| {
            let steps: Vec<String> = node
                .steps
                .iter()
                .map(|s| match s.target() {
                    Some(Target::Node(n)) => format!("node {n}"),
                    Some(Target::Service(n)) => n.to_owned(),
                    Some(Target::Url(u)) => u.to_owned(),
                    None => "?".to_owned(),
                })
                .collect();
            format!("{name} ({:?}): {}", node.router_type, steps.join(", "))
        })
        .collect()
}
