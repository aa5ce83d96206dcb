//! The code of the `landwall` binary, as a library so that `xtask` can build the man page and
//! the shell completions from the same clap definition ([`command`]). The binary (`main.rs`)
//! only dispatches on argv[0]: the admin CLI ([`cli`]) or the shim ([`shim`]).
#![forbid(unsafe_code)]

pub mod cli;
mod doctor;
mod jobs;
pub mod shim;
mod shimcmd;

pub use cli::command;
