//! The code's structure: no import circles between modules, and one list of tools.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::schema::SUBCOMMANDS;
use crate::support::BINARIES;

/// A module's path from the crate root (`["cli", "input"]`; the root is empty).
type Module = Vec<String>;

/// Every module of the library and the modules it names by `crate::`, `super::` or `self::`
/// paths (in `use` or inline), both lifted to the module that holds them: a file, its
/// directory, or an inline `mod` counted as its file.
fn module_uses() -> BTreeMap<Module, BTreeSet<Module>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src).sort_by_file_name() {
        let entry = entry.expect("walk src");
        let rel = entry.path().strip_prefix(&src).expect("under src");
        // The binaries are crates of their own over the library.
        if rel.starts_with("bin") || rel.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let mut module: Module = rel
            .with_extension("")
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
            module.pop();
        }
        let text = std::fs::read_to_string(entry.path()).expect("read source");
        files.insert(module, text);
    }
    let known: BTreeSet<Module> = files.keys().cloned().collect();
    let mut uses = BTreeMap::new();
    for (module, text) in &files {
        let used: &mut BTreeSet<Module> = uses.entry(module.clone()).or_default();
        for (inline, path) in paths_in(text) {
            let mut at = module.clone();
            at.extend(inline);
            if let Some(target) = resolve(&at, &path, &known) {
                used.insert(target);
            }
        }
    }
    uses
}

/// Each `crate::`/`super::`/`self::` path in `text` (groups in `use` expanded), with the
/// inline modules it sits in.
fn paths_in(text: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let mut found = Vec::new();
    // rustfmt'd code: an inline `mod name {` ends at the `}` with its indentation.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut statement = String::new();
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if inline
            .last()
            .is_some_and(|(_, depth)| *depth == indent && trimmed == "}")
        {
            inline.pop();
            continue;
        }
        let code = trimmed.split("//").next().unwrap_or("");
        if let Some(name) = inline_mod(code) {
            inline.push((name, indent));
            continue;
        }
        let scope: Vec<String> = inline.iter().map(|(name, _)| name.clone()).collect();
        if !statement.is_empty() || use_start(code).is_some() {
            statement.push_str(use_start(code).unwrap_or(code));
            if statement.contains(';') {
                let tree = statement.split(';').next().unwrap_or("").replace(' ', "");
                for path in expand(&tree) {
                    found.push((scope.clone(), path));
                }
                statement.clear();
            }
            continue;
        }
        for path in inline_paths(code) {
            found.push((scope.clone(), path));
        }
    }
    found
}

/// `name` when `code` opens an inline module (`mod name {`, `pub(crate) mod name {`).
fn inline_mod(code: &str) -> Option<String> {
    let rest = code.strip_suffix('{')?.trim_end();
    let rest = rest.rsplit_once("mod ")?;
    let before = rest.0.trim();
    let visibility_only = before.is_empty() || before.starts_with("pub");
    (visibility_only && rest.1.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .then(|| rest.1.to_string())
}

/// The use tree after `use ` when `code` starts a `use` item.
fn use_start(code: &str) -> Option<&str> {
    let after_visibility = code
        .strip_prefix("pub(crate) ")
        .or_else(|| code.strip_prefix("pub(super) "))
        .or_else(|| code.strip_prefix("pub "))
        .unwrap_or(code);
    after_visibility.strip_prefix("use ")
}

/// Every path a use tree names: `a::{b::C, d}` is `a::b::C` and `a::d`; only the ones that
/// start at `crate`, `super` or `self`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    fn walk(prefix: &[String], tree: &str, out: &mut Vec<Vec<String>>) {
        let Some(open) = tree.find('{') else {
            let mut path = prefix.to_vec();
            path.extend(
                tree.split("::")
                    .filter(|s| !s.is_empty())
                    .map(|s| s.split(" as ").next().unwrap_or(s).to_string()),
            );
            out.push(path);
            return;
        };
        let mut path = prefix.to_vec();
        path.extend(
            tree[..open]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_string),
        );
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    walk(&path, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if start < inner.len() {
            walk(&path, &inner[start..], out);
        }
    }
    let mut out = Vec::new();
    walk(&[], tree, &mut out);
    out.retain(|path| {
        path.first()
            .is_some_and(|s| matches!(s.as_str(), "crate" | "super" | "self"))
    });
    out
}

/// `crate::a::b`, `super::c`, `self::d` written in code (not in a `use`).
fn inline_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut rest = code;
        while let Some(at) = rest.find(start) {
            let boundary = rest[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == ':'));
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(tail.len());
            if boundary {
                out.push(
                    tail[..end]
                        .split("::")
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                );
            }
            rest = &tail[end.max(1)..];
        }
    }
    out
}

/// The deepest known module `path` names, written in module `at`.
fn resolve(at: &[String], path: &[String], known: &BTreeSet<Module>) -> Option<Module> {
    let mut module: Module = at.to_vec();
    let mut segments = path.iter().peekable();
    match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            module.clear();
            segments.next();
        }
        Some("self") => {
            segments.next();
        }
        Some("super") => {
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                module.pop()?;
            }
        }
        _ => return None,
    }
    for segment in segments {
        let mut deeper = module.clone();
        deeper.push(segment.clone());
        if !known.contains(&deeper) && !known.iter().any(|k| k.starts_with(&deeper)) {
            break;
        }
        module = deeper;
    }
    // An inline module counts as the file it is written in.
    while !known.contains(&module) {
        module.pop()?;
    }
    Some(module)
}

/// The module dependency graph between siblings: a use of `a::b::c` from `a::d::e` is an
/// edge `a::d -> a::b` (the children of their closest common ancestor). A module using its
/// own ancestor or descendant adds no edge.
fn sibling_graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, targets) in module_uses() {
        for to in targets {
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue;
            }
            graph
                .entry(from[..=common].to_vec())
                .or_default()
                .insert(to[..=common].to_vec());
        }
    }
    graph
}

/// Every group of distinct modules that reach each other (the graph's strongly connected
/// components of two or more).
fn cycles(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<BTreeSet<Module>> {
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(at) = stack.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&Module, BTreeSet<Module>> =
        graph.keys().map(|m| (m, reach(m))).collect();
    let mut groups: Vec<BTreeSet<Module>> = Vec::new();
    for (module, reached) in &reaches {
        if groups.iter().any(|g| g.contains(*module)) {
            continue;
        }
        let group: BTreeSet<Module> = reached
            .iter()
            .filter(|other| {
                reaches
                    .get(other)
                    .is_some_and(|back| back.contains(*module))
            })
            .cloned()
            .chain(std::iter::once((*module).clone()))
            .collect();
        if group.len() > 1 {
            groups.push(group);
        }
    }
    groups
}

// Found today: cli <-> files (failure uses files, files uses cli::signals), cli's context,
// envelope and input, and dream_run's check, history, prompt, recover and report.
#[test]

fn no_module_imports_a_module_that_imports_it_back() {
    let graph = sibling_graph();
    let name = |m: &Module| format!("crate::{}", m.join("::"));
    let found: Vec<String> = cycles(&graph)
        .iter()
        .map(|group| {
            let edges: Vec<String> = group
                .iter()
                .flat_map(|from| {
                    graph[from]
                        .iter()
                        .filter(|to| group.contains(*to))
                        .map(move |to| format!("  {} -> {}", name(from), name(to)))
                })
                .collect();
            format!("a circle:\n{}", edges.join("\n"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "modules that import each other:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_cycle_finder_sees_a_circle_and_not_a_parent() {
    let text = "use crate::a::b::{c::D, e};\nuse super::x;\nfn f() { crate::a::f::g(); }\n";
    let paths: Vec<Vec<String>> = paths_in(text).into_iter().map(|(_, p)| p).collect();
    let owned = |s: &[&str]| s.iter().map(|p| (*p).to_string()).collect::<Vec<_>>();
    assert_eq!(
        paths,
        [
            owned(&["crate", "a", "b", "c", "D"]),
            owned(&["crate", "a", "b", "e"]),
            owned(&["super", "x"]),
            owned(&["crate", "a", "f", "g"]),
        ]
    );
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (
            owned(&["a", "b"]),
            [owned(&["a", "c"]), owned(&["a"])].into(),
        ),
        (owned(&["a", "c"]), [owned(&["a", "b"])].into()),
        (owned(&["a"]), [owned(&["a", "d"])].into()),
    ]
    .into();
    assert_eq!(
        cycles(&graph),
        [BTreeSet::from([owned(&["a", "b"]), owned(&["a", "c"])])]
    );
}

/// Every list of the tools names the same binaries, the ones cargo builds.
#[test]
fn one_list_of_tools() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tested: BTreeSet<String> = BINARIES.iter().map(|b| (*b).to_string()).collect();

    // As make expands it (it lists src/bin/).
    let make = std::process::Command::new("make")
        .args(["-s", "--no-print-directory", "print-bins"])
        .current_dir(root)
        .output()
        .expect("make");
    assert!(make.status.success(), "make print-bins: {make:?}");
    let make_bins: BTreeSet<String> = String::from_utf8_lossy(&make.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect();

    let commands: BTreeSet<String> = dreamkit::commands()
        .iter()
        .map(|command| command.get_name().to_string())
        .collect();

    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let cargo_bins: BTreeSet<String> = manifest
        .split("[[bin]]")
        .skip(1)
        .map(|table| {
            table
                .lines()
                .find_map(|line| line.trim().strip_prefix("name = "))
                .expect("a [[bin]] name")
                .trim_matches('"')
                .to_string()
        })
        .collect();

    let documented: BTreeSet<String> = dreamkit::doc_pages()
        .iter()
        .map(|page| page.command.get_name().to_string())
        .collect();

    let with_schemas: BTreeSet<String> = SUBCOMMANDS
        .iter()
        .map(|(bin, _)| (*bin).to_string())
        .collect();

    // What cargo built for this test: the executables beside our binaries.
    let target = assert_cmd::cargo::cargo_bin("dream-gate")
        .parent()
        .expect("target dir")
        .to_path_buf();
    let built: BTreeSet<String> = std::fs::read_dir(&target)
        .expect("target dir")
        .flatten()
        .filter(|entry| {
            use std::os::unix::fs::PermissionsExt;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            !name.contains('.')
                && entry
                    .metadata()
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();

    for (what, names) in [
        ("the Makefile's BINS", &make_bins),
        ("Cargo.toml's [[bin]]", &cargo_bins),
        ("lib.rs's doc_pages", &documented),
        ("lib.rs's binaries! list", &commands),
        ("the schema hook's SUBCOMMANDS", &with_schemas),
        ("the binaries built in target/", &built),
    ] {
        assert_eq!(names, &tested, "{what} vs the tests' BINARIES");
    }
}

/// The schema hook knows each binary's subcommands as clap does.
#[test]
fn the_schema_hook_knows_every_subcommand() {
    for page in dreamkit::doc_pages() {
        let name = page.command.get_name().to_string();
        let clap: Vec<String> = page
            .command
            .get_subcommands()
            .map(|sub| sub.get_name().to_string())
            .filter(|sub| sub != "help")
            .collect();
        let ours: Vec<String> = SUBCOMMANDS
            .iter()
            .find(|(bin, _)| *bin == name)
            .map(|(_, subs)| subs.iter().map(|s| (*s).to_string()).collect())
            .unwrap_or_default();
        assert_eq!(ours, clap, "{name}'s subcommands");
    }
}
