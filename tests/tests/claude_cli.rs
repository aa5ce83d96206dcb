//! The real Claude Code CLI (npm `@anthropic-ai/claude-code`, a native binary) as the real
//! agent behind the shim: `claude --version` and `claude --help` work through the wall, and
//! the wall is really around it.
//!
//! `make agents` (a step of `make test`) installs the version pinned in the Makefile into
//! `target/agents`. Without it these tests fail and say so; they never skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use landwall_e2e::{bin_dir, run, stderr, stdout, Sandbox, SYSTEM_PATH};

/// The version pinned by `CLAUDE_CODE_VERSION` in the Makefile (the one place it is written).
fn pinned_version() -> String {
    let makefile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Makefile");
    let text = std::fs::read_to_string(&makefile)
        .unwrap_or_else(|e| panic!("reading {}: {e}", makefile.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("CLAUDE_CODE_VERSION := "))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| {
            panic!(
                "no `CLAUDE_CODE_VERSION := ` line in {}",
                makefile.display()
            )
        })
}

/// `target/agents/node_modules`, where `make agents` installs the CLI.
fn node_modules() -> PathBuf {
    let target = bin_dir()
        .parent()
        .expect("target dir above target/debug")
        .to_path_buf();
    target.join("agents").join("node_modules")
}

/// The directory holding npm's `claude` link, after checking that the pinned version of
/// the real CLI is installed there and that its `claude` is the native binary.
fn cli_bin_dir() -> PathBuf {
    let pinned = pinned_version();
    let nm = node_modules();
    let how = format!(
        "run `make agents` (npm install of @anthropic-ai/claude-code@{pinned} into {})",
        nm.parent().expect("agents dir").display()
    );
    let claude = nm.join(".bin").join("claude");
    assert!(
        claude.exists(),
        "the real Claude Code CLI is not installed: {} is missing; {how}",
        claude.display()
    );
    let manifest = nm.join("@anthropic-ai/claude-code/package.json");
    let manifest = std::fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("reading {}: {e}; {how}", manifest.display()));
    assert!(
        manifest.contains(&format!("\"version\": \"{pinned}\"")),
        "{} is not version {pinned}; {how}",
        nm.join("@anthropic-ai/claude-code").display()
    );
    // The package's postinstall puts the platform's native binary in place of a stub; make
    // sure that is what runs, not a fallback wrapper.
    let head = std::fs::read(&claude).expect("read claude");
    assert!(
        head.starts_with(b"\x7fELF"),
        "{} is not the native binary (did npm skip the package's postinstall?); {how}",
        claude.display()
    );
    nm.join(".bin")
}

/// The sandbox's clean environment with PATH = shims, then npm's bin directory, then the
/// system: the shim finds the next `claude` on PATH that is not itself, the npm one.
fn walled_path(sb: &Sandbox, cli_bin: &Path) -> String {
    format!(
        "{}:{}:{SYSTEM_PATH}",
        sb.shims().display(),
        cli_bin.display()
    )
}

fn claude(sb: &Sandbox, cli_bin: &Path) -> Command {
    let mut c = sb.shim("claude");
    c.env("PATH", walled_path(sb, cli_bin));
    c
}

#[test]
fn version_and_help_work_through_the_shim() {
    let cli_bin = cli_bin_dir();
    let pinned = pinned_version();
    let sb = Sandbox::new("claude-cli");

    // The shim runs the npm CLI, not something else that happens to be on PATH.
    let out = run(sb
        .landwall()
        .args(["policy", "--json", "--agent", "claude"])
        .env("PATH", walled_path(&sb, &cli_bin)));
    assert!(out.status.success(), "{}", stderr(&out));
    let policy: serde_json::Value = serde_json::from_slice(&out.stdout).expect("policy json");
    assert_eq!(
        policy["real_agent"],
        cli_bin.join("claude").display().to_string(),
        "the shim would not run the npm CLI: {}",
        stdout(&out)
    );
    // Its install directory is readable under the wall (granted on its own, or covered by a
    // broader grant when the checkout sits under /tmp).
    let out = run(sb
        .landwall()
        .args(["check", "--agent", "claude"])
        .arg(node_modules().join("@anthropic-ai"))
        .env("PATH", walled_path(&sb, &cli_bin)));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).starts_with("denied"), "{}", stdout(&out));

    let out = run(claude(&sb, &cli_bin).arg("--version"));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("{pinned} (Claude Code)"));

    let out = run(claude(&sb, &cli_bin).arg("--help"));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let help = stdout(&out);
    for expected in ["Usage: claude", "--print", "--version", "--settings"] {
        assert!(
            help.contains(expected),
            "no `{expected}` in --help:\n{help}"
        );
    }
}

/// Claude Code reads a `--settings` file before it answers `--version`. Outside the wall it
/// reads one in `outside/`; behind the shim the kernel refuses that read (EACCES) while the
/// same file in the worktree is fine: the real CLI runs inside the wall.
#[test]
fn the_real_cli_runs_inside_the_wall() {
    let cli_bin = cli_bin_dir();
    let pinned = pinned_version();
    let sb = Sandbox::new("claude-cli-wall");
    let outside = sb.outside().join("settings.json");
    let inside = sb.wt().join("settings.json");
    std::fs::write(&outside, "{}\n").expect("write settings");
    std::fs::write(&inside, "{}\n").expect("write settings");

    // Control: without the wall the CLI reads the outside file and answers.
    let mut direct = Command::new(cli_bin.join("claude"));
    sb.clean_env(&mut direct);
    direct.current_dir(sb.wt());
    let out = run(direct.arg("--settings").arg(&outside).arg("--version"));
    assert_eq!(out.status.code(), Some(0), "unwalled: {}", stderr(&out));
    assert!(stdout(&out).starts_with(&pinned), "{}", stdout(&out));

    // Behind the shim: denied by the kernel.
    let out = run(claude(&sb, &cli_bin)
        .arg("--settings")
        .arg(&outside)
        .arg("--version"));
    let err = stderr(&out);
    assert_ne!(out.status.code(), Some(0), "read outside the wall: {err}");
    assert!(
        err.contains("EACCES") && err.contains(&outside.display().to_string()),
        "expected EACCES on {}: {err}",
        outside.display()
    );

    // The same flag with a file inside the grant works.
    let out = run(claude(&sb, &cli_bin)
        .arg("--settings")
        .arg(&inside)
        .arg("--version"));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("{pinned} (Claude Code)"));
}

/// Under `home = "strict"` ($HOME read-only but the agent's own state directories) the real
/// CLI still answers, and the shim points it at its state directory.
#[test]
fn version_and_help_work_under_strict_home() {
    let cli_bin = cli_bin_dir();
    let pinned = pinned_version();
    let sb = Sandbox::new("claude-cli-strict");
    let config = sb.config("home = \"strict\"\n");

    let out = run(claude(&sb, &cli_bin)
        .arg("--version")
        .env("LANDWALL_CONFIG", &config));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert_eq!(stdout(&out).trim(), format!("{pinned} (Claude Code)"));

    let out = run(claude(&sb, &cli_bin)
        .arg("--help")
        .env("LANDWALL_CONFIG", &config));
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    assert!(stdout(&out).contains("Usage: claude"), "{}", stdout(&out));
    assert!(
        sb.home().join(".claude").is_dir(),
        "the shim did not create ~/.claude for strict home"
    );
}
