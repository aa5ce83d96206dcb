//! What each known agent keeps in `$HOME`, so that the private and read-only homes can leave
//! exactly that writable; what tools need from `$HOME` read-only under the private home;
//! and the credential stores it keeps invisible. Paths are relative to `$HOME`.
//!
//! Why each entry is here:
//! - claude: `~/.claude` holds settings, sessions and credentials; Claude Code also keeps
//!   `~/.claude.json` in `$HOME` itself unless `CLAUDE_CONFIG_DIR` is set, so under strict
//!   home the shim sets it to `~/.claude` when the user has not.
//! - opencode: XDG data, config, state and cache directories named `opencode`.
//! - codex: `~/.codex` (`CODEX_HOME`).
//! - every agent: `~/.cache`, where npm, node and language tools keep their caches. npm's
//!   own default cache, `~/.npm`, stays read-only under strict home, so the shim points
//!   `npm_config_cache` at `~/.cache/npm` when the user has not: OpenCode installs its
//!   plugin package into `~/.config/opencode` with npm's library at every start, and that
//!   install failed with EACCES on `mkdir ~/.npm` (so does an `npm install` an agent runs).
//!   The agent's npm cache is then also kept apart from the one the user's npm trusts.
//!   Every tool's code there (pre-commit's hook environments, Go's build cache) is the
//!   user's too: a launch writes `~/.cache` only through a layer of its project's own
//!   ([`Kept::Layer`]).
//!
//! Environment defaults under every home mode ([`env_defaults`]):
//! - `TMPDIR=/tmp`: SQLite picks its directory for temporary files from `SQLITE_TMPDIR`,
//!   `TMPDIR`, then `/var/tmp` before `/tmp`, taking the first one `access(2)` says is
//!   writable. Landlock does not restrict `access(2)`, so inside the wall it chose `/var/tmp`
//!   and the open was refused: Codex's migrations of `~/.codex/state_5.sqlite` failed and
//!   its session index stayed empty, although the turn itself exited 0. The wall always
//!   grants `/tmp`.

/// What the private home grants read-only when present, and why: what tools need to work,
/// never what holds secrets. Read-only includes the caches inside them (`~/.cargo/registry`,
/// `~/go/pkg/mod`): a build that fetches new dependencies needs them elsewhere
/// (`CARGO_HOME`, `GOMODCACHE` under `~/.cache`) or granted with `writable`. A link among them that leads back into `$HOME` is not followed
/// (it could lead to another project; an agent under an open home could have made it).
pub const HOME_READ_ONLY: &[(&str, &str)] = &[
    (".gitconfig", "git's configuration (identity, aliases)"),
    (".config/git", "git's configuration (XDG)"),
    (
        ".ssh/config",
        "ssh's client configuration, for git over ssh",
    ),
    (".ssh/known_hosts", "ssh's known hosts, for git over ssh"),
    (".profile", "shell start-up"),
    (".bashrc", "shell start-up"),
    (".bash_profile", "shell start-up"),
    (".zshrc", "shell start-up"),
    (".zshenv", "shell start-up"),
    (".zprofile", "shell start-up"),
    (".inputrc", "readline's key bindings"),
    (".editorconfig", "editor settings tools read"),
    (
        ".local/bin",
        "programs installed for the user (pipx, the native Claude Code)",
    ),
    (".local/lib", "libraries of programs installed for the user"),
    (".local/share/claude", "the native Claude Code's versions"),
    (
        ".cargo",
        "Rust toolchain (rustup's proxies, installed binaries)",
    ),
    (".rustup", "Rust toolchains"),
    (".nvm", "Node.js versions (nvm)"),
    (".volta", "Node.js versions (Volta)"),
    (".bun", "the Bun runtime"),
    (".deno", "the Deno runtime"),
    (".pyenv", "Python versions (pyenv)"),
    (".rbenv", "Ruby versions (rbenv)"),
    (".sdkman", "JVM toolchains (SDKMAN!)"),
    (".asdf", "toolchains (asdf)"),
    (".local/share/mise", "toolchains (mise)"),
    ("go", "Go's module cache and installed binaries (GOPATH)"),
    (".dotnet", ".NET SDKs installed for the user"),
];

/// Credential stores the private home keeps invisible even where a broader grant (a
/// configured `read_only` of the whole home, a toolchain link) would cover them: deny
/// patterns relative to `$HOME`.
pub const CREDENTIAL_STORES: &[&str] = &[
    ".ssh/id_*",
    ".ssh/*_key",
    ".ssh/*.pem",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker/config.json",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".config/gh",
    ".config/hub",
    ".pypirc",
    ".npmrc",
    ".yarnrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".local/share/keyrings",
    ".local/share/password-store",
    ".vault-token",
    ".config/op",
    ".config/rclone",
    ".terraform.d/credentials.tfrc.json",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".thunderbird",
];

/// State directories of `agent`, relative to `$HOME`, writable under the private and
/// read-only homes.
pub fn state_dirs(agent: &str) -> &'static [&'static str] {
    match agent {
        "claude" => &[".claude", ".cache"],
        "opencode" => &[
            ".local/share/opencode",
            ".config/opencode",
            ".local/state/opencode",
            ".cache",
        ],
        "codex" => &[".codex", ".cache"],
        _ => &[".cache"],
    }
}

/// A file or directory of an agent's state that names programs the agent runs, or
/// instructions it follows, in every project and also where the same agent starts without
/// the shim (an IDE's copy, a desktop app, the real binary typed by hand). Each is a
/// protected path of every launch that may write where it lies
/// ([`crate::protect::agent_state`]): held read-only in the launch's namespace, so one
/// prompt-injected session cannot reach the user's other projects, or the agent run
/// unwalled, through it. The rest of the state (sessions, transcripts, caches, the
/// credentials the agent refreshes) stays writable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code {
    /// Relative to `$HOME`.
    pub path: &'static str,
    /// What a launch makes where it is absent, so that it can be held: an empty file or
    /// directory means to the agent what none does. `None`: left absent (an empty one would
    /// mean something else) and set aside by the watcher as soon as it appears.
    pub make: Option<Make>,
    /// What runs it, or follows it.
    pub reason: &'static str,
}

/// What is made where a [`Code`] path is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Make {
    /// A file with these bytes.
    File(&'static [u8]),
    /// An empty directory.
    Dir,
    /// A file with these bytes, unless one of these names is beside it: what the agent
    /// itself writes at its first start where it finds none of them (OpenCode's
    /// `opencode.jsonc`), so that its first walled launch finds it and it can be held.
    FileUnless(&'static [u8], &'static [&'static str]),
}

/// Checked against each agent's documentation and its release's binary (the versions the
/// end-to-end tests pin, see the Makefile).
const AGENT_CODE: &[(&str, Code)] = &[
    (
        "claude",
        Code {
            path: ".claude/settings.json",
            make: Some(Make::File(b"{}\n")),
            reason: "Claude Code's user settings name commands it runs: hooks, statusLine, apiKeyHelper, awsAuthRefresh, otelHeadersHelper; and the permissions and environment of every session",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/CLAUDE.md",
            make: Some(Make::File(b"")),
            reason: "Claude Code's user memory: instructions it follows in every project",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/commands",
            make: Some(Make::Dir),
            reason: "Claude Code's user slash commands: prompts it follows, with the tools and shell commands they name",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/agents",
            make: Some(Make::Dir),
            reason: "Claude Code's user subagents: prompts it follows, with their tools",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/skills",
            make: Some(Make::Dir),
            reason: "Claude Code's user skills: instructions and the scripts they run",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/output-styles",
            make: Some(Make::Dir),
            reason: "Claude Code's output styles: instructions that replace its system prompt",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/plugins",
            make: None,
            reason: "Claude Code's installed plugins: their hooks, MCP servers, commands and agents",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/.config.json",
            make: None,
            reason: "Claude Code reads it in place of .claude.json where it exists (found by review): MCP servers of every project",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/rules",
            make: Some(Make::Dir),
            reason: "Claude Code's user rules: instructions it follows in every project (found by review)",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/workflows",
            make: None,
            reason: "Claude Code's workflows: scripts and prompts it runs",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/loop.md",
            make: None,
            reason: "Claude Code's default /loop prompt: instructions it follows",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/local",
            make: None,
            reason: "Claude Code's local install: the launcher a `claude` alias runs without the shim",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/remote-settings.json",
            make: None,
            reason: "Claude Code's cached managed settings: hooks and permissions of every session",
        },
    ),
    (
        "claude",
        Code {
            path: ".claude/agent-memory",
            make: None,
            reason: "Claude Code's subagents' memory of user scope: instructions each follows in every project (found by review)",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/.env",
            make: Some(Make::File(b"")),
            reason: "Codex loads it into its own environment (found by review): PATH, BASH_ENV, the model endpoint of every program it starts",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/config.toml",
            make: Some(Make::File(b"")),
            reason: "Codex's configuration names commands it runs: notify, MCP servers (`[mcp_servers.*] command`), the model provider and the sandbox and approval settings",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/AGENTS.md",
            make: Some(Make::File(b"")),
            reason: "Codex's global instructions, followed in every project",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/AGENTS.override.md",
            make: None,
            reason: "Codex's global instructions, read instead of AGENTS.md",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/hooks.json",
            make: None,
            reason: "Codex's hooks: commands it runs on its events",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/rules",
            make: None,
            reason: "Codex's command rules: which commands run without asking, outside its own sandbox",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/prompts",
            make: None,
            reason: "Codex's custom prompts: instructions it follows",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/skills",
            make: Some(Make::Dir),
            reason: "Codex's user skills: instructions and the scripts they run, in every project (found by review)",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/memories",
            make: None,
            reason: "Codex's global memories: what it has learnt, read into the prompt in every project (found by review)",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/agents",
            make: Some(Make::Dir),
            reason: "Codex's agent roles: each `<role>.toml` gives a role its instructions and configuration, offered to the model in every project, one named like a built-in role in its place (found by review)",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/plugins",
            make: Some(Make::Dir),
            reason: "Codex's installed plugins: their skills, MCP servers and apps, in every project",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/environments.toml",
            make: None,
            reason: "Codex's execution environments: the program of each, started by every Codex at its start, walled or not (found by review)",
        },
    ),
    (
        "codex",
        Code {
            path: ".codex/models_cache.json",
            make: None,
            reason: "Codex's model catalogue, as fetched: each model's base instructions, taken up by every session until it is fetched again (found by review)",
        },
    ),
    (
        "codex",
        Code {
            // `*` inside a name: every such file there when the launch starts, held; one
            // that appears, set aside (a profile the user has not made yet, the agent could).
            path: ".codex/*.config.toml",
            make: None,
            reason: "Codex's profile layers: `codex --profile <name>` lays `<name>.config.toml` over its configuration (notify, MCP servers, the provider, the sandbox and approval settings)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".local/share/opencode/snapshot/*/*/config",
            make: None,
            reason: "the git configuration of OpenCode's snapshot repository of a project (found by review): OpenCode runs git with it in that project at every step, with or without the shim (`core.fsmonitor` names a program)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".local/share/opencode/snapshot/*/*/hooks",
            make: None,
            reason: "the git hooks of OpenCode's snapshot repository of a project",
        },
    ),
    (
        "opencode",
        Code {
            path: ".local/share/opencode/snapshot/*/*/commondir",
            make: None,
            reason: "where the git of OpenCode's snapshot repository of a project takes its configuration from",
        },
    ),
    (
        "opencode",
        Code {
            path: ".local/share/opencode/snapshot/*/*/config.worktree",
            make: None,
            reason: "more git configuration of OpenCode's snapshot repository of a project",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/*",
            make: None,
            reason: "OpenCode's configuration directory, every entry that is there (found by review): beside its configuration, plugins, tools, agents and commands, the npm packages they import and the files they import by path, code OpenCode runs in every project",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/node_modules",
            make: Some(Make::Dir),
            reason: "the npm packages OpenCode's plugins and tools import (`@opencode-ai/plugin`), which OpenCode installs there at every start: that install fails behind the wall and the packages of your own runs are used",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/package.json",
            make: Some(Make::File(b"{}\n")),
            reason: "what OpenCode's npm installs into its configuration directory, and from where",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/package-lock.json",
            make: None,
            reason: "what OpenCode's npm installs into its configuration directory (the versions and where each comes from)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/bun.lock",
            make: None,
            reason: "what Bun installs into OpenCode's configuration directory",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/.npmrc",
            make: None,
            reason: "npm's configuration for OpenCode's installs: the registry they fetch from, scripts they run",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/bunfig.toml",
            make: None,
            reason: "Bun's configuration for what runs in OpenCode's configuration directory: the registry, preloaded scripts",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/opencode.json",
            make: None,
            reason: "OpenCode's configuration names commands it runs: local MCP servers, formatters, LSP servers, plugins",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/opencode.jsonc",
            // OpenCode writes this where it finds no configuration file; made first, with
            // the same bytes, so that a new user's walled launch does not set it aside.
            make: Some(Make::FileUnless(
                b"{\n  \"$schema\": \"https://opencode.ai/config.json\"\n}",
                &["opencode.json", "config.json"],
            )),
            reason: "OpenCode's configuration (JSON with comments): the same commands",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/config.json",
            make: None,
            reason: "OpenCode's older configuration file: the same commands",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/AGENTS.md",
            make: Some(Make::File(b"")),
            reason: "OpenCode's global rules: instructions it follows in every project",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/plugin",
            make: Some(Make::Dir),
            reason: "OpenCode's plugins: JavaScript it loads and runs at start",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/plugins",
            make: Some(Make::Dir),
            reason: "OpenCode's plugins: JavaScript it loads and runs at start",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/tool",
            make: Some(Make::Dir),
            reason: "OpenCode's custom tools: JavaScript it runs",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/tools",
            make: Some(Make::Dir),
            reason: "OpenCode's custom tools: JavaScript it runs",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/agent",
            make: Some(Make::Dir),
            reason: "OpenCode's agents: prompts it follows, with their tools and permissions",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/command",
            make: Some(Make::Dir),
            reason: "OpenCode's commands: prompts it follows, with the shell commands they name",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/agents",
            make: Some(Make::Dir),
            reason: "OpenCode's agents: prompts it follows, with their tools and permissions (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/commands",
            make: Some(Make::Dir),
            reason: "OpenCode's commands: prompts it follows, with the shell commands they name (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/mode",
            make: Some(Make::Dir),
            reason: "OpenCode's modes: prompts it follows (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/modes",
            make: Some(Make::Dir),
            reason: "OpenCode's modes: prompts it follows (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/skill",
            make: Some(Make::Dir),
            reason: "OpenCode's skills: instructions and the scripts they run (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".config/opencode/skills",
            make: Some(Make::Dir),
            reason: "OpenCode's skills: instructions and the scripts they run (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".cache/opencode/*",
            make: None,
            reason: "OpenCode's cache, every entry that is there: beside the catalogue, the catalogue of an address of your choosing (`models-<hash>.json`), packages, skills and programs it runs",
        },
    ),
    (
        "opencode",
        Code {
            path: ".cache/opencode/bin",
            make: Some(Make::Dir),
            reason: "OpenCode runs the programs it downloaded there (ripgrep, language servers) without checking them (found by review)",
        },
    ),
    (
        "opencode",
        Code {
            path: ".cache/opencode/packages",
            make: Some(Make::Dir),
            reason: "the npm packages of OpenCode's plugins and of the model providers it does not carry, installed there once and imported by OpenCode in every project",
        },
    ),
    (
        "opencode",
        Code {
            path: ".cache/opencode/skills",
            make: Some(Make::Dir),
            reason: "the skills OpenCode downloaded from the addresses its configuration names: instructions and scripts, used in every project and not downloaded again while there",
        },
    ),
    (
        "opencode",
        Code {
            path: ".cache/opencode/models.json",
            // Empty is not JSON: OpenCode then uses the catalogue it carries.
            make: Some(Make::File(b"")),
            reason: "OpenCode's model catalogue names each provider's npm package, which OpenCode installs and imports, and its address, where your key is sent",
        },
    ),
];

/// Every agent's [`Code`] paths, with the agent's name. A launch protects those of any
/// agent that lie where it may write (under `home = "open"`, all of them).
pub fn agent_code() -> impl Iterator<Item = (&'static str, &'static Code)> {
    AGENT_CODE.iter().map(|(agent, code)| (*agent, code))
}

/// A directory of an agent's state in `$HOME` that every session of the user's shares, in
/// every project, walled or not, but whose parts each session must keep to itself: one
/// session reads or runs what another left there. Held in each launch's namespace that may
/// write it ([`crate::protect::agent_state`]); never judged or set aside, as the user's
/// own sessions write it outside the wall all the time. Made (empty, owner-only) where the
/// launch's own agent would make it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shared {
    /// Relative to `$HOME`.
    pub path: &'static str,
    /// What this launch keeps of it.
    pub kept: Kept,
    /// What reads or runs it.
    pub reason: &'static str,
}

/// What a launch keeps of a [`Shared`] directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// Read-only but for the entries of this launch's project ([`claude_project_dir`] of
    /// the launch's directory, its worktree's top level and its main checkout's).
    Project,
    /// Nothing: an empty file system of the launch's own covers it.
    Fresh,
    /// What the user has there, read-only, under a layer of this launch's project's own
    /// (an overlay whose upper layer is kept per project, out of the agent's reach): what
    /// the agent writes there only later launches in the same project see.
    Layer,
    /// A directory of this launch's project's own in its place (kept per project, out of
    /// the agent's reach otherwise): what the user's sessions keep there the agent neither
    /// sees nor changes, and what it writes only later launches in the same project see. A
    /// bind, where [`Kept::Layer`]'s overlay costs half a millisecond to mount and as much
    /// to take down.
    Own,
    /// Read-only: what the user's sessions leave there is read, nothing is written.
    Read,
}

/// Who owns a [`Shared`] directory that every agent's launch writes: held whatever the agent.
pub const EVERY_AGENT: &str = "*";

/// Checked against the release's binary, as [`AGENT_CODE`].
const AGENT_SHARED: &[(&str, Shared)] = &[
    (
        "claude",
        Shared {
            path: ".claude/projects",
            kept: Kept::Project,
            reason: "Claude Code's per-project state: each project's memory (`memory/MEMORY.md`, instructions it follows in that project) and its sessions' transcripts (what a resumed session takes as said); this launch writes its own project's only",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/shell-snapshots",
            kept: Kept::Fresh,
            reason: "Claude Code's shell snapshots: each session sources its own before every shell command (found by review: written by another session, they run there, walled or not)",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/session-env",
            kept: Kept::Fresh,
            reason: "Claude Code's session environment scripts: written by hooks, sourced before every shell command of their session",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/file-history",
            kept: Kept::Own,
            reason: "Claude Code's backups of the files each session edited, which a rewind writes back into that session's project: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/todos",
            kept: Kept::Own,
            reason: "Claude Code's task lists, per session: a resumed session works through what it finds there: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/plans",
            kept: Kept::Own,
            reason: "Claude Code's plans, which a session in plan mode follows: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/tasks",
            kept: Kept::Own,
            reason: "Claude Code's tasks, which its background sessions and teammates take up: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/teams",
            kept: Kept::Own,
            reason: "Claude Code's teams, whose members take what they find there as their instructions: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/jobs",
            kept: Kept::Own,
            reason: "Claude Code's background jobs: what each is to do: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/sessions",
            kept: Kept::Own,
            reason: "Claude Code's session registry, which names what each session runs and where: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/ide",
            kept: Kept::Read,
            reason: "Claude Code's IDE lock files: each names the port and token of an IDE's MCP server, which Claude Code connects to: this launch reads them, and writes none",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/backups",
            kept: Kept::Own,
            reason: "Claude Code's backups of its configuration, restored (with their MCP servers) when .claude.json is lost or cannot be read: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "claude",
        Shared {
            path: ".claude/paste-cache",
            kept: Kept::Own,
            reason: "Claude Code's pasted text, put back into the prompt from the history: what this launch writes there goes to a directory of its project's own",
        },
    ),
    (
        "opencode",
        Shared {
            path: ".local/share/opencode/snapshot",
            kept: Kept::Own,
            reason: "OpenCode's snapshot git repositories, one per project and worktree: OpenCode runs git with each (its configuration, its hooks) in that project at every step, with or without the shim, and one for a project not opened in OpenCode yet could be made by the agent (found by review); this launch's go to a directory of its project's own",
        },
    ),
    (
        EVERY_AGENT,
        Shared {
            path: ".cache",
            kept: Kept::Layer,
            reason: "the caches every tool shares, walled or not: pre-commit's hook environments, Go's build cache, corepack's package managers, virtualenvs and browsers hold code your own tools run outside the wall; what this launch writes there goes to a layer of its project's own",
        },
    ),
    (
        "codex",
        Shared {
            path: ".codex/shell_snapshots",
            kept: Kept::Fresh,
            reason: "Codex's shell snapshots: each session sources its own before every command it runs (found by review: a process left behind the wall wrote into the snapshot of the user's next session)",
        },
    ),
    (
        "codex",
        Shared {
            path: ".codex/tmp",
            kept: Kept::Fresh,
            reason: "Codex's temporary directory: each session puts a directory of its own there first on PATH for every command it runs (`arg0-linux`; found by review: a process left behind the wall wrote programs into the next session's, which ran them unwalled)",
        },
    ),
    (
        "codex",
        Shared {
            path: ".codex/.tmp",
            kept: Kept::Own,
            reason: "Codex's plugin marketplaces and the plugins it stages from them, installed into every project: this launch's go to a directory of its project's own",
        },
    ),
];

/// The entries of a `<dir>/*` path of [`AGENT_CODE`] left writable, and why: what the agent
/// rewrites at every start and runs nothing from.
pub const EVERY_ENTRY_BUT: &[(&str, &[&str])] = &[(
    // OpenCode rewrites it at every start, and exits when it cannot.
    ".config/opencode/*",
    &[".gitignore"],
)];

/// Every agent's [`Shared`] directories, with the agent each belongs to.
pub fn agent_shared() -> impl Iterator<Item = (&'static str, &'static Shared)> {
    AGENT_SHARED.iter().map(|(agent, shared)| (*agent, shared))
}

/// The name of `dir`'s entry in `~/.claude/projects`, as Claude Code makes it: each UTF-16
/// unit that is not an ASCII letter or digit becomes `-`; a name longer than 200 is cut
/// there and given `-` and the base-36 of its 32-bit string hash (of the path's UTF-16
/// units, `h = 31 h + unit`, wrapping, taken absolute).
pub fn claude_project_dir(dir: &std::path::Path) -> String {
    const MAX: usize = 200;
    let path = dir.to_string_lossy();
    let name: String = path
        .encode_utf16()
        .map(|u| match u8::try_from(u) {
            Ok(b) if b.is_ascii_alphanumeric() => char::from(b),
            _ => '-',
        })
        .collect();
    if name.len() <= MAX {
        return name;
    }
    let hash = path
        .encode_utf16()
        .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
    let mut n = i64::from(hash).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        digits.push(b"0123456789abcdefghijklmnopqrstuvwxyz"[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    digits.reverse();
    format!("{}-{}", &name[..MAX], String::from_utf8_lossy(&digits))
}

/// npm's cache, moved from `~/.npm` (not writable under the private and read-only homes)
/// into `~/.cache`.
const NPM_CACHE: (&str, &str) = ("npm_config_cache", ".cache/npm");

/// Environment variables set under the private and read-only homes when the user has not
/// set them: name and path relative to `$HOME`.
pub fn strict_env(agent: &str) -> &'static [(&'static str, &'static str)] {
    match agent {
        "claude" => &[("CLAUDE_CONFIG_DIR", ".claude"), NPM_CACHE],
        "codex" => &[("CODEX_HOME", ".codex"), NPM_CACHE],
        _ => &[NPM_CACHE],
    }
}

/// Environment variables set under every home mode when the user has not set them: name
/// and absolute value.
pub fn env_defaults(_agent: &str) -> &'static [(&'static str, &'static str)] {
    &[("TMPDIR", "/tmp")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// What strict home points an agent at must be writable under strict home.
    #[test]
    fn strict_env_paths_lie_in_state_dirs() {
        for agent in ["claude", "opencode", "codex", "aider"] {
            for (name, rel) in strict_env(agent) {
                assert!(
                    state_dirs(agent)
                        .iter()
                        .any(|d| Path::new(rel).starts_with(d)),
                    "{agent}: {name}={rel} is not in a state directory"
                );
            }
            for (name, value) in env_defaults(agent) {
                assert!(Path::new(value).is_absolute(), "{agent}: {name}={value}");
            }
        }
    }

    /// The names Claude Code 2.1 gives, worked out by its own function in node.
    #[test]
    fn claude_project_dirs_are_named_as_claude_code_names_them() {
        assert_eq!(
            claude_project_dir(Path::new("/home/u/src/my_app.v2")),
            "-home-u-src-my-app-v2"
        );
        assert_eq!(claude_project_dir(Path::new("/tmp/é")), "-tmp--");
        let long = format!("/{}", "a".repeat(250));
        let name = claude_project_dir(Path::new(&long));
        // node: s="/"+"a".repeat(250); h=0; for (c of s) h=(h<<5)-h+c.charCodeAt(0)|0;
        //       Math.abs(h).toString(36)
        assert_eq!(name, format!("-{}-{}", "a".repeat(199), "feo44x"));
    }
}
