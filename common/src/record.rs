//! The record of what is the user's own in a worktree's protected places: which protected
//! paths exist and which submodules git would enter, each with what it is (inode and change
//! time, which the agent cannot forge). The watcher judges the worktree against it at the
//! agent's exit (and at the start, after a launch whose watcher did not finish): whatever is
//! in a protected place that the record does not hold as it is, is set aside, however old
//! its files. So a plant laid harmless in one launch and armed in the next is judged whole.
//!
//! Who says what is the user's own: only a launch that finds no other launch of the
//! worktree running and none that ended without finishing its sweep. Then everything the
//! agents made was set aside when they exited, and what is there was made outside the wall
//! (by the user, since the last launch ended; or it is the first launch): it is taken as the
//! user's and written down. In any other case the record stands.
//!
//! Where it is kept, per user: `$HOME/.local/state/landwall/record/` (root's under root's
//! home in the user database, whatever `$HOME` says), a directory the agent is granted
//! nothing in (checked against each launch's policy, see [`place`]), owned by the
//! user and closed to group and others. In it, for each worktree, named by the SHA-256 of
//! its top level's real path, a directory `<key>/` holding:
//! - `lock`: held shared by every launch's watcher for its whole life (the descriptor
//!   is made before the watcher is forked and closed on exec, so the agent never holds it);
//!   a launch that takes it exclusive knows no other launch of the worktree runs.
//! - `open-<random>`: made by a watcher before the agent starts, removed once its last
//!   sweep set aside all it had to. One found while no launch runs is a watcher that died
//!   (killed, which below Landlock ABI 6 the agent can do, or crashed) or that could not set
//!   something aside: the worktree is judged against the record at the start.
//! - `said-<random>`: what a watcher set aside after its terminal was given back, for the
//!   next launch to say.
//! - `record`: the record, a line each: `p <hex path> <numbers>` for a protected path that
//!   exists, `s <hex path> <numbers>` for a submodule (`-` for one that cannot be judged),
//!   `w <hex path> <numbers>` for a main checkout's registered linked worktree.
//!
//! Nothing here follows a link inside the record directory, and each file is read as a
//! regular file of bounded size: the agent cannot write there, but a record that cannot be
//! read is taken as none, never as a wider one.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, AtFlags, OFlag};
use nix::sys::stat::Mode;

use crate::gitlinks::{Ident, Populated};
use crate::protect::{Absent, Hold, Protection};

/// Where the records are kept under `$HOME`.
pub const UNDER_HOME: &str = ".local/state/landwall/record";

/// Beside the record: the upper layers of the projects' `~/.cache`
/// ([`crate::protect::Hold::Layer`]), one directory a project.
pub const LAYERS: &str = "cache";

/// The record's name in the worktree's directory.
const RECORD: &str = "record";

/// The record's first line. (Version 1 had no linked worktrees: read as none, never as a
/// record that holds none of the user's.)
const HEADER: &str = "landwall record 2";

/// The largest record read.
const MAX_RECORD: u64 = 16 << 20;

/// The record directory for a launch with `home` whose policy lets the agent write where
/// `writable` says: `None` where there is no home, or where the agent could write the
/// directory (`home = "open"`): then nothing is recorded, and each launch takes what is there
/// at its start as the user's (docs/escape.md names it).
pub fn place(home: Option<&Path>, writable: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    // Root's under root's own home: `sudo` may leave `$HOME` as the user's, and a directory
    // of root's there would lock the user's own launches out.
    let root_home = match nix::unistd::geteuid() {
        uid if uid.is_root() => nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.dir),
        _ => None,
    };
    let home = match root_home {
        Some(dir) => dir,
        None => home.filter(|h| h.is_absolute())?.to_path_buf(),
    };
    let dir = home.join(UNDER_HOME);
    (!writable(&dir)).then_some(dir)
}

/// What is in a worktree's protected places ([`crate::record`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Each protected path judged: what is there (see [`look`]), or nothing (an empty
    /// [`Ident`]). A path the record does not name at all was not judged by the launch
    /// that wrote it (another configuration, a worktree added since).
    pub paths: BTreeMap<PathBuf, Ident>,
    /// The populated submodules.
    pub submodules: Populated,
    /// A main checkout's registered linked worktrees: each entry of `<git dir>/worktrees/`
    /// and what it is (device, inode, kind; its change time moves with every index git
    /// writes there, its inode does not).
    pub worktrees: BTreeMap<PathBuf, Ident>,
    /// The worktree's top level: its path and what it is (device, inode). A record of
    /// another directory once at that path is no record of this one.
    pub root: Option<(PathBuf, Ident)>,
}

/// What `root` is: its device and inode.
pub fn root_ident(root: &Path) -> Option<(PathBuf, Ident)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(root).ok()?;
    Some((root.to_path_buf(), vec![m.dev() as i64, m.ino() as i64]))
}

/// The entries of `admin` (`<git dir>/worktrees`), none if it does not exist. Opened
/// without following a link: a link there (or a file) is an error, as is a directory that
/// stays closed to its owner after its mode is put back (Landlock does not stop `chmod`).
pub fn registered(admin: &Path) -> io::Result<BTreeMap<PathBuf, Ident>> {
    let c = std::ffi::CString::new(admin.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::O_RDONLY | libc::O_DIRECTORY;
    let fd = match crate::sys::open_no_symlinks(None, &c, flags) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(BTreeMap::new()),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let path = crate::sys::open_no_symlinks(None, &c, libc::O_PATH | libc::O_DIRECTORY)?;
            let mode = nix::sys::stat::fstat(&path)?.st_mode & 0o7777;
            own(&path, mode | 0o700)?;
            crate::sys::open_no_symlinks(None, &c, flags)?
        }
        Err(e) => return Err(e),
    };
    let mut dir = nix::dir::Dir::from_fd(fd)?;
    let mut names = Vec::new();
    for e in dir.iter() {
        let name = e?.file_name().to_bytes().to_vec();
        if name != b"." && name != b".." {
            names.push(std::ffi::OsString::from_vec(name));
        }
    }
    let mut out = BTreeMap::new();
    for name in names {
        let st = match nix::sys::stat::fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
        {
            Ok(st) => st,
            // Removed meanwhile (`git worktree prune`): not registered.
            Err(nix::errno::Errno::ENOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        out.insert(
            admin.join(&name),
            vec![
                st.st_dev as i64,
                st.st_ino as i64,
                i64::from(st.st_mode & libc::S_IFMT),
            ],
        );
    }
    Ok(out)
}

/// The protected paths judged: every one held read-only and every absent one, each with the
/// directory the sweep walks down from.
pub fn judged(protection: &Protection) -> Vec<Absent> {
    let mut out: Vec<Absent> = protection
        .held
        .iter()
        .filter(|h| h.hold == Hold::ReadOnly)
        .filter_map(|h| {
            Some(Absent {
                base: h.path.parent()?.to_path_buf(),
                path: h.path.clone(),
                reason: h.reason.clone(),
            })
        })
        .collect();
    out.extend(protection.absent.iter().cloned());
    out
}

/// What is at the protected path `a` now, found walking down from its base by descriptor,
/// following no link: `None` if nothing is there (or a file stands where a directory would:
/// the path cannot exist yet); otherwise where on the way it was found (the component's
/// index: a link on the way counts) and that inode's device, number, kind and change time.
/// A place this cannot look into is an error: the caller sets it aside.
pub fn look(a: &Absent) -> io::Result<Option<Ident>> {
    let Ok(rel) = a.path.strip_prefix(&a.base) else {
        return Ok(None);
    };
    let base = std::ffi::CString::new(a.base.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut dir = match crate::sys::open_no_symlinks(None, &base, libc::O_PATH | libc::O_DIRECTORY)
    {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let parts: Vec<&OsStr> = rel.components().map(|c| c.as_os_str()).collect();
    for (i, name) in parts.iter().enumerate() {
        // Searched as its owner where the agent took that right ([`crate::as_owner`]).
        let st = crate::as_owner(&dir, 0o100, || {
            match nix::sys::stat::fstatat(&dir, *name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => Ok(Some(st)),
                Err(nix::errno::Errno::ENOENT) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })?;
        let Some(st) = st else {
            return Ok(None);
        };
        let kind = st.st_mode & libc::S_IFMT;
        if i + 1 == parts.len() || kind == libc::S_IFLNK {
            return Ok(Some(vec![
                i as i64,
                st.st_dev as i64,
                st.st_ino as i64,
                i64::from(kind),
                st.st_ctime,
                st.st_ctime_nsec,
            ]));
        }
        if kind != libc::S_IFDIR {
            return Ok(None);
        }
        dir = crate::as_owner(&dir, 0o100, || {
            openat(
                &dir,
                *name,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .map_err(io::Error::from)
        })?;
    }
    Ok(None)
}

/// A protected path or an index that could not be looked at: judged hostile.
#[derive(Debug)]
pub struct Unjudged {
    /// The path.
    pub path: PathBuf,
    /// Why.
    pub error: io::Error,
}

impl State {
    /// What is in the protected places `judged`, with `subs` which submodules git would
    /// enter, and with `admin` which linked worktrees are registered ([`registered`]). A
    /// protected path (or `admin`) that cannot be looked at is returned in the second list
    /// (the caller sets it aside); an index that cannot be read whole is the error.
    pub fn now(
        judged: &[Absent],
        subs: Option<&crate::protect::Submodules>,
        admin: Option<&Path>,
    ) -> Result<(State, Vec<Unjudged>), Unjudged> {
        let mut state = State::default();
        let mut unjudged = Vec::new();
        if let Some(admin) = admin {
            match registered(admin) {
                Ok(w) => state.worktrees = w,
                Err(error) => unjudged.push(Unjudged {
                    path: admin.to_path_buf(),
                    error,
                }),
            }
        }
        for a in judged {
            match look(a) {
                Ok(Some(id)) => {
                    state.paths.insert(a.path.clone(), id);
                }
                // Nothing there: known to be so (see `State::paths`).
                Ok(None) => {
                    state.paths.insert(a.path.clone(), Ident::new());
                }
                Err(error) => unjudged.push(Unjudged {
                    path: a.path.clone(),
                    error,
                }),
            }
        }
        if let Some(s) = subs {
            state.submodules =
                crate::gitlinks::populated(&s.root, &s.index).map_err(|error| Unjudged {
                    path: s.index.clone(),
                    error,
                })?;
        }
        Ok((state, unjudged))
    }

    /// The protected paths of `self` (now) where something is that `basis` does not hold
    /// as it is.
    pub fn paths_not_in<'a>(&'a self, basis: &State) -> impl Iterator<Item = &'a PathBuf> + 'a {
        let basis = basis.paths.clone();
        self.paths
            .iter()
            .filter(move |(p, id)| !id.is_empty() && basis.get(*p) != Some(id))
            .map(|(p, _)| p)
    }

    /// `self` (a record) with what `start` holds at the protected paths it does not name:
    /// those its launch did not judge (a path of another configuration, of a worktree the
    /// user added since) are taken as the start has them, as a launch with no record takes
    /// all. (A worktree added by an agent is judged as the registry says, not here.)
    pub fn naming_all_of(self, start: &State) -> State {
        self.naming_all_of_but(start, |_| false)
    }

    /// [`State::naming_all_of`], but a path for which `made` holds that the record does
    /// not name is taken as absent: a name a pattern stands for ([`Absent::pattern`]), which
    /// the record names whenever it held the user's own there, so one it does not name is
    /// one made since (by a launch that did not finish, where this basis is judged).
    pub fn naming_all_of_but(mut self, start: &State, made: impl Fn(&Path) -> bool) -> State {
        for (p, id) in &start.paths {
            let id = if made(p) { Ident::new() } else { id.clone() };
            self.paths.entry(p.clone()).or_insert(id);
        }
        self
    }

    /// The linked worktrees registered in `self` (now) that `basis` does not hold as they
    /// are.
    pub fn worktrees_not_in<'a>(&'a self, basis: &'a State) -> impl Iterator<Item = &'a PathBuf> {
        self.worktrees
            .iter()
            .filter(|(p, id)| basis.worktrees.get(*p) != Some(*id))
            .map(|(p, _)| p)
    }

    /// The record's text.
    fn to_text(&self) -> Vec<u8> {
        let mut out = format!("{HEADER}\n").into_bytes();
        let mut line = |tag: &str, path: &Path, id: Option<&Ident>| {
            out.extend_from_slice(tag.as_bytes());
            out.push(b' ');
            for b in path.as_os_str().as_bytes() {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
            match id {
                Some(id) => {
                    for n in id {
                        out.extend_from_slice(format!(" {n}").as_bytes());
                    }
                }
                None => out.extend_from_slice(b" -"),
            }
            out.push(b'\n');
        };
        for (p, id) in &self.paths {
            line("p", p, Some(id));
        }
        for (p, id) in &self.submodules.0 {
            line("s", p, id.as_ref());
        }
        for (p, id) in &self.worktrees {
            line("w", p, Some(id));
        }
        if let Some((p, id)) = &self.root {
            line("r", p, Some(id));
        }
        out
    }

    /// Parses [`State::to_text`]'s output; `None` for anything else.
    fn from_text(text: &[u8]) -> Option<State> {
        let text = std::str::from_utf8(text).ok()?;
        let mut lines = text.lines();
        if lines.next()? != HEADER {
            return None;
        }
        let mut state = State::default();
        for line in lines {
            let mut words = line.split(' ');
            let tag = words.next()?;
            let hex = words.next()?.as_bytes();
            if hex.len() % 2 != 0 {
                return None;
            }
            let bytes: Option<Vec<u8>> = hex
                .chunks(2)
                .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
                .collect();
            let path = PathBuf::from(OsStr::from_bytes(&bytes?));
            let rest: Vec<&str> = words.collect();
            let id = if rest == ["-"] {
                None
            } else {
                Some(
                    rest.iter()
                        .map(|w| w.parse::<i64>().ok())
                        .collect::<Option<Ident>>()?,
                )
            };
            match tag {
                "p" => {
                    state.paths.insert(path, id?);
                }
                "s" => {
                    state.submodules.0.insert(path, id);
                }
                "w" => {
                    state.worktrees.insert(path, id?);
                }
                "r" => state.root = Some((path, id?)),
                _ => return None,
            }
        }
        Some(state)
    }
}

/// One worktree's record, opened by the launch before the watcher is forked (the lock is
/// taken then), and used by the watcher.
#[derive(Debug)]
pub struct Record {
    /// The worktree's directory in the record directory (`<key>/`).
    dir: OwnedFd,
    /// Its path, for messages and the watcher's wall.
    path: PathBuf,
    /// `lock`, locked.
    lock: OwnedFd,
    /// Whether the lock is held exclusive: no other launch of the worktree runs.
    pub exclusive: bool,
    /// This watcher's `open-…`, once made.
    mark: Option<String>,
}

/// The name of the worktree's directory in the record directory, for the worktree whose
/// top level is `root`: the SHA-256 of its real path, in hex.
pub fn key(root: &Path) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(root.as_os_str().as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Checks that `fd` (any descriptor, `O_PATH` too) is this user's and gives it `mode` if it
/// has another, through its `/proc/self/fd` name, so that nothing but it changes.
fn own(fd: &OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let st = nix::sys::stat::fstat(fd)?;
    let euid = nix::unistd::geteuid().as_raw();
    if st.st_uid != euid {
        return Err(io::Error::other(format!(
            "it is owned by uid {}, not by you: remove it, or chown it to yourself",
            st.st_uid
        )));
    }
    if st.st_mode & 0o7777 != mode {
        let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

/// Why a record could not be opened.
fn refused(path: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("the record directory {}: {why}", path.display()))
}

impl Record {
    /// Opens (making it if needed, mode 0700) the record directory `dir` and the lock of the
    /// worktree at `root`, and takes the lock: exclusive if no other launch holds it, else
    /// shared (waiting while one holds it exclusive, which lasts a launch's start). The
    /// directory must be a directory of this user's; its mode, and the lock's, are put back
    /// to 0700 and 0600 if they are not (Landlock does not restrict `chmod`, so the agent
    /// could have changed them to keep a later launch out). `Ok(None)` where the lock may not
    /// be opened although its modes allow it: only a Landlock domain does that, so this
    /// launch is nested inside another's wall, whose own watcher judges what it holds.
    pub fn open(dir: &Path, root: &Path) -> io::Result<Option<Record>> {
        use std::os::unix::fs::DirBuilderExt;
        let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| refused(dir, "a NUL in its path"))?;
        let open_dir = || {
            nix::fcntl::open(
                c.as_c_str(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        };
        // The directory above, landwall's own (`~/.local/state/landwall`): its mode put back
        // too, so that an agent that may write beside it cannot shut later launches out by
        // `chmod 000`. (One of the user's own above it, the error below names.)
        if let Some(parent) = dir.parent() {
            if let Ok(fd) = nix::fcntl::open(
                parent,
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                if let Err(e) = own(&fd, 0o700) {
                    log::debug!("record: {}: {e}", parent.display());
                }
            }
        }
        let d = match open_dir() {
            Ok(d) => d,
            Err(nix::errno::Errno::EACCES) => {
                return Err(refused(
                    dir,
                    "permission denied on the way to it (Landlock does not stop `chmod`, so an agent that could write beside a directory on the way may have closed it): give yourself search permission again, `chmod u+rwx` on each directory on the way",
                ))
            }
            Err(nix::errno::Errno::ENOENT) => {
                std::fs::DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| refused(dir, e))?;
                open_dir().map_err(|e| refused(dir, e))?
            }
            Err(e) => return Err(refused(dir, e)),
        };
        own(&d, 0o700).map_err(|e| refused(dir, e))?;
        // The worktree's own directory in it: what a launch lists is its own files, however
        // many worktrees the user has.
        let key = key(root);
        let open_key = || {
            openat(
                &d,
                key.as_str(),
                OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
        };
        let d = match open_key() {
            Ok(k) => k,
            Err(e @ (nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR)) => {
                if e == nix::errno::Errno::ENOTDIR {
                    // The record of an older landwall, one file per worktree (version 1,
                    // which this one reads as no record anyway): replaced.
                    nix::unistd::unlinkat(
                        &d,
                        key.as_str(),
                        nix::unistd::UnlinkatFlags::NoRemoveDir,
                    )
                    .map_err(|e| refused(dir, format!("replacing an older record: {e}")))?;
                }
                match nix::sys::stat::mkdirat(&d, key.as_str(), Mode::from_bits_truncate(0o700)) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    // Only a Landlock domain refuses it here (see below).
                    Err(nix::errno::Errno::EACCES) => return Ok(None),
                    Err(e) => return Err(refused(dir, e)),
                }
                open_key().map_err(|e| refused(dir, e))?
            }
            Err(e) => return Err(refused(dir, e)),
        };
        own(&d, 0o700).map_err(|e| refused(dir, format!("{key}: {e}")))?;
        let lock_name = "lock";
        match openat(
            &d,
            lock_name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => own(&fd, 0o600).map_err(|e| refused(dir, format!("its lock: {e}")))?,
            Err(nix::errno::Errno::ENOENT) => {}
            Err(e) => return Err(refused(dir, format!("its lock: {e}"))),
        }
        let lock = match openat(
            &d,
            lock_name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(lock) => lock,
            Err(nix::errno::Errno::EACCES) => return Ok(None),
            Err(e) => return Err(refused(dir, format!("its lock: {e}"))),
        };
        let exclusive = match crate::sys::flock(lock.as_fd(), libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => true,
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {
                crate::sys::flock(lock.as_fd(), libc::LOCK_SH)
                    .map_err(|e| refused(dir, format!("its lock: {e}")))?;
                false
            }
            Err(e) => return Err(refused(dir, format!("its lock: {e}"))),
        };
        Ok(Some(Record {
            dir: d,
            path: dir.join(&key),
            lock,
            exclusive,
            mark: None,
        }))
    }

    /// The descriptors the watcher keeps.
    pub fn fds(&self) -> [std::os::fd::RawFd; 2] {
        [self.dir.as_raw_fd(), self.lock.as_raw_fd()]
    }

    /// The worktree's directory in the record directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Makes this watcher's `open-<random>`.
    pub fn mark(&mut self) -> io::Result<()> {
        for n in 0..16u32 {
            let name = format!("open-{:016x}", crate::random_u64(n));
            match openat(
                &self.dir,
                name.as_str(),
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            ) {
                Ok(_) => {
                    self.mark = Some(name);
                    return Ok(());
                }
                Err(nix::errno::Errno::EEXIST) => continue,
                Err(e) => return Err(refused(&self.path, format!("making a mark: {e}"))),
            }
        }
        Err(refused(&self.path, "making a mark: every name taken"))
    }

    /// Removes this watcher's mark: its launch ended with everything set aside.
    pub fn unmark(&mut self) -> io::Result<()> {
        if let Some(name) = self.mark.take() {
            nix::unistd::unlinkat(
                &self.dir,
                name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            )
            .map_err(|e| refused(&self.path, format!("removing a mark: {e}")))?;
        }
        Ok(())
    }

    /// The marks of other launches of the worktree: with the lock exclusive, each is one that
    /// did not finish.
    pub fn others(&self) -> io::Result<Vec<String>> {
        let mut names = self.names_with("open-")?;
        names.retain(|n| Some(n.as_str()) != self.mark.as_deref());
        Ok(names)
    }

    /// The names in the record directory that start with `prefix`.
    fn names_with(&self, prefix: &str) -> io::Result<Vec<String>> {
        let mut dir = nix::dir::Dir::openat(
            &self.dir,
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| refused(&self.path, format!("listing: {e}")))?;
        let mut out = Vec::new();
        for e in dir.iter() {
            let e = e.map_err(|e| refused(&self.path, format!("listing: {e}")))?;
            let name = e.file_name().to_string_lossy();
            if name.starts_with(prefix) {
                out.push(name.into_owned());
            }
        }
        Ok(out)
    }

    /// Removes the marks `names` (launches whose leavings were judged).
    pub fn forget(&self, names: &[String]) -> io::Result<()> {
        for name in names {
            match nix::unistd::unlinkat(
                &self.dir,
                name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            ) {
                Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
                Err(e) => return Err(refused(&self.path, format!("removing a mark: {e}"))),
            }
        }
        Ok(())
    }

    /// The record, if there is one that reads.
    pub fn load(&self) -> Option<State> {
        if let Ok(fd) = openat(
            &self.dir,
            RECORD,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ) {
            if let Err(e) = own(&fd, 0o600) {
                log::debug!("record: {e}");
            }
        }
        let file = openat(
            &self.dir,
            RECORD,
            OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        let mut file = std::fs::File::from(file);
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = Vec::new();
        use std::io::Read;
        (&mut file)
            .take(MAX_RECORD + 1)
            .read_to_end(&mut text)
            .ok()?;
        if text.len() as u64 > MAX_RECORD {
            return None;
        }
        State::from_text(&text)
    }

    /// Writes the record (a new file renamed over the old one, so a reader sees one or the
    /// other whole).
    pub fn save(&self, state: &State) -> io::Result<()> {
        let tmp = format!("tmp-{:016x}", crate::random_u64(0));
        let fd = openat(
            &self.dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| refused(&self.path, format!("writing the record: {e}")))?;
        let mut file = std::fs::File::from(fd);
        let written = file.write_all(&state.to_text());
        drop(file);
        let renamed = written.and_then(|()| {
            nix::fcntl::renameat(&self.dir, tmp.as_str(), &self.dir, RECORD)
                .map_err(io::Error::from)
        });
        if let Err(e) = renamed {
            if let Err(e2) = nix::unistd::unlinkat(
                &self.dir,
                tmp.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            ) {
                log::debug!("record: removing {tmp}: {e2}");
            }
            return Err(refused(&self.path, format!("writing the record: {e}")));
        }
        Ok(())
    }

    /// Leaves `lines` for the next launch of the worktree to say ([`Record::heard`]): what
    /// this watcher set aside after its terminal was given back (`said-<random>`).
    pub fn say(&self, lines: &[String]) -> io::Result<()> {
        let text: String = lines
            .iter()
            .filter(|l| !l.is_empty())
            .map(|l| format!("{}\n", crate::spool::printable(l)))
            .collect();
        if text.is_empty() {
            return Ok(());
        }
        let name = format!("said-{:016x}", crate::random_u64(1));
        let fd = openat(
            &self.dir,
            name.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| refused(&self.path, format!("leaving word: {e}")))?;
        std::fs::File::from(fd)
            .write_all(text.as_bytes())
            .map_err(|e| refused(&self.path, format!("leaving word: {e}")))
    }

    /// What earlier watchers of the worktree left to say ([`Record::say`]), each file read
    /// (bounded, printable) and removed.
    pub fn heard(&self) -> io::Result<Vec<String>> {
        let names = self.names_with("said-")?;
        let mut out = Vec::new();
        for name in names {
            if let Ok(fd) = openat(
                &self.dir,
                name.as_str(),
                OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
                Mode::empty(),
            ) {
                let mut text = Vec::new();
                use std::io::Read;
                let file = std::fs::File::from(fd);
                if file.metadata().is_ok_and(|m| m.is_file())
                    && (&file).take(64 << 10).read_to_end(&mut text).is_ok()
                {
                    let text = String::from_utf8_lossy(&text);
                    out.extend(
                        text.lines()
                            .map(|l| crate::spool::printable(l).into_owned()),
                    );
                }
            }
            self.forget(std::slice::from_ref(&name))?;
        }
        Ok(out)
    }

    /// Lets other launches start beside this one: the lock, exclusive, becomes shared.
    pub fn share(&mut self) -> io::Result<()> {
        if self.exclusive {
            crate::sys::flock(self.lock.as_fd(), libc::LOCK_SH)
                .map_err(|e| refused(&self.path, format!("its lock: {e}")))?;
            self.exclusive = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_reads_back_as_written() {
        let mut s = State::default();
        s.paths
            .insert(PathBuf::from("/w/.envrc\n x"), vec![2, 3, -1, 0]);
        s.submodules
            .0
            .insert(PathBuf::from("lib"), Some(vec![1, 2]));
        s.submodules.0.insert(PathBuf::from("lib/deep"), None);
        s.worktrees
            .insert(PathBuf::from("/w/.git/worktrees/n"), vec![2, 9, 0o40000]);
        s.root = Some((PathBuf::from("/w"), vec![2, 1]));
        assert_eq!(State::from_text(&s.to_text()), Some(s));
        assert_eq!(
            State::from_text(b"landwall record 2\n"),
            Some(State::default())
        );
        // Version 1 knew no worktrees: read as no record.
        assert_eq!(State::from_text(b"landwall record 1\n"), None);
        assert_eq!(State::from_text(b"landwall record 2\nq 00 1\n"), None);
        assert_eq!(State::from_text(b"landwall record 2\np 0 1\n"), None);
    }

    #[test]
    fn a_record_names_what_it_judged_and_takes_the_rest_from_the_start() {
        let mut record = State::default();
        record
            .paths
            .insert(PathBuf::from("/w/.envrc"), Ident::new());
        record
            .paths
            .insert(PathBuf::from("/w/.git/config"), vec![1, 2]);
        assert_eq!(State::from_text(&record.to_text()), Some(record.clone()));
        let mut start = State::default();
        start.paths.insert(PathBuf::from("/w/.envrc"), vec![7]);
        start.paths.insert(PathBuf::from("/w/n/.git"), vec![8]);
        let basis = record.naming_all_of(&start);
        // Named by the record as nothing: what is there now is not the user's.
        assert_eq!(start.paths_not_in(&basis).count(), 1);
        assert_eq!(basis.paths[Path::new("/w/n/.git")], vec![8]);
    }

    #[test]
    fn an_older_record_file_gives_way_to_the_worktrees_directory() {
        let t = crate::testutil::Scratch::new("record-old");
        let dir = t.0.join("state/record");
        let root = t.0.join("wt");
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(key(&root)), "landwall record 1\n").expect("write");
        let r = Record::open(&dir, &root)
            .expect("open")
            .expect("not nested");
        assert!(r.exclusive);
        assert!(dir.join(key(&root)).join("lock").is_file());
        assert_eq!(r.load(), None);
    }

    #[test]
    fn the_lock_is_exclusive_for_the_first_launch_only() {
        let t = crate::testutil::Scratch::new("record");
        let dir = t.0.join("state/record");
        let root = t.0.join("wt");
        let open = |root: &Path| Record::open(&dir, root).expect("open").expect("not nested");
        let mut first = open(&root);
        assert!(first.exclusive);
        first.mark().expect("mark");
        first.share().expect("share");
        let mut second = open(&root);
        assert!(!second.exclusive, "a second launch beside the first");
        second.mark().expect("mark");
        assert_eq!(second.others().expect("list").len(), 1);
        first.unmark().expect("unmark");
        drop(first);
        drop(second);
        // The second's watcher died: its mark stays, and the next launch finds it.
        let third = open(&root);
        assert!(third.exclusive);
        assert_eq!(third.others().expect("list").len(), 1);
        let s = State::default();
        third.save(&s).expect("save");
        assert_eq!(third.load(), Some(s));
        // Another worktree has its own.
        let other = open(&t.0.join("other"));
        assert!(other.exclusive && other.others().expect("list").is_empty());
        // Modes an agent could set (chmod is not Landlock's) are put back.
        use std::os::unix::fs::PermissionsExt;
        drop(third);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let again = open(&root);
        assert!(again.exclusive);
        let mode = std::fs::metadata(&dir).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o700);
        // And the directory above it, landwall's own.
        drop(again);
        let above = dir.parent().expect("parent");
        std::fs::set_permissions(above, std::fs::Permissions::from_mode(0o000)).expect("chmod");
        let again = open(&root);
        assert!(again.exclusive);
        let mode = std::fs::metadata(above).expect("stat").permissions().mode();
        assert_eq!(mode & 0o7777, 0o700);
    }
}
