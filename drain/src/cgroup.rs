//! A cgroup v2 per job, where the daemon has a subtree it may manage.
//!
//! Where: the daemon's own cgroup, from `/proc/self/cgroup` under the cgroup2 mount in
//! `/proc/self/mountinfo`. Under systemd with `Delegate=yes` (the packaged unit) that is the
//! service's cgroup: the daemon moves itself into a leaf `daemon/` (a cgroup that enables
//! controllers for its children may hold no process itself) and makes each job's cgroup
//! beside it. A daemon in the root cgroup (a container's, a test machine's) makes
//! `landwall-drain/` for its jobs. Each job's cgroup is `job.<spool>.<daemon pid>.<job id>`,
//! `<spool>` a hash of the spool's path: daemons of other spools sharing the directory leave
//! each other's alone.
//!
//! What it gives: the job's caps as `memory.max` (swap not on top: `memory.swap.max` 0),
//! `pids.max` and `cpu.max`, where those controllers are enabled; and `cgroup.kill` (Linux
//! 5.14), which ends every process in the cgroup at once, however it detached and however
//! fast it forks. The job joins its cgroup itself, before its wall goes up; its keeper
//! stays in the daemon's, so that the caps and the kill reach the job alone.
//!
//! Where there is no such subtree, the daemon says so at start and jobs run without one:
//! the keeper (a child subreaper) still ends all of each job, and tasks are capped by
//! RLIMIT_NPROC where it can be. Memory is not: RLIMIT_DATA does not count shared memory or
//! tmpfs (found by review: a job capped at 64M held 512M of shared memory), so a job with
//! a memory cap and no `memory.max` to hold it is refused ([`no_memory_cap`]).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use landwall::limits::{self, size_text, JobCaps};

/// The period `cpu.max` counts in, in microseconds.
const CPU_PERIOD_US: u64 = 100_000;
/// How long the daemon waits for a killed job cgroup to empty.
const EMPTY_PATIENCE: Duration = Duration::from_secs(5);

/// The jobs' parent cgroup and what it can cap.
#[derive(Debug, Clone)]
pub struct Cgroups {
    /// Where the jobs' cgroups are made.
    pub base: PathBuf,
    /// Whether the memory, pids and cpu controllers are enabled for them.
    pub memory: bool,
    /// See `memory`.
    pub pids: bool,
    /// See `memory`.
    pub cpu: bool,
    /// `job.<spool>.`: this spool's job cgroups.
    spool: String,
    /// `job.<spool>.<daemon pid>.`: this daemon's.
    prefix: String,
}

/// How a job's cgroup ended.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Processes the kernel killed for reaching `memory.max`.
    pub oom_kills: u64,
    /// Forks refused for reaching `pids.max`.
    pub pids_max: u64,
}

/// Finds a cgroup v2 subtree the daemon can make job cgroups in, and enables the
/// controllers it can; `Err` says why there is none (for the one line at start).
pub fn detect(daemon_pid: u32, spool: &Path) -> Result<Cgroups, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    let mount = limits::cgroup2_mount(&mountinfo).ok_or("no cgroup v2 file system is mounted")?;
    let own = fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("reading /proc/self/cgroup: {e}"))?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2 hierarchy")?
        .trim();
    let dir = mount.join(rel.trim_start_matches('/'));
    let base = if rel == "/" {
        // The root cgroup may hold processes and enable controllers at once.
        let base = dir.join("landwall-drain");
        make_dir(&base).map_err(|e| format!("making {}: {e}", base.display()))?;
        enable(&dir);
        base
    } else {
        // A delegated cgroup: the daemon moves into a leaf so that the cgroup may enable
        // controllers for the jobs'.
        let leaf = dir.join("daemon");
        make_dir(&leaf).map_err(|e| format!("making {}: {e}", leaf.display()))?;
        join(&leaf).map_err(|e| format!("moving into {}: {e}", leaf.display()))?;
        dir
    };
    if !base.join("cgroup.kill").exists() {
        return Err(format!(
            "{} has no cgroup.kill (Linux 5.14 or later)",
            base.display()
        ));
    }
    enable(&base);
    let enabled = fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    let has = |c: &str| enabled.split_whitespace().any(|e| e == c);
    let cgroups = Cgroups {
        memory: has("memory"),
        pids: has("pids"),
        cpu: has("cpu"),
        base,
        spool: format!("job.{}.", spool_tag(spool)),
        prefix: format!("job.{}.{daemon_pid}.", spool_tag(spool)),
    };
    // Prove a job cgroup can be made and removed here, now rather than at the first job.
    let probe = cgroups.base.join(format!("{}probe", cgroups.prefix));
    make_dir(&probe)
        .and_then(|()| fs::remove_dir(&probe))
        .map_err(|e| format!("making a cgroup in {}: {e}", cgroups.base.display()))?;
    Ok(cgroups)
}

/// Eight hex digits for the spool's path (FNV-1a): names this spool's job cgroups.
fn spool_tag(spool: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in spool.as_os_str().as_bytes() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h as u32)
}

/// `mkdir`, an existing directory being fine.
fn make_dir(dir: &Path) -> io::Result<()> {
    match fs::create_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        other => other,
    }
}

/// Moves this process into `dir`.
fn join(dir: &Path) -> io::Result<()> {
    write(&dir.join("cgroup.procs"), "0")
}

/// Writes one value into a cgroup file.
fn write(file: &Path, value: &str) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(file)?
        .write_all(value.as_bytes())
}

/// Enables in `dir`'s `cgroup.subtree_control`, for its children, each of memory, pids and
/// cpu that its `cgroup.controllers` lists. One that cannot be enabled (a process in `dir`
/// other than the root cgroup, a controller the parent holds back) is left off: a memory
/// cap is then refused, a task cap falls back to RLIMIT_NPROC, a CPU cap to none; the line
/// at start says which.
fn enable(dir: &Path) {
    let have = fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    for c in ["memory", "pids", "cpu"] {
        if have.split_whitespace().any(|h| h == c) {
            if let Err(e) = write(&dir.join("cgroup.subtree_control"), &format!("+{c}")) {
                log::debug!("enabling {c} in {}: {e}", dir.display());
            }
        }
    }
}

impl Cgroups {
    /// The line the daemon logs at start.
    pub fn describe(&self) -> String {
        let mut caps = Vec::new();
        let mut not = Vec::new();
        for (on, name) in [
            (self.memory, "memory.max"),
            (self.pids, "pids.max"),
            (self.cpu, "cpu.max"),
        ] {
            if on {
                caps.push(name);
            } else {
                not.push(name);
            }
        }
        let mut line = format!(
            "jobs run in cgroups under {} and end with cgroup.kill",
            self.base.display()
        );
        if !caps.is_empty() {
            line.push_str(&format!("; caps: {}", caps.join(", ")));
        }
        if !not.is_empty() {
            line.push_str(&format!(
                "; no controller for {} here ({})",
                not.join(", "),
                fallback_words(!self.memory, !self.pids, !self.cpu)
            ));
        }
        line
    }

    /// Makes the job's cgroup with its caps written. A leftover of the same name (a job put
    /// back after a crash, under a daemon that got the same pid) is killed and replaced.
    pub fn create(&self, id: &str, caps: &JobCaps) -> io::Result<PathBuf> {
        let dir = self.base.join(format!("{}{id}", self.prefix));
        if dir.exists() {
            end(&dir);
        }
        fs::create_dir(&dir)?;
        let result = self.limit(&dir, caps);
        if result.is_err() {
            end(&dir);
        }
        result.map(|()| dir)
    }

    fn limit(&self, dir: &Path, caps: &JobCaps) -> io::Result<()> {
        if let (true, Some(m)) = (self.memory, caps.memory) {
            write(&dir.join("memory.max"), &m.to_string())?;
            // Swap on top of memory.max would let a job past its cap, only slower.
            match write(&dir.join("memory.swap.max"), "0") {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        if let (true, Some(t)) = (self.pids, caps.tasks) {
            write(&dir.join("pids.max"), &t.to_string())?;
        }
        if let (true, Some(c)) = (self.cpu, caps.cpu) {
            let quota = u64::from(c) * CPU_PERIOD_US / 100;
            write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        }
        Ok(())
    }

    /// Kills what is left in this spool's job cgroups of daemons that are gone (their keepers
    /// were killed with them) and removes the cgroups; returns how many held processes. A
    /// cgroup that will not empty at once is left for the next start: start-up does not wait.
    pub fn sweep(&self) -> usize {
        let Ok(entries) = fs::read_dir(&self.base) else {
            return 0;
        };
        let mut n = 0;
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(rest) = name
                .to_str()
                .and_then(|s| s.strip_prefix(self.spool.as_str()))
            else {
                continue;
            };
            let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else {
                continue;
            };
            let alive = fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "landwall-drain");
            if alive || !e.path().is_dir() {
                continue;
            }
            let dir = e.path();
            if populated(&dir) {
                kill(&dir);
                kill_listed(&dir);
                n += 1;
                let until = Instant::now() + Duration::from_millis(200);
                while populated(&dir) && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            if let Err(e) = fs::remove_dir(&dir) {
                log::debug!(
                    "removing cgroup {}: {e}; left for the next start",
                    dir.display()
                );
            }
        }
        n
    }
}

/// What to do where no memory cap can hold, for the one-line refusals.
pub const MEMORY_FIX: &str = "enable the memory controller for the daemon's cgroup v2 subtree (a host whose cgroup v2 lists `memory` in cgroup.controllers; under systemd, a unit with Delegate=yes as the packaged one)";

/// Why no job's memory cap can hold under `detected` (what [`detect`] found), or `None`
/// where `memory.max` holds it.
pub fn no_memory_cap(detected: &Result<Cgroups, String>) -> Option<String> {
    match detected {
        Ok(c) if c.memory => None,
        Ok(c) => Some(format!(
            "the jobs' cgroup v2 subtree {} has no memory controller, so no memory.max",
            c.base.display()
        )),
        Err(why) => Some(format!(
            "the daemon has no cgroup v2 subtree for jobs ({why}), so no memory.max"
        )),
    }
}

/// What holds without a controller, in words, for the line at start.
fn fallback_words(memory: bool, pids: bool, cpu: bool) -> String {
    let mut w = Vec::new();
    if memory {
        w.push(
            "jobs with a memory cap refused (RLIMIT_DATA would not count shared memory or tmpfs)",
        );
    }
    if pids {
        w.push("tasks by RLIMIT_NPROC where the daemon is not root");
    }
    if cpu {
        w.push("CPU share not capped");
    }
    w.join(", ")
}

/// The line a daemon without a cgroup subtree logs at start.
pub fn without(why: &str) -> String {
    format!(
        "no cgroup v2 subtree for jobs ({why}): each job's keeper, a child subreaper, still ends all of it; {} (see docs/drain.md, \"Caps\")",
        fallback_words(true, true, true)
    )
}

/// Kills every process in the job's cgroup now (`cgroup.kill`), without waiting.
pub fn kill(dir: &Path) {
    if let Err(e) = write(&dir.join("cgroup.kill"), "1") {
        log::warn!("killing cgroup {}: {e}", dir.display());
    }
}

/// Kills every process in the job's cgroup, waits until it is empty, reads what its caps
/// did, and removes it. Errors are logged: the job's result does not wait on a cgroup that
/// will not go.
pub fn end(dir: &Path) -> Usage {
    kill(dir);
    let deadline = Instant::now() + EMPTY_PATIENCE;
    while populated(dir) {
        // cgroup.kill passes over a process whose leader has exited while its other threads
        // run on (seen on Linux 6.18): those are killed one by one.
        kill_listed(dir);
        if Instant::now() >= deadline {
            log::warn!(
                "cgroup {} still has processes {EMPTY_PATIENCE:?} after cgroup.kill",
                dir.display()
            );
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let usage = Usage {
        oom_kills: counter(&dir.join("memory.events"), "oom_kill"),
        pids_max: counter(&dir.join("pids.events"), "max"),
    };
    if let Err(e) = fs::remove_dir(dir) {
        log::warn!("removing cgroup {}: {e}", dir.display());
    }
    usage
}

/// SIGKILL to each process `cgroup.procs` lists, through a pidfd opened first and checked
/// to be still in this cgroup, so that no other process that got a freed number is hit.
fn kill_listed(dir: &Path) {
    let Ok(procs) = fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    let want = dir.to_string_lossy().into_owned();
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        let Ok(fd) = landwall::sys::pidfd_open(pid) else {
            continue;
        };
        let member = fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| {
            c.lines()
                .filter_map(|l| l.strip_prefix("0::"))
                .any(|rel| want.ends_with(rel.trim()))
        });
        if member {
            if let Err(e) =
                landwall::sys::pidfd_send_signal(std::os::fd::AsFd::as_fd(&fd), libc::SIGKILL)
            {
                log::debug!("killing {pid} of {}: {e}", dir.display());
            }
        }
    }
}

/// Whether the cgroup still holds a process (`populated 1` in `cgroup.events`).
fn populated(dir: &Path) -> bool {
    counter(&dir.join("cgroup.events"), "populated") > 0
}

/// The value of `key` in a flat-keyed cgroup file; 0 if absent.
fn counter(file: &Path, key: &str) -> u64 {
    fs::read_to_string(file)
        .ok()
        .and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok())?
            })
        })
        .unwrap_or(0)
}

/// The reason a job that failed names for a cap it reached, if it reached one.
pub fn cap_reason(usage: Usage, caps: &JobCaps) -> Option<String> {
    if usage.oom_kills > 0 {
        return Some(match caps.memory {
            Some(m) => format!("memory.max {} reached", size_text(m)),
            None => "memory.max reached".into(),
        });
    }
    if usage.pids_max > 0 {
        return Some(match caps.tasks {
            Some(t) => format!("pids.max {t} reached"),
            None => "pids.max reached".into(),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_reasons() {
        let caps = JobCaps {
            memory: Some(64 << 20),
            tasks: Some(64),
            ..JobCaps::default()
        };
        assert_eq!(
            cap_reason(
                Usage {
                    oom_kills: 1,
                    pids_max: 0
                },
                &caps
            )
            .as_deref(),
            Some("memory.max 64M reached")
        );
        assert_eq!(
            cap_reason(
                Usage {
                    oom_kills: 0,
                    pids_max: 3
                },
                &caps
            )
            .as_deref(),
            Some("pids.max 64 reached")
        );
        assert_eq!(cap_reason(Usage::default(), &caps), None);
    }
}
