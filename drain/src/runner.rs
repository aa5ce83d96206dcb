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
//! variable names) and check its worktree is still the one the daemon checked; drop
//! capabilities, no_new_privs, Landlock, seccomp, self-check; exec.

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

/// Runs one job; returns only on failure, with the exit status the daemon records.
pub fn main(args: RunJobArgs) -> i32 {
    if let Err(why) = die_with_parent(args.parent) {
        eprintln!("landwall-drain: job not started: {why}");
        return landwall::exit::WALL;
    }
    let mut status = match take_status_pipe() {
        Ok(f) => Some(f),
        Err(e) => {
            eprintln!("landwall-drain: job not started: taking the status pipe: {e}");
            return landwall::exit::WALL;
        }
    };
    match walled_exec(args) {
        Ok(never) => match never {},
        Err(e) => {
            let why = e.to_string();
            if let Some(f) = status.as_mut() {
                // The daemon also sees the exit status and the log; a lost message only
                // loses the reason's wording.
                if f.write_all(why.as_bytes()).is_err() {
                    eprintln!("landwall-drain: could not report to the daemon");
                }
            }
            eprintln!("landwall-drain: job not started: {why}");
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
    let config = config::load(&ConfigPaths {
        system: args.config.clone(),
        user: None,
    })?;
    let cmd = args
        .argv
        .first()
        .ok_or_else(|| Error::Usage("no command".into()))?;
    let program = plan::resolve_command(cmd, &vars)?;
    let mut policy = plan::build_policy(
        &args.agent,
        Some(&program),
        &args.worktree,
        false,
        Some(&args.worktree),
        &vars,
        &config,
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
