//! The graph executor: KServe's router (`cmd/router/main.go`, `routeStep`) rule by rule, over a
//! [`Caller`] that makes each step's call, so the rules are tested without sockets.
//!
//! - **Sequence**: each step in turn. A step with `data: $response` (after the first) gets the
//!   previous step's answer, any other the node's input. A step with a `condition` is taken only
//!   when the condition's GJSON path exists in the previous answer; otherwise the sequence ends
//!   there with that answer and 200 (an answer that is not JSON: 500 `invalid response`). A `Hard`
//!   step that answers outside 2xx ends it with its answer and status; a `Soft` one does not. The
//!   answer is the last step's, with its status.
//! - **Switch**: the first step whose condition exists in the node's input (a step without one
//!   never matches); none: 404 `None of the routes matched with the switch condition`.
//! - **Splitter**: a point in 0..100 picks the step whose cumulative weight passes it.
//! - **Ensemble**: every step at once; each answer must be a JSON object, merged under the step's
//!   `name` (else its index). The first `Hard` step, in step order, that answers outside 2xx gives
//!   the node's answer and status; `Soft` failures are merged like successes.
//! - A call that fails (no connection, an answer that cannot be read), or a node below that fails,
//!   fails the node with 500; the graph answers `{"error": "Failed to process request", "cause"}`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};
use skiff_api::graph::{InferenceGraphSpec, InferenceStep, RouterType, Target};

/// A step's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// HTTP status.
    pub status: u16,
    /// Body.
    pub body: Bytes,
}

/// Why a node failed: the status it answers with (500 once seen from the node above) and the cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    /// HTTP status.
    pub status: u16,
    /// What happened, naming the step.
    pub cause: String,
}

impl GraphError {
    fn new(status: u16, cause: impl Into<String>) -> GraphError {
        GraphError { status, cause: cause.into() }
    }

    /// The answer's body, as KServe's router writes it (`InferenceGraphRoutingError`).
    pub fn body(&self) -> Bytes {
        let body = serde_json::json!({"error": "Failed to process request", "cause": self.cause});
        Bytes::from(body.to_string())
    }
}

/// Where a step is, for messages and the timing header: `node[index]` or `node.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepId {
    /// The node.
    pub node: String,
    /// The step's index in the node.
    pub index: usize,
    /// The step's name, when it has one.
    pub name: Option<String>,
}

impl std::fmt::Display for StepId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{}.{}", self.node, name),
            None => write!(f, "{}[{}]", self.node, self.index),
        }
    }
}

/// One call a step made, for the `x-skiff-graph-steps` header.
#[derive(Debug, Clone, PartialEq)]
pub struct StepTiming {
    /// The step.
    pub step: StepId,
    /// What it called: the InferenceService's name, or the URL.
    pub target: String,
    /// Its answer's status (0: no answer).
    pub status: u16,
    /// From the call to the end of the answer.
    pub took: Duration,
    /// How long it was held at zero, when it met a cold start (the activator's `x-skiff-cold-start`).
    pub cold: Option<Duration>,
}

/// The header's value: `<step>;target=<name>;status=<s>;dur=<ms>[;cold=<ms>]`, comma-separated.
pub fn steps_header(timings: &[StepTiming]) -> String {
    let mut out = String::new();
    for t in timings {
        if !out.is_empty() {
            out.push_str(", ");
        }
        let target: String = t.target.chars().filter(|c| c.is_ascii_graphic() && *c != ',' && *c != ';').collect();
        out.push_str(&format!("{};target={target};status={};dur={:.1}", t.step, t.status, t.took.as_secs_f64() * 1e3));
        if let Some(cold) = t.cold {
            out.push_str(&format!(";cold={}", cold.as_millis()));
        }
    }
    out
}

/// A boxed future, for the recursion through nodes.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Makes one step's call: POSTs `body` to an InferenceService or a URL; an error says why no answer
/// came (the executor names the step).
pub trait Caller: Sync {
    /// Calls `target` (never a node) for `step`.
    fn call<'a>(&'a self, step: &'a StepId, target: Target<'a>, body: Bytes) -> BoxFuture<'a, Result<Answer, String>>;
}

/// Runs one graph over a caller.
pub struct Executor<'a, C> {
    spec: &'a InferenceGraphSpec,
    caller: &'a C,
    /// Draws a Splitter's point in 0..100.
    point: &'a (dyn Fn() -> u32 + Sync),
}

fn success(status: u16) -> bool {
    (200..=299).contains(&status)
}

impl<'a, C: Caller> Executor<'a, C> {
    /// An executor of `spec`; `point` draws a Splitter's point in 0..100.
    pub fn new(spec: &'a InferenceGraphSpec, caller: &'a C, point: &'a (dyn Fn() -> u32 + Sync)) -> Self {
        Executor { spec, caller, point }
    }

    /// Runs the graph from `root` on `input`.
    pub async fn run(&self, input: Bytes) -> Result<Answer, GraphError> {
        self.node(skiff_api::graph::ROOT, input).await
    }

    fn node<'s>(&'s self, name: &'s str, input: Bytes) -> BoxFuture<'s, Result<Answer, GraphError>> {
        Box::pin(async move {
            let Some(node) = self.spec.nodes.get(name) else {
                return Err(GraphError::new(500, format!("no node {name:?}")));
            };
            match node.router_type {
                RouterType::Splitter => {
                    let point = (self.point)();
                    let index = pick_by_weight(&node.steps, point)
                        .ok_or_else(|| GraphError::new(500, "no route was selected by the splitter"))?;
                    self.step(name, index, &node.steps[index], input).await
                }
                RouterType::Switch => {
                    let index = pick_by_condition(&input, &node.steps)
                        .ok_or_else(|| GraphError::new(404, "None of the routes matched with the switch condition"))?;
                    self.step(name, index, &node.steps[index], input).await
                }
                RouterType::Ensemble => self.ensemble(name, &node.steps, input).await,
                RouterType::Sequence => self.sequence(name, &node.steps, input).await,
            }
        })
    }

    /// One step: its node, or its call. A failure below is this node's 500.
    async fn step(&self, node: &str, index: usize, step: &InferenceStep, input: Bytes) -> Result<Answer, GraphError> {
        let id = StepId { node: node.to_owned(), index, name: step.name.clone().filter(|n| !n.is_empty()) };
        match step.target() {
            Some(Target::Node(next)) => {
                self.node(next, input).await.map_err(|e| GraphError::new(500, format!("step {id}: {}", e.cause)))
            }
            Some(target) => self
                .caller
                .call(&id, target, input)
                .await
                .map_err(|cause| GraphError::new(500, format!("step {id}: {cause}"))),
            None => Err(GraphError::new(500, format!("step {id}: no single target"))),
        }
    }

    async fn sequence(&self, node: &str, steps: &[InferenceStep], input: Bytes) -> Result<Answer, GraphError> {
        let mut last: Option<Answer> = None;
        for (i, step) in steps.iter().enumerate() {
            let previous = last.as_ref().map(|a| a.body.clone()).unwrap_or_default();
            let mut request = if step.takes_response() && i > 0 { previous.clone() } else { input.clone() };
            if step.map_predictions_to_instances == Some(true) {
                request = predictions_to_instances(request);
            }
            if let Some(condition) = step.condition() {
                let text = std::str::from_utf8(&previous).unwrap_or_default();
                if !gjson::valid(text) {
                    return Err(GraphError::new(500, "invalid response"));
                }
                if !gjson::get(text, condition).exists() {
                    return Ok(Answer { status: 200, body: previous });
                }
            }
            let answer = self.step(node, i, step, request).await?;
            if step.is_hard() && !success(answer.status) {
                return Ok(answer);
            }
            last = Some(answer);
        }
        // KServe writes the status of the last step; a node without steps answers nothing, 200 here.
        Ok(last.unwrap_or(Answer { status: 200, body: Bytes::new() }))
    }

    async fn ensemble(&self, node: &str, steps: &[InferenceStep], input: Bytes) -> Result<Answer, GraphError> {
        let calls = steps.iter().enumerate().map(|(i, step)| self.step(node, i, step, input.clone()));
        let answers = futures::future::join_all(calls).await;
        let mut merged = Map::new();
        for (i, (step, answer)) in steps.iter().zip(answers).enumerate() {
            let answer = answer?;
            let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(&answer.body) else {
                let id = StepId { node: node.to_owned(), index: i, name: step.name.clone() };
                return Err(GraphError::new(500, format!("step {id}: its answer is not a JSON object")));
            };
            if step.is_hard() && !success(answer.status) {
                return Ok(Answer { status: answer.status, body: Bytes::from(Value::Object(object).to_string()) });
            }
            let key = step.name.clone().filter(|n| !n.is_empty()).unwrap_or_else(|| i.to_string());
            merged.insert(key, Value::Object(object));
        }
        Ok(Answer { status: 200, body: Bytes::from(Value::Object(merged).to_string()) })
    }
}

/// The step a Splitter takes for `point` (0..100): the first whose cumulative weight exceeds it.
pub fn pick_by_weight(steps: &[InferenceStep], point: u32) -> Option<usize> {
    let mut end = 0i64;
    for (i, step) in steps.iter().enumerate() {
        end += step.weight.unwrap_or(0);
        if i64::from(point) < end {
            return Some(i);
        }
    }
    None
}

/// The step a Switch takes for `input`: the first whose condition exists in it (none when the
/// input is not JSON).
pub fn pick_by_condition(input: &[u8], steps: &[InferenceStep]) -> Option<usize> {
    let text = std::str::from_utf8(input).ok()?;
    if !gjson::valid(text) {
        return None;
    }
    steps.iter().position(|step| step.condition().is_some_and(|c| gjson::get(text, c).exists()))
}

/// KServe's `mapPredictionsToInstances`: a request with a non-empty `predictions` becomes
/// `{"instances": <predictions>}` (KServe re-encodes only those two fields); any other is unchanged.
pub fn predictions_to_instances(request: Bytes) -> Bytes {
    match serde_json::from_slice::<Value>(&request) {
        Ok(Value::Object(object)) => match object.get("predictions") {
            Some(Value::Array(predictions)) if !predictions.is_empty() => {
                let mut out = Map::new();
                out.insert("instances".to_owned(), Value::Array(predictions.clone()));
                Bytes::from(Value::Object(out).to_string())
            }
            _ => request,
        },
        _ => request,
    }
}
