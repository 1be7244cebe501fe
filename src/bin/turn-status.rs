fn main() -> std::process::ExitCode {
    dreamkit::cli::main::<dreamkit::tools::turn_status::Args>()
}
