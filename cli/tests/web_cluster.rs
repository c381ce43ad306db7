//! The models web app on a real cluster, as a non-admin user, in a real headless Chromium.
//!
//! Run by `tests/cluster/e2e-web.sh`, which brings up the local cluster with Skiff (skiff-web
//! included, auth on, the front proxy's secret in Secret skiff-web-proxy), gives user `alice`
//! rights in namespace team-a only, creates an InferenceService there and tells this test where
//! things are:
//!   SKIFF_WEB_URL        the app, e.g. http://10.244.16.7:5000 (a pod IP: no kube-proxy)
//!   SKIFF_WEB_PROXY_SECRET  the secret the front proxy sends in `skiff-proxy-secret`
//!   SKIFF_WEB_USER       the user the proxy names (alice)
//!   SKIFF_WEB_NAMESPACE  where alice may work (team-a); SKIFF_WEB_FORBIDDEN_NAMESPACE where not (team-b)
//!   SKIFF_WEB_SERVICE    the InferenceService in team-a (iris)
//!   SKIFF_WEB_MODEL_URI  storageUri of the service this test creates (file://<repo>/examples/models/iris)
//!   SKIFF_WEB_ROUTER     a router pod, ip:port, and SKIFF_WEB_HOST the service's host: requests sent
//!                        there must show on the metrics charts (sampled from the router pods)
//!
//! In front of the app the test runs what Kubeflow puts there: a small reverse proxy on 127.0.0.1
//! that adds `kubeflow-userid: <user>` and the proxy's secret to every request (and drops those
//! sent by the client). The browser and the plain HTTP client both go through it; a client that
//! goes around it with a user header of its own is refused.

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::IRIS_ROW;
use common::browser::Browser;
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};

/// The header the app reads the user from (its default `USERID_HEADER`).
const USER_HEADER: &str = "kubeflow-userid";
/// The header the proxy's secret travels in (its default `APP_PROXY_SECRET_HEADER`).
const SECRET_HEADER: &str = "skiff-proxy-secret";

fn env(name: &str, default: Option<&str>) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .or_else(|| default.map(str::to_owned))
        .unwrap_or_else(|| panic!("{name} is not set (tests/cluster/e2e-web.sh sets it)"))
}

/// A reverse proxy on 127.0.0.1 that names `user` in [`USER_HEADER`], proves itself with `secret`
/// in [`SECRET_HEADER`] and forwards to `upstream` (`http://host:port`), streaming both ways (the
/// log and live-index endpoints are event streams).
async fn start_proxy(upstream: String, user: String, secret: String) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client: Client<HttpConnector, Incoming> = Client::builder(TokioExecutor::new()).build_http();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let (client, upstream, user, secret) = (client.clone(), upstream.clone(), user.clone(), secret.clone());
            let service = service_fn(move |mut request: Request<Incoming>| {
                let (client, upstream, user, secret) = (client.clone(), upstream.clone(), user.clone(), secret.clone());
                async move {
                    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
                    *request.uri_mut() = format!("{upstream}{path}").parse::<Uri>().unwrap();
                    let headers = request.headers_mut();
                    headers.remove(USER_HEADER);
                    headers.insert(USER_HEADER, user.parse().unwrap());
                    headers.remove(SECRET_HEADER);
                    headers.insert(SECRET_HEADER, secret.parse().unwrap());
                    headers.remove(http::header::CONNECTION);
                    let answer: Response<BoxBody<Bytes, hyper::Error>> = match client.request(request).await {
                        Ok(response) => response.map(BodyExt::boxed),
                        Err(error) => Response::builder()
                            .status(StatusCode::BAD_GATEWAY)
                            .body(Full::new(Bytes::from(format!("proxy: {error}"))).map_err(|e| match e {}).boxed())
                            .unwrap(),
                    };
                    Ok::<_, Infallible>(answer)
                }
            });
            tokio::spawn(async move {
                let _ =
                    hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    });
    addr
}

/// The first `data:` line of a server-sent-event stream at `url`, within `limit`.
async fn first_event(url: &str, limit: Duration) -> Result<String, String> {
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let request = Request::get(url).header("accept", "text/event-stream").body(Full::new(Bytes::new())).unwrap();
    let read = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let mut body = response.into_body();
        let mut text = String::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| e.to_string())?;
            if let Some(data) = frame.data_ref() {
                text.push_str(&String::from_utf8_lossy(data));
            }
            if status != StatusCode::OK {
                continue;
            }
            // `event: failure` lines come with their own data: report them as errors.
            if text.contains("event: failure") {
                return Err(format!("the stream reported a failure: {text}"));
            }
            if let Some(line) = text.lines().find(|l| l.starts_with("data:")) {
                return Ok(line.trim_start_matches("data:").trim().to_owned());
            }
        }
        Err(format!("{status}, the stream ended without a data line: {text}"))
    };
    tokio::time::timeout(limit, read).await.map_err(|_| format!("no data line within {limit:?}"))?
}

/// A manifest for an iris InferenceService named `name`.
fn iris(name: &str, storage_uri: &str, min_replicas: i64) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1beta1\nkind: InferenceService\nmetadata:\n  name: {name}\nspec:\n  \
         predictor:\n    minReplicas: {min_replicas}\n    model:\n      modelFormat:\n        name: onnx\n      \
         protocolVersion: v2\n      storageUri: {storage_uri}\n"
    )
}

/// A script for the page: POSTs `manifest` to the create endpoint (with the CSRF header repeating
/// the cookie when `csrf`) and returns `{status, body}`.
fn post_script(prefix_url: &str, manifest: &str, csrf: bool) -> String {
    let token = if csrf {
        "const c = document.cookie.split('; ').find(c => c.startsWith('XSRF-TOKEN='));\n\
         if (!c) { return {status: -1, body: 'no XSRF-TOKEN cookie in the page: ' + document.cookie}; }\n\
         headers['X-XSRF-TOKEN'] = c.slice('XSRF-TOKEN='.length);\n"
    } else {
        ""
    };
    format!(
        "const headers = {{'Content-Type': 'application/yaml'}};\n{token}\
         return fetch({url}, {{method: 'POST', headers, body: {body}, credentials: 'same-origin'}})\n\
           .then(async r => ({{status: r.status, body: await r.text()}}));",
        url = json!(prefix_url),
        body = json!(manifest),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by tests/cluster/e2e-web.sh"]
async fn a_non_admin_user_on_the_cluster() {
    let app_url = env("SKIFF_WEB_URL", None).trim_end_matches('/').to_owned();
    let user = env("SKIFF_WEB_USER", Some("alice"));
    let ns = env("SKIFF_WEB_NAMESPACE", Some("team-a"));
    let forbidden = env("SKIFF_WEB_FORBIDDEN_NAMESPACE", Some("team-b"));
    let service = env("SKIFF_WEB_SERVICE", Some("iris"));
    let default_uri = format!("file://{}", common::repo().join("examples/models/iris").display());
    let model_uri = env("SKIFF_WEB_MODEL_URI", Some(&default_uri));

    let secret = env("SKIFF_WEB_PROXY_SECRET", None);

    // Straight to the app, no proxy: auth is on, so no user header is a 401.
    let index = format!("{app_url}/models/?ns={ns}");
    let direct = common::send(Method::GET, &index, Bytes::new(), &[]).await.unwrap();
    assert_eq!(direct.status, StatusCode::UNAUTHORIZED, "without {USER_HEADER}: {}", direct.json());
    eprintln!("ok: straight to the app without {USER_HEADER}: 401 {}", direct.json());

    // Around the proxy, claiming to be the user: without the proxy's secret, or with a wrong one,
    // the header is not believed.
    let claimed = common::send(Method::GET, &index, Bytes::new(), &[(USER_HEADER, &user)]).await.unwrap();
    assert_eq!(claimed.status, StatusCode::UNAUTHORIZED, "{USER_HEADER} without the secret: {}", claimed.json());
    let error = claimed.json()["error"].as_str().unwrap_or("").to_owned();
    assert!(error.contains(&format!("no {SECRET_HEADER} header")), "{}", claimed.json());
    eprintln!("ok: {USER_HEADER}: {user} straight to the app, without the proxy's secret: 401 {error}");
    let wrong = format!("{secret}x");
    let guessed = common::send(Method::GET, &index, Bytes::new(), &[(USER_HEADER, &user), (SECRET_HEADER, &wrong)])
        .await
        .unwrap();
    assert_eq!(guessed.status, StatusCode::UNAUTHORIZED, "a wrong secret: {}", guessed.json());
    eprintln!("ok: with a wrong {SECRET_HEADER}: 401 {}", guessed.json()["error"]);

    let proxy = start_proxy(app_url.clone(), user.clone(), secret).await;
    let base = format!("http://{proxy}/models");
    let create_url = format!("{base}/api/namespaces/{ns}/inferenceservices");
    eprintln!("proxy http://{proxy} -> {app_url} as {user}");

    // A plain client through the proxy: a POST without the CSRF cookie and header is refused.
    let manifest = iris("iris-no-csrf", &model_uri, 0);
    let refused = common::send(Method::POST, &create_url, Bytes::from(manifest.clone()), &[]).await.unwrap();
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "POST without CSRF: {}", refused.json());
    assert!(refused.json()["error"].as_str().unwrap_or("").contains("CSRF"), "{}", refused.json());
    eprintln!("ok: plain POST without the CSRF token through the proxy: 403 {}", refused.json());

    // The logs of a running predictor pod, through the app's event stream.
    let pods_url = format!("{base}/api/namespaces/{ns}/inferenceservices/{service}/pods");
    let deadline = Instant::now() + Duration::from_secs(120);
    let pod = loop {
        let reply = common::send(Method::GET, &pods_url, Bytes::new(), &[]).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{pods_url}: {}", reply.json());
        let running = reply.json().as_array().and_then(|pods| pods.iter().find(|p| p["phase"] == "Running").cloned());
        if let Some(pod) = running {
            break pod;
        }
        assert!(Instant::now() < deadline, "no Running pod of {ns}/{service}: {}", reply.json());
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let (pod_name, container) = (pod["name"].as_str().unwrap(), pod["container"].as_str().unwrap());
    assert_eq!(container, "kserve-container", "{pod}");
    let logs_url = format!("{base}/api/namespaces/{ns}/pods/{pod_name}/logs?container={container}");
    let line = first_event(&logs_url, Duration::from_secs(60)).await.unwrap_or_else(|e| panic!("{logs_url}: {e}"));
    assert!(!line.is_empty(), "an empty first log line from {logs_url}");
    eprintln!("ok: logs of {ns}/{pod_name} ({container}) through the app, first line: {line}");

    // Requests through a router pod move the request-rate chart: without PROMETHEUS_URL the app
    // samples the router pods' /metrics, found through the router Service's EndpointSlices.
    let (router, host) = (env("SKIFF_WEB_ROUTER", None), env("SKIFF_WEB_HOST", None));
    let metrics_url = format!("{base}/api/namespaces/{ns}/inferenceservices/{service}/metrics?minutes=5");
    let infer_url = format!("http://{router}/v2/models/{service}/infer");
    let deadline = Instant::now() + Duration::from_secs(90);
    let rate = loop {
        let reply = common::send(Method::GET, &metrics_url, Bytes::new(), &[]).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK, "{metrics_url}: {}", reply.json());
        let panels = reply.json();
        let rate = panels.as_array().and_then(|p| p.iter().find(|p| p["id"] == "rate")).cloned().unwrap_or_default();
        let last =
            rate["series"].as_array().and_then(|s| s.first()).and_then(|s| s["points"].as_array()?.last()?[1].as_f64());
        if last.is_some_and(|v| v > 0.0) {
            break rate;
        }
        assert!(Instant::now() < deadline, "the rate chart never moved: {panels}");
        for _ in 0..10 {
            let reply =
                common::send(Method::POST, &infer_url, Bytes::from_static(IRIS_ROW.as_bytes()), &[("host", &host)])
                    .await;
            assert_eq!(reply.map(|r| r.status).ok(), Some(StatusCode::OK), "an infer request through {router}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    eprintln!("ok: requests through {router} show on the rate chart: {}", rate["series"][0]["label"]);

    let setup = Setup { base, user, ns, forbidden, service, model_uri };
    Browser::start("web_cluster").await.run(async |b| browse(b, &setup).await).await;
}

/// Where the browser goes and what it expects.
struct Setup {
    base: String,
    user: String,
    ns: String,
    forbidden: String,
    service: String,
    model_uri: String,
}

/// The browser's part, as the user the proxy names.
async fn browse(b: &mut Browser, setup: &Setup) {
    let Setup { base, user, ns, forbidden, service, model_uri } = setup;
    let (ns, service) = (ns.as_str(), service.as_str());
    // The create form offers what the cluster's runtimes run (e2e-web.sh installs form-sklearn in
    // the namespace and a disabled ClusterServingRuntime for tensorflow), and custom containers.
    b.open(&format!("{base}/new?ns={ns}"), "create-form").await;
    let offered =
        b.eval("return [...document.querySelectorAll('select[name=modelFormat] option')].map(o => o.value)").await;
    assert_eq!(offered, json!(["onnx", "sklearn", "custom-container"]), "the create form offers {offered}");
    eprintln!("ok: as {user}, the create form in {ns} offers {offered}");

    // The index of the allowed namespace lists the service.
    b.open(&format!("{base}/?ns={ns}"), "index-allowed").await;
    let table = b.wait_text("table#services", &format!("{service} in the table"), |t| t.contains(service)).await;
    eprintln!("ok: as {user}, the index of {ns} lists {service}: {}", table.replace('\n', " | "));

    // The forbidden namespace: a 403 that says what was denied.
    b.open(&format!("{base}/?ns={forbidden}"), "index-forbidden").await;
    let body = b.text("body").await;
    let denied = format!("user {user} may not list inferenceservices");
    assert!(
        body.contains("403") && body.contains(&denied) && body.contains(&format!("namespace {forbidden}")),
        "the page of {forbidden} says: {body}"
    );
    eprintln!("ok: as {user}, {forbidden} is a 403: {body}");

    // Back on the allowed page (it holds the CSRF cookie): a POST without the header is refused.
    b.open(&format!("{base}/?ns={ns}"), "index-again").await;
    let path = format!("/models/api/namespaces/{ns}/inferenceservices");
    let answer = b.eval(&post_script(&path, &iris("iris-no-header", model_uri, 0), false)).await;
    assert_eq!(answer["status"], 403, "fetch POST without X-XSRF-TOKEN: {answer}");
    assert!(answer["body"].as_str().unwrap_or("").contains("X-XSRF-TOKEN"), "{answer}");
    eprintln!("ok: fetch() POST from the page without X-XSRF-TOKEN: 403 {}", answer["body"]);

    // A manifest the API server refuses: its message comes back as it is, naming the field.
    let answer = b.eval(&post_script(&path, &iris("iris-invalid", model_uri, -1), true)).await;
    let message = answer["body"].as_str().and_then(|t| serde_json::from_str::<Value>(t).ok()).unwrap_or_default();
    let error = message["error"].as_str().unwrap_or("");
    assert_eq!(answer["status"], 422, "minReplicas -1: {answer}");
    assert!(error.contains("minReplicas"), "the API server's refusal names the field: {answer}");
    eprintln!("ok: minReplicas -1 is refused by the API server, shown as it said: 422 {error}");

    // With the cookie repeated in the header, the same kind of POST creates a second service.
    let second = "iris-from-browser";
    let answer = b.eval(&post_script(&path, &iris(second, model_uri, 0), true)).await;
    assert_eq!(answer["status"], 201, "fetch POST with the CSRF header: {answer}");
    let created: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
    assert_eq!((created["name"].as_str(), created["namespace"].as_str()), (Some(second), Some(ns)));
    eprintln!("ok: fetch() POST with cookie and X-XSRF-TOKEN created {ns}/{second}: 201");

    // The live index picks it up without a reload.
    b.wait_text("table#services", &format!("{second} in the live table"), |t| t.contains(second)).await;
    b.shot("index-live-second").await;
    eprintln!("ok: the live index of {ns} shows {second} without a reload");

    // A third, whose detail page is opened at once: it follows the service until Ready, without a
    // reload (a reload clears the mark).
    let third = "iris-opened-at-once";
    let answer = b.eval(&post_script(&path, &iris(third, model_uri, 0), true)).await;
    assert_eq!(answer["status"], 201, "fetch POST of {third}: {answer}");
    b.open(&format!("{base}/details/{ns}/{third}"), "details-third").await;
    b.eval("window.notReloaded = true").await;
    let first = b.text("h1 .status").await;
    let ready = b.wait_text("h1 .status", &format!("{third} Ready on its open page"), |t| t == "Ready: True").await;
    assert_eq!(b.eval("return window.notReloaded === true").await, true, "the detail page was reloaded");
    b.shot("details-third-ready").await;
    eprintln!("ok: the detail page of {ns}/{third} opened at {first:?}, turned {ready:?} without a reload");

    // Its detail page, as alice.
    b.open(&format!("{base}/details/{ns}/{service}"), "details").await;
    let heading = b.text("h1").await;
    assert!(heading.contains(service), "the detail page's heading: {heading}");
    eprintln!("ok: the detail page of {ns}/{service}: {heading}");
}
