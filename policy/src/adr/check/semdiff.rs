//! The semantic diff of a governed TOML file: both versions are parsed and compared key by key,
//! so comments, whitespace, key order and table style (`[a]` or `a = { ... }`) are not changes;
//! added, removed and changed keys are, and so are added and deleted files (every key added or
//! removed). Keys are dotted paths to leaf values; arrays are compared whole.

use std::collections::BTreeMap;
use std::fmt;

use infergate_model::config::{ConfigError, Source};

/// One governed key whose value differs between the merge base and head.
#[derive(Clone, Debug, PartialEq)]
pub struct KeyChange {
    /// The file at head, or at the base when it was deleted (`configs/engine.toml`).
    pub file: String,
    /// Dotted key (`scheduler.max_num_seqs`); segments that are not bare keys are quoted.
    pub key: String,
    /// `None`: the key is absent (added at head).
    pub old: Option<toml::Value>,
    /// `None`: the key is absent (removed at head).
    pub new: Option<toml::Value>,
}

/// How an absent value is shown.
pub const UNSET: &str = "(unset)";

impl KeyChange {
    /// `old -> new`, TOML values, `(unset)` for an absent one.
    pub fn old_to_new(&self) -> String {
        format!("{} -> {}", show(self.old.as_ref()), show(self.new.as_ref()))
    }

    /// `configs/engine.toml: scheduler.max_num_seqs`.
    pub fn target(&self) -> String {
        format!("{}: {}", self.file, self.key)
    }

    /// The decision line that names this change (`... = value` or `... removed`).
    pub fn decision_line(&self) -> String {
        match &self.new {
            Some(v) => format!("{}: {} = {}", self.file, self.key, inline(v)),
            None => format!("{}: {} removed", self.file, self.key),
        }
    }
}

impl fmt::Display for KeyChange {
    /// `configs/engine.toml: scheduler.max_num_seqs 256 -> 384`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.target(), self.old_to_new())
    }
}

fn show(v: Option<&toml::Value>) -> String {
    v.map_or_else(|| UNSET.to_string(), inline)
}

/// A value on one line, as TOML writes it (tables inline).
pub fn inline(v: &toml::Value) -> String {
    match v {
        toml::Value::Table(t) => {
            let items: Vec<String> =
                t.iter().map(|(k, v)| format!("{} = {}", key_segment(k), inline(v))).collect();
            if items.is_empty() { "{}".into() } else { format!("{{ {} }}", items.join(", ")) }
        }
        toml::Value::Array(a) => {
            format!("[{}]", a.iter().map(inline).collect::<Vec<_>>().join(", "))
        }
        other => other.to_string(),
    }
}

/// A key segment as written in a dotted key: bare when it can be, else a quoted string.
fn key_segment(k: &str) -> String {
    let bare =
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { k.to_string() } else { toml::Value::String(k.to_string()).to_string() }
}

/// Leaf values of a table by dotted key. Tables (standard or inline) are walked; anything else,
/// arrays included, is a leaf. An empty table holds no key.
pub fn flatten(table: &toml::Table) -> BTreeMap<String, toml::Value> {
    fn walk(prefix: &str, t: &toml::Table, out: &mut BTreeMap<String, toml::Value>) {
        for (k, v) in t {
            let key = if prefix.is_empty() {
                key_segment(k)
            } else {
                format!("{prefix}.{}", key_segment(k))
            };
            match v {
                toml::Value::Table(inner) => walk(&key, inner, out),
                leaf => {
                    out.insert(key, leaf.clone());
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    walk("", table, &mut out);
    out
}

/// Equal as values: like `==`, except that NaN equals NaN (a file that did not change must
/// not show a change).
pub fn same_value(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value::*;
    match (a, b) {
        (Float(x), Float(y)) => x == y || (x.is_nan() && y.is_nan()),
        (Array(x), Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same_value(a, b))
        }
        (Table(x), Table(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

/// Parse a governed file; errors name `source.path` and the line.
pub fn parse(source: &Source) -> Result<toml::Table, ConfigError> {
    toml::from_str(&source.text).map_err(|e| source.toml_error(&e))
}

/// The key changes of one file. `file` names it in the changes; `old` / `new` are its versions
/// (`None`: absent). Changes are sorted by key.
pub fn diff_file(
    file: &str,
    old: Option<&Source>,
    new: Option<&Source>,
) -> Result<Vec<KeyChange>, ConfigError> {
    let old = old.map(parse).transpose()?.map(|t| flatten(&t)).unwrap_or_default();
    let new = new.map(parse).transpose()?.map(|t| flatten(&t)).unwrap_or_default();
    Ok(diff_maps(file, &old, &new))
}

/// The key changes between two flattened versions of `file`, sorted by key.
pub fn diff_maps(
    file: &str,
    old: &BTreeMap<String, toml::Value>,
    new: &BTreeMap<String, toml::Value>,
) -> Vec<KeyChange> {
    let mut out = Vec::new();
    for (k, v) in old {
        match new.get(k) {
            Some(w) if same_value(v, w) => {}
            w => out.push(KeyChange {
                file: file.to_string(),
                key: k.clone(),
                old: Some(v.clone()),
                new: w.cloned(),
            }),
        }
    }
    for (k, w) in new {
        if !old.contains_key(k) {
            out.push(KeyChange {
                file: file.to_string(),
                key: k.clone(),
                old: None,
                new: Some(w.clone()),
            });
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// [`diff_file`] over texts, for tests and callers without a [`Source`].
pub fn diff_texts(
    file: &str,
    old: Option<&str>,
    new: Option<&str>,
) -> Result<Vec<KeyChange>, ConfigError> {
    let old = old.map(|t| Source::new(file, t));
    let new = new.map(|t| Source::new(file, t));
    diff_file(file, old.as_ref(), new.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: &str = "configs/engine.toml";
    const BASE: &str = "\
# Inference parameters.
[engine]
model = \"m\"
dtype = \"bfloat16\"   # auto | half
gpu_memory_utilization = 0.90

[scheduler]
max_num_seqs = 256
enable_chunked_prefill = false
";

    fn lines(old: Option<&str>, new: Option<&str>) -> Vec<String> {
        diff_texts(F, old, new).unwrap().iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn comments_whitespace_order_and_table_style_are_not_changes() {
        let same = "\
[scheduler]
enable_chunked_prefill=false
max_num_seqs   =   256     # a comment that was not there


[engine]
gpu_memory_utilization = 0.9
dtype = 'bfloat16'
model = \"\"\"m\"\"\"
";
        assert_eq!(lines(Some(BASE), Some(same)), Vec::<String>::new());
        let inline = "engine = { model = \"m\", dtype = \"bfloat16\", gpu_memory_utilization = 0.9 }\n\
                      scheduler.max_num_seqs = 256\nscheduler.enable_chunked_prefill = false\n";
        assert_eq!(lines(Some(BASE), Some(inline)), Vec::<String>::new());
        assert_eq!(lines(Some("x = nan\n"), Some("x = nan # same\n")), Vec::<String>::new());
    }

    #[test]
    fn changed_added_and_removed_keys() {
        let new = BASE
            .replace("max_num_seqs = 256", "max_num_seqs = 384")
            .replace("enable_chunked_prefill = false\n", "")
            .replace("[scheduler]\n", "[scheduler]\nmax_num_batched_tokens = 2048\n");
        assert_eq!(
            lines(Some(BASE), Some(&new)),
            vec![
                "configs/engine.toml: scheduler.enable_chunked_prefill false -> (unset)",
                "configs/engine.toml: scheduler.max_num_batched_tokens (unset) -> 2048",
                "configs/engine.toml: scheduler.max_num_seqs 256 -> 384",
            ]
        );
        // A type change is a change (1 is not 1.0).
        assert_eq!(
            lines(Some("a = 1\n"), Some("a = 1.0\n")),
            vec!["configs/engine.toml: a 1 -> 1.0"]
        );
        // Arrays are compared whole.
        assert_eq!(
            lines(Some("a = [1, 2]\n"), Some("a = [2, 1]\n")),
            vec!["configs/engine.toml: a [1, 2] -> [2, 1]"]
        );
    }

    #[test]
    fn added_and_deleted_files_change_every_key() {
        assert_eq!(
            lines(None, Some("[s]\na = 1\n")),
            vec!["configs/engine.toml: s.a (unset) -> 1"]
        );
        assert_eq!(
            lines(Some("[s]\na = \"x\"\nb = { c = 2 }\n"), None),
            vec![
                "configs/engine.toml: s.a \"x\" -> (unset)",
                "configs/engine.toml: s.b.c 2 -> (unset)"
            ]
        );
    }

    #[test]
    fn keys_that_are_not_bare_are_quoted_and_lines_name_the_new_value() {
        let c = diff_texts(F, Some(""), Some("[\"a.b\"]\nc = [1, { d = 2 }]\n")).unwrap();
        assert_eq!(c[0].key, "\"a.b\".c");
        assert_eq!(c[0].decision_line(), "configs/engine.toml: \"a.b\".c = [1, { d = 2 }]");
        let c = diff_texts(F, Some("[s]\nk = 1\n"), Some("")).unwrap();
        assert_eq!(c[0].decision_line(), "configs/engine.toml: s.k removed");
    }

    #[test]
    fn invalid_toml_is_an_error_at_its_line() {
        let e = diff_texts(F, Some(BASE), Some("[engine]\nmodel = \n")).unwrap_err();
        assert_eq!(e.line, Some(2), "{e}");
        assert!(e.to_string().starts_with("configs/engine.toml:2"), "{e}");
    }
}
