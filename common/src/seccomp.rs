//! The seccomp filter: the doors beside the wall that Landlock does not see.
//!
//! Landlock guards paths. A walled agent that cannot open a file can still ask a program
//! outside the wall to act for it, and some kernel objects have no path at all. The filter
//! goes on every launch (shim, `landwall run`, drain jobs, the drain daemon's own wall) and
//! refuses, with errors programs already handle:
//!
//! - **Unix sockets of processes outside the wall** (tmux, the session D-Bus, docker.sock,
//!   ssh-agent, X11, journald): `socket(AF_UNIX, …)` gets EACCES, and so does a
//!   `socketpair(AF_UNIX, …)` of any type but stream and seqpacket (a datagram pair, or a
//!   SOCK_RAW one, which the kernel makes a datagram pair, can be re-pointed at any path by
//!   `connect` or `sendto`; stream and seqpacket pairs are connected for good, and runtimes
//!   build their pipes with them). The filter cannot read the address `connect` is given,
//!   so without a socket to give it there is nothing to connect. Left out on Landlock ABI 9
//!   and later, where `LANDLOCK_ACCESS_FS_RESOLVE_UNIX` refuses by path (and lets the agent
//!   reach its own sockets and the ones the user named), and when the configuration opens
//!   this door on purpose (`[unix] allow_all`).
//! - **io_uring** (`io_uring_setup`, `_enter`, `_register`: ENOSYS, so runtimes fall back):
//!   its socket and connect operations never pass through this filter.
//! - **`clone3`** (ENOSYS, so libc and runtimes fall back to `clone`): its
//!   `CLONE_INTO_CGROUP` starts the child in any cgroup whose `cgroup.procs` the uid may
//!   write, a move no path rule sees (a root drain job left its cgroup, and its caps, that
//!   way). Its arguments are in memory, which the filter cannot read, so all of it goes.
//! - **Kernel keyrings** (`add_key`, `request_key`, `keyctl`: EPERM): the user's session,
//!   user and persistent keyrings hold Kerberos caches and stored passwords, readable and
//!   changeable by any process of the uid.
//! - **Terminal input** (`ioctl` TIOCSTI and TIOCLINUX: EPERM) on every descriptor: pushing
//!   bytes into the terminal's input types a command into the user's shell after the agent
//!   exits. The request is compared as 32 bits, as the tty layer reads it: a 64-bit compare
//!   would let a request with high bits set slip through (CVE-2019-10063).
//! - **Setuid bits** (`chmod`, `fchmod`, `fchmodat`, `fchmodat2` with S_ISUID in the mode:
//!   EPERM). Landlock does not restrict changing a file's mode, and a walled root agent, its
//!   capabilities dropped, still owns `/usr` and `/etc`: it could make any program there
//!   setuid root for whoever runs it next. (A file created with the bit loses it at its first
//!   write by a process without CAP_FSETID, so creation modes need no rule.) S_ISGID too for
//!   an agent running as root; an unprivileged one may keep it (`chmod` on a directory of a
//!   setgid tree passes it back, and its groups are its own).
//! - **Other processes' limits and scheduling** (`prlimit64`, `sched_setscheduler`,
//!   `sched_setattr`, `sched_setparam`, `sched_setaffinity` on any pid but 0; `setpriority` and `ioprio_set` on anything but the
//!   calling process, `who` 0: EPERM). The launch's watcher runs outside the wall as the
//!   same uid, and Landlock's signal scope does not cover the signals the kernel itself
//!   sends: an `RLIMIT_CPU` of 0 set on the watcher killed it (found by review), a file or
//!   descriptor limit blinds it, and an idle policy, the lowest priority or a CPU crowded with
//!   busy processes it is pinned to (found by review: a plant then stood 28 s) slows it. A
//!   process changes its own (pid 0) as ever: `ulimit`, `nice`.
//! - **MPTCP** (`socket(…, IPPROTO_MPTCP)`: EPROTONOSUPPORT, programs fall back to TCP) when
//!   TCP port rules are set: Landlock's TCP rules do not cover it.
//!
//! Other entry points: on x86_64 the i386 table (`int 0x80`) gets the same rules by its own
//! numbers, and its `socketcall` may not create sockets (its arguments are in memory, which
//! the filter cannot read); every x32 system call gets ENOSYS (x32 programs practically do
//! not exist, and its numbers are a second table to keep right). Any other architecture is
//! killed.
//!
//! The program is written out here, not compiled by a library: it is a few dozen
//! instructions chosen by two flags, built without allocation beyond one vector and installed
//! with one system call. It only compares the system call number and the architecture except
//! in the blocks of the calls it looks into, so the kernel's verdict cache (Linux 5.11) lets
//! every other native call through without running it.

use std::fmt;

use crate::sys;

/// `TIOCSTI` from `<asm-generic/ioctls.h>`.
pub const TIOCSTI: u32 = 0x5412;
/// `TIOCLINUX` from `<asm-generic/ioctls.h>`.
pub const TIOCLINUX: u32 = 0x541C;
/// `IPPROTO_MPTCP` from `<linux/in.h>`.
pub const IPPROTO_MPTCP: u32 = 262;
/// The errno a refused Unix socket gets (what Landlock's own refusal by path returns).
pub const UNIX_ERRNO: i32 = libc::EACCES;
/// The errno a refused keyring call gets.
pub const KEYRING_ERRNO: i32 = libc::EPERM;

/// Why the filter could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// The program did not assemble (a jump too far: a bug, caught by the unit tests).
    #[error("seccomp: building the filter: {0}")]
    Build(String),
    /// Installing it failed.
    #[error("seccomp: installing the filter: {0}")]
    Install(#[source] std::io::Error),
    /// The filter could not be installed with a listener ([`install_with_listener`]).
    #[error("seccomp: installing the filter with the listener by which the watcher knows when the agent's last process has ended: {0}{hint}", hint = if .0.raw_os_error() == Some(libc::EBUSY) { " (a filter in force already has one: this runs under a container runtime or supervisor that intercepts system calls; run the agent outside it)" } else { "" })]
    Listener(#[source] std::io::Error),
}

/// What the filter refuses besides what it always refuses (io_uring, keyrings, terminal
/// input, the x32 table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refuse {
    /// `socket(AF_UNIX)` and datagram `socketpair(AF_UNIX)`.
    pub unix_sockets: bool,
    /// `socket(…, IPPROTO_MPTCP)`.
    pub mptcp: bool,
    /// S_ISGID in `chmod` and its kin (S_ISUID always): for an agent running as root, which
    /// owns `/usr` and `/etc`, a setgid program there would give its users group root.
    pub setgid: bool,
}

impl fmt::Display for Refuse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "io_uring, clone3, keyrings, terminal input, setuid bits")?;
        if self.unix_sockets {
            write!(f, ", Unix sockets")?;
        }
        if self.mptcp {
            write!(f, ", MPTCP")?;
        }
        if self.setgid {
            write!(f, ", setgid bits")?;
        }
        Ok(())
    }
}

// ---- seccomp_data and return values (<linux/seccomp.h>, <linux/audit.h>).

const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
/// The low 32 bits of `args[i]` (a little-endian u64 at offset 16 + 8 i).
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i + if cfg!(target_endian = "big") { 4 } else { 0 }
}

const RET_KILL_PROCESS: u32 = 0x8000_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

const fn errno(e: i32) -> u32 {
    RET_ERRNO | (e as u32 & 0xffff)
}

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const AUDIT_ARCH_I386: u32 = 0x4000_0003;
/// Any other architecture, for the unit tests.
#[cfg(test)]
const AUDIT_ARCH_AARCH64: u32 = 0xc000_00b7;

#[cfg(target_arch = "x86_64")]
const NATIVE_ARCH: u32 = AUDIT_ARCH_X86_64;
#[cfg(not(target_arch = "x86_64"))]
compile_error!("the seccomp filter knows x86_64's tables only (the packages are amd64)");

/// The x32 table's numbers carry this bit.
const X32_BIT: u32 = 0x4000_0000;

const AF_UNIX: u32 = 1;
const SOCK_STREAM: u32 = 1;
const SOCK_SEQPACKET: u32 = 5;
/// `SOCK_TYPE_MASK`: the type without SOCK_NONBLOCK and SOCK_CLOEXEC.
const SOCK_TYPE_MASK: u32 = 0xf;
/// `socketcall`'s call numbers (`<linux/net.h>`).
const SYS_SOCKET: u32 = 1;
const SYS_SOCKETPAIR: u32 = 8;

/// `setpriority`'s `PRIO_PROCESS` (`<linux/resource.h>`).
const PRIO_PROCESS: u32 = 0;
/// `ioprio_set`'s `IOPRIO_WHO_PROCESS` (`<linux/ioprio.h>`).
const IOPRIO_WHO_PROCESS: u32 = 1;

/// `S_ISUID`.
const S_ISUID: u32 = 0o4000;
/// `S_ISGID`.
const S_ISGID: u32 = 0o2000;

/// One table's numbers of the calls the filter looks at.
struct Table {
    /// `chmod` and `fchmod` (mode in args[1]), `fchmodat` and `fchmodat2` (args[2]).
    chmod: [u32; 2],
    chmodat: [u32; 2],
    ioctl: u32,
    socket: u32,
    socketpair: u32,
    socketcall: Option<u32>,
    io_uring: [u32; 3],
    keys: [u32; 3],
    clone3: u32,
    /// `prlimit64`, `sched_setscheduler`, `sched_setattr`, `sched_setparam`,
    /// `sched_setaffinity`: the pid in args[0].
    self_only: [u32; 5],
    /// `setpriority(which, who, prio)`.
    setpriority: u32,
    /// `ioprio_set(which, who, ioprio)`.
    ioprio_set: u32,
}

/// A libc syscall number as the filter's 32-bit word (they are small and positive).
const fn nr(n: libc::c_long) -> u32 {
    n as u32
}

const NATIVE: Table = Table {
    chmod: [nr(libc::SYS_chmod), nr(libc::SYS_fchmod)],
    chmodat: [nr(libc::SYS_fchmodat), nr(libc::SYS_fchmodat2)],
    ioctl: nr(libc::SYS_ioctl),
    socket: nr(libc::SYS_socket),
    socketpair: nr(libc::SYS_socketpair),
    socketcall: None,
    io_uring: [
        nr(libc::SYS_io_uring_setup),
        nr(libc::SYS_io_uring_enter),
        nr(libc::SYS_io_uring_register),
    ],
    keys: [
        nr(libc::SYS_add_key),
        nr(libc::SYS_request_key),
        nr(libc::SYS_keyctl),
    ],
    clone3: nr(libc::SYS_clone3),
    self_only: [
        nr(libc::SYS_prlimit64),
        nr(libc::SYS_sched_setscheduler),
        nr(libc::SYS_sched_setattr),
        nr(libc::SYS_sched_setparam),
        nr(libc::SYS_sched_setaffinity),
    ],
    setpriority: nr(libc::SYS_setpriority),
    ioprio_set: nr(libc::SYS_ioprio_set),
};

/// The i386 table (`arch/x86/entry/syscalls/syscall_32.tbl`).
#[cfg(target_arch = "x86_64")]
const I386: Table = Table {
    chmod: [15, 94],
    chmodat: [306, 452],
    ioctl: 54,
    socket: 359,
    socketpair: 360,
    socketcall: Some(102),
    io_uring: [425, 426, 427],
    keys: [286, 287, 288],
    clone3: 435,
    self_only: [340, 156, 351, 154, 241],
    setpriority: 97,
    ioprio_set: 289,
};

// ---- A small assembler for classic BPF, with labels.

/// Where a conditional jump goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum To {
    Next,
    L(Label),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Label {
    Allow,
    Eperm,
    Eacces,
    Enosys,
    Eproto,
    Kill,
    Ioctl,
    Socket,
    Socketpair,
    Socketcall,
    Chmod,
    Chmodat,
    SelfOnly,
    Setpriority,
    Ioprio,
    Other,
}

enum Ins {
    /// `A = seccomp_data[off]` (32 bits).
    Ld(u32),
    /// `A &= k`.
    And(u32),
    /// `if A == k goto t else goto f`.
    Jeq(u32, To, To),
    /// `if A >= k goto t else goto f`.
    Jge(u32, To, To),
    /// `if A & k goto t else goto f`.
    Jset(u32, To, To),
    /// `return k`.
    Ret(u32),
    /// Marks the next instruction.
    Mark(Label),
}

/// The instructions and their resolved offsets.
fn assemble(prog: &[Ins]) -> Result<Vec<libc::sock_filter>, SeccompError> {
    // Opcodes: BPF_LD|BPF_W|BPF_ABS, BPF_ALU|BPF_AND|BPF_K, BPF_JMP|BPF_JEQ|BPF_K,
    // BPF_JMP|BPF_JGE|BPF_K, BPF_JMP|BPF_JSET|BPF_K, BPF_RET|BPF_K.
    const LD: u16 = 0x20;
    const AND: u16 = 0x54;
    const JEQ: u16 = 0x15;
    const JGE: u16 = 0x35;
    const JSET: u16 = 0x45;
    const RET: u16 = 0x06;
    let mut at: Vec<(Label, usize)> = Vec::new();
    let mut pc = 0usize;
    for ins in prog {
        match ins {
            Ins::Mark(l) => at.push((*l, pc)),
            _ => pc += 1,
        }
    }
    let offset = |from: usize, to: To| -> Result<u8, SeccompError> {
        match to {
            To::Next => Ok(0),
            To::L(l) => {
                let target = at
                    .iter()
                    .find(|(m, _)| *m == l)
                    .map(|(_, p)| *p)
                    .ok_or_else(|| SeccompError::Build(format!("no label {l:?}")))?;
                target
                    .checked_sub(from + 1)
                    .and_then(|d| u8::try_from(d).ok())
                    .ok_or_else(|| SeccompError::Build(format!("jump to {l:?} out of range")))
            }
        }
    };
    let mut out = Vec::with_capacity(pc);
    for ins in prog {
        let pc = out.len();
        let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
        out.push(match *ins {
            Ins::Mark(_) => continue,
            Ins::Ld(off) => f(LD, 0, 0, off),
            Ins::And(k) => f(AND, 0, 0, k),
            Ins::Jeq(k, t, e) => f(JEQ, offset(pc, t)?, offset(pc, e)?, k),
            Ins::Jge(k, t, e) => f(JGE, offset(pc, t)?, offset(pc, e)?, k),
            Ins::Jset(k, t, e) => f(JSET, offset(pc, t)?, offset(pc, e)?, k),
            Ins::Ret(k) => f(RET, 0, 0, k),
        });
    }
    Ok(out)
}

/// The dispatch on one table's numbers (the number is in A).
fn dispatch(p: &mut Vec<Ins>, t: &Table, refuse: Refuse) {
    p.push(Ins::Jeq(t.ioctl, To::L(Label::Ioctl), To::Next));
    for n in t.chmod {
        p.push(Ins::Jeq(n, To::L(Label::Chmod), To::Next));
    }
    for n in t.chmodat {
        p.push(Ins::Jeq(n, To::L(Label::Chmodat), To::Next));
    }
    if refuse.unix_sockets || refuse.mptcp {
        p.push(Ins::Jeq(t.socket, To::L(Label::Socket), To::Next));
        if let Some(socketcall) = t.socketcall {
            p.push(Ins::Jeq(socketcall, To::L(Label::Socketcall), To::Next));
        }
    }
    if refuse.unix_sockets {
        p.push(Ins::Jeq(t.socketpair, To::L(Label::Socketpair), To::Next));
    }
    for n in t.io_uring {
        p.push(Ins::Jeq(n, To::L(Label::Enosys), To::Next));
    }
    p.push(Ins::Jeq(t.clone3, To::L(Label::Enosys), To::Next));
    for n in t.keys {
        p.push(Ins::Jeq(n, To::L(Label::Eperm), To::Next));
    }
    for n in t.self_only {
        p.push(Ins::Jeq(n, To::L(Label::SelfOnly), To::Next));
    }
    p.push(Ins::Jeq(t.setpriority, To::L(Label::Setpriority), To::Next));
    p.push(Ins::Jeq(t.ioprio_set, To::L(Label::Ioprio), To::Next));
    p.push(Ins::Ret(RET_ALLOW));
}

/// The program for `refuse` on this architecture.
pub fn program(refuse: Refuse) -> Result<Vec<libc::sock_filter>, SeccompError> {
    use Ins::*;
    use Label::*;
    let mut p = vec![
        Ld(OFF_ARCH),
        Jeq(NATIVE_ARCH, To::Next, To::L(Other)),
        Ld(OFF_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        // The x32 table: every call refused.
        p.push(Jge(X32_BIT, To::L(Enosys), To::Next));
    }
    dispatch(&mut p, &NATIVE, refuse);

    // Another architecture's entry.
    p.push(Mark(Other));
    #[cfg(target_arch = "x86_64")]
    {
        p.extend([Jeq(AUDIT_ARCH_I386, To::Next, To::L(Kill)), Ld(OFF_NR)]);
        dispatch(&mut p, &I386, refuse);
    }
    #[cfg(not(target_arch = "x86_64"))]
    p.push(Ret(RET_KILL_PROCESS));

    // ioctl: the request's low 32 bits.
    p.extend([
        Mark(Ioctl),
        Ld(arg_lo(1)),
        Jeq(TIOCSTI, To::L(Eperm), To::Next),
        Jeq(TIOCLINUX, To::L(Eperm), To::L(Allow)),
    ]);
    // chmod(path, mode), fchmod(fd, mode), fchmodat(dirfd, path, mode[, flags]): no setuid
    // bit, nor setgid for root (the kernel reads the mode as umode_t, so its low bits are
    // all there is).
    let bits = if refuse.setgid {
        S_ISUID | S_ISGID
    } else {
        S_ISUID
    };
    p.extend([
        Mark(Chmod),
        Ld(arg_lo(1)),
        Jset(bits, To::L(Eperm), To::L(Allow)),
        Mark(Chmodat),
        Ld(arg_lo(2)),
        Jset(bits, To::L(Eperm), To::L(Allow)),
    ]);
    // Another process's limits and scheduling: the calling process's only (pid_t and int
    // arguments: the kernel reads their low 32 bits).
    p.extend([
        Mark(SelfOnly),
        Ld(arg_lo(0)),
        Jeq(0, To::L(Allow), To::L(Eperm)),
        Mark(Setpriority),
        Ld(arg_lo(0)),
        Jeq(PRIO_PROCESS, To::Next, To::L(Eperm)),
        Ld(arg_lo(1)),
        Jeq(0, To::L(Allow), To::L(Eperm)),
        Mark(Ioprio),
        Ld(arg_lo(0)),
        Jeq(IOPRIO_WHO_PROCESS, To::Next, To::L(Eperm)),
        Ld(arg_lo(1)),
        Jeq(0, To::L(Allow), To::L(Eperm)),
    ]);
    // socket(domain, type, protocol).
    if refuse.unix_sockets || refuse.mptcp {
        p.push(Mark(Socket));
        if refuse.unix_sockets {
            p.extend([Ld(arg_lo(0)), Jeq(AF_UNIX, To::L(Eacces), To::Next)]);
        }
        if refuse.mptcp {
            p.extend([Ld(arg_lo(2)), Jeq(IPPROTO_MPTCP, To::L(Eproto), To::Next)]);
        }
        p.push(Ret(RET_ALLOW));
        // socketcall(call, args): no new socket or socket pair (the arguments are in memory).
        p.extend([
            Mark(Socketcall),
            Ld(arg_lo(0)),
            Jeq(SYS_SOCKET, To::L(Eacces), To::Next),
            Jeq(SYS_SOCKETPAIR, To::L(Eacces), To::L(Allow)),
        ]);
    }
    // socketpair(domain, type, protocol, sv): AF_UNIX stream and seqpacket only.
    if refuse.unix_sockets {
        p.extend([
            Mark(Socketpair),
            Ld(arg_lo(0)),
            Jeq(AF_UNIX, To::Next, To::L(Allow)),
            Ld(arg_lo(1)),
            And(SOCK_TYPE_MASK),
            Jeq(SOCK_STREAM, To::L(Allow), To::Next),
            Jeq(SOCK_SEQPACKET, To::L(Allow), To::L(Eacces)),
        ]);
    }
    p.extend([
        Mark(Allow),
        Ret(RET_ALLOW),
        Mark(Eperm),
        Ret(errno(libc::EPERM)),
        Mark(Eacces),
        Ret(errno(UNIX_ERRNO)),
        Mark(Enosys),
        Ret(errno(libc::ENOSYS)),
        Mark(Eproto),
        Ret(errno(libc::EPROTONOSUPPORT)),
        Mark(Kill),
        Ret(RET_KILL_PROCESS),
    ]);
    assemble(&p)
}

/// Builds and installs the filter on the calling thread (no_new_privs must already be set).
pub fn install(refuse: Refuse) -> Result<(), SeccompError> {
    let prog = program(refuse)?;
    sys::seccomp_set_filter(&prog).map_err(SeccompError::Install)
}

/// As [`install`], and returns the filter's listener ([`sys::seccomp_set_filter_listener`]):
/// it polls `POLLHUP` once the last process that inherited the filter has ended.
pub fn install_with_listener(refuse: Refuse) -> Result<std::os::fd::OwnedFd, SeccompError> {
    let prog = program(refuse)?;
    sys::seccomp_set_filter_listener(&prog).map_err(SeccompError::Listener)
}

/// A classic BPF interpreter for the instructions [`program`] uses, so the unit tests can
/// put the program to every case without a kernel; the escape suite tries the same cases on
/// the real one.
#[cfg(test)]
pub(crate) fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let mut data = [0u8; 64];
    data[0..4].copy_from_slice(&nr.to_ne_bytes());
    data[4..8].copy_from_slice(&arch.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    let mut a = 0u32;
    let mut pc = 0usize;
    loop {
        let ins = prog[pc];
        pc += 1;
        let k = ins.k;
        let jump = |cond: bool| usize::from(if cond { ins.jt } else { ins.jf });
        match ins.code {
            0x20 => {
                let o = k as usize;
                a = u32::from_ne_bytes(data[o..o + 4].try_into().expect("4 bytes"));
            }
            0x54 => a &= k,
            0x15 => pc += jump(a == k),
            0x35 => pc += jump(a >= k),
            0x45 => pc += jump(a & k != 0),
            0x06 => return k,
            other => panic!("opcode {other:#x} not expected"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Refuse = Refuse {
        unix_sockets: true,
        mptcp: true,
        setgid: true,
    };
    const NONE: Refuse = Refuse {
        unix_sockets: false,
        mptcp: false,
        setgid: false,
    };

    fn native(p: &[libc::sock_filter], nr: libc::c_long, args: [u64; 6]) -> u32 {
        run(p, NATIVE_ARCH, nr as u32, args)
    }

    #[test]
    fn every_variant_assembles() {
        for bits in 0..8 {
            let p = program(Refuse {
                unix_sockets: bits & 1 != 0,
                mptcp: bits & 2 != 0,
                setgid: bits & 4 != 0,
            })
            .expect("assembles");
            assert!(p.len() < 140, "{} instructions", p.len());
        }
    }

    #[test]
    fn unix_sockets_are_refused_but_stream_pairs_are_not() {
        let p = program(ALL).expect("program");
        let sock = |domain: u64, ty: u64| native(&p, libc::SYS_socket, [domain, ty, 0, 0, 0, 0]);
        assert_eq!(sock(1, 1), errno(libc::EACCES));
        assert_eq!(sock(1, 2 | 0x80000), errno(libc::EACCES));
        // Only the low 32 bits are the kernel's `int`.
        assert_eq!(sock(1 | 1 << 32, 1), errno(libc::EACCES));
        assert_eq!(sock(2, 1), RET_ALLOW);
        assert_eq!(sock(10, 2), RET_ALLOW);
        let pair =
            |domain: u64, ty: u64| native(&p, libc::SYS_socketpair, [domain, ty, 0, 0, 0, 0]);
        assert_eq!(pair(1, 1), RET_ALLOW);
        assert_eq!(pair(1, 1 | 0x800 | 0x80000), RET_ALLOW);
        assert_eq!(pair(1, 5), RET_ALLOW);
        assert_eq!(pair(1, 2), errno(libc::EACCES));
        assert_eq!(pair(1, 2 | 0x80000), errno(libc::EACCES));
        assert_eq!(
            pair(1, 3),
            errno(libc::EACCES),
            "SOCK_RAW is a datagram pair"
        );
        assert_eq!(pair(1, 4), errno(libc::EACCES));
        assert_eq!(pair(2, 2), RET_ALLOW);

        let open = program(NONE).expect("program");
        assert_eq!(
            native(&open, libc::SYS_socket, [1, 1, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(
            native(&open, libc::SYS_socketpair, [1, 2, 0, 0, 0, 0]),
            RET_ALLOW
        );
    }

    #[test]
    fn io_uring_keyrings_and_terminal_input_are_always_refused() {
        for refuse in [NONE, ALL] {
            let p = program(refuse).expect("program");
            for n in [
                libc::SYS_io_uring_setup,
                libc::SYS_io_uring_enter,
                libc::SYS_io_uring_register,
                libc::SYS_clone3,
            ] {
                assert_eq!(native(&p, n, [0; 6]), errno(libc::ENOSYS));
            }
            assert_eq!(native(&p, libc::SYS_clone, [0; 6]), RET_ALLOW, "clone");
            for n in [libc::SYS_add_key, libc::SYS_request_key, libc::SYS_keyctl] {
                assert_eq!(native(&p, n, [0; 6]), errno(libc::EPERM));
            }
            for req in [TIOCSTI, TIOCLINUX] {
                let req = u64::from(req);
                assert_eq!(
                    native(&p, libc::SYS_ioctl, [0, req, 0, 0, 0, 0]),
                    errno(libc::EPERM)
                );
                assert_eq!(
                    native(&p, libc::SYS_ioctl, [0, req | 1 << 32, 0, 0, 0, 0]),
                    errno(libc::EPERM)
                );
            }
            assert_eq!(
                native(&p, libc::SYS_ioctl, [0, 0x5401, 0, 0, 0, 0]),
                RET_ALLOW
            );
            for (n, at) in [
                (libc::SYS_chmod, 1),
                (libc::SYS_fchmod, 1),
                (libc::SYS_fchmodat, 2),
                (libc::SYS_fchmodat2, 2),
            ] {
                let mode = |m: u64| {
                    let mut args = [0u64; 6];
                    args[at] = m;
                    native(&p, n, args)
                };
                assert_eq!(mode(0o4755), errno(libc::EPERM), "{n}");
                assert_eq!(mode(0o6755), errno(libc::EPERM), "{n}");
                let setgid = if refuse.setgid {
                    errno(libc::EPERM)
                } else {
                    RET_ALLOW
                };
                assert_eq!(mode(0o2755), setgid, "{n}");
                assert_eq!(mode(0o755), RET_ALLOW, "{n}");
            }
            for n in [libc::SYS_read, libc::SYS_openat, libc::SYS_connect] {
                assert_eq!(native(&p, n, [1, 2, 3, 4, 5, 6]), RET_ALLOW);
            }
        }
    }

    #[test]
    fn other_processes_limits_and_scheduling_are_refused() {
        for bits in 0..8 {
            let p = program(Refuse {
                unix_sockets: bits & 1 != 0,
                mptcp: bits & 2 != 0,
                setgid: bits & 4 != 0,
            })
            .expect("program");
            let eperm = errno(libc::EPERM);
            for n in [
                libc::SYS_prlimit64,
                libc::SYS_sched_setscheduler,
                libc::SYS_sched_setattr,
                libc::SYS_sched_setparam,
                libc::SYS_sched_setaffinity,
            ] {
                assert_eq!(native(&p, n, [0, 0, 1, 0, 0, 0]), RET_ALLOW, "{n} self");
                assert_eq!(native(&p, n, [4242, 0, 1, 0, 0, 0]), eperm, "{n} other");
                assert_eq!(
                    native(&p, n, [1 << 32, 0, 1, 0, 0, 0]),
                    RET_ALLOW,
                    "{n} int"
                );
            }
            let prio = |which, who| native(&p, libc::SYS_setpriority, [which, who, 19, 0, 0, 0]);
            assert_eq!(prio(0, 0), RET_ALLOW);
            assert_eq!(prio(0, 4242), eperm);
            assert_eq!(prio(1, 0), eperm, "PRIO_PGRP");
            assert_eq!(prio(2, 0), eperm, "PRIO_USER");
            let io = |which, who| native(&p, libc::SYS_ioprio_set, [which, who, 7, 0, 0, 0]);
            assert_eq!(io(1, 0), RET_ALLOW);
            assert_eq!(io(1, 4242), eperm);
            assert_eq!(io(3, 0), eperm, "IOPRIO_WHO_USER");
            for n in [340, 156, 351, 154, 241, 97, 289] {
                assert_eq!(
                    run(&p, AUDIT_ARCH_I386, n, [4242, 4242, 0, 0, 0, 0]),
                    eperm,
                    "i386 {n}"
                );
            }
        }
    }

    #[test]
    fn mptcp_only_when_asked() {
        let p = program(ALL).expect("program");
        let mptcp = [2, 1, u64::from(IPPROTO_MPTCP), 0, 0, 0];
        assert_eq!(
            native(&p, libc::SYS_socket, mptcp),
            errno(libc::EPROTONOSUPPORT)
        );
        assert_eq!(native(&p, libc::SYS_socket, [2, 1, 6, 0, 0, 0]), RET_ALLOW);
        let p = program(NONE).expect("program");
        assert_eq!(native(&p, libc::SYS_socket, mptcp), RET_ALLOW);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_other_entries_of_x86_64() {
        let p = program(ALL).expect("program");
        // x32: everything refused.
        for n in [0u32, 41, 514, 16] {
            assert_eq!(
                run(&p, AUDIT_ARCH_X86_64, X32_BIT | n, [0; 6]),
                errno(libc::ENOSYS)
            );
        }
        // i386: the same rules by its own numbers.
        let i386 = |n: u32, args: [u64; 6]| run(&p, AUDIT_ARCH_I386, n, args);
        assert_eq!(i386(359, [1, 1, 0, 0, 0, 0]), errno(libc::EACCES));
        assert_eq!(i386(359, [2, 1, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(i386(360, [1, 2, 0, 0, 0, 0]), errno(libc::EACCES));
        assert_eq!(i386(360, [1, 1, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(i386(102, [1, 0, 0, 0, 0, 0]), errno(libc::EACCES));
        assert_eq!(i386(102, [8, 0, 0, 0, 0, 0]), errno(libc::EACCES));
        assert_eq!(i386(102, [3, 0, 0, 0, 0, 0]), RET_ALLOW, "connect");
        assert_eq!(
            i386(54, [0, u64::from(TIOCSTI), 0, 0, 0, 0]),
            errno(libc::EPERM)
        );
        assert_eq!(i386(425, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(i386(435, [0; 6]), errno(libc::ENOSYS), "clone3");
        assert_eq!(i386(288, [0; 6]), errno(libc::EPERM));
        assert_eq!(i386(3, [0; 6]), RET_ALLOW, "read");
        assert_eq!(i386(15, [0, 0o4755, 0, 0, 0, 0]), errno(libc::EPERM));
        assert_eq!(i386(306, [0, 0, 0o4755, 0, 0, 0]), errno(libc::EPERM));
        assert_eq!(i386(15, [0, 0o755, 0, 0, 0, 0]), RET_ALLOW);
        // Without the socket rules, socketcall is left alone.
        let open = program(NONE).expect("program");
        assert_eq!(run(&open, AUDIT_ARCH_I386, 102, [1; 6]), RET_ALLOW);
        // Any other architecture is killed.
        assert_eq!(run(&p, AUDIT_ARCH_AARCH64, 0, [0; 6]), RET_KILL_PROCESS);
    }
}
