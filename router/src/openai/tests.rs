//! Bodies written by serde_json (a real JSON encoder) and as OpenAI's Python client orders them,
//! read back by [`ModelField`] whole, in every prefix, in random pieces, malformed and past the
//! limit; the endpoints; the model list.

use serde_json::{Value, json};

use super::*;

/// What `ModelField` answers for `body` read at once.
fn peek_whole(body: &[u8], ended: bool) -> Peek<JsonError> {
    ModelField::default().peek(body, ended)
}

/// A chat completion as OpenAI's Python client writes it: `messages` first, then `model`.
fn chat(model: &str, prompt: &str) -> String {
    format!(
        r#"{{"messages": [{{"role": "system", "content": "Be brief. {{\"model\": \"decoy\"}}"}}, {{"role": "user", "content": {}}}], "model": {}, "max_tokens": 16, "stream": true, "stream_options": {{"include_usage": true}}}}"#,
        Value::from(prompt),
        Value::from(model)
    )
}

#[test]
fn the_endpoints_are_kserves_and_openais_paths() {
    for prefix in ["/openai/v1", "/v1"] {
        for path in ["completions", "chat/completions", "embeddings", "rerank"] {
            let path = format!("{prefix}/{path}");
            assert_eq!(endpoint(&http::Method::POST, &path), Some(Endpoint::ByModel), "{path}");
            assert_eq!(endpoint(&http::Method::POST, &format!("{path}?x=1")), Some(Endpoint::ByModel), "{path}");
            assert_eq!(endpoint(&http::Method::GET, &path), None, "GET {path}");
        }
        assert_eq!(endpoint(&http::Method::GET, &format!("{prefix}/models")), Some(Endpoint::Models));
        assert_eq!(endpoint(&http::Method::POST, &format!("{prefix}/models")), None);
    }
    for other in ["/v1/models/iris", "/v1/models/iris:predict", "/v2/models/iris/infer", "/openai/v2/completions", "/"]
    {
        assert_eq!(endpoint(&http::Method::POST, other), None, "{other}");
        assert_eq!(endpoint(&http::Method::GET, other), None, "{other}");
    }
}

#[test]
fn the_model_is_read_after_the_messages_and_any_values_before_it() {
    assert_eq!(peek_whole(chat("llama", "Hi").as_bytes(), true), Peek::Found("llama".into()));
    let body = json!({"input": ["a", "b"], "model": "bge", "encoding_format": "float"}).to_string();
    assert_eq!(peek_whole(body.as_bytes(), false), Peek::Found("bge".into()), "{body}");
    let scalars = r#"{ "a" : -1.5e3 , "b":true,"c" :null,"d":false, "e":[1,[2,{"model":"x"}]],"model" : "m" }"#;
    assert_eq!(peek_whole(scalars.as_bytes(), false), Peek::Found("m".into()));
    let pretty = serde_json::to_string_pretty(&json!({"messages": [{"role": "user"}], "model": "qwen"})).unwrap();
    assert_eq!(peek_whole(pretty.as_bytes(), false), Peek::Found("qwen".into()), "{pretty}");
}

#[test]
fn escapes_are_decoded_in_the_field_name_and_the_model() {
    let body = r#"{"mod\u0065l": "a\"b\\c\u00e9", "model": "second"}"#;
    assert_eq!(peek_whole(body.as_bytes(), false), Peek::Found("a\"b\\cé".into()), "the first field counts");
    let body = r#"{"prompt": "say \"model\": \"x\" \\", "model": "real"}"#;
    assert_eq!(peek_whole(body.as_bytes(), false), Peek::Found("real".into()), "quotes inside strings");
}

#[test]
fn an_object_without_the_field_names_no_model() {
    assert_eq!(peek_whole(b"{}", false), Peek::Absent);
    assert_eq!(peek_whole(br#" { "prompt": "hi", "options": {"model": "nested"} } "#, false), Peek::Absent);
}

#[test]
fn each_prefix_asks_for_more_until_the_model_is_whole_and_then_finds_it() {
    let body = chat("a-model-with-a-long-name", "Tell me a story");
    let end = body.find(r#""a-model-with-a-long-name""#).unwrap() + r#""a-model-with-a-long-name""#.len();
    for cut in 0..=body.len() {
        let expected = if cut < end { Peek::NeedMore } else { Peek::Found("a-model-with-a-long-name".into()) };
        assert_eq!(peek_whole(&body.as_bytes()[..cut], false), expected, "cut at {cut}");
    }
    let mut field = ModelField::default();
    for grow in 0..=body.len() {
        let expected = if grow < end { Peek::NeedMore } else { Peek::Found("a-model-with-a-long-name".into()) };
        assert_eq!(field.peek(&body.as_bytes()[..grow], false), expected, "one byte more each time, read {grow}");
    }
}

#[test]
fn bodies_that_are_not_json_objects_or_not_valid_are_refused() {
    assert_eq!(peek_whole(b"", true), Peek::Invalid(JsonError::Empty));
    assert_eq!(peek_whole(b"  \n", true), Peek::Invalid(JsonError::Empty));
    assert_eq!(peek_whole(b"[1, 2]", false), Peek::Invalid(JsonError::NotObject));
    assert_eq!(peek_whole(b"model=llama", false), Peek::Invalid(JsonError::NotObject));
    assert_eq!(peek_whole(br#"{"messages": [], "model": 7}"#, false), Peek::Invalid(JsonError::NotString));
    assert_eq!(peek_whole(br#"{"model": ["llama"]}"#, false), Peek::Invalid(JsonError::NotString));
    assert_eq!(peek_whole(br#"{"messages": [], "mo"#, true), Peek::Invalid(JsonError::Ended));
    let malformed = |body: &[u8]| match peek_whole(body, false) {
        Peek::Invalid(JsonError::Malformed(why)) => why,
        other => panic!("{}: {other:?}", String::from_utf8_lossy(body)),
    };
    assert!(malformed(b"{model: 1}").contains("field name"));
    assert!(malformed(br#"{"a" 1}"#).contains("colon"));
    assert!(malformed(br#"{"a": }"#).contains("value"));
    assert!(malformed(br#"{"a": 1 "b": 2}"#).contains("comma"));
    assert!(malformed(br#"{"a": 1,}"#).contains("field name"), "a trailing comma");
    assert!(malformed(br#"{"model": "bad \q escape"}"#).contains("escape"));
    assert!(malformed(b"{\"model\": \"\xff\"}").contains("UTF-8"));
}

#[test]
fn a_model_past_the_limit_is_refused_once_the_limit_is_read() {
    let body = chat("late", &"x".repeat(PEEK_LIMIT));
    assert_eq!(peek_whole(&body.as_bytes()[..PEEK_LIMIT - 1], false), Peek::NeedMore);
    assert_eq!(peek_whole(&body.as_bytes()[..PEEK_LIMIT], false), Peek::Invalid(JsonError::TooFar));
    assert_eq!(
        peek_whole(body.as_bytes(), true),
        Peek::Invalid(JsonError::TooFar),
        "bytes past the limit are not read"
    );
    let within = chat("early", &"x".repeat(PEEK_LIMIT - 1000));
    assert_eq!(peek_whole(within.as_bytes(), true), Peek::Found("early".into()), "a long prompt within the limit");
}

#[test]
fn the_model_list_holds_each_service_reached_by_name_once() {
    let route = |namespace: &str, name: &str| ServiceRoute {
        namespace: namespace.into(),
        name: name.into(),
        ..ServiceRoute::default()
    };
    let table = RouteTable::new(
        "example.com",
        vec![
            route("default", "llama"),
            route("team-a", "llama"),
            route("team-a", "qwen"),
            route("team-b", "shared"),
            route("team-c", "shared"),
        ],
    );
    let list = models(&table, 1_700_000_000);
    assert_eq!(
        list,
        json!({"object": "list", "data": [
            {"id": "llama", "object": "model", "created": 1_700_000_000u64, "owned_by": "default"},
            {"id": "qwen", "object": "model", "created": 1_700_000_000u64, "owned_by": "team-a"},
        ]}),
        "`default` wins a shared name; a name in two other namespaces reaches neither"
    );
    assert_eq!(models(&RouteTable::new("example.com", vec![]), 0), json!({"object": "list", "data": []}));
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn config() -> ProptestConfig {
        ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
    }

    /// Any JSON value, nested a few levels.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            "\\PC{0,12}|[\"\\\\{}\\[\\]:,]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("\\PC{0,6}|model", inner, 0..4)
                    .prop_map(|map| Value::Object(map.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(config())]

        /// Whatever fields come before it, however the encoder spaces them and however the body is
        /// cut into pieces, the top-level `"model"` is found.
        #[test]
        fn the_top_level_model_is_found_in_any_object_cut_anyhow(
            before in prop::collection::vec(("[a-z_]{1,10}", value()), 0..5),
            model in "\\PC{0,30}",
            after in prop::collection::vec(("[a-z_]{1,10}", value()), 0..3),
            pretty in any::<bool>(),
            cuts in prop::collection::vec(0usize..4096, 0..6),
        ) {
            let field = |(name, value): &(String, Value)| {
                format!("{}:{}", Value::from(format!("x{name}")), value)
            };
            let mut fields: Vec<String> = before.iter().map(field).collect();
            fields.push(format!("\"model\":{}", Value::from(model.clone())));
            fields.extend(after.iter().map(field));
            let compact = format!("{{{}}}", fields.join(","));
            let body = if pretty {
                serde_json::to_string_pretty(&serde_json::from_str::<Value>(&compact).unwrap()).unwrap()
            } else {
                compact
            };
            // serde_json's map may sort the fields: `model` is still the only top-level one so named.
            let whole = peek_whole(body.as_bytes(), true);
            prop_assert_eq!(&whole, &Peek::Found(model.clone()));
            let mut cuts: Vec<usize> = cuts.into_iter().map(|cut| cut % (body.len() + 1)).collect();
            cuts.sort_unstable();
            let mut reader = ModelField::default();
            let mut answer = Peek::NeedMore;
            for cut in cuts.into_iter().chain([body.len()]) {
                answer = reader.peek(&body.as_bytes()[..cut], cut == body.len());
                if answer != Peek::NeedMore {
                    break;
                }
            }
            prop_assert_eq!(answer, whole);
        }

        /// Any bytes at all: an answer, never a panic, and the same one in pieces as whole.
        #[test]
        fn any_bytes_get_an_answer_and_the_same_in_pieces(body in prop::collection::vec(any::<u8>(), 0..200), cut in 0usize..200) {
            let whole = peek_whole(&body, true);
            let cut = cut.min(body.len());
            let mut reader = ModelField::default();
            let first = reader.peek(&body[..cut], false);
            let answer = if first == Peek::NeedMore { reader.peek(&body, true) } else { first };
            prop_assert_eq!(answer, whole);
        }
    }
}
