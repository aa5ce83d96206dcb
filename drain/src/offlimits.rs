//! What no job may be granted: the drain's own state. Not the spool (other jobs' files,
//! results and logs; a job that could write `queue/` would submit jobs of its own, which
//! run as the daemon's uid with variables from its environment), not the configuration
//! the daemon read, not its home, not its executable (it starts every job's runner).
//!
//! Every job's policy is built with these as [`OffLimits`], on top of
//! [`OffLimits::defaults`] (`[drain] spool` and the system configuration): a grant on,
//! above or below one of them refuses the job whole, whatever asked for the grant (its
//! worktree, its `.git` file, the configuration). At start and on SIGHUP the daemon builds
//! the policy of a job in each worktree root against the same list ([`check_roots`]), so a
//! spool in `/tmp` or in a root stops the daemon instead of failing every job.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use landwall::config::Config;
use landwall::policy::{self, Access, Inputs, OffLimits, PolicyError};
use landwall::worktree::{GitLayout, Worktree};

/// The daemon's own state, as the daemon and each job's runner see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Own {
    /// The spool the daemon serves (`--spool`, else `[drain] spool`, else the default).
    pub spool: PathBuf,
    /// The configuration file it read (`--config`).
    pub config_file: PathBuf,
    /// Its home: `$HOME` and the home of its uid in the user database.
    pub homes: Vec<PathBuf>,
    /// `landwall-drain` itself.
    pub exe: Option<PathBuf>,
}

const SPOOL: &str = "the drain's spool";
const CONFIG: &str = "the configuration file landwall-drain read";
const HOME: &str = "landwall-drain's home";
const EXE: &str = "landwall-drain's executable";

impl Own {
    /// The paths every job's policy keeps out: the spool unseen (read-only refused), the
    /// rest unchanged (read-write refused).
    pub fn off_limits(&self) -> Vec<OffLimits> {
        let mut v = vec![
            OffLimits {
                path: self.spool.clone(),
                what: SPOOL.into(),
                access: Access::ReadOnly,
            },
            OffLimits {
                path: self.config_file.clone(),
                what: CONFIG.into(),
                access: Access::ReadWrite,
            },
        ];
        v.extend(self.homes.iter().map(|h| OffLimits {
            path: h.clone(),
            what: HOME.into(),
            access: Access::ReadWrite,
        }));
        v.extend(self.exe.iter().map(|e| OffLimits {
            path: e.clone(),
            what: EXE.into(),
            access: Access::ReadWrite,
        }));
        v
    }
}

/// The daemon's homes: `$HOME` (what its programs write to) and its uid's home in the user
/// database (what `~` means to its shells when `$HOME` is unset, as it is for a systemd
/// service without `User=`). `/` is left out: it is a placeholder, not a home, and keeping
/// every write out of it would refuse every job.
pub fn homes(home_var: Option<&OsStr>, uid: u32) -> Vec<PathBuf> {
    let from_db = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.dir);
    let mut v: Vec<PathBuf> = home_var
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .into_iter()
        .chain(from_db)
        .filter(|h| h.is_absolute() && h != Path::new("/"))
        .collect();
    v.dedup();
    v
}

/// What to do when `what` is within every job's reach.
fn fix_for(what: &str) -> &'static str {
    match what {
        HOME => "run landwall-drain with a HOME (and a user whose home is) outside /tmp, /dev/shm, the worktree roots and the configured `writable` and `read_only` paths",
        EXE => "install landwall-drain outside /tmp, /dev/shm, the worktree roots and the configured `writable` paths",
        CONFIG => "keep the configuration file outside /tmp, /dev/shm, the worktree roots and the configured `writable` paths",
        _ => "move the spool (`--spool`, or `spool` in [drain]) out of /tmp, /dev/shm, the worktree roots and the configured `writable` and `read_only` paths, or those paths away from it",
    }
}

/// Refuses to serve when the drain's state lies within what every job in some worktree
/// root would be granted: the spool in `/tmp` or `/dev/shm`, in or above a root, under a
/// configured `writable` or `read_only` path, and likewise the configuration file, the
/// daemon's home and executable. Each such job would be refused anyway (its runner builds
/// its policy with the same [`OffLimits`]); this says it once, at start, with the fix.
///
/// How: by building the policy a job would get, with a root as its worktree (a job's
/// worktree lies below a root, so this is the widest a job in that root can have) and no
/// `$HOME` (a job gets none, see the runner), for the default agent and each configured
/// one. Not by checking the spool against a list of places: the policy also refuses
/// read-only grants over the spool (`/opt`, `/etc`, the configured `read_only`), and which
/// grants every job gets is decided in the policy code; asking it cannot drift from it.
/// With no roots, `/tmp` stands in for the worktree (every policy grants it read-write).
///
/// Other errors in these policies (a configured path that is missing) are left to each
/// job to report, as before: only an off-limits path stops the daemon.
pub fn check_roots(
    config: &Config,
    roots: &[PathBuf],
    own: &Own,
    is_root: bool,
) -> Result<(), String> {
    let mut config = config.clone();
    config.off_limits.extend(own.off_limits());
    let tmp = [PathBuf::from("/tmp")];
    let worktrees = if roots.is_empty() { &tmp[..] } else { roots };
    let mut agents: Vec<&str> = vec![landwall::spool::DEFAULT_AGENT];
    agents.extend(config.agents.keys().map(String::as_str));
    agents.sort_unstable();
    agents.dedup();
    for root in worktrees {
        for agent in &agents {
            let built = policy::build(Inputs {
                agent,
                worktree: Worktree {
                    root: root.clone(),
                    git: GitLayout::None,
                },
                home: None,
                real_agent: None,
                config: &config,
                is_root,
                link_cache: None,
            });
            match built {
                Ok(_) => {}
                Err(PolicyError::OffLimits {
                    rule,
                    access,
                    reason,
                    what,
                    off,
                    ..
                }) => {
                    let grant = if reason == "worktree" {
                        format!(
                            "the worktree root {} ({access}: every job's worktree lies below it)",
                            rule.display()
                        )
                    } else {
                        format!("{} ({access}: {reason})", rule.display())
                    };
                    return Err(format!(
                        "{what} {} is within reach of every job: a job's policy would grant {grant}, so every job would be refused; {}",
                        off.display(),
                        fix_for(&what)
                    ));
                }
                Err(e) => log::debug!(
                    "the policy of a job in {} (agent {agent}): {e}",
                    root.display()
                ),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        // Not under /tmp: every job may write there, which is what is tested.
        let p = PathBuf::from(format!(
            "/var/tmp/lw-offlimits-{tag}-{}",
            std::process::id()
        ));
        let _ignored = std::fs::remove_dir_all(&p);
        for d in ["spool", "roots/a", "home"] {
            std::fs::create_dir_all(p.join(d)).expect("mkdir");
        }
        std::fs::canonicalize(&p).expect("canon")
    }

    fn own(dir: &Path, spool: PathBuf) -> Own {
        Own {
            spool,
            config_file: dir.join("landwall.toml"),
            homes: vec![dir.join("home")],
            exe: Some(PathBuf::from("/usr/bin/landwall-drain")),
        }
    }

    #[test]
    fn homes_skip_root_and_empty() {
        assert!(homes(Some(OsStr::new("/")), u32::MAX - 1).is_empty());
        assert!(homes(Some(OsStr::new("")), u32::MAX - 1).is_empty());
        assert!(homes(Some(OsStr::new("relative")), u32::MAX - 1).is_empty());
        assert_eq!(
            homes(Some(OsStr::new("/srv/h")), u32::MAX - 1),
            [PathBuf::from("/srv/h")]
        );
    }

    #[test]
    fn the_spool_is_kept_unseen_the_rest_unchanged() {
        let o = own(Path::new("/x"), PathBuf::from("/x/spool")).off_limits();
        let find = |p: &str| o.iter().find(|l| l.path == Path::new(p)).map(|l| l.access);
        assert_eq!(find("/x/spool"), Some(Access::ReadOnly));
        assert_eq!(find("/x/landwall.toml"), Some(Access::ReadWrite));
        assert_eq!(find("/x/home"), Some(Access::ReadWrite));
        assert_eq!(find("/usr/bin/landwall-drain"), Some(Access::ReadWrite));
    }

    #[test]
    fn a_spool_apart_from_every_grant_passes() {
        let dir = scratch("apart");
        let roots = [dir.join("roots/a")];
        check_roots(
            &Config::default(),
            &roots,
            &own(&dir, dir.join("spool")),
            false,
        )
        .expect("apart");
        check_roots(
            &Config::default(),
            &[],
            &own(&dir, dir.join("spool")),
            false,
        )
        .expect("no roots");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_spool_every_job_reaches_is_refused_with_the_fix() {
        let dir = scratch("reach");
        let roots = [dir.join("roots/a")];
        for (spool, grant) in [
            (PathBuf::from("/tmp/lw-spool"), "/tmp"),
            (PathBuf::from("/dev/shm/lw-spool"), "/dev/shm"),
            (dir.join("roots/a/spool"), "the worktree root"),
            (dir.join("roots"), "the worktree root"),
            (PathBuf::from("/opt/lw-spool"), "/opt"),
        ] {
            if !Path::new(grant).exists() && grant.starts_with('/') {
                continue;
            }
            for r in [&roots[..], &[]] {
                if r.is_empty() && !grant.starts_with('/') {
                    continue;
                }
                let e = check_roots(&Config::default(), r, &own(&dir, spool.clone()), false)
                    .expect_err(grant);
                assert!(e.contains(&spool.display().to_string()), "{e}");
                assert!(e.contains(grant), "{e}");
                assert!(e.contains("move the spool"), "{e}");
                assert!(!e.contains('\n'), "{e}");
            }
        }
        // A configured writable path over the spool, and the home under a root.
        let mut config = Config::default();
        config.writable.push(dir.clone());
        let e = check_roots(&config, &roots, &own(&dir, dir.join("spool")), false)
            .expect_err("writable");
        assert!(e.contains("`writable` in the configuration"), "{e}");
        let mut o = own(&dir, dir.join("spool"));
        o.homes = vec![dir.join("roots/a/home")];
        let e = check_roots(&Config::default(), &roots, &o, false).expect_err("home");
        assert!(e.contains(HOME) && e.contains("HOME"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
