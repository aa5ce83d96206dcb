//! Worktree discovery: which directory the agent may write, and which git directories it
//! writes its commits into.
//!
//! Found natively (no `git` process on the launch path): walk up from the cwd for `.git`. A
//! `.git` directory marks a main worktree; a `.git` file (`gitdir: …`) marks a linked worktree
//! or a submodule, whose git dir and `commondir` must be writable too. All paths returned are
//! real paths. A worktree that is `/` or a system directory is refused.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::realpath::Resolver;

/// Why a worktree could not be used.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The directory could not be resolved.
    #[error("worktree {}: {source}", path.display())]
    Resolve {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Not a directory.
    #[error("worktree {} is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// `/` or a system directory: the whole system would become writable.
    #[error(
        "refusing worktree {}: it is a system directory; run the agent from inside a project (or set LANDWALL_WORKTREE to one)",
        path.display()
    )]
    SystemDirectory {
        /// The resolved path.
        path: PathBuf,
    },
    /// The worktree found from the cwd is the home directory, lies above it, or is a
    /// directory of projects: the agent would get every project in it.
    #[error(
        "refusing worktree {}: it is {what}, so the agent would get every project in it; start the agent inside one project (cd into it), or name this directory on purpose with LANDWALL_WORKTREE={} (`landwall run --worktree`)",
        path.display(), path.display()
    )]
    TooWide {
        /// The worktree.
        path: PathBuf,
        /// What it is.
        what: String,
    },
    /// The cwd lies in a linked worktree or submodule of the repository above it whose own
    /// `.git` is gone: climbing to the repository would grant all of it.
    #[error(
        "{} is {what} of the repository at {}, but its .git file is missing; refusing to widen the wall to the whole repository: restore it (`git worktree repair {}` from {}) or start the agent at {}",
        lost.display(), top.display(), lost.display(), top.display(), top.display()
    )]
    LostGitFile {
        /// The directory that should have a `.git` file.
        lost: PathBuf,
        /// The repository the walk would have climbed to.
        top: PathBuf,
        /// "a linked worktree" or "a submodule".
        what: &'static str,
    },
    /// Started below the top level of a repository one of whose linked worktree entries
    /// does not check out: the cwd could be that worktree, with its `.git` gone.
    #[error(
        "refusing to widen the wall to the repository at {}: its linked worktree entry {} does not name a worktree that names it back (run `git worktree repair`, or `git worktree prune` for a worktree that is gone, in {}), or start the agent at {}",
        top.display(), entry.display(), top.display(), top.display()
    )]
    BrokenWorktreeEntry {
        /// The entry, `<common>/worktrees/<id>`.
        entry: PathBuf,
        /// The repository the walk would have climbed to.
        top: PathBuf,
    },
    /// A `.git` file that does not say where its git dir is.
    #[error("{}: not a valid `.git` file ({why}); repair it with `git worktree repair`", path.display())]
    BadGitFile {
        /// The `.git` file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
}

/// The git layout of a worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitLayout {
    /// No repository: the worktree is just a directory.
    None,
    /// A main worktree; its git dir lies inside it.
    Main {
        /// `<worktree>/.git`.
        git_dir: PathBuf,
    },
    /// A linked worktree (or a submodule): its git dirs lie elsewhere.
    Linked {
        /// The worktree's own git dir (`<common>/worktrees/<id>`, or `…/modules/<name>`).
        git_dir: PathBuf,
        /// The repository's common dir (objects, refs) it commits into, if different.
        common_dir: Option<PathBuf>,
    },
}

/// A resolved worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worktree {
    /// The real path of the worktree's top level.
    pub root: PathBuf,
    /// Its git layout.
    pub git: GitLayout,
}

impl Worktree {
    /// The git directories outside the worktree that it writes to.
    pub fn external_git_dirs(&self) -> Vec<&Path> {
        match &self.git {
            GitLayout::Linked {
                git_dir,
                common_dir,
            } => {
                let mut v = vec![git_dir.as_path()];
                if let Some(c) = common_dir {
                    v.push(c.as_path());
                }
                v
            }
            _ => Vec::new(),
        }
    }
}

/// Directories that may never be a worktree, nor contain one.
const SYSTEM_TREES: &[&str] = &[
    "/usr", "/etc", "/proc", "/sys", "/dev", "/bin", "/sbin", "/lib", "/lib32", "/lib64",
    "/libx32", "/boot", "/run",
];
/// Directories that may contain worktrees but may not be one.
const SYSTEM_ROOTS: &[&str] = &[
    "/", "/home", "/var", "/srv", "/opt", "/mnt", "/media", "/nix",
];

/// Whether `path` (a real path) is refused as a worktree.
pub fn is_system_directory(path: &Path) -> bool {
    let p = path.as_os_str().as_bytes();
    let plain = p.len() > 1
        && p[0] == b'/'
        && p[1..]
            .split(|&c| c == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b"..");
    if !plain {
        // `/` itself, or a path with `.`, `..`, `//` or a trailing `/`: compare components.
        return SYSTEM_ROOTS.iter().any(|r| path == Path::new(r))
            || SYSTEM_TREES.iter().any(|r| path.starts_with(r));
    }
    // A plain path (every real path but `/`): bytes are exact, and much cheaper than
    // `Path::starts_with`, which parses components.
    SYSTEM_ROOTS.iter().any(|r| p == r.as_bytes())
        || SYSTEM_TREES.iter().any(|r| {
            p.strip_prefix(r.as_bytes())
                .is_some_and(|rest| rest.is_empty() || rest[0] == b'/')
        })
}

/// Finds the worktree: `override_dir` (from `LANDWALL_WORKTREE`) if given, else the git top
/// level above `cwd`, else `cwd` itself.
pub fn discover(cwd: &Path, override_dir: Option<&Path>) -> Result<Worktree, WorktreeError> {
    discover_with(cwd, override_dir, &mut Resolver::default())
}

/// [`discover`], resolving paths with `resolver` (which then knows them for the policy).
pub fn discover_with(
    cwd: &Path,
    override_dir: Option<&Path>,
    resolver: &mut Resolver,
) -> Result<Worktree, WorktreeError> {
    let start = override_dir.unwrap_or(cwd);
    let (real, is_dir) = resolver
        .resolve(start)
        .map_err(|source| WorktreeError::Resolve {
            path: start.to_path_buf(),
            source,
        })?;
    if !is_dir {
        return Err(WorktreeError::NotADirectory { path: real });
    }
    // Where the walk started, when it climbed: kept for the lost-`.git` check.
    let mut started = None;
    let (root, dotgit) = if override_dir.is_some() {
        // An explicit worktree is taken as the top level; only its own `.git` counts.
        let dotgit = real.join(".git");
        let meta = dotgit.symlink_metadata().ok();
        (real, meta.map(|m| (dotgit, m)))
    } else {
        match find_dotgit(&real) {
            Some((top, dotgit)) => {
                if top != real {
                    started = Some(real);
                }
                (top, Some(dotgit))
            }
            None => (real, None),
        }
    };
    if is_system_directory(&root) {
        return Err(WorktreeError::SystemDirectory { path: root });
    }
    let git = match dotgit {
        None => GitLayout::None,
        Some((dotgit, lmeta)) => layout(&dotgit, lmeta, resolver)?,
    };
    if let Some(cwd) = started {
        refuse_lost_gitfile(&root, &cwd, &git)?;
    }
    Ok(Worktree { root, git })
}

/// Refuses a worktree found from the cwd (not named on purpose) that is `home` (a real path)
/// or lies above it, or that is not a repository but holds one within three levels below
/// it (`~/src/app`, `~/code/github.com/user/repo`), a bare one (`~/repos/app.git`) included:
/// started there by mistake, the agent would get every project in it, the main checkouts of
/// linked worktrees included. A `.git` directory without `HEAD` (one planted to make `~/src`
/// look like a repository) does not make the worktree a repository. A repository's own
/// nested repositories are its business. Costs a bounded walk, only when the worktree is not
/// a repository.
pub fn refuse_too_wide(wt: &Worktree, home: Option<&Path>) -> Result<(), WorktreeError> {
    let too_wide = |what: String| {
        Err(WorktreeError::TooWide {
            path: wt.root.clone(),
            what,
        })
    };
    if let Some(home) = home {
        if home == wt.root {
            return too_wide("your home directory".into());
        }
        if home.starts_with(&wt.root) {
            return too_wide(format!("above your home directory {}", home.display()));
        }
    }
    let is_repo = match &wt.git {
        GitLayout::Main { git_dir } => git_dir.join("HEAD").symlink_metadata().is_ok(),
        GitLayout::None => false,
        _ => true,
    };
    if is_repo {
        return Ok(());
    }
    match first_repository_below(&wt.root, 3) {
        Some(repo) => too_wide(format!(
            "a directory of projects (it holds the repository {})",
            repo.display()
        )),
        None => Ok(()),
    }
}

/// How far [`repositories_below`] looks.
#[derive(Debug, Clone, Copy)]
pub struct RepoWalk {
    /// Directory levels below the start (1: its entries).
    pub depth: usize,
    /// Directories looked at, in all.
    pub max_dirs: usize,
    /// How long it may take (`None`: no time limit).
    pub budget: Option<std::time::Duration>,
    /// Pass over hidden directories (`~/.nvm` and other toolchains kept as checkouts).
    pub skip_hidden: bool,
    /// Stop at the first repository found.
    pub first_only: bool,
}

/// What [`repositories_below`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct RepoScan {
    /// Repositories, level by level and by name within a directory.
    pub repos: Vec<PathBuf>,
    /// Whether it stopped at a limit before looking everywhere it would.
    pub cut_short: bool,
}

/// The repositories within `walk.depth` levels below `dir`, breadth first: directories with
/// a `.git` (directory or file) and bare repositories (`HEAD`, `objects/` and `refs/`). A
/// repository is not looked into, and symbolic links are not followed. One walk serves the
/// launch's refusal of a directory of projects and `doctor`'s list of other repositories.
pub fn repositories_below(dir: &Path, walk: RepoWalk) -> RepoScan {
    let start = std::time::Instant::now();
    let mut scan = RepoScan::default();
    let mut level = vec![dir.to_path_buf()];
    let mut seen = 0;
    for _ in 0..walk.depth {
        let mut next = Vec::new();
        for d in &level {
            let Ok(entries) = std::fs::read_dir(d) else {
                continue;
            };
            let mut subdirs: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter(|e| !(walk.skip_hidden && e.file_name().as_bytes().starts_with(b".")))
                .map(|e| e.path())
                .collect();
            subdirs.sort();
            for sub in subdirs {
                seen += 1;
                let late = walk.budget.is_some_and(|b| start.elapsed() > b);
                if seen > walk.max_dirs || late {
                    scan.cut_short = true;
                    return scan;
                }
                let repo = sub.join(".git").symlink_metadata().is_ok()
                    || (sub.join("HEAD").is_file()
                        && sub.join("objects").is_dir()
                        && sub.join("refs").is_dir());
                if repo {
                    scan.repos.push(sub);
                    if walk.first_only {
                        return scan;
                    }
                } else {
                    next.push(sub);
                }
            }
        }
        level = next;
    }
    scan
}

/// The first repository (by name, level by level) within `depth` levels below `dir`. Stops
/// after a few hundred directories: enough for the usual layouts, few enough to keep a
/// launch in a large plain directory (no repository) quick.
fn first_repository_below(dir: &Path, depth: usize) -> Option<PathBuf> {
    let walk = RepoWalk {
        depth,
        max_dirs: 512,
        budget: None,
        skip_hidden: false,
        first_only: true,
    };
    repositories_below(dir, walk).repos.pop()
}

/// The nearest `.git` at or above `start`: the top level, the `.git` path and its `lstat`.
fn find_dotgit(start: &Path) -> Option<(PathBuf, (PathBuf, std::fs::Metadata))> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        let candidate = d.join(".git");
        if let Ok(meta) = candidate.symlink_metadata() {
            return Some((d.to_path_buf(), (candidate, meta)));
        }
        dir = d.parent();
    }
    None
}

/// Started below the top level `top`: refuses when a directory between them (`cwd`
/// included) is one of the repository's linked worktrees (its common dir's
/// `worktrees/*/gitdir` names `DIR/.git`) or submodules (`.gitmodules` names it) whose
/// `.git` is missing. An agent in a worktree nested in the main checkout (as Claude Code's
/// `.claude/worktrees/NAME` are) could otherwise delete its `.git` and be granted the whole
/// checkout at its next launch. Costs nothing when the agent starts at the top level.
fn refuse_lost_gitfile(top: &Path, cwd: &Path, git: &GitLayout) -> Result<(), WorktreeError> {
    let between = |dir: &Path| dir != top && dir.starts_with(top) && cwd.starts_with(dir);
    let common = match git {
        GitLayout::Main { git_dir } => Some(git_dir.as_path()),
        GitLayout::Linked {
            common_dir: Some(c),
            ..
        } => Some(c.as_path()),
        GitLayout::Linked { git_dir, .. } => Some(git_dir.as_path()),
        GitLayout::None => None,
    };
    if let Some(entries) = common.and_then(|c| std::fs::read_dir(c.join("worktrees")).ok()) {
        for entry in entries.flatten() {
            let entry = entry.path();
            // Each linked worktree's entry must check out both ways, as at launch: its
            // `gitdir` names `DIR/.git`, and that `.git` names the entry back. The agent of
            // a linked worktree can delete or rewrite its own entry's `gitdir` (its git dir
            // is writable to it), so an entry that does not check out is no evidence that
            // the cwd is not that worktree: refuse rather than widen to the whole checkout.
            match entry_worktree(&entry) {
                Some(dir) if !between(&dir) => {}
                Some(dir) => {
                    return Err(WorktreeError::LostGitFile {
                        lost: dir,
                        top: top.to_path_buf(),
                        what: "a linked worktree",
                    })
                }
                // Say which worktree lost its `.git` when the entry still names it.
                None => match entry_named_dir(&entry).filter(|d| between(d)) {
                    Some(dir) => {
                        return Err(WorktreeError::LostGitFile {
                            lost: dir,
                            top: top.to_path_buf(),
                            what: "a linked worktree",
                        })
                    }
                    None => {
                        return Err(WorktreeError::BrokenWorktreeEntry {
                            entry,
                            top: top.to_path_buf(),
                        })
                    }
                },
            }
        }
    }
    if let Ok(text) = read_git_file(&top.join(".gitmodules")) {
        for line in text.lines() {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            if !key.trim().eq_ignore_ascii_case("path") {
                continue;
            }
            let Ok(dir) = std::fs::canonicalize(top.join(value.trim())) else {
                continue;
            };
            if between(&dir) {
                return Err(WorktreeError::LostGitFile {
                    lost: dir,
                    top: top.to_path_buf(),
                    what: "a submodule",
                });
            }
        }
    }
    Ok(())
}

/// The worktree a linked worktree's entry (`<common>/worktrees/<id>`) belongs to, if the
/// entry checks out both ways: its `gitdir` names `DIR/.git` (absolute, or relative to the
/// entry as git 2.48 writes it), and `DIR/.git` is a file that names the entry back.
/// `None` otherwise (a stale entry, whose worktree was deleted, included).
fn entry_worktree(entry: &Path) -> Option<PathBuf> {
    let dir = entry_named_dir(entry)?;
    let dotgit = read_git_file(&dir.join(".git")).ok()?;
    let back = gitfile_target(&dotgit).ok()?;
    let back = std::fs::canonicalize(dir.join(back)).ok()?;
    let entry = std::fs::canonicalize(entry).ok()?;
    (back == entry).then_some(dir)
}

/// The directory an entry's `gitdir` names (`DIR` of `DIR/.git`), resolved.
fn entry_named_dir(entry: &Path) -> Option<PathBuf> {
    let text = read_git_file(&entry.join("gitdir")).ok()?;
    let line = one_line(&text).ok()?;
    std::fs::canonicalize(entry.join(line).parent()?).ok()
}

/// How deep superprojects of submodules are followed (a submodule of a submodule …).
const MAX_NESTING: usize = 8;
/// The largest `.git`, `commondir`, `gitdir` or git config file read (git writes one line;
/// a submodule's config is a few hundred bytes).
const MAX_GIT_FILE: u64 = 64 * 1024;

/// `lmeta`: `dotgit`'s `lstat`, from finding it.
///
/// Everything read here may have been written by an agent in an earlier launch (the
/// worktree's `.git`, and the linked worktree's own git dir, are writable to it), so a
/// layout is accepted only when it checks out both ways from files the agent could not
/// have written to point elsewhere:
/// - a linked worktree: the git dir is `<common>/worktrees/<id>`, its `commondir` names that
///   `<common>`, and its `gitdir` names this `.git` back;
/// - a submodule: the git dir lies under `modules/` of the superproject's git dir (found
///   above the worktree, outside it), and its `core.worktree` names this worktree back.
///
/// Anything else is refused, never granted.
fn layout(
    dotgit: &Path,
    lmeta: std::fs::Metadata,
    resolver: &mut Resolver,
) -> Result<GitLayout, WorktreeError> {
    layout_at(dotgit, lmeta, resolver, 0)
}

fn layout_at(
    dotgit: &Path,
    lmeta: std::fs::Metadata,
    resolver: &mut Resolver,
    depth: usize,
) -> Result<GitLayout, WorktreeError> {
    let bad = |why: String| WorktreeError::BadGitFile {
        path: dotgit.to_path_buf(),
        why,
    };
    // `dotgit` is `<real worktree>/.git`: a directory that is not a symlink is its own real
    // path, so only a symlink needs resolving.
    if lmeta.is_dir() {
        return Ok(GitLayout::Main {
            git_dir: dotgit.to_path_buf(),
        });
    }
    if lmeta.file_type().is_symlink() {
        // A `.git` symlink to a directory is a main git dir kept elsewhere: nothing is
        // granted for it. A symlink to anything else is not something git makes.
        let meta = std::fs::metadata(dotgit).map_err(|e| bad(e.to_string()))?;
        if !meta.is_dir() {
            return Err(bad(
                "it is a symbolic link to a file; git writes a plain file".into(),
            ));
        }
        let git_dir = resolver
            .canonicalize(dotgit)
            .map_err(|e| bad(e.to_string()))?;
        return Ok(GitLayout::Main { git_dir });
    }
    let worktree = dotgit.parent().unwrap_or(Path::new("/"));
    let text = read_git_file(dotgit).map_err(|e| bad(e.to_string()))?;
    let target = gitfile_target(&text).map_err(bad)?;
    let git_dir = resolver
        .canonicalize(&worktree.join(target))
        .map_err(|e| bad(format!("its git dir {target}: {e}")))?;
    if !git_dir.is_dir() {
        return Err(bad(format!(
            "its git dir {} is not a directory",
            git_dir.display()
        )));
    }
    refuse_wide(&git_dir, worktree, "git dir").map_err(bad)?;
    let commondir = git_dir.join("commondir");
    match read_git_file(&commondir) {
        Ok(text) => {
            let common = linked_common_dir(dotgit, &git_dir, &text, resolver).map_err(bad)?;
            Ok(GitLayout::Linked {
                git_dir,
                common_dir: Some(common),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            check_submodule(worktree, &git_dir, resolver, depth).map_err(bad)?;
            Ok(GitLayout::Linked {
                git_dir,
                common_dir: None,
            })
        }
        Err(e) => Err(bad(format!("{}: {e}", commondir.display()))),
    }
}

/// The path a `.git` file names, read as git reads it (`read_gitfile_gently`): the whole
/// file must be `gitdir: PATH` and trailing newlines; PATH is everything after the prefix,
/// so a second line is part of it, and git itself would refuse such a file.
fn gitfile_target(text: &str) -> Result<&str, String> {
    let target = text
        .strip_prefix("gitdir: ")
        .ok_or_else(|| "it does not start with `gitdir: `".to_string())?
        .trim_end_matches(['\n', '\r']);
    if target.is_empty() {
        return Err("it names no git dir".into());
    }
    if target.contains(['\n', '\r', '\0']) {
        return Err("it has more than one line; git reads all of it as one path".into());
    }
    Ok(target)
}

/// The common dir of a linked worktree whose git dir is `git_dir` and whose `commondir`
/// says `text`, checked both ways.
fn linked_common_dir(
    dotgit: &Path,
    git_dir: &Path,
    text: &str,
    resolver: &mut Resolver,
) -> Result<PathBuf, String> {
    let c = one_line(text).map_err(|why| format!("{}/commondir: {why}", git_dir.display()))?;
    let common = resolver
        .canonicalize(&git_dir.join(c))
        .map_err(|e| format!("{}/commondir names {c}: {e}", git_dir.display()))?;
    // `<common>/worktrees/<id>`: the only place git puts a linked worktree's git dir.
    let in_worktrees = git_dir
        .parent()
        .is_some_and(|p| p == common.join("worktrees"));
    if !in_worktrees {
        return Err(format!(
            "its git dir {} is not <common dir>/worktrees/<id> of the common dir {} that its commondir names",
            git_dir.display(),
            common.display()
        ));
    }
    let worktree = dotgit.parent().unwrap_or(Path::new("/"));
    refuse_wide(&common, worktree, "common dir")?;
    let back_file = git_dir.join("gitdir");
    let back = read_git_file(&back_file).map_err(|e| format!("{}: {e}", back_file.display()))?;
    let back = one_line(&back).map_err(|why| format!("{}: {why}", back_file.display()))?;
    let names_us = resolver
        .canonicalize(&git_dir.join(back))
        .is_ok_and(|real| real == dotgit);
    if !names_us {
        return Err(format!(
            "{} names {back}, not this worktree's .git back (a moved worktree: run `git worktree repair` in it)",
            back_file.display()
        ));
    }
    Ok(common)
}

/// A submodule's git dir must lie under `modules/` of its superproject's git dir, and its
/// `core.worktree` must name `worktree` back.
fn check_submodule(
    worktree: &Path,
    git_dir: &Path,
    resolver: &mut Resolver,
    depth: usize,
) -> Result<(), String> {
    let not_sub = |why: String| {
        format!(
            "its git dir {} has no commondir, so it must be a submodule's, but {why}; landwall grants a git dir outside the worktree only to linked worktrees and submodules",
            git_dir.display()
        )
    };
    if depth >= MAX_NESTING {
        return Err(not_sub(format!(
            "submodules nest more than {MAX_NESTING} deep"
        )));
    }
    let above = worktree.parent().and_then(find_dotgit);
    let Some((_, (super_dotgit, super_meta))) = above else {
        return Err(not_sub("no superproject lies above the worktree".into()));
    };
    let superproject = layout_at(&super_dotgit, super_meta, resolver, depth + 1)
        .map_err(|e| not_sub(format!("its superproject is not usable ({e})")))?;
    let roots: Vec<PathBuf> = match superproject {
        GitLayout::Main { git_dir } => vec![git_dir],
        GitLayout::Linked {
            git_dir,
            common_dir,
        } => std::iter::once(git_dir).chain(common_dir).collect(),
        GitLayout::None => Vec::new(),
    };
    let under_modules = roots
        .iter()
        .any(|r| git_dir.starts_with(r.join("modules")) && git_dir != r.join("modules"));
    if !under_modules {
        return Err(not_sub(format!(
            "it is not under modules/ of the superproject's git dir ({})",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let config = git_dir.join("config");
    let text = read_git_file(&config).map_err(|e| format!("{}: {e}", config.display()))?;
    let named = core_worktree(&text).ok_or_else(|| {
        format!(
            "{} sets no core.worktree naming this worktree",
            config.display()
        )
    })?;
    let back = resolver
        .canonicalize(&git_dir.join(named))
        .map_err(|e| format!("{}: core.worktree {named}: {e}", config.display()))?;
    if back != worktree {
        return Err(format!(
            "{}: core.worktree names {}, not this worktree",
            config.display(),
            back.display()
        ));
    }
    Ok(())
}

/// `core.worktree` from a git config file's text: the last one in a `[core]` section.
/// Only the plain form git itself writes is understood (`\tworktree = VALUE`, optionally
/// quoted); anything else reads as absent, which refuses the layout.
fn core_worktree(text: &str) -> Option<&str> {
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_core = line.eq_ignore_ascii_case("[core]");
            continue;
        }
        if !in_core {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("worktree") {
            let v = value.trim();
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            found = (!v.is_empty() && !v.contains(['\\', '"', ';', '#'])).then_some(v);
        }
    }
    found
}

/// One line, as git reads `commondir` and `gitdir`: trailing newlines dropped, nothing else.
fn one_line(text: &str) -> Result<&str, &'static str> {
    let line = text.trim_end_matches(['\n', '\r']);
    if line.is_empty() {
        return Err("it is empty");
    }
    if line.contains(['\n', '\r', '\0']) {
        return Err("it has more than one line");
    }
    Ok(line)
}

/// A git dir or common dir may not be a system directory, nor `worktree` or an ancestor of
/// it: granting it would grant far more than one repository's metadata.
fn refuse_wide(dir: &Path, worktree: &Path, what: &str) -> Result<(), String> {
    if is_system_directory(dir) {
        return Err(format!(
            "its {what} {} is a system directory",
            dir.display()
        ));
    }
    if worktree.starts_with(dir) {
        return Err(format!(
            "its {what} {} is the worktree or one of its ancestors",
            dir.display()
        ));
    }
    Ok(())
}

/// Reads a small git file without following a final symlink or blocking on a FIFO, and
/// only if it is a regular file of at most [`MAX_GIT_FILE`] bytes: the agent may have put
/// anything at these names.
fn read_git_file(path: &Path) -> io::Result<String> {
    let bytes = crate::read_regular(path, MAX_GIT_FILE)?;
    String::from_utf8(bytes).map_err(|_| io::Error::other("it is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;
    use std::fs;

    #[test]
    fn plain_directory_is_its_own_worktree() {
        let s = Scratch::new("plain");
        let wt = discover(&s.0, None).expect("ok");
        assert_eq!(wt.root, s.0);
        assert_eq!(wt.git, GitLayout::None);
    }

    #[test]
    fn walks_up_to_main_worktree() {
        let s = Scratch::new("main");
        fs::create_dir_all(s.0.join("repo/.git")).expect("mkdir");
        fs::create_dir_all(s.0.join("repo/src/deep")).expect("mkdir");
        let wt = discover(&s.0.join("repo/src/deep"), None).expect("ok");
        assert_eq!(wt.root, s.0.join("repo"));
        assert_eq!(
            wt.git,
            GitLayout::Main {
                git_dir: s.0.join("repo/.git")
            }
        );
        assert!(wt.external_git_dirs().is_empty());
    }

    #[test]
    fn linked_worktree_follows_gitdir_and_commondir() {
        let s = Scratch::new("linked");
        let common = s.0.join("main/.git");
        fs::create_dir_all(common.join("worktrees/wt")).expect("mkdir");
        fs::write(common.join("worktrees/wt/commondir"), "../..\n").expect("write");
        fs::write(
            common.join("worktrees/wt/gitdir"),
            format!("{}\n", s.0.join("wt/.git").display()),
        )
        .expect("write");
        fs::create_dir_all(s.0.join("wt")).expect("mkdir");
        fs::write(s.0.join("wt/.git"), "gitdir: ../main/.git/worktrees/wt\n").expect("write");
        let wt = discover(&s.0.join("wt"), None).expect("ok");
        assert_eq!(
            wt.git,
            GitLayout::Linked {
                git_dir: common.join("worktrees/wt"),
                common_dir: Some(common.clone()),
            }
        );
        assert_eq!(
            wt.external_git_dirs(),
            vec![common.join("worktrees/wt").as_path(), common.as_path()]
        );
    }

    #[test]
    fn submodule_has_no_commondir() {
        let s = Scratch::new("sub");
        fs::create_dir_all(s.0.join("super/.git/modules/m")).expect("mkdir");
        fs::write(
            s.0.join("super/.git/modules/m/config"),
            "[core]\n\tbare = false\n\tworktree = ../../../m\n",
        )
        .expect("write");
        fs::create_dir_all(s.0.join("super/m")).expect("mkdir");
        fs::write(s.0.join("super/m/.git"), "gitdir: ../.git/modules/m\n").expect("write");
        let wt = discover(&s.0.join("super/m"), None).expect("ok");
        assert_eq!(wt.root, s.0.join("super/m"));
        assert_eq!(
            wt.git,
            GitLayout::Linked {
                git_dir: s.0.join("super/.git/modules/m"),
                common_dir: None
            }
        );
    }

    /// A linked worktree `wt` of the repository `main` (as `git worktree add` lays it out),
    /// with `commondir` and `gitdir` as given.
    fn linked(s: &Scratch, commondir: &str, gitdir: &str) -> PathBuf {
        let g = s.0.join("main/.git/worktrees/wt");
        fs::create_dir_all(&g).expect("mkdir");
        fs::write(g.join("commondir"), commondir).expect("write");
        fs::write(g.join("gitdir"), gitdir).expect("write");
        fs::create_dir_all(s.0.join("wt")).expect("mkdir");
        fs::write(s.0.join("wt/.git"), format!("gitdir: {}\n", g.display())).expect("write");
        s.0.join("wt")
    }

    fn refused(dir: &Path) -> String {
        match discover(dir, None) {
            Err(e @ WorktreeError::BadGitFile { .. }) => e.to_string(),
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    fn relative_back_pointer_is_accepted() {
        let s = Scratch::new("relative");
        let wt = linked(&s, "../..\n", "../../../../wt/.git\n");
        assert!(matches!(
            discover(&wt, None).expect("ok").git,
            GitLayout::Linked { .. }
        ));
    }

    #[test]
    fn git_file_naming_another_directory_is_refused() {
        // The agent's rewrite of its own `.git`: each target lacks the layout that names
        // this worktree back.
        let s = Scratch::new("forged");
        let wt = linked(
            &s,
            "../..\n",
            &format!("{}\n", s.0.join("wt/.git").display()),
        );
        fs::create_dir_all(s.0.join("elsewhere")).expect("mkdir");
        for target in [
            "/root",
            "/etc",
            "/usr",
            "/",
            s.0.to_str().expect("utf8"),
            s.0.join("elsewhere").to_str().expect("utf8"),
            s.0.join("main/.git").to_str().expect("utf8"),
            s.0.join("main").to_str().expect("utf8"),
        ] {
            if !Path::new(target).exists() {
                continue;
            }
            fs::write(wt.join(".git"), format!("gitdir: {target}\n")).expect("write");
            let e = refused(&wt);
            assert!(e.contains(".git"), "{target}: {e}");
        }
    }

    #[test]
    fn back_pointer_and_commondir_must_agree() {
        let s = Scratch::new("backptr");
        // gitdir names another worktree.
        let wt = linked(&s, "../..\n", "/somewhere/else/.git\n");
        assert!(refused(&wt).contains("not this worktree's .git back"));
        // commondir names another repository than the one holding worktrees/<id>.
        let s = Scratch::new("commondir");
        fs::create_dir_all(s.0.join("other/.git")).expect("mkdir");
        let back = format!("{}\n", s.0.join("wt/.git").display());
        let wt = linked(
            &s,
            &format!("{}\n", s.0.join("other/.git").display()),
            &back,
        );
        assert!(refused(&wt).contains("worktrees/<id>"));
        // commondir naming the worktree's ancestor (a forged git dir inside the worktree).
        let s = Scratch::new("ancestor");
        fs::create_dir_all(s.0.join("wt/worktrees/x")).expect("mkdir");
        fs::write(s.0.join("wt/worktrees/x/commondir"), "../..\n").expect("write");
        fs::write(
            s.0.join("wt/worktrees/x/gitdir"),
            format!("{}\n", s.0.join("wt/.git").display()),
        )
        .expect("write");
        fs::write(s.0.join("wt/.git"), "gitdir: worktrees/x\n").expect("write");
        assert!(refused(&s.0.join("wt")).contains("the worktree or one of its ancestors"));
    }

    #[test]
    fn git_file_is_read_whole_as_git_reads_it() {
        let s = Scratch::new("stealth");
        let back = format!("{}\n", s.0.join("wt/.git").display());
        let wt = linked(&s, "../..\n", &back);
        let real = s.0.join("main/.git/worktrees/wt");
        // First line names a link into the target, git's real path on a later line.
        fs::write(
            wt.join(".git"),
            format!("gitdir: /root\ngitdir: {}\n", real.display()),
        )
        .expect("write");
        assert!(refused(&wt).contains("more than one line"));
        fs::write(wt.join(".git"), format!("gitdir:{}\n", real.display())).expect("write");
        assert!(refused(&wt).contains("gitdir: "));
        fs::write(wt.join(".git"), format!("gitdir: {}\r\n", real.display())).expect("write");
        assert!(discover(&wt, None).is_ok());
    }

    #[test]
    fn fifo_and_oversized_git_files_do_not_block() {
        let s = Scratch::new("fifo");
        let status = std::process::Command::new("mkfifo")
            .arg(s.0.join(".git"))
            .status()
            .expect("mkfifo");
        assert!(status.success());
        let t = std::time::Instant::now();
        assert!(refused(&s.0).contains("not a regular file"));
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        fs::remove_file(s.0.join(".git")).expect("rm");
        fs::write(s.0.join(".git"), vec![b'x'; 100_000]).expect("write");
        assert!(refused(&s.0).contains("larger than"));
    }

    #[test]
    fn commondir_fifo_does_not_block() {
        let s = Scratch::new("fifo-common");
        let back = format!("{}\n", s.0.join("wt/.git").display());
        let wt = linked(&s, "../..\n", &back);
        let commondir = s.0.join("main/.git/worktrees/wt/commondir");
        fs::remove_file(&commondir).expect("rm");
        let status = std::process::Command::new("mkfifo")
            .arg(&commondir)
            .status()
            .expect("mkfifo");
        assert!(status.success());
        assert!(refused(&wt).contains("not a regular file"));
    }

    #[test]
    fn a_linked_worktree_that_lost_its_git_file_is_not_widened() {
        let s = Scratch::new("lost");
        fs::create_dir_all(s.0.join("main/.git/worktrees/n")).expect("mkdir");
        let nested = s.0.join("main/.claude/worktrees/n");
        fs::create_dir_all(nested.join("src")).expect("mkdir");
        fs::write(
            s.0.join("main/.git/worktrees/n/gitdir"),
            format!("{}\n", nested.join(".git").display()),
        )
        .expect("write");
        for start in [nested.clone(), nested.join("src")] {
            match discover(&start, None) {
                Err(WorktreeError::LostGitFile { lost, .. }) => assert_eq!(lost, nested),
                other => panic!("not refused: {other:?}"),
            }
        }
        // Started at the top: the checkout itself.
        assert!(discover(&s.0.join("main"), None).is_ok());
        // The agent also deletes, or points elsewhere, its entry's `gitdir` (its own git
        // dir is writable to it): an entry that does not check out refuses any climb.
        fs::create_dir_all(s.0.join("main/docs")).expect("mkdir");
        for gitdir in [None, Some("/elsewhere/.git\n")] {
            let file = s.0.join("main/.git/worktrees/n/gitdir");
            match gitdir {
                None => fs::remove_file(&file).expect("rm"),
                Some(text) => fs::write(&file, text).expect("write"),
            }
            for start in [nested.clone(), s.0.join("main/docs")] {
                assert!(
                    matches!(
                        discover(&start, None),
                        Err(WorktreeError::BrokenWorktreeEntry { .. })
                    ),
                    "{gitdir:?} {}",
                    start.display()
                );
            }
        }
        // Repaired (the entry and the worktree name each other): a directory that is no
        // worktree gets the checkout.
        fs::write(
            s.0.join("main/.git/worktrees/n/gitdir"),
            format!("{}\n", nested.join(".git").display()),
        )
        .expect("write");
        fs::write(nested.join(".git"), "gitdir: ../../../.git/worktrees/n\n").expect("write");
        fs::write(s.0.join("main/.git/worktrees/n/commondir"), "../..\n").expect("write");
        assert_eq!(
            discover(&s.0.join("main/docs"), None).expect("ok").root,
            s.0.join("main")
        );
    }

    #[test]
    fn a_submodule_that_lost_its_git_file_is_not_widened() {
        let s = Scratch::new("lostsub");
        fs::create_dir_all(s.0.join("super/.git")).expect("mkdir");
        fs::create_dir_all(s.0.join("super/libs/m")).expect("mkdir");
        fs::write(
            s.0.join("super/.gitmodules"),
            "[submodule \"m\"]\n\tpath = libs/m\n\turl = x\n",
        )
        .expect("write");
        assert!(matches!(
            discover(&s.0.join("super/libs/m"), None),
            Err(WorktreeError::LostGitFile { .. })
        ));
    }

    #[test]
    fn submodule_git_dir_must_be_under_modules_and_name_it_back() {
        let s = Scratch::new("subforge");
        fs::create_dir_all(s.0.join("super/.git/modules/m")).expect("mkdir");
        fs::create_dir_all(s.0.join("super/.git/modules/o")).expect("mkdir");
        fs::write(
            s.0.join("super/.git/modules/o/config"),
            "[core]\n\tworktree = ../../../o\n",
        )
        .expect("write");
        fs::create_dir_all(s.0.join("super/m")).expect("mkdir");
        fs::create_dir_all(s.0.join("super/o")).expect("mkdir");
        // A sibling submodule's git dir: core.worktree names the sibling.
        fs::write(s.0.join("super/m/.git"), "gitdir: ../.git/modules/o\n").expect("write");
        assert!(refused(&s.0.join("super/m")).contains("core.worktree"));
        // The superproject's own git dir, with no commondir: not under modules/.
        fs::write(s.0.join("super/m/.git"), "gitdir: ../.git\n").expect("write");
        assert!(refused(&s.0.join("super/m")).contains("modules/"));
        // No superproject at all.
        fs::create_dir_all(s.0.join("lone/g")).expect("mkdir");
        fs::write(s.0.join("lone/.git"), "gitdir: g\n").expect("write");
        assert!(refused(&s.0.join("lone")).contains("superproject"));
    }

    #[test]
    fn broken_git_file_is_an_error() {
        let s = Scratch::new("broken");
        fs::write(s.0.join(".git"), "nonsense\n").expect("write");
        assert!(matches!(
            discover(&s.0, None),
            Err(WorktreeError::BadGitFile { .. })
        ));
    }

    #[test]
    fn override_wins_and_symlinks_resolve() {
        let s = Scratch::new("override");
        fs::create_dir_all(s.0.join("real")).expect("mkdir");
        std::os::unix::fs::symlink(s.0.join("real"), s.0.join("link")).expect("symlink");
        let wt = discover(Path::new("/"), Some(&s.0.join("link"))).expect("ok");
        assert_eq!(wt.root, s.0.join("real"));
    }

    #[test]
    fn system_directories_are_refused() {
        for d in ["/", "/usr", "/etc", "/proc", "/sys", "/dev", "/usr/share"] {
            assert!(
                matches!(
                    discover(Path::new(d), None),
                    Err(WorktreeError::SystemDirectory { .. })
                ),
                "{d} accepted"
            );
        }
        assert!(!is_system_directory(Path::new("/home/u/project")));
        assert!(!is_system_directory(Path::new("/var/tmp/x")));
        assert!(is_system_directory(Path::new("/home")));
    }
}
