//! Skiff's autoscaler core: a Knative KPA-style decider per revision.
//!
//! The deciders are pure and synchronous: time is passed in, nothing sleeps, spawns or does I/O. The
//! runner that samples concurrency, ticks and drives a replica backend is the data plane's
//! (`skiff_dataplane::runner`); it feeds a [`Decider`]:
//!
//! 1. [`AutoscalerConfig::from_map`] reads Knative's `config-autoscaler` data (defaults in [`Default`]).
//! 2. [`ScalingSpec::resolve`] merges an InferenceService's predictor fields ([`PredictorScaling`]), the revision's
//!    `autoscaling.knative.dev/*` annotations and the config, the way KServe and Knative do.
//! 3. [`Decider::record`] takes the observed concurrency (or rps) each second, [`Decider::decide`] returns a
//!    [`Decision`] each tick, and [`Decider::poke`] answers at once when a request waits at zero pods.
//! 4. A revision whose pods are still starting keeps them until the [`activation`] timeout (the progress deadline
//!    plus Knative's buffer), then gives up: [`Decision::activation_timed_out`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use std::time::{Duration, Instant};
//! use skiff_autoscaler::{AutoscalerConfig, Decider, PredictorScaling, ScalingSpec};
//!
//! let config = AutoscalerConfig::from_map(&BTreeMap::from([("stable-window".into(), "30s".into())]))?;
//! let fields = PredictorScaling { min_replicas: Some(0), container_concurrency: Some(10), ..Default::default() };
//! let spec = ScalingSpec::resolve(&fields, &BTreeMap::new(), &config)?;
//! assert_eq!(spec.per_pod_target(), 7.0); // containerConcurrency 10 × 70%
//!
//! let t0 = Instant::now();
//! let mut decider = Decider::new(spec, t0);
//! for s in 0..30 {
//!     decider.record(t0 + Duration::from_secs(s), 21.0); // 21 requests in flight across the revision
//! }
//! assert_eq!(decider.decide(t0 + Duration::from_secs(29), 3).desired_pods, 3);
//! # Ok::<(), skiff_autoscaler::Error>(())
//! ```

pub mod activation;
pub mod annotations;
mod config;
mod decider;
mod duration;
mod error;
mod spec;
mod window;

pub use config::{AutoscalerConfig, RPS_TARGET_UTILIZATION_PERCENTAGE, TARGET_MIN, WINDOW_MAX, WINDOW_MIN};
pub use decider::{Decider, Decision};
pub use duration::go_duration;
pub use error::{Error, Result};
pub use spec::{Aggregation, KSERVE_DEFAULT_MIN_REPLICAS, Metric, PredictorScaling, ScalingSpec};
pub use window::{MaxWindow, Window};
