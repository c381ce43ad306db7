//! The URL space: KServe V1 and V2 paths, Triton's extensions (configuration, statistics,
//! repository), health and metrics, as a pure function of method and path.

use http::Method;

use crate::error::{Error, Result};

/// A model named in a V2 path, with the version the path names, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelRef<'a> {
    /// Model name.
    pub name: &'a str,
    /// The `{v}` of `/versions/{v}`.
    pub version: Option<&'a str>,
}

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /`: KServe's liveness answer.
    Root,
    /// `GET /v2/health/live`
    Live,
    /// `GET /v2/health/ready`
    Ready,
    /// `GET /v2`: server metadata.
    ServerMetadata,
    /// `GET /metrics`
    Metrics,
    /// `GET /v1/models`
    V1List,
    /// `GET /v1/models/{m}`
    V1Model(&'a str),
    /// `POST /v1/models/{m}:predict`
    V1Predict(&'a str),
    /// `GET /v2/models/{m}[/versions/{v}]`
    V2Model(ModelRef<'a>),
    /// `GET /v2/models/{m}[/versions/{v}]/ready`
    V2ModelReady(ModelRef<'a>),
    /// `POST /v2/models/{m}[/versions/{v}]/infer`
    V2Infer(ModelRef<'a>),
    /// `GET /v2/models/{m}[/versions/{v}]/config`: Triton's model configuration.
    V2ModelConfig(ModelRef<'a>),
    /// `GET /v2/models/{m}[/versions/{v}]/stats`: Triton's statistics of one model.
    V2ModelStats(ModelRef<'a>),
    /// `GET /v2/models/stats`: Triton's statistics of every model.
    V2Stats,
    /// `POST /v2/repository/index`: Triton's repository index.
    RepositoryIndex,
    /// `POST /v2/repository/models/{m}/load`
    RepositoryLoad(&'a str),
    /// `POST /v2/repository/models/{m}/unload`
    RepositoryUnload(&'a str),
}

/// Matches a request to a route; 404 for unknown paths, 405 for a known path with the wrong method.
/// A version in a V2 path is kept for the handler to check.
pub fn route<'a>(method: &Method, path: &'a str) -> Result<Route<'a>> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (route, allowed) = match segments.as_slice() {
        [""] => (Route::Root, Method::GET),
        ["metrics"] => (Route::Metrics, Method::GET),
        ["v2"] => (Route::ServerMetadata, Method::GET),
        ["v2", "health", "live"] => (Route::Live, Method::GET),
        ["v2", "health", "ready"] => (Route::Ready, Method::GET),
        ["v1", "models"] => (Route::V1List, Method::GET),
        ["v2", "models", "stats"] => (Route::V2Stats, Method::GET),
        ["v2", "repository", "index"] => (Route::RepositoryIndex, Method::POST),
        ["v2", "repository", "models", name, "load"] if !name.is_empty() => (Route::RepositoryLoad(name), Method::POST),
        ["v2", "repository", "models", name, "unload"] if !name.is_empty() => {
            (Route::RepositoryUnload(name), Method::POST)
        }
        ["v1", "models", model] => match model.strip_suffix(":predict") {
            Some(name) if !name.is_empty() => (Route::V1Predict(name), Method::POST),
            _ => (Route::V1Model(model), Method::GET),
        },
        ["v2", "models", name, rest @ ..] if !name.is_empty() => {
            let (version, rest) = match rest {
                ["versions", version, rest @ ..] if !version.is_empty() => (Some(*version), rest),
                rest => (None, rest),
            };
            let model = ModelRef { name, version };
            match rest {
                [] => (Route::V2Model(model), Method::GET),
                ["ready"] => (Route::V2ModelReady(model), Method::GET),
                ["infer"] => (Route::V2Infer(model), Method::POST),
                ["config"] => (Route::V2ModelConfig(model), Method::GET),
                ["stats"] => (Route::V2ModelStats(model), Method::GET),
                _ => return Err(no_route(method, path)),
            }
        }
        _ => return Err(no_route(method, path)),
    };
    if *method == allowed || (allowed == Method::GET && *method == Method::HEAD) {
        Ok(route)
    } else {
        Err(Error::MethodNotAllowed { method: method.to_string(), path: path.to_owned() })
    }
}

fn no_route(method: &Method, path: &str) -> Error {
    Error::NoRoute { method: method.to_string(), path: path.to_owned() }
}

#[cfg(test)]
mod tests {
    use skiff_http::HttpError;

    use super::*;

    #[test]
    fn kserve_paths_route() {
        let get = Method::GET;
        let post = Method::POST;
        let iris = ModelRef { name: "iris", version: None };
        let v3 = ModelRef { name: "iris", version: Some("3") };
        let cases = [
            (&get, "/", Route::Root),
            (&get, "/metrics", Route::Metrics),
            (&get, "/v2", Route::ServerMetadata),
            (&get, "/v2/health/live", Route::Live),
            (&get, "/v2/health/ready", Route::Ready),
            (&get, "/v1/models", Route::V1List),
            (&get, "/v1/models/iris", Route::V1Model("iris")),
            (&post, "/v1/models/iris:predict", Route::V1Predict("iris")),
            (&get, "/v2/models/iris", Route::V2Model(iris)),
            (&get, "/v2/models/iris/versions/3", Route::V2Model(v3)),
            (&get, "/v2/models/iris/ready", Route::V2ModelReady(iris)),
            (&get, "/v2/models/iris/versions/3/ready", Route::V2ModelReady(v3)),
            (&post, "/v2/models/iris/infer", Route::V2Infer(iris)),
            (&post, "/v2/models/iris/versions/3/infer", Route::V2Infer(v3)),
            (&get, "/v2/models/iris/config", Route::V2ModelConfig(iris)),
            (&get, "/v2/models/iris/versions/3/config", Route::V2ModelConfig(v3)),
            (&get, "/v2/models/iris/stats", Route::V2ModelStats(iris)),
            (&get, "/v2/models/iris/versions/3/stats", Route::V2ModelStats(v3)),
            (&get, "/v2/models/stats", Route::V2Stats),
            (&post, "/v2/repository/index", Route::RepositoryIndex),
            (&post, "/v2/repository/models/iris/load", Route::RepositoryLoad("iris")),
            (&post, "/v2/repository/models/iris/unload", Route::RepositoryUnload("iris")),
        ];
        for (method, path, want) in cases {
            assert_eq!(route(method, path).unwrap(), want, "{method} {path}");
        }
    }

    #[test]
    fn unknown_paths_are_404_and_wrong_methods_405() {
        for path in [
            "/v3",
            "/v2/models",
            "/v2/models/iris/explain",
            "/v2/models//infer",
            "/v1/models/a/b",
            "/v2/repository/models/iris/reload",
            "/v2/repository/models//load",
        ] {
            let err = route(&Method::POST, path).unwrap_err();
            assert_eq!(err.status(), http::StatusCode::NOT_FOUND, "{path}");
        }
        let err = route(&Method::GET, "/v2/models/iris/infer").unwrap_err();
        assert_eq!(err.status(), http::StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(err.to_string(), "method GET is not allowed on /v2/models/iris/infer");
    }
}
