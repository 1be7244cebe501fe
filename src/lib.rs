//! dreamkit: Claude Code's background model work as composable command-line tools.
//!
//! Dependency direction: `bin` -> `tools` (one module per binary) -> `store` -> `claude`, `lock`,
//! `model` -> `files`, `cli`.

pub mod claude;
pub mod cli;
pub mod files;
pub mod lock;
pub mod model;
pub mod net;
pub mod parallel;
pub mod store;
pub mod tools;

/// The binaries, written once: each is `src/bin/<name>.rs` calling `cli::main` with
/// `tools::<module>::Args`. The man pages, completions and schemas below come from this list;
/// the Makefile reads `src/bin/`, and a test checks both against the binaries built.
macro_rules! binaries {
    ($($module:ident),+ $(,)?) => {
        /// Every binary's clap command, in the order the list gives.
        pub fn commands() -> Vec<clap::Command> {
            vec![$(<tools::$module::Args as clap::CommandFactory>::command()),+]
        }

        /// Every binary's documentation, for `make man completions` and the docs test.
        #[cfg(feature = "docs")]
        pub fn doc_pages() -> Vec<cli::docs::Page> {
            vec![$(cli::docs::Page {
                command: <tools::$module::Args as clap::CommandFactory>::command(),
                sections: tools::$module::MAN_SECTIONS,
            }),+]
        }

        /// Every command's JSON Schema file (`schemas/`), for `make man completions` and the
        /// docs test.
        #[cfg(feature = "docs")]
        pub fn schema_files() -> Vec<(std::path::PathBuf, Vec<u8>)> {
            let mut files = Vec::new();
            $(files.extend(cli::schema::files::<tools::$module::Args>());)+
            files
        }
    };
}

binaries!(
    dream_gate,
    dream_lock,
    dream_run,
    recap,
    turn_status,
    feedback,
    suggest
);
