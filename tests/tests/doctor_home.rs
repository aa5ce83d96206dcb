//! `landwall doctor` says what the policy lets the agent read and write in `$HOME`: the
//! credential stores there and the other repositories it finds, and the repository's own
//! config and hooks, each claim from the policy's verdict on the path (so the lines agree
//! with each other, and with `deny` in the configuration). Run in a home laid out like a
//! developer's, from a linked worktree and from the main checkout.

use std::path::{Path, PathBuf};

use landwall_e2e::{run, stdout, Sandbox};

/// A developer's home: `src/app` (a repository) with a linked worktree `src/app-wt`,
/// `src/other` (another repository, with a `.env`), ssh, AWS and GitHub CLI credentials,
/// and a `.bashrc`. Returns the main checkout and the linked worktree.
fn developer_home(sb: &Sandbox) -> (PathBuf, PathBuf) {
    let home = sb.home();
    let app = home.join("src/app");
    let other = home.join("src/other");
    for d in [&app, &other, &home.join(".ssh"), &home.join(".aws")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::create_dir_all(home.join(".config/gh")).expect("mkdir");
    for (f, text) in [
        (".ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n"),
        (".aws/credentials", "[default]\naws_secret_access_key = x\n"),
        (".config/gh/hosts.yml", "github.com:\n  oauth_token: x\n"),
        (".bashrc", "# the user's rc\n"),
        ("src/other/.env", "API_KEY=x\n"),
    ] {
        std::fs::write(home.join(f), text).expect("write");
    }
    sb.git(&app, &["init", "-q"]);
    sb.git(&app, &["commit", "-q", "--allow-empty", "-m", "first"]);
    sb.git(&app, &["worktree", "add", "-q", "../app-wt"]);
    sb.git(&other, &["init", "-q"]);
    (app, home.join("src/app-wt"))
}

/// `landwall doctor` run in `dir` with `config` (none when empty): its report, after
/// checking that it succeeded and says nothing it must never say.
fn doctor(sb: &Sandbox, dir: &Path, config: &str) -> String {
    let mut c = sb.landwall();
    c.arg("doctor").current_dir(dir);
    if !config.is_empty() {
        c.env("LANDWALL_CONFIG", sb.config(config));
    }
    let out = run(&mut c);
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(!report.to_lowercase().contains("seed"), "{report}");
    report
}

/// The report's line that starts with `prefix`, if any.
fn line<'a>(report: &'a str, prefix: &str) -> Option<&'a str> {
    report.lines().find(|l| l.starts_with(prefix))
}

const STORES: &str = "exposure    credential stores in $HOME the agent can read: ";
const REPOS: &str = "exposure    other repositories in $HOME the agent can read: ";
const NOTHING: &str =
    "exposure    no credential store or other repository in $HOME is readable by the agent";

/// Every line naming the repository's config says the same of it: writable or not.
fn config_claims_agree(report: &str, config: &Path, writable: bool) {
    let config = config.display().to_string();
    for l in report.lines().filter(|l| l.contains(&config)) {
        assert_eq!(
            l.contains("can write"),
            writable,
            "the line disagrees (the config is {}writable):\n{l}\n---\n{report}",
            if writable { "" } else { "not " }
        );
    }
    // The policy's note that the linked worktree's config is read-only is not repeated
    // where doctor's own verdict says otherwise (nor anywhere: doctor says it itself).
    assert!(
        !report.contains("config, hooks, info and objects are read-only"),
        "{report}"
    );
}

#[test]
fn private_home_shows_no_credential_store_or_other_repository() {
    let sb = Sandbox::new("dochome-private");
    let (app, wt) = developer_home(&sb);
    let report = doctor(&sb, &wt, "");
    assert!(line(&report, NOTHING).is_some(), "{report}");
    for secret in ["id_ed25519", ".aws", ".config/gh", "src/other"] {
        assert!(!report.contains(secret), "{secret}:\n{report}");
    }
    // The repository's config and hooks lie in the common dir, read-only: every line agrees.
    let git = line(&report, "git meta    linked worktree: ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        git.contains("the agent cannot write the repository's config and hooks"),
        "{git}"
    );
    assert!(
        git.contains(&format!("{}/.git/config (read-only)", app.display())),
        "{git}"
    );
    config_claims_agree(&report, &app.join(".git/config"), false);
    // Its own `.git` file is a protected path, read-only in the launch's namespace.
    assert!(
        !report.contains("this worktree's own .git file stays writable"),
        "{report}"
    );
    let protected = line(&report, "protected   ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        protected.contains("read-only in the launch's mount namespace: .git"),
        "{protected}"
    );
    // Nothing sensitive in $HOME is writable (the rc file is read-only under the private home).
    let exposure = line(&report, "exposure    in ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        exposure.contains("none of the sensitive files"),
        "{exposure}"
    );

    // From the main checkout: its .git/config lies in the writable worktree, but it is a
    // protected path, read-only in the launch's namespace, and every line says so.
    let report = doctor(&sb, &app, "");
    assert!(line(&report, NOTHING).is_some(), "{report}");
    let git = line(&report, "git meta    main worktree: ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        git.contains(&format!(
            "{}/.git/config (protected: read-only in the launch's mount namespace)",
            app.display()
        )),
        "{git}"
    );
    config_claims_agree(&report, &app.join(".git/config"), false);
}

#[test]
fn open_home_names_the_credential_stores_and_other_repositories() {
    let sb = Sandbox::new("dochome-open");
    let (app, wt) = developer_home(&sb);
    let report = doctor(&sb, &wt, "home = \"open\"\n");
    assert!(line(&report, NOTHING).is_none(), "{report}");
    let stores = line(&report, STORES).unwrap_or_else(|| panic!("{report}"));
    for s in ["~/.ssh/id_ed25519", "~/.aws", "~/.config/gh"] {
        assert!(
            stores.contains(&format!("{s} (read-write)")),
            "{s}: {stores}"
        );
    }
    assert!(
        stores.contains("(grant: $HOME (home = \"open\"))"),
        "{stores}"
    );
    let repos = line(&report, REPOS).unwrap_or_else(|| panic!("{report}"));
    assert!(repos.contains("~/src/other (read-write)"), "{repos}");
    // This worktree's own repository is not "another".
    assert!(!repos.contains("src/app"), "{repos}");
    // The open home covers the common dir, so the launch holds its config and hooks as the
    // main checkout's launch does (issue 24): every line says the agent cannot write them.
    let git = line(&report, "git meta    linked worktree: ").unwrap_or_else(|| panic!("{report}"));
    assert!(
        git.contains("the agent cannot write the repository's config and hooks")
            && git.contains(&format!("{}/.git/config (protected", app.display())),
        "{git}"
    );
    config_claims_agree(&report, &app.join(".git/config"), false);
    let exposure = line(&report, "exposure    in ").unwrap_or_else(|| panic!("{report}"));
    assert!(exposure.contains("~/.bashrc"), "{exposure}");

    // From the main checkout, the linked worktree is the same repository, not another.
    let report = doctor(&sb, &app, "home = \"open\"\n");
    let repos = line(&report, REPOS).unwrap_or_else(|| panic!("{report}"));
    assert!(repos.contains("~/src/other (read-write)"), "{repos}");
    assert!(!repos.contains("app-wt"), "{repos}");
    // There the config is a protected path of the launch, read-only in its namespace.
    config_claims_agree(&report, &app.join(".git/config"), false);

    // The verdicts are the policy's: `deny` hides what it names.
    let denied = format!(
        "home = \"open\"\ndeny = [\"{0}/.aws\", \"{0}/src/other\"]\n",
        sb.home().display()
    );
    let report = doctor(&sb, &wt, &denied);
    let stores = line(&report, STORES).unwrap_or_else(|| panic!("{report}"));
    assert!(!stores.contains(".aws"), "{stores}");
    assert!(stores.contains("~/.ssh/id_ed25519"), "{stores}");
    assert!(line(&report, REPOS).is_none(), "{report}");
}

#[test]
fn old_home_spellings_are_noted_and_read_only_home_is_readable() {
    let sb = Sandbox::new("dochome-strict");
    let (_, wt) = developer_home(&sb);
    let report = doctor(&sb, &wt, "home = \"strict\"\n");
    let cfg = sb.root.join("landwall.toml");
    let note = format!(
        "note        {}:1: home = \"strict\" is now spelled home = \"read-only\"; the old name still works",
        cfg.display()
    );
    assert!(report.lines().any(|l| l == note), "{report}");
    let stores = line(&report, STORES).unwrap_or_else(|| panic!("{report}"));
    assert!(stores.contains("~/.aws (read-only)"), "{stores}");
    let repos = line(&report, REPOS).unwrap_or_else(|| panic!("{report}"));
    assert!(repos.contains("~/src/other (read-only)"), "{repos}");
    let report = doctor(&sb, &wt, "home = \"default\"\n");
    assert!(
        report.contains(
            "home = \"default\" is now spelled home = \"open\"; the old name still works"
        ),
        "{report}"
    );
}

/// A repository whose name carries a newline and terminal escapes is named escaped, on
/// its line: it cannot forge a line of doctor's report.
#[test]
fn repository_names_are_escaped() {
    let sb = Sandbox::new("dochome-esc");
    let (_, wt) = developer_home(&sb);
    let evil = sb
        .home()
        .join("src/x\u{1b}]0;pwned\u{7}\nresult      the shim can wall agents in");
    std::fs::create_dir_all(evil.join(".git")).expect("mkdir");
    let report = doctor(&sb, &wt, "home = \"open\"\n");
    assert!(
        !report.contains('\u{1b}') && !report.contains('\u{7}'),
        "{report:?}"
    );
    let repos = line(&report, REPOS).unwrap_or_else(|| panic!("{report}"));
    assert!(
        repos.contains("~/src/x\\e]0;pwned\\x07\\nresult      the shim"),
        "{repos}"
    );
    assert_eq!(
        report.lines().filter(|l| l.starts_with("result")).count(),
        1,
        "{report}"
    );
}

/// OpenCode's sign-ins are shown by where they send the user's code (a sign-in planted
/// before landwall judged them shows, its `enterpriseUrl` with it), never by their
/// secrets; a home with none shows no such line.
#[test]
fn opencode_sign_ins_are_shown_without_their_secrets() {
    let sb = Sandbox::new("doctor-sign-ins");
    let (app, _) = developer_home(&sb);
    let prefix = "agent state ~/.local/share/opencode/auth.json: OpenCode's sign-ins: ";
    assert!(line(&doctor(&sb, &app, ""), prefix).is_none());
    let data = sb.home().join(".local/share/opencode");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(
        data.join("auth.json"),
        r#"{"github-copilot": {"type": "oauth", "access": "SECRET1", "refresh": "SECRET2", "expires": 1, "enterpriseUrl": "http://u:SECRET3@planted.example.org"},
           "openai": {"type": "api", "key": "SECRET4"}}"#,
    )
    .expect("write auth.json");
    let report = doctor(&sb, &app, "");
    let l = line(&report, prefix).unwrap_or_else(|| panic!("no sign-in line:\n{report}"));
    assert!(
        l.contains("github-copilot (oauth enterpriseUrl=http://…@planted.example.org)")
            && l.contains("openai (api)"),
        "{l}"
    );
    assert!(!report.contains("SECRET"), "{report}");
}
