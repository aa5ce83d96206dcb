//! The drain spool: where `landwall submit` queues jobs and `landwall-drain` runs them.
//!
//! Layout of a spool directory (default `/var/spool/landwall`):
//!
//! ```text
//! lock                 the pid of the daemon holding the spool's lock (an flock on the
//!                      spool directory itself: one daemon per spool)
//! tmp/                 files being written; renamed into place when complete
//! queue/ID.toml        submitted jobs, waiting; run in name order, which is submit order
//! running/ID.toml      claimed jobs (atomic rename from queue/), one process group each
//! running/ID.run       pid, process start time and start time of the job's runner
//! done/ID.toml         jobs that ran and exited with status 0 …
//! done/ID.result.toml  … and their results
//! failed/ID.toml       jobs that were refused, could not start, exited non-zero, were
//! failed/ID.result.toml  killed or timed out, and their results (with the reason)
//! logs/ID.log          the job's stdout and stderr (appended to if the job is re-run)
//! ```
//!
//! A job ID is `YYYYMMDDTHHMMSS.NNNNNNNNNZ-PID-RAND` (UTC submit time to the nanosecond, the
//! submitter's pid, 16 random bits), so names sort in submit order. A hand-made ID may not
//! end in `.result` ([`valid_job_id`]), so no two jobs share a derived name.
//!
//! Invariants, and how they hold across a crash at any point:
//! - A job file is always in exactly one of queue/, running/, done/, failed/: every move is a
//!   `rename(2)` within the spool. Submitting writes the file in tmp/, fsyncs it, renames it
//!   into queue/ without replacing anything, and fsyncs queue/.
//! - A job is never lost: a job in running/ whose daemon died goes back to queue/ when the
//!   next daemon starts, unless its result was already written, in which case the move to
//!   done/ or failed/ is completed instead.
//! - A result is recorded once: it is written (fsynced) into done/ or failed/ *before* the
//!   job file leaves running/, so a job with a result is never run again.
//! - A job is never run twice at once: claiming is a rename (only one claimer can win), and a
//!   restarted daemon kills a dead daemon's leftover process group (from `ID.run`) before it
//!   puts the job back.
//!
//! Jobs run as the daemon's uid, so a job file's owner does not tell a submitted job from one
//! a job wrote: what does is that no job's wall reaches the spool (the drain keeps it off
//! limits in every job's policy; docs/drain.md, "Why a job cannot submit a job"). What is
//! shown from these files goes through [`printable`]: jobs influence parts of it.
//!
//! Everything here is plain file handling with no process or kernel policy in it, so it can
//! be tested on a scratch directory.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::{parse_duration, valid_agent_name};
use crate::env::{EnvPattern, EnvPolicy};
use crate::limits::{self, JobCaps};

/// Job files larger than this are refused unread.
pub const MAX_JOB_SIZE: u64 = 64 * 1024;

/// The agent profile a job runs under when its file names none.
pub const DEFAULT_AGENT: &str = "claude";

/// The longest job ID accepted in a queue file name.
const MAX_ID_LEN: usize = 128;

/// A spool I/O failure, naming what was being done and where.
#[derive(Debug, thiserror::Error)]
#[error("{what} {}: {source}", path.display())]
pub struct SpoolError {
    /// What was being done.
    pub what: &'static str,
    /// The path.
    pub path: PathBuf,
    /// Why it failed.
    pub source: io::Error,
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> SpoolError + 'a {
    move |source| SpoolError {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// A job refused before it ran: the reason, in one line, as recorded in its result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

fn reject<T>(why: impl Into<String>) -> Result<T, Rejected> {
    Err(Rejected(why.into()))
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// In queue/.
    Queued,
    /// In running/.
    Running,
    /// Ran and exited with status 0.
    Done,
    /// Refused, could not start, exited non-zero, was killed or timed out.
    Failed,
    /// Ran, and changed a protected path of its worktree, which the drain put back (its
    /// reason names the paths; its exit status is recorded as for any job). Kept in
    /// failed/.
    Tampered,
}

impl State {
    /// The state's name as shown to users.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Queued => "queued",
            State::Running => "running",
            State::Done => "done",
            State::Failed => "failed",
            State::Tampered => "tampered",
        }
    }
}

/// A spool directory and the paths inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spool {
    root: PathBuf,
}

impl Spool {
    /// The spool at `root` (nothing is touched).
    pub fn new(root: impl Into<PathBuf>) -> Spool {
        Spool { root: root.into() }
    }

    /// The spool directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
    /// `queue/`.
    pub fn queue(&self) -> PathBuf {
        self.root.join("queue")
    }
    /// `running/`.
    pub fn running(&self) -> PathBuf {
        self.root.join("running")
    }
    /// `done/`.
    pub fn done(&self) -> PathBuf {
        self.root.join("done")
    }
    /// `failed/`.
    pub fn failed(&self) -> PathBuf {
        self.root.join("failed")
    }
    /// `logs/`.
    pub fn logs(&self) -> PathBuf {
        self.root.join("logs")
    }
    /// `tmp/`.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }
    /// `lock`.
    pub fn lock_path(&self) -> PathBuf {
        self.root.join("lock")
    }
    /// The directory for jobs in `state`.
    pub fn dir(&self, state: State) -> PathBuf {
        match state {
            State::Queued => self.queue(),
            State::Running => self.running(),
            State::Done => self.done(),
            State::Failed | State::Tampered => self.failed(),
        }
    }
    /// The job file of `id` in `state`.
    pub fn job_file(&self, state: State, id: &str) -> PathBuf {
        self.dir(state).join(format!("{id}.toml"))
    }
    /// The result file of `id` in `state` (done, failed or tampered).
    pub fn result_file(&self, state: State, id: &str) -> PathBuf {
        self.dir(state).join(format!("{id}.result.toml"))
    }
    /// The run record of a running job.
    pub fn run_file(&self, id: &str) -> PathBuf {
        self.running().join(format!("{id}.run"))
    }
    /// The log of `id`.
    pub fn log_file(&self, id: &str) -> PathBuf {
        self.logs().join(format!("{id}.log"))
    }

    /// Creates the spool directory and its subdirectories where missing, with no access for
    /// others whatever the umask, and takes others' access away from any of them this user
    /// owns that has it (made by hand, `install -d`'s 0755, or by an older landwall): job
    /// files hold prompts, worktrees and the names of variables, which no other local user
    /// is to read. (The files in them may keep older modes: a directory closed to others
    /// closes what is in it.)
    pub fn create_layout(&self) -> Result<(), SpoolError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        let me = nix::unistd::geteuid().as_raw();
        for dir in [
            self.root.clone(),
            self.tmp(),
            self.queue(),
            self.running(),
            self.done(),
            self.failed(),
            self.logs(),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(&dir)
                .map_err(io_err("creating", &dir))?;
            let m = fs::symlink_metadata(&dir).map_err(io_err("looking at", &dir))?;
            if m.uid() == me && m.mode() & 0o007 != 0 {
                fs::set_permissions(&dir, fs::Permissions::from_mode(m.mode() & 0o7770))
                    .map_err(io_err("closing to others", &dir))?;
            }
        }
        Ok(())
    }
}

/// The mode of the spool's directories: the group (of submitters the administrator may
/// make: the spool directory setgid to it) as the owner, others nothing.
pub const DIR_MODE: u32 = 0o770;

/// The mode of every file the spool holds: the group may read (`landwall jobs`), others
/// nothing. (A mode passed to open(2) only loses bits to the umask, never gains them.)
pub const FILE_MODE: u32 = 0o640;

/// Makes a directory's entries durable (after a rename into it).
pub fn sync_dir(dir: &Path) -> Result<(), SpoolError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("syncing", dir))
}

/// 16 random bits without a crate: the standard library seeds `RandomState` from the OS.
fn random_u16() -> u16 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() & 0xffff) as u16
}

/// A new job ID for a job submitted at `now` by process `pid`.
pub fn new_job_id(now: SystemTime, pid: u32, salt: u16) -> String {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, time) = civil(since.as_secs());
    format!(
        "{date}T{time}.{:09}Z-{pid}-{salt:04x}",
        since.subsec_nanos()
    )
}

/// Whether `id` can name a job file: ASCII letters, digits, `.`, `_`, `-`; not starting
/// with `.`; not ending in `.result`; at most 128 characters.
///
/// Not ending in `.result` keeps every name derived from an ID to that ID alone: the only
/// two derived names that could be equal are the job file `X.result.toml` of a job
/// `X.result` and the result file `X.result.toml` of a job `X`, in done/ or failed/. The
/// others differ in their suffix (`.toml`, `.run`, `.log` in different directories), or,
/// in tmp/, in their prefix (`submit-` against `.`).
pub fn valid_job_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && !id.ends_with(".result")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The submit time encoded in an ID made by [`new_job_id`], as RFC 3339.
pub fn submitted_at(id: &str) -> Option<String> {
    let b = id.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    if b.len() < 26
        || !digits(0..8)
        || b[8] != b'T'
        || !digits(9..15)
        || b[15] != b'.'
        || !digits(16..25)
        || b[25] != b'Z'
    {
        return None;
    }
    Some(format!(
        "{}-{}-{}T{}:{}:{}.{}Z",
        &id[0..4],
        &id[4..6],
        &id[6..8],
        &id[9..11],
        &id[11..13],
        &id[13..15],
        &id[16..19]
    ))
}

/// `(YYYYMMDD, HHMMSS)` of a Unix time, UTC.
fn civil(secs: u64) -> (String, String) {
    let (y, m, d) = civil_from_days(i64::try_from(secs / 86400).unwrap_or(i64::MAX));
    let s = secs % 86400;
    (
        format!("{y:04}{m:02}{d:02}"),
        format!("{:02}{:02}{:02}", s / 3600, s / 60 % 60, s % 60),
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 to (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A time as RFC 3339, UTC, to the millisecond: `2025-11-30T04:48:00.123Z`.
pub fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (date, time) = civil(since.as_secs());
    format!(
        "{}-{}-{}T{}:{}:{}.{:03}Z",
        &date[..4],
        &date[4..6],
        &date[6..8],
        &time[..2],
        &time[2..4],
        &time[4..6],
        since.subsec_millis()
    )
}

/// Whether a terminal could act on `c` rather than show it: C0 controls, DEL, C1 controls,
/// and the invisible formatting characters that hide or reorder text (soft hyphen,
/// zero-width characters, bidirectional controls, line and paragraph separators, the byte
/// order mark, interlinear annotations, tags).
pub fn is_unprintable(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `text` for a terminal: every [unprintable](is_unprintable) character escaped (`\n`,
/// `\r`, `\t`, `\e` for ESC, `\xHH` for the other C0 controls and DEL, `\u{HHHH}` for
/// the rest) and `\` doubled, so that an escape in the text cannot pass for one made here.
///
/// Job files, results and the daemon's log lines quote what jobs could influence: a
/// failure reason quotes the `.git` file a job wrote, a worktree's name is a directory a
/// job may have created. Shown raw, such text could clear the screen, retitle the window or
/// rewrite what was printed before it.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c == '\\' || is_unprintable(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x1b' => out.push_str("\\e"),
            c if is_unprintable(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_unprintable(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A job file as written: TOML, unknown keys refused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawJob {
    /// The worktree, an absolute path below one of the configured roots.
    pub worktree: String,
    /// The command and its arguments; `argv[0]` is looked up on the daemon's PATH.
    pub argv: Vec<String>,
    /// Names of variables passed from the daemon's environment on top of the agent's
    /// allowlist (the hard denylist still wins).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// How long the job may run: `30s`, `10m`, `1h30m`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// The agent profile (environment patterns, configuration section); default `claude`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The job's memory cap: `512M`, `2G` (at most the daemon's `memory_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    /// The job's cap on tasks, processes and threads (at most the daemon's `tasks_max`).
    /// Any TOML integer as written, so that a bad one is refused naming the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<i64>,
    /// The job's CPU share in percent of one CPU: `50%`, `150%` (at most `cpu_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// The cap on the job's log: `16M` (at most the daemon's `log_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
}

/// A job that passed the checks that need no file system: ready but for its worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    /// The worktree as written (absolute, not yet resolved).
    pub worktree: PathBuf,
    /// The command and its arguments (non-empty, no NUL bytes).
    pub argv: Vec<String>,
    /// Extra variable names (valid names, none on the denylist).
    pub env: Vec<String>,
    /// The timeout, if any (not zero).
    pub timeout: Option<Duration>,
    /// The agent profile.
    pub agent: String,
    /// The caps the job asked for (`None` where it asked for none); the daemon's maxima are
    /// not applied yet ([`limits::effective`]).
    pub caps: JobCaps,
}

/// Parses a job file's text.
pub fn parse_job(text: &str) -> Result<RawJob, Rejected> {
    toml::from_str::<RawJob>(text).map_err(|e| {
        let line = e.span().map(|s| {
            text.as_bytes()[..s.start.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        });
        let msg = e.message().trim_end().replace('\n', " ");
        Rejected(match line {
            Some(l) => format!("invalid job file: line {l}: {msg}"),
            None => format!("invalid job file: {msg}"),
        })
    })
}

/// Checks everything about a job that needs no file system.
pub fn check_job(raw: RawJob) -> Result<JobSpec, Rejected> {
    let worktree = PathBuf::from(&raw.worktree);
    if !worktree.is_absolute() {
        return reject(format!(
            "`worktree`: `{}` is not an absolute path",
            raw.worktree
        ));
    }
    if raw.argv.is_empty() || raw.argv[0].is_empty() {
        return reject("`argv` is empty: give the command and its arguments");
    }
    if raw.argv.iter().any(|a| a.contains('\0')) {
        return reject("`argv` contains a NUL byte");
    }
    let caps = check_caps(&raw)?;
    let agent = raw.agent.unwrap_or_else(|| DEFAULT_AGENT.to_string());
    if !valid_agent_name(&agent) {
        return reject(format!(
            "`agent`: `{agent}` is not an agent name (letters, digits, `-`, `_`, `.`)"
        ));
    }
    for name in &raw.env {
        match EnvPattern::parse(name) {
            Ok(EnvPattern::Exact(_)) => {}
            _ => {
                return reject(format!(
                    "`env`: `{name}` is not a variable name (letters, digits and `_`; no patterns)"
                ))
            }
        }
        let only = [EnvPattern::Exact(name.clone())];
        if !EnvPolicy::for_agent(&agent, &only).passes(OsStr::new(name)) {
            return reject(format!(
                "`env`: `{name}` is on landwall's hard denylist and is never passed"
            ));
        }
    }
    let timeout = match raw.timeout {
        None => None,
        Some(t) => match parse_duration(&t) {
            Ok(d) if d.is_zero() => return reject("`timeout` must be longer than zero"),
            Ok(d) => Some(d),
            Err(why) => return reject(format!("`timeout`: {why}")),
        },
    };
    Ok(JobSpec {
        worktree,
        argv: raw.argv,
        env: raw.env,
        timeout,
        agent,
        caps,
    })
}

/// The caps a job file asks for, parsed; a bad one is refused naming its key.
fn check_caps(raw: &RawJob) -> Result<JobCaps, Rejected> {
    fn one<T>(
        key: &str,
        text: Option<&str>,
        parse: fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Rejected> {
        text.map(|t| parse(t).or_else(|why| reject(format!("`{key}`: {why}"))))
            .transpose()
    }
    let tasks = match raw.tasks {
        None => None,
        Some(n) => match u32::try_from(n) {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return reject(format!(
                    "`tasks`: {n} is not a number of tasks: write a whole number from 1 to {}",
                    u32::MAX
                ))
            }
        },
    };
    Ok(JobCaps {
        memory: one("memory", raw.memory.as_deref(), limits::parse_size)?,
        tasks,
        cpu: one("cpu", raw.cpu.as_deref(), limits::parse_cpu)?,
        log: one("log", raw.log.as_deref(), limits::parse_size)?,
    })
}

/// Resolves a job's worktree and checks that it is an existing directory strictly below one
/// of `roots` (real paths): a job may not have a whole root, which holds other jobs' trees.
pub fn check_worktree(worktree: &Path, roots: &[PathBuf]) -> Result<PathBuf, Rejected> {
    if roots.is_empty() {
        return reject(
            "no worktree roots are configured: set `worktree_roots` in `[drain]` of the system configuration",
        );
    }
    let real = match fs::canonicalize(worktree) {
        Ok(r) => r,
        Err(e) => {
            return reject(format!(
                "worktree {} does not exist or cannot be resolved: {e}",
                worktree.display()
            ))
        }
    };
    if !real.is_dir() {
        return reject(format!(
            "worktree {} is not a directory",
            worktree.display()
        ));
    }
    if roots.contains(&real) {
        return reject(format!(
            "worktree {} is a worktree root itself: give a directory below it (a root holds other jobs' worktrees)",
            real.display()
        ));
    }
    if !roots.iter().any(|r| real.starts_with(r)) {
        let list: Vec<String> = roots.iter().map(|r| r.display().to_string()).collect();
        return reject(format!(
            "worktree {} is outside the configured worktree roots ({})",
            real.display(),
            list.join(", ")
        ));
    }
    Ok(real)
}

/// Reads a claimed job file, refusing symlinks, anything but a regular file, files larger
/// than [`MAX_JOB_SIZE`] and files owned by a uid not in `allowed_uids`. The file is opened
/// without following links and checked again on the open descriptor, so a swap between the
/// checks and the read is caught.
pub fn read_job_file(path: &Path, allowed_uids: &[u32]) -> Result<String, Rejected> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return reject(format!("job file: {e}")),
    };
    let check = |m: &fs::Metadata| -> Result<(), Rejected> {
        let t = m.file_type();
        if t.is_symlink() {
            return reject("job file is a symbolic link");
        }
        if !t.is_file() {
            return reject("job file is not a regular file");
        }
        if m.len() > MAX_JOB_SIZE {
            return reject(format!(
                "job file is {} bytes, more than the limit of {MAX_JOB_SIZE}",
                m.len()
            ));
        }
        if !allowed_uids.contains(&m.uid()) {
            return reject(format!(
                "job file is owned by uid {}, which may not submit jobs (allowed: {}; see `allow_uids` in `[drain]`)",
                m.uid(),
                allowed_uids
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(())
    };
    check(&meta)?;
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) => return reject(format!("opening the job file: {e}")),
    };
    let opened = match file.metadata() {
        Ok(m) => m,
        Err(e) => return reject(format!("job file: {e}")),
    };
    if opened.ino() != meta.ino() || opened.dev() != meta.dev() {
        return reject("job file was replaced while it was being read");
    }
    check(&opened)?;
    let mut bytes = Vec::new();
    if let Err(e) = (&mut file).take(MAX_JOB_SIZE + 1).read_to_end(&mut bytes) {
        return reject(format!("reading the job file: {e}"));
    }
    if bytes.len() as u64 > MAX_JOB_SIZE {
        return reject(format!(
            "job file is more than the limit of {MAX_JOB_SIZE} bytes"
        ));
    }
    String::from_utf8(bytes).or_else(|_| reject("invalid job file: it is not UTF-8"))
}

/// Writes `bytes` to `dir/name` through a temporary file in `tmp/` and a rename, so readers
/// see the whole file or none. With `durable`, the file and `dir` are fsynced.
fn write_atomic(
    spool: &Spool,
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durable: bool,
) -> Result<(), SpoolError> {
    let tmp = spool.tmp().join(format!(
        ".{name}.{}.{:04x}",
        std::process::id(),
        random_u16()
    ));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(&tmp)
        .map_err(io_err("creating", &tmp))?;
    f.write_all(bytes).map_err(io_err("writing", &tmp))?;
    if durable {
        f.sync_all().map_err(io_err("syncing", &tmp))?;
    }
    drop(f);
    let dest = dir.join(name);
    if let Err(e) = fs::rename(&tmp, &dest) {
        // Best effort: the rename's error is the one worth reporting.
        if fs::remove_file(&tmp).is_err() {
            log::debug!("could not remove {}", tmp.display());
        }
        return Err(io_err("renaming into", &dest)(e));
    }
    if durable {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Renames `from` to `to` unless `to` exists (`RENAME_NOREPLACE`; where the file system
/// does not support it, an existence check first: job IDs are unique by construction).
fn rename_noreplace(from: &Path, to: &Path) -> io::Result<()> {
    use nix::fcntl::{renameat2, RenameFlags, AT_FDCWD};
    match renameat2(AT_FDCWD, from, AT_FDCWD, to, RenameFlags::RENAME_NOREPLACE) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL) => {
            if to.symlink_metadata().is_ok() {
                Err(io::Error::from_raw_os_error(libc::EEXIST))
            } else {
                fs::rename(from, to)
            }
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// Queues `job` crash-safely: write it in `tmp/`, fsync it, rename it into `queue/` without
/// replacing anything, fsync `queue/`. Returns the job ID.
pub fn submit(spool: &Spool, job: &RawJob) -> Result<String, SpoolError> {
    let text = toml::to_string(job).map_err(|e| SpoolError {
        what: "encoding the job for",
        path: spool.queue(),
        source: io::Error::other(e),
    })?;
    let pid = std::process::id();
    for _ in 0..16 {
        let id = new_job_id(SystemTime::now(), pid, random_u16());
        let tmp = spool.tmp().join(format!("submit-{id}.toml"));
        let mut f = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(FILE_MODE)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("creating", &tmp)(e)),
        };
        f.write_all(text.as_bytes())
            .and_then(|()| f.sync_all())
            .map_err(io_err("writing", &tmp))?;
        drop(f);
        let dest = spool.job_file(State::Queued, &id);
        match rename_noreplace(&tmp, &dest) {
            Ok(()) => {
                sync_dir(&spool.queue())?;
                return Ok(id);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                fs::remove_file(&tmp).map_err(io_err("removing", &tmp))?;
            }
            Err(e) => {
                if fs::remove_file(&tmp).is_err() {
                    log::debug!("could not remove {}", tmp.display());
                }
                return Err(io_err("queueing", &dest)(e));
            }
        }
    }
    Err(SpoolError {
        what: "finding a free job ID in",
        path: spool.queue(),
        source: io::Error::from_raw_os_error(libc::EEXIST),
    })
}

/// A file in `queue/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueEntry {
    /// `ID.toml` with a valid ID.
    Job(String),
    /// A `.toml` file whose name is not a valid ID (left alone; the daemon warns).
    BadName(PathBuf),
}

/// The jobs in `queue/`, in submit (name) order. Names starting with `.` and names not
/// ending in `.toml` are not jobs (editors' and copy tools' temporary files).
pub fn queued(spool: &Spool) -> Result<Vec<QueueEntry>, SpoolError> {
    let dir = spool.queue();
    let mut names = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io_err("reading", &dir))? {
        let entry = entry.map_err(io_err("reading", &dir))?;
        names.push(entry.file_name());
    }
    names.sort();
    Ok(names
        .into_iter()
        .filter_map(|n| {
            let bytes = n.as_encoded_bytes();
            if bytes.starts_with(b".") || !bytes.ends_with(b".toml") {
                return None;
            }
            match n.to_str().and_then(|s| s.strip_suffix(".toml")) {
                Some(id) if valid_job_id(id) => Some(QueueEntry::Job(id.to_string())),
                _ => Some(QueueEntry::BadName(dir.join(&n))),
            }
        })
        .collect())
}

/// Claims `id`: renames `queue/ID.toml` to `running/ID.toml`. `Ok(false)` when the job is no
/// longer queued.
pub fn claim(spool: &Spool, id: &str) -> Result<bool, SpoolError> {
    let from = spool.job_file(State::Queued, id);
    let to = spool.job_file(State::Running, id);
    match rename_noreplace(&from, &to) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(io_err("claiming", &from)(e)),
    }
}

/// What the daemon records about a running job, so that a later daemon can find and kill
/// its process group if this one dies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRecord {
    /// The runner's pid, which is also the job's process group.
    pub pid: u32,
    /// Its start time in clock ticks since boot (`/proc/PID/stat` field 22), so a reused
    /// pid is not mistaken for it.
    pub start_ticks: u64,
    /// When it started, RFC 3339.
    pub started_at: String,
}

/// Writes `running/ID.run` (atomically; not fsynced: after a power loss no process is left
/// to find).
pub fn write_run_record(spool: &Spool, id: &str, rec: &RunRecord) -> Result<(), SpoolError> {
    let text = toml::to_string(rec).map_err(|e| SpoolError {
        what: "encoding the run record for",
        path: spool.run_file(id),
        source: io::Error::other(e),
    })?;
    write_atomic(
        spool,
        &spool.running(),
        &format!("{id}.run"),
        text.as_bytes(),
        false,
    )
}

/// Reads `running/ID.run`, if present and well-formed.
pub fn read_run_record(spool: &Spool, id: &str) -> Option<RunRecord> {
    let text = fs::read_to_string(spool.run_file(id)).ok()?;
    toml::from_str(&text).ok()
}

/// The result of a job, recorded once, when it moves to done/ or failed/.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobResult {
    /// The job ID.
    pub id: String,
    /// `done`, `failed` or `tampered`.
    pub state: State,
    /// The exit status, if the job (or its runner) exited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Why it failed, when it did not simply exit non-zero: refused, not started, timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it started, RFC 3339 (absent if it never started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// When it ended (or was refused), RFC 3339.
    pub ended_at: String,
    /// How long it ran, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_secs: Option<f64>,
}

/// Records `result` and moves the job file out of running/: the result is written and
/// fsynced into done/ or failed/ first, then the job file follows. A crash in between
/// leaves a result next to a job still in running/, which [`stranded`] reports as finished.
pub fn finish(spool: &Spool, result: &JobResult) -> Result<(), SpoolError> {
    let id = &result.id;
    let dir = spool.dir(result.state);
    let text = toml::to_string(result).map_err(|e| SpoolError {
        what: "encoding the result for",
        path: dir.clone(),
        source: io::Error::other(e),
    })?;
    write_atomic(
        spool,
        &dir,
        &format!("{id}.result.toml"),
        text.as_bytes(),
        true,
    )?;
    complete_move(spool, id, result.state)
}

/// Moves `running/ID.toml` to the directory of `state` and drops the run record.
pub fn complete_move(spool: &Spool, id: &str, state: State) -> Result<(), SpoolError> {
    let from = spool.job_file(State::Running, id);
    let to = spool.job_file(state, id);
    fs::rename(&from, &to).map_err(io_err("moving", &from))?;
    remove_run_record(spool, id)
}

fn remove_run_record(spool: &Spool, id: &str) -> Result<(), SpoolError> {
    let run = spool.run_file(id);
    match fs::remove_file(&run) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("removing", &run)(e)),
    }
}

/// Puts a claimed job back in the queue (daemon stopping, or found stranded at start).
pub fn put_back(spool: &Spool, id: &str) -> Result<(), SpoolError> {
    let from = spool.job_file(State::Running, id);
    let to = spool.job_file(State::Queued, id);
    rename_noreplace(&from, &to).map_err(io_err("putting back", &from))?;
    sync_dir(&spool.queue())?;
    remove_run_record(spool, id)
}

/// A job found in running/ when a daemon starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stranded {
    /// The job ID.
    pub id: String,
    /// Its run record, if one was written.
    pub run: Option<RunRecord>,
    /// `Some(done|failed|tampered)` if its result was already recorded.
    pub finished: Option<State>,
}

/// The jobs left in running/ by a daemon that died, in name order.
pub fn stranded(spool: &Spool) -> Result<Vec<Stranded>, SpoolError> {
    let dir = spool.running();
    let mut ids = Vec::new();
    for entry in fs::read_dir(&dir).map_err(io_err("reading", &dir))? {
        let entry = entry.map_err(io_err("reading", &dir))?;
        if let Some(id) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".toml"))
        {
            ids.push(id.to_string());
        }
    }
    ids.sort();
    Ok(ids
        .into_iter()
        .map(|id| {
            // The state the result records (tampered lives in failed/ too).
            let finished = [State::Done, State::Failed]
                .into_iter()
                .find(|s| spool.result_file(*s, &id).exists())
                .map(|s| recorded_state(spool, s, &id));
            Stranded {
                run: read_run_record(spool, &id),
                finished,
                id,
            }
        })
        .collect())
}

/// The state the result of `id` in the directory of `dir_state` records, if it is one kept
/// in that directory; else `dir_state`.
fn recorded_state(spool: &Spool, dir_state: State, id: &str) -> State {
    fs::read_to_string(spool.result_file(dir_state, id))
        .ok()
        .and_then(|t| toml::from_str::<JobResult>(&t).ok())
        .map(|r| r.state)
        .filter(|s| spool.dir(*s) == spool.dir(dir_state))
        .unwrap_or(dir_state)
}

/// Removes leftovers in `tmp/` older than `age` (a submit or a daemon that died mid-write)
/// and run records in running/ without a job. Returns how many were removed.
pub fn clean(spool: &Spool, age: Duration) -> Result<usize, SpoolError> {
    let mut n = 0;
    let tmp = spool.tmp();
    let now = SystemTime::now();
    for entry in fs::read_dir(&tmp).map_err(io_err("reading", &tmp))? {
        let entry = entry.map_err(io_err("reading", &tmp))?;
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|m| now.duration_since(m).unwrap_or_default() >= age);
        if old && fs::remove_file(entry.path()).is_ok() {
            n += 1;
        }
    }
    let running = spool.running();
    for entry in fs::read_dir(&running).map_err(io_err("reading", &running))? {
        let entry = entry.map_err(io_err("reading", &running))?;
        let name = entry.file_name();
        if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".run")) {
            if !spool.job_file(State::Running, id).exists() {
                remove_run_record(spool, id)?;
                n += 1;
            }
        }
    }
    Ok(n)
}

/// One job as `landwall jobs` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobInfo {
    /// The job ID.
    pub id: String,
    /// Where it is.
    pub state: State,
    /// Its exit status, once finished.
    pub exit_code: Option<i32>,
    /// The signal that ended it.
    pub signal: Option<i32>,
    /// Why it failed, when it did not simply exit non-zero.
    pub reason: Option<String>,
    /// When it was submitted (from its ID), RFC 3339.
    pub submitted_at: Option<String>,
    /// When it started.
    pub started_at: Option<String>,
    /// When it ended.
    pub ended_at: Option<String>,
    /// How long it ran, in seconds.
    pub duration_secs: Option<f64>,
    /// Its worktree, if the job file could be read.
    pub worktree: Option<String>,
    /// Its command, if the job file could be read.
    pub argv: Option<Vec<String>>,
    /// Its log file.
    pub log: PathBuf,
}

/// Every job in the spool, in ID order. Unreadable job files still list, with less detail.
pub fn list(spool: &Spool) -> Result<Vec<JobInfo>, SpoolError> {
    let mut out = Vec::new();
    for state in [State::Queued, State::Running, State::Done, State::Failed] {
        let dir = spool.dir(state);
        let mut ids = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err("reading", &dir))? {
            let entry = entry.map_err(io_err("reading", &dir))?;
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let id = match state {
                State::Queued | State::Running => name
                    .strip_suffix(".toml")
                    .filter(|_| !name.starts_with('.')),
                State::Done | State::Failed | State::Tampered => name.strip_suffix(".result.toml"),
            };
            if let Some(id) = id {
                ids.push(id.to_string());
            }
        }
        for id in ids {
            let job_file = match state {
                State::Done | State::Failed => spool.job_file(state, &id),
                _ => dir.join(format!("{id}.toml")),
            };
            let job = fs::read_to_string(&job_file)
                .ok()
                .and_then(|t| toml::from_str::<RawJob>(&t).ok());
            let result = match state {
                State::Done | State::Failed => fs::read_to_string(spool.result_file(state, &id))
                    .ok()
                    .and_then(|t| toml::from_str::<JobResult>(&t).ok()),
                _ => None,
            };
            let started = match state {
                State::Running => read_run_record(spool, &id).map(|r| r.started_at),
                _ => result.as_ref().and_then(|r| r.started_at.clone()),
            };
            // A result's own state, where it is one kept in this directory (tampered, in
            // failed/).
            let state = result
                .as_ref()
                .map(|r| r.state)
                .filter(|s| spool.dir(*s) == dir)
                .unwrap_or(state);
            out.push(JobInfo {
                submitted_at: submitted_at(&id),
                state,
                exit_code: result.as_ref().and_then(|r| r.exit_code),
                signal: result.as_ref().and_then(|r| r.signal),
                reason: result.as_ref().and_then(|r| r.reason.clone()),
                started_at: started,
                ended_at: result.as_ref().map(|r| r.ended_at.clone()),
                duration_secs: result.as_ref().and_then(|r| r.duration_secs),
                worktree: job.as_ref().map(|j| j.worktree.clone()),
                argv: job.map(|j| j.argv),
                log: spool.log_file(&id),
                id,
            });
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// The exclusive lock on a spool, held for the daemon's life (released when dropped or
/// when the process dies, whatever the way): an `flock(2)` on the spool directory itself,
/// so that no unlinked or replaced name can release it. The file `lock` only tells the
/// holder's pid.
#[derive(Debug)]
pub struct SpoolLock {
    _dir: File,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("another landwall-drain{} already serves the spool {}", pid.map(|p| format!(" (pid {p})")).unwrap_or_default(), path.display())]
    Held {
        /// The spool.
        path: PathBuf,
        /// The holder's pid, as it wrote it.
        pid: Option<u32>,
    },
    /// The spool directory could not be opened or locked, or the pid not written.
    #[error(transparent)]
    Io(#[from] SpoolError),
}

/// Takes the spool's lock without waiting (an exclusive `flock(2)` on the spool directory),
/// and writes this process's pid into `lock` (atomically, through `tmp/`).
pub fn lock(spool: &Spool) -> Result<SpoolLock, LockError> {
    let root = spool.root();
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(root)
        .map_err(io_err("opening", root))?;
    match dir.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let pid = File::open(spool.lock_path())
                .and_then(|f| f.take(64).read_to_string(&mut text))
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(LockError::Held {
                path: root.to_path_buf(),
                pid,
            });
        }
        Err(fs::TryLockError::Error(e)) => return Err(io_err("locking", root)(e).into()),
    }
    write_atomic(
        spool,
        root,
        "lock",
        format!("{}\n", std::process::id()).as_bytes(),
        false,
    )?;
    Ok(SpoolLock { _dir: dir })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;

    impl Scratch {
        fn spool(&self) -> Spool {
            let s = Spool::new(self.0.join("spool"));
            s.create_layout().expect("layout");
            s
        }
    }

    fn me() -> u32 {
        nix::unistd::getuid().as_raw()
    }

    fn raw(wt: &str, argv: &[&str]) -> RawJob {
        RawJob {
            worktree: wt.into(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            ..RawJob::default()
        }
    }

    #[test]
    fn ids_sort_in_time_order_and_encode_the_submit_time() {
        let t0 = UNIX_EPOCH + Duration::new(1_764_478_080, 5);
        let a = new_job_id(t0, 99999, 0xffff);
        let b = new_job_id(t0 + Duration::from_nanos(1), 1, 0);
        let c = new_job_id(t0 + Duration::from_secs(3600 * 24 * 400), 1, 0);
        assert!(a < b && b < c, "{a} {b} {c}");
        assert!(valid_job_id(&a), "{a}");
        assert_eq!(a, "20251130T044800.000000005Z-99999-ffff");
        assert_eq!(
            submitted_at(&a).as_deref(),
            Some("2025-11-30T04:48:00.000Z")
        );
        assert_eq!(submitted_at("hand-made"), None);
        assert_eq!(rfc3339(t0), "2025-11-30T04:48:00.000Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
    }

    #[test]
    fn printable_escapes_what_a_terminal_would_act_on() {
        assert!(matches!(printable("plain /w/a: ok ü"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\x1b]0;pwned\x07b\x1b[2Jc"),
            "a\\e]0;pwned\\x07b\\e[2Jc"
        );
        assert_eq!(printable("l1\nl2\r\t\x7f"), "l1\\nl2\\r\\t\\x7f");
        assert_eq!(
            printable("\u{9b}2J \u{202e}rtl \u{200b}"),
            "\\u{9b}2J \\u{202e}rtl \\u{200b}"
        );
        // A backslash in the text cannot fake an escape.
        assert_eq!(printable("\\e[2J"), "\\\\e[2J");
        for c in (0u32..0x20).chain(0x7f..0xa0).filter_map(char::from_u32) {
            assert!(!printable(&c.to_string()).contains(c), "{c:?}");
        }
    }

    #[test]
    fn job_names() {
        assert!(valid_job_id("0001-good"));
        for bad in [
            "",
            ".hidden",
            "a b",
            "a/b",
            "ü",
            &"x".repeat(129),
            "x.result",
        ] {
            assert!(!valid_job_id(bad), "{bad:?}");
        }
        // The spool's other suffixes cannot collide, and a generated ID has a `.` in it.
        for good in [
            "x.run",
            "x.toml",
            "x.log",
            "x.result.y",
            "x-result",
            "result",
        ] {
            assert!(valid_job_id(good), "{good:?}");
        }
    }

    #[test]
    fn job_checks_name_what_is_wrong() {
        let ok = check_job(raw("/w/a", &["echo", "hi"])).expect("valid");
        assert_eq!(ok.agent, DEFAULT_AGENT);
        assert_eq!(ok.timeout, None);
        let cases: Vec<(RawJob, &str)> = vec![
            (raw("rel/a", &["x"]), "absolute"),
            (raw("/w/a", &[]), "`argv` is empty"),
            (raw("/w/a", &["a\0b"]), "NUL"),
            (
                RawJob {
                    agent: Some("../x".into()),
                    ..raw("/w/a", &["x"])
                },
                "`agent`",
            ),
            (
                RawJob {
                    env: vec!["LD_PRELOAD".into()],
                    ..raw("/w/a", &["x"])
                },
                "denylist",
            ),
            (
                RawJob {
                    env: vec!["A*".into()],
                    ..raw("/w/a", &["x"])
                },
                "not a variable name",
            ),
            (
                RawJob {
                    timeout: Some("soon".into()),
                    ..raw("/w/a", &["x"])
                },
                "`timeout`",
            ),
            (
                RawJob {
                    timeout: Some("0s".into()),
                    ..raw("/w/a", &["x"])
                },
                "longer than zero",
            ),
            (
                RawJob {
                    memory: Some("12X".into()),
                    ..raw("/w/a", &["x"])
                },
                "`memory`: `12X` is not a size",
            ),
            (
                RawJob {
                    memory: Some("0".into()),
                    ..raw("/w/a", &["x"])
                },
                "`memory`",
            ),
            (
                RawJob {
                    tasks: Some(0),
                    ..raw("/w/a", &["x"])
                },
                "`tasks`: 0",
            ),
            (
                RawJob {
                    tasks: Some(-5),
                    ..raw("/w/a", &["x"])
                },
                "`tasks`: -5",
            ),
            (
                RawJob {
                    tasks: Some(1 << 40),
                    ..raw("/w/a", &["x"])
                },
                "`tasks`",
            ),
            (
                RawJob {
                    cpu: Some("50".into()),
                    ..raw("/w/a", &["x"])
                },
                "`cpu`: `50` is not a CPU share",
            ),
            (
                RawJob {
                    log: Some("lots".into()),
                    ..raw("/w/a", &["x"])
                },
                "`log`: `lots`",
            ),
        ];
        for (job, needle) in cases {
            let e = check_job(job.clone()).expect_err(needle).0;
            assert!(e.contains(needle), "{job:?}: {e}");
        }
        let j = check_job(RawJob {
            env: vec!["MY_TOKEN".into()],
            timeout: Some("1m".into()),
            agent: Some("codex".into()),
            ..raw("/w/a", &["x"])
        })
        .expect("valid");
        assert_eq!(j.timeout, Some(Duration::from_secs(60)));
        assert_eq!(j.agent, "codex");
        assert_eq!(j.caps, JobCaps::default(), "no caps asked for");
    }

    #[test]
    fn job_caps_parse_and_are_written_only_when_set() {
        let plain = toml::to_string(&raw("/w/a", &["x"])).expect("serialize");
        for key in ["memory", "tasks", "cpu", "log"] {
            assert!(!plain.contains(key), "{plain}");
        }
        let text = concat!(
            "worktree = \"/w/a\"\nargv = [\"x\"]\n",
            "memory = \"512M\"\ntasks = 64\ncpu = \"50%\"\nlog = \"1G\"\n",
        );
        let job = parse_job(text).expect("valid");
        let spec = check_job(job.clone()).expect("valid");
        assert_eq!(
            spec.caps,
            JobCaps {
                memory: Some(512 << 20),
                tasks: Some(64),
                cpu: Some(50),
                log: Some(1 << 30),
            }
        );
        let again = toml::to_string(&job).expect("serialize");
        assert_eq!(parse_job(&again).expect("round trip"), job);
        assert!(
            again.contains("tasks = 64") && again.contains("cpu = \"50%\""),
            "{again}"
        );
        let e = parse_job("worktree = \"/a\"\nargv = [\"x\"]\ntasks = \"64\"\n").expect_err("type");
        assert!(e.0.contains("line 3"), "{e}");
    }

    #[test]
    fn job_parsing_refuses_unknown_keys_and_bad_toml() {
        let e = parse_job("worktree = \"/a\"\nargv = [\"x\"]\nsudo = true\n").expect_err("key");
        assert!(e.0.contains("sudo") && e.0.contains("line 3"), "{e}");
        assert!(parse_job("worktree = ").is_err());
        assert!(parse_job("argv = [\"x\"]").is_err(), "worktree is required");
        let j = parse_job("worktree = \"/a\"\nargv = [\"x\", \"y\"]\n").expect("valid");
        assert_eq!(j.argv, ["x", "y"]);
    }

    #[test]
    fn worktrees_must_be_strictly_below_a_root() {
        let s = Scratch::new("roots");
        let root = s.0.join("work");
        fs::create_dir_all(root.join("a")).expect("mkdir");
        fs::create_dir_all(s.0.join("other")).expect("mkdir");
        fs::write(root.join("file"), "").expect("write");
        std::os::unix::fs::symlink(s.0.join("other"), root.join("escape")).expect("link");
        let roots = [root.clone()];
        assert_eq!(check_worktree(&root.join("a"), &roots), Ok(root.join("a")));
        for (wt, needle) in [
            (root.clone(), "root itself"),
            (root.join("escape"), "outside"),
            (s.0.join("other"), "outside"),
            (root.join("missing"), "does not exist"),
            (root.join("file"), "not a directory"),
        ] {
            let e = check_worktree(&wt, &roots).expect_err(needle).0;
            assert!(e.contains(needle), "{}: {e}", wt.display());
        }
        assert!(check_worktree(&root.join("a"), &[])
            .expect_err("no roots")
            .0
            .contains("no worktree roots"));
    }

    #[test]
    fn job_files_are_checked_before_they_are_read() {
        let s = Scratch::new("files");
        let f = s.0.join("job.toml");
        fs::write(&f, "worktree = \"/a\"\n").expect("write");
        assert!(read_job_file(&f, &[me()]).is_ok());
        let e = read_job_file(&f, &[me() + 1]).expect_err("uid").0;
        assert!(e.contains("owned by uid"), "{e}");
        std::os::unix::fs::symlink(&f, s.0.join("link.toml")).expect("link");
        let e = read_job_file(&s.0.join("link.toml"), &[me()])
            .expect_err("link")
            .0;
        assert!(e.contains("symbolic link"), "{e}");
        fs::create_dir(s.0.join("dir.toml")).expect("mkdir");
        let e = read_job_file(&s.0.join("dir.toml"), &[me()])
            .expect_err("dir")
            .0;
        assert!(e.contains("not a regular file"), "{e}");
        fs::write(s.0.join("big.toml"), vec![b'#'; MAX_JOB_SIZE as usize + 1]).expect("write");
        let e = read_job_file(&s.0.join("big.toml"), &[me()])
            .expect_err("big")
            .0;
        assert!(e.contains("limit"), "{e}");
        fs::write(s.0.join("bin.toml"), b"\xff\xfe").expect("write");
        let e = read_job_file(&s.0.join("bin.toml"), &[me()])
            .expect_err("utf8")
            .0;
        assert!(e.contains("UTF-8"), "{e}");
    }

    #[test]
    fn submit_claim_finish_and_list() {
        let s = Scratch::new("flow");
        let spool = s.spool();
        let a = submit(&spool, &raw("/w/a", &["true"])).expect("submit");
        let b = submit(&spool, &raw("/w/b", &["false"])).expect("submit");
        assert!(a < b, "submit order: {a} {b}");
        assert_eq!(
            fs::read_dir(spool.tmp()).expect("tmp").count(),
            0,
            "tmp/ is left empty"
        );
        assert_eq!(
            queued(&spool).expect("queue"),
            [QueueEntry::Job(a.clone()), QueueEntry::Job(b.clone())]
        );
        assert!(claim(&spool, &a).expect("claim"));
        assert!(
            !claim(&spool, &a).expect("claimed twice"),
            "only one claim wins"
        );
        let rec = RunRecord {
            pid: 42,
            start_ticks: 7,
            started_at: rfc3339(SystemTime::now()),
        };
        write_run_record(&spool, &a, &rec).expect("run record");
        assert_eq!(read_run_record(&spool, &a), Some(rec));
        let states: Vec<_> = list(&spool)
            .expect("list")
            .into_iter()
            .map(|j| (j.id, j.state))
            .collect();
        assert_eq!(
            states,
            [(a.clone(), State::Running), (b.clone(), State::Queued)]
        );
        let result = JobResult {
            id: a.clone(),
            state: State::Done,
            exit_code: Some(0),
            signal: None,
            reason: None,
            started_at: Some(rfc3339(SystemTime::now())),
            ended_at: rfc3339(SystemTime::now()),
            duration_secs: Some(0.5),
        };
        finish(&spool, &result).expect("finish");
        assert!(spool.job_file(State::Done, &a).exists());
        assert!(!spool.run_file(&a).exists());
        let info = list(&spool).expect("list");
        assert_eq!(info[0].state, State::Done);
        assert_eq!(info[0].exit_code, Some(0));
        assert_eq!(info[0].worktree.as_deref(), Some("/w/a"));
        assert_eq!(info[1].argv.as_deref(), Some(&["false".to_string()][..]));
    }

    #[test]
    fn stranded_jobs_are_requeued_or_completed() {
        let s = Scratch::new("stranded");
        let spool = s.spool();
        let a = submit(&spool, &raw("/w/a", &["x"])).expect("submit");
        let b = submit(&spool, &raw("/w/b", &["x"])).expect("submit");
        assert!(claim(&spool, &a).expect("claim"));
        assert!(claim(&spool, &b).expect("claim"));
        // b's result made it to disk, its move did not (a crash in `finish`).
        let text = toml::to_string(&JobResult {
            id: b.clone(),
            state: State::Failed,
            exit_code: Some(1),
            signal: None,
            reason: None,
            started_at: None,
            ended_at: rfc3339(SystemTime::now()),
            duration_secs: None,
        })
        .expect("toml");
        fs::write(spool.result_file(State::Failed, &b), text).expect("write");
        let found = stranded(&spool).expect("stranded");
        assert_eq!(found.len(), 2);
        assert_eq!(
            (found[0].id.as_str(), found[0].finished),
            (a.as_str(), None)
        );
        assert_eq!(found[1].finished, Some(State::Failed));
        put_back(&spool, &a).expect("put back");
        complete_move(&spool, &b, State::Failed).expect("complete");
        assert_eq!(queued(&spool).expect("queue"), [QueueEntry::Job(a)]);
        assert!(spool.job_file(State::Failed, &b).exists());
        assert!(stranded(&spool).expect("stranded").is_empty());
    }

    #[test]
    fn a_tampered_job_is_kept_in_failed_and_listed_as_tampered() {
        let s = Scratch::new("tampered");
        let spool = s.spool();
        let a = submit(&spool, &raw("/w/a", &["x"])).expect("submit");
        let b = submit(&spool, &raw("/w/b", &["x"])).expect("submit");
        assert!(claim(&spool, &a).expect("claim"));
        assert!(claim(&spool, &b).expect("claim"));
        let result = |id: &str| JobResult {
            id: id.to_string(),
            state: State::Tampered,
            exit_code: Some(0),
            signal: None,
            reason: Some("tampered: .envrc created (restored)".into()),
            started_at: Some(rfc3339(SystemTime::now())),
            ended_at: rfc3339(SystemTime::now()),
            duration_secs: Some(0.5),
        };
        finish(&spool, &result(&a)).expect("finish");
        assert!(spool.job_file(State::Failed, &a).exists());
        assert!(spool.result_file(State::Failed, &a).exists());
        let text = fs::read_to_string(spool.result_file(State::Failed, &a)).expect("read");
        assert!(text.contains("state = \"tampered\""), "{text}");
        // b's result made it to disk, its move did not: completed as tampered.
        let text = toml::to_string(&result(&b)).expect("toml");
        fs::write(spool.result_file(State::Tampered, &b), text).expect("write");
        let found = stranded(&spool).expect("stranded");
        assert_eq!(found[0].finished, Some(State::Tampered));
        complete_move(&spool, &b, State::Tampered).expect("complete");
        let info = list(&spool).expect("list");
        assert_eq!(
            info.iter().map(|j| j.state).collect::<Vec<_>>(),
            [State::Tampered, State::Tampered]
        );
        assert_eq!(
            info[0].reason.as_deref(),
            Some("tampered: .envrc created (restored)")
        );
        assert_eq!(info[0].exit_code, Some(0));
        assert_eq!(State::Tampered.as_str(), "tampered");
    }

    #[test]
    fn queue_listing_skips_temporaries_and_flags_bad_names() {
        let s = Scratch::new("names");
        let spool = s.spool();
        for n in [
            "0002-b.toml",
            "0001-a.toml",
            ".tmp.toml",
            "notes.txt",
            "bad name.toml",
            "0001-a.result.toml",
        ] {
            fs::write(spool.queue().join(n), "").expect("write");
        }
        assert_eq!(
            queued(&spool).expect("queue"),
            [
                QueueEntry::BadName(spool.queue().join("0001-a.result.toml")),
                QueueEntry::Job("0001-a".into()),
                QueueEntry::Job("0002-b".into()),
                QueueEntry::BadName(spool.queue().join("bad name.toml")),
            ]
        );
    }

    #[test]
    fn put_back_never_replaces_a_queued_job() {
        let s = Scratch::new("noreplace");
        let spool = s.spool();
        fs::write(spool.job_file(State::Queued, "x"), "queued").expect("write");
        fs::write(spool.job_file(State::Running, "x"), "running").expect("write");
        assert!(put_back(&spool, "x").is_err());
        assert_eq!(
            fs::read_to_string(spool.job_file(State::Queued, "x")).expect("read"),
            "queued"
        );
    }

    #[test]
    fn the_lock_is_exclusive_and_names_the_holder() {
        let s = Scratch::new("lock");
        let spool = s.spool();
        let held = lock(&spool).expect("first lock");
        match lock(&spool) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("second lock: {other:?}"),
        }
        drop(held);
        lock(&spool).expect("lock after release");
    }

    #[test]
    fn the_lock_holds_when_its_file_is_removed_or_replaced() {
        let s = Scratch::new("lock-unlinked");
        let spool = s.spool();
        let held = lock(&spool).expect("first lock");
        fs::remove_file(spool.lock_path()).expect("rm lock");
        match lock(&spool) {
            Err(LockError::Held { pid, .. }) => assert_eq!(pid, None, "no file, no pid"),
            other => panic!("lock after unlink: {other:?}"),
        }
        fs::write(spool.lock_path(), "1\n").expect("replace lock");
        assert!(matches!(
            lock(&spool),
            Err(LockError::Held { pid: Some(1), .. })
        ));
        drop(held);
        lock(&spool).expect("lock after release");
        assert_eq!(
            fs::read_to_string(spool.lock_path()).expect("read"),
            format!("{}\n", std::process::id())
        );
    }

    #[test]
    fn clean_removes_old_temporaries_and_orphan_run_records() {
        let s = Scratch::new("clean");
        let spool = s.spool();
        fs::write(spool.tmp().join("old"), "").expect("write");
        fs::write(spool.run_file("gone"), "").expect("write");
        assert_eq!(clean(&spool, Duration::from_secs(3600)).expect("clean"), 1);
        assert_eq!(clean(&spool, Duration::ZERO).expect("clean"), 1);
        assert_eq!(fs::read_dir(spool.tmp()).expect("tmp").count(), 0);
    }
}
