//! The daemon's own, opt-in wall (`LANDWALL_DRAIN_SANDBOX=1`).
//!
//! Built from the configuration only, before any job file is read, so nothing in a job can
//! widen it. It is the shim's policy ([`policy::build`]) with the spool in the place of the
//! worktree and without `$HOME`: writable are the spool, the worktree roots, `/tmp`, `/dev`
//! and the configured `writable` paths (global and per agent, since every job runs inside
//! this wall); read-only are the system roots, the daemon's own directory (it starts itself
//! as each job's runner), the configured `read_only` paths and agents, and the
//! configuration file. Jobs stack their own, narrower wall on top.
//!
//! The spool is the one grant of this wall that no job's may have: every policy keeps the
//! spool off limits ([`OffLimits`]), this one included for every grant but the spool's
//! own. So the policy is built for `/tmp` in the place of the worktree (granted read-write
//! by every policy anyway, so it adds nothing) with the spool off limits, which proves that
//! no other grant reaches it, and the spool's rule is added after that check.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use landwall::config::Config;
use landwall::launch::Kernel;
use landwall::policy::{self, Access, Inputs, OffLimits, Policy, Rule};
use landwall::wall::Enforced;
use landwall::worktree::{GitLayout, Worktree};
use landwall::Error;

/// The name of the opt-in flag.
pub const FLAG: &str = "LANDWALL_DRAIN_SANDBOX";

/// Reads the flag: `Ok(true)` for `1`, `Ok(false)` for `0` or unset; anything else is an
/// error (a typo must not mean "no wall").
pub fn flag(value: Option<&OsStr>) -> Result<bool, String> {
    match value.map(|v| v.as_encoded_bytes()) {
        None | Some(b"0") => Ok(false),
        Some(b"1") => Ok(true),
        Some(other) => Err(format!(
            "{FLAG}={:?} is not valid: set it to 1 (wall the daemon in) or 0 / unset it (no wall)",
            String::from_utf8_lossy(other)
        )),
    }
}

/// What the daemon's wall is built from.
#[derive(Debug, Clone)]
pub struct Inputs2<'a> {
    /// The validated configuration.
    pub config: &'a Config,
    /// The spool (must exist: nothing is created before the wall is up).
    pub spool: &'a Path,
    /// The worktree roots, real paths.
    pub roots: &'a [PathBuf],
    /// The running daemon executable.
    pub exe: &'a Path,
    /// The configuration file, if it exists.
    pub config_file: Option<&'a Path>,
    /// Whether the daemon runs as root (root gets the shim's extra denials).
    pub is_root: bool,
    /// The cgroup the daemon makes its jobs' cgroups in, if it has one.
    pub cgroup: Option<&'a Path>,
}

/// Builds the daemon's policy. A missing spool or root is a configuration error.
pub fn policy(inputs: Inputs2<'_>) -> Result<Policy, Error> {
    let spool = std::fs::canonicalize(inputs.spool).map_err(|source| {
        Error::Policy(policy::PolicyError::Required {
            path: inputs.spool.to_path_buf(),
            reason: format!(
                "the spool (with {FLAG}=1 the daemon walls itself in before it may create anything, so the spool directory must exist)"
            ),
            source,
        })
    })?;
    let mut config = inputs.config.clone();
    config.writable.extend(inputs.roots.iter().cloned());
    for agent in inputs.config.agents.values() {
        config.writable.extend(agent.writable.iter().cloned());
        config.read_only.extend(agent.read_only.iter().cloned());
        if let Some(real) = &agent.real {
            config.read_only.extend(landwall::agent::install_dirs(
                real,
                &mut landwall::realpath::Resolver::default(),
            ));
        }
    }
    if let Some(file) = inputs.config_file {
        config.read_only.push(file.to_path_buf());
    }
    config.off_limits.push(OffLimits {
        path: spool.clone(),
        what: "the drain's spool".into(),
        access: Access::ReadOnly,
    });
    // The daemon's own wall has no worktree to protect (its `/tmp` stands in for one).
    config.protect = landwall::protect::DEFAULTS
        .iter()
        .map(|d| landwall::protect::Change::Remove(d.path.into()))
        .collect();
    let tmp = Path::new("/tmp");
    let mut p = policy::build(Inputs {
        agent: "landwall-drain",
        worktree: Worktree {
            root: tmp.to_path_buf(),
            git: GitLayout::None,
        },
        home: None,
        real_agent: Some(inputs.exe),
        config: &config,
        is_root: inputs.is_root,
        // The daemon walls itself once per start: no cache to keep.
        link_cache: None,
    })?;
    // No grant reaches the spool (checked above): its rule is the only one on it.
    p.rules.push(Rule {
        path: spool.clone(),
        access: Access::ReadWrite,
        is_dir: true,
        reason: "the spool".into(),
    });
    // The jobs' cgroups are made, capped, killed and removed here (a job's own wall does
    // not grant it).
    if let Some(dir) = inputs.cgroup {
        p.rules.push(Rule {
            path: dir.to_path_buf(),
            access: Access::ReadWrite,
            is_dir: true,
            reason: "the jobs' cgroups".into(),
        });
    }
    // The policy's order: strongest grant first, then shortest path.
    p.rules.sort_by(|a, b| {
        b.access
            .cmp(&a.access)
            .then_with(|| a.path.as_os_str().len().cmp(&b.path.as_os_str().len()))
    });
    p.worktree = Worktree {
        root: spool,
        git: GitLayout::None,
    };
    for rule in &mut p.rules {
        if rule.reason == "worktree" && rule.path == tmp {
            rule.reason = "temporary files".into();
        } else if inputs.roots.contains(&rule.path) {
            rule.reason = "`worktree_roots` in [drain]".into();
        } else if rule.reason == "the real agent's install directory" {
            rule.reason = "landwall-drain's own directory (it starts each job's runner)".into();
        }
    }
    Ok(p)
}

/// Walls the calling process in, without exec: capabilities dropped, no_new_privs,
/// single-threaded, Landlock fully enforced, the seccomp filter, and the check from inside.
/// The same steps, in the same order, as the shim's launch up to its `execve()`.
pub fn wall_self<K: Kernel>(kernel: &mut K, policy: &Policy) -> Result<Enforced, Error> {
    kernel.drop_capabilities()?;
    kernel.set_no_new_privs().map_err(Error::NoNewPrivs)?;
    match kernel.thread_count() {
        Ok(1) => {}
        Ok(n) => return Err(Error::Threads(Some(n), None)),
        Err(e) => return Err(Error::Threads(None, Some(e))),
    }
    let enforced = kernel.restrict(policy)?;
    kernel.filter_syscalls(policy, &enforced)?;
    kernel.self_check().map_err(Error::SelfCheck)?;
    Ok(enforced)
}

#[cfg(test)]
mod tests {
    use super::*;
    use landwall::caps::CapsError;
    use landwall::launch::Exec;
    use landwall::policy::Access;
    use landwall::seccomp::SeccompError;
    use landwall::wall::{UnixGuard, WallError};
    use std::io;

    #[test]
    fn the_flag_is_one_zero_or_unset() {
        assert_eq!(flag(None), Ok(false));
        assert_eq!(flag(Some(OsStr::new("0"))), Ok(false));
        assert_eq!(flag(Some(OsStr::new("1"))), Ok(true));
        for bad in ["", "yes", "true", "01", " 1", "on"] {
            let e = flag(Some(OsStr::new(bad))).expect_err(bad);
            assert!(e.contains(FLAG), "{e}");
        }
    }

    struct Recorder {
        steps: Vec<&'static str>,
        fail_at: Option<&'static str>,
    }

    impl Recorder {
        fn step(&mut self, name: &'static str) -> bool {
            self.steps.push(name);
            self.fail_at == Some(name)
        }
    }

    impl Kernel for Recorder {
        fn drop_capabilities(&mut self) -> Result<(), CapsError> {
            if self.step("caps") {
                return Err(CapsError::StillHeld { set: "permitted" });
            }
            Ok(())
        }
        fn set_no_new_privs(&mut self) -> io::Result<()> {
            if self.step("nnp") {
                return Err(io::Error::other("nnp"));
            }
            Ok(())
        }
        // The shim's quarantine steps: never taken by the daemon's own wall.
        fn watch(
            &mut self,
            _: Option<&landwall::policy::Quarantine>,
            _: &landwall::protect::Protection,
            _: u32,
        ) -> io::Result<()> {
            self.steps.push("watch");
            Ok(())
        }
        fn private_namespace(
            &mut self,
            _: Option<&landwall::policy::Quarantine>,
            _: &[landwall::protect::Held],
            _: bool,
            _: Option<u64>,
        ) -> Result<bool, landwall::ns::NsError> {
            self.steps.push("namespace");
            Ok(false)
        }
        fn note(&mut self, _: &str) {
            self.steps.push("note");
        }
        fn thread_count(&mut self) -> io::Result<usize> {
            self.step("threads");
            Ok(if self.fail_at == Some("threads") {
                2
            } else {
                1
            })
        }
        fn restrict(&mut self, _: &Policy) -> Result<Enforced, WallError> {
            if self.step("landlock") {
                return Err(WallError::AbiTooLow { have: 2, need: 3 });
            }
            Ok(Enforced {
                abi: 7,
                audit_new_exec: true,
                scoped: true,
                unix: UnixGuard::Seccomp,
            })
        }
        fn filter_syscalls(&mut self, _: &Policy, _: &Enforced) -> Result<(), SeccompError> {
            if self.step("seccomp") {
                return Err(SeccompError::Install(io::Error::other("test")));
            }
            Ok(())
        }
        fn self_check(&mut self) -> Result<(), String> {
            if self.step("selfcheck") {
                return Err("test".into());
            }
            Ok(())
        }
        fn exec(&mut self, _: &Exec) -> io::Error {
            self.steps.push("exec");
            io::Error::from_raw_os_error(libc::ENOENT)
        }
    }

    fn scratch(tag: &str) -> PathBuf {
        // Not under /tmp: a spool there is refused (every job may write /tmp).
        let p = PathBuf::from(format!("/var/tmp/lw-selfwall-{tag}-{}", std::process::id()));
        let _ignored = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join("spool")).expect("mkdir");
        std::fs::create_dir_all(p.join("roots/a")).expect("mkdir");
        std::fs::canonicalize(&p).expect("canon")
    }

    fn build(dir: &Path) -> Result<Policy, Error> {
        build_with(dir, &Config::default())
    }

    fn build_with(dir: &Path, config: &Config) -> Result<Policy, Error> {
        let roots = [dir.join("roots/a")];
        policy(Inputs2 {
            config,
            spool: &dir.join("spool"),
            roots: &roots,
            exe: Path::new("/usr/bin/true"),
            config_file: None,
            is_root: false,
            cgroup: None,
        })
    }

    #[test]
    fn steps_run_in_order_and_never_exec() {
        let dir = scratch("order");
        let policy = build(&dir).expect("policy");
        let mut k = Recorder {
            steps: vec![],
            fail_at: None,
        };
        wall_self(&mut k, &policy).expect("walled");
        assert_eq!(
            k.steps,
            ["caps", "nnp", "threads", "landlock", "seccomp", "selfcheck"]
        );
        for (fail, last) in [
            ("caps", "caps"),
            ("nnp", "nnp"),
            ("threads", "threads"),
            ("landlock", "landlock"),
            ("seccomp", "seccomp"),
            ("selfcheck", "selfcheck"),
        ] {
            let mut k = Recorder {
                steps: vec![],
                fail_at: Some(fail),
            };
            let e = wall_self(&mut k, &policy).expect_err(fail);
            assert_eq!(k.steps.last(), Some(&last), "{fail}");
            assert_eq!(e.exit_code(), landwall::exit::WALL, "{fail}: {e}");
        }
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_spool_and_roots_are_writable_the_rest_read_only_or_denied() {
        let dir = scratch("grants");
        let p = build(&dir).expect("policy");
        let access = |path: PathBuf| p.decide(&path).rule.map(|r| r.access);
        assert_eq!(access(dir.join("spool/queue/x")), Some(Access::ReadWrite));
        assert_eq!(access(dir.join("roots/a/wt/f")), Some(Access::ReadWrite));
        assert_eq!(access(PathBuf::from("/usr/bin/sh")), Some(Access::ReadOnly));
        assert_eq!(access(PathBuf::from("/root/.ssh")), None);
        assert_eq!(access(PathBuf::from("/var/lib/x")), None);
        assert_eq!(access(PathBuf::from("/tmp/x")), Some(Access::ReadWrite));
        let spool = dir.join("spool");
        let on_spool: Vec<&Rule> = p.rules.iter().filter(|r| r.path == spool).collect();
        assert_eq!(on_spool.len(), 1, "{:?}", p.rules);
        assert_eq!(
            (on_spool[0].access, on_spool[0].reason.as_ref()),
            (Access::ReadWrite, "the spool")
        );
        assert!(
            p.rules.iter().all(|r| r.reason != "worktree"),
            "{:?}",
            p.rules
        );
        assert!(
            p.rules.windows(2).all(|w| w[0].access >= w[1].access),
            "{:?}",
            p.rules
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn the_configured_spool_is_granted_to_the_daemon_and_nothing_else_reaches_it() {
        // `[drain] spool` is off limits to every policy; the daemon's own must still grant
        // it (the production set-up: no --spool, the spool from the configuration).
        let dir = scratch("configured");
        let mut config = Config::default();
        config.drain.spool = Some(dir.join("spool"));
        let p = build_with(&dir, &config).expect("policy");
        assert_eq!(
            p.decide(&dir.join("spool/queue/x")).rule.map(|r| r.access),
            Some(Access::ReadWrite)
        );
        // A configured grant that would reach it is refused whole, with the spool named.
        config.read_only.push(dir.clone());
        let e = build_with(&dir, &config).expect_err("read_only over the spool");
        assert_eq!(e.exit_code(), landwall::exit::CONFIG, "{e}");
        assert!(e.to_string().contains("spool"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_missing_spool_is_a_configuration_error() {
        let dir = scratch("missing");
        std::fs::remove_dir(dir.join("spool")).expect("rmdir");
        let e = build(&dir).expect_err("missing spool");
        assert_eq!(e.exit_code(), landwall::exit::CONFIG);
        assert!(e.to_string().contains("spool"), "{e}");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
