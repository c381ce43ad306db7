//! What the create form offers: the one rule of which model formats can run here, for both modes.
//! ONNX always (Skiff's embedded server), then every format an installed runtime would be chosen
//! for ([`skiff_api::runtime::supporting_runtimes`]'s test: not disabled, not ModelMesh,
//! `autoSelect: true`), when this mode can run that runtime's container (`skiff up`: its image is
//! in the image map; a cluster pulls any). Custom containers are offered where they may be created.

use std::collections::BTreeSet;

use serde::Serialize;
use skiff_api::runtime::{EMBEDDED_FORMAT, ServingRuntimeSpec};

/// What the create form may offer in a namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Offer {
    /// Model formats, `onnx` first, then by name (lower case).
    pub formats: Vec<String>,
    /// Whether custom containers (`spec.predictor.containers`) may be created.
    pub containers: bool,
}

/// The formats the form offers, given the installed runtimes (the namespace's, then the cluster's)
/// and whether this mode can run a runtime's containers.
pub fn runnable_formats<'a>(
    runtimes: impl IntoIterator<Item = &'a ServingRuntimeSpec>,
    can_run: impl Fn(&ServingRuntimeSpec) -> bool,
) -> Vec<String> {
    let offered: BTreeSet<String> = runtimes
        .into_iter()
        .filter(|r| !r.is_disabled() && !r.is_multi_model() && can_run(r))
        .flat_map(|r| r.supported_model_formats.iter().filter(|f| f.is_auto_select()))
        .map(|f| f.name.to_ascii_lowercase())
        .filter(|name| name != EMBEDDED_FORMAT)
        .collect();
    std::iter::once(EMBEDDED_FORMAT.to_owned()).chain(offered).collect()
}

#[cfg(test)]
mod tests {
    use skiff_api::runtime::SupportedModelFormat;

    use super::*;

    fn runtime(formats: &[(&str, bool)]) -> ServingRuntimeSpec {
        ServingRuntimeSpec {
            supported_model_formats: formats
                .iter()
                .map(|(name, auto)| SupportedModelFormat {
                    name: (*name).into(),
                    auto_select: Some(*auto),
                    ..SupportedModelFormat::default()
                })
                .collect(),
            ..ServingRuntimeSpec::default()
        }
    }

    #[test]
    fn onnx_and_the_auto_selected_formats_of_runtimes_that_can_run() {
        let sklearn = runtime(&[("sklearn", true), ("SKLearn", true)]);
        let triton = runtime(&[("tensorflow", true), ("onnx", true), ("pytorch", false)]);
        let disabled = ServingRuntimeSpec { disabled: Some(true), ..runtime(&[("lightgbm", true)]) };
        let mesh = ServingRuntimeSpec { multi_model: Some(true), ..runtime(&[("xgboost", true)]) };
        let all = [&sklearn, &triton, &disabled, &mesh];
        assert_eq!(runnable_formats(all, |_| true), ["onnx", "sklearn", "tensorflow"]);
        let runnable = |r: &ServingRuntimeSpec| !r.supported_model_formats.iter().any(|f| f.name == "tensorflow");
        assert_eq!(runnable_formats(all, runnable), ["onnx", "sklearn"]);
        assert_eq!(runnable_formats([], |_| true), ["onnx"]);
    }
}
