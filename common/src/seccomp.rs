//! A small seccomp filter for what Landlock cannot see: terminal injection and MPTCP.
//!
//! - `TIOCSTI` pushes bytes into the terminal's input queue, so a walled agent could type a
//!   command into the user's shell after it exits; `TIOCLINUX` can do the same through the
//!   Linux console's selection. Both are refused (EPERM) on every descriptor. The request is
//!   compared as 32 bits, as the kernel's tty layer reads it: a 64-bit compare would let a
//!   request with high bits set slip through (CVE-2019-10063).
//! - When TCP port rules are configured, `socket(…, IPPROTO_MPTCP)` is refused with
//!   EPROTONOSUPPORT (programs fall back to TCP), because Landlock's TCP rules do not cover
//!   MPTCP.
//!
//! On x86_64 the x32 ABI has its own syscall numbers for both calls; they are filtered too.
//!
//! The terminal filter is installed only when there is a terminal to protect. The kernel
//! answers TIOCSTI and TIOCLINUX only on the caller's controlling terminal (anything else
//! needs CAP_SYS_ADMIN, which the launch has dropped for good), and a process can only make
//! a terminal its controlling one if no session owns it. So a process that has no
//! controlling terminal and no terminal on descriptors 0–2 (a CI job, a pipeline, a drain
//! job, an agent's subprocess with pipes) has no terminal of the user's to push input into,
//! and it is spared the filter, whose cost is on every system call it makes (a seccomp
//! filter takes the kernel's slower syscall entry even when the verdict is cached: 3–5% of
//! a syscall-heavy job, bench/results.md). What is left: a pseudo-terminal of the same user
//! that no session owns, opened through `/dev/pts`, can still be taken as the controlling
//! terminal and written into; docs/escape.md says so.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// `TIOCSTI` from `<asm-generic/ioctls.h>`.
pub const TIOCSTI: u64 = 0x5412;
/// `TIOCLINUX` from `<asm-generic/ioctls.h>`.
pub const TIOCLINUX: u64 = 0x541C;
/// `IPPROTO_MPTCP` from `<linux/in.h>`.
pub const IPPROTO_MPTCP: u64 = 262;

/// Why the filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// This architecture is not one seccompiler supports.
    #[error("seccomp: unsupported architecture {0}")]
    Arch(&'static str),
    /// Building the filter failed.
    #[error("seccomp: building the filter: {0}")]
    Build(String),
    /// Installing it failed.
    #[error("seccomp: installing the filter: {0}")]
    Install(String),
}

const X32_BIT: i64 = 0x4000_0000;

/// The syscall numbers of `name` on this architecture (x86_64 adds the x32 ones).
fn numbers(native: i64, x32: Option<i64>) -> Vec<i64> {
    let mut v = vec![native];
    if cfg!(target_arch = "x86_64") {
        if let Some(n) = x32 {
            v.push(X32_BIT | n);
        }
        v.push(X32_BIT | native);
    }
    v
}

fn eq32(arg: u8, value: u64) -> Result<SeccompRule, SeccompError> {
    let cond = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
        .map_err(|e| SeccompError::Build(e.to_string()))?;
    SeccompRule::new(vec![cond]).map_err(|e| SeccompError::Build(e.to_string()))
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|_| SeccompError::Arch(std::env::consts::ARCH))?;
    let errno = u32::try_from(errno).map_err(|e| SeccompError::Build(e.to_string()))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch,
    )
    .map_err(|e| SeccompError::Build(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SeccompError::Build(e.to_string()))
}

/// The terminal filter's rules: ioctl (native, x32 and the x32 alias of the native number)
/// with a 32-bit request of TIOCSTI or TIOCLINUX. (On x86_64 only the test compiles them.)
#[cfg_attr(all(target_arch = "x86_64", not(test)), allow(dead_code))]
fn tty_rules() -> Result<BTreeMap<i64, Vec<SeccompRule>>, SeccompError> {
    let mut tty = BTreeMap::new();
    for nr in numbers(libc::SYS_ioctl, Some(514)) {
        tty.insert(nr, vec![eq32(1, TIOCSTI)?, eq32(1, TIOCLINUX)?]);
    }
    Ok(tty)
}

/// One classic BPF instruction.
#[cfg(target_arch = "x86_64")]
const fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> seccompiler::sock_filter {
    seccompiler::sock_filter { code, jt, jf, k }
}

/// The terminal filter for x86_64, exactly as seccompiler compiles [`tty_rules`] with EPERM
/// (a unit test compiles the rules and compares): the program is constant, so the launch
/// installs it without compiling it every time. Opcodes: 0x20 load a word of
/// `seccomp_data`, 0x15 jump if equal, 0x05 jump, 0x06 return.
#[cfg(target_arch = "x86_64")]
const TTY_X86_64: [seccompiler::sock_filter; 41] = [
    // arch == AUDIT_ARCH_X86_64, else kill the process (i386 `int 0x80` included).
    bpf(0x20, 0, 0, 0x4),
    bpf(0x15, 1, 0, 0xc000_003e),
    bpf(0x06, 0, 0, 0x8000_0000),
    // nr == 16 (ioctl)?
    bpf(0x20, 0, 0, 0x0),
    bpf(0x15, 0, 1, 0x10),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    // low 32 bits of args[1] == TIOCSTI: EPERM
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x5412),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    // low 32 bits of args[1] == TIOCLINUX: EPERM; else allow
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x541c),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x06, 0, 0, 0x7fff_0000),
    // nr == 0x40000010 (the x32 alias of ioctl): the same two checks
    bpf(0x15, 0, 1, 0x4000_0010),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x5412),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x541c),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x06, 0, 0, 0x7fff_0000),
    // nr == 0x40000202 (x32 ioctl, 514): the same two checks
    bpf(0x15, 0, 1, 0x4000_0202),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x5412),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x05, 0, 0, 0x1),
    bpf(0x05, 0, 0, 0x4),
    bpf(0x20, 0, 0, 0x18),
    bpf(0x15, 0, 1, 0x541c),
    bpf(0x06, 0, 0, 0x0005_0001),
    bpf(0x06, 0, 0, 0x7fff_0000),
    // any other system call: allow
    bpf(0x06, 0, 0, 0x7fff_0000),
];

/// The terminal filter: the constant program on x86_64, compiled elsewhere.
fn tty_filter() -> Result<BpfProgram, SeccompError> {
    #[cfg(target_arch = "x86_64")]
    {
        Ok(TTY_X86_64.to_vec())
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        compile(tty_rules()?, libc::EPERM)
    }
}

/// Whether the terminal filter is needed: the process has a controlling terminal, or a
/// terminal on descriptor 0, 1 or 2 (inherited by the agent, and one it might take as its
/// controlling terminal). Anything but a clear "no" counts as yes.
pub fn terminal_reachable() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal()
        || std::io::stdout().is_terminal()
        || std::io::stderr().is_terminal()
        // `/dev/tty` is the controlling terminal; ENXIO is the kernel's "there is none".
        || !matches!(crate::sys::controlling_terminal(), Ok(false))
}

/// Builds the filters for a launch: the terminal filter when `terminal` (see
/// [`terminal_reachable`]), the MPTCP one when TCP port rules are set.
pub fn filters(terminal: bool, tcp_rules: bool) -> Result<Vec<BpfProgram>, SeccompError> {
    let mut out = Vec::new();
    if terminal {
        out.push(tty_filter()?);
    }
    if tcp_rules {
        let mut mptcp = BTreeMap::new();
        for nr in numbers(libc::SYS_socket, None) {
            mptcp.insert(nr, vec![eq32(2, IPPROTO_MPTCP)?]);
        }
        out.push(compile(mptcp, libc::EPROTONOSUPPORT)?);
    }
    Ok(out)
}

/// Installs the filters on the calling thread (no_new_privs must already be set).
pub fn install(filters: &[BpfProgram]) -> Result<(), SeccompError> {
    for f in filters {
        seccompiler::apply_filter(f).map_err(|e| SeccompError::Install(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_constant_terminal_filter_is_what_seccompiler_compiles() {
        let compiled = compile(tty_rules().expect("rules"), libc::EPERM).expect("compile");
        assert_eq!(tty_filter().expect("filter"), compiled);
    }

    #[test]
    fn filters_compile_for_this_machine() {
        assert!(filters(false, false).expect("none").is_empty());
        assert_eq!(filters(true, false).expect("tty filter").len(), 1);
        assert_eq!(filters(false, true).expect("mptcp filter").len(), 1);
        assert_eq!(filters(true, true).expect("both").len(), 2);
    }
}
