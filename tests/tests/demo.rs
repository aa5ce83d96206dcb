//! `make demo` (scripts/demo.sh) does its job for root and for an unprivileged user: the
//! script exits non-zero when any row of its table differs from what the default policy
//! promises, so its status is the verdict. It runs the built `landwall` from a copy the
//! test user can reach.

use std::path::PathBuf;
use std::process::Command;

use landwall_e2e::{describe, install_binary, landwall, output, test_user, Sandbox, TEST_USER};

fn demo(sb: &Sandbox, as_user: bool) -> std::process::Output {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scripts/demo.sh");
    assert!(script.is_file(), "{} is missing", script.display());
    let bin = sb.root.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    let copy = bin.join("landwall");
    if !copy.exists() {
        install_binary(&landwall(), &copy);
    }
    let mut c = if as_user {
        test_user();
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={TEST_USER}"))
            .arg(format!("--regid={TEST_USER}"))
            .args(["--init-groups", "--", "bash"]);
        c
    } else {
        Command::new("bash")
    };
    c.arg(&script).arg(&copy).current_dir(&sb.root).env_clear();
    c.env("PATH", landwall_e2e::SYSTEM_PATH)
        .env("HOME", if as_user { "/nonexistent" } else { "/root" })
        .env("LANG", "C.UTF-8");
    output(&mut c)
}

fn check(out: &std::process::Output, who: &str) {
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "demo as {who}: {}",
        describe(out)
    );
    // What the exit status vouches for was really shown: the table with the kernel's
    // refusals, the agent's commit, and the refusals from ~ and ~/src.
    for needle in [
        "DENIED by the kernel",
        "the agent's commit is on branch feature",
        "refusing worktree ~:",
        "refusing worktree ~/src:",
        "same process: yes",
    ] {
        assert!(
            text.contains(needle),
            "demo as {who}: no {needle:?}: {text}"
        );
    }
}

#[test]
fn demo_passes_as_root() {
    let sb = Sandbox::new("demo-root");
    check(&demo(&sb, false), "root");
}

#[test]
fn demo_passes_as_an_unprivileged_user() {
    let sb = Sandbox::new("demo-user");
    check(&demo(&sb, true), TEST_USER);
}
