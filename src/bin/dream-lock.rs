fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::tools::dream_lock::Args>()
}
