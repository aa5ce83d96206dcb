//! The private mount namespace of a launch in a linked worktree: inside it, the
//! repository's object store is the worktree's quarantine, and the real store is visible
//! only read-only, as the quarantine's alternate.
//!
//! Why a namespace: Landlock cannot let git add objects without letting it replace them
//! (git writes each object to a temporary file in the object's directory and removes that
//! file, so the directory needs WRITE_FILE and REMOVE_FILE, and with those any existing
//! object can be rewritten or unlinked and re-created). And `GIT_OBJECT_DIRECTORY` would
//! send the objects of every other repository the agent touches (a `git clone`, a test's
//! temporary repository) into the quarantine too. A bind mount changes only this path, for
//! this process and its children:
//!
//! ```text
//! <common>/objects                      -> <git dir>/landwall-objects   (the quarantine)
//! <git dir>/landwall-base               -> the real <common>/objects, read-only
//! <git dir>/landwall-objects/info/alternates = <git dir>/landwall-base
//! ```
//!
//! git then writes new objects into the quarantine and reads the repository's through the
//! alternate; a write to the real store fails with EROFS whatever the Landlock rules say.
//! The watcher ([`crate::watcher`]), outside the namespace, moves what the quarantine holds
//! into the real store after checking each object.
//!
//! Invariants: nothing is mounted until the process is in its own mount namespace (as root,
//! with propagation into the parent cut off first); every mount is made from and onto a
//! descriptor opened without following a final symlink and checked, so a path the agent
//! swapped meanwhile cannot redirect it; and after each mount the result is compared with
//! what was meant (device and inode). A namespace the kernel refuses is reported as such
//! ([`NsError::Refused`]); any failure after that is fatal ([`NsError::Failed`]).

use std::ffi::CString;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::fcntl::{openat, OFlag};
use nix::sys::stat::{fstat, mkdirat, FileStat, Mode};

use crate::policy::Quarantine;
use crate::protect::{Held, Hold};
use crate::sys;

/// Why the private namespace is not up.
#[derive(Debug, thiserror::Error)]
pub enum NsError {
    /// The kernel (or a security module, or a seccomp filter) refused a new namespace:
    /// nothing was changed, and the launch may go on without it if the configuration allows.
    #[error("a private mount namespace was refused: {0}")]
    Refused(#[source] io::Error),
    /// A step after that failed: the process is in a namespace of unknown shape.
    #[error("setting up the private mount namespace: {step}: {source}")]
    Failed {
        /// The step.
        step: String,
        /// Why.
        source: io::Error,
    },
}

/// For the first mount in the new namespace: inside an enclosing Landlock domain every mount
/// is refused (EPERM), and the new namespace then shows exactly what the old one did, so that
/// counts as a refused namespace; any other failure is fatal.
fn first_mount_refused(step: &'static str) -> impl FnOnce(io::Error) -> NsError {
    move |e: io::Error| {
        if e.raw_os_error() == Some(libc::EPERM) {
            NsError::Refused(io::Error::new(
                e.kind(),
                format!("{step}: {e} (mounts are refused here, as inside another wall)"),
            ))
        } else {
            NsError::Failed {
                step: step.into(),
                source: e,
            }
        }
    }
}

fn failed(step: impl Into<String>) -> impl FnOnce(io::Error) -> NsError {
    let step = step.into();
    move |source| NsError::Failed { step, source }
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from(e)
}

/// Steps, in order:
/// 1. with a quarantine, prepare, in the real file system: the quarantine and
///    `landwall-base` as directories (not links) in the worktree's git dir, and the
///    quarantine's `info/alternates`;
/// 2. a new mount namespace (for a user: in a new user namespace that maps its own uid and
///    gid to themselves); as root, propagation to the parent namespace cut (`MS_SLAVE`);
/// 3. with a quarantine: the real object store bound onto `landwall-base`, and that mount
///    made read-only; the quarantine bound onto `<common>/objects`; each mount checked by
///    device and inode;
/// 4. each protected path that exists ([`crate::protect`]) bound onto itself, parents
///    first: read-only, or in place (a directory on the way, a main checkout's git dir);
///    each checked by device and inode, and a read-only one by its mount flags;
/// 5. with `pts`: a private `/dev/pts` ([`private_pts`]).
///
/// With `tmp` (a drain job's), right after step 2: a fresh tmpfs of that many bytes on
/// `/tmp` and on `/dev/shm` ([`private_tmp`]), before anything else is mounted or opened
/// there, and before the wall's rules (opened when the ruleset is built) name them.
///
/// Returns whether the private `/dev/pts` is up (a mount of it refused where mounts are
/// refused, inside another wall, is not an error: the launch then grants no pseudo-terminal
/// but its own).
pub fn enter(
    q: Option<&Quarantine>,
    held: &[Held],
    pts: bool,
    tmp: Option<u64>,
    is_root: bool,
) -> Result<Entered, NsError> {
    // A mount covers a path, but Landlock grants inodes: where the file system of a held
    // path is mounted a second time, the agent writes what is held through that other path
    // (found by review). Then nothing the namespace holds holds: refused, as where the
    // kernel refuses the namespace (said, or fatal with `protect_required`).
    if let Some(why) = aliased(held).map_err(failed("reading /proc/self/mountinfo"))? {
        return Err(NsError::Refused(io::Error::other(why)));
    }
    if let Some(q) = q {
        prepare(q).map_err(failed(format!("preparing {}", q.dir.display())))?;
    }
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let flags = if is_root {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    };
    if !is_root {
        // The new user namespace needs its maps written through /proc/self, which an
        // enclosing Landlock domain (a launch from inside a wall) refuses: ask first, while
        // nothing has changed. (Opening the map of the current namespace for writing is
        // allowed; writing it would not be, and nothing is written.)
        if let Err(e) = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/self/uid_map")
        {
            return Err(NsError::Refused(io::Error::new(
                e.kind(),
                format!("/proc/self/uid_map: {e} (as inside another wall)"),
            )));
        }
    }
    sys::unshare(flags).map_err(|e| match e.raw_os_error() {
        // Not allowed here (a sysctl, a security module, a seccomp filter, no kernel
        // support): nothing an agent can change. Anything else (ENOSPC: the namespace
        // limit, which an agent could exhaust to downgrade its next launch) is fatal.
        Some(libc::EPERM | libc::ENOSYS | libc::EINVAL) => NsError::Refused(e),
        _ => NsError::Failed {
            step: "creating the namespace".into(),
            source: e,
        },
    })?;
    // Inside an enclosing Landlock domain (a launch from inside a wall, or a walled drain
    // daemon's job) every mount is refused: the new namespace then shows exactly what the
    // old one did, so this counts as refused too.
    if is_root {
        sys::mount(None, c"/", libc::MS_REC | libc::MS_SLAVE).map_err(|e| {
            match e.raw_os_error() {
                // `/` is not a mount point (a chroot): propagation cannot be cut, so nothing
                // may be mounted; as refused as a namespace the kernel will not make.
                Some(libc::EINVAL) => NsError::Refused(io::Error::new(
                    e.kind(),
                    format!(
                        "cutting mount propagation: {e} (`/` is not a mount point, as in a chroot)"
                    ),
                )),
                _ => first_mount_refused("cutting mount propagation")(e),
            }
        })?;
    } else {
        // A process may map only its own ids, and its gid only once setgroups is denied.
        for (file, text) in [
            ("/proc/self/setgroups", "deny".to_string()),
            ("/proc/self/uid_map", format!("{uid} {uid} 1")),
            ("/proc/self/gid_map", format!("{gid} {gid} 1")),
        ] {
            std::fs::write(file, text).map_err(failed(format!("writing {file}")))?;
        }
    }
    if let Some(size) = tmp {
        private_tmp(size)?;
    }
    if let Some(q) = q {
        quarantine(q)?;
    }
    let mut privates = Vec::new();
    // A layer laid as the project's own directory (no overlay here): what the policy held
    // under it is the user's, out of sight now.
    let mut covered: Vec<&Path> = Vec::new();
    for (i, h) in held.iter().enumerate() {
        if covered.iter().any(|c| h.path.starts_with(c)) {
            continue;
        }
        let copy = hold(h).map_err(|e| {
            let step = format!("holding the protected path {}", h.path.display());
            // The first mount of the namespace: refused inside another wall.
            if i == 0 && q.is_none() && tmp.is_none() {
                first_mount_refused("holding a protected path")(e)
            } else {
                failed(step)(e)
            }
        })?;
        match copy {
            Made::Nothing => {}
            Made::Copy(copy) => privates.push((i, copy)),
            Made::OwnInstead => covered.push(&h.path),
        }
    }
    if !pts {
        return Ok(Entered {
            pts: false,
            privates,
        });
    }
    match private_pts() {
        Ok(()) => Ok(Entered {
            pts: true,
            privates,
        }),
        // Nothing was mounted (refused inside another wall, or not possible here): the
        // launch leaves /dev/pts and /dev/ptmx out of its wall instead.
        Err(Pts::NotMounted) => Ok(Entered {
            pts: false,
            privates,
        }),
        Err(Pts::Mounted(e)) => Err(NsError::Failed {
            step: "making a private /dev/pts".into(),
            source: e,
        }),
    }
}

/// What [`enter`] made.
#[derive(Debug)]
pub struct Entered {
    /// Whether the private `/dev/pts` is up.
    pub pts: bool,
    /// The private copies made ([`Hold::Private`]), each with its index in `held`.
    pub privates: Vec<(usize, OwnedFd)>,
}

/// Where a drain job gets a tmpfs of its own, in this order. `/dev/shm` only where it is
/// a directory.
pub const PRIVATE_TMP: [&str; 2] = ["/tmp", "/dev/shm"];

/// A fresh tmpfs on each of [`PRIVATE_TMP`]: mode 1777 like the host's, `nosuid,nodev`,
/// `size` bytes at most (a write past it fails with ENOSPC). Nothing else in the namespace
/// holds it, so it goes, with all it holds, when the job's last process does.
///
/// Each mount is made onto the directory opened with no symbolic link on the way, and
/// checked after: a new file system (another device than before), a tmpfs, the mode and
/// flags asked for. The first (`/tmp`) is the namespace's first mount: refused there
/// (EPERM, inside another wall) it counts as a refused namespace.
fn private_tmp(size: u64) -> Result<(), NsError> {
    // Inodes capped too (one a 16 KiB of the size, at least 1024): each costs kernel memory
    // that `size` does not count, so a job making millions of empty files would hold the
    // host's memory however small its tmpfs.
    let inodes = (size / (16 << 10)).max(1024);
    let data = CString::new(format!("mode=1777,size={size},nr_inodes={inodes}"))
        .map_err(|_| failed("mounting a private /tmp")(io::Error::other("size")))?;
    for (i, place) in PRIVATE_TMP.iter().enumerate() {
        let path = Path::new(place);
        let dir = match open_real_dir(path, OFlag::O_PATH) {
            Ok(d) => d,
            // No /dev/shm here: nothing to hide, and the wall grants none.
            Err(e) if i > 0 && e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(failed(format!("opening {place}"))(e)),
        };
        let before = stat(&dir).map_err(failed(format!("checking {place}")))?;
        let target = CString::new(format!("/proc/self/fd/{}", dir.as_raw_fd())).map_err(|_| {
            failed(format!("mounting a tmpfs on {place}"))(io::Error::other("path"))
        })?;
        let mounted = sys::mount_fs(c"tmpfs", &target, libc::MS_NOSUID | libc::MS_NODEV, &data);
        match (mounted, i) {
            (Ok(()), _) => {}
            (Err(e), 0) => return Err(first_mount_refused("mounting a private /tmp")(e)),
            (Err(e), _) => return Err(failed(format!("mounting a tmpfs on {place}"))(e)),
        }
        mounted_tmp(path, &before, 0o1777)
            .map_err(failed(format!("checking the tmpfs on {place}")))?;
    }
    Ok(())
}

/// After the tmpfs mount on `path`: what `path` leads to now is that tmpfs, of `mode`.
fn mounted_tmp(path: &Path, before: &FileStat, mode: libc::mode_t) -> io::Result<()> {
    let (_, st) = mounted(path, before, nix::sys::statfs::TMPFS_MAGIC, "a tmpfs")?;
    if st.st_mode & 0o7777 != mode {
        return Err(io::Error::other(format!(
            "its mode is {:o}, not {mode:o}",
            st.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// After a mount of a file system on `path` (`before` what was there): what `path` leads to
/// now is another file system than before, of the `magic` type (`what`), nosuid and nodev.
/// Returns it, opened, and its state.
fn mounted(
    path: &Path,
    before: &FileStat,
    magic: nix::sys::statfs::FsType,
    what: &str,
) -> io::Result<(OwnedFd, FileStat)> {
    let now = open_real_dir(path, OFlag::O_RDONLY)?;
    let st = stat(&now)?;
    if st.st_dev == before.st_dev {
        return Err(io::Error::other(
            "it is the same file system as before the mount",
        ));
    }
    let fs = nix::sys::statfs::fstatfs(&now).map_err(errno)?;
    if fs.filesystem_type() != magic {
        return Err(io::Error::other(format!("it is not {what}")));
    }
    let flags = nix::sys::statvfs::fstatvfs(&now).map_err(errno)?.flags();
    use nix::sys::statvfs::FsFlags;
    if !flags.contains(FsFlags::ST_NOSUID | FsFlags::ST_NODEV) {
        return Err(io::Error::other("it is not nosuid,nodev"));
    }
    Ok((now, st))
}

/// A private `/dev/pts`: a new devpts instance mounted on it, and its `ptmx` bound onto
/// `/dev/ptmx`. The pseudo-terminals the agent opens come from it; the user's other
/// terminals, in the instance it hides, cannot be named (the terminal the agent was started
/// on stays its own, through `/dev/tty` and the descriptors it inherited). Each mount is
/// checked: `/dev/pts` must then be another file system than before, and `/dev/ptmx` the
/// new instance's `ptmx`.
fn private_pts() -> Result<(), Pts> {
    let dev = open_real_dir(Path::new("/dev"), OFlag::O_PATH).map_err(|_| Pts::NotMounted)?;
    let before = open_dir(&dev, Path::new("pts"), OFlag::O_PATH)
        .and_then(|d| stat(&d))
        .map_err(|_| Pts::NotMounted)?;
    sys::mount_fs(
        c"devpts",
        c"/dev/pts",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        c"newinstance,ptmxmode=0666,mode=0620",
    )
    .map_err(|_| Pts::NotMounted)?;
    mounted_pts(&dev, &before).map_err(Pts::Mounted)
}

/// Why the private `/dev/pts` is not up: before anything was mounted, or after.
enum Pts {
    NotMounted,
    Mounted(io::Error),
}

/// After the devpts mount: checks it, and binds its `ptmx` onto `/dev/ptmx`.
fn mounted_pts(dev: &OwnedFd, before: &FileStat) -> io::Result<()> {
    let pts = open_dir(dev, Path::new("pts"), OFlag::O_PATH)?;
    let mounted = stat(&pts)?;
    if mounted.st_dev == before.st_dev {
        return Err(io::Error::other(
            "/dev/pts is not a new instance after the mount",
        ));
    }
    let ptmx = openat(
        &pts,
        "ptmx",
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    let target = openat(
        dev,
        "ptmx",
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    let want = stat(&ptmx)?;
    bind(&ptmx, &target)?;
    let now = openat(
        dev,
        "ptmx",
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    same(&now, &want)
}

/// Step 3: the quarantine's mounts, in the new namespace.
fn quarantine(q: &Quarantine) -> Result<(), NsError> {
    // Opened in the new namespace: a mount source from another namespace is refused.
    let git_dir = open_real_dir(&q.git_dir, OFlag::O_RDONLY)
        .map_err(failed(format!("opening {}", q.git_dir.display())))?;
    let quarantine = open_dir(
        &git_dir,
        Path::new(crate::policy::QUARANTINE_DIR),
        OFlag::O_RDONLY,
    )
    .map_err(failed(format!("opening {}", q.dir.display())))?;
    let base = open_dir(&git_dir, Path::new(crate::policy::BASE_DIR), OFlag::O_PATH)
        .map_err(failed(format!("opening {}", q.base.display())))?;
    let objects = open_real_dir(&q.objects, OFlag::O_PATH)
        .map_err(failed(format!("opening {}", q.objects.display())))?;
    let real = stat(&objects).map_err(failed("checking the object store"))?;
    let quarantined = stat(&quarantine).map_err(failed("checking the quarantine"))?;

    bind(&objects, &base).map_err(first_mount_refused("binding the object store"))?;
    let base_mount = open_dir(&git_dir, Path::new(crate::policy::BASE_DIR), OFlag::O_PATH)
        .map_err(failed(format!("opening {}", q.base.display())))?;
    same(&base_mount, &real).map_err(failed(format!("checking {}", q.base.display())))?;
    sys::mount_set_read_only(base_mount.as_fd(), true)
        .map_err(failed(format!("making {} read-only", q.base.display())))?;
    let ro = nix::sys::statvfs::fstatvfs(&base_mount)
        .map_err(|e| failed(format!("checking {}", q.base.display()))(errno(e)))?;
    if !ro.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY) {
        return Err(failed(format!("checking {}", q.base.display()))(
            io::Error::other("it is not read-only"),
        ));
    }

    bind(&quarantine, &objects).map_err(failed(format!(
        "binding {} onto {}",
        q.dir.display(),
        q.objects.display()
    )))?;
    let now = open_real_dir(&q.objects, OFlag::O_PATH)
        .map_err(failed(format!("opening {}", q.objects.display())))?;
    same(&now, &quarantined).map_err(failed(format!("checking {}", q.objects.display())))?;

    // Replace refs (`refs/replace/<id>`) make git show another object under an existing
    // one's name, everywhere (checkout, archive, a new worktree): as good as rewriting it.
    // `refs/` must stay writable for branches, so `refs/replace` is made a read-only mount
    // of itself: the replace refs the user has stay, none can be added or removed. (With
    // the reftable ref store every ref lives in `reftable/`: docs/escape.md.)
    let replace = q.common().join("refs/replace");
    let refs = open_real_dir(&q.common().join("refs"), OFlag::O_RDONLY)
        .map_err(failed(format!("opening {}", replace.display())))?;
    match mkdirat(&refs, "replace", Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(failed(format!("creating {}", replace.display()))(errno(e))),
    }
    let dir = open_dir(&refs, Path::new("replace"), OFlag::O_PATH)
        .map_err(failed(format!("opening {}", replace.display())))?;
    let before = stat(&dir).map_err(failed(format!("checking {}", replace.display())))?;
    bind(&dir, &dir).map_err(failed(format!("binding {}", replace.display())))?;
    let mounted = open_dir(&refs, Path::new("replace"), OFlag::O_PATH)
        .map_err(failed(format!("opening {}", replace.display())))?;
    same(&mounted, &before).map_err(failed(format!("checking {}", replace.display())))?;
    sys::mount_set_read_only(mounted.as_fd(), true)
        .map_err(failed(format!("making {} read-only", replace.display())))?;
    Ok(())
}

/// The size of the file system of a launch's own that covers a [`Hold::Fresh`] directory:
/// what a session keeps there is a few scripts.
const FRESH_SIZE: &str = "size=16m,nr_inodes=4096,mode=700";

/// What [`hold`] made beyond its mount.
enum Made {
    Nothing,
    /// A private copy ([`Hold::Private`]), for the watcher.
    Copy(OwnedFd),
    /// A [`Hold::Layer`] laid as the project's own directory (no overlay here).
    OwnInstead,
}

/// Step 4, for one protected path: opened without following any symlink, checked to be
/// what the policy saw (a directory or a regular file), then:
/// - read-only ([`Hold::ReadOnly`], [`Hold::Shared`]): bound onto itself, opened again and
///   checked to be the same file, made read-only and checked;
/// - in place: bound onto itself and checked;
/// - a hole: bound onto itself (inside a read-only hold, so read-only at first), made
///   writable and checked;
/// - fresh: an empty tmpfs of its own mounted on it (owner-only, size-capped), checked to be
///   a tmpfs that was not there before;
/// - the project's own: its directory bound onto it ([`own`]);
/// - a layer: an overlay with the project's upper layer ([`layer`]), or where none can be
///   laid, the project's own directory;
/// - private: a copy of its own ([`private_copy`]).
fn hold(h: &Held) -> io::Result<Made> {
    let path = CString::new(h.path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let mut flags = libc::O_PATH | libc::O_NOFOLLOW;
    if h.is_dir {
        flags |= libc::O_DIRECTORY;
    }
    let fd = sys::open_no_symlinks(None, &path, flags)?;
    let before = stat(&fd)?;
    let kind = if h.is_dir {
        libc::S_IFDIR
    } else {
        libc::S_IFREG
    };
    if !is_kind(&before, kind) {
        return Err(io::Error::other(
            "it changed type since the policy was built",
        ));
    }
    if h.hold == Hold::Fresh {
        if !h.is_dir {
            return Err(io::Error::other("only a directory can be covered"));
        }
        let target = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| io::Error::other("descriptor path"))?;
        let data = CString::new(FRESH_SIZE).map_err(|_| io::Error::other("options"))?;
        sys::mount_fs(c"tmpfs", &target, libc::MS_NOSUID | libc::MS_NODEV, &data)?;
        return mounted_tmp(&h.path, &before, 0o700).map(|()| Made::Nothing);
    }
    if h.hold == Hold::Own {
        let Some(store) = h.store.as_deref().filter(|_| h.is_dir) else {
            return Err(io::Error::other(
                "only a directory with a store can be covered",
            ));
        };
        return own(&h.path, &fd, store).map(|()| Made::Nothing);
    }
    if h.hold == Hold::Layer {
        let Some(store) = h.store.as_deref().filter(|_| h.is_dir) else {
            return Err(io::Error::other(
                "only a directory with a store can be layered",
            ));
        };
        return layer(&h.path, &fd, &before, store).map(|overlay| {
            if overlay {
                Made::Nothing
            } else {
                Made::OwnInstead
            }
        });
    }
    if h.hold == Hold::Private {
        if h.is_dir {
            return Err(io::Error::other("only a file can have a private copy"));
        }
        return private_copy(&h.path, &fd, &before).map(|c| c.map_or(Made::Nothing, Made::Copy));
    }
    bind(&fd, &fd)?;
    let now = sys::open_no_symlinks(None, &path, flags)?;
    same(&now, &before)?;
    let read_only = || -> io::Result<bool> {
        let st = nix::sys::statvfs::fstatvfs(&now).map_err(errno)?;
        Ok(st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
    };
    match h.hold {
        Hold::ReadOnly | Hold::Shared => {
            sys::mount_set_read_only(now.as_fd(), true)?;
            if !read_only()? {
                return Err(io::Error::other("it is not read-only after the mount"));
            }
        }
        Hold::Hole => {
            sys::mount_set_read_only(now.as_fd(), false)?;
            if read_only()? {
                return Err(io::Error::other("it is still read-only after the mount"));
            }
        }
        Hold::InPlace | Hold::Fresh | Hold::Private | Hold::Layer | Hold::Own => {}
    }
    Ok(Made::Nothing)
}

/// How many launches of one project may each have a layer at once: each takes the first
/// slot of the project's store that no mounted overlay uses.
const LAYER_SLOTS: usize = 32;

/// Covers the directory `path` (open as `fd`, `before` its state) with an overlay: `path`
/// itself is the lower layer, read-only; a slot of `store` (the project's, made by the
/// launch owner-only where the agent cannot write) holds the upper layer that takes what
/// is written, and its work directory. Every directory is opened without following a link
/// and named to the kernel by its descriptor, so no path is resolved twice; each must be
/// the launch's own (owned by it, writable by no one else). Then checked: `path` is now an
/// overlay that was not there before, nosuid and nodev.
///
/// The overlay is mounted with `index=on` (which the kernel drops where the file system
/// cannot give file handles, as in a user namespace), and the kernel refuses (EBUSY) an
/// upper layer that another mounted overlay uses: a launch of the same project running
/// meanwhile has slot 0, and this one takes the next. An upper layer made over another directory than
/// `path` is now (`~/.cache` removed and made again) is refused too (ESTALE): that slot is
/// emptied, as its lower layer was, and made again.
fn layer(path: &Path, fd: &OwnedFd, before: &FileStat, store: &Path) -> io::Result<bool> {
    let store_c = CString::new(store.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let dir_flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY;
    let store_fd = sys::open_no_symlinks(None, &store_c, dir_flags).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("its layer's store {}: {e}", store.display()),
        )
    })?;
    own_dir(&store_fd, store)?;
    let mut reset = false;
    let mut slot = 0;
    while slot < LAYER_SLOTS {
        let name = slot.to_string();
        let at = store.join(&name);
        let dir = own_subdir(&store_fd, &name, &at)?;
        let upper = own_subdir(&dir, "upper", &at.join("upper"))?;
        let work = own_subdir(&dir, "work", &at.join("work"))?;
        let mut data = format!(
            "lowerdir=/proc/self/fd/{},upperdir=/proc/self/fd/{},workdir=/proc/self/fd/{},index=on",
            fd.as_raw_fd(),
            upper.as_raw_fd(),
            work.as_raw_fd()
        );
        if !nix::unistd::geteuid().is_root() {
            // In a user namespace, overlayfs keeps its marks in user.* attributes.
            data.push_str(",userxattr");
        }
        let target = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| io::Error::other("descriptor path"))?;
        let data = CString::new(data).map_err(|_| io::Error::other("options"))?;
        match sys::mount_fs(c"overlay", &target, libc::MS_NOSUID | libc::MS_NODEV, &data) {
            Ok(()) => break,
            // Another launch of the project has it.
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => slot += 1,
            // Made over a directory that is gone: emptied, once.
            Err(e) if e.raw_os_error() == Some(libc::ESTALE) && !reset => {
                reset = true;
                drop((upper, work, dir));
                remove_slot(&at)?;
            }
            // The file system cannot hold an overlay's upper layer (NFS; an overlay itself,
            // as in a container): the project's own directory instead.
            Err(e) => {
                log::debug!(
                    "{}: no overlay ({e}); the project's own directory",
                    path.display()
                );
                drop((upper, work, dir));
                return own_instead(path, fd, &store_fd, store);
            }
        }
    }
    if slot == LAYER_SLOTS {
        // As many launches of the project as there are slots have a layer already: this
        // one too gets the project's own directory, walled all the same.
        log::debug!(
            "{}: {LAYER_SLOTS} layers of {} in use; the project's own directory",
            path.display(),
            store.display()
        );
        return own_instead(path, fd, &store_fd, store);
    }
    mounted(
        path,
        before,
        nix::sys::statfs::OVERLAYFS_SUPER_MAGIC,
        "an overlay",
    )?;
    Ok(true)
}

/// Where no layer can be laid: `own/` in the layer's `store` (open as `store_fd`), bound
/// onto `path`, which holds everywhere. The agent's tools start from an empty cache there,
/// and what is held under `path` is out of sight ([`enter`] skips it). Returns `false`: no
/// overlay.
fn own_instead(path: &Path, fd: &OwnedFd, store_fd: &OwnedFd, store: &Path) -> io::Result<bool> {
    let own_at = store.join("own");
    own_subdir(store_fd, "own", &own_at)?;
    own(path, fd, &own_at).map(|()| false)
}

/// Covers the directory `path` (open as `fd`) with `store` (the project's own, made by the
/// launch owner-only where the agent cannot write): opened without following a link,
/// checked to be the launch's own, bound onto it, and `path` checked to be it now.
fn own(path: &Path, fd: &OwnedFd, store: &Path) -> io::Result<()> {
    let store_c = CString::new(store.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_DIRECTORY;
    let source = sys::open_no_symlinks(None, &store_c, flags)
        .map_err(|e| io::Error::new(e.kind(), format!("its store {}: {e}", store.display())))?;
    own_dir(&source, store)?;
    let want = stat(&source)?;
    bind(&source, fd)?;
    let path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let now = sys::open_no_symlinks(None, &path, flags)?;
    same(&now, &want)
}

/// Checks that `fd` (`at`) is a directory of the launch's own: owned by it, writable by no
/// one else.
fn own_dir(fd: &OwnedFd, at: &Path) -> io::Result<()> {
    let st = stat(fd)?;
    if st.st_uid != nix::unistd::geteuid().as_raw() || st.st_mode & 0o022 != 0 {
        return Err(io::Error::other(format!(
            "{} is not the launch's own (owner {}, mode {:o})",
            at.display(),
            st.st_uid,
            st.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// `name` in `dir` (`at`), made owner-only where absent, opened without following a link,
/// and checked to be the launch's own ([`own_dir`]).
fn own_subdir(dir: &OwnedFd, name: &str, at: &Path) -> io::Result<OwnedFd> {
    match mkdirat(dir, name, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => {
            return Err(io::Error::new(
                errno(e).kind(),
                format!("making {}: {e}", at.display()),
            ))
        }
    }
    let fd = openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io::Error::new(errno(e).kind(), format!("{}: {e}", at.display())))?;
    own_dir(&fd, at)?;
    Ok(fd)
}

/// Removes the slot `at` with all it holds (the work directory's own directories are
/// made owner-less by overlayfs: given back to the owner first). Nothing is followed: it is
/// the launch's own, where the agent cannot write.
fn remove_slot(at: &Path) -> io::Result<()> {
    for sub in ["work/work", "work/index"] {
        let dir = at.join(sub);
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
            }
            _ => {}
        }
    }
    std::fs::remove_dir_all(at)
        .map_err(|e| io::Error::new(e.kind(), format!("emptying {}: {e}", at.display())))
}

/// Where a private copy is made ([`private_copy`]): a tmpfs mounted here for the moment it
/// takes, and detached before anything else runs in the namespace.
const PRIVATE_AT: &str = "/tmp";

/// The file system a private copy lives on: as large as a guarded file may be read
/// ([`crate::agentstate::read_fd`]), and one file.
const PRIVATE_SIZE: &str = "size=64m,nr_inodes=4,mode=700";

/// Covers the file `path` (open as `fd`, `before` its state) with a copy of it of this
/// launch's own: made, with its content and mode, on a tmpfs mounted for the moment on
/// [`PRIVATE_AT`], bound onto `path`, and checked to be what is there now; then the tmpfs
/// is detached, so that nothing but the bind (and the descriptor returned, for the watcher)
/// reaches the copy. (The kernel will not bind a file with no name, as `O_TMPFILE` makes.)
fn private_copy(path: &Path, fd: &OwnedFd, before: &FileStat) -> io::Result<Option<OwnedFd>> {
    // Its content, read through a descriptor of what was checked (no link followed).
    let source = CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .map_err(|_| io::Error::other("descriptor path"))?;
    let source = nix::fcntl::open(
        source.as_c_str(),
        OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)?;
    same(&source, before)?;
    let content = crate::agentstate::read_fd(source.as_fd())?;
    let at = open_real_dir(Path::new(PRIVATE_AT), OFlag::O_PATH)?;
    let was = stat(&at)?;
    let on = CString::new(format!("/proc/self/fd/{}", at.as_raw_fd()))
        .map_err(|_| io::Error::other("descriptor path"))?;
    let data = CString::new(PRIVATE_SIZE).map_err(|_| io::Error::other("options"))?;
    sys::mount_fs(
        c"tmpfs",
        &on,
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        &data,
    )?;
    // From here the tmpfs is detached whatever happens, before the error is returned.
    let made = (|| -> io::Result<OwnedFd> {
        mounted_tmp(Path::new(PRIVATE_AT), &was, 0o700)?;
        let root = open_real_dir(Path::new(PRIVATE_AT), OFlag::O_RDONLY)?;
        let copy = openat(
            &root,
            "copy",
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(errno)?;
        let mut f = std::fs::File::from(copy);
        f.write_all(&content)?;
        nix::sys::stat::fchmod(&f, Mode::from_bits_truncate(before.st_mode & 0o777))
            .map_err(errno)?;
        let copy = OwnedFd::from(f);
        bind(&copy, fd)?;
        Ok(copy)
    })();
    let root = CString::new(PRIVATE_AT).map_err(|_| io::Error::other("path"))?;
    sys::umount_detach(&root)?;
    let copy = made?;
    // `PRIVATE_AT` is what it was; `path` is the copy.
    same(&open_real_dir(Path::new(PRIVATE_AT), OFlag::O_PATH)?, &was)?;
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let now = sys::open_no_symlinks(None, &c, libc::O_PATH | libc::O_NOFOLLOW)?;
    same(&now, &stat(&copy)?)?;
    Ok(Some(copy))
}

/// Why the mounts of `held` would not hold here: the first held path (but those in a
/// [`Hold::Layer`], whose grant is the overlay's own) that another mount shows at another
/// path too ([`aliases`]), or `None`.
pub fn aliased(held: &[Held]) -> io::Result<Option<String>> {
    let layers: Vec<&Path> = held
        .iter()
        .filter(|h| h.hold == Hold::Layer)
        .map(|h| h.path.as_path())
        .collect();
    let guarded: Vec<&Path> = held
        .iter()
        .map(|h| h.path.as_path())
        .filter(|p| !layers.iter().any(|l| p.starts_with(l)))
        .collect();
    if guarded.is_empty() {
        return Ok(None);
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    Ok(aliases(&info, &guarded).into_iter().next().map(|(path, alias)| {
        format!(
            "{} is also reachable as {} (its file system is mounted there too), where no mount of the launch's covers it",
            path.display(),
            alias.display()
        )
    }))
}

/// Each of `paths` that another mount in `mountinfo` (the text of `/proc/self/mountinfo`)
/// shows at another path too, with that path: the mount that holds it now is the last one
/// whose mount point is the longest that contains it; another mount of the same file system
/// (device) whose root contains what that one shows there reaches it too (a bind of `/home`
/// elsewhere, a subvolume's file system mounted whole, a volume mounted twice). Mounts
/// stacked at the same point, and mounts inside the path, are not counted.
pub fn aliases(mountinfo: &str, paths: &[&Path]) -> Vec<(std::path::PathBuf, std::path::PathBuf)> {
    use std::path::PathBuf;
    struct Mount {
        dev: String,
        root: PathBuf,
        point: PathBuf,
    }
    let mounts: Vec<Mount> = mountinfo
        .lines()
        .filter_map(|line| {
            let (left, _) = line.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            Some(Mount {
                dev: (*f.get(2)?).to_string(),
                root: PathBuf::from(crate::limits::unescape(f.get(3)?)),
                point: PathBuf::from(crate::limits::unescape(f.get(4)?)),
            })
        })
        .collect();
    let mut out = Vec::new();
    for &path in paths {
        let Some(holder) = mounts
            .iter()
            .filter(|m| path.starts_with(&m.point))
            .max_by_key(|m| m.point.components().count())
            .and_then(|longest| mounts.iter().rev().find(|m| m.point == longest.point))
        else {
            continue;
        };
        let Ok(below) = path.strip_prefix(&holder.point) else {
            continue;
        };
        let shown = holder.root.join(below);
        let alias = mounts.iter().find_map(|m| {
            if m.dev != holder.dev || m.point == holder.point || m.point.starts_with(path) {
                return None;
            }
            let rest = shown.strip_prefix(&m.root).ok()?;
            Some(m.point.join(rest))
        });
        if let Some(alias) = alias {
            out.push((path.to_path_buf(), alias));
        }
    }
    out
}

/// Whether this process could enter a private mount namespace (asked in a child, which
/// then exits): `Ok` or the kernel's refusal. For `doctor`.
pub fn probe(is_root: bool) -> io::Result<()> {
    let flags = if is_root {
        libc::CLONE_NEWNS
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNS
    };
    let code = sys::in_child(|| match sys::unshare(flags) {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EINVAL).clamp(1, 125),
    })?;
    match code {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Whether a launch here gets its private `/dev/pts` (tried in a child, which then exits):
/// `Ok` or why not. For `doctor`.
pub fn probe_pts(is_root: bool) -> io::Result<()> {
    let code = sys::in_child(|| match enter(None, &[], true, None, is_root) {
        Ok(Entered { pts: true, .. }) => 0,
        Ok(Entered { pts: false, .. }) => libc::EPERM,
        Err(NsError::Refused(e)) | Err(NsError::Failed { source: e, .. }) => {
            e.raw_os_error().unwrap_or(libc::EINVAL).clamp(1, 125)
        }
    })?;
    match code {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// Step 1: `landwall-objects/`, `landwall-objects/info/alternates` and `landwall-base/` in
/// the worktree's git dir, which the agent can write: each opened without following a final
/// symlink, and created if missing.
fn prepare(q: &Quarantine) -> io::Result<()> {
    let git_dir = open_real_dir(&q.git_dir, OFlag::O_RDONLY)?;
    let quarantine = make_dir(&git_dir, crate::policy::QUARANTINE_DIR)?;
    make_dir(&git_dir, crate::policy::BASE_DIR)?;
    let info = make_dir(&quarantine, "info")?;
    let mut line = q.base.as_os_str().as_bytes().to_vec();
    line.push(b'\n');
    let flags = OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    // Written once; later launches only read it back (a write would cost a journal entry
    // on every launch). Whatever the agent left there is replaced.
    if let Ok(fd) = openat(&info, "alternates", OFlag::O_RDONLY | flags, Mode::empty()) {
        if is_kind(&stat(&fd)?, libc::S_IFREG) {
            let mut have = Vec::with_capacity(line.len() + 1);
            std::io::Read::read_to_end(
                &mut std::io::Read::take(std::fs::File::from(fd), line.len() as u64 + 1),
                &mut have,
            )?;
            if have == line {
                return Ok(());
            }
        }
    }
    // Anything else under that name (a FIFO, a symlink) is removed first.
    match nix::unistd::unlinkat(&info, "alternates", nix::unistd::UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
        Err(e) => return Err(errno(e)),
    }
    let file = openat(
        &info,
        "alternates",
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | flags,
        Mode::from_bits_truncate(0o644),
    )
    .map_err(errno)?;
    if !is_kind(&stat(&file)?, libc::S_IFREG) {
        return Err(io::Error::other("info/alternates is not a regular file"));
    }
    std::fs::File::from(file).write_all(&line)
}

/// `name` in `dir`, created if missing, opened as a directory without following a symlink.
fn make_dir(dir: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    match mkdirat(dir, name, Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(errno(e)),
    }
    open_dir(dir, Path::new(name), OFlag::O_RDONLY).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("{name}: {e} (it must be a directory: remove what is there)"),
        )
    })
}

/// `path` (absolute) as a directory, with no symlink in any component: the quarantine's
/// git dir and the object store are real paths, so a symlink met now was swapped in.
fn open_real_dir(path: &Path, mode: OFlag) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    sys::open_no_symlinks(None, &c, (mode | OFlag::O_DIRECTORY).bits())
}

fn open_dir<D: AsFd>(dir: D, path: &Path, mode: OFlag) -> io::Result<OwnedFd> {
    openat(
        dir,
        path,
        mode | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(errno)
}

fn stat(fd: &OwnedFd) -> io::Result<FileStat> {
    fstat(fd).map_err(errno)
}

fn is_kind(st: &FileStat, kind: libc::mode_t) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

/// `fd` is the file `want` describes.
fn same(fd: &OwnedFd, want: &FileStat) -> io::Result<()> {
    let got = stat(fd)?;
    if (got.st_dev, got.st_ino) == (want.st_dev, want.st_ino) {
        Ok(())
    } else {
        Err(io::Error::other("it is not what was mounted there"))
    }
}

/// A bind mount of what `source` is onto what `target` is, through their descriptors.
fn bind(source: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    let path = |fd: &OwnedFd| {
        CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| io::Error::other("descriptor path"))
    };
    sys::mount(Some(&path(source)?), &path(target)?, libc::MS_BIND)
}

#[cfg(test)]
mod tests {
    use super::aliases;
    use std::path::{Path, PathBuf};

    const INFO: &str = "\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
23 22 0:21 / /proc rw - proc proc rw
30 22 254:1 /@home /home rw - btrfs /dev/vdb rw
31 22 254:1 / /mnt/pool rw - btrfs /dev/vdb rw
32 22 254:0 /var/tmp /srv/alias\\040dir rw - ext4 /dev/vda rw
33 22 254:0 /etc/hosts /etc/hosts rw - ext4 /dev/vda rw
";

    fn found(paths: &[&str]) -> Vec<(PathBuf, PathBuf)> {
        let paths: Vec<&Path> = paths.iter().map(Path::new).collect();
        aliases(INFO, &paths)
    }

    /// A subvolume's file system mounted whole elsewhere, and a directory bound elsewhere
    /// (its name escaped in mountinfo), reach what a launch holds; a path on a file system
    /// mounted once, or under a file's bind, does not.
    #[test]
    fn a_held_path_a_second_mount_reaches_is_found_with_that_path() {
        assert_eq!(
            found(&["/home/u/.claude/todos"]),
            [(
                PathBuf::from("/home/u/.claude/todos"),
                PathBuf::from("/mnt/pool/@home/u/.claude/todos")
            )]
        );
        assert_eq!(
            found(&["/var/tmp/p/.git/config"]),
            [(
                PathBuf::from("/var/tmp/p/.git/config"),
                PathBuf::from("/srv/alias dir/p/.git/config")
            )]
        );
        assert!(found(&["/srv/p/.git/config", "/etc/passwd", "/proc/1"]).is_empty());
    }

    /// Mounts stacked on one point (the last one shows), and a second mount inside the held
    /// path itself, are not aliases of it.
    #[test]
    fn stacked_and_inner_mounts_are_no_aliases() {
        let info = "\
22 1 254:0 / / rw - ext4 /dev/vda rw
40 22 254:5 /a /w rw - ext4 /dev/vdc rw
41 40 254:5 /a /w rw - ext4 /dev/vdc rw
42 41 254:5 /a/p /w/p/inner rw - ext4 /dev/vdc rw
";
        assert!(aliases(info, &[Path::new("/w/p")]).is_empty());
        // But where the file system is the root's, the root's own view of /a reaches /w/p.
        let info = "\
22 1 254:0 / / rw - ext4 /dev/vda rw
40 22 254:0 /a /w rw - ext4 /dev/vda rw
";
        assert_eq!(
            aliases(info, &[Path::new("/w/p")]),
            [(PathBuf::from("/w/p"), PathBuf::from("/a/p"))]
        );
    }
}
