//! `skiff cache ls` and `skiff cache prune`: the model cache `skiff up` fetches models into
//! ([`crate::standalone::models`]), shown and trimmed. A model a replica holds is never pruned.

use std::path::PathBuf;
use std::time::SystemTime;

use skiff_fetch::Cache;
use skiff_fetch::cache::Entry;

use crate::standalone::models::default_dir;

/// `skiff cache` commands.
#[derive(Debug, clap::Subcommand)]
pub enum CacheCommand {
    /// List the cached models, least recently used first.
    Ls {
        /// The cache's folder (default: `$XDG_CACHE_HOME/skiff/models`).
        #[arg(long, env = "SKIFF_MODEL_CACHE")]
        dir: Option<PathBuf>,
    },
    /// Evict least recently used models not in use until the cache holds at most `--to`.
    Prune {
        /// The cache's folder (default: `$XDG_CACHE_HOME/skiff/models`).
        #[arg(long, env = "SKIFF_MODEL_CACHE")]
        dir: Option<PathBuf>,
        /// What the cache may keep: bytes, or with a suffix (`500M`, `20G`); 0 evicts every model
        /// not in use.
        #[arg(long, default_value = "0", value_parser = parse_size)]
        to: u64,
    },
}

/// Runs a `skiff cache` command, printing what it found or did.
pub fn run(command: CacheCommand) -> anyhow::Result<()> {
    match command {
        CacheCommand::Ls { dir } => {
            let cache = Cache::open(dir.unwrap_or_else(default_dir), u64::MAX)?;
            print!("{}", table(&cache.entries()?, SystemTime::now()));
        }
        CacheCommand::Prune { dir, to } => {
            let cache = Cache::open(dir.unwrap_or_else(default_dir), u64::MAX)?;
            let evicted = cache.prune(to)?;
            let freed: u64 = evicted.iter().map(|e| e.meta.bytes).sum();
            for entry in &evicted {
                println!("evicted {} ({})", entry.meta.uri, size(entry.meta.bytes));
            }
            let kept: u64 = cache.entries()?.iter().map(|e| e.meta.bytes).sum();
            println!("freed {}; the cache holds {}", size(freed), size(kept));
        }
    }
    Ok(())
}

/// The entries as aligned columns.
fn table(entries: &[Entry], now: SystemTime) -> String {
    let rows: Vec<[String; 5]> = entries
        .iter()
        .map(|e| {
            let ago = now.duration_since(e.last_used).map_or(0, |d| d.as_secs());
            [
                e.meta.uri.clone(),
                size(e.meta.bytes),
                e.meta.version.chars().take(12).collect(),
                format!("{ago}s ago"),
                if e.in_use { "yes" } else { "no" }.to_owned(),
            ]
        })
        .collect();
    let header = ["URI", "SIZE", "VERSION", "LAST USED", "IN USE"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.len());
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let cells: Vec<String> = row.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    let total: u64 = entries.iter().map(|e| e.meta.bytes).sum();
    out.push_str(&format!("{} models, {}\n", entries.len(), size(total)));
    out
}

/// Bytes in the largest binary unit that keeps them at least 1.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

pub use crate::units::parse_size;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use skiff_fetch::cache::Meta;

    use super::*;

    #[test]
    fn sizes_read_with_their_units() {
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("50GiB"), Ok(50 << 30));
        assert!(parse_size("5X").unwrap_err().contains("one of K, M, G, T"));
        assert!(parse_size("G").unwrap_err().contains("expected a size"));
        assert_eq!(size(512), "512 B");
        assert_eq!(size(3 << 29), "1.5 GiB");
    }

    #[test]
    fn the_table_shows_each_model_and_the_total() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let meta = Meta {
            uri: "s3://models/iris".into(),
            version: "0123456789abcdef".into(),
            bytes: 2 << 20,
            objects: 1,
            fetched_at: 0,
            boot: String::new(),
            durable: true,
            files: None,
        };
        let entry = Entry { key: "k".into(), meta, last_used: now - Duration::from_secs(90), in_use: true };
        let table = table(&[entry], now);
        assert_eq!(
            table,
            "URI               SIZE     VERSION       LAST USED  IN USE\n\
             s3://models/iris  2.0 MiB  0123456789ab  90s ago    yes\n\
             1 models, 2.0 MiB\n"
        );
    }
}
