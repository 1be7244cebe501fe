//! The `shell` tool: our own tokenizer, a per-program option allow-list, path checks on every
//! path argument, and a pipeline spawned without a shell.
//!
//! Decisions:
//! - Quoting follows POSIX `sh` for `'...'`, `"..."` and `\`; nothing is ever expanded. `$`
//!   (outside single quotes), backticks, `;`, `&`, `<`, `>`, unquoted `( ) { }`, a leading `#`
//!   or `~`, `||`, empty stages, newlines, NUL and other control characters, invisible
//!   formatting characters and look-alikes of the operators are refused.
//! - Globs are not expanded: an unquoted `*`, `?` or `[` in a path argument is refused (with a
//!   hint to use `find -name`); in a pattern or option value (`grep 'a*'`, `find -name *.md`)
//!   it is passed literally, as the program expects.
//! - Programs are named bare (`ls`, not `/bin/ls`; a path is refused) and run from
//!   `/usr/bin` or `/bin`, with the environment cleared except `PATH=/usr/bin:/bin` and
//!   `LANG=C`, cwd = the memory dir, stdin of the first stage = /dev/null.
//! - Options are an allow-list per program; anything else (including GNU's abbreviations of
//!   long options) is refused rather than guessed. Options that follow symlinks out of the
//!   roots (`grep -R`, `ls -L`, `stat -L`, `find -L -H -follow`), never end (`tail -f`), run
//!   programs or write files (`find -exec -execdir -ok -okdir -delete -fprint* -fls`) or read
//!   a list of file names (`--files0-from`, `find -files0-from`) are refused with a reason.
//! - Every path operand and path-valued option (`grep -f`, `--file=`, `--exclude-from=`,
//!   `find -newer -anewer -cnewer -samefile -newerXY`) must exist and resolve (symlinks
//!   followed) inside a readable root. `-` (stdin) is allowed where it means stdin.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::paths::outside_roots_message;
use super::{Sandbox, ToolResult};

/// The only programs `shell` runs.
pub const ALLOWED: &[&str] = &["ls", "find", "grep", "cat", "stat", "wc", "head", "tail"];
/// Where they are looked up (trusted system directories only, never the caller's PATH).
const PROGRAM_DIRS: &[&str] = &["/usr/bin", "/bin"];
const MAX_COMMAND_BYTES: usize = 8192;
const MAX_WORD_BYTES: usize = 4096;
const MAX_STAGES: usize = 8;
const MAX_WORDS: usize = 256;
/// Share of the output cap left to stderr.
const STDERR_CAP: usize = 8 * 1024;

/// Absolute paths of the allowed programs present on this system.
#[derive(Debug, Clone)]
pub struct Programs(BTreeMap<&'static str, PathBuf>);

impl Programs {
    pub fn locate() -> Programs {
        let mut found = BTreeMap::new();
        for name in ALLOWED {
            for dir in PROGRAM_DIRS {
                let candidate = Path::new(dir).join(name);
                if std::fs::metadata(&candidate).is_ok_and(|m| m.is_file()) {
                    found.insert(*name, candidate);
                    break;
                }
            }
        }
        Programs(found)
    }

    pub fn path(&self, name: &str) -> Option<&Path> {
        self.0.get(name).map(PathBuf::as_path)
    }
}

/// One word of the command line after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Word {
    text: String,
    /// An unquoted `*`, `?` or `[` appeared (a shell would have globbed it).
    glob: bool,
}

fn allowed_list() -> String {
    ALLOWED.join(" ")
}

/// Refusal of characters outside any quoting that a reader could take for operators, or that
/// hide text: the model (or a transcript it quotes) should not smuggle meaning past a reviewer.
fn lookalike(c: char) -> bool {
    matches!(
        c,
        '\u{FF5C}' // fullwidth |
            | '\u{FF1B}' // fullwidth ;
            | '\u{FF06}' // fullwidth &
            | '\u{FF1C}' // fullwidth <
            | '\u{FF1E}' // fullwidth >
            | '\u{FF04}' // fullwidth $
            | '\u{FF40}' // fullwidth `
            | '\u{2223}' // divides
            | '\u{01C0}' // latin letter dental click
            | '\u{2502}' // box drawings light vertical
            | '\u{037E}' // greek question mark (looks like ;)
            | '\u{2039}'
            | '\u{203A}'
    )
}

fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00A0}' | '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}'
            | '\u{17B4}' | '\u{17B5}' | '\u{180E}' | '\u{2000}'..='\u{200F}'
            | '\u{2028}'..='\u{202F}' | '\u{205F}'..='\u{206F}' | '\u{3000}'
            | '\u{3164}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// Checks the raw text, then splits it into pipeline stages of words.
fn tokenize(command: &str) -> Result<Vec<Vec<Word>>, String> {
    if command.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "the command is {} bytes; the limit is {MAX_COMMAND_BYTES}",
            command.len()
        ));
    }
    if command.contains('\0') {
        return Err("the command contains a NUL byte".into());
    }
    if command.contains(['\n', '\r']) {
        return Err("the command contains a line break; send exactly one command line (join programs with | only)".into());
    }
    if let Some(c) = command.chars().find(|&c| c != '\t' && c.is_control()) {
        return Err(format!(
            "the command contains the control character U+{:04X}",
            c as u32
        ));
    }
    if let Some(c) = command.chars().find(|&c| invisible(c)) {
        return Err(format!(
            "the command contains the invisible or non-ASCII space character U+{:04X}; use plain ASCII spaces",
            c as u32
        ));
    }
    if command.trim().is_empty() {
        return Err(format!(
            "the command is empty; give one of: {}",
            allowed_list()
        ));
    }

    let mut stages: Vec<Vec<Word>> = Vec::new();
    let mut stage: Vec<Word> = Vec::new();
    let mut word: Option<Word> = None;
    let mut chars = command.chars().peekable();

    fn push_char(word: &mut Option<Word>, c: char) {
        word.get_or_insert_with(|| Word {
            text: String::new(),
            glob: false,
        })
        .text
        .push(c);
    }
    fn finish(word: &mut Option<Word>, stage: &mut Vec<Word>) {
        if let Some(w) = word.take() {
            stage.push(w);
        }
    }

    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => finish(&mut word, &mut stage),
            '|' => {
                if chars.peek() == Some(&'|') {
                    return Err("`||` is not supported: one pipeline only, no conditionals".into());
                }
                finish(&mut word, &mut stage);
                if stage.is_empty() {
                    return Err("a `|` has no command before it".into());
                }
                stages.push(std::mem::take(&mut stage));
            }
            '&' => {
                return Err(if chars.peek() == Some(&'&') {
                    "`&&` is not supported: run one pipeline per call".into()
                } else if chars.peek() == Some(&'>') {
                    "redirects (`&>`) are not supported: the output comes back to you".into()
                } else {
                    "`&` (background jobs) is not supported".into()
                })
            }
            ';' => return Err("`;` is not supported: run one pipeline per call".into()),
            '<' | '>' => {
                return Err(format!(
                    "redirects (`{c}`) are not supported: the output comes back to you and files are read by naming them"
                ))
            }
            '(' | ')' => {
                return Err(
                    "subshells and unquoted parentheses are not supported (for find grouping write \\( and \\))"
                        .into(),
                )
            }
            '{' | '}' => {
                return Err("unquoted braces are not supported (no brace expansion or groups); quote them".into())
            }
            '$' => {
                return Err("`$` expansion (variables, $(...), ${...}) is not supported; quote a literal $ in single quotes".into())
            }
            '`' => return Err("backticks (command substitution) are not supported".into()),
            '#' if word.is_none() => {
                return Err("comments (`#`) are not supported; quote a literal #".into())
            }
            '~' if word.is_none() => {
                return Err("`~` is not expanded; give the absolute path".into())
            }
            '\\' => match chars.next() {
                Some(next) => push_char(&mut word, next),
                None => return Err("the command ends with a lone backslash".into()),
            },
            '\'' => {
                let mut closed = false;
                word.get_or_insert_with(|| Word {
                    text: String::new(),
                    glob: false,
                });
                for inner in chars.by_ref() {
                    if inner == '\'' {
                        closed = true;
                        break;
                    }
                    push_char(&mut word, inner);
                }
                if !closed {
                    return Err("unterminated single quote".into());
                }
            }
            '"' => {
                let mut closed = false;
                word.get_or_insert_with(|| Word {
                    text: String::new(),
                    glob: false,
                });
                while let Some(inner) = chars.next() {
                    match inner {
                        '"' => {
                            closed = true;
                            break;
                        }
                        '$' => return Err("`$` inside double quotes would expand; use single quotes for a literal $".into()),
                        '`' => return Err("backticks (command substitution) are not supported".into()),
                        '\\' => match chars.peek() {
                            Some(&next @ ('\\' | '"' | '$' | '`')) => {
                                chars.next();
                                push_char(&mut word, next);
                            }
                            _ => push_char(&mut word, '\\'),
                        },
                        other => push_char(&mut word, other),
                    }
                }
                if !closed {
                    return Err("unterminated double quote".into());
                }
            }
            '*' | '?' | '[' => {
                push_char(&mut word, c);
                if let Some(w) = word.as_mut() {
                    w.glob = true;
                }
            }
            other if lookalike(other) => {
                return Err(format!(
                    "the character {other:?} (U+{:04X}) looks like a shell operator and is refused; quote it if you mean it literally",
                    other as u32
                ))
            }
            other => push_char(&mut word, other),
        }
    }
    finish(&mut word, &mut stage);
    if stage.is_empty() {
        return Err(if stages.is_empty() {
            format!("the command is empty; give one of: {}", allowed_list())
        } else {
            "the command ends with `|` and no program after it".into()
        });
    }
    stages.push(stage);
    if stages.len() > MAX_STAGES {
        return Err(format!("at most {MAX_STAGES} programs per pipeline"));
    }
    for stage in &stages {
        if stage.len() > MAX_WORDS {
            return Err(format!("at most {MAX_WORDS} arguments per program"));
        }
        if let Some(w) = stage.iter().find(|w| w.text.len() > MAX_WORD_BYTES) {
            return Err(format!(
                "an argument is {} bytes; the limit is {MAX_WORD_BYTES}",
                w.text.len()
            ));
        }
        if let Some(w) = stage.iter().find(|w| w.text.is_empty()) {
            let _ = w;
            return Err("empty arguments ('') are not supported".into());
        }
    }
    Ok(stages)
}

/// What an option's value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    /// Free text (numbers, formats, globs for the program itself): passed as is.
    Text,
    /// grep's pattern (`-e`): means the first operand is not the pattern.
    Pattern,
    /// A file the program reads: checked like a path operand.
    Path,
}

/// A getopt-style program's option allow-list (GNU: options may follow operands until `--`).
struct Spec {
    name: &'static str,
    short_flags: &'static str,
    short_values: &'static [(char, Value)],
    long_flags: &'static [&'static str],
    long_values: &'static [(&'static str, Value)],
    /// Options refused with a reason (short as "-x", long as "--name").
    refused: &'static [(&'static str, &'static str)],
    /// Whether a `-` operand means stdin (else it is a file named `-`).
    dash_is_stdin: bool,
}

const FOLLOWS_LINKS: &str = "it follows symbolic links out of the readable directories";
const NEVER_ENDS: &str = "following a file never ends; read it once";
const NAMES_FROM_FILE: &str = "file names read from a file cannot be checked";

const LS: Spec = Spec {
    name: "ls",
    short_flags: "aAlhRtSr1dFpisnogGUXvcuQkmxC",
    short_values: &[('w', Value::Text), ('I', Value::Text)],
    long_flags: &[
        "all",
        "almost-all",
        "human-readable",
        "si",
        "recursive",
        "reverse",
        "directory",
        "classify",
        "inode",
        "size",
        "numeric-uid-gid",
        "no-group",
        "full-time",
        "group-directories-first",
        "quote-name",
        "literal",
    ],
    long_values: &[
        ("sort", Value::Text),
        ("time", Value::Text),
        ("ignore", Value::Text),
        ("hide", Value::Text),
        ("width", Value::Text),
        ("time-style", Value::Text),
        ("format", Value::Text),
        ("indicator-style", Value::Text),
        ("block-size", Value::Text),
    ],
    refused: &[
        ("-L", FOLLOWS_LINKS),
        ("--dereference", FOLLOWS_LINKS),
        ("-H", FOLLOWS_LINKS),
        ("--dereference-command-line", FOLLOWS_LINKS),
    ],
    dash_is_stdin: false,
};

const GREP: Spec = Spec {
    name: "grep",
    short_flags: "iyvwxclLnhHoqsrEFGPzZaIbTU0123456789",
    short_values: &[
        ('e', Value::Pattern),
        ('f', Value::Path),
        ('m', Value::Text),
        ('A', Value::Text),
        ('B', Value::Text),
        ('C', Value::Text),
    ],
    long_flags: &[
        "ignore-case",
        "no-ignore-case",
        "invert-match",
        "word-regexp",
        "line-regexp",
        "count",
        "files-with-matches",
        "files-without-match",
        "line-number",
        "no-filename",
        "with-filename",
        "only-matching",
        "quiet",
        "silent",
        "no-messages",
        "recursive",
        "extended-regexp",
        "fixed-strings",
        "basic-regexp",
        "perl-regexp",
        "null",
        "null-data",
        "text",
        "initial-tab",
        "byte-offset",
        "line-buffered",
        "binary",
    ],
    long_values: &[
        ("regexp", Value::Pattern),
        ("file", Value::Path),
        ("exclude-from", Value::Path),
        ("max-count", Value::Text),
        ("after-context", Value::Text),
        ("before-context", Value::Text),
        ("context", Value::Text),
        ("include", Value::Text),
        ("exclude", Value::Text),
        ("exclude-dir", Value::Text),
        ("binary-files", Value::Text),
        ("label", Value::Text),
    ],
    refused: &[
        ("-R", FOLLOWS_LINKS),
        ("--dereference-recursive", FOLLOWS_LINKS),
        (
            "-d",
            "use -r to search directories (-d/--directories is not supported)",
        ),
        (
            "-D",
            "device handling cannot be changed (-D/--devices is not supported)",
        ),
        (
            "--directories",
            "use -r to search directories (-d/--directories is not supported)",
        ),
        (
            "--devices",
            "device handling cannot be changed (-D/--devices is not supported)",
        ),
    ],
    dash_is_stdin: true,
};

const CAT: Spec = Spec {
    name: "cat",
    short_flags: "AbeEnstTuv",
    short_values: &[],
    long_flags: &[
        "show-all",
        "number-nonblank",
        "show-ends",
        "number",
        "squeeze-blank",
        "show-tabs",
        "show-nonprinting",
    ],
    long_values: &[],
    refused: &[],
    dash_is_stdin: true,
};

const STAT: Spec = Spec {
    name: "stat",
    short_flags: "tf",
    short_values: &[('c', Value::Text)],
    long_flags: &["terse", "file-system"],
    long_values: &[("format", Value::Text), ("printf", Value::Text)],
    refused: &[("-L", FOLLOWS_LINKS), ("--dereference", FOLLOWS_LINKS)],
    dash_is_stdin: false,
};

const WC: Spec = Spec {
    name: "wc",
    short_flags: "clmwL",
    short_values: &[],
    long_flags: &["bytes", "chars", "lines", "words", "max-line-length"],
    long_values: &[],
    refused: &[("--files0-from", NAMES_FROM_FILE)],
    dash_is_stdin: true,
};

const HEAD: Spec = Spec {
    name: "head",
    short_flags: "qvz0123456789",
    short_values: &[('n', Value::Text), ('c', Value::Text)],
    long_flags: &["quiet", "silent", "verbose", "zero-terminated"],
    long_values: &[("lines", Value::Text), ("bytes", Value::Text)],
    refused: &[],
    dash_is_stdin: true,
};

const TAIL: Spec = Spec {
    name: "tail",
    short_flags: "qvz0123456789",
    short_values: &[('n', Value::Text), ('c', Value::Text)],
    long_flags: &["quiet", "silent", "verbose", "zero-terminated"],
    long_values: &[("lines", Value::Text), ("bytes", Value::Text)],
    refused: &[
        ("-f", NEVER_ENDS),
        ("-F", NEVER_ENDS),
        ("--follow", NEVER_ENDS),
        ("--retry", NEVER_ENDS),
        ("-s", NEVER_ENDS),
        ("--sleep-interval", NEVER_ENDS),
        ("--pid", NEVER_ENDS),
    ],
    dash_is_stdin: true,
};

/// One checked program invocation.
#[derive(Debug)]
struct Stage {
    /// The bare name (argv[0], so messages read `grep: ...`).
    name: &'static str,
    program: PathBuf,
    args: Vec<String>,
    is_grep: bool,
}

/// Checks one path argument: no glob, exists, real path inside a root.
fn check_path(sandbox: &Sandbox, program: &str, word: &Word) -> Result<(), String> {
    let raw = word.text.as_str();
    if word.glob {
        return Err(format!(
            "{program}: `{raw}` contains an unquoted glob; globs are not expanded (use find -name '...', or quote the name if it is literal)"
        ));
    }
    let joined = sandbox.memory_dir.join(raw);
    let canonical = match std::fs::canonicalize(&joined) {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{program}: {raw}: no such file or directory"))
        }
        Err(e) => return Err(format!("{program}: {raw}: {e}")),
    };
    if !sandbox.inside_roots(&canonical) {
        return Err(format!(
            "{program}: {}",
            outside_roots_message(sandbox, raw, &canonical)
        ));
    }
    Ok(())
}

/// Parses a getopt-style program's arguments against its allow-list and checks every path.
fn check_getopt(sandbox: &Sandbox, spec: &Spec, words: &[Word]) -> Result<(), String> {
    let name = spec.name;
    let refuse = |option: &str| -> Option<String> {
        spec.refused
            .iter()
            .find(|(o, _)| *o == option)
            .map(|(o, why)| format!("{name} {o} is not allowed: {why}"))
    };
    let mut operands: Vec<&Word> = Vec::new();
    let mut pattern_given = false;
    let mut value_paths: Vec<Word> = Vec::new();
    let mut index = 0;
    let mut after_dashdash = false;
    while index < words.len() {
        let word = &words[index];
        index += 1;
        let text = word.text.as_str();
        if after_dashdash || text == "-" || !text.starts_with('-') {
            operands.push(word);
            continue;
        }
        if text == "--" {
            after_dashdash = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (option, inline) = match long.split_once('=') {
                Some((o, v)) => (o, Some(v)),
                None => (long, None),
            };
            if let Some(why) = refuse(&format!("--{option}")) {
                return Err(why);
            }
            if spec.long_flags.contains(&option) {
                if inline.is_some() {
                    return Err(format!("{name} --{option} takes no value"));
                }
                continue;
            }
            let Some((_, kind)) = spec.long_values.iter().find(|(o, _)| *o == option) else {
                return Err(unknown_option(spec, text));
            };
            let value = match inline {
                Some(v) => Word {
                    text: v.to_string(),
                    glob: word.glob,
                },
                None => {
                    let Some(next) = words.get(index) else {
                        return Err(format!("{name} --{option} needs a value"));
                    };
                    index += 1;
                    next.clone()
                }
            };
            match kind {
                Value::Text => {}
                Value::Pattern => pattern_given = true,
                Value::Path => {
                    if option == "file" {
                        pattern_given = true;
                    }
                    value_paths.push(value);
                }
            }
            continue;
        }
        // A cluster of short options: `-rn`, `-A3`, `-e pattern`, `-fFILE`.
        let cluster: Vec<char> = text.chars().skip(1).collect();
        let mut at = 0;
        while at < cluster.len() {
            let c = cluster[at];
            at += 1;
            if let Some(why) = refuse(&format!("-{c}")) {
                return Err(why);
            }
            if spec.short_flags.contains(c) {
                continue;
            }
            let Some((_, kind)) = spec.short_values.iter().find(|(o, _)| *o == c) else {
                return Err(unknown_option(spec, &format!("-{c}")));
            };
            let rest: String = cluster[at..].iter().collect();
            let value = if rest.is_empty() {
                let Some(next) = words.get(index) else {
                    return Err(format!("{name} -{c} needs a value"));
                };
                index += 1;
                next.clone()
            } else {
                Word {
                    text: rest,
                    glob: word.glob,
                }
            };
            match kind {
                Value::Text => {}
                Value::Pattern => pattern_given = true,
                Value::Path => {
                    pattern_given = pattern_given || c == 'f';
                    value_paths.push(value);
                }
            }
            break;
        }
    }
    let mut paths = operands.into_iter();
    if name == "grep" && !pattern_given {
        // Without -e/-f the first operand is the pattern, not a path.
        if paths.next().is_none() {
            return Err("grep needs a pattern (grep [OPTIONS] PATTERN [PATH...])".into());
        }
    }
    for word in &value_paths {
        if word.text == "-" {
            continue;
        }
        check_path(sandbox, name, word)?;
    }
    for word in paths {
        if word.text == "-" && spec.dash_is_stdin {
            continue;
        }
        check_path(sandbox, name, word)?;
    }
    Ok(())
}

fn unknown_option(spec: &Spec, option: &str) -> String {
    format!(
        "{} option {option} is not in the allowed set; allowed short flags: -{}{}",
        spec.name,
        spec.short_flags,
        if spec.long_flags.is_empty() && spec.long_values.is_empty() {
            String::new()
        } else {
            let longs: Vec<String> = spec
                .long_flags
                .iter()
                .map(|f| format!("--{f}"))
                .chain(spec.long_values.iter().map(|(f, _)| format!("--{f}=...")))
                .collect();
            format!(", long: {}", longs.join(" "))
        }
    )
}

/// find primaries: no-argument ones.
const FIND_FLAGS: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-true",
    "-false",
    "-empty",
    "-readable",
    "-writable",
    "-executable",
    "-nouser",
    "-nogroup",
    "-depth",
    "-d",
    "-mount",
    "-xdev",
    "-noleaf",
    "-daystart",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-nowarn",
    "-warn",
    "-a",
    "-and",
    "-o",
    "-or",
    "-not",
    "!",
    "(",
    ")",
    ",",
];
/// find primaries taking a text value.
const FIND_TEXT: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-regextype",
    "-lname",
    "-ilname",
    "-type",
    "-maxdepth",
    "-mindepth",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-size",
    "-perm",
    "-links",
    "-inum",
    "-uid",
    "-gid",
    "-user",
    "-group",
    "-fstype",
    "-printf",
];
/// find primaries taking a file name.
const FIND_PATH: &[&str] = &["-newer", "-anewer", "-cnewer", "-samefile"];
/// find primaries that run programs or write files.
const FIND_ACTIONS: &[&str] = &[
    "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
];

fn check_find(sandbox: &Sandbox, words: &[Word]) -> Result<(), String> {
    let mut index = 0;
    // Leading options: only -P (the default: never follow links).
    while let Some(word) = words.get(index) {
        match word.text.as_str() {
            "-P" => index += 1,
            "-L" | "-H" | "-follow" => {
                return Err(format!(
                    "find {} is not allowed: {FOLLOWS_LINKS}",
                    word.text
                ))
            }
            "-D" | "-O" => return Err(format!("find {} is not supported", word.text)),
            text if text.starts_with("-O") || text.starts_with("-D") => {
                return Err(format!("find {text} is not supported"))
            }
            _ => break,
        }
    }
    // Starting points: everything before the first expression token.
    while let Some(word) = words.get(index) {
        let text = word.text.as_str();
        if text.starts_with('-') || matches!(text, "(" | ")" | "!" | ",") {
            break;
        }
        check_path(sandbox, "find", word)?;
        index += 1;
    }
    // The expression.
    while let Some(word) = words.get(index) {
        index += 1;
        let text = word.text.as_str();
        if FIND_FLAGS.contains(&text) {
            continue;
        }
        if FIND_ACTIONS.contains(&text)
            || text.starts_with("-exec")
            || text.starts_with("-ok")
            || text.starts_with("-fprint")
            || text.starts_with("-fls")
            || text.starts_with("-delete")
        {
            return Err(format!(
                "find {text} is not allowed: find may only search and print, not run programs, delete or write files"
            ));
        }
        if matches!(text, "-follow" | "-L" | "-H") {
            return Err(format!("find {text} is not allowed: {FOLLOWS_LINKS}"));
        }
        if text == "-files0-from" {
            return Err(format!(
                "find -files0-from is not allowed: {NAMES_FROM_FILE}"
            ));
        }
        let takes_path = FIND_PATH.contains(&text)
            || newer_xy(text).is_some_and(|reference_is_file| reference_is_file);
        let takes_text = FIND_TEXT.contains(&text) || newer_xy(text) == Some(false);
        if takes_path || takes_text {
            let Some(value) = words.get(index) else {
                return Err(format!("find {text} needs a value"));
            };
            index += 1;
            if takes_path {
                check_path(sandbox, "find", value)?;
            }
            continue;
        }
        if text.starts_with('-') {
            return Err(format!(
                "find {text} is not in the allowed set; allowed: {} {} {} (each with its value)",
                FIND_FLAGS.join(" "),
                FIND_TEXT.join(" "),
                FIND_PATH.join(" ")
            ));
        }
        return Err(format!(
            "find: unexpected argument `{text}` in the expression (starting points come first)"
        ));
    }
    Ok(())
}

/// `-newerXY`: `Some(true)` when the reference Y is a file, `Some(false)` when it is a time
/// string (`t`), `None` when `text` is not a valid `-newerXY`.
fn newer_xy(text: &str) -> Option<bool> {
    let rest = text.strip_prefix("-newer")?;
    let mut chars = rest.chars();
    let (x, y) = (chars.next()?, chars.next()?);
    if chars.next().is_some() || !"aBcm".contains(x) || !"aBcmt".contains(y) {
        return None;
    }
    Some(y != 't')
}

/// Tokenizes and checks a whole command line.
fn plan(sandbox: &Sandbox, command: &str) -> Result<Vec<Stage>, String> {
    let stages = tokenize(command)?;
    let mut planned = Vec::new();
    for words in stages {
        let Some((head, args)) = words.split_first() else {
            return Err("empty pipeline stage".into());
        };
        let name = head.text.as_str();
        let assigns = name.split_once('=').is_some_and(|(var, _)| {
            !var.is_empty()
                && !var.starts_with(|c: char| c.is_ascii_digit())
                && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assigns {
            return Err(format!(
                "environment assignments (`{name}`) are not supported; run the program directly"
            ));
        }
        if name.contains('/') {
            let base = name.rsplit('/').next().unwrap_or(name);
            return Err(if ALLOWED.contains(&base) {
                format!("name the program bare (`{base}`), not by path (`{name}`)")
            } else {
                format!(
                    "`{name}` is not allowed; the shell tool runs only: {}",
                    allowed_list()
                )
            });
        }
        if !ALLOWED.contains(&name) {
            return Err(format!(
                "`{name}` is not allowed; the shell tool runs only: {} (joined with |)",
                allowed_list()
            ));
        }
        match name {
            "find" => check_find(sandbox, args)?,
            "ls" => check_getopt(sandbox, &LS, args)?,
            "grep" => check_getopt(sandbox, &GREP, args)?,
            "cat" => check_getopt(sandbox, &CAT, args)?,
            "stat" => check_getopt(sandbox, &STAT, args)?,
            "wc" => check_getopt(sandbox, &WC, args)?,
            "head" => check_getopt(sandbox, &HEAD, args)?,
            "tail" => check_getopt(sandbox, &TAIL, args)?,
            _ => return Err(format!("`{name}` is not allowed")),
        }
        let Some(program) = sandbox.programs.path(name) else {
            return Err(format!("`{name}` is not installed on this system"));
        };
        let Some(name) = ALLOWED.iter().copied().find(|allowed| *allowed == name) else {
            return Err(format!("`{name}` is not allowed"));
        };
        planned.push(Stage {
            name,
            program: program.to_path_buf(),
            args: args.iter().map(|w| w.text.clone()).collect(),
            is_grep: name == "grep",
        });
    }
    Ok(planned)
}

/// A close-on-exec pipe.
fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Reads up to `cap` bytes; past it, either stops (closing the pipe, so the writer gets
/// SIGPIPE) and raises `over`, or drains and discards (`drain`).
fn read_capped(mut source: impl Read, cap: usize, over: Arc<AtomicBool>, drain: bool) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                if n > room {
                    over.store(true, Ordering::SeqCst);
                    if !drain {
                        break;
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    kept
}

/// Kills the pipeline's process group while at least one member is still unreaped (so the
/// group id cannot have been reused).
fn kill_group(pgid: i32, children: &mut [(Child, Option<std::process::ExitStatus>)]) {
    if pgid > 0 && children.iter().any(|(_, status)| status.is_none()) {
        // SAFETY: plain kill(2) on our own, still-existing process group.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

pub fn run(sandbox: &Sandbox, command: &str) -> ToolResult {
    let stages = match plan(sandbox, command) {
        Ok(s) => s,
        Err(e) => return ToolResult::error(format!("shell: refused: {e}")),
    };
    match spawn_and_wait(sandbox, &stages) {
        Ok(result) => result,
        Err(e) => ToolResult::error(format!("shell: could not run the command: {e}")),
    }
}

fn spawn_and_wait(sandbox: &Sandbox, stages: &[Stage]) -> std::io::Result<ToolResult> {
    let limits = &sandbox.limits;
    let (err_read, err_write) = pipe()?;
    let mut children: Vec<(Child, Option<std::process::ExitStatus>)> = Vec::new();
    let mut previous: Option<std::process::ChildStdout> = None;
    let mut pgid: i32 = 0;
    let mut last_stdout = None;
    for (position, stage) in stages.iter().enumerate() {
        let mut command = Command::new(&stage.program);
        command
            .arg0(stage.name)
            .args(&stage.args)
            .current_dir(&sandbox.memory_dir)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("LANG", "C")
            .stdin(match previous.take() {
                Some(out) => Stdio::from(out),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err_write.try_clone()?))
            .process_group(pgid);
        if let Some(confinement) = &sandbox.confinement {
            confinement.apply(&mut command);
        }
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                kill_group(pgid, &mut children);
                for (child, _) in &mut children {
                    let _ = child.wait();
                }
                return Err(e);
            }
        };
        if position == 0 {
            pgid = i32::try_from(child.id()).unwrap_or(0);
        }
        let out = child.stdout.take();
        if position + 1 == stages.len() {
            last_stdout = out;
        } else {
            previous = out;
        }
        children.push((child, None));
    }
    drop(err_write);

    let stdout_over = Arc::new(AtomicBool::new(false));
    let stderr_over = Arc::new(AtomicBool::new(false));
    let stdout_reader = last_stdout.map(|out| {
        let (over, cap) = (Arc::clone(&stdout_over), limits.output_cap);
        std::thread::spawn(move || read_capped(out, cap, over, false))
    });
    let stderr_reader = {
        let over = Arc::clone(&stderr_over);
        let file = std::fs::File::from(err_read);
        std::thread::spawn(move || read_capped(file, STDERR_CAP, over, true))
    };

    let deadline = Instant::now() + limits.shell_timeout;
    let mut timed_out = false;
    loop {
        for (child, status) in children.iter_mut() {
            if status.is_none() {
                *status = child.try_wait()?;
            }
        }
        if children.iter().all(|(_, s)| s.is_some()) {
            break;
        }
        if stdout_over.load(Ordering::SeqCst) {
            kill_group(pgid, &mut children);
            break;
        }
        if Instant::now() >= deadline {
            timed_out = true;
            kill_group(pgid, &mut children);
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    for (child, status) in children.iter_mut() {
        if status.is_none() {
            *status = Some(child.wait()?);
        }
    }
    let stdout = stdout_reader
        .and_then(|h| h.join().ok())
        .unwrap_or_default();
    let stderr = stderr_reader.join().unwrap_or_default();
    let truncated = stdout_over.load(Ordering::SeqCst);

    let mut content = String::from_utf8_lossy(&stdout).into_owned();
    if truncated {
        if !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!(
            "[output truncated at {} bytes; narrow the command, e.g. | head or a more specific path]\n",
            limits.output_cap
        ));
    }
    if !stderr.is_empty() {
        content.push_str("[stderr]\n");
        content.push_str(&String::from_utf8_lossy(&stderr));
        if !content.ends_with('\n') {
            content.push('\n');
        }
        if stderr_over.load(Ordering::SeqCst) {
            content.push_str("[stderr truncated]\n");
        }
    }
    let last_status = children.last().and_then(|(_, s)| *s);
    let last_is_grep = stages.last().is_some_and(|s| s.is_grep);
    let mut is_error = false;
    if timed_out {
        is_error = true;
        content.push_str(&format!(
            "[timed out after {} s; the command was killed. Narrow it (a path, -maxdepth, | head)]\n",
            limits.shell_timeout.as_secs_f32()
        ));
    } else if !truncated {
        if let Some(status) = last_status {
            if let Some(code) = status.code() {
                if code != 0 {
                    content.push_str(&format!("[exit status {code}]\n"));
                    is_error = !(last_is_grep && code == 1);
                }
            } else if let Some(signal) = status.signal() {
                content.push_str(&format!("[killed by signal {signal}]\n"));
                is_error = true;
            }
        }
    }
    if content.is_empty() {
        content.push_str("[no output]\n");
    }
    Ok(ToolResult {
        is_error,
        ..ToolResult::ok(content)
    })
}

#[cfg(test)]
mod tokenizer_tests {
    use super::*;

    fn words(command: &str) -> Vec<Vec<(String, bool)>> {
        tokenize(command)
            .unwrap()
            .into_iter()
            .map(|stage| stage.into_iter().map(|w| (w.text, w.glob)).collect())
            .collect()
    }

    #[test]
    fn quoting_follows_sh_and_expands_nothing() {
        let w = |t: &str, g: bool| (t.to_string(), g);
        assert_eq!(
            words(r#"grep 'a b$' "c\"d\\e\x" f\ g *.md '*.md' x\*"#),
            vec![vec![
                w("grep", false),
                w("a b$", false),
                w("c\"d\\e\\x", false),
                w("f g", false),
                w("*.md", true),
                w("*.md", false),
                w("x*", false),
            ]]
        );
        assert_eq!(
            words("cat a|grep -n x |  wc\t-l"),
            vec![
                vec![w("cat", false), w("a", false)],
                vec![w("grep", false), w("-n", false), w("x", false)],
                vec![w("wc", false), w("-l", false)],
            ]
        );
        // A `#` or `~` inside a word is literal, as in sh.
        assert_eq!(
            words("grep a#b~c"),
            vec![vec![w("grep", false), w("a#b~c", false)]]
        );
    }

    #[test]
    fn newer_xy_classifies_its_reference() {
        assert_eq!(newer_xy("-newermt"), Some(false));
        assert_eq!(newer_xy("-neweram"), Some(true));
        assert_eq!(newer_xy("-newerBc"), Some(true));
        assert_eq!(newer_xy("-newertm"), None);
        assert_eq!(newer_xy("-newer"), None);
        assert_eq!(newer_xy("-newermmm"), None);
    }
}
