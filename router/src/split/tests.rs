use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::*;

fn target(revision: &str, percent: u32, tag: Option<&str>) -> TrafficTarget {
    TrafficTarget { revision_name: revision.to_owned(), percent, tag: tag.map(str::to_owned), latest_revision: false }
}

fn counts(targets: &[TrafficTarget], draws: usize, seed: u64) -> Vec<usize> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut counts = vec![0; targets.len()];
    for _ in 0..draws {
        let chosen = by_weight(targets, &mut rng).expect("some target has weight");
        counts[targets.iter().position(|t| t == chosen).unwrap()] += 1;
    }
    counts
}

#[test]
fn a_20_80_split_holds_within_one_percent_over_100k_draws() {
    let targets = [target("new", 20, Some("latest")), target("old", 80, Some("prev"))];
    for seed in [1, 7, 42] {
        let c = counts(&targets, 100_000, seed);
        assert!((19_000..=21_000).contains(&c[0]), "seed {seed}: {c:?}");
        assert_eq!(c[0] + c[1], 100_000);
    }
}

#[test]
fn three_way_splits_follow_their_weights() {
    let targets = [target("a", 10, None), target("b", 30, None), target("c", 60, None)];
    let c = counts(&targets, 100_000, 3);
    for (count, expected) in c.iter().zip([10_000, 30_000, 60_000]) {
        assert!(count.abs_diff(expected) <= 1_000, "{c:?}");
    }
}

#[test]
fn zero_percent_targets_are_never_chosen_by_weight() {
    let targets = [target("latest", 0, Some("latest")), target("prev", 100, Some("prev"))];
    assert_eq!(counts(&targets, 10_000, 9), [0, 10_000]);
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(by_weight(&[target("a", 0, None)], &mut rng), None);
    assert_eq!(by_weight(&[], &mut rng), None);
}

#[test]
fn a_tag_selects_its_target_even_at_zero_percent() {
    let targets = [target("latest", 0, Some("latest")), target("prev", 100, Some("prev"))];
    let mut rng = SmallRng::seed_from_u64(0);
    assert_eq!(choose(&targets, Some("latest"), &mut rng).unwrap().revision_name, "latest");
    assert_eq!(choose(&targets, Some("prev"), &mut rng).unwrap().revision_name, "prev");
    assert_eq!(choose(&targets, Some("canary"), &mut rng), None);
    assert_eq!(choose(&targets, None, &mut rng).unwrap().revision_name, "prev");
}
