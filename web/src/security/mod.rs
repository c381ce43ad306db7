//! The guard every request passes, in this order: the `Host` must be one the app answers to (421,
//! [`host`]); a mutating request must come from the app's own origin (403, [`host`]); with auth
//! on, the request must carry the front proxy's secret before its user header is believed (401),
//! and then the user (401 without one); a mutating request must carry the CSRF token the app issued
//! for its session (403, [`csrf`]). Every answer gets the session and CSRF cookies when it lacks
//! them, and the browser headers (Content-Security-Policy without inline scripts, `nosniff`, no
//! framing); a failed page load is rendered as a page of the app.

pub mod csrf;
pub mod host;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use http::header::{CONTENT_SECURITY_POLICY, COOKIE, HOST, SET_COOKIE};
use http::{HeaderMap, HeaderValue, Method};

use crate::App;
use crate::config::{AllowedHosts, Settings};
use crate::error::{Error, PageFailure, Result};
use csrf::{Signer, signer};

/// Name of the CSRF cookie the page's script reads (as Kubeflow's apps name it).
pub const CSRF_COOKIE: &str = "XSRF-TOKEN";
/// Name of the header that must carry its value.
pub const CSRF_HEADER: &str = "x-xsrf-token";
/// Name of the session cookie (HttpOnly: scripts cannot read or set it).
pub const SESSION_COOKIE: &str = "skiff-web-session";

/// Scripts and styles only from the app itself; nothing inline, no framing.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                       connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
                       frame-ancestors 'none'";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum User {
    /// Auth is off: every action is allowed (namespaces still held to `ALLOWED_NAMESPACES`).
    Anonymous,
    /// The user the authenticating proxy named.
    Named(String),
}

impl User {
    /// The user of a request with `headers`: with auth on, only from a request that carries the
    /// proxy's secret ([`check_proxy`]).
    pub fn from_headers(settings: &Settings, headers: &HeaderMap) -> Result<User> {
        if settings.disable_auth {
            return Ok(User::Anonymous);
        }
        check_proxy(settings, headers, signer())?;
        let value = headers
            .get(settings.userid_header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(|v| v.strip_prefix(settings.userid_prefix.as_str()).unwrap_or(v).trim())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::Unauthenticated(settings.userid_header.clone()))?;
        Ok(User::Named(value.to_owned()))
    }
}

/// Checks that a request came through the configured front proxy: it carries
/// `APP_PROXY_SECRET` in `APP_PROXY_SECRET_HEADER`. Without a configured secret no request does,
/// so the user header is never acted on.
pub fn check_proxy(settings: &Settings, headers: &HeaderMap, signer: &Signer) -> Result<()> {
    let header = &settings.proxy_secret_header;
    let Some(secret) = &settings.proxy_secret else {
        return Err(Error::UntrustedProxy(format!(
            "auth is on but APP_PROXY_SECRET is not set, so the app does not act on the {} header (any client \
             could send one)",
            settings.userid_header
        )));
    };
    let given = headers.get(header.as_str()).map(HeaderValue::as_bytes);
    match given {
        Some(given) if signer.same_secret(given, &secret.0) => Ok(()),
        Some(_) => Err(Error::UntrustedProxy(format!(
            "the {header} header is not the front proxy's secret: the request did not come through it"
        ))),
        None => Err(Error::UntrustedProxy(format!(
            "no {header} header: the request did not come through the configured front proxy"
        ))),
    }
}

/// A cookie's value in the request's `Cookie` headers.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// The `Set-Cookie` value of `name=value` with the settings' path, `SameSite` and `Secure`.
fn set_cookie(settings: &Settings, name: &str, value: &str, http_only: bool) -> String {
    let path = if settings.prefix.is_empty() { "/" } else { settings.prefix.as_str() };
    let secure = if settings.secure_cookies { "; Secure" } else { "" };
    let http_only = if http_only { "; HttpOnly" } else { "" };
    format!("{name}={value}; Path={path}{http_only}; SameSite={}{secure}", settings.csrf_samesite)
}

/// The cookies a response must set: a new session and its token when the request's session is
/// missing or not one this process issued, the token alone when the page's copy is not the
/// session's.
fn cookies_to_set(settings: &Settings, headers: &HeaderMap, signer: &Signer) -> Vec<String> {
    match cookie(headers, SESSION_COOKIE).filter(|s| signer.issued(s)) {
        Some(session) => {
            let token = signer.token(session);
            if cookie(headers, CSRF_COOKIE) == Some(token.as_str()) {
                Vec::new()
            } else {
                vec![set_cookie(settings, CSRF_COOKIE, &token, false)]
            }
        }
        None => {
            let session = signer.new_session();
            vec![
                set_cookie(settings, SESSION_COOKIE, &session, true),
                set_cookie(settings, CSRF_COOKIE, &signer.token(&session), false),
            ]
        }
    }
}

/// Paths served without a user: the probe and the script and stylesheet.
fn is_open(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest == "/healthz" || rest.starts_with("/static/"))
}

/// The probe answers any `Host`: kubelets send the pod's address.
fn is_probe(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix) == Some("/healthz")
}

fn mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The authorities a request names: its `Host` header and its URI's (HTTP/2, absolute form).
fn authorities(request: &Request) -> Vec<&str> {
    let host = request.headers().get(HOST).map(|h| h.to_str().unwrap_or("\u{fffd}"));
    host.into_iter().chain(request.uri().authority().map(|a| a.as_str())).collect()
}

/// Middleware for routes served beside the app on the same port (`skiff up`'s `/status`,
/// `/metrics`, `/healthz`): a `Host` that is not allowed gets 421, as in [`guard`].
pub async fn host_only(State(allowed): State<Arc<AllowedHosts>>, request: Request, next: Next) -> Response {
    match host::check_host(&allowed, &authorities(&request)) {
        Ok(()) => next.run(request).await,
        Err(error) => error.into_response(),
    }
}

/// Every check of a request but the `Host`, in order; the user it names.
fn check(settings: &Settings, request: &Request, authority: &str, signer: &Signer) -> Result<User> {
    let is_mutating = mutating(request.method());
    if is_mutating {
        host::check_origin(request.headers(), authority)?;
    }
    let user = User::from_headers(settings, request.headers())?;
    if is_mutating {
        let session = cookie(request.headers(), SESSION_COOKIE);
        signer.check(session, request.headers().get(CSRF_HEADER).map(HeaderValue::as_bytes))?;
    }
    Ok(user)
}

/// Middleware: host, origin, proxy, user, CSRF, cookies and browser headers.
pub async fn guard(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let settings = &app.settings;
    let path = request.uri().path();
    let (open, probe) = (is_open(&settings.prefix, path), is_probe(&settings.prefix, path));
    let signer = signer();
    let authorities = authorities(&request);
    let host_checked = if probe { Ok(()) } else { host::check_host(&settings.allowed_hosts, &authorities) };
    let mut response = match host_checked {
        Err(error) => error.into_response(),
        Ok(()) => {
            let authority = authorities.first().copied().unwrap_or_default().to_owned();
            let cookies = cookies_to_set(settings, request.headers(), signer);
            let mut response = match check(settings, &request, &authority, signer) {
                Ok(user) => {
                    request.extensions_mut().insert(user);
                    next.run(request).await
                }
                Err(_) if open => next.run(request).await,
                Err(error) => error.into_response(),
            };
            for cookie in cookies {
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    response.headers_mut().append(SET_COOKIE, value);
                }
            }
            response
        }
    };
    if let Some(PageFailure(message)) = response.extensions_mut().remove::<PageFailure>() {
        let page = crate::pages::layout::error_page(&app, response.status(), &message).into_string();
        let cookies: Vec<HeaderValue> = response.headers().get_all(SET_COOKIE).iter().cloned().collect();
        response = (response.status(), Html(page)).into_response();
        for cookie in cookies {
            response.headers_mut().append(SET_COOKIE, cookie);
        }
    }
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Secret;

    /// A header map of `pairs` (the security modules' tests share it).
    pub(super) fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    const SECRET: &str = "a-secret-of-32-bytes-for-the-hop";

    fn behind_proxy() -> Settings {
        Settings { proxy_secret: Some(Secret(SECRET.into())), ..Settings::default() }
    }

    #[test]
    fn the_user_comes_from_the_header_without_its_prefix() {
        let settings = Settings { userid_prefix: "accounts:".into(), ..behind_proxy() };
        let from_proxy = headers(&[("kubeflow-userid", "accounts:alice"), ("skiff-proxy-secret", SECRET)]);
        assert_eq!(User::from_headers(&settings, &from_proxy).unwrap(), User::Named("alice".into()));
        let missing = User::from_headers(&settings, &headers(&[("skiff-proxy-secret", SECRET)])).unwrap_err();
        assert_eq!(missing.status(), http::StatusCode::UNAUTHORIZED);
        assert_eq!(
            User::from_headers(&Settings::standalone(), &headers(&[])).unwrap(),
            User::Anonymous,
            "auth off: no header needed"
        );
    }

    #[test]
    fn the_user_header_counts_only_with_the_proxys_secret() {
        let settings = behind_proxy();
        for (pairs, reason) in [
            (&[("kubeflow-userid", "alice")][..], "no skiff-proxy-secret header"),
            (&[("kubeflow-userid", "alice"), ("skiff-proxy-secret", "guess")][..], "not the front proxy's secret"),
        ] {
            let error = User::from_headers(&settings, &headers(pairs)).unwrap_err();
            assert_eq!(error.status(), http::StatusCode::UNAUTHORIZED);
            assert!(error.to_string().contains(reason), "{error}");
        }
        let unconfigured = Settings::default();
        let error = User::from_headers(&unconfigured, &headers(&[("kubeflow-userid", "alice")])).unwrap_err();
        assert_eq!(error.status(), http::StatusCode::UNAUTHORIZED);
        assert!(error.to_string().contains("APP_PROXY_SECRET is not set"), "{error}");
    }

    #[test]
    fn only_the_probe_and_the_assets_need_no_user() {
        assert!(is_open("/models", "/models/healthz") && is_open("/models", "/models/static/app.js"));
        assert!(!is_open("/models", "/models/api/namespaces/static/inferenceservices"));
        assert!(!is_open("/models", "/models/details/x/healthz"));
        assert!(is_open("", "/healthz"));
        assert!(is_probe("/models", "/models/healthz") && !is_probe("/models", "/models/static/app.js"));
    }

    #[test]
    fn cookies_follow_the_settings_and_the_session() {
        let signer = Signer::with_key(b"k");
        let fresh = cookies_to_set(&Settings::default(), &headers(&[]), &signer);
        assert_eq!(fresh.len(), 2, "{fresh:?}");
        assert!(fresh[0].starts_with("skiff-web-session=") && fresh[0].contains("; HttpOnly; SameSite=Strict"));
        assert!(fresh[1].starts_with("XSRF-TOKEN=") && fresh[1].contains("; Path=/models; SameSite=Strict; Secure"));
        assert!(!fresh[1].contains("HttpOnly"), "the page's script reads the token");
        assert!(!cookies_to_set(&Settings::standalone(), &headers(&[]), &signer)[1].contains("Secure"));

        let session = signer.new_session();
        let token = signer.token(&session);
        let both = format!("{SESSION_COOKIE}={session}; {CSRF_COOKIE}={token}");
        assert!(cookies_to_set(&Settings::default(), &headers(&[("cookie", &both)]), &signer).is_empty());
        let stale_token = format!("{SESSION_COOKIE}={session}; {CSRF_COOKIE}=minted");
        let again = cookies_to_set(&Settings::default(), &headers(&[("cookie", &stale_token)]), &signer);
        assert!(again.len() == 1 && again[0].starts_with(&format!("XSRF-TOKEN={token};")), "{again:?}");
        let foreign = format!("{SESSION_COOKIE}=00.11; {CSRF_COOKIE}=22");
        let renewed = cookies_to_set(&Settings::default(), &headers(&[("cookie", &foreign)]), &signer);
        assert!(renewed.len() == 2 && !renewed[0].contains("00.11"), "a session it did not issue is replaced");
    }
}
