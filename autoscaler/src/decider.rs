//! The per-revision decider: Knative's `autoscaler.Scale` together with the rules the KPA reconciler applies to
//! its answer (scale bounds, initial scale, activation, scale to zero).

use std::time::{Duration, Instant};

use crate::spec::ScalingSpec;
use crate::window::{MaxWindow, Window};

/// One scaling decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Pods the revision should have now.
    pub desired_pods: u32,
    /// Whether the decider is in panic mode (it scales on the panic window and never scales down).
    pub panic: bool,
    /// Spare capacity beyond the target burst capacity: ready pods × per-pod capacity − target burst capacity −
    /// observed panic value, rounded down. Negative means the activator should stay in the request path;
    /// -1 always when the target burst capacity is -1, and 0 always when it is 0.
    pub excess_burst_capacity: i64,
    /// The metric's average over the stable window.
    pub observed_stable: f64,
    /// The metric's average over the panic window.
    pub observed_panic: f64,
    /// No traffic for a stable window and scale to zero is allowed: the activator should take the path now, and
    /// the last pod goes once the grace period is over.
    pub idle: bool,
    /// The revision gave up starting: no pod became ready within the activation timeout (the progress deadline
    /// plus Knative's buffer, [`ScalingSpec::activation_timeout`]) while nothing asked for pods, so it is at zero
    /// (Knative's PodAutoscaler turning inactive with reason `TimedOut`). Stays true until a request or traffic
    /// comes again.
    pub activation_timed_out: bool,
}

impl Decision {
    /// Whether requests should go through the activator rather than straight to pods (Knative's SKS proxy mode).
    pub fn activator_in_path(&self) -> bool {
        self.desired_pods == 0 || self.idle || self.excess_burst_capacity < 0
    }
}

/// Decides the pod count of one revision from the metric it is fed.
///
/// Time is passed in: the runner calls [`Decider::record`] with the revision-wide metric about once a second
/// (zeros included while pods are up), [`Decider::decide`] every tick, and [`Decider::poke`] when a request
/// arrives for a revision without ready pods.
#[derive(Debug, Clone)]
pub struct Decider {
    spec: ScalingSpec,
    /// The origin of the windows' seconds.
    epoch: Instant,
    stable: Window,
    panic: Window,
    /// Highest count wanted over the scale-down delay, when there is one.
    delay: Option<MaxWindow>,
    /// When the panic threshold was last crossed, while in panic mode.
    panic_since: Option<Instant>,
    /// The most pods wanted during this panic.
    max_panic_pods: u32,
    /// Latest traffic or activation; `None` while the revision has never been active.
    last_activity: Option<Instant>,
    /// Since when the revision has been activating: pods wanted, fewer ready than the active threshold (Knative's
    /// PodAutoscaler with `Active=Unknown`). A new revision starts so; a poke, or pods wanted with none ready,
    /// starts it again; enough ready pods or the activation timeout end it.
    activating_since: Option<Instant>,
    /// When the activation timeout is looked at again: Knative's `handleScaleToZero`, the first time an
    /// activating revision wants no pod, asks to be called back after the whole timeout.
    activation_check: Option<Instant>,
    /// The latest activation timed out, and nothing has asked for pods since.
    timed_out: bool,
    /// The pods the latest decision asked for: what an activating revision keeps while it wants none.
    replicas: u32,
    /// Whether the latest decision's bounded count wanted pods (a drop to none makes Knative reconcile).
    wanted: bool,
    /// Whether the latest decision kept pods only because the revision was activating.
    holding: bool,
    /// The revision has had its initial scale (or its minimum) ready once.
    initialized: bool,
    /// The latest count computed from metrics, before bounds and scale-to-zero rules: kept while no data comes.
    raw_desired: u32,
    /// Latest excess burst capacity, kept while no data comes.
    excess_burst_capacity: i64,
    /// The first decision of the current idle spell (Knative's PodAutoscaler turning Inactive).
    idle_since: Option<Instant>,
    /// Since when the decisions have put the activator in the request path (Knative's ServerlessService in proxy
    /// mode, which it starts in).
    in_path_since: Option<Instant>,
}

impl Decider {
    /// A decider for a new revision, created at `now`.
    pub fn new(spec: ScalingSpec, now: Instant) -> Self {
        let delay =
            (!spec.scale_down_delay.is_zero()).then(|| MaxWindow::new(spec.scale_down_delay, spec.tick_interval));
        let excess_burst_capacity = match spec.target_burst_capacity {
            tbc if tbc <= 0.0 => tbc as i64,
            // Knative's multiscaler.go (createScaler) converts with int32(...), truncating toward zero.
            tbc => (f64::from(spec.initial_scale) * spec.target - tbc).trunc() as i64,
        };
        Self {
            stable: Window::new(spec.stable_window, spec.aggregation),
            panic: Window::new(spec.panic_window(), spec.aggregation),
            delay,
            epoch: now,
            panic_since: None,
            max_panic_pods: 0,
            last_activity: (spec.initial_scale > 0).then_some(now),
            activating_since: (spec.initial_pods() > 0).then_some(now),
            activation_check: None,
            timed_out: false,
            replicas: spec.initial_pods(),
            wanted: false,
            holding: false,
            initialized: false,
            raw_desired: 0,
            excess_burst_capacity,
            idle_since: None,
            in_path_since: Some(now),
            spec,
        }
    }

    /// A decider taking over a revision that already has `ready_pods` (after the autoscaler restarts).
    ///
    /// With more than one pod it starts in panic mode, so that it does not scale down before its windows have
    /// filled again.
    pub fn resume(spec: ScalingSpec, now: Instant, ready_pods: u32) -> Self {
        let mut decider = Self::new(spec, now);
        decider.initialized = true;
        decider.raw_desired = ready_pods;
        decider.replicas = ready_pods;
        decider.activating_since = None;
        decider.last_activity = (ready_pods > 0).then_some(now);
        decider.in_path_since = None;
        if ready_pods > 1 {
            decider.panic_since = Some(now);
            decider.max_panic_pods = ready_pods;
        }
        decider
    }

    /// The settings this decider runs with.
    pub fn spec(&self) -> &ScalingSpec {
        &self.spec
    }

    /// Marks whether any route sends traffic to the revision (an unreachable one may scale down at once).
    pub fn set_reachable(&mut self, reachable: bool) {
        self.spec.reachable = reachable;
    }

    /// Adds one observation of the metric: the revision-wide concurrency (or requests per second) for `now`'s
    /// second. Observations in the same second add up, so pods and the activator may each record their share.
    /// Negative and non-finite values count as 0.
    pub fn record(&mut self, now: Instant, value: f64) {
        let value = if value.is_finite() && value > 0.0 { value } else { 0.0 };
        let at = self.since_epoch(now);
        self.stable.record(at, value);
        self.panic.record(at, value);
        if value > 0.0 {
            self.touch(now);
        }
    }

    /// A request arrived while the revision has no ready pod: decide at once, wanting at least one pod
    /// (or the activation scale) until a pod is ready or the activation times out.
    pub fn poke(&mut self, now: Instant, ready_pods: u32) -> Decision {
        if ready_pods < self.active_threshold() {
            self.start_activating(now);
        }
        self.touch(now);
        self.decide(now, ready_pods)
    }

    /// Decides the pod count at `now`, given the pods ready now.
    pub fn decide(&mut self, now: Instant, ready_pods: u32) -> Decision {
        if ready_pods >= self.spec.min_scale.max(self.spec.initial_scale) {
            self.initialized = true;
        }
        if ready_pods >= self.active_threshold() && self.activating_since.take().is_some() {
            // Active (Knative's computeActiveCondition): the activation is over. Knative keeps the pods of a
            // revision that turned active for a stable window; the decider counts from the last activity, which
            // for a revision whose pods were kept only because they were starting may be long past: then the
            // readiness counts as activity, so that the new pod is not dropped the moment it is ready.
            self.activation_check = None;
            let quiet = self.last_activity.map_or(Duration::MAX, |at| now.saturating_duration_since(at));
            if self.holding && quiet >= self.spec.stable_window {
                self.touch(now);
            }
        }
        let at = self.since_epoch(now);
        let (observed_stable, observed_panic) = (self.stable.average(at), self.panic.average(at));
        // Like Knative, decide nothing new without data for a whole stable window, unless the target burst
        // capacity is -1: then Knative does not scrape the pods (kpa.go's resolveScrapeTarget), and its metric
        // collector answers an empty window with zeros rather than "no data".
        if !self.stable.is_empty(at) || self.spec.target_burst_capacity == -1.0 {
            self.raw_desired = self.scale(now, ready_pods, observed_stable, observed_panic);
            self.excess_burst_capacity = self.compute_excess_burst_capacity(ready_pods, observed_panic);
        }
        let (desired_pods, idle) = self.apply_bounds(now, self.raw_desired);
        self.replicas = desired_pods;
        if desired_pods > 0 && ready_pods < self.active_threshold() {
            // Pods wanted and too few ready: activating (Knative's computeActiveCondition).
            self.start_activating(now);
        }
        let decision = Decision {
            desired_pods,
            panic: self.panic_since.is_some(),
            excess_burst_capacity: self.excess_burst_capacity,
            observed_stable,
            observed_panic,
            idle,
            activation_timed_out: self.timed_out,
        };
        self.idle_since = if idle { self.idle_since.or(Some(now)) } else { None };
        self.in_path_since = if decision.activator_in_path() { self.in_path_since.or(Some(now)) } else { None };
        decision
    }

    /// Knative's `Scale`: pods for the stable and panic averages within the rate limits, panic mode, and the
    /// scale-down delay.
    fn scale(&mut self, now: Instant, ready_pods: u32, observed_stable: f64, observed_panic: f64) -> u32 {
        let spec = &self.spec;
        let ready = f64::from(ready_pods.max(1));
        let max_up = (spec.max_scale_up_rate * ready).ceil();
        let max_down = if spec.reachable { (ready / spec.max_scale_down_rate).floor() } else { 0.0 };
        let target = spec.per_pod_target();
        let stable_want = (observed_stable / target).ceil();
        let panic_want = (observed_panic / target).ceil();
        let mut stable_pods = pods(stable_want.max(max_down).min(max_up));
        let mut panic_pods = pods(panic_want.max(max_down).min(max_up));
        if spec.activation_scale > 1 {
            if stable_want > 0.0 {
                stable_pods = stable_pods.max(spec.activation_scale);
            }
            if panic_want > 0.0 {
                panic_pods = panic_pods.max(spec.activation_scale);
            }
        }

        if panic_want / ready >= spec.panic_threshold() {
            // Enter panic, or stay in it for another stable window.
            self.panic_since = Some(now);
        } else if self.panic_since.is_some_and(|since| since + spec.stable_window < now) {
            // The burst has been in the stable window for a whole window: back to stable mode.
            self.panic_since = None;
            self.max_panic_pods = 0;
        }

        let mut desired = stable_pods;
        if self.panic_since.is_some() {
            // Provision for the larger estimate, and never scale down while panicking.
            self.max_panic_pods = self.max_panic_pods.max(desired.max(panic_pods));
            desired = self.max_panic_pods;
        }
        if spec.reachable
            && let Some(delay) = &mut self.delay
        {
            delay.record(now.saturating_duration_since(self.epoch), desired);
            desired = delay.current();
        }
        desired
    }

    fn compute_excess_burst_capacity(&self, ready_pods: u32, observed_panic: f64) -> i64 {
        let tbc = self.spec.target_burst_capacity;
        if tbc > 0.0 {
            (f64::from(ready_pods) * self.spec.target - tbc - observed_panic).floor() as i64
        } else if tbc == 0.0 {
            0
        } else {
            -1
        }
    }

    /// The KPA reconciler's part: min, max and initial scale, then its scale-to-zero rules. An activating
    /// revision keeps its pods until the activation timeout; otherwise the last pod goes a stable window plus the
    /// longer of the grace and retention periods after the last activity, or sooner when the activator has been
    /// in the path for the grace period already.
    fn apply_bounds(&mut self, now: Instant, desired: u32) -> (u32, bool) {
        let spec = &self.spec;
        let mut min = if spec.reachable { spec.min_scale } else { 0 };
        // Knative's scaler.go holds an initial scale above 1 until it has been reached once; one pod is held by
        // the activation instead.
        if spec.reachable && !self.initialized && spec.initial_scale > 1 {
            min = min.max(spec.initial_scale);
        }
        let mut desired = desired.max(min);
        if spec.max_scale != 0 {
            desired = desired.min(spec.max_scale);
        }
        let wanted = std::mem::replace(&mut self.wanted, desired > 0);
        self.holding = false;
        if desired > 0 {
            self.timed_out = false;
            // A callback that finds pods wanted is spent (Knative's handleScaleToZero returns early).
            self.activation_check = self.activation_check.filter(|at| *at > now);
            return (desired, false);
        }
        if !self.spec.enable_scale_to_zero {
            return (1, false);
        }
        if self.timed_out {
            return (0, true);
        }
        if let Some(since) = self.activating_since.filter(|_| self.spec.reachable) {
            return self.hold_activation(now, since, wanted);
        }
        let spec = &self.spec;
        let quiet = self.last_activity.map_or(Duration::MAX, |at| now.saturating_duration_since(at));
        let retention = if spec.reachable { spec.scale_to_zero_pod_retention_period } else { Duration::ZERO };
        let needed = spec.stable_window.saturating_add(spec.scale_to_zero_grace_period.max(retention));
        let idle = quiet >= spec.stable_window;
        // Knative's fast path (scaler.go's handleScaleToZero): once idle for the retention period (and for the
        // 3 s after which Knative looks again), the last pod goes as soon as the activator has been in the path for
        // the grace period.
        let inactive_for = self.idle_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let in_path_for = self.in_path_since.map_or(Duration::ZERO, |since| now.saturating_duration_since(since));
        let fast = inactive_for >= retention.max(RECHECK_AFTER_IDLE) && in_path_for >= spec.scale_to_zero_grace_period;
        (if quiet >= needed || (idle && fast) { 0 } else { 1 }, idle)
    }

    /// Knative's `handleScaleToZero` while activating: an activating revision that wants no pod keeps the ones
    /// it has, unless it has been activating for longer than the activation timeout, which Knative looks at when
    /// it reconciles: the first time the revision wants no pod (it then asks to be called back after the whole
    /// timeout), each time the decider's count drops to none, and at that callback (which runs a moment after its
    /// time, so by then the timeout has passed). Past it, the revision gives up: zero pods.
    fn hold_activation(&mut self, now: Instant, since: Instant, wanted: bool) -> (u32, bool) {
        let timeout = self.spec.activation_timeout();
        let activating_for = now.saturating_duration_since(since);
        let reconciles = self.activation_check.is_none() || wanted;
        let called_back = self.activation_check.is_some_and(|at| at <= now);
        if (reconciles && activating_for > timeout) || called_back {
            self.activating_since = None;
            self.activation_check = None;
            self.timed_out = true;
            return (0, true);
        }
        if self.activation_check.is_none() {
            self.activation_check = Some(now + timeout);
        }
        // What Knative keeps is the Deployment's replicas; a poke at zero wants at least one pod.
        let hold = if self.replicas > 0 { self.replicas } else { self.spec.activation_scale.max(1) };
        self.holding = true;
        (hold, false)
    }

    /// Knative's `activeThreshold`: the ready pods that make the revision active (its minimum, at least 1, and
    /// its initial scale until that has been reached once); none while it is unreachable.
    fn active_threshold(&self) -> u32 {
        let spec = &self.spec;
        let initial = if self.initialized { 1 } else { spec.initial_scale };
        if spec.reachable { spec.min_scale.max(initial) } else { 0 }
    }

    /// Marks the revision activating from `now`, unless it already is.
    fn start_activating(&mut self, now: Instant) {
        if self.activating_since.is_none() {
            self.activating_since = Some(now);
            self.activation_check = None;
        }
        self.timed_out = false;
    }

    fn touch(&mut self, now: Instant) {
        self.last_activity = Some(self.last_activity.map_or(now, |at| at.max(now)));
    }

    fn since_epoch(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.epoch)
    }
}

/// How long after a revision goes idle with the activator in its path Knative's KPA reconciler looks again
/// (scaler.go's handleScaleToZero re-enqueues the PodAutoscaler after 3 s).
const RECHECK_AFTER_IDLE: Duration = Duration::from_secs(3);

/// A non-negative pod count from a float (NaN → 0, saturating).
fn pods(value: f64) -> u32 {
    if value.is_nan() || value <= 0.0 { 0 } else { value.min(f64::from(u32::MAX)) as u32 }
}

#[cfg(test)]
mod tests;
