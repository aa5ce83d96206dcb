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
    let (root, dotgit) = if override_dir.is_some() {
        // An explicit worktree is taken as the top level; only its own `.git` counts.
        let dotgit = real.join(".git");
        let meta = dotgit.symlink_metadata().ok();
        (real, meta.map(|m| (dotgit, m)))
    } else {
        match find_dotgit(&real) {
            Some((top, dotgit)) => (top, Some(dotgit)),
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
    Ok(Worktree { root, git })
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

/// `lmeta`: `dotgit`'s `lstat`, from finding it.
fn layout(
    dotgit: &Path,
    lmeta: std::fs::Metadata,
    resolver: &mut Resolver,
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
    let meta = if lmeta.file_type().is_symlink() {
        std::fs::metadata(dotgit).map_err(|e| bad(e.to_string()))?
    } else {
        lmeta
    };
    if meta.is_dir() {
        let git_dir = resolver
            .canonicalize(dotgit)
            .map_err(|e| bad(e.to_string()))?;
        return Ok(GitLayout::Main { git_dir });
    }
    let text = read_small(dotgit).map_err(|e| bad(e.to_string()))?;
    let target = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| bad("its first line is not `gitdir: <path>`".into()))?;
    let base = dotgit.parent().unwrap_or(Path::new("/"));
    let git_dir = resolver
        .canonicalize(&base.join(target))
        .map_err(|e| bad(format!("its git dir {target}: {e}")))?;
    let common_dir = match read_small(&git_dir.join("commondir")) {
        Ok(c) => {
            let c = c.trim();
            let resolved = resolver
                .canonicalize(&git_dir.join(c))
                .map_err(|e| bad(format!("commondir {c}: {e}")))?;
            Some(resolved)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(bad(format!("commondir: {e}"))),
    };
    Ok(GitLayout::Linked {
        git_dir,
        common_dir,
    })
}

/// A small text file (`.git`, `commondir`: one line).
fn read_small(path: &Path) -> io::Result<String> {
    crate::read_text(&mut std::fs::File::open(path)?, 256)
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
