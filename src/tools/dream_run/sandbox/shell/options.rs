//! Per-program option allow-lists and the path check of every path argument.

use super::tokenize::Word;
use crate::tools::dream_run::sandbox::Sandbox;

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
pub(super) struct Spec {
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

pub(super) const LS: Spec = Spec {
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

pub(super) const GREP: Spec = Spec {
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

pub(super) const CAT: Spec = Spec {
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

pub(super) const STAT: Spec = Spec {
    name: "stat",
    short_flags: "tf",
    short_values: &[('c', Value::Text)],
    long_flags: &["terse", "file-system"],
    long_values: &[("format", Value::Text), ("printf", Value::Text)],
    refused: &[("-L", FOLLOWS_LINKS), ("--dereference", FOLLOWS_LINKS)],
    dash_is_stdin: false,
};

pub(super) const WC: Spec = Spec {
    name: "wc",
    short_flags: "clmwL",
    short_values: &[],
    long_flags: &["bytes", "chars", "lines", "words", "max-line-length"],
    long_values: &[],
    refused: &[("--files0-from", NAMES_FROM_FILE)],
    dash_is_stdin: true,
};

pub(super) const HEAD: Spec = Spec {
    name: "head",
    short_flags: "qvz0123456789",
    short_values: &[('n', Value::Text), ('c', Value::Text)],
    long_flags: &["quiet", "silent", "verbose", "zero-terminated"],
    long_values: &[("lines", Value::Text), ("bytes", Value::Text)],
    refused: &[],
    dash_is_stdin: true,
};

pub(super) const TAIL: Spec = Spec {
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
    if let Err(refusal) = sandbox.check_readable(raw, &canonical) {
        return Err(format!("{program}: {refusal}"));
    }
    // A FIFO would make the command wait for a writer until the timeout, a device may never
    // end: only regular files and directories are arguments.
    match std::fs::metadata(&canonical) {
        Ok(meta) if meta.is_file() || meta.is_dir() => Ok(()),
        Ok(meta) => Err(format!(
            "{program}: {raw} is {}; only regular files and directories can be read",
            crate::files::file_kind(meta.file_type())
        )),
        Err(e) => Err(format!("{program}: {raw}: {e}")),
    }
}

/// Parses a getopt-style program's arguments against its allow-list and checks every path.
/// Returns where the options end: the index of the `--` that ends them (not a `--` given as
/// an option's value), or the number of words.
pub(super) fn check_getopt(
    sandbox: &Sandbox,
    spec: &Spec,
    words: &[Word],
) -> Result<usize, String> {
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
    let mut options_end = words.len();
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
            options_end = index - 1;
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
                // Attached only: some versions take certain values optionally, and then the
                // next word would be an operand the program reads, not a value we skip.
                None => {
                    return Err(format!(
                        "{name} --{option} needs its value attached: --{option}=VALUE"
                    ))
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
        // `-NUM` (a count) stands alone: mixed forms such as `-5n` are parsed differently by
        // different versions (obsolete syntax), so none is guessed.
        let all_digits = cluster.iter().all(char::is_ascii_digit);
        let mut at = 0;
        while at < cluster.len() {
            let c = cluster[at];
            at += 1;
            if let Some(why) = refuse(&format!("-{c}")) {
                return Err(why);
            }
            if c.is_ascii_digit() && !all_digits && spec.short_flags.contains('0') {
                return Err(format!(
                    "{name} {text}: write a count on its own (e.g. -n 5, or -5), not mixed with other options"
                ));
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
    Ok(options_end)
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

pub(super) fn check_find(sandbox: &Sandbox, words: &[Word]) -> Result<(), String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
