//! `landwall-drain`: the daemon that drains a spool of agent jobs, each walled into its own
//! worktree, optionally walled in itself (`LANDWALL_DRAIN_SANDBOX=1`).
//!
//! It runs single-threaded (so that its own wall, applied to the calling thread, covers the
//! whole process) around one `poll(2)`: signals arrive through self-pipes, new jobs through
//! inotify on `queue/`, job exits through SIGCHLD. Each job runs as a child
//! `landwall-drain __run-job …` in its own process group, which builds the shim's policy
//! for the job's worktree, puts up its own Landlock layer and execs the job.
#![forbid(unsafe_code)]

mod cgroup;
mod daemon;
mod keeper;
mod notify;
mod offlimits;
mod procs;
mod runner;
mod selfwall;
mod sweep;

use std::process::ExitCode;

use clap::Parser;

use landwall_drain::args;

/// The documented exit statuses of `landwall-drain` (also in `--help` and docs/drain.md).
pub mod exit {
    /// Served and stopped cleanly (SIGTERM/SIGINT), or `--once` drained the queue.
    pub const OK: i32 = 0;
    /// Bad command line.
    pub const USAGE: i32 = 2;
    /// The spool could not be created, read or written (or inotify/signals failed).
    pub const SPOOL: i32 = 74;
    /// Another `landwall-drain` already serves this spool.
    pub const LOCKED: i32 = 75;
    /// The configuration, `LANDWALL_DRAIN_SANDBOX` or a configured path is wrong.
    pub const CONFIG: i32 = landwall::exit::CONFIG;
    /// `LANDWALL_DRAIN_SANDBOX=1` and the daemon's own wall could not go up. Do not restart
    /// without changing the system (`RestartPreventExitStatus=100`).
    pub const WALL: i32 = landwall::exit::WALL;
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = match args::Cli::try_parse_from(&argv) {
        Ok(cli) => match cli.internal {
            Some(args::Internal::RunJob(job)) => runner::main(job),
            None => daemon::main(cli.daemon),
        },
        Err(e) => {
            let code = if e.use_stderr() {
                exit::USAGE
            } else {
                exit::OK
            };
            if e.print().is_err() {
                return ExitCode::from(exit::USAGE as u8);
            }
            code
        }
    };
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
