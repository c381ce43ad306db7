//! What "Roll back" restores after a full rollout: the JSON merge patch (RFC 7386) that turns the
//! current spec into a kept revision's, so that only the fields that differ are edited in place
//! ([`crate::yaml_edit::merge_patch`]) and the rest of the user's file stays as written.

use serde_json::{Map, Value};

use crate::backend::RollbackView;
use crate::error::Error;

/// The merge patch that turns `from` into `to`: for two objects, each field of `to` that differs
/// (recursively for objects), and `null` for each field of `from` that `to` lacks; anything else
/// is `to` whole (a list is replaced, never merged). Merging it into `from` gives `to` when `to`
/// holds no `null` (which a merge patch can only mean as a removal).
pub fn merge_diff(from: &Value, to: &Value) -> Value {
    let (Value::Object(from), Value::Object(to)) = (from, to) else { return to.clone() };
    let mut patch = Map::new();
    for (name, value) in to {
        match from.get(name) {
            Some(old) if old == value => {}
            Some(old) => {
                patch.insert(name.clone(), merge_diff(old, value));
            }
            None => {
                patch.insert(name.clone(), value.clone());
            }
        }
    }
    for name in from.keys().filter(|name| !to.contains_key(*name)) {
        patch.insert(name.clone(), Value::Null);
    }
    Value::Object(patch)
}

/// The patch that restores `kept` (a revision's spec, as `{metadata: {annotations}, spec:
/// {predictor}}`) over `current` (the same of the manifest now) and removes a set
/// `canaryTrafficPercent`, so that the restored revision takes all traffic (a canary left in place
/// would split with the revision rolled back from).
pub fn restore_patch(current: &Value, kept: &Value, canary_set: bool) -> Value {
    let mut patch = merge_diff(current, kept);
    if canary_set {
        let spec = object(&mut patch, "spec");
        let predictor = object(spec, "predictor");
        if let Value::Object(fields) = predictor {
            fields.insert("canaryTrafficPercent".into(), Value::Null);
        }
    }
    patch
}

/// Why "Roll back" cannot restore a spec for `view` (a 409 naming what to do instead), or `None`
/// when it can: during a canary `canaryTrafficPercent: 0` is the rollback; with no previous
/// rolled-out revision there is nothing to go back to; where the backend does not know that
/// revision's spec, the user restores it.
pub fn refusal(view: &RollbackView) -> Option<Error> {
    let message = match view {
        RollbackView { rolled_out: false, .. } => {
            "a canary is in progress: set canaryTrafficPercent: 0 to send all traffic to the rolled-out revision".into()
        }
        RollbackView { previous: None, .. } => "there is no earlier rolled-out revision to roll back to".into(),
        RollbackView { previous: Some(previous), restorable: false, .. } => format!(
            "to roll back, restore the spec of {previous} (apply the manifest it ran): it is kept at zero and \
             takes the traffic back with no new revision; the operator records only a hash of each \
             revision's spec, so this app cannot restore it"
        ),
        RollbackView { .. } => return None,
    };
    Some(Error::Refused { status: 409, message })
}

/// The object at `name` of `value` (an object), added empty when missing.
fn object<'v>(value: &'v mut Value, name: &str) -> &'v mut Value {
    match value {
        Value::Object(fields) => fields.entry(name).or_insert_with(|| Value::Object(Map::new())),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_what_differs_is_in_the_patch() {
        let v2 = json!({"spec": {"predictor": {"minReplicas": 1, "model": {"storageUri": "file://v2", "modelFormat": {"name": "onnx"}}}}});
        let v1 = json!({"spec": {"predictor": {"minReplicas": 1, "model": {"storageUri": "file://v1", "modelFormat": {"name": "onnx"}}}}});
        assert_eq!(merge_diff(&v2, &v1), json!({"spec": {"predictor": {"model": {"storageUri": "file://v1"}}}}));
        assert_eq!(merge_diff(&v1, &v1), json!({}));
    }

    #[test]
    fn fields_come_and_go_and_lists_are_replaced_whole() {
        let from = json!({"a": 1, "b": {"c": [1, 2], "d": "x"}, "gone": {"deep": true}});
        let to = json!({"a": 1, "b": {"c": [1, 3]}, "new": {"e": 5}});
        let patch = merge_diff(&from, &to);
        assert_eq!(patch, json!({"b": {"c": [1, 3], "d": null}, "new": {"e": 5}, "gone": null}));
        // A field that changes kind is replaced whole.
        assert_eq!(merge_diff(&json!({"a": {"b": 1}}), &json!({"a": 2})), json!({"a": 2}));
        assert_eq!(merge_diff(&json!({"a": 2}), &json!({"a": {"b": 1}})), json!({"a": {"b": 1}}));
    }

    #[test]
    fn a_set_canary_is_removed_so_that_the_restored_revision_takes_all_traffic() {
        let current = json!({"metadata": {"annotations": {}}, "spec": {"predictor": {"minReplicas": 2}}});
        let kept = json!({"metadata": {"annotations": {"autoscaling.knative.dev/target": "5"}}, "spec": {"predictor": {"minReplicas": 1}}});
        assert_eq!(
            restore_patch(&current, &kept, true),
            json!({"metadata": {"annotations": {"autoscaling.knative.dev/target": "5"}},
                   "spec": {"predictor": {"minReplicas": 1, "canaryTrafficPercent": null}}})
        );
        assert_eq!(
            restore_patch(&kept, &kept, true),
            json!({"spec": {"predictor": {"canaryTrafficPercent": null}}}),
            "the spec is the kept one already: only the canary goes"
        );
        assert_eq!(restore_patch(&kept, &kept, false), json!({}));
    }

    #[test]
    fn a_restore_edits_the_file_in_place_or_is_refused_naming_the_field() {
        use crate::yaml_edit::merge_patch;
        let file = "# v2\nspec:\n  predictor:\n    minReplicas: 1 # one\n    canaryTrafficPercent: 0\n    model:\n      storageUri: 'file://v2'\n";
        let current = json!({"spec": {"predictor": {"minReplicas": 1, "model": {"storageUri": "file://v2"}}}});
        let kept = json!({"spec": {"predictor": {"minReplicas": 1, "model": {"storageUri": "file://v1"}}}});
        let restored = merge_patch(file, 0, &restore_patch(&current, &kept, true)).unwrap();
        assert_eq!(
            restored,
            "# v2\nspec:\n  predictor:\n    minReplicas: 1 # one\n    model:\n      storageUri: 'file://v1'\n"
        );
        // A list that differs cannot be edited in place: the refusal names it.
        let with_args = |args: Value| json!({"spec": {"predictor": {"containers": [{"args": args}]}}});
        let patch = restore_patch(&with_args(json!(["--a"])), &with_args(json!(["--b"])), false);
        let text = "spec:\n  predictor:\n    containers:\n      - args: [--a]\n";
        let error = merge_patch(text, 0, &patch).unwrap_err();
        assert_eq!(error.status(), http::StatusCode::UNPROCESSABLE_ENTITY);
        assert!(error.to_string().starts_with("spec.predictor.containers: only a scalar"), "{error}");
    }

    #[test]
    fn a_spec_is_restored_only_after_a_full_rollout_to_a_known_previous_revision() {
        let view = |rolled_out, previous: Option<&str>, restorable| RollbackView {
            rolled_out,
            previous: previous.map(str::to_owned),
            restorable,
        };
        let message = |v: RollbackView| refusal(&v).map(|e| e.to_string()).unwrap_or_default();
        assert!(refusal(&view(true, Some("iris-predictor-00001"), true)).is_none());
        assert!(message(view(false, Some("iris-predictor-00001"), true)).contains("canaryTrafficPercent: 0"));
        assert!(message(view(true, None, true)).contains("no earlier rolled-out revision"));
        let cluster = message(view(true, Some("iris-predictor-00001"), false));
        assert!(cluster.starts_with("to roll back, restore the spec of iris-predictor-00001"), "{cluster}");
        let error = refusal(&view(true, None, false)).unwrap();
        assert_eq!(error.status(), http::StatusCode::CONFLICT);
    }

    /// A JSON value without `null`s, nested a few levels.
    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::from),
            (0u8..4).prop_map(Value::from),
            "[ab]{0,2}".prop_map(Value::from)
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::btree_map("[a-d]", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn merging_the_diff_gives_the_target(from in value(), to in value()) {
            let patch = merge_diff(&from, &to);
            let mut merged = from.clone();
            json_patch::merge(&mut merged, &patch);
            prop_assert_eq!(merged, to);
        }
    }
}
