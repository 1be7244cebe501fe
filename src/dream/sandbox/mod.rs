//! TEMPORARY STUB for compiling the run loop; replaced by the sandbox helper's module at merge.
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Limits {
    pub shell_timeout: Duration,
    pub output_cap: usize,
    pub max_file_bytes: usize,
    pub read_default_lines: usize,
}
impl Default for Limits {
    fn default() -> Self {
        Limits {
            shell_timeout: Duration::from_secs(10),
            output_cap: 65536,
            max_file_bytes: 262144,
            read_default_lines: 2000,
        }
    }
}
pub trait WriteGuard {
    fn before_write(&mut self, path: &Path) -> Result<(), GuardRefusal>;
}
pub struct GuardRefusal {
    pub message: String,
    pub stop_run: bool,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Created,
    Modified,
    Deleted,
}
pub struct ToolResult {
    pub content: String,
    pub is_error: bool,
    pub touched: Option<(PathBuf, Change)>,
    pub stop_run: bool,
}
pub struct Sandbox {
    memory_dir: PathBuf,
}
impl Sandbox {
    pub fn new(memory_dir: &Path, _roots: &[PathBuf], _limits: Limits) -> std::io::Result<Sandbox> {
        Ok(Sandbox {
            memory_dir: memory_dir.canonicalize()?,
        })
    }
    pub fn tool_specs() -> Vec<crate::model::ToolSpec> {
        Vec::new()
    }
    pub fn call(
        &mut self,
        name: &str,
        input: &serde_json::Value,
        guard: &mut dyn WriteGuard,
    ) -> ToolResult {
        if name == "write_file" {
            let path = self
                .memory_dir
                .join(input["path"].as_str().unwrap_or("x.md"));
            let existed = path.exists();
            if let Err(r) = guard.before_write(&path) {
                return ToolResult {
                    content: r.message,
                    is_error: true,
                    touched: None,
                    stop_run: r.stop_run,
                };
            }
            let _ = std::fs::write(&path, input["content"].as_str().unwrap_or(""));
            return ToolResult {
                content: "ok".into(),
                is_error: false,
                touched: Some((
                    path,
                    if existed {
                        Change::Modified
                    } else {
                        Change::Created
                    },
                )),
                stop_run: false,
            };
        }
        ToolResult {
            content: format!("stub {name}"),
            is_error: true,
            touched: None,
            stop_run: false,
        }
    }
    pub fn landlock_active(&self) -> bool {
        false
    }
    pub fn memory_dir(&self) -> &Path {
        &self.memory_dir
    }
}
