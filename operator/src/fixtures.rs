//! A mocked API server for the reconcile's tests, after kube-rs `controller-rs`' `fixtures.rs`:
//! a [`kube::Client`] over `tower_test`'s mock service, and an [`ApiServer`] on the other end
//! that checks each call a reconcile makes against a script (in order between steps, in any order
//! within a step, where the reconcile sends them together) and answers it as the API server
//! would, from the objects it holds: lists, server-side applies (stored with the fields the
//! server sets), the status written on the resourceVersion read (a 409 otherwise), deletions;
//! KEDA's ScaledObjects answer 404 unless [`ApiServer::keda`] says its CRD is installed.

use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use kube::api::DynamicObject;
use kube::client::Body;
use kube::runtime::reflector;
use kube::{Client, ResourceExt};
use serde::Serialize;
use serde_json::{Value, json};
use skiff_api::InferenceServiceResource;
use tower_test::mock::{self, Handle};

use crate::backoff::Backoff;
use crate::controller::{Context, Retiring};
use crate::freshness::Replaced;
use crate::metrics::Metrics;

/// The namespace of the InferenceServices the tests reconcile.
pub const NAMESPACE: &str = "ml";

/// A context whose client talks to the returned mock (no ConfigMap: the platform's defaults;
/// revisions without traffic collected at once).
pub fn context() -> (Arc<Context>, Handle<Request<Body>, Response<Body>>) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let context = Context {
        client: Client::new(service, NAMESPACE),
        config: reflector::store::<ConfigMap>().0,
        metrics: Arc::new(Metrics::new(&mut prometheus_client::registry::Registry::default())),
        replaced: Replaced::default(),
        retiring: Retiring::default(),
        retention: Duration::ZERO,
        backoff: Backoff::default(),
    };
    (Arc::new(context), handle)
}

/// An InferenceService as the API server stores it: `spec` (YAML) in [`NAMESPACE`], with a uid,
/// a generation and a resourceVersion.
pub fn inference_service(name: &str, spec: &str) -> InferenceServiceResource {
    let manifest = format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\nspec:\n{spec}"
    );
    let manifest = skiff_api::InferenceService::from_yaml(&manifest).expect("a valid manifest");
    let mut isvc = InferenceServiceResource::from(&manifest);
    isvc.metadata.namespace = Some(NAMESPACE.into());
    isvc.metadata.uid = Some(format!("uid-{name}"));
    isvc.metadata.generation = Some(1);
    isvc.metadata.resource_version = Some("1".into());
    isvc
}

/// One API call: its method, path and decoded query, e.g.
/// `PATCH /apis/apps/v1/namespaces/ml/deployments/iris-predictor-00001?fieldManager=skiff-controller&force=true`.
pub type Call = String;

/// The objects of one InferenceService the mocked API server holds, and the calls it answered.
#[derive(Debug, Clone)]
pub struct ApiServer {
    /// The InferenceService.
    pub isvc: InferenceServiceResource,
    /// Its Deployments.
    pub deployments: Vec<Deployment>,
    /// Its Services.
    pub services: Vec<Service>,
    /// Its pods.
    pub pods: Vec<Pod>,
    /// The ServiceAccounts of its namespace.
    pub accounts: Vec<ServiceAccount>,
    /// The Secrets of its namespace.
    pub secrets: Vec<Secret>,
    /// Its revisions' HorizontalPodAutoscalers.
    pub hpas: Vec<HorizontalPodAutoscaler>,
    /// Its revisions' KEDA ScaledObjects.
    pub scaled_objects: Vec<DynamicObject>,
    /// Whether KEDA's ScaledObject CRD is installed (its calls are 404 otherwise).
    pub keda: bool,
    /// The bodies of the calls answered, in order.
    pub bodies: Vec<(Call, Value)>,
    version: u64,
}

impl ApiServer {
    /// A server holding `isvc` and nothing else.
    pub fn new(isvc: InferenceServiceResource) -> ApiServer {
        ApiServer {
            isvc,
            deployments: Vec::new(),
            services: Vec::new(),
            pods: Vec::new(),
            accounts: Vec::new(),
            secrets: Vec::new(),
            hpas: Vec::new(),
            scaled_objects: Vec::new(),
            keda: false,
            bodies: Vec::new(),
            version: 1,
        }
    }

    /// Answers the calls of `script` (each step's calls in any order, the steps in order), then
    /// checks that no other call comes before the client goes. Panics (failing the test) on a
    /// call that is not the next one expected.
    pub async fn serve(mut self, mut handle: Handle<Request<Body>, Response<Body>>, script: &[Vec<Call>]) -> ApiServer {
        for step in script {
            let mut expected: Vec<&Call> = step.iter().collect();
            while !expected.is_empty() {
                let Some((request, respond)) = handle.next_request().await else {
                    panic!("the reconcile ended; still expected {expected:?} (script: {script:#?})");
                };
                let (parts, body) = request.into_parts();
                let call = describe(&parts.method, &parts.uri);
                let Some(at) = expected.iter().position(|e| **e == call) else {
                    panic!("unexpected call {call}; expected one of {expected:?} (script: {script:#?})");
                };
                expected.remove(at);
                let body = body.collect().await.expect("a request body").to_bytes();
                let body: Value =
                    if body.is_empty() { Value::Null } else { serde_json::from_slice(&body).expect("JSON") };
                if parts.method == Method::PATCH {
                    let kind = parts.headers.get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok());
                    assert_eq!(kind, Some("application/apply-patch+yaml"), "{call}: a server-side apply");
                }
                let (status, answer) = self.answer(&parts.method, parts.uri.path(), &body);
                self.bodies.push((call, body));
                let response = Response::builder().status(status).body(Body::from(answer.to_string().into_bytes()));
                respond.send_response(response.expect("a response"));
            }
        }
        if let Some((request, _)) = handle.next_request().await {
            panic!("unexpected call after the script: {}", describe(request.method(), request.uri()));
        }
        self
    }

    /// The body of the call answered as `call` (the last one so named).
    pub fn body(&self, call: &str) -> &Value {
        let found = self.bodies.iter().rev().find(|(c, _)| c == call);
        &found.unwrap_or_else(|| panic!("no call {call}")).1
    }

    /// Gives a Deployment's replicas as available, as its ReplicaSet's ready pods would.
    pub fn make_available(&mut self, name: &str) {
        let deployment = self.deployments.iter_mut().find(|d| d.name_any() == name).expect("the Deployment");
        let replicas = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        deployment.status = Some(DeploymentStatus {
            replicas: Some(replicas),
            ready_replicas: Some(replicas),
            available_replicas: Some(replicas),
            observed_generation: deployment.metadata.generation,
            ..DeploymentStatus::default()
        });
    }

    fn answer(&mut self, method: &Method, path: &str, body: &Value) -> (StatusCode, Value) {
        let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        let version = self.next_version();
        match (method.as_str(), segments.as_slice()) {
            ("GET", [.., "deployments"]) => {
                (StatusCode::OK, list("apps/v1", "DeploymentList", &self.deployments, version))
            }
            ("GET", [.., "services"]) => (StatusCode::OK, list("v1", "ServiceList", &self.services, version)),
            ("GET", [.., "pods"]) => (StatusCode::OK, list("v1", "PodList", &self.pods, version)),
            ("GET", [.., "servingruntimes" | "clusterservingruntimes"]) => not_found(),
            ("GET", [.., "horizontalpodautoscalers"]) => {
                (StatusCode::OK, list("autoscaling/v2", "HorizontalPodAutoscalerList", &self.hpas, version))
            }
            (_, [.., "scaledobjects"] | [.., "scaledobjects", _]) if !self.keda => not_found(),
            ("GET", [.., "scaledobjects"]) => {
                (StatusCode::OK, list("keda.sh/v1alpha1", "ScaledObjectList", &self.scaled_objects, version))
            }
            ("PATCH", [.., "horizontalpodautoscalers", name]) => {
                (StatusCode::OK, store(&mut self.hpas, name, body, &json!({}), version))
            }
            ("PATCH", [.., "scaledobjects", name]) => {
                (StatusCode::OK, store(&mut self.scaled_objects, name, body, &json!({}), version))
            }
            ("DELETE", [.., kind @ ("horizontalpodautoscalers" | "scaledobjects"), name]) => {
                let before = self.hpas.len() + self.scaled_objects.len();
                match *kind {
                    "horizontalpodautoscalers" => self.hpas.retain(|h| h.name_any() != *name),
                    _ => self.scaled_objects.retain(|s| s.name_any() != *name),
                }
                if before == self.hpas.len() + self.scaled_objects.len() {
                    return not_found();
                }
                (StatusCode::OK, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
            }
            ("GET", [.., "serviceaccounts", name]) => one(&self.accounts, name),
            ("GET", [.., "secrets", name]) => one(&self.secrets, name),
            ("PATCH", [.., "deployments", name]) if body["spec"].get("template").is_none() => {
                // An apply of a few fields under their own manager (the routing state): merged.
                let Some(d) = self.deployments.iter_mut().find(|d| d.name_any() == *name) else { return not_found() };
                for (key, value) in body["metadata"]["labels"].as_object().into_iter().flatten() {
                    d.labels_mut().insert(key.clone(), value.as_str().expect("a label value").to_owned());
                }
                if let Some(replicas) = body["spec"]["replicas"].as_i64() {
                    d.spec.get_or_insert_default().replicas = Some(i32::try_from(replicas).expect("replicas"));
                }
                d.metadata.resource_version = Some(version.to_string());
                (StatusCode::OK, serde_json::to_value(&*d).expect("JSON"))
            }
            ("PATCH", [.., "deployments", name]) => {
                let defaults = json!({"revisionHistoryLimit": 10, "progressDeadlineSeconds": 600});
                (StatusCode::OK, store(&mut self.deployments, name, body, &defaults, version))
            }
            ("PATCH", [.., "services", name]) => {
                let defaults = json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "sessionAffinity": "None"});
                (StatusCode::OK, store(&mut self.services, name, body, &defaults, version))
            }
            ("PATCH", [.., "inferenceservices", _, "status"]) => {
                if body["metadata"]["resourceVersion"] != json!(self.isvc.resource_version()) {
                    return (StatusCode::CONFLICT, failure(409, "Conflict", "the object has been modified"));
                }
                self.isvc.status = Some(serde_json::from_value(body["status"].clone()).expect("a status"));
                self.isvc.metadata.resource_version = Some(version.to_string());
                (StatusCode::OK, serde_json::to_value(&self.isvc).expect("JSON"))
            }
            ("DELETE", [.., kind @ ("deployments" | "services"), name]) => {
                let before = self.deployments.len() + self.services.len();
                match *kind {
                    "deployments" => self.deployments.retain(|d| d.name_any() != *name),
                    _ => self.services.retain(|s| s.name_any() != *name),
                }
                if before == self.deployments.len() + self.services.len() {
                    return not_found();
                }
                (StatusCode::OK, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}))
            }
            _ => panic!("the mocked API server does not answer {method} {path}"),
        }
    }

    fn next_version(&mut self) -> u64 {
        self.version += 1;
        self.version
    }
}

/// The object named `name`, or the API server's 404.
fn one<K: Serialize + kube::Resource>(objects: &[K], name: &str) -> (StatusCode, Value) {
    match objects.iter().find(|o| o.meta().name.as_deref() == Some(name)) {
        Some(object) => (StatusCode::OK, serde_json::to_value(object).expect("JSON")),
        None => not_found(),
    }
}

/// Stores an applied object as the API server would (its spec's `defaults` filled in where not
/// given; its uid, resourceVersion, generation and creation time set) and returns it.
fn store<K: Serialize + serde::de::DeserializeOwned + kube::Resource>(
    objects: &mut Vec<K>,
    name: &str,
    body: &Value,
    defaults: &Value,
    version: u64,
) -> Value {
    let mut applied = body.clone();
    let spec = applied["spec"].as_object_mut().expect("a spec");
    for (key, value) in defaults.as_object().into_iter().flatten() {
        spec.entry(key.clone()).or_insert_with(|| value.clone());
    }
    let generation = objects.iter().find(|o| o.meta().name.as_deref() == Some(name)).map_or(1, |o| {
        let old = serde_json::to_value(o).expect("JSON");
        o.meta().generation.unwrap_or(1) + i64::from(old["spec"] != applied["spec"])
    });
    let metadata = applied["metadata"].as_object_mut().expect("metadata");
    metadata.insert("uid".into(), json!(format!("uid-{name}")));
    metadata.insert("resourceVersion".into(), json!(version.to_string()));
    metadata.insert("generation".into(), json!(generation));
    metadata.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
    let object: K = serde_json::from_value(applied.clone()).expect("a valid object");
    objects.retain(|o| o.meta().name.as_deref() != Some(name));
    objects.push(object);
    applied
}

fn list<K: Serialize>(api_version: &str, kind: &str, items: &[K], version: u64) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "metadata": {"resourceVersion": version.to_string()}, "items": items})
}

fn not_found() -> (StatusCode, Value) {
    (StatusCode::NOT_FOUND, failure(404, "NotFound", "the server could not find the requested resource"))
}

fn failure(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code})
}

/// `METHOD /path?key=value&...`, the query decoded and its keys sorted.
fn describe(method: &Method, uri: &http::Uri) -> Call {
    let mut query: Vec<String> =
        uri.query().unwrap_or_default().split('&').filter(|p| !p.is_empty()).map(decode).collect();
    query.sort();
    let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
    format!("{method} {}{query}", uri.path())
}

/// Percent-decoding of a query pair.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', _) => {
                out.push(b' ');
                i += 1;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The calls' strings, shared by the scripts.
pub mod calls {
    use super::Call;

    /// The lists of the InferenceService `iris`'s children by its label, sent together.
    pub fn list_children() -> Vec<Call> {
        ["apis/apps/v1/namespaces/ml/deployments", "api/v1/namespaces/ml/services", "api/v1/namespaces/ml/pods"]
            .map(|path| format!("GET /{path}?labelSelector=serving.kserve.io/inferenceservice=iris"))
            .into()
    }

    /// The lists of the runtimes a model may be served by, sent together.
    pub fn list_runtimes() -> Vec<Call> {
        vec![
            "GET /apis/serving.kserve.io/v1alpha1/namespaces/ml/servingruntimes".into(),
            "GET /apis/serving.kserve.io/v1alpha1/clusterservingruntimes".into(),
        ]
    }

    /// The list of the InferenceService `iris`'s HPAs by its label.
    pub fn list_hpas() -> Call {
        "GET /apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers?labelSelector=serving.kserve.io/inferenceservice=iris"
            .into()
    }

    /// The list of the InferenceService `iris`'s KEDA ScaledObjects by its label.
    pub fn list_scaled_objects() -> Call {
        "GET /apis/keda.sh/v1alpha1/namespaces/ml/scaledobjects?labelSelector=serving.kserve.io/inferenceservice=iris"
            .into()
    }

    /// The server-side apply of an HPA.
    pub fn apply_hpa(name: &str) -> String {
        format!(
            "PATCH /apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers/{name}?fieldManager=skiff-controller&force=true"
        )
    }

    /// The server-side apply of a KEDA ScaledObject.
    pub fn apply_scaled_object(name: &str) -> String {
        format!(
            "PATCH /apis/keda.sh/v1alpha1/namespaces/ml/scaledobjects/{name}?fieldManager=skiff-controller&force=true"
        )
    }

    /// An HPA's deletion.
    pub fn delete_hpa(name: &str) -> String {
        format!("DELETE /apis/autoscaling/v2/namespaces/ml/horizontalpodautoscalers/{name}")
    }

    /// The server-side apply of a Deployment.
    pub fn apply_deployment(name: &str) -> String {
        format!("PATCH /apis/apps/v1/namespaces/ml/deployments/{name}?fieldManager=skiff-controller&force=true")
    }

    /// The server-side apply of a revision's routing state (and scale to zero, for `reserve`).
    pub fn route_deployment(name: &str) -> String {
        format!("PATCH /apis/apps/v1/namespaces/ml/deployments/{name}?fieldManager=skiff-routing&force=true")
    }

    /// The server-side apply of a Service.
    pub fn apply_service(name: &str) -> String {
        format!("PATCH /api/v1/namespaces/ml/services/{name}?fieldManager=skiff-controller&force=true")
    }

    /// The status of the InferenceService `iris`, by server-side apply.
    pub fn write_status() -> Call {
        "PATCH /apis/serving.kserve.io/v1beta1/namespaces/ml/inferenceservices/iris/status?fieldManager=skiff-controller&force=true"
            .into()
    }

    /// The read of a ServiceAccount of namespace `ml`.
    pub fn get_account(name: &str) -> String {
        format!("GET /api/v1/namespaces/ml/serviceaccounts/{name}")
    }

    /// The read of a Secret of namespace `ml`.
    pub fn get_secret(name: &str) -> String {
        format!("GET /api/v1/namespaces/ml/secrets/{name}")
    }
}
