//! A model's Triton configuration from its graph's signature and how it is served, as Triton's
//! ONNX Runtime backend completes one: a leading open dimension on every input and output is the
//! batch dimension (then `max_batch_size` > 0 and the dims leave it out), otherwise
//! `max_batch_size` is 0 and the dims are the full shapes. A tensor left with no dims is `[1]`
//! reshaped to `[]`, as Triton writes it.

use crate::app::PLATFORM;
use crate::model::{MODEL_FILE, ModelSpec, Serving, TensorSpec};
use crate::proto::model_instance_group::Kind;
use crate::proto::model_version_policy::{Latest, PolicyChoice};
use crate::proto::{
    DataType, ModelConfig, ModelDynamicBatching, ModelInput, ModelInstanceGroup, ModelOutput, ModelTensorReshape,
    ModelVersionPolicy, model_config::SchedulingChoice,
};
use crate::tensor::Datatype;

/// The backend a configuration names.
pub const BACKEND: &str = "onnxruntime";

/// The configuration Triton would report for `spec` served as `serving`.
pub fn model_config(spec: &ModelSpec, serving: &Serving) -> ModelConfig {
    let batched = spec.batchable();
    let skip = usize::from(batched);
    let dims = |t: &TensorSpec| -> (Vec<i64>, Option<ModelTensorReshape>) {
        match &t.shape[skip.min(t.shape.len())..] {
            [] => (vec![1], Some(ModelTensorReshape { shape: vec![] })),
            dims => (dims.to_vec(), None),
        }
    };
    let input = spec
        .inputs
        .iter()
        .map(|t| {
            let (dims, reshape) = dims(t);
            ModelInput {
                name: t.name.clone(),
                data_type: data_type(t.datatype) as i32,
                dims,
                reshape,
                ..Default::default()
            }
        })
        .collect();
    let output = spec
        .outputs
        .iter()
        .map(|t| {
            let (dims, reshape) = dims(t);
            ModelOutput {
                name: t.name.clone(),
                data_type: data_type(t.datatype) as i32,
                dims,
                reshape,
                ..Default::default()
            }
        })
        .collect();
    let scheduling_choice = serving.batching.filter(|_| batched).map(|b| {
        SchedulingChoice::DynamicBatching(ModelDynamicBatching {
            max_queue_delay_microseconds: u64::try_from(b.max_latency.as_micros()).unwrap_or(u64::MAX),
            ..Default::default()
        })
    });
    let max_batch_size = match serving.batching {
        Some(b) if batched => b.max_batch_size,
        _ if batched => serving.max_batch_size,
        _ => 0,
    };
    ModelConfig {
        name: spec.name.clone(),
        platform: PLATFORM.to_owned(),
        backend: BACKEND.to_owned(),
        version_policy: Some(ModelVersionPolicy {
            policy_choice: Some(PolicyChoice::Latest(Latest { num_versions: 1 })),
        }),
        max_batch_size: i32::try_from(max_batch_size).unwrap_or(i32::MAX),
        input,
        output,
        scheduling_choice,
        instance_group: vec![ModelInstanceGroup {
            name: spec.name.clone(),
            kind: Kind::Cpu as i32,
            count: i32::try_from(serving.instances).unwrap_or(i32::MAX),
            ..Default::default()
        }],
        default_model_filename: MODEL_FILE.to_owned(),
        ..Default::default()
    }
}

/// Triton's name for a V2 datatype: BYTES is TYPE_STRING, the others keep their names.
pub fn data_type(datatype: Datatype) -> DataType {
    match datatype {
        Datatype::Bool => DataType::TypeBool,
        Datatype::U8 => DataType::TypeUint8,
        Datatype::U16 => DataType::TypeUint16,
        Datatype::U32 => DataType::TypeUint32,
        Datatype::U64 => DataType::TypeUint64,
        Datatype::I8 => DataType::TypeInt8,
        Datatype::I16 => DataType::TypeInt16,
        Datatype::I32 => DataType::TypeInt32,
        Datatype::I64 => DataType::TypeInt64,
        Datatype::F16 => DataType::TypeFp16,
        Datatype::F32 => DataType::TypeFp32,
        Datatype::F64 => DataType::TypeFp64,
        Datatype::Bf16 => DataType::TypeBf16,
        Datatype::Bytes => DataType::TypeString,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::BatchConfig;

    fn t(name: &str, datatype: Datatype, shape: &[i64]) -> TensorSpec {
        TensorSpec { name: name.into(), datatype, shape: shape.to_vec() }
    }

    /// Iris as skl2onnx writes it: `input` [-1, 4], `label` [-1], `probabilities` [-1, 3].
    fn iris() -> ModelSpec {
        ModelSpec {
            name: "iris".into(),
            inputs: vec![t("input", Datatype::F32, &[-1, 4])],
            outputs: vec![t("label", Datatype::I64, &[-1]), t("probabilities", Datatype::F32, &[-1, 3])],
        }
    }

    const PLAIN: Serving = Serving { instances: 2, max_batch_size: 32, batching: None };

    #[test]
    fn a_leading_open_dimension_is_the_batch() {
        let config = model_config(&iris(), &PLAIN);
        assert_eq!(
            (config.name.as_str(), config.platform.as_str(), config.backend.as_str()),
            ("iris", PLATFORM, BACKEND)
        );
        assert_eq!(config.max_batch_size, 32);
        assert_eq!(config.input[0].dims, [4]);
        assert_eq!(config.input[0].data_type, DataType::TypeFp32 as i32);
        assert_eq!(
            (config.output[0].dims.as_slice(), config.output[0].reshape.as_ref()),
            (&[1][..], Some(&ModelTensorReshape { shape: vec![] }))
        );
        assert_eq!(config.output[1].dims, [3]);
        assert_eq!(config.output[1].reshape, None);
        assert_eq!(config.scheduling_choice, None);
        assert_eq!((config.instance_group[0].count, config.instance_group[0].kind), (2, Kind::Cpu as i32));
    }

    #[test]
    fn a_fixed_first_dimension_means_no_batching_and_full_dims() {
        let mut spec = iris();
        spec.inputs[0].shape = vec![1, 4];
        let batching = Some(BatchConfig { max_batch_size: 8, max_latency: Duration::from_millis(5) });
        let config = model_config(&spec, &Serving { batching, ..PLAIN });
        assert_eq!(config.max_batch_size, 0);
        assert_eq!(config.input[0].dims, [1, 4]);
        assert_eq!(config.output[0].dims, [-1]);
        assert_eq!(config.scheduling_choice, None);
    }

    #[test]
    fn the_batcher_sets_the_size_and_dynamic_batching() {
        let batching = Some(BatchConfig { max_batch_size: 8, max_latency: Duration::from_millis(5) });
        let config = model_config(&iris(), &Serving { batching, ..PLAIN });
        assert_eq!(config.max_batch_size, 8);
        let Some(SchedulingChoice::DynamicBatching(dynamic)) = config.scheduling_choice else { panic!("no batcher") };
        assert_eq!(dynamic.max_queue_delay_microseconds, 5000);
    }

    #[test]
    fn bytes_are_triton_strings() {
        assert_eq!(data_type(Datatype::Bytes).as_str_name(), "TYPE_STRING");
        assert_eq!(data_type(Datatype::Bf16).as_str_name(), "TYPE_BF16");
        assert_eq!(data_type(Datatype::U64).as_str_name(), "TYPE_UINT64");
    }
}
