//! `landwall-drain` and the spool's own names (issue 18, item 4): a job ID that would share a
//! file with another job, a lock file removed under a running daemon, a file-size limit of
//! zero, and the signal disposition jobs inherit. The built daemon on the real kernel, one
//! scratch spool per test under /var/tmp. Helpers are copied from tests/tests/drain.rs.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use landwall_e2e::{bin_dir, run, stderr, stdout, Sandbox};

const EXIT_SPOOL: i32 = 74;
const EXIT_LOCKED: i32 = 75;

/// Long enough for a loaded 2-core CI machine; a passing run never waits this long.
const DEADLINE: Duration = Duration::from_secs(60);

/// Polls `f` every 20 ms until it is true or the deadline passes.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + DEADLINE;
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One test's drain setup: a sandbox, a worktree root `work/`, a spool, a config.
struct Drain {
    sb: Sandbox,
}

/// A running daemon, killed if the test ends without stopping it.
struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Daemon {
    fn pid(&self) -> u32 {
        self.child.id()
    }
    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }
    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
    fn term(&self) {
        let st = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -TERM failed");
    }
    fn wait(&mut self) -> ExitStatus {
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(
                Instant::now() < end,
                "daemon did not exit; its log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ignored = self.child.kill();
            let _ignored = self.child.wait();
        }
    }
}

impl Drain {
    fn new(name: &str) -> Drain {
        let sb = Sandbox::new(name);
        fs::create_dir_all(sb.root.join("work")).expect("mkdir work");
        let roots = format!("{:?}", sb.root.join("work"));
        sb.config(&format!(
            "[drain]\nworktree_roots = [{roots}]\ngrace = \"1s\"\n"
        ));
        Drain { sb }
    }

    fn spool(&self) -> PathBuf {
        self.sb.root.join("spool")
    }
    fn config_path(&self) -> PathBuf {
        self.sb.root.join("landwall.toml")
    }
    fn dir(&self, state: &str) -> PathBuf {
        self.spool().join(state)
    }

    /// A new worktree `work/NAME`.
    fn wt(&self, name: &str) -> PathBuf {
        let p = self.sb.root.join("work").join(name);
        fs::create_dir_all(&p).expect("mkdir worktree");
        p
    }

    /// The daemon's arguments after its path.
    fn args(&self) -> Vec<PathBuf> {
        vec![
            "--spool".into(),
            self.spool(),
            "--config".into(),
            self.config_path(),
        ]
    }

    /// `landwall-drain --spool … --config …` with the sandbox's clean environment.
    fn drain(&self) -> Command {
        let mut c = Command::new(bin_dir().join("landwall-drain"));
        self.sb.clean_env(&mut c);
        c.args(self.args()).current_dir(&self.sb.root);
        c
    }

    /// Starts the daemon (serving, not `--once`) with its log in a file, and waits until it
    /// serves.
    fn start(&self, tag: &str) -> Daemon {
        let log = self.sb.root.join(format!("daemon-{tag}.log"));
        let mut c = self.drain();
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("daemon log"));
        let d = Daemon {
            child: c.spawn().expect("spawn landwall-drain"),
            log,
        };
        wait_for("the daemon to serve", || d.log().contains("serving"));
        d
    }

    /// Runs `landwall-drain --once` to the end.
    fn once(&self) -> std::process::Output {
        let out = run(self.drain().arg("--once"));
        assert!(
            out.status.success(),
            "--once failed: {:?}\n{}",
            out.status,
            stderr(&out)
        );
        out
    }

    /// `landwall submit … -- sh -c SCRIPT` in `wt`; returns the job ID.
    fn submit_sh(&self, wt: &Path, script: &str) -> String {
        let mut c = self.sb.landwall();
        c.arg("submit")
            .arg("--spool")
            .arg(self.spool())
            .arg("--worktree")
            .arg(wt)
            .args(["--", "sh", "-c", script]);
        let out = run(&mut c);
        assert!(out.status.success(), "submit failed: {}", stderr(&out));
        stdout(&out).trim().to_string()
    }

    /// The recorded result of `id`: (state, fields).
    fn result(&self, id: &str) -> Option<(String, BTreeMap<String, String>)> {
        for state in ["done", "failed"] {
            if let Ok(text) = fs::read_to_string(self.dir(state).join(format!("{id}.result.toml")))
            {
                return Some((state.to_string(), fields(&text)));
            }
        }
        None
    }

    fn log_of(&self, id: &str) -> String {
        fs::read_to_string(self.spool().join("logs").join(format!("{id}.log"))).unwrap_or_default()
    }

    fn names(&self, state: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.dir(state))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

/// `key = value` lines of a result file, quotes removed.
fn fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

#[test]
fn an_id_ending_in_result_is_not_a_job_and_no_result_is_overwritten() {
    let d = Drain::new("drain-ids-result");
    let wt = d.wt("w");
    fs::create_dir_all(d.dir("queue")).expect("mkdir");
    let job = |word: &str| format!("worktree = {wt:?}\nargv = [\"echo\", \"{word}\"]\n");
    // `x.result.toml` would be job `x.result`, whose job file in done/ is `x.result.toml`:
    // the result file of job `x`. Control: `x.run` (the suffix of a run record) and any
    // other dotted ID are jobs.
    for (name, word) in [("x", "x"), ("x.result", "x.result"), ("x.run", "x.run")] {
        fs::write(d.dir("queue").join(format!("{name}.toml")), job(word)).expect("queue");
    }
    let out = d.once();
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l.contains("x.result.toml")
            && l.contains("not a job name")
            && l.contains("`.result`")),
        "{err}"
    );
    assert_eq!(d.names("queue"), ["x.result.toml"], "left alone");
    assert_eq!(
        d.names("done"),
        ["x.result.toml", "x.run.result.toml", "x.run.toml", "x.toml"]
    );
    for id in ["x", "x.run"] {
        let (state, r) = d.result(id).expect("a result");
        assert_eq!(
            (state.as_str(), r.get("id").map(String::as_str)),
            ("done", Some(id))
        );
        assert_eq!(d.log_of(id), format!("{id}\n"));
    }
    assert!(!d.spool().join("logs").join("x.result.log").exists());
}

#[test]
fn removing_the_lock_file_does_not_let_a_second_daemon_in() {
    let d = Drain::new("drain-ids-lock");
    let wt = d.wt("w");
    let mut first = d.start("first");
    let id = d.submit_sh(&wt, "touch started; sleep 2; echo finished");
    wait_for("the job to start", || wt.join("started").exists());

    // Control: with the file in place a second daemon is refused, naming the first.
    let out = run(d.drain().arg("--once"));
    assert_eq!(out.status.code(), Some(EXIT_LOCKED), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("pid {}", first.pid())),
        "{}",
        stderr(&out)
    );

    // Without it, it is refused all the same (no pid to name), and touches nothing.
    fs::remove_file(d.spool().join("lock")).expect("rm lock");
    let out = run(d.drain().arg("--once"));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_LOCKED), "{err}");
    assert!(err.contains("already serves"), "{err}");
    assert!(first.alive(), "the first daemon died:\n{}", first.log());
    assert!(
        d.names("running").contains(&format!("{id}.toml")),
        "the job left running/:\n{}",
        first.log()
    );

    // The first one's job runs to its end and is recorded once.
    wait_for("the job to finish", || d.result(&id).is_some());
    let (state, _) = d.result(&id).expect("result");
    assert_eq!(state, "done", "{}", first.log());
    assert_eq!(d.log_of(&id), "finished\n");
    first.term();
    assert_eq!(first.wait().code(), Some(0), "{}", first.log());
}

/// `landwall-drain --once` under `ulimit -f LIMIT`, stderr on a pipe (no file-size limit
/// applies to it).
fn once_with_fsize(d: &Drain, limit: &str) -> std::process::Output {
    let mut c = Command::new("sh");
    d.sb.clean_env(&mut c);
    c.arg("-c")
        .arg(format!("ulimit -f {limit} && exec \"$0\" \"$@\" --once"))
        .arg(bin_dir().join("landwall-drain"))
        .args(d.args())
        .current_dir(&d.sb.root);
    run(&mut c)
}

#[test]
fn a_file_size_limit_of_zero_is_a_spool_error_not_a_silent_death() {
    let d = Drain::new("drain-ids-fsize");
    let out = once_with_fsize(&d, "0");
    let err = stderr(&out);
    assert_eq!(
        (
            out.status.code(),
            std::os::unix::process::ExitStatusExt::signal(&out.status)
        ),
        (Some(EXIT_SPOOL), None),
        "{err}"
    );
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("File too large"), "{err}");
    // Control: the same daemon without the limit.
    let out = once_with_fsize(&d, "unlimited");
    assert!(out.status.success(), "{}", stderr(&out));
}

/// The signal numbers set in a `SigIgn:` or `SigCgt:` line of /proc/PID/status.
fn signals(status: &str, key: &str) -> Vec<u32> {
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|m| u64::from_str_radix(m.trim(), 16).expect("hex mask"))
        .unwrap_or_else(|| panic!("no {key} in\n{status}"));
    (1..=64).filter(|s| mask & (1u64 << (s - 1)) != 0).collect()
}

#[test]
fn jobs_get_the_default_action_of_sigxfsz() {
    let d = Drain::new("drain-ids-xfsz");
    let wt = d.wt("w");
    let id = d.submit_sh(&wt, "cat /proc/self/status");
    d.once();
    let log = d.log_of(&id);
    let xfsz = libc::SIGXFSZ as u32;
    assert!(!signals(&log, "SigIgn:").contains(&xfsz), "{log}");
    assert!(!signals(&log, "SigCgt:").contains(&xfsz), "{log}");
    // Control: SIGPIPE, which Rust ignores at start, is not ignored in the job either.
    assert!(
        !signals(&log, "SigIgn:").contains(&(libc::SIGPIPE as u32)),
        "{log}"
    );
}
