//! The escape suite (issue 4): one named test per attempt to get out of the wall.
//!
//! Each test runs an attempt (`lw-escape`, see `tests/src/bin/lw-escape.rs`) as the stand-in
//! agent behind the `claude` shim and asserts that it printed `BLOCKED` and that what it tried
//! to reach is unchanged. Each then runs the same attempt outside the wall, directly, as the
//! same user, and asserts that it `ESCAPED` there: the control proves the test can fail.
//! Where an attempt differs for an unprivileged user, a `…_unprivileged` twin runs both as the
//! system user `landwall-test` (created on first use). The walled run always comes first, so
//! its "unchanged" checks see the scene as the test set it up.
//!
//! `docs/escape.md` lists every attempt and what stops it.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use landwall_e2e::{
    bin_dir, chown_tree, describe, install, output, stderr, stdout, test_user, verdict, Sandbox,
    Who, TEST_USER,
};

// ---- The harness.

/// One test's scene: a sandbox whose stand-in agent runs its arguments (`exec "$@"`), a copy
/// of `lw-escape` the agent can execute, and `run/` for the launchers' reports.
struct Scene {
    sb: Sandbox,
    who: Who,
}

impl Scene {
    fn new(name: &str, who: Who) -> Scene {
        let sb = Sandbox::new(name);
        let built = bin_dir().join("lw-escape");
        assert!(
            built.is_file(),
            "{} is missing: build the workspace first",
            built.display()
        );
        let copy = sb.agents().join("lw-escape");
        if std::fs::hard_link(&built, &copy).is_err() {
            install(&built, &copy, &["-m", "0755"]);
        }
        // The stand-in agent runs its arguments. (Like `Sandbox::agent_script`, but written
        // by `install`, see there.)
        let script = sb.root.join("agent.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho ran > \"$PWD/marker\"\nexec \"$@\"\n",
        )
        .expect("write agent script");
        install(&script, &sb.agents().join("claude-real"), &["-m", "0755"]);
        std::fs::create_dir_all(sb.root.join("run")).expect("mkdir run");
        let scene = Scene { sb, who };
        if who == Who::User {
            let (uid, gid) = test_user();
            for d in [
                scene.sb.wt(),
                scene.sb.home(),
                scene.sb.outside(),
                scene.run(),
            ] {
                chown_tree(&d, uid, gid);
            }
        }
        scene
    }

    /// The agent's copy of `lw-escape`.
    fn esc(&self) -> PathBuf {
        self.sb.agents().join("lw-escape")
    }

    /// The `claude` shim.
    fn shim(&self) -> PathBuf {
        self.sb.shims().join("claude")
    }

    /// A directory the launchers can write their reports in.
    fn run(&self) -> PathBuf {
        self.sb.root.join("run")
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
        c.current_dir(self.sb.wt());
        c
    }

    /// `lw-escape SUB ARGS…` as an argument vector.
    fn attempt<S: AsRef<OsStr>>(&self, sub: &str, args: &[S]) -> Vec<OsString> {
        let mut v = vec![self.esc().into_os_string(), sub.into()];
        v.extend(args.iter().map(|a| a.as_ref().to_os_string()));
        v
    }

    /// The attempt as the agent, behind the shim.
    fn walled(&self, attempt: &[OsString]) -> Command {
        let mut c = self.cmd(self.shim());
        c.args(attempt);
        c
    }

    /// The same attempt outside the wall.
    fn control(&self, attempt: &[OsString]) -> Command {
        let mut c = self.cmd(&attempt[0]);
        c.args(&attempt[1..]);
        c
    }

    /// `lw-escape parent [opts] -- CMD…`, as `who`.
    fn parent(&self, opts: &[OsString], cmd: &[OsString]) -> Command {
        let mut c = self.cmd(self.esc());
        c.arg("parent").args(opts).arg("--").args(cmd);
        c
    }

    /// The attempt with the shim in front of it, as an argument vector (for launchers).
    fn behind_shim(&self, attempt: &[OsString]) -> Vec<OsString> {
        let mut v = vec![self.shim().into_os_string()];
        v.extend(attempt.iter().cloned());
        v
    }
}

fn os(s: impl AsRef<OsStr>) -> OsString {
    s.as_ref().to_os_string()
}

/// The attempt failed, with `errno` in its reason when given.
fn assert_blocked(what: &str, out: &Output, errno: Option<&str>) -> String {
    let v = verdict(out);
    assert!(
        v.starts_with("BLOCKED ") && out.status.code() == Some(1),
        "{what}: not blocked:\n{}",
        describe(out)
    );
    if let Some(errno) = errno {
        assert!(v.contains(errno), "{what}: expected {errno}: {v}");
    }
    eprintln!("{what}: {v}");
    v
}

/// The attempt reached its target.
fn assert_escaped(what: &str, out: &Output) -> String {
    let v = verdict(out);
    assert!(
        v.starts_with("ESCAPED ") && out.status.success(),
        "{what}: the control did not escape, so the walled test proves nothing:\n{}",
        describe(out)
    );
    eprintln!("{what}: {v}");
    v
}

/// Runs `attempt` behind the shim (must be BLOCKED), checks `unchanged`, then runs it outside
/// the wall (must ESCAPE).
fn walled_then_control(
    scene: &Scene,
    attempt: &[OsString],
    errno: Option<&str>,
    unchanged: impl FnOnce(&Scene),
) {
    let out = output(&mut scene.walled(attempt));
    assert!(scene.sb.ran_in(&scene.sb.wt()), "{}", describe(&out));
    assert_blocked("walled", &out, errno);
    unchanged(scene);
    let out = output(&mut scene.control(attempt));
    assert_escaped("control", &out);
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// A name unique to this scene (the sandbox's directory name: test, pid, counter).
fn tag(scene: &Scene) -> String {
    scene
        .sb
        .root
        .file_name()
        .expect("sandbox name")
        .to_string_lossy()
        .into_owned()
}

fn report(scene: &Scene) -> String {
    read(&scene.run().join("report"))
}

/// Defines a test for root and its `…_unprivileged` twin.
macro_rules! root_and_user {
    ($root:ident, $user:ident => $body:ident) => {
        #[test]
        fn $root() {
            $body(Who::Root)
        }
        #[test]
        fn $user() {
            $body(Who::User)
        }
    };
}

// ---- Files outside the grant.

#[test]
fn escape_read_root() {
    let scene = Scene::new("esc-root", Who::Root);
    walled_then_control(
        &scene,
        &scene.attempt("list", &["/root"]),
        Some("EACCES"),
        |_| {},
    );
}

#[test]
fn escape_read_root_bashrc() {
    let scene = Scene::new("esc-rootrc", Who::Root);
    // `/root/.bashrc`, or whatever regular file `/root` holds.
    let target = Some(PathBuf::from("/root/.bashrc"))
        .filter(|p| p.is_file())
        .or_else(|| {
            std::fs::read_dir("/root")
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .find(|p| p.is_file())
        });
    let Some(target) = target else {
        eprintln!("skipped: /root holds no file to read");
        return;
    };
    walled_then_control(
        &scene,
        &scene.attempt("read", &[&target]),
        Some("EACCES"),
        |_| {},
    );
}

/// Root reads /etc/shadow without any capability (it owns the file): only the default deny
/// carve-out stops it, while the rest of /etc stays readable.
#[test]
fn escape_read_etc_shadow() {
    let scene = Scene::new("esc-shadow", Who::Root);
    let before = std::fs::read("/etc/shadow").expect("read /etc/shadow");
    walled_then_control(
        &scene,
        &scene.attempt("read", &["/etc/shadow"]),
        Some("EACCES"),
        |_| assert_eq!(std::fs::read("/etc/shadow").expect("read"), before),
    );
    // The carve-out is narrow: its siblings still read.
    let out = output(&mut scene.walled(&scene.attempt("read", &["/etc/passwd"])));
    assert!(verdict(&out).starts_with("ESCAPED "), "{}", describe(&out));
}

fn read_outside(who: Who) {
    let scene = Scene::new("esc-readout", who);
    walled_then_control(
        &scene,
        &scene.attempt("read", &[scene.sb.outside().join("secret")]),
        Some("EACCES"),
        |_| {},
    );
}
root_and_user!(escape_read_outside, escape_read_outside_unprivileged => read_outside);

fn write_outside(who: Who) {
    let scene = Scene::new("esc-writeout", who);
    let planted = scene.sb.outside().join("planted");
    let secret = scene.sb.outside().join("secret");
    walled_then_control(
        &scene,
        &scene.attempt("write", &[&planted]),
        Some("EACCES"),
        |_| assert!(!planted.exists(), "a file appeared outside"),
    );
    let out = output(&mut scene.walled(&scene.attempt("write", &[&secret])));
    assert_blocked("overwrite outside", &out, Some("EACCES"));
    assert_eq!(read(&secret), "outside secret\n");
}
root_and_user!(escape_write_outside, escape_write_outside_unprivileged => write_outside);

fn symlink_in_worktree(who: Who) {
    let scene = Scene::new("esc-symlink", who);
    let secret = scene.sb.outside().join("secret");
    let out = output(&mut scene.walled(&scene.attempt(
        "symlink",
        &[
            secret.as_os_str(),
            scene.sb.wt().join("walled-link").as_os_str(),
        ],
    )));
    // The link itself is made (it is just a file in the worktree); following it is refused.
    let v = assert_blocked("walled", &out, Some("EACCES"));
    assert!(v.contains("open "), "blocked at the open, not before: {v}");
    assert_eq!(read(&secret), "outside secret\n");
    let out = output(&mut scene.control(&scene.attempt(
        "symlink",
        &[
            secret.as_os_str(),
            scene.sb.wt().join("control-link").as_os_str(),
        ],
    )));
    assert_escaped("control", &out);
}
root_and_user!(escape_symlink_in_worktree, escape_symlink_in_worktree_unprivileged => symlink_in_worktree);

fn hardlink_into_worktree(who: Who) {
    let scene = Scene::new("esc-hardlink", who);
    let secret = scene.sb.outside().join("secret");
    let stolen = scene.sb.wt().join("stolen");
    walled_then_control(
        &scene,
        &scene.attempt("hardlink", &[&secret, &stolen]),
        None,
        |s| {
            assert!(
                !stolen.exists(),
                "the outside file is linked into the worktree"
            );
            let meta = std::fs::metadata(s.sb.outside().join("secret")).expect("stat");
            assert_eq!(meta.nlink(), 1);
        },
    );
}
root_and_user!(escape_hardlink_into_worktree, escape_hardlink_into_worktree_unprivileged => hardlink_into_worktree);

fn rename_into_worktree(who: Who) {
    let scene = Scene::new("esc-rename", who);
    let secret = scene.sb.outside().join("secret");
    let stolen = scene.sb.wt().join("stolen");
    walled_then_control(
        &scene,
        &scene.attempt("rename", &[&secret, &stolen]),
        None,
        |_| {
            assert!(!stolen.exists());
            assert_eq!(read(&secret), "outside secret\n");
        },
    );
}
root_and_user!(escape_rename_into_worktree, escape_rename_into_worktree_unprivileged => rename_into_worktree);

// ---- /proc.

fn proc_self_root(who: Who) {
    let scene = Scene::new("esc-procroot", who);
    let mut via = OsString::from("/proc/self/root");
    via.push(scene.sb.outside().join("secret"));
    walled_then_control(
        &scene,
        &scene.attempt("read", &[via]),
        Some("EACCES"),
        |_| {},
    );
}
root_and_user!(escape_proc_self_root, escape_proc_self_root_unprivileged => proc_self_root);

/// The launching process sits in `outside/`; the agent reads `secret` through its cwd.
fn proc_parent_cwd(who: Who) {
    let scene = Scene::new("esc-proccwd", who);
    let attempt = scene.attempt("read", &["/proc/@PPID@/cwd/secret"]);
    let opts = [os("--child-cwd"), os(scene.sb.wt())];
    let out = output(
        scene
            .parent(&opts, &scene.behind_shim(&attempt))
            .current_dir(scene.sb.outside()),
    );
    assert_blocked("walled", &out, Some("EACCES"));
    let out = output(
        scene
            .parent(&opts, &attempt)
            .current_dir(scene.sb.outside()),
    );
    assert_escaped("control", &out);
}
root_and_user!(escape_proc_parent_cwd, escape_proc_parent_cwd_unprivileged => proc_parent_cwd);

/// The launching process holds `secret` open as fd 5 (close-on-exec: only for itself); the
/// agent opens it again through `/proc/<parent>/fd/5`.
fn proc_parent_fd(who: Who) {
    let scene = Scene::new("esc-procfd", who);
    let attempt = scene.attempt("read", &["/proc/@PPID@/fd/5"]);
    let mut spec = OsString::from("5=");
    spec.push(scene.sb.outside().join("secret"));
    let opts = [os("--open"), spec];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, Some("EACCES"));
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_proc_parent_fd, escape_proc_parent_fd_unprivileged => proc_parent_fd);

/// The same descriptor copied out of the parent with `pidfd_getfd(2)`.
fn pidfd_getfd_parent(who: Who) {
    let scene = Scene::new("esc-pidfd", who);
    let attempt = scene.attempt("pidfd-getfd", &["@PPID@", "5"]);
    let mut spec = OsString::from("5=");
    spec.push(scene.sb.outside().join("secret"));
    let opts = [os("--open"), spec];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, Some("EPERM"));
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_pidfd_getfd_parent, escape_pidfd_getfd_parent_unprivileged => pidfd_getfd_parent);

/// The parent's environment holds what the filter kept from the agent.
fn proc_parent_environ(who: Who) {
    let scene = Scene::new("esc-environ", who);
    let needle = "LW_PARENT_SECRET=parent-env-secret";
    let attempt = scene.attempt("read", &["/proc/@PPID@/environ", needle]);
    let launch = |cmd: &[OsString]| {
        let mut c = scene.parent(&[], cmd);
        c.env("LW_PARENT_SECRET", "parent-env-secret");
        output(&mut c)
    };
    let out = launch(&scene.behind_shim(&attempt));
    assert_blocked("walled", &out, Some("EACCES"));
    let out = launch(&attempt);
    assert_escaped("control", &out);
}
root_and_user!(escape_proc_parent_environ, escape_proc_parent_environ_unprivileged => proc_parent_environ);

// ---- Inherited descriptors.

/// A parent leaves fd 7 open on an outside file (no close-on-exec): the agent must not find it.
#[test]
fn escape_inherited_file_descriptor() {
    let scene = Scene::new("esc-fdfile", Who::Root);
    let attempt = scene.attempt("fd", &["7"]);
    let mut spec = OsString::from("7=");
    spec.push(scene.sb.outside().join("secret"));
    let opts = [os("--leak"), spec];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, Some("EBADF"));
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
}

/// The same with a directory descriptor, which would let `openat` reach inside it.
#[test]
fn escape_inherited_directory_descriptor() {
    let scene = Scene::new("esc-fddir", Who::Root);
    let attempt = scene.attempt("fd", &["8", "secret"]);
    let mut spec = OsString::from("8=");
    spec.push(scene.sb.outside());
    let opts = [os("--leak"), spec];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, Some("EBADF"));
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
}

// ---- The parent process.

fn on_parent(scene: &Scene, sub: &str, args: &[&str], errno: Option<&str>) {
    let attempt = scene.attempt(sub, args);
    let rep = scene.run().join("report");
    let opts = [os("--report"), os(&rep)];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, errno);
    assert!(report(scene).contains("signals: none"), "{}", report(scene));
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
}

fn ptrace_attach_parent(who: Who) {
    let scene = Scene::new("esc-ptrace", who);
    on_parent(&scene, "ptrace-attach", &["@PPID@"], Some("EPERM"));
}
root_and_user!(escape_ptrace_attach_parent, escape_ptrace_attach_parent_unprivileged => ptrace_attach_parent);

fn ptrace_seize_parent(who: Who) {
    let scene = Scene::new("esc-seize", who);
    on_parent(&scene, "ptrace-seize", &["@PPID@"], Some("EPERM"));
}
root_and_user!(escape_ptrace_seize_parent, escape_ptrace_seize_parent_unprivileged => ptrace_seize_parent);

fn process_vm_readv_parent(who: Who) {
    let scene = Scene::new("esc-vmread", who);
    on_parent(
        &scene,
        "vm-read",
        &["@PPID@", "@ADDR@", "@LEN@"],
        Some("EPERM"),
    );
    // The control read the real secret, so the address was right.
    let attempt = scene.attempt("vm-read", &["@PPID@", "@ADDR@", "@LEN@"]);
    let out = output(&mut scene.parent(&[], &attempt));
    assert!(
        verdict(&out).contains("parent-memory-secret"),
        "{}",
        describe(&out)
    );
}
root_and_user!(escape_process_vm_readv_parent, escape_process_vm_readv_parent_unprivileged => process_vm_readv_parent);

fn proc_parent_mem(who: Who) {
    let scene = Scene::new("esc-procmem", who);
    on_parent(
        &scene,
        "mem",
        &["@PPID@", "@ADDR@", "@LEN@"],
        Some("EACCES"),
    );
}
root_and_user!(escape_proc_parent_mem, escape_proc_parent_mem_unprivileged => proc_parent_mem);

fn signal_parent(who: Who) {
    let scene = Scene::new("esc-sigparent", who);
    let attempt = scene.attempt("kill", &["@PPID@", "USR1"]);
    let rep = scene.run().join("report");
    let opts = [os("--report"), os(&rep)];
    let out = output(&mut scene.parent(&opts, &scene.behind_shim(&attempt)));
    assert_blocked("walled", &out, Some("EPERM"));
    assert!(
        report(&scene).contains("signals: none"),
        "the parent got a signal: {}",
        report(&scene)
    );
    let out = output(&mut scene.parent(&opts, &attempt));
    assert_escaped("control", &out);
    assert!(
        report(&scene).contains("signals: SIGUSR1"),
        "the control's signal did not arrive: {}",
        report(&scene)
    );
}
root_and_user!(escape_signal_parent, escape_signal_parent_unprivileged => signal_parent);

/// A process started outside the wall by the same user (a sibling of the agent).
fn signal_sibling(who: Who) {
    let scene = Scene::new("esc-sigsib", who);
    let mut sibling: Child = scene
        .cmd(scene.esc())
        .arg("pause")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn sibling");
    let pid = sibling.id().to_string();
    let attempt = scene.attempt("kill", &[pid.as_str(), "TERM"]);
    let out = output(&mut scene.walled(&attempt));
    let walled = verdict(&out);
    let alive = sibling.try_wait().expect("try_wait").is_none();
    let out_control = output(&mut scene.control(&attempt));
    let control = verdict(&out_control);
    if !control.starts_with("ESCAPED") {
        let _killed = sibling.kill();
    }
    let st = sibling.wait().expect("wait sibling");
    assert!(
        walled.starts_with("BLOCKED") && walled.contains("EPERM"),
        "walled: {}",
        describe(&out)
    );
    assert!(alive, "the sibling died of the walled attempt");
    assert_escaped("control", &out_control);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&st),
        Some(libc::SIGTERM)
    );
}
root_and_user!(escape_signal_sibling, escape_signal_sibling_unprivileged => signal_sibling);

/// Scopes stop signals leaving the agent's domain, not signals to its own children.
#[test]
fn signal_own_child_still_works() {
    let scene = Scene::new("esc-sigchild", Who::Root);
    let out = output(&mut scene.walled(&scene.attempt::<&str>("kill-child", &[])));
    let v = verdict(&out);
    assert!(v.starts_with("ESCAPED own child"), "{}", describe(&out));
}

// ---- Abstract unix sockets.

/// Abstract sockets have no path: Landlock's scope (ABI 6) refuses those of processes
/// outside the wall (EPERM). Tried with `[unix] allow_all`, which takes the seccomp filter's
/// Unix socket rule away, so that the scope itself is what refuses; and with the default
/// configuration, where the filter refuses the socket first on kernels below ABI 9.
fn abstract_socket(who: Who) {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixListener};
    let scene = Scene::new("esc-abstract", who);
    let name = format!("landwall-escape-{}", tag(&scene));
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract address");
    let listener = UnixListener::bind_addr(&addr).expect("bind abstract socket");
    listener.set_nonblocking(true).expect("nonblocking");
    let nothing_queued = || {
        let e = listener
            .accept()
            .expect_err("the listener got a connection");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    };
    let attempt = scene.attempt("abstract", &[name.as_str()]);
    let hatch = scene.sb.config("[unix]\nallow_all = true\n");
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &hatch));
    assert_blocked("walled, [unix] allow_all (the scope)", &out, Some("EPERM"));
    nothing_queued();
    let errno = if landlock_abi() >= 9 {
        "EPERM"
    } else {
        "EACCES"
    };
    walled_then_control(&scene, &attempt, Some(errno), |_| nothing_queued());
    listener
        .accept()
        .expect("the control's connection is queued");
}
root_and_user!(escape_abstract_socket, escape_abstract_socket_unprivileged => abstract_socket);

// ---- Path-named Unix sockets, io_uring, keyrings: servers and kernel objects beside the
// wall (issue 14). Each route is tried behind the shim, by `landwall run` and as a drain
// job, and with a terminal; the control, outside the wall, reaches the server.

/// The ways an agent is launched, each as a command that runs `attempt`: behind the shim,
/// by `landwall run`, and (as root, whose drain configuration it is) as a drain job, through
/// the runner the daemon starts for each job.
fn launchers(scene: &Scene, attempt: &[OsString]) -> Vec<(&'static str, Command)> {
    let mut v = vec![("shim", scene.walled(attempt))];
    let mut run = scene.cmd(landwall_e2e::landwall());
    run.arg("run").arg("--").args(attempt);
    v.push(("landwall run", run));
    if scene.who == Who::Root {
        let config = scene.sb.root.join("drain.toml");
        std::fs::write(
            &config,
            format!("[drain]\nworktree_roots = [{:?}]\n", scene.sb.root),
        )
        .expect("write drain config");
        let spool = scene.sb.root.join("spool");
        std::fs::create_dir_all(&spool).expect("mkdir spool");
        let mut job = scene.cmd(bin_dir().join("landwall-drain"));
        job.arg("__run-job")
            .arg("--config")
            .arg(&config)
            .arg("--spool")
            .arg(&spool)
            .arg("--worktree")
            .arg(scene.sb.wt())
            .args(["--agent", "claude", "--parent"])
            .arg(std::process::id().to_string())
            .arg("--")
            .args(attempt);
        v.push(("drain job", job));
    }
    v
}

/// A server outside the wall on a path-named socket in `run/` (as the user's session bus,
/// tmux or journald are), which anyone may connect to.
enum Server {
    Stream(std::os::unix::net::UnixListener),
    Datagram(std::os::unix::net::UnixDatagram),
}

impl Server {
    fn new(scene: &Scene, datagram: bool) -> (Server, PathBuf) {
        use std::os::unix::net::{UnixDatagram, UnixListener};
        let path = scene.run().join(if datagram { "dgram" } else { "bus" });
        let server = if datagram {
            let s = UnixDatagram::bind(&path).expect("bind datagram socket");
            s.set_nonblocking(true).expect("nonblocking");
            Server::Datagram(s)
        } else {
            let s = UnixListener::bind(&path).expect("bind stream socket");
            s.set_nonblocking(true).expect("nonblocking");
            Server::Stream(s)
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
            .expect("chmod socket");
        (server, path)
    }

    /// How many connections or datagrams have arrived since last asked.
    fn arrivals(&self) -> usize {
        let mut n = 0;
        loop {
            let got = match self {
                Server::Stream(l) => l.accept().map(drop),
                Server::Datagram(d) => d.recv(&mut [0u8; 64]).map(drop),
            };
            match got {
                Ok(()) => n += 1,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return n,
                Err(e) => panic!("server: {e}"),
            }
        }
    }
}

/// Runs `attempt` through every launcher and in a terminal (each must be refused with
/// `errno`, and `unchanged` must hold after each), then outside the wall (must escape).
fn every_launch_refused(
    scene: &Scene,
    attempt: &[OsString],
    errno: &str,
    unchanged: impl Fn(&str),
) {
    for (how, mut cmd) in launchers(scene, attempt) {
        let out = output(&mut cmd);
        assert_blocked(&format!("walled ({how})"), &out, Some(errno));
        unchanged(how);
    }
    let out = in_pty(scene, &scene.behind_shim(attempt));
    let line = child_line(&out).unwrap_or_default();
    assert!(
        line.starts_with("child: BLOCKED") && line.contains(errno),
        "walled (with a terminal): {}",
        describe(&out)
    );
    unchanged("with a terminal");
}

/// A route to a path-named socket of a server outside the wall: `sub ARGS… PATH`.
fn unix_route(who: Who, datagram: bool, sub: &str, args: &[&str]) {
    let scene = Scene::new("esc-unix", who);
    let (server, path) = Server::new(&scene, datagram);
    let mut argv: Vec<OsString> = args.iter().map(os).collect();
    argv.push(os(&path));
    let attempt = scene.attempt(sub, &argv);
    every_launch_refused(&scene, &attempt, "EACCES", |how| {
        assert_eq!(
            server.arrivals(),
            0,
            "{how}: the server heard from the agent"
        );
    });
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
    assert_eq!(server.arrivals(), 1, "the control reached the server");
}

fn unix_stream_server(who: Who) {
    unix_route(who, false, "unix-connect", &[]);
}
root_and_user!(escape_unix_stream_server, escape_unix_stream_server_unprivileged => unix_stream_server);

fn unix_datagram_socket(who: Who) {
    unix_route(who, true, "unix-send", &["socket"]);
}
root_and_user!(escape_unix_datagram_socket, escape_unix_datagram_socket_unprivileged => unix_datagram_socket);

/// A datagram socket pair, re-pointed at the server by `connect`.
fn unix_socketpair_connect(who: Who) {
    unix_route(who, true, "unix-send", &["pair-connect"]);
}
root_and_user!(escape_unix_datagram_socketpair_connect, escape_unix_datagram_socketpair_connect_unprivileged => unix_socketpair_connect);

/// A datagram socket pair, re-pointed at the server by `sendto`.
fn unix_socketpair_sendto(who: Who) {
    unix_route(who, true, "unix-send", &["pair-sendto"]);
}
root_and_user!(escape_unix_datagram_socketpair_sendto, escape_unix_datagram_socketpair_sendto_unprivileged => unix_socketpair_sendto);

/// The socket made through the i386 entry (`int 0x80`): `socket` and `socketcall`.
fn unix_i386(who: Who) {
    unix_route(who, false, "unix-i386", &["socket"]);
    unix_route(who, false, "unix-i386", &["socketcall"]);
}
root_and_user!(escape_unix_i386_entry, escape_unix_i386_entry_unprivileged => unix_i386);

/// Stream socket pairs still work inside the wall: runtimes build their pipes with them.
#[test]
fn unix_stream_socketpair_still_works() {
    let scene = Scene::new("esc-pair-works", Who::User);
    let out = output(&mut scene.walled(&scene.attempt::<&str>("stream-pair", &[])));
    assert!(
        verdict(&out).starts_with("ESCAPED"),
        "a stream pair must work: {}",
        describe(&out)
    );
}

/// A tmux server started outside the wall runs what a client asks, unwalled: the agent's
/// `tmux new-window` would write where the wall refuses. Real tmux, its socket in `run/`.
fn tmux(who: Who) {
    let scene = Scene::new("esc-tmux", who);
    let sock = scene.run().join("tmux");
    let tmux = |args: &[&OsStr]| -> Command {
        let mut c = scene.cmd("tmux");
        c.arg("-S").arg(&sock).args(args);
        c
    };
    let out = output(
        tmux(&[
            OsStr::new("-f"),
            OsStr::new("/dev/null"),
            OsStr::new("new-session"),
            OsStr::new("-d"),
            OsStr::new("sleep 300"),
        ])
        .env("SHELL", "/bin/sh"),
    );
    assert!(
        out.status.success(),
        "tmux server (is tmux installed? `make test-tools`): {}",
        describe(&out)
    );
    struct Kill<'a>(&'a Scene, &'a Path);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ignored = self
                .0
                .cmd("tmux")
                .arg("-S")
                .arg(self.1)
                .arg("kill-server")
                .output();
        }
    }
    let _kill = Kill(&scene, &sock);
    let mark = scene.sb.outside().join("tmux-ran");
    let window = format!("touch '{}'", mark.display());
    let attempt: Vec<OsString> = vec![
        os("tmux"),
        os("-S"),
        os(&sock),
        os("new-window"),
        os(&window),
    ];
    let waits = |present: bool| {
        // tmux runs the window's command asynchronously: give it time to appear.
        for _ in 0..100 {
            if mark.exists() == present && present {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(mark.exists(), present, "{}", mark.display());
    };
    for (how, mut cmd) in launchers(&scene, &attempt) {
        let out = output(&mut cmd);
        assert!(!out.status.success(), "walled ({how}): {}", describe(&out));
        waits(false);
        eprintln!("walled ({how}): {}", stderr(&out).trim());
    }
    let out = in_pty(&scene, &scene.behind_shim(&attempt));
    assert!(
        stderr(&out).contains("child: exit 1"),
        "walled (with a terminal): {}",
        describe(&out)
    );
    waits(false);
    let out = output(&mut scene.control(&attempt));
    assert!(out.status.success(), "control: {}", describe(&out));
    waits(true);
}
root_and_user!(escape_unix_tmux, escape_unix_tmux_unprivileged => tmux);

/// io_uring's socket and connect operations never pass through seccomp: the ring itself is
/// refused (ENOSYS, so runtimes fall back).
fn io_uring(who: Who) {
    let scene = Scene::new("esc-io-uring", who);
    let attempt = scene.attempt::<&str>("io-uring", &[]);
    every_launch_refused(&scene, &attempt, "ENOSYS", |_| {});
    assert_escaped("control", &output(&mut scene.control(&attempt)));
}
root_and_user!(escape_io_uring, escape_io_uring_unprivileged => io_uring);

/// A key in the user's keyring, added outside by a process of the same uid, removed on drop.
struct Key<'a> {
    scene: &'a Scene,
    name: String,
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        let _ignored = output(
            &mut self
                .scene
                .control(&self.scene.attempt("key-unlink", &[self.name.as_str()])),
        );
    }
}

/// The user's keyrings (Kerberos caches, stored passwords) can be neither read nor changed.
fn keyring(who: Who) {
    let scene = Scene::new("esc-keyring", who);
    let key = Key {
        name: format!("landwall-{}", tag(&scene)),
        scene: &scene,
    };
    let secret = format!("secret-{}", tag(&scene));
    let out = output(
        &mut scene.control(&scene.attempt("key-add", &[key.name.as_str(), secret.as_str()])),
    );
    assert_escaped("the key added outside", &out);
    let read = scene.attempt("key-read", &[key.name.as_str()]);
    every_launch_refused(&scene, &read, "EPERM", |_| {});
    let v = assert_escaped("control (read)", &output(&mut scene.control(&read)));
    assert!(v.contains(&secret), "{v}");
    let write = scene.attempt("key-add", &[key.name.as_str(), "changed"]);
    every_launch_refused(&scene, &write, "EPERM", |_| {});
    let v = assert_escaped(
        "after the walled writes",
        &output(&mut scene.control(&read)),
    );
    assert!(v.contains(&secret), "the key was changed: {v}");
    assert_escaped("control (write)", &output(&mut scene.control(&write)));
}
root_and_user!(escape_keyring, escape_keyring_unprivileged => keyring);

/// The kernel's Landlock ABI, as the product reads it.
fn landlock_abi() -> u32 {
    landwall::wall::kernel_abi().expect("Landlock ABI")
}

/// `[unix] sockets` permits one named socket by path (Landlock ABI 9); every other socket
/// stays refused. On an older kernel the same configuration refuses to launch (78): the
/// agent does not run.
fn unix_named_socket(who: Who) {
    let scene = Scene::new("esc-unix-named", who);
    let (named, named_path) = Server::new(&scene, false);
    let other_dir = scene.run().join("other");
    std::fs::create_dir_all(&other_dir).expect("mkdir");
    let other_path = other_dir.join("bus");
    let other = std::os::unix::net::UnixListener::bind(&other_path).expect("bind");
    other.set_nonblocking(true).expect("nonblocking");
    std::fs::set_permissions(&other_path, std::fs::Permissions::from_mode(0o777)).expect("chmod");
    let cfg = scene
        .sb
        .config(&format!("[unix]\nsockets = [{named_path:?}]\n"));
    let to_named = scene.attempt("unix-connect", &[&named_path]);
    let out = output(scene.walled(&to_named).env("LANDWALL_CONFIG", &cfg));
    if landlock_abi() < 9 {
        assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
        assert!(!scene.sb.ran_in(&scene.sb.wt()), "the agent ran");
        assert!(stderr(&out).contains("ABI 9"), "{}", describe(&out));
        assert_eq!(named.arrivals(), 0);
        return;
    }
    assert!(
        verdict(&out).starts_with("ESCAPED"),
        "the named socket must connect: {}",
        describe(&out)
    );
    assert_eq!(named.arrivals(), 1);
    let to_other = scene.attempt("unix-connect", &[&other_path]);
    let out = output(scene.walled(&to_other).env("LANDWALL_CONFIG", &cfg));
    assert_blocked("walled (another socket)", &out, Some("EACCES"));
    assert!(
        other.accept().is_err(),
        "the other server heard from the agent"
    );
    let out = output(&mut scene.control(&to_other));
    assert_escaped("control", &out);
}
root_and_user!(escape_unix_named_socket, escape_unix_named_socket_unprivileged => unix_named_socket);

/// The agent's own sockets in its worktree: reachable where Landlock refuses by path (ABI
/// 9 lets a domain reach what it made); on older kernels every new Unix socket is refused.
#[test]
fn unix_own_socket_in_the_worktree() {
    let scene = Scene::new("esc-unix-own", Who::User);
    let path = scene.sb.wt().join("own.sock");
    let out = output(&mut scene.walled(&scene.attempt("own-socket", &[&path])));
    if landlock_abi() >= 9 {
        assert!(
            verdict(&out).starts_with("ESCAPED"),
            "its own socket must work: {}",
            describe(&out)
        );
    } else {
        assert_blocked("walled (ABI < 9)", &out, Some("EACCES"));
    }
}

/// `[unix] allow_all` opens the door on purpose: every socket is reachable again.
#[test]
fn unix_allow_all_opens_the_door() {
    let scene = Scene::new("esc-unix-hatch", Who::User);
    let (server, path) = Server::new(&scene, false);
    let cfg = scene.sb.config("[unix]\nallow_all = true\n");
    let out = output(
        scene
            .walled(&scene.attempt("unix-connect", &[&path]))
            .env("LANDWALL_CONFIG", &cfg),
    );
    assert!(verdict(&out).starts_with("ESCAPED"), "{}", describe(&out));
    assert_eq!(server.arrivals(), 1);
}

// ---- Terminals.

/// Runs `cmd` with a new pty as controlling terminal; returns the launcher's output (its
/// verdict: was input injected into the terminal; stderr: `child: …` lines).
fn in_pty(scene: &Scene, cmd: &[OsString]) -> Output {
    let mut c = scene.cmd(scene.esc());
    c.arg("pty").arg("--").args(cmd);
    output(&mut c)
}

/// The verdict the child printed on its terminal, if it lived to print one.
fn child_line(out: &Output) -> Option<String> {
    stderr(out)
        .lines()
        .find(|l| l.starts_with("child: ESCAPED") || l.starts_with("child: BLOCKED"))
        .map(str::to_string)
}

/// TIOCSTI with `flag` ("", "--high", "--i386"): nothing may reach the terminal's input.
fn tiocsti(who: Who, flag: &str) {
    let scene = Scene::new("esc-tiocsti", who);
    let flags: &[&str] = if flag.is_empty() { &[] } else { &[flag] };
    let attempt = scene.attempt("tiocsti", flags);
    let out = in_pty(&scene, &scene.behind_shim(&attempt));
    assert_blocked("walled (terminal input)", &out, None);
    // The filter answers EPERM to the x86_64 numbers and to the i386 ones.
    let line = child_line(&out).unwrap_or_default();
    assert!(
        line.starts_with("child: BLOCKED") && line.contains("EPERM"),
        "{}",
        describe(&out)
    );
    let out = in_pty(&scene, &attempt);
    assert_escaped("control (terminal input)", &out);
}

#[test]
fn escape_tiocsti() {
    tiocsti(Who::Root, "")
}
#[test]
fn escape_tiocsti_unprivileged() {
    tiocsti(Who::User, "")
}
#[test]
fn escape_tiocsti_high_bits() {
    tiocsti(Who::Root, "--high")
}
#[test]
fn escape_tiocsti_high_bits_unprivileged() {
    tiocsti(Who::User, "--high")
}
/// The i386 entry (`int 0x80`) has its own system call numbers (ioctl is 54, not 16).
#[test]
fn escape_tiocsti_i386_entry() {
    tiocsti(Who::Root, "--i386")
}

/// An agent with no terminal (no controlling terminal and none on descriptors 0–2: CI jobs,
/// pipelines, drain jobs) cannot push input into the user's terminal either, here a pty that
/// is another session's controlling terminal, opened by its path: taking it over needs
/// CAP_SYS_ADMIN, which the wall has dropped, the kernel refuses TIOCSTI on a terminal that
/// is not the caller's, and the filter (on every launch) refuses TIOCSTI anyway. Root only:
/// the control, root with its capabilities, takes the terminal over and injects, while an
/// unprivileged control is refused by the kernel just the same.
#[test]
fn escape_tiocsti_without_a_terminal() {
    let scene = Scene::new("esc-tiocsti-away", Who::Root);
    let attempt = scene.attempt::<&str>("tiocsti-elsewhere", &[]);
    let report = scene.run().join("verdict");
    // Runs in the pty's session: names the pty, then runs CMD in a new session with no
    // terminal on 0–2 and the pty's name as its last argument, its verdict in `report`.
    let script = format!(
        "t=$(tty) && exec setsid -w \"$@\" \"$t\" </dev/null >'{}' 2>&1",
        report.display()
    );
    let run = |cmd: Vec<OsString>| -> (Output, String) {
        let mut argv = vec![os("sh"), os("-c"), os(&script), os("sh")];
        argv.extend(cmd);
        let out = in_pty(&scene, &argv);
        let verdict = read(&report);
        std::fs::remove_file(&report).expect("remove the verdict");
        (out, verdict)
    };
    let (out, walled) = run(scene.behind_shim(&attempt));
    assert_blocked("walled (terminal input)", &out, None);
    assert!(
        walled.starts_with("BLOCKED "),
        "walled: {walled}\n{}",
        describe(&out)
    );
    // The filter is on without a terminal too.
    assert!(
        walled.contains("(seccomp 2)"),
        "the walled run had no seccomp filter: {walled}"
    );
    eprintln!("walled: {}", walled.trim());
    let (out, control) = run(attempt);
    assert_escaped("control (terminal input)", &out);
    assert!(control.starts_with("ESCAPED "), "control: {control}");
}

/// A pty outside the wall, standing for another terminal of the user's (the test user's for
/// `Who::User`): the pair, and the slave's path.
fn outside_terminal(who: Who) -> (nix::pty::OpenptyResult, PathBuf) {
    use std::os::fd::AsRawFd;
    let pty = nix::pty::openpty(None, None).expect("openpty");
    let slave = std::fs::read_link(format!("/proc/self/fd/{}", pty.slave.as_raw_fd()))
        .expect("the slave's path");
    if who == Who::User {
        let (uid, gid) = test_user();
        std::os::unix::fs::fchown(&pty.slave, Some(uid), Some(gid)).expect("chown the pty");
    }
    (pty, slave)
}

/// The user's other terminals (issue 18): a pty outside the wall with input typed into it
/// and a program "busy" on it (the test holds its master). By default the agent's
/// `/dev/pts` is a private instance made for the launch, so the other terminal is not there
/// to open; with `terminals = "all"` it is, as without the wall (the controls).
fn other_terminal(who: Who) {
    let scene = Scene::new("esc-other-tty", who);
    let (pty, slave) = outside_terminal(who);
    let mut master = std::fs::File::from(pty.master);
    std::io::Write::write_all(&mut master, b"hunter2-typed-by-user\n").expect("type");
    let attempt = scene.attempt("other-tty", &[slave.as_os_str()]);
    let out = output(&mut scene.walled(&attempt));
    assert_blocked("walled (another terminal)", &out, None);
    // The explicit setting reaches them, like the control without the wall.
    let cfg = scene.sb.config("terminals = \"all\"\n");
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    let v = assert_escaped("walled with terminals = \"all\"", &out);
    assert!(v.contains("hunter2-typed-by-user"), "{v}");
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control (another terminal)", &out);
}

root_and_user!(escape_other_terminals, escape_other_terminals_unprivileged => other_terminal);

/// Where the private /dev/pts cannot be made (here a launch from inside another wall, which
/// may not mount; a kernel or security module that refuses namespaces is the same), the
/// launch leaves `/dev/pts` and `/dev/ptmx` out of its wall rather than grant the user's:
/// the outer launch (`terminals = "all"`) sees the other terminal, the inner one may not
/// open it.
fn other_terminal_without_a_namespace(who: Who) {
    let scene = Scene::new("esc-other-tty-nested", who);
    let (pty, slave) = outside_terminal(who);
    let inner = scene.sb.agents().join("nested");
    std::fs::create_dir_all(&inner).expect("mkdir");
    install(
        &landwall_e2e::landwall(),
        &inner.join("claude"),
        &["-m", "0755"],
    );
    let cfg = scene.sb.config("terminals = \"all\"\n");
    let attempt = scene.attempt("other-tty", &[slave.as_os_str()]);
    // Control: the outer launch alone reaches it.
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    assert_escaped("outer launch, terminals = \"all\"", &out);
    let mut nested = vec![os(inner.join("claude"))];
    nested.extend(attempt);
    let out = output(scene.walled(&nested).env("LANDWALL_CONFIG", &cfg));
    assert_blocked("inner launch, no private /dev/pts", &out, Some("EACCES"));
    drop(pty.master);
}
root_and_user!(escape_other_terminals_without_a_namespace, escape_other_terminals_without_a_namespace_unprivileged => other_terminal_without_a_namespace);

/// TIOCLINUX is only answered by a virtual console: the agent gets one as its controlling
/// terminal (root only: virtual consoles belong to root). Each test uses its own console.
fn tioclinux(high: bool, vt: &str) {
    if !Path::new(vt).exists() {
        eprintln!("skipped: {vt} does not exist (no virtual consoles on this machine)");
        return;
    }
    let scene = Scene::new("esc-tioclinux", Who::Root);
    let flags: &[&str] = if high { &["--high"] } else { &[] };
    let attempt = scene.attempt("tioclinux", flags);
    let on_vt = |cmd: Vec<OsString>| {
        let mut c = scene.cmd(scene.esc());
        c.args(["ctty", vt, "--stdin", "--"]).args(cmd);
        output(&mut c)
    };
    let out = on_vt(scene.behind_shim(&attempt));
    assert_blocked("walled", &out, Some("EPERM"));
    let out = on_vt(attempt);
    assert_escaped("control", &out);
}

#[test]
fn escape_tioclinux() {
    tioclinux(false, "/dev/tty62")
}
#[test]
fn escape_tioclinux_high_bits() {
    tioclinux(true, "/dev/tty63")
}

/// What the filter must not break: window size, raw mode, /dev/tty, /dev/null, a new pty.
fn terminal_ioctls(who: Who) {
    let scene = Scene::new("esc-ttyok", who);
    let attempt = scene.attempt::<&str>("tty-ioctls", &[]);
    let out = in_pty(&scene, &scene.behind_shim(&attempt));
    assert!(
        child_line(&out).is_some_and(|l| l.starts_with("child: ESCAPED")),
        "{}",
        describe(&out)
    );
}
root_and_user!(terminal_ioctls_still_work, terminal_ioctls_still_work_unprivileged => terminal_ioctls);

// ---- Mounts and roots.

fn mounted_at(dir: &Path) -> bool {
    let info = read(Path::new("/proc/self/mountinfo"));
    let needle = format!(" {} ", dir.display());
    info.lines().any(|l| l.contains(&needle))
}

#[test]
fn escape_mount_tmpfs() {
    let scene = Scene::new("esc-mount", Who::Root);
    let dir = scene.sb.wt().join("mnt");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("kept"), "x").expect("write");
    walled_then_control(
        &scene,
        &scene.attempt("mount", &[&dir]),
        Some("EPERM"),
        |_| {
            assert!(!mounted_at(&dir));
            assert!(dir.join("kept").exists());
        },
    );
    assert!(!mounted_at(&dir), "the control unmounts what it mounted");
}

fn userns_mount(who: Who) {
    let scene = Scene::new("esc-usermount", who);
    let dir = scene.sb.wt().join("mnt");
    std::fs::create_dir_all(&dir).expect("mkdir");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&dir, uid, gid);
    }
    walled_then_control(
        &scene,
        &scene.attempt("userns-mount", &[&dir]),
        Some("EPERM"),
        |_| assert!(!mounted_at(&dir)),
    );
}
root_and_user!(escape_userns_mount, escape_userns_mount_unprivileged => userns_mount);

/// chroot into a jail in the worktree, walk `..` out of it, chroot to the real root, read.
fn chroot_walk(who: Who) {
    let scene = Scene::new("esc-chroot", who);
    let jail = scene.sb.wt().join("jail");
    std::fs::create_dir_all(jail.join("etc")).expect("mkdir jail");
    std::fs::write(jail.join("etc/passwd"), "root::0:0::/:/bin/sh\n").expect("crafted passwd");
    let attempt = scene.attempt(
        "chroot-walk",
        &[
            jail.as_os_str(),
            scene.sb.outside().join("secret").as_os_str(),
        ],
    );
    walled_then_control(&scene, &attempt, Some("EACCES"), |_| {});
}
root_and_user!(escape_chroot_walk, escape_chroot_walk_unprivileged => chroot_walk);

// ---- Privilege.

/// A setuid-root copy of `lw-escape` reports whether it holds privilege. Unprivileged, it
/// would run with euid 0; root would regain every capability.
fn setuid_program(who: Who) {
    let scene = Scene::new("esc-setuid", who);
    let suid = scene.sb.agents().join("lw-escape-suid");
    install(
        &scene.esc(),
        &suid,
        &["-o", "root", "-g", "root", "-m", "4755"],
    );
    assert_eq!(
        std::fs::metadata(&suid).expect("stat").permissions().mode() & 0o7777,
        0o4755
    );
    walled_then_control(
        &scene,
        &scene.attempt("run", &[os(&suid), os("ids")]),
        Some("no privilege"),
        |_| {},
    );
}
root_and_user!(escape_setuid_program, escape_setuid_program_unprivileged => setuid_program);

/// A copy of `lw-escape` with `cap_dac_read_search+ep` tries to read a file in the worktree
/// that only that capability opens (owned by another user, mode 0600).
fn file_caps(who: Who) {
    if Command::new("setcap").arg("-h").output().is_err() {
        let apt = Command::new("apt-get")
            .args(["install", "-y", "-q", "libcap2-bin"])
            .output()
            .expect("apt-get");
        assert!(apt.status.success(), "install setcap: {}", stderr(&apt));
    }
    let scene = Scene::new("esc-filecaps", who);
    let capped = scene.sb.agents().join("lw-escape-caps");
    install(&scene.esc(), &capped, &["-m", "0755"]);
    let out = Command::new("setcap")
        .arg("cap_dac_read_search+ep")
        .arg(&capped)
        .output()
        .expect("setcap");
    assert!(out.status.success(), "setcap: {}", stderr(&out));
    let private = scene.sb.wt().join("private");
    std::fs::write(&private, "someone else's\n").expect("write");
    std::os::unix::fs::chown(&private, Some(65534), Some(65534)).expect("chown nobody");
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    // Root, whose bounding set is empty behind the shim, cannot even exec it (EPERM: the
    // file's effective bit asks for capabilities it cannot get); a user runs it without them.
    walled_then_control(
        &scene,
        &scene.attempt("run", &[os(&capped), os("read"), os(&private)]),
        None,
        |_| assert_eq!(read(&private), "someone else's\n"),
    );
}
root_and_user!(escape_file_caps, escape_file_caps_unprivileged => file_caps);

// ---- The environment.

/// Builds `liblwpreload.so` in the agents' directory (readable by the agent, so only the
/// environment filter can keep it out); its constructor appends the loading program's path to
/// `mark`.
fn preload_library(scene: &Scene, mark: &Path) -> Option<PathBuf> {
    let src = scene.sb.root.join("lwpreload.c");
    let lib = scene.sb.agents().join("liblwpreload.so");
    std::fs::write(
        &src,
        format!(
            "#include <stdio.h>\n#include <unistd.h>\n\
             __attribute__((constructor)) static void lw(void) {{\n\
               char exe[4096]; ssize_t n = readlink(\"/proc/self/exe\", exe, sizeof exe - 1);\n\
               exe[n < 0 ? 0 : n] = 0;\n\
               FILE *f = fopen(\"{}\", \"a\"); if (f) {{ fprintf(f, \"%s\\n\", exe); fclose(f); }}\n\
             }}\n",
            mark.display()
        ),
    )
    .expect("write preload source");
    match Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&lib)
        .arg(&src)
        .output()
    {
        Ok(out) if out.status.success() => Some(lib),
        Ok(out) => panic!("cc failed: {}", stderr(&out)),
        Err(e) => {
            eprintln!("no C compiler ({e}): checking the variables only");
            None
        }
    }
}

#[test]
fn escape_ld_preload() {
    let scene = Scene::new("esc-preload", Who::Root);
    let mark = scene.sb.wt().join("preload-marker");
    let lib = preload_library(&scene, &mark);
    let preload = lib
        .as_deref()
        .map(|l| l.as_os_str().to_os_string())
        .unwrap_or_else(|| os("/nonexistent/liblwpreload.so"));
    let attempt = scene.attempt::<&str>("env", &[]);
    let with_env = |mut c: Command| {
        c.env("LD_PRELOAD", &preload)
            .env("LD_LIBRARY_PATH", scene.sb.agents())
            .env("LD_AUDIT", &preload)
            .env("GLIBC_TUNABLES", "glibc.malloc.check=3");
        c
    };
    let out = output(&mut with_env(scene.walled(&attempt)));
    assert_blocked("walled", &out, None);
    // The shim itself is started with the caller's environment, before the wall; nothing
    // behind it may load the library.
    let shim_exe = std::fs::canonicalize(scene.shim()).expect("resolve shim");
    let loaded = std::fs::read_to_string(&mark).unwrap_or_default();
    for exe in loaded.lines() {
        assert_eq!(
            Path::new(exe),
            shim_exe,
            "the preload library ran in {exe} behind the wall"
        );
    }
    // Outside the wall it loads into the agent (here through the stand-in agent script).
    let mut c = scene.cmd(scene.sb.agents().join("claude-real"));
    c.args(&attempt);
    let out = output(&mut with_env(c));
    assert_escaped("control", &out);
    if lib.is_some() {
        assert!(
            verdict(&out).contains("lwpreload library mapped"),
            "{}",
            describe(&out)
        );
    }
}

#[test]
fn escape_bash_env() {
    let scene = Scene::new("esc-bashenv", Who::Root);
    let mark = scene.sb.wt().join("bashenv-marker");
    let script = scene.sb.agents().join("bashenv.sh");
    std::fs::write(&script, format!("echo ran >> '{}'\n", mark.display())).expect("write");
    let mut attempt = vec![os("bash"), os("-c")];
    attempt.push(os(format!("exec '{}' env", scene.esc().display())));
    let with_env = |mut c: Command| {
        c.env("BASH_ENV", &script)
            .env("ENV", &script)
            .env("BASH_FUNC_echo%%", "() { builtin echo pwned; }");
        c
    };
    let out = output(&mut with_env(scene.walled(&attempt)));
    assert_blocked("walled", &out, None);
    assert!(!mark.exists(), "BASH_ENV's script ran behind the wall");
    let out = output(&mut with_env(scene.control(&attempt)));
    assert_escaped("control", &out);
    assert!(mark.exists(), "the control's bash did not run BASH_ENV");
}

// ---- Git metadata of a linked worktree.

/// A main repository and a linked worktree of it; returns (main, linked).
fn linked_worktree(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let main = sb.root.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git(&main, &["init", "-q"]);
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git(&main, &["add", "README"]);
    sb.git(&main, &["commit", "-qm", "initial"]);
    let linked = sb.root.join("linked");
    sb.git(
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

/// Runs `attempt` in the linked worktree: blocked behind the shim, escaping outside.
fn in_linked(scene: &Scene, linked: &Path, attempt: &[OsString], unchanged: impl FnOnce()) {
    let out = output(scene.walled(attempt).current_dir(linked));
    assert!(scene.sb.ran_in(linked), "{}", describe(&out));
    assert_blocked("walled", &out, Some("EACCES"));
    unchanged();
    let out = output(scene.control(attempt).current_dir(linked));
    assert_escaped("control", &out);
}

#[test]
fn escape_git_hook_in_linked_worktree() {
    let scene = Scene::new("esc-githook", Who::Root);
    let (main, linked) = linked_worktree(&scene.sb);
    let hook = main.join(".git/hooks/pre-commit");
    in_linked(&scene, &linked, &scene.attempt("write", &[&hook]), || {
        assert!(!hook.exists(), "a hook was planted")
    });
}

#[test]
fn escape_git_config_in_linked_worktree() {
    let scene = Scene::new("esc-gitconfig", Who::Root);
    let (main, linked) = linked_worktree(&scene.sb);
    let config = main.join(".git/config");
    let before = read(&config);
    in_linked(&scene, &linked, &scene.attempt("write", &[&config]), || {
        assert_eq!(read(&config), before, "the repository's config changed")
    });
}

#[test]
fn escape_git_info_in_linked_worktree() {
    let scene = Scene::new("esc-gitinfo", Who::Root);
    let (main, linked) = linked_worktree(&scene.sb);
    let attributes = main.join(".git/info/attributes");
    in_linked(
        &scene,
        &linked,
        &scene.attempt("write", &[&attributes]),
        || assert!(!attributes.exists()),
    );
}

// ---- Strict home.

fn bashrc_strict_home(who: Who) {
    let scene = Scene::new("esc-bashrc", who);
    let cfg = scene.sb.config("home = \"strict\"\n");
    let bashrc = scene.sb.home().join(".bashrc");
    std::fs::write(&bashrc, "# the user's bashrc\n").expect("write");
    std::fs::create_dir_all(scene.sb.home().join(".claude")).expect("mkdir");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&scene.sb.home(), uid, gid);
    }
    let attempt = scene.attempt("write", &[&bashrc]);
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    assert_blocked("walled", &out, Some("EACCES"));
    assert_eq!(read(&bashrc), "# the user's bashrc\n");
    // The agent's own state stays writable.
    let state = scene.sb.home().join(".claude/state");
    let out = output(
        scene
            .walled(&scene.attempt("write", &[&state]))
            .env("LANDWALL_CONFIG", &cfg),
    );
    assert!(
        verdict(&out).starts_with("ESCAPED"),
        "~/.claude must stay writable: {}",
        describe(&out)
    );
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_bashrc_strict_home, escape_bashrc_strict_home_unprivileged => bashrc_strict_home);

// ---- Network by port.

/// Two loopback listeners; the configuration lists the first.
struct Ports {
    listed: std::net::TcpListener,
    unlisted: std::net::TcpListener,
}

impl Ports {
    fn new() -> Ports {
        let bind = || {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
            l.set_nonblocking(true).expect("nonblocking");
            l
        };
        Ports {
            listed: bind(),
            unlisted: bind(),
        }
    }
    fn addr(l: &std::net::TcpListener) -> String {
        l.local_addr().expect("addr").to_string()
    }
    fn config(&self, scene: &Scene) -> PathBuf {
        let port = self.listed.local_addr().expect("addr").port();
        scene
            .sb
            .config(&format!("[network]\nconnect_tcp = [{port}]\n"))
    }
    fn assert_no_connection(l: &std::net::TcpListener) {
        let e = l.accept().expect_err("a connection arrived");
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
}

#[test]
fn escape_tcp_unlisted_port() {
    let scene = Scene::new("esc-tcp", Who::Root);
    let ports = Ports::new();
    let cfg = ports.config(&scene);
    let to = Ports::addr(&ports.unlisted);
    let attempt = scene.attempt("connect", &[to.as_str()]);
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    assert_blocked("walled", &out, Some("EACCES"));
    Ports::assert_no_connection(&ports.unlisted);
    // The listed port still connects.
    let listed = Ports::addr(&ports.listed);
    let out = output(
        scene
            .walled(&scene.attempt("connect", &[listed.as_str()]))
            .env("LANDWALL_CONFIG", &cfg),
    );
    assert!(
        verdict(&out).starts_with("ESCAPED"),
        "the listed port must connect: {}",
        describe(&out)
    );
    ports
        .listed
        .accept()
        .expect("the listed port got its connection");
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}

/// Landlock's TCP rules do not see MPTCP sockets: with ports configured, the seccomp filter
/// must refuse to create them.
#[test]
fn escape_mptcp() {
    let scene = Scene::new("esc-mptcp", Who::Root);
    let ports = Ports::new();
    let cfg = ports.config(&scene);
    let to = Ports::addr(&ports.unlisted);
    let attempt = scene.attempt("mptcp", &[to.as_str()]);
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    let v = assert_blocked("walled", &out, Some("EPROTONOSUPPORT"));
    assert!(v.contains("socket("), "refused at socket(): {v}");
    Ports::assert_no_connection(&ports.unlisted);
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control (needs net.mptcp.enabled = 1)", &out);
}

// ---- Devices.

/// Whether the kernel log holds a line with `nonce` (read as root, without blocking).
fn kernel_log_contains(nonce: &str) -> bool {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
        .expect("open /dev/kmsg");
    let mut buf = vec![0u8; 8192];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                if String::from_utf8_lossy(&buf[..n]).contains(nonce) {
                    return true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            // A record was overwritten while reading: go on with the next.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => {}
            Err(e) => panic!("read /dev/kmsg: {e}"),
        }
    }
}

/// Root writes into the kernel log through /dev/kmsg (it owns the device; writing needs no
/// capability).
#[test]
fn escape_dev_kmsg() {
    let scene = Scene::new("esc-kmsg", Who::Root);
    let walled_nonce = format!("walled-{}", tag(&scene));
    let out = output(&mut scene.walled(&scene.attempt("kmsg", &[walled_nonce.as_str()])));
    assert_blocked("walled", &out, Some("EACCES"));
    assert!(
        !kernel_log_contains(&walled_nonce),
        "the line reached the kernel log"
    );
    let control_nonce = format!("control-{}", tag(&scene));
    let out = output(&mut scene.control(&scene.attempt("kmsg", &[control_nonce.as_str()])));
    assert_escaped("control", &out);
    assert!(kernel_log_contains(&control_nonce));
}

#[test]
fn escape_dev_loop_control() {
    let scene = Scene::new("esc-loopctl", Who::Root);
    walled_then_control(
        &scene,
        &scene.attempt("open-dev", &["/dev/loop-control", "rw"]),
        Some("EACCES"),
        |_| {},
    );
}

/// The text on the virtual consoles' screens.
#[test]
fn escape_dev_vcs() {
    if !Path::new("/dev/vcs").exists() {
        eprintln!("skipped: no /dev/vcs on this machine");
        return;
    }
    let scene = Scene::new("esc-vcs", Who::Root);
    walled_then_control(
        &scene,
        &scene.attempt("open-dev", &["/dev/vcs", "r"]),
        Some("EACCES"),
        |_| {},
    );
}

/// Another terminal than the agent's own: a virtual console and the system console.
#[test]
fn escape_dev_other_consoles() {
    let scene = Scene::new("esc-consoles", Who::Root);
    let mut tried = 0;
    for dev in ["/dev/tty1", "/dev/console", "/dev/ttyS0"] {
        if !Path::new(dev).exists() {
            continue;
        }
        let attempt = scene.attempt("open-dev", &[dev, "rw"]);
        let out = output(&mut scene.walled(&attempt));
        assert_blocked(&format!("walled {dev}"), &out, Some("EACCES"));
        let out = output(&mut scene.control(&attempt));
        assert_escaped(&format!("control {dev}"), &out);
        tried += 1;
    }
    assert!(
        tried > 0,
        "no console device here: the test would prove nothing"
    );
}

/// Raw block devices: every one that root can open for reading outside the wall (some
/// machines refuse even root on the disk that holds `/`) must be refused inside.
#[test]
fn escape_block_devices() {
    use std::os::unix::fs::FileTypeExt;
    let scene = Scene::new("esc-blockdev", Who::Root);
    let mut tried = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/block")
        .expect("list /sys/class/block")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    for name in names {
        let dev = Path::new("/dev").join(&name);
        let is_block = std::fs::metadata(&dev).is_ok_and(|m| m.file_type().is_block_device());
        if !is_block {
            continue;
        }
        let attempt = scene.attempt("open-dev", &[dev.as_os_str(), OsStr::new("r")]);
        if !verdict(&output(&mut scene.control(&attempt))).starts_with("ESCAPED") {
            continue;
        }
        let out = output(&mut scene.walled(&attempt));
        assert_blocked(&format!("walled {}", dev.display()), &out, Some("EACCES"));
        tried.push(dev);
        if tried.len() == 4 {
            break;
        }
    }
    assert!(
        !tried.is_empty(),
        "no block device that root can open here: the test would prove nothing"
    );
}

// ---- The next launch's wall: nothing the agent writes widens it (issue 13).
//
// Each test plants as the agent behind the shim (a first launch), then runs the attempt in
// a second launch, which must refuse before the agent starts (status 78, no marker) and
// leave the target unchanged; the control runs the attempt outside the wall as the same
// user and reaches the target.

/// A main checkout and a linked worktree of it at `linked_rel` (relative to the sandbox),
/// owned by whoever runs the scene. Returns (main, linked).
fn scene_linked(scene: &Scene, linked_rel: &str) -> (PathBuf, PathBuf) {
    let sb = &scene.sb;
    let main = sb.root.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    sb.git_root(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "main\n").expect("write");
    sb.git_root(&main, &["add", "README"]);
    sb.git_root(&main, &["commit", "-qm", "initial"]);
    let linked = sb.root.join(linked_rel);
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
    if scene.who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&main, uid, gid);
        chown_tree(&linked, uid, gid);
    }
    (main, linked)
}

/// What an earlier launch could have left: `script` under `sh -c` in `dir`, run outside the
/// wall as the same user. A walled launch's own leavings in protected places are set aside
/// when it exits (its end is judged), so this stands for what the sweep did not see (its
/// watcher killed below ABI 6, `home = "open"` with no record, or what was there before
/// landwall): the next launch, under the default, must not trust it.
fn plant(scene: &Scene, dir: &Path, script: &str) {
    let out = output(
        scene
            .control(&[os("/bin/sh"), os("-c"), os(script)])
            .current_dir(dir),
    );
    assert!(out.status.success(), "planting: {}", describe(&out));
}

/// The next launch in `dir` must refuse before the agent starts, with status 78 and one
/// line naming what it refused.
fn assert_next_launch_refused(scene: &Scene, dir: &Path, attempt: &[OsString]) -> String {
    let out = output(scene.walled(attempt).current_dir(dir));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(
        !scene.sb.ran_in(dir),
        "the agent started: {}",
        describe(&out)
    );
    assert!(stdout(&out).is_empty(), "{}", describe(&out));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    eprintln!("refused: {err}");
    err
}

/// The next launch in `dir` is refused, with `needle` in its one line, `target` is not
/// there, and the attempt reaches it outside the wall.
fn refused_then_control(
    scene: &Scene,
    dir: &Path,
    attempt: &[OsString],
    needle: &str,
    target: &Path,
) {
    let err = assert_next_launch_refused(scene, dir, attempt);
    assert!(err.contains(needle), "{err}");
    assert!(!target.exists(), "{} was written", target.display());
    let out = output(scene.control(attempt).current_dir(dir));
    assert_escaped("control", &out);
}

/// Plants `gitdir: TARGET` (as the agent) in the linked worktree's `.git`; the next launch
/// must not grant TARGET: a write in it is refused, and outside the wall it works.
fn gitdir_elsewhere(who: Who, target: impl FnOnce(&Scene) -> PathBuf, cfg: Option<&str>) {
    let scene = Scene::new("esc-gitdir", who);
    let target = &target(&scene);
    let (_, linked) = scene_linked(&scene, "linked");
    let cfg = cfg.map(|c| scene.sb.config(c));
    let with_cfg = |mut c: Command| {
        if let Some(cfg) = &cfg {
            c.env("LANDWALL_CONFIG", cfg);
        }
        c
    };
    let planted = target.join(format!("planted-{}", tag(&scene)));
    // Planted as an earlier launch could have left it where its sweep did not run (the
    // `.git` file is protected, and a rewrite of it set aside at the exit, otherwise).
    plant(
        &scene,
        &linked,
        &format!("printf 'gitdir: %s\\n' '{}' > .git", target.display()),
    );
    assert_eq!(
        read(&linked.join(".git")),
        format!("gitdir: {}\n", target.display())
    );
    let attempt = scene.attempt("write", &[&planted]);
    let out = output(with_cfg(scene.walled(&attempt)).current_dir(&linked));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!scene.sb.ran_in(&linked), "{}", describe(&out));
    assert!(stderr(&out).contains(".git"), "{}", describe(&out));
    assert!(!planted.exists(), "{} was written", planted.display());
    // `landwall check` says so too, rather than "read-write".
    let mut check = scene.cmd(landwall_e2e::landwall());
    check.arg("check").arg(&planted).current_dir(&linked);
    let out = output(&mut with_cfg(check));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    let out = output(scene.control(&attempt).current_dir(&linked));
    assert_escaped("control", &out);
    std::fs::remove_file(&planted).expect("remove the control's file");
}

#[test]
fn escape_gitdir_file_names_root() {
    gitdir_elsewhere(Who::Root, |_| PathBuf::from("/root"), None);
}

#[test]
fn escape_gitdir_file_names_etc() {
    gitdir_elsewhere(Who::Root, |_| PathBuf::from("/etc"), None);
}

#[test]
fn escape_gitdir_file_names_outside() {
    gitdir_elsewhere(Who::Root, |s| s.sb.outside(), None);
}

#[test]
fn escape_gitdir_file_names_outside_unprivileged() {
    gitdir_elsewhere(Who::User, |s| s.sb.outside(), None);
}

#[test]
fn escape_gitdir_file_names_home_unprivileged() {
    // Strict home: $HOME is read-only, so a grant of it as a git dir would widen the wall.
    gitdir_elsewhere(Who::User, |s| s.sb.home(), Some("home = \"strict\"\n"));
}

/// The stealth form: the first line names a link into the target, git's real path follows.
fn gitdir_stealth(who: Who) {
    let scene = Scene::new("esc-stealth", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let target = scene.sb.outside();
    let real = main.join(".git/worktrees/linked");
    plant(
        &scene,
        &linked,
        &format!(
            "ln -s '{}' lnk && printf 'gitdir: lnk\\ngitdir: %s\\n' '{}' > .git",
            target.display(),
            real.display()
        ),
    );
    let planted = target.join("planted");
    let attempt = scene.attempt("write", &[&planted]);
    refused_then_control(&scene, &linked, &attempt, "more than one line", &planted);
}
root_and_user!(escape_gitdir_stealth_second_line, escape_gitdir_stealth_second_line_unprivileged => gitdir_stealth);

/// `commondir` in the linked worktree's own (writable) git dir, pointed elsewhere.
fn commondir_elsewhere(who: Who) {
    let scene = Scene::new("esc-commondir", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let target = scene.sb.outside();
    let commondir = main.join(".git/worktrees/linked/commondir");
    plant(
        &scene,
        &linked,
        &format!(
            "printf '%s\\n' '{}' > '{}'",
            target.display(),
            commondir.display()
        ),
    );
    assert_eq!(read(&commondir), format!("{}\n", target.display()));
    let planted = target.join("refs");
    let attempt = scene.attempt("write", &[&planted]);
    refused_then_control(&scene, &linked, &attempt, "commondir", &planted);
}
root_and_user!(escape_commondir_elsewhere, escape_commondir_elsewhere_unprivileged => commondir_elsewhere);

/// A linked worktree nested in the main checkout (Claude Code's `.claude/worktrees/NAME`)
/// deletes its `.git`: the next launch must not climb to the checkout and grant its hooks.
fn nested_lost_gitfile(who: Who) {
    // Its `.git` alone; then, as a review found, its entry's back link too (the entry is in
    // its own, writable, git dir), or the back link pointed elsewhere.
    for also in [
        "",
        "rm \"$G/gitdir\"",
        "echo /elsewhere/.git > \"$G/gitdir\"",
    ] {
        let scene = Scene::new("esc-nested", who);
        let (main, nested) = scene_linked(&scene, "main/.claude/worktrees/n");
        plant(
            &scene,
            &nested,
            &format!("set -e; G=$(sed 's/^gitdir: //' .git); rm .git; {also}"),
        );
        let hook = main.join(".git/hooks/post-checkout");
        let attempt = scene.attempt("write", &[&hook]);
        refused_then_control(&scene, &nested, &attempt, "git worktree repair", &hook);
    }
}
root_and_user!(escape_nested_worktree_lost_git_file, escape_nested_worktree_lost_git_file_unprivileged => nested_lost_gitfile);

/// Runs `c` and fails the test if it has not exited within `secs` (then kills it). A hang on
/// a FIFO lasts forever; `secs` only has to outlast a slow machine (a loaded one under qemu).
fn within_secs(mut c: Command, secs: u64) -> Output {
    let child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _sent = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(std::time::Duration::from_secs(secs)) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _killed = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("still running after {secs} s: a FIFO .git hangs it");
        }
    }
}

/// A FIFO named `.git`: the next launch, `policy`, `doctor` and `check` return at once.
fn fifo_gitfile(who: Who) {
    let scene = Scene::new("esc-fifo", who);
    let (_, linked) = scene_linked(&scene, "linked");
    plant(&scene, &linked, "rm .git && mkfifo .git");
    let attempt = scene.attempt("list", &[&scene.sb.outside()]);
    let mut next = scene.walled(&attempt);
    next.current_dir(&linked);
    let out = within_secs(next, 10);
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!scene.sb.ran_in(&linked));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        describe(&out)
    );
    for args in [&["policy"][..], &["check", "x"], &["doctor"]] {
        let mut c = scene.cmd(landwall_e2e::landwall());
        c.args(args).current_dir(&linked);
        let out = within_secs(c, 10);
        assert!(
            stdout(&out).contains("not a regular file")
                || stderr(&out).contains("not a regular file"),
            "{args:?}: {}",
            describe(&out)
        );
    }
    // The control: a plain reader of `.git` blocks on the FIFO.
    let mut control = scene.cmd("timeout");
    control.args(["1", "cat", ".git"]).current_dir(&linked);
    assert_eq!(
        output(&mut control).status.code(),
        Some(124),
        "cat did not block"
    );
}
root_and_user!(escape_fifo_git_file, escape_fifo_git_file_unprivileged => fifo_gitfile);

// ---- The main repository's objects, from a linked worktree.

/// The path of the loose object holding `README` at HEAD in `main`.
fn readme_object(scene: &Scene, main: &Path) -> (String, PathBuf) {
    let id = stdout(&scene.sb.git_root(main, &["rev-parse", "HEAD:README"]))
        .trim()
        .to_string();
    let path = main.join(".git/objects").join(&id[..2]).join(&id[2..]);
    assert!(path.is_file(), "{} is not loose", path.display());
    (id, path)
}

/// Polls until the watcher has emptied the linked worktree's quarantine of final objects.
fn wait_for_quarantine(main: &Path, id: &str) {
    let q = main
        .join(".git/worktrees")
        .join(id)
        .join("landwall-objects");
    let pending = || {
        let Ok(dirs) = std::fs::read_dir(&q) else {
            return false;
        };
        dirs.flatten().any(|d| {
            let name = d.file_name().to_string_lossy().into_owned();
            let path = d.path();
            (name.len() == 2 && std::fs::read_dir(&path).is_ok_and(|mut e| e.next().is_some()))
                || (name == "pack"
                    && std::fs::read_dir(&path).is_ok_and(|e| {
                        e.flatten()
                            .any(|p| p.file_name().to_string_lossy().ends_with(".pack"))
                    }))
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while pending() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} was not emptied",
            q.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn object_swap(who: Who) {
    let scene = Scene::new("esc-objswap", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let (id, path) = readme_object(&scene, &main);
    let before = std::fs::read(&path).expect("read object");
    // Inside the wall the real store is seen read-only at `landwall-base`; at its own path
    // the agent sees its quarantine, where the object is not.
    let base = main
        .join(".git/worktrees/linked/landwall-base")
        .join(&id[..2])
        .join(&id[2..]);
    for (inside, errno) in [(&base, "EROFS"), (&path, "ENOENT")] {
        let out = output(
            scene
                .walled(&scene.attempt("overwrite", &[inside]))
                .current_dir(&linked),
        );
        assert!(scene.sb.ran_in(&linked), "{}", describe(&out));
        assert_blocked("walled", &out, Some(errno));
        assert_eq!(std::fs::read(&path).expect("read object"), before);
    }
    let show = scene.sb.git_root(&main, &["cat-file", "-p", &id]);
    assert_eq!(stdout(&show), "main\n");
    let out = output(
        scene
            .control(&scene.attempt("overwrite", &[&path]))
            .current_dir(&linked),
    );
    assert_escaped("control", &out);
}
root_and_user!(escape_object_swap_from_linked_worktree, escape_object_swap_from_linked_worktree_unprivileged => object_swap);

/// A forged object in the quarantine (valid zlib, the name of README's blob, other
/// content) is never moved into the repository; the control puts it there by hand and
/// the poisoned content is what git then serves.
fn quarantine_forgery(who: Who) {
    let scene = Scene::new("esc-objforge", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let (id, path) = readme_object(&scene, &main);
    let before = std::fs::read(&path).expect("read object");
    let q = main.join(".git/worktrees/linked/landwall-objects");
    let forged = q.join(&id[..2]).join(&id[2..]);
    // Inside the wall: a real object of other content, renamed to README's blob's name.
    plant(
        &scene,
        &linked,
        &format!(
            "set -e; f=$(mktemp -d); echo poisoned > \"$f/x\"; git init -q \"$f/r\"; \
             evil=$(git -C \"$f/r\" hash-object -w \"$f/x\"); \
             mkdir -p '{d}'; cp \"$f/r/.git/objects/$(echo $evil | cut -c1-2)/$(echo $evil | cut -c3-)\" '{forged}'",
            d = forged.parent().expect("dir").display(),
            forged = forged.display()
        ),
    );
    assert!(forged.exists(), "the agent could not write its quarantine");
    let forgery = std::fs::read(&forged).expect("read the forgery");
    // Any launch's watcher, and the next one's, looks at it: a second launch to be sure.
    let out = output(scene.walled(&[os("/bin/true")]).current_dir(&linked));
    assert!(out.status.success(), "{}", describe(&out));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(std::fs::read(&path).expect("read object"), before);
    let show = scene.sb.git_root(&main, &["cat-file", "-p", &id]);
    assert_eq!(stdout(&show), "main\n");
    scene
        .sb
        .git_root(&main, &["fsck", "--strict", "--no-progress"]);
    // The control: the same bytes put in place outside the wall poison git's answer.
    std::fs::remove_file(&path).expect("rm");
    std::fs::write(&path, &forgery).expect("write");
    let show = scene.sb.git_root(&main, &["cat-file", "-p", &id]);
    assert_eq!(
        stdout(&show),
        "poisoned\n",
        "the control's forgery did not take"
    );
}
root_and_user!(escape_forged_object_in_quarantine, escape_forged_object_in_quarantine_unprivileged => quarantine_forgery);

/// Commits from inside reach the repository (after the watcher), and a fresh worktree made
/// outside checks out what the agent committed.
fn commits_reach_main(who: Who) {
    let scene = Scene::new("esc-commits", who);
    let (main, linked) = scene_linked(&scene, "linked");
    plant(
        &scene,
        &linked,
        "set -e; export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@x.invalid GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@x.invalid; \
         echo agent > work.txt; git add work.txt; git commit -qm 'agent commit'",
    );
    wait_for_quarantine(&main, "linked");
    let log = scene.sb.git_root(&main, &["log", "--format=%s", "task"]);
    assert_eq!(stdout(&log), "agent commit\ninitial\n");
    scene
        .sb
        .git_root(&main, &["fsck", "--strict", "--no-progress"]);
    let fresh = scene.sb.root.join("fresh");
    scene.sb.git_root(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "--detach",
            fresh.to_str().expect("utf8"),
            "task",
        ],
    );
    assert_eq!(read(&fresh.join("work.txt")), "agent\n");
    assert_eq!(read(&fresh.join("README")), "main\n");
}
root_and_user!(linked_worktree_commits_reach_the_repository, linked_worktree_commits_reach_the_repository_unprivileged => commits_reach_main);

/// Under the writable home, the agent writes the per-user configuration to grant itself a
/// directory outside at its next launch.
fn user_config_widens(who: Who) {
    // As is, and (found by review) beside a key that narrows the wall so that the file
    // itself is out of the agent's reach at the next launch: home = "strict", or a deny of
    // the file's own directory.
    for extra in ["", "home = \"strict\"\n", "deny = [\"DIR\"]\n"] {
        user_config_widens_with(who, extra);
    }
}

fn user_config_widens_with(who: Who, extra: &str) {
    let scene = Scene::new("esc-usercfg", who);
    let target = scene.sb.outside().join(format!("planted-{}", tag(&scene)));
    let dir = scene.sb.home().join(".config/landwall");
    // What the agent writes, prepared where it can read it (the real agent's directory).
    let text = format!(
        "{}writable = [\"{}\"]\n",
        extra.replace("DIR", &dir.display().to_string()),
        scene.sb.outside().display()
    );
    let draft = scene.sb.agents().join("usercfg.toml");
    std::fs::write(&draft, text).expect("write");
    std::fs::set_permissions(&draft, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    plant(
        &scene,
        &scene.sb.wt(),
        &format!(
            "mkdir -p '{d}' && cp '{draft}' '{d}/landwall.toml'",
            d = dir.display(),
            draft = draft.display()
        ),
    );
    let attempt = scene.attempt("write", &[&target]);
    let err = assert_next_launch_refused(&scene, &scene.sb.wt(), &attempt);
    assert!(err.contains("per-user configuration"), "{err}");
    assert!(!target.exists());
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_user_config_widens_next_launch, escape_user_config_widens_next_launch_unprivileged => user_config_widens);

/// The agent writes `[unix] allow_all = true` into its per-user configuration to reach
/// the Unix sockets outside at its next launch: refused (78), the server hears nothing.
fn user_config_opens_unix(who: Who) {
    let scene = Scene::new("esc-usercfg-unix", who);
    let (server, path) = Server::new(&scene, false);
    let dir = scene.sb.home().join(".config/landwall");
    plant(
        &scene,
        &scene.sb.wt(),
        &format!(
            "mkdir -p '{d}' && printf '[unix]\\nallow_all = true\\n' > '{d}/landwall.toml'",
            d = dir.display()
        ),
    );
    assert!(read(&dir.join("landwall.toml")).contains("allow_all = true"));
    let attempt = scene.attempt("unix-connect", &[&path]);
    let err = assert_next_launch_refused(&scene, &scene.sb.wt(), &attempt);
    assert!(err.contains("per-user configuration"), "{err}");
    assert_eq!(server.arrivals(), 0, "the server heard from the agent");
    assert_escaped("control", &output(&mut scene.control(&attempt)));
    assert_eq!(server.arrivals(), 1);
}
root_and_user!(escape_user_config_opens_unix_sockets, escape_user_config_opens_unix_sockets_unprivileged => user_config_opens_unix);

/// Found by review: the agent writes a widening configuration in its worktree and points
/// the home's `~/.config/landwall` at it with a symlink. The next launch in another
/// worktree, which does not grant the first one, must still see that the path goes through
/// a link the agent could make: refused (78), nothing written, no socket reached.
fn user_config_through_a_link(who: Who) {
    let scene = Scene::new("esc-usercfg-link", who);
    let (server, socket) = Server::new(&scene, false);
    let other = scene.sb.root.join("wt2");
    std::fs::create_dir_all(&other).expect("mkdir");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&other, uid, gid);
    }
    let target = scene.sb.outside().join(format!("planted-{}", tag(&scene)));
    let home = scene.sb.home();
    plant(
        &scene,
        &scene.sb.wt(),
        &format!(
            "mkdir -p cfg '{home}/.config' && printf 'writable = [\"{out}\"]\\n[unix]\\nallow_all = true\\n' > cfg/landwall.toml && ln -sfn \"$PWD/cfg\" '{home}/.config/landwall'",
            home = home.display(),
            out = scene.sb.outside().display()
        ),
    );
    assert!(std::fs::symlink_metadata(home.join(".config/landwall"))
        .expect("the link")
        .file_type()
        .is_symlink());
    for attempt in [
        scene.attempt("write", &[&target]),
        scene.attempt("unix-connect", &[&socket]),
    ] {
        let err = assert_next_launch_refused(&scene, &other, &attempt);
        assert!(err.contains("per-user configuration"), "{err}");
    }
    assert!(!target.exists(), "{} was written", target.display());
    assert_eq!(server.arrivals(), 0, "the server heard from the agent");
    let out = output(
        scene
            .control(&scene.attempt("write", &[&target]))
            .current_dir(&other),
    );
    assert_escaped("control", &out);
}
root_and_user!(escape_user_config_through_a_link, escape_user_config_through_a_link_unprivileged => user_config_through_a_link);

/// The per-user file's grants count where the agent cannot rewrite it (strict home) and
/// the user vouched for it: root owns it, so no agent (which runs as the user, without
/// capabilities) wrote it. The same file owned by the user is refused (78): an agent could
/// have written it in an earlier launch.
#[test]
fn user_config_grants_are_honoured_where_the_agent_cannot_write_them() {
    let scene = Scene::new("usercfg-strict", Who::User);
    let dir = scene.sb.home().join(".config/landwall");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let file = dir.join("landwall.toml");
    std::fs::write(
        &file,
        format!("read_only = [\"{}\"]\n", scene.sb.outside().display()),
    )
    .expect("write");
    let cfg = scene.sb.config("home = \"strict\"\n");
    let read = scene.attempt("read", &[&scene.sb.outside().join("secret")]);
    // Root's, as the test wrote it.
    let out = output(scene.walled(&read).env("LANDWALL_CONFIG", &cfg));
    assert!(verdict(&out).starts_with("ESCAPED"), "{}", describe(&out));
    // The user's: not vouched for.
    let (uid, gid) = test_user();
    chown_tree(&scene.sb.home(), uid, gid);
    let out = output(scene.walled(&read).env("LANDWALL_CONFIG", &cfg));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(stderr(&out).contains("owned by uid"), "{}", describe(&out));
}

/// Found by review: a `deny` of the per-user file's directory in the system file matches
/// nothing until the directory exists, so the agent can create the file in one launch; at
/// the next, the deny makes it unwritable. Its grants must still not count (78): the agent
/// wrote it. The same for a file planted under an open home that was then made read-only.
fn user_config_planted_before_it_was_protected(who: Who) {
    let scene = Scene::new("esc-usercfg-planted", who);
    let home = scene.sb.home();
    let dir = home.join(".config/landwall");
    let target = scene.sb.outside().join(format!("planted-{}", tag(&scene)));
    let deny = scene.sb.config(&format!(
        "home = \"open\"\ndeny = [\"{}\"]\n",
        dir.display()
    ));
    let plant_cfg = |cfg: &Path| {
        let out = output(
            scene
                .walled(&[
                    os("/bin/sh"),
                    os("-c"),
                    os(format!(
                        "mkdir -p '{d}' && printf 'writable = [\"{o}\"]\\n' > '{d}/landwall.toml'",
                        d = dir.display(),
                        o = scene.sb.outside().display()
                    )),
                ])
                .env("LANDWALL_CONFIG", cfg),
        );
        assert!(out.status.success(), "planting: {}", describe(&out));
        std::fs::remove_file(scene.sb.wt().join("marker")).expect("the planting launch ran");
    };
    plant_cfg(&deny);
    let attempt = scene.attempt("write", &[&target]);
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &deny));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!scene.sb.ran_in(&scene.sb.wt()), "{}", describe(&out));
    assert!(
        stderr(&out).contains("per-user configuration"),
        "{}",
        describe(&out)
    );
    assert!(!target.exists(), "{} was written", target.display());
    // Planted under an open home, then the home made read-only.
    std::fs::remove_dir_all(&dir).expect("rm");
    let open = scene.sb.root.join("open.toml");
    std::fs::write(&open, "home = \"open\"\n").expect("write");
    plant_cfg(&open);
    let strict = scene.sb.config("home = \"read-only\"\n");
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &strict));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!target.exists(), "{} was written", target.display());
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_user_config_planted_before_it_was_protected, escape_user_config_planted_before_it_was_protected_unprivileged => user_config_planted_before_it_was_protected);

/// Where the kernel refuses the private mount namespace (a seccomp filter refusing
/// `unshare`, as a security module or a container would), the launch says so in one line
/// and the objects are writable, as documented; with `protect_required` nothing starts.
fn namespace_refused(who: Who) {
    let scene = Scene::new("esc-nons", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let (_, path) = readme_object(&scene, &main);
    let attempt = scene.attempt("overwrite", &[&path]);
    let refused = |cfg: Option<&Path>| {
        let mut c = scene.cmd(landwall_e2e::helper());
        c.args(["nounshare", "--"])
            .arg(scene.shim())
            .args(&attempt)
            .current_dir(&linked);
        if let Some(cfg) = cfg {
            c.env("LANDWALL_CONFIG", cfg);
        }
        output(&mut c)
    };
    let cfg = scene.sb.config("protect_required = true\n");
    let out = refused(Some(&cfg));
    assert_eq!(out.status.code(), Some(100), "{}", describe(&out));
    assert!(
        !scene.sb.ran_in(&linked),
        "the agent started: {}",
        describe(&out)
    );
    assert!(stderr(&out).contains("namespace"), "{}", describe(&out));
    // The fallback: the exposure is named, and it is real.
    let out = refused(None);
    assert!(scene.sb.ran_in(&linked), "{}", describe(&out));
    assert!(
        stderr(&out).contains("no private mount namespace here"),
        "{}",
        describe(&out)
    );
    assert_escaped("without the namespace", &out);
    // A namespace limit reached (which an agent could cause) is no refusal: fatal.
    let mut full = scene.cmd(landwall_e2e::helper());
    full.args(["nsfull", "--"])
        .arg(scene.shim())
        .args(&attempt)
        .current_dir(&linked);
    std::fs::remove_file(linked.join("marker")).expect("rm marker");
    let out = output(&mut full);
    assert_eq!(out.status.code(), Some(100), "{}", describe(&out));
    assert!(
        !scene.sb.ran_in(&linked),
        "the agent started: {}",
        describe(&out)
    );
    // doctor says which case this machine is in.
    let mut doctor = scene.cmd(landwall_e2e::helper());
    doctor
        .args(["nounshare", "--"])
        .arg(landwall_e2e::landwall())
        .arg("doctor")
        .current_dir(&linked);
    let out = output(&mut doctor);
    assert!(
        stdout(&out).contains("namespace is REFUSED"),
        "{}",
        describe(&out)
    );
    let mut doctor = scene.cmd(landwall_e2e::landwall());
    doctor.arg("doctor").current_dir(&linked);
    let out = output(&mut doctor);
    assert!(
        stdout(&out).contains("namespace is available"),
        "{}",
        describe(&out)
    );
}
root_and_user!(namespace_refused_is_said_or_refused, namespace_refused_is_said_or_refused_unprivileged => namespace_refused);

/// A `.git` whose path carries terminal escapes: the refusal names it without them.
#[test]
fn escape_terminal_sequences_in_git_file_are_not_printed_raw() {
    let scene = Scene::new("esc-gitesc", Who::Root);
    let (_, linked) = scene_linked(&scene, "linked");
    plant(
        &scene,
        &linked,
        "printf 'gitdir: /x\\033]0;pwned\\007\\033[2J\\n' > .git",
    );
    let out = output(scene.walled(&[os("/bin/true")]).current_dir(&linked));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(
        !out.stderr.contains(&0x1b) && !out.stderr.contains(&0x07),
        "{}",
        describe(&out)
    );
    assert!(stderr(&out).contains("\\e]0;pwned"), "{}", describe(&out));
    // The control: the same text printed as it is holds the raw bytes.
    let raw = read(&linked.join(".git"));
    assert!(raw.contains('\u{1b}'));
}

/// A launch from inside a wall (an agent that runs `claude`, a walled drain daemon's job)
/// cannot mount: it goes on inside the outer launch's namespace, which still shows the
/// quarantine, and the real objects stay unchangeable.
fn nested_launch(who: Who) {
    let scene = Scene::new("esc-nested-launch", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let (_, path) = readme_object(&scene, &main);
    let before = std::fs::read(&path).expect("read object");
    // A copy of the shim where the wall lets the agent execute it (the real agent's
    // directory), as an installed shim is in /usr/lib/landwall/bin.
    let inner = scene.sb.agents().join("nested");
    std::fs::create_dir_all(&inner).expect("mkdir");
    install(
        &landwall_e2e::landwall(),
        &inner.join("claude"),
        &["-m", "0755"],
    );
    let mut attempt = vec![os(inner.join("claude"))];
    attempt.extend(scene.attempt("overwrite", &[&path]));
    let out = output(scene.walled(&attempt).current_dir(&linked));
    assert!(scene.sb.ran_in(&linked), "{}", describe(&out));
    assert_blocked("nested", &out, None);
    assert_eq!(std::fs::read(&path).expect("read object"), before);
}
root_and_user!(nested_launch_in_a_linked_worktree, nested_launch_in_a_linked_worktree_unprivileged => nested_launch);

// ---- A common dir the agent forged where it can write (found by review).

/// Plants, in the linked worktree's own (writable) git dir, a common dir of the agent's
/// making that checks out both ways (`fake/worktrees/x`), with `extra` run in `fake` too,
/// and points `.git` at it. Returns the fake common dir.
fn plant_forged_common(scene: &Scene, main: &Path, linked: &Path, extra: &str) -> PathBuf {
    let fake = main.join(".git/worktrees/linked/fake");
    plant(
        scene,
        linked,
        &format!(
            "set -e; F='{f}'; mkdir -p \"$F/worktrees/x/landwall-objects/pack\" \"$F/objects\" \"$F/refs\"; \
             echo ../.. > \"$F/worktrees/x/commondir\"; echo \"$PWD/.git\" > \"$F/worktrees/x/gitdir\"; \
             echo 'ref: refs/heads/main' > \"$F/HEAD\"; cd \"$F\"; {extra}; cd - >/dev/null; \
             printf 'gitdir: %s\\n' \"$F/worktrees/x\" > .git",
            f = fake.display()
        ),
    );
    fake
}

/// A thin pack (one delta against a base it does not hold), as `pack-objects --thin` makes.
fn thin_pack(scene: &Scene) -> PathBuf {
    let repo = scene.sb.root.join("thin-src");
    std::fs::create_dir_all(&repo).expect("mkdir");
    scene.sb.git_root(&repo, &["init", "-q"]);
    let text: String = (0..200)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    std::fs::write(repo.join("a"), &text).expect("write");
    scene.sb.git_root(&repo, &["add", "a"]);
    scene.sb.git_root(&repo, &["commit", "-qm", "one"]);
    std::fs::write(repo.join("a"), text + "more\n").expect("write");
    scene.sb.git_root(&repo, &["commit", "-qam", "two"]);
    let mut c = Command::new("git");
    c.args(["-C", repo.to_str().expect("utf8")])
        .args(["pack-objects", "--thin", "--stdout", "--revs", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), b"HEAD\n^HEAD~1\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success());
    // Where the agent may read it (the real agent's directory).
    let path = scene.sb.agents().join("thin.pack");
    std::fs::write(&path, out.stdout).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    path
}

/// The forged common dir's configuration names a promisor remote whose `uploadpack` is the
/// payload, and its quarantine holds a thin pack: a watcher that completed the pack in
/// that repository would fetch the missing base, running the payload outside the wall.
fn forged_common_promisor(who: Who) {
    let scene = Scene::new("esc-promisor", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let pack = thin_pack(&scene);
    let mark = scene.sb.outside().join("RCE");
    let fake = plant_forged_common(
        &scene,
        &main,
        &linked,
        &format!(
            "printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tpartialClone = origin\\n\
             [remote \"origin\"]\\n\\turl = /nonexistent-repo\\n\\tpromisor = true\\n\
             \\tuploadpack = \"sh -c '\"'\"'id > {mark}; exit 1'\"'\"' #\"\\n' > config; \
             cp '{pack}' worktrees/x/landwall-objects/pack/pack-1111111111111111111111111111111111111111.pack; \
             : > worktrees/x/landwall-objects/pack/pack-1111111111111111111111111111111111111111.idx",
            mark = mark.display(),
            pack = pack.display()
        ),
    );
    // The next launches start watchers on that quarantine.
    for _ in 0..2 {
        let out = output(scene.walled(&[os("/bin/true")]).current_dir(&linked));
        assert!(out.status.success(), "{}", describe(&out));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!mark.exists(), "the payload ran outside the wall");
    // The control: git completing that pack in that repository runs the payload.
    let mut control = scene.cmd("git");
    control
        .env("GIT_DIR", &fake)
        .args(["index-pack", "--stdin", "--fix-thin"])
        .stdin(std::fs::File::open(&pack).expect("pack"))
        .current_dir(&fake);
    let _status = control.output().expect("run git");
    assert!(mark.exists(), "the control's git did not run the payload");
}
root_and_user!(escape_forged_common_dir_promisor_fetch, escape_forged_common_dir_promisor_fetch_unprivileged => forged_common_promisor);

/// In the forged common dir, `objects` (or `refs`) is a symlink to a directory outside: the
/// next launch must not grant what it names.
fn forged_common_symlink(who: Who) {
    for sub in ["objects", "refs"] {
        let scene = Scene::new("esc-forged-link", who);
        let (main, linked) = scene_linked(&scene, "linked");
        let outside = scene.sb.outside();
        plant_forged_common(
            &scene,
            &main,
            &linked,
            &format!("rm -rf {sub}; ln -s '{}' {sub}", outside.display()),
        );
        let target = outside.join(format!("planted-{sub}"));
        let attempt = scene.attempt("write", &[&target]);
        refused_then_control(&scene, &linked, &attempt, "symbolic link", &target);
    }
}
root_and_user!(escape_forged_common_dir_symlink, escape_forged_common_dir_symlink_unprivileged => forged_common_symlink);

/// Found by review: under the writable home the agent makes `~/.claude` a symlink to a
/// directory outside and sets `home = "strict"` in the per-user file (a key that narrows);
/// the next launch, under strict home, would grant the agent's state directory read-write.
fn state_dir_link(who: Who) {
    let scene = Scene::new("esc-statelink", who);
    let outside = scene.sb.outside();
    let dir = scene.sb.home().join(".config/landwall");
    plant(
        &scene,
        &scene.sb.wt(),
        &format!(
            "set -e; ln -s '{o}' \"$HOME/.claude\"; mkdir -p '{d}'; echo 'home = \"strict\"' > '{d}/landwall.toml'",
            o = outside.display(),
            d = dir.display()
        ),
    );
    let target = outside.join("planted-state");
    let attempt = scene.attempt("write", &[&scene.sb.home().join(".claude/planted-state")]);
    let err = assert_next_launch_refused(&scene, &scene.sb.wt(), &attempt);
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!target.exists());
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_state_dir_symlink_under_strict_home, escape_state_dir_symlink_under_strict_home_unprivileged => state_dir_link);

/// Found by review: a configured `read_only` path in a place the agent can write (here its
/// worktree), swapped for a symlink to a directory outside before the next launch.
fn configured_path_link(who: Who) {
    let scene = Scene::new("esc-cfglink", who);
    let tools = scene.sb.wt().join("tools");
    std::fs::create_dir_all(&tools).expect("mkdir");
    if who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&tools, uid, gid);
    }
    let cfg = scene
        .sb
        .config(&format!("read_only = [\"{}\"]\n", tools.display()));
    let out = output(
        scene
            .walled(&[
                os("/bin/sh"),
                os("-c"),
                os(format!(
                    "rmdir '{t}' && ln -s '{o}' '{t}'",
                    t = tools.display(),
                    o = scene.sb.outside().display()
                )),
            ])
            .env("LANDWALL_CONFIG", &cfg),
    );
    assert!(out.status.success(), "planting: {}", describe(&out));
    std::fs::remove_file(scene.sb.wt().join("marker")).expect("planting ran");
    let attempt = scene.attempt("read", &[&scene.sb.outside().join("secret")]);
    let out = output(scene.walled(&attempt).env("LANDWALL_CONFIG", &cfg));
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!scene.sb.ran_in(&scene.sb.wt()), "{}", describe(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", describe(&out));
    let out = output(&mut scene.control(&attempt));
    assert_escaped("control", &out);
}
root_and_user!(escape_configured_path_swapped_for_a_link, escape_configured_path_swapped_for_a_link_unprivileged => configured_path_link);

/// Found by review: `git replace` from the linked worktree makes every git command in the
/// main checkout show other content under README's blob's name.
fn replace_ref(who: Who) {
    let scene = Scene::new("esc-replace", who);
    let (main, linked) = scene_linked(&scene, "linked");
    let (id, _) = readme_object(&scene, &main);
    let script =
        format!("evil=$(echo poisoned | git hash-object -w --stdin) && git replace {id} \"$evil\"");
    let out = output(
        scene
            .walled(&[os("/bin/sh"), os("-c"), os(&script)])
            .current_dir(&linked),
    );
    assert!(scene.sb.ran_in(&linked), "{}", describe(&out));
    assert!(
        !out.status.success(),
        "git replace worked: {}",
        describe(&out)
    );
    let show = scene.sb.git_root(&main, &["cat-file", "-p", "HEAD:README"]);
    assert_eq!(stdout(&show), "main\n");
    // The control: the same commands outside the wall poison what git shows.
    let mut control = scene.cmd("/bin/sh");
    control.args(["-c", &script]).current_dir(&linked);
    let out = output(&mut control);
    assert!(out.status.success(), "{}", describe(&out));
    let show = scene.sb.git_root(&main, &["cat-file", "-p", "HEAD:README"]);
    assert_eq!(
        stdout(&show),
        "poisoned\n",
        "the control's replace did not take"
    );
}
root_and_user!(escape_git_replace_from_linked_worktree, escape_git_replace_from_linked_worktree_unprivileged => replace_ref);

/// Found by review: a forged common dir whose name holds terminal escapes passes the layout
/// check; `landwall policy`, `check` and `doctor` print paths: none of them raw.
#[test]
fn escape_terminal_sequences_in_git_dir_names_are_not_printed_raw() {
    let scene = Scene::new("esc-gitname", Who::Root);
    let (main, linked) = scene_linked(&scene, "linked");
    let g = main.join(".git/worktrees/linked");
    plant(
        &scene,
        &linked,
        &format!(
            "set -e; F=\"{g}/fake$(printf '\\033]0;PWNED\\007\\033[2J')\"; \
             mkdir -p \"$F/worktrees/x\" \"$F/objects\" \"$F/refs\"; echo ../.. > \"$F/worktrees/x/commondir\"; \
             echo \"$PWD/.git\" > \"$F/worktrees/x/gitdir\"; printf 'gitdir: %s\\n' \"$F/worktrees/x\" > .git",
            g = g.display()
        ),
    );
    let inside = format!(
        "{}/x",
        read(&linked.join(".git"))
            .trim_end()
            .trim_start_matches("gitdir: ")
    );
    for args in [&["policy"][..], &["check", &inside], &["doctor"]] {
        let mut c = scene.cmd(landwall_e2e::landwall());
        c.args(args).current_dir(&linked);
        let out = output(&mut c);
        assert!(
            stdout(&out).contains("fake"),
            "{args:?}: {}",
            describe(&out)
        );
        assert!(
            !out.stdout.contains(&0x1b) && !out.stdout.contains(&0x07),
            "{args:?} printed raw escapes: {}",
            describe(&out)
        );
    }
    // The control: the name on disk holds the raw bytes.
    let names: Vec<Vec<u8>> = std::fs::read_dir(&g)
        .expect("read")
        .flatten()
        .map(|e| e.file_name().as_encoded_bytes().to_vec())
        .collect();
    assert!(
        names.iter().any(|n| n.contains(&0x1b)),
        "no raw name was made"
    );
}

/// The quarantine watcher parses what the agent wrote (zlib, packs through git): it runs
/// behind a wall of its own that lets it write the object store and its quarantine, run
/// git, and nothing else. The control runs the same writes without that wall.
#[test]
fn the_quarantine_watcher_is_walled_to_the_object_store() {
    let scene = Scene::new("esc-watcherwall", Who::Root);
    let (main, linked) = scene_linked(&scene, "linked");
    let g = main.join(".git/worktrees/linked");
    std::fs::create_dir_all(g.join("landwall-objects")).expect("mkdir");
    let planted = scene.sb.outside().join("planted-by-watcher");
    let script = format!(
        "echo x > '{o}/probe' && echo x > '{q}/probe' && git --version >/dev/null && echo store-ok; \
         echo x > '{p}' 2>/dev/null && echo planted; cat '{r}' 2>/dev/null && echo read-main; \
         echo x > '{l}/planted' 2>/dev/null && echo wrote-worktree",
        o = main.join(".git/objects").display(),
        q = g.join("landwall-objects").display(),
        p = planted.display(),
        r = main.join("README").display(),
        l = linked.display()
    );
    let mut walled = Command::new(landwall_e2e::helper());
    walled
        .arg("watcher-wall")
        .arg(&g)
        .arg(main.join(".git"))
        .args(["--", "/bin/sh", "-c", &script]);
    let out = output(&mut walled);
    assert_eq!(stdout(&out), "store-ok\n", "{}", describe(&out));
    assert!(!planted.exists() && !linked.join("planted").exists());
    let mut control = Command::new("/bin/sh");
    control.args(["-c", &script]);
    let out = output(&mut control);
    assert!(stdout(&out).contains("planted"), "{}", describe(&out));
}

// ---- The private home (issue 15): a home laid out like a developer's.

/// `~/src/app` (the main checkout, with the linked worktree `~/src/app-wt`), `~/src/other`
/// with a `.env`, a key in `~/.ssh`, `~/.aws/credentials`, `~/.config/gh/hosts.yml`,
/// `~/.bashrc` and `~/.gitconfig` with an identity. Returns (main, linked).
fn realistic_home(scene: &Scene) -> (PathBuf, PathBuf) {
    let home = scene.sb.home();
    let main = home.join("src/app");
    let linked = home.join("src/app-wt");
    std::fs::create_dir_all(&main).expect("mkdir");
    scene.sb.git_root(&main, &["init", "-q", "-b", "main"]);
    std::fs::write(main.join("README"), "app\n").expect("write");
    scene.sb.git_root(&main, &["add", "README"]);
    scene.sb.git_root(&main, &["commit", "-qm", "init"]);
    scene.sb.git_root(
        &main,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "task",
            linked.to_str().expect("utf8"),
        ],
    );
    let files = [
        ("src/other/.env", "TOKEN=other-project-secret\n"),
        ("src/other/main.c", "int main(void) { return 0; }\n"),
        (".ssh/id_ed25519", "PRIVATE KEY landwall-test\n"),
        (".ssh/config", "Host example\n  User git\n"),
        (
            ".aws/credentials",
            "[default]\naws_secret_access_key = landwall\n",
        ),
        (
            ".config/gh/hosts.yml",
            "github.com:\n  oauth_token: gho_landwall\n",
        ),
        (".bashrc", "# the user's own\n"),
        (
            ".gitconfig",
            "[user]\n\tname = Home Identity\n\temail = home@landwall.invalid\n",
        ),
    ];
    for (rel, text) in files {
        let p = home.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    if scene.who == Who::User {
        let (uid, gid) = test_user();
        chown_tree(&home, uid, gid);
    }
    (main, linked)
}

/// Under the default (private) home, from the linked worktree and from the main checkout:
/// every read and write of another project and every credential is refused, `~/.bashrc`
/// cannot be changed, `$HOME` cannot be listed; `git commit` works and takes its identity
/// from `~/.gitconfig`. Each refused attempt gets through outside the wall.
fn private_home(who: Who) {
    let scene = Scene::new("esc-private-home", who);
    let (main, linked) = realistic_home(&scene);
    let home = scene.sb.home();
    let bashrc = home.join(".bashrc");
    let secrets = [
        home.join("src/other/.env"),
        home.join(".ssh/id_ed25519"),
        home.join(".aws/credentials"),
        home.join(".config/gh/hosts.yml"),
    ];
    for dir in [&linked, &main] {
        let mut attempts: Vec<Vec<OsString>> = secrets
            .iter()
            .map(|p| scene.attempt("read", &[p]))
            .collect();
        attempts.push(scene.attempt("write", &[&home.join("src/other/planted")]));
        attempts.push(scene.attempt("write", &[&bashrc]));
        attempts.push(scene.attempt("list", &[&home]));
        attempts.push(scene.attempt("list", &[&home.join("src")]));
        for attempt in &attempts {
            let before = read(&bashrc);
            let out = output(scene.walled(attempt).current_dir(dir));
            assert!(scene.sb.ran_in(dir), "{}", describe(&out));
            std::fs::remove_file(dir.join("marker")).expect("marker");
            assert_blocked(
                &format!("walled in {}", dir.display()),
                &out,
                Some("EACCES"),
            );
            assert_eq!(read(&bashrc), before, "~/.bashrc was changed");
            assert!(!home.join("src/other/planted").exists());
            let out = output(scene.control(attempt).current_dir(dir));
            assert_escaped("control", &out);
            let _ignored = std::fs::remove_file(home.join("src/other/planted"));
        }
        // git commit works, with the identity of ~/.gitconfig (read-only in the wall).
        let commit = [
            os("/bin/sh"),
            os("-c"),
            os("echo work > work.txt && git add work.txt && git commit -qm work && git log -1 --format=%an"),
        ];
        let out = output(scene.walled(&commit).current_dir(dir));
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(stdout(&out).trim(), "Home Identity", "{}", describe(&out));
        std::fs::remove_file(dir.join("marker")).expect("marker");
    }
    // Started from the home itself: refused, the agent does not run.
    let out = output(
        scene
            .walled(&scene.attempt("list", &[&home]))
            .current_dir(&home),
    );
    assert_eq!(out.status.code(), Some(78), "{}", describe(&out));
    assert!(!scene.sb.ran_in(&home));
}
root_and_user!(escape_private_home, escape_private_home_unprivileged => private_home);
