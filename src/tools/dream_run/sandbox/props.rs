//! Property tests of the path policy: no generated path a write accepts leaves the memory dir
//! or passes through a link, and a read is accepted exactly when the real path is inside a
//! readable root. Real directories and links; nothing is written by the properties.

use std::os::unix::fs::symlink;
use std::path::{Component, Path, PathBuf};

use proptest::prelude::*;

use super::paths::{read_target, write_target, FORBIDDEN_SEGMENTS};
use super::{Limits, Sandbox};
use crate::cli::props::config;

/// base/
///   mem/ MEMORY.md topic.md sub/deep.md dir.md/ pipe(FIFO-less: a plain file named pipe)
///        link.md->../outside/secret.txt linkdir->../outside alias->sub
///   memlink -> mem (the memory dir as the caller spells it)
///   transcripts/ t1.jsonl (the other readable root)
///   outside/ secret.txt
pub(super) struct Fixture {
    _tmp: tempfile::TempDir,
    pub(super) base: PathBuf,
    pub(super) mem: PathBuf,
    pub(super) transcripts: PathBuf,
    pub(super) sandbox: Sandbox,
}

pub(super) fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let mem = base.join("mem");
    let transcripts = base.join("transcripts");
    for dir in ["mem/sub", "mem/dir.md", "transcripts", "outside"] {
        std::fs::create_dir_all(base.join(dir)).unwrap();
    }
    for (file, text) in [
        ("mem/MEMORY.md", "- [topic](topic.md)\n"),
        ("mem/topic.md", "alpha\n"),
        ("mem/sub/deep.md", "deep alpha\n"),
        ("mem/pipe", "not a pipe\n"),
        ("transcripts/t1.jsonl", "{}\n"),
        ("outside/secret.txt", "CANARY\n"),
    ] {
        std::fs::write(base.join(file), text).unwrap();
    }
    symlink("../outside/secret.txt", mem.join("link.md")).unwrap();
    symlink("../outside", mem.join("linkdir")).unwrap();
    symlink("sub", mem.join("alias")).unwrap();
    symlink("mem", base.join("memlink")).unwrap();
    let sandbox = Sandbox::new(
        &base.join("memlink"),
        std::slice::from_ref(&transcripts),
        Limits::default(),
    )
    .unwrap();
    Fixture {
        _tmp: tmp,
        base,
        mem,
        transcripts,
        sandbox,
    }
}

/// Path segments: the fixture's names, links, `..`, forbidden ones in any case, odd text.
const SEGMENTS: &[&str] = &[
    "..",
    ".",
    "",
    "sub",
    "alias",
    "linkdir",
    "link.md",
    "dir.md",
    "pipe",
    "new.md",
    "MEMORY.md",
    "topic.md",
    "deep.md",
    "secret.txt",
    "outside",
    "mem",
    "memlink",
    "transcripts",
    "t1.jsonl",
    ".git",
    "HOOKS",
    ".Claude",
    "node_modules",
    ".md",
    "x.MD",
    "é ü.md",
    "a\u{0}b.md",
    "a\nb.md",
    "...",
    "~",
    "*.md",
];

/// A raw path as the model might send it, relative or under one of the absolute prefixes.
pub(super) fn raw_path(base: &Path) -> impl Strategy<Value = String> {
    let prefixes = vec![
        String::new(),
        String::new(),
        format!("{}/", base.join("mem").display()),
        format!("{}/", base.join("memlink").display()),
        format!("{}/", base.display()),
        "/".to_string(),
        "//".to_string(),
        "/etc/".to_string(),
    ];
    (
        prop::sample::select(prefixes),
        prop::collection::vec(prop::sample::select(SEGMENTS), 0..6),
        any::<bool>(),
    )
        .prop_map(|(prefix, segments, trailing)| {
            let mut raw = prefix + &segments.join("/");
            if trailing {
                raw.push('/');
            }
            raw
        })
}

fn inside(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn a_write_target_is_a_plain_md_file_strictly_inside_the_memory_dir(
        raw in raw_path(&FIXTURE.base),
    ) {
        let f = &*FIXTURE;
        let Ok(target) = write_target(&f.sandbox, &raw) else {
            return Ok(());
        };
        prop_assert!(target.relative.components().all(|c| matches!(c, Component::Normal(_))), "{:?}", target.relative);
        prop_assert_eq!(&target.path, &f.mem.join(&target.relative));
        prop_assert!(target.path.extension().is_some_and(|e| e == "md"));
        prop_assert!(!raw.contains(['\0', '\n']));
        for part in &target.relative {
            let lower = part.to_string_lossy().to_ascii_lowercase();
            prop_assert!(!FORBIDDEN_SEGMENTS.contains(&lower.as_str()), "{}", raw);
        }
        // No link anywhere on the way, and what exists resolves where it is named.
        let mut at = f.mem.clone();
        for part in &target.relative {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(meta) => {
                    prop_assert!(!meta.file_type().is_symlink(), "{} goes through a link", raw);
                    prop_assert_eq!(std::fs::canonicalize(&at).unwrap(), at.clone());
                }
                Err(_) => break,
            }
        }
        prop_assert!(inside(&target.path, &f.mem) && target.path != f.mem);
        for dir in &target.missing_dirs {
            prop_assert!(inside(dir, &f.mem) && !dir.exists());
        }
    }

    #[test]
    fn a_read_is_accepted_exactly_when_the_real_path_is_inside_a_root(
        raw in raw_path(&FIXTURE.base),
    ) {
        let f = &*FIXTURE;
        // The reference: resolve as the kernel would, then compare with the roots.
        let real = std::fs::canonicalize(f.mem.join(&raw)).ok();
        let allowed = !raw.is_empty()
            && !raw.chars().any(char::is_control)
            && real.as_ref().is_some_and(|r| inside(r, &f.mem) || inside(r, &f.transcripts));
        match read_target(&f.sandbox, &raw) {
            Ok(path) => {
                prop_assert!(allowed, "{} accepted", raw);
                prop_assert_eq!(Some(path), real);
            }
            Err(message) => {
                prop_assert!(!allowed, "{} refused: {}", raw, message);
                prop_assert!(!message.contains("CANARY"));
            }
        }
    }
}

/// One fixture for every case: the properties only read it.
static FIXTURE: std::sync::LazyLock<Fixture> = std::sync::LazyLock::new(fixture);
