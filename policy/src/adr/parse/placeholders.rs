//! The blanks the record template leaves, found in one line outside inline code: `<what to
//! write>` (not an HTML element, an autolink or a comparison), `NNNN`, `YYYY-MM-DD`, `TODO`,
//! `TBD`, `FIXME` and runs of underscores (`__ ms`). `adr lint` reports them.

/// HTML elements that may appear in a record; any other `<...>` is a template placeholder.
const HTML_TAGS: &[&str] = &[
    "a", "abbr", "b", "br", "code", "del", "details", "div", "em", "hr", "i", "img", "ins", "kbd",
    "li", "mark", "ol", "p", "pre", "s", "small", "span", "strong", "sub", "summary", "sup",
    "table", "tbody", "td", "th", "thead", "tr", "u", "ul", "wbr",
];

/// Words the template uses as blanks.
const PLACEHOLDER_WORDS: &[&str] = &["NNNN", "TODO", "TBD", "FIXME"];
const DATE_BLANK: &str = "YYYY-MM-DD";

/// Template placeholders on a line, outside inline code: `<what to write>`, `NNNN`,
/// `YYYY-MM-DD`, `TODO`, `TBD`, `FIXME`, and blanks of two or more underscores (`__ ms`).
pub fn find_placeholders(line: &str) -> Vec<String> {
    let code = code_mask(line);
    let bytes = line.as_bytes();
    let plain = |i: usize, b: u8| bytes[i] == b && !code[i];
    let mut found = Vec::new();
    // <...>, reported as written (code spans inside included).
    let mut i = 0;
    while i < bytes.len() {
        if !plain(i, b'<') {
            i += 1;
            continue;
        }
        let Some(j) = (i + 1..bytes.len()).find(|&j| plain(j, b'>') || plain(j, b'<')) else {
            break;
        };
        if bytes[j] == b'<' {
            i = j;
            continue;
        }
        let inner = &line[i + 1..j];
        if is_placeholder_tag(&strip_code(inner, &code[i + 1..j])) {
            found.push(format!("<{inner}>"));
        }
        i = j + 1;
    }
    // Words, the date blank and underscore blanks, outside code.
    let is_word = |c: char| c.is_ascii_alphanumeric();
    let mut start = None;
    for (idx, c) in line.char_indices().chain(std::iter::once((line.len(), ' '))) {
        if is_word(c) {
            start.get_or_insert(idx);
        } else if let Some(s) = start.take()
            && !code[s]
            && PLACEHOLDER_WORDS.contains(&&line[s..idx])
        {
            found.push(line[s..idx].to_string());
        }
    }
    let bounded = |from: usize, to: usize| {
        !line[..from].chars().next_back().is_some_and(is_word)
            && !line[to..].chars().next().is_some_and(is_word)
    };
    for (i, _) in line.match_indices(DATE_BLANK) {
        if !code[i] && bounded(i, i + DATE_BLANK.len()) {
            found.push(DATE_BLANK.to_string());
        }
    }
    let mut i = 0;
    while i < bytes.len() {
        if !plain(i, b'_') {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && plain(i, b'_') {
            i += 1;
        }
        if i - start >= 2 && bounded(start, i) {
            found.push(line[start..i].to_string());
        }
    }
    found
}

fn is_placeholder_tag(inner: &str) -> bool {
    if !inner.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return false; // `<= 5`, `</p>`, `<!-- -->`, `< 3`
    }
    if inner.contains("://") || inner.contains('@') || inner.contains('=') || inner.contains('"') {
        return false; // autolinks, e-mail, tags with attributes
    }
    let name: String = inner.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
    let rest = inner[name.len()..].trim();
    !(HTML_TAGS.contains(&name.to_ascii_lowercase().as_str()) && (rest.is_empty() || rest == "/"))
}

/// For each byte of a line, whether it belongs to an inline code span (backticks included). A
/// backtick run closes at the next run of the same length, as in CommonMark.
fn code_mask(line: &str) -> Vec<bool> {
    let b = line.as_bytes();
    let mut mask = vec![false; b.len()];
    let run_at = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let run = run_at(i);
        let mut j = i + run;
        let close = loop {
            match (j..b.len()).find(|&k| b[k] == b'`') {
                None => break None,
                Some(k) if run_at(k) == run => break Some(k),
                Some(k) => j = k + run_at(k),
            }
        };
        match close {
            Some(k) => {
                mask[i..k + run].iter_mut().for_each(|m| *m = true);
                i = k + run;
            }
            None => i += run,
        }
    }
    mask
}

/// `text` without the bytes `mask` marks (code spans start and end at ASCII backticks, so what
/// remains is valid UTF-8).
fn strip_code(text: &str, mask: &[bool]) -> String {
    text.char_indices().filter(|(i, _)| !mask[*i]).map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_found_outside_code() {
        assert_eq!(
            find_placeholders("# ADR-NNNN: <decision title>"),
            vec!["<decision title>", "NNNN"]
        );
        assert_eq!(find_placeholders("TTFT P99 < __ ms"), vec!["__"]);
        assert_eq!(find_placeholders("- Date: YYYY-MM-DD"), vec!["YYYY-MM-DD"]);
        assert!(
            find_placeholders("`configs/<file>.toml` and `NNNN` and ``a ` <b c> `` x").is_empty()
        );
        assert_eq!(
            find_placeholders("<name values, one `configs/<f>.toml: a.b = v` line each>"),
            vec!["<name values, one `configs/<f>.toml: a.b = v` line each>"]
        );
        assert_eq!(find_placeholders("an `unclosed <tag one>"), vec!["<tag one>"]);
        assert!(
            find_placeholders("limit <= 200, goodput >= 0.9; a<br>b <https://x.y> <!-- c -->")
                .is_empty()
        );
        assert!(find_placeholders("max_num_seqs and __init__ and snake__case").is_empty());
        assert_eq!(find_placeholders("TODO: write"), vec!["TODO"]);
    }
}
