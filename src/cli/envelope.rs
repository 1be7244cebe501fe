//! The envelope: one JSON object passed down a pipeline. Each tool adds or replaces only its
//! own key and copies every other key through unchanged, in order.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::failure::ErrorBody;
use super::Failure;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope(Map<String, Value>);

/// What the earlier stages of a pipeline said (see [`Envelope::upstream`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Upstream {
    /// Every stage that ran said yes (or none ran): do this stage's work.
    Proceed,
    /// A stage said no or failed: pass the envelope through untouched and exit 1. The text is
    /// the one human line saying why.
    Declined(String),
}

/// How a run ended, as `run.status` says, and what `dream-lock release` does with it: the
/// one type dream-run writes and dream-lock reads (its `--outcome` takes the first three).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Free the lock; now is the new last-consolidated time.
    Completed,
    /// Roll back to the prior last-consolidated time, so the next gate can retry.
    Failed,
    /// Like `failed`: roll back.
    Aborted,
    /// `dream-run --propose`: nothing was consolidated, so a release rolls back.
    #[value(skip)]
    Proposed,
    /// Nothing to review (no sessions): no consolidation, rolled back.
    #[value(skip)]
    Skipped,
    /// The run changed nothing: no consolidation, rolled back.
    #[value(skip)]
    NoChanges,
    /// `dream-run --dry-run`: nothing was asked or written, so a release rolls back.
    #[value(skip)]
    DryRun,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Aborted => "aborted",
            RunStatus::Proposed => "proposed",
            RunStatus::Skipped => "skipped",
            RunStatus::NoChanges => "no_changes",
            RunStatus::DryRun => "dry_run",
        }
    }

    /// The statuses a run reports, as `run.status` spells them.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Aborted,
        RunStatus::Proposed,
        RunStatus::Skipped,
        RunStatus::NoChanges,
        RunStatus::DryRun,
    ];

    /// Whether a release rolls the lock back although the run did not fail: the run was
    /// no consolidation.
    pub fn is_no_consolidation(self) -> bool {
        matches!(
            self,
            RunStatus::Proposed | RunStatus::Skipped | RunStatus::NoChanges | RunStatus::DryRun
        )
    }
}

/// A JSON value as a message shows it: the value itself, with its type.
fn describe(value: &Value) -> String {
    if value.is_null() {
        return "null".into();
    }
    let mut text = value.to_string();
    if text.len() > 40 {
        let cut = (0..=40)
            .rev()
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push_str("...");
    }
    format!("{text} ({})", super::json::type_name(value))
}

impl Envelope {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_map(map: Map<String, Value>) -> Self {
        Envelope(map)
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// A section parsed into its typed form; a present section of the wrong shape is bad input.
    pub fn section<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Failure> {
        match self.0.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(value) => T::deserialize(value)
                .map(Some)
                .map_err(|e| Failure::bad_input(format!("envelope field `{key}`: {e}"))),
        }
    }

    /// What the earlier stages said, read strictly: a stage proceeds only on an explicit yes
    /// of the right JSON type (`gate.due == true`, `lock.acquired == true`). A top-level
    /// `error`, `gate.due == false` or `lock.acquired == false` declines (the envelope is passed
    /// through untouched, exit 1); any other value there (`"false"`, `0`, `null`, a missing
    /// field, a section that is not an object) is bad input, so a malformed envelope can never
    /// start a consolidation. A stage that did not run (no section) says nothing.
    pub fn upstream(&self) -> Result<Upstream, Failure> {
        if let Some(error) = self.0.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Ok(Upstream::Declined(format!(
                "passed through: an earlier stage failed: {message}"
            )));
        }
        for (section, field, said_no) in [
            ("gate", "due", "the gate said not due"),
            ("lock", "acquired", "the lock was not acquired"),
        ] {
            match self.flag(section, field)? {
                None | Some(true) => {}
                Some(false) => {
                    let why = self
                        .0
                        .get(section)
                        .and_then(|s| s.get("reason"))
                        .and_then(Value::as_str);
                    return Ok(Upstream::Declined(match why {
                        Some(why) => format!("passed through: {said_no} ({why})"),
                        None => format!("passed through: {said_no}"),
                    }));
                }
            }
        }
        Ok(Upstream::Proceed)
    }

    /// `section.field` when the section is present: it must be an object whose `field` is a
    /// boolean.
    fn flag(&self, section: &str, field: &str) -> Result<Option<bool>, Failure> {
        let Some(value) = self.0.get(section) else {
            return Ok(None);
        };
        match value.get(field) {
            Some(Value::Bool(flag)) if value.is_object() => Ok(Some(*flag)),
            other => Err(Failure::bad_input(format!(
                "envelope field `{section}.{field}` must be true or false, not {}",
                match other {
                    Some(v) => describe(v),
                    None if value.is_object() => "missing".to_string(),
                    None => format!("missing (`{section}` is {})", describe(value)),
                }
            ))),
        }
    }

    /// The envelope's `run.status`, read strictly: `None` when there is no `run` section; a
    /// present section must hold one of the known statuses as a string.
    pub fn run_status(&self) -> Result<Option<RunStatus>, Failure> {
        let Some(run) = self.0.get("run") else {
            return Ok(None);
        };
        let status = run.get("status").filter(|_| run.is_object());
        if let Some(Value::String(s)) = status {
            if let Some(known) = RunStatus::ALL.into_iter().find(|k| k.as_str() == s) {
                return Ok(Some(known));
            }
        }
        let names: Vec<String> = RunStatus::ALL
            .iter()
            .map(|k| format!("\"{}\"", k.as_str()))
            .collect();
        Err(Failure::bad_input(format!(
            "envelope field `run.status` must be one of {}, not {}",
            names.join(", "),
            status.map_or_else(|| "missing".to_string(), describe)
        )))
    }

    /// Compatibility with callers that only need a yes/no: anything but an explicit yes
    /// (including a mistyped envelope) declines. Prefer [`Envelope::upstream`], which tells
    /// bad input apart.
    pub fn upstream_declined(&self) -> bool {
        !matches!(self.upstream(), Ok(Upstream::Proceed))
    }

    /// Adds or replaces one section, keeping the position of a replaced key.
    pub fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_string(), value);
    }

    pub fn into_map(self) -> Map<String, Value> {
        self.0
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }

    /// The envelope as it will be printed with `key` set to a typed section (replaced in
    /// place, or appended), serialised directly without building a `Value` for it.
    pub fn with<'a, T: Serialize>(&'a self, key: &'a str, section: &'a T) -> WithSection<'a, T> {
        WithSection {
            envelope: self,
            key,
            section,
        }
    }
}

/// A pipeline stage's own section of the envelope (`gate`, `lock`, `run`): what the stage
/// prints under its key, and what a failure of the stage leaves there.
pub trait Section: Serialize + JsonSchema {
    /// The envelope key the stage owns.
    const KEY: &'static str;

    /// The section a failure leaves, given what the envelope held under [`Section::KEY`]:
    /// `dream-lock release` downstream must still find the lock's token and roll back.
    fn failed(held: Option<&Value>, failure: &Failure) -> Value;

    /// The schema of what [`Section::failed`] returns.
    fn failed_schema(generator: &mut SchemaGenerator) -> Schema;
}

/// A stage as the shared `main` sees it (object-safe, so a binary can name its stage in a
/// constant): [`StageOf`] adapts any [`Section`].
pub trait Stage: Sync {
    fn key(&self) -> &'static str;

    /// The document a failing stage prints: the envelope it received, its own section
    /// failed, and the failure at the top level.
    fn failed(&self, envelope: Envelope, failure: &Failure) -> Value;

    /// The schema of that document.
    fn failed_schema(&self, generator: &mut SchemaGenerator) -> Schema;
}

/// The [`Stage`] of a [`Section`].
pub struct StageOf<S>(std::marker::PhantomData<fn() -> S>);

impl<S> StageOf<S> {
    pub const STAGE: StageOf<S> = StageOf(std::marker::PhantomData);
}

impl<S: Section> Stage for StageOf<S> {
    fn key(&self) -> &'static str {
        S::KEY
    }

    fn failed(&self, envelope: Envelope, failure: &Failure) -> Value {
        let own = S::failed(envelope.0.get(S::KEY), failure);
        let mut map = envelope.0;
        map.insert(S::KEY.to_string(), own);
        map.insert("error".into(), json_value(&ErrorBody::of(failure)));
        Value::Object(map)
    }

    fn failed_schema(&self, generator: &mut SchemaGenerator) -> Schema {
        let own = S::failed_schema(generator);
        let error = generator.subschema_for::<ErrorBody>();
        let mut properties = Map::new();
        properties.insert(S::KEY.to_string(), own.to_value());
        properties.insert("error".into(), error.to_value());
        schema_object(properties, &[S::KEY, "error"])
    }
}

/// The envelope as a stage prints it: what it received, its own section set.
#[derive(Debug, Clone, PartialEq)]
pub struct Enveloped<S> {
    pub envelope: Envelope,
    pub section: S,
}

impl<S: Section> Serialize for Enveloped<S> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        self.envelope
            .with(S::KEY, &self.section)
            .serialize(serializer)
    }
}

impl<S: Section> JsonSchema for Enveloped<S> {
    fn schema_name() -> Cow<'static, str> {
        format!("Envelope_{}", S::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let mut properties = Map::new();
        properties.insert(
            S::KEY.to_string(),
            generator.subschema_for::<S>().to_value(),
        );
        schema_object(properties, &[S::KEY])
    }
}

/// A stage that failed but keeps the envelope flowing (exit 3 or 4): the envelope with what
/// the stage added before the failure, its own section failed, and the failure.
#[derive(Debug, Clone, PartialEq)]
pub struct StageFailed<S> {
    pub envelope: Envelope,
    pub failure: Failure,
    section: std::marker::PhantomData<fn() -> S>,
}

impl<S> StageFailed<S> {
    pub fn new(envelope: Envelope, failure: Failure) -> Self {
        StageFailed {
            envelope,
            failure,
            section: std::marker::PhantomData,
        }
    }
}

impl<S: Section> Serialize for StageFailed<S> {
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        StageOf::<S>::STAGE
            .failed(self.envelope.clone(), &self.failure)
            .serialize(serializer)
    }
}

impl<S: Section> JsonSchema for StageFailed<S> {
    fn schema_name() -> Cow<'static, str> {
        format!("Failed_{}", S::schema_name()).into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        StageOf::<S>::STAGE.failed_schema(generator)
    }
}

/// An envelope: an object holding these sections, and whatever earlier stages put beside
/// them (passed through untouched).
fn schema_object(properties: Map<String, Value>, required: &[&str]) -> Schema {
    let mut object = Map::new();
    object.insert("type".into(), "object".into());
    object.insert("properties".into(), Value::Object(properties));
    object.insert(
        "required".into(),
        Value::Array(required.iter().map(|k| Value::from(*k)).collect()),
    );
    Schema::from(object)
}

/// A typed section as a JSON value. The sections are plain data: serialising cannot fail.
pub fn json_value(section: &impl Serialize) -> Value {
    serde_json::to_value(section).unwrap_or(Value::Null)
}

/// `failed`, written over what the envelope held under the key (each field replaced in place,
/// the others kept): a failed release keeps acquire's token for a retry.
pub fn over_held(held: Option<&Value>, failed: &impl Serialize) -> Value {
    let mut own = match held {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    };
    if let Value::Object(fields) = json_value(failed) {
        for (key, value) in fields {
            own.insert(key, value);
        }
    }
    Value::Object(own)
}

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// An envelope is an object; what each stage puts in it is described by the stage's own
/// section type.
impl JsonSchema for Envelope {
    fn schema_name() -> Cow<'static, str> {
        "Envelope".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        schemars::json_schema!({ "type": "object" })
    }
}

/// See [`Envelope::with`].
pub struct WithSection<'a, T> {
    envelope: &'a Envelope,
    key: &'a str,
    section: &'a T,
}

impl<T: Serialize> Serialize for WithSection<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let replaces = self.envelope.0.contains_key(self.key);
        let len = self.envelope.0.len() + usize::from(!replaces);
        let mut map = serializer.serialize_map(Some(len))?;
        for (k, v) in &self.envelope.0 {
            if k == self.key {
                map.serialize_entry(k, self.section)?;
            } else {
                map.serialize_entry(k, v)?;
            }
        }
        if !replaces {
            map.serialize_entry(self.key, self.section)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_keys_pass_through_in_order_and_own_key_is_replaced_in_place() {
        let Value::Object(map) = json!({"zeta": 1, "gate": {"old": true}, "alpha": {"x": [1,2]}})
        else {
            unreachable!()
        };
        let mut env = Envelope::from_map(map);
        env.set("gate", json!({"due": true}));
        env.set("project", json!({"cwd": "/p"}));
        assert_eq!(
            serde_json::to_string(&env.into_value()).unwrap(),
            r#"{"zeta":1,"gate":{"due":true},"alpha":{"x":[1,2]},"project":{"cwd":"/p"}}"#
        );
    }

    #[test]
    fn typed_section_is_written_in_place_or_appended() {
        #[derive(serde::Serialize)]
        struct Gate {
            due: bool,
        }
        let Value::Object(map) = json!({"a": 1, "gate": {"old": 1}, "z": 2}) else {
            unreachable!()
        };
        let env = Envelope::from_map(map);
        let gate = Gate { due: true };
        assert_eq!(
            serde_json::to_string(&env.with("gate", &gate)).unwrap(),
            r#"{"a":1,"gate":{"due":true},"z":2}"#
        );
        assert_eq!(
            serde_json::to_string(&env.with("lock", &gate)).unwrap(),
            r#"{"a":1,"gate":{"old":1},"z":2,"lock":{"due":true}}"#
        );
    }

    fn env(v: Value) -> Envelope {
        match v {
            Value::Object(m) => Envelope::from_map(m),
            _ => unreachable!(),
        }
    }

    #[test]
    fn declined_stages() {
        let proceed = |v: Value| env(v).upstream().unwrap() == Upstream::Proceed;
        assert!(proceed(json!({})));
        assert!(proceed(json!({"gate": {"due": true}})));
        assert!(proceed(
            json!({"gate": {"due": true}, "lock": {"acquired": true}})
        ));
        let declined = |v: Value| match env(v).upstream().unwrap() {
            Upstream::Declined(why) => why,
            Upstream::Proceed => panic!("proceeded"),
        };
        assert_eq!(
            declined(json!({"gate": {"due": false, "reason": "too_soon"}})),
            "passed through: the gate said not due (too_soon)"
        );
        assert_eq!(
            declined(json!({"lock": {"acquired": false}})),
            "passed through: the lock was not acquired"
        );
        assert_eq!(
            declined(json!({"error": {"kind": "usage", "message": "m"}})),
            "passed through: an earlier stage failed: m"
        );
        assert!(env(json!({"gate": {"due": false}})).upstream_declined());
    }

    #[test]
    fn only_an_explicit_yes_of_the_right_type_proceeds() {
        for bad in [
            json!({"gate": {"due": "false"}}),
            json!({"gate": {"due": "true"}}),
            json!({"gate": {"due": 0}}),
            json!({"gate": {"due": 1}}),
            json!({"gate": {"due": null}}),
            json!({"gate": {}}),
            json!({"gate": []}),
            json!({"gate": true}),
            json!({"gate": null}),
            json!({"gate": {"due": true}, "lock": {"acquired": "yes"}}),
            json!({"lock": {}}),
            json!({"lock": [true]}),
        ] {
            let err = env(bad.clone()).upstream().unwrap_err();
            assert_eq!(err.kind(), "bad_input", "{bad}");
            assert!(env(bad.clone()).upstream_declined(), "{bad}");
        }
        let err = env(json!({"gate": {"due": "false"}}))
            .upstream()
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "envelope field `gate.due` must be true or false, not \"false\" (a string)"
        );
    }

    #[test]
    fn run_status_is_read_strictly() {
        assert_eq!(env(json!({})).run_status().unwrap(), None);
        assert_eq!(
            env(json!({"run": {"status": "completed"}}))
                .run_status()
                .unwrap(),
            Some(RunStatus::Completed)
        );
        assert_eq!(
            env(json!({"run": {"status": "aborted"}}))
                .run_status()
                .unwrap(),
            Some(RunStatus::Aborted)
        );
        assert_eq!(
            env(json!({"run": {"status": "proposed"}}))
                .run_status()
                .unwrap(),
            Some(RunStatus::Proposed)
        );
        assert_eq!(
            env(json!({"run": {"status": "no_changes"}}))
                .run_status()
                .unwrap(),
            Some(RunStatus::NoChanges)
        );
        assert_eq!(
            env(json!({"run": {"status": "dry_run"}}))
                .run_status()
                .unwrap(),
            Some(RunStatus::DryRun)
        );
        for bad in [
            json!({"run": {"status": "running"}}),
            json!({"run": {"status": 0}}),
            json!({"run": {"status": null}}),
            json!({"run": {}}),
            json!({"run": "completed"}),
            json!({"run": null}),
        ] {
            let err = env(bad.clone()).run_status().unwrap_err();
            assert_eq!(err.kind(), "bad_input", "{bad}");
        }
    }

    #[test]
    fn mistyped_section_is_bad_input() {
        #[derive(Debug, serde::Deserialize)]
        struct P {
            #[allow(dead_code)]
            cwd: String,
        }
        let Value::Object(map) = json!({"project": {"cwd": 5}}) else {
            unreachable!()
        };
        let err = Envelope::from_map(map).section::<P>("project").unwrap_err();
        assert_eq!(err.kind(), "bad_input");
        assert!(err.to_string().contains("project"), "{err}");
    }
}
