//! Packaging, end to end: `landwall shim enable/disable --user` in a scratch `$HOME` against
//! an installed-like prefix (`PREFIX/bin/landwall`, `PREFIX/lib/landwall/bin/claude`), the
//! profile.d script, and the files packaging/ ships (conffile, drain.env, unit, sysusers,
//! tmpfiles) against what the binaries expect. The packages themselves are checked by
//! `make test-packages` (lintian, rpmlint, systemd-analyze, an install in a Debian root).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use landwall_e2e::{bin_dir, install_binary, landwall, run, stderr, stdout, Sandbox, SYSTEM_PATH};

const EXIT_USAGE: i32 = 2;
const EXIT_CONFIG: i32 = 78;
const MARKER: &str = "# landwall-shim-path";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repository root")
        .to_path_buf()
}

fn packaging(rel: &str) -> PathBuf {
    let p = repo().join("packaging").join(rel);
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn write_exec(p: &Path, text: &str) {
    fs::write(p, text).expect("write script");
    fs::set_permissions(p, fs::Permissions::from_mode(0o755)).expect("chmod script");
}

/// An installed-like prefix in the sandbox: `prefix/bin/landwall` and the agent links in
/// `prefix/lib/landwall/bin`, as `make install` and the packages lay them out.
struct Prefix {
    sb: Sandbox,
}

impl Prefix {
    fn new(name: &str) -> Prefix {
        let sb = Sandbox::new(name);
        let p = Prefix { sb };
        fs::create_dir_all(p.root().join("bin")).expect("mkdir bin");
        fs::create_dir_all(p.shim_dir()).expect("mkdir shim dir");
        install_binary(&landwall(), &p.root().join("bin/landwall"));
        for a in ["claude", "opencode", "codex"] {
            std::os::unix::fs::symlink("../../../bin/landwall", p.shim_dir().join(a))
                .expect("link shim");
        }
        // A native-installer claude in ~/.local/bin: the shim must find it, never touch it.
        fs::create_dir_all(p.home().join(".local/bin")).expect("mkdir ~/.local/bin");
        write_exec(
            &p.native_claude(),
            "#!/bin/sh\necho \"native claude: $*\"\ngrep '^NoNewPrivs:' /proc/self/status\n",
        );
        p
    }
    fn root(&self) -> PathBuf {
        self.sb.root.join("prefix")
    }
    fn shim_dir(&self) -> PathBuf {
        self.root().join("lib/landwall/bin")
    }
    fn home(&self) -> PathBuf {
        self.sb.home()
    }
    fn native_claude(&self) -> PathBuf {
        self.home().join(".local/bin/claude")
    }
    /// The prefix's `landwall` with a clean environment: HOME, a bash SHELL, system PATH.
    fn landwall(&self, args: &[&str]) -> Output {
        let mut c = Command::new(self.root().join("bin/landwall"));
        self.sb.clean_env(&mut c);
        c.env("SHELL", "/bin/bash").args(args);
        run(&mut c)
    }
    /// `sh -c SCRIPT` with HOME and a PATH where ~/.local/bin comes first, in the worktree.
    fn sh(&self, script: &str) -> Output {
        let mut c = Command::new("/bin/sh");
        self.sb.clean_env(&mut c);
        c.env(
            "PATH",
            format!("{}:{SYSTEM_PATH}", self.home().join(".local/bin").display()),
        )
        .current_dir(self.sb.wt())
        .args(["-c", script]);
        run(&mut c)
    }
}

/// Debian's ~/.profile, in short: it sources ~/.bashrc under bash, then puts ~/.local/bin
/// first on PATH. That is what hides the system's shim directory from the user.
const DEBIAN_PROFILE: &str = "# ~/.profile\nif [ -n \"$BASH_VERSION\" ]; then\n    if [ -f \"$HOME/.bashrc\" ]; then\n\t. \"$HOME/.bashrc\"\n    fi\nfi\nif [ -d \"$HOME/.local/bin\" ] ; then\n    PATH=\"$HOME/.local/bin:$PATH\"\nfi\n";
const BASHRC: &str = "# ~/.bashrc\ncase $- in *i*) ;; *) return;; esac\nalias ll='ls -l'\n";

#[test]
fn shim_enable_puts_the_shim_first_and_disable_takes_it_out() {
    let p = Prefix::new("pkg-shim-enable");
    let home = p.home();
    fs::write(home.join(".profile"), DEBIAN_PROFILE).expect("write .profile");
    fs::write(home.join(".bashrc"), BASHRC).expect("write .bashrc");
    let native_before = (
        read(&p.native_claude()),
        fs::metadata(p.native_claude()).expect("stat").ino(),
    );
    let shim = p.shim_dir().join("claude").display().to_string();

    // Before: ~/.local/bin wins, as for a user of the native installer.
    let out = p.sh(". \"$HOME/.profile\"; command -v claude");
    assert_eq!(stdout(&out).trim(), p.native_claude().display().to_string());

    let out = p.landwall(&["shim", "enable", "--user"]);
    assert!(out.status.success(), "enable: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains(".bashrc: PATH line added"), "{text}");
    assert!(text.contains(".profile: PATH line added"), "{text}");
    assert!(text.contains("is left as it is"), "{text}");
    for (name, old) in [(".bashrc", BASHRC), (".profile", DEBIAN_PROFILE)] {
        let new = read(&home.join(name));
        let (kept, last) = new.split_at(old.len());
        assert_eq!(kept, old, "{name}: the user's lines changed");
        assert!(
            last.ends_with('\n') && last.lines().count() == 1,
            "{name}: {last:?}"
        );
        assert!(last.contains(MARKER), "{name}: {last:?}");
        assert!(
            last.contains(&format!("'{}'", p.shim_dir().display())),
            "{name}: {last:?}"
        );
    }
    // No zsh here (SHELL is bash and there was no ~/.zshrc): nothing created for it.
    assert!(!home.join(".zshrc").exists());

    // Idempotent: a second run changes no byte.
    let snapshot = |p: &Prefix| {
        (
            read(&p.home().join(".bashrc")),
            read(&p.home().join(".profile")),
        )
    };
    let once = snapshot(&p);
    let out = p.landwall(&["shim", "enable", "--user"]);
    assert!(out.status.success(), "enable again: {}", stderr(&out));
    assert!(
        stdout(&out).contains("already has the line"),
        "{}",
        stdout(&out)
    );
    assert_eq!(snapshot(&p), once);

    // Login shells (~/.profile) and interactive bash (~/.bashrc) now find the shim first,
    // and a shell that reads ~/.bashrc again does not add it again.
    let out = p.sh(". \"$HOME/.profile\"; command -v claude");
    assert_eq!(stdout(&out).trim(), shim, "{}", stderr(&out));
    let out = p.sh("bash --rcfile \"$HOME/.bashrc\" -ic 'command -v claude' 2>/dev/null");
    assert_eq!(stdout(&out).trim(), shim, "{}", stderr(&out));
    let out = p.sh(&format!(
        "bash --rcfile \"$HOME/.bashrc\" -ic '. \"$HOME/.bashrc\"; echo \"$PATH\"' 2>/dev/null | tr : '\\n' | grep -cx '{}'",
        p.shim_dir().display()
    ));
    assert_eq!(stdout(&out).trim(), "1", "{}", stderr(&out));

    // The shim runs the native claude as the real agent, walled in.
    let out = p.sh(". \"$HOME/.profile\"; claude -p hello");
    assert!(out.status.success(), "claude: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.starts_with("native claude: -p hello\n"), "{text}");
    assert!(text.contains("NoNewPrivs:\t1"), "not walled: {text}");

    let out = p.landwall(&["shim", "disable", "--user"]);
    assert!(out.status.success(), "disable: {}", stderr(&out));
    assert_eq!(read(&home.join(".bashrc")), BASHRC);
    assert_eq!(read(&home.join(".profile")), DEBIAN_PROFILE);
    let out = p.landwall(&["shim", "disable", "--user"]);
    assert!(out.status.success(), "disable again: {}", stderr(&out));
    assert!(stdout(&out).contains("no startup file had the PATH line"));
    let out = p.sh(". \"$HOME/.profile\"; command -v claude");
    assert_eq!(stdout(&out).trim(), p.native_claude().display().to_string());

    // ~/.local/bin/claude was never touched.
    let native_after = (
        read(&p.native_claude()),
        fs::metadata(p.native_claude()).expect("stat").ino(),
    );
    assert_eq!(native_after, native_before);
}

/// A dotfile manager's symlinked ~/.bashrc stays a symlink; the file it points to gets the
/// line and keeps its mode. Missing startup files other than ~/.bashrc are not created,
/// except ~/.zshrc for a zsh user; every line works in a POSIX sh.
#[test]
fn shim_enable_edits_symlink_targets_and_creates_only_what_the_shell_reads() {
    let p = Prefix::new("pkg-shim-symlink");
    let home = p.home();
    let dotfiles = home.join("dotfiles");
    fs::create_dir_all(&dotfiles).expect("mkdir dotfiles");
    fs::write(dotfiles.join("bashrc"), "# mine, no newline at the end").expect("write");
    fs::set_permissions(dotfiles.join("bashrc"), fs::Permissions::from_mode(0o600)).expect("chmod");
    std::os::unix::fs::symlink("dotfiles/bashrc", home.join(".bashrc")).expect("symlink");

    let mut c = Command::new(p.root().join("bin/landwall"));
    p.sb.clean_env(&mut c);
    c.env("SHELL", "/usr/bin/zsh")
        .args(["shim", "enable", "--user"]);
    let out = run(&mut c);
    assert!(out.status.success(), "enable: {}", stderr(&out));

    assert!(fs::symlink_metadata(home.join(".bashrc"))
        .expect("lstat")
        .file_type()
        .is_symlink());
    let text = read(&dotfiles.join("bashrc"));
    assert!(
        text.starts_with("# mine, no newline at the end\n"),
        "{text:?}"
    );
    assert!(
        text.lines().last().is_some_and(|l| l.contains(MARKER)),
        "{text:?}"
    );
    let mode = fs::metadata(dotfiles.join("bashrc"))
        .expect("stat")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    for absent in [".profile", ".bash_profile", ".bash_login"] {
        assert!(!home.join(absent).exists(), "{absent} was created");
    }
    let zshrc = read(&home.join(".zshrc"));
    assert_eq!(zshrc.lines().count(), 1, "{zshrc:?}");
    // The line is POSIX: sh runs it, and an empty PATH gets no empty (current directory)
    // entry from it.
    let out = p.sh(". \"$HOME/.zshrc\"; echo \"$PATH\"");
    assert!(
        stdout(&out).starts_with(&format!("{}:", p.shim_dir().display())),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let out = p.sh("PATH=; . \"$HOME/.zshrc\"; echo \"$PATH\"");
    assert_eq!(
        stdout(&out).trim(),
        p.shim_dir().display().to_string(),
        "{}",
        stderr(&out)
    );

    let mut c = Command::new(p.root().join("bin/landwall"));
    p.sb.clean_env(&mut c);
    c.args(["shim", "disable", "--user"]);
    let out = run(&mut c);
    assert!(out.status.success(), "disable: {}", stderr(&out));
    assert!(!read(&home.join(".zshrc")).contains(MARKER));
    assert!(!read(&dotfiles.join("bashrc")).contains(MARKER));
}

/// Without a shim directory beside it (the bare build in target/), or without --user, or
/// without a usable $HOME, nothing is written and the status says why.
#[test]
fn shim_enable_refuses_what_it_cannot_do() {
    let sb = Sandbox::new("pkg-shim-refuse");
    let out = run(sb.landwall().args(["shim", "enable", "--user"]));
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("lib/landwall/bin"),
        "{}",
        stderr(&out)
    );
    let out = run(sb.landwall().args(["shim", "enable"]));
    assert_eq!(out.status.code(), Some(EXIT_USAGE), "{}", stderr(&out));
    let p = Prefix::new("pkg-shim-nohome");
    let mut c = Command::new(p.root().join("bin/landwall"));
    p.sb.clean_env(&mut c);
    c.env_remove("HOME").args(["shim", "enable", "--user"]);
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{}", stderr(&out));
    let entries = fs::read_dir(p.home()).expect("ls home").count();
    assert_eq!(entries, 1, "only .local was there before");
}

/// The profile.d script, with its directory pointed at a scratch one (as `make install`
/// does for a PREFIX): prepends it once, keeps PATH when it is there already or when the
/// directory is gone (package removed, conffile kept), and adds no empty entry.
#[test]
fn profile_d_script_prepends_the_shim_directory_once() {
    let sb = Sandbox::new("pkg-profile-d");
    let dir = sb.root.join("lib/landwall/bin");
    fs::create_dir_all(&dir).expect("mkdir");
    let script = read(&packaging("profile.d/landwall.sh"));
    assert!(script.contains("/usr/lib/landwall/bin"));
    let local = sb.root.join("landwall.sh");
    fs::write(
        &local,
        script.replace("/usr/lib/landwall/bin", &dir.display().to_string()),
    )
    .expect("write script");
    let path_after = |path: &str| -> String {
        let out = run(Command::new("/bin/sh")
            .env_clear()
            .env("PATH", path)
            .arg("-c")
            .arg(format!(". '{}'; echo \"$PATH\"", local.display())));
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out).trim_end().to_string()
    };
    let d = dir.display().to_string();
    assert_eq!(path_after("/usr/bin:/bin"), format!("{d}:/usr/bin:/bin"));
    assert_eq!(
        path_after(&format!("/usr/bin:{d}:/bin")),
        format!("/usr/bin:{d}:/bin")
    );
    assert_eq!(path_after(""), d);
    fs::remove_dir(&dir).expect("rmdir");
    assert_eq!(path_after("/usr/bin:/bin"), "/usr/bin:/bin");
}

/// The conffile as shipped changes nothing (every setting commented out), is valid, and is
/// still valid with every commented setting uncommented.
#[test]
fn conffile_is_commented_defaults_that_parse() {
    let sb = Sandbox::new("pkg-conffile");
    let shipped = packaging("landwall.toml");
    let text = read(&shipped);
    for l in text.lines() {
        assert!(
            l.is_empty() || l.starts_with('#'),
            "not commented out: {l:?}"
        );
    }
    let uncommented: String = text
        .lines()
        .map(|l| match l.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(k, _)| {
                        k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    }) =>
            {
                format!("{rest}\n")
            }
            _ => format!("{l}\n"),
        })
        .collect();
    assert!(uncommented.contains("\n[drain]\nspool = "), "{uncommented}");
    let full = sb.config(&uncommented);
    for (what, file) in [("shipped", shipped), ("uncommented", full)] {
        let out = run(sb.landwall().arg("doctor").env("LANDWALL_CONFIG", &file));
        let text = stdout(&out);
        assert!(
            text.contains(&format!("{}: valid", file.display())),
            "{what}: {text}{}",
            stderr(&out)
        );
    }
}

/// The unit, drain.env, sysusers.d and tmpfiles.d agree with each other and with the
/// daemon: its documented exit statuses, its default spool, its environment flag.
#[test]
fn service_files_agree_with_the_daemon() {
    let unit = read(&packaging("systemd/landwall-drain.service"));
    let setting = |key: &str| -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix(&format!("{key}=")))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(setting("Type"), ["notify"]);
    assert_eq!(setting("User"), ["landwall"]);
    assert_eq!(setting("ExecStart"), ["/usr/bin/landwall-drain"]);
    assert_eq!(setting("EnvironmentFile"), ["-/etc/landwall/drain.env"]);
    // The spool, and the service's own delegated cgroup, where each job gets its cgroup.
    assert_eq!(
        setting("ReadWritePaths"),
        [
            "/var/spool/landwall",
            "-/sys/fs/cgroup/system.slice/landwall-drain.service"
        ]
    );
    assert_eq!(setting("Delegate"), ["yes"]);
    assert_eq!(setting("KillMode"), ["mixed"]);
    for (key, value) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("CapabilityBoundingSet", ""),
        ("RestrictNamespaces", "yes"),
        ("PrivateTmp", "yes"),
        ("ProtectHome", "yes"),
    ] {
        assert_eq!(setting(key), [value], "{key}");
    }
    let filter = setting("SystemCallFilter").join(" ");
    for call in [
        "landlock_create_ruleset",
        "landlock_add_rule",
        "landlock_restrict_self",
    ] {
        assert!(filter.contains(call), "{call} not allowed: {filter}");
    }
    // The statuses not to restart on are the daemon's "wall failed" and "configuration".
    let help = run(Command::new(bin_dir().join("landwall-drain")).arg("--help"));
    let help = stdout(&help);
    let prevent = setting("RestartPreventExitStatus").join(" ");
    for (code, meaning) in [("100", "wall"), ("78", "configuration")] {
        assert!(prevent.split(' ').any(|c| c == code), "{code}: {prevent}");
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{code} ")) && l.contains(meaning)),
            "landwall-drain --help does not say {code} is {meaning}: {help}"
        );
    }
    // drain.env turns the daemon's own wall on, and only that.
    let env = read(&packaging("drain.env"));
    let set: Vec<&str> = env
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(set, ["LANDWALL_DRAIN_SANDBOX=1"]);
    // The user and the spool the unit names.
    let sysusers = read(&packaging("sysusers.d/landwall.conf"));
    assert!(
        sysusers.lines().any(|l| l.starts_with("u landwall ")),
        "{sysusers}"
    );
    let tmpfiles = read(&packaging("tmpfiles.d/landwall.conf"));
    assert!(
        tmpfiles
            .lines()
            .any(|l| l == "d /var/spool/landwall 0750 landwall landwall -"),
        "{tmpfiles}"
    );
}
