//! Enablement and the suppression reasons checked before any model call, and the facts of the
//! transcript they need (read backwards from the end, with the recent conversation).

use std::collections::HashSet;
use std::path::Path;

use crate::claude::transcript::{context_line, BackwardReader, Item, ReadAt, Record, Usage};
use crate::claude::{Env, Settings};

/// The switch that decides either way, before the settings.
pub const SWITCH: &str = "CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION";
/// The recent conversation sent to the model: at most this many messages.
pub const CONTEXT_MESSAGES: usize = 20;
/// Each message in the context is cut to this many characters.
const MESSAGE_CHARS: usize = 1000;
/// How far back from the end the reader may go, whatever the file's size.
pub const SCAN_BUDGET_BYTES: u64 = 8 * 1024 * 1024;
/// Above this many uncached tokens (input + cache writes + output) in the last turn, the
/// prompt cache is cold and a suggestion would cost a full-price request.
pub const MAX_UNCACHED_TOKENS: u64 = 10_000;

/// Every suppression reason, in the order they are checked.
pub const REASONS: &[&str] = &[
    "disabled",
    "early_conversation",
    "last_response_error",
    "pending_permission",
    "elicitation_active",
    "plan_mode",
    "rate_limit",
    "cache_cold",
];

/// `CLAUDE_CODE_ENABLE_PROMPT_SUGGESTION` (true or false) decides; then
/// `promptSuggestionEnabled`; on by default.
pub fn enabled(env: &Env, settings: &Settings) -> bool {
    if env.is_truthy(SWITCH) {
        return true;
    }
    if env.is_defined_falsy(SWITCH) {
        return false;
    }
    settings.prompt_suggestion_enabled != Some(false)
}

/// Which rule decided [`enabled`], for `-v`.
pub fn enablement_source(env: &Env, settings: &Settings) -> String {
    let on_off = |on: bool| if on { "on" } else { "off" };
    if env.is_truthy(SWITCH) || env.is_defined_falsy(SWITCH) {
        return format!("{} ({SWITCH})", on_off(env.is_truthy(SWITCH)));
    }
    match settings.prompt_suggestion_enabled {
        Some(on) => format!("{} (promptSuggestionEnabled)", on_off(on)),
        None => "on (the default)".to_string(),
    }
}

/// What the end of a transcript says.
#[derive(Debug, Default)]
pub struct Conversation {
    /// Oldest first: `User: ...`, `Assistant: ...`, `Assistant called Bash(ls)`.
    pub messages: Vec<String>,
    /// Assistant turns since the start or the last compact boundary, counted once per
    /// `message.id` (a record without one counts alone); counting stops at 2.
    pub assistant_turns: usize,
    /// The last assistant record is an API error.
    pub last_is_error: bool,
    /// Usage of the last assistant turn (field by field, the largest its records show).
    pub last_usage: Option<Usage>,
    pub session_id: Option<String>,
    /// The reading stopped at the byte budget, not at the start or a compact boundary.
    pub cut_by_budget: bool,
}

impl Conversation {
    /// Reads backwards until it has the context and the facts, or hits the budget.
    pub fn read(path: &Path) -> std::io::Result<Conversation> {
        Conversation::from_reader(BackwardReader::open(path)?)
    }

    /// As [`Conversation::read`], from a reader the caller opened.
    pub fn from_reader<F: ReadAt>(reader: BackwardReader<F>) -> std::io::Result<Conversation> {
        let file_len = reader.file_len();
        let mut conv = Conversation::default();
        let mut newest_first: Vec<String> = Vec::new();
        let mut current_id: Option<String> = None;
        let mut turn_ids: HashSet<String> = HashSet::new();
        let mut last_turn_id: Option<Option<String>> = None;
        for entry in reader {
            let entry = entry?;
            if file_len - entry.offset > SCAN_BUDGET_BYTES {
                conv.cut_by_budget = true;
                break;
            }
            let Item::Record(record) = entry.item else {
                continue;
            };
            if conv.session_id.is_none() {
                conv.session_id.clone_from(&record.session_id);
            }
            if record.kind == "system" && record.subtype.as_deref() == Some("compact_boundary") {
                // What came before was compacted away: the conversation restarts here.
                break;
            }
            if record.kind == "assistant" && record.is_sidechain != Some(true) {
                let id = record.message.as_ref().and_then(|m| m.id.clone());
                match &last_turn_id {
                    None => {
                        conv.last_is_error = record.is_api_error();
                        last_turn_id = Some(id.clone());
                        conv.note_usage(&record);
                    }
                    Some(last) if id.is_some() && *last == id => conv.note_usage(&record),
                    Some(_) => {}
                }
                let new_turn = match &id {
                    Some(id) => turn_ids.insert(id.clone()),
                    None => true,
                };
                if new_turn && conv.assistant_turns < 2 {
                    conv.assistant_turns += 1;
                }
            }
            if let Some((id, line)) = context_line(&record, MESSAGE_CHARS) {
                // Records of one API response share message.id: one message, blocks in order.
                let same_response = id.is_some() && id == current_id;
                let room = newest_first.len() < CONTEXT_MESSAGES;
                match newest_first.last_mut() {
                    Some(newer) if same_response => *newer = format!("{line}\n{newer}"),
                    _ if room => newest_first.push(line),
                    _ => {}
                }
                current_id = id;
            }
            if newest_first.len() >= CONTEXT_MESSAGES && conv.assistant_turns >= 2 {
                break;
            }
        }
        newest_first.reverse();
        conv.messages = newest_first;
        Ok(conv)
    }

    fn note_usage(&mut self, record: &Record) {
        let Some(usage) = record.message.as_ref().and_then(|m| m.usage) else {
            return;
        };
        let known = self.last_usage.get_or_insert_with(Usage::default);
        known.input_tokens = known.input_tokens.max(usage.input_tokens);
        known.output_tokens = known.output_tokens.max(usage.output_tokens);
        known.cache_creation_input_tokens = known
            .cache_creation_input_tokens
            .max(usage.cache_creation_input_tokens);
        known.cache_read_input_tokens = known
            .cache_read_input_tokens
            .max(usage.cache_read_input_tokens);
    }

    /// Uncached input + cache writes + output of the last assistant turn.
    pub fn last_uncached_tokens(&self) -> u64 {
        self.last_usage.map_or(0, |u| {
            u.input_tokens
                .saturating_add(u.cache_creation_input_tokens)
                .saturating_add(u.output_tokens)
        })
    }
}

/// The states a transcript cannot show, from flags and the hook payload.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveState {
    pub pending_permission: bool,
    pub elicitation: bool,
    pub plan_mode: bool,
    pub rate_limited: bool,
}

/// The first suppression reason that applies after `disabled`, with a human detail.
pub fn suppression(conv: &Conversation, live: LiveState) -> Option<(&'static str, String)> {
    if conv.assistant_turns < 2 && !conv.cut_by_budget {
        let turns = if conv.assistant_turns == 1 {
            "1 assistant turn"
        } else {
            "no assistant turn"
        };
        return Some(("early_conversation", format!("{turns}; needs 2")));
    }
    if conv.last_is_error {
        return Some((
            "last_response_error",
            "the last assistant record is an API error".into(),
        ));
    }
    if live.pending_permission {
        return Some((
            "pending_permission",
            "a permission prompt is waiting".into(),
        ));
    }
    if live.elicitation {
        return Some((
            "elicitation_active",
            "a question is waiting for an answer".into(),
        ));
    }
    if live.plan_mode {
        return Some(("plan_mode", "the session is in plan mode".into()));
    }
    if live.rate_limited {
        return Some(("rate_limit", "the account is rate-limited".into()));
    }
    let uncached = conv.last_uncached_tokens();
    if uncached > MAX_UNCACHED_TOKENS {
        return Some((
            "cache_cold",
            format!(
                "the last turn's uncached input, cache writes and output are {uncached} tokens \
                 (over {MAX_UNCACHED_TOKENS})"
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(lines: &[&str]) -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("t.jsonl");
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        (tmp, path)
    }

    const USER: &str =
        r#"{"type":"user","sessionId":"s1","message":{"role":"user","content":"go"}}"#;

    fn assistant(id: &str, text: &str, input: u64, output: u64) -> String {
        format!(
            r#"{{"type":"assistant","sessionId":"s1","message":{{"id":"{id}","content":[{{"type":"text","text":"{text}"}}],"usage":{{"input_tokens":{input},"output_tokens":{output},"cache_creation_input_tokens":0,"cache_read_input_tokens":9}}}}}}"#
        )
    }

    #[test]
    fn turns_are_counted_once_per_message_id() {
        let a1 = assistant("m1", "one", 1, 1);
        let a1b = assistant("m1", "more of one", 1, 1);
        let (_t, path) = write(&[USER, &a1, &a1b, r#"{"type":"cost-state"}"#]);
        let c = Conversation::read(&path).unwrap();
        assert_eq!(c.assistant_turns, 1);
        assert_eq!(
            c.messages,
            ["User: go", "Assistant: one\nAssistant: more of one"]
        );
        assert_eq!(c.session_id.as_deref(), Some("s1"));
        let a2 = assistant("m2", "two", 8000, 2001);
        let (_t, path) = write(&[USER, &a1, &a1b, USER, &a2]);
        let c = Conversation::read(&path).unwrap();
        assert_eq!(c.assistant_turns, 2);
        assert_eq!(c.last_uncached_tokens(), 10_001);
        assert!(!c.last_is_error);
    }

    #[test]
    fn a_compact_boundary_restarts_the_count() {
        let a1 = assistant("m1", "one", 1, 1);
        let a2 = assistant("m2", "two", 1, 1);
        let a3 = assistant("m3", "three", 1, 1);
        let boundary = r#"{"type":"system","subtype":"compact_boundary"}"#;
        let (_t, path) = write(&[USER, &a1, USER, &a2, boundary, USER, &a3]);
        let c = Conversation::read(&path).unwrap();
        assert_eq!(c.assistant_turns, 1);
        assert_eq!(
            suppression(&c, LiveState::default()).map(|s| s.0),
            Some("early_conversation")
        );
    }

    /// A huge virtual file: filler lines, then `tail`; counts the bytes read.
    struct Huge {
        tail: Vec<u8>,
        len: u64,
        read: std::cell::Cell<u64>,
    }

    impl ReadAt for &Huge {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
            self.read.set(self.read.get() + buf.len() as u64);
            let tail_start = self.len - self.tail.len() as u64;
            for (i, b) in buf.iter_mut().enumerate() {
                let pos = offset + i as u64;
                *b = match pos.checked_sub(tail_start) {
                    Some(at) => self.tail[at as usize],
                    None if pos % 100 == 99 => b'\n',
                    None => b'x',
                };
            }
            Ok(())
        }
    }

    #[test]
    fn a_huge_transcript_costs_what_its_tail_does() {
        let mut tail = String::new();
        for i in 0..30 {
            tail.push_str(USER);
            tail.push('\n');
            tail.push_str(&assistant(&format!("m{i}"), "ok", 5, 5));
            tail.push('\n');
        }
        let len = 4u64 << 30;
        let source = Huge {
            tail: tail.into_bytes(),
            len,
            read: std::cell::Cell::new(0),
        };
        let reader = BackwardReader::new(&source, len);
        let c = Conversation::from_reader(reader).unwrap();
        assert_eq!(c.assistant_turns, 2);
        assert_eq!(c.messages.len(), CONTEXT_MESSAGES);
        assert!(!c.cut_by_budget);
        assert!(
            source.read.get() <= 256 * 1024,
            "read {} bytes",
            source.read.get()
        );
    }

    #[test]
    fn enablement_precedence() {
        let off = Settings {
            prompt_suggestion_enabled: Some(false),
            ..Settings::default()
        };
        let on = Settings::default();
        assert!(enabled(&Env::default(), &on));
        assert!(!enabled(&Env::default(), &off));
        assert!(enabled(&Env::from_pairs([(SWITCH, "true")]), &off));
        assert!(!enabled(&Env::from_pairs([(SWITCH, "0")]), &on));
        // Neither true nor false: the settings decide.
        assert!(!enabled(&Env::from_pairs([(SWITCH, "maybe")]), &off));
        assert_eq!(
            enablement_source(&Env::from_pairs([(SWITCH, "no")]), &on),
            format!("off ({SWITCH})")
        );
        assert_eq!(
            enablement_source(&Env::default(), &off),
            "off (promptSuggestionEnabled)"
        );
        assert_eq!(enablement_source(&Env::default(), &on), "on (the default)");
    }
}
