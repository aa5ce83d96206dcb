//! landwall's library: everything the shim, the admin CLI and the drain daemon share.
//!
//! The flow of a launch is parse → validate → apply:
//! [`config`] reads and validates the TOML; [`worktree`] finds where the agent works;
//! [`agent`] finds the real binary; [`policy`] turns those into grants and an
//! [`env`]ironment allowlist; [`launch`] drops [`caps`], sets no_new_privs, puts up the
//! Landlock [`wall`] and execs. Raw system calls live in [`sys`] and nowhere else.
//!
//! Every error is typed here and printed once, by the binaries, with an exit status from
//! [`exit`].

pub mod agent;
pub mod agentstate;
pub mod caps;
pub mod config;
pub mod env;
pub mod gitconfig;
pub mod gitlinks;
pub mod launch;
pub mod limits;
pub mod linkcache;
pub mod ns;
pub mod objects;
pub mod plan;
pub mod policy;
pub mod profile;
pub mod protect;
pub mod realpath;
pub mod record;
pub mod seccomp;
pub mod spool;
pub mod sys;
#[cfg(test)]
mod testutil;
pub mod wall;
pub mod watcher;
pub mod worktree;

use std::io;
use std::path::PathBuf;

/// Reads all of `file` into a string with room for `capacity` bytes first, without the
/// `statx` and `lseek` that `File`'s own `read_to_string` spends asking for the size: the
/// configuration, `.git` and `commondir` are read on every launch.
pub(crate) fn read_text(file: &mut std::fs::File, capacity: usize) -> io::Result<String> {
    use std::io::Read;
    let mut text = String::with_capacity(capacity);
    file.take(u64::MAX).read_to_string(&mut text)?;
    Ok(text)
}

/// Reads a file the agent may have put anything at, as a regular file only: without
/// following a final symbolic link, without blocking on a FIFO put at its name (a reader
/// blocked there for good sweeps nothing more), and at most `max` bytes. A link or anything
/// but a regular file is `InvalidData`; more than `max` bytes is `FileTooLarge`; nothing
/// there is `NotFound`.
pub fn read_regular(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    read_file(path, max, libc::O_NOFOLLOW)
}

/// [`read_regular`], a final symbolic link followed (for files outside the agent's reach
/// that may be links, as dotfiles often are; a FIFO is still not waited on).
pub fn read_regular_followed(path: &std::path::Path, max: u64) -> io::Result<Vec<u8>> {
    read_file(path, max, 0)
}

fn read_file(path: &std::path::Path, max: u64, flags: i32) -> io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => {
                io::Error::new(io::ErrorKind::InvalidData, "it is a symbolic link")
            }
            _ => e,
        })?;
    if !file.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "it is not a regular file",
        ));
    }
    let mut bytes = Vec::with_capacity(256);
    (&mut file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("it is larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}

/// 64 bits no other process can predict (the standard library seeds `RandomState` from the
/// OS), mixed with `n`: the names things are set aside under, which the agent must not be
/// able to take first.
pub fn random_u64(n: u32) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(n);
    h.finish()
}

/// `chmod` of exactly what `fd` (any descriptor, `O_PATH` too) is.
pub(crate) fn chmod_fd(fd: &std::os::fd::OwnedFd, mode: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::PermissionsExt;
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// `f`, run again with the owner's `need` rights given back to the directory `dir` (any
/// descriptor of it) where `f` was refused them (`EACCES`), then its mode as it was. The
/// agent may `chmod` a directory it owns (Landlock does not refuse it) to keep the watcher,
/// which holds no capability, from looking: what the watcher cannot read it would have to
/// take for hostile, the user's own files in it too (found by review).
pub(crate) fn as_owner<T>(
    dir: &std::os::fd::OwnedFd,
    need: u32,
    mut f: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    match f() {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let st = nix::sys::stat::fstat(dir)?;
            let mode = st.st_mode & 0o7777;
            if st.st_uid != nix::unistd::geteuid().as_raw() || mode & need == need {
                return Err(e);
            }
            chmod_fd(dir, mode | need)?;
            let again = f();
            chmod_fd(dir, mode)?;
            again
        }
        other => other,
    }
}

/// Renames `name` in `dir` aside to `<prefix>.landwall-swept-<pid>-<random>`, never over
/// anything, and returns the new name: under it no program reads what was there, and
/// nothing is lost. Random, so that the agent (or a job) cannot have taken every name it
/// will be given; tried with 64 names. A prefix too long for that to make a name the file
/// system takes is cut to [`ASIDE_PREFIX_MAX`] bytes (found by review: an agent's file
/// named to 243 bytes could not be set aside, ENAMETOOLONG, and stayed).
pub fn rename_aside(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    prefix: &std::ffi::OsStr,
) -> io::Result<std::ffi::OsString> {
    rename_aside_into(dir, name, dir, prefix)
}

/// The longest prefix [`rename_aside`] keeps: with `.landwall-swept-`, a pid of up to ten
/// digits, `-` and sixteen hex digits (44 bytes), a name of at most 255 bytes.
pub const ASIDE_PREFIX_MAX: usize = 255 - 44;

/// [`rename_aside`] into the directory `to`.
pub fn rename_aside_into(
    dir: std::os::fd::BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    to: std::os::fd::BorrowedFd<'_>,
    prefix: &std::ffi::OsStr,
) -> io::Result<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = prefix.as_bytes();
    let prefix = std::ffi::OsStr::from_bytes(&bytes[..bytes.len().min(ASIDE_PREFIX_MAX)]);
    let mut last = io::Error::from_raw_os_error(libc::EEXIST);
    for n in 0..64u32 {
        let mut aside = prefix.to_os_string();
        aside.push(format!(
            ".landwall-swept-{}-{:016x}",
            std::process::id(),
            random_u64(n)
        ));
        match nix::fcntl::renameat2(
            dir,
            name,
            to,
            aside.as_os_str(),
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        ) {
            Ok(()) => return Ok(aside),
            Err(nix::errno::Errno::EEXIST) => last = io::Error::from_raw_os_error(libc::EEXIST),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last)
}

/// The documented exit statuses (the shim passes the agent's own status through once it
/// has exec'd; these are only ever landwall's).
pub mod exit {
    /// `landwall doctor` found that the shim cannot work on this machine.
    pub const DOCTOR_FAILED: i32 = 1;
    /// Bad command line (admin CLI).
    pub const USAGE: i32 = 2;
    /// Writing the answer failed (stdout closed or full).
    pub const OUTPUT: i32 = 74;
    /// The configuration, the worktree or a configured path is wrong: fix the input.
    pub const CONFIG: i32 = 78;
    /// The wall could not go up (no Landlock, ABI too old, a layer too many, capabilities,
    /// no_new_privs, descriptors): mostly properties of the system, so an unchanged retry
    /// fails the same way (`landwall doctor` says which).
    pub const WALL: i32 = 100;
    /// The real agent was found but could not be executed.
    pub const EXEC: i32 = 126;
    /// No real agent was found.
    pub const NOT_FOUND: i32 = 127;
}

/// Any reason a launch did not happen.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad command-line input (admin CLI).
    #[error("{0}")]
    Usage(String),
    /// Writing output failed.
    #[error("writing output: {0}")]
    Output(#[source] io::Error),
    /// Configuration file.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// Worktree discovery.
    #[error(transparent)]
    Worktree(#[from] worktree::WorktreeError),
    /// Policy building (a required path).
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// Real agent lookup.
    #[error(transparent)]
    Agent(#[from] agent::AgentError),
    /// Marking inherited descriptors close-on-exec.
    #[error("marking inherited file descriptors close-on-exec: {0}")]
    Fds(#[source] io::Error),
    /// Capabilities.
    #[error(transparent)]
    Caps(#[from] caps::CapsError),
    /// no_new_privs.
    #[error("setting no_new_privs: {0}")]
    NoNewPrivs(#[source] io::Error),
    /// The process is (or could not be shown to be) single-threaded.
    #[error("the process must be single-threaded before Landlock is applied ({})", match (.0, .1) { (Some(n), _) => format!("{n} threads"), (_, Some(e)) => e.to_string(), _ => String::new() })]
    Threads(Option<usize>, Option<io::Error>),
    /// Landlock.
    #[error(transparent)]
    Wall(#[from] wall::WallError),
    /// The seccomp filter.
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    /// The private mount namespace (protected paths, a linked worktree's objects, the
    /// private /dev/pts) could not be set up.
    #[error(transparent)]
    Namespace(#[from] ns::NsError),
    /// The watcher (the protected paths' sweep, a linked worktree's quarantine) could not
    /// be started.
    #[error("starting the watcher (it sets aside protected paths the agent creates, and moves a linked worktree's new objects): {0}")]
    Watcher(#[source] io::Error),
    /// The check from inside after restricting found the wall not (fully) up.
    #[error("self-check after restricting: {0}; refusing to run the agent")]
    SelfCheck(String),
    /// execve failed.
    #[error("executing {}: {source}", path.display())]
    Exec {
        /// The program.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

impl Error {
    /// The documented exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::Output(_) => exit::OUTPUT,
            Error::Config(_) | Error::Worktree(_) | Error::Policy(_) => exit::CONFIG,
            // A configuration this kernel cannot enforce as written (issue 14 asks for 78:
            // the fix is in the configuration or the kernel, not a broken wall).
            Error::Wall(wall::WallError::UnixUnsupported { .. }) => exit::CONFIG,
            Error::Agent(_) => exit::NOT_FOUND,
            Error::Fds(_)
            | Error::Caps(_)
            | Error::NoNewPrivs(_)
            | Error::Threads(..)
            | Error::Wall(_)
            | Error::Seccomp(_)
            | Error::Watcher(_)
            | Error::Namespace(_)
            | Error::SelfCheck(_) => exit::WALL,
            Error::Exec { source, .. } if source.kind() == io::ErrorKind::NotFound => {
                exit::NOT_FOUND
            }
            Error::Exec { .. } => exit::EXEC,
        }
    }
}
