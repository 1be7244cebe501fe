//! Is a process alive, and when did it start? A lock's holder is a live process that started
//! before the lock was written; a PID reused by a later process is not a holder.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What `/proc` says about a PID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcessInfo {
    pub alive: bool,
    /// `None` when unknown (no `/proc`): such a process is taken at its word.
    pub started: Option<SystemTime>,
}

/// Probes a PID. Zombies count as dead: they hold nothing.
pub fn probe(pid: u32) -> ProcessInfo {
    const DEAD: ProcessInfo = ProcessInfo {
        alive: false,
        started: None,
    };
    let Ok(signed) = libc::pid_t::try_from(pid) else {
        return DEAD;
    };
    if signed <= 0 {
        return DEAD;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => match parse_stat(&stat) {
            Some((state, _)) if state == 'Z' || state == 'X' => DEAD,
            Some((_, ticks)) => ProcessInfo {
                alive: true,
                started: boot_time().map(|boot| boot + ticks_to_duration(ticks)),
            },
            None => ProcessInfo {
                alive: true,
                started: None,
            },
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DEAD,
        // No usable /proc: fall back to the kernel's answer to signal 0.
        Err(_) => {
            let alive = match rustix::process::Pid::from_raw(signed) {
                Some(pid) => match rustix::process::test_kill_process(pid) {
                    Ok(()) => true,
                    Err(e) => e == rustix::io::Errno::PERM,
                },
                None => false,
            };
            ProcessInfo {
                alive,
                started: None,
            }
        }
    }
}

/// This machine and PID namespace (boot id and namespace): PIDs recorded elsewhere cannot be
/// probed here.
pub fn this_node() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let ns = std::fs::read_link("/proc/self/ns/pid")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{}/{ns}", boot.trim())
}

/// Whether `pid` is this process or one of its ancestors (the shell that ran us, its
/// parent, ...): a lock held by one of them is held by "the caller".
pub fn is_self_or_ancestor(pid: u32) -> bool {
    let mut current = std::process::id();
    // The depth bound guards against a /proc that reports a cycle.
    for _ in 0..256 {
        if current == pid {
            return true;
        }
        match parent_of(current) {
            Some(parent) if parent != 0 && parent != current => current = parent,
            _ => return false,
        }
    }
    false
}

/// The parent PID of `pid` (field 4 of `/proc/<pid>/stat`), if it can be read.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `(state, starttime in clock ticks since boot)` from `/proc/<pid>/stat`. The command name
/// is in parentheses and may itself hold spaces and parentheses, so fields are counted from
/// the last `)`.
fn parse_stat(stat: &str) -> Option<(char, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // Field 22 (starttime) is the 20th after the command name.
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

fn ticks_to_duration(ticks: u64) -> Duration {
    let per_second = match rustix::param::clock_ticks_per_second() {
        0 => 100,
        ticks => ticks,
    };
    Duration::from_millis(ticks.saturating_mul(1000) / per_second)
}

/// The `btime` line of `/proc/stat`.
fn boot_time() -> Option<SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_odd_command_names() {
        let stat =
            "4242 (we (ird) name) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1 2 3";
        assert_eq!(parse_stat(stat), Some(('S', 987654)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_is_alive_and_started_in_the_past() {
        let me = probe(std::process::id());
        assert!(me.alive);
        let started = me.started.expect("start time from /proc");
        assert!(started <= SystemTime::now() + Duration::from_secs(2));
        assert!(started > SystemTime::now() - Duration::from_secs(24 * 3600));
    }

    #[test]
    fn reaped_and_impossible_pids_are_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // The PID may in theory be reused at once; if so it started after this test began.
        let info = probe(pid);
        assert!(!info.alive || info.started.is_some());
        assert!(!probe(0).alive);
        assert!(!probe(u32::MAX).alive);
    }

    #[test]
    fn ancestors_are_the_caller() {
        assert!(is_self_or_ancestor(std::process::id()));
        assert!(is_self_or_ancestor(std::os::unix::process::parent_id()));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(!is_self_or_ancestor(child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn zombies_are_dead() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Wait until it has exited but leave it unreaped.
        for _ in 0..500 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if parse_stat(&stat).map(|s| s.0) == Some('Z') {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!probe(pid).alive);
        child.wait().unwrap();
    }
}
