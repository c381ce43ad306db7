//! Parsers of the values that several commands' flags take: durations and sizes. A leaf module, so
//! that `skiff up`, `skiff load` and `skiff cache` share them without importing each other.

use std::time::Duration;

/// Parses `1h2m3s`, `1.5s`, `250ms`, `100us` (or `µs`), `10ns`; a bare number is seconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err("an empty duration".into());
    }
    if let Ok(seconds) = text.parse::<f64>() {
        return seconds_to_duration(seconds, text);
    }
    let mut total = 0.0;
    let mut rest = text;
    while !rest.is_empty() {
        let number_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, tail) = rest.split_at(number_len);
        let unit_len = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let value: f64 = number.parse().map_err(|_| format!("{text:?} is not a duration such as 250ms, 30s or 2m"))?;
        let scale = match unit {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(format!("{text:?}: unknown unit {unit:?} (use h, m, s, ms, us or ns)")),
        };
        total += value * scale;
        rest = tail;
    }
    seconds_to_duration(total, text)
}

fn seconds_to_duration(seconds: f64, text: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("{text:?} is not a duration of zero or more"))
}

/// A size: bytes, or a number with `K`, `M`, `G` or `T` (binary multiples, an optional `i` and
/// `B`: `50G`, `500MiB`).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text:?}: expected a size such as 500M or 50G"))?;
    let shift = match unit.trim_end_matches('B').trim_end_matches('i') {
        "" => 0,
        "K" | "k" => 10,
        "M" | "m" => 20,
        "G" | "g" => 30,
        "T" | "t" => 40,
        _ => return Err(format!("{text:?}: the unit is one of K, M, G, T")),
    };
    number.checked_mul(1 << shift).ok_or_else(|| format!("{text:?}: too large"))
}
