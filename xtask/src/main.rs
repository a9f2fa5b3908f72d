fn main() -> std::process::ExitCode {
    xtask::main_impl(std::env::args_os())
}
