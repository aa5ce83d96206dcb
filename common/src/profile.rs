//! What each known agent keeps in `$HOME`, so that strict home can leave exactly that
//! writable. Paths are relative to `$HOME`.
//!
//! Why each entry is here:
//! - claude: `~/.claude` holds settings, sessions and credentials; Claude Code also keeps
//!   `~/.claude.json` in `$HOME` itself unless `CLAUDE_CONFIG_DIR` is set, so under strict
//!   home the shim sets it to `~/.claude` when the user has not.
//! - opencode: XDG data, config, state and cache directories named `opencode`.
//! - codex: `~/.codex` (`CODEX_HOME`).
//! - every agent: `~/.cache`, where npm, node and language tools keep their caches.

/// State directories of `agent`, relative to `$HOME`, writable under strict home.
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

/// Environment variables set under strict home when the user has not set them: name and
/// path relative to `$HOME`.
pub fn strict_env(agent: &str) -> &'static [(&'static str, &'static str)] {
    match agent {
        "claude" => &[("CLAUDE_CONFIG_DIR", ".claude")],
        "codex" => &[("CODEX_HOME", ".codex")],
        _ => &[],
    }
}
