//! An engine's command line: found in a script or a Dockerfile, or given as a list of
//! arguments, split into flags with the line each is written on.
//!
//! Words are split by `shlex` (POSIX shell quoting); a backslash-newline continues a command on
//! the next line and each word keeps the line it is written on. The engine's program is found
//! anywhere in a command (after `exec`, `env`, `VAR=value` assignments, `nohup`, ...):
//! `vllm serve MODEL`, `python -m vllm.entrypoints.openai.api_server`,
//! `python3 -m sglang.launch_server`, `llama-server` (or a path ending in `/llama-server`),
//! `text-generation-launcher`, `trtllm-serve MODEL`. The command ends at a shell operator
//! (`&&`, `||`, `;`, `|`, `&`, a redirection). In a Dockerfile only `ENTRYPOINT` and `CMD` count
//! (exec form, a JSON array, or shell form); `RUN` is ignored.

use super::vocab;
use super::{EngineKind, SourceError};

/// One argument and the 1-based line it is written on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arg {
    pub text: String,
    pub line: usize,
}

/// A flag's value on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlagValue {
    /// `--flag value` or `--flag=value`.
    Given(String),
    /// A switch: `--flag` alone.
    Bare,
    /// An argument that is no flag's value (`vllm serve MODEL`).
    Positional,
}

/// A flag (or positional argument) as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flag {
    /// `--max-num-seqs`, `-np` (without `=value`); a positional argument's text.
    pub spelling: String,
    pub value: FlagValue,
    pub line: usize,
}

/// The words of `text` whose first line is `first_line`, split as a shell would, each with its
/// line; `Err(line)` for an unbalanced quote (the line it opens on).
pub fn split(text: &str, first_line: usize) -> Result<Vec<Arg>, usize> {
    let text = text.replace("\r\n", "\n");
    // A space before every newline ends a word before its newline is read, so the line count
    // after a word is the word's own line.
    let prepared = text.replace("\\\n", " \n").replace('\n', " \n");
    let mut sh = shlex::Shlex::new(&prepared);
    let mut out = Vec::new();
    for word in sh.by_ref() {
        out.push(word);
    }
    if sh.had_error {
        let lines: Vec<&str> = text.split('\n').collect();
        let bad = lines.iter().position(|l| shlex::split(l.trim_end_matches('\\')).is_none());
        return Err(first_line + bad.unwrap_or(0));
    }
    // Re-split word by word to learn each word's line.
    let mut sh = shlex::Shlex::new(&prepared);
    let mut args = Vec::with_capacity(out.len());
    while let Some(word) = sh.next() {
        if !word.is_empty() {
            args.push(Arg { text: word, line: first_line + sh.line_no - 1 });
        }
    }
    Ok(args)
}

fn base(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// The index of the first argument after the engine's program starting at `i`, if one does.
fn program_at(engine: EngineKind, t: &[Arg], i: usize) -> Option<usize> {
    let at = |k: usize| t.get(i + k).map(|a| a.text.as_str());
    let python_m = |module: &str| {
        at(0).is_some_and(|p| base(p).starts_with("python"))
            && at(1) == Some("-m")
            && at(2) == Some(module)
    };
    let first = base(at(0)?);
    match engine {
        EngineKind::Vllm if first == "vllm" && at(1) == Some("serve") => Some(i + 2),
        EngineKind::Vllm if python_m("vllm.entrypoints.openai.api_server") => Some(i + 3),
        EngineKind::Sglang if python_m("sglang.launch_server") => Some(i + 3),
        EngineKind::Sglang if first == "sglang" && at(1) == Some("serve") => Some(i + 2),
        EngineKind::LlamaCpp if first == "llama-server" => Some(i + 1),
        EngineKind::Tgi if first == "text-generation-launcher" => Some(i + 1),
        EngineKind::Trtllm if first == "trtllm-serve" => {
            Some(if at(1) == Some("serve") { i + 2 } else { i + 1 })
        }
        _ => None,
    }
}

/// What a file is searched for, for messages.
pub fn programs(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Vllm => "`vllm serve` or `python -m vllm.entrypoints.openai.api_server`",
        EngineKind::Sglang => "`python -m sglang.launch_server` or `sglang serve`",
        EngineKind::LlamaCpp => "`llama-server`",
        EngineKind::Tgi => "`text-generation-launcher`",
        EngineKind::Trtllm => "`trtllm-serve`",
    }
}

fn is_operator(s: &str) -> bool {
    matches!(s, "&&" | "||" | ";" | "|" | "&" | "|&")
        || s.starts_with('>')
        || s.starts_with('<')
        || (s.len() > 1 && s.as_bytes()[0].is_ascii_digit() && s[1..].starts_with('>'))
}

/// The arguments after the program, up to the end of its command.
fn command_args(t: &[Arg], from: usize) -> Vec<Arg> {
    let mut out = Vec::new();
    for a in &t[from.min(t.len())..] {
        if is_operator(&a.text) {
            break;
        }
        if let Some(last) = a.text.strip_suffix(';') {
            if !last.is_empty() {
                out.push(Arg { text: last.to_string(), line: a.line });
            }
            break;
        }
        if matches!(a.text.as_str(), "$@" | "$*") {
            continue;
        }
        out.push(a.clone());
    }
    out
}

/// Every place the engine's program starts in `t`: (line, the arguments after it).
fn find_all(engine: EngineKind, t: &[Arg]) -> Vec<(usize, Vec<Arg>)> {
    (0..t.len())
        .filter_map(|i| program_at(engine, t, i).map(|from| (t[i].line, command_args(t, from))))
        .collect()
}

/// The engine's arguments in a list (a container's `command` + `args`, a compose `command`):
/// after the program when the list holds it (also inside a `sh -c` string), else the whole list
/// (the image's entrypoint is the engine).
pub fn from_list(engine: EngineKind, file: &str, t: &[Arg]) -> Result<Vec<Arg>, SourceError> {
    if let Some((_, args)) = find_all(engine, t).into_iter().next() {
        return Ok(args);
    }
    for a in t {
        if a.text.contains(char::is_whitespace) {
            let words = split(&a.text, a.line).map_err(|line| unbalanced(file, line))?;
            if let Some((_, args)) = find_all(engine, &words).into_iter().next() {
                return Ok(args);
            }
        }
    }
    Ok(t.to_vec())
}

fn unbalanced(file: &str, line: usize) -> SourceError {
    SourceError {
        file: file.to_string(),
        line: Some(line),
        message: "unbalanced quote: every `'` and `\"` must be closed on the command line \
                  (a backslash at the end of a line continues it)"
            .to_string(),
    }
}

/// The commands of a script: (first line, text with its continuation lines).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    let mut open = false;
    for (n, line) in text.replace("\r\n", "\n").split('\n').enumerate() {
        match (open, out.last_mut()) {
            (true, Some((_, cur))) => {
                cur.push('\n');
                cur.push_str(line);
            }
            _ => out.push((n + 1, line.to_string())),
        }
        let trailing = line.len() - line.trim_end_matches('\\').len();
        open = trailing % 2 == 1;
    }
    out
}

fn is_dockerfile(file: &str) -> bool {
    let name = base(file).to_ascii_lowercase();
    name.starts_with("dockerfile")
        || name.starts_with("containerfile")
        || name.ends_with(".dockerfile")
}

/// The engine's command line in a script or Dockerfile: the arguments after its program.
pub fn find_in_script(engine: EngineKind, file: &str, text: &str) -> Result<Vec<Arg>, SourceError> {
    let mut found: Vec<(usize, Vec<Arg>)> = Vec::new();
    let not_found = |what: &str| SourceError {
        file: file.to_string(),
        line: None,
        message: format!(
            "no {engine} command line in this {what}: looked for {}{}",
            programs(engine),
            if what == "Dockerfile" {
                " in ENTRYPOINT and CMD (exec form or shell form; RUN is not read)"
            } else {
                " (a backslash at the end of a line continues a command)"
            }
        ),
    };
    if is_dockerfile(file) {
        let mut entrypoint: Option<(bool, Vec<Arg>)> = None;
        let mut cmd: Option<(bool, Vec<Arg>)> = None;
        let mut from_vllm_image = false;
        for (line, cmdline) in logical_lines(text) {
            let trimmed = cmdline.trim_start();
            let (word, rest) = trimmed.split_once(char::is_whitespace).unwrap_or((trimmed, ""));
            let word = word.to_ascii_uppercase();
            if word == "FROM" && rest.contains("vllm-openai") {
                from_vllm_image = true;
            }
            if word != "CMD" && word != "ENTRYPOINT" {
                continue;
            }
            let offset = cmdline.len() - rest.len();
            let args = docker_args(file, &cmdline[offset..], line)?;
            if word == "CMD" {
                cmd = Some(args);
            } else {
                entrypoint = Some(args);
            }
        }
        let mut all = Vec::new();
        match (&entrypoint, &cmd) {
            (Some((true, e)), Some((_, c))) => {
                all.extend(e.iter().cloned());
                all.extend(c.iter().cloned());
            }
            (Some((_, e)), _) => all.extend(e.iter().cloned()),
            (None, Some((_, c))) => all.extend(c.iter().cloned()),
            (None, None) => {}
        }
        let mut hits = find_all(engine, &all);
        if hits.is_empty() && engine == EngineKind::Vllm && from_vllm_image && entrypoint.is_none()
        {
            // The vllm/vllm-openai image's entrypoint is the API server: CMD holds its flags.
            if let Some((_, c)) = cmd {
                return Ok(c);
            }
        }
        found.append(&mut hits);
        if found.is_empty() {
            return Err(not_found("Dockerfile"));
        }
    } else {
        let needle = match engine {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::LlamaCpp => "llama-server",
            EngineKind::Tgi => "text-generation-launcher",
            EngineKind::Trtllm => "trtllm-serve",
        };
        for (line, cmdline) in logical_lines(text) {
            if !cmdline.contains(needle) || cmdline.trim_start().starts_with('#') {
                continue;
            }
            let words = split(&cmdline, line).map_err(|l| unbalanced(file, l))?;
            found.extend(find_all(engine, &words));
        }
        if found.is_empty() {
            return Err(not_found("script"));
        }
    }
    if let [(a, _), (b, _), ..] = found.as_slice() {
        return Err(SourceError {
            file: file.to_string(),
            line: Some(*b),
            message: format!(
                "two {engine} command lines (lines {a} and {b}): a source must hold one; declare \
                 one file per deployment"
            ),
        });
    }
    Ok(found.remove(0).1)
}

/// A Dockerfile instruction's arguments: (exec form, the words).
fn docker_args(file: &str, rest: &str, line: usize) -> Result<(bool, Vec<Arg>), SourceError> {
    let joined = rest.replace("\\\r\n", "").replace("\\\n", "");
    if joined.trim_start().starts_with('[') {
        if let Ok(words) = serde_json::from_str::<Vec<String>>(joined.trim()) {
            let mut cursor = 0;
            let args = words
                .into_iter()
                .map(|w| {
                    let quoted = serde_json::to_string(&w).unwrap_or_default();
                    let at = rest[cursor..].find(&quoted).map(|p| p + cursor);
                    let l = match at {
                        Some(p) => {
                            cursor = p + quoted.len();
                            line + rest[..p].matches('\n').count()
                        }
                        None => line,
                    };
                    Arg { text: w, line: l }
                })
                .collect();
            return Ok((true, args));
        }
    }
    let words = split(rest, line).map_err(|l| unbalanced(file, l))?;
    Ok((false, words))
}

fn is_number(s: &str) -> bool {
    s.strip_prefix('-').is_some_and(|d| d.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
}

/// The flags of an engine's arguments. Whether a flag takes a value is the vocabulary's; an
/// unknown flag takes the next argument when it does not start with `-` (a negative number
/// does), else it is a switch.
pub fn flags(engine: EngineKind, args: &[Arg]) -> Vec<Flag> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a.text == "--" || a.text.is_empty() {
            continue;
        }
        if !a.text.starts_with('-') || a.text == "-" || is_number(&a.text) {
            out.push(Flag { spelling: a.text.clone(), value: FlagValue::Positional, line: a.line });
            continue;
        }
        if let Some((name, value)) = a.text.split_once('=') {
            out.push(Flag {
                spelling: name.to_string(),
                value: FlagValue::Given(value.to_string()),
                line: a.line,
            });
            continue;
        }
        let takes = match vocab::flag(engine, &a.text) {
            Some(row) => row.rule.takes_value(),
            None => args.get(i).is_some_and(|n| !n.text.starts_with('-') || is_number(&n.text)),
        };
        let next = args.get(i).filter(|n| !n.text.starts_with("--"));
        let value = match (takes, next) {
            (true, Some(n)) => {
                i += 1;
                FlagValue::Given(n.text.clone())
            }
            _ => FlagValue::Bare,
        };
        out.push(Flag { spelling: a.text.clone(), value, line: a.line });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(args: &[Arg]) -> Vec<(&str, usize)> {
        args.iter().map(|a| (a.text.as_str(), a.line)).collect()
    }

    #[test]
    fn split_keeps_each_words_line() {
        let args =
            split("exec vllm serve 'm x' \\\n  --max-num-seqs \"8\" \\\n  --a=b", 3).unwrap();
        assert_eq!(
            texts(&args),
            vec![
                ("exec", 3),
                ("vllm", 3),
                ("serve", 3),
                ("m x", 3),
                ("--max-num-seqs", 4),
                ("8", 4),
                ("--a=b", 5)
            ]
        );
        assert_eq!(split("vllm serve m \\\n --x 'unclosed", 7), Err(8));
    }

    #[test]
    fn finds_the_command_in_a_script() {
        let script = "#!/bin/sh\nset -e\n# vllm serve old --max-num-seqs 1\nexport X=1\n\
                      CUDA_VISIBLE_DEVICES=0 exec vllm serve m \\\n  --max-num-seqs 64 && echo done\n";
        let args = find_in_script(EngineKind::Vllm, "serve.sh", script).unwrap();
        assert_eq!(texts(&args), vec![("m", 5), ("--max-num-seqs", 6), ("64", 6)]);
        let e =
            find_in_script(EngineKind::Vllm, "s.sh", "vllm serve a\nvllm serve b\n").unwrap_err();
        assert!(e.message.contains("lines 1 and 2") && e.line == Some(2), "{e}");
        let e = find_in_script(EngineKind::Vllm, "s.sh", "echo hi\n").unwrap_err();
        assert!(e.message.contains("vllm serve") && e.line.is_none(), "{e}");
        let e =
            find_in_script(EngineKind::Sglang, "s.sh", "python -m sglang.launch_server --x 'y\n")
                .unwrap_err();
        assert_eq!(e.line, Some(1));
        assert!(e.message.contains("unbalanced quote"), "{e}");
    }

    #[test]
    fn finds_the_command_in_a_dockerfile() {
        let exec = "FROM python\nRUN pip install vllm && vllm serve x\nENTRYPOINT [\"vllm\", \"serve\"]\n\
                    CMD [\"m\", \\\n  \"--max-num-seqs\", \"32\"]\n";
        let args = find_in_script(EngineKind::Vllm, "Dockerfile", exec).unwrap();
        assert_eq!(texts(&args), vec![("m", 4), ("--max-num-seqs", 5), ("32", 5)]);
        let shell = "FROM python\nCMD vllm serve m \\\n    --max-num-seqs 32\n";
        let args = find_in_script(EngineKind::Vllm, "deploy/Dockerfile", shell).unwrap();
        assert_eq!(texts(&args), vec![("m", 2), ("--max-num-seqs", 3), ("32", 3)]);
        let e = find_in_script(EngineKind::Vllm, "Dockerfile", "FROM x\nRUN vllm serve m\n")
            .unwrap_err();
        assert!(e.message.contains("ENTRYPOINT and CMD"), "{e}");
    }

    #[test]
    fn flags_take_values_by_the_vocabulary() {
        let args =
            split("m --enable-chunked-prefill 8 --max-num-seqs=3 --x --y v -n -1 --z", 1).unwrap();
        let f = flags(EngineKind::Vllm, &args);
        let got: Vec<(&str, &FlagValue)> =
            f.iter().map(|f| (f.spelling.as_str(), &f.value)).collect();
        assert_eq!(
            got,
            vec![
                ("m", &FlagValue::Positional),
                ("--enable-chunked-prefill", &FlagValue::Bare),
                ("8", &FlagValue::Positional),
                ("--max-num-seqs", &FlagValue::Given("3".into())),
                ("--x", &FlagValue::Bare),
                ("--y", &FlagValue::Given("v".into())),
                ("-n", &FlagValue::Given("-1".into())),
                ("--z", &FlagValue::Bare),
            ]
        );
    }
}
