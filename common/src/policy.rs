//! The policy: which paths the agent may write, which it may only read and execute, and the
//! environment it gets. Built fresh for every launch by a pure function of its inputs.
//!
//! Invariants of a [`Policy`]: every rule's path is a real path (symlinks resolved) that
//! existed when it was built; no rule is redundant (a path already covered by an ancestor
//! with at least the same access is dropped); everything not covered is denied.

use std::borrow::Cow;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use crate::config::{Config, DenyPattern, HomeMode, Network};
use crate::env::EnvPolicy;
use crate::linkcache::{Key, LinkCache};
use crate::profile;
use crate::realpath::{EntryKind as Kind, Listing, Resolver};
use crate::worktree::{is_system_directory, GitLayout, Worktree};

/// What a rule grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// List the directory's entries, nothing else: the parent of a denied path (Landlock
    /// has no deny rule, so its other entries are granted one by one instead).
    ListOnly,
    /// Read files, list directories, execute.
    ReadOnly,
    /// Everything Landlock handles on files and directories, including REFER (git renames
    /// across directories) and TRUNCATE, but not device ioctls.
    ReadWrite,
    /// [`Access::ReadWrite`] plus device ioctls (terminal control): for `/dev`.
    Device,
}

impl Access {
    /// Whether this grants writing.
    pub fn writes(self) -> bool {
        self >= Access::ReadWrite
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` so that `{:<17}` columns line up.
        f.pad(match self {
            Access::ListOnly => "list-only",
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
            Access::Device => "read-write+ioctl",
        })
    }
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Real path of the file or directory; the grant covers everything beneath it.
    pub path: PathBuf,
    /// What is granted.
    pub access: Access,
    /// Whether `path` is a directory (file rules can only carry file rights).
    pub is_dir: bool,
    /// Why the rule exists, for `landwall policy` and `landwall check`.
    pub reason: Cow<'static, str>,
}

/// A path that had to exist and does not.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// A required path could not be resolved.
    #[error("{} ({reason}): {source}; create it or remove it from the configuration", path.display())]
    Required {
        /// The path as configured.
        path: PathBuf,
        /// Where it came from.
        reason: String,
        /// Why it could not be resolved.
        source: io::Error,
    },
    /// The command-bearing keys of the agent's `.claude.json` could not be made the user's
    /// ([`crate::agentstate`]).
    #[error("{}: {source}; the MCP servers Claude Code reads there must be those of {}, and could not be made so: repair or remove the file", path.display(), user.display())]
    ClaudeJson {
        /// The agent's copy.
        path: PathBuf,
        /// The user's own.
        user: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A grant would reach a path no launch may be given (the drain's spool, the system
    /// configuration): refused whole, never trimmed, so that what runs is what was asked.
    #[error("refusing to grant {} {access} ({reason}): it would expose {what} {}; {fix}", rule.display(), off.display())]
    OffLimits {
        /// The grant's path.
        rule: PathBuf,
        /// What it would grant.
        access: Access,
        /// Where the grant came from.
        reason: String,
        /// What it would expose.
        what: String,
        /// The off-limits path.
        off: PathBuf,
        /// What to do about it.
        fix: &'static str,
    },
    /// The per-user configuration widens the wall, and the agent could rewrite it.
    #[error("the per-user configuration {} sets {keys}, which widen the wall, but the agent can rewrite that file (it lies in the writable grant {}): move those settings to the system configuration, or drop home = \"open\"", path.display(), rule.display())]
    AgentWritableConfig {
        /// The per-user file.
        path: PathBuf,
        /// Its widening keys.
        keys: String,
        /// The grant that makes it writable.
        rule: PathBuf,
    },
    /// The per-user file widens the wall, and nothing shows that no agent wrote it.
    #[error("the per-user configuration {} sets {keys}, which widen the wall, but {why}, so an agent could have written it in an earlier launch (before home was strict, or before a deny of its directory existed); {fix}", path.display())]
    UserConfigNotVouched {
        /// The per-user file.
        path: PathBuf,
        /// Its widening keys.
        keys: String,
        /// Who owns it, or how it is writable.
        why: String,
        /// What to do.
        fix: String,
    },
    /// The per-user file widens the wall and is reached through a symlink the agent could
    /// have made or can repoint, or it changed while it was being judged.
    #[error("the per-user configuration {} sets {keys}, which widen the wall, but {why}: the agent could have put it there; move those settings to the system configuration, or replace the link with the file itself where the agent cannot write", path.display())]
    AgentLinkedConfig {
        /// The per-user file.
        path: PathBuf,
        /// Its widening keys.
        keys: String,
        /// What is wrong.
        why: String,
    },
    /// An agent's state directory under the private or read-only home is a symlink.
    #[error("{} is a symbolic link (to {}): an agent's state directory is granted only as the plain directory it is (an agent could have made the link under an open home); replace the link with the directory, or grant its target in the system configuration's `writable`", path.display(), target.display())]
    StateLink {
        /// The state directory (or the component of it that is a link).
        path: PathBuf,
        /// Where the link points.
        target: PathBuf,
    },
    /// A socket named in `[unix]` cannot be granted as it is.
    #[error("the Unix socket {} ({at}): {why}", path.display())]
    UnixSocket {
        /// The path as configured.
        path: PathBuf,
        /// Where it was configured (key, file and line).
        at: String,
        /// What is wrong, and the fix.
        why: String,
    },
    /// A configured path resolves to something its key may not grant.
    #[error("the configured path {} ({at}) resolves to {}: {why}", path.display(), real.display())]
    ConfiguredReach {
        /// The path as configured.
        path: PathBuf,
        /// Where it was configured (key, file and line).
        at: String,
        /// What it resolves to.
        real: PathBuf,
        /// Why that is refused, and the fix.
        why: &'static str,
    },
    /// The real agent is found through a path or link the agent can change, and leads out of
    /// its writable grants.
    #[error("the real agent {} is found through {} where the agent can write ({}), and leads to {}: the agent could point it at another program, whose directory would be granted, before the next launch; install the agent where the agent cannot write, or set `real` in [agents.NAME] to its real path", path.display(), link.display(), grant.display(), real.display())]
    AgentRepointable {
        /// The path found on PATH (or configured).
        path: PathBuf,
        /// The path or link on the way that lies in a writable grant.
        link: PathBuf,
        /// That grant.
        grant: PathBuf,
        /// Where it leads now.
        real: PathBuf,
    },
    /// A configured path goes through a symlink inside a writable grant.
    #[error("the configured path {} ({at}) goes through a symbolic link (it is {}) where the agent can write ({}), so the agent could point it anywhere before the next launch; name the real path in the configuration, or keep the path out of writable places", path.display(), real.display(), grant.display())]
    ConfiguredLink {
        /// The path as configured.
        path: PathBuf,
        /// Where it was configured (key, file and line).
        at: String,
        /// Its real path now.
        real: PathBuf,
        /// The writable grant it lies in.
        grant: PathBuf,
    },
    /// A protected path cannot be protected (a link, a special file).
    #[error(transparent)]
    Protected(#[from] crate::protect::ProtectError),
    /// A git dir named by the worktree's `.git` holds `$HOME` or another grant.
    #[error("refusing the git dir {} named (directly or through commondir) by {}: it holds {what}; a git dir holds one repository's metadata only. Restore the file (`git worktree repair` from the main checkout)", dir.display(), dotgit.display())]
    GitDir {
        /// The git dir or common dir.
        dir: PathBuf,
        /// The `.git` file that led to it.
        dotgit: PathBuf,
        /// What it holds.
        what: String,
    },
    /// HOME points at a system directory, which would make the system writable.
    #[error("HOME is {}, a system directory: set HOME to your own home directory", path.display())]
    SystemHome {
        /// The resolved HOME.
        path: PathBuf,
    },
}

/// The complete policy for one launch.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The agent's name (argv[0] basename, or `--agent`).
    pub agent: String,
    /// The worktree it was built for.
    pub worktree: Worktree,
    /// The grants, writable first.
    pub rules: Vec<Rule>,
    /// The lowest Landlock ABI the launch accepts.
    pub min_abi: u32,
    /// The environment allowlist.
    pub env: EnvPolicy,
    /// Variables the launch sets when the user has not (strict home's state directories).
    pub env_defaults: Vec<(OsString, OsString)>,
    /// TCP port rules.
    pub network: Network,
    /// Paths carved out of the grants (`deny`, and the built-in ones for root).
    pub denied: Vec<PathBuf>,
    /// What this policy leaves open that the user should know (for `policy` and `doctor`).
    pub notes: Vec<String>,
    /// A linked worktree's object quarantine: where the agent's git writes new objects.
    pub quarantine: Option<Quarantine>,
    /// Whether a refused private mount namespace stops the launch (`protect_required`).
    pub protect_required: bool,
    /// The protected paths inside the writable grants: held in the launch's namespace, or
    /// swept when the agent exits ([`crate::protect`]).
    pub protection: crate::protect::Protection,
    /// The real agent's real path, which is exec'd (no link left to follow again).
    pub agent_exe: Option<PathBuf>,
    /// Which terminals the agent may open (`terminals`).
    pub terminals: crate::config::Terminals,
    /// Unix sockets outside the wall.
    pub unix: UnixPolicy,
    /// A drain job's own `/tmp` and `/dev/shm`: a fresh tmpfs of this many bytes on each,
    /// mounted in its namespace before the wall is built ([`crate::ns`]), gone with the
    /// job. `None` (the shim's launches): the host's, which their users expect.
    pub private_tmp: Option<u64>,
    /// Where a drain job's namespace is refused (a walled daemon, which may not mount; a
    /// unit that refuses namespaces): a directory of the job's own, made and removed by the
    /// daemon, granted in place of `/tmp` and `/dev/shm` and given as `TMPDIR`
    /// ([`Policy::with_own_tmp`]), so that jobs still share nothing there.
    pub own_tmp_dir: Option<PathBuf>,
}

/// Which Unix sockets outside the wall the agent may reach (`[unix]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnixPolicy {
    /// The named sockets that exist, as real paths: granted `RESOLVE_UNIX` (Landlock ABI 9).
    pub sockets: Vec<PathBuf>,
    /// Named sockets that were not there when the policy was built (nothing to grant; the
    /// launch still needs a kernel that can grant by path, since they were asked for).
    pub missing: Vec<PathBuf>,
    /// The escape hatch: every socket reachable (`[unix] allow_all`).
    pub allow_all: bool,
}

impl UnixPolicy {
    /// Whether the configuration names sockets (which only ABI 9 can grant one by one).
    pub fn names_sockets(&self) -> bool {
        !self.sockets.is_empty() || !self.missing.is_empty()
    }
}

/// The name of the quarantine directory inside a linked worktree's own git dir.
pub const QUARANTINE_DIR: &str = "landwall-objects";
/// Where, in the launch's mount namespace, the repository's real object store is seen
/// read-only (inside the worktree's own git dir).
pub const BASE_DIR: &str = "landwall-base";

/// A linked worktree's object quarantine. In the launch's private mount namespace
/// ([`crate::ns`]) `objects` shows the quarantine `dir`, so the agent's git writes new
/// objects there, and the real store is seen read-only at `base`, the quarantine's
/// alternate. A watcher started before the wall, outside it, moves each object into the
/// real store after checking its content against its name, so that objects that existed
/// before a launch cannot be changed by it and the agent's commits still reach the
/// repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantine {
    /// The linked worktree's own git dir, `<common>/worktrees/<id>`.
    pub git_dir: PathBuf,
    /// `<git dir>/landwall-objects`.
    pub dir: PathBuf,
    /// `<git dir>/landwall-base`.
    pub base: PathBuf,
    /// `<common dir>/objects`, the real store.
    pub objects: PathBuf,
}

impl Quarantine {
    /// The repository's common dir (the store's parent).
    pub fn common(&self) -> &Path {
        self.objects.parent().unwrap_or(Path::new("/"))
    }

    /// The quarantine of the linked worktree whose git dir is `git_dir`.
    pub fn of(git_dir: &Path, common: &Path) -> Quarantine {
        Quarantine {
            git_dir: git_dir.to_path_buf(),
            dir: git_dir.join(QUARANTINE_DIR),
            base: git_dir.join(BASE_DIR),
            objects: common.join("objects"),
        }
    }
}

/// A path no grant of `access` or more may reach, from above (a grant on an ancestor) or
/// from below (a grant inside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffLimits {
    /// The path (resolved leniently when the policy is built: it need not exist yet).
    pub path: PathBuf,
    /// What it is, for the error (`the drain's spool`).
    pub what: Cow<'static, str>,
    /// The weakest access refused: [`Access::ReadOnly`] for what must stay unseen,
    /// [`Access::ReadWrite`] for what must stay unchanged.
    pub access: Access,
}

impl OffLimits {
    /// The paths every launch keeps out of its grants, whatever the configuration says:
    /// the drain's spool (jobs' files, results and logs: a job that could write `queue/`
    /// would submit jobs of its own) and the system configuration file.
    pub fn defaults(config: &Config) -> Vec<OffLimits> {
        let spool = config
            .drain
            .spool
            .clone()
            .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_SPOOL));
        let mut v = vec![OffLimits {
            path: spool,
            what: "the drain's spool".into(),
            access: Access::ReadOnly,
        }];
        if let Some(system) = config.system_source() {
            v.push(OffLimits {
                path: system.to_path_buf(),
                what: "the system configuration".into(),
                access: Access::ReadWrite,
            });
        }
        v
    }
}

/// The git dirs granted for a linked worktree or submodule may not be `$HOME` or hold it,
/// nor hold any other grant: a forged layout could otherwise grant a whole tree as "git
/// metadata". (Worktree discovery already refused system directories and the worktree's
/// ancestors; this sees every grant.)
fn check_git_grants(
    rules: &[Rule],
    worktree: &Worktree,
    home: Option<&Path>,
) -> Result<(), PolicyError> {
    let GitLayout::Linked {
        git_dir,
        common_dir,
    } = &worktree.git
    else {
        return Ok(());
    };
    let home = home.and_then(|h| std::fs::canonicalize(h).ok());
    // The layout's own grants (see `build_with`).
    let mut own: Vec<PathBuf> = vec![git_dir.clone()];
    if let Some(c) = common_dir {
        own.push(c.clone());
        own.extend(["refs", "logs", "reftable", "objects"].map(|s| c.join(s)));
    }
    for dir in std::iter::once(git_dir).chain(common_dir) {
        let refuse = |what: String| PolicyError::GitDir {
            dir: dir.clone(),
            dotgit: worktree.root.join(".git"),
            what,
        };
        if let Some(home) = &home {
            if within(home, dir) {
                return Err(refuse(format!("$HOME ({})", home.display())));
            }
        }
        // Any other grant inside this one would be widened by it.
        let outsider = rules
            .iter()
            .find(|r| within(&r.path, dir) && !own.contains(&r.path));
        if let Some(r) = outsider {
            return Err(refuse(format!("{} ({})", r.path.display(), r.reason)));
        }
    }
    Ok(())
}

/// Checks the final rules against `off`: any rule on, above or below an off-limits path
/// with at least its access is an error. List-only rules only name entries.
fn check_off_limits(rules: &[Rule], off: &[OffLimits]) -> Result<(), PolicyError> {
    for o in off {
        let path = resolve_lenient(&o.path);
        for r in rules {
            if r.access == Access::ListOnly || r.access < o.access {
                continue;
            }
            if within(&path, &r.path) || within(&r.path, &path) {
                return Err(PolicyError::OffLimits {
                    rule: r.path.clone(),
                    access: r.access,
                    reason: r.reason.to_string(),
                    what: o.what.to_string(),
                    off: path,
                    fix: "remove what asks for it (the named file or configuration entry), or move the spool out of every grant",
                });
            }
        }
    }
    Ok(())
}

/// Everything the policy is built from.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    /// Agent name.
    pub agent: &'a str,
    /// The discovered worktree.
    pub worktree: Worktree,
    /// `$HOME`, if set.
    pub home: Option<&'a Path>,
    /// The real agent's path, so its install directory stays readable and executable.
    pub real_agent: Option<&'a Path>,
    /// The validated configuration.
    pub config: &'a Config,
    /// Whether the agent runs as root (root's own secrets in /etc are then denied).
    pub is_root: bool,
    /// Where the names of the scanned directories' links are kept between launches.
    pub link_cache: Option<&'a LinkCache>,
}

/// Read-only roots that must exist on any system landwall supports.
const REQUIRED_READ_ONLY: &[&str] = &["/usr", "/etc", "/proc"];
/// Read-only roots granted when present (merged-/usr links resolve into `/usr` and vanish
/// as redundant; toolchain roots such as `/go` and `/nix` are common in containers).
const OPTIONAL_READ_ONLY: &[&str] = &[
    "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sys", "/go", "/nix",
];
/// Read-only directories whose top-level symlinks are followed when they leave the grant
/// (`/etc/resolv.conf` → `/run/systemd/resolve/…`). Only one level: a deep walk of `/usr`
/// would cost milliseconds on every launch for links that all stay inside `/usr`.
const LINK_SCAN: &[&str] = &["/etc", "/opt"];
/// How many configured paths must share a directory before it is listed rather than each
/// path `lstat`ed ([`Builder::prelist`]).
const PRELIST_MIN: usize = 16;
/// A listed directory may take up to this many bytes per configured path in it.
const PRELIST_BYTES: u64 = 256;
/// Devices every agent needs, read-write without ioctls.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];
/// Terminals: read-write with ioctls (window size, raw mode, job control). `/dev/tty` is the
/// agent's own terminal whatever the setting; `/dev/ptmx` and `/dev/pts` are, by default
/// (`terminals = "own"`), a private instance the launch mounts ([`crate::ns`]), and are
/// left out of the wall where it cannot ([`Policy::without_pseudo_terminals`]).
const TERMINALS: &[&str] = &["/dev/tty", "/dev/ptmx", "/dev/pts"];
/// The paths of the pseudo-terminal multiplexer and its instance.
pub const PSEUDO_TERMINALS: &[&str] = &["/dev/ptmx", "/dev/pts"];
/// Denied to root by default: files that only root can read and that no agent needs.
pub const ROOT_DENY: &[&str] = &[
    "/etc/shadow*",
    "/etc/gshadow*",
    "/etc/sudoers*",
    "/etc/ssh/ssh_host_*_key",
];

/// Directory listings, each read at most once per build: the symlink scan, the deny
/// patterns and the carve-out all list `/etc`, which is the largest directory on the launch
/// path (reading it costs far more than the entries it holds, on ext4's hashed directories).
#[derive(Default)]
struct Listings {
    /// `None`: the directory could not be read.
    dirs: Vec<(PathBuf, Option<Rc<Listing>>)>,
    /// The `getdents64` buffer, shared by every listing (8 KiB holds all of a typical `/etc`).
    buf: Vec<u8>,
}

impl Listings {
    fn get(&mut self, dir: &Path) -> Option<Rc<Listing>> {
        if let Some((_, listing)) = self.dirs.iter().find(|(d, _)| d == dir) {
            return listing.clone();
        }
        if self.buf.is_empty() {
            self.buf = vec![0; 8192];
        }
        let listing = Listing::read(dir, &mut self.buf).ok().map(Rc::new);
        self.dirs.push((dir.to_path_buf(), listing.clone()));
        listing
    }
}

/// `dir` joined with one entry name, in one allocation.
fn child(dir: &Path, name: &OsStr) -> PathBuf {
    let mut path = PathBuf::with_capacity(dir.as_os_str().len() + 1 + name.len());
    path.push(dir);
    path.push(name);
    path
}

struct Builder {
    rules: Vec<Rule>,
    resolver: Resolver,
    listings: Listings,
    /// Configured grants: the path as written and its real path.
    configured: Vec<(PathBuf, PathBuf, String)>,
}

impl Builder {
    fn push(&mut self, path: PathBuf, is_dir: bool, access: Access, reason: Cow<'static, str>) {
        self.rules.push(Rule {
            path,
            access,
            is_dir,
            reason,
        });
    }

    /// Adds a grant that must exist: a missing path is an error naming where it came from.
    fn add(
        &mut self,
        path: &Path,
        access: Access,
        reason: impl Into<Cow<'static, str>>,
    ) -> Result<(), PolicyError> {
        let reason = reason.into();
        let (real, is_dir) =
            self.resolver
                .resolve(path)
                .map_err(|source| PolicyError::Required {
                    path: path.to_path_buf(),
                    reason: reason.to_string(),
                    source,
                })?;
        self.push(real, is_dir, access, reason);
        Ok(())
    }

    /// Adds a grant if the path exists; an absent optional root is simply not granted.
    fn add_if_present(
        &mut self,
        path: &Path,
        access: Access,
        reason: impl Into<Cow<'static, str>>,
    ) {
        if let Ok((real, is_dir)) = self.resolver.resolve(path) {
            self.push(real, is_dir, access, reason.into());
        }
    }

    /// Grants `common`/`name` read-write as the directory it is, never through a symlink:
    /// a common dir can be one the agent forged where it could write, and a `refs` or
    /// `objects` there that is a symlink would otherwise put the grant on whatever it names.
    /// `common` is a real path, so `common/name` is one too when it is a plain directory.
    fn add_git_subdir(
        &mut self,
        common: &Path,
        name: &str,
        required: bool,
        reason: impl Into<Cow<'static, str>>,
    ) -> Result<(), PolicyError> {
        let path = common.join(name);
        let refuse = |why: &str| PolicyError::Required {
            path: path.clone(),
            reason: "the repository's git dir".into(),
            source: io::Error::other(why.to_string()),
        };
        match path.symlink_metadata() {
            Ok(m) if m.file_type().is_dir() => {
                self.push(path, true, Access::ReadWrite, reason.into());
                Ok(())
            }
            Ok(m) if m.file_type().is_symlink() => {
                Err(refuse("it is a symbolic link, where git makes a directory"))
            }
            Ok(_) => Err(refuse("it is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound && !required => Ok(()),
            Err(e) => Err(PolicyError::Required {
                path: path.clone(),
                reason: "the repository's git dir".into(),
                source: e,
            }),
        }
    }

    /// Grants `home`/`rel` (an agent's state directory) read-write if it exists, as the
    /// plain directories it is made of: a component that is a symlink is refused. The home
    /// is the agent's to write under the writable home, so it could have made `~/.claude`
    /// a link to `/etc` (or to `~/.ssh`) for the next launch under the strict one.
    /// The private home's read-only entries that exist ([`profile::HOME_READ_ONLY`]), each
    /// only as the plain file or directory it is: an entry, or a directory on the way to it,
    /// that is a symbolic link is left out with a note (under an open home an agent could
    /// have made `~/.bun` a link to anything), and so is a file with more than one name (a
    /// hard link to a key or to `~/.bashrc`, made under an open home, would grant that inode
    /// under its other names too). A toolchain kept elsewhere is granted with `read_only`.
    fn add_home_read_only(&mut self, home: &Path, notes: &mut Vec<String>) {
        use std::os::unix::fs::MetadataExt;
        'entries: for (rel, why) in profile::HOME_READ_ONLY {
            let mut path = home.to_path_buf();
            let mut meta = None;
            for part in Path::new(rel).components() {
                path.push(part);
                match path.symlink_metadata() {
                    Ok(m) if m.file_type().is_symlink() => {
                        notes.push(format!(
                            "~/{rel} goes through a symbolic link (~/{}): not granted; grant what it leads to with read_only if the agent needs it",
                            path.strip_prefix(home).unwrap_or(&path).display()
                        ));
                        continue 'entries;
                    }
                    Ok(m) => meta = Some(m),
                    Err(_) => continue 'entries,
                }
            }
            let Some(meta) = meta else { continue };
            if !meta.is_dir() && meta.nlink() > 1 {
                notes.push(format!(
                    "~/{rel} has {} names (a hard link): not granted, since that would grant it under every name",
                    meta.nlink()
                ));
                continue;
            }
            self.push(
                path,
                meta.is_dir(),
                Access::ReadOnly,
                format!("$HOME: {why}").into(),
            );
        }
    }

    fn add_state_dir(
        &mut self,
        home: &Path,
        rel: &str,
        reason: impl Into<Cow<'static, str>>,
    ) -> Result<(), PolicyError> {
        let mut path = home.to_path_buf();
        for part in Path::new(rel).components() {
            path.push(part);
            match path.symlink_metadata() {
                Ok(m) if m.file_type().is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(PolicyError::StateLink {
                        path,
                        target: std::fs::read_link(home.join(rel)).unwrap_or_default(),
                    })
                }
                // A file, or nothing: no state directory to grant.
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => {
                    return Err(PolicyError::Required {
                        path,
                        reason: reason.into().into_owned(),
                        source: e,
                    })
                }
            }
        }
        self.push(path, true, Access::ReadWrite, reason.into());
        Ok(())
    }

    /// Adds a configured grant (`writable`, `read_only`, `devices`), remembering the path as
    /// written for [`Builder::check_configured`].
    /// `at` says where: the key, file and line ([`crate::config::Places`]).
    fn add_configured(
        &mut self,
        path: &Path,
        access: Access,
        at: String,
    ) -> Result<(), PolicyError> {
        // What the path resolves to is what is granted, and what is checked: `..` is refused
        // when the file is read, and a symbolic link may lead anywhere.
        let (real, _) = self
            .resolver
            .resolve(path)
            .map_err(|source| PolicyError::Required {
                path: path.to_path_buf(),
                reason: at.clone(),
                source,
            })?;
        let refuse = |why| {
            Err(PolicyError::ConfiguredReach {
                path: path.to_path_buf(),
                at: at.clone(),
                real: real.clone(),
                why,
            })
        };
        if real == Path::new("/") {
            return refuse("granting `/` would make the wall meaningless; name the directories the agent needs");
        }
        if access == Access::Device && (!real.starts_with("/dev") || real == Path::new("/dev")) {
            return refuse("`devices` grants devices under /dev with their ioctls, nothing else; grant other paths with `writable`");
        }
        self.add(path, access, at.clone())?;
        self.configured.push((path.to_path_buf(), real, at));
        Ok(())
    }

    /// A configured path that goes through a symlink where the agent can write is the
    /// agent's to point anywhere before the next launch (`read_only = ["/tmp/tools"]`,
    /// swapped for a link to a directory outside): refused. The real path is granted only
    /// when the path as written is that real path, or lies outside every writable grant.
    fn check_configured(&self) -> Result<(), PolicyError> {
        for (written, real, at) in &self.configured {
            let plain = lexical_join(Path::new("/"), written);
            if plain == *real {
                continue;
            }
            let writable = self
                .rules
                .iter()
                .filter(|r| r.access.writes())
                .find(|r| within(&plain, &r.path) || within(real, &r.path));
            if let Some(rule) = writable {
                return Err(PolicyError::ConfiguredLink {
                    path: written.clone(),
                    at: at.clone(),
                    real: real.clone(),
                    grant: rule.path.clone(),
                });
            }
        }
        Ok(())
    }

    /// The sockets `[unix]` names, each checked: it must be a socket (a directory would
    /// grant every socket below it), and neither it nor the path as written may lie in a
    /// writable grant, where the agent could put another socket (a link to tmux's, say) in
    /// its place before the next launch. One that does not exist is noted, not granted.
    fn unix_sockets(
        &mut self,
        config: &crate::config::UnixConfig,
        places: &crate::config::Places,
        notes: &mut Vec<String>,
    ) -> Result<UnixPolicy, PolicyError> {
        use std::os::unix::fs::FileTypeExt;
        let mut unix = UnixPolicy {
            allow_all: config.allow_all,
            ..UnixPolicy::default()
        };
        for written in &config.sockets {
            let refuse = |why: String| PolicyError::UnixSocket {
                path: written.clone(),
                at: places.describe(written, "sockets"),
                why,
            };
            let real = match self.resolver.resolve(written) {
                Ok((real, _)) => real,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    notes.push(format!(
                        "the socket {} named in [unix] is not there; start its server before the agent",
                        written.display()
                    ));
                    unix.missing.push(written.clone());
                    continue;
                }
                Err(e) => return Err(refuse(e.to_string())),
            };
            let plain = lexical_join(Path::new("/"), written);
            let writable = self
                .rules
                .iter()
                .filter(|r| r.access.writes())
                .find(|r| within(&plain, &r.path) || within(&real, &r.path));
            if let Some(rule) = writable {
                return Err(refuse(format!(
                    "it lies in {}, which the agent can write, so it could put another socket in its place before the next launch; keep the socket where the agent cannot write (under $XDG_RUNTIME_DIR, say)",
                    rule.path.display()
                )));
            }
            let meta = std::fs::symlink_metadata(&real).map_err(|e| refuse(e.to_string()))?;
            if !meta.file_type().is_socket() {
                return Err(refuse(format!(
                    "{} is not a socket; name each socket itself",
                    real.display()
                )));
            }
            unix.sockets.push(real);
        }
        Ok(unix)
    }

    fn covers(&self, path: &Path) -> bool {
        self.rules.iter().any(|r| within(path, &r.path))
    }

    /// Adds the real targets of top-level symlinks in `dir` whose target, as written, lies
    /// outside every grant (`/etc/resolv.conf` → `/run/…`).
    ///
    /// A link into a granted tree is left to that tree, as the links inside it are (they are
    /// not followed either): `/etc/localtime` → `/usr/share/zoneinfo/…` costs one `readlink`,
    /// not an `lstat` per component of the target and of every link after it (`/etc/mtab` →
    /// `/proc/mounts` → `self/mounts` → a fresh `/proc/<pid>`). Skipping a link can only
    /// grant less, never more.
    fn follow_links(&mut self, dir: &Path, cache: Option<&LinkCache>) {
        let Some(names) = self.link_names(dir, cache) else {
            return;
        };
        let mut targets = Vec::new();
        for name in names {
            // Not a link (any more, or a forged cache entry): `readlink` says EINVAL.
            let link = child(dir, OsStr::from_bytes(&name));
            let Ok(text) = std::fs::read_link(&link) else {
                continue;
            };
            if self.covers(&lexical_join(dir, &text)) {
                continue;
            }
            // `dir` is real, so its link resolves as `dir` joined with the link's text (the
            // resolver takes `..` physically): no second `readlink`.
            if let Ok((target, is_dir)) = self.resolver.resolve(&dir.join(&text)) {
                if !self.covers(&target) {
                    targets.push((target, link, is_dir));
                }
            }
        }
        targets.sort();
        for (target, link, is_dir) in targets {
            if self.covers(&target) {
                continue;
            }
            let reason = format!("target of {}", link.display());
            self.push(target, is_dir, Access::ReadOnly, reason.into());
        }
    }

    /// The names of `dir`'s entries that are symlinks: from the cache when it has them for
    /// `dir` as it is now, else from a listing (which the resolver then learns from, and the
    /// cache keeps). `None`: `dir` cannot be read.
    fn link_names(&mut self, dir: &Path, cache: Option<&LinkCache>) -> Option<Vec<Vec<u8>>> {
        // The key is taken before the listing: a change during it makes the key stale, never
        // the names.
        let cached = cache.and_then(|c| Key::of(dir).map(|key| (c, key)));
        if let Some((cache, key)) = &cached {
            if let Some(names) = cache.names(dir, key) {
                return Some(names);
            }
        }
        let entries = self.listings.get(dir)?;
        let names: Vec<&[u8]> = entries
            .entries
            .iter()
            .filter(|e| e.kind == Kind::Symlink)
            .map(|e| entries.name(e).as_bytes())
            .collect();
        // The listing says which entries are links: no `lstat` before each `readlink`.
        self.resolver.learn_links(dir, names.iter().copied());
        if let Some((cache, key)) = &cached {
            if let Err(e) = cache.store(dir, key, &names) {
                // Only the next launch's speed depends on it.
                log::debug!("link cache for {}: {e}", dir.display());
            }
        }
        Some(names.into_iter().map(<[u8]>::to_vec).collect())
    }

    /// Makes room in the resolver for `paths`, and lists each directory that holds many of
    /// them (at least [`PRELIST_MIN`]), once, so that the resolver knows its entries: one `getdents64` instead of an `lstat` per path.
    /// Not a directory much larger than what is asked of it (its size, which on the common
    /// file systems grows with its entries, above [`PRELIST_BYTES`] per path asked): listing
    /// ten thousand entries for twenty paths would cost more than it saves.
    fn prelist<'p>(&mut self, paths: impl Iterator<Item = &'p PathBuf>) {
        let paths: Vec<&PathBuf> = paths.collect();
        self.resolver.reserve(paths.len());
        let mut parents: Vec<&[u8]> = paths
            .iter()
            .filter(|p| p.is_absolute())
            .filter_map(|p| crate::realpath::parent_bytes(p.as_os_str().as_bytes()))
            .collect();
        parents.sort_unstable();
        for group in parents.chunk_by(|a, b| a == b) {
            if group.len() < PRELIST_MIN {
                continue;
            }
            let parent = Path::new(OsStr::from_bytes(group[0]));
            let Ok((real, true)) = self.resolver.resolve(parent) else {
                continue;
            };
            let small = std::fs::metadata(&real)
                .is_ok_and(|m| m.len() <= PRELIST_BYTES * group.len() as u64);
            if small {
                if let Some(listing) = self.listings.get(&real) {
                    self.resolver.learn_listing(&real, &listing);
                }
            }
        }
    }

    /// Drops rules covered by an ancestor (or equal path) with at least the same access.
    ///
    /// In path order with `/` sorting before every other byte, a directory comes right
    /// before everything beneath it, so one sweep with a stack of the kept ancestors of the
    /// current path decides each rule: O(n log n) comparisons of bytes, rather than a lookup
    /// per ancestor of each path (the whole cost of building a policy with hundreds of
    /// configured paths). The kept rules come out strongest grant first, then shortest path.
    fn dedup(&mut self) -> Vec<Rule> {
        let rules = std::mem::take(&mut self.rules);
        let bytes = |i: usize| rules[i].path.as_os_str().as_bytes();
        let mut order: Vec<usize> = (0..rules.len()).collect();
        // Equal paths: the stronger grant first, so it covers the others.
        order.sort_by(|&a, &b| {
            path_order(bytes(a), bytes(b)).then_with(|| rules[b].access.cmp(&rules[a].access))
        });
        let mut keep = vec![false; rules.len()];
        // Kept rules that are ancestors (or the same path) of the current one, outermost
        // first. A rule is kept only if it grants more than the one below it on the stack,
        // so the innermost holds the strongest access on the way down.
        let mut stack: Vec<usize> = Vec::new();
        for i in order {
            let path = bytes(i);
            while stack.last().is_some_and(|&j| !within_bytes(path, bytes(j))) {
                stack.pop();
            }
            if stack
                .last()
                .is_some_and(|&j| rules[j].access >= rules[i].access)
            {
                continue;
            }
            keep[i] = true;
            stack.push(i);
        }
        let mut kept: Vec<Rule> = rules
            .into_iter()
            .zip(keep)
            .filter_map(|(rule, keep)| keep.then_some(rule))
            .collect();
        kept.sort_by(|a, b| {
            b.access
                .cmp(&a.access)
                .then_with(|| a.path.as_os_str().len().cmp(&b.path.as_os_str().len()))
        });
        kept
    }
}

/// Orders paths by component: as bytes, but with `/` before every other byte, so that
/// `/a` < `/a/b` < `/a-b` (plain byte order puts `/a-b` between the other two).
fn path_order(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let key = |c: u8| if c == b'/' { 0 } else { u16::from(c) + 1 };
    // The common prefix eight bytes at a time: sorted paths share long ones.
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n && a[i..i + 8] == b[i..i + 8] {
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    if i < n {
        key(a[i]).cmp(&key(b[i]))
    } else {
        a.len().cmp(&b.len())
    }
}

/// `text` (a symlink's target) taken from `dir` without touching the file system: `.` and
/// empty components dropped, `..` removing the last component. Only for deciding that a link
/// needs no resolving: a wrong answer there grants less, never more.
fn lexical_join(dir: &Path, text: &Path) -> PathBuf {
    let text = text.as_os_str().as_bytes();
    let mut out: Vec<u8> = if text.first() == Some(&b'/') {
        Vec::with_capacity(text.len())
    } else {
        let mut base = dir.as_os_str().as_bytes().to_vec();
        base.reserve(text.len() + 1);
        base
    };
    for name in text.split(|&b| b == b'/') {
        match name {
            b"" | b"." => {}
            b".." => {
                let parent = out.iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(parent);
            }
            _ => {
                if out.last() != Some(&b'/') {
                    out.push(b'/');
                }
                out.extend_from_slice(name);
            }
        }
    }
    if out.is_empty() {
        out.push(b'/');
    }
    PathBuf::from(OsString::from_vec(out))
}

/// Whether `path` is `dir` or beneath it. Both are real paths (absolute, no `.`/`..`, no
/// trailing `/`), so comparing bytes is exact — and much cheaper than `Path::starts_with`,
/// which re-parses components, on a hot path that compares hundreds of rules.
fn within(path: &Path, dir: &Path) -> bool {
    within_bytes(path.as_os_str().as_bytes(), dir.as_os_str().as_bytes())
}

/// [`within`], on the paths' bytes.
fn within_bytes(p: &[u8], d: &[u8]) -> bool {
    p.starts_with(d) && (p.len() == d.len() || d == b"/" || p[d.len()] == b'/')
}

/// Builds the policy for one launch.
pub fn build(inputs: Inputs<'_>) -> Result<Policy, PolicyError> {
    build_with(inputs, Resolver::default())
}

/// The directories an agent started in `worktree` names its per-project state after
/// (Claude Code's `~/.claude/projects/<name>`): where it runs (this process's directory,
/// within the worktree), the worktree's top level, and its main checkout's top level.
pub fn own_projects(worktree: &Worktree) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(3);
    if let Ok(cwd) = std::env::current_dir() {
        if cwd.starts_with(&worktree.root) {
            out.push(cwd);
        }
    }
    let main = match &worktree.git {
        crate::worktree::GitLayout::Linked {
            common_dir: Some(c),
            ..
        } if c.file_name().is_some_and(|n| n == ".git") => c.parent().map(Path::to_path_buf),
        _ => None,
    };
    for dir in std::iter::once(worktree.root.clone()).chain(main) {
        if !out.contains(&dir) {
            out.push(dir);
        }
    }
    out
}

/// [`build`], with a resolver that already knows the real directories someone met before
/// (worktree discovery, in the same launch).
pub fn build_with(inputs: Inputs<'_>, resolver: Resolver) -> Result<Policy, PolicyError> {
    let Inputs {
        agent,
        worktree,
        home,
        real_agent,
        config,
        is_root,
        link_cache,
    } = inputs;
    let agent_config = config.agent(agent);
    let mut b = Builder {
        rules: Vec::new(),
        resolver,
        listings: Listings::default(),
        configured: Vec::new(),
    };
    let mut notes = Vec::new();

    // Writable: the worktree and the git dirs it commits into. The layout was checked both
    // ways by worktree discovery; each grant names the file it came from.
    b.add(&worktree.root, Access::ReadWrite, "worktree")?;
    let dotgit = worktree.root.join(".git");
    let mut quarantine = None;
    match &worktree.git {
        GitLayout::Linked {
            git_dir,
            common_dir: Some(common),
        } => {
            // Only what the worktree's own commits, branches, stashes, rebases and fetches
            // write; the repository's config, hooks/ and info/ stay read-only so that no
            // hook or core.fsmonitor planted here runs later outside the wall, and objects/
            // stays read-only so that no existing object can be rewritten: new objects go
            // to the quarantine, which a watcher outside the wall verifies and moves into
            // the repository when the agent exits (see [`Quarantine`]).
            b.add(
                git_dir,
                Access::ReadWrite,
                format!(
                    "the linked worktree's own git dir: named by {}, names it back in gitdir",
                    dotgit.display()
                ),
            )?;
            b.add(
                common,
                Access::ReadOnly,
                format!(
                    "the repository's common dir, named by {}/commondir (config, hooks, objects: read-only)",
                    git_dir.display()
                ),
            )?;
            for sub in ["refs", "logs", "reftable"] {
                b.add_git_subdir(
                    common,
                    sub,
                    false,
                    "refs and logs the worktree commits into (in the common dir)",
                )?;
            }
            // In the launch's mount namespace this path is the quarantine: the rule is
            // attached to what the path shows when the wall goes up. Without the namespace
            // (refused by the kernel, and not `protect_required`) it is the real store, as
            // `doctor` and the launch's note then say.
            let q = Quarantine::of(git_dir, common);
            b.add_git_subdir(
                common,
                "objects",
                true,
                format!(
                    "the repository's objects: in the agent's mount namespace, its quarantine {}; the real store is read-only there at {}",
                    q.dir.display(),
                    q.base.display()
                ),
            )?;
            quarantine = Some(q);
            notes.push(
                "linked worktree: the repository's config, hooks, info and objects are read-only; new objects go to the worktree's quarantine and are verified into the repository when the agent exits; this worktree's `.git` file and its git dir's `commondir` are protected paths".to_string(),
            );
        }
        GitLayout::Linked {
            git_dir,
            common_dir: None,
        } => {
            b.add(
                git_dir,
                Access::ReadWrite,
                format!(
                    "the submodule's git dir: named by {}, under its superproject's modules/, names it back in core.worktree",
                    dotgit.display()
                ),
            )?;
            notes.push(
                "submodule: its git dir (config, hooks, objects) is writable, so an agent can plant a hook that later runs outside the wall when you use git in the submodule".to_string(),
            );
        }
        GitLayout::Main { .. } => notes.push(
            "main worktree: .git/config, .git/hooks and .git/info are protected paths (read-only in the launch's mount namespace), so git commands that write them fail inside (`git config`, `git remote add`, a new branch that records its upstream); the repository's objects stay writable: run agents in a linked worktree (`git worktree add`) to keep those unchangeable too".to_string(),
        ),
        GitLayout::None => {}
    }
    if let Some(home) = home {
        match config.home {
            HomeMode::Open => {
                b.add(home, Access::ReadWrite, "$HOME (home = \"open\")")?;
                notes.push("$HOME is writable (home = \"open\"): the agent can read your other projects and credentials, and plant code in shell rc files, ~/.ssh, ~/.gitconfig or landwall's user config that runs in your next, unwalled shell; remove home = \"open\" to keep them private".to_string());
            }
            HomeMode::ReadOnly => {
                b.add(home, Access::ReadOnly, "$HOME (home = \"read-only\")")?;
                let real_home = b.rules.last().map(|r| r.path.clone());
                for dir in profile::state_dirs(agent) {
                    if let Some(real_home) = &real_home {
                        b.add_state_dir(
                            real_home,
                            dir,
                            format!("{agent}'s own state (home = \"read-only\")"),
                        )?;
                    }
                }
                notes.push("$HOME is readable (home = \"read-only\"): the agent can read your other projects and credentials there; remove home = \"read-only\" to keep them private".to_string());
            }
            HomeMode::Private => {
                let (real_home, _) =
                    b.resolver
                        .resolve(home)
                        .map_err(|source| PolicyError::Required {
                            path: home.to_path_buf(),
                            reason: "$HOME".into(),
                            source,
                        })?;
                if is_system_directory(&real_home) {
                    return Err(PolicyError::SystemHome { path: real_home });
                }
                for dir in profile::state_dirs(agent) {
                    b.add_state_dir(&real_home, dir, format!("{agent}'s own state"))?;
                }
                b.add_home_read_only(&real_home, &mut notes);
                notes.push("$HOME is private (home = \"private\", the default): the agent writes only its own state there and reads what its tools need; your other projects and credential stores are invisible to it".to_string());
            }
        }
        if let Some(rule) = b.rules.iter().find(|r| r.reason.starts_with("$HOME")) {
            if is_system_directory(&rule.path) {
                return Err(PolicyError::SystemHome {
                    path: rule.path.clone(),
                });
            }
        }
    }
    b.add(Path::new("/tmp"), Access::ReadWrite, "temporary files")?;

    // /dev: list it, use the harmless devices and terminals; never disks, /dev/kmsg or
    // /dev/mem, which root could otherwise open (dropped capabilities do not stop that).
    b.add(Path::new("/dev"), Access::ListOnly, "devices (listing)")?;
    for dev in DEVICES {
        b.add(Path::new(dev), Access::ReadWrite, "device")?;
    }
    for tty in TERMINALS {
        let reason = match (PSEUDO_TERMINALS.contains(tty), config.terminals) {
            (false, _) => "its own terminal (with ioctls)",
            (true, crate::config::Terminals::Own) => {
                "its own pseudo-terminals: a private instance, made at launch (with ioctls)"
            }
            (true, crate::config::Terminals::All) => {
                "every terminal of the user's (terminals = \"all\", with ioctls)"
            }
        };
        b.add_if_present(Path::new(tty), Access::Device, reason);
    }
    b.add_if_present(
        Path::new("/dev/shm"),
        Access::ReadWrite,
        "POSIX shared memory",
    );
    b.prelist(config.paths_for(agent));
    for dev in &config.devices {
        b.add_configured(dev, Access::Device, config.places.describe(dev, "devices"))?;
    }
    for p in &config.writable {
        b.add_configured(p, Access::ReadWrite, config.places.describe(p, "writable"))?;
    }
    for p in &agent_config.writable {
        b.add_configured(
            p,
            Access::ReadWrite,
            config
                .places
                .describe(p, &format!("[agents.{agent}] writable")),
        )?;
    }

    // Read-only: the system, toolchains, the agent's own install.
    for p in REQUIRED_READ_ONLY {
        b.add(Path::new(p), Access::ReadOnly, "system")?;
    }
    for p in OPTIONAL_READ_ONLY {
        b.add_if_present(Path::new(p), Access::ReadOnly, "system");
    }
    // The real agent is exec'd by the real path its install directory was granted for
    // (`agent_exe`), so that a link swapped between the two cannot exec one program with
    // another's directory granted.
    let mut agent_exe = None;
    if let Some(real) = real_agent {
        agent_exe = b.resolver.canonicalize(real).ok();
        for dir in agent_exe
            .iter()
            .flat_map(|exe| crate::agent::install_dirs_of(exe))
        {
            b.add(&dir, Access::ReadOnly, "the real agent's install directory")?;
        }
    }
    for p in &config.read_only {
        b.add_configured(p, Access::ReadOnly, config.places.describe(p, "read_only"))?;
    }
    for p in &agent_config.read_only {
        b.add_configured(
            p,
            Access::ReadOnly,
            config
                .places
                .describe(p, &format!("[agents.{agent}] read_only")),
        )?;
    }
    for dir in LINK_SCAN {
        b.follow_links(Path::new(dir), link_cache);
    }

    check_git_grants(&b.rules, &worktree, home)?;
    b.check_configured()?;
    let unix = b.unix_sockets(&config.unix_for(agent), &config.places, &mut notes)?;

    // Carve the denied paths out of whatever grants them.
    let mut patterns: Vec<DenyPattern> = Vec::new();
    if is_root {
        patterns.extend(ROOT_DENY.iter().filter_map(|p| DenyPattern::parse(p).ok()));
    }
    patterns.extend(config.deny.iter().cloned());
    // The private home's credential stores, invisible whatever else grants them.
    if let (HomeMode::Private, Some(home)) = (config.home, home) {
        if let Ok((real_home, _)) = b.resolver.resolve(home) {
            patterns.extend(
                profile::CREDENTIAL_STORES
                    .iter()
                    .filter_map(|rel| DenyPattern::parse(real_home.join(rel).to_str()?).ok()),
            );
        }
    }
    let denied = denied_paths(&patterns, &mut b.resolver, &mut b.listings);
    let rules = b.dedup();
    let rules = carve(rules, &denied, &mut b.listings);
    // The linked worktree's note says the repository's config and hooks are read-only: true
    // unless another grant (an open home holding the repository, a configured `writable`)
    // covers them, which it must then say instead.
    if let Some(q) = &quarantine {
        let config_file = q.common().join("config");
        if let Some(rule) = rules
            .iter()
            .filter(|r| r.access.writes() && within(&config_file, &r.path))
            .max_by_key(|r| r.path.as_os_str().len())
        {
            if let Some(note) = notes.iter_mut().find(|n| n.starts_with("linked worktree:")) {
                *note = format!(
                    "linked worktree: the repository's config and hooks are writable all the same, through the grant {} ({}): a hook or core.fsmonitor planted there runs the next time you use git in this repository, outside the wall",
                    rule.path.display(),
                    rule.reason
                );
            }
        }
    }
    let mut off = OffLimits::defaults(config);
    off.extend(config.off_limits.iter().cloned());
    check_off_limits(&rules, &off)?;

    let mut env_allow = config.env_allow.clone();
    env_allow.extend(agent_config.env_allow.iter().cloned());
    // Defaults of every launch (TMPDIR: SQLite would pick /var/tmp, which the wall refuses;
    // see profile.rs), then strict home's state directories.
    let mut env_defaults: Vec<(OsString, OsString)> = profile::env_defaults(agent)
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect();
    if let (true, Some(home)) = (config.home.has_state_dirs(), home) {
        env_defaults.extend(
            profile::strict_env(agent)
                .iter()
                .map(|(k, rel)| (OsString::from(k), home.join(rel).into_os_string())),
        );
    }
    if let (Some(real), Some(exe)) = (real_agent, &agent_exe) {
        refuse_agent_the_agent_can_repoint(real, exe, &rules)?;
    }
    let protection = crate::protect::resolve(&worktree, &config.protect)?;
    let mut policy = Policy {
        protection,
        agent_exe,
        agent: agent.to_string(),
        worktree,
        rules,
        min_abi: config.min_abi,
        env: EnvPolicy::for_agent(agent, &env_allow),
        env_defaults,
        network: config.network.clone(),
        denied,
        notes,
        quarantine,
        protect_required: config.protect_required,
        terminals: config.terminals,
        unix,
        private_tmp: None,
        own_tmp_dir: None,
    };
    // The other linked worktrees, under what the agent may write.
    let main = std::mem::take(&mut policy.protection);
    policy.protection =
        crate::protect::with_nested_worktrees(main, &policy.worktree, &config.protect, &|p| {
            policy.decide(p).rule.is_some_and(|r| r.access.writes())
        })?;
    // Nothing held may be renamed away whole, with the directory it lies in.
    let mut bases = vec![policy.worktree.root.clone()];
    if let GitLayout::Linked {
        git_dir,
        common_dir,
    } = &policy.worktree.git
    {
        bases.push(git_dir.clone());
        bases.extend(common_dir.clone());
    }
    bases.extend(policy.protection.nested.iter().map(|n| n.root.clone()));
    // The agents' command-bearing state in $HOME, wherever this launch may write it.
    if let Some(real_home) = home.and_then(|h| std::fs::canonicalize(h).ok()) {
        let mut p = std::mem::take(&mut policy.protection);
        let projects = own_projects(&policy.worktree);
        let writable = |p: &Path| policy.decide(p).rule.is_some_and(|r| r.access.writes());
        // The projects' layers, beside the record, where the agent can write neither (the
        // namespace opens the store without following a link, so one there fails the launch).
        let stores = crate::record::place(Some(&real_home), writable)
            .and_then(|r| r.parent().map(|d| d.join(crate::record::LAYERS)));
        let state = crate::protect::agent_state(
            &mut p,
            &real_home,
            &projects,
            &config.protect,
            stores.as_deref(),
            &writable,
        );
        policy.protection = p;
        bases.extend(state?);
    }
    let held = std::mem::take(&mut policy.protection);
    policy.protection = crate::protect::hold_above(held, &bases, &|p| {
        policy.decide(p).rule.is_some_and(|r| r.access.writes())
    });
    if let Some(reg) = &mut policy.protection.registry {
        reg.writable = policy
            .rules
            .iter()
            .filter(|r| r.access.writes())
            .map(|r| r.path.clone())
            .collect();
    }
    Ok(policy)
}

/// The real agent's path as found, and every symbolic link met while resolving it, must lie
/// outside the agent's writable grants, unless where it leads does too (the agent's own copy
/// in a writable place gains it nothing): otherwise the agent could repoint it between
/// launches at any program, and the launch would grant that program's directory.
fn refuse_agent_the_agent_can_repoint(
    real: &Path,
    exe: &Path,
    rules: &[Rule],
) -> Result<(), PolicyError> {
    let writable = |p: &Path| {
        rules
            .iter()
            .filter(|r| r.access.writes())
            .find(|r| within(p, &r.path))
            .map(|r| r.path.clone())
    };
    if writable(exe).is_some() {
        return Ok(());
    }
    let plain = lexical_join(Path::new("/"), real);
    // No link on the way (the path found is the real path): only the path itself to check,
    // without walking it again.
    let on_the_way = if plain == exe {
        vec![plain]
    } else {
        path_and_links(&plain)
    };
    for link in on_the_way {
        if let Some(grant) = writable(&link) {
            return Err(PolicyError::AgentRepointable {
                path: real.to_path_buf(),
                link,
                grant,
                real: exe.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// `path` and each symbolic link met while resolving it (at most 40), by their own paths.
fn path_and_links(path: &Path) -> Vec<PathBuf> {
    let mut out = vec![path.to_path_buf()];
    let mut pending: Vec<std::ffi::OsString> = path
        .components()
        .rev()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n.to_os_string()),
            _ => None,
        })
        .collect();
    let mut at = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&name);
        match std::fs::symlink_metadata(&next) {
            Ok(m) if m.file_type().is_symlink() && hops < 40 => {
                hops += 1;
                out.push(next.clone());
                let Ok(target) = std::fs::read_link(&next) else {
                    break;
                };
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                for c in target.components().rev() {
                    match c {
                        std::path::Component::Normal(n) => pending.push(n.to_os_string()),
                        std::path::Component::ParentDir => pending.push("..".into()),
                        _ => {}
                    }
                }
            }
            _ => at = next,
        }
    }
    out
}

/// The existing paths the deny patterns match, with their real paths. Each directory is
/// listed at most once, however many patterns name it.
fn denied_paths(
    patterns: &[DenyPattern],
    resolver: &mut Resolver,
    listings: &mut Listings,
) -> Vec<PathBuf> {
    let mut by_dir: Vec<(&Path, Vec<&DenyPattern>)> = Vec::new();
    for p in patterns {
        match by_dir.iter_mut().find(|(d, _)| *d == p.dir.as_path()) {
            Some((_, list)) => list.push(p),
            None => by_dir.push((&p.dir, vec![p])),
        }
    }
    let mut out = Vec::new();
    for (dir, pats) in by_dir {
        let Ok((dir, true)) = resolver.resolve(dir) else {
            continue;
        };
        // Names with their type when the listing gives it; exact names are looked up.
        let mut names: Vec<(OsString, Kind)> = pats
            .iter()
            .filter(|p| !p.name.contains('*'))
            .map(|p| (OsString::from(&p.name), Kind::Unknown))
            .collect();
        if pats.iter().any(|p| p.name.contains('*')) {
            if let Some(entries) = listings.get(&dir) {
                names.extend(
                    entries
                        .entries
                        .iter()
                        .filter(|e| {
                            entries
                                .name(e)
                                .to_str()
                                .is_some_and(|n| pats.iter().any(|p| p.matches(n)))
                        })
                        .map(|e| (entries.name(e).to_os_string(), e.kind)),
                );
            }
        }
        for (name, kind) in names {
            let path = child(&dir, &name);
            let kind = match kind {
                Kind::Unknown => match path.symlink_metadata() {
                    Ok(m) if m.file_type().is_symlink() => Kind::Symlink,
                    Ok(_) => Kind::Other,
                    Err(_) => continue,
                },
                known => known,
            };
            // `dir` is real, so an entry that is not a symlink is its own real path.
            if kind == Kind::Symlink {
                if let Ok(real) = resolver.canonicalize(&path) {
                    if real != path {
                        out.push(real);
                    }
                }
            }
            out.push(path);
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Rewrites the rules so that no rule covers a denied path: a rule on an ancestor of one is
/// replaced by list-only access on each directory down to it and the original access on
/// every other entry, one by one. Entries created later at those levels are not covered:
/// that is the price of a deny inside an allowed directory.
fn carve(rules: Vec<Rule>, denied: &[PathBuf], listings: &mut Listings) -> Vec<Rule> {
    if denied.is_empty() {
        return rules;
    }
    let mut out = Vec::with_capacity(rules.len());
    for rule in rules {
        if denied.iter().any(|d| within(&rule.path, d)) {
            continue;
        }
        if rule.is_dir && denied.iter().any(|d| within(d, &rule.path)) {
            expand(rule, denied, listings, &mut out);
        } else {
            out.push(rule);
        }
    }
    out
}

fn expand(rule: Rule, denied: &[PathBuf], listings: &mut Listings, out: &mut Vec<Rule>) {
    let entries = listings.get(&rule.path);
    out.push(Rule {
        path: rule.path.clone(),
        access: Access::ListOnly,
        is_dir: true,
        reason: format!("{} (list-only: holds a denied path)", rule.reason).into(),
    });
    // An unreadable directory grants nothing more: fail closed.
    let Some(entries) = entries else {
        return;
    };
    out.reserve(entries.entries.len());
    for entry in entries.sorted() {
        // Links are not granted themselves: what they point to is governed by its own rules.
        if matches!(entry.kind, Kind::Symlink | Kind::Unknown) {
            continue;
        }
        let path = child(&rule.path, entries.name(&entry));
        if denied.iter().any(|d| d.as_os_str() == path.as_os_str()) {
            continue;
        }
        let child = Rule {
            path,
            access: rule.access,
            is_dir: entry.kind == Kind::Dir,
            reason: rule.reason.clone(),
        };
        if child.is_dir && denied.iter().any(|d| within(d, &child.path)) {
            expand(child, denied, listings, out);
        } else {
            out.push(child);
        }
    }
}

/// What the policy grants on one path, and which rule grants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision<'a> {
    /// The path after resolving symlinks (for a path that does not exist yet, its nearest
    /// existing ancestor resolved, plus the rest).
    pub resolved: PathBuf,
    /// The strongest grant that covers it, or `None` for denied.
    pub rule: Option<&'a Rule>,
}

impl Policy {
    /// This policy without the pseudo-terminal rules: for a launch whose private `/dev/pts`
    /// could not be made, where `/dev/pts` is the user's, with their other terminals in it.
    pub fn without_pseudo_terminals(&self) -> Policy {
        let mut p = self.clone();
        p.rules
            .retain(|r| !PSEUDO_TERMINALS.iter().any(|t| r.path == Path::new(t)));
        p
    }

    /// This policy with `dir` granted in place of `/tmp` and `/dev/shm` (and anything under
    /// them): a drain job's temporary files where it cannot have a tmpfs of its own.
    pub fn with_own_tmp(&self, dir: &Path) -> Policy {
        let mut p = self.clone();
        p.rules
            .retain(|r| !(r.path.starts_with("/tmp") || r.path.starts_with("/dev/shm")));
        p.rules.push(Rule {
            path: dir.to_path_buf(),
            access: Access::ReadWrite,
            is_dir: true,
            reason: "the job's own temporary directory (TMPDIR), in place of /tmp and /dev/shm"
                .into(),
        });
        p
    }

    /// Decides `path` the way the kernel will: rights are the union over every rule on the
    /// path or one of its ancestors.
    pub fn decide(&self, path: &Path) -> Decision<'_> {
        let resolved = resolve_lenient(path);
        let rule = self
            .rules
            .iter()
            .filter(|r| within(&resolved, &r.path))
            .max_by(|a, b| {
                a.access
                    .cmp(&b.access)
                    .then_with(|| a.path.as_os_str().len().cmp(&b.path.as_os_str().len()))
            });
        Decision { resolved, rule }
    }
}

/// Resolves the longest existing prefix of `path` and appends the rest unchanged.
fn resolve_lenient(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cur) {
            let mut out = real;
            for c in rest.iter().rev() {
                out.push(c);
            }
            return out;
        }
        match (cur.file_name().map(|n| n.to_os_string()), cur.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                cur = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;
    use crate::worktree::GitLayout;
    use std::fs;

    fn inputs<'a>(wt: &Path, home: Option<&'a Path>, config: &'a Config) -> Inputs<'a> {
        Inputs {
            agent: "claude",
            worktree: Worktree {
                root: wt.to_path_buf(),
                git: GitLayout::None,
            },
            home,
            real_agent: None,
            config,
            is_root: false,
            link_cache: None,
        }
    }

    fn access_of(p: &Policy, path: &str) -> Option<Access> {
        p.decide(Path::new(path)).rule.map(|r| r.access)
    }

    /// A configured path that is wrong only when the policy is built is reported with the
    /// key, file and line that named it: the system file or the user's own.
    #[test]
    fn configured_path_errors_name_the_file_and_line() {
        let s = Scratch::new("places");
        let wt = s.0.join("wt");
        fs::create_dir_all(&wt).expect("mkdir");
        let gone = s.0.join("gone");
        let plain = s.0.join("plain");
        fs::write(&plain, "x").expect("write");
        let cases = [
            (
                format!("# a comment\nread_only = [\"{}\"]\n", gone.display()),
                "`read_only` at /sys.toml:2",
            ),
            (
                format!("[agents.claude]\n\nwritable = [\"{}\"]\n", gone.display()),
                "`[agents.claude] writable` at /sys.toml:3",
            ),
            (
                format!("[unix]\nsockets = [\"{}\"]\n", plain.display()),
                "`[unix] sockets` at /sys.toml:2",
            ),
        ];
        for (text, want) in cases {
            let config = crate::config::from_str(Path::new("/sys.toml"), &text).expect("valid");
            let e = build(inputs(&wt, None, &config))
                .expect_err("refused")
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn unix_sockets_are_checked_against_what_the_agent_can_write() {
        use std::os::unix::net::UnixListener;
        let s = Scratch::new("unix");
        let wt = s.0.join("wt");
        fs::create_dir_all(&wt).expect("mkdir");
        // Not under /tmp, which every agent may write.
        let away = PathBuf::from(format!("/var/tmp/lw-unix-{}", std::process::id()));
        let _ignored = fs::remove_dir_all(&away);
        fs::create_dir_all(&away).expect("mkdir");
        let good = away.join("ok.sock");
        let _l1 = UnixListener::bind(&good).expect("bind");
        let in_wt = wt.join("in.sock");
        let _l2 = UnixListener::bind(&in_wt).expect("bind");
        let plain = away.join("file");
        fs::write(&plain, "x").expect("write");
        let missing = away.join("gone.sock");
        let mut config = Config::default();
        config.unix.sockets = vec![good.clone(), missing.clone()];
        let policy = build(inputs(&wt, None, &config)).expect("policy");
        assert_eq!(policy.unix.sockets, vec![good.clone()]);
        assert_eq!(policy.unix.missing, vec![missing]);
        assert!(policy.unix.names_sockets() && !policy.unix.allow_all);
        assert!(policy.notes.iter().any(|n| n.contains("gone.sock")));
        // In the worktree (the agent could put another socket there), and not a socket.
        for bad in [in_wt, plain, away.clone()] {
            config.unix.sockets = vec![bad.clone()];
            match build(inputs(&wt, None, &config)) {
                Err(PolicyError::UnixSocket { path, .. }) => assert_eq!(path, bad),
                other => panic!("{}: {other:?}", bad.display()),
            }
        }
        // Through a symlink the agent could repoint.
        let link = wt.join("link.sock");
        std::os::unix::fs::symlink(&good, &link).expect("symlink");
        config.unix.sockets = vec![link];
        assert!(matches!(
            build(inputs(&wt, None, &config)),
            Err(PolicyError::UnixSocket { .. })
        ));
        // The default names none.
        let policy = build(inputs(&wt, None, &Config::default())).expect("policy");
        assert_eq!(policy.unix, UnixPolicy::default());
        fs::remove_dir_all(&away).expect("cleanup");
    }

    #[test]
    fn the_private_home_grants_state_and_tools_and_hides_credentials() {
        // Not under /tmp, which every agent may write.
        let root = PathBuf::from(format!("/var/tmp/lw-private-{}", std::process::id()));
        let _ignored = fs::remove_dir_all(&root);
        let wt = root.join("wt");
        let home = root.join("home");
        for d in [
            ".claude",
            ".cache",
            ".ssh",
            ".aws",
            "src/other",
            ".cargo/bin",
        ] {
            fs::create_dir_all(home.join(d)).expect("mkdir");
        }
        fs::create_dir_all(&wt).expect("mkdir");
        for f in [
            ".ssh/id_ed25519",
            ".ssh/config",
            ".aws/credentials",
            ".gitconfig",
            ".bashrc",
        ] {
            fs::write(home.join(f), "x").expect("write");
        }
        // A toolchain link is not followed, into $HOME or out of it.
        std::os::unix::fs::symlink(home.join("src"), home.join(".rustup")).expect("symlink");
        std::os::unix::fs::symlink("/var/log", home.join(".bun")).expect("symlink");
        // A hard link to a key in the read-only list's place is not granted.
        fs::hard_link(home.join(".ssh/id_ed25519"), home.join(".inputrc")).expect("link");
        let at = |p: &Policy, rel: &str| access_of(p, &home.join(rel).to_string_lossy());
        let config = Config::default();
        let p = build(inputs(&wt, Some(&home), &config)).expect("policy");
        assert_eq!(at(&p, ".claude/settings.json"), Some(Access::ReadWrite));
        assert_eq!(at(&p, ".cache/x"), Some(Access::ReadWrite));
        assert_eq!(at(&p, ".gitconfig"), Some(Access::ReadOnly));
        assert_eq!(at(&p, ".bashrc"), Some(Access::ReadOnly));
        assert_eq!(at(&p, ".ssh/config"), Some(Access::ReadOnly));
        assert_eq!(at(&p, ".cargo/bin/cargo"), Some(Access::ReadOnly));
        for hidden in [
            ".ssh/id_ed25519",
            ".inputrc",
            ".aws/credentials",
            "src/other/x",
            ".rustup/x",
            "notes.txt",
        ] {
            assert_eq!(at(&p, hidden), None, "{hidden}");
        }
        assert_eq!(access_of(&p, "/var/log/syslog"), None);
        for named in [".rustup", ".bun", ".inputrc"] {
            assert!(
                p.notes.iter().any(|n| n.contains(named)),
                "{named}: {:?}",
                p.notes
            );
        }
        // A configured read_only of the whole home still leaves the credentials out.
        let config = Config {
            read_only: vec![home.clone()],
            ..Config::default()
        };
        let p = build(inputs(&wt, Some(&home), &config)).expect("policy");
        assert_eq!(at(&p, "src/other/x"), Some(Access::ReadOnly));
        assert_eq!(at(&p, ".ssh/config"), Some(Access::ReadOnly));
        for hidden in [".ssh/id_ed25519", ".aws/credentials", ".aws"] {
            assert_ne!(at(&p, hidden), Some(Access::ReadOnly), "{hidden}");
        }
        fs::remove_dir_all(&root).expect("cleanup");
    }

    #[test]
    fn default_policy_grants_the_seeds_paths() {
        let s = Scratch::new("default");
        let config = Config::default();
        let policy = build(inputs(&s.0, None, &config)).expect("policy");
        assert_eq!(
            access_of(&policy, &s.0.join("file").to_string_lossy()),
            Some(Access::ReadWrite)
        );
        assert_eq!(access_of(&policy, "/tmp/x"), Some(Access::ReadWrite));
        assert_eq!(access_of(&policy, "/dev/null"), Some(Access::ReadWrite));
        assert_eq!(access_of(&policy, "/dev/tty"), Some(Access::Device));
        assert_eq!(access_of(&policy, "/dev/kmsg"), Some(Access::ListOnly));
        assert_eq!(access_of(&policy, "/usr/bin/env"), Some(Access::ReadOnly));
        assert_eq!(access_of(&policy, "/etc/passwd"), Some(Access::ReadOnly));
        assert_eq!(
            access_of(&policy, "/proc/self/status"),
            Some(Access::ReadOnly)
        );
        assert_eq!(access_of(&policy, "/root/.ssh/id_rsa"), None);
        assert_eq!(access_of(&policy, "/var/lib/x"), None);
        assert_eq!(access_of(&policy, "/srv"), None);
    }

    #[test]
    fn rules_are_real_paths_and_not_redundant() {
        let s = Scratch::new("dedup");
        fs::create_dir_all(s.0.join("wt/sub")).expect("mkdir");
        let config = Config {
            writable: vec![s.0.join("wt/sub")],
            read_only: vec![s.0.join("wt")],
            ..Config::default()
        };
        let policy = build(inputs(&s.0.join("wt"), None, &config)).expect("policy");
        for (i, a) in policy.rules.iter().enumerate() {
            for (j, b) in policy.rules.iter().enumerate() {
                assert!(
                    i == j || !(a.path.starts_with(&b.path) && b.access >= a.access),
                    "{a:?} is redundant with {b:?}"
                );
            }
        }
        assert_eq!(
            access_of(&policy, &s.0.join("wt/sub/f").to_string_lossy()),
            Some(Access::ReadWrite)
        );
        assert!(policy
            .rules
            .iter()
            .all(|r| r.path.is_absolute()
                && fs::canonicalize(&r.path).ok().as_ref() == Some(&r.path)));
    }

    #[test]
    fn missing_required_config_path_is_an_error() {
        let s = Scratch::new("missing");
        let config = Config {
            writable: vec![s.0.join("does-not-exist")],
            ..Config::default()
        };
        let e = build(inputs(&s.0, None, &config)).expect_err("missing");
        assert!(e.to_string().contains("does-not-exist"), "{e}");
    }

    #[test]
    fn home_is_writable_but_not_if_it_is_the_root() {
        let s = Scratch::new("home");
        fs::create_dir_all(s.0.join("home")).expect("mkdir");
        fs::create_dir_all(s.0.join("wt")).expect("mkdir");
        let config = Config::default();
        let home = s.0.join("home");
        let policy = build(inputs(&s.0.join("wt"), Some(&home), &config)).expect("policy");
        assert_eq!(
            access_of(&policy, &home.join(".bashrc").to_string_lossy()),
            Some(Access::ReadWrite)
        );
        let root = PathBuf::from("/");
        assert!(matches!(
            build(inputs(&s.0.join("wt"), Some(&root), &config)),
            Err(PolicyError::SystemHome { .. })
        ));
    }

    #[test]
    fn symlinks_leaving_etc_are_followed() {
        // /etc/resolv.conf is the usual example; check whatever this machine's /etc has: a
        // link whose written target no rule covers has its real target granted.
        let s = Scratch::new("links");
        let config = Config::default();
        let policy = build(inputs(&s.0, None, &config)).expect("policy");
        for entry in fs::read_dir("/etc").expect("read /etc").flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_symlink()) {
                continue;
            }
            let text = fs::read_link(entry.path()).expect("readlink");
            let written = lexical_join(Path::new("/etc"), &text);
            if policy.rules.iter().any(|r| within(&written, &r.path)) {
                continue;
            }
            if let Ok(target) = fs::canonicalize(entry.path()) {
                assert!(
                    policy.decide(&target).rule.is_some(),
                    "{} -> {} not granted",
                    entry.path().display(),
                    target.display()
                );
            }
        }
    }

    #[test]
    fn only_links_written_outside_every_grant_are_followed() {
        let s = Scratch::new("follow");
        let (scan, granted) = (s.0.join("scan"), s.0.join("granted"));
        for d in [&scan, &granted, &s.0.join("out1"), &s.0.join("out2")] {
            fs::create_dir(d).expect("mkdir");
        }
        fs::write(s.0.join("out2/file"), "").expect("write");
        let link = |target: &str, name: &str| {
            std::os::unix::fs::symlink(target, scan.join(name)).expect("symlink")
        };
        // Written into the grant: left to it, even though it leads out (via granted/hop).
        std::os::unix::fs::symlink(s.0.join("out1"), granted.join("hop")).expect("symlink");
        link("../granted/hop", "into-grant");
        // Written outside: its real target is granted, through `..` and a relative path.
        link("./../out2/./file", "outside");
        link("../missing", "dangling");
        let mut b = Builder {
            rules: Vec::new(),
            resolver: Resolver::default(),
            listings: Listings::default(),
            configured: Vec::new(),
        };
        b.add(&granted, Access::ReadOnly, "granted").expect("grant");
        b.follow_links(&scan, None);
        let paths: Vec<&Path> = b.rules.iter().map(|r| r.path.as_path()).collect();
        assert_eq!(paths, [granted.as_path(), s.0.join("out2/file").as_path()]);
        assert!(!b.covers(&s.0.join("out1")));
    }

    #[test]
    fn lexical_join_is_textual() {
        let etc = Path::new("/etc");
        for (text, want) in [
            ("/usr/lib/x", "/usr/lib/x"),
            ("../usr/lib/os-release", "/usr/lib/os-release"),
            ("alternatives/./rmt", "/etc/alternatives/rmt"),
            ("../../..", "/"),
            ("//a//b/", "/a/b"),
            (".", "/etc"),
        ] {
            assert_eq!(
                lexical_join(etc, Path::new(text)),
                Path::new(want),
                "{text}"
            );
        }
        assert_eq!(
            lexical_join(Path::new("/"), Path::new("a/../b")),
            Path::new("/b")
        );
    }

    #[test]
    fn dedup_keeps_exactly_the_rules_nothing_else_covers() {
        use Access::*;
        let rules = [
            ("/a", ReadOnly),
            ("/a/b", ReadOnly),
            ("/a/b", ReadWrite),
            ("/a-b", ListOnly),
            ("/a-b/c", ReadOnly),
            ("/ab", ReadWrite),
            ("/a/b/c", ReadWrite),
            ("/a/b/c", Device),
            ("/a/bc", ReadOnly),
            ("/a/b/c/d", ReadOnly),
            ("/", ListOnly),
            ("/x/y", ListOnly),
            ("/a", ReadOnly),
        ];
        let mut b = Builder {
            rules: Vec::new(),
            resolver: Resolver::default(),
            listings: Listings::default(),
            configured: Vec::new(),
        };
        for (path, access) in rules {
            b.push(PathBuf::from(path), true, access, "test".into());
        }
        let kept: Vec<(String, Access)> = b
            .dedup()
            .into_iter()
            .map(|r| (r.path.to_string_lossy().into_owned(), r.access))
            .collect();
        // Naive: a rule goes if another one (the first of equals) on it or an ancestor
        // grants at least as much.
        let mut want: Vec<(&str, Access)> = Vec::new();
        for (i, &(p, a)) in rules.iter().enumerate() {
            let covered = rules.iter().enumerate().any(|(j, &(q, c))| {
                j != i
                    && within(Path::new(p), Path::new(q))
                    && (c > a || (c == a && (p != q || j < i)))
            });
            if !covered {
                want.push((p, a));
            }
        }
        want.sort_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.len().cmp(&y.0.len())));
        let owned: Vec<(String, Access)> = want.iter().map(|&(p, a)| (p.to_string(), a)).collect();
        assert_eq!(kept, owned);
        assert_eq!(
            want,
            [
                ("/a/b/c", Device),
                ("/ab", ReadWrite),
                ("/a/b", ReadWrite),
                ("/a", ReadOnly),
                ("/a-b/c", ReadOnly),
                ("/", ListOnly)
            ]
        );
    }

    #[test]
    fn path_order_puts_a_directory_right_before_its_contents() {
        let mut paths = vec![
            "/a-b", "/a/b/c", "/ab", "/a", "/", "/a/b", "/a.b/c", "/a/b-c",
        ];
        paths.sort_by(|a, b| path_order(a.as_bytes(), b.as_bytes()));
        assert_eq!(
            paths,
            ["/", "/a", "/a/b", "/a/b/c", "/a/b-c", "/a-b", "/a.b/c", "/ab"]
        );
    }

    #[test]
    fn decide_resolves_symlinks_and_missing_tails() {
        let s = Scratch::new("decide");
        fs::create_dir_all(s.0.join("wt")).expect("mkdir");
        fs::create_dir_all(s.0.join("outside")).expect("mkdir");
        std::os::unix::fs::symlink(s.0.join("outside"), s.0.join("wt/escape")).expect("symlink");
        let config = Config::default();
        let policy = build(inputs(&s.0.join("wt"), None, &config)).expect("policy");
        let d = policy.decide(&s.0.join("wt/escape/secret"));
        assert_eq!(d.resolved, s.0.join("outside/secret"));
        let expected_denied = !s.0.starts_with("/tmp");
        assert_eq!(d.rule.is_none(), expected_denied);
        let d = policy.decide(&s.0.join("wt/new/dir/file"));
        assert_eq!(d.rule.map(|r| r.access), Some(Access::ReadWrite));
    }
}
