//! Submodules the agent made or changed: git enters every populated submodule of the index
//! on your next `git status` (it runs `git status` inside it), so a repository the agent
//! nested in the worktree and staged (`git init lib`, `core.fsmonitor` in its config,
//! `git add lib`), or an existing submodule whose git dir it rewrote, runs its code outside
//! the wall. What is there is judged, not what changed: [`populated`] reads, from the index
//! and the kernel's inode numbers and change times (which the agent cannot forge), every
//! submodule git would enter and what it is ([`Ident`]); [`Populated::not_in`] names those
//! that the user's own record of them ([`crate::record`]) does not hold as they are. A plant
//! split across launches (a gitlink laid in one, its repository renamed into place in the
//! next) is judged whole at the end.
//!
//! The index is read here, not by git: git reading an index would also read the
//! repository's configuration, which names commands.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The most an index may hold that is read (a bigger one is not looked at: reported).
const MAX_INDEX: u64 = 256 << 20;
/// A gitlink's mode.
const GITLINK: u32 = 0o160000;

/// The paths of the gitlinks (submodules) in the index file `index`, relative to the
/// worktree. Understands index versions 2, 3 and 4, with SHA-1 or SHA-256 names, with or
/// without a checksum (`index.skipHash`), and a split index (`core.splitIndex`: the
/// entries of its `sharedindex.*` count too, those it deletes as well: more submodules
/// looked at, never fewer).
pub fn gitlinks(index: &Path) -> io::Result<Vec<PathBuf>> {
    let Some(data) = read_index(index)? else {
        return Ok(Vec::new());
    };
    // InvalidData: what git would read but this cannot (the caller sets such an index
    // aside); any other error (too large, unreadable) is only said.
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not an index this can read", index.display()),
        )
    };
    let (mut links, shared) = parse(&data).ok_or_else(bad)?;
    if let Some(hash) = shared {
        let name = format!("sharedindex.{hash}");
        let path = index.with_file_name(&name);
        let data = read_index(&path)?.ok_or_else(|| {
            io::Error::other(format!(
                "{}: the split index's {name} is missing",
                index.display()
            ))
        })?;
        let (more, _) = parse(&data).ok_or_else(bad)?;
        links.extend(more);
        links.sort();
        links.dedup();
    }
    Ok(links)
}

fn read_index(path: &Path) -> io::Result<Option<Vec<u8>>> {
    // Not followed if a link, not waited on if a FIFO (git would block on it; a watcher
    // blocked there would set nothing aside again): either is InvalidData, set aside.
    match crate::read_regular(path, MAX_INDEX) {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    }
}

fn be32(d: &[u8], at: usize) -> Option<u32> {
    let b = d.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Whether the index's trailing checksum is a SHA-1 of what precedes it (a SHA-1
/// repository's index with its checksum).
fn sha1_checksummed(d: &[u8]) -> bool {
    use sha1_checked::Digest as _;
    d.len() > 20 && {
        let (body, sum) = d.split_at(d.len() - 20);
        sha1_checked::Sha1::digest(body).as_slice() == sum
    }
}

/// The gitlinks of an index, and the name of its shared index if it is split. The hash
/// length is SHA-1's where the checksum says so; without a checksum (`index.skipHash`
/// writes zeros) the entries are read with SHA-1's, then SHA-256's, until they read whole.
fn parse(d: &[u8]) -> Option<(Vec<PathBuf>, Option<String>)> {
    if sha1_checksummed(d) {
        return parse_with(d, 20);
    }
    parse_with(d, 20).or_else(|| parse_with(d, 32))
}

fn parse_with(d: &[u8], hlen: usize) -> Option<(Vec<PathBuf>, Option<String>)> {
    if d.get(0..4)? != b"DIRC" {
        return None;
    }
    let version = be32(d, 4)?;
    if !(2..=4).contains(&version) {
        return None;
    }
    let count = be32(d, 8)? as usize;
    let mut at = 12;
    let mut out = Vec::new();
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..count {
        let start = at;
        let mode = be32(d, at + 24)?;
        at += 40 + hlen;
        let flags = u16::from_be_bytes([*d.get(at)?, *d.get(at + 1)?]);
        at += 2;
        if version >= 3 && flags & 0x4000 != 0 {
            at += 2;
        }
        let name: Vec<u8> = if version == 4 {
            // Prefix compression: strip N bytes of the previous name, then a suffix.
            let mut c = *d.get(at)?;
            at += 1;
            let mut strip = usize::from(c & 127);
            while c & 128 != 0 {
                c = *d.get(at)?;
                at += 1;
                strip = strip.checked_add(1)?.checked_mul(128)? + usize::from(c & 127);
            }
            let end = at + d.get(at..)?.iter().position(|&b| b == 0)?;
            let keep = prev.len().checked_sub(strip)?;
            let mut name = prev[..keep].to_vec();
            name.extend_from_slice(&d[at..end]);
            at = end + 1;
            name
        } else {
            let end = at + d.get(at..)?.iter().position(|&b| b == 0)?;
            let name = d[at..end].to_vec();
            // 1 to 8 NULs, to a multiple of 8 from the entry's start.
            at = start + ((end - start + 8) & !7);
            name
        };
        // Only a plain relative path names a place in the worktree (git writes no other; a
        // forged index could): no `..`, `.`, empty or absolute component.
        let plain = !name.is_empty()
            && name
                .split(|&b| b == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b"..");
        if mode & 0o170000 == GITLINK && plain {
            out.push(PathBuf::from(OsStr::from_bytes(&name)));
        }
        prev = name;
    }
    // Extensions, up to the trailing checksum: each a signature and a size. `link` (split
    // index) names the shared index by its hash.
    let end = d.len().checked_sub(hlen)?;
    let mut shared = None;
    while at < end {
        let sig = d.get(at..at + 4)?;
        let size = be32(d, at + 4)? as usize;
        let body = d.get(at + 8..(at + 8).checked_add(size)?)?;
        if sig == b"link" {
            let hash = body.get(..hlen)?;
            shared = Some(hash.iter().map(|b| format!("{b:02x}")).collect());
        }
        at += 8 + size;
    }
    if at != end {
        return None;
    }
    Some((out, shared))
}

/// Where a submodule's git dir is: `sub/.git` itself, or what its `gitdir:` line names
/// (relative to `sub`).
pub fn git_dir_of(sub: &Path) -> Option<PathBuf> {
    let dotgit = sub.join(".git");
    let m = std::fs::symlink_metadata(&dotgit).ok()?;
    if m.is_dir() {
        return Some(dotgit);
    }
    if !m.is_file() {
        return None;
    }
    let text = crate::read_regular(&dotgit, 64 << 10).ok()?;
    let line = text.strip_prefix(b"gitdir: ")?;
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let p = Path::new(OsStr::from_bytes(line));
    Some(if p.is_absolute() {
        p.to_path_buf()
    } else {
        sub.join(p)
    })
}

/// How deep [`populated`] follows submodules of submodules.
const MAX_NESTING: usize = 4;

/// The most entries of a submodule's `hooks/` or `info/` that are looked at; one with more
/// cannot be judged.
const MAX_ENTRIES: usize = 4096;

/// What a populated submodule is, as far as what git runs from it goes: its `.git` (device,
/// inode, kind; a `gitdir:` file's change time too), and the change times of what in its git
/// dir (and the common dir that names) names commands: `config`, `config.worktree`,
/// `commondir`, and `hooks/` and `info/` with each entry in them. Git writes none of these
/// in its work; the user or the agent does. A change time is set by the kernel on every
/// change, never backwards, and no rename keeps it for the renamed inode.
pub type Ident = Vec<i64>;

/// The populated submodules of a worktree (each gitlink of its index whose directory holds
/// a `.git`, which is what git enters on `git status`), and theirs, to [`MAX_NESTING`]:
/// path relative to the worktree's top level → what it is ([`Ident`]), or `None` for one that
/// cannot be judged (its own index unreadable, too many hooks): that one never equals
/// anything, so it is always set aside.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Populated(pub BTreeMap<PathBuf, Option<Ident>>);

impl Populated {
    /// The submodules of `self` (what is there now) that `basis` (what is the user's own)
    /// does not hold as they are: every one git would enter that the user did not have so,
    /// however old its files and whatever the index said before. One under another that is
    /// listed is not listed again (setting the outer one aside ends both).
    pub fn not_in(&self, basis: &Populated) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for (rel, id) in &self.0 {
            let same = id.is_some() && basis.0.get(rel) == Some(id);
            if !same && !out.iter().any(|o| rel.starts_with(o)) {
                out.push(rel.clone());
            }
        }
        out
    }
}

/// The populated submodules of the worktree at `root` whose index is `index`
/// ([`Populated`]). An index this cannot read whole (absent is empty) is an error: the caller
/// sets it aside, since git may read it.
pub fn populated(root: &Path, index: &Path) -> io::Result<Populated> {
    let mut out = Populated::default();
    populated_in(root, Path::new(""), index, 0, &mut out)?;
    Ok(out)
}

fn populated_in(
    root: &Path,
    prefix: &Path,
    index: &Path,
    depth: usize,
    out: &mut Populated,
) -> io::Result<()> {
    for rel in gitlinks(index)? {
        let at = prefix.join(&rel);
        let sub = root.join(&at);
        let Some(id) = ident(&sub) else {
            // Not populated: git does not enter it.
            continue;
        };
        let judged = id.is_some();
        out.0.insert(at.clone(), id);
        if let (true, Some(g)) = (judged && depth < MAX_NESTING, git_dir_of(&sub)) {
            // Its own submodules; an index of its that cannot be read makes it unjudged.
            if populated_in(root, &at, &g.join("index"), depth + 1, out).is_err() {
                out.0.insert(at, None);
            }
        }
    }
    Ok(())
}

/// [`Ident`] of the submodule at `sub`: `None` if it is not populated (no `.git`), `Some(None)`
/// if it cannot be judged.
fn ident(sub: &Path) -> Option<Option<Ident>> {
    use std::os::unix::fs::MetadataExt;
    let dotgit = sub.join(".git");
    let m = match std::fs::symlink_metadata(&dotgit) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(_) => return Some(None),
    };
    let mut id: Ident = vec![
        m.dev() as i64,
        m.ino() as i64,
        i64::from(m.mode() & libc::S_IFMT),
    ];
    if !m.is_dir() {
        id.extend([m.ctime(), m.ctime_nsec()]);
    }
    let Some(g) = git_dir_of(sub) else {
        return Some(Some(id));
    };
    let mut dirs = vec![g.clone()];
    if let Ok(c) = crate::read_regular(&g.join("commondir"), 64 << 10) {
        let c = c.strip_suffix(b"\n").unwrap_or(&c);
        let c = Path::new(OsStr::from_bytes(c));
        dirs.push(if c.is_absolute() {
            c.to_path_buf()
        } else {
            g.join(c)
        });
    }
    let stamp = |id: &mut Ident, p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) => id.extend([m.ino() as i64, m.ctime(), m.ctime_nsec()]),
        Err(_) => id.extend([-1, -1, -1]),
    };
    for d in dirs {
        for name in ["config", "config.worktree", "commondir"] {
            stamp(&mut id, &d.join(name));
        }
        for name in ["hooks", "info"] {
            let dir = d.join(name);
            stamp(&mut id, &dir);
            // A hook rewritten in place changes its own change time, not its directory's.
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names = Vec::new();
            for e in entries {
                let Ok(e) = e else { return Some(None) };
                if names.len() == MAX_ENTRIES {
                    return Some(None);
                }
                names.push(e.file_name());
            }
            names.sort();
            for n in names {
                stamp(&mut id, &dir.join(n));
            }
        }
    }
    Some(Some(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let st = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t.invalid",
                "-c",
                "protocol.file.allow=always",
                "-c",
                "advice.addEmbeddedRepo=false",
            ])
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .status()
            .expect("git");
        assert!(st.success(), "git {args:?}");
    }

    /// A repository with a submodule the user had and a nested repository staged later (in
    /// every index version): only the latter is judged not the user's own, until the old
    /// submodule's config changes too; a gitlink laid before its repository is moved into
    /// place is judged once it is populated.
    #[test]
    fn what_is_not_the_users_own_is_found() {
        if Command::new("git").arg("--version").output().is_err() {
            panic!("git is needed for this test (make test-tools installs it)");
        }
        for version in ["2", "3", "4", "split", "skiphash"] {
            let t = crate::testutil::Scratch::new("gitlinks");
            let root = t.0.join("top");
            let lib = t.0.join("lib");
            std::fs::create_dir_all(&root).expect("mkdir");
            std::fs::create_dir_all(&lib).expect("mkdir");
            git(&lib, &["init", "-q"]);
            git(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
            git(&root, &["init", "-q"]);
            git(
                &root,
                &["submodule", "add", "-q", lib.to_str().expect("utf8"), "old"],
            );
            git(&root, &["commit", "-q", "-m", "old"]);
            let index = root.join(".git/index");
            let basis = populated(&root, &index).expect("index");
            assert_eq!(basis.0.keys().collect::<Vec<_>>(), [Path::new("old")]);
            // A gitlink with nothing behind it yet, then its repository moved into place.
            let stash = t.0.join("stash");
            std::fs::create_dir_all(&stash).expect("mkdir");
            git(&stash, &["init", "-q"]);
            git(&stash, &["commit", "-q", "--allow-empty", "-m", "n"]);
            std::fs::create_dir_all(root.join("deep")).expect("mkdir");
            let nested = root.join("deep/new");
            std::fs::rename(&stash, &nested).expect("rename");
            git(&root, &["add", "deep/new"]);
            match version {
                // The gitlinks in the shared index, the main one holding only a link to it.
                "split" => {
                    git(&root, &["update-index", "--split-index"]);
                    let shared = std::fs::read_dir(root.join(".git"))
                        .expect("git dir")
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().starts_with("sharedindex."));
                    assert!(shared, "no split index");
                }
                // No checksum: zeros where it would be.
                "skiphash" => {
                    std::fs::write(root.join("f"), "f").expect("write");
                    git(&root, &["-c", "index.skipHash=true", "add", "f"]);
                    let index = std::fs::read(root.join(".git/index")).expect("index");
                    assert!(index.ends_with(&[0; 20]), "no checksum-less index");
                }
                v => git(&root, &["update-index", "--index-version", v]),
            }
            let mut links = gitlinks(&index).expect("index");
            links.sort();
            assert_eq!(links, [PathBuf::from("deep/new"), PathBuf::from("old")]);
            let now = populated(&root, &index).expect("index");
            assert_eq!(
                now.not_in(&basis),
                [PathBuf::from("deep/new")],
                "index version {version}"
            );
            // Judged on what is there: the same answer however often it is asked.
            assert_eq!(now.not_in(&basis), now.not_in(&basis));
            std::thread::sleep(std::time::Duration::from_millis(20));
            git(&root.join("old"), &["config", "core.fsmonitor", "true"]);
            let now = populated(&root, &index).expect("index");
            assert_eq!(
                now.not_in(&basis),
                [PathBuf::from("deep/new"), PathBuf::from("old")]
            );
            // What the user makes their own is judged against no more.
            assert!(now.not_in(&now).is_empty());
        }
    }

    #[test]
    fn what_is_not_an_index_is_refused() {
        assert!(parse(b"DIRX\0\0\0\x02\0\0\0\0").is_none());
        assert!(parse(b"DIRC\0\0\0\x09\0\0\0\0").is_none());
        // An entry count larger than what follows.
        assert!(parse(b"DIRC\0\0\0\x02\0\0\0\x05").is_none());
    }
}
