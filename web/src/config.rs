//! Settings from the environment, named and defaulted as KServe's models web app names them
//! (`APP_PREFIX`, `APP_DISABLE_AUTH`, `APP_SECURE_COOKIES`, `CSRF_SAMESITE`, `USERID_HEADER`,
//! `USERID_PREFIX`, `ALLOWED_NAMESPACES`) plus `PROMETHEUS_URL` and `APP_PORT`. Every bad value is
//! reported at once.

use std::fmt;

/// The `SameSite` attribute of the CSRF cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    /// Sent only on same-site requests (the default).
    Strict,
    /// Also on top-level navigations from other sites.
    Lax,
    /// Always (needs secure cookies in browsers).
    None,
}

impl fmt::Display for SameSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SameSite::Strict => "Strict",
            SameSite::Lax => "Lax",
            SameSite::None => "None",
        })
    }
}

/// The app's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Path every page and API lives under, e.g. `/models` (no trailing slash).
    pub prefix: String,
    /// No user header, no access reviews (standalone mode, or a trusted network).
    pub disable_auth: bool,
    /// Cookies get `Secure` (browsers then send them over HTTPS only).
    pub secure_cookies: bool,
    /// `SameSite` of the CSRF cookie.
    pub csrf_samesite: SameSite,
    /// Header carrying the user, set by the authenticating proxy in front of the app.
    pub userid_header: String,
    /// Prefix stripped from that header's value (e.g. `accounts.google.com:`).
    pub userid_prefix: String,
    /// Namespaces the app shows; empty means all that the backend lists.
    pub allowed_namespaces: Vec<String>,
    /// Prometheus (`http://`) to query for metrics; without it the app samples Skiff's own `/metrics`.
    pub prometheus_url: Option<String>,
    /// Port to listen on (the binary only).
    pub port: u16,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            prefix: "/models".into(),
            disable_auth: false,
            secure_cookies: true,
            csrf_samesite: SameSite::Strict,
            userid_header: "kubeflow-userid".into(),
            userid_prefix: String::new(),
            allowed_namespaces: Vec::new(),
            prometheus_url: None,
            port: 5000,
        }
    }
}

impl Settings {
    /// Standalone mode's settings: auth off (it listens on loopback), plain-HTTP cookies.
    pub fn standalone() -> Settings {
        Settings { disable_auth: true, secure_cookies: false, ..Settings::default() }
    }

    /// Reads the settings through `var` (e.g. `std::env::var`), reporting every bad value.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let mut settings = Settings::default();
        let mut errors = Vec::new();
        if let Some(prefix) = var("APP_PREFIX") {
            match normalize_prefix(&prefix) {
                Ok(prefix) => settings.prefix = prefix,
                Err(e) => errors.push(format!("APP_PREFIX: {e}")),
            }
        }
        for (name, slot) in
            [("APP_DISABLE_AUTH", &mut settings.disable_auth), ("APP_SECURE_COOKIES", &mut settings.secure_cookies)]
        {
            if let Some(value) = var(name) {
                match parse_bool(&value) {
                    Some(value) => *slot = value,
                    None => errors.push(format!("{name}: {value:?} is not true or false")),
                }
            }
        }
        if let Some(value) = var("CSRF_SAMESITE") {
            match value.to_ascii_lowercase().as_str() {
                "strict" => settings.csrf_samesite = SameSite::Strict,
                "lax" => settings.csrf_samesite = SameSite::Lax,
                "none" => settings.csrf_samesite = SameSite::None,
                _ => errors.push(format!("CSRF_SAMESITE: {value:?} is not Strict, Lax or None")),
            }
        }
        if let Some(header) = var("USERID_HEADER") {
            if http::HeaderName::from_bytes(header.as_bytes()).is_ok() {
                settings.userid_header = header.to_ascii_lowercase();
            } else {
                errors.push(format!("USERID_HEADER: {header:?} is not a header name"));
            }
        }
        if let Some(prefix) = var("USERID_PREFIX") {
            settings.userid_prefix = prefix;
        }
        if let Some(list) = var("ALLOWED_NAMESPACES") {
            settings.allowed_namespaces =
                list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
        }
        if let Some(url) = var("PROMETHEUS_URL").filter(|u| !u.is_empty()) {
            if url.starts_with("http://") {
                settings.prometheus_url = Some(url.trim_end_matches('/').to_owned());
            } else {
                errors.push(format!(
                    "PROMETHEUS_URL: {url:?} is not an http:// URL (the app has no TLS client for Prometheus yet)"
                ));
            }
        }
        if let Some(port) = var("APP_PORT") {
            match port.parse() {
                Ok(port) => settings.port = port,
                Err(_) => errors.push(format!("APP_PORT: {port:?} is not a port number")),
            }
        }
        if errors.is_empty() { Ok(settings) } else { Err(errors.join("; ")) }
    }

    /// Whether the app may show `namespace`.
    pub fn namespace_allowed(&self, namespace: &str) -> bool {
        self.allowed_namespaces.is_empty() || self.allowed_namespaces.iter().any(|n| n == namespace)
    }

    /// The one namespace the app is held to, when `ALLOWED_NAMESPACES` names one (the selector is hidden).
    pub fn single_namespace(&self) -> Option<&str> {
        match self.allowed_namespaces.as_slice() {
            [only] => Some(only),
            _ => None,
        }
    }
}

/// `True`/`False` as Flask apps read them, and the usual spellings.
fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

fn normalize_prefix(prefix: &str) -> Result<String, String> {
    let trimmed = prefix.trim().trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    if !trimmed.starts_with('/') {
        return Err(format!("{prefix:?} must start with /"));
    }
    if !trimmed.bytes().all(|b| b.is_ascii_alphanumeric() || b"/-_.".contains(&b)) {
        return Err(format!("{prefix:?} may hold only letters, digits and / - _ ."));
    }
    Ok(trimmed.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
        move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
    }

    #[test]
    fn defaults_are_kserves() {
        let settings = Settings::from_env(env(&[])).unwrap();
        assert_eq!(settings, Settings::default());
        assert_eq!(settings.prefix, "/models");
        assert!(!settings.disable_auth && settings.secure_cookies);
        assert_eq!(settings.csrf_samesite, SameSite::Strict);
        assert_eq!(settings.userid_header, "kubeflow-userid");
    }

    #[test]
    fn every_bad_value_is_named_at_once() {
        let error = Settings::from_env(env(&[
            ("APP_DISABLE_AUTH", "maybe"),
            ("CSRF_SAMESITE", "sometimes"),
            ("APP_PREFIX", "models"),
            ("PROMETHEUS_URL", "prom:9090"),
        ]))
        .unwrap_err();
        for name in ["APP_DISABLE_AUTH", "CSRF_SAMESITE", "APP_PREFIX", "PROMETHEUS_URL"] {
            assert!(error.contains(name), "{error}");
        }
    }

    #[test]
    fn one_allowed_namespace_hides_the_selector() {
        let settings = Settings::from_env(env(&[
            ("ALLOWED_NAMESPACES", " team-a "),
            ("APP_PREFIX", "/apps/models/"),
            ("APP_DISABLE_AUTH", "True"),
        ]))
        .unwrap();
        assert_eq!(settings.single_namespace(), Some("team-a"));
        assert!(settings.namespace_allowed("team-a") && !settings.namespace_allowed("team-b"));
        assert_eq!(settings.prefix, "/apps/models");
        assert!(settings.disable_auth);
    }
}
