//! `landwall-drain`'s command line as a library, so that `xtask` builds the man page and the
//! shell completions from the same clap definition ([`command`]). The daemon is the binary.
#![forbid(unsafe_code)]

pub mod args;

/// The clap definition of `landwall-drain`.
pub fn command() -> clap::Command {
    <args::Cli as clap::CommandFactory>::command()
}
