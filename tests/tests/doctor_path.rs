//! `landwall doctor` names what lets the agent swap the shim for a program of its own, which
//! the next launch would run outside the wall: a directory on PATH it can write, ahead of the
//! shim or holding it (a checkout's `target/release` first on PATH), a link on the way to the
//! shim's binary, the binary itself. And a start-up file in `$HOME` that is a link the agent
//! can replace, though what it points to lies outside every grant.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use landwall_e2e::{install, landwall, run, stdout, Sandbox, SYSTEM_PATH};

/// `landwall doctor` run by `exe` (the built `landwall` unless given) in the worktree with
/// `path` as PATH (the sandbox's own when `None`) and `config` (none when empty): its report,
/// after checking that it succeeded (exposures do not fail doctor).
fn doctor(sb: &Sandbox, exe: Option<&Path>, path: Option<&str>, config: &str) -> String {
    let exe = exe.map_or_else(landwall, Path::to_path_buf);
    let mut c = std::process::Command::new(exe);
    sb.clean_env(&mut c);
    c.arg("doctor").current_dir(sb.wt());
    if let Some(path) = path {
        c.env("PATH", path);
    }
    if !config.is_empty() {
        c.env("LANDWALL_CONFIG", sb.config(config));
    }
    let out = run(&mut c);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    report
}

const PATH_LINE: &str = "exposure    PATH: ";

/// The report's PATH exposure lines.
fn path_lines(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| l.starts_with(PATH_LINE))
        .collect()
}

/// The report's one line naming `what` as the agent can `verb` it, for the shim.
fn named<'a>(report: &'a str, verb: &str, what: &Path) -> &'a str {
    let wanted = format!("{PATH_LINE}the agent can {verb} {} (", what.display());
    let found: Vec<&str> = report.lines().filter(|l| l.starts_with(&wanted)).collect();
    assert_eq!(found.len(), 1, "{wanted}\n---\n{report}");
    let l = found[0];
    assert!(
        l.contains(": a program it puts there runs unwalled at your next launch; "),
        "{l}"
    );
    l
}

/// PATH with `dirs` first, then the stand-in agents and the system's.
fn path_of(sb: &Sandbox, dirs: &[&Path]) -> String {
    let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    parts.push(sb.agents().display().to_string());
    parts.push(SYSTEM_PATH.to_string());
    parts.join(":")
}

/// `dir` with links named after the agents to `target`.
fn shim_dir(dir: &Path, target: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    for agent in ["claude", "opencode", "codex"] {
        symlink(target, dir.join(agent)).expect("link shim");
    }
    dir.to_path_buf()
}

#[test]
fn shim_in_a_writable_worktree_directory_is_named() {
    let sb = Sandbox::new("docpath-wt");
    let release = shim_dir(&sb.wt().join("target/release"), &landwall());
    let report = doctor(&sb, None, Some(&path_of(&sb, &[&release])), "");
    let l = named(&report, "write", &release);
    assert!(
        l.contains("(the shim's directory on PATH, for claude, opencode, codex; grant: worktree)"),
        "{l}"
    );
    assert!(l.contains("move the shim out of the worktree"), "{l}");
    // One line for the directory; the binary (in the build's target dir) is not writable.
    assert_eq!(path_lines(&report).len(), 1, "{report}");

    // Control: the sandbox's own shims, in a directory outside every grant.
    let report = doctor(&sb, None, None, "");
    assert!(path_lines(&report).is_empty(), "{report}");
    assert!(
        report.contains(&format!(
            "`claude` on PATH is {}/claude (the landwall shim)",
            sb.shims().display()
        )),
        "{report}"
    );
}

#[test]
fn writable_directories_ahead_of_the_shim_are_named_and_those_after_it_not() {
    let sb = Sandbox::new("docpath-ahead");
    let ahead = sb.wt().join("bin");
    let after = sb.wt().join("after");
    std::fs::create_dir_all(&ahead).expect("mkdir");
    std::fs::create_dir_all(&after).expect("mkdir");
    let shims = sb.shims();
    let report = doctor(
        &sb,
        None,
        Some(&path_of(&sb, &[&ahead, &shims, &after])),
        "",
    );
    let l = named(&report, "write", &ahead);
    assert!(
        l.contains("(ahead of the shim on PATH, for claude, opencode, codex; grant: worktree)"),
        "{l}"
    );
    assert!(l.contains("take the directory off PATH"), "{l}");
    assert_eq!(path_lines(&report).len(), 1, "{report}");
    assert!(!report.contains(&after.display().to_string()), "{report}");

    // An empty entry is the directory `claude` is started from: here, the worktree.
    let path = format!(":{}", path_of(&sb, &[&shims]));
    let report = doctor(&sb, None, Some(&path), "");
    named(&report, "write", &sb.wt());
    assert_eq!(path_lines(&report).len(), 1, "{report}");

    // Control: a directory ahead that the agent cannot write (outside every grant).
    let outside = sb.outside();
    let report = doctor(&sb, None, Some(&path_of(&sb, &[&outside, &shims])), "");
    assert!(path_lines(&report).is_empty(), "{report}");
}

#[test]
fn a_writable_shim_binary_or_link_to_it_is_named() {
    let sb = Sandbox::new("docpath-bin");
    // The binary in the worktree, reached from a PATH directory outside every grant through
    // a link in the worktree.
    let lw = sb.wt().join(".lw");
    std::fs::create_dir_all(&lw).expect("mkdir");
    let binary = lw.join("landwall");
    install(&landwall(), &binary, &["-m", "755"]);
    let links = shim_dir(&sb.wt().join("links"), &binary);
    let bin = shim_dir(&sb.outside().join("bin"), &links.join("claude"));
    let report = doctor(&sb, Some(&binary), Some(&path_of(&sb, &[&bin])), "");
    let l = named(&report, "write the shim", &binary);
    assert!(
        l.contains("(for claude, opencode, codex; grant: worktree)"),
        "{l}"
    );
    let l = named(&report, "replace", &links.join("claude"));
    assert!(
        l.contains("(a link to the shim, for claude, opencode, codex; grant: worktree)"),
        "{l}"
    );
    assert_eq!(path_lines(&report).len(), 2, "{report}");
    assert!(
        !report.contains(&format!("{} (", bin.display())),
        "{report}"
    );

    // Control: the same layout outside every grant.
    let out = sb.outside().join("lw");
    std::fs::create_dir_all(&out).expect("mkdir");
    let binary = out.join("landwall");
    install(&landwall(), &binary, &["-m", "755"]);
    let links = shim_dir(&out.join("links"), &binary);
    let bin = shim_dir(&out.join("bin"), &links.join("claude"));
    let report = doctor(&sb, Some(&binary), Some(&path_of(&sb, &[&bin])), "");
    assert!(path_lines(&report).is_empty(), "{report}");
}

/// The report's line on the sensitive files in `$HOME`.
fn home_line(report: &str) -> &str {
    report
        .lines()
        .find(|l| l.starts_with("exposure    in "))
        .unwrap_or_else(|| panic!("{report}"))
}

#[test]
fn a_start_up_file_linked_outside_the_grants_is_named_when_the_link_can_be_replaced() {
    let sb = Sandbox::new("docpath-rc");
    let dotfiles = sb.outside().join("dotfiles");
    std::fs::create_dir_all(dotfiles.join("config/git")).expect("mkdir");
    std::fs::write(dotfiles.join("bashrc"), "# the user's rc\n").expect("write");
    symlink(dotfiles.join("bashrc"), sb.home().join(".bashrc")).expect("link");
    symlink(dotfiles.join("config"), sb.home().join(".config")).expect("link");

    // An open home: the links sit in a directory the agent can write.
    let open = "home = \"open\"\n";
    let l = home_line(&doctor(&sb, None, None, open)).to_string();
    assert!(l.contains("~/.bashrc (a link it can replace)"), "{l}");
    assert!(
        l.contains("~/.config/git (through ~/.config, a link it can replace)"),
        "{l}"
    );
    // Written through the link, not replacing it: a file in the open home is named plainly.
    assert!(l.contains("~/.profile"), "{l}");
    assert!(!l.contains("~/.profile ("), "{l}");

    // Control: the same links under the private home, which the agent cannot write.
    let l = home_line(&doctor(&sb, None, None, "")).to_string();
    assert!(l.contains("none of the sensitive files"), "{l}");

    // Control: a regular .bashrc under the private home.
    std::fs::remove_file(sb.home().join(".bashrc")).expect("rm");
    std::fs::write(sb.home().join(".bashrc"), "# the user's rc\n").expect("write");
    let l = home_line(&doctor(&sb, None, None, "")).to_string();
    assert!(l.contains("none of the sensitive files"), "{l}");
    // And under the open home, a regular file is writable, named as before.
    let l = home_line(&doctor(&sb, None, None, open)).to_string();
    assert!(l.contains("~/.bashrc, "), "{l}");
}
