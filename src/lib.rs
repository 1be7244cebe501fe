//! dreamkit: Claude Code's background model work as composable command-line tools.
//!
//! Dependency direction: `bin` -> tool modules (`gate`, ...) -> `claude`, `lock` -> `cli`.

pub mod claude;
pub mod cli;
pub mod dream;
pub mod dream_lock;
pub mod feedback;
pub mod files;
pub mod gate;
pub mod lock;
pub mod model;
pub mod recap;
pub mod status;
pub mod suggest;

/// Every binary's documentation, for `make man completions` and the docs test.
pub fn doc_pages() -> Vec<cli::docs::Page> {
    use clap::CommandFactory;
    vec![
        cli::docs::Page {
            command: gate::Args::command(),
            sections: gate::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: dream_lock::Args::command(),
            sections: dream_lock::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: dream::Args::command(),
            sections: dream::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: recap::Args::command(),
            sections: recap::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: status::Args::command(),
            sections: status::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: feedback::Args::command(),
            sections: feedback::MAN_SECTIONS,
        },
        cli::docs::Page {
            command: suggest::Args::command(),
            sections: suggest::MAN_SECTIONS,
        },
    ]
}
