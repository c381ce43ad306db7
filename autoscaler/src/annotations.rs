//! Knative's `autoscaling.knative.dev/*` revision annotations, with the legacy camelCase spellings Knative still reads.

/// `autoscaling.knative.dev/class`: only the KPA class is served.
pub const CLASS: &str = "autoscaling.knative.dev/class";
/// The one class Skiff implements.
pub const CLASS_KPA: &str = "kpa.autoscaling.knative.dev";
/// `autoscaling.knative.dev/min-scale`.
pub const MIN_SCALE: &str = "autoscaling.knative.dev/min-scale";
/// `autoscaling.knative.dev/max-scale`.
pub const MAX_SCALE: &str = "autoscaling.knative.dev/max-scale";
/// `autoscaling.knative.dev/initial-scale`.
pub const INITIAL_SCALE: &str = "autoscaling.knative.dev/initial-scale";
/// `autoscaling.knative.dev/activation-scale`: the least pods a scale from zero brings up (at least 2 when set).
pub const ACTIVATION_SCALE: &str = "autoscaling.knative.dev/activation-scale";
/// `autoscaling.knative.dev/target`: the per-pod target of the metric.
pub const TARGET: &str = "autoscaling.knative.dev/target";
/// `autoscaling.knative.dev/target-utilization-percentage`.
pub const TARGET_UTILIZATION_PERCENTAGE: &str = "autoscaling.knative.dev/target-utilization-percentage";
/// `autoscaling.knative.dev/metric`: `concurrency` or `rps`.
pub const METRIC: &str = "autoscaling.knative.dev/metric";
/// `autoscaling.knative.dev/metric-aggregation-algorithm`: `linear` or `weighted-exponential`.
pub const METRIC_AGGREGATION_ALGORITHM: &str = "autoscaling.knative.dev/metric-aggregation-algorithm";
/// `autoscaling.knative.dev/window`: the stable window.
pub const WINDOW: &str = "autoscaling.knative.dev/window";
/// `autoscaling.knative.dev/panic-window-percentage`.
pub const PANIC_WINDOW_PERCENTAGE: &str = "autoscaling.knative.dev/panic-window-percentage";
/// `autoscaling.knative.dev/panic-threshold-percentage`.
pub const PANIC_THRESHOLD_PERCENTAGE: &str = "autoscaling.knative.dev/panic-threshold-percentage";
/// `autoscaling.knative.dev/scale-down-delay`.
pub const SCALE_DOWN_DELAY: &str = "autoscaling.knative.dev/scale-down-delay";
/// `autoscaling.knative.dev/target-burst-capacity`.
pub const TARGET_BURST_CAPACITY: &str = "autoscaling.knative.dev/target-burst-capacity";
/// `autoscaling.knative.dev/scale-to-zero-pod-retention-period`.
pub const SCALE_TO_ZERO_POD_RETENTION_PERIOD: &str = "autoscaling.knative.dev/scale-to-zero-pod-retention-period";

/// Each annotation with the spellings Knative accepts, the first present winning.
pub(crate) mod spellings {
    use super::*;

    pub const MIN_SCALE_KEYS: &[&str] = &[MIN_SCALE, "autoscaling.knative.dev/minScale"];
    pub const MAX_SCALE_KEYS: &[&str] = &[MAX_SCALE, "autoscaling.knative.dev/maxScale"];
    pub const INITIAL_SCALE_KEYS: &[&str] = &[INITIAL_SCALE, "autoscaling.knative.dev/initialScale"];
    pub const ACTIVATION_SCALE_KEYS: &[&str] = &[ACTIVATION_SCALE];
    pub const TARGET_KEYS: &[&str] = &[TARGET];
    pub const UTILIZATION_KEYS: &[&str] =
        &[TARGET_UTILIZATION_PERCENTAGE, "autoscaling.knative.dev/targetUtilizationPercentage"];
    pub const METRIC_KEYS: &[&str] = &[METRIC];
    pub const ALGORITHM_KEYS: &[&str] =
        &[METRIC_AGGREGATION_ALGORITHM, "autoscaling.knative.dev/metricAggregationAlgorithm"];
    pub const WINDOW_KEYS: &[&str] = &[WINDOW];
    pub const PANIC_WINDOW_KEYS: &[&str] = &[PANIC_WINDOW_PERCENTAGE, "autoscaling.knative.dev/panicWindowPercentage"];
    pub const PANIC_THRESHOLD_KEYS: &[&str] =
        &[PANIC_THRESHOLD_PERCENTAGE, "autoscaling.knative.dev/panicThresholdPercentage"];
    pub const SCALE_DOWN_DELAY_KEYS: &[&str] = &[SCALE_DOWN_DELAY, "autoscaling.knative.dev/scaleDownDelay"];
    pub const BURST_KEYS: &[&str] = &[TARGET_BURST_CAPACITY, "autoscaling.knative.dev/targetBurstCapacity"];
    pub const RETENTION_KEYS: &[&str] =
        &[SCALE_TO_ZERO_POD_RETENTION_PERIOD, "autoscaling.knative.dev/scaleToZeroPodRetentionPeriod"];
    pub const CLASS_KEYS: &[&str] = &[CLASS];
}
