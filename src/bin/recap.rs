fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::tools::recap::Args>()
}
