//! Go's duration syntax (`time.ParseDuration`), used by Knative's config map and annotations.

use std::time::Duration;

/// Units Go accepts, with their length in nanoseconds.
const UNITS: [(&str, u128); 8] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Fraction digits kept; Go keeps as many as fit, and nanoseconds need no more than this.
const MAX_FRACTION_DIGITS: usize = 20;

/// Parses "60s", "1m30s", "1.5h", "500ms", "-2s" or "0" into signed nanoseconds.
///
/// `None` when the text is not a Go duration or does not fit Go's `int64` nanoseconds.
pub(crate) fn parse_go_duration(text: &str) -> Option<i128> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let (whole, after) = rest.split_at(rest.bytes().take_while(u8::is_ascii_digit).count());
        let (fraction, after) = match after.strip_prefix('.') {
            Some(after) => after.split_at(after.bytes().take_while(u8::is_ascii_digit).count()),
            None => ("", after),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let (unit, after) = after.split_at(after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len()));
        let scale = UNITS.iter().find(|(name, _)| *name == unit)?.1;
        let mut value = if whole.is_empty() { 0 } else { whole.parse::<u128>().ok()?.checked_mul(scale)? };
        let digits = &fraction[..fraction.len().min(MAX_FRACTION_DIGITS)];
        if !digits.is_empty() {
            let numerator: u128 = digits.parse().ok()?;
            value = value.checked_add(numerator * scale / 10u128.pow(digits.len() as u32))?;
        }
        total = total.checked_add(value)?;
        rest = after;
    }
    if total > i64::MAX as u128 {
        return None;
    }
    let total = total as i128;
    Some(if negative { -total } else { total })
}

/// A non-negative Go duration ("600s", "10m", "1h30m") as a [`Duration`]: `None` for anything else.
pub fn go_duration(text: &str) -> Option<Duration> {
    parse_go_duration(text).and_then(from_nanos)
}

/// Converts non-negative nanoseconds to a [`Duration`].
pub(crate) fn from_nanos(nanos: i128) -> Option<Duration> {
    u64::try_from(nanos).ok().map(Duration::from_nanos)
}

/// Writes a duration the short way Go users read it: "6s", "1m30s", "1h", "500ms", "1.5s".
pub(crate) fn fmt_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_owned();
    }
    if duration < Duration::from_secs(1) {
        let nanos = duration.subsec_nanos();
        return if nanos.is_multiple_of(1_000_000) { format!("{}ms", nanos / 1_000_000) } else { format!("{nanos}ns") };
    }
    let secs = duration.as_secs();
    if duration.subsec_nanos() != 0 {
        let fraction = format!("{:09}", duration.subsec_nanos());
        return format!("{secs}.{}s", fraction.trim_end_matches('0'));
    }
    let (hours, minutes, seconds) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    for (value, unit) in [(hours, "h"), (minutes, "m"), (seconds, "s")] {
        if value != 0 {
            out.push_str(&format!("{value}{unit}"));
        }
    }
    out
}

/// True when the duration is a whole number of seconds.
pub(crate) fn whole_seconds(duration: Duration) -> bool {
    duration.subsec_nanos() == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i128 = 1_000_000_000;

    #[test]
    fn parses_go_durations() {
        let cases: &[(&str, Option<i128>)] = &[
            ("0", Some(0)),
            ("-0", Some(0)),
            ("60s", Some(60 * S)),
            ("+60s", Some(60 * S)),
            ("1m30s", Some(90 * S)),
            ("1h", Some(3600 * S)),
            ("1.5h", Some(5400 * S)),
            ("500ms", Some(S / 2)),
            (".5s", Some(S / 2)),
            ("5.s", Some(5 * S)),
            ("1us", Some(1_000)),
            ("1µs", Some(1_000)),
            ("1μs", Some(1_000)),
            ("7ns", Some(7)),
            ("1h2m3s4ms", Some(3723 * S + 4_000_000)),
            ("-1s", Some(-S)),
            ("2562047h", Some(2_562_047 * 3600 * S)),
            ("", None),
            ("-", None),
            ("60", None),
            ("s", None),
            (".s", None),
            ("1d", None),
            ("1 s", None),
            ("1s ", None),
            ("1h-5m", None),
            ("3000000h", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), *want, "{text:?}");
        }
    }

    #[test]
    fn formats_durations() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(500), "500ms"),
            (Duration::from_nanos(1500), "1500ns"),
            (Duration::from_secs(6), "6s"),
            (Duration::from_secs(60), "1m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(3601), "1h1s"),
            (Duration::from_millis(1500), "1.5s"),
        ];
        for (duration, want) in cases {
            assert_eq!(fmt_duration(duration), want, "{duration:?}");
        }
    }
}
