fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::feedback::Args>()
}
