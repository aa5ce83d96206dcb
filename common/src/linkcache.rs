//! The names of the symlinks in `/etc` (and the other scanned directories) between launches.
//!
//! Finding `/etc`'s links takes a listing of `/etc`, which on ext4's hashed directories is
//! the most expensive system call of a launch. A directory's mtime and ctime change whenever
//! an entry is added, removed or renamed over, and a link's text cannot change in place, so
//! the names listed at one mtime are the names at that mtime. The cache keeps them in
//! `$XDG_RUNTIME_DIR/landwall/`, under the user's own, private, per-boot directory, which no
//! walled agent can write (the wall does not grant it).
//!
//! Nothing read from the cache is trusted beyond "these names may be links": each name is
//! `readlink`ed in the real directory, and one that is not a link there is skipped. A stale
//! or forged cache can therefore only leave a link out (the policy grants less), never add
//! a grant the listing would not. A directory changed in the last two seconds is not cached:
//! its timestamps have a clock tick's granularity, and a change in the same tick as the
//! listing would leave them equal.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A cache file larger than this is not read (no listing of a scanned directory comes near).
const MAX_SIZE: u64 = 256 * 1024;
/// How long a directory must have been left alone before its names are cached.
const SETTLE: Duration = Duration::from_secs(2);
const MAGIC: &str = "landwall-links 1";

/// Where the cache lives for this launch, if anywhere.
#[derive(Debug)]
pub struct LinkCache {
    dir: PathBuf,
}

/// What a scanned directory looked like when its names were taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// The directory's identity and timestamps, or `None` if it cannot be stat'ed.
    pub fn of(dir: &Path) -> Option<Key> {
        fs::metadata(dir).ok().map(|m| Key::from_meta(&m))
    }

    fn from_meta(m: &fs::Metadata) -> Key {
        Key(format!(
            "{MAGIC} {} {} {} {} {} {}",
            m.dev(),
            m.ino(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ))
    }

    /// Whether a directory with these timestamps has been left alone long enough to cache.
    fn settled(m: &fs::Metadata) -> bool {
        let at = |secs: i64, nsecs: i64| {
            let secs = u64::try_from(secs).ok()?;
            let nsecs = u32::try_from(nsecs).ok()?;
            SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nsecs))
        };
        let now = SystemTime::now();
        [at(m.mtime(), m.mtime_nsec()), at(m.ctime(), m.ctime_nsec())]
            .iter()
            .all(|t| t.is_some_and(|t| now.duration_since(t).is_ok_and(|age| age >= SETTLE)))
    }
}

impl LinkCache {
    /// The cache under `runtime_dir` (`$XDG_RUNTIME_DIR`), if that is an absolute path to a
    /// directory that this user owns and nobody else may enter, as the XDG spec has it.
    pub fn in_runtime_dir(runtime_dir: Option<&OsStr>) -> Option<LinkCache> {
        let dir = Path::new(runtime_dir?);
        if !dir.is_absolute() {
            return None;
        }
        let m = fs::symlink_metadata(dir).ok()?;
        let private =
            m.is_dir() && m.uid() == nix::unistd::geteuid().as_raw() && m.mode() & 0o077 == 0;
        private.then(|| LinkCache {
            dir: dir.join("landwall"),
        })
    }

    fn file(&self, scanned: &Path) -> PathBuf {
        let name: Vec<u8> = scanned
            .as_os_str()
            .as_bytes()
            .iter()
            .map(|&b| if b == b'/' { b'%' } else { b })
            .collect();
        let mut file = self.dir.join("links");
        file.as_mut_os_string().push(OsStr::from_bytes(&name));
        file
    }

    /// The names cached for `scanned` under `key`, or `None` (no cache, another key, or an
    /// unreadable file).
    pub fn names(&self, scanned: &Path, key: &Key) -> Option<Vec<Vec<u8>>> {
        let mut text = Vec::new();
        fs::File::open(self.file(scanned))
            .ok()?
            .take(MAX_SIZE + 1)
            .read_to_end(&mut text)
            .ok()?;
        if text.len() as u64 > MAX_SIZE {
            return None;
        }
        let (head, rest) = text.split_at(text.iter().position(|&b| b == b'\n')?);
        if head != key.0.as_bytes() {
            return None;
        }
        Some(
            rest[1..]
                .split(|&b| b == 0)
                .filter(|n| !n.is_empty() && !n.contains(&b'/'))
                .map(<[u8]>::to_vec)
                .collect(),
        )
    }

    /// Stores `names` (the links a listing of `scanned` showed) under `key`, taken before the
    /// listing, if `scanned` has settled. Written to a fresh file and renamed into place, so
    /// a reader sees the old file or the new one. A cache that cannot be written costs the
    /// next launch a listing, nothing else, so the error is returned for the caller to drop.
    pub fn store(&self, scanned: &Path, key: &Key, names: &[&[u8]]) -> io::Result<()> {
        // Unchanged since the key was taken, and long enough ago.
        let now = fs::metadata(scanned)?;
        if Key::from_meta(&now) != *key || !Key::settled(&now) {
            return Ok(());
        }
        match fs::DirBuilder::new().mode(0o700).create(&self.dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let mut text = Vec::with_capacity(128 + names.iter().map(|n| n.len() + 1).sum::<usize>());
        text.extend_from_slice(key.0.as_bytes());
        text.push(b'\n');
        for name in names {
            text.extend_from_slice(name);
            text.push(0);
        }
        let file = self.file(scanned);
        let mut tmp = file.clone();
        tmp.as_mut_os_string()
            .push(format!(".{}.tmp", std::process::id()));
        let written = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text))
            .and_then(|()| fs::rename(&tmp, &file));
        if written.is_err() {
            // Leave no temporary file behind; the original error is the one to report.
            let _gone = fs::remove_file(&tmp);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;

    fn cache(s: &Scratch) -> LinkCache {
        let run = s.0.join("run");
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&run)
            .expect("mkdir");
        LinkCache::in_runtime_dir(Some(run.as_os_str())).expect("private runtime dir")
    }

    /// Backdates `dir`'s mtime (its ctime stays: the settle check then refuses it).
    fn age(dir: &Path, secs: u64) {
        let t = SystemTime::now() - Duration::from_secs(secs);
        fs::File::open(dir)
            .and_then(|f| f.set_modified(t))
            .expect("set mtime");
    }

    #[test]
    fn runtime_dir_must_be_absolute_private_and_ours() {
        let s = Scratch::new("lc-run");
        assert!(LinkCache::in_runtime_dir(None).is_none());
        assert!(LinkCache::in_runtime_dir(Some(OsStr::new("run"))).is_none());
        let open = s.0.join("open");
        fs::DirBuilder::new()
            .mode(0o755)
            .create(&open)
            .expect("mkdir");
        assert!(LinkCache::in_runtime_dir(Some(open.as_os_str())).is_none());
        assert!(LinkCache::in_runtime_dir(Some(s.0.join("missing").as_os_str())).is_none());
        let _ = cache(&s);
    }

    #[test]
    fn names_come_back_under_the_same_key_only() {
        let s = Scratch::new("lc-key");
        let c = cache(&s);
        let scanned = s.0.join("scanned");
        fs::create_dir(&scanned).expect("mkdir");
        let key = Key::of(&scanned).expect("key");
        // Just changed: not settled, nothing stored.
        c.store(&scanned, &key, &[b"a"]).expect("store");
        assert_eq!(c.names(&scanned, &key), None);
        // The ctime cannot be backdated; write the file as a settled directory would get it.
        fs::create_dir_all(&c.dir).expect("mkdir");
        fs::write(
            c.file(&scanned),
            [key.0.as_bytes(), b"\nresolv.conf\0a/b\0\0mtab\0"].concat(),
        )
        .expect("write");
        assert_eq!(
            c.names(&scanned, &key),
            Some(vec![b"resolv.conf".to_vec(), b"mtab".to_vec()])
        );
        // Any change to the directory is another key.
        fs::write(scanned.join("new"), "").expect("write");
        let changed = Key::of(&scanned).expect("key");
        assert_ne!(changed, key);
        assert_eq!(c.names(&scanned, &changed), None);
        age(&scanned, 60);
        let meta = fs::metadata(&scanned).expect("stat");
        assert!(!Key::settled(&meta), "a fresh ctime keeps it unsettled");
    }

    #[test]
    fn a_settled_directory_is_stored_and_read_back() {
        // /usr/lib has not changed in the last two seconds on any machine that runs tests.
        let s = Scratch::new("lc-store");
        let c = cache(&s);
        let scanned = Path::new("/usr/lib");
        let key = Key::of(scanned).expect("key");
        assert!(Key::settled(&fs::metadata(scanned).expect("stat")));
        c.store(scanned, &key, &[b"x", b"y"]).expect("store");
        assert_eq!(
            c.names(scanned, &key),
            Some(vec![b"x".to_vec(), b"y".to_vec()])
        );
        let mode = fs::metadata(&c.dir).expect("cache dir").mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(
            fs::read_dir(&c.dir).expect("list").count(),
            1,
            "no temporary left"
        );
    }
}
