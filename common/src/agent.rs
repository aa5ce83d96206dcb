//! Finding the real agent the shim stands in for.
//!
//! Order: an explicit `real` path in the configuration (an explicit setting must never be
//! overridden by whatever happens to be on PATH); else `<name>-real` on PATH; else the next
//! `<name>` on PATH that is not this very executable, compared by device and inode so that
//! symlinks and hardlinks to the shim are skipped and the shim never execs itself.
//! Relative and empty PATH entries are ignored: the cwd is the agent's workspace, not a
//! place to pick binaries from.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::realpath::Resolver;

/// Device and inode of a file: what "the same executable" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl FileId {
    /// The id of the file `path` resolves to.
    pub fn of(path: &Path) -> std::io::Result<FileId> {
        let m = std::fs::metadata(path)?;
        Ok(FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// Why no real agent was found.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configured path is not an executable file.
    #[error("the configured real `{name}` ({}, {at}) is not an executable file; fix `real` in [agents.{name}]", path.display())]
    ConfiguredMissing {
        /// Agent name.
        name: String,
        /// The configured path.
        path: PathBuf,
        /// Where it was configured (key, file and line), filled in by the caller.
        at: String,
    },
    /// Nothing suitable on PATH.
    #[error("no real `{name}` found: searched PATH ({searched}) for `{name}-real` and for a `{name}` that is not landwall itself; install the agent, or set `real` in [agents.{name}]")]
    NotFound {
        /// Agent name.
        name: String,
        /// The PATH directories searched, `:`-joined.
        searched: String,
    },
}

/// How the real agent was found (for `doctor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// `real` in the configuration.
    Config,
    /// `<name>-real` on PATH.
    RealSuffix,
    /// The next `<name>` on PATH.
    NextOnPath,
}

fn is_executable_file(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    (m.is_file() && m.permissions().mode() & 0o111 != 0).then_some(FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// Finds the real agent `name`. `me` is the running shim's file id.
pub fn find_real(
    name: &str,
    path_var: Option<&OsStr>,
    me: FileId,
    configured: Option<&Path>,
) -> Result<(PathBuf, Found), AgentError> {
    if let Some(p) = configured {
        return match is_executable_file(p) {
            Some(id) if id != me => Ok((p.to_path_buf(), Found::Config)),
            _ => Err(AgentError::ConfiguredMissing {
                name: name.to_string(),
                path: p.to_path_buf(),
                at: format!("`[agents.{name}] real` in the configuration"),
            }),
        };
    }
    let real_name = format!("{name}-real");
    let mut next: Option<PathBuf> = None;
    let dirs: Vec<PathBuf> = path_var
        .map(|v| {
            std::env::split_paths(v)
                .filter(|d| d.is_absolute())
                .collect()
        })
        .unwrap_or_default();
    for dir in &dirs {
        let suffixed = dir.join(&real_name);
        if is_executable_file(&suffixed).is_some_and(|id| id != me) {
            return Ok((suffixed, Found::RealSuffix));
        }
        if next.is_none() {
            let plain = dir.join(name);
            if is_executable_file(&plain).is_some_and(|id| id != me) {
                next = Some(plain);
            }
        }
    }
    match next {
        Some(p) => Ok((p, Found::NextOnPath)),
        None => Err(AgentError::NotFound {
            name: name.to_string(),
            searched: dirs
                .iter()
                .map(|d| d.display().to_string())
                .collect::<Vec<_>>()
                .join(":"),
        }),
    }
}

/// The directories the real agent needs to read and execute from, wherever it is installed:
/// the directory of its real path, or for an npm package the `node_modules` directory that
/// holds it, since its native binary or runtime dependencies often sit in sibling packages
/// (`@anthropic-ai/claude-code-linux-x64`, …).
pub fn install_dirs(real: &Path, resolver: &mut Resolver) -> Vec<PathBuf> {
    match resolver.canonicalize(real) {
        Ok(resolved) => install_dirs_of(&resolved),
        Err(_) => Vec::new(),
    }
}

/// [`install_dirs`] of a path already resolved to its real path.
pub fn install_dirs_of(resolved: &Path) -> Vec<PathBuf> {
    let comps: Vec<_> = resolved.components().collect();
    if let Some(i) = comps.iter().position(|c| c.as_os_str() == "node_modules") {
        return vec![comps[..=i].iter().collect()];
    }
    resolved
        .parent()
        .map(Path::to_path_buf)
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Scratch;
    use std::fs;

    impl Scratch {
        fn exe(&self, rel: &str) -> PathBuf {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            fs::write(&p, "#!/bin/sh\n").expect("write");
            fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
            p
        }
    }

    fn path_of(dirs: &[&Path]) -> std::ffi::OsString {
        std::env::join_paths(dirs).expect("join")
    }

    #[test]
    fn real_suffix_wins_over_next_on_path() {
        let s = Scratch::new("suffix");
        let shim = s.exe("shim/claude");
        s.exe("a/claude");
        let real = s.exe("b/claude-real");
        let me = FileId::of(&shim).expect("id");
        let pv = path_of(&[&s.0.join("shim"), &s.0.join("a"), &s.0.join("b")]);
        let (p, how) = find_real("claude", Some(&pv), me, None).expect("found");
        assert_eq!((p, how), (real, Found::RealSuffix));
    }

    #[test]
    fn skips_itself_via_symlink_and_hardlink() {
        let s = Scratch::new("self");
        let shim = s.exe("bin/landwall");
        fs::create_dir_all(s.0.join("s1")).expect("mkdir");
        fs::create_dir_all(s.0.join("s2")).expect("mkdir");
        std::os::unix::fs::symlink(&shim, s.0.join("s1/claude")).expect("symlink");
        fs::hard_link(&shim, s.0.join("s2/claude")).expect("hardlink");
        let real = s.exe("real/claude");
        let me = FileId::of(&shim).expect("id");
        let pv = path_of(&[&s.0.join("s1"), &s.0.join("s2"), &s.0.join("real")]);
        let (p, how) = find_real("claude", Some(&pv), me, None).expect("found");
        assert_eq!((p, how), (real, Found::NextOnPath));
    }

    #[test]
    fn only_itself_is_not_found() {
        let s = Scratch::new("only");
        let shim = s.exe("bin/landwall");
        fs::create_dir_all(s.0.join("s1")).expect("mkdir");
        std::os::unix::fs::symlink(&shim, s.0.join("s1/claude")).expect("symlink");
        let me = FileId::of(&shim).expect("id");
        let pv = path_of(&[&s.0.join("s1")]);
        let e = find_real("claude", Some(&pv), me, None).expect_err("only self");
        assert!(matches!(e, AgentError::NotFound { .. }));
        assert!(e
            .to_string()
            .contains(&s.0.join("s1").display().to_string()));
    }

    #[test]
    fn relative_path_entries_and_non_executables_are_ignored() {
        let s = Scratch::new("rel");
        let shim = s.exe("bin/landwall");
        fs::create_dir_all(s.0.join("plain")).expect("mkdir");
        fs::write(s.0.join("plain/claude"), "not executable").expect("write");
        let me = FileId::of(&shim).expect("id");
        let pv = std::ffi::OsString::from(format!("relative/dir::{}", s.0.join("plain").display()));
        assert!(find_real("claude", Some(&pv), me, None).is_err());
    }

    #[test]
    fn configured_path_wins_and_must_exist() {
        let s = Scratch::new("conf");
        let shim = s.exe("bin/landwall");
        let conf = s.exe("opt/claude");
        s.exe("path/claude-real");
        let me = FileId::of(&shim).expect("id");
        let pv = path_of(&[&s.0.join("path")]);
        let (p, how) = find_real("claude", Some(&pv), me, Some(&conf)).expect("found");
        assert_eq!((p, how), (conf, Found::Config));
        let missing = s.0.join("nope");
        assert!(matches!(
            find_real("claude", Some(&pv), me, Some(&missing)),
            Err(AgentError::ConfiguredMissing { .. })
        ));
        assert!(
            find_real("claude", Some(&pv), me, Some(&shim)).is_err(),
            "configured as itself"
        );
    }

    #[test]
    fn npm_node_modules_is_the_install_dir() {
        let s = Scratch::new("npm");
        let cli = s.exe("lib/node_modules/@anthropic-ai/claude-code/bin/claude.exe");
        fs::create_dir_all(s.0.join("bin")).expect("mkdir");
        std::os::unix::fs::symlink(&cli, s.0.join("bin/claude")).expect("symlink");
        let dirs = install_dirs(&s.0.join("bin/claude"), &mut Resolver::default());
        let root = fs::canonicalize(s.0.join("lib/node_modules")).expect("canon");
        assert_eq!(dirs, vec![root]);
    }
}
