//! Changes to a YAML file the user wrote, made in place: one field of one document set, added or
//! removed, and every other byte (comments, key order, quoting, indentation, blank lines) left as it
//! was. The text is read through granit-parser's events and their source spans, never re-emitted.
//!
//! A change the spans cannot make safely is refused naming the field, rather than done by rewriting
//! the file: a key added to or removed from a flow mapping (`{a: 1}`), a block scalar (`|`, `>`), a
//! node with an anchor or a tag, a list. [`merge_patch`] applies a JSON merge patch (RFC 7386) as
//! such edits and reads the result again: it must be the original with the patch merged, nothing
//! more, or nothing is written.

use std::ops::Range;

use granit_parser::{Event, Parser, ScalarStyle, StructureStyle};
use serde_json::Value;

use crate::error::{Error, Result};

/// How far a nested key added by an edit is indented below its parent.
const STEP: usize = 2;

/// A node of the document, with where it lies in the text.
#[derive(Debug)]
struct Node {
    kind: Kind,
    /// Where the node's own text starts (for a block collection, its first child).
    start: usize,
    /// Where its text ends: the end of its last scalar, alias or closing bracket.
    end: usize,
    /// It carries an anchor or a tag, which an edit could not keep true.
    decorated: bool,
}

#[derive(Debug)]
enum Kind {
    Scalar(ScalarStyle),
    Mapping { flow: bool, entries: Vec<Entry> },
    Sequence,
    Alias,
}

/// One `key: value` of a mapping.
#[derive(Debug)]
struct Entry {
    /// The key's text, when the key is a scalar.
    key: Option<String>,
    /// Where the key starts.
    key_start: usize,
    value: Node,
}

fn refused(message: String) -> Error {
    Error::Refused { status: 422, message }
}

fn unreadable() -> Error {
    refused("not YAML that can be edited in place".into())
}

/// The events of document `document` (0-based), without comments, with their byte ranges.
fn events(text: &str, document: usize) -> Result<Vec<(Event<'_>, Range<usize>)>> {
    let mut documents = 0;
    let mut inside = false;
    let mut found = Vec::new();
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| refused(format!("not YAML: {e}")))?;
        let range = span.byte_range().ok_or_else(unreadable)?;
        match event {
            Event::DocumentStart(..) => inside = documents == document,
            Event::DocumentEnd => {
                if inside {
                    return Ok(found);
                }
                documents += 1;
            }
            Event::Comment(..) | Event::StreamStart | Event::StreamEnd => {}
            event if inside => found.push((event, range)),
            _ => {}
        }
    }
    Err(refused(format!("the file has no document {}", document + 1)))
}

/// Reads the node that starts at `events[*at]`, leaving `*at` after it.
fn node(events: &[(Event<'_>, Range<usize>)], at: &mut usize) -> Result<Node> {
    let (event, range) = events.get(*at).ok_or_else(unreadable)?;
    *at += 1;
    match event {
        Event::Scalar(_, style, anchor, tag) => Ok(Node {
            kind: Kind::Scalar(*style),
            start: range.start,
            end: range.end,
            decorated: *anchor != 0 || tag.is_some(),
        }),
        Event::Alias(_) => Ok(Node { kind: Kind::Alias, start: range.start, end: range.end, decorated: true }),
        Event::SequenceStart(style, anchor, tag) => {
            let mut end = range.end;
            loop {
                match events.get(*at) {
                    Some((Event::SequenceEnd, close)) => {
                        *at += 1;
                        if *style == StructureStyle::Flow {
                            end = close.end;
                        }
                        break;
                    }
                    Some(_) => end = end.max(node(events, at)?.end),
                    None => return Err(unreadable()),
                }
            }
            Ok(Node { kind: Kind::Sequence, start: range.start, end, decorated: *anchor != 0 || tag.is_some() })
        }
        Event::MappingStart(style, anchor, tag) => {
            let flow = *style == StructureStyle::Flow;
            let (mut entries, mut end) = (Vec::new(), range.end);
            loop {
                match events.get(*at) {
                    Some((Event::MappingEnd, close)) => {
                        *at += 1;
                        if flow {
                            end = close.end;
                        }
                        break;
                    }
                    Some((key, key_range)) => {
                        let key = match key {
                            Event::Scalar(text, ..) => Some(text.to_string()),
                            _ => None,
                        };
                        let key_start = key_range.start;
                        let _ = node(events, at)?;
                        let value = node(events, at)?;
                        end = end.max(value.end);
                        entries.push(Entry { key, key_start, value });
                    }
                    None => return Err(unreadable()),
                }
            }
            Ok(Node {
                kind: Kind::Mapping { flow, entries },
                start: range.start,
                end,
                decorated: *anchor != 0 || tag.is_some(),
            })
        }
        _ => Err(unreadable()),
    }
}

/// Where the line holding `at` starts.
fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |n| n + 1)
}

/// Where the line after a node that ends at `end` starts: a block scalar's span already reaches the
/// next line (its trailing blank lines and the next line's indentation).
fn line_after(text: &str, end: usize) -> usize {
    let start = line_start(text, end);
    if text[start..end].trim().is_empty() { start } else { text[end..].find('\n').map_or(text.len(), |n| end + n + 1) }
}

/// `value` as a YAML scalar: plain where it reads back as the same string, double-quoted otherwise.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".into()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => {
            let plain = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric() || c == '/')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || "_./:-".contains(c))
                && !s.ends_with(':')
                && serde_saphyr::from_str::<Value>(s).ok().as_ref() == Some(value);
            Some(if plain { s.clone() } else { serde_json::to_string(s).ok()? })
        }
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// The lines `names[0]:` … `names[last]: value`, each nested [`STEP`] further, the first at `indent`.
fn new_lines(names: &[&str], value: &str, indent: usize, newline: &str) -> String {
    let mut lines = String::new();
    for (depth, name) in names.iter().enumerate() {
        let key = scalar(&Value::String((*name).to_owned())).unwrap_or_default();
        lines.push_str(&" ".repeat(indent + depth * STEP));
        lines.push_str(&key);
        lines.push(':');
        if depth + 1 == names.len() {
            lines.push(' ');
            lines.push_str(value);
        }
        lines.push_str(newline);
    }
    lines
}

/// Sets the field at `path` of document `document` to the scalar `value`, adding it (and any
/// mapping on the way) under the deepest mapping that exists, or removes it when `value` is `None`.
fn edit(text: &str, document: usize, path: &[&str], value: Option<&Value>) -> Result<String> {
    let events = events(text, document)?;
    let mut at = 0;
    let mut current = node(&events, &mut at)?;
    let named = |depth: usize| if depth == 0 { "the document".to_owned() } else { path[..depth].join(".") };
    let rendered = value
        .map(|v| {
            scalar(v).ok_or_else(|| refused(format!("{}: only a scalar can be edited in place", named(path.len()))))
        })
        .transpose()?;
    for depth in 0..path.len() {
        let Kind::Mapping { flow, entries } = current.kind else {
            return Err(refused(format!("{}: not a mapping, so {} cannot be edited", named(depth), named(path.len()))));
        };
        let position = entries.iter().position(|e| e.key.as_deref() == Some(path[depth]));
        let Some(index) = position else {
            let Some(rendered) = rendered else { return Ok(text.to_owned()) };
            if flow {
                return Err(flow_refusal(&named(depth), &named(path.len())));
            }
            return Ok(insert(text, &entries, &path[depth..], &rendered, current.end));
        };
        if depth + 1 < path.len() {
            current = entries.into_iter().nth(index).ok_or_else(unreadable)?.value;
            continue;
        }
        let field = named(path.len());
        let entry = &entries[index];
        return match rendered {
            Some(rendered) => set(text, &field, &entry.value, &restyled(&entry.value, value, rendered)),
            None if flow => Err(flow_refusal(&named(depth), &field)),
            None => remove(text, &field, &entries, index),
        };
    }
    Err(refused("an empty path names no field".into()))
}

fn flow_refusal(mapping: &str, field: &str) -> Error {
    refused(format!(
        "{mapping}: a flow mapping ({{...}}) cannot gain or lose {field} without rewriting it; edit the file by hand"
    ))
}

/// `rendered` in the quotes the string it replaces was written in, where they can hold it: a
/// single-quoted storage URI stays single-quoted.
fn restyled(old: &Node, value: Option<&Value>, rendered: String) -> String {
    match (&old.kind, value) {
        (Kind::Scalar(ScalarStyle::SingleQuoted), Some(Value::String(s))) if !s.contains('\n') => {
            format!("'{}'", s.replace('\'', "''"))
        }
        (Kind::Scalar(ScalarStyle::DoubleQuoted), Some(Value::String(s))) => {
            serde_json::to_string(s).unwrap_or(rendered)
        }
        _ => rendered,
    }
}

/// Replaces the scalar `value` with `rendered`.
fn set(text: &str, field: &str, value: &Node, rendered: &str) -> Result<String> {
    match value.kind {
        Kind::Scalar(ScalarStyle::Literal | ScalarStyle::Folded) => {
            Err(refused(format!("{field}: a block scalar (| or >) cannot be edited in place")))
        }
        Kind::Scalar(_) if value.decorated => {
            Err(refused(format!("{field}: a value with an anchor or a tag cannot be edited in place")))
        }
        Kind::Scalar(_) => {
            if value.start < value.end {
                return Ok(format!("{}{rendered}{}", &text[..value.start], &text[value.end..]));
            }
            // `key:` with nothing after it: the parser places the empty value at the key's end; it
            // goes after the colon, with a space.
            let colon = text[value.start..].find(':').map(|n| value.start + n + 1).ok_or_else(unreadable)?;
            Ok(format!("{} {rendered}{}", &text[..colon], &text[colon..]))
        }
        _ => Err(refused(format!("{field}: not a scalar, so it cannot be set in place"))),
    }
}

/// Removes the lines of `entries[index]`, from its key to the end of its value.
fn remove(text: &str, field: &str, entries: &[Entry], index: usize) -> Result<String> {
    let entry = &entries[index];
    if entries.len() == 1 {
        return Err(refused(format!("{field}: the only key of its mapping cannot be removed in place")));
    }
    let start = line_start(text, entry.key_start);
    let end = line_after(text, entry.value.end);
    let after_value = &text[entry.value.end.min(end)..end];
    if !text[start..entry.key_start].trim().is_empty()
        || !(after_value.trim().is_empty() || after_value.trim_start().starts_with('#'))
    {
        return Err(refused(format!(
            "{field}: its key does not stand on lines of its own, so it cannot be removed in place"
        )));
    }
    Ok(format!("{}{}", &text[..start], &text[end..]))
}

/// Adds `names: value` to the block mapping of `entries` (which ends at `end`), after its last entry,
/// at its keys' indentation.
fn insert(text: &str, entries: &[Entry], names: &[&str], rendered: &str, end: usize) -> String {
    let first = entries.first().map_or(0, |e| e.key_start);
    let indent = text[line_start(text, first)..first].chars().count();
    let newline = if text.contains("\r\n") { "\r\n" } else { "\n" };
    let at = line_after(text, end);
    let lines = new_lines(names, rendered, indent, newline);
    let lead = if at == text.len() && !text.is_empty() && !text.ends_with('\n') { newline } else { "" };
    format!("{}{lead}{lines}{}", &text[..at], &text[at..])
}

/// The leaves of a merge patch: the path to each scalar, list or `null` in it.
fn leaves<'p>(patch: &'p Value, path: &mut Vec<&'p str>, out: &mut Vec<(Vec<&'p str>, &'p Value)>) {
    match patch {
        Value::Object(fields) => {
            for (name, value) in fields {
                path.push(name);
                leaves(value, path, out);
                path.pop();
            }
        }
        leaf => out.push((path.clone(), leaf)),
    }
}

/// Applies the JSON merge patch `patch` to document `document` of `text` in place: each field it
/// sets or removes is edited where it stands (or added after its siblings), the rest of the text
/// untouched. The result is read again and must equal the original with the patch merged.
pub fn merge_patch(text: &str, document: usize, patch: &Value) -> Result<String> {
    let mut found = Vec::new();
    leaves(patch, &mut Vec::new(), &mut found);
    let mut edited = text.to_owned();
    for (path, value) in found {
        edited = edit(&edited, document, &path, (!value.is_null()).then_some(value))?;
    }
    let read = |text: &str| serde_saphyr::from_multiple::<Value>(text).map_err(|e| refused(format!("not YAML: {e}")));
    let mut expected = read(text)?;
    let target =
        expected.get_mut(document).ok_or_else(|| refused(format!("the file has no document {}", document + 1)))?;
    json_patch::merge(target, patch);
    if read(&edited)? != expected {
        return Err(refused(
            "the change cannot be made in place without changing other fields; edit the file by hand".into(),
        ));
    }
    Ok(edited)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const COMMENTED: &str = "\
# The iris model, written by hand.
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata:
  name: iris   # the URL's first label
spec:
  predictor:
    # Scale to zero when idle.
    minReplicas: 0
    model:
      modelFormat: {name: onnx}
      storageUri: 'file://./models/iris'  # beside this file
  # transformer: later
";

    fn canary(percent: Option<u32>) -> Value {
        json!({"spec": {"predictor": {"canaryTrafficPercent": percent}}})
    }

    #[test]
    fn a_new_field_goes_after_its_siblings_and_the_rest_stays_byte_for_byte() {
        let edited = merge_patch(COMMENTED, 0, &canary(Some(30))).unwrap();
        let expected = COMMENTED.replace("# beside this file\n", "# beside this file\n    canaryTrafficPercent: 30\n");
        assert_eq!(edited, expected);
        // Set again, then removed: back to the file as it was written.
        let edited = merge_patch(&edited, 0, &canary(Some(0))).unwrap();
        assert_eq!(
            edited,
            COMMENTED.replace("# beside this file\n", "# beside this file\n    canaryTrafficPercent: 0\n")
        );
        assert_eq!(merge_patch(&edited, 0, &canary(None)).unwrap(), COMMENTED);
    }

    #[test]
    fn a_field_is_set_where_it_stands_keeping_its_comment() {
        let text = "spec:\n  predictor:\n    canaryTrafficPercent: 20   # a canary\n    minReplicas: 1\n";
        let edited = merge_patch(text, 0, &canary(Some(35))).unwrap();
        assert_eq!(edited, "spec:\n  predictor:\n    canaryTrafficPercent: 35   # a canary\n    minReplicas: 1\n");
        let removed = merge_patch(text, 0, &canary(None)).unwrap();
        assert_eq!(removed, "spec:\n  predictor:\n    minReplicas: 1\n");
        // A field with no value, and one that is not there to remove.
        let empty = "spec:\n  predictor:\n    canaryTrafficPercent:\n    minReplicas: 1\n";
        assert_eq!(merge_patch(empty, 0, &canary(Some(5))).unwrap(), empty.replace("Percent:\n", "Percent: 5\n"));
        assert_eq!(merge_patch(&removed, 0, &canary(None)).unwrap(), removed);
    }

    #[test]
    fn a_string_keeps_the_quotes_it_was_written_in() {
        let text = "spec:\n  predictor:\n    model:\n      storageUri: 'file://v2'   # here\n      runtime: \"a\"\n";
        let patch = json!({"spec": {"predictor": {"model": {"storageUri": "file://it's", "runtime": "b\"c"}}}});
        assert_eq!(
            merge_patch(text, 0, &patch).unwrap(),
            "spec:\n  predictor:\n    model:\n      storageUri: 'file://it''s'   # here\n      runtime: \"b\\\"c\"\n"
        );
        // A number in quotes is written as a number: quotes would make it a string.
        let quoted = "spec:\n  predictor:\n    canaryTrafficPercent: '10'\n    x: 1\n";
        assert_eq!(merge_patch(quoted, 0, &canary(Some(20))).unwrap(), quoted.replace("'10'", "20"));
    }

    #[test]
    fn missing_mappings_are_added_indented_as_the_file_is() {
        let text = "apiVersion: v1\nspec:\n    containers: []\n";
        let edited = merge_patch(text, 0, &canary(Some(10))).unwrap();
        assert_eq!(
            edited,
            "apiVersion: v1\nspec:\n    containers: []\n    predictor:\n      canaryTrafficPercent: 10\n"
        );
        let patch = json!({"spec": {"predictor": {"model": {"storageUri": "s3://bucket/iris: v2 #1"}}}});
        let edited = merge_patch("spec:\n  predictor:\n    minReplicas: 1", 0, &patch).unwrap();
        assert_eq!(
            edited,
            "spec:\n  predictor:\n    minReplicas: 1\n    model:\n      storageUri: \"s3://bucket/iris: v2 #1\"\n"
        );
        let crlf = "spec:\r\n  predictor:\r\n    minReplicas: 1\r\n";
        assert_eq!(
            merge_patch(crlf, 0, &canary(Some(1))).unwrap(),
            "spec:\r\n  predictor:\r\n    minReplicas: 1\r\n    canaryTrafficPercent: 1\r\n"
        );
    }

    #[test]
    fn only_the_named_document_of_several_changes() {
        let text = "# first\nkind: A\nspec:\n  predictor:\n    minReplicas: 1\n---\n# second\nkind: B\nspec:\n  predictor:\n    minReplicas: 2\n...\n";
        let edited = merge_patch(text, 1, &canary(Some(40))).unwrap();
        assert_eq!(edited, text.replace("minReplicas: 2\n", "minReplicas: 2\n    canaryTrafficPercent: 40\n"));
        let edited = merge_patch(text, 0, &canary(Some(40))).unwrap();
        assert_eq!(edited, text.replace("minReplicas: 1\n", "minReplicas: 1\n    canaryTrafficPercent: 40\n"));
        let missing = merge_patch(text, 2, &canary(Some(40))).unwrap_err().to_string();
        assert!(missing.contains("no document 3"), "{missing}");
    }

    #[test]
    fn block_scalars_after_the_last_field_keep_their_lines() {
        let text = "spec:\n  predictor:\n    args: |\n      --one\n      --two\n\n  other: 1\n";
        let edited = merge_patch(text, 0, &canary(Some(10))).unwrap();
        assert_eq!(
            edited,
            "spec:\n  predictor:\n    args: |\n      --one\n      --two\n\n    canaryTrafficPercent: 10\n  other: 1\n"
        );
    }

    #[test]
    fn flow_styles_are_edited_only_where_no_key_comes_or_goes() {
        let text = "spec:\n  predictor: {canaryTrafficPercent: 10, minReplicas: 0}\n";
        assert_eq!(
            merge_patch(text, 0, &canary(Some(25))).unwrap(),
            "spec:\n  predictor: {canaryTrafficPercent: 25, minReplicas: 0}\n"
        );
        let removal = merge_patch(text, 0, &canary(None)).unwrap_err().to_string();
        assert!(removal.starts_with("spec.predictor: a flow mapping"), "{removal}");
        let flow = "spec:\n  predictor: {minReplicas: 0}\n";
        let insertion = merge_patch(flow, 0, &canary(Some(25))).unwrap_err().to_string();
        assert!(insertion.contains("spec.predictor.canaryTrafficPercent"), "{insertion}");
        let root = merge_patch("{spec: {}}", 0, &canary(Some(1))).unwrap_err().to_string();
        assert!(root.starts_with("spec: a flow mapping"), "{root}");
    }

    #[test]
    fn what_cannot_be_edited_safely_is_refused_naming_the_field() {
        let cases = [
            ("spec:\n  predictor:\n    canaryTrafficPercent: |\n      10\n", "a block scalar"),
            ("spec:\n  predictor:\n    canaryTrafficPercent: !!int 10\n    x: 1\n", "an anchor or a tag"),
            ("spec:\n  predictor:\n    canaryTrafficPercent: &c 10\n    x: 1\n", "an anchor or a tag"),
            ("spec:\n  predictor: [1, 2]\n", "spec.predictor: not a mapping"),
            ("spec:\n  predictor:\n    canaryTrafficPercent: 10\n", "the only key"),
            ("spec:\n  predictor:\n    canaryTrafficPercent:\n      a: 1\n    x: 1\n", "not a scalar"),
            ("- 1\n", "the document: not a mapping"),
            ("a: [\n", "not YAML"),
        ];
        for (text, why) in cases {
            let percent = if why == "the only key" { None } else { Some(20) };
            let error = merge_patch(text, 0, &canary(percent)).unwrap_err();
            assert!(matches!(error, Error::Refused { status: 422, .. }), "{error:?}");
            assert!(error.to_string().contains(why), "{text:?}: {error}");
        }
        let list = merge_patch("spec: {}\n", 0, &json!({"spec": {"containers": []}})).unwrap_err();
        assert!(list.to_string().starts_with("spec.containers: only a scalar"), "{list}");
    }

    #[test]
    fn an_edit_that_would_change_another_field_is_refused() {
        // An alias reads the anchored mapping: editing one would change both.
        let text = "base: &b\n  predictor:\n    minReplicas: 1\nspec: *b\n";
        let error = merge_patch(text, 0, &json!({"base": {"predictor": {"minReplicas": 3}}})).unwrap_err();
        assert!(error.to_string().contains("without changing other fields"), "{error}");
    }

    /// A predictor written in one of many ways: its keys in any order, with or without a canary
    /// (plain, quoted or empty), comments beside and between them, indented by `step`.
    fn predictor() -> impl Strategy<Value = (String, bool)> {
        let fields = Just(vec!["minReplicas: 0", "maxReplicas: 3", "model:", "canary"]).prop_shuffle();
        let canary = prop::sample::select(vec![
            "canaryTrafficPercent: 10",
            "canaryTrafficPercent: '10'",
            "canaryTrafficPercent:",
            "",
            "canaryTrafficPercent: 10 # c",
        ]);
        (fields, canary, prop::sample::select(vec![2usize, 4]), any::<[bool; 4]>()).prop_map(
            |(fields, canary, step, comments)| {
                let pad = |depth: usize| " ".repeat(depth * step);
                let mut text =
                    format!("# header\napiVersion: serving.kserve.io/v1beta1\nspec:\n{}predictor:\n", pad(1));
                for (field, comment) in fields.iter().zip(comments) {
                    let line = match *field {
                        "canary" if canary.is_empty() => continue,
                        "canary" => canary.to_owned(),
                        "model:" => format!("model:\n{}storageUri: file://m\n{}# inside model", pad(3), pad(3)),
                        other => other.to_owned(),
                    };
                    if comment {
                        text.push_str(&format!("{}# about the next line\n", pad(2)));
                    }
                    text.push_str(&format!("{}{line}\n", pad(2)));
                }
                text.push_str("# footer\n");
                (text, !canary.is_empty())
            },
        )
    }

    proptest! {
        #[test]
        fn every_line_but_the_canarys_stays_as_written((text, had) in predictor(), percent in 0u32..=100) {
            let others = |t: &str| t.lines().filter(|l| !l.contains("canaryTrafficPercent")).map(str::to_owned).collect::<Vec<_>>();
            let set = merge_patch(&text, 0, &canary(Some(percent))).unwrap();
            prop_assert_eq!(others(&set), others(&text));
            let value: Value = serde_saphyr::from_str(&set).unwrap();
            prop_assert_eq!(&value["spec"]["predictor"]["canaryTrafficPercent"], &json!(percent));
            let removed = merge_patch(&set, 0, &canary(None)).unwrap();
            prop_assert_eq!(others(&removed), others(&text));
            prop_assert_eq!(removed.lines().count(), others(&text).len());
            if !had {
                prop_assert_eq!(removed, text);
            }
        }
    }
}
