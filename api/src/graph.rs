//! KServe's `serving.kserve.io/v1alpha1` InferenceGraph: InferenceServices chained into one
//! endpoint. `spec.nodes` maps node names to routers; the entry node is `root`. Each node is a
//! `Sequence`, `Switch`, `Ensemble` or `Splitter` of steps, and each step targets an
//! InferenceService (`serviceName`), a URL (`serviceUrl`) or another node (`nodeName`).
//!
//! [`validate_graph`] checks a graph as KServe's webhook does (`inference_graph_validation.go`:
//! the name, a `root` node, unique step names, exactly one target per step, Splitter weights that
//! add up to 100) and adds what KServe's router would only find out when called: a `nodeName`
//! that names no node, a cycle between nodes, and a `condition` that cannot be a GJSON path.
//! Each refusal names the field. The CRD is generated from these types
//! ([`inferencegraphs_crd`]; `crdgen inferencegraphs` prints it).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::status::Condition;

/// The API group and version of the kind.
pub const API_VERSION: &str = "serving.kserve.io/v1alpha1";
/// The kind.
pub const KIND: &str = "InferenceGraph";
/// The node a graph starts at (KServe's `GraphRootNodeName`).
pub const ROOT: &str = "root";
/// Where the CRD is checked in, relative to the repository root.
pub const INFERENCEGRAPHS_CRD_PATH: &str = "deploy/crds/serving.kserve.io_inferencegraphs.yaml";

/// `spec` of an [`InferenceGraph`]: KServe's `InferenceGraphSpec`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, CustomResource, JsonSchema)]
#[kube(
    group = "serving.kserve.io",
    version = "v1alpha1",
    kind = "InferenceGraph",
    plural = "inferencegraphs",
    namespaced,
    shortname = "ig",
    status = "InferenceGraphStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "InferenceServices chained into one endpoint (KServe InferenceGraph): sequences, switches, \
           ensembles and splitters of steps.",
    printcolumn = r#"{"name": "URL", "type": "string", "jsonPath": ".status.url"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InferenceGraphSpec {
    /// The graph's router nodes by name; the graph starts at `root`.
    pub nodes: BTreeMap<String, InferenceRouter>,
    /// The graph router's resources (kept for a cluster; `skiff up` runs the graph in its router).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_object")]
    pub resources: Option<Value>,
    /// The graph router's affinity (kept for a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_object")]
    pub affinity: Option<Value>,
    /// Seconds a call of the graph may take, all its steps together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<i64>,
    /// The router's own timeouts; `serviceClient` bounds each step's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_timeouts: Option<RouterTimeouts>,
    /// Fewest router replicas (KServe's default 1; 0 lets the router scale to zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    /// Most router replicas (0 = no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<i32>,
    /// The autoscaler's target for `scaleMetric`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_target: Option<i32>,
    /// The metric the router's autoscaler watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_metric: Option<ScaleMetric>,
    /// Tolerations of the router's pods (kept for a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_object_list")]
    pub tolerations: Option<Vec<Value>>,
    /// Node selector of the router's pods (kept for a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Node of the router's pods (kept for a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// Service account of the router's pods (kept for a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// `spec.routerTimeouts`, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouterTimeouts {
    /// Reading a request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_read: Option<i64>,
    /// Writing an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_write: Option<i64>,
    /// An idle kept-alive connection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_idle: Option<i64>,
    /// One step's call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_client: Option<i64>,
}

/// `spec.scaleMetric`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScaleMetric {
    /// CPU use.
    Cpu,
    /// Memory use.
    Memory,
    /// Requests in flight.
    Concurrency,
    /// Requests per second.
    Rps,
}

/// One node: how it routes, and its steps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InferenceRouter {
    /// `Sequence`, `Switch`, `Ensemble` or `Splitter`.
    pub router_type: RouterType,
    /// The node's steps.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<InferenceStep>,
}

/// `routerType`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RouterType {
    /// Each step in turn, passing the request or the previous step's answer on.
    #[default]
    Sequence,
    /// One step, picked at random by weight.
    Splitter,
    /// Every step at once, answers merged under the step names.
    Ensemble,
    /// The first step whose condition matches the request.
    Switch,
}

/// `dependency`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Dependency {
    /// A failure does not stop the graph (KServe's default).
    #[default]
    Soft,
    /// A failure ends the graph with the step's answer and status.
    Hard,
}

/// One step of a node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InferenceStep {
    /// The step's name, unique within its node (an Ensemble merges answers under it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Another node of the graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// An InferenceService of the graph's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// A URL the step's request is POSTed to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_url: Option<String>,
    /// `$request` (the node's input) or `$response` (the previous step's answer, in a Sequence).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// Move a `predictions` field of the step's request to `instances` (KServe 0.15+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_predictions_to_instances: Option<bool>,
    /// The step's share of a Splitter's traffic, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i64>,
    /// A GJSON path: a Switch takes the first step whose path exists in the request; a Sequence
    /// stops before a step whose path does not exist in the previous answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// `Hard` or `Soft`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<Dependency>,
}

/// What a step calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// A node of the graph.
    Node(&'a str),
    /// An InferenceService of the graph's namespace.
    Service(&'a str),
    /// A URL.
    Url(&'a str),
}

impl InferenceStep {
    /// The step's one target, when it has exactly one.
    pub fn target(&self) -> Option<Target<'_>> {
        match self.targets().as_slice() {
            [one] => Some(*one),
            _ => None,
        }
    }

    fn targets(&self) -> Vec<Target<'_>> {
        fn set(v: &Option<String>) -> Option<&str> {
            v.as_deref().filter(|s| !s.is_empty())
        }
        let mut targets = Vec::new();
        targets.extend(set(&self.node_name).map(Target::Node));
        targets.extend(set(&self.service_name).map(Target::Service));
        targets.extend(set(&self.service_url).map(Target::Url));
        targets
    }

    /// Whether the step is a hard dependency.
    pub fn is_hard(&self) -> bool {
        self.dependency == Some(Dependency::Hard)
    }

    /// Whether the step takes the previous step's answer (`data: $response`).
    pub fn takes_response(&self) -> bool {
        self.data.as_deref() == Some("$response")
    }

    /// The condition, when it has a non-empty one.
    pub fn condition(&self) -> Option<&str> {
        self.condition.as_deref().filter(|c| !c.is_empty())
    }
}

/// `status`: KServe's `InferenceGraphStatus`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InferenceGraphStatus {
    /// `Ready`, which waits for every InferenceService the graph names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The graph's URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The deployment mode it runs in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_mode: Option<String>,
    /// The generation the status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// The CustomResourceDefinition of `inferencegraphs.serving.kserve.io`.
pub fn inferencegraphs_crd() -> CustomResourceDefinition {
    InferenceGraph::crd()
}

/// The CRD as the YAML document checked in at [`INFERENCEGRAPHS_CRD_PATH`].
pub fn crd_yaml() -> Result<String> {
    let body = serde_saphyr::to_string(&inferencegraphs_crd()).map_err(|e| Error::Yaml(e.to_string()))?;
    Ok(format!(
        "# Generated from the Rust types in api/src/graph.rs: do not edit.\n\
         # Regenerate with: cargo run -q -p skiff-api --bin crdgen inferencegraphs > {INFERENCEGRAPHS_CRD_PATH}\n{body}"
    ))
}

/// Parses one InferenceGraph manifest (YAML); the error names the field being read.
pub fn graph_from_yaml(text: &str) -> Result<InferenceGraph> {
    let mut path = None;
    serde_saphyr::with_deserializer_from_str(text, |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = Some(e.path().to_string());
            e.into_inner()
        })
    })
    .map_err(|error: serde_saphyr::Error| {
        let message = error.to_string();
        let message = message.lines().next().unwrap_or_default().to_owned();
        let message = match path.as_deref() {
            None | Some(".") => message,
            Some(path) => format!("{path}: {message}"),
        };
        Error::ParseManifest { kind: KIND, message }
    })
}

/// KServe's rule for a graph's name (`GraphNameFmt`), a DNS-1035 label.
fn graph_name(name: &str) -> Result<()> {
    let bytes = name.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 63
        && bytes[0].is_ascii_lowercase()
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "metadata.name",
            format!(
                "{name:?}: an InferenceGraph name is at most 63 lower case letters, digits or '-', starting with a \
                 letter and not ending with '-' (KServe's [a-z]([-a-z0-9]*[a-z0-9])?)"
            ),
        ))
    }
}

/// Checks a graph named `name`; the error names the field.
pub fn validate_graph(name: &str, spec: &InferenceGraphSpec) -> Result<()> {
    graph_name(name)?;
    if !spec.nodes.contains_key(ROOT) {
        return Err(Error::invalid(
            "spec.nodes",
            "no node named \"root\": an InferenceGraph starts at its node \"root\"",
        ));
    }
    for (node_name, node) in &spec.nodes {
        node_steps(spec, node_name, node)?;
    }
    if let Some(cycle) = find_cycle(spec) {
        let (node, step) = cycle.last_step;
        return Err(Error::invalid(
            format!("spec.nodes.{node}.steps[{step}].nodeName"),
            format!("the nodes form a cycle: {}", cycle.path.join(" -> ")),
        ));
    }
    positive("spec.timeout", spec.timeout)?;
    if let Some(t) = &spec.router_timeouts {
        positive("spec.routerTimeouts.serverRead", t.server_read)?;
        positive("spec.routerTimeouts.serverWrite", t.server_write)?;
        positive("spec.routerTimeouts.serverIdle", t.server_idle)?;
        positive("spec.routerTimeouts.serviceClient", t.service_client)?;
    }
    if spec.min_replicas.is_some_and(|n| n < 0) {
        return Err(Error::invalid("spec.minReplicas", "must be 0 or more"));
    }
    if spec.max_replicas.is_some_and(|n| n < 0) {
        return Err(Error::invalid("spec.maxReplicas", "must be 0 (no limit) or more"));
    }
    if let (Some(min), Some(max)) = (spec.min_replicas, spec.max_replicas)
        && max > 0
        && min > max
    {
        return Err(Error::invalid("spec.minReplicas", format!("{min} is more than spec.maxReplicas ({max})")));
    }
    positive("spec.scaleTarget", spec.scale_target.map(i64::from))?;
    Ok(())
}

fn positive(field: &str, value: Option<i64>) -> Result<()> {
    match value {
        Some(v) if v < 1 => Err(Error::invalid(field, format!("{v}: must be 1 or more"))),
        _ => Ok(()),
    }
}

fn node_steps(spec: &InferenceGraphSpec, node_name: &str, node: &InferenceRouter) -> Result<()> {
    let mut names = BTreeSet::new();
    let mut weights = 0i64;
    for (i, step) in node.steps.iter().enumerate() {
        let at = format!("spec.nodes.{node_name}.steps[{i}]");
        if let Some(name) = step.name.as_deref().filter(|n| !n.is_empty())
            && !names.insert(name)
        {
            return Err(Error::invalid(
                format!("{at}.name"),
                format!("{name:?}: another step of node {node_name:?} has this name"),
            ));
        }
        match step.targets().as_slice() {
            [] => {
                return Err(Error::invalid(at, "no target: a step names one of nodeName, serviceName or serviceUrl"));
            }
            [_] => {}
            _ => {
                return Err(Error::invalid(
                    at,
                    "more than one of nodeName, serviceName, serviceUrl: a step has one target",
                ));
            }
        }
        match step.target() {
            Some(Target::Node(target)) if !spec.nodes.contains_key(target) => {
                let known: Vec<&str> = spec.nodes.keys().map(String::as_str).collect();
                return Err(Error::invalid(
                    format!("{at}.nodeName"),
                    format!("{target:?}: no such node (the graph's nodes: {})", known.join(", ")),
                ));
            }
            Some(Target::Service(service)) => service_name(&format!("{at}.serviceName"), service)?,
            Some(Target::Url(url)) => service_url(&format!("{at}.serviceUrl"), url)?,
            _ => {}
        }
        if let Some(condition) = step.condition() {
            check_condition(condition).map_err(|why| Error::invalid(format!("{at}.condition"), why))?;
        }
        if node.router_type == RouterType::Splitter {
            match step.weight {
                None => {
                    return Err(Error::invalid(
                        format!("{at}.weight"),
                        "missing: every step of a Splitter has a weight, the weights adding up to 100",
                    ));
                }
                Some(w) if !(0..=100).contains(&w) => {
                    return Err(Error::invalid(format!("{at}.weight"), format!("{w}: a weight is 0 to 100")));
                }
                Some(w) => weights += w,
            }
        }
    }
    if node.router_type == RouterType::Splitter && weights != 100 {
        return Err(Error::invalid(
            format!("spec.nodes.{node_name}.steps"),
            format!("the weights of a Splitter add up to 100, these to {weights}"),
        ));
    }
    Ok(())
}

fn service_name(field: &str, name: &str) -> Result<()> {
    let ok = name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(field, format!("{name:?} is not an InferenceService name (a DNS-1035 label)")))
    }
}

fn service_url(field: &str, url: &str) -> Result<()> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
    match host {
        Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) => Ok(()),
        _ => Err(Error::invalid(field, format!("{url:?} is not an http:// or https:// URL with a host"))),
    }
}

/// Whether `condition` can be a GJSON path: brackets, parentheses and braces that close in
/// order, quotes that close, and no escape at its end. GJSON itself never refuses a path (one
/// that does not parse matches nothing), so a typo would silently send every request elsewhere.
pub fn check_condition(condition: &str) -> std::result::Result<(), String> {
    let mut open: Vec<char> = Vec::new();
    let mut chars = condition.chars().peekable();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        if c == '\\' {
            if chars.next().is_none() {
                return Err(format!("{condition:?} ends with an escape ('\\')"));
            }
            continue;
        }
        if let Some(q) = quote {
            if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' => quote = Some('"'),
            '(' | '[' | '{' => open.push(c),
            ')' | ']' | '}' => {
                let want = match c {
                    ')' => '(',
                    ']' => '[',
                    _ => '{',
                };
                if open.pop() != Some(want) {
                    return Err(format!("{condition:?}: '{c}' closes nothing that is open"));
                }
            }
            _ => {}
        }
    }
    if quote.is_some() {
        return Err(format!("{condition:?}: a quoted string is not closed"));
    }
    if let Some(c) = open.pop() {
        return Err(format!("{condition:?}: '{c}' is not closed"));
    }
    if condition.contains("#()") {
        return Err(format!("{condition:?}: an empty query #()"));
    }
    Ok(())
}

struct Cycle {
    path: Vec<String>,
    last_step: (String, usize),
}

/// A cycle between nodes (through `nodeName` steps), if any: the nodes along it, from the first
/// node of the cycle back to it, and the step that closes it.
fn find_cycle(spec: &InferenceGraphSpec) -> Option<Cycle> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<'a>(
        spec: &'a InferenceGraphSpec,
        node: &'a str,
        marks: &mut BTreeMap<&'a str, Mark>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Cycle> {
        marks.insert(node, Mark::Open);
        stack.push(node);
        for (i, step) in spec.nodes.get(node).map(|n| n.steps.as_slice()).unwrap_or_default().iter().enumerate() {
            let Some(Target::Node(next)) = step.target() else { continue };
            let Some((next, _)) = spec.nodes.get_key_value(next) else { continue };
            match marks.get(next.as_str()) {
                Some(Mark::Open) => {
                    let from = stack.iter().position(|n| *n == next).unwrap_or(0);
                    let mut path: Vec<String> = stack[from..].iter().map(|n| (*n).to_owned()).collect();
                    path.push(next.clone());
                    return Some(Cycle { path, last_step: (node.to_owned(), i) });
                }
                Some(Mark::Done) => {}
                None => {
                    if let Some(cycle) = visit(spec, next, marks, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        marks.insert(node, Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    let mut roots: Vec<&str> = vec![ROOT];
    roots.extend(spec.nodes.keys().map(String::as_str).filter(|n| *n != ROOT));
    for node in roots {
        if spec.nodes.contains_key(node) && !marks.contains_key(node) {
            let mut stack = Vec::new();
            if let Some(cycle) = visit(spec, node, &mut marks, &mut stack) {
                return Some(cycle);
            }
        }
    }
    None
}

/// The InferenceServices a graph can call from `root`, each once, in the order first reached.
pub fn reachable_services(spec: &InferenceGraphSpec) -> Vec<&str> {
    let mut services = Vec::new();
    let mut seen_nodes = BTreeSet::new();
    let mut queue = vec![ROOT];
    while let Some(node) = queue.pop() {
        if !seen_nodes.insert(node) {
            continue;
        }
        for step in spec.nodes.get(node).map(|n| n.steps.as_slice()).unwrap_or_default() {
            match step.target() {
                Some(Target::Service(s)) if !services.contains(&s) => services.push(s),
                Some(Target::Node(n)) => queue.insert(0, n),
                _ => {}
            }
        }
    }
    services
}

#[cfg(test)]
mod tests;
