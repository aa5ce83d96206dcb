//! `landwall-drain` end to end: the built daemon, `landwall submit` and `landwall jobs`, real
//! processes on the real kernel, one scratch spool per test under /var/tmp (never /tmp, which
//! every job may write). Waits poll with generous deadlines; nothing relies on a fixed sleep.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use landwall_e2e::{bin_dir, chown_tree, helper, run, stderr, stdout, test_user, Sandbox};

const EXIT_SPOOL: i32 = 74;
const EXIT_LOCKED: i32 = 75;
const EXIT_CONFIG: i32 = 78;
const EXIT_WALL: i32 = 100;

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

/// One test's drain setup: a sandbox, worktree roots under `work/`, a spool, a config.
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
    fn signal(&self, sig: &str) {
        let st = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .expect("run kill");
        assert!(st.success(), "kill -{sig} failed");
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
    fn kill9(&mut self) {
        self.child.kill().expect("kill -9");
        let st = self.child.wait().expect("wait");
        assert_eq!(st.signal(), Some(9));
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
        let d = Drain { sb };
        d.write_config(&[d.work()], "1s");
        d
    }

    fn work(&self) -> PathBuf {
        self.sb.root.join("work")
    }
    fn spool(&self) -> PathBuf {
        self.sb.root.join("spool")
    }
    fn config_path(&self) -> PathBuf {
        self.sb.root.join("landwall.toml")
    }

    fn write_config(&self, roots: &[PathBuf], grace: &str) {
        let roots: Vec<String> = roots.iter().map(|r| format!("{:?}", r)).collect();
        self.sb.config(&format!(
            "[drain]\nworktree_roots = [{}]\ngrace = \"{grace}\"\n",
            roots.join(", ")
        ));
    }

    /// A new worktree `work/NAME`.
    fn wt(&self, name: &str) -> PathBuf {
        let p = self.work().join(name);
        fs::create_dir_all(&p).expect("mkdir worktree");
        p
    }

    /// `landwall-drain --spool … --config …` with the sandbox's clean environment.
    fn drain(&self) -> Command {
        let mut c = Command::new(bin_dir().join("landwall-drain"));
        self.sb.clean_env(&mut c);
        c.arg("--spool")
            .arg(self.spool())
            .arg("--config")
            .arg(self.config_path())
            .current_dir(&self.sb.root);
        c
    }

    /// Starts the daemon (serving, not `--once`) with its log in a file.
    fn start(&self, tag: &str, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = self.sb.root.join(format!("daemon-{tag}.log"));
        let mut c = self.drain();
        c.args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("daemon log"));
        for (k, v) in env {
            c.env(k, v);
        }
        Daemon {
            child: c.spawn().expect("spawn landwall-drain"),
            log,
        }
    }

    /// Runs `landwall-drain --once` to the end.
    fn once(&self) -> std::process::Output {
        let mut c = self.drain();
        c.arg("--once");
        let out = run(&mut c);
        assert!(
            out.status.success(),
            "--once failed: {:?}\n{}",
            out.status,
            stderr(&out)
        );
        out
    }

    /// `landwall submit --spool … --worktree WT [extra] -- ARGV…`; returns the job ID.
    fn submit(&self, wt: &Path, extra: &[&str], argv: &[&str]) -> String {
        let mut c = self.sb.landwall();
        c.arg("submit")
            .arg("--spool")
            .arg(self.spool())
            .arg("--worktree")
            .arg(wt)
            .args(extra)
            .arg("--")
            .args(argv);
        let out = run(&mut c);
        assert!(out.status.success(), "submit failed: {}", stderr(&out));
        let id = stdout(&out).trim().to_string();
        assert!(
            !id.is_empty() && !id.contains(char::is_whitespace),
            "{id:?}"
        );
        id
    }

    /// `sh -c SCRIPT` as a job in `wt`.
    fn submit_sh(&self, wt: &Path, script: &str) -> String {
        self.submit(wt, &[], &["sh", "-c", script])
    }

    fn dir(&self, state: &str) -> PathBuf {
        self.spool().join(state)
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

    fn expect_result(&self, id: &str) -> (String, BTreeMap<String, String>) {
        self.result(id)
            .unwrap_or_else(|| panic!("no result for {id}; spool:\n{}", self.tree()))
    }

    fn log_of(&self, id: &str) -> String {
        fs::read_to_string(self.spool().join("logs").join(format!("{id}.log"))).unwrap_or_default()
    }

    /// Every file under the spool, for failure messages.
    fn tree(&self) -> String {
        snapshot(&self.spool())
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Files named `*.toml` (jobs) and `*.result.toml` in a state directory.
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

    /// Asserts that every job in `ids` has exactly one job file and one result, in done/ or
    /// failed/, and that nothing is left queued or running.
    fn assert_each_finished_once(&self, ids: &[String]) {
        assert!(
            self.names("queue").is_empty() && self.names("running").is_empty(),
            "left over:\n{}",
            self.tree()
        );
        for id in ids {
            let mut jobs = 0;
            let mut results = 0;
            for state in ["done", "failed"] {
                let names = self.names(state);
                jobs += names.iter().filter(|n| **n == format!("{id}.toml")).count();
                results += names
                    .iter()
                    .filter(|n| **n == format!("{id}.result.toml"))
                    .count();
            }
            assert_eq!((jobs, results), (1, 1), "{id}:\n{}", self.tree());
        }
    }
}

/// `key = value` lines of a result file, quotes removed.
fn fields(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(" = "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// Everything about every file under `root` that a write, a rename or a new file changes.
fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        let Ok(entries) = fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let m = fs::symlink_metadata(&p).expect("lstat");
            let rel = p.strip_prefix(root).expect("prefix").display().to_string();
            // A file with other names (a helper binary hard-linked into every test's
            // sandbox) has its change time moved by the other tests' links: not by this one.
            let ctime = if m.is_file() && m.nlink() > 1 {
                "shared".to_string()
            } else {
                format!("{}.{}", m.ctime(), m.ctime_nsec())
            };
            out.insert(
                rel,
                format!(
                    "type={:?} len={} mode={:o} ino={} mtime={}.{} ctime={ctime} uid={}",
                    m.file_type(),
                    m.len(),
                    m.mode(),
                    m.ino(),
                    m.mtime(),
                    m.mtime_nsec(),
                    m.uid()
                ),
            );
            if m.is_dir() {
                walk(root, &p, out);
            }
        }
    }
    let m = fs::symlink_metadata(root).expect("spool");
    out.insert(
        ".".into(),
        format!(
            "mtime={}.{} ctime={}.{}",
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec()
        ),
    );
    walk(root, root, &mut out);
    out
}

/// Whether process `pid` is alive (present and not a zombie).
fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

fn read_pid(path: &Path) -> u32 {
    fs::read_to_string(path)
        .expect("pid file")
        .trim()
        .parse()
        .expect("pid")
}

#[test]
fn a_batch_is_drained_once_with_results_logs_and_a_wall_per_job() {
    let d = Drain::new("drain-batch");
    let (a, b, c) = (d.wt("a"), d.wt("b"), d.wt("c"));
    fs::write(b.join("secret"), "b's secret\n").expect("secret");
    let outside = d.sb.outside();
    let probe = format!(
        "echo out-a; echo err-a >&2; \
         echo x > {b}/from-a; echo write-other=$?; \
         cat {b}/secret; echo read-other=$?; \
         echo x > {o}/from-a; echo write-outside=$?; \
         echo mine > own; echo write-own=$?",
        b = b.display(),
        o = outside.display()
    );
    let ids = [
        d.submit_sh(&a, &probe),
        d.submit_sh(&b, "echo b-ran; exit 7"),
        d.submit_sh(&c, "kill -9 $$"),
        d.submit(&c, &[], &["echo", "hello", "from c"]),
    ];
    let queued = stdout(&run(d
        .sb
        .landwall()
        .args(["jobs", "--spool"])
        .arg(d.spool())));
    assert_eq!(queued.matches(" queued ").count(), 4, "{queued}");

    let out = d.once();
    assert!(
        stderr(&out).contains(&format!("job {}: done", ids[0])),
        "{}",
        stderr(&out)
    );
    d.assert_each_finished_once(&ids);

    let (state, r) = d.expect_result(&ids[0]);
    assert_eq!(
        (state.as_str(), r.get("exit_code").map(String::as_str)),
        ("done", Some("0"))
    );
    let log = d.log_of(&ids[0]);
    assert!(log.contains("out-a") && log.contains("err-a"), "{log}");
    assert!(log.contains("write-own=0"), "{log}");
    for denied in ["write-other=0", "read-other=0", "write-outside=0"] {
        assert!(
            !log.contains(denied),
            "a job got through its wall ({denied}):\n{log}"
        );
    }
    assert!(!log.contains("b's secret"), "{log}");
    assert!(!b.join("from-a").exists() && !outside.join("from-a").exists());
    assert!(a.join("own").exists());

    let (state, r) = d.expect_result(&ids[1]);
    assert_eq!(
        (state.as_str(), r.get("exit_code").map(String::as_str)),
        ("failed", Some("7"))
    );
    assert!(d.log_of(&ids[1]).contains("b-ran"));
    let (state, r) = d.expect_result(&ids[2]);
    assert_eq!(
        (state.as_str(), r.get("signal").map(String::as_str)),
        ("failed", Some("9"))
    );
    let (state, _) = d.expect_result(&ids[3]);
    assert_eq!(state, "done");
    assert_eq!(d.log_of(&ids[3]), "hello from c\n");
    for id in &ids {
        let (_, r) = d.expect_result(id);
        for key in ["started_at", "ended_at", "duration_secs"] {
            assert!(r.contains_key(key), "{id}: no {key}: {r:?}");
        }
    }

    // `landwall jobs --json` is one array with every job in its final state.
    let json = stdout(&run(d
        .sb
        .landwall()
        .args(["jobs", "--json", "--spool"])
        .arg(d.spool())));
    let trimmed = json.trim();
    assert!(trimmed.starts_with('[') && trimmed.ends_with(']'), "{json}");
    assert_eq!(json.matches("\"state\": \"done\"").count(), 2, "{json}");
    assert_eq!(json.matches("\"state\": \"failed\"").count(), 2, "{json}");
    assert!(json.contains("\"exit_code\": 7"), "{json}");
    let table = stdout(&run(d
        .sb
        .landwall()
        .args(["jobs", "--spool"])
        .arg(d.spool())));
    assert_eq!(table.lines().count(), 5, "header and four jobs:\n{table}");
    assert!(
        table.contains("SIGKILL") && table.contains("exit 7"),
        "{table}"
    );
}

#[test]
fn a_daemon_killed_mid_batch_loses_nothing() {
    let d = Drain::new("drain-kill9");
    let ids: Vec<String> = (0..8)
        .map(|i| {
            let wt = d.wt(&format!("j{i}"));
            d.submit_sh(&wt, "echo start >> runs; sleep 0.3; echo end >> runs")
        })
        .collect();
    let mut daemon = d.start("first", &[], &[]);
    wait_for("two results and a job running", || {
        let finished = ids.iter().filter(|id| d.result(id).is_some()).count();
        finished >= 2 && d.names("running").iter().any(|n| n.ends_with(".toml"))
    });
    daemon.kill9();
    assert!(
        ids.iter().any(|id| d.result(id).is_none()),
        "the batch was over before the kill"
    );
    let out = d.once();
    // The kill lands while a job runs (it goes back to the queue) or, now and then, between
    // its result and its move to done/ (the move is completed).
    let err = stderr(&out);
    assert!(
        err.contains("queued again") || err.contains("result was recorded"),
        "{err}"
    );
    d.assert_each_finished_once(&ids);
    for (i, id) in ids.iter().enumerate() {
        let (state, _) = d.expect_result(id);
        assert_eq!(state, "done", "{id}");
        let runs = fs::read_to_string(d.work().join(format!("j{i}/runs"))).expect("runs");
        assert!(runs.ends_with("start\nend\n"), "{id}: {runs:?}");
        // Never two runs at once: every start is followed by its end or cut off for good.
        assert!(!runs.contains("start\nstart\nend\nend"), "{id}: {runs:?}");
    }
}

/// The children of `pid` (every thread's).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for t in fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flatten()
    {
        let text = fs::read_to_string(t.path().join("children")).unwrap_or_default();
        out.extend(
            text.split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Queues a job that leaves a background process (its pid in `bg.pid`) the first time it
/// runs and says "second run" the next, starts a daemon and waits for the process: (job ID,
/// the daemon, the background pid).
fn start_a_job_with_a_background_process(d: &Drain, wt: &Path) -> (String, Daemon, u32) {
    let id = d.submit_sh(
        wt,
        "if [ -e again ]; then echo second run; exit 0; fi; touch again; \
         sleep 300 & echo $! > bg.pid; wait",
    );
    let daemon = d.start("first", &[], &[]);
    wait_for("the background process", || {
        fs::read_to_string(wt.join("bg.pid")).is_ok_and(|s| s.ends_with('\n'))
    });
    (id, daemon, read_pid(&wt.join("bg.pid")))
}

#[test]
fn a_killed_daemon_takes_its_jobs_with_it_and_they_run_again() {
    // kill -9 of the daemon: each job's keeper (its parent-death signal) ends all of the job,
    // its background process too, and the next daemon runs it again.
    let d = Drain::new("drain-killed");
    let wt = d.wt("w");
    let (id, mut daemon, bg) = start_a_job_with_a_background_process(&d, &wt);
    daemon.kill9();
    wait_for(
        "the job's background process to die with the daemon",
        || !alive(bg),
    );
    d.once();
    d.assert_each_finished_once(std::slice::from_ref(&id));
    assert_eq!(d.expect_result(&id).0, "done");
    assert!(d.log_of(&id).contains("second run"));
}

#[test]
fn leftovers_of_a_killed_daemon_die_before_the_job_runs_again() {
    // kill -9 of the daemon and of the job's keeper at once (as when everything is killed):
    // nothing is left to end the job, so the next daemon kills what is left of it (its
    // cgroup, or its process group) before it queues it again.
    let d = Drain::new("drain-leftover");
    let wt = d.wt("w");
    let (id, mut daemon, bg) = start_a_job_with_a_background_process(&d, &wt);
    let keepers = children_of(daemon.pid());
    assert_eq!(keepers.len(), 1, "one keeper: {keepers:?}");
    // The daemon is stopped first, so that it cannot act on its keeper's death (ending the
    // job's cgroup) in the moment between the two kills.
    daemon.signal("STOP");
    let st = Command::new("kill")
        .args(["-9", &keepers[0].to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
    wait_for("the keeper to die", || !alive(keepers[0]));
    daemon.kill9();
    // The background process outlives both…
    assert!(
        alive(bg),
        "premise: the background process outlives its keeper"
    );
    let out = d.once();
    // … until the next daemon kills it before it queues the job again.
    assert!(!alive(bg), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("left running") || stderr(&out).contains("daemons that are gone"),
        "{}",
        stderr(&out)
    );
    d.assert_each_finished_once(std::slice::from_ref(&id));
    assert_eq!(d.expect_result(&id).0, "done");
    assert!(d.log_of(&id).contains("second run"));
}

#[test]
fn sigterm_puts_a_long_job_back_and_it_runs_on_restart() {
    let d = Drain::new("drain-sigterm");
    let wt = d.wt("w");
    let id = d.submit_sh(
        &wt,
        "if [ -e again ]; then echo second run; exit 0; fi; touch again; sleep 300",
    );
    let mut daemon = d.start("first", &[], &[]);
    wait_for("the job to start", || wt.join("again").exists());
    daemon.signal("TERM");
    let st = daemon.wait();
    assert_eq!(st.code(), Some(0), "{}", daemon.log());
    assert_eq!(d.names("queue"), [format!("{id}.toml")], "{}", d.tree());
    assert!(d.names("running").is_empty(), "{}", d.tree());
    assert!(d.result(&id).is_none(), "no result for a job put back");
    assert!(daemon.log().contains("queued again"), "{}", daemon.log());

    d.once();
    d.assert_each_finished_once(std::slice::from_ref(&id));
    assert_eq!(d.expect_result(&id).0, "done");
    assert!(d.log_of(&id).contains("second run"));
}

#[test]
fn the_daemon_does_not_serve_when_its_wall_cannot_go_up() {
    let d = Drain::new("drain-nowall");
    let id = d.submit(&d.wt("w"), &[], &["true"]);
    for how in [&["stack", "16", "--"][..], &["nolandlock", "--"][..]] {
        let before = snapshot(&d.spool());
        let mut c = Command::new(helper());
        d.sb.clean_env(&mut c);
        c.args(how)
            .arg(bin_dir().join("landwall-drain"))
            .arg("--spool")
            .arg(d.spool())
            .arg("--config")
            .arg(d.config_path())
            .arg("--once")
            .env("LANDWALL_DRAIN_SANDBOX", "1");
        let out = run(&mut c);
        assert_eq!(
            out.status.code(),
            Some(EXIT_WALL),
            "{how:?}: {}",
            stderr(&out)
        );
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{how:?}: one line:\n{err}");
        assert!(err.contains("LANDWALL_DRAIN_SANDBOX=1"), "{err}");
        assert_eq!(
            snapshot(&d.spool()),
            before,
            "{how:?}: the spool was touched"
        );
        assert!(
            !d.spool().join("lock").exists(),
            "{how:?}: lock file created"
        );
    }
    assert_eq!(d.names("queue"), [format!("{id}.toml")]);

    // The same kernel without the flag: the daemon serves (and warns), and the job, whose
    // own wall cannot go up either, fails closed with the reason. (Not under 16 stacked
    // layers: the helper's ABI-1 layers refuse every cross-directory rename, the claim too.)
    let mut c = Command::new(helper());
    d.sb.clean_env(&mut c);
    c.args(["nolandlock", "--"])
        .arg(bin_dir().join("landwall-drain"))
        .arg("--spool")
        .arg(d.spool())
        .arg("--config")
        .arg(d.config_path())
        .arg("--once");
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("WITHOUT its own wall"),
        "{}",
        stderr(&out)
    );
    let (state, r) = d.expect_result(&id);
    assert_eq!(state, "failed");
    let reason = r.get("reason").cloned().unwrap_or_default();
    assert!(
        reason.starts_with("not started:") && reason.contains("no Landlock"),
        "{reason}"
    );
    assert_eq!(r.get("exit_code").map(String::as_str), Some("100"));
}

#[test]
fn without_the_flag_it_warns_once_with_it_it_walls_itself() {
    for (flag, walled) in [(None, false), (Some("0"), false), (Some("1"), true)] {
        let d = Drain::new("drain-flag");
        let wt = d.wt("w");
        // The job's own wall grants the directory of the program it runs (here the
        // sandbox's agents/); the daemon's wall does not, so inside a walled daemon the
        // job cannot be exec'd. No job ever gets the daemon's $HOME, walled or not.
        let program = d.sb.agent_script("probe", "echo program-ran");
        let home_id = d.submit_sh(&wt, "echo x > \"$HOME/probe\"; echo home=$?; echo y > own");
        let program_id = d.submit(&wt, &[], &[program.to_str().expect("utf-8")]);
        let mut c = d.drain();
        c.arg("--once");
        if let Some(v) = flag {
            c.env("LANDWALL_DRAIN_SANDBOX", v);
        }
        let out = run(&mut c);
        assert!(out.status.success(), "{flag:?}: {}", stderr(&out));
        let err = stderr(&out);
        let warned = err.matches("WITHOUT its own wall").count();
        assert_eq!(warned, usize::from(!walled), "{flag:?}: {err}");
        assert!(!walled || err.contains("walled in"), "{flag:?}: {err}");
        assert!(
            err.lines().filter(|l| l.contains(" WARN ")).count() <= 1,
            "{err}"
        );
        assert_eq!(d.expect_result(&home_id).0, "done", "{flag:?}");
        assert!(wt.join("own").exists(), "{flag:?}");
        let log = d.log_of(&home_id);
        assert!(!log.contains("home=0"), "{flag:?}: {log}");
        assert!(!d.sb.home().join("probe").exists(), "{flag:?}");
        let (state, r) = d.expect_result(&program_id);
        assert_eq!(state == "done", !walled, "{flag:?}: {r:?}");
        assert_eq!(
            d.log_of(&program_id).contains("program-ran"),
            !walled,
            "{flag:?}"
        );
    }
}

#[test]
fn a_bad_flag_value_is_a_configuration_error() {
    let d = Drain::new("drain-badflag");
    d.submit(&d.wt("w"), &[], &["true"]);
    let before = snapshot(&d.spool());
    for bad in ["yes", "", "2", "true", "01"] {
        let mut c = d.drain();
        c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", bad);
        let out = run(&mut c);
        assert_eq!(
            out.status.code(),
            Some(EXIT_CONFIG),
            "{bad:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("LANDWALL_DRAIN_SANDBOX"),
            "{}",
            stderr(&out)
        );
        assert_eq!(
            snapshot(&d.spool()),
            before,
            "{bad:?}: the spool was touched"
        );
    }
}

#[test]
fn a_second_daemon_on_the_same_spool_is_refused() {
    let d = Drain::new("drain-second");
    let sock_path = d.sb.root.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).expect("bind notify socket");
    sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let sock_env = sock_path.to_str().expect("utf-8").to_string();
    let mut first = d.start("first", &[], &[("NOTIFY_SOCKET", &sock_env)]);
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("READY=1 from the first daemon");
    assert_eq!(&buf[..n], b"READY=1");

    let out = run(d.drain().arg("--once"));
    assert_eq!(out.status.code(), Some(EXIT_LOCKED), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("already serves"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "{err}");
    assert_eq!(
        err.lines().count(),
        2,
        "the warning and the refusal:\n{err}"
    );

    // The first one still serves.
    let id = d.submit(&d.wt("w"), &[], &["true"]);
    wait_for("the first daemon to run the job", || {
        d.result(&id).is_some()
    });
    first.signal("TERM");
    let n = sock.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert_eq!(first.wait().code(), Some(0));
}

#[test]
fn bad_job_files_fail_with_their_reason_and_good_ones_complete() {
    let d = Drain::new("drain-bad");
    let wt = d.wt("w");
    // Queue the files by hand, in name order, the way a careless or hostile user might.
    fs::create_dir_all(d.dir("queue")).expect("mkdir");
    let good = |name: &str| format!("worktree = {:?}\nargv = [\"echo\", \"{name}\"]\n", wt);
    let q = |name: &str| d.dir("queue").join(format!("{name}.toml"));
    let put = |name: &str, text: &str| fs::write(q(name), text).expect("write job");
    put("01-good", &good("01"));
    put("02-not-toml", "worktree = [\n");
    put("03-unknown-key", &format!("{}sudo = true\n", good("03")));
    put(
        "04-outside-roots",
        &format!("worktree = {:?}\nargv = [\"true\"]\n", d.sb.outside()),
    );
    put(
        "05-missing-worktree",
        &format!(
            "worktree = {:?}\nargv = [\"true\"]\n",
            d.work().join("nope")
        ),
    );
    fs::write(d.sb.root.join("target.toml"), good("06")).expect("write");
    std::os::unix::fs::symlink(d.sb.root.join("target.toml"), q("06-symlink")).expect("symlink");
    fs::create_dir(q("07-directory")).expect("mkdir");
    let st = Command::new("mkfifo")
        .arg(q("08-fifo"))
        .status()
        .expect("mkfifo");
    assert!(st.success());
    assert!(fs::symlink_metadata(q("08-fifo"))
        .expect("fifo")
        .file_type()
        .is_fifo());
    put(
        "09-too-large",
        &format!("{}#{}\n", good("09"), "x".repeat(64 * 1024)),
    );
    put("10-foreign-owner", &good("10"));
    std::os::unix::fs::chown(q("10-foreign-owner"), Some(4242), Some(4242)).expect("chown");
    put(
        "11-denied-env",
        &format!("{}env = [\"LD_PRELOAD\"]\n", good("11")),
    );
    put("12-relative", "worktree = \"w\"\nargv = [\"true\"]\n");
    put(
        "13-empty-argv",
        &format!("worktree = {:?}\nargv = []\n", wt),
    );
    put(
        "14-not-found",
        &format!("worktree = {:?}\nargv = [\"no-such-cmd\"]\n", wt),
    );
    put("15-good", &good("15"));

    d.once();
    let ids: Vec<String> = [
        "01-good",
        "02-not-toml",
        "03-unknown-key",
        "04-outside-roots",
        "05-missing-worktree",
        "06-symlink",
        "07-directory",
        "08-fifo",
        "09-too-large",
        "10-foreign-owner",
        "11-denied-env",
        "12-relative",
        "13-empty-argv",
        "14-not-found",
        "15-good",
    ]
    .map(String::from)
    .to_vec();
    d.assert_each_finished_once(&ids);
    for (id, expect) in [
        ("02-not-toml", "refused: invalid job file"),
        ("03-unknown-key", "sudo"),
        ("04-outside-roots", "outside the configured worktree roots"),
        ("05-missing-worktree", "does not exist"),
        ("06-symlink", "symbolic link"),
        ("07-directory", "not a regular file"),
        ("08-fifo", "not a regular file"),
        ("09-too-large", "limit"),
        ("10-foreign-owner", "owned by uid 4242"),
        ("11-denied-env", "denylist"),
        ("12-relative", "not an absolute path"),
        ("13-empty-argv", "`argv` is empty"),
        ("14-not-found", "not started: executing no-such-cmd"),
    ] {
        let (state, r) = d.expect_result(id);
        assert_eq!(state, "failed", "{id}");
        let reason = r.get("reason").cloned().unwrap_or_default();
        assert!(reason.contains(expect), "{id}: {reason:?} lacks {expect:?}");
    }
    for id in ["01-good", "15-good"] {
        assert_eq!(d.expect_result(id).0, "done", "{id}");
    }
    assert_eq!(d.log_of("15-good"), "15\n");
    assert_eq!(
        d.expect_result("14-not-found")
            .1
            .get("exit_code")
            .map(String::as_str),
        Some("127")
    );
}

#[test]
fn a_timeout_kills_the_jobs_group_and_says_so() {
    let d = Drain::new("drain-timeout");
    let wt = d.wt("w");
    let id = d.submit(
        &wt,
        &["--timeout", "1s"],
        &["sh", "-c", "sleep 300 & echo $! > bg.pid; sleep 300"],
    );
    d.once();
    let (state, r) = d.expect_result(&id);
    assert_eq!(state, "failed");
    assert_eq!(
        r.get("reason").map(String::as_str),
        Some("timed out after 1s")
    );
    assert_eq!(r.get("signal").map(String::as_str), Some("15"));
    let bg = read_pid(&wt.join("bg.pid"));
    wait_for("the background process to die", || !alive(bg));
}

#[test]
fn jobs_run_in_parallel_with_jobs_n() {
    let d = Drain::new("drain-parallel");
    // A place both jobs may write (no job gets the daemon's $HOME).
    let met = d.sb.root.join("meet");
    fs::create_dir_all(&met).expect("mkdir");
    d.sb.config(&format!(
        "writable = [{met:?}]\n[drain]\nworktree_roots = [{:?}]\ngrace = \"1s\"\n",
        d.work()
    ));
    // Each job waits (up to 30 s) for the other to have started: only together do both pass.
    let meet = |me: &str, other: &str| {
        let (me, other) = (met.join(me), met.join(other));
        format!(
            "touch {me:?}; i=0; \
             while [ ! -e {other:?} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; \
             [ -e {other:?} ]"
        )
    };
    let ids = [
        d.submit_sh(&d.wt("a"), &meet("one", "two")),
        d.submit_sh(&d.wt("b"), &meet("two", "one")),
    ];
    run(d.drain().args(["--once", "--jobs", "2"]));
    for id in &ids {
        assert_eq!(d.expect_result(id).0, "done", "{id}");
    }
}

#[test]
fn an_idle_daemon_sleeps_in_poll_with_no_timeout() {
    let d = Drain::new("drain-idle");
    let sock_path = d.sb.root.join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).expect("bind");
    sock.set_read_timeout(Some(DEADLINE)).expect("timeout");
    let daemon = d.start(
        "idle",
        &[],
        &[("NOTIFY_SOCKET", sock_path.to_str().expect("utf-8"))],
    );
    let mut buf = [0u8; 64];
    sock.recv(&mut buf).expect("READY=1");
    // /proc/PID/syscall: "NR arg1 … arg6 sp pc" while blocked. poll(2) is 7 with the
    // timeout in arg 3; ppoll(2) is 271 with a NULL timespec for "forever".
    let mut blocked = String::new();
    wait_for("the daemon to block", || {
        blocked = fs::read_to_string(format!("/proc/{}/syscall", daemon.pid())).unwrap_or_default();
        !blocked.starts_with("running")
    });
    let f: Vec<&str> = blocked.split_whitespace().collect();
    let forever = match f.first() {
        Some(&"7") => matches!(f.get(3), Some(&"0xffffffff") | Some(&"0xffffffffffffffff")),
        Some(&"271") => f.get(3) == Some(&"0x0"),
        _ => false,
    };
    assert!(forever, "not sleeping in poll without a timeout: {blocked}");
    // And it stays asleep: no CPU time over a second of idling.
    let ticks = || {
        let stat = fs::read_to_string(format!("/proc/{}/stat", daemon.pid())).expect("stat");
        let rest: Vec<u64> = stat
            .rsplit_once(')')
            .expect("stat")
            .1
            .split_whitespace()
            .skip(11)
            .take(2)
            .map(|v| v.parse().expect("ticks"))
            .collect();
        rest[0] + rest[1]
    };
    let before = ticks();
    let mut stat_reads = 0;
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        stat_reads += 1;
    }
    assert!(stat_reads > 0);
    assert_eq!(ticks(), before, "an idle daemon used CPU");
}

#[test]
fn sighup_reloads_the_configuration() {
    let d = Drain::new("drain-hup");
    fs::create_dir_all(d.sb.root.join("more/w")).expect("mkdir");
    let more = d.sb.root.join("more");
    let mut daemon = d.start("hup", &[], &[]);
    let first = d.submit(&more.join("w"), &[], &["true"]);
    wait_for("the first job to be refused", || d.result(&first).is_some());
    let (state, r) = d.expect_result(&first);
    assert_eq!(state, "failed");
    assert!(r["reason"].contains("outside"), "{r:?}");

    d.write_config(&[d.work(), more.clone()], "1s");
    daemon.signal("HUP");
    wait_for("the reload", || {
        daemon.log().contains("configuration reloaded")
    });
    let second = d.submit(&more.join("w"), &[], &["true"]);
    wait_for("the second job", || d.result(&second).is_some());
    assert_eq!(d.expect_result(&second).0, "done", "{}", daemon.log());
    daemon.signal("TERM");
    assert_eq!(daemon.wait().code(), Some(0));
}

#[test]
fn a_job_gets_the_variables_it_names_and_no_others() {
    let d = Drain::new("drain-env");
    let id = d.submit(
        &d.wt("w"),
        &["--env", "MY_TOKEN"],
        &["sh", "-c", "echo token=$MY_TOKEN other=$OTHER_SECRET"],
    );
    let mut c = d.drain();
    c.arg("--once")
        .env("MY_TOKEN", "passed")
        .env("OTHER_SECRET", "leaked");
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(d.log_of(&id), "token=passed other=\n");
}

#[test]
fn submit_refuses_what_the_daemon_would_refuse() {
    let d = Drain::new("drain-submit");
    let wt = d.wt("w");
    for (extra, needle) in [
        (&["--timeout", "5"][..], "not a duration"),
        (&["--env", "LD_PRELOAD"][..], "denylist"),
        (&["--agent", "../x"][..], "agent"),
    ] {
        let mut c = d.sb.landwall();
        c.arg("submit")
            .arg("--spool")
            .arg(d.spool())
            .arg("--worktree")
            .arg(&wt)
            .args(extra)
            .args(["--", "true"]);
        let out = run(&mut c);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(stderr(&out).contains(needle), "{extra:?}: {}", stderr(&out));
    }
    assert!(d.names("queue").is_empty());
    // And the file a good submit writes is one the daemon takes.
    let id = d.submit(&wt, &["--timeout", "1m"], &["echo", "ok"]);
    let mut text = String::new();
    fs::File::open(d.dir("queue").join(format!("{id}.toml")))
        .expect("queued")
        .read_to_string(&mut text)
        .expect("read");
    assert!(text.contains("timeout = \"1m\""), "{text}");
    d.once();
    assert_eq!(d.log_of(&id), "ok\n");
}

#[test]
fn the_runner_refuses_a_worktree_that_resolves_elsewhere_than_checked() {
    // The daemon passes the real path it checked; a directory swapped for a symlink since
    // (to another job's worktree, say) must not be walled into.
    let d = Drain::new("drain-swap");
    let other = d.wt("other");
    let swapped = d.work().join("swapped");
    std::os::unix::fs::symlink(&other, &swapped).expect("symlink");
    let mut c = Command::new(bin_dir().join("landwall-drain"));
    d.sb.clean_env(&mut c);
    c.arg("__run-job")
        .arg("--config")
        .arg(d.config_path())
        .arg("--spool")
        .arg(d.spool())
        .arg("--worktree")
        .arg(&swapped)
        .args(["--agent", "claude", "--parent"])
        .arg(std::process::id().to_string())
        .args(["--", "sh", "-c", "echo ran > marker"])
        .current_dir(&other)
        .stdin(Stdio::null());
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not to the directory the daemon checked"),
        "{}",
        stderr(&out)
    );
    assert!(!other.join("marker").exists());
}

// ---- The drain's own state is never a job's (docs/drain.md, "Why a job cannot submit a
// job"). Jobs run as the daemon's uid, so a job file a job managed to put in queue/ would be
// accepted: these tests show that no job's wall reaches the spool, and each control shows
// that the same attempt outside the wall, as the daemon's uid, gets a forged job run in
// another project's worktree with a variable from the daemon's environment.

/// The variable a forged job goes for, set in the daemon's environment only.
const TOKEN: (&str, &str) = ("DEPLOY_TOKEN", "deploy-token-4242");

impl Drain {
    /// `landwall-drain --once` with `TOKEN` in its environment and the flag if given.
    fn once_with_token(&self, flag: Option<&str>) -> std::process::Output {
        let mut c = self.drain();
        c.arg("--once").env(TOKEN.0, TOKEN.1);
        if let Some(v) = flag {
            c.env("LANDWALL_DRAIN_SANDBOX", v);
        }
        let out = run(&mut c);
        assert!(
            out.status.success(),
            "--once failed: {:?}\n{}",
            out.status,
            stderr(&out)
        );
        out
    }

    /// A job file that, once run, writes the token into `victim/forged-marker`; kept in
    /// `dir/forged.toml` for a job (or the control) to copy into queue/.
    fn plant_forged_job(&self, dir: &Path, victim: &Path) -> PathBuf {
        let text = format!(
            "worktree = {victim:?}\nargv = [\"sh\", \"-c\", \"echo token=${} > forged-marker\"]\nenv = [\"{}\"]\n",
            TOKEN.0, TOKEN.0
        );
        let p = dir.join("forged.toml");
        fs::write(&p, text).expect("write forged job");
        p
    }

    /// Whether the forged job ran (its marker holds the token).
    fn forged_ran(&self, victim: &Path) -> bool {
        fs::read_to_string(victim.join("forged-marker"))
            .is_ok_and(|m| m.contains(&format!("token={}", TOKEN.1)))
    }
}

/// The attempts of a job that goes for the spool: copy a job file into queue/, rename one
/// in from /tmp, list queue/, read other jobs' results and logs. One line per attempt,
/// `NAME=STATUS`.
fn spool_attempts(spool: &Path) -> String {
    format!(
        "cp forged.toml {q}/zz-forged.toml; echo write=$?; \
         cp forged.toml /tmp/lw-forged-$$.toml && mv /tmp/lw-forged-$$.toml {q}/zz-renamed.toml; echo rename=$?; \
         rm -f /tmp/lw-forged-$$.toml; \
         ls {q} > /dev/null; echo list=$?; \
         cat {s}/done/*.toml {s}/failed/*.toml > /dev/null; echo read-results=$?; \
         cat {s}/logs/*.log > /dev/null; echo read-logs=$?",
        q = spool.join("queue").display(),
        s = spool.display()
    )
}

#[test]
fn escape_job_writes_a_job_file_into_the_queue() {
    for flag in [None, Some("1")] {
        let d = Drain::new("drain-forge-queue");
        let (a, b) = (d.wt("a"), d.wt("b"));
        d.plant_forged_job(&a, &b);
        // Something for it to read: an earlier job's result and log.
        let earlier = d.submit(&b, &[], &["echo", "earlier output"]);
        let attack = spool_attempts(&d.spool());
        let id = d.submit_sh(&a, &attack);
        let out = d.once_with_token(flag);

        let log = d.log_of(&id);
        for step in ["write", "rename", "list", "read-results", "read-logs"] {
            assert!(log.contains(&format!("{step}=")), "{flag:?}: {log}");
            assert!(
                !log.contains(&format!("{step}=0")),
                "{flag:?}: the job reached the spool ({step}):\n{log}"
            );
        }
        assert!(!log.contains("earlier output"), "{flag:?}: {log}");
        assert!(
            d.names("queue").is_empty(),
            "{flag:?}: a job file appeared:\n{}",
            d.tree()
        );
        assert!(!d.forged_ran(&b), "{flag:?}: the forged job ran");
        d.assert_each_finished_once(&[earlier.clone(), id.clone()]);
        assert_eq!(
            d.names("done").len() + d.names("failed").len(),
            4,
            "{flag:?}: only the two jobs:\n{}\n{}",
            d.tree(),
            stderr(&out)
        );

        // Control: the same attempts outside the wall, as the daemon's uid (root): the
        // job file lands in queue/, owned by an allowed uid, and the daemon runs it in
        // the other project's worktree with the daemon's token.
        let mut c = Command::new("sh");
        c.args(["-c", &attack]).current_dir(&a).env_clear();
        c.env("PATH", landwall_e2e::SYSTEM_PATH);
        let control = run(&mut c);
        let said = stdout(&control);
        assert!(
            said.contains("write=0") && said.contains("list=0") && said.contains("read-logs=0"),
            "{said}"
        );
        assert!(
            d.names("queue").contains(&"zz-forged.toml".to_string()),
            "{}",
            d.tree()
        );
        d.once_with_token(flag);
        assert!(d.forged_ran(&b), "control: the forged job did not run");
    }
}

#[test]
fn escape_git_file_points_a_job_at_the_spool() {
    for target in ["", "queue"] {
        for flag in [None, Some("1")] {
            let d = Drain::new("drain-forge-gitdir");
            let (a, b) = (d.wt("a"), d.wt("b"));
            d.plant_forged_job(&a, &b);
            let spool = d.spool();
            // The spool must exist for `.git` to name it before the first run.
            fs::create_dir_all(spool.join("queue")).expect("mkdir");
            let gitdir = if target.is_empty() {
                spool.clone()
            } else {
                spool.join(target)
            };
            // First run: the job points its worktree's `.git` at the spool (its own
            // worktree is writable to it) …
            let first = d.submit_sh(
                &a,
                &format!("printf 'gitdir: %s\\n' {gitdir:?} > .git; echo wrote=$?"),
            );
            d.once_with_token(flag);
            assert!(
                d.log_of(&first).contains("wrote=0"),
                "premise: the first job wrote .git: {}",
                d.log_of(&first)
            );
            // … which the drain's sweep takes away again (`.git` is a protected path that
            // did not exist), recording the job `tampered` …
            let (_, r) = d.expect_result(&first);
            assert_eq!(
                r.get("state").map(String::as_str),
                Some("tampered"),
                "{r:?}"
            );
            assert!(
                r.get("reason").is_some_and(|w| w.contains(".git created")),
                "{r:?}"
            );
            assert!(fs::symlink_metadata(a.join(".git")).is_err(), "{r:?}");
            // … and should such a file be there all the same (written while no daemon
            // looked; here by hand), the next job in the same worktree would get the spool
            // as "the submodule's git dir" and queue a job of its own.
            fs::write(a.join(".git"), format!("gitdir: {}\n", gitdir.display()))
                .expect("write .git");
            let second = d.submit_sh(
                &a,
                "echo ran > second-ran; cp forged.toml \"$(sed 's/^gitdir: //' .git)\"/zz-forged.toml 2>/dev/null; cp forged.toml .git-target-queue/zz-forged.toml 2>/dev/null; true",
            );
            let out = d.once_with_token(flag);
            let (state, r) = d.expect_result(&second);
            let reason = r.get("reason").cloned().unwrap_or_default();
            assert_eq!(state, "failed", "{target:?} {flag:?}: {r:?}");
            assert!(
                reason.starts_with("not started:"),
                "{target:?} {flag:?}: {reason}"
            );
            assert!(
                reason.contains(&spool.display().to_string()),
                "{target:?} {flag:?}: the reason does not name the spool: {reason}"
            );
            assert!(!a.join("second-ran").exists(), "the second job ran");
            assert!(d.names("queue").is_empty(), "{}", d.tree());
            assert!(!d.forged_ran(&b), "the forged job ran");
            d.assert_each_finished_once(&[first.clone(), second.clone()]);
            assert!(
                stderr(&out).contains(&format!("job {second}: failed")),
                "{}",
                stderr(&out)
            );

            // Control: what the second job would have done with the spool writable, done
            // outside the wall as the daemon's uid: the forged job is accepted and runs.
            fs::copy(a.join("forged.toml"), spool.join("queue/zz-forged.toml")).expect("copy");
            d.once_with_token(flag);
            assert!(d.forged_ran(&b), "control: the forged job did not run");
        }
    }
}

/// `landwall-drain __run-job` for `wt` with the given spool, configuration and HOME; the
/// job writes `marker` in its worktree.
fn run_job(d: &Drain, wt: &Path, spool: &Path, config: &Path, home: &Path) -> std::process::Output {
    let mut c = Command::new(bin_dir().join("landwall-drain"));
    d.sb.clean_env(&mut c);
    c.env("HOME", home)
        .arg("__run-job")
        .arg("--config")
        .arg(config)
        .arg("--spool")
        .arg(spool)
        .arg("--worktree")
        .arg(wt)
        .args(["--agent", "claude", "--parent"])
        .arg(std::process::id().to_string())
        .args(["--", "sh", "-c", "echo ran > marker"])
        .current_dir(wt)
        .stdin(Stdio::null());
    run(&mut c)
}

#[test]
fn the_runner_keeps_the_drains_state_out_of_every_grant() {
    // Whatever would grant it (here the job's own worktree, or a configured path), a
    // job's policy that reaches the spool, the daemon's configuration or home is refused
    // whole (78, one line naming it) and the job never runs. Each has a control: the same
    // job with that state elsewhere runs.
    let d = Drain::new("drain-offlimits");
    let wt = d.wt("w");
    let (spool, config, home) = (d.spool(), d.config_path(), d.sb.home());
    fs::create_dir_all(&spool).expect("mkdir");
    let inside = |name: &str| {
        let p = wt.join(name);
        fs::create_dir_all(&p).expect("mkdir");
        p
    };
    let in_config = wt.join("landwall.toml");
    fs::copy(&config, &in_config).expect("copy config");
    let shared = d.sb.root.join("shared");
    fs::create_dir_all(shared.join("spool")).expect("mkdir");
    let writable_config = d.sb.root.join("writable.toml");
    fs::write(
        &writable_config,
        format!(
            "writable = [{shared:?}]\n{}",
            fs::read_to_string(&config).expect("config")
        ),
    )
    .expect("write config");
    let (in_spool, in_home) = (inside("spool"), inside("home"));
    let shared_spool = shared.join("spool");
    // (what, --spool, --config, HOME, the path the refusal names)
    let cases: [(&str, &Path, &Path, &Path, &Path); 4] = [
        (
            "the spool in the worktree",
            &in_spool,
            &config,
            &home,
            &in_spool,
        ),
        (
            "the spool under `writable`",
            &shared_spool,
            &writable_config,
            &home,
            &shared_spool,
        ),
        (
            "the configuration in the worktree",
            &spool,
            &in_config,
            &home,
            &in_config,
        ),
        (
            "the home in the worktree",
            &spool,
            &config,
            &in_home,
            &in_home,
        ),
    ];
    for (what, spool_, config_, home_, exposed) in cases {
        let _ignored = fs::remove_file(wt.join("marker"));
        let out = run_job(&d, &wt, spool_, config_, home_);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{what}: {err}");
        // (stdin is /dev/null here, not the daemon's pipe: the runner also says it could
        // not report.)
        let refusal: Vec<&str> = err.lines().filter(|l| l.contains("not started")).collect();
        assert_eq!(refusal.len(), 1, "{what}: {err}");
        // "… it would expose <what> <path>; <fix>"
        assert!(
            refusal[0].contains("would expose")
                && refusal[0].contains(&format!(" {};", exposed.display())),
            "{what}: {} not named: {err}",
            exposed.display()
        );
        assert!(!wt.join("marker").exists(), "{what}: the job ran");
    }
    // Control: the state apart from the job's grants; the job runs.
    let out = run_job(&d, &wt, &spool, &config, &home);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(wt.join("marker").exists());
}

#[test]
fn a_spool_every_job_could_reach_stops_the_daemon() {
    let d = Drain::new("drain-exposed");
    d.wt("w");
    let in_tmp = PathBuf::from(format!(
        "/tmp/landwall-drain-test-{}-spool",
        std::process::id()
    ));
    let _ignored = fs::remove_dir_all(&in_tmp);
    // Removed again however the test ends (it exists only if the daemon wrongly made it).
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ignored = fs::remove_dir_all(&self.0);
        }
    }
    let _gone = Gone(in_tmp.clone());
    for (what, spool, grant) in [
        ("under /tmp", in_tmp.clone(), "/tmp".to_string()),
        (
            "in a worktree root",
            d.work().join("spool"),
            d.work().display().to_string(),
        ),
        (
            "above a worktree root",
            d.sb.root.clone(),
            d.work().display().to_string(),
        ),
    ] {
        for flag in ["0", "1"] {
            let before = snapshot(&d.sb.root);
            let mut c = Command::new(bin_dir().join("landwall-drain"));
            d.sb.clean_env(&mut c);
            c.arg("--spool")
                .arg(&spool)
                .arg("--config")
                .arg(d.config_path())
                .arg("--once")
                .env("LANDWALL_DRAIN_SANDBOX", flag);
            let out = run(&mut c);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{what} {flag}: {err}");
            let refusal: Vec<&str> = err.lines().filter(|l| l.contains(" ERROR ")).collect();
            assert_eq!(refusal.len(), 1, "{what} {flag}: {err}");
            for needle in [
                spool.display().to_string(),
                grant.clone(),
                "move the spool".into(),
            ] {
                assert!(
                    refusal[0].contains(&needle),
                    "{what} {flag}: no {needle:?}: {err}"
                );
            }
            assert!(!in_tmp.exists(), "{what} {flag}: the spool was created");
            assert!(
                !d.work().join("spool").exists(),
                "{what} {flag}: the spool was created"
            );
            assert_eq!(
                snapshot(&d.sb.root),
                before,
                "{what} {flag}: something was written"
            );
        }
    }
    // Control: the spool beside the roots; the daemon serves.
    fs::create_dir_all(d.spool()).expect("mkdir");
    let out = run(d
        .drain()
        .args(["--once"])
        .env("LANDWALL_DRAIN_SANDBOX", "1"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

#[test]
fn jobs_prints_no_raw_control_characters() {
    let d = Drain::new("drain-escapes");
    let wt = d.wt("w");
    let title = "\x1b]0;pwned\x07";
    let clear = "\x1b[2J";
    // A job whose arguments hold the sequences, and that names a file with them in a
    // protected directory, which its `tampered` reason names; and that writes them into its
    // `.git` file, which the drain's sweep removes as well.
    fs::create_dir_all(wt.join(".husky")).expect("mkdir .husky");
    let first = d.submit(
        &wt,
        &[],
        &[
            "sh",
            "-c",
            "printf 'gitdir: /nonexistent%s%s\\n' \"$1\" \"$2\" > .git; touch \".husky/$1$2\"",
            "sh",
            title,
            clear,
        ],
    );
    // Run by a walled daemon: its wall refuses the job a mount namespace, so `.husky` is
    // writable to the job (the sweep's record is all there is).
    let first_out = run(d.drain().arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1"));
    assert!(first_out.status.success(), "{}", stderr(&first_out));
    // Such a `.git` file there all the same (here by hand): the next job's failure reason
    // quotes it.
    fs::write(
        wt.join(".git"),
        format!("gitdir: /nonexistent{title}{clear}\n"),
    )
    .expect("write .git");
    let second = d.submit(&wt, &[], &["echo", title, clear]);
    let out = d.once();
    let (_, r) = d.expect_result(&first);
    assert_eq!(
        r.get("state").map(String::as_str),
        Some("tampered"),
        "{r:?}"
    );
    assert_eq!(d.expect_result(&second).0, "failed");
    for out in [&first_out, &out] {
        assert!(
            !stderr(out).contains('\x1b'),
            "the daemon's log: {:?}",
            stderr(out)
        );
    }

    let raw = |args: &[&str]| -> Vec<u8> {
        let out = run(d.sb.landwall().args(args).arg("--spool").arg(d.spool()));
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out.stdout
    };
    let json = raw(&["jobs", "--json"]);
    let table = raw(&["jobs"]);
    for (name, bytes) in [("--json", &json), ("table", &table)] {
        for b in [0x1bu8, 0x07] {
            assert!(
                !bytes.contains(&b),
                "{name}: raw {b:#04x}: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
    // Control: the values really hold the sequences (printed as they are, they would
    // reach the terminal): JSON decodes back to them.
    let v: serde_json::Value = serde_json::from_slice(&json).expect("JSON");
    let jobs = v.as_array().expect("array");
    let argv_of = |id: &str| {
        jobs.iter()
            .find(|j| j["id"] == id)
            .map(|j| j["argv"].clone())
            .expect("job")
    };
    assert_eq!(argv_of(&second)[1], title);
    assert_eq!(argv_of(&second)[2], clear);
    let reason = jobs
        .iter()
        .find(|j| j["id"] == second.as_str())
        .and_then(|j| j["reason"].as_str())
        .expect("reason")
        .to_string();
    if reason.contains('\x1b') {
        // The reason quotes the `.git` file: the table shows it escaped.
        let table = String::from_utf8(table.clone()).expect("utf-8");
        assert!(table.contains("\\e]0;pwned\\x07"), "{table}");
    }
    // The tampered job's reason names the file it made, sequences and all.
    let reason = jobs
        .iter()
        .find(|j| j["id"] == first.as_str())
        .and_then(|j| j["reason"].as_str())
        .expect("reason")
        .to_string();
    assert!(
        reason.contains(&format!(".husky/{title}{clear} created")),
        "{reason:?}"
    );
    let table = String::from_utf8(table).expect("utf-8");
    assert!(
        table.contains(".husky/\\e]0;pwned\\x07\\e[2J created"),
        "{table}"
    );
}

#[test]
fn escape_command_installed_above_the_spool_reads_other_jobs_logs() {
    // A job's wall grants the directory of its command read-only; installed in the
    // directory that holds the spool, that grant would show every job's log and result.
    // The runner refuses the job whole, the reason names the spool, and the daemon goes on.
    let d = Drain::new("drain-reader");
    let (a, b) = (d.wt("a"), d.wt("b"));
    let reader = d.sb.root.join("reader");
    let draft = d.sb.root.join(".reader.draft");
    fs::write(
        &draft,
        "#!/bin/sh\ncat \"$1\"/logs/*.log \"$1\"/done/*.toml; echo read=$?\n",
    )
    .expect("write");
    let st = Command::new("install")
        .args(["-m", "755"])
        .arg(&draft)
        .arg(&reader)
        .status()
        .expect("install");
    assert!(st.success());
    let spool = d.spool().display().to_string();
    let earlier = d.submit(&b, &[], &["echo", "earlier-secret"]);
    let attempt = d.submit(&a, &[], &[reader.to_str().expect("utf-8"), &spool]);
    let after = d.submit(&a, &[], &["echo", "still-serving"]);
    d.once();
    d.assert_each_finished_once(&[earlier.clone(), attempt.clone(), after.clone()]);
    let (state, r) = d.expect_result(&attempt);
    let reason = r.get("reason").cloned().unwrap_or_default();
    assert_eq!(state, "failed", "{r:?}");
    assert!(
        reason.starts_with("not started: refusing to grant")
            && reason.contains(&format!("the drain's spool {spool};")),
        "{reason}"
    );
    assert!(!d.log_of(&attempt).contains("earlier-secret"));
    assert_eq!(d.expect_result(&after).0, "done");
    assert_eq!(d.log_of(&after), "still-serving\n");

    // Control: the same command outside the wall, as the daemon's uid, reads them.
    let out = run(Command::new(&reader).arg(&spool));
    assert!(stdout(&out).contains("earlier-secret"), "{}", stdout(&out));
}

/// Two jobs in two projects cannot exchange anything through a home: one writes a git
/// configuration whose `core.fsmonitor` would run a command and copy the other's `.env`,
/// the other runs `git status`. No job gets the daemon's `$HOME` (neither readable nor
/// writable), so nothing is written there and nothing runs. The control runs the same two
/// commands outside the wall with the same HOME: the command runs and the file is copied.
#[test]
fn jobs_share_no_home() {
    let d = Drain::new("drain-home");
    let (a, b) = (d.wt("a"), d.wt("b"));
    d.sb.git(&b, &["init", "-q"]);
    fs::write(b.join(".env"), "TOKEN=b-secret\n").expect("write .env");
    let loot = d.sb.root.join("loot");
    let plant = format!(
        "printf '[core]\\n\\tfsmonitor = \"cp .env {loot}; false\"\\n' > \"$HOME/.gitconfig\"; echo planted=$?",
        loot = loot.display()
    );
    let first = d.submit_sh(&a, &plant);
    assert!(d.once().status.success());
    let second = d.submit_sh(&b, "git status --porcelain >/dev/null 2>&1; echo status=$?");
    assert!(d.once().status.success());
    assert_eq!(d.expect_result(&first).0, "done");
    assert_eq!(d.expect_result(&second).0, "done");
    assert!(
        !d.log_of(&first).contains("planted=0"),
        "{}",
        d.log_of(&first)
    );
    assert!(!d.sb.home().join(".gitconfig").exists());
    assert!(!loot.exists(), "the second job's .env was copied");
    // Control: the same two commands outside the wall, sharing the home.
    for (dir, script) in [
        (&a, plant.as_str()),
        (&b, "git status --porcelain >/dev/null 2>&1"),
    ] {
        let mut c = Command::new("sh");
        d.sb.clean_env(&mut c);
        let out = run(c.arg("-c").arg(script).current_dir(dir));
        assert!(dir != &b || out.status.code().is_some(), "{}", stderr(&out));
    }
    assert!(d.sb.home().join(".gitconfig").exists());
    assert_eq!(
        fs::read_to_string(&loot).expect("the control copied it"),
        "TOKEN=b-secret\n"
    );
}

// ---- A job is over when all of it is over; caps per job (issue 17).

/// The parent of `pid`, from its stat.
fn parent_of(pid: u32) -> Option<u32> {
    let t = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    t.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` shows as a zombie.
fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|t| {
        t.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

/// Live processes whose command line holds `marker`.
fn with_marker(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let cmd = fs::read(e.path().join("cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmd).contains(marker) && alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// A job that leaves three things behind when its own process exits: a sleeper detached
/// with a double fork and a new session, and a fork chain in a session of its own (each
/// generation forks the next and exits: a new pid every few microseconds, which a scan of
/// /proc cannot catch, so each generation also writes `beat` in the worktree). Every process
/// of them carries `marker` in its command line; the chain stops when `stop` appears in the
/// worktree.
fn leave_behind(marker: &str) -> String {
    format!(
        "( setsid sh -c 'while :; do sleep 1; done' {marker}-detached & ) </dev/null >/dev/null 2>&1; \
         ( setsid sh -c 'g() {{ [ -e stop ] && exit 0; : > beat; ( g ) & exit 0; }}; g' {marker}-chain & ) </dev/null >/dev/null 2>&1; \
         echo left"
    )
}

/// Whether the fork chain of `leave_behind` in `wt` still runs: its `beat` file, removed,
/// comes back within `within`. (A scan of /proc can miss a chain whose every process lives
/// for microseconds; the file cannot.)
fn chain_beats(wt: &Path, within: Duration) -> bool {
    let beat = wt.join("beat");
    match fs::remove_file(&beat) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("removing {}: {e}", beat.display()),
    }
    let end = Instant::now() + within;
    while Instant::now() < end {
        if beat.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    beat.exists()
}

/// Waits 300 ms and checks twice that nothing with `marker` is alive.
fn none_left(marker: &str) -> Vec<u32> {
    for _ in 0..3 {
        let left = with_marker(marker);
        if !left.is_empty() {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Vec::new()
}

/// Stops the chain and kills what carries `marker` (the control's leftovers).
fn clean_up(wt: &Path, marker: &str) {
    fs::write(wt.join("stop"), "").expect("stop file");
    wait_for("the control's processes to end", || {
        for pid in with_marker(marker) {
            // A parent that shows as a zombie may be a leader whose threads run on (its own
            // command line went with its main thread): killed too.
            let mut victims = vec![pid.to_string()];
            if let Some(parent) = parent_of(pid).filter(|p| is_zombie(*p)) {
                victims.push(parent.to_string());
            }
            for victim in victims {
                let _gone = Command::new("kill")
                    .args(["-9", &victim])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        with_marker(marker).is_empty() && !chain_beats(wt, Duration::from_millis(300))
    });
    fs::remove_file(wt.join("stop")).expect("rm stop");
    let _gone = fs::remove_file(wt.join("beat"));
}

/// `landwall-drain --once` as the unprivileged test user: no cgroup subtree it may manage,
/// so jobs run under their keeper alone. The spool and the worktrees become the user's.
fn once_as_user(d: &Drain) -> std::process::Output {
    let (uid, gid) = landwall_e2e::test_user();
    landwall_e2e::chown_tree(&d.spool(), uid, gid);
    landwall_e2e::chown_tree(&d.work(), uid, gid);
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", landwall_e2e::TEST_USER))
        .arg(format!("--regid={}", landwall_e2e::TEST_USER))
        .args(["--init-groups", "--"])
        .arg(bin_dir().join("landwall-drain"));
    d.sb.clean_env(&mut c);
    c.arg("--spool")
        .arg(d.spool())
        .arg("--config")
        .arg(d.config_path())
        .arg("--once")
        .current_dir(&d.sb.root);
    let out = run(&mut c);
    assert!(
        out.status.success(),
        "--once as {}: {}",
        landwall_e2e::TEST_USER,
        stderr(&out)
    );
    out
}

#[test]
fn nothing_a_job_started_outlives_it() {
    let d = Drain::new("drain-whole");
    let wt = d.wt("w");
    let marker = format!("lw-left-{}", std::process::id());
    let script = leave_behind(&marker);
    // Control: run by itself, the job leaves its processes running.
    let out = run(Command::new("sh").args(["-c", &script]).current_dir(&wt));
    assert!(out.status.success(), "{}", stderr(&out));
    wait_for("the control's leftovers", || {
        !with_marker(&format!("{marker}-detached")).is_empty()
            && chain_beats(&wt, Duration::from_secs(2))
    });
    clean_up(&wt, &marker);
    // As a job of a root daemon (a cgroup per job here), of a walled one, and of a user's
    // daemon (no cgroup: the keeper alone): done, and nothing of it left.
    for how in ["root", "walled", "user"] {
        let id = d.submit_sh(&wt, &script);
        let out = match how {
            "root" => d.once(),
            "walled" => {
                let mut c = d.drain();
                c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
                let out = run(&mut c);
                assert!(out.status.success(), "{how}: {}", stderr(&out));
                out
            }
            _ => once_as_user(&d),
        };
        assert_eq!(d.expect_result(&id).0, "done", "{how}: {}", stderr(&out));
        assert!(d.log_of(&id).contains("left"), "{how}");
        let left = none_left(&marker);
        let beats = chain_beats(&wt, Duration::from_millis(500));
        if !left.is_empty() || beats {
            clean_up(&wt, &marker);
            panic!(
                "{how}: still alive after the job ended: {left:?}, chain beating: {beats}\n{}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn a_timeout_ends_detached_processes_too() {
    let d = Drain::new("drain-timeout-all");
    let wt = d.wt("w");
    let marker = format!("lw-late-{}", std::process::id());
    let script = format!("{}; sleep 300", leave_behind(&marker));
    for how in ["root", "user"] {
        let id = d.submit(&wt, &["--timeout", "1s"], &["sh", "-c", &script]);
        let out = if how == "root" {
            d.once()
        } else {
            once_as_user(&d)
        };
        let (state, r) = d.expect_result(&id);
        assert_eq!(state, "failed", "{how}");
        assert_eq!(
            r.get("reason").map(String::as_str),
            Some("timed out after 1s"),
            "{how}"
        );
        let left = none_left(&marker);
        let beats = chain_beats(&wt, Duration::from_millis(500));
        if !left.is_empty() || beats {
            clean_up(&wt, &marker);
            panic!(
                "{how}: still alive after the timeout: {left:?}, chain beating: {beats}\n{}",
                stderr(&out)
            );
        }
    }
}

#[test]
fn a_job_that_floods_its_log_is_cut_at_the_cap_and_the_next_runs() {
    let d = Drain::new("drain-flood");
    let wt = d.wt("w");
    let flood = d.submit(
        &wt,
        &["--log-max", "64K"],
        &["sh", "-c", "yes flooding-the-log"],
    );
    // Control: the same cap holds a job that writes less than it whole.
    let small = d.submit(
        &wt,
        &["--log-max", "64K"],
        &[
            "sh",
            "-c",
            "yes small | head -c 40000; echo; echo end-of-small",
        ],
    );
    let next = d.submit_sh(&wt, "echo next-ran");
    d.once();
    let (state, r) = d.expect_result(&flood);
    assert_eq!(state, "failed");
    assert_eq!(r.get("reason").map(String::as_str), Some("log 64K reached"));
    let size = fs::metadata(d.spool().join("logs").join(format!("{flood}.log")))
        .expect("log")
        .len();
    assert!(
        (64 << 10..(64 << 10) + 1024).contains(&size),
        "the log is {size} bytes"
    );
    assert_eq!(d.expect_result(&small).0, "done");
    assert!(d.log_of(&small).contains("end-of-small"));
    assert_eq!(d.expect_result(&next).0, "done");
    assert!(d.log_of(&next).contains("next-ran"));
}

/// A cgroup v2 without the memory controller, for a daemon started in it: `outer/inner`
/// under the hierarchy's root, `outer` enabling nothing for `inner`. Removed (after the
/// daemon and its jobs are gone) however the test ends.
struct Memoryless {
    outer: PathBuf,
    inner: PathBuf,
}

impl Memoryless {
    /// `None` where no cgroup v2 is mounted at all: no job can have a `memory.max` then.
    /// A hierarchy where the cgroup cannot be made is a failure, naming why.
    fn new(tag: &str) -> Option<Memoryless> {
        let info = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
        let mount = landwall::limits::cgroup2_mount(&info)?;
        let outer = mount.join(format!("landwall-test-{tag}-{}", std::process::id()));
        let inner = outer.join("inner");
        let _stale = fs::remove_dir(&inner);
        let _stale = fs::remove_dir(&outer);
        fs::create_dir(&outer).unwrap_or_else(|e| {
            panic!(
                "cannot set up a cgroup without the memory controller: making {}: {e}",
                outer.display()
            )
        });
        let made = Memoryless {
            outer: outer.clone(),
            inner: inner.clone(),
        };
        fs::create_dir(&inner).unwrap_or_else(|e| {
            panic!(
                "cannot set up a cgroup without the memory controller: making {}: {e}",
                inner.display()
            )
        });
        let controllers =
            fs::read_to_string(inner.join("cgroup.controllers")).expect("cgroup.controllers");
        assert!(
            !controllers.split_whitespace().any(|c| c == "memory"),
            "{} still offers the memory controller ({controllers:?}): the test's precondition does not hold",
            inner.display()
        );
        Some(made)
    }

    /// `landwall-drain --once` for `d`, started inside `inner` (`sh -c 'echo $$ >
    /// inner/cgroup.procs && exec landwall-drain …'`), or as ever without a cgroup v2.
    fn once(m: Option<&Memoryless>, d: &Drain) -> Command {
        let mut c = d.drain();
        c.arg("--once");
        let Some(m) = m else {
            return c;
        };
        let mut wrapped = Command::new("sh");
        d.sb.clean_env(&mut wrapped);
        wrapped
            .arg("-c")
            .arg(format!(
                "echo $$ > '{}/cgroup.procs' && exec \"$@\"",
                m.inner.display()
            ))
            .arg("sh")
            .arg(c.get_program())
            .args(c.get_args())
            .current_dir(&d.sb.root);
        wrapped
    }
}

impl Drop for Memoryless {
    fn drop(&mut self) {
        // The daemon's leaf and any job cgroup it left, then ours.
        if let Ok(entries) = fs::read_dir(&self.inner) {
            for e in entries.flatten() {
                if e.path().is_dir() {
                    let _gone = fs::remove_dir(e.path());
                }
            }
        }
        let _gone = fs::remove_dir(&self.inner);
        let _gone = fs::remove_dir(&self.outer);
    }
}

#[test]
fn a_memory_cap_without_a_memory_controller_is_refused() {
    // The review: under RLIMIT_DATA (the old fallback) a job capped at 64M held 512M of
    // shared memory. Without a memory.max for it, a capped job is not started at all.
    let d = Drain::new("drain-memory");
    let wt = d.wt("w");
    let nomem = Memoryless::new("nomem");
    let capped = d.submit(
        &wt,
        &["--memory", "64M"],
        &["sh", "-c", "echo ran > capped-marker"],
    );
    let uncapped = d.submit_sh(&wt, "echo ran > uncapped-marker");
    let next = d.submit_sh(&wt, "echo next-ran");
    let out = run(&mut Memoryless::once(nomem.as_ref(), &d));
    assert!(out.status.success(), "--once: {}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("jobs with a memory cap refused"),
        "the line at start says memory caps are refused: {err}"
    );
    if let Some(m) = &nomem {
        assert!(
            err.contains(&format!("under {}", m.inner.display())),
            "the daemon used the cgroup without memory: {err}"
        );
    }
    let (state, r) = d.expect_result(&capped);
    assert_eq!(state, "failed", "{}", d.log_of(&capped));
    let reason = r.get("reason").cloned().unwrap_or_default();
    assert!(
        reason.starts_with("refused: its memory cap 64M cannot hold on this host: ")
            && reason.contains("no memory.max")
            && reason.contains("enable the memory controller")
            && !reason.contains('\n'),
        "{reason}"
    );
    assert_eq!(r.get("exit_code"), None, "never started: {r:?}");
    assert!(!wt.join("capped-marker").exists(), "the capped job ran");
    assert_eq!(
        d.expect_result(&uncapped).0,
        "done",
        "{}",
        d.log_of(&uncapped)
    );
    assert!(wt.join("uncapped-marker").exists());
    assert_eq!(d.expect_result(&next).0, "done", "{}", d.log_of(&next));

    // A memory_max (every job's cap) that cannot hold stops the daemon: one line, 78,
    // the queue untouched.
    fs::write(
        d.config_path(),
        format!(
            "{}memory_max = \"64M\"\n",
            fs::read_to_string(d.config_path()).expect("config")
        ),
    )
    .expect("config");
    let queued = d.submit_sh(&wt, "echo ran > config-marker");
    let out = run(&mut Memoryless::once(nomem.as_ref(), &d));
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{}", stderr(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("memory_max")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("`memory_max` = 64M") && lines[0].contains("remove `memory_max`"),
        "{err}"
    );
    assert!(d.dir("queue").join(format!("{queued}.toml")).exists());
    assert!(!wt.join("config-marker").exists());
    drop(nomem);
}

/// The device number of a path as the host (this test) sees it.
fn host_dev(path: &str) -> u64 {
    fs::metadata(path).expect(path).dev()
}

/// What follows `key` on the first line of a job's log that has it. The job's stdout and
/// stderr reach the log through two pipes: a line of one may follow a part of a line of the
/// other (`sh: 1: tmpdir=…`).
fn logged<'a>(log: &'a str, key: &str) -> Option<&'a str> {
    log.lines()
        .find_map(|l| l.split_once(key).map(|(_, value)| value))
}

#[test]
fn each_job_has_its_own_tmp_and_dev_shm_gone_with_it() {
    let d = Drain::new("drain-tmp");
    let wt = d.wt("w");
    let tag = format!("lw-drain-tmp-{}", std::process::id());
    // Device numbers as the job sees them, its files, and a listing.
    let writer = d.submit_sh(
        &wt,
        &format!(
            "stat -c 'dev %n %d' /tmp /dev/shm; stat -c 'mode %n %a' /tmp /dev/shm; stat -f -c 'fs %n %T' /tmp /dev/shm; \
             echo job > /tmp/{tag}; head -c 8M /dev/zero > /dev/shm/{tag}; \
             echo wrote=$? size=$(wc -c < /dev/shm/{tag}); sqlite3 /tmp/{tag}.db 'create table t(x)' 2>/dev/null; ls /tmp"
        ),
    );
    let reader = d.submit_sh(
        &wt,
        "echo tmp:; ls -A /tmp; echo shm:; ls -A /dev/shm; echo end",
    );
    d.once();
    let log = d.log_of(&writer);
    assert_eq!(d.expect_result(&writer).0, "done", "{log}");
    assert!(log.contains(&format!("wrote=0 size={}", 8 << 20)), "{log}");
    for (place, host) in [
        ("/tmp", host_dev("/tmp")),
        ("/dev/shm", host_dev("/dev/shm")),
    ] {
        let seen: u64 = log
            .lines()
            .find_map(|l| l.strip_prefix(&format!("dev {place} ")))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no device of {place} in the job's log: {log}"));
        assert_ne!(seen, host, "the job's {place} is the host's: {log}");
        assert!(log.contains(&format!("mode {place} 1777")), "{log}");
        assert!(log.contains(&format!("fs {place} tmpfs")), "{log}");
        // Nothing of it on the host.
        assert!(
            !Path::new(place).join(&tag).exists(),
            "{place}/{tag} is on the host after the job"
        );
    }
    assert!(!Path::new("/tmp").join(format!("{tag}.db")).exists());
    // The next job sees none of it.
    let listed = d.log_of(&reader);
    assert_eq!(d.expect_result(&reader).0, "done", "{listed}");
    assert!(
        listed.contains("tmp:\nshm:\nend"),
        "the next job's /tmp and /dev/shm are empty: {listed}"
    );

    // Control: the same write from outside the job's namespace lands on the host, and the
    // host's /tmp and /dev/shm are other file systems than the job's (above), so the
    // checks above could fail.
    for place in ["/tmp", "/dev/shm"] {
        let p = Path::new(place).join(&tag);
        fs::write(&p, "control").expect("control write");
        assert!(p.exists());
        fs::remove_file(&p).expect("control remove");
    }

    // A walled daemon's jobs get no namespace (mounts are refused inside its wall): each
    // gets a directory of its own as TMPDIR instead, and neither /tmp nor /dev/shm. The
    // first job's files are gone after it, and the next sees nothing of them.
    let walled = d.submit_sh(
        &wt,
        &format!(
            "echo tmpdir=$TMPDIR; echo walled > /tmp/{tag}-walled; echo tmp=$?; \
             echo walled > /dev/shm/{tag}-walled; echo shm=$?; \
             echo own > $TMPDIR/{tag}-own && echo own=ok"
        ),
    );
    let next = d.submit_sh(
        &wt,
        &format!("echo tmpdir=$TMPDIR; ls -A $TMPDIR; ls /tmp/landwall-job-*/{tag}-own; echo end"),
    );
    let mut c = d.drain();
    c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = d.log_of(&walled);
    assert_eq!(d.expect_result(&walled).0, "done", "{log}");
    for place in ["/tmp", "/dev/shm"] {
        let host_file = Path::new(place).join(format!("{tag}-walled"));
        let landed = host_file.exists();
        let _cleanup = fs::remove_file(&host_file);
        assert!(!landed, "the walled daemon's job wrote {place}: {log}");
    }
    assert!(!log.contains("tmp=0") && !log.contains("shm=0"), "{log}");
    assert!(
        log.contains("own=ok"),
        "the job's own TMPDIR is writable: {log}"
    );
    let own = logged(&log, "tmpdir=")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no TMPDIR in the log: {log}"));
    assert!(
        own.starts_with("/tmp")
            && own
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("landwall-job-")),
        "{log}"
    );
    assert!(
        log.contains("TMPDIR is the job's own directory"),
        "the job's log says it has no tmpfs of its own: {log}"
    );
    assert!(
        !own.exists(),
        "the job's own directory outlived it: {}",
        own.display()
    );
    let listed = d.log_of(&next);
    assert_eq!(d.expect_result(&next).0, "done", "{listed}");
    let theirs = logged(&listed, "tmpdir=")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no TMPDIR in the log: {listed}"));
    assert_ne!(theirs, own, "two jobs shared a TMPDIR");
    assert!(
        !listed.contains(&format!("{tag}-own\n")) && listed.contains("end"),
        "the next job saw the first one's file: {listed}"
    );
}

/// A walled daemon killed mid-job (SIGKILL: nothing of it runs to remove anything) leaves
/// its job's own directory in /tmp; the next daemon to start removes it, and leaves alone
/// such a directory of a daemon that still runs, and one of another user's.
#[test]
fn a_killed_daemons_job_directories_are_removed_by_the_next_daemon() {
    let d = Drain::new("drain-dead-tmp");
    let wt = d.wt("w");
    let mark = wt.join("tmpdir");
    d.submit_sh(
        &wt,
        &format!(
            "[ -f {m} ] && exit 0; echo left > $TMPDIR/file; echo $TMPDIR > {m}; exec sleep 59.0417",
            m = mark.display()
        ),
    );
    let mut daemon = d.start("first", &[], &[("LANDWALL_DRAIN_SANDBOX", "1")]);
    wait_for("the job's TMPDIR", || {
        fs::read_to_string(&mark).is_ok_and(|s| s.ends_with('\n'))
    });
    let own = PathBuf::from(fs::read_to_string(&mark).expect("mark").trim());
    let sleeping = || {
        Command::new("pgrep")
            .args(["-f", "sleep 59.0417"])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    wait_for("the job's sleep", sleeping);
    daemon.kill9();
    // The job, which a killed daemon does not end, is ended here (it may be in a PID
    // namespace of its own: found by its command line).
    let _ended = Command::new("pkill")
        .args(["-9", "-f", "sleep 59.0417"])
        .status();
    // Control: nothing removed it.
    assert!(own.join("file").exists(), "{}", daemon.log());
    // Beside it, one of a daemon that runs (this test's process) and one of another user's.
    let alive = PathBuf::from(format!("/tmp/landwall-job-{}-x-0", std::process::id()));
    let theirs = PathBuf::from(format!("/tmp/landwall-job-{}-x-1", daemon.pid()));
    for dir in [&alive, &theirs] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let (uid, gid) = test_user();
    chown_tree(&theirs, uid, gid);
    let mut next = d.drain();
    next.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
    let out = run(&mut next);
    let left = (own.exists(), alive.exists(), theirs.exists());
    for dir in [&alive, &theirs] {
        let _cleanup = fs::remove_dir_all(dir);
    }
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(left, (false, true, true), "{}", stderr(&out));
}

#[test]
fn a_job_writing_past_its_tmp_size_gets_enospc() {
    let d = Drain::new("drain-tmp-size");
    let wt = d.wt("w");
    fs::write(
        d.config_path(),
        format!(
            "{}tmp_size = \"4M\"\n",
            fs::read_to_string(d.config_path()).expect("config")
        ),
    )
    .expect("config");
    let tag = format!("lw-drain-big-{}", std::process::id());
    let before = nix::sys::statvfs::statvfs("/dev/shm").expect("statvfs");
    let id = d.submit_sh(
        &wt,
        &format!(
            "for p in /tmp /dev/shm; do head -c 8M /dev/zero > $p/{tag}; echo \"$p rc=$? size=$(wc -c < $p/{tag})\"; done; df -k /tmp /dev/shm; \
             rm -f /tmp/{tag}; mkdir /tmp/n; i=0; while [ $i -lt 3000 ] && true 2>/dev/null >/tmp/n/$i; do i=$((i+1)); done; echo files=$i"
        ),
    );
    d.once();
    let log = d.log_of(&id);
    assert_eq!(d.expect_result(&id).0, "done", "{log}");
    for place in ["/tmp", "/dev/shm"] {
        let line = log
            .lines()
            .find(|l| l.starts_with(&format!("{place} rc=")))
            .unwrap_or_else(|| panic!("no line for {place}: {log}"));
        let size: u64 = line
            .rsplit_once("size=")
            .and_then(|(_, n)| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(
            !line.contains("rc=0") && size <= 4 << 20,
            "a write past 4M must fail short: {line}\n{log}"
        );
        assert!(
            !Path::new(place).join(&tag).exists(),
            "{place}/{tag} on the host"
        );
    }
    assert!(log.contains("No space left on device"), "{log}");
    // Its inodes are capped too (1024 for 4M: what size does not count).
    let files: u64 = logged(&log, "files=")
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no file count: {log}"));
    assert!(
        (900..1100).contains(&files),
        "{files} files in a 4M tmpfs: {log}"
    );
    // Control: the host's /dev/shm had room for it (the cap, not the host, stopped it).
    assert!(
        before.blocks_available() * before.fragment_size() > 16 << 20,
        "the host's /dev/shm is too small for the test to mean anything"
    );
}

#[test]
fn a_job_asking_for_more_than_the_maximum_is_refused() {
    let d = Drain::new("drain-max");
    let wt = d.wt("w");
    fs::write(
        d.config_path(),
        format!(
            "{}log_max = \"128M\"\n",
            fs::read_to_string(d.config_path()).expect("config")
        ),
    )
    .expect("config");
    // The log cap: a memory_max would stop the daemon on a host without the memory
    // controller (a_memory_cap_without_a_memory_controller_is_refused).
    let id = d.submit(
        &wt,
        &["--log-max", "1G"],
        &["sh", "-c", "echo ran > marker"],
    );
    d.once();
    let (state, r) = d.expect_result(&id);
    assert_eq!(state, "failed");
    let reason = r.get("reason").cloned().unwrap_or_default();
    assert!(
        reason.contains("`log` = 1G") && reason.contains("128M"),
        "{reason}"
    );
    assert!(!wt.join("marker").exists());
}

/// A tmpfs mounted for one test, unmounted however it ends.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _unmounted = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn a_full_spool_disk_holds_jobs_in_the_queue_until_there_is_room() {
    let d = Drain::new("drain-full");
    let wt = d.wt("w");
    let fs_dir = d.sb.root.join("spoolfs");
    fs::create_dir_all(&fs_dir).expect("mkdir");
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "tmpfs"])
        .arg(&fs_dir)
        .status()
        .expect("mount");
    assert!(st.success(), "mounting a tmpfs");
    let _mounted = Tmpfs(fs_dir.clone());
    // The spool on the small file system, with a 1M log cap: a job needs 2M free.
    let spool = fs_dir.join("spool");
    fs::write(
        d.config_path(),
        format!(
            "{}spool = {spool:?}\nlog_max = \"1M\"\n",
            fs::read_to_string(d.config_path()).expect("config")
        ),
    )
    .expect("config");
    let filler = fs_dir.join("filler");
    fs::write(&filler, vec![0u8; 7 << 20]).expect("fill");
    let mut daemon = {
        let log = d.sb.root.join("daemon-full.log");
        let mut c = Command::new(bin_dir().join("landwall-drain"));
        d.sb.clean_env(&mut c);
        c.arg("--config")
            .arg(d.config_path())
            .current_dir(&d.sb.root)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("log"));
        Daemon {
            child: c.spawn().expect("spawn"),
            log,
        }
    };
    wait_for("the daemon to serve", || daemon.log().contains("serving"));
    let mut c = d.sb.landwall();
    c.args(["submit", "--spool"])
        .arg(&spool)
        .arg("--worktree")
        .arg(&wt)
        .args(["--", "sh", "-c", "echo ran > marker"]);
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_string();
    wait_for("the daemon to say there is no room", || {
        daemon
            .log()
            .contains("not starting jobs until there is room")
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        spool.join("queue").join(format!("{id}.toml")).exists(),
        "the job left the queue:\n{}",
        daemon.log()
    );
    assert!(!wt.join("marker").exists());
    // Room again: the job runs (the daemon looks again every few seconds).
    fs::remove_file(&filler).expect("rm filler");
    wait_for("the job to run", || {
        spool
            .join("done")
            .join(format!("{id}.result.toml"))
            .exists()
    });
    assert!(wt.join("marker").exists());
    assert!(daemon
        .log()
        .contains("room on the spool's file system again"));
    daemon.signal("TERM");
    assert!(daemon.wait().success(), "{}", daemon.log());
}

/// The cgroup2 mount point, from /proc/self/mountinfo.
fn cgroup2_mount() -> PathBuf {
    let info = fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    info.lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let f: Vec<&str> = left.split_whitespace().collect();
            (right.starts_with("cgroup2 ") && f.get(3) == Some(&"/")).then(|| PathBuf::from(f[4]))
        })
        .expect("this test needs a cgroup v2 hierarchy mounted")
}

#[test]
fn a_job_cannot_leave_its_cgroup() {
    // A job that moved itself out of its cgroup would escape its caps and cgroup.kill.
    // Writing its pid into another cgroup's cgroup.procs is what moving takes; its wall
    // grants nothing under /sys for writing.
    let d = Drain::new("drain-cgroup-leave");
    let wt = d.wt("w");
    let root = cgroup2_mount();
    let attempt = format!(
        "for f in {r}/cgroup.procs {r}/landwall-drain/cgroup.procs; do \
           if echo 0 > \"$f\" 2>/dev/null; then echo \"moved into $f\"; else echo \"refused $f\"; fi; \
         done; cat /proc/self/cgroup",
        r = root.display()
    );
    // Control: outside the wall (root, like the daemon), the same shell moves itself.
    let out = run(Command::new("sh").args(["-c", &attempt]));
    assert!(
        stdout(&out).contains("moved into"),
        "control: {}",
        stdout(&out)
    );
    let id = d.submit_sh(&wt, &attempt);
    d.once();
    assert_eq!(d.expect_result(&id).0, "done");
    let log = d.log_of(&id);
    assert!(
        !log.contains("moved into"),
        "the job left its cgroup: {log}"
    );
    assert_eq!(log.matches("refused").count(), 2, "{log}");
    assert!(
        log.contains("/landwall-drain/job."),
        "the job ran in its cgroup: {log}"
    );

    // clone3(CLONE_INTO_CGROUP) starts a child in a cgroup whose cgroup.procs the uid may
    // write, with no path to check (found by review): the filter refuses clone3.
    let esc = wt.join("lw-escape");
    landwall_e2e::install_binary(&bin_dir().join("lw-escape"), &esc);
    // The root cgroup: it takes processes whatever its controllers (a cgroup that enables
    // controllers for its children refuses them, EBUSY, as `landwall-drain/` does where the
    // controllers are on).
    let target = root.clone();
    let out = run(Command::new(&esc).arg("cgroup-leave").arg(&target));
    assert!(
        stdout(&out).starts_with("ESCAPED "),
        "control: {}{}",
        stdout(&out),
        stderr(&out)
    );
    let (esc_s, target_s) = (esc.display().to_string(), target.display().to_string());
    let id = d.submit(&wt, &[], &[&esc_s, "cgroup-leave", &target_s]);
    d.once();
    let log = d.log_of(&id);
    assert!(
        log.contains("BLOCKED clone3(CLONE_INTO_CGROUP): ENOSYS"),
        "{log}"
    );
}

#[test]
fn a_job_whose_leader_is_a_zombie_with_live_threads_is_ended_too() {
    // Found by review: a process that ends its main thread while another runs on shows as a
    // zombie; a walk that passed over zombies left it (and the child its thread started)
    // running after the result, and cgroup.kill passed it over too.
    let d = Drain::new("drain-zombie-leader");
    let wt = d.wt("w");
    let esc = wt.join("lw-escape");
    landwall_e2e::install_binary(&bin_dir().join("lw-escape"), &esc);
    let marker = format!("lw-zl-{}", std::process::id());
    let script = format!(
        "setsid {} zombie-leader {marker} & sleep 1; echo started",
        esc.display()
    );
    // Control: run by itself, the process and its child live on. (Its output goes nowhere:
    // they hold it open, as they hold a job's.)
    let st = Command::new("sh")
        .args(["-c", &script])
        .current_dir(&wt)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run the control");
    assert!(st.success());
    wait_for("the control's leftovers", || {
        !with_marker(&marker).is_empty()
    });
    clean_up(&wt, &marker);
    for how in ["root", "user"] {
        let id = d.submit_sh(&wt, &script);
        let out = if how == "root" {
            d.once()
        } else {
            once_as_user(&d)
        };
        assert_eq!(d.expect_result(&id).0, "done", "{how}: {}", stderr(&out));
        let left = none_left(&marker);
        if !left.is_empty() {
            clean_up(&wt, &marker);
            panic!(
                "{how}: still alive after the job ended: {left:?}\n{}",
                stderr(&out)
            );
        }
    }
}

// ---- The spool's own names (issue 18): a job ID that would share a file with another
// job, a lock file removed under a running daemon, a file-size limit of zero, and the signal
// disposition jobs inherit.

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
    let mut first = d.start("first", &[], &[]);
    wait_for("the daemon to serve", || first.log().contains("serving"));
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
    assert!(
        matches!(first.child.try_wait(), Ok(None)),
        "the first daemon died:\n{}",
        first.log()
    );
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
    first.signal("TERM");
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
        .arg("--spool")
        .arg(d.spool())
        .arg("--config")
        .arg(d.config_path())
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

// ---- The drain sweeps the protected paths after each job (issue 19).

/// A job script that plants a pre-commit hook and a `core.fsmonitor` in the worktree's git
/// dir, each of which writes `marker` when git runs it outside the wall; it says
/// `hook=STATUS` and `config=STATUS`.
fn plant_hook_and_fsmonitor(marker: &Path) -> String {
    format!(
        "printf '#!/bin/sh\\ntouch {m}-hook\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit; echo hook=$?; \
         printf '[core]\\n\\tfsmonitor = \"touch {m}-fsmonitor; false\"\\n' >> .git/config; echo config=$?",
        m = marker.display()
    )
}

/// Whether git, run in `wt` outside any wall, ran what the script above planted: `git
/// status` (core.fsmonitor) and a commit (the pre-commit hook).
fn planted_ran(d: &Drain, wt: &Path, marker: &Path) -> bool {
    d.sb.git(wt, &["status", "--porcelain"]);
    d.sb.git(
        wt,
        &["commit", "-q", "--allow-empty", "-m", "after the job"],
    );
    let ran = |what: &str| Path::new(&format!("{}-{what}", marker.display())).exists();
    ran("fsmonitor") || ran("hook")
}

fn result_state_and_reason(d: &Drain, id: &str) -> (String, String) {
    let (_, r) = d.expect_result(id);
    (
        r.get("state").cloned().unwrap_or_default(),
        r.get("reason").cloned().unwrap_or_default(),
    )
}

#[test]
fn a_job_that_plants_a_hook_is_recorded_tampered_and_the_hook_is_gone() {
    let d = Drain::new("drain-tamper-hook");
    // Control: the same script run by itself in a checkout: git runs what it planted.
    let control = d.wt("control");
    d.sb.git(&control, &["init", "-q"]);
    let control_marker = d.sb.root.join("control-ran");
    let out = run(Command::new("sh")
        .args(["-c", &plant_hook_and_fsmonitor(&control_marker)])
        .current_dir(&control));
    assert!(stdout(&out).contains("hook=0") && stdout(&out).contains("config=0"));
    assert!(
        planted_ran(&d, &control, &control_marker),
        "control: git did not run what was planted"
    );

    // As a job of a walled daemon: its wall refuses the job a mount namespace, so the
    // protected paths are as writable to the job as the rest of its worktree.
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    d.sb.git(&wt, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let config_before = fs::read(wt.join(".git/config")).expect("config");
    let marker = d.sb.root.join("job-ran");
    let id = d.submit_sh(&wt, &plant_hook_and_fsmonitor(&marker));
    let mut c = d.drain();
    c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    let log = d.log_of(&id);
    assert!(
        log.contains("hook=0") && log.contains("config=0"),
        "premise: the job wrote both: {log}\n{}",
        stderr(&out)
    );
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}\n{}", stderr(&out));
    assert!(
        reason.starts_with("tampered: ")
            && reason.ends_with("(restored)")
            && !reason.contains("NOT restored"),
        "{reason}"
    );
    for named in [".git/hooks/pre-commit created", ".git/config changed"] {
        assert!(reason.contains(named), "{named}: {reason}");
    }
    let (_, r) = d.expect_result(&id);
    assert_eq!(r.get("exit_code").map(String::as_str), Some("0"), "{r:?}");
    assert!(
        stderr(&out).contains(&format!("job {id}: tampered")),
        "{}",
        stderr(&out)
    );
    assert!(
        !wt.join(".git/hooks/pre-commit").exists(),
        "the hook is still there"
    );
    assert_eq!(
        fs::read(wt.join(".git/config")).expect("config"),
        config_before,
        ".git/config is not what it was"
    );
    assert!(
        !planted_ran(&d, &wt, &marker),
        "git ran what the job planted"
    );

    // `landwall jobs` shows the state and the paths.
    let table = stdout(&run(d
        .sb
        .landwall()
        .args(["jobs", "--spool"])
        .arg(d.spool())));
    let line = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(line.contains(" tampered "), "{table}");
    assert!(line.contains("exit 0"), "{table}");
    assert!(line.contains(".git/hooks/pre-commit created"), "{table}");
    let json = stdout(&run(d
        .sb
        .landwall()
        .args(["jobs", "--json", "--spool"])
        .arg(d.spool())));
    assert!(json.contains("\"state\": \"tampered\""), "{json}");
    assert!(json.contains(".git/config changed"), "{json}");
}

#[test]
fn a_job_that_creates_an_absent_protected_path_is_recorded_tampered() {
    let d = Drain::new("drain-tamper-absent");
    let script = "printf 'touch envrc-ran\\n' > .envrc; echo envrc=$?; \
                  printf '/elsewhere/.git\\n' > .git/commondir; echo commondir=$?";
    // Control: by itself, the script leaves both files.
    let control = d.wt("control");
    d.sb.git(&control, &["init", "-q"]);
    let out = run(Command::new("sh")
        .args(["-c", script])
        .current_dir(&control));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(control.join(".envrc").exists() && control.join(".git/commondir").exists());

    // A job of a root daemon without its own wall: a path that does not exist cannot be
    // held in the job's namespace, so the job creates it.
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    let id = d.submit_sh(&wt, script);
    let out = d.once();
    let log = d.log_of(&id);
    assert!(
        log.contains("envrc=0") && log.contains("commondir=0"),
        "premise: {log}"
    );
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}\n{}", stderr(&out));
    for named in [".envrc created", ".git/commondir created"] {
        assert!(reason.contains(named), "{named}: {reason}");
    }
    assert!(fs::symlink_metadata(wt.join(".envrc")).is_err());
    assert!(fs::symlink_metadata(wt.join(".git/commondir")).is_err());
    d.sb.git(&wt, &["status", "--porcelain"]);
}

#[test]
fn a_link_planted_at_an_absent_protected_path_is_removed_and_its_target_untouched() {
    let d = Drain::new("drain-tamper-link");
    let target = d.sb.outside().join("target.sh");
    fs::write(&target, "echo untouched\n").expect("target");
    let target_dir = d.sb.outside().join("vscode");
    fs::create_dir_all(&target_dir).expect("mkdir");
    fs::write(target_dir.join("tasks.json"), "{}\n").expect("tasks");
    let script = format!(
        "ln -s {t} .envrc; echo envrc=$?; ln -s {v} .vscode; echo vscode=$?",
        t = target.display(),
        v = target_dir.display()
    );
    // Control: by itself, the script leaves both links, and `.vscode/tasks.json` is read
    // from outside the worktree.
    let control = d.wt("control");
    let out = run(Command::new("sh")
        .args(["-c", &script])
        .current_dir(&control));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        fs::read_to_string(control.join(".envrc")).expect("through the link"),
        "echo untouched\n"
    );
    assert!(control.join(".vscode/tasks.json").exists());

    let wt = d.wt("w");
    let id = d.submit_sh(&wt, &script);
    let out = d.once();
    let log = d.log_of(&id);
    assert!(
        log.contains("envrc=0") && log.contains("vscode=0"),
        "premise: {log}"
    );
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}\n{}", stderr(&out));
    assert!(reason.contains(".envrc created"), "{reason}");
    assert!(
        reason.contains(".vscode created (a symbolic link on the way to .vscode/"),
        "{reason}"
    );
    assert!(
        fs::symlink_metadata(wt.join(".envrc")).is_err(),
        "the link is left"
    );
    assert!(
        fs::symlink_metadata(wt.join(".vscode")).is_err(),
        "the link is left"
    );
    assert_eq!(
        fs::read_to_string(&target).expect("target"),
        "echo untouched\n"
    );
    assert_eq!(
        fs::read_to_string(target_dir.join("tasks.json")).expect("tasks"),
        "{}\n"
    );
}

#[test]
fn a_job_that_touches_nothing_protected_is_done_as_before() {
    let d = Drain::new("drain-untouched");
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    fs::create_dir_all(wt.join(".vscode")).expect("mkdir");
    fs::write(wt.join(".vscode/tasks.json"), "{}\n").expect("tasks");
    let script = "echo work-$$ > file && git add file && \
                  git -c user.name=job -c user.email=job@landwall.invalid commit -q -m work; \
                  echo commit=$?";
    // A commit writes the git dir (objects, refs, the index) but none of its protected
    // paths; so as a job of a root daemon and of a walled one (no namespace: nothing held).
    for walled in [false, true] {
        let id = d.submit_sh(&wt, script);
        let out = if walled {
            let mut c = d.drain();
            c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
            let out = run(&mut c);
            assert!(out.status.success(), "{}", stderr(&out));
            out
        } else {
            d.once()
        };
        assert!(d.log_of(&id).contains("commit=0"), "{}", d.log_of(&id));
        let (dir, r) = d.expect_result(&id);
        assert_eq!(
            (dir.as_str(), r.get("state").map(String::as_str)),
            ("done", Some("done")),
            "walled {walled}: {r:?}\n{}",
            stderr(&out)
        );
        assert!(!r.contains_key("reason"), "{r:?}");
        assert!(!stderr(&out).contains("tampered"), "{}", stderr(&out));
    }
    let log = stdout(&d.sb.git(&wt, &["log", "--format=%s"]));
    assert_eq!(log.lines().count(), 2, "{log}");
}

#[test]
fn a_job_that_tampered_is_recorded_not_queued_again_when_the_daemon_stops() {
    let d = Drain::new("drain-tamper-stop");
    let wt = d.wt("w");
    // Control: a job that did nothing protected goes back to the queue when the daemon
    // stops (`sigterm_puts_a_long_job_back_and_it_runs_on_restart`); this one planted
    // `.envrc` first.
    let id = d.submit_sh(
        &wt,
        "echo 'touch envrc-ran' > .envrc; touch started; sleep 300",
    );
    let mut daemon = d.start("stop", &[], &[]);
    wait_for("the job to start", || wt.join("started").exists());
    assert!(wt.join(".envrc").exists(), "premise: the job wrote .envrc");
    daemon.signal("TERM");
    let st = daemon.wait();
    assert_eq!(st.code(), Some(0), "{}", daemon.log());
    assert!(d.names("queue").is_empty(), "{}", d.tree());
    d.assert_each_finished_once(std::slice::from_ref(&id));
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}\n{}", daemon.log());
    assert!(reason.contains(".envrc created"), "{reason}");
    assert!(fs::symlink_metadata(wt.join(".envrc")).is_err());
    let (_, r) = d.expect_result(&id);
    assert!(r.contains_key("signal"), "the signal that ended it: {r:?}");
}

#[test]
fn what_a_job_made_unwritable_is_swept_all_the_same() {
    let d = Drain::new("drain-tamper-mode");
    let script = "touch .git/hooks/post-checkout && chmod 000 .git/hooks; echo hooks=$?; \
                  mkdir -p .husky/_ && touch .husky/_/pre-commit && chmod 000 .husky/_ && \
                  chmod 500 .husky; echo husky=$?; \
                  mkdir .vscode && echo '{}' > .vscode/tasks.json && chmod 000 .vscode; \
                  echo vscode=$?";
    // Control: by itself, the script leaves both.
    let control = d.wt("control");
    d.sb.git(&control, &["init", "-q"]);
    let out = run(Command::new("sh")
        .args(["-c", script])
        .current_dir(&control));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(control.join(".git/hooks/post-checkout").exists());
    assert!(control.join(".husky/_/pre-commit").exists());
    assert!(control.join(".vscode/tasks.json").exists());
    let st = Command::new("chmod")
        .args(["-R", "u+rwx"])
        .arg(&control)
        .status()
        .expect("chmod");
    assert!(st.success());

    // A walled daemon (no namespace for the job, and no capability for itself: the sweep
    // has to make the directories writable to remove what is in them).
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    let mode_before = fs::metadata(wt.join(".git/hooks")).expect("hooks").mode() & 0o7777;
    let id = d.submit_sh(&wt, script);
    let out = run(d.drain().arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1"));
    assert!(out.status.success(), "{}", stderr(&out));
    let log = d.log_of(&id);
    assert!(
        log.contains("hooks=0") && log.contains("husky=0") && log.contains("vscode=0"),
        "premise: {log}"
    );
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}\n{}", stderr(&out));
    assert!(
        reason.ends_with("(restored)") && !reason.contains("NOT restored"),
        "{reason}"
    );
    for named in [
        ".git/hooks/post-checkout created",
        ".git/hooks changed",
        ".husky created",
        ".vscode/tasks.json created",
    ] {
        assert!(reason.contains(named), "{named}: {reason}");
    }
    assert!(!wt.join(".git/hooks/post-checkout").exists());
    assert!(fs::symlink_metadata(wt.join(".husky")).is_err());
    assert!(fs::symlink_metadata(wt.join(".vscode/tasks.json")).is_err());
    assert_eq!(
        fs::metadata(wt.join(".git/hooks")).expect("hooks").mode() & 0o7777,
        mode_before
    );
    let left: Vec<String> = fs::read_dir(&wt)
        .expect("ls")
        .chain(fs::read_dir(wt.join(".git/hooks")).expect("ls"))
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("landwall-swept"))
        .collect();
    assert!(left.is_empty(), "left aside: {left:?}");
}

// ---- Found by review of the drain's sweep: jobs of one repository at once, a directory
// of repositories, a repository a job nests and stages as a submodule.

/// The commondir attack on a linked worktree: a copy of the common dir whose config names
/// `core.fsmonitor` (touching `marker`), and the worktree's `commondir` pointed at it.
fn plant_commondir(marker: &Path) -> String {
    format!(
        "G=$(sed 's/^gitdir: //' .git); C=$(cd \"$G\" && cd \"$(cat commondir)\" && pwd); \
         rm -rf lw-evil && mkdir lw-evil && cp -a \"$C/objects\" \"$C/refs\" \"$C/HEAD\" lw-evil/ && \
         printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' > lw-evil/config && \
         printf '%s\\n' \"$PWD/lw-evil\" > \"$G/commondir\"; echo planted=$?",
        m = marker.display()
    )
}

/// A main checkout `main` and its linked worktree `linked`, under the drain's roots.
fn main_and_linked(d: &Drain) -> (PathBuf, PathBuf) {
    let main = d.wt("main");
    d.sb.git(&main, &["init", "-q"]);
    d.sb.git(&main, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let linked = d.work().join("linked");
    d.sb.git(
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
    (main, linked)
}

#[test]
fn a_job_of_a_repository_waits_for_the_one_running_in_another_of_its_worktrees() {
    // A job in the linked worktree plants a commondir and sleeps; a job in the main checkout
    // (whose protected paths include `.git/worktrees/*/commondir`) is queued meanwhile. Had
    // it started at once, its snapshot would hold the planted file, and its sweep would put
    // it back after the first job's sweep removed it.
    let d = Drain::new("drain-overlap");
    let (_, control) = main_and_linked(&d);
    let control_marker = d.sb.root.join("control-ran");
    let out = run(Command::new("sh")
        .args(["-c", &plant_commondir(&control_marker)])
        .current_dir(&control));
    assert!(stdout(&out).contains("planted=0"), "{}", stderr(&out));
    d.sb.git(&control, &["status", "--porcelain"]);
    assert!(
        control_marker.exists(),
        "control: git did not run what was planted"
    );

    let d = Drain::new("drain-overlap-job");
    let (main, linked) = main_and_linked(&d);
    let marker = d.sb.root.join("job-ran");
    let attacker = d.submit_sh(&linked, &format!("{}; sleep 3", plant_commondir(&marker)));
    let mut daemon = d.start(
        "overlap",
        &["--jobs", "2"],
        &[("LANDWALL_DRAIN_SANDBOX", "1")],
    );
    let commondir = main.join(".git/worktrees/linked/commondir");
    wait_for("the first job to plant its commondir", || {
        fs::read_to_string(&commondir).is_ok_and(|c| c.contains("lw-evil"))
    });
    // It ends after the first job: its sweep comes last.
    let innocent = d.submit_sh(&main, "sleep 4; echo innocent");
    wait_for("both jobs to end", || {
        d.result(&attacker).is_some() && d.result(&innocent).is_some()
    });
    daemon.signal("TERM");
    daemon.wait();
    assert!(
        d.log_of(&attacker).contains("planted=0"),
        "premise: the job planted it: {}",
        d.log_of(&attacker)
    );
    assert_eq!(result_state_and_reason(&d, &attacker).0, "tampered");
    assert_eq!(
        result_state_and_reason(&d, &innocent).0,
        "done",
        "{:?}\n{}",
        result_state_and_reason(&d, &innocent),
        daemon.log()
    );
    d.sb.git(&linked, &["status", "--porcelain"]);
    assert!(!marker.exists(), "git ran what the job planted");
    assert!(main.join(".git/worktrees/linked/commondir").exists());
}

#[test]
fn a_directory_of_repositories_is_not_a_jobs_worktree() {
    let d = Drain::new("drain-projects");
    let projects = d.wt("projects");
    let app = projects.join("app");
    fs::create_dir_all(&app).expect("mkdir");
    d.sb.git(&app, &["init", "-q"]);
    let marker = d.sb.root.join("job-ran");
    let script = format!(
        "printf '[core]\\n\\tfsmonitor = \"touch {m}; false\"\\n' >> app/.git/config; touch {m}-started",
        m = marker.display()
    );
    // Control: run by itself there, the script plants it and git runs it.
    let out = run(Command::new("sh")
        .args(["-c", &script])
        .current_dir(&projects));
    assert!(out.status.success(), "{}", stderr(&out));
    d.sb.git(&app, &["status", "--porcelain"]);
    assert!(marker.exists(), "control: git did not run what was planted");
    fs::remove_file(&marker).expect("rm marker");
    fs::remove_file(format!("{}-started", marker.display())).expect("rm marker");
    d.sb.git(&app, &["config", "--unset", "core.fsmonitor"]);

    let id = d.submit_sh(&projects, &script);
    d.once();
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "failed", "{reason}");
    assert!(reason.contains("directory of projects"), "{reason}");
    assert!(
        !Path::new(&format!("{}-started", marker.display())).exists(),
        "the job started"
    );
    d.sb.git(&app, &["status", "--porcelain"]);
    assert!(!marker.exists());
}

#[test]
fn a_repository_a_job_nests_and_stages_is_set_aside() {
    let d = Drain::new("drain-nested");
    let plant = |marker: &Path| {
        format!(
            "git init -q lw-lib && git -C lw-lib -c user.name=a -c user.email=a@a.invalid commit -q --allow-empty -m lib && \
             git -C lw-lib config core.fsmonitor \"touch {m}; false\" && \
             git -c advice.addEmbeddedRepo=false add lw-lib && git -c user.name=a -c user.email=a@a.invalid commit -q -m lib; echo planted=$?",
            m = marker.display()
        )
    };
    let control = d.wt("control");
    d.sb.git(&control, &["init", "-q"]);
    d.sb.git(&control, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let control_marker = d.sb.root.join("control-ran");
    let out = run(Command::new("sh")
        .args(["-c", &plant(&control_marker)])
        .current_dir(&control));
    assert!(stdout(&out).contains("planted=0"), "{}", stderr(&out));
    d.sb.git(&control, &["status", "--porcelain"]);
    assert!(
        control_marker.exists(),
        "control: git did not run what was planted"
    );

    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    d.sb.git(&wt, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let marker = d.sb.root.join("job-ran");
    let id = d.submit_sh(&wt, &plant(&marker));
    d.once();
    assert!(d.log_of(&id).contains("planted=0"), "{}", d.log_of(&id));
    let (state, reason) = result_state_and_reason(&d, &id);
    assert_eq!(state, "tampered", "{reason}");
    assert!(reason.contains("lw-lib/.git"), "{reason}");
    d.sb.git(&wt, &["status", "--porcelain"]);
    assert!(!marker.exists(), "git ran what the job planted");
}

#[test]
fn an_index_left_as_a_fifo_does_not_stop_the_daemon() {
    // Found by review: a job that leaves a FIFO at `.git/index` (and plants `.envrc`) held
    // the daemon in the open of its submodule check for good: no result, no next job, and
    // SIGTERM not heard. Now it is no index this reads (set aside, the job `tampered`).
    let d = Drain::new("drain-fifo");
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    d.sb.git(&wt, &["commit", "-q", "--allow-empty", "-m", "first"]);
    let plant = "echo 'echo planted' > .envrc; rm -f .git/index; mkfifo .git/index; echo fifo=$?";
    let first = d.submit_sh(&wt, plant);
    let second = d.submit_sh(&wt, "echo second ran");
    let mut c = d.drain();
    c.arg("--once");
    let mut child = c
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn landwall-drain");
    let end = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break Some(st);
        }
        if Instant::now() > end {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if status.is_none() {
        let _killed = child.kill();
        let _reaped = child.wait();
    }
    assert!(
        status.is_some_and(|s| s.success()),
        "the daemon did not finish its batch ({status:?}): held by the job's FIFO"
    );
    assert!(
        d.log_of(&first).contains("fifo=0"),
        "premise: {}",
        d.log_of(&first)
    );
    let (state, reason) = result_state_and_reason(&d, &first);
    assert_eq!(state, "tampered", "{reason}");
    assert!(reason.contains("index"), "{reason}");
    assert!(
        !wt.join(".envrc").exists(),
        "the planted .envrc is still there"
    );
    let index = fs::symlink_metadata(wt.join(".git/index"));
    assert!(
        index.as_ref().map_or(true, |m| m.is_file()),
        "the FIFO is still the index: {index:?}"
    );
    assert!(
        d.log_of(&second).contains("second ran"),
        "{}",
        d.log_of(&second)
    );
}

#[test]
fn a_tree_too_deep_to_keep_is_removed_and_the_next_job_runs() {
    // A job nests directories 300 levels down in `.git/hooks` (found by review: the sweep
    // left such a tree in place, and every later job's snapshot there was refused).
    let d = Drain::new("drain-deep");
    let wt = d.wt("w");
    d.sb.git(&wt, &["init", "-q"]);
    let deep = "d=.git/hooks/deep; i=0; while [ $i -lt 300 ]; do mkdir -p $d || exit 1; cd $d; d=x; i=$((i+1)); done; touch leaf; echo deep=$?";
    let first = d.submit_sh(&wt, deep);
    let mut c = d.drain();
    c.arg("--once").env("LANDWALL_DRAIN_SANDBOX", "1");
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        d.log_of(&first).contains("deep=0"),
        "premise: {}",
        d.log_of(&first)
    );
    let (state, reason) = result_state_and_reason(&d, &first);
    assert_eq!(state, "tampered", "{reason}");
    let left: Vec<_> = fs::read_dir(wt.join(".git/hooks"))
        .expect("hooks")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| !n.to_string_lossy().ends_with(".sample"))
        .collect();
    assert!(left.is_empty(), "left in .git/hooks: {left:?}");
    let next = d.submit_sh(&wt, "echo next-ran");
    d.once();
    assert_eq!(
        d.expect_result(&next).0,
        "done",
        "{:?}",
        d.expect_result(&next)
    );
    assert!(d.log_of(&next).contains("next-ran"));
}

/// `cmd` as the test user (another local user), with its output.
fn as_other_user(cmd: &[&str]) -> std::process::Output {
    let _ = landwall_e2e::test_user();
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={}", landwall_e2e::TEST_USER))
        .arg(format!("--regid={}", landwall_e2e::TEST_USER))
        .args(["--init-groups", "--"])
        .args(cmd);
    run(&mut c)
}

/// Every entry under `root` whose mode gives others any access, with its mode.
fn open_to_others(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = fs::symlink_metadata(&p).expect("stat");
        if m.mode() & 0o007 != 0 {
            out.push(format!("{} {:o}", p.display(), m.mode() & 0o7777));
        }
        if m.is_dir() {
            todo.extend(
                fs::read_dir(&p)
                    .expect("list")
                    .map(|e| e.expect("entry").path()),
            );
        }
    }
    out
}

/// Issue 25, item 4: under the quick start's `install -d` (0755) and a umask of 000, the
/// spool's directories and files (queued, done, results, logs, the lock) carry no access for
/// others, and another local user can neither list the queue nor read a job's prompt. The
/// control: a job file as it was written before (0644, in a 0755 directory) that user reads.
#[test]
fn spool_files_carry_no_access_for_others() {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let d = Drain::new("drain-spool-modes");
    fs::DirBuilder::new()
        .mode(0o755)
        .create(d.spool())
        .expect("install -d the spool");
    fs::set_permissions(d.spool(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let wt = d.wt("a");
    let with_umask_0 = |c: &mut Command| -> std::process::Output {
        let mut sh = Command::new("/bin/sh");
        sh.args(["-c", "umask 000; exec \"$@\"", "sh"])
            .arg(c.get_program())
            .args(c.get_args());
        d.sb.clean_env(&mut sh);
        sh.current_dir(&d.sb.root);
        run(&mut sh)
    };
    let submit = |prompt: &str| -> String {
        let mut c = Command::new(landwall_e2e::landwall());
        c.arg("submit")
            .arg("--spool")
            .arg(d.spool())
            .arg("--worktree")
            .arg(&wt)
            .args(["--", "sh", "-c", prompt]);
        let out = with_umask_0(&mut c);
        assert!(out.status.success(), "submit: {}", stderr(&out));
        stdout(&out).trim().to_string()
    };
    let ran = submit("echo the secret prompt");
    let mut once = d.drain();
    once.arg("--once");
    let out = with_umask_0(&mut once);
    assert!(out.status.success(), "--once: {}", stderr(&out));
    let queued = submit("echo another secret prompt");
    let (state, _) = d.expect_result(&ran);
    assert_eq!(state, "done");
    let job = d.dir("queue").join(format!("{queued}.toml"));
    assert!(job.is_file(), "{}", d.tree());
    assert!(d.log_of(&ran).contains("the secret prompt"));
    let open = open_to_others(&d.spool());
    assert!(open.is_empty(), "open to others: {open:?}");
    for path in [
        d.dir("queue"),
        job.clone(),
        d.dir("done").join(format!("{ran}.toml")),
        d.spool().join("logs").join(format!("{ran}.log")),
    ] {
        let out = as_other_user(&["cat", path.to_str().expect("utf8")]);
        assert!(
            !out.status.success() && !stdout(&out).contains("secret"),
            "another user read {}: {}",
            path.display(),
            stdout(&out)
        );
    }
    let out = as_other_user(&["ls", d.dir("queue").to_str().expect("utf8")]);
    assert!(
        !out.status.success() && !stdout(&out).contains(&queued),
        "another user listed the queue: {}",
        stdout(&out)
    );
    // The control: the same job file as before, 0644 in a 0755 directory beside the spool.
    let old = d.sb.root.join("old-queue");
    fs::create_dir(&old).expect("mkdir");
    fs::set_permissions(&old, fs::Permissions::from_mode(0o755)).expect("chmod");
    let copy = old.join(format!("{queued}.toml"));
    fs::copy(&job, &copy).expect("copy");
    fs::set_permissions(&copy, fs::Permissions::from_mode(0o644)).expect("chmod");
    let out = as_other_user(&["cat", copy.to_str().expect("utf8")]);
    assert!(
        out.status.success() && stdout(&out).contains("another secret prompt"),
        "control: another user could not read a 0644 job file: {}",
        stderr(&out)
    );
}

/// A job that plants 40,000 empty directories under `.husky` (absent: a protected path) and
/// exits.
const WIDE_PLANT: &str = "mkdir .husky && cd .husky && seq 40000 | xargs mkdir";

/// Where in the daemon's log `needle` first appears.
fn at_in(log: &str, needle: &str) -> Option<usize> {
    log.find(needle)
}

/// Issue 25, item 2: a job's plant of 40,000 directories is set aside at once (one rename)
/// and removed off the daemon's loop, so the next job (in another worktree) is claimed
/// before that removal ends, and the tree is gone after it; the plant is recorded. The
/// control is the order itself: before, the removal ran on the loop, and the next job was
/// claimed only after it.
#[test]
fn a_wide_plant_is_removed_while_the_next_job_starts() {
    let d = Drain::new("drain-wide-plant");
    let (a, b) = (d.wt("a"), d.wt("b"));
    let plant = d.submit_sh(&a, WIDE_PLANT);
    let next = d.submit_sh(&b, "echo next");
    let mut daemon = d.start("wide", &["--once"], &[]);
    let st = daemon.wait();
    let log = daemon.log();
    assert!(st.success(), "{st:?}\n{log}");
    let (_, fields) = d.expect_result(&plant);
    assert_eq!(
        fields.get("state").map(String::as_str),
        Some("tampered"),
        "{fields:?}\n{log}"
    );
    assert_eq!(d.expect_result(&next).0, "done", "{log}");
    let claimed = at_in(&log, &format!("job {next}: claimed"));
    let removed = at_in(
        &log,
        &format!("job {plant}: what its sweep set aside was removed"),
    );
    assert!(
        matches!((claimed, removed), (Some(c), Some(r)) if c < r),
        "the next job was not claimed while the plant was being removed:\n{log}"
    );
    let left: Vec<_> = fs::read_dir(&a)
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("husky"))
        .collect();
    assert!(left.is_empty(), "left in the worktree: {left:?}\n{log}");
}

/// Issue 25, item 2: SIGTERM while a wide plant is being removed: the removal stops (the
/// plant stays renamed aside, where nothing uses it, and the log names it) and the daemon
/// exits 0 at once, not when the removal would have ended. The control: without the
/// signal the same removal runs to its end (the test above).
#[test]
fn sigterm_stops_a_removal_and_the_daemon_exits() {
    let d = Drain::new("drain-wide-term");
    let a = d.wt("a");
    let plant = d.submit_sh(&a, WIDE_PLANT);
    let mut daemon = d.start("term", &[], &[]);
    wait_for("the plant's sweep", || {
        daemon.log().contains(&format!("job {plant}: tampered"))
    });
    daemon.signal("TERM");
    let st = daemon.wait();
    let log = daemon.log();
    assert!(st.success(), "{st:?}\n{log}");
    assert!(
        log.contains("could not be removed whole") && log.contains("stopped"),
        "the removal did not stop with the daemon:\n{log}"
    );
    assert!(!a.join(".husky").exists(), "{log}");
}
