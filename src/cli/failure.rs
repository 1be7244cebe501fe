//! The typed failure every tool returns, and its JSON form.

use serde_json::{json, Value};

use super::Exit;

/// Why a tool could not do its job. The variant decides the exit code.
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
    /// The local machine let us down: I/O, permissions, a missing directory (exit 3).
    #[error("{0}")]
    Environment(String),
    /// The model or a remote store cannot be used (exit 4); `kind` is one of the model
    /// error kinds, such as `auth` for a missing credential.
    #[error("{message}")]
    Remote { kind: &'static str, message: String },
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
            message: message.into(),
        }
    }

    pub fn environment(message: impl Into<String>) -> Self {
        Failure::Environment(message.into())
    }

    /// An I/O error on a path, worded the way a user can act on.
    pub fn io(action: &str, path: &std::path::Path, err: &std::io::Error) -> Self {
        Failure::Environment(format!("cannot {action} {}: {err}", path.display()))
    }

    pub fn exit(&self) -> Exit {
        match self {
            Failure::Usage(_) | Failure::BadInput { .. } => Exit::Usage,
            Failure::Environment(_) => Exit::Environment,
            Failure::Remote { .. } => Exit::Remote,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Failure::Usage(_) => "usage",
            Failure::BadInput { .. } => "bad_input",
            Failure::Environment(_) => "environment",
            Failure::Remote { kind, .. } => kind,
        }
    }

    /// The `{"kind", "reason"?, "message"}` object.
    pub fn to_json(&self) -> Value {
        let mut obj = json!({ "kind": self.kind() });
        if let Failure::BadInput {
            reason: Some(reason),
            ..
        } = self
        {
            obj["reason"] = json!(reason);
        }
        obj["message"] = json!(self.to_string());
        obj
    }

    /// The whole stdout document for a failure that has no envelope section to live in.
    pub fn to_document(&self) -> Value {
        json!({ "error": self.to_json() })
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
            serde_json::to_string(&f.to_document()).unwrap(),
            r#"{"error":{"kind":"bad_input","reason":"too_large","message":"draft is 40000 bytes"}}"#
        );
        assert_eq!(f.exit(), Exit::Usage);
    }

    #[test]
    fn usage_has_no_reason_and_environment_exits_3() {
        let f = Failure::Usage("unexpected argument".into());
        assert_eq!(
            f.to_document(),
            json!({"error":{"kind":"usage","message":"unexpected argument"}})
        );
        assert_eq!(Failure::environment("disk").exit().code(), 3);
    }
}
