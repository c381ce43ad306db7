//! KServe's own sample manifests (tests/fixtures/kserve-corpus, 259 InferenceServices of
//! kserve/kserve and kserve/website) through what `skiff up` does with a manifest file
//! ([`ManifestFolder::check`], default settings). Each is accepted, with a warning for every field KServe
//! does not have ([`skiff_api::fields`]) and a notice for every field skiff up does not act on
//! ([`super::notices`]: none is ignored silently), or refused with a message that starts with the
//! field's path. The outcomes are compared with `expected.tsv`, so that a change
//! shows in review; `SKIFF_CORPUS_BLESS=1` rewrites it:
//!
//! ```text
//! SKIFF_CORPUS_BLESS=1 cargo test -p skiff --bin skiff corpus
//! ```

use std::path::{Path, PathBuf};

use super::super::config::UpConfig;
use super::super::folder::ManifestFolder;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/kserve-corpus")
}

/// `accepted`, `accepted; unknown fields: <paths>; not acted on: <notices>` (either part only when
/// there is one) or `refused: <message>`, one line.
fn outcome(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let line = match ManifestFolder::new(corpus(), UpConfig::default()).check(file, &text) {
        Ok(manifest) => {
            let mut line = "accepted".to_owned();
            if !manifest.unknown.is_empty() {
                line = format!("{line}; unknown fields: {}", manifest.unknown.join(", "));
            }
            if !manifest.notices.is_empty() {
                line = format!("{line}; not acted on: {}", manifest.notices.join("; "));
            }
            line
        }
        Err(message) => {
            assert!(names_a_field(&message), "{}: the refusal names no field: {message}", file.display());
            format!("refused: {message}")
        }
    };
    line.replace(['\n', '\t'], " ")
}

/// Whether `message` starts with a field path: `spec.predictor.model.storageUri: `,
/// `metadata.annotations[serving.kserve.io/autoscalerClass]: `, `spec.predictor.containers[0].image: `.
fn names_a_field(message: &str) -> bool {
    let Some((field, _)) = message.split_once(": ") else { return false };
    let head = field.split(['.', '[']).next().unwrap_or_default();
    ["apiVersion", "kind", "metadata", "spec"].contains(&head)
        && !field.contains(' ')
        && field.split('[').skip(1).all(|part| part.contains(']'))
}

#[test]
fn kserve_samples_are_accepted_or_refused_naming_the_field() {
    let root = corpus();
    let index = std::fs::read_to_string(root.join("index.tsv")).unwrap();
    let files: Vec<&str> = index.lines().skip(1).map(|line| line.split('\t').next().unwrap()).collect();
    assert!(files.len() > 250, "the corpus has {} manifests", files.len());
    let outcomes: Vec<(&str, String)> = files.iter().map(|f| (*f, outcome(&root.join(f)))).collect();
    let accepted = outcomes.iter().filter(|(_, o)| o.starts_with("accepted")).count();
    println!(
        "skiff up accepts {accepted} of {} KServe sample manifests ({:.1} %)",
        outcomes.len(),
        100.0 * accepted as f64 / outcomes.len() as f64
    );
    let table: String = outcomes.iter().map(|(f, o)| format!("{f}\t{o}\n")).collect();
    let expected_path = root.join("expected.tsv");
    if std::env::var("SKIFF_CORPUS_BLESS").as_deref() == Ok("1") {
        std::fs::write(&expected_path, format!("file\tskiff up\n{table}")).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    let expected: Vec<&str> = expected.lines().skip(1).collect();
    let changed: Vec<String> = table
        .lines()
        .zip(expected.iter().chain(std::iter::repeat(&"(none)")))
        .filter(|(got, want)| got != *want)
        .map(|(got, want)| format!("  expected {want}\n  got      {got}"))
        .collect();
    assert!(
        changed.is_empty() && expected.len() == outcomes.len(),
        "{} of {} outcomes differ from expected.tsv ({} lines; SKIFF_CORPUS_BLESS=1 rewrites it):\n{}",
        changed.len(),
        outcomes.len(),
        expected.len(),
        changed.join("\n")
    );
}
