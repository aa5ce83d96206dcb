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

/// Builds the filters for a launch: the terminal filter always, the MPTCP one when TCP
/// port rules are set.
pub fn filters(tcp_rules: bool) -> Result<Vec<BpfProgram>, SeccompError> {
    let mut out = Vec::new();
    out.push(tty_filter()?);
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
        assert_eq!(filters(false).expect("tty filter").len(), 1);
        assert_eq!(filters(true).expect("both").len(), 2);
    }
}
