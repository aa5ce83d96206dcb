//! The hard environment denylist end to end: with a configuration whose `env_allow` takes
//! every prefix involved, no variable that makes a program load or run code reaches the
//! agent, while its harmless siblings do and what landwall sets itself is still set. The
//! control shows that, without the wall, the same variables do make git, python and node
//! run code.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use landwall_e2e::{describe, run, stdout, Sandbox};

/// Every prefix the variables below start with, so that only the denylist can drop them.
const ALLOW_ALL_INVOLVED: &str = r#"env_allow = [
    "GIT_*", "NODE_*", "BUN_*", "npm_config_*", "NPM_CONFIG_*", "PYTHON*", "PERL*", "RUBY*",
    "JAVA_*", "_JAVA_*", "JDK_*", "CLASSPATH", "LESS*", "OPENSSL_*", "ZDOTDIR", "FPATH",
    "ENV", "PS*", "PROMPT_COMMAND", "SSH_*", "WGET*", "BROWSER",
]
"#;

/// Variables on the denylist, with values that would matter if they passed.
const DENIED: &[(&str, &str)] = &[
    ("GIT_CONFIG_PARAMETERS", "'alias.lwx=!touch /nonexistent/x'"),
    ("GIT_CONFIG_COUNT", "1"),
    ("GIT_CONFIG_KEY_0", "core.pager"),
    ("GIT_CONFIG_VALUE_0", "touch /nonexistent/x"),
    ("GIT_CONFIG_GLOBAL", "/nonexistent/gitconfig"),
    ("GIT_SSH_COMMAND", "touch /nonexistent/x"),
    ("GIT_ASKPASS", "/nonexistent/askpass"),
    ("GIT_EXEC_PATH", "/nonexistent"),
    ("GIT_PAGER", "touch /nonexistent/x"),
    ("GIT_DIR", "/nonexistent/.git"),
    ("GIT_OBJECT_DIRECTORY", "/nonexistent/objects"),
    ("NODE_OPTIONS", "--require=/nonexistent/x.js"),
    ("NODE_PATH", "/nonexistent"),
    ("BUN_OPTIONS", "--preload=/nonexistent/x.js"),
    ("npm_config_script_shell", "/nonexistent/sh"),
    ("NPM_CONFIG_NODE_OPTIONS", "--require=/nonexistent/x.js"),
    ("npm_config_userconfig", "/nonexistent/npmrc"),
    ("PYTHONPATH", "/nonexistent"),
    ("PYTHONSTARTUP", "/nonexistent/x.py"),
    ("PYTHONWARNINGS", "ignore::antigravity.X"),
    ("PERL5OPT", "-M/nonexistent"),
    ("PERLLIB", "/nonexistent"),
    ("RUBYOPT", "-r/nonexistent"),
    ("RUBYLIB", "/nonexistent"),
    ("JAVA_TOOL_OPTIONS", "-javaagent:/nonexistent.jar"),
    ("_JAVA_OPTIONS", "-javaagent:/nonexistent.jar"),
    ("CLASSPATH", "/nonexistent"),
    ("LESSOPEN", "|touch /nonexistent/x %s"),
    ("LESS", "+!touch /nonexistent/x"),
    ("OPENSSL_CONF", "/nonexistent/openssl.cnf"),
    ("ZDOTDIR", "/nonexistent"),
    ("ENV", "/nonexistent/x.sh"),
    ("PS1", "$(touch /nonexistent/x)"),
    ("PROMPT_COMMAND", "touch /nonexistent/x"),
    ("SSH_ASKPASS", "/nonexistent/askpass"),
    ("BROWSER", "/nonexistent/browser"),
];

/// Harmless siblings of the denied names: the configuration allows them, so they pass.
const KEPT: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "Ann Author"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("NODE_ENV", "test"),
    ("npm_config_registry", "https://registry.npmjs.org/"),
    ("PYTHONUNBUFFERED", "1"),
    ("PERL_UNICODE", "SDA"),
    ("RUBY_VERSION", "3.3.0"),
    ("JAVA_HOME", "/usr/lib/jvm/default"),
    ("LESSCHARSET", "utf-8"),
    ("PS_FORMAT", "pid,comm"),
];

/// The names in a `env -0` dump.
fn names(dump: &[u8]) -> BTreeSet<String> {
    dump.split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| {
            let name = v.split(|b| *b == b'=').next().unwrap_or_default();
            String::from_utf8_lossy(name).into_owned()
        })
        .collect()
}

#[test]
fn denied_variables_never_reach_the_agent_whatever_env_allow_says() {
    let sb = Sandbox::new("env-deny");
    let cfg = sb.config(ALLOW_ALL_INVOLVED);
    sb.agent_script("claude", "env -0 > \"$PWD/env.txt\"");
    let mut shim = sb.shim("claude");
    shim.env("LANDWALL_CONFIG", &cfg);
    for (k, v) in DENIED.iter().chain(KEPT) {
        shim.env(k, v);
    }
    let out = run(&mut shim);
    assert!(out.status.success(), "{}", describe(&out));
    let dump = std::fs::read(sb.wt().join("env.txt")).expect("the agent's env.txt");
    let seen = names(&dump);
    for (k, _) in DENIED {
        assert!(!seen.contains(*k), "{k} reached the agent: {seen:?}");
    }
    for (k, _) in KEPT {
        assert!(seen.contains(*k), "{k} did not reach the agent: {seen:?}");
    }
    // What landwall sets itself is still set (the private home's npm cache, TMPDIR).
    for k in ["PATH", "HOME", "TERM", "LANG", "TMPDIR", "npm_config_cache"] {
        assert!(seen.contains(k), "{k} missing: {seen:?}");
    }

    // `landwall policy` says the same: the denied names dropped, the siblings passed.
    let mut policy = sb.landwall();
    policy
        .args(["policy", "--json"])
        .env("LANDWALL_CONFIG", &cfg);
    for (k, v) in DENIED.iter().chain(KEPT) {
        policy.env(k, v);
    }
    let out = run(&mut policy);
    assert!(out.status.success(), "{}", describe(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("policy json");
    let list = |key: &str| -> BTreeSet<String> {
        json["env"][key]
            .as_array()
            .unwrap_or_else(|| panic!("env.{key} in {}", stdout(&out)))
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect()
    };
    let (passed, dropped) = (list("passed"), list("dropped"));
    for (k, _) in DENIED {
        assert!(
            dropped.contains(*k),
            "policy does not drop {k}: {dropped:?}"
        );
    }
    for (k, _) in KEPT {
        assert!(passed.contains(*k), "policy does not pass {k}: {passed:?}");
    }
}

/// Writes the files the variables below point at, in the stand-in agents' directory (which
/// the wall grants read-only): a `sitecustomize.py` and a `--require` script, each leaving a
/// marker in the worktree when it runs.
fn injections(sb: &Sandbox) -> Vec<(String, String)> {
    let dir = sb.agents().join("inject");
    std::fs::create_dir_all(&dir).expect("mkdir inject");
    let wt = sb.wt();
    let marker = |name: &str| wt.join(name).display().to_string();
    std::fs::write(
        dir.join("sitecustomize.py"),
        format!("open({:?}, 'w').close()\n", marker("python-ran")),
    )
    .expect("write sitecustomize.py");
    std::fs::write(
        dir.join("inject.js"),
        format!(
            "require('fs').writeFileSync({:?}, '')\n",
            marker("node-ran")
        ),
    )
    .expect("write inject.js");
    vec![
        ("PYTHONPATH".into(), dir.display().to_string()),
        (
            "GIT_CONFIG_PARAMETERS".into(),
            format!("'alias.lwx=!touch {}'", marker("git-alias-ran")),
        ),
        (
            "GIT_SSH_COMMAND".into(),
            format!("touch {}; false", marker("git-ssh-ran")),
        ),
        (
            "NODE_OPTIONS".into(),
            format!("--require={}", dir.join("inject.js").display()),
        ),
    ]
}

/// Runs python, git (an alias, then a fetch over ssh) and node, then says which ran.
const PROGRAMS: &str = "python3 -c 'print(\"python ok\")'\n\
    git lwx >/dev/null 2>&1\n\
    git ls-remote ssh://127.0.0.1:1/none >/dev/null 2>&1\n\
    if command -v node >/dev/null; then node -e 'console.log(\"node ok\")'; fi\n";

fn has_node() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn injecting_variables_run_code_without_the_wall_and_not_behind_it() {
    let sb = Sandbox::new("env-deny-control");
    let cfg = sb.config(ALLOW_ALL_INVOLVED);
    let vars = injections(&sb);
    let node = has_node();
    let mut markers = vec!["python-ran", "git-alias-ran", "git-ssh-ran"];
    if node {
        markers.push("node-ran");
    } else {
        eprintln!("node is not installed: NODE_OPTIONS is not exercised");
    }
    let ran = |wt: &Path| -> Vec<&str> {
        markers
            .iter()
            .copied()
            .filter(|m| wt.join(m).exists())
            .collect()
    };

    // Behind the wall: the programs run, the injections do not.
    sb.agent_script("claude", PROGRAMS);
    let mut shim = sb.shim("claude");
    shim.env("LANDWALL_CONFIG", &cfg);
    for (k, v) in &vars {
        shim.env(k, v);
    }
    let out = run(&mut shim);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(stdout(&out).contains("python ok"), "{}", describe(&out));
    if node {
        assert!(stdout(&out).contains("node ok"), "{}", describe(&out));
    }
    assert_eq!(ran(&sb.wt()), Vec::<&str>::new(), "{}", describe(&out));

    // The control: the same programs with the same variables, without the wall.
    let mut control = Command::new("/bin/sh");
    sb.clean_env(&mut control);
    control.current_dir(sb.wt()).arg("-c").arg(PROGRAMS);
    for (k, v) in &vars {
        control.env(k, v);
    }
    let out = run(&mut control);
    assert!(stdout(&out).contains("python ok"), "{}", describe(&out));
    assert_eq!(ran(&sb.wt()), markers, "{}", describe(&out));
}
