//! `landwall doctor` names the doors beside the wall it can see: loopback TCP listeners the
//! agent could connect to under `[network]`, and, when `[unix] allow_all` opens them, the
//! Unix sockets servers listen on. Each test binds the listener itself and looks for it.

use std::net::TcpListener;
use std::os::unix::net::UnixListener;

use landwall_e2e::{run, stdout, Sandbox};

/// `landwall doctor` with `config` (none when empty): its exit status and report.
fn doctor(sb: &Sandbox, config: &str) -> (Option<i32>, String) {
    let mut c = sb.landwall();
    c.arg("doctor");
    if !config.is_empty() {
        c.env("LANDWALL_CONFIG", sb.config(config));
    }
    let out = run(&mut c);
    (out.status.code(), stdout(&out))
}

/// The report's line for a loopback listener on `port`, if it names one.
fn port_line(report: &str, port: u16) -> Option<&str> {
    let want = format!("  tcp port {port:<5} ");
    report.lines().find(|l| l.starts_with(&want))
}

#[test]
fn doctor_names_the_loopback_listeners_the_agent_can_reach() {
    let sb = Sandbox::new("doors-tcp");
    sb.agent_script("claude", "true");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();

    // No [network]: every loopback listener is reachable, ours among them, with its owner.
    let (code, report) = doctor(&sb, "");
    assert_eq!(code, Some(0), "{report}");
    let line = port_line(&report, port).unwrap_or_else(|| panic!("port {port}:\n{report}"));
    assert!(line.contains("127.0.0.1"), "{line}");
    assert!(
        report.contains("exposure    loopback TCP: the agent can connect to")
            && report.contains("[network] connect_tcp is not set")
            && report.contains("to close: set [network] connect_tcp = [443, …]"),
        "{report}"
    );

    // connect_tcp names another port: ours is not reachable, so not listed.
    let other = if port == 65535 { 65534 } else { port + 1 };
    let (code, report) = doctor(&sb, &format!("[network]\nconnect_tcp = [{other}]\n"));
    assert_eq!(code, Some(0), "{report}");
    assert!(port_line(&report, port).is_none(), "{report}");
    assert!(report.contains("MPTCP"), "{report}");

    // connect_tcp names ours: listed again.
    let (_, report) = doctor(&sb, &format!("[network]\nconnect_tcp = [{port}]\n"));
    assert!(port_line(&report, port).is_some(), "{report}");
    drop(listener);
}

#[test]
fn doctor_reports_allow_all_as_exposure_and_lists_the_sockets() {
    let sb = Sandbox::new("doors-unix");
    sb.agent_script("claude", "true");
    // A name with a control character: printed escaped.
    let path = sb.outside().join("door\x1b[2J.sock");
    let listener = UnixListener::bind(&path).expect("bind");
    let shown = sb.outside().join("door\\e[2J.sock").display().to_string();

    // The default: the socket is no door, so it is not listed.
    let (code, report) = doctor(&sb, "");
    assert_eq!(code, Some(0), "{report}");
    assert!(report.contains("\nunix        refused"), "{report}");
    assert!(!report.contains(&shown), "{report}");

    let (code, report) = doctor(&sb, "[unix]\nallow_all = true\n");
    assert_eq!(code, Some(0), "{report}");
    assert!(
        report.contains("exposure    Unix sockets: allow_all in [unix]")
            && report.contains("to close: remove `allow_all` from [unix]"),
        "{report}"
    );
    let line = report
        .lines()
        .find(|l| l.starts_with("  socket    ") && l.contains(&shown))
        .unwrap_or_else(|| panic!("{shown}:\n{report}"));
    // Owners are looked for within a time budget: when one is named, it is this process.
    assert!(
        !line.contains("pid") || line.contains(&format!("pid {})", std::process::id())),
        "{line}"
    );
    assert!(!report.contains('\x1b'), "raw escape: {report:?}");
    drop(listener);
}

/// Sockets named below Landlock ABI 9 mean every launch is refused: doctor fails.
#[test]
fn doctor_fails_when_named_sockets_cannot_be_enforced() {
    let sb = Sandbox::new("doors-named");
    sb.agent_script("claude", "true");
    let path = sb.outside().join("named.sock");
    let _listener = UnixListener::bind(&path).expect("bind");
    let (code, report) = doctor(
        &sb,
        &format!("[unix]\nsockets = [\"{}\"]\n", path.display()),
    );
    let abi_9 = report.contains("[x] RESOLVE_UNIX");
    if abi_9 {
        assert_eq!(code, Some(0), "{report}");
        assert!(
            report.contains("refused by path (Landlock ABI 9) except"),
            "{report}"
        );
    } else {
        assert_eq!(code, Some(1), "{report}");
        assert!(
            report.contains("launches are REFUSED (exit 78)"),
            "{report}"
        );
    }
}
