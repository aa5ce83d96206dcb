//! Caps on one drain job: memory, tasks, CPU share and the size of its log. The daemon's
//! `[drain]` section sets the maximum (and so the default); a job file may ask for less of
//! any of them, never more. Where the daemon has a cgroup v2 subtree with the controllers,
//! memory, tasks and CPU become `memory.max`, `pids.max` and `cpu.max` of the job's cgroup;
//! the log cap is kept by the job's keeper, which copies the job's output into its log.

use std::fmt;

/// The caps one job runs under. `None`: not capped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCaps {
    /// Memory in bytes (`memory.max`; swap is not counted on top).
    pub memory: Option<u64>,
    /// Tasks: processes and threads (`pids.max`).
    pub tasks: Option<u32>,
    /// CPU share in percent of one CPU (`cpu.max`: 150 is one and a half CPUs).
    pub cpu: Option<u32>,
    /// The job's log, in bytes: output past it is dropped and the job is stopped.
    pub log: Option<u64>,
}

/// The log cap when `[drain]` sets none: enough for any agent's transcript, small enough that
/// a job writing without end cannot fill a spool's file system.
pub const DEFAULT_LOG_MAX: u64 = 64 << 20;

/// The task cap when `[drain]` sets none: room for an agent's threads and its tools' (a
/// node agent runs a dozen threads; a build more), small enough to stop a fork bomb.
pub const DEFAULT_TASKS_MAX: u32 = 4096;

/// The size of a job's own `/tmp` and of its `/dev/shm` (each) when `[drain] tmp_size` sets
/// none and the job has no memory cap: room for builds and test databases; a job writing
/// without end stops there (ENOSPC) rather than at the host's memory.
pub const DEFAULT_TMP_SIZE: u64 = 1 << 30;

/// The size of each of a job's own tmpfs (`/tmp`, `/dev/shm`): `[drain] tmp_size`, else the
/// job's memory cap (what it writes there is memory: `memory.max` counts it too), else
/// [`DEFAULT_TMP_SIZE`].
pub fn tmp_size(configured: Option<u64>, caps: &JobCaps) -> u64 {
    configured.or(caps.memory).unwrap_or(DEFAULT_TMP_SIZE)
}

/// The daemon's maxima as `[drain]` gives them, with the defaults filled in.
pub fn with_defaults(max: JobCaps) -> JobCaps {
    JobCaps {
        memory: max.memory,
        tasks: Some(max.tasks.unwrap_or(DEFAULT_TASKS_MAX)),
        cpu: max.cpu,
        log: Some(max.log.unwrap_or(DEFAULT_LOG_MAX)),
    }
}

/// What a job runs under: each cap the job asks for, if it is within the daemon's maximum;
/// the maximum where it asks for none. A job asking for more than the maximum is refused,
/// naming the cap, rather than run under less than it asked.
pub fn effective(asked: JobCaps, max: JobCaps) -> Result<JobCaps, String> {
    fn one<T: Copy + PartialOrd>(
        key: &str,
        asked: Option<T>,
        max: Option<T>,
        show: impl Fn(T) -> String,
    ) -> Result<Option<T>, String> {
        match (asked, max) {
            (Some(a), Some(m)) if a > m => Err(format!(
                "`{key}` = {} is above the daemon's maximum {} (`{key}_max` in [drain]); ask for less",
                show(a),
                show(m)
            )),
            (Some(a), _) => Ok(Some(a)),
            (None, m) => Ok(m),
        }
    }
    Ok(JobCaps {
        memory: one("memory", asked.memory, max.memory, size_text)?,
        tasks: one("tasks", asked.tasks, max.tasks, |n| n.to_string())?,
        cpu: one("cpu", asked.cpu, max.cpu, |n| format!("{n}%"))?,
        log: one("log", asked.log, max.log, size_text)?,
    })
}

/// A size written as an integer with an optional unit: `512M`, `2G`, `65536`, `64K`. Units
/// are powers of 1024 (K, M, G, T; `KiB`, `MiB`… and `KB`, `MB`… mean the same).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = || format!("`{text}` is not a size: write it like `512M`, `2G` or `65536` (bytes)");
    let t = text.trim();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Err(bad());
    }
    let n: u64 = t[..digits].parse().map_err(|_| bad())?;
    let shift = match t[digits..].trim_start() {
        "" | "B" => 0,
        "K" | "KB" | "KiB" | "k" => 10,
        "M" | "MB" | "MiB" => 20,
        "G" | "GB" | "GiB" => 30,
        "T" | "TB" | "TiB" => 40,
        _ => return Err(bad()),
    };
    let v = n.checked_mul(1u64 << shift).ok_or_else(bad)?;
    if v == 0 {
        return Err(format!("`{text}`: a cap of zero would stop every job"));
    }
    Ok(v)
}

/// A CPU share written as a percentage of one CPU: `50%`, `100%`, `250%`.
pub fn parse_cpu(text: &str) -> Result<u32, String> {
    let bad = || format!("`{text}` is not a CPU share: write it like `50%` or `200%` (of one CPU)");
    let t = text.trim().strip_suffix('%').ok_or_else(bad)?;
    let n: u32 = t.trim().parse().map_err(|_| bad())?;
    if !(1..=100_000).contains(&n) {
        return Err(bad());
    }
    Ok(n)
}

/// `512M`-style text for a size, exact (the largest unit that divides it).
pub fn size_text(bytes: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// The mount point of the cgroup2 file system whose root is the hierarchy's root, from the
/// text of `/proc/self/mountinfo`.
pub fn cgroup2_mount(mountinfo: &str) -> Option<std::path::PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        let fstype = right.split_whitespace().next()?;
        let fields: Vec<&str> = left.split_whitespace().collect();
        let point = fields.get(4)?;
        (fstype == "cgroup2" && fields.get(3) == Some(&"/"))
            .then(|| std::path::PathBuf::from(unescape(point)))
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(crate) fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(u8::is_ascii_digit) {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a drain job's memory cap can hold on this host at all: `Ok` with the cgroup v2
/// mount where its root offers the memory controller (a daemon still needs a subtree with
/// it: systemd's `Delegate=yes`, or the root cgroup), else why not. For `doctor`: no
/// cgroup below the root can have a controller the root lacks.
pub fn host_memory_controller() -> Result<std::path::PathBuf, String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("reading /proc/self/mountinfo: {e}"))?;
    let mount = cgroup2_mount(&info).ok_or("no cgroup v2 file system is mounted")?;
    let file = mount.join("cgroup.controllers");
    let have =
        std::fs::read_to_string(&file).map_err(|e| format!("reading {}: {e}", file.display()))?;
    if have.split_whitespace().any(|c| c == "memory") {
        Ok(mount)
    } else {
        let have = have.trim();
        Err(format!(
            "the cgroup v2 hierarchy at {} has no memory controller (its controllers: {})",
            mount.display(),
            if have.is_empty() { "none" } else { have }
        ))
    }
}

impl fmt::Display for JobCaps {
    /// `memory 512M, tasks 4096, cpu 150%, log 64M` (only the caps set; `none` if none).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(m) = self.memory {
            parts.push(format!("memory {}", size_text(m)));
        }
        if let Some(t) = self.tasks {
            parts.push(format!("tasks {t}"));
        }
        if let Some(c) = self.cpu {
            parts.push(format!("cpu {c}%"));
        }
        if let Some(l) = self.log {
            parts.push(format!("log {}", size_text(l)));
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found() {
        use std::path::PathBuf;
        let info = "24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n\
                    35 24 0:30 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n\
                    36 24 0:31 /sub /elsewhere rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            cgroup2_mount("24 30 0:22 / /sys rw - sysfs sysfs rw\n"),
            None
        );
        assert_eq!(unescape("/a\\040b"), "/a b");
    }

    #[test]
    fn tmp_size_is_configured_else_the_memory_cap_else_1g() {
        let capped = JobCaps {
            memory: Some(64 << 20),
            ..JobCaps::default()
        };
        assert_eq!(tmp_size(Some(8 << 20), &capped), 8 << 20);
        assert_eq!(tmp_size(None, &capped), 64 << 20);
        assert_eq!(tmp_size(None, &JobCaps::default()), 1 << 30);
    }

    #[test]
    fn sizes_parse_and_print() {
        for (text, bytes) in [
            ("65536", 65536),
            ("64K", 64 << 10),
            ("512M", 512 << 20),
            ("512MiB", 512 << 20),
            ("2G", 2 << 30),
            ("1T", 1 << 40),
        ] {
            assert_eq!(parse_size(text), Ok(bytes), "{text}");
        }
        for bad in ["", "M", "12X", "-1M", "0", "99999999999T", "1.5G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(size_text(512 << 20), "512M");
        assert_eq!(size_text(1000), "1000");
        assert_eq!(size_text(3 << 30), "3G");
    }

    #[test]
    fn cpu_shares_parse() {
        assert_eq!(parse_cpu("150%"), Ok(150));
        for bad in ["150", "0%", "x%", "-5%"] {
            assert!(parse_cpu(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_job_may_ask_for_less_never_more() {
        let max = with_defaults(JobCaps {
            memory: Some(1 << 30),
            ..JobCaps::default()
        });
        assert_eq!(max.tasks, Some(DEFAULT_TASKS_MAX));
        assert_eq!(max.log, Some(DEFAULT_LOG_MAX));
        let less = JobCaps {
            memory: Some(64 << 20),
            cpu: Some(50),
            ..JobCaps::default()
        };
        let got = effective(less, max).expect("within");
        assert_eq!(got.memory, Some(64 << 20));
        assert_eq!(got.cpu, Some(50), "no maximum: the job's own cap holds");
        assert_eq!(got.tasks, max.tasks);
        let more = JobCaps {
            memory: Some(2 << 30),
            ..JobCaps::default()
        };
        let e = effective(more, max).expect_err("above");
        assert!(e.contains("`memory` = 2G") && e.contains("1G"), "{e}");
        assert_eq!(got.to_string(), "memory 64M, tasks 4096, cpu 50%, log 64M");
    }
}
