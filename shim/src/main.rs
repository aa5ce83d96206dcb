//! `landwall`: one binary, two faces. Under its own name it is the admin CLI; under any other
//! name (`claude`, `opencode`, `codex`, …: a link to it that sits ahead of the real agent on
//! PATH) it is the shim that walls that agent in and execs it.
//!
//! The binary brings its own C `main` (`no_main`) instead of Rust's generated one: the shim
//! runs on every agent launch, and std's start-up installs a stack-overflow handler whose
//! guard-page lookup reads `/proc/self/maps` — about a tenth of a whole launch on the
//! benchmark machine (bench/results.md), for a process that lives a millisecond and then
//! execs. What else std does there, `landwall::sys::runtime_init` does (descriptors 0–2,
//! SIGPIPE); arguments and environment still come through `std::env`, which glibc fills in
//! before `main`; and the exit goes through `std::process::exit`, which flushes stdout.
#![no_main]
#![deny(unsafe_code)]

use std::ffi::OsString;
use std::os::raw::{c_char, c_int};
use std::path::Path;

use landwall_cli::{cli, shim};

/// The process entry point, called by the C runtime.
// SAFETY: `no_mangle` (linted as unsafe code: an exported symbol can clash with another of
// the same name) exports `main` for the C runtime's `_start`. No other `main` is linked:
// `no_main` suppresses rustc's, and the binary has no test harness (`test = false` in
// Cargo.toml). This is the only exported symbol and the only unsafe-linted item outside
// `landwall::sys`.
#[allow(unsafe_code)]
#[no_mangle]
pub extern "C" fn main(_argc: c_int, _argv: *const *const c_char) -> c_int {
    std::process::exit(run())
}

fn run() -> i32 {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Err(e) = landwall::sys::runtime_init() {
        // Descriptors 0-2 could not be made safe: as the shim, the wall's status (the agent
        // does not start); as the CLI, a plain failure.
        eprintln!("landwall: start-up: {e}");
        return if name == "landwall" {
            1
        } else {
            landwall::exit::WALL
        };
    }
    let code = match name.as_str() {
        "landwall" => cli::main(argv),
        "" => {
            eprintln!(
                "landwall: started without argv[0]; run it as `landwall` or through an agent link"
            );
            landwall::exit::USAGE
        }
        agent => shim::main(agent, argv),
    };
    // Statuses are 0–255; anything else would be truncated by the kernel.
    if (0..=255).contains(&code) {
        code
    } else {
        1
    }
}
