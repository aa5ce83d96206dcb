//! Protected paths inside the worktree (issue 19): the files that programs outside the wall
//! run, or read to decide what to run (git's config and hooks, a linked worktree's `.git`
//! file, `.envrc`, hook managers' and editors' and agents' project files), cannot be changed,
//! replaced or removed by the agent, and those that were absent and that it creates are
//! set aside (renamed in place) when it exits.
//!
//! Every test runs in a main checkout and in a linked worktree, as root and (`…_unprivileged`)
//! as the system user `landwall-test`. Each attempt runs as the agent behind the `claude`
//! shim first, and its outcome is checked on the files themselves (bytes, inodes, markers),
//! never on messages; then the same attempt runs in the same tree outside the wall, as the
//! same user, and must get through: the control proves the test can fail.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use landwall_e2e::{
    chown_tree, describe, install, output, output_within, stderr, stdout, test_user, Sandbox, Who,
    TEST_USER,
};

// ---- The harness.

/// Where the agent runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// A main checkout: `.git` is the repository's git dir.
    Main,
    /// A linked worktree: `.git` is a file naming `<common>/worktrees/linked`.
    Linked,
}

/// One test's scene: a repository at `main/`, with a linked worktree at `linked/` for
/// [`Layout::Linked`], owned by whoever runs the scene, and a stand-in agent that runs its
/// arguments (`exec "$@"`).
struct Scene {
    sb: Sandbox,
    who: Who,
    layout: Layout,
    /// The main checkout.
    main: PathBuf,
    /// Where the agent runs: `main` or the linked worktree.
    wt: PathBuf,
    /// The worktree's own git dir (`main/.git`, or `main/.git/worktrees/linked`).
    git_dir: PathBuf,
    /// The repository's common dir (`main/.git`).
    common: PathBuf,
    /// In a main checkout, another linked worktree of the repository (`other/`).
    other: Option<PathBuf>,
    /// Variables of the user's own environment, for the launches and the user's git alike.
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

/// The project files the populated scenes commit (so that a linked worktree checks them out
/// too): every one is a protected path, or lies in one.
const PROJECT_FILES: &[(&str, &str)] = &[
    (".envrc", "export PROJECT=1\n"),
    (".pre-commit-config.yaml", "repos: []\n"),
    ("lefthook.yml", "pre-commit:\n  commands: {}\n"),
    (
        ".vscode/tasks.json",
        "{\"version\": \"2.0.0\", \"tasks\": []}\n",
    ),
    (".vscode/settings.json", "{}\n"),
    (".claude/settings.json", "{\"hooks\": {}}\n"),
    (".gemini/settings.json", "{}\n"),
    (".mcp.json", "{\"mcpServers\": {}}\n"),
    ("opencode.json", "{}\n"),
    (".githooks/post-merge", "#!/bin/sh\nexit 0\n"),
    (".husky/pre-commit", "#!/bin/sh\nexit 0\n"),
    (".codex/config.toml", "model = \"m\"\n"),
];

/// A benign `config.worktree` the populated scenes put in the worktree's git dir.
const WORKTREE_CONFIG: &str = "# per-worktree configuration\n";

impl Scene {
    /// A scene. The repository has a submodule checked out at `sm/` and, in a main
    /// checkout, a second linked worktree at `other/`. `populate` commits
    /// [`PROJECT_FILES`] and writes a `config.worktree`.
    fn new(name: &str, who: Who, layout: Layout, populate: bool) -> Scene {
        let sb = Sandbox::new(name);
        // The stand-in agent runs its arguments. (Written by `install`, see
        // `Sandbox::agent_script`.)
        let script = sb.root.join("agent.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho ran > \"$PWD/marker\"\nexec \"$@\"\n",
        )
        .expect("write agent script");
        install(&script, &sb.agents().join("claude-real"), &["-m", "0755"]);
        let main = sb.root.join("main");
        std::fs::create_dir_all(&main).expect("mkdir main");
        sb.git_root(&main, &["init", "-q", "-b", "main"]);
        std::fs::write(main.join("README"), "main\n").expect("write README");
        if populate {
            for (rel, text) in PROJECT_FILES {
                let p = main.join(rel);
                std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
                std::fs::write(&p, text).expect("write project file");
            }
        }
        sb.git_root(&main, &["add", "-A"]);
        sb.git_root(&main, &["commit", "-qm", "initial"]);
        let sub = sb.root.join("subsrc");
        std::fs::create_dir_all(&sub).expect("mkdir subsrc");
        sb.git_root(&sub, &["init", "-q", "-b", "main"]);
        sb.git_root(&sub, &["commit", "-q", "--allow-empty", "-m", "sub"]);
        sb.git_root(
            &main,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                sub.to_str().expect("utf8"),
                "sm",
            ],
        );
        sb.git_root(&main, &["commit", "-qm", "submodule"]);
        let common = main.join(".git");
        let mut other = None;
        let (wt, git_dir) = match layout {
            Layout::Main => {
                let o = sb.root.join("other");
                sb.git_root(
                    &main,
                    &[
                        "worktree",
                        "add",
                        "-q",
                        o.to_str().expect("utf8"),
                        "-b",
                        "other",
                    ],
                );
                other = Some(o);
                (main.clone(), common.clone())
            }
            Layout::Linked => {
                let linked = sb.root.join("linked");
                sb.git_root(
                    &main,
                    &[
                        "worktree",
                        "add",
                        "-q",
                        linked.to_str().expect("utf8"),
                        "-b",
                        "task",
                    ],
                );
                sb.git_root(
                    &linked,
                    &[
                        "-c",
                        "protocol.file.allow=always",
                        "submodule",
                        "update",
                        "-q",
                        "--init",
                    ],
                );
                (linked, common.join("worktrees/linked"))
            }
        };
        assert!(
            wt.join("sm/.git").is_file(),
            "the submodule is not checked out"
        );
        assert!(git_dir.join("modules/sm/config").is_file());
        if populate {
            std::fs::write(git_dir.join("config.worktree"), WORKTREE_CONFIG)
                .expect("write config.worktree");
        }
        if who == Who::User {
            let (uid, gid) = test_user();
            for d in [&sb.wt(), &sb.home(), &sb.outside(), &main, &wt]
                .into_iter()
                .chain(&other)
            {
                chown_tree(d, uid, gid);
            }
        }
        // The watcher counts a submodule changed at or after the launch's start (the coarse
        // clock, a tick of up to 10 ms) as the agent's: the set-up's last change (the chown
        // above changes every ctime) must be a tick older than any launch, or a launch made
        // at once would rightly set the submodule aside.
        std::thread::sleep(Duration::from_millis(25));
        Scene {
            sb,
            who,
            layout,
            main,
            wt,
            git_dir,
            common,
            other,
            env: Vec::new(),
        }
    }

    /// `program`, as `who`, with the sandbox's clean environment, in the worktree.
    fn cmd(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = match self.who {
            Who::Root => Command::new(program),
            Who::User => {
                test_user();
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={TEST_USER}"))
                    .arg(format!("--regid={TEST_USER}"))
                    .args(["--init-groups", "--"])
                    .arg(program);
                c
            }
        };
        self.sb.clean_env(&mut c);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c.current_dir(&self.wt);
        c
    }

    /// `sh -c SCRIPT` as the agent, behind the `claude` shim, in the worktree.
    fn walled(&self, script: &str) -> Command {
        let mut c = self.cmd(self.sb.shims().join("claude"));
        c.args(["/bin/sh", "-c", script]);
        c
    }

    /// The same script outside the wall, as the same user, in the same tree.
    fn control(&self, script: &str) -> Command {
        let mut c = self.cmd("/bin/sh");
        c.args(["-c", script]);
        c
    }

    /// Runs `script` behind the shim and checks that the agent started.
    fn run_walled(&self, script: &str) -> Output {
        remove_if_there(&self.wt.join("marker"));
        let out = output_within(&mut self.walled(script), Duration::from_secs(60));
        assert!(
            self.sb.ran_in(&self.wt),
            "the agent did not start:\n{}",
            describe(&out)
        );
        out
    }

    /// Runs `script` outside the wall.
    fn run_control(&self, script: &str) -> Output {
        output(&mut self.control(script))
    }

    /// The user's own git, outside the wall, as `who`, in `dir`.
    fn user_git(&self, dir: &Path, args: &[&str]) -> Output {
        let mut c = self.cmd("git");
        c.args([
            "-c",
            "user.name=landwall-test",
            "-c",
            "user.email=test@landwall.invalid",
        ])
        .args(args)
        .current_dir(dir);
        output(&mut c)
    }

    /// A protected path relative to the worktree's top level, resolved as the product does:
    /// `.git/…` in the worktree's own git dir.
    fn at(&self, rel: &str) -> PathBuf {
        match rel.strip_prefix(".git/") {
            Some(sub) => self.git_dir.join(sub),
            None => self.wt.join(rel),
        }
    }

    /// Where the payloads the agent plants write when they run (outside the wall).
    fn pwned(&self) -> PathBuf {
        self.sb.outside().join("pwned")
    }
}

/// Removes `p` (a file, a link or a directory tree) if it is there.
fn remove_if_there(p: &Path) {
    let r = match std::fs::symlink_metadata(p) {
        Err(_) => return,
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
    };
    r.unwrap_or_else(|e| panic!("remove {}: {e}", p.display()));
}

/// `p` quoted for `sh`.
fn q(p: impl AsRef<OsStr>) -> String {
    let s = p.as_ref().to_str().expect("utf8 path");
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Defines the four tests of one body: main checkout and linked worktree, as root and as
/// the unprivileged user.
macro_rules! matrix {
    ($body:ident: $main:ident, $main_u:ident, $linked:ident, $linked_u:ident) => {
        #[test]
        fn $main() {
            $body(Who::Root, Layout::Main)
        }
        #[test]
        fn $main_u() {
            $body(Who::User, Layout::Main)
        }
        #[test]
        fn $linked() {
            $body(Who::Root, Layout::Linked)
        }
        #[test]
        fn $linked_u() {
            $body(Who::User, Layout::Linked)
        }
    };
}

// ---- What a path is, byte for byte.

/// A path's state: what it is, its inode, mode and bytes (a directory: all it holds).
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Missing,
    File {
        ino: u64,
        mode: u32,
        bytes: Vec<u8>,
    },
    Link(PathBuf),
    Dir {
        ino: u64,
        entries: BTreeMap<String, State>,
    },
}

/// The state of `p`; with `deep`, a directory's entries too.
fn state(p: &Path, deep: bool) -> State {
    let Ok(meta) = std::fs::symlink_metadata(p) else {
        return State::Missing;
    };
    let ft = meta.file_type();
    if ft.is_symlink() {
        return State::Link(std::fs::read_link(p).expect("readlink"));
    }
    if ft.is_dir() {
        let mut entries = BTreeMap::new();
        if deep {
            for e in std::fs::read_dir(p).expect("read dir") {
                let e = e.expect("entry");
                entries.insert(
                    e.file_name().to_string_lossy().into_owned(),
                    state(&e.path(), true),
                );
            }
        }
        return State::Dir {
            ino: meta.ino(),
            entries,
        };
    }
    State::File {
        ino: meta.ino(),
        mode: meta.mode(),
        bytes: std::fs::read(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display())),
    }
}

// ---- 1. Attempts on the protected paths that exist.

/// What a target is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A protected file.
    File,
    /// A protected directory.
    Dir,
    /// A directory on the way to a protected path (its inode is its identity), with the
    /// protected entry the rebuilt one gets.
    Parent(&'static str),
}

#[derive(Debug, Clone)]
struct Target {
    path: PathBuf,
    kind: Kind,
}

impl Target {
    fn state(&self) -> State {
        state(&self.path, !matches!(self.kind, Kind::Parent(_)))
    }
}

/// The attempts, each made on every target it applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attack {
    /// Rewrite in place; in a directory, rewrite what it holds and create a new file.
    Rewrite,
    /// Write a new file beside it and rename it over (in a directory, over what it holds).
    RenameOver,
    /// Remove it.
    Delete,
    /// Rename it away and put another in its place.
    RenameAway,
    /// Rename its parent directory away and rebuild it with another inside.
    ParentAway,
}

const ATTACKS: &[Attack] = &[
    Attack::Rewrite,
    Attack::RenameOver,
    Attack::Delete,
    Attack::RenameAway,
    Attack::ParentAway,
];

impl Attack {
    /// The shell step on `t`, or `None` if it does not apply.
    fn step(self, t: &Target) -> Option<String> {
        let p = q(&t.path);
        let away = q(format!("{}.lw-away", t.path.display()));
        let new = q(format!("{}.lw-new", t.path.display()));
        let hook = "#!/bin/sh\\necho evil\\n";
        Some(match (self, t.kind) {
            (Attack::Rewrite, Kind::File) => format!("printf 'evil\\n' > {p}"),
            (Attack::Rewrite, Kind::Dir) => format!(
                "for f in {p}/*; do [ -f \"$f\" ] && printf 'evil\\n' > \"$f\"; done; \
                 printf '{hook}' > {p}/pre-commit && chmod +x {p}/pre-commit"
            ),
            (Attack::RenameOver, Kind::File) => {
                format!("printf 'evil\\n' > {new} && mv -f {new} {p}")
            }
            (Attack::RenameOver, Kind::Dir) => format!(
                "for f in {p}/*; do [ -f \"$f\" ] && printf 'evil\\n' > \"$f.lw-new\" && mv -f \"$f.lw-new\" \"$f\"; done"
            ),
            (Attack::Delete, Kind::File) => format!("rm -f {p}"),
            (Attack::Delete, Kind::Dir) => format!("rm -rf {p}"),
            (Attack::RenameAway, Kind::File) => {
                format!("mv {p} {away} && printf 'evil\\n' > {p}")
            }
            (Attack::RenameAway, Kind::Dir) => format!(
                "mv {p} {away} && mkdir {p} && printf '{hook}' > {p}/pre-commit && chmod +x {p}/pre-commit"
            ),
            (Attack::ParentAway, Kind::Parent(child)) => format!(
                "mv {p} {away} && mkdir {p} && cp -a {away}/. {p}/ && printf 'evil\\n' > {p}/{child}"
            ),
            _ => return None,
        })
    }

    /// The whole attempt on `targets`: each step whatever the others did, its status on
    /// stdout (for the failure message only: the outcome is checked on the files).
    fn script(self, targets: &[Target]) -> String {
        let mut s = String::new();
        for t in targets {
            if let Some(step) = self.step(t) {
                s.push_str(&format!(
                    "( {step} ) 2>&1; echo \"{:?} {}: $?\"\n",
                    self,
                    t.path.display()
                ));
            }
        }
        s
    }
}

/// The protected paths a populated scene holds (and, in a linked worktree, the
/// repository's config, hooks and info, which Landlock already keeps read-only, and its
/// git dir).
fn targets(s: &Scene) -> Vec<Target> {
    let file = |p: PathBuf| Target {
        path: p,
        kind: Kind::File,
    };
    let dir = |p: PathBuf| Target {
        path: p,
        kind: Kind::Dir,
    };
    let parent = |p: PathBuf, child| Target {
        path: p,
        kind: Kind::Parent(child),
    };
    let mut t = vec![
        file(s.at(".envrc")),
        file(s.at(".pre-commit-config.yaml")),
        file(s.at("lefthook.yml")),
        file(s.at(".vscode/tasks.json")),
        file(s.at(".vscode/settings.json")),
        file(s.at(".claude/settings.json")),
        file(s.at(".gemini/settings.json")),
        file(s.at(".mcp.json")),
        file(s.at("opencode.json")),
        dir(s.at(".githooks")),
        dir(s.at(".husky")),
        dir(s.at(".codex")),
        parent(s.wt.join(".vscode"), "tasks.json"),
        parent(s.wt.join(".claude"), "settings.json"),
        parent(s.wt.join(".gemini"), "settings.json"),
        file(s.at(".git/config.worktree")),
    ];
    // The submodule: its `.git` file, and its git dir's config and hooks (in the worktree's
    // own git dir's `modules/`).
    t.extend([
        file(s.wt.join("sm/.git")),
        parent(s.wt.join("sm"), ".git"),
        file(s.at(".git/modules/sm/config")),
        dir(s.at(".git/modules/sm/hooks")),
        parent(s.at(".git/modules/sm"), "config"),
    ]);
    match s.layout {
        Layout::Main => t.extend([
            file(s.at(".git/config")),
            dir(s.at(".git/hooks")),
            dir(s.at(".git/info")),
            parent(s.wt.join(".git"), "config"),
            // The other linked worktree's entry: its commondir names where its config and
            // hooks are.
            file(s.at(".git/worktrees/other/commondir")),
            parent(s.at(".git/worktrees/other"), "commondir"),
        ]),
        Layout::Linked => t.extend([
            file(s.wt.join(".git")),
            file(s.at(".git/commondir")),
            parent(s.git_dir.clone(), "commondir"),
            file(s.common.join("config")),
            dir(s.common.join("hooks")),
            dir(s.common.join("info")),
            parent(s.common.clone(), "config"),
        ]),
    }
    t
}

/// Each attempt, in a fresh scene: behind the shim every target is unchanged (all of
/// them, not only those attempted); outside the wall every target it was made on changed.
fn attempts_fail(who: Who, layout: Layout) {
    for &attack in ATTACKS {
        let s = Scene::new("prot-attempt", who, layout, true);
        let targets = targets(&s);
        for t in &targets {
            assert_ne!(t.state(), State::Missing, "{} is missing", t.path.display());
        }
        let script = attack.script(&targets);
        let before: Vec<State> = targets.iter().map(Target::state).collect();
        let out = s.run_walled(&script);
        for (t, b) in targets.iter().zip(&before) {
            assert_eq!(
                &t.state(),
                b,
                "{attack:?} ({who:?}, {layout:?}): {} changed behind the wall:\n{}",
                t.path.display(),
                describe(&out)
            );
        }
        eprintln!("{attack:?} ({who:?}, {layout:?}) walled:\n{}", stdout(&out));
        let out = s.run_control(&script);
        for (t, b) in targets.iter().zip(&before) {
            if attack.step(t).is_some() {
                assert_ne!(
                    &t.state(),
                    b,
                    "{attack:?} ({who:?}, {layout:?}): the control did not change {}, so the walled check proves nothing:\n{}",
                    t.path.display(),
                    describe(&out)
                );
            }
        }
    }
}
matrix!(attempts_fail: protected_paths_resist_the_agent_main_checkout, protected_paths_resist_the_agent_main_checkout_unprivileged, protected_paths_resist_the_agent_linked_worktree, protected_paths_resist_the_agent_linked_worktree_unprivileged);

// ---- 2. Protected paths the agent creates.

/// Polls until `p` is gone (the launch's watcher sets it aside once the agent has exited; it
/// holds the caller's output open until then, so this is normally at once).
fn gone_soon(p: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if std::fs::symlink_metadata(p).is_err() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `p`, or a directory or link on the way to it (up to two levels up), was set
/// aside: an entry `<name>.landwall-swept-…` beside it.
fn set_aside(p: &Path) -> bool {
    let mut at = Some(p);
    for _ in 0..3 {
        let Some(path) = at else {
            return false;
        };
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        let prefix = format!("{}.landwall-swept-", name.to_string_lossy());
        let found = std::fs::read_dir(dir).is_ok_and(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        });
        if found {
            return true;
        }
        at = path.parent();
    }
    false
}

/// The agent creates protected paths that were absent: each is set aside (renamed in
/// place, to `<name>.landwall-swept-…`, the path itself or a directory or link on the way
/// to it) as soon as it appears, so it is gone from its path once the launch has returned,
/// and the aside name proves the agent did make it; the repository still works for the
/// user. Outside the wall they stay.
fn absent_swept(who: Who, layout: Layout) {
    let s = Scene::new("prot-absent", who, layout, false);
    // (how the agent makes it, the protected path that must be gone)
    let plain = |rel: &str| -> (String, PathBuf) {
        let p = s.at(rel);
        (
            format!(
                "mkdir -p {} && printf '#!/bin/sh\\necho planted\\n' > {}",
                q(p.parent().expect("parent")),
                q(&p)
            ),
            p,
        )
    };
    let mut made = vec![
        plain(".envrc"),
        // Found by review: lefthook merges it over lefthook.yml.
        plain("lefthook-local.yml"),
        plain(".vscode/tasks.json"),
        plain(".git/config.worktree"),
        // A directory, with a hook in it.
        (
            format!(
                "mkdir {h} && printf '#!/bin/sh\\necho planted\\n' > {h}/pre-commit",
                h = q(s.at(".husky"))
            ),
            s.at(".husky"),
        ),
        // A symbolic link to a file the agent wrote.
        (
            format!(
                "printf '{{}}\\n' > lw-mcp.json && ln -s \"$PWD/lw-mcp.json\" {}",
                q(s.at(".mcp.json"))
            ),
            s.at(".mcp.json"),
        ),
        // A symbolic link on the way: `.claude` naming a directory the agent wrote.
        (
            format!(
                "mkdir lw-claude && printf '{{}}\\n' > lw-claude/settings.json && ln -s \"$PWD/lw-claude\" {}",
                q(s.at(".claude"))
            ),
            s.at(".claude/settings.json"),
        ),
    ];
    match layout {
        Layout::Main => made.push(plain(".git/commondir")),
        // A linked worktree's own git dir holds no config or hooks git reads (they are the
        // common dir's, read-only to the agent): not protected there.
        Layout::Linked => {}
    }
    for (_, p) in &made {
        assert!(
            std::fs::symlink_metadata(p).is_err(),
            "{} exists",
            p.display()
        );
    }
    let mut script = String::new();
    for (i, (step, _)) in made.iter().enumerate() {
        script.push_str(&format!("( {step} ) 2>&1; echo \"step {i}: $?\"\n"));
    }
    script.push_str("for f in");
    for (_, p) in &made {
        script.push(' ');
        script.push_str(&q(p));
    }
    script.push_str("; do [ -e \"$f\" ] && echo \"$f\"; done > lw-seen\n");
    let seen = s.wt.join("lw-seen");
    let out = s.run_walled(&script);
    for (_, p) in &made {
        assert!(
            set_aside(p),
            "{who:?} {layout:?}: nothing was set aside for {}: the agent could not create it, so its absence proves nothing:\n{}",
            p.display(),
            describe(&out)
        );
        assert!(
            gone_soon(p),
            "{who:?} {layout:?}: {} is still there after the launch:\n{}",
            p.display(),
            describe(&out)
        );
    }
    eprintln!("{who:?} {layout:?}: {}", stderr(&out));
    for args in [&["status", "--short"][..], &["log", "--oneline"]] {
        let g = s.user_git(&s.wt, args);
        assert!(g.status.success(), "git {args:?}: {}", describe(&g));
    }
    // The control: outside the wall, they stay.
    std::fs::remove_file(&seen).expect("rm lw-seen");
    for lw in ["lw-mcp.json", "lw-claude"] {
        remove_if_there(&s.wt.join(lw));
    }
    let out = s.run_control(&script);
    std::thread::sleep(Duration::from_millis(200));
    for (_, p) in &made {
        assert!(
            std::fs::metadata(p).is_ok(),
            "control: {} was not created:\n{}",
            p.display(),
            describe(&out)
        );
    }
}
matrix!(absent_swept: absent_protected_paths_are_removed_main_checkout, absent_protected_paths_are_removed_main_checkout_unprivileged, absent_protected_paths_are_removed_linked_worktree, absent_protected_paths_are_removed_linked_worktree_unprivileged);

// ---- 3. The user's next git runs nothing the agent planted.

/// Ways to have the user's next `git status` or `git commit` run a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vector {
    /// `core.fsmonitor` in the repository's config.
    Fsmonitor,
    /// `core.fsmonitor` in the worktree's `config.worktree` (`extensions.worktreeConfig`).
    WorktreeConfig,
    /// A pre-commit hook in the repository's hooks dir.
    Hook,
    /// `core.hooksPath` pointed at a hooks dir the agent wrote.
    HooksPathConfig,
    /// A pre-commit hook in `.githooks`, where the repository sets `core.hooksPath` there.
    HooksPathDir,
    /// `.git` pointed at (main: rebuilt as) a git dir the agent wrote.
    RedirectedGit,
    /// The worktree's `commondir` naming a copy of the common dir the agent wrote.
    Commondir,
    /// The submodule's `.git` file pointed at a git dir the agent wrote.
    SubmoduleGitFile,
    /// `core.fsmonitor` in the submodule's config (its git dir's `config`).
    SubmoduleConfig,
    /// Found while writing these tests (held since): a `commondir` in the submodule's git dir,
    /// naming a copy of it with `core.fsmonitor` set. The user's `git status` at the top
    /// recurses into the submodule, which then reads its config from there.
    SubmoduleCommondir,
    /// Found while writing these tests (swept since; main checkout only): `config.worktree` in
    /// the other linked worktree's entry (`.git/worktrees/other/`), where the repository
    /// sets `extensions.worktreeConfig`. The user's git in that worktree reads it.
    OtherWorktreeConfig,
    /// Found by review: a repository the agent makes in the worktree, with `core.fsmonitor`
    /// in its own config, staged and committed as a submodule: the user's `git status` at the
    /// top runs `git status` inside it.
    NestedSubmodule,
    /// Found by review: the same, staged into a split index (`git update-index
    /// --split-index`), whose entries live in `sharedindex.*`.
    SplitIndexSubmodule,
    /// Found by review: the same, staged into an index without a checksum
    /// (`index.skipHash`).
    SkipHashSubmodule,
    /// Found by review: a repository nested in the existing submodule `sm` and staged in
    /// `sm`'s own index: the user's `git status` at the top enters `sm`, which enters it.
    NestedInSubmodule,
    /// A pre-commit hook in `scripts/hooks`, where the repository sets `core.hooksPath`
    /// there (a name not on the list: protected because the config names it).
    HooksPathNamedByConfig,
    /// Found by review: `core.fsmonitor` in `.gitconfig` at the worktree's top, which the
    /// repository's config includes (`include.path = ../.gitconfig`, a config shared in the
    /// repository; absolute in a linked worktree): a name not on the list, held because
    /// the config names it.
    IncludedConfig,
    /// The same through the user's own `~/.gitconfig` (`includeIf`), naming a file that
    /// does not exist yet: set aside as it appears.
    GlobalIncludeIf,
    /// Found by review: the index swapped for a FIFO, then put back. The watcher opened the
    /// FIFO to read the submodules and waited there for good, sweeping nothing more; a
    /// repository nested and staged after that ran its config on your next `git status`.
    FifoIndex,
    /// Found by review: `GIT_CONFIG_GLOBAL` in the user's environment names the global
    /// config, which sets `core.hooksPath = .lw-myhooks`; the agent fills it.
    GlobalConfigEnv,
    /// Found by review: the same set in a `~/.gitconfig` with CR LF line ends and a
    /// continued line before it (the parse stopped at the continuation).
    CrlfContinuation,
    /// Found by review: an include named `~root/../<worktree>/shared.gitconfig` (`~user/`
    /// was not expanded).
    TildeUserInclude,
    /// Found by review: `core.hooksPath = tools/../hooks`, `tools` made a link by the agent
    /// (the path was taken lexically, as `hooks`).
    DotDotHooksPath,
    /// Found by review: `core.fsmonitor = scripts/fsmon.sh`, a program a setting names by
    /// its path in the worktree, rewritten by the agent.
    ProgramNamed,
}

/// What the protected paths are to stop (the others run in tests of their own).
const VECTORS: &[Vector] = &[
    Vector::GlobalConfigEnv,
    Vector::CrlfContinuation,
    Vector::TildeUserInclude,
    Vector::DotDotHooksPath,
    Vector::ProgramNamed,
    Vector::FifoIndex,
    Vector::IncludedConfig,
    Vector::GlobalIncludeIf,
    Vector::HooksPathNamedByConfig,
    Vector::NestedSubmodule,
    Vector::SplitIndexSubmodule,
    Vector::SkipHashSubmodule,
    Vector::NestedInSubmodule,
    Vector::Fsmonitor,
    Vector::WorktreeConfig,
    Vector::Hook,
    Vector::HooksPathConfig,
    Vector::HooksPathDir,
    Vector::RedirectedGit,
    Vector::Commondir,
    Vector::SubmoduleGitFile,
    Vector::SubmoduleConfig,
];

/// Writes a `[core]` section whose `core.fsmonitor` is the payload `$P` (to be redirected
/// into a config file).
const FSMONITOR: &str = "printf '[core]\\n\\tfsmonitor = %s\\n' \"$P\"";
/// A repository nested at `lw-lib` with `core.fsmonitor` set to the payload `$P`.
const NEST_LIB: &str = "rm -rf lw-lib && git init -q lw-lib && git -C lw-lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && git -C lw-lib config core.fsmonitor \"$P\"";
/// `lw-lib` staged and committed as a submodule.
const STAGE_LIB: &str = "git -c advice.addEmbeddedRepo=false add lw-lib && git -c user.name=a -c user.email=a@a.invalid commit -q -m 'add lw-lib'";

/// The agent's script for `v`: it writes `lw-payload` (which appends its name to `pwned`,
/// outside the worktree) and tries to get it run. Every step is tried whatever the others
/// did.
fn plant_script(s: &Scene, v: Vector) -> String {
    let mut sc = format!(
        "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > lw-payload; chmod +x lw-payload; P=\"$PWD/lw-payload\"\n",
        pwned = q(s.pwned())
    );
    let gd = q(&s.git_dir);
    let common = q(&s.common);
    let sm_gd = q(s.at(".git/modules/sm"));
    let steps: Vec<String> = match (v, s.layout) {
        (Vector::Fsmonitor, _) => vec![
            "git config core.fsmonitor \"$P\"".into(),
            format!("{FSMONITOR} >> {common}/config"),
        ],
        (Vector::WorktreeConfig, _) => vec![
            "git config --worktree core.fsmonitor \"$P\"".into(),
            format!("{FSMONITOR} > {gd}/config.worktree"),
        ],
        (Vector::Hook, _) => vec![format!("cp lw-payload {common}/hooks/pre-commit")],
        (Vector::HooksPathConfig, _) => vec![
            "mkdir -p lw-hooks && cp lw-payload lw-hooks/pre-commit && git config core.hooksPath \"$PWD/lw-hooks\"".into(),
        ],
        (Vector::HooksPathDir, _) => vec![
            "cp lw-payload .githooks/pre-commit".into(),
            "mv .githooks .lw-githooks && mkdir .githooks && cp lw-payload .githooks/pre-commit".into(),
        ],
        (Vector::RedirectedGit, Layout::Main) => vec![
            "mv .git .lw-git && mkdir .git && cp -a .lw-git/. .git/ && git config core.fsmonitor \"$P\" && cp lw-payload .git/hooks/pre-commit".into(),
        ],
        (Vector::RedirectedGit, Layout::Linked) => vec![
            "rm -rf lw-evil && git init -q lw-evil && git -C lw-evil config core.fsmonitor \"$P\" && cp lw-payload lw-evil/.git/hooks/pre-commit".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > .git".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > lw-gitfile && mv -f lw-gitfile .git".into(),
            "mv .git lw-gitfile-away && printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > .git".into(),
        ],
        (Vector::Commondir, _) => vec![
            format!("rm -rf lw-common && mkdir lw-common && cp -a {common}/. lw-common/"),
            "git config -f lw-common/config core.fsmonitor \"$P\"; cp lw-payload lw-common/hooks/pre-commit".into(),
            format!("printf '%s\\n' \"$PWD/lw-common\" > {gd}/commondir"),
            format!("printf '%s\\n' \"$PWD/lw-common\" > lw-cd && mv -f lw-cd {gd}/commondir"),
        ],
        (Vector::SubmoduleGitFile, _) => vec![
            format!(
                "rm -rf lw-smgd && mkdir lw-smgd && cp -a {sm_gd}/. lw-smgd/ && git config -f lw-smgd/config core.fsmonitor \"$P\" && git config -f lw-smgd/config core.worktree \"$PWD/sm\""
            ),
            "printf 'gitdir: %s\\n' \"$PWD/lw-smgd\" > sm/.git".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-smgd\" > lw-smfile && mv -f lw-smfile sm/.git".into(),
        ],
        (Vector::SubmoduleConfig, _) => vec![
            "git -C sm config core.fsmonitor \"$P\"".into(),
            format!("{FSMONITOR} >> {sm_gd}/config"),
        ],
        (Vector::SubmoduleCommondir, _) => vec![
            format!("rm -rf lw-smcommon && mkdir lw-smcommon && cp -a {sm_gd}/. lw-smcommon/ && git config -f lw-smcommon/config core.fsmonitor \"$P\""),
            format!("printf '%s\\n' \"$PWD/lw-smcommon\" > {sm_gd}/commondir"),
        ],
        (Vector::NestedSubmodule, _) => vec![
            NEST_LIB.into(),
            STAGE_LIB.into(),
        ],
        (Vector::SplitIndexSubmodule, _) => vec![
            "git update-index --split-index".into(),
            NEST_LIB.into(),
            "git update-index --add --cacheinfo 160000,$(git -C lw-lib rev-parse HEAD),lw-lib".into(),
        ],
        (Vector::SkipHashSubmodule, _) => vec![
            NEST_LIB.into(),
            "git -c index.skipHash=true update-index --add --cacheinfo 160000,$(git -C lw-lib rev-parse HEAD),lw-lib".into(),
        ],
        (Vector::NestedInSubmodule, _) => vec![
            "cd sm && rm -rf lw-deep && git init -q lw-deep && git -C lw-deep -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m deep && git -C lw-deep config core.fsmonitor \"$P\" && git update-index --add --cacheinfo 160000,$(git -C lw-deep rev-parse HEAD),lw-deep".into(),
        ],
        (Vector::HooksPathNamedByConfig, _) => vec![
            "cp lw-payload scripts/hooks/pre-commit".into(),
            "mv scripts lw-scripts && mkdir -p scripts/hooks && cp lw-payload scripts/hooks/pre-commit".into(),
        ],
        (Vector::IncludedConfig, _) => vec![
            format!("{FSMONITOR} >> .gitconfig"),
            format!("{FSMONITOR} > lw-gc && mv -f lw-gc .gitconfig"),
            format!("mv .gitconfig lw-gc-away; {FSMONITOR} > .gitconfig"),
        ],
        (Vector::GlobalConfigEnv | Vector::CrlfContinuation, _) => vec![
            "mkdir -p .lw-myhooks && cp lw-payload .lw-myhooks/pre-commit".into(),
        ],
        (Vector::TildeUserInclude, _) => vec![
            format!("{FSMONITOR} >> shared.gitconfig"),
            format!("{FSMONITOR} > lw-gc && mv -f lw-gc shared.gitconfig"),
        ],
        (Vector::DotDotHooksPath, _) => vec![
            "mkdir -p lw-sub/x lw-sub/hooks && cp lw-payload lw-sub/hooks/pre-commit && ln -sfn lw-sub/x tools".into(),
            "mkdir -p hooks && cp lw-payload hooks/pre-commit".into(),
        ],
        (Vector::ProgramNamed, _) => vec![
            "cp lw-payload scripts/fsmon.sh".into(),
            "cp lw-payload lw-f && mv -f lw-f scripts/fsmon.sh".into(),
            "mv scripts lw-scripts && mkdir scripts && cp lw-payload scripts/fsmon.sh".into(),
        ],
        (Vector::FifoIndex, _) => vec![
            "G=$(git rev-parse --git-dir) && cp \"$G/index\" \"$G/lw-index\" && mkfifo \"$G/lw-fifo\" && mv \"$G/lw-fifo\" \"$G/index\" && sleep 0.5 && mv \"$G/lw-index\" \"$G/index\"".into(),
            NEST_LIB.into(),
            STAGE_LIB.into(),
        ],
        (Vector::GlobalIncludeIf, _) => vec![
            format!("{FSMONITOR} > .lw-team.gitconfig"),
        ],
        (Vector::OtherWorktreeConfig, _) => vec![format!(
            "{FSMONITOR} > {common}/worktrees/other/config.worktree"
        )],
    };
    for (i, step) in steps.iter().enumerate() {
        sc.push_str(&format!("( {step} ) 2>&1; echo \"step {i}: $?\"\n"));
    }
    sc
}

/// The user's next `git status` and `git commit` in `dir`, outside the wall.
fn users_next_git(s: &Scene, dir: &Path) -> Vec<Output> {
    vec![
        s.user_git(dir, &["status", "--short"]),
        s.user_git(
            dir,
            &["commit", "-q", "--allow-empty", "-m", "the user's commit"],
        ),
    ]
}

/// One way in, in a fresh scene: planted as the agent, the user's next git runs nothing
/// (and works); planted outside the wall, it runs the payload.
fn vector_case(who: Who, layout: Layout, v: Vector) {
    if v == Vector::TildeUserInclude && who == Who::User {
        // `~root/..` is closed to the test user, and its own home does not exist: no
        // `~user/` path it could use.
        return;
    }
    let mut s = Scene::new("prot-nextgit", who, layout, false);
    match v {
        Vector::WorktreeConfig | Vector::OtherWorktreeConfig => {
            s.sb.git_root(&s.main, &["config", "extensions.worktreeConfig", "true"]);
        }
        Vector::HooksPathDir | Vector::HooksPathNamedByConfig => {
            let rel = if v == Vector::HooksPathDir {
                ".githooks"
            } else {
                "scripts/hooks"
            };
            s.sb.git_root(&s.main, &["config", "core.hooksPath", rel]);
            let hooks = s.wt.join(rel);
            std::fs::create_dir_all(&hooks).expect("mkdir .githooks");
            std::fs::write(hooks.join("post-merge"), "#!/bin/sh\nexit 0\n").expect("hook");
            if who == Who::User {
                let (uid, gid) = test_user();
                // From its first component: `scripts` too, as a user's checkout has it.
                let top = rel.split('/').next().unwrap_or(rel);
                chown_tree(&s.wt.join(top), uid, gid);
            }
        }
        Vector::GlobalConfigEnv => {
            // The user's own environment names the global config (GIT_CONFIG_GLOBAL); it
            // sets core.hooksPath = .lw-myhooks.
            let global = s.sb.outside().join("global.gitconfig");
            std::fs::write(&global, "[core]\n\thooksPath = .lw-myhooks\n").expect("write");
            s.env
                .push(("GIT_CONFIG_GLOBAL".into(), global.into_os_string()));
        }
        Vector::CrlfContinuation => {
            use std::io::Write as _;
            let global = s.sb.home().join(".gitconfig");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&global)
                .expect("open ~/.gitconfig");
            f.write_all(b"[alias]\r\n\tlg = log --graph \\\r\n\t  --oneline\r\n[core]\r\n\thooksPath = .lw-myhooks\r\n")
                .expect("write ~/.gitconfig");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&global, uid, gid);
            }
        }
        Vector::TildeUserInclude => {
            let shared = s.wt.join("shared.gitconfig");
            std::fs::write(&shared, "# shared\n").expect("write");
            let include = format!("~root/..{}", shared.display());
            s.sb.git_root(&s.main, &["config", "include.path", &include]);
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&shared, uid, gid);
            }
        }
        Vector::DotDotHooksPath => {
            s.sb.git_root(&s.main, &["config", "core.hooksPath", "tools/../hooks"]);
        }
        Vector::ProgramNamed => {
            s.sb.git_root(&s.main, &["config", "core.fsmonitor", "scripts/fsmon.sh"]);
            let script = s.wt.join("scripts/fsmon.sh");
            std::fs::create_dir_all(script.parent().expect("parent")).expect("mkdir");
            std::fs::write(&script, "#!/bin/sh\nexit 1\n").expect("write");
            std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .expect("chmod");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&s.wt.join("scripts"), uid, gid);
            }
        }
        Vector::IncludedConfig => {
            let include = match layout {
                Layout::Main => "../.gitconfig".to_string(),
                Layout::Linked => s.wt.join(".gitconfig").to_string_lossy().into_owned(),
            };
            s.sb.git_root(&s.main, &["config", "include.path", &include]);
            let shared = s.wt.join(".gitconfig");
            std::fs::write(&shared, "# the team's shared git configuration\n").expect("write");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&shared, uid, gid);
            }
        }
        Vector::GlobalIncludeIf => {
            use std::io::Write as _;
            let global = s.sb.home().join(".gitconfig");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&global)
                .expect("open ~/.gitconfig");
            write!(
                f,
                "[includeIf \"gitdir:/\"]\n\tpath = {}\n",
                s.wt.join(".lw-team.gitconfig").display()
            )
            .expect("write ~/.gitconfig");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&global, uid, gid);
            }
        }
        _ => {}
    }
    if who == Who::User {
        // git_setup rewrote the config as root.
        let (uid, gid) = test_user();
        chown_tree(&s.common.join("config"), uid, gid);
    }
    // Where the user runs git next.
    let dir = match v {
        Vector::OtherWorktreeConfig => s.other.clone().expect("a main checkout's other worktree"),
        _ => s.wt.clone(),
    };
    let script = plant_script(&s, v);
    let pwned = s.pwned();
    let out = s.run_walled(&script);
    for g in users_next_git(&s, &dir) {
        assert!(
            g.status.success(),
            "{v:?} ({who:?}, {layout:?}): the user's git failed after the agent ran:\n{}\nthe agent:\n{}",
            describe(&g),
            describe(&out)
        );
    }
    assert!(
        !pwned.exists(),
        "{v:?} ({who:?}, {layout:?}): the user's git in {} ran what the agent planted ({}):\nthe agent:\n{}",
        dir.display(),
        std::fs::read_to_string(&pwned).unwrap_or_default().trim(),
        describe(&out)
    );
    eprintln!("{v:?} ({who:?}, {layout:?}) walled:\n{}", stdout(&out));
    let out = s.run_control(&script);
    let gits = users_next_git(&s, &dir);
    assert!(
        pwned.exists(),
        "{v:?} ({who:?}, {layout:?}): the control's payload did not run, so the walled check proves nothing:\n{}\n{}",
        describe(&out),
        gits.iter().map(describe).collect::<Vec<_>>().join("\n")
    );
    eprintln!(
        "{v:?} ({who:?}, {layout:?}) control ran: {}",
        std::fs::read_to_string(&pwned).unwrap_or_default().trim()
    );
}

fn next_git_runs_nothing_planted(who: Who, layout: Layout) {
    for &v in VECTORS {
        vector_case(who, layout, v);
    }
}
matrix!(next_git_runs_nothing_planted: users_next_git_runs_nothing_planted_main_checkout, users_next_git_runs_nothing_planted_main_checkout_unprivileged, users_next_git_runs_nothing_planted_linked_worktree, users_next_git_runs_nothing_planted_linked_worktree_unprivileged);

// Ways in found while writing these tests, closed since: a submodule's git dir's
// `commondir`, another linked worktree's `config.worktree`.

#[test]
fn users_next_git_runs_nothing_planted_submodule_commondir_main_checkout() {
    vector_case(Who::User, Layout::Main, Vector::SubmoduleCommondir);
}

#[test]
fn users_next_git_runs_nothing_planted_submodule_commondir_linked_worktree() {
    vector_case(Who::User, Layout::Linked, Vector::SubmoduleCommondir);
}

#[test]
fn users_next_git_runs_nothing_planted_other_worktree_config_main_checkout() {
    vector_case(Who::User, Layout::Main, Vector::OtherWorktreeConfig);
}

// ---- 4. Commits from inside the wall.

/// Polls until the watcher has emptied the linked worktree's quarantine of loose objects.
fn wait_for_quarantine(s: &Scene) {
    let q = s.git_dir.join("landwall-objects");
    let pending = || {
        let Ok(dirs) = std::fs::read_dir(&q) else {
            return false;
        };
        dirs.flatten().any(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            name.len() == 2 && std::fs::read_dir(d.path()).is_ok_and(|mut e| e.next().is_some())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while pending() {
        assert!(Instant::now() < deadline, "{} was not emptied", q.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// With every protected path present and held, the agent's commit works and the main
/// checkout sees it; the user commits after it.
fn commits_work(who: Who, layout: Layout) {
    let s = Scene::new("prot-commit", who, layout, true);
    let out = s.run_walled(
        "set -e; export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x.invalid; \
         echo agent > work.txt; git add work.txt; git commit -qm 'agent commit'; git status --short >/dev/null",
    );
    assert!(out.status.success(), "{}", describe(&out));
    let branch = match layout {
        Layout::Main => "main",
        Layout::Linked => {
            wait_for_quarantine(&s);
            "task"
        }
    };
    let mut log = s.cmd("git");
    log.args(["log", "--format=%s", branch])
        .current_dir(&s.main);
    let log = output(&mut log);
    assert!(log.status.success(), "{}", describe(&log));
    assert_eq!(
        stdout(&log),
        "agent commit\nsubmodule\ninitial\n",
        "{}",
        describe(&out)
    );
    let mut fsck = s.cmd("git");
    fsck.args(["fsck", "--strict", "--no-progress"])
        .current_dir(&s.main);
    let fsck = output(&mut fsck);
    assert!(fsck.status.success(), "{}", describe(&fsck));
    let mut show = s.cmd("git");
    show.args(["show", &format!("{branch}:work.txt")])
        .current_dir(&s.main);
    assert_eq!(stdout(&output(&mut show)), "agent\n");
    for g in users_next_git(&s, &s.wt) {
        assert!(g.status.success(), "{}", describe(&g));
    }
}
matrix!(commits_work: commits_from_inside_reach_the_repository_main_checkout, commits_from_inside_reach_the_repository_main_checkout_unprivileged, commits_from_inside_reach_the_repository_linked_worktree, commits_from_inside_reach_the_repository_linked_worktree_unprivileged);

// ---- 5. Where the private mount namespace is refused.

/// Under a seccomp filter refusing `unshare(CLONE_NEWNS)`: with `protect_required` nothing
/// starts; without it the launch says so and the rewrite gets through (the documented
/// exposure). With the namespace, the same rewrite is refused.
fn namespace_refused(who: Who, layout: Layout) {
    let s = Scene::new("prot-nons", who, layout, true);
    let envrc = s.at(".envrc");
    let before = std::fs::read(&envrc).expect("read .envrc");
    let script = "printf 'evil\\n' > .envrc";
    let refused = |cfg: Option<&Path>| {
        let mut c = s.cmd(landwall_e2e::helper());
        c.args(["nounshare", "--"])
            .arg(s.sb.shims().join("claude"))
            .args(["/bin/sh", "-c", script]);
        if let Some(cfg) = cfg {
            c.env("LANDWALL_CONFIG", cfg);
        }
        remove_if_there(&s.wt.join("marker"));
        output(&mut c)
    };
    // With the namespace: refused.
    let out = s.run_walled(script);
    assert_eq!(
        std::fs::read(&envrc).expect("read"),
        before,
        "{}",
        describe(&out)
    );
    // Refused, and required: nothing starts.
    let cfg = s.sb.config("protect_required = true\n");
    let out = refused(Some(&cfg));
    assert_eq!(out.status.code(), Some(100), "{}", describe(&out));
    assert!(!s.sb.ran_in(&s.wt), "the agent started: {}", describe(&out));
    assert_eq!(
        std::fs::read(&envrc).expect("read"),
        before,
        "{}",
        describe(&out)
    );
    // Refused, not required: said, and the rewrite gets through.
    let out = refused(None);
    assert!(s.sb.ran_in(&s.wt), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no private mount namespace here") && err.contains("protected paths"),
        "{}",
        describe(&out)
    );
    assert_eq!(
        std::fs::read(&envrc).expect("read"),
        b"evil\n",
        "{}",
        describe(&out)
    );
}
matrix!(namespace_refused: protected_paths_without_a_namespace_main_checkout, protected_paths_without_a_namespace_main_checkout_unprivileged, protected_paths_without_a_namespace_linked_worktree, protected_paths_without_a_namespace_linked_worktree_unprivileged);

// ---- Found by review: a repository nested in one launch (unstaged: the user's git runs
// nothing of it) and staged as a submodule in the next, where nothing in it changes.

fn planted_in_one_launch_staged_in_the_next(who: Who, layout: Layout) {
    let s = Scene::new("prot-twolaunch", who, layout, false);
    let payload = format!(
        "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > lw-payload; chmod +x lw-payload",
        pwned = q(s.pwned())
    );
    let first = format!(
        "{payload}; rm -rf lw-lib && git init -q lw-lib && git -C lw-lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && git -C lw-lib config core.fsmonitor \"$PWD/lw-payload\"; echo first=$?"
    );
    let second = "git update-index --add --cacheinfo 160000,$(git -C lw-lib rev-parse HEAD),lw-lib; echo second=$?";
    let out = s.run_walled(&first);
    assert!(stdout(&out).contains("first=0"), "{}", describe(&out));
    // The change times of what the first launch wrote are now older than the second's start.
    std::thread::sleep(Duration::from_millis(50));
    let out = s.run_walled(second);
    assert!(stdout(&out).contains("second=0"), "{}", describe(&out));
    let gits = users_next_git(&s, &s.wt);
    assert!(
        !s.pwned().exists(),
        "{who:?} {layout:?}: the user's git ran the nested repository's payload:\n{}\n{}",
        describe(&out),
        gits.iter().map(describe).collect::<Vec<_>>().join("\n")
    );
    // The control: the same two steps outside the wall.
    remove_if_there(&s.wt.join("lw-lib"));
    for name in std::fs::read_dir(&s.wt).expect("wt").flatten() {
        if name.file_name().to_string_lossy().starts_with("lw-lib") {
            remove_if_there(&name.path());
        }
    }
    let _reset = s.user_git(&s.wt, &["rm", "-q", "--cached", "-f", "lw-lib"]);
    let out = s.run_control(&first);
    assert!(stdout(&out).contains("first=0"), "{}", describe(&out));
    let out = s.run_control(second);
    assert!(stdout(&out).contains("second=0"), "{}", describe(&out));
    let gits = users_next_git(&s, &s.wt);
    assert!(
        s.pwned().exists(),
        "control: the payload did not run:\n{}",
        gits.iter().map(describe).collect::<Vec<_>>().join("\n")
    );
}
matrix!(planted_in_one_launch_staged_in_the_next: a_repository_planted_in_one_launch_and_staged_in_the_next_is_set_aside_main_checkout, a_repository_planted_in_one_launch_and_staged_in_the_next_is_set_aside_main_checkout_unprivileged, a_repository_planted_in_one_launch_and_staged_in_the_next_is_set_aside_linked_worktree, a_repository_planted_in_one_launch_and_staged_in_the_next_is_set_aside_linked_worktree_unprivileged);

/// Found by review: the agent takes, before it plants `.envrc`, the names the watcher would
/// set it aside under (its pid is in /proc; the names were `<name>.landwall-swept-<pid>`,
/// then `-1`, `-2`, …), and the watcher gave up after 64 taken names, leaving `.envrc` in
/// place. The names are random now. The control (the same script outside the wall) shows
/// the test sees a `.envrc` left in place.
fn taken_names(who: Who, layout: Layout) {
    let s = Scene::new("prot-taken", who, layout, false);
    let script = "n=0; for p in /proc/[0-9]*; do c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); \
        case \"$c\" in *shims/claude*) w=${p#/proc/}; [ \"$w\" = $$ ] && continue; \
        touch .envrc.landwall-swept-$w; i=1; while [ $i -le 200 ]; do touch .envrc.landwall-swept-$w-$i; i=$((i+1)); done; n=$((n+1));; esac; done; \
        echo squatted=$n; printf '#!/bin/sh\\necho planted\\n' > .envrc";
    let envrc = s.wt.join(".envrc");
    let out = s.run_walled(script);
    assert!(
        !stdout(&out).contains("squatted=0"),
        "premise: the agent found no watcher to take names from:\n{}",
        describe(&out)
    );
    assert!(
        gone_soon(&envrc),
        "{} was left in place:\n{}",
        envrc.display(),
        describe(&out)
    );
    let planted = std::fs::read_dir(&s.wt)
        .expect("read the worktree")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".envrc.landwall-swept-")
        })
        .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("planted")));
    assert!(
        planted,
        "the planted .envrc was not kept aside:\n{}",
        describe(&out)
    );
    let out = s.run_control(script);
    assert!(
        envrc.exists(),
        "control: .envrc is not there:\n{}",
        describe(&out)
    );
}
matrix!(taken_names: names_taken_first_do_not_stop_the_sweep_main_checkout, names_taken_first_do_not_stop_the_sweep_main_checkout_unprivileged, names_taken_first_do_not_stop_the_sweep_linked_worktree, names_taken_first_do_not_stop_the_sweep_linked_worktree_unprivileged);

/// An index the watcher cannot read (one the agent shaped so that git would read it but a
/// check would not) is set aside whole at the exit: git then enters no submodule. Here the
/// agent writes an index of an unknown version; the control shows it stays where it is.
fn unreadable_index(who: Who, layout: Layout) {
    let s = Scene::new("prot-badindex", who, layout, false);
    let index = s.git_dir.join("index");
    let script = format!(
        "printf 'DIRC\\000\\000\\000\\011\\000\\000\\000\\000' > {i}; echo wrote=$?",
        i = q(&index)
    );
    let out = s.run_walled(&script);
    assert!(stdout(&out).contains("wrote=0"), "{}", describe(&out));
    let aside = std::fs::read_dir(&s.git_dir)
        .expect("git dir")
        .flatten()
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("index.landwall-swept-")
        });
    assert!(
        aside,
        "{who:?} {layout:?}: the index was not set aside:\n{}",
        describe(&out)
    );
    assert!(
        !index.exists(),
        "{who:?} {layout:?}: an index is still there"
    );
    let out = s.run_control(&script);
    assert!(stdout(&out).contains("wrote=0"), "{}", describe(&out));
    assert!(index.exists(), "control: the index is gone");
}
matrix!(unreadable_index: an_index_the_watcher_cannot_read_is_set_aside_main_checkout, an_index_the_watcher_cannot_read_is_set_aside_main_checkout_unprivileged, an_index_the_watcher_cannot_read_is_set_aside_linked_worktree, an_index_the_watcher_cannot_read_is_set_aside_linked_worktree_unprivileged);
