//! The command line's grammar and its page: `docs/cli.md` is [`render`]ed from the clap
//! definitions (every command and subcommand, every flag), and [`grammar_problems`] checks that
//! a flag name means one thing everywhere ([`GLOSSARY`] names the meaning of each shared one).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};

/// The page [`render`] writes, relative to the repository root.
pub const CLI_DOC: &str = "docs/cli.md";

/// A flag name more than one command takes, and its one meaning.
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    /// The long name, without `--`.
    pub flag: &'static str,
    /// What it means, in every command that takes it.
    pub meaning: &'static str,
    /// The help of each occurrence names at least one of these (case-insensitive; empty: no
    /// condition).
    pub help_names: &'static [&'static str],
    /// ... and none of these.
    pub help_never: &'static [&'static str],
    /// The values it may take where its meaning allows more than one kind (`--out`: a
    /// directory or a file); empty: the same value in every command.
    pub values: &'static [&'static str],
}

/// The shared flag names whose meaning is a rule of the grammar. Every other flag spelled the
/// same in two commands must still take the same kind of value.
pub const GLOSSARY: &[Shared] = &[
    Shared {
        flag: "config",
        meaning: "the bench configuration file (default configs/bench.toml); never the engine's",
        help_names: &["bench config"],
        help_never: &["engine config", "engine file"],
        values: &[],
    },
    Shared {
        flag: "engine-config",
        meaning: "the governed engine configuration file (configs/engine.toml or a profile's)",
        help_names: &["engine config"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "check",
        meaning: "do not write: exit 1 when the committed file is out of date",
        help_names: &["out of date"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "json",
        meaning: "also write the result as JSON to FILE (`-`: standard output)",
        help_names: &["json"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "history",
        meaning: "append the measured set to the history (`refs/infergate/history`), where a \
                  command does not by default",
        help_names: &["history"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "no-history",
        meaning: "leave the history (`refs/infergate/history`) alone: neither read nor append it",
        help_names: &["history"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "github",
        meaning: "also print GitHub Actions annotations (`::error`, `::warning`)",
        help_names: &["github"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "fail-on-regression",
        meaning: "exit 1 on a regression the measurements show (not on a stale file)",
        help_names: &["exit 1"],
        help_never: &[],
        values: &[],
    },
    Shared {
        flag: "out",
        meaning: "where the command writes what it makes: a directory where it makes a run or \
                  several files, else a file",
        help_names: &[],
        help_never: &[],
        values: &["<DIR>", "<FILE>"],
    },
    Shared {
        flag: "duration",
        meaning: "how long to measure or watch: seconds, or a whole number and a unit (90s, 10m, \
                  1h)",
        help_names: &["90s, 10m, 1h"],
        help_never: &[],
        values: &[],
    },
];

/// One flag or positional argument of one command.
#[derive(Clone, Debug)]
pub struct ArgUse {
    /// The command's path, e.g. `adr thresholds` (empty: the top level).
    pub path: String,
    /// `--long` (or `-s` for a short-only flag; the value name for a positional).
    pub name: String,
    pub short: Option<char>,
    pub positional: bool,
    pub hidden: bool,
    /// `no value` or the value's shape (`<FILE>`, `[<BASE_REV>]`, `<KEY=VALUE>...`).
    pub value: String,
    /// How clap stores it (`SetTrue`, `Set`, `Append`, `Count`).
    pub action: String,
    /// The help's first paragraph, on one line.
    pub help: String,
}

/// Every command of `cmd`, hidden ones included, depth first: its path and the command.
pub fn commands(cmd: &Command) -> Vec<(String, &Command)> {
    fn walk<'a>(prefix: &str, cmd: &'a Command, out: &mut Vec<(String, &'a Command)>) {
        for sub in cmd.get_subcommands() {
            let path = if prefix.is_empty() {
                sub.get_name().to_string()
            } else {
                format!("{prefix} {}", sub.get_name())
            };
            out.push((path.clone(), sub));
            walk(&path, sub, out);
        }
    }
    let mut out = vec![(String::new(), cmd)];
    walk("", cmd, &mut out);
    out
}

fn one_line(s: &str) -> String {
    let para = s.split("\n\n").next().unwrap_or_default();
    para.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn value_shape(arg: &Arg) -> String {
    if !arg.get_action().takes_values() {
        return "no value".into();
    }
    let names: Vec<String> = match arg.get_value_names() {
        Some(v) => v.iter().map(|n| n.to_string()).collect(),
        None => vec![arg.get_id().as_str().to_uppercase()],
    };
    let range = arg.get_num_args().unwrap_or_default();
    let inner = names.iter().map(|n| format!("<{n}>")).collect::<Vec<_>>().join(" ");
    let mut shape = if range.min_values() == 0 { format!("[{inner}]") } else { inner };
    if range.max_values() > names.len().max(1) || matches!(arg.get_action(), ArgAction::Append) {
        shape.push_str("...");
    }
    shape
}

/// Every argument of every command of `cmd` (hidden ones included).
pub fn args(cmd: &Command) -> Vec<ArgUse> {
    let mut out = Vec::new();
    for (path, c) in commands(cmd) {
        for arg in c.get_arguments() {
            let positional = arg.is_positional();
            let name = match (arg.get_long(), arg.get_short()) {
                _ if positional => value_shape(arg),
                (Some(l), _) => format!("--{l}"),
                (None, Some(s)) => format!("-{s}"),
                (None, None) => continue,
            };
            out.push(ArgUse {
                path: path.clone(),
                name,
                short: arg.get_short(),
                positional,
                hidden: arg.is_hide_set(),
                value: value_shape(arg),
                action: format!("{:?}", arg.get_action()),
                help: arg.get_help().map(|h| one_line(&h.to_string())).unwrap_or_default(),
            });
        }
    }
    out
}

/// What breaks the grammar in `cmd`, one line each: a flag name taking two kinds of value (or
/// two actions), a short flag standing for two long names, a [`GLOSSARY`] flag whose help says
/// something else than its meaning.
pub fn grammar_problems(cmd: &Command, glossary: &[Shared]) -> Vec<String> {
    let mut problems = Vec::new();
    let all = args(cmd);
    let flags: Vec<&ArgUse> = all.iter().filter(|a| !a.positional).collect();
    let mut by_name: BTreeMap<&str, Vec<&ArgUse>> = BTreeMap::new();
    for a in &flags {
        by_name.entry(a.name.as_str()).or_default().push(a);
    }
    let at =
        |a: &ArgUse| if a.path.is_empty() { "(top level)".to_string() } else { a.path.clone() };
    let values_of = |name: &str| {
        glossary.iter().find(|g| name.strip_prefix("--") == Some(g.flag)).map(|g| g.values)
    };
    for (name, uses) in &by_name {
        let first = uses[0];
        let values = values_of(name).unwrap_or_default();
        for u in &uses[1..] {
            let same_value = if values.is_empty() {
                u.value == first.value
            } else {
                values.contains(&u.value.as_str()) && values.contains(&first.value.as_str())
            };
            if !same_value || u.action != first.action {
                problems.push(format!(
                    "{name}: `{}` takes {} ({}), `{}` takes {} ({})",
                    at(first),
                    first.value,
                    first.action,
                    at(u),
                    u.value,
                    u.action
                ));
            }
        }
    }
    let mut shorts: BTreeMap<char, Vec<&ArgUse>> = BTreeMap::new();
    for a in &flags {
        if let Some(s) = a.short {
            shorts.entry(s).or_default().push(a);
        }
    }
    for (s, uses) in &shorts {
        if let Some(u) = uses.iter().find(|u| u.name != uses[0].name) {
            problems.push(format!(
                "-{s}: {} in `{}`, {} in `{}`",
                uses[0].name,
                at(uses[0]),
                u.name,
                at(u)
            ));
        }
    }
    for g in glossary {
        let name = format!("--{}", g.flag);
        for u in by_name.get(name.as_str()).into_iter().flatten() {
            let help = u.help.to_lowercase();
            if !g.help_names.is_empty() && !g.help_names.iter().any(|w| help.contains(w)) {
                problems.push(format!(
                    "{name} in `{}` does not read as \"{}\": its help names none of {:?}: {}",
                    at(u),
                    g.meaning,
                    g.help_names,
                    u.help
                ));
            }
            if let Some(w) = g.help_never.iter().find(|w| help.contains(*w)) {
                problems.push(format!(
                    "{name} in `{}` names {w:?}, which it never means (\"{}\"): {}",
                    at(u),
                    g.meaning,
                    u.help
                ));
            }
        }
    }
    problems
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|")
}

/// `docs/cli.md`: the grammar's glossary, then every command (hidden ones marked) with its
/// arguments and flags, each with its value and one-line meaning.
pub fn render(cmd: &Command) -> String {
    let bin = cmd.get_name();
    let mut s = String::new();
    let _ = writeln!(s, "# Command line\n");
    let _ = writeln!(
        s,
        "Every command of `{bin}` and every flag, with its value and meaning. This page is \
         generated from the command line's definitions (`xtask::cli_doc`); a test fails when it \
         is out of date, and `UPDATE_CLI_DOC=1 cargo test -p xtask --all-features --test it -- \
         cli_grammar` rewrites it.\n"
    );
    let _ = writeln!(s, "## Grammar\n");
    let _ = writeln!(
        s,
        "A flag name means one thing in every command that takes it, and takes the same kind \
         of value. Commands that measure (`bench`, `bench ab`, `bench trials`, `noise`, `tune`) \
         are not commands that judge what was measured (`gate`, `compare`, `trend`, \
         `acceptance`). The shared names:\n"
    );
    let _ = writeln!(s, "| Flag | Value | Means, everywhere |\n|---|---|---|");
    for g in GLOSSARY {
        let value = if g.values.is_empty() {
            "one kind".to_string()
        } else {
            g.values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(" or ")
        };
        let _ = writeln!(s, "| `--{}` | {} | {} |", g.flag, cell(&value), cell(g.meaning));
    }
    let _ = writeln!(
        s,
        "\nAn old spelling keeps working for one release and prints a warning naming the new \
         one; [Old spellings](#old-spellings) lists them.\n"
    );
    let all = args(cmd);
    for (path, c) in commands(cmd) {
        let title = if path.is_empty() { bin.to_string() } else { format!("{bin} {path}") };
        let _ = writeln!(s, "## `{title}`\n");
        if c.is_hide_set() {
            let _ = writeln!(s, "*For the project's developers: not listed in `--help`.*\n");
        }
        if let Some(about) = c.get_about() {
            let _ = writeln!(s, "{}\n", one_line(&about.to_string()));
        }
        let subs: Vec<&Command> = c.get_subcommands().collect();
        if !subs.is_empty() {
            let _ = writeln!(s, "| Command | Does |\n|---|---|");
            for sub in subs {
                let about = sub.get_about().map(|a| one_line(&a.to_string())).unwrap_or_default();
                let hidden = if sub.is_hide_set() { " (developers)" } else { "" };
                let _ = writeln!(s, "| `{}`{hidden} | {} |", sub.get_name(), cell(&about));
            }
            let _ = writeln!(s);
        }
        let mine: Vec<&ArgUse> = all.iter().filter(|a| a.path == path).collect();
        if !mine.is_empty() {
            let _ = writeln!(s, "| Argument | Value | Meaning |\n|---|---|---|");
            for a in mine {
                let name = match (a.positional, a.short) {
                    (true, _) => a.name.clone(),
                    (false, Some(c)) if a.name.starts_with("--") => format!("-{c}, {}", a.name),
                    _ => a.name.clone(),
                };
                let value = match (a.positional, a.value.as_str()) {
                    (true, _) => "positional".to_string(),
                    (false, "no value") => "no value".to_string(),
                    (false, v) => format!("`{v}`"),
                };
                let hidden = if a.hidden { " (hidden)" } else { "" };
                let _ = writeln!(
                    s,
                    "| `{}`{hidden} | {} | {} |",
                    cell(&name),
                    cell(&value),
                    cell(&a.help)
                );
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(s, "## Old spellings\n");
    let _ = writeln!(
        s,
        "Each still works in this release, with a warning on standard error; the next release \
         drops it.\n"
    );
    let _ = writeln!(s, "| Old | New |\n|---|---|");
    for d in crate::spelling::DEPRECATED {
        let _ = writeln!(s, "| `{}` | `{}` |", cell(d.old), cell(d.new));
    }
    s
}
