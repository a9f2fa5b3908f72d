fn main() -> std::process::ExitCode {
    xtask::exit::quiet_broken_pipe();
    xtask::main_impl(std::env::args_os())
}
