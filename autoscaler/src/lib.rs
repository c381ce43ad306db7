//! Autoscaler: the KPA-style decider and its runner (arrives with the data-plane issue).
