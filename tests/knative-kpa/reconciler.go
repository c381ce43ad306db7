package main

// The KPA reconciler's scale-to-zero rules, ported from Knative Serving (the version in go.mod) because they are
// unexported and read a live cluster (the PodAutoscaler's Active condition, the ServerlessService's mode, a probe
// of the activator), and Knative stamps their times with the wall clock. Every rule below names its source; the
// state they keep is the part of the PA and SKS statuses those rules read, in the trace's simulated time.
//
// The reconciler runs when Knative's controller.go would enqueue the PA: when the decider's status changes
// (multiscaler.go's updateLatestScale), when the ready pods change (the pods informer), and when handleScaleToZero
// asks to be called again (enqueueCB), at whole seconds. Assumed, as on a healthy cluster: the activator probe
// succeeds and the SKS reaches the mode it is asked for in the same reconcile.

import (
	"time"

	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	"knative.dev/serving/pkg/autoscaler/config/autoscalerconfig"
	aresources "knative.dev/serving/pkg/reconciler/autoscaling/resources"
)

// activeState is the PA's Active condition.
type activeState int

const (
	activating activeState = iota // Active=Unknown, a new PA's
	active                        // Active=True
	inactive                      // Active=False
)

const (
	// scaler.go's scaleUnknown.
	scaleUnknown = -1
	// scaler.go's activationTimeoutBuffer, added to the progress deadline.
	activationTimeoutBuffer = 30 * time.Second
	// config-deployment's progress-deadline default.
	defaultProgressDeadline = 600 * time.Second
)

// reconciler holds the status fields the KPA reconciler reads between reconciles.
type reconciler struct {
	pa  *autoscalingv1alpha1.PodAutoscaler
	cfg *autoscalerconfig.Config
	// The Active condition and when it last changed.
	state   activeState
	stateAt time.Time
	// Whether the SKS is in proxy mode (the activator in the path), and since when.
	proxy   bool
	proxyAt time.Time
	// The Deployment's replicas.
	replicas int32
	// config-deployment's progress-deadline.
	progressDeadline time.Duration
	// When handleScaleToZero asked to be reconciled again (the earliest pending).
	enqueued *time.Time
	// Whether the reconcile now running is that callback (see handleScaleToZero's activating case).
	callback bool
}

// enqueue is the scaler's enqueueCB: reconcile again after d.
func (r *reconciler) enqueue(now time.Time, d time.Duration) {
	at := now.Add(d)
	if r.enqueued == nil || at.Before(*r.enqueued) {
		r.enqueued = &at
	}
}

// due reports whether an enqueued reconcile is due at now, and takes it (one enqueued during a reconcile at now
// runs at the next second); the next reconcile is then that callback.
func (r *reconciler) due(now time.Time) bool {
	if r.enqueued == nil || r.enqueued.After(now) {
		return false
	}
	r.enqueued = nil
	r.callback = true
	return true
}

func newReconciler(pa *autoscalingv1alpha1.PodAutoscaler, cfg *autoscalerconfig.Config, replicas int32) *reconciler {
	// kpa.go's ReconcileKind creates the SKS in proxy mode before anything else.
	return &reconciler{
		pa: pa, cfg: cfg, state: activating, stateAt: epoch, proxy: true, proxyAt: epoch, replicas: replicas,
		progressDeadline: defaultProgressDeadline,
	}
}

// reconcile is kpa.go's ReconcileKind from the decider's status onwards: scale (scaler.go's scale), the SKS mode,
// then computeActiveCondition.
func (r *reconciler) reconcile(now time.Time, desiredScale, ebc int32, ready int) {
	want := r.scale(now, desiredScale)
	r.callback = false

	// kpa.go: the activator leaves the path when want > 0 and the excess burst capacity is not negative.
	proxy := true
	if !(want == scaleUnknown && r.state == inactive) && want > 0 && ebc >= 0 {
		proxy = false
	}
	if proxy != r.proxy {
		// The SKS changes mode: its informer enqueues the PA again.
		r.enqueue(now, 0)
		if proxy {
			r.proxyAt = now
		}
	}
	r.proxy = proxy

	if ready >= activeThreshold(r.pa, r.cfg) {
		r.pa.Status.MarkScaleTargetInitialized()
	}
	r.computeActiveCondition(now, want, ready)
}

// scale is scaler.go's scale: the bounds, then handleScaleToZero, then the write of the Deployment's replicas.
func (r *reconciler) scale(now time.Time, desiredScale int32) int32 {
	if desiredScale < 0 && r.state != activating {
		return desiredScale
	}
	desired := bounded(r.pa, r.cfg, desiredScale)
	desired, apply := r.handleScaleToZero(now, desired)
	if apply {
		r.replicas = desired
	}
	return desired
}

// handleScaleToZero is scaler.go's handleScaleToZero.
func (r *reconciler) handleScaleToZero(now time.Time, desired int32) (int32, bool) {
	if desired != 0 {
		return desired, true
	}
	if !r.cfg.EnableScaleToZero {
		return 1, true
	}
	switch r.state {
	case activating:
		activationTimeout := r.progressDeadline + activationTimeoutBuffer
		if d, ok := r.pa.ProgressDeadline(); ok {
			activationTimeout = d + activationTimeoutBuffer
		}
		// pa.Status.CanFailActivation: activating for longer than the timeout. Knative's callback runs a moment
		// after the time it asked for (the work queue hands the PA over once the delay is past, the reconcile then
		// reads the clock, and the condition's time is stored in whole seconds), so a callback asked for at the
		// start of the activation finds it past the timeout; at the port's whole seconds it comes exactly at
		// it, and counts as past.
		activatingFor := now.Sub(r.stateAt)
		if activatingFor > activationTimeout || (r.callback && activatingFor == activationTimeout) {
			return desired, true
		}
		r.enqueue(now, activationTimeout)
		return scaleUnknown, false
	case active:
		sw := aresources.StableWindow(r.pa, r.cfg)
		if af := now.Sub(r.stateAt); af < sw {
			r.enqueue(now, sw-af)
			return 1, true
		}
		if r.proxy {
			r.enqueue(now, 3*time.Second)
		}
		return desired, false
	}
	lastPodTimeout := lastPodRetention(r.pa, r.cfg)
	inactiveFor := now.Sub(r.stateAt)
	if inactiveFor >= max(r.cfg.ScaleToZeroGracePeriod, lastPodTimeout) {
		return desired, true
	}
	if lastPodTimeout > 0 && inactiveFor < lastPodTimeout {
		r.enqueue(now, lastPodTimeout-inactiveFor)
		return desired, false
	}
	// The SKS's ProxyFor: how long the activator has been in the path.
	proxyFor := time.Duration(0)
	if r.proxy {
		proxyFor = now.Sub(r.proxyAt)
	}
	to := r.cfg.ScaleToZeroGracePeriod - proxyFor
	if to <= 0 {
		return desired, true
	}
	r.enqueue(now, to)
	return desired, false
}

// lastPodRetention is scaler.go's lastPodRetention.
func lastPodRetention(pa *autoscalingv1alpha1.PodAutoscaler, cfg *autoscalerconfig.Config) time.Duration {
	if pa.Spec.Reachability == autoscalingv1alpha1.ReachabilityUnreachable {
		return 0
	}
	if d, ok := pa.ScaleToZeroPodRetention(); ok {
		return d
	}
	return cfg.ScaleToZeroPodRetentionPeriod
}

// computeActiveCondition is kpa.go's computeActiveCondition (after its MarkScaleTargetInitialized).
func (r *reconciler) computeActiveCondition(now time.Time, want int32, ready int) {
	minReady := activeThreshold(r.pa, r.cfg)
	switch {
	case want == 0 || minReady == 0:
		r.mark(now, inactive)
	case ready < minReady:
		if want > 0 || r.state != inactive {
			r.mark(now, activating)
		} else {
			r.mark(now, inactive)
		}
	default:
		if want > 0 || r.state != inactive {
			r.mark(now, active)
		}
	}
}

// mark sets the Active condition; like knative.dev/pkg's condition manager, the time changes only with the state.
func (r *reconciler) mark(now time.Time, state activeState) {
	if r.state != state {
		r.state, r.stateAt = state, now
	}
}
