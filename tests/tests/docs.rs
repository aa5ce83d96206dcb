//! The documentation's example configuration is a working configuration.

use std::path::PathBuf;

use landwall_e2e::{run, stderr, stdout, Sandbox};

fn example() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/landwall.toml.example");
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

fn allowed(policy: &serde_json::Value) -> Vec<String> {
    policy["env"]["allow"]
        .as_array()
        .expect("env.allow")
        .iter()
        .map(|v| v.as_str().expect("string").to_string())
        .collect()
}

/// The example, as shipped, gives a policy for each agent it configures; its additions show,
/// so it was really read (a missing file would silently mean the default policy).
#[test]
fn example_config_builds_a_policy() {
    let sb = Sandbox::new("docs-example");
    for (agent, own) in [("claude", "AWS_REGION"), ("codex", "AZURE_OPENAI_*")] {
        let out = run(sb
            .landwall()
            .args(["policy", "--json", "--agent", agent])
            .env("LANDWALL_CONFIG", example()));
        assert!(out.status.success(), "{agent}: {}", stderr(&out));
        let policy: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(policy["min_abi"], 3);
        // home = "private": $HOME itself is not granted, the agent's state is.
        let home = sb.home().display().to_string();
        let rules = policy["rules"].as_array().expect("rules");
        assert!(
            !rules.iter().any(|r| r["path"] == home.as_str()),
            "{agent}: $HOME is granted: {}",
            stdout(&out)
        );
        let state = sb.home().join(".cache").display().to_string();
        assert!(
            rules
                .iter()
                .any(|r| r["path"] == state.as_str() && r["access"] == "read-write"),
            "{agent}: ~/.cache is not writable: {}",
            stdout(&out)
        );
        let allow = allowed(&policy);
        for name in ["CARGO_HOME", "npm_config_*", own] {
            assert!(
                allow.iter().any(|a| a == name),
                "{agent}: no {name} in {allow:?}"
            );
        }
    }
}

/// Whether a commented-out line is TOML rather than prose: a quoted array item, a table
/// header, or `key = value`.
fn is_toml(line: &str) -> bool {
    let key_len = line
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    line.starts_with('"')
        || line.starts_with('[')
        || (key_len > 0 && line[key_len..].starts_with(" = "))
}

/// The commented-out lines are valid too once uncommented (their paths need not exist for
/// the configuration to parse; `landwall doctor` validates it without building a policy).
#[test]
fn example_config_commented_lines_are_valid() {
    let sb = Sandbox::new("docs-example-full");
    let text = std::fs::read_to_string(example()).expect("read example");
    let uncommented: String = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            match t.strip_prefix("# ") {
                Some(rest) if is_toml(rest) => rest.to_string(),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    for key in ["\nreal = ", "\n[network]", "\nconnect_tcp = "] {
        assert!(
            uncommented.contains(key),
            "`{}` was not uncommented",
            key.trim()
        );
    }
    let cfg = sb.config(&uncommented);
    let out = run(sb.landwall().arg("doctor").env("LANDWALL_CONFIG", &cfg));
    let report = stdout(&out);
    assert!(
        report.contains(&format!("{}: valid", cfg.display())),
        "uncommented example is not valid:\n{uncommented}\n---\n{report}"
    );
}
