//! What a model takes and gives, and the checks a request must pass before it reaches the runtime.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::tensor::{Datatype, Tensor};

/// One input or output of a model as the graph declares it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TensorSpec {
    /// Name in the graph.
    pub name: String,
    /// Element type.
    pub datatype: Datatype,
    /// Dimensions; `-1` where the graph leaves a dimension open.
    pub shape: Vec<i64>,
}

impl Serialize for Datatype {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl TensorSpec {
    /// True when `shape` has the same rank and agrees on every fixed dimension.
    pub fn accepts_shape(&self, shape: &[usize]) -> bool {
        shape.len() == self.shape.len()
            && self.shape.iter().zip(shape).all(|(&want, &got)| want < 0 || want as usize == got)
    }
}

/// A model's name and signature.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// Name clients use in URLs.
    pub name: String,
    /// Inputs in graph order.
    pub inputs: Vec<TensorSpec>,
    /// Outputs in graph order.
    pub outputs: Vec<TensorSpec>,
}

impl ModelSpec {
    /// Checks request tensors against the inputs: every input present once, known names, the declared
    /// datatype, a compatible shape. Returns them in graph order.
    pub fn check_inputs(&self, mut tensors: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let mut ordered = Vec::with_capacity(self.inputs.len());
        for spec in &self.inputs {
            let Some(at) = tensors.iter().position(|t| t.name == spec.name) else {
                return Err(Error::invalid(format!(
                    "missing input '{}' for model '{}' (expects {})",
                    spec.name,
                    self.name,
                    names(&self.inputs)
                )));
            };
            let tensor = tensors.swap_remove(at);
            if tensor.data.datatype() != spec.datatype {
                return Err(Error::invalid(format!(
                    "input '{}' has datatype {} but model '{}' expects {}",
                    spec.name,
                    tensor.data.datatype(),
                    self.name,
                    spec.datatype
                )));
            }
            if !spec.accepts_shape(&tensor.shape) {
                return Err(Error::invalid(format!(
                    "input '{}' has shape {:?} but model '{}' expects {:?} (-1 = any size)",
                    spec.name, tensor.shape, self.name, spec.shape
                )));
            }
            ordered.push(tensor);
        }
        if let Some(extra) = tensors.first() {
            let known = self.inputs.iter().any(|s| s.name == extra.name);
            return Err(Error::invalid(if known {
                format!("input '{}' is given more than once", extra.name)
            } else {
                format!("unknown input '{}' for model '{}' (expects {})", extra.name, self.name, names(&self.inputs))
            }));
        }
        Ok(ordered)
    }

    /// Checks requested output names; an empty list means every output.
    pub fn check_outputs(&self, requested: &[String]) -> Result<()> {
        match requested.iter().find(|name| !self.outputs.iter().any(|o| &o.name == *name)) {
            Some(name) => Err(Error::invalid(format!(
                "unknown output '{name}' for model '{}' (has {})",
                self.name,
                names(&self.outputs)
            ))),
            None => Ok(()),
        }
    }

    /// True when every input and output has an open first dimension, so requests can be stacked into a batch.
    pub fn batchable(&self) -> bool {
        self.inputs.iter().chain(&self.outputs).all(|t| t.shape.first().is_some_and(|&d| d < 0))
    }
}

fn names(specs: &[TensorSpec]) -> String {
    specs.iter().map(|s| format!("'{}'", s.name)).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::TensorData;

    fn spec() -> ModelSpec {
        let t = |name: &str, datatype, shape: &[i64]| TensorSpec { name: name.into(), datatype, shape: shape.to_vec() };
        ModelSpec {
            name: "m".into(),
            inputs: vec![t("a", Datatype::I64, &[-1, 3]), t("b", Datatype::F32, &[-1, 3])],
            outputs: vec![t("y", Datatype::F32, &[-1])],
        }
    }

    fn a(shape: &[usize]) -> Tensor {
        let n = shape.iter().product();
        Tensor { name: "a".into(), shape: shape.to_vec(), data: TensorData::I64(vec![0; n]) }
    }

    fn b() -> Tensor {
        Tensor { name: "b".into(), shape: vec![1, 3], data: TensorData::F32(vec![0.0; 3]) }
    }

    fn err(tensors: Vec<Tensor>) -> String {
        spec().check_inputs(tensors).unwrap_err().to_string()
    }

    #[test]
    fn inputs_come_back_in_graph_order() {
        let got = spec().check_inputs(vec![b(), a(&[1, 3])]).unwrap();
        assert_eq!(got.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn each_mismatch_is_named() {
        assert_eq!(err(vec![a(&[1, 3])]), "missing input 'b' for model 'm' (expects 'a', 'b')");
        assert_eq!(
            err(vec![a(&[1, 4]), b()]),
            "input 'a' has shape [1, 4] but model 'm' expects [-1, 3] (-1 = any size)"
        );
        assert_eq!(err(vec![a(&[3]), b()]), "input 'a' has shape [3] but model 'm' expects [-1, 3] (-1 = any size)");
        let mut wrong_type = b();
        wrong_type.name = "a".into();
        assert_eq!(err(vec![wrong_type, b()]), "input 'a' has datatype FP32 but model 'm' expects INT64");
        let mut unknown = b();
        unknown.name = "c".into();
        assert_eq!(err(vec![a(&[1, 3]), b(), unknown]), "unknown input 'c' for model 'm' (expects 'a', 'b')");
        assert_eq!(err(vec![a(&[1, 3]), b(), b()]), "input 'b' is given more than once");
    }

    #[test]
    fn outputs_are_checked_by_name() {
        assert!(spec().check_outputs(&[]).is_ok());
        assert!(spec().check_outputs(&["y".into()]).is_ok());
        assert_eq!(
            spec().check_outputs(&["z".into()]).unwrap_err().to_string(),
            "unknown output 'z' for model 'm' (has 'y')"
        );
    }

    #[test]
    fn batchable_needs_open_first_dimensions() {
        assert!(spec().batchable());
        let mut fixed = spec();
        fixed.outputs[0].shape = vec![1];
        assert!(!fixed.batchable());
    }
}
