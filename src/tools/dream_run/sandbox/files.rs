//! `read_file`, `write_file`, `edit_file`, `delete_file`.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};

use super::input::{DeleteFileInput, EditFileInput, ReadFileInput, WriteFileInput};
use super::paths::{self, WriteTarget};
use super::sources::{self, SourceInput};
use super::stamp::{self, Stamp};
use super::{Change, Sandbox, ToolResult, WriteGuard};

/// Longest line `read_file` returns whole; longer ones are cut with a marker.
const MAX_LINE_CHARS: usize = 2000;

/// Bytes of one line kept in memory by `read_file` (transcript lines can be megabytes of
/// base64; only the first [`MAX_LINE_CHARS`] characters are shown anyway).
const MAX_LINE_BYTES: usize = 4 * MAX_LINE_CHARS;

/// What `read_file` says of a window holding a NUL byte (a binary or sparse file): the
/// model gets a tool error, never the NULs.
struct NulByte;

/// Reads one line (up to and including `\n`) keeping at most `max` bytes of it in `line`
/// and skipping the rest. Returns the bytes consumed (0 at end of file). With `refuse_nul`,
/// a NUL byte among the kept bytes ends the read at once (`Ok(Err(NulByte))`), so a sparse
/// file of zeros is not read to its end.
fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut Vec<u8>,
    max: usize,
    refuse_nul: bool,
) -> std::io::Result<Result<usize, NulByte>> {
    let mut consumed = 0;
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(Ok(consumed));
        }
        let (take, done) = match memchr::memchr(b'\n', chunk) {
            Some(at) => (at + 1, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(line.len());
        let kept = &chunk[..take.min(room)];
        if refuse_nul && memchr::memchr(0, kept).is_some() {
            return Ok(Err(NulByte));
        }
        line.extend_from_slice(kept);
        reader.consume(take);
        consumed += take;
        if done {
            return Ok(Ok(consumed));
        }
    }
}

/// Opens a file for reading without blocking on FIFOs and without following a final link,
/// and refuses anything but a regular file.
fn open_regular(path: &std::path::Path, shown: &str) -> Result<std::fs::File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| format!("{shown}: cannot open: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{shown}: cannot inspect: {e}"))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory (list it with the shell tool: ls)"
        } else {
            "not a regular file (FIFO, device or socket)"
        };
        return Err(format!("{shown} is {what}"));
    }
    Ok(file)
}

pub(super) fn read_file(sandbox: &Sandbox, input: &ReadFileInput) -> ToolResult {
    let raw = input.path.as_str();
    let offset = input.offset.map_or(1, |o| o.0);
    let limit = input
        .limit
        .map_or(sandbox.limits.read_default_lines, |l| l.0);
    let canonical = match paths::read_target(sandbox, raw) {
        Ok(c) => c,
        Err(e) => return ToolResult::error(e),
    };
    let file = match open_regular(&canonical, raw) {
        Ok(f) => f,
        Err(e) => return ToolResult::error(e),
    };
    let cap = sandbox.limits.output_cap;
    let mut reader = BufReader::new(file);
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown = 0usize;
    let mut note = None;
    loop {
        line.clear();
        // Only the lines shown are checked: the window is what the model would get.
        let in_window = number + 1 >= offset && shown < limit;
        let cut_bytes = match read_line_capped(&mut reader, &mut line, MAX_LINE_BYTES, in_window) {
            Ok(Ok(0)) => break,
            Ok(Ok(consumed)) => consumed > line.len(),
            Ok(Err(NulByte)) => {
                return ToolResult::error(format!(
                    "{raw}: line {} holds a NUL byte: not a text file, nothing of it is shown",
                    number + 1
                ))
            }
            Err(e) => return ToolResult::error(format!("{raw}: read error: {e}")),
        };
        number += 1;
        if number < offset {
            continue;
        }
        if shown == limit {
            note = Some(format!(
                "[more lines follow; continue with offset={number}]"
            ));
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let text: String = if cut_bytes || text.chars().count() > MAX_LINE_CHARS {
            let cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            format!("{cut} [line cut at {MAX_LINE_CHARS} characters]")
        } else {
            text.to_string()
        };
        let entry = format!("{number:>6}\t{text}\n");
        if out.len() + entry.len() > cap {
            note = Some(format!(
                "[output cap of {cap} bytes reached; continue with offset={number}]"
            ));
            break;
        }
        out.push_str(&entry);
        shown += 1;
    }
    if number < offset && number > 0 {
        return ToolResult::error(format!(
            "{raw} has {number} lines; offset {offset} is past the end"
        ));
    }
    if number == 0 {
        out.push_str("[empty file]\n");
    }
    if let Some(note) = note {
        out.push_str(&note);
        out.push('\n');
    }
    ToolResult {
        read_path: Some(canonical),
        ..ToolResult::ok(out)
    }
}

/// Reads the current content of an existing target (regular, capped, UTF-8).
fn load(sandbox: &Sandbox, target: &WriteTarget, raw: &str) -> Result<String, String> {
    let file = open_regular(&target.path, raw)?;
    let cap = sandbox.limits.max_file_bytes;
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{raw}: read error: {e}"))?;
    if bytes.len() > cap {
        return Err(format!(
            "{raw} is larger than {cap} bytes; memory files are capped at that size"
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{raw} is not valid UTF-8 text"))
}

/// Asks the guard, then writes atomically (keeping an existing file's mode).
fn land(
    sandbox: &Sandbox,
    target: &WriteTarget,
    bytes: &[u8],
    guard: &mut dyn WriteGuard,
) -> Result<Change, ToolResult> {
    let mode = target
        .existing
        .as_ref()
        .map(|m| m.permissions().mode() & 0o777)
        .unwrap_or(sandbox.limits.new_file_mode);
    if let Err(refusal) = guard.before_write(&target.path, Some(bytes)) {
        return Err(ToolResult {
            stop_run: refusal.stop_run,
            ..ToolResult::error(refusal.message)
        });
    }
    paths::create_missing_dirs(target, sandbox.limits.new_file_mode & 0o077 == 0)
        .map_err(ToolResult::error)?;
    crate::files::write_atomic(&target.path, bytes, mode).map_err(|e| {
        ToolResult::error(format!("cannot write {}: {e}", target.relative.display()))
    })?;
    Ok(if target.existing.is_some() {
        Change::Modified
    } else {
        Change::Created
    })
}

fn done(
    target: WriteTarget,
    change: Change,
    what: &str,
    checked: Vec<(crate::store::Source, Option<String>)>,
) -> ToolResult {
    let mut content = format!("{what} {}", target.relative.display());
    if let Some(line) = sources::said(&checked) {
        content.push('\n');
        content.push_str(&line);
    }
    ToolResult {
        touched: Some((target.path, change)),
        sources: checked.into_iter().map(|(source, _)| source).collect(),
        ..ToolResult::ok(content)
    }
}

/// The call's sources, checked against the run's transcripts.
fn checked(
    sandbox: &Sandbox,
    sources: Option<&[SourceInput]>,
) -> Vec<(crate::store::Source, Option<String>)> {
    sandbox.sessions.check(sources.unwrap_or_default())
}

/// The session the first verified source names: a new topic file's `originSessionId`.
fn first_verified(checked: &[(crate::store::Source, Option<String>)]) -> Option<&str> {
    checked
        .iter()
        .find(|(source, _)| source.verified)
        .map(|(source, _)| source.session.as_str())
}

/// What a write or edit lands.
enum Landing {
    /// The file already holds it (up to `modified`): nothing is written.
    Unchanged,
    Bytes(String),
}

/// `content` as it lands: a topic file with frontmatter stamped like the client stamps it
/// ([`stamp`]), knowing what the file held before. `source_session`: the session the content
/// came from, when the model says (a new file without one names the newest session reviewed).
fn landing(
    sandbox: &Sandbox,
    target: &WriteTarget,
    previous: Option<&str>,
    content: &str,
    source_session: Option<&str>,
) -> Landing {
    if previous == Some(content) {
        return Landing::Unchanged;
    }
    if !stamp::is_topic_file(&target.relative) {
        return Landing::Bytes(content.to_string());
    }
    let origin_session = match target.existing {
        None => source_session.or(sandbox.origin_session.as_deref()),
        Some(_) => source_session,
    };
    let stamp_at = |now: &str| {
        stamp::stamp(
            previous,
            content,
            &Stamp {
                now,
                origin_session,
            },
        )
    };
    // Content that only lacks the stamps the file has is no change: `modified` stays.
    if let Some(current) = previous {
        if let Some(modified) = stamp::modified_of(current) {
            if stamp_at(&modified).as_deref() == Some(current) {
                return Landing::Unchanged;
            }
        }
    }
    let now = crate::cli::time::rfc3339(std::time::SystemTime::now());
    Landing::Bytes(stamp_at(&now).unwrap_or_else(|| content.to_string()))
}

fn unchanged(target: &WriteTarget) -> ToolResult {
    ToolResult::ok(format!(
        "unchanged: {} already holds exactly this content (nothing written)",
        target.relative.display()
    ))
}

pub(super) fn write_file(
    sandbox: &Sandbox,
    input: &WriteFileInput,
    guard: &mut dyn WriteGuard,
) -> ToolResult {
    let (raw, content) = (input.path.as_str(), input.content.as_str());
    let cap = sandbox.limits.max_file_bytes;
    if content.len() > cap {
        return ToolResult::error(format!(
            "write_file: the content is {} bytes; memory files are capped at {cap} bytes, split it into topic files",
            content.len()
        ));
    }
    let target = match paths::write_target(sandbox, raw) {
        Ok(t) => t,
        Err(e) => return ToolResult::error(e),
    };
    let previous = match target.existing {
        Some(_) => load(sandbox, &target, raw).ok(),
        None => None,
    };
    let checked = checked(sandbox, input.sources.as_deref());
    let origin = first_verified(&checked);
    let bytes = match landing(sandbox, &target, previous.as_deref(), content, origin) {
        // The same bytes again are no change: nothing is written, nothing is touched.
        Landing::Unchanged => return unchanged(&target),
        Landing::Bytes(bytes) => bytes,
    };
    if bytes.len() > cap {
        return ToolResult::error(format!(
            "write_file: with its metadata stamped the file would be {} bytes; memory files are capped at {cap} bytes, split it into topic files",
            bytes.len()
        ));
    }
    match land(sandbox, &target, bytes.as_bytes(), guard) {
        Ok(change) => {
            let verb = if change == Change::Created {
                "created"
            } else {
                "wrote"
            };
            done(target, change, verb, checked)
        }
        Err(result) => result,
    }
}

pub(super) fn edit_file(
    sandbox: &Sandbox,
    input: &EditFileInput,
    guard: &mut dyn WriteGuard,
) -> ToolResult {
    let (raw, old, new) = (
        input.path.as_str(),
        input.old_string.as_str(),
        input.new_string.as_str(),
    );
    if old.is_empty() {
        return ToolResult::error(
            "edit_file: old_string is empty; to create or replace a whole file use write_file",
        );
    }
    if old == new {
        return ToolResult::error(
            "edit_file: old_string and new_string are the same; nothing to change",
        );
    }
    let target = match paths::write_target(sandbox, raw) {
        Ok(t) => t,
        Err(e) => return ToolResult::error(e),
    };
    if target.existing.is_none() {
        return ToolResult::error(format!("{raw} does not exist; create it with write_file"));
    }
    let current = match load(sandbox, &target, raw) {
        Ok(c) => c,
        Err(e) => return ToolResult::error(e),
    };
    match current.matches(old).count() {
        0 => {
            return ToolResult::error(format!(
                "edit_file: old_string was not found in {raw}; read the file and copy the text exactly"
            ))
        }
        1 => {}
        n => {
            return ToolResult::error(format!(
                "edit_file: old_string occurs {n} times in {raw}; include more surrounding text so it matches exactly once"
            ))
        }
    }
    let updated = current.replacen(old, new, 1);
    let checked = checked(sandbox, input.sources.as_deref());
    let origin = first_verified(&checked);
    let updated = match landing(sandbox, &target, Some(&current), &updated, origin) {
        Landing::Unchanged => return unchanged(&target),
        Landing::Bytes(bytes) => bytes,
    };
    let cap = sandbox.limits.max_file_bytes;
    if updated.len() > cap {
        return ToolResult::error(format!(
            "edit_file: the result would be {} bytes; memory files are capped at {cap} bytes",
            updated.len()
        ));
    }
    match land(sandbox, &target, updated.as_bytes(), guard) {
        Ok(change) => done(target, change, "edited", checked),
        Err(result) => result,
    }
}

/// The memory dir's `team/` folder holds memory shared with the whole team (any case: a
/// case-insensitive file system names the same folder).
const TEAM_DIR: &str = "team";

/// Whether a path relative to the memory dir lies under [`TEAM_DIR`].
fn in_team_dir(relative: &std::path::Path) -> bool {
    relative.components().count() > 1
        && relative
            .components()
            .next()
            .is_some_and(|first| first.as_os_str().eq_ignore_ascii_case(TEAM_DIR))
}

pub(super) fn delete_file(
    sandbox: &Sandbox,
    input: &DeleteFileInput,
    guard: &mut dyn WriteGuard,
) -> ToolResult {
    let raw = input.path.as_str();
    let target = match paths::write_target(sandbox, raw) {
        Ok(t) => t,
        Err(e) => return ToolResult::error(e),
    };
    if target.existing.is_none() {
        return ToolResult::error(format!("{raw} does not exist; nothing to delete"));
    }
    if in_team_dir(&target.relative) && !sandbox.allow_team_delete {
        return ToolResult::error(format!(
            "{raw} is team memory, shared with the rest of the team: it is not deleted. Prune \
only what is clearly wrong, by editing it with edit_file"
        ));
    }
    if let Err(refusal) = guard.before_write(&target.path, None) {
        return ToolResult {
            stop_run: refusal.stop_run,
            ..ToolResult::error(refusal.message)
        };
    }
    let checked = checked(sandbox, input.sources.as_deref());
    if let Err(e) = std::fs::remove_file(&target.path) {
        return ToolResult::error(format!("cannot delete {raw}: {e}"));
    }
    done(target, Change::Deleted, "deleted", checked)
}
