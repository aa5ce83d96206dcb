//! `landwall doctor`: can the wall go up here, what would each shim run, and what does the
//! policy leave open. Exits non-zero when the shim could not work on this machine.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use landwall::agent::{FileId, Found};
use landwall::config::{self, ConfigPaths, DEFAULT_MIN_ABI};
use landwall::plan::{self, var};
use landwall::wall;

/// The agents landwall ships shims for.
pub const KNOWN_AGENTS: &[&str] = &["claude", "opencode", "codex"];

/// Runs the checks; prints a report on stdout; returns the exit status.
pub fn run(vars: &plan::Vars) -> i32 {
    let mut out = String::new();
    let mut ok = true;
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };

    line(format!("landwall {}", env!("CARGO_PKG_VERSION")));
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let paths = ConfigPaths::from_env(|k| var(vars, k).map(OsString::from));

    // Configuration first: it sets the minimum ABI.
    let config = match config::load(&paths) {
        Ok(c) => {
            if c.sources.is_empty() {
                line(format!(
                    "config      {}: not present; the default policy applies",
                    paths.system.display()
                ));
            }
            for s in &c.sources {
                line(format!("config      {}: valid", s.display()));
            }
            c
        }
        Err(e) => {
            ok = false;
            line(format!("config      INVALID: {e}"));
            config::Config::default()
        }
    };
    if let Some(user) = &paths.user {
        line(format!(
            "user config {}: {}; note: under the default policy the agent can write this file (it is under $HOME), and it can add grants for the next launch",
            user.display(),
            if user.exists() { "present" } else { "absent" }
        ));
    }

    // Kernel.
    match wall::kernel_abi() {
        Ok(abi) => {
            line(format!(
                "kernel      {} with Landlock ABI {abi}",
                release.trim()
            ));
            for (name, since, on) in wall::features(abi) {
                let when = match (on, since) {
                    (false, _) => ": NOT available on this kernel, so not enforced",
                    (true, 4) if !config.network.is_restricted() => {
                        ": available; enforced only when [network] lists ports"
                    }
                    (true, _) => ": enforced",
                };
                line(format!(
                    "  [{}] {name} (ABI {since}){when}",
                    if on { "x" } else { " " }
                ));
            }
            let source = if config.min_abi == DEFAULT_MIN_ABI {
                "default"
            } else {
                "configured"
            };
            if abi >= config.min_abi {
                line(format!("min ABI     {} ({source}): met", config.min_abi));
            } else {
                ok = false;
                line(format!(
                    "min ABI     {} ({source}): NOT MET — the shim refuses to launch agents on this kernel",
                    config.min_abi
                ));
            }
        }
        Err(e) => {
            ok = false;
            line(format!("kernel      {}: {e}", release.trim()));
        }
    }

    // Agents.
    let me = plan::current_exe_id().ok();
    for agent in KNOWN_AGENTS {
        line(agent_line(agent, vars, &config, me));
    }

    // What the policy for this directory leaves open.
    for l in exposure(vars, &config) {
        line(l);
    }
    line(if ok {
        "result      the shim can wall agents in on this machine".to_string()
    } else {
        "result      the shim CANNOT work here; see the lines above".to_string()
    });

    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(crate::cli::printable_lines(&out).as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return landwall::exit::OUTPUT;
    }
    if ok {
        0
    } else {
        landwall::exit::DOCTOR_FAILED
    }
}

fn first_on_path(name: &str, vars: &plan::Vars) -> Option<PathBuf> {
    let path = var(vars, "PATH")?;
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn agent_line(
    agent: &str,
    vars: &plan::Vars,
    config: &config::Config,
    me: Option<FileId>,
) -> String {
    let mut s = format!("agent       {agent:<9}");
    let on_path = first_on_path(agent, vars);
    match &on_path {
        Some(p) => {
            let is_shim = me.is_some() && FileId::of(p).ok() == me;
            let _infallible = write!(
                s,
                "`{agent}` on PATH is {}{}",
                p.display(),
                if is_shim {
                    " (the landwall shim)"
                } else {
                    " (NOT the shim: this agent runs unwalled)"
                }
            );
        }
        None => s.push_str("not on PATH"),
    }
    if let Some(me) = me {
        match plan::find_agent(agent, vars, config, me) {
            Ok((real, how)) => {
                let how = match how {
                    Found::Config => "configured",
                    Found::RealSuffix => "-real on PATH",
                    Found::NextOnPath => "next on PATH",
                };
                let _infallible = write!(s, "; the shim would exec {} ({how})", real.display());
            }
            Err(_) => s.push_str("; no real agent found"),
        }
    }
    s
}

/// Sensitive paths a user would not want an agent to write, relative to `$HOME`.
const SENSITIVE_IN_HOME: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".profile",
    ".zshrc",
    ".ssh",
    ".gitconfig",
    ".config/git",
    ".config/landwall/landwall.toml",
];

/// Which sensitive paths the agent could write under the policy for the cwd.
fn exposure(vars: &plan::Vars, config: &config::Config) -> Vec<String> {
    let cwd = match std::env::current_dir() {
        Ok(c) => c,
        Err(e) => return vec![format!("exposure    cannot read the cwd: {e}")],
    };
    let policy = match plan::build_policy("claude", None, &cwd, true, None, vars, config) {
        Ok(p) => p,
        Err(e) => {
            return vec![format!(
                "exposure    no policy for {}: {}",
                cwd.display(),
                landwall::spool::printable(&e.to_string())
            )]
        }
    };
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(home) = var(vars, "HOME") {
        candidates.extend(SENSITIVE_IN_HOME.iter().map(|p| Path::new(home).join(p)));
    }
    let git_dirs: Vec<PathBuf> = match &policy.worktree.git {
        landwall::worktree::GitLayout::Main { git_dir } => vec![git_dir.clone()],
        // Git reads hooks and config from the common dir (a submodule's own git dir).
        landwall::worktree::GitLayout::Linked {
            git_dir,
            common_dir,
        } => vec![common_dir.clone().unwrap_or_else(|| git_dir.clone())],
        landwall::worktree::GitLayout::None => Vec::new(),
    };
    for g in git_dirs {
        candidates.push(g.join("config"));
        candidates.push(g.join("hooks"));
    }
    let writable: Vec<String> = candidates
        .iter()
        .filter(|p| policy.decide(p).rule.is_some_and(|r| r.access.writes()))
        .map(|p| p.display().to_string())
        .collect();
    let mut out = Vec::new();
    if let Some(first) = crate::cli::git_sources(&policy).first() {
        out.push(format!("git dirs    {first}"));
        out.extend(
            crate::cli::git_sources(&policy)
                .iter()
                .skip(1)
                .map(|s| format!("            {s}")),
        );
    }
    out.push(if writable.is_empty() {
        format!(
            "exposure    in {}: none of the sensitive paths checked is writable by the agent",
            policy.worktree.root.display()
        )
    } else {
        format!(
            "exposure    in {}, the agent can write: {} (code planted there can run later outside the wall)",
            policy.worktree.root.display(),
            writable.join(", ")
        )
    });
    if let Some(q) = &policy.quarantine {
        let root = landwall::plan::running_as_root();
        out.push(match landwall::ns::probe(root) {
            Ok(()) => format!(
                "namespace   a private mount namespace is available: {}/ is read-only to the agent, its new objects go to {}",
                q.objects.display(),
                q.dir.display()
            ),
            Err(e) => format!(
                "namespace   a private mount namespace is REFUSED here ({e}): the agent can change {} (existing objects included); protect_required = true refuses to launch instead",
                q.objects.display()
            ),
        });
        let kept = kept_back(&q.dir);
        if kept > 0 {
            out.push(format!(
                "quarantine  {kept} object(s) in {} were not moved into the repository: they failed the check of content against name (or are being written now)",
                q.dir.display()
            ));
        }
    }
    out.extend(policy.notes.iter().map(|n| format!("note        {n}")));
    out
}

/// Files with an object's name left in a quarantine's fan-out directories.
fn kept_back(quarantine: &Path) -> usize {
    let Ok(dirs) = std::fs::read_dir(quarantine) else {
        return 0;
    };
    dirs.flatten()
        .filter(|d| {
            let n = d.file_name();
            n.len() == 2 && n.to_string_lossy().bytes().all(|b| b.is_ascii_hexdigit())
        })
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|entries| entries.flatten())
        .filter(|e| {
            let n = e.file_name();
            matches!(n.len(), 38 | 62) && n.to_string_lossy().bytes().all(|b| b.is_ascii_hexdigit())
        })
        .count()
}
