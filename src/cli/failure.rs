//! The typed failure every tool returns, and its JSON form.

use schemars::JsonSchema;
use serde::Serialize;

use super::Exit;

/// Why a tool could not do its job. The variant decides the exit code; every variant prints
/// as `{"error": {"kind", "reason"?, "message"}}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// The command line itself is wrong (exit 2, `kind: "usage"`).
    #[error("{0}")]
    Usage(String),
    /// stdin or a flag value is unacceptable (exit 2, `kind: "bad_input"`).
    #[error("{message}")]
    BadInput {
        /// A machine-readable name for a specific refusal, such as `too_large`.
        reason: Option<&'static str>,
        message: String,
    },
    /// The local machine let us down: I/O, permissions, a missing directory, a file that is
    /// not a regular file (exit 3, `kind: "environment"`, `reason` `not_found`, `permission`
    /// or `not_a_file` when the cause is one of those).
    #[error("{message}")]
    Environment {
        reason: Option<&'static str>,
        message: String,
    },
    /// The model, the network or a remote store failed (exit 4); `kind` is one of the model
    /// error kinds (`auth`, `rate_limited`, ...) or `remote` for the lock's store.
    #[error("{message}")]
    Remote {
        kind: &'static str,
        reason: Option<&'static str>,
        message: String,
    },
    /// SIGINT or SIGTERM stopped the work (exit 130 / 143, `kind: "interrupted"`).
    #[error("interrupted by {}", if *signal == libc::SIGINT { "SIGINT" } else { "SIGTERM" })]
    Interrupted { signal: i32 },
}

/// A failure serialises as its `{"kind", "reason"?, "message"}` object.
impl serde::Serialize for Failure {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        ErrorBody::of(self).serialize(serializer)
    }
}

impl schemars::JsonSchema for Failure {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        ErrorBody::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        ErrorBody::json_schema(generator)
    }
}

/// Why `files::open_regular` refused a path that exists: what it is instead.
#[derive(Debug)]
pub struct NotRegular(pub &'static str);

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "not a regular file ({})", self.0)
    }
}

impl std::error::Error for NotRegular {}

/// True for the error of a path that exists but is not a regular file (see `files::open_regular`): the
/// marker error is defined here so that a failure names its `reason` without depending on
/// `files`.
pub fn is_not_regular(err: &std::io::Error) -> bool {
    err.get_ref()
        .is_some_and(<dyn std::error::Error + Send + Sync + 'static>::is::<NotRegular>)
}

/// The `reason` an I/O error gives a file named by a flag or a payload: the same in every tool.
pub fn io_reason(err: &std::io::Error) -> Option<&'static str> {
    if is_not_regular(err) {
        return Some("not_a_file");
    }
    match err.kind() {
        std::io::ErrorKind::NotFound => Some("not_found"),
        std::io::ErrorKind::PermissionDenied => Some("permission"),
        _ if err.raw_os_error() == Some(libc::ENOTDIR)
            || err.raw_os_error() == Some(libc::EISDIR)
            || err.raw_os_error() == Some(libc::ENXIO) =>
        {
            Some("not_a_file")
        }
        _ if err.raw_os_error() == Some(libc::ELOOP) => Some("not_found"),
        _ => None,
    }
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Failure::BadInput {
            reason: None,
            message: message.into(),
        }
    }

    /// A remote store (etcd) failed or could not be reached, after retries (exit 4, `kind:
    /// "remote"`).
    pub fn remote(message: impl Into<String>) -> Self {
        Failure::Remote {
            kind: "remote",
            reason: None,
            message: message.into(),
        }
    }

    pub fn environment(message: impl Into<String>) -> Self {
        Failure::Environment {
            reason: None,
            message: message.into(),
        }
    }

    /// An I/O error on a path, worded the way a user can act on, with its `reason`.
    pub fn io(action: &str, path: &std::path::Path, err: &std::io::Error) -> Self {
        Failure::Environment {
            reason: io_reason(err),
            message: format!("cannot {action} {}: {err}", path.display()),
        }
    }

    /// SIGINT or SIGTERM ended the work (exit 130 / 143).
    pub fn interrupted(signal: i32) -> Self {
        Failure::Interrupted { signal }
    }

    /// The same failure with a specific `reason`.
    pub fn with_reason(self, reason: &'static str) -> Self {
        match self {
            Failure::Usage(message) => Failure::Usage(message),
            Failure::Interrupted { signal } => Failure::Interrupted { signal },
            Failure::BadInput { message, .. } => Failure::BadInput {
                reason: Some(reason),
                message,
            },
            Failure::Environment { message, .. } => Failure::Environment {
                reason: Some(reason),
                message,
            },
            Failure::Remote { kind, message, .. } => Failure::Remote {
                kind,
                reason: Some(reason),
                message,
            },
        }
    }

    pub fn exit(&self) -> Exit {
        match self {
            Failure::Usage(_) | Failure::BadInput { .. } => Exit::Usage,
            Failure::Environment { .. } => Exit::Environment,
            Failure::Remote { .. } => Exit::Remote,
            Failure::Interrupted { signal } => Exit::of_signal(*signal),
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Usage(_) => "usage",
            Failure::BadInput { .. } => "bad_input",
            Failure::Environment { .. } => "environment",
            Failure::Remote { kind, .. } => kind,
            Failure::Interrupted { .. } => "interrupted",
        }
    }

    pub fn reason(&self) -> Option<&'static str> {
        match self {
            Failure::Usage(_) | Failure::Interrupted { .. } => None,
            Failure::BadInput { reason, .. }
            | Failure::Environment { reason, .. }
            | Failure::Remote { reason, .. } => *reason,
        }
    }
}

/// The `error` object every failure prints: `{kind, reason?, message}`, and for a failed
/// model exchange also `status` (the HTTP status, or null) and `attempts` (requests made).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ErrorBody {
    /// `usage`, `bad_input`, `environment`, `interrupted`, `remote`, or a model error kind
    /// (`auth`, `rate_limited`, `overloaded`, `network`, `timeout`, ...).
    pub kind: &'static str,
    /// A machine-readable name for a specific refusal (`too_large`, `not_found`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Option<u16>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

impl ErrorBody {
    /// The failure's words as they are (clap's usage text keeps its lines).
    pub fn of(failure: &Failure) -> Self {
        ErrorBody {
            kind: failure.kind(),
            reason: failure.reason(),
            message: failure.to_string(),
            status: None,
            attempts: None,
        }
    }

    /// The failure's words made safe for a terminal (they may quote a model or a file).
    pub fn of_failure(failure: &Failure) -> Self {
        ErrorBody {
            message: super::text::sanitize(&failure.to_string()).into_owned(),
            ..ErrorBody::of(failure)
        }
    }

    /// The one stderr line of the failure.
    pub fn line(&self) -> String {
        match self.attempts {
            Some(_) => format!("model request failed: {}: {}", self.kind, self.message),
            None => format!("{}: {}", self.kind, self.message),
        }
    }
}

/// `{"error": {...}}`: what every tool prints for a failure that has no envelope to live in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FailureDocument {
    pub error: ErrorBody,
}

impl FailureDocument {
    pub fn of(failure: &Failure) -> Self {
        FailureDocument {
            error: ErrorBody::of(failure),
        }
    }
}

/// The model tools' deferred credential check: a missing or unsendable credential (a remote
/// failure) is put off until a request is due, after every local gate, so a hook that finds
/// nothing to do says so, key or not; every other setting is checked at once, so a bad one
/// is a usage error whatever the gates say.
pub fn credentials_later<T>(config: Result<T, Failure>) -> Result<Result<T, Failure>, Failure> {
    match config {
        Ok(config) => Ok(Ok(config)),
        Err(failure @ Failure::Remote { .. }) => Ok(Err(failure)),
        Err(failure) => Err(failure),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_input_with_reason_serialises_in_contract_order() {
        let f = Failure::BadInput {
            reason: Some("too_large"),
            message: "draft is 40000 bytes".into(),
        };
        assert_eq!(
            crate::cli::json::to_string(&FailureDocument::of(&f)).unwrap(),
            r#"{"error":{"kind":"bad_input","reason":"too_large","message":"draft is 40000 bytes"}}"#
        );
        assert_eq!(f.exit(), Exit::Usage);
    }

    #[test]
    fn usage_has_no_reason_and_environment_exits_3() {
        let f = Failure::Usage("unexpected argument".into());
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({"kind":"usage","message":"unexpected argument"})
        );
        assert_eq!(Failure::environment("disk").exit().code(), 3);
    }
}
