use super::*;

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// Writes (second, value) pairs into a linear window of `len` seconds.
fn linear(len: u64, writes: &[(u64, f64)]) -> Window {
    let mut window = Window::new(s(len), Aggregation::Linear);
    for &(second, value) in writes {
        window.record(s(second), value);
    }
    window
}

#[test]
fn linear_average_matches_knatives_buckets() {
    let full: Vec<(u64, f64)> = (0..10).map(|second| (second, 10.0)).collect();
    // (case, window length, writes, read at, average)
    type Case<'a> = (&'a str, u64, &'a [(u64, f64)], u64, f64);
    let cases: &[Case] = &[
        ("nothing written", 10, &[], 5, 0.0),
        ("one write", 10, &[(3, 7.0)], 3, 7.0),
        ("partial window averages written seconds only", 10, &[(0, 10.0), (1, 20.0), (2, 30.0)], 2, 20.0),
        ("full window", 10, &full, 9, 10.0),
        ("ring wraps", 4, &[(0, 100.0), (1, 1.0), (2, 2.0), (3, 3.0), (4, 4.0)], 4, 2.5),
        ("writes in one second add up", 10, &[(0, 1.0), (0, 2.0), (1, 3.0)], 1, 3.0),
        ("gaps count as zeros", 10, &[(0, 10.0), (5, 10.0)], 5, 3.333333),
        ("a late read drops seconds that left the window", 10, &full, 12, 10.0),
        ("a late read with old peaks", 4, &[(0, 40.0), (1, 0.0), (2, 0.0), (3, 8.0)], 5, 4.0),
        ("nothing for a window", 10, &[(0, 10.0)], 10, 0.0),
        ("a write after a silent window starts afresh", 10, &[(0, 100.0), (20, 10.0)], 20, 10.0),
        ("a write older than the window is ignored", 10, &[(20, 10.0), (5, 1000.0)], 20, 10.0),
        ("an out-of-order write inside the window counts", 10, &[(5, 10.0), (3, 20.0)], 5, 10.0),
        ("read before the latest write", 10, &[(0, 10.0), (4, 10.0)], 2, 4.0),
        ("rounded to six decimals", 3, &[(0, 1.0), (1, 0.0), (2, 0.0)], 2, 0.333333),
    ];
    for (case, len, writes, at, want) in cases {
        let got = linear(*len, writes).average(s(*at));
        assert_eq!(got, *want, "{case}");
    }
}

#[test]
fn sub_second_times_share_a_bucket() {
    let mut window = Window::new(s(6), Aggregation::Linear);
    window.record(Duration::from_millis(100), 4.0);
    window.record(Duration::from_millis(900), 4.0);
    window.record(Duration::from_millis(1500), 2.0);
    assert_eq!(window.average(Duration::from_millis(1999)), 5.0);
}

#[test]
fn emptiness_is_a_window_without_writes() {
    let window = linear(10, &[(5, 1.0)]);
    let cases = [(0, false), (5, false), (15, false), (16, true)];
    for (at, want) in cases {
        assert_eq!(window.is_empty(s(at)), want, "at {at}");
    }
    assert!(Window::new(s(10), Aggregation::Linear).is_empty(s(0)));
}

#[test]
fn weighted_average_favours_recent_seconds() {
    let weighted = |writes: &[(u64, f64)], at: u64| {
        let mut window = Window::new(s(10), Aggregation::WeightedExponential);
        for &(second, value) in writes {
            window.record(s(second), value);
        }
        window.average(s(at))
    };
    let constant: Vec<(u64, f64)> = (0..10).map(|second| (second, 10.0)).collect();
    // Over a full window the weights sum to 0.9999.
    assert!((weighted(&constant, 9) - 9.999).abs() < 1e-9, "{}", weighted(&constant, 9));
    let rising = [(6, 5.0), (7, 5.0), (8, 10.0), (9, 10.0)];
    let falling = [(6, 10.0), (7, 10.0), (8, 5.0), (9, 5.0)];
    assert!(weighted(&rising, 9) > weighted(&falling, 9));
    assert!(weighted(&rising, 9) > 9.0);
    // Silent seconds since the last write decay the average, and a silent window empties it.
    assert!(weighted(&constant, 11) < weighted(&constant, 10));
    assert!(weighted(&constant, 10) < weighted(&constant, 9));
    assert_eq!(weighted(&constant, 20), 0.0);
    assert_eq!(weighted(&[], 0), 0.0);
    // The decay factor: at least 0.2, larger for short windows.
    assert!((Window::new(s(10), Aggregation::WeightedExponential).smoothing - 0.601893).abs() < 1e-6);
    assert_eq!(Window::new(s(3600), Aggregation::WeightedExponential).smoothing, MIN_SMOOTHING);
}

#[test]
fn max_window_keeps_the_largest_value_of_its_length() {
    // A 10 s window in 2 s ticks: a value stays for 5 ticks. (case, records (second, value), current)
    type Case = (&'static str, &'static [(u64, u32)], u32);
    let cases: &[Case] = &[
        ("empty", &[], 0),
        ("one", &[(0, 3)], 3),
        ("larger replaces", &[(0, 3), (2, 5)], 5),
        ("smaller waits behind", &[(0, 5), (2, 3)], 5),
        ("same tick keeps the largest", &[(0, 5), (1, 3)], 5),
        ("same tick, larger later", &[(0, 3), (1, 5)], 5),
        ("the old maximum is still in", &[(0, 5), (2, 3), (8, 1)], 5),
        ("the old maximum leaves after the window", &[(0, 5), (2, 3), (10, 1)], 3),
        ("all old values leave", &[(0, 5), (2, 3), (30, 1)], 1),
    ];
    for (case, records, want) in cases {
        let mut window = MaxWindow::new(s(10), s(2));
        for &(second, value) in *records {
            window.record(s(second), value);
        }
        assert_eq!(window.current(), *want, "{case}");
    }
}
