//! The agents' command-bearing state in `$HOME` (`landwall::profile::agent_code`), each
//! path of it: a walled launch cannot leave anything there for a later launch in another
//! project, or for the agent run without the shim. Each file is written (each directory
//! gets a file), by every agent's launch (under the private home a launch may write only its
//! own agent's state, and `~/.cache`). The control writes the same without the wall, and it
//! lands. The real agents reading such plants are in `agents.rs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use landwall::profile::{agent_code, Make};
use landwall_e2e::{chown_tree, describe, output, test_user, Sandbox};

/// What a plant writes: in a file, or in a file of its own in a directory.
const PLANT: &str = "planted by the agent";

/// The entry of the user's that stands for `*` in a path (`~/.config/opencode/*`): there
/// before the launch ([`user_entries`]).
const ENTRY: &str = "lib";

/// Makes the entries `*` stands for as a whole component (`~/.config/opencode/lib`, the
/// snapshot git dir `~/.local/share/opencode/snapshot/lib/lib`). Inside a name
/// (`~/.codex/*.config.toml`) it stands for one the agent makes: `lib.config.toml`.
fn user_entries(home: &Path) {
    for (_, code) in agent_code() {
        let whole = code.path.split('/').any(|c| c == "*");
        if let Some(last) = code.path.rfind('*').filter(|_| whole) {
            let dir = code.path[..=last].replace('*', ENTRY);
            fs::create_dir_all(home.join(dir)).expect("mkdir");
        }
    }
}

/// Where the plant for `path` lands: the file itself, or `plant.md` in a directory.
fn target(home: &Path, path: &str, dir: bool) -> PathBuf {
    let path = path.replace('*', ENTRY);
    let p = home.join(path);
    if dir {
        p.join("plant.md")
    } else {
        p
    }
}

/// Whether `path` is a directory in the profile: made as one, or named like one.
fn is_dir(path: &str, make: Option<Make>) -> bool {
    match make {
        Some(Make::Dir) => true,
        Some(Make::File(_) | Make::FileUnless(..)) => false,
        None => !Path::new(path)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains('.')),
    }
}

/// A shell script that plants in every path of the list, going on past each failure.
fn script(home: &Path) -> String {
    let mut s = String::new();
    for (_, code) in agent_code() {
        let dir = is_dir(code.path, code.make);
        let t = target(home, code.path, dir);
        let parent = t.parent().expect("a parent");
        s.push_str(&format!(
            "mkdir -p '{}' 2>/dev/null; echo '{PLANT}' >> '{}' 2>/dev/null;\n",
            parent.display(),
            t.display()
        ));
    }
    s.push_str("true\n");
    s
}

/// The paths whose plant is there now.
fn planted(home: &Path) -> Vec<PathBuf> {
    agent_code()
        .map(|(_, c)| target(home, c.path, is_dir(c.path, c.make)))
        .filter(|t| fs::read_to_string(t).is_ok_and(|s| s.contains(PLANT)))
        .collect()
}

#[test]
fn no_launch_leaves_a_plant_in_any_agents_command_bearing_state() {
    for agent in ["claude", "codex", "opencode"] {
        let sb = Sandbox::new(&format!("agent-state-{agent}"));
        let home = sb.home();
        user_entries(&home);
        let mut c = sb.landwall();
        c.args(["run", "--agent", agent, "--", "sh", "-c", &script(&home)]);
        let out = output(&mut c);
        assert!(out.status.success(), "{agent}: {}", describe(&out));
        // What appeared where nothing was is set aside by the watcher as it appears, and
        // once more when the launch ends: give it the moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut left = planted(&home);
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = planted(&home);
        }
        assert!(
            left.is_empty(),
            "{agent}: plants left behind the wall: {left:?}\n{}",
            describe(&out)
        );
    }
    // Control: the same script without the wall plants in every path.
    let sb = Sandbox::new("agent-state-control");
    let home = sb.home();
    let out = output(Command::new("sh").args(["-c", &script(&home)]));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(planted(&home).len(), agent_code().count());
}

/// Claude Code's directories of `kept`, relative to `$HOME`.
fn claude_kept(kept: landwall::profile::Kept) -> Vec<&'static str> {
    landwall::profile::agent_shared()
        .filter(|(agent, s)| *agent == "claude" && s.kept == kept)
        .map(|(_, s)| s.path)
        .collect()
}

/// Claude Code's directories that each project keeps to itself
/// (`landwall::profile::Kept::Own`), relative to `$HOME`.
fn claude_layers() -> Vec<&'static str> {
    claude_kept(landwall::profile::Kept::Own)
}

/// What Claude Code keeps per project and per session in `~/.claude`, shared by every
/// session of the user's, walled or not: another project's memory and transcripts, a
/// session's shell snapshot and hook environment (sourced before each of its shell commands),
/// and a file of another session's in each of its layered directories (file history, task
/// lists, plans, IDE lock files, configuration backups, …). Laid out as the user's sessions
/// left them.
fn claude_sessions(home: &Path) -> Vec<PathBuf> {
    let c = home.join(".claude");
    let mut files = vec![
        c.join("projects/-home-u-other/memory/MEMORY.md"),
        c.join("projects/-home-u-other/0b1d.jsonl"),
        c.join("shell-snapshots/snapshot-bash-1-abc.sh"),
        c.join("session-env/0b1d/sessionstart-hook-0.sh"),
    ];
    files.extend(
        claude_layers()
            .into_iter()
            .chain(claude_kept(landwall::profile::Kept::Read))
            .map(|d| home.join(d).join("0b1d/other-session")),
    );
    for f in &files {
        fs::create_dir_all(f.parent().expect("a parent")).expect("mkdir");
        fs::write(f, "the user's\n").expect("write");
    }
    files.to_vec()
}

/// Appends the plant to each of `files`, and makes a memory for a project the user has not
/// opened yet; then writes this project's own memory and transcript. Goes on past failures.
fn claude_sessions_script(home: &Path, files: &[PathBuf], own: &Path) -> String {
    let mut s = String::new();
    for f in files {
        s.push_str(&format!(
            "echo '{PLANT}' >> '{}' 2>/dev/null;\n",
            f.display()
        ));
    }
    let new = home.join(".claude/projects/-home-u-next/memory");
    s.push_str(&format!(
        "mkdir -p '{n}' 2>/dev/null; echo '{PLANT}' > '{n}/MEMORY.md' 2>/dev/null;\n",
        n = new.display()
    ));
    s.push_str(&format!(
        "mkdir -p '{o}/memory' && echo own > '{o}/memory/MEMORY.md' && echo own > '{o}/1.jsonl' || exit 7\n",
        o = own.display()
    ));
    // The project's own directories stay writable behind the wall, and show nothing of
    // the user's (the session's directory is not there: it is made): the plant is there
    // alone, as the agent sees it, and a new session's file is made.
    for d in claude_layers() {
        let d = home.join(d);
        s.push_str(&format!(
            "mkdir -p '{d}/0b1d' && echo '{PLANT}' >> '{d}/0b1d/other-session' && grep -q '{PLANT}' '{d}/0b1d/other-session' || exit 8; if grep -q 'the user' '{d}/0b1d/other-session'; then echo 'saw the user'; fi; mkdir -p '{d}/new' && echo own > '{d}/new/own' || exit 9\n",
            d = d.display()
        ));
    }
    s
}

#[test]
fn another_projects_claude_memory_and_other_sessions_scripts_are_out_of_reach() {
    claude_sessions_walled(false);
}

/// The same as an unprivileged user: the namespace is a user namespace's, and the hole in
/// the read-only hold is made writable there.
#[test]
fn another_projects_claude_memory_and_other_sessions_scripts_are_out_of_reach_unprivileged() {
    claude_sessions_walled(true);
}

fn claude_sessions_walled(unprivileged: bool) {
    let sb = Sandbox::new("claude-sessions");
    let home = sb.home();
    let files = claude_sessions(&home);
    let own = home
        .join(".claude/projects")
        .join(landwall::profile::claude_project_dir(&sb.wt()));
    let script = claude_sessions_script(&home, &files, &own);
    let mut c = if unprivileged {
        let (uid, gid) = test_user();
        for d in [sb.home(), sb.wt()] {
            chown_tree(&d, uid, gid);
        }
        let mut c = as_test_user(&sb, &landwall_e2e::landwall());
        c.current_dir(sb.wt());
        c
    } else {
        sb.landwall()
    };
    c.args(["run", "--agent", "claude", "--", "sh", "-c", &script]);
    let out = output(&mut c);
    // The agent keeps its own project's state.
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        fs::read_to_string(own.join("1.jsonl")).ok().as_deref(),
        Some("own\n")
    );
    for f in &files {
        assert_eq!(
            fs::read_to_string(f).expect("still there"),
            "the user's\n",
            "{} was changed from inside the wall\n{}",
            f.display(),
            describe(&out)
        );
    }
    let new = home.join(".claude/projects/-home-u-next");
    assert!(!new.exists(), "{} was made inside the wall", new.display());
    for d in claude_layers() {
        let new = home.join(d).join("new");
        assert!(!new.exists(), "{} was made inside the wall", new.display());
    }
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("saw the user"),
        "a session's own directory showed the user's files\n{}",
        describe(&out)
    );

    // Control: without the wall every plant lands.
    let sb = Sandbox::new("claude-sessions-control");
    let home = sb.home();
    let files = claude_sessions(&home);
    let own = home.join(".claude/projects/-own");
    let out = output(Command::new("sh").args(["-c", &claude_sessions_script(&home, &files, &own)]));
    assert!(out.status.success(), "{}", describe(&out));
    for f in &files {
        assert!(
            fs::read_to_string(f).expect("there").contains(PLANT),
            "{}",
            f.display()
        );
    }
    assert!(home
        .join(".claude/projects/-home-u-next/memory/MEMORY.md")
        .is_file());
    for d in claude_layers() {
        assert!(home.join(d).join("new/own").is_file(), "{d}");
    }
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .matches("saw the user")
            .count(),
        claude_layers().len()
    );
}

/// A process the agent leaves running waits for a session of the user's to start (its
/// shell snapshot to appear in `dir`) and appends to it: the user's next shell command there
/// would run it, outside the wall.
fn snapshot_waiter(dir: &Path) -> String {
    format!(
        "for i in $(seq 100); do for f in '{d}'/*.sh; do [ -f \"$f\" ] && echo '{PLANT}' >> \"$f\" && exit 0; done; sleep 0.05; done; exit 3",
        d = dir.display()
    )
}

/// Claude Code's and Codex's shell snapshots, each in its agent's launch.
#[test]
fn a_snapshot_of_a_session_started_while_the_agent_runs_is_out_of_its_reach() {
    for (agent, rel) in [
        ("claude", ".claude/shell-snapshots"),
        ("codex", ".codex/shell_snapshots"),
    ] {
        let run = |walled: bool| -> (String, std::process::Output) {
            let sb = Sandbox::new(&format!("snapshot-race-{agent}-{walled}"));
            let dir = sb.home().join(rel);
            fs::create_dir_all(&dir).expect("mkdir");
            let script = snapshot_waiter(&dir);
            let mut c = if walled {
                let mut c = sb.landwall();
                c.args(["run", "--agent", agent, "--", "sh", "-c", &script]);
                c
            } else {
                let mut c = Command::new("sh");
                c.args(["-c", &script]);
                c
            };
            let child = c
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn");
            // The user's session, outside the wall, makes its snapshot while the agent runs.
            std::thread::sleep(Duration::from_millis(500));
            let snap = dir.join("snapshot-bash-2-def.sh");
            fs::write(&snap, "the user's\n").expect("write snapshot");
            let out = child.wait_with_output().expect("wait");
            (fs::read_to_string(&snap).expect("read snapshot"), out)
        };
        let (snap, out) = run(true);
        assert_eq!(snap, "the user's\n", "{agent}: {}", describe(&out));
        // It saw no snapshot at all: exit 3 after its wait.
        assert_eq!(out.status.code(), Some(3), "{agent}: {}", describe(&out));
        let (snap, out) = run(false);
        assert!(snap.contains(PLANT), "{agent}: control: {}", describe(&out));
    }
}

/// Adds an MCP server to Claude Code's copy of `.claude.json`; to OpenCode's `auth.json` a
/// `wellknown` address, a GitHub Copilot sign-in whose `enterpriseUrl` names the agent's
/// server, and its own API key in place of the user's, beside the tokens of a sign-in that
/// OpenCode refreshes: all read again by the agent started without the shim, or by the next
/// launch.
fn mixed_state_script(home: &Path) -> String {
    let py = r#"
import json
try:
    p = 'CLAUDE'
    c = json.load(open(p)); c['mcpServers'] = {'lw': {'command': 'sh', 'args': ['-c', 'touch /tmp/lw']}}
    open(p, 'w').write(json.dumps(c))
except OSError: pass
try:
    p = 'AUTH'
    a = json.load(open(p)); a['http://127.0.0.1:18765'] = {'type': 'wellknown', 'key': 'k', 'token': 't'}
    a['github-copilot'] = {'type': 'oauth', 'access': 'x', 'refresh': 'y', 'expires': 0, 'enterpriseUrl': 'http://127.0.0.1:18765'}
    a['openai']['key'] = 'sk-agent'
    a['anthropic'].update(access='a2', refresh='r2', expires=2)
    open(p, 'w').write(json.dumps(a))
except OSError: pass
"#
    .replace("CLAUDE", &home.join(".claude/.claude.json").display().to_string())
    .replace(
        "AUTH",
        &home.join(".local/share/opencode/auth.json").display().to_string(),
    );
    format!("python3 - <<'PY'\n{py}\nPY")
}

fn mixed_state(home: &Path) {
    fs::create_dir_all(home.join(".claude")).expect("mkdir");
    fs::write(home.join(".claude/.claude.json"), "{\"numStartups\": 3}").expect("write");
    let data = home.join(".local/share/opencode");
    fs::create_dir_all(&data).expect("mkdir");
    fs::write(
        data.join("auth.json"),
        r#"{"anthropic": {"type": "oauth", "access": "a1", "refresh": "r1", "expires": 1}, "openai": {"type": "api", "key": "sk-user"}, "https://corp.example.org": {"type": "wellknown", "key": "X", "token": "t"}}"#,
    )
    .expect("write");
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs::read(path).expect("read")).expect("json")
}

/// Each file is judged again when the launch ends: what the agent added that names code, or
/// where OpenCode sends the user's code, is gone before anything reads it next; what it
/// refreshed stays.
#[test]
fn what_names_code_in_mixed_state_files_is_judged_again_when_the_launch_ends() {
    for agent in ["claude", "opencode"] {
        let sb = Sandbox::new(&format!("mixed-state-{agent}"));
        let home = sb.home();
        mixed_state(&home);
        let mut c = sb.landwall();
        c.args([
            "run",
            "--agent",
            agent,
            "--",
            "sh",
            "-c",
            &mixed_state_script(&home),
        ]);
        let out = output(&mut c);
        let auth = json(&home.join(".local/share/opencode/auth.json"));
        if agent == "opencode" {
            // Under the private home only OpenCode's launch may write auth.json.
            assert!(out.status.success(), "{agent}: {}", describe(&out));
            assert!(
                !auth.to_string().contains("18765"),
                "{auth}\n{}",
                describe(&out)
            );
            assert_eq!(auth["openai"]["key"], "sk-user", "{auth}");
            assert_eq!(auth["anthropic"]["access"], "a2", "{auth}");
            assert_eq!(auth["anthropic"]["refresh"], "r2", "{auth}");
            assert_eq!(
                auth["https://corp.example.org"]["type"], "wellknown",
                "{auth}"
            );
        } else {
            let claude = json(&home.join(".claude/.claude.json"));
            assert!(
                claude.get("mcpServers").is_none(),
                "{claude}\n{}",
                describe(&out)
            );
            assert_eq!(claude["numStartups"], 3, "{claude}");
        }
    }
    // Control: without the wall both land and stay.
    let sb = Sandbox::new("mixed-state-control");
    let home = sb.home();
    mixed_state(&home);
    let out = output(Command::new("sh").args(["-c", &mixed_state_script(&home)]));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(json(&home.join(".claude/.claude.json"))
        .get("mcpServers")
        .is_some());
    let auth = json(&home.join(".local/share/opencode/auth.json"));
    assert!(auth.get("http://127.0.0.1:18765").is_some(), "{auth}");
    assert!(auth.get("github-copilot").is_some(), "{auth}");
    assert_eq!(auth["openai"]["key"], "sk-agent", "{auth}");
}

/// Every path under `dir` with its content (a directory's as empty).
fn tree(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if e.file_type().expect("type").is_dir() {
                todo.push(p.clone());
                out.push((p, Vec::new()));
            } else {
                out.push((p.clone(), fs::read(&p).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

/// `policy`, `check` and `doctor` only look: they make none of the agents' state and put
/// back nothing. A launch does both (the control).
#[test]
fn looking_at_the_policy_changes_nothing_in_the_home() {
    let sb = Sandbox::new("policy-looks");
    let home = sb.home();
    mixed_state(&home);
    // The agents' state directories are there, as after any launch (looking makes those
    // that are not, empty, so that the policy shown is the launch's).
    for dir in [
        ".cache",
        ".codex",
        ".config/opencode",
        ".local/state/opencode",
    ] {
        fs::create_dir_all(home.join(dir)).expect("mkdir");
    }
    let before = tree(&home);
    for args in [
        &["policy", "--agent", "claude"][..],
        &["policy", "--agent", "opencode"],
        &["check", "--agent", "claude", "~/.claude/settings.json"],
        &["doctor"],
    ] {
        let out = output(sb.landwall().args(args));
        assert_eq!(
            tree(&home),
            before,
            "`landwall {}` changed the home\n{}",
            args.join(" "),
            describe(&out)
        );
    }
    let out = output(
        sb.landwall()
            .args(["run", "--agent", "claude", "--", "true"]),
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_ne!(
        tree(&home),
        before,
        "control: a launch makes the agent's state"
    );
}

/// Two launches at once, in two projects: an MCP server that the agent of one writes into
/// Claude Code's `.claude.json` (and, into OpenCode's `auth.json`, a `wellknown` address, a
/// sign-in whose `enterpriseUrl` names its server and its own API key for the user's),
/// again and again while it runs, reaches neither the agent of the other launch nor the file
/// the launches share, which the agent run without the shim reads too (found by review:
/// with one shared copy, put back only at each launch's start and end, a launch that started
/// meanwhile read the plant). Each launch has a copy of its own, judged before its agent
/// starts and when it ends; the rest of what the agent wrote is kept. Control: without the
/// wall, the other side reads the plant.
#[test]
fn a_plant_in_a_mixed_state_file_reaches_no_launch_beside_it() {
    let cases = [
        (
            "claude",
            ".claude/.claude.json",
            Some(r#"{"numStartups": 1}"#),
            r#"{"numStartups": 9, "mcpServers": {"lw": {"command": "planted"}}}"#,
        ),
        (
            "opencode",
            ".local/share/opencode/auth.json",
            Some(
                r#"{"anthropic": {"type": "oauth", "access": "a1", "refresh": "r1", "expires": 1}, "openai": {"type": "api", "key": "sk-user"}}"#,
            ),
            r#"{"anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2}, "openai": {"type": "api", "key": "sk-planted"}, "github-copilot": {"type": "oauth", "access": "x", "refresh": "y", "expires": 3, "enterpriseUrl": "http://planted.example.org"}, "http://planted.example.org": {"type": "wellknown", "key": "K", "token": "t"}}"#,
        ),
        // Each agent's first launch, before it made its file: the launch makes it, empty,
        // so that its agent writes a copy of its own there too.
        (
            "claude",
            ".claude/.claude.json",
            None,
            r#"{"numStartups": 9, "mcpServers": {"lw": {"command": "planted"}}}"#,
        ),
        (
            "opencode",
            ".local/share/opencode/auth.json",
            None,
            r#"{"github-copilot": {"type": "oauth", "access": "x", "refresh": "y", "expires": 3, "enterpriseUrl": "http://planted.example.org"}}"#,
        ),
    ];
    for (agent, rel, start, plant) in cases {
        for walled in [true, false] {
            let sb = Sandbox::new(&format!("beside-{agent}-{walled}"));
            let home = sb.home();
            let copy = home.join(rel);
            fs::create_dir_all(copy.parent().expect("a parent")).expect("mkdir");
            fs::write(home.join(".claude.json"), r#"{"mcpServers": {}}"#).expect("write");
            if let Some(start) = start {
                fs::write(&copy, start).expect("write");
            }
            let other = sb.root.join("other");
            fs::create_dir_all(&other).expect("mkdir");
            sb.git(&other, &["init", "-q"]);
            let ready = sb.wt().join("writing");
            let script = format!(
                ": > '{}'; i=0; while [ $i -lt 150 ]; do printf '%s' '{plant}' > '{}'; i=$((i+1)); sleep 0.01; done",
                ready.display(),
                copy.display()
            );
            let mut writer = if walled {
                let mut c = sb.landwall();
                c.args(["run", "--agent", agent, "--", "sh", "-c", &script]);
                c
            } else {
                let mut c = Command::new("sh");
                c.args(["-c", &script]);
                c
            };
            let writer = writer
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn the writer");
            let deadline = Instant::now() + Duration::from_secs(20);
            while !ready.exists() {
                assert!(Instant::now() < deadline, "the writer did not start");
                std::thread::sleep(Duration::from_millis(10));
            }
            let (mut in_shared, mut in_launch) = (false, false);
            for _ in 0..6 {
                in_shared |= fs::read_to_string(&copy)
                    .unwrap_or_default()
                    .contains("planted");
                let mut r = if walled {
                    let mut c = sb.landwall();
                    c.args(["run", "--agent", agent, "--", "cat"]);
                    c
                } else {
                    Command::new("cat")
                };
                r.arg(&copy).current_dir(&other);
                let out = output(&mut r);
                in_launch |= String::from_utf8_lossy(&out.stdout).contains("planted");
            }
            let out = writer.wait_with_output().expect("wait for the writer");
            assert!(out.status.success(), "{agent}: {}", describe(&out));
            if !walled {
                assert!(
                    in_shared && in_launch,
                    "{agent}: control: the plant was not read"
                );
                continue;
            }
            assert!(
                !in_shared,
                "{agent}: the plant reached the shared file while it ran"
            );
            assert!(
                !in_launch,
                "{agent}: the plant reached the launch beside it"
            );
            // Its end: the plant put back, the rest of what the agent wrote kept.
            let end = json(&copy);
            assert!(!end.to_string().contains("planted"), "{agent}: {end}");
            if start.is_none() {
                let mode = fs::metadata(&copy).expect("stat").permissions();
                assert_eq!(mode.mode() & 0o777, 0o600, "{agent}");
            }
            if agent == "claude" {
                assert_eq!(end["numStartups"], 9, "{end}");
            } else if start.is_none() {
                assert_eq!(end, serde_json::json!({}), "{agent}");
            } else {
                assert_eq!(end["anthropic"]["access"], "a2", "{end}");
                assert_eq!(end["openai"]["key"], "sk-user", "{end}");
            }
        }
    }
}

/// What a walled launch does in `~/.cache` (the caches every tool shares, walled or not):
/// reads what the user has there, rewrites a hook environment's script the user's
/// pre-commit runs, adds a build cache entry, removes a file of the user's; then says what
/// it sees.
const CACHE_SCRIPT: &str = r#"
c=$HOME/.cache
cat "$c/pre-commit/repo/hook.sh"
echo 'planted by the agent' >> "$c/pre-commit/repo/hook.sh" || exit 3
mkdir -p "$c/go-build/aa" && echo 'planted by the agent' > "$c/go-build/aa/obj" || exit 4
rm "$c/pre-commit/repo/keep" || exit 5
test ! -e "$c/pre-commit/repo/keep" || exit 6
"#;

/// What a launch in `dir` sees of the cache: the hook script, and whether the build cache
/// entry is there.
const CACHE_LOOK: &str = r#"
c=$HOME/.cache
cat "$c/pre-commit/repo/hook.sh"
if test -e "$c/go-build/aa/obj"; then echo 'obj there'; fi
"#;

/// `landwall run` of `script` under `sh`, as Codex's launch.
fn codex_run(script: &str) -> [&str; 7] {
    ["run", "--agent", "codex", "--", "sh", "-c", script]
}

/// That the run `out` succeeded and printed exactly `expected`.
fn says(out: &std::process::Output, expected: &str) {
    assert!(out.status.success(), "{}", describe(out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        expected,
        "{}",
        describe(out)
    );
}

/// `program` run as the test user, with the sandbox's clean environment.
fn as_test_user(sb: &Sandbox, program: &Path) -> Command {
    let (uid, gid) = test_user();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={gid}"))
        .args(["--init-groups", "--"])
        .arg(program);
    sb.clean_env(&mut c);
    c
}

/// The user's cache: a pre-commit hook environment.
fn users_cache(home: &Path) {
    let repo = home.join(".cache/pre-commit/repo");
    fs::create_dir_all(&repo).expect("mkdir");
    fs::write(repo.join("hook.sh"), "the user's\n").expect("write");
    fs::write(repo.join("keep"), "the user's\n").expect("write");
}

/// `landwall run` in `dir`, as root or as the test user, with `config` (or none).
fn run_in(
    sb: &Sandbox,
    dir: &Path,
    unprivileged: bool,
    config: Option<&Path>,
    script: &str,
) -> std::process::Output {
    let mut c = if unprivileged {
        as_test_user(sb, &landwall_e2e::landwall())
    } else {
        sb.landwall()
    };
    if let Some(config) = config {
        c.env("LANDWALL_CONFIG", config);
    }
    c.current_dir(dir);
    c.args(["run", "--", "sh", "-c", script]);
    output(&mut c)
}

/// A scene with the user's cache and another project (`other`), owned by the test user
/// where the launch runs as that user.
fn cache_scene(name: &str, unprivileged: bool) -> (Sandbox, PathBuf) {
    let sb = Sandbox::new(name);
    users_cache(&sb.home());
    let other = sb.root.join("other");
    fs::create_dir_all(&other).expect("mkdir");
    if unprivileged {
        let (uid, gid) = test_user();
        for d in [sb.home(), sb.wt(), other.clone()] {
            chown_tree(&d, uid, gid);
        }
    }
    (sb, other)
}

fn cache_layered(unprivileged: bool) {
    let (sb, other) = cache_scene("cache-layer", unprivileged);
    let home = sb.home();
    let out = run_in(&sb, &sb.wt(), unprivileged, None, CACHE_SCRIPT);
    assert!(out.status.success(), "{}", describe(&out));
    // It read the user's cache, and changed it, as it saw it.
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("the user's\n"),
        "{}",
        describe(&out)
    );
    // The user's cache, which the user's own tools read outside the wall, is as it was.
    let repo = home.join(".cache/pre-commit/repo");
    assert_eq!(
        fs::read_to_string(repo.join("hook.sh")).expect("read"),
        "the user's\n"
    );
    assert!(repo.join("keep").is_file(), "the user's file was removed");
    assert!(
        !home.join(".cache/go-build").exists(),
        "a build cache entry reached the user's cache"
    );
    // A launch in another project sees the user's cache, not what the agent wrote.
    let out = run_in(&sb, &other, unprivileged, None, CACHE_LOOK);
    says(&out, "the user's\n");
    // The next launch in the same project keeps its cache.
    let out = run_in(&sb, &sb.wt(), unprivileged, None, CACHE_LOOK);
    says(&out, "the user's\nplanted by the agent\nobj there\n");

    // Control: with the layer left out (`"!~/.cache"`), the same launch rewrites the user's
    // hook script, and the other project's launch meets it.
    let (sb, other) = cache_scene("cache-layer-control", unprivileged);
    let home = sb.home();
    let config = sb.config("protect = [\"!~/.cache\"]\n");
    let out = run_in(&sb, &sb.wt(), unprivileged, Some(&config), CACHE_SCRIPT);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        fs::read_to_string(home.join(".cache/pre-commit/repo/hook.sh"))
            .expect("read")
            .contains(PLANT)
    );
    let out = run_in(&sb, &other, unprivileged, None, CACHE_LOOK);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(PLANT),
        "{}",
        describe(&out)
    );
}

#[test]
fn what_a_launch_writes_in_the_cache_reaches_neither_the_user_nor_another_project() {
    cache_layered(false);
}

/// The same as an unprivileged user: the overlay is mounted in a user namespace.
#[test]
fn what_a_launch_writes_in_the_cache_reaches_neither_the_user_nor_another_project_unprivileged() {
    cache_layered(true);
}

/// The layer is part of the wall: where its store is not the launch's own (here a link
/// laid in its place, as only the user could), the agent does not start, and the launch
/// exits 100. Control: with the store as the launch makes it, the agent runs.
#[test]
fn a_launch_whose_cache_layer_cannot_be_laid_does_not_start() {
    let sb = Sandbox::new("cache-layer-fails");
    sb.agent_script("claude", "exit 0");
    let (uid, gid) = test_user();
    let stores = sb.home().join(".local/state/landwall");
    fs::create_dir_all(&stores).expect("mkdir");
    std::os::unix::fs::symlink(sb.outside(), stores.join("cache")).expect("link");
    for d in [sb.home(), sb.wt(), sb.outside()] {
        chown_tree(&d, uid, gid);
    }
    let shim = |sb: &Sandbox| {
        let mut c = as_test_user(sb, &sb.shims().join("claude"));
        c.current_dir(sb.wt());
        output(&mut c)
    };
    let out = shim(&sb);
    assert_eq!(out.status.code(), Some(100), "{}", describe(&out));
    assert!(
        !sb.ran_in(&sb.wt()),
        "the agent ran without its cache layer"
    );
    assert_eq!(
        fs::read_dir(sb.outside()).expect("read").count(),
        1,
        "a store was made where the link leads"
    );

    fs::remove_file(stores.join("cache")).expect("rm");
    let out = shim(&sb);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(sb.ran_in(&sb.wt()));
}

/// OpenCode's snapshot repositories: an agent makes one, with a `core.fsmonitor` of its
/// choosing, for a project the user has not opened in OpenCode yet (OpenCode would run git
/// with it there, walled or not), and appends to the configuration of the user's own. Behind
/// the wall it writes the project's own directory: the user's snapshot directory is
/// unchanged, and a launch in another project sees none of it. Control: with that
/// directory left out (`"!~/.local/share/opencode/snapshot"`), both land.
#[test]
fn a_snapshot_repository_made_behind_the_wall_reaches_no_other_project() {
    let plant = |home: &Path| {
        let snap = home.join(".local/share/opencode/snapshot");
        format!(
            "mkdir -p '{s}/next/wt' && printf '[core]\\n\\tfsmonitor = {PLANT}\\n' > '{s}/next/wt/config' && mkdir -p '{s}/mine/wt' && echo '{PLANT}' >> '{s}/mine/wt/config'",
            s = snap.display()
        )
    };
    let setup = |sb: &Sandbox| {
        let users = sb.home().join(".local/share/opencode/snapshot/mine/wt");
        fs::create_dir_all(&users).expect("mkdir");
        fs::write(users.join("config"), "[core]\n").expect("write");
        let other = sb.root.join("other");
        fs::create_dir_all(&other).expect("mkdir");
        other
    };
    let launch = |sb: &Sandbox, dir: &Path, config: Option<&Path>, script: &str| {
        let mut c = sb.landwall();
        if let Some(config) = config {
            c.env("LANDWALL_CONFIG", config);
        }
        c.current_dir(dir)
            .args(["run", "--agent", "opencode", "--", "sh", "-c", script]);
        output(&mut c)
    };
    let look = |home: &Path| {
        format!(
            "cat '{s}/next/wt/config' '{s}/mine/wt/config' 2>/dev/null; true",
            s = home.join(".local/share/opencode/snapshot").display()
        )
    };

    let sb = Sandbox::new("opencode-snapshot");
    let other = setup(&sb);
    let home = sb.home();
    let out = launch(&sb, &sb.wt(), None, &plant(&home));
    assert!(out.status.success(), "{}", describe(&out));
    let snap = home.join(".local/share/opencode/snapshot");
    assert!(
        !snap.join("next").exists(),
        "a snapshot repository reached the user's"
    );
    assert_eq!(
        fs::read_to_string(snap.join("mine/wt/config")).expect("read"),
        "[core]\n"
    );
    let out = launch(&sb, &other, None, &look(&home));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains(PLANT),
        "another project's launch saw the plant\n{}",
        describe(&out)
    );

    let sb = Sandbox::new("opencode-snapshot-control");
    let other = setup(&sb);
    let home = sb.home();
    let config = sb.config("protect = [\"!~/.local/share/opencode/snapshot\", \"!~/.local/share/opencode/snapshot/*/*/config\"]\n");
    let out = launch(&sb, &sb.wt(), Some(&config), &plant(&home));
    assert!(out.status.success(), "{}", describe(&out));
    let out = launch(&sb, &other, Some(&config), &look(&home));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).matches(PLANT).count(),
        2,
        "{}",
        describe(&out)
    );
}

/// A mount covers a path, but Landlock grants inodes: with the file system of the held
/// paths mounted a second time (here the scratch tree bound elsewhere, in a mount namespace
/// of the test's), the agent would write them through that other path (found by review:
/// Claude Code's per-session directories, `.git/config`). The launch says the namespace
/// cannot hold there, and with `protect_required` the agent does not start (100). Control:
/// without the second mount, the same launch starts, silent.
#[test]
fn a_second_mount_of_what_a_launch_holds_refuses_its_namespace() {
    let sb = Sandbox::new("alias-mount");
    sb.agent_script("claude", "exit 0");
    sb.git(&sb.wt(), &["init", "-q"]);
    let alias = sb.root.join("outside/alias");
    fs::create_dir_all(&alias).expect("mkdir");
    let required = sb.config("protect_required = true\n");
    let launch = |second_mount: bool, config: Option<&Path>| {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(if second_mount {
                "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\""
            } else {
                "shift 2 && exec \"$@\""
            })
            .arg("sh")
            .arg(&sb.root)
            .arg(&alias)
            .arg(sb.shims().join("claude"));
        sb.clean_env(&mut c);
        if let Some(config) = config {
            c.env("LANDWALL_CONFIG", config);
        }
        c.current_dir(sb.wt());
        output(&mut c)
    };
    let out = launch(true, Some(&required));
    assert_eq!(out.status.code(), Some(100), "{}", describe(&out));
    assert!(
        !sb.ran_in(&sb.wt()),
        "the agent ran with its held paths reachable elsewhere"
    );
    // Without protect_required it starts, and says what is writable.
    let out = launch(true, None);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(sb.ran_in(&sb.wt()));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&alias.display().to_string()),
        "{}",
        describe(&out)
    );
    fs::remove_file(sb.wt().join("marker")).expect("rm marker");

    // Control: without the second mount, the namespace holds and nothing is said.
    let out = launch(false, Some(&required));
    assert!(out.status.success(), "{}", describe(&out));
    assert!(sb.ran_in(&sb.wt()));
    assert!(out.stderr.is_empty(), "{}", describe(&out));
}

/// Where the home's file system cannot hold an overlay's upper layer (an overlay itself, as
/// in a container; NFS), `~/.cache` is covered by the project's own directory instead: the
/// launch starts, the agent's tools see an empty cache of the project's, and what it writes
/// there reaches neither the user's cache nor another project, but the project's next
/// launch. (Here the home lies on an overlay the test mounts in a namespace of its own, and
/// the launch runs as the unprivileged user, whose layers are kept in that home.)
#[test]
fn a_cache_layer_where_no_overlay_can_be_laid_is_the_projects_own() {
    let sb = Sandbox::new("cache-own");
    let (uid, gid) = test_user();
    let top = sb.root.join("outside/ovl");
    let script = format!(
        r#"set -e
top=$1; shift
mkdir -p "$top/l" "$top/u" "$top/m"
mount -t tmpfs tmpfs "$top/u"
mkdir "$top/u/up" "$top/u/wk"
mount -t overlay overlay -o "lowerdir=$top/l,upperdir=$top/u/up,workdir=$top/u/wk" "$top/m"
h=$top/m/h
mkdir -p "$h/.cache/pre-commit" "$h/src/a" "$h/src/b"
echo "the user's" > "$h/.cache/pre-commit/hook.sh"
git -C "$h/src/a" init -q; git -C "$h/src/b" init -q
chown -R {uid}:{gid} "$h"; chmod 755 "$top" "$top/m"
as() {{ setpriv --reuid={uid} --regid={gid} --init-groups -- env HOME="$h" "$@"; }}
cd "$h/src/a"
as "$@" run -- sh -c 'ls -A ~/.cache; echo planted > ~/.cache/plant; echo planted >> ~/.cache/pre-commit/hook.sh 2>/dev/null || true'
echo "--- user's: $(ls -A "$h/.cache" | tr '\n' ' ')$(cat "$h/.cache/pre-commit/hook.sh")"
cd "$h/src/b"
echo "--- b: $(as "$@" run -- sh -c 'ls -A ~/.cache' | tr '\n' ' ')"
cd "$h/src/a"
echo "--- a: $(as "$@" run -- sh -c 'cat ~/.cache/plant')"
"#
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script, "sh"])
        .arg(&top)
        .arg(landwall_e2e::landwall());
    sb.clean_env(&mut c);
    let out = output(&mut c);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    // The agent saw an empty cache of its project's (its `ls -A` printed nothing).
    assert!(text.starts_with("--- user's: "), "{}", describe(&out));
    assert!(
        text.contains("--- user's: pre-commit the user's\n"),
        "the user's cache changed\n{}",
        describe(&out)
    );
    assert!(
        text.contains("--- b: \n"),
        "another project saw the agent's cache\n{}",
        describe(&out)
    );
    assert!(
        text.contains("--- a: planted\n"),
        "the project lost its cache\n{}",
        describe(&out)
    );
}

/// What an agent does to Codex's profile layers (`~/.codex/*.config.toml`): makes one by
/// name, one whose name is as long as a name may be (found by review: its set-aside name
/// was too long, and it stayed), renames one into place, writes the user's own, and makes
/// one last, taking the
/// owner's rights from `~/.codex` in the same instant (so that the watcher, which holds no
/// capability, could not look in it). Then it says whether its first layer was still there
/// a moment later.
const PROFILE_SCRIPT: &str = r#"
c=$HOME/.codex
echo 'notify = ["sh", "-c", "planted by the agent"]' > "$c/work.config.toml"
echo 'notify = ["sh", "-c", "planted by the agent"]' > "$c/$(printf 'a%.0s' $(seq 243)).config.toml"
echo 'notify = ["sh", "-c", "planted by the agent"]' > "$c/.draft" && mv "$c/.draft" "$c/moved.config.toml"
echo 'planted by the agent' >> "$c/mine.config.toml" 2>/dev/null
i=0
while test -e "$c/work.config.toml" && test $i -lt 100; do sleep 0.05; i=$((i+1)); done
test -e "$c/work.config.toml" && echo 'a layer stayed while the agent ran'
python3 -c 'import os, sys; c = sys.argv[1]; open(c + "/late.config.toml", "w").write("planted by the agent\n"); os.chmod(c, 0)' "$c"
"#;

/// The profile layers now in `home`'s `~/.codex`, with what each holds.
fn profile_layers(home: &Path) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = fs::read_dir(home.join(".codex"))
        .expect("list ~/.codex")
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.ends_with(".config.toml").then(|| {
                let text = fs::read_to_string(e.path()).unwrap_or_default();
                (name, text)
            })
        })
        .collect();
    v.sort();
    v
}

fn profile_layer_scene(name: &str, unprivileged: bool) -> Sandbox {
    let sb = Sandbox::new(name);
    let codex = sb.home().join(".codex");
    fs::create_dir_all(&codex).expect("mkdir ~/.codex");
    fs::write(codex.join("mine.config.toml"), "model = \"the user's\"\n").expect("write");
    if unprivileged {
        let (uid, gid) = test_user();
        chown_tree(&sb.home(), uid, gid);
        chown_tree(&sb.wt(), uid, gid);
    }
    sb
}

/// Found by review: `codex --profile <name>` lays `~/.codex/<name>.config.toml` over the
/// user's configuration, and one the user had not made was the agent's to make, for every
/// later launch and for Codex without the shim. Each layer the agent makes is set aside as
/// it appears (and at the end, even where it took the watcher's way in), the user's own is
/// held read-only. The control runs the same script without the wall: every layer stays.
fn profile_layers_walled(unprivileged: bool) {
    let sb = profile_layer_scene("codex-profile", unprivileged);
    let home = sb.home();
    let mut c = if unprivileged {
        as_test_user(&sb, &landwall_e2e::landwall())
    } else {
        sb.landwall()
    };
    c.current_dir(sb.wt()).args(codex_run(PROFILE_SCRIPT));
    let out = output(&mut c);
    // The agent took the owner's rights from `~/.codex`: they stay taken (its doing), but
    // the watcher looked in all the same, giving them back while it looked; its last look
    // may come after the launch has given the terminal back.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut mode = fs::metadata(home.join(".codex"))
        .expect("stat")
        .permissions();
    while mode.mode() & 0o777 != 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        mode = fs::metadata(home.join(".codex"))
            .expect("stat")
            .permissions();
    }
    // What the watcher does last (the whole directory listed again) has had its moment.
    std::thread::sleep(Duration::from_millis(300));
    fs::set_permissions(home.join(".codex"), fs::Permissions::from_mode(0o700)).expect("chmod");
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(mode.mode() & 0o777, 0, "{}", describe(&out));
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("stayed"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        profile_layers(&home),
        vec![(
            "mine.config.toml".to_string(),
            "model = \"the user's\"\n".to_string()
        )],
        "{}",
        describe(&out)
    );
    let aside = fs::read_dir(home.join(".codex"))
        .expect("list")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".landwall-swept-"))
        .count();
    assert_eq!(aside, 4, "{}", describe(&out));

    // Control: the same script without the wall leaves every layer of the agent's.
    let sb = profile_layer_scene("codex-profile-control", unprivileged);
    let mut c = if unprivileged {
        as_test_user(&sb, Path::new("/bin/sh"))
    } else {
        let mut c = Command::new("/bin/sh");
        sb.clean_env(&mut c);
        c
    };
    c.current_dir(sb.wt()).args(["-c", PROFILE_SCRIPT]);
    let out = output(&mut c);
    fs::set_permissions(sb.home().join(".codex"), fs::Permissions::from_mode(0o700))
        .expect("chmod");
    let names: Vec<String> = profile_layers(&sb.home())
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(
        names,
        [
            format!("{}.config.toml", "a".repeat(243)),
            "late.config.toml".into(),
            "mine.config.toml".into(),
            "moved.config.toml".into(),
            "work.config.toml".into(),
        ],
        "{}",
        describe(&out)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("stayed"));
}

#[test]
fn a_codex_profile_layer_the_agent_makes_is_set_aside_and_the_users_held() {
    profile_layers_walled(false);
}

#[test]
fn a_codex_profile_layer_the_agent_makes_is_set_aside_and_the_users_held_unprivileged() {
    profile_layers_walled(true);
}

/// As many launches of one project as the store has slots (32) each have a layer over
/// `~/.cache` already (stood for by overlays the test mounts on those slots, in a namespace
/// of its own): the next launch of the project is not refused but given the project's own
/// directory instead, walled all the same: it sees none of the user's cache, and what it
/// writes lands in the project's store. The control, with the slots free, sees the user's.
/// As the test user, whose stores are in its `$HOME`.
#[test]
fn a_launch_beyond_the_layers_slots_gets_the_projects_own_cache() {
    let (sb, _) = cache_scene("cache-layer-slots", true);
    let home = sb.home();
    let look = "if test -e \"$HOME/.cache/pre-commit/repo/hook.sh\"; then echo users; else echo own; fi; echo 'written by the agent' > \"$HOME/.cache/new\"";
    // Control: the first launch lays the layer, over the user's cache.
    let out = run_in(&sb, &sb.wt(), true, None, look);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "users\n");
    let stores = home.join(".local/state/landwall/cache");
    let project = fs::read_dir(&stores)
        .expect("the stores")
        .flatten()
        .next()
        .expect("the project's store")
        .path();
    let store = fs::read_dir(&project)
        .expect("the project's store")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("cache-"))
        .expect("the cache's store")
        .path();
    let lower = sb.root.join("lower");
    fs::create_dir_all(&lower).expect("mkdir");
    let (uid, gid) = test_user();
    let script = format!(
        "set -e; s='{store}'; for n in $(seq 0 31); do mkdir -p -m 700 \"$s/$n\" \"$s/$n/upper\" \"$s/$n/work\" \"$s/m$n\"; chown {uid}:{gid} \"$s/$n\" \"$s/$n/upper\" \"$s/$n/work\"; mount -t overlay overlay -o \"lowerdir={lower},upperdir=$s/$n/upper,workdir=$s/$n/work,index=on\" \"$s/m$n\"; done; setpriv --reuid={uid} --regid={gid} --init-groups -- '{landwall}' run -- sh -c '{look}'",
        store = store.display(),
        lower = lower.display(),
        landwall = landwall_e2e::landwall().display(),
        look = look.replace('\'', "'\\''"),
    );
    let mut c = Command::new("unshare");
    c.args(["-m", "--propagation", "private", "sh", "-c", &script]);
    sb.clean_env(&mut c);
    c.current_dir(sb.wt());
    let out = output(&mut c);
    says(&out, "own\n");
    assert_eq!(
        fs::read_to_string(store.join("own/new")).expect("written in the project's own"),
        "written by the agent\n"
    );
    assert!(
        !home.join(".cache/new").exists(),
        "the user's cache was written"
    );
}

/// What a process left running behind the wall writes into Codex's temporary directories
/// after the agent exits: `~/.codex/tmp/arg0-linux/<dir>`, which each Codex session puts
/// first on PATH for every command it runs, and `~/.codex/.tmp`, where Codex stages the
/// plugins it installs.
const CODEX_TMP_SCRIPT: &str = r#"
setsid sh -c 'sleep 0.3; mkdir -p "$HOME/.codex/tmp/arg0-linux/codex-arg0x" "$HOME/.codex/.tmp/plugins" && echo "planted by the agent" > "$HOME/.codex/tmp/arg0-linux/codex-arg0x/tr" && echo "planted by the agent" > "$HOME/.codex/.tmp/plugins/marketplace.json" && echo planted > "$HOME/../planted"' </dev/null >/dev/null 2>&1 &
"#;

/// Found by review: a process the agent left running wrote programs into the directory a
/// Codex session started later, without the shim, put first on its PATH
/// (`~/.codex/tmp/arg0-linux`), and they ran unwalled. Walled: `~/.codex/tmp` is a file
/// system of the launch's own, and `~/.codex/.tmp` the project's own directory: the user's
/// hold nothing of it. The control: the same without the wall lands in the user's.
#[test]
fn what_is_left_running_writes_in_codexs_temporary_directories_in_vain() {
    for walled in [false, true] {
        let sb = Sandbox::new("codex-tmp");
        let home = sb.home();
        fs::create_dir_all(home.join(".codex/tmp")).expect("mkdir");
        fs::create_dir_all(home.join(".codex/.tmp")).expect("mkdir");
        let mut c = if walled {
            let mut c = sb.landwall();
            c.args(codex_run(CODEX_TMP_SCRIPT));
            c
        } else {
            let mut c = Command::new("sh");
            sb.clean_env(&mut c);
            c.current_dir(sb.wt()).args(["-c", CODEX_TMP_SCRIPT]);
            c
        };
        let out = output(&mut c);
        assert!(out.status.success(), "{}", describe(&out));
        // The process left running has done its work (or failed at it) by now.
        std::thread::sleep(Duration::from_millis(1500));
        let landed = [
            ".codex/tmp/arg0-linux/codex-arg0x/tr",
            ".codex/.tmp/plugins/marketplace.json",
        ]
        .map(|p| home.join(p).exists());
        assert_eq!(
            landed,
            [!walled, !walled],
            "walled: {walled}:\n{}",
            describe(&out)
        );
    }
}

/// A launch whose watcher did not finish (simulated by its mark left in the record) left a
/// profile layer of the agent's (`~/.codex/evil.config.toml`). The next launch in that
/// worktree judges the names the pattern stands for that the record does not hold before its
/// agent starts: the layer is set aside, the agent does not start (exit 100), and the
/// user's own layer stays. The control: the same without the mark, and the next launch
/// takes the layer as the user's. And where the record was written by a launch that did not
/// judge the pattern (Claude Code's, which may not write `~/.codex`), a layer it does not
/// name is taken as the user's too (found by the benchmark: the user's own layer was set
/// aside, and every later launch refused).
#[test]
fn a_profile_layer_left_by_a_launch_that_did_not_finish_is_judged_at_the_next_start() {
    let (uid, gid) = test_user();
    for (dead, first) in [(false, "codex"), (true, "codex"), (true, "claude")] {
        let judged = dead && first == "codex";
        let sb = profile_layer_scene("codex-profile-dead", true);
        let home = sb.home();
        let launch = |sb: &Sandbox, agent: &str| {
            let mut c = as_test_user(sb, &landwall_e2e::landwall());
            let mut args = codex_run("echo ran > \"$PWD/marker\"");
            args[2] = agent;
            c.current_dir(sb.wt()).args(args);
            output(&mut c)
        };
        let one = launch(&sb, first);
        assert!(one.status.success(), "{}", describe(&one));
        landwall_e2e::settle(&home, &sb.wt());
        fs::remove_file(sb.wt().join("marker")).expect("rm marker");
        let evil = home.join(".codex/evil.config.toml");
        fs::write(
            &evil,
            "notify = [\"sh\", \"-c\", \"planted by the agent\"]\n",
        )
        .expect("plant");
        chown_tree(&evil, uid, gid);
        if dead {
            let real = fs::canonicalize(sb.wt()).expect("real path");
            let mark = home
                .join(landwall::record::UNDER_HOME)
                .join(landwall::record::key(&real))
                .join("open-00000000deadbeef");
            fs::write(&mark, "").expect("leave a mark");
            chown_tree(&mark, uid, gid);
        }
        std::thread::sleep(Duration::from_millis(25));
        let two = launch(&sb, "codex");
        if judged {
            assert_eq!(two.status.code(), Some(100), "{}", describe(&two));
            assert!(
                !sb.ran_in(&sb.wt()),
                "the agent started: {}",
                describe(&two)
            );
        } else {
            assert!(two.status.success(), "{}", describe(&two));
        }
        assert_eq!(evil.exists(), !judged, "{first}: {}", describe(&two));
        assert_eq!(
            fs::read_to_string(home.join(".codex/mine.config.toml")).expect("the user's"),
            "model = \"the user's\"\n"
        );
    }
}
