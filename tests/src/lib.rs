//! One helper for every end-to-end test: a fresh scratch directory per test, the built
//! binaries, stand-in agents, and commands with a clean, known environment.
//!
//! Scratch directories live under `/var/tmp/landwall-tests`, never under `/tmp`: the default
//! policy makes `/tmp` writable, so a test that put "another project" there could not fail.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Where all scratch directories go.
pub const SCRATCH_ROOT: &str = "/var/tmp/landwall-tests";

/// The directory holding the built binaries (`target/debug`), found from the test binary's
/// own path (`target/debug/deps/<test>`).
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_path_buf();
    for b in ["landwall", "lw-helper"] {
        assert!(
            dir.join(b).is_file(),
            "{} is missing: build the workspace first (`cargo build --workspace`, or `make test`)",
            dir.join(b).display()
        );
    }
    dir
}

/// The built `landwall` binary.
pub fn landwall() -> PathBuf {
    bin_dir().join("landwall")
}

/// The built test helper (`lw-helper`, see its source for the commands).
pub fn helper() -> PathBuf {
    bin_dir().join("lw-helper")
}

/// The basic PATH stand-in agents and the programs they call are found on.
pub const SYSTEM_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// A fresh scratch tree for one test, removed on drop.
///
/// Layout: `shims/` (links named after agents pointing at `landwall`), `agents/` (stand-in
/// real agents), `home/` (the test's `$HOME`), `wt/` (the worktree), `outside/` (a place the
/// agent must not reach).
pub struct Sandbox {
    /// The scratch root (a real path).
    pub root: PathBuf,
}

static COUNTER: AtomicUsize = AtomicUsize::new(0);

impl Sandbox {
    /// Creates the scratch tree for the test called `name`.
    pub fn new(name: &str) -> Sandbox {
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let root = Path::new(SCRATCH_ROOT).join(format!("{name}-{}-{n}", std::process::id()));
        if root.exists() {
            std::fs::remove_dir_all(&root).expect("clean old scratch");
        }
        for d in ["shims", "agents", "home", "wt", "outside"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir scratch");
        }
        let root = std::fs::canonicalize(&root).expect("canonicalize scratch");
        let sb = Sandbox { root };
        for agent in ["claude", "opencode", "codex"] {
            std::os::unix::fs::symlink(landwall(), sb.shims().join(agent)).expect("link shim");
        }
        std::fs::write(sb.outside().join("secret"), "outside secret\n").expect("write secret");
        // A copy of the helper where the stand-in agents live (the real agent's directory is
        // granted read-only and executable; target/ is not).
        install_binary(&helper(), &sb.probe());
        sb
    }

    /// `shims/`: links to `landwall` named after agents; first on PATH.
    pub fn shims(&self) -> PathBuf {
        self.root.join("shims")
    }
    /// `agents/`: the stand-in real agents.
    pub fn agents(&self) -> PathBuf {
        self.root.join("agents")
    }
    /// `home/`: the test's `$HOME`.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }
    /// `wt/`: the worktree the agent runs in.
    pub fn wt(&self) -> PathBuf {
        self.root.join("wt")
    }
    /// The copy of `lw-helper` an agent inside the wall can run (in `agents/`).
    pub fn probe(&self) -> PathBuf {
        self.agents().join("lw-helper")
    }
    /// `outside/`: a directory the agent must not reach (holds `secret`).
    pub fn outside(&self) -> PathBuf {
        self.root.join("outside")
    }

    /// Installs a stand-in real agent `agents/<name>-real` running `body` under `/bin/sh`.
    /// The script's first act is to write `ran` in the worktree's `marker`, so a test can
    /// prove whether it ran.
    pub fn agent_script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.agents().join(format!("{name}-real"));
        let script = format!("#!/bin/sh\necho ran > \"$PWD/marker\"\n{body}\n");
        // Written to a scratch name here, then copied into place by `install` in a child
        // process: the executable's inode is never open for writing in this process, so no
        // other test thread's fork can hold it open when it is executed (ETXTBSY).
        let draft = self.root.join(format!(".{name}-real.draft"));
        std::fs::write(&draft, script).expect("write agent draft");
        let status = Command::new("install")
            .args(["-m", "755"])
            .arg(&draft)
            .arg(&path)
            .status()
            .expect("run install");
        assert!(status.success(), "install {}", path.display());
        path
    }

    /// Whether the stand-in agent ran (its marker exists in `dir`).
    pub fn ran_in(&self, dir: &Path) -> bool {
        dir.join("marker").exists()
    }

    /// A command that runs the `agent` shim in the worktree with a clean environment:
    /// `PATH=shims:agents:<system>`, `HOME=home/`, `TERM`, `LANG`, and no configuration
    /// (`LANDWALL_CONFIG` points at a file that does not exist).
    pub fn shim(&self, agent: &str) -> Command {
        let mut c = Command::new(self.shims().join(agent));
        self.clean_env(&mut c);
        c.current_dir(self.wt());
        c
    }

    /// `landwall` (the admin CLI) with the same clean environment, in the worktree.
    pub fn landwall(&self) -> Command {
        let mut c = Command::new(landwall());
        self.clean_env(&mut c);
        c.current_dir(self.wt());
        c
    }

    /// Applies the clean environment to any command.
    pub fn clean_env(&self, c: &mut Command) {
        let path = format!(
            "{}:{}:{}",
            self.shims().display(),
            self.agents().display(),
            SYSTEM_PATH
        );
        c.env_clear()
            .env("PATH", path)
            .env("HOME", self.home())
            .env("TERM", "xterm")
            .env("LANG", "C.UTF-8")
            .env("LANDWALL_CONFIG", self.root.join("no-config.toml"));
    }

    /// Writes a configuration file and returns its path.
    pub fn config(&self, text: &str) -> PathBuf {
        let p = self.root.join("landwall.toml");
        std::fs::write(&p, text).expect("write config");
        p
    }

    /// Runs `git` with a fixed identity in `dir`; panics with its output on failure.
    pub fn git(&self, dir: &Path, args: &[&str]) -> Output {
        self.git_with(dir, &[], args)
    }

    /// [`Sandbox::git`] as root on a repository that may belong to the test user
    /// (`safe.directory=*`), while a scene is set up.
    pub fn git_root(&self, dir: &Path, args: &[&str]) -> Output {
        self.git_with(dir, &["-c", "safe.directory=*"], args)
    }

    fn git_with(&self, dir: &Path, config: &[&str], args: &[&str]) -> Output {
        let out = Command::new("git")
            .args(config)
            .args([
                "-c",
                "user.name=landwall-test",
                "-c",
                "user.email=test@landwall.invalid",
            ])
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "advice.detachedHead=false",
            ])
            .args(args)
            .current_dir(dir)
            .env("HOME", self.home())
            .output()
            .expect("run git (is it installed?)");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Removed whatever the outcome, so a failed run leaves nothing behind;
        // LANDWALL_TEST_KEEP=1 keeps a failed test's tree for a look.
        if std::thread::panicking() && std::env::var_os("LANDWALL_TEST_KEEP").is_some() {
            eprintln!("keeping {} (LANDWALL_TEST_KEEP)", self.root.display());
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.root) {
            eprintln!("leaving {}: {e}", self.root.display());
        }
    }
}

/// Puts a built binary at `dst`: a hard link when the scratch dir shares the target dir's
/// filesystem, else a copy. A link opens no file for writing, so no other test thread's
/// fork can hold a write descriptor on it when it is executed (ETXTBSY).
pub fn install_binary(src: &Path, dst: &Path) {
    if std::fs::hard_link(src, dst).is_err() {
        std::fs::copy(src, dst).expect("copy binary");
    }
}

/// Stdout as a string.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as a string.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs `c` and returns its output.
pub fn run(c: &mut Command) -> Output {
    c.output().expect("spawn")
}

/// `OsStr` from bytes, for non-UTF-8 arguments.
pub fn os(bytes: &[u8]) -> &OsStr {
    use std::os::unix::ffi::OsStrExt;
    OsStr::from_bytes(bytes)
}

// ---- Users, for the escape suites (tests/tests/escape.rs, tests/tests/doors.rs).

/// Who runs an attempt in the escape suites (and the shim in front of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// root.
    Root,
    /// The unprivileged system user [`TEST_USER`].
    User,
}

/// The unprivileged user the `…_unprivileged` tests run as.
pub const TEST_USER: &str = "landwall-test";

fn id_of(flag: &str) -> Option<u32> {
    let out = Command::new("id").arg(flag).arg(TEST_USER).output().ok()?;
    if !out.status.success() {
        return None;
    }
    stdout(&out).trim().parse().ok()
}

/// The unprivileged test user's uid and gid, creating the system user on first use.
pub fn test_user() -> (u32, u32) {
    static USER: OnceLock<(u32, u32)> = OnceLock::new();
    *USER.get_or_init(|| {
        let mut last = String::new();
        for _ in 0..20 {
            if let (Some(uid), Some(gid)) = (id_of("-u"), id_of("-g")) {
                return (uid, gid);
            }
            // Another test process may be creating it at the same time: useradd then fails
            // on its lock, and the next look-up finds the user.
            let out = Command::new("useradd")
                .args(["--system", "--no-create-home", TEST_USER])
                .output()
                .expect("run useradd");
            last = stderr(&out);
        }
        panic!("cannot create the user {TEST_USER}: {last}")
    })
}

/// `chown -hR uid:gid path`.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) {
    use std::os::unix::fs::MetadataExt as _;
    // Only what is not theirs yet: a chown changes the change time, which the record of
    // what is the user's own holds.
    let meta = std::fs::symlink_metadata(path).expect("stat");
    if (meta.uid(), meta.gid()) != (uid, gid) {
        std::os::unix::fs::lchown(path, Some(uid), Some(gid)).expect("chown");
    }
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).expect("read dir") {
            chown_tree(&entry.expect("entry").path(), uid, gid);
        }
    }
}

// ---- Attempts, for the escape suites: one line, `ESCAPED …` or `BLOCKED …`.

/// Runs `c` with stdin on /dev/null and collects its output.
pub fn output(c: &mut Command) -> Output {
    c.stdin(Stdio::null()).output().expect("spawn")
}

/// [`output`], failing the test if the output is not complete (every holder of its pipes
/// gone: the launch's watcher holds them until it is done) within `limit`: a process that
/// hangs fails the test instead of hanging it.
pub fn output_within(c: &mut Command, limit: std::time::Duration) -> Output {
    use std::io::Read;
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let (tx, rx) = std::sync::mpsc::channel();
    for (n, pipe) in [
        (
            1,
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
        (
            2,
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ),
    ] {
        let mut pipe = pipe.expect("piped");
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut b = Vec::new();
            let _partial = pipe.read_to_end(&mut b);
            let _gone = tx.send((n, b));
        });
    }
    let end = std::time::Instant::now() + limit;
    let (mut stdout, mut stderr) = (None, None);
    while stdout.is_none() || stderr.is_none() {
        match rx.recv_timeout(end.saturating_duration_since(std::time::Instant::now())) {
            Ok((1, b)) => stdout = Some(b),
            Ok((_, b)) => stderr = Some(b),
            Err(_) => {
                let _gone = child.kill();
                let _reaped = child.wait();
                panic!("{c:?}: its output was not complete after {limit:?} (a process holding it hangs)");
            }
        }
    }
    let status = child.wait().expect("wait");
    Output {
        status,
        stdout: stdout.unwrap_or_default(),
        stderr: stderr.unwrap_or_default(),
    }
}

/// Copies `src` to `dst` with `install OPTS`, a separate process. A program this test
/// process wrote itself could be briefly busy: a parallel test's fork inherits the writing
/// descriptor until it execs, and exec then fails with ETXTBSY. Programs the tests run are
/// therefore never opened for writing here.
pub fn install(src: &Path, dst: &Path, opts: &[&str]) {
    let out = Command::new("install")
        .args(opts)
        .arg(src)
        .arg(dst)
        .output()
        .expect("run install");
    assert!(
        out.status.success(),
        "install {}: {}",
        dst.display(),
        stderr(&out)
    );
}

/// Status, stdout and stderr, for an assertion message.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        stdout(out),
        stderr(out)
    )
}

/// The one line an attempt prints.
pub fn verdict(out: &Output) -> String {
    let text = stdout(out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "an attempt prints exactly one line:\n{}",
        describe(out)
    );
    lines[0].to_string()
}

/// Waits until no watcher of a launch in `wt` runs (the record's lock under `home`, root's
/// home for root, is free): what a launch's watcher does last may come after the launch
/// has given the terminal back.
pub fn settle(home: &Path, wt: &Path) {
    let real = std::fs::canonicalize(wt).expect("real path of the worktree");
    let lock = home
        .join(landwall::record::UNDER_HOME)
        .join(landwall::record::key(&real))
        .join("lock");
    let Ok(file) = std::fs::File::open(&lock) else {
        return;
    };
    // Long enough for a loaded machine; a watcher still there then fails the test rather
    // than racing its next step.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        use std::os::fd::AsFd as _;
        match landwall::sys::flock(file.as_fd(), libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => return,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    panic!("a watcher of {} still ran after 60 s", wt.display());
}
