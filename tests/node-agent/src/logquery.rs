//! The kubelet's log endpoint, pure part: `GET /containerLogs/{namespace}/{pod}/{container}` and
//! its query (what the API server forwards from `pods/log`), and where "the last N lines" of a
//! log start.

use crate::error::{Error, Result};

/// One parsed log request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogRequest {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub container: String,
    /// `follow=true`: keep streaming new output until the client goes or the pod stops for good.
    pub follow: bool,
    /// `tailLines=N`: start N lines before the end (0 = only what comes next).
    pub tail_lines: Option<u64>,
    /// `limitBytes=N`: stop after N bytes of log, in follow mode too.
    pub limit_bytes: Option<u64>,
}

/// Parses the path and query of a request, or says why it cannot be served.
///
/// Accepted but ignored: `timestamps` (the agent stores raw output, with no time per line, so
/// lines come without the RFC 3339 prefix), `sinceSeconds` and `sinceTime` (for the same reason
/// the whole log is sent), `pretty` and anything unknown. Refused with 400: `previous=true` (a
/// container's restarts append to one log file, so there is no separate previous log), bad
/// numbers and booleans. A path that is not `/containerLogs/<ns>/<pod>/<container>` is a 404.
pub fn parse(path: &str, query: Option<&str>) -> Result<LogRequest> {
    let not_found = || Error::refused(404, format!("no such endpoint: {path}"));
    let rest = path.strip_prefix("/containerLogs/").ok_or_else(not_found)?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [namespace, pod, container] = parts[..] else { return Err(not_found()) };
    if [namespace, pod, container].iter().any(|s| s.is_empty()) {
        return Err(not_found());
    }
    let mut req =
        LogRequest { namespace: namespace.into(), pod: pod.into(), container: container.into(), ..Default::default() };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, "true"));
        match key {
            "follow" => req.follow = boolean(key, value)?,
            "previous" if boolean(key, value)? => {
                return Err(Error::refused(
                    400,
                    "previous=true is not supported: skiff-node-agent appends every run of a container \
                     to one log file, so the current log holds the earlier runs too",
                ));
            }
            "tailLines" => req.tail_lines = Some(number(key, value, 0)?),
            "limitBytes" => req.limit_bytes = Some(number(key, value, 1)?),
            // timestamps, sinceSeconds, sinceTime, pretty, previous=false and unknown keys.
            _ => {}
        }
    }
    Ok(req)
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value {
        "true" | "1" | "True" | "TRUE" | "t" | "T" => Ok(true),
        "false" | "0" | "False" | "FALSE" | "f" | "F" => Ok(false),
        _ => Err(Error::refused(400, format!("{key}={value}: expected true or false"))),
    }
}

fn number(key: &str, value: &str, min: u64) -> Result<u64> {
    value
        .parse::<u64>()
        .ok()
        .filter(|n| *n >= min)
        .ok_or_else(|| Error::refused(400, format!("{key}={value}: expected a whole number >= {min}")))
}

/// Where the last `lines` lines of `data` start, if `data` holds that many lines; `None` if it
/// holds fewer (read more of the file, or start at its beginning when `data` is all of it).
///
/// A line ends with `\n`; a last line without one (output still being written) counts as a line.
pub fn tail_offset(data: &[u8], lines: u64) -> Option<usize> {
    if lines == 0 {
        return Some(data.len());
    }
    // The newline that ends the last line does not start another one.
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == lines {
                return Some(i + 1);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(e: Error) -> u16 {
        match e {
            Error::Refused { status, .. } => status,
            other => panic!("not a refusal: {other}"),
        }
    }

    #[test]
    fn path_and_defaults() {
        let r = parse("/containerLogs/ns/p-1/c", None).unwrap();
        assert_eq!((r.namespace.as_str(), r.pod.as_str(), r.container.as_str()), ("ns", "p-1", "c"));
        assert!(!r.follow);
        assert_eq!((r.tail_lines, r.limit_bytes), (None, None));
    }

    #[test]
    fn bad_paths_are_404() {
        for p in ["/containerLogs/ns/p", "/containerLogs/ns/p/c/x", "/containerLogs//p/c", "/logs/x", "/"] {
            assert_eq!(status(parse(p, None).unwrap_err()), 404, "{p}");
        }
    }

    #[test]
    fn query_as_the_api_server_sends_it() {
        let q = "follow=true&tailLines=10&limitBytes=500&timestamps=true&sinceSeconds=5&previous=false";
        let r = parse("/containerLogs/a/b/c", Some(q)).unwrap();
        assert!(r.follow);
        assert_eq!((r.tail_lines, r.limit_bytes), (Some(10), Some(500)));
        assert!(!parse("/containerLogs/a/b/c", Some("follow=false")).unwrap().follow);
        assert_eq!(parse("/containerLogs/a/b/c", Some("tailLines=0")).unwrap().tail_lines, Some(0));
    }

    #[test]
    fn bad_query_is_400_with_a_reason() {
        for q in ["follow=maybe", "tailLines=-1", "tailLines=x", "limitBytes=0", "previous=true", "previous"] {
            let e = parse("/containerLogs/a/b/c", Some(q)).unwrap_err();
            let text = e.to_string();
            assert_eq!(status(e), 400, "{q}");
            let key = q.split('=').next().unwrap();
            assert!(text.contains(key), "{q}: {text}");
        }
    }

    #[test]
    fn tail_counts_lines_from_the_end() {
        let d = b"a\nbb\nccc\n";
        assert_eq!(tail_offset(d, 0), Some(d.len()));
        assert_eq!(&d[tail_offset(d, 1).unwrap()..], b"ccc\n");
        assert_eq!(&d[tail_offset(d, 2).unwrap()..], b"bb\nccc\n");
        assert_eq!(tail_offset(d, 3), None); // all of it, if `d` is the whole file
        assert_eq!(tail_offset(d, 9), None);
    }

    #[test]
    fn tail_with_an_unfinished_last_line() {
        let d = b"a\nbb\ncc";
        assert_eq!(&d[tail_offset(d, 1).unwrap()..], b"cc");
        assert_eq!(&d[tail_offset(d, 2).unwrap()..], b"bb\ncc");
        assert_eq!(tail_offset(b"", 1), None);
        assert_eq!(tail_offset(b"\n", 1), None);
        assert_eq!(&b"\n\n"[tail_offset(b"\n\n", 1).unwrap()..], b"\n");
    }
}
