//! `landwall shim enable|disable --user` run by root with a user's `HOME` (as `sudo -E` and
//! `su -m` leave it; issue 18, item 2): it edits only the regular files of the home's owner,
//! keeps their owner and mode, never follows a link out of the home, and refuses with one
//! line (exit 78) before writing anything otherwise. A user who is not root may only edit a
//! home of their own. Run as root (the test user is created on first use).

use std::fs;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use landwall_e2e::{
    chown_tree, install_binary, landwall, run, stderr, stdout, test_user, Sandbox, TEST_USER,
};

const EXIT_CONFIG: i32 = 78;
const MARKER: &str = "# landwall-shim-path";

/// A sandbox with an installed-like prefix (`prefix/bin/landwall`, the agent links in
/// `prefix/lib/landwall/bin`) and a home owned by the test user.
struct Scene {
    sb: Sandbox,
    uid: u32,
    gid: u32,
}

impl Scene {
    fn new(name: &str) -> Scene {
        let sb = Sandbox::new(name);
        let prefix = sb.root.join("prefix");
        fs::create_dir_all(prefix.join("bin")).expect("mkdir bin");
        fs::create_dir_all(prefix.join("lib/landwall/bin")).expect("mkdir shim dir");
        install_binary(&landwall(), &prefix.join("bin/landwall"));
        for a in ["claude", "opencode", "codex"] {
            symlink(
                "../../../bin/landwall",
                prefix.join("lib/landwall/bin").join(a),
            )
            .expect("link shim");
        }
        let (uid, gid) = test_user();
        chown_tree(&sb.home(), uid, gid);
        Scene { sb, uid, gid }
    }

    fn home(&self) -> PathBuf {
        self.sb.home()
    }

    /// A file of the test user's in the home (or wherever `rel` says), with `mode`.
    fn user_file(&self, rel: &str, text: &str, mode: u32) -> PathBuf {
        let p = self.home().join(rel);
        fs::write(&p, text).expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).expect("chmod");
        std::os::unix::fs::chown(&p, Some(self.uid), Some(self.gid)).expect("chown");
        p
    }

    /// A symlink of the test user's in the home.
    fn user_link(&self, rel: &str, to: impl AsRef<Path>) {
        let p = self.home().join(rel);
        symlink(to, &p).expect("symlink");
        std::os::unix::fs::lchown(&p, Some(self.uid), Some(self.gid)).expect("lchown");
    }

    /// `prefix/bin/landwall shim ACTION --user` as root, `HOME` the test user's home.
    fn root_runs(&self, action: &str) -> Output {
        self.landwall(action, None, &self.home())
    }

    /// The same as `uid`:`gid` (as the test user), with `HOME` set to `home`.
    fn landwall(&self, action: &str, who: Option<(u32, u32)>, home: &Path) -> Output {
        let mut c = Command::new(self.sb.root.join("prefix/bin/landwall"));
        self.sb.clean_env(&mut c);
        c.env("HOME", home)
            .env("SHELL", "/bin/bash")
            .args(["shim", action, "--user"]);
        if let Some((uid, gid)) = who {
            c.uid(uid).gid(gid);
        }
        run(&mut c)
    }
}

fn read(p: &Path) -> String {
    fs::read_to_string(p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

/// Owner, group and permission bits, not following a link.
fn owner_mode(p: &Path) -> (u32, u32, u32) {
    let m = fs::symlink_metadata(p).unwrap_or_else(|e| panic!("lstat {}: {e}", p.display()));
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

/// A refusal: exit 78 and one line on stderr that names `file`; nothing on stdout.
fn assert_refused(out: &Output, file: &str, why: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("landwall: shim: "), "{err}");
    assert!(err.contains(file), "does not name {file}: {err}");
    assert!(err.contains(why), "does not say {why:?}: {err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(stdout(out), "", "a refusal reports no edit");
}

/// The names in `dir`, sorted: no temporary file may be left behind.
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = fs::read_dir(dir)
        .expect("ls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

/// (a) and (d): `~/.bashrc` is the user's symlink to a root-owned file outside the home.
/// Root's enable and disable refuse it and write nothing, not even the user's other files;
/// a plain root append through the same link does reach the outside file.
#[test]
fn root_refuses_a_startup_file_linked_out_of_the_users_home() {
    let s = Scene::new("shim-enable-link-out");
    let outside = s.sb.outside().join("bash.bashrc");
    fs::write(&outside, "# root's own file\n").expect("write");
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).expect("chmod");
    s.user_link(".bashrc", &outside);
    let profile = s.user_file(".profile", "# ~/.profile\n", 0o644);

    let out = s.root_runs("enable");
    assert_refused(&out, ".bashrc", "leads out of");
    assert!(stderr(&out).contains(&outside.display().to_string()));
    assert_eq!(read(&outside), "# root's own file\n");
    assert_eq!(owner_mode(&outside), (0, 0, 0o644));
    assert_eq!(read(&profile), "# ~/.profile\n", "no file is written");
    assert!(fs::symlink_metadata(s.home().join(".bashrc"))
        .expect("lstat")
        .file_type()
        .is_symlink());

    // (d) disable: the outside file carries a marked line; it stays.
    let marked = format!("# root's own file\nPATH=/x {MARKER}\n");
    fs::write(&outside, &marked).expect("write");
    fs::write(&profile, format!("# ~/.profile\nPATH=/x {MARKER}\n")).expect("write");
    let out = s.root_runs("disable");
    assert_refused(&out, ".bashrc", "leads out of");
    assert_eq!(read(&outside), marked);
    assert!(read(&profile).contains(MARKER), "no file is written");
    assert_eq!(names(&s.home()), [".bashrc", ".profile"]);

    // Control: the link is live; root appending through it changes the outside file.
    let mut c = Command::new("/bin/sh");
    s.sb.clean_env(&mut c);
    c.args(["-c", "echo x >> \"$HOME/.bashrc\""]);
    let out = run(&mut c);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(read(&outside), format!("{marked}x\n"));
}

/// (b), (d) and (e): root edits the test user's regular dotfiles and a dotfile linked
/// within the home; each keeps its owner, group and mode, and a file created for a zsh user
/// is the home owner's, 0644. Enabling again changes nothing; disable restores every byte.
#[test]
fn root_edits_the_users_dotfiles_keeping_owner_and_mode() {
    let s = Scene::new("shim-enable-owner");
    let home = s.home();
    let bashrc_text = "# ~/.bashrc\nalias ll='ls -l'\n";
    let bashrc = s.user_file(".bashrc", bashrc_text, 0o600);
    fs::create_dir(home.join("dotfiles")).expect("mkdir");
    std::os::unix::fs::chown(home.join("dotfiles"), Some(s.uid), Some(s.gid)).expect("chown");
    let profile_text = "# profile, no newline at the end";
    let profile = s.user_file("dotfiles/profile", profile_text, 0o640);
    s.user_link(".profile", "dotfiles/profile");
    let before = [owner_mode(&bashrc), owner_mode(&profile)];
    assert_eq!(before, [(s.uid, s.gid, 0o600), (s.uid, s.gid, 0o640)]);

    let mut c = Command::new(s.sb.root.join("prefix/bin/landwall"));
    s.sb.clean_env(&mut c);
    c.env("SHELL", "/usr/bin/zsh")
        .args(["shim", "enable", "--user"]);
    let out = run(&mut c);
    assert!(out.status.success(), "enable: {}", stderr(&out));
    let text = stdout(&out);
    for name in [".bashrc", ".profile", ".zshrc"] {
        assert!(
            text.contains(&format!("{name}: PATH line added")),
            "{name}: {text}"
        );
    }
    assert_eq!([owner_mode(&bashrc), owner_mode(&profile)], before);
    assert_eq!(owner_mode(&home.join(".zshrc")), (s.uid, s.gid, 0o644));
    assert!(read(&bashrc).starts_with(bashrc_text));
    assert!(read(&profile).starts_with(&format!("{profile_text}\n")));
    for p in [&bashrc, &profile, &home.join(".zshrc")] {
        let t = read(p);
        assert!(
            t.lines().last().is_some_and(|l| l.contains(MARKER)),
            "{}: {t:?}",
            p.display()
        );
    }
    assert!(fs::symlink_metadata(home.join(".profile"))
        .expect("lstat")
        .file_type()
        .is_symlink());
    assert_eq!(names(&home), [".bashrc", ".profile", ".zshrc", "dotfiles"]);
    assert_eq!(names(&home.join("dotfiles")), ["profile"]);

    // (e) Idempotent: nothing is rewritten the second time.
    let files = [bashrc.clone(), profile.clone(), home.join(".zshrc")];
    let snapshot = || {
        files
            .iter()
            .map(|p| (read(p), fs::metadata(p).expect("stat").ino(), owner_mode(p)))
            .collect::<Vec<_>>()
    };
    let once = snapshot();
    let mut c = Command::new(s.sb.root.join("prefix/bin/landwall"));
    s.sb.clean_env(&mut c);
    c.env("SHELL", "/usr/bin/zsh")
        .args(["shim", "enable", "--user"]);
    let out = run(&mut c);
    assert!(out.status.success(), "enable again: {}", stderr(&out));
    assert_eq!(
        stdout(&out).matches("already has the line").count(),
        3,
        "{}",
        stdout(&out)
    );
    assert_eq!(snapshot(), once);

    // (d) disable: every byte back, owner and mode kept.
    let out = s.root_runs("disable");
    assert!(out.status.success(), "disable: {}", stderr(&out));
    assert_eq!(read(&bashrc), bashrc_text);
    assert_eq!(read(&profile), format!("{profile_text}\n"));
    assert_eq!(read(&home.join(".zshrc")), "");
    assert_eq!([owner_mode(&bashrc), owner_mode(&profile)], before);
    assert_eq!(owner_mode(&home.join(".zshrc")), (s.uid, s.gid, 0o644));
    let out = s.root_runs("disable");
    assert!(out.status.success(), "disable again: {}", stderr(&out));
    assert!(stdout(&out).contains("no startup file had the PATH line"));
}

/// (c) and (d): a startup file in the user's home that root owns is refused by enable and
/// disable, and so is a link within the home to a file root owns; the user's own files are
/// not written either.
#[test]
fn root_refuses_a_startup_file_of_another_user_in_the_home() {
    let s = Scene::new("shim-enable-other-owner");
    let home = s.home();
    let bashrc = s.user_file(".bashrc", "# mine\n", 0o644);
    let profile = home.join(".profile");
    fs::write(&profile, "# root's\n").expect("write");

    let out = s.root_runs("enable");
    assert_refused(
        &out,
        ".profile",
        &format!("owned by uid 0, not by uid {}", s.uid),
    );
    assert_eq!(read(&profile), "# root's\n");
    assert_eq!(owner_mode(&profile).0, 0);
    assert_eq!(read(&bashrc), "# mine\n", "no file is written");

    fs::write(&profile, format!("# root's\nPATH=/x {MARKER}\n")).expect("write");
    fs::write(&bashrc, format!("# mine\nPATH=/x {MARKER}\n")).expect("write");
    let out = s.root_runs("disable");
    assert_refused(&out, ".profile", "owned by uid 0");
    assert!(read(&profile).contains(MARKER));
    assert!(read(&bashrc).contains(MARKER), "no file is written");

    // A link within the home to a file of root's.
    fs::remove_file(&profile).expect("rm");
    let roots = home.join("roots-profile");
    fs::write(&roots, "# root's\n").expect("write");
    s.user_link(".profile", "roots-profile");
    let out = s.root_runs("enable");
    assert_refused(&out, ".profile", "owned by uid 0");
    assert_eq!(read(&roots), "# root's\n");
}

/// Someone other than root may not edit a home they do not own, and may edit their own.
#[test]
fn a_user_edits_only_a_home_of_their_own() {
    let s = Scene::new("shim-enable-user");
    let (uid, gid) = (s.uid, s.gid);
    let roots_home = s.sb.root.join("roots-home");
    fs::create_dir(&roots_home).expect("mkdir");
    fs::set_permissions(&roots_home, fs::Permissions::from_mode(0o777)).expect("chmod");
    let out = s.landwall("enable", Some((uid, gid)), &roots_home);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(EXIT_CONFIG), "{err}");
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(
        err.contains(&roots_home.display().to_string())
            && err.contains(&format!("not by you (uid {uid})")),
        "{err}"
    );
    assert_eq!(names(&roots_home), Vec::<String>::new());

    // In their own home, as themselves.
    let bashrc = s.user_file(".bashrc", "# mine\n", 0o600);
    let out = s.landwall("enable", Some((uid, gid)), &s.home());
    assert!(
        out.status.success(),
        "enable as {TEST_USER}: {}",
        stderr(&out)
    );
    assert!(read(&bashrc).contains(MARKER));
    assert_eq!(owner_mode(&bashrc), (uid, gid, 0o600));
    let out = s.landwall("disable", Some((uid, gid)), &s.home());
    assert!(out.status.success(), "disable: {}", stderr(&out));
    assert_eq!(read(&bashrc), "# mine\n");
}
