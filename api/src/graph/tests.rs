use std::path::Path;

use super::*;

fn repo() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// KServe's `docs/samples/graph/switch.yaml` graph, as written there.
const SWITCH: &str = r#"apiVersion: "serving.kserve.io/v1alpha1"
kind: InferenceGraph
metadata:
  name: model-switch
spec:
  nodes:
    root:
      routerType: Switch
      steps:
      - serviceUrl: http://single-1.default.{$your-domain}/switch
        condition: "[@this].#(source==client)" #object matching
      - serviceUrl: http://single-2.default.{$your-domain}/switch
        condition: "instances.#(intval>10)" #array matching
      - serviceUrl: http://single-3.default.{$your-domain}/switch
        condition: "instances.#(strval%*red-server*)" #pattern matching
"#;

/// KServe's e2e `ig_test_switch_scenario_10.yaml`, rendered.
const SCENARIO_10: &str = r#"apiVersion: serving.kserve.io/v1alpha1
kind: InferenceGraph
metadata:
  name: splitter-graph
spec:
  nodes:
    root:
      routerType: Sequence
      steps:
      - name: "rootStep1"
        nodeName: node1
        dependency: Hard
      - name: "rootStep2"
        serviceName: success-200-isvc
    node1:
      routerType: Splitter
      steps:
        - name: "node1Step1"
          weight: 100
          serviceName: error-404-isvc
          condition: "[@this].#(decision_picker==ERROR)"
          dependency: Hard
"#;

fn graph(yaml: &str) -> InferenceGraph {
    graph_from_yaml(yaml).unwrap()
}

fn refusal(yaml: &str) -> String {
    let g = graph(yaml);
    validate_graph(g.metadata.name.as_deref().unwrap_or_default(), &g.spec).unwrap_err().to_string()
}

fn with_nodes(nodes: &str) -> String {
    format!(
        "apiVersion: serving.kserve.io/v1alpha1\nkind: InferenceGraph\nmetadata:\n  name: g\nspec:\n  nodes:\n{nodes}"
    )
}

#[test]
fn kserves_samples_parse_and_validate() {
    for yaml in [SWITCH, SCENARIO_10] {
        let g = graph(yaml);
        validate_graph(g.metadata.name.as_deref().unwrap(), &g.spec).unwrap();
    }
    let g = graph(SCENARIO_10);
    let root = &g.spec.nodes["root"];
    assert_eq!(root.router_type, RouterType::Sequence);
    assert_eq!(root.steps[0].target(), Some(Target::Node("node1")));
    assert!(root.steps[0].is_hard());
    assert!(!root.steps[1].is_hard(), "Soft is the default");
    assert_eq!(g.spec.nodes["node1"].steps[0].weight, Some(100));
    assert_eq!(reachable_services(&g.spec), ["success-200-isvc", "error-404-isvc"]);
}

#[test]
fn every_field_of_kserves_spec_is_read() {
    let g = graph(&format!(
        "{}  timeout: 30\n  minReplicas: 0\n  maxReplicas: 3\n  scaleTarget: 5\n  scaleMetric: rps\n  \
         routerTimeouts: {{serviceClient: 4}}\n  resources: {{requests: {{cpu: 100m}}}}\n",
        with_nodes(
            "    root:\n      routerType: Ensemble\n      steps:\n      - serviceName: a\n        name: a\n        data: $request\n"
        )
    ));
    assert_eq!(g.spec.timeout, Some(30));
    assert_eq!((g.spec.min_replicas, g.spec.max_replicas, g.spec.scale_target), (Some(0), Some(3), Some(5)));
    assert_eq!(g.spec.scale_metric, Some(ScaleMetric::Rps));
    assert_eq!(g.spec.router_timeouts.as_ref().unwrap().service_client, Some(4));
    assert_eq!(g.spec.resources.as_ref().unwrap()["requests"]["cpu"], "100m");
    validate_graph("g", &g.spec).unwrap();
}

#[test]
fn refusals_name_the_field() {
    let cases = [
        (
            with_nodes("    start:\n      routerType: Sequence\n      steps: [{serviceName: a}]\n"),
            "spec.nodes: no node named \"root\"",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Splitter\n      steps:\n      - {serviceName: a, weight: 20}\n      - {serviceName: b, weight: 70}\n",
            ),
            "spec.nodes.root.steps: the weights of a Splitter add up to 100, these to 90",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Splitter\n      steps:\n      - {serviceName: a, weight: 100}\n      - {serviceName: b}\n",
            ),
            "spec.nodes.root.steps[1].weight: missing",
        ),
        (
            with_nodes("    root:\n      routerType: Sequence\n      steps:\n      - {name: x, data: $request}\n"),
            "spec.nodes.root.steps[0]: no target",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Sequence\n      steps:\n      - {serviceName: a, nodeName: root}\n",
            ),
            "spec.nodes.root.steps[0]: more than one of nodeName, serviceName, serviceUrl",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Sequence\n      steps:\n      - {nodeName: nodel}\n    node1:\n      routerType: Sequence\n      steps: [{serviceName: a}]\n",
            ),
            "spec.nodes.root.steps[0].nodeName: \"nodel\": no such node (the graph's nodes: node1, root)",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Sequence\n      steps: [{nodeName: a}]\n    a:\n      routerType: Ensemble\n      steps: [{serviceName: s}, {nodeName: b}]\n    b:\n      routerType: Switch\n      steps: [{nodeName: a, condition: x}]\n",
            ),
            "spec.nodes.b.steps[0].nodeName: the nodes form a cycle: a -> b -> a",
        ),
        (
            with_nodes("    root:\n      routerType: Sequence\n      steps: [{nodeName: root}]\n"),
            "spec.nodes.root.steps[0].nodeName: the nodes form a cycle: root -> root",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Switch\n      steps:\n      - {serviceName: a, condition: \"instances.#(intval>10\"}\n",
            ),
            "spec.nodes.root.steps[0].condition: \"instances.#(intval>10\": '(' is not closed",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Switch\n      steps:\n      - {serviceName: a, condition: \"a]\"}\n",
            ),
            "spec.nodes.root.steps[0].condition: \"a]\": ']' closes nothing that is open",
        ),
        (
            with_nodes(
                "    root:\n      routerType: Ensemble\n      steps:\n      - {serviceName: a, name: s}\n      - {serviceName: b, name: s}\n",
            ),
            "spec.nodes.root.steps[1].name: \"s\": another step of node \"root\" has this name",
        ),
        (
            with_nodes("    root:\n      routerType: Sequence\n      steps: [{serviceUrl: \"ftp://x/y\"}]\n"),
            "spec.nodes.root.steps[0].serviceUrl",
        ),
        (
            with_nodes("    root:\n      routerType: Sequence\n      steps: [{serviceName: Model_A}]\n"),
            "spec.nodes.root.steps[0].serviceName",
        ),
        (
            format!(
                "{}  timeout: 0\n",
                with_nodes("    root:\n      routerType: Sequence\n      steps: [{serviceName: a}]\n")
            ),
            "spec.timeout: 0: must be 1 or more",
        ),
    ];
    for (yaml, want) in cases {
        let got = refusal(&yaml);
        assert!(got.starts_with(want), "want {want:?}\n got {got:?}");
    }
    let bad_name = with_nodes("    root:\n      routerType: Sequence\n      steps: [{serviceName: a}]\n")
        .replace("name: g\n", "name: 9g\n");
    assert!(refusal(&bad_name).starts_with("metadata.name: \"9g\""));
}

#[test]
fn an_unknown_router_type_or_dependency_is_refused_naming_the_field() {
    let e = graph_from_yaml(&with_nodes("    root:\n      routerType: Pipeline\n      steps: [{serviceName: a}]\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("spec.nodes.root.routerType"), "{e}");
    let e = graph_from_yaml(&with_nodes(
        "    root:\n      routerType: Sequence\n      steps: [{serviceName: a, dependency: Strong}]\n",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("dependency"), "{e}");
}

#[test]
fn conditions_kserve_uses_are_accepted() {
    for c in [
        "[@this].#(source==client)",
        "instances.#(intval>10)",
        "instances.#(strval%*red-server*)",
        "predictions.#(class==\"dog\")",
        "{ .predictions.class == \"dog\" }",
        "a\\.b",
        "friends.#(nets.#(==\"fb\"))#.first",
    ] {
        check_condition(c).unwrap_or_else(|e| panic!("{c}: {e}"));
    }
    for c in ["a(", "a)", "\"open", "x\\", "#()"] {
        assert!(check_condition(c).is_err(), "{c}");
    }
}

#[test]
fn the_checked_in_crd_is_up_to_date() {
    let generated = crd_yaml().unwrap();
    let helm = INFERENCEGRAPHS_CRD_PATH.replace("deploy/crds/", "deploy/helm/skiff/crds/");
    for file in [INFERENCEGRAPHS_CRD_PATH, helm.as_str()] {
        let checked_in = std::fs::read_to_string(repo().join(file)).unwrap_or_default();
        assert!(
            checked_in == generated,
            "{file} is stale: regenerate it with `cargo run -q -p skiff-api --bin crdgen inferencegraphs > {file}` \
             (from the repository root) and commit the result"
        );
    }
    let kustomization = std::fs::read_to_string(repo().join("deploy/crds/kustomization.yaml")).unwrap();
    assert!(kustomization.contains("- serving.kserve.io_inferencegraphs.yaml"));
}

#[test]
fn names_scope_and_columns_are_kserves() {
    let crd = inferencegraphs_crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("inferencegraphs.serving.kserve.io"));
    assert_eq!(crd.spec.names.kind, "InferenceGraph");
    assert_eq!(crd.spec.names.short_names.as_deref(), Some(&["ig".to_owned()][..]));
    assert_eq!(crd.spec.scope, "Namespaced");
    let version = &crd.spec.versions[0];
    assert_eq!(version.name, "v1alpha1");
    let columns: Vec<&str> = version.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
    assert_eq!(columns, ["URL", "Ready", "Age"]);
    assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
}
