//! The Landlock wall: turn a [`Policy`] into a ruleset and restrict the calling process.
//!
//! Invariants: every filesystem right the running kernel knows is handled (so anything not
//! granted is denied); every rule is added from its path opened with `O_PATH` (a path that
//! cannot be opened is an error, never silently skipped); every system call must succeed
//! (the kernel applies a ruleset exactly as given or refuses it: there is no partial
//! enforcement at this level), and no_new_privs is set. Anything less is an error value, so
//! the caller cannot exec by mistake. The `landlock` crate supplies the access-right
//! constants; the calls themselves are in [`sys`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use landlock::{Access as _, AccessFs, AccessNet, BitFlags, Scope, ABI};

use crate::policy::{Access, Policy, UnixPolicy};
use crate::sys;

/// Why the wall did not go up.
#[derive(Debug, thiserror::Error)]
pub enum WallError {
    /// The kernel has no Landlock at all (not built in, or disabled at boot).
    #[error("this kernel offers no Landlock ({source}); boot a kernel with Landlock enabled (CONFIG_SECURITY_LANDLOCK, `lsm=…,landlock`)")]
    Unavailable {
        /// ENOSYS (not built in) or EOPNOTSUPP (disabled).
        source: io::Error,
    },
    /// The kernel's ABI is below the configured minimum.
    #[error("this kernel offers Landlock ABI {have}, but the policy needs ABI {need} or newer; upgrade the kernel, or lower `min_abi` in the configuration knowing what is then not enforced (see `landwall doctor`)")]
    AbiTooLow {
        /// The kernel's ABI.
        have: u32,
        /// The configured minimum.
        need: u32,
    },
    /// Creating the ruleset failed.
    #[error("creating the Landlock ruleset: {0}")]
    Ruleset(#[source] io::Error),
    /// A rule's path could not be opened.
    #[error("opening {} for its rule: {source}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A rule could not be added.
    #[error("adding the rule for {}: {source}", path.display())]
    Rule {
        /// The path (or `tcp port N`).
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `landlock_restrict_self` failed (E2BIG: 16 layers already stacked).
    #[error("restricting the process: {0}; if it says E2BIG (argument list too long), 16 Landlock layers are already stacked around this process")]
    Restrict(#[source] io::Error),
    /// TCP port rules are configured but the kernel cannot enforce them.
    #[error("the configuration sets TCP port rules ([network]) but this kernel offers Landlock ABI {have}; TCP rules need ABI 4 (Linux 6.7): upgrade the kernel or remove [network]")]
    NetworkUnsupported {
        /// The kernel's ABI.
        have: u32,
    },
    /// `[unix]` names sockets but the kernel cannot grant one socket by path.
    #[error("the configuration names Unix sockets ([unix] sockets) but this kernel offers Landlock ABI {have}; permitting one socket by path needs ABI 9 (Linux 7.1): upgrade the kernel, remove `sockets`, or set `[unix] allow_all = true`, which lets the agent reach every Unix socket (tmux, D-Bus, docker: programs that act for it outside the wall)")]
    UnixUnsupported {
        /// The kernel's ABI.
        have: u32,
    },
    /// no_new_privs could not be set before restricting.
    #[error("setting no_new_privs before restricting: {0}; refusing to run")]
    NoNewPrivs(#[source] io::Error),
}

/// What went up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enforced {
    /// The kernel's Landlock ABI.
    pub abi: u32,
    /// Whether denials after exec are audited (ABI 7).
    pub audit_new_exec: bool,
    /// Whether signals and abstract unix sockets are scoped to the wall (ABI 6).
    pub scoped: bool,
    /// What keeps the agent from path-named Unix sockets outside the wall.
    pub unix: UnixGuard,
}

/// What keeps the agent from the path-named Unix sockets of processes outside the wall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnixGuard {
    /// Landlock (ABI 9, `RESOLVE_UNIX`): sockets outside the wall are refused by path, the
    /// named ones and the agent's own are reachable.
    Landlock,
    /// The seccomp filter: the agent gets no Unix socket to connect with (older kernels).
    Seccomp,
    /// Nothing: `[unix] allow_all`.
    Open,
}

/// The first Landlock ABI that can refuse Unix sockets by path.
pub const RESOLVE_UNIX_ABI: u32 = 9;

/// The running kernel's Landlock ABI.
pub fn kernel_abi() -> Result<u32, WallError> {
    sys::landlock_abi_version().map_err(|source| WallError::Unavailable { source })
}

/// The Landlock rights a grant carries on `abi`.
pub fn rights(access: Access, is_dir: bool, abi: ABI) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    // RESOLVE_UNIX (ABI 9) counts as a write right in the crate's sets; it is granted only
    // on the sockets `[unix]` names, so a writable tree does not open every socket in it.
    let all = all & !BitFlags::from(AccessFs::ResolveUnix);
    let rights = match access {
        Access::ListOnly => BitFlags::from(AccessFs::ReadDir),
        Access::ReadOnly => AccessFs::from_read(abi) & all,
        Access::ReadWrite => all & !BitFlags::from(AccessFs::IoctlDev),
        Access::Device => all,
    };
    if is_dir {
        rights
    } else {
        // A rule on a file can only carry rights that make sense for a file.
        rights & AccessFs::from_file(abi)
    }
}

/// `LANDLOCK_RESTRICT_SELF_LOG_SAME_EXEC_OFF` (ABI 7).
const LOG_SAME_EXEC_OFF: u32 = 1 << 0;
/// `LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON` (ABI 7).
const LOG_NEW_EXEC_ON: u32 = 1 << 1;

/// Restricts the calling thread (the process must be single-threaded) with `policy`.
///
/// Steps, each checked: read the kernel's ABI and compare it with the minimum; create a
/// ruleset handling every filesystem right of that ABI; add each rule from an opened path;
/// ask for audit of denials after exec where ABI 7 offers it; set no_new_privs; restrict.
///
/// The system calls are made directly (see [`sys`]): the kernel refuses any right, scope or
/// flag it does not know, and any rule it cannot apply exactly as asked (rights outside the
/// handled set, directory rights on a file), so a ruleset that was created, filled and
/// applied without an error is fully enforced — there is no best-effort mode to fall into.
pub fn restrict(policy: &Policy) -> Result<Enforced, WallError> {
    restrict_with(
        &policy.rules,
        policy.min_abi,
        &policy.network,
        &policy.unix,
        true,
    )
}

/// [`restrict`] with these rules and no network rules (the watcher's own wall). Signals
/// are not scoped: the watcher ends the agent, in a wall beside its own, when it can no
/// longer watch (found by review: scoped, the kernel refused that kill, and the agent ran
/// on unwatched).
pub fn restrict_rules(rules: &[crate::policy::Rule], min_abi: u32) -> Result<Enforced, WallError> {
    restrict_with(
        rules,
        min_abi,
        &crate::config::Network::default(),
        &UnixPolicy::default(),
        false,
    )
}

fn restrict_with(
    rules: &[crate::policy::Rule],
    min_abi: u32,
    net: &crate::config::Network,
    unix: &UnixPolicy,
    scope_signals: bool,
) -> Result<Enforced, WallError> {
    let have = kernel_abi()?;
    if have < min_abi {
        return Err(WallError::AbiTooLow {
            have,
            need: min_abi,
        });
    }
    if net.is_restricted() && have < 4 {
        return Err(WallError::NetworkUnsupported { have });
    }
    let guard = match (unix.allow_all, have >= RESOLVE_UNIX_ABI) {
        (true, _) => UnixGuard::Open,
        (false, true) => UnixGuard::Landlock,
        (false, false) if unix.names_sockets() => return Err(WallError::UnixUnsupported { have }),
        (false, false) => UnixGuard::Seccomp,
    };
    let abi = ABI::from(i32::try_from(have).unwrap_or(i32::MAX));
    let mut handled_net = BitFlags::<AccessNet>::EMPTY;
    if net.connect_tcp.is_some() {
        handled_net |= AccessNet::ConnectTcp;
    }
    if net.bind_tcp.is_some() {
        handled_net |= AccessNet::BindTcp;
    }
    // ABI 6: no signals to, and no abstract unix sockets of, processes outside the wall.
    let scoped = have >= 6;
    let scopes = match (scoped, scope_signals) {
        (true, true) => Scope::from_all(abi).bits(),
        (true, false) => (Scope::from_all(abi) & !BitFlags::from(Scope::Signal)).bits(),
        (false, _) => 0,
    };
    let mut handled_fs = AccessFs::from_all(abi);
    if guard == UnixGuard::Open {
        handled_fs &= !BitFlags::from(AccessFs::ResolveUnix);
    }
    let ruleset = sys::landlock_create_ruleset(handled_fs.bits(), handled_net.bits(), scopes)
        .map_err(WallError::Ruleset)?;
    let ports = [
        (&net.connect_tcp, AccessNet::ConnectTcp),
        (&net.bind_tcp, AccessNet::BindTcp),
    ];
    for (list, access) in ports {
        for &port in list.iter().flatten() {
            sys::landlock_add_net_rule(ruleset.as_fd(), port, BitFlags::from(access).bits())
                .map_err(|source| WallError::Rule {
                    path: PathBuf::from(format!("tcp port {port}")),
                    source,
                })?;
        }
    }
    // List-only directories are the parents of carved-out entries (and `/dev`): they stay open
    // while their entries are opened relative to them, one path component each.
    let mut parents: Vec<(&Path, OwnedFd)> = Vec::new();
    // The other rules' descriptors, closed in batches (see `close_batch`).
    let mut opened: Vec<OwnedFd> = Vec::with_capacity(CLOSE_BATCH);
    for rule in rules {
        let fd = match open_path(&rule.path, &parents) {
            Ok(fd) => fd,
            // An entry of a list-only directory (a carve-out's sibling, like the files of
            // `/etc` as root) that vanished since the listing, or became a symbolic link:
            // it is not granted. Only ever less than the policy said, never more; a file
            // that `useradd` or an editor renames into place meanwhile must not stop the
            // launch.
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::ENOENT) | Some(libc::ELOOP))
                    && listed_child(&rule.path, &parents) =>
            {
                continue
            }
            Err(source) => {
                return Err(WallError::Open {
                    path: rule.path.clone(),
                    source,
                })
            }
        };
        let rights = rights(rule.access, rule.is_dir, abi);
        sys::landlock_add_path_rule(ruleset.as_fd(), fd.as_fd(), rights.bits()).map_err(
            |source| WallError::Rule {
                path: rule.path.clone(),
                source,
            },
        )?;
        if rule.access == Access::ListOnly {
            parents.push((&rule.path, fd));
        } else {
            opened.push(fd);
            if opened.len() == CLOSE_BATCH {
                close_batch(&mut opened);
            }
        }
    }
    close_batch(&mut opened);
    drop(parents);
    if guard == UnixGuard::Landlock {
        // The named sockets: RESOLVE_UNIX on each socket itself, nothing else.
        for path in &unix.sockets {
            let fd = open_path(path, &[]).map_err(|source| WallError::Open {
                path: path.clone(),
                source,
            })?;
            sys::landlock_add_path_rule(
                ruleset.as_fd(),
                fd.as_fd(),
                BitFlags::from(AccessFs::ResolveUnix).bits(),
            )
            .map_err(|source| WallError::Rule {
                path: path.clone(),
                source,
            })?;
        }
    }
    // ABI 7: audit the agent's denials (after exec), not the shim's own before it (the
    // self-check's expected refusal of `/` would otherwise be logged on every launch).
    let audit_new_exec = have >= 7;
    let flags = if audit_new_exec {
        LOG_SAME_EXEC_OFF | LOG_NEW_EXEC_ON
    } else {
        0
    };
    // Without no_new_privs (or CAP_SYS_ADMIN) the kernel refuses to restrict; the launch
    // has set it already, and setting it again is harmless.
    nix::sys::prctl::set_no_new_privs().map_err(|e| WallError::NoNewPrivs(e.into()))?;
    sys::landlock_restrict_self(ruleset.as_fd(), flags).map_err(WallError::Restrict)?;
    Ok(Enforced {
        abi: have,
        audit_new_exec,
        scoped,
        unix: guard,
    })
}

/// How many rule descriptors stay open before they are closed together: few enough to stay
/// far below any descriptor limit, enough that a large policy closes them in a few calls.
const CLOSE_BATCH: usize = 64;

/// Closes rule descriptors with one `close_range` per run of consecutive numbers (usually one
/// run for the whole batch, as descriptors are allocated lowest first) instead of one `close`
/// per rule: on a policy with hundreds of rules, hundreds of system calls fewer. Every
/// descriptor in a run is one of ours, so nothing else is closed. Where `close_range` fails
/// (kernels before 5.9), the descriptors are closed one by one.
fn close_batch(fds: &mut Vec<OwnedFd>) {
    fds.sort_unstable_by_key(AsRawFd::as_raw_fd);
    let mut rest = std::mem::take(fds);
    while let Some(first) = rest.first().map(AsRawFd::as_raw_fd) {
        let run = rest
            .iter()
            .zip(first..)
            .take_while(|(fd, n)| fd.as_raw_fd() == *n)
            .count();
        let batch: Vec<OwnedFd> = rest.drain(..run).collect();
        let last = batch.last().map_or(first, AsRawFd::as_raw_fd);
        if sys::close_range(first, last).is_ok() {
            // Closed by the kernel: release ownership without closing again.
            batch.into_iter().for_each(|fd| {
                let _closed: RawFd = fd.into_raw_fd();
            });
        }
        // Otherwise `batch` is dropped here, closing each descriptor.
    }
}

/// Whether `path`'s parent is one of the open list-only directories: an entry found by
/// listing it.
fn listed_child(path: &Path, parents: &[(&Path, OwnedFd)]) -> bool {
    path.parent()
        .is_some_and(|parent| parents.iter().any(|(p, _)| *p == parent))
}

/// Opens `path` with `O_PATH` (no access to its contents), relative to its parent's
/// descriptor when the parent is one of the open list-only directories, refusing any
/// symlink on the way (`RESOLVE_NO_SYMLINKS`): rule paths are real paths, so a symlink met
/// now was swapped in after the policy was built (an agent's background process racing the
/// next launch), and following it would put the rule on whatever it points at.
fn open_path(path: &Path, parents: &[(&Path, OwnedFd)]) -> io::Result<OwnedFd> {
    let flags = libc::O_PATH;
    let c = |b: &[u8]| {
        std::ffi::CString::new(b).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
    };
    // Rule paths are real (no `.`, `..` or `//`), so the parent is the bytes before the
    // last `/`, compared as bytes.
    let bytes = path.as_os_str().as_bytes();
    if let Some(slash) = bytes.iter().rposition(|&b| b == b'/') {
        let (parent, name) = (&bytes[..slash], &bytes[slash + 1..]);
        let found = parents
            .iter()
            .rev()
            .find(|(p, _)| p.as_os_str().as_bytes() == parent);
        if let (Some((_, dir)), false) = (found, name.is_empty() || parent.is_empty()) {
            return sys::open_no_symlinks(Some(dir.as_fd()), &c(name)?, flags);
        }
    }
    sys::open_no_symlinks(None, &c(bytes)?, flags)
}

/// What a kernel ABI enforces, for `landwall doctor`.
pub fn features(abi: u32) -> Vec<(&'static str, u32, bool)> {
    [
        ("filesystem read/write/execute", 1),
        ("REFER: cross-directory rename and link", 2),
        ("TRUNCATE: truncate(2) on read-only files", 3),
        ("TCP bind/connect by port", 4),
        ("IOCTL_DEV: device ioctls", 5),
        ("scopes: abstract unix sockets, signals", 6),
        ("audit of denials after exec", 7),
        (
            "RESOLVE_UNIX: path-named unix sockets by path",
            RESOLVE_UNIX_ABI,
        ),
    ]
    .into_iter()
    .map(|(name, since)| (name, since, abi >= since))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_rights_never_write() {
        for abi in [ABI::V1, ABI::V3, ABI::V7] {
            let ro = rights(Access::ReadOnly, true, abi);
            assert!((ro & AccessFs::from_write(abi)).is_empty());
            assert!(ro.contains(AccessFs::Execute));
        }
    }

    #[test]
    fn writable_carries_refer_and_truncate_but_ioctl_only_on_devices() {
        let rw = rights(Access::ReadWrite, true, ABI::V7);
        assert!(rw.contains(AccessFs::Refer) && rw.contains(AccessFs::Truncate));
        assert!(!rw.contains(AccessFs::IoctlDev));
        assert!(rights(Access::Device, true, ABI::V7).contains(AccessFs::IoctlDev));
    }

    #[test]
    fn file_rules_carry_file_rights_only() {
        let f = rights(Access::ReadOnly, false, ABI::V7);
        assert!(!f.contains(AccessFs::ReadDir));
        assert!(f.contains(AccessFs::ReadFile));
    }

    #[test]
    fn features_follow_the_abi() {
        let f = features(2);
        assert!(f.iter().any(|(_, since, on)| *since == 2 && *on));
        assert!(f.iter().any(|(_, since, on)| *since == 3 && !*on));
    }
}
