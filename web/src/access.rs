//! Who may do what: with auth on, every action is checked by a SubjectAccessReview for the user
//! the authenticating proxy named, the verb, the resource and the namespace, as KServe's app does.

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;

use crate::error::Result;

/// One action on one kind of object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// `list`, `get`, `create`, `patch`, `delete`, `watch`.
    pub verb: &'static str,
    /// API group, `` for the core group.
    pub group: &'static str,
    /// Resource, e.g. `inferenceservices`.
    pub resource: &'static str,
    /// Subresource, e.g. `log` for `pods/log`.
    pub subresource: &'static str,
    /// Namespace; `None` for cluster-scoped resources.
    pub namespace: Option<String>,
}

impl Action {
    /// An action on InferenceServices in `namespace`.
    pub fn isvc(verb: &'static str, namespace: &str) -> Action {
        Action::namespaced(verb, "serving.kserve.io", "inferenceservices", namespace)
    }

    /// An action on a namespaced resource.
    pub fn namespaced(verb: &'static str, group: &'static str, resource: &'static str, namespace: &str) -> Action {
        Action { verb, group, resource, subresource: "", namespace: Some(namespace.to_owned()) }
    }

    /// What a denial says.
    pub fn describe(&self, user: &str) -> String {
        let resource = if self.subresource.is_empty() {
            self.resource.to_owned()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let group = if self.group.is_empty() { String::new() } else { format!(".{}", self.group) };
        match &self.namespace {
            Some(namespace) => {
                format!("user {user} may not {} {resource}{group} in namespace {namespace}", self.verb)
            }
            None => format!("user {user} may not {} {resource}{group}", self.verb),
        }
    }
}

/// Answers whether a user may do an action.
#[async_trait]
pub trait Access: Send + Sync + 'static {
    /// Whether `user` may do `action`.
    async fn allowed(&self, user: &str, action: &Action) -> Result<bool>;
}

/// Asks the API server with a SubjectAccessReview.
pub struct SubjectAccessReviews {
    api: Api<SubjectAccessReview>,
}

impl SubjectAccessReviews {
    /// Reviews through `client` (whose ServiceAccount may create subjectaccessreviews).
    pub fn new(client: kube::Client) -> SubjectAccessReviews {
        SubjectAccessReviews { api: Api::all(client) }
    }
}

/// The review the API server is asked for.
pub fn review(user: &str, action: &Action) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.to_owned()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(action.verb.to_owned()),
                group: Some(action.group.to_owned()),
                resource: Some(action.resource.to_owned()),
                subresource: (!action.subresource.is_empty()).then(|| action.subresource.to_owned()),
                namespace: action.namespace.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[async_trait]
impl Access for SubjectAccessReviews {
    async fn allowed(&self, user: &str, action: &Action) -> Result<bool> {
        let answer = self.api.create(&PostParams::default(), &review(user, action)).await?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_names_the_user_verb_resource_and_namespace() {
        let action = Action::isvc("delete", "team-a");
        let review = review("alice@example.com", &action);
        let attributes = review.spec.resource_attributes.unwrap();
        assert_eq!(review.spec.user.as_deref(), Some("alice@example.com"));
        assert_eq!(attributes.verb.as_deref(), Some("delete"));
        assert_eq!(attributes.group.as_deref(), Some("serving.kserve.io"));
        assert_eq!(attributes.resource.as_deref(), Some("inferenceservices"));
        assert_eq!(attributes.namespace.as_deref(), Some("team-a"));
        assert_eq!(attributes.subresource, None);
        assert_eq!(
            action.describe("alice@example.com"),
            "user alice@example.com may not delete inferenceservices.serving.kserve.io in namespace team-a"
        );
    }
}
