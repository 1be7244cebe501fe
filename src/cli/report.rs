//! What a command hands the shared `main`: a typed report. The report decides the exit code
//! (the one place it is decided, [`Delivery::of`]), the one human line, and what to take back
//! when stdout could not be written; its JSON Schema (`--schema`, `schemas/`) comes from its
//! type.

use schemars::{JsonSchema, SchemaGenerator};
use serde::Serialize;
use serde_json::Value;

use super::failure::FailureDocument;
use super::{Diag, Exit, Failure};

/// Work whose only record is the document (a lock token): run when the document could not be
/// written in full, a closed pipe included, because the reader never got it.
pub type Undo = Box<dyn FnOnce(&Diag)>;

/// What a command did, as printed on stdout.
pub trait Report: Serialize + JsonSchema {
    /// How the process ends.
    fn exit(&self) -> Exit;

    /// The one human line that says why: a clean "no", a skipped step, what interrupted the
    /// work, the failure a document reports. Printed on stderr (unless `-q`) before the
    /// document.
    fn note(&self) -> Option<String> {
        None
    }

    /// See [`Undo`]; taken once, before the document is written.
    fn take_undo(&mut self) -> Option<Undo> {
        None
    }

    /// `false` when a child process owned stdout (`dream-lock exec`): no document of ours.
    fn printed(&self) -> bool {
        true
    }
}

/// One command of a binary: the binary itself, or one of its subcommands.
pub trait Tool: Sized {
    type Report: Report;

    /// Does the work. A returned `Failure` is printed as `{"error": {...}}` (for an envelope
    /// stage: the envelope it received, its section failed) with the failure's exit code.
    fn run(self, cx: &super::Context) -> Result<Self::Report, Failure>;

    /// What `--schema` prints for this command: the schema of its report, or why stdout holds
    /// no JSON document (`Err(reason)`: the child's output, a diff, a hook answer).
    fn schema(&self, generator: &mut SchemaGenerator) -> Result<schemars::Schema, &'static str> {
        Ok(generator.subschema_for::<Self::Report>())
    }
}

/// JSON Schema 2020-12, every schema a report names kept under `$defs`.
pub fn generator() -> SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
}

/// A command stopped by SIGINT or SIGTERM before it had anything else to say: `{"error":
/// {"kind": "interrupted", ...}}`, exit 130 / 143, the line every interrupted tool says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interrupted(pub i32);

impl Interrupted {
    pub fn failure(self) -> Failure {
        Failure::interrupted(self.0)
    }
}

impl Serialize for Interrupted {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        FailureDocument::of(&self.failure()).serialize(serializer)
    }
}

impl JsonSchema for Interrupted {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        FailureDocument::schema_name()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> schemars::Schema {
        FailureDocument::json_schema(generator)
    }
}

impl Report for Interrupted {
    fn exit(&self) -> Exit {
        self.failure().exit()
    }

    fn note(&self) -> Option<String> {
        Some(self.failure().to_string())
    }
}

/// A report made ready for the shared `main`: the exit code, the compact JSON text (typed
/// reports go straight to text, without a `Value` tree), the line for stderr, the undo.
pub struct Delivery {
    pub(super) exit: Exit,
    /// `None` when a child owned stdout.
    pub(super) json: Option<String>,
    pub(super) note: Option<String>,
    pub(super) undo: Option<Undo>,
}

impl Delivery {
    /// The exit code is decided here, from the report, and nowhere else.
    pub fn of<R: Report>(mut report: R) -> Self {
        let exit = report.exit();
        let note = report.note();
        let undo = report.take_undo();
        if !report.printed() {
            return Delivery {
                exit,
                json: None,
                note,
                undo,
            };
        }
        match super::json::to_string(&report) {
            Ok(json) => Delivery {
                exit,
                json: Some(json),
                note,
                undo,
            },
            Err(e) => {
                let failure = Failure::environment(format!("cannot serialise the output: {e}"));
                Delivery {
                    exit: failure.exit(),
                    json: super::json::to_string(&FailureDocument::of(&failure)).ok(),
                    note: Some(failure.to_string()),
                    undo,
                }
            }
        }
    }

    /// A document printed as is (`--schema`'s answer), exit 0.
    pub(super) fn document(value: &Value) -> Self {
        Delivery {
            exit: Exit::Yes,
            json: Some(value.to_string()),
            note: None,
            undo: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exit_comes_from_the_report_and_a_child_owned_stdout_prints_nothing() {
        #[derive(Serialize, JsonSchema)]
        struct Ran {
            child: bool,
        }
        impl Report for Ran {
            fn exit(&self) -> Exit {
                Exit::Child(7)
            }
            fn printed(&self) -> bool {
                !self.child
            }
        }
        let delivery = Delivery::of(Ran { child: true });
        assert_eq!(delivery.exit, Exit::Child(7));
        assert_eq!(delivery.json, None);
        let delivery = Delivery::of(Ran { child: false });
        assert_eq!(delivery.json.as_deref(), Some(r#"{"child":false}"#));
    }
}
