//! Triton's messages in protobuf's JSON mapping, as Triton's HTTP endpoints write them: proto
//! field names, every field without presence written even at its default, enums by name, and
//! 64-bit integers as numbers (Triton turns protobuf's strings back into numbers). The message is
//! read through the descriptors the build compiled ([`crate::proto::pool`]).

use prost::Name;
use prost_reflect::{DynamicMessage, SerializeOptions};
use serde_json::Value;

/// `message` as Triton's HTTP endpoint writes it.
pub fn to_json<M: prost::Message + Name>(message: &M) -> Value {
    let descriptor =
        crate::proto::pool().get_message_by_name(&M::full_name()).expect("every generated message is in the pool");
    let dynamic = DynamicMessage::decode(descriptor, message.encode_to_vec().as_slice())
        .expect("a message decodes with its own descriptor");
    let options =
        SerializeOptions::new().skip_default_fields(false).use_proto_field_name(true).stringify_64_bit_integers(false);
    dynamic.serialize_with_options(serde_json::value::Serializer, &options).expect("protobuf JSON is valid JSON")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::proto::{InferStatistics, ModelInput, ModelStatistics, StatisticDuration};

    #[test]
    fn fields_keep_proto_names_enums_their_names_and_integers_stay_numbers() {
        let input = ModelInput { name: "input".into(), data_type: 11, dims: vec![4], ..Default::default() };
        assert_eq!(
            to_json(&input),
            json!({
                "name": "input", "data_type": "TYPE_FP32", "format": "FORMAT_NONE", "dims": [4],
                "is_shape_tensor": false, "allow_ragged_batch": false, "optional": false,
                "is_non_linear_format_io": false,
            })
        );
    }

    #[test]
    fn statistics_write_uint64_as_numbers() {
        let stats = ModelStatistics {
            name: "m".into(),
            version: "1".into(),
            inference_count: u64::MAX,
            inference_stats: Some(InferStatistics {
                success: Some(StatisticDuration { count: 1, ns: 5 }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let written = to_json(&stats);
        assert_eq!(written["inference_count"], json!(u64::MAX));
        assert_eq!(written["last_inference"], json!(0));
        assert_eq!(written["inference_stats"]["success"], json!({"count": 1, "ns": 5}));
        assert_eq!(written["batch_stats"], json!([]));
    }
}
