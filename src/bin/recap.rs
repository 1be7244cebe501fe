fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::recap::Args>()
}
