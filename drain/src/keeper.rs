//! The job's keeper: the runner forks the job and stays behind, outside every wall, until
//! all of the job is over.
//!
//! - It is a child subreaper: every process the job starts, however it detaches (a new
//!   session, a double fork), is reparented to the keeper rather than to init. When the
//!   job's own process ends, the keeper ends all of them ([`kill_tree`]) before it exits, so
//!   the daemon records a result only for a job that has nothing left running.
//! - It holds the job's output: the job writes into a pipe, the keeper copies it into the
//!   job's log up to the log cap. Past it the output is dropped and the job is ended: a job
//!   that writes without end cannot fill the spool's file system.
//! - It passes the daemon's signals on: SIGTERM (a timeout, the daemon stopping) goes to
//!   every process of the job, detached or not; SIGUSR1, the daemon's "kill" (and its
//!   parent-death signal: a daemon that dies takes its jobs with it), ends all of them.
//! - It exits as the job's own process did (the same status, or the same signal), and says
//!   on the status pipe which cap ended the job, if one did.
//!
//! The walled job cannot signal or trace its keeper: Landlock (ABI 6) scopes signals, and
//! ptrace, to the job's own domain. On older kernels a job could kill its keeper; the job
//! then dies with it (its parent-death signal), and where the daemon has a cgroup the job's
//! cgroup is killed whole as well.
//!
//! Where the daemon gave the job a cgroup, the job joins it in the child, before its wall:
//! the keeper stays in the daemon's, so a job's cgroup holds the job alone, and its caps and
//! `cgroup.kill` reach nothing of the keeper.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::resource::{setrlimit, Resource};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use landwall::limits::size_text;
use landwall::sys;

/// How long the keeper gives the job's processes to die once killed, in all.
const KILL_PATIENCE: Duration = Duration::from_secs(10);
/// How long a process sent SIGSTOP is given to stop before its children are read anyway (a
/// process in uninterruptible sleep, a vfork parent, cannot fork meanwhile either).
const STOP_PATIENCE: Duration = Duration::from_millis(50);
/// How long the keeper waits for the last of the job's output once all of it is dead.
const OUTPUT_PATIENCE: Duration = Duration::from_secs(2);

/// What the keeper is told by the daemon.
pub struct Keep<'a> {
    /// The job's log cap in bytes.
    pub log_max: Option<u64>,
    /// The cgroup the job joins before its wall.
    pub cgroup: Option<&'a Path>,
    /// RLIMIT_NPROC for the job (no pids controller).
    pub rlimit_nproc: Option<u64>,
}

/// Forks the job (`job` runs in the child: it walls itself in and execs, or returns the
/// status of its failure) and keeps it; returns the keeper's exit status, or ends the
/// keeper by the signal that ended the job. `status` is the keeper's copy of the status
/// pipe (the job's copy is close-on-exec).
pub fn keep(keep: &Keep<'_>, daemon: i32, status: &mut File, job: impl FnOnce() -> i32) -> i32 {
    match keep_inner(keep, daemon, status, job) {
        Ok(Ended::Code(c)) => c,
        Ok(Ended::Signal(s)) => sys::die_by_signal(s),
        Err(why) => {
            // The job never ran, or ran unwatched for an instant: the daemon records the
            // reason as "not started" (the job side writes nothing once it has exec'd).
            if status.write_all(why.as_bytes()).is_err() {
                eprintln!("landwall-drain: could not report to the daemon");
            }
            eprintln!("landwall-drain: job not started: {why}");
            landwall::exit::WALL
        }
    }
}

enum Ended {
    Code(i32),
    Signal(i32),
}

fn keep_inner(
    keep: &Keep<'_>,
    daemon: i32,
    status: &mut File,
    job: impl FnOnce() -> i32,
) -> Result<Ended, String> {
    sys::set_child_subreaper().map_err(|e| format!("becoming the job's subreaper: {e}"))?;
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| format!("making the job's output pipes: {e}"))
    };
    let ((out_r, out_w), (err_r, err_w)) = (pipe()?, pipe()?);
    let keeper = nix::unistd::getpid();
    let child = sys::fork_child(|| job_side(keep, keeper, [out_w.as_fd(), err_w.as_fd()], job))
        .map_err(|e| format!("forking the job: {e}"))?;
    let child = Pid::from_raw(child);
    drop((out_w, err_w));

    // Threads from here on: the job was forked while this process was single-threaded.
    let done = Arc::new(AtomicBool::new(false));
    let log_full = Arc::new(AtomicBool::new(false));
    if let Err(e) = watch_signals(child, done.clone()) {
        signal(child, Signal::SIGKILL);
        return Err(format!("watching signals: {e}"));
    }
    // The parent-death signal is now SIGUSR1; a daemon that died before it was set will
    // never send it.
    if nix::unistd::getppid().as_raw() != daemon {
        signal(child, Signal::SIGKILL);
    }
    let (copied_tx, copied_rx) = mpsc::channel();
    let written = Arc::new(AtomicU64::new(0));
    for (pipe, to) in [(out_r, Stream::Stdout), (err_r, Stream::Stderr)] {
        let (log_full, written, cap, tx) = (
            log_full.clone(),
            written.clone(),
            keep.log_max,
            copied_tx.clone(),
        );
        std::thread::Builder::new()
            .name("output".into())
            .spawn(move || {
                copy_output(pipe, to, cap, &written, child, &log_full);
                // The receiver may have given up waiting: nothing to tell then.
                let _gone = tx.send(());
            })
            .map_err(|e| format!("starting the output threads: {e}"))?;
    }

    let ended = wait_for(child);
    done.store(true, Ordering::SeqCst);
    let left = kill_tree();
    if left > 0 {
        eprintln!(
            "landwall-drain: {left} process(es) of the job were still alive {KILL_PATIENCE:?} after SIGKILL"
        );
    }
    let until = Instant::now() + OUTPUT_PATIENCE;
    for _ in 0..2 {
        let left = until.saturating_duration_since(Instant::now());
        if copied_rx.recv_timeout(left).is_err() {
            eprintln!("landwall-drain: the job's output did not end; the rest of it is lost");
            break;
        }
    }
    if log_full.load(Ordering::SeqCst) {
        if let Some(cap) = keep.log_max {
            // The daemon names the cap in the job's result.
            if status
                .write_all(format!("cap: log {} reached", size_text(cap)).as_bytes())
                .is_err()
            {
                eprintln!("landwall-drain: could not report the log cap to the daemon");
            }
        }
    }
    Ok(ended)
}

/// The child: dies with the keeper, joins the job's cgroup, takes its rlimits, points its
/// output at the pipe, and runs the job (which walls itself in and execs).
fn job_side(
    keep: &Keep<'_>,
    keeper: Pid,
    [out, err]: [std::os::fd::BorrowedFd<'_>; 2],
    job: impl FnOnce() -> i32,
) -> i32 {
    let fail = |why: String| {
        eprintln!("landwall-drain: job not started: {why}");
        landwall::exit::WALL
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        return fail(format!("setting the parent-death signal: {e}"));
    }
    if nix::unistd::getppid() != keeper {
        return fail("its keeper is gone".into());
    }
    if let Some(cg) = keep.cgroup {
        if let Err(e) = join_cgroup(cg) {
            return fail(format!("joining its cgroup {}: {e}", cg.display()));
        }
    }
    if let Some(v) = keep.rlimit_nproc {
        if let Err(e) = setrlimit(Resource::RLIMIT_NPROC, v, v) {
            return fail(format!("setting RLIMIT_NPROC to {v}: {e}"));
        }
    }
    // dup2 leaves the new descriptors without close-on-exec: the job's stdout and stderr.
    if let Err(e) = nix::unistd::dup2_stdout(out).and_then(|()| nix::unistd::dup2_stderr(err)) {
        return fail(format!("pointing its output at the keeper: {e}"));
    }
    job()
}

/// Moves this process into the cgroup `dir` (writing 0 to its `cgroup.procs`).
fn join_cgroup(dir: &Path) -> io::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.procs"))?;
    f.write_all(b"0\n")
}

/// SIGTERM: passed on to every process of the job. SIGUSR1 (the daemon's kill, and the
/// parent-death signal): the job's process is killed; the main thread then ends the rest.
fn watch_signals(child: Pid, done: Arc<AtomicBool>) -> io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM, SIGUSR1};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGUSR1])?;
    nix::sys::prctl::set_pdeathsig(Signal::SIGUSR1).map_err(io::Error::from)?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if done.load(Ordering::SeqCst) {
                    continue;
                }
                if sig == SIGUSR1 {
                    signal(child, Signal::SIGKILL);
                } else {
                    term_all();
                }
            }
        })?;
    Ok(())
}

/// Sends `sig` to `pid`; a process already gone is no error.
fn signal(pid: Pid, sig: Signal) {
    match kill(pid, sig) {
        Ok(()) | Err(Errno::ESRCH) => {}
        Err(e) => eprintln!("landwall-drain: signalling {pid} with {sig}: {e}"),
    }
}

/// Which of the keeper's own descriptors a pipe of the job's is copied to (the daemon points
/// both at the job's log).
#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

/// Copies one of the job's output pipes to the keeper's descriptor of the same name, while
/// the job's output in all (`written`, shared by both) stays within `cap` bytes; past it,
/// writes one line saying so, kills the job's process (the main thread ends the rest) and
/// reads on to the end, dropping what comes. A log that cannot be written (a full disk)
/// is not retried: what follows is dropped too, and the job runs on.
fn copy_output(
    out: OwnedFd,
    to: Stream,
    cap: Option<u64>,
    written: &AtomicU64,
    child: Pid,
    log_full: &AtomicBool,
) {
    let mut pipe = File::from(out);
    // A descriptor of its own for the log, not the stdio lock: held across a blocking read,
    // the lock would stop every other thread's message (a job that kept the pipe open hung
    // its keeper that way).
    let fd = match to {
        Stream::Stdout => io::stdout().as_fd().try_clone_to_owned(),
        Stream::Stderr => io::stderr().as_fd().try_clone_to_owned(),
    };
    let mut log = match fd {
        Ok(fd) => File::from(fd),
        Err(e) => {
            eprintln!("landwall-drain: the job's log: {e}; its output is dropped");
            return drain_to_end(&mut pipe);
        }
    };
    let mut writable = true;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                eprintln!("landwall-drain: reading the job's output: {e}");
                return;
            }
        };
        if !writable || log_full.load(Ordering::SeqCst) {
            continue;
        }
        // Takes its share of what is left under the cap, in one step with the other pipe's.
        let wanted = n as u64;
        let before = written
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                Some(w + cap.map_or(wanted, |c| c.saturating_sub(w).min(wanted)))
            })
            .unwrap_or(0);
        let room = cap.map_or(wanted, |c| c.saturating_sub(before));
        let take = usize::try_from(room.min(wanted)).unwrap_or(n);
        if let Err(e) = log.write_all(&buf[..take]) {
            writable = false;
            eprintln!(
                "landwall-drain: writing the job's log: {e}; dropping the rest of its output"
            );
            continue;
        }
        if take < n {
            log_full.store(true, Ordering::SeqCst);
            if let Some(c) = cap {
                let line = format!(
                    "\nlandwall-drain: the job's log reached its cap ({}); the rest of its output is dropped and the job is ended\n",
                    size_text(c)
                );
                if log.write_all(line.as_bytes()).is_err() {
                    writable = false;
                }
            }
            signal(child, Signal::SIGKILL);
        }
    }
}

/// Reads the pipe to its end, dropping what comes.
fn drain_to_end(pipe: &mut File) {
    let mut buf = [0u8; 64 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Reaps every child until the job's own process ends; returns how it ended. Orphans the
/// keeper inherits meanwhile are reaped as they exit.
fn wait_for(child: Pid) -> Ended {
    loop {
        match waitpid(None::<Pid>, None) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ended::Code(code),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                return Ended::Signal(sig as i32)
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => {
                // ECHILD: the job is not our child any more, which cannot happen; report a
                // failure rather than wait for ever.
                eprintln!("landwall-drain: waiting for the job: {e}");
                return Ended::Code(landwall::exit::WALL);
            }
        }
    }
}

/// Ends every descendant of the keeper and reaps it; returns how many were still alive
/// when it gave up (0: all gone).
///
/// Each round stops the processes top-down before reading their children: a stopped
/// process cannot fork, so once it is seen stopped its list of children is complete, and a
/// fork loop cannot outrun the walk. Each process is held by a pidfd opened while it was
/// seen to be a child of the one above it, so no signal can reach a process that merely got
/// a freed number. What is found is killed; processes orphaned meanwhile come to the keeper
/// (the subreaper) and are found by the next round.
fn kill_tree() -> usize {
    let deadline = Instant::now() + KILL_PATIENCE;
    loop {
        reap_exited();
        let found = stop_all();
        if found.is_empty() {
            return 0;
        }
        for p in &found {
            p.send(Signal::SIGKILL);
        }
        if Instant::now() >= deadline {
            return found.len();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A process of the job, held by a pidfd: signals sent through it reach that process and no
/// other, even if its number is freed and given to another process meanwhile.
struct Held {
    pid: Pid,
    fd: OwnedFd,
}

impl Held {
    /// Opens a pidfd for `pid` and keeps it only if the process is still a child of
    /// `parent` (or, reparented, of the keeper): checked after the open, so the check and
    /// every later signal are about the same process.
    fn child(parent: Pid, pid: Pid) -> Option<Held> {
        let fd = sys::pidfd_open(pid.as_raw()).ok()?;
        let me = Pid::this().as_raw();
        // A leader that shows `Z` may still have live threads (it ended its main thread
        // alone): it is held, stopped and killed like any other.
        crate::procs::stat(pid.as_raw().unsigned_abs())
            .is_some_and(|s| s.ppid == parent.as_raw() || s.ppid == me)
            .then_some(Held { pid, fd })
    }

    fn send(&self, sig: Signal) {
        match sys::pidfd_send_signal(self.fd.as_fd(), sig as i32) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            Err(e) => eprintln!("landwall-drain: signalling {} with {sig}: {e}", self.pid),
        }
    }
}

/// Stops every live descendant of the keeper, top-down; returns them, held.
fn stop_all() -> Vec<Held> {
    let mut found = Vec::new();
    let me = Pid::this();
    let mut frontier: Vec<(Pid, Pid)> = children(me).into_iter().map(|c| (me, c)).collect();
    while let Some((parent, pid)) = frontier.pop() {
        let Some(held) = Held::child(parent, pid) else {
            continue;
        };
        held.send(Signal::SIGSTOP);
        wait_stopped(pid);
        frontier.extend(children(pid).into_iter().map(|c| (pid, c)));
        found.push(held);
    }
    found
}

/// SIGTERM to every process of the job: stopped first (so that the set is complete), sent
/// SIGTERM, and let go on.
fn term_all() {
    let found = stop_all();
    for p in &found {
        p.send(Signal::SIGTERM);
    }
    for p in &found {
        p.send(Signal::SIGCONT);
    }
}

/// Reaps the children that have exited, without waiting.
fn reap_exited() {
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Waits (a little) until every thread of `pid` is stopped, traced, dead or gone: a leader
/// that ended its main thread shows `Z` while its other threads still run (and fork).
fn wait_stopped(pid: Pid) {
    let until = Instant::now() + STOP_PATIENCE;
    let tasks = format!("/proc/{pid}/task");
    loop {
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return;
        };
        let running = entries.flatten().any(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .ok()
                .and_then(|text| crate::procs::parse_stat(&text))
                .is_some_and(|s| !matches!(s.state, 'T' | 't' | 'Z' | 'X'))
        });
        if !running || Instant::now() >= until {
            return;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// The children of `pid`, from `/proc/PID/task/*/children` (every thread: an orphan is handed
/// to any live thread of its subreaper, and a thread's children are listed under it), or from
/// a scan of `/proc` where the kernel lacks that file (CONFIG_PROC_CHILDREN). Zombies are
/// kept: one may be a leader whose other threads still run; a true one is reaped by its
/// parent once that is killed.
fn children(pid: Pid) -> Vec<Pid> {
    let tasks = format!("/proc/{pid}/task");
    let Ok(entries) = std::fs::read_dir(&tasks) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut listed = false;
    for e in entries.flatten() {
        if let Ok(text) = std::fs::read_to_string(e.path().join("children")) {
            listed = true;
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok())
                    .map(Pid::from_raw),
            );
        }
    }
    if !listed {
        out = children_by_scan(pid);
    }
    out
}

/// The children of `pid` by their parent field in `/proc/*/stat`.
fn children_by_scan(pid: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| crate::procs::stat(*p).is_some_and(|s| s.ppid == pid.as_raw()))
        .filter_map(|p| i32::try_from(p).ok())
        .map(Pid::from_raw)
        .collect()
}
