//! The watcher of a launch: a process started just before the wall goes up, and so outside
//! it, that moves the objects the agent's git wrote into a linked worktree's quarantine
//! ([`Quarantine`]) into the repository, and that sweeps, once the agent has exited, the
//! protected paths that were absent at the start and that it created ([`sweep_absent`]).
//!
//! Invariants: the watcher is no child of the agent (it is detached into its own session,
//! so no program of the agent waits for it or sees it), it holds none of the agent's
//! descriptors but a pidfd of the agent's process and the caller's standard output and
//! error (see [`detach`]), it drops its capabilities and sets no_new_privs first thing, it stays outside the
//! agent's mount namespace (it is forked before it), it walls itself in to the object store
//! and what git needs ([`wall_self`]) before it reads anything, and everything it reads from the quarantine is checked by
//! [`crate::objects::migrate`] before anything enters the repository. The agent cannot
//! ptrace it (Landlock forbids tracing a process outside the domain) and, from ABI 6, cannot
//! signal it; below ABI 6, killing it leaves the objects in the quarantine for the next
//! launch's watcher, which moves them first: nothing is lost, only delayed.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use crate::policy::Quarantine;
use crate::protect::Absent;
use crate::sys;

/// How often the quarantine is emptied while the agent runs. A scan of an empty quarantine
/// is one directory read.
const PERIOD_MS: libc::c_int = 200;

/// Where the watcher looks for git (for packs) with its own, fixed PATH: never the agent's.
const GIT_CANDIDATES: &[&str] = &["/usr/bin/git", "/bin/git", "/usr/local/bin/git"];

/// Steps, in order: make the quarantine if it is missing (the watcher's wall names it);
/// take a pidfd of this process (the agent after exec); start the detached watcher. (The
/// quarantine is checked to be a directory by [`crate::ns::enter`]; the watcher opens it
/// without following a link.) Returns the pid of the short-lived child in between, for
/// [`sys::reap_detacher`] before exec. Returns once the watcher runs; it moves what an earlier launch left behind at
/// once, then what the agent writes every [`PERIOD_MS`] while it runs, and the rest when it
/// exits.
pub fn start(q: Option<&Quarantine>, sweep: &[Absent], min_abi: u32) -> io::Result<libc::pid_t> {
    if let Some(q) = q {
        // The watcher's wall names the quarantine, so it must exist before the watcher
        // starts (the namespace step, which also makes it, comes after). Made in the
        // worktree's git dir, opened with no symlink on the way; an existing one is left as
        // it is.
        let git_dir = std::ffi::CString::new(q.git_dir.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        let git_dir = sys::open_no_symlinks(None, &git_dir, libc::O_RDONLY | libc::O_DIRECTORY)?;
        match nix::sys::stat::mkdirat(
            &git_dir,
            crate::policy::QUARANTINE_DIR,
            nix::sys::stat::Mode::from_bits_truncate(0o777),
        ) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let pidfd = sys::pidfd_self()?;
    let watch = || watch(&pidfd, q, sweep, min_abi);
    sys::spawn_detached(watch)
}

/// The watcher's life: detach from everything of the agent's, move leftovers, wait for the
/// agent's exit, move what it wrote. Its exit status is seen by no one (the launch has
/// exec'd by then); failures are logged at debug level and the objects stay where they are.
fn watch(pidfd: &OwnedFd, q: Option<&Quarantine>, sweep: &[Absent], min_abi: u32) -> i32 {
    // Forked before the launch drops its capabilities: the watcher drops its own, and can
    // gain none by exec (it execs only git, for packs).
    if let Err(e) = crate::caps::drop_all() {
        log::debug!("quarantine watcher: {e}");
        return 1;
    }
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        log::debug!("quarantine watcher: no_new_privs: {e}");
        return 1;
    }
    if let Err(e) = detach(pidfd) {
        log::debug!("quarantine watcher: {e}");
        return 1;
    }
    // Its own wall: it parses what the agent wrote (zlib streams, packs through git), so a
    // flaw there must not reach beyond the object store. Without it, it does nothing: the
    // objects wait in the quarantine for a watcher that can wall itself.
    let enforced = match wall_self(q, sweep, min_abi) {
        Ok(enforced) => enforced,
        Err(e) => {
            log::debug!("quarantine watcher: its own wall: {e}");
            return 1;
        }
    };
    // It parses what the agent wrote: the agent's filter too, so that a watcher taken over
    // by a crafted object still reaches no server outside through a Unix socket.
    let refuse = crate::seccomp::Refuse {
        unix_sockets: enforced.unix == crate::wall::UnixGuard::Seccomp,
        mptcp: false,
        setgid: nix::unistd::geteuid().is_root(),
    };
    if let Err(e) = crate::seccomp::install(refuse) {
        log::debug!("quarantine watcher: its seccomp filter: {e}");
        return 1;
    }
    // Loose objects need no git; packs wait for a machine that has one.
    let git = GIT_CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .unwrap_or(Path::new("/nonexistent/git"));
    match q {
        Some(q) => migrate(q, git, pidfd, sweep),
        None => match sys::wait_readable(pidfd.as_fd(), -1) {
            Ok(_) => {
                report(&sweep_absent(sweep));
                0
            }
            Err(e) => {
                log::debug!("watcher: waiting for the agent: {e}");
                1
            }
        },
    }
}

/// Says on stderr what the sweep removed (nothing when nothing appeared).
fn report(removed: &[Swept]) {
    for s in removed {
        eprintln!("landwall: {}", crate::spool::printable(&s.to_string()));
    }
}

fn migrate(q: &Quarantine, git: &Path, pidfd: &OwnedFd, sweep: &[Absent]) -> i32 {
    let once =
        |when: &str, prune: bool| match crate::objects::migrate(&q.dir, &q.objects, git, prune) {
            Ok(m) => {
                for r in &m.rejected {
                    log::debug!("quarantine {}: {when}: kept back: {r}", q.dir.display());
                }
            }
            Err(e) => log::debug!("quarantine {}: {when}: {e}", q.dir.display()),
        };
    // Moved while the agent runs, too, so that what is left when it exits is at most what
    // it wrote in its last moments: the user's git in the main checkout, right after,
    // finds the commits.
    loop {
        once("while the agent runs", false);
        match sys::wait_readable(pidfd.as_fd(), PERIOD_MS) {
            Ok(false) => continue,
            Ok(true) => break,
            Err(e) => {
                log::debug!("quarantine watcher: waiting for the agent: {e}");
                return 1;
            }
        }
    }
    // The sweep first: it is what a command run right after the agent must not meet.
    report(&sweep_absent(sweep));
    once("after the agent", true);
    0
}

/// The watcher's own Landlock wall: the quarantine and the real store read-write; what git
/// needs to run (the system's programs and libraries, `/etc`, `/proc` for the store's
/// descriptor path it is given) read-only; `/dev/null`. Nothing of the worktree, `$HOME` or
/// `/tmp`. Fully enforced at `min_abi` (the launch's own minimum) or above, or an error.
pub fn wall_self(
    q: Option<&Quarantine>,
    sweep: &[Absent],
    min_abi: u32,
) -> Result<crate::wall::Enforced, crate::wall::WallError> {
    use crate::policy::{Access, Rule};
    let mut rules: Vec<Rule> = Vec::new();
    // Real paths already: opened without following any symlink.
    for path in q.iter().flat_map(|q| [&q.dir, &q.objects]) {
        if path.is_dir() {
            rules.push(Rule {
                path: path.clone(),
                access: Access::ReadWrite,
                is_dir: true,
                reason: "the object quarantine's watcher".into(),
            });
        }
    }
    // The sweep: the nearest directory that exists now on the way to each absent path,
    // from its base down (what the agent creates later lies beneath it).
    for a in sweep {
        let Some(dir) = nearest_existing_dir(a) else {
            continue;
        };
        if !rules.iter().any(|r| dir.starts_with(&r.path)) {
            rules.retain(|r| !r.path.starts_with(&dir));
            rules.push(Rule {
                path: dir,
                access: Access::ReadWrite,
                is_dir: true,
                reason: "the protected paths' sweep".into(),
            });
        }
    }
    for (path, access, is_dir) in [
        ("/dev/null", Access::ReadWrite, false),
        ("/usr", Access::ReadOnly, true),
        ("/etc", Access::ReadOnly, true),
        ("/proc", Access::ReadOnly, true),
        ("/bin", Access::ReadOnly, true),
        ("/sbin", Access::ReadOnly, true),
        ("/lib", Access::ReadOnly, true),
        ("/lib32", Access::ReadOnly, true),
        ("/lib64", Access::ReadOnly, true),
        ("/libx32", Access::ReadOnly, true),
    ] {
        // A merged-/usr link (`/bin` → `usr/bin`) is covered by `/usr` itself.
        let plain = std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_symlink());
        if plain {
            rules.push(Rule {
                path: path.into(),
                access,
                is_dir,
                reason: "what git needs".into(),
            });
        }
    }
    crate::wall::restrict_rules(&rules, min_abi)
}

/// Standard input onto /dev/null, every descriptor above 2 but `keep` closed, cwd `/`.
/// Standard output and error are kept until the watcher exits, on purpose: a caller that
/// waits for the end of the agent's output (a pipeline, `$(…)`, a test harness) then gets
/// it only once the last objects are in the repository, so the commits an agent made just
/// before exiting are there when the caller looks. Nothing is written to them.
fn detach(keep: &OwnedFd) -> io::Result<()> {
    let null = fs::File::open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    drop(null);
    let k = keep.as_raw_fd();
    if k > 3 {
        sys::close_range(3, k - 1)?;
    }
    sys::close_range(k + 1, i32::MAX)?;
    std::env::set_current_dir("/")
}

/// The nearest directory that exists on the way from `a.base` to `a.path` (none if the base
/// itself is gone or is no plain directory), found without following a symlink.
fn nearest_existing_dir(a: &Absent) -> Option<std::path::PathBuf> {
    let rel = a.path.strip_prefix(&a.base).ok()?;
    let mut at = a.base.clone();
    if !fs::symlink_metadata(&at).is_ok_and(|m| m.is_dir()) {
        return None;
    }
    for c in rel.parent().into_iter().flat_map(Path::components) {
        let next = at.join(c);
        if fs::symlink_metadata(&next).is_ok_and(|m| m.is_dir()) {
            at = next;
        } else {
            break;
        }
    }
    Some(at)
}

/// A protected path the sweep found and set aside.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    /// What was removed.
    pub path: std::path::PathBuf,
    /// The protected path it was, or led to.
    pub protected: std::path::PathBuf,
    /// Why that path is protected.
    pub reason: String,
    /// Where it is now: renamed aside in its own directory, where nothing reads it.
    pub aside: std::path::PathBuf,
}

impl std::fmt::Display for Swept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.path == self.protected {
            format!(
                "the protected path {} appeared while the agent ran ({})",
                self.path.display(),
                self.reason
            )
        } else {
            format!(
                "{} appeared while the agent ran, a symbolic link on the way to the protected path {} ({})",
                self.path.display(),
                self.protected.display(),
                self.reason
            )
        };
        write!(
            f,
            "{what}: moved aside to {}, where nothing runs it; look at it before you use it",
            self.aside.display()
        )
    }
}

/// Sets aside each protected path of `list` that exists now (it did not when the launch
/// started), and every symbolic link on the way to one. Walks down from each one's base by
/// descriptor, never following a link; a rename in its own directory is one step that ends
/// its effect and loses nothing.
pub fn sweep_absent(list: &[Absent]) -> Vec<Swept> {
    let mut out = Vec::new();
    for a in list {
        let mut opened = Vec::new();
        let result = sweep_one(a, &mut opened);
        // The modes the agent gave the directories on the way, as they were.
        for (fd, mode) in opened.iter().rev() {
            if let Err(e) = chmod_fd(fd, *mode) {
                log::debug!("sweep: restoring a mode: {e}");
            }
        }
        match result {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {}
            // Said, not only logged: what could not be set aside may run outside the wall.
            Err(e) => eprintln!(
                "landwall: {}",
                crate::spool::printable(&format!(
                    "could not check or set aside the protected path {} ({}): {e}; if it exists now, the agent may have made it: look before you run anything there",
                    a.path.display(),
                    a.reason
                ))
            ),
        }
    }
    out
}

/// Gives the owner (this process's user, as the agent is) read, write and search on the
/// directory `name` in `dir` if it lacks any, and returns a descriptor of it and its old
/// mode (for [`sweep_absent`] to restore). The agent may `chmod` its directories (Landlock
/// does not restrict it) to keep the watcher, which holds no capability, out; as root it
/// would not keep the user's own git out. The directory is opened without following a link
/// and changed through that descriptor's `/proc/self/fd` name, so nothing but it changes.
fn open_for_owner(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<(OwnedFd, u32)> {
    use nix::fcntl::{openat, OFlag};
    let fd = openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    let st = nix::sys::stat::fstat(&fd)?;
    if st.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(io::Error::from_raw_os_error(libc::EACCES));
    }
    let mode = st.st_mode & 0o7777;
    chmod_fd(&fd, mode | 0o700)?;
    Ok((fd, mode))
}

/// `chmod` of exactly what `fd` (any descriptor, `O_PATH` too) is.
fn chmod_fd(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
}

fn sweep_one(a: &Absent, opened: &mut Vec<(OwnedFd, u32)>) -> io::Result<Option<Swept>> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::Mode;
    let Ok(rel) = a.path.strip_prefix(&a.base) else {
        return Ok(None);
    };
    let base = std::ffi::CString::new(a.base.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut dir = match sys::open_no_symlinks(None, &base, libc::O_RDONLY | libc::O_DIRECTORY) {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let parts: Vec<_> = rel.components().map(|c| c.as_os_str().to_owned()).collect();
    let mut at = a.base.clone();
    for (i, name) in parts.iter().enumerate() {
        at.push(name);
        let st = match nix::sys::stat::fstatat(
            &dir,
            name.as_os_str(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(st) => st,
            Err(nix::errno::Errno::ENOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if i == 0 {
            // The directory the rename happens in (and the way down) must be writable and
            // searchable for the owner.
            let st = nix::sys::stat::fstat(&dir)?;
            if st.st_mode & 0o300 != 0o300 && st.st_uid == nix::unistd::geteuid().as_raw() {
                let fd = dir.try_clone()?;
                chmod_fd(&fd, (st.st_mode & 0o7777) | 0o700)?;
                opened.push((fd, st.st_mode & 0o7777));
            }
        }
        let kind = st.st_mode & libc::S_IFMT;
        let last = i + 1 == parts.len();
        if last || kind == libc::S_IFLNK {
            let aside = set_aside(&dir, name.as_os_str())?;
            return Ok(Some(Swept {
                aside: at.with_file_name(aside),
                path: at,
                protected: a.path.clone(),
                reason: a.reason.to_string(),
            }));
        }
        if kind != libc::S_IFDIR {
            // A file where a directory would be: the protected path cannot exist.
            return Ok(None);
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        if st.st_mode & 0o700 != 0o700 {
            let held = open_for_owner(&dir, name.as_os_str())?;
            opened.push(held);
        }
        dir = openat(&dir, name.as_os_str(), flags, Mode::empty())?;
    }
    Ok(None)
}

/// Renames `name` in `dir` aside to `<name>.landwall-swept-<pid>` (never over anything):
/// under that name no program reads it, and nothing the agent wrote is lost. Returns the
/// new name.
fn set_aside(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<std::ffi::OsString> {
    let mut aside = name.to_os_string();
    aside.push(format!(".landwall-swept-{}", std::process::id()));
    nix::fcntl::renameat2(
        dir,
        name,
        dir,
        aside.as_os_str(),
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )?;
    Ok(aside)
}
