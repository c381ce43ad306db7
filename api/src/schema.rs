//! The Kubernetes-specific parts of the InferenceService's OpenAPI schema that `schemars` cannot
//! derive: the fields KServe declares beside those Skiff's types read ([`known_fields`]), objects
//! that keep unknown fields, KServe's framework shorthands, and the CEL rules
//! (`x-kubernetes-validations`) that make the API server refuse a bad spec with the field named.
//! The Rust types in [`crate::isvc`] remain the one source of the fields Skiff reads, and
//! [`crate::fields`] of KServe's names; these functions only decorate the schema generated from them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, ValidationRule,
};
use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Value, json};

use crate::fields::{Child, Level};
use crate::limits::{DNS_1035, FRAMEWORKS, MAX_NAME_LENGTH, name_limit};

/// Marks an object so that the API server keeps fields the schema does not list.
const PRESERVE: &str = "x-kubernetes-preserve-unknown-fields";
/// Where CEL rules go.
const VALIDATIONS: &str = "x-kubernetes-validations";
/// KServe's ART explainer: admitted by the CRD as KServe's is, refused by validation.
const EXPLAINER_ART: &str = "art";

/// Schema of a free-form object whose fields are all kept (`transformer`, `explainer`, a framework shorthand).
pub fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object", PRESERVE: true })
}

/// Schema of a list of free-form objects (`containers`, kept as written and read by the operator).
pub fn any_object_list(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "array", "items": any_object(generator) })
}

/// Keeps the unknown fields of an object whose Rust type collects them in `other`.
pub fn preserve_unknown_fields(schema: &mut Schema) {
    schema.insert(PRESERVE.into(), true.into());
    schema.remove("additionalProperties");
}

/// `spec.predictor` (and the transformer's and explainer's, the same type): the framework
/// shorthands and the explainer's `art` become known properties, so that CEL can test for them,
/// and the cross-field rules are added. The rules admit what KServe's CRD admits (it has
/// none): at most one of `model` or a framework, beside which `containers` may stand (KServe's
/// collocation), and something to run. Validation then refuses, naming the field, what Skiff
/// cannot run ([`crate::validate`]).
pub fn predictor(schema: &mut Schema) {
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for framework in FRAMEWORKS.iter().chain([&EXPLAINER_ART]) {
            properties.insert((*framework).into(), json!({ "type": "object" }));
        }
    }
    let has = |fields: &[&str]| fields.iter().map(|f| format!("has(self.{f})")).collect::<Vec<_>>().join(", ");
    let models: Vec<&str> = ["model"].into_iter().chain(FRAMEWORKS).collect();
    let anything: Vec<&str> = models.iter().copied().chain(["containers", EXPLAINER_ART]).collect();
    let rules = json!([
        {
            "rule": format!("[{}].filter(x, x).size() <= 1 && [{}].exists(x, x)", has(&models), has(&anything)),
            "message": format!(
                "exactly one of model, containers or a framework ({}) must be set (containers may accompany model: \
                 KServe's collocation)",
                FRAMEWORKS.join(", ")
            ),
            "reason": "FieldValueInvalid",
        },
        {
            "rule": "!has(self.minReplicas) || !has(self.maxReplicas) || self.maxReplicas == 0 \
                     || self.minReplicas <= self.maxReplicas",
            "message": "minReplicas must not be more than maxReplicas (unless maxReplicas is 0: no limit)",
            "fieldPath": ".minReplicas",
            "reason": "FieldValueInvalid",
        },
    ]);
    schema.insert(VALIDATIONS.into(), rules);
}

/// Declares at `schema` (an object at `level`) and at the levels below it every field KServe
/// declares there ([`crate::fields`]) and keeps no unknown field there, as KServe's CRD does: the
/// API server then names an unknown field (`spec.predictor.minReplica`), a warning for `kubectl
/// apply` and a refusal under `--validate=strict`. The fields Skiff's types read keep their
/// derived schema; the others take any value, kept as written with whatever it holds.
pub fn known_fields(schema: &mut JSONSchemaProps, level: Level) {
    schema.type_.get_or_insert_with(|| "object".to_owned());
    schema.x_kubernetes_preserve_unknown_fields = None;
    schema.additional_properties = None;
    let properties = schema.properties.get_or_insert_with(Default::default);
    for field in level.fields() {
        let property = properties.entry(field.to_owned()).or_insert_with(|| JSONSchemaProps {
            x_kubernetes_preserve_unknown_fields: Some(true),
            ..JSONSchemaProps::default()
        });
        match level.child(field) {
            Some(Child::Object(child)) => known_fields(property, child),
            Some(Child::List(child)) => {
                property.type_ = Some("array".to_owned());
                property.x_kubernetes_preserve_unknown_fields = None;
                let items = property.items.get_or_insert_with(|| JSONSchemaPropsOrArray::Schema(Box::default()));
                if let JSONSchemaPropsOrArray::Schema(items) = items {
                    known_fields(items, child);
                }
            }
            None => {}
        }
    }
}

/// The root of the resource's schema: rules on `metadata.name` (the one piece of metadata, with
/// `generateName`, that a CRD may check), so that the API server refuses a name whose revision
/// names would not be DNS labels. `metadata.name` is declared so that the rules may name it as
/// their `fieldPath`.
pub fn root(schema: &mut JSONSchemaProps) {
    let string = JSONSchemaProps { type_: Some("string".into()), ..JSONSchemaProps::default() };
    let metadata = JSONSchemaProps {
        type_: Some("object".into()),
        properties: Some([("name".to_owned(), string)].into()),
        ..JSONSchemaProps::default()
    };
    schema.properties.get_or_insert_with(Default::default).insert("metadata".into(), metadata);
    let rule = |rule: String, message: String| ValidationRule {
        rule,
        message: Some(message),
        field_path: Some(".metadata.name".into()),
        reason: Some("FieldValueInvalid".into()),
        ..ValidationRule::default()
    };
    schema.x_kubernetes_validations = Some(vec![
        rule(
            format!("self.metadata.name.size() <= {MAX_NAME_LENGTH}"),
            format!("metadata.name is too long; {}", name_limit()),
        ),
        rule(
            "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')".into(),
            format!("metadata.name must be a DNS-1035 label: {DNS_1035}"),
        ),
    ]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preserving_drops_additional_properties() {
        let mut schema = json_schema!({ "type": "object", "additionalProperties": true });
        preserve_unknown_fields(&mut schema);
        assert_eq!(schema.get("additionalProperties"), None);
        assert_eq!(schema.get(PRESERVE), Some(&json!(true)));
    }

    #[test]
    fn the_predictor_rule_counts_every_implementation() {
        let mut schema = json_schema!({ "type": "object", "properties": {} });
        predictor(&mut schema);
        let rule = schema.get(VALIDATIONS).unwrap()[0]["rule"].as_str().unwrap().to_owned();
        for f in ["model", "containers", "sklearn", "huggingface", "art"] {
            assert!(rule.contains(&format!("has(self.{f})")), "{rule}");
            if f != "model" && f != "containers" {
                assert_eq!(schema.get("properties").unwrap()[f]["type"], json!("object"));
            }
        }
    }
}
