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
//!   of the inflated bytes equal to the file's name. The quarantine's inode never moves into
//!   the store: the agent may still hold a descriptor to it and could write through it
//!   afterwards.
//! - A pack enters only as a copy that `git index-pack` indexed outside any repository
//!   (so no configuration, hook, promisor remote or alternate that the agent may have
//!   written is read: a quarantine can belong to a common dir the agent forged), which
//!   recomputes every object id from the content, with git's SHA-1 collision detection.
//!   Thin packs are refused. The quarantine's `.idx` says the pack is complete (git renames
//!   it into place last), and is read only to bound the work before anything is copied: its
//!   object count must be the pack header's and its offsets must lie inside the pack; the
//!   object ids it lists are never believed. A pack over [`MAX_PACK`] bytes, or sparse (far
//!   fewer bytes on disk than its size: cheap to make, and its copy would fill the disk), is
//!   refused without being read.
//! - The quarantine and the store are opened with no symlink anywhere in their paths
//!   (`RESOLVE_NO_SYMLINKS`), so no swap can point either at another directory.
//! - Nothing in the quarantine is followed or can block: every name is looked at with
//!   `fstatat(AT_SYMLINK_NOFOLLOW)` before it is opened, opened with
//!   `O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`, and checked again with `fstat` (the name may be
//!   swapped in between); only regular files are read, loose objects up to
//!   [`MAX_COMPRESSED`] bytes that inflate to at most [`MAX_INFLATED`], packs up to
//!   [`MAX_PACK`] bytes with an `.idx` up to [`MAX_IDX`].
//! - Only complete final names are touched: `XX/` + 38 or 62 lowercase hex digits for loose
//!   objects, `pack/pack-<hex>.pack` with its `.idx` for packs. Git writes into `tmp_obj_*`
//!   and `tmp_pack_*` and links or renames them to their final names when complete, so
//!   another agent process still writing into the quarantine is never disturbed; a `.pack`
//!   without its `.idx` is still being written and waits.
//! - A quarantine file is removed only after its object is durable in the main store (the
//!   new file and its directory fsynced), so a crash at any point loses nothing; running
//!   [`migrate`] again finishes the job (it is idempotent). The one exception is a rejected
//!   entry past the caps of the rejected area, below.
//! - The work an agent can make the watcher do is bounded, so that it cannot keep it busy
//!   (issue 24): an entry with a final name that is not a valid object (bad hash or header,
//!   oversized, not a regular file, a pack refused by the checks above or by `git
//!   index-pack`) is examined **once**: it is then renamed, within the quarantine, into
//!   [`REJECTED_DIR`] inside it, which nothing here reads again (past [`MAX_REJECTED`] bytes
//!   or [`MAX_REJECTED_ENTRIES`] entries there, or if that directory cannot be used, it is
//!   removed instead). An entry that could not be looked at for a reason on this side (an
//!   error opening or reading it, no git to run) stays, and is tried again. And every byte
//!   read from a loose object, inflated from one or copied of a pack counts against the
//!   launch's [`Budget`]: once it is spent, what is left waits for the next launch.
//! - Every line in [`Migrated::rejected`] is safe to print on a terminal: it holds only the
//!   quarantine's path, names that were checked to be hex (or made here of hex), numbers and
//!   escaped text.

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

/// The largest pack taken (its size). Its bytes are copied into the main store before `git
/// index-pack` checks them, so this bounds the space a refused pack takes there for a moment.
/// 2 GiB: an agent's commits come in far smaller packs (a fetch of a whole large project
/// could be bigger; it waits in the quarantine, reported, and can be fetched outside the
/// wall). It also keeps every object's offset within the 31 bits of an `.idx`'s small
/// offsets, so that a pack's `.idx` has no large-offset table.
pub const MAX_PACK: u64 = 2 << 30;

/// The largest `.idx` read. 128 MiB: 4.7 million SHA-1 objects at 28 bytes each, more than a
/// pack of [`MAX_PACK`] bytes holds in practice. It bounds how many objects a pack's header
/// can make `git index-pack` allocate for, since the two counts must agree.
pub const MAX_IDX: u64 = 128 << 20;

/// How much less than its size a pack may have on disk and not count as sparse: a little for
/// file systems that round or keep a tail elsewhere, an eighth for one that compresses (git's
/// zlib streams do not shrink by that much).
const SPARSE_SLACK: u64 = 64 << 10;

/// The bytes one launch's watcher may read from loose object files, inflate from them and
/// copy of packs, over all its passes ([`Budget::per_launch`]). 2 GiB is a few seconds of
/// inflating and hashing (SHA-1 with collision detection is the slow part), and room for the
/// largest object or pack taken, so that a fresh budget always takes the first thing in the
/// queue and the quarantine drains. What is past it waits for the next launch's watcher.
pub const INFLATE_PER_LAUNCH: u64 = 2 << 30;

const _: () = assert!(
    MAX_COMPRESSED + MAX_HEADER as u64 + MAX_INFLATED <= INFLATE_PER_LAUNCH
        && MAX_PACK <= INFLATE_PER_LAUNCH
        && MAX_PACK <= 1 << 31
);

/// Where rejected entries go, inside the quarantine: a name that is neither a fan-out
/// directory nor `pack`, so nothing here examines it again; git ignores it too.
pub const REJECTED_DIR: &str = "landwall-rejected";

/// The space (allocated blocks) the rejected area may hold before rejected entries are
/// removed instead of kept there: they are evidence, but the quarantine outlives the launch.
pub const MAX_REJECTED: u64 = 256 << 20;

/// The entries the rejected area may hold. It also bounds the listing that measures it (made
/// once per [`migrate`] call that rejects something), which the agent could otherwise make
/// long.
pub const MAX_REJECTED_ENTRIES: usize = 4096;

/// What a launch may still spend on objects, in bytes: read from loose object files,
/// inflated from them, and copied of packs. One budget serves all the [`migrate`] calls of a
/// launch's watcher, so a quarantine the agent keeps filling costs a bounded amount of work
/// per launch. Once it is spent [`migrate`] examines nothing more; what is left waits in the
/// quarantine, untouched, for a later launch's fresh budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    left: u64,
    spent: bool,
}

impl Budget {
    /// A launch's budget: [`INFLATE_PER_LAUNCH`] bytes.
    pub fn per_launch() -> Budget {
        Budget::new(INFLATE_PER_LAUNCH)
    }

    /// A budget of `bytes`.
    pub fn new(bytes: u64) -> Budget {
        Budget {
            left: bytes,
            spent: false,
        }
    }

    /// The bytes left.
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Whether something did not fit: then [`migrate`] does nothing more with this budget.
    pub fn is_spent(&self) -> bool {
        self.spent
    }

    /// Whether `n` more bytes fit; if not, the budget is spent.
    fn afford(&mut self, n: u64) -> bool {
        if n > self.left {
            self.spent = true;
        }
        !self.spent
    }

    /// Takes `n` bytes if they fit; if not, the budget is spent.
    fn take(&mut self, n: u64) -> bool {
        let fits = self.afford(n);
        if fits {
            self.left -= n;
        }
        fits
    }
}

/// What [`migrate`] did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Migrated {
    /// Loose objects now in the main store whose quarantine file was removed (including
    /// those the main store had already: the existing copy was kept).
    pub loose: usize,
    /// Packs indexed into the main store by `git index-pack`.
    pub packs: usize,
    /// One line per object-like entry not taken: what, why, and where it is now (set aside
    /// in [`REJECTED_DIR`], removed, or left in place for a later pass).
    pub rejected: Vec<String>,
    /// Whether the [`Budget`] ran out in this call (then [`Migrated::rejected`] names the
    /// entry it stopped at). Later calls with the same budget do nothing and say nothing.
    pub budget_spent: bool,
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
    /// It is not something we take, whatever happens: the reason goes into
    /// [`Migrated::rejected`], and the entry is set aside so that it is never examined again.
    Rejected(String),
    /// It could not be looked at, for a reason that may pass (an error opening or reading
    /// it): reported, and left in place for a later pass.
    Failed(String),
    /// The [`Budget`] does not cover it: left in place, untouched.
    Spent,
}

/// The space `st` takes on disk.
fn allocated(st: &FileStat) -> u64 {
    u64::try_from(st.st_blocks).unwrap_or(0).saturating_mul(512)
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
/// following a symlink, blocking on a FIFO or opening a device. Returns it with its `fstat`.
fn open_regular(dir: &Dir, name: &OsStr, cap: u64) -> Result<(File, FileStat), Skip> {
    // Look before opening, so that a FIFO or a device is never opened at all.
    let st = match nix::sys::stat::fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::ENOENT) => return Err(Skip::Vanished),
        Err(e) => return Err(Skip::Failed(format!("cannot stat: {e}"))),
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
        Err(e) => return Err(Skip::Failed(format!("cannot open: {e}"))),
    };
    // Again on what was opened: the name may have been swapped since the first look.
    let st = nix::sys::stat::fstat(&fd).map_err(|e| Skip::Failed(format!("fstat: {e}")))?;
    if let Some(why) = unfit(&st, cap) {
        return Err(Skip::Rejected(why));
    }
    Ok((File::from(fd), st))
}

/// Reads the loose object `name` in `dir` once and verifies it is the object `id`, within
/// `budget`: its size must fit before it is read.
fn read_verified(
    dir: &Dir,
    name: &OsStr,
    id: &str,
    format: Format,
    budget: &mut Budget,
) -> Result<Vec<u8>, Skip> {
    let (file, st) = open_regular(dir, name, MAX_COMPRESSED)?;
    let size = u64::try_from(st.st_size).unwrap_or(0);
    if !budget.afford(size) {
        return Err(Skip::Spent);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(MAX_COMPRESSED + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Skip::Failed(format!("reading: {e}")))?;
    let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    // It may have grown after the fstat (the agent can still write to it).
    if read > MAX_COMPRESSED {
        return Err(Skip::Rejected(format!(
            "grew over the limit of {MAX_COMPRESSED} bytes while read"
        )));
    }
    if !budget.take(read) {
        return Err(Skip::Spent);
    }
    verify(&bytes, id, format, budget)?;
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
/// body is longer than its header declares. Every byte inflated is taken from `budget`; the
/// header is inflated alone first, and the object left untouched (`Skip::Spent`) if the size
/// it declares does not fit.
fn verify(compressed: &[u8], id: &str, format: Format, budget: &mut Budget) -> Result<(), Skip> {
    fn rejected<T>(why: String) -> Result<T, Skip> {
        Err(Skip::Rejected(why))
    }
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
        // Until the header is known, no more than a header's worth: the declared size is
        // checked against the budget before the body is inflated.
        let room = if declared.is_none() {
            MAX_HEADER
        } else {
            out.len()
        };
        let status = match z.decompress(input, &mut out[..room], FlushDecompress::None) {
            Ok(status) => status,
            Err(e) => return rejected(format!("not a valid zlib stream: {e}")),
        };
        let produced = z.total_out() - before;
        let mut chunk = out
            .get(..usize::try_from(produced).unwrap_or(usize::MAX))
            .unwrap_or_default();
        hasher.update(chunk);
        if declared.is_none() {
            let (head, rest) = match chunk.iter().position(|&b| b == 0) {
                Some(nul) => (&chunk[..nul], Some(&chunk[nul + 1..])),
                None => (chunk, None),
            };
            header.extend_from_slice(head);
            if header.len() >= MAX_HEADER {
                return rejected(format!(
                    "bad header \"{}\"",
                    escape(&header[..MAX_HEADER], MAX_HEADER)
                ));
            }
            if let Some(rest) = rest {
                let size = parse_header(&header).or_else(rejected)?;
                // All it will inflate to, this chunk included: refused before the body.
                let total = u64::try_from(header.len() + 1)
                    .unwrap_or(u64::MAX)
                    .saturating_add(size);
                if !budget.afford(total) {
                    return Err(Skip::Spent);
                }
                declared = Some(size);
                chunk = rest;
            } else {
                chunk = &[];
            }
        }
        if let Some(size) = declared {
            body = body.saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
            if body > size {
                return rejected(format!("longer than the {size} bytes its header declares"));
            }
        }
        if !budget.take(produced) {
            return Err(Skip::Spent);
        }
        match status {
            Status::StreamEnd => break,
            Status::Ok | Status::BufError => {
                let progressed =
                    produced > 0 || usize::try_from(z.total_in()).unwrap_or(used) != used;
                if !progressed {
                    return rejected("truncated zlib stream".into());
                }
            }
        }
    }
    let used = usize::try_from(z.total_in()).unwrap_or(usize::MAX);
    if used != compressed.len() {
        return rejected(format!(
            "{} bytes after the zlib stream",
            compressed.len().saturating_sub(used)
        ));
    }
    let Some(size) = declared else {
        return rejected("no header".into());
    };
    if body != size {
        return rejected(format!("{body} bytes, not the {size} its header declares"));
    }
    let Some(digest) = hasher.hex() else {
        return rejected("its content is a SHA-1 collision attack".into());
    };
    if digest != id {
        return rejected(format!("content hashes to {digest}, not to its name"));
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

/// The caps on the rejected area: [`MAX_REJECTED`] and [`MAX_REJECTED_ENTRIES`] (smaller in
/// tests).
#[derive(Debug, Clone, Copy)]
struct Cap {
    bytes: u64,
    entries: usize,
}

const CAP: Cap = Cap {
    bytes: MAX_REJECTED,
    entries: MAX_REJECTED_ENTRIES,
};

/// The rejected area, open, and what it holds.
struct Area {
    dir: Dir,
    bytes: u64,
    entries: usize,
}

/// Opens (creating if needed) the rejected area in the quarantine `q` and measures it. The
/// agent can write there: it may be anything, hold anything, and is never followed.
fn open_area(q: &Dir, cap: Cap) -> Result<Area, String> {
    let open = || Dir::openat(q, REJECTED_DIR, DIR_FLAGS, Mode::empty());
    let mut dir = match open() {
        Ok(d) => d,
        Err(Errno::ENOENT) => {
            match nix::sys::stat::mkdirat(q, REJECTED_DIR, Mode::from_bits_truncate(0o700)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(format!("cannot create it: {e}")),
            }
            open().map_err(|e| format!("cannot open it: {e}"))?
        }
        Err(Errno::ELOOP) => return Err("it is a symbolic link".into()),
        Err(e) => return Err(format!("cannot open it: {e}")),
    };
    // No more than one entry past the cap is listed: a full area is full however full.
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| format!("cannot list it: {e}"))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
            if names.len() > cap.entries {
                break;
            }
        }
    }
    let bytes = names
        .iter()
        .filter_map(|n| {
            nix::sys::stat::fstatat(&dir, n.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()
        })
        .fold(0u64, |sum, st| sum.saturating_add(allocated(&st)));
    Ok(Area {
        dir,
        bytes,
        entries: names.len(),
    })
}

/// Removes the entry `name` in `dir`: a file, or an empty directory.
fn remove_entry(dir: &Dir, name: &OsStr) -> nix::Result<()> {
    match nix::unistd::unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Err(Errno::EISDIR) => nix::unistd::unlinkat(dir, name, UnlinkatFlags::RemoveDir),
        other => other,
    }
}

/// Where rejected entries go: the quarantine's rejected area, opened on the first entry set
/// aside in a [`migrate`] call and measured then.
struct Rejects<'a> {
    q: &'a Dir,
    quarantine: &'a Path,
    cap: Cap,
    area: Option<Result<Area, String>>,
}

impl Rejects<'_> {
    /// Sets a rejected entry aside: `items` are its files in `from` with the suffix each
    /// keeps (a loose object is one file with none; a pack is `pack-<hex>.<ext>`, `.idx`
    /// first), renamed (never copied: they stay on the quarantine's file system) to `stem`
    /// plus suffix in the rejected area, or to `stem-<random>` plus suffix if that is taken.
    /// Past the area's caps, or if it cannot be used, they are removed. Returns what became
    /// of them, for the line in [`Migrated::rejected`].
    fn set_aside(&mut self, from: &Dir, items: &[(OsString, String)], stem: &str) -> String {
        let mut present = Vec::new();
        let mut bytes = 0u64;
        for (name, suffix) in items {
            if let Ok(st) =
                nix::sys::stat::fstatat(from, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
            {
                bytes = bytes.saturating_add(allocated(&st));
                present.push((name.as_os_str(), suffix.as_str()));
            }
        }
        if present.is_empty() {
            return "gone since".into();
        }
        let (q, cap) = (self.q, self.cap);
        let area_path = self.quarantine.join(REJECTED_DIR);
        let why = match self.area.get_or_insert_with(|| open_area(q, cap)) {
            Ok(area)
                if area.bytes.saturating_add(bytes) <= cap.bytes
                    && area.entries.saturating_add(present.len()) <= cap.entries =>
            {
                match move_into(from, &present, stem, &area.dir) {
                    Ok(name) => {
                        area.bytes = area.bytes.saturating_add(bytes);
                        area.entries = area.entries.saturating_add(present.len());
                        return format!("set aside as {}", area_path.join(name).display());
                    }
                    Err(e) => format!("cannot be set aside in {}: {e}", area_path.display()),
                }
            }
            Ok(_) => format!("{} is full", area_path.display()),
            Err(e) => format!("{} cannot be used: {e}", area_path.display()),
        };
        let mut failed = None;
        for (name, _) in &present {
            match remove_entry(from, name) {
                Ok(()) | Err(Errno::ENOENT) => {}
                Err(e) => failed = Some(e),
            }
        }
        match failed {
            None => format!("removed ({why})"),
            Some(e) => format!("left in place ({why}; cannot remove it: {e})"),
        }
    }
}

/// Renames `items` from `from` into `area` under `stem` (see [`Rejects::set_aside`]),
/// never over anything. Returns the first one's new name.
fn move_into(from: &Dir, items: &[(&OsStr, &str)], stem: &str, area: &Dir) -> nix::Result<String> {
    let Some(((first, suffix), rest)) = items.split_first() else {
        return Err(Errno::ENOENT);
    };
    let mut attempt = 0u32;
    let stem = loop {
        // Random after the first try: the agent can write the area and take any name.
        let stem = if attempt == 0 {
            stem.to_string()
        } else {
            format!("{stem}-{:016x}", crate::random_u64(attempt))
        };
        let to = format!("{stem}{suffix}");
        match nix::fcntl::renameat2(
            from,
            *first,
            area,
            to.as_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => break stem,
            Err(Errno::EEXIST) if attempt < 16 => attempt += 1,
            Err(e) => return Err(e),
        }
    };
    for (name, suffix) in rest {
        let to = format!("{stem}{suffix}");
        match nix::fcntl::renameat2(
            from,
            *name,
            area,
            to.as_str(),
            RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) | Err(Errno::ENOENT) => {}
            // Taken by the agent: this sibling of a rejected pack is not worth keeping.
            Err(_) => {
                if let Err(e) = remove_entry(from, name) {
                    log::debug!("could not remove a rejected pack's file: {e}");
                }
            }
        }
    }
    Ok(format!("{stem}{suffix}"))
}

/// Moves every object in `quarantine` into `objects` (the main store, `<common dir>/objects`,
/// an absolute path), verifying each one; `git` is the git binary, run for packs. `budget`
/// is the launch's ([`Budget::per_launch`]), the same for all its calls.
///
/// A loose object that fails verification, and a pack refused before it is copied or by
/// `git index-pack`, is listed in [`Migrated::rejected`] and set aside, once: renamed into
/// [`REJECTED_DIR`] in the quarantine, where nothing examines it again (so an agent cannot
/// make every pass, and every later launch, redo the work it costs), and where it harms
/// nothing and stays as the evidence of what the agent tried; past that area's caps it is
/// removed instead. An entry that could not be looked at for a reason that may pass (an
/// error opening or reading it, no git to run, a `.pack` without its `.idx` yet) is listed
/// and left where it is. Entries that do not have an object's name (`tmp_obj_*`, `info/`, …)
/// are ignored without a line.
///
/// Every byte read from a loose object file, inflated from one, or copied of a pack is taken
/// from `budget`, and each is checked to fit before the work starts (a loose object's size,
/// then the size its header declares; a pack's size). The first that does not fit ends the
/// call, with [`Migrated::budget_spent`] and a line naming it; it and everything after it
/// stay in the quarantine untouched, and later calls with the same budget do nothing.
///
/// Each loose object is hashed with the function its name's length gives (40 hex digits:
/// SHA-1, 64: SHA-256). One named for the repository's other function is moved too if it
/// verifies: git never reads a name of the wrong length, so it is dead weight, not a danger,
/// and asking git for the repository's format would cost a process on every call.
///
/// It may run while an agent's git still writes into the quarantine (only final names are
/// taken), so it removes no directory: see [`prune_empty`]. A quarantine that does not
/// exist holds nothing: `Ok` with nothing done.
pub fn migrate(
    quarantine: &Path,
    objects: &Path,
    git: &Path,
    budget: &mut Budget,
) -> Result<Migrated, ObjectsError> {
    migrate_capped(quarantine, objects, git, budget, CAP)
}

/// Removes the quarantine's empty fan-out directories, so that the common case, a
/// quarantine with nothing in it, stays one listing. Only where no git can be writing into
/// it, which for a launch means no other launch of the worktree runs (its record's lock is
/// exclusive): git makes a fan-out directory and then its temporary file in two steps, and
/// an `rmdir` in between fails its write ("unable to create temporary file"). Those still
/// holding something stay: rmdir(2) says which. A quarantine that does not exist holds
/// nothing. Returns how many were removed.
pub fn prune_empty(quarantine: &Path) -> Result<usize, ObjectsError> {
    let err = |step: &'static str| {
        move |e: Errno| ObjectsError::Quarantine {
            step,
            path: quarantine.to_path_buf(),
            source: e.into(),
        }
    };
    let mut q = match open_dir_no_symlinks(quarantine) {
        Ok(q) => q,
        Err(Errno::ENOENT) => return Ok(0),
        Err(e) => return Err(err("opening")(e)),
    };
    let names = list(&mut q).map_err(err("listing"))?;
    let mut removed = 0;
    for xx in names.iter().filter_map(|n| fanout_name(n)) {
        match nix::unistd::unlinkat(&q, xx, UnlinkatFlags::RemoveDir) {
            Ok(()) => removed += 1,
            Err(e) => log::debug!("not removing {}: {e}", quarantine.join(xx).display()),
        }
    }
    Ok(removed)
}

/// [`migrate`], with the rejected area's caps given.
fn migrate_capped(
    quarantine: &Path,
    objects: &Path,
    git: &Path,
    budget: &mut Budget,
    cap: Cap,
) -> Result<Migrated, ObjectsError> {
    let mut done = Migrated::default();
    // Said once, by the call that spent it.
    if budget.is_spent() {
        return Ok(done);
    }
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
    let mut rejects = Rejects {
        q: &q,
        quarantine,
        cap,
        area: None,
    };
    for name in &names {
        if budget.is_spent() {
            break;
        }
        if let Some(xx) = fanout_name(name) {
            migrate_fanout(&mut rejects, xx, &store, budget, &mut done)?;
        }
    }
    if !budget.is_spent() {
        migrate_packs(&mut rejects, git, &store, budget, &mut done)?;
    }
    Ok(done)
}

/// The line for an entry the budget did not cover, and the note that it ran out.
fn spent(what: &Path, budget: &Budget, done: &mut Migrated) {
    done.budget_spent = true;
    done.rejected.push(format!(
        "{}: left for a later launch: this launch's budget for objects is spent ({} bytes left)",
        what.display(),
        budget.left()
    ));
}

/// Migrates the loose objects in the quarantine's fan-out directory `xx`.
fn migrate_fanout(
    rejects: &mut Rejects<'_>,
    xx: &str,
    store: &Store<'_>,
    budget: &mut Budget,
    done: &mut Migrated,
) -> Result<(), ObjectsError> {
    let here = rejects.quarantine.join(xx);
    let mut sub = match Dir::openat(rejects.q, xx, DIR_FLAGS, Mode::empty()) {
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
        let bytes = match read_verified(&sub, name, &id, format, budget) {
            Ok(bytes) => bytes,
            Err(Skip::Vanished) => continue,
            Err(Skip::Rejected(why)) => {
                let fate = rejects.set_aside(&sub, &[(name.clone(), String::new())], &id);
                done.rejected
                    .push(format!("{}: {why}; {fate}", what.display()));
                continue;
            }
            Err(Skip::Failed(why)) => {
                done.rejected
                    .push(format!("{}: {why}; left for a later pass", what.display()));
                continue;
            }
            // What was verified so far is still moved, below.
            Err(Skip::Spent) => {
                spent(&what, budget, done);
                break;
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
    /// The pack is not one we take: recorded, and the pack set aside.
    Rejected(String),
    /// It could not be taken now (no git, git killed, the quarantine unreadable): recorded,
    /// and the pack left in the quarantine for a later pass.
    Failed(String),
    /// The store could not be written.
    Store(ObjectsError),
}

/// A big-endian `u32` from the first four bytes of `b` (fewer count as zeros).
fn be32(b: &[u8]) -> u32 {
    b.iter()
        .take(4)
        .fold(0, |n, &byte| (n << 8) | u32::from(byte))
}

/// A pack's header (`PACK`, version 2 or 3, object count): the count.
fn pack_count(header: &[u8; 12]) -> Result<u32, String> {
    let version = be32(&header[4..8]);
    if &header[..4] != b"PACK" || !matches!(version, 2 | 3) {
        return Err(format!(
            "not a pack: its header is \"{}\"",
            escape(&header[..8], 16)
        ));
    }
    Ok(be32(&header[8..12]))
}

/// Reads the `.idx` `idx` (of `len` bytes) of a pack of `pack_size` bytes named by a hash of
/// `hash_len` bytes, as far as needed to bound the work on the pack: returns its object
/// count, once its size is exactly what that count makes and every object's offset lies
/// inside the pack. Nothing else it says is believed (`git index-pack` recomputes it all).
/// Versions 2 (`\377tOc`, git's default) and 1 (SHA-1 only).
fn idx_count(idx: &File, len: u64, hash_len: u64, pack_size: u64) -> Result<u32, String> {
    use std::os::unix::fs::FileExt;
    let read = |buf: &mut [u8], at: u64| {
        idx.read_exact_at(buf, at)
            .map_err(|e| format!("its .idx ({len} bytes): reading: {e}"))
    };
    let mut head = [0u8; 8];
    read(&mut head, 0)?;
    let (fanout_at, stride) = if &head[..4] == b"\xfftOc" {
        if be32(&head[4..]) != 2 {
            return Err(format!("its .idx is of version {}", be32(&head[4..])));
        }
        (8u64, 4u64)
    } else if hash_len == 20 {
        // Version 1: entries of a 4-byte offset and the name.
        (0, 4 + hash_len)
    } else {
        return Err("its .idx is of version 1, which has no SHA-256".into());
    };
    let mut fanout = vec![0u8; 1024];
    read(&mut fanout, fanout_at)?;
    let mut count = 0u32;
    for word in fanout.chunks_exact(4) {
        let n = be32(word);
        if n < count {
            return Err("its .idx's fan-out table is not sorted".into());
        }
        count = n;
    }
    let n = u64::from(count);
    let table_at = fanout_at + 1024;
    // v2: the names, their CRCs, then the offsets; no large-offset table (no pack taken is
    // over 2 GiB); both: the pack's checksum and the index's.
    let (offsets_at, expected) = if stride == 4 {
        let at = table_at + n * (hash_len + 4);
        (at, at + n * 4 + 2 * hash_len)
    } else {
        (table_at, table_at + n * stride + 2 * hash_len)
    };
    if len != expected {
        return Err(format!(
            "its .idx has {len} bytes, not the {expected} of an index of {count} objects"
        ));
    }
    // Within the pack: after its header and before its trailing checksum.
    let end = pack_size.saturating_sub(hash_len);
    let per_read = 16384u64;
    let mut buf = Vec::new();
    let mut i = 0u64;
    while i < n {
        let entries = per_read.min(n - i);
        buf.resize(usize::try_from(entries * stride).unwrap_or(usize::MAX), 0);
        read(&mut buf, offsets_at + i * stride)?;
        for entry in buf.chunks_exact(usize::try_from(stride).unwrap_or(usize::MAX)) {
            let offset = u64::from(be32(entry));
            if offset < 12 || offset >= end {
                return Err(format!(
                    "its .idx places an object at {offset}, outside the pack's {pack_size} bytes"
                ));
            }
        }
        i += entries;
    }
    Ok(count)
}

/// A complete quarantined pack, checked before anything is copied.
struct Checked {
    pack: File,
    size: u64,
    header: [u8; 12],
}

/// Checks the pack `pack-<hash>.pack` in `dir` before anything of it is copied: its `.idx`
/// in place (it is complete), a regular file of at most [`MAX_PACK`] bytes that is not
/// sparse, an `.idx` that agrees with its header (see [`idx_count`]).
fn check_pack(dir: &Dir, hash: &str) -> Result<Checked, Skip> {
    let idx = format!("pack-{hash}.idx");
    match nix::sys::stat::fstatat(dir, idx.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFREG => {}
        Ok(st) => {
            return Err(Skip::Rejected(format!(
                "its .idx is {}",
                kind_of(st.st_mode)
            )))
        }
        // Still being written (git renames the .idx into place last), or left by a crash: a
        // later run takes it once it is complete.
        Err(Errno::ENOENT) => return Err(Skip::Failed("no .idx (yet), not complete".into())),
        Err(e) => return Err(Skip::Failed(format!("its .idx: {e}"))),
    }
    let (pack, st) = open_regular(dir, OsStr::new(&format!("pack-{hash}.pack")), MAX_PACK)?;
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    let on_disk = allocated(&st);
    if on_disk.saturating_add(SPARSE_SLACK.max(size / 8)) < size {
        return Err(Skip::Rejected(format!(
            "sparse: {size} bytes with {on_disk} on disk"
        )));
    }
    let in_idx = |skip: Skip| match skip {
        Skip::Rejected(why) => Skip::Rejected(format!("its .idx: {why}")),
        Skip::Failed(why) => Skip::Failed(format!("its .idx: {why}")),
        other => other,
    };
    let (idx_file, idx_st) = open_regular(dir, OsStr::new(&idx), MAX_IDX).map_err(in_idx)?;
    let hash_len = u64::try_from(hash.len() / 2).unwrap_or(u64::MAX);
    let mut header = [0u8; 12];
    if size < 12 + hash_len {
        return Err(Skip::Rejected(format!(
            "{size} bytes, too short for a pack"
        )));
    }
    std::os::unix::fs::FileExt::read_exact_at(&pack, &mut header, 0)
        .map_err(|e| Skip::Failed(format!("reading: {e}")))?;
    let count = pack_count(&header).map_err(Skip::Rejected)?;
    let idx_len = u64::try_from(idx_st.st_size).unwrap_or(u64::MAX);
    let listed = idx_count(&idx_file, idx_len, hash_len, size).map_err(Skip::Rejected)?;
    if count != listed {
        return Err(Skip::Rejected(format!(
            "its header says {count} objects, its .idx {listed}"
        )));
    }
    Ok(Checked { pack, size, header })
}

/// Copies the checked pack into `copy` (synced), exactly the size and header that were
/// checked: the agent may still write to the pack, and must not make the copy grow or make
/// it a different pack from the one whose `.idx` was read.
fn copy_checked(checked: Checked, copy: &mut File, packs: &Path) -> Result<(), PackFailure> {
    let store_failure = |e: io::Error| {
        PackFailure::Store(ObjectsError::Store {
            step: "copying a pack into",
            path: packs.to_path_buf(),
            source: e,
        })
    };
    let mut from = checked.pack.take(checked.size.saturating_add(1));
    let mut buf = vec![0u8; 64 << 10];
    let mut head = Vec::with_capacity(checked.header.len());
    let mut total = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(PackFailure::Failed(format!("reading: {e}"))),
        };
        let chunk = &buf[..n];
        let want = checked.header.len().saturating_sub(head.len());
        head.extend_from_slice(&chunk[..want.min(n)]);
        total = total.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
        if total > checked.size {
            return Err(PackFailure::Rejected(format!(
                "grew while copied, past the {} bytes checked",
                checked.size
            )));
        }
        copy.write_all(chunk).map_err(store_failure)?;
    }
    if total != checked.size || head != checked.header {
        return Err(PackFailure::Rejected(
            "changed while copied, from the pack that was checked".into(),
        ));
    }
    copy.sync_all().map_err(store_failure)
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
    checked: Checked,
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
    let copied = copy_checked(checked, &mut copy, &packs_path);
    drop(copy);
    if let Err(failure) = copied {
        remove_tmp(&packs);
        return Err(failure);
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
            // Killed, or out of memory or space: not a verdict on the pack, which waits for a
            // later pass (each one paid for from the budget). git's messages are in English
            // here (no locale in its environment).
            let stderr = String::from_utf8_lossy(&out.stderr);
            let ours = [
                "No space left on device",
                "Out of memory",
                "Cannot allocate memory",
            ];
            if out.status.code().is_none() || ours.iter().any(|m| stderr.contains(m)) {
                return Err(PackFailure::Failed(format!(
                    "git index-pack failed: {}",
                    git_failure(&out)
                )));
            }
            return Err(PackFailure::Rejected(format!(
                "git index-pack refused it: {}",
                git_failure(&out)
            )));
        }
        // No git on this machine: the loose objects moved all the same, and the pack waits
        // for a run that has one.
        Err(e) => {
            remove_tmp(&packs);
            return Err(PackFailure::Failed(format!(
                "cannot run {}: {e}",
                git.display()
            )));
        }
    };
    let printed = String::from_utf8_lossy(&out.stdout);
    let name = printed.trim();
    if !matches!(name.len(), 40 | 64) || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        remove_tmp(&packs);
        return Err(PackFailure::Failed(format!(
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
    rejects: &mut Rejects<'_>,
    git: &Path,
    store: &Store<'_>,
    budget: &mut Budget,
    done: &mut Migrated,
) -> Result<(), ObjectsError> {
    let here = rejects.quarantine.join("pack");
    let mut dir = match Dir::openat(rejects.q, "pack", DIR_FLAGS, Mode::empty()) {
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
        let files: Vec<(OsString, String)> = PACK_FILES
            .iter()
            .map(|ext| (format!("pack-{hash}.{ext}").into(), format!(".{ext}")))
            .collect();
        let stem = format!("pack-{hash}");
        let why = match check_pack(&dir, hash) {
            Ok(checked) if !budget.take(checked.size) => {
                spent(&what, budget, done);
                break;
            }
            Ok(checked) => match index_pack_copy(checked, hash, git, store) {
                Ok(()) => None,
                Err(PackFailure::Store(e)) => return Err(e),
                Err(PackFailure::Rejected(why)) => Some(Skip::Rejected(why)),
                Err(PackFailure::Failed(why)) => Some(Skip::Failed(why)),
            },
            Err(skip) => Some(skip),
        };
        match why {
            None => {}
            Some(Skip::Vanished) => continue,
            Some(Skip::Rejected(why)) => {
                let fate = rejects.set_aside(&dir, &files, &stem);
                done.rejected
                    .push(format!("{}: {why}; {fate}", what.display()));
                continue;
            }
            Some(Skip::Failed(why)) => {
                done.rejected
                    .push(format!("{}: {why}; left for a later pass", what.display()));
                continue;
            }
            // (check_pack reads nothing that the budget counts.)
            Some(Skip::Spent) => {
                spent(&what, budget, done);
                break;
            }
        }
        for (file, _) in &files {
            match nix::unistd::unlinkat(&dir, file.as_os_str(), UnlinkatFlags::NoRemoveDir) {
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
    use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
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
            self.migrate_with(&mut Budget::per_launch())
        }

        fn migrate_with(&self, budget: &mut Budget) -> Migrated {
            migrate(&self.q, &self.objects, &git_bin(), budget).expect("migrate")
        }

        /// The rejected area.
        fn area(&self) -> PathBuf {
            self.q.join(REJECTED_DIR)
        }

        /// The names in the rejected area, sorted.
        fn in_area(&self) -> Vec<String> {
            let mut names: Vec<String> = match fs::read_dir(self.area()) {
                Ok(d) => d
                    .flatten()
                    .map(|e| e.file_name().into_string().expect("utf-8"))
                    .collect(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
                Err(e) => panic!("listing the area: {e}"),
            };
            names.sort();
            names
        }

        /// The names in the main store's pack directory, sorted.
        fn store_packs(&self) -> Vec<String> {
            let mut names: Vec<String> = fs::read_dir(self.objects.join("pack"))
                .expect("read_dir")
                .flatten()
                .map(|e| e.file_name().into_string().expect("utf-8"))
                .collect();
            names.sort();
            names
        }

        /// Writes a pack of the objects `ids` (in the quarantine or the main store) into the
        /// quarantine's pack directory with git, and returns its hash.
        fn put_pack(&self, ids: &[&str]) -> String {
            let pack_dir = self.q.join("pack");
            fs::create_dir_all(&pack_dir).expect("mkdir pack");
            let base = pack_dir.join("pack");
            let list = ids.join("\n") + "\n";
            self.git(
                true,
                &["pack-objects", "-q", base.to_str().expect("utf-8")],
                Some(list.as_bytes()),
            )
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

    /// A v2 `.idx` for `count` objects, all at offset 12, with zero names and checksums:
    /// meaningless, but of the right shape for the checks made before a pack is copied.
    fn fake_idx(count: u32, hash_len: usize) -> Vec<u8> {
        let n = usize::try_from(count).expect("count");
        let mut idx = b"\xfftOc\0\0\0\x02".to_vec();
        for _ in 0..256 {
            idx.extend_from_slice(&count.to_be_bytes());
        }
        idx.extend(std::iter::repeat_n(0u8, n * (hash_len + 4)));
        for _ in 0..n {
            idx.extend_from_slice(&12u32.to_be_bytes());
        }
        idx.extend(std::iter::repeat_n(0u8, 2 * hash_len));
        idx
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
        // The emptied fan-out directories stay (a git may be writing there); pruned, they
        // go, and a fan-out holding a file being written stays with it.
        assert!(fs::read_dir(&r.q).expect("read_dir").next().is_some());
        let busy = r.q.join("ab");
        fs::create_dir_all(&busy).expect("mkdir");
        fs::write(busy.join("tmp_obj_x"), b"").expect("write");
        let left = fs::read_dir(&r.q).expect("read_dir").count();
        assert_eq!(prune_empty(&r.q).expect("prune"), left - 1);
        let leftovers: Vec<_> = fs::read_dir(&r.q)
            .expect("read_dir")
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(leftovers, vec![std::ffi::OsString::from("ab")]);
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
        // An .idx that passes the checks before the copy (its count is the header's), so
        // that it is index-pack that meets the thin pack.
        let count = be32(&pack.stdout[8..12]);
        fs::write(
            pack_dir.join(format!("pack-{trailer}.idx")),
            fake_idx(count, 20),
        )
        .expect("write");
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
        assert!(m.rejected[0].contains("index-pack refused"), "{m:?}");
        assert!(!r.has(&head));
        // Set aside, with its .idx, out of pack/.
        assert_eq!(r.files_in_quarantine().len(), 2);
        assert_eq!(
            r.in_area(),
            [
                format!("pack-{trailer}.idx"),
                format!("pack-{trailer}.pack")
            ]
        );
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
        assert!(!corrupt.exists() && !pack_dir.join(format!("pack-{second}.idx")).exists());
        assert!(
            r.in_area().contains(&format!("pack-{second}.pack")),
            "set aside"
        );
        assert!(
            r.in_area().contains(&format!("pack-{second}.idx")),
            "set aside"
        );
        assert!(!pack_dir.join(format!("pack-{first}.pack")).exists());
    }

    /// Loose files that are not what their name says are rejected, set aside in the rejected
    /// area and kept out of the main store.
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
            assert!(!path.exists(), "not left among the objects");
            assert!(r.area().join(id).exists(), "set aside");
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
        assert!(unfinished.exists(), "still being written: left alone");
        // Set aside (renamed, never opened nor followed): the FIFO, the symlink, the
        // directory, the oversized file and the two packs with their .idx.
        assert!(!fifo.exists() && !link.exists() && !big.exists());
        let area = r.area();
        assert!(fs::symlink_metadata(area.join(&ids[0]))
            .expect("stat")
            .file_type()
            .is_fifo());
        assert!(fs::symlink_metadata(area.join(&ids[1]))
            .expect("stat")
            .file_type()
            .is_symlink());
        assert!(area.join(&ids[3]).is_dir() && area.join(&ids[4]).is_file());
        assert_eq!(r.in_area().len(), 4 + 4, "{:?}", r.in_area());
        // The symlinked fan-out directory was not followed, and is not moved.
        assert!(r.q.join(&ids[2][..2]).is_symlink());
        // A second pass has nothing to look at but what is still being written.
        let m = r.migrate();
        assert_eq!(m.rejected.len(), 2, "{:#?}", m.rejected);
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
        // An empty pack (header, SHA-256 trailer) and its .idx: it passes the checks.
        let mut empty = b"PACK\0\0\0\x02\0\0\0\0".to_vec();
        empty.extend_from_slice(&[0; 32]);
        fs::write(pack.join(format!("pack-{name}.pack")), &empty).expect("write");
        fs::write(pack.join(format!("pack-{name}.idx")), fake_idx(0, 32)).expect("write");
        let no_git = Path::new("/nonexistent/git");
        let mut budget = Budget::per_launch();
        let m = migrate(&r.q, &r.objects, no_git, &mut budget).expect("migrate");
        assert_eq!((m.loose, m.packs, m.rejected.len()), (1, 0, 1), "{m:?}");
        assert!(m.rejected[0].contains("/nonexistent/git"), "{m:?}");
        assert!(r.has(&id));
        // Not a verdict on the pack: it waits where it is.
        assert!(pack.join(format!("pack-{name}.pack")).exists());
        assert_eq!(r.in_area(), Vec::<String>::new());
    }

    /// The main store given as its own quarantine is refused before anything is touched.
    #[test]
    fn objects_store_as_its_own_quarantine_is_refused() {
        let r = Repo::new(Format::Sha1);
        let mut budget = Budget::per_launch();
        let err = migrate(&r.objects, &r.objects, &git_bin(), &mut budget).expect_err("refused");
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
        assert_eq!(prune_empty(&r.q).expect("prune"), 0);
    }

    /// Rewrites the file `path` (git makes its files read-only) with `edit` applied.
    fn rewrite(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
        let mut bytes = fs::read(path).expect("read");
        edit(&mut bytes);
        fs::remove_file(path).expect("rm");
        fs::write(path, &bytes).expect("write");
    }

    /// A zlib bomb under a name it does not hash to is inflated once: set aside, it costs
    /// nothing to later passes nor to later launches (issue 24).
    #[test]
    fn objects_bomb_is_set_aside_once() {
        let r = Repo::new(Format::Sha1);
        let raw = blob(&vec![0u8; 4 << 20]);
        let bytes = zlib(&raw, 9);
        assert!(bytes.len() < 64 << 10, "{}", bytes.len());
        let id = format!("ab{}", "c".repeat(38));
        let path = r.put_loose(&id, &bytes);
        let mut budget = Budget::per_launch();
        let m = r.migrate_with(&mut budget);
        assert_eq!(
            (m.loose, m.rejected.len(), m.budget_spent),
            (0, 1, false),
            "{m:?}"
        );
        assert!(
            m.rejected[0].contains("hashes to") && m.rejected[0].contains("set aside as"),
            "{m:?}"
        );
        let used = INFLATE_PER_LAUNCH - budget.left();
        assert!(used >= u64::try_from(raw.len()).expect("len"), "{used}");
        assert!(!path.exists());
        assert_eq!(r.in_area(), std::slice::from_ref(&id));
        // The next pass, and a later launch's watcher, do not inflate it again.
        let left = budget.left();
        assert_eq!(r.migrate_with(&mut budget), Migrated::default());
        assert_eq!(budget.left(), left);
        let mut later = Budget::per_launch();
        assert_eq!(r.migrate_with(&mut later), Migrated::default());
        assert_eq!(later.left(), INFLATE_PER_LAUNCH);
        // The same name again: set aside beside the first, under a name of its own.
        r.put_loose(&id, &bytes);
        let m = r.migrate_with(&mut later);
        assert_eq!(m.rejected.len(), 1, "{m:?}");
        let names = r.in_area();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names[1].starts_with(&format!("{id}-")), "{names:?}");
        r.fsck();
    }

    /// Past the rejected area's caps, or with an area the agent made unusable, a rejected
    /// entry is removed instead of kept, and its line says so.
    #[test]
    fn objects_rejected_area_is_capped() {
        let r = Repo::new(Format::Sha1);
        // Stored (level 0), so that each file takes blocks on any file system.
        let forge = |i: u8| {
            let body: Vec<u8> = (0..20_000u32).map(|n| n.to_le_bytes()[0] ^ i).collect();
            let id = format!("{:02x}{}", 0x10 + i, "d".repeat(38));
            (id, zlib(&blob(&body), 0))
        };
        let run = |cap: Cap| {
            let mut budget = Budget::per_launch();
            migrate_capped(&r.q, &r.objects, &git_bin(), &mut budget, cap).expect("migrate")
        };
        let (a, a_bytes) = forge(0);
        let (b, b_bytes) = forge(1);
        let one = fs::symlink_metadata(r.put_loose(&a, &a_bytes))
            .expect("stat")
            .blocks()
            * 512;
        assert!(one > 0);
        r.put_loose(&b, &b_bytes);
        // Room for one of the two.
        let m = run(Cap {
            bytes: one + one / 2,
            entries: 100,
        });
        assert_eq!(m.rejected.len(), 2, "{m:?}");
        let count = |what: &str| m.rejected.iter().filter(|l| l.contains(what)).count();
        assert_eq!(count("; set aside as "), 1, "{m:?}");
        assert_eq!(count("is full)"), 1, "{m:?}");
        assert_eq!(count("; removed ("), 1, "{m:?}");
        assert_eq!(r.in_area().len(), 1);
        assert_eq!(r.files_in_quarantine().len(), 1, "the other one is gone");
        // Room for one entry, taken.
        let (c, c_bytes) = forge(2);
        let pc = r.put_loose(&c, &c_bytes);
        let m = run(Cap {
            bytes: u64::MAX,
            entries: 1,
        });
        assert_eq!(m.rejected.len(), 1, "{m:?}");
        assert!(
            m.rejected[0].contains("removed (") && m.rejected[0].contains("is full"),
            "{m:?}"
        );
        assert!(!pc.exists());
        assert_eq!(r.in_area().len(), 1);
        // An area the agent replaced with a symlink is neither followed nor used.
        let outside = r.root.join("outside");
        fs::create_dir(&outside).expect("mkdir");
        fs::rename(r.area(), r.root.join("old-area")).expect("rename");
        symlink(&outside, r.area()).expect("symlink");
        let (d, d_bytes) = forge(3);
        let pd = r.put_loose(&d, &d_bytes);
        let m = r.migrate();
        assert_eq!(m.rejected.len(), 1, "{m:?}");
        assert!(
            m.rejected[0].contains("cannot be used") && m.rejected[0].contains("removed ("),
            "{m:?}"
        );
        assert!(!pd.exists());
        assert_eq!(fs::read_dir(&outside).expect("read_dir").count(), 0);
        assert!(r.area().is_symlink());
        r.fsck();
    }

    /// An object whose declared size does not fit in what is left of the budget is left in
    /// place, untouched, before its body is inflated; so is a pack whose size does not fit,
    /// before it is copied; and a later launch takes them.
    #[test]
    fn objects_budget_leaves_what_it_cannot_cover() {
        let r = Repo::new(Format::Sha1);
        let raw = blob(&[b'x'; 1000]);
        let id = r.id_of(&raw);
        let bytes = zlib(&raw, 6);
        let path = r.put_loose(&id, &bytes);
        let len = u64::try_from(bytes.len()).expect("len");
        let mut budget = Budget::new(len + 100);
        let m = r.migrate_with(&mut budget);
        assert_eq!(
            (m.loose, m.budget_spent, m.rejected.len()),
            (0, true, 1),
            "{m:?}"
        );
        assert!(m.rejected[0].contains("left for a later launch"), "{m:?}");
        assert!(budget.is_spent());
        // Read (and counted), but not a byte inflated past the header, which is not counted.
        assert_eq!(budget.left(), 100);
        assert_eq!(fs::read(&path).expect("read"), bytes);
        assert!(!r.has(&id));
        // Said once; later calls with that budget do nothing.
        assert_eq!(r.migrate_with(&mut budget), Migrated::default());
        assert_eq!(fs::read(&path).expect("read"), bytes);
        // A file larger than what is left is not even read.
        let mut small = Budget::new(len - 1);
        let m = r.migrate_with(&mut small);
        assert!(m.budget_spent, "{m:?}");
        assert_eq!(small.left(), len - 1);
        // A later launch's budget takes it.
        let m = r.migrate();
        assert_eq!((m.loose, m.rejected.len()), (1, 0), "{m:?}");
        assert!(r.has(&id));

        // A pack larger than what is left: left in place, nothing copied.
        let packed = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"packed\n"));
        let hash = r.put_pack(&[&packed]);
        r.git(true, &["prune-packed"], None);
        let pack = r.q.join("pack").join(format!("pack-{hash}.pack"));
        let size = fs::metadata(&pack).expect("stat").len();
        let before = r.store_packs();
        let mut budget = Budget::new(size - 1);
        let m = r.migrate_with(&mut budget);
        assert_eq!((m.packs, m.budget_spent), (0, true), "{m:?}");
        assert_eq!(budget.left(), size - 1);
        assert!(pack.exists());
        assert_eq!(r.store_packs(), before);
        assert_eq!(r.in_area(), Vec::<String>::new());
        let m = r.migrate();
        assert_eq!((m.packs, m.rejected.len()), (1, 0), "{m:?}");
        assert!(r.has(&packed));
        r.fsck();
    }

    /// Packs refused before anything of them is copied into the store: a sparse one, one
    /// whose header's object count is not its .idx's, one whose .idx places an object outside
    /// it. Each is set aside with its .idx.
    #[test]
    fn objects_packs_refused_before_copy() {
        let r = Repo::new(Format::Sha1);
        let one = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"one\n"));
        let two = r.git(true, &["hash-object", "-w", "--stdin"], Some(b"two\n"));
        let miscounted = r.put_pack(&[&one]);
        let misplaced = r.put_pack(&[&two]);
        r.git(true, &["prune-packed"], None);
        let pack_dir = r.q.join("pack");
        // The header claims one object more than the .idx lists.
        rewrite(&pack_dir.join(format!("pack-{miscounted}.pack")), |b| {
            b[11] += 1;
        });
        // The .idx puts the pack's one object 16 MiB in (v2: the offsets follow the fan-out,
        // the names and the CRCs).
        rewrite(&pack_dir.join(format!("pack-{misplaced}.idx")), |b| {
            let at = 8 + 1024 + 20 + 4;
            b[at..at + 4].copy_from_slice(&(16u32 << 20).to_be_bytes());
        });
        // Sparse: 64 MiB, a header's worth of it on disk.
        let sparse = "5".repeat(40);
        let path = pack_dir.join(format!("pack-{sparse}.pack"));
        let mut f = fs::File::create(&path).expect("create");
        f.write_all(b"PACK\0\0\0\x02\0\0\0\0").expect("write");
        f.set_len(64 << 20).expect("grow");
        drop(f);
        fs::write(pack_dir.join(format!("pack-{sparse}.idx")), fake_idx(0, 20)).expect("write");
        assert!(fs::metadata(&path).expect("stat").blocks() * 512 < 1 << 20);
        let before = r.store_packs();

        let mut budget = Budget::per_launch();
        let m = r.migrate_with(&mut budget);
        assert_eq!((m.loose, m.packs), (0, 0), "{m:?}");
        assert_eq!(m.rejected.len(), 3, "{:#?}", m.rejected);
        let area = r.in_area();
        for (hash, why) in [
            (&miscounted, "its header says 2 objects, its .idx 1"),
            (&misplaced, "outside the pack"),
            (&sparse, "sparse"),
        ] {
            assert!(
                m.rejected.iter().any(|l| l.contains(hash.as_str())
                    && l.contains(why)
                    && l.contains("set aside")),
                "{hash}: {why}: {:#?}",
                m.rejected
            );
            assert!(!pack_dir.join(format!("pack-{hash}.pack")).exists());
            for ext in ["pack", "idx"] {
                assert!(area.contains(&format!("pack-{hash}.{ext}")), "{area:?}");
            }
        }
        assert_eq!(r.store_packs(), before, "nothing copied into the store");
        assert_eq!(budget.left(), INFLATE_PER_LAUNCH, "nothing copied at all");
        assert!(!r.has(&one) && !r.has(&two));
        // Not looked at again.
        assert_eq!(r.migrate(), Migrated::default());
        r.fsck();
    }

    /// The .idx reader: sizes, versions and offsets that do not fit are refused.
    #[test]
    fn objects_idx_checks() {
        let s = Scratch::new();
        let check = |bytes: &[u8], hash_len: u64, pack_size: u64| {
            let p = s.0.join("idx");
            fs::write(&p, bytes).expect("write");
            let f = File::open(&p).expect("open");
            idx_count(
                &f,
                u64::try_from(bytes.len()).expect("len"),
                hash_len,
                pack_size,
            )
        };
        assert_eq!(check(&fake_idx(3, 20), 20, 100), Ok(3));
        assert_eq!(check(&fake_idx(3, 32), 32, 100), Ok(3));
        // A pack too short for an object at 12 before its trailer.
        assert!(check(&fake_idx(1, 20), 20, 32).is_err());
        // One byte more or less than the count makes.
        let mut long = fake_idx(3, 20);
        long.push(0);
        assert!(check(&long, 20, 100).is_err());
        assert!(check(&fake_idx(3, 20)[..100], 20, 100).is_err());
        // A large count with a small file: refused by size, without reading on.
        let mut huge = fake_idx(0, 20);
        huge[8 + 1020..8 + 1024].copy_from_slice(&u32::MAX.to_be_bytes());
        assert!(check(&huge, 20, 100).is_err());
        // An unsorted fan-out, an unknown version.
        let mut unsorted = fake_idx(3, 20);
        unsorted[8..12].copy_from_slice(&9u32.to_be_bytes());
        assert!(check(&unsorted, 20, 100).is_err());
        let mut v3 = fake_idx(3, 20);
        v3[7] = 3;
        assert!(check(&v3, 20, 100).is_err());
        assert!(check(b"", 20, 100).is_err());
        assert_eq!(pack_count(b"PACK\0\0\0\x02\0\0\x01\x00"), Ok(256));
        assert!(pack_count(b"PACK\0\0\0\x04\0\0\0\0").is_err());
        assert!(pack_count(b"KCAP\0\0\0\x02\0\0\0\0").is_err());
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
