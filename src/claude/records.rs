//! The records dreamkit appends to a session transcript (`away_summary`, `memory_saved`),
//! shaped as Claude Code 2.1.332 writes its own: the record's own fields plus the ones the
//! client puts on every record, copied from the transcript's newest record. `parentUuid` is
//! what keeps the record: the client resumes the conversation from the newest record on the
//! chain, and a record whose parent names no record is not shown.

use serde::Serialize;

use super::transcript::Record;

/// The fields Claude Code writes on every record, as the transcript's newest records have
/// them. Fill it with [`ClientFields::note`], newest record first.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientFields {
    /// The uuid of the newest record that has one (the chain's last link).
    pub parent_uuid: Option<String>,
    pub is_sidechain: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entrypoint: Option<String>,
    pub cwd: Option<String>,
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub git_branch: Option<String>,
}

impl ClientFields {
    /// Takes what `record` has and nothing newer had; call it newest record first. Returns
    /// whether every field is known (reading further back changes nothing).
    pub fn note(&mut self, record: &Record) -> bool {
        fn fill(slot: &mut Option<String>, value: &Option<String>) {
            if slot.is_none() {
                slot.clone_from(value);
            }
        }
        fill(&mut self.parent_uuid, &record.uuid);
        // The common fields belong to the records of the chain (those with a uuid).
        if record.uuid.is_some() {
            fill(&mut self.user_type, &record.user_type);
            fill(&mut self.entrypoint, &record.entrypoint);
            fill(&mut self.cwd, &record.cwd);
            fill(&mut self.session_id, &record.session_id);
            fill(&mut self.version, &record.version);
            fill(&mut self.git_branch, &record.git_branch);
        }
        self.parent_uuid.is_some()
            && self.user_type.is_some()
            && self.entrypoint.is_some()
            && self.cwd.is_some()
            && self.session_id.is_some()
            && self.version.is_some()
            && self.git_branch.is_some()
    }
}

/// `{type: "system", subtype: "away_summary", content, ...}`: the away summary (`recap
/// --auto`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AwaySummary<'a> {
    #[serde(flatten)]
    pub client: &'a ClientFields,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub subtype: &'static str,
    pub content: &'a str,
    pub is_meta: bool,
    pub timestamp: &'a str,
    pub uuid: &'a str,
}

impl<'a> AwaySummary<'a> {
    pub fn new(
        client: &'a ClientFields,
        content: &'a str,
        timestamp: &'a str,
        uuid: &'a str,
    ) -> Self {
        AwaySummary {
            client,
            kind: "system",
            subtype: "away_summary",
            content,
            is_meta: false,
            timestamp,
            uuid,
        }
    }
}

/// `{type: "system", subtype: "memory_saved", writtenPaths, verb: "Improved", ...}`: memory
/// a consolidation changed (`dream-run --notify-transcript`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemorySaved<'a> {
    #[serde(flatten)]
    pub client: &'a ClientFields,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub subtype: &'static str,
    pub written_paths: &'a [String],
    pub verb: &'static str,
    pub is_meta: bool,
    pub timestamp: &'a str,
    pub uuid: &'a str,
}

impl<'a> MemorySaved<'a> {
    pub fn new(
        client: &'a ClientFields,
        written_paths: &'a [String],
        timestamp: &'a str,
        uuid: &'a str,
    ) -> Self {
        MemorySaved {
            client,
            kind: "system",
            subtype: "memory_saved",
            written_paths,
            verb: "Improved",
            is_meta: false,
            timestamp,
            uuid,
        }
    }
}

/// The record as one line, newline included, for a single `O_APPEND` write.
pub fn line(record: &impl Serialize) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(json: &str) -> Record {
        Record::parse(json.as_bytes()).expect("record")
    }

    #[test]
    fn the_client_fields_come_from_the_newest_chain_records() {
        let mut fields = ClientFields::default();
        // Newest first: a record off the chain (no uuid) gives nothing but is skipped.
        let newest_first = [
            record(r#"{"type":"last-prompt","sessionId":"other","cwd":"/elsewhere"}"#),
            record(
                r#"{"type":"system","subtype":"stop_hook_summary","uuid":"s9","sessionId":"S","cwd":"/p","userType":"external","entrypoint":"cli","version":"2.1.332"}"#,
            ),
            record(r#"{"type":"assistant","uuid":"a8","gitBranch":"main","version":"2.1.300"}"#),
        ];
        let mut done = false;
        for r in &newest_first {
            done = fields.note(r);
        }
        assert!(done);
        assert_eq!(fields.parent_uuid.as_deref(), Some("s9"));
        assert_eq!(fields.session_id.as_deref(), Some("S"));
        assert_eq!(fields.cwd.as_deref(), Some("/p"));
        assert_eq!(fields.version.as_deref(), Some("2.1.332"));
        assert_eq!(fields.git_branch.as_deref(), Some("main"));
        let written = ["/m/a.md".to_string()];
        let saved = MemorySaved::new(&fields, &written, "2026-12-03T10:00:00.000Z", "u1");
        let value = serde_json::to_value(&saved).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"parentUuid": "s9", "isSidechain": false, "userType": "external",
                "entrypoint": "cli", "cwd": "/p", "sessionId": "S", "version": "2.1.332",
                "gitBranch": "main", "type": "system", "subtype": "memory_saved",
                "writtenPaths": ["/m/a.md"], "verb": "Improved", "isMeta": false,
                "timestamp": "2026-12-03T10:00:00.000Z", "uuid": "u1"})
        );
        // Unknown fields stay absent rather than null; the chain's fields are always there.
        let bare = ClientFields::default();
        let away = serde_json::to_value(AwaySummary::new(&bare, "text", "t", "u2")).unwrap();
        assert_eq!(
            away,
            serde_json::json!({"parentUuid": null, "isSidechain": false, "cwd": null,
                "sessionId": null, "type": "system", "subtype": "away_summary",
                "content": "text", "isMeta": false, "timestamp": "t", "uuid": "u2"})
        );
    }
}
