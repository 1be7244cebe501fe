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

/// Every binary's documentation, for `make man completions` and the docs test.
#[cfg(feature = "docs")]
pub fn doc_pages() -> Vec<cli::docs::Page> {
    use clap::CommandFactory;
    vec![
        cli::docs::Page {
            command: tools::dream_gate::Args::command(),
            sections: tools::dream_gate::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::dream_lock::Args::command(),
            sections: tools::dream_lock::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::dream_run::Args::command(),
            sections: tools::dream_run::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::recap::Args::command(),
            sections: tools::recap::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::turn_status::Args::command(),
            sections: tools::turn_status::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::feedback::Args::command(),
            sections: tools::feedback::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: tools::suggest::Args::command(),
            sections: tools::suggest::MAN_SECTIONS,
        },
    ]
}
