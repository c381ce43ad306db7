//! Which InferenceService a run loads, for sampling its replicas: `--service`, else the model of
//! `--model`, else a Host of Skiff's router (`<name>.<namespace>.<domain>`, `latest-`/`prev-`
//! tags), else the path (`/serving/<namespace>/<name>/`, `/v1/models/<name>`, `/v2/models/<name>`).

use super::sampler::Service;

/// The namespace when nothing names one.
const DEFAULT_NAMESPACE: &str = "default";

/// The service from the flags, the Host header and the request path; `None` when none tells.
pub fn resolve(
    service: Option<&str>,
    model: Option<&str>,
    host: &str,
    path: &str,
    namespace: Option<&str>,
) -> Option<Service> {
    let from_host = from_host(host);
    let from_path = from_path(path);
    let name = service
        .or(model)
        .map(str::to_owned)
        .or_else(|| from_host.as_ref().map(|h| h.name.clone()))
        .or_else(|| from_path.as_ref().map(|p| p.name.clone()))?;
    let namespace = namespace
        .map(str::to_owned)
        .or_else(|| from_host.map(|h| h.namespace))
        .or_else(|| from_path.map(|p| p.namespace))
        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned());
    Some(Service { namespace, name })
}

/// `<name>.<namespace>.<domain…>` (not an address, not `localhost`).
fn from_host(host: &str) -> Option<Service> {
    let host = host.rsplit_once(':').filter(|(_, port)| port.parse::<u16>().is_ok()).map_or(host, |(h, _)| h);
    if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
        return None;
    }
    let labels: Vec<&str> = host.split('.').collect();
    if labels.len() < 3 {
        return None;
    }
    let name = labels[0].strip_prefix("latest-").or_else(|| labels[0].strip_prefix("prev-")).unwrap_or(labels[0]);
    Some(Service { namespace: labels[1].to_owned(), name: name.to_owned() })
}

/// `/serving/<namespace>/<name>/…`, `/v1/models/<name>[:predict]`, `/v2/models/<name>/…`.
fn from_path(path: &str) -> Option<Service> {
    let path = path.split('?').next().unwrap_or(path);
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["serving", namespace, name, ..] if !name.is_empty() => {
            Some(Service { namespace: (*namespace).to_owned(), name: (*name).to_owned() })
        }
        ["v1" | "v2", "models", model, ..] => {
            let name = model.split(':').next().unwrap_or(model);
            (!name.is_empty()).then(|| Service { namespace: DEFAULT_NAMESPACE.to_owned(), name: name.to_owned() })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str, name: &str) -> Option<Service> {
        Some(Service { namespace: namespace.into(), name: name.into() })
    }

    #[test]
    fn flags_win_then_host_then_path() {
        let path = "/v2/models/iris/infer";
        assert_eq!(resolve(Some("svc"), Some("m"), "x", path, None), service("default", "svc"));
        assert_eq!(resolve(None, Some("m"), "127.0.0.1:8080", path, Some("team")), service("team", "m"));
        assert_eq!(resolve(None, None, "iris.demo.example.com", "/", None), service("demo", "iris"));
        assert_eq!(resolve(None, None, "latest-iris.demo.example.com:8080", "/", None), service("demo", "iris"));
        assert_eq!(resolve(None, None, "127.0.0.1:8080", path, None), service("default", "iris"));
        assert_eq!(resolve(None, None, "localhost", "/serving/demo/iris/v2", None), service("demo", "iris"));
        assert_eq!(resolve(None, None, "localhost:8080", "/v1/models/iris:predict", None), service("default", "iris"));
        assert_eq!(resolve(None, None, "127.0.0.1:8080", "/healthz", None), None);
    }
}
