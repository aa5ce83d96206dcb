//! `landwall submit` and `landwall jobs`: the admin side of the drain spool (the daemon is
//! `landwall-drain`; the spool's layout is documented in `landwall::spool`).
//!
//! Exit statuses: 0 done; 2 bad command line or a job the daemon would refuse anyway (bad
//! timeout or cap, denylisted variable, …); 74 the spool could not be read or written (or
//! stdout); 78 the configuration or the worktree is wrong.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::Args;

use landwall::config::{self, Config};
use landwall::limits::{self, JobCaps};
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
    /// Cap the job's memory (`512M`, `2G`; K, M, G, T are powers of 1024). At most the
    /// daemon's `memory_max`, which is the default.
    #[arg(long, value_name = "SIZE")]
    memory: Option<String>,
    /// Cap the job's tasks: processes and threads together. At most the daemon's
    /// `tasks_max`, which is the default (4096 unless set).
    #[arg(long, value_name = "N")]
    tasks: Option<String>,
    /// Cap the job's CPU share, in percent of one CPU (`50%`; `200%` is two CPUs). At most
    /// the daemon's `cpu_max`, which is the default.
    #[arg(long, value_name = "PERCENT")]
    cpu: Option<String>,
    /// Cap the job's log (`16M`): output past it is dropped and the job is stopped. At most
    /// the daemon's `log_max`, which is the default (64M unless set).
    #[arg(long = "log-max", value_name = "SIZE")]
    log_max: Option<String>,
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
    let caps = caps_of(&args)?;
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
        ..caps_for_job(&caps)
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

/// The caps `--memory`, `--tasks`, `--cpu` and `--log-max` ask for; a bad one is refused
/// naming its option.
fn caps_of(args: &SubmitArgs) -> Result<JobCaps, Failure> {
    fn one<T>(
        option: &str,
        text: Option<&str>,
        parse: impl Fn(&str) -> Result<T, String>,
    ) -> Result<Option<T>, Failure> {
        text.map(|t| parse(t).map_err(|why| usage(format!("{option}: {why}"))))
            .transpose()
    }
    let tasks = |t: &str| match t.trim().parse::<u32>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "`{t}` is not a number of tasks: write a whole number from 1 to {}",
            u32::MAX
        )),
    };
    Ok(JobCaps {
        memory: one("--memory", args.memory.as_deref(), limits::parse_size)?,
        tasks: one("--tasks", args.tasks.as_deref(), tasks)?,
        cpu: one("--cpu", args.cpu.as_deref(), limits::parse_cpu)?,
        log: one("--log-max", args.log_max.as_deref(), limits::parse_size)?,
    })
}

/// The job file's keys for `caps`, written the way the documentation writes them
/// (`512M`, `50%`).
fn caps_for_job(caps: &JobCaps) -> RawJob {
    RawJob {
        memory: caps.memory.map(limits::size_text),
        tasks: caps.tasks.map(i64::from),
        cpu: caps.cpu.map(|c| format!("{c}%")),
        log: caps.log.map(limits::size_text),
        ..RawJob::default()
    }
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
        json_for_terminals(
            &serde_json::to_string_pretty(&list)
                .map_err(|e| Failure(exit::OUTPUT, format!("encoding JSON: {e}")))?,
        ) + "\n"
    } else {
        table(&list)
    };
    write_stdout(&text)
}

/// serde_json escapes the C0 controls in strings, but passes DEL, the C1 controls and the
/// invisible formatting characters through raw: escape those as `\uXXXX` too, so that
/// `--json` on a terminal is as safe as the table. Outside its strings JSON has only ASCII
/// punctuation and whitespace (never one of these), so replacing each by its escape
/// leaves the same document.
fn json_for_terminals(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if u32::from(c) >= 0x7f && spool::is_unprintable(c) {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
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

/// One line per job: ID, state, status, start, duration, reason. Every cell that comes from
/// a file in the spool goes through [`spool::printable`]: a reason can quote what a job
/// wrote (its `.git` file), and must not reach the terminal as escape sequences.
fn table(list: &[JobInfo]) -> String {
    let cell = |s: &str| spool::printable(s).into_owned();
    let rows: Vec<[String; 6]> = list
        .iter()
        .map(|j| {
            [
                cell(&j.id),
                j.state.as_str().to_string(),
                status_of(j),
                j.started_at.as_deref().map_or_else(|| "-".into(), cell),
                j.duration_secs
                    .map_or_else(|| "-".into(), |d| format!("{d:.3}s")),
                j.reason.as_deref().map(cell).unwrap_or_default(),
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

    fn submit_args(extra: &[&str]) -> Result<SubmitArgs, clap::Error> {
        #[derive(Debug, clap::Parser)]
        struct Top {
            #[command(flatten)]
            args: SubmitArgs,
        }
        let argv = ["submit"].iter().chain(extra).chain(&["--", "echo"]);
        <Top as clap::Parser>::try_parse_from(argv).map(|t| t.args)
    }

    #[test]
    fn caps_options_are_checked_and_written_as_documented() {
        let args = submit_args(&[
            "--memory",
            "512MiB",
            "--tasks",
            "64",
            "--cpu",
            "150%",
            "--log-max",
            "16384K",
        ])
        .expect("parse");
        let caps = caps_of(&args).ok().expect("valid");
        assert_eq!(
            caps,
            JobCaps {
                memory: Some(512 << 20),
                tasks: Some(64),
                cpu: Some(150),
                log: Some(16 << 20),
            }
        );
        let job = caps_for_job(&caps);
        assert_eq!(job.memory.as_deref(), Some("512M"));
        assert_eq!(job.tasks, Some(64));
        assert_eq!(job.cpu.as_deref(), Some("150%"));
        assert_eq!(job.log.as_deref(), Some("16M"));
        let none = caps_of(&submit_args(&[]).expect("parse"))
            .ok()
            .expect("valid");
        assert_eq!(caps_for_job(&none), RawJob::default());
        for (option, value) in [
            ("--memory", "12X"),
            ("--tasks", "0"),
            ("--tasks", "many"),
            ("--cpu", "50"),
            ("--log-max", "0"),
        ] {
            let args = submit_args(&[option, value]).expect("parse");
            let Err(Failure(code, msg)) = caps_of(&args) else {
                panic!("{option} {value} accepted");
            };
            assert_eq!(code, exit::USAGE);
            assert!(msg.starts_with(&format!("{option}: ")), "{msg}");
            assert!(msg.contains(value) && !msg.contains('\n'), "{msg}");
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

    #[test]
    fn the_table_escapes_what_a_job_could_have_written() {
        let mut j = info("a", State::Failed, Some(78), None);
        j.reason = Some("not started: .git: \x1b]0;pwned\x07\x1b[2J\nnext \u{9b}1m".into());
        j.started_at = Some("\x1b[31m".into());
        let t = table(&[j]);
        assert!(
            !t.chars().any(|c| c != '\n' && spool::is_unprintable(c)),
            "{t:?}"
        );
        assert_eq!(t.lines().count(), 2, "{t:?}");
        assert!(t.contains("\\e]0;pwned\\x07\\e[2J\\nnext \\u{9b}1m"), "{t}");
        assert!(t.contains("\\e[31m"), "{t}");
    }

    #[test]
    fn json_stays_json_and_escapes_every_control() {
        let mut j = info("a", State::Failed, None, None);
        j.reason = Some("\x1b[2J\x07 \x7f \u{9b} \u{202e} \u{e0041}".into());
        j.argv = Some(vec!["sh".into(), "\x1b]0;pwned\x07".into()]);
        let text = json_for_terminals(&serde_json::to_string_pretty(&[&j]).expect("json"));
        assert!(
            !text.chars().any(|c| c != '\n' && spool::is_unprintable(c)),
            "{text:?}"
        );
        let back: serde_json::Value = serde_json::from_str(&text).expect("still JSON");
        assert_eq!(back[0]["reason"], j.reason.as_deref().expect("reason"));
        assert_eq!(back[0]["argv"][1], "\x1b]0;pwned\x07");
        assert!(text.contains("\\u001b]0;pwned\\u0007"), "{text}");
        assert!(text.contains("\\udb40\\udc41"), "{text}");
    }
}
