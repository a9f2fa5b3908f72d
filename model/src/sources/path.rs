//! Key paths into a document: `servingEngineSpec.modelSpec[0].vllmConfig`,
//! `spec.template.spec.containers[name=vllm].args`.
//!
//! Segments are separated by `.`; a key with `.`, `[` or `]` in it is written in double quotes
//! (`"a.b"`). `[N]` is the N-th element of a list (from 0); `[field=value]` is the element of a
//! list whose mapping has `field` equal to `value` (exactly one element must match). In a
//! multi-document YAML file the path is applied to each document and exactly one must resolve it.

use std::fmt;

use super::SourceError;
use super::yaml::{Node, Value};

/// One step of a key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Segment {
    Key(String),
    Index(usize),
    Select { field: String, value: String },
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Segment::Key(k) if k.is_empty() || k.contains(['.', '[', ']', '"']) => {
                write!(f, "{k:?}")
            }
            Segment::Key(k) => f.write_str(k),
            Segment::Index(i) => write!(f, "[{i}]"),
            Segment::Select { field, value } => write!(f, "[{field}={value}]"),
        }
    }
}

/// A parsed key path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPath {
    pub segments: Vec<Segment>,
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", render(&self.segments))
    }
}

fn render(segments: &[Segment]) -> String {
    let mut out = String::new();
    for s in segments {
        if matches!(s, Segment::Key(_)) && !out.is_empty() {
            out.push('.');
        }
        out.push_str(&s.to_string());
    }
    out
}

const SYNTAX: &str = "a key path is dotted keys with `[N]` list indexes and `[field=value]` \
                      selectors, e.g. `servingEngineSpec.modelSpec[0].vllmConfig` or \
                      `spec.template.spec.containers[name=vllm].args`";

impl KeyPath {
    /// Parse `a.b[0].c[name=vllm]`; the error says what is valid.
    pub fn parse(text: &str) -> Result<KeyPath, String> {
        let bad = |why: &str| format!("`{text}` is not a key path ({why}): {SYNTAX}");
        let chars: Vec<char> = text.chars().collect();
        let mut segments = Vec::new();
        let mut i = 0;
        let mut expect_key = true;
        while i < chars.len() {
            match chars[i] {
                '[' => {
                    let end = chars[i..].iter().position(|&c| c == ']').map(|p| p + i);
                    let Some(end) = end else { return Err(bad("a `[` without its `]`")) };
                    let inner: String = chars[i + 1..end].iter().collect();
                    let inner = inner.trim();
                    if let Some((field, value)) = inner.split_once('=') {
                        let (field, value) = (field.trim(), unquote(value.trim()));
                        if field.is_empty() {
                            return Err(bad("a selector without its field"));
                        }
                        segments.push(Segment::Select { field: field.into(), value });
                    } else {
                        let n = inner.parse::<usize>().map_err(|_| {
                            bad(&format!("`[{inner}]` is neither an index nor a selector"))
                        })?;
                        segments.push(Segment::Index(n));
                    }
                    i = end + 1;
                    expect_key = false;
                }
                '.' => {
                    if expect_key {
                        return Err(bad("an empty key"));
                    }
                    expect_key = true;
                    i += 1;
                }
                '"' => {
                    let end = chars[i + 1..].iter().position(|&c| c == '"').map(|p| p + i + 1);
                    let Some(end) = end else { return Err(bad("an unclosed `\"`")) };
                    segments.push(Segment::Key(chars[i + 1..end].iter().collect()));
                    i = end + 1;
                    expect_key = false;
                }
                ']' => return Err(bad("a `]` without its `[`")),
                _ => {
                    if !expect_key {
                        return Err(bad("a key must follow a `.`"));
                    }
                    let end = chars[i..]
                        .iter()
                        .position(|&c| matches!(c, '.' | '[' | ']' | '"'))
                        .map_or(chars.len(), |p| p + i);
                    let key: String = chars[i..end].iter().collect();
                    segments.push(Segment::Key(key.trim().to_string()));
                    i = end;
                    expect_key = false;
                }
            }
        }
        if segments.is_empty() || (expect_key && !chars.is_empty()) {
            return Err(bad("it is empty or ends with `.`"));
        }
        Ok(KeyPath { segments })
    }
}

fn unquote(s: &str) -> String {
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return s[1..s.len() - 1].to_string();
        }
    }
    s.to_string()
}

/// Where a path stops in one document.
#[derive(Debug)]
pub enum Outcome<'a> {
    /// The node the path names and the mapping that holds it (when the last step is a key).
    Found { node: &'a Node, parent: Option<&'a Node> },
    /// The first `resolved` segments resolve (to `at`); the next does not, for `why`.
    Missing { resolved: usize, at: &'a Node, why: String },
    /// A selector matches more than one element (lines of the matches).
    Ambiguous { segment: usize, lines: Vec<usize> },
}

fn keys_of(node: &Node) -> String {
    match &node.value {
        Value::Map(entries) if entries.is_empty() => "an empty mapping".into(),
        Value::Map(entries) => {
            let keys: Vec<String> = entries.iter().map(|e| format!("`{}`", e.key)).collect();
            format!("keys there: {}", keys.join(", "))
        }
        Value::List(items) => format!("a list of {} elements there", items.len()),
        _ => format!("{} there", node.kind()),
    }
}

/// Apply `path` to one document.
pub fn resolve<'a>(doc: &'a Node, path: &KeyPath) -> Outcome<'a> {
    let mut node = doc;
    let mut parent = None;
    for (i, seg) in path.segments.iter().enumerate() {
        let missing = |why: String| Outcome::Missing { resolved: i, at: node, why };
        let next = match (seg, &node.value) {
            (Segment::Key(k), Value::Map(entries)) => match entries.iter().find(|e| &e.key == k) {
                Some(e) => &e.value,
                None => return missing(format!("has no key `{k}`; {}", keys_of(node))),
            },
            (Segment::Index(n), Value::List(items)) => match items.get(*n) {
                Some(x) => x,
                None => {
                    return missing(format!("has no element [{n}]; {}", keys_of(node)));
                }
            },
            (Segment::Select { field, value }, Value::List(items)) => {
                let matches: Vec<&Node> = items
                    .iter()
                    .filter(|x| {
                        x.get(field).and_then(|e| e.value.scalar_text()).as_deref()
                            == Some(value.as_str())
                    })
                    .collect();
                match matches.as_slice() {
                    [one] => *one,
                    [] => {
                        let present: Vec<String> = items
                            .iter()
                            .filter_map(|x| x.get(field).and_then(|e| e.value.scalar_text()))
                            .map(|v| format!("`{field}={v}`"))
                            .collect();
                        let why = if present.is_empty() {
                            format!("has no element with `{field}`")
                        } else {
                            format!(
                                "has no element with `{field}={value}`; elements there: {}",
                                present.join(", ")
                            )
                        };
                        return missing(why);
                    }
                    many => {
                        return Outcome::Ambiguous {
                            segment: i,
                            lines: many.iter().map(|x| x.line).collect(),
                        };
                    }
                }
            }
            (Segment::Key(_), _) => {
                return missing(format!("is {}, not a mapping", node.kind()));
            }
            (_, _) => return missing(format!("is {}, not a list", node.kind())),
        };
        parent = matches!(seg, Segment::Key(_)).then_some(node);
        node = next;
    }
    Outcome::Found { node, parent }
}

/// The one document of `docs` that resolves `path`: its index, the node and its parent.
pub fn resolve_docs<'a>(
    file: &str,
    docs: &'a [Node],
    path_text: &str,
) -> Result<(usize, &'a Node, Option<&'a Node>), SourceError> {
    let err = |line: Option<usize>, message: String| SourceError {
        file: file.to_string(),
        line,
        message,
    };
    let path = KeyPath::parse(path_text).map_err(|m| err(None, m))?;
    let outcomes: Vec<Outcome<'a>> = docs.iter().map(|d| resolve(d, &path)).collect();
    let found: Vec<(usize, &'a Node, Option<&'a Node>)> = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Outcome::Found { node, parent } => Some((i, *node, *parent)),
            _ => None,
        })
        .collect();
    match found.as_slice() {
        [one] => return Ok(*one),
        [a, b, ..] => {
            return Err(err(
                Some(b.1.line),
                format!(
                    "`{path}` resolves in two documents (lines {} and {}): a path must name one \
                     place; add a `[field=value]` selector that only one of them matches",
                    a.1.line, b.1.line
                ),
            ));
        }
        [] => {}
    }
    for o in &outcomes {
        if let Outcome::Ambiguous { segment, lines } = o {
            let lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            return Err(err(
                lines.first().and_then(|l| l.parse().ok()),
                format!(
                    "`{}` in `{path}` matches {} elements (lines {}): a selector must match \
                     exactly one; use a field whose value is unique, or an index `[N]`",
                    path.segments[*segment],
                    lines.len(),
                    lines.join(", ")
                ),
            ));
        }
    }
    let deepest = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Missing { resolved, at, why } => Some((*resolved, *at, why)),
            _ => None,
        })
        .max_by_key(|(r, _, _)| *r);
    match deepest {
        Some((0, at, why)) => {
            Err(err(Some(at.line), format!("`{path}` resolves to nothing: the document {why}")))
        }
        Some((r, at, why)) => Err(err(
            Some(at.line),
            format!(
                "`{path}` resolves to nothing: `{}` resolves (line {}) but {why}",
                render(&path.segments[..r]),
                at.line
            ),
        )),
        None => Err(err(None, format!("`{path}` resolves to nothing: the file has no document"))),
    }
}

#[cfg(test)]
mod tests {
    use super::super::yaml::{Format, load};
    use super::*;

    #[test]
    fn parses_keys_indexes_and_selectors() {
        let p = KeyPath::parse("a.b[0].c[name=vllm].\"x.y\"").unwrap();
        assert_eq!(
            p.segments,
            vec![
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(0),
                Segment::Key("c".into()),
                Segment::Select { field: "name".into(), value: "vllm".into() },
                Segment::Key("x.y".into()),
            ]
        );
        assert_eq!(p.to_string(), "a.b[0].c[name=vllm].\"x.y\"");
        for bad in ["", "a.", ".a", "a[", "a[x]", "a]", "a..b", "a[0]b"] {
            let e = KeyPath::parse(bad).unwrap_err();
            assert!(e.contains("dotted keys"), "{bad}: {e}");
        }
    }

    #[test]
    fn selects_the_one_matching_element() {
        let docs = load(
            Format::Yaml,
            "f.yaml",
            "cs:\n  - name: side\n    args: [a]\n  - name: vllm\n    args: [b]\n",
        )
        .unwrap();
        let (_, node, parent) = resolve_docs("f.yaml", &docs, "cs[name=vllm].args").unwrap();
        assert_eq!(node.line, 5);
        assert!(parent.unwrap().get("name").is_some());
        let e = resolve_docs("f.yaml", &docs, "cs[name=other].args").unwrap_err();
        assert!(e.message.contains("`name=side`, `name=vllm`"), "{e}");
        let e = resolve_docs("f.yaml", &docs, "cs[1].nope").unwrap_err();
        assert_eq!(e.line, Some(4));
        assert!(e.message.contains("`cs[1]` resolves") && e.message.contains("`args`"), "{e}");
    }

    #[test]
    fn a_path_must_resolve_in_exactly_one_document() {
        let text = "kind: A\nspec:\n  x: 1\n---\nkind: B\nspec:\n  x: 2\n---\nkind: C\n";
        let docs = load(Format::Yaml, "m.yaml", text).unwrap();
        let e = resolve_docs("m.yaml", &docs, "spec.x").unwrap_err();
        assert_eq!(e.line, Some(7));
        assert!(e.message.contains("lines 3 and 7"), "{e}");
        let e = resolve_docs("m.yaml", &docs, "spec.y").unwrap_err();
        assert!(e.message.contains("resolves to nothing") && e.message.contains("`x`"), "{e}");
        let dup = load(Format::Yaml, "d.yaml", "l:\n  - n: a\n  - n: a\n").unwrap();
        let e = resolve_docs("d.yaml", &dup, "l[n=a]").unwrap_err();
        assert!(e.message.contains("exactly one") && e.line == Some(2), "{e}");
    }
}
