//! `bench-storage`'s figures, as pure functions: the size ladder (`1M`, `100M`, `1G`) and the
//! input a generated model takes, min/median/max over rounds, and the tables of cold starts
//! (fetch, spawn, load, first response) and download throughput with the issue's targets as
//! ratios.

use std::fmt::Write;

/// Bytes of a size written as `gen_models.py` takes it: `1M`, `100M`, `1G` (binary units) or a
/// plain count.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim().to_uppercase();
    let (number, unit) = match text.chars().last()? {
        'K' => (&text[..text.len() - 1], 1u64 << 10),
        'M' => (&text[..text.len() - 1], 1 << 20),
        'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text.as_str(), 1),
    };
    let value: f64 = number.parse().ok()?;
    (value > 0.0).then_some((value * unit as f64) as u64)
}

/// The width `N` of the input `x` [1, N] of `gen_models.py`'s model of `bytes` (its
/// `shape_for`: a near-square FP32 weight `W` [N, M] of about that many bytes).
pub fn input_width(bytes: u64) -> u64 {
    (bytes / 4).max(1).isqrt().max(1)
}

/// A V2 infer request of one row of `width` values for `gen_models.py`'s models (input `x`).
pub fn infer_body(width: u64) -> String {
    let data: Vec<&str> = (0..width).map(|i| if i % 2 == 0 { "0.5" } else { "-0.25" }).collect();
    format!(r#"{{"inputs":[{{"name":"x","shape":[1,{width}],"datatype":"FP32","data":[{}]}}]}}"#, data.join(","))
}

/// Min, median and max of some rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of `values`, NaNs left out; `None` when none is left.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = match n {
            0 => return None,
            n if n % 2 == 1 => sorted[n / 2],
            n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
        };
        Some(Spread { min: sorted[0], median, max: sorted[n - 1] })
    }
}

/// One cold start of one path, in milliseconds (NaN where the path has no such part).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cold {
    /// Getting the model: `skiff up`'s fetch (`fetched.millis`), or KServe's initializer's run.
    pub fetch_ms: f64,
    /// Spawn until the replica listened (`lastSpawnMs`).
    pub spawn_ms: f64,
    /// Listening until ready: the model's load (`lastStartMs − lastSpawnMs`).
    pub load_ms: f64,
    /// The client's first request until its answer (for KServe's path: plus the download).
    pub first_ms: f64,
    /// Bytes the fetch downloaded (`fetched.downloaded`; KServe's: what landed on disk).
    pub downloaded: u64,
}

/// The cold starts of one path at one size, over the rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct ColdCell {
    /// Model size as asked (`1M`).
    pub size: String,
    /// The path (`store`, `cache`, `disk`, `kserve-storage`).
    pub path: String,
    /// One per round.
    pub rounds: Vec<Cold>,
}

impl ColdCell {
    fn spread(&self, part: impl Fn(&Cold) -> f64) -> Option<Spread> {
        Spread::of(&self.rounds.iter().map(part).collect::<Vec<_>>())
    }

    /// The median of one part over the rounds.
    pub fn median(&self, part: impl Fn(&Cold) -> f64) -> Option<f64> {
        self.spread(part).map(|s| s.median)
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| format!("{v:.0}"))
}

/// The cold-start table: per size and path the medians of fetch, spawn, load and first response,
/// the first response's min and max, and what was downloaded.
pub fn cold_table(cells: &[ColdCell]) -> String {
    let mut out = String::from(
        "| size | path | rounds | fetch ms | spawn ms | load ms | first response ms (median) | min | max | downloaded MB |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for cell in cells {
        let first = cell.spread(|c| c.first_ms);
        let downloaded = Spread::of(&cell.rounds.iter().map(|c| c.downloaded as f64 / 1e6).collect::<Vec<_>>());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell.size,
            cell.path,
            cell.rounds.len(),
            ms(cell.median(|c| c.fetch_ms)),
            ms(cell.median(|c| c.spawn_ms)),
            ms(cell.median(|c| c.load_ms)),
            ms(first.map(|s| s.median)),
            ms(first.map(|s| s.min)),
            ms(first.map(|s| s.max)),
            downloaded.map_or_else(|| "–".to_owned(), |d| format!("{:.1}", d.median)),
        );
    }
    out
}

/// Download throughputs of one peer at one size over the rounds, in MB/s (10^6 bytes).
#[derive(Debug, Clone, PartialEq)]
pub struct Throughput {
    /// Model size as asked.
    pub size: String,
    /// Who downloaded (`skiff-fetch`, `kserve-storage`, `curl (1 stream)`, `TCP loopback`).
    pub peer: String,
    /// One per round.
    pub mb_per_s: Vec<f64>,
}

/// The throughput table: medians, min and max, and each peer's median over the loopback limit's
/// (`limit`, a peer's name) at the same size.
pub fn throughput_table(cells: &[Throughput], limit: &str) -> String {
    let mut out =
        format!("| size | peer | rounds | median MB/s | min | max | ÷ {limit} |\n|---|---|---:|---:|---:|---:|---:|\n");
    for cell in cells {
        let Some(spread) = Spread::of(&cell.mb_per_s) else { continue };
        let base = median_of(cells, &cell.size, limit);
        let ratio = base.filter(|b| *b > 0.0).map_or_else(|| "–".to_owned(), |b| format!("{:.2}", spread.median / b));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {:.0} | {:.0} | {:.0} | {ratio} |",
            cell.size,
            cell.peer,
            cell.mb_per_s.len(),
            spread.median,
            spread.min,
            spread.max
        );
    }
    out
}

/// The median MB/s of `peer` at `size`.
pub fn median_of(cells: &[Throughput], size: &str, peer: &str) -> Option<f64> {
    let cell = cells.iter().find(|c| c.size == size && c.peer == peer)?;
    Spread::of(&cell.mb_per_s).map(|s| s.median)
}

/// One target of the issue, measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What it is.
    pub name: String,
    /// The measured ratio (or count).
    pub value: f64,
    /// The target, as written (`≥ 2`, `≤ 1.2`).
    pub goal: String,
    /// Met or not.
    pub met: bool,
}

/// The targets at one size: the fetcher ÷ kserve-storage download rate (≥ 2); the cached cold
/// start's fetch and load ÷ the model's own load time, defined as the local-disk cold start's
/// load part (≤ 1.2); and the cached cold start's first response ÷ the local-disk one's (shown,
/// not a target of the issue).
pub fn targets(size: &str, throughput: &[Throughput], cold: &[ColdCell]) -> Vec<Target> {
    let mut out = Vec::new();
    if let (Some(fetcher), Some(kserve)) =
        (median_of(throughput, size, "skiff-fetch"), median_of(throughput, size, "kserve-storage"))
    {
        let value = fetcher / kserve;
        out.push(Target {
            name: format!("{size}: skiff-fetch ÷ kserve-storage, MB/s"),
            value,
            goal: "≥ 2".into(),
            met: value >= 2.0,
        });
    }
    let cell = |path: &str| cold.iter().find(|c| c.size == size && c.path == path);
    if let (Some(cache), Some(disk)) = (cell("cache"), cell("disk")) {
        let cached = cache.median(|c| c.fetch_ms + c.load_ms);
        if let (Some(cached), Some(own)) = (cached, disk.median(|c| c.load_ms)) {
            let value = cached / own;
            out.push(Target {
                name: format!("{size}: cached (fetch + load) ÷ own load (local disk's load)"),
                value,
                goal: "≤ 1.2".into(),
                met: value <= 1.2,
            });
        }
        if let (Some(cached), Some(local)) = (cache.median(|c| c.first_ms), disk.median(|c| c.first_ms)) {
            let value = cached / local;
            out.push(Target {
                name: format!("{size}: cached ÷ local disk, first response"),
                value,
                goal: "(shown)".into(),
                met: true,
            });
        }
    }
    out
}

/// The targets as a table.
pub fn target_table(targets: &[Target]) -> String {
    let mut out = String::from("| target | measured | goal | met |\n|---|---:|---|---|\n");
    for t in targets {
        let met = if t.goal.starts_with('(') {
            "–"
        } else if t.met {
            "yes"
        } else {
            "no"
        };
        let _ = writeln!(out, "| {} | {:.2} | {} | {met} |", t.name, t.value, t.goal);
    }
    out
}

/// The cached forms against the ONNX file (issue 37): for each size and path measured both ways
/// (`<path> · ONNX`, `<path> · ORT form`), the medians of load and first response each way and
/// their ratio, and the target of a cached 1 GiB start (first response ≤ 1.5 s).
pub fn ort_form_table(cells: &[ColdCell]) -> String {
    let mut out = String::from(
        "| size | path | load ms: ONNX | load ms: ORT form | first response ms: ONNX | first response ms: ORT form | \
         first response ÷ |\n|---|---|---:|---:|---:|---:|---:|\n",
    );
    let mut targets = String::new();
    for onnx in cells.iter().filter(|c| c.path.ends_with(" · ONNX")) {
        let base = onnx.path.trim_end_matches(" · ONNX");
        let Some(form) = cells.iter().find(|c| c.size == onnx.size && c.path == format!("{base} · ORT form")) else {
            continue;
        };
        let (first_onnx, first_form) = (onnx.median(|c| c.first_ms), form.median(|c| c.first_ms));
        let _ = writeln!(
            out,
            "| {} | {base} | {} | {} | {} | {} | {} |",
            onnx.size,
            ms(onnx.median(|c| c.load_ms)),
            ms(form.median(|c| c.load_ms)),
            ms(first_onnx),
            ms(first_form),
            first_onnx.zip(first_form).map_or_else(|| "–".into(), |(a, b)| format!("{:.2}", b / a)),
        );
        if base == "cache" && parse_size(&onnx.size) == Some(1 << 30) {
            let value = first_form.unwrap_or(f64::NAN);
            let _ = writeln!(
                targets,
                "\n| target | measured | goal | met |\n|---|---:|---|---|\n| 1G: cached cold start, first response ms | \
                 {value:.0} | ≤ 1500 | {} |",
                if value <= 1500.0 { "yes" } else { "no" }
            );
        }
    }
    out + &targets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_inputs_follow_gen_models() {
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("100m"), Some(100 << 20));
        assert_eq!(parse_size("1G"), Some(1 << 30));
        assert_eq!(parse_size("1.5K"), Some(1536));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size("0M"), None);
        // gen_models.py printed W [512, 512], [5120, 5120] and [16384, 16384] for these.
        assert_eq!([1 << 20, 100 << 20, 1 << 30].map(input_width), [512, 5120, 16384]);
        let body: serde_json::Value = serde_json::from_str(&infer_body(3)).unwrap();
        assert_eq!(body["inputs"][0]["shape"], serde_json::json!([1, 3]));
        assert_eq!(body["inputs"][0]["data"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn spreads_leave_out_what_a_path_lacks() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Some(Spread { min: 1.0, median: 2.0, max: 3.0 }));
        assert_eq!(Spread::of(&[4.0, 1.0, f64::NAN, 2.0, 3.0]).unwrap().median, 2.5);
        assert_eq!(Spread::of(&[f64::NAN]), None);
    }

    fn cold(fetch_ms: f64, load_ms: f64, first_ms: f64) -> Cold {
        Cold { fetch_ms, spawn_ms: 20.0, load_ms, first_ms, downloaded: 0 }
    }

    #[test]
    fn the_tables_show_medians_and_the_targets_as_ratios() {
        let cells = vec![
            ColdCell { size: "1G".into(), path: "cache".into(), rounds: vec![cold(5.0, 1000.0, 1100.0); 3] },
            ColdCell {
                size: "1G".into(),
                path: "disk".into(),
                rounds: vec![
                    cold(f64::NAN, 900.0, 1000.0),
                    cold(f64::NAN, 1000.0, 1050.0),
                    cold(f64::NAN, 950.0, 990.0),
                ],
            },
        ];
        let text = cold_table(&cells);
        assert!(text.contains("| 1G | disk | 3 | – | 20 | 950 | 1000 | 990 | 1050 | 0.0 |"), "{text}");
        let throughput = vec![
            Throughput { size: "1G".into(), peer: "skiff-fetch".into(), mb_per_s: vec![900.0, 1000.0, 800.0] },
            Throughput { size: "1G".into(), peer: "kserve-storage".into(), mb_per_s: vec![300.0, 400.0, 500.0] },
            Throughput { size: "1G".into(), peer: "TCP loopback".into(), mb_per_s: vec![2000.0] },
        ];
        let text = throughput_table(&throughput, "TCP loopback");
        assert!(text.contains("| 1G | skiff-fetch | 3 | 900 | 800 | 1000 | 0.45 |"), "{text}");
        let targets = targets("1G", &throughput, &cells);
        assert_eq!(targets.len(), 3);
        assert_eq!((targets[0].value, targets[0].met), (2.25, true));
        assert!((targets[1].value - 1005.0 / 950.0).abs() < 1e-9 && targets[1].met, "{targets:?}");
        assert!((targets[2].value - 1.1).abs() < 1e-9);
        let text = target_table(&targets);
        assert!(text.contains("| 1G: skiff-fetch ÷ kserve-storage, MB/s | 2.25 | ≥ 2 | yes |"), "{text}");
        assert!(text.contains("| (shown) | – |"), "{text}");
        assert!(targets_for_missing_peers_are_left_out());
    }

    fn targets_for_missing_peers_are_left_out() -> bool {
        targets("1M", &[], &[]).is_empty()
    }
}
