//! The drain's sweep of a job's protected paths ([`landwall::protect`]): what the daemon
//! records before a job starts, compares once all of the job is over, and restores.
//!
//! A launch holds its protected paths read-only in a private mount namespace, but where
//! namespaces are refused (a job of a walled daemon: the daemon's Landlock wall refuses
//! them; a unit with `RestrictNamespaces=`) they are as writable as the rest of the
//! worktree, and a path that did not exist cannot be held anywhere. So the daemon:
//!
//! - before the job ([`Snapshot::take`]): resolves the protected paths of the job's
//!   worktree and reads every one that exists, recursively (each entry's kind, mode, owner,
//!   and the content of regular files or the target of links), and remembers the ones that
//!   do not exist. The copy is bounded ([`MAX_FILE`], [`MAX_TOTAL`], [`MAX_ENTRIES`]): a
//!   protected tree too large to keep is an error, and the job is not started.
//! - after the job ([`Snapshot::sweep`]): compares, and puts back what was there: rewrites
//!   what changed, re-creates what was removed, removes what was created (anything at a
//!   path that was absent, and a symbolic link put on the way to one). Each difference is a
//!   [`Found`]; [`describe`] turns them into the result's reason.
//!
//! The job is hostile and may have had earlier runs to plant links, so everything is read
//! and written by descriptor, never following a link: each path's directory is opened with
//! no symbolic link on the way (`openat2` `RESOLVE_NO_SYMLINKS`), entries are examined with
//! `fstatat(AT_SYMLINK_NOFOLLOW)` and opened with `O_NOFOLLOW`, files are read with
//! `O_NONBLOCK` (a FIFO swapped in cannot block the daemon), and what is removed is first
//! renamed aside in its own directory (one step that ends its effect), then removed,
//! directories with all they hold.

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fchmod, fchmodat, fstat, fstatat, mkdirat, FchmodatFlags, FileStat, Mode};
use nix::unistd::{fchown, symlinkat, unlinkat, Gid, Uid, UnlinkatFlags};

use landwall::protect::{self, Absent, Hold, Protection};
use landwall::worktree::{GitLayout, Worktree};

/// The largest protected file the daemon keeps a copy of.
pub const MAX_FILE: u64 = 1 << 20;
/// The most the daemon keeps of one job's protected paths, in all.
pub const MAX_TOTAL: u64 = 16 << 20;
/// The most entries (files, directories, links) of one job's protected paths.
pub const MAX_ENTRIES: usize = 10_000;
/// How deep a protected tree may go.
const MAX_DEPTH: usize = 32;
/// How many paths a result's reason names; the rest are counted.
const MAX_NAMED: usize = 20;

/// What was at a protected path before the job.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    /// A directory: with what it holds, or `None` for a directory on the way to a protected
    /// path (held only so that it stays a directory; what else it holds is not protected).
    Dir {
        meta: Meta,
        children: Option<BTreeMap<OsString, Node>>,
    },
    /// A regular file and its content.
    File {
        meta: Meta,
        /// Its inode and link count: a protected file hard-linked elsewhere since (where a
        /// later job could write it) is a change, even with the same content.
        inode: (u64, u64),
        nlink: u64,
        content: Vec<u8>,
    },
    /// A symbolic link (inside a protected directory; a protected path itself, or one on
    /// the way to it, is never a link: [`protect::resolve`] refuses those).
    Link { target: OsString },
}

impl Node {
    fn kind(&self) -> u32 {
        match self {
            Node::Dir { .. } => libc::S_IFDIR,
            Node::File { .. } => libc::S_IFREG,
            Node::Link { .. } => libc::S_IFLNK,
        }
    }
}

/// Permissions and owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Meta {
    mode: u32,
    uid: u32,
    gid: u32,
}

impl Meta {
    fn of(st: &FileStat) -> Meta {
        Meta {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
        }
    }
}

/// One protected path that existed before the job.
#[derive(Debug)]
struct Item {
    /// Its real, absolute path.
    path: PathBuf,
    /// As the result names it: relative to the worktree (`.git/…` for the git dir).
    shown: String,
    node: Node,
}

/// The protected paths of one job's worktree as they were before the job.
#[derive(Debug)]
pub struct Snapshot {
    /// Those that existed, parents first.
    held: Vec<Item>,
    /// Those that did not, with the name the result gives them.
    absent: Vec<(Absent, String)>,
    /// Where the worktree's submodules are listed: after the job, every submodule git would
    /// enter that was not there as it is before the job is set aside
    /// ([`landwall::gitlinks`]), whatever the index said.
    submodules: Option<protect::Submodules>,
    /// The submodules git would enter before the job (none where the index could not be
    /// read: then every one after it is set aside).
    basis: landwall::gitlinks::Populated,
}

/// How much a snapshot holds so far.
#[derive(Debug, Default)]
struct Budget {
    bytes: u64,
    entries: usize,
}

/// What the sweep found at one path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    /// It did not exist before the job.
    Created,
    /// A symbolic link that did not exist before the job, on the way to the protected path
    /// named.
    LinkOnTheWay(String),
    /// It existed and is gone.
    Removed,
    /// Its content, mode, owner or link target changed, or it was hard-linked elsewhere.
    Changed,
    /// Something of another kind is in its place (a link, a file for a directory).
    Replaced,
    /// A submodule (a gitlink of the index) whose `.git` or git dir the job made or
    /// changed: its `.git` is renamed aside, to the name given, and nothing is lost.
    SubmoduleSetAside(String),
    /// The index, which could not be read, renamed aside (to the name given, and why).
    IndexSetAside(String),
}

/// One difference, and whether it was put back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The path, relative to the worktree.
    pub path: String,
    /// What happened to it.
    pub what: What,
    /// `Err(why)` if it could not be put back (or even be looked at).
    pub restored: Result<(), String>,
}

impl Found {
    /// A path that could not even be looked at: `e` says why.
    fn unexamined(path: &str, e: impl std::fmt::Display) -> Found {
        Found {
            path: path.to_string(),
            what: What::Changed,
            restored: Err(format!("it could not be looked at: {e}")),
        }
    }
}

impl Snapshot {
    /// Resolves the protected paths of `worktree` (the list of the configuration's
    /// `protect`) and records them. An error is one line: the job is not started.
    pub fn take(worktree: &Worktree, changes: &[protect::Change]) -> Result<Snapshot, String> {
        let protection = protect::resolve(worktree, changes).map_err(|e| e.to_string())?;
        Snapshot::of(worktree, &protection)
    }

    fn of(worktree: &Worktree, protection: &Protection) -> Result<Snapshot, String> {
        let mut budget = Budget::default();
        let mut held = Vec::new();
        for h in &protection.held {
            let shown = shown(worktree, &h.path);
            let (dir, name) = open_parent(&h.path).map_err(|e| cannot_read(&shown, &e))?;
            let node = read_node(&dir, name, h.hold == Hold::ReadOnly, &shown, &mut budget, 0)?;
            held.push(Item {
                node,
                path: h.path.clone(),
                shown,
            });
        }
        let absent = protection
            .absent
            .iter()
            .map(|a| (a.clone(), shown(worktree, &a.path)))
            .collect();
        let basis = protection
            .submodules
            .as_ref()
            .and_then(|subs| landwall::gitlinks::populated(&subs.root, &subs.index).ok())
            .unwrap_or_default();
        Ok(Snapshot {
            held,
            absent,
            submodules: protection.submodules.clone(),
            basis,
        })
    }

    /// Whether there is nothing to compare (no protected path at all).
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.held.is_empty() && self.absent.is_empty()
    }

    /// [`Snapshot::sweep_first`], and what it set aside removed at once, whatever it takes.
    #[cfg(test)]
    pub fn sweep(&self) -> Vec<Found> {
        let (found, later) = self.sweep_first();
        let left = later.remove(&std::sync::atomic::AtomicBool::new(false), None);
        assert!(left.is_empty(), "{left:?}");
        found
    }

    /// Compares the protected paths with the snapshot and puts back what differs. Call it
    /// only once nothing of the job runs any more. Returns each difference (none: the job
    /// touched nothing protected), and the directories set aside (each renamed out of the
    /// way in one step, which ends its effect), to be removed after: that work is as large
    /// as what the job made, so the daemon does it off its loop, bounded ([`Later`]).
    pub fn sweep_first(&self) -> (Vec<Found>, Later) {
        let mut out = Out::default();
        // Parents first: a directory on the way is a directory again before what lies in
        // it is looked at.
        for item in &self.held {
            match open_parent(&item.path) {
                Ok((dir, name)) => restore(&dir, name, &item.node, &item.shown, &mut out, 0),
                Err(e) => out.push(Found::unexamined(&item.shown, e)),
            }
        }
        for (a, shown) in &self.absent {
            sweep_absent(a, shown, &mut out);
        }
        if let Some(subs) = &self.submodules {
            sweep_submodules(subs, &self.basis, &mut out);
        }
        (out.found, Later(out.later))
    }
}

/// What a sweep found, and the directories it set aside for removal after.
#[derive(Default)]
struct Out {
    found: Vec<Found>,
    later: Vec<Aside>,
}

impl Out {
    fn push(&mut self, f: Found) {
        self.found.push(f);
    }
}

/// A directory a sweep renamed aside, to be removed.
#[derive(Debug)]
struct Aside {
    /// The directory it is in (opened with no link on the way).
    dir: OwnedFd,
    /// Its name there now.
    name: OsString,
}

/// The directories a sweep set aside: removed by [`Later::remove`].
#[derive(Debug, Default)]
pub struct Later(Vec<Aside>);

impl Later {
    /// Adds the directory `path` with all it holds (a job's own temporary directory,
    /// once nothing of the job runs): its parent opened with no link on the way.
    pub fn add_dir(&mut self, path: &Path) -> std::io::Result<()> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        };
        let parent = std::ffi::CString::new(parent.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let dir =
            landwall::sys::open_no_symlinks(None, &parent, libc::O_RDONLY | libc::O_DIRECTORY)?;
        self.0.push(Aside {
            dir,
            name: name.to_os_string(),
        });
        Ok(())
    }

    /// Whether there is nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes each directory set aside, with all it holds, until `stop` is set or
    /// `deadline` passes (looked at for each directory entered). Returns a line for each
    /// that is left (renamed aside, where nothing uses it; named so that it can be removed
    /// by hand).
    pub fn remove(
        self,
        stop: &std::sync::atomic::AtomicBool,
        deadline: Option<std::time::Instant>,
    ) -> Vec<String> {
        let go_on = || {
            !stop.load(std::sync::atomic::Ordering::Relaxed)
                && deadline.is_none_or(|d| std::time::Instant::now() < d)
        };
        let mut left = Vec::new();
        for a in self.0 {
            if let Err(e) = remove_tree(&a.dir, &a.name, &go_on) {
                let dir = std::fs::read_link(format!("/proc/self/fd/{}", a.dir.as_raw_fd()))
                    .map(|p| p.display().to_string())
                    .unwrap_or_else(|_| "its directory".into());
                left.push(format!(
                    "{dir}/{} could not be removed whole ({e}); it is left there, renamed aside",
                    a.name.to_string_lossy()
                ));
            }
        }
        left
    }
}

/// Sets aside the `.git` of each submodule git would enter that `basis` (before the job)
/// does not hold as it is: renamed in its directory (opened without following a link),
/// never over anything. Git then takes the submodule for one not checked out and enters it
/// no more. An index that cannot be read whole is set aside (git may read it; it rebuilds
/// one from the tree with `git reset`).
fn sweep_submodules(
    subs: &protect::Submodules,
    basis: &landwall::gitlinks::Populated,
    out: &mut Out,
) {
    let changed = match landwall::gitlinks::populated(&subs.root, &subs.index) {
        Ok(now) => now.not_in(basis),
        Err(e) => {
            let (aside, moved) = match rename_to(&subs.index) {
                Ok(aside) => (aside, Ok(())),
                Err(e) => ("index.landwall-swept-…".to_string(), Err(e.to_string())),
            };
            out.push(Found {
                path: ".git/index".into(),
                what: What::IndexSetAside(format!("{aside}; it could not be read: {e}")),
                restored: moved,
            });
            return;
        }
    };
    for rel in changed {
        let dotgit = subs.root.join(&rel).join(".git");
        let shown = format!("{}/.git", rel.display());
        let (aside, moved) = match rename_to(&dotgit) {
            Ok(aside) => (aside, Ok(())),
            Err(e) => (".git.landwall-swept-…".to_string(), Err(e.to_string())),
        };
        out.push(Found {
            path: shown,
            what: What::SubmoduleSetAside(aside),
            restored: moved,
        });
    }
}

/// Renames `path` aside in its own directory (opened with no symbolic link on the way) to
/// `<name>.landwall-swept-<pid>-<random>`, never over anything; returns the new name.
fn rename_to(path: &Path) -> io::Result<String> {
    let (dir, name) = open_parent(path)?;
    let aside = landwall::rename_aside(dir.as_fd(), name, name)?;
    Ok(aside.to_string_lossy().into_owned())
}

/// The result's reason for what the sweep found, one line: `tampered: .git/hooks/pre-commit
/// created, .git/config changed (restored)`.
pub fn describe(found: &[Found]) -> String {
    let all_restored = found.iter().all(|f| f.restored.is_ok());
    let mut parts: Vec<String> = found
        .iter()
        .take(MAX_NAMED)
        .map(|f| {
            let what = match &f.what {
                What::Created => "created".to_string(),
                What::LinkOnTheWay(to) => {
                    format!("created (a symbolic link on the way to {to})")
                }
                What::Removed => "removed".to_string(),
                What::Changed => "changed".to_string(),
                What::Replaced => "replaced".to_string(),
                What::IndexSetAside(aside) => format!(
                    "unreadable (git would enter the submodules it lists: set aside as {aside})"
                ),
                What::SubmoduleSetAside(aside) => format!(
                    "made or changed (a submodule, whose config and hooks your next `git status` runs: its .git set aside as {aside})"
                ),
            };
            match (&f.restored, all_restored) {
                (Err(why), _) => format!("{} {what} (NOT restored: {why})", f.path),
                (Ok(()), false) => format!("{} {what} (restored)", f.path),
                (Ok(()), true) => format!("{} {what}", f.path),
            }
        })
        .collect();
    if found.len() > MAX_NAMED {
        parts.push(format!("and {} more", found.len() - MAX_NAMED));
    }
    let text = format!("tampered: {}", parts.join(", "));
    let text = if all_restored {
        format!("{text} (restored)")
    } else {
        text
    };
    // A name that holds a line break cannot pass for another line of the reason.
    text.replace('\n', "\\n").replace('\r', "\\r")
}

/// How the result names `path`: relative to the worktree's top level, or `.git/…` for the
/// worktree's own git dir outside it.
fn shown(worktree: &Worktree, path: &Path) -> String {
    if let Ok(rel) = path.strip_prefix(&worktree.root) {
        return rel.to_string_lossy().into_owned();
    }
    if let GitLayout::Linked { git_dir, .. } = &worktree.git {
        if let Ok(rel) = path.strip_prefix(git_dir) {
            return Path::new(".git").join(rel).to_string_lossy().into_owned();
        }
    }
    path.to_string_lossy().into_owned()
}

fn join(shown: &str, name: &OsStr) -> String {
    format!("{shown}/{}", name.to_string_lossy())
}

fn cannot_read(shown: &str, e: &dyn std::fmt::Display) -> String {
    format!(
        "the protected path {shown} could not be read for the drain's sweep ({e}): make it readable to the daemon's user, or leave it unprotected with \"!{shown}\" in `protect` in the system configuration file"
    )
}

fn too_large(shown: &str, top: &str, what: &str) -> String {
    format!(
        "the protected path {shown} {what}: too much for the drain to keep a copy of to restore after the job; make it smaller, or leave it unprotected with \"!{top}\" in `protect` in the system configuration file"
    )
}

/// The directory `path`, opened with no symbolic link anywhere on the way: the path is a
/// real path, so a link met now was put there since.
fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    landwall::sys::open_no_symlinks(None, &c, libc::O_RDONLY | libc::O_DIRECTORY)
}

/// The directory of `path` ([`open_dir_path`]) and its last component.
fn open_parent(path: &Path) -> io::Result<(OwnedFd, &OsStr)> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    Ok((open_dir_path(parent)?, name))
}

fn open_dir(dir: BorrowedFd<'_>, name: &OsStr) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// [`open_dir`], for a directory the sweep must list and change: one the job left without
/// read or search permission for its owner (a daemon without the capability to override
/// modes could not open it) is given them, and write permission, first. The mode is
/// changed without following a link (`fchmodat` `AT_SYMLINK_NOFOLLOW`: on a link it
/// fails). A protected directory's mode is put back after.
fn open_dir_to_change(dir: BorrowedFd<'_>, name: &OsStr) -> nix::Result<OwnedFd> {
    match open_dir(dir, name) {
        Err(Errno::EACCES) => {
            let st = fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFDIR {
                return Err(Errno::ENOTDIR);
            }
            fchmodat(
                dir,
                name,
                Mode::from_bits_truncate((st.st_mode & 0o7777) | 0o700),
                FchmodatFlags::NoFollowSymlink,
            )?;
            open_dir(dir, name)
        }
        other => other,
    }
}

/// The names in a directory (not `.` and `..`), each with whether it is a directory.
fn list(dir: &OwnedFd) -> io::Result<Vec<(OsString, bool)>> {
    let mut listing = nix::dir::Dir::from_fd(dir.try_clone()?)?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        let n = entry.file_name().to_bytes();
        if n == b"." || n == b".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            Some(t) => t == nix::dir::Type::Directory,
            // A file system that does not say: asked of the entry itself.
            None => fstatat(dir, entry.file_name(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR),
        };
        names.push((OsStr::from_bytes(n).to_owned(), is_dir));
    }
    names.sort();
    Ok(names)
}

/// Reads `name` in `dir` as it is now; `recurse`: with all a directory holds.
fn read_node(
    dir: &OwnedFd,
    name: &OsStr,
    recurse: bool,
    shown: &str,
    budget: &mut Budget,
    depth: usize,
) -> Result<Node, String> {
    // The path as listed in `protect`, for the fix: the top of a protected tree.
    let top = shown
        .split('/')
        .take(shown.split('/').count().saturating_sub(depth))
        .collect::<Vec<_>>()
        .join("/");
    let st =
        fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW).map_err(|e| cannot_read(shown, &e))?;
    budget.entries += 1;
    if budget.entries > MAX_ENTRIES {
        return Err(too_large(
            shown,
            &top,
            &format!("takes the protected paths past {MAX_ENTRIES} entries"),
        ));
    }
    let meta = Meta::of(&st);
    match st.st_mode & libc::S_IFMT {
        libc::S_IFDIR => {
            if !recurse {
                return Ok(Node::Dir {
                    meta,
                    children: None,
                });
            }
            if depth >= MAX_DEPTH {
                return Err(too_large(
                    shown,
                    &top,
                    &format!("is more than {MAX_DEPTH} directories deep"),
                ));
            }
            let fd = open_dir(dir.as_fd(), name).map_err(|e| cannot_read(shown, &e))?;
            let mut children = BTreeMap::new();
            for (child, _) in list(&fd).map_err(|e| cannot_read(shown, &e))? {
                let node = read_node(
                    &fd,
                    &child,
                    true,
                    &join(shown, &child),
                    budget,
                    depth + 1,
                )?;
                children.insert(child, node);
            }
            Ok(Node::Dir {
                meta,
                children: Some(children),
            })
        }
        libc::S_IFREG => {
            let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
            if size > MAX_FILE {
                return Err(too_large(
                    shown,
                    &top,
                    &format!("is larger than {}", landwall::limits::size_text(MAX_FILE)),
                ));
            }
            budget.bytes = budget.bytes.saturating_add(size);
            if budget.bytes > MAX_TOTAL {
                return Err(too_large(
                    shown,
                    &top,
                    &format!(
                        "takes the protected paths past {} in all",
                        landwall::limits::size_text(MAX_TOTAL)
                    ),
                ));
            }
            let (fst, content) =
                read_file(dir.as_fd(), name, MAX_FILE).map_err(|e| cannot_read(shown, &e))?;
            if u64::try_from(content.len()).unwrap_or(u64::MAX) > MAX_FILE
                || (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino)
            {
                return Err(cannot_read(shown, &"it changed while it was read"));
            }
            Ok(Node::File {
                meta,
                inode: (fst.st_dev, fst.st_ino),
                nlink: fst.st_nlink,
                content,
            })
        }
        libc::S_IFLNK => Ok(Node::Link {
            target: readlinkat(dir, name).map_err(|e| cannot_read(shown, &e))?,
        }),
        _ => Err(format!(
            "the protected path {shown} is a special file (a FIFO, a socket or a device), which the drain cannot restore after the job: remove it, or leave it unprotected with \"!{top}\" in `protect` in the system configuration file"
        )),
    }
}

/// Opens the regular file `name` in `dir` (no link followed, never blocking) and reads at
/// most `max + 1` bytes of it.
fn read_file(dir: BorrowedFd<'_>, name: &OsStr, max: u64) -> io::Result<(FileStat, Vec<u8>)> {
    let fd = openat(
        dir,
        name,
        OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_NOCTTY
            | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let st = fstat(&fd)?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(io::Error::other("not a regular file"));
    }
    let mut content = Vec::new();
    File::from(fd)
        .take(max.saturating_add(1))
        .read_to_end(&mut content)?;
    Ok((st, content))
}

/// Gives an open directory read, write and search permission for its owner, if it lacks
/// one (the job's uid is the daemon's: the daemon owns what the job made).
fn writable(fd: &OwnedFd) -> nix::Result<()> {
    let st = fstat(fd)?;
    if st.st_mode & 0o700 != 0o700 {
        fchmod(fd, Mode::from_bits_truncate((st.st_mode & 0o7777) | 0o700))?;
    }
    Ok(())
}

/// Compares `name` in `dir` with `before` and puts it back if it differs, recording what
/// it found in `out`.
fn restore(dir: &OwnedFd, name: &OsStr, before: &Node, shown: &str, out: &mut Out, depth: usize) {
    let found = |out: &mut Out, what: What, restored: Result<(), String>| {
        out.push(Found {
            path: shown.to_string(),
            what,
            restored,
        })
    };
    let st = match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => {
            found(out, What::Removed, create(dir, name, before).map_err(text));
            return;
        }
        Err(e) => {
            found(
                out,
                What::Changed,
                Err(format!("it could not be looked at: {e}")),
            );
            return;
        }
    };
    let kind = st.st_mode & libc::S_IFMT;
    if kind != before.kind() {
        let put_back = remove(dir, name, kind == libc::S_IFDIR, &mut out.later)
            .and_then(|()| create(dir, name, before));
        found(out, What::Replaced, put_back.map_err(text));
        return;
    }
    match before {
        Node::Link { target } => {
            if readlinkat(dir, name).ok().as_ref() != Some(target) {
                let put_back = remove(dir, name, false, &mut out.later)
                    .and_then(|()| create(dir, name, before));
                found(out, What::Changed, put_back.map_err(text));
            }
        }
        Node::File { .. } => {
            if !same_file(dir.as_fd(), name, &st, before) {
                let put_back = remove(dir, name, false, &mut out.later)
                    .and_then(|()| create(dir, name, before));
                found(out, What::Changed, put_back.map_err(text));
            }
        }
        Node::Dir { meta, children } => {
            // The job may have left it unwritable (or unreadable): the sweep must list and
            // change what it holds. Its mode is put back below.
            let open = if children.is_some() {
                open_dir_to_change(dir.as_fd(), name)
            } else {
                open_dir(dir.as_fd(), name)
            };
            let fd = match open {
                Ok(fd) => fd,
                Err(e) => {
                    found(
                        out,
                        What::Changed,
                        Err(format!("it could not be looked at: {e}")),
                    );
                    return;
                }
            };
            let now = Meta::of(&st);
            if let Some(children) = children {
                if let Err(e) = writable(&fd) {
                    log::debug!("sweep: making {shown} writable: {e}");
                }
                if !sweep_dir(&fd, children, shown, out, depth) {
                    // More new entries than a snapshot may hold: the directory is set
                    // aside whole (one rename, not one per entry) and made again as it was.
                    drop(fd);
                    let put_back = remove(dir, name, true, &mut out.later)
                        .and_then(|()| create(dir, name, before));
                    found(out, What::Replaced, put_back.map_err(text));
                    return;
                }
            }
            if now != *meta {
                out.push(Found {
                    path: shown.to_string(),
                    what: What::Changed,
                    restored: set_meta(&fd, meta).map_err(text),
                });
            } else if fstat(&fd).is_ok_and(|st| st.st_mode & 0o7777 != meta.mode) {
                // Made writable by the sweep itself, to change what it holds.
                if let Err(e) = fchmod(&fd, Mode::from_bits_truncate(meta.mode)) {
                    log::warn!("sweep: putting back the mode of {shown}: {e}");
                }
            }
        }
    }
}

/// The entries of a protected directory: what is new is removed, what was there compared.
/// `false`, with nothing done, if more than [`MAX_ENTRIES`] are new: the caller replaces
/// the directory whole.
fn sweep_dir(
    fd: &OwnedFd,
    children: &BTreeMap<OsString, Node>,
    shown: &str,
    out: &mut Out,
    depth: usize,
) -> bool {
    match list(fd) {
        Ok(mut names) => {
            names.retain(|(n, _)| !children.contains_key(n));
            if names.len() > MAX_ENTRIES {
                return false;
            }
            for (n, is_dir) in names {
                let restored = remove(fd, &n, is_dir, &mut out.later).map_err(text);
                out.push(Found {
                    path: join(shown, &n),
                    what: What::Created,
                    restored,
                });
            }
        }
        Err(e) => out.push(Found {
            path: shown.to_string(),
            what: What::Changed,
            restored: Err(format!("it could not be listed: {e}")),
        }),
    }
    if depth >= MAX_DEPTH {
        return true;
    }
    for (n, node) in children {
        restore(fd, n, node, &join(shown, n), out, depth + 1);
    }
    true
}

/// Whether the regular file `name` (whose `fstatat` is `st`) is still what `before` was: the
/// same mode and owner, the same content, and linked nowhere new.
fn same_file(dir: BorrowedFd<'_>, name: &OsStr, st: &FileStat, before: &Node) -> bool {
    let Node::File {
        meta,
        inode,
        nlink,
        content,
    } = before
    else {
        return false;
    };
    if Meta::of(st) != *meta
        || st.st_nlink != *nlink
        || (*nlink > 1 && (st.st_dev, st.st_ino) != *inode)
        || u64::try_from(st.st_size).ok() != u64::try_from(content.len()).ok()
    {
        return false;
    }
    let max = u64::try_from(content.len()).unwrap_or(u64::MAX);
    match read_file(dir, name, max) {
        Ok((fst, now)) => (fst.st_dev, fst.st_ino) == (st.st_dev, st.st_ino) && now == *content,
        Err(_) => false,
    }
}

/// Creates `name` in `dir` as `node` was (a directory with all it held), owned as it was
/// where the daemon may give it that owner.
fn create(dir: &OwnedFd, name: &OsStr, node: &Node) -> io::Result<()> {
    match node {
        Node::Link { target } => symlinkat(target.as_os_str(), dir, name)?,
        Node::File { meta, content, .. } => {
            let fd = openat(
                dir,
                name,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )?;
            let mut f = File::from(fd);
            f.write_all(content)?;
            set_meta(&f.into(), meta)?;
        }
        Node::Dir { meta, children } => {
            mkdirat(dir, name, Mode::from_bits_truncate(0o700))?;
            let fd = open_dir(dir.as_fd(), name)?;
            for (n, child) in children.iter().flatten() {
                create(&fd, n, child)?;
            }
            set_meta(&fd, meta)?;
        }
    }
    Ok(())
}

/// Puts back the owner (where it differs and the daemon may: root without its wall's
/// dropped capabilities; otherwise said in the log) and then the mode (a change of owner
/// clears set-id bits).
fn set_meta(fd: &OwnedFd, meta: &Meta) -> io::Result<()> {
    let st = fstat(fd)?;
    if (st.st_uid, st.st_gid) != (meta.uid, meta.gid) {
        if let Err(e) = fchown(
            fd,
            Some(Uid::from_raw(meta.uid)),
            Some(Gid::from_raw(meta.gid)),
        ) {
            log::warn!(
                "sweep: a restored protected path is owned by {}:{}, not {}:{} as before ({e})",
                st.st_uid,
                st.st_gid,
                meta.uid,
                meta.gid
            );
        }
    }
    fchmod(fd, Mode::from_bits_truncate(meta.mode))?;
    Ok(())
}

/// Removes the protected path `a` if it exists now, and every symbolic link put on the way
/// to it: walks down from its base by descriptor, never following a link.
fn sweep_absent(a: &Absent, shown: &str, out: &mut Out) {
    let Ok(rel) = a.path.strip_prefix(&a.base) else {
        return;
    };
    let mut dir = match open_dir_path(&a.base) {
        Ok(d) => d,
        // Its base is gone: nothing can be at the path (the base is the worktree or the
        // worktree's git dir, which a job cannot remove but in a linked worktree).
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return,
        Err(e) => {
            out.push(Found::unexamined(shown, e));
            return;
        }
    };
    let parts: Vec<&OsStr> = rel.iter().collect();
    let mut at: Vec<&OsStr> = Vec::new();
    for (i, name) in parts.iter().enumerate() {
        at.push(name);
        let st = match fstatat(&dir, *name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(Errno::ENOENT) => return,
            Err(e) => {
                out.push(Found::unexamined(shown, e));
                return;
            }
        };
        let kind = st.st_mode & libc::S_IFMT;
        let last = i + 1 == parts.len();
        if last || kind == libc::S_IFLNK {
            let what = if last {
                What::Created
            } else {
                What::LinkOnTheWay(shown.to_string())
            };
            // The name of what is removed, as the result shows it: the protected path's
            // shown name, cut to the components walked.
            let path = shown_prefix(shown, parts.len(), at.len());
            let restored = remove(&dir, name, kind == libc::S_IFDIR, &mut out.later).map_err(text);
            out.push(Found {
                path,
                what,
                restored,
            });
            return;
        }
        if kind != libc::S_IFDIR {
            // A file where a directory would be: the protected path cannot exist.
            return;
        }
        dir = match open_dir_to_change(dir.as_fd(), name) {
            Ok(d) => d,
            Err(e) => {
                out.push(Found::unexamined(shown, e));
                return;
            }
        };
    }
}

/// The first `walked` of the `total` last components of `shown`, with what comes before
/// them (`.git/` for a linked worktree's git dir): the name of a directory on the way.
fn shown_prefix(shown: &str, total: usize, walked: usize) -> String {
    let parts: Vec<&str> = shown.split('/').collect();
    let keep = parts.len().saturating_sub(total.saturating_sub(walked));
    parts[..keep].join("/")
}

/// Removes `name` from `dir`: renamed aside first (`.landwall-swept-PID-RANDOM`, never over
/// anything), so that the name is free in one step; then a file is removed, and a
/// directory is put in `later`, to be removed with all it holds after the sweep
/// ([`Later::remove`]). The name is free all the same.
fn remove(dir: &OwnedFd, name: &OsStr, is_dir: bool, later: &mut Vec<Aside>) -> io::Result<()> {
    let aside = match rename_aside(dir, name) {
        Ok(a) => a,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            // A directory the job made unwritable: made writable to its owner again.
            writable(dir)?;
            rename_aside(dir, name)?
        }
        Err(e) => return Err(e),
    };
    if is_dir {
        later.push(Aside {
            dir: dir.try_clone()?,
            name: aside,
        });
    } else if let Err(e) = unlinkat(dir, aside.as_os_str(), UnlinkatFlags::NoRemoveDir) {
        log::warn!(
            "sweep: {} could not be removed ({e}); it is left renamed aside as {}",
            name.to_string_lossy(),
            aside.to_string_lossy()
        );
    }
    Ok(())
}

fn rename_aside(dir: &OwnedFd, name: &OsStr) -> io::Result<OsString> {
    // Not derived from `name`: a name of the longest length allowed would leave no room
    // for a suffix, and what could not be renamed would stay in place.
    landwall::rename_aside(dir.as_fd(), name, OsStr::new(""))
}

/// Removes the directory `name` in `dir` and everything in it, by descriptor, following no
/// link (a link is removed as itself), however deep or wide: a job can nest directories
/// thousands of levels down, or put tens of thousands side by side, and a tree left in a
/// protected directory would stop every later job's snapshot there. Each directory is
/// listed once, when the walk enters it: its files are removed then and its directories'
/// names kept for the walk (so the work is linear in the tree, not in its width times its
/// size). It walks down one directory at a time, holding names on the way (not a descriptor
/// per level), and climbs back through `..`, checked to be the directory it came from.
/// Called only once nothing of the job runs, so the tree holds still; what appeared anyway
/// makes an `rmdir` fail, and the tree stays aside. It stops (`TimedOut`, the rest left
/// aside) once `go_on` says so, asked for each directory entered.
fn remove_tree(dir: &OwnedFd, name: &OsStr, go_on: &dyn Fn() -> bool) -> io::Result<()> {
    /// A directory entered: its identity and name in its parent (none for the top), and
    /// the directories in it not yet removed.
    struct Level {
        parent: Option<((u64, u64), OsString)>,
        left: Vec<OsString>,
    }
    /// Removes the files in `fd` and gives the names of the directories.
    fn enter(fd: &OwnedFd) -> io::Result<Vec<OsString>> {
        let mut dirs = Vec::new();
        for (n, is_dir) in list(fd)? {
            if is_dir {
                dirs.push(n);
            } else {
                unlinkat(fd, n.as_os_str(), UnlinkatFlags::NoRemoveDir)?;
            }
        }
        Ok(dirs)
    }
    let top = open_dir_to_change(dir.as_fd(), name)?;
    writable(&top)?;
    let mut way = vec![Level {
        parent: None,
        left: enter(&top)?,
    }];
    let mut cur = top;
    while let Some(level) = way.last_mut() {
        if let Some(n) = level.left.pop() {
            if !go_on() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "its removal was stopped (the daemon stopping, or its time per job spent)",
                ));
            }
            let here = fstat(&cur)?;
            let down = open_dir_to_change(cur.as_fd(), &n)?;
            writable(&down)?;
            let left = enter(&down)?;
            way.push(Level {
                parent: Some(((here.st_dev, here.st_ino), n)),
                left,
            });
            cur = down;
            continue;
        }
        // `cur` is empty: removed from its parent, which is where the walk goes on.
        let Some((parent_id, own_name)) = way.pop().and_then(|l| l.parent) else {
            break;
        };
        let up = openat(
            &cur,
            "..",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let st = fstat(&up)?;
        if (st.st_dev, st.st_ino) != parent_id {
            return Err(io::Error::other(
                "the tree moved while it was being removed",
            ));
        }
        unlinkat(&up, own_name.as_os_str(), UnlinkatFlags::RemoveDir)?;
        cur = up;
    }
    unlinkat(dir, name, UnlinkatFlags::RemoveDir)?;
    Ok(())
}

fn text(e: io::Error) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::process::Command;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A fresh directory under the system's temp dir, by its real path, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("lw-sweep-{tag}-{}-{n}", std::process::id()));
            let _ignored = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).expect("mkdir");
            Scratch(fs::canonicalize(&p).expect("canon"))
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ignored = Command::new("chmod")
                .args(["-R", "u+rwx"])
                .arg(&self.0)
                .status();
            let _ignored = fs::remove_dir_all(&self.0);
        }
    }

    /// A main checkout in `t/wt` (a `.git` with config and a hooks directory, by hand) and
    /// its snapshot.
    fn main_checkout(t: &Scratch) -> (PathBuf, Worktree) {
        let root = t.0.join("wt");
        fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
        fs::write(root.join(".git/config"), "[core]\n\tbare = false\n").expect("config");
        fs::write(root.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").expect("hook");
        fs::set_permissions(
            root.join(".git/hooks/pre-commit.sample"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        fs::write(root.join("README"), "not protected\n").expect("readme");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::Main {
                git_dir: root.join(".git"),
            },
        };
        (root, wt)
    }

    fn names(found: &[Found]) -> Vec<(String, What)> {
        found
            .iter()
            .map(|f| (f.path.clone(), f.what.clone()))
            .collect()
    }

    #[test]
    fn nothing_touched_nothing_found() {
        let t = Scratch::new("none");
        let (root, wt) = main_checkout(&t);
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        assert!(!snap.is_empty());
        fs::write(root.join("README"), "changed, but not protected\n").expect("write");
        fs::create_dir_all(root.join(".git/objects/ab")).expect("objects");
        assert_eq!(snap.sweep(), []);
    }

    #[test]
    fn a_planted_hook_and_a_changed_config_are_put_back() {
        let t = Scratch::new("hook");
        let (root, wt) = main_checkout(&t);
        let config_before = fs::read(root.join(".git/config")).expect("read");
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\ntouch /x\n").expect("hook");
        let mut config = fs::OpenOptions::new()
            .append(true)
            .open(root.join(".git/config"))
            .expect("open");
        config
            .write_all(b"\tfsmonitor = touch /x\n")
            .expect("append");
        drop(config);
        fs::remove_file(root.join(".git/hooks/pre-commit.sample")).expect("rm");
        let found = snap.sweep();
        assert_eq!(
            names(&found),
            [
                (".git/config".to_string(), What::Changed),
                (".git/hooks/pre-commit".to_string(), What::Created),
                (".git/hooks/pre-commit.sample".to_string(), What::Removed),
            ]
        );
        assert!(found.iter().all(|f| f.restored.is_ok()), "{found:?}");
        assert_eq!(
            fs::read(root.join(".git/config")).expect("read"),
            config_before
        );
        assert!(!root.join(".git/hooks/pre-commit").exists());
        let sample = fs::metadata(root.join(".git/hooks/pre-commit.sample")).expect("back");
        assert_eq!(sample.mode() & 0o7777, 0o755);
        assert_eq!(
            describe(&found),
            "tampered: .git/config changed, .git/hooks/pre-commit created, .git/hooks/pre-commit.sample removed (restored)"
        );
        // Nothing left over: the aside names are gone too.
        let hooks: Vec<_> = fs::read_dir(root.join(".git/hooks"))
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(hooks, [OsString::from("pre-commit.sample")]);
        assert_eq!(snap.sweep(), [], "a second sweep finds nothing");
    }

    #[test]
    fn a_hard_link_to_a_protected_file_is_a_change() {
        let t = Scratch::new("hardlink");
        let (root, wt) = main_checkout(&t);
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        let elsewhere = t.0.join("elsewhere");
        fs::hard_link(root.join(".git/config"), &elsewhere).expect("link");
        let found = snap.sweep();
        assert_eq!(names(&found), [(".git/config".to_string(), What::Changed)]);
        // The protected file is a copy of its own now: a write to the other name is not
        // a write to it.
        fs::write(&elsewhere, "[core]\n\tfsmonitor = x\n").expect("write");
        assert_eq!(
            fs::read_to_string(root.join(".git/config")).expect("read"),
            "[core]\n\tbare = false\n"
        );
    }

    #[test]
    fn what_appears_at_an_absent_path_is_removed_and_a_link_target_untouched() {
        let t = Scratch::new("absent");
        let (root, wt) = main_checkout(&t);
        let target = t.0.join("target");
        fs::write(&target, "outside\n").expect("target");
        let outside_dir = t.0.join("outside-dir");
        fs::create_dir(&outside_dir).expect("mkdir");
        fs::write(outside_dir.join("tasks.json"), "{}").expect("tasks");
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        std::os::unix::fs::symlink(&target, root.join(".envrc")).expect("link");
        fs::write(root.join(".git/commondir"), "/elsewhere\n").expect("commondir");
        std::os::unix::fs::symlink(&outside_dir, root.join(".vscode")).expect("link");
        fs::create_dir_all(root.join(".husky/_")).expect("husky");
        fs::write(root.join(".husky/_/pre-commit"), "x").expect("husky hook");
        let found = snap.sweep();
        let mut got = names(&found);
        got.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            got,
            [
                (".envrc".to_string(), What::Created),
                (".git/commondir".to_string(), What::Created),
                (".husky".to_string(), What::Created),
                (
                    ".vscode".to_string(),
                    What::LinkOnTheWay(".vscode/settings.json".into())
                ),
            ]
        );
        for p in [".envrc", ".git/commondir", ".vscode", ".husky"] {
            assert!(fs::symlink_metadata(root.join(p)).is_err(), "{p} left");
        }
        assert_eq!(fs::read_to_string(&target).expect("target"), "outside\n");
        assert!(outside_dir.join("tasks.json").exists());
    }

    #[test]
    fn a_directory_made_a_link_or_unwritable_is_put_back() {
        let t = Scratch::new("dir");
        let (root, wt) = main_checkout(&t);
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        fs::write(root.join(".git/hooks/post-checkout"), "x").expect("hook");
        fs::set_permissions(root.join(".git/hooks"), fs::Permissions::from_mode(0o500))
            .expect("chmod");
        let found = snap.sweep();
        assert_eq!(
            names(&found),
            [
                (".git/hooks/post-checkout".to_string(), What::Created),
                (".git/hooks".to_string(), What::Changed),
            ]
        );
        assert!(found.iter().all(|f| f.restored.is_ok()), "{found:?}");
        assert_eq!(
            fs::metadata(root.join(".git/hooks")).expect("stat").mode() & 0o777,
            0o755
        );
        // The hooks directory swapped for a link to a directory of the job's.
        let evil = t.0.join("evil-hooks");
        fs::create_dir(&evil).expect("mkdir");
        fs::rename(root.join(".git/hooks"), t.0.join("moved")).expect("mv");
        std::os::unix::fs::symlink(&evil, root.join(".git/hooks")).expect("link");
        let found = snap.sweep();
        assert_eq!(names(&found), [(".git/hooks".to_string(), What::Replaced)]);
        assert!(fs::symlink_metadata(root.join(".git/hooks"))
            .expect("stat")
            .is_dir());
        assert!(root.join(".git/hooks/pre-commit.sample").is_file());
        assert!(evil.is_dir(), "the link's target is untouched");
    }

    #[test]
    fn a_name_of_the_longest_length_is_removed_too() {
        let t = Scratch::new("long");
        let (root, wt) = main_checkout(&t);
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        let long = "h".repeat(255);
        fs::write(root.join(".git/hooks").join(&long), "x").expect("long name");
        fs::create_dir_all(root.join(".git/hooks/d/e/f")).expect("tree");
        fs::write(root.join(".git/hooks/d/e/f/g"), "x").expect("deep");
        let found = snap.sweep();
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|f| f.restored.is_ok()), "{found:?}");
        let hooks: Vec<_> = fs::read_dir(root.join(".git/hooks"))
            .expect("ls")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(hooks, [OsString::from("pre-commit.sample")]);
    }

    #[test]
    fn a_protected_tree_too_large_to_keep_is_refused_naming_it_and_the_fix() {
        let t = Scratch::new("large");
        let (root, wt) = main_checkout(&t);
        fs::create_dir_all(root.join(".opencode/node_modules")).expect("mkdir");
        let big = vec![b'x'; usize::try_from(MAX_FILE).expect("fits") + 1];
        fs::write(root.join(".opencode/node_modules/big.js"), &big).expect("big");
        let e = Snapshot::take(&wt, &[]).expect_err("too large");
        assert!(e.contains(".opencode/node_modules/big.js"), "{e}");
        assert!(e.contains("\"!.opencode\""), "{e}");
        assert!(!e.contains('\n'), "{e}");
        // Left unprotected, it is not read.
        assert!(Snapshot::take(&wt, &[protect::Change::Remove(".opencode".into())]).is_ok());
    }

    /// Found by review: 40,000 empty directories under an absent `.husky` took the sweep
    /// 414 s, because the walk re-listed a directory each time it climbed back to it. Each
    /// directory is listed once now: a wide tree, with deep and unwritable parts, goes whole.
    #[test]
    fn a_wide_tree_under_an_absent_path_is_removed_whole() {
        let t = Scratch::new("wide");
        let (root, wt) = main_checkout(&t);
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        let husky = root.join(".husky");
        fs::create_dir(&husky).expect("mkdir");
        for i in 0..40_000 {
            fs::create_dir(husky.join(format!("d{i}"))).expect("mkdir");
        }
        fs::create_dir_all(husky.join("d7/a/b/c")).expect("mkdir");
        fs::write(husky.join("d7/a/b/c/pre-commit"), "#!/bin/sh\n").expect("write");
        fs::write(husky.join("d9/f"), "x").expect("write");
        fs::set_permissions(husky.join("d9"), fs::Permissions::from_mode(0o500)).expect("chmod");
        let found = snap.sweep();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, ".husky");
        assert!(found[0].restored.is_ok(), "{found:?}");
        assert!(fs::symlink_metadata(&husky).is_err());
        let left: Vec<_> = fs::read_dir(&root)
            .expect("read_dir")
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().contains("landwall-swept"))
            .collect();
        assert!(left.is_empty(), "left aside: {left:?}");
    }

    /// More new entries in a protected directory than a snapshot may hold: the directory
    /// is set aside whole and made again as it was (its own hook kept), in one step, not
    /// one rename per entry; a removal that is stopped leaves the rest aside, and says so.
    #[test]
    fn a_protected_directory_flooded_with_entries_is_replaced_whole() {
        let t = Scratch::new("flood");
        let (root, wt) = main_checkout(&t);
        let hooks = root.join(".git/hooks");
        fs::create_dir_all(&hooks).expect("hooks");
        fs::write(hooks.join("mine"), "#!/bin/sh\n").expect("write");
        let snap = Snapshot::take(&wt, &[]).expect("snapshot");
        for i in 0..=MAX_ENTRIES {
            fs::create_dir(hooks.join(format!("d{i}"))).expect("mkdir");
        }
        let (found, later) = snap.sweep_first();
        assert_eq!(found.len(), 1, "{:?}", &found[..found.len().min(3)]);
        assert_eq!(found[0].path, ".git/hooks");
        assert_eq!(found[0].what, What::Replaced);
        assert!(found[0].restored.is_ok(), "{found:?}");
        let names: std::collections::BTreeSet<_> = fs::read_dir(&hooks)
            .expect("list")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            names.contains(OsStr::new("mine")) && names.len() < 5,
            "{names:?}"
        );
        let stop = std::sync::atomic::AtomicBool::new(true);
        let left = later.remove(&stop, None);
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].contains("stopped"), "{left:?}");
        assert!(snap.sweep().is_empty(), "a second sweep finds nothing");
    }

    #[test]
    fn the_reason_names_what_was_not_restored_and_counts_the_rest() {
        let mut found: Vec<Found> = (0..25)
            .map(|i| Found {
                path: format!(".git/hooks/h{i}"),
                what: What::Created,
                restored: Ok(()),
            })
            .collect();
        let all = describe(&found);
        assert!(
            all.starts_with("tampered: .git/hooks/h0 created, "),
            "{all}"
        );
        assert!(all.ends_with("and 5 more (restored)"), "{all}");
        found.truncate(1);
        found.push(Found {
            path: ".git/config".into(),
            what: What::Changed,
            restored: Err("Permission denied".into()),
        });
        assert_eq!(
            describe(&found),
            "tampered: .git/hooks/h0 created (restored), .git/config changed (NOT restored: Permission denied)"
        );
    }
}
