//! `skiff-web`: the models web app. List, create, edit (canary), delete and inspect
//! InferenceServices from a browser, with live status, events, YAML, streamed logs and metrics
//! charts; on a cluster (the Kubernetes API, SubjectAccessReviews per user) and inside `skiff up`
//! (its folder of manifests).
//!
//! Server-rendered HTML ([`pages`], maud) with one small script and one stylesheet embedded in the
//! binary ([`assets`]): no CDN, no front-end build. JSON and server-sent-event endpoints ([`routes`])
//! serve the script. Every request passes [`security::guard`]; every action is authorised in
//! [`App::authorize`].

pub mod access;
pub mod assets;
pub mod backend;
pub mod config;
pub mod error;
pub mod example;
pub mod formats;
pub mod kube_backend;
pub mod manifest;
pub mod metrics;
pub mod pages;
pub mod rollback;
pub mod routes;
pub mod security;
pub mod yaml_edit;

use std::sync::Arc;

use access::{Access, Action};
use backend::Backend;
use config::Settings;
use error::{Error, Result};
use metrics::sampler::Sampler;
use security::User;

/// What differs between the cluster and `skiff up`, for the pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mode {
    /// `cluster` or `skiff up`.
    pub name: &'static str,
    /// Where the curl example sends requests, when the service URL is not reachable as is
    /// (`skiff up`'s router); the URL's host goes in a `Host` header.
    pub router: Option<String>,
}

/// The app's state.
pub struct App {
    /// Settings.
    pub settings: Settings,
    /// Where InferenceServices live.
    pub backend: Arc<dyn Backend>,
    /// Access reviews; `None` when auth is off.
    pub access: Option<Arc<dyn Access>>,
    /// Metrics of the services being looked at.
    pub sampler: Arc<Sampler>,
    /// Cluster or standalone.
    pub mode: Mode,
}

impl App {
    /// Checks that `user` may do `action`: the namespace is allowed, and the API server says yes.
    pub async fn authorize(&self, user: &User, action: Action) -> Result<()> {
        if let Some(namespace) = &action.namespace
            && !self.settings.namespace_allowed(namespace)
        {
            return Err(Error::Forbidden(format!("namespace {namespace} is not in ALLOWED_NAMESPACES")));
        }
        match (user, &self.access) {
            (User::Named(name), Some(access)) => {
                if access.allowed(name, &action).await? {
                    Ok(())
                } else {
                    Err(Error::Forbidden(action.describe(name)))
                }
            }
            (User::Named(_), None) => Err(Error::Forbidden("auth is on but no access reviewer is set".into())),
            (User::Anonymous, _) => Ok(()),
        }
    }

    /// The namespaces to offer: the backend's, held to `ALLOWED_NAMESPACES`.
    pub async fn namespaces(&self, user: &User) -> Result<Vec<String>> {
        if let Some(only) = self.settings.single_namespace() {
            return Ok(vec![only.to_owned()]);
        }
        let all = self.backend.namespaces().await?;
        if !self.settings.allowed_namespaces.is_empty() {
            return Ok(all.into_iter().filter(|n| self.settings.namespace_allowed(n)).collect());
        }
        self.authorize(
            user,
            Action { verb: "list", group: "", resource: "namespaces", subresource: "", namespace: None },
        )
        .await?;
        Ok(all)
    }
}

/// Serves `routes` (the app, or the app with more routes) on `listener` with Skiff's HTTP shell
/// and its limits (connection cap, head and body deadlines, drain) until `shutdown`; returns whether
/// every request was answered.
pub async fn serve(
    listener: tokio::net::TcpListener,
    routes: axum::Router,
    shutdown: impl std::future::Future<Output = ()>,
    limits: skiff_http::ServeLimits,
) -> bool {
    use tower::ServiceExt;
    let handler = move |request: http::Request<hyper::body::Incoming>| {
        let routes = routes.clone();
        async move {
            match routes.oneshot(request.map(axum::body::Body::new)).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    };
    skiff_http::serve(listener, handler, shutdown, limits).await
}

/// The app's routes under `settings.prefix`, behind the security guard, gzip-compressed.
pub fn app(state: Arc<App>) -> axum::Router {
    routes::routes(&state.settings.prefix)
        .layer(axum::middleware::from_fn_with_state(state.clone(), security::guard))
        .layer(tower_http::compression::CompressionLayer::new())
        .with_state(state)
}
