//! Moving a git object quarantine into the main object store, verifying every object.
//!
//! An agent walled into a linked worktree writes its objects into a quarantine directory
//! (in its mount namespace, `<common dir>/objects` shows it; see [`crate::ns`]), with the
//! main store read-only to it as an alternate. While it runs and after it exits,
//! [`migrate`], run outside the wall with the same uid by the watcher ([`crate::watcher`]),
//! moves what it wrote into the main store so that the user's checkouts see its commits.
//! Everything in the quarantine is hostile: written by an attacker who has read this code.
//!
//! Invariants:
//! - Nothing already in the main store is replaced, rewritten or removed. A new object goes in
//!   with `renameat2(RENAME_NOREPLACE)` (or `link`), which fail if the name exists; then the
//!   existing copy wins. Git names an object by the hash of its content, so a second copy
//!   could only be a forgery or the same object.
//! - A loose object enters the main store as a new file created here (mode 0444), holding the
//!   bytes that were read once into memory and verified: inflated completely, the header
//!   `<type> <size>\0` canonical, the size exact, nothing after the zlib stream, and the hash
//!   of the inflated bytes equal to the file's name. The quarantine's inode never moves: the
//!   agent may still hold a descriptor to it and could write through it afterwards.
//! - A pack enters only as a copy that `git index-pack` indexed outside any repository
//!   (so no configuration, hook, promisor remote or alternate that the agent may have
//!   written is read: a quarantine can belong to a common dir the agent forged), which
//!   recomputes every object id from the content, with git's SHA-1 collision detection.
//!   Thin packs are refused. The quarantine's `.idx` is never read; it only says the pack is
//!   complete (git renames it into place last).
//! - The quarantine and the store are opened with no symlink anywhere in their paths
//!   (`RESOLVE_NO_SYMLINKS`), so no swap can point either at another directory.
//! - Nothing in the quarantine is followed or can block: every name is looked at with
//!   `fstatat(AT_SYMLINK_NOFOLLOW)` before it is opened, opened with
//!   `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`, and checked again with `fstat` (the name may be
//!   swapped in between); only regular files are read, loose objects up to
//!   [`MAX_COMPRESSED`] bytes that inflate to at most [`MAX_INFLATED`].
//! - Only complete final names are touched: `XX/` + 38 or 62 lowercase hex digits for loose
//!   objects, `pack/pack-<hex>.pack` with its `.idx` for packs. Git writes into `tmp_obj_*`
//!   and `tmp_pack_*` and links or renames them to their final names when complete, so
//!   another agent process still writing into the quarantine is never disturbed.
//! - A quarantine file is removed only after its object is durable in the main store (the
//!   new file and its directory fsynced), so a crash at any point loses nothing; running
//!   [`migrate`] again finishes the job (it is idempotent).
//! - Every line in [`Migrated::rejected`] is safe to print on a terminal: it holds only the
//!   quarantine's path, names that were checked to be hex, and escaped text.

use std::collections::hash_map::RandomState;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::hash::{BuildHasher, Hasher as _};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use flate2::{Decompress, FlushDecompress, Status};
use nix::dir::Dir;
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, RenameFlags};
use nix::sys::stat::{FileStat, Mode};
use nix::unistd::UnlinkatFlags;

/// The largest loose object file read (its compressed size). The bytes are held in memory
/// while they are verified and written; git stores blobs over `core.bigFileThreshold`
/// (512 MiB by default) in packs, so a loose object this large is already unusual.
pub const MAX_COMPRESSED: u64 = 256 << 20;

/// The largest inflated size a loose object's header may declare. It bounds the time spent
/// inflating and hashing (deflate can expand about 1000 times).
pub const MAX_INFLATED: u64 = 1 << 30;

/// The longest header `<type> <size>\0` that can be valid: `commit ` and 20 digits.
const MAX_HEADER: usize = 32;

/// What [`migrate`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Loose objects now in the main store whose quarantine file was removed (including
    /// those the main store had already: the existing copy was kept).
    pub loose: usize,
    /// Packs indexed into the main store by `git index-pack`.
    pub packs: usize,
    /// One line per object-like entry left in the quarantine: what and why.
    pub rejected: Vec<String>,
}

/// Why [`migrate`] stopped. Objects moved before the error stay moved; running [`migrate`]
/// again after fixing the cause finishes the job. Problems with a single quarantine entry,
/// including git failing on a pack, are not errors: they go into [`Migrated::rejected`].
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// The quarantine directory itself could not be opened or listed.
    #[error("{step} quarantine {}: {source}", path.display())]
    Quarantine {
        /// What was being done.
        step: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
    /// The main object store could not be opened or written to.
    #[error("{step} {}: {source}", path.display())]
    Store {
        /// What was being done.
        step: &'static str,
        /// The path.
        path: PathBuf,
        /// Why it failed.
        source: io::Error,
    },
}

fn store_err(step: &'static str, path: PathBuf) -> impl FnOnce(Errno) -> ObjectsError {
    move |e| ObjectsError::Store {
        step,
        path,
        source: e.into(),
    }
}

/// A hash function of git's, chosen by the length of an object's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Sha1,
    Sha256,
}

impl Format {
    /// The format of a full object name of `len` hex digits.
    fn of_len(len: usize) -> Option<Format> {
        match len {
            40 => Some(Format::Sha1),
            64 => Some(Format::Sha256),
            _ => None,
        }
    }
}

/// A running hash of an object. SHA-1 with the collision detection git uses (sha1dc): a
/// loose object crafted as half of a collision pair is refused, as git itself refuses it.
enum Hasher {
    Sha1(Box<sha1_checked::Sha1>),
    Sha256(sha2::Sha256),
}

impl Hasher {
    fn new(format: Format) -> Hasher {
        use sha1_checked::Digest;
        match format {
            Format::Sha1 => Hasher::Sha1(Box::new(sha1_checked::Sha1::new())),
            Format::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        use sha1_checked::Digest;
        match self {
            Hasher::Sha1(h) => h.update(bytes),
            Hasher::Sha256(h) => h.update(bytes),
        }
    }

    /// The digest in hex; `None` for a SHA-1 collision attack.
    fn hex(self) -> Option<String> {
        use sha1_checked::Digest;
        match self {
            Hasher::Sha1(h) => {
                let result = (*h).try_finalize();
                (!result.has_collision()).then(|| hex(result.hash()))
            }
            Hasher::Sha256(h) => Some(hex(&h.finalize())),
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

fn is_lower_hex(s: &[u8]) -> bool {
    s.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `name` as a fan-out directory name (`XX`, two lowercase hex digits).
fn fanout_name(name: &OsStr) -> Option<&str> {
    let b = name.as_bytes();
    if b.len() == 2 && is_lower_hex(b) {
        name.to_str()
    } else {
        None
    }
}

/// `name` as the rest of a loose object's name (38 or 62 lowercase hex digits).
fn object_rest(name: &OsStr) -> Option<&str> {
    let b = name.as_bytes();
    if (b.len() == 38 || b.len() == 62) && is_lower_hex(b) {
        name.to_str()
    } else {
        None
    }
}

/// `name` as `pack-<hex>.pack`: the hex part.
fn pack_hash(name: &OsStr) -> Option<&str> {
    let hash = name
        .to_str()?
        .strip_prefix("pack-")?
        .strip_suffix(".pack")?;
    ((hash.len() == 40 || hash.len() == 64) && is_lower_hex(hash.as_bytes())).then_some(hash)
}

/// Text from outside (git's messages, bytes from a header) made safe to print: control
/// characters escaped, at most `max` characters.
fn escape(text: &[u8], max: usize) -> String {
    let mut s = String::new();
    for c in String::from_utf8_lossy(text).chars() {
        if s.len() >= max {
            s.push('…');
            break;
        }
        if c.is_control() {
            s.extend(c.escape_default());
        } else {
            s.push(c);
        }
    }
    s
}

fn kind_of(mode: libc::mode_t) -> &'static str {
    match mode & libc::S_IFMT {
        libc::S_IFREG => "a regular file",
        libc::S_IFDIR => "a directory",
        libc::S_IFLNK => "a symbolic link",
        libc::S_IFIFO => "a FIFO",
        libc::S_IFSOCK => "a socket",
        libc::S_IFCHR => "a character device",
        libc::S_IFBLK => "a block device",
        _ => "of unknown type",
    }
}

const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// `path` as a directory, with no symlink in any of its components.
fn open_fd_no_symlinks(path: &Path) -> nix::Result<OwnedFd> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    crate::sys::open_no_symlinks(None, &c, libc::O_RDONLY | libc::O_DIRECTORY)
        .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(libc::EIO)))
}

/// [`open_fd_no_symlinks`], for listing.
fn open_dir_no_symlinks(path: &Path) -> nix::Result<Dir> {
    Dir::from_fd(open_fd_no_symlinks(path)?)
}

/// The names in `dir`, without `.` and `..`, read to the end first so that the directory can
/// change underneath without the listing skipping or repeating entries we act on.
fn list(dir: &mut Dir) -> nix::Result<Vec<OsString>> {
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    Ok(names)
}

/// Why a quarantine entry was not taken.
enum Skip {
    /// It disappeared while we looked (another process removed or renamed it): nothing to
    /// report, nothing to move.
    Vanished,
    /// It is not something we take; the reason goes into [`Migrated::rejected`].
    Rejected(String),
}

/// The reason `st` is not a regular file of at most `cap` bytes, if it is not.
fn unfit(st: &FileStat, cap: u64) -> Option<String> {
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Some(format!("{}, not a regular file", kind_of(st.st_mode)));
    }
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    (size > cap).then(|| format!("{size} bytes, over the limit of {cap}"))
}

/// Opens `name` in `dir` for reading if it is a regular file of at most `cap` bytes, without
/// following a symlink, blocking on a FIFO or opening a device.
fn open_regular(dir: &Dir, name: &OsStr, cap: u64) -> Result<(File, u64), Skip> {
    // Look before opening, so that a FIFO or a device is never opened at all.
    let st = match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Err(Skip::Vanished),
        Err(e) => return Err(Skip::Rejected(format!("cannot stat: {e}"))),
    };
    if let Some(why) = unfit(&st, cap) {
        return Err(Skip::Rejected(why));
    }
    let flags = OFlag::O_RDONLY
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = match nix::fcntl::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::ENOENT) => return Err(Skip::Vanished),
        Err(Errno::ELOOP) => return Err(Skip::Rejected("a symbolic link".into())),
        Err(e) => return Err(Skip::Rejected(format!("cannot open: {e}"))),
    };
    // Again on what was opened: the name may have been swapped since the first look.
    let st = nix::sys::stat::fstat(&fd).map_err(|e| Skip::Rejected(format!("fstat: {e}")))?;
    if let Some(why) = unfit(&st, cap) {
        return Err(Skip::Rejected(why));
    }
    Ok((File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
}

/// Reads the loose object `name` in `dir` once and verifies it is the object `id`.
fn read_verified(dir: &Dir, name: &OsStr, id: &str, format: Format) -> Result<Vec<u8>, Skip> {
    let (file, size) = open_regular(dir, name, MAX_COMPRESSED)?;
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_COMPRESSED + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Skip::Rejected(format!("reading: {e}")))?;
    // It may have grown after the fstat (the agent can still write to it).
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_COMPRESSED {
        return Err(Skip::Rejected(format!(
            "grew over the limit of {MAX_COMPRESSED} bytes while read"
        )));
    }
    verify(&bytes, id, format).map_err(Skip::Rejected)?;
    Ok(bytes)
}

/// Parses a loose object's header (without its NUL) as git does, and more strictly:
/// a known type, one space, a canonical decimal size (no sign, no leading zero).
fn parse_header(header: &[u8]) -> Result<u64, String> {
    let bad = || format!("bad header \"{}\"", escape(header, MAX_HEADER));
    let space = header.iter().position(|&b| b == b' ').ok_or_else(bad)?;
    let (kind, digits) = (&header[..space], &header[space + 1..]);
    if !matches!(kind, b"blob" | b"tree" | b"commit" | b"tag") {
        return Err(bad());
    }
    let canonical = !digits.is_empty()
        && digits.iter().all(u8::is_ascii_digit)
        && (digits == b"0" || digits[0] != b'0');
    if !canonical {
        return Err(bad());
    }
    let size = std::str::from_utf8(digits)
        .ok()
        .and_then(|d| d.parse::<u64>().ok())
        .ok_or_else(bad)?;
    if size > MAX_INFLATED {
        return Err(format!(
            "declares {size} bytes, over the limit of {MAX_INFLATED}"
        ));
    }
    Ok(size)
}

/// Checks that `compressed` is exactly one zlib stream that inflates to a well-formed loose
/// object whose hash is `id`. Inflates in chunks into the hash, never holding the object:
/// memory stays at one chunk whatever the header says, and inflating stops as soon as the
/// body is longer than its header declares.
fn verify(compressed: &[u8], id: &str, format: Format) -> Result<(), String> {
    let mut z = Decompress::new(true);
    let mut out = vec![0u8; 64 << 10];
    let mut hasher = Hasher::new(format);
    let mut header = Vec::with_capacity(MAX_HEADER);
    let mut declared: Option<u64> = None;
    let mut body: u64 = 0;
    loop {
        let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
        let input = compressed.get(used..).unwrap_or_default();
        let before = z.total_out();
        let status = z
            .decompress(input, &mut out, FlushDecompress::None)
            .map_err(|e| format!("not a valid zlib stream: {e}"))?;
        let produced = usize::try_from(z.total_out() - before).unwrap_or(usize::MAX);
        let mut chunk = out.get(..produced).unwrap_or_default();
        hasher.update(chunk);
        if declared.is_none() {
            let (head, rest) = match chunk.iter().position(|&b| b == 0) {
                Some(nul) => (&chunk[..nul], Some(&chunk[nul + 1..])),
                None => (chunk, None),
            };
            header.extend_from_slice(head);
            if header.len() >= MAX_HEADER {
                return Err(format!(
                    "bad header \"{}\"",
                    escape(&header[..MAX_HEADER], MAX_HEADER)
                ));
            }
            if let Some(rest) = rest {
                declared = Some(parse_header(&header)?);
                chunk = rest;
            } else {
                chunk = &[];
            }
        }
        if let Some(size) = declared {
            body = body.saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
            if body > size {
                return Err(format!("longer than the {size} bytes its header declares"));
            }
        }
        match status {
            Status::StreamEnd => break,
            Status::Ok | Status::BufError => {
                let progressed =
                    produced > 0 || usize::try_from(z.total_in()).unwrap_or(used) != used;
                if !progressed {
                    return Err("truncated zlib stream".into());
                }
            }
        }
    }
    let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
    if used != compressed.len() {
        return Err(format!(
            "{} bytes after the zlib stream",
            compressed.len().saturating_sub(used)
        ));
    }
    let Some(size) = declared else {
        return Err("no header".into());
    };
    if body != size {
        return Err(format!("{body} bytes, not the {size} its header declares"));
    }
    let Some(digest) = hasher.hex() else {
        return Err("its content is a SHA-1 collision attack".into());
    };
    if digest != id {
        return Err(format!("content hashes to {digest}, not to its name"));
    }
    Ok(())
}

/// The main object store, open.
struct Store<'a> {
    dir: OwnedFd,
    path: &'a Path,
}

/// Where a verified object ended up.
enum Placed {
    /// In a new file created here.
    New,
    /// The main store had the name already; that copy was kept.
    Existing,
}

/// A temp file name in git's `tmp_` namespace, so that `git gc` removes one left by a crash.
/// It need not be unpredictable (the agent cannot write to the main store); `O_EXCL` settles
/// any clash.
fn temp_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(NEXT.fetch_add(1, Ordering::Relaxed));
    h.write_u32(std::process::id());
    format!("tmp_lw_{:016x}", h.finish())
}

impl Store<'_> {
    /// Opens (creating if needed) the fan-out directory `xx` of the main store. A directory
    /// created here is made durable at once: the objects put into it are about to be removed
    /// from the quarantine.
    fn subdir(&self, xx: &str) -> Result<Dir, ObjectsError> {
        let path = || self.path.join(xx);
        match Dir::openat(&self.dir, xx, DIR_FLAGS, Mode::empty()) {
            Ok(d) => return Ok(d),
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(store_err("opening", path())(e)),
        }
        // 0777 less the umask, as git creates it.
        match nix::sys::stat::mkdirat(&self.dir, xx, Mode::from_bits_truncate(0o777)) {
            Ok(()) => nix::unistd::fsync(&self.dir)
                .map_err(store_err("syncing", self.path.to_path_buf()))?,
            // Another process (git in the main checkout) made it first.
            Err(Errno::EEXIST) => {}
            Err(e) => return Err(store_err("creating", path())(e)),
        }
        Dir::openat(&self.dir, xx, DIR_FLAGS, Mode::empty()).map_err(store_err("opening", path()))
    }

    /// Puts the verified `bytes` of object `xx`+`rest` into the fan-out directory `dir` as a
    /// new file, unless the name exists. The new file is fsynced; its directory is not (the
    /// caller syncs it once for all the objects it put there).
    fn put(&self, dir: &Dir, xx: &str, rest: &str, bytes: &[u8]) -> Result<Placed, ObjectsError> {
        let final_path = || self.path.join(xx).join(rest);
        match nix::sys::stat::fstatat(dir, rest, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(_) => {
                freshen(dir, rest, &final_path());
                return Ok(Placed::Existing);
            }
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(store_err("looking up", final_path())(e)),
        }
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut attempt = 0;
        let (tmp, fd) = loop {
            let tmp = temp_name();
            match nix::fcntl::openat(dir, tmp.as_str(), flags, Mode::from_bits_truncate(0o444)) {
                Ok(fd) => break (tmp, fd),
                Err(Errno::EEXIST) if attempt < 16 => attempt += 1,
                Err(e) => return Err(store_err("creating", self.path.join(xx).join(tmp))(e)),
            }
        };
        let tmp_path = || self.path.join(xx).join(&tmp);
        let mut file = File::from(fd);
        if let Err(e) = file.write_all(bytes).and_then(|()| file.sync_all()) {
            remove_temp(dir, &tmp, &tmp_path());
            return Err(ObjectsError::Store {
                step: "writing",
                path: tmp_path(),
                source: e,
            });
        }
        drop(file);
        let placed = match nix::fcntl::renameat2(
            dir,
            tmp.as_str(),
            dir,
            rest,
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => return Ok(Placed::New),
            Err(Errno::EEXIST) => Ok(Placed::Existing),
            // The file system does not know RENAME_NOREPLACE: link(2) never replaces either.
            Err(Errno::EINVAL) => {
                match nix::unistd::linkat(dir, tmp.as_str(), dir, rest, AtFlags::empty()) {
                    Ok(()) => Ok(Placed::New),
                    Err(Errno::EEXIST) => Ok(Placed::Existing),
                    Err(e) => Err(store_err("linking into place", final_path())(e)),
                }
            }
            Err(e) => Err(store_err("renaming into place", final_path())(e)),
        };
        remove_temp(dir, &tmp, &tmp_path());
        placed
    }
}

/// Best effort: a leftover `tmp_lw_*` file costs only space, and `git gc` removes it.
fn remove_temp(dir: &Dir, tmp: &str, path: &Path) {
    if let Err(e) = nix::unistd::unlinkat(dir, tmp, UnlinkatFlags::NoRemoveDir) {
        log::warn!("could not remove {}: {e}", path.display());
    }
}

/// Sets an existing object's times to now, as git does when it writes an object it already
/// has: the agent's new refs may now point at it, and `git gc` prunes unreachable loose
/// objects by age. Best effort: only the grace period is at stake.
fn freshen(dir: &Dir, name: &str, path: &Path) {
    use nix::sys::stat::UtimensatFlags;
    use nix::sys::time::TimeSpec;
    let now = TimeSpec::UTIME_NOW;
    if let Err(e) =
        nix::sys::stat::utimensat(dir, name, &now, &now, UtimensatFlags::NoFollowSymlink)
    {
        log::debug!("could not freshen {}: {e}", path.display());
    }
}

/// git's exit status and stderr, in one line safe to print.
fn git_failure(out: &std::process::Output) -> String {
    let text = escape(out.stderr.trim_ascii(), 400);
    format!("{} ({})", out.status, text.replace("\\n", "; "))
}

/// Moves every object in `quarantine` into `objects` (the main store, `<common dir>/objects`,
/// an absolute path), verifying each one; `git` is the git binary, run for packs.
///
/// Loose objects that fail verification, and packs that `git index-pack` refuses, are listed
/// in [`Migrated::rejected`] and **left where they are**, never moved nor removed: there they
/// harm nothing (the main store never sees them and nothing reads the quarantine once the
/// agent is gone), they are the evidence of what the agent tried, and an entry that is not an
/// object could still be something we should not destroy (a file another process is
/// writing). Entries that do not have an object's name (`tmp_obj_*`, `info/`, …) are ignored
/// without a line.
///
/// Each loose object is hashed with the function its name's length gives (40 hex digits:
/// SHA-1, 64: SHA-256). One named for the repository's other function is moved too if it
/// verifies: git never reads a name of the wrong length, so it is dead weight, not a danger,
/// and asking git for the repository's format would cost a process on every call.
///
/// It may run while the agent's git still writes into the quarantine (only final names are
/// taken); then `prune_dirs` must be false: git creates a fan-out directory and then its
/// temporary file in two steps, and an `rmdir` between them would fail its write. With
/// `prune_dirs`, empty fan-out directories are removed (once the agent is gone). A
/// quarantine that does not exist holds nothing: `Ok` with nothing done.
pub fn migrate(
    quarantine: &Path,
    objects: &Path,
    git: &Path,
    prune_dirs: bool,
) -> Result<Migrated, ObjectsError> {
    let mut done = Migrated::default();
    let quarantine_err = |step: &'static str| {
        move |e: Errno| ObjectsError::Quarantine {
            step,
            path: quarantine.to_path_buf(),
            source: e.into(),
        }
    };
    // No symlink anywhere on the way (RESOLVE_NO_SYMLINKS): the agent may have replaced the
    // quarantine, or a directory above it that it can write, with a symlink to elsewhere,
    // say another repository's objects/, whose files would then be moved here and removed
    // there.
    let mut q = match open_dir_no_symlinks(quarantine) {
        Ok(q) => q,
        Err(Errno::ENOENT) => return Ok(done),
        Err(e) => return Err(quarantine_err("opening")(e)),
    };
    // Opened with no symlink on the way, which a relative path would not say anything about.
    if !objects.is_absolute() {
        return Err(ObjectsError::Store {
            step: "using (an absolute path is needed)",
            path: objects.to_path_buf(),
            source: io::ErrorKind::InvalidInput.into(),
        });
    };
    // The common case while the agent runs is a quarantine with nothing in it: one listing.
    let names = list(&mut q).map_err(quarantine_err("listing"))?;
    if !names
        .iter()
        .any(|n| fanout_name(n).is_some() || n == "pack")
    {
        return Ok(done);
    }
    // Likewise the store: a symlink swapped into its path would have verified objects
    // written into whatever directory it names.
    let store = Store {
        dir: open_fd_no_symlinks(objects).map_err(store_err("opening", objects.to_path_buf()))?,
        path: objects,
    };
    // Migrating a store into itself would find every object "already there" and remove it.
    let (qs, ss) = (
        nix::sys::stat::fstat(&q).map_err(quarantine_err("checking"))?,
        nix::sys::stat::fstat(&store.dir).map_err(store_err("checking", objects.to_path_buf()))?,
    );
    if (qs.st_dev, qs.st_ino) == (ss.st_dev, ss.st_ino) {
        return Err(ObjectsError::Quarantine {
            step: "refusing to migrate (it is the main object store itself)",
            path: quarantine.to_path_buf(),
            source: io::ErrorKind::InvalidInput.into(),
        });
    }
    for name in &names {
        if let Some(xx) = fanout_name(name) {
            migrate_fanout(&q, quarantine, xx, &store, &mut done)?;
        }
    }
    migrate_packs(&q, quarantine, git, &store, &mut done)?;
    // Empty fan-out directories go; those still holding something (rejected entries, a
    // tmp_obj_* being written) stay, and rmdir(2) says which.
    for name in names.iter().filter(|_| prune_dirs) {
        if let Some(xx) = fanout_name(name) {
            if let Err(e) = nix::unistd::unlinkat(&q, xx, UnlinkatFlags::RemoveDir) {
                log::debug!("not removing {}: {e}", quarantine.join(xx).display());
            }
        }
    }
    Ok(done)
}

/// Migrates the loose objects in the quarantine's fan-out directory `xx`.
fn migrate_fanout(
    q: &Dir,
    quarantine: &Path,
    xx: &str,
    store: &Store<'_>,
    done: &mut Migrated,
) -> Result<(), ObjectsError> {
    let here = quarantine.join(xx);
    let mut sub = match Dir::openat(q, xx, DIR_FLAGS, Mode::empty()) {
        Ok(d) => d,
        Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::ELOOP) => {
            let why = "a symbolic link, not a directory";
            done.rejected.push(format!("{}: {why}", here.display()));
            return Ok(());
        }
        Err(Errno::ENOTDIR) => {
            done.rejected
                .push(format!("{}: not a directory", here.display()));
            return Ok(());
        }
        Err(e) => {
            done.rejected
                .push(format!("{}: cannot open: {e}", here.display()));
            return Ok(());
        }
    };
    let names = match list(&mut sub) {
        Ok(n) => n,
        Err(e) => {
            done.rejected
                .push(format!("{}: cannot list: {e}", here.display()));
            return Ok(());
        }
    };
    let mut target: Option<Dir> = None;
    let mut moved = Vec::new();
    for name in &names {
        let Some(rest) = object_rest(name) else {
            continue;
        };
        let what = here.join(rest);
        let Some(format) = Format::of_len(rest.len() + 2) else {
            continue;
        };
        let id = format!("{xx}{rest}");
        let bytes = match read_verified(&sub, name, &id, format) {
            Ok(bytes) => bytes,
            Err(Skip::Vanished) => continue,
            Err(Skip::Rejected(why)) => {
                done.rejected.push(format!("{}: {why}", what.display()));
                continue;
            }
        };
        let dir = match target {
            Some(ref d) => d,
            None => target.insert(store.subdir(xx)?),
        };
        match store.put(dir, xx, rest, &bytes)? {
            Placed::New => log::debug!("{id}: migrated"),
            Placed::Existing => log::debug!("{id}: the main store has it already"),
        }
        moved.push(name);
    }
    // The new names must be durable before the quarantine's copies go.
    if let Some(dir) = &target {
        nix::unistd::fsync(dir).map_err(store_err("syncing", store.path.join(xx)))?;
    }
    for name in moved {
        match nix::unistd::unlinkat(&sub, name.as_os_str(), UnlinkatFlags::NoRemoveDir) {
            // ENOENT: the agent removed it meanwhile; the object is in the main store anyway.
            Ok(()) | Err(Errno::ENOENT) => {}
            // Harmless: the object is in the main store, and the next run removes this copy.
            Err(e) => log::warn!("could not remove {}: {e}", here.join(name).display()),
        }
        done.loose += 1;
    }
    Ok(())
}

/// The files git may keep beside a pack, `.idx` first: without it git does not see the pack,
/// so an agent process still running stops using the pack before its data goes.
const PACK_FILES: [&str; 7] = ["idx", "pack", "rev", "mtimes", "bitmap", "promisor", "keep"];

/// Why a pack was not taken in.
enum PackFailure {
    /// The pack, not the store: recorded, and the pack left in the quarantine.
    Rejected(String),
    /// The store could not be written.
    Store(ObjectsError),
}

/// Takes one quarantined pack into the store: its bytes are copied into a new file in the
/// store's `pack/` (never the quarantine's inode, which the agent may still hold open), and
/// `git index-pack` indexes that copy **outside any repository**: it reads no repository's
/// configuration, hooks, promisor remote or alternates (the agent could have written any
/// of those: a quarantine can belong to a common dir it forged), and it computes every
/// object's id from the content (with git's SHA-1 collision detection). Thin packs, which
/// would need the repository for their bases, are refused; git completes fetched packs
/// before it stores them. The copy and its index are renamed into place without replacing
/// a pack of the same name, the index last, as git does.
fn index_pack_copy(
    pack: std::fs::File,
    hash: &str,
    git: &Path,
    store: &Store<'_>,
) -> Result<(), PackFailure> {
    let packs_path = store.path.join("pack");
    let store_failure = |step: &'static str| {
        let path = packs_path.clone();
        move |e: Errno| PackFailure::Store(store_err(step, path)(e))
    };
    match nix::sys::stat::mkdirat(&store.dir, "pack", Mode::from_bits_truncate(0o777)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(e) => return Err(store_failure("creating")(e)),
    }
    let packs = Dir::openat(&store.dir, "pack", DIR_FLAGS, Mode::empty())
        .map_err(store_failure("opening"))?;
    let tmp = temp_name();
    let tmp_pack = format!("{tmp}.pack");
    let remove_tmp = |packs: &Dir| {
        for ext in ["pack", "idx", "rev"] {
            let name = format!("{tmp}.{ext}");
            match nix::unistd::unlinkat(packs, name.as_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => log::debug!("could not remove {}: {e}", packs_path.join(&name).display()),
            }
        }
    };
    let copy = nix::fcntl::openat(
        &packs,
        tmp_pack.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o444),
    )
    .map_err(store_failure("creating a pack in"))?;
    let mut copy = std::fs::File::from(copy);
    let copied =
        std::io::copy(&mut std::io::BufReader::new(pack), &mut copy).and_then(|_| copy.sync_all());
    drop(copy);
    if let Err(e) = copied {
        remove_tmp(&packs);
        return Err(PackFailure::Store(ObjectsError::Store {
            step: "copying a pack into",
            path: packs_path.clone(),
            source: e,
        }));
    }
    // The copy by the store's descriptor, as git sees it: no path that could be swapped.
    let in_store = PathBuf::from(format!(
        "/proc/{}/fd/{}/{tmp_pack}",
        std::process::id(),
        std::os::fd::AsRawFd::as_raw_fd(&packs)
    ));
    let format = if hash.len() == 64 { "sha256" } else { "sha1" };
    let out = Command::new(git)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CEILING_DIRECTORIES", "/")
        .env("GIT_NO_LAZY_FETCH", "1")
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .current_dir("/")
        .args(["index-pack", &format!("--object-format={format}")])
        .arg(&in_store)
        .stdin(Stdio::null())
        .output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        Ok(out) => {
            remove_tmp(&packs);
            return Err(PackFailure::Rejected(format!(
                "git index-pack refused it: {}",
                git_failure(&out)
            )));
        }
        // No git on this machine: the loose objects moved all the same, and the pack waits
        // for a run that has one.
        Err(e) => {
            remove_tmp(&packs);
            return Err(PackFailure::Rejected(format!(
                "cannot run {}: {e}",
                git.display()
            )));
        }
    };
    let printed = String::from_utf8_lossy(&out.stdout);
    let name = printed.trim();
    if !matches!(name.len(), 40 | 64) || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        remove_tmp(&packs);
        return Err(PackFailure::Rejected(format!(
            "git index-pack printed no pack name ({})",
            escape(name.as_bytes(), 80)
        )));
    }
    // The index last: a pack without one is not looked at.
    for ext in ["rev", "pack", "idx"] {
        let from = format!("{tmp}.{ext}");
        let to = format!("pack-{name}.{ext}");
        match nix::fcntl::renameat2(
            &packs,
            from.as_str(),
            &packs,
            to.as_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => {}
            // No reverse index written, or the same pack is there already (same name, same
            // content): keep what is there.
            Err(Errno::ENOENT) if ext == "rev" => {}
            Err(Errno::EEXIST) => {}
            Err(e) => {
                remove_tmp(&packs);
                return Err(store_failure("renaming a pack in")(e));
            }
        }
    }
    remove_tmp(&packs);
    nix::unistd::fsync(&packs).map_err(store_failure("syncing"))?;
    Ok(())
}

/// Migrates the complete packs in the quarantine's `pack/` with `git index-pack`.
fn migrate_packs(
    q: &Dir,
    quarantine: &Path,
    git: &Path,
    store: &Store<'_>,
    done: &mut Migrated,
) -> Result<(), ObjectsError> {
    let here = quarantine.join("pack");
    let mut dir = match Dir::openat(q, "pack", DIR_FLAGS, Mode::empty()) {
        Ok(d) => d,
        Err(Errno::ENOENT) => return Ok(()),
        Err(e) => {
            done.rejected
                .push(format!("{}: cannot open: {e}", here.display()));
            return Ok(());
        }
    };
    let names = match list(&mut dir) {
        Ok(n) => n,
        Err(e) => {
            done.rejected
                .push(format!("{}: cannot list: {e}", here.display()));
            return Ok(());
        }
    };
    let mut hashes: Vec<&str> = names.iter().filter_map(|n| pack_hash(n)).collect();
    hashes.sort_unstable();
    for hash in hashes {
        let what = here.join(format!("pack-{hash}.pack"));
        // The .idx only says the pack is complete; what it says about the pack is not read.
        let idx = format!("pack-{hash}.idx");
        match nix::sys::stat::fstatat(&dir, idx.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {}
            Ok(st) => {
                done.rejected.push(format!(
                    "{}: its .idx is {}",
                    what.display(),
                    kind_of(st.st_mode)
                ));
                continue;
            }
            // Still being written (git renames the .idx into place last), or left by a
            // crash: a later run takes it once it is complete.
            Err(Errno::ENOENT) => {
                done.rejected
                    .push(format!("{}: no .idx (yet), not complete", what.display()));
                continue;
            }
            Err(e) => {
                done.rejected
                    .push(format!("{}: its .idx: {e}", what.display()));
                continue;
            }
        }
        let pack = format!("pack-{hash}.pack");
        let file = match open_regular(&dir, OsStr::new(&pack), u64::MAX) {
            Ok((file, _)) => file,
            Err(Skip::Vanished) => continue,
            Err(Skip::Rejected(why)) => {
                done.rejected.push(format!("{}: {why}", what.display()));
                continue;
            }
        };
        match index_pack_copy(file, hash, git, store) {
            Ok(()) => {}
            Err(PackFailure::Store(e)) => return Err(e),
            Err(PackFailure::Rejected(why)) => {
                done.rejected.push(format!("{}: {why}", what.display()));
                continue;
            }
        }
        for ext in PACK_FILES {
            let file = format!("pack-{hash}.{ext}");
            match nix::unistd::unlinkat(&dir, file.as_str(), UnlinkatFlags::NoRemoveDir) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => log::warn!("could not remove {}: {e}", here.join(file).display()),
            }
        }
        done.packs += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// A fresh directory `/var/tmp/landwall-objects-test-<pid>-<n>`, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let p = PathBuf::from(format!(
                "/var/tmp/landwall-objects-test-{}-{n}",
                std::process::id()
            ));
            match fs::remove_dir_all(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => panic!("removing a leftover {}: {e}", p.display()),
            }
            fs::create_dir_all(&p).expect("mkdir scratch");
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            if let Err(e) = fs::remove_dir_all(&self.0) {
                eprintln!("removing {}: {e}", self.0.display());
            }
        }
    }

    /// The git on the test's PATH.
    fn git_bin() -> PathBuf {
        let path = std::env::var_os("PATH").expect("PATH");
        std::env::split_paths(&path)
            .map(|d| d.join("git"))
            .find(|g| g.is_file())
            .expect("git on PATH")
    }

    /// A repository with one commit, and an empty quarantine beside it.
    struct Repo {
        _scratch: Scratch,
        root: PathBuf,
        work: PathBuf,
        objects: PathBuf,
        q: PathBuf,
        format: Format,
    }

    impl Repo {
        fn new(format: Format) -> Repo {
            let scratch = Scratch::new();
            let root = scratch.0.clone();
            let work = root.join("repo");
            let q = root.join("quarantine");
            fs::create_dir(&q).expect("mkdir quarantine");
            let repo = Repo {
                _scratch: scratch,
                objects: work.join(".git/objects"),
                root,
                work,
                q,
                format,
            };
            let name = match format {
                Format::Sha1 => "sha1",
                Format::Sha256 => "sha256",
            };
            let arg = format!("--object-format={name}");
            repo.git_in(&repo.root, false, &["init", "-q", &arg, "repo"], None);
            fs::write(repo.work.join("a.txt"), "first\n").expect("write");
            repo.git(false, &["add", "a.txt"], None);
            repo.git(false, &["commit", "-q", "-m", "first"], None);
            repo
        }

        fn command(&self, dir: &Path, quarantined: bool, args: &[&str]) -> Command {
            let mut cmd = Command::new(git_bin());
            cmd.env_clear()
                .env("PATH", "/usr/bin:/bin")
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
                .args(["-c", "init.defaultBranch=main"])
                .args(args)
                .current_dir(dir);
            if quarantined {
                // As the agent's git runs: its writes go to the quarantine, and the main
                // store is only an alternate.
                cmd.env("GIT_OBJECT_DIRECTORY", &self.q)
                    .env("GIT_ALTERNATE_OBJECT_DIRECTORIES", &self.objects);
            }
            cmd
        }

        fn run(
            &self,
            dir: &Path,
            quarantined: bool,
            args: &[&str],
            input: Option<&[u8]>,
        ) -> std::process::Output {
            let mut child = self
                .command(dir, quarantined, args)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn git");
            let mut stdin = child.stdin.take().expect("stdin");
            stdin
                .write_all(input.unwrap_or_default())
                .expect("write stdin");
            drop(stdin);
            child.wait_with_output().expect("wait git")
        }

        fn git_in(
            &self,
            dir: &Path,
            quarantined: bool,
            args: &[&str],
            input: Option<&[u8]>,
        ) -> String {
            let out = self.run(dir, quarantined, args, input);
            assert!(
                out.status.success(),
                "git {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout)
                .expect("utf-8")
                .trim()
                .to_string()
        }

        /// Runs git in the work tree (in the quarantine if `quarantined`), returning stdout.
        fn git(&self, quarantined: bool, args: &[&str], input: Option<&[u8]>) -> String {
            self.git_in(&self.work, quarantined, args, input)
        }

        /// Whether the main repository, without the quarantine, has object `id`.
        fn has(&self, id: &str) -> bool {
            self.run(&self.work, false, &["cat-file", "-e", id], None)
                .status
                .success()
        }

        fn fsck(&self) {
            self.git(false, &["fsck", "--strict", "--no-dangling"], None);
        }

        fn migrate(&self) -> Migrated {
            migrate(&self.q, &self.objects, &git_bin(), true).expect("migrate")
        }

        fn loose_path(&self, dir: &Path, id: &str) -> PathBuf {
            dir.join(&id[..2]).join(&id[2..])
        }

        /// Writes `bytes` as the loose object file `id` in the quarantine.
        fn put_loose(&self, id: &str, bytes: &[u8]) -> PathBuf {
            let p = self.loose_path(&self.q, id);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, bytes).expect("write loose");
            p
        }

        /// The id of `raw` (header and body), by this repository's format.
        fn id_of(&self, raw: &[u8]) -> String {
            let mut h = Hasher::new(self.format);
            h.update(raw);
            h.hex().expect("no collision")
        }

        /// Every file (not directory) under the quarantine.
        fn files_in_quarantine(&self) -> Vec<PathBuf> {
            fn walk(dir: &Path, found: &mut Vec<PathBuf>) {
                for e in fs::read_dir(dir).expect("read_dir").flatten() {
                    let ft = e.file_type().expect("file type");
                    if ft.is_dir() {
                        walk(&e.path(), found);
                    } else {
                        found.push(e.path());
                    }
                }
            }
            let mut found = Vec::new();
            walk(&self.q, &mut found);
            found
        }
    }

    fn zlib(raw: &[u8], level: u32) -> Vec<u8> {
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level));
        z.write_all(raw).expect("deflate");
        z.finish().expect("deflate")
    }

    fn blob(body: &[u8]) -> Vec<u8> {
        let mut raw = format!("blob {}\0", body.len()).into_bytes();
        raw.extend_from_slice(body);
        raw
    }

    /// Objects the agent writes loose (a blob, then a commit with its blob and tree) reach the
    /// main store, which passes fsck, and the quarantine is left empty.
    fn loose_objects_migrate(format: Format) {
        let r = Repo::new(format);
        let blob = r.git(
            true,
            &["hash-object", "-w", "--stdin"],
            Some(b"loose blob\n"),
        );
        fs::write(r.work.join("b.txt"), "second\n").expect("write");
        r.git(true, &["add", "b.txt"], None);
        r.git(true, &["commit", "-q", "-m", "second"], None);
        let commit = r.git(false, &["rev-parse", "HEAD"], None);
        assert_eq!(Format::of_len(commit.len()), Some(format));
        assert!(
            !r.has(&blob) && !r.has(&commit),
            "written to the quarantine only"
        );

        let m = r.migrate();
        assert_eq!(m.rejected, Vec::<String>::new());
        assert_eq!(
            (m.loose, m.packs),
            (4, 0),
            "blob, b.txt's blob, tree, commit"
        );
        assert!(r.has(&blob) && r.has(&commit));
        r.fsck();
        assert_eq!(r.files_in_quarantine(), Vec::<PathBuf>::new());
        let mode = fs::metadata(r.loose_path(&r.objects, &blob))
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o444);
        let leftovers: Vec<_> = fs::read_dir(&r.q).expect("read_dir").flatten().collect();
        assert!(
            leftovers.is_empty(),
            "empty fan-out directories removed: {leftovers:?}"
        );
    }

    #[test]
    fn objects_loose_sha1() {
        loose_objects_migrate(Format::Sha1);
    }

    #[test]
    fn objects_loose_sha256() {
        loose_objects_migrate(Format::Sha256);
    }

    /// Packs written by `git pack-objects` into the quarantine reach the main store.
    fn pack_migrates(format: Format) {
        let r = Repo::new(format);
        fs::write(r.work.join("b.txt"), "packed\n").expect("write");
        r.git(true, &["add", "b.txt"], None);
        r.git(true, &["commit", "-q", "-m", "packed"], None);
        let ids = r.git(true, &["rev-list", "--objects", "HEAD", "^HEAD~1"], None);
        let ids: Vec<&str> = ids.lines().filter_map(|l| l.split(' ').next()).collect();
        assert_eq!(ids.len(), 3);
        let pack_dir = r.q.join("pack");
        fs::create_dir(&pack_dir).expect("mkdir pack");
        let base = pack_dir.join("pack");
        let list = ids.join("\n") + "\n";
        r.git(
            true,
            &["pack-objects", "-q", base.to_str().expect("utf-8")],
            Some(list.as_bytes()),
        );
        r.git(true, &["prune-packed"], None);
        assert!(!r.has(ids[0]));

        let copies: Vec<(PathBuf, Vec<u8>)> = fs::read_dir(&pack_dir)
            .expect("read_dir")
            .flatten()
            .map(|e| (e.path(), fs::read(e.path()).expect("read")))
            .collect();

        let m = r.migrate();
        assert_eq!(m.rejected, Vec::<String>::new());
        assert_eq!((m.loose, m.packs), (0, 1));
        for id in &ids {
            assert!(r.has(id), "{id} in the main store");
        }
        r.fsck();
        assert_eq!(r.files_in_quarantine(), Vec::<PathBuf>::new());

        // The same pack again (a run interrupted before it removed the quarantine's copy).
        for (path, bytes) in &copies {
            fs::write(path, bytes).expect("write");
        }
        let m = r.migrate();
        assert_eq!((m.packs, m.rejected.len()), (1, 0), "{m:?}");
        r.fsck();
        assert_eq!(r.files_in_quarantine(), Vec::<PathBuf>::new());
    }

    #[test]
    fn objects_pack_sha1() {
        pack_migrates(Format::Sha1);
    }

    #[test]
    fn objects_pack_sha256() {
        pack_migrates(Format::Sha256);
    }

    /// A thin pack (its delta's base only in the main store) with an empty, meaningless .idx:
    /// index-pack completes it from the main store and never reads the .idx.
    #[test]
    fn objects_thin_pack_is_refused_not_completed() {
        let r = Repo::new(Format::Sha1);
        let text: String = (0..200)
            .map(|i| format!("line {i} of a long file\n"))
            .collect();
        fs::write(r.work.join("a.txt"), &text).expect("write");
        r.git(false, &["commit", "-q", "-am", "long"], None);
        fs::write(r.work.join("a.txt"), text + "one more line\n").expect("write");
        r.git(true, &["commit", "-q", "-am", "longer"], None);
        let head = r.git(false, &["rev-parse", "HEAD"], None);
        let pack = r.run(
            &r.work,
            true,
            &["pack-objects", "--thin", "--stdout", "--revs", "-q"],
            Some(b"HEAD\n^HEAD~1\n"),
        );
        assert!(pack.status.success());
        // It is thin: without --fix-thin, index-pack cannot resolve its delta.
        let alone = r.run(
            &r.work,
            false,
            &["index-pack", "--stdin"],
            Some(&pack.stdout),
        );
        assert!(!alone.status.success(), "the pack is thin");
        let trailer = hex(&pack.stdout[pack.stdout.len() - 20..]);
        let pack_dir = r.q.join("pack");
        fs::create_dir(&pack_dir).expect("mkdir");
        fs::write(pack_dir.join(format!("pack-{trailer}.pack")), &pack.stdout).expect("write");
        fs::write(pack_dir.join(format!("pack-{trailer}.idx")), b"").expect("write");
        r.git(true, &["prune-packed"], None);
        // prune-packed cannot see a pack without a valid index: clear the loose copies.
        for e in fs::read_dir(&r.q).expect("read_dir").flatten() {
            if e.file_name() != "pack" {
                fs::remove_dir_all(e.path()).expect("rm");
            }
        }

        // Completing it would need a repository, whose configuration the agent may have
        // written (a promisor remote runs a command to fetch a missing base): refused, and
        // left where it is.
        let m = r.migrate();
        assert_eq!(m.packs, 0);
        assert_eq!(m.rejected.len(), 1, "{:?}", m.rejected);
        assert!(!r.has(&head));
        assert_eq!(r.files_in_quarantine().len(), 2);
    }

    /// An .idx that claims an object the pack does not hold brings nothing wrong in, and a
    /// corrupt pack is refused and left where it is.
    #[test]
    fn objects_tampered_idx_and_corrupt_pack() {
        let r = Repo::new(Format::Sha1);
        let evil = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"evil\n"));
        let good = r.git(false, &["hash-object", "--stdin"], Some(b"good\n"));
        let other = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"other\n"));
        let pack_dir = r.q.join("pack");
        fs::create_dir(&pack_dir).expect("mkdir");
        let base = pack_dir.join("pack");
        let base = base.to_str().expect("utf-8");
        let first = r.git(
            true,
            &["pack-objects", "-q", base],
            Some(format!("{evil}\n").as_bytes()),
        );
        let second = r.git(
            true,
            &["pack-objects", "-q", base],
            Some(format!("{other}\n").as_bytes()),
        );
        r.git(true, &["prune-packed"], None);

        // idx v2: magic, version, 256 fan-out words, then the sorted names: claim `good`.
        let idx = pack_dir.join(format!("pack-{first}.idx"));
        let mut bytes = fs::read(&idx).expect("read idx");
        let good_raw: Vec<u8> = (0..20)
            .map(|i| u8::from_str_radix(&good[2 * i..2 * i + 2], 16).expect("hex"))
            .collect();
        bytes[8 + 1024..8 + 1024 + 20].copy_from_slice(&good_raw);
        fs::remove_file(&idx).expect("rm idx");
        fs::write(&idx, &bytes).expect("write idx");
        // A flipped byte inside the second pack's one object.
        let corrupt = pack_dir.join(format!("pack-{second}.pack"));
        let mut bytes = fs::read(&corrupt).expect("read pack");
        bytes[14] ^= 0xff;
        fs::remove_file(&corrupt).expect("rm pack");
        fs::write(&corrupt, &bytes).expect("write pack");

        let m = r.migrate();
        assert_eq!(m.packs, 1, "{m:?}");
        assert_eq!(m.rejected.len(), 1, "{m:?}");
        assert!(
            m.rejected[0].contains(&format!("pack-{second}.pack")),
            "{m:?}"
        );
        assert!(r.has(&evil));
        assert!(!r.has(&good), "the .idx's claim is not believed");
        assert!(!r.has(&other));
        assert_eq!(r.git(false, &["cat-file", "blob", &evil], None), "evil");
        r.fsck();
        assert!(corrupt.exists() && pack_dir.join(format!("pack-{second}.idx")).exists());
        assert!(!pack_dir.join(format!("pack-{first}.pack")).exists());
    }

    /// Loose files that are not what their name says are rejected, left in the quarantine and
    /// kept out of the main store.
    #[test]
    fn objects_forged_loose_objects_are_rejected() {
        let r = Repo::new(Format::Sha1);
        let hello = r.id_of(&blob(b"hello"));
        let lying = b"blob 9\0abc".to_vec();
        let padded = b"blob 03\0abc".to_vec();
        let unknown = b"blub 3\0abc".to_vec();
        let long = b"blob 1\0abc".to_vec();
        let mut garbage = zlib(&blob(b"abc"), 6);
        garbage.extend_from_slice(b"junk");
        let whole = zlib(&blob(b"a truncated object, as if still being written"), 6);
        let cases = [
            (hello.clone(), zlib(&blob(b"world"), 6)),
            (r.id_of(&lying), zlib(&lying, 6)),
            (r.id_of(&padded), zlib(&padded, 6)),
            (r.id_of(&unknown), zlib(&unknown, 6)),
            (r.id_of(&long), zlib(&long, 6)),
            (r.id_of(&blob(b"abc")), garbage),
            (
                r.id_of(&blob(b"a truncated object, as if still being written")),
                whole[..whole.len() / 2].to_vec(),
            ),
            (r.id_of(&blob(b"not zlib")), blob(b"not zlib")),
        ];
        let mut paths = Vec::new();
        for (id, bytes) in &cases {
            paths.push(r.put_loose(id, bytes));
        }

        let m = r.migrate();
        assert_eq!(m.loose, 0);
        assert_eq!(m.rejected.len(), cases.len(), "{:#?}", m.rejected);
        for ((id, _), path) in cases.iter().zip(&paths) {
            assert!(!r.has(id), "{id} kept out");
            assert!(!r.loose_path(&r.objects, id).exists());
            assert!(path.exists(), "left in the quarantine");
            assert!(
                m.rejected.iter().any(|l| l.contains(&id[2..])),
                "{id} reported"
            );
        }
        r.fsck();
    }

    /// An object the main store has already is never replaced, whatever the quarantine holds
    /// under its name.
    #[test]
    fn objects_existing_object_is_kept() {
        let r = Repo::new(Format::Sha1);
        let id = r.git(false, &["hash-object", "-w", "--stdin"], Some(b"same\n"));
        let main = r.loose_path(&r.objects, &id);
        let before = fs::read(&main).expect("read");
        // The same object, stored (uncompressed) differently: verified, and the main copy wins.
        let other_bytes = zlib(&blob(b"same\n"), 0);
        assert_ne!(other_bytes, before);
        let q = r.put_loose(&id, &other_bytes);
        let m = r.migrate();
        assert_eq!((m.loose, m.rejected.len()), (1, 0), "{m:?}");
        assert_eq!(fs::read(&main).expect("read"), before);
        assert!(!q.exists());
        // A forgery under the same name: rejected, main copy untouched.
        r.put_loose(&id, &zlib(&blob(b"evil\n"), 6));
        let m = r.migrate();
        assert_eq!((m.loose, m.rejected.len()), (0, 1), "{m:?}");
        assert_eq!(fs::read(&main).expect("read"), before);
        assert_eq!(r.git(false, &["cat-file", "blob", &id], None), "same");
        r.fsck();
    }

    /// FIFOs, symlinks (to objects or to fan-out directories), directories, oversized files
    /// and in-progress temp files are neither followed, nor opened, nor moved, and nothing
    /// blocks.
    #[test]
    fn objects_hostile_entries_are_ignored_without_blocking() {
        let r = Repo::new(Format::Sha1);
        let outside = r.root.join("outside");
        fs::create_dir(&outside).expect("mkdir");
        let ids: Vec<String> = (0..6)
            .map(|i| r.id_of(&blob(format!("obj {i}").as_bytes())))
            .collect();
        // A FIFO under a valid object's name.
        let fifo = r.loose_path(&r.q, &ids[0]);
        fs::create_dir_all(fifo.parent().expect("parent")).expect("mkdir");
        nix::unistd::mkfifo(&fifo, Mode::from_bits_truncate(0o600)).expect("mkfifo");
        // A symlink to a valid object file outside the quarantine.
        let valid = outside.join("valid");
        fs::write(&valid, zlib(&blob(b"obj 1"), 6)).expect("write");
        let link = r.loose_path(&r.q, &ids[1]);
        fs::create_dir_all(link.parent().expect("parent")).expect("mkdir");
        symlink(&valid, &link).expect("symlink");
        // A fan-out directory that is a symlink to a directory of valid objects.
        let fan = outside.join("fan");
        fs::create_dir(&fan).expect("mkdir");
        fs::write(fan.join(&ids[2][2..]), zlib(&blob(b"obj 2"), 6)).expect("write");
        symlink(&fan, r.q.join(&ids[2][..2])).expect("symlink");
        // A directory under an object's name.
        fs::create_dir_all(r.loose_path(&r.q, &ids[3])).expect("mkdir");
        // An oversized (sparse) file.
        let big = r.put_loose(&ids[4], b"");
        fs::OpenOptions::new()
            .write(true)
            .open(&big)
            .and_then(|f| f.set_len(MAX_COMPRESSED + 1))
            .expect("grow");
        // A temp file git is still writing: not a final name, not touched.
        let tmp = r.q.join(&ids[5][..2]).join("tmp_obj_AbCdEf");
        fs::create_dir_all(tmp.parent().expect("parent")).expect("mkdir");
        fs::write(&tmp, zlib(&blob(b"obj 5"), 6)).expect("write");
        // A pack that is a FIFO and one that is a symlink, both with an .idx.
        let pack_dir = r.q.join("pack");
        fs::create_dir(&pack_dir).expect("mkdir");
        let (p1, p2) = ("1".repeat(40), "2".repeat(40));
        nix::unistd::mkfifo(
            &pack_dir.join(format!("pack-{p1}.pack")),
            Mode::from_bits_truncate(0o600),
        )
        .expect("mkfifo");
        symlink(&valid, pack_dir.join(format!("pack-{p2}.pack"))).expect("symlink");
        for p in [&p1, &p2] {
            fs::write(pack_dir.join(format!("pack-{p}.idx")), b"").expect("write");
        }
        // A pack without its .idx (still being written): left alone.
        let p3 = "3".repeat(40);
        let unfinished = pack_dir.join(format!("pack-{p3}.pack"));
        fs::write(&unfinished, b"PACK").expect("write");

        let start = Instant::now();
        let m = r.migrate();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert_eq!((m.loose, m.packs), (0, 0));
        // FIFO, symlink, symlinked fan-out, directory, oversized, pack FIFO, pack symlink,
        // pack without .idx.
        assert_eq!(m.rejected.len(), 8, "{:#?}", m.rejected);
        for id in &ids {
            assert!(!r.has(id), "{id} kept out");
        }
        assert!(tmp.exists() && valid.exists() && fan.join(&ids[2][2..]).exists());
        assert!(fifo.exists() && link.exists() && big.exists() && unfinished.exists());
        r.fsck();
    }

    /// Without git, loose objects still move; a pack waits, reported.
    #[test]
    fn objects_loose_objects_need_no_git() {
        let r = Repo::new(Format::Sha256);
        let id = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"no git\n"));
        let pack = r.q.join("pack");
        fs::create_dir(&pack).expect("mkdir");
        let name = "4".repeat(64);
        fs::write(pack.join(format!("pack-{name}.pack")), b"PACK").expect("write");
        fs::write(pack.join(format!("pack-{name}.idx")), b"").expect("write");
        let m = migrate(&r.q, &r.objects, Path::new("/nonexistent/git"), true).expect("migrate");
        assert_eq!((m.loose, m.packs, m.rejected.len()), (1, 0, 1), "{m:?}");
        assert!(m.rejected[0].contains("/nonexistent/git"), "{m:?}");
        assert!(r.has(&id));
    }

    /// The main store given as its own quarantine is refused before anything is touched.
    #[test]
    fn objects_store_as_its_own_quarantine_is_refused() {
        let r = Repo::new(Format::Sha1);
        let err = migrate(&r.objects, &r.objects, &git_bin(), true).expect_err("refused");
        assert!(matches!(err, ObjectsError::Quarantine { .. }), "{err}");
        assert!(r.has(&r.git(false, &["rev-parse", "HEAD"], None)));
        r.fsck();
    }

    /// A quarantine the agent removed holds nothing.
    #[test]
    fn objects_missing_quarantine_is_empty() {
        let r = Repo::new(Format::Sha1);
        fs::remove_dir(&r.q).expect("rmdir");
        assert_eq!(r.migrate(), Migrated::default());
    }

    #[test]
    fn objects_header_parsing_is_strict() {
        assert_eq!(parse_header(b"blob 0"), Ok(0));
        assert_eq!(parse_header(b"commit 120"), Ok(120));
        for bad in [
            &b"blob 01"[..],
            b"blob  1",
            b"blob +1",
            b"blob",
            b"blob ",
            b"Blob 1",
            b"blob 1 ",
        ] {
            assert!(parse_header(bad).is_err(), "{}", escape(bad, 40));
        }
        assert!(parse_header(format!("blob {}", MAX_INFLATED + 1).as_bytes()).is_err());
        assert!(parse_header(b"blob 99999999999999999999999").is_err());
    }
}
