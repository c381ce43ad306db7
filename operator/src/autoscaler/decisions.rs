//! The autoscaler's latest decision of every revision on the controller's `/metrics`, read at
//! each scrape from the leader's runner (a follower exports none): desired pods, panic mode, the
//! stable and panic averages of the metric, the excess burst capacity, and whether the revision
//! gave up starting (its activation timed out), labelled by the revision's namespace and name.
//! `skiff load` and dashboards draw the panic beside the replicas.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;
use skiff_autoscaler::Decision;
use skiff_dataplane::RevisionKey;

use super::api::AutoscalerGate;

/// The collector, over the gate through which the leader's autoscaler appears.
pub struct Decisions(pub AutoscalerGate);

impl fmt::Debug for Decisions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decisions").field("leading", &self.0.get().is_some()).finish()
    }
}

/// One exported value of a decision.
type Read = fn(&Decision) -> f64;

/// The gauges: name (under the registry's prefix), help, and how each reads a decision.
const GAUGES: [(&str, &str, Read); 6] = [
    ("autoscaler_desired_pods", "Pods the autoscaler wants for the revision", |d| f64::from(d.desired_pods)),
    ("autoscaler_panic", "1 while the autoscaler is in panic mode for the revision", |d| f64::from(u8::from(d.panic))),
    ("autoscaler_observed_stable", "The scaling metric's average over the stable window", |d| d.observed_stable),
    ("autoscaler_observed_panic", "The scaling metric's average over the panic window", |d| d.observed_panic),
    (
        "autoscaler_excess_burst_capacity",
        "Spare capacity beyond the target burst capacity (negative: the activator stays in the path)",
        |d| d.excess_burst_capacity as f64,
    ),
    (
        "autoscaler_activation_timed_out",
        "1 while the revision is at zero because no replica became ready within its progress deadline plus 30 s",
        |d| f64::from(u8::from(d.activation_timed_out)),
    ),
];

impl Collector for Decisions {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let Some(api) = self.0.get() else { return Ok(()) };
        encode(&mut encoder, &api.decisions())
    }
}

/// Encodes `decisions` as the [`GAUGES`].
fn encode(encoder: &mut DescriptorEncoder, decisions: &[(RevisionKey, Decision)]) -> fmt::Result {
    for (name, help, read) in GAUGES {
        let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (key, decision) in decisions {
            let labels = [("namespace", key.namespace.as_str()), ("revision", key.name.as_str())];
            ConstGauge::new(read(decision)).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode as encode_text;
    use prometheus_client::registry::Registry;

    use super::*;

    #[derive(Debug)]
    struct Fixed(Vec<(RevisionKey, Decision)>);

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
            encode(&mut encoder, &self.0)
        }
    }

    #[test]
    fn each_revisions_decision_is_a_labelled_gauge() {
        let decision = Decision {
            desired_pods: 8,
            panic: true,
            excess_burst_capacity: -200,
            observed_stable: 3.5,
            observed_panic: 16.0,
            idle: false,
            activation_timed_out: true,
        };
        let mut registry = Registry::with_prefix("skiff_controller");
        registry
            .register_collector(Box::new(Fixed(vec![(RevisionKey::new("team-a", "iris-predictor-00001"), decision)])));
        let mut text = String::new();
        encode_text(&mut text, &registry).unwrap();
        let labels = r#"{namespace="team-a",revision="iris-predictor-00001"}"#;
        for line in [
            format!("skiff_controller_autoscaler_desired_pods{labels} 8.0"),
            format!("skiff_controller_autoscaler_panic{labels} 1.0"),
            format!("skiff_controller_autoscaler_observed_panic{labels} 16.0"),
            format!("skiff_controller_autoscaler_excess_burst_capacity{labels} -200.0"),
            format!("skiff_controller_autoscaler_activation_timed_out{labels} 1.0"),
        ] {
            assert!(text.contains(&line), "{line} in:\n{text}");
        }
    }

    #[test]
    fn a_follower_exports_no_decisions() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Decisions(AutoscalerGate::default())));
        let mut text = String::new();
        encode_text(&mut text, &registry).unwrap();
        assert!(!text.contains("autoscaler_desired_pods{"), "{text}");
    }
}
