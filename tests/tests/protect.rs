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
        self.settle();
        out
    }

    /// Waits (60 s at most, then fails the test) until no watcher of the worktree runs: each holds the record's
    /// lock until its last judgement, which comes just after its agent's last process has
    /// ended, so what the test does next is not taken for the agent's doing.
    fn settle(&self) {
        let home = match self.who {
            Who::Root => PathBuf::from("/root"),
            Who::User => self.sb.home(),
        };
        landwall_e2e::settle(&home, &self.wt);
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
    /// Found by review (main checkout only): a repository left unstaged in the other linked
    /// worktree (`other/lw-lib`, as a launch there may leave one), staged from the main
    /// checkout in that worktree's index (`.git/worktrees/other/index`): the user's
    /// `git status` there enters it.
    OtherWorktreeIndex,
    /// Main checkout only: the other linked worktree's submodule's git dir
    /// (`.git/worktrees/other/modules/sm/config`) given `core.fsmonitor`.
    OtherWorktreeSubmoduleConfig,
    /// Found by review (main checkout only): a linked worktree inside the main checkout
    /// (`.claude/worktrees/n`, where Claude Code makes them) has its `.git` file pointed at a
    /// git dir the agent wrote: the user's git there runs its `core.fsmonitor`.
    NestedWorktreeGitFile,
    /// Main checkout only: a repository made at that nested worktree's unpopulated gitlink
    /// `sm` (in place, and renamed into place): the user's `git status` there enters it.
    NestedWorktreeSubmodule,
    /// Main checkout only: the agent adds a linked worktree (`.claude/worktrees/x`, as
    /// `claude --worktree` does) and points its `.git` at a git dir of its own.
    AddedGitFile,
    /// The same, with the new worktree's `commondir` naming a copy of the common dir.
    AddedCommondir,
    /// The same, with a repository nested and staged in the new worktree.
    AddedSubmodule,
    /// The same, with `core.fsmonitor` in the new worktree's `config.worktree`
    /// (`extensions.worktreeConfig`).
    AddedWorktreeConfig,
    /// The agent adds a linked worktree under `/tmp` (which it may write) and stages a
    /// repository in it.
    AddedOutside,
    /// A linked worktree the user made under `/tmp`, which the agent may write: its `.git`
    /// pointed at a git dir the agent wrote.
    WritableWorktreeGitFile,
    /// Found by review: that worktree renamed away whole (its mounts with it) and a
    /// repository of the agent's made in its place.
    WritableWorktreeRenamed,

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

/// A step that puts back the submodules' `.git` a walled run set aside in the other
/// worktree, so that the control (the same script outside the wall) meets them as the
/// agent did. Inside the wall it reaches nothing: the other worktree is not granted.
fn put_back_in_other(s: &Scene) -> String {
    let other = q(s.other.as_ref().expect("a main checkout's other worktree"));
    format!("for g in {other}/*/.git.landwall-swept-* {other}/*/*/.git.landwall-swept-*; do [ -e \"$g\" ] && mv \"$g\" \"${{g%%.landwall-swept-*}}\"; done; true")
}

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
        (Vector::OtherWorktreeIndex, _) => vec![
            put_back_in_other(s),
            format!("GIT_INDEX_FILE={common}/worktrees/other/index git update-index --add --cacheinfo 160000,$(cat lw-sha),lw-lib"),
            format!("cp {common}/worktrees/other/index lw-idx && GIT_INDEX_FILE=lw-idx git update-index --add --cacheinfo 160000,$(cat lw-sha),lw-lib && cat lw-idx > {common}/worktrees/other/index"),
            format!("mv -f lw-idx {common}/worktrees/other/index"),
        ],
        (Vector::OtherWorktreeSubmoduleConfig, _) => vec![
            put_back_in_other(s),
            format!("{FSMONITOR} >> {common}/worktrees/other/modules/sm/config"),
            format!("{FSMONITOR} >> {common}/worktrees/other/modules/vendor/lib/config"),
            format!("cp {common}/worktrees/other/modules/sm/config lw-smc && {FSMONITOR} >> lw-smc && mv -f lw-smc {common}/worktrees/other/modules/sm/config"),
        ],
        (Vector::NestedWorktreeGitFile, _) => vec![
            "rm -rf lw-evil && git init -q lw-evil && git -C lw-evil config core.fsmonitor \"$P\"".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > .claude/worktrees/n/.git".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > lw-gf && mv -f lw-gf .claude/worktrees/n/.git".into(),
        ],
        (Vector::AddedGitFile, _) => vec![
            ADD_X.into(),
            "rm -rf lw-evil && git init -q lw-evil && git -C lw-evil config core.fsmonitor \"$P\"".into(),
            "printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > .claude/worktrees/x/.git".into(),
        ],
        (Vector::AddedCommondir, _) => vec![
            ADD_X.into(),
            format!("rm -rf lw-common && mkdir lw-common && cp -a {common}/config {common}/hooks {common}/objects {common}/refs {common}/HEAD {common}/worktrees lw-common/ && git config -f lw-common/config core.fsmonitor \"$P\""),
            "printf '%s\\n' \"$PWD/lw-common\" > .git/worktrees/x/commondir".into(),
        ],
        (Vector::AddedSubmodule, _) => vec![
            ADD_X.into(),
            format!("cd .claude/worktrees/x && {NEST_LIB} && {STAGE_LIB}"),
        ],
        (Vector::AddedWorktreeConfig, _) => vec![
            ADD_X.into(),
            "git -C .claude/worktrees/x config --worktree core.fsmonitor \"$P\"".into(),
        ],
        (Vector::AddedOutside, _) => {
            let d = q(tmp_worktree(s, "added"));
            vec![
                format!("rm -rf {d}; git worktree prune; git worktree add -q -B y {d}"),
                format!("cd {d} && {NEST_LIB} && {STAGE_LIB}"),
            ]
        }
        (Vector::WritableWorktreeRenamed, _) => {
            let d = q(tmp_worktree(s, "hot"));
            vec![
                format!("mv {d} {d}.lw-old && mkdir {d} && cd {d} && git init -q && git config core.fsmonitor \"$P\""),
            ]
        }

        (Vector::WritableWorktreeGitFile, _) => {
            let d = q(tmp_worktree(s, "hot"));
            vec![
                "rm -rf lw-evil && git init -q lw-evil && git -C lw-evil config core.fsmonitor \"$P\"".into(),
                format!("printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > {d}/.git"),
                format!("printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > {d}/lw-gf && mv -f {d}/lw-gf {d}/.git"),
            ]
        }
        (Vector::NestedWorktreeSubmodule, _) => vec![
            "git init -q .claude/worktrees/n/sm && git -C .claude/worktrees/n/sm config core.fsmonitor \"$P\"".into(),
            "rm -rf lw-stash && mkdir lw-stash && git init -q lw-stash/sm && git -C lw-stash/sm config core.fsmonitor \"$P\" && rm -rf .claude/worktrees/n/sm && mv lw-stash/sm .claude/worktrees/n/sm".into(),
        ],
    };
    for (i, step) in steps.iter().enumerate() {
        sc.push_str(&format!("( {step} ) 2>&1; echo \"step {i}: $?\"\n"));
    }
    sc
}

/// Adds the linked worktree `.claude/worktrees/x` from the main checkout (again, after an
/// earlier run of the same script: whatever it left is removed first).
const ADD_X: &str = "rm -rf .claude/worktrees/x; git worktree prune; mkdir -p .claude/worktrees && git worktree add -q -B x .claude/worktrees/x";

/// A linked worktree's place under `/tmp`, which every agent may write, for one scene.
fn tmp_worktree(s: &Scene, tag: &str) -> PathBuf {
    let name = s.sb.root.file_name().expect("scene name").to_string_lossy();
    PathBuf::from(format!("/tmp/lw-{tag}-{name}"))
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
        Vector::WorktreeConfig | Vector::OtherWorktreeConfig | Vector::AddedWorktreeConfig => {
            s.sb.git_root(&s.main, &["config", "extensions.worktreeConfig", "true"]);
        }
        Vector::OtherWorktreeIndex => {
            // What a launch in `other` may have left there: a repository, unstaged, whose
            // fsmonitor is the payload the main checkout's agent writes.
            let other = s.other.clone().expect("a main checkout's other worktree");
            let lib = other.join("lw-lib");
            s.sb.git_root(&other, &["init", "-q", "lw-lib"]);
            s.sb.git_root(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
            let payload = s.wt.join("lw-payload");
            s.sb.git_root(
                &lib,
                &["config", "core.fsmonitor", payload.to_str().expect("utf8")],
            );
            let sha = output(Command::new("git").args([
                "-C",
                lib.to_str().expect("utf8"),
                "rev-parse",
                "HEAD",
            ]));
            std::fs::write(s.wt.join("lw-sha"), stdout(&sha).trim()).expect("write lw-sha");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&other, uid, gid);
                chown_tree(&s.wt.join("lw-sha"), uid, gid);
            }
        }
        Vector::OtherWorktreeSubmoduleConfig => {
            let other = s.other.clone().expect("a main checkout's other worktree");
            // A submodule whose name has a `/` (its git dir two levels down in `modules/`,
            // found by review), in `other` too.
            let src = s.sb.root.join("subsrc");
            s.sb.git_root(
                &s.main,
                &[
                    "-c",
                    "protocol.file.allow=always",
                    "submodule",
                    "add",
                    "-q",
                    src.to_str().expect("utf8"),
                    "vendor/lib",
                ],
            );
            s.sb.git_root(&s.main, &["commit", "-qm", "vendor/lib"]);
            s.sb.git_root(&other, &["reset", "-q", "--hard", "main"]);
            s.sb.git_root(
                &other,
                &[
                    "-c",
                    "protocol.file.allow=always",
                    "submodule",
                    "update",
                    "-q",
                    "--init",
                ],
            );
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&other, uid, gid);
                chown_tree(&s.common, uid, gid);
            }
        }
        Vector::NestedWorktreeGitFile | Vector::NestedWorktreeSubmodule => {
            nest_worktree(&s);
        }
        Vector::WritableWorktreeGitFile | Vector::WritableWorktreeRenamed => {
            let d = tmp_worktree(&s, "hot");
            remove_if_there(&d);
            s.sb.git_root(
                &s.main,
                &[
                    "worktree",
                    "add",
                    "-q",
                    d.to_str().expect("utf8"),
                    "-b",
                    "hot",
                ],
            );
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&d, uid, gid);
                chown_tree(&s.common, uid, gid);
            }
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
        Vector::OtherWorktreeConfig
        | Vector::OtherWorktreeIndex
        | Vector::OtherWorktreeSubmoduleConfig => {
            s.other.clone().expect("a main checkout's other worktree")
        }
        Vector::NestedWorktreeGitFile | Vector::NestedWorktreeSubmodule => {
            s.wt.join(".claude/worktrees/n")
        }
        Vector::AddedGitFile
        | Vector::AddedCommondir
        | Vector::AddedSubmodule
        | Vector::AddedWorktreeConfig => s.wt.join(".claude/worktrees/x"),
        Vector::AddedOutside => tmp_worktree(&s, "added"),
        Vector::WritableWorktreeGitFile | Vector::WritableWorktreeRenamed => {
            tmp_worktree(&s, "hot")
        }
        _ => s.wt.clone(),
    };
    let script = plant_script(&s, v);
    let pwned = s.pwned();
    let out = s.run_walled(&script);
    for g in users_next_git(&s, &dir) {
        // A worktree the agent added outside the checkout is no repository any more.
        assert!(
            g.status.success() || v == Vector::AddedOutside,
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
    if dir.starts_with("/tmp") {
        remove_if_there(&dir);
        let mut old = dir.clone().into_os_string();
        old.push(".lw-old");
        remove_if_there(Path::new(&old));
    }
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

/// Adds a linked worktree inside a main checkout's scene, where Claude Code makes them
/// (`.claude/worktrees/n`), and returns its path.
fn nest_worktree(s: &Scene) -> PathBuf {
    let n = s.wt.join(".claude/worktrees/n");
    std::fs::create_dir_all(n.parent().expect("parent")).expect("mkdir .claude/worktrees");
    s.sb.git_root(
        &s.main,
        &[
            "worktree",
            "add",
            "-q",
            n.to_str().expect("utf8"),
            "-b",
            "n",
        ],
    );
    if s.who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&s.wt.join(".claude"), uid, gid);
        chown_tree(&s.common, uid, gid);
    }
    n
}

// Found by review: from a main checkout, the other linked worktrees' git state and the
// linked worktrees inside the main checkout.

fn other_worktrees(who: Who) {
    for v in [
        Vector::OtherWorktreeIndex,
        Vector::OtherWorktreeSubmoduleConfig,
        Vector::NestedWorktreeGitFile,
        Vector::NestedWorktreeSubmodule,
    ] {
        vector_case(who, Layout::Main, v);
    }
}

// Found by review: a linked worktree the agent adds inside the wall is its whole, and one
// the user keeps under a directory the agent may write is the agent's to rewrite.

fn added_worktrees(who: Who) {
    for v in [
        Vector::AddedGitFile,
        Vector::AddedCommondir,
        Vector::AddedSubmodule,
        Vector::AddedWorktreeConfig,
        Vector::AddedOutside,
        Vector::WritableWorktreeGitFile,
        Vector::WritableWorktreeRenamed,
    ] {
        vector_case(who, Layout::Main, v);
    }
}

/// A sandbox with the stand-in agent, and a repository with one commit at
/// `/tmp/lw-<tag>-<sandbox>/main` (every agent may write `/tmp`): the sandbox, its name,
/// the directory above the checkout and the checkout.
fn tmp_repo(name: &str, tag: &str) -> (Sandbox, String, PathBuf, PathBuf) {
    let sb = Sandbox::new(name);
    std::fs::write(
        sb.root.join("agent.sh"),
        "#!/bin/sh\necho ran > \"$PWD/marker\"\nexec \"$@\"\n",
    )
    .expect("write agent script");
    install(
        &sb.root.join("agent.sh"),
        &sb.agents().join("claude-real"),
        &["-m", "0755"],
    );
    let name = sb
        .root
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let top = PathBuf::from(format!("/tmp/lw-{tag}-{name}"));
    remove_if_there(&top);
    let main = top.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git_root(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git_root(&main, &["add", "-A"]);
    sb.git_root(&main, &["commit", "-qm", "initial"]);
    (sb, name, top, main)
}

/// `program` as `who`, with the sandbox's clean environment, in `dir`.
fn as_who(sb: &Sandbox, who: Who, program: &str, dir: &Path) -> Command {
    let mut c = match who {
        Who::Root => Command::new(program),
        Who::User => {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={TEST_USER}"))
                .arg(format!("--regid={TEST_USER}"))
                .args(["--init-groups", "--"])
                .arg(program);
            c
        }
    };
    sb.clean_env(&mut c);
    c.current_dir(dir);
    c
}

/// Found by review: from a linked worktree too, the user's other linked worktree kept under
/// `/tmp` (its `.git` rewritten, or it renamed away and rebuilt).
fn writable_sibling(who: Who) {
    for v in [
        Vector::WritableWorktreeGitFile,
        Vector::WritableWorktreeRenamed,
    ] {
        vector_case(who, Layout::Linked, v);
    }
}

#[test]
fn users_next_git_in_a_worktree_kept_in_tmp_runs_nothing_planted_from_a_linked_worktree() {
    writable_sibling(Who::Root);
}

#[test]
fn users_next_git_in_a_worktree_kept_in_tmp_runs_nothing_planted_from_a_linked_worktree_unprivileged(
) {
    writable_sibling(Who::User);
}

/// Found by review: a linked worktree whose main checkout is kept under `/tmp` (which every
/// agent may write): its agent gives the repository's `config` `core.fsmonitor`, writes a
/// pre-commit hook and the main checkout's `.envrc`. Walled: each is refused (the main
/// checkout's protected paths are held as its own launch holds them), and the user's next
/// `git status` and `git commit` there run nothing. The control: the same outside the wall.
fn common_dir_in_tmp(who: Who) {
    for walled in [false, true] {
        let (sb, _, top, main) = tmp_repo("prot24-common-tmp", "common");
        let wt = sb.root.join("linked");
        sb.git_root(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                wt.to_str().expect("utf8"),
                "-b",
                "w",
            ],
        );
        if who == Who::User {
            let (uid, gid) = test_user();
            for d in [&top, &wt, &sb.home(), &sb.outside()] {
                chown_tree(d, uid, gid);
            }
        }
        std::thread::sleep(Duration::from_millis(25));
        let pwned = sb.outside().join("pwned");
        let payload = top.join("lw-pay");
        let m = q(&main);
        let script = format!(
            "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > {pay}; chmod +x {pay}; git config -f {m}/.git/config core.fsmonitor {pay}; echo a=$?; cp {pay} {m}/.git/hooks/pre-commit; echo b=$?; echo planted > {m}/.envrc; echo c=$?",
            pwned = q(&pwned),
            pay = q(&payload),
        );
        let who_cmd = |program: &str, dir: &Path| as_who(&sb, who, program, dir);
        let out = if walled {
            let mut c = who_cmd(sb.shims().join("claude").to_str().expect("utf8"), &wt);
            c.args(["/bin/sh", "-c", &script]);
            output_within(&mut c, Duration::from_secs(60))
        } else {
            let mut c = who_cmd("/bin/sh", &wt);
            c.args(["-c", &script]);
            output(&mut c)
        };
        let mut gits = Vec::new();
        for args in [
            &["status", "--short"][..],
            &[
                "-c",
                "user.name=u",
                "-c",
                "user.email=u@u.invalid",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "u",
            ][..],
        ] {
            let mut g = who_cmd("git", &main);
            g.args(args);
            gits.push(output(&mut g));
        }
        let ran = pwned.exists();
        let envrc = holds_planted(&main.join(".envrc"));
        remove_if_there(&top);
        assert_eq!(
            (ran, envrc),
            (!walled, !walled),
            "{who:?} (walled: {walled}): the main checkout in /tmp ran the payload, .envrc planted:\n{}\n{}",
            describe(&out),
            describe_all(&gits)
        );
    }
}

#[test]
fn a_main_checkout_kept_in_tmp_is_protected_from_its_linked_worktree() {
    common_dir_in_tmp(Who::Root);
}

#[test]
fn a_main_checkout_kept_in_tmp_is_protected_from_its_linked_worktree_unprivileged() {
    common_dir_in_tmp(Who::User);
}

#[test]
fn users_next_git_in_a_worktree_the_agent_added_runs_nothing_planted() {
    added_worktrees(Who::Root);
}

#[test]
fn users_next_git_in_a_worktree_the_agent_added_runs_nothing_planted_unprivileged() {
    added_worktrees(Who::User);
}

/// The main checkout's agent adds a linked worktree (`.claude/worktrees/x`) in a repository
/// that commits protected files, rewrites one of them there and plants `.envrc` and
/// `.vscode/tasks.json` (not committed in this scene: removed first). Walled: what it planted
/// or changed is set aside, what is the same as the user's own in the main checkout stays
/// (nothing to do again after `claude --worktree`), and the first launch in the new worktree
/// takes nothing of it for the user's. The control: the same outside the wall, all stays.
fn added_worktree_files(who: Who) {
    let script = format!("{ADD_X} && cd .claude/worktrees/x && rm -f .envrc .vscode/tasks.json && echo planted > .envrc && echo planted > .vscode/tasks.json && echo '{{\"hooks\": {{\"planted\": 1}}}}' > .claude/settings.json; echo wrote=$?");
    let x = |s: &Scene| s.wt.join(".claude/worktrees/x");
    {
        let s = Scene::new("prot24-added-ctl", who, Layout::Main, true);
        let out = s.run_control(&script);
        assert!(
            holds_planted(&x(&s).join(".envrc"))
                && holds_planted(&x(&s).join(".vscode/tasks.json")),
            "control: the files were not written, so the walled check proves nothing:\n{}",
            describe(&out)
        );
    }
    let s = Scene::new("prot24-added", who, Layout::Main, true);
    let out = s.run_walled(&script);
    assert!(stdout(&out).contains("wrote=0"), "{}", describe(&out));
    let x = x(&s);
    for rel in [".envrc", ".vscode/tasks.json"] {
        assert!(
            unplanted_soon(&x.join(rel)),
            "{who:?}: the agent left {rel} in the worktree it added:\n{}",
            describe(&out)
        );
    }
    let settings = x.join(".claude/settings.json");
    assert!(
        !std::fs::read_to_string(&settings).is_ok_and(|t| t.contains("planted")),
        "{who:?}: the changed .claude/settings.json stayed:\n{}",
        describe(&out)
    );
    for (rel, text) in PROJECT_FILES {
        if [".envrc", ".vscode/tasks.json", ".claude/settings.json"].contains(rel) {
            continue;
        }
        assert_eq!(
            std::fs::read_to_string(x.join(rel)).ok().as_deref(),
            Some(*text),
            "{who:?}: {rel}, checked out as the user has it, was set aside:\n{}",
            describe(&out)
        );
    }
    let mut c = s.walled("echo in-x");
    c.current_dir(&x);
    let two = output_within(&mut c, Duration::from_secs(60));
    assert!(stdout(&two).contains("in-x"), "{}", describe(&two));
    for rel in [".envrc", ".vscode/tasks.json", ".claude/settings.json"] {
        assert!(
            !holds_planted(&x.join(rel)),
            "{who:?}: {rel} is back:\n{}",
            describe(&two)
        );
    }
}

#[test]
fn a_worktree_the_agent_added_keeps_nothing_it_planted() {
    added_worktree_files(Who::Root);
}

#[test]
fn a_worktree_the_agent_added_keeps_nothing_it_planted_unprivileged() {
    added_worktree_files(Who::User);
}

/// The main checkout's agent adds a linked worktree and, still running, stages a repository
/// in it (its `core.fsmonitor` the payload) and writes `.envrc` there, then waits. Walled:
/// both are set aside while it runs, and the user's `git status` in the new worktree runs
/// nothing meanwhile. The control: the same outside the wall, and the payload runs.
fn added_worktree_while_it_runs(who: Who) {
    let script = |s: &Scene| {
        format!(
            "{payload}; {ADD_X} && cd .claude/worktrees/x && {NEST_LIB} && {STAGE_LIB} && echo planted > .envrc && touch ../../../lw-ready; i=0; while [ ! -e ../../../lw-go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo done",
            payload = issue24_payload(s)
        )
    };
    let x = |s: &Scene| s.wt.join(".claude/worktrees/x");
    {
        let s = Scene::new("prot24-added-live-ctl", who, Layout::Main, false);
        std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
        let out = s.run_control(&script(&s));
        let gits = users_next_git(&s, &x(&s));
        assert!(
            s.pwned().exists(),
            "{who:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
            describe(&out),
            describe_all(&gits)
        );
    }
    let s = Scene::new("prot24-added-live", who, Layout::Main, false);
    let mut c = s.walled(&script(&s));
    c.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = c.spawn().expect("spawn the agent");
    let ready = appears_soon(&s.wt.join("lw-ready"));
    let x = x(&s);
    let git_aside = aside_or_gone_soon(&x.join("lw-lib/.git"));
    let envrc_aside = unplanted_soon(&x.join(".envrc"));
    let gits = users_next_git(&s, &x);
    std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
    let out = child.wait_with_output().expect("wait for the agent");
    s.settle();
    assert!(ready, "the agent did not plant:\n{}", describe(&out));
    assert!(
        !s.pwned().exists() && git_aside && envrc_aside,
        "{who:?}: while the agent ran, its plants in the worktree it added stood (payload ran: {}, lw-lib/.git set aside: {git_aside}, .envrc: {envrc_aside}):\n{}\n{}",
        pwned_text(&s),
        describe(&out),
        describe_all(&gits)
    );
}

#[test]
fn a_worktree_the_agent_adds_is_judged_while_it_runs() {
    added_worktree_while_it_runs(Who::Root);
}

#[test]
fn a_worktree_the_agent_adds_is_judged_while_it_runs_unprivileged() {
    added_worktree_while_it_runs(Who::User);
}

/// The main checkout's agent adds a linked worktree and leaves a process of its own session
/// that, a second after the agent has exited, stages a repository there (moved into place)
/// and writes `.envrc`, then stays. Walled: while it still runs, both are set aside and the
/// user's git there runs nothing. The control: the same outside the wall, and it runs.
fn added_worktree_left_running(who: Who) {
    let script = |s: &Scene| {
        format!(
            "{payload}; {ADD_X} && cd .claude/worktrees/x && rm -rf .lw-stash && mkdir .lw-stash && git init -q .lw-stash/lib && git -C .lw-stash/lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && git -C .lw-stash/lib config core.fsmonitor \"$P\" && git update-index --add --cacheinfo 160000,$(git -C .lw-stash/lib rev-parse HEAD),lw-lib && setsid sh -c 'sleep 1; mv .lw-stash/lib lw-lib; echo planted > .envrc; echo $$ > lw-bg-pid; echo done > lw-bg-done; exec sleep 30' </dev/null >/dev/null 2>&1 & echo first=$?",
            payload = issue24_payload(s)
        )
    };
    let x = |s: &Scene| s.wt.join(".claude/worktrees/x");
    {
        let s = Scene::new("prot24-added-linger-ctl", who, Layout::Main, false);
        let one = s.run_control(&script(&s));
        assert!(
            appears_soon(&x(&s).join("lw-bg-done")),
            "control: the background did not plant:\n{}",
            describe(&one)
        );
        let gits = users_next_git(&s, &x(&s));
        end_lingering(&x(&s).join("lw-bg-pid"));
        assert!(
            s.pwned().exists() && holds_planted(&x(&s).join(".envrc")),
            "{who:?}: control: the plant did not take, so the walled check proves nothing:\n{}\n{}",
            describe(&one),
            describe_all(&gits)
        );
    }
    let s = Scene::new("prot24-added-linger", who, Layout::Main, false);
    let mut c = s.walled(&script(&s));
    let one = output_within(&mut c, Duration::from_secs(60));
    assert!(stdout(&one).contains("first=0"), "{}", describe(&one));
    let x = x(&s);
    let done = appears_soon(&x.join("lw-bg-done"));
    assert!(done, "the background did not plant:\n{}", describe(&one));
    let git_aside = aside_or_gone_soon(&x.join("lw-lib/.git"));
    let envrc_aside = unplanted_soon(&x.join(".envrc"));
    let gits = users_next_git(&s, &x);
    end_lingering(&x.join("lw-bg-pid"));
    s.settle();
    assert!(
        !s.pwned().exists() && git_aside && envrc_aside,
        "{who:?}: what the agent left running planted in the worktree it added (payload ran: {}, lw-lib/.git set aside: {git_aside}, .envrc: {envrc_aside}):\n{}\n{}",
        pwned_text(&s),
        describe(&one),
        describe_all(&gits)
    );
}

#[test]
fn what_the_agent_left_running_plants_in_vain_in_a_worktree_it_added() {
    added_worktree_left_running(Who::Root);
}

#[test]
fn what_the_agent_left_running_plants_in_vain_in_a_worktree_it_added_unprivileged() {
    added_worktree_left_running(Who::User);
}

/// While the main checkout's agent runs, the user adds a linked worktree of their own
/// outside every directory the agent may write; the agent gives it `core.fsmonitor` in its
/// `config.worktree` (in the main checkout's `.git`, which the agent may write). Walled: the
/// worktree stays the user's (their git there works) and the planted file is set aside, so
/// nothing runs. The control: the same outside the wall, and the payload runs.
fn users_worktree_added_while_it_runs(who: Who) {
    let script = |s: &Scene| {
        format!(
            "{payload}; touch lw-ready; i=0; while [ ! -e .git/worktrees/mine/commondir ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.2; {FSMONITOR} > .git/worktrees/mine/config.worktree; echo wrote=$?",
            payload = issue24_payload(s)
        )
    };
    let scene = |name: &str| {
        let s = Scene::new(name, who, Layout::Main, false);
        s.sb.git_root(&s.main, &["config", "extensions.worktreeConfig", "true"]);
        if who == Who::User {
            let (uid, gid) = test_user();
            chown_tree(&s.common.join("config"), uid, gid);
        }
        std::thread::sleep(Duration::from_millis(25));
        s
    };
    let add = |s: &Scene, mine: &Path| {
        let out = s.user_git(
            &s.main,
            &[
                "worktree",
                "add",
                "-q",
                mine.to_str().expect("utf8"),
                "-b",
                "mine",
            ],
        );
        assert!(out.status.success(), "{}", describe(&out));
    };
    {
        let s = scene("prot24-users-wt-ctl");
        let mine = s.sb.outside().join("mine");
        let mut c = s.control(&script(&s));
        let child = c
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        assert!(appears_soon(&s.wt.join("lw-ready")));
        add(&s, &mine);
        let out = child.wait_with_output().expect("wait");
        let gits = users_next_git(&s, &mine);
        assert!(
            s.pwned().exists(),
            "{who:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
            describe(&out),
            describe_all(&gits)
        );
    }
    let s = scene("prot24-users-wt");
    let mine = s.sb.outside().join("mine");
    let mut c = s.walled(&script(&s));
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    assert!(
        appears_soon(&s.wt.join("lw-ready")),
        "the agent did not start"
    );
    add(&s, &mine);
    let out = child.wait_with_output().expect("wait for the agent");
    s.settle();
    assert!(stdout(&out).contains("wrote=0"), "{}", describe(&out));
    let gits = users_next_git(&s, &mine);
    for g in &gits {
        assert!(
            g.status.success(),
            "{who:?}: the user's own worktree no longer works:\n{}\nthe agent:\n{}",
            describe(g),
            describe(&out)
        );
    }
    assert!(
        !s.pwned().exists() && !s.common.join("worktrees/mine/config.worktree").exists(),
        "{who:?}: the agent's config.worktree in the user's new worktree stood ({}):\n{}\n{}",
        pwned_text(&s),
        describe(&out),
        describe_all(&gits)
    );
}

#[test]
fn a_worktree_the_user_adds_while_the_agent_runs_stays_theirs() {
    users_worktree_added_while_it_runs(Who::Root);
}

#[test]
fn a_worktree_the_user_adds_while_the_agent_runs_stays_theirs_unprivileged() {
    users_worktree_added_while_it_runs(Who::User);
}

/// A submodule of the submodule `sm` (`sm/inner`), checked out by the user: while the agent
/// runs, it gives that one's git dir `core.fsmonitor` and waits. Walled: `sm/inner`'s `.git`
/// is set aside while the agent still runs, and the user's `git status` meanwhile (which
/// recurses into it) runs nothing. The control: the same outside the wall, and it runs.
fn deep_submodule_while_it_runs(who: Who) {
    let script = |s: &Scene| {
        format!(
            "{payload}; {FSMONITOR} >> .git/modules/sm/modules/inner/config; touch lw-ready; i=0; while [ ! -e lw-go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; echo done",
            payload = issue24_payload(s)
        )
    };
    let scene = |name: &str| {
        let s = Scene::new(name, who, Layout::Main, false);
        let inner = s.sb.root.join("innersrc");
        std::fs::create_dir_all(&inner).expect("mkdir innersrc");
        s.sb.git_root(&inner, &["init", "-q", "-b", "main"]);
        s.sb.git_root(&inner, &["commit", "-q", "--allow-empty", "-m", "inner"]);
        let sub = s.sb.root.join("subsrc");
        let file = ["-c", "protocol.file.allow=always"];
        let inner_s = inner.to_str().expect("utf8");
        s.sb.git_root(
            &sub,
            &[file[0], file[1], "submodule", "add", "-q", inner_s, "inner"],
        );
        s.sb.git_root(&sub, &["commit", "-qm", "inner"]);
        let sm = s.main.join("sm");
        s.sb.git_root(&sm, &["pull", "-q", "origin", "main"]);
        s.sb.git_root(
            &sm,
            &[file[0], file[1], "submodule", "update", "-q", "--init"],
        );
        s.sb.git_root(&s.main, &["commit", "-qam", "sm with inner"]);
        assert!(
            s.main.join("sm/inner/.git").exists(),
            "sm/inner not checked out"
        );
        if who == Who::User {
            let (uid, gid) = test_user();
            chown_tree(&s.main, uid, gid);
        }
        std::thread::sleep(Duration::from_millis(25));
        s
    };
    {
        let s = scene("prot24-deep-ctl");
        std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
        let out = s.run_control(&script(&s));
        let gits = users_next_git(&s, &s.wt);
        assert!(
            s.pwned().exists(),
            "{who:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
            describe(&out),
            describe_all(&gits)
        );
    }
    let s = scene("prot24-deep");
    let mut c = s.walled(&script(&s));
    let child = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let ready = appears_soon(&s.wt.join("lw-ready"));
    let aside = aside_or_gone_soon(&s.wt.join("sm/inner/.git"));
    let gits = users_next_git(&s, &s.wt);
    std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
    let out = child.wait_with_output().expect("wait for the agent");
    s.settle();
    assert!(ready, "the agent did not plant:\n{}", describe(&out));
    assert!(
        !s.pwned().exists() && aside,
        "{who:?}: while the agent ran, a submodule of a submodule it gave core.fsmonitor stood (payload ran: {}, set aside: {aside}):\n{}\n{}",
        pwned_text(&s),
        describe(&out),
        describe_all(&gits)
    );
}

#[test]
fn a_submodule_of_a_submodule_is_judged_while_the_agent_runs() {
    deep_submodule_while_it_runs(Who::Root);
}

#[test]
fn a_submodule_of_a_submodule_is_judged_while_the_agent_runs_unprivileged() {
    deep_submodule_while_it_runs(Who::User);
}

/// A launch whose watcher did not finish (killed, which below Landlock ABI 6 the agent can
/// do: simulated by its mark left in the record) added a linked worktree under `/tmp` with
/// a repository staged in it (its `core.fsmonitor` the payload). The next launch in the
/// main checkout judges the worktrees the record does not hold before its agent starts: the
/// user's `git status` there runs nothing. The control: the same without the mark, and the
/// next launch takes what is there as the user's (the payload runs).
fn worktree_added_under_a_dead_watcher(who: Who) {
    let plant = |s: &Scene, dead: bool| {
        let x = tmp_worktree(s, "dead");
        remove_if_there(&x);
        s.sb.git_root(
            &s.main,
            &[
                "worktree",
                "add",
                "-q",
                x.to_str().expect("utf8"),
                "-b",
                "x",
            ],
        );
        let lib = x.join("lw-lib");
        s.sb.git_root(&x, &["init", "-q", "lw-lib"]);
        s.sb.git_root(&lib, &["commit", "-q", "--allow-empty", "-m", "lib"]);
        let payload = s.sb.root.join("lw-payload");
        std::fs::write(
            &payload,
            format!("#!/bin/sh\necho \"$0\" >> {}\n", s.pwned().display()),
        )
        .expect("write the payload");
        std::fs::set_permissions(
            &payload,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .expect("chmod");
        s.sb.git_root(
            &lib,
            &["config", "core.fsmonitor", payload.to_str().expect("utf8")],
        );
        s.sb.git_root(&x, &["-c", "advice.addEmbeddedRepo=false", "add", "lw-lib"]);
        if who == Who::User {
            let (uid, gid) = test_user();
            chown_tree(&x, uid, gid);
            chown_tree(&s.common, uid, gid);
        }
        if dead {
            let home = match who {
                Who::Root => PathBuf::from("/root"),
                Who::User => s.sb.home(),
            };
            let real = std::fs::canonicalize(&s.wt).expect("real path");
            let mark = home
                .join(landwall::record::UNDER_HOME)
                .join(landwall::record::key(&real))
                .join("open-00000000deadbeef");
            std::fs::write(&mark, "").expect("leave a mark");
            if who == Who::User {
                let (uid, gid) = test_user();
                chown_tree(&mark, uid, gid);
            }
        }
        std::thread::sleep(Duration::from_millis(25));
        x
    };
    for dead in [false, true] {
        let s = Scene::new("prot24-dead-watcher", who, Layout::Main, false);
        let one = s.run_walled("echo first");
        let x = plant(&s, dead);
        let two = if dead {
            // What the launch before left is set aside before this agent starts; the
            // protected paths this launch took to hold were those from before, so it stops
            // (exit 100) and says so, and the next one starts from what is there.
            remove_if_there(&s.wt.join("marker"));
            let out = output_within(&mut s.walled("echo second"), Duration::from_secs(60));
            assert_eq!(out.status.code(), Some(100), "{who:?}: {}", describe(&out));
            assert!(
                !s.sb.ran_in(&s.wt),
                "{who:?}: the agent started:\n{}",
                describe(&out)
            );
            s.settle();
            out
        } else {
            s.run_walled("echo second")
        };
        let gits = users_next_git(&s, &x);
        let ran = s.pwned().exists();
        assert_eq!(
            ran,
            !dead,
            "{who:?}: with a watcher's mark left: {dead}, the payload in the worktree it added ran: {ran}:\n{}\n{}\n{}",
            describe(&one),
            describe(&two),
            describe_all(&gits)
        );
        if dead {
            // Only the plant went: the user's own config is where it was.
            assert!(
                s.common.join("config").is_file(),
                "{who:?}: the repository's config was set aside:\n{}",
                describe(&two)
            );
            let three = s.run_walled("echo third");
            let gits = users_next_git(&s, &x);
            assert!(
                !s.pwned().exists(),
                "{who:?}: after the launch that judged it, the payload ran:\n{}\n{}",
                describe(&three),
                describe_all(&gits)
            );
        }
        remove_if_there(&x);
    }
}

#[test]
fn a_worktree_added_under_a_watcher_that_died_is_judged_at_the_next_start() {
    worktree_added_under_a_dead_watcher(Who::Root);
}

#[test]
fn a_worktree_added_under_a_watcher_that_died_is_judged_at_the_next_start_unprivileged() {
    worktree_added_under_a_dead_watcher(Who::User);
}

/// Found by review: while the main checkout's agent runs, it renames the linked worktree
/// nested in it (`.claude/worktrees/n`) away whole, with every mount held in it (or
/// `.claude` above it), makes a repository of its own in its place and waits. Walled: the
/// renames fail (EBUSY), and the user's `git status` there meanwhile runs nothing. The
/// control: the same outside the wall, and the payload runs.
fn nested_worktree_renamed_while_it_runs(who: Who) {
    let script = |s: &Scene, step: usize| {
        let away = [
            "mv .claude/worktrees/n lw-n-old",
            "mv .claude lw-claude-old && mkdir -p .claude/worktrees",
        ][step];
        format!(
            "{payload}; {away} && mkdir .claude/worktrees/n && git -C .claude/worktrees/n init -q && git -C .claude/worktrees/n config core.fsmonitor \"$P\"; echo renamed=$?; touch lw-ready; i=0; while [ ! -e lw-go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done",
            payload = issue24_payload(s)
        )
    };
    for step in 0..2 {
        {
            let s = Scene::new("prot24-nested-mv-ctl", who, Layout::Main, false);
            let n = nest_worktree(&s);
            std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
            let out = s.run_control(&script(&s, step));
            let gits = users_next_git(&s, &n);
            assert!(
                s.pwned().exists(),
                "{who:?} {step}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
                describe(&out),
                describe_all(&gits)
            );
        }
        let s = Scene::new("prot24-nested-mv", who, Layout::Main, false);
        let n = nest_worktree(&s);
        std::thread::sleep(Duration::from_millis(25));
        let mut c = s.walled(&script(&s, step));
        let child = c
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the agent");
        let ready = appears_soon(&s.wt.join("lw-ready"));
        let gits = users_next_git(&s, &n);
        std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
        let out = child.wait_with_output().expect("wait for the agent");
        s.settle();
        assert!(ready, "the agent did not get that far:\n{}", describe(&out));
        assert!(
            !s.pwned().exists(),
            "{who:?} {step}: while the agent ran, the nested worktree it renamed away and rebuilt ran its payload ({}):\n{}\n{}",
            pwned_text(&s),
            describe(&out),
            describe_all(&gits)
        );
    }
}

#[test]
fn a_nested_worktree_cannot_be_renamed_away_while_the_agent_runs() {
    nested_worktree_renamed_while_it_runs(Who::Root);
}

#[test]
fn a_nested_worktree_cannot_be_renamed_away_while_the_agent_runs_unprivileged() {
    nested_worktree_renamed_while_it_runs(Who::User);
}

/// Found by review: the agent launched in a main checkout kept under `/tmp` (which every
/// agent may write), and in a linked worktree the user keeps there, renames the worktree
/// away whole (or the directory above it), with every mount held in it, and makes a
/// repository of its own in its place. Walled: the renames fail (EBUSY), and the user's
/// next `git status` there runs nothing. The control: the same outside the wall, and it
/// runs.
fn worktree_in_tmp_renamed(who: Who) {
    for layout in [Layout::Main, Layout::Linked] {
        for up in [false, true] {
            for walled in [false, true] {
                let (sb, name, top, main) = tmp_repo("prot24-tmp-mv", "mv");
                let wt = match layout {
                    Layout::Main => main.clone(),
                    Layout::Linked => {
                        let w = top.join("wt");
                        sb.git_root(
                            &main,
                            &[
                                "worktree",
                                "add",
                                "-q",
                                w.to_str().expect("utf8"),
                                "-b",
                                "w",
                            ],
                        );
                        w
                    }
                };
                if who == Who::User {
                    let (uid, gid) = test_user();
                    chown_tree(&top, uid, gid);
                    chown_tree(&sb.home(), uid, gid);
                    chown_tree(&sb.outside(), uid, gid);
                }
                std::thread::sleep(Duration::from_millis(25));
                let pwned = sb.outside().join("pwned");
                let away = if up {
                    format!("mv {t} {t}.lw-old && mkdir {t}", t = q(&top))
                } else {
                    format!("mv {w} {w}.lw-old", w = q(&wt))
                };
                let script = format!(
                    "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > /tmp/lw-pay-{name}; chmod +x /tmp/lw-pay-{name}; cd /; {away} && mkdir {w} && cd {w} && git init -q && git config core.fsmonitor /tmp/lw-pay-{name}; echo renamed=$?",
                    pwned = q(&pwned),
                    w = q(&wt)
                );
                let who_cmd = |program: &str| as_who(&sb, who, program, &wt);
                let out = if walled {
                    let mut c = who_cmd(sb.shims().join("claude").to_str().expect("utf8"));
                    c.args(["/bin/sh", "-c", &script]);
                    output_within(&mut c, Duration::from_secs(60))
                } else {
                    let mut c = who_cmd("/bin/sh");
                    c.args(["-c", &script]);
                    output(&mut c)
                };
                let mut g = who_cmd("git");
                g.args(["status", "--short"]);
                let git = output(&mut g);
                let ran = pwned.exists();
                let mut old = top.clone().into_os_string();
                old.push(".lw-old");
                remove_if_there(Path::new(&old));
                remove_if_there(&top);
                remove_if_there(Path::new(&format!("/tmp/lw-pay-{name}")));
                assert_eq!(
                    ran,
                    !walled,
                    "{who:?} {layout:?} (the directory above: {up}, walled: {walled}): the user's git in the worktree the agent rebuilt ran its payload: {ran}:\n{}\n{}",
                    describe(&out),
                    describe(&git)
                );
            }
        }
    }
}

#[test]
fn a_worktree_kept_in_tmp_cannot_be_renamed_away() {
    worktree_in_tmp_renamed(Who::Root);
}

#[test]
fn a_worktree_kept_in_tmp_cannot_be_renamed_away_unprivileged() {
    worktree_in_tmp_renamed(Who::User);
}

/// Found while measuring: while one launch runs in the main checkout, the user adds a
/// linked worktree inside it (`git worktree add .claude/worktrees/y`, outside the wall) and
/// starts a second launch there, which ends first. The second launch's basis is the record
/// the first wrote, which names nothing of `y`: `y`'s `.git` must not be taken for the
/// agent's (it was set aside, and the user's git in `y` found the main checkout's
/// repository instead). (Must work.)
fn second_launch_beside_a_new_worktree(who: Who) {
    let s = Scene::new("prot24-beside", who, Layout::Main, false);
    let mut c = s.walled("touch lw-ready; i=0; while [ ! -e lw-go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done");
    let first = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the first agent");
    assert!(
        appears_soon(&s.wt.join("lw-ready")),
        "the first agent did not start"
    );
    let y = s.wt.join(".claude/worktrees/y");
    std::fs::create_dir_all(y.parent().expect("parent")).expect("mkdir");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&s.wt.join(".claude"), uid, gid);
    }
    let add = s.user_git(
        &s.main,
        &[
            "worktree",
            "add",
            "-q",
            y.to_str().expect("utf8"),
            "-b",
            "y",
        ],
    );
    assert!(add.status.success(), "{}", describe(&add));
    std::thread::sleep(Duration::from_millis(25));
    let second = output_within(&mut s.walled("echo second"), Duration::from_secs(60));
    let git_file = y.join(".git").is_file();
    std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
    let first = first.wait_with_output().expect("wait for the first agent");
    s.settle();
    let top = s.user_git(&y, &["rev-parse", "--show-toplevel"]);
    assert!(
        git_file && stdout(&top).trim() == std::fs::canonicalize(&y).expect("real").to_string_lossy(),
        "{who:?}: the worktree the user added between two launches lost its .git (after the second: {git_file}):\n{}\n{}\n{}",
        describe(&second),
        describe(&first),
        describe(&top)
    );
}

#[test]
fn a_worktree_the_user_adds_between_two_launches_stays_theirs() {
    second_launch_beside_a_new_worktree(Who::Root);
}

#[test]
fn a_worktree_the_user_adds_between_two_launches_stays_theirs_unprivileged() {
    second_launch_beside_a_new_worktree(Who::User);
}

/// Found by review: a checkout removed and cloned again at the same path, after a launch
/// there whose watcher did not finish (its mark left in the record): the first launch in
/// the new one judged it against the old one's record and set aside its `.git/config`,
/// hooks and `.vscode/tasks.json`. The record names the directory it is of: another one at
/// that path starts afresh. (Must work; the mark is left by hand.)
fn recloned_at_the_same_path(who: Who) {
    let s = Scene::new("prot24-reclone", who, Layout::Main, true);
    let one = s.run_walled("echo first");
    let home = match who {
        Who::Root => PathBuf::from("/root"),
        Who::User => s.sb.home(),
    };
    let real = std::fs::canonicalize(&s.wt).expect("real path");
    let mark = home
        .join(landwall::record::UNDER_HOME)
        .join(landwall::record::key(&real))
        .join("open-00000000deadbeef");
    std::fs::write(&mark, "").expect("leave a mark");
    // A copy is a new directory, every inode new, as a new clone's are.
    let again = s.sb.root.join("again");
    let cp = output(Command::new("cp").arg("-a").arg(&s.main).arg(&again));
    assert!(cp.status.success(), "{}", describe(&cp));
    remove_if_there(&s.main);
    std::fs::rename(&again, &s.main).expect("move the copy into place");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&s.main, uid, gid);
        chown_tree(&mark, uid, gid);
    }
    std::thread::sleep(Duration::from_millis(25));
    let two = s.run_walled("echo second");
    for rel in [".git/config", ".git/hooks", ".vscode/tasks.json"] {
        assert!(
            s.main.join(rel).exists(),
            "{who:?}: {rel} of the new clone was set aside:\n{}\n{}",
            describe(&one),
            describe(&two)
        );
    }
}

#[test]
fn a_checkout_cloned_again_at_the_same_path_starts_afresh() {
    recloned_at_the_same_path(Who::Root);
}

#[test]
fn a_checkout_cloned_again_at_the_same_path_starts_afresh_unprivileged() {
    recloned_at_the_same_path(Who::User);
}

/// Found by review: a process the agent leaves running uses up the user's inotify watches
/// (`fs.inotify.max_user_watches`, `lw-doors exhaust-inotify`), then makes the directories
/// on the way to a gitlink the agent staged and moves a repository (its `core.fsmonitor`
/// the payload) into place: the watcher could watch none of them, and the repository stood
/// until that process ended. Walled: the watcher looks at the whole state every 100 ms once
/// a watch fails, so it is set aside, and the user's `git status` meanwhile runs nothing.
/// The control: the same outside the wall, and the payload runs. Run as a user of its own
/// (no other test's launches lose their watches).
#[test]
fn a_process_left_running_that_uses_up_inotify_watches_plants_in_vain() {
    let uid = 61000 + std::process::id() % 1000;
    let as_uid = |sb: &Sandbox, program: &Path, dir: &Path| {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={uid}"))
            .arg(format!("--regid={uid}"))
            .args(["--clear-groups", "--"])
            .arg(program);
        sb.clean_env(&mut c);
        c.current_dir(dir);
        c
    };
    for walled in [false, true] {
        let sb = Sandbox::new("prot24-inotify");
        std::fs::write(
            sb.root.join("agent.sh"),
            "#!/bin/sh\necho ran > \"$PWD/marker\"\nexec \"$@\"\n",
        )
        .expect("write agent script");
        install(
            &sb.root.join("agent.sh"),
            &sb.agents().join("claude-real"),
            &["-m", "0755"],
        );
        install(
            &landwall_e2e::bin_dir().join("lw-doors"),
            &sb.agents().join("lw-doors"),
            &["-m", "0755"],
        );
        let main = sb.root.join("main");
        std::fs::create_dir_all(&main).expect("mkdir");
        sb.git_root(&main, &["init", "-q", "-b", "main"]);
        std::fs::write(main.join("README"), "main\n").expect("write");
        sb.git_root(&main, &["add", "-A"]);
        sb.git_root(&main, &["commit", "-qm", "initial"]);
        for d in [&main, &sb.home(), &sb.outside()] {
            chown_tree(d, uid, uid);
        }
        std::thread::sleep(Duration::from_millis(25));
        let pwned = sb.outside().join("pwned");
        // Its own files where no watch of the worktree's sees them (an event in the
        // worktree's top would have the watcher look again anyway).
        let name = sb
            .root
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let tmp = PathBuf::from(format!("/tmp/lw-ino-{name}"));
        remove_if_there(&tmp);
        std::fs::create_dir_all(tmp.join("fill")).expect("mkdir");
        for n in 0..2000 {
            std::fs::write(tmp.join("fill").join(n.to_string()), "").expect("fill");
        }
        chown_tree(&tmp, uid, uid);
        let script = format!(
            "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > lw-payload; chmod +x lw-payload; P=\"$PWD/lw-payload\"; git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),a/b/nest && P=\"$P\" setsid sh -c 'T={t}; {doors} exhaust-inotify $T/fill $T/exhausted & echo $! > $T/ex-pid; i=0; while [ ! -e $T/exhausted ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; git init -q $T/stash && git -C $T/stash config core.fsmonitor \"$P\"; mkdir -p a/b; sleep 0.3; mv $T/stash a/b/nest; echo $$ > $T/bg-pid; echo armed > $T/armed; exec sleep 30' </dev/null >/dev/null 2>&1 & echo first=$?",
            pwned = q(&pwned),
            doors = q(sb.agents().join("lw-doors")),
            t = q(&tmp),
        );
        let mut c = if walled {
            as_uid(&sb, &sb.shims().join("claude"), &main)
        } else {
            as_uid(&sb, Path::new("/bin/sh"), &main)
        };
        if walled {
            c.args(["/bin/sh", "-c", &script]);
        } else {
            c.args(["-c", &script]);
        }
        let one = output_within(&mut c, Duration::from_secs(60));
        let armed = appears_soon(&tmp.join("armed"));
        let aside = aside_or_gone_soon(&main.join("a/b/nest/.git"));
        let mut g = as_uid(&sb, Path::new("git"), &main);
        g.args(["status", "--short"]);
        let git = output(&mut g);
        end_lingering(&tmp.join("bg-pid"));
        end_lingering(&tmp.join("ex-pid"));
        remove_if_there(&tmp);
        assert!(
            armed,
            "walled: {walled}: the plant was not laid:\n{}",
            describe(&one)
        );
        let ran = pwned.exists();
        assert_eq!(
            (ran, aside),
            (!walled, walled),
            "walled: {walled}: with the watches used up, the payload ran: {ran}, the repository was set aside: {aside}:\n{}\n{}",
            describe(&one),
            describe(&git)
        );
    }
}

#[test]
fn users_next_git_in_another_worktree_runs_nothing_planted_from_the_main_checkout() {
    other_worktrees(Who::Root);
}

#[test]
fn users_next_git_in_another_worktree_runs_nothing_planted_from_the_main_checkout_unprivileged() {
    other_worktrees(Who::User);
}

/// Found by review: the main checkout's agent writes `.envrc` and `.vscode/tasks.json` in a
/// linked worktree inside the main checkout (`.claude/worktrees/n`). Walled: both are set
/// aside (direnv and VS Code run nothing there), and the next launch in that worktree does
/// not take them for the user's. The control: the same outside the wall, and both stay.
fn nested_worktree_files(who: Who) {
    let script = "mkdir -p .claude/worktrees/n/.vscode && echo planted > .claude/worktrees/n/.envrc && echo planted > .claude/worktrees/n/.vscode/tasks.json; echo wrote=$?";
    let scene = |name: &str| {
        let s = Scene::new(name, who, Layout::Main, false);
        let n = nest_worktree(&s);
        std::thread::sleep(Duration::from_millis(25));
        (s, n)
    };
    {
        let (s, n) = scene("prot24-nested-ctl");
        let out = s.run_control(script);
        assert!(
            holds_planted(&n.join(".envrc")) && holds_planted(&n.join(".vscode/tasks.json")),
            "control: the files were not written, so the walled check proves nothing:\n{}",
            describe(&out)
        );
    }
    let (s, n) = scene("prot24-nested");
    let out = s.run_walled(script);
    assert!(stdout(&out).contains("wrote=0"), "{}", describe(&out));
    for rel in [".envrc", ".vscode/tasks.json"] {
        assert!(
            unplanted_soon(&n.join(rel)),
            "{who:?}: the main checkout's agent left {rel} in the linked worktree inside it:\n{}",
            describe(&out)
        );
    }
    // The next launch there takes nothing of it for the user's, and its agent starts.
    let mut c = s.walled("echo in-n");
    c.current_dir(&n);
    let two = output_within(&mut c, Duration::from_secs(60));
    assert!(stdout(&two).contains("in-n"), "{}", describe(&two));
    for rel in [".envrc", ".vscode/tasks.json"] {
        assert!(
            !holds_planted(&n.join(rel)),
            "{who:?}: {rel} is back:\n{}",
            describe(&two)
        );
    }
}

/// Found by review: the main checkout's agent rewrites the nested worktree's
/// `.git/worktrees/n/gitdir` (where landwall looked for it) in one launch, so that the next
/// launch does not protect it, and then points its `.git` at a git dir of its own and plants
/// `.envrc`. Walled: `gitdir` is held, and the user's git in the worktree runs nothing. The
/// control: the same two launches outside the wall, and the user's `git status` runs the
/// payload.
fn rewritten_gitdir(who: Who) {
    let first = "echo bogus > .git/worktrees/n/gitdir; echo one=$?";
    let second = |s: &Scene| {
        format!(
            "{payload}; rm -rf lw-evil && git init -q lw-evil && git -C lw-evil config core.fsmonitor \"$P\"; printf 'gitdir: %s\\n' \"$PWD/lw-evil/.git\" > .claude/worktrees/n/.git; echo planted > .claude/worktrees/n/.envrc; printf '%s\\n' \"$PWD/.claude/worktrees/n/.git\" > .git/worktrees/n/gitdir; echo two=$?",
            payload = issue24_payload(s)
        )
    };
    {
        let s = Scene::new("prot24-gitdir-ctl", who, Layout::Main, false);
        let n = nest_worktree(&s);
        let one = s.run_control(first);
        let two = s.run_control(&second(&s));
        let gits = users_next_git(&s, &n);
        assert!(
            s.pwned().exists(),
            "{who:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}\n{}",
            describe(&one),
            describe(&two),
            describe_all(&gits)
        );
    }
    let s = Scene::new("prot24-gitdir", who, Layout::Main, false);
    let n = nest_worktree(&s);
    std::thread::sleep(Duration::from_millis(25));
    let one = s.run_walled(first);
    let two = s.run_walled(&second(&s));
    let gits = users_next_git(&s, &n);
    assert!(
        !s.pwned().exists() && unplanted_soon(&n.join(".envrc")),
        "{who:?}: a rewritten gitdir let the next launch leave the nested worktree unprotected ({}):\n{}\n{}\n{}",
        pwned_text(&s),
        describe(&one),
        describe(&two),
        describe_all(&gits)
    );
}

#[test]
fn a_nested_worktree_stays_protected_when_its_gitdir_is_rewritten() {
    rewritten_gitdir(Who::Root);
}

#[test]
fn a_nested_worktree_stays_protected_when_its_gitdir_is_rewritten_unprivileged() {
    rewritten_gitdir(Who::User);
}

#[test]
fn a_linked_worktree_inside_the_main_checkout_keeps_its_protected_paths() {
    nested_worktree_files(Who::Root);
}

#[test]
fn a_linked_worktree_inside_the_main_checkout_keeps_its_protected_paths_unprivileged() {
    nested_worktree_files(Who::User);
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

/// The open marks of the worktree's launches in its record: one for each launch whose watcher
/// has not finished.
fn open_marks(s: &Scene) -> usize {
    let home = match s.who {
        Who::Root => PathBuf::from("/root"),
        Who::User => s.sb.home(),
    };
    let real = std::fs::canonicalize(&s.wt).expect("real path of the worktree");
    let dir = home
        .join(landwall::record::UNDER_HOME)
        .join(landwall::record::key(&real));
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("open-"))
            .count()
    })
}

/// Found in CI: a launch's watcher, at its end, removed the quarantine's empty fan-out
/// directories while another launch of the worktree ran, and that launch's `git add` failed
/// ("unable to create temporary file"): git makes the fan-out directory, then its file in
/// it. Here the second launch holds an empty fan-out directory, as git does between its
/// two steps, while a first launch starts and ends beside it: the directory stays, and the
/// write goes through. The next launch that runs alone removes it before its agent starts.
fn quarantine_beside_another(who: Who) {
    let s = Scene::new("prot24-fanout", who, Layout::Linked, false);
    let fanout = s.git_dir.join(landwall::policy::QUARANTINE_DIR).join("ab");
    let mut c = s.walled(
        "O=$(git rev-parse --git-path objects); mkdir \"$O/ab\"; touch lw-ready; i=0; \
         while [ ! -e lw-go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
         if [ -d \"$O/ab\" ]; then echo kept; else echo removed; fi; \
         echo beside | git hash-object -w --stdin",
    );
    let long = c
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the long agent");
    assert!(
        appears_soon(&s.wt.join("lw-ready")),
        "the long agent did not start"
    );
    // The premise: its fan-out directory is in the quarantine the watchers empty.
    assert!(fanout.is_dir(), "{} is not there", fanout.display());
    // The long launch's mark; the short launch's comes and goes.
    let marks = open_marks(&s);
    assert!(marks >= 1, "the long launch left no mark in its record");
    let short = output_within(&mut s.walled("echo short"), Duration::from_secs(60));
    assert!(short.status.success(), "{}", describe(&short));
    // The short launch's watcher finishes (its mark goes, then its last pass of the
    // quarantine), with the long launch still running.
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_marks(&s) > marks && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        open_marks(&s) <= marks,
        "the short launch's watcher did not finish"
    );
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(s.wt.join("lw-go"), "").expect("write lw-go");
    let long = long.wait_with_output().expect("wait for the long agent");
    assert!(
        long.status.success() && stdout(&long).starts_with("kept\n"),
        "{who:?}: the fan-out directory of a launch still running was removed:\n{}",
        describe(&long)
    );
    s.settle();
    // Alone, the next launch prunes it before its agent runs.
    assert!(fanout.is_dir(), "removed after the long launch ended");
    let out = s.run_walled(
        "O=$(git rev-parse --git-path objects); if [ -d \"$O/ab\" ]; then echo kept; else echo pruned; fi",
    );
    assert_eq!(stdout(&out), "pruned\n", "{}", describe(&out));
}

#[test]
fn a_launch_ending_beside_another_leaves_its_git_writes_alone() {
    quarantine_beside_another(Who::Root);
}

#[test]
fn a_launch_ending_beside_another_leaves_its_git_writes_alone_unprivileged() {
    quarantine_beside_another(Who::User);
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
    // Refused, not required: said, and the rewrite gets through while the agent runs; at
    // its exit the end is judged, and the rewritten file, which is not the user's own as
    // it is, is set aside.
    let out = refused(None);
    assert!(s.sb.ran_in(&s.wt), "{}", describe(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no private mount namespace here") && err.contains("protected paths"),
        "{}",
        describe(&out)
    );
    assert!(gone_soon(&envrc), "{}", describe(&out));
    let kept = std::fs::read_dir(envrc.parent().expect("parent"))
        .expect("list")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".envrc.landwall-swept-")
        })
        .any(|e| std::fs::read(e.path()).is_ok_and(|b| b == b"evil\n"));
    assert!(
        kept,
        "the rewritten .envrc was not kept aside: {}",
        describe(&out)
    );
    // The control: outside the wall the rewrite stays (once the walled launch's watcher,
    // which judges once more when the agent's last process has ended, is done).
    s.settle();
    let out = s.run_control(script);
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

// ---- Issue 24: the sweep judges the end state, and the watcher can be neither blinded nor
// kept busy. Each case runs its control first, in a scene of its own (the same steps outside
// the wall, as the same user, in the same layout: the attempt works there), then the walled
// launches in a fresh scene.

/// The agent's first step in these cases: `lw-payload` in the worktree, which appends its
/// name to [`Scene::pwned`] (outside the worktree) when it runs; `$P` names it.
fn issue24_payload(s: &Scene) -> String {
    format!(
        "printf '#!/bin/sh\\necho \"$0\" >> %s\\n' {pwned} > lw-payload; chmod +x lw-payload; P=\"$PWD/lw-payload\"",
        pwned = q(s.pwned())
    )
}

/// Whether `dir` holds an entry `<name>.landwall-swept-…` (`name` set aside there).
fn aside_in(dir: &Path, name: &str) -> bool {
    let prefix = format!("{name}.landwall-swept-");
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
    })
}

/// Whether `p` is a file holding what the agent planted ("planted").
fn holds_planted(p: &Path) -> bool {
    std::fs::read_to_string(p).is_ok_and(|t| t.contains("planted"))
}

/// Polls (5 s at most) until `p` no longer holds what the agent planted.
fn unplanted_soon(p: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while holds_planted(p) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// What the payload wrote, for a failure message.
fn pwned_text(s: &Scene) -> String {
    std::fs::read_to_string(s.pwned())
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Every output, for a failure message.
fn describe_all(outs: &[Output]) -> String {
    outs.iter().map(describe).collect::<Vec<_>>().join("\n")
}

// -- Class 1: planted in launch N, armed in launch N+1.

/// Launch 1 makes a repository away from where it will go (`.lw-stash/lib`, with
/// `core.fsmonitor` set to the payload) and stages a gitlink `lw-lib` whose directory does
/// not exist; launch 2 does one `rename` of the repository into place. The user's next
/// git runs nothing of it, and its `.git` is set aside (or gone). The control: the same two
/// launches outside the wall, and the user's `git status` runs the payload.
///
/// (The variant where launch 1 leaves the repository in place unstaged and launch 2 only
/// stages it is `planted_in_one_launch_staged_in_the_next` above.)
fn moved_into_a_staged_gitlink(who: Who, layout: Layout) {
    let scripts = |s: &Scene| {
        (
            format!(
                "{payload}; rm -rf .lw-stash && mkdir .lw-stash && git init -q .lw-stash/lib && git -C .lw-stash/lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && git -C .lw-stash/lib config core.fsmonitor \"$P\" && test ! -e lw-lib && git update-index --add --cacheinfo 160000,$(git -C .lw-stash/lib rev-parse HEAD),lw-lib; echo first=$?",
                payload = issue24_payload(s)
            ),
            "mv .lw-stash/lib lw-lib; echo second=$?".to_string(),
        )
    };
    {
        let s = Scene::new("prot24-moved-ctl", who, layout, false);
        let (first, second) = scripts(&s);
        let one = s.run_control(&first);
        assert!(stdout(&one).contains("first=0"), "{}", describe(&one));
        std::thread::sleep(Duration::from_millis(50));
        let two = s.run_control(&second);
        assert!(stdout(&two).contains("second=0"), "{}", describe(&two));
        let gits = users_next_git(&s, &s.wt);
        assert!(
            s.pwned().exists(),
            "{who:?} {layout:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}\n{}",
            describe(&one),
            describe(&two),
            describe_all(&gits)
        );
    }
    let s = Scene::new("prot24-moved", who, layout, false);
    let (first, second) = scripts(&s);
    let one = s.run_walled(&first);
    assert!(stdout(&one).contains("first=0"), "{}", describe(&one));
    // What the first launch wrote is older than the second's start.
    std::thread::sleep(Duration::from_millis(50));
    let two = s.run_walled(&second);
    let gits = users_next_git(&s, &s.wt);
    let git = s.wt.join("lw-lib/.git");
    assert!(
        !s.pwned().exists(),
        "{who:?} {layout:?}: the user's git ran the repository moved into the staged gitlink ({}):\nlaunch 1:\n{}\nlaunch 2:\n{}\n{}",
        pwned_text(&s),
        describe(&one),
        describe(&two),
        describe_all(&gits)
    );
    assert!(
        set_aside(&git) || std::fs::symlink_metadata(&git).is_err(),
        "{who:?} {layout:?}: {} is still in place, not set aside:\nlaunch 1:\n{}\nlaunch 2:\n{}",
        git.display(),
        describe(&one),
        describe(&two)
    );
}
matrix!(moved_into_a_staged_gitlink: a_repository_moved_into_a_gitlink_staged_in_the_launch_before_is_set_aside_main_checkout, a_repository_moved_into_a_gitlink_staged_in_the_launch_before_is_set_aside_main_checkout_unprivileged, a_repository_moved_into_a_gitlink_staged_in_the_launch_before_is_set_aside_linked_worktree, a_repository_moved_into_a_gitlink_staged_in_the_launch_before_is_set_aside_linked_worktree_unprivileged);

// -- Class 1, in time: what the agent leaves running plants after it has exited.

/// Polls (10 s at most) until `p` exists.
fn appears_soon(p: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::symlink_metadata(p).is_err() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Polls (5 s at most) until `p` is set aside or gone.
fn aside_or_gone_soon(p: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::symlink_metadata(p).is_ok() && !set_aside(p) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Ends the process whose pid is in `file` (the lingering one), if it still runs.
fn end_lingering(file: &Path) {
    if let Some(pid) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    {
        // Gone already (ESRCH) is as good.
        match nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => panic!("kill {pid}: {e}"),
        }
    }
}

/// The agent stages a gitlink `lw-lib` with no directory, makes a repository (its
/// `core.fsmonitor` the payload) away from it, and leaves a process of its own session
/// (`setsid`, every descriptor to /dev/null) that, a second after the agent has exited,
/// renames the repository into place and writes `.envrc`, then stays (`sleep 30`). Walled:
/// while it still runs, both are set aside, the user's git runs nothing, and the next
/// launch takes neither for the user's. The control: the same outside the wall, and the
/// user's `git status` runs the payload.
fn left_running_plants_after_the_agent(who: Who, layout: Layout) {
    let script = |s: &Scene| {
        format!(
            "{payload}; rm -rf .lw-stash lw-bg-done && mkdir .lw-stash && git init -q .lw-stash/lib && git -C .lw-stash/lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && git -C .lw-stash/lib config core.fsmonitor \"$P\" && git update-index --add --cacheinfo 160000,$(git -C .lw-stash/lib rev-parse HEAD),lw-lib && setsid sh -c 'sleep 1; mv .lw-stash/lib lw-lib; echo planted > .envrc; echo $$ > lw-bg-pid; echo done > lw-bg-done; exec sleep 30' </dev/null >/dev/null 2>&1 & echo first=$?",
            payload = issue24_payload(s)
        )
    };
    {
        let s = Scene::new("prot24-linger-ctl", who, layout, false);
        let one = s.run_control(&script(&s));
        assert!(stdout(&one).contains("first=0"), "{}", describe(&one));
        assert!(
            appears_soon(&s.wt.join("lw-bg-done")),
            "control: the background did not plant"
        );
        let gits = users_next_git(&s, &s.wt);
        end_lingering(&s.wt.join("lw-bg-pid"));
        assert!(
            s.pwned().exists() && holds_planted(&s.wt.join(".envrc")),
            "{who:?} {layout:?}: control: the plant did not take, so the walled check proves nothing:\n{}\n{}",
            describe(&one),
            describe_all(&gits)
        );
    }
    let s = Scene::new("prot24-linger", who, layout, false);
    let one = s.run_walled(&script(&s));
    assert!(stdout(&one).contains("first=0"), "{}", describe(&one));
    let done = appears_soon(&s.wt.join("lw-bg-done"));
    let git = s.wt.join("lw-lib/.git");
    let envrc = s.wt.join(".envrc");
    let git_aside = aside_or_gone_soon(&git);
    let envrc_aside = unplanted_soon(&envrc);
    // While what the agent left still runs.
    let gits = users_next_git(&s, &s.wt);
    end_lingering(&s.wt.join("lw-bg-pid"));
    assert!(done, "the background did not plant:\n{}", describe(&one));
    assert!(
        !s.pwned().exists() && git_aside && envrc_aside,
        "{who:?} {layout:?}: what the agent left running planted after it exited (payload ran: {}, {} set aside: {git_aside}, .envrc set aside: {envrc_aside}):\n{}\n{}",
        pwned_text(&s),
        git.display(),
        describe(&one),
        describe_all(&gits)
    );
    // Once it has ended, the next launch takes nothing of it for the user's.
    std::thread::sleep(Duration::from_millis(100));
    let two = s.run_walled("echo second");
    let gits = users_next_git(&s, &s.wt);
    assert!(
        !s.pwned().exists() && !holds_planted(&envrc) && !git.exists(),
        "{who:?} {layout:?}: after the next launch the plant is back or ran:\n{}\n{}",
        describe(&two),
        describe_all(&gits)
    );
}
matrix!(left_running_plants_after_the_agent: what_the_agent_left_running_plants_in_vain_main_checkout, what_the_agent_left_running_plants_in_vain_main_checkout_unprivileged, what_the_agent_left_running_plants_in_vain_linked_worktree, what_the_agent_left_running_plants_in_vain_linked_worktree_unprivileged);

// -- Class 2: an index the watcher cannot read, but git can.

/// Rewrites an index (`$J`) so that it is larger than the watcher's cap of
/// 256 MiB: an unknown optional extension `ZZZZ` (an uppercase first letter: git skips it)
/// of 257 MiB before the trailing checksum, which is recomputed. Prints `big=<size>`.
const BIG_INDEX: &str = r#"python3 - "$J" <<'LW_EOF'
import hashlib, os, struct, sys
p = sys.argv[1]
with open(p, 'rb') as f:
    body = f.read()[:-20]
n = 257 << 20
ext = b'ZZZZ' + struct.pack('>I', n)
h = hashlib.sha1(body)
h.update(ext)
z = bytes(1 << 20)
with open(p + '.lw-big', 'wb') as f:
    f.write(body)
    f.write(ext)
    for _ in range(n >> 20):
        f.write(z)
        h.update(z)
    f.write(h.digest())
os.rename(p + '.lw-big', p)
print('big=%d' % os.path.getsize(p))
LW_EOF"#;

/// How the agent makes the index one the watcher cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unreadable {
    /// Larger than the watcher's cap ([`BIG_INDEX`]).
    Big,
    /// Mode 000 (root's git reads it anyway; the watcher has dropped its capabilities).
    Mode000,
}

/// The agent stages a nested repository whose `core.fsmonitor` is the payload in a copy of
/// the index (`GIT_INDEX_FILE`), makes that copy one the watcher cannot read but git can,
/// and renames it over the index: the watcher never sees a readable index holding the
/// gitlink. Walled: the index is set aside
/// whole (`index.landwall-swept-…` in the git dir, no `index`) and the user's next git runs
/// nothing. The control: git still lists the gitlink, and the user's `git status` runs the
/// payload.
fn unreadable_but_read_by_git(who: Who, layout: Layout, how: Unreadable) {
    let script = |s: &Scene| {
        let last = match how {
            Unreadable::Big => BIG_INDEX,
            Unreadable::Mode000 => "chmod 000 \"$J\"; echo locked=$?",
        };
        format!(
            "{payload}\n{NEST_LIB}; I=$(git rev-parse --git-path index); J=\"$I.lw-stage\"; cp \"$I\" \"$J\" && GIT_INDEX_FILE=\"$J\" git update-index --add --cacheinfo 160000,$(git -C lw-lib rev-parse HEAD),lw-lib; echo staged=$?\n{last}\nmv -f \"$J\" \"$I\"; echo swapped=$?\n",
            payload = issue24_payload(s)
        )
    };
    let done = |out: &Output| {
        stdout(out).contains("swapped=0")
            && match how {
                Unreadable::Big => stdout(out)
                    .lines()
                    .filter_map(|l| l.strip_prefix("big="))
                    .any(|n| n.parse::<u64>().is_ok_and(|n| n > 256 << 20)),
                Unreadable::Mode000 => stdout(out).contains("locked=0"),
            }
    };
    {
        let s = Scene::new("prot24-index-ctl", who, layout, false);
        let out = s.run_control(&script(&s));
        assert!(
            stdout(&out).contains("staged=0") && done(&out),
            "{who:?} {layout:?} {how:?}: control: {}",
            describe(&out)
        );
        let index = s.git_dir.join("index");
        let meta = std::fs::metadata(&index).expect("the control's index");
        match how {
            Unreadable::Big => assert!(meta.len() > 256 << 20, "{}", meta.len()),
            Unreadable::Mode000 => assert_eq!(
                std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
                0
            ),
        }
        // The premise: git reads it and sees the gitlink.
        let ls = s.user_git(&s.wt, &["ls-files", "--stage", "lw-lib"]);
        assert!(
            ls.status.success() && stdout(&ls).starts_with("160000 "),
            "{who:?} {layout:?} {how:?}: control: git does not read the index the agent made:\n{}",
            describe(&ls)
        );
        let gits = users_next_git(&s, &s.wt);
        assert!(
            s.pwned().exists(),
            "{who:?} {layout:?} {how:?}: control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
            describe(&out),
            describe_all(&gits)
        );
        // The scene (and its big index) goes here, before the walled one is made.
    }
    let s = Scene::new("prot24-index", who, layout, false);
    let out = s.run_walled(&script(&s));
    assert!(
        stdout(&out).contains("staged=0") && done(&out),
        "{who:?} {layout:?} {how:?}: the agent could not make the index: {}",
        describe(&out)
    );
    let aside = aside_in(&s.git_dir, "index");
    let index_there = std::fs::symlink_metadata(s.git_dir.join("index")).is_ok();
    let gits = users_next_git(&s, &s.wt);
    assert!(
        !s.pwned().exists(),
        "{who:?} {layout:?} {how:?}: the user's git ran the payload staged in an index the watcher cannot read ({}; index set aside: {aside}):\n{}\n{}",
        pwned_text(&s),
        describe(&out),
        describe_all(&gits)
    );
    assert!(
        aside && !index_there,
        "{who:?} {layout:?} {how:?}: the index was not set aside whole (an aside copy: {aside}; an index still there: {index_there}):\n{}",
        describe(&out)
    );
}

#[test]
fn an_index_over_the_watchers_cap_is_set_aside_main_checkout() {
    unreadable_but_read_by_git(Who::Root, Layout::Main, Unreadable::Big);
}

#[test]
fn an_index_over_the_watchers_cap_is_set_aside_linked_worktree_unprivileged() {
    unreadable_but_read_by_git(Who::User, Layout::Linked, Unreadable::Big);
}

#[test]
fn an_index_the_watcher_may_not_open_is_set_aside_main_checkout() {
    unreadable_but_read_by_git(Who::Root, Layout::Main, Unreadable::Mode000);
}

#[test]
fn an_index_the_watcher_may_not_open_is_set_aside_linked_worktree() {
    unreadable_but_read_by_git(Who::Root, Layout::Linked, Unreadable::Mode000);
}

// -- Class 3: a watcher kept busy.

/// A launch whose agent's exit and the end of its output (every holder gone: the launch's
/// watcher holds it until it is done) are seen apart.
struct Timed {
    child: std::process::Child,
    rx: std::sync::mpsc::Receiver<(u8, Vec<u8>)>,
    /// Stdout and stderr, each once its every holder is gone.
    got: (Option<Vec<u8>>, Option<Vec<u8>>),
    started: Instant,
}

impl Timed {
    fn spawn(c: &mut Command) -> Timed {
        use std::io::Read as _;
        use std::process::Stdio;
        let started = Instant::now();
        let mut child = c
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let (tx, rx) = std::sync::mpsc::channel();
        let pipes: [(u8, Box<dyn std::io::Read + Send>); 2] = [
            (1, Box::new(child.stdout.take().expect("piped"))),
            (2, Box::new(child.stderr.take().expect("piped"))),
        ];
        for (n, mut pipe) in pipes {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut b = Vec::new();
                let _partial = pipe.read_to_end(&mut b);
                let _gone = tx.send((n, b));
            });
        }
        Timed {
            child,
            rx,
            got: (None, None),
            started,
        }
    }

    /// Waits for the agent's exit (the process itself, not its output's end): its status and
    /// when it was seen.
    fn exit(&mut self) -> (std::process::ExitStatus, Instant) {
        let status = self.child.wait().expect("wait");
        (status, Instant::now())
    }

    /// The output, if it is complete by `deadline` (what came before is kept for a later call).
    fn output_by(&mut self, status: std::process::ExitStatus, deadline: Instant) -> Option<Output> {
        while self.got.0.is_none() || self.got.1.is_none() {
            match self
                .rx
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok((1, b)) => self.got.0 = Some(b),
                Ok((_, b)) => self.got.1 = Some(b),
                Err(_) => return None,
            }
        }
        Some(Output {
            status,
            stdout: self.got.0.clone().unwrap_or_default(),
            stderr: self.got.1.clone().unwrap_or_default(),
        })
    }
}

/// How many objects of [`bomb`] the agent writes.
const BOMBS: usize = 6;

/// Writes at `dst` one zlib stream (about 1 MB) that inflates to a blob of 1 GiB of zeros
/// (`blob 1073741824\0`, then the zeros): a loose object's content, under any name but its
/// own a forgery.
fn bomb(dst: &Path) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zlib\n\
             c = zlib.compressobj(6)\n\
             z = bytes(1 << 20)\n\
             with open(sys.argv[1], 'wb') as f:\n\
             \x20   f.write(c.compress(b'blob 1073741824\\0'))\n\
             \x20   for _ in range(1024):\n\
             \x20       f.write(c.compress(z))\n\
             \x20   f.write(c.flush())\n",
        )
        .arg(dst)
        .output()
        .expect("run python3");
    assert!(out.status.success(), "making the bomb: {}", describe(&out));
}

/// The loose-object names (`XX`, the other 38 hex digits) the agent writes its copies of
/// the bomb under: none is the bomb's own name.
fn bomb_names() -> Vec<(String, String)> {
    (0..BOMBS)
        .map(|i| {
            (
                format!("{:02x}", 0xe0 + i),
                format!("{:038x}", 0xdead_0000_u64 + i as u64),
            )
        })
        .collect()
}

/// The busy watcher's attempt: the bombs into the object store (the quarantine, behind the
/// wall), a second for the watcher to start on them, then a nested repository staged with
/// the payload as its `core.fsmonitor`, and `.envrc` planted; then it exits.
fn busy_script(s: &Scene) -> String {
    let mut sc = format!(
        "{payload}\nO=$(git rev-parse --git-common-dir)/objects; n=0\n",
        payload = issue24_payload(s)
    );
    for (xx, rest) in bomb_names() {
        sc.push_str(&format!(
            "mkdir -p \"$O/{xx}\" && cp lw-bomb \"$O/{xx}/{rest}\" && n=$((n+1))\n"
        ));
    }
    sc.push_str("echo bombs=$n\nsleep 1\n");
    sc.push_str(&format!(
        "{NEST_LIB}; git update-index --add --cacheinfo 160000,$(git -C lw-lib rev-parse HEAD),lw-lib; echo staged=$?\n"
    ));
    sc.push_str("printf '#!/bin/sh\\necho planted\\n' > .envrc; echo envrc=$?\n");
    sc
}

/// Puts the bomb made at `src` in the scene's worktree as `lw-bomb`, owned by the scene's user.
fn place_bomb(s: &Scene, src: &Path) {
    let dst = s.wt.join("lw-bomb");
    std::fs::copy(src, &dst).expect("copy the bomb");
    if s.who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&dst, uid, gid);
    }
}

/// The loose-object files, anywhere under `dir`, whose size is the bomb's.
fn bombs_under(dir: &Path, size: u64) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if meta.is_dir() {
            found.extend(bombs_under(&e.path(), size));
        } else if meta.is_file() && meta.len() == size {
            found.push(e.path());
        }
    }
    found
}

/// In a linked worktree, the agent fills its quarantine with [`BOMBS`] small files that
/// inflate to 1 GiB each under names not their own, then stages a nested repository (the
/// payload as its `core.fsmonitor`) and plants `.envrc`, and exits. `.envrc` is set aside
/// within 10 s of the agent's exit (measured from the exit, not from the end of the output,
/// which the watcher holds until it is done), and the user's `git status` 2 s after the exit
/// runs nothing. A second launch, which does nothing, does not redo the first's rejected
/// work: its output is complete within 5 s, and the forged files are no longer in the
/// quarantine's fan-out directories (nor in the repository's store). The control: the same
/// script outside the wall leaves `.envrc` in place and the payload runs.
fn busy_watcher(who: Who) {
    let layout = Layout::Linked;
    let work = Path::new(landwall_e2e::SCRATCH_ROOT)
        .join(format!("prot24-bomb-{}-{who:?}.z", std::process::id()));
    bomb(&work);
    struct Remove(PathBuf);
    impl Drop for Remove {
        fn drop(&mut self) {
            let _gone = std::fs::remove_file(&self.0);
        }
    }
    let work = Remove(work);
    let size = std::fs::metadata(&work.0).expect("the bomb").len();
    assert!(size < 4 << 20, "the bomb is {size} bytes");
    {
        let s = Scene::new("prot24-busy-ctl", who, layout, false);
        place_bomb(&s, &work.0);
        let out = s.run_control(&busy_script(&s));
        assert!(
            stdout(&out).contains(&format!("bombs={BOMBS}"))
                && stdout(&out).contains("staged=0")
                && stdout(&out).contains("envrc=0"),
            "control: {}",
            describe(&out)
        );
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            holds_planted(&s.wt.join(".envrc")),
            "control: .envrc is not there"
        );
        let g = s.user_git(&s.wt, &["status", "--short"]);
        assert!(
            s.pwned().exists(),
            "control: the payload did not run, so the walled check proves nothing:\n{}\n{}",
            describe(&out),
            describe(&g)
        );
    }
    let s = Scene::new("prot24-busy", who, layout, false);
    place_bomb(&s, &work.0);
    let envrc = s.wt.join(".envrc");
    let quarantine = s.git_dir.join(landwall::policy::QUARANTINE_DIR);
    remove_if_there(&s.wt.join("marker"));
    let mut first = Timed::spawn(&mut s.walled(&busy_script(&s)));
    let (status, exited) = first.exit();
    assert!(s.sb.ran_in(&s.wt), "the agent did not start: {status:?}");
    // The premise, seen at once: the agent's store was the quarantine (the forged files are
    // under it, none in the repository's store).
    let store = s.common.join("objects");
    let in_store: Vec<PathBuf> = bomb_names()
        .into_iter()
        .map(|(xx, rest)| store.join(xx).join(rest))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    let quarantined = bombs_under(&quarantine, size).len();
    // The user's `git status` two seconds after the agent's exit.
    std::thread::sleep((exited + Duration::from_secs(2)).saturating_duration_since(Instant::now()));
    let g = s.user_git(&s.wt, &["status", "--short"]);
    let ran = s.pwned().exists();
    // `.envrc` within 10 s of the exit.
    let deadline = exited + Duration::from_secs(10);
    while std::fs::symlink_metadata(&envrc).is_ok() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let envrc_left = std::fs::symlink_metadata(&envrc).is_ok();
    let swept_after = exited.elapsed();
    let partial = first.output_by(status, Instant::now());
    let said = partial
        .as_ref()
        .map(describe)
        .unwrap_or_else(|| "(the watcher still holds the output)".to_string());
    assert!(
        quarantined > 0 && in_store.is_empty(),
        "{who:?}: premise: the forged objects are not in the quarantine ({quarantined} there; in the repository's store: {in_store:#?}):\n{said}"
    );
    assert!(
        !ran && !envrc_left,
        "{who:?}: a busy watcher: the user's git status 2 s after the agent's exit ran the payload: {ran} ({}); .envrc still in place {swept_after:?} after the exit: {envrc_left}\ngit status: {}\nthe agent: {said}",
        pwned_text(&s),
        describe(&g)
    );
    assert!(
        set_aside(&envrc),
        "{who:?}: .envrc is gone but was not set aside: did the agent make it?\n{said}"
    );
    // The first launch's watcher finishes (its output is complete) in bounded time.
    let out = first
        .output_by(status, exited + Duration::from_secs(60))
        .unwrap_or_else(|| {
            panic!(
                "{who:?}: the first launch's watcher was still at work 60 s after the agent's exit"
            )
        });
    assert!(
        stdout(&out).contains(&format!("bombs={BOMBS}")),
        "premise: the agent did not write its bombs into the store: {}",
        describe(&out)
    );
    for (xx, rest) in bomb_names() {
        assert!(
            std::fs::symlink_metadata(store.join(&xx).join(&rest)).is_err(),
            "{who:?}: a forged object {xx}/{rest} reached the repository's store"
        );
    }
    let in_quarantine = bombs_under(&quarantine, size);
    eprintln!(
        "{who:?}: after the first launch, in the quarantine: {in_quarantine:#?}\n{}",
        describe(&out)
    );
    // The next launches do nothing. Each watcher has a budget (a few seconds of work), and
    // what one rejected is out of the fan-out directories, never examined again: so each
    // launch takes new bombs only, finishes in bounded time, and the quarantine drains.
    let left_in_fanout = || -> Vec<PathBuf> {
        bomb_names()
            .into_iter()
            .map(|(xx, rest)| quarantine.join(xx).join(rest))
            .filter(|p| std::fs::symlink_metadata(p).is_ok())
            .collect()
    };
    let mut left = left_in_fanout();
    assert!(
        left.len() < BOMBS,
        "{who:?}: the first launch's watcher moved none of the forged objects out of the fan-out"
    );
    for launch in 2..=BOMBS + 1 {
        if left.is_empty() {
            break;
        }
        remove_if_there(&s.wt.join("marker"));
        let mut next = Timed::spawn(&mut s.walled("true"));
        let (status2, _) = next.exit();
        assert!(
            s.sb.ran_in(&s.wt),
            "launch {launch}: the agent did not start"
        );
        let out2 = next.output_by(status2, next.started + Duration::from_secs(30));
        assert!(
            out2.is_some(),
            "{who:?}: launch {launch} (which does nothing) was not done within 30 s"
        );
        let now = left_in_fanout();
        assert!(
            now.len() < left.len(),
            "{who:?}: launch {launch} took none of the bombs left ({}): it redid rejected work",
            left.len()
        );
        left = now;
    }
    assert!(
        left.is_empty(),
        "{who:?}: the forged objects are still in the quarantine's fan-out directories: {left:#?}"
    );
    let rejected = bombs_under(&quarantine.join("landwall-rejected"), size);
    eprintln!("{who:?}: in landwall-rejected/: {}", rejected.len());
    let g = s.user_git(&s.wt, &["status", "--short"]);
    assert!(
        !s.pwned().exists(),
        "{who:?}: the user's git ran the payload after the second launch: {}",
        describe(&g)
    );
}

#[test]
fn a_busy_watcher_still_sweeps_at_once_linked_worktree() {
    busy_watcher(Who::Root);
}

#[test]
fn a_busy_watcher_still_sweeps_at_once_linked_worktree_unprivileged() {
    busy_watcher(Who::User);
}

// -- Class 4: a regular file where a protected directory would be.

/// Launch 1 makes `.vscode` and `.claude` regular files; launch 2 replaces them with
/// directories holding `.vscode/tasks.json` and `.claude/settings.json`. Both are set aside
/// (not at their paths) after launch 2, and still not after launch 3, which does nothing.
/// The control: outside the wall they stay.
fn files_where_directories_go(who: Who, layout: Layout) {
    let one = "printf 'x\\n' > .vscode; printf 'x\\n' > .claude; echo one=$?";
    let two = "rm -f .vscode .claude; mkdir .vscode .claude && printf 'planted\\n' > .vscode/tasks.json && printf 'planted\\n' > .claude/settings.json; echo two=$?";
    let planted = [".vscode/tasks.json", ".claude/settings.json"];
    {
        let s = Scene::new("prot24-filedir-ctl", who, layout, false);
        let a = s.run_control(one);
        let b = s.run_control(two);
        std::thread::sleep(Duration::from_millis(200));
        for rel in planted {
            assert!(
                holds_planted(&s.wt.join(rel)),
                "{who:?} {layout:?}: control: {rel} is not there:\n{}\n{}",
                describe(&a),
                describe(&b)
            );
        }
    }
    let s = Scene::new("prot24-filedir", who, layout, false);
    for rel in planted {
        assert!(
            std::fs::symlink_metadata(s.wt.join(rel)).is_err(),
            "{rel} exists"
        );
    }
    let a = s.run_walled(one);
    assert!(stdout(&a).contains("one=0"), "{}", describe(&a));
    std::thread::sleep(Duration::from_millis(50));
    let b = s.run_walled(two);
    for rel in planted {
        assert!(
            unplanted_soon(&s.wt.join(rel)),
            "{who:?} {layout:?}: {rel}, made where launch 1 left a file, is still in place after launch 2:\nlaunch 1:\n{}\nlaunch 2:\n{}",
            describe(&a),
            describe(&b)
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    let c = s.run_walled("true");
    for rel in planted {
        assert!(
            !holds_planted(&s.wt.join(rel)),
            "{who:?} {layout:?}: {rel} is back in place after launch 3:\n{}",
            describe(&c)
        );
    }
}
matrix!(files_where_directories_go: protected_files_made_where_a_file_stood_are_set_aside_main_checkout, protected_files_made_where_a_file_stood_are_set_aside_main_checkout_unprivileged, protected_files_made_where_a_file_stood_are_set_aside_linked_worktree, protected_files_made_where_a_file_stood_are_set_aside_linked_worktree_unprivileged);

/// The user's repository sets `core.hooksPath = scripts/hooks` (in a linked worktree, the
/// shared config), and `scripts` does not exist. Launch 1 makes `scripts` a regular file;
/// launch 2 replaces it with `scripts/hooks/pre-commit`, the payload. The user's next
/// `git commit` runs nothing, after launch 2 and after a launch 3 that does nothing. The
/// control: the commit runs the payload.
fn hooks_path_where_a_file_stood(who: Who, layout: Layout) {
    let one = "printf 'x\\n' > scripts; echo one=$?";
    let two = |s: &Scene| {
        format!(
            "{payload}; rm -f scripts; mkdir -p scripts/hooks && cp lw-payload scripts/hooks/pre-commit && chmod +x scripts/hooks/pre-commit; echo two=$?",
            payload = issue24_payload(s)
        )
    };
    let scene = |name: &str| {
        let s = Scene::new(name, who, layout, false);
        s.sb.git_root(&s.main, &["config", "core.hooksPath", "scripts/hooks"]);
        if who == Who::User {
            let (uid, gid) = test_user();
            chown_tree(&s.common.join("config"), uid, gid);
        }
        assert!(std::fs::symlink_metadata(s.wt.join("scripts")).is_err());
        s
    };
    let commit = |s: &Scene| s.user_git(&s.wt, &["commit", "-q", "--allow-empty", "-m", "x"]);
    {
        let s = scene("prot24-hookfile-ctl");
        let a = s.run_control(one);
        let b = s.run_control(&two(&s));
        let g = commit(&s);
        assert!(
            s.pwned().exists(),
            "{who:?} {layout:?}: control: the commit did not run the hook, so the walled check proves nothing:\n{}\n{}\n{}",
            describe(&a),
            describe(&b),
            describe(&g)
        );
    }
    let s = scene("prot24-hookfile");
    let a = s.run_walled(one);
    assert!(stdout(&a).contains("one=0"), "{}", describe(&a));
    std::thread::sleep(Duration::from_millis(50));
    let b = s.run_walled(&two(&s));
    let g = commit(&s);
    assert!(
        !s.pwned().exists(),
        "{who:?} {layout:?}: the user's commit after launch 2 ran the hook made where launch 1 left a file ({}):\nlaunch 1:\n{}\nlaunch 2:\n{}\n{}",
        pwned_text(&s),
        describe(&a),
        describe(&b),
        describe(&g)
    );
    std::thread::sleep(Duration::from_millis(50));
    let c = s.run_walled("true");
    let g = commit(&s);
    assert!(
        !s.pwned().exists(),
        "{who:?} {layout:?}: the user's commit after launch 3 ran the hook ({}):\n{}\n{}",
        pwned_text(&s),
        describe(&c),
        describe(&g)
    );
}
matrix!(hooks_path_where_a_file_stood: a_hooks_path_made_where_a_file_stood_runs_nothing_main_checkout, a_hooks_path_made_where_a_file_stood_runs_nothing_main_checkout_unprivileged, a_hooks_path_made_where_a_file_stood_runs_nothing_linked_worktree, a_hooks_path_made_where_a_file_stood_runs_nothing_linked_worktree_unprivileged);

// -- The watcher cannot start: the agent does not start.

/// A seccomp filter answering ENOSYS to `inotify_init1` (294 on x86_64) and `inotify_init`
/// (253), as on a kernel built without inotify.
fn no_inotify() -> seccompiler::BpfProgram {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let rules = [libc::SYS_inotify_init1, libc::SYS_inotify_init]
        .into_iter()
        .map(|nr| (nr, vec![]))
        .collect();
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        TargetArch::x86_64,
    )
    .expect("filter")
    .try_into()
    .expect("compile the filter")
}

/// `c`, run under [`no_inotify`] (inherited by everything it starts).
fn without_inotify(c: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt as _;
    let prog = no_inotify();
    // SAFETY: the closure runs in the forked child before exec; it only makes the two
    // system calls of `apply_filter` (prctl, seccomp) on a program built before the fork,
    // and allocates nothing (the error is a raw errno).
    unsafe {
        c.pre_exec(move || {
            seccompiler::apply_filter(&prog)
                .map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))
        })
    }
}

/// Under a filter that makes inotify fail (inherited by the shim and its watcher), in a
/// scene where the watcher is needed (protected paths to sweep), the agent does not start
/// and the launch exits with status 100. The control: the same launch without the filter
/// starts the agent; the premise: under the filter, inotify_init1 fails with ENOSYS.
fn no_agent_without_a_watcher(who: Who, layout: Layout) {
    let s = Scene::new("prot24-nowatcher", who, layout, false);
    // The premise: the filter refuses inotify.
    let mut probe = s.cmd("python3");
    probe.args([
        "-c",
        "import ctypes, sys\nl = ctypes.CDLL(None, use_errno=True)\nr = l.inotify_init1(0)\nsys.exit(0 if r < 0 and ctypes.get_errno() == 38 else 1)\n",
    ]);
    let p = output(without_inotify(&mut probe));
    assert!(
        p.status.success(),
        "premise: inotify_init1 did not fail with ENOSYS under the filter: {}",
        describe(&p)
    );
    // The control: without the filter, the agent starts.
    let out = s.run_walled("true");
    assert!(out.status.success(), "control: {}", describe(&out));
    remove_if_there(&s.wt.join("marker"));
    let out = output_within(
        without_inotify(&mut s.walled("true")),
        Duration::from_secs(60),
    );
    assert!(
        !s.sb.ran_in(&s.wt),
        "{who:?} {layout:?}: the agent started with a watcher that cannot watch:\n{}",
        describe(&out)
    );
    assert_eq!(
        out.status.code(),
        Some(100),
        "{who:?} {layout:?}: {}",
        describe(&out)
    );
}
matrix!(no_agent_without_a_watcher: no_watcher_no_agent_main_checkout, no_watcher_no_agent_main_checkout_unprivileged, no_watcher_no_agent_linked_worktree, no_watcher_no_agent_linked_worktree_unprivileged);

/// Found by review (issue 24, fifth round): the agent sets an `RLIMIT_CPU` of 0 on its
/// watcher (the same uid; the kernel's own SIGXCPU and SIGKILL pass Landlock's signal
/// scope), keeps it busy until it dies, then stages a repository whose `core.fsmonitor` is
/// the payload. Walled: the filter refuses `prlimit64` on another process, the watcher
/// lives, the repository is set aside and the user's next git runs nothing. The control:
/// outside the wall the same `prlimit` on a busy process of the user's kills it.
fn watcher_given_a_cpu_limit(who: Who) {
    let s = Scene::new("prot24-prlimit", who, Layout::Main, false);
    let script = format!(
        "{payload}; n=0; for w in $(pgrep -u $(id -u) -x claude); do prlimit --pid $w --cpu=0:0 && n=$((n+1)); taskset -p 1 $w && n=$((n+1)); done; echo limited=$n; i=0; while [ $i -lt 40 ]; do date > lw-junk; git add lw-junk; i=$((i+1)); done; git rm -q --cached lw-junk; git init -q lw-evil && git -C lw-evil -c user.name=a -c user.email=a@example.org commit -q --allow-empty -m e && git -C lw-evil config core.fsmonitor \"$P\" && git -c advice.addEmbeddedRepo=false add lw-evil; echo staged=$?",
        payload = issue24_payload(&s)
    );
    let out = s.run_walled(&script);
    let gits = users_next_git(&s, &s.wt);
    assert!(
        stdout(&out).contains("limited=0"),
        "{who:?}: a limit was set:\n{}",
        describe(&out)
    );
    assert!(
        stdout(&out).contains("staged=0"),
        "{who:?}: the plant was not laid:\n{}",
        describe(&out)
    );
    assert!(
        !s.pwned().exists(),
        "{who:?}: the payload ran ({}):\n{}\n{}",
        pwned_text(&s),
        describe(&out),
        describe_all(&gits)
    );
    // The control: a busy process of the same user, outside the wall, limited the same way.
    let ctl = s.run_control(
        "sh -c 'while :; do :; done' & b=$!; sleep 0.2; taskset -p 1 $b >/dev/null; echo pinned=$?; prlimit --pid $b --cpu=0:0; echo limited=$?; wait $b; echo status=$?",
    );
    let text = stdout(&ctl);
    assert!(
        text.contains("pinned=0") && text.contains("limited=0") && !text.contains("status=0"),
        "{who:?}: control: the limit did not end the process:\n{}",
        describe(&ctl)
    );
}

#[test]
fn the_watcher_cannot_be_given_a_cpu_limit() {
    watcher_given_a_cpu_limit(Who::Root);
}

#[test]
fn the_watcher_cannot_be_given_a_cpu_limit_unprivileged() {
    watcher_given_a_cpu_limit(Who::User);
}
