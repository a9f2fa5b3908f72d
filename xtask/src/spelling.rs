//! Old spellings of the command line, kept for one release: [`rewrite`] turns each into its new
//! spelling before the arguments are parsed, and says so on standard error, once per spelling.
//! [`DEPRECATED`] lists them (docs/cli.md shows the list).

use std::ffi::OsString;

/// An old spelling and the new one it stands for.
#[derive(Clone, Copy, Debug)]
pub struct Deprecated {
    pub old: &'static str,
    pub new: &'static str,
}

const ACCEPT: Deprecated = Deprecated { old: "accept", new: "acceptance" };
const ACCEPT_TARGETS: Deprecated = Deprecated {
    old: "accept --baseline A --candidate B",
    new: "acceptance --baseline-target A --candidate-target B",
};
const REFRESH_SINCE: Deprecated =
    Deprecated { old: "dataset refresh --since", new: "dataset refresh --window-start" };
const REFRESH_UNTIL: Deprecated =
    Deprecated { old: "dataset refresh --until", new: "dataset refresh --window-end" };
const HISTORY: Deprecated = Deprecated { old: "history", new: "trend" };
const HISTORY_CHECK: Deprecated =
    Deprecated { old: "history --check", new: "trend --fail-on-regression" };
const GATE_AB: Deprecated = Deprecated { old: "gate --ab [BASE_REV]", new: "bench ab [BASE_REV]" };
const GATE_UNTIL: Deprecated =
    Deprecated { old: "gate --until-decided PATH", new: "bench trials PATH --until-decided" };
const ENGINE_ARGS_CONFIG: Deprecated =
    Deprecated { old: "engine args --config", new: "engine args --engine-config" };
const ENGINE_SERVE_CONFIG: Deprecated =
    Deprecated { old: "engine serve --config", new: "engine serve --engine-config" };
const ENGINE_SERVE_MODEL: Deprecated =
    Deprecated { old: "engine serve --model", new: "engine serve --gguf" };
const BENCH_RECORD: Deprecated =
    Deprecated { old: "bench --record-history", new: "bench --history" };
const TUNE_RECORD: Deprecated = Deprecated { old: "tune --record-history", new: "tune --history" };
const ADR_LIST_JSON: Deprecated = Deprecated { old: "adr list --json", new: "adr list --json -" };
const SELFTEST_JSON: Deprecated = Deprecated { old: "selftest --json", new: "selftest --json -" };

/// Every old spelling [`rewrite`] still takes.
pub const DEPRECATED: &[Deprecated] = &[
    ACCEPT,
    ACCEPT_TARGETS,
    HISTORY,
    HISTORY_CHECK,
    GATE_AB,
    GATE_UNTIL,
    ENGINE_ARGS_CONFIG,
    ENGINE_SERVE_CONFIG,
    ENGINE_SERVE_MODEL,
    BENCH_RECORD,
    TUNE_RECORD,
    ADR_LIST_JSON,
    SELFTEST_JSON,
    REFRESH_SINCE,
    REFRESH_UNTIL,
];

/// The warning an old spelling prints.
pub fn warning(d: &Deprecated) -> String {
    format!("warning: `{}` is now `{}`; the old spelling goes in the next release", d.old, d.new)
}

/// The index of the first flag `name` (`--name` or `--name=...`) after `from`, before `--`.
fn find_flag(args: &[String], from: usize, name: &str) -> Option<usize> {
    let eq = format!("{name}=");
    args.iter()
        .enumerate()
        .skip(from)
        .take_while(|(_, a)| *a != "--")
        .find(|(_, a)| *a == name || a.starts_with(&eq))
        .map(|(i, _)| i)
}

/// Remove the flags `gate` took and ignored in a mode that moved to `bench`: each switch of
/// `switches`, and each flag of `valued` with its value (`--flag V` or `--flag=V`).
fn drop_ignored(args: &mut Vec<String>, from: usize, switches: &[&str], valued: &[&str]) {
    let mut at = from;
    while at < args.len() && args[at] != "--" {
        let a = args[at].as_str();
        if switches.contains(&a) {
            args.remove(at);
        } else if valued.contains(&a) {
            args.drain(at..(at + 2).min(args.len()));
        } else if valued.iter().any(|v| a.starts_with(&format!("{v}="))) {
            args.remove(at);
        } else {
            at += 1;
        }
    }
}

/// Rewrite the old spellings in `args` (the program's name first) to their new ones; the
/// spellings rewritten, in order, for [`warning`].
pub fn rewrite(args: &mut Vec<OsString>) -> Vec<Deprecated> {
    let Some(mut s) =
        args.iter().map(|a| a.to_str().map(str::to_string)).collect::<Option<Vec<_>>>()
    else {
        return Vec::new();
    };
    let mut used = Vec::new();
    // The command: the first word after the global `-C DIR` / `--root DIR`.
    let mut i = 1;
    while i < s.len() {
        match s[i].as_str() {
            "-C" | "--root" => i += 2,
            a if a.starts_with("--root=") || (a.starts_with("-C") && a.len() > 2) => i += 1,
            _ => break,
        }
    }
    let Some(command) = s.get(i).cloned() else { return used };
    let sub = s.get(i + 1).cloned().unwrap_or_default();
    match command.as_str() {
        "accept" => {
            s[i] = "acceptance".into();
            used.push(ACCEPT);
            // `accept` named its targets `--baseline` and `--candidate`.
            let mut renamed = false;
            for (old, new) in
                [("--baseline", "--baseline-target"), ("--candidate", "--candidate-target")]
            {
                if let Some(at) = find_flag(&s, i + 1, old) {
                    s[at] = s[at].replacen(old, new, 1);
                    renamed = true;
                }
            }
            if renamed {
                used.push(ACCEPT_TARGETS);
            }
        }
        "dataset" if sub == "refresh" => {
            for (old, new, d) in [
                ("--since", "--window-start", REFRESH_SINCE),
                ("--until", "--window-end", REFRESH_UNTIL),
            ] {
                if let Some(at) = find_flag(&s, i + 2, old) {
                    s[at] = s[at].replacen(old, new, 1);
                    used.push(d);
                }
            }
        }
        "history" => {
            s[i] = "trend".into();
            used.push(HISTORY);
            if let Some(at) = find_flag(&s, i + 1, "--check") {
                s[at] = "--fail-on-regression".into();
                used.push(HISTORY_CHECK);
            }
        }
        "gate" => {
            if let Some(at) = find_flag(&s, i + 1, "--ab") {
                // `gate --ab` took and ignored the flags of gating a measured run.
                let ignored = ["--allow-busy-host", "--refuse-busy-host"];
                drop_ignored(&mut s, i + 1, &ignored, &["--confidence"]);
                let at = find_flag(&s, i + 1, "--ab").unwrap_or(at);
                // `--ab=REV`, `--ab REV` (the next word when not a flag) or `--ab` alone.
                let flag = s.remove(at);
                let rev = match flag.strip_prefix("--ab=") {
                    Some(rev) => Some(rev.to_string()),
                    None if s.get(at).is_some_and(|a| !a.starts_with('-')) => Some(s.remove(at)),
                    None => None,
                };
                s.splice(i..=i, ["bench".to_string(), "ab".to_string()]);
                if let Some(rev) = rev.filter(|r| !r.is_empty()) {
                    s.insert(i + 2, rev);
                }
                used.push(GATE_AB);
            } else if find_flag(&s, i + 1, "--until-decided").is_some() {
                // ... and `gate --until-decided` the history's switch.
                drop_ignored(&mut s, i + 1, &["--no-history"], &[]);
                s.splice(i..=i, ["bench".to_string(), "trials".to_string()]);
                used.push(GATE_UNTIL);
            }
        }
        "engine" if sub == "args" || sub == "serve" => {
            if let Some(at) = find_flag(&s, i + 2, "--config") {
                s[at] = s[at].replacen("--config", "--engine-config", 1);
                used.push(if sub == "args" { ENGINE_ARGS_CONFIG } else { ENGINE_SERVE_CONFIG });
            }
            if let Some(at) = find_flag(&s, i + 2, "--model").filter(|_| sub == "serve") {
                s[at] = s[at].replacen("--model", "--gguf", 1);
                used.push(ENGINE_SERVE_MODEL);
            }
        }
        "bench" | "tune" => {
            if let Some(at) = find_flag(&s, i + 1, "--record-history") {
                s[at] = "--history".into();
                used.push(if command == "bench" { BENCH_RECORD } else { TUNE_RECORD });
            }
        }
        "adr" | "selftest" => {
            let from = if command == "adr" { i + 2 } else { i + 1 };
            if command == "adr" && sub != "list" {
                // Only `adr list` had the switch.
            } else if let Some(at) = find_flag(&s, from, "--json") {
                // The switch: `--json` with no FILE after it.
                let bare = s[at] == "--json"
                    && s.get(at + 1).is_none_or(|a| a.starts_with('-') && a != "-");
                if bare {
                    s.insert(at + 1, "-".into());
                    used.push(if command == "adr" { ADR_LIST_JSON } else { SELFTEST_JSON });
                }
            }
        }
        _ => {}
    }
    *args = s.into_iter().map(OsString::from).collect();
    used
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(line: &str) -> (String, Vec<&'static str>) {
        let mut args: Vec<OsString> =
            std::iter::once("x").chain(line.split(' ')).map(OsString::from).collect();
        let used = rewrite(&mut args);
        let new: Vec<String> = args[1..].iter().map(|a| a.to_string_lossy().into()).collect();
        (new.join(" "), used.iter().map(|d| d.old).collect())
    }

    #[test]
    fn old_spellings_become_new_ones() {
        assert_eq!(rw("accept dataset x").0, "acceptance dataset x");
        assert_eq!(
            rw("accept --baseline f16 --candidate=q4k --all"),
            (
                "acceptance --baseline-target f16 --candidate-target=q4k --all".into(),
                vec!["accept", "accept --baseline A --candidate B"]
            )
        );
        assert_eq!(
            rw("dataset refresh --since 1700000000 --until 1700086400").0,
            "dataset refresh --window-start 1700000000 --window-end 1700086400"
        );
        assert_eq!(
            rw("-C d history --check --last 3"),
            ("-C d trend --fail-on-regression --last 3".into(), vec!["history", "history --check"])
        );
        assert_eq!(rw("gate --ab --max-requests 9").0, "bench ab --max-requests 9");
        assert_eq!(rw("gate --ab main --looks 2").0, "bench ab main --looks 2");
        assert_eq!(rw("gate --looks 2 --ab=v1").0, "bench ab v1 --looks 2");
        assert_eq!(
            rw("gate --confidence 0.9 --ab main --allow-busy-host --seed 3").0,
            "bench ab main --seed 3"
        );
        assert_eq!(
            rw("gate s --no-history --until-decided --max-trials 3").0,
            "bench trials s --until-decided --max-trials 3"
        );
        assert_eq!(
            rw("gate --until-decided --max-trials 4 runs/a").0,
            "bench trials --until-decided --max-trials 4 runs/a"
        );
        assert_eq!(rw("engine args --config=e.toml").0, "engine args --engine-config=e.toml");
        assert_eq!(rw("bench --trials 3 --record-history").0, "bench --trials 3 --history");
        assert_eq!(rw("adr list --json").0, "adr list --json -");
        assert_eq!(rw("adr list --json --exempt").0, "adr list --json - --exempt");
        assert_eq!(rw("selftest --json out.json").1, Vec::<&str>::new());
        // New spellings, and the same words elsewhere, are left alone.
        for line in [
            "gate runs/a --json g.json",
            "adr history",
            "bench -- --ab",
            "trend --check",
            "trend --since 2026-01-01",
            "adr new T --baseline runs/a",
        ] {
            assert_eq!(rw(line), (line.to_string(), vec![]), "{line}");
        }
    }
}
