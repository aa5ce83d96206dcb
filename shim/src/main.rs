//! `landwall`: one binary, two faces. Under its own name it is the admin CLI; under any other
//! name (`claude`, `opencode`, `codex`, …: a link to it that sits ahead of the real agent on
//! PATH) it is the shim that walls that agent in and execs it.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use landwall_cli::{cli, shim};

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    let name = argv
        .first()
        .and_then(|a| Path::new(a).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
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
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}
