//! A revision that cannot start a replica for a cause that a retry will not fix, and the one rule
//! that says which causes those are, for `skiff up` and the cluster alike. While a revision fails
//! so, the activator answers its requests at once with 503 and the reason, as the revision's
//! status gives it, rather than holding them until their timeout; while a retry can still succeed
//! (a transfer cut, a full disk, a replica that crashed), it keeps holding them. The replica
//! backend keeps retrying with back-off either way: once a replica is ready the failure is gone.

/// The reasons a kubelet gives a container it cannot start (its waiting state), and the reason a
/// ReplicaSet gives a pod it cannot create (its Deployment's `ReplicaFailure` condition): an image
/// that cannot be pulled or named, a Secret or ConfigMap the container needs that is missing, a
/// pod the namespace's policy or quota refuses. They last until the image, the configuration or
/// the namespace changes (Knative marks the revision `ResourcesAvailable` False with them).
pub const CANNOT_START: [&str; 7] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    FAILED_CREATE,
];

/// A ReplicaSet's reason for a pod it cannot create (its Deployment's `ReplicaFailure`).
pub const FAILED_CREATE: &str = "FailedCreate";

/// `reason` as one of the [`CANNOT_START`] reasons, if it is one.
pub fn cannot_start(reason: &str) -> Option<&'static str> {
    CANNOT_START.into_iter().find(|r| *r == reason)
}

/// The init container that fetches the model into a model pod on a cluster (KServe's name); it
/// runs `skiff-fetch`, so its exit code tells the kind of failure.
pub const STORAGE_INITIALIZER: &str = "storage-initializer";

/// Why a revision cannot start a replica, as its status says it (KServe's `lastFailureInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// `ModelLoadFailed`, ...
    pub reason: String,
    /// What went wrong, naming the model's URI and the store's or the server's words.
    pub message: String,
}

/// What made a replica fail to start, as far as a retry is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Fetching the model failed with `skiff-fetch`'s exit code (the storage initializer's in a
    /// cluster; the fetch error's `exit_code()` in `skiff up`): 2 a bad URI or
    /// store setting, 3 not found, 4 access denied, 5 a transfer, 6 too large, 7 a bad archive,
    /// 8 the local disk.
    Fetch {
        /// `skiff-fetch`'s exit code.
        exit_code: i32,
    },
    /// The model was refused before a replica started: its files are not a model the server loads.
    Refused,
    /// A replica exited (before or after it was ready).
    Exited,
    /// A replica could not be started: one of the [`CANNOT_START`] reasons.
    Unstartable,
}

impl Cause {
    /// What made a model pod's `container` fail with `exit_code` on a cluster: the
    /// [`STORAGE_INITIALIZER`]'s is a fetch, any other container's an exit.
    pub fn of_container(container: &str, exit_code: i32) -> Cause {
        if container == STORAGE_INITIALIZER { Cause::Fetch { exit_code } } else { Cause::Exited }
    }

    /// What made a model pod fail on a cluster, from its `lastFailureInfo`: one of the
    /// [`CANNOT_START`] reasons, else what [`Cause::of_container`] says of its container.
    pub fn of_failure(container: &str, reason: &str, exit_code: i32) -> Cause {
        if cannot_start(reason).is_some() { Cause::Unstartable } else { Cause::of_container(container, exit_code) }
    }

    /// Whether trying again, with nothing changed, can succeed: a transfer that was cut, a disk that
    /// was full, a replica that crashed can; a URI, a store's answer that the model is missing or
    /// forbidden, a model too large, a corrupt archive, a refused model or a replica that cannot be
    /// started stay as they are until the InferenceService, the store or the cluster changes.
    pub fn retry_helps(self) -> bool {
        match self {
            Cause::Fetch { exit_code } => !matches!(exit_code, 2 | 3 | 4 | 6 | 7),
            Cause::Refused | Cause::Unstartable => false,
            Cause::Exited => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_transfers_disks_and_crashes_are_worth_waiting_for() {
        let waits: Vec<bool> = (2..=8).map(|exit_code| Cause::Fetch { exit_code }.retry_helps()).collect();
        assert_eq!(waits, [false, false, false, true, false, false, true]);
        assert!(!Cause::Refused.retry_helps());
        assert!(Cause::Exited.retry_helps());
    }

    #[test]
    fn on_a_cluster_the_storage_initializer_fetches_and_the_model_container_exits() {
        assert_eq!(Cause::of_container("storage-initializer", 3), Cause::Fetch { exit_code: 3 });
        assert_eq!(Cause::of_container("kserve-container", 3), Cause::Exited);
    }

    #[test]
    fn an_image_that_cannot_be_pulled_or_a_pod_that_cannot_be_created_is_not_waited_for() {
        assert_eq!(Cause::of_failure("kserve-container", "ImagePullBackOff", 0), Cause::Unstartable);
        assert_eq!(Cause::of_failure("", "FailedCreate", 0), Cause::Unstartable);
        assert_eq!(Cause::of_failure("storage-initializer", "ModelLoadFailed", 5), Cause::Fetch { exit_code: 5 });
        assert_eq!(Cause::of_failure("kserve-container", "ModelLoadFailed", 1), Cause::Exited);
        assert!(!Cause::Unstartable.retry_helps());
    }
}
