//! The admin CLI (`landwall` under its own name): inspect and exercise the wall.

use std::convert::Infallible;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use serde::Serialize;

use landwall::config::{self, Config, ConfigPaths};
use landwall::launch::{self, LiveKernel};
use landwall::plan::{self, var};
use landwall::policy::Policy;
use landwall::worktree::GitLayout;
use landwall::{exit, Error};

/// A kernel-enforced Landlock wall around coding agents.
///
/// Run as `claude`, `opencode`, `codex` (links to this binary ahead of the real agents on
/// PATH), it walls the agent into its git worktree and execs it. Run as `landwall`, it
/// inspects and exercises that wall.
#[derive(Debug, Parser)]
#[command(name = "landwall", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check that the wall can go up here: kernel Landlock ABI and features, configuration,
    /// which real agent each shim would run, and the doors beside the wall (loopback TCP
    /// listeners, Unix sockets), each with how to close it. Exits non-zero if the shim could
    /// not work.
    Doctor,
    /// Show the exact rules and environment the shim would apply here.
    Policy {
        /// Print one JSON object instead of text.
        #[arg(long)]
        json: bool,
        /// The worktree to build the policy for (default: the git top level of the cwd).
        #[arg(long, value_name = "DIR")]
        worktree: Option<PathBuf>,
        /// The agent whose policy to show.
        #[arg(long, value_name = "NAME", default_value = "claude")]
        agent: String,
    },
    /// Say, for each path, whether the agent could write it, only read it, or not reach it,
    /// and which rule decides.
    Check {
        /// The worktree to build the policy for (default: the git top level of the cwd).
        #[arg(long, value_name = "DIR")]
        worktree: Option<PathBuf>,
        /// The agent whose policy to use.
        #[arg(long, value_name = "NAME", default_value = "claude")]
        agent: String,
        /// Paths to check.
        #[arg(required = true, value_name = "PATH")]
        paths: Vec<PathBuf>,
    },
    /// Run any command behind the same wall the shim puts up (same PID: landwall execs it).
    Run {
        /// The worktree to wall the command into (default: the git top level of the cwd).
        #[arg(long, value_name = "DIR")]
        worktree: Option<PathBuf>,
        /// The agent profile (environment patterns, config section) to apply.
        #[arg(long, value_name = "NAME", default_value = "claude")]
        agent: String,
        /// The command and its arguments, after `--`.
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "CMD"
        )]
        command: Vec<OsString>,
    },
    /// Queue a job for landwall-drain: the command runs later, walled into the worktree.
    /// Prints the job ID.
    Submit(crate::jobs::SubmitArgs),
    /// List the drain spool's jobs: ID, state (queued, running, done, failed, tampered),
    /// exit status, times.
    Jobs(crate::jobs::JobsArgs),
    /// Put the shim directory first on PATH in your shell startup files, or take it out
    /// again: `landwall shim enable --user`, `landwall shim disable --user`.
    Shim(crate::shimcmd::ShimArgs),
}

/// The clap definition of the admin CLI, for the man page and the shell completions (xtask).
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Starts `env_logger` only when `LANDWALL_LOG` is set: on the launch path a logger that
/// would print nothing is not worth building.
pub fn init_logging(vars: &plan::Vars) {
    if let Some(filter) = var(vars, "LANDWALL_LOG") {
        let mut b = env_logger::Builder::new();
        b.parse_filters(&filter.to_string_lossy())
            .target(env_logger::Target::Stderr);
        // A logger already set (never here) just means logs go there instead.
        if b.try_init().is_err() {
            eprintln!("landwall: logging was already initialised");
        }
    }
}

/// Runs the admin CLI; returns the exit status.
pub fn main(argv: Vec<OsString>) -> i32 {
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { exit::USAGE } else { 0 };
            if e.print().is_err() {
                return exit::USAGE;
            }
            return code;
        }
    };
    let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    init_logging(&vars);
    let result = match cli.command {
        Command::Doctor => return crate::doctor::run(&vars),
        Command::Policy {
            json,
            worktree,
            agent,
        } => policy(&vars, &agent, worktree.as_deref(), json),
        Command::Check {
            worktree,
            agent,
            paths,
        } => check(&vars, &agent, worktree.as_deref(), &paths),
        Command::Run {
            worktree,
            agent,
            command,
        } => match run(&vars, &agent, worktree.as_deref(), command) {
            Ok(never) => match never {},
            Err(e) => Err(e),
        },
        Command::Submit(args) => return crate::jobs::submit(&vars, args),
        Command::Jobs(args) => return crate::jobs::jobs(&vars, args),
        Command::Shim(args) => return crate::shimcmd::run(&vars, args),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("landwall: {}", landwall::spool::printable(&e.to_string()));
            e.exit_code()
        }
    }
}

pub(crate) fn load_config(vars: &plan::Vars) -> Result<Config, Error> {
    Ok(config::load(&ConfigPaths::from_env(|k| {
        var(vars, k).map(OsString::from)
    }))?)
}

fn cwd() -> Result<PathBuf, Error> {
    std::env::current_dir().map_err(|source| {
        Error::Worktree(landwall::worktree::WorktreeError::Resolve {
            path: ".".into(),
            source,
        })
    })
}

/// The real agent for `agent`, if one can be found (informational: `policy` and `check`
/// still answer when the agent is not installed).
fn real_agent(vars: &plan::Vars, agent: &str, config: &Config) -> Result<Option<PathBuf>, Error> {
    let me = plan::current_exe_id()?;
    Ok(plan::find_agent(agent, vars, config, me)
        .ok()
        .map(|(p, _)| p))
}

fn build(
    vars: &plan::Vars,
    agent: &str,
    worktree: Option<&Path>,
) -> Result<(Policy, Option<PathBuf>), Error> {
    if !config::valid_agent_name(agent) {
        return Err(Error::Usage(format!(
            "`{agent}` is not a valid agent name (letters, digits, `-`, `_`, `.`)"
        )));
    }
    let config = load_config(vars)?;
    let real = real_agent(vars, agent, &config)?;
    let policy = plan::build_policy(
        agent,
        real.as_deref(),
        &cwd()?,
        true,
        worktree,
        vars,
        &config,
        false,
    )?;
    Ok((policy, real))
}

#[derive(Serialize)]
struct PolicyJson<'a> {
    agent: &'a str,
    real_agent: Option<&'a Path>,
    worktree: &'a Path,
    git: GitJson<'a>,
    min_abi: u32,
    rules: Vec<RuleJson<'a>>,
    denied: &'a [PathBuf],
    network: NetJson<'a>,
    unix: UnixJson<'a>,
    env: EnvJson,
    protected: Vec<ProtectedJson<'a>>,
    notes: &'a [String],
}

/// A protected path: how the launch keeps it (`read-only`, `in place`, or `swept if
/// created`), and why.
#[derive(Serialize)]
struct ProtectedJson<'a> {
    path: &'a Path,
    hold: &'static str,
    reason: &'a str,
}

fn protected_json(policy: &Policy) -> Vec<ProtectedJson<'_>> {
    use landwall::protect::Hold;
    let held = policy.protection.held.iter().map(|h| ProtectedJson {
        path: &h.path,
        hold: match h.hold {
            Hold::ReadOnly => "read-only",
            Hold::InPlace => "in place",
            Hold::Shared => "read-only",
            Hold::Hole => "writable (own)",
            Hold::Fresh => "empty (own)",
            Hold::Private => "writable (own copy)",
            Hold::Layer => "writable (project's own layer)",
            Hold::Own => "writable (project's own)",
        },
        reason: &h.reason,
    });
    let absent = policy.protection.absent.iter().map(|a| ProtectedJson {
        path: &a.path,
        hold: "swept if created",
        reason: &a.reason,
    });
    held.chain(absent).collect()
}

#[derive(Serialize)]
struct NetJson<'a> {
    connect_tcp: Option<&'a [u16]>,
    bind_tcp: Option<&'a [u16]>,
}

/// `[unix]`: the named sockets that exist (real paths), the named ones that do not, and the
/// escape hatch.
#[derive(Serialize)]
struct UnixJson<'a> {
    sockets: &'a [PathBuf],
    missing: &'a [PathBuf],
    allow_all: bool,
}

#[derive(Serialize)]
struct GitJson<'a> {
    layout: &'static str,
    git_dir: Option<&'a Path>,
    common_dir: Option<&'a Path>,
    /// Where new objects go (linked worktrees).
    quarantine: Option<&'a Path>,
    /// Where each git dir came from and how it was checked.
    sources: Vec<String>,
}

#[derive(Serialize)]
struct RuleJson<'a> {
    path: &'a Path,
    access: String,
    reason: &'a str,
}

#[derive(Serialize)]
struct EnvJson {
    passed: Vec<String>,
    set: Vec<String>,
    dropped: Vec<String>,
    allow: Vec<String>,
    deny: Vec<String>,
}

/// Where each git dir of `policy` came from and how it was checked (for `doctor`).
pub(crate) fn git_sources(policy: &Policy) -> Vec<String> {
    git_json(policy).sources
}

fn git_json(policy: &Policy) -> GitJson<'_> {
    let quarantine = policy.quarantine.as_ref().map(|q| q.dir.as_path());
    let dotgit = policy.worktree.root.join(".git");
    match &policy.worktree.git {
        GitLayout::None => GitJson {
            layout: "none",
            git_dir: None,
            common_dir: None,
            quarantine,
            sources: Vec::new(),
        },
        GitLayout::Main { git_dir } => GitJson {
            layout: "main",
            git_dir: Some(git_dir),
            common_dir: None,
            quarantine,
            sources: vec![format!(
                "git dir {}: the worktree's own .git directory",
                git_dir.display()
            )],
        },
        GitLayout::Linked {
            git_dir,
            common_dir: Some(common),
        } => GitJson {
            layout: "linked",
            git_dir: Some(git_dir),
            common_dir: Some(common),
            quarantine,
            sources: vec![
                format!(
                    "git dir {}: named by {}; its gitdir names that file back",
                    git_dir.display(),
                    dotgit.display()
                ),
                format!(
                    "common dir {}: named by {}/commondir; holds worktrees/{}",
                    common.display(),
                    git_dir.display(),
                    git_dir
                        .file_name()
                        .map(|n| n.to_string_lossy())
                        .unwrap_or_default()
                ),
                format!(
                    "objects {}/objects: read-only; new objects go to {} and are verified into it by a watcher outside the wall",
                    common.display(),
                    quarantine.map(|q| q.display().to_string()).unwrap_or_default()
                ),
            ],
        },
        GitLayout::Linked {
            git_dir,
            common_dir: None,
        } => GitJson {
            layout: "submodule",
            git_dir: Some(git_dir),
            common_dir: None,
            quarantine,
            sources: vec![format!(
                "git dir {}: named by {}; under the superproject's modules/, its core.worktree names this worktree back",
                git_dir.display(),
                dotgit.display()
            )],
        },
    }
}

fn policy(
    vars: &plan::Vars,
    agent: &str,
    worktree: Option<&Path>,
    json: bool,
) -> Result<(), Error> {
    let (policy, real) = build(vars, agent, worktree)?;
    let (passed, dropped): (Vec<_>, Vec<_>) = vars.iter().partition(|(k, _)| policy.env.passes(k));
    let names = |v: Vec<&(OsString, OsString)>| -> Vec<String> {
        v.into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    };
    let out = PolicyJson {
        agent,
        real_agent: real.as_deref(),
        worktree: &policy.worktree.root,
        git: git_json(&policy),
        min_abi: policy.min_abi,
        rules: policy
            .rules
            .iter()
            .map(|r| RuleJson {
                path: &r.path,
                access: r.access.to_string(),
                reason: &r.reason,
            })
            .collect(),
        denied: &policy.denied,
        network: NetJson {
            connect_tcp: policy.network.connect_tcp.as_deref(),
            bind_tcp: policy.network.bind_tcp.as_deref(),
        },
        unix: UnixJson {
            sockets: &policy.unix.sockets,
            missing: &policy.unix.missing,
            allow_all: policy.unix.allow_all,
        },
        notes: &policy.notes,
        protected: protected_json(&policy),
        env: EnvJson {
            set: policy
                .env_defaults
                .iter()
                .filter(|(k, _)| var(vars, &k.to_string_lossy()).is_none())
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect(),
            passed: names(passed),
            dropped: names(dropped),
            allow: policy
                .env
                .allowed()
                .iter()
                .map(ToString::to_string)
                .collect(),
            deny: policy
                .env
                .denied()
                .iter()
                .map(ToString::to_string)
                .collect(),
        },
    };
    let text = if json {
        serde_json::to_string_pretty(&out).map_err(|e| Error::Output(std::io::Error::other(e)))?
            + "\n"
    } else {
        printable_lines(&render_policy(&out, landwall::wall::kernel_abi().ok()))
    };
    write_stdout(&text)
}

/// The policy as text; `abi` (the kernel's Landlock ABI, if it has Landlock) says which guard
/// keeps the agent from Unix sockets.
fn render_policy(p: &PolicyJson<'_>, abi: Option<u32>) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let real = p
        .real_agent
        .map_or("(not found)".to_string(), |r| r.display().to_string());
    // Writing to a String cannot fail.
    let _infallible = writeln!(s, "agent      {}  (real: {real})", p.agent);
    let _infallible = writeln!(s, "worktree   {}", p.worktree.display());
    let git = match (p.git.git_dir, p.git.common_dir) {
        (Some(g), Some(c)) => format!(
            "{} (git dir {}, common dir {})",
            p.git.layout,
            g.display(),
            c.display()
        ),
        (Some(g), None) => format!("{} (git dir {})", p.git.layout, g.display()),
        _ => p.git.layout.to_string(),
    };
    let _infallible = writeln!(s, "git        {git}");
    for source in &p.git.sources {
        let _infallible = writeln!(s, "  {source}");
    }
    let _infallible = writeln!(s, "min ABI    {}", p.min_abi);
    let _infallible = writeln!(s, "rules (everything else is denied):");
    for r in &p.rules {
        let _infallible = writeln!(s, "  {:<17} {}  ({})", r.access, r.path.display(), r.reason);
    }
    for d in p.denied {
        let _infallible = writeln!(s, "  {:<17} {}  (deny)", "denied", d.display());
    }
    let ports = |l: Option<&[u16]>| match l {
        None => "not restricted".to_string(),
        Some(l) => format!(
            "only {}",
            l.iter().map(u16::to_string).collect::<Vec<_>>().join(",")
        ),
    };
    let _infallible = writeln!(
        s,
        "network    TCP connect: {}; TCP bind: {}; UDP: not restricted",
        ports(p.network.connect_tcp),
        ports(p.network.bind_tcp)
    );
    let _infallible = writeln!(s, "unix       {}", unix_text(&p.unix, abi));
    let _infallible = writeln!(s, "environment passed: {}", p.env.passed.join(" "));
    if !p.env.set.is_empty() {
        let _infallible = writeln!(s, "environment set: {}", p.env.set.join(" "));
    }
    let _infallible = writeln!(s, "environment dropped: {}", p.env.dropped.join(" "));
    let _infallible = writeln!(
        s,
        "protected (in the launch's mount namespace; where it is refused, see doctor):"
    );
    let rel = |path: &Path| {
        path.strip_prefix(p.worktree)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    for h in p.protected.iter().filter(|h| h.hold != "swept if created") {
        let _infallible = writeln!(s, "  {:<17} {}  ({})", h.hold, rel(h.path), h.reason);
    }
    let swept: Vec<String> = p
        .protected
        .iter()
        .filter(|h| h.hold == "swept if created")
        .map(|h| rel(h.path))
        .collect();
    if !swept.is_empty() {
        let _infallible = writeln!(
            s,
            "  swept if created  {}  (absent now: set aside when the agent exits if it made them)",
            swept.join(" ")
        );
    }
    for n in p.notes {
        let _infallible = writeln!(s, "note: {n}");
    }
    s
}

/// The `unix` line of `landwall policy`: which Unix sockets outside the wall the agent can
/// reach, and what refuses the rest on a kernel with Landlock `abi`.
fn unix_text(u: &UnixJson<'_>, abi: Option<u32>) -> String {
    use landwall::wall::{UnixGuard, RESOLVE_UNIX_ABI};
    let names_sockets = !u.sockets.is_empty() || !u.missing.is_empty();
    let named = || {
        let present = u.sockets.iter().map(|p| p.display().to_string());
        let missing = u
            .missing
            .iter()
            .map(|p| format!("{} (not there)", p.display()));
        format!(
            "named: {}",
            present.chain(missing).collect::<Vec<_>>().join(", ")
        )
    };
    // Without Landlock no launch goes ahead; say what the configuration asks for.
    let guard = abi.map(|abi| crate::doctor::unix_guard(u.allow_all, names_sockets, abi));
    match guard {
        _ if u.allow_all => {
            "ALL REACHABLE (allow_all): every Unix socket the user can reach, servers outside the wall that act for the agent included".to_string()
        }
        Some(Some(UnixGuard::Landlock)) if names_sockets => format!(
            "{}; every other socket outside the wall refused by path (Landlock ABI {RESOLVE_UNIX_ABI})",
            named()
        ),
        Some(Some(UnixGuard::Landlock)) => format!(
            "refused by path (Landlock ABI {RESOLVE_UNIX_ABI}); the agent's own sockets work"
        ),
        Some(None) => format!(
            "{}; REFUSED: this kernel has Landlock ABI {}, and permitting one socket by path needs ABI {RESOLVE_UNIX_ABI}, so launches exit 78",
            named(),
            abi.unwrap_or_default()
        ),
        None if names_sockets => format!(
            "{}; every other socket refused by path (needs Landlock ABI {RESOLVE_UNIX_ABI})",
            named()
        ),
        _ => format!(
            "refused (seccomp: no socket(AF_UNIX); Landlock ABI {RESOLVE_UNIX_ABI} refuses by path)"
        ),
    }
}

fn check(
    vars: &plan::Vars,
    agent: &str,
    worktree: Option<&Path>,
    paths: &[PathBuf],
) -> Result<(), Error> {
    let (policy, _) = build(vars, agent, worktree)?;
    let here = cwd()?;
    let mut out = String::new();
    for p in paths {
        let abs = if p.is_absolute() {
            p.clone()
        } else {
            here.join(p)
        };
        let d = policy.decide(&abs);
        let held = policy.protection.covering(&d.resolved);
        let swept = policy.protection.absent_covering(&d.resolved);
        let line = match (d.rule, held, swept) {
            (Some(_), Some(h), _) => format!(
                "{:<17} {}  (protected {}: {}; read-only in the launch's mount namespace)\n",
                "read-only",
                p.display(),
                h.path.display(),
                h.reason
            ),
            (Some(r), None, Some(a)) => format!(
                "{:<17} {}  (rule {}: {}; protected {}: {}; it does not exist now, and if the agent creates it, it is set aside (renamed, inert) when the agent exits)\n",
                r.access,
                p.display(),
                r.path.display(),
                r.reason,
                a.path.display(),
                a.reason
            ),
            (Some(r), _, _) => format!(
                "{:<17} {}  (rule {}: {})\n",
                r.access,
                p.display(),
                r.path.display(),
                r.reason
            ),
            (None, _, _) => format!(
                "{:<17} {}  (no rule covers {})\n",
                "denied",
                p.display(),
                d.resolved.display()
            ),
        };
        out.push_str(&line);
    }
    write_stdout(&printable_lines(&out))
}

fn run(
    vars: &plan::Vars,
    agent: &str,
    worktree: Option<&Path>,
    command: Vec<OsString>,
) -> Result<Infallible, Error> {
    launch::sanitize_fds().map_err(Error::Fds)?;
    let cmd = command
        .first()
        .ok_or_else(|| Error::Usage("no command given: landwall run -- CMD ARGS...".into()))?;
    let program = plan::resolve_command(cmd, vars)?;
    if !config::valid_agent_name(agent) {
        return Err(Error::Usage(format!(
            "`{agent}` is not a valid agent name (letters, digits, `-`, `_`, `.`)"
        )));
    }
    let config = load_config(vars)?;
    let policy = plan::build_policy(
        agent,
        Some(&program),
        &cwd()?,
        true,
        worktree,
        vars,
        &config,
        true,
    )?;
    let exec = plan::prepare(&policy, &program, &command, vars)?;
    Err(launch::wall_and_exec(
        &mut LiveKernel::default(),
        &policy,
        &exec,
    ))
}

/// `text` with control characters escaped line by line (paths in it may be names an agent
/// chose, such as a forged git dir's, holding terminal escapes).
pub(crate) fn printable_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, nl) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        out.push_str(&landwall::spool::printable(body));
        out.push_str(nl);
    }
    out
}

fn write_stdout(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(Error::Output)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unix<'a>(sockets: &'a [PathBuf], missing: &'a [PathBuf], allow_all: bool) -> UnixJson<'a> {
        UnixJson {
            sockets,
            missing,
            allow_all,
        }
    }

    #[test]
    fn the_unix_line_says_what_refuses_sockets_on_each_kernel() {
        let none: &[PathBuf] = &[];
        let named = [PathBuf::from("/run/user/1000/ssh.sock")];
        let gone = [PathBuf::from("/run/gone.sock")];
        assert_eq!(
            unix_text(&unix(none, none, false), Some(7)),
            "refused (seccomp: no socket(AF_UNIX); Landlock ABI 9 refuses by path)"
        );
        assert_eq!(
            unix_text(&unix(none, none, false), Some(9)),
            "refused by path (Landlock ABI 9); the agent's own sockets work"
        );
        assert!(unix_text(&unix(&named, &gone, false), Some(9)).starts_with(
            "named: /run/user/1000/ssh.sock, /run/gone.sock (not there); every other socket"
        ));
        let refused = unix_text(&unix(none, &gone, false), Some(8));
        assert!(
            refused.starts_with("named: /run/gone.sock (not there); REFUSED")
                && refused.contains("exit 78"),
            "{refused}"
        );
        for abi in [Some(7), Some(9), None] {
            assert!(
                unix_text(&unix(&named, none, true), abi).starts_with("ALL REACHABLE (allow_all)")
            );
        }
    }
}
