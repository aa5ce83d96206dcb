//! The Landlock wall: turn a [`Policy`] into a ruleset and restrict the calling process.
//!
//! Invariants: every filesystem right the running kernel knows is handled (so anything not
//! granted is denied); every rule is added from a path opened with `PathFd::new` (a path that
//! cannot be opened is an error, never silently skipped); the crate runs in
//! `HardRequirement` mode and the result must be `FullyEnforced` with no_new_privs set.
//! Anything less is an error value, so the caller cannot exec by mistake.

use std::io;
use std::path::PathBuf;

use landlock::{
    Access as _, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use crate::policy::{Access, Policy};
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
    Ruleset(#[source] landlock::RulesetError),
    /// A rule's path could not be opened.
    #[error("opening {} for its rule: {source}", path.display())]
    Open {
        /// The path.
        path: PathBuf,
        /// Why.
        source: landlock::PathFdError,
    },
    /// A rule could not be added.
    #[error("adding the rule for {}: {source}", path.display())]
    Rule {
        /// The path.
        path: PathBuf,
        /// Why.
        source: landlock::RulesetError,
    },
    /// `landlock_restrict_self` failed (E2BIG: 16 layers already stacked).
    #[error("restricting the process: {0}; if it says E2BIG, 16 Landlock layers are already stacked around this process")]
    Restrict(#[source] landlock::RulesetError),
    /// The kernel accepted the ruleset but did not enforce all of it.
    #[error("the kernel did not fully enforce the ruleset ({status}); refusing to run the agent half-walled")]
    NotEnforced {
        /// What the crate reported.
        status: String,
    },
    /// TCP port rules are configured but the kernel cannot enforce them.
    #[error("the configuration sets TCP port rules ([network]) but this kernel offers Landlock ABI {have}; TCP rules need ABI 4 (Linux 6.7): upgrade the kernel or remove [network]")]
    NetworkUnsupported {
        /// The kernel's ABI.
        have: u32,
    },
    /// no_new_privs is not set after restricting.
    #[error("no_new_privs is not set after restricting; refusing to run")]
    NoNewPrivs,
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
}

/// The running kernel's Landlock ABI.
pub fn kernel_abi() -> Result<u32, WallError> {
    sys::landlock_abi_version().map_err(|source| WallError::Unavailable { source })
}

/// The Landlock rights a grant carries on `abi`.
pub fn rights(access: Access, is_dir: bool, abi: ABI) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    let rights = match access {
        Access::ListOnly => BitFlags::from(AccessFs::ReadDir),
        Access::ReadOnly => AccessFs::from_read(abi),
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

/// Restricts the calling thread (the process must be single-threaded) with `policy`.
///
/// Steps, each checked: read the kernel's ABI and compare it with the minimum; create a
/// ruleset handling every filesystem right of that ABI; add each rule from an opened path;
/// ask for audit of denials after exec where ABI 7 offers it; restrict; require full
/// enforcement and no_new_privs.
pub fn restrict(policy: &Policy) -> Result<Enforced, WallError> {
    let have = kernel_abi()?;
    if have < policy.min_abi {
        return Err(WallError::AbiTooLow {
            have,
            need: policy.min_abi,
        });
    }
    let net = &policy.network;
    if net.is_restricted() && have < 4 {
        return Err(WallError::NetworkUnsupported { have });
    }
    let abi = ABI::from(i32::try_from(have).unwrap_or(i32::MAX));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(WallError::Ruleset)?;
    if net.connect_tcp.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::ConnectTcp)
            .map_err(WallError::Ruleset)?;
    }
    if net.bind_tcp.is_some() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp)
            .map_err(WallError::Ruleset)?;
    }
    // ABI 6: no signals to, and no abstract unix sockets of, processes outside the wall.
    let scoped = have >= 6;
    if scoped {
        ruleset = ruleset
            .scope(Scope::from_all(abi))
            .map_err(WallError::Ruleset)?;
    }
    let mut ruleset = ruleset.create().map_err(WallError::Ruleset)?;
    let ports = |list: &Option<Vec<u16>>, access: AccessNet| -> Vec<NetPort> {
        list.iter()
            .flatten()
            .map(|&p| NetPort::new(p, access))
            .collect()
    };
    for rule in ports(&net.connect_tcp, AccessNet::ConnectTcp)
        .into_iter()
        .chain(ports(&net.bind_tcp, AccessNet::BindTcp))
    {
        ruleset = ruleset.add_rule(rule).map_err(WallError::Ruleset)?;
    }
    for rule in &policy.rules {
        let rights = rights(rule.access, rule.is_dir, abi);
        if rights.is_empty() {
            continue;
        }
        let fd = PathFd::new(&rule.path).map_err(|source| WallError::Open {
            path: rule.path.clone(),
            source,
        })?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, rights))
            .map_err(|source| WallError::Rule {
                path: rule.path.clone(),
                source,
            })?;
    }
    // ABI 7: audit the agent's denials (after exec), not the shim's own before it (the
    // self-check's expected refusal of `/` would otherwise be logged on every launch).
    let audit_new_exec = have >= 7;
    if audit_new_exec {
        ruleset = ruleset
            .log_new_exec(true)
            .and_then(|r| r.log_same_exec(false))
            .map_err(WallError::Ruleset)?;
    }
    let status = ruleset.restrict_self().map_err(WallError::Restrict)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(WallError::NotEnforced {
            status: format!("{:?}", status.ruleset),
        });
    }
    if !status.no_new_privs {
        return Err(WallError::NoNewPrivs);
    }
    Ok(Enforced {
        abi: have,
        audit_new_exec,
        scoped,
    })
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
