//! Landlock confinement of the spawned programs (defence in depth behind the path checks).
//!
//! Rules (ABI v6 requested, best effort): every file-system right is handled, so anything not
//! granted below is denied, writes everywhere included; TCP bind/connect are handled with no
//! rule (no network), and abstract-socket/signal scoping is on where the kernel has it.
//! Granted, read-only:
//! - execute + read file + read dir beneath the system trees the programs and their loader
//!   need: `/usr`, `/bin`, `/sbin`, `/lib`, `/lib32`, `/lib64`, `/libx32` (those that exist);
//! - read file: `/etc/ld.so.cache`, `/etc/ld.so.conf`, `/etc/ld.so.conf.d`, `/etc/ld.so.preload`
//!   (the loader) and `/etc/localtime` (times in `ls -l`/`stat` match an unconfined run).
//!   Nothing else of `/etc` (so `ls -l` and `stat` print numeric or UNKNOWN owners), no
//!   `/proc`, no `/dev`;
//! - read file + read dir beneath each readable root (no execute).
//!
//! The ruleset is built once in the parent; the child only calls `prctl(PR_SET_NO_NEW_PRIVS)`
//! and `landlock_restrict_self` between fork and exec (both async-signal-safe, no allocation).

#[cfg(target_os = "linux")]
pub(super) use linux::Confinement;
#[cfg(not(target_os = "linux"))]
pub use other::Confinement;

#[cfg(target_os = "linux")]
mod linux {
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};

    use landlock::{
        Access, AccessFs, AccessNet, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
        Scope, ABI,
    };

    use crate::tools::dream_run::sandbox::shell::Programs;

    const SYSTEM_TREES: &[&str] = &[
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
    ];
    const LOADER_FILES: &[&str] = &[
        "/etc/ld.so.cache",
        "/etc/ld.so.conf",
        "/etc/ld.so.conf.d",
        "/etc/ld.so.preload",
        "/etc/localtime",
    ];

    /// A created Landlock ruleset (its descriptor is close-on-exec).
    #[derive(Debug)]
    pub(crate) struct Confinement {
        ruleset: OwnedFd,
    }

    impl Confinement {
        /// Builds the ruleset for `roots`; `None` when the kernel has no Landlock.
        fn build(roots: &[PathBuf]) -> Option<Confinement> {
            let abi = ABI::V6;
            let mut created = Ruleset::default()
                .handle_access(AccessFs::from_all(abi))
                .ok()?
                .handle_access(AccessNet::from_all(abi))
                .ok()?
                .scope(Scope::from_all(abi))
                .ok()?
                .create()
                .ok()?;
            let system = AccessFs::from_read(abi);
            let read_only = AccessFs::ReadFile | AccessFs::ReadDir;
            let grants = SYSTEM_TREES
                .iter()
                .map(|p| (p, system))
                .chain(LOADER_FILES.iter().map(|p| (p, read_only)));
            for (path, access) in grants {
                // A missing path is simply not granted; PathFd opens with O_PATH.
                if let Ok(fd) = PathFd::new(path) {
                    created = created.add_rule(PathBeneath::new(fd, access)).ok()?;
                }
            }
            for root in roots {
                let fd = PathFd::new(root).ok()?;
                created = created.add_rule(PathBeneath::new(fd, read_only)).ok()?;
            }
            let fd: Option<OwnedFd> = created.into();
            fd.map(|ruleset| Confinement { ruleset })
        }

        /// Builds the ruleset and checks, with real spawned programs, that the kernel enforces it
        /// and that the programs still run under it: `ls` of the memory dir must succeed and `ls /`
        /// must be denied. Any other outcome means "not confined" (`None`), and commands then run
        /// under the path policy alone.
        pub(crate) fn probe(
            roots: &[PathBuf],
            programs: &Programs,
            memory_dir: &Path,
        ) -> Option<Confinement> {
            let confinement = Confinement::build(roots)?;
            let ls = programs.path("ls")?;
            let list = |dir: &Path| -> Option<bool> {
                let mut command = Command::new(ls);
                command
                    .arg("-a")
                    .arg("--")
                    .arg(dir)
                    .env_clear()
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                confinement.apply(&mut command);
                command.status().ok().map(|s| s.success())
            };
            if !list(memory_dir)? {
                return None;
            }
            let root_allowed = roots.iter().any(|r| r == Path::new("/"));
            if !root_allowed && list(Path::new("/"))? {
                return None;
            }
            Some(confinement)
        }

        /// Makes `command` restrict itself with this ruleset between fork and exec.
        pub(crate) fn apply(&self, command: &mut Command) {
            use std::os::unix::process::CommandExt;
            let fd = self.ruleset.as_raw_fd();
            // SAFETY: pre_exec has no safe form. The closure runs in the forked child and only
            // makes two raw system calls (no allocation, no locks); `fd` stays open in the
            // parent for the Sandbox's lifetime, so it is valid in the child until exec closes
            // it (close-on-exec).
            #[allow(unsafe_code)]
            unsafe {
                command.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::syscall(libc::SYS_landlock_restrict_self, fd, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
    }
}

/// No Landlock outside Linux: commands run under the path policy alone.
#[cfg(not(target_os = "linux"))]
mod other {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use crate::tools::dream_run::sandbox::shell::Programs;

    #[derive(Debug)]
    pub struct Confinement;

    impl Confinement {
        pub fn probe(
            _roots: &[PathBuf],
            _programs: &Programs,
            _memory_dir: &Path,
        ) -> Option<Confinement> {
            None
        }

        pub fn apply(&self, _command: &mut Command) {}
    }
}
