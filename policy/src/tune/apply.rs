//! `tune --apply`: the winner's keys written into the governed engine config as text edits
//! that keep everything else (comments, order, alignment), so `adr check` sees exactly the
//! changed keys. A key the file sets gets its value replaced (its trailing comment kept); a key
//! it does not set is added at the end of its section (the section appended when absent).
//!
//! Pure: text in, text out; the result is parsed back and each key checked.

use infergate_model::config::ConfigKey;

/// Why the winner's keys could not be written into the governed file's text.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// A key that is not `section.key`.
    #[error("`{0}` is not `section.key`: --apply writes keys of the governed file's sections")]
    NotSectionKey(String),
    /// The edited text is no longer TOML.
    #[error("the edit broke the file: {0}")]
    Broken(toml::de::Error),
    /// The edited text, parsed back, does not hold the value.
    #[error("`{key}` could not be set to {value} in the file's text")]
    NotSet { key: String, value: toml::Value },
}

/// The governed file's text with each `section.key = value` of `changes` set.
pub fn apply(text: &str, changes: &[(ConfigKey, toml::Value)]) -> Result<String, ApplyError> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for (key, value) in changes {
        let [section, leaf] = key.segments() else {
            return Err(ApplyError::NotSectionKey(key.to_string()));
        };
        set(&mut lines, section, leaf, value);
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') || text.is_empty() {
        out.push('\n');
    }
    let parsed: toml::Table = toml::from_str(&out).map_err(ApplyError::Broken)?;
    for (key, value) in changes {
        if key.get_in(&parsed) != Some(value) {
            return Err(ApplyError::NotSet { key: key.to_string(), value: value.clone() });
        }
    }
    Ok(out)
}

/// The section header a line opens (`[scheduler]` -> `scheduler`), if any.
fn header(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or(t).trim();
    t.strip_prefix('[')?.strip_suffix(']').map(str::trim).filter(|s| !s.starts_with('['))
}

/// Where the value of `leaf = ...` starts and ends on `line` (the end before any comment).
fn value_span(line: &str, leaf: &str) -> Option<(usize, usize)> {
    let rest = line.trim_start().strip_prefix(leaf)?;
    let after_key = rest.trim_start();
    let eq = after_key.strip_prefix('=')?;
    let start = line.len() - eq.len() + (eq.len() - eq.trim_start().len());
    let mut in_str = false;
    let mut end = line.len();
    for (i, c) in line[start..].char_indices() {
        match c {
            '"' => in_str = !in_str,
            '#' if !in_str => {
                end = start + i;
                break;
            }
            _ => {}
        }
    }
    let end = start + line[start..end].trim_end().len();
    Some((start, end))
}

fn set(lines: &mut Vec<String>, section: &str, leaf: &str, value: &toml::Value) {
    let new = value.to_string();
    let Some(open) = lines.iter().position(|l| header(l) == Some(section)) else {
        if lines.last().is_some_and(|l| !l.trim().is_empty()) {
            lines.push(String::new());
        }
        lines.push(format!("[{section}]"));
        lines.push(format!("{leaf} = {new}"));
        return;
    };
    let close = lines[open + 1..]
        .iter()
        .position(|l| header(l).is_some())
        .map_or(lines.len(), |p| open + 1 + p);
    for line in &mut lines[open + 1..close] {
        if let Some((start, end)) = value_span(line, leaf) {
            let old_len = end - start;
            let tail = &line[end..];
            // Keep a trailing comment in its column when the new value fits.
            let tail = if tail.starts_with(' ') && new.len() != old_len {
                let spaces = tail.len() - tail.trim_start().len();
                let want = (spaces + old_len).saturating_sub(new.len()).max(1);
                format!("{}{}", " ".repeat(want), tail.trim_start())
            } else {
                tail.to_string()
            };
            *line = format!("{}{new}{tail}", &line[..start]);
            return;
        }
    }
    // Not set: after the section's last key line.
    let last = (open + 1..close)
        .rev()
        .find(|&i| {
            let t = lines[i].trim();
            !t.is_empty() && !t.starts_with('#')
        })
        .unwrap_or(open);
    lines.insert(last + 1, format!("{leaf} = {new}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# governed\n[engine]\nmodel = \"m\"   # the model\n\n[scheduler]\n\
        max_num_seqs = 256               # too small starves\nenable_chunked_prefill = false   # off\n\
        # a comment\n\n[device]\nname = \"H100\"\n";

    #[test]
    fn values_are_replaced_in_place_and_comments_kept() {
        let out = apply(
            FILE,
            &[
                (ConfigKey::literal("scheduler.max_num_seqs"), 64.into()),
                (ConfigKey::literal("scheduler.enable_chunked_prefill"), true.into()),
            ],
        )
        .unwrap();
        assert_eq!(
            out,
            FILE.replace(
                "max_num_seqs = 256               #",
                "max_num_seqs = 64                #"
            )
            .replace("enable_chunked_prefill = false   #", "enable_chunked_prefill = true    #")
        );
    }

    #[test]
    fn absent_keys_and_sections_are_added() {
        let out = apply(
            FILE,
            &[
                (ConfigKey::literal("scheduler.max_num_batched_tokens"), 4096.into()),
                (ConfigKey::literal("token_interval.async_scheduling"), true.into()),
            ],
        )
        .unwrap();
        assert!(
            out.contains(
                "enable_chunked_prefill = false   # off\nmax_num_batched_tokens = 4096\n# a comment"
            ),
            "{out}"
        );
        assert!(
            out.ends_with("name = \"H100\"\n\n[token_interval]\nasync_scheduling = true\n"),
            "{out}"
        );
        let err = apply(FILE, &[(ConfigKey::literal("a.b.c"), 1.into())]).unwrap_err().to_string();
        assert!(err.contains("section.key"), "{err}");
    }
}
