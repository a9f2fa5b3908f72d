//! `cargo-infergate`: `cargo infergate ...` in a Rust repository (cargo runs it as
//! `cargo-infergate infergate ARGS`). The same entry point as `infergate`.

fn main() -> std::process::ExitCode {
    xtask::exit::quiet_broken_pipe();
    xtask::main_impl(std::env::args_os())
}
