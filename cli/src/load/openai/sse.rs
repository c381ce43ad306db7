//! An incremental parser of server-sent events (the WHATWG event-stream format): bytes go in as
//! they arrive, in pieces cut anywhere, and the `data` of each complete event comes out. Lines end
//! in `\n`, `\r\n` or `\r`; a blank line ends an event; `data:` lines are joined with `\n`;
//! comments (`:`) and other fields are skipped.

/// The parser's state between pieces.
#[derive(Debug, Default)]
pub struct Parser {
    /// Bytes of the line not yet ended.
    line: Vec<u8>,
    /// The last piece ended in `\r`: a `\n` first in the next one ends no second line.
    after_cr: bool,
    /// The event's data lines so far.
    data: Option<String>,
}

impl Parser {
    /// A parser at the start of a stream.
    pub fn new() -> Parser {
        Parser::default()
    }

    /// Feeds the next piece of the stream; returns the data of the events it completed.
    pub fn push(&mut self, piece: &[u8]) -> Vec<String> {
        let mut events = Vec::new();
        for &byte in piece {
            let after_cr = std::mem::take(&mut self.after_cr);
            match byte {
                b'\n' if after_cr => {}
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(data) = self.end_line(&line) {
                        events.push(data);
                    }
                }
                _ => self.line.push(byte),
            }
        }
        events
    }

    /// Handles one whole line; the event's data when the line is blank and ends one.
    fn end_line(&mut self, line: &[u8]) -> Option<String> {
        if line.is_empty() {
            return self.data.take();
        }
        let line = String::from_utf8_lossy(line);
        let (field, value) = line.split_once(':').unwrap_or((&line, ""));
        if field == "data" {
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(stream: &[u8]) -> Vec<String> {
        Parser::new().push(stream)
    }

    #[test]
    fn events_end_at_blank_lines_in_any_line_ending() {
        assert_eq!(all(b"data: {\"a\":1}\n\ndata: [DONE]\n\n"), ["{\"a\":1}", "[DONE]"]);
        assert_eq!(all(b"data: x\r\n\r\ndata:y\r\rdata: z\n"), ["x", "y"], "an event not ended yet is held");
        assert_eq!(all(b": keep-alive\n\nevent: ping\ndata: a\ndata: b\nid: 7\n\n"), ["a\nb"]);
        assert!(all(b"\n\n\n").is_empty(), "blank lines alone are no events");
    }

    fn stream() -> impl Strategy<Value = (Vec<String>, Vec<u8>)> {
        let data = proptest::collection::vec("[^\r\n]{0,12}", 1..4).prop_map(|lines| lines.join("\n"));
        let ending = prop_oneof![Just("\n"), Just("\r\n"), Just("\r")];
        proptest::collection::vec((data, ending, any::<bool>()), 0..8).prop_map(|events| {
            let mut bytes = String::new();
            for (data, end, comment) in &events {
                if *comment {
                    bytes.push_str(&format!(": comment{end}"));
                }
                for line in data.split('\n') {
                    bytes.push_str(&format!("data: {line}{end}"));
                }
                bytes.push_str(end);
            }
            (events.into_iter().map(|(data, ..)| data).collect(), bytes.into_bytes())
        })
    }

    proptest! {
        #[test]
        fn pieces_cut_anywhere_give_the_events_written(
            (events, bytes) in stream(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut parser = Parser::new();
            let (mut got, mut from) = (Vec::new(), 0);
            for cut in cuts.into_iter().chain([bytes.len()]) {
                got.extend(parser.push(&bytes[from..cut]));
                from = cut;
            }
            prop_assert_eq!(got, events);
        }
    }
}
