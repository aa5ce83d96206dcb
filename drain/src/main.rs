//! `landwall-drain`: placeholder until the drain issue lands.
#![forbid(unsafe_code)]

fn main() {}
