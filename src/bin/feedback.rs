fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::tools::feedback::Args>()
}
