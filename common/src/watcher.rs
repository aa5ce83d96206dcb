//! The watcher of a launch: a process started just before the wall goes up, and so outside
//! it, that sets aside what the agent puts in protected places and moves the objects the
//! agent's git wrote into a linked worktree's quarantine ([`Quarantine`]) into the repository.
//!
//! What it judges is the state, not the change: at the agent's exit (and at the start, where
//! an earlier launch's watcher did not finish) every protected path and every submodule git
//! would enter is compared with the record of what is the user's own ([`crate::record`]),
//! and what the record does not hold as it is is set aside. While the agent runs, an absent
//! protected path is set aside as soon as it appears (inotify), and the submodules are judged
//! whenever the index or one of them changes. What it cannot read or judge (an index too
//! large, one it may not open) is hostile: set aside too.
//!
//! It is part of the wall: the launch waits until it reports itself ready (walled, filtered,
//! watching, the start judged, [`Ready`]) and stops, exit 100, if it cannot; if it fails
//! later, it ends the agent. The sweep comes first: the objects are moved by a thread of
//! their own, on a bounded budget, so no work the agent left in the quarantine delays it.
//!
//! Invariants: the watcher is no child of the agent (it is detached into its own session,
//! so no program of the agent waits for it or sees it), it holds none of the agent's
//! descriptors but a pidfd of the agent's process and the caller's standard output and
//! error (see [`detach`]), it drops its capabilities and sets no_new_privs first thing, it
//! stays outside the agent's mount namespace (it is forked before it), it walls itself in
//! ([`wall_self`]) before it reads anything, and everything it reads from the quarantine is
//! checked by [`crate::objects::migrate`] before anything enters the repository. The agent
//! cannot ptrace it (Landlock forbids tracing a process outside the domain) and, from ABI 6,
//! cannot signal it; below ABI 6, killing it leaves its mark in the record, and the next
//! launch judges the worktree before its agent starts; the objects wait in the quarantine
//! for the next launch's watcher: nothing is lost, only delayed.

use std::fs;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};

use crate::chmod_fd;
use crate::policy::Quarantine;
use crate::protect::{Absent, Protection};
use crate::record::{Record, State};
use crate::sys;

/// The objects' thread's phases: the agent runs; it has exited (one pass, then word back,
/// then on while what it left runs); everything has ended (a last pass).
const RUNNING: u8 = 0;
const AGENT_ENDED: u8 = 1;
const ALL_ENDED: u8 = 2;

/// How often the quarantine is emptied while the agent runs. A scan of an empty quarantine
/// is one directory read.
const PERIOD_MS: u64 = 200;

/// How long a launch waits for its watcher to be ready.
const READY_MS: libc::c_int = 30_000;

/// What the watcher writes to say it is ready; anything else is the reason it is not.
const READY: &[u8] = b"ready";

/// What the watcher writes first when the start is judged against the record (a launch of
/// the worktree did not finish): nothing differed from it, or something did and was set
/// aside. The launch waits for this before its namespace binds the protected paths, which
/// would otherwise race the set-aside.
const JUDGED_CLEAN: u8 = b'j';
const JUDGED_SWEPT: u8 = b's';

/// Where the watcher looks for git (for packs) with its own, fixed PATH: never the agent's.
const GIT_CANDIDATES: &[&str] = &["/usr/bin/git", "/bin/git", "/usr/local/bin/git"];

/// A started watcher: the short-lived child in between (for [`sys::reap_detacher`]) and the
/// socket on which the launch gives it the filter's listener ([`Ready::give_listener`]) and
/// it says it is ready ([`Ready::wait`]).
#[derive(Debug)]
pub struct Ready {
    /// The detaching child.
    pub detacher: libc::pid_t,
    /// The launch's end.
    pipe: OwnedFd,
    /// Whether the watcher keeps a record, and so must know when the agent's last process
    /// has ended, not only the agent ([`crate::seccomp::install_with_listener`]).
    listener: bool,
    /// Whether a launch of the worktree did not finish, so the watcher judges the start
    /// against the record before it says anything else ([`Ready::judged`]).
    judging: bool,
}

impl Ready {
    /// Whether the seccomp filter must be installed with a listener for the watcher.
    pub fn needs_listener(&self) -> bool {
        self.listener
    }

    /// Gives the watcher the filter's listener (or word that there is none) and the launch's
    /// private copies of its guarded state files (each with its index in the protection's
    /// `held`, [`crate::protect::Hold::Private`]), and closes the launch's copies of those
    /// descriptors: the agent must not hold them.
    pub fn give_listener(
        &mut self,
        listener: Option<OwnedFd>,
        privates: Vec<(usize, OwnedFd)>,
    ) -> io::Result<()> {
        let mut data = vec![u8::from(listener.is_some())];
        let mut fds: Vec<BorrowedFd<'_>> = listener.iter().map(AsFd::as_fd).collect();
        for (i, fd) in &privates {
            let i = u16::try_from(*i).map_err(|_| io::Error::other("too many held paths"))?;
            data.extend_from_slice(&i.to_le_bytes());
            fds.push(fd.as_fd());
        }
        sys::send_fds(self.pipe.as_fd(), &data, &fds)
    }

    /// Where a launch of the worktree did not finish, waits (up to 30 s) for the watcher's
    /// judgement of the start against the record; `Ok` at once otherwise. `Err` if it set
    /// anything aside: the protected paths this launch would bind read-only were taken as
    /// they were before that, so it stops, and the next launch starts from what is there.
    pub fn judged(&mut self) -> Result<(), String> {
        if !self.judging {
            return Ok(());
        }
        let mut first = [0u8; 1];
        loop {
            match sys::wait_readable(self.pipe.as_fd(), READY_MS) {
                Ok(true) => {}
                Ok(false) => return Err("the watcher did not judge the start within 30 s".into()),
                Err(e) => return Err(format!("waiting for the watcher: {e}")),
            }
            match nix::unistd::read(&self.pipe, &mut first) {
                Ok(0) => return Err("the watcher ended before it was ready".into()),
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(format!("waiting for the watcher: {e}")),
            }
        }
        match first[0] {
            JUDGED_CLEAN => Ok(()),
            JUDGED_SWEPT => Err("a launch in this worktree did not finish, and what differed from the record of what is yours was set aside (said above) before this agent started; look at it, then start the agent again".into()),
            _ => Err(self.said(first.to_vec())),
        }
    }

    /// Reaps the detaching child and waits (up to 30 s) until the watcher says it is ready:
    /// `Err` with its reason (or that it ended, or did not answer) otherwise. The agent must
    /// not start before this returns `Ok`.
    pub fn wait(self) -> Result<(), String> {
        sys::reap_detacher(self.detacher).map_err(|e| format!("the watcher did not start: {e}"))?;
        let said = self.read_to_end(Vec::new())?;
        match said.as_slice() {
            READY => Ok(()),
            [] => Err("the watcher ended before it was ready".into()),
            why => Err(crate::spool::printable(&String::from_utf8_lossy(why)).into_owned()),
        }
    }

    /// The watcher's reason for not being ready, which begins with `said`.
    fn said(&self, said: Vec<u8>) -> String {
        match self.read_to_end(said) {
            Ok(why) => crate::spool::printable(&String::from_utf8_lossy(&why)).into_owned(),
            Err(e) => e,
        }
    }

    /// What the watcher writes until it closes its end (at most 4 KiB kept), after `said`.
    fn read_to_end(&self, mut said: Vec<u8>) -> Result<Vec<u8>, String> {
        let mut buf = [0u8; 512];
        loop {
            match sys::wait_readable(self.pipe.as_fd(), READY_MS) {
                Ok(true) => {}
                Ok(false) => return Err("the watcher was not ready within 30 s".into()),
                Err(e) => return Err(format!("waiting for the watcher: {e}")),
            }
            match nix::unistd::read(&self.pipe, &mut buf) {
                Ok(0) => break,
                Ok(n) if said.len() < 4096 => said.extend_from_slice(&buf[..n]),
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(format!("waiting for the watcher: {e}")),
            }
        }
        Ok(said)
    }
}

/// Steps, in order: make the quarantine if it is missing (the watcher's wall names it);
/// open the record and take its lock (exclusive if no other launch of the worktree runs);
/// take a pidfd of this process (the agent after exec); make the ready pipe; start the
/// detached watcher. (The quarantine is checked to be a directory by [`crate::ns::enter`];
/// the watcher opens it without following a link.) Once the launch has its [`Ready`], the
/// watcher walls itself in, judges the start and starts watching, and says so.
pub fn start(q: Option<&Quarantine>, protection: &Protection, min_abi: u32) -> io::Result<Ready> {
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
    let record = match &protection.record {
        Some(dir) => Record::open(dir, &protection.root)?,
        None => None,
    };
    let judging = match &record {
        Some(r) if r.exclusive => !r.others()?.is_empty(),
        _ => false,
    };
    let pidfd = sys::pidfd_self()?;
    let (read, write) = sys::socket_pair()?;
    let listener = record.is_some();
    let watch = move || watch(&pidfd, q, protection, record, judging, write, min_abi);
    let detacher = sys::spawn_detached(watch)?;
    Ok(Ready {
        detacher,
        pipe: read,
        listener,
        judging,
    })
}

/// The watcher's life: detach from everything of the agent's, wall itself in, judge the
/// start, say it is ready, then watch until the agent exits and judge the end. Its exit
/// status is seen by no one (the launch has exec'd by then): a failure before it is ready is
/// written to the ready pipe, and the launch stops.
fn watch(
    pidfd: &OwnedFd,
    q: Option<&Quarantine>,
    protection: &Protection,
    mut record: Option<Record>,
    judging: bool,
    ready: OwnedFd,
    min_abi: u32,
) -> i32 {
    let fail = |ready: OwnedFd, why: String| {
        if let Err(e) = nix::unistd::write(&ready, why.as_bytes()) {
            log::debug!("watcher: saying why it is not ready: {e}");
        }
        1
    };
    // Forked before the launch drops its capabilities: the watcher drops its own, and can
    // gain none by exec (it execs only git, for packs).
    if let Err(e) = crate::caps::drop_all() {
        return fail(
            ready,
            format!("the watcher could not drop its capabilities: {e}"),
        );
    }
    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        return fail(
            ready,
            format!("the watcher could not set no_new_privs: {e}"),
        );
    }
    // Where the terminal goes once the agent has exited and the watcher waits on for what
    // it left running: opened before the wall.
    let null = match fs::OpenOptions::new().write(true).open("/dev/null") {
        Ok(null) => OwnedFd::from(null),
        Err(e) => return fail(ready, format!("the watcher could not open /dev/null: {e}")),
    };
    let mut keep = vec![pidfd.as_raw_fd(), ready.as_raw_fd(), null.as_raw_fd()];
    keep.extend(record.iter().flat_map(Record::fds));
    if let Err(e) = detach(&keep) {
        return fail(ready, format!("the watcher could not detach: {e}"));
    }
    // Its own wall: it parses what the agent wrote (the index, zlib streams, packs through
    // git), so a flaw there must not reach beyond what it must write.
    let record_dir = record.as_ref().map(|r| r.path().to_path_buf());
    let enforced = match wall_self(q, protection, record_dir.as_deref(), min_abi) {
        Ok(enforced) => enforced,
        Err(e) => return fail(ready, format!("the watcher could not wall itself in: {e}")),
    };
    // The agent's filter too, so that a watcher taken over by a crafted object still
    // reaches no server outside through a Unix socket.
    let refuse = crate::seccomp::Refuse {
        unix_sockets: enforced.unix == crate::wall::UnixGuard::Seccomp,
        mptcp: false,
        setgid: nix::unistd::geteuid().is_root(),
    };
    if let Err(e) = crate::seccomp::install(refuse) {
        return fail(
            ready,
            format!("the watcher could not install its filter: {e}"),
        );
    }
    let judged = crate::record::judged(protection);
    let subs = protection.submodules.as_ref();
    // Without inotify the protected paths could not be set aside as they appear.
    let mut notify = None;
    if !protection.absent.is_empty() || subs.is_some() || !protection.nested.is_empty() {
        match Notify::new().and_then(|mut n| {
            n.watch(&protection.absent)?;
            for subs in protection.submodules.iter().chain(&protection.nested) {
                n.watch_submodules(subs)?;
            }
            if let Some(reg) = &protection.registry {
                n.watch_registry(reg)?;
            }
            Ok(n)
        }) {
            Ok(n) => notify = Some(n),
            Err(e) => return fail(ready, format!("the watcher could not watch the protected paths (inotify: {e}); if inotify's limits are reached (fs.inotify.max_user_instances, max_user_watches), raise them")),
        }
    }
    let mut swept = Sweep::default();
    let basis = match start_basis(&judged, protection, record.as_mut(), &mut swept) {
        Ok(basis) => basis,
        Err(e) => {
            return fail(
                ready,
                format!("the watcher could not judge the worktree: {e}"),
            )
        }
    };
    // The judgement the launch waits for before its namespace: if anything was set aside,
    // the launch took the protected paths as they were before, so it stops (said here, on
    // its terminal), and this watcher's mark goes if all that had to be set aside was.
    if judging {
        let answer = if swept.lines.is_empty() {
            JUDGED_CLEAN
        } else {
            report(&std::mem::take(&mut swept.lines));
            JUDGED_SWEPT
        };
        if let Err(e) = nix::unistd::write(&ready, &[answer]) {
            log::debug!("watcher: saying how the start was judged: {e}");
            return 1;
        }
        if answer == JUDGED_SWEPT {
            if let Some(r) = record.as_mut() {
                if swept.failed {
                    log::debug!("watcher: something could not be set aside; the mark stays");
                } else if let Err(e) = r.unmark() {
                    log::debug!("watcher: {e}");
                }
            }
            return 1;
        }
    }
    // The start judged, and while no other launch of the worktree can start: the
    // quarantine's empty fan-out directories go now, when no git of any launch writes there
    // (one in another launch's quarantine would lose a write to the `rmdir`). Then other
    // launches may start beside this one.
    if let Some(r) = record.as_mut() {
        if let (true, Some(q)) = (r.exclusive, q) {
            if let Err(e) = crate::objects::prune_empty(&q.dir) {
                log::debug!("watcher: {e}");
            }
        }
        if let Err(e) = r.share() {
            return fail(
                ready,
                format!("the watcher could not judge the worktree: {e}"),
            );
        }
    }
    // The nested worktrees' submodules: judged against what they were at the start (no
    // record of their own here; their own launches keep theirs).
    let nested: Vec<(&crate::protect::Submodules, crate::gitlinks::Populated)> = protection
        .nested
        .iter()
        .map(|n| (n, state_now(&[], Some(n), None, &mut swept).submodules))
        .collect();
    // Submodules of submodules, at every depth: a change in one is looked at at once too.
    if let Some(n) = notify.as_mut() {
        let deep = subs
            .map(|s| (s, &basis.submodules))
            .into_iter()
            .chain(nested.iter().map(|(s, was)| (*s, was)))
            .try_for_each(|(s, p)| n.watch_populated(s, p));
        if let Err(e) = deep {
            return fail(ready, format!("the watcher could not watch the submodules (inotify: {e}); if inotify's limits are reached (fs.inotify.max_user_watches), raise them"));
        }
    }
    // What was set aside before the agent ran, and what earlier watchers set aside after
    // they had given the terminal back: said now, while the terminal is the user's.
    if let Some(r) = record.as_ref() {
        match r.heard() {
            Ok(lines) => swept.lines.extend(lines),
            Err(e) => log::debug!("watcher: {e}"),
        }
    }
    report(&std::mem::take(&mut swept.lines));
    if let Err(e) = nix::unistd::write(&ready, READY) {
        log::debug!("watcher: saying it is ready: {e}");
        return 1;
    }
    // The filter's listener: with a record, the watcher lasts until the agent's last
    // process has ended, so that one left running (`setsid`, a daemon) cannot lay a plant
    // after it and have the next launch take it for the user's. The launch sends it before
    // it reads the answer to the end, so the agent never starts with the watcher lacking it.
    let (listener, mut privates) = match sys::recv_fds(ready.as_fd()) {
        Ok((data, fds)) => match privates_of(&data, fds, protection) {
            Ok(got) => got,
            Err(e) => {
                return fail(
                    ready,
                    format!("the watcher could not take the launch's private copies: {e}"),
                )
            }
        },
        // The launch stopped before its filter: no agent runs.
        Err(e) => {
            log::debug!("watcher: the launch gave no listener: {e}");
            (None, Vec::new())
        }
    };
    if record.is_some() && listener.is_none() {
        return fail(
            ready,
            "the watcher got no listener from the launch's filter".into(),
        );
    }
    drop(ready);
    // Loose objects need no git; packs wait for a machine that has one.
    let git = GIT_CANDIDATES
        .iter()
        .map(Path::new)
        .find(|p| p.is_file())
        .unwrap_or(Path::new("/nonexistent/git"));
    let phase = AtomicU8::new(RUNNING);
    std::thread::scope(|scope| {
        // The objects on a thread of their own (it inherits the wall and the filter): no
        // work in the quarantine delays a sweep.
        let (caught_up, behind) = std::sync::mpsc::channel();
        let mover = q.map(|q| scope.spawn(|| move_objects(q, git, &phase, caught_up)));
        run(
            End::Agent(pidfd),
            protection,
            &judged,
            (&basis, &nested),
            &mut notify,
            &mut swept,
            &mut privates,
        );
        report(&swept.lines);
        if let Some(l) = &listener {
            // The objects the agent committed in its last moments reach the repository
            // before the terminal goes back (a pipeline that waits for its end of file sees
            // them there), as they did when the watcher ended with the agent.
            phase.store(AGENT_ENDED, Ordering::SeqCst);
            if mover.is_some() && behind.recv().is_err() {
                log::debug!("watcher: the objects' thread ended early");
            }
            // The agent has exited; what it started may not have. The terminal goes back
            // (a reader waiting for its end of file, the agent's parent among them, waits no
            // longer), the watch goes on until the last process has ended, and the state is
            // judged once more then: what is set aside meanwhile the next launch says.
            if let Err(e) = give_back_terminal(&null) {
                log::debug!("watcher: giving back the terminal: {e}");
            }
            let said = swept.lines.len();
            run(
                End::Last(l),
                protection,
                &judged,
                (&basis, &nested),
                &mut notify,
                &mut swept,
                &mut privates,
            );
            if let Some(r) = record.as_ref() {
                if let Err(e) = r.say(&swept.lines[said..]) {
                    log::debug!("watcher: {e}");
                }
            }
        }
        if let Some(r) = record.as_mut() {
            // Everything set aside that had to be: this launch leaves no mark behind.
            if swept.failed {
                log::debug!("watcher: something could not be set aside; the mark stays");
            } else if let Err(e) = r.unmark() {
                log::debug!("watcher: {e}");
            }
        }
        phase.store(ALL_ENDED, Ordering::SeqCst);
        if let Some(m) = mover {
            if m.join().is_err() {
                log::debug!("watcher: the objects' thread panicked");
            }
        }
    });
    0
}

/// What the sweeps set aside, and whether any failed.
#[derive(Debug, Default)]
struct Sweep {
    /// One line for each path set aside or that could not be.
    lines: Vec<String>,
    /// Whether one could not be.
    failed: bool,
}

impl Sweep {
    fn add(&mut self, lines: Vec<(String, bool)>) {
        for (line, ok) in lines {
            self.failed |= !ok;
            self.lines.push(line);
        }
    }
}

/// The basis the end is judged against, before the agent runs. With a record: if no other
/// launch of the worktree runs (the lock is exclusive) and none left a mark, what is there
/// now is the user's own, and is written down; if one left a mark, the record stands and
/// what differs from it is set aside now; if others run, the record stands. Without one (no
/// place for it, or none yet), what is there now.
fn start_basis(
    judged: &[Absent],
    protection: &Protection,
    record: Option<&mut Record>,
    swept: &mut Sweep,
) -> io::Result<State> {
    let mut now = state_now(
        judged,
        protection.submodules.as_ref(),
        admin(protection),
        swept,
    );
    now.root = crate::record::root_ident(&protection.root);
    let Some(record) = record else {
        return Ok(now);
    };
    record.mark()?;
    // A record of another directory once at this path (removed, cloned again) is none, and
    // so are the marks its launches left.
    let loaded = record.load();
    let other = loaded.as_ref().is_some_and(|s| s.root != now.root);
    if other && record.exclusive {
        let left = record.others()?;
        record.forget(&left)?;
    }
    let loaded = loaded.filter(|_| !other);
    // A name a pattern stands for ([`Absent::pattern`]) that a record which judged that
    // pattern does not name was made since it was written: where an earlier launch did not
    // finish, it is judged as the agent's. (A record written by a launch that did not judge
    // the pattern, of another agent, takes it as the start has it, as any path it does not
    // name; so does a launch beside another, whose start is not judged.)
    let judged_patterns: Vec<&Path> = protection
        .absent
        .iter()
        .filter(|a| a.pattern().is_some())
        .filter(|a| {
            loaded
                .as_ref()
                .is_some_and(|l| l.paths.contains_key(&a.path))
        })
        .map(|a| a.path.as_path())
        .collect();
    let made = |p: &Path| {
        protection
            .absent
            .iter()
            .any(|a| judged_patterns.contains(&a.path.as_path()) && a.covers(p))
    };
    let basis = match (record.exclusive, loaded) {
        (true, Some(loaded)) => {
            let left = record.others()?;
            if left.is_empty() {
                if loaded.naming_all_of(&now) != now {
                    record.save(&now)?;
                }
                now
            } else {
                // An earlier launch did not finish: what it may have left is judged now.
                let saved = loaded.naming_all_of_but(&now, made);
                let before = swept.failed;
                judge(&now, &saved, judged, protection, swept);
                if swept.failed == before {
                    record.forget(&left)?;
                }
                saved
            }
        }
        (true, None) => {
            record.save(&now)?;
            now
        }
        (false, Some(loaded)) => loaded.naming_all_of(&now),
        (false, None) => now,
    };
    Ok(basis)
}

/// Where a main checkout's linked worktrees are registered, if the launch judges them.
fn admin(protection: &Protection) -> Option<&Path> {
    protection.registry.as_ref().map(|r| r.admin.as_path())
}

/// [`State::now`], what cannot be judged set aside first: a protected path it cannot look
/// at, an index it cannot read whole (git rebuilds one from the tree: `git reset`), a
/// `worktrees/` directory it cannot list (a link there, or a file: git would follow it).
fn state_now(
    judged: &[Absent],
    subs: Option<&crate::protect::Submodules>,
    admin: Option<&Path>,
    swept: &mut Sweep,
) -> State {
    match State::now(judged, subs, admin) {
        Ok((state, unjudged)) => {
            for u in unjudged {
                if Some(u.path.as_path()) == admin {
                    let a = Absent {
                        base: u.path.parent().unwrap_or(&u.path).to_path_buf(),
                        path: u.path.clone(),
                        reason: "where git registers the linked worktrees".into(),
                    };
                    swept.add(vec![aside_line(&a, Some(&u.error))]);
                } else if let Some(a) = judged.iter().find(|a| a.path == u.path) {
                    swept.add(vec![aside_line(a, Some(&u.error))]);
                }
            }
            state
        }
        Err(u) => {
            swept.add(vec![index_aside(&u.path, &u.error)]);
            // Gone now, or said loudly: the paths once more, with no submodules (git enters
            // none without an index).
            match State::now(judged, None, admin) {
                Ok((state, _)) => state,
                Err(_) => State::default(),
            }
        }
    }
}

/// Sets aside what `now` holds that `basis` does not hold as it is: protected paths (or the
/// link on the way to one), the `.git` of submodules, and what is in the linked worktrees
/// registered since ([`added_aside`]). A line for each, with whether it was set aside.
fn judge(
    now: &State,
    basis: &State,
    judged: &[Absent],
    protection: &Protection,
    swept: &mut Sweep,
) {
    for path in now.paths_not_in(basis) {
        if let Some(a) = judged.iter().find(|a| a.path == *path) {
            swept.add(vec![aside_line(a, None)]);
        }
    }
    if let Some(subs) = &protection.submodules {
        for rel in now.submodules.not_in(&basis.submodules) {
            swept.add(submodule_aside(subs, &rel));
        }
    }
    if let Some(reg) = &protection.registry {
        for entry in now.worktrees_not_in(basis) {
            added_aside(reg, entry, protection, Look::Final, true, swept);
        }
    }
}

/// How a linked worktree the agent added is looked at ([`added_aside`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Look {
    /// While the agent runs: what git is still writing is let be. A protected file the
    /// user has at the same place in the main checkout waits for the end (a checkout
    /// half-written would not compare); one that does not check out is refused once it
    /// has stayed so for [`GRACE`] (`git worktree add` writes the entry before the
    /// worktree's `.git` and `commondir`); one outside the main checkout waits for the end.
    Running,
    /// After the agent, while what it left runs: as at the end, but one that does not
    /// check out is given [`GRACE`] too, and one outside waits for the end.
    Lingering,
    /// The end (or the start): everything judged, nothing let be.
    Final,
}

/// How often the whole state is judged once inotify cannot watch all of it (after the agent:
/// while it runs, the agent is ended instead).
const POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// How long a linked worktree added while the agent runs may fail to check out before it
/// is refused: `git worktree add` writes its few files in milliseconds.
const GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// While the agent runs, or what it left: each linked worktree registered since the start
/// is judged ([`added_aside`]), and each kept is watched, so that what appears in its
/// protected places is set aside at once. Returns how soon to look again at one that does
/// not check out yet (`waiting`: since when it has not).
fn added_live(
    protection: &Protection,
    basis: &State,
    look: Look,
    waiting: &mut std::collections::HashMap<std::path::PathBuf, std::time::Instant>,
    n: &mut Notify,
    swept: &mut Sweep,
) -> io::Result<Option<std::time::Duration>> {
    let Some(reg) = &protection.registry else {
        return Ok(None);
    };
    let now = state_now(&[], None, Some(&reg.admin), swept);
    waiting.retain(|e, _| now.worktrees.contains_key(e));
    for entry in now.worktrees_not_in(basis) {
        // What git writes in it (its `.git` comes before its index) brings it back here.
        n.watch_entry(entry)?;
        let since = *waiting
            .entry(entry.clone())
            .or_insert_with(std::time::Instant::now);
        let late = since.elapsed() >= GRACE;
        match added_aside(reg, entry, protection, look, late, swept) {
            Judged::Kept(aside, subs) => {
                waiting.remove(entry);
                n.watch(&aside)?;
                n.watch_submodules(&subs)?;
            }
            Judged::Done => {
                waiting.remove(entry);
            }
            Judged::Later => {}
        }
    }
    n.watch_registry(reg)?;
    Ok(waiting
        .values()
        .map(|t| GRACE.saturating_sub(t.elapsed()))
        .min())
}

/// What [`added_aside`] made of a linked worktree the agent added.
enum Judged {
    /// Kept, its protected paths and submodules judged: to be watched.
    Kept(Vec<Absent>, crate::protect::Submodules),
    /// Judged whole: refused, or the user's.
    Done,
    /// Let be, for now.
    Later,
}

/// A linked worktree registered at `entry` that the user did not have
/// ([`crate::protect::added`]), looked at as `look` says: one kept has every protected path
/// in it set aside (but one the same as the user's own at the same place in the main
/// checkout: a checkout of the same commit), and every submodule git would enter there.
/// One refused has its entry moved out of `worktrees/` (git in it then finds no repository,
/// and no launch there starts), and its `.git` in the main checkout set aside. `late`: it
/// has not checked out for [`GRACE`].
fn added_aside(
    reg: &crate::protect::Registry,
    entry: &Path,
    protection: &Protection,
    look: Look,
    late: bool,
    swept: &mut Sweep,
) -> Judged {
    use crate::protect::Added;
    match crate::protect::added(reg, entry, &protection.root, &protection.held) {
        Added::Checked {
            top,
            mut aside,
            subs,
        } => {
            if look == Look::Running {
                aside.retain(|a| users_at(a, &top, protection).is_none());
            } else {
                aside.retain(|a| !same_as_users(a, &top, protection));
            }
            swept.add(sweep_absent(&aside));
            let now = state_now(&[], Some(&subs), None, swept);
            for rel in now.submodules.0.keys() {
                swept.add(submodule_aside(&subs, rel));
            }
            Judged::Kept(aside, subs)
        }
        // Outside, nothing is watched: judged at the end only.
        Added::Users { .. } | Added::Refused { outside: true, .. } if look != Look::Final => {
            Judged::Later
        }
        Added::Users { top, aside } => {
            for (line, ok) in sweep_absent(&aside) {
                swept.add(vec![(
                    format!(
                        "{line} (the linked worktree {} was added while the agent ran)",
                        top.display()
                    ),
                    ok,
                )]);
            }
            Judged::Done
        }
        Added::Refused { .. } if look != Look::Final && !late => Judged::Later,
        Added::Refused {
            why, top, dotgit, ..
        } => {
            swept.add(vec![match entry_aside(reg, entry) {
                Ok(Some(aside)) => (
                    format!(
                        "the linked worktree {} was added while the agent ran, and {why}: its entry {} moved aside to {}, so your git there finds no repository; look at it, then remove the worktree's directory, or add it again outside the wall",
                        top.display(),
                        entry.display(),
                        aside.display()
                    ),
                    true,
                ),
                Ok(None) => (String::new(), true),
                Err(e) => (
                    format!(
                        "the linked worktree {} was added while the agent ran, and {why}, but its entry {} could not be set aside ({e}): do not run git there before you look at {}",
                        top.display(),
                        entry.display(),
                        entry.display()
                    ),
                    false,
                ),
            }]);
            if let Some(dotgit) = dotgit {
                let a = Absent {
                    base: protection.root.clone(),
                    path: dotgit,
                    reason: "the `.git` of a linked worktree the agent added".into(),
                };
                swept.add(vec![aside_line(&a, None)]);
            }
            Judged::Done
        }
    }
}

/// The user's own at the place in the main checkout of the protected path `a` of the new
/// linked worktree at `top`, if this launch holds it read-only.
fn users_at(a: &Absent, top: &Path, protection: &Protection) -> Option<std::path::PathBuf> {
    let rel = a.path.strip_prefix(top).ok()?;
    let users = protection.root.join(rel);
    protection.covering(&users).map(|_| users)
}

/// Whether the protected path `a` of the new linked worktree at `top` is, file for file,
/// the same as the user's own ([`users_at`]): kind, mode and bytes, no link anywhere, a
/// bounded tree. Then it runs nothing the user's own does not.
fn same_as_users(a: &Absent, top: &Path, protection: &Protection) -> bool {
    let Some(users) = users_at(a, top, protection) else {
        return false;
    };
    let mut budget = SAME_BUDGET;
    same_tree(&a.path, &users, &mut budget).unwrap_or(false)
}

/// How many entries, and bytes, [`same_as_users`] compares at most.
const SAME_BUDGET: (usize, u64) = (256, 4 << 20);

fn same_tree(a: &Path, b: &Path, budget: &mut (usize, u64)) -> io::Result<bool> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let (ma, mb) = (fs::symlink_metadata(a)?, fs::symlink_metadata(b)?);
    if budget.0 == 0 || ma.mode() != mb.mode() {
        return Ok(false);
    }
    budget.0 -= 1;
    if ma.is_file() {
        if ma.len() != mb.len() || ma.len() > budget.1 {
            return Ok(false);
        }
        budget.1 -= ma.len();
        let read = |p: &Path| -> io::Result<Vec<u8>> {
            let mut f = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(p)?;
            let mut out = Vec::new();
            io::Read::read_to_end(&mut io::Read::take(&mut f, ma.len() + 1), &mut out)?;
            Ok(out)
        };
        return Ok(read(a)? == read(b)?);
    }
    if !ma.is_dir() {
        return Ok(false);
    }
    let names = |p: &Path| -> io::Result<Vec<std::ffi::OsString>> {
        let mut v = fs::read_dir(p)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<Vec<_>>>()?;
        v.sort();
        Ok(v)
    };
    let (na, nb) = (names(a)?, names(b)?);
    if na != nb {
        return Ok(false);
    }
    for n in na {
        if !same_tree(&a.join(&n), &b.join(&n), budget)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Moves the registered worktree `entry` out of `<common>/worktrees/` into the common dir
/// (`worktree-<id>.landwall-swept-…`), where git looks for no worktree: renamed aside in
/// its own directory, it would still be one. `None` if it is gone.
fn entry_aside(
    reg: &crate::protect::Registry,
    entry: &Path,
) -> io::Result<Option<std::path::PathBuf>> {
    let open = |p: &Path| {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        sys::open_no_symlinks(None, &c, libc::O_RDONLY | libc::O_DIRECTORY)
    };
    let (Some(name), Some(admin)) = (entry.file_name(), entry.parent()) else {
        return Ok(None);
    };
    let from = open(admin)?;
    let to = open(&reg.common)?;
    let mut prefix = std::ffi::OsString::from("worktree-");
    prefix.push(name);
    match crate::rename_aside_into(from.as_fd(), name, to.as_fd(), &prefix) {
        Ok(aside) => Ok(Some(reg.common.join(aside))),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Sets `a` (or the link on the way to it) aside; the line says so, or why not.
fn aside_line(a: &Absent, unjudged: Option<&io::Error>) -> (String, bool) {
    match set_aside_restoring_modes(a) {
        Ok(Some(s)) => (
            match unjudged {
                Some(e) => format!("{s} (it could not be looked at: {e})"),
                None => s.to_string(),
            },
            true,
        ),
        Ok(None) => (String::new(), true),
        Err(e) => (
            format!(
                "could not check or set aside the protected path {} ({}): {e}; if it exists now, the agent may have made it: look before you run anything there",
                a.path.display(),
                a.reason
            ),
            false,
        ),
    }
}

/// Sets the index at `index` aside: git would read it, this could not.
fn index_aside(index: &Path, e: &io::Error) -> (String, bool) {
    let a = Absent {
        path: index.to_path_buf(),
        base: index.parent().unwrap_or(index).to_path_buf(),
        reason: "".into(),
    };
    match set_aside_restoring_modes(&a) {
        Ok(Some(s)) => (
            format!(
                "the index {} could not be read ({e}): moved aside to {}, so that git enters no submodule the agent may have made; look at `git diff --submodule HEAD`, then `git reset` rebuilds it from the tree",
                index.display(),
                s.aside.display()
            ),
            true,
        ),
        Ok(None) => (String::new(), true),
        Err(e2) => (
            format!(
                "the index {} could not be read ({e}) nor set aside ({e2}): a submodule the agent made would run its config and hooks on your next `git status`; look with `git diff --submodule` first",
                index.display()
            ),
            false,
        ),
    }
}

/// Says on stderr what the sweep set aside (nothing when nothing was).
fn report(lines: &[String]) {
    for line in lines.iter().filter(|l| !l.is_empty()) {
        eprintln!("landwall: {}", crate::spool::printable(line));
    }
}

/// The objects' thread: the quarantine emptied every [`PERIOD_MS`] while the agent runs;
/// once `phase` is [`AGENT_ENDED`], one pass and word on
/// `caught_up`, then on as before while what the agent left runs; at [`ALL_ENDED`], a last
/// pass. All on one budget ([`crate::objects::Budget`]), so a quarantine the agent filled
/// with work costs a bounded time per launch.
fn move_objects(
    q: &Quarantine,
    git: &Path,
    phase: &AtomicU8,
    caught_up: std::sync::mpsc::Sender<()>,
) {
    let mut budget = crate::objects::Budget::per_launch();
    let mut once = |when: &str| match crate::objects::migrate(&q.dir, &q.objects, git, &mut budget)
    {
        Ok(m) => {
            for r in &m.rejected {
                log::debug!("quarantine {}: {when}: kept back: {r}", q.dir.display());
            }
        }
        Err(e) => log::debug!("quarantine {}: {when}: {e}", q.dir.display()),
    };
    let mut told = false;
    loop {
        let now = phase.load(Ordering::SeqCst);
        if now == ALL_ENDED {
            break;
        }
        if now == AGENT_ENDED && !told {
            once("after the agent");
            if caught_up.send(()).is_err() {
                log::debug!("watcher: no one waits for the objects");
            }
            told = true;
        } else {
            once("while the agent's processes run");
        }
        for _ in 0..PERIOD_MS / 20 {
            if phase.load(Ordering::SeqCst) != now {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    once("after the last process");
}

/// While the agent runs: each absent protected path set aside as soon as it appears
/// (inotify on the directories it would appear in), and the submodules judged whenever the
/// index or one of them changes, so that a program outside the wall that runs in the
/// worktree meanwhile does not meet them. Then, once the agent has exited, the end judged
/// against `basis`. If watching fails while the agent runs, the agent is ended.
fn run(
    end: End<'_>,
    protection: &Protection,
    judged: &[Absent],
    (basis, nested): (
        &State,
        &[(&crate::protect::Submodules, crate::gitlinks::Populated)],
    ),
    notify: &mut Option<Notify>,
    swept: &mut Sweep,
    privates: &mut [Private],
) {
    let sweep = protection.absent.as_slice();
    let subs = protection.submodules.as_ref();
    // What appeared between the start's look and the watches.
    swept.add(sweep_absent(sweep));
    swept.add(sweep_patterns(protection, None));
    if let Some(n) = notify.as_mut() {
        n.listed_from(std::time::Instant::now());
    }
    // The linked worktrees added that do not check out yet, and when to look at them again.
    let mut waiting = std::collections::HashMap::new();
    let mut again: Option<std::time::Duration> = None;
    // Once a watch could not be added after the agent (what it left running used up the
    // user's inotify watches, found by review): the whole state judged every [`POLL`].
    let mut polling = false;
    loop {
        let timeout = match (again, polling) {
            (Some(a), true) => Some(a.min(POLL)),
            (None, true) => Some(POLL),
            (a, false) => a,
        };
        let (exited, changed) = match wait_either(&end, notify.as_ref(), timeout) {
            Ok(ready) => ready,
            Err(e) => {
                end_agent(&end, &format!("waiting for the agent: {e}"), swept);
                (true, false)
            }
        };
        if let (true, Some(n)) = (changed, notify.as_mut()) {
            let submodules_moved = n.drain() || polling;
            swept.add(sweep_absent(sweep));
            // A directory on the way may have appeared: watch it too.
            let mut watched = n.watch(sweep);
            if polling {
                // Watches were lost: what the events would name, every name there says.
                n.appeared = Appeared::All;
            }
            let since = std::time::Instant::now();
            match n.appeared() {
                Some(named) => swept.add(sweep_patterns(protection, Some(&named))),
                None => {
                    swept.add(sweep_patterns(protection, None));
                    n.listed_from(since);
                }
            }
            if let (true, Some(subs)) = (submodules_moved, subs) {
                let now = state_now(&[], Some(subs), None, swept);
                for rel in now.submodules.not_in(&basis.submodules) {
                    swept.add(submodule_aside(subs, &rel));
                }
                watched = watched
                    .and_then(|()| n.watch_submodules(subs))
                    .and_then(|()| n.watch_populated(subs, &now.submodules));
            }
            if submodules_moved {
                for (subs, was) in nested {
                    judge_nested(subs, was, swept);
                    watched = watched.and_then(|()| n.watch_submodules(subs));
                }
            }
            let look = match end {
                End::Agent(_) => Look::Running,
                End::Last(_) => Look::Lingering,
            };
            watched = match watched {
                Ok(()) => {
                    added_live(protection, basis, look, &mut waiting, n, swept).map(|a| again = a)
                }
                Err(e) => Err(e),
            };
            match (watched, &end) {
                (Ok(()), _) => {}
                (Err(_), End::Last(_)) if polling => {}
                // The agent is gone; what it left may still plant: looked for, not waited
                // for.
                (Err(e), End::Last(_)) => {
                    polling = true;
                    swept.lines.push(format!("the watcher could not watch all that what the agent left running may change (inotify: {e}): it looks every {} ms until that has ended", POLL.as_millis()));
                }
                (Err(e), End::Agent(_)) => end_agent(&end, &format!("inotify: {e}"), swept),
            }
            if polling {
                let now = state_now(judged, subs, admin(protection), swept);
                judge(&now, basis, judged, protection, swept);
                for (subs, was) in nested {
                    judge_nested(subs, was, swept);
                }
            }
        }
        if exited {
            break;
        }
    }
    // The end, judged whole: the sweep first, since it is what a command run right after
    // the agent must not meet.
    swept.add(sweep_absent(sweep));
    swept.add(sweep_patterns(protection, None));
    let now = state_now(judged, subs, admin(protection), swept);
    judge(&now, basis, judged, protection, swept);
    for (subs, was) in nested {
        judge_nested(subs, was, swept);
    }
    for (i, g) in protection.guards.iter().enumerate() {
        let line = match privates.iter_mut().find(|p| p.guard == i) {
            Some(p) => merge_line(p, g),
            None => guard_line(g),
        };
        if let Some(line) = line {
            swept.lines.push(line);
        }
    }
}

/// The file a guard judges (`dir`, `name`) and how ([`crate::agentstate::Judge`]).
fn judge_of(g: &crate::protect::Guard) -> (&Path, &str, crate::agentstate::Judge<'_>) {
    use crate::agentstate::Judge;
    use crate::protect::Guard;
    match g {
        Guard::ClaudeJson {
            dir, name, user, ..
        } => (dir, name, Judge::Claude { user }),
        Guard::OpenCodeAuth {
            dir, name, start, ..
        } => (dir, name, Judge::Auth { start }),
    }
}

/// What a judgement of a private copy changed, in words, for `file`.
fn judged_words(g: &crate::protect::Guard, file: &Path, what: &[String], after: bool) -> String {
    let after = if after {
        ", after the agent changed them"
    } else {
        ""
    };
    match g {
        crate::protect::Guard::ClaudeJson { user, .. } => format!(
            "{}: put back {} as {} has them{after}: they name commands Claude Code runs, which only you may change (outside the wall, in that file)",
            file.display(),
            what.join(", "),
            user.display()
        ),
        crate::protect::Guard::OpenCodeAuth { .. } => auth_words(file, what, after),
    }
}

/// What [`crate::agentstate::Judge::Auth`] put back in OpenCode's `auth.json` (`file`), in
/// words: `after` the agent changed it, or before it started.
fn auth_words(file: &Path, what: &[String], after: &str) -> String {
    format!(
        "{}: put back OpenCode's sign-ins as they were when the launch began ({}){after}: each names where OpenCode sends its requests, walled or not, and only the tokens it refreshes are kept; sign in with `opencode auth login` outside the wall",
        file.display(),
        what.join(", ")
    )
}

/// A launch's private copy of a guarded state file ([`crate::protect::Hold::Private`]):
/// what its agent writes there reaches the file every launch shares only through
/// [`merge_line`].
#[derive(Debug)]
struct Private {
    /// The shared file it covers in the launch's namespace.
    path: PathBuf,
    /// Its guard's index in the protection's `guards`.
    guard: usize,
    /// The copy (unlinked: no other process can name it).
    fd: OwnedFd,
    /// What it held when the launch began, or when it was last merged.
    base: Vec<u8>,
}

/// The listener and the private copies in what the launch sent
/// ([`Ready::give_listener`]), each copy's content read now, before the agent starts.
fn privates_of(
    data: &[u8],
    fds: Vec<OwnedFd>,
    protection: &Protection,
) -> Result<(Option<OwnedFd>, Vec<Private>), String> {
    let (&has_listener, rest) = data.split_first().ok_or("an empty message")?;
    let mut fds = fds.into_iter();
    let listener = match has_listener {
        0 => None,
        1 => Some(fds.next().ok_or("no listener attached")?),
        _ => return Err("a malformed message".into()),
    };
    if rest.len() % 2 != 0 {
        return Err("a malformed message".into());
    }
    let mut privates = Vec::new();
    for i in rest.chunks_exact(2) {
        let i = usize::from(u16::from_le_bytes([i[0], i[1]]));
        let held = protection
            .held
            .get(i)
            .filter(|h| h.hold == crate::protect::Hold::Private)
            .ok_or("a private copy of no held path")?;
        let fd = fds.next().ok_or("a private copy not attached")?;
        let failed = |e: io::Error| format!("{}: {e}", held.path.display());
        let mut base = crate::agentstate::read_fd(fd.as_fd()).map_err(failed)?;
        let (guard, g) = protection
            .guards
            .iter()
            .enumerate()
            .find(|(_, g)| {
                let (dir, name, _) = judge_of(g);
                dir.join(name) == held.path
            })
            .ok_or("a private copy of no guarded file")?;
        // Judged once more, before the agent starts: the shared file it was copied from may
        // have changed since the launch judged it (a launch without a copy of its own, beside
        // this one).
        if let Some((judged, what)) =
            crate::agentstate::judge_bytes(&base, judge_of(g).2).map_err(failed)?
        {
            crate::agentstate::write_fd(fd.as_fd(), &judged).map_err(failed)?;
            report(&[judged_words(g, &held.path, &what, false)]);
            base = judged;
        }
        privates.push(Private {
            path: held.path.clone(),
            guard,
            fd,
            base,
        });
    }
    if fds.next().is_some() {
        return Err("more descriptors than named".into());
    }
    Ok((listener, privates))
}

/// Brings what the agent wrote in its private copy `p` into the file every launch shares,
/// judged by its guard `g` ([`crate::agentstate::merge`]): one line, if anything was put
/// back or removed, or the agent's copy could not be taken.
fn merge_line(p: &mut Private, g: &crate::protect::Guard) -> Option<String> {
    let ours = match crate::agentstate::read_fd(p.fd.as_fd()) {
        Ok(o) => o,
        Err(e) => {
            return Some(format!(
                "{}: what the agent wrote could not be read ({e}), and was not kept",
                p.path.display()
            ))
        }
    };
    if ours == p.base {
        return None;
    }
    let (dir, name, judge) = judge_of(g);
    let line = match crate::agentstate::merge(dir, name, judge, &p.base, &ours) {
        Ok(crate::agentstate::Merged::Kept) => None,
        Ok(crate::agentstate::Merged::PutBack(what)) => Some(judged_words(g, &p.path, &what, true)),
        Ok(crate::agentstate::Merged::NotJson) => Some(format!(
            "{}: the agent left it unreadable as JSON; what it wrote was not kept",
            p.path.display()
        )),
        Err(e) => Some(format!(
            "{}: what the agent wrote could not be kept ({e})",
            p.path.display()
        )),
    };
    p.base = ours;
    line
}

/// Judges `g` again as the launch ends: what was put back or removed, in one line.
fn guard_line(g: &crate::protect::Guard) -> Option<String> {
    use crate::protect::{file_ident, Guard};
    match g {
        Guard::ClaudeJson {
            dir, name, judged, ..
        }
        | Guard::OpenCodeAuth {
            dir, name, judged, ..
        } if judged.is_some() && file_ident(&dir.join(name)) == *judged => None,
        Guard::ClaudeJson {
            dir, name, user, ..
        } => {
            let copy = dir.join(name);
            match crate::agentstate::guard(dir, name, user) {
                Ok(crate::agentstate::Guarded::Same) => None,
                Ok(crate::agentstate::Guarded::PutBack(keys)) => Some(format!(
                    "{}: put back {} as {} has them, after the agent changed them",
                    copy.display(),
                    keys.join(", "),
                    user.display()
                )),
                Ok(crate::agentstate::Guarded::SetAside(to)) => Some(format!(
                    "{} could not be read as JSON after the agent: moved aside to {}",
                    copy.display(),
                    to.display()
                )),
                Err(e) => Some(format!(
                    "{} could not be judged after the agent ({e}): its MCP servers may be the agent's; look before you run Claude Code there",
                    copy.display()
                )),
            }
        }
        Guard::OpenCodeAuth {
            dir, name, start, ..
        } => {
            let file = dir.join(name);
            match crate::agentstate::judge_auth(dir, name, start) {
                Ok(changed) if changed.is_empty() => None,
                Ok(changed) => Some(auth_words(
                    &file,
                    &changed,
                    ", after the agent changed them",
                )),
                Err(e) => Some(format!(
                    "{} could not be judged after the agent ({e}): a sign-in in it may be the agent's; look at `opencode auth list` before you run OpenCode",
                    file.display()
                )),
            }
        }
    }
}

/// Sets aside the `.git` of each submodule of a nested worktree's index that git would
/// enter now but did not (or not as it was) at the start.
fn judge_nested(
    subs: &crate::protect::Submodules,
    was: &crate::gitlinks::Populated,
    swept: &mut Sweep,
) {
    let now = state_now(&[], Some(subs), None, swept);
    for rel in now.submodules.not_in(was) {
        swept.add(submodule_aside(subs, &rel));
    }
}

/// What the watcher waits for: the agent's exit (its pidfd), or the end of the last
/// process that inherited its filter (the listener hangs up).
enum End<'a> {
    Agent(&'a OwnedFd),
    Last(&'a OwnedFd),
}

/// Ends the agent: the watcher can no longer do its job. (After the agent, what it left
/// running cannot be named; the mark stays, and the next launch judges the start.)
fn end_agent(end: &End<'_>, why: &str, swept: &mut Sweep) {
    swept.failed = true;
    let End::Agent(pidfd) = end else {
        swept.lines.push(format!("the watcher could no longer watch ({why}) what the agent left running: the next launch here judges the worktree before its agent starts; look at the protected paths before you run anything there"));
        return;
    };
    let ended = sys::pidfd_send_signal(pidfd.as_fd(), libc::SIGKILL);
    swept.lines.push(match ended {
        Ok(()) => format!("the watcher could no longer watch ({why}): the agent was ended"),
        Err(e) => format!("the watcher could no longer watch ({why}), and could not end the agent ({e}): look at the worktree's protected paths"),
    });
}

/// Points standard output and error at `/dev/null`.
fn give_back_terminal(null: &OwnedFd) -> io::Result<()> {
    nix::unistd::dup2_stdout(null)?;
    nix::unistd::dup2_stderr(null)?;
    Ok(())
}

/// What is watched in a submodule's directories: anything made, renamed in, written or
/// given another mode there.
fn submodule_dir_mask() -> nix::sys::inotify::AddWatchFlags {
    use nix::sys::inotify::AddWatchFlags;
    AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// An inotify instance on the directories where absent protected paths would appear, and
/// on what a submodule check looks at: the index (an `index` renamed into its directory) and
/// each submodule's directory, git dir and hooks.
struct Notify {
    inotify: nix::sys::inotify::Inotify,
    /// The indexes' directories (the worktree's, and its nested worktrees').
    index_dirs: std::collections::HashSet<nix::sys::inotify::WatchDescriptor>,
    /// The submodules' directories, git dirs and hooks.
    submodule_dirs: std::collections::HashSet<nix::sys::inotify::WatchDescriptor>,
    /// The directories of the absent entries that stand for a pattern of names
    /// ([`Absent::pattern`]), each with its patterns.
    pattern_dirs: std::collections::HashMap<
        nix::sys::inotify::WatchDescriptor,
        (std::path::PathBuf, Vec<std::ffi::OsString>),
    >,
    /// What the patterns stand for now: the names made or renamed into their directories
    /// since last asked ([`Notify::appeared`]).
    appeared: Appeared,
    /// When the patterns' directories were last listed whole, and what that took.
    listed: Option<(std::time::Instant, std::time::Duration)>,
}

/// What of the patterns' directories is to be looked at.
#[derive(Debug, Default)]
enum Appeared {
    /// These paths, made or renamed there.
    #[default]
    None,
    Named(Vec<std::path::PathBuf>),
    /// Every name there: events were lost, or a directory is watched that was not.
    All,
}

impl Notify {
    fn new() -> io::Result<Notify> {
        use nix::sys::inotify::{InitFlags, Inotify};
        Ok(Notify {
            inotify: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)?,
            index_dirs: std::collections::HashSet::new(),
            submodule_dirs: std::collections::HashSet::new(),
            pattern_dirs: std::collections::HashMap::new(),
            appeared: Appeared::None,
            listed: None,
        })
    }

    /// What the patterns stand for that is to be looked at now: `None` for every name in
    /// their directories. A whole listing follows the last one after ten times what that
    /// took at the soonest (an agent that floods the queue until events are lost, or fills
    /// the directory, keeps the watcher at a tenth of a core; what waits is looked at with
    /// the next event, and at the end, whole).
    fn appeared(&mut self) -> Option<Vec<std::path::PathBuf>> {
        match std::mem::take(&mut self.appeared) {
            Appeared::None => Some(Vec::new()),
            Appeared::Named(v) => Some(v),
            Appeared::All => {
                let due = self
                    .listed
                    .is_none_or(|(at, took)| at.elapsed() >= took.saturating_mul(10));
                if due {
                    None
                } else {
                    self.appeared = Appeared::All;
                    Some(Vec::new())
                }
            }
        }
    }

    /// Notes that the patterns' directories were listed whole, from `since` until now.
    fn listed_from(&mut self, since: std::time::Instant) {
        self.listed = Some((std::time::Instant::now(), since.elapsed()));
    }

    /// Watches the index's directory, and each submodule of the index: its directory (a
    /// `.git` made there), its git dir and its hooks (anything written or renamed there).
    fn watch_submodules(&mut self, subs: &crate::protect::Submodules) -> io::Result<()> {
        use nix::sys::inotify::AddWatchFlags;
        let dir_mask = submodule_dir_mask();
        if let Some(dir) = subs.index.parent() {
            let wd = self.inotify.add_watch(
                dir,
                AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_ATTRIB
                    | AddWatchFlags::IN_ONLYDIR,
            )?;
            self.index_dirs.insert(wd);
        }
        // An index that cannot be read is judged (and set aside) by the caller.
        let Ok(links) = crate::gitlinks::gitlinks(&subs.index) else {
            return Ok(());
        };
        for rel in links {
            let sub = subs.root.join(&rel);
            // Not there yet: where it would appear (a repository renamed into place in one
            // step, by the agent or by what it left running, makes no event in it).
            if std::fs::symlink_metadata(&sub).is_err() {
                let a = Absent {
                    path: sub.clone(),
                    base: subs.root.clone(),
                    reason: "".into(),
                };
                if let Some(dir) = nearest_existing_dir(&a) {
                    match self.inotify.add_watch(&dir, dir_mask) {
                        Ok(wd) => {
                            self.submodule_dirs.insert(wd);
                        }
                        Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                continue;
            }
            self.watch_submodule(&sub)?;
        }
        Ok(())
    }

    /// Watches each populated submodule of `populated` (its submodules, to any depth, too)
    /// as [`Notify::watch_submodules`] watches those of the index.
    fn watch_populated(
        &mut self,
        subs: &crate::protect::Submodules,
        populated: &crate::gitlinks::Populated,
    ) -> io::Result<()> {
        for rel in populated.0.keys() {
            self.watch_submodule(&subs.root.join(rel))?;
        }
        Ok(())
    }

    /// Watches the submodule at `sub`: its directory (a `.git` made there), its git dir
    /// (its config, index, commondir) and its hooks and info (anything written or renamed
    /// there).
    fn watch_submodule(&mut self, sub: &Path) -> io::Result<()> {
        let dir_mask = submodule_dir_mask();
        let mut dirs = vec![sub.to_path_buf()];
        if let Some(g) = crate::gitlinks::git_dir_of(sub) {
            dirs.push(g.join("hooks"));
            dirs.push(g.join("info"));
            dirs.push(g);
        }
        for d in dirs {
            match self.inotify.add_watch(&d, dir_mask) {
                Ok(wd) => {
                    self.submodule_dirs.insert(wd);
                }
                // Not there (not populated, no hooks): nothing to watch in it.
                Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Watches a registered worktree's entry for what is written or renamed in it.
    fn watch_entry(&self, entry: &Path) -> io::Result<()> {
        use nix::sys::inotify::AddWatchFlags;
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_CLOSE_WRITE
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        match self.inotify.add_watch(entry, mask) {
            Ok(_) | Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Watches where linked worktrees are registered (or, before the first, where that
    /// directory would appear).
    fn watch_registry(&mut self, reg: &crate::protect::Registry) -> io::Result<()> {
        self.watch(&[Absent {
            path: reg.admin.join("x"),
            base: reg.common.clone(),
            reason: "".into(),
        }])
    }

    /// Watches, for each absent path, the nearest directory on the way that exists (a
    /// directory already watched is watched once). A pattern's own directory, watched
    /// for the first time, is listed whole with the next look ([`Notify::appeared`]).
    fn watch(&mut self, sweep: &[Absent]) -> io::Result<()> {
        use nix::sys::inotify::AddWatchFlags;
        let mask = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        for a in sweep {
            if let Some(dir) = nearest_existing_dir(a) {
                match watch_as_owner(&self.inotify, &dir, mask) {
                    Ok(wd) => {
                        if let Some((at, pattern)) = a.pattern().filter(|(at, _)| *at == dir) {
                            let (_, patterns) = self.pattern_dirs.entry(wd).or_insert_with(|| {
                                self.appeared = Appeared::All;
                                (at.to_path_buf(), Vec::new())
                            });
                            if !patterns.iter().any(|p| p == pattern) {
                                patterns.push(pattern.to_os_string());
                            }
                        }
                    }
                    // Gone or replaced meanwhile: the next event or the exit looks again.
                    Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }

    /// Reads every pending event. Returns whether one concerns the submodules (the index
    /// replaced, or a change in a submodule's directory or git dir); for the absent paths
    /// what they name does not matter, the sweep looks.
    fn drain(&mut self) -> bool {
        use std::os::unix::ffi::OsStrExt;
        let mut submodules = false;
        loop {
            match self.inotify.read_events() {
                Ok(events) if !events.is_empty() => {
                    for e in events {
                        let index = self.index_dirs.contains(&e.wd)
                            && e.name.as_deref().is_some_and(|n| n == "index");
                        // Events were lost: one of them may have been the index's.
                        let lost = e
                            .mask
                            .contains(nix::sys::inotify::AddWatchFlags::IN_Q_OVERFLOW);
                        if index || lost || self.submodule_dirs.contains(&e.wd) {
                            submodules = true;
                        }
                        if lost {
                            self.appeared = Appeared::All;
                        }
                        // A name a pattern stands for, made or renamed into its directory.
                        let named = self.pattern_dirs.get(&e.wd).zip(e.name.as_deref());
                        if let Some(((dir, patterns), name)) = named {
                            let stands = patterns.iter().any(|p| {
                                crate::protect::name_matches(p.as_bytes(), name.as_bytes())
                            });
                            match &mut self.appeared {
                                Appeared::None if stands => {
                                    self.appeared = Appeared::Named(vec![dir.join(name)]);
                                }
                                Appeared::Named(v) if stands => v.push(dir.join(name)),
                                _ => {}
                            }
                        }
                    }
                }
                Ok(_) | Err(_) => break,
            }
        }
        submodules
    }
}

/// `inotify_add_watch` of the directory `dir`, as its owner where the agent took the read
/// right from it ([`crate::as_owner`]): refused, the watcher would have had to end the agent.
fn watch_as_owner(
    inotify: &nix::sys::inotify::Inotify,
    dir: &Path,
    mask: nix::sys::inotify::AddWatchFlags,
) -> nix::Result<nix::sys::inotify::WatchDescriptor> {
    match inotify.add_watch(dir, mask) {
        Err(nix::errno::Errno::EACCES) => {
            let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
                .map_err(|_| nix::errno::Errno::EINVAL)?;
            let fd = sys::open_no_symlinks(None, &path, libc::O_PATH | libc::O_DIRECTORY)
                .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))?;
            crate::as_owner(&fd, 0o400, || {
                inotify.add_watch(dir, mask).map_err(io::Error::from)
            })
            .map_err(|e| nix::errno::Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
        }
        other => other,
    }
}

/// Waits for the end (the agent's pidfd readable, the listener hung up) or an inotify
/// event. Returns (ended, changed).
fn wait_either(
    end: &End<'_>,
    notify: Option<&Notify>,
    timeout: Option<std::time::Duration>,
) -> io::Result<(bool, bool)> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    // A listener that hears no system call is readable never; it polls POLLHUP (always
    // reported) once no task uses the filter.
    let first = match end {
        End::Agent(pidfd) => PollFd::new(pidfd.as_fd(), PollFlags::POLLIN),
        End::Last(listener) => PollFd::new(listener.as_fd(), PollFlags::empty()),
    };
    let mut fds = vec![first];
    if let Some(n) = notify {
        fds.push(PollFd::new(n.inotify.as_fd(), PollFlags::POLLIN));
    }
    let timeout = match timeout {
        // At least a millisecond: none would spin.
        Some(t) => PollTimeout::try_from(t.max(std::time::Duration::from_millis(1)))
            .unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    };
    loop {
        match poll(&mut fds, timeout) {
            // Timed out: a look again is due, as if something had changed.
            Ok(0) => return Ok((false, notify.is_some())),
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
/// descriptor path it is given) read-only; `/dev/null`; the record directory read-write;
/// where protected paths are set aside (the nearest directory on the way to each), and the
/// worktree and git dirs the submodules' check reads. Nothing else of `$HOME`, nor `/tmp`.
/// Fully enforced at `min_abi` (the launch's own minimum) or above, or an error.
pub fn wall_self(
    q: Option<&Quarantine>,
    protection: &Protection,
    record: Option<&Path>,
    min_abi: u32,
) -> Result<crate::wall::Enforced, crate::wall::WallError> {
    let judged = crate::record::judged(protection);
    let sweep = judged.as_slice();
    use crate::policy::{Access, Rule};
    let mut rules: Vec<Rule> = Vec::new();
    if let Some(dir) = record {
        rules.push(Rule {
            path: dir.to_path_buf(),
            access: Access::ReadWrite,
            is_dir: true,
            reason: "the record of what is the user's own".into(),
        });
    }
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
        if !rules
            .iter()
            .any(|r| dir.starts_with(&r.path) && r.access.writes())
        {
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
    for subs in protection.submodules.iter().chain(&protection.nested) {
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
    // The state files judged again at the end: their directory (a new copy is renamed over
    // the file), and the user's file read.
    for g in &protection.guards {
        let (dir, user) = match g {
            crate::protect::Guard::ClaudeJson { dir, user, .. } => (dir, Some(user)),
            crate::protect::Guard::OpenCodeAuth { dir, .. } => (dir, None),
        };
        if !rules
            .iter()
            .any(|r| dir.starts_with(&r.path) && r.access.writes())
        {
            rules.push(Rule {
                path: dir.clone(),
                access: Access::ReadWrite,
                is_dir: true,
                reason: "a state file judged at the end".into(),
            });
        }
        if let Some(user) = user.filter(|u| u.is_file()) {
            rules.push(Rule {
                path: user.clone(),
                access: Access::ReadOnly,
                is_dir: false,
                reason: "the user's file it is judged against".into(),
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

/// Standard input onto /dev/null, every descriptor above 2 but those in `keep` closed, cwd
/// `/`. Standard output and error are kept until the watcher exits, on purpose: a caller
/// that waits for the end of the agent's output (a pipeline, `$(…)`, a test harness) then
/// gets it only once the last objects are in the repository, so the commits an agent made
/// just before exiting are there when the caller looks. Only the sweep's report is written
/// to them.
fn detach(keep: &[RawFd]) -> io::Result<()> {
    let null = fs::File::open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    drop(null);
    let mut keep = keep.to_vec();
    keep.sort_unstable();
    let mut from = 3;
    for k in keep.into_iter().filter(|&k| k >= 3) {
        if k > from {
            sys::close_range(from, k - 1)?;
        }
        from = k + 1;
    }
    sys::close_range(from, i32::MAX)?;
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

/// Sets aside the `.git` of the submodule `rel`, which the user's record does not hold as it
/// is: git then takes it for one not checked out, and enters it no more. One line, with
/// whether it was set aside (none if it is gone).
fn submodule_aside(subs: &crate::protect::Submodules, rel: &Path) -> Vec<(String, bool)> {
    let a = Absent {
        path: subs.root.join(rel).join(".git"),
        base: subs.root.clone(),
        reason: "".into(),
    };
    match set_aside_restoring_modes(&a) {
        Ok(Some(s)) => vec![(
            format!(
                "the submodule {} is not one you had (your next `git status` would run its config and hooks): its .git moved aside to {}; look at it, then move it back outside the wall or run `git submodule update --init`",
                rel.display(),
                s.aside.display()
            ),
            true,
        )],
        Ok(None) => Vec::new(),
        Err(e) => vec![(
            format!(
                "the submodule {} is not one you had, and its .git could not be set aside ({e}): your next `git status` would run its config and hooks; look at it first",
                rel.display()
            ),
            false,
        )],
    }
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
/// A pattern ([`Absent::pattern`]) is no path of its own: [`sweep_patterns`] looks for it.
pub fn sweep_absent(list: &[Absent]) -> Vec<(String, bool)> {
    list.iter()
        .filter(|a| a.pattern().is_none())
        .map(|a| aside_line(a, None))
        .filter(|(line, _)| !line.is_empty())
        .collect()
}

/// Sets aside what the patterns among `protection`'s absent entries stand for
/// ([`Absent::pattern`]) that the launch did not hold when it began (those are the user's):
/// of `named`, those paths; `None`, every name in the patterns' directories. A line for
/// each path set aside, and for each directory that could not be listed (what is in it was
/// not judged: said, as failed).
fn sweep_patterns(protection: &Protection, named: Option<&[PathBuf]>) -> Vec<(String, bool)> {
    use std::os::unix::ffi::OsStrExt;
    let mut out = Vec::new();
    for a in &protection.absent {
        let Some((dir, pattern)) = a.pattern() else {
            continue;
        };
        let stands = |name: &std::ffi::OsStr| {
            crate::protect::name_matches(pattern.as_bytes(), name.as_bytes())
        };
        let found: Vec<PathBuf> = match named {
            Some(named) => named
                .iter()
                .filter(|p| p.parent() == Some(dir) && p.file_name().is_some_and(stands))
                .cloned()
                .collect(),
            None => match names_in(dir) {
                Ok(names) => names
                    .into_iter()
                    .filter(|n| stands(n))
                    .map(|n| dir.join(n))
                    .collect(),
                // Not there: nothing is in it.
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Vec::new(),
                Err(e) => {
                    out.push((
                        format!(
                            "could not list {} to find {} ({}): {e}; what is there may be the agent's: look before you run anything there",
                            dir.display(),
                            a.path.display(),
                            a.reason
                        ),
                        false,
                    ));
                    continue;
                }
            },
        };
        for path in found {
            if protection.held.iter().any(|h| h.path == path) {
                continue;
            }
            let one = Absent {
                path,
                base: a.base.clone(),
                reason: a.reason.clone(),
            };
            let line = aside_line(&one, None);
            if !line.0.is_empty() || !line.1 {
                out.push(line);
            }
        }
    }
    out
}

/// The names in the directory `dir` (a real path: a link met on the way is refused), read
/// by descriptor; opened as its owner where the agent took that right ([`crate::as_owner`]).
fn names_in(dir: &Path) -> io::Result<Vec<std::ffi::OsString>> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let at = sys::open_no_symlinks(None, &path, libc::O_PATH | libc::O_DIRECTORY)?;
    let again = std::ffi::CString::new(format!("/proc/self/fd/{}", at.as_raw_fd()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = crate::as_owner(&at, 0o500, || {
        nix::fcntl::open(
            again.as_c_str(),
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .map_err(io::Error::from)
    })?;
    let mut d = nix::dir::Dir::from_fd(fd)?;
    d.iter()
        .filter_map(|e| match e {
            Ok(e) if matches!(e.file_name().to_bytes(), b"." | b"..") => None,
            Ok(e) => Some(Ok(
                std::ffi::OsStr::from_bytes(e.file_name().to_bytes()).to_os_string()
            )),
            Err(e) => Some(Err(io::Error::from(e))),
        })
        .collect()
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

fn sweep_one(a: &Absent, opened: &mut Vec<(OwnedFd, u32)>) -> io::Result<Option<Swept>> {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::Mode;
    let Ok(rel) = a.path.strip_prefix(&a.base) else {
        return Ok(None);
    };
    let base = std::ffi::CString::new(a.base.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // Each directory on the way is opened `O_PATH`: looked at and renamed in, never listed,
    // so the watcher's wall need grant only the nearest one that existed at the start
    // (found when the way down is longer: OpenCode's snapshot git dirs).
    let mut dir = match sys::open_no_symlinks(None, &base, libc::O_PATH | libc::O_DIRECTORY) {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let parts: Vec<_> = rel.components().map(|c| c.as_os_str().to_owned()).collect();
    // The base, where the way down (and a rename) begins, must be searchable and writable
    // for the owner before anything in it is looked at (an agent that took that from its
    // state directory would otherwise blind the sweep, found by review).
    let st = nix::sys::stat::fstat(&dir)?;
    if st.st_mode & 0o300 != 0o300 && st.st_uid == nix::unistd::geteuid().as_raw() {
        let fd = dir.try_clone()?;
        chmod_fd(&fd, (st.st_mode & 0o7777) | 0o700)?;
        opened.push((fd, st.st_mode & 0o7777));
    }
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
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
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
