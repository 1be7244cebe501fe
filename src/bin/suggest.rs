fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::tools::suggest::Args>()
}
