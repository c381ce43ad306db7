use super::*;

fn target(revision: &str, percent: u32, tag: Option<&str>) -> TrafficTarget {
    TrafficTarget {
        revision_name: revision.to_owned(),
        percent,
        tag: tag.map(str::to_owned),
        latest_revision: tag == Some("latest"),
    }
}

fn route(namespace: &str, name: &str) -> ServiceRoute {
    ServiceRoute {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        targets: vec![
            target(&format!("{name}-predictor-00002"), 20, Some("latest")),
            target(&format!("{name}-predictor-00001"), 80, Some("prev")),
        ],
        ..ServiceRoute::default()
    }
}

fn table() -> RouteTable {
    RouteTable::new(
        "example.com",
        vec![
            route("default", "iris"),
            route("team", "iris"),
            route("team", "mnist"),
            route("a", "bert"),
            route("b", "bert"),
        ],
    )
}

/// (namespace/name, tag, upstream path) of a resolution.
fn hit(table: &RouteTable, host: &str, path: &str) -> Option<(String, Option<String>, String)> {
    table.resolve(host, path).map(|r| (r.service.key(), r.tag, r.path))
}

fn found(key: &str, tag: Option<&str>, path: &str) -> Option<(String, Option<String>, String)> {
    Some((key.to_owned(), tag.map(str::to_owned), path.to_owned()))
}

#[test]
fn the_host_names_the_service_and_its_port_is_ignored() {
    let t = table();
    assert_eq!(t.len(), 5);
    assert_eq!(
        hit(&t, "iris.team.example.com", "/v1/models/iris:predict"),
        found("team/iris", None, "/v1/models/iris:predict")
    );
    assert_eq!(hit(&t, "mnist.team.example.com:8080", "/anything?x=1"), found("team/mnist", None, "/anything?x=1"));
    assert_eq!(hit(&t, "MNIST.Team.Example.COM.", "/"), found("team/mnist", None, "/"));
}

#[test]
fn tag_hosts_pin_the_tagged_target() {
    let t = table();
    assert_eq!(
        hit(&t, "latest-iris.team.example.com", "/v2/health/ready"),
        found("team/iris", Some("latest"), "/v2/health/ready")
    );
    assert_eq!(hit(&t, "prev-iris.default.example.com:80", "/"), found("default/iris", Some("prev"), "/"));
    assert_eq!(hit(&t, "canary-iris.team.example.com", "/"), None, "no target carries that tag");
}

#[test]
fn a_service_named_like_a_tag_host_wins_over_the_tag() {
    let t = RouteTable::new("example.com", vec![route("ns", "x"), route("ns", "latest-x")]);
    assert_eq!(hit(&t, "latest-x.ns.example.com", "/"), found("ns/latest-x", None, "/"));
}

#[test]
fn an_unknown_host_under_the_domain_is_a_miss_whatever_the_path() {
    let t = table();
    assert_eq!(hit(&t, "nope.team.example.com", "/v1/models/iris:predict"), None);
    assert_eq!(hit(&t, "iris.nowhere.example.com", "/"), None);
    assert_eq!(hit(&t, "a.iris.team.example.com", "/"), None);
}

#[test]
fn serving_paths_name_the_service_and_are_rewritten() {
    let t = table();
    assert_eq!(
        hit(&t, "localhost:8080", "/serving/team/mnist/v1/models/mnist:predict?verbose=1"),
        found("team/mnist", None, "/v1/models/mnist:predict?verbose=1")
    );
    assert_eq!(hit(&t, "10.0.0.1", "/serving/team/mnist"), found("team/mnist", None, "/"));
    assert_eq!(hit(&t, "10.0.0.1", "/serving/team/mnist/"), found("team/mnist", None, "/"));
    assert_eq!(hit(&t, "10.0.0.1", "/serving/team/mnist?q"), found("team/mnist", None, "/?q"));
    assert_eq!(hit(&t, "10.0.0.1", "/serving/team/nope/x"), None);
    assert_eq!(hit(&t, "10.0.0.1", "/serving/team"), None);
}

#[test]
fn model_paths_find_the_service_by_name_default_namespace_first() {
    let t = table();
    assert_eq!(hit(&t, "localhost", "/v1/models/iris:predict"), found("default/iris", None, "/v1/models/iris:predict"));
    assert_eq!(hit(&t, "localhost", "/v1/models/iris"), found("default/iris", None, "/v1/models/iris"));
    assert_eq!(hit(&t, "localhost", "/v2/models/mnist/infer"), found("team/mnist", None, "/v2/models/mnist/infer"));
    assert_eq!(
        hit(&t, "[::1]:8080", "/v2/models/mnist/versions/1/ready?x=y"),
        found("team/mnist", None, "/v2/models/mnist/versions/1/ready?x=y")
    );
    assert_eq!(hit(&t, "localhost", "/v2/models/mnist"), found("team/mnist", None, "/v2/models/mnist"));
}

#[test]
fn model_paths_miss_when_the_name_is_unknown_or_ambiguous() {
    let t = table();
    assert_eq!(hit(&t, "localhost", "/v1/models/bert:predict"), None, "in a and b, neither default");
    assert_eq!(hit(&t, "localhost", "/v1/models/nope:predict"), None);
    assert_eq!(hit(&t, "localhost", "/v1/models/"), None);
    assert_eq!(hit(&t, "localhost", "/v1/models"), None);
    assert_eq!(hit(&t, "localhost", "/v2/health/ready"), None);
    assert_eq!(hit(&t, "localhost", "/"), None);
    assert_eq!(hit(&t, "", "/other"), None);
}

#[test]
fn an_empty_domain_routes_name_dot_namespace_hosts() {
    let t = RouteTable::new("", vec![route("team", "mnist")]);
    assert_eq!(hit(&t, "mnist.team:8080", "/x"), found("team/mnist", None, "/x"));
    assert_eq!(hit(&t, "localhost", "/v2/models/mnist/infer"), found("team/mnist", None, "/v2/models/mnist/infer"));
    assert_eq!(
        hit(&t, "127.0.0.1:8080", "/v2/models/mnist/infer"),
        found("team/mnist", None, "/v2/models/mnist/infer")
    );
}

#[test]
fn a_later_route_replaces_an_earlier_one_with_the_same_name() {
    let mut second = route("team", "mnist");
    second.timeout = Some(Duration::from_secs(9));
    let t = RouteTable::new("example.com", vec![route("team", "mnist"), second]);
    assert_eq!(t.len(), 1);
    assert_eq!(t.get("team", "mnist").unwrap().timeout, Some(Duration::from_secs(9)));
    assert!(RouteTable::default().is_empty());
}

#[test]
fn the_url_host_routes_whatever_the_domain() {
    let mut iris = route("ml", "iris");
    iris.host = Some("iris.ml.models.internal".to_owned());
    let table = RouteTable::new("example.com", vec![iris]);
    let found = |host: &str| hit(&table, host, "/").map(|(key, tag, _)| (key, tag));
    assert_eq!(found("iris.ml.models.internal:80"), Some(("ml/iris".to_owned(), None)));
    assert_eq!(found("LATEST-iris.ml.models.internal"), Some(("ml/iris".to_owned(), Some("latest".to_owned()))));
    assert_eq!(found("prev-iris.ml.models.internal"), Some(("ml/iris".to_owned(), Some("prev".to_owned()))));
    assert_eq!(found("iris.ml.example.com"), Some(("ml/iris".to_owned(), None)), "the domain still works");
    assert_eq!(found("canary-iris.ml.models.internal"), None);
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn config() -> ProptestConfig {
        ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
    }

    /// Hosts built from the service names, tags, dashes, dots, ports and junk.
    fn host() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            Just("iris".to_owned()),
            Just("latest".to_owned()),
            Just("prev".to_owned()),
            Just("default".to_owned()),
            Just("team".to_owned()),
            Just("example.com".to_owned()),
            "-{1,80}",
            "[a-zA-Z0-9.:\\[\\]-]{0,12}",
            ".{0,6}",
        ];
        prop::collection::vec(part, 0..8).prop_map(|parts| parts.join(if parts.len() % 2 == 0 { "." } else { "-" }))
    }

    fn path() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            Just("/v1/models/".to_owned()),
            Just("/v2/models/".to_owned()),
            Just("/serving/".to_owned()),
            Just("iris".to_owned()),
            Just(":predict".to_owned()),
            Just("?".to_owned()),
            "[a-z/:?=&%-]{0,10}",
        ];
        prop::collection::vec(part, 0..6).prop_map(|parts| parts.concat())
    }

    proptest! {
        #![proptest_config(config())]

        /// Any Host and path resolve to a known service (its tag one of its own) or to nothing.
        #[test]
        fn any_host_and_path_resolve_to_a_service_or_nothing(host in host(), path in path()) {
            let table = table();
            if let Some(resolved) = table.resolve(&host, &path) {
                let service = &resolved.service;
                prop_assert!(table.get(&service.namespace, &service.name).is_some());
                if let Some(tag) = &resolved.tag {
                    prop_assert!(service.has_tag(tag));
                }
                prop_assert!(resolved.path.starts_with('/') || resolved.path == path);
            }
        }

        /// A first label past 63 characters never names a service, however it is made.
        #[test]
        fn labels_past_63_characters_name_nothing(label in "[a-z-]{64,300}") {
            let host = format!("{label}.default.example.com");
            prop_assert!(table().resolve(&host, "/").is_none());
        }
    }
}

#[test]
fn a_transformer_takes_the_service_and_the_predictor_keeps_its_own_address() {
    let mut iris = route("default", "iris");
    iris.transformer = vec![target("iris-transformer-00001", 100, Some("latest"))];
    iris.explainer = vec![target("iris-explainer-00001", 100, Some("latest"))];
    let table = RouteTable::new("example.com", vec![iris, route("default", "plain")]);
    let component = |host: &str, path: &str| {
        let resolved = table.resolve(host, path).unwrap();
        (resolved.component, resolved.targets()[0].revision_name.clone(), resolved.path)
    };
    let via_transformer =
        (Component::Transformer, "iris-transformer-00001".to_owned(), "/v1/models/iris:predict".into());
    assert_eq!(component("iris.default.example.com", "/v1/models/iris:predict"), via_transformer);
    assert_eq!(component("127.0.0.1:8080", "/v1/models/iris:predict"), via_transformer);
    assert_eq!(component("iris.default.example.com", "/v2/models/iris/infer").0, Component::Transformer);
    for explain in ["/v1/models/iris:explain", "/v2/models/iris/explain", "/v2/models/iris/versions/1/explain?x=1"] {
        assert_eq!(component("iris.default.example.com", explain).0, Component::Explainer, "{explain}");
    }
    let direct = (Component::Predictor, "iris-predictor-00002".to_owned(), "/v1/models/iris:predict".into());
    assert_eq!(component("iris-predictor.default.example.com", "/v1/models/iris:predict"), direct);
    assert_eq!(component("127.0.0.1:8080", "/serving/default/iris-predictor/v1/models/iris:predict"), direct);
    assert_eq!(component("iris-predictor.default.example.com", "/v1/models/iris:explain").0, Component::Predictor);
    assert_eq!(component("plain.default.example.com", "/v1/models/plain:explain").0, Component::Predictor);
    assert_eq!(component("plain-predictor.default.example.com", "/").0, Component::Predictor);
    assert!(table.resolve("127.0.0.1", "/serving/default/nothing-predictor/").is_none());
}
