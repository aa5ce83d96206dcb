//! Configuration: parse the TOML files into raw structs, then validate them into a [`Config`].
//!
//! Invariants of a [`Config`]: every path is absolute, every environment pattern is a valid
//! name or `PREFIX*`, and the minimum ABI is one landwall knows. Unknown keys and wrong types
//! are errors that name the file, the line and the key: a typo in a security policy must never
//! be read as "use the default".

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::env::EnvPattern;
use crate::limits::{self, JobCaps};
use crate::policy::OffLimits;

/// Where the system configuration lives unless `LANDWALL_CONFIG` says otherwise.
pub const SYSTEM_CONFIG: &str = "/etc/landwall/landwall.toml";

/// The lowest Landlock ABI that enforces everything the default policy promises.
///
/// ABI 2 adds REFER (git renames its temporary object and ref files across directories, which
/// ABI 1 refuses outright); ABI 3 adds TRUNCATE, without which a "read-only" file can still be
/// emptied with `truncate(2)` by any user who owns it. ABI 3 is the first where read-only
/// really means read-only.
pub const DEFAULT_MIN_ABI: u32 = 3;

/// The highest `min_abi` the configuration accepts: a bound for typos, far above the newest
/// ABI seen (11, Linux 7.3). A minimum above the running kernel's refuses every launch, as
/// asked, until the kernel offers it.
pub const MAX_KNOWN_ABI: u32 = 64;

/// A configuration error, printed as `FILE:LINE: message`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Bad TOML, an unknown key, a wrong type, or a value that fails validation.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending key or value, when known.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Per-agent settings (`[agents.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// Explicit path of the real agent; when set it wins over any lookup on PATH.
    pub real: Option<PathBuf>,
    /// Extra read-only paths for this agent.
    pub read_only: Vec<PathBuf>,
    /// Extra writable paths for this agent.
    pub writable: Vec<PathBuf>,
    /// Extra environment names and `PREFIX*` patterns for this agent.
    pub env_allow: Vec<EnvPattern>,
    /// Unix sockets for this agent (`[agents.NAME.unix]`), on top of `[unix]`.
    pub unix: UnixConfig,
}

/// Unix sockets outside the wall (`[unix]`). By default the agent reaches none: each is a
/// program outside the wall that can act for it (tmux runs commands, the session bus starts
/// services, docker.sock is root).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnixConfig {
    /// Path-named sockets the agent may connect to. Enforced by Landlock ABI 9
    /// (`LANDLOCK_ACCESS_FS_RESOLVE_UNIX`); on an older kernel a launch with sockets named
    /// is refused, since the only alternative there is every socket.
    pub sockets: Vec<PathBuf>,
    /// The escape hatch: every Unix socket the user can reach, the agent can reach.
    pub allow_all: bool,
}

impl UnixConfig {
    fn merge(&mut self, other: UnixConfig) {
        for s in other.sockets {
            if !self.sockets.contains(&s) {
                self.sockets.push(s);
            }
        }
        self.allow_all |= other.allow_all;
    }
}

/// Which terminals a walled agent may open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Terminals {
    /// Its own: the terminal it was started on (`/dev/tty`, and the descriptors it
    /// inherited) and the pseudo-terminals it opens itself, in a private `/dev/pts` made
    /// for the launch. The user's other terminals are not there to open.
    #[default]
    Own,
    /// Every terminal of the user's (`/dev/pts` as it is): the agent can read what is typed
    /// into the user's other terminals and write to their screens. Only by explicit setting.
    All,
}

impl Terminals {
    /// The setting's spelling.
    pub fn name(self) -> &'static str {
        match self {
            Terminals::Own => "own",
            Terminals::All => "all",
        }
    }
}

/// How `$HOME` is granted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HomeMode {
    /// The default: `$HOME` itself is not granted. The agent's own state directories are
    /// writable, what tools need (git and ssh client configuration, shell start-up files,
    /// toolchains) is read-only, and everything else (other projects, documents, credential
    /// stores) is invisible (see `profile.rs`).
    #[default]
    Private,
    /// `$HOME` is read-only except the agent's own state directories.
    ReadOnly,
    /// `$HOME` is writable, for a service account whose home holds nothing else.
    Open,
}

impl HomeMode {
    /// How much it hides: open < read-only < private.
    fn strictness(self) -> u8 {
        match self {
            HomeMode::Open => 0,
            HomeMode::ReadOnly => 1,
            HomeMode::Private => 2,
        }
    }

    /// Its name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            HomeMode::Private => "private",
            HomeMode::ReadOnly => "read-only",
            HomeMode::Open => "open",
        }
    }

    /// Whether the agent's state directories are created before the wall and granted on
    /// their own (the home itself is not writable).
    pub fn has_state_dirs(self) -> bool {
        self != HomeMode::Open
    }
}

/// A path denied inside a granted directory. The last component may contain `*`, which
/// matches any run of characters (`/etc/sudoers*`, `/etc/ssh/ssh_host_*_key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DenyPattern {
    /// The directory the pattern's last component is matched in.
    pub dir: PathBuf,
    /// The last component, possibly with `*`.
    pub name: String,
}

impl DenyPattern {
    /// Parses an absolute path whose last component may contain `*`.
    pub fn parse(s: &str) -> Result<DenyPattern, &'static str> {
        let path = Path::new(s);
        if !path.is_absolute() {
            return Err("is not an absolute path; write it from `/`");
        }
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err("names no file or directory");
        };
        if dir.as_os_str().as_encoded_bytes().contains(&b'*') {
            return Err("has `*` outside its last component");
        }
        let name = name.to_str().ok_or("is not valid UTF-8")?;
        if name == "*" {
            return Err("would deny a whole directory's entries: deny the directory itself");
        }
        Ok(DenyPattern {
            dir: dir.to_path_buf(),
            name: name.to_string(),
        })
    }

    /// Whether the entry `name` of `self.dir` matches.
    pub fn matches(&self, name: &str) -> bool {
        // Bytes first: this runs for every entry of a listed directory (all of `/etc` for
        // root), and almost every entry already fails on the part before the first `*`.
        let (pat, bytes) = (self.name.as_bytes(), name.as_bytes());
        let Some(star) = pat.iter().position(|&b| b == b'*') else {
            return pat == bytes;
        };
        let Some(tail) = bytes.strip_prefix(&pat[..star]) else {
            return false;
        };
        let rest = &pat[star + 1..];
        if !rest.contains(&b'*') {
            return tail.len() >= rest.len() && tail.ends_with(rest);
        }
        match self.name.split_once('*') {
            None => self.name == name,
            Some((head, rest)) => {
                // Only the first `*` is a wildcard boundary; further ones match literally
                // nowhere, so split on all of them and match the pieces in order.
                let mut pieces = rest.split('*');
                let Some(mut tail) = name.strip_prefix(head) else {
                    return false;
                };
                let last = pieces.next_back().unwrap_or("");
                for piece in pieces {
                    match tail.find(piece) {
                        Some(i) => tail = &tail[i + piece.len()..],
                        None => return false,
                    }
                }
                tail.len() >= last.len() && tail.ends_with(last)
            }
        }
    }
}

impl fmt::Display for DenyPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dir.join(&self.name).display())
    }
}

/// TCP port rules (`[network]`): a list that is present is enforced; an absent one is not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Network {
    /// Ports the agent may connect to; `None`: connecting is not restricted.
    pub connect_tcp: Option<Vec<u16>>,
    /// Ports the agent may bind; `None`: binding is not restricted.
    pub bind_tcp: Option<Vec<u16>>,
}

impl Network {
    /// Whether any TCP rule is configured (so ABI 4 and the MPTCP filter are required).
    pub fn is_restricted(&self) -> bool {
        self.connect_tcp.is_some() || self.bind_tcp.is_some()
    }
}

/// Where `landwall-drain` keeps its spool unless `[drain] spool` or `--spool` says otherwise.
pub const DEFAULT_SPOOL: &str = "/var/spool/landwall";

/// How long `landwall-drain` lets running jobs finish after SIGTERM before it kills them.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// The most jobs `[drain] jobs` may run at once.
pub const MAX_DRAIN_JOBS: u32 = 256;

/// The drain daemon's settings (`[drain]`, system file only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainConfig {
    /// The spool directory, if configured.
    pub spool: Option<PathBuf>,
    /// The directories job worktrees must lie strictly below. Empty: every job is refused.
    pub worktree_roots: Vec<PathBuf>,
    /// How long running jobs get to finish after SIGTERM/SIGINT.
    pub grace: Duration,
    /// Owners whose job files are accepted; `None`: root and the daemon's own uid.
    pub allow_uids: Option<Vec<u32>>,
    /// Jobs run at once unless `--jobs` says otherwise.
    pub jobs: Option<u32>,
    /// The most each job may have (`memory_max`, `tasks_max`, `cpu_max`, `log_max`), as
    /// written: `None` where the key is absent. The defaults are the daemon's to fill in
    /// ([`limits::with_defaults`]).
    pub caps: JobCaps,
    /// The size of each job's own `/tmp` and `/dev/shm` (`tmp_size`); `None`: the job's
    /// memory cap, else [`limits::DEFAULT_TMP_SIZE`].
    pub tmp_size: Option<u64>,
}

impl Default for DrainConfig {
    fn default() -> Self {
        DrainConfig {
            spool: None,
            worktree_roots: Vec::new(),
            grace: DEFAULT_GRACE,
            allow_uids: None,
            jobs: None,
            caps: JobCaps::default(),
            tmp_size: None,
        }
    }
}

/// The validated configuration: system file plus the optional per-user file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Refuse to launch on kernels whose Landlock ABI is below this.
    pub min_abi: u32,
    /// Extra read-only paths for every agent.
    pub read_only: Vec<PathBuf>,
    /// Extra writable paths for every agent.
    pub writable: Vec<PathBuf>,
    /// Extra environment names and patterns for every agent.
    pub env_allow: Vec<EnvPattern>,
    /// How `$HOME` is granted.
    pub home: HomeMode,
    /// Settings written with an old spelling, one line each (for `doctor`).
    pub deprecated: Vec<String>,
    /// Refuse to launch when the private mount namespace that keeps a linked worktree's
    /// repository objects unchangeable is refused by the kernel (instead of going on with
    /// the objects writable, and saying so).
    pub protect_required: bool,
    /// Which terminals the agent may open: its own (a private /dev/pts) or every one.
    pub terminals: Terminals,
    /// Changes to the default protected paths (`protect`), in order: system file first.
    pub protect: Vec<crate::protect::Change>,
    /// Paths denied inside granted directories (added to the built-in ones for root).
    pub deny: Vec<DenyPattern>,
    /// Extra devices granted read-write with ioctls.
    pub devices: Vec<PathBuf>,
    /// TCP port rules.
    pub network: Network,
    /// Unix sockets for every agent.
    pub unix: UnixConfig,
    /// Per-agent sections.
    pub agents: BTreeMap<String, AgentConfig>,
    /// The drain daemon's section.
    pub drain: DrainConfig,
    /// The files that were read, in order (for `doctor` and error messages).
    pub sources: Vec<PathBuf>,
    /// Where each configured path was written, for the errors the policy finds later.
    pub places: Places,
    /// Whether `sources[0]` is the system file (it is absent when no system file exists).
    pub has_system_source: bool,
    /// `home` as the system file left it: the per-user file may make it strict, which must
    /// not be what makes that same file read-only (see `plan::build_policy`).
    pub system_home: HomeMode,
    /// How many of `deny` came from the system file (the rest are the per-user file's).
    pub system_deny: usize,
    /// The keys of the per-user file that widen the wall (`writable`, `env_allow`, …): only
    /// honoured when the agent cannot rewrite that file (see `plan::build_policy`).
    pub user_widening: Vec<&'static str>,
    /// The device and inode of the per-user file that was read: the judgement of whether the
    /// agent could have written it must be about that very file (see `plan::build_policy`).
    pub user_file_id: Option<(u64, u64)>,
    /// The owner and mode of the per-user file that was read (from the opened file).
    pub user_file_owner: Option<(u32, u32)>,
    /// Paths the caller keeps out of every grant on top of [`OffLimits::defaults`] (the
    /// drain adds its own spool and home). Not read from any file.
    pub off_limits: Vec<OffLimits>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_abi: DEFAULT_MIN_ABI,
            read_only: Vec::new(),
            writable: Vec::new(),
            env_allow: Vec::new(),
            home: HomeMode::default(),
            deprecated: Vec::new(),
            protect_required: false,
            terminals: Terminals::Own,
            protect: Vec::new(),
            deny: Vec::new(),
            devices: Vec::new(),
            network: Network::default(),
            unix: UnixConfig::default(),
            agents: BTreeMap::new(),
            drain: DrainConfig::default(),
            sources: Vec::new(),
            places: Places::default(),
            has_system_source: false,
            system_home: HomeMode::default(),
            system_deny: 0,
            user_widening: Vec::new(),
            user_file_id: None,
            user_file_owner: None,
            off_limits: Vec::new(),
        }
    }
}

impl Config {
    /// The per-user file, if one was read.
    pub fn user_source(&self) -> Option<&Path> {
        let first_user = usize::from(self.has_system_source);
        self.sources.get(first_user).map(PathBuf::as_path)
    }

    /// The system file, if one was read.
    pub fn system_source(&self) -> Option<&Path> {
        self.has_system_source
            .then(|| self.sources.first().map(PathBuf::as_path))
            .flatten()
    }

    /// The section for `agent`, or an empty one.
    pub fn agent(&self, agent: &str) -> &AgentConfig {
        static NONE: AgentConfig = AgentConfig {
            real: None,
            read_only: Vec::new(),
            writable: Vec::new(),
            env_allow: Vec::new(),
            unix: UnixConfig {
                sockets: Vec::new(),
                allow_all: false,
            },
        };
        self.agents.get(agent).unwrap_or(&NONE)
    }

    /// The Unix socket settings for `agent`: `[unix]` and `[agents.NAME.unix]` together.
    pub fn unix_for(&self, agent: &str) -> UnixConfig {
        let mut u = self.unix.clone();
        u.merge(self.agent(agent).unix.clone());
        u
    }

    /// Every path the configuration grants `agent` (devices, writable and read-only, at the
    /// top level and in its section).
    pub fn paths_for(&self, agent: &str) -> impl Iterator<Item = &PathBuf> {
        let own = self.agent(agent);
        [
            &self.devices,
            &self.writable,
            &own.writable,
            &self.read_only,
            &own.read_only,
        ]
        .into_iter()
        .flatten()
    }
}

/// Where each configured path was written: its key, file and line. A path that turns out
/// wrong only when the policy is built (it does not exist, is not a socket, goes through a
/// link the agent can rewrite) is reported at the line that named it, so the user knows
/// which file to fix, the system's or their own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places(BTreeMap<PathBuf, String>);

impl Places {
    /// Records the first place that names `path`.
    fn record(&mut self, path: &Path, key: &str, file: &Path, line: usize) {
        self.0
            .entry(path.to_path_buf())
            .or_insert_with(|| format!("`{key}` at {}:{line}", file.display()));
    }

    /// "`KEY` at FILE:LINE" for a configured path, or "`KEY` in the configuration" for one
    /// that was not read from a file (a configuration built in code).
    pub fn describe(&self, path: &Path, key: &str) -> String {
        self.0
            .get(path)
            .cloned()
            .unwrap_or_else(|| format!("`{key}` in the configuration"))
    }
}

/// Where the configuration files are, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPaths {
    /// The system file (`LANDWALL_CONFIG` or [`SYSTEM_CONFIG`]).
    pub system: PathBuf,
    /// The per-user file, if `XDG_CONFIG_HOME` or `HOME` names where it would be.
    pub user: Option<PathBuf>,
}

impl ConfigPaths {
    /// Derives the paths from `LANDWALL_CONFIG`, `XDG_CONFIG_HOME` and `HOME`.
    pub fn from_env(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> ConfigPaths {
        let system = lookup("LANDWALL_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(SYSTEM_CONFIG));
        let user_base = lookup("XDG_CONFIG_HOME")
            .filter(|v| Path::new(v).is_absolute())
            .map(PathBuf::from)
            .or_else(|| {
                lookup("HOME")
                    .filter(|v| Path::new(v).is_absolute())
                    .map(|h| PathBuf::from(h).join(".config"))
            });
        ConfigPaths {
            system,
            user: user_base.map(|b| b.join("landwall").join("landwall.toml")),
        }
    }
}

/// Loads the system file, then lets the per-user file add to it. A missing file is not an
/// error (the default policy applies); an unreadable or invalid one is.
pub fn load(paths: &ConfigPaths) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    if let Some((text, _)) = read_optional(&paths.system, Trust::RootOwned)? {
        let raw = parse(&paths.system, &text)?;
        merge(&mut config, raw, &paths.system, &text, Origin::System)?;
        config.sources.push(paths.system.clone());
        config.has_system_source = true;
    }
    config.system_home = config.home;
    config.system_deny = config.deny.len();
    if let Some(user) = &paths.user {
        if let Some((text, stat)) = read_optional(user, Trust::Any)? {
            config.user_file_id = stat.map(|s| (s.dev, s.ino));
            config.user_file_owner = stat.map(|s| (s.uid, s.mode));
            let raw = parse(user, &text)?;
            merge(&mut config, raw, user, &text, Origin::User)?;
            config.sources.push(user.clone());
        }
    }
    Ok(config)
}

/// Parses and validates one file's text on its own (for tests and `doctor`).
pub fn from_str(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    let raw = parse(path, text)?;
    merge(&mut config, raw, path, text, Origin::System)?;
    config.sources.push(path.to_path_buf());
    config.has_system_source = true;
    config.system_home = config.home;
    config.system_deny = config.deny.len();
    Ok(config)
}

/// Who may own a configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// The system file: the agent must not be able to rewrite it, so it (and its directory)
    /// must be owned by root and not writable by group or others.
    RootOwned,
    /// The per-user file (documented as writable by the agent under the default policy).
    Any,
}

/// What was read of the per-user file's metadata, on the opened file.
#[derive(Debug, Clone, Copy)]
struct FileStat {
    dev: u64,
    ino: u64,
    uid: u32,
    mode: u32,
}

/// The file's text, and for the per-user file its metadata.
type Read = (String, Option<FileStat>);

fn read_optional(path: &Path, trust: Trust) -> Result<Option<Read>, ConfigError> {
    use std::os::unix::fs::MetadataExt;
    let read_err = |source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    };
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(read_err(e)),
    };
    let mut size = 0;
    let mut id = None;
    if trust == Trust::Any {
        let meta = file.metadata().map_err(read_err)?;
        size = usize::try_from(meta.len()).unwrap_or(0);
        id = Some(FileStat {
            dev: meta.dev(),
            ino: meta.ino(),
            uid: meta.uid(),
            mode: meta.mode(),
        });
    }
    if trust == Trust::RootOwned {
        // Checked on the opened file, so a swap after the check cannot change what is read.
        let meta = file.metadata().map_err(read_err)?;
        size = usize::try_from(meta.len()).unwrap_or(0);
        let dir = path.parent().unwrap_or(Path::new("/"));
        let dir_meta = std::fs::metadata(dir).map_err(read_err)?;
        // A sticky directory (like /var/tmp) does not let others replace root's file.
        let sticky = dir_meta.mode() & 0o1000 != 0;
        for (what, m, p, ok_if_sticky) in [
            ("file", &meta, path, false),
            ("directory", &dir_meta, dir, sticky),
        ] {
            if m.uid() != 0 || (m.mode() & 0o022 != 0 && !ok_if_sticky) {
                return Err(ConfigError::Invalid {
                    path: path.to_path_buf(),
                    line: None,
                    message: format!(
                        "refusing the configuration: its {what} {} must be owned by root and not writable by group or others (it is uid {}, mode {:o}); fix with `chown root: {} && chmod go-w {}`",
                        p.display(),
                        m.uid(),
                        m.mode() & 0o7777,
                        p.display(),
                        p.display()
                    ),
                });
            }
        }
    }
    crate::read_text(&mut file, size)
        .map(|text| Some((text, id)))
        .map_err(read_err)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    min_abi: Option<Spanned<u32>>,
    #[serde(default)]
    read_only: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    writable: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    env_allow: Vec<Spanned<String>>,
    home: Option<Spanned<String>>,
    protect_required: Option<bool>,
    #[serde(default)]
    protect: Vec<Spanned<String>>,
    terminals: Option<Spanned<String>>,
    #[serde(default)]
    deny: Vec<Spanned<String>>,
    #[serde(default)]
    devices: Vec<Spanned<PathBuf>>,
    network: Option<RawNetwork>,
    unix: Option<RawUnix>,
    #[serde(default)]
    agents: BTreeMap<String, RawAgent>,
    drain: Option<Spanned<RawDrain>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDrain {
    spool: Option<Spanned<PathBuf>>,
    #[serde(default)]
    worktree_roots: Vec<Spanned<PathBuf>>,
    grace: Option<Spanned<String>>,
    allow_uids: Option<Vec<Spanned<u32>>>,
    jobs: Option<Spanned<u32>>,
    memory_max: Option<Spanned<String>>,
    tasks_max: Option<Spanned<u32>>,
    cpu_max: Option<Spanned<String>>,
    log_max: Option<Spanned<String>>,
    tmp_size: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    connect_tcp: Option<Vec<u16>>,
    bind_tcp: Option<Vec<u16>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUnix {
    #[serde(default)]
    sockets: Vec<Spanned<PathBuf>>,
    allow_all: Option<bool>,
}

impl RawUnix {
    /// Whether it lets the agent reach anything.
    fn widens(&self) -> bool {
        !self.sockets.is_empty() || self.allow_all == Some(true)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    real: Option<Spanned<PathBuf>>,
    #[serde(default)]
    read_only: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    writable: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    env_allow: Vec<Spanned<String>>,
    unix: Option<RawUnix>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    System,
    User,
}

fn parse(path: &Path, text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str::<RawConfig>(text).map_err(|e| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: format!("{} (see docs/configuration.md, /usr/share/doc/landwall)", {
            e.message().trim_end()
        }),
    })
}

/// A configured path may not go up with `..`: a check of the path as written (under /dev,
/// not `/`) would pass `/dev/pts/..` or `/etc/..`, which name something else. The policy
/// checks what each path resolves to as well.
fn refuse_parent(p: &Path) -> Result<(), String> {
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(format!(
            "`{}` goes up with `..`; write the path it means",
            p.display()
        ));
    }
    Ok(())
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Validator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Validator<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        message: impl fmt::Display,
    ) -> Result<T, ConfigError> {
        Err(ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: Some(line_of(self.text, span.start)),
            message: message.to_string(),
        })
    }

    fn paths(
        &self,
        key: &str,
        values: Vec<Spanned<PathBuf>>,
        places: &mut Places,
    ) -> Result<Vec<PathBuf>, ConfigError> {
        values
            .into_iter()
            .map(|v| {
                let span = v.span();
                places.record(v.get_ref(), key, self.path, line_of(self.text, span.start));
                let p = v.into_inner();
                // `/` however written (`//`, `/.`, `/..`); a forward walk that stops at the
                // first name, not a comparison of components from the end.
                let root = p.components().all(|c| {
                    matches!(c, Component::RootDir | Component::CurDir | Component::ParentDir)
                });
                if root {
                    return self.err(
                        span,
                        format!("`{key}`: granting `/` would make the wall meaningless; name the directories the agent needs"),
                    );
                }
                if !p.is_absolute() {
                    return self.err(
                        span,
                        format!(
                            "`{key}`: `{}` is not an absolute path; write it from `/`",
                            p.display()
                        ),
                    );
                }
                refuse_parent(&p).or_else(|why| self.err(span, format!("`{key}`: {why}")))?;
                Ok(p)
            })
            .collect()
    }

    /// `[unix]`: absolute socket paths (`/` is refused like any other grant of it).
    fn unix(
        &self,
        section: &str,
        raw: RawUnix,
        places: &mut Places,
    ) -> Result<UnixConfig, ConfigError> {
        let sockets = self.paths(&format!("[{section}] sockets"), raw.sockets, places)?;
        Ok(UnixConfig {
            sockets,
            allow_all: raw.allow_all.unwrap_or(false),
        })
    }

    fn patterns(
        &self,
        key: &str,
        values: Vec<Spanned<String>>,
    ) -> Result<Vec<EnvPattern>, ConfigError> {
        values
            .into_iter()
            .map(|v| {
                let span = v.span();
                EnvPattern::parse(v.get_ref())
                    .or_else(|why| self.err(span, format!("`{key}`: `{}` {why}", v.get_ref())))
            })
            .collect()
    }
}

fn merge(
    config: &mut Config,
    raw: RawConfig,
    path: &Path,
    text: &str,
    origin: Origin,
) -> Result<(), ConfigError> {
    let v = Validator { path, text };
    if origin == Origin::User {
        let agents_widen = raw.agents.values().any(|a| {
            !a.read_only.is_empty()
                || !a.writable.is_empty()
                || !a.env_allow.is_empty()
                || a.unix.as_ref().is_some_and(RawUnix::widens)
        });
        for (key, present) in [
            ("read_only", !raw.read_only.is_empty()),
            ("writable", !raw.writable.is_empty()),
            ("env_allow", !raw.env_allow.is_empty()),
            ("devices", !raw.devices.is_empty()),
            ("network", raw.network.is_some()),
            ("unix", raw.unix.as_ref().is_some_and(RawUnix::widens)),
            ("agents.*", agents_widen),
            // Trimming a protected path (`"!.envrc"`) leaves it writable.
            (
                "protect",
                raw.protect.iter().any(|e| e.get_ref().starts_with('!')),
            ),
        ] {
            if present {
                config.user_widening.push(key);
            }
        }
    }
    if let Some(min) = raw.min_abi {
        let span = min.span();
        let value = *min.get_ref();
        if !(1..=MAX_KNOWN_ABI).contains(&value) {
            return v.err(
                span,
                format!("`min_abi` must be between 1 and {MAX_KNOWN_ABI}, not {value}"),
            );
        }
        config.min_abi = match origin {
            Origin::System => value,
            // The per-user file is writable by the agent under the default policy: it may
            // raise the floor, never lower it.
            Origin::User => config.min_abi.max(value),
        };
    }
    config
        .read_only
        .extend(v.paths("read_only", raw.read_only, &mut config.places)?);
    config
        .writable
        .extend(v.paths("writable", raw.writable, &mut config.places)?);
    config
        .env_allow
        .extend(v.patterns("env_allow", raw.env_allow)?);
    if let Some(required) = raw.protect_required {
        // Either file can require it; the per-user one (which the agent may write) cannot
        // lift the system's requirement.
        match origin {
            Origin::System => config.protect_required = required,
            Origin::User => config.protect_required |= required,
        }
    }
    for entry in raw.protect {
        let span = entry.span();
        match crate::protect::Change::parse(entry.get_ref()) {
            Ok(change) => config.protect.push(change),
            Err(why) => {
                return v.err(
                    span,
                    format!("`protect`: `{}` {why}", entry.get_ref().escape_debug()),
                )
            }
        }
    }
    if let Some(t) = raw.terminals {
        let mode = match t.get_ref().as_str() {
            "own" => Terminals::Own,
            "all" => Terminals::All,
            other => {
                return v.err(
                    t.span(),
                    format!("`terminals` must be \"own\" or \"all\", not \"{other}\""),
                )
            }
        };
        match origin {
            Origin::System => config.terminals = mode,
            // The per-user file may only keep the agent to its own terminals.
            Origin::User => {
                if mode == Terminals::Own {
                    config.terminals = mode;
                }
            }
        }
    }
    if let Some(home) = raw.home {
        let (mode, old) = match home.get_ref().as_str() {
            "private" => (HomeMode::Private, false),
            "read-only" => (HomeMode::ReadOnly, false),
            "open" => (HomeMode::Open, false),
            // The names before "private" became the default.
            "strict" => (HomeMode::ReadOnly, true),
            "default" | "writable" => (HomeMode::Open, true),
            other => {
                return v.err(
                    home.span(),
                    format!(
                        "`home` must be \"private\", \"read-only\" or \"open\", not \"{other}\""
                    ),
                )
            }
        };
        if old {
            config.deprecated.push(format!(
                "{}:{}: home = \"{}\" is now spelled home = \"{}\"",
                path.display(),
                line_of(text, home.span().start),
                home.get_ref(),
                mode.name()
            ));
        }
        match origin {
            Origin::System => config.home = mode,
            // The per-user file, which the agent may once have written, may only hide more.
            Origin::User => {
                if mode.strictness() > config.home.strictness() {
                    config.home = mode;
                }
            }
        }
    }
    for d in raw.deny {
        let span = d.span();
        let pattern = DenyPattern::parse(d.get_ref())
            .or_else(|why| v.err(span, format!("`deny`: `{}` {why}", d.get_ref())))?;
        config.deny.push(pattern);
    }
    for dev in raw.devices {
        let span = dev.span();
        let p = dev.into_inner();
        config
            .places
            .record(&p, "devices", path, line_of(text, span.start));
        refuse_parent(&p).or_else(|why| v.err(span.clone(), format!("`devices`: {why}")))?;
        if !p.is_absolute() || !p.starts_with("/dev") || p == Path::new("/dev") {
            return v.err(
                span,
                format!(
                    "`devices`: `{}` is not a device under /dev; grant other paths with `writable`",
                    p.display()
                ),
            );
        }
        config.devices.push(p);
    }
    if let Some(net) = raw.network {
        let union = |have: &mut Option<Vec<u16>>, add: Option<Vec<u16>>| {
            if let Some(add) = add {
                let list = have.get_or_insert_with(Vec::new);
                list.extend(add);
                list.sort_unstable();
                list.dedup();
            }
        };
        union(&mut config.network.connect_tcp, net.connect_tcp);
        union(&mut config.network.bind_tcp, net.bind_tcp);
    }
    if let Some(unix) = raw.unix {
        let u = v.unix("unix", unix, &mut config.places)?;
        config.unix.merge(u);
    }
    for (name, agent) in raw.agents {
        if !valid_agent_name(&name) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: text.find(&format!("agents.{name}")).map(|o| line_of(text, o)),
                message: format!("`[agents.{name}]`: an agent name is a program name (letters, digits, `-`, `_`, `.`)"),
            });
        }
        let unix_section = format!("agents.{name}.unix");
        let (read_only_key, writable_key, real_key) = (
            format!("[agents.{name}] read_only"),
            format!("[agents.{name}] writable"),
            format!("[agents.{name}] real"),
        );
        let entry = config.agents.entry(name).or_default();
        if let Some(real) = agent.real {
            let span = real.span();
            let p = real.into_inner();
            if !p.is_absolute() {
                return v.err(
                    span,
                    format!("`real`: `{}` is not an absolute path", p.display()),
                );
            }
            refuse_parent(&p).or_else(|why| v.err(span.clone(), format!("`real`: {why}")))?;
            config
                .places
                .record(&p, &real_key, path, line_of(text, span.start));
            entry.real = Some(p);
        }
        entry
            .read_only
            .extend(v.paths(&read_only_key, agent.read_only, &mut config.places)?);
        entry
            .writable
            .extend(v.paths(&writable_key, agent.writable, &mut config.places)?);
        entry
            .env_allow
            .extend(v.patterns("env_allow", agent.env_allow)?);
        if let Some(unix) = agent.unix {
            let u = v.unix(&unix_section, unix, &mut config.places)?;
            entry.unix.merge(u);
        }
    }
    if let Some(drain) = raw.drain {
        if origin == Origin::User {
            // The per-user file is writable by agents under the default policy: the daemon's
            // roots, owners and spool must not come from it.
            return v.err(
                drain.span(),
                "`[drain]` belongs in the system configuration, not the per-user file",
            );
        }
        config.drain = validate_drain(&v, drain.into_inner(), &mut config.places)?;
    }
    Ok(())
}

fn validate_drain(
    v: &Validator<'_>,
    raw: RawDrain,
    places: &mut Places,
) -> Result<DrainConfig, ConfigError> {
    let mut drain = DrainConfig::default();
    if let Some(spool) = raw.spool {
        drain.spool = v.paths("[drain] spool", vec![spool], places)?.pop();
    }
    drain.worktree_roots = v.paths("[drain] worktree_roots", raw.worktree_roots, places)?;
    if let Some(grace) = raw.grace {
        drain.grace = match parse_duration(grace.get_ref()) {
            Ok(d) => d,
            Err(why) => return v.err(grace.span(), format!("`grace`: {why}")),
        };
    }
    if let Some(uids) = raw.allow_uids {
        drain.allow_uids = Some(uids.into_iter().map(Spanned::into_inner).collect());
    }
    if let Some(jobs) = raw.jobs {
        let n = *jobs.get_ref();
        if !(1..=MAX_DRAIN_JOBS).contains(&n) {
            return v.err(
                jobs.span(),
                format!("`jobs` must be between 1 and {MAX_DRAIN_JOBS}, not {n}"),
            );
        }
        drain.jobs = Some(n);
    }
    drain.caps.memory = cap(v, "memory_max", raw.memory_max, limits::parse_size)?;
    drain.caps.cpu = cap(v, "cpu_max", raw.cpu_max, limits::parse_cpu)?;
    drain.caps.log = cap(v, "log_max", raw.log_max, limits::parse_size)?;
    drain.tmp_size = cap(v, "tmp_size", raw.tmp_size, limits::parse_size)?;
    if let Some(tasks) = raw.tasks_max {
        let n = *tasks.get_ref();
        if n == 0 {
            return v.err(
                tasks.span(),
                "`tasks_max` must be at least 1: a cap of zero would stop every job",
            );
        }
        drain.caps.tasks = Some(n);
    }
    Ok(drain)
}

/// One `[drain]` cap written as text (`memory_max = "512M"`, `cpu_max = "150%"`), parsed;
/// an error names the key and its line.
fn cap<T>(
    v: &Validator<'_>,
    key: &str,
    value: Option<Spanned<String>>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|text| {
            parse(text.get_ref()).or_else(|why| v.err(text.span(), format!("`{key}`: {why}")))
        })
        .transpose()
}

/// Parses a duration written as one or more `<integer><unit>` groups, units `ms`, `s`, `m`,
/// `h` and `d`: `"30s"`, `"10m"`, `"1h30m"`. A bare number is refused: say the unit.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("`{text}` is not a duration: write it like `30s`, `10m`, `1h30m` (units ms, s, m, h, d)")
    };
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86400),
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        let part = u32::try_from(n)
            .ok()
            .and_then(|n| unit.checked_mul(n))
            .ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
    }
    Ok(total)
}

/// Whether `name` can be an agent (a program name with no path separator).
pub fn valid_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn empty_file_is_the_default_policy() {
        let c = from_str(&p("/x.toml"), "").expect("empty config is valid");
        assert_eq!(c.min_abi, DEFAULT_MIN_ABI);
        assert!(c.read_only.is_empty() && c.writable.is_empty() && c.agents.is_empty());
    }

    #[test]
    fn full_example_parses() {
        let text = r#"
min_abi = 4
read_only = ["/srv/data"]
writable = ["/var/cache/ccache"]
env_allow = ["MY_TOKEN", "CI_*"]

[agents.claude]
real = "/opt/claude/bin/claude"
writable = ["/var/tmp/claude"]
env_allow = ["AWS_REGION"]
"#;
        let c = from_str(&p("/x.toml"), text).expect("valid");
        assert_eq!(c.min_abi, 4);
        assert_eq!(c.read_only, vec![p("/srv/data")]);
        let claude = c.agent("claude");
        assert_eq!(claude.real, Some(p("/opt/claude/bin/claude")));
        assert_eq!(claude.writable, vec![p("/var/tmp/claude")]);
        assert_eq!(claude.env_allow.len(), 1);
        assert_eq!(c.agent("codex"), &AgentConfig::default());
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e =
            from_str(&p("/etc/l.toml"), "min_abi = 3\nwritabel = [\"/x\"]\n").expect_err("typo");
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/l.toml:2: "), "{msg}");
        assert!(msg.contains("writabel"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
    }

    #[test]
    fn unknown_key_in_agent_section_is_an_error() {
        let e = from_str(&p("/c"), "[agents.claude]\nreal_path = \"/x\"\n").expect_err("unknown");
        assert!(e.to_string().starts_with("/c:2: "), "{e}");
    }

    #[test]
    fn wrong_type_is_an_error() {
        let e = from_str(&p("/c"), "\nmin_abi = \"three\"\n").expect_err("type");
        assert!(e.to_string().starts_with("/c:2: "), "{e}");
    }

    #[test]
    fn parent_components_are_refused_for_every_path_key() {
        for text in [
            "read_only = [\"/usr/../etc\"]",
            "writable = [\"/etc/..\"]",
            "devices = [\"/dev/pts/..\"]",
            "[unix]\nsockets = [\"/run/../x\"]",
            "[agents.claude]\nwritable = [\"/srv/../home\"]",
            "[agents.claude]\nreal = \"/opt/../bin/sh\"",
            "[drain]\nspool = \"/var/../tmp\"",
            "[drain]\nworktree_roots = [\"/srv/..\"]",
        ] {
            let e = from_str(&p("/c"), text).expect_err(text).to_string();
            assert!(e.contains("goes up with `..`"), "{text}: {e}");
            assert!(e.starts_with("/c:"), "{text}: no line: {e}");
        }
    }

    #[test]
    fn relative_path_is_refused_with_its_line() {
        let e = from_str(&p("/c"), "read_only = [\n  \"/ok\",\n  \"rel/path\",\n]\n")
            .expect_err("relative");
        let msg = e.to_string();
        assert!(msg.starts_with("/c:3: "), "{msg}");
        assert!(msg.contains("rel/path"), "{msg}");
    }

    #[test]
    fn bad_env_pattern_is_refused() {
        for bad in ["\"A*B\"", "\"\"", "\"*\"", "\"HAS SPACE\""] {
            let text = format!("env_allow = [{bad}]\n");
            assert!(from_str(&p("/c"), &text).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn min_abi_range_is_checked() {
        assert!(from_str(&p("/c"), "min_abi = 0").is_err());
        assert!(from_str(&p("/c"), "min_abi = 65").is_err());
        assert!(from_str(&p("/c"), "min_abi = 1").is_ok());
    }

    #[test]
    fn bad_agent_name_is_refused() {
        assert!(from_str(&p("/c"), "[agents.\"../x\"]\n").is_err());
    }

    #[test]
    fn user_file_adds_and_cannot_lower_the_floor() {
        let dir = std::env::temp_dir().join(format!("lw-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("u/landwall")).expect("mkdir");
        std::fs::write(dir.join("sys.toml"), "min_abi = 5\nwritable = [\"/a\"]\n").expect("write");
        std::fs::write(
            dir.join("u/landwall/landwall.toml"),
            "min_abi = 1\nwritable = [\"/b\"]\n",
        )
        .expect("write");
        let paths = ConfigPaths {
            system: dir.join("sys.toml"),
            user: Some(dir.join("u/landwall/landwall.toml")),
        };
        let c = load(&paths).expect("valid");
        assert_eq!(c.min_abi, 5);
        assert_eq!(c.writable, vec![p("/a"), p("/b")]);
        assert_eq!(c.sources.len(), 2);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn hardening_keys_parse() {
        let text = r#"
home = "strict"
deny = ["/etc/sudoers*", "/srv/x"]
devices = ["/dev/kvm"]
[network]
connect_tcp = [443, 22, 443]
"#;
        let c = from_str(&p("/c"), text).expect("valid");
        // The old spelling of read-only, noted for doctor.
        assert_eq!(c.home, HomeMode::ReadOnly);
        assert_eq!(c.deprecated.len(), 1, "{:?}", c.deprecated);
        assert!(c.deprecated[0].contains("read-only"), "{:?}", c.deprecated);
        assert_eq!(c.deny.len(), 2);
        assert_eq!(c.devices, vec![p("/dev/kvm")]);
        assert_eq!(c.network.connect_tcp, Some(vec![22, 443]));
        assert_eq!(c.network.bind_tcp, None);
        assert!(c.network.is_restricted());
    }

    #[test]
    fn unix_sockets_parse_per_agent_and_widen_from_the_user_file() {
        let text = r#"
[unix]
sockets = ["/run/user/1/ssh.sock"]
[agents.codex.unix]
sockets = ["/run/user/1/docker.sock"]
allow_all = true
"#;
        let c = from_str(&p("/c"), text).expect("valid");
        assert_eq!(c.unix.sockets, vec![p("/run/user/1/ssh.sock")]);
        assert!(!c.unix_for("claude").allow_all);
        let codex = c.unix_for("codex");
        assert!(codex.allow_all);
        assert_eq!(
            codex.sockets,
            vec![p("/run/user/1/ssh.sock"), p("/run/user/1/docker.sock")]
        );
        for (bad, line) in [
            ("[unix]\nsockets = [\"rel.sock\"]", 2),
            ("[unix]\nsockets = [\"/\"]", 2),
            ("[unix]\nallow_all = \"yes\"", 2),
            ("[unix]\nsocket = []", 2),
        ] {
            match from_str(&p("/c"), bad) {
                Err(ConfigError::Invalid { line: l, .. }) => assert_eq!(l, Some(line), "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn hardening_keys_are_validated() {
        for (bad, line) in [
            ("\nhome = \"loose\"", 2),
            ("deny = [\"relative\"]", 1),
            ("deny = [\"/a*/b\"]", 1),
            ("deny = [\"/etc/*\"]", 1),
            ("\n\ndevices = [\"/etc/passwd\"]", 3),
            ("[network]\nconnect_tcp = [70000]", 2),
            ("[network]\nudp = [53]", 2),
        ] {
            let e = from_str(&p("/c"), bad).expect_err(bad);
            assert!(
                e.to_string().starts_with(&format!("/c:{line}: ")),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn deny_patterns_match_the_last_component() {
        let d = DenyPattern::parse("/etc/ssh/ssh_host_*_key").expect("valid");
        assert_eq!(d.dir, p("/etc/ssh"));
        assert!(d.matches("ssh_host_ed25519_key"));
        assert!(!d.matches("ssh_host_ed25519_key.pub"));
        let d = DenyPattern::parse("/etc/sudoers*").expect("valid");
        assert!(d.matches("sudoers") && d.matches("sudoers.d"));
        assert!(!d.matches("sudo.conf"));
        let d = DenyPattern::parse("/etc/shadow").expect("valid");
        assert!(d.matches("shadow") && !d.matches("shadow-"));
        // Every shape of pattern against names that share prefixes, suffixes and middles:
        // `*` matches any run of characters, including none, and the first and last pieces
        // anchor at the ends.
        for (pattern, yes, no) in [
            ("a*", &["a", "ab", "a*"][..], &["", "ba", "b"][..]),
            ("*b", &["b", "ab", "bb"], &["ba", ""]),
            ("a*b", &["ab", "axb", "abab"], &["a", "b", "aba", "ba"]),
            ("ab*ba", &["abba", "abxba"], &["aba", "ab", "ba"]),
            (
                "a*b*c",
                &["abc", "axbyc", "abbc", "acbc"],
                &["ac", "acb", "abcx", "xabc"],
            ),
            ("*x*", &["x", "axb", "xx"], &["", "ab"]),
        ] {
            let d = DenyPattern::parse(&format!("/d/{pattern}")).expect("valid");
            for name in yes {
                assert!(d.matches(name), "{pattern} should match {name:?}");
            }
            for name in no {
                assert!(!d.matches(name), "{pattern} should not match {name:?}");
            }
        }
    }

    #[test]
    fn user_file_cannot_loosen_home() {
        let dir = std::env::temp_dir().join(format!("lw-config-home-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("u/landwall")).expect("mkdir");
        let paths = ConfigPaths {
            system: dir.join("sys.toml"),
            user: Some(dir.join("u/landwall/landwall.toml")),
        };
        // (system, user, result): the system file sets it; the user file may only hide more.
        for (system, user, want) in [
            ("", "", HomeMode::Private),
            ("", "home = \"open\"\n", HomeMode::Private),
            (
                "home = \"read-only\"\n",
                "home = \"open\"\n",
                HomeMode::ReadOnly,
            ),
            (
                "home = \"strict\"\n",
                "home = \"default\"\n",
                HomeMode::ReadOnly,
            ),
            (
                "home = \"open\"\n",
                "home = \"read-only\"\n",
                HomeMode::ReadOnly,
            ),
            (
                "home = \"open\"\n",
                "home = \"private\"\n",
                HomeMode::Private,
            ),
            ("home = \"open\"\n", "", HomeMode::Open),
            (
                "home = \"read-only\"\n",
                "home = \"private\"\n",
                HomeMode::Private,
            ),
        ] {
            std::fs::write(dir.join("sys.toml"), system).expect("write");
            std::fs::write(dir.join("u/landwall/landwall.toml"), user).expect("write");
            assert_eq!(
                load(&paths).expect("valid").home,
                want,
                "system {system:?}, user {user:?}"
            );
        }
        assert!(from_str(&p("/c"), "home = \"strict-ish\"").is_err());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn system_file_must_be_root_owned_and_not_writable_by_others() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lw-config-owner-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let file = dir.join("sys.toml");
        std::fs::write(&file, "min_abi = 3\n").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).expect("chmod");
        let paths = ConfigPaths {
            system: file.clone(),
            user: None,
        };
        let e = load(&paths).expect_err("group/other-writable");
        assert!(e.to_string().contains("must be owned by root"), "{e}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        // Root runs the tests (the kernel tests need it); a root-owned 0644 file is trusted.
        if nix::unistd::geteuid().is_root() {
            assert!(load(&paths).is_ok());
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn missing_files_mean_defaults() {
        let paths = ConfigPaths {
            system: p("/nonexistent/landwall.toml"),
            user: Some(p("/nonexistent/user.toml")),
        };
        let c = load(&paths).expect("defaults");
        assert_eq!(c, Config::default());
    }

    #[test]
    fn drain_section_parses_and_defaults() {
        let c = from_str(&p("/c"), "").expect("empty");
        assert_eq!(c.drain, DrainConfig::default());
        assert_eq!(c.drain.grace, DEFAULT_GRACE);
        let text = r#"
[drain]
spool = "/srv/spool"
worktree_roots = ["/srv/work", "/home/agents"]
grace = "1m30s"
allow_uids = [0, 1000]
jobs = 4
memory_max = "2G"
tasks_max = 512
cpu_max = "150%"
log_max = "16M"
tmp_size = "256M"
"#;
        let c = from_str(&p("/c"), text).expect("valid");
        assert_eq!(c.drain.spool, Some(p("/srv/spool")));
        assert_eq!(
            c.drain.worktree_roots,
            vec![p("/srv/work"), p("/home/agents")]
        );
        assert_eq!(c.drain.grace, Duration::from_secs(90));
        assert_eq!(c.drain.allow_uids, Some(vec![0, 1000]));
        assert_eq!(c.drain.jobs, Some(4));
        assert_eq!(
            c.drain.caps,
            JobCaps {
                memory: Some(2 << 30),
                tasks: Some(512),
                cpu: Some(150),
                log: Some(16 << 20),
            }
        );
        assert_eq!(c.drain.tmp_size, Some(256 << 20));
        let c = from_str(&p("/c"), "[drain]\nmemory_max = \"512M\"\n").expect("one cap");
        assert_eq!(
            c.drain.caps,
            JobCaps {
                memory: Some(512 << 20),
                ..JobCaps::default()
            },
            "absent keys stay unset: the defaults are the daemon's"
        );
    }

    #[test]
    fn drain_section_is_validated() {
        for (text, line, needle) in [
            ("[drain]\nspoool = \"/x\"\n", 2, "spoool"),
            ("[drain]\nspool = \"rel\"\n", 2, "rel"),
            ("[drain]\nworktree_roots = [\"/a\", \"b\"]\n", 2, "`b`"),
            ("[drain]\ngrace = \"30\"\n", 2, "`30`"),
            ("[drain]\njobs = 0\n", 2, "jobs"),
            ("[drain]\nallow_uids = [-1]\n", 2, ""),
            (
                "[drain]\njobs = 2\nmemory_max = \"12X\"\n",
                3,
                "`memory_max`: `12X` is not a size",
            ),
            ("[drain]\nmemory_max = \"0\"\n", 2, "`memory_max`"),
            ("[drain]\ntasks_max = 0\n", 2, "`tasks_max`"),
            ("[drain]\ntasks_max = -3\n", 2, ""),
            ("[drain]\ntasks_max = \"64\"\n", 2, ""),
            (
                "[drain]\ncpu_max = \"150\"\n",
                2,
                "`cpu_max`: `150` is not a CPU share",
            ),
            ("[drain]\ncpu_max = 150\n", 2, ""),
            ("[drain]\n\nlog_max = \"1.5G\"\n", 3, "`log_max`: `1.5G`"),
            (
                "[drain]\ntmp_size = \"lots\"\n",
                2,
                "`tmp_size`: `lots` is not a size",
            ),
            ("[drain]\ntmp_size = \"0\"\n", 2, "`tmp_size`"),
        ] {
            let e = from_str(&p("/c"), text).expect_err(text).to_string();
            assert!(e.starts_with(&format!("/c:{line}: ")), "{text}: {e}");
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn drain_section_is_refused_in_the_user_file() {
        let dir = std::env::temp_dir().join(format!("lw-config-drain-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("user.toml"), "[drain]\nallow_uids = [1000]\n").expect("write");
        let paths = ConfigPaths {
            system: dir.join("none.toml"),
            user: Some(dir.join("user.toml")),
        };
        let e = load(&paths).expect_err("user [drain]").to_string();
        assert!(e.contains("system configuration"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2d"), Ok(Duration::from_secs(172800)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        for bad in ["", "30", "s", "5x", "1.5s", "-1s", "30 s", "99999999999h"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn paths_from_env() {
        let env = |k: &str| match k {
            "LANDWALL_CONFIG" => Some("/t/c.toml".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        };
        let paths = ConfigPaths::from_env(env);
        assert_eq!(paths.system, p("/t/c.toml"));
        assert_eq!(
            paths.user,
            Some(p("/home/u/.config/landwall/landwall.toml"))
        );
        let xdg = |k: &str| (k == "XDG_CONFIG_HOME").then(|| "/x".into());
        let paths = ConfigPaths::from_env(xdg);
        assert_eq!(paths.system, p(SYSTEM_CONFIG));
        assert_eq!(paths.user, Some(p("/x/landwall/landwall.toml")));
    }
}
