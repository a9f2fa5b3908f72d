//! Small text helpers every command shares: blanks for values that were not measured, numbers
//! with units, plurals, shell quoting, GitHub workflow-command escaping and line diffs.
//!
//! This module depends on nothing else in the crate, so any module may use it without importing
//! a command module to borrow a helper.

/// A blank cell for a value that was not measured (the bench crate's one definition).
pub use infergate_model::BLANK;

/// A value with `decimals` decimals, or [`BLANK`] when there is none.
/// How the tool was invoked: `cargo xtask` (this repository's alias, the default),
/// `infergate` or `cargo infergate`; set once at start ([`set_tool`]) from the program's name.
static TOOL: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// The command prefix a user types to run this tool, for usage lines, hints and the commands a
/// record or a report says to run (`cargo xtask`, `infergate`, `cargo infergate`).
pub fn tool() -> &'static str {
    TOOL.get().copied().unwrap_or("cargo xtask")
}

/// The prefix for a program file name (`infergate`, `cargo-infergate`, anything else `cargo
/// xtask`); set once, the first call wins.
pub fn set_tool(program: &std::ffi::OsStr) -> &'static str {
    let stem = std::path::Path::new(program)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match stem.as_str() {
        "infergate" => "infergate",
        "cargo-infergate" => "cargo infergate",
        _ => "cargo xtask",
    };
    TOOL.get_or_init(|| name)
}

/// `text` with this repository's `cargo xtask` replaced by the invoked name ([`tool`]): help
/// texts written once, shown under whichever name was typed.
pub fn as_invoked(text: &str) -> String {
    if tool() == "cargo xtask" { text.to_string() } else { text.replace("cargo xtask", tool()) }
}

pub fn fmt_opt(v: Option<f64>, decimals: usize) -> String {
    v.map_or_else(|| BLANK.to_string(), |v| format!("{v:.decimals$}"))
}

/// A value with its unit for people (`201 ms`); ratios, counts and currency stand alone. The
/// number is [`num`]'s.
pub fn with_unit(v: f64, unit: &str) -> String {
    infergate_model::stats::in_unit(num(v), unit)
}

/// A number for people: at most 6 significant digits (at least the integer part), trailing
/// zeros dropped (`0.459103`, `201`, `12345.7`). Not for files that are read back.
pub fn num(v: f64) -> String {
    infergate_model::stats::significant(v, 6)
}

/// `root` joined with `rel` for messages and file access, without `.` components
/// (`/repo` + `./runs/a` is `/repo/runs/a`, not `/repo/./runs/a`); an absolute `rel` stands alone.
pub fn join_clean(root: &std::path::Path, rel: &std::path::Path) -> std::path::PathBuf {
    root.join(rel).components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect()
}

/// A YAML document in block style (multi-line strings as literal blocks), without the `---`
/// the emitter starts it with, ending in a newline: the generated YAML files' one writer.
pub fn yaml(doc: &yaml_rust2::Yaml) -> String {
    let mut out = String::new();
    let mut emitter = yaml_rust2::YamlEmitter::new(&mut out);
    emitter.multiline_strings(true);
    emitter.dump(doc).expect("writing YAML into a string cannot fail");
    // The emitter starts the document with `---`, indents the blank lines of a literal block
    // and ends without a newline.
    let body = out.strip_prefix("---\n").unwrap_or(&out);
    let lines: Vec<&str> = body.lines().map(|l| if l.trim().is_empty() { "" } else { l }).collect();
    format!("{}\n", lines.join("\n"))
}

/// `1 record`, `2 records`.
pub fn plural(n: usize, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Single-quote a shell argument unless it is made of shell-safe characters only.
pub fn quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg.chars().all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if safe { arg.to_string() } else { format!("'{}'", arg.replace('\'', r"'\''")) }
}

/// Escape a GitHub workflow-command message (`%`, CR, LF) or property (also `:` and `,`).
pub fn gh_escape(s: &str, property: bool) -> String {
    let mut out = s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    if property {
        out = out.replace(':', "%3A").replace(',', "%2C");
    }
    out
}

/// Lines that differ between two texts: `-` only in `old`, `+` only in `new`, in order.
pub fn line_diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Longest common subsequence, small inputs.
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] =
                if a[i] == b[j] { lcs[i + 1][j + 1] + 1 } else { lcs[i + 1][j].max(lcs[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("-{}", a[i]));
            i += 1;
        } else {
            out.push(format!("+{}", b[j]));
            j += 1;
        }
    }
    out
}

/// `5%` or `0.05`: a fraction within (0, 1).
pub fn parse_fraction(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let v = match t.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => t.parse::<f64>(),
    };
    match v {
        Ok(v) if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err(format!("must be a share within (0, 1) such as 5% or 0.05, got `{s}`")),
    }
}

/// `--duration`, in every command that takes it: seconds (`90`, `2.5`), or a whole number and
/// a unit (`90s`, `10m`, `1h`). Seconds, > 0.
pub fn parse_duration_s(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let bad = || format!("`{s}` is not a duration: seconds (90, 2.5) or 90s, 10m, 1h");
    let seconds = match t.strip_suffix(['s', 'm', 'h']) {
        Some(n) if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() => {
            let n: f64 = n.parse().map_err(|_| bad())?;
            n * match t.as_bytes()[t.len() - 1] {
                b's' => 1.0,
                b'm' => 60.0,
                _ => 3600.0,
            }
        }
        Some(_) => return Err(bad()),
        None => t.parse::<f64>().map_err(|_| bad())?,
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("must be a duration > 0, got `{s}`"));
    }
    Ok(seconds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_paths_have_no_dot_components() {
        use std::path::Path;
        assert_eq!(
            join_clean(Path::new("/repo"), Path::new("./runs/a")),
            Path::new("/repo/runs/a")
        );
        assert_eq!(
            join_clean(Path::new("/repo/."), Path::new("runs/./a")),
            Path::new("/repo/runs/a")
        );
        assert_eq!(join_clean(Path::new("/repo"), Path::new("/abs/x")), Path::new("/abs/x"));
        assert_eq!(
            join_clean(Path::new("/repo"), Path::new("./runs/a")).display().to_string(),
            "/repo/runs/a"
        );
    }

    #[test]
    fn numbers_for_people_are_rounded_to_six_significant_digits() {
        assert_eq!(num(0.45910278422037765), "0.459103");
        assert_eq!(num(302.0), "302");
        assert_eq!(num(15.1), "15.1");
        assert_eq!(num(200.04), "200.04");
        assert_eq!(num(1234567.8), "1234568");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-0.00001234567), "-0.0000123457");
        assert_eq!(with_unit(0.45910278422037765, "currency"), "0.459103");
        assert_eq!(with_unit(201.0, "ms"), "201 ms");
    }

    #[test]
    fn blanks_units_and_plurals() {
        assert_eq!(fmt_opt(None, 2), "—");
        assert_eq!(fmt_opt(Some(1.234), 2), "1.23");
        assert_eq!(with_unit(201.0, "ms"), "201 ms");
        assert_eq!(with_unit(0.95, "ratio"), "0.95");
        assert_eq!(with_unit(3.0, "count"), "3");
        assert_eq!(plural(1, "check"), "1 check");
        assert_eq!(plural(0, "check"), "0 checks");
        assert_eq!(plural(2, "record"), "2 records");
    }

    #[test]
    fn shell_quoting_only_where_needed() {
        assert_eq!(quote("meta-llama/Llama-3.1-8B"), "meta-llama/Llama-3.1-8B");
        assert_eq!(quote("/models/my model"), "'/models/my model'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote(""), "''");
    }

    #[test]
    fn github_escapes_messages_and_properties() {
        assert_eq!(gh_escape("50% a\nb", false), "50%25 a%0Ab");
        assert_eq!(gh_escape("a:b,c", false), "a:b,c");
        assert_eq!(gh_escape("a:b,c\r", true), "a%3Ab%2Cc%0D");
    }

    #[test]
    fn line_diff_marks_changes() {
        assert_eq!(line_diff("a\nb\nc\n", "a\nx\nc\n"), vec!["-b", "+x"]);
        assert_eq!(line_diff("", "a\n"), vec!["+a"]);
        assert!(line_diff("a\n", "a\n").is_empty());
    }

    #[test]
    fn a_duration_is_seconds_or_a_whole_number_and_a_unit() {
        for (text, seconds) in
            [("90", 90.0), ("2.5", 2.5), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0)]
        {
            assert_eq!(super::parse_duration_s(text), Ok(seconds), "{text}");
        }
        for text in ["0", "-3", "1.5m", "m", "10d", "", "inf", "NaN"] {
            assert!(super::parse_duration_s(text).is_err(), "{text}");
        }
    }
}
