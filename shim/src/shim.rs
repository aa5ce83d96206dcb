//! The shim: argv[0] names the agent. Every step before `execve()` either succeeds or ends
//! the process with one line on stderr and a documented status; nothing is printed when all
//! is well, and the agent keeps this PID, argv, cwd and stdio.

use std::convert::Infallible;
use std::ffi::OsString;

use landwall::config::{self, ConfigPaths};
use landwall::launch::{self, LiveKernel};
use landwall::plan::{self, var};
use landwall::Error;

/// Runs the shim for `agent`; returns only on failure, with the exit status.
pub fn main(agent: &str, argv: Vec<OsString>) -> i32 {
    match walled_exec(agent, argv) {
        Ok(never) => match never {},
        Err(e) => {
            eprintln!(
                "landwall: {agent}: {}",
                landwall::spool::printable(&e.to_string())
            );
            e.exit_code()
        }
    }
}

/// The launch, in order: sanitise descriptors; read the configuration; find the real agent
/// and the worktree; build the policy and the environment; then caps, no_new_privs,
/// Landlock and exec (in `launch::wall_and_exec`).
fn walled_exec(agent: &str, argv: Vec<OsString>) -> Result<Infallible, Error> {
    launch::sanitize_fds().map_err(Error::Fds)?;
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    crate::cli::init_logging(&vars);
    let config = config::load(&ConfigPaths::from_env(|k| {
        var(&vars, k).map(OsString::from)
    }))?;
    let me = plan::current_exe_id()?;
    let (real, found) = plan::find_agent(agent, &vars, &config, me)?;
    log::debug!("real {agent}: {} ({found:?})", real.display());
    let cwd = std::env::current_dir().map_err(|source| {
        Error::Worktree(landwall::worktree::WorktreeError::Resolve {
            path: ".".into(),
            source,
        })
    })?;
    let policy = plan::build_policy(agent, Some(&real), &cwd, true, None, &vars, &config, true)?;
    log::debug!("policy: {policy:?}");
    let exec = plan::prepare(&policy, &real, &argv, &vars)?;
    Err(launch::wall_and_exec(
        &mut LiveKernel::default(),
        &policy,
        &exec,
    ))
}
