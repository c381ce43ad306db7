//! The guard every request passes: the user from `USERID_HEADER` (401 without it when auth is on),
//! the double-submit CSRF check on mutating requests (403 without it), the CSRF cookie, and the
//! browser headers (Content-Security-Policy without inline scripts, `nosniff`, no framing), and a
//! failed page load rendered as a page of the app.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use http::header::{CONTENT_SECURITY_POLICY, COOKIE, SET_COOKIE};
use http::{HeaderMap, HeaderValue, Method};
use rand::RngCore;

use crate::App;
use crate::config::Settings;
use crate::error::{Error, PageFailure, Result};

/// Name of the CSRF cookie (as Kubeflow's apps name it).
pub const CSRF_COOKIE: &str = "XSRF-TOKEN";
/// Name of the header that must repeat it.
pub const CSRF_HEADER: &str = "x-xsrf-token";

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
    /// The user of a request with `headers`.
    pub fn from_headers(settings: &Settings, headers: &HeaderMap) -> Result<User> {
        if settings.disable_auth {
            return Ok(User::Anonymous);
        }
        let value = headers
            .get(settings.userid_header.as_str())
            .and_then(|v| v.to_str().ok())
            .map(|v| v.strip_prefix(settings.userid_prefix.as_str()).unwrap_or(v).trim())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Error::Unauthenticated(settings.userid_header.clone()))?;
        Ok(User::Named(value.to_owned()))
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

/// The double-submit check: the CSRF cookie is present and the header repeats it.
pub fn check_csrf(headers: &HeaderMap) -> Result<()> {
    let cookie = cookie(headers, CSRF_COOKIE).filter(|c| !c.is_empty()).ok_or(Error::Csrf("no XSRF-TOKEN cookie"))?;
    let header = headers.get(CSRF_HEADER).ok_or(Error::Csrf("no X-XSRF-TOKEN header"))?;
    let same = header.as_bytes().len() == cookie.len()
        && header.as_bytes().iter().zip(cookie.as_bytes()).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0;
    if same { Ok(()) } else { Err(Error::Csrf("the X-XSRF-TOKEN header does not match the cookie")) }
}

/// A fresh CSRF cookie for a browser that has none.
fn csrf_cookie(settings: &Settings) -> String {
    let mut bytes = [0u8; 24];
    rand::rng().fill_bytes(&mut bytes);
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let path = if settings.prefix.is_empty() { "/" } else { settings.prefix.as_str() };
    let secure = if settings.secure_cookies { "; Secure" } else { "" };
    format!("{CSRF_COOKIE}={token}; Path={path}; SameSite={}{secure}", settings.csrf_samesite)
}

/// Paths served without a user: the probe and the script and stylesheet.
fn is_open(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix).is_some_and(|rest| rest == "/healthz" || rest.starts_with("/static/"))
}

fn mutating(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Middleware: user, CSRF, cookie and browser headers.
pub async fn guard(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    let open = is_open(&app.settings.prefix, request.uri().path());
    let checked = User::from_headers(&app.settings, request.headers()).and_then(|user| {
        if mutating(request.method()) {
            check_csrf(request.headers())?;
        }
        Ok(user)
    });
    let has_cookie = cookie(request.headers(), CSRF_COOKIE).is_some();
    let mut response = match checked {
        Ok(user) => {
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        Err(_) if open => next.run(request).await,
        Err(error) => error.into_response(),
    };
    if let Some(PageFailure(message)) = response.extensions_mut().remove::<PageFailure>() {
        let page = crate::pages::layout::error_page(&app, response.status(), &message).into_string();
        response = (response.status(), Html(page)).into_response();
    }
    let headers = response.headers_mut();
    headers.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    if !has_cookie && let Ok(value) = HeaderValue::from_str(&csrf_cookie(&app.settings)) {
        headers.append(SET_COOKIE, value);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn csrf_needs_the_cookie_and_the_same_value_in_the_header() {
        assert!(matches!(check_csrf(&headers(&[])), Err(Error::Csrf("no XSRF-TOKEN cookie"))));
        assert!(matches!(
            check_csrf(&headers(&[("cookie", "XSRF-TOKEN=abc")])),
            Err(Error::Csrf("no X-XSRF-TOKEN header"))
        ));
        assert!(check_csrf(&headers(&[("cookie", "a=b; XSRF-TOKEN=abc"), ("x-xsrf-token", "abd")])).is_err());
        assert!(check_csrf(&headers(&[("cookie", "XSRF-TOKEN=abc"), ("x-xsrf-token", "abcd")])).is_err());
        assert!(check_csrf(&headers(&[("cookie", "a=b; XSRF-TOKEN=abc"), ("x-xsrf-token", "abc")])).is_ok());
    }

    #[test]
    fn the_user_comes_from_the_header_without_its_prefix() {
        let settings = Settings { userid_prefix: "accounts:".into(), ..Settings::default() };
        let user = User::from_headers(&settings, &headers(&[("kubeflow-userid", "accounts:alice")])).unwrap();
        assert_eq!(user, User::Named("alice".into()));
        let missing = User::from_headers(&settings, &headers(&[])).unwrap_err();
        assert_eq!(missing.status(), http::StatusCode::UNAUTHORIZED);
        assert_eq!(
            User::from_headers(&Settings::standalone(), &headers(&[])).unwrap(),
            User::Anonymous,
            "auth off: no header needed"
        );
    }

    #[test]
    fn only_the_probe_and_the_assets_need_no_user() {
        assert!(is_open("/models", "/models/healthz") && is_open("/models", "/models/static/app.js"));
        assert!(!is_open("/models", "/models/api/namespaces/static/inferenceservices"));
        assert!(!is_open("/models", "/models/details/x/healthz"));
        assert!(is_open("", "/healthz"));
    }

    #[test]
    fn the_cookie_follows_the_settings() {
        let cookie = csrf_cookie(&Settings::default());
        assert!(cookie.starts_with("XSRF-TOKEN=") && cookie.contains("; Path=/models; SameSite=Strict; Secure"));
        assert!(!csrf_cookie(&Settings::standalone()).contains("Secure"));
    }
}
