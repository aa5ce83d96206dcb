//! Process groups: signalling a job's group, and finding and killing a group that a dead
//! daemon left behind (so that a job put back in the queue never runs twice at once).

use std::path::Path;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use landwall::spool::RunRecord;

/// The fields of `/proc/PID/stat` the daemon needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The state letter (`R`, `S`, `Z`, …).
    pub state: char,
    /// The parent's pid.
    pub ppid: i32,
    /// The process group.
    pub pgrp: i32,
    /// Start time in clock ticks since boot.
    pub start_ticks: u64,
}

/// Parses `/proc/PID/stat`. The command name (field 2) may contain spaces and parentheses,
/// so the fields are counted from its last `)`.
pub fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // Field 3 (state) is fields[0]; field 4 (ppid) fields[1]; field 5 (pgrp) fields[2];
    // field 22 (starttime) fields[19].
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgrp: fields.get(2)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/PID/stat` of a live process.
pub fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Sends `sig` to process group `pgid`; `false` if the group no longer exists.
pub fn signal_group(pgid: u32, sig: Signal) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    match killpg(Pid::from_raw(raw), sig) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(e) => {
            log::warn!("signalling process group {pgid} with {sig}: {e}");
            false
        }
    }
}

/// Sends `sig` to one process; `false` if it no longer exists.
pub fn signal_pid(pid: u32, sig: Signal) -> bool {
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    match nix::sys::signal::kill(Pid::from_raw(raw), sig) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(e) => {
            log::warn!("signalling process {pid} with {sig}: {e}");
            false
        }
    }
}

/// The live (not zombie) processes in group `pgid`, from a scan of `proc`.
pub fn live_members(proc_root: &Path, pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    let Ok(pgid) = i32::try_from(pgid) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(proc_root.join(pid.to_string()).join("stat"))
                .ok()
                .and_then(|t| parse_stat(&t))
                .is_some_and(|s| s.pgrp == pgid && s.state != 'Z')
        })
        .collect()
}

/// Kills what is left of a job's process group after its daemon died, and waits (up to
/// `patience`) until none of it is alive. Returns how many processes were found.
///
/// The group is the dead daemon's if its leader is gone (a live group keeps its number
/// reserved, so no other process can have been given it) or if the leader is the very
/// process recorded (same start time). A leader with another start time means the number
/// was reused and the job's group is long gone: nothing is killed.
pub fn kill_leftovers(run: &RunRecord, patience: Duration) -> usize {
    if let Some(leader) = stat(run.pid) {
        if leader.start_ticks != run.start_ticks {
            return 0;
        }
    }
    let proc_root = Path::new("/proc");
    let found = live_members(proc_root, run.pid).len();
    if found == 0 {
        return 0;
    }
    signal_group(run.pid, Signal::SIGKILL);
    let deadline = Instant::now() + patience;
    while !live_members(proc_root, run.pid).is_empty() {
        if Instant::now() >= deadline {
            log::warn!(
                "process group {} is still alive {patience:?} after SIGKILL",
                run.pid
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    found
}

/// A signal's name for logs and results (`SIGKILL`), or its number.
pub fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let text = "4242 (a) b (c)) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        assert_eq!(
            parse_stat(text),
            Some(Stat {
                state: 'S',
                ppid: 1,
                pgrp: 4240,
                start_ticks: 987654
            })
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn own_stat_is_read() {
        let me = stat(std::process::id()).expect("own stat");
        assert_ne!(me.state, 'Z');
        assert_eq!(
            me.pgrp,
            nix::unistd::getpgrp().as_raw(),
            "pgrp field matches getpgrp"
        );
    }

    #[test]
    fn leftovers_are_killed_and_a_reused_pid_is_not() {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        let ticks = stat(pid).expect("stat").start_ticks;
        let other = RunRecord {
            pid,
            start_ticks: ticks + 1,
            started_at: String::new(),
        };
        assert_eq!(kill_leftovers(&other, Duration::from_secs(5)), 0);
        assert!(child.try_wait().expect("wait").is_none(), "left alone");
        let ours = RunRecord {
            start_ticks: ticks,
            ..other
        };
        assert_eq!(kill_leftovers(&ours, Duration::from_secs(5)), 1);
        let status = child.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert_eq!(signal_name(9), "SIGKILL");
        assert_eq!(signal_name(1000), "signal 1000");
    }
}
