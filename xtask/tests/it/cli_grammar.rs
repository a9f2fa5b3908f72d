//! The command line's grammar: a flag name means one thing in every command (docs/cli.md's
//! glossary, `xtask::cli_doc::GLOSSARY`), docs/cli.md is what the definitions generate, and
//! every old spelling still runs, with a warning naming the new one.

use clap::{Arg, ArgAction, Command, CommandFactory};
use xtask::cli_doc::{self, GLOSSARY};

use crate::support::gitrepo::GitRepo;
use crate::support::{repo_root, xtask};

fn cli() -> Command {
    xtask::Cli::command()
}

#[test]
fn a_flag_name_means_one_thing_in_every_command() {
    let problems = cli_doc::grammar_problems(&cli(), GLOSSARY);
    assert!(problems.is_empty(), "the command line breaks its grammar:\n{}", problems.join("\n"));
}

#[test]
fn config_is_the_bench_file_check_the_stale_file_and_json_a_file() {
    let args = cli_doc::args(&cli());
    let named = |n: &str| args.iter().filter(move |a| a.name == n).collect::<Vec<_>>();
    // Hidden commands are walked too: `test` and `engine model` are there.
    let paths: Vec<String> = cli_doc::commands(&cli()).into_iter().map(|(p, _)| p).collect();
    assert!(paths.iter().any(|p| p == "test") && paths.iter().any(|p| p == "engine model"));
    for a in named("--config") {
        assert!(a.help.to_lowercase().contains("bench config"), "{}: --config: {}", a.path, a.help);
    }
    for path in ["engine args", "engine serve", "tune", "bench ab"] {
        assert!(
            named("--engine-config").iter().any(|a| a.path == path),
            "`{path}` names its engine file with --engine-config"
        );
    }
    let checks: Vec<&str> = named("--check").iter().map(|a| a.path.as_str()).collect();
    assert_eq!(checks, ["adr thresholds", "adr alerts"]);
    for a in named("--check") {
        assert!(a.help.contains("exit 1 when") && a.help.contains("out of date"), "{}", a.help);
    }
    let json = named("--json");
    assert!(json.len() >= 3, "{json:?}");
    for a in json {
        assert_eq!((a.value.as_str(), a.action.as_str()), ("<FILE>", "Set"), "{}", a.path);
    }
    assert!(named("--record-history").is_empty());
    // The developers' commands are runnable, and not in the user's help.
    let help = xtask(&repo_root(), &["--help"]).stdout;
    assert!(!help.contains("\n  test ") && help.contains("\n  trend "), "{help}");
    let engine = xtask(&repo_root(), &["engine", "--help"]).stdout;
    assert!(!engine.contains("model") && engine.contains("args"), "{engine}");
    assert_eq!(xtask(&repo_root(), &["test", "--help"]).code, 0);
}

/// The checker on a command line of its own with the clashes it exists to catch.
#[test]
fn the_checker_finds_a_deliberate_clash() {
    let switch = |name: &'static str, help: &'static str| {
        Arg::new(name).long(name).action(ArgAction::SetTrue).help(help)
    };
    let file = |name: &'static str, help: &'static str| {
        Arg::new(name).long(name).value_name("FILE").help(help)
    };
    let fixture = Command::new("fixture")
        .subcommand(
            Command::new("list")
                .arg(switch("json", "Print JSON instead of a table"))
                .arg(file("config", "Bench config file")),
        )
        .subcommand(
            Command::new("gate")
                .arg(file("json", "Write the verdicts as JSON to FILE"))
                .arg(switch("check", "Exit 1 on an unexplained regression")),
        )
        .subcommand(Command::new("dev").hide(true).subcommand(
            Command::new("serve").arg(file("config", "The engine config file")).arg(
                Arg::new("profile").long("profile").short('c').value_name("NAME").help("Profile"),
            ),
        ))
        .subcommand(
            Command::new("sim")
                .arg(Arg::new("cfg").long("cfg").short('c').value_name("F").help("Bench config")),
        );
    let problems = cli_doc::grammar_problems(&fixture, GLOSSARY);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(
        has("--json: `list` takes no value (SetTrue), `gate` takes <FILE> (Set)"),
        "{problems:#?}"
    );
    assert!(has("--config in `dev serve` names \"engine config\""), "{problems:#?}");
    assert!(has("--config in `dev serve` does not read as"), "{problems:#?}");
    assert!(has("--check in `gate` does not read as"), "{problems:#?}");
    assert!(has("-c: --profile in `dev serve`, --cfg in `sim`"), "{problems:#?}");
    assert_eq!(problems.len(), 5, "{problems:#?}");
    // The same command line without the clashes passes.
    let clean = Command::new("fixture")
        .subcommand(Command::new("a").arg(file("json", "Also write JSON to FILE")))
        .subcommand(Command::new("b").arg(file("json", "Write the list as JSON to FILE")));
    assert_eq!(cli_doc::grammar_problems(&clean, GLOSSARY), Vec::<String>::new());
}

/// docs/cli.md is what the definitions generate (the full build's: every feature's command).
#[cfg(all(feature = "runtime", feature = "mcp"))]
#[test]
fn docs_cli_md_is_current() {
    let want = cli_doc::render(&cli());
    let path = repo_root().join(cli_doc::CLI_DOC);
    if std::env::var("UPDATE_CLI_DOC").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &want).unwrap();
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let line = have.lines().zip(want.lines()).position(|(a, b)| a != b);
        let at = line.unwrap_or(have.lines().count().min(want.lines().count()));
        panic!(
            "docs/cli.md is out of date (from line {}: {:?}, generated {:?}): run \
             `UPDATE_CLI_DOC=1 cargo test -p xtask --all-features --test it -- cli_grammar`",
            at + 1,
            have.lines().nth(at),
            want.lines().nth(at)
        );
    }
}

/// Each old spelling runs what its new spelling runs: the same exit status and standard
/// output, and standard error with one warning line naming the new spelling before the rest.
#[test]
fn old_spellings_still_work_and_warn() {
    let repo = repo_root();
    let mut g = GitRepo::init();
    g.commit_files("Initial", &[("README.md", Some("x\n"))]);
    let empty = g.path().to_path_buf();
    let mut cases: Vec<(&std::path::Path, Vec<&str>, Vec<&str>, &str)> = vec![
        (&empty, vec!["history"], vec!["trend"], "`history` is now `trend`"),
        (
            &empty,
            vec!["history", "--check", "--last", "2"],
            vec!["trend", "--fail-on-regression", "--last", "2"],
            "`history --check` is now `trend --fail-on-regression`",
        ),
        (&empty, vec!["history", "list"], vec!["trend", "list"], "`history` is now `trend`"),
        (
            &repo,
            vec!["engine", "args", "--config", "configs/engine.toml"],
            vec!["engine", "args", "--engine-config", "configs/engine.toml"],
            "`engine args --config` is now `engine args --engine-config`",
        ),
        (
            &repo,
            vec!["adr", "list", "--json"],
            vec!["adr", "list", "--json", "-"],
            "`adr list --json` is now `adr list --json -`",
        ),
    ];
    if cfg!(feature = "runtime") {
        cases.extend([
            (
                &empty as &std::path::Path,
                vec!["gate", "--until-decided", "--max-trials", "3", "no-set"],
                vec!["bench", "trials", "--until-decided", "--max-trials", "3", "no-set"],
                "`gate --until-decided PATH` is now `bench trials PATH --until-decided`",
            ),
            (
                &repo,
                vec!["gate", "--ab", "main", "--help"],
                vec!["bench", "ab", "main", "--help"],
                "`gate --ab [BASE_REV]` is now `bench ab [BASE_REV]`",
            ),
            (
                &empty,
                vec!["gate", "--ab", "--engine", "nonesuch"],
                vec!["bench", "ab", "--engine", "nonesuch"],
                "`gate --ab [BASE_REV]` is now `bench ab [BASE_REV]`",
            ),
            (
                &empty,
                vec!["accept", "--judge", "j"],
                vec!["acceptance", "--judge", "j"],
                "`accept` is now `acceptance`",
            ),
            (
                &empty,
                vec!["bench", "--record-history"],
                vec!["bench", "--history"],
                "`bench --record-history` is now `bench --history`",
            ),
            (
                &empty,
                vec!["tune", "--record-history", "--help"],
                vec!["tune", "--history", "--help"],
                "`tune --record-history` is now `tune --history`",
            ),
            (
                &repo,
                vec!["engine", "serve", "--config", "x.toml", "--help"],
                vec!["engine", "serve", "--engine-config", "x.toml", "--help"],
                "`engine serve --config` is now `engine serve --engine-config`",
            ),
            (
                &repo,
                vec!["engine", "serve", "--model", "m.gguf", "--help"],
                vec!["engine", "serve", "--gguf", "m.gguf", "--help"],
                "`engine serve --model` is now `engine serve --gguf`",
            ),
            (
                &empty,
                vec!["accept", "--baseline", "a", "--candidate", "b", "--help"],
                vec!["acceptance", "--baseline-target", "a", "--candidate-target", "b", "--help"],
                "`accept --baseline A --candidate B` is now `acceptance --baseline-target A --candidate-target B`",
            ),
            (
                &empty,
                vec!["dataset", "refresh", "--since", "1", "--until", "2", "--help"],
                vec!["dataset", "refresh", "--window-start", "1", "--window-end", "2", "--help"],
                "`dataset refresh --until` is now `dataset refresh --window-end`",
            ),
            (
                &repo,
                vec!["selftest", "--json", "--help"],
                vec!["selftest", "--json", "-", "--help"],
                "`selftest --json` is now `selftest --json -`",
            ),
        ]);
    }
    for (root, old, new, says) in cases {
        let (o, n) = (xtask(root, &old), xtask(root, &new));
        let line = old.join(" ");
        assert_eq!((o.code, &o.stdout), (n.code, &n.stdout), "`{line}` runs as its new spelling");
        // The warnings first, one line each (`history --check` is two old spellings).
        let warned: Vec<&str> =
            o.stderr.lines().take_while(|l| l.starts_with("warning: `")).collect();
        let want = format!("warning: {says}; the old spelling goes in the next release");
        assert!(warned.contains(&want.as_str()), "`{line}`: {}", o.stderr);
        let rest: String = o.stderr.lines().skip(warned.len()).map(|l| format!("{l}\n")).collect();
        assert_eq!(rest.trim_end(), n.stderr.trim_end(), "`{line}`");
        assert!(!n.stderr.contains("warning: `"), "the new spelling `{}` warns", new.join(" "));
    }
}
