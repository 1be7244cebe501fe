//! The exit-code table shared by every binary (SPEC §2).

/// How a dreamkit process ends. The numeric values are part of the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Yes / done: gate due, lock acquired, summary produced, draft queued.
    Yes,
    /// A clean "no": not due, lock busy, skipped, suppressed, rejected.
    No,
    /// Usage error or bad input.
    Usage,
    /// Local environment failure: I/O, permissions, missing directory.
    Environment,
    /// Model, network or remote-store failure, after retries.
    Remote,
    /// Interrupted by SIGINT.
    Interrupted,
    /// Terminated by SIGTERM.
    Terminated,
    /// A child's status passed on (`dream-lock exec`): its code, or 128 + its signal.
    Child(u8),
}

impl Exit {
    /// 130 for SIGINT, 143 for SIGTERM.
    pub fn of_signal(signal: i32) -> Exit {
        if signal == libc::SIGINT {
            Exit::Interrupted
        } else {
            Exit::Terminated
        }
    }

    pub const fn code(self) -> u8 {
        match self {
            Exit::Yes => 0,
            Exit::No => 1,
            Exit::Usage => 2,
            Exit::Environment => 3,
            Exit::Remote => 4,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
            Exit::Child(code) => code,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}

/// The table as it appears in every man page and the README.
pub const EXIT_CODE_TABLE: &[(u8, &str)] = &[
    (
        0,
        "yes / done (gate due, lock acquired, summary produced, draft queued)",
    ),
    (
        1,
        "a clean \"no\": not due, lock busy, skipped, suppressed, rejected; the JSON says why",
    ),
    (
        2,
        "usage error or bad input, a --cwd that does not exist included; stdout holds \
{\"error\":{\"kind\",\"reason\"?,\"message\"}}",
    ),
    (
        3,
        "local environment failure: I/O, permissions, a file or directory the tool needs (a \
config dir, a transcript) that is missing or not a regular file, named on the command line \
or not (recap --transcript /nope is 3)",
    ),
    (4, "model, network or remote-store failure (after retries)"),
    (130, "interrupted by SIGINT"),
    (143, "terminated by SIGTERM"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_table() {
        let all = [
            Exit::Yes,
            Exit::No,
            Exit::Usage,
            Exit::Environment,
            Exit::Remote,
            Exit::Interrupted,
            Exit::Terminated,
        ];
        let codes: Vec<u8> = all.iter().map(|e| e.code()).collect();
        let table: Vec<u8> = EXIT_CODE_TABLE.iter().map(|(c, _)| *c).collect();
        assert_eq!(codes, table);
    }
}
