//! Without `-C`, commands work on the git repository that holds the current directory, not on
//! the tree the binary was built from.

use std::process::Command;

#[test]
fn without_dash_c_the_repository_of_the_current_directory_is_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("configs")).unwrap();
    std::fs::create_dir_all(root.join("sub/deeper")).unwrap();
    let text = "[profile.default.sim]\nmode = \"timing\"\n[profile.default.sim.timing]\n\
                ttft_ms = 2\nitl_ms = 1\n[profile.default.workload]\ninput_lengths = [8]\n\
                repeats = 2\nmax_tokens = 2\n[profile.default.load]\nconcurrency = 2\n";
    std::fs::write(root.join("configs/bench.toml"), text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .current_dir(root.join("sub/deeper"))
        .args(["bench", "-q", "--out", "runs/r"])
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    // The config of this repository was used, and --out is relative to its root.
    let s = infergate_model::Summary::read(&root.join("runs/r")).unwrap();
    assert_eq!(s.requests.ok, 2);
}
