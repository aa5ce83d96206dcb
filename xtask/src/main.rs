//! Build-time tasks for the packages and `make install`.
//!
//! `cargo run -p xtask -- dist DIR` writes, from the binaries' own clap definitions
//! (`landwall_cli::command()`, `landwall_drain::command()`), so they never drift from
//! `--help`:
//!
//! - `DIR/man/landwall.1`, `DIR/man/landwall-drain.8` (clap_mangen, plus the sections the
//!   definitions do not carry: the shim's multi-call behaviour, files, exit statuses);
//! - `DIR/completions/{landwall,landwall-drain}.{bash,fish}` and `_landwall`,
//!   `_landwall-drain` for zsh (clap_complete).
//!
//! Compressing the man pages and choosing install paths is the Makefile's job.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Command;
use clap_complete::{Generator, Shell};
use clap_mangen::Man;
use roff::{bold, italic, roman, Inline, Roff};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let out = match args.as_slice() {
        [task, dir] if task == "dist" => PathBuf::from(dir),
        _ => {
            eprintln!("usage: cargo run -p xtask -- dist DIR");
            return ExitCode::from(2);
        }
    };
    match dist(&out) {
        Ok(files) => {
            for f in files {
                println!("{}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes every generated file under `out`; returns their paths.
fn dist(out: &Path) -> io::Result<Vec<PathBuf>> {
    let man = out.join("man");
    let comp = out.join("completions");
    fs::create_dir_all(&man)?;
    fs::create_dir_all(&comp)?;
    let mut written = Vec::new();
    let mut put = |path: PathBuf, bytes: Vec<u8>| -> io::Result<()> {
        fs::write(&path, bytes)?;
        written.push(path);
        Ok(())
    };
    put(man.join("landwall.1"), landwall_page()?)?;
    put(man.join("landwall-drain.8"), drain_page()?)?;
    for (name, cmd) in [
        ("landwall", landwall_cli::command()),
        ("landwall-drain", drain_for_completion()),
    ] {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let mut cmd = cmd.clone();
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut cmd, name, &mut buf);
            put(comp.join(shell.file_name(name)), buf)?;
        }
    }
    Ok(written)
}

const SOURCE_NOTE: &str = "Generated from the command-line definition by xtask.";

/// `landwall(1)`: the admin CLI, every subcommand with its options, and the shim.
fn landwall_page() -> io::Result<Vec<u8>> {
    let mut cmd = landwall_cli::command();
    cmd.build();
    let man = Man::new(cmd.clone()).manual("landwall manual");
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    man.render_synopsis_section(&mut buf)?;

    let mut r = Roff::new();
    r.control("SH", ["DESCRIPTION"]);
    para(
        &mut r,
        "landwall puts a wall enforced by the Linux kernel (Landlock, plus a small seccomp filter and an environment allowlist) around coding agents. It is one multi-call binary with two faces, chosen by the name it is run under.",
    );
    para(
        &mut r,
        "Run under an agent's name (claude, opencode, codex, or any other), through a link to it that sits ahead of the real agent on PATH, it is the shim: it drops its capabilities (as root, every capability set, the bounding set included; an ordinary user holds none and keeps its bounding set, which only CAP_SETPCAP can clear and which no_new_privs makes moot), sets no_new_privs, locks itself into a Landlock ruleset built for the git worktree of the current directory, rebuilds the environment from an allowlist, and then execs the real agent in the same process. If the wall cannot go up, the agent does not start.",
    );
    para(
        &mut r,
        "The real agent is, in this order: the configured real path ([agents.NAME] real), NAME-real anywhere on PATH, or the next NAME on PATH that is not landwall itself (compared by device and inode, so links to the shim are skipped).",
    );
    para(
        &mut r,
        "Packages install the links in /usr/lib/landwall/bin, and /etc/profile.d/landwall.sh puts that directory first on PATH for login shells; landwall shim enable --user does the same in a user's own startup files.",
    );
    para(&mut r, "Run as landwall, it is the admin CLI below.");
    buf.extend(r.render().into_bytes());
    man.render_options_section(&mut buf)?;

    let mut r = Roff::new();
    r.control("SH", ["COMMANDS"]);
    for sub in visible_subcommands(&cmd) {
        command_entry(&mut r, sub, &format!("landwall {}", sub.get_name()));
    }
    section(
        &mut r,
        "FILES",
        &[
            ("/etc/landwall/landwall.toml", "The system configuration (TOML). It and its directory must be owned by root and not writable by group or others. Unknown keys are errors."),
            ("$XDG_CONFIG_HOME/landwall/landwall.toml", "The per-user configuration (default ~/.config/landwall/landwall.toml); it can only add to the system file, and its keys that widen the wall count only when root owns it and the agent cannot rewrite it."),
            ("/usr/lib/landwall/bin", "The shim links claude, opencode and codex (PREFIX/lib/landwall/bin for make install)."),
            ("/etc/profile.d/landwall.sh", "Puts the shim directory first on PATH in login shells."),
            ("<repository>/.git/worktrees/<id>/landwall-objects/", "A linked worktree's object quarantine: the agent's git writes new objects here, and a watcher outside the wall moves each one whose content matches its name into the repository's objects/. Objects that fail the check stay here."),
            ("$XDG_RUNTIME_DIR/landwall/", "The names of the symlinks in /etc and /opt, kept between launches so that the shim need not list those directories each time; keyed on each directory's mtime and ctime, and each name is checked with readlink, so a stale or altered file can only leave a link out. Only used when $XDG_RUNTIME_DIR is a private directory of the user's; safe to delete."),
        ],
    );
    section(
        &mut r,
        "ENVIRONMENT",
        &[
            (
                "XDG_RUNTIME_DIR",
                "Where the shim keeps the names of /etc's symlinks between launches (see FILES); without it, it lists /etc on every launch.",
            ),
            (
                "LANDWALL_CONFIG",
                "The system configuration file to read instead of /etc/landwall/landwall.toml.",
            ),
            (
                "LANDWALL_WORKTREE",
                "The worktree to grant instead of the git top level of the current directory.",
            ),
            (
                "LANDWALL_LOG",
                "Log filter (env_logger syntax, e.g. debug); logs go to stderr.",
            ),
        ],
    );
    section(
        &mut r,
        "EXIT STATUS",
        &[
            ("0", "Success (admin CLI). Once the agent has been exec'd, its own status and signals reach the caller unchanged."),
            ("1", "landwall doctor: the shim could not work on this machine."),
            ("2", "Bad command line."),
            ("74", "Output, a startup file (shim) or the spool (submit, jobs) could not be written or read."),
            ("78", "The configuration, the worktree or a configured path is wrong, or something the agent could have written would widen the wall: a .git, commondir or gitdir file that does not check out both ways, a linked worktree that lost its .git, a per-user configuration with grants that the agent can rewrite or that root does not own, [unix] sockets on a kernel below Landlock ABI 9, a protected path that is a symbolic link or a special file."),
            ("100", "The wall could not go up: no Landlock, a Landlock ABI below min_abi, 16 Landlock layers already stacked, capabilities, no_new_privs, a second thread, the seccomp filter, the self-check, the watcher, or the private mount namespace that holds the protected paths (a refused one only with protect_required = true). The message names the cause; most are properties of the kernel or the system, which an unchanged retry meets again, and landwall doctor says which. A directory changing under a launch does not cause it: entries of a listed directory (/etc as root) that vanish are skipped, new ones are not granted."),
            ("126", "The real agent was found but could not be executed."),
            ("127", "No real agent was found."),
        ],
    );
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("landwall-drain"),
        roman("(8), "),
        bold("bash"),
        roman("(1), "),
        bold("systemd.exec"),
        roman("(5), and the documentation in /usr/share/doc/landwall (docs/ in the sources): README.md, install.md (packages, PATH, the drain service), how-it-works.md (a launch, the default policy, the environment), configuration.md (every key, every exit status), threat-model.md, escape.md, agents.md and drain.md. "),
        roman(SOURCE_NOTE),
    ]);
    buf.extend(r.render().into_bytes());
    man.render_version_section(&mut buf)?;
    Ok(buf)
}

/// `landwall-drain(8)`: the daemon's options, and its environment, signals and exit
/// statuses from the `--help` text itself.
fn drain_page() -> io::Result<Vec<u8>> {
    let mut cmd = landwall_drain::command();
    cmd.build();
    let man = Man::new(cmd.clone()).section("8").manual("landwall manual");
    let mut buf = Vec::new();
    man.render_title(&mut buf)?;
    man.render_name_section(&mut buf)?;
    // Not clap_mangen's synopsis, which would announce the hidden job-runner subcommand.
    let mut r = Roff::new();
    r.control("SH", ["SYNOPSIS"]);
    let mut synopsis = vec![bold("landwall-drain")];
    for arg in visible_args(&cmd) {
        if let Some(long) = arg.get_long() {
            synopsis.push(roman(format!(" [--{long}")));
            if arg.get_action().takes_values() {
                synopsis.push(roman(" "));
                synopsis.push(italic(value_name(arg)));
            }
            synopsis.push(roman("]"));
        }
    }
    r.text(synopsis);
    buf.extend(r.render().into_bytes());
    man.render_description_section(&mut buf)?;
    man.render_options_section(&mut buf)?;

    let mut r = Roff::new();
    // The after-help text is a list of "Heading:" blocks; each becomes a section, verbatim.
    let after = cmd
        .get_after_help()
        .map(|s| s.to_string())
        .unwrap_or_default();
    let mut in_block = false;
    for line in after.lines() {
        if let Some(heading) = line.strip_suffix(':').filter(|h| !h.starts_with(' ')) {
            if in_block {
                r.control("fi", [] as [&str; 0]);
            }
            r.control("SH", [heading.to_uppercase().as_str()]);
            r.control("nf", [] as [&str; 0]);
            in_block = true;
        } else if line.is_empty() {
            continue;
        } else if !line.starts_with(' ') {
            // A closing sentence, outside any block.
            if in_block {
                r.control("fi", [] as [&str; 0]);
                in_block = false;
            }
            r.control("SH", ["NOTES"]);
            para(&mut r, line);
        } else {
            r.text([roman(line)]);
        }
    }
    if in_block {
        r.control("fi", [] as [&str; 0]);
    }
    section(
        &mut r,
        "FILES",
        &[
            ("/etc/landwall/landwall.toml", "The configuration; the [drain] section sets the spool, the worktree roots, the grace period, the accepted job owners, the number of jobs at once and each job's caps (memory_max, tasks_max, cpu_max, log_max) and the size of its own /tmp and /dev/shm (tmp_size)."),
            ("/var/spool/landwall", "The default spool: queue/, running/, done/, failed/, logs/, tmp/ and the lock."),
            ("/usr/lib/systemd/system/landwall-drain.service", "The packaged unit (Type=notify, user landwall, shipped disabled): systemctl enable --now landwall-drain. Worktree roots outside the spool need ReadWritePaths= in a drop-in (systemctl edit landwall-drain). Delegate=yes gives the daemon its cgroup subtree, where each job gets a cgroup of its own."),
            ("/etc/landwall/drain.env", "The unit's environment; sets LANDWALL_DRAIN_SANDBOX=1, so the packaged daemon walls itself in."),
        ],
    );
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("landwall"),
        roman("(1), "),
        bold("systemd.service"),
        roman(
            "(5), and /usr/share/doc/landwall/drain.md (docs/drain.md in the sources: spool layout, job files, results). ",
        ),
        roman(SOURCE_NOTE),
    ]);
    buf.extend(r.render().into_bytes());
    man.render_version_section(&mut buf)?;
    Ok(buf)
}

fn para(r: &mut Roff, text: &str) {
    r.control("PP", [] as [&str; 0]);
    r.text([roman(text)]);
}

fn section(r: &mut Roff, title: &str, items: &[(&str, &str)]) {
    r.control("SH", [title]);
    for (term, text) in items {
        r.control("TP", [] as [&str; 0]);
        r.text([bold(*term)]);
        r.text([roman(*text)]);
    }
}

/// One subcommand (recursively for nested ones): its usage, its help, its options.
fn command_entry(r: &mut Roff, cmd: &Command, path: &str) {
    r.control("SS", [path]);
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    if usage != path {
        r.text([bold(usage)]);
    }
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        para(r, &about.to_string());
    }
    options(r, cmd);
    for sub in visible_subcommands(cmd) {
        command_entry(r, sub, &format!("{path} {}", sub.get_name()));
    }
}

/// The subcommands worth a paragraph: not hidden, not clap's generated `help`.
fn visible_subcommands(cmd: &Command) -> impl Iterator<Item = &Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
}

/// The visible arguments of `cmd`, one tagged paragraph each.
fn options(r: &mut Roff, cmd: &Command) {
    for arg in visible_args(cmd) {
        let mut tag: Vec<Inline> = Vec::new();
        let value = value_name(arg);
        match (arg.get_short(), arg.get_long()) {
            (Some(s), Some(l)) => tag.push(bold(format!("-{s}, --{l}"))),
            (Some(s), None) => tag.push(bold(format!("-{s}"))),
            (None, Some(l)) => tag.push(bold(format!("--{l}"))),
            (None, None) => {
                tag.push(italic(value.clone()));
                if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
                    tag.push(roman("..."));
                }
            }
        }
        if (arg.get_short().is_some() || arg.get_long().is_some())
            && arg.get_action().takes_values()
        {
            tag.push(roman(" "));
            tag.push(italic(value));
        }
        r.control("TP", [] as [&str; 0]);
        r.text(tag);
        let mut help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(|h| h.to_string())
            .unwrap_or_default();
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        if !defaults.is_empty() && arg.get_action().takes_values() {
            help.push_str(&format!(" [default: {}]", defaults.join(", ")));
        }
        r.text([roman(help)]);
    }
}

/// The arguments worth documenting: not hidden, and not -h/--help or -V/--version, which
/// every command has.
fn visible_args(cmd: &Command) -> impl Iterator<Item = &clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !a.is_hide_set() && !["help", "version"].contains(&a.get_id().as_str()))
}

fn value_name(arg: &clap::Arg) -> String {
    arg.get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string())
        .unwrap_or_else(|| arg.get_id().to_string().to_uppercase())
}

/// The daemon's command with its options only: its one subcommand is the hidden job runner,
/// which is not for people (clap_complete would offer it).
fn drain_for_completion() -> Command {
    let cmd = landwall_drain::command();
    let mut out = Command::new("landwall-drain")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned());
    if let Some(about) = cmd.get_about() {
        out = out.about(about.clone());
    }
    debug_assert!(cmd.get_subcommands().all(|s| s.is_hide_set()));
    out
}
