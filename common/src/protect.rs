//! Protected paths: the files inside the agent's writable grants that programs outside the
//! wall run, or read to decide what to run, without the user choosing to run anything (git
//! hooks and configuration, the linked worktree's `.git` file, `.envrc`, hook managers'
//! configuration, editor tasks, agents' project settings).
//!
//! Landlock cannot keep one file unchangeable inside a directory it grants for writing, so a
//! launch holds them in its private mount namespace ([`crate::ns`]): each one that exists is
//! bound read-only onto itself (a write gets EROFS; an unlink, a rename away or over it gets
//! EBUSY, since it is a mount point), and every directory between the worktree (or git dir)
//! and it is bound onto itself too, so that it cannot be renamed away with the protected
//! path inside and replaced. One that does not exist cannot be mounted over: it is
//! remembered, and the watcher that runs outside the wall ([`crate::watcher`]) removes it
//! when the agent exits if it appeared (and the drain's sweep does for its jobs).
//!
//! The list is [`DEFAULTS`], with the reason for each; `protect = [...]` in the
//! configuration adds paths and trims them (`"!path"`).

use std::borrow::Cow;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};

use crate::worktree::{GitLayout, Worktree};

/// A protected path, relative to the worktree's top level. A path that starts with `.git/`
/// names the entry of the worktree's own git dir, wherever it lies (in a linked worktree,
/// `<common>/worktrees/<id>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Default {
    /// The path.
    pub path: &'static str,
    /// Why it is protected: what runs it.
    pub reason: &'static str,
}

/// Why lefthook's configuration files are protected (each name it reads, the local ones
/// merged on top, found by review).
const LEFTHOOK: &str = "lefthook runs the commands it names on git hooks";

/// The default protected paths, each with what would run it outside the wall.
pub const DEFAULTS: &[Default] = &[
    Default {
        path: ".git",
        reason: "names the worktree's git dir: a linked worktree's `.git` file pointed at a git dir the agent wrote makes your next git command there run its hooks and core.fsmonitor; a main checkout's `.git` renamed away and rebuilt does the same",
    },
    Default {
        path: ".git/config",
        reason: "git runs the commands it names (core.fsmonitor, core.hooksPath, core.sshCommand, aliases, filters) on your next git command",
    },
    Default {
        path: ".git/config.worktree",
        reason: "read as config by git where extensions.worktreeConfig is set",
    },
    Default {
        path: ".git/commondir",
        reason: "names the directory git reads config and hooks from",
    },
    Default {
        path: ".git/hooks",
        reason: "git runs them on commit, checkout, merge and push",
    },
    Default {
        path: ".git/info",
        reason: "info/attributes picks the filters and diff drivers git runs",
    },
    Default {
        path: "*/.git",
        reason: "a submodule's `.git` file: pointed at a git dir the agent wrote, your next `git status` at the top runs its hooks and core.fsmonitor in the submodule",
    },
    Default {
        path: ".git/worktrees/*/commondir",
        reason: "names the common dir whose config and hooks git uses in that linked worktree",
    },
    Default {
        path: ".git/worktrees/*/config.worktree",
        reason: "read as config by git in that linked worktree where extensions.worktreeConfig is set",
    },
    Default {
        path: ".git/worktrees/*/gitdir",
        reason: "where git finds that linked worktree: landwall finds it there too, to protect it (rewritten, it would hide the worktree from the next launch)",
    },
    Default {
        path: ".git/modules/*/config",
        reason: "a submodule's git config: git runs the commands it names in that submodule",
    },
    Default {
        path: ".git/modules/*/hooks",
        reason: "a submodule's hooks: git runs them in that submodule",
    },
    Default {
        path: ".git/modules/*/commondir",
        reason: "names the directory whose config and hooks git uses in that submodule",
    },
    Default {
        path: ".git/modules/*/config.worktree",
        reason: "read as config by git in that submodule where extensions.worktreeConfig is set",
    },
    Default {
        path: "HEAD",
        reason: "with objects/ and refs/ beside it, git takes the worktree for a bare repository (when `.git` is broken) and reads its config and hooks",
    },
    Default {
        path: ".envrc",
        reason: "direnv runs it on entering the directory",
    },
    Default {
        path: ".pre-commit-config.yaml",
        reason: "pre-commit runs its hooks at your next commit (`repo: local` runs any command)",
    },
    Default {
        path: ".husky",
        reason: "husky's hooks, which git runs through core.hooksPath",
    },
    Default {
        path: ".githooks",
        reason: "hooks directory that repositories point core.hooksPath at",
    },
    Default {
        path: "lefthook.yml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook.yaml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook.toml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook.json",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook-local.yml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook-local.yaml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook-local.toml",
        reason: LEFTHOOK,
    },
    Default {
        path: "lefthook-local.json",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook.yml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook.yaml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook.toml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook.json",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook-local.yml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook-local.yaml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook-local.toml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook-local.json",
        reason: LEFTHOOK,
    },
    Default {
        path: ".config/lefthook.yml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".config/lefthook.yaml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".config/lefthook.toml",
        reason: LEFTHOOK,
    },
    Default {
        path: ".config/lefthook.json",
        reason: LEFTHOOK,
    },
    Default {
        path: ".lefthook",
        reason: "lefthook runs the scripts in it on git hooks (its source_dir)",
    },
    Default {
        path: ".lefthook-local",
        reason: "lefthook runs the scripts in it on git hooks (its source_dir_local)",
    },
    Default {
        path: ".vscode/tasks.json",
        reason: "VS Code runs tasks marked `runOn: folderOpen` when the folder is opened",
    },
    Default {
        path: ".vscode/settings.json",
        reason: "VS Code settings name programs the editor and its extensions run (interpreters, formatters, terminal profiles)",
    },
    Default {
        path: ".claude/settings.json",
        reason: "Claude Code's project settings define hooks: commands run on its events",
    },
    Default {
        path: ".claude/settings.local.json",
        reason: "Claude Code's local project settings define hooks too",
    },
    Default {
        path: ".mcp.json",
        reason: "names MCP servers: commands the agent starts",
    },
    Default {
        path: ".codex",
        reason: "Codex's project configuration names commands (notify, MCP servers)",
    },
    Default {
        path: "opencode.json",
        reason: "opencode's project configuration names commands (MCP servers, formatters)",
    },
    Default {
        path: "opencode.jsonc",
        reason: "opencode's project configuration names commands (MCP servers, formatters)",
    },
    Default {
        path: ".opencode",
        reason: "opencode's project plugins and configuration: code it runs",
    },
    Default {
        path: ".gemini/settings.json",
        reason: "Gemini CLI's project settings name commands (MCP servers, tool discovery)",
    },
];

/// One `protect` entry of the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// `"path"`: protected too.
    Add(String),
    /// `"!path"`: not protected (only honoured from a file the agent cannot write).
    Remove(String),
}

impl Change {
    /// Parses one entry: a relative path of plain components (no `.`, `..`, empty or
    /// absolute ones), optionally after `!`.
    pub fn parse(entry: &str) -> Result<Change, String> {
        let (remove, path) = match entry.strip_prefix('!') {
            Some(p) => (true, p),
            None => (false, entry),
        };
        // A pattern of landwall's own in the agents' state (`~/.codex/*.config.toml`) may be
        // left out by name; nothing else has `*` inside a component.
        let own_pattern = remove
            && path.strip_prefix(HOME_PREFIX).is_some_and(|rel| {
                crate::profile::agent_code().any(|(_, c)| c.path == rel && rel.contains(ANY))
            });
        if !own_pattern {
            check_relative(path)?;
        }
        Ok(if remove {
            Change::Remove(path.to_string())
        } else {
            Change::Add(path.to_string())
        })
    }
}

fn check_relative(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("is empty: name a path relative to the worktree, such as `.envrc`".into());
    }
    if path.starts_with('/') {
        return Err("is absolute: name a path relative to the worktree, such as `.envrc`".into());
    }
    if path.bytes().any(|b| b == 0 || b.is_ascii_control()) {
        return Err("holds a control character".into());
    }
    for part in path.split('/') {
        if part.contains(ANY) && part != ANY {
            return Err(format!(
                "has `{part}`: `*` stands only for a whole component (`.git/worktrees/*/commondir`)"
            ));
        }
        if part.is_empty() || part == "." || part == ".." {
            return Err(format!(
                "has a `{part}` component: name a plain path relative to the worktree, such as `.vscode/tasks.json`"
            ));
        }
    }
    Ok(())
}

/// What git's configuration names inside the worktree ([`crate::gitconfig`]), as plain
/// paths relative to it, with the reason: the hooks directory, included files, programs
/// that command settings name by their path, each where it leads now; and what comes
/// before each `..` on the way to one, which the agent could otherwise replace by a link.
/// Read leniently: a value this does not understand protects nothing more; the worktree's
/// top level itself is never one (it would hold the whole worktree).
fn named_by_git_config(worktree: &Worktree) -> Vec<(String, Cow<'static, str>)> {
    use crate::gitconfig::What;
    let env = crate::gitconfig::Env::from_process();
    let files = crate::gitconfig::files(worktree, &env);
    let root = worktree.root.as_path();
    let physical = |p: &Path| crate::gitconfig::physical(p).and_then(|p| in_worktree(root, &p));
    let mut found: Vec<(Option<String>, &'static str)> = Vec::new();
    for n in crate::gitconfig::named(&files, &env, root) {
        found.push((
            physical(&n.path),
            match n.what {
                What::Hooks => "core.hooksPath in git's configuration: git runs the hooks in it",
                What::Include => {
                    "included by git's configuration (include.path): git reads it as configuration"
                }
                What::Program => {
                    "a program a command in git's configuration names (core.fsmonitor, a filter, an editor, an alias): git runs it"
                }
            },
        ));
        // As written too, where a link on the way makes it lead elsewhere: the link could
        // be repointed (held, a link is refused, naming it).
        if !n.path.components().any(|c| c == Component::ParentDir) {
            found.push((
                in_worktree(root, &n.path),
                "named by git's configuration (a hooks directory, an include or a program git runs)",
            ));
        }
        for before in crate::gitconfig::before_parent_dirs(&n.path) {
            found.push((
                physical(&before),
                "comes before a `..` in a path git's configuration names: replaced by a link, it would send git elsewhere",
            ));
        }
    }
    let mut out: Vec<(String, Cow<'static, str>)> = Vec::new();
    for (rel, reason) in found {
        if let Some(rel) = rel {
            if !out.iter().any(|(p, _)| *p == rel) {
                out.push((rel, Cow::Borrowed(reason)));
            }
        }
    }
    out
}

/// `path` (as the kernel resolves it) relative to the worktree's top level `root`, if it
/// lies inside it, as a plain relative path with no `*` component.
fn in_worktree(root: &Path, path: &Path) -> Option<String> {
    let rel: PathBuf = path
        .strip_prefix(root)
        .ok()?
        .components()
        .filter(|c| *c != Component::CurDir)
        .collect();
    let rel = rel.to_str()?.to_string();
    if rel.is_empty() || rel.split('/').any(|c| c == ANY) {
        return None;
    }
    check_relative(&rel).ok()?;
    Some(rel)
}

/// Whether `path` is `dir` or lies under it, as bytes (paths built by joining plain
/// components; [`Path::starts_with`] compares component by component, and a launch asks
/// this for every protected path).
fn under(path: &Path, dir: &Path) -> bool {
    let (p, d) = (path.as_os_str().as_bytes(), dir.as_os_str().as_bytes());
    let d = d.strip_suffix(b"/").unwrap_or(d);
    p.starts_with(d) && (p.len() == d.len() || p.get(d.len()) == Some(&b'/'))
}

/// `*` as a whole component stands for every entry that exists in that directory when the
/// launch starts (`.git/worktrees/*/commondir`).
const ANY: &str = "*";

/// The protected paths of one configuration, relative, with their reasons: the defaults,
/// plus the added, less the removed ones.
pub fn list(changes: &[Change]) -> Vec<(String, Cow<'static, str>)> {
    let mut out: Vec<(String, Cow<'static, str>)> = DEFAULTS
        .iter()
        .map(|d| (d.path.to_string(), Cow::Borrowed(d.reason)))
        .collect();
    for c in changes {
        match c {
            Change::Add(p) => {
                if !out.iter().any(|(q, _)| q == p) {
                    out.push((
                        p.clone(),
                        Cow::Borrowed("named by `protect` in the configuration"),
                    ));
                }
            }
            Change::Remove(p) => out.retain(|(q, _)| q != p),
        }
    }
    out
}

/// How a path that exists is held in the launch's namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Bound read-only onto itself: unchangeable, and it cannot be removed or replaced.
    ReadOnly,
    /// Bound onto itself, still writable inside: it cannot be renamed away or removed (a
    /// directory on the way to a protected path, or a main checkout's git dir).
    InPlace,
    /// Read-only in this launch's namespace, as [`Hold::ReadOnly`], but not the user's to
    /// judge: the user's own sessions write it outside the wall all the time (Claude Code's
    /// `~/.claude/projects`), so it is neither recorded nor set aside. Without a namespace
    /// it is exposed, and the launch says so.
    Shared,
    /// A directory bound onto itself writable, inside a read-only hold: the part of a
    /// [`Hold::Shared`] directory that is this launch's own (its project's transcripts and
    /// memory).
    Hole,
    /// A directory covered by an empty file system of this launch's own (tmpfs): what the
    /// agent writes there no other launch sees, and it is gone with the launch's last
    /// process; what the user's sessions keep there the agent neither sees nor changes
    /// (scripts each of their shell commands sources).
    Fresh,
    /// A file covered by a copy of the launch's own, made in its namespace (unlinked, so
    /// no other process can name it): what the agent writes there no other launch, and no
    /// agent run without the shim, reads before the watcher has judged it and brought it
    /// into the shared file at the end (Claude Code's `.claude.json`, [`Guard`]). Without
    /// a namespace the agent writes the shared file, and the launch says so.
    Private,
    /// A directory covered by an overlay: what the user has there is its lower layer,
    /// read-only, and what the agent writes goes to an upper layer of the launch's
    /// project's own ([`Held::store`]), kept for that project's later launches, out of the
    /// agent's reach otherwise (`~/.cache`: code that the user's own tools run, outside the
    /// wall, from there). Without a namespace the agent writes the shared directory, and
    /// the launch says so.
    Layer,
    /// A directory covered by one of the launch's project's own ([`Held::store`]), bound
    /// onto it: what the user keeps there the agent neither sees nor changes, and what it
    /// writes only that project's later launches see. Without a namespace the agent writes
    /// the shared directory, and the launch says so.
    Own,
}

impl Hold {
    /// Whether the agent cannot change what is there (its own file system aside).
    pub fn read_only(self) -> bool {
        matches!(self, Hold::ReadOnly | Hold::Shared)
    }

    /// Whether it is a part of a read-only hold given back to the agent.
    pub fn opens(self) -> bool {
        matches!(self, Hold::Hole | Hold::Fresh | Hold::Own)
    }
}

/// A path held in the launch's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The real, absolute path.
    pub path: PathBuf,
    /// How.
    pub hold: Hold,
    /// Whether it is a directory (else a regular file).
    pub is_dir: bool,
    /// Why (for `landwall policy` and `check`).
    pub reason: Cow<'static, str>,
    /// For a [`Hold::Layer`]: the project's own directory that holds its upper layer (made
    /// by the launch, where the agent cannot write).
    pub store: Option<PathBuf>,
}

/// A protected path that does not exist when the launch starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Absent {
    /// The absolute path.
    pub path: PathBuf,
    /// The directory it lies under that the agent may write (the worktree, or the git dir
    /// outside it): the sweep walks down from there and goes no higher.
    pub base: PathBuf,
    /// Why it is protected.
    pub reason: Cow<'static, str>,
}

impl Absent {
    /// For an entry that stands for every name of a pattern in one directory (`*` inside
    /// its last component: Codex's `~/.codex/*.config.toml`): that directory and the
    /// pattern. Such an entry is never a path of its own: the watcher looks for the names
    /// it stands for ([`name_matches`]).
    pub fn pattern(&self) -> Option<(&Path, &OsStr)> {
        let name = self.path.file_name()?;
        let dir = self.path.parent()?;
        name.as_bytes().contains(&b'*').then_some((dir, name))
    }

    /// Whether `path` is this entry, lies in it, or is a name its pattern stands for (or
    /// lies in one).
    pub fn covers(&self, path: &Path) -> bool {
        if let Some((dir, pattern)) = self.pattern() {
            let Ok(rest) = path.strip_prefix(dir) else {
                return false;
            };
            return rest
                .components()
                .next()
                .is_some_and(|c| name_matches(pattern.as_bytes(), c.as_os_str().as_bytes()));
        }
        path == self.path || path.starts_with(&self.path)
    }
}

/// Whether `name` is one that `pattern` stands for: `*` in it (one at most) stands for any
/// run of bytes, the empty one too; a pattern without `*` stands for itself.
pub fn name_matches(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.iter().position(|&b| b == b'*') {
        None => pattern == name,
        Some(i) => {
            let (before, after) = (&pattern[..i], &pattern[i + 1..]);
            name.len() >= before.len() + after.len()
                && name.starts_with(before)
                && name.ends_with(after)
        }
    }
}

/// The protection of one launch: what is held in its namespace, in mount order (every
/// directory before what lies in it), and what is swept if it appears.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Protection {
    /// Held paths, parents first.
    pub held: Vec<Held>,
    /// Absent paths, swept when the agent exits.
    pub absent: Vec<Absent>,
    /// The submodules to look at when the agent exits ([`crate::gitlinks`]).
    pub submodules: Option<Submodules>,
    /// Those of the linked worktrees inside a main checkout ([`with_nested_worktrees`]).
    pub nested: Vec<Submodules>,
    /// The worktree's top level (the record's key).
    pub root: PathBuf,
    /// Where the record of what is the user's own is kept ([`crate::record::place`]);
    /// `None`: nowhere the agent cannot write, and the start is taken as the user's.
    pub record: Option<PathBuf>,
    /// A main checkout's: where its linked worktrees are registered, so that one the agent
    /// adds inside the wall is judged ([`added`]).
    pub registry: Option<Registry>,
    /// State files of mixed content the watcher judges again when the launch ends.
    pub guards: Vec<Guard>,
}

/// A state file the agent must be able to write, with parts only the user may change:
/// judged before the wall goes up, and again by the watcher when the launch ends, so that
/// what the agent wrote there does not reach the agent run without the shim, nor the next
/// launch. `dir` is real; `name` is looked at there, never following a link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Guard {
    /// Claude Code's copy (`.claude.json`, `.config.json` in `dir`): its MCP servers made
    /// those of the user's `user` ([`crate::agentstate::guard`]).
    ClaudeJson {
        dir: PathBuf,
        name: &'static str,
        user: PathBuf,
        /// The copy as judged at the start ([`file_ident`]); unchanged at the end, it is not
        /// judged again.
        judged: Option<[i64; 4]>,
    },
    /// OpenCode's `auth.json`: each entry names where OpenCode sends its requests, walled or
    /// not (a `wellknown` address it fetches its configuration from, MCP commands and
    /// plugins; a `github-copilot` sign-in's `enterpriseUrl`; the account an API key is of).
    /// Each is kept as it was at the start (`start`), but for the tokens OpenCode refreshes
    /// ([`crate::agentstate::Judge::Auth`]).
    OpenCodeAuth {
        dir: PathBuf,
        name: &'static str,
        start: serde_json::Map<String, serde_json::Value>,
        /// As [`Guard::ClaudeJson`]'s.
        judged: Option<[i64; 4]>,
    },
}

/// What a file is, in numbers the agent cannot set back (device, inode and change time):
/// the same at the end as at the start, nothing was written to it. `None` if absent, or if
/// its change time is not older than the clock the kernel stamps it with (a write in the
/// same tick, by the agent just started, would leave it as it is).
pub fn file_ident(path: &Path) -> Option<[i64; 4]> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::symlink_metadata(path).ok()?;
    let now = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE).ok()?;
    let older = (m.ctime(), m.ctime_nsec()) < (now.tv_sec(), now.tv_nsec());
    older.then(|| [m.dev() as i64, m.ino() as i64, m.ctime(), m.ctime_nsec()])
}

/// Where a main checkout registers its linked worktrees (`<git dir>/worktrees/<id>`), and
/// what one of them protects. The agent may write that directory, so a worktree registered
/// there that the user did not have is the agent's whole: its `.git` file, its git dir, its
/// protected paths, its index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registry {
    /// `<git dir>/worktrees`.
    pub admin: PathBuf,
    /// The main checkout's git dir: the common dir a linked worktree of it names.
    pub common: PathBuf,
    /// The protected paths, relative, as a launch in one of its linked worktrees has them
    /// (the defaults, the configuration's changes, what git's configuration names).
    pub list: Vec<(String, Cow<'static, str>)>,
    /// Where the agent may write (the policy's writable grants): a worktree added outside
    /// them was made by the user, the agent could make no directory there.
    pub writable: Vec<PathBuf>,
}

/// What becomes of a linked worktree registered in a [`Registry`] that the user did not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Added {
    /// Its entry is set aside whole (git in the worktree then finds no repository), and so is
    /// `dotgit`, the worktree's `.git` in the main checkout where it is none of the user's.
    Refused {
        /// Why it cannot be kept.
        why: String,
        /// Its top level, as its entry names it.
        top: PathBuf,
        /// Its `.git`, to set aside too.
        dotgit: Option<PathBuf>,
        /// It lies outside the main checkout: nothing there is watched.
        outside: bool,
    },
    /// It lies outside the main checkout and every place the agent may write, so the user
    /// made it (the agent could not), and its `commondir` names this repository: only what
    /// the agent may have written in its entry that git would run is set aside, its
    /// `config.worktree` and its submodules' git dirs (`modules/`).
    Users {
        /// Its top level.
        top: PathBuf,
        /// What to set aside in its entry.
        aside: Vec<Absent>,
    },
    /// It lies in the main checkout and checks out both ways: every protected path in it
    /// that exists is set aside (but its `.git`, `commondir` and `gitdir`, which make it a
    /// worktree, and were checked), and every submodule git would enter in it.
    Checked {
        /// Its top level.
        top: PathBuf,
        /// The protected paths to set aside.
        aside: Vec<Absent>,
        /// Its submodules.
        subs: Submodules,
    },
}

/// Where the watcher finds the worktree's submodules: the index that lists them, and the
/// git dirs (outside the worktree) it reads to find theirs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submodules {
    /// The worktree's top level.
    pub root: PathBuf,
    /// Its index file.
    pub index: PathBuf,
    /// The git dirs outside the worktree (a linked worktree's own and its common dir).
    pub git_dirs: Vec<PathBuf>,
}

impl Protection {
    /// Nothing to hold and nothing to sweep.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
            && self.absent.is_empty()
            && self.submodules.is_none()
            && self.nested.is_empty()
            && self.registry.is_none()
    }

    /// The held entry that is `path` or holds it read-only (for `landwall check`): `None`
    /// within a part of it given back ([`Hold::opens`]).
    pub fn covering(&self, path: &Path) -> Option<&Held> {
        let holds = |h: &&Held| path == h.path || (h.is_dir && path.starts_with(&h.path));
        let ro = self
            .held
            .iter()
            .filter(|h| h.hold.read_only())
            .find(holds)?;
        let opened = self
            .held
            .iter()
            .filter(|h| h.hold.opens() && h.path.starts_with(&ro.path))
            .any(|h| holds(&h));
        (!opened).then_some(ro)
    }

    /// The absent entry that is `path` or holds it.
    pub fn absent_covering(&self, path: &Path) -> Option<&Absent> {
        self.absent.iter().find(|a| a.covers(path))
    }
}

/// How many paths (and directories on the way) one `*` entry may hold.
const MAX_PER_PATTERN: usize = 512;

/// Why a protected path cannot be protected.
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    /// A `*` entry stands for more paths than a launch holds.
    #[error("the protected path {rel} stands for more than {MAX_PER_PATTERN} paths under {}: so many mounts at every launch are refused; remove what does not belong there (a `.git` file in each of many directories is no submodule), or add \"!{rel}\" to `protect` in the system configuration file", base.display())]
    TooMany {
        /// The entry, as listed.
        rel: String,
        /// Where it was looked for.
        base: PathBuf,
    },
    /// It (or a directory on the way to it) is a symbolic link or a special file.
    #[error("{} is a protected path ({reason}) but {what}, which cannot be made read-only: replace it with a plain file or directory, or remove it; to leave it unprotected, add \"!{rel}\" to `protect` in the system configuration file", path.display())]
    Unprotectable {
        /// The path found.
        path: PathBuf,
        /// The protected path, as listed.
        rel: String,
        /// Why it is protected.
        reason: Cow<'static, str>,
        /// What it is (`a symbolic link`, `a FIFO`, `on the way to it is a symbolic link`).
        what: String,
    },
    /// A linked worktree inside the main checkout whose `.git` does not name its git dir.
    #[error("the linked worktree {} (registered in {}) cannot be protected: {why}; the agent could make your git there run what it names. Repair it from the main checkout (`git worktree repair {}`) or remove it (`git worktree remove --force`)", top.display(), own.display(), top.display())]
    NestedWorktree {
        /// Its top level.
        top: PathBuf,
        /// The git dir registered for it.
        own: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// It could not be examined.
    #[error("examining the protected path {}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Resolves the protected paths for `worktree` of the configuration's `protect` changes
/// (the defaults and what git's configuration names, with the additions, less the
/// removals: `"!path"` trims a path git's configuration names too): what exists is held,
/// what does not is to be swept. A `.git/…` path is looked up in the worktree's own git dir; a plain
/// path under the worktree's top level. A path that is, or lies under, a symbolic link or
/// is a special file is refused: a link cannot be made read-only, and the program that
/// reads the path would follow it.
pub fn resolve(worktree: &Worktree, changes: &[Change]) -> Result<Protection, ProtectError> {
    let removed: Vec<&str> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Remove(p) => Some(p.as_str()),
            Change::Add(_) => None,
        })
        .collect();
    resolve_trimmed(worktree, &list(changes), &removed)
}

fn resolve_trimmed(
    worktree: &Worktree,
    list: &[(String, Cow<'static, str>)],
    removed: &[&str],
) -> Result<Protection, ProtectError> {
    // What git's configuration names inside the worktree (`core.hooksPath =
    // scripts/hooks`, `include.path = ../.gitconfig`): git runs or reads what is there.
    let mut named = named_by_git_config(worktree);
    named.retain(|(n, _)| !removed.contains(&n.as_str()));
    let extended;
    let list = if named.iter().all(|(n, _)| list.iter().any(|(p, _)| p == n)) {
        list
    } else {
        let mut l = list.to_vec();
        for n in named {
            if !l.iter().any(|(p, _)| *p == n.0) {
                l.push(n);
            }
        }
        extended = l;
        extended.as_slice()
    };
    let mut p = resolve_listed(worktree, list)?;
    if let GitLayout::Main { git_dir } = &worktree.git {
        // Its linked worktrees share its configuration, so what it names is theirs too.
        p.registry = Some(Registry {
            admin: git_dir.join("worktrees"),
            common: git_dir.clone(),
            list: list.to_vec(),
            writable: Vec::new(),
        });
    }
    Ok(p)
}

/// [`resolve`] of the protected paths `list` as they are.
fn resolve_listed(
    worktree: &Worktree,
    list: &[(String, Cow<'static, str>)],
) -> Result<Protection, ProtectError> {
    let root = worktree.root.as_path();
    let git_dir: Option<&Path> = match &worktree.git {
        GitLayout::Main { git_dir } | GitLayout::Linked { git_dir, .. } => Some(git_dir),
        GitLayout::None => None,
    };
    let mut p = Protection {
        submodules: match &worktree.git {
            GitLayout::None => None,
            GitLayout::Main { git_dir } => Some(Submodules {
                root: root.to_path_buf(),
                index: git_dir.join("index"),
                git_dirs: Vec::new(),
            }),
            GitLayout::Linked {
                git_dir,
                common_dir,
            } => Some(Submodules {
                root: root.to_path_buf(),
                index: git_dir.join("index"),
                git_dirs: std::iter::once(git_dir.clone())
                    .chain(common_dir.clone())
                    .collect(),
            }),
        },
        root: root.to_path_buf(),
        ..Protection::default()
    };
    let git_dir_in_root = git_dir.is_some_and(|g| under(g, root));
    for (rel, reason) in list {
        // A linked worktree's git dir holds no config, hooks or info that git reads: those
        // are its common dir's, which the wall grants read-only.
        if let GitLayout::Linked {
            common_dir: Some(_),
            ..
        } = &worktree.git
        {
            let of_common = |name: &str| {
                rel.strip_prefix(".git/").is_some_and(|r| {
                    r.strip_prefix(name)
                        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
                })
            };
            if of_common("config") || of_common("hooks") || of_common("info") {
                continue;
            }
        }
        let (base, sub): (&Path, &str) = match (rel.strip_prefix(".git/"), git_dir) {
            (Some(sub), Some(g)) => {
                if git_dir_in_root {
                    // The git dir inside the worktree (a main checkout): the whole path is
                    // walked from the top level, so that `.git` itself is held too.
                    (root, rel.as_str())
                } else {
                    (g, sub)
                }
            }
            // No repository: a `.git` the agent creates is swept whole, with what is in it.
            (Some(_), None) => continue,
            (None, _) => (root, rel.as_str()),
        };
        // (An error names the entry as listed, `*` and all: that is what `!` trims.)
        let held_before = p.held.len();
        for sub in expand(base, sub) {
            walk(&mut p, base, &sub, rel, reason.clone())?;
            // The agent could make thousands (a `.git` file in each of as many
            // directories), each a mount at every later launch; past a bound the launch is
            // refused, rather than any of them left unheld.
            if p.held.len() - held_before > MAX_PER_PATTERN {
                return Err(ProtectError::TooMany {
                    rel: rel.clone(),
                    base: base.to_path_buf(),
                });
            }
        }
    }
    normalize(&mut p);
    Ok(p)
}

/// Held paths parents first, each once with its stronger hold, nothing under a path held
/// read-only; absent paths sorted, each once.
fn normalize(p: &mut Protection) {
    // Parents first. (Compared as bytes: the paths are built by joining plain components,
    // so equal paths are equal bytes; a launch sorts these every time.)
    let depth = |p: &Path| {
        p.as_os_str()
            .as_bytes()
            .iter()
            .filter(|&&b| b == b'/')
            .count()
    };
    p.held.sort_by(|a, b| {
        depth(&a.path)
            .cmp(&depth(&b.path))
            .then_with(|| a.path.as_os_str().cmp(b.path.as_os_str()))
    });
    p.held.dedup_by(|b, a| {
        // Keep the stronger hold of two entries for one path (read-only over the rest).
        if a.path.as_os_str() == b.path.as_os_str() {
            // A layer covers what a bind in place would keep: the directory cannot be
            // renamed away either way.
            if b.hold == Hold::ReadOnly
                || (b.hold.read_only() && !a.hold.read_only())
                || (a.hold == Hold::InPlace && matches!(b.hold, Hold::Layer | Hold::Own))
            {
                a.hold = b.hold;
                a.reason = b.reason.clone();
                a.store = b.store.clone();
            }
            true
        } else {
            false
        }
    });
    // A path held read-only covers what lies under it: nothing under it needs its own mount
    // but the parts given back to the agent ([`Hold::opens`]), which are mounted after it.
    let ro: Vec<PathBuf> = p
        .held
        .iter()
        .filter(|h| h.hold.read_only() && h.is_dir)
        .map(|h| h.path.clone())
        .collect();
    p.held
        .retain(|h| h.hold.opens() || !ro.iter().any(|r| h.path != *r && under(&h.path, r)));
    p.absent.retain(|a| !ro.iter().any(|r| under(&a.path, r)));
    // What lies under a directory covered by the project's own is out of sight in the
    // launch's namespace (the paths under it name the project's own then): nothing there
    // is held or swept.
    let own: Vec<PathBuf> = p
        .held
        .iter()
        .filter(|h| h.hold == Hold::Own)
        .map(|h| h.path.clone())
        .collect();
    p.held
        .retain(|h| !own.iter().any(|o| h.path != *o && under(&h.path, o)));
    p.absent.retain(|a| !own.iter().any(|o| under(&a.path, o)));
    p.absent
        .sort_by(|a, b| a.path.as_os_str().cmp(b.path.as_os_str()));
    p.absent
        .dedup_by(|b, a| a.path.as_os_str() == b.path.as_os_str());
}

/// A main checkout's launch may write its linked worktrees that lie inside it (Claude
/// Code's `.claude/worktrees/<name>`), or under a directory `writable` says the agent may
/// write (`/tmp/hotfix`): their `.git` files, their protected paths, the repositories in
/// them. So each one registered in `<git_dir>/worktrees/` whose top level lies there is
/// protected as its own launch would protect it (its
/// `.git` and protected paths held read-only, the absent ones set aside as they appear),
/// and its submodules are judged too ([`Protection::nested`]). Every other linked worktree
/// has its git dir in the main checkout's `.git`, so its index and its submodules' git dirs
/// are the agent's to write: the submodules git would enter there are judged too. (Their
/// `commondir`, `config.worktree` and `gitdir` are default protected paths.) One inside the
/// main checkout whose `.git` does not name its git dir back is refused: your git there
/// would use whatever it names.
pub fn with_nested_worktrees(
    mut main: Protection,
    worktree: &Worktree,
    changes: &[Change],
    writable: &dyn Fn(&Path) -> bool,
) -> Result<Protection, ProtectError> {
    // From a linked worktree: the repository (its common dir) and its other worktrees, where
    // the agent may write them (found by review: a main checkout kept in `/tmp`, whose
    // `config` and hooks the `/tmp` grant opened to the agent of a linked worktree elsewhere).
    let (git_dir, own_entry) = match &worktree.git {
        GitLayout::Main { git_dir } => (git_dir, None),
        GitLayout::Linked {
            git_dir: own,
            common_dir: Some(common),
        } => (common, Some(own)),
        _ => return Ok(main),
    };
    let common_writable = own_entry.is_some() && writable(git_dir);
    if common_writable {
        main = with_common_dir(main, git_dir, changes)?;
    }
    let admin = git_dir.join("worktrees");
    let Ok(entries) = std::fs::read_dir(&admin) else {
        if common_writable {
            normalize(&mut main);
        }
        return Ok(main);
    };
    let mut found = 0usize;
    for e in entries {
        let e = e.map_err(|source| ProtectError::Io {
            path: admin.clone(),
            source,
        })?;
        let own = e.path();
        if !e.file_type().is_ok_and(|t| t.is_dir()) || own_entry == Some(&own) {
            continue;
        }
        // Where git says the worktree is (`<top>/.git`): written by `git worktree add`, in
        // the main checkout's `.git`, which the agent may have rewritten; what it names is
        // only a candidate, checked below by the worktree's own `.git`.
        let Ok(text) = crate::read_regular(&own.join("gitdir"), 64 << 10) else {
            continue;
        };
        let text = String::from_utf8_lossy(&text);
        let named = Path::new(text.trim_end_matches(['\n', '\r']));
        // Relative since git 2.48 (`worktree.useRelativePaths`): from the git dir.
        let dotgit = lexical(&own.join(named));
        let Some(top) = dotgit.parent() else {
            continue;
        };
        if top == worktree.root {
            continue;
        }
        found += 1;
        if found > MAX_PER_PATTERN {
            return Err(ProtectError::TooMany {
                rel: ".git/worktrees/*".into(),
                base: admin.clone(),
            });
        }
        let refused = |why: String| ProtectError::NestedWorktree {
            top: top.to_path_buf(),
            own: own.clone(),
            why,
        };
        // The agent writes all of one inside the main checkout, or under a writable grant
        // (`/tmp/hotfix`): it is protected whole. Of any other, only its git dir here, which
        // a linked worktree's agent may write only where the common dir is writable.
        let whole = (own_entry.is_none() && under(top, &worktree.root)) || writable(top);
        if !whole && own_entry.is_some() && !common_writable {
            continue;
        }
        let w = match crate::worktree::discover(top, Some(top)) {
            Ok(w) => w,
            // Removed by hand and not yet pruned: nothing there to protect.
            Err(_) if std::fs::symlink_metadata(top).is_err() => continue,
            // Elsewhere, a worktree that is not this one's: git there does not read it.
            Err(_) if !whole => continue,
            Err(e) => return Err(refused(e.to_string())),
        };
        if !whole
            && !matches!(&w.git, GitLayout::Linked { git_dir, .. } if *git_dir == own || same_file(git_dir, &own))
        {
            continue;
        }
        match &w.git {
            GitLayout::Linked { git_dir, .. } if *git_dir == own || same_file(git_dir, &own) => {}
            GitLayout::Linked { git_dir, .. } => {
                return Err(refused(format!("its `.git` names {}", git_dir.display())))
            }
            _ => {
                return Err(refused(
                    "its `.git` is not a linked worktree's `.git` file".into(),
                ))
            }
        }
        if whole {
            let mut p = resolve(&w, changes)?;
            main.held.append(&mut p.held);
            main.absent.append(&mut p.absent);
            main.nested.extend(p.submodules);
        } else {
            // Outside the main checkout the agent writes only its git dir here (the index,
            // the submodules' git dirs under `modules/`, whatever their names' depth): the
            // submodules git would enter there are judged.
            main.nested.push(Submodules {
                root: top.to_path_buf(),
                index: own.join("index"),
                git_dirs: vec![own.clone(), git_dir.clone()],
            });
        }
    }
    if found > 0 || common_writable {
        normalize(&mut main);
    }
    Ok(main)
}

/// A linked worktree's protection, where its agent may write the repository's common dir
/// `common` (kept under a writable grant): what a launch in the main checkout holds in it
/// is held too, its work tree's protected paths with it where `common` is a checkout's
/// `.git`, and its submodules are judged.
fn with_common_dir(
    mut p: Protection,
    common: &Path,
    changes: &[Change],
) -> Result<Protection, ProtectError> {
    let checkout = common
        .parent()
        .filter(|_| common.file_name().is_some_and(|n| n == ".git"));
    if let Some(top) = checkout {
        if let Ok(w) = crate::worktree::discover(top, Some(top)) {
            if matches!(&w.git, GitLayout::Main { git_dir } if same_file(git_dir, common)) {
                let mut m = resolve(&w, changes)?;
                p.held.append(&mut m.held);
                p.absent.append(&mut m.absent);
                p.nested.extend(m.submodules);
                return Ok(p);
            }
        }
    }
    // A bare repository, or a git dir kept apart from its checkout: what is in it.
    let bare = Worktree {
        root: PathBuf::from("/nonexistent/landwall-bare"),
        git: GitLayout::Linked {
            git_dir: common.to_path_buf(),
            common_dir: None,
        },
    };
    let only_git: Vec<(String, Cow<'static, str>)> = list(changes)
        .into_iter()
        .filter(|(rel, _)| rel.starts_with(".git/"))
        .collect();
    let mut m = resolve_listed(&bare, &only_git)?;
    p.held.append(&mut m.held);
    p.absent.append(&mut m.absent);
    Ok(p)
}

/// How an agent's state in `$HOME` is named in `protect` (`"!~/.claude/settings.json"`).
pub const HOME_PREFIX: &str = "~/";

/// The agents' command-bearing state in `home` ([`crate::profile::agent_code`]) that lies
/// in a directory `writable` says the agent may write: each one that exists is held
/// read-only (with the directories on the way in place), each absent one is swept as soon
/// as it appears; `"!~/<path>"` in `protect` leaves one out. Returns the state directories
/// they lie in, for [`hold_above`]. `home` is real (symbolic links resolved). Then the
/// agents' shared directories ([`shared`]), with `projects` the directories whose entries
/// are this launch's own and `stores` where the projects' layers are kept.
pub fn agent_state(
    p: &mut Protection,
    home: &Path,
    projects: &[PathBuf],
    changes: &[Change],
    stores: Option<&Path>,
    writable: &dyn Fn(&Path) -> bool,
) -> Result<Vec<PathBuf>, ProtectError> {
    // The entries share their directories (`~/.config/opencode`, `~/.claude`), and each
    // judgement resolves the path: each directory is judged once.
    let seen = std::cell::RefCell::new(std::collections::HashMap::<PathBuf, bool>::new());
    let writable = |p: &Path| -> bool {
        if let Some(&w) = seen.borrow().get(p) {
            return w;
        }
        let w = writable(p);
        seen.borrow_mut().insert(p.to_path_buf(), w);
        w
    };
    let writable: &dyn Fn(&Path) -> bool = &writable;
    let mut bases: Vec<PathBuf> = Vec::new();
    for (_, code) in crate::profile::agent_code() {
        let named = format!("{HOME_PREFIX}{}", code.path);
        if changes
            .iter()
            .any(|c| matches!(c, Change::Remove(r) if *r == named))
        {
            continue;
        }
        // `<dir>/*`: every entry there now, as one of its own (what is absent there and
        // read is listed by name).
        if let Some(dir) = code.path.strip_suffix("/*") {
            let but = crate::profile::EVERY_ENTRY_BUT
                .iter()
                .find(|(p, _)| *p == code.path)
                .map_or(&[][..], |(_, but)| *but);
            every_entry(p, home, dir, but, code.reason, writable, &mut bases)?;
            continue;
        }
        let path = home.join(code.path);
        // Walked down from the highest directory above it that the agent may write (its
        // state directory; `~/.cache` for what lies in one that does not exist yet), so that
        // whatever the agent makes on the way is swept too. That directory may be a link
        // (dotfiles kept elsewhere): held where it leads.
        let Some(top) = writable_top(&path, writable) else {
            continue;
        };
        let Ok(sub) = path.strip_prefix(&top) else {
            continue;
        };
        let sub = sub.to_string_lossy().into_owned();
        let base = std::fs::canonicalize(&top).unwrap_or(top);
        // `*` inside the last name (`~/.codex/*.config.toml`): each such entry there now
        // is held as one of its own; one that appears is set aside by the watcher.
        let (dir, last) = sub.rsplit_once('/').unwrap_or(("", sub.as_str()));
        if last.contains(ANY) && last != ANY {
            for name in named_in(&base, dir, last, &named)? {
                let one = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                let rel = base.join(&one);
                let rel = rel.strip_prefix(home).unwrap_or(&rel);
                let named = format!("{HOME_PREFIX}{}", rel.display());
                walk(p, &base, &one, &named, Cow::Borrowed(code.reason))?;
                programs_named(p, &base.join(&one), home, changes, writable, &mut bases)?;
            }
            p.absent.push(Absent {
                path: base.join(&sub),
                base: base.clone(),
                reason: Cow::Borrowed(code.reason),
            });
            if !bases.contains(&base) {
                bases.push(base);
            }
            continue;
        }
        if sub.contains(ANY) {
            // `*` in the middle: each entry that is there now (OpenCode's snapshot git
            // dirs); nothing if none is.
            for one in expand(&base, &sub) {
                if one.contains(ANY) {
                    continue;
                }
                let rel = base.join(&one);
                let rel = rel.strip_prefix(home).unwrap_or(&rel);
                let named = format!("{HOME_PREFIX}{}", rel.display());
                walk(p, &base, &one, &named, Cow::Borrowed(code.reason))?;
            }
            if !bases.contains(&base) {
                bases.push(base);
            }
            continue;
        }
        walk(p, &base, &sub, &named, Cow::Borrowed(code.reason))?;
        if !bases.contains(&base) {
            bases.push(base.clone());
        }
        programs_named(p, &base.join(&sub), home, changes, writable, &mut bases)?;
    }
    shared(p, home, projects, changes, stores, writable, &mut bases);
    normalize(p);
    Ok(bases)
}

/// Holds what the commands of the state file `file` run from where the agent may write
/// (`~/.claude/statusline.sh`), unless `changes` leave one out.
fn programs_named(
    p: &mut Protection,
    file: &Path,
    home: &Path,
    changes: &[Change],
    writable: &dyn Fn(&Path) -> bool,
    bases: &mut Vec<PathBuf>,
) -> Result<(), ProtectError> {
    for program in crate::agentstate::named_paths(file, home) {
        let Ok(rel) = program.strip_prefix(home) else {
            continue;
        };
        let named = format!("{HOME_PREFIX}{}", rel.display());
        let removed = changes
            .iter()
            .any(|c| matches!(c, Change::Remove(r) if *r == named));
        let Some(top) = writable_top(&program, writable).filter(|_| !removed) else {
            continue;
        };
        let Ok(sub) = program.strip_prefix(&top) else {
            continue;
        };
        let sub = sub.to_string_lossy().into_owned();
        walk(
            p,
            &top,
            &sub,
            &named,
            Cow::Borrowed(
                "a program a command in an agent's configuration names: the agent, and the agent run without the shim, runs it",
            ),
        )?;
        if !bases.contains(&top) {
            bases.push(top);
        }
    }
    Ok(())
}

/// The names in `base`/`dir` that `pattern` stands for ([`name_matches`]), sorted: none
/// where the directory does not exist. More than [`MAX_PER_PATTERN`] is refused: each is a
/// mount at every launch.
fn named_in(base: &Path, dir: &str, pattern: &str, rel: &str) -> Result<Vec<String>, ProtectError> {
    let at = if dir.is_empty() {
        base.to_path_buf()
    } else {
        base.join(dir)
    };
    let entries = match std::fs::read_dir(&at) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(ProtectError::Io {
                path: at,
                source: e,
            })
        }
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ProtectError::Io {
            path: at.clone(),
            source: e,
        })?;
        let name = entry.file_name();
        if !name_matches(pattern.as_bytes(), name.as_bytes()) {
            continue;
        }
        // Not UTF-8: held by no name a person could give in `protect`, so refused whole.
        let Some(name) = name.to_str() else {
            return Err(ProtectError::Unprotectable {
                path: at.join(&name),
                rel: rel.to_string(),
                reason: Cow::Borrowed("a name its pattern stands for"),
                what: "a name that is not UTF-8".into(),
            });
        };
        names.push(name.to_string());
        if names.len() > MAX_PER_PATTERN {
            return Err(ProtectError::TooMany {
                rel: rel.to_string(),
                base: at,
            });
        }
    }
    names.sort();
    Ok(names)
}

/// Each entry of `home`/`dir` but those named in `but`, where the agent may write in
/// `dir` (a state directory itself, whose parent it may not write): held as a protected
/// path of its own, walked from `dir` where its link leads.
fn every_entry(
    p: &mut Protection,
    home: &Path,
    dir: &str,
    but: &[&str],
    reason: &'static str,
    writable: &dyn Fn(&Path) -> bool,
    bases: &mut Vec<PathBuf>,
) -> Result<(), ProtectError> {
    let path = home.join(dir);
    if !writable(&path) {
        return Ok(());
    }
    let Ok(base) = std::fs::canonicalize(&path) else {
        return Ok(());
    };
    let entries = match std::fs::read_dir(&base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(ProtectError::Io {
                path: base,
                source: e,
            })
        }
    };
    for entry in entries {
        let entry = entry.map_err(|e| ProtectError::Io {
            path: base.clone(),
            source: e,
        })?;
        let name = entry.file_name();
        if but.iter().any(|b| name.as_bytes() == b.as_bytes()) {
            continue;
        }
        let sub = name.to_string_lossy().into_owned();
        let named = format!("{HOME_PREFIX}{dir}/{sub}");
        walk(p, &base, &sub, &named, Cow::Borrowed(reason))?;
    }
    if !bases.contains(&base) {
        bases.push(base);
    }
    Ok(())
}

/// Where the upper layers of `project`'s [`Hold::Layer`] of `rel` (relative to `$HOME`,
/// `real` where it lies) are kept, under `stores`: a directory per project, named so that a
/// person can tell it (the project's directory name) and so that no directory the agent can
/// make or name shares another project's (the SHA-256 of its real path, and of each layered
/// directory's: root's launches keep theirs under root's home whatever `$HOME` is); in it,
/// one per layered directory (`cache`, `claude-todos`).
pub fn layer_store(stores: &Path, project: &Path, rel: &str, real: &Path) -> PathBuf {
    use sha2::Digest;
    let name: String = project
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(32)
        .collect();
    let mut hash = sha2::Sha256::new();
    hash.update(project.as_os_str().as_bytes());
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let mut hash = sha2::Sha256::new();
    hash.update(real.as_os_str().as_bytes());
    let digest = hash.finalize();
    let of: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    let dir: String = rel
        .split('/')
        .map(|part| part.trim_start_matches('.'))
        .collect::<Vec<_>>()
        .join("-");
    stores
        .join(format!("{}-{hex}", name.trim_start_matches('.')))
        .join(format!("{dir}-{of}"))
}

/// The agents' [`crate::profile::Shared`] directories in `home` that `writable` says the
/// agent may write and that exist (as directories, where their links lead): each held
/// [`Hold::Shared`] with the entries of `projects` ([`crate::profile::claude_project_dir`])
/// that are directories given back as [`Hold::Hole`]s, or covered [`Hold::Fresh`], or
/// layered ([`Hold::Layer`]) over a store of the last of `projects` (the main checkout, or
/// the worktree) in `stores`, unless `changes` leave it out. An entry that is a link is
/// given back nowhere: it could lead to another project's.
fn shared(
    p: &mut Protection,
    home: &Path,
    projects: &[PathBuf],
    changes: &[Change],
    stores: Option<&Path>,
    writable: &dyn Fn(&Path) -> bool,
    bases: &mut Vec<PathBuf>,
) {
    use crate::profile::Kept;
    for (_, shared) in crate::profile::agent_shared() {
        let path = home.join(shared.path);
        // A layer is laid where the agent may write (a state directory itself); the others
        // lie in one.
        let top = match shared.kept {
            Kept::Layer => writable(&path).then(|| path.clone()),
            Kept::Project | Kept::Fresh | Kept::Own | Kept::Read => writable_top(&path, writable),
        };
        let Some(top) = top else {
            continue;
        };
        let Some(real) = real_dir_in(home, &path) else {
            continue;
        };
        let (hold, store) = match shared.kept {
            Kept::Project | Kept::Read => (Hold::Shared, None),
            Kept::Fresh => (Hold::Fresh, None),
            Kept::Layer | Kept::Own => {
                // Left out by the user, or nowhere the agent cannot write (`home =
                // "open"`, as the record): the shared directory, as it is.
                let named = format!("{HOME_PREFIX}{}", shared.path);
                let left_out = changes
                    .iter()
                    .any(|c| matches!(c, Change::Remove(r) if *r == named));
                match (stores, projects.last()) {
                    (Some(stores), Some(project)) if !left_out => (
                        if shared.kept == Kept::Own {
                            Hold::Own
                        } else {
                            Hold::Layer
                        },
                        Some(layer_store(stores, project, shared.path, &real)),
                    ),
                    _ => continue,
                }
            }
        };
        p.held.push(Held {
            path: real.clone(),
            hold,
            is_dir: true,
            reason: Cow::Borrowed(shared.reason),
            store,
        });
        if shared.kept == Kept::Project {
            for project in projects {
                let own = real.join(crate::profile::claude_project_dir(project));
                if std::fs::symlink_metadata(&own).is_ok_and(|m| m.is_dir())
                    && !p.held.iter().any(|h| h.path == own)
                {
                    p.held.push(Held {
                        path: own,
                        hold: Hold::Hole,
                        is_dir: true,
                        reason: Cow::Borrowed(
                            "this launch's project's own entry: its transcripts and memory",
                        ),
                        store: None,
                    });
                }
            }
        }
        let base = real_dir_in(home, &top).unwrap_or(top);
        if !bases.contains(&base) {
            bases.push(base);
        }
    }
}

/// `path`, a directory in `home` (real), as the kernel resolves it: itself where every
/// component below `home` is a plain directory (a look at each, where resolving the whole
/// path reads every link on the way from `/`: a launch judges a dozen of these), else
/// where its links lead. `None` if it is not a directory.
fn real_dir_in(home: &Path, path: &Path) -> Option<PathBuf> {
    if let Ok(below) = path.strip_prefix(home) {
        let mut at = home.to_path_buf();
        let mut plain = true;
        for part in below.components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    plain = false;
                    break;
                }
                _ => return None,
            }
        }
        if plain {
            return Some(at);
        }
    }
    std::fs::canonicalize(path).ok().filter(|r| r.is_dir())
}

/// The highest directory above `path` that `writable` says the agent may write, with every
/// one between: where a walk to hold `path` starts. `None` if the agent may not write where
/// `path` lies.
fn writable_top(path: &Path, writable: &dyn Fn(&Path) -> bool) -> Option<PathBuf> {
    let mut top = None;
    let mut at = path.parent()?;
    while writable(at) {
        top = Some(at.to_path_buf());
        match at.parent() {
            Some(up) if !up.as_os_str().is_empty() => at = up,
            _ => break,
        }
    }
    top.filter(|t| t.is_dir())
}

/// Holds in place each of `bases` (the worktree's top level, its git dirs outside it, the
/// other worktrees' top levels) and each directory above one whose parent `writable` says
/// the agent may write (found by review: a worktree kept in `/tmp`, or `.claude/worktrees/n`
/// in a main checkout, was renamed away whole, with every mount held in it, and rebuilt with
/// a `.git` of the agent's): a directory bound onto itself cannot be renamed or removed. Up
/// to the first whose parent it may not write.
pub fn hold_above(
    mut p: Protection,
    bases: &[PathBuf],
    writable: &dyn Fn(&Path) -> bool,
) -> Protection {
    let mut added = false;
    for base in bases {
        let mut at = base.as_path();
        while let Some(parent) = at.parent() {
            if parent.as_os_str().is_empty() || !writable(parent) {
                break;
            }
            if !p.held.iter().any(|h| h.path == at) {
                p.held.push(Held {
                    path: at.to_path_buf(),
                    hold: Hold::InPlace,
                    is_dir: true,
                    reason: "lies where the agent may write: renamed away, with what is held in it, it could be rebuilt with a git dir of the agent's".into(),
                    store: None,
                });
                added = true;
            }
            at = parent;
        }
    }
    if added {
        normalize(&mut p);
    }
    p
}

/// What becomes of the linked worktree registered at `entry` (`<admin>/<id>`) that the user
/// did not have, judged against nothing: the agent added it inside the wall (or a launch
/// whose watcher did not finish did). `root` is the main checkout's top level and `held`
/// what its launch holds (the user's own). One whose top level lies in the main checkout
/// and checks out both ways (its `.git` names this entry, whose `commondir` names this
/// repository and whose `gitdir` names that `.git` back) is kept, with nothing of the
/// agent's in its protected places. One outside the main checkout and every place the
/// agent may write is the user's ([`Added::Users`]). Any other is refused: outside the
/// main checkout the watcher may not write what git would read there.
pub fn added(reg: &Registry, entry: &Path, root: &Path, held: &[Held]) -> Added {
    let refuse = |why: String, top: &Path, dotgit: Option<PathBuf>| Added::Refused {
        why,
        top: top.to_path_buf(),
        dotgit,
        outside: false,
    };
    if !std::fs::symlink_metadata(entry).is_ok_and(|m| m.is_dir()) {
        return refuse("its entry is not a directory".into(), entry, None);
    }
    let text = match crate::read_regular(&entry.join("gitdir"), 64 << 10) {
        Ok(text) => text,
        Err(e) => return refuse(format!("its gitdir cannot be read ({e})"), entry, None),
    };
    let text = String::from_utf8_lossy(&text);
    let dotgit = lexical(&entry.join(Path::new(text.trim_end_matches(['\n', '\r']))));
    let Some(top) = dotgit.parent() else {
        return refuse("its gitdir names no worktree".into(), entry, None);
    };
    // Inside the main checkout as the kernel resolves it (a link on the way could lead out).
    let real = std::fs::canonicalize(top).ok();
    let inside = real.as_deref().filter(|t| under(t, root) && *t != root);
    let Some(top) = inside else {
        let theirs = real
            .as_deref()
            .is_none_or(|t| reg.writable.iter().any(|w| under(t, w)));
        if theirs {
            return Added::Refused {
                why: "it lies outside the main checkout, where the watcher does not reach".into(),
                top: top.to_path_buf(),
                dotgit: None,
                outside: true,
            };
        }
        // Its `.git` is the user's (the watcher may not even read it); what names the
        // common dir is in the entry, the agent's to write: it must name this repository.
        let top = real.as_deref().unwrap_or(top);
        let common = crate::read_regular(&entry.join("commondir"), 64 << 10)
            .ok()
            .and_then(|t| {
                let t = String::from_utf8_lossy(&t);
                std::fs::canonicalize(entry.join(t.trim_end_matches(['\n', '\r']))).ok()
            });
        if !common.is_some_and(|c| same_file(&c, &reg.common)) {
            return Added::Refused {
                why: "its commondir does not name this repository".into(),
                top: top.to_path_buf(),
                dotgit: None,
                outside: true,
            };
        }
        return Added::Users {
            top: top.to_path_buf(),
            aside: ["config.worktree", "modules"]
                .iter()
                .map(|name| Absent {
                    path: entry.join(name),
                    base: entry.to_path_buf(),
                    reason: "in the git dir of a linked worktree added while the agent ran: the agent could write it".into(),
                })
                .collect(),
        };
    };
    let dotgit = top.join(".git");
    let users = held.iter().any(|h| h.path == dotgit);
    let theirs = (!users && std::fs::symlink_metadata(&dotgit).is_ok()).then(|| dotgit.clone());
    let w = match crate::worktree::discover(top, Some(top)) {
        Ok(w) => w,
        Err(e) => return refuse(e.to_string(), top, theirs),
    };
    if !checks_out(&w, entry, reg) {
        return refuse(
            "its `.git` does not name this entry, or its commondir names another repository".into(),
            top,
            theirs,
        );
    }
    let p = match resolve_listed(&w, &reg.list) {
        Ok(p) => p,
        Err(e) => return refuse(e.to_string(), top, theirs),
    };
    let Some(subs) = p.submodules.clone() else {
        return refuse("it has no index".into(), top, theirs);
    };
    let keep = [dotgit, entry.join("commondir"), entry.join("gitdir")];
    let aside = crate::record::judged(&p)
        .into_iter()
        .filter(|a| !keep.contains(&a.path))
        .collect();
    Added::Checked {
        top: top.to_path_buf(),
        aside,
        subs,
    }
}

/// Whether `w` is a linked worktree of the repository of `reg` whose git dir is `entry`.
fn checks_out(w: &Worktree, entry: &Path, reg: &Registry) -> bool {
    matches!(&w.git, GitLayout::Linked { git_dir, common_dir: Some(common) }
        if same_file(git_dir, entry) && same_file(common, &reg.common))
}

/// `p` with `.` and `..` components taken lexically.
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Whether `a` and `b` are the same directory (one path may be a link to the other's).
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// `sub` with each `*` component replaced by every entry of that directory that exists (a
/// pattern whose directory does not exist stands for nothing).
fn expand(base: &Path, sub: &str) -> Vec<String> {
    if !sub.contains(ANY) {
        return vec![sub.to_string()];
    }
    let Some((head, tail)) = sub
        .split_once(&format!("/{ANY}/")[..])
        .or_else(|| sub.strip_prefix(&format!("{ANY}/")[..]).map(|t| ("", t)))
    else {
        return vec![sub.to_string()];
    };
    let dir = if head.is_empty() {
        base.to_path_buf()
    } else {
        base.join(head)
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    names
        .into_iter()
        .flat_map(|n| {
            let one = if head.is_empty() {
                format!("{n}/{tail}")
            } else {
                format!("{head}/{n}/{tail}")
            };
            expand(base, &one)
        })
        .collect()
}

/// Walks `sub` down from `base`: every directory on the way is held in place, the path
/// itself read-only (a main checkout's `.git` in place: git writes in it), or, from the
/// first component that is missing, the path is absent.
fn walk(
    p: &mut Protection,
    base: &Path,
    sub: &str,
    rel: &str,
    reason: Cow<'static, str>,
) -> Result<(), ProtectError> {
    let parts: Vec<&OsStr> = Path::new(sub)
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect();
    let mut at = base.to_path_buf();
    // Held only if the path itself is.
    let mut on_the_way = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        at.push(part);
        let last = i + 1 == parts.len();
        let meta = match std::fs::symlink_metadata(&at) {
            Ok(m) => m,
            // `*/.git` stands for the submodules that exist: a `.git` the agent makes in a
            // directory (a test's scratch repository) is not swept.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && rel.contains(ANY)
                    && rel.ends_with("/.git") =>
            {
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                p.absent.push(Absent {
                    path: base.join(sub),
                    base: base.to_path_buf(),
                    reason: reason.clone(),
                });
                return Ok(());
            }
            Err(e) => {
                return Err(ProtectError::Io {
                    path: at,
                    source: e,
                })
            }
        };
        let ft = meta.file_type();
        let unprotectable = |what: &str| ProtectError::Unprotectable {
            path: at.clone(),
            rel: rel.to_string(),
            reason: reason.clone(),
            what: what.to_string(),
        };
        if ft.is_symlink() {
            return Err(unprotectable(if last {
                "a symbolic link"
            } else {
                "a symbolic link on the way to it"
            }));
        }
        if !last {
            if !ft.is_dir() {
                // A file where a directory would be: nothing to hold, but the path is
                // watched as absent, since the file can be replaced by a directory holding
                // it (in this launch or a later one). `*/.git` stands for submodules only.
                if !(rel.contains(ANY) && rel.ends_with("/.git")) {
                    p.absent.push(Absent {
                        path: base.join(sub),
                        base: base.to_path_buf(),
                        reason: reason.clone(),
                    });
                }
                return Ok(());
            }
            on_the_way.push(Held {
                path: at.clone(),
                hold: Hold::InPlace,
                is_dir: true,
                reason: Cow::Owned(format!("on the way to the protected {rel}")),
                store: None,
            });
            continue;
        }
        let is_dir = ft.is_dir();
        // `*/.git`: a submodule's (or nested worktree's) `.git` file; a nested repository's
        // own `.git` directory is the agent's to work in.
        if is_dir && rel.contains(ANY) && part.as_bytes() == b".git" {
            return Ok(());
        }
        if !is_dir && !ft.is_file() {
            let what = if ft.is_fifo() {
                "a FIFO"
            } else if ft.is_socket() {
                "a socket"
            } else {
                "a device"
            };
            return Err(unprotectable(what));
        }
        // A main checkout's `.git`: in place, not read-only (git writes into it).
        let git_dir_itself =
            rel == ".git" && is_dir && base.join(sub).as_os_str().as_bytes().ends_with(b"/.git");
        p.held.append(&mut on_the_way);
        p.held.push(Held {
            path: at.clone(),
            hold: if git_dir_itself {
                Hold::InPlace
            } else {
                Hold::ReadOnly
            },
            is_dir,
            reason: reason.clone(),
            store: None,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_plain_relative_paths() {
        assert_eq!(Change::parse(".envrc"), Ok(Change::Add(".envrc".into())));
        assert_eq!(
            Change::parse("!.vscode/tasks.json"),
            Ok(Change::Remove(".vscode/tasks.json".into()))
        );
        for bad in ["", "/etc", "a/../b", "./x", "a//b", "a/", "!", "x\ny"] {
            assert!(Change::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pattern_of_landwalls_own_may_be_left_out_and_no_other_named() {
        assert_eq!(
            Change::parse("!~/.codex/*.config.toml"),
            Ok(Change::Remove("~/.codex/*.config.toml".into()))
        );
        for bad in [
            "~/.codex/*.config.toml",
            "!~/.codex/*.toml",
            "!*.env",
            "!~/.codex/a*",
        ] {
            assert!(Change::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_pattern_stands_for_names_with_its_ends() {
        let m = |p: &str, n: &str| name_matches(p.as_bytes(), n.as_bytes());
        assert!(m("*.config.toml", "work.config.toml"));
        assert!(m("*.config.toml", ".config.toml"));
        assert!(m("a*b", "ab"));
        assert!(m("plain", "plain"));
        for n in [
            "config.toml",
            "work.config.toml.landwall-swept-1-2",
            "work.config.tom",
            "",
        ] {
            assert!(!m("*.config.toml", n), "{n:?}");
        }
        assert!(!m("a*b", "b") && !m("a*ab", "ab"));
        let a = Absent {
            path: "/h/.codex/*.config.toml".into(),
            base: "/h/.codex".into(),
            reason: "".into(),
        };
        assert_eq!(
            a.pattern(),
            Some((Path::new("/h/.codex"), OsStr::new("*.config.toml")))
        );
        assert!(a.covers(Path::new("/h/.codex/w.config.toml")));
        assert!(a.covers(Path::new("/h/.codex/w.config.toml/x")));
        assert!(!a.covers(Path::new("/h/.codex/config.toml")));
        assert!(!a.covers(Path::new("/h/.codex/sub/w.config.toml")));
    }

    /// Codex's profile layers: each that exists is held read-only as one of its own (with
    /// what its commands run), and the pattern stays absent for what appears; left out by
    /// `"!~/.codex/*.config.toml"`.
    #[test]
    fn each_profile_layer_is_held_and_the_pattern_swept() {
        let (_t, root) = tree();
        let home = root.join("home");
        let codex = home.join(".codex");
        std::fs::create_dir_all(&codex).expect("mkdir");
        std::fs::write(
            codex.join("work.config.toml"),
            "notify = [\"sh\", \"~/.codex/notify.sh\"]\n",
        )
        .expect("write");
        std::fs::write(codex.join("notify.sh"), "true\n").expect("write");
        std::fs::write(codex.join("config.toml.bak"), "").expect("write");
        let writable = |p: &Path| p.starts_with(&codex);
        let state = |changes: &[Change]| {
            let mut p = Protection::default();
            agent_state(&mut p, &home, &[], changes, None, &writable).expect("agent state");
            p
        };
        let p = state(&[]);
        let held = |p: &Protection, path: &Path| {
            p.held
                .iter()
                .any(|h| h.path == path && h.hold == Hold::ReadOnly)
        };
        assert!(held(&p, &codex.join("work.config.toml")), "{p:#?}");
        assert!(held(&p, &codex.join("notify.sh")), "{p:#?}");
        assert!(!held(&p, &codex.join("config.toml.bak")));
        let pattern = codex.join("*.config.toml");
        assert!(p
            .absent
            .iter()
            .any(|a| a.path == pattern && a.base == codex));
        assert_eq!(
            p.absent_covering(&codex.join("new.config.toml"))
                .map(|a| &a.path),
            Some(&pattern)
        );
        let p = state(&[Change::Remove("~/.codex/*.config.toml".into())]);
        assert!(!held(&p, &codex.join("work.config.toml")));
        assert!(!p.absent.iter().any(|a| a.path == pattern));
    }

    #[test]
    fn defaults_are_valid_and_distinct() {
        let mut seen = std::collections::BTreeSet::new();
        for d in DEFAULTS {
            assert!(check_relative(d.path).is_ok(), "{}", d.path);
            assert!(seen.insert(d.path), "twice: {}", d.path);
            assert!(!d.reason.is_empty());
        }
    }

    #[test]
    fn the_configuration_adds_and_trims() {
        let l = list(&[
            Change::Add(".tool-versions".into()),
            Change::Remove(".envrc".into()),
        ]);
        assert!(l.iter().any(|(p, _)| p == ".tool-versions"));
        assert!(!l.iter().any(|(p, _)| p == ".envrc"));
        assert!(l.iter().any(|(p, _)| p == ".git/hooks"));
    }

    fn tree() -> (crate::testutil::Scratch, PathBuf) {
        let t = crate::testutil::Scratch::new("protect");
        let root = t.0.clone();
        (t, root)
    }

    #[test]
    fn a_main_checkout_holds_its_git_dir_in_place_and_its_config_read_only() {
        let (_t, root) = tree();
        std::fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
        std::fs::write(root.join(".git/config"), "").expect("config");
        std::fs::create_dir_all(root.join(".git/worktrees/w1")).expect("mkdir");
        std::fs::create_dir_all(root.join("nested/.git")).expect("mkdir");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::write(root.join("sub/.git"), "gitdir: ../.git/modules/sub\n").expect("gitfile");
        std::fs::write(root.join(".git/worktrees/w1/commondir"), "../..\n").expect("commondir");
        std::fs::create_dir_all(root.join(".vscode")).expect("mkdir");
        std::fs::write(root.join(".vscode/tasks.json"), "{}").expect("tasks");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::Main {
                git_dir: root.join(".git"),
            },
        };
        let p = resolve(&wt, &[]).expect("resolve");
        let held: Vec<(String, Hold)> = p
            .held
            .iter()
            .map(|h| {
                (
                    h.path
                        .strip_prefix(&root)
                        .expect("under")
                        .display()
                        .to_string(),
                    h.hold,
                )
            })
            .collect();
        assert_eq!(
            held,
            [
                (".git".to_string(), Hold::InPlace),
                (".vscode".to_string(), Hold::InPlace),
                ("sub".to_string(), Hold::InPlace),
                (".git/config".to_string(), Hold::ReadOnly),
                (".git/hooks".to_string(), Hold::ReadOnly),
                (".git/worktrees".to_string(), Hold::InPlace),
                (".vscode/tasks.json".to_string(), Hold::ReadOnly),
                ("sub/.git".to_string(), Hold::ReadOnly),
                (".git/worktrees/w1".to_string(), Hold::InPlace),
                (".git/worktrees/w1/commondir".to_string(), Hold::ReadOnly),
            ]
        );
        let absent: Vec<_> = p.absent.iter().map(|a| a.path.clone()).collect();
        assert!(absent.contains(&root.join(".envrc")));
        assert!(absent.contains(&root.join(".git/commondir")));
        // What a `*` stands for is held where it exists, and swept where it does not, but
        // for a `.git`: a repository the agent makes is its own.
        assert!(absent.contains(&root.join(".git/worktrees/w1/config.worktree")));
        assert!(!absent.iter().any(|a| a.ends_with("nested/.git")));
        assert!(absent.contains(&root.join(".vscode/settings.json")));
        assert!(!absent.contains(&root.join(".git")));
    }

    #[test]
    fn a_linked_worktree_holds_its_git_file_and_its_git_dirs_commondir() {
        let (_t, top) = tree();
        let root = top.join("wt");
        let gd = top.join("repo/.git/worktrees/wt");
        std::fs::create_dir_all(&root).expect("mkdir");
        std::fs::create_dir_all(&gd).expect("mkdir");
        std::fs::write(root.join(".git"), "gitdir: x\n").expect("git file");
        std::fs::write(gd.join("commondir"), "../..\n").expect("commondir");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::Linked {
                git_dir: gd.clone(),
                common_dir: Some(top.join("repo/.git")),
            },
        };
        let p = resolve(&wt, &[]).expect("resolve");
        assert!(p
            .held
            .iter()
            .any(|h| h.path == root.join(".git") && h.hold == Hold::ReadOnly && !h.is_dir));
        assert!(p
            .held
            .iter()
            .any(|h| h.path == gd.join("commondir") && h.hold == Hold::ReadOnly));
        assert!(p
            .absent
            .iter()
            .any(|a| a.path == gd.join("config.worktree") && a.base == gd));
    }

    #[test]
    fn a_pattern_that_stands_for_too_many_paths_is_refused() {
        let (_t, root) = tree();
        for i in 0..300 {
            let d = root.join(format!("d{i}"));
            std::fs::create_dir_all(&d).expect("mkdir");
            std::fs::write(d.join(".git"), "gitdir: x\n").expect("git file");
        }
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::None,
        };
        let e = resolve(&wt, &[]).expect_err("too many");
        assert!(matches!(e, ProtectError::TooMany { .. }), "{e}");
        assert!(resolve(&wt, &[Change::Remove("*/.git".into())]).is_ok());
    }

    #[test]
    fn the_repositorys_hooks_path_in_the_worktree_is_protected() {
        let (_t, root) = tree();
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::create_dir_all(root.join("scripts/hooks")).expect("mkdir");
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\tbare = false\n\thooksPath = scripts/hooks\n",
        )
        .expect("config");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::Main {
                git_dir: root.join(".git"),
            },
        };
        let p = resolve(&wt, &[]).expect("resolve");
        assert!(p
            .held
            .iter()
            .any(|h| h.path == root.join("scripts/hooks") && h.hold == Hold::ReadOnly));
        assert!(p
            .held
            .iter()
            .any(|h| h.path == root.join("scripts") && h.hold == Hold::InPlace));
    }

    #[test]
    fn a_link_cannot_be_protected() {
        let (_t, root) = tree();
        std::os::unix::fs::symlink("/etc/hostname", root.join(".envrc")).expect("link");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::None,
        };
        let e = resolve(&wt, &[]).expect_err("a link");
        assert!(matches!(e, ProtectError::Unprotectable { .. }), "{e}");
        // Trimmed from the list, it is no longer looked at.
        assert!(resolve(&wt, &[Change::Remove(".envrc".into())]).is_ok());
    }

    #[test]
    fn a_program_behind_a_link_in_the_worktree_is_refused_unless_trimmed() {
        let (_t, root) = tree();
        std::fs::create_dir_all(root.join(".git")).expect("mkdir");
        std::fs::create_dir_all(root.join("real")).expect("mkdir");
        std::fs::write(root.join("real/ed.sh"), "#!/bin/sh\n").expect("write");
        std::os::unix::fs::symlink("real", root.join("bin")).expect("link");
        std::fs::write(
            root.join(".git/config"),
            "[core]\n\teditor = bin/ed.sh --wait\n",
        )
        .expect("config");
        let wt = Worktree {
            root: root.clone(),
            git: GitLayout::Main {
                git_dir: root.join(".git"),
            },
        };
        // The link could be repointed: refused, naming it.
        let e = resolve(&wt, &[]).expect_err("behind a link");
        assert!(matches!(e, ProtectError::Unprotectable { .. }), "{e}");
        // Trimmed, the program is still held where the link leads now.
        let p = resolve(&wt, &[Change::Remove("bin/ed.sh".into())]).expect("trimmed");
        assert!(p
            .held
            .iter()
            .any(|h| h.path == root.join("real/ed.sh") && h.hold == Hold::ReadOnly));
    }

    /// A shared read-only hold keeps the holes in it (mounted after it), and `check` finds
    /// a path in a hole writable, the rest of the hold read-only.
    #[test]
    fn a_hole_in_a_shared_hold_is_kept_and_not_covered() {
        let held = |path: &str, hold| Held {
            path: PathBuf::from(path),
            hold,
            is_dir: true,
            reason: Cow::Borrowed("test"),
            store: None,
        };
        let mut p = Protection {
            held: vec![
                held("/h/.claude/projects/-own", Hold::Hole),
                held("/h/.claude/projects/-other/memory", Hold::ReadOnly),
                held("/h/.claude/projects", Hold::Shared),
                held("/h/.claude/shell-snapshots", Hold::Fresh),
            ],
            ..Protection::default()
        };
        normalize(&mut p);
        let order: Vec<(&Path, Hold)> = p.held.iter().map(|h| (h.path.as_path(), h.hold)).collect();
        assert_eq!(
            order,
            [
                (Path::new("/h/.claude/projects"), Hold::Shared),
                (Path::new("/h/.claude/shell-snapshots"), Hold::Fresh),
                (Path::new("/h/.claude/projects/-own"), Hold::Hole),
            ]
        );
        assert!(p
            .covering(Path::new("/h/.claude/projects/-own/1.jsonl"))
            .is_none());
        assert!(p
            .covering(Path::new("/h/.claude/projects/-own2/m"))
            .is_some());
        assert!(p
            .covering(Path::new("/h/.claude/projects/-other/memory/M.md"))
            .is_some());
    }

    /// A layer wins over a bind in place of the same directory (both keep it from being
    /// renamed away; only the layer keeps the user's copy out of reach), keeps its store,
    /// is mounted before what is held in it, and covers nothing from `check`'s view.
    #[test]
    fn a_layer_wins_over_a_bind_in_place_and_is_mounted_first() {
        let held = |path: &str, hold, store: Option<&str>| Held {
            path: PathBuf::from(path),
            hold,
            is_dir: true,
            reason: Cow::Borrowed("test"),
            store: store.map(PathBuf::from),
        };
        let mut p = Protection {
            held: vec![
                held("/h/.cache/opencode/packages", Hold::ReadOnly, None),
                held("/h/.cache", Hold::InPlace, None),
                held("/h/.cache", Hold::Layer, Some("/s/p-1/cache")),
            ],
            ..Protection::default()
        };
        normalize(&mut p);
        let order: Vec<(&Path, Hold, Option<&Path>)> = p
            .held
            .iter()
            .map(|h| (h.path.as_path(), h.hold, h.store.as_deref()))
            .collect();
        assert_eq!(
            order,
            [
                (
                    Path::new("/h/.cache"),
                    Hold::Layer,
                    Some(Path::new("/s/p-1/cache"))
                ),
                (
                    Path::new("/h/.cache/opencode/packages"),
                    Hold::ReadOnly,
                    None
                ),
            ]
        );
        assert!(p.covering(Path::new("/h/.cache/go-build/aa")).is_none());
    }

    /// Each project, and each directory layered in it, has a store of its own: the name
    /// says which, and no two paths share one.
    #[test]
    fn each_project_and_directory_has_a_layer_store_of_its_own() {
        let s = Path::new("/h/.local/state/landwall/cache");
        let c = Path::new("/h/.cache");
        let a = layer_store(s, Path::new("/src/app"), ".cache", c);
        assert!(a.starts_with(s));
        let name = a
            .strip_prefix(s)
            .expect("under")
            .to_string_lossy()
            .into_owned();
        assert!(
            name.starts_with("app-") && name.contains("/cache-"),
            "{name}"
        );
        assert_eq!(a, layer_store(s, Path::new("/src/app"), ".cache", c));
        assert_ne!(a, layer_store(s, Path::new("/other/app"), ".cache", c));
        // Another home's (root's launches keep every home's under root's own).
        let other_home = layer_store(s, Path::new("/src/app"), ".cache", Path::new("/u/.cache"));
        assert_ne!(a, other_home);
        let todos = layer_store(
            s,
            Path::new("/src/app"),
            ".claude/todos",
            Path::new("/h/.claude/todos"),
        );
        assert_ne!(a, todos);
        assert!(todos.to_string_lossy().contains("/claude-todos-"));
        // Nothing of the name leads anywhere else.
        let odd = layer_store(s, Path::new("/src/../../etc x"), ".cache", c);
        assert_eq!(odd.parent().and_then(Path::parent), Some(s));
    }
}
