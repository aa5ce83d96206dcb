//! Real paths for one launch, resolved once each.
//!
//! `std::fs::canonicalize` (glibc's `realpath`) calls `readlink` on every component of every
//! path, and the caller then needs one more call for the file type; worktree discovery and
//! the policy builder resolve overlapping paths (the worktree, its git dirs, `/dev/*`, `/usr`
//! …) many times over. [`Resolver`] walks a path component by component with one `lstat` per
//! component it has not seen, remembers every real directory it meets, and answers with the
//! file type too. A path whose parent is known to be real costs one `lstat`.
//!
//! A resolver's memory is only as fresh as the moment it learnt each directory: make one per
//! policy build (the drain daemon builds many over its life), never a global one.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::hash::BuildHasherDefault;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// A hasher for sets of paths: a multiply-rotate over 8-byte words (the rustc-hash "Fx"
/// scheme). The keys are paths from the system and the administrator's configuration, not
/// from an adversary who could aim collisions at them, and SipHash, the default, cost more
/// than the whole lookup.
#[derive(Default)]
pub(crate) struct PathHasher(u64);

impl std::hash::Hasher for PathHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl PathHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type PathSet<K> = HashSet<K, BuildHasherDefault<PathHasher>>;

/// The parent of a plain path, by bytes (`Path::parent` parses components): everything
/// before the last `/`, or `/` itself.
pub(crate) fn parent_bytes(path: &[u8]) -> Option<&[u8]> {
    match path.iter().rposition(|&b| b == b'/')? {
        0 if path.len() > 1 => Some(&path[..1]),
        0 => None,
        i => Some(&path[..i]),
    }
}

/// What a directory listing says about one entry, without a `stat` per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A directory (a mount point too: the listing shows the directory it covers).
    Dir,
    /// A symbolic link.
    Symlink,
    /// Anything else: a file, a device, a socket, a pipe.
    Other,
    /// The listing gave no type and `lstat` failed (the entry vanished, or is unreadable).
    Unknown,
}

/// The parent of `path` if `path` is plain: absolute, not `/` itself, and every component
/// after the root non-empty and neither `.` nor `..` (no `//`, no trailing `/`). A plain path
/// whose parent is real is real unless its last component is a symlink.
pub(crate) fn plain_parent(path: &[u8]) -> Option<&[u8]> {
    // One pass over the bytes (on every configured path, so no iterator per component).
    let rest = path.strip_prefix(b"/")?;
    let mut start = 0;
    loop {
        let end = rest[start..]
            .iter()
            .position(|&b| b == b'/')
            .map_or(rest.len(), |i| start + i);
        if matches!(&rest[start..end], b"" | b"." | b"..") {
            return None;
        }
        if end == rest.len() {
            return parent_bytes(path);
        }
        start = end + 1;
    }
}

/// One entry of a directory listing: its name is `names[start..start + len]`.
#[derive(Clone, Copy)]
pub(crate) struct Entry {
    start: usize,
    len: usize,
    pub(crate) kind: EntryKind,
}

/// A directory's entries (without `.` and `..`), in the order the kernel gives them; the
/// names are packed in one buffer.
pub(crate) struct Listing {
    names: Vec<u8>,
    pub(crate) entries: Vec<Entry>,
}

impl Listing {
    pub(crate) fn name(&self, e: &Entry) -> &OsStr {
        OsStr::from_bytes(&self.names[e.start..e.start + e.len])
    }

    /// Reads `dir` with `getdents64` into one buffer: two allocations per directory rather
    /// than two per entry as with `std::fs::read_dir` (whose `DirEntry` owns a copy of its
    /// name, and `file_name()` makes another). A read error ends the listing with what was
    /// read, as `read_dir(…).flatten()` does.
    pub(crate) fn read(dir: &Path, buf: &mut [u8]) -> io::Result<Listing> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(dir, flags, Mode::empty())?;
        let mut listing = Listing {
            names: Vec::with_capacity(buf.len() / 2),
            entries: Vec::new(),
        };
        while let Ok(filled) = crate::sys::getdents64(fd.as_fd(), buf) {
            if filled == 0 {
                break;
            }
            // struct linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            let mut records = &buf[..filled];
            while records.len() > 19 {
                let reclen = usize::from(u16::from_ne_bytes([records[16], records[17]]));
                let Some(record) = records.get(..reclen).filter(|_| reclen > 19) else {
                    break;
                };
                let d_type = record[18];
                let raw = &record[19..];
                let name = &raw[..raw.iter().position(|&b| b == 0).unwrap_or(raw.len())];
                records = &records[reclen..];
                if name == b"." || name == b".." || name.is_empty() {
                    continue;
                }
                let kind = match d_type {
                    libc::DT_DIR => EntryKind::Dir,
                    libc::DT_LNK => EntryKind::Symlink,
                    libc::DT_UNKNOWN => {
                        // Some filesystems do not fill d_type: ask, without following links.
                        let at = nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW;
                        match nix::sys::stat::fstatat(&fd, OsStr::from_bytes(name), at) {
                            Ok(st) => match st.st_mode & libc::S_IFMT {
                                libc::S_IFDIR => EntryKind::Dir,
                                libc::S_IFLNK => EntryKind::Symlink,
                                _ => EntryKind::Other,
                            },
                            Err(_) => EntryKind::Unknown,
                        }
                    }
                    _ => EntryKind::Other,
                };
                listing.entries.push(Entry {
                    start: listing.names.len(),
                    len: name.len(),
                    kind,
                });
                listing.names.extend_from_slice(name);
            }
        }
        Ok(listing)
    }

    /// The entries sorted by name (for a stable rule order). Compared on their first eight
    /// bytes as one integer first, which settles most comparisons without a `memcmp`.
    pub(crate) fn sorted(&self) -> Vec<Entry> {
        let head = |e: &Entry| {
            let name = &self.names[e.start..e.start + e.len];
            let mut b = [0u8; 8];
            let n = name.len().min(8);
            b[..n].copy_from_slice(&name[..n]);
            u64::from_be_bytes(b)
        };
        let mut v: Vec<(u64, Entry)> = self.entries.iter().map(|e| (head(e), *e)).collect();
        v.sort_unstable_by(|(ha, a), (hb, b)| {
            ha.cmp(hb).then_with(|| self.name(a).cmp(self.name(b)))
        });
        v.into_iter().map(|(_, e)| e).collect()
    }
}

/// Linux's limit on symlinks followed in one lookup (`MAXSYMLINKS`); past it, ELOOP.
const MAX_LINKS: usize = 40;

/// Resolves paths to real paths, remembering the real directories it has seen.
pub struct Resolver {
    /// Real directories seen so far (never `/`, which is always real).
    real: PathSet<Vec<u8>>,
    /// Paths a directory listing showed to be symlinks ([`Resolver::learn_links`]).
    links: PathSet<Vec<u8>>,
    /// Paths a directory listing showed to be neither directories nor symlinks
    /// ([`Resolver::learn_listing`]): real, and not directories.
    files: PathSet<Vec<u8>>,
}

impl Default for Resolver {
    fn default() -> Self {
        // Room for the default policy's directories without growing.
        let mut real = PathSet::default();
        real.reserve(64);
        Resolver {
            real,
            links: PathSet::default(),
            files: PathSet::default(),
        }
    }
}

impl Resolver {
    /// Makes room for `paths` more real directories (the configured ones) before they come:
    /// rehashing hundreds of paths costs more than resolving them.
    pub fn reserve(&mut self, paths: usize) {
        self.real.reserve(paths);
    }

    /// Records the entries of the real directory `dir` that its listing shows to be
    /// symlinks: resolving them then needs no `lstat` before the `readlink`.
    pub fn learn_links<'a>(&mut self, dir: &Path, names: impl IntoIterator<Item = &'a [u8]>) {
        self.learn(dir, names.into_iter().map(|n| (n, EntryKind::Symlink)));
    }

    /// Records what the listing of the real directory `dir` says of each entry, so that
    /// resolving an entry needs no `lstat`: the way to resolve hundreds of configured paths
    /// side by side with one `getdents64` (an entry the listing could not type is still
    /// looked at).
    pub(crate) fn learn_listing(&mut self, dir: &Path, listing: &Listing) {
        self.learn(
            dir,
            listing
                .entries
                .iter()
                .map(|e| (listing.name(e).as_bytes(), e.kind)),
        );
    }

    fn learn<'a>(&mut self, dir: &Path, entries: impl Iterator<Item = (&'a [u8], EntryKind)>) {
        let dir = dir.as_os_str().as_bytes();
        let base: &[u8] = if dir == b"/" { b"" } else { dir };
        for (name, kind) in entries {
            let set = match kind {
                EntryKind::Dir => &mut self.real,
                EntryKind::Symlink => &mut self.links,
                EntryKind::Other => &mut self.files,
                EntryKind::Unknown => continue,
            };
            let mut path = Vec::with_capacity(base.len() + 1 + name.len());
            path.extend_from_slice(base);
            path.push(b'/');
            path.extend_from_slice(name);
            set.insert(path);
        }
    }

    /// Records `dir` and its ancestors as real directories without looking: for a path the
    /// kernel gave as real, such as getcwd(2)'s answer. Anything else must be resolved.
    pub fn trust_real_dir(&mut self, dir: &Path) {
        if dir.is_absolute() {
            self.remember(dir, true);
        }
    }

    /// Records a real path found some other way: the path itself if it is a directory, else
    /// its parent, and every ancestor of that up to the first one already known.
    fn remember(&mut self, real: &Path, is_dir: bool) {
        let real = real.as_os_str().as_bytes();
        let mut dir = if is_dir {
            Some(real)
        } else {
            parent_bytes(real)
        };
        while let Some(d) = dir.filter(|d| d.len() > 1 && !self.real.contains(*d)) {
            self.real.insert(d.to_vec());
            dir = parent_bytes(d);
        }
    }

    /// The real path of `path`, as `std::fs::canonicalize` gives it (same errors: ENOENT,
    /// ENOTDIR, ELOOP, EACCES …).
    pub fn canonicalize(&mut self, path: &Path) -> io::Result<PathBuf> {
        self.resolve(path).map(|(real, _)| real)
    }

    /// The real path of `path` and whether it is a directory (following symlinks).
    ///
    /// Walks the components left to right keeping `out`, the real path so far: `.` and empty
    /// components are skipped, `..` goes to `out`'s parent (physical, as `out` is real), a
    /// name already known as a real directory is taken as is, and any other name is
    /// `lstat`ed: a symlink's target is spliced in front of the remaining components (from
    /// `/` if absolute, from `out` if relative), anything else is appended. A relative
    /// `path` goes to `std::fs::canonicalize`.
    pub fn resolve(&mut self, path: &Path) -> io::Result<(PathBuf, bool)> {
        let bytes = path.as_os_str().as_bytes();
        if bytes.first() != Some(&b'/') {
            let real = std::fs::canonicalize(path)?;
            let is_dir = std::fs::metadata(&real)?.is_dir();
            self.remember(&real, is_dir);
            return Ok((real, is_dir));
        }
        // A path already known (a listing's entries): the sets hold real paths only, which
        // resolve to themselves, so no other spelling can match.
        if self.real.contains(bytes) {
            return Ok((path.to_path_buf(), true));
        }
        if self.files.contains(bytes) {
            return Ok((path.to_path_buf(), false));
        }
        // The common case, a plain path in a directory already known to be real (`/dev/*`,
        // configured paths): one lookup and one `lstat` (a known link goes the long way).
        if plain_parent(bytes).is_some_and(|p| self.real.contains(p)) && !self.links.contains(bytes)
        {
            let meta = std::fs::symlink_metadata(path)?;
            if !meta.file_type().is_symlink() {
                let is_dir = meta.is_dir();
                if is_dir {
                    self.real.insert(bytes.to_vec());
                }
                return Ok((path.to_path_buf(), is_dir));
            }
        }
        // The path still to walk is `rest[pos..]` (`None`: nothing, not even an empty name
        // after a trailing `/`); `out` is the real path so far ("" for `/`). One buffer each:
        // no allocation per component.
        let mut rest: Vec<u8> = bytes.to_vec();
        let mut next = Some(0);
        let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + 64);
        let mut is_dir = true;
        let mut links = 0;
        while let Some(pos) = next {
            if !is_dir {
                // Anything after a file, even `/` or `.`, is ENOTDIR, as in the kernel.
                return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            let end = rest[pos..]
                .iter()
                .position(|&b| b == b'/')
                .map_or(rest.len(), |i| pos + i);
            let name = pos..end;
            next = (end < rest.len()).then_some(end + 1);
            match &rest[name.clone()] {
                b"" | b"." => continue,
                b".." => {
                    let parent = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                    out.truncate(parent);
                    continue;
                }
                _ => {}
            }
            let len = out.len();
            out.push(b'/');
            out.extend_from_slice(&rest[name]);
            if self.real.contains(out.as_slice()) {
                continue;
            }
            if self.files.contains(out.as_slice()) {
                is_dir = false;
                continue;
            }
            // A link a listing showed needs no `lstat`; only a symlink goes on below.
            if !self.links.contains(out.as_slice()) {
                let meta = std::fs::symlink_metadata(OsStr::from_bytes(&out))?;
                if !meta.file_type().is_symlink() {
                    is_dir = meta.is_dir();
                    if is_dir {
                        self.real.insert(out.clone());
                    }
                    continue;
                }
            }
            links += 1;
            if links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            let mut target = std::fs::read_link(OsStr::from_bytes(&out))?
                .into_os_string()
                .into_vec();
            out.truncate(if target.first() == Some(&b'/') {
                0
            } else {
                len
            });
            // The target, then what was left after the link.
            if let Some(after) = next {
                target.push(b'/');
                target.extend_from_slice(&rest[after..]);
            }
            rest = target;
            next = Some(0);
        }
        if out.is_empty() {
            out.push(b'/');
        }
        Ok((PathBuf::from(OsString::from_vec(out)), is_dir))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;
    use std::fs;

    #[test]
    fn parent_bytes_is_path_parent_on_plain_paths() {
        for p in ["/", "/a", "/a/b", "/a/b/c", "/usr/lib/x86_64-linux-gnu"] {
            assert_eq!(
                parent_bytes(p.as_bytes()),
                Path::new(p).parent().map(|d| d.as_os_str().as_bytes()),
                "{p}"
            );
        }
    }

    #[test]
    fn plain_parent_only_for_plain_paths() {
        assert_eq!(plain_parent(b"/a/b"), Some(&b"/a"[..]));
        assert_eq!(plain_parent(b"/a"), Some(&b"/"[..]));
        for p in ["/", "a/b", "/a/", "/a//b", "/a/./b", "/a/../b", "/a/.", ""] {
            assert_eq!(plain_parent(p.as_bytes()), None, "{p}");
        }
    }

    #[test]
    fn a_listing_answers_as_lstat_would() {
        let s = Scratch::new("listed");
        let dir = s.0.join("dir");
        fs::create_dir_all(dir.join("sub")).expect("mkdir");
        fs::create_dir_all(s.0.join("elsewhere/x")).expect("mkdir");
        fs::write(dir.join("file"), "x").expect("write");
        std::os::unix::fs::symlink(s.0.join("elsewhere"), dir.join("link")).expect("symlink");
        std::os::unix::fs::symlink("file", dir.join("filelink")).expect("symlink");
        let listing = Listing::read(&dir, &mut vec![0; 8192]).expect("list");
        let mut listed = Resolver::default();
        listed.learn_listing(&dir, &listing);
        listed.trust_real_dir(&dir);
        let names = [
            "sub",
            "file",
            "link",
            "filelink",
            "link/x",
            "link/.",
            "sub/..",
            "file/x",
            "filelink/",
            "missing",
            "link/x/../x",
        ];
        for name in names {
            let path = dir.join(name);
            let want = Resolver::default().resolve(&path);
            let got = listed.resolve(&path);
            match (&want, &got) {
                (Ok(w), Ok(g)) => assert_eq!(w, g, "{name}"),
                (Err(w), Err(g)) => assert_eq!(w.raw_os_error(), g.raw_os_error(), "{name}"),
                _ => panic!("{name}: lstat says {want:?}, the listing {got:?}"),
            }
        }
    }

    #[test]
    fn resolver_agrees_with_canonicalize() {
        let s = Scratch::new("agree");
        fs::create_dir_all(s.0.join("real/sub")).expect("mkdir");
        fs::write(s.0.join("real/file"), "x").expect("write");
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, s.0.join(name)).expect("symlink")
        };
        link(s.0.join("real").to_str().expect("utf-8"), "link");
        link("real/file", "filelink");
        link("sub", "real/rel");
        link("../real/sub/..", "real/sub/up");
        link("loop-b", "loop-a");
        link("loop-a", "loop-b");
        link("/", "root");
        link("dangling-target", "dangling");
        let mut paths: Vec<PathBuf> = [
            "/",
            "//",
            "/..",
            "/../usr",
            "/usr",
            "/bin",
            "/lib64",
            "/etc",
            "/etc/os-release",
            "/etc/os-release/",
            "/etc/os-release/.",
            "/etc/os-release/..",
            "/dev/null",
            "/dev/pts",
            "/proc/self",
            "/proc/self/exe",
            "/proc/self/cwd",
            "/tmp",
            "/usr/bin/../lib",
            "/usr//bin",
            "/usr/bin/",
            "/usr/./bin",
            "/nonexistent",
            "/dev/nonexistent",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        for rel in [
            "real",
            "real/sub",
            "real/file",
            "link",
            "link/sub",
            "link/file",
            "link/../link/sub",
            "filelink",
            "filelink/",
            "real/rel",
            "link/rel",
            "real/rel/..",
            "real/sub/up",
            "real/sub/up/sub",
            "loop-a",
            "loop-a/x",
            "root",
            "root/usr/bin",
            "dangling",
            "missing",
            "real/file/x",
        ] {
            paths.push(s.0.join(rel));
        }
        // Twice each, so that the second round runs with every parent already known to be
        // real; without and with the scratch directory's links learnt from its listing.
        let links: Vec<Vec<u8>> = fs::read_dir(&s.0)
            .expect("list")
            .map(|e| e.expect("entry"))
            .filter(|e| e.file_type().expect("type").is_symlink())
            .map(|e| e.file_name().into_vec())
            .collect();
        let mut learnt = Resolver::default();
        learnt.learn_links(&s.0, links.iter().map(Vec::as_slice));
        for (name, mut resolver) in [("default", Resolver::default()), ("learnt", learnt)] {
            for round in 0..2 {
                for p in &paths {
                    let want = fs::canonicalize(p)
                        .and_then(|r| Ok((r.clone(), fs::metadata(&r)?.is_dir())))
                        .map_err(|e| e.raw_os_error());
                    let got = resolver.resolve(p).map_err(|e| e.raw_os_error());
                    assert_eq!(got, want, "{name}, round {round}: {}", p.display());
                }
            }
        }
    }

    #[test]
    fn a_relative_path_is_resolved_from_the_cwd() {
        let mut resolver = Resolver::default();
        let want = fs::canonicalize(".").expect("cwd");
        assert_eq!(
            resolver.canonicalize(Path::new(".")).expect("resolve"),
            want
        );
    }
}
