//! The app driven without sockets (`oneshot`): authentication, access reviews, CSRF, namespace
//! forcing and the browser headers, with a fake backend and a fake reviewer behind the same traits
//! as the Kubernetes API client (which `tests/cluster` exercises for real).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use skiff_web::access::{Access, Action};
use skiff_web::backend::{Backend, EventView, LogStream, PodView, ServiceView};
use skiff_web::config::Settings;
use skiff_web::error::{Error, Result};
use skiff_web::metrics::sampler::Sampler;
use skiff_web::{App, Mode, app};
use tower::ServiceExt;

#[derive(Default)]
struct Fake {
    created: Mutex<Vec<(String, Value)>>,
    patched: Mutex<Vec<Value>>,
}

fn view(namespace: &str, name: &str) -> ServiceView {
    ServiceView {
        name: name.into(),
        namespace: namespace.into(),
        ready: "True".into(),
        url: Some(format!("http://{name}.{namespace}.example.com")),
        conditions: Vec::new(),
        revisions: Vec::new(),
        canary_percent: None,
        model_format: Some("onnx".into()),
        protocol: "v2".into(),
        created: None,
    }
}

#[async_trait]
impl Backend for Fake {
    async fn namespaces(&self) -> Result<Vec<String>> {
        Ok(vec!["team-a".into(), "team-b".into()])
    }
    async fn list(&self, namespace: &str) -> Result<Vec<ServiceView>> {
        Ok(vec![view(namespace, "iris")])
    }
    async fn get(&self, namespace: &str, name: &str) -> Result<ServiceView> {
        Ok(view(namespace, name))
    }
    async fn manifest(&self, _: &str, _: &str) -> Result<String> {
        Ok("kind: InferenceService\n".into())
    }
    async fn create(&self, namespace: &str, manifest: Value) -> Result<ServiceView> {
        if manifest["metadata"]["name"] == "invalid" {
            return Err(Error::Refused {
                status: 422,
                message: "InferenceService.serving.kserve.io \"invalid\" is invalid: spec.predictor.minReplicas: \
                          Invalid value: -1"
                    .into(),
            });
        }
        self.created.lock().unwrap().push((namespace.to_owned(), manifest));
        Ok(view(namespace, "iris"))
    }
    async fn patch(&self, _: &str, _: &str, patch: Value) -> Result<()> {
        self.patched.lock().unwrap().push(patch);
        Ok(())
    }
    async fn delete(&self, _: &str, _: &str) -> Result<()> {
        Ok(())
    }
    async fn events(&self, _: &str, _: &str) -> Result<Vec<EventView>> {
        Ok(Vec::new())
    }
    async fn pods(&self, _: &str, _: &str) -> Result<Vec<PodView>> {
        Ok(Vec::new())
    }
    async fn logs(&self, _: &str, _: &str, _: &str, _: u32) -> Result<LogStream> {
        Err(Error::NotFound("pod".into()))
    }
}

/// Allows alice everything in team-a, and nothing else; records what it was asked.
#[derive(Default)]
struct FakeReviews {
    asked: Mutex<Vec<(String, Action)>>,
}

#[async_trait]
impl Access for FakeReviews {
    async fn allowed(&self, user: &str, action: &Action) -> Result<bool> {
        self.asked.lock().unwrap().push((user.to_owned(), action.clone()));
        Ok(user == "alice" && action.namespace.as_deref() == Some("team-a"))
    }
}

struct Harness {
    app: axum::Router,
    backend: Arc<Fake>,
    reviews: Arc<FakeReviews>,
}

fn harness(settings: Settings) -> Harness {
    let backend = Arc::new(Fake::default());
    let reviews = Arc::new(FakeReviews::default());
    let access = (!settings.disable_auth).then(|| reviews.clone() as Arc<dyn Access>);
    let sampler = Sampler::new(backend.clone(), None, None);
    let state = Arc::new(App {
        settings,
        backend: backend.clone(),
        access,
        sampler,
        mode: Mode { name: "cluster", router: None },
    });
    Harness { app: app(state), backend, reviews }
}

async fn send(app: &axum::Router, request: Request<Body>) -> (StatusCode, http::HeaderMap, String) {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, String::from_utf8_lossy(&body).into_owned())
}

fn get(uri: &str, user: Option<&str>) -> Request<Body> {
    let mut builder = Request::get(uri);
    if let Some(user) = user {
        builder = builder.header("kubeflow-userid", user);
    }
    builder.body(Body::empty()).unwrap()
}

fn mutate(method: &str, uri: &str, user: &str, token: Option<&str>, body: &str) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(uri).header("kubeflow-userid", user);
    if let Some(token) = token {
        builder = builder.header("cookie", format!("XSRF-TOKEN={token}")).header("x-xsrf-token", token);
    }
    builder.body(Body::from(body.to_owned())).unwrap()
}

const MANIFEST: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  \
                        namespace: kube-system\nspec:\n  predictor:\n    model:\n      modelFormat: {name: onnx}\n";

#[tokio::test]
async fn without_the_user_header_every_page_is_401() {
    let h = harness(Settings::default());
    let (status, _, body) = send(&h.app, get("/models/?ns=team-a", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("kubeflow-userid"), "{body}");
    let (status, _, _) = send(&h.app, get("/models/healthz", None)).await;
    assert_eq!(status, StatusCode::OK, "probes need no user");
}

#[tokio::test]
async fn listing_is_reviewed_per_user_and_namespace() {
    let h = harness(Settings::default());
    let (status, _, body) = send(&h.app, get("/models/api/namespaces/team-a/inferenceservices", Some("alice"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("iris"));
    let (status, _, body) = send(&h.app, get("/models/api/namespaces/team-b/inferenceservices", Some("alice"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        body.contains("user alice may not list inferenceservices.serving.kserve.io in namespace team-b"),
        "the denial says what was denied: {body}"
    );
    let asked = h.reviews.asked.lock().unwrap().clone();
    assert_eq!(asked[0].0, "alice");
    assert_eq!(asked[0].1, Action::isvc("list", "team-a"));
    let (status, headers, body) = send(&h.app, get("/models/?ns=team-b", Some("bob"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "the page as well as the API");
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/html"), "a page answers with a page");
    assert!(body.contains("user bob may not list inferenceservices.serving.kserve.io in namespace team-b"), "{body}");
}

#[tokio::test]
async fn mutations_need_the_double_submitted_csrf_token() {
    let h = harness(Settings::default());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", None, MANIFEST)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("CSRF"), "{body}");
    let mismatched = Request::post(uri)
        .header("kubeflow-userid", "alice")
        .header("cookie", "XSRF-TOKEN=one")
        .header("x-xsrf-token", "two")
        .body(Body::from(MANIFEST))
        .unwrap();
    assert_eq!(send(&h.app, mismatched).await.0, StatusCode::FORBIDDEN);
    let (status, _, _) = send(&h.app, mutate("DELETE", &format!("{uri}/iris"), "alice", None, "")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(h.backend.created.lock().unwrap().is_empty(), "nothing was created");
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some("t0k3n"), MANIFEST)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn the_selected_namespace_is_forced_into_the_manifest() {
    let h = harness(Settings::default());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some("t"), MANIFEST)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let created = h.backend.created.lock().unwrap().clone();
    assert_eq!(created[0].0, "team-a");
    assert_eq!(created[0].1["metadata"]["namespace"], "team-a", "not kube-system as the manifest said");
}

#[tokio::test]
async fn api_refusals_reach_the_user_as_they_are() {
    let h = harness(Settings::default());
    let manifest = MANIFEST.replace("name: iris", "name: invalid");
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some("t"), &manifest)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(body["error"].as_str().unwrap().contains("spec.predictor.minReplicas"), "{body}");
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some("t"), "apiVersion: v1\nkind: Pod\n")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("apiVersion"), "{body}");
}

#[tokio::test]
async fn canary_changes_are_one_merge_patch() {
    let h = harness(Settings::default());
    let uri = "/models/api/namespaces/team-a/inferenceservices/iris";
    for (body, expected) in [
        (r#"{"canaryTrafficPercent": 30}"#, json!(30)),
        (r#"{"canaryTrafficPercent": null}"#, Value::Null),
        (r#"{"canaryTrafficPercent": 0}"#, json!(0)),
    ] {
        let request = Request::patch(uri)
            .header("kubeflow-userid", "alice")
            .header("cookie", "XSRF-TOKEN=t")
            .header("x-xsrf-token", "t")
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap();
        let (status, _, answer) = send(&h.app, request).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let patch = h.backend.patched.lock().unwrap().last().cloned().unwrap();
        assert_eq!(patch["spec"]["predictor"]["canaryTrafficPercent"], expected);
    }
}

#[tokio::test]
async fn pages_carry_the_browser_headers_and_a_csrf_cookie() {
    let h = harness(Settings::default());
    let (status, headers, body) = send(&h.app, get("/models/?ns=team-a", Some("alice"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let cookie = headers["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("XSRF-TOKEN=") && cookie.contains("SameSite=Strict") && cookie.contains("Secure"));
    assert!(!body.contains("<script>"), "no inline script");
    assert!(body.contains("iris"));
}

#[tokio::test]
async fn one_allowed_namespace_hides_the_selector_and_refuses_the_others() {
    let settings = Settings { allowed_namespaces: vec!["team-a".into()], ..Settings::default() };
    let h = harness(settings);
    let (status, _, body) = send(&h.app, get("/models/?ns=team-a", Some("alice"))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.contains("id=\"namespace\""), "no selector");
    let (status, _, body) = send(&h.app, get("/models/api/namespaces/team-b/inferenceservices", Some("alice"))).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("ALLOWED_NAMESPACES"), "{body}");
}

#[tokio::test]
async fn with_auth_off_no_user_is_needed() {
    let h = harness(Settings::standalone());
    let (status, _, body) = send(&h.app, get("/models/", None)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("id=\"namespace\""), "the selector lists the backend's namespaces");
    assert!(body.contains("team-b"));
}
