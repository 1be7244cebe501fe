//! The committed JSON Schemas (`schemas/`): what `TOOL [SUBCOMMAND] --schema` prints, for
//! every command of every binary, and for each flag that changes what stdout holds
//! (`--events`, `--hook`, `--diff`). `make man completions` writes them; a test fails when
//! the committed copies are out of date.

use std::path::PathBuf;

use super::context::Context;
use super::run::Binary;
use super::{CommonArgs, Diag, Env};

/// The flags that may change the shape of stdout: each that does gets its own schema file.
const SHAPE_FLAGS: &[&str] = &["events", "hook", "diff"];

/// Every schema file of one binary, as `(path relative to the repository, contents)`:
/// `schemas/<binary>[-<subcommand>][-<flag>].json`, indented, with a final newline.
pub fn files<T: Binary>() -> Vec<(PathBuf, Vec<u8>)> {
    let command = T::command();
    let name = command.get_name().to_string();
    let mut files = Vec::new();
    let mut commands = Vec::new();
    if command.is_subcommand_required_set() {
        // Without its subcommand, such a binary prints only a usage error.
        files.push((name.clone(), failure_only()));
    } else {
        commands.push((Vec::new(), command.clone()));
    }
    commands.extend(
        command
            .get_subcommands()
            .filter(|sub| sub.get_name() != "help")
            .map(|sub| (vec![sub.get_name().to_string()], sub.clone())),
    );
    for (path, sub) in commands {
        let mut argv = vec![name.clone()];
        argv.extend(path.iter().cloned());
        let file = std::iter::once(name.as_str())
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("-");
        let plain = schema_of::<T>(&argv, None);
        for flag in SHAPE_FLAGS {
            if sub.get_arguments().any(|a| a.get_long() == Some(flag)) {
                // A flag that leaves stdout as it is (`dream-run --events` writes to stderr)
                // gets no file of its own.
                let shaped = schema_of::<T>(&argv, Some(flag));
                if shaped != plain {
                    files.push((format!("{file}-{flag}"), shaped));
                }
            }
        }
        files.push((file, plain));
    }
    files
        .into_iter()
        .map(|(file, json)| (PathBuf::from(format!("schemas/{file}.json")), json))
        .collect()
}

/// The schema of `{"error": ...}` alone.
fn failure_only() -> Vec<u8> {
    let schema = super::report::generator().into_root_schema_for::<super::FailureDocument>();
    pretty(&schema.to_value())
}

fn pretty(value: &serde_json::Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(value).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// What `argv... [--flag] --schema` prints, indented.
fn schema_of<T: Binary>(argv: &[String], flag: Option<&str>) -> Vec<u8> {
    let mut argv = argv.to_vec();
    if let Some(flag) = flag {
        argv.push(format!("--{flag}"));
    }
    argv.push("--schema".into());
    let args = match super::run::parse_from::<T>(argv.iter().map(Into::into).collect()) {
        Ok(args) => args,
        Err(e) => panic!("{argv:?} does not parse: {e}"),
    };
    let common = CommonArgs {
        schema: true,
        ..CommonArgs::default()
    };
    let cx = Context::with_stdin(
        Diag::new(&argv[0], true, false),
        common,
        Env::default(),
        T::STAGE,
        Ok(None),
    );
    let delivery = args.dispatch(&cx);
    let json = delivery.json.unwrap_or_default();
    let value: serde_json::Value = serde_json::from_str(&json)
        .unwrap_or_else(|e| panic!("{argv:?} --schema printed no JSON ({e}): {json}"));
    pretty(&value)
}
