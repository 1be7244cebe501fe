//! Credentials as they are sent in a header: checked to be sendable, registered for
//! redaction, never shown by `Debug`.

use std::fmt;

use crate::cli::Failure;

/// A credential; its `Debug` never shows it.
#[derive(Clone)]
pub struct Secret(String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([redacted])")
    }
}

impl Secret {
    /// A credential read from `variable`: one that cannot be sent as an HTTP header value (a
    /// newline, a control character) is an `auth` failure (exit 4), named without its value.
    /// From now on its value is redacted from everything printed.
    pub fn checked(variable: &str, value: String) -> Result<Secret, Failure> {
        let sendable = value.bytes().all(|b| (0x20..0x7f).contains(&b))
            && reqwest::header::HeaderValue::from_str(&value).is_ok();
        if !sendable {
            return Err(Failure::Remote {
                kind: "auth",
                reason: Some("unsendable_credential"),
                message: format!(
                    "{variable} holds characters that cannot be sent in an HTTP header (a \
newline or another control character?); its value is not shown"
                ),
            });
        }
        crate::cli::redact::register(&value);
        Ok(Secret(value))
    }

    /// The value, for the one header it goes in.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The `auth` failure of a missing credential (exit 4, reason `no_credential`): raised before
/// any network I/O.
pub fn no_credential(message: impl Into<String>) -> Failure {
    Failure::Remote {
        kind: "auth",
        reason: Some("no_credential"),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsendable_values_are_auth_failures_without_the_value() {
        for bad in ["sk-line\nbreak", "sk-tab\there", "sk-\u{7f}del", "sk-é"] {
            let err = Secret::checked("SOME_KEY", bad.into()).unwrap_err();
            assert_eq!((err.kind(), err.exit().code()), ("auth", 4), "{bad:?}");
            assert_eq!(err.reason(), Some("unsendable_credential"));
            assert!(!err.to_string().contains("sk-"), "{err}");
        }
        let ok = Secret::checked("SOME_KEY", "sk-fine-unit-77".into()).unwrap();
        assert_eq!(ok.expose(), "sk-fine-unit-77");
        assert!(!format!("{ok:?}").contains("sk-fine"));
    }
}
