//! The quarantine watcher of a linked worktree's launch: a process started just before the
//! wall goes up, and so outside it, that moves the objects the agent's git wrote into the
//! quarantine ([`Quarantine`]) into the repository once the agent has exited.
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
pub fn start(q: &Quarantine, min_abi: u32) -> io::Result<libc::pid_t> {
    // The watcher's wall names the quarantine, so it must exist before the watcher starts
    // (the namespace step, which also makes it, comes after). Made in the worktree's git
    // dir, opened with no symlink on the way; an existing one is left as it is.
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
    drop(git_dir);
    let pidfd = sys::pidfd_self()?;
    let watch = || watch(&pidfd, q, min_abi);
    sys::spawn_detached(watch)
}

/// The watcher's life: detach from everything of the agent's, move leftovers, wait for the
/// agent's exit, move what it wrote. Its exit status is seen by no one (the launch has
/// exec'd by then); failures are logged at debug level and the objects stay where they are.
fn watch(pidfd: &OwnedFd, q: &Quarantine, min_abi: u32) -> i32 {
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
    let enforced = match wall_self(q, min_abi) {
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
    let Some(git) = GIT_CANDIDATES.iter().map(Path::new).find(|p| p.is_file()) else {
        // Loose objects need no git; packs wait for a machine that has one.
        return migrate(q, Path::new("/nonexistent/git"), pidfd);
    };
    migrate(q, git, pidfd)
}

fn migrate(q: &Quarantine, git: &Path, pidfd: &OwnedFd) -> i32 {
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
    once("after the agent", true);
    0
}

/// The watcher's own Landlock wall: the quarantine and the real store read-write; what git
/// needs to run (the system's programs and libraries, `/etc`, `/proc` for the store's
/// descriptor path it is given) read-only; `/dev/null`. Nothing of the worktree, `$HOME` or
/// `/tmp`. Fully enforced at `min_abi` (the launch's own minimum) or above, or an error.
pub fn wall_self(
    q: &Quarantine,
    min_abi: u32,
) -> Result<crate::wall::Enforced, crate::wall::WallError> {
    use crate::policy::{Access, Rule};
    let mut rules = Vec::new();
    // Real paths already: opened without following any symlink.
    for path in [&q.dir, &q.objects] {
        if path.is_dir() {
            rules.push(Rule {
                path: path.clone(),
                access: Access::ReadWrite,
                is_dir: true,
                reason: "the object quarantine's watcher".into(),
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
