//! Fewer points for a chart than the history holds: a line of `[unix seconds, value]` cut into
//! runs of equal length, each run folded into one point (at the run's last time), so an hour of
//! 5-second points draws as at most [`MAX_POINTS`] without losing a burst.

/// Points drawn per line at most (a chart is 360 px wide).
pub const MAX_POINTS: usize = 240;

/// How a run of points becomes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fold {
    /// The mean: for rates, so the area under the line (the requests) stays the same.
    Mean,
    /// The largest: for p99, in-flight and replicas, so a peak stays visible.
    Max,
    /// The last: for running totals.
    Last,
}

/// `points` (by ascending time) in at most `max` points (at least one per run).
pub fn downsample(points: &[[f64; 2]], max: usize, fold: Fold) -> Vec<[f64; 2]> {
    let max = max.max(1);
    if points.len() <= max {
        return points.to_vec();
    }
    let run = points.len().div_ceil(max);
    points
        .chunks(run)
        .map(|chunk| {
            let at = chunk[chunk.len() - 1][0];
            let value = match fold {
                Fold::Mean => chunk.iter().map(|p| p[1]).sum::<f64>() / chunk.len() as f64,
                Fold::Max => chunk.iter().map(|p| p[1]).fold(f64::NEG_INFINITY, f64::max),
                Fold::Last => chunk[chunk.len() - 1][1],
            };
            [at, value]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn line(values: &[f64]) -> Vec<[f64; 2]> {
        values.iter().enumerate().map(|(i, v)| [i as f64 * 5.0, *v]).collect()
    }

    #[test]
    fn a_short_line_is_kept_as_it_is() {
        let points = line(&[1.0, 2.0, 3.0]);
        assert_eq!(downsample(&points, 3, Fold::Mean), points);
    }

    #[test]
    fn runs_fold_into_their_mean_max_or_last_at_the_runs_end() {
        let points = line(&[1.0, 3.0, 10.0, 0.0, 4.0]);
        assert_eq!(downsample(&points, 3, Fold::Mean), vec![[5.0, 2.0], [15.0, 5.0], [20.0, 4.0]]);
        assert_eq!(downsample(&points, 3, Fold::Max), vec![[5.0, 3.0], [15.0, 10.0], [20.0, 4.0]]);
        assert_eq!(downsample(&points, 3, Fold::Last), vec![[5.0, 3.0], [15.0, 0.0], [20.0, 4.0]]);
    }

    proptest! {
        #[test]
        fn downsampling_bounds_the_points_and_keeps_the_shape(
            values in proptest::collection::vec(0.0f64..1e6, 0..2000),
            max in 1usize..400,
        ) {
            let points = line(&values);
            for fold in [Fold::Mean, Fold::Max, Fold::Last] {
                let out = downsample(&points, max, fold);
                prop_assert!(out.len() <= max);
                prop_assert_eq!(out.is_empty(), points.is_empty());
                prop_assert!(out.windows(2).all(|w| w[0][0] < w[1][0]), "times ascend");
                if let (Some(newest), Some(last)) = (out.last(), points.last()) {
                    prop_assert_eq!(newest[0], last[0], "the newest time is kept");
                }
                let (low, high) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(*v), h.max(*v)));
                prop_assert!(out.iter().all(|p| p[1] >= low - 1e-6 && p[1] <= high + 1e-6));
                if fold == Fold::Max && !values.is_empty() {
                    let peak = out.iter().map(|p| p[1]).fold(f64::NEG_INFINITY, f64::max);
                    prop_assert_eq!(peak, high, "a peak survives");
                }
            }
        }
    }
}
