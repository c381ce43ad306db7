//! Settings from the environment, named and defaulted as KServe's models web app names them
//! (`APP_PREFIX`, `APP_DISABLE_AUTH`, `APP_SECURE_COOKIES`, `CSRF_SAMESITE`, `USERID_HEADER`,
//! `USERID_PREFIX`, `ALLOWED_NAMESPACES`) plus Skiff's own: `APP_ALLOWED_HOSTS` (the `Host` names
//! the app answers to), `APP_PROXY_SECRET` (or the file `APP_PROXY_SECRET_FILE` names: a mounted
//! Secret, kept out of the environment) and `APP_PROXY_SECRET_HEADER` (what the front proxy
//! proves itself with), `PROMETHEUS_URL`, `METRICS_SOURCE` and `APP_PORT`. Every bad value is reported at once.

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

/// The names a request's `Host` may carry (any port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any name: on a cluster with auth on and no `APP_ALLOWED_HOSTS` (the front proxy's
    /// credentials are bound to its own name, so a name rebound to it carries none).
    Any,
    /// Only these (lowercase, IPv6 addresses in brackets).
    Only(Vec<String>),
}

/// The loopback names: what `skiff up` answers to without `--web-host`.
pub const LOOPBACK_HOSTS: [&str; 3] = ["127.0.0.1", "localhost", "[::1]"];

impl AllowedHosts {
    /// The loopback names only.
    pub fn loopback() -> AllowedHosts {
        AllowedHosts::Only(LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect())
    }

    /// The loopback names and `extra` (each checked by [`normalize_host`]).
    pub fn loopback_and(extra: &[String]) -> Result<AllowedHosts, String> {
        let mut names: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        for name in extra {
            let name = normalize_host(name)?;
            if !names.contains(&name) {
                names.push(name);
            }
        }
        Ok(AllowedHosts::Only(names))
    }

    /// Whether `host` (lowercase, from [`crate::security::host::split_authority`]) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            AllowedHosts::Any => true,
            AllowedHosts::Only(names) => names.iter().any(|n| n == host),
        }
    }
}

impl fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllowedHosts::Any => f.write_str("any"),
            AllowedHosts::Only(names) => f.write_str(&names.join(", ")),
        }
    }
}

/// Where the metrics charts' traffic figures (rates, latency, in-flight) come from
/// (`METRICS_SOURCE`). Replicas and cold starts always come from the app's own history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsSource {
    /// `app`: the app samples Skiff's own `/metrics` into its history (the default without
    /// `PROMETHEUS_URL`).
    App,
    /// `prometheus`: `query_range` on `PROMETHEUS_URL` (the default when it is set).
    Prometheus,
}

/// A secret whose value never shows in `Debug` output or logs.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
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
    /// What the front proxy sends in `proxy_secret_header` on every request. With auth on and no
    /// secret, the app acts on no user header (every request that needs a user is a 401).
    pub proxy_secret: Option<Secret>,
    /// The header carrying the proxy's secret.
    pub proxy_secret_header: String,
    /// The `Host` names answered; any other gets 421 (DNS rebinding).
    pub allowed_hosts: AllowedHosts,
    /// Namespaces the app shows; empty means all that the backend lists.
    pub allowed_namespaces: Vec<String>,
    /// Prometheus (`http://`) to query for metrics; without it the app samples Skiff's own `/metrics`.
    pub prometheus_url: Option<String>,
    /// Where traffic figures come from.
    pub metrics_source: MetricsSource,
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
            proxy_secret: None,
            proxy_secret_header: "skiff-proxy-secret".into(),
            allowed_hosts: AllowedHosts::Any,
            allowed_namespaces: Vec::new(),
            prometheus_url: None,
            metrics_source: MetricsSource::App,
            port: 5000,
        }
    }
}

impl Settings {
    /// Standalone mode's settings: auth off (it listens on loopback), plain-HTTP cookies, only the
    /// loopback names as `Host`.
    pub fn standalone() -> Settings {
        Settings {
            disable_auth: true,
            secure_cookies: false,
            allowed_hosts: AllowedHosts::loopback(),
            ..Settings::default()
        }
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
        let secret = match (var("APP_PROXY_SECRET").filter(|s| !s.is_empty()), var("APP_PROXY_SECRET_FILE")) {
            (Some(_), Some(_)) => {
                errors.push("APP_PROXY_SECRET and APP_PROXY_SECRET_FILE: give one, not both".into());
                None
            }
            (Some(secret), None) => Some(("APP_PROXY_SECRET".to_owned(), secret)),
            (None, Some(path)) => match read_secret_file(&path) {
                Ok(secret) => secret.map(|secret| (format!("APP_PROXY_SECRET_FILE ({path})"), secret)),
                Err(e) => {
                    errors.push(format!("APP_PROXY_SECRET_FILE: {e}"));
                    None
                }
            },
            (None, None) => None,
        };
        if let Some((from, secret)) = secret {
            if secret.len() < MIN_SECRET_LEN {
                errors.push(format!("{from}: {} bytes, at least {MIN_SECRET_LEN} needed", secret.len()));
            } else {
                settings.proxy_secret = Some(Secret(secret));
            }
        }
        if let Some(header) = var("APP_PROXY_SECRET_HEADER") {
            if http::HeaderName::from_bytes(header.as_bytes()).is_ok() {
                settings.proxy_secret_header = header.to_ascii_lowercase();
            } else {
                errors.push(format!("APP_PROXY_SECRET_HEADER: {header:?} is not a header name"));
            }
        }
        settings.allowed_hosts = match var("APP_ALLOWED_HOSTS").filter(|v| !v.trim().is_empty()) {
            Some(list) if list.trim() == "*" => AllowedHosts::Any,
            Some(list) => {
                let names: Result<Vec<String>, String> =
                    list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(normalize_host).collect();
                match names {
                    Ok(names) => AllowedHosts::Only(names),
                    Err(e) => {
                        errors.push(format!("APP_ALLOWED_HOSTS: {e}"));
                        AllowedHosts::Any
                    }
                }
            }
            None if settings.disable_auth => AllowedHosts::loopback(),
            None => AllowedHosts::Any,
        };
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
        settings.metrics_source = match var("METRICS_SOURCE").as_deref().map(str::trim) {
            None | Some("") if settings.prometheus_url.is_some() => MetricsSource::Prometheus,
            None | Some("") | Some("app") => MetricsSource::App,
            Some("prometheus") if var("PROMETHEUS_URL").is_some_and(|u| !u.is_empty()) => MetricsSource::Prometheus,
            Some("prometheus") => {
                errors.push("METRICS_SOURCE: prometheus needs PROMETHEUS_URL (http://host:port)".into());
                MetricsSource::App
            }
            Some(other) => {
                errors.push(format!("METRICS_SOURCE: {other:?} is not app or prometheus"));
                MetricsSource::App
            }
        };
        if let Some(port) = var("APP_PORT") {
            match port.parse() {
                Ok(port) => settings.port = port,
                Err(_) => errors.push(format!("APP_PORT: {port:?} is not a port number")),
            }
        }
        if errors.is_empty() { Ok(settings) } else { Err(errors.join("; ")) }
    }

    /// The Prometheus to query for traffic figures: `PROMETHEUS_URL` when the source is Prometheus.
    pub fn prometheus(&self) -> Option<&str> {
        match self.metrics_source {
            MetricsSource::Prometheus => self.prometheus_url.as_deref(),
            MetricsSource::App => None,
        }
    }

    /// What the binary says at start-up about how it trusts requests: the `Host` names it answers
    /// to and why, and, with auth on, whether it acts on the user header at all.
    pub fn trust_notes(&self) -> Vec<(bool, String)> {
        let mut notes = Vec::new();
        let hosts = match &self.allowed_hosts {
            AllowedHosts::Any if self.disable_auth => {
                "APP_ALLOWED_HOSTS is *: any Host is answered with auth off, so a page whose name \
                 resolves to this app (DNS rebinding) can use it"
                    .to_owned()
            }
            AllowedHosts::Any => "any Host is answered (APP_ALLOWED_HOSTS unset or *): auth is on, and the front \
                                  proxy's credentials are bound to its own name, so a name rebound to it carries \
                                  none; set APP_ALLOWED_HOSTS to the names users reach the app by to refuse the \
                                  others with 421"
                .to_owned(),
            AllowedHosts::Only(names) => format!("only Host {} is answered (any other: 421)", names.join(", ")),
        };
        notes.push((self.disable_auth && self.allowed_hosts == AllowedHosts::Any, hosts));
        if !self.disable_auth {
            notes.push(match &self.proxy_secret {
                Some(_) => (
                    false,
                    format!(
                        "the {} header is trusted only on requests carrying the proxy's secret in {}",
                        self.userid_header, self.proxy_secret_header
                    ),
                ),
                None => (
                    true,
                    format!(
                        "auth is on but APP_PROXY_SECRET is not set: the app does not act on the {} header \
                         (any client could send one), so every request that needs a user is a 401; give the \
                         front proxy a secret to send in {} and the app the same secret",
                        self.userid_header, self.proxy_secret_header
                    ),
                ),
            });
        }
        notes
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

/// Shortest proxy secret accepted (16 bytes: guessing it is out of reach).
pub const MIN_SECRET_LEN: usize = 16;

/// The secret in the file at `path`, less a final line break; `None` when the file is not there
/// or empty (an optional Secret that does not exist yet mounts an empty folder).
fn read_secret_file(path: &str) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text.trim_end_matches(['\n', '\r']).to_owned()).filter(|s| !s.is_empty())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{path}: {e}")),
    }
}

/// A host name as the `Host` check compares it: lowercase, no trailing dot, an IPv6 address in
/// brackets; no port, no path.
pub fn normalize_host(name: &str) -> Result<String, String> {
    let trimmed = name.trim().trim_end_matches('.').to_ascii_lowercase();
    let bare = trimmed.trim_start_matches('[').trim_end_matches(']');
    if bare.contains(':') {
        return match bare.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(format!("[{bare}]")),
            Err(_) => Err(format!("{name:?} is not a host name (give it without a port)")),
        };
    }
    let valid = !trimmed.is_empty()
        && trimmed.len() <= 253
        && trimmed.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
    if valid { Ok(trimmed) } else { Err(format!("{name:?} is not a host name (letters, digits, - and .)")) }
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
    fn the_metrics_source_is_prometheus_when_its_url_is_set_unless_told_otherwise() {
        let source = |pairs: &[(&str, &str)]| Settings::from_env(env(pairs)).map(|s| s.prometheus().map(str::to_owned));
        let url = ("PROMETHEUS_URL", "http://prom:9090/");
        assert_eq!(source(&[]), Ok(None));
        assert_eq!(source(&[url]), Ok(Some("http://prom:9090".into())));
        assert_eq!(source(&[url, ("METRICS_SOURCE", "prometheus")]), Ok(Some("http://prom:9090".into())));
        assert_eq!(source(&[url, ("METRICS_SOURCE", "app")]), Ok(None), "the app's own history, explicitly");
        let error = source(&[("METRICS_SOURCE", "prometheus")]).unwrap_err();
        assert!(error.contains("METRICS_SOURCE: prometheus needs PROMETHEUS_URL"), "{error}");
        let error = source(&[("METRICS_SOURCE", "grafana")]).unwrap_err();
        assert!(error.contains("\"grafana\" is not app or prometheus"), "{error}");
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

    #[test]
    fn hosts_default_by_auth_and_are_checked() {
        assert_eq!(Settings::from_env(env(&[])).unwrap().allowed_hosts, AllowedHosts::Any, "auth on: the proxy");
        let off = Settings::from_env(env(&[("APP_DISABLE_AUTH", "true")])).unwrap();
        assert_eq!(off.allowed_hosts, AllowedHosts::loopback(), "auth off: loopback only");
        let listed = Settings::from_env(env(&[("APP_ALLOWED_HOSTS", "Models.Example.com, ::1")])).unwrap();
        assert_eq!(listed.allowed_hosts, AllowedHosts::Only(vec!["models.example.com".into(), "[::1]".into()]));
        let any = Settings::from_env(env(&[("APP_ALLOWED_HOSTS", "*"), ("APP_DISABLE_AUTH", "true")])).unwrap();
        assert_eq!(any.allowed_hosts, AllowedHosts::Any);
        assert!(any.trust_notes()[0].0, "auth off and any Host: a warning");
        let error = Settings::from_env(env(&[("APP_ALLOWED_HOSTS", "a.example:8080")])).unwrap_err();
        assert!(error.contains("APP_ALLOWED_HOSTS") && error.contains("without a port"), "{error}");
        assert!(AllowedHosts::loopback_and(&["evil/".into()]).is_err());
    }

    #[test]
    fn the_proxy_secret_is_read_kept_out_of_logs_and_its_absence_warned() {
        let unset = Settings::from_env(env(&[])).unwrap();
        let (warn, note) = unset.trust_notes().pop().unwrap();
        assert!(warn && note.contains("APP_PROXY_SECRET is not set"), "{note}");
        let secret = "s3cret-s3cret-s3cret";
        let set =
            Settings::from_env(env(&[("APP_PROXY_SECRET", secret), ("APP_PROXY_SECRET_HEADER", "X-Hop")])).unwrap();
        assert_eq!(set.proxy_secret, Some(Secret(secret.into())));
        assert_eq!(set.proxy_secret_header, "x-hop");
        assert!(!format!("{set:?}").contains(secret), "Debug hides the secret");
        assert!(!set.trust_notes().iter().any(|(warn, _)| *warn));

        let mounted = tempfile::tempdir().unwrap();
        let file = mounted.path().join("secret");
        let from_file =
            |path: &std::path::Path| Settings::from_env(env(&[("APP_PROXY_SECRET_FILE", path.to_str().unwrap())]));
        let absent = from_file(&file).unwrap();
        assert!(absent.proxy_secret.is_none(), "no Secret yet: an empty mount");
        assert!(absent.trust_notes().pop().unwrap().1.contains("APP_PROXY_SECRET is not set"));
        std::fs::write(&file, format!("{secret}\n")).unwrap();
        assert_eq!(from_file(&file).unwrap().proxy_secret, Some(Secret(secret.into())));
        std::fs::write(&file, "short").unwrap();
        let short = from_file(&file).unwrap_err();
        assert!(short.contains("APP_PROXY_SECRET_FILE") && short.contains("5 bytes, at least 16"), "{short}");
        assert!(!short.contains("short\""), "{short}");
        let both = Settings::from_env(env(&[("APP_PROXY_SECRET", secret), ("APP_PROXY_SECRET_FILE", "/x")]));
        assert!(both.unwrap_err().contains("give one, not both"));
        let short = Settings::from_env(env(&[("APP_PROXY_SECRET", "short")])).unwrap_err();
        assert!(short.contains("at least 16"), "{short}");
    }
}
