//! YAML (multi-document), JSON and TOML read into one located tree: every node with the line it
//! starts on, every mapping key with its own line.
//!
//! YAML goes through `yaml-rust2`'s event parser: anchors and aliases are resolved (an alias is a
//! copy of the anchored node, lines included), merge keys (`<<: *base`) add the keys the mapping
//! does not set itself, and a plain scalar is typed as YAML's core schema types it (`256` an
//! integer, `"256"` a string). JSON is checked by `serde_json` (its errors name the line) and then
//! read by the same YAML parser, which gives the lines; a surrogate pair escape (`\ud83d\ude00`)
//! is rewritten as YAML's `\U0001f600` first, and tabs between tokens as spaces. TOML is read by
//! `toml`, its keys located through the spans of `toml::de::DeTable`.

use std::collections::HashMap;

use toml::de::{DeTable, DeValue};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use super::SourceError;

/// A structured file format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Yaml,
    Json,
    Toml,
}

impl Format {
    /// By the file's extension: `.yaml`/`.yml`, `.json`, `.toml`; `None` for anything else.
    pub fn of(file: &str) -> Option<Format> {
        let name = file.rsplit('/').next().unwrap_or(file).to_ascii_lowercase();
        let ext = name.rsplit_once('.').map(|(_, e)| e)?;
        match ext {
            "yaml" | "yml" => Some(Format::Yaml),
            "json" => Some(Format::Json),
            "toml" => Some(Format::Toml),
            _ => None,
        }
    }
}

/// A value of the tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Node>),
    Map(Vec<Entry>),
}

/// A node and the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub line: usize,
}

/// A mapping entry: the key, the line the key is written on, the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: String,
    pub line: usize,
    pub value: Node,
}

impl Node {
    /// The entry of a mapping with this key.
    pub fn get(&self, key: &str) -> Option<&Entry> {
        match &self.value {
            Value::Map(entries) => entries.iter().find(|e| e.key == key),
            _ => None,
        }
    }

    /// What kind of node this is, for messages.
    pub fn kind(&self) -> &'static str {
        match &self.value {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }

    /// A scalar's text (a string as is, a number or boolean as written by YAML); `None` for a
    /// list or a mapping.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Null => Some(String::new()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Str(s) => Some(s.clone()),
            Value::List(_) | Value::Map(_) => None,
        }
    }
}

/// The documents of `text`, the content of `file`: one for JSON and TOML, one per document for
/// YAML (an empty stream has none).
pub fn load(format: Format, file: &str, text: &str) -> Result<Vec<Node>, SourceError> {
    match format {
        Format::Yaml => load_yaml(file, text, "YAML"),
        Format::Json => load_json(file, text),
        Format::Toml => load_toml(file, text).map(|n| vec![n]),
    }
}

fn err(file: &str, line: Option<usize>, message: String) -> SourceError {
    SourceError { file: file.to_string(), line, message }
}

fn load_yaml(file: &str, text: &str, what: &str) -> Result<Vec<Node>, SourceError> {
    let mut builder =
        Builder { source: text.lines().map(String::from).collect(), ..Builder::default() };
    let mut parser = Parser::new_from_str(text);
    if let Err(e) = parser.load(&mut builder, true) {
        let m = e.marker();
        return Err(err(
            file,
            Some(m.line().max(1)),
            format!(
                "not valid {what}: {} (column {}); the file must parse as {what} before its \
                 parameters can be read",
                e.info(),
                m.col() + 1
            ),
        ));
    }
    if let Some((line, message)) = builder.error {
        return Err(err(file, Some(line), message));
    }
    Ok(builder.docs)
}

fn load_json(file: &str, text: &str) -> Result<Vec<Node>, SourceError> {
    if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
        return Err(err(
            file,
            Some(e.line().max(1)),
            format!(
                "not valid JSON: {e}; the file must parse as JSON before its parameters can be read"
            ),
        ));
    }
    load_yaml(file, &json_for_yaml(text), "JSON")
}

/// Valid JSON rewritten where YAML's reading differs, lines kept: a surrogate pair escape as one
/// `\U` escape, a tab outside strings as a space.
fn json_for_yaml(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            out.push(if c == '\t' { ' ' } else { c });
            in_string = c == '"';
            i += 1;
            continue;
        }
        match c {
            '"' => {
                in_string = false;
                out.push(c);
                i += 1;
            }
            '\\' => {
                let hex = |at: usize| -> Option<u32> {
                    if chars.get(at) != Some(&'\\') || chars.get(at + 1) != Some(&'u') {
                        return None;
                    }
                    let s: String = chars.get(at + 2..at + 6)?.iter().collect();
                    u32::from_str_radix(&s, 16).ok()
                };
                match (hex(i), hex(i + 6)) {
                    (Some(hi @ 0xD800..=0xDBFF), Some(lo @ 0xDC00..=0xDFFF)) => {
                        let code = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        out.push_str(&format!("\\U{code:08x}"));
                        i += 12;
                    }
                    _ => {
                        out.push(c);
                        if let Some(&n) = chars.get(i + 1) {
                            out.push(n);
                        }
                        i += 2;
                    }
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

/// A folded block scalar (`command: >-`) with the source's line breaks kept: YAML folds its
/// lines into one, which would put every word of a command line on the block's first line. The
/// block's lines from `line` on, dedented and joined with newlines, when they hold the same
/// words as the folded `value`; and the line the first of them is on.
fn folded_lines(source: &[String], value: &str, line: usize) -> Option<(String, usize)> {
    let first_word = value.split_whitespace().next()?;
    let start = (line.saturating_sub(1)..source.len().min(line + 2))
        .find(|&i| source[i].trim_start().starts_with(first_word))?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let block = indent(&source[start]);
    let lines: Vec<&str> = source[start..]
        .iter()
        .take_while(|l| l.trim().is_empty() || indent(l) >= block)
        .map(|l| l.get(block..).unwrap_or("").trim_end())
        .collect();
    let text = lines.join("\n").trim_end().to_string();
    text.split_whitespace().eq(value.split_whitespace()).then_some((text, start + 1))
}

enum Frame {
    Seq {
        items: Vec<Node>,
        line: usize,
        anchor: usize,
    },
    Map {
        entries: Vec<Entry>,
        key: Option<(String, usize)>,
        merges: Vec<Node>,
        line: usize,
        anchor: usize,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    docs: Vec<Node>,
    anchors: HashMap<usize, Node>,
    error: Option<(usize, String)>,
    /// The source's lines, to place the words of a folded block scalar on their own lines.
    source: Vec<String>,
}

impl Builder {
    fn fail(&mut self, line: usize, message: String) {
        if self.error.is_none() {
            self.error = Some((line, message));
        }
    }

    /// A key of the mapping being built, if the next node is one.
    fn expects_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { key: None, .. }))
    }

    fn push(&mut self, node: Node) {
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map { entries, key, merges, .. }) => match key.take() {
                Some((k, _)) if k == "<<" => merges.push(node),
                Some((k, line)) => entries.push(Entry { key: k, line, value: node }),
                None => {
                    let line = node.line;
                    match node.scalar_text() {
                        Some(text) => *key = Some((text, line)),
                        None => self.fail(
                            line,
                            format!("a mapping key is {}: keys must be strings", node.kind()),
                        ),
                    }
                }
            },
        }
    }
}

fn plain_scalar(s: &str) -> Value {
    use yaml_rust2::Yaml;
    match Yaml::from_str(s) {
        Yaml::Integer(i) => Value::Int(i),
        Yaml::Real(r) => match r.parse::<f64>() {
            Ok(f) => Value::Float(f),
            Err(_) => match r.trim_start_matches('+').to_ascii_lowercase().as_str() {
                ".inf" => Value::Float(f64::INFINITY),
                "-.inf" => Value::Float(f64::NEG_INFINITY),
                ".nan" => Value::Float(f64::NAN),
                _ => Value::Str(s.to_string()),
            },
        },
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Null => Value::Null,
        _ => Value::Str(s.to_string()),
    }
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        let line = mark.line().max(1);
        match ev {
            Event::Scalar(text, style, anchor, _tag) => {
                let folded = (style == TScalarStyle::Folded && !self.expects_key())
                    .then(|| folded_lines(&self.source, &text, line))
                    .flatten();
                let node = match folded {
                    Some((text, first)) => Node { value: Value::Str(text), line: first },
                    None => {
                        let value = if self.expects_key() || style != TScalarStyle::Plain {
                            Value::Str(text)
                        } else {
                            plain_scalar(&text)
                        };
                        Node { value, line }
                    }
                };
                if anchor > 0 {
                    self.anchors.insert(anchor, node.clone());
                }
                self.push(node);
            }
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(node) => {
                    let node = node.clone();
                    self.push(node);
                }
                None => self.fail(line, "an alias to an anchor not defined before it".into()),
            },
            Event::SequenceStart(anchor, _) => {
                self.stack.push(Frame::Seq { items: Vec::new(), line, anchor })
            }
            Event::MappingStart(anchor, _) => self.stack.push(Frame::Map {
                entries: Vec::new(),
                key: None,
                merges: Vec::new(),
                line,
                anchor,
            }),
            Event::SequenceEnd => {
                if let Some(Frame::Seq { items, line, anchor }) = self.stack.pop() {
                    let node = Node { value: Value::List(items), line };
                    if anchor > 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    self.push(node);
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map { mut entries, merges, line, anchor, .. }) = self.stack.pop()
                {
                    for merged in merges {
                        let sources = match merged.value {
                            Value::List(items) => items,
                            _ => vec![merged],
                        };
                        for source in sources {
                            match source.value {
                                Value::Map(more) => {
                                    for e in more {
                                        if !entries.iter().any(|x| x.key == e.key) {
                                            entries.push(e);
                                        }
                                    }
                                }
                                _ => self.fail(
                                    source.line,
                                    format!(
                                        "a merge key (`<<`) takes a mapping or a list of \
                                         mappings, not {}",
                                        source.kind()
                                    ),
                                ),
                            }
                        }
                    }
                    let node = Node { value: Value::Map(entries), line };
                    if anchor > 0 {
                        self.anchors.insert(anchor, node.clone());
                    }
                    self.push(node);
                }
            }
            Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd
            | Event::Nothing => {}
        }
    }
}

fn load_toml(file: &str, text: &str) -> Result<Node, SourceError> {
    let doc = DeTable::parse(text).map_err(|e| {
        let line = e.span().map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        err(
            file,
            line,
            format!(
                "not valid TOML: {}; the file must parse as TOML before its parameters can be read",
                e.message().trim()
            ),
        )
    })?;
    let line_of = |offset: usize| text[..offset.min(text.len())].matches('\n').count() + 1;
    fn table(t: &DeTable<'_>, line: usize, line_of: &dyn Fn(usize) -> usize) -> Node {
        let entries = t
            .iter()
            .map(|(k, v)| Entry {
                key: k.get_ref().to_string(),
                line: line_of(k.span().start),
                value: value(v.get_ref(), line_of(v.span().start), line_of),
            })
            .collect();
        Node { value: Value::Map(entries), line }
    }
    fn value(v: &DeValue<'_>, line: usize, line_of: &dyn Fn(usize) -> usize) -> Node {
        let value = match v {
            DeValue::String(s) => Value::Str(s.to_string()),
            DeValue::Integer(i) => {
                let digits = i.as_str().replace('_', "");
                let digits = digits
                    .strip_prefix("0x")
                    .or_else(|| digits.strip_prefix("0o"))
                    .or_else(|| digits.strip_prefix("0b"))
                    .unwrap_or(&digits);
                match i64::from_str_radix(digits, i.radix()) {
                    Ok(n) => Value::Int(n),
                    Err(_) => Value::Str(i.as_str().to_string()),
                }
            }
            DeValue::Float(f) => {
                let s = f.as_str().replace('_', "");
                match s.trim_start_matches('+') {
                    "inf" => Value::Float(f64::INFINITY),
                    "-inf" => Value::Float(f64::NEG_INFINITY),
                    "nan" | "-nan" => Value::Float(f64::NAN),
                    other => other.parse().map(Value::Float).unwrap_or(Value::Str(s)),
                }
            }
            DeValue::Boolean(b) => Value::Bool(*b),
            DeValue::Datetime(d) => Value::Str(d.to_string()),
            DeValue::Array(a) => Value::List(
                a.iter().map(|x| value(x.get_ref(), line_of(x.span().start), line_of)).collect(),
            ),
            DeValue::Table(t) => return table(t, line, line_of),
        };
        Node { value, line }
    }
    Ok(table(doc.get_ref(), 1, &line_of))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(format: Format, text: &str) -> Node {
        let mut docs = load(format, "f", text).unwrap();
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn yaml_keys_values_and_lines() {
        let n = one(Format::Yaml, "a:\n  b: 1\n  c: \"2\"\n  d: [x, 'y']\n  e: 0.5\n  f: true\n");
        let a = &n.get("a").unwrap().value;
        assert_eq!(a.get("b").unwrap().line, 2);
        assert_eq!(a.get("b").unwrap().value.value, Value::Int(1));
        assert_eq!(a.get("c").unwrap().value.value, Value::Str("2".into()));
        assert_eq!(a.get("e").unwrap().value.value, Value::Float(0.5));
        assert_eq!(a.get("f").unwrap().value.value, Value::Bool(true));
        assert_eq!(a.get("d").unwrap().line, 4);
    }

    #[test]
    fn anchors_aliases_and_merge_keys() {
        let n = one(
            Format::Yaml,
            "base: &b\n  x: 1\n  y: 2\nother:\n  <<: *b\n  y: 3\nlist: &l [1, 2]\ncopy: *l\n",
        );
        let other = &n.get("other").unwrap().value;
        assert_eq!(other.get("x").unwrap().value.value, Value::Int(1));
        assert_eq!(other.get("y").unwrap().value.value, Value::Int(3));
        assert_eq!(n.get("copy").unwrap().value.value, n.get("list").unwrap().value.value);
    }

    #[test]
    fn multi_document_yaml() {
        let docs = load(Format::Yaml, "f", "a: 1\n---\nb: 2\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].get("b").unwrap().line, 3);
    }

    #[test]
    fn json_escapes_tabs_and_lines() {
        let n = one(
            Format::Json,
            "{\n\t\"a\": \"\\u00e9\\ud83d\\ude00\\/\\n\\\"\",\n\t\"b\": {\"c\": 256}\n}\n",
        );
        assert_eq!(n.get("a").unwrap().value.value, Value::Str("é😀/\n\"".into()));
        let b = &n.get("b").unwrap();
        assert_eq!(b.line, 3);
        assert_eq!(b.value.get("c").unwrap().value.value, Value::Int(256));
    }

    #[test]
    fn toml_lines() {
        let n = one(Format::Toml, "a = 1\n[t]\nb = 'x'\nc = [1, 2]\nd = 1_000\ne = 0.5\n");
        let t = &n.get("t").unwrap().value;
        assert_eq!(t.get("b").unwrap().line, 3);
        assert_eq!(t.get("d").unwrap().value.value, Value::Int(1000));
        assert_eq!(t.get("e").unwrap().value.value, Value::Float(0.5));
    }

    #[test]
    fn malformed_files_name_the_line() {
        let e = load(Format::Yaml, "v.yaml", "a: 1\nb: [1, 2\nc: 3\n").unwrap_err();
        assert!(e.line.is_some() && e.message.contains("not valid YAML"), "{e}");
        let e = load(Format::Json, "v.json", "{\n\"a\": 1,\n}\n").unwrap_err();
        assert_eq!(e.line, Some(3), "{e}");
        let e = load(Format::Toml, "v.toml", "a = 1\nb = \n").unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
    }

    #[test]
    fn a_folded_block_keeps_each_words_line() {
        let text = "services:\n  vllm:\n    command: >-\n      --model m\n      --max-num-seqs 256\n\n      --port 8000\n    ports: []\n";
        let docs = load(Format::Yaml, "c.yml", text).unwrap();
        let Value::Map(top) = &docs[0].value else { panic!() };
        let Value::Map(services) = &top[0].value.value else { panic!() };
        let Value::Map(vllm) = &services[0].value.value else { panic!() };
        let command = &vllm[0].value;
        assert_eq!(command.line, 4);
        assert_eq!(
            command.value,
            Value::Str("--model m\n--max-num-seqs 256\n\n--port 8000".into())
        );
    }
}
