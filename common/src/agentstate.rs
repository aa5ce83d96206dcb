//! The agents' state that names programs to run, beside what they must write.
//!
//! The files and directories of it that hold only such names are protected paths
//! ([`crate::profile::agent_code`], [`crate::protect::agent_state`]); [`commands`] lists what
//! one names, for `landwall doctor`. Claude Code's `.claude.json` mixes what the agent must write (counters, tips shown, the
//! state of each project it rewrites at every start) with what names the commands it runs:
//! MCP servers, user-wide and per project, and which of a project's `.mcp.json` servers are
//! approved. Held read-only, the agent would not start; left as it is, an agent in one project
//! could name a server that the next launch in another project starts.
//!
//! So the file stays writable, and its command-bearing keys ([`TOP`], [`PROJECT`]) are the
//! user's: under the private and read-only homes the agent's copy is
//! `$CLAUDE_CONFIG_DIR/.claude.json` (the shim sets `CLAUDE_CONFIG_DIR=~/.claude`), and
//! `~/.claude.json`, which Claude Code run without the shim reads, is the user's, out of the
//! agent's reach. At every launch, before the wall goes up, the agent's copy is compared with
//! the user's file: a command-bearing key that differs is put back as the user's file has it
//! (or removed where it has none), the rest of the file kept, and each one is said. A copy
//! that cannot be read as JSON is set aside whole: what cannot be judged is hostile (Claude
//! Code makes a new one).
//!
//! What the user loses: MCP servers added from inside the wall (`claude mcp add`, the `/mcp`
//! dialog) do not stay; add them outside it, where they belong to every launch.

use std::ffi::{CString, OsStr};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// Top-level keys that name commands: MCP servers of every project (user scope).
pub const TOP: &[&str] = &["mcpServers"];

/// Keys of each `projects.<path>` entry that name or approve commands: the project's MCP
/// servers (local scope) and which of its `.mcp.json` servers run without asking.
pub const PROJECT: &[&str] = &[
    "mcpServers",
    "enabledMcpjsonServers",
    "disabledMcpjsonServers",
    "enableAllProjectMcpServers",
];

/// The largest file read: Claude Code's own grows with the projects it has seen.
const MAX_BYTES: u64 = 64 << 20;

/// The file's name in Claude Code's configuration directory (or `$HOME`).
pub const NAME: &str = ".claude.json";

/// The older name Claude Code reads first, in its configuration directory, where it exists
/// (found by review): the same keys, the same judgement.
pub const OLD_NAME: &str = ".config.json";

/// What [`guard`] did to the agent's copy.
#[derive(Debug, PartialEq, Eq)]
pub enum Guarded {
    /// Nothing differed (or there is no copy yet).
    Same,
    /// These keys were put back (`mcpServers`, `projects["/p"].mcpServers`).
    PutBack(Vec<String>),
    /// It could not be read as JSON: set aside to this path.
    SetAside(PathBuf),
}

/// The command-bearing keys of one file, in a form to compare and to write back.
#[derive(Debug, Default, PartialEq)]
struct Keys {
    top: Vec<(&'static str, Value)>,
    /// Per project path: the keys it has.
    projects: Vec<(String, Vec<(&'static str, Value)>)>,
}

fn keys_of(v: &Value) -> Keys {
    let mut k = Keys::default();
    let Some(obj) = v.as_object() else {
        return k;
    };
    for name in TOP {
        if let Some(x) = obj.get(*name) {
            k.top.push((name, x.clone()));
        }
    }
    if let Some(projects) = obj.get("projects").and_then(Value::as_object) {
        for (path, p) in projects {
            let Some(p) = p.as_object() else { continue };
            let found: Vec<(&'static str, Value)> = PROJECT
                .iter()
                .filter_map(|name| p.get(*name).map(|x| (*name, x.clone())))
                .collect();
            if !found.is_empty() {
                k.projects.push((path.clone(), found));
            }
        }
    }
    k
}

/// [`keys_of`] without building the rest of the file: only the command-bearing keys are
/// parsed, the rest skipped (a `.claude.json` grows to megabytes with the projects it has
/// seen, and is read at every launch). A project named twice is the last one, as Claude
/// Code's `JSON.parse` takes it. `None` where this reading cannot be sure (not an object, a
/// key given twice): then the whole file is parsed.
fn fast_keys(text: &[u8]) -> Option<Keys> {
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    #[derive(Deserialize)]
    struct Top<'a> {
        #[serde(rename = "mcpServers", borrow, default)]
        mcp_servers: Option<&'a RawValue>,
        #[serde(borrow, default)]
        projects: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
    }
    #[derive(Deserialize)]
    struct Project<'a> {
        #[serde(rename = "mcpServers", borrow, default)]
        mcp_servers: Option<&'a RawValue>,
        #[serde(rename = "enabledMcpjsonServers", borrow, default)]
        enabled: Option<&'a RawValue>,
        #[serde(rename = "disabledMcpjsonServers", borrow, default)]
        disabled: Option<&'a RawValue>,
        #[serde(rename = "enableAllProjectMcpServers", borrow, default)]
        all: Option<&'a RawValue>,
    }
    fn value(r: &RawValue) -> Option<Value> {
        serde_json::from_str(r.get()).ok()
    }
    // A struct reads from an array too: only an object is one.
    let is_object = |t: &[u8]| t.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !is_object(text) {
        return None;
    }
    let top: Top<'_> = serde_json::from_slice(text).ok()?;
    let mut k = Keys::default();
    if let Some(r) = top.mcp_servers {
        k.top.push(("mcpServers", value(r)?));
    }
    for (path, raw) in top.projects.unwrap_or_default() {
        // Not an object: no keys (as the whole parse reads it).
        if !is_object(raw.get().as_bytes()) {
            continue;
        }
        let p: Project<'_> = serde_json::from_str(raw.get()).ok()?;
        let mut found = Vec::new();
        for (name, r) in PROJECT
            .iter()
            .zip([p.mcp_servers, p.enabled, p.disabled, p.all])
        {
            if let Some(r) = r {
                found.push((*name, value(r)?));
            }
        }
        if !found.is_empty() {
            k.projects.push((path.into_owned(), found));
        }
    }
    Some(k)
}

/// Every command-bearing key `v` holds, named for a person (`projects["/p"].mcpServers`),
/// with its value as JSON (for `landwall doctor`).
pub fn listed(v: &Value) -> Vec<(String, String)> {
    let k = keys_of(v);
    let mut out: Vec<(String, String)> = k
        .top
        .iter()
        .map(|(n, x)| (n.to_string(), x.to_string()))
        .collect();
    for (path, found) in &k.projects {
        for (n, x) in found {
            out.push((
                format!("projects[{}].{n}", Value::from(path.as_str())),
                x.to_string(),
            ));
        }
    }
    out
}

/// Makes the command-bearing keys of `agent` those of `user`; returns the names of those
/// that changed.
fn put_back(agent: &mut Value, user: &Keys) -> Vec<String> {
    let mut changed = Vec::new();
    let Some(obj) = agent.as_object_mut() else {
        return changed;
    };
    for name in TOP {
        let want = user.top.iter().find(|(n, _)| n == name).map(|(_, x)| x);
        if obj.get(*name) != want {
            match want {
                Some(x) => obj.insert(name.to_string(), x.clone()),
                None => obj.remove(*name),
            };
            changed.push(name.to_string());
        }
    }
    let mut paths: Vec<String> = user.projects.iter().map(|(p, _)| p.clone()).collect();
    if let Some(projects) = obj.get("projects").and_then(Value::as_object) {
        paths.extend(projects.keys().cloned());
    }
    paths.sort();
    paths.dedup();
    for path in paths {
        let theirs = user
            .projects
            .iter()
            .find(|(p, _)| *p == path)
            .map(|(_, f)| f);
        let projects = obj
            .entry("projects")
            .or_insert_with(|| Value::Object(Map::new()));
        if !projects.is_object() {
            *projects = Value::Object(Map::new());
        }
        let Some(projects) = projects.as_object_mut() else {
            continue;
        };
        let entry = projects
            .entry(path.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        let Some(entry) = entry.as_object_mut() else {
            continue;
        };
        for name in PROJECT {
            let want = theirs.and_then(|f| f.iter().find(|(n, _)| n == name).map(|(_, x)| x));
            if entry.get(*name) != want {
                match want {
                    Some(x) => entry.insert(name.to_string(), x.clone()),
                    None => entry.remove(*name),
                };
                changed.push(format!("projects[{}].{name}", Value::from(path.as_str())));
            }
        }
    }
    changed
}

/// Opens `name` in `dir` for reading, never following a link; `None` if it is absent.
fn open_in(dir: &OwnedFd, name: &OsStr) -> io::Result<Option<std::fs::File>> {
    use nix::fcntl::{openat, OFlag};
    match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        nix::sys::stat::Mode::empty(),
    ) {
        Ok(fd) => Ok(Some(std::fs::File::from(fd))),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The length of `f`, which must be a regular file of at most [`MAX_BYTES`].
fn bounded_len(f: &std::fs::File) -> io::Result<usize> {
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    if meta.len() > MAX_BYTES {
        return Err(io::Error::other(format!(
            "larger than {} MiB",
            MAX_BYTES >> 20
        )));
    }
    usize::try_from(meta.len()).map_err(io::Error::other)
}

/// Reads a regular file of bounded size.
fn read_bounded(mut f: std::fs::File) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(bounded_len(&f)?);
    Read::by_ref(&mut f)
        .take(MAX_BYTES + 1)
        .read_to_end(&mut buf)?;
    Ok(buf)
}

/// Reads the user's `.claude.json` (`user`, outside the agent's reach): its command-bearing
/// keys, none where it is absent. One that cannot be read is an error: the agent's copy
/// would be judged against nothing.
fn user_keys(user: &Path) -> io::Result<Keys> {
    let text = match std::fs::File::open(user) {
        Ok(f) => read_bounded(f)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Keys::default()),
        Err(e) => return Err(e),
    };
    if let Some(k) = fast_keys(&text) {
        return Ok(k);
    }
    let v: Value = serde_json::from_slice(&text).map_err(io::Error::other)?;
    Ok(keys_of(&v))
}

/// Makes the command-bearing keys of `config_dir/.claude.json` (the agent's copy) those of
/// `user` (the user's own `.claude.json`), as the module says. `config_dir` is opened
/// without following a link at its last component; the copy is replaced by a rename in it,
/// so a reader sees the old file or the new one whole.
pub fn guard(config_dir: &Path, name: &str, user: &Path) -> io::Result<Guarded> {
    let dir_c = CString::new(config_dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let dir = crate::sys::open_no_symlinks(None, &dir_c, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let name = OsStr::new(name);
    let Some(file) = open_in(&dir, name)? else {
        return Ok(Guarded::Same);
    };
    let mode = file.metadata()?.permissions();
    let text = read_bounded(file);
    let user = user_keys(user)?;
    // Usually nothing differs: said without parsing the whole file.
    if let Some(k) = text.as_ref().ok().and_then(|t| fast_keys(t)) {
        if k == user {
            return Ok(Guarded::Same);
        }
    }
    let parsed = text
        .as_ref()
        .ok()
        .and_then(|t| serde_json::from_slice::<Value>(t).ok())
        .filter(Value::is_object);
    let Some(mut agent) = parsed else {
        let aside = crate::rename_aside(dir.as_fd(), name, name)?;
        return Ok(Guarded::SetAside(config_dir.join(aside)));
    };
    if keys_of(&agent) == user {
        return Ok(Guarded::Same);
    }
    let changed = put_back(&mut agent, &user);
    if changed.is_empty() {
        return Ok(Guarded::Same);
    }
    let mut out = serde_json::to_vec_pretty(&agent).map_err(io::Error::other)?;
    out.push(b'\n');
    write_replacing(
        &dir,
        name,
        &out,
        std::os::unix::fs::PermissionsExt::mode(&mode),
    )?;
    Ok(Guarded::PutBack(changed))
}

/// How a launch's private copy of a state file is judged ([`judge_bytes`], [`merge`]).
#[derive(Debug, Clone, Copy)]
pub enum Judge<'a> {
    /// Claude Code's `.claude.json`: its command-bearing keys made those of the user's file.
    Claude {
        /// The user's `~/.claude.json`.
        user: &'a Path,
    },
    /// OpenCode's `auth.json`: its sign-ins as they were at the launch's start, but for the
    /// tokens OpenCode refreshes ([`fix_auth`]).
    Auth {
        /// Its entries then.
        start: &'a Map<String, Value>,
    },
}

impl Judge<'_> {
    /// Makes `v` (an object) what this judgement allows; returns what it changed.
    fn fix(self, v: &mut Value) -> io::Result<Vec<String>> {
        match self {
            Judge::Claude { user } => Ok(put_back(v, &user_keys(user)?)),
            Judge::Auth { start } => Ok(fix_auth(v, start)),
        }
    }
}

/// Whether a JSON value is of the kind a field holds.
type Kind = fn(&Value) -> bool;

/// The fields of an `oauth` sign-in in OpenCode's `auth.json` that OpenCode rewrites when it
/// refreshes it, with the kind of value each holds: the tokens, and the account id its
/// ChatGPT sign-in reads out of a refreshed token (an id, never an address).
const REFRESHED: &[(&str, Kind)] = &[
    ("access", Value::is_string),
    ("refresh", Value::is_string),
    ("expires", Value::is_number),
    ("accountId", Value::is_string),
];

/// Makes OpenCode's `auth.json` (`v`) what `start` (its entries when the launch began) allows:
/// every entry as it was, but the refreshed tokens ([`REFRESHED`]) of an `oauth` sign-in that
/// was there. An entry that was not there is removed, a field of one that was is put back; an
/// entry removed stays removed (a sign-out reaches nothing). Each entry names where OpenCode
/// sends its requests, and with what: a `wellknown` one the address it fetches its
/// configuration from (MCP commands, plugins), a `github-copilot` sign-in its
/// `enterpriseUrl`, an API key the account its requests (the user's code) go to. Returns what
/// was changed: each entry's key as JSON, with the field (`"github-copilot".enterpriseUrl`).
fn fix_auth(v: &mut Value, start: &Map<String, Value>) -> Vec<String> {
    let mut changed = Vec::new();
    let Some(o) = v.as_object_mut() else {
        return changed;
    };
    o.retain(|k, e| {
        let named = Value::from(k.as_str()).to_string();
        let Some(was) = start.get(k) else {
            changed.push(named);
            return false;
        };
        if e == was {
            return true;
        }
        let oauth = |x: &Value| x.get("type").and_then(Value::as_str) == Some("oauth");
        let (Some(now), Some(mut fixed), true) = (
            e.as_object(),
            was.as_object().cloned(),
            oauth(e) && oauth(was),
        ) else {
            changed.push(named);
            *e = was.clone();
            return true;
        };
        for (field, kind) in REFRESHED {
            if let Some(x) = now.get(*field).filter(|x| kind(x)) {
                fixed.insert((*field).to_string(), x.clone());
            }
        }
        let mut fields: Vec<&String> = now.keys().chain(fixed.keys()).collect();
        fields.sort();
        fields.dedup();
        for f in fields {
            if now.get(f) != fixed.get(f) {
                changed.push(format!("{named}.{f}"));
            }
        }
        *e = Value::Object(fixed);
        true
    });
    changed
}

/// `text` (a private copy) made what `judge` allows: the new content and what was changed,
/// or `None` if nothing had to be. A `text` that is not a JSON object becomes `{}` (changed:
/// `*`): what cannot be judged is not kept.
pub fn judge_bytes(text: &[u8], judge: Judge<'_>) -> io::Result<Option<(Vec<u8>, Vec<String>)>> {
    if let Judge::Claude { user } = judge {
        if fast_keys(text).is_some_and(|k| user_keys(user).is_ok_and(|u| k == u)) {
            return Ok(None);
        }
    }
    let mut v = match serde_json::from_slice::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => return Ok(Some((b"{}\n".to_vec(), vec!["*".to_string()]))),
    };
    let changed = judge.fix(&mut v)?;
    if changed.is_empty() {
        return Ok(None);
    }
    let mut out = serde_json::to_vec_pretty(&v).map_err(io::Error::other)?;
    out.push(b'\n');
    Ok(Some((out, changed)))
}

/// Replaces the whole content of the file `fd` is open on (read-write) with `bytes`.
pub fn write_fd(fd: std::os::fd::BorrowedFd<'_>, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(fd.try_clone_to_owned()?);
    f.set_len(0)?;
    f.write_all_at(bytes, 0)
}

/// What [`merge`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Merged {
    /// What the agent changed is in the shared file, nothing of it put back.
    Kept,
    /// As [`Merged::Kept`], with these command-bearing keys put back as the user has them.
    PutBack(Vec<String>),
    /// The agent's copy is not a JSON object: nothing of it was kept.
    NotJson,
}

/// The whole content of the file `fd` is open on, read from its start (a launch's private
/// copy, [`crate::protect::Hold::Private`]): bounded, and only a regular file.
pub fn read_fd(fd: std::os::fd::BorrowedFd<'_>) -> io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::from(fd.try_clone_to_owned()?);
    let mut buf = vec![0u8; bounded_len(&f)?];
    let mut at = 0;
    while at < buf.len() {
        match f.read_at(&mut buf[at..], at as u64) {
            Ok(0) => break,
            Ok(n) => at += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(at);
    Ok(buf)
}

/// Brings what an agent changed in its private copy of a state file (`base` when its
/// launch began, `ours` now) into the shared file `name` in `dir`, as other sessions left it
/// meanwhile: each top-level key, and each entry of `projects`, that the agent changed is
/// taken from `ours`, every other from the shared file; it is made what `judge` allows
/// (Claude Code's in the result, OpenCode's in what the agent changed, before), and the
/// result replaces the shared file (a rename, so a reader sees the old file or the new one
/// whole). A shared file that is absent or not JSON counts as `base`.
pub fn merge(
    dir: &Path,
    name: &str,
    judge: Judge<'_>,
    base: &[u8],
    ours: &[u8],
) -> io::Result<Merged> {
    let object = |t: &[u8]| {
        serde_json::from_slice::<Value>(t)
            .ok()
            .and_then(|v| match v {
                Value::Object(m) => Some(m),
                _ => None,
            })
    };
    let Some(ours) = object(ours) else {
        return Ok(Merged::NotJson);
    };
    let base = object(base).unwrap_or_default();
    // OpenCode's sign-ins are judged in what the agent changed, against what its copy held
    // at the start (judged against the shared file then): a sign-in the user made meanwhile
    // outside the wall, in the shared file, is the user's and stays. Claude Code's keys are
    // judged in the result, against the user's own file.
    let (ours, mut changed) = match judge {
        Judge::Auth { .. } => {
            let mut v = Value::Object(ours);
            let changed = fix_auth(&mut v, &base);
            match v {
                Value::Object(m) => (m, changed),
                _ => return Ok(Merged::NotJson),
            }
        }
        Judge::Claude { .. } => (ours, Vec::new()),
    };
    let dir_c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = crate::sys::open_no_symlinks(None, &dir_c, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let name = OsStr::new(name);
    let (theirs, mode) = match open_in(&fd, name)? {
        Some(f) => {
            let mode = std::os::unix::fs::PermissionsExt::mode(&f.metadata()?.permissions());
            let text = read_bounded(f).ok();
            (text.as_deref().and_then(object), mode)
        }
        None => (None, 0o600),
    };
    let mut merged = theirs.unwrap_or_else(|| base.clone());
    let projects = match (base.get("projects"), ours.get("projects")) {
        (Some(Value::Object(b)), Some(Value::Object(o))) => Some((b, o)),
        _ => None,
    };
    merge_changed(&mut merged, &base, &ours, projects.map(|_| "projects"));
    if let Some((b, o)) = projects {
        match merged.get_mut("projects") {
            Some(Value::Object(m)) => merge_changed(m, b, o, None),
            _ => {
                merged.insert("projects".into(), Value::Object(o.clone()));
            }
        }
    }
    let mut merged = Value::Object(merged);
    if let Judge::Claude { .. } = judge {
        changed = judge.fix(&mut merged)?;
    }
    let mut out = serde_json::to_vec_pretty(&merged).map_err(io::Error::other)?;
    out.push(b'\n');
    write_replacing(&fd, name, &out, mode)?;
    Ok(if changed.is_empty() {
        Merged::Kept
    } else {
        Merged::PutBack(changed)
    })
}

/// Sets in `merged` each key whose value `ours` changed from `base` (removed where `ours`
/// has none), but `skip`, which the caller merges entry by entry.
fn merge_changed(
    merged: &mut Map<String, Value>,
    base: &Map<String, Value>,
    ours: &Map<String, Value>,
    skip: Option<&str>,
) {
    for (k, v) in ours {
        if base.get(k) != Some(v) && Some(k.as_str()) != skip {
            merged.insert(k.clone(), v.clone());
        }
    }
    for k in base.keys() {
        if !ours.contains_key(k) {
            merged.remove(k);
        }
    }
}

/// The entries of OpenCode's `auth.json` (`name` in `dir`) now
/// ([`crate::protect::Guard::OpenCodeAuth`]); none where it is absent. One that cannot be read
/// as JSON is an error.
pub fn auth_entries(dir: &Path, name: &str) -> io::Result<Map<String, Value>> {
    match read_json_in(dir, name)? {
        None => Ok(Map::new()),
        Some((_, Ok(Value::Object(m)), _)) => Ok(m),
        Some((_, Ok(_), _)) => Err(io::Error::other("not a JSON object")),
        Some((_, Err(e), _)) => Err(io::Error::other(e)),
    }
}

/// What is read of a JSON state file: `dir`'s descriptor, the content (or why it is not a
/// JSON file of bounded size) and the file's mode.
type JsonRead = (OwnedFd, Result<Value, String>, u32);

/// `dir` opened without following a link, and `name` in it read and parsed as JSON: `None`
/// if it is absent.
fn read_json_in(dir: &Path, name: &str) -> io::Result<Option<JsonRead>> {
    let dir_c = CString::new(dir.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fd = crate::sys::open_no_symlinks(None, &dir_c, libc::O_RDONLY | libc::O_DIRECTORY)?;
    let Some(file) = open_in(&fd, OsStr::new(name))? else {
        return Ok(None);
    };
    let mode = std::os::unix::fs::PermissionsExt::mode(&file.metadata()?.permissions());
    let v = read_bounded(file)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_slice::<Value>(&t).map_err(|e| e.to_string()));
    Ok(Some((fd, v, mode)))
}

/// Makes OpenCode's `auth.json` (`name` in `dir`, which the agent wrote itself: the launch had
/// no copy of its own) what `start` allows ([`fix_auth`]); returns what was changed. One that
/// cannot be read as JSON is moved aside, as its entries cannot be judged (OpenCode asks to
/// sign in again).
pub fn judge_auth(dir: &Path, name: &str, start: &Map<String, Value>) -> io::Result<Vec<String>> {
    let (fd, mut v, mode) = match read_json_in(dir, name)? {
        None => return Ok(Vec::new()),
        Some((fd, Ok(v @ Value::Object(_)), mode)) => (fd, v, mode),
        Some((fd, v, _)) => {
            let e = v.err().unwrap_or_else(|| "not a JSON object".into());
            let aside = crate::rename_aside(fd.as_fd(), OsStr::new(name), OsStr::new(name))?;
            return Ok(vec![format!(
                "all of it ({e}: moved aside to {})",
                dir.join(aside).display()
            )]);
        }
    };
    let changed = fix_auth(&mut v, start);
    if changed.is_empty() {
        return Ok(changed);
    }
    let mut out = serde_json::to_vec_pretty(&v).map_err(io::Error::other)?;
    out.push(b'\n');
    write_replacing(&fd, OsStr::new(name), &out, mode)?;
    Ok(changed)
}

/// Writes `bytes` to a new file in `dir` and renames it over `name`.
fn write_replacing(dir: &OwnedFd, name: &OsStr, bytes: &[u8], mode: u32) -> io::Result<()> {
    use nix::fcntl::{openat, renameat, OFlag};
    let tmp = format!(
        "{}.landwall-{}-{:016x}",
        name.to_string_lossy(),
        std::process::id(),
        crate::random_u64(0)
    );
    let fd = openat(
        dir,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(mode & 0o777),
    )?;
    let mut f = std::fs::File::from(fd);
    let written = f.write_all(bytes).and_then(|()| f.sync_all());
    if let Err(e) = written {
        let _gone =
            nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    renameat(dir, tmp.as_str(), dir, name)?;
    Ok(())
}

/// Keys of Claude Code's settings that name commands, or what its sessions may do.
const CLAUDE_SETTINGS: &[&str] = &[
    "hooks",
    "statusLine",
    "apiKeyHelper",
    "awsAuthRefresh",
    "awsCredentialExport",
    "otelHeadersHelper",
    "fileSuggestion",
    "mcpServers",
    "enabledMcpjsonServers",
    "enableAllProjectMcpServers",
    "env",
    "permissions",
];

/// Keys of OpenCode's configuration that name commands or code it runs.
const OPENCODE: &[&str] = &["mcp", "formatter", "lsp", "plugin", "command"];

/// Keys of Codex's configuration that name commands it runs.
const CODEX: &[&str] = &["notify", "mcp_servers", "hooks"];

/// What the state file `path` (one of [`crate::profile::agent_code`]'s, or a `.claude.json`)
/// names that an agent runs or follows: each key with its value as written (JSON or TOML),
/// for a person to read. A directory: how many entries it holds. `Err`: it could not be
/// read or parsed (said as such: a plant may hide behind it).
pub fn commands(path: &Path) -> io::Result<Vec<(String, String)>> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        let n = std::fs::read_dir(path)?.count();
        return Ok(if n == 0 {
            Vec::new()
        } else {
            vec![("entries".to_string(), n.to_string())]
        });
    }
    let text = read_bounded(std::fs::File::open(path)?)?;
    let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
    if name == NAME || name == OLD_NAME {
        let v: Value = serde_json::from_slice(&text).map_err(io::Error::other)?;
        return Ok(listed(&v));
    }
    if name == ".env" {
        let names: Vec<String> = String::from_utf8_lossy(&text)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split('=').next().unwrap_or(l).trim().to_string())
            .collect();
        return Ok(if names.is_empty() {
            Vec::new()
        } else {
            vec![("variables".to_string(), names.join(" "))]
        });
    }
    if name.ends_with(".md") {
        return Ok(if text.iter().all(u8::is_ascii_whitespace) {
            Vec::new()
        } else {
            vec![("instructions".to_string(), format!("{} bytes", text.len()))]
        });
    }
    // Codex's configuration, its profile layers (`<name>.config.toml`) and its execution
    // environments (`environments.toml`, each naming a program).
    let keys: &[&str] = if name.ends_with(".toml") {
        let keys = if name.ends_with("config.toml") {
            CODEX
        } else {
            &["environments"]
        };
        let text = std::str::from_utf8(&text).map_err(io::Error::other)?;
        let t: toml::Table = toml::from_str(text).map_err(io::Error::other)?;
        return Ok(keys
            .iter()
            .filter_map(|k| t.get(*k).map(|v| (k.to_string(), v.to_string())))
            .collect());
    } else if name == "settings.json" || name == "remote-settings.json" {
        CLAUDE_SETTINGS
    } else if name == "hooks.json" {
        &["hooks"]
    } else {
        OPENCODE
    };
    let v: Value = serde_json::from_slice(&text).map_err(io::Error::other)?;
    Ok(keys
        .iter()
        .filter_map(|k| v.get(*k).map(|x| (k.to_string(), x.to_string())))
        .collect())
}

/// OpenCode's sign-ins in its `auth.json` at `path`, for a person to read: each entry's
/// key with its type and every field whose name says it is an address (`enterpriseUrl`,
/// `metadata.instanceUrl`): where OpenCode sends the user's code. Never a token or a key;
/// an address loses its `user:password@`. `Err`: it could not be read or parsed.
pub fn sign_ins(path: &Path) -> io::Result<Vec<(String, String)>> {
    fn addresses(v: &Value, at: &str, out: &mut Vec<String>) {
        let Some(o) = v.as_object() else {
            return;
        };
        for (k, x) in o {
            let here = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            match x {
                Value::String(s) if k.to_ascii_lowercase().contains("url") => {
                    out.push(format!("{here}={}", no_userinfo(s)));
                }
                Value::Object(_) => addresses(x, &here, out),
                _ => {}
            }
        }
    }
    let text = read_bounded(std::fs::File::open(path)?)?;
    let v: Value = serde_json::from_slice(&text).map_err(io::Error::other)?;
    let Value::Object(o) = v else {
        return Err(io::Error::other("not a JSON object"));
    };
    Ok(o.iter()
        .map(|(k, e)| {
            let kind = e.get("type").and_then(Value::as_str).unwrap_or("?");
            let mut said = vec![kind.to_string()];
            addresses(e, "", &mut said);
            (no_userinfo(k), said.join(" "))
        })
        .collect())
}

/// `s` without the `user:password@` of an address (`https://u:p@example.org/` →
/// `https://…@example.org/`): an address in a sign-in may carry a secret.
fn no_userinfo(s: &str) -> String {
    let Some((scheme, rest)) = s.split_once("://") else {
        return s.to_string();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://…{}", &rest[at..]),
        None => s.to_string(),
    }
}

/// The strings under the command-bearing keys of the state file `path` (Claude Code's
/// settings, Codex's `config.toml` and `hooks.json`, OpenCode's configuration): the commands
/// it names, as written. None where it is absent or cannot be parsed (what the agent then
/// runs is nothing the file names).
fn command_strings(path: &Path) -> Vec<String> {
    fn collect_json(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| collect_json(x, out)),
            Value::Object(o) => o.values().for_each(|x| collect_json(x, out)),
            _ => {}
        }
    }
    fn collect_toml(v: &toml::Value, out: &mut Vec<String>) {
        match v {
            toml::Value::String(s) => out.push(s.clone()),
            toml::Value::Array(a) => a.iter().for_each(|x| collect_toml(x, out)),
            toml::Value::Table(t) => t.values().for_each(|x| collect_toml(x, out)),
            _ => {}
        }
    }
    let Ok(text) = std::fs::File::open(path).and_then(read_bounded) else {
        return Vec::new();
    };
    let name = path.file_name().and_then(OsStr::to_str).unwrap_or("");
    let mut out = Vec::new();
    if name.ends_with("config.toml") {
        let Some(t) = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| toml::from_str::<toml::Table>(t).ok())
        else {
            return out;
        };
        for k in CODEX {
            if let Some(v) = t.get(*k) {
                collect_toml(v, &mut out);
            }
        }
        return out;
    }
    let keys: &[&str] = match name {
        "settings.json" | "remote-settings.json" => CLAUDE_SETTINGS,
        "hooks.json" => &["hooks"],
        n if n.ends_with(".json") || n.ends_with(".jsonc") => OPENCODE,
        _ => return out,
    };
    if let Ok(v) = serde_json::from_slice::<Value>(&text) {
        for k in keys {
            if let Some(x) = v.get(*k) {
                collect_json(x, &mut out);
            }
        }
    }
    out
}

/// The absolute paths under `home` that the commands of the state file `path` name: each
/// word of each command (split at blanks, quotes and shell operators) that is a path, with
/// `~/`, `$HOME/` and `${HOME}/` read as `home`, and `$CLAUDE_CONFIG_DIR/` as `~/.claude`.
/// A word with a `..` component is not followed. A program such a command runs from a
/// directory the agent may write would run the agent's code (`~/.claude/statusline.sh`).
pub fn named_paths(path: &Path, home: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for command in command_strings(path) {
        for word in command.split(|c: char| {
            c.is_whitespace()
                || matches!(
                    c,
                    '\'' | '"' | ';' | '|' | '&' | '(' | ')' | '<' | '>' | '`' | '='
                )
        }) {
            let expanded = [
                ("~/", home.to_path_buf()),
                ("$HOME/", home.to_path_buf()),
                ("${HOME}/", home.to_path_buf()),
                ("$CLAUDE_CONFIG_DIR/", home.join(".claude")),
                ("${CLAUDE_CONFIG_DIR}/", home.join(".claude")),
            ]
            .iter()
            .find_map(|(prefix, base)| word.strip_prefix(prefix).map(|rest| base.join(rest)))
            .or_else(|| word.starts_with('/').then(|| PathBuf::from(word)));
            let Some(p) = expanded else { continue };
            if p.starts_with(home)
                && p != home
                && !p
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir))
                && !out.contains(&p)
            {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_bearing_keys_are_put_back_and_the_rest_kept() {
        let user = keys_of(&json!({
            "mcpServers": {"fs": {"command": "mcp-fs"}},
            "projects": {"/p": {"mcpServers": {}, "allowedTools": []}}
        }));
        let mut agent = json!({
            "numStartups": 7,
            "mcpServers": {"evil": {"command": "sh", "args": ["-c", "id"]}},
            "projects": {
                "/p": {"mcpServers": {}, "lastCost": 1},
                "/q": {"mcpServers": {"x": {"command": "x"}}, "enableAllProjectMcpServers": true}
            }
        });
        let changed = put_back(&mut agent, &user);
        assert_eq!(
            changed,
            vec![
                "mcpServers".to_string(),
                "projects[\"/q\"].mcpServers".to_string(),
                "projects[\"/q\"].enableAllProjectMcpServers".to_string(),
            ]
        );
        assert_eq!(agent["numStartups"], 7);
        assert_eq!(agent["mcpServers"], json!({"fs": {"command": "mcp-fs"}}));
        assert_eq!(agent["projects"]["/p"]["lastCost"], 1);
        assert_eq!(agent["projects"]["/q"], json!({}));
        assert_eq!(keys_of(&agent), user);
        assert!(put_back(&mut agent, &user).is_empty());
    }

    #[test]
    fn the_copy_is_guarded_on_disk() {
        let d = crate::testutil::Scratch::new("claudejson");
        let cfg = d.0.join("cfg");
        std::fs::create_dir(&cfg).expect("mkdir");
        let user = d.0.join("user.json");
        // No copy yet: nothing to do.
        assert_eq!(guard(&cfg, NAME, &user).expect("guard"), Guarded::Same);
        std::fs::write(
            cfg.join(NAME),
            r#"{"a":1,"mcpServers":{"e":{"command":"sh"}}}"#,
        )
        .expect("write");
        // No file of the user's: the copy may name nothing.
        assert_eq!(
            guard(&cfg, NAME, &user).expect("guard"),
            Guarded::PutBack(vec!["mcpServers".into()])
        );
        let v: Value =
            serde_json::from_slice(&std::fs::read(cfg.join(NAME)).expect("read")).expect("json");
        assert_eq!(v, json!({"a": 1}));
        assert_eq!(guard(&cfg, NAME, &user).expect("guard"), Guarded::Same);
        // What cannot be judged is set aside.
        std::fs::write(cfg.join(NAME), b"{\"mcpServers\": ").expect("write");
        assert!(matches!(
            guard(&cfg, NAME, &user).expect("guard"),
            Guarded::SetAside(_)
        ));
        assert!(!cfg.join(NAME).exists());
    }

    #[test]
    fn a_private_copy_is_merged_into_what_other_sessions_left() {
        let d = crate::testutil::Scratch::new("merge");
        let user = d.0.join("user.json");
        std::fs::write(&user, r#"{"mcpServers":{"fs":{"command":"mcp-fs"}}}"#).expect("write");
        let base = br#"{"n":1,"tips":{"a":1},"gone":true,"projects":{"/p":{"x":1},"/q":{"y":1}}}"#;
        // Meanwhile another session changed `/q` and `tips`, and added `/r`.
        std::fs::write(
            d.0.join(NAME),
            r#"{"n":1,"tips":{"a":2},"gone":true,"projects":{"/p":{"x":1},"/q":{"y":2},"/r":{}}}"#,
        )
        .expect("write");
        // This agent changed `n` and `/p`, removed `gone`, and planted a server.
        let ours = br#"{"n":2,"tips":{"a":1},"mcpServers":{"e":{"command":"sh"}},"projects":{"/p":{"x":2,"mcpServers":{"e":{}}},"/q":{"y":1}}}"#;
        assert_eq!(
            merge(&d.0, NAME, Judge::Claude { user: &user }, base, ours).expect("merge"),
            Merged::PutBack(vec![
                "mcpServers".into(),
                "projects[\"/p\"].mcpServers".into()
            ])
        );
        let v: Value =
            serde_json::from_slice(&std::fs::read(d.0.join(NAME)).expect("read")).expect("json");
        assert_eq!(
            v,
            json!({
                "n": 2,
                "tips": {"a": 2},
                "mcpServers": {"fs": {"command": "mcp-fs"}},
                "projects": {"/p": {"x": 2}, "/q": {"y": 2}, "/r": {}}
            })
        );
        // What is not JSON is not kept; the shared file stays.
        assert_eq!(
            merge(&d.0, NAME, Judge::Claude { user: &user }, base, b"{\"n\": ").expect("merge"),
            Merged::NotJson
        );
        assert_eq!(
            judge_bytes(ours, Judge::Claude { user: &user })
                .expect("judge")
                .map(|(_, k)| k.len()),
            Some(2)
        );
        assert_eq!(
            judge_bytes(b"[]", Judge::Claude { user: &user })
                .expect("judge")
                .map(|(b, _)| b),
            Some(b"{}\n".to_vec())
        );
    }

    #[test]
    fn opencode_sign_ins_are_kept_as_they_began_but_for_refreshed_tokens() {
        let start = json!({
            "anthropic": {"type": "oauth", "access": "a1", "refresh": "r1", "expires": 1},
            "openai": {"type": "api", "key": "sk-user"},
            "gone": {"type": "api", "key": "k"}
        });
        let start = start.as_object().cloned().expect("object");
        let mut v = json!({
            // Refreshed, as OpenCode does: kept. A field the agent adds is not.
            "anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2,
                          "accountId": "acct", "enterpriseUrl": "https://example.org"},
            // A key swapped for the agent's account: put back.
            "openai": {"type": "api", "key": "sk-agent"},
            // A new sign-in naming the agent's server: removed.
            "github-copilot": {"type": "oauth", "access": "x", "refresh": "y", "expires": 3,
                               "enterpriseUrl": "https://example.org"},
            "https://example.org": {"type": "wellknown", "key": "K", "token": "t"}
        });
        let changed = fix_auth(&mut v, &start);
        assert_eq!(
            changed,
            vec![
                "\"anthropic\".enterpriseUrl".to_string(),
                "\"github-copilot\"".to_string(),
                "\"https://example.org\"".to_string(),
                "\"openai\"".to_string(),
            ]
        );
        assert_eq!(
            v,
            json!({
                "anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2,
                              "accountId": "acct"},
                "openai": {"type": "api", "key": "sk-user"}
            })
        );
        assert!(fix_auth(&mut v, &start).is_empty());
        // A token of the wrong kind, or an entry turned into an oauth one, is put back whole.
        let mut v = json!({
            "anthropic": {"type": "oauth", "access": ["a"], "refresh": "r1", "expires": 1},
            "openai": {"type": "oauth", "access": "a", "refresh": "r", "expires": 1}
        });
        let changed = fix_auth(&mut v, &start);
        assert_eq!(
            changed,
            vec!["\"anthropic\".access".to_string(), "\"openai\"".to_string()]
        );
        assert_eq!(v["anthropic"], start["anthropic"]);
        assert_eq!(v["openai"], start["openai"]);
    }

    #[test]
    fn a_sign_in_made_meanwhile_outside_the_wall_is_kept_by_the_merge() {
        let d = crate::testutil::Scratch::new("authmerge");
        let name = "auth.json";
        let base = br#"{"anthropic":{"type":"oauth","access":"a1","refresh":"r1","expires":1},"gone":{"type":"api","key":"k"}}"#;
        let start = serde_json::from_slice::<Value>(base).expect("json");
        let start = start.as_object().cloned().expect("object");
        // Meanwhile the user signed in to OpenAI outside the wall.
        std::fs::write(
            d.0.join(name),
            r#"{"anthropic":{"type":"oauth","access":"a1","refresh":"r1","expires":1},"gone":{"type":"api","key":"k"},"openai":{"type":"api","key":"sk-user"}}"#,
        )
        .expect("write");
        // The agent refreshed its tokens, signed out of `gone`, and planted a sign-in.
        let ours = br#"{"anthropic":{"type":"oauth","access":"a2","refresh":"r2","expires":2},"github-copilot":{"type":"oauth","access":"x","refresh":"y","expires":3,"enterpriseUrl":"https://example.org"}}"#;
        assert_eq!(
            merge(&d.0, name, Judge::Auth { start: &start }, base, ours).expect("merge"),
            Merged::PutBack(vec!["\"github-copilot\"".into()])
        );
        let v: Value =
            serde_json::from_slice(&std::fs::read(d.0.join(name)).expect("read")).expect("json");
        assert_eq!(
            v,
            json!({
                "anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2},
                "openai": {"type": "api", "key": "sk-user"}
            })
        );
        // Written by the agent itself (no copy): judged in place, the same way.
        std::fs::write(d.0.join(name), ours).expect("write");
        assert_eq!(
            judge_auth(&d.0, name, &start).expect("judge"),
            vec!["\"github-copilot\"".to_string()]
        );
        assert_eq!(
            auth_entries(&d.0, name).expect("read"),
            json!({"anthropic": {"type": "oauth", "access": "a2", "refresh": "r2", "expires": 2}})
                .as_object()
                .cloned()
                .expect("object")
        );
    }

    #[test]
    fn sign_ins_are_shown_by_where_they_send_never_by_their_secrets() {
        let d = crate::testutil::Scratch::new("signins");
        let p = d.0.join("auth.json");
        std::fs::write(
            &p,
            r#"{"github-copilot": {"type": "oauth", "access": "SECRET", "refresh": "SECRET", "expires": 1, "enterpriseUrl": "https://u:SECRET@example.org/x"},
               "https://example.org": {"type": "wellknown", "key": "SECRET", "token": "SECRET"},
               "gitlab": {"type": "oauth", "access": "SECRET", "metadata": {"instanceUrl": "https://gitlab.example.org"}},
               "openai": {"type": "api", "key": "SECRET"}}"#,
        )
        .expect("write");
        let shown = sign_ins(&p).expect("read");
        assert_eq!(
            shown,
            vec![
                (
                    "github-copilot".to_string(),
                    "oauth enterpriseUrl=https://…@example.org/x".to_string()
                ),
                (
                    "gitlab".to_string(),
                    "oauth metadata.instanceUrl=https://gitlab.example.org".to_string()
                ),
                ("https://example.org".to_string(), "wellknown".to_string()),
                ("openai".to_string(), "api".to_string()),
            ]
        );
        assert!(!format!("{shown:?}").contains("SECRET"));
        std::fs::write(&p, "[]").expect("write");
        assert!(sign_ins(&p).is_err());
    }

    #[test]
    fn codexs_layers_and_environments_are_listed_by_their_command_keys() {
        let d = crate::testutil::Scratch::new("codex-keys");
        let layer = d.0.join("work.config.toml");
        std::fs::write(&layer, "model = \"m\"\nnotify = [\"sh\", \"-c\", \"x\"]\n").expect("write");
        let envs = d.0.join("environments.toml");
        std::fs::write(
            &envs,
            "default = \"x\"\n[[environments]]\nid = \"x\"\nprogram = \"/bin/sh\"\n",
        )
        .expect("write");
        let keys = |p: &Path| -> Vec<String> {
            commands(p)
                .expect("parsed")
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
        assert_eq!(keys(&layer), ["notify"]);
        assert_eq!(keys(&envs), ["environments"]);
    }

    #[test]
    fn commands_name_paths_in_the_home() {
        let d = crate::testutil::Scratch::new("named");
        let home = d.0.join("home");
        std::fs::create_dir_all(home.join(".claude")).expect("mkdir");
        let settings = home.join(".claude/settings.json");
        std::fs::write(
            &settings,
            r#"{"statusLine": {"type": "command", "command": "bash ~/.claude/statusline.sh"},
               "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "\"$CLAUDE_CONFIG_DIR/hooks/a.sh\" && /usr/bin/true; ${HOME}/bin/x --f=/etc/y ../z ~/../w"}]}]},
               "model": "~/.not-a-command"}"#,
        )
        .expect("write");
        assert_eq!(
            named_paths(&settings, &home),
            vec![
                home.join(".claude/hooks/a.sh"),
                home.join("bin/x"),
                home.join(".claude/statusline.sh"),
            ]
        );
        let toml = home.join("config.toml");
        std::fs::write(
            &toml,
            "notify = [\"sh\", \"~/.codex/n.sh\"]\nmodel = \"~/m\"\n",
        )
        .expect("write");
        assert_eq!(named_paths(&toml, &home), vec![home.join(".codex/n.sh")]);
    }

    #[test]
    fn the_fast_reading_finds_what_the_whole_parse_finds() {
        for text in [
            r#"{"a":1}"#,
            r#"{"mcpServers":{"e":{"command":"sh"}},"projects":{"/p":{"x":[1,{"y":2}],"mcpServers":{}},"/q":{"enableAllProjectMcpServers":true},"/r":3}}"#,
            r#"{"projects":{"/p":{"mcpServers":{"a":1}},"/p":{"mcpServers":{"b":2}}}}"#,
            r#"{"projects":{"/p\u0020":{"enabledMcpjsonServers":["x"]}}}"#,
        ] {
            let slow = keys_of(&serde_json::from_str::<Value>(text).expect("json"));
            assert_eq!(fast_keys(text.as_bytes()), Some(slow), "{text}");
        }
        // A key given twice: the whole parse decides.
        assert_eq!(
            fast_keys(br#"{"mcpServers":{},"mcpServers":{"e":1}}"#),
            None
        );
        assert_eq!(
            fast_keys(br#"{"projects":{"/p":{"mcpServers":{},"mcpServers":{"e":1}}}}"#),
            None
        );
        assert_eq!(fast_keys(b"[1]"), None);
    }
}
