use super::*;
use crate::isvc::PredictorSpec;

fn template(uri: &str) -> RevisionTemplate {
    let predictor = PredictorSpec { scale_metric: Some(uri.to_owned()), ..PredictorSpec::default() };
    RevisionTemplate { predictor, annotations: Default::default() }
}

fn created(name: &str) -> Option<Change> {
    Some(Change::Created(name.to_owned()))
}

fn names(r: &Rollout) -> Vec<&str> {
    r.revisions().iter().map(|r| r.name.as_str()).collect()
}

/// A rollout whose revisions 1..=`count` ran templates "1", "2", ... in turn, each rolled out.
fn rolled_out(count: u32) -> Rollout {
    let mut r = Rollout::default();
    for n in 1..=count {
        r.apply("iris", Component::Predictor, template(&n.to_string())).unwrap();
        r.mark_ready(&format!("iris-predictor-{n:05}"));
        r.traffic(None);
    }
    r
}

fn split(targets: &[TrafficTarget]) -> Vec<(&str, u32, Option<&str>)> {
    targets.iter().map(|t| (t.revision_name.as_str(), t.percent, t.tag.as_deref())).collect()
}

#[test]
fn the_first_revision_takes_everything_even_before_it_is_ready() {
    let mut r = Rollout::default();
    assert_eq!(r.apply("iris", Component::Predictor, template("a")).unwrap(), created("iris-predictor-00001"));
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
    assert_eq!(names(&r), ["iris-predictor-00001", "iris-predictor-00002"], "the old revision is kept at zero");
    let targets = r.traffic(None);
    assert_eq!(r.inactive(&targets).map(|r| r.name.as_str()).collect::<Vec<_>>(), ["iris-predictor-00001"]);
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
    assert_eq!(
        r.apply("m", Component::Predictor, template("a")).unwrap(),
        Some(Change::Created("m-predictor-99999".into()))
    );
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
    assert_eq!(name, created("iris-transformer-00001"));
    let mut explainer = Rollout::default();
    let name = explainer.apply("iris", Component::Explainer, template("a")).unwrap();
    assert_eq!(name, created("iris-explainer-00001"));
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

#[test]
fn restoring_the_previous_spec_routes_to_the_kept_revision_and_creates_nothing() {
    let mut r = rolled_out(2);
    let change = r.apply("iris", Component::Predictor, template("1")).unwrap();
    assert_eq!(change, Some(Change::Restored("iris-predictor-00001".into())));
    assert_eq!(split(&r.traffic(None)), [("iris-predictor-00001", 100, Some("latest"))], "it has been ready: no wait");
    assert_eq!(r.latest().map(|l| l.name.as_str()), Some("iris-predictor-00001"));
    assert_eq!(
        (r.latest_rolled_out(), r.previous_rolled_out()),
        (Some("iris-predictor-00001"), Some("iris-predictor-00002"))
    );
    assert_eq!(names(&r), ["iris-predictor-00002", "iris-predictor-00001"], "no third revision; 2 kept to go forward");
    let change = r.apply("iris", Component::Predictor, template("3")).unwrap();
    assert_eq!(change, created("iris-predictor-00003"), "numbers go on after the highest");
}

#[test]
fn restoring_the_stable_spec_during_a_canary_ends_it_on_the_stable_revision() {
    let mut r = rolled_out(1);
    r.apply("iris", Component::Predictor, template("2")).unwrap();
    r.mark_ready("iris-predictor-00002");
    r.traffic(Some(30));
    assert_eq!(
        r.apply("iris", Component::Predictor, template("1")).unwrap(),
        Some(Change::Restored("iris-predictor-00001".into()))
    );
    assert_eq!(split(&r.traffic(Some(30))), [("iris-predictor-00001", 100, Some("latest"))]);
    assert_eq!(r.latest_rolled_out(), Some("iris-predictor-00001"));
    assert_eq!(names(&r), ["iris-predictor-00002", "iris-predictor-00001"], "the canary is kept at zero");
}

#[test]
fn revisions_beyond_the_bound_are_collected_oldest_first() {
    let r = rolled_out(5);
    assert_eq!(KEPT_INACTIVE_REVISIONS, 2);
    assert_eq!(names(&r), ["iris-predictor-00003", "iris-predictor-00004", "iris-predictor-00005"]);
    assert_eq!(
        (r.latest_rolled_out(), r.previous_rolled_out()),
        (Some("iris-predictor-00005"), Some("iris-predictor-00004"))
    );
}

#[test]
fn the_previous_rolled_out_revision_is_kept_before_newer_ones() {
    let revisions = ["m-1", "m-2", "m-3", "m-4"];
    let latest = [target("m-4", 100, Some("latest"), true)];
    assert_eq!(kept_inactive(&revisions, &latest, Some("m-1")), ["m-1", "m-3"]);
    assert_eq!(kept_inactive(&revisions, &latest, Some("m-3")), ["m-3", "m-2"]);
    assert_eq!(kept_inactive(&revisions, &latest, None), ["m-3", "m-2"]);
    let canary = [target("m-4", 20, Some("latest"), true), target("m-2", 80, Some("prev"), false)];
    assert_eq!(kept_inactive(&revisions, &canary, Some("m-1")), ["m-1", "m-3"], "targets are not counted");
}

#[test]
fn a_canary_share_after_a_full_rollout_changes_nothing_and_says_so() {
    let mut r = rolled_out(2);
    assert_eq!(split(&r.traffic(Some(0))), [("iris-predictor-00002", 100, Some("latest"))], "as in KServe");
    let rolled =
        RolledOut { latest: Some("iris-predictor-00002".into()), previous: Some("iris-predictor-00001".into()) };
    assert_eq!(
        idle_canary("iris-predictor-00002", &rolled, Some(0)).as_deref(),
        Some(
            "canaryTrafficPercent: 0 changes nothing: iris-predictor-00002 is rolled out and takes all traffic, as \
             in KServe; to roll back, restore the spec of iris-predictor-00001"
        )
    );
    assert_eq!(idle_canary("iris-predictor-00002", &rolled, None), None, "no canary set");
    assert_eq!(idle_canary("iris-predictor-00003", &rolled, Some(0)), None, "during a canary it applies");
    let first = RolledOut { latest: Some("m-1".into()), previous: None };
    assert!(idle_canary("m-1", &first, Some(10)).unwrap().ends_with("there is no earlier revision to roll back to"));
}
