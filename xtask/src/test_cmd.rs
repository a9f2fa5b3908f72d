//! `cargo xtask test`: every test of the workspace, with every feature, and the real engine when
//! one is available.
//!
//! When `LLAMA_SERVER` names llama.cpp's server (or `CI=true`), the small real model is made
//! available first (installed once into the cache, see `model.rs`) and passed to the tests as
//! `INFERGATE_MODEL`; the real-engine tests skip loudly without it, and fail under `CI=true`.

use xshell::{Shell, cmd};

use crate::exit::Status;
use crate::model;

#[derive(Debug, clap::Args)]
pub struct TestCmd {
    /// Extra arguments for `cargo test` (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

impl TestCmd {
    pub fn run(self, sh: &Shell) -> anyhow::Result<Status> {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let engine = std::env::var_os("LLAMA_SERVER").filter(|v| !v.is_empty());
        let mut envs: Vec<(&str, String)> = Vec::new();
        if engine.is_some() || ci {
            let model = model::ensure(sh)?;
            envs.push(("INFERGATE_MODEL", model.display().to_string()));
        } else {
            eprintln!(
                "note: LLAMA_SERVER is not set: the real-engine tests will be skipped (see the README)"
            );
        }
        let args = &self.args;
        // Every feature: the acceptance checks are out of the default build, never out of its
        // tests. (`.ci/run` builds this command with every feature too, so the tests' build is
        // the one it already has.)
        // `--no-fail-fast`: every test binary runs, so one failure does not hide the others.
        let mut c = cmd!(sh, "cargo test --workspace --all-features --no-fail-fast {args...}");
        for (k, v) in envs {
            c = c.env(k, v);
        }
        // One test thread more than the cores: the real-engine scenarios are one test
        // (`a_real_engine_chain`) that holds a thread from the start while llama.cpp does the
        // work, so the other tests keep a thread per core. A RUST_TEST_THREADS of the caller's
        // own is kept.
        if std::env::var_os("RUST_TEST_THREADS").is_none() {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            c = c.env("RUST_TEST_THREADS", (cores + 1).to_string());
        }
        // `cargo run` gives this process the package's variables (CARGO_PKG_NAME=xtask,
        // CARGO_MANIFEST_DIR, ...); build scripts that watch them (ring's does) would see another
        // value in the nested cargo than in the build that made this binary, and rebuild the
        // TLS stack, the bench crate and xtask a second time.
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy();
            let from_cargo_run = k.starts_with("CARGO_PKG_")
                || k.starts_with("CARGO_MANIFEST_")
                || matches!(&*k, "CARGO_CRATE_NAME" | "CARGO_BIN_NAME" | "CARGO_PRIMARY_PACKAGE");
            if from_cargo_run {
                c = c.env_remove(&*k);
            }
        }
        Ok(if c.run().is_ok() { Status::Success } else { Status::PolicyViolated })
    }
}
