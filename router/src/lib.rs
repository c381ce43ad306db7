//! Router: the Pingora ingress that splits traffic across revisions (arrives with the data-plane issue).
