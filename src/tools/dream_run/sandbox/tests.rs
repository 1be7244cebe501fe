//! Real temp dirs, real symlinks and FIFOs, real spawned programs.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::*;

const CANARY: &str = "CANARY-7f3a outside the roots";

struct Fixture {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    mem: PathBuf,
    transcripts: PathBuf,
    canary: PathBuf,
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// base/
///   mem/ MEMORY.md topic.md sub/deep.md pipe(FIFO) dir.md/ link.md->../outside/secret.txt
///        linkdir->../outside alias->sub
///   transcripts/ t1.jsonl big.txt
///   outside/ secret.txt (the canary)
fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let mem = base.join("mem");
    let transcripts = base.join("transcripts");
    let outside = base.join("outside");
    for d in [
        &mem,
        &transcripts,
        &outside,
        &mem.join("sub"),
        &mem.join("dir.md"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(
        mem.join("MEMORY.md"),
        "# Memory\n- alpha fact\n- beta fact\n- gamma fact\n",
    )
    .unwrap();
    std::fs::write(mem.join("topic.md"), "topic: alpha\nrepeat\nrepeat\n").unwrap();
    std::fs::write(mem.join("sub/deep.md"), "deep alpha\n").unwrap();
    let canary = outside.join("secret.txt");
    std::fs::write(&canary, CANARY).unwrap();
    symlink("../outside/secret.txt", mem.join("link.md")).unwrap();
    symlink("../outside", mem.join("linkdir")).unwrap();
    symlink("sub", mem.join("alias")).unwrap();
    mkfifo(&mem.join("pipe"));
    std::fs::write(
        transcripts.join("t1.jsonl"),
        "{\"type\":\"user\",\"text\":\"deploy the thing\"}\n",
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        base,
        mem,
        transcripts,
        canary,
    }
}

fn sandbox(f: &Fixture, limits: Limits) -> Sandbox {
    Sandbox::new(&f.mem, std::slice::from_ref(&f.transcripts), limits).unwrap()
}

/// Everything under `dir`, links not followed: type, mode, size, mtime and content.
fn tree(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let ft = meta.file_type();
            let detail = if ft.is_symlink() {
                format!("link {:?}", std::fs::read_link(&path).unwrap())
            } else if ft.is_dir() {
                stack.push(path.clone());
                format!("dir {:o}", meta.mode())
            } else if ft.is_file() {
                format!(
                    "file {:o} {} {:?} {:?}",
                    meta.mode(),
                    meta.len(),
                    meta.modified().unwrap(),
                    std::fs::read(&path).unwrap()
                )
            } else {
                format!("other {:o}", meta.mode())
            };
            out.insert(path, detail);
        }
    }
    out
}

/// A guard that records every path and optionally refuses.
#[derive(Default)]
struct Recorder {
    seen: Vec<PathBuf>,
    refuse: Option<GuardRefusal>,
}

impl WriteGuard for Recorder {
    fn before_write(&mut self, path: &Path, _content: Option<&[u8]>) -> Result<(), GuardRefusal> {
        self.seen.push(path.to_path_buf());
        match &self.refuse {
            Some(r) => Err(r.clone()),
            None => Ok(()),
        }
    }
}

fn shell(command: &str) -> (&'static str, Value) {
    ("shell", json!({ "command": command }))
}

#[test]
fn attack_corpus_is_refused_with_nothing_written() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let long_arg = format!("cat {}", "a".repeat(5000));
    let long_line = format!("ls {}", "a ".repeat(5000));
    let abs_secret = f.canary.display().to_string();
    let abs_outside_md = f.base.join("outside/evil.md").display().to_string();
    let grep_dotdot = "grep CANARY ../outside/secret.txt".to_string();
    let cases: Vec<((&str, Value), &str)> = vec![
        // Redirects.
        (shell("ls > out.md"), "redirects"),
        (shell("ls >> out.md"), "redirects"),
        (shell("cat < /etc/passwd"), "redirects"),
        (shell("ls 2> err.md"), "redirects"),
        (shell("ls &> all.md"), "redirects"),
        (shell("ls >| out.md"), "redirects"),
        // Sequencing and jobs.
        (shell("ls; cat /etc/passwd"), "`;`"),
        (shell("ls && cat /etc/passwd"), "`&&`"),
        (shell("ls || cat /etc/passwd"), "`||`"),
        (shell("ls & cat /etc/passwd"), "`&`"),
        // Pipes into forbidden programs.
        (shell("ls | sh"), "`sh` is not allowed"),
        (shell("cat MEMORY.md | tee out.md"), "`tee` is not allowed"),
        (shell("cat MEMORY.md | xargs rm"), "`xargs` is not allowed"),
        // Substitution and expansion.
        (shell("cat $(echo /etc/passwd)"), "`$` expansion"),
        (shell("cat `echo /etc/passwd`"), "backticks"),
        (shell("cat \"`echo /etc/passwd`\""), "backticks"),
        (shell("cat ${HOME}/.ssh/id_rsa"), "`$` expansion"),
        (shell("cat $HOME"), "`$` expansion"),
        (shell("cat \"$HOME/x\""), "inside double quotes"),
        // Environment assignments.
        (shell("A=b ls"), "environment assignments"),
        (
            shell("LD_PRELOAD=/tmp/x.so cat MEMORY.md"),
            "environment assignments",
        ),
        // find actions.
        (shell("find . -exec cat '{}' +"), "-exec is not allowed"),
        (shell("find . -execdir ls \\;"), "-execdir is not allowed"),
        (shell("find . -ok cat '{}' \\;"), "-ok is not allowed"),
        (shell("find . -okdir cat '{}' \\;"), "-okdir is not allowed"),
        (
            shell("find . -name '*.md' -delete"),
            "-delete is not allowed",
        ),
        (shell("find . -fprint out.md"), "-fprint is not allowed"),
        (shell("find . -fprint0 out.md"), "-fprint0 is not allowed"),
        (
            shell("find . -fprintf out.md %p"),
            "-fprintf is not allowed",
        ),
        (shell("find . -fls out.md"), "-fls is not allowed"),
        (shell("find -L . -name x"), "follows symbolic links"),
        (shell("find . -follow"), "follows symbolic links"),
        (
            shell("find . -files0-from MEMORY.md"),
            "file names read from a file",
        ),
        (shell("find -D tree ."), "not supported"),
        // Paths outside the roots.
        (shell("grep -r root /"), "outside the readable directories"),
        (
            shell("find / -name passwd"),
            "outside the readable directories",
        ),
        (
            shell("cat ../outside/secret.txt"),
            "outside the readable directories",
        ),
        (shell(&grep_dotdot), "outside the readable directories"),
        (
            shell("cat sub/../../outside/secret.txt"),
            "outside the readable directories",
        ),
        (shell("ls .."), "outside the readable directories"),
        (shell("cat /etc/passwd"), "outside the readable directories"),
        (
            shell(&format!("cat {abs_secret}")),
            "outside the readable directories",
        ),
        (
            shell("cat /proc/self/environ"),
            "outside the readable directories",
        ),
        (
            shell("ls -l /proc/self/root"),
            "outside the readable directories",
        ),
        // Symlinks inside the memory dir pointing out.
        (shell("cat link.md"), "resolves to"),
        (shell("ls linkdir/"), "resolves to"),
        (shell("grep -r CANARY linkdir"), "resolves to"),
        (shell("find linkdir -name secret.txt"), "resolves to"),
        (shell("stat -L link.md"), "follows symbolic links"),
        (shell("ls -L ."), "follows symbolic links"),
        (shell("grep -R CANARY ."), "follows symbolic links"),
        // Options that take a path.
        (
            shell("grep -f /etc/passwd MEMORY.md"),
            "outside the readable directories",
        ),
        (
            shell("grep --file=/etc/passwd MEMORY.md"),
            "outside the readable directories",
        ),
        (shell("grep --file /etc/passwd MEMORY.md"), "--file=VALUE"),
        (
            shell("grep --context /etc/passwd x MEMORY.md"),
            "--context=VALUE",
        ),
        (
            shell("grep -f/etc/passwd MEMORY.md"),
            "outside the readable directories",
        ),
        (
            shell("grep -rf /etc/passwd ."),
            "outside the readable directories",
        ),
        (
            shell("grep -r --exclude-from=/etc/passwd x ."),
            "outside the readable directories",
        ),
        (
            shell("find . -newer /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("find . -anewer ../outside/secret.txt"),
            "outside the readable directories",
        ),
        (
            shell("find . -cnewer /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("find . -samefile /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("find . -newermm /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("wc --files0-from=MEMORY.md"),
            "file names read from a file",
        ),
        // `--` tricks.
        (
            shell("grep -- -f /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("cat -- ../outside/secret.txt"),
            "outside the readable directories",
        ),
        (
            shell("head -n 5 -- /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("grep -e x -- /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("grep x MEMORY.md -- --file=/etc/passwd"),
            "no such file",
        ),
        // Quoting and escaping do not hide a path.
        (
            shell("cat '/etc/passwd'"),
            "outside the readable directories",
        ),
        (
            shell("cat \"/etc\"/passwd"),
            "outside the readable directories",
        ),
        (
            shell("cat \\/etc\\/passwd"),
            "outside the readable directories",
        ),
        (shell("grep -rn x . /"), "outside the readable directories"),
        (
            shell("find . / -name x"),
            "outside the readable directories",
        ),
        (
            shell("find . -path x -o -newer /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("grep -e x -f /etc/passwd"),
            "outside the readable directories",
        ),
        (shell("ls -I x /etc"), "outside the readable directories"),
        (
            shell("head -c1 /etc/passwd"),
            "outside the readable directories",
        ),
        (
            shell("cat MEMORY.md | grep -f /etc/passwd"),
            "outside the readable directories",
        ),
        (shell("find . -name x -newer"), "needs a value"),
        (shell("find -- . -name x"), "not in the allowed set"),
        (shell("find . -name x /etc"), "unexpected argument"),
        // Unknown or abbreviated options.
        (
            shell("grep --fil=/etc/passwd x MEMORY.md"),
            "not in the allowed set",
        ),
        (shell("ls --color=always"), "not in the allowed set"),
        (shell("tail -f MEMORY.md"), "never ends"),
        (shell("head -5n /etc/passwd"), "a count on its own"),
        (shell("tail -5f MEMORY.md"), "a count on its own"),
        (shell("tail --follow=name MEMORY.md"), "never ends"),
        (shell("find . -xtype l"), "not in the allowed set"),
        // Other programs, by name or path.
        (shell("rm MEMORY.md"), "`rm` is not allowed"),
        (shell("sh -c ls"), "`sh` is not allowed"),
        (shell("/bin/ls"), "bare"),
        (shell("/usr/bin/cat MEMORY.md"), "bare"),
        (shell("./ls"), "bare"),
        // Line breaks, NUL, long input.
        (shell("ls\nrm MEMORY.md"), "line break"),
        (shell("ls\rcat /etc/passwd"), "line break"),
        (shell("cat 'MEMORY.md\n/etc/passwd'"), "line break"),
        (shell("cat MEMORY.md\u{0}/etc/passwd"), "NUL"),
        (shell("cat MEMORY.md\u{1b}[2J"), "control character"),
        (shell(&long_arg), "limit is 4096"),
        (shell(&long_line), "limit is 8192"),
        // Unicode look-alikes and invisible characters.
        (shell("\u{FF4C}\u{FF53}"), "is not allowed"),
        (shell("ls \u{FF5C} sh"), "looks like a shell operator"),
        (
            shell("ls\u{FF1B}rm MEMORY.md"),
            "looks like a shell operator",
        ),
        (shell("ls\u{200B} ."), "invisible"),
        (shell("cat\u{00A0}/etc/passwd"), "invisible"),
        // Empty and malformed.
        (shell(""), "empty"),
        (shell("   \t "), "empty"),
        (shell("ls |"), "ends with `|`"),
        (shell("| ls"), "no command before"),
        (shell("ls | | wc"), "no command before"),
        (shell("(ls)"), "subshells"),
        (shell("{ ls; }"), "braces"),
        (shell("ls *.md"), "glob"),
        (shell("cat ~/.ssh/id_rsa"), "`~` is not expanded"),
        (shell("cat 'unterminated"), "unterminated"),
        (shell("ls # comment"), "comments"),
        (shell("cat pipe-missing.md"), "no such file"),
        (("shell", json!({ "command": 42 })), "must be a string"),
        (("shell", json!({})), "missing required field"),
        (("shell", json!("ls")), "must be a JSON object"),
        (("bash", json!({ "command": "ls" })), "unknown tool"),
        // Writes outside, through links, into forbidden places, non-.md.
        (
            (
                "write_file",
                json!({"path": "/etc/evil.md", "content": "x"}),
            ),
            "outside the memory directory",
        ),
        (
            (
                "write_file",
                json!({"path": abs_outside_md, "content": "x"}),
            ),
            "outside the memory directory",
        ),
        (
            (
                "write_file",
                json!({"path": "../outside/evil.md", "content": "x"}),
            ),
            "`..`",
        ),
        (
            (
                "write_file",
                json!({"path": "sub/../../outside/evil.md", "content": "x"}),
            ),
            "`..`",
        ),
        (
            ("write_file", json!({"path": "notes.txt", "content": "x"})),
            "only .md",
        ),
        (
            ("write_file", json!({"path": "run.sh", "content": "x"})),
            "only .md",
        ),
        (
            ("write_file", json!({"path": ".md", "content": "x"})),
            "only .md",
        ),
        (
            ("write_file", json!({"path": ".", "content": "x"})),
            "memory directory itself",
        ),
        (
            (
                "write_file",
                json!({"path": ".git/config.md", "content": "x"}),
            ),
            "may not live under",
        ),
        (
            ("write_file", json!({"path": ".GIT/x.md", "content": "x"})),
            "may not live under",
        ),
        (
            ("write_file", json!({"path": "agents/x.md", "content": "x"})),
            "may not live under",
        ),
        (
            ("write_file", json!({"path": "Agents/x.md", "content": "x"})),
            "may not live under",
        ),
        (
            (
                "write_file",
                json!({"path": "sub/AGENTS/x.md", "content": "x"}),
            ),
            "may not live under",
        ),
        (
            (
                "write_file",
                json!({"path": "hooks/pre-commit.md", "content": "x"}),
            ),
            "may not live under",
        ),
        (
            (
                "write_file",
                json!({"path": ".claude/settings.md", "content": "x"}),
            ),
            "may not live under",
        ),
        (
            ("write_file", json!({"path": "Skills/s.md", "content": "x"})),
            "may not live under",
        ),
        (
            (
                "write_file",
                json!({"path": ".vscode/x.md", "content": "x"}),
            ),
            "may not live under",
        ),
        (
            (
                "edit_file",
                json!({"path": "node_modules/x.md", "old_string": "a", "new_string": "b"}),
            ),
            "may not live under",
        ),
        (
            ("write_file", json!({"path": "link.md", "content": "x"})),
            "symbolic link",
        ),
        (
            (
                "write_file",
                json!({"path": "linkdir/evil.md", "content": "x"}),
            ),
            "symbolic link",
        ),
        (
            (
                "write_file",
                json!({"path": "alias/deep.md", "content": "x"}),
            ),
            "symbolic link",
        ),
        (
            (
                "write_file",
                json!({"path": "alias/new/x.md", "content": "x"}),
            ),
            "symbolic link",
        ),
        (
            (
                "edit_file",
                json!({"path": "link.md", "old_string": "CANARY", "new_string": "x"}),
            ),
            "symbolic link",
        ),
        (("delete_file", json!({"path": "link.md"})), "symbolic link"),
        (
            ("delete_file", json!({"path": "alias/deep.md"})),
            "symbolic link",
        ),
        (
            ("delete_file", json!({"path": "../outside/secret.txt"})),
            "`..`",
        ),
        (
            ("delete_file", json!({"path": abs_secret})),
            "outside the memory directory",
        ),
        (
            ("write_file", json!({"path": "dir.md", "content": "x"})),
            "not a regular file",
        ),
        (
            ("delete_file", json!({"path": "dir.md"})),
            "not a regular file",
        ),
        (
            ("write_file", json!({"path": "a\u{0}.md", "content": "x"})),
            "control character",
        ),
        (("write_file", json!({"path": "", "content": "x"})), "empty"),
        (
            ("write_file", json!({"path": 7, "content": "x"})),
            "must be a string",
        ),
        (
            ("write_file", json!({"path": "x.md"})),
            "missing required field",
        ),
        (
            (
                "write_file",
                json!({"path": "x.md", "content": "x".repeat(300 * 1024)}),
            ),
            "capped",
        ),
        (
            ("delete_file", json!({"path": "nothing.md"})),
            "does not exist",
        ),
        (
            (
                "edit_file",
                json!({"path": "nothing.md", "old_string": "a", "new_string": "b"}),
            ),
            "does not exist",
        ),
        (
            (
                "edit_file",
                json!({"path": "topic.md", "old_string": 1, "new_string": "b"}),
            ),
            "must be a string",
        ),
        // Reads outside the roots or of special files.
        (
            ("read_file", json!({"path": "../outside/secret.txt"})),
            "outside the readable directories",
        ),
        (("read_file", json!({"path": "link.md"})), "resolves to"),
        (
            ("read_file", json!({"path": "/etc/passwd"})),
            "outside the readable directories",
        ),
        (("read_file", json!({"path": "pipe"})), "not a regular file"),
        (("read_file", json!({"path": "sub"})), "a directory"),
        (
            ("read_file", json!({"path": "MEMORY.md", "offset": "x"})),
            "`offset` must be an integer, not a string",
        ),
        (
            ("read_file", json!({"path": "MEMORY.md", "limit": -3})),
            "`limit` must be at least 1, not -3",
        ),
        (
            ("read_file", json!({"path": ["MEMORY.md"]})),
            "must be a string",
        ),
    ];
    assert!(cases.len() >= 60, "{} cases", cases.len());
    let before = tree(&f.base);
    let canary_meta = std::fs::metadata(&f.canary).unwrap();
    for ((tool, input), expected) in &cases {
        let mut guard = Recorder::default();
        let result = sb.call(tool, input, &mut guard);
        assert!(
            result.is_error,
            "{tool} {input} was not refused: {result:?}"
        );
        assert!(
            result.content.contains(expected),
            "{tool} {input}: expected {expected:?} in {:?}",
            result.content
        );
        assert!(
            !result.content.contains("CANARY-7f3a"),
            "{tool} {input} leaked"
        );
        assert!(result.touched.is_none() && result.read_path.is_none() && !result.stop_run);
        assert!(guard.seen.is_empty(), "{tool} {input} reached the guard");
        assert_eq!(tree(&f.base), before, "{tool} {input} changed the tree");
    }
    assert_eq!(std::fs::read_to_string(&f.canary).unwrap(), CANARY);
    let after = std::fs::metadata(&f.canary).unwrap();
    assert_eq!(after.modified().unwrap(), canary_meta.modified().unwrap());
    assert_eq!(after.mode(), canary_meta.mode());
}

fn ok_shell(sb: &mut Sandbox, command: &str) -> String {
    let result = sb.call("shell", &json!({ "command": command }), &mut AllowAll);
    assert!(!result.is_error, "{command}: {result:?}");
    result.content
}

#[test]
fn allowed_commands_run_and_never_leave_the_roots() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let ls = ok_shell(&mut sb, "ls");
    assert!(ls.contains("MEMORY.md") && ls.contains("topic.md"), "{ls}");
    let found = ok_shell(&mut sb, "find . -name '*.md' -type f");
    assert!(
        found.contains("./sub/deep.md") && found.contains("./MEMORY.md"),
        "{found}"
    );
    // find does not follow the link out of the memory dir.
    assert!(!found.contains("secret"), "{found}");
    let grep = ok_shell(&mut sb, "grep -rn alpha .");
    assert!(grep.contains("./MEMORY.md:2:- alpha fact"), "{grep}");
    assert!(grep.contains("./sub/deep.md:1:deep alpha"), "{grep}");
    // grep -r never descends through linkdir or reads link.md's target.
    let canary = ok_shell(&mut sb, "grep -rl CANARY .");
    assert!(
        !canary.contains("CANARY") && canary.contains("[exit status 1]"),
        "{canary}"
    );
    assert_eq!(ok_shell(&mut sb, "cat MEMORY.md | head -n 1"), "# Memory\n");
    assert_eq!(ok_shell(&mut sb, "wc -l MEMORY.md"), "4 MEMORY.md\n");
    assert_eq!(
        ok_shell(&mut sb, "cat MEMORY.md | grep fact | wc -l"),
        "3\n"
    );
    assert_eq!(ok_shell(&mut sb, "grep -c 'repeat$' topic.md"), "2\n");
    assert_eq!(ok_shell(&mut sb, "stat -c %s topic.md"), "27\n");
    assert_eq!(ok_shell(&mut sb, "tail -n 1 sub/deep.md"), "deep alpha\n");
    assert_eq!(
        ok_shell(&mut sb, "head -2 MEMORY.md | tail -1"),
        "- alpha fact\n"
    );
    let grouped = ok_shell(
        &mut sb,
        "find . -maxdepth 1 \\( -name 'topic*' -o -name MEMORY.md \\) -newer sub -print",
    );
    assert!(
        grouped.contains("./topic.md") || grouped == "[no output]\n",
        "{grouped}"
    );
    let listed = ok_shell(&mut sb, "ls -la --sort=size sub alias");
    assert!(listed.contains("deep.md"), "{listed}");
    assert_eq!(ok_shell(&mut sb, "ls -1a sub"), ".\n..\ndeep.md\n");
    assert_eq!(
        ok_shell(&mut sb, "grep -m1 fact MEMORY.md"),
        "- alpha fact\n"
    );
    let t = f.transcripts.join("t1.jsonl").display().to_string();
    assert_eq!(
        ok_shell(&mut sb, &format!("grep -o \"deploy\" {t}")),
        "deploy\n"
    );
    // Quoted glob characters are literal patterns; -e makes every operand a path.
    assert_eq!(
        ok_shell(&mut sb, "grep -h -e 'a.pha f' -- MEMORY.md"),
        "- alpha fact\n"
    );
    // The first-stage stdin is empty; grep without a match reports status 1, not an error.
    let none = sb.call(
        "shell",
        &json!({"command": "grep zzz MEMORY.md"}),
        &mut AllowAll,
    );
    assert!(
        !none.is_error && none.content.contains("[exit status 1]"),
        "{none:?}"
    );
    // A failing program is reported with its stderr.
    let failed = sb.call(
        "shell",
        &json!({"command": "head -n x MEMORY.md"}),
        &mut AllowAll,
    );
    assert!(
        failed.is_error && failed.content.contains("[stderr]"),
        "{failed:?}"
    );
}

#[test]
fn output_is_capped_with_a_note() {
    let f = fixture();
    let big = f.transcripts.join("big.txt");
    std::fs::write(&big, "0123456789abcdef\n".repeat(100_000)).unwrap();
    let limits = Limits {
        output_cap: 4096,
        ..Limits::default()
    };
    let mut sb = sandbox(&f, limits);
    let result = sb.call(
        "shell",
        &json!({ "command": format!("cat {}", big.display()) }),
        &mut AllowAll,
    );
    assert!(!result.is_error, "{result:?}");
    assert!(
        result.content.contains("[output truncated at 4096 bytes"),
        "{}",
        &result.content[4000..]
    );
    assert!(result.content.len() < 4096 + 200);
    // A reader that stops early ends the pipeline (cat gets SIGPIPE); that is no error.
    let first = sb.call(
        "shell",
        &json!({ "command": format!("cat {} | head -n 1", big.display()) }),
        &mut AllowAll,
    );
    assert_eq!(first.content, "0123456789abcdef\n");
    assert!(!first.is_error);
    let read = sb.call(
        "read_file",
        &json!({ "path": big.display().to_string() }),
        &mut AllowAll,
    );
    assert!(!read.is_error);
    assert!(read.content.len() <= 4096 + 100 && read.content.contains("output cap of 4096 bytes"));
}

#[test]
fn a_command_that_blocks_is_killed_at_the_timeout() {
    let f = fixture();
    let limits = Limits {
        shell_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let mut sb = sandbox(&f, limits);
    // A FIFO nobody writes to would block cat: it is refused before anything runs.
    let result = sb.call(
        "shell",
        &json!({ "command": "cat pipe | wc -l" }),
        &mut AllowAll,
    );
    assert!(result.is_error, "{result:?}");
    assert!(
        result
            .content
            .contains("pipe is a FIFO; only regular files and directories"),
        "{result:?}"
    );
    // 64 GiB of zeros (sparse: no disk used) take far longer than the timeout to read: the
    // whole pipeline is killed.
    let big = f.mem.join("huge.bin");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(64 << 30)
        .unwrap();
    let start = std::time::Instant::now();
    let result = sb.call(
        "shell",
        &json!({ "command": "cat huge.bin | wc -c" }),
        &mut AllowAll,
    );
    assert!(result.is_error, "{result:?}");
    assert!(result.content.contains("timed out"), "{result:?}");
    assert!(start.elapsed() < Duration::from_secs(30));
}

#[test]
fn read_file_numbers_lines_and_pages() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let all = sb.call("read_file", &json!({"path": "MEMORY.md"}), &mut AllowAll);
    assert!(!all.is_error);
    assert_eq!(
        all.content,
        "     1\t# Memory\n     2\t- alpha fact\n     3\t- beta fact\n     4\t- gamma fact\n"
    );
    assert_eq!(all.read_path, Some(f.mem.join("MEMORY.md")));
    let page = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "offset": 2, "limit": 2}),
        &mut AllowAll,
    );
    assert_eq!(
        page.content,
        "     2\t- alpha fact\n     3\t- beta fact\n[more lines follow; continue with offset=4]\n"
    );
    let past = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "offset": 9}),
        &mut AllowAll,
    );
    assert!(past.is_error && past.content.contains("past the end"));
    // Absolute paths into another root work.
    let t = f.transcripts.join("t1.jsonl");
    let other = sb.call(
        "read_file",
        &json!({"path": t.display().to_string()}),
        &mut AllowAll,
    );
    assert!(!other.is_error && other.content.contains("deploy the thing"));
    assert_eq!(other.read_path, Some(t));
    // A huge line (base64 in a transcript) is cut, not loaded whole.
    let huge = f.transcripts.join("huge.jsonl");
    std::fs::write(&huge, format!("{}\nsecond\n", "x".repeat(3_000_000))).unwrap();
    let cut = sb.call(
        "read_file",
        &json!({"path": huge.display().to_string()}),
        &mut AllowAll,
    );
    assert!(!cut.is_error);
    assert!(
        cut.content
            .contains("[line cut at 2000 characters]\n     2\tsecond\n"),
        "{}",
        cut.content.len()
    );
    assert!(cut.content.len() < 2100);
}

#[test]
fn read_file_refuses_a_window_holding_a_nul_byte() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    std::fs::write(f.mem.join("bin.md"), b"text\nha\0lf\nmore\n").unwrap();
    let refused = sb.call("read_file", &json!({"path": "bin.md"}), &mut AllowAll);
    assert!(refused.is_error);
    assert_eq!(
        refused.content,
        "bin.md: line 2 holds a NUL byte: not a text file, nothing of it is shown"
    );
    assert_eq!(refused.read_path, None);
    // A window without it is shown: the line before, the line after.
    let before = sb.call(
        "read_file",
        &json!({"path": "bin.md", "limit": 1}),
        &mut AllowAll,
    );
    assert!(!before.is_error, "{}", before.content);
    assert_eq!(
        before.content,
        "     1\ttext\n[more lines follow; continue with offset=2]\n"
    );
    let after = sb.call(
        "read_file",
        &json!({"path": "bin.md", "offset": 3}),
        &mut AllowAll,
    );
    assert!(!after.is_error, "{}", after.content);
    assert_eq!(after.content, "     3\tmore\n");
}

#[test]
fn write_edit_delete_land_atomically_with_modes() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let mut guard = Recorder::default();
    // Create, with parent directories.
    let created = sb.call(
        "write_file",
        &json!({"path": "people/alice.md", "content": "Alice likes tea\n"}),
        &mut guard,
    );
    let target = f.mem.join("people/alice.md");
    assert!(!created.is_error, "{created:?}");
    assert_eq!(created.touched, Some((target.clone(), Change::Created)));
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "Alice likes tea\n"
    );
    assert_eq!(std::fs::metadata(&target).unwrap().mode() & 0o777, 0o644);
    assert!(std::fs::metadata(f.mem.join("people")).unwrap().is_dir());
    // Replace an existing file: its mode is kept. Absolute paths inside work.
    std::fs::set_permissions(
        f.mem.join("topic.md"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let abs = f.mem.join("topic.md").display().to_string();
    let replaced = sb.call(
        "write_file",
        &json!({"path": abs, "content": "new topic\n"}),
        &mut guard,
    );
    assert_eq!(
        replaced.touched,
        Some((f.mem.join("topic.md"), Change::Modified))
    );
    assert_eq!(
        std::fs::read_to_string(f.mem.join("topic.md")).unwrap(),
        "new topic\n"
    );
    assert_eq!(
        std::fs::metadata(f.mem.join("topic.md")).unwrap().mode() & 0o777,
        0o600
    );
    // Edit: exactly one match.
    let edited = sb.call(
        "edit_file",
        &json!({"path": "MEMORY.md", "old_string": "beta fact", "new_string": "beta fact (2026-12-03)"}),
        &mut guard,
    );
    assert!(!edited.is_error, "{edited:?}");
    assert_eq!(
        edited.touched,
        Some((f.mem.join("MEMORY.md"), Change::Modified))
    );
    assert_eq!(
        std::fs::read_to_string(f.mem.join("MEMORY.md")).unwrap(),
        "# Memory\n- alpha fact\n- beta fact (2026-12-03)\n- gamma fact\n"
    );
    // Delete.
    let deleted = sb.call("delete_file", &json!({"path": "sub/deep.md"}), &mut guard);
    assert_eq!(
        deleted.touched,
        Some((f.mem.join("sub/deep.md"), Change::Deleted))
    );
    assert!(!f.mem.join("sub/deep.md").exists());
    assert_eq!(
        guard.seen,
        vec![
            target,
            f.mem.join("topic.md"),
            f.mem.join("MEMORY.md"),
            f.mem.join("sub/deep.md")
        ]
    );
    // No temporary files are left behind.
    let leftovers = ok_shell(&mut sb, "find . -name '.dreamkit-*'");
    assert_eq!(leftovers, "[no output]\n");
}

#[test]
fn edit_needs_exactly_one_match() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let before = tree(&f.base);
    let none = sb.call(
        "edit_file",
        &json!({"path": "topic.md", "old_string": "absent", "new_string": "x"}),
        &mut AllowAll,
    );
    assert!(
        none.is_error && none.content.contains("was not found"),
        "{none:?}"
    );
    let two = sb.call(
        "edit_file",
        &json!({"path": "topic.md", "old_string": "repeat", "new_string": "x"}),
        &mut AllowAll,
    );
    assert!(
        two.is_error && two.content.contains("occurs 2 times"),
        "{two:?}"
    );
    assert_eq!(tree(&f.base), before);
}

#[test]
fn a_guard_refusal_stops_the_write_and_the_run() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let before = tree(&f.base);
    let mut guard = Recorder {
        refuse: Some(GuardRefusal {
            message: "lock lost: another dream holds the lock".into(),
            stop_run: true,
        }),
        ..Recorder::default()
    };
    for (tool, input) in [
        (
            "write_file",
            json!({"path": "new/dir/x.md", "content": "x"}),
        ),
        ("write_file", json!({"path": "MEMORY.md", "content": "x"})),
        (
            "edit_file",
            json!({"path": "MEMORY.md", "old_string": "alpha", "new_string": "x"}),
        ),
        ("delete_file", json!({"path": "MEMORY.md"})),
    ] {
        let result = sb.call(tool, &input, &mut guard);
        assert!(result.is_error && result.stop_run, "{tool}: {result:?}");
        assert_eq!(result.content, "lock lost: another dream holds the lock");
        assert_eq!(result.touched, None);
        // Not even the parent directories were created.
        assert_eq!(tree(&f.base), before, "{tool}");
    }
    assert_eq!(guard.seen.len(), 4);
}

#[test]
fn landlock_confines_spawned_programs_when_active() {
    let f = fixture();
    let sb = sandbox(&f, Limits::default());
    eprintln!("landlock active: {}", sb.landlock_active());
    let Some(confinement) = &sb.confinement else {
        return;
    };
    let cat = sb.programs.path("cat").unwrap();
    let run = |path: &Path| {
        let mut command = std::process::Command::new(cat);
        command.arg(path).env_clear();
        confinement.apply(&mut command);
        command.output().unwrap()
    };
    // Inside a root: readable. Outside (the canary, reached directly): denied by the kernel.
    assert!(run(&f.mem.join("MEMORY.md")).status.success());
    let denied = run(&f.canary);
    assert!(!denied.status.success());
    assert!(String::from_utf8_lossy(&denied.stderr).contains("Permission denied"));
    // And no writes anywhere, even inside the roots (find -fprint called directly here).
    let find = sb.programs.path("find").unwrap();
    let out = f.mem.join("written.txt");
    let mut command = std::process::Command::new(find);
    command.arg(&f.mem).arg("-fprint").arg(&out).env_clear();
    confinement.apply(&mut command);
    assert!(!command.output().unwrap().status.success());
    assert!(!out.exists());
}

#[test]
fn a_memory_dir_reached_through_a_symlink_works_under_both_spellings() {
    let f = fixture();
    let spelled = f.base.join("mem-link");
    symlink(&f.mem, &spelled).unwrap();
    let mut sb = Sandbox::new(&spelled, &[], Limits::default()).unwrap();
    assert_eq!(sb.memory_dir(), f.mem.as_path());
    assert_eq!(sb.readable_roots(), std::slice::from_ref(&f.mem));
    let via_link = spelled.join("via-link.md").display().to_string();
    let written = sb.call(
        "write_file",
        &json!({"path": via_link, "content": "x\n"}),
        &mut AllowAll,
    );
    assert_eq!(
        written.touched,
        Some((f.mem.join("via-link.md"), Change::Created))
    );
    assert_eq!(
        std::fs::read_to_string(f.mem.join("via-link.md")).unwrap(),
        "x\n"
    );
    // The transcripts dir is not a root here.
    let t = f.transcripts.join("t1.jsonl").display().to_string();
    let refused = sb.call(
        "shell",
        &json!({"command": format!("cat {t}")}),
        &mut AllowAll,
    );
    assert!(refused.is_error && refused.content.contains("outside the readable directories"));
    // A memory dir that does not exist is an error, not a sandbox over nothing.
    assert!(Sandbox::new(&f.base.join("missing"), &[], Limits::default()).is_err());
}

#[test]
fn tool_specs_name_the_five_tools_with_object_schemas() {
    let specs = Sandbox::tool_specs();
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "shell",
            "read_file",
            "write_file",
            "edit_file",
            "delete_file"
        ]
    );
    for spec in &specs {
        assert_eq!(spec.input_schema["type"], "object");
        assert!(spec.input_schema["required"].is_array());
    }
}

#[test]
fn default_limits_are_the_specified_ones() {
    let limits = Limits::default();
    assert_eq!(limits.shell_timeout, Duration::from_secs(10));
    assert_eq!(limits.output_cap, 64 * 1024);
    assert_eq!(limits.max_file_bytes, 256 * 1024);
    assert_eq!(limits.read_default_lines, 2000);
}

/// The input schemas say what they said when they were written by hand (with the additions
/// that `offset` and `limit` may be null, which the parser has always read as absent, and the
/// optional `sources` of the three writing tools), as plain object schemas: no `$schema`,
/// `title` or `$defs`.
#[test]
fn tool_input_schemas_are_derived_with_the_hand_written_content() {
    let path =
        json!({"type": "string", "description": "Absolute, or relative to the memory directory"});
    let line = json!({"type": ["integer", "null"], "minimum": 1});
    let sources = |description: &str| {
        json!({
            "type": ["array", "null"],
            "description": description,
            "items": {
                "type": "object",
                "properties": {
                    "session": {"type": "string", "description": "The session id (a transcript's file name without .jsonl)"},
                    "quote": {"type": ["string", "null"], "description": "A short exact quote from that session (at most 300 characters)"}
                },
                "required": ["session"],
                "additionalProperties": false
            }
        })
    };
    let facts = sources("Where each new or changed fact comes from");
    let expected = [
        json!({
            "type": "object",
            "properties": {"command": {"type": "string", "description": "e.g. grep -rn 'deploy' . | head -20"}},
            "required": ["command"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {"path": path, "offset": line, "limit": line},
            "required": ["path"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {"path": path, "content": {"type": "string"}, "sources": facts},
            "required": ["path", "content"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {
                "path": path,
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
                "sources": facts
            },
            "required": ["path", "old_string", "new_string"],
            "additionalProperties": false
        }),
        json!({
            "type": "object",
            "properties": {"path": path, "sources": sources("What shows the memory is wrong or no longer needed")},
            "required": ["path"],
            "additionalProperties": false
        }),
    ];
    let specs = Sandbox::tool_specs();
    assert_eq!(specs.len(), expected.len());
    for (spec, expected) in specs.iter().zip(&expected) {
        assert_eq!(&spec.input_schema, expected, "{}", spec.name);
        jsonschema::draft202012::meta::validate(&spec.input_schema).unwrap();
    }
}

/// A field the schema does not name is refused before anything runs, with a tool error that
/// names the field and the ones the tool takes.
#[test]
fn an_extra_field_is_refused_with_a_tool_error_naming_it() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let calls = [
        ("shell", json!({"command": "ls", "cwd": "/"})),
        ("read_file", json!({"path": "MEMORY.md", "lines": 3})),
        (
            "write_file",
            json!({"path": "new.md", "content": "x\n", "mode": 420}),
        ),
        (
            "edit_file",
            json!({"path": "topic.md", "old_string": "alpha", "new_string": "beta", "replace_all": true}),
        ),
        ("delete_file", json!({"path": "topic.md", "force": true})),
    ];
    let before = tree(&f.base);
    for (tool, input) in &calls {
        let mut guard = Recorder::default();
        let result = sb.call(tool, input, &mut guard);
        let extra = input
            .as_object()
            .unwrap()
            .keys()
            .next_back()
            .unwrap()
            .clone();
        assert!(result.is_error, "{tool} {input}: {result:?}");
        assert!(
            result.content.starts_with(&format!(
                "{tool}: unknown field `{extra}`; the fields are `"
            )),
            "{}",
            result.content
        );
        assert!(
            result
                .content
                .ends_with(&format!("call it again without `{extra}`")),
            "{}",
            result.content
        );
        assert!(result.touched.is_none() && result.read_path.is_none());
        assert!(guard.seen.is_empty());
    }
    assert_eq!(tree(&f.base), before);
    let read = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "lines": 3}),
        &mut AllowAll,
    );
    assert_eq!(
        read.content,
        "read_file: unknown field `lines`; the fields are `path`, `offset`, `limit`: call it again without `lines`"
    );
}

/// Null in an optional field is the field left out; a whole float is an integer.
#[test]
fn read_file_takes_null_as_absent_and_whole_floats_as_integers() {
    let f = fixture();
    let mut sb = sandbox(&f, Limits::default());
    let all = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "offset": null, "limit": null}),
        &mut AllowAll,
    );
    assert!(
        !all.is_error && all.content.contains("gamma fact"),
        "{all:?}"
    );
    let one = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "offset": 2.0, "limit": 1.0}),
        &mut AllowAll,
    );
    assert!(one.content.starts_with("     2\t- alpha fact\n"), "{one:?}");
    let zero = sb.call(
        "read_file",
        &json!({"path": "MEMORY.md", "offset": 0}),
        &mut AllowAll,
    );
    assert_eq!(
        zero.content,
        "read_file: `offset` must be at least 1, not 0"
    );
}

mod schema_agreement {
    use proptest::prelude::*;
    use serde::de::DeserializeOwned;
    use serde_json::{json, Map, Value};

    use super::super::input::{
        self, DeleteFileInput, EditFileInput, ReadFileInput, ShellInput, WriteFileInput,
    };
    use crate::cli::props::config;

    /// Values of every JSON type, and the integers around the bounds.
    fn value() -> impl Strategy<Value = Value> {
        prop::sample::select(vec![
            json!("x"),
            json!(""),
            json!(0),
            json!(1),
            json!(2),
            json!(-1),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(1.5),
            json!(3.0),
            json!(0.0),
            json!(-2.0),
            json!(1e300),
            Value::Null,
            json!(true),
            json!([]),
            json!(["x"]),
            json!({}),
        ])
    }

    /// Objects made of the tool's own fields and others, in any mix.
    fn object(fields: &'static [&'static str]) -> impl Strategy<Value = Map<String, Value>> {
        let mut keys: Vec<&'static str> = fields.to_vec();
        keys.extend(["extra", "Path", ""]);
        prop::collection::vec((prop::sample::select(keys), value()), 0..6)
            .prop_map(|pairs| pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// `schema` with every `"type": [A, B]` written as the `anyOf` of each type, which means
    /// the same in JSON Schema: jsonschema 0.33 refuses a whole float such as `3.0` for
    /// `"type": ["integer", "null"]` though it takes it for `"type": "integer"` (2020-12
    /// counts `3.0` as an integer, as the model API and our own check do).
    fn without_type_lists(mut schema: Value) -> Value {
        match &mut schema {
            Value::Object(object) => {
                if let Some(Value::Array(types)) = object.get("type").cloned() {
                    object.remove("type");
                    let each: Vec<Value> =
                        types.into_iter().map(|t| json!({ "type": t })).collect();
                    object.insert("anyOf".into(), Value::Array(each));
                }
                for value in object.values_mut() {
                    *value = without_type_lists(value.take());
                }
            }
            Value::Array(items) => {
                for item in items {
                    *item = without_type_lists(item.take());
                }
            }
            _ => {}
        }
        schema
    }

    #[test]
    fn a_type_list_becomes_an_any_of_with_the_same_meaning() {
        let schema = without_type_lists(json!({
            "properties": {"offset": {"type": ["integer", "null"], "minimum": 1}}
        }));
        assert_eq!(
            schema,
            json!({"properties": {"offset": {
                "anyOf": [{"type": "integer"}, {"type": "null"}],
                "minimum": 1
            }}})
        );
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        assert!(validator.is_valid(&json!({"offset": 3.0})));
        assert!(validator.is_valid(&json!({"offset": null})));
        assert!(!validator.is_valid(&json!({"offset": 0})));
        assert!(!validator.is_valid(&json!({"offset": 1.5})));
    }

    /// The advertised schema, the refusal check and serde agree on `input`.
    fn agree<T: schemars::JsonSchema + DeserializeOwned>(
        tool: &str,
        input: &Map<String, Value>,
    ) -> Result<(), TestCaseError> {
        let schema = without_type_lists(input::schema_of::<T>());
        let validator = jsonschema::draft202012::new(&schema).unwrap();
        let object = Value::Object(input.clone());
        let schema_says = validator.is_valid(&object);
        let parse_says = input::parse::<T>(tool, input);
        let serde_says = serde_json::from_value::<T>(object.clone()).is_ok();
        prop_assert_eq!(
            schema_says,
            parse_says.is_ok(),
            "{} {} {:?}",
            tool,
            object,
            parse_says.err()
        );
        prop_assert_eq!(schema_says, serde_says, "{} {}", tool, object);
        Ok(())
    }

    proptest! {
        #![proptest_config(config(512))]

        #[test]
        fn each_schema_accepts_exactly_what_its_struct_parses(
            shell in object(&["command"]),
            read in object(&["path", "offset", "limit"]),
            write in object(&["path", "content"]),
            edit in object(&["path", "old_string", "new_string"]),
            delete in object(&["path"]),
        ) {
            agree::<ShellInput>("shell", &shell)?;
            agree::<ReadFileInput>("read_file", &read)?;
            agree::<WriteFileInput>("write_file", &write)?;
            agree::<EditFileInput>("edit_file", &edit)?;
            agree::<DeleteFileInput>("delete_file", &delete)?;
        }
    }
}

/// base/project/ with ordinary files and secret-bearing ones (each holding the canary), the
/// project a root beside the memory dir.
fn project_with_secrets(f: &Fixture) -> PathBuf {
    let project = f.base.join("project");
    for dir in ["src", ".git", "keys", ".ssh"] {
        std::fs::create_dir_all(project.join(dir)).unwrap();
    }
    std::fs::write(
        project.join("src/main.rs"),
        "fn main() {} // CANARY-free code\n",
    )
    .unwrap();
    std::fs::write(project.join("README.md"), "the project\n").unwrap();
    for secret in [
        ".env",
        ".env.local",
        "keys/id_rsa",
        "keys/server.pem",
        "keys/tls.key",
        ".netrc",
        ".git/config",
        ".ssh/config",
    ] {
        std::fs::write(project.join(secret), format!("TOKEN={CANARY}\n")).unwrap();
    }
    // A link with an innocent name to a secret is refused by what it resolves to.
    symlink(".env", project.join("settings.txt")).unwrap();
    project
}

#[test]
fn the_project_is_readable_but_its_secret_bearing_files_are_not() {
    let f = fixture();
    let project = project_with_secrets(&f);
    let roots = [f.transcripts.clone(), project.clone()];
    let mut sb = Sandbox::new(&f.mem, &roots, Limits::default()).unwrap();
    let p = |rel: &str| project.join(rel).display().to_string();

    let read = sb.call(
        "read_file",
        &json!({"path": p("src/main.rs")}),
        &mut AllowAll,
    );
    assert!(!read.is_error, "{}", read.content);
    let cat = sb.call(
        "shell",
        &json!({"command": format!("cat {}", p("README.md"))}),
        &mut AllowAll,
    );
    assert!(
        !cat.is_error && cat.content.contains("the project"),
        "{}",
        cat.content
    );

    for secret in [
        ".env",
        ".env.local",
        "keys/id_rsa",
        "keys/server.pem",
        "keys/tls.key",
        ".netrc",
        ".git/config",
        ".ssh/config",
        "settings.txt",
    ] {
        let read = sb.call("read_file", &json!({"path": p(secret)}), &mut AllowAll);
        assert!(read.is_error, "read_file {secret}: {}", read.content);
        assert!(
            read.content
                .contains("files that may hold secrets are never read"),
            "{secret}: {}",
            read.content
        );
        assert!(!read.content.contains(CANARY), "{secret}: {}", read.content);
        for command in [
            format!("cat {}", p(secret)),
            format!("head -n 1 {}", p(secret)),
            format!("grep TOKEN {}", p(secret)),
            format!("grep -f {} README.md", p(secret)),
        ] {
            let result = sb.call("shell", &json!({ "command": command }), &mut AllowAll);
            assert!(result.is_error, "{command}: {}", result.content);
            assert!(
                !result.content.contains(CANARY),
                "{command}: {}",
                result.content
            );
        }
    }
    // grep's own recursion skips them, whatever the model's --include says and wherever it
    // puts `--`.
    for command in [
        format!("grep -r TOKEN {}", project.display()),
        format!("grep -r --include=* TOKEN {}", project.display()),
        format!("grep -r --include=.env -e TOKEN -- {}", project.display()),
        format!("grep -rl -e -- {}", project.display()),
    ] {
        let result = sb.call("shell", &json!({ "command": command }), &mut AllowAll);
        assert!(
            !result.content.contains(CANARY),
            "{command}: {}",
            result.content
        );
        assert!(
            !result.content.contains(".env"),
            "{command}: {}",
            result.content
        );
    }
    // Names are fine: listing shows a .env exists, never what it holds.
    let ls = sb.call(
        "shell",
        &json!({"command": format!("ls -a {}", project.display())}),
        &mut AllowAll,
    );
    assert!(
        !ls.is_error && ls.content.contains(".env"),
        "{}",
        ls.content
    );
}

#[test]
fn claude_md_files_are_readable_on_their_own_and_never_written() {
    let f = fixture();
    let home_claude = f.base.join("home/.claude");
    std::fs::create_dir_all(&home_claude).unwrap();
    let claude_md = home_claude.join("CLAUDE.md");
    std::fs::write(&claude_md, "Always answer in French.\n").unwrap();
    std::fs::write(home_claude.join("other.md"), CANARY).unwrap();
    let mut sb = sandbox(&f, Limits::default())
        .with_readable_files(&[claude_md.clone(), f.base.join("missing/CLAUDE.md")]);
    let path = claude_md.display().to_string();

    let read = sb.call("read_file", &json!({ "path": path }), &mut AllowAll);
    assert!(
        !read.is_error && read.content.contains("French"),
        "{}",
        read.content
    );
    let cat = sb.call(
        "shell",
        &json!({"command": format!("cat {path}")}),
        &mut AllowAll,
    );
    assert!(
        !cat.is_error && cat.content.contains("French"),
        "{}",
        cat.content
    );
    // Its folder is not opened with it.
    let other = home_claude.join("other.md").display().to_string();
    let read = sb.call("read_file", &json!({ "path": other }), &mut AllowAll);
    assert!(
        read.is_error && !read.content.contains(CANARY),
        "{}",
        read.content
    );
    let ls = sb.call(
        "shell",
        &json!({"command": format!("ls {}", home_claude.display())}),
        &mut AllowAll,
    );
    assert!(ls.is_error, "{}", ls.content);

    let before = std::fs::read_to_string(&claude_md).unwrap();
    for (tool, input) in [
        (
            "write_file",
            json!({"path": path, "content": "Answer in English.\n"}),
        ),
        (
            "edit_file",
            json!({"path": path, "old_string": "French", "new_string": "English"}),
        ),
        ("delete_file", json!({ "path": path })),
    ] {
        let result = sb.call(tool, &input, &mut AllowAll);
        assert!(result.is_error, "{tool}: {}", result.content);
    }
    assert_eq!(std::fs::read_to_string(&claude_md).unwrap(), before);
}

/// A guard that keeps what each write was about to land.
#[derive(Default)]
struct Contents(Vec<Option<String>>);

impl WriteGuard for Contents {
    fn before_write(&mut self, _path: &Path, content: Option<&[u8]>) -> Result<(), GuardRefusal> {
        self.0
            .push(content.map(|c| String::from_utf8_lossy(c).into_owned()));
        Ok(())
    }
}

/// `modified:`'s value in a stamped file.
fn modified(text: &str) -> &str {
    let at = text.find("  modified: ").expect("stamped") + "  modified: ".len();
    &text[at..at + "2026-12-05T08:27:20.002Z".len()]
}

/// `2026-12-05T08:27:20.002Z`: UTC, milliseconds, `Z`.
fn is_client_time(text: &str) -> bool {
    let shape = "0000-00-00T00:00:00.000Z";
    text.len() == shape.len()
        && text
            .chars()
            .zip(shape.chars())
            .all(|(c, s)| if s == '0' { c.is_ascii_digit() } else { c == s })
}

#[test]
fn topic_files_land_stamped_and_the_guard_sees_what_lands() {
    let f = fixture();
    let session = "5d2f7a90-8c3e-4b1a-b6d4-9e0f1a2b3c4d";
    let mut sb = sandbox(&f, Limits::default()).with_origin_session(Some(session.into()));
    let mut guard = Contents::default();
    let written = "---\nname: tea\ndescription: Alice likes tea\nmetadata:\n  type: user\n---\n\nAlice likes tea.\n";
    let created = sb.call(
        "write_file",
        &json!({"path": "alice.md", "content": written}),
        &mut guard,
    );
    assert!(!created.is_error, "{created:?}");
    let on_disk = std::fs::read_to_string(f.mem.join("alice.md")).unwrap();
    let now = modified(&on_disk).to_string();
    assert!(is_client_time(&now), "{on_disk}");
    assert_eq!(
        on_disk,
        format!("---\nname: tea\ndescription: Alice likes tea\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: {session}\n  modified: {now}\n---\n\nAlice likes tea.\n")
    );
    assert_eq!(guard.0, vec![Some(on_disk.clone())]);

    // A rewrite without the metadata keeps the stamps; only `modified` moves.
    std::thread::sleep(Duration::from_millis(5));
    let rewrite =
        "---\nname: tea\ndescription: Alice likes green tea\n---\n\nAlice likes green tea.\n";
    let replaced = sb.call(
        "write_file",
        &json!({"path": "alice.md", "content": rewrite}),
        &mut guard,
    );
    assert!(!replaced.is_error, "{replaced:?}");
    let after = std::fs::read_to_string(f.mem.join("alice.md")).unwrap();
    let later = modified(&after).to_string();
    assert!(is_client_time(&later) && later > now, "{now} {later}");
    assert_eq!(
        after,
        format!("---\nname: tea\ndescription: Alice likes green tea\nmetadata:\n  node_type: memory\n  type: user\n  originSessionId: {session}\n  modified: {later}\n---\n\nAlice likes green tea.\n")
    );
    // The same content again, stamps left out, is no change: `modified` stays.
    let again = sb.call(
        "write_file",
        &json!({"path": "alice.md", "content": rewrite}),
        &mut guard,
    );
    assert!(
        !again.is_error && again.touched.is_none() && again.content.starts_with("unchanged"),
        "{again:?}"
    );
    // An edit moves `modified` and keeps the rest.
    std::thread::sleep(Duration::from_millis(5));
    let edited = sb.call(
        "edit_file",
        &json!({"path": "alice.md", "old_string": "likes green tea.", "new_string": "likes oolong."}),
        &mut guard,
    );
    assert!(!edited.is_error, "{edited:?}");
    let edited_text = std::fs::read_to_string(f.mem.join("alice.md")).unwrap();
    assert!(modified(&edited_text) > later.as_str(), "{edited_text}");
    assert_eq!(
        edited_text.replace(modified(&edited_text), &later),
        after.replace("likes green tea.", "likes oolong.")
    );
    assert_eq!(guard.0.len(), 3);
    assert_eq!(guard.0[2].as_deref(), Some(edited_text.as_str()));

    // MEMORY.md and a file without frontmatter land as written.
    let index = "---\nname: index\n---\n- [Tea](alice.md)\n";
    sb.call(
        "write_file",
        &json!({"path": "MEMORY.md", "content": index}),
        &mut guard,
    );
    assert_eq!(
        std::fs::read_to_string(f.mem.join("MEMORY.md")).unwrap(),
        index
    );
    sb.call(
        "write_file",
        &json!({"path": "plain.md", "content": "no frontmatter\n"}),
        &mut guard,
    );
    assert_eq!(
        std::fs::read_to_string(f.mem.join("plain.md")).unwrap(),
        "no frontmatter\n"
    );
}

#[test]
fn team_memory_is_not_deleted_unless_the_run_allows_it() {
    let f = fixture();
    for dir in ["team", "Team"] {
        std::fs::create_dir_all(f.mem.join(dir).join("deep")).unwrap();
        std::fs::write(f.mem.join(dir).join("shared.md"), "shared\n").unwrap();
        std::fs::write(f.mem.join(dir).join("deep/more.md"), "more\n").unwrap();
    }
    // A top-level file named like the folder is no team memory.
    std::fs::write(f.mem.join("team.md"), "mine\n").unwrap();
    let mut sb = sandbox(&f, Limits::default());
    let before = tree(&f.base);
    for path in ["team/shared.md", "Team/deep/more.md", "./team/deep/more.md"] {
        let mut guard = Recorder::default();
        let refused = sb.call("delete_file", &json!({ "path": path }), &mut guard);
        assert!(refused.is_error, "{path}: {refused:?}");
        assert!(
            refused.content.contains("team memory") && refused.content.contains("edit_file"),
            "{refused:?}"
        );
        assert!(guard.seen.is_empty());
    }
    assert_eq!(tree(&f.base), before);
    // Editing team memory stays allowed.
    let edited = sb.call(
        "edit_file",
        &json!({"path": "team/shared.md", "old_string": "shared", "new_string": "shared, fixed"}),
        &mut AllowAll,
    );
    assert!(!edited.is_error, "{edited:?}");
    let mine = sb.call("delete_file", &json!({"path": "team.md"}), &mut AllowAll);
    assert!(!mine.is_error, "{mine:?}");

    let mut sb = sandbox(&f, Limits::default()).with_team_delete(true);
    for path in ["team/shared.md", "Team/deep/more.md"] {
        let deleted = sb.call("delete_file", &json!({ "path": path }), &mut AllowAll);
        assert!(!deleted.is_error, "{path}: {deleted:?}");
        assert!(!f.mem.join(path).exists());
    }
}
