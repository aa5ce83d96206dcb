//! `landwall doctor`: can the wall go up here, what would each shim run, and what does the
//! policy leave open, inside the wall and beside it (servers the agent can still reach).
//! Exits non-zero when the shim could not work on this machine.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use landwall::agent::{FileId, Found};
use landwall::config::{self, ConfigPaths, DenyPattern, DEFAULT_MIN_ABI};
use landwall::plan::{self, var};
use landwall::policy::{Access, Policy};
use landwall::profile;
use landwall::wall::{self, UnixGuard};
use landwall::worktree::{GitLayout, RepoScan, RepoWalk};

/// The agents landwall ships shims for.
pub const KNOWN_AGENTS: &[&str] = &["claude", "opencode", "codex"];

/// Runs the checks; prints a report on stdout; returns the exit status.
pub fn run(vars: &plan::Vars) -> i32 {
    let mut r = Report::default();
    let mut ok = true;

    r.line(format!("landwall {}", env!("CARGO_PKG_VERSION")));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let paths = ConfigPaths::from_env(|k| var(vars, k).map(OsString::from));

    // Configuration first: it sets the minimum ABI.
    let config = match config::load(&paths) {
        Ok(c) => {
            if c.sources.is_empty() {
                r.line(format!(
                    "config      {}: not present; the default policy applies",
                    paths.system.display()
                ));
            }
            for s in &c.sources {
                r.line(format!("config      {}: valid", s.display()));
            }
            c
        }
        Err(e) => {
            ok = false;
            r.line(format!("config      INVALID: {e}"));
            config::Config::default()
        }
    };
    for d in &config.deprecated {
        r.line(format!("note        {d}; the old name still works"));
    }
    // The policy for the cwd: what the exposure lines (and the user config's) say comes
    // from its `decide`.
    let policy = cwd_policy(vars, &config);
    if let Some(user) = &paths.user {
        r.line(user_config_line(user, policy.as_ref().ok()));
    }

    // Kernel.
    let kernel = wall::kernel_abi();
    match &kernel {
        Ok(abi) => {
            let abi = *abi;
            r.line(format!(
                "kernel      {} with Landlock ABI {abi}",
                release.trim()
            ));
            for (name, since, on) in wall::features(abi) {
                let when = match (on, since) {
                    (false, _) => ": NOT available on this kernel, so not enforced",
                    (true, 4) if !config.network.is_restricted() => {
                        ": available; enforced only when [network] lists ports"
                    }
                    (true, _) => ": enforced",
                };
                r.line(format!(
                    "  [{}] {name} (ABI {since}){when}",
                    if on { "x" } else { " " }
                ));
            }
            let source = if config.min_abi == DEFAULT_MIN_ABI {
                "default"
            } else {
                "configured"
            };
            if abi >= config.min_abi {
                r.line(format!("min ABI     {} ({source}): met", config.min_abi));
            } else {
                ok = false;
                r.line(format!(
                    "min ABI     {} ({source}): NOT MET — the shim refuses to launch agents on this kernel",
                    config.min_abi
                ));
            }
        }
        Err(e) => {
            ok = false;
            r.line(format!("kernel      {}: {e}", release.trim()));
        }
    }

    // Agents.
    let me = plan::current_exe_id().ok();
    for agent in KNOWN_AGENTS {
        r.line(agent_line(agent, vars, &config, me));
    }

    // The drain's memory caps: refused where no memory.max can hold them.
    r.line(drain_memory_line(&config));

    // What the policy for this directory leaves open.
    // Its lines quote names of files and directories in $HOME, escaped one by one.
    for l in exposure(vars, &policy, me) {
        r.escaped(&l);
    }
    // What the agents' state names that they run or follow (a plant made before landwall
    // held it shows here).
    for l in agent_state_lines(var(vars, "HOME").map(Path::new)) {
        r.escaped(&l);
    }
    // Where OpenCode sends the user's code: its sign-ins (a sign-in planted before landwall
    // judged them shows here).
    if let Some(l) = sign_in_line(vars) {
        r.escaped(&l);
    }
    // The doors beside the wall: loopback listeners, Unix sockets, what the filter refuses.
    // Their lines quote socket paths and process names any local process chooses, escaped
    // here, one by one (a newline in a name must not start a line of its own).
    let doors = doors(&config, kernel.as_ref().ok().copied(), &paths.system);
    ok &= doors.ok;
    for l in &doors.lines {
        r.escaped(l);
    }
    r.line(if ok {
        "result      the shim can wall agents in on this machine".to_string()
    } else {
        "result      the shim CANNOT work here; see the lines above".to_string()
    });

    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(r.out.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return landwall::exit::OUTPUT;
    }
    if ok {
        0
    } else {
        landwall::exit::DOCTOR_FAILED
    }
}

/// What a `landwall-drain` here would do with a job's memory cap. Without the memory
/// controller in cgroup v2 no `memory.max` can hold it, and RLIMIT_DATA (which shared
/// memory and tmpfs pass) is no cap, so such jobs are refused.
fn drain_memory_line(config: &config::Config) -> String {
    match landwall::limits::host_memory_controller() {
        Ok(mount) => format!(
            "drain caps  memory: memory.max, where the daemon's cgroup v2 subtree has the memory controller ({} offers it; under systemd, Delegate=yes); a job with a memory cap is refused where it has not",
            mount.display()
        ),
        Err(why) => {
            let every = match config.drain.caps.memory {
                Some(m) => format!(
                    "; `memory_max` = {} gives every job one, so landwall-drain refuses to start (status 78)",
                    landwall::limits::size_text(m)
                ),
                None => String::new(),
            };
            format!(
                "drain caps  memory: REFUSED on this host: {why}, so a drain job with a memory cap (`submit --memory`, `[drain] memory_max`) is not started{every}; enable the memory controller in cgroup v2, or drop the cap"
            )
        }
    }
}

/// Doctor's report: every line made printable as it is added.
#[derive(Default)]
struct Report {
    out: String,
}

impl Report {
    /// Adds `s` with control characters escaped line by line (a multi-line message, such as
    /// a configuration error's, keeps its lines).
    fn line(&mut self, s: impl AsRef<str>) {
        self.out.push_str(&crate::cli::printable_lines(s.as_ref()));
        self.out.push('\n');
    }

    /// Adds a line whose quoted names were escaped with [`landwall::spool::printable`] when it
    /// was made (escaping it again would double their backslashes). A line that still holds
    /// something unprintable is escaped whole.
    fn escaped(&mut self, s: &str) {
        if s.chars().any(landwall::spool::is_unprintable) {
            self.out.push_str(&landwall::spool::printable(s));
        } else {
            self.out.push_str(s);
        }
        self.out.push('\n');
    }
}

/// The longest value quoted on an agent state line.
const STATE_VALUE_MAX: usize = 160;

/// A line for each file of the agents' state ([`landwall::profile::agent_code`], and Claude
/// Code's `.claude.json`) that names commands or instructions, with each key (escaped, long
/// values cut): the user's own configuration, or a plant to remove.
fn agent_state_lines(home: Option<&Path>) -> Vec<String> {
    let Some(home) = home else {
        return Vec::new();
    };
    let mut files: Vec<String> = Vec::new();
    for (_, c) in landwall::profile::agent_code() {
        let (dir, name) = c.path.rsplit_once('/').unwrap_or(("", c.path));
        if !name.contains('*') || name == "*" {
            files.push(c.path.to_string());
            continue;
        }
        // A pattern (`~/.codex/*.config.toml`): each file there that it stands for.
        let Ok(entries) = std::fs::read_dir(home.join(dir)) else {
            continue;
        };
        let mut found: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| {
                use std::os::unix::ffi::OsStrExt;
                landwall::protect::name_matches(name.as_bytes(), n.as_bytes())
            })
            .map(|n| format!("{dir}/{}", n.to_string_lossy()))
            .collect();
        found.sort();
        files.append(&mut found);
    }
    for f in [".claude.json", ".claude/.claude.json"] {
        files.push(f.to_string());
    }
    let mut out = Vec::new();
    for rel in files {
        let path = home.join(&rel);
        let named = format!("~/{rel}");
        let shown = landwall::spool::printable(&named);
        match landwall::agentstate::commands(&path) {
            Ok(keys) if keys.is_empty() => {}
            Ok(keys) => {
                let listed: Vec<String> = keys
                    .iter()
                    .map(|(k, v)| {
                        format!(
                            "{} = {}",
                            landwall::spool::printable(k),
                            landwall::spool::printable(&cut(v))
                        )
                    })
                    .collect();
                out.push(format!(
                    "agent state {shown}: {}; agents run or follow these: remove what you did not write",
                    listed.join("; ")
                ));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => out.push(format!(
                "agent state {shown}: cannot be read ({}): look at it, a plant may hide there",
                landwall::spool::printable(&e.to_string())
            )),
        }
    }
    out
}

/// OpenCode's sign-ins (`$XDG_DATA_HOME/opencode/auth.json`, or under `~/.local/share`):
/// each one's provider, type and the addresses it names, never its secrets. None where
/// there is no such file or it holds no sign-in.
fn sign_in_line(vars: &plan::Vars) -> Option<String> {
    let (data, shown) = match var(vars, "XDG_DATA_HOME") {
        Some(d) if Path::new(d).is_absolute() => {
            (PathBuf::from(d), d.to_string_lossy().into_owned())
        }
        _ => (
            Path::new(var(vars, "HOME")?).join(".local/share"),
            "~/.local/share".to_string(),
        ),
    };
    let path = data.join("opencode/auth.json");
    let named = format!("{shown}/opencode/auth.json");
    let shown = landwall::spool::printable(&named);
    match landwall::agentstate::sign_ins(&path) {
        Ok(s) if s.is_empty() => None,
        Ok(s) => {
            let listed: Vec<String> = s
                .iter()
                .map(|(k, v)| {
                    format!(
                        "{} ({})",
                        landwall::spool::printable(&cut(k)),
                        landwall::spool::printable(&cut(v))
                    )
                })
                .collect();
            Some(format!(
                "agent state {shown}: OpenCode's sign-ins: {}; OpenCode sends your code where these say: sign out (`opencode auth logout`) of what you did not sign in to",
                listed.join("; ")
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => Some(format!(
            "agent state {shown}: cannot be read ({}): look at it, a plant may hide there",
            landwall::spool::printable(&e.to_string())
        )),
    }
}

/// `v` cut to [`STATE_VALUE_MAX`] bytes, at a character's boundary, marked `…` where cut.
fn cut(v: &str) -> String {
    let mut v = v.to_string();
    if v.len() > STATE_VALUE_MAX {
        let mut at = STATE_VALUE_MAX;
        while !v.is_char_boundary(at) {
            at -= 1;
        }
        v.truncate(at);
        v.push('…');
    }
    v
}

fn first_on_path(name: &str, vars: &plan::Vars) -> Option<PathBuf> {
    let path = var(vars, "PATH")?;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn agent_line(
    agent: &str,
    vars: &plan::Vars,
    config: &config::Config,
    me: Option<FileId>,
) -> String {
    let mut s = format!("agent       {agent:<9}");
    let on_path = first_on_path(agent, vars);
    match &on_path {
        Some(p) => {
            let is_shim = me.is_some() && FileId::of(p).ok() == me;
            let _infallible = write!(
                s,
                "`{agent}` on PATH is {}{}",
                p.display(),
                if is_shim {
                    " (the landwall shim)"
                } else {
                    " (NOT the shim: this agent runs unwalled)"
                }
            );
        }
        None => s.push_str("not on PATH"),
    }
    if let Some(me) = me {
        match plan::find_agent(agent, vars, config, me) {
            Ok((real, how)) => {
                let how = match how {
                    Found::Config => "configured",
                    Found::RealSuffix => "-real on PATH",
                    Found::NextOnPath => "next on PATH",
                };
                let _infallible = write!(s, "; the shim would exec {} ({how})", real.display());
            }
            Err(_) => s.push_str("; no real agent found"),
        }
    }
    s
}

/// Sensitive paths a user would not want an agent to write, relative to `$HOME`: code
/// planted there runs later, in the user's next shell or git command, outside the wall.
const SENSITIVE_IN_HOME: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".ssh",
    ".gitconfig",
    ".config/git",
    ".config/landwall/landwall.toml",
];

/// How far doctor looks for other repositories in `$HOME`: `$HOME/*/.git` and
/// `$HOME/*/*/.git` (and `$HOME/.git`), at most this many directory entries, for at most
/// this long. A home with more is reported as looked at in part.
const REPO_SCAN: RepoWalk = RepoWalk {
    depth: 2,
    max_dirs: 4096,
    budget: Some(Duration::from_millis(25)),
    skip_hidden: true,
    first_only: false,
};

/// At most this many repositories are named on a line.
const MAX_REPOS_LISTED: usize = 20;

/// `path` for a report line, escaped (any local process names files and directories).
fn shown(path: &Path) -> String {
    landwall::spool::printable(&path.to_string_lossy()).into_owned()
}

/// `path` as `~/…` when it lies in `home`, escaped.
fn in_home(home: &Path, path: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rel) if rel.as_os_str().is_empty() => "~".to_string(),
        Ok(rel) => format!("~/{}", shown(rel)),
        Err(_) => shown(path),
    }
}

/// The policy for the cwd, as the `claude` shim would build it here, or the line saying
/// why there is none (escaped).
fn cwd_policy(vars: &plan::Vars, config: &config::Config) -> Result<Policy, String> {
    let cwd =
        std::env::current_dir().map_err(|e| format!("exposure    cannot read the cwd: {e}"))?;
    plan::build_policy("claude", None, &cwd, true, None, vars, config, false).map_err(|e| {
        format!(
            "exposure    no policy for {}: {}",
            shown(&cwd),
            landwall::spool::printable(&e.to_string())
        )
    })
}

/// What the policy lets the agent do with `path`: read, write (`Access::ReadWrite` or
/// more), or nothing (`None`; list-only is nothing to read).
fn verdict(policy: &Policy, path: &Path) -> Option<(Access, String)> {
    let rule = policy.decide(path).rule?;
    (rule.access >= Access::ReadOnly).then(|| (rule.access, rule.reason.to_string()))
}

/// The stronger of two verdicts.
fn stronger(a: Option<(Access, String)>, b: Option<(Access, String)>) -> Option<(Access, String)> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.0 > a.0 { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// What the agent can do with a path doctor names: `read-only` or `read-write`.
fn access_word(access: Access) -> &'static str {
    if access.writes() {
        "read-write"
    } else {
        "read-only"
    }
}

/// The user configuration file's line: whether it is there, and what the policy for the
/// cwd lets the agent do with it.
fn user_config_line(user: &Path, policy: Option<&Policy>) -> String {
    let present = if user.exists() { "present" } else { "absent" };
    let agent = match policy.map(|p| verdict(p, user)) {
        None => String::new(),
        Some(Some((a, why))) if a.writes() => {
            format!("the agent can write it here (grant: {why}); ")
        }
        Some(Some((_, why))) => {
            format!("the agent can read but not write it here (grant: {why}); ")
        }
        Some(None) => "the agent cannot read it here; ".to_string(),
    };
    format!(
        "user config {}: {present}; {agent}its keys that widen the wall count only when root owns it and the agent cannot rewrite it",
        user.display()
    )
}

/// The credential stores ([`profile::CREDENTIAL_STORES`]) that exist in `home`, their
/// patterns expanded by listing the directory they name, sorted.
fn credential_stores(home: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for rel in profile::CREDENTIAL_STORES {
        let path = home.join(rel);
        if !rel.contains('*') {
            if path.symlink_metadata().is_ok() {
                found.push(path);
            }
            continue;
        }
        let Some(pattern) = path.to_str().and_then(|p| DenyPattern::parse(p).ok()) else {
            continue;
        };
        let Ok(entries) = std::fs::read_dir(&pattern.dir) else {
            continue;
        };
        found.extend(
            entries
                .flatten()
                .filter(|e| pattern.matches(&e.file_name().to_string_lossy()))
                .map(|e| e.path()),
        );
    }
    found.sort();
    found.dedup();
    found
}

/// Repositories in `home`: `home` itself and those [`worktree::repositories_below`] finds
/// within the limits, hidden directories passed over (toolchains kept as git checkouts:
/// `~/.nvm`, `~/.pyenv`); sorted.
fn find_repos(home: &Path, walk: RepoWalk) -> RepoScan {
    let mut scan = landwall::worktree::repositories_below(home, walk);
    if home.join(".git").symlink_metadata().is_ok() {
        scan.repos.push(home.to_path_buf());
    }
    scan.repos.sort();
    scan
}

/// The git dir a worktree's `.git` names: itself when a directory, what its `gitdir:` line
/// names when a file (a linked worktree or a submodule); resolved.
fn git_dir_of(repo: &Path) -> Option<PathBuf> {
    let dotgit = repo.join(".git");
    let meta = dotgit.symlink_metadata().ok()?;
    if meta.is_dir() {
        return std::fs::canonicalize(&dotgit).ok();
    }
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(&dotgit).ok()?;
    let named = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    std::fs::canonicalize(repo.join(named)).ok()
}

/// Whether `repo` is the worktree the policy is for, or another worktree of its repository
/// (its git dir lies in the repository's git dir: `<common>/worktrees/<id>`).
fn same_repository(repo: &Path, root: &Path, ours: Option<&Path>) -> bool {
    if std::fs::canonicalize(repo).is_ok_and(|r| r == root) {
        return true;
    }
    match (ours, git_dir_of(repo)) {
        (Some(ours), Some(theirs)) => theirs.starts_with(ours),
        _ => false,
    }
}

/// One exposure line for `what` in `home` the policy lets the agent read (`found`, with
/// their verdicts), naming the grants; `None` when there are none.
fn readable_line(
    what: &str,
    home: &Path,
    found: &[(PathBuf, Access, String)],
    cut_short: bool,
) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let mut names: Vec<String> = found
        .iter()
        .take(MAX_REPOS_LISTED)
        .map(|(p, a, _)| format!("{} ({})", in_home(home, p), access_word(*a)))
        .collect();
    if found.len() > MAX_REPOS_LISTED {
        names.push(format!("and {} more", found.len() - MAX_REPOS_LISTED));
    }
    let mut grants: Vec<&str> = Vec::new();
    for (_, _, why) in found {
        if !grants.contains(&why.as_str()) {
            grants.push(why);
        }
    }
    Some(format!(
        "exposure    {what} in $HOME the agent can read: {} (grant: {}){}",
        names.join(", "),
        landwall::spool::printable(&grants.join(", ")),
        if cut_short {
            " (the search for repositories stopped early: there may be more)"
        } else {
            ""
        }
    ))
}

/// What the policy lets the agent read in `home` that it should not: the credential stores
/// there and the other repositories (those of other projects, with their history, `.env`
/// files, and hooks). Whether any was found.
fn home_exposure(policy: &Policy, home: &Path, out: &mut Vec<String>) -> bool {
    let ours: Option<&Path> = match &policy.worktree.git {
        GitLayout::Main { git_dir } => Some(git_dir),
        GitLayout::Linked {
            common_dir: Some(common),
            ..
        } => Some(common),
        GitLayout::Linked {
            git_dir,
            common_dir: None,
        } => Some(git_dir),
        GitLayout::None => None,
    };
    let judged = |paths: Vec<PathBuf>| -> Vec<(PathBuf, Access, String)> {
        paths
            .into_iter()
            .filter_map(|p| {
                let v = stronger(verdict(policy, &p), verdict(policy, &p.join(".git")));
                v.map(|(a, why)| (p, a, why))
            })
            .collect()
    };
    let stores: Vec<(PathBuf, Access, String)> = credential_stores(home)
        .into_iter()
        .filter_map(|p| verdict(policy, &p).map(|(a, why)| (p, a, why)))
        .collect();
    let scan = find_repos(home, REPO_SCAN);
    let repos = judged(
        scan.repos
            .into_iter()
            .filter(|r| !same_repository(r, &policy.worktree.root, ours))
            .collect(),
    );
    let lines: Vec<String> = [
        readable_line("credential stores", home, &stores, false),
        readable_line("other repositories", home, &repos, scan.cut_short),
    ]
    .into_iter()
    .flatten()
    .collect();
    if lines.is_empty() {
        out.push(format!(
            "exposure    no credential store or other repository in $HOME is readable by the agent{}",
            if scan.cut_short {
                " (the search for repositories stopped early)"
            } else {
                ""
            }
        ));
        return false;
    }
    out.extend(lines);
    true
}

/// The repository's config and hooks, where git finds code to run (hooks, core.fsmonitor,
/// core.pager, aliases), as the policy grants them. For a linked worktree they lie in the
/// common dir, read-only unless a broader grant (an open home) covers it; for a main
/// worktree in its `.git`, inside the writable worktree.
fn git_exposure(policy: &Policy, ns: &std::io::Result<()>, out: &mut Vec<String>) {
    let (layout, dir) = match &policy.worktree.git {
        GitLayout::Main { git_dir } => ("main worktree", git_dir),
        GitLayout::Linked {
            common_dir: Some(common),
            ..
        } => ("linked worktree", common),
        // Git reads hooks and config from a submodule's own git dir.
        GitLayout::Linked {
            git_dir,
            common_dir: None,
        } => ("submodule", git_dir),
        GitLayout::None => return,
    };
    let meta: Vec<(PathBuf, Option<(Access, String)>)> = ["config", "hooks"]
        .iter()
        .map(|n| dir.join(n))
        .map(|p| {
            let v = verdict(policy, &p);
            (p, v)
        })
        .collect();
    // A protected path is read-only in the launch's namespace, where there is one.
    let held = |p: &Path| ns.is_ok() && policy.protection.covering(p).is_some();
    let writable: Vec<&(PathBuf, Option<(Access, String)>)> = meta
        .iter()
        .filter(|(p, v)| v.as_ref().is_some_and(|(a, _)| a.writes()) && !held(p))
        .collect();
    if writable.is_empty() {
        let said: Vec<String> = meta
            .iter()
            .map(|(p, v)| {
                format!(
                    "{} ({})",
                    shown(p),
                    match v {
                        _ if held(p) => "protected: read-only in the launch's mount namespace",
                        Some((a, _)) => access_word(*a),
                        None => "not readable",
                    }
                )
            })
            .collect();
        out.push(format!(
            "git meta    {layout}: the agent cannot write the repository's config and hooks: {}",
            said.join(", ")
        ));
    } else {
        let paths: Vec<String> = writable.iter().map(|(p, _)| shown(p)).collect();
        let mut grants: Vec<&str> = Vec::new();
        for (_, v) in &writable {
            if let Some((_, why)) = v {
                if !grants.contains(&why.as_str()) {
                    grants.push(why);
                }
            }
        }
        let advice = if layout == "main worktree" && grants == ["worktree"] {
            "; run agents in a linked worktree (`git worktree add`) to keep them read-only"
        } else {
            ""
        };
        out.push(format!(
            "exposure    {layout}: the agent can write the repository's {} (grant: {}): a hook or core.fsmonitor planted there runs the next time you use git in this repository, outside the wall{advice}",
            paths.join(" and "),
            landwall::spool::printable(&grants.join(", "))
        ));
    }
    let dotgit = policy.worktree.root.join(".git");
    if layout == "linked worktree"
        && verdict(policy, &dotgit).is_some_and(|(a, _)| a.writes())
        && !held(&dotgit)
    {
        out.push(format!(
            "note        {layout}: this worktree's own .git file stays writable: an agent can point it at a git dir it wrote, whose hooks or core.fsmonitor your next git command in this worktree would run outside the wall: check `cat .git` (or run `git worktree repair` from the main checkout) before using git here after a run"
        ));
    }
}

/// Whether doctor says what the policy note `note` says itself, from [`Policy::decide`]:
/// the notes on the git layout (which state what the layout grants, whatever broader grant
/// covers it as well), and the private home's (when something in `$HOME` is readable all
/// the same).
fn restated(note: &str, home_exposed: bool) -> bool {
    ["main worktree:", "linked worktree:", "submodule:"]
        .iter()
        .any(|p| note.starts_with(p))
        || (home_exposed && note.starts_with("$HOME is private"))
}

/// What the policy for the cwd leaves open: sensitive files in `$HOME` the agent could
/// write, credential stores and other repositories it could read, the repository's config
/// and hooks, the object store's protection. Each line is escaped.
fn exposure(vars: &plan::Vars, policy: &Result<Policy, String>, me: Option<FileId>) -> Vec<String> {
    let policy = match policy {
        Ok(p) => p,
        Err(line) => return vec![line.clone()],
    };
    let root = shown(&policy.worktree.root);
    let home = var(vars, "HOME").map(Path::new);
    let mut out = Vec::new();
    out.extend(
        crate::cli::git_sources(policy)
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "{}{}",
                    if i == 0 {
                        "git dirs    "
                    } else {
                        "            "
                    },
                    landwall::spool::printable(s)
                )
            }),
    );
    let writable: Vec<String> = home
        .map(|home| {
            SENSITIVE_IN_HOME
                .iter()
                .map(|p| home.join(p))
                .filter_map(|p| match writable_in_home(policy, &p) {
                    Writable::No => None,
                    Writable::Yes => Some(in_home(home, &p)),
                    Writable::Replaceable(link) if link == p => {
                        Some(format!("{} (a link it can replace)", in_home(home, &p)))
                    }
                    Writable::Replaceable(link) => Some(format!(
                        "{} (through {}, a link it can replace)",
                        in_home(home, &p),
                        in_home(home, &link)
                    )),
                })
                .collect()
        })
        .unwrap_or_default();
    out.push(if writable.is_empty() {
        format!(
            "exposure    in {root}: none of the sensitive files checked in $HOME is writable by the agent"
        )
    } else {
        format!(
            "exposure    in {root}, the agent can write: {} (code planted there can run later outside the wall)",
            writable.join(", ")
        )
    });
    out.extend(path_exposure(policy, vars, me));
    let home_exposed = match home {
        Some(home) => home_exposure(policy, home, &mut out),
        None => false,
    };
    let ns = landwall::ns::probe(landwall::plan::running_as_root()).and_then(|()| {
        match landwall::ns::aliased(&policy.protection.held)? {
            None => Ok(()),
            Some(why) => Err(std::io::Error::other(why)),
        }
    });
    git_exposure(policy, &ns, &mut out);
    out.push(protected_line(policy, &ns));
    out.push(terminals_line(policy));
    if let Some(q) = &policy.quarantine {
        out.push(match &ns {
            Ok(()) => format!(
                "namespace   a private mount namespace is available: {}/ is read-only to the agent, its new objects go to {}",
                shown(&q.objects),
                shown(&q.dir)
            ),
            Err(e) => format!(
                "namespace   a private mount namespace is REFUSED here ({}): the agent can change {} (existing objects included); protect_required = true refuses to launch instead",
                landwall::spool::printable(&e.to_string()),
                shown(&q.objects)
            ),
        });
        let kept = kept_back(&q.dir);
        if kept > 0 {
            out.push(format!(
                "quarantine  {kept} object(s) in {} were not moved into the repository: they failed the check of content against name (or are being written now)",
                shown(&q.dir)
            ));
        }
    }
    out.extend(
        policy
            .notes
            .iter()
            .filter(|n| !restated(n, home_exposed))
            .map(|n| format!("note        {}", landwall::spool::printable(n))),
    );
    out
}

/// The protected paths: held read-only in the launch's namespace where there is one, or
/// writable (the exposure) where it is refused.
fn protected_line(policy: &Policy, ns: &std::io::Result<()>) -> String {
    let p = &policy.protection;
    let rel = |path: &Path| {
        path.strip_prefix(&policy.worktree.root)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    // The worktree's first, relative; then the agents' state in $HOME, as `~/…`.
    let home = std::env::var_os("HOME").and_then(|h| std::fs::canonicalize(h).ok());
    let (mut ro, mut in_home): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for h in p
        .held
        .iter()
        .filter(|h| h.hold.read_only() || h.hold == landwall::protect::Hold::Fresh)
    {
        match home
            .as_deref()
            .and_then(|home| h.path.strip_prefix(home).ok())
        {
            Some(r) if !h.path.starts_with(&policy.worktree.root) => {
                in_home.push(format!("~/{}", r.display()));
            }
            _ => ro.push(rel(&h.path)),
        }
    }
    ro.append(&mut in_home);
    let mut ro = if ro.is_empty() {
        "none exists now".to_string()
    } else {
        ro.join(", ")
    };
    let layered: Vec<String> = p
        .held
        .iter()
        .filter(|h| {
            matches!(
                h.hold,
                landwall::protect::Hold::Layer | landwall::protect::Hold::Own
            )
        })
        .map(|h| {
            match home
                .as_deref()
                .and_then(|home| h.path.strip_prefix(home).ok())
            {
                Some(r) => format!("~/{}", r.display()),
                None => h.path.display().to_string(),
            }
        })
        .collect();
    if !layered.is_empty() {
        ro.push_str(&format!(
            "; covered by the project's own (what the agent writes there reaches no other project, nor your tools): {}",
            layered.join(", ")
        ));
    }
    // Below ABI 6 signals are not scoped: the agent could kill the watcher that sweeps.
    let killable = if landwall::wall::kernel_abi().is_ok_and(|abi| abi < 6) {
        " (but below Landlock ABI 6 the agent can kill the watcher that does it)"
    } else {
        ""
    };
    let line = match ns {
        Ok(()) => format!(
            "protected   read-only in the launch's mount namespace: {ro}; {} absent now, set aside when the agent exits if it creates them{killable} (`landwall policy` lists them)",
            p.absent.len()
        ),
        Err(e) => format!(
            "exposure    a private mount namespace is REFUSED here ({e}): the protected paths ({ro}) are writable by the agent, and what it plants there can run outside the wall; those it creates are still set aside when it exits{killable}; protect_required = true refuses to launch instead"
        ),
    };
    landwall::spool::printable(&line).into_owned()
}

/// Whether the agent can change what is at a path: write it (the policy's verdict on what
/// it resolves to), or replace a symbolic link on the way to it (the path itself or a
/// directory above it), in a directory it can write, with one of its own.
#[derive(Debug, PartialEq, Eq)]
enum Writable {
    No,
    Yes,
    /// Through this link, which the agent can replace.
    Replaceable(PathBuf),
}

/// The grant that lets the agent write `path` (what it resolves to), if any.
fn write_grant(policy: &Policy, path: &Path) -> Option<String> {
    verdict(policy, path).and_then(|(a, why)| a.writes().then_some(why))
}

/// The nearest symbolic link at or above `path` that the agent can replace (its directory
/// is writable to it): the verdict on `path` follows links, so a `~/.bashrc` linked to a
/// dotfiles checkout outside every grant reads as unwritable though the link can be
/// swapped for a file of the agent's.
fn replaceable_link(policy: &Policy, path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .filter(|a| {
            a.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
        })
        .find(|link| {
            link.parent()
                .is_some_and(|dir| write_grant(policy, dir).is_some())
        })
        .map(Path::to_path_buf)
}

/// Whether the agent can write `path`, or replace a link on the way to it.
fn writable_in_home(policy: &Policy, path: &Path) -> Writable {
    if write_grant(policy, path).is_some() {
        return Writable::Yes;
    }
    match replaceable_link(policy, path) {
        Some(link) => Writable::Replaceable(link),
        None => Writable::No,
    }
}

/// How a path on the way to a shim on PATH lets the agent put a program of its own in the
/// shim's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum OnPath {
    /// A PATH directory searched before the shim's.
    Ahead,
    /// The PATH directory holding the shim (or its link).
    ShimDir,
    /// A link between the PATH entry and the shim's binary.
    Link,
    /// The shim's binary itself (or the directory holding it).
    Binary,
}

/// One PATH finding: what, how, the grant that allows it, and for which agents.
struct PathFinding {
    path: PathBuf,
    how: OnPath,
    grant: String,
    agents: Vec<&'static str>,
}

/// At most this many links are followed from a PATH entry to the shim's binary.
const MAX_LINKS: usize = 40;

/// The links from `entry` to the file it names, `entry` first (empty when it is no link),
/// and that file; `None` when a link cannot be read or the chain is too long.
fn link_chain(entry: &Path) -> Option<(Vec<PathBuf>, PathBuf)> {
    let mut links = Vec::new();
    let mut at = entry.to_path_buf();
    while at.symlink_metadata().ok()?.file_type().is_symlink() {
        if links.len() >= MAX_LINKS {
            return None;
        }
        let to = std::fs::read_link(&at).ok()?;
        let next = match at.parent() {
            Some(dir) => dir.join(to),
            None => to,
        };
        links.push(std::mem::replace(&mut at, next));
    }
    Some((links, std::fs::canonicalize(&at).ok()?))
}

/// Adds a finding to `found`, or the agent to the one already made for `path` (said once,
/// as the most direct way to the shim).
fn note(
    found: &mut Vec<PathFinding>,
    path: &Path,
    how: OnPath,
    grant: String,
    agent: &'static str,
) {
    match found.iter_mut().find(|f| f.path == path) {
        Some(f) => {
            if how > f.how {
                f.how = how;
                f.grant = grant;
            }
            if !f.agents.contains(&agent) {
                f.agents.push(agent);
            }
        }
        None => found.push(PathFinding {
            path: path.to_path_buf(),
            how,
            grant,
            agents: vec![agent],
        }),
    }
}

/// What lets the agent swap the shim for a program of its own, which the next launch would
/// then run outside the wall: a PATH directory it can write, ahead of the shim or holding it,
/// a link on the way to the shim's binary in a directory it can write, or the binary itself
/// (or its directory). For each agent whose name finds the shim first on PATH. One line per
/// finding, escaped.
fn path_exposure(policy: &Policy, vars: &plan::Vars, me: Option<FileId>) -> Vec<String> {
    let (Some(me), Some(path)) = (me, var(vars, "PATH")) else {
        return Vec::new();
    };
    let cwd = std::env::current_dir().ok();
    let mut found: Vec<PathFinding> = Vec::new();
    for &agent in KNOWN_AGENTS {
        let Some(shim) = first_on_path(agent, vars) else {
            continue;
        };
        if FileId::of(&shim).ok() != Some(me) {
            continue;
        }
        // The directories searched up to the shim's. The shell searches a relative entry
        // (an empty one is `.`) from where `claude` is started: here, the cwd.
        for dir in std::env::split_paths(path) {
            let is_shims = dir.is_absolute() && dir.join(agent) == shim;
            let dir = if dir.is_absolute() {
                dir
            } else if let Some(cwd) = &cwd {
                if dir.as_os_str().is_empty() {
                    cwd.clone()
                } else {
                    cwd.join(dir)
                }
            } else {
                continue;
            };
            if let Some(why) = write_grant(policy, &dir) {
                let how = if is_shims {
                    OnPath::ShimDir
                } else {
                    OnPath::Ahead
                };
                note(&mut found, &dir, how, why, agent);
            }
            if is_shims {
                break;
            }
        }
        let Some((links, binary)) = link_chain(&shim) else {
            continue;
        };
        for link in links.iter().skip(1) {
            if let Some((link, why)) = link
                .parent()
                .and_then(|d| write_grant(policy, d).map(|why| (link, why)))
            {
                note(&mut found, link, OnPath::Link, why, agent);
            }
        }
        // Replaced in a directory already named, the binary is not named again.
        let grant = write_grant(policy, &binary).or_else(|| {
            let dir = binary.parent()?;
            let named = found.iter().any(|f| f.path == dir);
            write_grant(policy, dir).filter(|_| !named)
        });
        if let Some(why) = grant {
            note(&mut found, &binary, OnPath::Binary, why, agent);
        }
    }
    found
        .iter()
        .map(|f| {
            let (what, advice) = match f.how {
                OnPath::Ahead => (
                    format!("write {} (ahead of the shim on PATH", shown(&f.path)),
                    "take the directory off PATH, or put the shim's directory ahead of it",
                ),
                OnPath::ShimDir if f.grant == "worktree" => (
                    format!("write {} (the shim's directory on PATH", shown(&f.path)),
                    "move the shim out of the worktree, to a directory the agent cannot write (`make install` puts it in /usr/lib/landwall/bin)",
                ),
                OnPath::ShimDir => (
                    format!("write {} (the shim's directory on PATH", shown(&f.path)),
                    "move the shim to a directory the agent cannot write (`make install` puts it in /usr/lib/landwall/bin)",
                ),
                OnPath::Link => (
                    format!("replace {} (a link to the shim", shown(&f.path)),
                    "move the link to a directory the agent cannot write",
                ),
                OnPath::Binary => (
                    format!("write the shim {} (", shown(&f.path)),
                    "install landwall where the agent cannot write (`make install`), not from a checkout's target/",
                ),
            };
            let sep = if f.how == OnPath::Binary { "" } else { ", " };
            format!(
                "exposure    PATH: the agent can {what}{sep}for {}; grant: {}): a program it puts there runs unwalled at your next launch; {advice}",
                f.agents.join(", "),
                landwall::spool::printable(&f.grant)
            )
        })
        .collect()
}

/// Which terminals the agent can open (`terminals`).
fn terminals_line(policy: &Policy) -> String {
    match policy.terminals {
        config::Terminals::All => "exposure    terminals = \"all\": the agent can open every terminal of yours in /dev/pts: read what is typed there, write to its screen, resize it, stop its output; remove the setting to give it its own only".into(),
        config::Terminals::Own => match landwall::ns::probe_pts(landwall::plan::running_as_root()) {
            Ok(()) => "terminals   its own: the one it starts on, and a private /dev/pts made for each launch (new pseudo-terminals work); your other terminals cannot be opened".into(),
            Err(e) => format!(
                "terminals   its own only, and NO new pseudo-terminal: a private /dev/pts cannot be made here ({}), so /dev/pts and /dev/ptmx are left out of the wall (programs that open a pty fail); your other terminals cannot be opened",
                landwall::spool::printable(&e.to_string())
            ),
        },
    }
}

/// Files with an object's name left in a quarantine's fan-out directories.
fn kept_back(quarantine: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(quarantine) else {
        return 0;
    };
    dirs.flatten()
        .filter(|d| {
            let n = d.file_name();
            n.len() == 2 && n.to_string_lossy().bytes().all(|b| b.is_ascii_hexdigit())
        })
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| {
            let n = e.file_name();
            matches!(n.len(), 38 | 62) && n.to_string_lossy().bytes().all(|b| b.is_ascii_hexdigit())
        })
        .count()
}

// ---- The doors beside the wall: servers outside it that the agent can still reach.

/// What [`doors`] found: its lines, each a finding whose quoted names (socket paths, process
/// names: any local process chooses them) are already escaped, and whether launches with
/// this configuration can go ahead on this kernel.
struct Doors {
    lines: Vec<String>,
    ok: bool,
}

/// How long doctor looks through `/proc/*/fd` for the processes behind the listeners. On a
/// busy machine it stops there and names the owners found so far.
const OWNER_BUDGET: Duration = Duration::from_millis(10);

/// At most this many Unix sockets are listed (a desktop has hundreds).
const MAX_UNIX_LISTED: usize = 40;

/// What keeps the agent from the Unix sockets outside the wall on a kernel with `abi`, as
/// the launch picks it (`wall::restrict`); `None` when such a launch is refused: sockets
/// named below ABI 9, where the only alternative would be every socket.
pub(crate) fn unix_guard(allow_all: bool, names_sockets: bool, abi: u32) -> Option<UnixGuard> {
    match (allow_all, abi >= wall::RESOLVE_UNIX_ABI) {
        (true, _) => Some(UnixGuard::Open),
        (false, true) => Some(UnixGuard::Landlock),
        (false, false) if names_sockets => None,
        (false, false) => Some(UnixGuard::Seccomp),
    }
}

/// The doors doctor can see, each with how to close it: loopback TCP listeners the agent can
/// connect to under `[network]`, which guard keeps it from Unix sockets (for each group of
/// agents with the same `[unix]`), the path-named sockets it reaches when `allow_all` opens
/// them, and what the seccomp filter refuses. `system` is the file the recipes name.
fn doors(config: &config::Config, abi: Option<u32>, system: &Path) -> Doors {
    // Without Landlock there is no launch at all; the kernel line says so.
    let Some(abi) = abi else {
        return Doors {
            lines: Vec::new(),
            ok: true,
        };
    };
    let groups = unix_groups(config);
    let seen = look(groups.iter().any(|(u, _)| u.allow_all));
    let root = landwall::plan::running_as_root();
    report_doors(config, abi, root, system, &groups, &seen)
}

/// The shipped agents and the configured ones, grouped by their `[unix]` settings.
fn unix_groups(config: &config::Config) -> Vec<(config::UnixConfig, Vec<&str>)> {
    let mut groups: Vec<(config::UnixConfig, Vec<&str>)> = Vec::new();
    let configured = config.agents.keys().map(String::as_str);
    for agent in KNOWN_AGENTS.iter().copied().chain(configured) {
        let unix = config.unix_for(agent);
        match groups.iter_mut().find(|(u, _)| *u == unix) {
            Some((_, names)) => {
                if !names.contains(&agent) {
                    names.push(agent);
                }
            }
            None => groups.push((unix, vec![agent])),
        }
    }
    groups
}

/// A port's listening sockets: their addresses and inodes.
type Listening = (Vec<IpAddr>, Vec<u64>);

/// What doctor saw of the servers on this machine.
#[derive(Debug, Default)]
struct Seen {
    /// Ports listening on a loopback or wildcard address: their addresses and socket inodes.
    tcp: BTreeMap<u16, Listening>,
    /// Path-named sockets servers receive on (read only when some agent has `allow_all`).
    sockets: Vec<UnixListen>,
    /// The processes found holding those sockets.
    owners: HashMap<u64, Owner>,
}

/// Reads `/proc/net/tcp*`, `/proc/net/unix` when `unix`, and looks for the sockets' owners.
///
/// Reading `/proc/net/tcp` and `tcp6` costs the kernel a walk of the whole established-
/// connection hash table each (about 4 ms for 262144 buckets, more on a machine with more
/// memory), however few sockets they hold; looking through `/proc/*/fd` grows with the
/// processes, and stops at [`OWNER_BUDGET`]. (Run side by side, the two walks took longer
/// than one after the other.)
fn look(unix: bool) -> Seen {
    let text = |f: &str| String::from_utf8_lossy(&read_proc(f)).into_owned();
    let tcp = loopback_listeners(&[text("/proc/net/tcp"), text("/proc/net/tcp6")]);
    let sockets = if unix {
        reachable_unix_sockets()
    } else {
        Vec::new()
    };
    let wanted: HashSet<u64> = tcp
        .values()
        .flat_map(|(_, inodes)| inodes.iter().copied())
        .chain(sockets.iter().map(|u| u.inode))
        .collect();
    Seen {
        owners: owners(&wanted, OWNER_BUDGET),
        tcp,
        sockets,
    }
}

/// The lines for what was `seen`, under `config` on a kernel with Landlock `abi`, for agents
/// launched as root (`root`) or not.
fn report_doors(
    config: &config::Config,
    abi: u32,
    root: bool,
    system: &Path,
    groups: &[(config::UnixConfig, Vec<&str>)],
    seen: &Seen,
) -> Doors {
    let mut d = Doors {
        lines: Vec::new(),
        ok: true,
    };
    let system = landwall::spool::printable(&system.to_string_lossy()).into_owned();
    let (tcp, sockets, owners) = (&seen.tcp, &seen.sockets, &seen.owners);
    let owned_by = |inodes: &[u64]| {
        let mut found: Vec<&Owner> = Vec::new();
        for o in inodes.iter().filter_map(|i| owners.get(i)) {
            if !found.contains(&o) {
                found.push(o);
            }
        }
        if found.is_empty() {
            return String::new();
        }
        let named: Vec<String> = found
            .iter()
            .take(3)
            .map(|o| format!("{}, pid {}", landwall::spool::printable(&o.comm), o.pid))
            .collect();
        format!(
            " ({}{})",
            named.join("; "),
            if found.len() > 3 { "; …" } else { "" }
        )
    };

    // Loopback TCP.
    let connect = config.network.connect_tcp.as_deref();
    if config.network.is_restricted() && abi < 4 {
        d.ok = false;
        d.lines.push(format!(
            "tcp         [network] sets TCP port rules, but this kernel has Landlock ABI {abi}: launches are REFUSED (TCP rules need ABI 4, Linux 6.7)"
        ));
    } else {
        let reachable: Vec<(&u16, &Listening)> = tcp
            .iter()
            .filter(|(port, _)| connect.is_none_or(|l| l.contains(port)))
            .collect();
        let closed = tcp.len() - reachable.len();
        if reachable.is_empty() {
            d.lines.push(if tcp.is_empty() {
                "tcp         no TCP listener on a loopback or wildcard address in this network namespace".to_string()
            } else {
                format!(
                    "tcp         [network] connect_tcp lists none of the {closed} port(s) listening on a loopback or wildcard address here: Landlock (ABI 4) refuses the agent's connections to them"
                )
            });
        } else {
            let (why, recipe) = match connect {
                None => (
                    "[network] connect_tcp is not set".to_string(),
                    format!(
                        "set [network] connect_tcp = [443, …] (the ports the agent needs) in {system}; Landlock (ABI 4) then refuses every other port"
                    ),
                ),
                Some(_) => (
                    format!(
                        "[network] connect_tcp lists them; Landlock (ABI 4) refuses the other {closed}"
                    ),
                    format!(
                        "take the ports the agent does not need out of [network] connect_tcp in {system}"
                    ),
                ),
            };
            d.lines.push(format!(
                "exposure    loopback TCP: the agent can connect to {} listening port(s) in this network namespace, servers outside the wall ({why}); to close: {recipe}",
                reachable.len()
            ));
            for (port, (addrs, inodes)) in reachable {
                let addrs: Vec<String> = addrs.iter().map(ToString::to_string).collect();
                d.lines.push(format!(
                    "  tcp port {port:<5} on {}{}",
                    addrs.join(", "),
                    owned_by(inodes)
                ));
            }
        }
    }

    // Unix sockets, and the seccomp filter, for each group of agents.
    let mut listed = false;
    for (unix, names) in groups {
        let who = if groups.len() == 1 {
            String::new()
        } else {
            format!("{}: ", names.join(", "))
        };
        let names_sockets = !unix.sockets.is_empty();
        let guard = unix_guard(unix.allow_all, names_sockets, abi);
        let shown = |p: &Vec<PathBuf>| {
            p.iter()
                .map(|s| landwall::spool::printable(&s.to_string_lossy()).into_owned())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match guard {
            None => {
                d.ok = false;
                d.lines.push(format!(
                    "unix        {who}[unix] sockets names {}, but this kernel has Landlock ABI {abi}: launches are REFUSED (exit 78): permitting one socket by path needs ABI {} (Linux 7.1), and the seccomp filter can only refuse every socket; upgrade the kernel or remove `sockets`",
                    shown(&unix.sockets),
                    wall::RESOLVE_UNIX_ABI
                ));
            }
            Some(UnixGuard::Seccomp) => d.lines.push(format!(
                "unix        {who}refused: the seccomp filter refuses socket(AF_UNIX), so no Unix socket outside the wall is reachable (the agent cannot make one for itself either; stream socketpairs work); Landlock ABI {} would refuse by path instead (this kernel has ABI {abi})",
                wall::RESOLVE_UNIX_ABI
            )),
            Some(UnixGuard::Landlock) => d.lines.push(if names_sockets {
                format!(
                    "unix        {who}refused by path (Landlock ABI {}) except the agent's own and those [unix] sockets names: {}",
                    wall::RESOLVE_UNIX_ABI,
                    shown(&unix.sockets)
                )
            } else {
                format!(
                    "unix        {who}refused by path (Landlock ABI {}): the agent reaches only its own sockets",
                    wall::RESOLVE_UNIX_ABI
                )
            }),
            Some(UnixGuard::Open) => {
                let section = if config.unix.allow_all {
                    "[unix]".to_string()
                } else {
                    names
                        .iter()
                        .map(|n| format!("[agents.{n}.unix]"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let abstract_too = if abi < 6 {
                    " (abstract ones too: Landlock ABI 6 scopes those)"
                } else {
                    ""
                };
                d.lines.push(format!(
                    "exposure    {who}Unix sockets: allow_all in {section}: the agent can connect to every Unix socket the user can{abstract_too}, servers outside the wall that act for it (tmux, D-Bus, docker.sock, ssh-agent); to close: remove `allow_all` from {section}; name the sockets the agent needs in `[unix] sockets` in {system} (Landlock ABI {})",
                    wall::RESOLVE_UNIX_ABI
                ));
                if !listed {
                    listed = true;
                    for u in sockets.iter().take(MAX_UNIX_LISTED) {
                        d.lines.push(format!(
                            "  socket    {}{}{}",
                            landwall::spool::printable(&u.path.to_string_lossy()),
                            if u.datagram { " (datagram)" } else { "" },
                            owned_by(&[u.inode])
                        ));
                    }
                    if sockets.len() > MAX_UNIX_LISTED {
                        d.lines.push(format!(
                            "  socket    … and {} more (see /proc/net/unix)",
                            sockets.len() - MAX_UNIX_LISTED
                        ));
                    }
                }
            }
        }
        if let Some(guard) = guard {
            let refuse = landwall::seccomp::Refuse {
                unix_sockets: guard == UnixGuard::Seccomp,
                mptcp: config.network.is_restricted(),
                setgid: root,
            };
            d.lines.push(format!(
                "seccomp     {who}every launch's filter refuses: {refuse}"
            ));
        }
    }
    d
}

/// A process holding a socket.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    comm: String,
}

/// A `/proc` file, read with a large buffer (empty if it cannot be read): for each read that
/// asks for more than the kernel has at hand, it walks `/proc/net/tcp`'s tables again to the
/// next socket (to the end, after the last), so reading in small pieces, as
/// `read_to_string` starts to, costs several walks.
fn read_proc(path: &str) -> Vec<u8> {
    use std::io::Read as _;
    let Ok(mut file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize(2 * len, 0);
        }
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    buf.truncate(len);
    buf
}

/// The first process found holding each socket of `wanted` (by its inode, as `socket:[N]` in
/// `/proc/PID/fd`), looking no longer than `budget`: an owner not found by then is not named.
/// As a user, only that user's processes can be looked into.
fn owners(wanted: &HashSet<u64>, budget: Duration) -> HashMap<u64, Owner> {
    let mut found = HashMap::new();
    if wanted.is_empty() {
        return found;
    }
    let deadline = Instant::now() + budget;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return found;
    };
    'procs: for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for (n, fd) in fds.flatten().enumerate() {
            if n % 64 == 0 && Instant::now() > deadline {
                break 'procs;
            }
            let Some(inode) = std::fs::read_link(fd.path())
                .ok()
                .and_then(|t| socket_inode(t.as_os_str().as_bytes()))
            else {
                continue;
            };
            if wanted.contains(&inode) && !found.contains_key(&inode) {
                let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
                let comm = comm.strip_suffix('\n').unwrap_or(&comm).to_string();
                found.insert(inode, Owner { pid, comm });
                if found.len() == wanted.len() {
                    break 'procs;
                }
            }
        }
    }
    found
}

/// The inode in a descriptor's link text `socket:[N]`.
fn socket_inode(link: &[u8]) -> Option<u64> {
    std::str::from_utf8(link.strip_prefix(b"socket:[")?.strip_suffix(b"]")?)
        .ok()?
        .parse()
        .ok()
}

/// A TCP socket in LISTEN state, from `/proc/net/tcp` or `/proc/net/tcp6`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TcpListen {
    addr: IpAddr,
    port: u16,
    inode: u64,
}

/// `st` of a listening TCP socket (`TCP_LISTEN`).
const TCP_LISTEN: &str = "0A";

/// The listening sockets in the text of `/proc/net/tcp` or `/proc/net/tcp6`: after the
/// header, `sl local_address rem_address st … uid timeout inode`, an address being the
/// kernel's words in hex (`%08X` of each 32 bits as they lie in memory) and `:PORT` in hex.
fn parse_tcp(text: &str) -> Vec<TcpListen> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_ascii_whitespace().collect();
            if f.len() < 10 || f[3] != TCP_LISTEN {
                return None;
            }
            let (addr, port) = f[1].split_once(':')?;
            Some(TcpListen {
                addr: hex_addr(addr)?,
                port: u16::from_str_radix(port, 16).ok()?,
                inode: f[9].parse().ok()?,
            })
        })
        .collect()
}

/// An address as `/proc/net/tcp*` prints it: 8 or 32 hex digits, each group of 8 a 32-bit
/// word in the machine's byte order.
fn hex_addr(hex: &str) -> Option<IpAddr> {
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let word = |i: usize| {
        u32::from_str_radix(hex.get(8 * i..8 * i + 8)?, 16)
            .ok()
            .map(u32::to_ne_bytes)
    };
    match hex.len() {
        8 => Some(IpAddr::V4(Ipv4Addr::from(word(0)?))),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[4 * i..4 * i + 4].copy_from_slice(&word(i)?);
            }
            Some(IpAddr::V6(Ipv6Addr::from(b)))
        }
        _ => None,
    }
}

/// Whether a connection through loopback reaches a socket bound to `addr`: a loopback
/// address (IPv4-mapped ones included) or the wildcard.
fn via_loopback(addr: IpAddr) -> bool {
    let v4 = |a: Ipv4Addr| a.is_loopback() || a.is_unspecified();
    match addr {
        IpAddr::V4(a) => v4(a),
        IpAddr::V6(a) => {
            a.is_loopback() || a.is_unspecified() || a.to_ipv4_mapped().is_some_and(v4)
        }
    }
}

/// The ports listening on a loopback or wildcard address in `texts` (of `/proc/net/tcp` and
/// `tcp6`: this network namespace), each with its addresses and socket inodes.
fn loopback_listeners(texts: &[String]) -> BTreeMap<u16, Listening> {
    let mut ports: BTreeMap<u16, Listening> = BTreeMap::new();
    for text in texts {
        for l in parse_tcp(text).into_iter().filter(|l| via_loopback(l.addr)) {
            let (addrs, inodes) = ports.entry(l.port).or_default();
            if !addrs.contains(&l.addr) {
                addrs.push(l.addr);
            }
            inodes.push(l.inode);
        }
    }
    ports
}

/// A path-named Unix socket a server receives on, from `/proc/net/unix`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UnixListen {
    path: PathBuf,
    inode: u64,
    datagram: bool,
}

/// `__SO_ACCEPTCON` in `/proc/net/unix`'s flags: a listening socket.
const SO_ACCEPTCON: u32 = 0x0001_0000;
/// `SOCK_DGRAM` in its type column.
const SOCK_DGRAM: u16 = 2;

/// The listening (and bound datagram) path-named sockets in the text of `/proc/net/unix`:
/// `Num: RefCount Protocol Flags Type St Inode Path`, the path printed raw after one space.
/// Abstract names (`@…`, scoped by Landlock ABI 6) and relative ones are left out. A path may
/// hold a newline, and so forge lines of its own: [`reachable_unix_sockets`] keeps only paths
/// that are sockets.
fn parse_unix(text: &[u8]) -> Vec<UnixListen> {
    text.split(|&b| b == b'\n')
        .skip(1)
        .filter_map(parse_unix_line)
        .collect()
}

fn parse_unix_line(line: &[u8]) -> Option<UnixListen> {
    let mut rest = line;
    let mut f: [&[u8]; 7] = [&[]; 7];
    for field in &mut f {
        let start = rest.iter().position(|&b| b != b' ')?;
        rest = &rest[start..];
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        *field = &rest[..end];
        rest = &rest[end..];
    }
    let path = rest.strip_prefix(b" ")?;
    fn text(b: &[u8]) -> Option<&str> {
        std::str::from_utf8(b).ok()
    }
    let hex32 = |b: &[u8]| u32::from_str_radix(text(b)?, 16).ok();
    // `Num:` is a (hashed) kernel pointer: hex, then a colon.
    hex32(f[0].strip_suffix(b":")?.get(..8)?)?;
    let flags = hex32(f[3])?;
    let kind = u16::from_str_radix(text(f[4])?, 16).ok()?;
    let inode = text(f[6])?.parse().ok()?;
    if !path.starts_with(b"/") || (flags & SO_ACCEPTCON == 0 && kind != SOCK_DGRAM) {
        return None;
    }
    Some(UnixListen {
        path: PathBuf::from(std::ffi::OsStr::from_bytes(path)),
        inode,
        datagram: kind == SOCK_DGRAM,
    })
}

/// The path-named sockets servers listen on that this process can reach: in `/proc/net/unix`
/// (this network namespace) and a socket at that path in this mount namespace (one that was
/// unlinked, or lies in another namespace, or is a line forged by a newline in a name, is no
/// door here). Sorted by path, one entry each.
fn reachable_unix_sockets() -> Vec<UnixListen> {
    let text = read_proc("/proc/net/unix");
    let mut by_path: BTreeMap<PathBuf, UnixListen> = BTreeMap::new();
    for u in parse_unix(&text) {
        if !by_path.contains_key(&u.path) && is_socket(&u.path) {
            by_path.insert(u.path.clone(), u);
        }
    }
    by_path.into_values().collect()
}

fn is_socket(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory for one test, emptied first.
    fn scratch(name: &str) -> PathBuf {
        let s = std::env::temp_dir().join(format!("lw-doctor-{name}-{}", std::process::id()));
        let _ignored = std::fs::remove_dir_all(&s);
        std::fs::create_dir_all(&s).expect("mkdir");
        std::fs::canonicalize(&s).expect("canonicalize")
    }

    /// The links from a PATH entry to the shim's binary, relative ones resolved from their
    /// own directory; a loop is no chain.
    #[test]
    fn links_are_followed_to_the_binary() {
        use std::os::unix::fs::symlink;
        let s = scratch("chain");
        mkdirs(&s, &["bin", "links", "lw"]);
        std::fs::write(s.join("lw/landwall"), "").expect("write");
        symlink("../lw/landwall", s.join("links/claude")).expect("link");
        symlink(s.join("links/claude"), s.join("bin/claude")).expect("link");
        let (links, binary) = link_chain(&s.join("bin/claude")).expect("chain");
        assert_eq!(links, vec![s.join("bin/claude"), s.join("links/claude")]);
        assert_eq!(binary, s.join("lw/landwall"));
        let (links, binary) = link_chain(&s.join("lw/landwall")).expect("no link");
        assert!(links.is_empty());
        assert_eq!(binary, s.join("lw/landwall"));
        symlink("b", s.join("bin/a")).expect("link");
        symlink("a", s.join("bin/b")).expect("link");
        assert!(link_chain(&s.join("bin/a")).is_none());
        std::fs::remove_dir_all(&s).expect("cleanup");
    }

    fn mkdirs(root: &Path, dirs: &[&str]) {
        for d in dirs {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
    }

    const UNLIMITED: RepoWalk = RepoWalk {
        depth: 2,
        max_dirs: usize::MAX,
        budget: None,
        skip_hidden: true,
        first_only: false,
    };

    /// Two levels down, hidden entries and links passed over, no look inside a repository.
    #[test]
    fn repositories_are_found_two_levels_down() {
        let home = scratch("repos");
        mkdirs(
            &home,
            &[
                "top/.git",
                "top/vendor/lib/.git",
                "src/a/.git",
                "src/b",
                "src/deep/er/.git",
                ".nvm/.git",
                ".config/x/.git",
                "docs",
            ],
        );
        // A linked worktree's `.git` is a file.
        std::fs::write(home.join("src/b/.git"), "gitdir: ../a/.git/worktrees/b\n").expect("write");
        std::os::unix::fs::symlink(home.join("src/a"), home.join("link")).expect("symlink");
        let scan = find_repos(&home, UNLIMITED);
        let rel: Vec<&Path> = scan
            .repos
            .iter()
            .map(|p| p.strip_prefix(&home).expect("in home"))
            .collect();
        assert_eq!(
            rel,
            [Path::new("src/a"), Path::new("src/b"), Path::new("top")]
        );
        assert!(!scan.cut_short);
        // $HOME itself can be a repository (dotfiles): found, and looked into.
        mkdirs(&home, &[".git"]);
        assert_eq!(find_repos(&home, UNLIMITED).repos.len(), 4);
        // The limits stop it, and say so.
        let few = find_repos(
            &home,
            RepoWalk {
                max_dirs: 2,
                ..UNLIMITED
            },
        );
        assert!(few.cut_short && few.repos.len() < 4, "{few:?}");
        let none = find_repos(
            &home,
            RepoWalk {
                budget: Some(Duration::ZERO),
                ..UNLIMITED
            },
        );
        assert!(none.cut_short, "{none:?}");
        std::fs::remove_dir_all(&home).expect("cleanup");
    }

    /// The current worktree, the repository's main checkout and its other worktrees are one
    /// repository; a repository elsewhere is another.
    #[test]
    fn worktrees_of_the_same_repository_are_told_apart() {
        let home = scratch("same");
        mkdirs(&home, &["app/.git/worktrees/wt", "wt", "wt2", "other/.git"]);
        std::fs::write(
            home.join("wt/.git"),
            format!("gitdir: {}/app/.git/worktrees/wt\n", home.display()),
        )
        .expect("write");
        mkdirs(&home, &["app/.git/worktrees/wt2"]);
        std::fs::write(home.join("wt2/.git"), "gitdir: ../app/.git/worktrees/wt2\n")
            .expect("write");
        let common = home.join("app/.git");
        let root = home.join("wt");
        for same in ["wt", "wt2", "app"] {
            assert!(
                same_repository(&home.join(same), &root, Some(&common)),
                "{same}"
            );
        }
        assert!(!same_repository(&home.join("other"), &root, Some(&common)));
        assert!(!same_repository(&home.join("app"), &root, None));
        assert_eq!(
            git_dir_of(&home.join("wt2")),
            Some(home.join("app/.git/worktrees/wt2"))
        );
        std::fs::remove_dir_all(&home).expect("cleanup");
    }

    /// The credential stores that exist, with `*` patterns expanded.
    #[test]
    fn credential_stores_are_listed_with_patterns_expanded() {
        let home = scratch("stores");
        mkdirs(&home, &[".ssh", ".aws", ".config/gh", ".config/git"]);
        for f in [
            ".ssh/id_ed25519",
            ".ssh/id_rsa.pub",
            ".ssh/config",
            ".ssh/deploy.pem",
            ".netrc",
        ] {
            std::fs::write(home.join(f), "x").expect("write");
        }
        let rel: Vec<PathBuf> = credential_stores(&home)
            .iter()
            .map(|p| p.strip_prefix(&home).expect("in home").to_path_buf())
            .collect();
        let want: Vec<PathBuf> = [
            ".aws",
            ".config/gh",
            ".netrc",
            ".ssh/deploy.pem",
            ".ssh/id_ed25519",
            ".ssh/id_rsa.pub",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(rel, want);
        std::fs::remove_dir_all(&home).expect("cleanup");
    }

    #[test]
    fn policy_notes_doctor_restates() {
        assert!(restated("main worktree: its .git/config …", false));
        assert!(restated(
            "linked worktree: the repository's config …",
            false
        ));
        assert!(restated("submodule: its git dir …", false));
        assert!(!restated(
            "$HOME is private (home = \"private\", the default): …",
            false
        ));
        assert!(restated(
            "$HOME is private (home = \"private\", the default): …",
            true
        ));
        assert!(!restated("$HOME is writable (home = \"open\"): …", true));
    }

    /// An IPv4 address as `/proc/net/tcp` prints it on this machine.
    fn hex4(a: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(a))
    }

    /// An IPv6 address as `/proc/net/tcp6` prints it on this machine.
    fn hex6(a: Ipv6Addr) -> String {
        a.octets()
            .chunks(4)
            .map(|w| hex4([w[0], w[1], w[2], w[3]]))
            .collect()
    }

    fn tcp_line(addr: &str, port: u16, st: &str, inode: u64) -> String {
        format!(
            "   0: {addr}:{port:04X} 00000000:0000 {st} 00000000:00000000 00:00000000 00000000  1000        0 {inode} 1 0000000000000000 100 0 0 10 0\n"
        )
    }

    const TCP_HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";

    fn loopback(text: &str) -> Vec<(IpAddr, u16, u64)> {
        parse_tcp(text)
            .into_iter()
            .filter(|l| via_loopback(l.addr))
            .map(|l| (l.addr, l.port, l.inode))
            .collect()
    }

    #[test]
    fn tcp_listeners_on_loopback_and_wildcard_ipv4() {
        let mut text = TCP_HEADER.to_string();
        text += &tcp_line(&hex4([127, 0, 0, 1]), 631, "0A", 11);
        text += &tcp_line(&hex4([0, 0, 0, 0]), 22, "0A", 12);
        text += &tcp_line(&hex4([127, 0, 1, 53]), 53, "0A", 13);
        // Listening, but on a LAN address; connected (01) and TIME_WAIT (06) on loopback.
        text += &tcp_line(&hex4([192, 168, 1, 5]), 80, "0A", 14);
        text += &tcp_line(&hex4([127, 0, 0, 1]), 5000, "01", 15);
        text += &tcp_line(&hex4([127, 0, 0, 1]), 5001, "06", 16);
        // Not lines of the table.
        text += "   1: garbage\n   2: 7F00000G:0050 00000000:0000 0A 0:0 0:0 0 0 0 17\n\n";
        assert_eq!(parse_tcp(&text).len(), 4);
        let v4 = |a: [u8; 4]| IpAddr::V4(Ipv4Addr::from(a));
        assert_eq!(
            loopback(&text),
            vec![
                (v4([127, 0, 0, 1]), 631, 11),
                (v4([0, 0, 0, 0]), 22, 12),
                (v4([127, 0, 1, 53]), 53, 13)
            ]
        );
    }

    /// The kernel's own text, as a little-endian machine prints it.
    #[cfg(target_endian = "little")]
    #[test]
    fn tcp_text_as_the_kernel_prints_it() {
        let text = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 21373 1 00000000abf9ebd3 100 0 0 10 0\n";
        assert_eq!(
            loopback(text),
            vec![(IpAddr::V4(Ipv4Addr::LOCALHOST), 631, 21373)]
        );
        let text6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n   1: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4243 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(
            loopback(text6),
            vec![
                (IpAddr::V6(Ipv6Addr::LOCALHOST), 8080, 4242),
                (IpAddr::V6(Ipv4Addr::LOCALHOST.to_ipv6_mapped()), 8081, 4243)
            ]
        );
    }

    #[test]
    fn tcp6_listeners_loopback_wildcard_and_mapped() {
        let mut text = TCP_HEADER.to_string();
        let v6 = |s: &str| s.parse::<Ipv6Addr>().expect("address");
        for (addr, port, st, inode) in [
            ("::1", 8080, "0A", 21),
            ("::", 8443, "0A", 22),
            ("::ffff:127.0.0.1", 9000, "0A", 23),
            ("::ffff:0.0.0.0", 9001, "0A", 24),
            // Not through loopback: mapped LAN, link-local, global.
            ("::ffff:10.0.0.1", 9002, "0A", 25),
            ("fe80::1", 9003, "0A", 26),
            ("2001:db8::7", 9004, "0A", 27),
            // Not listening.
            ("::1", 9005, "01", 28),
            ("::1", 9006, "08", 29),
        ] {
            text += &tcp_line(&hex6(v6(addr)), port, st, inode);
        }
        assert_eq!(parse_tcp(&text).len(), 7);
        let got: Vec<u16> = loopback(&text).iter().map(|l| l.1).collect();
        assert_eq!(got, vec![8080, 8443, 9000, 9001]);
        assert_eq!(loopback(&text)[0].0, IpAddr::V6(Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn hex_addresses_of_other_lengths_are_refused() {
        assert_eq!(hex_addr(""), None);
        assert_eq!(hex_addr("0100007"), None);
        assert_eq!(hex_addr("0100007F0"), None);
        assert_eq!(hex_addr("+100007F"), None);
        assert_eq!(hex_addr("0100007\u{e9}"), None);
    }

    const UNIX_HEADER: &str = "Num       RefCount Protocol Flags    Type St Inode Path\n";

    fn unix_line(flags: u32, kind: u16, st: u8, inode: u64, path: &str) -> String {
        format!(
            "0000000012345678: 00000002 00000000 {flags:08X} {kind:04X} {st:02X} {inode:5}{}{path}\n",
            if path.is_empty() { "" } else { " " }
        )
    }

    fn paths(v: &[UnixListen]) -> Vec<(String, u64, bool)> {
        v.iter()
            .map(|u| (u.path.to_string_lossy().into_owned(), u.inode, u.datagram))
            .collect()
    }

    #[test]
    fn unix_listeners_path_named_only() {
        let mut text = UNIX_HEADER.to_string();
        text += &unix_line(SO_ACCEPTCON, 1, 1, 101, "/run/dbus/system_bus_socket");
        // An accepted connection carries its server's path, but does not listen.
        text += &unix_line(0, 1, 3, 102, "/run/dbus/system_bus_socket");
        // A bound datagram socket receives: journald's.
        text += &unix_line(0, SOCK_DGRAM, 7, 103, "/run/systemd/journal/dev-log");
        // A listening seqpacket socket.
        text += &unix_line(SO_ACCEPTCON, 5, 1, 104, "/run/seq.sock");
        // Abstract (Landlock ABI 6 scopes those), unnamed, relative: left out.
        text += &unix_line(SO_ACCEPTCON, 1, 1, 105, "@/tmp/.X11-unix/X0");
        text += &unix_line(0, 1, 3, 106, "");
        text += &unix_line(SO_ACCEPTCON, 1, 1, 107, "rel.sock");
        // A path with spaces, and one with control characters (any process names its socket).
        text += &unix_line(SO_ACCEPTCON, 1, 1, 108, "/tmp/my  sock");
        text += &unix_line(SO_ACCEPTCON, 1, 1, 109, "/tmp/\x1b]0;pwned\x07\t.sock");
        // Inodes wider than the column.
        text += &unix_line(SO_ACCEPTCON, 1, 1, 12345678901, "/tmp/wide");
        // Not lines of the table.
        text += "garbage\n00000000: 1 2\nZZZZZZZZZZZZZZZZ: 00000002 00000000 00010000 0001 01 110 /tmp/bad\n";
        let got = parse_unix(text.as_bytes());
        assert_eq!(
            paths(&got),
            vec![
                ("/run/dbus/system_bus_socket".into(), 101, false),
                ("/run/systemd/journal/dev-log".into(), 103, true),
                ("/run/seq.sock".into(), 104, false),
                ("/tmp/my  sock".into(), 108, false),
                ("/tmp/\x1b]0;pwned\x07\t.sock".into(), 109, false),
                ("/tmp/wide".into(), 12345678901, false),
            ]
        );
    }

    /// A newline in a socket's name ends its line in /proc/net/unix: what follows reads as a
    /// line of its own, which [`reachable_unix_sockets`] weeds out by asking whether the path
    /// is a socket.
    #[test]
    fn a_newline_in_a_socket_name_forges_a_line_that_is_checked() {
        let s = std::env::temp_dir().join(format!("lw-doctor-{}", std::process::id()));
        let _ignored = std::fs::remove_dir_all(&s);
        std::fs::create_dir_all(&s).expect("mkdir");
        let real = s.join("real.sock");
        let _l = std::os::unix::net::UnixListener::bind(&real).expect("bind");
        let forged = format!(
            "{}/x\n0000000000000000: 00000002 00000000 00010000 0001 01 99 /etc/passwd",
            s.display()
        );
        let mut text = UNIX_HEADER.to_string();
        text += &unix_line(SO_ACCEPTCON, 1, 1, 98, &forged);
        text += &unix_line(SO_ACCEPTCON, 1, 1, 97, &real.display().to_string());
        let got = parse_unix(text.as_bytes());
        assert_eq!(got.len(), 3, "{got:?}");
        let kept: Vec<&UnixListen> = got.iter().filter(|u| is_socket(&u.path)).collect();
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].path, real);
        std::fs::remove_dir_all(&s).expect("cleanup");
    }

    #[test]
    fn socket_inodes_from_descriptor_links() {
        assert_eq!(socket_inode(b"socket:[1068]"), Some(1068));
        assert_eq!(socket_inode(b"socket:[]"), None);
        assert_eq!(socket_inode(b"pipe:[1068]"), None);
        assert_eq!(socket_inode(b"/tmp/socket:[1]"), None);
    }

    /// The owner search finds this test's own listener, and gives up at once with no time.
    #[test]
    fn owners_are_found_through_proc() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let seen = look(false);
        let (addrs, inodes) = seen.tcp.get(&port).expect("our listener in /proc/net/tcp");
        assert_eq!(addrs, &vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        let wanted: HashSet<u64> = inodes.iter().copied().collect();
        let found = owners(&wanted, Duration::from_secs(5));
        let me = found.get(&inodes[0]).expect("found");
        assert_eq!(me.pid, std::process::id());
        assert!(!me.comm.is_empty() && !me.comm.contains('\n'), "{me:?}");
        assert!(owners(&wanted, Duration::ZERO).is_empty());
        assert!(owners(&HashSet::new(), Duration::from_secs(5)).is_empty());
        drop(l);
    }

    fn config(text: &str) -> config::Config {
        config::from_str(Path::new("/etc/landwall/landwall.toml"), text).expect("config")
    }

    fn seen_tcp(ports: &[(u16, [u8; 4], u64)]) -> Seen {
        let mut seen = Seen::default();
        for &(port, a, inode) in ports {
            let (addrs, inodes) = seen.tcp.entry(port).or_default();
            addrs.push(IpAddr::V4(Ipv4Addr::from(a)));
            inodes.push(inode);
        }
        seen
    }

    fn report(text: &str, abi: u32, seen: &Seen) -> (bool, String) {
        report_as(text, abi, false, seen)
    }

    fn report_as(text: &str, abi: u32, root: bool, seen: &Seen) -> (bool, String) {
        let c = config(text);
        let groups = unix_groups(&c);
        let d = report_doors(
            &c,
            abi,
            root,
            Path::new("/etc/landwall/landwall.toml"),
            &groups,
            seen,
        );
        (d.ok, d.lines.join("\n"))
    }

    #[test]
    fn default_policy_every_loopback_listener_is_a_door() {
        let mut seen = seen_tcp(&[(631, [127, 0, 0, 1], 1), (22, [0, 0, 0, 0], 2)]);
        seen.owners.insert(
            1,
            Owner {
                pid: 812,
                comm: "cupsd".into(),
            },
        );
        let (ok, text) = report("", 7, &seen);
        assert!(ok, "{text}");
        assert!(
            text.contains("exposure    loopback TCP: the agent can connect to 2 listening port(s)"),
            "{text}"
        );
        assert!(text.contains("connect_tcp = [443, …]"), "{text}");
        assert!(text.contains("  tcp port 22    on 0.0.0.0\n"), "{text}");
        assert!(
            text.contains("  tcp port 631   on 127.0.0.1 (cupsd, pid 812)"),
            "{text}"
        );
        assert!(
            text.contains("unix        refused: the seccomp filter"),
            "{text}"
        );
        assert!(
            text.contains("seccomp     every launch's filter refuses: ")
                && text.contains(", Unix sockets"),
            "{text}"
        );
        assert!(
            !text.contains("MPTCP") && !text.contains("setgid"),
            "{text}"
        );
        // A root agent owns /usr and /etc: the filter refuses setgid bits too.
        let (_, root) = report_as("", 7, true, &seen);
        assert!(root.contains(", setgid bits"), "{root}");
        let (_, none) = report("", 7, &Seen::default());
        assert!(none.contains("tcp         no TCP listener"), "{none}");
    }

    #[test]
    fn connect_tcp_leaves_only_the_listed_ports() {
        let seen = seen_tcp(&[(631, [127, 0, 0, 1], 1), (443, [0, 0, 0, 0], 2)]);
        let (ok, text) = report("[network]\nconnect_tcp = [443]\n", 7, &seen);
        assert!(ok, "{text}");
        assert!(text.contains("tcp port 443"), "{text}");
        assert!(!text.contains("631"), "{text}");
        assert!(text.contains("refuses the other 1"), "{text}");
        assert!(text.contains("MPTCP"), "{text}");
        let (ok, text) = report("[network]\nconnect_tcp = [80]\n", 7, &seen);
        assert!(ok && !text.contains("exposure"), "{text}");
        assert!(text.contains("lists none of the 2 port(s)"), "{text}");
        let (ok, text) = report("[network]\nconnect_tcp = [80]\n", 3, &seen);
        assert!(!ok && text.contains("launches are REFUSED"), "{text}");
    }

    #[test]
    fn unix_guard_by_kernel_and_configuration() {
        let (ok, text) = report("", 9, &Seen::default());
        assert!(ok, "{text}");
        assert!(
            text.contains("unix        refused by path (Landlock ABI 9)"),
            "{text}"
        );
        assert!(!text.contains("Unix sockets"), "{text}");
        let named = "[unix]\nsockets = [\"/run/user/1000/ssh.sock\"]\n";
        let (ok, text) = report(named, 9, &Seen::default());
        assert!(
            ok && text.contains(
                "except the agent's own and those [unix] sockets names: /run/user/1000/ssh.sock"
            ),
            "{text}"
        );
        let (ok, text) = report(named, 8, &Seen::default());
        assert!(!ok, "{text}");
        assert!(text.contains("launches are REFUSED (exit 78)"), "{text}");
        assert!(!text.contains("seccomp     "), "{text}");
    }

    #[test]
    fn allow_all_is_exposure_and_lists_the_sockets_escaped() {
        let mut seen = Seen::default();
        for (i, p) in ["/run/dbus/system_bus_socket", "/tmp/\x1b[2J\nforged line"]
            .into_iter()
            .enumerate()
        {
            seen.sockets.push(UnixListen {
                path: PathBuf::from(p),
                inode: i as u64,
                datagram: i == 1,
            });
        }
        seen.owners.insert(
            0,
            Owner {
                pid: 1,
                comm: "dbus\x1b]0;x\x07".into(),
            },
        );
        let (ok, text) = report("[unix]\nallow_all = true\n", 7, &seen);
        assert!(ok, "{text}");
        assert!(
            text.contains("exposure    Unix sockets: allow_all in [unix]: the agent can connect to every Unix socket"),
            "{text}"
        );
        assert!(
            text.contains("to close: remove `allow_all` from [unix]; name the sockets the agent needs in `[unix] sockets`"),
            "{text}"
        );
        assert!(
            text.contains("  socket    /run/dbus/system_bus_socket (dbus\\e]0;x\\x07, pid 1)"),
            "{text}"
        );
        assert!(
            text.contains("  socket    /tmp/\\e[2J\\nforged line (datagram)"),
            "{text}"
        );
        assert!(
            !text.chars().any(|c| c != '\n' && c.is_control()),
            "{text:?}"
        );
        // The filter lets Unix sockets through.
        let filter = text
            .lines()
            .find(|l| l.starts_with("seccomp     "))
            .expect("seccomp line");
        assert!(!filter.contains("Unix"), "{filter}");
    }

    #[test]
    fn agents_with_their_own_unix_settings_are_reported_apart() {
        let text =
            "[agents.codex.unix]\nallow_all = true\n[agents.aider]\nreal = \"/usr/bin/aider\"\n";
        let (ok, text) = report(text, 7, &Seen::default());
        assert!(ok, "{text}");
        assert!(
            text.contains("unix        claude, opencode, aider: refused: the seccomp filter"),
            "{text}"
        );
        assert!(
            text.contains("exposure    codex: Unix sockets: allow_all in [agents.codex.unix]"),
            "{text}"
        );
        assert!(
            text.contains("seccomp     codex: every launch's filter"),
            "{text}"
        );
    }
}
