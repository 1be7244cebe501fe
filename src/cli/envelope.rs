//! The envelope: one JSON object passed down a pipeline. Each tool adds or replaces only its
//! own key and copies every other key through unchanged, in order.

use serde::de::DeserializeOwned;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

use super::{Diag, Failure, Outcome};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Envelope(Map<String, Value>);

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

    /// An earlier stage said no or failed: a top-level `error`, `gate.due == false` or
    /// `lock.acquired == false`. Such an envelope is passed through untouched (exit 1), so a
    /// pipeline never consolidates by accident.
    pub fn upstream_declined(&self) -> bool {
        let is_false = |section: &str, key: &str| {
            self.0.get(section).and_then(|s| s.get(key)) == Some(&Value::Bool(false))
        };
        self.0.contains_key("error") || is_false("gate", "due") || is_false("lock", "acquired")
    }

    /// Adds or replaces one section, keeping the position of a replaced key.
    pub fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_string(), value);
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
    }

    /// A stage failed on its environment (exit 3): the envelope still flows, with the stage's
    /// `key` set to `section` plus `error: {kind, message}`, so a later stage sees the failure
    /// and does nothing. Usage and input failures are returned as they are (exit 2, no
    /// envelope).
    pub fn fail_stage(
        mut self,
        key: &str,
        mut section: Value,
        failure: Failure,
        diag: &Diag,
    ) -> Result<Outcome, Failure> {
        if !matches!(failure, Failure::Environment(_)) {
            return Err(failure);
        }
        diag.warn(&failure.to_string());
        if let Value::Object(map) = &mut section {
            map.insert("error".into(), failure.to_json());
        }
        self.set(key, section);
        Ok(Outcome::new(failure.exit(), &self))
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

impl Serialize for Envelope {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
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

    #[test]
    fn an_environment_failure_keeps_the_envelope_flowing() {
        let Value::Object(map) = json!({"trace": 1}) else {
            unreachable!()
        };
        let diag = Diag::new("t", true, false);
        let env = Envelope::from_map(map);
        let out = env
            .clone()
            .fail_stage(
                "gate",
                json!({"due": false}),
                Failure::environment("disk"),
                &diag,
            )
            .unwrap();
        assert_eq!(out.exit.code(), 3);
        assert_eq!(
            out.json.as_deref(),
            Some(
                r#"{"trace":1,"gate":{"due":false,"error":{"kind":"environment","message":"disk"}}}"#
            )
        );
        let usage = env.fail_stage("gate", json!({}), Failure::Usage("u".into()), &diag);
        assert_eq!(usage.unwrap_err().kind(), "usage");
    }

    #[test]
    fn declined_stages() {
        let env = |v: Value| match v {
            Value::Object(m) => Envelope::from_map(m),
            _ => unreachable!(),
        };
        assert!(!env(json!({})).upstream_declined());
        assert!(!env(json!({"gate": {"due": true}})).upstream_declined());
        assert!(env(json!({"gate": {"due": false}})).upstream_declined());
        assert!(env(json!({"lock": {"acquired": false}})).upstream_declined());
        assert!(env(json!({"error": {"kind": "usage"}})).upstream_declined());
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
