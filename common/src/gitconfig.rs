//! The files and directories inside the worktree that git's own configuration makes it read
//! as configuration or run: `core.hooksPath`, and the files `include.path` and
//! `includeIf.<condition>.path` pull in. A repository may name `../.gitconfig` (a config
//! shared in the repository) or `scripts/hooks`; the agent can write both, and git would
//! run what it put there on your next command. [`crate::protect`] protects what this finds.
//!
//! Read as git reads them: the system file, the global ones, the repository's config and
//! its `config.worktree`, each followed through its includes (at most [`MAX_DEPTH`] deep,
//! as git). Every `includeIf` counts whatever its condition (more protected, never less).
//! Read only, never run: git itself is not asked, since git reading the configuration can
//! run what it names. A file that cannot be read, or that git would reject, adds nothing
//! from the point where it cannot be read on (git refuses to run with a broken file).

use std::path::{Component, Path, PathBuf};

use crate::worktree::{GitLayout, Worktree};

/// git's own limit on nested includes.
const MAX_DEPTH: usize = 10;
/// The most of one configuration file that is read.
const MAX_FILE: u64 = 1 << 20;

/// What git's configuration names, as absolute paths (lexically normalized, not resolved).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// Every `core.hooksPath` value (any of them may be the one that wins).
    pub hooks: Vec<PathBuf>,
    /// Every file included.
    pub includes: Vec<PathBuf>,
}

/// The configuration files git reads for `worktree`, in git's order: system, global,
/// repository, worktree. `home` and `xdg` are `$HOME` and `$XDG_CONFIG_HOME`.
pub fn files(worktree: &Worktree, home: Option<&Path>, xdg: Option<&Path>) -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/etc/gitconfig")];
    match (xdg, home) {
        (Some(x), _) if x.is_absolute() => out.push(x.join("git/config")),
        (_, Some(h)) => out.push(h.join(".config/git/config")),
        _ => {}
    }
    if let Some(h) = home {
        out.push(h.join(".gitconfig"));
    }
    match &worktree.git {
        GitLayout::Main { git_dir } => {
            out.push(git_dir.join("config"));
            out.push(git_dir.join("config.worktree"));
        }
        GitLayout::Linked {
            git_dir,
            common_dir,
        } => {
            out.push(common_dir.as_ref().unwrap_or(git_dir).join("config"));
            out.push(git_dir.join("config.worktree"));
        }
        GitLayout::None => {}
    }
    out
}

/// What the configuration files `files` name, their includes followed. A relative
/// `core.hooksPath` is taken from `root` (the worktree's top level, where git runs hooks);
/// a relative include from the including file's directory; `~/` is `home`.
pub fn named(files: &[PathBuf], root: &Path, home: Option<&Path>) -> Named {
    let mut out = Named::default();
    let mut seen = Vec::new();
    for f in files {
        read(f, 0, root, home, &mut seen, &mut out);
    }
    out
}

fn read(
    file: &Path,
    depth: usize,
    root: &Path,
    home: Option<&Path>,
    seen: &mut Vec<PathBuf>,
    out: &mut Named,
) {
    if depth > MAX_DEPTH || seen.iter().any(|s| s == file) {
        return;
    }
    seen.push(file.to_path_buf());
    // Followed if a link (git follows it), never waited on if a FIFO.
    let Ok(text) = crate::read_regular_followed(file, MAX_FILE) else {
        return;
    };
    // Both keys looked for end in `path`, which no escape or continuation can split: a
    // file without it (most are) names nothing here and is not parsed (every launch reads
    // these files).
    if !text.windows(4).any(|w| w.eq_ignore_ascii_case(b"path")) {
        return;
    }
    for e in parse(&text) {
        let Some(value) = e.value else { continue };
        match (e.section.as_str(), e.sub.is_some(), e.key.as_str()) {
            ("core", false, "hookspath") => out.hooks.extend(expand(&value, root, home)),
            ("include", false, "path") | ("includeif", true, "path") => {
                let base = file.parent().unwrap_or(Path::new("/"));
                if let Some(p) = expand(&value, base, home) {
                    read(&p, depth + 1, root, home, seen, out);
                    out.includes.push(p);
                }
            }
            _ => {}
        }
    }
}

/// A path value as git expands it: `~/` from `home`, a relative one from `base`. `None` for
/// what is not understood here (`~user/`, `%(prefix)/`, empty).
fn expand(value: &str, base: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let p = if let Some(rest) = value.strip_prefix("~/") {
        home?.join(rest)
    } else if value.is_empty() || value.starts_with('~') || value.starts_with("%(") {
        return None;
    } else if Path::new(value).is_absolute() {
        PathBuf::from(value)
    } else {
        base.join(value)
    };
    Some(normalize(&p))
}

/// `.` and `..` taken out, as git does for these paths (lexically).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

/// One variable of a configuration file: section and key lower-cased, the subsection as
/// written, the value unquoted and unescaped (`None`: a bare key, boolean true).
#[derive(Debug, PartialEq, Eq)]
struct Entry {
    section: String,
    sub: Option<String>,
    key: String,
    value: Option<String>,
}

/// The variables of a git configuration file, in order, up to the first place git would
/// reject (git then refuses the whole file, so nothing after it matters).
fn parse(text: &[u8]) -> Vec<Entry> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut sub: Option<String> = None;
    // A UTF-8 byte order mark at the start is skipped, as git does.
    let mut i = if text.starts_with(b"\xef\xbb\xbf") {
        3
    } else {
        0
    };
    let at = |i: usize| text.get(i).copied();
    while let Some(c) = at(i) {
        match c {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'#' | b';' => {
                while at(i).is_some_and(|c| c != b'\n') {
                    i += 1;
                }
            }
            b'[' => {
                i += 1;
                let start = i;
                while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
                    i += 1;
                }
                let name = String::from_utf8_lossy(&text[start..i]).to_ascii_lowercase();
                while matches!(at(i), Some(b' ' | b'\t')) {
                    i += 1;
                }
                sub = None;
                if at(i) == Some(b'"') {
                    // [section "subsection"]: quotes and backslashes escaped.
                    i += 1;
                    let mut s = Vec::new();
                    loop {
                        match at(i) {
                            Some(b'"') => break,
                            Some(b'\\') => {
                                let Some(e) = at(i + 1).filter(|&e| e != b'\n') else {
                                    return out;
                                };
                                s.push(e);
                                i += 2;
                            }
                            Some(b'\n') | None => return out,
                            Some(c) => {
                                s.push(c);
                                i += 1;
                            }
                        }
                    }
                    i += 1;
                    sub = Some(String::from_utf8_lossy(&s).into_owned());
                    section = name;
                } else if let Some((s, rest)) = name.split_once('.') {
                    // [section.subsection], the old spelling.
                    sub = Some(rest.to_string());
                    section = s.to_string();
                } else {
                    section = name;
                }
                if at(i) != Some(b']') || section.is_empty() {
                    return out;
                }
                i += 1;
            }
            c if c.is_ascii_alphabetic() => {
                let start = i;
                while at(i).is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-') {
                    i += 1;
                }
                let key = String::from_utf8_lossy(&text[start..i]).to_ascii_lowercase();
                while matches!(at(i), Some(b' ' | b'\t')) {
                    i += 1;
                }
                let value = match at(i) {
                    Some(b'=') => {
                        i += 1;
                        match value(text, &mut i) {
                            Some(v) => Some(v),
                            None => return out,
                        }
                    }
                    None | Some(b'\n' | b'\r' | b'#' | b';') => None,
                    Some(_) => return out,
                };
                // (A variable before any section is read by git too, as one with an empty
                // section: it names nothing looked for here.)
                out.push(Entry {
                    section: section.clone(),
                    sub: sub.clone(),
                    key,
                    value,
                });
            }
            _ => return out,
        }
    }
    out
}

/// A value from just after its `=` to the end of its line (continued by a backslash at
/// the end of a line): leading and trailing unquoted blanks dropped, `"` quoting, `\\`,
/// `\"`, `\n`, `\t`, `\b` escapes, `#` and `;` starting a comment outside quotes. `None`
/// where git would reject it.
fn value(text: &[u8], i: &mut usize) -> Option<String> {
    let at = |i: usize| text.get(i).copied();
    let mut v = Vec::new();
    let mut blanks = Vec::new();
    let mut quoted = false;
    while matches!(at(*i), Some(b' ' | b'\t')) {
        *i += 1;
    }
    loop {
        match at(*i) {
            None => break,
            Some(b'\n') => {
                if quoted {
                    return None;
                }
                break;
            }
            Some(b'#' | b';') if !quoted => {
                while at(*i).is_some_and(|c| c != b'\n') {
                    *i += 1;
                }
                break;
            }
            Some(b' ' | b'\t' | b'\r') if !quoted => {
                blanks.push(text[*i]);
                *i += 1;
            }
            Some(b'\\') => {
                let e = match at(*i + 1)? {
                    b'\n' => {
                        *i += 2;
                        continue;
                    }
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'b' => 8,
                    b'\\' => b'\\',
                    b'"' => b'"',
                    _ => return None,
                };
                v.append(&mut blanks);
                v.push(e);
                *i += 2;
            }
            Some(b'"') => {
                v.append(&mut blanks);
                quoted = !quoted;
                *i += 1;
            }
            Some(c) => {
                v.append(&mut blanks);
                v.push(c);
                *i += 1;
            }
        }
    }
    if quoted {
        return None;
    }
    Some(String::from_utf8_lossy(&v).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(section: &str, sub: Option<&str>, key: &str, value: Option<&str>) -> Entry {
        Entry {
            section: section.into(),
            sub: sub.map(Into::into),
            key: key.into(),
            value: value.map(Into::into),
        }
    }

    #[test]
    fn parses_what_git_writes_and_what_people_write() {
        let text = br#"
# a comment
[core]
	bare = false
	hooksPath = "scripts/hooks" ; why
[include]
	path = ../.gitconfig
[includeIf "gitdir:~/work/"]
	path = ~/.gitconfig-work
[Remote "Origin"] url = a\"b#x
[alias.x] y
[user]
	name = "  spaced  "  
	note = a \
	  continued
"#;
        assert_eq!(
            parse(text),
            vec![
                e("core", None, "bare", Some("false")),
                e("core", None, "hookspath", Some("scripts/hooks")),
                e("include", None, "path", Some("../.gitconfig")),
                e(
                    "includeif",
                    Some("gitdir:~/work/"),
                    "path",
                    Some("~/.gitconfig-work")
                ),
                e("remote", Some("Origin"), "url", Some("a\"b")),
                e("alias", Some("x"), "y", None),
                e("user", None, "name", Some("  spaced  ")),
                e("user", None, "note", Some("a \t  continued")),
            ]
        );
    }

    #[test]
    fn stops_where_git_would_reject_the_file() {
        assert_eq!(
            parse(b"[core]\n\ta = 1\n\tb = \"open\n[include]\n\tpath = x\n"),
            vec![e("core", None, "a", Some("1"))]
        );
        assert_eq!(
            parse(b"[core]\n\tx = a\\q\n[include]\n\tpath = y\n"),
            vec![]
        );
    }

    #[test]
    fn reads_on_where_git_reads_on() {
        // Each checked against `git config -f FILE --list` (git 2.47).
        assert_eq!(
            parse(b"path = x\n[include]\npath = y\n"),
            vec![
                e("", None, "path", Some("x")),
                e("include", None, "path", Some("y"))
            ]
        );
        assert_eq!(
            parse(b"\xef\xbb\xbf[include]\r\n\tpath = y\r\n"),
            vec![e("include", None, "path", Some("y"))]
        );
        assert_eq!(
            parse(b"[core]\n\tx = \"a\\\n b\"\n[include] path = y # c\n"),
            vec![
                e("core", None, "x", Some("a b")),
                e("include", None, "path", Some("y"))
            ]
        );
    }

    #[test]
    fn includes_are_followed_relative_to_the_including_file() {
        let t = crate::testutil::Scratch::new("gitconfig");
        let root = t.0.join("wt");
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("more")).expect("mkdir");
        std::fs::write(
            git.join("config"),
            "[include]\n\tpath = ../.gitconfig\n[includeIf \"onbranch:x\"]\n\tpath = more/c\n",
        )
        .expect("write");
        std::fs::write(
            git.join("more/c"),
            "[core]\n\thooksPath = ./tools/../hooks/\n",
        )
        .expect("write");
        std::fs::write(root.join(".gitconfig"), "[include]\n\tpath = .git/config\n")
            .expect("write");
        let home = t.0.join("home");
        let n = named(&[git.join("config")], &root, Some(&home));
        assert_eq!(n.hooks, vec![root.join("hooks")]);
        assert_eq!(
            n.includes,
            vec![
                root.join(".git/config"),
                root.join(".gitconfig"),
                git.join("more/c")
            ]
        );
    }

    #[test]
    fn a_fifo_is_not_waited_on() {
        let t = crate::testutil::Scratch::new("gitconfig-fifo");
        let fifo = t.0.join("config");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        assert_eq!(named(&[fifo], &t.0, None), Named::default());
    }
}
