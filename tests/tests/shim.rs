//! The shim end to end: the built `landwall`, linked as `claude` ahead of a stand-in real
//! agent, on the real kernel. Each test asserts on what the agent could and could not do.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use landwall_e2e::{helper, os, run, stderr, stdout, Sandbox};

/// The running kernel's Landlock ABI, as the product reads it.
fn kernel_abi() -> u32 {
    landwall::wall::kernel_abi().expect("Landlock ABI")
}

const EACCES: i32 = 13;
const EXIT_CONFIG: i32 = 78;
const EXIT_WALL: i32 = 100;
const EXIT_NOT_FOUND: i32 = 127;

/// A stand-in agent that runs `lw-helper OP ARGS` for each line of `ops` and prints
/// `OP PATH -> STATUS` (0 = allowed, 13 = EACCES).
fn probe_agent(sb: &Sandbox, ops: &[(&str, &Path)]) -> String {
    let mut body = String::new();
    for (op, path) in ops {
        body.push_str(&format!(
            "\"{h}\" {op} \"{p}\"; echo \"{op} {p} -> $?\"\n",
            h = sb.probe().display(),
            p = path.display()
        ));
    }
    sb.agent_script("claude", &body);
    let out = run(&mut sb.shim("claude"));
    assert!(out.status.success(), "agent failed: {}", stderr(&out));
    assert!(sb.ran_in(&sb.wt()));
    stdout(&out)
}

fn status_of(report: &str, op: &str, path: &Path) -> i32 {
    let prefix = format!("{op} {} -> ", path.display());
    report
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or_else(|| panic!("no result for {prefix} in:\n{report}"))
}

#[test]
fn same_pid_and_stdio_pass_through() {
    let sb = Sandbox::new("pid");
    sb.agent_script(
        "claude",
        "read line; echo \"pid $$ got $line\"; echo \"to stderr\" >&2",
    );
    let mut child = sb
        .shim("claude")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn shim");
    let pid = child.id();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"hello\n")
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), format!("pid {pid} got hello\n"));
    assert_eq!(stderr(&out), "to stderr\n", "nothing else on stderr");
}

#[test]
fn nothing_printed_on_success() {
    let sb = Sandbox::new("quiet");
    sb.agent_script("claude", "true");
    let out = run(&mut sb.shim("claude"));
    assert!(out.status.success());
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        stderr(&out)
    );
}

#[test]
fn exit_status_and_fatal_signal_pass_through() {
    let sb = Sandbox::new("status");
    sb.agent_script("claude", "exit 42");
    assert_eq!(run(&mut sb.shim("claude")).status.code(), Some(42));
    sb.agent_script("claude", "kill -TERM $$");
    let st = run(&mut sb.shim("claude")).status;
    assert_eq!(st.signal(), Some(15), "{st:?}");
}

#[test]
fn argv_arrives_byte_identical() {
    let sb = Sandbox::new("argv");
    landwall_e2e::install_binary(&helper(), &sb.agents().join("claude-real"));
    let args = [
        os(b"a b"),
        os(b""),
        os(b"--"),
        os(b"\xff\xfe non-utf8"),
        os(b"-x"),
        os(b"*"),
    ];
    let out = run(sb.shim("claude").args(args));
    assert!(out.status.success(), "{}", stderr(&out));
    let got = std::fs::read(sb.wt().join("argv.out")).expect("argv.out");
    let mut want = sb
        .shims()
        .join("claude")
        .into_os_string()
        .into_encoded_bytes();
    want.push(0);
    for a in args {
        want.extend_from_slice(a.as_encoded_bytes());
        want.push(0);
    }
    assert_eq!(
        got, want,
        "argv[0] as invoked, then every argument byte for byte"
    );
}

#[test]
fn no_signal_is_left_ignored() {
    // Rust ignores SIGPIPE in the shim; the agent must get the default back (`yes | head`).
    let sb = Sandbox::new("sigpipe");
    sb.agent_script("claude", "grep SigIgn /proc/$$/status; yes | head -n 1");
    let out = run(&mut sb.shim("claude"));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let mask = text
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .expect("SigIgn mask");
    assert_eq!(mask & (1 << (13 - 1)), 0, "SIGPIPE is ignored in the agent");
    assert!(text.ends_with("\ny\n"), "{text}");
    assert!(
        out.stderr.is_empty(),
        "yes must die of SIGPIPE quietly: {}",
        stderr(&out)
    );
}

#[test]
fn cwd_is_kept() {
    let sb = Sandbox::new("cwd");
    std::fs::create_dir_all(sb.wt().join("sub/dir")).expect("mkdir");
    sb.agent_script("claude", "pwd");
    let out = run(sb.shim("claude").current_dir(sb.wt().join("sub/dir")));
    assert_eq!(
        stdout(&out).trim(),
        sb.wt().join("sub/dir").display().to_string()
    );
}

#[test]
fn writes_inside_the_grant_succeed() {
    let sb = Sandbox::new("inside");
    let tmp_file = Path::new("/tmp").join(format!("landwall-test-{}", std::process::id()));
    let report = probe_agent(
        &sb,
        &[
            ("write", &sb.wt().join("file")),
            ("write", &sb.home().join(".claude/agent-state")),
            ("write", &tmp_file),
            ("read", Path::new("/etc/passwd")),
        ],
    );
    assert_eq!(
        status_of(&report, "write", &sb.wt().join("file")),
        0,
        "{report}"
    );
    assert_eq!(
        status_of(&report, "write", &sb.home().join(".claude/agent-state")),
        0
    );
    assert_eq!(status_of(&report, "write", &tmp_file), 0);
    assert_eq!(status_of(&report, "read", Path::new("/etc/passwd")), 0);
    assert!(sb.wt().join("file").exists() && sb.home().join(".claude/agent-state").exists());
    std::fs::remove_file(&tmp_file).expect("cleanup /tmp file");
}

#[test]
fn reads_and_writes_outside_are_denied() {
    let sb = Sandbox::new("outside");
    let other = sb.root.join("other-project");
    std::fs::create_dir_all(&other).expect("mkdir");
    std::fs::write(other.join("code.rs"), "fn main() {}\n").expect("write");
    let root_file = Path::new("/root").join(format!(".landwall-test-{}", std::process::id()));
    let report = probe_agent(
        &sb,
        &[
            ("read", &sb.outside().join("secret")),
            ("write", &sb.outside().join("planted")),
            ("read", &other.join("code.rs")),
            ("write", &other.join("code.rs")),
            ("write", &root_file),
            ("read", Path::new("/root/.bashrc")),
            ("write", Path::new("/etc/landwall-test")),
            ("write", Path::new("/usr/landwall-test")),
            ("mkdir", Path::new("/var/landwall-test")),
        ],
    );
    for line in report.lines() {
        assert!(
            line.ends_with(&format!("-> {EACCES}")),
            "not EACCES: {line}\n{report}"
        );
    }
    assert_eq!(report.lines().count(), 9);
    assert_eq!(
        std::fs::read_to_string(other.join("code.rs")).expect("read"),
        "fn main() {}\n"
    );
    assert!(!sb.outside().join("planted").exists());
    assert!(!root_file.exists());
    assert!(!Path::new("/etc/landwall-test").exists() && !Path::new("/var/landwall-test").exists());
}

#[test]
fn rename_across_directories_inside_the_worktree() {
    let sb = Sandbox::new("rename");
    std::fs::create_dir_all(sb.wt().join("a")).expect("mkdir");
    std::fs::create_dir_all(sb.wt().join("b")).expect("mkdir");
    std::fs::write(sb.wt().join("a/f"), "x").expect("write");
    sb.agent_script(
        "claude",
        &format!(
            "\"{h}\" rename \"$PWD/a/f\" \"$PWD/b/f\"; echo \"rename $?\"\n\"{h}\" rename \"$PWD/b/f\" \"{o}/stolen\"; echo \"out $?\"",
            h = sb.probe().display(),
            o = sb.outside().display()
        ),
    );
    let out = run(&mut sb.shim("claude"));
    assert_eq!(
        stdout(&out),
        format!("rename 0\nout {EACCES}\n"),
        "{}",
        stderr(&out)
    );
    assert!(sb.wt().join("b/f").exists() && !sb.wt().join("a/f").exists());
    assert!(!sb.outside().join("stolen").exists());
}

#[test]
fn git_commit_in_a_linked_worktree() {
    let sb = Sandbox::new("git");
    let main = sb.root.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git(&main, &["init", "-q"]);
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git(&main, &["add", "README"]);
    sb.git(&main, &["commit", "-qm", "initial"]);
    let linked = sb.root.join("linked");
    let other = sb.root.join("other-wt");
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            linked.to_str().expect("utf8"),
            "-b",
            "task",
        ],
    );
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            other.to_str().expect("utf8"),
            "-b",
            "other",
        ],
    );
    sb.agent_script(
        "claude",
        &format!(
            "set -e\necho work > work.txt\ngit add work.txt\n\
             git -c user.name=agent -c user.email=agent@landwall.invalid commit -qm 'agent commit'\n\
             git branch -q agent-branch\n\
             if echo x > \"{main}/README\" 2>/dev/null; then echo 'main writable'; fi\n\
             if cat \"{main}/README\" >/dev/null 2>&1; then echo 'main readable'; fi\n\
             if echo x > \"{other}/planted\" 2>/dev/null; then echo 'other writable'; fi\n\
             echo done",
            main = main.display(),
            other = other.display()
        ),
    );
    let out = run(sb.shim("claude").current_dir(&linked));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "done\n",
        "main working tree and other worktree must be unreachable"
    );
    let log = sb.git(&main, &["log", "--format=%s", "task"]);
    assert_eq!(stdout(&log), "agent commit\ninitial\n");
    sb.git(&main, &["rev-parse", "--verify", "-q", "agent-branch"]);
    assert_eq!(
        std::fs::read_to_string(main.join("README")).expect("read"),
        "main\n"
    );
    assert!(!other.join("planted").exists());
}

#[test]
fn a_symlinked_worktree_path_works() {
    let sb = Sandbox::new("symlink");
    let link = sb.root.join("link-to-wt");
    std::os::unix::fs::symlink(sb.wt(), &link).expect("symlink");
    sb.agent_script(
        "claude",
        &format!(
            "\"{h}\" write \"{l}/via-link\"; echo \"link $?\"",
            h = sb.probe().display(),
            l = link.display()
        ),
    );
    let out = run(sb
        .shim("claude")
        .env("LANDWALL_WORKTREE", &link)
        .current_dir(&link));
    assert_eq!(stdout(&out), "link 0\n", "{}", stderr(&out));
    assert!(sb.wt().join("via-link").exists());
}

#[test]
fn environment_is_rebuilt_from_the_allowlist() {
    let sb = Sandbox::new("env");
    sb.agent_script("claude", "env");
    let out = run(sb
        .shim("claude")
        .env("AWS_SECRET_ACCESS_KEY", "aws-secret")
        .env("DATABASE_URL", "postgres://secret")
        .env("GITHUB_TOKEN", "ghp_secret")
        .env("LD_PRELOAD", "libc.so.6")
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .env("BASH_ENV", "/tmp/x")
        .env("ANTHROPIC_API_KEY", "sk-ant")
        .env("CLAUDE_CODE_USE_BEDROCK", "0")
        .env("LC_ALL", "C.UTF-8"));
    assert!(out.status.success(), "{}", stderr(&out));
    let env = stdout(&out);
    let names: Vec<&str> = env.lines().filter_map(|l| l.split('=').next()).collect();
    for secret in [
        "AWS_SECRET_ACCESS_KEY",
        "DATABASE_URL",
        "GITHUB_TOKEN",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "BASH_ENV",
    ] {
        assert!(
            !names.contains(&secret),
            "{secret} reached the agent:\n{env}"
        );
    }
    for kept in [
        "PATH",
        "HOME",
        "TERM",
        "LANG",
        "LC_ALL",
        "ANTHROPIC_API_KEY",
        "CLAUDE_CODE_USE_BEDROCK",
    ] {
        assert!(names.contains(&kept), "{kept} missing:\n{env}");
    }
    assert!(!env.contains("secret"), "{env}");
}

#[test]
fn ld_preload_allowed_in_config_still_never_passes() {
    let sb = Sandbox::new("ldconfig");
    let cfg = sb.config("env_allow = [\"LD_PRELOAD\", \"LD_*\", \"MY_VAR\"]\n");
    sb.agent_script("claude", "env");
    let out = run(sb
        .shim("claude")
        .env("LANDWALL_CONFIG", &cfg)
        .env("LD_PRELOAD", "libc.so.6")
        .env("MY_VAR", "mine"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stdout(&out).contains("LD_PRELOAD"));
    assert!(stdout(&out).contains("MY_VAR=mine"));
}

#[test]
fn capabilities_dropped_no_new_privs_and_inherited_fds_closed() {
    let sb = Sandbox::new("caps");
    sb.agent_script(
        "claude",
        "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/$$/status\n\
         if [ -e /proc/$$/fd/7 ]; then echo 'fd7 open'; else echo 'fd7 closed'; fi",
    );
    // A parent that leaves fd 7 open (no close-on-exec) across the exec of the shim.
    let mut c = Command::new("/bin/sh");
    sb.clean_env(&mut c);
    let out = run(c
        .current_dir(sb.wt())
        .arg("-c")
        .arg("exec 7</etc/hostname; [ -e /proc/$$/fd/7 ] || exit 99; exec claude"));
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    for set in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            report.contains(&format!("{set}:\t0000000000000000")),
            "{set} not empty:\n{report}"
        );
    }
    assert!(report.contains("NoNewPrivs:\t1"), "{report}");
    assert!(report.contains("fd7 closed"), "{report}");
}

// ---- Fail-closed: each shows the agent never ran and the status is the documented one.

fn assert_refused(sb: &Sandbox, out: &std::process::Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "stderr: {}", stderr(out));
    assert!(!sb.ran_in(&sb.wt()), "the agent ran");
    let err = stderr(out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn refused_when_the_kernel_refuses_a_17th_layer() {
    let sb = Sandbox::new("layers");
    sb.agent_script("claude", "true");
    let mut c = Command::new(helper());
    sb.clean_env(&mut c);
    let out = run(c
        .current_dir(sb.wt())
        .args(["stack", "16", "--"])
        .arg(sb.shims().join("claude")));
    // Inside stacked layers no namespace can be had: the agents' state in $HOME, held
    // elsewhere, is said to be writable this time, in a note before the refusal.
    assert_eq!(
        out.status.code(),
        Some(EXIT_WALL),
        "stderr: {}",
        stderr(&out)
    );
    assert!(!sb.ran_in(&sb.wt()), "the agent ran");
    assert!(out.stdout.is_empty());
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("16 Landlock layers are already stacked"))
            && lines[..lines.len() - 1]
                .iter()
                .all(|l| l.starts_with("landwall: note: no private mount namespace here")),
        "{err}"
    );
    // And 15 layers leave room for the shim's own: the same command runs.
    let mut c = Command::new(helper());
    sb.clean_env(&mut c);
    let out = run(c
        .current_dir(sb.wt())
        .args(["stack", "15", "--"])
        .arg(sb.shims().join("claude")));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(sb.ran_in(&sb.wt()));
}

#[test]
fn refused_when_the_kernel_has_no_landlock() {
    let sb = Sandbox::new("nolandlock");
    sb.agent_script("claude", "true");
    let mut c = Command::new(helper());
    sb.clean_env(&mut c);
    let out = run(c
        .current_dir(sb.wt())
        .args(["nolandlock", "--"])
        .arg(sb.shims().join("claude")));
    assert_refused(&sb, &out, EXIT_WALL);
}

#[test]
fn refused_when_the_abi_is_below_the_minimum() {
    let sb = Sandbox::new("minabi");
    sb.agent_script("claude", "true");
    // One above this kernel's: a minimum it cannot meet.
    let cfg = sb.config(&format!("min_abi = {}\n", kernel_abi() + 1));
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert_refused(&sb, &out, EXIT_WALL);
}

#[test]
fn refused_when_the_config_is_invalid() {
    let sb = Sandbox::new("badconfig");
    sb.agent_script("claude", "true");
    let cfg = sb.config("min_abi = 3\nwritabel = [\"/srv\"]\n");
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert_refused(&sb, &out, EXIT_CONFIG);
    assert!(
        stderr(&out).contains(&format!("{}:2:", cfg.display())),
        "{}",
        stderr(&out)
    );
}

#[test]
fn refused_when_the_config_is_unreadable() {
    let sb = Sandbox::new("dirconfig");
    sb.agent_script("claude", "true");
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", sb.outside()));
    assert_refused(&sb, &out, EXIT_CONFIG);
}

#[test]
fn refused_when_a_configured_path_is_missing() {
    let sb = Sandbox::new("missingpath");
    sb.agent_script("claude", "true");
    let cfg = sb.config(&format!("writable = [\"{}/nope\"]\n", sb.root.display()));
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert_refused(&sb, &out, EXIT_CONFIG);
}

#[test]
fn refused_when_the_worktree_is_the_root() {
    let sb = Sandbox::new("rootwt");
    // The agent would write its marker in the cwd: check / and the worktree both.
    sb.agent_script("claude", "echo ran > /var/tmp/landwall-tests/root-marker");
    let out = run(sb.shim("claude").current_dir("/"));
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{}", stderr(&out));
    assert!(
        !Path::new("/marker").exists()
            && !Path::new("/var/tmp/landwall-tests/root-marker").exists()
    );
    let out = run(sb.shim("claude").env("LANDWALL_WORKTREE", "/usr"));
    assert_refused(&sb, &out, EXIT_CONFIG);
}

#[test]
fn refused_when_the_real_agent_is_missing() {
    let sb = Sandbox::new("noagent");
    let out = run(&mut sb.shim("claude"));
    assert_refused(&sb, &out, EXIT_NOT_FOUND);
    assert!(
        stderr(&out).contains("claude-real"),
        "names what was searched: {}",
        stderr(&out)
    );
}

#[test]
fn refused_when_the_shim_finds_only_itself() {
    let sb = Sandbox::new("onlyself");
    // The shim on PATH twice more: a hardlink and a symlink, in later directories.
    let hard = sb.root.join("hard");
    let soft = sb.root.join("soft");
    std::fs::create_dir_all(&hard).expect("mkdir");
    std::fs::create_dir_all(&soft).expect("mkdir");
    let copy_target = sb.root.join("landwall-copy");
    landwall_e2e::install_binary(&landwall_e2e::landwall(), &copy_target);
    std::fs::set_permissions(&copy_target, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::hard_link(&copy_target, hard.join("claude")).expect("hardlink");
    std::os::unix::fs::symlink(&copy_target, soft.join("claude")).expect("symlink");
    std::os::unix::fs::symlink(&copy_target, sb.root.join("claude")).expect("symlink");
    let mut c = Command::new(sb.root.join("claude"));
    sb.clean_env(&mut c);
    let path = format!(
        "{}:{}:{}",
        hard.display(),
        soft.display(),
        landwall_e2e::SYSTEM_PATH
    );
    let out = run(c.current_dir(sb.wt()).env("PATH", path));
    assert_refused(&sb, &out, EXIT_NOT_FOUND);
}

#[test]
fn next_claude_on_path_is_found_when_there_is_no_real_suffix() {
    let sb = Sandbox::new("nextonpath");
    let later = sb.root.join("later");
    std::fs::create_dir_all(&later).expect("mkdir");
    std::fs::write(later.join("claude"), "#!/bin/sh\necho real claude \"$@\"\n").expect("write");
    std::fs::set_permissions(later.join("claude"), std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let path = format!(
        "{}:{}:{}",
        sb.shims().display(),
        later.display(),
        landwall_e2e::SYSTEM_PATH
    );
    let out = run(sb.shim("claude").env("PATH", path).arg("--version"));
    assert_eq!(stdout(&out), "real claude --version\n", "{}", stderr(&out));
}

// ---- The admin CLI.

#[test]
fn run_walls_any_command() {
    let sb = Sandbox::new("run");
    let out = run(sb
        .landwall()
        .args(["run", "--"])
        .arg(sb.probe())
        .arg("read")
        .arg(sb.outside().join("secret")));
    assert_eq!(out.status.code(), Some(EACCES), "{}", stderr(&out));
    let out = run(sb
        .landwall()
        .args(["run", "--"])
        .arg(sb.probe())
        .arg("write")
        .arg(sb.wt().join("ok")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = run(sb
        .landwall()
        .args(["run", "--worktree"])
        .arg(sb.outside())
        .arg("--")
        .arg(sb.probe())
        .arg("write")
        .arg(sb.wt().join("no")));
    assert_eq!(
        out.status.code(),
        Some(EACCES),
        "--worktree moves the grant"
    );
}

#[test]
fn check_names_the_deciding_rule() {
    let sb = Sandbox::new("check");
    let out = run(sb
        .landwall()
        .arg("check")
        .arg(sb.wt().join("src/main.rs"))
        .arg("/etc/passwd")
        .arg(sb.outside()));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("read-write") && lines[0].contains("worktree"),
        "{text}"
    );
    assert!(
        lines[1].starts_with("read-only") && lines[1].contains("/etc"),
        "{text}"
    );
    assert!(lines[2].starts_with("denied"), "{text}");
}

#[test]
fn policy_json_is_what_the_shim_applies() {
    let sb = Sandbox::new("policyjson");
    sb.agent_script("claude", "true");
    let out = run(sb
        .landwall()
        .args(["policy", "--json"])
        .env("SECRET_TOKEN", "x"));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(v["worktree"], sb.wt().display().to_string());
    assert_eq!(
        v["real_agent"],
        sb.agents().join("claude-real").display().to_string()
    );
    let rules = v["rules"].as_array().expect("rules");
    assert!(rules
        .iter()
        .any(|r| r["path"] == "/tmp" && r["access"] == "read-write"));
    assert!(v["env"]["dropped"]
        .as_array()
        .expect("dropped")
        .iter()
        .any(|n| n == "SECRET_TOKEN"));
}

#[test]
fn admin_cli_usage_errors() {
    let sb = Sandbox::new("usage");
    assert_eq!(run(sb.landwall().arg("frobnicate")).status.code(), Some(2));
    assert_eq!(
        run(sb.landwall().args(["run", "--agent", "../x", "--", "true"]))
            .status
            .code(),
        Some(2)
    );
    let v = run(sb.landwall().arg("--version"));
    assert!(v.status.success() && stdout(&v).starts_with("landwall "));
    for sub in ["doctor", "policy", "check", "run"] {
        let h = run(sb.landwall().args([sub, "--help"]));
        assert!(h.status.success(), "{sub} --help");
    }
}

#[test]
fn doctor_reports_and_fails_when_the_shim_cannot_work() {
    let sb = Sandbox::new("doctor");
    sb.agent_script("claude", "true");
    let out = run(sb.landwall().arg("doctor"));
    assert!(out.status.success(), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("Landlock ABI"), "{text}");
    assert!(
        text.contains(&sb.agents().join("claude-real").display().to_string()),
        "{text}"
    );
    // One above this kernel's: a minimum it cannot meet.
    let cfg = sb.config(&format!("min_abi = {}\n", kernel_abi() + 1));
    let out = run(sb.landwall().arg("doctor").env("LANDWALL_CONFIG", &cfg));
    assert_eq!(out.status.code(), Some(1));
    let bad = sb.config("nonsense = 1\n");
    let out = run(sb.landwall().arg("doctor").env("LANDWALL_CONFIG", &bad));
    assert_eq!(out.status.code(), Some(1));
    let mut c = Command::new(helper());
    sb.clean_env(&mut c);
    let out = run(c
        .args(["nolandlock", "--"])
        .arg(landwall_e2e::landwall())
        .arg("doctor"));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}

/// A main repository with one commit on `main`, a bare remote it pushed to, and a linked
/// worktree on branch `task`; `ref_format` is "files" or "reftable".
fn linked_repo(sb: &Sandbox, ref_format: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let main = sb.root.join("main");
    let remote = sb.root.join("remote.git");
    let linked = sb.root.join("linked");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git(
        &main,
        &["init", "-q", &format!("--ref-format={ref_format}")],
    );
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git(&main, &["add", "README"]);
    sb.git(&main, &["commit", "-qm", "initial"]);
    sb.git(&sb.root, &["init", "-q", "--bare", "remote.git"]);
    sb.git(
        &main,
        &["remote", "add", "origin", remote.to_str().expect("utf8")],
    );
    sb.git(&main, &["push", "-q", "origin", "main"]);
    std::fs::write(main.join("README"), "main 2\n").expect("write");
    sb.git(&main, &["commit", "-qam", "second"]);
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            linked.to_str().expect("utf8"),
            "-b",
            "task",
            "HEAD~1",
        ],
    );
    (main, linked)
}

/// Commit, branch, stash, rebase and a fetch from a local remote work in a linked worktree;
/// the repository's config, hooks and info stay read-only.
fn git_operations_and_protected_metadata(ref_format: &str) {
    let sb = Sandbox::new(&format!("gitops-{ref_format}"));
    let (main, linked) = linked_repo(&sb, ref_format);
    let git_dir = main.join(".git");
    let config_before = std::fs::read(git_dir.join("config")).expect("config");
    let cfg = sb.config(&format!(
        "read_only = [\"{}\"]\n",
        sb.root.join("remote.git").display()
    ));
    sb.agent_script(
        "claude",
        "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@landwall.invalid\n\
         export GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@landwall.invalid\n\
         step() { name=$1; shift; if \"$@\" >/dev/null 2>>git.err; then echo \"$name ok\"; else echo \"$name FAILED\"; fi; }\n\
         echo work > work.txt; git add work.txt\n\
         step commit git commit -qm 'agent commit'\n\
         step branch git branch agent-branch\n\
         echo more >> work.txt\n\
         step stash git stash -q\n\
         step stash-pop git stash pop -q\n\
         step commit2 git commit -qam 'agent commit 2'\n\
         step rebase git rebase -q main\n\
         step fetch git fetch -q origin\n\
         echo '[core]' >> \"$GIT_COMMON/config\" 2>/dev/null && echo 'config WRITABLE'\n\
         echo 'evil' > \"$GIT_COMMON/hooks/post-checkout\" 2>/dev/null && echo 'hook WRITABLE'\n\
         echo 'x' > \"$GIT_COMMON/info/exclude\" 2>/dev/null && echo 'info WRITABLE'\n\
         echo 'x' > \"$GIT_COMMON/planted\" 2>/dev/null && echo 'gitdir WRITABLE'\n\
         step config-cmd git config core.fsmonitor evil\n\
         echo end",
    );
    let script = sb.agents().join("claude-real");
    let text = std::fs::read_to_string(&script).expect("read script");
    std::fs::write(
        &script,
        text.replace("$GIT_COMMON", &git_dir.display().to_string()),
    )
    .expect("write script");
    let out = run(sb
        .shim("claude")
        .current_dir(&linked)
        .env("LANDWALL_CONFIG", &cfg));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "commit ok\nbranch ok\nstash ok\nstash-pop ok\ncommit2 ok\nrebase ok\nfetch ok\nconfig-cmd FAILED\nend\n",
        "git.err:\n{}",
        std::fs::read_to_string(linked.join("git.err")).unwrap_or_default()
    );
    let log = sb.git(&main, &["log", "--format=%s", "task"]);
    assert_eq!(
        stdout(&log),
        "agent commit 2\nagent commit\nsecond\ninitial\n",
        "rebased onto main"
    );
    sb.git(&main, &["rev-parse", "--verify", "-q", "agent-branch"]);
    sb.git(
        &main,
        &["rev-parse", "--verify", "-q", "refs/remotes/origin/main"],
    );
    assert_eq!(
        std::fs::read(git_dir.join("config")).expect("config"),
        config_before
    );
    assert!(!git_dir.join("hooks/post-checkout").exists() && !git_dir.join("planted").exists());
}

#[test]
fn git_operations_in_a_linked_worktree_files_backend() {
    git_operations_and_protected_metadata("files");
}

#[test]
fn git_operations_in_a_linked_worktree_reftable_backend() {
    git_operations_and_protected_metadata("reftable");
}

#[test]
fn main_worktree_git_metadata_exposure_is_reported() {
    let sb = Sandbox::new("mainnote");
    sb.git(&sb.wt(), &["init", "-q"]);
    let out = run(sb.landwall().arg("policy"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("main worktree"), "{}", stdout(&out));
    let out = run(sb.landwall().arg("doctor"));
    assert!(stdout(&out).contains("main worktree"), "{}", stdout(&out));
}

#[test]
fn strict_home_leaves_only_the_agent_state_writable() {
    let sb = Sandbox::new("stricthome");
    std::fs::write(sb.home().join(".bashrc"), "# user's rc\n").expect("write rc");
    let cfg = sb.config("home = \"strict\"\n");
    let h = sb.probe();
    let home = sb.home();
    sb.agent_script(
        "claude",
        &format!(
            "\"{h}\" write \"{home}/.bashrc\"; echo \"bashrc $?\"\n\
             \"{h}\" mkdir \"{home}/.ssh\"; echo \"ssh $?\"\n\
             \"{h}\" write \"{home}/.claude/state.json\"; echo \"claude $?\"\n\
             \"{h}\" write \"{home}/.cache/x\"; echo \"cache $?\"\n\
             \"{h}\" read \"{home}/.bashrc\"; echo \"read $?\"\n\
             echo \"CLAUDE_CONFIG_DIR=$CLAUDE_CONFIG_DIR\"",
            h = h.display(),
            home = home.display()
        ),
    );
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "bashrc {EACCES}\nssh {EACCES}\nclaude 0\ncache 0\nread 0\nCLAUDE_CONFIG_DIR={}\n",
            home.join(".claude").display()
        )
    );
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).expect("rc"),
        "# user's rc\n"
    );
    // A CLAUDE_CONFIG_DIR the user set is kept.
    sb.agent_script("claude", "echo \"CLAUDE_CONFIG_DIR=$CLAUDE_CONFIG_DIR\"");
    let out = run(sb
        .shim("claude")
        .env("LANDWALL_CONFIG", &cfg)
        .env("CLAUDE_CONFIG_DIR", "/elsewhere"));
    assert_eq!(stdout(&out), "CLAUDE_CONFIG_DIR=/elsewhere\n");
}

#[test]
fn deny_carves_a_path_out_of_the_worktree() {
    let sb = Sandbox::new("deny");
    std::fs::create_dir_all(sb.wt().join("secrets")).expect("mkdir");
    std::fs::write(sb.wt().join("secrets/key"), "k\n").expect("write");
    std::fs::create_dir_all(sb.wt().join("src")).expect("mkdir");
    std::fs::write(sb.wt().join(".env"), "TOKEN=1\n").expect("write");
    let cfg = sb.config(&format!(
        "deny = [\"{wt}/secrets\", \"{wt}/.env*\"]\n",
        wt = sb.wt().display()
    ));
    let h = sb.probe();
    let wt = sb.wt();
    sb.agent_script(
        "claude",
        &format!(
            "\"{h}\" read \"{wt}/secrets/key\"; echo \"secret $?\"\n\
             \"{h}\" read \"{wt}/.env\"; echo \"env $?\"\n\
             \"{h}\" write \"{wt}/src/main.rs\"; echo \"src $?\"\n\
             \"{h}\" write \"{wt}/new-top-level\"; echo \"top $?\"",
            h = h.display(),
            wt = wt.display()
        ),
    );
    // The marker the stand-in writes first lands at the worktree's top level, which a deny
    // makes list-only: run it from src/ instead.
    let out = run(sb
        .shim("claude")
        .env("LANDWALL_CONFIG", &cfg)
        .current_dir(wt.join("src")));
    assert_eq!(
        stdout(&out),
        format!("secret {EACCES}\nenv {EACCES}\nsrc 0\ntop {EACCES}\n"),
        "{}",
        stderr(&out)
    );
    assert!(sb.ran_in(&wt.join("src")));
}

#[test]
fn system_config_writable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let sb = Sandbox::new("cfgperm");
    sb.agent_script("claude", "true");
    let cfg = sb.config("min_abi = 3\n");
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert_refused(&sb, &out, EXIT_CONFIG);
    std::fs::set_permissions(&cfg, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    std::os::unix::fs::chown(&cfg, Some(65534), None).expect("chown to nobody");
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert_refused(&sb, &out, EXIT_CONFIG);
    std::os::unix::fs::chown(&cfg, Some(0), None).expect("chown back");
    let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// On ABI 7 the agent's denials after exec reach the audit log; the shim's own self-check
/// before the exec does not. Needs `auditctl` (Debian package auditd) to switch kernel
/// auditing on for the test; the previous state is restored.
#[test]
fn denials_after_exec_are_audited() {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let status = Command::new("auditctl").arg("-s").output().expect(
        "auditctl is missing: install the auditd package (make test and .ci/run do) to test Landlock auditing",
    );
    let field = |name: &str| {
        stdout(&status)
            .lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("auditctl -s has no {name}"))
    };
    let (was_enabled, backlog) = (field("enabled "), field("backlog_limit "));
    // While auditing is on, every walled process of the parallel tests logs its denials too.
    // Without an audit daemon the records go out through printk, which lets 10 through per
    // 5 s by default, after a backlog of 64: lift both for the test, restore them after.
    let burst_file = "/proc/sys/kernel/printk_ratelimit_burst";
    let burst = std::fs::read_to_string(burst_file).expect("read printk burst");
    std::fs::write(burst_file, "1000000").expect("raise printk burst");
    assert!(
        run(Command::new("auditctl").args(["-b", "65536", "-e", "1"]))
            .status
            .success()
    );
    let sb = Sandbox::new("audit");
    // A record can still be lost to a flood from the other tests: try a few times.
    let mut found = None;
    for attempt in 0..5 {
        let target = sb
            .outside()
            .join(format!("audited-{}-{attempt}", std::process::id()));
        std::fs::write(&target, "x").expect("write");
        sb.agent_script(
            "claude",
            &format!("cat \"{}\" >/dev/null 2>&1; true", target.display()),
        );
        let out = run(&mut sb.shim("claude"));
        assert!(out.status.success(), "{}", stderr(&out));
        let needle = format!("path=\"{}\"", target.display());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        while found.is_none() && std::time::Instant::now() < deadline {
            let mut log = stdout(&run(Command::new("dmesg").arg("--notime")));
            log.push_str(&std::fs::read_to_string("/var/log/audit/audit.log").unwrap_or_default());
            found = log
                .lines()
                .find(|l| l.contains(&needle))
                .map(|l| (l.to_string(), log.clone()));
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        if found.is_some() {
            break;
        }
    }
    let restored = run(Command::new("auditctl").args(["-b", &backlog, "-e", &was_enabled]))
        .status
        .success();
    std::fs::write(burst_file, burst.trim()).expect("restore printk burst");
    assert!(restored, "could not restore auditing");
    let (line, log) =
        found.unwrap_or_else(|| panic!("no audit record in 5 tries (kernel {kernel})"));
    assert!(
        line.contains("type=1423") && line.contains("blockers=fs.read_file"),
        "{line}"
    );
    let domain = line
        .split_whitespace()
        .find(|w| w.starts_with("domain="))
        .expect("domain id");
    assert!(
        !log.lines()
            .any(|l| l.contains(domain) && l.contains("path=\"/\"")),
        "the shim's self-check was audited"
    );
}

/// Waits until `/etc` has been left alone for three seconds (the link cache stores nothing
/// for a directory changed in the last two, whose timestamps may not show a change yet).
fn etc_settled() {
    let age = |t: std::io::Result<std::time::SystemTime>| {
        t.ok().and_then(|t| t.elapsed().ok()).unwrap_or_default()
    };
    let meta = std::fs::metadata("/etc").expect("stat /etc");
    let ctime = std::time::UNIX_EPOCH
        + std::time::Duration::new(
            std::os::unix::fs::MetadataExt::ctime(&meta) as u64,
            std::os::unix::fs::MetadataExt::ctime_nsec(&meta) as u32,
        );
    let youngest = age(meta.modified()).min(age(Ok(ctime)));
    let settle = std::time::Duration::from_secs(3);
    if youngest < settle {
        std::thread::sleep(settle - youngest);
    }
}

/// A private `$XDG_RUNTIME_DIR` for the link cache, as logind makes it.
fn runtime_dir(sb: &Sandbox) -> std::path::PathBuf {
    let run = sb.root.join("run");
    std::fs::create_dir(&run).expect("mkdir run");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    run
}

fn policy_rules(sb: &Sandbox, runtime: Option<&Path>) -> Vec<(String, String)> {
    let mut c = sb.landwall();
    c.args(["policy", "--json"]);
    if let Some(dir) = runtime {
        c.env("XDG_RUNTIME_DIR", dir);
    }
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let mut rules: Vec<(String, String)> = json["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| {
            (
                r["path"].as_str().expect("path").to_string(),
                r["access"].as_str().expect("access").to_string(),
            )
        })
        .collect();
    rules.sort();
    rules
}

/// A sandbox with a runtime dir whose link cache the first policy build wrote: the sandbox,
/// the runtime dir, the cache file, and the policy's rules from a listing (no cache).
fn cached_scene(
    name: &str,
) -> (
    Sandbox,
    std::path::PathBuf,
    std::path::PathBuf,
    Vec<(String, String)>,
) {
    let sb = Sandbox::new(name);
    let run_dir = runtime_dir(&sb);
    etc_settled();
    let listed = policy_rules(&sb, None);
    // The first launch with a runtime dir lists /etc and keeps the names of its links.
    let cache = run_dir.join("landwall/links%etc");
    assert_eq!(policy_rules(&sb, Some(&run_dir)), listed);
    assert!(cache.exists(), "no cache written at {}", cache.display());
    (sb, run_dir, cache, listed)
}

#[test]
fn link_cache_gives_the_listings_policy_and_the_agent_cannot_write_it() {
    let (sb, run_dir, cache, listed) = cached_scene("linkcache");
    let kept = std::fs::read(&cache).expect("read cache");
    // The second takes them from the cache: the same policy.
    assert_eq!(policy_rules(&sb, Some(&run_dir)), listed);
    // Inside the wall the cache cannot be rewritten or added to.
    sb.agent_script(
        "claude",
        &format!(
            "\"{h}\" write \"{c}\"; echo \"write -> $?\"\n\"{h}\" write \"{n}\"; echo \"create -> $?\"",
            h = sb.probe().display(),
            c = cache.display(),
            n = run_dir.join("landwall/links%new").display()
        ),
    );
    let out = run(sb.shim("claude").env("XDG_RUNTIME_DIR", &run_dir));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("write -> {EACCES}\ncreate -> {EACCES}\n")
    );
    assert_eq!(std::fs::read(&cache).expect("read cache"), kept);
}

#[test]
fn a_forged_link_cache_grants_nothing_more() {
    let (sb, run_dir, cache, listed) = cached_scene("linkforge");
    let text = std::fs::read(&cache).expect("read cache");
    let key_end = text.iter().position(|&b| b == b'\n').expect("key line") + 1;
    // Same key (the file looks current), other names: files and directories that are not
    // links, a path, a name that does not exist, and one real link kept.
    let mut forged = text[..key_end].to_vec();
    for name in ["passwd", "ssl", "../root", "no-such-entry", ""] {
        forged.extend_from_slice(name.as_bytes());
        forged.push(0);
    }
    if let Some(real_link) = text[key_end..].split(|&b| b == 0).find(|n| !n.is_empty()) {
        forged.extend_from_slice(real_link);
        forged.push(0);
    }
    std::fs::write(&cache, &forged).expect("forge cache");
    let from_forgery = policy_rules(&sb, Some(&run_dir));
    for rule in &from_forgery {
        assert!(listed.contains(rule), "forged cache added {rule:?}");
    }
}

/// The agent commits in `dir` behind the shim; the commit then shows in `main` (the watcher
/// moves a linked worktree's objects in; the caller gets end-of-file once it has).
fn agent_commits_in(sb: &Sandbox, dir: &Path, main: &Path, branch: &str) {
    sb.agent_script(
        "claude",
        "set -e\nexport GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@landwall.invalid\n\
         export GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@landwall.invalid\n\
         echo work > work.txt\ngit add work.txt\ngit commit -qm 'agent commit'\necho done",
    );
    let out = run(sb.shim("claude").current_dir(dir));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(stdout(&out), "done\n", "{}", stderr(&out));
    let log = sb.git(main, &["log", "-1", "--format=%s", branch]);
    assert_eq!(stdout(&log), "agent commit\n");
    sb.git(main, &["fsck", "--strict", "--no-progress"]);
}

/// A main checkout with one commit, in `<sandbox>/main`.
fn main_checkout(sb: &Sandbox) -> std::path::PathBuf {
    let main = sb.root.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git(&main, &["init", "-q"]);
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git(&main, &["add", "README"]);
    sb.git(&main, &["commit", "-qm", "initial"]);
    main
}

#[test]
fn git_layouts_git_makes_are_accepted() {
    let sb = Sandbox::new("layouts");
    let main = main_checkout(&sb);
    // `git worktree add` with a relative path, and with an absolute one.
    sb.git(&main, &["worktree", "add", "-q", "../rel", "-b", "rel"]);
    agent_commits_in(&sb, &sb.root.join("rel"), &main, "rel");
    let abs = sb.root.join("abs");
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            abs.to_str().expect("utf8"),
            "-b",
            "abs",
        ],
    );
    agent_commits_in(&sb, &abs, &main, "abs");
    // git 2.48's relative links, where this git has them.
    let help = Command::new("git")
        .args(["worktree", "add", "-h"])
        .output()
        .expect("git");
    if String::from_utf8_lossy(&help.stdout).contains("relative-paths") {
        sb.git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                "--relative-paths",
                "../relpaths",
                "-b",
                "rp",
            ],
        );
        agent_commits_in(&sb, &sb.root.join("relpaths"), &main, "rp");
    } else {
        eprintln!("git has no --relative-paths (2.48+): that layout is not tried");
    }
    // A linked worktree nested in the main checkout, as Claude Code makes them.
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            ".claude/worktrees/n",
            "-b",
            "nested",
        ],
    );
    agent_commits_in(&sb, &main.join(".claude/worktrees/n"), &main, "nested");
    // And a subdirectory of it.
    std::fs::create_dir_all(main.join(".claude/worktrees/n/sub")).expect("mkdir");
    let out = run(sb
        .shim("claude")
        .current_dir(main.join(".claude/worktrees/n/sub")));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_submodule_is_accepted_and_commits() {
    let sb = Sandbox::new("submodule");
    let lib = sb.root.join("lib");
    std::fs::create_dir_all(&lib).expect("mkdir");
    sb.git(&lib, &["init", "-q"]);
    std::fs::write(lib.join("lib.txt"), "lib\n").expect("write");
    sb.git(&lib, &["add", "lib.txt"]);
    sb.git(&lib, &["commit", "-qm", "lib"]);
    let main = main_checkout(&sb);
    sb.git(
        &main,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "add",
            "-q",
            lib.to_str().expect("utf8"),
            "libs/lib",
        ],
    );
    let sub = main.join("libs/lib");
    assert!(sub.join(".git").is_file(), "git made no gitfile");
    let out = run(sb.landwall().arg("policy").current_dir(&sub));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("core.worktree names this worktree back"),
        "{}",
        stdout(&out)
    );
    agent_commits_in(&sb, &sub, &sub, "HEAD");
}

#[test]
fn a_fetched_pack_reaches_the_repository() {
    // More than fetch.unpackLimit (100) objects: git keeps the pack, in the quarantine, and
    // the watcher has `git index-pack` take it in.
    let sb = Sandbox::new("fetchpack");
    let main = main_checkout(&sb);
    let upstream = sb.root.join("upstream");
    sb.git(
        &sb.root,
        &["clone", "-q", main.to_str().expect("utf8"), "upstream"],
    );
    for i in 0..60 {
        std::fs::write(upstream.join(format!("f{i}")), format!("{i}\n")).expect("write");
    }
    sb.git(&upstream, &["add", "."]);
    sb.git(&upstream, &["commit", "-qm", "many files"]);
    for i in 0..60 {
        std::fs::write(upstream.join(format!("g{i}")), format!("g{i}\n")).expect("write");
    }
    sb.git(&upstream, &["add", "."]);
    sb.git(&upstream, &["commit", "-qm", "more files"]);
    let linked = sb.root.join("linked");
    sb.git(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            linked.to_str().expect("utf8"),
            "-b",
            "task",
        ],
    );
    let cfg = sb.config(&format!("read_only = [\"{}\"]\n", upstream.display()));
    sb.agent_script(
        "claude",
        &format!(
            "set -e\ngit fetch -q '{}' master:refs/remotes/up/master 2>/dev/null || git fetch -q '{}' main:refs/remotes/up/main\n\
             ls \"$(git rev-parse --git-dir)/landwall-objects/pack\" | grep -c '\\.pack$'\necho done",
            upstream.display(),
            upstream.display()
        ),
    );
    let out = run(sb
        .shim("claude")
        .current_dir(&linked)
        .env("LANDWALL_CONFIG", &cfg));
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert_eq!(
        stdout(&out),
        "1\ndone\n",
        "the fetch did not keep a pack: {}",
        stderr(&out)
    );
    let head = stdout(&sb.git(&upstream, &["rev-parse", "HEAD"]));
    sb.git(&main, &["cat-file", "-e", head.trim()]);
    sb.git(&main, &["fsck", "--strict", "--no-progress"]);
}

/// Started from `$HOME`, from above it, or from a directory of projects that is not itself a
/// repository (`~/src`), the shim refuses (78, one line, the agent does not run): the agent
/// would get every project in it. Named on purpose with LANDWALL_WORKTREE, it runs; started
/// inside one project, it runs.
#[test]
fn refused_from_home_or_a_directory_of_projects() {
    let sb = Sandbox::new("too-wide");
    sb.agent_script("claude", "true");
    let projects = sb.root.join("projects");
    for p in ["a", "b"] {
        std::fs::create_dir_all(projects.join(p)).expect("mkdir");
        sb.git(&projects.join(p), &["init", "-q"]);
    }
    let refused = |dir: &Path, what: &str| {
        let out = run(sb.shim("claude").current_dir(dir));
        assert_eq!(
            out.status.code(),
            Some(EXIT_CONFIG),
            "{what}: {}",
            stderr(&out)
        );
        assert!(!sb.ran_in(dir), "{what}: the agent ran");
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{what}: one line: {err}");
        assert!(err.contains("LANDWALL_WORKTREE"), "{what}: {err}");
        err
    };
    let err = refused(&sb.home(), "home");
    assert!(err.contains("home directory"), "{err}");
    refused(&sb.root, "above home");
    let err = refused(&projects, "projects");
    assert!(err.contains("directory of projects"), "{err}");
    // Found by review: deeper layouts, bare repositories, and a `.git` planted to make the
    // directory of projects look like a repository.
    let deep = sb.root.join("code");
    std::fs::create_dir_all(deep.join("github.com/u/repo")).expect("mkdir");
    sb.git(&deep.join("github.com/u/repo"), &["init", "-q"]);
    refused(&deep, "three levels down");
    refused(&deep.join("github.com"), "two levels down");
    let bare = sb.root.join("repos");
    std::fs::create_dir_all(&bare).expect("mkdir");
    sb.git(&bare, &["init", "-q", "--bare", "app.git"]);
    refused(&bare, "a bare repository");
    std::fs::create_dir_all(projects.join(".git")).expect("mkdir");
    refused(&projects, "a planted empty .git");
    // Named on purpose.
    let out = run(sb
        .shim("claude")
        .current_dir(sb.home())
        .env("LANDWALL_WORKTREE", sb.home()));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.ran_in(&sb.home()));
    // Inside one project.
    let out = run(sb.shim("claude").current_dir(projects.join("a")));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.ran_in(&projects.join("a")));
}

/// The native Claude Code install, as its installer lays it out: `~/.local/bin/claude`, a
/// link to `~/.local/share/claude/versions/<version>`. Under the private home it runs (its
/// install is read-only to it) and reads its own files, but cannot write a new version
/// there: it updates itself only where the policy lets it.
#[test]
fn native_claude_install_runs_under_the_private_home() {
    let sb = Sandbox::new("native-claude");
    let versions = sb.home().join(".local/share/claude/versions");
    std::fs::create_dir_all(&versions).expect("mkdir");
    std::fs::create_dir_all(sb.home().join(".local/bin")).expect("mkdir");
    let draft = sb.root.join("claude-native");
    std::fs::write(
        &draft,
        "#!/bin/sh\necho ran > \"$PWD/marker\"\ncat \"$HOME/.local/share/claude/versions/2.0.0\" >/dev/null && echo read-self\n\
         { echo new > \"$HOME/.local/share/claude/versions/2.0.1\"; } 2>/dev/null && echo updated\ntrue\n",
    )
    .expect("write");
    let status = Command::new("install")
        .args(["-m", "755"])
        .arg(&draft)
        .arg(versions.join("2.0.0"))
        .status()
        .expect("install");
    assert!(status.success());
    std::os::unix::fs::symlink(
        "../share/claude/versions/2.0.0",
        sb.home().join(".local/bin/claude-real"),
    )
    .expect("symlink");
    let mut c = sb.shim("claude");
    let path = format!(
        "{}:{}:/usr/bin:/bin",
        sb.shims().display(),
        sb.home().join(".local/bin").display()
    );
    let out = run(c.env("PATH", &path));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.ran_in(&sb.wt()));
    let text = stdout(&out);
    assert!(text.contains("read-self"), "{text}");
    assert!(!text.contains("updated"), "{text}");
    assert!(!versions.join("2.0.1").exists());
    // Control: under an open home it updates itself.
    let open = sb.config("home = \"open\"\n");
    let out = run(sb
        .shim("claude")
        .env("PATH", &path)
        .env("LANDWALL_CONFIG", &open));
    assert!(stdout(&out).contains("updated"), "{}", stderr(&out));
    assert!(versions.join("2.0.1").exists());
}

/// Found by a new user: launches failed at random (exit 100, "opening …/passwd.30373 for
/// its rule: No such file or directory") while a directory the policy lists entry by entry
/// (one holding a denied path: `/etc` as root) changed. An entry that vanishes between the
/// listing and the wall is not granted; it is no reason to refuse. Here the worktree holds a
/// denied path, so it is listed the same way, and a thread creates, renames and deletes
/// files in it throughout 500 launches: every one runs. (Before the fix, tens of them
/// failed in such a run.)
#[test]
fn launches_tolerate_a_listed_directory_that_changes() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let sb = Sandbox::new("churn");
    sb.agent_script("claude", "true");
    std::fs::write(sb.wt().join("secret"), "x").expect("write");
    let cfg = sb.config(&format!(
        "deny = [\"{}\"]\n",
        sb.wt().join("secret").display()
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (stop, wt) = (stop.clone(), sb.wt());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (a, b) = (
                    wt.join(format!("churn.{n}")),
                    wt.join(format!("churn.{n}.new")),
                );
                let _written = std::fs::write(&a, "x").is_ok();
                let _renamed = std::fs::rename(&a, &b).is_ok();
                let _removed = std::fs::remove_file(&b).is_ok();
                n += 1;
            }
            n
        })
    };
    let mut failed = Vec::new();
    for i in 0..500 {
        let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
        if out.status.code() != Some(0) {
            failed.push(format!("launch {i}: {:?}: {}", out.status, stderr(&out)));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let churned = churn.join().expect("churn thread");
    assert!(
        churned > 500,
        "the directory hardly changed ({churned} files)"
    );
    assert!(
        failed.is_empty(),
        "{} of 500 launches failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
}

/// A configured path is checked as what it names, not as it is written: `..` is refused for
/// every key, and a path that resolves to `/`, or a device path that resolves outside /dev,
/// is refused whatever the link on the way (issue 18). Control: the same grants written as
/// the plain paths they mean are accepted, and `/dev/pts/..` really is /dev.
#[test]
fn configured_paths_are_checked_after_resolving() {
    let sb = Sandbox::new("cfg-dotdot");
    sb.agent_script("claude", "true");
    let links = sb.root.join("links");
    std::fs::create_dir_all(&links).expect("mkdir");
    std::os::unix::fs::symlink("/", links.join("root")).expect("symlink");
    std::os::unix::fs::symlink("/etc", links.join("etc")).expect("symlink");
    assert_eq!(
        std::fs::canonicalize("/dev/pts/..").expect("canonicalize"),
        Path::new("/dev"),
        "premise: /dev/pts/.. is /dev"
    );
    let wt = sb.wt();
    let cases = [
        (
            "devices = [\"/dev/pts/..\"]\n".to_string(),
            "goes up with `..`",
        ),
        (
            "devices = [\"/dev/../srv\"]\n".to_string(),
            "goes up with `..`",
        ),
        (
            "writable = [\"/etc/..\"]\n".to_string(),
            "goes up with `..`",
        ),
        (
            "read_only = [\"/usr/../etc\"]\n".to_string(),
            "goes up with `..`",
        ),
        (
            format!("[agents.claude]\nwritable = [\"{}/..\"]\n", wt.display()),
            "goes up with `..`",
        ),
        (
            "[unix]\nsockets = [\"/run/../tmp/x\"]\n".to_string(),
            "goes up with `..`",
        ),
        (
            format!("read_only = [\"{}\"]\n", links.join("root").display()),
            "resolves to /:",
        ),
        // /dev/fd is a link to /proc/self/fd.
        (
            "devices = [\"/dev/fd\"]\n".to_string(),
            "grants devices under /dev",
        ),
    ];
    for (text, why) in cases {
        let cfg = sb.config(&text);
        let out = run(sb.shim("claude").env("LANDWALL_CONFIG", &cfg));
        assert_refused(&sb, &out, EXIT_CONFIG);
        let err = stderr(&out);
        assert!(err.contains(why), "{text}: {err}");
        assert!(
            err.contains(&format!("{}:", cfg.display())),
            "{text}: no file: {err}"
        );
    }
    // Control: what the refused entries mean, written plainly, builds a policy.
    let cfg = sb.config(&format!(
        "devices = [\"/dev/zero\"]\nread_only = [\"/etc\", \"{}\"]\n",
        links.join("etc").display()
    ));
    let out = run(sb.landwall().args(["policy"]).env("LANDWALL_CONFIG", &cfg));
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The real agent found through a path or link the agent can change (a directory of its
/// worktree first on PATH, here) and leading out of its writable grants: the agent could
/// repoint the link at any program between launches, and the launch would grant that
/// program's directory (found by review: a link swapped between the policy and the exec read
/// another project's files). Refused (78). Controls: the same link pointing into the
/// worktree runs, and the shim execs the real path its grant was made for.
#[test]
fn a_real_agent_the_agent_can_repoint_is_refused() {
    let sb = Sandbox::new("repoint");
    let tool = sb.outside().join("tool");
    std::fs::write(&tool, "#!/bin/sh\necho ran > \"$PWD/marker\"\n").expect("write tool");
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = sb.wt().join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(&tool, bin.join("claude-real")).expect("symlink");
    let path = format!(
        "{}:{}:{}",
        sb.shims().display(),
        bin.display(),
        landwall_e2e::SYSTEM_PATH
    );
    let out = run(sb.shim("claude").env("PATH", &path));
    assert_refused(&sb, &out, EXIT_CONFIG);
    assert!(
        stderr(&out).contains("could point it at another program"),
        "{}",
        stderr(&out)
    );
    // Control: the link leads into the worktree, where the agent could write anyway.
    let own = sb.wt().join("own-agent");
    std::fs::copy(&tool, &own).expect("copy");
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::remove_file(bin.join("claude-real")).expect("rm link");
    std::os::unix::fs::symlink(&own, bin.join("claude-real")).expect("symlink");
    let out = run(sb.shim("claude").env("PATH", &path));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(sb.ran_in(&sb.wt()));
}
