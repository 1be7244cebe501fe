fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::suggest::Args>()
}
