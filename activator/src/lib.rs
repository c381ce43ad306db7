//! Activator: holds requests while a revision scales from zero, and the queue-proxy sidecar (arrives with the data-plane issue).
