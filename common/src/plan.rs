//! From a process's inputs (its environment, cwd and the configuration) to a ready launch:
//! the policy and the exec. Shared by the shim, `landwall run/policy/check` and the drain
//! daemon so that all of them wall the same way.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::agent::{self, FileId, Found};
use crate::config::Config;
use crate::launch::Exec;
use crate::linkcache::LinkCache;
use crate::policy::{self, Inputs, Policy};
use crate::profile;
use crate::realpath::Resolver;
use crate::worktree;
use crate::Error;

/// The process environment as given, in order.
pub type Vars = [(OsString, OsString)];

/// The value of `name` in `vars` (the last one wins, as in libc's `getenv` on a well-formed
/// environment).
pub fn var<'a>(vars: &'a Vars, name: &str) -> Option<&'a OsStr> {
    vars.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_os_str())
        .filter(|v| !v.is_empty())
}

/// Whether this process runs as root (effective uid 0).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The running executable's identity, so the shim can recognise itself on PATH.
pub fn current_exe_id() -> Result<FileId, Error> {
    FileId::of(Path::new("/proc/self/exe")).map_err(|source| Error::Exec {
        path: PathBuf::from("/proc/self/exe"),
        source,
    })
}

/// Finds the real agent for the shim named `name`.
pub fn find_agent(
    name: &str,
    vars: &Vars,
    config: &Config,
    me: FileId,
) -> Result<(PathBuf, Found), Error> {
    let configured = config.agents.get(name).and_then(|a| a.real.as_deref());
    agent::find_real(name, var(vars, "PATH"), me, configured).map_err(|e| match e {
        agent::AgentError::ConfiguredMissing { name, path, .. } => {
            let at = config
                .places
                .describe(&path, &format!("[agents.{name}] real"));
            Error::Agent(agent::AgentError::ConfiguredMissing { name, path, at })
        }
        other => Error::Agent(other),
    })
}

/// Resolves `cmd` like `execvp` does (for `landwall run`): a name with a `/` is taken as a
/// path, anything else is looked up on PATH.
pub fn resolve_command(cmd: &OsStr, vars: &Vars) -> Result<PathBuf, Error> {
    let not_found = |what: String| Error::Exec {
        path: PathBuf::from(cmd),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, what),
    };
    if cmd.as_encoded_bytes().contains(&b'/') {
        return Ok(PathBuf::from(cmd));
    }
    let path = var(vars, "PATH").ok_or_else(|| not_found("PATH is not set".into()))?;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(cmd))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| {
                m.is_file()
                    && std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
            })
        })
        .ok_or_else(|| not_found("not found on PATH".into()))
}

/// Builds the policy for `agent` in `cwd` (or the worktree override).
///
/// `cwd_from_getcwd`: `cwd` is what getcwd(2) returned just now. The kernel builds that path
/// from the directory itself, so it is real (absolute, no symlinks) and its components need
/// no `lstat` each; a path from anywhere else (a spooled job's) is resolved.
///
/// `launch`: the policy is for a launch, which first makes the agents' state it holds
/// (empty, where empty means none) and puts back the command-bearing keys of Claude Code's
/// `.claude.json`. A policy only looked at (`policy`, `check`, `doctor`) changes nothing.
#[allow(clippy::too_many_arguments)]
pub fn build_policy(
    agent: &str,
    real: Option<&Path>,
    cwd: &Path,
    cwd_from_getcwd: bool,
    worktree_override: Option<&Path>,
    vars: &Vars,
    config: &Config,
    launch: bool,
) -> Result<Policy, Error> {
    let override_dir = worktree_override.or_else(|| var(vars, "LANDWALL_WORKTREE").map(Path::new));
    // One resolver for discovery and the policy: the worktree's paths are resolved once.
    let mut resolver = Resolver::default();
    if cwd_from_getcwd {
        resolver.trust_real_dir(cwd);
    }
    let wt = worktree::discover_with(cwd, override_dir, &mut resolver)?;
    let home = var(vars, "HOME").map(Path::new);
    if override_dir.is_none() {
        let real_home = home.and_then(|h| resolver.resolve(h).ok()).map(|(p, _)| p);
        worktree::refuse_too_wide(&wt, real_home.as_deref())?;
    }
    let link_cache = LinkCache::in_runtime_dir(var(vars, "XDG_RUNTIME_DIR"));
    if let (true, Some(home)) = (config.home.has_state_dirs(), home) {
        ensure_state_dirs(agent, home)?;
    }
    if let (true, Some(home)) = (launch, home) {
        make_agent_code(agent, home, &policy::own_projects(&wt));
    }
    let is_root = nix::unistd::geteuid().is_root();
    let again = |c: &Config| -> Result<Policy, Error> {
        Ok(policy::build(Inputs {
            agent,
            worktree: wt.clone(),
            home,
            real_agent: real,
            config: c,
            is_root,
            link_cache: link_cache.as_ref(),
        })?)
    };
    let mut policy = policy::build_with(
        Inputs {
            agent,
            worktree: wt.clone(),
            home,
            real_agent: real,
            config,
            is_root,
            link_cache: link_cache.as_ref(),
        },
        resolver,
    )?;
    refuse_agent_written_grants(&policy, config, &again)?;
    if launch && agent == "claude" {
        policy.protection.guards = guard_claude_json(&policy, home, vars)?;
        // The agent's `.claude.json`, as judged: a copy of the launch's own in its namespace,
        // so that what the agent writes there reaches the file other launches read only
        // once the watcher has judged it. (Not `.config.json`, swept where it appears.)
        let privates: Vec<PathBuf> = policy
            .protection
            .guards
            .iter()
            .filter_map(|g| match g {
                crate::protect::Guard::ClaudeJson { dir, name, .. }
                    if *name == crate::agentstate::NAME =>
                {
                    Some(dir.join(name))
                }
                _ => None,
            })
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file()))
            .collect();
        for path in privates {
            policy.protection.held.push(crate::protect::Held {
                path,
                hold: crate::protect::Hold::Private,
                is_dir: false,
                reason: "Claude Code's state, with the MCP servers it starts: a copy of this launch's own, brought back judged when it ends".into(),
                store: None,
            });
        }
    }
    if launch {
        make_layer_stores(&policy);
    }
    if let Some(g) = guard_auth(&policy, home, vars, launch).filter(|_| launch) {
        // OpenCode's sign-ins, likewise (it writes `auth.json` in place).
        if let crate::protect::Guard::OpenCodeAuth { dir, name, .. } = &g {
            let path = dir.join(name);
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                policy.protection.held.push(crate::protect::Held {
                    path,
                    hold: crate::protect::Hold::Private,
                    is_dir: false,
                    reason: "OpenCode's sign-ins, which name where it sends its requests: a copy of this launch's own, brought back judged when it ends".into(),
                    store: None,
                });
            }
        }
        policy.protection.guards.push(g);
    }
    // The record of what is the user's own, where the agent can write nothing.
    if !policy.protection.is_empty() {
        let record = crate::record::place(home, |p| {
            policy.decide(p).rule.is_some_and(|r| r.access.writes())
        });
        policy.protection.record = record;
    }
    Ok(policy)
}

/// The per-user file may widen the wall only if the agent cannot rewrite it: under a
/// writable home an agent could add `writable = ["/"]` for its next launch. Such a file may
/// still narrow the wall (`deny`, a higher `min_abi`, `home = "strict"`) — but not in the
/// judgement of whether it could be rewritten: the agent would write `home = "strict"` or a
/// `deny` of the file itself beside its grants. So that is asked of the policy the launch
/// would have without the file's narrowing (a second build, only when the file widens).
fn refuse_agent_written_grants(
    policy: &Policy,
    config: &Config,
    inputs: &dyn Fn(&Config) -> Result<Policy, Error>,
) -> Result<(), Error> {
    let (Some(user), false) = (config.user_source(), config.user_widening.is_empty()) else {
        return Ok(());
    };
    // Provenance first. A file the agent cannot rewrite now may still be one it wrote in an
    // earlier launch: under the writable home before `home = "strict"`, or before a `deny`
    // of its directory matched anything (found by review). A walled agent runs as the user
    // without capabilities and cannot make a file root's, so a root-owned file that group
    // and others cannot write is one the user vouched for (with sudo). Run as root, the
    // agent owns what root owns: root's widening belongs in the system file.
    let not_vouched = |why: String, fix: String| {
        Error::Policy(policy::PolicyError::UserConfigNotVouched {
            path: user.to_path_buf(),
            keys: config.user_widening.join(", "),
            why,
            fix,
        })
    };
    if running_as_root() {
        return Err(not_vouched(
            "landwall runs as root".into(),
            "as root, put those settings in the system configuration".into(),
        ));
    }
    let vouch = format!(
        "to vouch for it: `sudo chown root: {p} && sudo chmod go-w {p}`, or move those settings to the system configuration",
        p = user.display()
    );
    match config.user_file_owner {
        Some((0, mode)) if mode & 0o022 == 0 => {}
        Some((0, mode)) => {
            return Err(not_vouched(
                format!("group or others may write it (mode {:o})", mode & 0o7777),
                vouch,
            ))
        }
        Some((uid, _)) => return Err(not_vouched(format!("it is owned by uid {uid}"), vouch)),
        None => return Err(not_vouched("its owner is unknown".into(), vouch)),
    }
    let narrowed = config.home != config.system_home || config.deny.len() > config.system_deny;
    let unnarrowed;
    let judge = if narrowed {
        let mut c = config.clone();
        c.home = c.system_home;
        c.deny.truncate(c.system_deny);
        unnarrowed = inputs(&c)?;
        &unnarrowed
    } else {
        policy
    };
    let linked = |why: String| {
        Error::Policy(policy::PolicyError::AgentLinkedConfig {
            path: user.to_path_buf(),
            keys: config.user_widening.join(", "),
            why,
        })
    };
    // A symlink on the way that sits where the agent can write: it could have made it, in
    // an earlier launch, pointing at a file of its own elsewhere (found by review). Each
    // component is looked at as it is, in its real parent directory, without following it.
    let mut prefix = if user.is_absolute() {
        PathBuf::from("/")
    } else {
        PathBuf::from(".")
    };
    for part in user.components() {
        let std::path::Component::Normal(name) = part else {
            prefix.push(part);
            continue;
        };
        let parent = std::fs::canonicalize(&prefix)
            .map_err(|e| linked(format!("{} cannot be resolved ({e})", prefix.display())))?;
        prefix.push(name);
        let entry = parent.join(name);
        let is_link = std::fs::symlink_metadata(&entry)
            .map_err(|e| linked(format!("{} cannot be read ({e})", entry.display())))?
            .file_type()
            .is_symlink();
        if let Some(rule) = is_link
            .then(|| judge.decide(&parent).rule)
            .flatten()
            .filter(|r| r.access.writes())
        {
            return Err(linked(format!(
                "its path goes through the symbolic link {}, in the writable grant {}",
                entry.display(),
                rule.path.display()
            )));
        }
    }
    // The file that was read is the file judged: a link flipped between the two would
    // otherwise show one file to the reader and another to the judge.
    let now = std::fs::metadata(user)
        .map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        })
        .ok();
    if now.is_none() || now != config.user_file_id {
        return Err(linked(
            "it was replaced while the launch read it".to_string(),
        ));
    }
    // Writable itself, or replaceable through its directory.
    let writable = std::iter::once(user)
        .chain(user.parent())
        .find_map(|p| judge.decide(p).rule.filter(|r| r.access.writes()));
    if let Some(rule) = writable {
        return Err(Error::Policy(policy::PolicyError::AgentWritableConfig {
            path: user.to_path_buf(),
            keys: config.user_widening.join(", "),
            rule: rule.path.clone(),
        }));
    }
    Ok(())
}

/// Creates the agent's state directories under the private and read-only homes, before the
/// wall goes up: the agent cannot write `$HOME` itself, so could not create them afterwards.
fn ensure_state_dirs(agent: &str, home: &Path) -> Result<(), Error> {
    for dir in profile::state_dirs(agent) {
        make_dirs_no_symlinks(home, dir).map_err(|source| {
            Error::Policy(policy::PolicyError::Required {
                path: home.join(dir),
                reason: format!("{agent}'s state directory"),
                source,
            })
        })?;
    }
    Ok(())
}

/// Creates `home`/`rel` one component at a time, each opened without following a symlink:
/// `create_dir_all` would follow a link the agent left in the home under the writable home
/// (`~/.local` → `/etc`) and create directories wherever it points, as the user or root.
fn make_dirs_no_symlinks(home: &Path, rel: &str) -> std::io::Result<()> {
    make_dirs_no_symlinks_mode(home, rel, 0o777)
}

/// Makes the store of each of `policy`'s layers ([`crate::protect::Hold::Layer`]),
/// owner-only, one component at a time without following a link, under the home the
/// record is kept in. One that cannot be made fails the launch
/// when the namespace opens it, with its path.
fn make_layer_stores(policy: &Policy) {
    let Some(under) = Path::new(crate::record::UNDER_HOME).parent() else {
        return;
    };
    for h in &policy.protection.held {
        let Some(store) = h.store.as_deref() else {
            continue;
        };
        let (Some(dir), Some(project), Some(home)) = (
            store.file_name(),
            store.parent().and_then(Path::file_name),
            store.ancestors().nth(6),
        ) else {
            continue;
        };
        let rel = under.join(crate::record::LAYERS).join(project).join(dir);
        if home.join(&rel) != store {
            continue;
        }
        // Made by an earlier launch: a link anywhere on the way fails the namespace, which
        // opens it without following one.
        if std::fs::symlink_metadata(store).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        // Its slots are made in the namespace, as they are taken.
        if let Err(e) = make_dirs_no_symlinks_mode(home, &rel.to_string_lossy(), 0o700) {
            log::debug!("{}: not made ({e})", store.display());
        }
    }
}

/// [`make_dirs_no_symlinks`], each directory made with `mode` (less the umask).
fn make_dirs_no_symlinks_mode(home: &Path, rel: &str, mode: u32) -> std::io::Result<()> {
    use nix::fcntl::{open, openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    // Usually there already, as plain directories: nothing to make (and a launch inside
    // another's wall, which cannot open `$HOME`, needs nothing made). A link or a missing
    // component goes the careful way below.
    let mut path = home.to_path_buf();
    let there = rel.split('/').filter(|p| !p.is_empty()).all(|part| {
        path.push(part);
        path.symlink_metadata()
            .is_ok_and(|m| m.file_type().is_dir())
    });
    if there {
        return Ok(());
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    // $HOME itself may be a symlink (the policy resolves it); what is below it may not.
    let mut dir = open(
        home,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        match mkdirat(&dir, part, Mode::from_bits_truncate(mode)) {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => return Err(e.into()),
        }
        dir = openat(&dir, part, flags, Mode::empty()).map_err(|e| match e {
            nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR => std::io::Error::other(format!(
                "{part} is a symbolic link or not a directory; an agent's state directory must be a plain directory"
            )),
            e => e.into(),
        })?;
    }
    Ok(())
}

/// Makes the command-bearing keys of the agent's `.claude.json` the user's
/// ([`crate::agentstate`]), where the agent's copy is one it may write and the user's
/// `~/.claude.json` one it may not: under the private and read-only homes, where the agent
/// gets `CLAUDE_CONFIG_DIR` from the shim. Says each key put back.
fn guard_claude_json(
    policy: &Policy,
    home: Option<&Path>,
    vars: &Vars,
) -> Result<Vec<crate::protect::Guard>, Error> {
    let mut guards = Vec::new();
    // Set by the user, it names the user's own copy too (docs/escape.md): there is nothing
    // of the user's to judge it against.
    if var(vars, "CLAUDE_CONFIG_DIR").is_some() {
        return Ok(guards);
    }
    let from_default = policy
        .env_defaults
        .iter()
        .find(|(k, _)| k == "CLAUDE_CONFIG_DIR")
        .map(|(_, v)| v.as_os_str());
    let (Some(dir), Some(home)) = (from_default, home) else {
        return Ok(guards);
    };
    let writes = |p: &Path| policy.decide(p).rule.is_some_and(|r| r.access.writes());
    let (Ok(dir), Ok(home)) = (std::fs::canonicalize(dir), std::fs::canonicalize(home)) else {
        return Ok(guards);
    };
    let user = home.join(crate::agentstate::NAME);
    for name in [crate::agentstate::NAME, crate::agentstate::OLD_NAME] {
        let copy = dir.join(name);
        if copy == user || !writes(&copy) || writes(&user) {
            continue;
        }
        if name == crate::agentstate::NAME {
            make_empty_json(&dir, name);
        }
        guard_one(&dir, name, &copy, &user)?;
        guards.push(crate::protect::Guard::ClaudeJson {
            dir: dir.clone(),
            name,
            user: user.clone(),
            judged: crate::protect::file_ident(&copy),
        });
    }
    Ok(guards)
}

/// OpenCode's `auth.json` (under `$XDG_DATA_HOME`, or `~/.local/share`), where this launch
/// may write it: its entries now, for the watcher to keep them as they are but for the
/// tokens OpenCode refreshes ([`crate::protect::Guard::OpenCodeAuth`]). A launch makes it
/// (`{}`, no sign-in) where it is absent, so that it has a copy of its own to work on
/// rather than the shared file. One that cannot be read as JSON now has no entry that
/// OpenCode would use; at the end it is moved aside.
fn guard_auth(
    policy: &Policy,
    home: Option<&Path>,
    vars: &Vars,
    launch: bool,
) -> Option<crate::protect::Guard> {
    const NAME: &str = "auth.json";
    let data = match var(vars, "XDG_DATA_HOME") {
        Some(d) if Path::new(d).is_absolute() => PathBuf::from(d),
        _ => home?.join(".local/share"),
    };
    let dir = std::fs::canonicalize(data.join("opencode")).ok()?;
    if !policy
        .decide(&dir.join(NAME))
        .rule
        .is_some_and(|r| r.access.writes())
    {
        return None;
    }
    if launch {
        make_empty_json(&dir, NAME);
    }
    let judged = crate::protect::file_ident(&dir.join(NAME));
    let start = crate::agentstate::auth_entries(&dir, NAME).unwrap_or_default();
    Some(crate::protect::Guard::OpenCodeAuth {
        dir,
        name: NAME,
        start,
        judged,
    })
}

/// Makes the JSON state file `name` in `dir` (OpenCode's `auth.json`, Claude Code's
/// `.claude.json`) `{}`, owner-only, where it is absent, so that even a launch before the
/// agent's first start has a copy of its own: never following a link, never over a file.
/// Where it cannot be made the launch works on the shared file, judged when it ends.
fn make_empty_json(dir: &Path, name: &str) {
    use nix::fcntl::{openat, OFlag};
    use nix::sys::stat::Mode;
    let made = nix::fcntl::open(
        dir,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .and_then(|d| {
        let f = openat(
            &d,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )?;
        match nix::unistd::write(&f, b"{}\n") {
            Ok(3) => Ok(()),
            // Not left half made: OpenCode would read no JSON.
            written => {
                let unlinked =
                    nix::unistd::unlinkat(&d, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
                log::debug!("{name}: removed after a failed write ({unlinked:?})");
                Err(written.err().unwrap_or(nix::errno::Errno::EIO))
            }
        }
    });
    match made {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => log::debug!("{}: not made ({e})", dir.join(name).display()),
    }
}

/// [`guard_claude_json`] of one file, `copy` (`name` in `dir`).
fn guard_one(dir: &Path, name: &str, copy: &Path, user: &Path) -> Result<(), Error> {
    let failed = |source| {
        Error::Policy(policy::PolicyError::ClaudeJson {
            path: copy.to_path_buf(),
            user: user.to_path_buf(),
            source,
        })
    };
    match crate::agentstate::guard(dir, name, user).map_err(failed)? {
        crate::agentstate::Guarded::Same => {}
        crate::agentstate::Guarded::PutBack(keys) => eprintln!(
            "landwall: {}: put back {} as {} has them: they name commands Claude Code runs, which only you may change (outside the wall, in that file)",
            copy.display(),
            keys.join(", "),
            user.display()
        ),
        crate::agentstate::Guarded::SetAside(to) => eprintln!(
            "landwall: {} could not be read as JSON, so its MCP servers could not be judged: moved aside to {}; Claude Code makes a new one",
            copy.display(),
            to.display()
        ),
    }
    Ok(())
}

/// Makes each of `agent`'s command-bearing state files and directories
/// ([`profile::agent_code`]) that is absent and may be made empty, so that the launch can
/// hold it read-only: one left absent could be written by an agent in one project and found
/// by a launch in another that starts before the watcher sets it aside. Made in its state
/// directory's descriptor, never following a link, owner-only. Where one cannot be made
/// (no state directory, a launch inside another's wall) it stays absent, and is swept when
/// it appears: nothing is weaker for it.
fn make_agent_code(agent: &str, home: &Path, projects: &[PathBuf]) {
    use nix::fcntl::{open, openat, OFlag};
    use nix::sys::stat::{mkdirat, Mode};
    let mut dirs: Vec<(&str, Option<std::os::fd::OwnedFd>)> = Vec::new();
    for (owner, code) in profile::agent_code() {
        let Some(make) = code.make.filter(|_| owner == agent) else {
            continue;
        };
        let rel = Path::new(code.path);
        let (Some(dir), Some(name)) = (rel.parent().and_then(Path::to_str), rel.file_name()) else {
            continue;
        };
        if !dirs.iter().any(|(d, _)| *d == dir) {
            // Its directory too, in a state directory (`~/.cache/opencode`); where that
            // cannot be made, the path stays absent and is swept.
            if let Err(e) = make_dirs_no_symlinks(home, dir) {
                log::debug!("{dir}: not made ({e})");
            }
            let fd = open(
                &home.join(dir),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                Mode::empty(),
            )
            .ok();
            dirs.push((dir, fd));
        }
        let Some(Some(fd)) = dirs.iter().find(|(d, _)| *d == dir).map(|(_, fd)| fd) else {
            continue;
        };
        let bytes = match make {
            profile::Make::Dir => None,
            profile::Make::File(bytes) => Some(bytes),
            profile::Make::FileUnless(bytes, beside) => {
                let found = beside.iter().any(|b| {
                    nix::sys::stat::fstatat(fd, *b, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                        .is_ok()
                });
                if found {
                    continue;
                }
                Some(bytes)
            }
        };
        let made = match bytes {
            None => mkdirat(fd, name, Mode::from_bits_truncate(0o700)),
            Some(bytes) => openat(
                fd,
                name,
                OFlag::O_WRONLY
                    | OFlag::O_CREAT
                    | OFlag::O_EXCL
                    | OFlag::O_NOFOLLOW
                    | OFlag::O_CLOEXEC,
                Mode::from_bits_truncate(0o600),
            )
            .and_then(|f| {
                nix::unistd::write(&f, bytes).and_then(|n| {
                    if n == bytes.len() {
                        Ok(())
                    } else {
                        Err(nix::errno::Errno::EIO)
                    }
                })
            }),
        };
        match made {
            Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
            Err(e) => log::debug!("{}: not made ({e}); swept if it appears", code.path),
        }
    }
    // The shared directories, and this launch's own entries in them, so they can be held.
    for (owner, shared) in profile::agent_shared() {
        if owner != agent {
            continue;
        }
        let own: Vec<String> = match shared.kept {
            profile::Kept::Project => projects
                .iter()
                .map(|p| format!("{}/{}", shared.path, profile::claude_project_dir(p)))
                .collect(),
            profile::Kept::Fresh => vec![shared.path.to_string()],
            profile::Kept::Layer | profile::Kept::Own | profile::Kept::Read => {
                vec![shared.path.to_string()]
            }
        };
        for rel in own {
            if let Err(e) = make_dirs_no_symlinks(home, &rel) {
                log::debug!("{rel}: not made ({e})");
            }
        }
    }
}

/// Prepares the exec of `program` with `argv` and the filtered environment.
pub fn prepare(
    policy: &Policy,
    program: &Path,
    argv: &[OsString],
    vars: &Vars,
) -> Result<Exec, Error> {
    // Only what passes is copied.
    let mut env: Vec<(OsString, OsString)> = vars
        .iter()
        .filter(|(k, _)| policy.env.passes(k))
        .cloned()
        .collect();
    for (k, v) in &policy.env_defaults {
        if !env.iter().any(|(name, _)| name == k) {
            env.push((k.clone(), v.clone()));
        }
    }

    // The real path the install directory was granted for, not a link to follow again.
    let program = policy.agent_exe.as_deref().unwrap_or(program);
    Exec::new(program, argv, &env)
}
