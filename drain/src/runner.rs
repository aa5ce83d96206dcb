//! The job runner: `landwall-drain __run-job …`, started by the daemon once per job, in the
//! job's own process group with the job's worktree as cwd and its log as stdout/stderr.
//!
//! It walls itself in exactly as the shim does (the same [`plan`] and [`launch`] code, for
//! the job's worktree and agent) and execs the job in the same process. Its stdin is the
//! write end of a close-on-exec status pipe to the daemon: the runner moves it to a
//! close-on-exec descriptor and puts `/dev/null` on stdin, so the daemon reads end-of-file
//! with nothing before it if the job was exec'd, or the reason it was not.
//!
//! Steps, in order: die with the daemon (parent-death signal, then check the parent is
//! still the daemon); take the status pipe; mark inherited descriptors close-on-exec; read
//! the configuration; find the command on PATH; build the policy (worktree, agent, extra
//! variable names; the drain's own state off limits, no `$HOME`) and check its worktree is
//! still the one the daemon checked; drop capabilities, no_new_privs, Landlock, seccomp,
//! self-check; exec. The job's namespace gets a tmpfs of its own on `/tmp` and
//! `/dev/shm` (`--tmp-size` each), mounted before the wall's rules are opened.
//!
//! The drain's own state is never granted to a job ([`crate::offlimits`]): the spool the
//! daemon serves (`--spool`, not only `[drain] spool`), the configuration it read, its home
//! and its executable. A job whose policy would reach one of them (through its `.git` file,
//! its command's directory or the configuration) is not started: its result is `failed`
//! with the policy's one-line reason, and the daemon goes on.

use std::convert::Infallible;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;

use nix::sys::signal::Signal;

use landwall::config::{self, ConfigPaths};
use landwall::env::{EnvPattern, EnvPolicy};
use landwall::launch::{self, LiveKernel};
use landwall::worktree::WorktreeError;
use landwall::{plan, Error};

use crate::args::RunJobArgs;
use crate::keeper;
use crate::offlimits::{self, Own};

/// Runs one job: forks it under a keeper ([`keeper`]) and returns (or dies) as the job
/// ended; returns at once, with the exit status the daemon records, if it cannot start it.
pub fn main(args: RunJobArgs) -> i32 {
    if let Err(why) = die_with_parent(args.parent) {
        eprintln!("landwall-drain: job not started: {why}");
        return landwall::exit::WALL;
    }
    let (mut status, job_status) = match take_status_pipe().and_then(|f| {
        let copy = f.try_clone()?;
        Ok((f, copy))
    }) {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("landwall-drain: job not started: taking the status pipe: {e}");
            return landwall::exit::WALL;
        }
    };
    let cgroup = args.cgroup.clone();
    let keep = keeper::Keep {
        log_max: args.log_max,
        cgroup: cgroup.as_deref(),
        rlimit_nproc: args.rlimit_nproc,
    };
    let parent = args.parent;
    keeper::keep(&keep, parent, &mut status, move || job(args, job_status))
}

/// The job side, in the keeper's child: walls itself in and execs, or reports why not on
/// the status pipe and returns the status to exit with.
fn job(args: RunJobArgs, mut status: File) -> i32 {
    match walled_exec(args) {
        Ok(never) => match never {},
        Err(e) => {
            let why = e.to_string();
            // The daemon also sees the exit status and the log; a lost message only
            // loses the reason's wording.
            if status.write_all(why.as_bytes()).is_err() {
                eprintln!("landwall-drain: could not report to the daemon");
            }
            eprintln!(
                "landwall-drain: job not started: {}",
                landwall::spool::printable(&why)
            );
            e.exit_code()
        }
    }
}

/// The daemon may die (kill -9) at any time: the job must not run on unwatched, and a
/// restarted daemon must be able to run it again without two copies at once.
fn die_with_parent(parent: i32) -> Result<(), String> {
    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
        .map_err(|e| format!("setting the parent-death signal: {e}"))?;
    // Set after the fork: if the daemon died before, the signal will never come.
    if nix::unistd::getppid().as_raw() != parent {
        return Err("the daemon that started this job is gone".into());
    }
    Ok(())
}

/// Moves the status pipe from stdin to a close-on-exec descriptor (`try_clone_to_owned` is
/// `F_DUPFD_CLOEXEC`) and puts `/dev/null` on stdin: the job reads nothing.
fn take_status_pipe() -> std::io::Result<File> {
    let status = File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
    let null = File::open("/dev/null")?;
    nix::unistd::dup2_stdin(&null)?;
    Ok(status)
}

fn walled_exec(args: RunJobArgs) -> Result<Infallible, Error> {
    launch::sanitize_fds().map_err(Error::Fds)?;
    // SIGPIPE: Rust starts with it ignored, and an ignored signal stays ignored across
    // exec. Installing a handler (reset to the default by exec) gives the job the default.
    signal_hook::flag::register(
        libc::SIGPIPE,
        std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
    )
    .map_err(Error::Fds)?;
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let mut config = config::load(&ConfigPaths {
        system: args.config.clone(),
        user: None,
    })?;
    // The runner's environment is the daemon's: its HOME is the daemon's home.
    let own = Own {
        spool: args.spool.clone(),
        config_file: args.config.clone(),
        homes: offlimits::homes(
            std::env::var_os("HOME").as_deref(),
            nix::unistd::getuid().as_raw(),
        ),
        exe: std::env::current_exe().ok(),
    };
    config.off_limits.extend(own.off_limits());
    let cmd = args
        .argv
        .first()
        .ok_or_else(|| Error::Usage("no command".into()))?;
    let program = plan::resolve_command(cmd, &vars)?;
    // No `$HOME` grant: the daemon's home holds its dotfiles and credentials, and is off
    // limits (a job that could write ~/.bashrc would run outside every wall). HOME stays in
    // the job's environment, unreadable to it, as it always was under the daemon's own wall.
    let policy_vars: Vec<(OsString, OsString)> =
        vars.iter().filter(|(k, _)| k != "HOME").cloned().collect();
    let mut policy = plan::build_policy(
        &args.agent,
        Some(&program),
        &args.worktree,
        false,
        Some(&args.worktree),
        &policy_vars,
        &config,
        true,
    )?;
    // The daemon checked this real path against the roots; if it resolves elsewhere now (a
    // directory swapped for a symlink since), refuse rather than wall the job in elsewhere.
    if policy.worktree.root != args.worktree {
        return Err(Error::Worktree(WorktreeError::Resolve {
            path: args.worktree.clone(),
            source: std::io::Error::other(format!(
                "it resolves to {} now, not to the directory the daemon checked",
                policy.worktree.root.display()
            )),
        }));
    }
    // The protected paths that do not exist now are not swept by the launch's watcher: the
    // daemon compares every protected path of the worktree once all of the job is over,
    // puts back what changed and records the job `tampered`, naming the paths. A watcher
    // that removed them first would leave the daemon nothing to see, and the job's result
    // would not say what it did. (Held paths stay held where the namespace can be had.)
    policy.protection.absent.clear();
    // Likewise the submodules the job made or changed: the daemon looks at them too.
    policy.protection.submodules = None;
    // And so the daemon, not a record, is what judges the job's end.
    policy.protection.record = None;
    // A /tmp and /dev/shm of the job's own, size-capped and gone with it: what a job leaves
    // in the host's outlives it, and counts against nothing of its own once it has ended.
    policy.private_tmp = Some(args.tmp_size);
    policy.own_tmp_dir = args.tmp_dir.clone();
    if !args.env.is_empty() {
        let mut allow = config.env_allow.clone();
        allow.extend(config.agent(&args.agent).env_allow.iter().cloned());
        allow.extend(args.env.iter().map(|n| EnvPattern::Exact(n.clone())));
        policy.env = EnvPolicy::for_agent(&args.agent, &allow);
    }
    let exec = plan::prepare(&policy, &program, &args.argv, &vars)?;
    Err(launch::wall_and_exec(
        &mut LiveKernel::default(),
        &policy,
        &exec,
    ))
}
