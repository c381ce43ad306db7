//! The manifests in `deploy/` against the code that reads them: the checked-in config map parses,
//! the controller's Deployment arguments are accepted, its RBAC grants every call the controller
//! makes, and the kustomize base lists every manifest next to it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role};
use skiff_operator::Settings;
use skiff_operator::platform::{CONFIG_MAP, Initializer, Platform};

fn deploy(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(path)
}

fn documents<T: serde::de::DeserializeOwned>(path: &str, kind: &str) -> Vec<T> {
    let text = std::fs::read_to_string(deploy(path)).unwrap();
    let all: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).unwrap();
    all.into_iter().filter(|d| d["kind"] == kind).map(|d| serde_json::from_value(d).unwrap()).collect()
}

#[test]
fn the_config_map_parses() {
    let maps: Vec<ConfigMap> = documents("base/config.yaml", "ConfigMap");
    assert_eq!(maps[0].metadata.name.as_deref(), Some(CONFIG_MAP));
    let platform = Platform::from_data(maps[0].data.as_ref()).unwrap();
    assert_eq!(platform.domain, "example.com");
    assert!(platform.server_image.contains("skiff-server"));
    // Skiff's fetcher downloads models, asking the node cache of deploy/node-cache first.
    let node_cache: Vec<DaemonSet> = documents("node-cache/daemonset.yaml", "DaemonSet");
    let cache = &node_cache[0].spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    // It listens in the pod network, with no hostPort; model pods reach it through its Service,
    // which keeps each on its own node.
    let exposed = &cache.ports.as_ref().unwrap()[0];
    let port = exposed.container_port;
    assert_eq!(exposed.host_port, None, "no hostPort: the CNI's portmap would hide the model pod from the policy");
    assert!(cache.args.as_ref().unwrap().contains(&format!("$(POD_IP):{port}")), "{:?}", cache.args);
    let services: Vec<k8s_openapi::api::core::v1::Service> = documents("node-cache/service.yaml", "Service");
    let (meta, spec) = (&services[0].metadata, services[0].spec.as_ref().unwrap());
    assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Local"), "each pod reaches its own node's cache");
    assert_eq!(spec.selector, node_cache[0].spec.as_ref().unwrap().selector.match_labels);
    let service_port = &spec.ports.as_ref().unwrap()[0];
    let Initializer::Skiff { image, node_cache } = &platform.initializer else {
        panic!("KServe's initializer by default: {:?}", platform.initializer)
    };
    assert!(image.contains("skiff-fetch"), "{image}");
    let url = format!(
        "http://{}.{}.svc.cluster.local:{}",
        meta.name.as_deref().unwrap(),
        meta.namespace.as_deref().unwrap(),
        service_port.port
    );
    assert_eq!(node_cache.as_deref(), Some(url.as_str()), "the fetcher asks the node cache's Service");
    assert_eq!(
        service_port.target_port,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(exposed.name.clone().unwrap()))
    );
    // Transformers and explainers reach their predictor through the router's Service, as deployed.
    let services: Vec<k8s_openapi::api::core::v1::Service> = documents("base/router.yaml", "Service");
    let router = &services[0].metadata;
    let service = format!("{}/{}", router.namespace.as_deref().unwrap(), router.name.as_deref().unwrap());
    assert_eq!(platform.router_service, service);
    assert_eq!(platform.router_host(), "skiff-router.skiff-system.svc.cluster.local");
}

#[test]
fn the_controller_deployment_is_accepted_by_its_binary() {
    let deployments: Vec<Deployment> = documents("base/controller.yaml", "Deployment");
    let pod = deployments[0].spec.as_ref().unwrap().template.spec.clone().unwrap();
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    let settings = Settings::parse_from(std::iter::once("skiff-controller".to_owned()).chain(args));
    settings.validate().unwrap();
    let admin = container.ports.as_ref().unwrap().iter().find(|p| p.name.as_deref() == Some("admin")).unwrap();
    assert_eq!(i32::from(settings.admin_addr.port()), admin.container_port);
    assert_eq!(pod.service_account_name.as_deref(), Some("skiff-controller"));
}

/// Every (API group, resource, verb) the controller uses, cluster-wide and in its namespace.
const CLUSTER_CALLS: [(&str, &str, &str); 26] = [
    ("serving.kserve.io", "inferenceservices", "list"),
    ("serving.kserve.io", "inferenceservices", "watch"),
    ("serving.kserve.io", "inferenceservices/status", "patch"),
    ("serving.kserve.io", "servingruntimes", "list"),
    ("serving.kserve.io", "servingruntimes", "watch"),
    ("serving.kserve.io", "clusterservingruntimes", "list"),
    ("serving.kserve.io", "clusterservingruntimes", "watch"),
    ("apps", "deployments", "list"),
    ("apps", "deployments", "watch"),
    ("apps", "deployments", "create"),
    ("apps", "deployments", "patch"),
    ("apps", "deployments", "delete"),
    ("", "services", "list"),
    ("", "services", "watch"),
    ("", "services", "create"),
    ("", "services", "patch"),
    ("", "services", "delete"),
    ("", "pods", "list"),
    ("", "serviceaccounts", "get"),
    ("", "secrets", "get"),
    ("autoscaling", "horizontalpodautoscalers", "list"),
    ("autoscaling", "horizontalpodautoscalers", "patch"),
    ("autoscaling", "horizontalpodautoscalers", "delete"),
    ("keda.sh", "scaledobjects", "list"),
    ("keda.sh", "scaledobjects", "patch"),
    ("keda.sh", "scaledobjects", "delete"),
];
const NAMESPACE_CALLS: [(&str, &str, &str); 6] = [
    ("", "configmaps", "list"),
    ("", "configmaps", "watch"),
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
    ("", "configmaps", "get"),
];

fn allows(rules: &[PolicyRule], (group, resource, verb): (&str, &str, &str)) -> bool {
    rules.iter().any(|r| {
        r.api_groups.iter().flatten().any(|g| g == group)
            && r.resources.iter().flatten().any(|x| x == resource)
            && r.verbs.iter().any(|v| v == verb)
    })
}

#[test]
fn the_controller_rbac_grants_what_it_calls_and_no_wildcards() {
    let cluster: Vec<ClusterRole> = documents("base/rbac-controller.yaml", "ClusterRole");
    let namespaced: Vec<Role> = documents("base/rbac-controller.yaml", "Role");
    let cluster_rules = cluster[0].rules.clone().unwrap();
    let namespace_rules = namespaced[0].rules.clone().unwrap();
    for call in CLUSTER_CALLS {
        assert!(allows(&cluster_rules, call), "ClusterRole skiff-controller lacks {call:?}");
    }
    for call in NAMESPACE_CALLS {
        assert!(allows(&namespace_rules, call), "Role skiff-controller lacks {call:?}");
    }
    for rule in cluster_rules.iter().chain(&namespace_rules) {
        assert!(!rule.verbs.iter().any(|v| v == "*"), "wildcard verb in {rule:?}");
        assert!(!rule.resources.iter().flatten().any(|r| r == "*"), "wildcard resource in {rule:?}");
    }
}

#[test]
fn the_kustomize_base_lists_every_manifest() {
    let text = std::fs::read_to_string(deploy("base/kustomization.yaml")).unwrap();
    let kustomization: BTreeMap<String, serde_json::Value> = serde_saphyr::from_str(&text).unwrap();
    let resources: Vec<&str> =
        kustomization["resources"].as_array().unwrap().iter().map(|r| r.as_str().unwrap()).collect();
    for entry in std::fs::read_dir(deploy("base")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            assert!(resources.contains(&name.as_str()), "{name} is not in deploy/base/kustomization.yaml");
        }
    }
    assert!(resources.contains(&"../crds"));
}
