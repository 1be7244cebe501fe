//! A snapshot of the process environment, so that resolution rules are plain functions
//! that unit tests can drive without touching the real environment.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};

#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<OsString, OsString>,
}

impl Env {
    pub fn from_process() -> Self {
        Env {
            vars: std::env::vars_os().collect(),
        }
    }

    /// For tests: exactly these variables, nothing else.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Env {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
        }
    }

    /// Every variable (in no particular order): what a child started for the user inherits.
    pub fn vars(&self) -> impl Iterator<Item = (&OsStr, &OsStr)> {
        self.vars
            .iter()
            .map(|(k, v)| (k.as_os_str(), v.as_os_str()))
    }

    /// The value, treating an empty variable as unset (as Claude Code does for paths).
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .get(OsStr::new(name))
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    /// Whether the variable is set at all, even to the empty string (which is how a user
    /// declares "no credential needed").
    pub fn is_set(&self, name: &str) -> bool {
        self.vars.contains_key(OsStr::new(name))
    }

    /// `1`, `true`, `yes`, `on` (any case, surrounding blanks ignored).
    pub fn is_truthy(&self, name: &str) -> bool {
        self.word(name)
            .is_some_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on"))
    }

    /// Set, and explicitly `0`, `false`, `no` or `off`.
    pub fn is_defined_falsy(&self, name: &str) -> bool {
        self.word(name)
            .is_some_and(|v| matches!(v.as_str(), "0" | "false" | "no" | "off"))
    }

    fn word(&self, name: &str) -> Option<String> {
        self.get(name)
            .map(|v| v.to_string_lossy().trim().to_ascii_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_and_falsy_words() {
        let env = Env::from_pairs([("A", "TRUE"), ("B", " off "), ("C", "maybe"), ("D", "")]);
        assert!(env.is_truthy("A"));
        assert!(!env.is_defined_falsy("A"));
        assert!(env.is_defined_falsy("B"));
        assert!(!env.is_truthy("C") && !env.is_defined_falsy("C"));
        assert!(env.get("D").is_none());
        assert!(!env.is_truthy("MISSING"));
    }
}
