//! Server-sent events, parsed incrementally per the WHATWG event-stream rules.
//!
//! Bytes can arrive split at any position (inside a line, inside a CRLF pair, inside a UTF-8
//! sequence). Lines end with CRLF, LF or CR. `field: value` lines set fields (one space after the
//! colon is dropped), lines starting with `:` are comments, a blank line dispatches the event.
//! Per the standard, an event that is not terminated by a blank line when the stream ends is not
//! dispatched; [`SseParser::finish`] reports whether such a partial event was pending, which the
//! client treats as evidence of a truncated stream.

/// One dispatched event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, or `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen (`id:` field), if any.
    pub id: Option<String>,
}

/// What the parser produced from a piece of input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SseItem {
    Event(SseEvent),
    /// A comment line (`: ping`), without the leading colon.
    Comment(String),
}

/// State left when the stream ends.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEnd {
    /// An event had fields but no terminating blank line.
    pub partial_event: bool,
    /// Bytes of an unterminated line were pending.
    pub partial_line: bool,
}

#[derive(Debug, Default)]
pub struct SseParser {
    /// The longest line, and the most `data:` of one event, kept (bytes; `None`: no limit).
    limit: Option<usize>,
    /// A line or an event's data went past the limit: nothing more is parsed.
    overflowed: bool,
    line: Vec<u8>,
    /// The previous byte was CR: a following LF belongs to the same line end.
    after_cr: bool,
    /// The stream's first bytes were checked for a UTF-8 byte order mark.
    bom_done: bool,
    bom_buf: Vec<u8>,
    data: String,
    has_data: bool,
    event: String,
    last_id: Option<String>,
    /// Fields were seen since the last dispatch.
    pending: bool,
}

impl SseParser {
    pub fn new() -> Self {
        SseParser::default()
    }

    /// A parser that stops at a line, or an event's data, longer than `bytes`: see
    /// [`SseParser::overflowed`].
    pub fn with_limit(bytes: usize) -> Self {
        SseParser { limit: Some(bytes), ..SseParser::default() }
    }

    /// Whether a line or an event's data went past the limit. Nothing is parsed after that, and
    /// what was pending is dropped: memory stays bounded whatever the server sends.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn over(&self, len: usize) -> bool {
        self.limit.is_some_and(|l| len > l)
    }

    /// Feed bytes; complete items are appended to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseItem>) {
        if !self.bom_done {
            // Collect up to three bytes to decide whether the stream starts with a BOM.
            let need = 3 - self.bom_buf.len();
            let take = need.min(bytes.len());
            self.bom_buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if self.bom_buf.len() < 3 && BOM.starts_with(&self.bom_buf) {
                return; // undecided, wait for more
            }
            self.bom_done = true;
            let buf = std::mem::take(&mut self.bom_buf);
            let rest: &[u8] = if buf == BOM { &[] } else { &buf };
            self.feed_lines(rest, out);
        }
        self.feed_lines(bytes, out);
    }

    fn feed_lines(&mut self, bytes: &[u8], out: &mut Vec<SseItem>) {
        if self.overflowed {
            return;
        }
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'\n' if self.after_cr => {
                    // Second half of a CRLF whose CR ended the line already.
                    self.after_cr = false;
                    start = i + 1;
                }
                b'\n' | b'\r' => {
                    if self.over(self.line.len() + (i - start)) {
                        return self.overflow();
                    }
                    self.line.extend_from_slice(&bytes[start..i]);
                    self.after_cr = b == b'\r';
                    self.end_line(out);
                    if self.overflowed {
                        return;
                    }
                    start = i + 1;
                }
                _ => self.after_cr = false,
            }
        }
        if self.over(self.line.len() + (bytes.len() - start)) {
            return self.overflow();
        }
        self.line.extend_from_slice(&bytes[start..]);
    }

    fn overflow(&mut self) {
        self.overflowed = true;
        self.line = Vec::new();
        self.data = String::new();
    }

    fn end_line(&mut self, out: &mut Vec<SseItem>) {
        let raw = std::mem::take(&mut self.line);
        let line = String::from_utf8_lossy(&raw);
        if line.is_empty() {
            self.dispatch(out);
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            out.push(SseItem::Comment(comment.strip_prefix(' ').unwrap_or(comment).to_string()));
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_ref(), ""),
        };
        match field {
            "data" => {
                if self.over(self.data.len() + value.len() + 1) {
                    return self.overflow();
                }
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
                self.pending = true;
            }
            "event" => {
                self.event = value.to_string();
                self.pending = true;
            }
            "id" if !value.contains('\0') => {
                self.last_id = Some(value.to_string());
                self.pending = true;
            }
            // `retry` and unknown fields are ignored, as the standard says.
            _ => {}
        }
    }

    fn dispatch(&mut self, out: &mut Vec<SseItem>) {
        self.pending = false;
        if !self.has_data {
            self.event.clear();
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        self.has_data = false;
        let event = std::mem::take(&mut self.event);
        out.push(SseItem::Event(SseEvent {
            event: if event.is_empty() { "message".to_string() } else { event },
            data,
            id: self.last_id.clone(),
        }));
    }

    /// The stream ended: report what was left undelivered.
    pub fn finish(self) -> SseEnd {
        SseEnd {
            partial_event: self.pending || self.has_data || !self.line.is_empty(),
            partial_line: !self.line.is_empty() || (!self.bom_done && !self.bom_buf.is_empty()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_or_event_past_the_limit_stops_the_parser_and_drops_what_was_pending() {
        // Under the limit, across chunks: parsed.
        let mut p = SseParser::with_limit(16);
        let mut out = Vec::new();
        p.feed(b"data: 0123456", &mut out);
        p.feed(b"789\n\n", &mut out);
        assert!(!p.overflowed());
        assert_eq!(out.len(), 1);
        // One line without an end, fed in pieces: stops once it passes the limit.
        let mut p = SseParser::with_limit(16);
        out.clear();
        for _ in 0..10 {
            p.feed(b"data: xxxxxxxx", &mut out);
        }
        assert!(p.overflowed());
        assert!(p.line.capacity() <= 32, "nothing is kept once over");
        p.feed(b"\n\ndata: ok\n\n", &mut out);
        assert!(out.is_empty(), "nothing is parsed after the limit");
        // Short lines whose data adds up past the limit in one event.
        let mut p = SseParser::with_limit(16);
        for _ in 0..5 {
            p.feed(b"data: abcde\n", &mut out);
        }
        assert!(p.overflowed());
        assert!(out.is_empty());
        // Without a limit the same lines make one event.
        let mut p = SseParser::new();
        for _ in 0..5 {
            p.feed(b"data: abcde\n", &mut out);
        }
        p.feed(b"\n", &mut out);
        assert!(!p.overflowed());
        assert_eq!(out.len(), 1);
    }

    fn parse_all(chunks: &[&[u8]]) -> (Vec<SseItem>, SseEnd) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        (out, p.finish())
    }

    fn ev(event: &str, data: &str) -> SseItem {
        SseItem::Event(SseEvent { event: event.into(), data: data.into(), id: None })
    }

    /// A corpus of streams covering every quirk, with what they must parse to.
    fn corpus() -> Vec<(&'static str, Vec<u8>, Vec<SseItem>, bool)> {
        let role = r#"{"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#;
        let tok = r#"{"choices":[{"index":0,"delta":{"content":"héllo ✓"}}]}"#;
        let usage = r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#;
        vec![
            (
                "lf",
                format!("data: {role}\n\ndata: {tok}\n\ndata: [DONE]\n\n").into_bytes(),
                vec![ev("message", role), ev("message", tok), ev("message", "[DONE]")],
                false,
            ),
            (
                "crlf",
                format!("data: {tok}\r\n\r\ndata: {usage}\r\n\r\ndata: [DONE]\r\n\r\n")
                    .into_bytes(),
                vec![ev("message", tok), ev("message", usage), ev("message", "[DONE]")],
                false,
            ),
            (
                "cr",
                format!("data: {tok}\r\rdata: [DONE]\r\r").into_bytes(),
                vec![ev("message", tok), ev("message", "[DONE]")],
                false,
            ),
            (
                "no space after colon, comments, multi-line data",
                format!(
                    ": ping\n\ndata:{tok}\n\n: keep-alive\ndata: line1\ndata:  line2\ndata\n\n"
                )
                .into_bytes(),
                vec![
                    SseItem::Comment("ping".into()),
                    ev("message", tok),
                    SseItem::Comment("keep-alive".into()),
                    ev("message", "line1\n line2\n"),
                ],
                false,
            ),
            (
                "event error with id and retry",
                b"retry: 100\nid: 7\nevent: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"
                    .to_vec(),
                vec![SseItem::Event(SseEvent {
                    event: "error".into(),
                    data: "{\"error\":{\"message\":\"boom\"}}".into(),
                    id: Some("7".into()),
                })],
                false,
            ),
            (
                "bom and event without data is not dispatched",
                format!("\u{feff}event: ping\n\ndata: {tok}\n\n").into_bytes(),
                vec![ev("message", tok)],
                false,
            ),
            (
                "ends without blank line: partial event not dispatched",
                format!("data: {tok}\n\ndata: {tok}").into_bytes(),
                vec![ev("message", tok)],
                true,
            ),
            (
                "ends after data line without blank line",
                format!("data: {tok}\n").into_bytes(),
                vec![],
                true,
            ),
            (
                "mixed line endings",
                b"data: a\r\ndata: b\rdata: c\n\r\n".to_vec(),
                vec![ev("message", "a\nb\nc")],
                false,
            ),
        ]
    }

    #[test]
    fn corpus_whole() {
        for (name, bytes, want, partial) in corpus() {
            let (got, end) = parse_all(&[&bytes]);
            assert_eq!(got, want, "{name}");
            assert_eq!(end.partial_event, partial, "{name}");
        }
    }

    #[test]
    fn corpus_cut_at_every_byte_boundary() {
        for (name, bytes, want, partial) in corpus() {
            for cut in 0..=bytes.len() {
                let (got, end) = parse_all(&[&bytes[..cut], &bytes[cut..]]);
                assert_eq!(got, want, "{name}, cut at {cut}");
                assert_eq!(end.partial_event, partial, "{name}, cut at {cut}");
            }
            // Two cuts: every pair of boundaries (bounded by the corpus size).
            for a in 0..=bytes.len() {
                for b in (a..=bytes.len()).step_by(7) {
                    let (got, _) = parse_all(&[&bytes[..a], &bytes[a..b], &bytes[b..]]);
                    assert_eq!(got, want, "{name}, cuts at {a},{b}");
                }
            }
        }
    }

    #[test]
    fn corpus_one_byte_at_a_time() {
        for (name, bytes, want, _) in corpus() {
            let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
            let (got, _) = parse_all(&chunks);
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let (got, _) = parse_all(&[b"data: \xff\xfe ok\n\n"]);
        assert_eq!(got, vec![ev("message", "\u{fffd}\u{fffd} ok")]);
    }

    mod props {
        //! Properties over generated streams: pieces of SSE syntax mixed with arbitrary bytes,
        //! split at arbitrary points.

        use super::super::*;
        use proptest::prelude::*;
        use proptest::sample::Index;

        /// A stream made of SSE fragments (fields, comments, every line end, a BOM, bytes of a
        /// split UTF-8 character, invalid UTF-8) and arbitrary bytes.
        fn stream() -> impl Strategy<Value = Vec<u8>> {
            let fragment = prop_oneof![
                Just(b"data:".to_vec()),
                Just(b"data: ".to_vec()),
                Just(b"event: e".to_vec()),
                Just(b"id: 7".to_vec()),
                Just(b"id: a\0b".to_vec()),
                Just(b"retry: 5".to_vec()),
                Just(b": ping".to_vec()),
                Just(b"\n".to_vec()),
                Just(b"\r".to_vec()),
                Just(b"\r\n".to_vec()),
                Just(b"\n\n".to_vec()),
                Just(b"\xEF\xBB\xBF".to_vec()),
                Just("é✓".as_bytes().to_vec()),
                Just(b"\xE2\x9C".to_vec()),
                Just(b"\xff".to_vec()),
                proptest::collection::vec(any::<u8>(), 0..12),
                "[a-z{}\":, ]{0,12}".prop_map(String::into_bytes),
            ];
            proptest::collection::vec(fragment, 0..48).prop_map(|f| f.concat())
        }

        /// `bytes` cut at the given points (in any order, repeats allowed).
        fn pieces(bytes: &[u8], cuts: &[Index]) -> Vec<Vec<u8>> {
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            at.sort_unstable();
            let mut out = Vec::new();
            let mut start = 0;
            for a in at.into_iter().chain([bytes.len()]) {
                out.push(bytes[start..a].to_vec());
                start = a;
            }
            out
        }

        fn parse(mut p: SseParser, chunks: &[Vec<u8>]) -> (Vec<SseItem>, bool, SseEnd) {
            let mut out = Vec::new();
            for c in chunks {
                p.feed(c, &mut out);
            }
            let overflowed = p.overflowed();
            (out, overflowed, p.finish())
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

            /// Any bytes, split anywhere: no panic, and the same items and end state as the
            /// whole stream fed at once.
            #[test]
            fn splitting_a_stream_anywhere_changes_nothing(
                bytes in stream(),
                cuts in proptest::collection::vec(any::<Index>(), 0..10),
            ) {
                let whole = parse(SseParser::new(), std::slice::from_ref(&bytes));
                let split = parse(SseParser::new(), &pieces(&bytes, &cuts));
                prop_assert_eq!(&split, &whole);
                let one_by_one: Vec<Vec<u8>> = bytes.chunks(1).map(<[u8]>::to_vec).collect();
                prop_assert_eq!(parse(SseParser::new(), &one_by_one), whole);
            }

            /// With a limit, nothing kept ever exceeds it, whatever arrives and however it is
            /// split; the items before the limit was passed are the unlimited parser's, and a
            /// stream that never passes it parses exactly as without a limit.
            #[test]
            fn the_line_and_data_limit_holds_and_only_cuts_the_stream_short(
                bytes in stream(),
                cuts in proptest::collection::vec(any::<Index>(), 0..10),
                limit in 1usize..48,
            ) {
                let mut p = SseParser::with_limit(limit);
                let mut items = Vec::new();
                for c in pieces(&bytes, &cuts) {
                    p.feed(&c, &mut items);
                    prop_assert!(p.line.len() <= limit, "line {} > {limit}", p.line.len());
                    prop_assert!(p.data.len() <= limit, "data {} > {limit}", p.data.len());
                }
                for item in &items {
                    // A comment is a line of at most `limit` bytes, in which each invalid byte
                    // became U+FFFD (3 bytes); an event's data is counted after that.
                    let (len, most) = match item {
                        SseItem::Event(e) => (e.data.len(), limit),
                        SseItem::Comment(c) => (c.len(), 3 * limit),
                    };
                    prop_assert!(len <= most, "{item:?} is past {most} bytes (limit {limit})");
                }
                let (free, _, _) = parse(SseParser::new(), std::slice::from_ref(&bytes));
                if p.overflowed() {
                    prop_assert!(free.starts_with(&items), "{items:?} is no prefix of {free:?}");
                } else {
                    prop_assert_eq!(items, free);
                }
            }
        }
    }

    #[test]
    fn crlf_split_between_cr_and_lf_is_one_line_end() {
        let (got, _) = parse_all(&[b"data: x\r", b"\n\r", b"\n"]);
        assert_eq!(got, vec![ev("message", "x")]);
    }
}
