//! Test helper for landwall's end-to-end tests. Not shipped.
//!
//! - `lw-helper stack N -- CMD…`: stack N permissive Landlock layers, then exec CMD (the
//!   kernel allows 16 layers, so a shim under 16 must fail to add its own).
//! - `lw-helper nolandlock -- CMD…`: a seccomp filter answers ENOSYS to the three Landlock
//!   syscalls (444–446), as on a kernel built without Landlock, then exec CMD.
//! - `lw-helper nounshare -- CMD…`: a seccomp filter answers EPERM to `unshare(2)` for a new
//!   mount namespace, as where a security module or a container refuses one, then exec CMD;
//!   `lw-helper nsfull -- CMD…` answers ENOSPC instead, as when the namespace limit is
//!   reached.
//! - `lw-helper watcher-wall GIT_DIR COMMON -- CMD…`: put up the quarantine watcher's own
//!   wall for the linked worktree whose git dir and common dir these are, then exec CMD.
//! - `lw-helper write PATH`, `read PATH`, `rename FROM TO`, `mkdir PATH`: do it; exit 0 on
//!   success or with the errno (EACCES = 13) on failure.
//! - installed as `<agent>-real` (a copy of it): write this process's argv, NUL-separated,
//!   to `argv.out` in the cwd, so a test can compare the bytes the agent received.
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{exit, Command};

use landlock::{
    Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr, ABI,
};
use seccompiler::{SeccompAction, SeccompFilter, TargetArch};

fn errno_exit(r: std::io::Result<()>) -> ! {
    match r {
        Ok(()) => exit(0),
        Err(e) => exit(e.raw_os_error().unwrap_or(1)),
    }
}

fn exec_rest(rest: &[OsString]) -> ! {
    let rest = match rest.first() {
        Some(s) if s == "--" => &rest[1..],
        _ => rest,
    };
    let Some((cmd, args)) = rest.split_first() else {
        eprintln!("lw-helper: no command");
        exit(2)
    };
    let e = Command::new(cmd).args(args).exec();
    eprintln!("lw-helper: exec {}: {e}", cmd.to_string_lossy());
    exit(127)
}

fn stack(n: usize) {
    let abi = ABI::V1;
    for i in 0..n {
        let status = Ruleset::default()
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.create())
            .and_then(|r| {
                r.add_rule(PathBeneath::new(
                    PathFd::new("/").expect("open /"),
                    AccessFs::from_all(abi),
                ))
            })
            .and_then(|r| r.restrict_self());
        if let Err(e) = status {
            eprintln!("lw-helper: layer {}: {e}", i + 1);
            exit(3);
        }
    }
}

fn no_landlock() {
    refuse(&[444, 445, 446], libc::ENOSYS);
}

/// EPERM to `unshare(2)` asking for a new mount namespace (other unshare calls, such as
/// landwall's single-thread probe with CLONE_VM, pass).
fn no_new_namespaces(errno: i32) {
    let newns = libc::CLONE_NEWNS as u64;
    let cond = seccompiler::SeccompCondition::new(
        0,
        seccompiler::SeccompCmpArgLen::Dword,
        seccompiler::SeccompCmpOp::MaskedEq(newns),
        newns,
    )
    .expect("condition");
    let rule = seccompiler::SeccompRule::new(vec![cond]).expect("rule");
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_unshare, vec![rule]);
    apply(rules, errno);
}

/// A seccomp filter answering `errno` to the system calls `nrs`.
fn refuse(nrs: &[i64], errno: i32) {
    apply(nrs.iter().map(|&nr| (nr, vec![])).collect(), errno);
}

/// Installs a filter answering `errno` where `rules` match, allowing the rest.
fn apply(rules: BTreeMap<i64, Vec<seccompiler::SeccompRule>>, errno: i32) {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        TargetArch::x86_64,
    )
    .expect("filter");
    let prog: seccompiler::BpfProgram = filter.try_into().expect("compile");
    seccompiler::apply_filter(&prog).expect("apply seccomp filter");
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let arg = |i: usize| args.get(i).cloned().unwrap_or_default();
    let me = std::env::current_exe().unwrap_or_default();
    if me.as_os_str().as_bytes().ends_with(b"-real") {
        let mut out = Vec::new();
        for a in &args {
            out.extend_from_slice(a.as_bytes());
            out.push(0);
        }
        errno_exit(std::fs::write("argv.out", out));
    }
    match arg(1).to_str().unwrap_or("") {
        "stack" => {
            let n: usize = arg(2)
                .to_str()
                .and_then(|s| s.parse().ok())
                .expect("stack N");
            stack(n);
            exec_rest(&args[3..]);
        }
        "nolandlock" => {
            no_landlock();
            exec_rest(&args[2..]);
        }
        "nounshare" => {
            no_new_namespaces(libc::EPERM);
            exec_rest(&args[2..]);
        }
        "watcher-wall" => {
            let q = landwall::policy::Quarantine::of(
                std::path::Path::new(&arg(2)),
                std::path::Path::new(&arg(3)),
            );
            if let Err(e) = landwall::watcher::wall_self(
                Some(&q),
                &Default::default(),
                None,
                landwall::config::DEFAULT_MIN_ABI,
            ) {
                eprintln!("lw-helper: watcher-wall: {e}");
                exit(3);
            }
            exec_rest(&args[4..]);
        }
        "nsfull" => {
            no_new_namespaces(libc::ENOSPC);
            exec_rest(&args[2..]);
        }
        "write" => errno_exit(std::fs::write(arg(2), b"written by the agent\n")),
        "read" => errno_exit(std::fs::read(arg(2)).map(drop)),
        "rename" => errno_exit(std::fs::rename(arg(2), arg(3))),
        "mkdir" => errno_exit(std::fs::create_dir(arg(2))),
        other => {
            eprintln!("lw-helper: unknown command {other:?}");
            exit(2)
        }
    }
}
