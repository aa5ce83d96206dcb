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
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::policy::Quarantine;
use crate::protect::{Absent, Protection};
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
pub fn start(
    q: Option<&Quarantine>,
    protection: &Protection,
    min_abi: u32,
) -> io::Result<libc::pid_t> {
    // Before the agent can change anything: what changed at or after this is its doing.
    let since = crate::gitlinks::now_coarse();
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
    // The index as it is before the agent runs (git replaces it by a rename, so this stays
    // the old one): which submodules were there at the start. Read by the watcher.
    let index = protection.submodules.as_ref().and_then(|s| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&s.index)
            .ok()
    });
    let watch = move || watch(&pidfd, q, protection, since, index, min_abi);
    sys::spawn_detached(watch)
}

/// The watcher's life: detach from everything of the agent's, move leftovers, wait for the
/// agent's exit, move what it wrote. Its exit status is seen by no one (the launch has
/// exec'd by then); failures are logged at debug level and the objects stay where they are.
fn watch(
    pidfd: &OwnedFd,
    q: Option<&Quarantine>,
    protection: &Protection,
    since: (i64, i64),
    index: Option<fs::File>,
    min_abi: u32,
) -> i32 {
    // Read before anything else, and before its descriptor is closed with the others.
    let start = protection
        .submodules
        .as_ref()
        .and_then(|s| crate::gitlinks::at_start(index, &s.index, since));
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
    let enforced = match wall_self(q, protection, min_abi) {
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
    run(q, git, pidfd, protection, since, start.as_deref())
}

/// Says on stderr what the sweep removed (nothing when nothing appeared).
fn report(lines: &[String]) {
    for line in lines {
        eprintln!("landwall: {}", crate::spool::printable(line));
    }
}

/// While the agent runs: the quarantine emptied every [`PERIOD_MS`], and each absent
/// protected path set aside as soon as it appears (inotify on the directories it would
/// appear in), so that a program outside the wall that runs in the worktree meanwhile, or
/// right after the agent exits, does not meet it. Then, once the agent has exited, the
/// sweep once more, the report, and the last objects.
fn run(
    q: Option<&Quarantine>,
    git: &Path,
    pidfd: &OwnedFd,
    protection: &Protection,
    since: (i64, i64),
    start: Option<&[PathBuf]>,
) -> i32 {
    let sweep = protection.absent.as_slice();
    let once = |q: &Quarantine, when: &str, prune: bool| match crate::objects::migrate(
        &q.dir, &q.objects, git, prune,
    ) {
        Ok(m) => {
            for r in &m.rejected {
                log::debug!("quarantine {}: {when}: kept back: {r}", q.dir.display());
            }
        }
        Err(e) => log::debug!("quarantine {}: {when}: {e}", q.dir.display()),
    };
    // Without inotify (its limits reached) the sweep waits for the agent's exit.
    let subs = protection.submodules.as_ref();
    let mut notify = if sweep.is_empty() && subs.is_none() {
        None
    } else {
        match Notify::new() {
            Ok(n) => Some(n),
            Err(e) => {
                log::debug!("watcher: inotify: {e}");
                None
            }
        }
    };
    let mut swept = Vec::new();
    if let Some(n) = &mut notify {
        n.watch(sweep);
        // What appeared before the watches were set.
        swept.extend(sweep_absent(sweep));
        // (The submodules are looked at when the index or one of them changes, and at the
        // exit: not now, when the agent has not run yet, which would read the index twice.)
        if let Some(subs) = subs {
            n.watch_submodules(subs);
        }
    }
    // The report waits for the agent's exit: the agent's terminal is its own until then.
    loop {
        if let Some(q) = q {
            once(q, "while the agent runs", false);
        }
        let timeout = if q.is_some() { PERIOD_MS } else { -1 };
        let (exited, changed) = match wait_either(pidfd, notify.as_ref(), timeout) {
            Ok(ready) => ready,
            Err(e) => {
                log::debug!("watcher: waiting for the agent: {e}");
                (true, true)
            }
        };
        if changed {
            if let Some(n) = &mut notify {
                let submodules_moved = n.drain();
                swept.extend(sweep_absent(sweep));
                // A directory on the way may have appeared: watch it too.
                n.watch(sweep);
                if let (true, Some(subs)) = (submodules_moved, subs) {
                    swept.extend(sweep_submodules(subs, start, since));
                    n.watch_submodules(subs);
                }
            }
        }
        if exited {
            break;
        }
    }
    // The sweep first: it is what a command run right after the agent must not meet.
    swept.extend(sweep_absent(sweep));
    if let Some(subs) = subs {
        swept.extend(sweep_submodules(subs, start, since));
    }
    report(&swept);
    if let Some(q) = q {
        once(q, "after the agent", true);
    }
    0
}

/// An inotify instance on the directories where absent protected paths would appear, and
/// on what a submodule check looks at: the index (an `index` renamed into its directory) and
/// each submodule's directory, git dir and hooks.
struct Notify {
    inotify: nix::sys::inotify::Inotify,
    /// The index's directory.
    index_dir: Option<nix::sys::inotify::WatchDescriptor>,
    /// The submodules' directories, git dirs and hooks.
    submodule_dirs: std::collections::HashSet<nix::sys::inotify::WatchDescriptor>,
}

impl Notify {
    fn new() -> io::Result<Notify> {
        use nix::sys::inotify::{InitFlags, Inotify};
        Ok(Notify {
            inotify: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?,
            index_dir: None,
            submodule_dirs: std::collections::HashSet::new(),
        })
    }

    /// Watches the index's directory, and each submodule of the index: its directory (a
    /// `.git` made there), its git dir and its hooks (anything written or renamed there).
    fn watch_submodules(&mut self, subs: &crate::protect::Submodules) {
        use nix::sys::inotify::AddWatchFlags;
        let dir_mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_ATTRIB
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        if let Some(dir) = subs.index.parent() {
            match self.inotify.add_watch(
                dir,
                AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_ONLYDIR,
            ) {
                Ok(wd) => self.index_dir = Some(wd),
                Err(e) => log::debug!("watcher: watching {}: {e}", dir.display()),
            }
        }
        let Ok(links) = crate::gitlinks::gitlinks(&subs.index) else {
            return;
        };
        for rel in links {
            let sub = subs.root.join(&rel);
            let mut dirs = vec![sub.clone()];
            if let Some(g) = crate::gitlinks::git_dir_of(&sub) {
                dirs.push(g.join("hooks"));
                dirs.push(g);
            }
            for d in dirs {
                if let Ok(wd) = self.inotify.add_watch(&d, dir_mask) {
                    self.submodule_dirs.insert(wd);
                }
            }
        }
    }

    /// Watches, for each absent path, the nearest directory on the way that exists (a
    /// directory already watched is watched once).
    fn watch(&self, sweep: &[Absent]) {
        use nix::sys::inotify::AddWatchFlags;
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        for a in sweep {
            if let Some(dir) = nearest_existing_dir(a) {
                if let Err(e) = self.inotify.add_watch(&dir, mask) {
                    log::debug!("watcher: watching {}: {e}", dir.display());
                }
            }
        }
    }

    /// Reads every pending event. Returns whether one concerns the submodules (the index
    /// replaced, or a change in a submodule's directory or git dir); for the absent paths
    /// what they name does not matter, the sweep looks.
    fn drain(&self) -> bool {
        let mut submodules = false;
        loop {
            match self.inotify.read_events() {
                Ok(events) if !events.is_empty() => {
                    for e in events {
                        let index = Some(e.wd) == self.index_dir
                            && e.name.as_deref().is_some_and(|n| n == "index");
                        // Events were lost: one of them may have been the index's.
                        let lost = e
                            .mask
                            .contains(nix::sys::inotify::AddWatchFlags::IN_Q_OVERFLOW);
                        if index || lost || self.submodule_dirs.contains(&e.wd) {
                            submodules = true;
                        }
                    }
                }
                Ok(_) | Err(_) => break,
            }
        }
        submodules
    }
}

/// Waits for the agent's exit (its pidfd) or an inotify event, up to `timeout_ms` (-1:
/// without end). Returns (exited, changed).
fn wait_either(
    pidfd: &OwnedFd,
    notify: Option<&Notify>,
    timeout_ms: libc::c_int,
) -> io::Result<(bool, bool)> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = vec![PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    if let Some(n) = notify {
        fds.push(PollFd::new(n.inotify.as_fd(), PollFlags::POLLIN));
    }
    let timeout = PollTimeout::try_from(timeout_ms).unwrap_or(PollTimeout::NONE);
    loop {
        match poll(&mut fds, timeout) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let ready = |fd: &PollFd<'_>| fd.revents().is_some_and(|r| !r.is_empty());
    Ok((ready(&fds[0]), fds.get(1).is_some_and(ready)))
}

/// The watcher's own Landlock wall: the quarantine and the real store read-write; what git
/// needs to run (the system's programs and libraries, `/etc`, `/proc` for the store's
/// descriptor path it is given) read-only; `/dev/null`. Nothing of the worktree, `$HOME` or
/// `/tmp`. Fully enforced at `min_abi` (the launch's own minimum) or above, or an error.
pub fn wall_self(
    q: Option<&Quarantine>,
    protection: &Protection,
    min_abi: u32,
) -> Result<crate::wall::Enforced, crate::wall::WallError> {
    let sweep = protection.absent.as_slice();
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
    // The submodules' check: the worktree (a submodule's `.git` is set aside there), and
    // the git dirs outside it, read (the index, what a `.git` file or commondir names).
    if let Some(subs) = &protection.submodules {
        let mut add = |path: &Path, access: Access| {
            if path.is_dir()
                && !rules
                    .iter()
                    .any(|r| path.starts_with(&r.path) && r.access >= access)
            {
                rules.push(Rule {
                    path: path.to_path_buf(),
                    access,
                    is_dir: true,
                    reason: "the submodules' check".into(),
                });
            }
        };
        add(&subs.root, Access::ReadWrite);
        // The index's directory: an index that cannot be read is set aside there.
        if let Some(dir) = subs.index.parent() {
            add(dir, Access::ReadWrite);
        }
        for g in &subs.git_dirs {
            add(g, Access::ReadOnly);
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

/// Sets aside the `.git` of each submodule the agent made or changed since `since` (see
/// [`crate::gitlinks`]): git then takes the submodule for one not checked out, and enters
/// it no more. One line for each, and for a failure.
fn sweep_submodules(
    subs: &crate::protect::Submodules,
    start: Option<&[PathBuf]>,
    since: (i64, i64),
) -> Vec<String> {
    let changed = match crate::gitlinks::suspects(&subs.root, &subs.index, start, since) {
        Ok(c) => c,
        // An index too large or unreadable here: said (git may not read it either).
        Err(e) if e.kind() != io::ErrorKind::InvalidData => {
            return vec![format!(
                "could not read the index {} ({e}): a submodule the agent added or changed would run its config and hooks on your next `git status`; look with `git diff --submodule` first",
                subs.index.display()
            )]
        }
        // An index git would read but this cannot (the agent may have shaped it so): set
        // aside, so that git enters no submodule on your next `git status`.
        Err(e) => {
            let a = Absent {
                path: subs.index.clone(),
                base: subs.index.parent().unwrap_or(&subs.index).to_path_buf(),
                reason: "".into(),
            };
            let result = set_aside_restoring_modes(&a);
            return vec![match result {
                Ok(Some(s)) => format!(
                    "the index {} could not be read ({e}): moved aside to {}, so that git enters no submodule the agent may have made; look at `git diff --submodule HEAD`, then `git reset` rebuilds it",
                    subs.index.display(),
                    s.aside.display()
                ),
                Ok(None) => return Vec::new(),
                Err(e2) => format!(
                    "the index {} could not be read ({e}) nor set aside ({e2}): a submodule the agent made would run its config and hooks on your next `git status`; look with `git diff --submodule` first",
                    subs.index.display()
                ),
            }];
        }
    };
    let mut out = Vec::new();
    for rel in changed {
        let a = Absent {
            path: subs.root.join(&rel).join(".git"),
            base: subs.root.clone(),
            reason: "".into(),
        };
        let result = set_aside_restoring_modes(&a);
        out.push(match result {
            Ok(Some(s)) => format!(
                "the submodule {} was made or changed while the agent ran (your next `git status` would run its config and hooks): its .git moved aside to {}; look at it, then move it back or run `git submodule update --init`",
                rel.display(),
                s.aside.display()
            ),
            Ok(None) => continue,
            Err(e) => format!(
                "the submodule {} was made or changed while the agent ran, and its .git could not be set aside ({e}): your next `git status` would run its config and hooks; look at it first",
                rel.display()
            ),
        });
    }
    out
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
/// Returns a line for each path set aside, and for each that could not be (said, not
/// only logged: what could not be set aside may run outside the wall).
pub fn sweep_absent(list: &[Absent]) -> Vec<String> {
    let mut out = Vec::new();
    for a in list {
        let result = set_aside_restoring_modes(a);
        match result {
            Ok(Some(s)) => out.push(s.to_string()),
            Ok(None) => {}
            Err(e) => out.push(format!(
                "could not check or set aside the protected path {} ({}): {e}; if it exists now, the agent may have made it: look before you run anything there",
                a.path.display(),
                a.reason
            )),
        }
    }
    out
}

/// [`sweep_one`], then the modes the agent gave the directories on the way, as they were.
fn set_aside_restoring_modes(a: &Absent) -> io::Result<Option<Swept>> {
    let mut opened = Vec::new();
    let result = sweep_one(a, &mut opened);
    for (fd, mode) in opened.iter().rev() {
        if let Err(e) = chmod_fd(fd, *mode) {
            log::debug!("sweep: restoring a mode: {e}");
        }
    }
    result
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
            let aside = match set_aside(&dir, name.as_os_str()) {
                Ok(aside) => aside,
                // Gone meanwhile (the agent removed it, or another sweep moved it).
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
                Err(e) => return Err(e),
            };
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

/// Renames `name` in `dir` aside to `<name>.landwall-swept-<pid>-<random>`
/// ([`crate::rename_aside`]). Returns the new name.
fn set_aside(dir: &OwnedFd, name: &std::ffi::OsStr) -> io::Result<std::ffi::OsString> {
    use std::os::fd::AsFd;
    crate::rename_aside(dir.as_fd(), name, name)
}
