//! The environment filter: the agent's environment is rebuilt from an allowlist, never copied.
//!
//! Invariant: a name on the hard denylist never passes, whatever the allowlist or the
//! configuration says. Secrets the user keeps in their shell (`AWS_SECRET_ACCESS_KEY`,
//! `DATABASE_URL`, …) are simply not on the list.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

/// An allowlist entry: an exact name, or a prefix written `PREFIX*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvPattern {
    /// Matches one name.
    Exact(String),
    /// Matches every name that starts with the prefix.
    Prefix(String),
}

impl EnvPattern {
    /// Parses `NAME` or `PREFIX*`; the error says what is wrong with it.
    pub fn parse(s: &str) -> Result<EnvPattern, &'static str> {
        let (body, prefix) = match s.strip_suffix('*') {
            Some(body) => (body, true),
            None => (s, false),
        };
        if body.is_empty() {
            return Err("is not a variable name (a lone `*` would pass everything: list names)");
        }
        if !body.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(
                "is not a variable name: use letters, digits and `_`, with `*` only at the end",
            );
        }
        if body.as_bytes()[0].is_ascii_digit() {
            return Err("is not a variable name: it starts with a digit");
        }
        Ok(if prefix {
            EnvPattern::Prefix(body.to_string())
        } else {
            EnvPattern::Exact(body.to_string())
        })
    }

    fn matches(&self, name: &[u8]) -> bool {
        match self {
            EnvPattern::Exact(n) => name == n.as_bytes(),
            EnvPattern::Prefix(p) => name.starts_with(p.as_bytes()),
        }
    }
}

impl fmt::Display for EnvPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EnvPattern::Exact(n) => f.write_str(n),
            EnvPattern::Prefix(p) => write!(f, "{p}*"),
        }
    }
}

/// What every terminal program needs, for every agent.
const BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "COLORTERM",
    "TERM_PROGRAM",
    "TERM_PROGRAM_VERSION",
    "TERMINFO",
    "TERMINFO_DIRS",
    "COLUMNS",
    "LINES",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "TZ",
    "TMPDIR",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "NO_COLOR",
    "FORCE_COLOR",
    "CLICOLOR",
    "CLICOLOR_FORCE",
    "XDG_CONFIG_HOME",
    "XDG_CACHE_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_RUNTIME_DIR",
    "http_proxy",
    "https_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
];

/// Per-agent additions: the agent's own settings and the credentials it was built to use.
fn agent_patterns(agent: &str) -> &'static [&'static str] {
    match agent {
        "claude" => &[
            "ANTHROPIC_*",
            "CLAUDE_*",
            "DISABLE_*",
            "MAX_THINKING_TOKENS",
            "MCP_TIMEOUT",
            // Claude Code refuses `--dangerously-skip-permissions` (bypassPermissions) as
            // root unless IS_SANDBOX=1 says it runs in a deliberate sandbox, which behind
            // the shim it does; a user who sets it outside the shim means it.
            "IS_SANDBOX",
        ],
        "opencode" => &[
            "OPENCODE_*",
            "ANTHROPIC_*",
            "OPENAI_*",
            "OPENROUTER_*",
            "GEMINI_*",
        ],
        "codex" => &["CODEX_*", "OPENAI_*"],
        _ => &[],
    }
}

/// Names that change what every program in the wall loads or runs. They never pass, even
/// when the configuration allows them: the wall must not carry an injection into each child.
const DENY: &[&str] = &[
    "LD_*",
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_*",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "GCONV_PATH",
    "GLIBC_TUNABLES",
    "MALLOC_*",
    "LOCPATH",
    "NLSPATH",
    "HOSTALIASES",
    "RES_OPTIONS",
    "LOCALDOMAIN",
    "PERL5OPT",
    "PERL5LIB",
    "PYTHONSTARTUP",
    "RUBYOPT",
];

fn builtin(names: &'static [&'static str]) -> impl Iterator<Item = EnvPattern> {
    names.iter().map(|n| match n.strip_suffix('*') {
        Some(p) => EnvPattern::Prefix(p.to_string()),
        None => EnvPattern::Exact(n.to_string()),
    })
}

/// The allowlist for one agent: base, agent patterns, then configuration additions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvPolicy {
    allow: Vec<EnvPattern>,
    deny: Vec<EnvPattern>,
}

impl EnvPolicy {
    /// Builds the allowlist for `agent` with `extra` patterns from the configuration.
    pub fn for_agent(agent: &str, extra: &[EnvPattern]) -> EnvPolicy {
        let allow = builtin(BASE)
            .chain(builtin(agent_patterns(agent)))
            .chain(extra.iter().cloned())
            .collect();
        EnvPolicy {
            allow,
            deny: builtin(DENY).collect(),
        }
    }

    /// The allow patterns, in order (for `landwall policy`).
    pub fn allowed(&self) -> &[EnvPattern] {
        &self.allow
    }

    /// The deny patterns (for `landwall policy`).
    pub fn denied(&self) -> &[EnvPattern] {
        &self.deny
    }

    /// Whether a variable called `name` passes.
    pub fn passes(&self, name: &OsStr) -> bool {
        let name = name.as_bytes();
        // Allow first: most names of a shell's environment match no allow pattern, and then
        // the deny list need not be scanned at all. The result is the same either way.
        self.allow.iter().any(|p| p.matches(name)) && !self.deny.iter().any(|p| p.matches(name))
    }

    /// Keeps the variables that pass, in their original order.
    pub fn filter(
        &self,
        vars: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.into_iter().filter(|(k, _)| self.passes(k)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(v: &[(OsString, OsString)]) -> Vec<String> {
        v.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn secrets_are_dropped_basics_kept() {
        let env = EnvPolicy::for_agent("claude", &[]);
        let out = env.filter(vars(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("DATABASE_URL", "postgres://"),
            ("LC_ALL", "C"),
            ("ANTHROPIC_API_KEY", "k"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("OPENAI_API_KEY", "o"),
        ]));
        assert_eq!(
            names(&out),
            [
                "PATH",
                "HOME",
                "LC_ALL",
                "ANTHROPIC_API_KEY",
                "CLAUDE_CONFIG_DIR"
            ]
        );
    }

    #[test]
    fn agents_get_their_own_patterns() {
        let codex = EnvPolicy::for_agent("codex", &[]);
        assert!(codex.passes(OsStr::new("OPENAI_API_KEY")));
        assert!(!codex.passes(OsStr::new("ANTHROPIC_API_KEY")));
        let other = EnvPolicy::for_agent("aider", &[]);
        assert!(!other.passes(OsStr::new("OPENAI_API_KEY")));
        assert!(other.passes(OsStr::new("TERM")));
    }

    #[test]
    fn denylist_wins_over_any_allow() {
        let extra = [
            EnvPattern::parse("LD_*").expect("pattern"),
            EnvPattern::parse("BASH_ENV").expect("pattern"),
            EnvPattern::parse("L*").expect("pattern"),
        ];
        let env = EnvPolicy::for_agent("claude", &extra);
        for n in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "GLIBC_TUNABLES",
            "BASH_FUNC_x%%",
        ] {
            assert!(!env.passes(OsStr::new(n)), "{n} passed");
        }
        assert!(env.passes(OsStr::new("LESS")), "config prefix applies");
    }

    #[test]
    fn config_can_add_names() {
        let extra = [EnvPattern::parse("MY_TOKEN").expect("pattern")];
        let env = EnvPolicy::for_agent("claude", &extra);
        assert!(env.passes(OsStr::new("MY_TOKEN")));
        assert!(!env.passes(OsStr::new("MY_TOKEN2")), "exact means exact");
    }

    #[test]
    fn pattern_parsing() {
        assert_eq!(
            EnvPattern::parse("A_*"),
            Ok(EnvPattern::Prefix("A_".into()))
        );
        assert_eq!(EnvPattern::parse("A1"), Ok(EnvPattern::Exact("A1".into())));
        assert!(EnvPattern::parse("*").is_err());
        assert!(EnvPattern::parse("A*B").is_err());
        assert!(EnvPattern::parse("1A").is_err());
        assert_eq!(
            EnvPattern::parse("X_*").map(|p| p.to_string()),
            Ok("X_*".into())
        );
    }
}
