//! Claude Code settings (three files merged, later wins) and the environment switches.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::Env;
use crate::cli::Failure;
use crate::files::read_regular_capped;

/// `feedbackDrafts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeedbackDrafts {
    Notify,
    Quiet,
    Off,
}

/// The keys dreamkit reads. `None` means no file set the key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Settings {
    pub auto_memory_enabled: Option<bool>,
    pub auto_memory_directory: Option<String>,
    pub auto_dream_enabled: Option<bool>,
    pub away_summary_enabled: Option<bool>,
    pub prompt_suggestion_enabled: Option<bool>,
    pub feedback_drafts: Option<FeedbackDrafts>,
}

/// Why the memory / dream machinery is switched off (`gate.detail`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disabled {
    AutoMemoryOff,
    AutoDreamOff,
    Remote,
    Simple,
}

impl Disabled {
    pub fn as_str(self) -> &'static str {
        match self {
            Disabled::AutoMemoryOff => "auto_memory_off",
            Disabled::AutoDreamOff => "auto_dream_off",
            Disabled::Remote => "remote",
            Disabled::Simple => "simple",
        }
    }
}

impl Settings {
    /// Reads `<config>/settings.json`, `<cwd>/.claude/settings.json` and
    /// `<cwd>/.claude/settings.local.json`, later files winning key by key.
    ///
    /// `autoMemoryDirectory` is not taken from `<cwd>/.claude/settings.json`: that file is
    /// committed with the repository, and a cloned repository must not be able to point the
    /// memory writer at a directory of its choosing.
    pub fn load(config_dir: &Path, cwd: &Path) -> Result<Settings, Failure> {
        let user = read_file(&config_dir.join("settings.json"))?;
        let mut project = read_file(&cwd.join(".claude/settings.json"))?;
        project.auto_memory_directory = None;
        let local = read_file(&cwd.join(".claude/settings.local.json"))?;
        Ok(user.overlay(project).overlay(local))
    }

    fn overlay(self, later: Settings) -> Settings {
        Settings {
            auto_memory_enabled: later.auto_memory_enabled.or(self.auto_memory_enabled),
            auto_memory_directory: later.auto_memory_directory.or(self.auto_memory_directory),
            auto_dream_enabled: later.auto_dream_enabled.or(self.auto_dream_enabled),
            away_summary_enabled: later.away_summary_enabled.or(self.away_summary_enabled),
            prompt_suggestion_enabled: later
                .prompt_suggestion_enabled
                .or(self.prompt_suggestion_enabled),
            feedback_drafts: later.feedback_drafts.or(self.feedback_drafts),
        }
    }

    /// Claude Code's auto-memory switch, in its order: an explicit
    /// `CLAUDE_CODE_DISABLE_AUTO_MEMORY` decides either way; then simple mode and remote mode
    /// without a remote memory dir turn it off; then `autoMemoryEnabled`; default on.
    pub fn auto_memory_disabled(&self, env: &Env) -> Option<Disabled> {
        const SWITCH: &str = "CLAUDE_CODE_DISABLE_AUTO_MEMORY";
        if env.is_truthy(SWITCH) {
            return Some(Disabled::AutoMemoryOff);
        }
        if env.is_defined_falsy(SWITCH) {
            return None;
        }
        if env.is_truthy("CLAUDE_CODE_SIMPLE") {
            return Some(Disabled::Simple);
        }
        if env.is_truthy("CLAUDE_CODE_REMOTE") && env.get("CLAUDE_CODE_REMOTE_MEMORY_DIR").is_none()
        {
            return Some(Disabled::Remote);
        }
        match self.auto_memory_enabled {
            Some(false) => Some(Disabled::AutoMemoryOff),
            _ => None,
        }
    }

    /// Auto memory must be on, and `autoDreamEnabled` not false (default on).
    pub fn dream_disabled(&self, env: &Env) -> Option<Disabled> {
        self.auto_memory_disabled(env)
            .or(match self.auto_dream_enabled {
                Some(false) => Some(Disabled::AutoDreamOff),
                _ => None,
            })
    }
}

/// Claude Code's settings files are a few KiB; a larger one is an error naming this cap, never
/// read whole.
const MAX_SETTINGS_BYTES: u64 = 16 * 1024 * 1024;

/// A missing file is an empty layer; an unreadable or invalid one, or one that is not a
/// regular file (a FIFO would block, `/dev/zero` never ends), is an environment failure,
/// because silently ignoring it could ignore the user's `autoDreamEnabled: false`.
fn read_file(path: &Path) -> Result<Settings, Failure> {
    let bytes = match read_regular_capped(path, MAX_SETTINGS_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(Settings::default()),
        Err(e) => return Err(Failure::io("read settings file", path, &e)),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Settings::default());
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| Failure::environment(format!("invalid settings file {}: {e}", path.display())))
}

/// `autoMemoryDirectory` as a path: `~/` expanded; anything else must be absolute.
pub fn expand_memory_directory(value: &str, home: Option<&Path>) -> Result<PathBuf, Failure> {
    let path = if value == "~" || value.starts_with("~/") {
        let home = home.ok_or_else(|| {
            Failure::environment("autoMemoryDirectory uses ~ but HOME is not set")
        })?;
        home.join(value.trim_start_matches('~').trim_start_matches('/'))
    } else {
        PathBuf::from(value)
    };
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(Failure::environment(format!(
            "autoMemoryDirectory {value:?} must be absolute or start with ~/"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn later_files_win_key_by_key() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let cwd = tmp.path().join("proj");
        write(
            &config.join("settings.json"),
            r#"{"autoDreamEnabled": false, "awaySummaryEnabled": true, "feedbackDrafts": "quiet", "other": {"x": 1}}"#,
        );
        write(
            &cwd.join(".claude/settings.json"),
            r#"{"autoDreamEnabled": true}"#,
        );
        write(
            &cwd.join(".claude/settings.local.json"),
            r#"{"feedbackDrafts": "off"}"#,
        );
        let s = Settings::load(&config, &cwd).unwrap();
        assert_eq!(s.auto_dream_enabled, Some(true));
        assert_eq!(s.away_summary_enabled, Some(true));
        assert_eq!(s.feedback_drafts, Some(FeedbackDrafts::Off));
        assert_eq!(s.auto_memory_enabled, None);
    }

    #[test]
    fn committed_project_settings_cannot_move_the_memory_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let cwd = tmp.path().join("proj");
        write(
            &cwd.join(".claude/settings.json"),
            r#"{"autoMemoryDirectory": "/home/victim/.ssh"}"#,
        );
        let s = Settings::load(&tmp.path().join("config"), &cwd).unwrap();
        assert_eq!(s.auto_memory_directory, None);
        write(
            &cwd.join(".claude/settings.local.json"),
            r#"{"autoMemoryDirectory": "~/notes"}"#,
        );
        let s = Settings::load(&tmp.path().join("config"), &cwd).unwrap();
        assert_eq!(s.auto_memory_directory.as_deref(), Some("~/notes"));
    }

    #[test]
    fn missing_files_are_empty_and_invalid_ones_fail() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            Settings::load(tmp.path(), tmp.path()).unwrap(),
            Settings::default()
        );
        write(&tmp.path().join("settings.json"), "{not json");
        let err = Settings::load(tmp.path(), tmp.path()).unwrap_err();
        assert_eq!(err.kind(), "environment");
        assert!(err.to_string().contains("settings.json"), "{err}");
        write(
            &tmp.path().join("settings.json"),
            r#"{"autoDreamEnabled": "no"}"#,
        );
        assert!(Settings::load(tmp.path(), tmp.path()).is_err());
    }

    #[test]
    fn switch_order_follows_claude_code() {
        let on = Settings::default();
        let off = Settings {
            auto_memory_enabled: Some(false),
            ..Settings::default()
        };
        let no_dream = Settings {
            auto_dream_enabled: Some(false),
            ..Settings::default()
        };
        let none = Env::default();
        assert_eq!(on.dream_disabled(&none), None);
        assert_eq!(off.dream_disabled(&none), Some(Disabled::AutoMemoryOff));
        assert_eq!(no_dream.dream_disabled(&none), Some(Disabled::AutoDreamOff));

        let disable = Env::from_pairs([("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "1")]);
        assert_eq!(on.dream_disabled(&disable), Some(Disabled::AutoMemoryOff));
        // An explicit falsy value turns memory on against the settings and simple mode.
        let enable = Env::from_pairs([
            ("CLAUDE_CODE_DISABLE_AUTO_MEMORY", "false"),
            ("CLAUDE_CODE_SIMPLE", "1"),
        ]);
        assert_eq!(off.auto_memory_disabled(&enable), None);
        assert_eq!(
            no_dream.dream_disabled(&enable),
            Some(Disabled::AutoDreamOff)
        );

        let simple = Env::from_pairs([("CLAUDE_CODE_SIMPLE", "true")]);
        assert_eq!(on.dream_disabled(&simple), Some(Disabled::Simple));
        let remote = Env::from_pairs([("CLAUDE_CODE_REMOTE", "1")]);
        assert_eq!(on.dream_disabled(&remote), Some(Disabled::Remote));
        let remote_dir = Env::from_pairs([
            ("CLAUDE_CODE_REMOTE", "1"),
            ("CLAUDE_CODE_REMOTE_MEMORY_DIR", "/mnt/mem"),
        ]);
        assert_eq!(on.dream_disabled(&remote_dir), None);
    }

    #[test]
    fn memory_directory_expansion() {
        let home = Path::new("/home/a");
        assert_eq!(
            expand_memory_directory("~/notes/mem", Some(home)).unwrap(),
            PathBuf::from("/home/a/notes/mem")
        );
        assert_eq!(
            expand_memory_directory("/abs", None).unwrap(),
            PathBuf::from("/abs")
        );
        assert!(expand_memory_directory("relative/dir", Some(home)).is_err());
        assert!(expand_memory_directory("~/x", None).is_err());
    }
}
