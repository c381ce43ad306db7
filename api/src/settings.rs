//! The contract between the control plane and the data plane about one revision: what the
//! operator tells the router, the activator and the autoscaler, written and read here only.
//!
//! - [`RevisionSettings`]: `containerConcurrency`, the request timeout, the progress deadline and
//!   whether requests enter through the queue-proxy, as labels on a revision's Deployment, Service and pods (the
//!   EndpointSlice controller copies a Service's labels to its slices, which is where the router
//!   and the activator read them).
//! - [`component_of`]: the component a revision runs (KServe's `component` label).
//! - [`ScalingInputs`](crate::scaling::ScalingInputs): the autoscaling inputs, as the
//!   `skiff.dev/scaling` annotation on the revision's Deployment (its `annotation` and
//!   `from_annotations`), for the autoscaler.
//!
//! Reading is total: a label that is absent, not a number, or past the spec's maxima (someone
//! edited it) reads as the default or the bound, never as a value the data plane cannot hold
//! (a clock overflow, an unbounded queue). `skiff up` has no labels; it takes the same
//! [`RevisionSettings::of`] a spec, so both modes convert a spec the same way.
//!
//! It lives in `skiff-api` because every side of the contract already depends on it: the operator
//! (the writer), `skiff-dataplane` (discovery, for the router and the activator), the autoscaler's
//! runner in the controller and `skiff up`. A crate of its own would add a node to the graph and
//! nothing else.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::isvc::PredictorSpec;
use crate::labels::{COMPONENT, CONTAINER_CONCURRENCY, PROGRESS_DEADLINE_SECONDS, QUEUE_PROXY, TIMEOUT_SECONDS};
use crate::limits::{MAX_CONTAINER_CONCURRENCY, MAX_TIMEOUT_SECS};
use crate::revision::Component;
use crate::runtime::uses_embedded_server;

/// KServe's request timeout when `timeout` is unset: the one definition the router, the activator,
/// the queue-proxy and both modes' revisions use.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// The bound on one request to the predictor: its `timeout` in seconds (kept within the 1 s to
/// [`MAX_TIMEOUT_SECS`] that validation allows), else KServe's 300 s.
pub fn request_timeout(predictor: &PredictorSpec) -> Duration {
    predictor.timeout.map_or(DEFAULT_TIMEOUT, |s| Duration::from_secs(s.clamp(1, MAX_TIMEOUT_SECS).unsigned_abs()))
}

/// The progress-deadline rule: Knative's `serving.knative.dev/progress-deadline` annotation, its
/// bounds and its parser. It lives in `skiff-autoscaler`, whose decider gives up on a revision
/// that has not become ready by then (plus Knative's buffer); this crate validates with it and
/// tells the activator how long to hold requests.
pub use skiff_autoscaler::activation::{MAX_PROGRESS_DEADLINE_SECS, PROGRESS_DEADLINE_ANNOTATION, progress_deadline};

/// The router's bound on a request to an InferenceService, whichever component answers it: its
/// `predictor`'s timeout, plus the progress deadline its `annotations` set, if any
/// ([`RevisionSettings::whole_request`]).
pub fn route_timeout(predictor: &PredictorSpec, annotations: &BTreeMap<String, String>) -> Duration {
    RevisionSettings::of(predictor).with_progress_deadline(annotations).whole_request()
}

/// What the data plane needs to know of a revision's pods, from its labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RevisionSettings {
    /// `containerConcurrency`: requests one replica takes at once (0 = unlimited), at most
    /// [`MAX_CONTAINER_CONCURRENCY`].
    pub container_concurrency: u32,
    /// The request timeout in seconds, 1 to [`MAX_TIMEOUT_SECS`].
    pub timeout_secs: u64,
    /// The progress deadline in seconds (1 to [`MAX_PROGRESS_DEADLINE_SECS`]), when the
    /// InferenceService sets one: how long a request is held for a ready replica.
    pub progress_deadline_secs: Option<u64>,
    /// Whether requests enter through the queue-proxy sidecar (a custom container, or a model a
    /// ServingRuntime serves).
    pub queue_proxy: bool,
}

impl Default for RevisionSettings {
    /// No concurrency limit, KServe's 300 s timeout, requests straight to the model server.
    fn default() -> Self {
        RevisionSettings {
            container_concurrency: 0,
            timeout_secs: DEFAULT_TIMEOUT.as_secs(),
            progress_deadline_secs: None,
            queue_proxy: false,
        }
    }
}

impl From<&PredictorSpec> for RevisionSettings {
    fn from(predictor: &PredictorSpec) -> RevisionSettings {
        RevisionSettings::of(predictor)
    }
}

impl RevisionSettings {
    /// A component's settings (`spec.predictor`, `spec.transformer`, ...). Requests go through the
    /// queue-proxy for a custom container and for a model a ServingRuntime serves (any model but
    /// ONNX without `runtime:`).
    pub fn of(predictor: &PredictorSpec) -> RevisionSettings {
        let queue_proxy = match &predictor.model {
            Some(model) => !uses_embedded_server(model),
            None => predictor.containers.is_some(),
        };
        RevisionSettings {
            container_concurrency: container_concurrency(predictor.container_concurrency),
            timeout_secs: request_timeout(predictor).as_secs(),
            progress_deadline_secs: None,
            queue_proxy,
        }
    }

    /// With the progress deadline an InferenceService's `annotations` set (an invalid one, which
    /// validation refuses, is ignored).
    pub fn with_progress_deadline(mut self, annotations: &BTreeMap<String, String>) -> RevisionSettings {
        self.progress_deadline_secs = progress_deadline(annotations).ok().flatten().map(|d| d.as_secs());
        self
    }

    /// The bound on a whole request, held and answered: the timeout, plus the progress deadline
    /// when one is set (a request may wait that long for a replica, then take the timeout to be
    /// answered). The router's bound on a service's requests.
    pub fn whole_request(&self) -> Duration {
        Duration::from_secs(self.timeout_secs + self.progress_deadline_secs.unwrap_or(0))
    }

    /// The request timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// `containerConcurrency` as the data plane counts requests (0 = unlimited).
    pub fn per_replica_limit(&self) -> usize {
        usize::try_from(self.container_concurrency).expect("at most the spec's maximum")
    }

    /// Adds the settings' labels to `labels` (the queue-proxy's only when it is used).
    pub fn write_labels(&self, labels: &mut BTreeMap<String, String>) {
        labels.insert(CONTAINER_CONCURRENCY.into(), self.container_concurrency.to_string());
        labels.insert(TIMEOUT_SECONDS.into(), self.timeout_secs.to_string());
        if let Some(secs) = self.progress_deadline_secs {
            labels.insert(PROGRESS_DEADLINE_SECONDS.into(), secs.to_string());
        }
        if self.queue_proxy {
            labels.insert(QUEUE_PROXY.into(), "true".into());
        }
    }

    /// The settings' labels alone.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        self.write_labels(&mut labels);
        labels
    }

    /// Read back from a revision object's labels (or its EndpointSlices'). Absent or unreadable:
    /// the [`Default`]; past the spec's maxima: the maximum; a timeout of 0: the default.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> RevisionSettings {
        let number = |key: &str, max: i64| {
            let max = u64::try_from(max).expect("the spec maxima are positive");
            labels.get(key).and_then(|v| v.parse::<u64>().ok()).map(|n| n.min(max))
        };
        let defaults = RevisionSettings::default();
        RevisionSettings {
            container_concurrency: number(CONTAINER_CONCURRENCY, MAX_CONTAINER_CONCURRENCY)
                .map_or(defaults.container_concurrency, |n| u32::try_from(n).expect("at most the spec's maximum")),
            timeout_secs: number(TIMEOUT_SECONDS, MAX_TIMEOUT_SECS).filter(|s| *s > 0).unwrap_or(defaults.timeout_secs),
            progress_deadline_secs: labels
                .get(PROGRESS_DEADLINE_SECONDS)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|s| *s > 0)
                .map(|s| s.min(MAX_PROGRESS_DEADLINE_SECS)),
            queue_proxy: labels.get(QUEUE_PROXY).is_some_and(|v| v == "true"),
        }
    }
}

/// A spec's `containerConcurrency` (validated within 0 to [`MAX_CONTAINER_CONCURRENCY`]) as a
/// count: unset or negative is 0 (unlimited), more than the maximum is the maximum. The one
/// derivation: everything else reads [`RevisionSettings::container_concurrency`].
fn container_concurrency(spec: Option<i64>) -> u32 {
    let n = spec.unwrap_or(0).clamp(0, MAX_CONTAINER_CONCURRENCY);
    u32::try_from(n).expect("within 0 and the spec's maximum")
}

/// The component a revision's object runs, from its `component` label: the predictor when it has
/// none (revisions made before components had their own), `None` for a name Skiff does not know.
pub fn component_of(labels: &BTreeMap<String, String>) -> Option<Component> {
    match labels.get(COMPONENT) {
        None => Some(Component::Predictor),
        Some(name) => Component::ALL.into_iter().find(|c| c.name() == name),
    }
}

#[cfg(test)]
mod tests;
