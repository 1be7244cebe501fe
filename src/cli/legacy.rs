//! TEMPORARY (issue 27 migration): the old `Outcome` shape, so that each tool can move to
//! typed reports on its own. Deleted when the last tool has moved.

use std::rc::Rc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::{Map, Value};

use super::failure::FailureDocument;
use super::report::{Report, Undo as BoxedUndo};
use super::{Diag, Envelope, Exit, Failure};

/// What a tool produced: how the process ends and the stdout document, already serialised
/// (typed sections go straight to JSON text, without an intermediate `Value` tree).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub exit: Exit,
    /// `None` only when a child process owned stdout (`dream-lock exec`).
    pub json: Option<String>,
    /// Why the answer is a clean "no", or what interrupted the tool: printed as one line on
    /// stderr (unless `-q`) when the exit code is 1, 130 or 143, so a person sees why without
    /// reading the JSON.
    pub note: Option<String>,
    /// What to undo when the document could not be delivered (stdout full, closed or
    /// broken): work whose only record is the document, such as a lock token, is taken back.
    pub undo: Option<Undo>,
}

/// See [`Outcome::undo_unless_printed`].
#[derive(Clone)]
pub struct Undo(Rc<dyn Fn(&Diag)>);

impl std::fmt::Debug for Undo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Undo")
    }
}

impl PartialEq for Undo {
    fn eq(&self, other: &Self) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }
}

impl Outcome {
    pub fn new(exit: Exit, document: &impl Serialize) -> Self {
        match to_json(document) {
            Ok(json) => Outcome {
                exit,
                json: Some(json),
                note: None,
                undo: None,
            },
            Err(e) => {
                let failure = Failure::environment(format!("cannot serialise the output: {e}"));
                Outcome {
                    exit: failure.exit(),
                    json: Some(failure.to_document().to_string()),
                    note: None,
                    undo: None,
                }
            }
        }
    }

    /// Ends the process without a document of ours.
    pub fn without_document(exit: Exit) -> Self {
        Outcome {
            exit,
            json: None,
            note: None,
            undo: None,
        }
    }

    /// The one human line that says why (shown for exit 1, 130 and 143).
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.note = Some(note.into());
        self
    }

    /// `undo` runs (after the "cannot write stdout" line) when the document could not be
    /// written in full, a closed pipe included: the reader never got it.
    pub fn undo_unless_printed(mut self, undo: impl Fn(&Diag) + 'static) -> Self {
        self.undo = Some(Undo(Rc::new(undo)));
        self
    }
}

fn to_json(document: &impl Serialize) -> Result<String, String> {
    super::json::to_string(document).map_err(|e| e.to_string())
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let value: Value = self
            .json
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok())
            .unwrap_or(Value::Null);
        value.serialize(serializer)
    }
}

impl JsonSchema for Outcome {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Legacy".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        Schema::from(true)
    }
}

impl Report for Outcome {
    fn exit(&self) -> Exit {
        self.exit
    }

    fn note(&self) -> Option<String> {
        self.note
            .clone()
            .filter(|_| matches!(self.exit, Exit::No | Exit::Interrupted | Exit::Terminated))
    }

    fn take_undo(&mut self) -> Option<BoxedUndo> {
        let Undo(undo) = self.undo.take()?;
        Some(Box::new(move |diag: &Diag| undo(diag)))
    }

    fn printed(&self) -> bool {
        self.json.is_some()
    }
}

impl Failure {
    pub fn to_json(&self) -> Value {
        serde_json::to_value(super::ErrorBody::of(self)).unwrap_or(Value::Null)
    }

    pub fn to_document(&self) -> Value {
        serde_json::to_value(FailureDocument::of(self)).unwrap_or(Value::Null)
    }
}

pub fn outcome(signal: i32) -> Outcome {
    Outcome::new(
        super::signals::exit_for(signal),
        &FailureDocument::of(&Failure::interrupted(signal)),
    )
    .with_note(format!("interrupted by {}", super::signals::name(signal)))
}

pub fn failed(envelope: Envelope, section: &str, failure: &Failure) -> Value {
    let error = failure.to_json();
    let envelope = envelope.into_map();
    let mut own = match envelope.get(section) {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    match section {
        "gate" => {
            own.insert("due".into(), Value::Bool(false));
            own.insert("reason".into(), Value::String("error".into()));
            own.insert("error".into(), error.clone());
        }
        "lock" => {
            // A release that failed keeps acquire's lease (token, prior_mtime) for a retry.
            if own.contains_key("token") {
                own.insert("released".into(), Value::Bool(false));
            } else {
                own.insert("acquired".into(), Value::Bool(false));
                own.insert("reason".into(), Value::String("error".into()));
            }
            own.insert("error".into(), error.clone());
        }
        "run" => {
            own.clear();
            let status = if matches!(failure, Failure::Interrupted { .. }) {
                "aborted"
            } else {
                "failed"
            };
            own.insert("status".into(), Value::String(status.into()));
            own.insert("error".into(), Value::String(failure.kind().into()));
            own.insert("message".into(), Value::String(failure.to_string()));
        }
        _ => {
            own.insert("error".into(), error.clone());
        }
    }
    let mut map = envelope;
    map.insert(section.to_string(), Value::Object(own));
    map.insert("error".into(), error);
    Value::Object(map)
}

thread_local! {
    static INPUT: std::cell::RefCell<Option<Result<super::Input, Failure>>> =
        const { std::cell::RefCell::new(None) };
    static TEXT: std::cell::RefCell<Option<Result<Option<String>, Failure>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs an unconverted tool: its stdin comes from the context.
pub fn enter<T: super::Tool>(cx: &super::Context, tool: T) -> super::Delivery {
    if !cx.common().schema {
        INPUT.with(|slot| *slot.borrow_mut() = Some(cx.input()));
        TEXT.with(|slot| *slot.borrow_mut() = Some(cx.stdin_text()));
    }
    cx.finish(tool)
}

impl super::Input {
    pub fn from_stdin() -> Result<super::Input, Failure> {
        INPUT.with(|slot| slot.borrow().clone().unwrap_or(Ok(super::Input::Nothing)))
    }
}

pub fn stdin_text() -> Result<Option<String>, Failure> {
    TEXT.with(|slot| slot.borrow().clone().unwrap_or(Ok(None)))
}

/// The stage of an unconverted tool.
pub struct LegacyStage(pub &'static str);

impl super::envelope::Stage for LegacyStage {
    fn key(&self) -> &'static str {
        self.0
    }

    fn failed(&self, envelope: Envelope, failure: &Failure) -> Value {
        failed(envelope, self.0, failure)
    }

    fn failed_schema(&self, _: &mut SchemaGenerator) -> Schema {
        Schema::from(true)
    }
}
