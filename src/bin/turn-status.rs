fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::status::Args>()
}
