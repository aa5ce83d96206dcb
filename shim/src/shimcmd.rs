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
//! finds it by PATH order and runs it as the real agent). A startup file that is a symlink
//! (a dotfile manager's) is edited where it points.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use landwall::agent::FileId;
use landwall::exit;
use landwall::plan::{self, var};

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
/// directory), 74 for a startup file that could not be read or written.
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
    let home = home(vars)?;
    let dir = shim_dir()?;
    let line = path_line(&dir).map_err(|why| Failure(exit::CONFIG, why))?;
    let zsh_user = var(vars, "SHELL")
        .and_then(|s| Path::new(s).file_name())
        .is_some_and(|n| n == "zsh");
    let mut report = String::new();
    for (name, when) in startup_files(zsh_user) {
        let path = home.join(name);
        let old = read(&path)?;
        let create = match when {
            When::Always => true,
            When::IfPresent => false,
        };
        let Some(old) = old.or_else(|| create.then(String::new)) else {
            continue;
        };
        let new = with_line(&old, &line);
        if new == old {
            report.push_str(&format!("{}: already has the line\n", path.display()));
        } else {
            write(&path, &new)?;
            report.push_str(&format!("{}: PATH line added\n", path.display()));
        }
    }
    report.push_str(&format!(
        "new shells find the shims in {} first (check: `command -v claude`)\n",
        dir.display()
    ));
    let native = home.join(".local/bin/claude");
    if native.exists() {
        report.push_str(&format!(
            "{} is left as it is: the shim runs it as the real claude\n",
            native.display()
        ));
    }
    Ok(report)
}

fn disable(vars: &plan::Vars) -> Result<String, Failure> {
    let home = home(vars)?;
    let mut report = String::new();
    for (name, _) in startup_files(true) {
        let path = home.join(name);
        let Some(old) = read(&path)? else { continue };
        let new = without_line(&old);
        if new != old {
            write(&path, &new)?;
            report.push_str(&format!("{}: PATH line removed\n", path.display()));
        }
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

fn home(vars: &plan::Vars) -> Result<PathBuf, Failure> {
    var(vars, "HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute() && h.is_dir())
        .ok_or_else(|| {
            Failure(
                exit::CONFIG,
                "$HOME is not set to an existing absolute directory; the startup files live there"
                    .into(),
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

fn read(path: &Path) -> Result<Option<String>, Failure> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes).map(Some).map_err(|_| {
            Failure(
                exit::OUTPUT,
                format!("{}: not UTF-8 text; edit it by hand", path.display()),
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure(
            exit::OUTPUT,
            format!("reading {}: {e}", path.display()),
        )),
    }
}

/// Replaces the file (the target of a symlink) atomically: a temporary file beside it with
/// the same mode, fsynced, renamed over it.
fn write(path: &Path, text: &str) -> Result<(), Failure> {
    let fail = |what: &str, p: &Path, e: io::Error| {
        Failure(exit::OUTPUT, format!("{what} {}: {e}", p.display()))
    };
    let target = match fs::canonicalize(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => path.to_path_buf(),
        Err(e) => return Err(fail("resolving", path, e)),
    };
    let mode = match fs::metadata(&target) {
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(fail("reading", &target, e)),
    };
    let dir = target.parent().unwrap_or(Path::new("/"));
    let name = target.file_name().unwrap_or(OsStr::new("startup-file"));
    let mut tmp_name = OsStr::new(".").to_os_string();
    tmp_name.push(name);
    tmp_name.push(format!(".landwall-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        if let Some(mode) = mode {
            f.set_permissions(fs::Permissions::from_mode(mode))?;
        }
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &target)
    })();
    result.map_err(|e| {
        if let Err(rm) = fs::remove_file(&tmp) {
            if rm.kind() != io::ErrorKind::NotFound {
                eprintln!("landwall: shim: leaving {}: {rm}", tmp.display());
            }
        }
        fail("writing", &target, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line() -> String {
        path_line(Path::new("/usr/lib/landwall/bin")).expect("line")
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
