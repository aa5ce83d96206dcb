//! The watcher ends the agent when it can no longer watch. A test binary of its own: the
//! test uses up a user's inotify watches (root's too), which would fail any launch running
//! beside it; cargo runs test binaries one at a time.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use landwall_e2e::{chown_tree, describe, install, output_within, stdout, Sandbox};

/// Ends the process whose pid is in `file`, if it still runs.
fn end(file: &Path) {
    if let Some(pid) = std::fs::read_to_string(file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    {
        match nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        ) {
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => panic!("kill {pid}: {e}"),
        }
    }
}

/// Removes `p` with all it holds, if it is there.
fn remove_if_there(p: &Path) {
    match std::fs::remove_dir_all(p) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove {}: {e}", p.display()),
    }
}

/// Found by review: an agent that uses up its user's inotify watches while it runs, then
/// makes a directory on the way to an absent protected path (`.vscode/tasks.json`), leaves
/// the watcher unable to watch there: the watcher then ends the agent, but as root the
/// kernel refused that signal (the watcher's own Landlock wall scoped signals, and the
/// agent's wall is not inside it), and the agent ran on unwatched. Walled: the agent is
/// ended, and what it would have written after is not there. The control: the same outside
/// the wall runs to its end. `uid`: root, or a user of its own.
fn ended_when_watches_run_out(uid: Option<u32>) {
    for walled in [false, true] {
        let sb = Sandbox::new("inotify-agent");
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
        let wt = sb.wt();
        let status = Command::new("git")
            .args(["init", "-q", "-b", "main"])
            .current_dir(&wt)
            .status()
            .expect("git init");
        assert!(status.success());
        let name = sb
            .root
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        // Where the wall lets the agent write, outside the worktree.
        let tmp = PathBuf::from(format!("/tmp/lw-ino-agent-{name}"));
        remove_if_there(&tmp);
        std::fs::create_dir_all(tmp.join("fill")).expect("mkdir");
        for n in 0..2000 {
            std::fs::write(tmp.join("fill").join(n.to_string()), "").expect("fill");
        }
        if let Some(uid) = uid {
            for d in [&wt, &sb.home(), &tmp] {
                chown_tree(d, uid, uid);
            }
        }
        let script = format!(
            "T='{t}'; '{doors}' exhaust-inotify $T/fill $T/exhausted </dev/null >/dev/null 2>&1 & echo $! > $T/ex-pid; i=0; while [ ! -e $T/exhausted ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; test -e $T/exhausted && echo exhausted; mkdir .vscode; sleep 3; echo survived > survived",
            doors = sb.agents().join("lw-doors").display(),
            t = tmp.display(),
        );
        let mut c = match uid {
            Some(uid) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={uid}"))
                    .args(["--clear-groups", "--"]);
                c
            }
            None => Command::new("env"),
        };
        if walled {
            c.arg(sb.shims().join("claude")).arg("/bin/sh");
        } else {
            c.arg("/bin/sh");
        }
        c.args(["-c", &script]);
        sb.clean_env(&mut c);
        c.current_dir(&wt);
        let out = output_within(&mut c, Duration::from_secs(60));
        end(&tmp.join("ex-pid"));
        remove_if_there(&tmp);
        assert!(
            stdout(&out).contains("exhausted"),
            "walled: {walled}: the watches were not used up:\n{}",
            describe(&out)
        );
        let survived = wt.join("survived").exists();
        let expected = if walled {
            (false, Some(libc::SIGKILL))
        } else {
            (true, None)
        };
        assert_eq!(
            (survived, out.status.signal()),
            expected,
            "walled: {walled}:\n{}",
            describe(&out)
        );
    }
}

#[test]
fn an_agent_that_uses_up_inotify_watches_while_it_runs_is_ended() {
    ended_when_watches_run_out(None);
}

#[test]
fn an_agent_that_uses_up_inotify_watches_while_it_runs_is_ended_unprivileged() {
    ended_when_watches_run_out(Some(62000 + std::process::id() % 1000));
}
