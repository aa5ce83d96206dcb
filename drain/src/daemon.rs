//! The daemon: start-up in a fixed order, then one event loop.
//!
//! Start-up, in order: mark inherited descriptors close-on-exec; read
//! `LANDWALL_DRAIN_SANDBOX` and the configuration; refuse to serve if the spool, the
//! configuration file, the daemon's home or executable lies within what every job is
//! granted ([`offlimits::check_roots`]); with the flag, wall the daemon in (before
//! anything in the spool is touched, not even the lock file); create the spool layout and
//! use its real path from then on (for the runners' `--spool` too); take
//! the lock; put back (or complete) jobs a dead daemon left in running/, after killing what
//! is left of their process groups; watch queue/ and the signals; tell systemd READY=1.
//!
//! Each job: its file and worktree checked, its worktree's protected paths copied
//! ([`sweep`]), its runner started; once all of it is over, the protected paths compared and
//! put back, and its result written (`tampered` if it changed any).
//!
//! The loop wakes only on an event (a signal, an inotify event on queue/, a job's exit) or
//! a deadline (a job's timeout, the end of the grace period, SIGKILL after SIGTERM); an
//! idle daemon sleeps in `poll(2)` with no timeout.

use std::collections::{HashSet, VecDeque};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use landwall::config::{self, Config, ConfigError, ConfigPaths};
use landwall::launch::{self, LiveKernel};
use landwall::spool::{
    self, printable, JobResult, JobSpec, LockError, Rejected, Spool, SpoolError, State,
};

use landwall::limits::{self, JobCaps};

use crate::args::DaemonArgs;
use crate::cgroup::{self, Cgroups};
use crate::exit;
use crate::notify::Notifier;
use crate::offlimits::{self, Own};
use crate::procs::{self, signal_group};
use crate::selfwall::{self, FLAG};
use crate::sweep::{self, Snapshot};

/// How long after SIGTERM a job's process group gets SIGKILL.
const KILL_AFTER: Duration = Duration::from_secs(5);
/// Files in tmp/ older than this at start are leftovers of a crash.
const TMP_AGE: Duration = Duration::from_secs(3600);
/// How long start-up waits for a dead daemon's leftover processes to die after SIGKILL.
const LEFTOVER_PATIENCE: Duration = Duration::from_secs(5);
/// The longest the removal of what one job's sweep set aside may take; past it the rest
/// stays renamed aside (where nothing uses it), and the log says where.
const REMOVAL_LIMIT: Duration = Duration::from_secs(120);
/// How often a daemon short of room on the spool's file system looks again.
const ROOM_RECHECK: Duration = Duration::from_secs(5);

/// Why the daemon stopped serving (or never started).
#[derive(Debug, thiserror::Error)]
pub enum DrainError {
    /// `LANDWALL_DRAIN_SANDBOX` has a value other than `1` or `0`.
    #[error("{0}")]
    Flag(String),
    /// The configuration file.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A worktree root that does not resolve.
    #[error("worktree root {} ({at}): {source}; create it or remove it from there", path.display())]
    Root {
        /// The root as configured.
        path: PathBuf,
        /// Where it was configured (key, file and line).
        at: String,
        /// Why.
        source: io::Error,
    },
    /// The drain's own state lies within what every job would be granted.
    #[error("{0}")]
    Exposed(String),
    /// A cap the configuration gives every job that this host cannot hold.
    #[error("{0}")]
    Caps(String),
    /// Marking descriptors, finding the executable.
    #[error("{0}")]
    Setup(landwall::Error),
    /// The daemon's own wall (`LANDWALL_DRAIN_SANDBOX=1`).
    #[error("{FLAG}=1 but the daemon's wall cannot go up, so it does not serve: {0}")]
    Wall(landwall::Error),
    /// The spool's lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The spool.
    #[error(transparent)]
    Spool(#[from] SpoolError),
    /// Signals, inotify, poll, waiting for children.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        source: io::Error,
    },
}

impl DrainError {
    /// The documented exit status.
    pub fn exit_code(&self) -> i32 {
        match self {
            DrainError::Flag(_)
            | DrainError::Config(_)
            | DrainError::Root { .. }
            | DrainError::Exposed(_)
            | DrainError::Caps(_) => exit::CONFIG,
            DrainError::Setup(e) | DrainError::Wall(e) => e.exit_code(),
            DrainError::Lock(LockError::Held { .. }) => exit::LOCKED,
            DrainError::Lock(LockError::Io(_)) | DrainError::Spool(_) | DrainError::Io { .. } => {
                exit::SPOOL
            }
        }
    }
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> DrainError {
    move |source| DrainError::Io { what, source }
}

/// Runs the daemon; returns its exit status.
pub fn main(args: DaemonArgs) -> i32 {
    init_logging();
    match run(args) {
        Ok(()) => exit::OK,
        Err(e) => {
            log::error!("{e}");
            e.exit_code()
        }
    }
}

fn init_logging() {
    let filter = std::env::var("LANDWALL_LOG")
        .ok()
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| "info".into());
    let mut b = env_logger::Builder::new();
    b.parse_filters(&filter)
        .target(env_logger::Target::Stderr)
        .format_timestamp_millis();
    if b.try_init().is_err() {
        eprintln!("landwall-drain: logging was already initialised");
    }
}

/// The settings a SIGHUP can change.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Live {
    /// Worktree roots, real paths.
    roots: Vec<PathBuf>,
    /// Owners whose job files are accepted.
    allow_uids: Vec<u32>,
    /// Grace period after SIGTERM.
    grace: Duration,
    /// Jobs at once.
    jobs: usize,
    /// The caps of every job, and the most a job may ask for.
    caps: JobCaps,
    /// The configuration's `protect` entries: the protected paths the sweep records.
    protect: Vec<landwall::protect::Change>,
    /// `tmp_size`: each job's own `/tmp` and `/dev/shm` (`None`: from its memory cap).
    tmp_size: Option<u64>,
}

impl Live {
    fn new(config: &Config, jobs_cli: Option<u32>, uid: u32) -> Result<Live, DrainError> {
        let roots = config
            .drain
            .worktree_roots
            .iter()
            .map(|r| {
                std::fs::canonicalize(r).map_err(|source| DrainError::Root {
                    path: r.clone(),
                    at: config.places.describe(r, "[drain] worktree_roots"),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Each job sees its own empty tmpfs on /tmp and /dev/shm: a worktree there would
        // be hidden from its job.
        for (root, configured) in roots.iter().zip(&config.drain.worktree_roots) {
            if let Some(place) = landwall::ns::PRIVATE_TMP
                .iter()
                .find(|p| root.starts_with(p))
            {
                return Err(DrainError::Exposed(format!(
                    "worktree root {} ({}) lies in {place}, which each job sees as an empty tmpfs of its own; move the root out of /tmp and /dev/shm",
                    root.display(),
                    config.places.describe(configured, "[drain] worktree_roots")
                )));
            }
        }
        let allow_uids = config.drain.allow_uids.clone().unwrap_or_else(|| {
            let mut v = vec![0, uid];
            v.dedup();
            v
        });
        let jobs = jobs_cli.or(config.drain.jobs).unwrap_or(1);
        Ok(Live {
            caps: limits::with_defaults(config.drain.caps),
            protect: config.protect.clone(),
            tmp_size: config.drain.tmp_size,
            roots,
            allow_uids,
            grace: config.drain.grace,
            jobs: usize::try_from(jobs).unwrap_or(1),
        })
    }
}

fn load_config(path: &Path) -> Result<Config, ConfigError> {
    // The per-user file is not read: agents can write it, and the daemon's roots, owners
    // and wall must not come from an agent.
    config::load(&ConfigPaths {
        system: path.to_path_buf(),
        user: None,
    })
}

fn run(args: DaemonArgs) -> Result<(), DrainError> {
    launch::sanitize_fds().map_err(|e| DrainError::Setup(landwall::Error::Fds(e)))?;
    // SIGXFSZ (a write past RLIMIT_FSIZE) would kill the daemon without a word; handled, the
    // write fails with EFBIG and is reported as any spool error (74). A handler, unlike
    // SIG_IGN, is reset to the default by exec, so runners and jobs do not inherit it.
    signal_hook::flag::register(
        libc::SIGXFSZ,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    )
    .map_err(io_err("handling SIGXFSZ"))?;
    let walled = selfwall::flag(std::env::var_os(FLAG).as_deref()).map_err(DrainError::Flag)?;
    let config_path = args
        .config
        .clone()
        .or_else(|| {
            std::env::var_os("LANDWALL_CONFIG")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        })
        .unwrap_or_else(|| PathBuf::from(config::SYSTEM_CONFIG));
    let config_path =
        std::path::absolute(&config_path).map_err(io_err("resolving the configuration path"))?;
    let config = load_config(&config_path)?;
    let spool_root = args
        .spool
        .clone()
        .or_else(|| config.drain.spool.clone())
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_SPOOL));
    let spool_root =
        std::path::absolute(&spool_root).map_err(io_err("resolving the spool path"))?;
    let uid = nix::unistd::getuid().as_raw();
    let is_root = nix::unistd::geteuid().is_root();
    let live = Live::new(&config, args.jobs, uid)?;
    let exe = std::env::current_exe().map_err(|source| {
        DrainError::Setup(landwall::Error::Exec {
            path: PathBuf::from("/proc/self/exe"),
            source,
        })
    })?;
    let mut own = Own {
        spool: spool_root.clone(),
        config_file: config_path.clone(),
        homes: offlimits::homes(std::env::var_os("HOME").as_deref(), uid),
        exe: Some(exe.clone()),
    };
    // Before the wall and before the spool is touched: a spool in /tmp or in a root is a
    // configuration error (78), not a wall that cannot go up.
    offlimits::check_roots(&config, &live.roots, &own, is_root).map_err(DrainError::Exposed)?;
    let notifier = match Notifier::connect(std::env::var_os("NOTIFY_SOCKET").as_deref()) {
        Ok(n) => n,
        Err(e) => {
            log::warn!("NOTIFY_SOCKET is set but cannot be reached ({e}); not telling systemd");
            Notifier::default()
        }
    };

    // What a daemon that was killed (SIGKILL, a crash) left of its jobs' own temporary
    // directories goes now, before any job of this one's is made.
    remove_dead_tmp_dirs();

    // Before the wall: a delegated cgroup's daemon moves itself into a leaf first.
    // Said once the daemon serves (a daemon that refuses to says only why).
    let cgroups = cgroup::detect(std::process::id(), &spool_root);
    // A memory cap that would not hold is refused, not run under an rlimit that shared
    // memory and tmpfs pass (found by review). One on every job stops the daemon here.
    let no_memory_cap = cgroup::no_memory_cap(&cgroups);
    if let Some(refusal) = memory_refusal(&live, no_memory_cap.as_deref(), &config_path) {
        return Err(DrainError::Caps(refusal));
    }

    if walled {
        let config_file = config_path.exists().then_some(config_path.as_path());
        let policy = selfwall::policy(selfwall::Inputs2 {
            config: &config,
            spool: &spool_root,
            roots: &live.roots,
            exe: &exe,
            config_file,
            is_root,
            cgroup: cgroups.as_ref().ok().map(|c| c.base.as_path()),
        })
        .map_err(DrainError::Wall)?;
        let enforced =
            selfwall::wall_self(&mut LiveKernel::default(), &policy).map_err(DrainError::Wall)?;
        log::info!(
            "walled in ({FLAG}=1): Landlock ABI {}, {} rules; writable: the spool, the worktree roots, /tmp, /dev and configured paths",
            enforced.abi,
            policy.rules.len()
        );
        for rule in &policy.rules {
            log::debug!(
                "wall: {} {} ({})",
                rule.access,
                rule.path.display(),
                rule.reason
            );
        }
    } else {
        log::warn!(
            "running WITHOUT its own wall: set {FLAG}=1 to wall the daemon in (each job is still walled into its worktree)"
        );
    }

    Spool::new(&spool_root).create_layout()?;
    // From here on the spool's real path: a symbolic link on the way to it, wherever it
    // lies, can no longer move the daemon (or a job's off-limits list) to another spool.
    let spool_root = std::fs::canonicalize(&spool_root).map_err(|source| SpoolError {
        what: "resolving",
        path: spool_root.clone(),
        source,
    })?;
    own.spool = spool_root.clone();
    let spool = Spool::new(spool_root);
    let _lock = lock_spool(&spool)?;
    let cleaned = spool::clean(&spool, TMP_AGE)?;
    if cleaned > 0 {
        log::info!("removed {cleaned} leftover temporary file(s) from the spool");
    }
    // Watch before the first scan, so that no job queued from now on is missed.
    let wake = Wake::new(&spool.queue())?;
    recover(&spool)?;
    let cgroups = match cgroups {
        Ok(c) => {
            log::info!("{}", c.describe());
            let n = c.sweep();
            if n > 0 {
                log::warn!(
                    "killed what was left in {n} job cgroup(s) of this spool's daemons that are gone"
                );
            }
            Some(c)
        }
        Err(why) => {
            log::warn!("{}", cgroup::without(&why));
            None
        }
    };
    let mut daemon = Daemon {
        cgroups,
        no_memory_cap,
        no_room: None,
        spool,
        exe,
        config_path,
        jobs_cli: args.jobs,
        once: args.once,
        walled,
        uid,
        is_root,
        own,
        pid: std::process::id(),
        live,
        running: Vec::new(),
        removals: Vec::new(),
        pending: VecDeque::new(),
        dirty: true,
        warned: HashSet::new(),
        stopping: None,
        wake,
        notifier,
    };
    if let Err(e) = daemon.notifier.send("READY=1") {
        log::warn!("telling systemd READY=1: {e}");
    }
    log::info!(
        "serving {} with {} job slot(s){}",
        daemon.spool.root().display(),
        daemon.live.jobs,
        if daemon.once {
            ", until the queue is empty (--once)"
        } else {
            ""
        }
    );
    daemon.serve()
}

/// Puts back the jobs a dead daemon left in running/ (or completes their move to done/ or
/// failed/ if their result was recorded), after killing what is left of their groups.
fn recover(spool: &Spool) -> Result<(), DrainError> {
    for s in spool::stranded(spool)? {
        if let Some(run) = &s.run {
            let n = procs::kill_leftovers(run, LEFTOVER_PATIENCE);
            if n > 0 {
                log::warn!(
                    "job {}: killed {n} process(es) the previous daemon left running (process group {})",
                    s.id,
                    run.pid
                );
            }
        }
        match s.finished {
            Some(state) => {
                spool::complete_move(spool, &s.id, state)?;
                log::info!(
                    "job {}: {} (its result was recorded before the previous daemon stopped)",
                    s.id,
                    state.as_str()
                );
            }
            None => {
                spool::put_back(spool, &s.id)?;
                log::info!(
                    "job {}: queued again (it was running when the previous daemon stopped)",
                    s.id
                );
            }
        }
    }
    Ok(())
}

/// The descriptors the loop sleeps on: one self-pipe per kind of signal, and inotify.
struct Wake {
    term: UnixStream,
    hup: UnixStream,
    chld: UnixStream,
    inotify: Inotify,
    /// Written to (by [`Removal`]'s thread) when a removal has ended.
    removed: UnixStream,
    /// Its other end, cloned for each removal's thread.
    removed_w: UnixStream,
}

impl Wake {
    fn new(queue: &Path) -> Result<Wake, DrainError> {
        let pipe = |sigs: &[i32]| -> io::Result<UnixStream> {
            let (r, w) = UnixStream::pair()?;
            r.set_nonblocking(true)?;
            w.set_nonblocking(true)?;
            for &sig in sigs {
                signal_hook::low_level::pipe::register(sig, w.try_clone()?)?;
            }
            Ok(r)
        };
        let term = pipe(&[libc::SIGTERM, libc::SIGINT]).map_err(io_err("handling SIGTERM"))?;
        let hup = pipe(&[libc::SIGHUP]).map_err(io_err("handling SIGHUP"))?;
        let chld = pipe(&[libc::SIGCHLD]).map_err(io_err("handling SIGCHLD"))?;
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| io_err("starting inotify")(e.into()))?;
        inotify
            .add_watch(
                queue,
                AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_ONLYDIR,
            )
            .map_err(|e| io_err("watching queue/")(e.into()))?;
        let (removed, removed_w) = UnixStream::pair()
            .and_then(|(r, w)| {
                r.set_nonblocking(true)?;
                w.set_nonblocking(true)?;
                Ok((r, w))
            })
            .map_err(io_err("making the removals' pipe"))?;
        Ok(Wake {
            term,
            hup,
            chld,
            inotify,
            removed,
            removed_w,
        })
    }

    /// Sleeps until an event or `timeout`.
    fn wait(&self, timeout: Option<Duration>) -> Result<(), DrainError> {
        let timeout = match timeout {
            None => PollTimeout::NONE,
            // Round up: waking a little early would only spin until the deadline.
            Some(d) => {
                PollTimeout::try_from(d.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128))
                    .unwrap_or(PollTimeout::MAX)
            }
        };
        let mut fds = [
            PollFd::new(self.term.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.hup.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.chld.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.inotify.as_fd(), PollFlags::POLLIN),
            PollFd::new(self.removed.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, timeout) {
            Ok(_) | Err(Errno::EINTR) => Ok(()),
            Err(e) => Err(io_err("waiting for events")(e.into())),
        }
    }
}

/// Reads everything available on a non-blocking self-pipe; returns how many bytes (one per
/// signal delivered, coalesced by the kernel at worst to fewer).
fn drain_pipe(mut s: &UnixStream) -> usize {
    let mut buf = [0u8; 64];
    let mut n = 0;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return n,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return n,
        }
    }
}

/// The removal of what a job's sweep set aside (renamed out of the way already, so its
/// effect has ended), on a thread of its own: as long as what the job made, so off the
/// daemon's loop. Its job's worktree stays reserved until it ends ([`reach`]): what is set
/// aside may lie in a protected directory that the next job's snapshot would read.
struct Removal {
    id: String,
    reach: Vec<PathBuf>,
    /// Set to stop it (the daemon stops).
    stop: Arc<AtomicBool>,
    /// Set by the thread when its work is over, before it wakes the daemon.
    done: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Removal {
    fn start(
        id: String,
        reach: Vec<PathBuf>,
        later: sweep::Later,
        wake: &UnixStream,
    ) -> io::Result<Removal> {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let told = wake.try_clone()?;
        let (job, stopped, over) = (id.clone(), Arc::clone(&stop), Arc::clone(&done));
        let thread = std::thread::Builder::new()
            .name("removal".into())
            .spawn(move || {
                let began = Instant::now();
                let left = later.remove(&stopped, Some(began + REMOVAL_LIMIT));
                for l in &left {
                    log::warn!("job {job}: {}", printable(l));
                }
                log::info!(
                    "job {job}: what its sweep set aside was removed{} in {}",
                    if left.is_empty() {
                        ""
                    } else {
                        ", but for the above,"
                    },
                    human(began.elapsed())
                );
                over.store(true, Ordering::SeqCst);
                if let Err(e) = (&told).write_all(b"r") {
                    log::debug!("removal: waking the daemon: {e}");
                }
            })?;
        Ok(Removal {
            id,
            reach,
            stop,
            done,
            thread,
        })
    }
}

/// A job whose runner is alive.
struct Running {
    id: String,
    child: Child,
    /// The runner's pid, which is the job's process group.
    pid: u32,
    /// Read end of the status pipe (non-blocking).
    status: File,
    started: Instant,
    started_at: SystemTime,
    timeout: Option<Duration>,
    timed_out: bool,
    stop_signalled: bool,
    kill_at: Option<Instant>,
    killed: bool,
    /// When the whole process group gets SIGKILL, should the keeper not have ended the
    /// job after SIGUSR1.
    backstop_at: Option<Instant>,
    /// The job's cgroup, if it has one.
    cgroup: Option<PathBuf>,
    /// The caps it runs under.
    caps: JobCaps,
    /// Its worktree's protected paths as they were before it started (no other job that
    /// could change them runs meanwhile: see [`reach`]).
    snapshot: Rc<Snapshot>,
    /// Where it can write that another job's protected paths may lie ([`reach`]).
    reach: Vec<PathBuf>,
    /// Its own temporary directory ([`own_tmp_dir`]), removed when it ends.
    tmp_dir: Option<PathBuf>,
}

impl Running {
    fn terminate(&mut self, now: Instant) {
        signal_group(self.pid, Signal::SIGTERM);
        if self.kill_at.is_none() {
            self.kill_at = Some(now + KILL_AFTER);
        }
    }

    /// Whether the runner (or the job it became) has exited, without reaping it: while it
    /// is an unreaped zombie its pid, and so its process group's number, cannot be reused.
    fn has_exited(&self) -> bool {
        let Ok(pid) = i32::try_from(self.pid) else {
            return true;
        };
        matches!(
            waitid(
                Id::Pid(Pid::from_raw(pid)),
                WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT
            ),
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD)
        )
    }

    /// The runner's message if the job was never exec'd (empty pipe: it was).
    fn not_started(&mut self) -> Option<String> {
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.status.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => text.push_str(&String::from_utf8_lossy(&buf[..n])),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let text = text.trim();
        (!text.is_empty()).then(|| text.replace('\n', " "))
    }
}

struct Stopping {
    grace_deadline: Instant,
}

struct Daemon {
    /// The jobs' cgroups, where the daemon has a subtree for them.
    cgroups: Option<Cgroups>,
    /// Why no job's memory cap can hold here (no `memory.max` for it), if none can.
    no_memory_cap: Option<String>,
    /// When to look at the spool's free space again, while it is short.
    no_room: Option<Instant>,
    spool: Spool,
    exe: PathBuf,
    config_path: PathBuf,
    jobs_cli: Option<u32>,
    once: bool,
    walled: bool,
    uid: u32,
    is_root: bool,
    /// The drain's own state, which no job may be granted.
    own: Own,
    pid: u32,
    live: Live,
    running: Vec<Running>,
    /// The removals of what ended jobs' sweeps set aside.
    removals: Vec<Removal>,
    /// Queued IDs from the last scan, in order.
    pending: VecDeque<String>,
    /// queue/ changed since the last scan.
    dirty: bool,
    /// Bad names already warned about.
    warned: HashSet<PathBuf>,
    stopping: Option<Stopping>,
    wake: Wake,
    notifier: Notifier,
}

impl Daemon {
    fn serve(&mut self) -> Result<(), DrainError> {
        loop {
            self.take_events();
            self.reap()?;
            self.enforce(Instant::now());
            if self.stopping.is_none() {
                self.fill()?;
            }
            if self.finished()? {
                log::info!("stopped");
                return Ok(());
            }
            let timeout = self
                .next_deadline()
                .map(|d| d.saturating_duration_since(Instant::now()));
            self.wake.wait(timeout)?;
        }
    }

    fn take_events(&mut self) {
        if drain_pipe(&self.wake.term) > 0 {
            self.stop();
        }
        if drain_pipe(&self.wake.hup) > 0 {
            self.reload();
        }
        drain_pipe(&self.wake.chld);
        if drain_pipe(&self.wake.removed) > 0 {
            let (ended, going): (Vec<Removal>, Vec<Removal>) = std::mem::take(&mut self.removals)
                .into_iter()
                .partition(|r| r.done.load(Ordering::SeqCst));
            self.removals = going;
            for r in ended {
                if r.thread.join().is_err() {
                    log::error!(
                        "job {}: the removal of what its sweep set aside panicked",
                        r.id
                    );
                }
            }
        }
        loop {
            match self.wake.inotify.read_events() {
                Ok(events) if !events.is_empty() => self.dirty = true,
                Ok(_) | Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => {}
                Err(e) => {
                    log::warn!("reading inotify events: {e}; rescanning queue/");
                    self.dirty = true;
                    break;
                }
            }
        }
    }

    fn stop(&mut self) {
        let now = Instant::now();
        match &mut self.stopping {
            None => {
                log::info!(
                    "stopping: no new jobs; {} running job(s) get {} to finish before they are put back",
                    self.running.len(),
                    human(self.live.grace)
                );
                if let Err(e) = self.notifier.send("STOPPING=1") {
                    log::warn!("telling systemd STOPPING=1: {e}");
                }
                self.stopping = Some(Stopping {
                    grace_deadline: now + self.live.grace,
                });
                // What is set aside has no effect: its removal stops now, the rest left.
                for r in &self.removals {
                    r.stop.store(true, Ordering::Relaxed);
                }
            }
            Some(s) => {
                log::info!("second stop signal: ending the grace period now");
                s.grace_deadline = now;
            }
        }
    }

    fn reload(&mut self) {
        let loaded = load_config(&self.config_path)
            .map_err(DrainError::from)
            .and_then(|c| {
                let live = Live::new(&c, self.jobs_cli, self.uid)?;
                offlimits::check_roots(&c, &live.roots, &self.own, self.is_root)
                    .map_err(DrainError::Exposed)?;
                if let Some(refusal) =
                    memory_refusal(&live, self.no_memory_cap.as_deref(), &self.config_path)
                {
                    return Err(DrainError::Caps(refusal));
                }
                Ok(live)
            });
        match loaded {
            Ok(live) => {
                if self.walled && live.roots != self.live.roots {
                    log::warn!(
                        "the worktree roots changed: the daemon's own wall keeps the roots it started with until it is restarted"
                    );
                }
                self.live = live;
                log::info!("configuration reloaded from {}", self.config_path.display());
            }
            Err(e) => log::error!("reloading the configuration: {e}; keeping the previous one"),
        }
    }

    fn reap(&mut self) -> Result<(), DrainError> {
        let mut i = 0;
        while i < self.running.len() {
            if !self.running[i].has_exited() {
                i += 1;
                continue;
            }
            // Anything the job left in its group goes with it (its leader is still an
            // unreaped zombie, so the group's number is still ours).
            if signal_group(self.running[i].pid, Signal::SIGKILL) {
                log::debug!(
                    "job {}: killed processes left in its group",
                    self.running[i].id
                );
            }
            let usage = self.running[i]
                .cgroup
                .as_deref()
                .map(cgroup::end)
                .unwrap_or_default();
            let status = self.running[i]
                .child
                .wait()
                .map_err(io_err("waiting for a job"))?;
            let r = self.running.swap_remove(i);
            self.ended(r, status, usage)?;
        }
        Ok(())
    }

    fn ended(
        &mut self,
        mut r: Running,
        status: ExitStatus,
        usage: cgroup::Usage,
    ) -> Result<(), DrainError> {
        // The keeper says "cap: …" when the job reached its log cap; anything else on the
        // pipe is why the job was not started.
        let told = r.not_started();
        let (not_started, capped) = match told {
            Some(t) => match t.strip_prefix("cap: ") {
                Some(cap) => (None, Some(cap.to_string())),
                None => (Some(t), None),
            },
            None => (None, None),
        };
        let capped = capped.or_else(|| {
            (!status.success())
                .then(|| cgroup::cap_reason(usage, &r.caps))
                .flatten()
        });
        let id = r.id.clone();
        // Nothing of the job runs any more (its keeper ended all of it, its cgroup is
        // empty): what it changed among its worktree's protected paths is put back now, and
        // recorded.
        let (found, mut later) = r.snapshot.sweep_first();
        // Its own temporary directory goes with what its sweep set aside, off the loop.
        if let Some(dir) = r.tmp_dir.take() {
            if let Err(e) = later.add_dir(&dir) {
                log::warn!(
                    "job {id}: its temporary directory {} is left: {e}",
                    printable(&dir.display().to_string())
                );
            }
        }
        if !later.is_empty() {
            let removal = Removal::start(id.clone(), r.reach.clone(), later, &self.wake.removed_w)
                .map_err(io_err("starting a removal"))?;
            self.removals.push(removal);
        }
        let tampered = (!found.is_empty()).then(|| sweep::describe(&found));
        if let Some(t) = &tampered {
            log::warn!("job {id}: {}", printable(t));
        }
        // A job that tampered is recorded, not run again.
        if self.stopping.is_some()
            && tampered.is_none()
            && not_started.is_none()
            && !r.timed_out
            && (r.stop_signalled || status.signal().is_some())
        {
            spool::put_back(&self.spool, &id)?;
            log::info!("job {id}: queued again (stopped with the daemon)");
            return Ok(());
        }
        let duration = r.started.elapsed();
        let how = match (status.code(), status.signal()) {
            (Some(c), _) => format!("exit {c}"),
            (_, Some(s)) => procs::signal_name(s),
            _ => status.to_string(),
        };
        let (state, reason) = if let Some(why) = not_started {
            (State::Failed, Some(format!("not started: {why}")))
        } else if r.timed_out {
            let t = r.timeout.map(human).unwrap_or_default();
            (State::Failed, Some(format!("timed out after {t}")))
        } else if let Some(cap) = capped {
            (State::Failed, Some(cap))
        } else if status.success() {
            (State::Done, None)
        } else {
            (State::Failed, None)
        };
        let started = reason
            .as_deref()
            .is_none_or(|r| !r.starts_with("not started"));
        // Tampered whatever else happened; the exit status is recorded as ever, and any
        // other reason follows the paths.
        let (state, reason) = match tampered {
            Some(t) => (
                State::Tampered,
                Some(match reason {
                    Some(why) => format!("{t}; {why}"),
                    None => t,
                }),
            ),
            None => (state, reason),
        };
        let result = JobResult {
            id: id.clone(),
            state,
            exit_code: status.code(),
            signal: status.signal(),
            reason: reason.clone(),
            started_at: started.then(|| spool::rfc3339(r.started_at)),
            ended_at: spool::rfc3339(SystemTime::now()),
            duration_secs: started.then_some(duration.as_secs_f64()),
        };
        spool::finish(&self.spool, &result)?;
        match (state, reason) {
            (State::Done, _) => log::info!("job {id}: done ({how}, {})", human(duration)),
            (State::Tampered, _) => log::warn!("job {id}: tampered ({how}, {})", human(duration)),
            (_, Some(why)) => log::warn!("job {id}: failed ({how}): {}", printable(&why)),
            _ => log::warn!("job {id}: failed ({how}, {})", human(duration)),
        }
        Ok(())
    }

    fn enforce(&mut self, now: Instant) {
        let grace_over = self
            .stopping
            .as_ref()
            .is_some_and(|s| now >= s.grace_deadline);
        for r in &mut self.running {
            if let Some(t) = r.timeout {
                if !r.timed_out && now >= r.started + t {
                    r.timed_out = true;
                    log::warn!(
                        "job {}: timed out after {}; terminating its process group",
                        r.id,
                        human(t)
                    );
                    r.terminate(now);
                }
            }
            if grace_over && !r.stop_signalled {
                r.stop_signalled = true;
                log::info!(
                    "job {}: still running at the end of the grace period; terminating its process group",
                    r.id
                );
                r.terminate(now);
            }
            if let Some(k) = r.kill_at {
                if !r.killed && now >= k {
                    r.killed = true;
                    log::warn!(
                        "job {}: still running {} after SIGTERM; killing all of it",
                        r.id,
                        human(KILL_AFTER)
                    );
                    // The keeper kills every process of the job, detached ones too; the
                    // cgroup, where there is one, goes at once.
                    procs::signal_pid(r.pid, Signal::SIGUSR1);
                    if let Some(dir) = &r.cgroup {
                        cgroup::kill(dir);
                    }
                    r.backstop_at = Some(now + KILL_AFTER);
                }
            }
            if let Some(b) = r.backstop_at {
                if now >= b {
                    r.backstop_at = None;
                    log::warn!(
                        "job {}: its keeper did not end it {} after SIGUSR1; killing its process group",
                        r.id,
                        human(KILL_AFTER)
                    );
                    signal_group(r.pid, Signal::SIGKILL);
                }
            }
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut consider = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for r in &self.running {
            if let (Some(t), false) = (r.timeout, r.timed_out) {
                consider(r.started + t);
            }
            if let (Some(k), false) = (r.kill_at, r.killed) {
                consider(k);
            }
            if let Some(b) = r.backstop_at {
                consider(b);
            }
        }
        if let Some(s) = &self.stopping {
            if self.running.iter().any(|r| !r.stop_signalled) {
                consider(s.grace_deadline);
            }
        }
        if let (Some(t), None) = (self.no_room, &self.stopping) {
            consider(t);
        }
        next
    }

    fn scan(&mut self) -> Result<(), DrainError> {
        self.dirty = false;
        self.pending.clear();
        for entry in spool::queued(&self.spool)? {
            match entry {
                spool::QueueEntry::Job(id) => self.pending.push_back(id),
                spool::QueueEntry::BadName(path) => {
                    if self.warned.insert(path.clone()) {
                        log::warn!(
                            "ignoring {}: not a job name (job files are named ID.toml, ID of ASCII letters, digits, `.`, `_` and `-`, not ending in `.result`)",
                            printable(&path.to_string_lossy())
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the spool's file system has room for one more job: its log cap and a
    /// megabyte for its files. Short of that, nothing is claimed (what is queued stays
    /// queued) and the free space is looked at again every [`ROOM_RECHECK`].
    fn room_for_a_job(&mut self, now: Instant) -> bool {
        if self.no_room.is_some_and(|next| now < next) {
            return false;
        }
        let need = self.live.caps.log.unwrap_or(limits::DEFAULT_LOG_MAX) + (1 << 20);
        let free = match nix::sys::statvfs::statvfs(self.spool.root()) {
            Ok(st) => st.blocks_available().saturating_mul(st.fragment_size()),
            Err(e) => {
                log::warn!("looking at the spool's free space: {e}; starting jobs anyway");
                return true;
            }
        };
        if free < need {
            if self.no_room.is_none() {
                log::error!(
                    "the spool's file system has {} free, less than a job may need ({}: its log cap and 1M); not starting jobs until there is room (queued jobs stay queued)",
                    limits::size_text(free),
                    limits::size_text(need)
                );
            }
            self.no_room = Some(now + ROOM_RECHECK);
            return false;
        }
        if self.no_room.take().is_some() {
            log::info!("room on the spool's file system again: starting jobs");
        }
        true
    }

    fn fill(&mut self) -> Result<(), DrainError> {
        while self.running.len() < self.live.jobs {
            if self.dirty {
                self.scan()?;
            }
            if self.pending.is_empty() || !self.room_for_a_job(Instant::now()) {
                break;
            }
            let Some(id) = self.pending.pop_front() else {
                break;
            };
            // A job of a repository another running job can change waits for it: a
            // snapshot of protected paths taken meanwhile could hold what that job planted,
            // and its sweep would put it back (found by review). Queue order is kept.
            if let Some(reach) = self.queued_reach(&id) {
                let busy = self.running.iter().map(|r| &r.reach);
                let busy = busy.chain(self.removals.iter().map(|r| &r.reach));
                if busy.into_iter().any(|r| overlaps(r, &reach)) {
                    self.pending.push_front(id);
                    break;
                }
            }
            self.start(id)?;
        }
        Ok(())
    }

    fn finished(&mut self) -> Result<bool, DrainError> {
        if !self.running.is_empty() || !self.removals.is_empty() {
            return Ok(false);
        }
        if self.stopping.is_some() {
            return Ok(true);
        }
        if !self.once {
            return Ok(false);
        }
        // --once: done when a fresh look at queue/ finds nothing to claim.
        self.scan()?;
        Ok(self.pending.is_empty())
    }

    fn start(&mut self, id: String) -> Result<(), DrainError> {
        if !spool::claim(&self.spool, &id)? {
            return Ok(());
        }
        log::info!("job {id}: claimed");
        let (spec, worktree, caps) = match self.check(&id) {
            Ok(ok) => ok,
            Err(Rejected(why)) => {
                self.refuse(&id, format!("refused: {why}"))?;
                return Ok(());
            }
        };
        let snapshot = match self.snapshot(&worktree) {
            Ok(s) => s,
            Err(why) => {
                self.refuse(&id, format!("not started: {why}"))?;
                return Ok(());
            }
        };
        match self.spawn(&id, &spec, &worktree, &caps, snapshot) {
            Ok(r) => {
                log::info!(
                    "job {id}: started (process group {}) in {}: {:?}",
                    r.pid,
                    printable(&worktree.to_string_lossy()),
                    spec.argv
                );
                self.running.push(r);
            }
            Err(e) => self.refuse(&id, format!("not started: starting its runner: {e}"))?,
        }
        Ok(())
    }

    /// Records a job that never ran as failed.
    fn refuse(&mut self, id: &str, reason: String) -> Result<(), DrainError> {
        spool::finish(
            &self.spool,
            &JobResult {
                id: id.to_string(),
                state: State::Failed,
                exit_code: None,
                signal: None,
                reason: Some(reason.clone()),
                started_at: None,
                ended_at: spool::rfc3339(SystemTime::now()),
                duration_secs: None,
            },
        )?;
        log::warn!("job {id}: failed: {}", printable(&reason));
        Ok(())
    }

    /// The protected paths of `worktree` as they are before a job starts there, for the
    /// sweep after it ([`sweep`]). No job that could change them runs meanwhile (`fill`
    /// waits for it: [`reach`]). An error (a protected path that is a link, or too large to
    /// keep a copy of) is one line; the job is not started.
    fn snapshot(&self, worktree: &Path) -> Result<Rc<Snapshot>, String> {
        // As the runner finds it: the daemon's checked real path is the override.
        let wt =
            landwall::worktree::discover(worktree, Some(worktree)).map_err(|e| e.to_string())?;
        // A directory of repositories would give the job every one of them, whose own
        // protected paths are not this worktree's (found by review).
        landwall::worktree::refuse_too_wide(&wt, None).map_err(|e| e.to_string())?;
        Snapshot::take(&wt, &self.live.protect).map(Rc::new)
    }

    /// [`reach`] of the queued job `id`, read without claiming it; `None` if it cannot be
    /// read (claiming it then refuses it, saying why).
    fn queued_reach(&self, id: &str) -> Option<Vec<PathBuf>> {
        let text = spool::read_job_file(
            &self.spool.job_file(State::Queued, id),
            &self.live.allow_uids,
        )
        .ok()?;
        let spec = spool::check_job(spool::parse_job(&text).ok()?).ok()?;
        let worktree = spool::check_worktree(&spec.worktree, &self.live.roots).ok()?;
        Some(reach(&worktree))
    }

    /// Parse → validate: the job file, its fields, its worktree.
    fn check(&self, id: &str) -> Result<(JobSpec, PathBuf, JobCaps), Rejected> {
        let text = spool::read_job_file(
            &self.spool.job_file(State::Running, id),
            &self.live.allow_uids,
        )?;
        let spec = spool::check_job(spool::parse_job(&text)?)?;
        let caps = limits::effective(spec.caps, self.live.caps).map_err(Rejected)?;
        if let (Some(m), Some(why)) = (caps.memory, &self.no_memory_cap) {
            return Err(Rejected(format!(
                "its memory cap {} cannot hold on this host: {why}; {}, or submit it without `--memory`",
                limits::size_text(m),
                cgroup::MEMORY_FIX
            )));
        }
        let worktree = spool::check_worktree(&spec.worktree, &self.live.roots)?;
        Ok((spec, worktree, caps))
    }

    fn spawn(
        &self,
        id: &str,
        spec: &JobSpec,
        worktree: &Path,
        caps: &JobCaps,
        snapshot: Rc<Snapshot>,
    ) -> io::Result<Running> {
        let cgroup = match &self.cgroups {
            Some(c) => Some(c.create(id, caps).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("making its cgroup in {}: {e}", c.base.display()),
                )
            })?),
            None => None,
        };
        let tmp_dir = own_tmp_dir(id).map_err(|e| {
            io::Error::new(e.kind(), format!("making its own temporary directory: {e}"))
        })?;
        match self.spawn_runner(
            id,
            spec,
            worktree,
            caps,
            (cgroup.clone(), &tmp_dir),
            snapshot,
        ) {
            Ok(r) => Ok(r),
            Err(e) => {
                if let Some(dir) = &cgroup {
                    cgroup::end(dir);
                }
                // Nothing ran in it.
                if let Err(e) = std::fs::remove_dir(&tmp_dir) {
                    log::warn!("job {id}: removing its temporary directory: {e}");
                }
                Err(e)
            }
        }
    }

    fn spawn_runner(
        &self,
        id: &str,
        spec: &JobSpec,
        worktree: &Path,
        caps: &JobCaps,
        (cgroup, tmp_dir): (Option<PathBuf>, &Path),
        snapshot: Rc<Snapshot>,
    ) -> io::Result<Running> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(spool::FILE_MODE)
            .open(self.spool.log_file(id))?;
        let (status_r, status_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        fcntl(&status_r, FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
        let mut cmd = Command::new(&self.exe);
        cmd.arg("__run-job")
            .arg("--config")
            .arg(&self.config_path)
            .arg("--spool")
            .arg(self.spool.root())
            .arg("--worktree")
            .arg(worktree)
            .arg("--agent")
            .arg(&spec.agent)
            .arg("--parent")
            .arg(self.pid.to_string());
        for name in &spec.env {
            cmd.arg("--env").arg(name);
        }
        if let Some(dir) = &cgroup {
            cmd.arg("--cgroup").arg(dir);
        }
        if let Some(l) = caps.log {
            cmd.arg("--log-max").arg(l.to_string());
        }
        cmd.arg("--tmp-size")
            .arg(limits::tmp_size(self.live.tmp_size, caps).to_string())
            .arg("--tmp-dir")
            .arg(tmp_dir);
        // Tasks no controller caps, an rlimit does where it can: RLIMIT_NPROC, which counts
        // every process of the daemon's user and does not hold for root. (Memory has no such
        // fallback: RLIMIT_DATA passes shared memory and tmpfs, so a memory cap without
        // `memory.max` is refused in `check`.)
        let controller = |on: fn(&Cgroups) -> bool| self.cgroups.as_ref().is_some_and(on);
        if let (false, false, Some(t)) = (controller(|c| c.pids), self.is_root, caps.tasks) {
            cmd.arg("--rlimit-nproc").arg(t.to_string());
        }
        cmd.arg("--")
            .args(spec.argv.iter().map(OsString::from))
            .current_dir(worktree)
            .stdin(Stdio::from(status_w))
            .stdout(log.try_clone()?)
            .stderr(log)
            .process_group(0);
        let started_at = SystemTime::now();
        let started = Instant::now();
        let child = cmd.spawn()?;
        // Drop our copy of the status pipe's write end: only the runner holds it now.
        drop(cmd);
        let pid = child.id();
        let record = spool::RunRecord {
            pid,
            start_ticks: procs::stat(pid).map_or(0, |s| s.start_ticks),
            started_at: spool::rfc3339(started_at),
        };
        let running = Running {
            id: id.to_string(),
            child,
            pid,
            status: File::from(status_r),
            started,
            started_at,
            timeout: spec.timeout,
            timed_out: false,
            stop_signalled: false,
            kill_at: None,
            killed: false,
            backstop_at: None,
            cgroup,
            caps: *caps,
            reach: reach(worktree),
            snapshot,
            tmp_dir: Some(tmp_dir.to_path_buf()),
        };
        if let Err(e) = spool::write_run_record(&self.spool, id, &record) {
            // Without it a dead daemon's successor cannot kill this job's leftovers; the
            // job itself still dies with the daemon (parent-death signal).
            log::warn!("job {id}: {e}");
        }
        Ok(running)
    }
}

/// Where each job's own temporary directory is made: `/tmp`, which every daemon may write
/// (its own wall grants it; a unit's `PrivateTmp=` makes it the service's).
const TMP_PARENT: &str = "/tmp";

/// Makes job `id`'s own temporary directory, `/tmp/landwall-job-<daemon pid>-<id>-<random>`,
/// owner-only: granted to the job in place of `/tmp` and `/dev/shm` where it can have no
/// tmpfs of its own (its namespace refused), so that jobs share nothing there. `mkdir` in the
/// sticky `/tmp` under a name no one can guess, then checked (a plain directory of ours).
fn own_tmp_dir(id: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = Path::new(TMP_PARENT).join(format!(
        "landwall-job-{}-{id}-{:016x}",
        std::process::id(),
        landwall::random_u64(0)
    ));
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::other(format!(
            "{} is not a directory of this daemon's",
            dir.display()
        )));
    }
    Ok(dir)
}

/// Removes each job's own temporary directory ([`own_tmp_dir`]) left by a daemon that no
/// longer runs: one named after a process that does not exist, a plain directory owned by
/// this daemon's user (a link, or another user's, is not ours and stays). A process that
/// took the dead daemon's number keeps them until it is gone too.
fn remove_dead_tmp_dirs() {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(TMP_PARENT) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("landwall-job-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
            .filter(|&p| p > 0)
        else {
            continue;
        };
        let dead = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        let path = entry.path();
        let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if !dead || !ours {
            continue;
        }
        match std::fs::remove_dir_all(&path) {
            Ok(()) => log::info!(
                "removed {}, left by a daemon that ended without removing it",
                path.display()
            ),
            Err(e) => log::warn!(
                "could not remove {}, left by a daemon that ended: {e}",
                path.display()
            ),
        }
    }
}

/// The one line that stops the daemon (or a reload) when the configuration gives every job
/// a memory cap (`memory_max`: the default of every job, as well as its maximum) and no
/// job's memory cap can hold here.
fn memory_refusal(live: &Live, no_memory_cap: Option<&str>, config: &Path) -> Option<String> {
    let (m, why) = (live.caps.memory?, no_memory_cap?);
    Some(format!(
        "`memory_max` = {} in [drain] of {} gives every job a memory cap, which cannot hold on this host: {why}; {}, or remove `memory_max`",
        limits::size_text(m),
        config.display(),
        cgroup::MEMORY_FIX
    ))
}

/// A duration for people: `1.234s`, `30s`, `1m30s`.
fn human(d: Duration) -> String {
    if d.subsec_millis() != 0 || d < Duration::from_secs(1) {
        return format!("{:.3}s", d.as_secs_f64());
    }
    let s = d.as_secs();
    let (h, m, s) = (s / 3600, s / 60 % 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

/// Where a job in `worktree` can write that holds, or lies in, another job's protected
/// paths: its top level and the git dirs outside it (a linked worktree's own and its common
/// dir, a submodule's). A main checkout's `.git/worktrees/*` and `.git/modules/*` are
/// protected paths of its own list, and lie in another worktree's git dirs.
fn reach(worktree: &Path) -> Vec<PathBuf> {
    let mut v = vec![worktree.to_path_buf()];
    if let Ok(wt) = landwall::worktree::discover(worktree, Some(worktree)) {
        v.extend(wt.external_git_dirs().into_iter().map(Path::to_path_buf));
    }
    v
}

/// Whether two reaches share a place (one lies in the other).
fn overlaps(a: &[PathBuf], b: &[PathBuf]) -> bool {
    a.iter()
        .any(|x| b.iter().any(|y| x.starts_with(y) || y.starts_with(x)))
}

/// How long a daemon started just after another was killed waits for that one's lock.
const LOCK_GRACE: Duration = Duration::from_secs(3);

/// The spool's lock. Where the daemon that held it is gone (killed: the pid it wrote is no
/// process) but the lock is not free yet, tried again for up to [`LOCK_GRACE`]: a runner it
/// was starting holds the lock's descriptor between fork and exec (a CI run caught a
/// restart in that instant on a loaded machine). A live holder is refused at once.
fn lock_spool(spool: &Spool) -> Result<spool::SpoolLock, spool::LockError> {
    let end = Instant::now() + LOCK_GRACE;
    loop {
        match spool::lock(spool) {
            Err(spool::LockError::Held { pid: Some(pid), .. })
                if Instant::now() < end && !process_exists(pid) =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Whether a process `pid` exists (signal 0: EPERM means it does, as another user's).
fn process_exists(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    !matches!(
        nix::sys::signal::kill(Pid::from_raw(pid), None),
        Err(Errno::ESRCH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_for_people() {
        assert_eq!(human(Duration::from_secs(30)), "30s");
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_secs(3600)), "1h");
        assert_eq!(human(Duration::from_millis(1234)), "1.234s");
        assert_eq!(human(Duration::ZERO), "0.000s");
    }

    #[test]
    fn exit_statuses_are_the_documented_ones() {
        let lock = DrainError::Lock(LockError::Held {
            path: "/s".into(),
            pid: None,
        });
        assert_eq!(lock.exit_code(), 75);
        assert_eq!(DrainError::Flag("x".into()).exit_code(), 78);
        let wall = DrainError::Wall(landwall::Error::Wall(
            landwall::wall::WallError::AbiTooLow { have: 1, need: 3 },
        ));
        assert_eq!(wall.exit_code(), 100);
        let spool = DrainError::Spool(SpoolError {
            what: "x",
            path: "/s".into(),
            source: io::Error::other("x"),
        });
        assert_eq!(spool.exit_code(), 74);
    }

    #[test]
    fn live_settings_default_to_root_and_self() {
        let c = Config::default();
        let l = Live::new(&c, None, 1000).expect("live");
        assert_eq!(l.allow_uids, [0, 1000]);
        assert_eq!(l.jobs, 1);
        assert!(l.roots.is_empty());
        let l = Live::new(&c, Some(4), 0).expect("live");
        assert_eq!(l.allow_uids, [0]);
        assert_eq!(l.jobs, 4);
        let mut c = Config::default();
        c.drain.worktree_roots = vec![PathBuf::from("/nonexistent-landwall-root")];
        assert_eq!(
            Live::new(&c, None, 0)
                .expect_err("missing root")
                .exit_code(),
            78
        );
        // Each job's /tmp is a tmpfs of its own: a root there would be hidden from it.
        let in_tmp = PathBuf::from(format!("/tmp/lw-live-root-{}", std::process::id()));
        std::fs::create_dir_all(&in_tmp).expect("mkdir");
        c.drain.worktree_roots = vec![in_tmp.clone()];
        let e = Live::new(&c, None, 0).expect_err("root in /tmp");
        std::fs::remove_dir(&in_tmp).expect("rmdir");
        assert_eq!(e.exit_code(), 78);
        assert!(e.to_string().contains("lies in /tmp"), "{e}");
    }
}
