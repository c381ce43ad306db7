//! KServe features Skiff does not have, refused by name in both modes (`skiff up`, and the
//! operator's status on a cluster) rather than kept and ignored: each entry is a field of a
//! component (`spec.predictor`, ...), of its `model` or of its `logger`, with what it is in KServe.

use crate::error::{Error, Result};
use crate::isvc::PredictorSpec;

/// A component's fields (beside `model`, `containers` and the framework shorthands).
const COMPONENT: [(&str, &str); 5] = [
    ("workerSpec", "KServe's multi-node serving (worker pods beside the head, tensor and pipeline parallelism)"),
    ("storageUris", "KServe's several storage URIs mounted in one pod"),
    ("art", "KServe's ART adversarial explainer; run an explainer as a custom container (containers)"),
    ("alibi", "KServe's Alibi explainer (gone from KServe's API since 0.15); run an explainer as a custom container"),
    ("custom", "KServe's v1alpha2 `custom` component; v1beta1 gives a custom container as containers"),
];
/// The model's fields.
const MODEL: [(&str, &str); 1] = [(
    "storage",
    "KServe's storage spec (an entry of the storage-config Secret and a path in it); give storageUri instead",
)];
/// The logger's fields.
const LOGGER: [(&str, &str); 2] = [
    ("storage", "KServe's logging to blob storage; Skiff sends the CloudEvents to logger.url"),
    ("metadataHeaders", "KServe's copying of request headers into the logged events"),
];

/// The first field of `p` (at `at`) that names a KServe feature Skiff lacks.
pub(super) fn check(at: &str, p: &PredictorSpec) -> Result<()> {
    let found = COMPONENT
        .iter()
        .find(|(key, _)| p.other.contains_key(*key))
        .map(|(key, what)| (format!("{at}.{key}"), what))
        .or_else(|| {
            let model = p.model.as_ref()?;
            MODEL.iter().find(|(key, _)| model.other.contains_key(*key)).map(|(k, w)| (format!("{at}.model.{k}"), w))
        })
        .or_else(|| {
            let logger = p.logger.as_ref()?;
            LOGGER.iter().find(|(key, _)| logger.other.contains_key(*key)).map(|(k, w)| (format!("{at}.logger.{k}"), w))
        });
    match found {
        Some((field, what)) => Err(Error::invalid(field, format!("Skiff does not have {what}"))),
        None => Ok(()),
    }
}
