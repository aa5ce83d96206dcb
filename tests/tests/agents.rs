//! The real agent CLIs — Claude Code, OpenCode and Codex — doing one real turn behind the
//! shim: a model call to a loopback stand-in of their model API, a tool call, a file edit,
//! a reply. What the wall allows works; what it refuses is refused by the kernel, and the
//! error reaches the model in the agent's own tool result, which the stand-in records.
//!
//! - The stand-in is `tests/agents/model_server.py` (python3, standard library only). It
//!   listens on 127.0.0.1, writes its port to a file the test polls, plays the steps of a
//!   script (one tool call per model request), records each tool result in `log.json` and
//!   stops by itself when idle. One server per agent run.
//! - `make agents` (a step of `make test`) installs the CLI versions pinned in the Makefile
//!   into `target/agents`. Without them these tests fail and say so; they never skip.
//! - How each agent is pointed at the stand-in: Claude Code by `ANTHROPIC_BASE_URL`, OpenCode
//!   by an openai-compatible provider in `~/.config/opencode/opencode.json`, Codex by a model
//!   provider with the Responses wire API in `~/.codex/config.toml`. See `docs/agents.md`.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use landwall_e2e::{bin_dir, describe, output, Sandbox, SYSTEM_PATH};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde_json::{json, Value};

/// An agent that has not finished its turn by then is killed, and the test fails.
const AGENT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the stand-in may take to write its port file.
const SERVER_START: Duration = Duration::from_secs(30);
/// The prompt; the stand-in plays its script whatever it says.
const PROMPT: &str = "Carry out the scripted landwall test turn.";
/// The stand-in's final message, which each agent prints when the turn is over.
const FINAL: &str = "Scripted turn complete.";
/// The errno text of EACCES, as shells print it.
const EACCES_TEXT: &str = "Permission denied";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    Claude,
    OpenCode,
    Codex,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Claude => "claude",
            Agent::OpenCode => "opencode",
            Agent::Codex => "codex",
        }
    }

    fn package(self) -> &'static str {
        match self {
            Agent::Claude => "@anthropic-ai/claude-code",
            Agent::OpenCode => "opencode-ai",
            Agent::Codex => "@openai/codex",
        }
    }

    /// The Makefile variable that pins the version.
    fn version_var(self) -> &'static str {
        match self {
            Agent::Claude => "CLAUDE_CODE_VERSION",
            Agent::OpenCode => "OPENCODE_VERSION",
            Agent::Codex => "CODEX_VERSION",
        }
    }

    /// What the agent's file-write tool reports when the kernel refuses the write.
    fn write_refused(self) -> &'static str {
        match self {
            // Node's error: "EACCES: permission denied, open '…'".
            Agent::Claude => "EACCES",
            // Effect's name for EACCES: "PermissionDenied: FileSystem.writeFile (…)".
            Agent::OpenCode => "PermissionDenied: FileSystem.writeFile",
            // apply_patch drops the OS error: "Failed to write file …" (the shell tool shows
            // the errno; see docs/agents.md).
            Agent::Codex => "Failed to write file",
        }
    }
}

/// The version pinned by `var` in the Makefile (the one place it is written).
fn pinned(var: &str) -> String {
    let makefile = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Makefile");
    let text = fs::read_to_string(&makefile)
        .unwrap_or_else(|e| panic!("reading {}: {e}", makefile.display()));
    let prefix = format!("{var} := ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no `{prefix}` line in {}", makefile.display()))
}

/// `target/agents/node_modules`, where `make agents` installs the CLIs.
fn node_modules() -> PathBuf {
    bin_dir()
        .parent()
        .expect("target dir above target/debug")
        .join("agents")
        .join("node_modules")
}

fn is_elf(path: &Path) -> bool {
    fs::read(path).is_ok_and(|b| b.starts_with(b"\x7fELF"))
}

/// npm's bin directory, after checking that the pinned version of `agent` is installed there
/// with its native binary. Fails (never skips) with the command to run when it is not.
fn cli_bin_dir(agent: Agent) -> PathBuf {
    let version = pinned(agent.version_var());
    let nm = node_modules();
    let how = format!(
        "run `make agents` (npm install of {}@{version} into {})",
        agent.package(),
        nm.parent().expect("agents dir").display()
    );
    let bin = nm.join(".bin").join(agent.name());
    assert!(
        bin.exists(),
        "the real {} CLI is not installed: {} is missing; {how}",
        agent.name(),
        bin.display()
    );
    let manifest = nm.join(agent.package()).join("package.json");
    let text = fs::read_to_string(&manifest)
        .unwrap_or_else(|e| panic!("reading {}: {e}; {how}", manifest.display()));
    let manifest_json: Value = serde_json::from_str(&text).expect("package.json");
    assert_eq!(
        manifest_json["version"].as_str(),
        Some(version.as_str()),
        "{} is not version {version}; {how}",
        nm.join(agent.package()).display()
    );
    match agent {
        // The postinstall replaces a stub with the platform package's native binary.
        Agent::Claude | Agent::OpenCode => assert!(
            is_elf(&bin),
            "{} is not the native binary (did npm skip the package's postinstall?); {how}",
            bin.display()
        ),
        // A node launcher that runs the native binary of the platform package.
        Agent::Codex => {
            let arch = match std::env::consts::ARCH {
                "x86_64" => "x64",
                "aarch64" => "arm64",
                other => other,
            };
            let platform = nm.join(format!("@openai/codex-linux-{arch}"));
            assert!(
                platform.is_dir(),
                "{} is missing (npm skipped the optional platform package?); {how}",
                platform.display()
            );
        }
    }
    nm.join(".bin")
}

/// A script step: the model asks for a shell command.
fn shell(command: &str) -> Value {
    json!({"kind": "shell", "command": command})
}

/// A script step: the model asks the agent's file-write tool to create `path`.
fn write(path: &Path, content: &str) -> Value {
    json!({"kind": "write", "path": path, "content": content})
}

/// The stand-in model server for one agent run; killed on drop (it also stops by itself).
struct ModelServer {
    child: Child,
    dir: PathBuf,
    port: u16,
}

impl ModelServer {
    fn start(sb: &Sandbox, tag: &str, steps: Vec<Value>) -> ModelServer {
        // Outside every grant: the agent can neither read nor rewrite the record.
        let dir = sb.root.join(format!("model-{tag}"));
        fs::create_dir_all(&dir).expect("mkdir model dir");
        let script = json!({"steps": steps, "final": FINAL});
        fs::write(dir.join("script.json"), script.to_string()).expect("write script.json");
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("agents/model_server.py");
        let mut child = Command::new("python3")
            .arg(&server)
            .arg("--dir")
            .arg(&dir)
            .args(["--idle", "300", "--lifetime", "900"])
            .stdin(Stdio::null())
            .stdout(fs::File::create(dir.join("server.out")).expect("server.out"))
            .stderr(fs::File::create(dir.join("server.err")).expect("server.err"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the stand-in model server `python3 {}`: {e}; install python3",
                    server.display()
                )
            });
        let deadline = Instant::now() + SERVER_START;
        let port = loop {
            if let Some(port) = fs::read_to_string(dir.join("port"))
                .ok()
                .and_then(|t| t.trim().parse::<u16>().ok())
            {
                break port;
            }
            if let Some(status) = child.try_wait().expect("wait for the model server") {
                panic!(
                    "the stand-in model server exited ({status}) before listening: {}",
                    fs::read_to_string(dir.join("server.err")).unwrap_or_default()
                );
            }
            if Instant::now() > deadline {
                let _ignored = child.kill();
                panic!("the stand-in model server wrote no port within {SERVER_START:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        ModelServer { child, dir, port }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log(&self) -> Value {
        let text = fs::read_to_string(self.dir.join("log.json")).expect("read model log.json");
        serde_json::from_str(&text).expect("model log.json")
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ignored = self.child.kill();
        let _ignored = self.child.wait();
    }
}

/// Behind the shim, or the real CLI run directly (the control).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wall {
    Shim,
    None,
}

/// What each run needs besides the defaults.
#[derive(Clone, Copy, Default)]
struct Options<'a> {
    /// `LANDWALL_CONFIG` (a strict-home configuration).
    config: Option<&'a Path>,
    /// Extra variables set outside the shim.
    env: &'a [(&'a str, &'a str)],
    /// Codex only: keep Codex's own sandbox (`-s workspace-write`) instead of bypassing it.
    codex_sandbox: bool,
    /// Keep the agent's configuration as an earlier run left it, where there is one, but
    /// for the stand-in's address.
    keep_config: bool,
    /// OpenCode only: an npm plugin its configuration names (installed by the test).
    plugin: Option<&'a str>,
    /// Codex only: `--profile` (a layer `~/.codex/<name>.config.toml`, if there is one).
    profile: Option<&'a str>,
}

/// Writes the agent's configuration for the stand-in (as a user would, in `$HOME`) and
/// returns the command for one non-interactive turn with tool use approved in advance.
fn agent_command(
    agent: Agent,
    sb: &Sandbox,
    server: &ModelServer,
    cli_bin: &Path,
    dir: &Path,
    wall: Wall,
    opts: Options<'_>,
) -> Command {
    let mut c = match wall {
        Wall::Shim => Command::new(sb.shims().join(agent.name())),
        Wall::None => Command::new(cli_bin.join(agent.name())),
    };
    sb.clean_env(&mut c);
    let path = match wall {
        // The shim finds the next `<agent>` on PATH that is not itself: npm's.
        Wall::Shim => format!(
            "{}:{}:{SYSTEM_PATH}",
            sb.shims().display(),
            cli_bin.display()
        ),
        Wall::None => format!("{}:{SYSTEM_PATH}", cli_bin.display()),
    };
    c.env("PATH", path).current_dir(dir);
    if let Some(config) = opts.config {
        c.env("LANDWALL_CONFIG", config);
    }
    match agent {
        Agent::Claude => {
            c.env("ANTHROPIC_BASE_URL", server.base_url())
                .env("ANTHROPIC_API_KEY", "lw-dummy-key")
                .env("DISABLE_TELEMETRY", "1")
                .env("DISABLE_ERROR_REPORTING", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                // Claude Code refuses --dangerously-skip-permissions as root without it.
                .env("IS_SANDBOX", "1")
                .args(["-p", PROMPT, "--dangerously-skip-permissions"]);
        }
        Agent::OpenCode => {
            let dir = sb.home().join(".config/opencode");
            fs::create_dir_all(&dir).expect("mkdir ~/.config/opencode");
            let config = json!({
                "provider": {"landwall": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "landwall stand-in",
                    "options": {"baseURL": format!("{}/v1", server.base_url()), "apiKey": "lw-dummy-key"},
                    "models": {"lw-test": {"name": "landwall stand-in", "tool_call": true}},
                }},
                "model": "landwall/lw-test",
                "small_model": "landwall/lw-test",
                // Approve every tool call, including paths outside the project: the wall,
                // not OpenCode, is what refuses them here.
                "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"},
                "autoupdate": false,
                "share": "disabled",
            });
            let mut config = config;
            if let Some(plugin) = opts.plugin {
                config["plugin"] = json!([plugin]);
            }
            let file = dir.join("opencode.json");
            let config = match fs::read(&file) {
                // Only the stand-in's address changes: what an earlier run planted stays.
                Ok(old) if opts.keep_config => {
                    let mut old: Value = serde_json::from_slice(&old).expect("opencode.json");
                    old["provider"] = config["provider"].clone();
                    old
                }
                _ => config,
            };
            fs::write(&file, config.to_string()).expect("write opencode.json");
            c.env("OPENCODE_DISABLE_MODELS_FETCH", "1")
                .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                .args(["run", PROMPT]);
        }
        Agent::Codex => {
            let dir = sb.home().join(".codex");
            fs::create_dir_all(&dir).expect("mkdir ~/.codex");
            // A model of the CLI's own catalogue, so that it offers its usual tools
            // (apply_patch among them); the stand-in answers for any name.
            let config = format!(
                "model = \"gpt-5.5\"\n\
                 model_provider = \"landwall\"\n\
                 \n\
                 [model_providers.landwall]\n\
                 name = \"landwall stand-in\"\n\
                 base_url = \"{}/v1\"\n\
                 wire_api = \"responses\"\n\
                 env_key = \"OPENAI_API_KEY\"\n",
                server.base_url()
            );
            let file = dir.join("config.toml");
            let config = match fs::read_to_string(&file) {
                // Only the stand-in's address changes: what an earlier run planted stays.
                Ok(old) if opts.keep_config => old
                    .lines()
                    .map(|l| {
                        if l.starts_with("base_url = ") {
                            format!("base_url = \"{}/v1\"\n", server.base_url())
                        } else {
                            format!("{l}\n")
                        }
                    })
                    .collect(),
                _ => config,
            };
            fs::write(&file, config).expect("write config.toml");
            c.env("OPENAI_API_KEY", "lw-dummy-key").arg("exec");
            if let Some(profile) = opts.profile {
                c.args(["--profile", profile]);
            }
            if opts.codex_sandbox {
                c.args(["--sandbox", "workspace-write"]);
            } else {
                c.arg("--dangerously-bypass-approvals-and-sandbox");
            }
            c.arg(PROMPT);
        }
    }
    for (k, v) in opts.env {
        c.env(k, v);
    }
    c
}

/// One finished agent run and what the stand-in recorded.
struct Turn {
    status: ExitStatus,
    stdout: String,
    stderr: String,
    log: Value,
}

impl Turn {
    fn describe(&self) -> String {
        format!(
            "status: {}\n--- stdout:\n{}\n--- stderr:\n{}\n--- model log:\n{}",
            self.status,
            tail(&self.stdout),
            tail(&self.stderr),
            serde_json::to_string_pretty(&self.log).unwrap_or_default()
        )
    }

    /// The agent exited 0 after the stand-in's final answer, and printed it.
    fn assert_finished(&self) {
        let finals = self.log["requests"]
            .as_array()
            .map_or(0, |r| r.iter().filter(|r| r["action"] == "final").count());
        assert!(
            self.status.success() && finals > 0 && self.stdout.contains(FINAL),
            "the turn did not finish with exit status 0:\n{}",
            self.describe()
        );
    }

    /// The tool result the agent sent back for `step`.
    fn result(&self, step: u64) -> String {
        self.log["tool_results"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["step"] == step))
            .and_then(|r| r["output"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no tool result for step {step}:\n{}", self.describe()))
    }

    /// Asserts that the tool result for `step` contains `needle`.
    fn assert_result_has(&self, step: u64, needle: &str) {
        let result = self.result(step);
        assert!(
            result.contains(needle),
            "tool result {step} lacks {needle:?}: {result:?}\n{}",
            self.describe()
        );
    }
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(4000);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

/// Runs one turn: stdio to files, its own process group, killed after [`AGENT_TIMEOUT`].
fn run_turn(mut cmd: Command, sb: &Sandbox, tag: &str, server: &ModelServer) -> Turn {
    let out_path = sb.root.join(format!("{tag}.stdout"));
    let err_path = sb.root.join(format!("{tag}.stderr"));
    cmd.stdin(Stdio::null())
        .stdout(fs::File::create(&out_path).expect("stdout file"))
        .stderr(fs::File::create(&err_path).expect("stderr file"))
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn the agent");
    let group = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let deadline = Instant::now() + AGENT_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the agent") {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Whatever the agent left running in its group (background helpers) goes too.
    let _ignored = killpg(group, Signal::SIGKILL);
    let status = status.unwrap_or_else(|| child.wait().expect("wait for the killed agent"));
    let turn = Turn {
        status,
        stdout: fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: fs::read_to_string(&err_path).unwrap_or_default(),
        log: server.log(),
    };
    assert!(
        Instant::now() <= deadline,
        "{tag}: the agent did not finish within {AGENT_TIMEOUT:?} and was killed:\n{}",
        turn.describe()
    );
    turn
}

/// A fresh git repository with one commit in `sb.wt()`.
fn init_repo(sb: &Sandbox) {
    sb.git(&sb.wt(), &["init", "-q"]);
    fs::write(sb.wt().join("README"), "a project\n").expect("write README");
    sb.git(&sb.wt(), &["add", "README"]);
    sb.git(&sb.wt(), &["commit", "-q", "-m", "init"]);
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out
}

/// Rows of an SQLite query as JSON arrays, read with python3's sqlite3 (outside the wall,
/// after the agent has exited).
fn sqlite_rows(db: &Path, sql: &str) -> Vec<Value> {
    let out = Command::new("python3")
        .args([
            "-c",
            "import json, sqlite3, sys\n\
             rows = sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchall()\n\
             print(json.dumps(rows))",
        ])
        .arg(db)
        .arg(sql)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "query {sql:?} on {}: {}",
        db.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice::<Vec<Value>>(&out.stdout).expect("rows json")
}

/// The agent's own state is where it expects: configuration, the session transcript (with
/// this turn's tool call in it) and the session index.
fn assert_state(agent: Agent, sb: &Sandbox, wt: &Path, open_home: bool) {
    let home = sb.home();
    let wt_str = wt.display().to_string();
    let has_call = |files: &[PathBuf]| {
        files
            .iter()
            .any(|f| fs::read_to_string(f).is_ok_and(|t| t.contains("lw_call_0")))
    };
    match agent {
        Agent::Claude => {
            // Under the private (default) and read-only homes the shim sets
            // CLAUDE_CONFIG_DIR=~/.claude, which moves ~/.claude.json into it.
            let (config, not) = if !open_home {
                (
                    home.join(".claude/.claude.json"),
                    Some(home.join(".claude.json")),
                )
            } else {
                (home.join(".claude.json"), None)
            };
            assert!(config.is_file(), "no {}", config.display());
            if let Some(not) = not {
                assert!(!not.exists(), "{} was written", not.display());
            }
            // In this project's own entry: the wall keeps the rest of ~/.claude/projects
            // read-only, so a name landwall got wrong would lose the transcript.
            let own = home
                .join(".claude/projects")
                .join(landwall::profile::claude_project_dir(wt));
            let transcripts: Vec<_> = files_under(&own)
                .into_iter()
                .filter(|f| f.extension().is_some_and(|e| e == "jsonl"))
                .collect();
            assert!(
                has_call(&transcripts),
                "no session transcript with the tool call under {}: {transcripts:?}",
                own.display()
            );
        }
        Agent::OpenCode => {
            let data = home.join(".local/share/opencode");
            let db = data.join("opencode.db");
            let sessions = sqlite_rows(&db, "select directory from session");
            assert!(
                sessions.iter().any(|r| r[0] == wt_str.as_str()),
                "no session for {wt_str} in {}: {sessions:?}",
                db.display()
            );
            let logs = files_under(&data.join("log"));
            assert!(!logs.is_empty(), "no log under {}", data.display());
            // OpenCode installs its plugin package with npm's library at every start, in the
            // background; under strict home that failed with EACCES on ~/.npm until the shim
            // set npm_config_cache=~/.cache/npm. (Without a registry it fails otherwise.)
            for log in &logs {
                let text = fs::read_to_string(log).unwrap_or_default();
                if let Some(line) = text.lines().find(|l| l.contains("EACCES")) {
                    panic!("OpenCode met EACCES ({}): {line}", log.display());
                }
            }
            assert!(
                home.join(".local/state/opencode").is_dir(),
                "no ~/.local/state/opencode"
            );
        }
        Agent::Codex => {
            let codex = home.join(".codex");
            let rollouts = files_under(&codex.join("sessions"));
            assert!(
                has_call(&rollouts),
                "no session rollout with the tool call under ~/.codex/sessions: {rollouts:?}"
            );
            // Needs TMPDIR=/tmp from the shim: SQLite would put its temporary files in
            // /var/tmp, which the wall refuses, and Codex's migrations would fail.
            let db = codex.join("state_5.sqlite");
            let tables = sqlite_rows(&db, "select name from sqlite_master where name = 'threads'");
            assert!(
                !tables.is_empty(),
                "Codex's migrations of {} failed: it has no threads table",
                db.display()
            );
            let threads = sqlite_rows(&db, "select cwd from threads");
            assert!(
                threads.iter().any(|r| r[0] == wt_str.as_str()),
                "no thread for {wt_str} in ~/.codex/state_5.sqlite: {threads:?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// The scenarios, one function each, run for every agent by the #[test]s below.

/// A write in the worktree with the agent's file tool, then a shell command that reads it
/// back and runs git: both work, the file is there, and the agent's state is in place.
fn writes_in_its_worktree(agent: Agent) {
    let cli = cli_bin_dir(agent);
    let sb = Sandbox::new(&format!("agent-{}-inside", agent.name()));
    init_repo(&sb);
    let file = sb.wt().join("hello.txt");
    let content = format!("hello from {}\n", agent.name());
    let server = ModelServer::start(
        &sb,
        "inside",
        vec![
            write(&file, &content),
            shell("cat hello.txt && git status --porcelain"),
        ],
    );
    let cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        Wall::Shim,
        Options::default(),
    );
    let turn = run_turn(cmd, &sb, "inside", &server);
    turn.assert_finished();
    assert_eq!(
        fs::read_to_string(&file).ok().as_deref(),
        Some(content.as_str()),
        "{}",
        turn.describe()
    );
    turn.assert_result_has(1, content.trim());
    turn.assert_result_has(1, "?? hello.txt");
    // Nothing to say when all is well: the agent made nothing in its protected state.
    assert!(
        !turn.stderr.contains("landwall:"),
        "the launch said something:\n{}",
        turn.describe()
    );
    assert_state(agent, &sb, &sb.wt(), false);
}

/// From a linked worktree, writes to the sandbox's `outside/` (under /var/tmp, outside every
/// grant) and to the main checkout (another worktree), with the shell and with the agent's
/// file tool: the kernel refuses each, the error reaches the model, nothing is written.
fn writes_outside_are_refused(agent: Agent) {
    let cli = cli_bin_dir(agent);
    let sb = Sandbox::new(&format!("agent-{}-outside", agent.name()));
    init_repo(&sb);
    let linked = sb.root.join("linked");
    sb.git(
        &sb.wt(),
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            linked.to_str().expect("utf-8 path"),
        ],
    );
    let targets = [
        sb.outside().join("from-shell"),
        sb.wt().join("from-shell"),
        sb.outside().join("from-tool"),
        sb.wt().join("from-tool"),
    ];
    let steps = vec![
        shell(&format!("echo pwned > '{}'", targets[0].display())),
        shell(&format!("echo pwned > '{}'", targets[1].display())),
        write(&targets[2], "pwned\n"),
        write(&targets[3], "pwned\n"),
    ];
    let server = ModelServer::start(&sb, "outside", steps);
    let cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &linked,
        Wall::Shim,
        Options::default(),
    );
    let turn = run_turn(cmd, &sb, "outside", &server);
    turn.assert_finished();
    for (step, target) in (0u64..).zip(&targets) {
        assert!(
            !target.exists(),
            "{} was written:\n{}",
            target.display(),
            turn.describe()
        );
        let expected = if step < 2 {
            EACCES_TEXT
        } else {
            agent.write_refused()
        };
        turn.assert_result_has(step, expected);
    }
    assert_state(agent, &sb, &linked, false);
}

/// A secret set outside the shim is not in the agent's tool environment. Control: the same
/// turn without the wall shows it (so the tool would have reported it).
fn secrets_stay_outside(agent: Agent) {
    let cli = cli_bin_dir(agent);
    let sb = Sandbox::new(&format!("agent-{}-secret", agent.name()));
    init_repo(&sb);
    let aws = format!("lw-aws-secret-{}", std::process::id());
    let db = format!("postgres://lw-db-secret-{}@db/prod", std::process::id());
    let env = [
        ("AWS_SECRET_ACCESS_KEY", aws.as_str()),
        ("DATABASE_URL", db.as_str()),
    ];
    let steps = || {
        vec![shell(
            "echo \"aws=[$AWS_SECRET_ACCESS_KEY] db=[$DATABASE_URL]\"",
        )]
    };
    let opts = Options {
        env: &env,
        ..Options::default()
    };

    let server = ModelServer::start(&sb, "secret", steps());
    let cmd = agent_command(agent, &sb, &server, &cli, &sb.wt(), Wall::Shim, opts);
    let turn = run_turn(cmd, &sb, "secret", &server);
    turn.assert_finished();
    let result = turn.result(0);
    assert!(
        result.contains("aws=[] db=[]") && !result.contains(&aws) && !result.contains(&db),
        "a secret reached the agent's tool: {result:?}\n{}",
        turn.describe()
    );

    let server = ModelServer::start(&sb, "secret-control", steps());
    let cmd = agent_command(agent, &sb, &server, &cli, &sb.wt(), Wall::None, opts);
    let turn = run_turn(cmd, &sb, "secret-control", &server);
    turn.assert_finished();
    // Codex itself keeps variables whose names hold KEY, SECRET or TOKEN out of its shell
    // tool (shell_environment_policy); DATABASE_URL reaches every agent's tool unwalled.
    turn.assert_result_has(0, &format!("db=[{db}]"));
    if agent != Agent::Codex {
        turn.assert_result_has(0, &format!("aws=[{aws}]"));
    }
}

/// Under `home = "read-only"` (spelled with its old name, "strict", which still works):
/// the turn works and the agent's state lands in its own state directories, while `~/.ssh`
/// is refused to the shell and to the file tool.
fn works_under_strict_home(agent: Agent) {
    let cli = cli_bin_dir(agent);
    let sb = Sandbox::new(&format!("agent-{}-strict", agent.name()));
    let config = sb.config("home = \"strict\"\n");
    init_repo(&sb);
    let ssh = sb.home().join(".ssh");
    fs::create_dir_all(&ssh).expect("mkdir ~/.ssh");
    let keys = ssh.join("authorized_keys");
    let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIlandwalltestkey user@host\n";
    fs::write(&keys, key).expect("write authorized_keys");
    let file = sb.wt().join("hello.txt");
    let content = format!("hello from {} under strict home\n", agent.name());
    let steps = vec![
        write(&file, &content),
        shell("echo 'ssh-ed25519 AAAAplanted attacker' >> ~/.ssh/authorized_keys"),
        write(
            &ssh.join("config"),
            "Host *\n  ProxyCommand sh -c 'id > /tmp/pwned'\n",
        ),
    ];
    let server = ModelServer::start(&sb, "strict", steps);
    let opts = Options {
        config: Some(&config),
        ..Options::default()
    };
    let cmd = agent_command(agent, &sb, &server, &cli, &sb.wt(), Wall::Shim, opts);
    let turn = run_turn(cmd, &sb, "strict", &server);
    turn.assert_finished();
    assert_eq!(
        fs::read_to_string(&file).ok().as_deref(),
        Some(content.as_str()),
        "{}",
        turn.describe()
    );
    assert_eq!(
        fs::read_to_string(&keys).ok().as_deref(),
        Some(key),
        "{}",
        turn.describe()
    );
    assert!(!ssh.join("config").exists(), "{}", turn.describe());
    turn.assert_result_has(1, EACCES_TEXT);
    turn.assert_result_has(2, agent.write_refused());
    assert_state(agent, &sb, &sb.wt(), false);
}

/// What a plant in the agent's state changes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plant {
    /// The file that names commands the agent runs: a hook, an MCP server.
    Config,
    /// A script the user's own hook runs, kept in the state directory.
    Script,
    /// The code of a plugin the user installed, kept in the agent's cache (OpenCode's
    /// `~/.cache/opencode/packages`).
    Package,
    /// Codex only: a profile layer the user has not made (`~/.codex/<name>.config.toml`),
    /// read where `--profile <name>` is given.
    Profile,
}

/// The profile [`Plant::Profile`] makes, and the later runs name.
const PROFILE: &str = "lw";

/// The npm plugin the user's OpenCode configuration names in [`Plant::Package`]: a scope
/// nobody publishes, never fetched (the user's copy is installed in the cache first).
const PLUGIN: &str = "@landwall-test/plugin";

/// The file of the agent's state that names commands it runs (or is run), and a shell
/// command that plants `touch <marker>` there.
fn plant(agent: Agent, sb: &Sandbox, marker: &Path, kind: Plant) -> (PathBuf, String) {
    let m = marker.display();
    if kind == Plant::Package {
        // The user's plugin, as OpenCode installed it at their first start.
        let pkg = sb
            .home()
            .join(".cache/opencode/packages")
            .join(PLUGIN)
            .join("node_modules")
            .join(PLUGIN);
        fs::create_dir_all(&pkg).expect("mkdir the plugin's package");
        fs::write(
            pkg.join("package.json"),
            json!({"name": PLUGIN, "version": "1.0.0", "type": "module", "main": "index.js"})
                .to_string(),
        )
        .expect("write package.json");
        fs::write(
            pkg.join("index.js"),
            "import { writeFileSync } from \"node:fs\";\nexport default { id: \"lw-test\", setup() {} };\n",
        )
        .expect("write index.js");
        let index = pkg.join("index.js");
        return (
            index.clone(),
            format!(
                "echo 'writeFileSync(\"{m}\", \"\");' >> '{}'",
                index.display()
            ),
        );
    }
    if kind == Plant::Profile {
        let layer = sb.home().join(format!(".codex/{PROFILE}.config.toml"));
        return (
            layer,
            format!(
                "printf '[mcp_servers.lw]\\ncommand = \"sh\"\\nargs = [\"-c\", \"touch {m}\"]\\n' > ~/.codex/{PROFILE}.config.toml"
            ),
        );
    }
    if kind == Plant::Script {
        // The user's own hook runs a script kept in the state directory: the agent rewrites
        // the script, not the settings.
        let hooks = sb.home().join(".claude/hooks");
        fs::create_dir_all(&hooks).expect("mkdir ~/.claude/hooks");
        fs::write(hooks.join("start.sh"), "true\n").expect("write start.sh");
        let hook =
            json!([{"hooks": [{"type": "command", "command": "sh ~/.claude/hooks/start.sh"}]}]);
        let settings = json!({"hooks": {"SessionStart": hook, "UserPromptSubmit": hook}});
        fs::write(
            sb.home().join(".claude/settings.json"),
            settings.to_string(),
        )
        .expect("write settings.json");
        return (
            hooks.join("start.sh"),
            format!("echo 'touch {m}' >> ~/.claude/hooks/start.sh"),
        );
    }
    match agent {
        Agent::Claude => {
            let hook = json!([{"hooks": [{"type": "command", "command": format!("touch {m}")}]}]);
            let settings = json!({"hooks": {"SessionStart": hook, "UserPromptSubmit": hook}});
            (
                sb.home().join(".claude/settings.json"),
                format!("printf '%s' '{settings}' > ~/.claude/settings.json"),
            )
        }
        Agent::Codex => (
            sb.home().join(".codex/config.toml"),
            format!(
                "printf '\\n[mcp_servers.lw]\\ncommand = \"sh\"\\nargs = [\"-c\", \"touch {m}\"]\\n' >> ~/.codex/config.toml"
            ),
        ),
        Agent::OpenCode => (
            sb.home().join(".config/opencode/opencode.json"),
            format!(
                "python3 -c 'import json, os; p = os.path.expanduser(\"~/.config/opencode/opencode.json\"); c = json.load(open(p)); c[\"mcp\"] = {{\"lw\": {{\"type\": \"local\", \"command\": [\"sh\", \"-c\", \"touch {m}\"]}}}}; open(p, \"w\").write(json.dumps(c))'"
            ),
        ),
    }
}

/// A command the agent runs, planted in its state from one project (a hook in Claude Code's
/// user settings, an MCP server in Codex's and OpenCode's configuration), runs neither in
/// the next walled launch in another project nor in the agent started there without the
/// shim: the file was never writable behind the wall. `walled: false` is the control: the
/// same plant made without the shim lands and runs in the other project.
fn state_plant(agent: Agent, walled: bool, kind: Plant) {
    let cli = cli_bin_dir(agent);
    let tag = if walled { "walled" } else { "control" };
    let what = match kind {
        Plant::Config => "plant",
        Plant::Script => "script",
        Plant::Package => "package",
        Plant::Profile => "profile",
    };
    let sb = Sandbox::new(&format!("agent-{}-{what}-{tag}", agent.name()));
    init_repo(&sb);
    let other = sb.root.join("other");
    fs::create_dir_all(&other).expect("mkdir other");
    sb.git(&other, &["init", "-q"]);
    let marker = other.join("planted-ran");
    let (file, command) = plant(agent, &sb, &marker, kind);
    let plugin = (kind == Plant::Package).then_some(PLUGIN);
    let first = if walled { Wall::Shim } else { Wall::None };
    let server = ModelServer::start(&sb, "plant", vec![shell(&command)]);
    let cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        first,
        Options {
            plugin,
            ..Options::default()
        },
    );
    let before = fs::read(&file).ok();
    let turn = run_turn(cmd, &sb, "plant", &server);
    turn.assert_finished();
    let after = fs::read(&file).ok();
    let keep = Options {
        keep_config: true,
        plugin,
        profile: (kind == Plant::Profile).then_some(PROFILE),
        ..Options::default()
    };
    let mut runs = vec![("walled-there", Wall::Shim), ("unwalled-there", Wall::None)];
    if !walled {
        runs.retain(|(_, w)| *w == Wall::None);
    }
    for (run, wall) in runs {
        let server = ModelServer::start(&sb, run, vec![shell("true")]);
        let cmd = agent_command(agent, &sb, &server, &cli, &other, wall, keep);
        let turn = run_turn(cmd, &sb, run, &server);
        turn.assert_finished();
        // A hook may run after the reply: give it the moment it takes.
        std::thread::sleep(Duration::from_millis(500));
        let ran = marker.exists();
        if walled {
            assert!(!ran, "{run}: the planted command ran:\n{}", turn.describe());
        } else {
            assert!(
                ran,
                "control: the command planted without the shim did not run in the other project:\n{}",
                turn.describe()
            );
        }
    }
    let planted = |b: &Option<Vec<u8>>| {
        b.as_deref()
            .is_some_and(|b| String::from_utf8_lossy(b).contains("planted-ran"))
    };
    assert!(!planted(&before));
    assert_eq!(
        planted(&after),
        !walled,
        "{}: {:?}",
        file.display(),
        after.as_deref().map(String::from_utf8_lossy)
    );
}

/// An MCP server planted in Claude Code's `.claude.json` from one project (the agent's copy
/// behind the wall, `~/.claude/.claude.json`, which it may write) is put back as that launch
/// ends (and before the next launch in another project), and said; the agent run there without the shim reads the
/// user's `~/.claude.json`, never planted. `walled: false` is the control: planted without
/// the shim, the server starts in the other project.
fn claude_json_plant(walled: bool) {
    let agent = Agent::Claude;
    let cli = cli_bin_dir(agent);
    let tag = if walled { "walled" } else { "control" };
    let sb = Sandbox::new(&format!("agent-claude-json-{tag}"));
    init_repo(&sb);
    let other = sb.root.join("other");
    fs::create_dir_all(&other).expect("mkdir other");
    sb.git(&other, &["init", "-q"]);
    let marker = other.join("planted-ran");
    let m = marker.display();
    // The user's own configuration, with a server of theirs.
    let user = sb.home().join(".claude.json");
    fs::write(&user, json!({"mcpServers": {}}).to_string()).expect("write ~/.claude.json");
    let plant = format!(
        "python3 -c 'import json, os; p = os.path.join(os.environ.get(\"CLAUDE_CONFIG_DIR\", os.environ[\"HOME\"]), \".claude.json\"); c = json.load(open(p)); c[\"mcpServers\"] = {{\"lw\": {{\"type\": \"stdio\", \"command\": \"sh\", \"args\": [\"-c\", \"touch {m}\"]}}}}; open(p, \"w\").write(json.dumps(c))'"
    );
    let first = if walled { Wall::Shim } else { Wall::None };
    let server = ModelServer::start(&sb, "plant", vec![shell(&plant)]);
    let cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        first,
        Options::default(),
    );
    let turn = run_turn(cmd, &sb, "plant", &server);
    turn.assert_finished();
    let copy = if walled {
        sb.home().join(".claude/.claude.json")
    } else {
        user.clone()
    };
    let planted = || {
        fs::read_to_string(&copy)
            .unwrap_or_default()
            .contains("planted-ran")
    };
    if walled {
        // Written behind the wall, put back as the launch ended, and said.
        assert!(
            !planted() && turn.stderr.contains("put back mcpServers"),
            "the plant in {} was not put back as the launch ended:\n{}",
            copy.display(),
            turn.describe()
        );
    } else {
        assert!(
            planted(),
            "the plant did not land in {}:\n{}",
            copy.display(),
            turn.describe()
        );
    }
    let mut runs = vec![("walled-there", Wall::Shim), ("unwalled-there", Wall::None)];
    if !walled {
        runs.retain(|(_, w)| *w == Wall::None);
    }
    for (run, wall) in runs {
        let server = ModelServer::start(&sb, run, vec![shell("true")]);
        let cmd = agent_command(agent, &sb, &server, &cli, &other, wall, Options::default());
        let turn = run_turn(cmd, &sb, run, &server);
        turn.assert_finished();
        std::thread::sleep(Duration::from_millis(500));
        if walled {
            assert!(
                !marker.exists(),
                "{run}: the planted server ran:\n{}",
                turn.describe()
            );
            assert!(!planted(), "{run}: the plant is in {}", copy.display());
        } else {
            assert!(
                marker.exists(),
                "control: the server planted without the shim did not start in the other project:\n{}",
                turn.describe()
            );
        }
    }
}

#[test]
fn an_mcp_server_planted_in_claude_json_from_one_project_runs_nowhere() {
    claude_json_plant(true);
}

#[test]
fn an_mcp_server_planted_in_claude_json_without_the_shim_runs_in_another_project() {
    claude_json_plant(false);
}

#[test]
fn claude_settings_planted_in_one_project_run_nowhere() {
    state_plant(Agent::Claude, true, Plant::Config);
}

#[test]
fn claude_settings_planted_without_the_shim_run_in_another_project() {
    state_plant(Agent::Claude, false, Plant::Config);
}

#[test]
fn a_script_claude_settings_name_rewritten_in_one_project_runs_nowhere() {
    state_plant(Agent::Claude, true, Plant::Script);
}

#[test]
fn a_script_claude_settings_name_rewritten_without_the_shim_runs_in_another_project() {
    state_plant(Agent::Claude, false, Plant::Script);
}

#[test]
fn codex_config_planted_in_one_project_runs_nowhere() {
    state_plant(Agent::Codex, true, Plant::Config);
}

#[test]
fn codex_config_planted_without_the_shim_runs_in_another_project() {
    state_plant(Agent::Codex, false, Plant::Config);
}

/// Found by review: a profile layer the user has not made yet was the agent's to make, and
/// `codex --profile lw` anywhere, walled or not, ran what it named.
#[test]
fn a_codex_profile_layer_planted_in_one_project_runs_nowhere() {
    state_plant(Agent::Codex, true, Plant::Profile);
}

#[test]
fn a_codex_profile_layer_planted_without_the_shim_runs_in_another_project() {
    state_plant(Agent::Codex, false, Plant::Profile);
}

#[test]
fn opencode_config_planted_in_one_project_runs_nowhere() {
    state_plant(Agent::OpenCode, true, Plant::Config);
}

#[test]
fn opencode_config_planted_without_the_shim_runs_in_another_project() {
    state_plant(Agent::OpenCode, false, Plant::Config);
}

/// The code of the user's OpenCode plugin, installed in `~/.cache/opencode/packages`,
/// rewritten from one project: neither the walled launch nor OpenCode without the shim runs
/// the change in another project.
#[test]
fn an_opencode_plugin_rewritten_in_one_project_runs_nowhere() {
    state_plant(Agent::OpenCode, true, Plant::Package);
}

#[test]
fn an_opencode_plugin_rewritten_without_the_shim_runs_in_another_project() {
    state_plant(Agent::OpenCode, false, Plant::Package);
}

/// A sign-in the agent adds to OpenCode's `auth.json` from a walled turn (GitHub Copilot,
/// its `enterpriseUrl` the agent's server: OpenCode without the shim would send the user's
/// code there), and the user's API key it swaps for its own, are gone when the turn ends:
/// the real `opencode auth list`, run without the shim, lists the user's sign-in only.
/// `walled: false` is the control: planted without the shim, the sign-in is listed.
fn opencode_sign_in_plant(walled: bool) {
    let cli = cli_bin_dir(Agent::OpenCode);
    let tag = if walled { "walled" } else { "control" };
    let sb = Sandbox::new(&format!("agent-opencode-auth-{tag}"));
    init_repo(&sb);
    let auth = sb.home().join(".local/share/opencode/auth.json");
    fs::create_dir_all(auth.parent().expect("a parent")).expect("mkdir");
    fs::write(
        &auth,
        json!({"openai": {"type": "api", "key": "sk-user"}}).to_string(),
    )
    .expect("write auth.json");
    let plant = "python3 -c 'import json, os; p = os.path.expanduser(\"~/.local/share/opencode/auth.json\"); a = json.load(open(p)); a[\"github-copilot\"] = {\"type\": \"oauth\", \"access\": \"x\", \"refresh\": \"y\", \"expires\": 0, \"enterpriseUrl\": \"http://planted.example.org\"}; a[\"openai\"][\"key\"] = \"sk-planted\"; open(p, \"w\").write(json.dumps(a))'";
    let first = if walled { Wall::Shim } else { Wall::None };
    let server = ModelServer::start(&sb, "plant", vec![shell(plant)]);
    let cmd = agent_command(
        Agent::OpenCode,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        first,
        Options::default(),
    );
    let turn = run_turn(cmd, &sb, "plant", &server);
    turn.assert_finished();
    let mut c = Command::new(cli.join("opencode"));
    sb.clean_env(&mut c);
    c.env("PATH", format!("{}:{SYSTEM_PATH}", cli.display()))
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .current_dir(sb.root.as_path())
        .args(["auth", "list"]);
    let out = output(&mut c);
    assert!(out.status.success(), "{}", describe(&out));
    let listed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(listed.contains("OpenAI"), "{listed}");
    let now: Value =
        serde_json::from_slice(&fs::read(&auth).expect("read auth.json")).expect("json");
    let key = now["openai"]["key"].clone();
    if walled {
        assert!(
            !listed.contains("GitHub Copilot") && key == "sk-user",
            "the planted sign-in outlived the turn: {listed}\n{}\n{}",
            fs::read_to_string(&auth).unwrap_or_default(),
            turn.describe()
        );
    } else {
        assert!(
            listed.contains("GitHub Copilot") && key == "sk-planted",
            "control: the plant did not land: {listed}\n{}",
            turn.describe()
        );
    }
}

#[test]
fn an_opencode_sign_in_planted_behind_the_wall_is_gone_when_the_turn_ends() {
    opencode_sign_in_plant(true);
}

#[test]
fn an_opencode_sign_in_planted_without_the_shim_is_listed() {
    opencode_sign_in_plant(false);
}

/// A new user's first walled OpenCode start, with no configuration file yet, sets nothing
/// aside and says nothing: the launch makes the `opencode.jsonc` OpenCode writes then, and
/// holds it. Control: OpenCode without the shim writes the same bytes.
#[test]
fn opencode_first_walled_start_sets_nothing_aside() {
    let cli = cli_bin_dir(Agent::OpenCode);
    let mut made = Vec::new();
    for wall in [Wall::Shim, Wall::None] {
        let sb = Sandbox::new("agent-opencode-first");
        init_repo(&sb);
        for _ in 0..2 {
            let mut c = match wall {
                Wall::Shim => Command::new(sb.shims().join("opencode")),
                Wall::None => Command::new(cli.join("opencode")),
            };
            sb.clean_env(&mut c);
            c.env(
                "PATH",
                format!("{}:{}:{SYSTEM_PATH}", sb.shims().display(), cli.display()),
            )
            .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
            .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
            .current_dir(sb.wt())
            .args(["models"]);
            let out = output(&mut c);
            assert!(out.status.success(), "{}", describe(&out));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!stderr.contains("landwall:"), "{}", describe(&out));
        }
        let dir = sb.home().join(".config/opencode");
        let swept: Vec<_> = fs::read_dir(&dir)
            .expect("~/.config/opencode")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("landwall-swept"))
            .map(|e| e.path())
            .collect();
        assert!(swept.is_empty(), "set aside: {swept:?}");
        made.push(fs::read(dir.join("opencode.jsonc")).expect("opencode.jsonc"));
    }
    assert_eq!(
        String::from_utf8_lossy(&made[0]),
        String::from_utf8_lossy(&made[1]),
        "what the launch makes is not what OpenCode writes"
    );
}

/// A session resumed behind the wall (`claude -p --continue`) in the same project gets its
/// transcript back: the launch keeps the project's own entry of `~/.claude/projects`
/// writable, however much of the rest it holds. The second turn's requests to the model
/// carry the first turn's tool result.
#[test]
fn claude_resumes_its_session_behind_the_wall() {
    let agent = Agent::Claude;
    let cli = cli_bin_dir(agent);
    let sb = Sandbox::new("agent-claude-resume");
    init_repo(&sb);
    let mark = "lw-first-turn-said-this";
    let server = ModelServer::start(&sb, "first", vec![shell(&format!("echo {mark}"))]);
    let cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        Wall::Shim,
        Options::default(),
    );
    let turn = run_turn(cmd, &sb, "first", &server);
    turn.assert_finished();
    turn.assert_result_has(0, mark);
    let server = ModelServer::start(&sb, "second", vec![shell("true")]);
    let mut cmd = agent_command(
        agent,
        &sb,
        &server,
        &cli,
        &sb.wt(),
        Wall::Shim,
        Options::default(),
    );
    cmd.arg("--continue");
    let turn = run_turn(cmd, &sb, "second", &server);
    turn.assert_finished();
    // The stand-in records each tool result the requests carry: the resumed one's too.
    assert!(
        turn.log["tool_results"].to_string().contains(mark),
        "the resumed session did not get its transcript back:\n{}",
        turn.describe()
    );
}

#[test]
fn claude_writes_in_its_worktree() {
    writes_in_its_worktree(Agent::Claude);
}

#[test]
fn claude_writes_outside_are_refused_by_the_kernel() {
    writes_outside_are_refused(Agent::Claude);
}

#[test]
fn claude_does_not_see_secrets_set_outside_the_shim() {
    secrets_stay_outside(Agent::Claude);
}

#[test]
fn claude_works_under_strict_home() {
    works_under_strict_home(Agent::Claude);
}

#[test]
fn opencode_writes_in_its_worktree() {
    writes_in_its_worktree(Agent::OpenCode);
}

#[test]
fn opencode_writes_outside_are_refused_by_the_kernel() {
    writes_outside_are_refused(Agent::OpenCode);
}

#[test]
fn opencode_does_not_see_secrets_set_outside_the_shim() {
    secrets_stay_outside(Agent::OpenCode);
}

#[test]
fn opencode_works_under_strict_home() {
    works_under_strict_home(Agent::OpenCode);
}

#[test]
fn codex_writes_in_its_worktree() {
    writes_in_its_worktree(Agent::Codex);
}

#[test]
fn codex_writes_outside_are_refused_by_the_kernel() {
    writes_outside_are_refused(Agent::Codex);
}

#[test]
fn codex_does_not_see_secrets_set_outside_the_shim() {
    secrets_stay_outside(Agent::Codex);
}

#[test]
fn codex_works_under_strict_home() {
    works_under_strict_home(Agent::Codex);
}

/// Codex's own sandbox (`--sandbox workspace-write`, bubblewrap) cannot start inside the
/// wall: writing the new user namespace's uid_map under /proc is refused (the wall grants
/// /proc read-only), and Landlock forbids mount(2) anyway. The command never runs, the
/// error reaches the model, and the turn still ends with status 0. docs/agents.md says
/// what to set instead.
#[test]
fn codex_own_sandbox_cannot_start_inside_the_wall() {
    let cli = cli_bin_dir(Agent::Codex);
    let sb = Sandbox::new("agent-codex-own-sandbox");
    init_repo(&sb);
    let server = ModelServer::start(&sb, "own-sandbox", vec![shell("echo ran > ran.txt")]);
    let opts = Options {
        codex_sandbox: true,
        ..Options::default()
    };
    let cmd = agent_command(Agent::Codex, &sb, &server, &cli, &sb.wt(), Wall::Shim, opts);
    let turn = run_turn(cmd, &sb, "own-sandbox", &server);
    turn.assert_finished();
    assert!(!sb.wt().join("ran.txt").exists(), "{}", turn.describe());
    turn.assert_result_has(0, "bwrap");
}
