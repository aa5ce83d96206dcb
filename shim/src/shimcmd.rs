//! `landwall shim enable --user` / `landwall shim disable --user`: one marked line in the
//! user's shell startup files that puts the shim directory first on PATH.
//!
//! The package's `/etc/profile.d/landwall.sh` puts the shim directory ahead of the system's
//! directories, but a user's own startup files run after it: Debian's `~/.profile` prepends
//! `~/.local/bin` (where Claude Code's native installer puts `claude`), npm users prepend
//! their global prefix. For them this command appends, as the *last* line of each startup
//! file, a line that puts the shim directory first again.
//!
//! Invariants: only lines carrying [`MARKER`] are ever added or removed, every other byte of
//! a file is kept; running either command twice changes nothing the second time; nothing
//! but these startup files is touched (in particular never `~/.local/bin/claude`: the shim
//! finds it by PATH order and runs it as the real agent).
//!
//! Whose files: those of the owner of `$HOME`, and only theirs. Run as root with another
//! user's `HOME` (as `sudo -E` and `su -m` leave it) that is the other user; anyone else
//! must own `$HOME`. A startup file is edited only if it is a regular file owned by the
//! home's owner. A symlinked one (a dotfile manager's `~/.bashrc` -> `~/dotfiles/bashrc`) is
//! edited where it points only if that is such a file inside the same home, in a directory
//! of the same owner; a link out of the home, to nothing or to someone else's file is
//! refused (it is how root would be made to write a file of root's or of a third user's).
//! Every name is looked up from a descriptor of the directory opened once, never through a
//! link (openat2 `RESOLVE_NO_SYMLINKS`; `/proc/self/fd/N/name` for what std opens by path),
//! and the file is checked on the descriptor it is read from. The new text goes into a
//! temporary file beside it (`O_EXCL`) that gets the old file's owner, group and mode
//! (`fchown`, `fchmod`; a new file gets the home's owner and group and 0644) and is renamed
//! over the old file, if that is still the one read. Every file is checked and read before
//! any is written, so a refusal changes nothing.

use std::ffi::{CString, OsString};
use std::fs::{self, File, Metadata};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use landwall::agent::FileId;
use landwall::exit;
use landwall::plan::{self, var};
use landwall::sys;

/// What marks the line as landwall's: a line containing it is ours to move or remove.
pub const MARKER: &str = "# landwall-shim-path";

/// The agent links the shim directory holds (for the check that it is landwall's).
const AGENTS: &[&str] = &["claude", "opencode", "codex"];

/// `landwall shim`.
#[derive(Debug, Args)]
pub struct ShimArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, Subcommand)]
enum Action {
    /// Put the shim directory first on PATH in your shell startup files: one marked line at
    /// the end of ~/.bashrc, of ~/.zshrc (if present, or if zsh is your shell), and of
    /// ~/.profile, ~/.bash_profile and ~/.bash_login where present.
    Enable(Scope),
    /// Remove the marked line from your shell startup files.
    Disable(Scope),
}

#[derive(Debug, Args)]
struct Scope {
    /// Your own startup files (required: system-wide, the package's
    /// /etc/profile.d/landwall.sh does it for every login shell).
    #[arg(long, required = true)]
    user: bool,
}

/// A failure with its exit status: 78 for what the user must fix (no `$HOME`, no shim
/// directory, a home or startup file that is not the user's to edit), 74 for a startup file
/// that could not be read or written.
struct Failure(i32, String);

/// Runs `landwall shim …`; returns the exit status.
pub fn run(vars: &plan::Vars, args: ShimArgs) -> i32 {
    let result = match args.action {
        Action::Enable(_) => enable(vars),
        Action::Disable(_) => disable(vars),
    };
    match result.and_then(|text| {
        let mut out = io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .map_err(|e| Failure(exit::OUTPUT, format!("writing output: {e}")))
    }) {
        Ok(()) => 0,
        Err(Failure(code, msg)) => {
            eprintln!("landwall: shim: {msg}");
            code
        }
    }
}

fn enable(vars: &plan::Vars) -> Result<String, Failure> {
    let home = open_home(vars)?;
    let dir = shim_dir()?;
    let line = path_line(&dir).map_err(|why| Failure(exit::CONFIG, why))?;
    let zsh_user = var(vars, "SHELL")
        .and_then(|s| Path::new(s).file_name())
        .is_some_and(|n| n == "zsh");
    let mut edits = Vec::new();
    for (name, when) in startup_files(zsh_user) {
        let (spot, old) = match find(&home, name)? {
            Entry::File(spot, old) => (spot, Some(old)),
            Entry::Missing(spot) if when == When::Always => (spot, None),
            Entry::Dangling(shown, to) if when == When::Always => {
                return Err(refuse(format!(
                    "{} is a symlink to {}, which does not exist: nothing was changed; create that file (a regular file of the home's owner, inside the home) or remove the link",
                    shown.display(),
                    to.display()
                )));
            }
            Entry::Missing(_) | Entry::Dangling(..) => continue,
        };
        let new = with_line(old.as_ref().map_or("", |o| o.text.as_str()), &line);
        edits.push((spot, old, new));
    }
    let mut report = String::new();
    for (spot, old, new) in &edits {
        if old.as_ref().is_some_and(|o| o.text == *new) {
            report.push_str(&format!("{}: already has the line\n", spot.shown.display()));
        } else {
            write(&home, spot, old.as_ref(), new)?;
            report.push_str(&format!("{}: PATH line added\n", spot.shown.display()));
        }
    }
    report.push_str(&format!(
        "new shells find the shims in {} first (check: `command -v claude`)\n",
        dir.display()
    ));
    let native = home.path.join(".local/bin/claude");
    if native.exists() {
        report.push_str(&format!(
            "{} is left as it is: the shim runs it as the real claude\n",
            native.display()
        ));
    }
    Ok(report)
}

fn disable(vars: &plan::Vars) -> Result<String, Failure> {
    let home = open_home(vars)?;
    let mut edits = Vec::new();
    for (name, _) in startup_files(true) {
        if let Entry::File(spot, old) = find(&home, name)? {
            let new = without_line(&old.text);
            if new != old.text {
                edits.push((spot, old, new));
            }
        }
    }
    let mut report = String::new();
    for (spot, old, new) in &edits {
        write(&home, spot, Some(old), new)?;
        report.push_str(&format!("{}: PATH line removed\n", spot.shown.display()));
    }
    if report.is_empty() {
        report.push_str("no startup file had the PATH line\n");
    }
    Ok(report)
}

/// Whether a startup file is created when missing or only edited when present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum When {
    Always,
    IfPresent,
}

/// The startup files, relative to `$HOME`. `~/.bashrc` is read by every interactive bash;
/// login shells read the first of `~/.bash_profile`, `~/.bash_login`, `~/.profile` (and
/// Debian's `~/.profile` prepends `~/.local/bin` *after* sourcing `~/.bashrc`, hence the
/// line there too); `~/.zshrc` is read last by interactive zsh.
fn startup_files(zsh_user: bool) -> [(&'static str, When); 5] {
    [
        (".bashrc", When::Always),
        (
            ".zshrc",
            if zsh_user {
                When::Always
            } else {
                When::IfPresent
            },
        ),
        (".profile", When::IfPresent),
        (".bash_profile", When::IfPresent),
        (".bash_login", When::IfPresent),
    ]
}

/// `$HOME`, open: every startup file is looked up from this descriptor, so a directory put
/// under the same name later is never written in.
struct Home {
    /// `$HOME` as given, for messages.
    path: PathBuf,
    /// Its real path when it was opened: where a symlink's target must be.
    real: PathBuf,
    dir: File,
    /// The home's owner (whose files these are) and group (a new file's).
    uid: u32,
    gid: u32,
}

impl Home {
    /// Where the startup file `name` of the home itself is written.
    fn spot(&self, name: &str) -> Result<Spot, Failure> {
        let dir = self
            .dir
            .try_clone()
            .map_err(|e| io_fail("opening", &self.path, e))?;
        Ok(Spot {
            shown: self.path.join(name),
            dir_path: self.path.clone(),
            dir,
            name: OsString::from(name),
        })
    }
}

/// Opens `$HOME`. Someone other than root may only edit a home of their own; for root the
/// home's owner is whose startup files these are.
fn open_home(vars: &plan::Vars) -> Result<Home, Failure> {
    let path = var(vars, "HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.is_dir())
        .ok_or_else(|| {
            Failure(
                exit::CONFIG,
                "$HOME is not set to an existing absolute directory; the startup files live there"
                    .into(),
            )
        })?;
    Home::open(path, plan::running_as_root())
}

impl Home {
    fn open(path: PathBuf, as_root: bool) -> Result<Home, Failure> {
        let dir = File::open(&path).map_err(|e| io_fail("opening", &path, e))?;
        let meta = dir.metadata().map_err(|e| io_fail("reading", &path, e))?;
        if !meta.is_dir() {
            return Err(refuse(format!(
                "$HOME ({}) is not a directory: nothing was changed; set HOME to your home",
                path.display()
            )));
        }
        if !as_root {
            let me = effective_uid().map_err(|e| io_fail("reading", Path::new(STATUS), e))?;
            if meta.uid() != me {
                return Err(refuse(format!(
                    "$HOME ({}) is owned by uid {}, not by you (uid {me}): nothing was changed; run this as that user, or with HOME set to your own home",
                    path.display(),
                    meta.uid()
                )));
            }
        }
        let real = fs::read_link(fd_path(&dir)).map_err(|e| io_fail("resolving", &path, e))?;
        Ok(Home {
            path,
            real,
            dir,
            uid: meta.uid(),
            gid: meta.gid(),
        })
    }
}

const STATUS: &str = "/proc/self/status";

/// This process's effective uid, the second field of the `Uid:` line of
/// `/proc/self/status` (std has no `geteuid`).
fn effective_uid() -> io::Result<u32> {
    let status = fs::read_to_string(STATUS)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                "no effective uid on its Uid: line",
            )
        })
}

/// The shim directory of this installation: `PREFIX/lib/landwall/bin` for a `landwall` in
/// `PREFIX/bin` (`/usr/lib/landwall/bin` from a package), holding links to this binary.
fn shim_dir() -> Result<PathBuf, Failure> {
    let exe = fs::canonicalize("/proc/self/exe")
        .map_err(|e| Failure(exit::CONFIG, format!("finding this executable: {e}")))?;
    let prefix = exe.parent().and_then(Path::parent).ok_or_else(|| {
        Failure(
            exit::CONFIG,
            format!("{} is not in a PREFIX/bin directory", exe.display()),
        )
    })?;
    let dir = prefix.join("lib/landwall/bin");
    let me =
        FileId::of(&exe).map_err(|e| Failure(exit::CONFIG, format!("{}: {e}", exe.display())))?;
    let links = AGENTS
        .iter()
        .filter(|a| FileId::of(&dir.join(a)).ok() == Some(me))
        .count();
    if links == 0 {
        return Err(Failure(
            exit::CONFIG,
            format!(
                "{} holds no agent link to {} (expected `claude`, `opencode`, `codex` there): install landwall with its package or `make install`",
                dir.display(),
                exe.display()
            ),
        ));
    }
    Ok(dir)
}

/// The marked line that puts `dir` first on PATH unless it is first already (so nested
/// shells do not grow PATH). POSIX sh, bash and zsh read it alike.
fn path_line(dir: &Path) -> Result<String, String> {
    let d = dir
        .to_str()
        .filter(|d| !d.contains(['\'', ':']) && !d.chars().any(char::is_control))
        .ok_or_else(|| {
            format!(
                "the shim directory {} cannot be written in a PATH line (it contains a quote, a colon, a control character or is not UTF-8)",
                dir.display()
            )
        })?;
    Ok(format!(
        "case \":$PATH:\" in ':{d}:'*) ;; *) PATH='{d}'${{PATH:+\":$PATH\"}}; export PATH ;; esac {MARKER} (added by `landwall shim enable --user`; `landwall shim disable --user` removes it)"
    ))
}

fn is_ours(line: &str) -> bool {
    line.contains(MARKER)
}

/// `text` without our lines, with `line` appended as the last line.
fn with_line(text: &str, line: &str) -> String {
    let mut out = without_line(text);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(line);
    out.push('\n');
    out
}

/// `text` without our lines; every other byte as it was.
fn without_line(text: &str) -> String {
    text.split_inclusive('\n').filter(|l| !is_ours(l)).collect()
}

/// A refusal: the home or a startup file is not this command's to edit.
fn refuse(msg: String) -> Failure {
    Failure(exit::CONFIG, msg)
}

/// A system call on `path` failed.
fn io_fail(what: &str, path: &Path, e: io::Error) -> Failure {
    Failure(exit::OUTPUT, format!("{what} {}: {e}", path.display()))
}

/// `/proc/self/fd/N`: a path the kernel resolves to the open directory itself, not by its
/// name, so `fd_path(d).join(name)` names `name` in `d` as the `*at` calls would.
fn fd_path(dir: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

/// Opens `rel` (no `..`) below `dir` for reading, refusing any symlink on the way.
fn open_below(dir: &File, rel: &Path) -> io::Result<File> {
    let c = CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the path"))?;
    // O_RDONLY (0): read, or hold a directory open.
    sys::open_no_symlinks(Some(dir.as_fd()), &c, 0).map(File::from)
}

/// A startup file as found, before anything is written.
enum Entry {
    /// No such name in the home: created there when it is needed.
    Missing(Spot),
    /// A symlink (shown as) to a target (as it reads) that does not exist: neither read nor
    /// created through.
    Dangling(PathBuf, PathBuf),
    /// A regular file of the home's owner, read from the descriptor it was checked on.
    File(Spot, Old),
}

/// Where a startup file is written: its directory, held open, and its name there.
struct Spot {
    /// What the user calls it (`$HOME/.bashrc`), for the report.
    shown: PathBuf,
    /// The directory's path, for messages.
    dir_path: PathBuf,
    dir: File,
    name: OsString,
}

/// The file a startup file's new text replaces, as it was read.
struct Old {
    dev: u64,
    ino: u64,
    uid: u32,
    gid: u32,
    mode: u32,
    text: String,
}

/// Finds the startup file `name` of `home`: missing, a dangling link, or a file of the
/// home's owner (read); refuses anything else.
fn find(home: &Home, name: &str) -> Result<Entry, Failure> {
    let shown = home.path.join(name);
    let here = fd_path(&home.dir).join(name);
    let lstat = match fs::symlink_metadata(&here) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Entry::Missing(home.spot(name)?))
        }
        Err(e) => return Err(io_fail("reading", &shown, e)),
    };
    if lstat.file_type().is_symlink() {
        return follow(home, name, &here);
    }
    let spot = home.spot(name)?;
    let old = read_checked(home, &spot, &lstat, &shown.display().to_string())?;
    Ok(Entry::File(spot, old))
}

/// A symlinked startup file (`here`, its name in the home): followed only to a regular file
/// of the home's owner inside the home, in a directory of theirs, opened again from the
/// home without following any link (a link changed since is refused, not followed).
fn follow(home: &Home, name: &str, here: &Path) -> Result<Entry, Failure> {
    let shown = home.path.join(name);
    let target = match fs::canonicalize(here) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let to = fs::read_link(here).map_err(|e| io_fail("reading", &shown, e))?;
            return Ok(Entry::Dangling(shown, to));
        }
        Err(e) => return Err(io_fail("resolving", &shown, e)),
    };
    let what = format!("{} (a symlink to {})", shown.display(), target.display());
    let Ok(rel) = target.strip_prefix(&home.real) else {
        return Err(refuse(format!(
            "{what} leads out of {}: nothing was changed; links are followed only to the home owner's files inside the home, so replace the link with a regular file of theirs",
            home.path.display()
        )));
    };
    let (Some(sub), Some(file)) = (rel.parent(), rel.file_name()) else {
        return Err(not_regular(&what));
    };
    let dir_path = home.real.join(sub);
    let dir = if sub.as_os_str().is_empty() {
        home.dir.try_clone()
    } else {
        open_below(&home.dir, sub)
    }
    .map_err(|e| io_fail("opening", &dir_path, e))?;
    let meta = dir
        .metadata()
        .map_err(|e| io_fail("reading", &dir_path, e))?;
    if !meta.is_dir() {
        return Err(changed(&what));
    }
    if meta.uid() != home.uid {
        return Err(refuse(format!(
            "{what}: its directory {} is owned by uid {}, not by uid {} who owns {}: nothing was changed; `chown {} {}` if it is theirs, or replace the link with a regular file",
            dir_path.display(),
            meta.uid(),
            home.uid,
            home.path.display(),
            home.uid,
            dir_path.display()
        )));
    }
    let lstat = fs::symlink_metadata(fd_path(&dir).join(file))
        .map_err(|e| io_fail("reading", &target, e))?;
    let spot = Spot {
        shown,
        dir_path,
        dir,
        name: file.to_os_string(),
    };
    let old = read_checked(home, &spot, &lstat, &what)?;
    Ok(Entry::File(spot, old))
}

/// Opens the file at `spot` without following a link, checks on the descriptor that it is
/// the regular file of the home's owner that `lstat` saw, and reads it. `what` names it.
fn read_checked(home: &Home, spot: &Spot, lstat: &Metadata, what: &str) -> Result<Old, Failure> {
    // Before opening: a FIFO or a device is never opened.
    if !lstat.file_type().is_file() {
        return Err(not_regular(what));
    }
    if lstat.uid() != home.uid {
        return Err(not_theirs(home, spot, what, lstat.uid()));
    }
    let path = spot.dir_path.join(&spot.name);
    let mut file = open_below(&spot.dir, Path::new(&spot.name)).map_err(|e| {
        Failure(
            exit::OUTPUT,
            format!("opening {what} without following links: {e}; nothing was changed"),
        )
    })?;
    let meta = file.metadata().map_err(|e| io_fail("reading", &path, e))?;
    if (meta.dev(), meta.ino()) != (lstat.dev(), lstat.ino()) || !meta.is_file() {
        return Err(changed(what));
    }
    if meta.uid() != home.uid {
        return Err(not_theirs(home, spot, what, meta.uid()));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_fail("reading", &path, e))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        Failure(
            exit::OUTPUT,
            format!("{what}: not UTF-8 text; edit it by hand"),
        )
    })?;
    Ok(Old {
        dev: meta.dev(),
        ino: meta.ino(),
        uid: meta.uid(),
        gid: meta.gid(),
        mode: meta.mode() & 0o7777,
        text,
    })
}

fn not_regular(what: &str) -> Failure {
    refuse(format!(
        "{what} is not a regular file: nothing was changed; replace it with one, or remove it"
    ))
}

fn not_theirs(home: &Home, spot: &Spot, what: &str, owner: u32) -> Failure {
    refuse(format!(
        "{what} is owned by uid {owner}, not by uid {} who owns {}: nothing was changed; `chown {} {}` if it is theirs",
        home.uid,
        home.path.display(),
        home.uid,
        spot.dir_path.join(&spot.name).display()
    ))
}

fn changed(what: &str) -> Failure {
    refuse(format!(
        "{what} changed while landwall was editing it: it was left as it was; run the command again"
    ))
}

/// Puts `text` in place of the startup file at `spot` (`old`, or none yet): a temporary
/// file beside it (`O_EXCL`) gets the text and the old file's owner, group and mode (a new
/// file: the home's owner and group, 0644), is fsynced, and then renamed over the old file
/// if that is still the one read, or linked to the name if that is still free.
fn write(home: &Home, spot: &Spot, old: Option<&Old>, text: &str) -> Result<(), Failure> {
    let (uid, gid, mode) = old.map_or((home.uid, home.gid, 0o644), |o| (o.uid, o.gid, o.mode));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(&spot.name);
    tmp_name.push(format!(".landwall-{}", std::process::id()));
    let at = fd_path(&spot.dir);
    let (tmp, dest) = (at.join(&tmp_name), at.join(&spot.name));
    let shown_tmp = spot.dir_path.join(&tmp_name);
    let shown_dest = spot.dir_path.join(&spot.name);
    let what = spot.shown.display().to_string();
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| {
            Failure(
                exit::OUTPUT,
                format!(
                    "creating {} beside {}: {e}; nothing was changed (remove it if it is a leftover)",
                    shown_tmp.display(),
                    shown_dest.display()
                ),
            )
        })?;
    let result = (|| {
        let io = |e| io_fail("writing", &shown_tmp, e);
        f.write_all(text.as_bytes()).map_err(io)?;
        let ours = f.metadata().map_err(io)?;
        if (ours.uid(), ours.gid()) != (uid, gid) {
            std::os::unix::fs::fchown(&f, Some(uid), Some(gid)).map_err(|e| {
                Failure(
                    exit::OUTPUT,
                    format!(
                        "giving the new {} its owner {uid}:{gid}: {e}; it was left as it was (run this as root or as its owner)",
                        shown_dest.display()
                    ),
                )
            })?;
        }
        // After fchown, which clears set-id bits.
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io)?;
        f.sync_all().map_err(io)?;
        let same = |p: &Path, dev: u64, ino: u64| {
            fs::symlink_metadata(p).is_ok_and(|m| (m.dev(), m.ino()) == (dev, ino))
        };
        if !same(&tmp, ours.dev(), ours.ino()) {
            return Err(changed(&what));
        }
        match old {
            Some(o) => {
                if !same(&dest, o.dev, o.ino) {
                    return Err(changed(&what));
                }
                fs::rename(&tmp, &dest).map_err(|e| io_fail("replacing", &shown_dest, e))?;
            }
            None => {
                // linkat, not rename: never replaces a file that appeared meanwhile. Where
                // the file system has no hard links, rename if the name is still free.
                match fs::hard_link(&tmp, &dest) {
                    Ok(()) => {
                        fs::remove_file(&tmp).map_err(|e| io_fail("removing", &shown_tmp, e))?
                    }
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                        return Err(changed(&what))
                    }
                    Err(_) => {
                        if fs::symlink_metadata(&dest).is_ok() {
                            return Err(changed(&what));
                        }
                        fs::rename(&tmp, &dest).map_err(|e| io_fail("creating", &shown_dest, e))?;
                    }
                }
            }
        }
        spot.dir
            .sync_all()
            .map_err(|e| io_fail("syncing", &spot.dir_path, e))
    })();
    if result.is_err() {
        if let Err(rm) = fs::remove_file(&tmp) {
            if rm.kind() != io::ErrorKind::NotFound {
                eprintln!("landwall: shim: leaving {}: {rm}", shown_tmp.display());
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> String {
        path_line(Path::new("/usr/lib/landwall/bin")).expect("line")
    }

    /// A scratch directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let root = std::env::temp_dir().join(format!(
                "landwall-shimcmd-{name}-{}-{n}",
                std::process::id()
            ));
            fs::create_dir_all(root.join("home")).expect("mkdir home");
            Scratch(fs::canonicalize(root).expect("canonicalize"))
        }
        fn home(&self) -> PathBuf {
            self.0.join("home")
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            if let Err(e) = fs::remove_dir_all(&self.0) {
                eprintln!("leaving {}: {e}", self.0.display());
            }
        }
    }

    fn as_root() -> bool {
        plan::running_as_root()
    }

    fn open(s: &Scratch) -> Home {
        match Home::open(s.home(), as_root()) {
            Ok(h) => h,
            Err(Failure(_, msg)) => panic!("{msg}"),
        }
    }

    fn refusal(r: Result<Entry, Failure>) -> String {
        match r {
            Err(Failure(code, msg)) => {
                assert_eq!(code, exit::CONFIG, "{msg}");
                assert!(!msg.contains('\n'), "{msg}");
                msg
            }
            Ok(_) => panic!("not refused"),
        }
    }

    fn write_all(home: &Home, name: &str) {
        match find(home, name) {
            Ok(Entry::File(spot, old)) => {
                let new = with_line(&old.text, &line());
                assert!(write(home, &spot, Some(&old), &new).is_ok());
            }
            Ok(Entry::Missing(spot)) => {
                assert!(write(home, &spot, None, &with_line("", &line())).is_ok());
            }
            Ok(Entry::Dangling(..)) => panic!("{name}: dangling"),
            Err(Failure(_, msg)) => panic!("{msg}"),
        }
    }

    #[test]
    fn effective_uid_is_the_owner_of_what_this_process_creates() {
        let s = Scratch::new("euid");
        fs::write(s.0.join("mine"), "").expect("write");
        let owner = fs::metadata(s.0.join("mine")).expect("stat").uid();
        assert_eq!(effective_uid().expect("euid"), owner);
    }

    #[test]
    fn rewriting_keeps_owner_group_and_mode_and_new_files_are_the_homes_owners() {
        let s = Scratch::new("owner");
        let home = s.home();
        let bashrc = home.join(".bashrc");
        fs::write(&bashrc, "alias ll='ls -l'\n").expect("write");
        fs::set_permissions(&bashrc, fs::Permissions::from_mode(0o640)).expect("chmod");
        // As root: another owner for the home and the file, and a group of the file's own.
        let (uid, home_gid, file_gid) = if as_root() {
            std::os::unix::fs::chown(&home, Some(4242), Some(4243)).expect("chown home");
            std::os::unix::fs::chown(&bashrc, Some(4242), Some(4244)).expect("chown file");
            (4242, 4243, 4244)
        } else {
            let m = fs::metadata(&bashrc).expect("stat");
            (m.uid(), fs::metadata(&home).expect("stat").gid(), m.gid())
        };
        let h = open(&s);
        let ino = fs::metadata(&bashrc).expect("stat").ino();
        write_all(&h, ".bashrc");
        write_all(&h, ".zshrc");
        let m = fs::symlink_metadata(&bashrc).expect("stat");
        assert_ne!(m.ino(), ino, "replaced by rename");
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (uid, file_gid, 0o640)
        );
        assert_eq!(
            fs::read_to_string(&bashrc).expect("read"),
            format!("alias ll='ls -l'\n{}\n", line())
        );
        let m = fs::symlink_metadata(home.join(".zshrc")).expect("stat");
        assert_eq!(
            (m.uid(), m.gid(), m.mode() & 0o7777),
            (uid, home_gid, 0o644)
        );
        let left: Vec<_> = fs::read_dir(&home)
            .expect("ls")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
    }

    #[test]
    fn links_are_followed_only_to_the_owners_files_inside_the_home() {
        let s = Scratch::new("links");
        let home = s.home();
        fs::create_dir_all(home.join("dotfiles")).expect("mkdir");
        fs::write(home.join("dotfiles/bashrc"), "# mine\n").expect("write");
        std::os::unix::fs::symlink("dotfiles/bashrc", home.join(".bashrc")).expect("link");
        fs::write(s.0.join("outside"), "# not the home's\n").expect("write");
        std::os::unix::fs::symlink("../outside", home.join(".profile")).expect("link");
        std::os::unix::fs::symlink("dotfiles/none", home.join(".zshrc")).expect("link");
        std::os::unix::fs::symlink("dotfiles", home.join(".bash_login")).expect("link");
        std::os::unix::fs::symlink("outlink", home.join(".bash_profile")).expect("link");
        std::os::unix::fs::symlink(s.0.join("outside"), home.join("outlink")).expect("link");
        let h = open(&s);

        match find(&h, ".bashrc") {
            Ok(Entry::File(spot, old)) => {
                assert_eq!(spot.dir_path, home.join("dotfiles"));
                assert_eq!(spot.name, "bashrc");
                assert_eq!(old.text, "# mine\n");
            }
            _ => panic!(".bashrc is not followed"),
        }
        write_all(&h, ".bashrc");
        assert!(fs::symlink_metadata(home.join(".bashrc"))
            .expect("lstat")
            .file_type()
            .is_symlink());
        assert!(fs::read_to_string(home.join("dotfiles/bashrc"))
            .expect("read")
            .ends_with(&format!("{}\n", line())));

        let msg = refusal(find(&h, ".profile"));
        assert!(
            msg.contains(".profile (a symlink to ") && msg.contains("leads out of"),
            "{msg}"
        );
        let msg = refusal(find(&h, ".bash_profile"));
        assert!(msg.contains("leads out of"), "{msg}");
        let msg = refusal(find(&h, ".bash_login"));
        assert!(msg.contains("is not a regular file"), "{msg}");
        assert!(matches!(find(&h, ".zshrc"), Ok(Entry::Dangling(..))));
        assert_eq!(
            fs::read_to_string(s.0.join("outside")).expect("read"),
            "# not the home's\n"
        );
    }

    #[test]
    fn a_file_or_directory_of_someone_else_is_refused() {
        if !as_root() {
            eprintln!("skipped: needs root to give files away");
            return;
        }
        let s = Scratch::new("others");
        let home = s.home();
        fs::write(home.join(".bashrc"), "# root's\n").expect("write");
        fs::create_dir_all(home.join("dotfiles")).expect("mkdir");
        fs::write(home.join("dotfiles/profile"), "# theirs\n").expect("write");
        std::os::unix::fs::symlink("dotfiles/profile", home.join(".profile")).expect("link");
        std::os::unix::fs::chown(&home, Some(4242), Some(4242)).expect("chown");
        std::os::unix::fs::chown(home.join("dotfiles/profile"), Some(4242), None).expect("chown");
        let h = open(&s);
        let msg = refusal(find(&h, ".bashrc"));
        assert!(msg.contains("is owned by uid 0, not by uid 4242"), "{msg}");
        let msg = refusal(find(&h, ".profile"));
        assert!(
            msg.contains("its directory") && msg.contains("is owned by uid 0"),
            "{msg}"
        );
        // Someone who is not root may not edit a home that is not theirs (here uid 0, and
        // the home is uid 4242's).
        let msg = match Home::open(home.clone(), false) {
            Err(Failure(code, msg)) => {
                assert_eq!(code, exit::CONFIG);
                msg
            }
            Ok(_) => panic!("uid 4242's home opened for uid 0, not as root"),
        };
        assert!(msg.contains("not by you"), "{msg}");
        assert_eq!(
            fs::read_to_string(home.join(".bashrc")).expect("read"),
            "# root's\n"
        );
    }

    #[test]
    fn enabling_appends_one_line_and_is_idempotent() {
        let old = "export PATH=\"$HOME/.local/bin:$PATH\"\nalias ll='ls -l'";
        let once = with_line(old, &line());
        assert_eq!(once, format!("{old}\n{}\n", line()));
        assert_eq!(with_line(&once, &line()), once);
        assert_eq!(with_line("", &line()), format!("{}\n", line()));
    }

    #[test]
    fn enabling_moves_the_line_to_the_end() {
        let old = format!("a\n{}\nexport PATH=$HOME/.local/bin:$PATH\n", line());
        let new = with_line(&old, &line());
        assert_eq!(
            new,
            format!("a\nexport PATH=$HOME/.local/bin:$PATH\n{}\n", line())
        );
    }

    #[test]
    fn disabling_removes_only_marked_lines() {
        let old = format!("a\n{}\nb # landwall mentioned\n", line());
        assert_eq!(without_line(&old), "a\nb # landwall mentioned\n");
        assert_eq!(without_line("a\nb"), "a\nb");
    }

    #[test]
    fn the_line_refuses_what_it_cannot_quote() {
        for bad in ["/opt/it's/bin", "/opt/a:b/bin", "/opt/a\nb/bin"] {
            assert!(path_line(Path::new(bad)).is_err(), "{bad:?}");
        }
        let l = line();
        assert!(l.starts_with("case \":$PATH:\" in ':/usr/lib/landwall/bin:'*)"));
        assert!(!l.contains('\n'));
        assert!(is_ours(&l));
    }
}
