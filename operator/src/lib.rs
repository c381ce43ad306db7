//! Operator: the kube-rs controller for InferenceServices (arrives with the Kubernetes issue).
