//! The executor's rules, KServe's e2e graph scenarios among them, over a fake caller: `success`
//! answers `{"predictions": [{"message": "SUCCESS"}]}`, `error` 404 `{"detail": "Intentional 404
//! code"}` (KServe's `success_200_isvc` and `error_404_isvc`), `echo` its request, `add-one` adds 1
//! to each prediction (or instance), `down` cannot be reached.

use std::sync::Mutex;

use bytes::Bytes;
use serde_json::{Value, json};
use skiff_api::graph::{InferenceGraphSpec, Target, graph_from_yaml};

use super::exec::*;
use super::*;

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(String, String, Value)>>,
}

impl Caller for Fake {
    fn call<'a>(&'a self, step: &'a StepId, target: Target<'a>, body: Bytes) -> BoxFuture<'a, Result<Answer, String>> {
        Box::pin(async move {
            let name = match target {
                Target::Service(s) | Target::Url(s) | Target::Node(s) => s.to_owned(),
            };
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            self.calls.lock().unwrap().push((step.to_string(), name.clone(), request.clone()));
            let ok = |v: Value| Ok(Answer { status: 200, body: Bytes::from(v.to_string()) });
            match name.as_str() {
                "success" => ok(json!({"predictions": [{"message": "SUCCESS"}]})),
                "error" => Ok(Answer { status: 404, body: Bytes::from(r#"{"detail":"Intentional 404 code"}"#) }),
                "echo" => ok(request),
                "add-one" => {
                    let field = if request.get("predictions").is_some() { "predictions" } else { "instances" };
                    let out: Vec<Value> =
                        request[field].as_array().unwrap().iter().map(|v| json!(v.as_f64().unwrap() + 1.0)).collect();
                    ok(json!({ "predictions": out }))
                }
                "text" => Ok(Answer { status: 200, body: Bytes::from_static(b"not json") }),
                _ => Err("cannot connect: refused".to_owned()),
            }
        })
    }
}

fn spec(nodes: &str) -> InferenceGraphSpec {
    let yaml = format!(
        "apiVersion: serving.kserve.io/v1alpha1\nkind: InferenceGraph\nmetadata:\n  name: g\nspec:\n  nodes:\n{nodes}"
    );
    let graph = graph_from_yaml(&yaml).unwrap();
    skiff_api::graph::validate_graph("g", &graph.spec).unwrap();
    graph.spec
}

async fn run_at(
    spec: &InferenceGraphSpec,
    input: Value,
    point: u32,
) -> (Result<Answer, GraphError>, Vec<(String, String, Value)>) {
    let fake = Fake::default();
    let draw = move || point;
    let answer = Executor::new(spec, &fake, &draw).run(Bytes::from(input.to_string())).await;
    (answer, fake.calls.into_inner().unwrap())
}

async fn run(spec: &InferenceGraphSpec, input: Value) -> (Result<Answer, GraphError>, Vec<(String, String, Value)>) {
    run_at(spec, input, 0).await
}

fn json_of(answer: &Answer) -> Value {
    serde_json::from_slice(&answer.body).unwrap()
}

const SUCCESS: &str = r#"{"predictions":[{"message":"SUCCESS"}]}"#;

fn error_picker() -> Value {
    json!({"decision_picker": "ERROR", "key1": {"name": "abc"}})
}
fn success_picker() -> Value {
    json!({"decision_picker": "SUCCESS", "key1": {"name": "abc"}})
}

#[tokio::test]
async fn sequence_passes_the_request_or_the_previous_response() {
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: add-one\n      - serviceName: add-one\n        data: $response\n      - serviceName: echo\n        data: $request\n",
    );
    let (answer, calls) = run(&s, json!({"instances": [1, 2]})).await;
    assert_eq!(json_of(&answer.unwrap()), json!({"instances": [1, 2]}), "the last step got the graph's request");
    assert_eq!(calls[1].2, json!({"predictions": [2.0, 3.0]}), "the second got the first's answer");
    assert_eq!(calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["root[0]", "root[1]", "root[2]"]);
}

#[tokio::test]
async fn map_predictions_to_instances_rewrites_the_request_as_kserve_does() {
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: add-one\n      - serviceName: echo\n        data: $response\n        mapPredictionsToInstances: true\n",
    );
    let (answer, _) = run(&s, json!({"instances": [1]})).await;
    assert_eq!(json_of(&answer.unwrap()), json!({"instances": [2.0]}));
}

#[tokio::test]
async fn kserve_scenario_1_and_2_soft_steps_go_on_and_the_last_answer_counts() {
    // Scenario 1: success -> error (both Soft): the graph answers the 404.
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: success\n      - serviceName: error\n        data: $request\n",
    );
    let answer = run(&s, json!({"instances": [[6.8, 2.8, 4.8, 1.4]]})).await.0.unwrap();
    assert_eq!((answer.status, json_of(&answer)), (404, json!({"detail": "Intentional 404 code"})));
    // Scenario 2: error -> success: the graph answers SUCCESS.
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: error\n      - serviceName: success\n        data: $request\n",
    );
    let answer = run(&s, json!({"instances": []})).await.0.unwrap();
    assert_eq!((answer.status, answer.body.as_ref()), (200, SUCCESS.as_bytes()));
}

#[tokio::test]
async fn kserve_scenario_3_a_hard_step_that_fails_ends_the_sequence() {
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: error\n        name: rootStep1\n        dependency: Hard\n      - serviceName: success\n        name: rootStep2\n        dependency: Soft\n",
    );
    let (answer, calls) = run(&s, json!({})).await;
    let answer = answer.unwrap();
    assert_eq!((answer.status, json_of(&answer)), (404, json!({"detail": "Intentional 404 code"})));
    assert_eq!(calls.len(), 1, "rootStep2 was not called");
}

#[tokio::test]
async fn kserve_scenario_4_switch_takes_the_first_matching_condition_else_404() {
    let s = spec(
        "    root:\n      routerType: Switch\n      steps:\n      - name: rootStep1\n        serviceName: error\n        condition: \"[@this].#(decision_picker==ERROR)\"\n      - name: rootStep2\n        serviceName: success\n        condition: \"[@this].#(decision_picker==SUCCESS)\"\n",
    );
    let answer = run(&s, error_picker()).await.0.unwrap();
    assert_eq!(answer.status, 404);
    let answer = run(&s, success_picker()).await.0.unwrap();
    assert_eq!(answer.body.as_ref(), SUCCESS.as_bytes());
    let error = run(&s, json!({"decision_picker": "NO_MATCH"})).await.0.unwrap_err();
    assert_eq!(error.status, 404);
    assert_eq!(
        serde_json::from_slice::<Value>(&error.body()).unwrap(),
        json!({"error": "Failed to process request", "cause": "None of the routes matched with the switch condition"})
    );
}

#[tokio::test]
async fn kserve_switch_sample_conditions_match_as_gjson_does() {
    let s = spec(
        "    root:\n      routerType: Switch\n      steps:\n      - serviceUrl: http://single-1.default.example.com/switch\n        condition: \"[@this].#(source==client)\"\n      - serviceUrl: http://single-2.default.example.com/switch\n        condition: \"instances.#(intval>10)\"\n      - serviceUrl: http://single-3.default.example.com/switch\n        condition: \"instances.#(strval%*red-server*)\"\n",
    );
    for (input, want) in [
        (json!({"source": "client", "instances": []}), "single-1"),
        (json!({"instances": [{"intval": 3}, {"intval": 11}]}), "single-2"),
        (json!({"instances": [{"strval": "a-red-server-b"}]}), "single-3"),
    ] {
        let (_, calls) = run(&s, input.clone()).await;
        assert!(calls[0].1.contains(want), "{input} went to {}", calls[0].1);
    }
    let (answer, calls) = run(&s, json!({"instances": [{"intval": 10}]})).await;
    assert_eq!((answer.unwrap_err().status, calls.len()), (404, 0));
}

#[tokio::test]
async fn kserve_scenarios_5_and_6_a_switch_node_inside_a_sequence() {
    let nodes = |dep: &str| {
        format!(
            "    root:\n      routerType: Sequence\n      steps:\n      - name: rootStep1\n        nodeName: node1\n        dependency: {dep}\n      - name: rootStep2\n        serviceName: success\n    node1:\n      routerType: Switch\n      steps:\n        - name: node1Step1\n          serviceName: error\n          condition: \"[@this].#(decision_picker==ERROR)\"\n          dependency: {dep}\n"
        )
    };
    let answer = run(&spec(&nodes("Soft")), error_picker()).await.0.unwrap();
    assert_eq!(answer.body.as_ref(), SUCCESS.as_bytes(), "scenario 5: the soft failure is passed over");
    let answer = run(&spec(&nodes("Hard")), error_picker()).await.0.unwrap();
    assert_eq!((answer.status, json_of(&answer)), (404, json!({"detail": "Intentional 404 code"})), "scenario 6");
    // A switch below that matches nothing fails its parent with 500, as KServe's does.
    let error = run(&spec(&nodes("Soft")), success_picker()).await.0.unwrap_err();
    assert_eq!(error.status, 500);
    assert!(error.cause.starts_with("step root.rootStep1: None of the routes matched"), "{}", error.cause);
}

#[tokio::test]
async fn kserve_scenarios_7_and_8_ensembles_merge_soft_failures_and_stop_at_a_hard_one() {
    let s = spec(
        "    root:\n      routerType: Ensemble\n      steps:\n      - name: rootStep1\n        serviceName: success\n      - name: rootStep2\n        serviceName: error\n",
    );
    let answer = run(&s, success_picker()).await.0.unwrap();
    assert_eq!(
        (answer.status, json_of(&answer)),
        (
            200,
            json!({"rootStep1": {"predictions": [{"message": "SUCCESS"}]}, "rootStep2": {"detail": "Intentional 404 code"}})
        )
    );
    let s = spec(
        "    root:\n      routerType: Ensemble\n      steps:\n      - name: rootStep1\n        serviceName: error\n        dependency: Hard\n      - name: rootStep2\n        serviceName: success\n      - name: rootStep3\n        serviceName: success\n",
    );
    let (answer, calls) = run(&s, success_picker()).await;
    let answer = answer.unwrap();
    assert_eq!((answer.status, json_of(&answer)), (404, json!({"detail": "Intentional 404 code"})));
    assert_eq!(calls.len(), 3, "an ensemble calls every step at once");
}

#[tokio::test]
async fn ensemble_keys_steps_without_a_name_by_index_and_refuses_an_answer_that_is_no_object() {
    let s = spec(
        "    root:\n      routerType: Ensemble\n      steps:\n      - serviceName: success\n      - serviceName: echo\n",
    );
    let answer = run(&s, json!({"x": 1})).await.0.unwrap();
    assert_eq!(json_of(&answer), json!({"0": {"predictions": [{"message": "SUCCESS"}]}, "1": {"x": 1}}));
    let s = spec("    root:\n      routerType: Ensemble\n      steps:\n      - serviceName: text\n        name: t\n");
    let error = run(&s, json!({})).await.0.unwrap_err();
    assert_eq!(error.status, 500);
    assert!(error.cause.contains("root.t"), "{}", error.cause);
}

#[tokio::test]
async fn kserve_scenarios_9_and_10_a_splitter_of_one_step_inside_a_sequence() {
    let nodes = |dep: &str| {
        format!(
            "    root:\n      routerType: Sequence\n      steps:\n      - name: rootStep1\n        nodeName: node1\n        dependency: {dep}\n      - name: rootStep2\n        serviceName: success\n    node1:\n      routerType: Splitter\n      steps:\n        - name: node1Step1\n          weight: 100\n          serviceName: error\n          condition: \"[@this].#(decision_picker==ERROR)\"\n          dependency: {dep}\n"
        )
    };
    let iris = json!({"instances": [[6.8, 2.8, 4.8, 1.4], [6.0, 3.4, 4.5, 1.6]]});
    let answer = run(&spec(&nodes("Soft")), iris.clone()).await.0.unwrap();
    assert_eq!(answer.body.as_ref(), SUCCESS.as_bytes(), "scenario 9: the condition is not a Splitter's business");
    let answer = run(&spec(&nodes("Hard")), iris).await.0.unwrap();
    assert_eq!(answer.status, 404, "scenario 10");
}

#[tokio::test]
async fn splitter_picks_by_cumulative_weight() {
    let s = spec(
        "    root:\n      routerType: Splitter\n      steps:\n      - {serviceName: success, weight: 20}\n      - {serviceName: echo, weight: 80}\n",
    );
    for (point, want) in [(0, "success"), (19, "success"), (20, "echo"), (99, "echo")] {
        let (_, calls) = run_at(&s, json!({}), point).await;
        assert_eq!(calls[0].1, want, "point {point}");
    }
}

#[tokio::test]
async fn a_sequence_condition_is_read_in_the_previous_answer_and_stops_it_when_absent() {
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: success\n      - serviceName: echo\n        condition: predictions.0.message\n      - serviceName: add-one\n        condition: predictions.0.missing\n",
    );
    let (answer, calls) = run(&s, json!({"instances": [1]})).await;
    assert_eq!(json_of(&answer.unwrap()), json!({"instances": [1]}), "echo ran; add-one's condition did not hold");
    assert_eq!(calls.len(), 2);
    // A condition on the first step reads an empty answer: KServe's 500 "invalid response".
    let s =
        spec("    root:\n      routerType: Sequence\n      steps:\n      - serviceName: echo\n        condition: x\n");
    assert_eq!(run(&s, json!({"x": 1})).await.0.unwrap_err().cause, "invalid response");
}

#[tokio::test]
async fn a_call_that_fails_is_a_500_naming_the_step() {
    let s = spec(
        "    root:\n      routerType: Sequence\n      steps:\n      - serviceName: success\n      - serviceName: down\n        name: last\n",
    );
    let error = run(&s, json!({})).await.0.unwrap_err();
    assert_eq!((error.status, error.cause.as_str()), (500, "step root.last: cannot connect: refused"));
}

#[test]
fn the_steps_header_gives_each_steps_time_and_cold_start() {
    let step = |index, name: Option<&str>| StepId { node: "root".into(), index, name: name.map(str::to_owned) };
    let header = steps_header(&[
        StepTiming {
            step: step(0, None),
            target: "a".into(),
            status: 200,
            took: Duration::from_micros(1500),
            cold: Some(Duration::from_millis(1200)),
        },
        StepTiming {
            step: step(1, Some("b")),
            target: "b;x".into(),
            status: 404,
            took: Duration::from_millis(3),
            cold: None,
        },
    ]);
    assert_eq!(header, "root[0];target=a;status=200;dur=1.5;cold=1200, root.b;target=bx;status=404;dur=3.0");
}

#[test]
fn graphs_are_found_by_host_or_serving_path() {
    let route = GraphRoute {
        namespace: "default".into(),
        name: "chain".into(),
        spec: Arc::new(InferenceGraphSpec::default()),
        service_paths: Default::default(),
    };
    let table = GraphTable::new("example.com", vec![route], &["Authorization".into(), "X-.*-Id".into(), "(".into()]);
    assert!(table.resolve("chain.default.example.com:8080", "/").is_some());
    assert!(table.resolve("chain.other.example.com", "/").is_none());
    assert!(table.resolve("127.0.0.1:8080", "/serving/default/chain").is_some());
    assert!(table.resolve("127.0.0.1:8080", "/serving/default/chain/v1/models/x:predict").is_some());
    assert!(table.resolve("127.0.0.1:8080", "/serving/default/chained").is_none());
    assert!(table.propagates(&crate::proxy::graph::canonical("authorization")));
    assert!(table.propagates(&crate::proxy::graph::canonical("x-request-id")));
    assert!(!table.propagates(&crate::proxy::graph::canonical("cookie")));
}
