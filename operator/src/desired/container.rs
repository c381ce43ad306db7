//! The shape of a pod that runs the user's custom containers (always a transformer's or an
//! explainer's, and a predictor's when it gives `containers`), with KServe's contract for a
//! transformer's or explainer's container.

use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
use serde_json::Value;
use skiff_api::serving::{component_contract, predictor_host};
use skiff_api::validate::TRANSFORMER_CONTAINER;

use super::{CONTAINER_NAME, RevisionRef, SERVER_PORT, serving_ports};
use crate::platform::Platform;

/// KServe's contract for the container of a transformer or explainer (its `GetContainer`), each
/// argument only when the container does not pass it already: `--model_name <isvc>`,
/// `--predictor_host <host>` and `--http_port <port>` (the port the queue-proxy forwards to,
/// KServe's 8080 unless the container declares another), and the variable `PREDICTOR_HOST` unless
/// set. The predictor host is the router with the path that addresses the predictor alone
/// ([`predictor_host`]): `<router>/serving/<namespace>/<isvc>-predictor`. A path prefix rather
/// than a host per component, because then no component needs a DNS name of its own (Skiff makes
/// no Service per component, only per revision, and the router's one Service name is all that
/// must resolve); and through the router, the call reaches the predictor's revisions by their
/// traffic split and is held by the activator while the predictor scales from zero.
pub(super) fn component_args(container: &mut Container, revision: &RevisionRef, port: i32, platform: &Platform) {
    let host = predictor_host(&platform.router_host(), &revision.namespace, &revision.service);
    let (mut args, env) = component_contract(&revision.service, &host);
    args.extend(["--http_port".to_owned(), port.to_string()]);
    let own = container.args.get_or_insert_with(Vec::new);
    for pair in args.chunks(2) {
        let flag = &pair[0];
        if !own.iter().any(|a| a == flag || a.starts_with(&format!("{flag}="))) {
            own.extend(pair.iter().cloned());
        }
    }
    let vars = container.env.get_or_insert_with(Vec::new);
    for (name, value) in env {
        if !vars.iter().any(|v| v.name == name) {
            vars.push(EnvVar { name, value: Some(value), ..EnvVar::default() });
        }
    }
}

/// The user's containers as written (`at`: the component's field, for errors); the index of the
/// one that serves (port 8080 when it declares none) is returned: `transformer-container` when
/// there is one (KServe's collocation in custom form, beside a `kserve-container` it calls on
/// localhost), else the first (named `kserve-container` when unnamed).
pub(super) fn custom_containers(containers: &[Value], pod: &mut PodSpec, at: &str) -> Result<usize, String> {
    let mut parsed = Vec::with_capacity(containers.len());
    for (i, value) in containers.iter().enumerate() {
        let mut value = value.clone();
        if i == 0
            && let Some(object) = value.as_object_mut()
        {
            object.entry("name").or_insert_with(|| CONTAINER_NAME.into());
        }
        let container: Container = serde_json::from_value(value).map_err(|e| format!("{at}.containers[{i}]: {e}"))?;
        parsed.push(container);
    }
    if parsed.is_empty() {
        return Err(format!("{at}.containers: at least one container is needed"));
    }
    let serving = parsed.iter().position(|c| c.name == TRANSFORMER_CONTAINER).unwrap_or(0);
    if parsed[serving].ports.as_ref().is_none_or(Vec::is_empty) {
        parsed[serving].ports = Some(serving_ports(SERVER_PORT));
    }
    pod.containers = parsed;
    Ok(serving)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::Deployment;
    use serde_json::json;
    use skiff_api::revision::Component;

    use crate::desired::testing::*;
    use crate::desired::{QUEUE_PROXY_PORT, RevisionRef, deployment, service};
    use crate::platform::Platform;

    #[test]
    fn custom_containers_are_kept_with_kserve_defaults() {
        let d = build("    containers:\n    - image: my/model:1\n      env: [{name: A, value: b}]\n").unwrap();
        let pod = pod_of(&d);
        let c = &pod["containers"][0];
        assert_eq!(c["name"], "kserve-container");
        assert_eq!(c["image"], "my/model:1");
        assert_eq!(c["env"][0]["value"], "b");
        assert_eq!(c["ports"][0]["containerPort"], 8080);
        assert!(pod.get("automountServiceAccountToken").is_none());

        let d = build("    containers:\n    - name: web\n      image: my/web\n      ports: [{containerPort: 9000}]\n")
            .unwrap();
        assert_eq!(pod_port(&d), 9000);
    }

    fn pod_port(d: &Deployment) -> i64 {
        pod_of(d)["containers"][0]["ports"][0]["containerPort"].as_i64().unwrap()
    }

    #[test]
    fn a_transformer_runs_its_container_behind_the_queue_proxy_with_kserves_arguments() {
        let spec = predictor("    containers:\n    - image: my/transformer\n      args: [--verbose]\n");
        let d = deployment(&transformer_revision(), &owner(), &spec, &record(), Some(0), &Platform::default(), None)
            .unwrap();
        let labels = d.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["component"], "transformer");
        assert_eq!(labels["skiff.dev/revision-name"], "iris-transformer-00001");
        assert_eq!(labels["skiff.dev/revision"], "1", "the Deployment carries its number, for the autoscaler");
        let selector = d.spec.as_ref().unwrap().selector.match_labels.clone().unwrap();
        assert_eq!(
            selector,
            [
                ("serving.kserve.io/inferenceservice".to_owned(), "iris".to_owned()),
                ("skiff.dev/revision-name".to_owned(), "iris-transformer-00001".to_owned())
            ]
            .into()
        );
        let pod_labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
        assert!(
            !pod_labels.contains_key("skiff.dev/revision"),
            "a transformer's pods stay out of the selector of predictor revision 1: {pod_labels:?}"
        );
        assert_eq!(pod_labels["component"], "transformer");

        let pod = pod_of(&d);
        let c = &pod["containers"][0];
        assert_eq!(c["name"], "kserve-container");
        let host = "skiff-router.skiff-system.svc.cluster.local/serving/ml/iris-predictor";
        assert_eq!(
            strings(&c["args"]),
            ["--verbose", "--model_name", "iris", "--predictor_host", host, "--http_port", "8080"],
            "the container's own arguments first"
        );
        assert_eq!(c["env"], json!([{"name": "PREDICTOR_HOST", "value": host}]));
        let sidecar = &pod["containers"][1];
        assert_eq!(sidecar["name"], "queue-proxy");
        assert!(strings(&sidecar["args"]).contains(&"127.0.0.1:8080".to_owned()));

        let s = service(&transformer_revision(), &owner(), QUEUE_PROXY_PORT);
        assert_eq!(s.spec.as_ref().unwrap().selector.as_ref().unwrap(), &selector, "the Service selects the same pods");
        assert_eq!(s.metadata.labels.as_ref().unwrap()["component"], "transformer");
        let observed = crate::revisions::observe(std::slice::from_ref(&d), "uid-1");
        assert_eq!((observed[0].component, observed[0].number), (Component::Transformer, 1));
    }

    #[test]
    fn what_the_container_sets_itself_is_kept_and_the_router_address_can_be_given() {
        let spec = predictor(
            "    containers:\n    - image: my/explainer\n      args: [--predictor_host=elsewhere:80, --http_port, '9000']\n      \
             ports: [{containerPort: 9000}]\n      env: [{name: PREDICTOR_HOST, value: elsewhere:80}]\n",
        );
        let revision = RevisionRef {
            component: Component::Explainer,
            name: "iris-explainer-00003".into(),
            ..transformer_revision()
        };
        let platform = Platform { router_address: Some("10.244.0.9:8080".into()), ..Platform::default() };
        let d = deployment(&revision, &owner(), &spec, &record(), Some(0), &platform, None).unwrap();
        let pod = pod_of(&d);
        let c = &pod["containers"][0];
        assert_eq!(
            strings(&c["args"]),
            ["--predictor_host=elsewhere:80", "--http_port", "9000", "--model_name", "iris"]
        );
        assert_eq!(c["env"], json!([{"name": "PREDICTOR_HOST", "value": "elsewhere:80"}]));
        assert_eq!(d.metadata.labels.as_ref().unwrap()["component"], "explainer");

        let plain = predictor("    containers:\n    - image: my/explainer\n");
        let d = deployment(&revision, &owner(), &plain, &record(), Some(0), &platform, None).unwrap();
        let args = strings(&pod_of(&d)["containers"][0]["args"]);
        assert_eq!(args[3], "10.244.0.9:8080/serving/ml/iris-predictor", "{args:?}");
    }

    #[test]
    fn a_predictors_custom_container_gets_no_component_arguments() {
        let mut revision = revision();
        revision.serving.queue_proxy = true;
        let spec = predictor("    containers:\n    - image: my/web\n");
        let d = deployment(&revision, &owner(), &spec, &record(), Some(0), &Platform::default(), None).unwrap();
        let pod = pod_of(&d);
        assert!(pod["containers"][0]["args"].is_null() && pod["containers"][0]["env"].is_null(), "{pod}");
        let pod_labels = d.spec.as_ref().unwrap().template.metadata.as_ref().unwrap().labels.clone().unwrap();
        assert_eq!(pod_labels["skiff.dev/revision"], "2", "a predictor's selector is as it always was");
    }

    #[test]
    fn errors_name_the_components_field() {
        let spec = predictor("    containers:\n    - image: my/transformer\n      ports: oops\n");
        let err = deployment(&transformer_revision(), &owner(), &spec, &record(), Some(0), &Platform::default(), None)
            .unwrap_err();
        assert!(err.starts_with("spec.transformer.containers[0]:"), "{err}");
    }
}
