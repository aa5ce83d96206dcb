//! Configuration: parse the TOML files into raw structs, then validate them into a [`Config`].
//!
//! Invariants of a [`Config`]: every path is absolute, every environment pattern is a valid
//! name or `PREFIX*`, and the minimum ABI is one landwall knows. Unknown keys and wrong types
//! are errors that name the file, the line and the key: a typo in a security policy must never
//! be read as "use the default".

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::env::EnvPattern;

/// Where the system configuration lives unless `LANDWALL_CONFIG` says otherwise.
pub const SYSTEM_CONFIG: &str = "/etc/landwall/landwall.toml";

/// The lowest Landlock ABI that enforces everything the default policy promises.
///
/// ABI 2 adds REFER (git renames its temporary object and ref files across directories, which
/// ABI 1 refuses outright); ABI 3 adds TRUNCATE, without which a "read-only" file can still be
/// emptied with `truncate(2)` by any user who owns it. ABI 3 is the first where read-only
/// really means read-only.
pub const DEFAULT_MIN_ABI: u32 = 3;

/// The highest ABI number landwall understands (kernel 7.2, UDP rules).
pub const MAX_KNOWN_ABI: u32 = 10;

/// A configuration error, printed as `FILE:LINE: message`.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("{}: cannot read: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Bad TOML, an unknown key, a wrong type, or a value that fails validation.
    #[error("{}{}: {message}", path.display(), line.map(|l| format!(":{l}")).unwrap_or_default())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the offending key or value, when known.
        line: Option<usize>,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Per-agent settings (`[agents.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentConfig {
    /// Explicit path of the real agent; when set it wins over any lookup on PATH.
    pub real: Option<PathBuf>,
    /// Extra read-only paths for this agent.
    pub read_only: Vec<PathBuf>,
    /// Extra writable paths for this agent.
    pub writable: Vec<PathBuf>,
    /// Extra environment names and `PREFIX*` patterns for this agent.
    pub env_allow: Vec<EnvPattern>,
}

/// The validated configuration: system file plus the optional per-user file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Refuse to launch on kernels whose Landlock ABI is below this.
    pub min_abi: u32,
    /// Extra read-only paths for every agent.
    pub read_only: Vec<PathBuf>,
    /// Extra writable paths for every agent.
    pub writable: Vec<PathBuf>,
    /// Extra environment names and patterns for every agent.
    pub env_allow: Vec<EnvPattern>,
    /// Per-agent sections.
    pub agents: BTreeMap<String, AgentConfig>,
    /// The files that were read, in order (for `doctor` and error messages).
    pub sources: Vec<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            min_abi: DEFAULT_MIN_ABI,
            read_only: Vec::new(),
            writable: Vec::new(),
            env_allow: Vec::new(),
            agents: BTreeMap::new(),
            sources: Vec::new(),
        }
    }
}

impl Config {
    /// The section for `agent`, or an empty one.
    pub fn agent(&self, agent: &str) -> AgentConfig {
        self.agents.get(agent).cloned().unwrap_or_default()
    }
}

/// Where the configuration files are, from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPaths {
    /// The system file (`LANDWALL_CONFIG` or [`SYSTEM_CONFIG`]).
    pub system: PathBuf,
    /// The per-user file, if `XDG_CONFIG_HOME` or `HOME` names where it would be.
    pub user: Option<PathBuf>,
}

impl ConfigPaths {
    /// Derives the paths from `LANDWALL_CONFIG`, `XDG_CONFIG_HOME` and `HOME`.
    pub fn from_env(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> ConfigPaths {
        let system = lookup("LANDWALL_CONFIG")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(SYSTEM_CONFIG));
        let user_base = lookup("XDG_CONFIG_HOME")
            .filter(|v| Path::new(v).is_absolute())
            .map(PathBuf::from)
            .or_else(|| {
                lookup("HOME")
                    .filter(|v| Path::new(v).is_absolute())
                    .map(|h| PathBuf::from(h).join(".config"))
            });
        ConfigPaths {
            system,
            user: user_base.map(|b| b.join("landwall").join("landwall.toml")),
        }
    }
}

/// Loads the system file, then lets the per-user file add to it. A missing file is not an
/// error (the seeds' default policy applies); an unreadable or invalid one is.
pub fn load(paths: &ConfigPaths) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    if let Some(text) = read_optional(&paths.system)? {
        let raw = parse(&paths.system, &text)?;
        merge(&mut config, raw, &paths.system, &text, Origin::System)?;
        config.sources.push(paths.system.clone());
    }
    if let Some(user) = &paths.user {
        if let Some(text) = read_optional(user)? {
            let raw = parse(user, &text)?;
            merge(&mut config, raw, user, &text, Origin::User)?;
            config.sources.push(user.clone());
        }
    }
    Ok(config)
}

/// Parses and validates one file's text on its own (for tests and `doctor`).
pub fn from_str(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let mut config = Config::default();
    let raw = parse(path, text)?;
    merge(&mut config, raw, path, text, Origin::System)?;
    config.sources.push(path.to_path_buf());
    Ok(config)
}

fn read_optional(path: &Path) -> Result<Option<String>, ConfigError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ConfigError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    min_abi: Option<Spanned<u32>>,
    #[serde(default)]
    read_only: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    writable: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    env_allow: Vec<Spanned<String>>,
    #[serde(default)]
    agents: BTreeMap<String, RawAgent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    real: Option<Spanned<PathBuf>>,
    #[serde(default)]
    read_only: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    writable: Vec<Spanned<PathBuf>>,
    #[serde(default)]
    env_allow: Vec<Spanned<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    System,
    User,
}

fn parse(path: &Path, text: &str) -> Result<RawConfig, ConfigError> {
    toml::from_str::<RawConfig>(text).map_err(|e| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: e.span().map(|s| line_of(text, s.start)),
        message: format!("{} (see the configuration reference in the README)", {
            e.message().trim_end()
        }),
    })
}

fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

struct Validator<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Validator<'_> {
    fn err<T>(
        &self,
        span: std::ops::Range<usize>,
        message: impl fmt::Display,
    ) -> Result<T, ConfigError> {
        Err(ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line: Some(line_of(self.text, span.start)),
            message: message.to_string(),
        })
    }

    fn paths(&self, key: &str, values: Vec<Spanned<PathBuf>>) -> Result<Vec<PathBuf>, ConfigError> {
        values
            .into_iter()
            .map(|v| {
                let span = v.span();
                let p = v.into_inner();
                if !p.is_absolute() {
                    return self.err(
                        span,
                        format!(
                            "`{key}`: `{}` is not an absolute path; write it from `/`",
                            p.display()
                        ),
                    );
                }
                Ok(p)
            })
            .collect()
    }

    fn patterns(
        &self,
        key: &str,
        values: Vec<Spanned<String>>,
    ) -> Result<Vec<EnvPattern>, ConfigError> {
        values
            .into_iter()
            .map(|v| {
                let span = v.span();
                EnvPattern::parse(v.get_ref())
                    .or_else(|why| self.err(span, format!("`{key}`: `{}` {why}", v.get_ref())))
            })
            .collect()
    }
}

fn merge(
    config: &mut Config,
    raw: RawConfig,
    path: &Path,
    text: &str,
    origin: Origin,
) -> Result<(), ConfigError> {
    let v = Validator { path, text };
    if let Some(min) = raw.min_abi {
        let span = min.span();
        let value = *min.get_ref();
        if !(1..=MAX_KNOWN_ABI).contains(&value) {
            return v.err(
                span,
                format!("`min_abi` must be between 1 and {MAX_KNOWN_ABI}, not {value}"),
            );
        }
        config.min_abi = match origin {
            Origin::System => value,
            // The per-user file is writable by the agent under the default policy: it may
            // raise the floor, never lower it.
            Origin::User => config.min_abi.max(value),
        };
    }
    config
        .read_only
        .extend(v.paths("read_only", raw.read_only)?);
    config.writable.extend(v.paths("writable", raw.writable)?);
    config
        .env_allow
        .extend(v.patterns("env_allow", raw.env_allow)?);
    for (name, agent) in raw.agents {
        if !valid_agent_name(&name) {
            return Err(ConfigError::Invalid {
                path: path.to_path_buf(),
                line: text.find(&format!("agents.{name}")).map(|o| line_of(text, o)),
                message: format!("`[agents.{name}]`: an agent name is a program name (letters, digits, `-`, `_`, `.`)"),
            });
        }
        let entry = config.agents.entry(name).or_default();
        if let Some(real) = agent.real {
            let span = real.span();
            let p = real.into_inner();
            if !p.is_absolute() {
                return v.err(
                    span,
                    format!("`real`: `{}` is not an absolute path", p.display()),
                );
            }
            entry.real = Some(p);
        }
        entry
            .read_only
            .extend(v.paths("read_only", agent.read_only)?);
        entry.writable.extend(v.paths("writable", agent.writable)?);
        entry
            .env_allow
            .extend(v.patterns("env_allow", agent.env_allow)?);
    }
    Ok(())
}

/// Whether `name` can be an agent (a program name with no path separator).
pub fn valid_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn empty_file_is_the_default_policy() {
        let c = from_str(&p("/x.toml"), "").expect("empty config is valid");
        assert_eq!(c.min_abi, DEFAULT_MIN_ABI);
        assert!(c.read_only.is_empty() && c.writable.is_empty() && c.agents.is_empty());
    }

    #[test]
    fn full_example_parses() {
        let text = r#"
min_abi = 4
read_only = ["/srv/data"]
writable = ["/var/cache/ccache"]
env_allow = ["MY_TOKEN", "CI_*"]

[agents.claude]
real = "/opt/claude/bin/claude"
writable = ["/var/tmp/claude"]
env_allow = ["AWS_REGION"]
"#;
        let c = from_str(&p("/x.toml"), text).expect("valid");
        assert_eq!(c.min_abi, 4);
        assert_eq!(c.read_only, vec![p("/srv/data")]);
        let claude = c.agent("claude");
        assert_eq!(claude.real, Some(p("/opt/claude/bin/claude")));
        assert_eq!(claude.writable, vec![p("/var/tmp/claude")]);
        assert_eq!(claude.env_allow.len(), 1);
        assert_eq!(c.agent("codex"), AgentConfig::default());
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let e =
            from_str(&p("/etc/l.toml"), "min_abi = 3\nwritabel = [\"/x\"]\n").expect_err("typo");
        let msg = e.to_string();
        assert!(msg.starts_with("/etc/l.toml:2: "), "{msg}");
        assert!(msg.contains("writabel"), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg}");
    }

    #[test]
    fn unknown_key_in_agent_section_is_an_error() {
        let e = from_str(&p("/c"), "[agents.claude]\nreal_path = \"/x\"\n").expect_err("unknown");
        assert!(e.to_string().starts_with("/c:2: "), "{e}");
    }

    #[test]
    fn wrong_type_is_an_error() {
        let e = from_str(&p("/c"), "\nmin_abi = \"three\"\n").expect_err("type");
        assert!(e.to_string().starts_with("/c:2: "), "{e}");
    }

    #[test]
    fn relative_path_is_refused_with_its_line() {
        let e = from_str(&p("/c"), "read_only = [\n  \"/ok\",\n  \"rel/path\",\n]\n")
            .expect_err("relative");
        let msg = e.to_string();
        assert!(msg.starts_with("/c:3: "), "{msg}");
        assert!(msg.contains("rel/path"), "{msg}");
    }

    #[test]
    fn bad_env_pattern_is_refused() {
        for bad in ["\"A*B\"", "\"\"", "\"*\"", "\"HAS SPACE\""] {
            let text = format!("env_allow = [{bad}]\n");
            assert!(from_str(&p("/c"), &text).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn min_abi_range_is_checked() {
        assert!(from_str(&p("/c"), "min_abi = 0").is_err());
        assert!(from_str(&p("/c"), "min_abi = 11").is_err());
        assert!(from_str(&p("/c"), "min_abi = 1").is_ok());
    }

    #[test]
    fn bad_agent_name_is_refused() {
        assert!(from_str(&p("/c"), "[agents.\"../x\"]\n").is_err());
    }

    #[test]
    fn user_file_adds_and_cannot_lower_the_floor() {
        let dir = std::env::temp_dir().join(format!("lw-config-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("u/landwall")).expect("mkdir");
        std::fs::write(dir.join("sys.toml"), "min_abi = 5\nwritable = [\"/a\"]\n").expect("write");
        std::fs::write(
            dir.join("u/landwall/landwall.toml"),
            "min_abi = 1\nwritable = [\"/b\"]\n",
        )
        .expect("write");
        let paths = ConfigPaths {
            system: dir.join("sys.toml"),
            user: Some(dir.join("u/landwall/landwall.toml")),
        };
        let c = load(&paths).expect("valid");
        assert_eq!(c.min_abi, 5);
        assert_eq!(c.writable, vec![p("/a"), p("/b")]);
        assert_eq!(c.sources.len(), 2);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn missing_files_mean_defaults() {
        let paths = ConfigPaths {
            system: p("/nonexistent/landwall.toml"),
            user: Some(p("/nonexistent/user.toml")),
        };
        let c = load(&paths).expect("defaults");
        assert_eq!(c, Config::default());
    }

    #[test]
    fn paths_from_env() {
        let env = |k: &str| match k {
            "LANDWALL_CONFIG" => Some("/t/c.toml".into()),
            "HOME" => Some("/home/u".into()),
            _ => None,
        };
        let paths = ConfigPaths::from_env(env);
        assert_eq!(paths.system, p("/t/c.toml"));
        assert_eq!(
            paths.user,
            Some(p("/home/u/.config/landwall/landwall.toml"))
        );
        let xdg = |k: &str| (k == "XDG_CONFIG_HOME").then(|| "/x".into());
        let paths = ConfigPaths::from_env(xdg);
        assert_eq!(paths.system, p(SYSTEM_CONFIG));
        assert_eq!(paths.user, Some(p("/x/landwall/landwall.toml")));
    }
}
