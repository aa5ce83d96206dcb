//! `landwall submit` and `landwall jobs`: the admin side of the drain spool (the daemon is
//! `landwall-drain`; the spool's layout is documented in `landwall::spool`).
//!
//! Exit statuses: 0 done; 2 bad command line or a job the daemon would refuse anyway (bad
//! timeout, denylisted variable, …); 74 the spool could not be read or written (or stdout);
//! 78 the configuration or the worktree is wrong.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use landwall::config::{self, Config};
use landwall::spool::{self, JobInfo, RawJob, Spool};
use landwall::{exit, plan, worktree};

/// `landwall submit`.
#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The spool (default: `[drain] spool` in the configuration, else /var/spool/landwall).
    #[arg(long, value_name = "DIR")]
    spool: Option<PathBuf>,
    /// The job's worktree (default: the git top level of the cwd, else the cwd). It must lie
    /// below one of the daemon's `worktree_roots`.
    #[arg(long, value_name = "DIR")]
    worktree: Option<PathBuf>,
    /// Kill the job if it runs longer than this (`30s`, `10m`, `1h30m`).
    #[arg(long, value_name = "DUR")]
    timeout: Option<String>,
    /// The agent profile (environment patterns, configuration section) to run it under
    /// (default: claude).
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Pass this variable from the daemon's environment too (repeatable; the hard denylist
    /// still applies).
    #[arg(long = "env", value_name = "NAME")]
    env: Vec<String>,
    /// The command and its arguments, after `--`.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    command: Vec<OsString>,
}

/// `landwall jobs`.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// The spool (default: `[drain] spool` in the configuration, else /var/spool/landwall).
    #[arg(long, value_name = "DIR")]
    spool: Option<PathBuf>,
    /// Print one JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

/// A failure, with the exit status it maps to.
struct Failure(i32, String);

fn usage(msg: impl Into<String>) -> Failure {
    Failure(exit::USAGE, msg.into())
}

fn finish(result: Result<(), Failure>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(Failure(code, msg)) => {
            eprintln!("landwall: {msg}");
            code
        }
    }
}

fn load_config(vars: &plan::Vars) -> Result<Config, Failure> {
    crate::cli::load_config(vars).map_err(|e| Failure(e.exit_code(), e.to_string()))
}

fn spool_for(arg: Option<PathBuf>, config: &Config) -> Spool {
    let path = arg
        .or_else(|| config.drain.spool.clone())
        .unwrap_or_else(|| PathBuf::from(config::DEFAULT_SPOOL));
    // Absolute, so that the log paths `landwall jobs` prints work from anywhere.
    Spool::new(std::path::absolute(&path).unwrap_or(path))
}

fn write_stdout(text: &str) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure(exit::OUTPUT, format!("writing output: {e}")))
}

/// Queues a job; prints its ID.
pub fn submit(vars: &plan::Vars, args: SubmitArgs) -> i32 {
    finish(submit_inner(vars, args))
}

fn submit_inner(vars: &plan::Vars, args: SubmitArgs) -> Result<(), Failure> {
    let argv = args
        .command
        .iter()
        .map(|a| {
            a.to_str().map(str::to_string).ok_or_else(|| {
                usage(format!(
                    "argument {a:?} is not UTF-8, which a job file (TOML) cannot hold"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = std::env::current_dir()
        .map_err(|e| Failure(exit::CONFIG, format!("the current directory: {e}")))?;
    let wt = match &args.worktree {
        Some(dir) => std::fs::canonicalize(cwd.join(dir))
            .map_err(|e| Failure(exit::CONFIG, format!("worktree {}: {e}", dir.display())))?,
        None => {
            worktree::discover(&cwd, None)
                .map_err(|e| Failure(exit::CONFIG, e.to_string()))?
                .root
        }
    };
    let wt_text = wt
        .to_str()
        .ok_or_else(|| usage(format!("worktree {wt:?} is not UTF-8")))?
        .to_string();
    let job = RawJob {
        worktree: wt_text,
        argv,
        env: args.env,
        timeout: args.timeout,
        agent: args.agent,
    };
    // Refuse here what the daemon would refuse anyway.
    spool::check_job(job.clone()).map_err(|e| usage(e.0))?;
    let config = load_config(vars)?;
    let roots: Vec<PathBuf> = config
        .drain
        .worktree_roots
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    if !roots.is_empty() {
        if let Err(why) = spool::check_worktree(&wt, &roots) {
            eprintln!("landwall: warning: the daemon will refuse this job: {why}");
        }
    }
    let spool = spool_for(args.spool, &config);
    spool
        .create_layout()
        .map_err(|e| Failure(exit::OUTPUT, format!("{e} (is landwall-drain set up?)")))?;
    let id = spool::submit(&spool, &job).map_err(|e| Failure(exit::OUTPUT, e.to_string()))?;
    write_stdout(&format!("{id}\n"))
}

/// Lists the jobs in the spool.
pub fn jobs(vars: &plan::Vars, args: JobsArgs) -> i32 {
    finish(jobs_inner(vars, args))
}

fn jobs_inner(vars: &plan::Vars, args: JobsArgs) -> Result<(), Failure> {
    let config = load_config(vars)?;
    let spool = spool_for(args.spool, &config);
    let list = spool::list(&spool).map_err(|e| Failure(exit::OUTPUT, e.to_string()))?;
    let text = if args.json {
        serde_json::to_string_pretty(&list)
            .map_err(|e| Failure(exit::OUTPUT, format!("encoding JSON: {e}")))?
            + "\n"
    } else {
        table(&list)
    };
    write_stdout(&text)
}

fn status_of(j: &JobInfo) -> String {
    match (j.exit_code, j.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => nix_signal_name(s),
        _ => "-".into(),
    }
}

fn nix_signal_name(sig: i32) -> String {
    // The few a job dies of; anything else by number.
    match sig {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        6 => "SIGABRT".into(),
        9 => "SIGKILL".into(),
        11 => "SIGSEGV".into(),
        13 => "SIGPIPE".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// One line per job: ID, state, status, start, duration, reason.
fn table(list: &[JobInfo]) -> String {
    let rows: Vec<[String; 6]> = list
        .iter()
        .map(|j| {
            [
                j.id.clone(),
                j.state.as_str().to_string(),
                status_of(j),
                j.started_at.clone().unwrap_or_else(|| "-".into()),
                j.duration_secs
                    .map_or_else(|| "-".into(), |d| format!("{d:.3}s")),
                j.reason.clone().unwrap_or_default(),
            ]
        })
        .collect();
    let header = [
        "ID".to_string(),
        "STATE".into(),
        "STATUS".into(),
        "STARTED".into(),
        "DURATION".into(),
        "REASON".into(),
    ];
    let mut widths = [0usize; 6];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i == 5 {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use landwall::spool::State;

    fn info(id: &str, state: State, code: Option<i32>, sig: Option<i32>) -> JobInfo {
        JobInfo {
            id: id.into(),
            state,
            exit_code: code,
            signal: sig,
            reason: None,
            submitted_at: None,
            started_at: None,
            ended_at: None,
            duration_secs: None,
            worktree: None,
            argv: None,
            log: PathBuf::from("/x"),
        }
    }

    #[test]
    fn table_has_a_header_and_one_line_per_job() {
        let t = table(&[
            info("a", State::Done, Some(0), None),
            info("bb", State::Failed, None, Some(9)),
            info("c", State::Queued, None, None),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("ID  STATE"), "{t}");
        assert!(
            lines[1].contains("done") && lines[1].contains("exit 0"),
            "{t}"
        );
        assert!(lines[2].contains("SIGKILL"), "{t}");
        assert!(lines[3].contains("queued"), "{t}");
    }
}
