//! InferenceService v1beta1 types shared by the operator, router and standalone mode (arrives with the Kubernetes issue).
