//! The agents' command-bearing state in `$HOME` (`landwall::profile::agent_code`), each
//! path of it: a walled launch cannot leave anything there for a later launch in another
//! project, or for the agent run without the shim. Each file is written (each directory
//! gets a file), by every agent's launch (under the private home a launch may write only its
//! own agent's state, and `~/.cache`). The control writes the same without the wall, and it
//! lands. The real agents reading such plants are in `agents.rs`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use landwall::profile::{agent_code, Make};
use landwall_e2e::{describe, output, Sandbox};

/// What a plant writes: in a file, or in a file of its own in a directory.
const PLANT: &str = "planted by the agent";

/// Where the plant for `path` lands: the file itself, or `plant.md` in a directory.
fn target(home: &Path, path: &str, dir: bool) -> PathBuf {
    let p = home.join(path);
    if dir {
        p.join("plant.md")
    } else {
        p
    }
}

/// Whether `path` is a directory in the profile: made as one, or named like one.
fn is_dir(path: &str, make: Option<Make>) -> bool {
    match make {
        Some(Make::Dir) => true,
        Some(Make::File(_)) => false,
        None => !Path::new(path)
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains('.')),
    }
}

/// A shell script that plants in every path of the list, going on past each failure.
fn script(home: &Path) -> String {
    let mut s = String::new();
    for (_, code) in agent_code() {
        let dir = is_dir(code.path, code.make);
        let t = target(home, code.path, dir);
        let parent = t.parent().expect("a parent");
        s.push_str(&format!(
            "mkdir -p '{}' 2>/dev/null; echo '{PLANT}' >> '{}' 2>/dev/null;\n",
            parent.display(),
            t.display()
        ));
    }
    s.push_str("true\n");
    s
}

/// The paths whose plant is there now.
fn planted(home: &Path) -> Vec<PathBuf> {
    agent_code()
        .map(|(_, c)| target(home, c.path, is_dir(c.path, c.make)))
        .filter(|t| fs::read_to_string(t).is_ok_and(|s| s.contains(PLANT)))
        .collect()
}

#[test]
fn no_launch_leaves_a_plant_in_any_agents_command_bearing_state() {
    for agent in ["claude", "codex", "opencode"] {
        let sb = Sandbox::new(&format!("agent-state-{agent}"));
        let home = sb.home();
        let mut c = sb.landwall();
        c.args(["run", "--agent", agent, "--", "sh", "-c", &script(&home)]);
        let out = output(&mut c);
        assert!(out.status.success(), "{agent}: {}", describe(&out));
        // What appeared where nothing was is set aside by the watcher as it appears, and
        // once more when the launch ends: give it the moment.
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut left = planted(&home);
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            left = planted(&home);
        }
        assert!(
            left.is_empty(),
            "{agent}: plants left behind the wall: {left:?}\n{}",
            describe(&out)
        );
    }
    // Control: the same script without the wall plants in every path.
    let sb = Sandbox::new("agent-state-control");
    let home = sb.home();
    let out = output(Command::new("sh").args(["-c", &script(&home)]));
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(planted(&home).len(), agent_code().count());
}
