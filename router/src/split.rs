//! Weighted choice of a revision among a service's traffic targets. Pure: the random source is passed in,
//! so tests use a seeded RNG.

use rand::Rng;
use skiff_api::traffic::TrafficTarget;

/// Picks a target with probability `percent / sum of percents`; a 0% target is never picked.
/// `None` when no target has any weight.
pub fn by_weight<'a, R: Rng + ?Sized>(targets: &'a [TrafficTarget], rng: &mut R) -> Option<&'a TrafficTarget> {
    let total: u64 = targets.iter().map(|t| u64::from(t.percent)).sum();
    if total == 0 {
        return None;
    }
    let mut draw = rng.random_range(0..total);
    for target in targets {
        let weight = u64::from(target.percent);
        if draw < weight {
            return Some(target);
        }
        draw -= weight;
    }
    None
}

/// The target carrying `tag`, whatever its weight.
pub fn by_tag<'a>(targets: &'a [TrafficTarget], tag: &str) -> Option<&'a TrafficTarget> {
    targets.iter().find(|t| t.tag.as_deref() == Some(tag))
}

/// The tagged target when `tag` is set, else a weighted choice.
pub fn choose<'a, R: Rng + ?Sized>(
    targets: &'a [TrafficTarget],
    tag: Option<&str>,
    rng: &mut R,
) -> Option<&'a TrafficTarget> {
    match tag {
        Some(tag) => by_tag(targets, tag),
        None => by_weight(targets, rng),
    }
}

#[cfg(test)]
mod tests;
