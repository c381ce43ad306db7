//! Per-revision scaling settings, resolved from KServe's predictor fields, the revision's Knative annotations and
//! the global config.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::activation;
use crate::annotations::{CLASS_KPA, spellings::*};
use crate::config::{
    self, AutoscalerConfig, RPS_TARGET_UTILIZATION_PERCENTAGE, TARGET_MIN, WINDOW_MAX, WINDOW_MIN, allowed,
    parse_count, parse_duration, parse_float,
};
use crate::duration::whole_seconds;
use crate::error::{Error, Result};

/// KServe's `minReplicas` when the field is absent.
pub const KSERVE_DEFAULT_MIN_REPLICAS: u32 = 1;

/// The metric a revision scales on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metric {
    /// In-flight requests per pod (Knative's default).
    #[default]
    Concurrency,
    /// Requests per second per pod.
    Rps,
}

impl Metric {
    /// The name used in annotations and in KServe's `scaleMetric`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Concurrency => "concurrency",
            Self::Rps => "rps",
        }
    }

    fn parse(key: &str, raw: &str) -> Result<Self> {
        match raw {
            "concurrency" => Ok(Self::Concurrency),
            "rps" => Ok(Self::Rps),
            _ => Err(Error::parse(key, raw, "concurrency or rps")),
        }
    }
}

/// How the stable and panic windows average their per-second buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Aggregation {
    /// The plain mean over the window (Knative's default, `linear`).
    #[default]
    Linear,
    /// Recent seconds weigh more (`weighted-exponential`).
    WeightedExponential,
}

/// The InferenceService component fields that drive autoscaling (a subset of KServe's `ComponentExtensionSpec`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PredictorScaling {
    /// `minReplicas`: KServe defaults it to 1; 0 allows scale to zero.
    pub min_replicas: Option<u32>,
    /// `maxReplicas`: 0 or absent means no limit of the InferenceService's own.
    pub max_replicas: Option<u32>,
    /// `scaleTarget`: the per-pod target of the metric.
    pub scale_target: Option<u32>,
    /// `scaleMetric`: `concurrency` or `rps`.
    pub scale_metric: Option<String>,
    /// `containerConcurrency`: the hard per-pod limit; 0 or absent means unlimited.
    pub container_concurrency: Option<u32>,
}

/// Everything the decider needs about one revision: Knative's `DeciderSpec` plus the scale bounds and the
/// scale-to-zero settings the KPA reconciler applies.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingSpec {
    /// The metric scaled on.
    pub metric: Metric,
    /// The metric's per-pod value at full utilisation (Knative's `TotalValue`); the decider aims at
    /// [`ScalingSpec::per_pod_target`].
    pub target: f64,
    /// Share of `target` to aim for, in percent.
    pub target_utilization_percentage: f64,
    /// Hard per-pod concurrency limit; 0 = unlimited.
    pub container_concurrency: u32,
    /// Lower bound on pods.
    pub min_scale: u32,
    /// Upper bound on pods; 0 = unlimited.
    pub max_scale: u32,
    /// Pods a new revision starts with, held until that many have been ready once.
    pub initial_scale: u32,
    /// Least pods when scaling up from zero; 0 or 1 = off.
    pub activation_scale: u32,
    /// The stable window.
    pub stable_window: Duration,
    /// The panic window as a percentage of the stable window.
    pub panic_window_percentage: f64,
    /// Panic when the panic-window estimate reaches this percentage of ready pods.
    pub panic_threshold_percentage: f64,
    /// Scale down only to the highest count wanted over this window.
    pub scale_down_delay: Duration,
    /// Spare capacity before the activator leaves the path; -1 = always in the path.
    pub target_burst_capacity: f64,
    /// Least time the last pod stays once idle.
    pub scale_to_zero_pod_retention_period: Duration,
    /// How window buckets are averaged.
    pub aggregation: Aggregation,
    /// Whether a route sends traffic to this revision; an unreachable one ignores min and initial scale and scales
    /// down at once.
    pub reachable: bool,
    /// From the config: at most this many times the ready pods in one decision.
    pub max_scale_up_rate: f64,
    /// From the config: at least the ready pods divided by this in one decision.
    pub max_scale_down_rate: f64,
    /// From the config: whether scale to zero is allowed at all.
    pub enable_scale_to_zero: bool,
    /// From the config: how long the activator is in the path before the last pod goes.
    pub scale_to_zero_grace_period: Duration,
    /// From the config: the runner's tick, the bucket width of the scale-down-delay window.
    pub tick_interval: Duration,
    /// The revision's progress deadline (`serving.knative.dev/progress-deadline`), when it sets one: with
    /// Knative's buffer, how long a revision that is starting may keep pods nobody asks for
    /// ([`ScalingSpec::activation_timeout`]).
    pub progress_deadline: Option<Duration>,
}

impl Default for ScalingSpec {
    fn default() -> Self {
        Self::from_config(&AutoscalerConfig::default())
    }
}

impl ScalingSpec {
    /// A Knative revision with no annotations and `containerConcurrency: 0` under this config.
    pub fn from_config(config: &AutoscalerConfig) -> Self {
        Self {
            metric: Metric::Concurrency,
            target: config.container_concurrency_target_default,
            target_utilization_percentage: config.container_concurrency_target_percentage,
            container_concurrency: 0,
            min_scale: config.min_scale,
            max_scale: config.max_scale,
            initial_scale: config.initial_scale,
            activation_scale: 0,
            stable_window: config.stable_window,
            panic_window_percentage: config.panic_window_percentage,
            panic_threshold_percentage: config.panic_threshold_percentage,
            scale_down_delay: config.scale_down_delay,
            target_burst_capacity: config.target_burst_capacity,
            scale_to_zero_pod_retention_period: config.scale_to_zero_pod_retention_period,
            aggregation: Aggregation::Linear,
            reachable: true,
            max_scale_up_rate: config.max_scale_up_rate,
            max_scale_down_rate: config.max_scale_down_rate,
            enable_scale_to_zero: config.enable_scale_to_zero,
            scale_to_zero_grace_period: config.scale_to_zero_grace_period,
            tick_interval: config.tick_interval,
            progress_deadline: None,
        }
    }

    /// Resolves a revision's settings the way KServe and Knative do together.
    ///
    /// KServe writes the predictor fields into the revision's annotations, overwriting any the user wrote:
    /// `scaleTarget` → `target`, `scaleMetric` → `metric`, `maxReplicas` (when not 0) → `max-scale`, and
    /// `minReplicas` → `min-scale` always (1 when absent). Knative then reads the annotations over the config,
    /// and `serving.knative.dev/progress-deadline` for the activation timeout. Errors name the field or annotation the bad value came from.
    pub fn resolve(
        fields: &PredictorScaling,
        annotations: &BTreeMap<String, String>,
        config: &AutoscalerConfig,
    ) -> Result<Self> {
        validate_fields(fields)?;
        let values = kserve_annotations(fields, annotations);
        let mut spec = Self::from_config(config);

        if let Some((key, raw)) = values.get(CLASS_KEYS)
            && raw != CLASS_KPA
        {
            return Err(Error::range(key, raw, "must be kpa.autoscaling.knative.dev, the only class Skiff serves"));
        }
        if let Some((key, raw)) = values.get(METRIC_KEYS) {
            spec.metric = Metric::parse(key, raw)?;
        }
        if let Some((key, raw)) = values.get(ALGORITHM_KEYS) {
            spec.aggregation = match raw {
                "linear" => Aggregation::Linear,
                "weighted-exponential" | "weightedExponential" => Aggregation::WeightedExponential,
                _ => return Err(Error::parse(key, raw, "linear or weighted-exponential")),
            };
        }
        spec.container_concurrency = fields.container_concurrency.unwrap_or(0);
        resolve_bounds(&mut spec, &values, config)?;
        resolve_target(&mut spec, &values, config)?;
        resolve_windows(&mut spec, &values)?;
        if let Some((key, raw)) = values.get(BURST_KEYS) {
            spec.target_burst_capacity = parse_float(key, raw)?;
            config::check_burst_capacity(key, spec.target_burst_capacity)?;
        }
        spec.progress_deadline = activation::progress_deadline(annotations).map_err(|message| {
            let raw = annotations.get(activation::PROGRESS_DEADLINE_ANNOTATION).map_or("", String::as_str);
            Error::range(activation::PROGRESS_DEADLINE_ANNOTATION, raw, message)
        })?;
        Ok(spec)
    }

    /// Pods a new revision starts with: the initial scale, at least the minimum, at most the
    /// maximum (the decider's first answer, and what the operator creates a Deployment with).
    pub fn initial_pods(&self) -> u32 {
        let initial = self.initial_scale.max(self.min_scale);
        if self.max_scale > 0 { initial.min(self.max_scale) } else { initial }
    }

    /// The per-pod value the decider aims for: target × utilisation, at least Knative's minimum of 0.01.
    ///
    /// Computed as Knative's `ResolveMetricTarget` does, target × (percentage / 100), so that the float is the
    /// same to the last bit: 1.5 × 70% is 1.0499999999999998 there, and an observed 1.05 wants 2 pods.
    pub fn per_pod_target(&self) -> f64 {
        (self.target * (self.target_utilization_percentage / 100.0)).max(TARGET_MIN)
    }

    /// The panic window: the stable window × the panic percentage, rounded to seconds, at least 1 s.
    pub fn panic_window(&self) -> Duration {
        let secs = (self.stable_window.as_secs_f64() * self.panic_window_percentage / 100.0).round();
        Duration::from_secs((secs as u64).max(1))
    }

    /// How long a revision that is starting (no pod ready yet) keeps its pods once nothing asks for them:
    /// the progress deadline, else Knative's 600 s, plus Knative's 30 s buffer.
    pub fn activation_timeout(&self) -> Duration {
        activation::activation_timeout(self.progress_deadline)
    }

    /// The panic threshold as a factor of ready pods (200% → 2.0).
    pub fn panic_threshold(&self) -> f64 {
        self.panic_threshold_percentage / 100.0
    }
}

/// KServe's own checks on the fields (its InferenceService webhook).
fn validate_fields(fields: &PredictorScaling) -> Result<()> {
    let min = fields.min_replicas.unwrap_or(KSERVE_DEFAULT_MIN_REPLICAS);
    let max = fields.max_replicas.unwrap_or(0);
    if max != 0 && min > max {
        return Err(Error::conflict("minReplicas", format!("{min} is more than maxReplicas ({max})")));
    }
    let metric = match fields.scale_metric.as_deref() {
        Some(raw) => Metric::parse("scaleMetric", raw)?,
        None => Metric::Concurrency,
    };
    if let Some(target) = fields.scale_target
        && target < 1
    {
        let allowed = format!("must be at least 1 for the {} metric", metric.as_str());
        return Err(Error::range("scaleTarget", target, allowed));
    }
    Ok(())
}

/// The revision's annotations after KServe has written the fields over them, each value with the name of
/// the field or annotation it came from.
struct Values(BTreeMap<String, (String, String)>);

impl Values {
    /// The first spelling present: (where it came from, value).
    fn get(&self, spellings: &[&str]) -> Option<(&str, &str)> {
        spellings.iter().find_map(|key| self.0.get(*key)).map(|(origin, raw)| (origin.as_str(), raw.trim()))
    }
}

fn kserve_annotations(fields: &PredictorScaling, annotations: &BTreeMap<String, String>) -> Values {
    let mut values: BTreeMap<String, (String, String)> =
        annotations.iter().map(|(key, value)| (key.clone(), (key.clone(), value.clone()))).collect();
    let mut overwrite = |annotation: &str, field: &str, value: String| {
        values.insert(annotation.to_owned(), (field.to_owned(), value));
    };
    if let Some(target) = fields.scale_target {
        overwrite(crate::annotations::TARGET, "scaleTarget", target.to_string());
    }
    if let Some(metric) = &fields.scale_metric {
        overwrite(crate::annotations::METRIC, "scaleMetric", metric.clone());
    }
    let min = fields.min_replicas.unwrap_or(KSERVE_DEFAULT_MIN_REPLICAS);
    overwrite(crate::annotations::MIN_SCALE, "minReplicas", min.to_string());
    if let Some(max) = fields.max_replicas.filter(|max| *max != 0) {
        overwrite(crate::annotations::MAX_SCALE, "maxReplicas", max.to_string());
    }
    Values(values)
}

fn resolve_bounds(spec: &mut ScalingSpec, values: &Values, config: &AutoscalerConfig) -> Result<()> {
    if let Some((key, raw)) = values.get(MIN_SCALE_KEYS) {
        spec.min_scale = parse_count(key, raw)?;
    }
    if let Some((key, raw)) = values.get(MAX_SCALE_KEYS) {
        spec.max_scale = parse_count(key, raw)?;
        let limit = config.max_scale_limit;
        if limit > 0 && spec.max_scale == 0 {
            let allowed = format!("0 (unlimited) is not allowed: max-scale-limit is {limit}");
            return Err(Error::range(key, raw, allowed));
        }
        if limit > 0 && spec.max_scale > limit {
            return Err(Error::range(key, raw, format!("must be between 1 and max-scale-limit ({limit})")));
        }
    }
    if spec.max_scale != 0 && spec.max_scale < spec.min_scale {
        let (key, _) = values.get(MAX_SCALE_KEYS).unwrap_or(("max-scale", ""));
        let message = format!("{} is less than min-scale ({})", spec.max_scale, spec.min_scale);
        return Err(Error::conflict(key, message));
    }
    if let Some((key, raw)) = values.get(ACTIVATION_SCALE_KEYS) {
        let value = parse_count(key, raw)?;
        if value < 2 {
            return Err(Error::range(key, raw, "must be at least 2"));
        }
        if value < spec.min_scale {
            return Err(Error::conflict(key, format!("{value} is less than min-scale ({})", spec.min_scale)));
        }
        if spec.max_scale != 0 && value > spec.max_scale {
            return Err(Error::conflict(key, format!("{value} is more than max-scale ({})", spec.max_scale)));
        }
        spec.activation_scale = value;
    }
    if let Some((key, raw)) = values.get(INITIAL_SCALE_KEYS) {
        spec.initial_scale = parse_count(key, raw)?;
        if spec.initial_scale == 0 && !config.allow_zero_initial_scale {
            return Err(Error::range(key, raw, "must be at least 1: allow-zero-initial-scale is false"));
        }
    }
    Ok(())
}

/// Knative's `ResolveMetricTarget`.
fn resolve_target(spec: &mut ScalingSpec, values: &Values, config: &AutoscalerConfig) -> Result<()> {
    let cc = spec.container_concurrency;
    (spec.target, spec.target_utilization_percentage) = match spec.metric {
        Metric::Rps => (config.requests_per_second_target_default, RPS_TARGET_UTILIZATION_PERCENTAGE),
        Metric::Concurrency if cc > 0 => (f64::from(cc), config.container_concurrency_target_percentage),
        Metric::Concurrency => {
            (config.container_concurrency_target_default, config.container_concurrency_target_percentage)
        }
    };
    if let Some((key, raw)) = values.get(TARGET_KEYS) {
        let target = parse_float(key, raw)?;
        if target < TARGET_MIN {
            return Err(Error::range(key, raw, format!("must be at least {TARGET_MIN}")));
        }
        // Never aim above what containerConcurrency lets a pod take.
        spec.target = if spec.metric == Metric::Concurrency && cc > 0 { target.min(f64::from(cc)) } else { target };
    }
    if let Some((key, raw)) = values.get(UTILIZATION_KEYS) {
        let value = parse_float(key, raw)?;
        if !(1.0..=100.0).contains(&value) {
            return Err(Error::range(key, raw, "must be between 1 and 100"));
        }
        spec.target_utilization_percentage = value;
    }
    Ok(())
}

fn resolve_windows(spec: &mut ScalingSpec, values: &Values) -> Result<()> {
    if let Some((key, raw)) = values.get(WINDOW_KEYS) {
        let window = parse_duration(key, raw, allowed::WINDOW)?;
        if window < WINDOW_MIN || window > WINDOW_MAX || !whole_seconds(window) {
            return Err(Error::range(key, raw, allowed::WINDOW));
        }
        spec.stable_window = window;
    }
    if let Some((key, raw)) = values.get(PANIC_WINDOW_KEYS) {
        spec.panic_window_percentage = parse_float(key, raw)?;
        config::check_percentage(key, spec.panic_window_percentage)?;
    }
    if let Some((key, raw)) = values.get(PANIC_THRESHOLD_KEYS) {
        spec.panic_threshold_percentage = parse_float(key, raw)?;
        config::check_threshold(key, spec.panic_threshold_percentage)?;
    }
    if let Some((key, raw)) = values.get(SCALE_DOWN_DELAY_KEYS) {
        let delay = parse_duration(key, raw, allowed::SCALE_DOWN_DELAY)?;
        if delay > WINDOW_MAX || !whole_seconds(delay) {
            return Err(Error::range(key, raw, allowed::SCALE_DOWN_DELAY));
        }
        spec.scale_down_delay = delay;
    }
    if let Some((key, raw)) = values.get(RETENTION_KEYS) {
        let retention = parse_duration(key, raw, allowed::RETENTION)?;
        if retention > WINDOW_MAX {
            return Err(Error::range(key, raw, allowed::RETENTION));
        }
        spec.scale_to_zero_pod_retention_period = retention;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
