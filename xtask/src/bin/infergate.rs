//! `infergate`: the tool under its own name, for any repository (`infergate init`,
//! `infergate bench`, ...). The same entry point as `cargo xtask` in this repository.

fn main() -> std::process::ExitCode {
    xtask::exit::quiet_broken_pipe();
    xtask::main_impl(std::env::args_os())
}
