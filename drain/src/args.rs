//! The command line: the daemon's options, and the hidden job runner it starts itself as.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Environment:
  LANDWALL_DRAIN_SANDBOX=1  wall the daemon itself in before it touches the spool (writable:
                            the spool and the worktree roots; read-only: the system); if the
                            wall cannot go up, exit 100 at once. `0` or unset: no wall (a
                            warning says so). Any other value is a configuration error.
  LANDWALL_CONFIG           the configuration file, unless --config is given
                            (default /etc/landwall/landwall.toml; the per-user file is not read)
  LANDWALL_LOG              log filter (default `info`), to stderr
  NOTIFY_SOCKET             set by systemd for Type=notify units: READY=1 is sent once serving

Jobs and their caps:
  Each job runs under a keeper (a child subreaper) that ends every process the job started,
  however it detached, before the result is written. Where the daemon has a cgroup v2
  subtree (systemd Delegate=yes, or the root cgroup), each job gets its own cgroup with
  memory.max, pids.max and cpu.max from [drain] memory_max, tasks_max, cpu_max, and ends with
  cgroup.kill. Where it has none, or no memory controller, the daemon says so in one line at
  start: a job with a memory cap is refused (RLIMIT_DATA would not count shared memory or
  tmpfs), and a memory_max every job gets stops the daemon (status 78); tasks are capped by
  RLIMIT_NPROC (not for root), CPU not at all. Each job gets its own tmpfs on /tmp and
  /dev/shm ([drain] tmp_size, default its memory cap, else 1G each), gone with it. The log cap
  ([drain] log_max, default 64M) always holds; a job that reaches a cap ends `failed`, naming
  it. With less room on the spool's file system than a job's log cap, nothing is claimed.

Protected paths:
  Before each job the daemon copies the protected paths of its worktree (git hooks and
  config, `.envrc`, `.husky/`, agents' settings: see `protect` in the configuration); once
  all of the job is over it compares them, puts back what the job changed, created or
  removed, and records the job `tampered`, naming the paths (its exit status is recorded
  as ever). A job whose protected paths are too large to copy (1M a file, 16M in all) is
  not started.

Signals:
  SIGTERM, SIGINT  stop claiming; running jobs get the grace period (`[drain] grace`, default
                   30s), then SIGTERM to every process of theirs and 5s later a kill of all of
                   them, and go back to the queue. A second signal skips the rest of the grace
                   period.
  SIGHUP           reload the configuration (the daemon's own wall stays as it started)

Exit status:
  0    stopped by SIGTERM/SIGINT, or --once drained the queue (failed jobs are recorded, not
       reported in the status)
  2    bad command line
  74   the spool could not be created, read or written
  75   another landwall-drain already serves this spool (its lock is held)
  78   bad configuration, bad LANDWALL_DRAIN_SANDBOX value, a configured path is missing,
       or the spool, the configuration file or the daemon's home lies where every job would
       be granted it (/tmp, /dev/shm, a worktree root, a configured path)
  100  LANDWALL_DRAIN_SANDBOX=1 and the wall could not go up: do not restart
       (RestartPreventExitStatus=100)

Spool layout, job file format and results: see docs/drain.md.";

/// Drains a spool of queued agent jobs, each walled into its own worktree.
///
/// Jobs are queued with `landwall submit` and listed with `landwall jobs`. Each runs in its
/// own process group behind a Landlock wall built for its worktree by the same code as the
/// `landwall` shim; its output goes to `logs/ID.log` in the spool and its result to done/ or
/// failed/ (failed, or tampered: it changed a protected path, which the daemon put back).
#[derive(Debug, Parser)]
#[command(
    name = "landwall-drain",
    version,
    about,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(flatten)]
    pub daemon: DaemonArgs,
    #[command(subcommand)]
    pub internal: Option<Internal>,
}

/// The daemon's options.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The spool directory (default: `[drain] spool` in the configuration, else
    /// /var/spool/landwall).
    #[arg(long, value_name = "DIR")]
    pub spool: Option<PathBuf>,
    /// How many jobs run at once (default: `[drain] jobs`, else 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
    /// Drain what is queued, wait for it to finish, and exit 0 (batch mode).
    #[arg(long)]
    pub once: bool,
    /// The configuration file (default: $LANDWALL_CONFIG, else /etc/landwall/landwall.toml).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// What the daemon starts itself as; not for people.
#[derive(Debug, Subcommand)]
pub enum Internal {
    /// Run one job behind its own wall (started by the daemon, one per job).
    #[command(name = "__run-job", hide = true)]
    RunJob(RunJobArgs),
}

/// The job runner's arguments: everything the daemon validated, nothing it did not.
#[derive(Debug, Args)]
pub struct RunJobArgs {
    /// The configuration file the daemon read.
    #[arg(long, value_name = "FILE")]
    pub config: PathBuf,
    /// The spool the daemon serves (its real path): kept out of the job's every grant.
    #[arg(long, value_name = "DIR")]
    pub spool: PathBuf,
    /// The job's worktree (a real path, already checked against the roots).
    #[arg(long, value_name = "DIR")]
    pub worktree: PathBuf,
    /// The agent profile.
    #[arg(long, value_name = "NAME")]
    pub agent: String,
    /// Extra variable names to pass (already checked against the denylist).
    #[arg(long = "env", value_name = "NAME")]
    pub env: Vec<String>,
    /// The daemon's pid: the runner dies with it.
    #[arg(long, value_name = "PID")]
    pub parent: i32,
    /// The job's cgroup (a directory of the cgroup v2 file system the daemon made, its caps
    /// written): the job joins it before its wall goes up.
    #[arg(long, value_name = "DIR")]
    pub cgroup: Option<PathBuf>,
    /// The job's log cap in bytes: output past it is dropped and the job is ended.
    #[arg(long, value_name = "BYTES")]
    pub log_max: Option<u64>,
    /// The size of the job's own `/tmp` and `/dev/shm` (each a tmpfs of its namespace); the
    /// daemon always says it.
    #[arg(long, value_name = "BYTES", default_value_t = landwall::limits::DEFAULT_TMP_SIZE)]
    pub tmp_size: u64,
    /// The job's own temporary directory, made by the daemon: granted in place of `/tmp`
    /// and `/dev/shm`, as `TMPDIR`, where the job's namespace is refused.
    #[arg(long, value_name = "DIR")]
    pub tmp_dir: Option<PathBuf>,
    /// RLIMIT_NPROC for the job, where no pids controller caps it.
    #[arg(long, value_name = "N")]
    pub rlimit_nproc: Option<u64>,
    /// The job's command and arguments.
    #[arg(
        required = true,
        allow_hyphen_values = true,
        last = true,
        value_name = "CMD"
    )]
    pub argv: Vec<OsString>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn daemon_options_parse() {
        let c = Cli::try_parse_from([
            "landwall-drain",
            "--spool",
            "/s",
            "--jobs",
            "3",
            "--once",
            "--config",
            "/c",
        ])
        .expect("parse");
        assert!(c.internal.is_none());
        assert_eq!(c.daemon.jobs, Some(3));
        assert!(c.daemon.once);
        assert!(Cli::try_parse_from(["landwall-drain", "--jobs", "0"]).is_err());
    }

    #[test]
    fn runner_takes_argv_after_the_separator() {
        let c = Cli::try_parse_from([
            "landwall-drain",
            "__run-job",
            "--config",
            "/c",
            "--spool",
            "/s",
            "--worktree",
            "/w",
            "--agent",
            "claude",
            "--env",
            "A",
            "--parent",
            "1",
            "--tmp-size",
            "1024",
            "--",
            "sh",
            "-c",
            "--env x",
        ])
        .expect("parse");
        let Some(Internal::RunJob(r)) = c.internal else {
            panic!("not the runner")
        };
        assert_eq!(r.env, ["A"]);
        assert_eq!(r.spool, PathBuf::from("/s"));
        assert_eq!(r.argv, ["sh", "-c", "--env x"]);
        assert_eq!(r.tmp_size, 1024);
    }

    #[test]
    fn the_runner_needs_the_spool() {
        // A runner that did not know the spool could not keep it out of the job's wall.
        let e = Cli::try_parse_from([
            "landwall-drain",
            "__run-job",
            "--config",
            "/c",
            "--worktree",
            "/w",
            "--agent",
            "claude",
            "--parent",
            "1",
            "--",
            "true",
        ])
        .expect_err("no --spool");
        assert!(e.to_string().contains("--spool"), "{e}");
    }

    #[test]
    fn help_documents_every_exit_status() {
        let help = Cli::command().render_long_help().to_string();
        for code in ["0 ", "2 ", "74 ", "75 ", "78 ", "100 "] {
            assert!(help.contains(&format!("\n  {code}")), "{code} missing");
        }
    }
}
