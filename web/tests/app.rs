//! The app driven without sockets (`oneshot`): the front proxy's secret, authentication, access
//! reviews, the server-issued CSRF token, `Host` and `Origin` checks, namespace forcing and the
//! browser headers, with a fake backend and a fake reviewer behind the same traits as the
//! Kubernetes API client (which `tests/cluster` exercises for real). Requests carry what the front
//! proxy adds (the user and its secret) and, for mutations, the cookies and token a page load gave.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use skiff_web::access::{Access, Action};
use skiff_web::backend::{Backend, EventView, LogStream, PodView, RollbackView, ServiceView};
use skiff_web::config::{Secret, Settings};
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
        rollback: RollbackView::default(),
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
    async fn rollback(&self, _: &str, _: &str) -> Result<()> {
        Err(Error::Refused { status: 409, message: "no earlier revision".into() })
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

/// The secret the front proxy sends in `skiff-proxy-secret`.
const PROXY_SECRET: &str = "the-front-proxy-secret-0123456789";

/// The cluster's settings, with the front proxy's secret configured.
fn cluster() -> Settings {
    Settings { proxy_secret: Some(Secret(PROXY_SECRET.into())), ..Settings::default() }
}

/// A request as the front proxy forwards it: its secret, and the user when there is one.
fn through_proxy(method: &str, uri: &str, user: Option<&str>) -> http::request::Builder {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header("host", "127.0.0.1:5000")
        .header("skiff-proxy-secret", PROXY_SECRET);
    if let Some(user) = user {
        builder = builder.header("kubeflow-userid", user);
    }
    builder
}

fn get(uri: &str, user: Option<&str>) -> Request<Body> {
    through_proxy("GET", uri, user).body(Body::empty()).unwrap()
}

/// What a browser holds after loading a page: the `Cookie` header it sends back and the token its
/// script reads from the `XSRF-TOKEN` cookie.
struct Session {
    cookie: String,
    token: String,
}

/// Loads the index as `user` and keeps the cookies the app set.
async fn session(app: &axum::Router, user: &str) -> Session {
    let (status, headers, body) = send(app, get("/models/?ns=team-a", Some(user))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let pairs: Vec<String> = headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned())
        .collect();
    let token = pairs.iter().find_map(|p| p.strip_prefix("XSRF-TOKEN=")).expect("an XSRF-TOKEN cookie").to_owned();
    Session { cookie: pairs.join("; "), token }
}

fn mutate(method: &str, uri: &str, user: &str, session: Option<&Session>, body: &str) -> Request<Body> {
    let mut builder = through_proxy(method, uri, Some(user));
    if let Some(session) = session {
        builder = builder.header("cookie", &session.cookie).header("x-xsrf-token", &session.token);
    }
    builder.body(Body::from(body.to_owned())).unwrap()
}

const MANIFEST: &str = "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: iris\n  \
                        namespace: kube-system\nspec:\n  predictor:\n    model:\n      modelFormat: {name: onnx}\n";

#[tokio::test]
async fn without_the_user_header_every_page_is_401() {
    let h = harness(cluster());
    let (status, _, body) = send(&h.app, get("/models/?ns=team-a", None)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("kubeflow-userid"), "{body}");
    let (status, _, _) = send(&h.app, get("/models/healthz", None)).await;
    assert_eq!(status, StatusCode::OK, "probes need no user");
}

#[tokio::test]
async fn listing_is_reviewed_per_user_and_namespace() {
    let h = harness(cluster());
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
async fn mutations_need_the_csrf_token_the_app_issued_for_the_session() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", None, MANIFEST)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("CSRF"), "{body}");
    let mismatched = through_proxy("POST", uri, Some("alice"))
        .header("cookie", "XSRF-TOKEN=one")
        .header("x-xsrf-token", "two")
        .body(Body::from(MANIFEST))
        .unwrap();
    assert_eq!(send(&h.app, mismatched).await.0, StatusCode::FORBIDDEN);
    // The double-submit pair a page can mint itself (the same value in cookie and header), with
    // or without a session cookie of its own making, is refused.
    let minted = Session { cookie: "XSRF-TOKEN=t0k3n".into(), token: "t0k3n".into() };
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&minted), MANIFEST)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("no session cookie"), "{body}");
    let own_session =
        Session { cookie: "skiff-web-session=00112233445566778899aabbccddeeff.00; XSRF-TOKEN=t0k3n".into(), ..minted };
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&own_session), MANIFEST)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("not issued by this app"), "{body}");
    // Another session's token does not fit this one.
    let (first, second) = (session(&h.app, "alice").await, session(&h.app, "alice").await);
    assert_ne!(first.token, second.token, "one token per session");
    let crossed = Session { cookie: first.cookie.clone(), token: second.token.clone() };
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&crossed), MANIFEST)).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(body.contains("not the token this app issued for this session"), "{body}");
    let (status, _, _) = send(&h.app, mutate("DELETE", &format!("{uri}/iris"), "alice", None, "")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(h.backend.created.lock().unwrap().is_empty(), "nothing was created");
    // The cookies and token a page load gave, as the page's script sends them.
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&first), MANIFEST)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn the_user_header_is_believed_only_with_the_proxys_secret() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let no_secret = Request::get(uri).header("kubeflow-userid", "alice").body(Body::empty()).unwrap();
    let (status, _, body) = send(&h.app, no_secret).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("no skiff-proxy-secret header"), "{body}");
    let wrong = Request::get(uri)
        .header("kubeflow-userid", "alice")
        .header("skiff-proxy-secret", "the-front-proxy-secret-012345678X")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = send(&h.app, wrong).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("not the front proxy's secret"), "{body}");
    assert!(h.reviews.asked.lock().unwrap().is_empty(), "no review was asked for an untrusted user");

    // Auth on without a secret configured: the header is never acted on.
    let unconfigured = harness(Settings::default());
    let (status, _, body) = send(&unconfigured.app, get(uri, Some("alice"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains("APP_PROXY_SECRET is not set"), "{body}");
    let (status, _, _) = send(&unconfigured.app, get("/models/healthz", None)).await;
    assert_eq!(status, StatusCode::OK, "the probe still answers");
}

#[tokio::test]
async fn mutations_from_another_origin_are_refused() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let page = session(&h.app, "alice").await;
    for (header, value, reason) in [
        ("sec-fetch-site", "cross-site", "Sec-Fetch-Site is cross-site"),
        ("sec-fetch-site", "same-site", "Sec-Fetch-Site is same-site"),
        ("origin", "http://evil.example", "Origin http://evil.example is not this app's origin"),
        ("origin", "http://127.0.0.1:8000", "Origin http://127.0.0.1:8000 is not this app's origin"),
    ] {
        let request = through_proxy("POST", uri, Some("alice"))
            .header("cookie", &page.cookie)
            .header("x-xsrf-token", &page.token)
            .header(header, value)
            .body(Body::from(MANIFEST))
            .unwrap();
        let (status, _, body) = send(&h.app, request).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{header}: {value}: {body}");
        assert!(body.contains(reason), "{body}");
    }
    assert!(h.backend.created.lock().unwrap().is_empty(), "nothing was created");
    let same_origin = through_proxy("POST", uri, Some("alice"))
        .header("cookie", &page.cookie)
        .header("x-xsrf-token", &page.token)
        .header("origin", "http://127.0.0.1:5000")
        .header("sec-fetch-site", "same-origin")
        .body(Body::from(MANIFEST))
        .unwrap();
    assert_eq!(send(&h.app, same_origin).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn in_skiff_up_only_loopback_names_are_answered() {
    let h = harness(Settings::standalone());
    for host in ["127.0.0.1:9091", "localhost:9091", "[::1]:9091"] {
        let request = Request::get("/models/").header("host", host).body(Body::empty()).unwrap();
        assert_eq!(send(&h.app, request).await.0, StatusCode::OK, "{host}");
    }
    for uri in ["/models/", "/models/static/app.js", "/models/api/namespaces/default/inferenceservices"] {
        let request = Request::get(uri).header("host", "evil.example:9091").body(Body::empty()).unwrap();
        let (status, headers, body) = send(&h.app, request).await;
        assert_eq!(status, StatusCode::MISDIRECTED_REQUEST, "{uri}: {body}");
        assert!(body.contains("Host \\\"evil.example:9091\\\" is not a name this app answers to"), "{body}");
        assert!(headers.get("set-cookie").is_none(), "no session for a misdirected request");
    }
    let probe = Request::get("/models/healthz").header("host", "10.0.0.7:5000").body(Body::empty()).unwrap();
    assert_eq!(send(&h.app, probe).await.0, StatusCode::OK, "the probe answers any Host");
}

#[tokio::test]
async fn the_selected_namespace_is_forced_into_the_manifest() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let page = session(&h.app, "alice").await;
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&page), MANIFEST)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let created = h.backend.created.lock().unwrap().clone();
    assert_eq!(created[0].0, "team-a");
    assert_eq!(created[0].1["metadata"]["namespace"], "team-a", "not kube-system as the manifest said");
}

#[tokio::test]
async fn api_refusals_reach_the_user_as_they_are() {
    let h = harness(cluster());
    let manifest = MANIFEST.replace("name: iris", "name: invalid");
    let uri = "/models/api/namespaces/team-a/inferenceservices";
    let page = session(&h.app, "alice").await;
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&page), &manifest)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert!(body["error"].as_str().unwrap().contains("spec.predictor.minReplicas"), "{body}");
    let (status, _, body) =
        send(&h.app, mutate("POST", uri, "alice", Some(&page), "apiVersion: v1\nkind: Pod\n")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("apiVersion"), "{body}");
}

#[tokio::test]
async fn canary_changes_are_one_merge_patch() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices/iris";
    let page = session(&h.app, "alice").await;
    for (body, expected) in [
        (r#"{"canaryTrafficPercent": 30}"#, json!(30)),
        (r#"{"canaryTrafficPercent": null}"#, Value::Null),
        (r#"{"canaryTrafficPercent": 0}"#, json!(0)),
    ] {
        let request = through_proxy("PATCH", uri, Some("alice"))
            .header("cookie", &page.cookie)
            .header("x-xsrf-token", &page.token)
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
async fn a_rollback_needs_the_token_and_its_refusal_reaches_the_user() {
    let h = harness(cluster());
    let uri = "/models/api/namespaces/team-a/inferenceservices/iris/rollback";
    let (status, _, _) = send(&h.app, mutate("POST", uri, "alice", None, "")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "no CSRF token");
    let page = session(&h.app, "alice").await;
    let (status, _, body) = send(&h.app, mutate("POST", uri, "alice", Some(&page), "")).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("no earlier revision"), "{body}");
    let other = uri.replace("team-a", "team-b");
    let (status, _, _) = send(&h.app, mutate("POST", &other, "alice", Some(&page), "")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "alice may not patch in team-b");
}

#[tokio::test]
async fn pages_carry_the_browser_headers_and_a_csrf_cookie() {
    let h = harness(cluster());
    let (status, headers, body) = send(&h.app, get("/models/?ns=team-a", Some("alice"))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let cookies: Vec<&str> = headers.get_all("set-cookie").iter().map(|v| v.to_str().unwrap()).collect();
    let token = cookies.iter().find(|c| c.starts_with("XSRF-TOKEN=")).expect("an XSRF-TOKEN cookie");
    assert!(token.contains("SameSite=Strict") && token.contains("Secure") && !token.contains("HttpOnly"));
    let session = cookies.iter().find(|c| c.starts_with("skiff-web-session=")).expect("a session cookie");
    assert!(session.contains("HttpOnly") && session.contains("SameSite=Strict") && session.contains("Secure"));
    assert!(!body.contains("<script>"), "no inline script");
    assert!(body.contains("iris"));
}

#[tokio::test]
async fn one_allowed_namespace_hides_the_selector_and_refuses_the_others() {
    let settings = Settings { allowed_namespaces: vec!["team-a".into()], ..cluster() };
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
    let request = Request::get("/models/").header("host", "localhost:9091").body(Body::empty()).unwrap();
    let (status, _, body) = send(&h.app, request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("id=\"namespace\""), "the selector lists the backend's namespaces");
    assert!(body.contains("team-b"));
}
