//! Claude Code session transcripts (JSON Lines): the record shape, a forward reader, a
//! backward reader that never reads more than it yields, and the real-user-turn predicate.
//!
//! Both readers take real files and worse: malformed lines, a partial last line (the file is
//! being appended to), non-UTF-8 bytes, lines of many MB and unknown record types.

use std::fs::File;
use std::io::{self, BufRead};
use std::os::unix::fs::FileExt;
use std::path::Path;

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

use crate::files::open_regular;

/// Lines longer than this are reported as [`Item::Oversized`] without being held in memory.
pub const DEFAULT_MAX_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// How far the backward reader reads at a time.
const BACKWARD_CHUNK: u64 = 64 * 1024;

/// One transcript record: the fields dreamkit uses; unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub subtype: Option<String>,
    pub uuid: Option<String>,
    pub parent_uuid: Option<String>,
    pub session_id: Option<String>,
    pub timestamp: Option<String>,
    pub cwd: Option<String>,
    pub is_sidechain: Option<bool>,
    pub is_meta: Option<bool>,
    pub is_compact_summary: Option<bool>,
    pub is_virtual: Option<bool>,
    pub is_api_error_message: Option<bool>,
    /// `external` for a person's session (what the client writes on every record).
    pub user_type: Option<String>,
    /// `cli`, `sdk-cli`, ...: how the session was started.
    pub entrypoint: Option<String>,
    /// The Claude Code version that wrote the record.
    pub version: Option<String>,
    /// The git branch (`HEAD` outside a repository).
    pub git_branch: Option<String>,
    #[serde(default, deserialize_with = "present")]
    pub tool_use_result: bool,
    pub message: Option<Message>,
    /// `system` records keep their text here.
    pub content: Option<Value>,
    pub error: Option<Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Message {
    pub id: Option<String>,
    pub role: Option<String>,
    pub model: Option<String>,
    pub content: Option<Content>,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

/// One content block; which fields are set depends on `kind` (`text`, `tool_use`,
/// `tool_result`, `thinking`, `image`, ...).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Block {
    #[serde(rename = "type", default)]
    pub kind: String,
    pub text: Option<String>,
    pub id: Option<String>,
    pub name: Option<String>,
    pub input: Option<Value>,
    pub tool_use_id: Option<String>,
    pub content: Option<Value>,
    pub is_error: Option<bool>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    #[serde(default, deserialize_with = "count")]
    pub input_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub output_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub cache_creation_input_tokens: u64,
    #[serde(default, deserialize_with = "count")]
    pub cache_read_input_tokens: u64,
}

/// `toolUseResult` can be any JSON; only its presence matters.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let value: Option<IgnoredAny> = Option::deserialize(d)?;
    Ok(value.is_some())
}

/// A token count; `null` counts as 0.
fn count<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(d)?.unwrap_or(0))
}

/// User-record texts that are wrappers Claude Code writes, not something the person typed.
const WRAPPER_PREFIXES: &[&str] = &[
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<user-memory-input>",
    "<task-notification>",
    "<system-reminder>",
];

impl Record {
    /// Parses one line; `None` when it is not a JSON object of the expected shape. Invalid
    /// UTF-8 and lone UTF-16 surrogate escapes are replaced rather than losing the record.
    pub fn parse(line: &[u8]) -> Option<Record> {
        match crate::cli::json::from_slice(line) {
            Ok(record) => Some(record),
            Err(_) if std::str::from_utf8(line).is_err() => {
                crate::cli::json::from_slice(String::from_utf8_lossy(line).as_bytes()).ok()
            }
            Err(_) => None,
        }
    }

    pub fn blocks(&self) -> &[Block] {
        match self.message.as_ref().and_then(|m| m.content.as_ref()) {
            Some(Content::Blocks(blocks)) => blocks,
            _ => &[],
        }
    }

    /// The message text: the string content, or the `text` blocks joined by newlines.
    pub fn text(&self) -> String {
        match self.message.as_ref().and_then(|m| m.content.as_ref()) {
            Some(Content::Text(text)) => text.clone(),
            Some(Content::Blocks(blocks)) => blocks
                .iter()
                .filter(|b| b.kind == "text")
                .filter_map(|b| b.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
            None => String::new(),
        }
    }

    /// Something the person typed: a user record that is not meta, a compact summary, a
    /// virtual or sidechain message, a tool result, or a wrapper such as a slash command.
    pub fn is_real_user_turn(&self) -> bool {
        if self.kind != "user"
            || self.is_meta == Some(true)
            || self.is_compact_summary == Some(true)
            || self.is_virtual == Some(true)
            || self.is_sidechain == Some(true)
            || self.tool_use_result
            || self.message.is_none()
        {
            return false;
        }
        if self
            .blocks()
            .first()
            .is_some_and(|b| b.kind == "tool_result")
        {
            return false;
        }
        let text = self.text();
        let text = text.trim_start();
        !WRAPPER_PREFIXES.iter().any(|p| text.starts_with(p))
    }

    /// An API error written as an assistant record.
    pub fn is_api_error(&self) -> bool {
        self.kind == "assistant" && self.is_api_error_message == Some(true)
    }
}

/// A tool call named with its key argument, as a reader would want it summarised:
/// `Bash(git status)`, `Edit(src/main.rs)`. The argument is cut to 160 characters.
pub fn describe_tool_call(name: &str, input: Option<&Value>) -> String {
    const KEYS: &[&str] = &[
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "query",
        "prompt",
        "description",
    ];
    let argument = input.and_then(|input| {
        KEYS.iter()
            .find_map(|k| input.get(*k).and_then(Value::as_str))
            .or_else(|| input.as_object()?.values().find_map(Value::as_str))
    });
    match argument {
        Some(arg) => {
            let one_line = arg.split_whitespace().collect::<Vec<_>>().join(" ");
            format!("{name}({})", cut_chars(&one_line, 160))
        }
        None => name.to_string(),
    }
}

/// One line of recent conversation for a model's context, with the record's `message.id`
/// (one API answer is several records: callers count it once), or `None` for records that
/// are not conversation: `User: ...`, `Assistant: ...`, `Assistant called Bash(ls)`. Each text
/// is cut to `max_chars`.
pub fn context_line(record: &Record, max_chars: usize) -> Option<(Option<String>, String)> {
    if record.is_real_user_turn() {
        let text = format!("User: {}", cut_chars(record.text().trim(), max_chars));
        return Some((None, text));
    }
    if record.kind != "assistant" || record.is_api_error() || record.is_sidechain == Some(true) {
        return None;
    }
    let mut parts = Vec::new();
    let text = record.text();
    if !text.trim().is_empty() {
        parts.push(format!("Assistant: {}", cut_chars(text.trim(), max_chars)));
    }
    for block in record.blocks().iter().filter(|b| b.kind == "tool_use") {
        parts.push(format!(
            "Assistant called {}",
            describe_tool_call(
                block.name.as_deref().unwrap_or("tool"),
                block.input.as_ref()
            )
        ));
    }
    if parts.is_empty() {
        return None;
    }
    let id = record.message.as_ref().and_then(|m| m.id.clone());
    Some((id, parts.join("\n")))
}

/// At most `max` characters, with `…` when cut.
pub fn cut_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// One line of a transcript, as a reader saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Byte offset of the line's first byte.
    pub offset: u64,
    /// Length of the line without its newline.
    pub len: u64,
    pub item: Item,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    Record(Box<Record>),
    /// Not a JSON object of the record shape; skipped by readers of records.
    Malformed,
    /// Longer than the reader's limit; never held in memory.
    Oversized,
    /// The last line has no newline yet and does not parse: a record still being written.
    Partial,
}

impl Entry {
    fn classify(offset: u64, line: &[u8], terminated: bool) -> Option<Entry> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let item = match Record::parse(line) {
            Some(record) => Item::Record(Box::new(record)),
            None if terminated => Item::Malformed,
            None => Item::Partial,
        };
        Some(Entry {
            offset,
            len: line.len() as u64,
            item,
        })
    }

    pub fn into_record(self) -> Option<Record> {
        match self.item {
            Item::Record(record) => Some(*record),
            _ => None,
        }
    }
}

/// `.records()` on either reader: only the records, in the reader's order (I/O errors kept).
pub trait Records: Iterator<Item = io::Result<Entry>> + Sized {
    fn records(self) -> impl Iterator<Item = io::Result<Record>> {
        self.filter_map(|e| e.map(Entry::into_record).transpose())
    }
}

impl<I: Iterator<Item = io::Result<Entry>>> Records for I {}

/// Reads a transcript front to back.
pub struct ForwardReader<R> {
    reader: R,
    max_line: u64,
    /// Lines for which this says false are skipped unparsed (a cheap byte-level prefilter).
    keep: Option<fn(&[u8]) -> bool>,
    offset: u64,
    line: Vec<u8>,
    done: bool,
}

impl ForwardReader<io::BufReader<File>> {
    /// Opens a regular file only: a FIFO or a device is refused, never waited on.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(ForwardReader::new(io::BufReader::with_capacity(
            256 * 1024,
            open_regular(path)?,
        )))
    }
}

impl<R: BufRead> ForwardReader<R> {
    pub fn new(reader: R) -> Self {
        ForwardReader {
            reader,
            max_line: DEFAULT_MAX_LINE_BYTES,
            keep: None,
            offset: 0,
            line: Vec::new(),
            done: false,
        }
    }

    pub fn max_line_bytes(mut self, max: u64) -> Self {
        self.max_line = max;
        self
    }

    /// Skips, without parsing, every line for which `keep` says false: JSON parsing is the
    /// whole cost of a forward read, and most of a transcript's bytes are in records a
    /// reader drops (tool output).
    pub fn only_lines(mut self, keep: fn(&[u8]) -> bool) -> Self {
        self.keep = Some(keep);
        self
    }

    /// The next line: `(start offset, length, oversized, newline-terminated)`, or `None` at EOF.
    fn next_line(&mut self) -> io::Result<Option<(u64, u64, bool, bool)>> {
        self.line.clear();
        let start = self.offset;
        let mut len = 0u64;
        let mut oversized = false;
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok((len > 0).then_some((start, len, oversized, false)));
            }
            let (take, found) = match memchr::memchr(b'\n', buf) {
                Some(i) => (i, true),
                None => (buf.len(), false),
            };
            len += take as u64;
            if !oversized && len > self.max_line {
                oversized = true;
                self.line = Vec::new();
            }
            if !oversized {
                self.line.extend_from_slice(&buf[..take]);
            }
            let consumed = take + usize::from(found);
            self.reader.consume(consumed);
            self.offset += consumed as u64;
            if found {
                return Ok(Some((start, len, oversized, true)));
            }
        }
    }
}

impl<R: BufRead> Iterator for ForwardReader<R> {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            match self.next_line() {
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(None) => self.done = true,
                Ok(Some((offset, len, true, _))) => {
                    return Some(Ok(Entry {
                        offset,
                        len,
                        item: Item::Oversized,
                    }))
                }
                Ok(Some((offset, _, false, terminated))) => {
                    if self.keep.is_some_and(|keep| !keep(&self.line)) {
                        continue;
                    }
                    if let Some(entry) = Entry::classify(offset, &self.line, terminated) {
                        return Some(Ok(entry));
                    }
                }
            }
        }
        None
    }
}

/// Positional reads, so the backward reader can be driven by a counting source in tests.
pub trait ReadAt {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;
}

impl ReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(self, buf, offset)
    }
}

/// Reads a transcript from the end towards the start, newest record first. It reads only
/// the chunks that hold the lines it yields (plus one chunk), so taking the last N records of
/// a 1 GB file costs what it costs on a 1 MB one. Lines appended after opening are not seen.
pub struct BackwardReader<F> {
    source: F,
    max_line: u64,
    /// End (exclusive) of the part not yet yielded; the next line ends here.
    end: u64,
    /// The file's length when opened: a last line without a newline may be partial.
    len: u64,
    /// The most recently read chunk and its file offset.
    chunk: Vec<u8>,
    chunk_start: u64,
    done: bool,
}

impl BackwardReader<File> {
    /// Opens a regular file only: a FIFO or a device is refused, never waited on.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = open_regular(path)?;
        let len = file.metadata()?.len();
        Ok(BackwardReader::new(file, len))
    }
}

impl<F: ReadAt> BackwardReader<F> {
    pub fn new(source: F, len: u64) -> Self {
        BackwardReader {
            source,
            max_line: DEFAULT_MAX_LINE_BYTES,
            end: len,
            len,
            chunk: Vec::new(),
            chunk_start: 0,
            done: false,
        }
    }

    pub fn max_line_bytes(mut self, max: u64) -> Self {
        self.max_line = max;
        self
    }

    /// The file's length when the reader was opened.
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Whether the file, as long as when opened, ends with a newline (an empty one does): if
    /// not, its last record may still be being written.
    pub fn ends_with_newline(&self) -> io::Result<bool> {
        if self.len == 0 {
            return Ok(true);
        }
        let mut byte = [0u8];
        self.source.read_exact_at(&mut byte, self.len - 1)?;
        Ok(byte[0] == b'\n')
    }

    /// Offset of the last `\n` before `end`, reading chunks backwards as needed.
    fn newline_before(&mut self, end: u64) -> io::Result<Option<u64>> {
        let mut hi = end;
        while hi > 0 {
            let cached_end = self.chunk_start + self.chunk.len() as u64;
            if self.chunk.is_empty() || hi <= self.chunk_start || hi > cached_end {
                let lo = hi.saturating_sub(BACKWARD_CHUNK);
                self.chunk.resize((hi - lo) as usize, 0);
                self.source.read_exact_at(&mut self.chunk, lo)?;
                self.chunk_start = lo;
            }
            let upto = (hi - self.chunk_start) as usize;
            if let Some(i) = memchr::memrchr(b'\n', &self.chunk[..upto]) {
                return Ok(Some(self.chunk_start + i as u64));
            }
            hi = self.chunk_start;
        }
        Ok(None)
    }

    fn line_bytes(&self, start: u64, end: u64) -> io::Result<Vec<u8>> {
        let cached_end = self.chunk_start + self.chunk.len() as u64;
        if start >= self.chunk_start && end <= cached_end {
            let a = (start - self.chunk_start) as usize;
            let b = (end - self.chunk_start) as usize;
            return Ok(self.chunk[a..b].to_vec());
        }
        let mut line = vec![0; (end - start) as usize];
        self.source.read_exact_at(&mut line, start)?;
        Ok(line)
    }
}

impl<F: ReadAt> Iterator for BackwardReader<F> {
    type Item = io::Result<Entry>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.done {
            let end = self.end;
            let newline = match self.newline_before(end) {
                Ok(n) => n,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let start = newline.map_or(0, |n| n + 1);
            match newline {
                Some(n) => self.end = n,
                None => self.done = true,
            }
            let len = end - start;
            if len == 0 {
                continue;
            }
            if len > self.max_line {
                return Some(Ok(Entry {
                    offset: start,
                    len,
                    item: Item::Oversized,
                }));
            }
            let line = match self.line_bytes(start, end) {
                Ok(line) => line,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            let terminated = end < self.len;
            if let Some(entry) = Entry::classify(start, &line, terminated) {
                return Some(Ok(entry));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::io::Write;

    const FIXTURES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/claude-code-2.1.332"
    );

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(FIXTURES).join(name)
    }

    fn forward(path: &Path) -> Vec<Entry> {
        ForwardReader::open(path)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn backward(path: &Path) -> Vec<Entry> {
        BackwardReader::open(path)
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    fn real_turn_texts(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .filter_map(|e| match &e.item {
                Item::Record(r) if r.is_real_user_turn() => Some(r.text()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn reads_every_real_fixture_both_ways() {
        for name in [
            "session-hello.jsonl",
            "session-tool-use.jsonl",
            "session-suggest.jsonl",
            "session-slash-recap.jsonl",
        ] {
            let path = fixture(name);
            let lines = std::fs::read(&path)
                .unwrap()
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            let fwd = forward(&path);
            assert_eq!(fwd.len(), lines, "{name}");
            assert!(
                fwd.iter().all(|e| matches!(e.item, Item::Record(_))),
                "{name}"
            );
            let mut bwd = backward(&path);
            bwd.reverse();
            assert_eq!(fwd, bwd, "{name}: backward is forward reversed");
        }
    }

    #[test]
    fn real_user_turns_in_fixtures() {
        let tool_use = forward(&fixture("session-tool-use.jsonl"));
        assert_eq!(real_turn_texts(&tool_use), ["run-tool please"]);
        // The tool result and its assistant records are not user turns.
        let assistants: Vec<_> = tool_use
            .iter()
            .filter_map(|e| match &e.item {
                Item::Record(r) if r.kind == "assistant" => Some(r.blocks()[0].kind.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(assistants, ["tool_use", "text"]);

        // /recap leaves a meta caveat, a <command-name> record and a local_command record.
        let recap = forward(&fixture("session-slash-recap.jsonl"));
        assert_eq!(real_turn_texts(&recap), ["run-tool please"]);
        assert!(recap.iter().any(|e| matches!(&e.item,
            Item::Record(r) if r.kind == "system" && r.subtype.as_deref() == Some("local_command"))));
    }

    #[test]
    fn usage_is_read_from_assistant_records() {
        let hello = forward(&fixture("session-hello.jsonl"));
        let usage = hello
            .iter()
            .find_map(|e| match &e.item {
                Item::Record(r) if r.kind == "assistant" => r.message.as_ref()?.usage,
                _ => None,
            })
            .unwrap();
        assert!(usage.input_tokens > 0 || usage.output_tokens > 0);
    }

    fn user(text: &str) -> String {
        serde_json::json!({"type":"user","uuid":"u","message":{"role":"user","content":text}})
            .to_string()
    }

    fn nasty_file() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("nasty.jsonl");
        let mut f = File::create(&path).unwrap();
        writeln!(f, "{}", user("first")).unwrap();
        writeln!(f, "not json at all").unwrap();
        writeln!(f).unwrap();
        writeln!(f, r#"{{"type":"brand-new-type","whatever":[1,2,3]}}"#).unwrap();
        // Non-UTF-8 bytes inside a string.
        f.write_all(
            b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"caf\xe9 \xff\"}}\r\n",
        )
        .unwrap();
        // A 5 MB line.
        let big = format!(
            r#"{{"type":"assistant","message":{{"id":"m1","content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(5 * 1024 * 1024)
        );
        writeln!(f, "{big}").unwrap();
        writeln!(f, "[1,2,3]").unwrap();
        writeln!(f, r#"{{"type":"user","isMeta":"yes"}}"#).unwrap();
        writeln!(f, "{}", user("last")).unwrap();
        // A record still being written.
        f.write_all(br#"{"type":"assistant","message":{"con"#)
            .unwrap();
        (tmp, path)
    }

    fn kinds(entries: &[Entry]) -> Vec<&'static str> {
        entries
            .iter()
            .map(|e| match &e.item {
                Item::Record(_) => "record",
                Item::Malformed => "malformed",
                Item::Oversized => "oversized",
                Item::Partial => "partial",
            })
            .collect()
    }

    #[test]
    fn nasty_file_forward() {
        let (_tmp, path) = nasty_file();
        let entries = forward(&path);
        assert_eq!(
            kinds(&entries),
            [
                "record",
                "malformed",
                "record",
                "record",
                "record",
                "malformed",
                "malformed",
                "record",
                "partial"
            ]
        );
        assert_eq!(
            real_turn_texts(&entries),
            ["first", "caf\u{fffd} \u{fffd}", "last"]
        );
        let Item::Record(big) = &entries[4].item else {
            unreachable!()
        };
        assert_eq!(big.text().len(), 5 * 1024 * 1024);
    }

    #[test]
    fn nasty_file_backward_matches_forward() {
        let (_tmp, path) = nasty_file();
        let mut bwd = backward(&path);
        bwd.reverse();
        assert_eq!(bwd, forward(&path));
    }

    #[test]
    fn oversized_lines_are_skipped_not_buffered() {
        let (_tmp, path) = nasty_file();
        let fwd: Vec<Entry> = ForwardReader::open(&path)
            .unwrap()
            .max_line_bytes(1024 * 1024)
            .map(Result::unwrap)
            .collect();
        let mut bwd: Vec<Entry> = BackwardReader::open(&path)
            .unwrap()
            .max_line_bytes(1024 * 1024)
            .map(Result::unwrap)
            .collect();
        bwd.reverse();
        assert_eq!(kinds(&fwd)[4], "oversized");
        assert!(fwd[4].len > 5 * 1024 * 1024);
        assert_eq!(fwd, bwd);
    }

    #[test]
    fn empty_and_newline_free_files() {
        let tmp = tempfile::tempdir().unwrap();
        let empty = tmp.path().join("empty");
        std::fs::write(&empty, "").unwrap();
        assert!(forward(&empty).is_empty() && backward(&empty).is_empty());
        let one = tmp.path().join("one");
        std::fs::write(&one, user("only")).unwrap();
        assert_eq!(real_turn_texts(&forward(&one)), ["only"]);
        assert_eq!(real_turn_texts(&backward(&one)), ["only"]);
        let blank = tmp.path().join("blank");
        std::fs::write(&blank, "\n\n\r\n  \n").unwrap();
        assert!(forward(&blank).is_empty() && backward(&blank).is_empty());
    }

    /// A source that counts the bytes read and serves a huge virtual file.
    struct Counting {
        tail: Vec<u8>,
        len: u64,
        read: Cell<u64>,
    }

    impl ReadAt for Counting {
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.read.set(self.read.get() + buf.len() as u64);
            let tail_start = self.len - self.tail.len() as u64;
            for (i, b) in buf.iter_mut().enumerate() {
                let pos = offset + i as u64;
                *b = if pos >= tail_start {
                    self.tail[(pos - tail_start) as usize]
                } else if pos % 100 == 99 {
                    b'\n'
                } else {
                    b'{'
                };
            }
            Ok(())
        }
    }

    #[test]
    fn backward_reads_only_the_tail_of_a_huge_file() {
        let mut tail = Vec::new();
        for i in 0..50 {
            tail.extend_from_slice(user(&format!("turn {i}")).as_bytes());
            tail.push(b'\n');
        }
        let source = Counting {
            len: 4 << 30,
            tail,
            read: Cell::new(0),
        };
        let mut reader = BackwardReader::new(source, 4 << 30);
        let last: Vec<String> = reader
            .by_ref()
            .records()
            .take(30)
            .map(|r| r.unwrap().text())
            .collect();
        assert_eq!(last[0], "turn 49");
        assert_eq!(last[29], "turn 20");
        assert!(
            reader.source.read.get() <= 2 * BACKWARD_CHUNK,
            "{}",
            reader.source.read.get()
        );
    }

    #[test]
    fn tool_calls_are_named_with_their_key_argument() {
        let input = serde_json::json!({"command": "echo hi", "description": "Print hi"});
        assert_eq!(describe_tool_call("Bash", Some(&input)), "Bash(echo hi)");
        let input = serde_json::json!({"file_path": "/src/a.rs", "old_string": "x"});
        assert_eq!(describe_tool_call("Edit", Some(&input)), "Edit(/src/a.rs)");
        let input = serde_json::json!({"n": 1, "other": "first\nstring"});
        assert_eq!(
            describe_tool_call("Custom", Some(&input)),
            "Custom(first string)"
        );
        assert_eq!(describe_tool_call("Noop", None), "Noop");
        let long = serde_json::json!({"command": "x".repeat(300)});
        assert_eq!(
            describe_tool_call("Bash", Some(&long)).chars().count(),
            "Bash()".len() + 161
        );
    }

    #[test]
    fn predicate_rejects_non_turns() {
        let cases = [
            (
                r#"{"type":"user","message":{"role":"user","content":"hi"}}"#,
                true,
            ),
            (
                r#"{"type":"user","message":{"role":"user","content":[{"type":"image"}]}}"#,
                true,
            ),
            (
                r#"{"type":"user","isMeta":true,"message":{"content":"hi"}}"#,
                false,
            ),
            (
                r#"{"type":"user","isCompactSummary":true,"message":{"content":"hi"}}"#,
                false,
            ),
            (
                r#"{"type":"user","isVirtual":true,"message":{"content":"hi"}}"#,
                false,
            ),
            (
                r#"{"type":"user","isSidechain":true,"message":{"content":"hi"}}"#,
                false,
            ),
            (
                r#"{"type":"user","toolUseResult":"x","message":{"content":"hi"}}"#,
                false,
            ),
            (
                r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"x"}]}}"#,
                false,
            ),
            (
                r#"{"type":"user","message":{"content":"  <bash-stdout>x</bash-stdout>"}}"#,
                false,
            ),
            (
                r#"{"type":"user","message":{"content":"<command-name>/recap</command-name>"}}"#,
                false,
            ),
            (
                r#"{"type":"user","message":{"content":"<local-command-stdout></local-command-stdout>"}}"#,
                false,
            ),
            (r#"{"type":"user"}"#, false),
            (r#"{"type":"assistant","message":{"content":"hi"}}"#, false),
        ];
        for (line, expected) in cases {
            let record = Record::parse(line.as_bytes()).unwrap();
            assert_eq!(record.is_real_user_turn(), expected, "{line}");
        }
        let err = Record::parse(br#"{"type":"assistant","isApiErrorMessage":true,"message":{"model":"<synthetic>","content":[{"type":"text","text":"API Error: 529"}]}}"#).unwrap();
        assert!(err.is_api_error());
    }

    #[test]
    fn a_record_holding_a_lone_surrogate_is_kept() {
        let line =
            br#"{"type":"user","uuid":"u1","message":{"role":"user","content":"cut \ud83d here"}}"#;
        let record = Record::parse(line).expect("kept");
        assert_eq!(record.text(), "cut \u{fffd} here");
    }
}
