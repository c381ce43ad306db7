//! Messages encoded by prost (a real protobuf encoder) with the fields of KServe's and Triton's
//! request messages, read back by [`peek`] whole, in every prefix, compressed, malformed and past
//! the limit.

use prost::Message;

use super::*;

/// `ModelInferRequest`'s leading fields and its raw contents (field 7).
#[derive(Clone, PartialEq, prost::Message)]
struct ModelInferRequest {
    #[prost(string, tag = "1")]
    model_name: String,
    #[prost(string, tag = "2")]
    model_version: String,
    #[prost(string, tag = "3")]
    id: String,
    #[prost(message, repeated, tag = "5")]
    inputs: Vec<InferInputTensor>,
    #[prost(bytes = "vec", repeated, tag = "7")]
    raw_input_contents: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct InferInputTensor {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    datatype: String,
    #[prost(int64, repeated, tag = "3")]
    shape: Vec<i64>,
}

/// `ModelReadyRequest`, `ModelMetadataRequest`, `ModelConfigRequest`, `ModelStatisticsRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct NamedRequest {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    version: String,
}

/// `RepositoryModelLoadRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct RepositoryModelLoadRequest {
    #[prost(string, tag = "1")]
    repository_name: String,
    #[prost(string, tag = "2")]
    model_name: String,
}

/// A message with only field 3 (bytes).
#[derive(Clone, PartialEq, prost::Message)]
struct Blob {
    #[prost(bytes = "vec", tag = "3")]
    blob: Vec<u8>,
}

/// A message whose field 3 comes before the name in field 1, as no client writes it: two encoded
/// messages one after the other are one message with the fields of both.
fn late_name(blob: usize, name: &str) -> Vec<u8> {
    let mut message = Blob { blob: vec![7; blob] }.encode_to_vec();
    message.extend(NamedRequest { name: name.to_owned(), version: String::new() }.encode_to_vec());
    frame_bytes(&message)
}

/// Raw message bytes as one gRPC message.
fn frame_bytes(message: &[u8]) -> Vec<u8> {
    let mut frame = vec![0];
    frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
    frame.extend_from_slice(message);
    frame
}

/// `message` as one gRPC message: flag 0, big-endian length, bytes.
fn framed(message: &impl Message) -> Vec<u8> {
    frame_bytes(&message.encode_to_vec())
}

fn infer(name: &str) -> ModelInferRequest {
    ModelInferRequest {
        model_name: name.to_owned(),
        model_version: "1".to_owned(),
        id: "request-7".to_owned(),
        inputs: vec![InferInputTensor { name: "input".into(), datatype: "FP32".into(), shape: vec![8, 4] }],
        raw_input_contents: vec![vec![0x41; 128]],
    }
}

#[test]
fn each_method_of_the_service_names_its_model_field_or_is_answered_or_refused() {
    for name in ["ModelInfer", "ModelStreamInfer", "ModelReady", "ModelMetadata", "ModelConfig", "ModelStatistics"] {
        assert_eq!(method(&format!("/{SERVICE}/{name}")), Some((name, Method::Model(1))));
    }
    for name in ["RepositoryModelLoad", "RepositoryModelUnload", "TraceSetting"] {
        assert_eq!(method(&format!("/{SERVICE}/{name}")), Some((name, Method::Model(2))));
    }
    assert_eq!(method(&format!("/{SERVICE}/ServerLive")), Some(("ServerLive", Method::ServerLive)));
    assert_eq!(method(&format!("/{SERVICE}/ServerReady")), Some(("ServerReady", Method::ServerReady)));
    assert_eq!(method(&format!("/{SERVICE}/ServerMetadata")), Some(("ServerMetadata", Method::ServerMetadata)));
    assert_eq!(method(&format!("/{SERVICE}/RepositoryIndex")), Some(("RepositoryIndex", Method::Unroutable)));
    for other in ["/v2/models/iris/infer", "/grpc.health.v1.Health/Check", "/inference.GRPCInferenceService/", "/"] {
        assert_eq!(method(other), None, "{other}");
    }
}

#[test]
fn the_model_name_is_read_from_each_request_kind() {
    assert_eq!(peek(&framed(&infer("iris")), 1, true), Peek::Found("iris".into()));
    let ready = NamedRequest { name: "mnist".into(), version: "2".into() };
    assert_eq!(peek(&framed(&ready), 1, true), Peek::Found("mnist".into()));
    let load = RepositoryModelLoadRequest { repository_name: "models".into(), model_name: "resnet".into() };
    assert_eq!(peek(&framed(&load), 2, true), Peek::Found("resnet".into()));
    assert_eq!(
        peek(&late_name(300, "late"), 1, true),
        Peek::Found("late".into()),
        "fields before the name are skipped"
    );
}

#[test]
fn a_message_without_the_field_names_no_model() {
    // proto3 leaves an empty string out: the encoded message has no field 1.
    let unnamed = NamedRequest { name: String::new(), version: "1".into() };
    assert_eq!(peek(&framed(&unnamed), 1, false), Peek::Absent);
    assert_eq!(peek(&[0, 0, 0, 0, 0], 1, false), Peek::Absent, "an empty message");
}

#[test]
fn each_prefix_asks_for_more_until_the_name_is_whole_and_then_finds_it() {
    let frame = framed(&infer("a-model-with-a-long-name"));
    let name_end = 5 + 2 + "a-model-with-a-long-name".len();
    for cut in 0..frame.len() {
        let expected = if cut < name_end { Peek::NeedMore } else { Peek::Found("a-model-with-a-long-name".into()) };
        assert_eq!(peek(&frame[..cut], 1, false), expected, "cut at {cut}");
    }
}

#[test]
fn a_body_that_ends_before_the_name_is_refused() {
    let frame = framed(&infer("iris"));
    assert_eq!(peek(&frame[..3], 1, true), Peek::Invalid(PeekError::Ended));
    assert_eq!(peek(&[], 1, true), Peek::Invalid(PeekError::Ended));
}

#[test]
fn compressed_and_badly_prefixed_messages_are_refused() {
    let mut frame = framed(&infer("iris"));
    frame[0] = 1;
    assert_eq!(peek(&frame, 1, false), Peek::Invalid(PeekError::Compressed));
    frame[0] = 7;
    assert_eq!(peek(&frame, 1, false), Peek::Invalid(PeekError::BadPrefix(7)));
}

#[test]
fn malformed_protobuf_is_refused_with_what_is_wrong() {
    let malformed = |message: &[u8]| match peek(&frame_bytes(message), 1, false) {
        Peek::Invalid(PeekError::Malformed(why)) => why,
        other => panic!("{message:?}: {other:?}"),
    };
    assert!(malformed(&[0x08, 0x01]).contains("not a string"), "field 1 as a varint");
    assert!(malformed(&[0x0b]).contains("group"), "field 1 as a group");
    assert!(malformed(&[0x00]).contains("field number"), "field 0");
    assert!(malformed(&[0x12, 0x05, b'a']).contains("past the message"), "a length past the message's end");
    assert!(malformed(&[0x0a, 0x05, b'a']).contains("past the message"), "the name past the message's end");
    let over_long: Vec<u8> = std::iter::once(0x18).chain([0xff; 11]).collect();
    assert!(malformed(&over_long).contains("ten bytes"), "an over-long varint");
    assert_eq!(peek(&frame_bytes(&[0x0a, 0x02, 0xff, 0xfe]), 1, false), Peek::Invalid(PeekError::NotUtf8));
}

#[test]
fn a_name_past_the_limit_is_refused_once_the_limit_is_read() {
    let frame = late_name(PEEK_LIMIT, "late");
    assert_eq!(peek(&frame[..PEEK_LIMIT - 1], 1, false), Peek::NeedMore);
    assert_eq!(peek(&frame[..PEEK_LIMIT], 1, false), Peek::Invalid(PeekError::TooFar));
    assert_eq!(peek(&frame, 1, true), Peek::Invalid(PeekError::TooFar), "bytes past the limit are not read");
}

mod properties {
    use proptest::prelude::*;

    use super::*;

    fn config() -> ProptestConfig {
        ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() }
    }

    fn request() -> impl Strategy<Value = ModelInferRequest> {
        (
            "[a-zA-Z0-9_.-]{0,40}|\\PC{0,10}",
            "[0-9]{0,3}",
            ".{0,20}",
            prop::collection::vec(("[a-z]{1,8}", prop::collection::vec(-1i64..64, 0..4)), 0..3),
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..3),
        )
            .prop_map(|(model_name, model_version, id, inputs, raw_input_contents)| ModelInferRequest {
                model_name,
                model_version,
                id,
                inputs: inputs
                    .into_iter()
                    .map(|(name, shape)| InferInputTensor { name, datatype: "FP32".into(), shape })
                    .collect(),
                raw_input_contents,
            })
    }

    proptest! {
        #![proptest_config(config())]

        /// Any request prost encodes, cut anywhere: a prefix either needs more or already has
        /// the name prost wrote, and the whole frame (with more messages behind it) has it.
        #[test]
        fn any_encoded_request_gives_back_its_name(request in request(), cut in any::<prop::sample::Index>()) {
            let mut frame = framed(&request);
            let whole = frame.len();
            let expected = if request.model_name.is_empty() { Peek::Absent } else { Peek::Found(request.model_name.clone()) };
            let cut = cut.index(whole + 1);
            let got = peek(&frame[..cut], 1, false);
            prop_assert!(got == Peek::NeedMore || got == expected, "cut {cut} of {whole}: {got:?}");
            frame.extend(framed(&infer("the-second-message")));
            prop_assert_eq!(peek(&frame, 1, false), expected);
        }

        /// Any bytes: an answer without a panic, and more is asked for only below the limit.
        #[test]
        fn any_bytes_get_an_answer_within_the_limit(
            body in prop::collection::vec(any::<u8>(), 0..(PEEK_LIMIT + 64)),
            field in 1u32..4,
            ended in any::<bool>(),
        ) {
            let got = peek(&body, field, ended);
            if got == Peek::NeedMore {
                prop_assert!(body.len() < PEEK_LIMIT && !ended, "{} bytes", body.len());
            }
        }

        /// Once found, a name stays found as more bytes arrive.
        #[test]
        fn a_found_name_stays_found(request in request(), extra in prop::collection::vec(any::<u8>(), 0..64)) {
            let mut frame = framed(&request);
            let found = peek(&frame, 1, false);
            frame.extend(extra);
            if matches!(found, Peek::Found(_)) {
                prop_assert_eq!(peek(&frame, 1, false), found);
            }
        }
    }
}
