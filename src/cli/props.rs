//! Property tests of what reads the world's JSON: stdin's classification (`Input::parse`) and
//! the envelope (pass-through, the upstream rule, `run.status`; the stages' failed documents are
//! in `tools::props`), each
//! against a plain reference. Shared generators and the case count live here too.
//!
//! Case count: `PROPTEST_CASES` when set (`make fuzz` sets 100,000), else each property's own
//! modest default, so `make test` spends a few seconds on the whole set.

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value};

use super::input::Input;
use super::{Envelope, RunStatus, Upstream};

/// The configuration of every property: `default` cases unless `PROPTEST_CASES` says
/// otherwise; no regression files written into the source tree (a failure prints its
/// minimal input, which becomes a plain unit test).
pub(crate) fn config(default: u32) -> Config {
    let mut config = Config::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = default;
    }
    config.failure_persistence = None;
    config
}

/// Keys the tools read, and a few that nobody does.
const KEYS: &[&str] = &[
    "gate",
    "lock",
    "run",
    "error",
    "due",
    "acquired",
    "released",
    "reason",
    "token",
    "status",
    "message",
    "hook_event_name",
    "session_id",
    "transcript_path",
    "cwd",
    "permission_mode",
    "last_assistant_message",
    "stop_hook_active",
    "x",
];

pub(crate) fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(str::to_string),
        1 => ".{0,6}",
    ]
}

/// Any JSON value, a few levels deep, with the strings and numbers that trip readers.
pub(crate) fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        prop::sample::select(vec![
            "true",
            "false",
            "0",
            "",
            "completed",
            "failed",
            "aborted",
            "proposed",
            "skipped",
            "no_changes",
            "Stop",
            "/p",
        ])
        .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

pub(crate) fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::vec((key(), json_value()), 0..8).prop_map(|pairs| pairs.into_iter().collect())
}

/// Bytes of a JSON-ish document: real objects, their truncations and splices, lone
/// surrogate escapes, random bytes.
fn stdin_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_object().prop_map(|m| Value::Object(m).to_string().into_bytes()),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (json_object(), any::<prop::sample::Index>()).prop_map(|(m, at)| {
            let text = Value::Object(m).to_string().into_bytes();
            text[..at.index(text.len() + 1)].to_vec()
        }),
        (
            "[ \t\r\n]{0,4}",
            "(\\\\u[dD][89abAB][0-9a-f]{2}|\\\\u[dD][c-fC-F][0-9a-f]{2}|[a-z\"\\\\]){0,6}"
        )
            .prop_map(
                |(space, escapes)| format!("{space}{{\"k\":\"{escapes}\"}}{space}").into_bytes()
            ),
        "[ \t\r\n]{0,6}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

/// The upstream rule, as SPEC states it: an `error` declines; a present `gate` / `lock`
/// proceeds only on an object whose `due` / `acquired` is `true`, declines on `false`, and is
/// bad input otherwise (checked in that order).
fn reference_upstream(map: &Map<String, Value>) -> Result<bool, ()> {
    if map.contains_key("error") {
        return Ok(false);
    }
    for (section, field) in [("gate", "due"), ("lock", "acquired")] {
        match map.get(section) {
            None => {}
            Some(Value::Object(s)) => match s.get(field) {
                Some(Value::Bool(true)) => {}
                Some(Value::Bool(false)) => return Ok(false),
                _ => return Err(()),
            },
            Some(_) => return Err(()),
        }
    }
    Ok(true)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn stdin_is_nothing_a_hook_an_envelope_or_bad_input_never_a_panic(bytes in stdin_bytes()) {
        let parsed = Input::parse(&bytes);
        let blank = bytes.iter().all(u8::is_ascii_whitespace);
        let value = super::json::from_slice::<Value>(&bytes).ok();
        match (parsed, value) {
            (Ok(Input::Nothing), _) => prop_assert!(blank),
            (Ok(Input::Hook(map)), Some(Value::Object(seen))) => {
                prop_assert!(map.contains_key("hook_event_name"));
                prop_assert_eq!(map, seen);
            }
            (Ok(Input::Envelope(env)), Some(Value::Object(seen))) => {
                prop_assert!(!seen.contains_key("hook_event_name"));
                prop_assert_eq!(env, Envelope::from_map(seen));
            }
            (Err(failure), value) => {
                prop_assert!(!blank);
                prop_assert!(!matches!(value, Some(Value::Object(_))));
                prop_assert_eq!(failure.kind(), "bad_input");
                prop_assert_eq!(failure.exit().code(), 2);
            }
            (other, value) => prop_assert!(false, "{:?} from {:?}", other, value),
        }
    }

    #[test]
    fn a_section_is_replaced_in_place_or_appended_and_every_other_key_passes_through(
        map in json_object(),
        key in key(),
        section in json_value(),
    ) {
        let envelope = Envelope::from_map(map.clone());
        let printed = serde_json::to_string(&envelope.with(&key, &section)).unwrap();
        // The reference: an insertion into an order-keeping map, printed (compared as text:
        // parsing it back would round some floats).
        let mut expected = map.clone();
        expected.insert(key.clone(), section.clone());
        prop_assert_eq!(&printed, &Value::Object(expected).to_string());
        let mut set = envelope;
        set.set(&key, section);
        let set = set.into_value();
        prop_assert_eq!(set.to_string(), printed);
    }

    #[test]
    fn only_explicit_yeses_of_the_right_type_proceed(map in json_object()) {
        let envelope = Envelope::from_map(map.clone());
        match (envelope.upstream(), reference_upstream(&map)) {
            (Ok(Upstream::Proceed), Ok(true)) => prop_assert!(!envelope.upstream_declined()),
            (Ok(Upstream::Declined(why)), Ok(false)) => {
                prop_assert!(why.starts_with("passed through: "));
                prop_assert!(!why.contains('\n'));
                prop_assert!(envelope.upstream_declined());
            }
            (Err(failure), Err(())) => {
                prop_assert_eq!(failure.kind(), "bad_input");
                prop_assert!(envelope.upstream_declined());
            }
            (got, want) => prop_assert!(false, "{:?} where the rule says {:?}", got, want),
        }
    }

    #[test]
    fn run_status_is_one_of_the_known_strings_or_bad_input(map in json_object()) {
        let envelope = Envelope::from_map(map.clone());
        let expected = match map.get("run") {
            None => Ok(None),
            Some(run) => run
                .as_object()
                .and_then(|run| run.get("status"))
                .and_then(Value::as_str)
                .and_then(|s| RunStatus::ALL.into_iter().find(|k| k.as_str() == s))
                .map(Some)
                .ok_or(()),
        };
        match envelope.run_status() {
            Ok(status) => prop_assert_eq!(Ok(status), expected),
            Err(failure) => {
                prop_assert_eq!(expected, Err(()));
                prop_assert_eq!(failure.kind(), "bad_input");
            }
        }
    }
}
