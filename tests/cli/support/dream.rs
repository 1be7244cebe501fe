//! The dream-run fixture: a Claude Code home with memory files, a scripted fake model, and
//! the helpers every dream-run test file shares.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use super::fake_api::{FakeApi, Recorded, Reply};
use super::{bin_path, hours, session_id, ClaudeHome, LiveProcess, Run};

pub(crate) const KEY: &str = "sk-ant-dream-test-key";

/// A project with memory, five sessions, and a fake model.
pub(crate) struct Dream {
    pub(crate) home: ClaudeHome,
    pub(crate) api: FakeApi,
}

/// The bound on a run the test stops, kills or keeps waiting (a 500-file apply or undo on a
/// busy machine included).
pub(crate) const LONG_RUN: Duration = Duration::from_secs(120);

/// The warning of a run that leaves problems behind (`dream-run check` lists them).
pub(crate) fn more_problems(counts: &str) -> String {
    format!(
        "dream-run: the run left more problems than it found: {counts} (dream-run check lists \
         them)\n"
    )
}

/// What a command that rolled back the interrupted `command` (apply, undo) of `id` says: as
/// many files put back as its `recovered` document lists.
pub(crate) fn rolled_back(command: &str, id: &str, recovered: &Value) -> String {
    let restored = recovered["restored"].as_array().expect("restored").len();
    format!(
        "dream-run: rolled back the interrupted {command} of task {id}: {restored} files put \
         back\n"
    )
}

impl Dream {
    pub(crate) fn new() -> Dream {
        let home = ClaudeHome::new();
        let mem = home.memory_dir();
        std::fs::create_dir_all(mem.join("topics")).unwrap();
        std::fs::write(
            mem.join("MEMORY.md"),
            "# Memory\n- [Build](topics/build.md): how to build\n- [Stale](stale.md): old notes\n",
        )
        .unwrap();
        std::fs::write(mem.join("topics/build.md"), "Build with make.\n").unwrap();
        std::fs::write(mem.join("stale.md"), "The deploy uses FTP.\n").unwrap();
        for n in 1..=5 {
            let path = home.add_session(&session_id(n), hours(2));
            std::fs::write(
                &path,
                format!(
                    "{}\n{}\n",
                    json!({"type":"user","sessionId":session_id(n),"uuid":format!("u{n}"),"timestamp":"2026-12-01T10:00:00.000Z","message":{"role":"user","content":format!("session {n}: we deploy with blue-green now")}}),
                    json!({"type":"assistant","sessionId":session_id(n),"uuid":format!("a{n}"),"timestamp":"2026-12-01T10:00:05.000Z","message":{"id":format!("msg{n}"),"role":"assistant","content":[{"type":"text","text":"Noted: blue-green deploys."}]}}),
                ),
            )
            .unwrap();
            crate::support::set_age(&path, hours(2));
        }
        home.consolidated(hours(48));
        Dream {
            home,
            api: FakeApi::start(),
        }
    }

    pub(crate) fn mem(&self) -> PathBuf {
        self.home.memory_dir()
    }

    /// The five sessions written again now: newer than any consolidation so far, so the
    /// next gate lists them again.
    pub(crate) fn touch_sessions(&self) {
        for n in 1..=5 {
            let path = self
                .home
                .transcripts_dir()
                .join(format!("{}.jsonl", session_id(n)));
            std::fs::File::options()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()))
                .unwrap();
        }
    }

    /// The task record of `task_id`, as dream-run wrote it.
    pub(crate) fn task_record(&self, task_id: &str) -> Value {
        let path = self
            .home
            .state_dir()
            .join("tasks")
            .join(format!("{task_id}.json"));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.mem().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
    }

    /// `bin` with this home's clean environment and the fake model ([`Dream::process`]), as
    /// a checked run.
    pub(crate) fn tool<'a>(&self, bin: &str) -> Run<'a> {
        Run::ours(self.process(&bin_path(bin)), bin)
    }

    /// `dream-run ARGS` with stdin closed, for a run the test stops, kills or watches.
    pub(crate) fn background<'a>(&self, args: &[&str]) -> Run<'a> {
        self.tool("dream-run")
            .args(args)
            .stdin_from(std::process::Stdio::null())
            .timeout(LONG_RUN)
    }

    /// `dream-lock release` of `envelope` (a run's stdout): released, as `outcome`, silently.
    pub(crate) fn release(&self, envelope: &str, outcome: &str) {
        self.tool("dream-lock")
            .arg("release")
            .stdin(envelope)
            .success()
            .stdout_json(|doc| {
                assert_eq!(doc["lock"]["released"], true, "{doc}");
                assert_eq!(doc["lock"]["outcome"], outcome, "{doc}");
            })
            .stderr_empty()
            .run();
    }

    /// The memory files, with their content (the lock files beside them change with the lock).
    pub(crate) fn md_tree(&self) -> std::collections::BTreeSet<(String, Vec<u8>)> {
        let mut files = crate::support::tree(&self.mem());
        files.retain(|(path, _)| path.ends_with(".md"));
        files
    }

    /// The lock's mtime: the last-consolidated time, in ms.
    pub(crate) fn lock_ms(&self) -> i64 {
        crate::support::epoch_ms(crate::support::mtime(&self.home.lock_file()))
    }

    /// A proposal made by one proposing run (under a lock released afterwards): the model
    /// reads what it then rewrites, and makes `calls` writes; returns the task id. `problems`
    /// are the health counts the run warns it raised ("" for none).
    pub(crate) fn propose_with(
        &self,
        reads: &[&str],
        writes: Vec<(&str, Value)>,
        problems: &str,
    ) -> String {
        let holder = LiveProcess::start();
        let envelope = self.acquired_envelope(&holder);
        let mut calls: Vec<(&str, Value)> = reads
            .iter()
            .map(|rel| ("read_file", json!({ "path": rel })))
            .collect();
        calls.extend(writes);
        let limit = (calls.len() + 2).to_string();
        self.api
            .push(Reply::anthropic_tools("Proposing.", &calls))
            .push(Reply::anthropic_text("Proposed."));
        let warning = if problems.is_empty() {
            String::new()
        } else {
            more_problems(problems)
        };
        let out = self
            .dream_run(
                &envelope,
                &[
                    "--propose",
                    "--max-calls-per-turn",
                    &limit,
                    "--max-files",
                    &limit,
                ],
            )
            .success()
            .stdout_json(|doc| assert_eq!(doc["run"]["status"], "proposed", "{doc}"))
            .stderr_is(warning)
            .run();
        self.release(&out.stdout, "proposed");
        out.json()["run"]["task_id"].as_str().unwrap().to_string()
    }

    /// `count` new topic files, plus the given rewrites of existing files.
    pub(crate) fn many_writes(
        count: usize,
        rewrites: &[(&'static str, &str)],
    ) -> Vec<(&'static str, Value)> {
        let body = "A fact worth keeping, and the reason it matters.\n".repeat(40);
        let mut calls: Vec<(&str, Value)> = (0..count)
            .map(|n| {
                (
                    "write_file",
                    json!({"path": format!("many/{n:04}.md"), "content": format!("# {n}\n{body}")}),
                )
            })
            .collect();
        for (rel, content) in rewrites {
            calls.push(("write_file", json!({"path": rel, "content": content})));
        }
        calls
    }

    /// The intent journal an apply or undo keeps while it writes.
    pub(crate) fn journal(&self) -> PathBuf {
        self.home.state_dir().join("journal")
    }

    /// A run (`dream-run ARGS` under a lock whose holder dies with it, as a hook's shell
    /// would) that makes the first answer's tool `calls` and is killed with SIGKILL while it
    /// waits for its second answer: nobody records its end or releases the lock.
    pub(crate) fn run_killed_midway(&self, calls: &[(&str, Value)], args: &[&str]) {
        let holder = LiveProcess::start();
        let envelope = self.acquired_envelope(&holder);
        let asked = self.api.requests().len();
        self.api
            .push(Reply::anthropic_tools("Writing.", calls))
            .push(Reply::Hang(std::time::Duration::from_secs(120)));
        let run = self
            .dream_run(&envelope, args)
            .timeout(LONG_RUN)
            .killed_by(libc::SIGKILL)
            .stdout_empty()
            .stderr_empty()
            .spawn();
        crate::support::wait::busy_until("the run's second request", || {
            self.api.requests().len() == asked + 2
        });
        run.signal(libc::SIGKILL);
        run.finish();
        holder.kill();
    }

    /// `dream-run recover` finding nothing to put back: `{"recovered": null}`, silent.
    pub(crate) fn recovers_nothing(&self) {
        self.tool("dream-run")
            .arg("recover")
            .success()
            .stdout_json(|doc| assert_eq!(doc, &json!({"recovered": null}), "{doc}"))
            .stderr_empty()
            .run();
    }

    /// `dream-gate` told to say yes now (no interval, no session needed): its envelope.
    pub(crate) fn gate_now(&self) -> String {
        self.tool("dream-gate")
            .args([
                "--min-hours",
                "0",
                "--min-sessions",
                "0",
                "--scan-interval",
                "0",
            ])
            .success()
            .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true, "{doc}"))
            .stderr_empty()
            .run()
            .stdout
    }

    /// `dream-gate` with a day's interval and one session: due (the sessions since the last
    /// consolidation are there, and nothing postponed it).
    pub(crate) fn gate_is_due(&self) {
        self.tool("dream-gate")
            .args([
                "--min-hours",
                "24",
                "--min-sessions",
                "1",
                "--scan-interval",
                "0",
            ])
            .success()
            .stdout_json(|doc| assert_eq!(doc["gate"]["due"], true, "{doc}"))
            .stderr_empty()
            .run();
    }

    /// `dream-run ARGS` reading `envelope` on stdin, as a checked run.
    pub(crate) fn dream_run<'a>(&self, envelope: &str, args: &[&str]) -> Run<'a> {
        self.tool("dream-run").args(args).stdin(envelope)
    }

    /// `dream-gate | dream-lock acquire --pid HOLDER`: the envelope dream-run gets.
    pub(crate) fn acquired_envelope(&self, holder: &LiveProcess) -> String {
        let gate = self.gate_now();
        self.tool("dream-lock")
            .args(["acquire", "--pid", &holder.pid().to_string()])
            .stdin(gate)
            .success()
            .stdout_json(|doc| assert_eq!(doc["lock"]["acquired"], true))
            .stderr_empty()
            .run()
            .stdout
    }

    /// A process with this home's environment, the fake model and the binaries on PATH.
    pub(crate) fn process(&self, program: &Path) -> std::process::Command {
        let bin_dir = bin_path("dream-run").parent().unwrap().to_path_buf();
        let path = format!(
            "{}:{}",
            bin_dir.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = self.home.process(program);
        cmd.env("PATH", path)
            .env("ANTHROPIC_BASE_URL", self.api.url())
            .env("ANTHROPIC_API_KEY", KEY)
            .env("DREAMKIT_RETRY_BASE_MS", "1");
        cmd
    }

    pub(crate) fn task(&self, id: &str) -> Value {
        let path = self
            .home
            .state_dir()
            .join("tasks")
            .join(format!("{id}.json"));
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
    }
}

pub(crate) fn tool_results(request: &Recorded) -> Vec<(String, bool)> {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    let text = match &b["content"] {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (text, b["is_error"] == true)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The consolidation the README describes: list, grep, read, write, edit, delete, summary.
pub(crate) fn script_full_consolidation(d: &Dream) {
    let transcripts = d.home.transcripts_dir();
    d.api
        .push(Reply::anthropic_tools(
            "Orienting.",
            &[
                ("shell", json!({"command": "ls -R"})),
                ("read_file", json!({"path": "MEMORY.md"})),
                // Read before it is deleted: the changed-since-read guard wants that.
                ("read_file", json!({"path": "stale.md"})),
            ],
        ))
        .push(Reply::anthropic_tools(
            "Gathering.",
            &[(
                "shell",
                json!({"command": format!("grep -rl blue-green {} | wc -l", transcripts.display())}),
            )],
        ))
        .push(Reply::anthropic_tools(
            "Consolidating.",
            &[
                (
                    "write_file",
                    json!({"path": "topics/deploy.md", "content": "Deploys are blue-green (since 2026-12-01).\n"}),
                ),
                (
                    "edit_file",
                    json!({"path": "MEMORY.md", "old_string": "- [Stale](stale.md): old notes\n", "new_string": "- [Deploy](topics/deploy.md): blue-green deploys\n"}),
                ),
                ("delete_file", json!({"path": "stale.md"})),
            ],
        ))
        .push(Reply::anthropic_text(
            "Merged the deploy facts into topics/deploy.md and dropped the stale FTP note.",
        ));
}
