//! Routes: the pages, and the JSON / server-sent-event API the page script calls. Every handler
//! authorises its action first; errors become answers in [`crate::error`].

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::{Extension, Json, Router};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::access::Action;
use crate::backend::{EventView, PodView, ServiceView};
use crate::error::{Error, PageError, Result};
use crate::manifest::{Form, canary_patch, force_namespace, parse, to_yaml};
use crate::metrics::Panel;
use crate::security::User;
use crate::{App, assets, pages};

type AppState = State<Arc<App>>;

/// How often the live index checks for changes.
const ROWS_INTERVAL: Duration = Duration::from_secs(2);
/// The longest metrics window, in minutes: the app's history reaches back as far.
const MAX_MINUTES: u64 = crate::metrics::history::KEPT.as_secs() / 60;
/// Largest log tail a client may ask for.
const MAX_TAIL: u32 = 10_000;

/// Every route, under `prefix` (`{prefix}` itself redirects to the index at `{prefix}/`).
pub fn routes(prefix: &str) -> Router<Arc<App>> {
    let at = |path: &str| format!("{prefix}{path}");
    let api = |path: &str| format!("{prefix}/api/namespaces{path}");
    let mut router = Router::new()
        .route(&at("/"), get(index))
        .route(&at("/new"), get(new))
        .route(&at("/details/{namespace}/{name}"), get(details))
        .route(&at("/static/{file}"), get(assets::serve))
        .route(&at("/healthz"), get(|| async { "ok" }))
        .route(&api(""), get(namespaces))
        .route(&api("/{namespace}/inferenceservices"), get(list).post(create))
        .route(&api("/{namespace}/render"), axum::routing::post(render))
        .route(&api("/{namespace}/rows"), get(rows))
        .route(&api("/{namespace}/inferenceservices/{name}"), get(one).patch(patch).delete(delete))
        .route(&api("/{namespace}/inferenceservices/{name}/rollback"), axum::routing::post(rollback))
        .route(&api("/{namespace}/inferenceservices/{name}/events"), get(events))
        .route(&api("/{namespace}/inferenceservices/{name}/pods"), get(pods))
        .route(&api("/{namespace}/inferenceservices/{name}/metrics"), get(metrics))
        .route(&api("/{namespace}/pods/{pod}/logs"), get(logs));
    if !prefix.is_empty() {
        let index = at("/");
        router = router.route(prefix, get(move || async move { Redirect::permanent(&index) }));
    }
    router
}

#[derive(Deserialize)]
struct NamespaceQuery {
    ns: Option<String>,
}

/// The namespace asked for, or the first one offered. A user who may not list namespaces is
/// offered the one asked for.
async fn selected(app: &App, user: &User, asked: Option<String>) -> Result<(String, Vec<String>)> {
    let asked = asked.filter(|n| !n.is_empty());
    let namespaces = match app.namespaces(user).await {
        Err(Error::Forbidden(_)) => asked.iter().cloned().collect(),
        other => other?,
    };
    let namespace = match asked {
        Some(namespace) => namespace,
        None => namespaces
            .iter()
            .find(|n| *n == "default")
            .or_else(|| namespaces.first())
            .cloned()
            .unwrap_or_else(|| "default".into()),
    };
    Ok((namespace, namespaces))
}

async fn index(
    State(app): AppState,
    Extension(user): Extension<User>,
    Query(query): Query<NamespaceQuery>,
) -> Result<Html<String>, PageError> {
    let (namespace, namespaces) = selected(&app, &user, query.ns).await?;
    app.authorize(&user, Action::isvc("list", &namespace)).await?;
    let services = app.backend.list(&namespace).await?;
    let (refused, warnings) = (app.backend.refused().await?, app.backend.warnings().await?);
    Ok(Html(pages::index::page(&app, &namespace, &namespaces, &services, &refused, &warnings).into_string()))
}

async fn new(
    State(app): AppState,
    Extension(user): Extension<User>,
    Query(query): Query<NamespaceQuery>,
) -> Result<Html<String>, PageError> {
    let (namespace, namespaces) = selected(&app, &user, query.ns).await?;
    app.authorize(&user, Action::isvc("create", &namespace)).await?;
    let offer = app.backend.offer(&namespace).await?;
    Ok(Html(pages::create::page(&app, &namespace, &namespaces, &offer).into_string()))
}

#[derive(Deserialize)]
struct TabQuery {
    tab: Option<String>,
}

async fn details(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<TabQuery>,
) -> Result<Html<String>, PageError> {
    app.authorize(&user, Action::isvc("get", &namespace)).await?;
    let service = app.backend.get(&namespace, &name).await?;
    let tab = pages::detail::Tab::parse(query.tab.as_deref())?;
    let content = match tab {
        pages::detail::Tab::Events => {
            app.authorize(&user, Action::namespaced("list", "", "events", &namespace)).await?;
            pages::detail::Content::Events(app.backend.events(&namespace, &name).await?)
        }
        pages::detail::Tab::Yaml => pages::detail::Content::Yaml(app.backend.manifest(&namespace, &name).await?),
        pages::detail::Tab::Logs => {
            app.authorize(&user, Action::namespaced("list", "", "pods", &namespace)).await?;
            pages::detail::Content::Pods(app.backend.pods(&namespace, &name).await?)
        }
        pages::detail::Tab::Overview => {
            pages::detail::Content::Example(crate::example::body(app.mode.router.as_deref(), &service).await)
        }
        _ => pages::detail::Content::None,
    };
    let namespaces = app.namespaces(&user).await.unwrap_or_else(|_| vec![namespace.clone()]);
    Ok(Html(pages::detail::page(&app, &namespaces, &service, tab, &content).into_string()))
}

async fn namespaces(State(app): AppState, Extension(user): Extension<User>) -> Result<Json<Vec<String>>> {
    Ok(Json(app.namespaces(&user).await?))
}

async fn list(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path(namespace): Path<String>,
) -> Result<Json<Vec<ServiceView>>> {
    app.authorize(&user, Action::isvc("list", &namespace)).await?;
    Ok(Json(app.backend.list(&namespace).await?))
}

async fn one(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<ServiceView>> {
    app.authorize(&user, Action::isvc("get", &namespace)).await?;
    Ok(Json(app.backend.get(&namespace, &name).await?))
}

/// `POST`: the body is the manifest (YAML or JSON); its namespace is forced to the path's.
async fn create(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path(namespace): Path<String>,
    body: String,
) -> Result<Response> {
    app.authorize(&user, Action::isvc("create", &namespace)).await?;
    let manifest = force_namespace(parse(&body)?, &namespace)?;
    let created = app.backend.create(&namespace, manifest).await?;
    Ok((http::StatusCode::CREATED, Json(created)).into_response())
}

/// `POST`: the create form's fields → the YAML it will submit.
async fn render(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path(namespace): Path<String>,
    Json(form): Json<Form>,
) -> Result<Json<Value>> {
    app.authorize(&user, Action::isvc("create", &namespace)).await?;
    Ok(Json(json!({ "yaml": to_yaml(&form.manifest(&namespace)?) })))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CanaryChange {
    /// `null` promotes (the field is removed); a number sets the canary's share.
    canary_traffic_percent: Option<u32>,
}

async fn patch(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
    Json(change): Json<CanaryChange>,
) -> Result<Json<ServiceView>> {
    app.authorize(&user, Action::isvc("patch", &namespace)).await?;
    app.backend.patch(&namespace, &name, canary_patch(change.canary_traffic_percent)?).await?;
    Ok(Json(app.backend.get(&namespace, &name).await?))
}

/// `POST`: after a full rollout, restores the previous rolled-out revision's spec
/// ([`crate::backend::Backend::rollback`]); answers the service as it is now.
async fn rollback(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<ServiceView>> {
    app.authorize(&user, Action::isvc("patch", &namespace)).await?;
    app.backend.rollback(&namespace, &name).await?;
    Ok(Json(app.backend.get(&namespace, &name).await?))
}

async fn delete(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Value>> {
    app.authorize(&user, Action::isvc("delete", &namespace)).await?;
    app.backend.delete(&namespace, &name).await?;
    Ok(Json(json!({ "deleted": format!("{namespace}/{name}") })))
}

async fn events(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Vec<EventView>>> {
    app.authorize(&user, Action::namespaced("list", "", "events", &namespace)).await?;
    Ok(Json(app.backend.events(&namespace, &name).await?))
}

async fn pods(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
) -> Result<Json<Vec<PodView>>> {
    app.authorize(&user, Action::namespaced("list", "", "pods", &namespace)).await?;
    Ok(Json(app.backend.pods(&namespace, &name).await?))
}

#[derive(Deserialize)]
struct WindowQuery {
    minutes: Option<u64>,
}

async fn metrics(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, name)): Path<(String, String)>,
    Query(query): Query<WindowQuery>,
) -> Result<Json<Vec<Panel>>> {
    app.authorize(&user, Action::isvc("get", &namespace)).await?;
    // Only a service that exists starts being sampled.
    app.backend.get(&namespace, &name).await?;
    let minutes = query.minutes.unwrap_or(15).clamp(1, MAX_MINUTES);
    Ok(Json(app.sampler.panels(&namespace, &name, Duration::from_secs(minutes * 60)).await?))
}

#[derive(Deserialize)]
struct LogQuery {
    container: String,
    tail: Option<u32>,
}

/// Server-sent events: one `data:` per log line, until the replica goes or the page closes.
async fn logs(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path((namespace, pod)): Path<(String, String)>,
    Query(query): Query<LogQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>> {
    let action = Action { subresource: "log", ..Action::namespaced("get", "", "pods", &namespace) };
    app.authorize(&user, action).await?;
    let tail = query.tail.unwrap_or(200).min(MAX_TAIL);
    let lines = app.backend.logs(&namespace, &pod, &query.container, tail).await?;
    let events = lines.map(|line| {
        Ok(match line {
            Ok(line) => Event::default().data(line),
            Err(error) => Event::default().event("failure").data(error.to_string()),
        })
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

/// Server-sent events: the index table's rows (`rows`) and the notices above it (`notices`), each
/// rendered again and sent whenever it changes.
async fn rows(
    State(app): AppState,
    Extension(user): Extension<User>,
    Path(namespace): Path<String>,
) -> Result<Response> {
    app.authorize(&user, Action::isvc("list", &namespace)).await?;
    let start = (app, namespace, Shown::default(), true);
    let stream = futures::stream::unfold(start, |(app, namespace, mut shown, mut first)| async move {
        loop {
            if !first {
                tokio::time::sleep(ROWS_INTERVAL).await;
            }
            first = false;
            let events = match index_parts(&app, &namespace).await {
                Ok((rows, notices)) => shown.changes(rows, notices),
                Err(error) => vec![Event::default().event("failure").data(error.to_string())],
            };
            if !events.is_empty() {
                return Some((events, (app, namespace, shown, false)));
            }
        }
    })
    .flat_map(|events| futures::stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// The live index's two parts as HTML: the rows and the notices.
async fn index_parts(app: &App, namespace: &str) -> Result<(String, String)> {
    let services = app.backend.list(namespace).await?;
    let (refused, warnings) = (app.backend.refused().await?, app.backend.warnings().await?);
    Ok((pages::index::rows(app, &services).into_string(), pages::index::notices(&refused, &warnings).into_string()))
}

/// What a live index was last sent.
#[derive(Default)]
struct Shown {
    rows: String,
    notices: String,
}

impl Shown {
    /// The events for the parts that differ from what was sent (the first time, the rows always).
    fn changes(&mut self, rows: String, notices: String) -> Vec<Event> {
        let mut events = Vec::new();
        if rows != self.rows {
            events.push(Event::default().event("rows").data(rows.replace('\n', " ")));
            self.rows = rows;
        }
        if notices != self.notices {
            events.push(Event::default().event("notices").data(notices.replace('\n', " ")));
            self.notices = notices;
        }
        events
    }
}
