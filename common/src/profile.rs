//! What each known agent keeps in `$HOME`, so that strict home can leave exactly that
//! writable. Paths are relative to `$HOME`.
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

/// npm's cache, moved from `~/.npm` (read-only under strict home) into `~/.cache`.
const NPM_CACHE: (&str, &str) = ("npm_config_cache", ".cache/npm");

/// Environment variables set under strict home when the user has not set them: name and
/// path relative to `$HOME`.
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
