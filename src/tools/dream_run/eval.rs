//! `dream-run eval`: how good is a consolidation. Each scenario of a suite (the memory before,
//! the sessions, the project, what the memory after must hold) runs in a temporary home through
//! the real pipeline, `dream-gate | dream-lock exec -- dream-run`, as processes; the memory
//! after is held against the scenario's `expect.json`.

mod home;
mod scenario;

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use walkdir::WalkDir;

use self::home::Home;
use self::scenario::{Changes, Pattern, Scenario};
use super::mode::Engine;
use super::EvalArgs;
use crate::cli::{Context, Exit, Failure, Report};

/// What `dream-run eval` prints.
#[derive(Debug, Serialize, JsonSchema)]
pub struct EvalReport {
    /// The suite folder, as given.
    pub suite: String,
    /// The engine every scenario ran with.
    pub engine: &'static str,
    /// `--provider` and `--model` as given (null: the environment's).
    pub provider: Option<String>,
    pub model: Option<String>,
    pub scenarios: Vec<ScenarioReport>,
    pub totals: Totals,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Totals {
    pub scenarios: usize,
    pub passed: usize,
    pub failed: usize,
    pub errors: usize,
    pub skipped: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    /// It could not run (the error says why).
    Error,
    /// `needs_model` under `--engine rules`.
    Skipped,
}

/// One scenario's result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ScenarioReport {
    pub name: String,
    pub outcome: Outcome,
    /// Every expectation met; null when the scenario did not run (error, skipped).
    pub pass: Option<bool>,
    /// Why it could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub needs_model: bool,
    /// Every expectation not met.
    pub unmet: Vec<Unmet>,
    /// `dream-run check`'s counts before and after the run (kinds above zero).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<CheckCounts>,
    /// The run's status, exit code and the memory files it changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunSummary>,
    /// The run's token usage (`run.usage`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens: Option<Tokens>,
    pub turns: Option<u64>,
    /// The scenario's wall time, setup and checks included.
    pub seconds: f64,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CheckCounts {
    pub before: BTreeMap<String, u64>,
    pub after: BTreeMap<String, u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RunSummary {
    /// run.status (null when the pipeline printed no run section).
    pub status: Option<String>,
    /// run.error, or the gate's reason when it said no.
    pub error: Option<String>,
    /// The pipeline's exit code (dream-lock exec's: the run's).
    pub exit: Option<i32>,
    /// The `.md` files whose bytes differ after the run (relative to the memory dir).
    pub changed: Vec<String>,
}

#[derive(Debug, Default, Serialize, JsonSchema)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    pub cache_creation: u64,
    pub cache_read: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UnmetKind {
    MustContain,
    MustNotContain,
    MaxProblems,
    Changes,
    /// The run did not end completed (or no_changes).
    Run,
}

/// One expectation not met.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Unmet {
    pub kind: UnmetKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// max_problems: the `dream-run check` kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    pub expected: Value,
    pub found: Value,
}

impl Report for EvalReport {
    fn exit(&self) -> Exit {
        let model_failed = self.scenarios.iter().any(|s| {
            s.run
                .as_ref()
                .is_some_and(|r| r.exit == Some(i32::from(Exit::Remote.code())))
        });
        if model_failed {
            Exit::Remote
        } else if self.totals.failed + self.totals.errors > 0 {
            Exit::No
        } else {
            Exit::Yes
        }
    }

    fn note(&self) -> Option<String> {
        let bad: Vec<&str> = self
            .scenarios
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Fail | Outcome::Error))
            .map(|s| s.name.as_str())
            .collect();
        (!bad.is_empty()).then(|| {
            format!(
                "{} of {} scenarios did not pass: {}",
                bad.len(),
                self.totals.scenarios,
                bad.join(", ")
            )
        })
    }
}

/// The three sibling binaries.
struct Bins {
    gate: PathBuf,
    lock: PathBuf,
    run: PathBuf,
}

impl Bins {
    fn beside_me() -> Result<Bins, Failure> {
        let me = std::env::current_exe()
            .map_err(|e| Failure::environment(format!("cannot find this executable: {e}")))?;
        let dir = me.parent().unwrap_or(Path::new("/")).to_path_buf();
        let bins = Bins {
            gate: dir.join("dream-gate"),
            lock: dir.join("dream-lock"),
            run: dir.join("dream-run"),
        };
        for bin in [&bins.gate, &bins.lock, &bins.run] {
            if !bin.is_file() {
                return Err(Failure::environment(format!(
                    "{} is missing: dream-run eval runs the pipeline's binaries from its own folder",
                    bin.display()
                )));
            }
        }
        Ok(bins)
    }
}

pub fn eval(args: &EvalArgs, cx: &Context) -> Result<EvalReport, Failure> {
    let scenarios = scenario::load_suite(&args.suite, &args.only)?;
    let bins = Bins::beside_me()?;
    let progress =
        !cx.common().quiet && (std::io::stderr().is_terminal() || cx.diag().is_verbose());
    let total = scenarios.len();
    let mut reports = Vec::new();
    let mut model_failed: Option<String> = None;
    for (i, scenario) in scenarios.iter().enumerate() {
        let started = Instant::now();
        let report = match &model_failed {
            Some(name) => not_run(scenario, format!("not run: the model failed in {name}")),
            None if args.engine == Engine::Rules && scenario.expect.needs_model => ScenarioReport {
                outcome: Outcome::Skipped,
                ..not_run(scenario, String::new())
            },
            None => run_one(scenario, args, &bins, cx),
        };
        let report = ScenarioReport {
            seconds: round(started.elapsed().as_secs_f64()),
            error: report.error.filter(|e| !e.is_empty()),
            ..report
        };
        // A service that refuses everyone (no credential, no network, overloaded) fails every
        // scenario the same way: the rest are not run. A request this scenario made too
        // large, or an answer that timed out, says nothing about the next one.
        let failed_for_all = report
            .error
            .as_deref()
            .and_then(|e| e.strip_prefix("the model failed: "))
            .is_some_and(|why| {
                ["auth", "network", "rate_limited", "overloaded"]
                    .iter()
                    .any(|kind| why.starts_with(&format!("{kind}:")))
            });
        if report.run.as_ref().and_then(|r| r.exit) == Some(i32::from(Exit::Remote.code()))
            && failed_for_all
        {
            model_failed.get_or_insert_with(|| scenario.name.clone());
        }
        if progress {
            let what = match report.outcome {
                Outcome::Pass => "pass".to_string(),
                Outcome::Fail => format!("FAIL ({} unmet)", report.unmet.len()),
                Outcome::Error => format!(
                    "ERROR: {}",
                    crate::cli::text::sanitize(report.error.as_deref().unwrap_or(""))
                ),
                Outcome::Skipped => "skipped (needs a model)".to_string(),
            };
            eprintln!(
                "eval: {}/{total} {}: {what} ({:.1} s)",
                i + 1,
                scenario.name,
                report.seconds
            );
        }
        reports.push(report);
    }
    let mut totals = Totals {
        scenarios: reports.len(),
        ..Totals::default()
    };
    for r in &reports {
        match r.outcome {
            Outcome::Pass => totals.passed += 1,
            Outcome::Fail => totals.failed += 1,
            Outcome::Error => totals.errors += 1,
            Outcome::Skipped => totals.skipped += 1,
        }
    }
    Ok(EvalReport {
        suite: args.suite.to_string_lossy().into_owned(),
        engine: args.engine.as_str(),
        provider: args.provider.map(provider_name),
        model: args.model.clone(),
        scenarios: reports,
        totals,
    })
}

fn provider_name(p: crate::model::Provider) -> String {
    clap::ValueEnum::to_possible_value(&p)
        .map(|v| v.get_name().to_string())
        .unwrap_or_default()
}

fn round(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn not_run(scenario: &Scenario, error: String) -> ScenarioReport {
    ScenarioReport {
        name: scenario.name.clone(),
        outcome: Outcome::Error,
        pass: None,
        error: Some(error),
        needs_model: scenario.expect.needs_model,
        unmet: Vec::new(),
        check: None,
        run: None,
        tokens: None,
        turns: None,
        seconds: 0.0,
    }
}

/// The caller's environment for the pipeline: the model's variables pass, whatever says where
/// Claude Code, dreamkit or git keep their files does not; the temporary home's are set.
fn child_env(cx: &Context, home: Option<&Home>, bins: &Bins) -> Vec<(OsString, OsString)> {
    const KEPT_DREAMKIT: [&str; 4] = [
        "DREAMKIT_PROVIDER",
        "DREAMKIT_OPENAI_EXTRA_BODY",
        "DREAMKIT_CLAUDE_BIN",
        "DREAMKIT_RETRY_BASE_MS",
    ];
    let dropped = |name: &str| {
        (name.starts_with("DREAMKIT_")
            && !KEPT_DREAMKIT.contains(&name)
            && !name.starts_with("DREAMKIT_TEST_"))
            || (name.starts_with("CLAUDE") && name != "CLAUDE_CODE_OAUTH_TOKEN")
            || name.starts_with("GIT_")
            || name.starts_with("XDG_")
            || matches!(name, "HOME" | "PATH" | "PWD" | "OLDPWD")
    };
    let mut vars: Vec<(OsString, OsString)> = cx
        .env()
        .vars()
        .filter(|(k, _)| !dropped(&k.to_string_lossy()))
        .map(|(k, v)| (k.to_os_string(), v.to_os_string()))
        .collect();
    let bin_dir = bins.run.parent().unwrap_or(Path::new("/"));
    let mut path = OsString::from(bin_dir);
    if let Some(p) = cx.env().get("PATH") {
        path.push(":");
        path.push(p);
    }
    vars.push(("PATH".into(), path));
    vars.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
    vars.push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
    if let Some(h) = home {
        vars.push(("HOME".into(), h.home.clone().into()));
        vars.push(("CLAUDE_CONFIG_DIR".into(), h.config.clone().into()));
        vars.push(("XDG_STATE_HOME".into(), h.state.clone().into()));
        vars.push(("XDG_CONFIG_HOME".into(), h.home.join(".config").into()));
        vars.push(("XDG_CACHE_HOME".into(), h.home.join(".cache").into()));
    }
    vars
}

fn run_one(scenario: &Scenario, args: &EvalArgs, bins: &Bins, cx: &Context) -> ScenarioReport {
    let failed = |why: String| not_run(scenario, why);
    let git_env = child_env(cx, None, bins);
    let home = match Home::build(scenario, &git_env) {
        Ok(home) => home,
        Err(why) => return failed(why),
    };
    let env = child_env(cx, Some(&home), bins);
    let cx_dir = &home.run_cwd;
    let check = |when: &str| -> Result<BTreeMap<String, u64>, String> {
        let out = Command::new(&bins.run)
            .args([OsStr::new("check"), OsStr::new("-n"), OsStr::new("--cwd")])
            .arg(cx_dir)
            .current_dir(cx_dir)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run dream-run check: {e}"))?;
        if !matches!(out.status.code(), Some(0 | 1)) {
            return Err(format!(
                "dream-run check {when} the run failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let doc: Value = serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("dream-run check {when}: not JSON: {e}"))?;
        Ok(doc["counts"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
                    .filter(|(_, n)| *n > 0)
                    .collect()
            })
            .unwrap_or_default())
    };
    let before_counts = match check("before") {
        Ok(c) => c,
        Err(why) => return failed(why),
    };
    let before = match memory_files(&home.memory_dir) {
        Ok(files) => files,
        Err(why) => return failed(why),
    };

    let outcome = match pipeline(&home, args, bins, &env) {
        Ok(o) => o,
        Err(why) => return failed(why),
    };
    let after_counts = match check("after") {
        Ok(c) => c,
        Err(why) => return failed(why),
    };
    let after = match memory_files(&home.memory_dir) {
        Ok(files) => files,
        Err(why) => return failed(why),
    };
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|f| before.get(*f) != after.get(*f))
        .cloned()
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();

    let doc = outcome.doc.unwrap_or(Value::Null);
    let run = &doc["run"];
    let status = run["status"].as_str().map(str::to_string);
    let gate_said_no = doc["gate"]["due"] == Value::Bool(false);
    let error = run["error"]
        .as_str()
        .map(str::to_string)
        .or_else(|| gate_said_no.then(|| format!("gate: {}", doc["gate"]["reason"])));
    let summary = RunSummary {
        status: status.clone(),
        error: error.clone(),
        exit: outcome.exit,
        changed: changed.clone(),
    };
    let usage = &run["usage"];
    let tokens = usage.is_object().then(|| Tokens {
        input: usage["input_tokens"].as_u64().unwrap_or(0),
        output: usage["output_tokens"].as_u64().unwrap_or(0),
        cache_creation: usage["cache_creation_input_tokens"].as_u64().unwrap_or(0),
        cache_read: usage["cache_read_input_tokens"].as_u64().unwrap_or(0),
    });
    let turns = run["turns"].as_u64();
    let check = Some(CheckCounts {
        before: before_counts,
        after: after_counts.clone(),
    });
    let mut report = ScenarioReport {
        run: Some(summary),
        tokens,
        turns,
        check,
        ..not_run(scenario, String::new())
    };
    if outcome.exit == Some(i32::from(Exit::Remote.code())) {
        report.error = Some(format!(
            "the model failed: {}",
            run["message"]
                .as_str()
                .or(error.as_deref())
                .unwrap_or("exit 4")
        ));
        return report;
    }
    if status.is_none() {
        report.error = Some(match gate_said_no {
            true => format!(
                "the gate said no ({}): a scenario needs a session",
                doc["gate"]["reason"].as_str().unwrap_or("?")
            ),
            false => format!(
                "the pipeline printed no run (exit {}): {}",
                outcome.exit.map_or("by a signal".into(), |c| c.to_string()),
                outcome.stderr.trim()
            ),
        });
        return report;
    }

    let mut unmet = Vec::new();
    if !matches!(status.as_deref(), Some("completed" | "no_changes")) {
        unmet.push(Unmet {
            kind: UnmetKind::Run,
            pattern: None,
            file: None,
            reason: None,
            problem: None,
            expected: "completed".into(),
            found: match &error {
                Some(e) => format!("{}: {e}", status.as_deref().unwrap_or("")).into(),
                None => status.clone().into(),
            },
        });
    }
    let expect = &scenario.expect;
    for p in &expect.must_contain {
        if let Some(found) = search(p, &after).err() {
            unmet.push(pattern_unmet(UnmetKind::MustContain, p, "a match", found));
        }
    }
    for p in &expect.must_not_contain {
        if let Ok(found) = search(p, &after) {
            unmet.push(pattern_unmet(
                UnmetKind::MustNotContain,
                p,
                "no match",
                found,
            ));
        }
    }
    for (kind, max) in &expect.max_problems {
        let found = after_counts.get(*kind).copied().unwrap_or(0);
        if found > *max {
            unmet.push(Unmet {
                kind: UnmetKind::MaxProblems,
                pattern: None,
                file: None,
                reason: None,
                problem: Some(kind.to_string()),
                expected: (*max).into(),
                found: found.into(),
            });
        }
    }
    if let Some(want) = expect.changes {
        let some = !changed.is_empty();
        if some != (want == Changes::Some) {
            unmet.push(Unmet {
                kind: UnmetKind::Changes,
                pattern: None,
                file: None,
                reason: None,
                problem: None,
                expected: want.as_str().into(),
                found: match some {
                    true => format!("some: {}", changed.join(", ")).into(),
                    false => "none".into(),
                },
            });
        }
    }
    report.outcome = match unmet.is_empty() {
        true => Outcome::Pass,
        false => Outcome::Fail,
    };
    report.pass = Some(unmet.is_empty());
    report.error = None;
    report.unmet = unmet;
    report
}

fn pattern_unmet(kind: UnmetKind, p: &Pattern, expected: &str, found: String) -> Unmet {
    Unmet {
        kind,
        pattern: Some(p.source.clone()),
        file: p.file.clone(),
        reason: p.reason.clone(),
        problem: None,
        expected: expected.into(),
        found: found.into(),
    }
}

/// `Ok(where)`: the first match, as `file:line: text` (secrets masked); `Err(why not)`.
fn search(p: &Pattern, files: &BTreeMap<String, Vec<u8>>) -> Result<String, String> {
    let texts: Vec<(&String, String)> = match &p.file {
        Some(file) => match files.get(file) {
            Some(bytes) => vec![(file, String::from_utf8_lossy(bytes).into_owned())],
            None => return Err(format!("no file {file}")),
        },
        None => files
            .iter()
            .filter(|(f, _)| f.ends_with(".md"))
            .map(|(f, b)| (f, String::from_utf8_lossy(b).into_owned()))
            .collect(),
    };
    // Over all the files concatenated (one newline between), so a pattern may span them.
    let mut all = String::new();
    let mut starts = Vec::new();
    for (file, text) in &texts {
        starts.push((all.len(), *file));
        all.push_str(text);
        all.push('\n');
    }
    let Some(m) = p.regex.find(&all) else {
        return Err("no match".into());
    };
    let (start, file) = starts
        .iter()
        .rev()
        .find(|(at, _)| *at <= m.start())
        .map(|(at, f)| (*at, f.as_str()))
        .unwrap_or((0, ""));
    let line = all[start..m.start()].matches('\n').count() + 1;
    let text: String = m.as_str().chars().take(120).collect();
    let text = crate::cli::redact::redact(&crate::cli::text::sanitize(&text)).into_owned();
    Ok(format!("{file}:{line}: {text}"))
}

/// The memory dir's `.md` files, relative path -> bytes.
fn memory_files(dir: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut files = BTreeMap::new();
    if !dir.exists() {
        return Ok(files);
    }
    for entry in WalkDir::new(dir).min_depth(1) {
        let entry = entry.map_err(|e| format!("cannot read the memory dir: {e}"))?;
        if !entry.file_type().is_file() || entry.path().extension() != Some(OsStr::new("md")) {
            continue;
        }
        let rel = entry
            .path()
            .strip_prefix(dir)
            .unwrap_or(entry.path())
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(entry.path())
            .map_err(|e| format!("cannot read {}: {e}", entry.path().display()))?;
        files.insert(rel, bytes);
    }
    Ok(files)
}

struct PipelineOutcome {
    doc: Option<Value>,
    exit: Option<i32>,
    stderr: String,
}

/// `dream-gate ... | dream-lock exec -- dream-run ...`, both stderrs kept in the temporary
/// root.
fn pipeline(
    home: &Home,
    args: &EvalArgs,
    bins: &Bins,
    env: &[(OsString, OsString)],
) -> Result<PipelineOutcome, String> {
    let log = |name: &str| {
        std::fs::File::create(home.root.join(name))
            .map_err(|e| format!("cannot create a log file: {e}"))
    };
    let mut gate = Command::new(&bins.gate)
        .args([
            "--min-hours",
            "0",
            "--min-sessions",
            "1",
            "--scan-interval",
            "0",
        ])
        .arg("--cwd")
        .arg(&home.run_cwd)
        .current_dir(&home.run_cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log("gate.stderr")?)
        .spawn()
        .map_err(|e| format!("cannot run dream-gate: {e}"))?;
    let gate_out = gate.stdout.take().map(Stdio::from).unwrap_or(Stdio::null());
    let mut lock = Command::new(&bins.lock);
    lock.args(["exec", "--"])
        .arg(&bins.run)
        .args(["--engine", args.engine.as_str()]);
    if let Some(p) = args.provider {
        lock.args(["--provider", &provider_name(p)]);
    }
    if let Some(m) = &args.model {
        lock.args(["--model", m]);
    }
    lock.args(&args.run_args);
    let out = lock
        .current_dir(&home.run_cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(gate_out)
        .stdout(Stdio::piped())
        .stderr(log("run.stderr")?)
        .output()
        .map_err(|e| format!("cannot run dream-lock: {e}"));
    let _ = gate.wait();
    let out = out?;
    let stderr = std::fs::read_to_string(home.root.join("run.stderr")).unwrap_or_default();
    Ok(PipelineOutcome {
        doc: serde_json::from_slice(&out.stdout).ok(),
        exit: out.status.code(),
        stderr,
    })
}
