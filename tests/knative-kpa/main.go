// Command kpa-oracle runs a trace through Knative Serving's own KPA code and prints each tick's decision as a
// JSON line, for Skiff's differential test (autoscaler/tests/knative_differential.rs).
//
// Knative's code makes the decisions: the config map is parsed by config.NewConfigFromMap, the revision's settings by
// kpa/resources.MakeDecider and autoscaling/resources.MakeMetric, the stable and panic averages by
// metrics.MetricCollector (over aggregation's buckets), and each decision by scaling.New(...).Scale. The panic
// flag is read from the decider's own OpenTelemetry gauge (kn.revision.panic.mode). The few lines of the KPA
// reconciler that are unexported (scaler.go's bounds and scale-to-zero rules, kpa.go's activeThreshold,
// resolveScrapeTarget and computeActiveCondition, and multiscaler.go's keeping of the latest valid decision) are
// ported, here and in reconciler.go, each with the function it comes from.
//
// Usage: kpa-oracle TRACE.json
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"knative.dev/networking/pkg/apis/networking"
	"knative.dev/serving/pkg/apis/autoscaling"
	autoscalingv1alpha1 "knative.dev/serving/pkg/apis/autoscaling/v1alpha1"
	asconfig "knative.dev/serving/pkg/autoscaler/config"
	"knative.dev/serving/pkg/autoscaler/config/autoscalerconfig"
	"knative.dev/serving/pkg/autoscaler/metrics"
	"knative.dev/serving/pkg/autoscaler/scaling"
	kparesources "knative.dev/serving/pkg/reconciler/autoscaling/kpa/resources"
	aresources "knative.dev/serving/pkg/reconciler/autoscaling/resources"
)

// tickInterval is Knative's decider tick (multiscaler.go's tickInterval).
const tickInterval = 2

// epoch is the trace's second 0: the current second, because Knative's decider reads the wall clock once, when
// it is created (a decider over pods already ready starts in panic mode at time.Now()).
var epoch = time.Now().Truncate(time.Second)

// Trace is the part of a trace file the oracle reads (see the README for the whole format).
type Trace struct {
	Config               map[string]string `json:"config"`
	Annotations          map[string]string `json:"annotations"`
	ContainerConcurrency int64             `json:"containerConcurrency"`
	Reachable            *bool             `json:"reachable"`
	StartReady           int               `json:"start_ready"`
	Segments             []Segment         `json:"segments"`
}

// Segment is `for` seconds of load on `ready` pods: a constant `value`, a `ramp` [from, to], or no sample at all.
// With `poke`, its first sample is the activator's report of a request at zero pods (MultiScaler.Poke).
type Segment struct {
	Poke  bool      `json:"poke"`
	For   int       `json:"for"`
	Value *float64  `json:"value"`
	Ramp  []float64 `json:"ramp"`
	Ready int       `json:"ready"`
}

// Tick is one decision, printed as a JSON line.
type Tick struct {
	T     int  `json:"t"`
	Ready int  `json:"ready"`
	Valid bool `json:"valid"`
	// Knative's scaling.Decider status after this tick: the latest valid Scale result (multiscaler.go keeps it).
	DesiredScale        int32 `json:"desired_scale"`
	ExcessBurstCapacity int32 `json:"excess_burst_capacity"`
	Panic               bool  `json:"panic"`
	// What the KPA reconciler's scale() asks for after its bounds, before handleScaleToZero; -1 when unknown.
	Bounded int32 `json:"bounded"`
	// The Deployment's replicas after the KPA reconciler has run (reconciler.go).
	Replicas    int32   `json:"replicas"`
	Initialized bool    `json:"initialized"`
	Stable      float64 `json:"observed_stable"`
	PanicValue  float64 `json:"observed_panic"`
}

// readyCounter is the decider's resources.EndpointsCounter: the trace's ready pods at the current second.
type readyCounter struct{ ready *int }

func (c readyCounter) ReadyCount() (int, error)    { return *c.ready, nil }
func (c readyCounter) NotReadyCount() (int, error) { return 0, nil }

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: kpa-oracle TRACE.json")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "kpa-oracle:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var trace Trace
	if err := json.Unmarshal(raw, &trace); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cfg, err := asconfig.NewConfigFromMap(trace.Config)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}

	pa := &autoscalingv1alpha1.PodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "trace-00001", Annotations: trace.Annotations},
		Spec: autoscalingv1alpha1.PodAutoscalerSpec{
			ContainerConcurrency: trace.ContainerConcurrency,
			ScaleTargetRef:       corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "trace-00001"},
			ProtocolType:         networking.ProtocolHTTP1,
		},
	}
	if pa.Annotations == nil {
		pa.Annotations = map[string]string{}
	}
	if _, ok := pa.Annotations[autoscaling.ClassAnnotationKey]; !ok {
		pa.Annotations[autoscaling.ClassAnnotationKey] = autoscaling.KPA
	}
	if trace.Reachable != nil && !*trace.Reachable {
		pa.Spec.Reachability = autoscalingv1alpha1.ReachabilityUnreachable
	} else {
		pa.Spec.Reachability = autoscalingv1alpha1.ReachabilityReachable
	}
	if err := pa.Validate(context.Background()); err != nil {
		return fmt.Errorf("annotations: %w", err)
	}
	decider := kparesources.MakeDecider(pa, cfg)
	metric := aresources.MakeMetric(pa, scrapeTarget(pa, cfg), cfg)
	key := types.NamespacedName{Namespace: pa.Namespace, Name: pa.Name}

	logger := zap.NewNop().Sugar()
	collector := metrics.NewMetricCollector(
		func(*autoscalingv1alpha1.Metric, *zap.SugaredLogger) (metrics.StatsScraper, error) { return nil, nil },
		logger)
	if err := collector.CreateOrUpdate(metric); err != nil {
		return fmt.Errorf("metric collector: %w", err)
	}
	defer collector.Delete(key.Namespace, key.Name)

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ready := trace.StartReady
	scaler := scaling.New(attribute.NewSet(), provider, key.Namespace, key.Name, collector,
		readyCounter{&ready}, &decider.Spec)

	// multiscaler.go's createScaler: the decider's status before its first valid tick.
	desired := int32(-1)
	ebc := int32(-1)
	switch tbc := decider.Spec.TargetBurstCapacity; tbc {
	case -1, 0:
		ebc = int32(tbc)
	default:
		ebc = int32(float64(decider.Spec.InitialScale)*decider.Spec.TotalValue - tbc)
	}

	// The revision's Deployment starts at the initial scale within the bounds.
	kpa := newReconciler(pa, cfg, bounded(pa, cfg, kparesources.GetInitialScale(cfg, pa)))

	out := json.NewEncoder(os.Stdout)
	t := 0
	lastReady := -1
	for _, seg := range trace.Segments {
		for i := 0; i < seg.For; i, t = i+1, t+1 {
			ready = seg.Ready
			now := epoch.Add(time.Duration(t) * time.Second)
			if value, ok := seg.sample(i); ok {
				collector.Record(key, now, metrics.Stat{
					PodName:                   "trace",
					AverageConcurrentRequests: value,
					RequestCount:              value,
				})
				// multiscaler.go's Poke: decide at once when the latest decision is 0 and requests are waiting.
				if seg.Poke && i == 0 && desired == 0 && value != 0 {
					if result := scaler.Scale(logger, now); result.ScaleValid {
						changed := result.DesiredPodCount != desired || (result.ExcessBurstCapacity < 0) != (ebc < 0)
						desired, ebc = result.DesiredPodCount, result.ExcessBurstCapacity
						if changed {
							kpa.reconcile(now, desired, ebc, ready)
						}
					}
				}
			}
			// controller.go: the pods informer enqueues the PA when pods change, and so does a due enqueueCB.
			if due := kpa.due(now); due || ready != lastReady {
				kpa.reconcile(now, desired, ebc, ready)
			}
			lastReady = ready
			if t%tickInterval != 0 {
				continue
			}
			result := scaler.Scale(logger, now)
			// multiscaler.go's updateLatestScale: the decider watch enqueues the PA when the desired scale or the
			// sign of the excess burst capacity changes.
			if result.ScaleValid {
				changed := result.DesiredPodCount != desired || (result.ExcessBurstCapacity < 0) != (ebc < 0)
				desired, ebc = result.DesiredPodCount, result.ExcessBurstCapacity
				if changed {
					kpa.reconcile(now, desired, ebc, ready)
				}
			}
			stable, panicValue, _ := observed(collector, decider.Spec.ScalingMetric, key, now)
			panicking, err := panicMode(reader)
			if err != nil {
				return err
			}
			tick := Tick{
				T: t, Ready: ready, Valid: result.ScaleValid, DesiredScale: desired, ExcessBurstCapacity: ebc,
				Panic: panicking, Stable: stable, PanicValue: panicValue,
				Bounded: -1, Replicas: kpa.replicas,
				Initialized: pa.Status.IsScaleTargetInitialized(),
			}
			if desired >= 0 {
				tick.Bounded = bounded(pa, cfg, desired)
			}
			if err := out.Encode(tick); err != nil {
				return err
			}
		}
	}
	return nil
}

// sample is the segment's value at its i-th second, if it has one.
func (s Segment) sample(i int) (float64, bool) {
	switch {
	case len(s.Ramp) == 2 && s.For > 1:
		return s.Ramp[0] + (s.Ramp[1]-s.Ramp[0])*float64(i)/float64(s.For-1), true
	case len(s.Ramp) == 2:
		return s.Ramp[0], true
	case s.Value != nil:
		return *s.Value, true
	}
	return 0, false
}

func observed(c *metrics.MetricCollector, metric string, key types.NamespacedName, now time.Time) (float64, float64, error) {
	if metric == autoscaling.RPS {
		return c.StableAndPanicRPS(key, now)
	}
	return c.StableAndPanicConcurrency(key, now)
}

// panicMode reads the decider's kn.revision.panic.mode gauge.
func panicMode(reader *sdkmetric.ManualReader) (bool, error) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return false, err
	}
	for _, scope := range rm.ScopeMetrics {
		for _, m := range scope.Metrics {
			if gauge, ok := m.Data.(metricdata.Gauge[int64]); ok && m.Name == "kn.revision.panic.mode" {
				for _, point := range gauge.DataPoints {
					return point.Value > 0, nil
				}
			}
		}
	}
	return false, fmt.Errorf("no kn.revision.panic.mode gauge")
}

// scrapeTarget is kpa.go's resolveScrapeTarget: with a target burst capacity of -1 the activator is always in
// the path and the revision is not scraped, so the collector never answers ErrNoData.
func scrapeTarget(pa *autoscalingv1alpha1.PodAutoscaler, cfg *autoscalerconfig.Config) string {
	tbc := cfg.TargetBurstCapacity
	if v, ok := pa.TargetBC(); ok {
		tbc = v
	}
	if tbc == -1 {
		return ""
	}
	return "trace-00001-private"
}

// bounded is scaler.go's scale() up to handleScaleToZero: min and max scale, and the initial scale until the
// scale target has been initialized.
func bounded(pa *autoscalingv1alpha1.PodAutoscaler, cfg *autoscalerconfig.Config, desired int32) int32 {
	minScale, maxScale := pa.ScaleBounds(cfg)
	initialScale := kparesources.GetInitialScale(cfg, pa)
	if initialScale > 1 && !pa.Status.IsScaleTargetInitialized() &&
		pa.Spec.Reachability != autoscalingv1alpha1.ReachabilityUnreachable {
		minScale = max(initialScale, minScale)
	}
	// scaler.go's applyBounds.
	if desired < minScale {
		return minScale
	}
	if maxScale != 0 && desired > maxScale {
		return maxScale
	}
	return desired
}

// activeThreshold is kpa.go's activeThreshold.
func activeThreshold(pa *autoscalingv1alpha1.PodAutoscaler, cfg *autoscalerconfig.Config) int {
	minScale, _ := pa.ScaleBounds(cfg)
	if !pa.Status.IsScaleTargetInitialized() {
		return int(max(minScale, kparesources.GetInitialScale(cfg, pa)))
	}
	return int(max(minScale, 1))
}
