//! Labels and annotations on the objects Skiff creates for an InferenceService, shared by the
//! operator (which writes them) and the data plane (which finds revisions by them).

/// Label on every child: the InferenceService's name (as KServe sets it).
pub const INFERENCE_SERVICE: &str = "serving.kserve.io/inferenceservice";
/// Label on every child: `predictor` (KServe's `component` label).
pub const COMPONENT: &str = "component";
/// Label on a revision's objects: its number, `1` for `<name>-predictor-00001`.
pub const REVISION: &str = "skiff.dev/revision";
/// Label on a revision's objects: its name, `<name>-predictor-00001`.
pub const REVISION_NAME: &str = "skiff.dev/revision-name";
/// Label on a revision's Service (copied to its EndpointSlices): `containerConcurrency`, for the
/// router and the activator.
pub const CONTAINER_CONCURRENCY: &str = "skiff.dev/container-concurrency";
/// Label on a revision's Service (copied to its EndpointSlices): the request timeout in seconds.
pub const TIMEOUT_SECONDS: &str = "skiff.dev/timeout-seconds";
/// Label on a revision's Service (copied to its EndpointSlices): how long, in seconds, the
/// activator holds a request for a ready replica (the InferenceService's progress deadline); absent
/// when it sets none.
pub const PROGRESS_DEADLINE_SECONDS: &str = "skiff.dev/progress-deadline-seconds";
/// Label on a revision's Service (copied to its EndpointSlices): `true` when its pods take
/// requests through the queue-proxy sidecar (a custom container).
pub const QUEUE_PROXY: &str = "skiff.dev/queue-proxy";
/// Annotation on a revision's Deployment: its autoscaling settings (the predictor's fields and
/// `autoscaling.knative.dev/*` annotations), which the autoscaler resolves against the live
/// `config-autoscaler` settings.
pub const SCALING: &str = "skiff.dev/scaling";
/// Field manager of the autoscaler's writes of `spec.replicas` (through the scale subresource).
pub const AUTOSCALER_FIELD_MANAGER: &str = "skiff-autoscaler";
/// Annotation on a revision's Deployment: the hash of the [`crate::revision::RevisionTemplate`] it runs.
pub const TEMPLATE_HASH: &str = "skiff.dev/template-hash";
/// Annotation on a revision's Deployment: the replicas it was created with (0: ready without a pod).
pub const INITIAL_SCALE: &str = "skiff.dev/initial-scale";
/// Label on a revision's Deployment: `reserve` while it takes no traffic and is kept, scaled to
/// zero, for a rollback (the autoscaler leaves it at zero, as Knative applies no minimum scale to
/// a revision that is not routed to), `active` once routed to again. Knative's
/// `serving.knative.dev/routingState`. A Deployment without it is active.
pub const ROUTING_STATE: &str = "skiff.dev/routing-state";
/// [`ROUTING_STATE`] of a revision kept without traffic.
pub const RESERVE: &str = "reserve";
/// [`ROUTING_STATE`] of a revision routed to again.
pub const ACTIVE: &str = "active";
/// Field manager of the operator's writes of [`ROUTING_STATE`] and of the scale to zero that
/// goes with `reserve`, apart from its applies of the whole Deployment.
pub const ROUTING_FIELD_MANAGER: &str = "skiff-routing";
/// Annotation on a child: the hash of what the operator last applied, so it applies only on change.
pub const APPLIED_HASH: &str = "skiff.dev/applied-hash";
/// The field manager of every server-side apply by the operator.
pub const FIELD_MANAGER: &str = "skiff-controller";
/// Annotation on a revision's Deployment whose model a ServingRuntime serves: which one,
/// `ServingRuntime/<name>` or `ClusterServingRuntime/<name>` (the runtime's kind, name and spec
/// are part of the revision's template hash, so another choice, or a changed runtime, rolls a new
/// revision).
pub const RUNTIME: &str = "skiff.dev/runtime";
