//! Global autoscaler settings: Knative's `config-autoscaler` config map, its defaults and its validation.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::duration::{fmt_duration, from_nanos, parse_go_duration, whole_seconds};
use crate::error::{Error, Result};

/// Smallest per-pod target Knative accepts (`autoscaling.TargetMin`).
pub const TARGET_MIN: f64 = 0.01;
/// Shortest stable window (`autoscaling.WindowMin`).
pub const WINDOW_MIN: Duration = Duration::from_secs(6);
/// Longest stable window, scale-down delay and pod retention (`autoscaling.WindowMax`).
pub const WINDOW_MAX: Duration = Duration::from_secs(3600);
/// Target utilisation for the rps metric, which Knative does not read from the config map.
pub const RPS_TARGET_UTILIZATION_PERCENTAGE: f64 = 70.0;

/// Allowed ranges, shared by the config map and the annotations so both say the same thing.
pub(crate) mod allowed {
    pub const WINDOW: &str = "must be between 6s and 1h, in whole seconds";
    pub const PANIC_WINDOW_PERCENTAGE: &str = "must be between 1 and 100";
    pub const PANIC_THRESHOLD_PERCENTAGE: &str = "must be between 110 and 1000";
    pub const UTILIZATION_PERCENTAGE: &str = "must be greater than 0 and at most 100";
    pub const TARGET_BURST_CAPACITY: &str = "must be -1 (unlimited) or at least 0";
    pub const SCALE_DOWN_DELAY: &str = "must be between 0s and 1h, in whole seconds";
    pub const RETENTION: &str = "must be between 0s and 1h";
    pub const RATE: &str = "must be greater than 1";
    pub const COUNT: &str = "must be a whole number between 0 and 4294967295";
}

/// Config-map keys, as Knative names them.
mod keys {
    pub const ENABLE_SCALE_TO_ZERO: &str = "enable-scale-to-zero";
    pub const CC_TARGET_PERCENTAGE: &str = "container-concurrency-target-percentage";
    pub const CC_TARGET_DEFAULT: &str = "container-concurrency-target-default";
    pub const RPS_TARGET_DEFAULT: &str = "requests-per-second-target-default";
    pub const TARGET_BURST_CAPACITY: &str = "target-burst-capacity";
    pub const STABLE_WINDOW: &str = "stable-window";
    pub const PANIC_WINDOW_PERCENTAGE: &str = "panic-window-percentage";
    pub const PANIC_THRESHOLD_PERCENTAGE: &str = "panic-threshold-percentage";
    pub const MAX_SCALE_UP_RATE: &str = "max-scale-up-rate";
    pub const MAX_SCALE_DOWN_RATE: &str = "max-scale-down-rate";
    pub const GRACE_PERIOD: &str = "scale-to-zero-grace-period";
    pub const POD_RETENTION: &str = "scale-to-zero-pod-retention-period";
    pub const SCALE_DOWN_DELAY: &str = "scale-down-delay";
    pub const INITIAL_SCALE: &str = "initial-scale";
    pub const ALLOW_ZERO_INITIAL_SCALE: &str = "allow-zero-initial-scale";
    pub const MIN_SCALE: &str = "min-scale";
    pub const MAX_SCALE: &str = "max-scale";
    pub const MAX_SCALE_LIMIT: &str = "max-scale-limit";
    pub const ACTIVATOR_CAPACITY: &str = "activator-capacity";
    /// Skiff's own key: Knative hard-codes its 2 s tick.
    pub const TICK_INTERVAL: &str = "tick-interval";
}

/// The cluster-wide autoscaler settings (Knative's `config-autoscaler`).
///
/// Every field is named after its config-map key. [`Default`] gives Knative's defaults;
/// [`AutoscalerConfig::from_map`] reads the config map's data and validates it.
#[derive(Debug, Clone, PartialEq)]
pub struct AutoscalerConfig {
    /// `enable-scale-to-zero` (true): whether an idle revision may go to zero pods.
    pub enable_scale_to_zero: bool,
    /// `container-concurrency-target-percentage` (70): the share of the per-pod concurrency target the
    /// autoscaler aims for. The config map also accepts a legacy fraction in (0, 1].
    pub container_concurrency_target_percentage: f64,
    /// `container-concurrency-target-default` (100): the concurrency target when `containerConcurrency` is 0.
    pub container_concurrency_target_default: f64,
    /// `requests-per-second-target-default` (200): the rps target when none is set.
    pub requests_per_second_target_default: f64,
    /// `target-burst-capacity` (211): spare capacity to keep before the activator leaves the request path;
    /// -1 keeps the activator always in the path, 0 takes it out as soon as pods are ready.
    pub target_burst_capacity: f64,
    /// `stable-window` (60s): the window the stable average is taken over.
    pub stable_window: Duration,
    /// `panic-window-percentage` (10): the panic window as a percentage of the stable window.
    pub panic_window_percentage: f64,
    /// `panic-threshold-percentage` (200): panic when the panic-window estimate reaches this share of ready pods.
    pub panic_threshold_percentage: f64,
    /// `max-scale-up-rate` (1000): at most this many times the ready pods in one decision.
    pub max_scale_up_rate: f64,
    /// `max-scale-down-rate` (2): at least the ready pods divided by this in one decision.
    pub max_scale_down_rate: f64,
    /// `scale-to-zero-grace-period` (30s): how long the activator is in the path before the last pod goes.
    pub scale_to_zero_grace_period: Duration,
    /// `scale-to-zero-pod-retention-period` (0s): the least time the last pod is kept once traffic stops.
    pub scale_to_zero_pod_retention_period: Duration,
    /// `scale-down-delay` (0s): scale down only to the highest count wanted over this window.
    pub scale_down_delay: Duration,
    /// `initial-scale` (1): pods a new revision starts with.
    pub initial_scale: u32,
    /// `allow-zero-initial-scale` (false): whether `initial-scale` may be 0.
    pub allow_zero_initial_scale: bool,
    /// `min-scale` (0): the default lower bound (KServe always sets its own, from `minReplicas`).
    pub min_scale: u32,
    /// `max-scale` (0 = unlimited): the default upper bound.
    pub max_scale: u32,
    /// `max-scale-limit` (0 = none): the highest `max-scale` a revision may ask for.
    pub max_scale_limit: u32,
    /// `activator-capacity` (100): requests one activator is sized for.
    pub activator_capacity: f64,
    /// `tick-interval` (2s, Skiff's own key): how often the runner asks for a decision; also the bucket width of
    /// the scale-down-delay window.
    pub tick_interval: Duration,
}

impl Default for AutoscalerConfig {
    fn default() -> Self {
        Self {
            enable_scale_to_zero: true,
            container_concurrency_target_percentage: 70.0,
            container_concurrency_target_default: 100.0,
            requests_per_second_target_default: 200.0,
            target_burst_capacity: 211.0,
            stable_window: Duration::from_secs(60),
            panic_window_percentage: 10.0,
            panic_threshold_percentage: 200.0,
            max_scale_up_rate: 1000.0,
            max_scale_down_rate: 2.0,
            scale_to_zero_grace_period: Duration::from_secs(30),
            scale_to_zero_pod_retention_period: Duration::ZERO,
            scale_down_delay: Duration::ZERO,
            initial_scale: 1,
            allow_zero_initial_scale: false,
            min_scale: 0,
            max_scale: 0,
            max_scale_limit: 0,
            activator_capacity: 100.0,
            tick_interval: Duration::from_secs(2),
        }
    }
}

impl AutoscalerConfig {
    /// Reads a `config-autoscaler` config map's data over the defaults, then validates it.
    ///
    /// Unknown keys (such as Knative's `_example`) are ignored.
    pub fn from_map(data: &BTreeMap<String, String>) -> Result<Self> {
        use keys::*;
        let mut c = Self::default();
        let read = Reader(data);
        read.bool(ENABLE_SCALE_TO_ZERO, &mut c.enable_scale_to_zero)?;
        read.bool(ALLOW_ZERO_INITIAL_SCALE, &mut c.allow_zero_initial_scale)?;
        read.float(CC_TARGET_PERCENTAGE, &mut c.container_concurrency_target_percentage)?;
        read.float(CC_TARGET_DEFAULT, &mut c.container_concurrency_target_default)?;
        read.float(RPS_TARGET_DEFAULT, &mut c.requests_per_second_target_default)?;
        read.float(TARGET_BURST_CAPACITY, &mut c.target_burst_capacity)?;
        read.float(PANIC_WINDOW_PERCENTAGE, &mut c.panic_window_percentage)?;
        read.float(PANIC_THRESHOLD_PERCENTAGE, &mut c.panic_threshold_percentage)?;
        read.float(MAX_SCALE_UP_RATE, &mut c.max_scale_up_rate)?;
        read.float(MAX_SCALE_DOWN_RATE, &mut c.max_scale_down_rate)?;
        read.float(ACTIVATOR_CAPACITY, &mut c.activator_capacity)?;
        read.count(INITIAL_SCALE, &mut c.initial_scale)?;
        read.count(MIN_SCALE, &mut c.min_scale)?;
        read.count(MAX_SCALE, &mut c.max_scale)?;
        read.count(MAX_SCALE_LIMIT, &mut c.max_scale_limit)?;
        read.duration(STABLE_WINDOW, allowed::WINDOW, &mut c.stable_window)?;
        read.duration(GRACE_PERIOD, "must be greater than 0s", &mut c.scale_to_zero_grace_period)?;
        read.duration(POD_RETENTION, allowed::RETENTION, &mut c.scale_to_zero_pod_retention_period)?;
        read.duration(SCALE_DOWN_DELAY, allowed::SCALE_DOWN_DELAY, &mut c.scale_down_delay)?;
        read.duration(TICK_INTERVAL, TICK_ALLOWED, &mut c.tick_interval)?;
        // Knative's legacy form: a fraction in (0, 1] instead of a percentage.
        if c.container_concurrency_target_percentage > 0.0 && c.container_concurrency_target_percentage <= 1.0 {
            c.container_concurrency_target_percentage *= 100.0;
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks every setting; the message names the key and its allowed range.
    pub fn validate(&self) -> Result<()> {
        use keys::*;
        let window = |key: &str, d: Duration, min: Duration, max: Duration, allowed: &str| {
            if d < min || d > max || !whole_seconds(d) {
                Err(Error::range(key, fmt_duration(d), allowed))
            } else {
                Ok(())
            }
        };
        window(STABLE_WINDOW, self.stable_window, WINDOW_MIN, WINDOW_MAX, allowed::WINDOW)?;
        window(SCALE_DOWN_DELAY, self.scale_down_delay, Duration::ZERO, WINDOW_MAX, allowed::SCALE_DOWN_DELAY)?;
        window(TICK_INTERVAL, self.tick_interval, Duration::from_secs(1), Duration::from_secs(60), TICK_ALLOWED)?;
        if self.scale_to_zero_grace_period.is_zero() {
            return Err(Error::range(GRACE_PERIOD, "0s", "must be greater than 0s"));
        }
        if self.scale_to_zero_pod_retention_period > WINDOW_MAX {
            let value = fmt_duration(self.scale_to_zero_pod_retention_period);
            return Err(Error::range(POD_RETENTION, value, allowed::RETENTION));
        }
        check_percentage(PANIC_WINDOW_PERCENTAGE, self.panic_window_percentage)?;
        check_threshold(PANIC_THRESHOLD_PERCENTAGE, self.panic_threshold_percentage)?;
        check_utilization(CC_TARGET_PERCENTAGE, self.container_concurrency_target_percentage)?;
        let target = self.container_concurrency_target_default * self.container_concurrency_target_percentage / 100.0;
        if target.is_nan() || target < TARGET_MIN {
            return Err(Error::range(
                CC_TARGET_DEFAULT,
                self.container_concurrency_target_default,
                format!(
                    "with {CC_TARGET_PERCENTAGE} {} the per-pod target is {}; it must be at least {TARGET_MIN}",
                    self.container_concurrency_target_percentage,
                    (target * 1e6).round() / 1e6,
                ),
            ));
        }
        if self.requests_per_second_target_default.is_nan() || self.requests_per_second_target_default < TARGET_MIN {
            let allowed = format!("must be at least {TARGET_MIN}");
            return Err(Error::range(RPS_TARGET_DEFAULT, self.requests_per_second_target_default, allowed));
        }
        check_burst_capacity(TARGET_BURST_CAPACITY, self.target_burst_capacity)?;
        check_rate(MAX_SCALE_UP_RATE, self.max_scale_up_rate)?;
        check_rate(MAX_SCALE_DOWN_RATE, self.max_scale_down_rate)?;
        if self.activator_capacity.is_nan() || self.activator_capacity < 1.0 {
            return Err(Error::range(ACTIVATOR_CAPACITY, self.activator_capacity, "must be at least 1"));
        }
        if self.initial_scale == 0 && !self.allow_zero_initial_scale {
            return Err(Error::range(INITIAL_SCALE, 0, INITIAL_SCALE_ALLOWED));
        }
        if self.max_scale_limit > 0 && !(1..=self.max_scale_limit).contains(&self.max_scale) {
            let allowed = format!("must be between 1 and {MAX_SCALE_LIMIT} ({})", self.max_scale_limit);
            return Err(Error::range(MAX_SCALE, self.max_scale, allowed));
        }
        if self.max_scale > 0 && self.min_scale > self.max_scale {
            let message = format!("{} is more than {MAX_SCALE} ({})", self.min_scale, self.max_scale);
            return Err(Error::conflict(MIN_SCALE, message));
        }
        Ok(())
    }
}

const TICK_ALLOWED: &str = "must be between 1s and 1m, in whole seconds";
const INITIAL_SCALE_ALLOWED: &str = "must be at least 1 (0 needs allow-zero-initial-scale: true)";

pub(crate) fn check_percentage(key: &str, value: f64) -> Result<()> {
    in_range(key, value, 1.0, 100.0, allowed::PANIC_WINDOW_PERCENTAGE)
}

pub(crate) fn check_threshold(key: &str, value: f64) -> Result<()> {
    in_range(key, value, 110.0, 1000.0, allowed::PANIC_THRESHOLD_PERCENTAGE)
}

pub(crate) fn check_utilization(key: &str, value: f64) -> Result<()> {
    if value > 0.0 && value <= 100.0 { Ok(()) } else { Err(Error::range(key, value, allowed::UTILIZATION_PERCENTAGE)) }
}

pub(crate) fn check_burst_capacity(key: &str, value: f64) -> Result<()> {
    if value >= 0.0 || value == -1.0 { Ok(()) } else { Err(Error::range(key, value, allowed::TARGET_BURST_CAPACITY)) }
}

fn check_rate(key: &str, value: f64) -> Result<()> {
    if value > 1.0 { Ok(()) } else { Err(Error::range(key, value, allowed::RATE)) }
}

fn in_range(key: &str, value: f64, min: f64, max: f64, allowed: &str) -> Result<()> {
    if (min..=max).contains(&value) { Ok(()) } else { Err(Error::range(key, value, allowed)) }
}

/// Reads typed values from string data, leaving the target unchanged when the key is absent.
pub(crate) struct Reader<'a>(pub(crate) &'a BTreeMap<String, String>);

impl Reader<'_> {
    fn raw(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|value| value.trim())
    }

    fn bool(&self, key: &str, out: &mut bool) -> Result<()> {
        if let Some(raw) = self.raw(key) {
            *out = parse_bool(raw).ok_or_else(|| Error::parse(key, raw, "a boolean (true or false)"))?;
        }
        Ok(())
    }

    fn float(&self, key: &str, out: &mut f64) -> Result<()> {
        if let Some(raw) = self.raw(key) {
            *out = parse_float(key, raw)?;
        }
        Ok(())
    }

    fn count(&self, key: &str, out: &mut u32) -> Result<()> {
        if let Some(raw) = self.raw(key) {
            *out = parse_count(key, raw)?;
        }
        Ok(())
    }

    fn duration(&self, key: &str, allowed: &str, out: &mut Duration) -> Result<()> {
        if let Some(raw) = self.raw(key) {
            *out = parse_duration(key, raw, allowed)?;
        }
        Ok(())
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(raw: &str) -> Option<bool> {
    match raw {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// A finite number.
pub(crate) fn parse_float(key: &str, raw: &str) -> Result<f64> {
    raw.parse::<f64>().ok().filter(|value| value.is_finite()).ok_or_else(|| Error::parse(key, raw, "a number"))
}

/// A whole number of pods; a negative one is out of range rather than unparsable.
pub(crate) fn parse_count(key: &str, raw: &str) -> Result<u32> {
    let value: i64 = raw.parse().map_err(|_| Error::parse(key, raw, "a whole number"))?;
    u32::try_from(value).map_err(|_| Error::range(key, raw, allowed::COUNT))
}

/// A non-negative Go duration; a negative one is out of range with the given message.
pub(crate) fn parse_duration(key: &str, raw: &str, allowed: &str) -> Result<Duration> {
    let nanos =
        parse_go_duration(raw).ok_or_else(|| Error::parse(key, raw, "a duration such as 60s, 1m30s or 500ms"))?;
    from_nanos(nanos).ok_or_else(|| Error::range(key, raw, allowed))
}

#[cfg(test)]
mod tests;
