//! What stays open beside the wall (issue 14, item 7): Landlock guards paths, and these calls
//! are not path accesses it checks. Each test runs the attempt (`lw-doors`, see
//! `tests/src/bin/lw-doors.rs`) as the stand-in agent behind the `claude` shim and asserts
//! that it gets through (`ESCAPED`), then runs it outside the wall as the same user and
//! asserts the same there. A `…_unprivileged` twin runs both as the system user
//! `landwall-test`.
//!
//! These tests state the doors' current state. If a walled run starts failing, the kernel (or
//! landwall) has closed that door: update "What the wall does not cover" in docs/escape.md
//! and turn the test into an escape test (`tests/tests/escape.rs`).

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use landwall_e2e::{
    bin_dir, chown_tree, describe, install, output, test_user, verdict, Sandbox, Who, TEST_USER,
};

// ---- The harness (a minimal copy of the escape suite's).

/// One test's scene: a sandbox whose stand-in agent runs its arguments (`exec "$@"`) and a
/// copy of `lw-doors` the agent can execute.
struct Scene {
    sb: Sandbox,
    who: Who,
}

impl Scene {
    fn new(name: &str, who: Who) -> Scene {
        let sb = Sandbox::new(name);
        let built = bin_dir().join("lw-doors");
        assert!(
            built.is_file(),
            "{} is missing: build the workspace first",
            built.display()
        );
        let copy = sb.agents().join("lw-doors");
        if std::fs::hard_link(&built, &copy).is_err() {
            install(&built, &copy, &["-m", "0755"]);
        }
        let script = sb.root.join("agent.sh");
        std::fs::write(
            &script,
            "#!/bin/sh\necho ran > \"$PWD/marker\"\nexec \"$@\"\n",
        )
        .expect("write agent script");
        install(&script, &sb.agents().join("claude-real"), &["-m", "0755"]);
        let scene = Scene { sb, who };
        if who == Who::User {
            let (uid, gid) = test_user();
            for d in [scene.sb.wt(), scene.sb.home(), scene.sb.outside()] {
                chown_tree(&d, uid, gid);
            }
        }
        scene
    }

    /// The uid and gid the attempts run with.
    fn ids(&self) -> (u32, u32) {
        match self.who {
            Who::Root => (0, 0),
            Who::User => test_user(),
        }
    }

    /// The agent's copy of `lw-doors`.
    fn doors(&self) -> PathBuf {
        self.sb.agents().join("lw-doors")
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

    /// `lw-doors SUB ARGS…` as an argument vector.
    fn attempt<S: AsRef<OsStr>>(&self, sub: &str, args: &[S]) -> Vec<OsString> {
        let mut v = vec![self.doors().into_os_string(), sub.into()];
        v.extend(args.iter().map(|a| a.as_ref().to_os_string()));
        v
    }

    /// The attempt as the agent, behind the shim.
    fn walled(&self, attempt: &[OsString]) -> Command {
        let mut c = self.cmd(self.sb.shims().join("claude"));
        c.args(attempt);
        c
    }

    /// The same attempt outside the wall.
    fn control(&self, attempt: &[OsString]) -> Command {
        let mut c = self.cmd(&attempt[0]);
        c.args(&attempt[1..]);
        c
    }

    /// A regular file `outside/NAME`, mode 0644, owned by `uid:gid`.
    fn outside_file(&self, name: &str, uid: u32, gid: u32) -> PathBuf {
        let p = self.sb.outside().join(name);
        std::fs::write(&p, "outside file\n").expect("write outside file");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        std::os::unix::fs::chown(&p, Some(uid), Some(gid)).expect("chown");
        p
    }
}

/// The walled attempt got through: the door is open, as docs/escape.md says.
fn assert_open(what: &str, out: &Output) -> String {
    let v = verdict(out);
    assert!(
        v.starts_with("ESCAPED ") && out.status.success(),
        "{what}: refused behind the wall. The kernel (or landwall) has closed this door: \
         update \"What the wall does not cover\" in docs/escape.md and make this an escape \
         test:\n{}",
        describe(out)
    );
    eprintln!("{what}: {v}");
    v
}

/// The control got through outside the wall.
fn assert_control(what: &str, out: &Output) -> String {
    let v = verdict(out);
    assert!(
        v.starts_with("ESCAPED ") && out.status.success(),
        "{what}: the control did not get through outside the wall, so the test shows \
         nothing:\n{}",
        describe(out)
    );
    eprintln!("{what}: {v}");
    v
}

/// The attempt was refused, with `errno` in its reason.
fn assert_blocked(what: &str, out: &Output, errno: &str) {
    let v = verdict(out);
    assert!(
        v.starts_with("BLOCKED ") && v.contains(errno) && out.status.code() == Some(1),
        "{what}: expected BLOCKED with {errno}:\n{}",
        describe(out)
    );
    eprintln!("{what}: {v}");
}

/// The wall is up and `file` is behind it: the agent cannot read it.
fn assert_walled_off(scene: &Scene, file: &Path) {
    let attempt = scene.attempt("read", &[file.as_os_str(), "outside".as_ref()]);
    let out = output(&mut scene.walled(&attempt));
    assert!(scene.sb.ran_in(&scene.sb.wt()), "{}", describe(&out));
    assert_blocked("walled read", &out, "EACCES");
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

/// A child process killed and reaped when dropped, even when the test fails.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Err(e) = self.0.kill() {
            eprintln!("kill {}: {e}", self.0.id());
        }
        if let Err(e) = self.0.wait() {
            eprintln!("wait {}: {e}", self.0.id());
        }
    }
}

// ---- inotify on a directory outside the grant.

/// Starts `lw-doors inotify DIR NAMES…` (behind the shim or not), waits until its watch is
/// in place, runs `act`, and returns its output.
fn watch_while(mut cmd: Command, act: impl FnOnce()) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watcher");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).expect("read stderr") == 0 {
            break; // It ended without watching: its verdict says why.
        }
        seen.push_str(&line);
        if line.trim_end() == "lw-doors: watching" {
            act();
            break;
        }
    }
    let out = child.wait_with_output().expect("wait watcher");
    err.read_to_string(&mut seen).expect("read stderr");
    Output {
        status: out.status,
        stdout: out.stdout,
        stderr: seen.into_bytes(),
    }
}

/// The agent cannot list `outside/`, yet it watches it: it sees a file created there by name
/// and the reads of `secret`.
fn inotify_outside(who: Who) {
    let scene = Scene::new("door-inotify", who);
    let outside = scene.sb.outside();
    let out = output(&mut scene.walled(&scene.attempt("list", &[&outside])));
    assert_blocked("walled list", &out, "EACCES");
    let (uid, gid) = scene.ids();
    let run = |cmd: Command, name: &str| {
        let out = watch_while(cmd, || {
            scene.outside_file(name, uid, gid);
            std::fs::read(outside.join("secret")).expect("read secret");
        });
        (out, format!("CREATE {name}"))
    };
    let name = format!("walled-{}", tag(&scene));
    let attempt = scene.attempt(
        "inotify",
        &[outside.as_os_str(), name.as_ref(), "secret".as_ref()],
    );
    let (out, create) = run(scene.walled(&attempt), &name);
    let v = assert_open("walled inotify", &out);
    assert!(v.contains(&create) && v.contains("OPEN secret"), "{v}");

    let name = format!("control-{}", tag(&scene));
    let attempt = scene.attempt(
        "inotify",
        &[outside.as_os_str(), name.as_ref(), "secret".as_ref()],
    );
    let (out, create) = run(scene.control(&attempt), &name);
    let v = assert_control("control inotify", &out);
    assert!(v.contains(&create) && v.contains("OPEN secret"), "{v}");
}
root_and_user!(door_inotify_outside, door_inotify_outside_unprivileged => inotify_outside);

// ---- /proc/PID/cmdline of the user's other processes.

/// A process of the same user, started outside the wall with a secret in its arguments: the
/// agent reads its command line (not its environment: Landlock's ptrace restriction).
fn proc_cmdline_sibling(who: Who) {
    let scene = Scene::new("door-cmdline", who);
    let secret = format!("--token=door-secret-{}", tag(&scene));
    let sibling = Reaped(
        scene
            .cmd(scene.doors())
            .args(["pause", &secret])
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn sibling"),
    );
    let pid = sibling.0.id();
    // Wait until it runs lw-doors as `who` (setpriv execs it under the same pid).
    let deadline = Instant::now() + Duration::from_secs(10);
    let comm = format!("/proc/{pid}/comm");
    while !std::fs::read_to_string(&comm).is_ok_and(|c| c.trim() == "lw-doors") {
        assert!(Instant::now() < deadline, "the sibling did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let cmdline = scene.attempt("read", &[format!("/proc/{pid}/cmdline"), secret.clone()]);
    let environ = scene.attempt("read", &[format!("/proc/{pid}/environ"), "PATH=".into()]);

    let out = output(&mut scene.walled(&cmdline));
    assert!(scene.sb.ran_in(&scene.sb.wt()), "{}", describe(&out));
    assert_open("walled cmdline", &out);
    let out = output(&mut scene.walled(&environ));
    assert_blocked("walled environ", &out, "EACCES");

    assert_control("control cmdline", &output(&mut scene.control(&cmdline)));
    assert_control("control environ", &output(&mut scene.control(&environ)));
    drop(sibling);
}
root_and_user!(door_proc_cmdline_sibling, door_proc_cmdline_sibling_unprivileged => proc_cmdline_sibling);

// ---- Metadata of files outside the grant.

/// chmod of a file outside the grant that `who` owns. For root that file is root's, as
/// everything in /etc and /usr is. The setuid bit is refused by the filter (EPERM): a walled
/// root agent cannot make a program setuid root. Other mode bits stay open: 0666 lands.
fn chmod_setuid_outside(who: Who) {
    let scene = Scene::new("door-chmod", who);
    let (uid, gid) = scene.ids();
    let file = scene.outside_file("target", uid, gid);
    assert_walled_off(&scene, &file);
    let attempt = scene.attempt("chmod", &[file.as_os_str(), "4755".as_ref()]);
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o7777;
    let before = mode(&file);

    let out = output(&mut scene.walled(&attempt));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("BLOCKED ") && text.contains("EPERM"),
        "walled chmod 4755 was not refused: {text}"
    );
    assert_eq!(mode(&file), before, "the walled setuid chmod landed");

    // The setgid bit: refused for root (group root for whoever runs the file next), left to
    // an unprivileged agent, whose groups are its own.
    let setgid = scene.attempt("chmod", &[file.as_os_str(), "2755".as_ref()]);
    let out = output(&mut scene.walled(&setgid));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match who {
        Who::Root => {
            assert!(
                text.starts_with("BLOCKED ") && text.contains("EPERM"),
                "{text}"
            );
            assert_eq!(mode(&file), before, "the walled setgid chmod landed");
        }
        Who::User => {
            assert!(text.starts_with("ESCAPED "), "{text}");
            assert_eq!(mode(&file), 0o2755);
        }
    }

    let open = scene.attempt("chmod", &[file.as_os_str(), "666".as_ref()]);
    assert_open("walled chmod 666", &output(&mut scene.walled(&open)));
    assert_eq!(mode(&file), 0o666, "the walled chmod 666 did not land");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).expect("reset");
    assert_control("control chmod", &output(&mut scene.control(&attempt)));
    assert_eq!(mode(&file), 0o4755);
}
root_and_user!(door_chmod_setuid_outside, door_chmod_setuid_outside_unprivileged => chmod_setuid_outside);

/// Access and modification times of a file outside the grant that `who` owns.
fn utimes_outside(who: Who) {
    let scene = Scene::new("door-utimes", who);
    let (uid, gid) = scene.ids();
    let file = scene.outside_file("target", uid, gid);
    assert_walled_off(&scene, &file);
    let mtime = |p: &Path| std::fs::metadata(p).expect("stat").mtime();

    let attempt = scene.attempt("utimes", &[file.as_os_str(), "1000000000".as_ref()]);
    assert_open("walled utimes", &output(&mut scene.walled(&attempt)));
    assert_eq!(
        mtime(&file),
        1_000_000_000,
        "the walled utimes did not land"
    );

    let attempt = scene.attempt("utimes", &[file.as_os_str(), "1000000001".as_ref()]);
    assert_control("control utimes", &output(&mut scene.control(&attempt)));
    assert_eq!(mtime(&file), 1_000_000_001);
}
root_and_user!(door_utimes_outside, door_utimes_outside_unprivileged => utimes_outside);

/// chown of a file outside the grant that `who` owns, as far as DAC allows without
/// capabilities: its group can become one `who` is in; it cannot be given away.
fn chown_outside(who: Who) {
    let scene = Scene::new("door-chown", who);
    let (uid, gid) = scene.ids();
    let (other_uid, other_gid) = match who {
        Who::Root => test_user(),
        Who::User => (0, 0),
    };
    let file = scene.outside_file("target", uid, other_gid);
    assert_walled_off(&scene, &file);
    let meta = |p: &Path| {
        let m = std::fs::metadata(p).expect("stat");
        (m.uid(), m.gid())
    };
    let chgrp = scene.attempt(
        "chown",
        &[file.as_os_str(), "-1".as_ref(), gid.to_string().as_ref()],
    );
    let give = scene.attempt(
        "chown",
        &[
            file.as_os_str(),
            other_uid.to_string().as_ref(),
            "-1".as_ref(),
        ],
    );

    assert_open("walled chgrp", &output(&mut scene.walled(&chgrp)));
    assert_eq!(meta(&file), (uid, gid), "the walled chgrp did not land");
    // Giving the file away needs CAP_CHOWN, which the shim drops (root) or never had (user).
    // A user's launch runs in a user namespace of its own (the private /dev/pts), where
    // uid 0 has no name: EINVAL there.
    let refusal = match who {
        Who::Root => "EPERM",
        Who::User => "EINVAL",
    };
    assert_blocked(
        "walled give away",
        &output(&mut scene.walled(&give)),
        refusal,
    );
    assert_eq!(meta(&file), (uid, gid));

    std::os::unix::fs::chown(&file, None, Some(other_gid)).expect("reset");
    assert_control("control chgrp", &output(&mut scene.control(&chgrp)));
    assert_eq!(meta(&file), (uid, gid));
    let out = output(&mut scene.control(&give));
    match who {
        Who::Root => {
            assert_control("control give away", &out);
            assert_eq!(meta(&file), (other_uid, gid));
        }
        Who::User => assert_blocked("control give away", &out, "EPERM"),
    }
}
root_and_user!(door_chown_outside, door_chown_outside_unprivileged => chown_outside);

/// A `user.*` extended attribute on a file outside the grant that `who` can write (DAC).
fn setxattr_outside(who: Who) {
    let scene = Scene::new("door-xattr", who);
    let (uid, gid) = scene.ids();
    let file = scene.outside_file("target", uid, gid);
    assert_walled_off(&scene, &file);
    // Read back outside the wall, as root.
    let get = |name: &str| {
        let mut c = Command::new(scene.doors());
        c.arg("getxattr").arg(&file).arg(name);
        let out = output(&mut c);
        verdict(&out)
    };
    let value = format!("door-{}", tag(&scene));

    let name = "user.landwall-door-walled";
    let attempt = scene.attempt(
        "setxattr",
        &[file.as_os_str(), name.as_ref(), value.as_ref()],
    );
    assert_open("walled setxattr", &output(&mut scene.walled(&attempt)));
    assert_eq!(
        get(name),
        format!("ESCAPED {value}"),
        "the walled setxattr did not land"
    );
    // Reading it back needs no read access to the file either.
    let attempt = scene.attempt("getxattr", &[file.as_os_str(), name.as_ref()]);
    let v = assert_open("walled getxattr", &output(&mut scene.walled(&attempt)));
    assert_eq!(v, format!("ESCAPED {value}"));

    let name = "user.landwall-door-control";
    let attempt = scene.attempt(
        "setxattr",
        &[file.as_os_str(), name.as_ref(), value.as_ref()],
    );
    assert_control("control setxattr", &output(&mut scene.control(&attempt)));
    assert_eq!(get(name), format!("ESCAPED {value}"));
}
root_and_user!(door_setxattr_outside, door_setxattr_outside_unprivileged => setxattr_outside);
