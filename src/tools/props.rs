//! Property test of the pipeline stages' failure documents: whatever envelope a stage
//! received, its failure keeps every other section, and a lock's lease survives it.

use proptest::prelude::*;
use serde_json::Value;

use crate::cli::envelope::{Stage, StageOf};
use crate::cli::props::{config, json_object};
use crate::cli::{Envelope, ErrorBody, Failure};

/// The three stages of the pipeline.
fn stages() -> Vec<&'static dyn Stage> {
    vec![
        &StageOf::<super::dream_gate::GateSection>::STAGE,
        &StageOf::<super::dream_lock::LockSection>::STAGE,
        &StageOf::<super::dream_run::run::RunSection>::STAGE,
    ]
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn a_failed_stage_keeps_every_other_section_and_a_lease(
        map in json_object(),
        at in any::<prop::sample::Index>(),
        interrupted in any::<bool>(),
    ) {
        let stages = stages();
        let stage = stages[at.index(stages.len())];
        let failure = if interrupted {
            Failure::interrupted(libc::SIGTERM)
        } else {
            Failure::bad_input("generated")
        };
        let section = stage.key();
        let document = stage.failed(Envelope::from_map(map.clone()), &failure);
        let out = document.as_object().expect("the failed document is an object");
        prop_assert_eq!(&out["error"], &serde_json::to_value(ErrorBody::of(&failure)).unwrap());
        for (k, v) in &map {
            if k != section && k != "error" {
                prop_assert_eq!(out.get(k), Some(v), "section {} changed", k);
            }
        }
        let own = out[section].as_object().expect("the stage's own section is an object");
        match section {
            "gate" => prop_assert_eq!(&own["due"], &Value::Bool(false)),
            "run" => prop_assert_eq!(
                own["status"].as_str(),
                Some(if interrupted { "aborted" } else { "failed" })
            ),
            _ => {
                // A lease stays, so a later release can still roll back.
                let token = map
                    .get("lock")
                    .and_then(|l| l.get("token"))
                    .filter(|_| map["lock"].is_object());
                match token {
                    Some(token) => {
                        prop_assert_eq!(own.get("token"), Some(token));
                        prop_assert_eq!(&own["released"], &Value::Bool(false));
                    }
                    None => prop_assert_eq!(&own["acquired"], &Value::Bool(false)),
                }
            }
        }
    }
}
