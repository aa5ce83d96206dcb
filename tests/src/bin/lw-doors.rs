//! Attempts for `tests/tests/doors.rs`: what stays open beside the wall (docs/escape.md,
//! "What the wall does not cover"). Not shipped.
//!
//! Like `lw-escape`, each attempt prints nothing on stdout but one final line:
//! - `ESCAPED <details>` (exit 0) if it reached its target;
//! - `BLOCKED <step>: <errno or reason>` (exit 1) if it did not.
//!
//! Usage errors exit 2.
//!
//! Attempts:
//! - `list DIR`: list DIR;
//! - `inotify DIR NAME…`: watch DIR with inotify, say `lw-doors: watching` on stderr, then
//!   wait (10 s at most) until an event has named each NAME; lists the events seen;
//! - `read PATH NEEDLE`: read PATH; only content containing NEEDLE counts;
//! - `chmod PATH OCTAL`, `chown PATH UID GID` (-1 keeps one), `utimes PATH SECS` (access and
//!   modification time), `setxattr PATH NAME VALUE`: the path-based system call, then the
//!   resulting metadata;
//! - `getxattr PATH NAME`: prints the value (for the tests' checks, run outside the wall).
//!
//! Launcher: `pause ARGS…` sleeps until a signal ends it; ARGS only sit in its command line.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::exit;
use std::time::{Duration, Instant};

use nix::errno::Errno;

/// The raw system calls the safe crates do not wrap here. Every `unsafe` block of this
/// binary is in this module.
mod raw {
    use std::ffi::{CString, OsStr};
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    fn cstr(s: &OsStr) -> io::Result<CString> {
        CString::new(s.as_bytes()).map_err(io::Error::other)
    }

    /// `inotify_init1(IN_NONBLOCK | IN_CLOEXEC)`.
    pub fn inotify_init() -> io::Result<OwnedFd> {
        // SAFETY: no pointer arguments; the result is a new descriptor or -1.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by the kernel and is owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `inotify_add_watch(fd, path, mask)`.
    pub fn inotify_add_watch(fd: &OwnedFd, path: &OsStr, mask: u32) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let path = cstr(path)?;
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        let r = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// `setxattr(path, name, value, len, 0)`.
    pub fn setxattr(path: &OsStr, name: &OsStr, value: &[u8]) -> io::Result<()> {
        let (path, name) = (cstr(path)?, cstr(name)?);
        // SAFETY: NUL-terminated strings and a slice that outlive the call; the kernel reads
        // `value.len()` bytes.
        let r = unsafe {
            libc::setxattr(
                path.as_ptr(),
                name.as_ptr(),
                value.as_ptr().cast(),
                value.len(),
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// `getxattr(path, name)`: the value (at most 4 KiB).
    pub fn getxattr(path: &OsStr, name: &OsStr) -> io::Result<Vec<u8>> {
        let (path, name) = (cstr(path)?, cstr(name)?);
        let mut buf = vec![0u8; 4096];
        // SAFETY: NUL-terminated strings that outlive the call; the kernel writes at most
        // `buf.len()` bytes into `buf`.
        let r = unsafe {
            libc::getxattr(
                path.as_ptr(),
                name.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        let n = usize::try_from(r).map_err(|_| io::Error::last_os_error())?;
        buf.truncate(n);
        Ok(buf)
    }
}

enum Verdict {
    Escaped(String),
    Blocked(String),
}
use Verdict::{Blocked, Escaped};

fn errno(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => format!("{:?}", Errno::from_raw(n)),
        None => e.to_string(),
    }
}

fn blocked(step: &str, e: &std::io::Error) -> Verdict {
    Blocked(format!("{step}: {}", errno(e)))
}

fn usage(msg: &str) -> ! {
    eprintln!("lw-doors: {msg} (see the source for the subcommands)");
    exit(2)
}

fn arg<'a>(rest: &'a [OsString], i: usize, what: &str) -> &'a OsStr {
    match rest.get(i) {
        Some(a) => a,
        None => usage(&format!("missing {what}")),
    }
}

fn num<T: std::str::FromStr>(s: &OsStr, what: &str) -> T {
    match s.to_str().and_then(|s| s.parse().ok()) {
        Some(n) => n,
        None => usage(&format!("bad {what}: {}", s.to_string_lossy())),
    }
}

fn list(dir: &Path) -> Verdict {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => return blocked("opendir", &e),
    };
    let mut names: Vec<String> = rd
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Escaped(format!("listed {}: {}", dir.display(), names.join(" ")))
}

/// The inotify event names this reports.
const EVENTS: [(u32, &str); 9] = [
    (libc::IN_ACCESS, "ACCESS"),
    (libc::IN_MODIFY, "MODIFY"),
    (libc::IN_ATTRIB, "ATTRIB"),
    (libc::IN_CLOSE_WRITE, "CLOSE_WRITE"),
    (libc::IN_CLOSE_NOWRITE, "CLOSE_NOWRITE"),
    (libc::IN_OPEN, "OPEN"),
    (libc::IN_CREATE, "CREATE"),
    (libc::IN_DELETE, "DELETE"),
    (libc::IN_MOVED_TO, "MOVED_TO"),
];

fn inotify(dir: &OsStr, want: &[OsString]) -> Verdict {
    let fd = match raw::inotify_init() {
        Ok(fd) => fd,
        Err(e) => return blocked("inotify_init1", &e),
    };
    let mask = EVENTS.iter().fold(0, |m, (bit, _)| m | bit);
    if let Err(e) = raw::inotify_add_watch(&fd, dir, mask) {
        return blocked("inotify_add_watch", &e);
    }
    eprintln!("lw-doors: watching");
    let mut file = std::fs::File::from(fd);
    let mut seen: Vec<String> = Vec::new();
    let mut missing: Vec<String> = want
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = vec![0u8; 64 * 1024];
    while !missing.is_empty() {
        if Instant::now() > deadline {
            return Blocked(format!(
                "no event named {} within 10 s (seen: {})",
                missing.join(", "),
                seen.join(", ")
            ));
        }
        let n = match file.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(e) => return blocked("read events", &e),
        };
        // struct inotify_event { int wd; u32 mask; u32 cookie; u32 len; char name[len]; }
        let mut at = 0;
        while at + 16 <= n {
            let word = |i: usize| {
                let mut b = [0u8; 4];
                b.copy_from_slice(&buf[at + i..at + i + 4]);
                u32::from_ne_bytes(b)
            };
            let (mask, len) = (word(4), word(12) as usize);
            let name_bytes = &buf[at + 16..(at + 16 + len).min(n)];
            let end = name_bytes
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(name_bytes.len());
            let name = String::from_utf8_lossy(&name_bytes[..end]).into_owned();
            at += 16 + len;
            if name.is_empty() {
                continue;
            }
            for (bit, what) in EVENTS {
                if mask & bit != 0 {
                    let ev = format!("{what} {name}");
                    if !seen.contains(&ev) {
                        seen.push(ev);
                    }
                }
            }
            missing.retain(|m| *m != name);
        }
    }
    Escaped(format!(
        "inotify on {}: {}",
        Path::new(dir).display(),
        seen.join(", ")
    ))
}

fn read_needle(path: &Path, needle: &OsStr) -> Verdict {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return blocked("read", &e),
    };
    let text = String::from_utf8_lossy(&bytes).replace('\0', " ");
    if text.contains(needle.to_string_lossy().as_ref()) {
        Escaped(format!("read {}: {}", path.display(), text.trim_end()))
    } else {
        Blocked(format!("read {}: no {:?} in it", path.display(), needle))
    }
}

fn chmod(path: &Path, mode: &OsStr) -> Verdict {
    let Some(mode) = mode.to_str().and_then(|m| u32::from_str_radix(m, 8).ok()) else {
        usage("bad OCTAL")
    };
    // `set_permissions` is chmod(2) on the path.
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        return blocked("chmod", &e);
    }
    match std::fs::metadata(path) {
        Ok(m) => Escaped(format!("chmod {}: mode {:o}", path.display(), m.mode())),
        Err(e) => blocked("stat", &e),
    }
}

fn chown(path: &Path, uid: i64, gid: i64) -> Verdict {
    let id = |n: i64| u32::try_from(n).ok();
    if let Err(e) = std::os::unix::fs::chown(path, id(uid), id(gid)) {
        return blocked("chown", &e);
    }
    match std::fs::metadata(path) {
        Ok(m) => Escaped(format!("chown {}: {}:{}", path.display(), m.uid(), m.gid())),
        Err(e) => blocked("stat", &e),
    }
}

fn utimes(path: &Path, secs: i64) -> Verdict {
    use nix::sys::stat::{utimensat, UtimensatFlags};
    use nix::sys::time::TimeSpec;
    let t = TimeSpec::new(secs, 0);
    if let Err(e) = utimensat(
        nix::fcntl::AT_FDCWD,
        path,
        &t,
        &t,
        UtimensatFlags::NoFollowSymlink,
    ) {
        return Blocked(format!("utimensat: {e:?}"));
    }
    match std::fs::metadata(path) {
        Ok(m) => Escaped(format!("utimes {}: mtime {}", path.display(), m.mtime())),
        Err(e) => blocked("stat", &e),
    }
}

fn setxattr(path: &Path, name: &OsStr, value: &OsStr) -> Verdict {
    use std::os::unix::ffi::OsStrExt;
    match raw::setxattr(path.as_os_str(), name, value.as_bytes()) {
        Ok(()) => Escaped(format!(
            "setxattr {} {}",
            path.display(),
            name.to_string_lossy()
        )),
        Err(e) => blocked("setxattr", &e),
    }
}

fn getxattr(path: &Path, name: &OsStr) -> Verdict {
    match raw::getxattr(path.as_os_str(), name) {
        Ok(v) => Escaped(String::from_utf8_lossy(&v).into_owned()),
        Err(e) => blocked("getxattr", &e),
    }
}

fn pause() -> ! {
    loop {
        nix::unistd::pause();
    }
}

/// Uses up the user's inotify watches (`fs.inotify.max_user_watches`): watches every entry
/// of `dir` from one instance after another until the kernel says ENOSPC (or no instance is
/// left), writes `done` to `marker`, and waits to be killed, holding them.
fn exhaust_inotify(dir: &Path, marker: &Path) -> ! {
    let names: Vec<OsString> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| dir.join(e.file_name()).into_os_string())
                .collect()
        })
        .unwrap_or_default();
    let mut held = Vec::new();
    'all: loop {
        let Ok(fd) = raw::inotify_init() else { break };
        for n in &names {
            if raw::inotify_add_watch(&fd, n, libc::IN_ATTRIB).is_err() {
                held.push(fd);
                break 'all;
            }
        }
        held.push(fd);
    }
    if let Err(e) = std::fs::write(marker, "done\n") {
        eprintln!("lw-doors: {}: {e}", marker.display());
    }
    pause()
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some((sub, rest)) = args.split_first() else {
        usage("no subcommand")
    };
    let p = |i: usize, what: &str| Path::new(arg(rest, i, what)).to_path_buf();
    let verdict = match sub.to_string_lossy().as_ref() {
        "pause" => pause(),
        "exhaust-inotify" => exhaust_inotify(&p(0, "DIR"), &p(1, "MARKER")),
        "list" => list(&p(0, "DIR")),
        "inotify" => {
            if rest.len() < 2 {
                usage("inotify DIR NAME…")
            }
            inotify(&rest[0], &rest[1..])
        }
        "read" => read_needle(&p(0, "PATH"), arg(rest, 1, "NEEDLE")),
        "chmod" => chmod(&p(0, "PATH"), arg(rest, 1, "OCTAL")),
        "chown" => chown(
            &p(0, "PATH"),
            num(arg(rest, 1, "UID"), "UID"),
            num(arg(rest, 2, "GID"), "GID"),
        ),
        "utimes" => utimes(&p(0, "PATH"), num(arg(rest, 1, "SECS"), "SECS")),
        "setxattr" => setxattr(&p(0, "PATH"), arg(rest, 1, "NAME"), arg(rest, 2, "VALUE")),
        "getxattr" => getxattr(&p(0, "PATH"), arg(rest, 1, "NAME")),
        other => usage(&format!("unknown subcommand {other}")),
    };
    match verdict {
        Escaped(d) => {
            println!("ESCAPED {d}");
            exit(0)
        }
        Blocked(d) => {
            println!("BLOCKED {d}");
            exit(1)
        }
    }
}
