//! The launch sequence: sanitise, then drop capabilities, set no_new_privs, check that the
//! process is single-threaded, restrict with Landlock, and only then `execve()`.
//!
//! The order lives in [`wall_and_exec`], over a [`Kernel`] seam, so that a unit test can
//! check it without root or a kernel: a failing step stops the sequence and exec is never
//! reached. The function that execs returns the error it got; it never returns success.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::caps::CapsError;
use crate::config::Terminals;
use crate::ns::NsError;
use crate::policy::{Policy, Quarantine};
use crate::protect::{Held, Protection};
use crate::seccomp::{self, SeccompError};
use crate::wall::{Enforced, UnixGuard, WallError};
use crate::{sys, Error};

/// A program ready to exec: everything converted to C strings before the wall goes up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    /// The path to execute.
    pub program: PathBuf,
    path_c: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
}

impl Exec {
    /// Prepares `program` with `argv` (bytes as given; argv[0] included) and `env`.
    pub fn new(
        program: &Path,
        argv: &[OsString],
        env: &[(OsString, OsString)],
    ) -> Result<Exec, Error> {
        let nul = |what: &str| Error::Exec {
            path: program.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{what} contains a NUL byte"),
            ),
        };
        let path_c = CString::new(program.as_os_str().as_bytes()).map_err(|_| nul("the path"))?;
        let argv = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| nul("an argument"))?;
        let envp = env
            .iter()
            .map(|(k, v)| {
                let mut kv = Vec::with_capacity(k.len() + v.len() + 1);
                kv.extend_from_slice(k.as_bytes());
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                CString::new(kv)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| nul("an environment variable"))?;
        Ok(Exec {
            program: program.to_path_buf(),
            path_c,
            argv,
            envp,
        })
    }

    /// This exec with `name` set to `value` (replaced where it is set).
    pub fn with_var(&self, name: &str, value: &OsStr) -> Result<Exec, Error> {
        let mut kv = format!("{name}=").into_bytes();
        kv.extend_from_slice(value.as_bytes());
        let kv = CString::new(kv).map_err(|_| Error::Exec {
            path: self.program.clone(),
            source: io::Error::new(
                io::ErrorKind::InvalidInput,
                "an environment variable contains a NUL byte",
            ),
        })?;
        let mut e = self.clone();
        let prefix = format!("{name}=");
        e.envp
            .retain(|c| !c.as_bytes().starts_with(prefix.as_bytes()));
        e.envp.push(kv);
        Ok(e)
    }

    /// The environment as `NAME=value` strings (for tests and `landwall policy`).
    pub fn env(&self) -> impl Iterator<Item = &OsStr> {
        self.envp.iter().map(|c| OsStr::from_bytes(c.as_bytes()))
    }
}

/// The privileged steps of a launch, one method each, so the order can be tested.
pub trait Kernel {
    /// Empties the capability sets (the bounding set only with CAP_SETPCAP, see caps.rs).
    fn drop_capabilities(&mut self) -> Result<(), CapsError>;
    /// Sets no_new_privs.
    fn set_no_new_privs(&mut self) -> io::Result<()>;
    /// Number of threads in this process.
    fn thread_count(&mut self) -> io::Result<usize>;
    /// Starts the watcher (outside the wall that follows; it walls itself in at `min_abi`,
    /// the launch's own minimum): it moves a linked worktree's quarantined objects and
    /// sweeps the protected paths in `sweep` that appear.
    fn watch(
        &mut self,
        quarantine: Option<&Quarantine>,
        sweep: &Protection,
        min_abi: u32,
    ) -> io::Result<()>;
    /// Enters the private mount namespace: with a quarantine, it is the object store there;
    /// the `held` protected paths are bound onto themselves; with `pts`, `/dev/pts` is a
    /// private instance; with `tmp`, `/tmp` and `/dev/shm` are fresh tmpfs of that size.
    /// Returns whether the `/dev/pts` instance is up.
    fn private_namespace(
        &mut self,
        quarantine: Option<&Quarantine>,
        held: &[Held],
        pts: bool,
        tmp: Option<u64>,
    ) -> Result<bool, NsError>;
    /// Says, on stderr, what the launch goes on without.
    fn note(&mut self, text: &str);
    /// Applies the Landlock ruleset.
    fn restrict(&mut self, policy: &Policy) -> Result<Enforced, WallError>;
    /// Installs the seccomp filter, which refuses Unix sockets when Landlock did not take
    /// them (`enforced.unix`).
    fn filter_syscalls(&mut self, policy: &Policy, enforced: &Enforced)
        -> Result<(), SeccompError>;
    /// Checks from inside that the wall is up; the error says which check passed that
    /// should not have.
    fn self_check(&mut self) -> Result<(), String>;
    /// Replaces the process; returns only on failure.
    fn exec(&mut self, exec: &Exec) -> io::Error;
}

/// Walls the process in and execs. Returns only on failure, with the step that failed.
///
/// 1. single-threaded (a new namespace needs it, and before ABI 8 a thread that exists now
///    would stay unrestricted by Landlock);
/// 2. the watcher started, outside everything that follows (it drops its own capabilities
///    and walls itself in): it sets aside the protected paths the agent creates and the
///    submodules it makes or changes, and moves a linked worktree's quarantined objects;
///    then the private mount namespace, in which the protected paths that exist are
///    read-only, a linked worktree's object store is its quarantine and `/dev/pts` is a
///    private instance. If the kernel refuses the namespace, the launch stops under
///    `protect_required`, and otherwise says on stderr what it leaves writable;
/// 3. capabilities dropped (all five sets, bounding first; after a new user namespace,
///    which grants a full set inside it);
/// 4. no_new_privs set (so no exec can regain privilege, and Landlock may be applied);
/// 5. Landlock ruleset fully enforced at or above the minimum ABI;
/// 6. seccomp filter (see [`seccomp`]: Unix sockets where Landlock cannot refuse them by
///    path, io_uring, keyrings, terminal input; MPTCP when TCP rules are set);
/// 7. self-check from inside: a path outside the grant is refused, no_new_privs is 1, every
///    capability set is empty, the filter answers, and the quarantine's watcher started;
/// 8. `execve()`.
pub fn wall_and_exec<K: Kernel>(kernel: &mut K, policy: &Policy, exec: &Exec) -> Error {
    match kernel.thread_count() {
        Ok(1) => {}
        Ok(n) => return Error::Threads(Some(n), None),
        Err(e) => return Error::Threads(None, Some(e)),
    }
    let sweep = &policy.protection;
    let held = &policy.protection.held;
    if policy.quarantine.is_some()
        || !sweep.absent.is_empty()
        || sweep.submodules.is_some()
        || !sweep.guards.is_empty()
    {
        if let Err(e) = kernel.watch(policy.quarantine.as_ref(), sweep, policy.min_abi) {
            return Error::Watcher(e);
        }
    }
    let own_pts = policy.terminals == Terminals::Own;
    let mut private_pts = false;
    let tmp = policy.private_tmp;
    // A drain job whose namespace is refused: its own directory for /tmp and /dev/shm.
    let mut own_tmp: Option<&Path> = None;
    if policy.quarantine.is_some() || own_pts || !held.is_empty() || tmp.is_some() {
        match kernel.private_namespace(policy.quarantine.as_ref(), held, own_pts, tmp) {
            Ok(pts) => private_pts = pts,
            Err(NsError::Refused(e)) => match (exposed_without_namespace(policy), tmp) {
                (Some(_), _) | (_, Some(_)) if policy.protect_required => {
                    return Error::Namespace(NsError::Refused(e))
                }
                (what, tmp) if what.is_some() || tmp.is_some() => {
                    let mut lost = Vec::new();
                    if let Some(what) = what {
                        lost.push(format!("{what} writable by the agent this time"));
                    }
                    // A drain job's: said in its log, never silent.
                    match (tmp, &policy.own_tmp_dir) {
                        (Some(_), Some(dir)) => {
                            own_tmp = Some(dir);
                            lost.push(format!("/tmp and /dev/shm are not granted: TMPDIR is the job's own directory {}, removed with it, and not size-capped", dir.display()));
                        }
                        (Some(_), None) => lost.push("/tmp and /dev/shm are the host's, not a tmpfs of the job's own (what it leaves there outlives it)".to_string()),
                        _ => {}
                    }
                    kernel.note(&format!(
                        "no private mount namespace here ({e}), so {}; set protect_required = true to refuse to launch instead",
                        lost.join(", and ")
                    ));
                }
                // Only the private /dev/pts was asked for: without it the agent gets no
                // pseudo-terminal but its own (below), which `doctor` reports.
                _ => {}
            },
            Err(e) => return Error::Namespace(e),
        }
    }
    // Without a private /dev/pts the user's, which holds their other terminals, is not
    // granted: the agent keeps its own terminal (`/dev/tty`, its descriptors), and opens no
    // new pseudo-terminal.
    let narrowed;
    let policy = if own_pts && !private_pts {
        narrowed = policy.without_pseudo_terminals();
        &narrowed
    } else {
        policy
    };
    let (with_tmp, exec_tmp);
    let (policy, exec) = match own_tmp {
        Some(dir) => {
            with_tmp = policy.with_own_tmp(dir);
            exec_tmp = match exec.with_var("TMPDIR", dir.as_os_str()) {
                Ok(e) => e,
                Err(e) => return e,
            };
            (&with_tmp, &exec_tmp)
        }
        None => (policy, exec),
    };
    if let Err(e) = kernel.drop_capabilities() {
        return Error::Caps(e);
    }
    if let Err(e) = kernel.set_no_new_privs() {
        return Error::NoNewPrivs(e);
    }
    let enforced = match kernel.restrict(policy) {
        Ok(enforced) => enforced,
        Err(e) => return Error::Wall(e),
    };
    if let Err(e) = kernel.filter_syscalls(policy, &enforced) {
        return Error::Seccomp(e);
    }
    if let Err(e) = kernel.self_check() {
        return Error::SelfCheck(e);
    }
    let source = kernel.exec(exec);
    Error::Exec {
        path: exec.program.clone(),
        source,
    }
}

/// What the private mount namespace would have kept unchangeable, in words (`the objects of
/// … and the protected paths .git/config, … are`), or `None` if nothing.
pub fn exposed_without_namespace(policy: &Policy) -> Option<String> {
    let held: Vec<String> = policy
        .protection
        .held
        .iter()
        .filter(|h| {
            h.hold.read_only()
                || matches!(
                    h.hold,
                    crate::protect::Hold::Fresh
                        | crate::protect::Hold::Private
                        | crate::protect::Hold::Layer
                        | crate::protect::Hold::Own
                )
        })
        .map(|h| {
            h.path
                .strip_prefix(&policy.worktree.root)
                .unwrap_or(&h.path)
                .display()
                .to_string()
        })
        .collect();
    let paths = match held.len() {
        0 => None,
        1..=4 => Some(format!("the protected paths {}", held.join(", "))),
        n => Some(format!(
            "the protected paths {} and {} more",
            held[..3].join(", "),
            n - 3
        )),
    };
    match (&policy.quarantine, paths) {
        (None, None) => None,
        (Some(q), None) => Some(format!("the objects of {} are", q.objects.display())),
        (None, Some(p)) => Some(format!("{p} are")),
        (Some(q), Some(p)) => Some(format!(
            "the objects of {} and {p} are",
            q.objects.display()
        )),
    }
}

/// Marks every inherited descriptor above 2 close-on-exec. Done first, before anything
/// else is opened, so that no descriptor the parent leaked reaches the agent.
pub fn sanitize_fds() -> io::Result<()> {
    match sys::close_range_cloexec(3) {
        Ok(()) => Ok(()),
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EINVAL)) => {
            // Kernels before 5.11: walk /proc/self/fd. Collect first: the directory's own
            // descriptor appears in the listing.
            let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
                .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .filter(|&fd| fd > 2)
                .collect();
            for fd in fds {
                match sys::set_cloexec(fd) {
                    Ok(()) => {}
                    // The read_dir descriptor, closed since.
                    Err(e) if e.raw_os_error() == Some(libc::EBADF) => {}
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// What the self-check reads back: the fields of `/proc/self/status` it would show, asked of
/// the kernel with one system call each (`capget`, `PR_GET_NO_NEW_PRIVS`, `PR_GET_SECCOMP`, and
/// one `prctl` per capability for the ambient and bounding sets), which on a fresh process is
/// cheaper than procfs's lookup and generation of the file. [`ProcStatus::parse`] reads the
/// same fields from the file's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStatus {
    /// `NoNewPrivs`.
    pub no_new_privs: u8,
    /// `Seccomp` (2: filter mode).
    pub seccomp: u8,
    /// `CapInh`, `CapPrm`, `CapEff`, `CapBnd`, `CapAmb`.
    pub caps: [u64; 5],
}

const CAP_FIELDS: [&str; 5] = ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"];

impl ProcStatus {
    /// Parses the text of `/proc/<pid>/status`; a missing field is an error.
    pub fn parse(text: &str) -> Result<ProcStatus, String> {
        let field = |name: &str| -> Result<&str, String> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
                .ok_or_else(|| format!("no {name} in /proc/self/status"))
        };
        let small = |name: &str| -> Result<u8, String> {
            field(name)?.parse().map_err(|e| format!("{name}: {e}"))
        };
        let mut caps = [0u64; 5];
        for (slot, name) in caps.iter_mut().zip(CAP_FIELDS) {
            *slot = u64::from_str_radix(field(name)?, 16).map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(ProcStatus {
            no_new_privs: small("NoNewPrivs")?,
            seccomp: small("Seccomp")?,
            caps,
        })
    }

    /// Passes only if no_new_privs is set, a seccomp filter is installed if one was
    /// (`filtered`), and every capability set is empty (the bounding set only if it could be
    /// dropped).
    pub fn check(&self, bounding_dropped: bool, filtered: bool) -> Result<(), String> {
        if self.no_new_privs != 1 {
            return Err("no_new_privs is 0".into());
        }
        if filtered && self.seccomp != 2 {
            return Err("no seccomp filter is installed".into());
        }
        for (value, name) in self.caps.iter().zip(CAP_FIELDS) {
            if *value != 0 && (name != "CapBnd" || bounding_dropped) {
                return Err(format!("{name} is {value:016x}, not empty"));
            }
        }
        Ok(())
    }
}

/// The text of `/proc/self/status`, in one `read` of a buffer large enough for it (about
/// 1.5 KiB). `std::fs::read_to_string` would first `statx` the file (whose size reads 0 on
/// procfs) and then read it in chunks of 32, 64, 128 bytes and up: eight system calls.
fn read_proc_status() -> io::Result<String> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(4096);
    std::fs::File::open("/proc/self/status")?.read_to_end(&mut buf)?;
    String::from_utf8(buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The fields of [`ProcStatus`] asked of the kernel directly. The bounding set is read only
/// if it was dropped (otherwise it is reported full, and [`ProcStatus::check`] ignores it).
/// The ambient set is not read: the kernel keeps it a subset of the permitted and
/// inheritable sets (capabilities(7)), so it is empty whenever they are, which `check`
/// requires; it is reported as their intersection.
fn status_from_syscalls(bounding: bool) -> io::Result<ProcStatus> {
    let bits = |read: &dyn Fn(u32) -> io::Result<bool>| -> io::Result<u64> {
        let mut set = 0u64;
        for cap in 0..64 {
            match read(cap) {
                Ok(true) => set |= 1 << cap,
                Ok(false) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => break,
                Err(e) => return Err(e),
            }
        }
        Ok(set)
    };
    let [eff, prm, inh] = sys::capget()?;
    let bnd = if bounding {
        bits(&sys::capbset_read)?
    } else {
        u64::MAX
    };
    let amb = prm & inh;
    Ok(ProcStatus {
        no_new_privs: u8::from(nix::sys::prctl::get_no_new_privs()?),
        seccomp: u8::try_from(sys::seccomp_mode()?).unwrap_or(u8::MAX),
        caps: [inh, prm, eff, bnd, amb],
    })
}

/// The real kernel.
#[derive(Debug, Default)]
pub struct LiveKernel {
    /// Whether the bounding set was dropped (it cannot be without CAP_SETPCAP, which only a
    /// process holding no capability at all lacks).
    bounding_dropped: bool,
    /// The filter installed, if one was.
    filtered: Option<seccomp::Refuse>,
    /// The watcher, waited for by the self-check: its start (its fork, its own wall, its
    /// look at the worktree) overlaps the wall's own steps.
    watcher: Option<crate::watcher::Ready>,
    /// The private copies the namespace made, for the watcher ([`crate::protect::Hold::Private`]).
    privates: Vec<(usize, std::os::fd::OwnedFd)>,
}

impl Kernel for LiveKernel {
    fn drop_capabilities(&mut self) -> Result<(), CapsError> {
        self.bounding_dropped = crate::caps::drop_all()?;
        Ok(())
    }

    fn set_no_new_privs(&mut self) -> io::Result<()> {
        nix::sys::prctl::set_no_new_privs()?;
        if nix::sys::prctl::get_no_new_privs()? {
            Ok(())
        } else {
            Err(io::Error::other(
                "PR_GET_NO_NEW_PRIVS reads 0 after setting it",
            ))
        }
    }

    fn thread_count(&mut self) -> io::Result<usize> {
        // The kernel's own answer first (one system call); the count, for the message, only
        // when it says no.
        if sys::single_threaded()? {
            return Ok(1);
        }
        let status = read_proc_status()?;
        let n = status
            .lines()
            .find_map(|l| l.strip_prefix("Threads:"))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| io::Error::other("no Threads: line in /proc/self/status"))?;
        if n > 1 {
            Ok(n)
        } else {
            Err(io::Error::other(
                "the address space is shared with another process (CLONE_VM)",
            ))
        }
    }

    fn watch(
        &mut self,
        quarantine: Option<&Quarantine>,
        sweep: &Protection,
        min_abi: u32,
    ) -> io::Result<()> {
        let mut ready = crate::watcher::start(quarantine, sweep, min_abi)?;
        // After a launch that did not finish, the start is judged before the namespace
        // binds the protected paths (what it sets aside is not there to bind).
        ready.judged().map_err(io::Error::other)?;
        self.watcher = Some(ready);
        Ok(())
    }

    fn private_namespace(
        &mut self,
        quarantine: Option<&Quarantine>,
        held: &[Held],
        pts: bool,
        tmp: Option<u64>,
    ) -> Result<bool, NsError> {
        let entered =
            crate::ns::enter(quarantine, held, pts, tmp, nix::unistd::geteuid().is_root())?;
        self.privates = entered.privates;
        Ok(entered.pts)
    }

    fn note(&mut self, text: &str) {
        eprintln!("landwall: note: {}", crate::spool::printable(text));
    }

    fn restrict(&mut self, policy: &Policy) -> Result<Enforced, WallError> {
        crate::wall::restrict(policy)
    }

    fn filter_syscalls(
        &mut self,
        policy: &Policy,
        enforced: &Enforced,
    ) -> Result<(), SeccompError> {
        let refuse = seccomp::Refuse {
            unix_sockets: enforced.unix == UnixGuard::Seccomp,
            mptcp: policy.network.is_restricted(),
            setgid: nix::unistd::geteuid().is_root(),
        };
        // A watcher with a record waits for the last process of the agent's tree, not only
        // the agent's own: it takes the filter's listener, which hangs up only then.
        match self.watcher.as_mut() {
            Some(w) if w.needs_listener() => {
                let listener = seccomp::install_with_listener(refuse)?;
                w.give_listener(Some(listener), std::mem::take(&mut self.privates))
                    .map_err(SeccompError::Listener)?;
            }
            Some(w) => {
                seccomp::install(refuse)?;
                w.give_listener(None, std::mem::take(&mut self.privates))
                    .map_err(SeccompError::Listener)?;
            }
            None => seccomp::install(refuse)?,
        }
        self.filtered = Some(refuse);
        Ok(())
    }

    fn self_check(&mut self) -> Result<(), String> {
        // The watcher is part of the wall: without it ready, the agent does not start.
        if let Some(watcher) = self.watcher.take() {
            watcher.wait()?;
        }
        // Landlock: `/` itself is never granted (configuration cannot name it), so listing
        // it must be refused.
        match std::fs::read_dir("/") {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {}
            Ok(_) => return Err("`/` is readable".into()),
            Err(e) => return Err(format!("listing `/` failed unexpectedly: {e}")),
        }
        let status = status_from_syscalls(self.bounding_dropped).map_err(|e| e.to_string())?;
        status.check(self.bounding_dropped, self.filtered.is_some())?;
        let Some(refuse) = self.filtered else {
            return Err("the seccomp filter was not installed".into());
        };
        // The filter must answer a high-bits TIOCSTI before the kernel (EBADF) would …
        let errno = sys::ioctl_probe_errno(u64::from(seccomp::TIOCSTI) | 1 << 32);
        if errno != Some(libc::EPERM) {
            return Err(format!("TIOCSTI is not filtered (errno {errno:?})"));
        }
        // … and refuse a Unix socket when it is the guard.
        if refuse.unix_sockets {
            let errno = sys::unix_socket_probe_errno();
            if errno != Some(seccomp::UNIX_ERRNO) {
                return Err(format!("Unix sockets are not filtered (errno {errno:?})"));
            }
        }
        Ok(())
    }

    fn exec(&mut self, exec: &Exec) -> io::Error {
        if let Err(e) = sys::default_sigpipe() {
            return e;
        }
        match nix::unistd::execve(&exec.path_c, &exec.argv, &exec.envp) {
            Err(errno) => io::Error::from(errno),
            Ok(never) => match never {},
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::policy::{build, Inputs};
    use crate::worktree::{GitLayout, Worktree};

    /// Records the steps; fails the one named in `fail_at`.
    struct Recorder {
        steps: Vec<&'static str>,
        fail_at: Option<&'static str>,
        threads: usize,
    }

    impl Recorder {
        fn step(&mut self, name: &'static str) -> bool {
            self.steps.push(name);
            self.fail_at == Some(name)
        }
    }

    impl Kernel for Recorder {
        fn drop_capabilities(&mut self) -> Result<(), CapsError> {
            if self.step("caps") {
                return Err(CapsError::StillHeld { set: "permitted" });
            }
            Ok(())
        }
        fn set_no_new_privs(&mut self) -> io::Result<()> {
            if self.step("nnp") {
                return Err(io::Error::other("nnp"));
            }
            Ok(())
        }
        fn thread_count(&mut self) -> io::Result<usize> {
            self.step("threads");
            Ok(self.threads)
        }
        fn watch(&mut self, _: Option<&Quarantine>, _: &Protection, _: u32) -> io::Result<()> {
            if self.step("watch") {
                return Err(io::Error::other("watch"));
            }
            Ok(())
        }
        fn private_namespace(
            &mut self,
            _: Option<&Quarantine>,
            _: &[Held],
            pts: bool,
            _: Option<u64>,
        ) -> Result<bool, NsError> {
            if self.step("ns") {
                return Err(NsError::Refused(io::Error::from_raw_os_error(libc::EPERM)));
            }
            Ok(pts)
        }
        fn note(&mut self, _: &str) {
            self.steps.push("note");
        }
        fn restrict(&mut self, _: &Policy) -> Result<Enforced, WallError> {
            if self.step("landlock") {
                return Err(WallError::AbiTooLow { have: 2, need: 3 });
            }
            Ok(Enforced {
                abi: 7,
                audit_new_exec: true,
                scoped: true,
                unix: UnixGuard::Seccomp,
            })
        }
        fn filter_syscalls(&mut self, _: &Policy, _: &Enforced) -> Result<(), SeccompError> {
            if self.step("seccomp") {
                return Err(SeccompError::Install(io::Error::other("test")));
            }
            Ok(())
        }
        fn self_check(&mut self) -> Result<(), String> {
            if self.step("selfcheck") {
                return Err("test".into());
            }
            Ok(())
        }
        fn exec(&mut self, _: &Exec) -> io::Error {
            self.steps.push("exec");
            io::Error::from_raw_os_error(libc::ENOENT)
        }
    }

    fn fixture() -> (Policy, Exec) {
        let config = Config::default();
        let policy = build(Inputs {
            agent: "claude",
            worktree: Worktree {
                root: std::env::temp_dir(),
                git: GitLayout::None,
            },
            home: None,
            real_agent: None,
            config: &config,
            is_root: false,
            link_cache: None,
        })
        .expect("policy");
        // The temp dir is nobody's worktree: what it holds must not change the steps.
        let policy = Policy {
            protection: crate::protect::Protection::default(),
            ..policy
        };
        let exec = Exec::new(Path::new("/bin/true"), &["claude".into()], &[]).expect("exec");
        (policy, exec)
    }

    /// Protected paths: the watcher (for the absent ones) and the namespace (for the held
    /// ones) come before the capabilities go, even with `terminals = "all"`; a refused
    /// namespace is said in a note, or stops the launch with `protect_required`.
    #[test]
    fn protected_paths_get_their_watcher_and_namespace_first() {
        let (mut policy, exec) = fixture();
        policy.terminals = crate::config::Terminals::All;
        policy.protection = crate::protect::Protection {
            held: vec![Held {
                path: "/w/.git/config".into(),
                hold: crate::protect::Hold::ReadOnly,
                is_dir: false,
                reason: "test".into(),
                store: None,
            }],
            submodules: None,
            absent: vec![crate::protect::Absent {
                path: "/w/.envrc".into(),
                base: "/w".into(),
                reason: "test".into(),
            }],
            ..Default::default()
        };
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 1,
        };
        wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(&k.steps[..4], ["threads", "watch", "ns", "caps"]);
        let mut k = Recorder {
            steps: vec![],
            fail_at: Some("ns"),
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert!(matches!(e, Error::Exec { .. }), "{e}");
        assert_eq!(&k.steps[..5], ["threads", "watch", "ns", "note", "caps"]);
        policy.protect_required = true;
        let mut k = Recorder {
            steps: vec![],
            fail_at: Some("ns"),
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(k.steps, ["threads", "watch", "ns"]);
        assert_eq!(e.exit_code(), crate::exit::WALL, "{e}");
    }

    /// Where a drain job's namespace is refused, its own directory takes the place of /tmp
    /// and /dev/shm in its wall, and is its TMPDIR.
    #[test]
    fn a_job_without_a_namespace_gets_its_own_tmp_dir_instead_of_tmp() {
        let (policy, exec) = fixture();
        let dir = Path::new("/tmp/landwall-job-1-a-b");
        let p = policy.with_own_tmp(dir);
        assert!(p.rules.iter().any(|r| r.path == dir && r.access.writes()));
        assert!(!p
            .rules
            .iter()
            .any(|r| r.path == Path::new("/tmp") || r.path == Path::new("/dev/shm")));
        assert!(p.decide(Path::new("/tmp/x")).rule.is_none());
        let e = exec.with_var("TMPDIR", dir.as_os_str()).expect("no NUL");
        let tmpdirs: Vec<_> = e
            .env()
            .filter(|kv| kv.as_encoded_bytes().starts_with(b"TMPDIR="))
            .collect();
        assert_eq!(
            tmpdirs,
            [std::ffi::OsStr::new("TMPDIR=/tmp/landwall-job-1-a-b")]
        );
    }

    /// A drain job's private /tmp asks for the namespace before the wall (whose rules then
    /// name the new tmpfs); refused, it is said in a note, or stops the launch with
    /// `protect_required`. The shim's launches ask for none.
    #[test]
    fn a_private_tmp_gets_the_namespace_before_the_wall_and_a_refusal_is_said() {
        let (mut policy, exec) = fixture();
        policy.terminals = crate::config::Terminals::All;
        assert_eq!(
            policy.private_tmp, None,
            "the shim's launches keep the host's /tmp"
        );
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 1,
        };
        wall_and_exec(&mut k, &policy, &exec);
        assert!(!k.steps.contains(&"ns"), "{:?}", k.steps);
        policy.private_tmp = Some(1 << 20);
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 1,
        };
        wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(&k.steps[..4], ["threads", "ns", "caps", "nnp"]);
        assert!(k.steps.contains(&"landlock"));
        let mut k = Recorder {
            steps: vec![],
            fail_at: Some("ns"),
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert!(matches!(e, Error::Exec { .. }), "{e}");
        assert_eq!(&k.steps[..4], ["threads", "ns", "note", "caps"]);
        policy.protect_required = true;
        let mut k = Recorder {
            steps: vec![],
            fail_at: Some("ns"),
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(k.steps, ["threads", "ns"]);
        assert_eq!(e.exit_code(), crate::exit::WALL, "{e}");
    }

    #[test]
    fn steps_run_in_order_and_exec_comes_last() {
        let (policy, exec) = fixture();
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(
            k.steps,
            [
                "threads",
                "ns",
                "caps",
                "nnp",
                "landlock",
                "seccomp",
                "selfcheck",
                "exec"
            ]
        );
        assert!(matches!(e, Error::Exec { .. }));
    }

    #[test]
    fn a_failing_step_stops_before_exec() {
        let (policy, exec) = fixture();
        for (fail, expect) in [
            ("caps", vec!["threads", "ns", "caps"]),
            ("nnp", vec!["threads", "ns", "caps", "nnp"]),
            ("landlock", vec!["threads", "ns", "caps", "nnp", "landlock"]),
            (
                "seccomp",
                vec!["threads", "ns", "caps", "nnp", "landlock", "seccomp"],
            ),
            (
                "selfcheck",
                vec![
                    "threads",
                    "ns",
                    "caps",
                    "nnp",
                    "landlock",
                    "seccomp",
                    "selfcheck",
                ],
            ),
        ] {
            let mut k = Recorder {
                steps: vec![],
                fail_at: Some(fail),
                threads: 1,
            };
            let e = wall_and_exec(&mut k, &policy, &exec);
            assert_eq!(k.steps, expect);
            assert!(!k.steps.contains(&"exec"));
            assert_eq!(e.exit_code(), crate::exit::WALL, "{fail}: {e}");
        }
    }

    /// The private /dev/pts (the default `terminals = "own"`) is made before the
    /// capabilities go; where it is refused, the launch goes on without a note, and without
    /// /dev/pts and /dev/ptmx in its wall. `terminals = "all"` needs no namespace.
    #[test]
    fn the_private_pts_namespace_comes_first_and_a_refusal_only_narrows() {
        let (mut policy, exec) = fixture();
        let mut k = Recorder {
            steps: vec![],
            fail_at: Some("ns"),
            threads: 1,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert!(matches!(e, Error::Exec { .. }), "{e}");
        assert!(!k.steps.contains(&"note"), "{:?}", k.steps);
        let narrowed = policy.without_pseudo_terminals();
        for p in crate::policy::PSEUDO_TERMINALS {
            assert!(policy.rules.iter().any(|r| r.path == Path::new(p)), "{p}");
            assert!(
                !narrowed.rules.iter().any(|r| r.path == Path::new(p)),
                "{p}"
            );
        }
        assert!(narrowed
            .rules
            .iter()
            .any(|r| r.path == Path::new("/dev/tty")));
        policy.terminals = crate::config::Terminals::All;
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 1,
        };
        wall_and_exec(&mut k, &policy, &exec);
        assert!(!k.steps.contains(&"ns"), "{:?}", k.steps);
    }

    #[test]
    fn a_linked_worktree_gets_its_watcher_and_namespace_before_the_capabilities_go() {
        let (mut policy, exec) = fixture();
        policy.quarantine = Some(Quarantine::of(
            Path::new("/r/.git/worktrees/w"),
            Path::new("/r/.git"),
        ));
        let run = |policy: &Policy, fail_at: Option<&'static str>| {
            let mut k = Recorder {
                steps: vec![],
                fail_at,
                threads: 1,
            };
            let e = wall_and_exec(&mut k, policy, &exec);
            (k.steps, e)
        };
        let (steps, _) = run(&policy, None);
        assert_eq!(
            steps,
            [
                "threads",
                "watch",
                "ns",
                "caps",
                "nnp",
                "landlock",
                "seccomp",
                "selfcheck",
                "exec"
            ]
        );
        let (steps, e) = run(&policy, Some("watch"));
        assert_eq!(steps, ["threads", "watch"]);
        assert_eq!(e.exit_code(), crate::exit::WALL);
        // A refused namespace: said, and the launch goes on ...
        let (steps, _) = run(&policy, Some("ns"));
        assert_eq!(
            steps,
            [
                "threads",
                "watch",
                "ns",
                "note",
                "caps",
                "nnp",
                "landlock",
                "seccomp",
                "selfcheck",
                "exec"
            ]
        );
        // ... unless it is required.
        policy.protect_required = true;
        let (steps, e) = run(&policy, Some("ns"));
        assert_eq!(steps, ["threads", "watch", "ns"]);
        assert_eq!(e.exit_code(), crate::exit::WALL);
    }

    #[test]
    fn a_second_thread_stops_before_landlock() {
        let (policy, exec) = fixture();
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
            threads: 2,
        };
        let e = wall_and_exec(&mut k, &policy, &exec);
        assert_eq!(k.steps, ["threads"]);
        assert_eq!(e.exit_code(), crate::exit::WALL);
    }

    const STATUS: &str = "Name:\tx\nThreads:\t1\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";

    #[test]
    fn self_check_reads_proc_status() {
        let ok = ProcStatus::parse(STATUS).expect("parse");
        assert_eq!(ok.check(true, true), Ok(()));
        for (from, to) in [
            ("NoNewPrivs:\t1", "NoNewPrivs:\t0"),
            ("Seccomp:\t2", "Seccomp:\t0"),
            ("CapEff:\t0000000000000000", "CapEff:\t0000000000000001"),
            ("CapAmb:\t0000000000000000", "CapAmb:\t0000000000200000"),
            ("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff"),
        ] {
            let bad = ProcStatus::parse(&STATUS.replace(from, to)).expect("parse");
            assert!(bad.check(true, true).is_err(), "{to} passed");
        }
        // A bounding set that could not be dropped (no CAP_SETPCAP, nothing permitted).
        let unprivileged = ProcStatus::parse(
            &STATUS.replace("CapBnd:\t0000000000000000", "CapBnd:\t000001ffffffffff"),
        )
        .expect("parse");
        assert_eq!(unprivileged.check(false, true), Ok(()));
        // No terminal filter installed (no terminal within reach): mode 0 passes, the
        // rest is checked as before.
        let unfiltered =
            ProcStatus::parse(&STATUS.replace("Seccomp:\t2", "Seccomp:\t0")).expect("parse");
        assert_eq!(unfiltered.check(true, false), Ok(()));
        let held = STATUS
            .replace("Seccomp:\t2", "Seccomp:\t0")
            .replace("CapPrm:\t0000000000000000", "CapPrm:\t0000000000000001");
        assert!(ProcStatus::parse(&held)
            .expect("parse")
            .check(true, false)
            .is_err());
        assert!(ProcStatus::parse("Name:\tx\n").is_err());
    }

    #[test]
    fn the_syscalls_read_what_proc_self_status_shows() {
        let text = read_proc_status().expect("read");
        let from_file = ProcStatus::parse(&text).expect("parse");
        let asked = status_from_syscalls(true).expect("ask");
        assert_eq!(asked, from_file);
    }

    #[test]
    fn a_second_thread_is_seen() {
        // The test harness may run this on a worker thread: either way the process has more
        // than one thread while `t` lives.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || rx.recv());
        assert!(!sys::single_threaded().expect("unshare"));
        assert!(LiveKernel::default().thread_count().expect("count") > 1);
        drop(tx);
        let _ignored = t.join();
    }

    #[test]
    fn exec_keeps_bytes() {
        let argv = [
            OsString::from("a b"),
            OsString::from(""),
            OsStr::from_bytes(b"\xff\xfe").to_os_string(),
        ];
        let env = [(OsString::from("K"), OsString::from("v=w"))];
        let e = Exec::new(Path::new("/x"), &argv, &env).expect("exec");
        assert_eq!(e.argv[2].as_bytes(), b"\xff\xfe");
        assert_eq!(e.env().collect::<Vec<_>>(), [OsStr::new("K=v=w")]);
    }
}
