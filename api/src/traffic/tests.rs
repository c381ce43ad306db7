use super::*;
use crate::isvc::PredictorSpec;

fn template(uri: &str) -> RevisionTemplate {
    let predictor = PredictorSpec { scale_metric: Some(uri.to_owned()), ..PredictorSpec::default() };
    RevisionTemplate { predictor, annotations: Default::default() }
}

fn split(targets: &[TrafficTarget]) -> Vec<(&str, u32, Option<&str>)> {
    targets.iter().map(|t| (t.revision_name.as_str(), t.percent, t.tag.as_deref())).collect()
}

#[test]
fn the_first_revision_takes_everything_even_before_it_is_ready() {
    let mut r = Rollout::default();
    assert_eq!(r.apply("iris", Component::Predictor, template("a")).unwrap().as_deref(), Some("iris-predictor-00001"));
    assert_eq!(r.apply("iris", Component::Predictor, template("a")).unwrap(), None);
    assert_eq!(split(&r.traffic(None)), [("iris-predictor-00001", 100, Some("latest"))]);
    assert_eq!(r.latest_rolled_out(), None);
    r.mark_ready("iris-predictor-00001");
    r.traffic(None);
    assert_eq!(r.latest_rolled_out(), Some("iris-predictor-00001"));
}

#[test]
fn a_new_revision_takes_over_only_once_ready() {
    let mut r = Rollout::default();
    r.apply("iris", Component::Predictor, template("a")).unwrap();
    r.mark_ready("iris-predictor-00001");
    r.traffic(None);
    r.apply("iris", Component::Predictor, template("b")).unwrap();
    assert_eq!(
        split(&r.traffic(None)),
        [("iris-predictor-00002", 0, Some("latest")), ("iris-predictor-00001", 100, Some("prev"))]
    );
    r.mark_ready("iris-predictor-00002");
    assert_eq!(split(&r.traffic(None)), [("iris-predictor-00002", 100, Some("latest"))]);
    assert_eq!(r.latest_rolled_out(), Some("iris-predictor-00002"));
    assert_eq!(r.previous_rolled_out(), Some("iris-predictor-00001"));
    assert_eq!(r.revisions().len(), 1, "the old revision is collected once it has no traffic");
}

#[test]
fn canary_promote_and_roll_back() {
    let mut r = Rollout::default();
    r.apply("iris", Component::Predictor, template("a")).unwrap();
    r.mark_ready("iris-predictor-00001");
    r.traffic(None);
    r.apply("iris", Component::Predictor, template("b")).unwrap();
    assert_eq!(
        split(&r.traffic(Some(20))),
        [("iris-predictor-00002", 0, Some("latest")), ("iris-predictor-00001", 100, Some("prev"))],
        "no weight before the canary is ready"
    );
    r.mark_ready("iris-predictor-00002");
    assert_eq!(
        split(&r.traffic(Some(20))),
        [("iris-predictor-00002", 20, Some("latest")), ("iris-predictor-00001", 80, Some("prev"))]
    );
    assert_eq!(r.latest_rolled_out(), Some("iris-predictor-00001"), "a canary is not rolled out");
    assert_eq!(
        split(&r.traffic(Some(0))),
        [("iris-predictor-00002", 0, Some("latest")), ("iris-predictor-00001", 100, Some("prev"))],
        "roll back"
    );
    assert_eq!(split(&r.traffic(None)), [("iris-predictor-00002", 100, Some("latest"))], "promote");
    assert_eq!(r.previous_rolled_out(), Some("iris-predictor-00001"));
}

#[test]
fn shares_always_add_up_to_100() {
    for percent in [0, 1, 50, 99, 100, 150] {
        let mut r = Rollout::default();
        r.apply("m", Component::Predictor, template("a")).unwrap();
        r.mark_ready("m-predictor-00001");
        r.traffic(None);
        r.apply("m", Component::Predictor, template("b")).unwrap();
        r.mark_ready("m-predictor-00002");
        let total: u32 = r.traffic(Some(percent)).iter().map(|t| t.percent).sum();
        assert_eq!(total, 100, "canary {percent}");
    }
}

#[test]
fn a_rollout_that_has_taken_every_number_refuses_a_new_revision_and_keeps_its_own() {
    let mut r = Rollout { created: crate::revision::MAX_REVISION - 1, ..Rollout::default() };
    assert_eq!(r.apply("m", Component::Predictor, template("a")).unwrap().as_deref(), Some("m-predictor-99999"));
    let err = r.apply("m", Component::Predictor, template("b")).unwrap_err().to_string();
    assert!(err.starts_with("m: every revision number up to 99999 is taken"), "{err}");
    assert_eq!(r.latest().map(|l| l.name.as_str()), Some("m-predictor-99999"));
    assert_eq!(
        r.apply("m", Component::Predictor, template("a")).unwrap(),
        None,
        "the same template is still no change"
    );
}

#[test]
fn each_component_names_its_own_revisions() {
    let mut transformer = Rollout::default();
    let name = transformer.apply("iris", Component::Transformer, template("a")).unwrap();
    assert_eq!(name.as_deref(), Some("iris-transformer-00001"));
    let mut explainer = Rollout::default();
    let name = explainer.apply("iris", Component::Explainer, template("a")).unwrap();
    assert_eq!(name.as_deref(), Some("iris-explainer-00001"));
}

#[test]
fn the_canary_share_is_the_percent_held_to_0_to_100() {
    let with =
        |canary_traffic_percent| canary_percent(&PredictorSpec { canary_traffic_percent, ..PredictorSpec::default() });
    assert_eq!(with(None), None, "no canary: a full rollout");
    for p in [0, 1, 20, 99, 100] {
        assert_eq!(with(Some(p)), Some(u32::try_from(p).unwrap()));
    }
    assert_eq!((with(Some(-1)), with(Some(i64::MIN))), (Some(0), Some(0)));
    assert_eq!((with(Some(101)), with(Some(i64::MAX))), (Some(100), Some(100)));
}
