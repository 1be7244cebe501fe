//! The envelope: one JSON object passed down a pipeline. Each tool adds or replaces only its
//! own key and copies every other key through unchanged, in order.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::Failure;

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

    /// Adds or replaces one section, keeping the position of a replaced key.
    pub fn set(&mut self, key: &str, value: Value) {
        self.0.insert(key.to_string(), value);
    }

    pub fn into_value(self) -> Value {
        Value::Object(self.0)
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
