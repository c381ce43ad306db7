//! Custom containers in `skiff up`: a component's `containers` (KServe's one `kserve-container`)
//! checked when the manifest is read, and turned into a local process for each replica (the image
//! through an image map, [`skiff_api::image`]). Nothing here is predictor-specific: the field path is passed in.
//!
//! **Where it runs and on which port.** The process runs in the manifest's folder (or its
//! `workingDir`, relative to that folder) with `skiff up`'s environment, then the container's
//! `env`, then `PORT` and Knative's `K_SERVICE`, `K_CONFIGURATION`, `K_REVISION`. It must listen on
//! 127.0.0.1 (or all addresses) at the port in `PORT` (Knative's contract for containers), a free
//! loopback port that `skiff up` picks per replica; on a cluster it listens on its `containerPort`
//! (default 8080), which is only checked here. So that KServe's own model servers run unchanged,
//! the value of an `--http_port` argument (`--http_port N` or `--http_port=N`) becomes that port
//! too, and `$(PORT)` (any `$(VAR)` of the environment) expands in `command` and `args`.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Container;
use serde_json::Value;
use skiff_api::image::{ImageMap, Resolved, expand_all, resolve};
use skiff_api::runtime::container::RUNTIME_MODEL_DIR;
use skiff_api::validate::{COLLOCATED_MODEL_PORT, TRANSFORMER_CONTAINER};

/// KServe's name for the container that serves.
pub const CONTAINER_NAME: &str = "kserve-container";
/// The argument of KServe's model servers that names their HTTP port.
const HTTP_PORT_FLAG: &str = "--http_port";

/// A container as `skiff up` runs it: one process per replica.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    /// The program and its arguments (`command`, or the image's program from the image map,
    /// then `args`), before `$(VAR)` expansion.
    pub argv: Vec<String>,
    /// The container's `env`, in order.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub dir: PathBuf,
    /// `readinessProbe.httpGet.path`: the queue-proxy's readiness check; without it, ready means
    /// the port accepts connections (as the cluster's queue-proxy checks it).
    pub readiness_path: Option<String>,
}

/// One replica's process: what to run, with which environment, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Variables added to `skiff up`'s environment (later ones win).
    pub env: Vec<(String, String)>,
}

impl ContainerSpec {
    /// Checks `containers` (the value of `field`, e.g. `spec.predictor.containers`) of a manifest
    /// in `base`: exactly one container; a `command`, or an `image` the image map names; ports
    /// within 1..=65535; plain `env` values. The error names the field.
    pub fn parse(field: &str, containers: &[Value], images: &ImageMap, base: &Path) -> Result<ContainerSpec, String> {
        let [value] = containers else {
            if containers.iter().any(|c| c.get("name").and_then(Value::as_str) == Some(TRANSFORMER_CONTAINER)) {
                return Err(format!(
                    "{field}: skiff up runs KServe's collocation as {TRANSFORMER_CONTAINER} alone beside an ONNX \
                     model (model:), not beside another container or a ServingRuntime's (a cluster runs it); found {}",
                    containers.len()
                ));
            }
            return Err(format!(
                "{field}: skiff up runs exactly one container ({CONTAINER_NAME}); found {}",
                containers.len()
            ));
        };
        let field = format!("{field}[0]");
        let mut value = value.clone();
        if let Some(object) = value.as_object_mut() {
            object.entry("name").or_insert_with(|| CONTAINER_NAME.into());
        }
        let container: Container = serde_json::from_value(value).map_err(|e| format!("{field}: {e}"))?;
        for (i, port) in container.ports.iter().flatten().enumerate() {
            if !(1..=65535).contains(&port.container_port) {
                return Err(format!(
                    "{field}.ports[{i}].containerPort: {} is not a port (1 to 65535)",
                    port.container_port
                ));
            }
        }
        if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
            return Err(format!("{field}.envFrom: skiff up sets plain `env` values only"));
        }
        let mut env = Vec::new();
        for (i, var) in container.env.iter().flatten().enumerate() {
            if var.value_from.is_some() {
                return Err(format!("{field}.env[{i}].valueFrom: skiff up sets plain values only (`value`)"));
            }
            env.push((var.name.clone(), var.value.clone().unwrap_or_default()));
        }
        let readiness_path =
            container.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref()).and_then(|h| h.path.clone());
        if let Some(path) = readiness_path.as_ref().filter(|p| !p.starts_with('/')) {
            return Err(format!("{field}.readinessProbe.httpGet.path: {path:?} must start with '/'"));
        }
        let command = container.command.unwrap_or_default();
        let image = container.image.unwrap_or_default();
        if command.is_empty() && image.is_empty() {
            return Err(format!(
                "{field}.command: a container needs a command, or an image the image map names (skiff up --image-map)"
            ));
        }
        let argv = match resolve(images, &image, &command, &container.args.unwrap_or_default()) {
            Resolved::Argv(argv) => argv,
            Resolved::UnknownImage(message) => {
                return Err(format!("{field}.command: {message} (skiff up --image-map)"));
            }
        };
        let dir = base.join(container.working_dir.unwrap_or_default());
        Ok(ContainerSpec { argv, env, dir, readiness_path })
    }

    /// This container with `model_dir` where KServe's runtimes find their model
    /// ([`RUNTIME_MODEL_DIR`], `/mnt/models`): at the start of every argument and `env` value
    /// (`--model_dir=/mnt/models`, `--model-store=/mnt/models/model-store`).
    pub fn with_model_dir(&self, model_dir: &Path) -> ContainerSpec {
        let dir = model_dir.to_string_lossy();
        let local = |value: &str| match value.find(RUNTIME_MODEL_DIR) {
            Some(at)
                if value[at + RUNTIME_MODEL_DIR.len()..].is_empty()
                    || value[at + RUNTIME_MODEL_DIR.len()..].starts_with('/') =>
            {
                format!("{}{dir}{}", &value[..at], &value[at + RUNTIME_MODEL_DIR.len()..])
            }
            _ => value.to_owned(),
        };
        ContainerSpec {
            argv: self.argv.iter().map(|a| local(a)).collect(),
            env: self.env.iter().map(|(k, v)| (k.clone(), local(v))).collect(),
            ..self.clone()
        }
    }

    /// This container beside a collocated model server on loopback `port`: KServe's address for it
    /// (`localhost:8085`, [`COLLOCATED_MODEL_PORT`]), in any argument or `env` value, becomes
    /// `port` (replicas share the machine's ports, so the server listens on a free one).
    pub fn beside_model_server(&self, port: u16) -> ContainerSpec {
        let local = |value: &str| {
            ["localhost", "127.0.0.1"].iter().fold(value.to_owned(), |value, host| {
                value.replace(&format!("{host}:{COLLOCATED_MODEL_PORT}"), &format!("{host}:{port}"))
            })
        };
        ContainerSpec {
            argv: self.argv.iter().map(|a| local(a)).collect(),
            env: self.env.iter().map(|(k, v)| (k.clone(), local(v))).collect(),
            ..self.clone()
        }
    }

    /// The process of a replica listening on `port`: the container's `env`, then `extra` (the
    /// component's identity), then `PORT`; `$(VAR)` expanded; `--http_port`'s value set to `port`.
    pub fn process(&self, port: u16, extra: &[(String, String)]) -> Process {
        let mut env = self.env.clone();
        env.extend(extra.iter().cloned());
        env.push(("PORT".into(), port.to_string()));
        let argv = with_http_port(expand_all(&self.argv, &env), port);
        Process { argv, env }
    }
}

/// Knative's variables naming a component's service (`<isvc>-<component>`) and revision.
pub fn knative_env(service: &str, revision: &str) -> Vec<(String, String)> {
    vec![
        ("K_SERVICE".into(), service.into()),
        ("K_CONFIGURATION".into(), service.into()),
        ("K_REVISION".into(), revision.into()),
    ]
}

/// `argv` with the value of every `--http_port` argument set to `port`.
fn with_http_port(mut argv: Vec<String>, port: u16) -> Vec<String> {
    let mut value_next = false;
    for arg in argv.iter_mut() {
        if std::mem::take(&mut value_next) {
            *arg = port.to_string();
        } else if arg == HTTP_PORT_FLAG {
            value_next = true;
        } else if arg.strip_prefix(HTTP_PORT_FLAG).is_some_and(|rest| rest.starts_with('=')) {
            *arg = format!("{HTTP_PORT_FLAG}={port}");
        }
    }
    argv
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(containers: Value) -> Result<ContainerSpec, String> {
        let images = ImageMap::from_entries([("python-http", vec!["/usr/bin/python3".to_owned(), "-u".to_owned()])]);
        let list = containers.as_array().cloned().unwrap_or_default();
        ContainerSpec::parse("spec.predictor.containers", &list, &images, Path::new("/manifests"))
    }

    #[test]
    fn a_container_runs_its_command_on_the_port_skiff_up_gives_it() {
        let spec = parse(json!([{
            "name": "kserve-container", "image": "ignored:1", "command": ["python3", "server.py"],
            "args": ["--model_name", "m", "--http_port", "8080", "--grpc=$(PORT)"],
            "env": [{"name": "A", "value": "1"}, {"name": "PORT", "value": "8080"}],
            "ports": [{"containerPort": 8080}], "workingDir": "app",
            "readinessProbe": {"httpGet": {"path": "/v1/models/m", "port": 8080}},
        }]))
        .unwrap();
        assert_eq!(spec.dir, Path::new("/manifests/app"));
        assert_eq!(spec.readiness_path.as_deref(), Some("/v1/models/m"));
        let process = spec.process(4321, &knative_env("m-predictor", "m-predictor-00001"));
        assert_eq!(process.argv, ["python3", "server.py", "--model_name", "m", "--http_port", "4321", "--grpc=4321"]);
        let last = |name: &str| process.env.iter().rev().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
        assert_eq!((last("A"), last("PORT"), last("K_REVISION")), (Some("1"), Some("4321"), Some("m-predictor-00001")));
    }

    #[test]
    fn the_image_map_gives_the_program_when_there_is_no_command() {
        let spec = parse(json!([{"image": "ghcr.io/x/python-http:3", "args": ["--http_port=8080"]}])).unwrap();
        assert_eq!(spec.process(9, &[]).argv, ["/usr/bin/python3", "-u", "--http_port=9"]);
        assert_eq!((spec.dir.as_path(), spec.readiness_path.as_deref()), (Path::new("/manifests"), None));
    }

    #[test]
    fn a_runtimes_model_folder_becomes_the_local_one() {
        let spec = parse(json!([{
            "command": ["server"],
            "args": ["--model_dir=/mnt/models", "--model-store=/mnt/models/store", "--other=/mnt/modelsx", "/mnt/models"],
            "env": [{"name": "MODELS_DIR", "value": "/mnt/models"}, {"name": "A", "value": "/mnt"}],
        }]))
        .unwrap();
        let local = spec.with_model_dir(Path::new("/cache/abc"));
        assert_eq!(
            local.argv,
            [
                "server",
                "--model_dir=/cache/abc",
                "--model-store=/cache/abc/store",
                "--other=/mnt/modelsx",
                "/cache/abc"
            ]
        );
        assert_eq!(
            local.env,
            [("MODELS_DIR".to_owned(), "/cache/abc".to_owned()), ("A".to_owned(), "/mnt".to_owned())]
        );
    }

    #[test]
    fn a_collocated_transformer_is_pointed_at_the_model_servers_real_port() {
        let container = json!({
            "name": "transformer-container",
            "command": ["t"],
            "args": ["--predictor_host=localhost:8085", "--other", "127.0.0.1:8085/x", "localhost:8086"],
            "env": [{"name": "PREDICTOR_HOST", "value": "localhost:8085"}],
        });
        let moved = parse(json!([container])).unwrap().beside_model_server(41234);
        assert_eq!(
            moved.argv,
            ["t", "--predictor_host=localhost:41234", "--other", "127.0.0.1:41234/x", "localhost:8086"]
        );
        assert_eq!(moved.env, [("PREDICTOR_HOST".to_owned(), "localhost:41234".to_owned())]);
    }

    #[test]
    fn refusals_name_the_field() {
        let refused = |containers: Value| parse(containers).unwrap_err();
        let one = json!({"command": ["x"]});
        assert!(
            refused(json!([one, one])).starts_with("spec.predictor.containers: skiff up runs exactly one container")
        );
        assert!(refused(json!([])).ends_with("found 0"));
        let collocated = refused(
            json!([{"name": "kserve-container", "command": ["x"]}, {"name": "transformer-container", "command": ["y"]}]),
        );
        assert!(
            collocated.starts_with(
                "spec.predictor.containers: skiff up runs KServe's collocation as transformer-container alone"
            ),
            "{collocated}"
        );
        assert!(
            refused(json!([{"image": "nginx:1"}]))
                .starts_with("spec.predictor.containers[0].command: image \"nginx:1\" is not in the image map")
        );
        assert!(
            refused(json!([{"args": ["a"]}]))
                .starts_with("spec.predictor.containers[0].command: a container needs a command")
        );
        let port = refused(json!([{"command": ["x"], "ports": [{"containerPort": 70000}]}]));
        assert_eq!(port, "spec.predictor.containers[0].ports[0].containerPort: 70000 is not a port (1 to 65535)");
        let env =
            refused(json!([{"command": ["x"], "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]}]));
        assert!(env.starts_with("spec.predictor.containers[0].env[0].valueFrom:"), "{env}");
        let probe = refused(json!([{"command": ["x"], "readinessProbe": {"httpGet": {"path": "ready", "port": 1}}}]));
        assert!(probe.starts_with("spec.predictor.containers[0].readinessProbe.httpGet.path:"), "{probe}");
        assert!(refused(json!([{"command": "x"}])).starts_with("spec.predictor.containers[0]: "));
    }
}
