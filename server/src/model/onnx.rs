//! The ONNX Runtime adapter: load a session, read its signature, run it on [`Tensor`]s.

use std::path::Path;
use std::time::Instant;

use ort::session::Session;
use ort::session::builder::{GraphOptimizationLevel, PrepackedWeights, SessionBuilder};
use ort::value::{DynValue, Outlet, PrimitiveTensorElementType, TensorElementType, ValueType};

use super::executor::Ran;
use super::spec::{ModelSpec, TensorSpec};
use super::stats::Phases;
use crate::error::{Error, Result};
use crate::tensor::data::each;
use crate::tensor::{Datatype, Tensor, TensorData};

/// How a model's sessions are built.
#[derive(Clone, Copy)]
pub struct Build<'a> {
    /// ONNX Runtime intra-op threads per session.
    pub intra_threads: usize,
    /// The weights the model's sessions prepack, shared between them (`None`: prepacking off).
    pub prepacked: Option<&'a PrepackedWeights>,
}

fn builder(env: &ort::environment::Environment, build: Build<'_>) -> ort::Result<SessionBuilder> {
    let builder = Session::builder(env)?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(ort::Error::<()>::from)?
        .with_intra_threads(build.intra_threads)
        .map_err(ort::Error::<()>::from)?
        .with_inter_threads(1)
        .map_err(ort::Error::<()>::from)?;
    Ok(match build.prepacked {
        Some(weights) => builder.with_prepacked_weights(weights).map_err(ort::Error::<()>::from)?,
        None => builder.with_prepacking(false).map_err(ort::Error::<()>::from)?,
    })
}

/// Loads the ONNX file at `path` into a session.
pub fn load_session(env: &ort::environment::Environment, path: &Path, build: Build<'_>) -> ort::Result<Session> {
    builder(env, build)?.commit_from_file(path)
}

/// Loads an ORT format model (a cached form, [`super::compiled`]) into a session that uses
/// `bytes` in place: the graph and the initializers are read from them, not copied. The bytes
/// must outlive the session: the caller leaks them once every session of the model is built.
pub fn load_session_in_place(
    env: &ort::environment::Environment,
    bytes: &[u8],
    build: Build<'_>,
) -> ort::Result<Session> {
    builder(env, build)?
        .with_config_entry("session.load_model_format", "ORT")
        .map_err(ort::Error::<()>::from)?
        .with_config_entry("session.use_ort_model_bytes_directly", "1")
        .map_err(ort::Error::<()>::from)?
        .with_config_entry("session.use_ort_model_bytes_for_initializers", "1")
        .map_err(ort::Error::<()>::from)?
        .commit_from_memory(bytes)
}

/// Loads the ONNX file at `path` into a session that writes its optimized graph in ORT format to
/// `out` as it is built.
pub fn load_session_saving(
    env: &ort::environment::Environment,
    path: &Path,
    out: &Path,
    build: Build<'_>,
) -> ort::Result<Session> {
    builder(env, build)?
        .with_config_entry("session.save_model_format", "ORT")
        .map_err(ort::Error::<()>::from)?
        .with_optimized_model_path(out)
        .map_err(ort::Error::<()>::from)?
        .commit_from_file(path)
}

/// Reads the model's signature from the session; fails on inputs or outputs that are not tensors.
pub fn spec_of(name: &str, session: &Session) -> Result<ModelSpec, String> {
    let outlets = |outlets: &[Outlet]| outlets.iter().map(tensor_spec).collect::<Result<Vec<_>, _>>();
    Ok(ModelSpec { name: name.to_owned(), inputs: outlets(session.inputs())?, outputs: outlets(session.outputs())? })
}

fn tensor_spec(outlet: &Outlet) -> Result<TensorSpec, String> {
    match outlet.dtype() {
        ValueType::Tensor { ty, shape, .. } => Ok(TensorSpec {
            name: outlet.name().to_owned(),
            datatype: datatype_of(*ty)
                .ok_or_else(|| format!("'{}' has element type {ty:?}, which Skiff does not serve", outlet.name()))?,
            shape: shape.to_vec(),
        }),
        other => Err(format!(
            "'{}' is a {other:?}, not a tensor (for scikit-learn classifiers, convert with zipmap disabled)",
            outlet.name()
        )),
    }
}

fn datatype_of(ty: TensorElementType) -> Option<Datatype> {
    Some(match ty {
        TensorElementType::Bool => Datatype::Bool,
        TensorElementType::Uint8 => Datatype::U8,
        TensorElementType::Uint16 => Datatype::U16,
        TensorElementType::Uint32 => Datatype::U32,
        TensorElementType::Uint64 => Datatype::U64,
        TensorElementType::Int8 => Datatype::I8,
        TensorElementType::Int16 => Datatype::I16,
        TensorElementType::Int32 => Datatype::I32,
        TensorElementType::Int64 => Datatype::I64,
        TensorElementType::Float16 => Datatype::F16,
        TensorElementType::Float32 => Datatype::F32,
        TensorElementType::Float64 => Datatype::F64,
        TensorElementType::Bfloat16 => Datatype::Bf16,
        TensorElementType::String => Datatype::Bytes,
        _ => return None,
    })
}

/// Runs the session on inputs already checked against `spec` (graph order); returns every output
/// in graph order, when the run started and how long each phase took.
pub fn run(session: &mut Session, spec: &ModelSpec, inputs: Vec<Tensor>) -> Result<Ran> {
    let started = Instant::now();
    let values = inputs
        .into_iter()
        .map(|t| Ok((t.name, to_value(t.shape, t.data)?)))
        .collect::<ort::Result<Vec<(String, DynValue)>>>()
        .map_err(|e| Error::Inference(e.to_string()))?;
    let converted = Instant::now();
    let outputs = session.run(values).map_err(|e| match e.code() {
        // Everything about the request was checked before it ran, so ONNX Runtime refusing an
        // argument now means a value the model cannot take (a Gather index out of range).
        ort::ErrorCode::InvalidArgument => Error::invalid(format!("the model refused the input: {e}")),
        _ => Error::Inference(e.to_string()),
    })?;
    let ran = Instant::now();
    let tensors = spec
        .outputs
        .iter()
        .map(|out| {
            let value = outputs
                .get(&out.name)
                .ok_or_else(|| Error::Inference(format!("the runtime returned no output '{}'", out.name)))?;
            from_value(&out.name, out.datatype, value).map_err(|e| Error::Inference(e.to_string()))
        })
        .collect::<Result<Vec<_>>>()?;
    let phases = Phases { input: converted - started, infer: ran - converted, output: ran.elapsed() };
    Ok(Ran { outputs: tensors, started, phases })
}

fn to_value(shape: Vec<usize>, data: TensorData) -> ort::Result<DynValue> {
    match data {
        TensorData::Bytes(strings) => {
            Ok(ort::value::Tensor::from_string_array((shape, strings.as_slice()))?.into_dyn())
        }
        other => {
            each!([Bool, U8, U16, U32, U64, I8, I16, I32, I64, F16, F32, F64, Bf16] other, v => Ok(ort::value::Tensor::from_array((shape, v))?.into_dyn()))
        }
    }
}

fn from_value(name: &str, datatype: Datatype, value: &DynValue) -> ort::Result<Tensor> {
    fn plain<T: PrimitiveTensorElementType + Clone>(value: &DynValue) -> ort::Result<(Vec<usize>, Vec<T>)> {
        let (shape, data) = value.try_extract_tensor::<T>()?;
        Ok((shape.iter().map(|&d| d as usize).collect(), data.to_vec()))
    }
    let (shape, data) = match datatype {
        Datatype::Bool => plain(value).map(|(s, d)| (s, TensorData::Bool(d)))?,
        Datatype::U8 => plain(value).map(|(s, d)| (s, TensorData::U8(d)))?,
        Datatype::U16 => plain(value).map(|(s, d)| (s, TensorData::U16(d)))?,
        Datatype::U32 => plain(value).map(|(s, d)| (s, TensorData::U32(d)))?,
        Datatype::U64 => plain(value).map(|(s, d)| (s, TensorData::U64(d)))?,
        Datatype::I8 => plain(value).map(|(s, d)| (s, TensorData::I8(d)))?,
        Datatype::I16 => plain(value).map(|(s, d)| (s, TensorData::I16(d)))?,
        Datatype::I32 => plain(value).map(|(s, d)| (s, TensorData::I32(d)))?,
        Datatype::I64 => plain(value).map(|(s, d)| (s, TensorData::I64(d)))?,
        Datatype::F16 => plain(value).map(|(s, d)| (s, TensorData::F16(d)))?,
        Datatype::F32 => plain(value).map(|(s, d)| (s, TensorData::F32(d)))?,
        Datatype::F64 => plain(value).map(|(s, d)| (s, TensorData::F64(d)))?,
        Datatype::Bf16 => plain(value).map(|(s, d)| (s, TensorData::Bf16(d)))?,
        Datatype::Bytes => {
            let (shape, strings) = value.try_extract_strings()?;
            (shape.iter().map(|&d| d as usize).collect(), TensorData::Bytes(strings))
        }
    };
    Ok(Tensor { name: name.to_owned(), shape, data })
}
