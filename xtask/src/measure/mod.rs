//! What the measuring commands share: the profile flags of every one of them ([`flags`]),
//! `cargo xtask bench` itself ([`bench`]: its flags, the plan they make and its execution, which
//! `tune`, `noise` and `bench ab` reuse), the modes a bench runs in
//! ([`sweep`], [`strategies`], [`trials`], [`capacity`]), what it measures besides a run
//! ([`actions`]: `bench ab`, the A/B measurement of [`ab`], and `bench trials --until-decided`),
//! the merge of a sharded run ([`merge`]), the async runtime they run on and where their output
//! goes by default.

pub mod ab;
pub mod actions;
pub mod bench;
pub mod capacity;
pub mod flags;
pub mod merge;
pub mod strategies;
pub mod sweep;
pub mod trials;

use std::path::{Path, PathBuf};

use anyhow::Context;

/// The multi-threaded tokio runtime a measuring command runs on.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// A flag set when Ctrl-C or SIGTERM arrives, for commands that run many runs (each run
/// handles its own signals; between runs the command checks the flag).
pub(crate) fn listen_for_stop() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut signals = rt.block_on(async { ::bench::runner::StopSignals::listen() });
    let set = flag.clone();
    std::thread::spawn(move || {
        rt.block_on(signals.next());
        set.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    Ok(flag)
}

/// The default output directory of `command` (`bench`, `accept`): `target/<command>/<name>`
/// under the repository root.
pub(crate) fn default_out_dir(root: &Path, command: &str, name: &str) -> PathBuf {
    root.join("target").join(command).join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_goes_under_target_by_command() {
        let dir = default_out_dir(Path::new("/repo"), "bench", "20250101T000000Z-abcd");
        assert_eq!(dir, Path::new("/repo/target/bench/20250101T000000Z-abcd"));
    }
}
