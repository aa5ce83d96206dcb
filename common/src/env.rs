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

/// The hard denylist: each name (or `PREFIX*`) with the reason it never passes, even when
/// the configuration allows it. This table is the one place the reasons are kept, for
/// `landwall policy` and the documentation.
///
/// What is on it: every variable whose value is code or names code (a command, a script, a
/// library, a module search path, options or a configuration file that load or run
/// something) for the programs that run under nearly every agent and the tools it calls:
/// the dynamic loader and glibc, the shells, git, node, bun and npm (the agents themselves
/// run on node or bun), python, perl, ruby, java, less, the password helpers of ssh and
/// wget, and OpenSSL. The wall must not carry such an injection into each child, where it
/// would run unseen, past the agent's own permission checks. Also on it: the git variables
/// that point git at another repository than the one the wall was built for, and glibc's
/// resolver, locale and allocator settings.
///
/// Deliberately not on it, although they name programs or code:
/// - `PATH`, `SHELL`, `EDITOR`, `VISUAL` and `PAGER` (in [`BASE`]): the user's own choice of a
///   program for a role, which the agents need (Claude Code runs commands in `$SHELL` and
///   edits a prompt in `$VISUAL` or `$EDITOR`). Their tool-specific spellings (`GIT_EDITOR`,
///   `GIT_PAGER`, `LESSEDIT`, `npm_config_editor`, …) are on the list: each tool falls back
///   to the general variable, so nothing is lost.
/// - `HOME` and `XDG_*`: where the user's configuration lives; the wall decides what of it
///   can be read.
/// - Knobs of a build the agent starts (`CC`, `RUSTC_WRAPPER`, `RUSTFLAGS`, `GOFLAGS`,
///   `MAKEFLAGS`, `JAVA_OPTS`, `MAVEN_OPTS`, …) and where installed packages are found
///   (`GEM_HOME`, `GEM_PATH`, `VIRTUAL_ENV`): they choose the toolchain, as `PATH` does, and
///   pass only when the configuration names them.
/// - Data no code comes from: `SSL_CERT_FILE`, `TERMINFO`, `CURL_HOME`, `TZ`, …
///
/// Matching ignores ASCII case and takes `-` for `_` (see [`deny_matches`]): npm reads
/// `NPM_CONFIG_SCRIPT_SHELL` and `npm_config_script-shell` as its `script-shell`, and a
/// prefix in `env_allow` could let such a spelling through. The variables landwall sets
/// itself (`TMPDIR`, `npm_config_cache`, …) are added after the filter and are not on it.
pub const DENY: &[(&str, &str)] = &[
    // The dynamic loader and glibc, in every program.
    (
        "LD_*",
        "the dynamic loader: libraries it preloads (LD_PRELOAD, LD_AUDIT) and searches (LD_LIBRARY_PATH)",
    ),
    (
        "GCONV_PATH",
        "glibc loads character-set conversion modules (shared libraries) from it",
    ),
    (
        "GLIBC_TUNABLES",
        "glibc's tunables, in every program (its parser was a root exploit, CVE-2023-4911)",
    ),
    (
        "MALLOC_*",
        "glibc's allocator settings, in every program (MALLOC_TRACE writes to a file it names)",
    ),
    ("LOCPATH", "glibc loads locale data from it"),
    ("NLSPATH", "glibc loads message catalogues from it"),
    ("HOSTALIASES", "redirects host names in every program's resolver"),
    ("RES_OPTIONS", "changes every program's resolver"),
    ("LOCALDOMAIN", "the search domain of every program's resolver"),
    // Shells.
    ("BASH_ENV", "a script every non-interactive bash runs first"),
    (
        "ENV",
        "a script interactive sh, dash, ksh and bash in POSIX mode run first (a `$(…)` in it runs too)",
    ),
    (
        "BASH_FUNC_*",
        "functions every bash imports: one can replace any command a script runs",
    ),
    (
        "SHELLOPTS",
        "options every bash starts with (with xtrace it runs the `$(…)` in PS4)",
    ),
    ("BASHOPTS", "shopt options every bash starts with"),
    ("PS0", "a prompt: interactive bash runs the `$(…)` in it"),
    ("PS1", "a prompt: interactive bash runs the `$(…)` in it"),
    ("PS2", "a prompt: interactive bash runs the `$(…)` in it"),
    (
        "PS4",
        "the trace prompt: bash runs the `$(…)` in it when tracing",
    ),
    (
        "PROMPT_COMMAND",
        "a command interactive bash runs before each prompt",
    ),
    (
        "ZDOTDIR",
        "the directory of zsh's start-up files: every zsh, even `zsh -c`, runs its .zshenv",
    ),
    (
        "FPATH",
        "where zsh and ksh find functions to autoload, which then run as commands",
    ),
    (
        "BASH_LOADABLES_PATH",
        "where bash's `enable -f` finds builtins (shared libraries)",
    ),
    // git, which the agents run all the time.
    (
        "GIT_CONFIG*",
        "git configuration in the environment (GIT_CONFIG_PARAMETERS; GIT_CONFIG_COUNT with GIT_CONFIG_KEY_n and GIT_CONFIG_VALUE_n) or other files for it (GIT_CONFIG_GLOBAL, GIT_CONFIG_SYSTEM): keys such as core.sshCommand, core.fsmonitor, core.hooksPath and `!` aliases run commands",
    ),
    (
        "GIT_TEST_FSMONITOR",
        "git runs the program it names on `git status`, as `core.fsmonitor`",
    ),
    (
        "MAKEFLAGS",
        "make reads it as options and variables: `SHELL=` names the program that runs every recipe",
    ),
    (
        "MAKEFILES",
        "make reads the makefiles it names before any other, and runs their recipes",
    ),
    (
        "GIT_SSH",
        "the program git runs for every fetch and push over ssh",
    ),
    (
        "GIT_SSH_COMMAND",
        "the command git runs for every fetch and push over ssh",
    ),
    ("GIT_ASKPASS", "the program git runs to ask for credentials"),
    (
        "GIT_PROXY_COMMAND",
        "the command git runs to connect to a git:// remote",
    ),
    (
        "GIT_EXTERNAL_DIFF",
        "the command `git diff` runs on each changed file",
    ),
    (
        "GIT_EXEC_PATH",
        "where git finds its subcommands and remote helpers (git-remote-https runs on every fetch)",
    ),
    (
        "GIT_TEMPLATE_DIR",
        "copied into every new repository (`git init`, `git clone`), hooks included",
    ),
    (
        "GIT_ALLOW_PROTOCOL",
        "the transports git may use: with `ext`, a URL (a submodule's, say) runs the command in it",
    ),
    (
        "GIT_EDITOR",
        "the editor command git runs (it falls back to EDITOR, which passes)",
    ),
    (
        "GIT_SEQUENCE_EDITOR",
        "the command `git rebase -i` runs on its todo list (it falls back to the editor)",
    ),
    (
        "GIT_PAGER",
        "the pager command git runs (it falls back to PAGER, which passes)",
    ),
    (
        "GIT_DIR",
        "another repository for git: its configuration and hooks run, and the wall's git grants and object quarantine are for the repository found from the worktree",
    ),
    (
        "GIT_COMMON_DIR",
        "another repository's common directory for git: its configuration and hooks run",
    ),
    (
        "GIT_WORK_TREE",
        "another worktree for git than the one the wall was built for",
    ),
    (
        "GIT_INDEX_FILE",
        "another index for git than the one the wall was built for",
    ),
    (
        "GIT_OBJECT_DIRECTORY",
        "another object store for git: new objects bypass the object quarantine, and refs end up naming objects the repository lacks",
    ),
    (
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "more object stores for git: objects found there are not written, and refs end up naming objects the repository lacks",
    ),
    // Password helpers and browsers.
    (
        "SSH_ASKPASS",
        "the program ssh (and git, without GIT_ASKPASS) runs to ask for a passphrase",
    ),
    (
        "WGET_ASKPASS",
        "the program `wget --use-askpass` runs to ask for a password",
    ),
    (
        "WGETRC",
        "wget's start-up file, whose use_askpass names a program to run",
    ),
    (
        "BROWSER",
        "the program python's webbrowser and xdg-open run to open a URL",
    ),
    // node, bun and npm.
    (
        "NODE_OPTIONS",
        "options of every node, the agents included: --require and --import load code",
    ),
    ("NODE_PATH", "where node finds modules"),
    (
        "NODE_REPL_EXTERNAL_MODULE",
        "a module node loads in place of its REPL",
    ),
    (
        "BUN_OPTIONS",
        "options bun reads at every start: --preload loads code",
    ),
    (
        "npm_config_script_shell",
        "the shell npm runs package scripts with",
    ),
    (
        "npm_config_shell",
        "the shell `npm exec` and `npm explore` start",
    ),
    ("npm_config_call", "the command `npm exec --call` runs"),
    (
        "npm_config_node_options",
        "NODE_OPTIONS for the package scripts npm runs",
    ),
    (
        "npm_config_userconfig",
        "an npmrc for npm to read: it can set script-shell and node-options",
    ),
    (
        "npm_config_globalconfig",
        "an npmrc for npm to read: it can set script-shell and node-options",
    ),
    (
        "npm_config_prefix",
        "npm's global prefix: its etc/npmrc is npm's global configuration",
    ),
    (
        "npm_config_node_gyp",
        "the node-gyp script npm runs to build native modules",
    ),
    (
        "npm_config_git",
        "the git program npm runs for git dependencies",
    ),
    ("npm_config_init_module", "a JavaScript file `npm init` runs"),
    (
        "npm_config_onload_script",
        "a module npm 6 and older loads at every start",
    ),
    (
        "npm_config_editor",
        "the editor npm runs (it falls back to EDITOR, which passes)",
    ),
    ("npm_config_browser", "the program npm runs to open a URL"),
    // Python.
    ("PYTHONSTARTUP", "a file interactive python runs first"),
    (
        "PYTHONPATH",
        "where python finds modules, before the standard library: a sitecustomize.py there runs at every start",
    ),
    ("PYTHONHOME", "where python finds its standard library"),
    (
        "PYTHONPLATLIBDIR",
        "the library directory in python's standard library path",
    ),
    (
        "PYTHONUSERBASE",
        "python's user site-packages: the .pth files there run at every start",
    ),
    (
        "PYTHONPYCACHEPREFIX",
        "where python looks for compiled bytecode, which it runs in place of the source",
    ),
    (
        "PYTHONWARNINGS",
        "python's warning filters: a category written `module.Class` imports that module at start",
    ),
    (
        "PYTHONBREAKPOINT",
        "the function python's breakpoint() imports and calls",
    ),
    // Perl.
    ("PERL5OPT", "options of every perl: -M loads a module"),
    ("PERL5LIB", "where perl finds modules"),
    ("PERLLIB", "where perl finds modules"),
    ("PERL5DB", "the debugger code `perl -d` runs"),
    (
        "PERLDB_OPTS",
        "perl debugger options: its pager option is a command",
    ),
    // Ruby.
    ("RUBYOPT", "options of every ruby: -r loads a library"),
    ("RUBYLIB", "where ruby finds libraries"),
    // Java.
    (
        "JAVA_TOOL_OPTIONS",
        "options of every JVM: -javaagent loads code",
    ),
    (
        "_JAVA_OPTIONS",
        "options of every HotSpot JVM: -javaagent loads code",
    ),
    (
        "JDK_JAVA_OPTIONS",
        "options of every `java` launch: -javaagent loads code",
    ),
    ("CLASSPATH", "where java finds classes"),
    // less, which git and man page through.
    (
        "LESS",
        "less's options: a `+` command runs at start, and `!` there runs a shell command",
    ),
    ("LESSOPEN", "a command less runs on every file it opens"),
    ("LESSCLOSE", "a command less runs on every file it closes"),
    (
        "LESSKEY*",
        "less's key files (LESSKEY, LESSKEYIN, LESSKEY_CONTENT and their _SYSTEM forms): their #env section can set LESSOPEN",
    ),
    (
        "LESSEDIT",
        "the editor command less runs (it falls back to VISUAL and EDITOR, which pass)",
    ),
    // OpenSSL, in every program that uses TLS through it.
    (
        "OPENSSL_CONF",
        "OpenSSL's configuration: it can load engines and providers (shared libraries)",
    ),
    ("OPENSSL_ENGINES", "where OpenSSL loads engines from"),
    ("OPENSSL_MODULES", "where OpenSSL loads providers from"),
];

fn pattern(name: &str) -> EnvPattern {
    match name.strip_suffix('*') {
        Some(p) => EnvPattern::Prefix(p.to_string()),
        None => EnvPattern::Exact(name.to_string()),
    }
}

fn builtin(names: &'static [&'static str]) -> impl Iterator<Item = EnvPattern> {
    names.iter().map(|n| pattern(n))
}

/// Whether `name` matches the deny pattern `p`, ignoring ASCII case and taking `-` for `_`:
/// a program that folds names (npm) must not find a spelling the list missed.
fn deny_matches(p: &EnvPattern, name: &[u8]) -> bool {
    fn fold(b: &u8) -> u8 {
        if *b == b'-' {
            b'_'
        } else {
            b.to_ascii_uppercase()
        }
    }
    let same = |a: &[u8], b: &[u8]| a.len() == b.len() && a.iter().map(fold).eq(b.iter().map(fold));
    match p {
        EnvPattern::Exact(n) => same(n.as_bytes(), name),
        EnvPattern::Prefix(pre) => name
            .get(..pre.len())
            .is_some_and(|head| same(pre.as_bytes(), head)),
    }
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
            deny: DENY.iter().map(|(name, _)| pattern(name)).collect(),
        }
    }

    /// The allow patterns, in order (for `landwall policy`).
    pub fn allowed(&self) -> &[EnvPattern] {
        &self.allow
    }

    /// The deny patterns (for `landwall policy`), in the order of [`DENY`].
    pub fn denied(&self) -> &[EnvPattern] {
        &self.deny
    }

    /// Why a variable called `name` never passes, if it is on the hard denylist.
    pub fn deny_reason(&self, name: &OsStr) -> Option<&'static str> {
        let name = name.as_bytes();
        let i = self.deny.iter().position(|p| deny_matches(p, name))?;
        DENY.get(i).map(|(_, why)| *why)
    }

    /// Whether a variable called `name` passes.
    pub fn passes(&self, name: &OsStr) -> bool {
        let name = name.as_bytes();
        // Allow first: most names of a shell's environment match no allow pattern, and then
        // the deny list need not be scanned at all. The result is the same either way.
        self.allow.iter().any(|p| p.matches(name))
            && !self.deny.iter().any(|p| deny_matches(p, name))
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
        assert!(
            env.passes(OsStr::new("LESSCHARSET")),
            "config prefix applies"
        );
    }

    /// What a configuration that allows everything looks like: every first character.
    fn allow_everything() -> Vec<EnvPattern> {
        (b'A'..=b'Z')
            .chain(b'a'..=b'z')
            .chain([b'_'])
            .map(|c| EnvPattern::Prefix(char::from(c).to_string()))
            .collect()
    }

    /// A name each deny pattern matches: the name itself, or the prefix with a tail.
    fn sample(pattern: &str) -> String {
        match pattern.strip_suffix('*') {
            Some(p) => format!("{p}X"),
            None => pattern.to_string(),
        }
    }

    #[test]
    fn every_denied_name_is_dropped_even_when_everything_is_allowed() {
        for agent in ["claude", "opencode", "codex", "aider"] {
            let env = EnvPolicy::for_agent(agent, &allow_everything());
            for (pattern, _) in DENY {
                let name = sample(pattern);
                assert!(!env.passes(OsStr::new(&name)), "{agent}: {name} passed");
            }
            // The ones the issue found passing next to denied siblings, and names the
            // prefixes cover.
            for name in [
                "GIT_CONFIG_PARAMETERS",
                "GIT_CONFIG_COUNT",
                "GIT_CONFIG_KEY_0",
                "GIT_CONFIG_VALUE_0",
                "GIT_CONFIG_GLOBAL",
                "GIT_CONFIG_SYSTEM",
                "GIT_CONFIG",
                "GIT_SSH_COMMAND",
                "NODE_OPTIONS",
                "PYTHONPATH",
                "RUBYLIB",
                "PERLLIB",
                "JAVA_TOOL_OPTIONS",
                "npm_config_script_shell",
                "ZDOTDIR",
                "LESSOPEN",
                "LESSKEYIN",
                "LESSKEY_CONTENT",
                "LD_PRELOAD",
                "LD_AUDIT",
                "MALLOC_CHECK_",
                "BASH_FUNC_ls%%",
            ] {
                assert!(!env.passes(OsStr::new(name)), "{agent}: {name} passed");
            }
        }
    }

    /// npm reads `npm_config_*` whatever its case and with `-` for `_`; so does the denylist.
    #[test]
    fn other_spellings_of_a_denied_name_are_dropped() {
        let env = EnvPolicy::for_agent("claude", &allow_everything());
        for name in [
            "NPM_CONFIG_SCRIPT_SHELL",
            "npm_config_script-shell",
            "Npm_Config_Node_Options",
            "npm_config_userconfig",
            "NPM_CONFIG_USERCONFIG",
            "node_options",
            "ld_preload",
            "git-ssh-command",
        ] {
            assert!(!env.passes(OsStr::new(name)), "{name} passed");
            assert!(env.deny_reason(OsStr::new(name)).is_some(), "{name}");
        }
    }

    /// The harmless siblings of denied names still pass when the configuration allows them.
    #[test]
    fn harmless_siblings_pass() {
        let env = EnvPolicy::for_agent("claude", &allow_everything());
        for name in [
            "GIT_AUTHOR_NAME",
            "GIT_COMMITTER_EMAIL",
            "GIT_TERMINAL_PROMPT",
            "GIT_SSH_VARIANT",
            "NODE_ENV",
            "NODE_EXTRA_CA_CERTS",
            "BUN_INSTALL",
            "npm_config_cache",
            "NPM_CONFIG_CACHE",
            "npm_config_registry",
            "PYTHONUNBUFFERED",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONIOENCODING",
            "PERL_UNICODE",
            "RUBY_VERSION",
            "JAVA_HOME",
            "LESSCHARSET",
            "LESSSECURE",
            "LDFLAGS",
            "PS_FORMAT",
            "ENVIRONMENT",
            "SSL_CERT_FILE",
            "CURL_HOME",
            "OPENSSL_ia32cap",
            "SSH_AUTH_SOCK",
            "MY_TOKEN",
        ] {
            assert!(env.passes(OsStr::new(name)), "{name} dropped");
            assert_eq!(env.deny_reason(OsStr::new(name)), None, "{name}");
        }
    }

    /// The denylist never takes what every agent needs, nor what an agent's own list passes.
    #[test]
    fn built_in_allow_names_are_not_denied() {
        for agent in ["claude", "opencode", "codex", "aider"] {
            let env = EnvPolicy::for_agent(agent, &[]);
            for name in BASE.iter().chain(agent_patterns(agent)) {
                let name = sample(name);
                assert!(env.passes(OsStr::new(&name)), "{agent}: {name} dropped");
            }
        }
    }

    /// What landwall sets itself is added after the filter; none of it is denied either, so
    /// that `landwall policy` never shows a variable both set and denied.
    #[test]
    fn variables_landwall_sets_are_not_denied() {
        for agent in ["claude", "opencode", "codex", "aider"] {
            let env = EnvPolicy::for_agent(agent, &[]);
            let set = crate::profile::env_defaults(agent)
                .iter()
                .chain(crate::profile::strict_env(agent));
            for (name, _) in set {
                assert_eq!(env.deny_reason(OsStr::new(name)), None, "{agent}: {name}");
            }
        }
    }

    #[test]
    fn the_deny_table_is_well_formed() {
        let env = EnvPolicy::for_agent("claude", &[]);
        assert_eq!(env.denied().len(), DENY.len());
        for (i, (pattern, why)) in DENY.iter().enumerate() {
            let parsed = EnvPattern::parse(pattern).expect("a deny pattern parses");
            assert_eq!(&parsed.to_string(), pattern);
            assert_eq!(env.denied()[i], parsed);
            assert!(!why.is_empty(), "{pattern} has no reason");
            assert!(
                !DENY[..i].iter().any(|(p, _)| p == pattern),
                "{pattern} twice"
            );
        }
        assert_eq!(
            env.deny_reason(OsStr::new("GIT_SSH_COMMAND")),
            Some("the command git runs for every fetch and push over ssh")
        );
        assert!(env
            .deny_reason(OsStr::new("GIT_CONFIG_KEY_3"))
            .is_some_and(|why| why.contains("core.sshCommand")));
        assert_eq!(env.deny_reason(OsStr::new("PATH")), None);
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
