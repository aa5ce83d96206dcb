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
            make: None,
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
            path: ".cache/opencode/bin",
            make: Some(Make::Dir),
            reason: "OpenCode runs the programs it downloaded there (ripgrep, language servers) without checking them (found by review)",
        },
    ),
];

/// Every agent's [`Code`] paths, with the agent's name. A launch protects those of any
/// agent that lie where it may write (under `home = "open"`, all of them).
pub fn agent_code() -> impl Iterator<Item = (&'static str, &'static Code)> {
    AGENT_CODE.iter().map(|(agent, code)| (*agent, code))
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
}
