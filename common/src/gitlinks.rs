//! Submodules the agent made or changed: git enters every populated submodule of the index
//! on your next `git status` (it runs `git status` inside it), so a repository the agent
//! nested in the worktree and staged (`git init lib`, `core.fsmonitor` in its config,
//! `git add lib`), or an existing submodule whose git dir it rewrote, runs its code outside
//! the wall. Whether the agent made or changed one is read from what it cannot forge: the
//! inode change times (ctime, set by the kernel on every change, never backwards) of the
//! submodule's `.git` and of the files in its git dir that name commands, against the time
//! the launch started.
//!
//! The index is read here, not by git: git reading an index would also read the
//! repository's configuration, which names commands.

use std::ffi::OsStr;
use std::io::{self, Read};
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

/// The change time of `path` (not following a last symlink), if it exists.
fn ctime(path: &Path) -> Option<(i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    Some((m.ctime(), m.ctime_nsec()))
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

/// The gitlinks of the index as it was when the launch started, read from `file` (the
/// index opened by the launch before the agent ran: git replaces the index by renaming a
/// new file over it, so this is the old one). `None` where that is not known: no index,
/// one that cannot be read, or one changed in place since `since` (its change time).
pub fn at_start(
    file: Option<std::fs::File>,
    index: &Path,
    since: (i64, i64),
) -> Option<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    let Some(mut file) = file else {
        // No index then: every gitlink now is new.
        return Some(Vec::new());
    };
    let mut data = Vec::new();
    (&mut file)
        .take(MAX_INDEX + 1)
        .read_to_end(&mut data)
        .ok()?;
    let m = file.metadata().ok()?;
    if !m.is_file() || (m.ctime(), m.ctime_nsec()) >= since || data.len() as u64 > MAX_INDEX {
        return None;
    }
    let (mut links, shared) = parse(&data)?;
    if let Some(hash) = shared {
        let data = read_index(&index.with_file_name(format!("sharedindex.{hash}"))).ok()??;
        links.extend(parse(&data)?.0);
    }
    Some(links)
}

/// How deep [`suspects`] follows submodules of submodules.
const MAX_NESTING: usize = 4;

/// The submodules of the worktree at `root` (index file `index`) that git would enter on
/// your next `git status`, and that the agent may have made or changed: each populated
/// gitlink that was not in the index when the launch started (`start`; all of them when
/// that is not known), or whose `.git`, or git dir's config, hooks, info, commondir (and
/// what it names), changed at or after `since`; and, in the others, their own submodules
/// the same way (a submodule's index the agent changed makes all of its submodules
/// suspect). Paths relative to `root`. An index that cannot be read is an error: the
/// caller sets it aside.
pub fn suspects(
    root: &Path,
    index: &Path,
    start: Option<&[PathBuf]>,
    since: (i64, i64),
) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    suspects_in(root, Path::new(""), index, start, since, 0, &mut out)?;
    Ok(out)
}

fn suspects_in(
    root: &Path,
    prefix: &Path,
    index: &Path,
    start: Option<&[PathBuf]>,
    since: (i64, i64),
    depth: usize,
    out: &mut Vec<PathBuf>,
) -> io::Result<()> {
    for rel in gitlinks(index)? {
        let sub = root.join(prefix).join(&rel);
        let dotgit = sub.join(".git");
        let Some(own) = ctime(&dotgit) else {
            // Not populated: git does not enter it.
            continue;
        };
        let new = start.is_none_or(|s| !s.contains(&rel));
        let mut times = vec![own];
        let git_dir = git_dir_of(&sub);
        if let Some(g) = &git_dir {
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
            for d in dirs {
                for name in ["config", "config.worktree", "commondir", "hooks", "info"] {
                    times.extend(ctime(&d.join(name)));
                }
            }
        }
        if new || times.iter().any(|t| *t >= since) {
            out.push(prefix.join(&rel));
            continue;
        }
        // Its own submodules: what it held at the start is not known, so if its index
        // changed during the launch, every one of them is suspect.
        if let (Some(g), true) = (git_dir, depth < MAX_NESTING) {
            let nested_index = g.join("index");
            let nested_start: Option<Vec<PathBuf>> = match ctime(&nested_index) {
                Some(t) if t >= since => None,
                _ => Some(gitlinks(&nested_index).unwrap_or_default()),
            };
            suspects_in(
                root,
                &prefix.join(&rel),
                &nested_index,
                nested_start.as_deref(),
                since,
                depth + 1,
                out,
            )?;
        }
    }
    Ok(())
}

/// The coarse real-time clock: what the kernel stamps ctimes with, so that a change made
/// after this call is never stamped earlier.
pub fn now_coarse() -> (i64, i64) {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE)
        .unwrap_or_else(|_| nix::sys::time::TimeSpec::new(0, 0));
    (t.tv_sec(), t.tv_nsec())
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

    /// A repository with a submodule added before `since` and a nested repository staged
    /// after it (in every index version): only the latter is reported, until the old
    /// submodule's config changes too.
    #[test]
    fn a_submodule_made_or_changed_after_the_start_is_found() {
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
            std::thread::sleep(std::time::Duration::from_millis(20));
            let since = now_coarse();
            std::thread::sleep(std::time::Duration::from_millis(20));
            let nested = root.join("deep/new");
            std::fs::create_dir_all(&nested).expect("mkdir");
            git(&nested, &["init", "-q"]);
            git(&nested, &["commit", "-q", "--allow-empty", "-m", "n"]);
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
            let index = root.join(".git/index");
            let mut links = gitlinks(&index).expect("index");
            links.sort();
            assert_eq!(links, [PathBuf::from("deep/new"), PathBuf::from("old")]);
            // Both were in the index at the start: only the one made since is suspect.
            let start = [PathBuf::from("deep/new"), PathBuf::from("old")];
            assert_eq!(
                suspects(&root, &index, Some(&start), since).expect("suspects"),
                [PathBuf::from("deep/new")],
                "index version {version}"
            );
            // Staged since the start (made in an earlier launch): suspect all the same.
            assert_eq!(
                suspects(&root, &index, Some(&start[1..]), now_coarse()).expect("suspects"),
                [PathBuf::from("deep/new")],
                "index version {version}"
            );
            git(&root.join("old"), &["config", "core.fsmonitor", "true"]);
            let mut changed = suspects(&root, &index, Some(&start), since).expect("suspects");
            changed.sort();
            assert_eq!(changed, [PathBuf::from("deep/new"), PathBuf::from("old")]);
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
