package main

// Knative's own table for the reconciler's scale (pkg/reconciler/autoscaling/kpa/scaler_test.go, TestScaler and
// TestDisableScaleToZero, at the version in go.mod), ported row by row to check reconciler.go's port. Left out:
// the rows whose activator probe fails (the port assumes it succeeds) and the counts of callbacks and async probes.

import (
	"strconv"
	"testing"
	"time"

	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	asconfig "knative.dev/serving/pkg/autoscaler/config"
)

// The constants of Knative's kpa_test.go.
const (
	gracePeriod      = 60 * time.Second
	paStableWindow   = 45 * time.Second
	progressDeadline = 121 * time.Second
	stableWindow     = 5 * time.Minute
	activationTO     = progressDeadline + activationTimeoutBuffer
	noProxy          = -1
)

type scalerRow struct {
	label                         string
	start, scaleTo, min, max      int32
	want                          int32
	scaling                       bool
	state                         activeState
	ago                           time.Duration // since the Active condition's last transition
	proxyFor                      time.Duration // noProxy: the SKS is not in proxy mode
	annotations                   map[string]string
	unreachable, initialized      bool
	retention                     time.Duration // config-autoscaler's scale-to-zero-pod-retention-period
	allowZeroInitial, noScaleZero bool
}

func TestScalerTable(t *testing.T) {
	ann := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m["autoscaling.knative.dev/"+kv[i]] = kv[i+1]
		}
		return m
	}
	rows := []scalerRow{
		{label: "waits to scale to zero (just before idle period)", start: 1, want: 1, state: active, ago: stableWindow - time.Second, proxyFor: noProxy},
		{label: "waits to scale to zero (just before idle period), custom PA window", start: 1, want: 1, state: active, ago: paStableWindow - time.Second, proxyFor: noProxy, annotations: ann("window", paStableWindow.String())},
		{label: "custom PA window, check for standard window, no probe", start: 1, want: 0, state: active, ago: stableWindow, proxyFor: noProxy, annotations: ann("window", paStableWindow.String())},
		{label: "scale to 1 waiting for idle expires", start: 10, want: 1, scaling: true, state: active, ago: stableWindow - time.Second, proxyFor: noProxy},
		{label: "waits to scale to zero after idle period", start: 1, want: 0, state: active, ago: stableWindow, proxyFor: noProxy},
		{label: "waits to scale to zero after idle period; sks in proxy mode", start: 1, want: 0, state: active, ago: stableWindow, proxyFor: 0},
		{label: "waits to scale to zero after idle period (custom PA window)", start: 1, want: 0, state: active, ago: paStableWindow, proxyFor: noProxy, annotations: ann("window", paStableWindow.String())},
		{label: "can scale to zero after grace period, but 0 PA retention", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy, annotations: ann("scale-to-zero-pod-retention-period", "0"), retention: 2 * gracePeriod},
		{label: "can't scale to zero after grace period, but before last pod retention", start: 1, want: 0, state: inactive, ago: gracePeriod, proxyFor: noProxy, retention: 2 * gracePeriod},
		{label: "can't scale to zero after grace period, but before last pod retention, pa defined", start: 1, want: 0, state: inactive, ago: gracePeriod, proxyFor: noProxy, annotations: ann("scale-to-zero-pod-retention-period", (2 * gracePeriod).String())},
		{label: "scale to zero after grace period, and after last pod retention", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy, retention: gracePeriod},
		{label: "scale to zero after grace period", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy},
		{label: "waits to scale to zero (just before grace period)", start: 1, want: 0, state: inactive, ago: gracePeriod - time.Second, proxyFor: noProxy},
		{label: "waits to scale to zero (just before grace period, sks short)", start: 1, want: 0, state: inactive, ago: gracePeriod - time.Second, proxyFor: gracePeriod - time.Second},
		{label: "waits to scale to zero (just before grace period, sks in proxy long) and last pod timeout positive", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod - time.Second, proxyFor: gracePeriod, retention: 42 * time.Second},
		{label: "waits to scale to zero (just before grace period, sks in proxy long)", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod - time.Second, proxyFor: gracePeriod},
		{label: "scale to zero with TBC=-1", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy, annotations: ann("target-burst-capacity", "-1")},
		{label: "waits to scale to zero while activating until after deadline exceeded", start: 1, want: -1, state: activating, ago: activationTO / 2, proxyFor: noProxy},
		{label: "scale to zero while activating after deadline exceeded", start: 1, want: 0, scaling: true, state: activating, ago: activationTO + time.Second, proxyFor: noProxy},
		{label: "scale to zero while activating after revision deadline exceeded", start: 1, want: 0, scaling: true, state: activating, ago: 5*time.Second + activationTimeoutBuffer + time.Second, proxyFor: noProxy, annotations: map[string]string{"serving.knative.dev/progress-deadline": "5s"}},
		{label: "scale down to minScale before grace period", start: 10, min: 2, want: 2, scaling: true, state: inactive, ago: gracePeriod - time.Second, proxyFor: noProxy},
		{label: "scale down to minScale after grace period", start: 10, min: 2, want: 2, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy},
		{label: "scale to zero ignore last pod retention if revision is unreachable", start: 1, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy, unreachable: true, retention: 10 * gracePeriod},
		{label: "can't scale to zero if revision is unreachable, but before deadline", start: 1, want: 0, state: inactive, ago: gracePeriod - time.Second, proxyFor: noProxy, unreachable: true, retention: 10 * gracePeriod},
		{label: "ignore minScale if unreachable", start: 10, min: 2, want: 0, scaling: true, state: inactive, ago: gracePeriod, proxyFor: noProxy, unreachable: true},
		{label: "scales up", start: 1, scaleTo: 10, want: 10, scaling: true, state: activating, proxyFor: noProxy},
		{label: "scales up to maxScale", start: 1, scaleTo: 10, max: 8, want: 8, scaling: true, state: activating, proxyFor: noProxy},
		{label: "scale up inactive revision", start: 1, scaleTo: 10, want: 10, scaling: true, state: inactive, ago: gracePeriod / 2, proxyFor: noProxy},
		{label: "does not scale up from zero with no metrics", start: 0, scaleTo: -1, want: -1, state: inactive, proxyFor: noProxy},
		{label: "scales up from zero to desired one", start: 0, scaleTo: 1, want: 1, scaling: true, state: activating, proxyFor: noProxy},
		{label: "scales up from zero to desired high scale", start: 0, scaleTo: 10, want: 10, scaling: true, state: activating, proxyFor: noProxy},
		{label: "negative scale does not scale", start: 12, scaleTo: -1, want: -1, state: active, proxyFor: noProxy},
		{label: "initial scale attained, but now time to scale down", start: 2, want: 1, scaling: true, state: active, ago: 2 * time.Minute, proxyFor: noProxy, initialized: true, annotations: ann("initial-scale", "2")},
		{label: "haven't scaled to initial scale, override desired scale with initial scale", start: 0, scaleTo: 1, want: 2, scaling: true, state: activating, proxyFor: noProxy, annotations: ann("initial-scale", "2")},
		{label: "reaching initial scale zero", start: 0, want: 0, state: inactive, proxyFor: noProxy, allowZeroInitial: true, annotations: ann("initial-scale", "0")},
		{label: "unreachable revision with initialScale > 1 can scale to 0", start: 2, want: 1, scaling: true, state: active, ago: 2 * time.Minute, proxyFor: noProxy, unreachable: true, annotations: ann("initial-scale", "2")},
		// TestDisableScaleToZero.
		{label: "EnableScaleToZero == false and minScale == 0", start: 10, want: 1, scaling: true, state: activating, proxyFor: noProxy, noScaleZero: true},
		{label: "EnableScaleToZero == false and minScale == 2", start: 10, min: 2, want: 2, scaling: true, state: activating, proxyFor: noProxy, noScaleZero: true},
	}
	for _, row := range rows {
		t.Run(row.label, func(t *testing.T) {
			data := map[string]string{
				"max-scale-up-rate": "12.0", "stable-window": stableWindow.String(), "panic-window": "10s",
				"scale-to-zero-grace-period": gracePeriod.String(), "min-scale": "0", "target-burst-capacity": "200",
			}
			cfg, err := asconfig.NewConfigFromMap(data)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ScaleToZeroPodRetentionPeriod = row.retention
			cfg.AllowZeroInitialScale = row.allowZeroInitial
			cfg.EnableScaleToZero = !row.noScaleZero
			pa := &autoscalingv1alpha1.PodAutoscaler{}
			pa.Annotations = map[string]string{}
			for k, v := range row.annotations {
				pa.Annotations[k] = v
			}
			if row.min > 0 {
				pa.Annotations["autoscaling.knative.dev/min-scale"] = strconv.Itoa(int(row.min))
			}
			if row.max > 0 {
				pa.Annotations["autoscaling.knative.dev/max-scale"] = strconv.Itoa(int(row.max))
			}
			pa.Spec.Reachability = autoscalingv1alpha1.ReachabilityReachable
			if row.unreachable {
				pa.Spec.Reachability = autoscalingv1alpha1.ReachabilityUnreachable
			}
			if row.initialized {
				pa.Status.MarkScaleTargetInitialized()
			}
			now := epoch.Add(time.Hour)
			r := newReconciler(pa, cfg, row.start)
			r.progressDeadline = progressDeadline
			r.state, r.stateAt = row.state, now.Add(-row.ago)
			r.proxy = row.proxyFor != noProxy
			r.proxyAt = now.Add(-row.proxyFor)
			got := r.scale(now, row.scaleTo)
			scaled := r.replicas != row.start
			if got != row.want || scaled != row.scaling {
				t.Errorf("scale(%d) = %d (scaling %v), Knative's table wants %d (scaling %v)", row.scaleTo, got, scaled, row.want, row.scaling)
			}
		})
	}
}
