fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::dream::Args>()
}
