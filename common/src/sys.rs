//! The only module with `unsafe`: thin wrappers over the raw system calls the wall needs and
//! that `nix` does not expose. The Landlock calls are here too, rather than through the
//! `landlock` crate, because the crate `fstat`s every rule's descriptor to check a file type
//! that the policy already knows (the kernel refuses a mismatch itself): a system call per
//! rule, on the launch path, for nothing. Each wrapper returns `io::Result`; none of them
//! decides policy.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// `CLOSE_RANGE_CLOEXEC` from `<linux/close_range.h>` (Linux 5.11).
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;
/// `LANDLOCK_CREATE_RULESET_VERSION` from `<linux/landlock.h>`.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// Marks every descriptor from `first` upwards close-on-exec with one `close_range(2)` call.
///
/// Returns `Unsupported` (ENOSYS/EINVAL) on kernels before 5.11 so the caller can fall back.
pub fn close_range_cloexec(first: libc::c_uint) -> io::Result<()> {
    // SAFETY: close_range takes three integers and touches no memory of ours; with
    // CLOSE_RANGE_CLOEXEC it only sets a flag on descriptors, it closes none.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Closes every descriptor from `first` to `last` inclusive with one `close_range(2)` call
/// (Linux 5.9). The caller owns all of them.
pub fn close_range(first: RawFd, last: RawFd) -> io::Result<()> {
    let (Ok(first), Ok(last)) = (libc::c_uint::try_from(first), libc::c_uint::try_from(last))
    else {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    };
    // SAFETY: close_range takes three integers and touches no memory of ours; the caller
    // owns every descriptor in the range, so no one else's descriptor is closed.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as libc::c_uint) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sets `FD_CLOEXEC` on one descriptor (the fallback for kernels without `close_range`).
pub fn set_cloexec(fd: libc::c_int) -> io::Result<()> {
    // SAFETY: fcntl(F_GETFD/F_SETFD) reads and writes only the descriptor's flags; an invalid
    // descriptor yields EBADF, which we report.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let rc = unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The Landlock ABI version the running kernel offers.
///
/// `Ok(0)` never happens: a kernel without Landlock answers ENOSYS (not built in) or
/// EOPNOTSUPP (built in, disabled at boot); both come back as errors for the caller to name.
pub fn landlock_abi_version() -> io::Result<u32> {
    // SAFETY: with a NULL attribute pointer, size 0 and the VERSION flag the kernel reads no
    // memory and only returns the ABI number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    u32::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// Drops one capability from the bounding set (`PR_CAPBSET_DROP`).
///
/// EINVAL means `cap` is past the kernel's last capability.
pub fn capbset_drop(cap: u32) -> io::Result<()> {
    prctl_ints(libc::PR_CAPBSET_DROP, libc::c_ulong::from(cap), 0).map(drop)
}

/// `prctl(option, arg2, arg3, 0, 0)` for the options that take and return integers only;
/// a negative return is the errno.
fn prctl_ints(
    option: libc::c_int,
    arg2: libc::c_ulong,
    arg3: libc::c_ulong,
) -> io::Result<libc::c_int> {
    // SAFETY: every caller passes an option whose arguments are integers, not pointers, so
    // the kernel reads and writes no memory of ours.
    let rc = unsafe { libc::prctl(option, arg2, arg3, 0 as libc::c_ulong, 0 as libc::c_ulong) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Whether `cap` is still in the bounding set (`PR_CAPBSET_READ`); EINVAL past the last one.
pub fn capbset_read(cap: u32) -> io::Result<bool> {
    prctl_ints(libc::PR_CAPBSET_READ, libc::c_ulong::from(cap), 0).map(|rc| rc == 1)
}

/// The process's seccomp mode (`PR_GET_SECCOMP`): 0 none, 2 filter.
pub fn seccomp_mode() -> io::Result<i32> {
    prctl_ints(libc::PR_GET_SECCOMP, 0, 0)
}

/// Installs the classic BPF program `prog` as a seccomp filter on the calling thread
/// (`seccomp(SECCOMP_SET_MODE_FILTER, 0, …)`; no_new_privs must be set).
pub fn seccomp_set_filter(prog: &[libc::sock_filter]) -> io::Result<()> {
    seccomp_filter(prog, 0).map(|_| ())
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)`: what it returns (0, or with
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER` a new descriptor).
fn seccomp_filter(prog: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<libc::c_long> {
    let len = u16::try_from(prog.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seccomp program too long"))?;
    let fprog = libc::sock_fprog {
        len,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `len` instructions that live until the call returns; the
    // kernel copies the program and never writes through the pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER as libc::c_long,
            flags as libc::c_long,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// The errno of `socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)`, closing the socket if one
/// was made: a probe of the seccomp filter's Unix socket rule.
pub fn unix_socket_probe_errno() -> Option<i32> {
    // SAFETY: socket takes three integers and touches no memory of ours.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return io::Error::last_os_error().raw_os_error();
    }
    // SAFETY: `fd` was just made by us and is owned by nothing else.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    None
}

/// The errno of `ioctl(-1, request, NULL)`: a probe with no effect (the descriptor is
/// invalid), used to check that the seccomp filter answers before the kernel would.
pub fn ioctl_probe_errno(request: u64) -> Option<i32> {
    // SAFETY: descriptor -1 is never valid, so the kernel (or the filter) fails the call
    // before reading the NULL argument; no memory of ours is touched.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_ioctl,
            -1 as libc::c_long,
            request,
            0 as libc::c_long,
        )
    };
    if rc < 0 {
        io::Error::last_os_error().raw_os_error()
    } else {
        None
    }
}

/// What Rust's runtime does before `main` and the shim keeps (the binary has its own entry
/// point, see `shim/src/main.rs`): descriptors 0, 1 and 2 that are not open are opened on
/// `/dev/null`, so that nothing the process opens later lands on them and is mistaken for
/// standard output; and SIGPIPE is ignored, so a write to a closed pipe is an error the
/// caller reports instead of a silent death. One `poll` says which of the three are open.
pub fn runtime_init() -> io::Result<()> {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: `fds` is a valid array of three pollfd structures that the kernel may write
    // `revents` into; a zero timeout makes it return at once.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    for pfd in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
        let dev_null = c"/dev/null";
        // SAFETY: a NUL-terminated literal path; the flags create nothing.
        let fd = unsafe { libc::open(dev_null.as_ptr(), libc::O_RDWR) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // The lowest free descriptor is the one that was closed.
        if fd != pfd.fd {
            return Err(io::Error::other(format!(
                "/dev/null opened as descriptor {fd}, not {}",
                pfd.fd
            )));
        }
    }
    // SAFETY: installing SIG_IGN runs no handler code of ours; single-threaded here.
    if unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) } == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether the process has a controlling terminal: opening `/dev/tty` succeeds if it has
/// one and fails with ENXIO if it has none. Any other failure is returned as an error.
pub fn controlling_terminal() -> io::Result<bool> {
    let flags = libc::O_RDONLY | libc::O_NOCTTY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    // SAFETY: a NUL-terminated literal path; O_NOCTTY and O_NONBLOCK make the open change
    // nothing about the process and never block.
    let fd = unsafe { libc::open(c"/dev/tty".as_ptr(), flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return if e.raw_os_error() == Some(libc::ENXIO) {
            Ok(false)
        } else {
            Err(e)
        };
    }
    // SAFETY: `fd` was just opened by us and is owned by nothing else.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(true)
}

/// Restores the default action of SIGPIPE. [`runtime_init`] ignores SIGPIPE at start-up, and an
/// ignored signal stays ignored across `execve()`: without this the agent, and everything it
/// starts, would see EPIPE instead of dying quietly when a reader goes away (`yes | head`).
pub fn default_sigpipe() -> io::Result<()> {
    // SAFETY: installing SIG_DFL runs no handler code of ours; the process is
    // single-threaded here and about to exec.
    let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    if previous == libc::SIG_ERR {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `struct landlock_ruleset_attr` from `<linux/landlock.h>` (ABI 6 layout; a kernel with an
/// older ABI accepts the larger struct as long as the fields it does not know are zero).
#[repr(C)]
struct LandlockRulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr` (packed in the kernel's header).
#[repr(C, packed)]
struct LandlockPathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct LandlockNetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// `LANDLOCK_RULE_PATH_BENEATH`.
const LANDLOCK_RULE_PATH_BENEATH: libc::c_int = 1;
/// `LANDLOCK_RULE_NET_PORT`.
const LANDLOCK_RULE_NET_PORT: libc::c_int = 2;

/// Creates a Landlock ruleset handling exactly these rights and scopes
/// (`landlock_create_ruleset(2)`). The kernel refuses (EINVAL) any bit it does not know, so
/// a ruleset that is created handles everything asked for.
pub fn landlock_create_ruleset(
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
) -> io::Result<OwnedFd> {
    let attr = LandlockRulesetAttr {
        handled_access_fs,
        handled_access_net,
        scoped,
    };
    // SAFETY: the kernel reads `size_of_val(&attr)` bytes from `attr`, which outlives the
    // call, and writes nothing of ours; it returns a new descriptor or -1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            &attr as *const LandlockRulesetAttr,
            std::mem::size_of_val(&attr),
            0 as libc::c_uint,
        )
    };
    owned_fd(rc)
}

/// Adds a path-beneath rule: `allowed_access` on the file or directory `parent` refers to
/// (`landlock_add_rule(2)`). The kernel refuses (EINVAL) rights the ruleset does not handle,
/// and directory rights on a file.
pub fn landlock_add_path_rule(
    ruleset: BorrowedFd<'_>,
    parent: BorrowedFd<'_>,
    allowed_access: u64,
) -> io::Result<()> {
    let attr = LandlockPathBeneathAttr {
        allowed_access,
        parent_fd: parent.as_raw_fd(),
    };
    // SAFETY: the kernel reads the attribute (which outlives the call) and uses the two
    // borrowed descriptors, which stay open for the duration of the call; nothing of ours is
    // written.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const LandlockPathBeneathAttr,
            0 as libc::c_uint,
        )
    };
    zero_or_errno(rc)
}

/// Adds a network rule: `allowed_access` (bind/connect) on TCP `port`.
pub fn landlock_add_net_rule(
    ruleset: BorrowedFd<'_>,
    port: u16,
    allowed_access: u64,
) -> io::Result<()> {
    let attr = LandlockNetPortAttr {
        allowed_access,
        port: u64::from(port),
    };
    // SAFETY: as for `landlock_add_path_rule`: the kernel only reads the attribute, which
    // outlives the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_NET_PORT,
            &attr as *const LandlockNetPortAttr,
            0 as libc::c_uint,
        )
    };
    zero_or_errno(rc)
}

/// Restricts the calling thread with the ruleset (`landlock_restrict_self(2)`); `flags` are
/// the `LANDLOCK_RESTRICT_SELF_*` audit flags (ABI 7).
pub fn landlock_restrict_self(ruleset: BorrowedFd<'_>, flags: u32) -> io::Result<()> {
    // SAFETY: takes a borrowed descriptor (open for the call) and an integer; no memory of
    // ours is touched.
    let rc = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset.as_raw_fd(), flags) };
    zero_or_errno(rc)
}

fn zero_or_errno(rc: libc::c_long) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn owned_fd(rc: libc::c_long) -> io::Result<OwnedFd> {
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned `fd` as a new descriptor of this process, which
    // nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads directory entries from `dir` into `buf` (`getdents64(2)`); returns the number of
/// bytes filled, 0 at the end. The records are `struct linux_dirent64`, which the caller
/// parses: a listing needs no allocation per entry, unlike `std::fs::read_dir`.
pub fn getdents64(dir: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`, which is borrowed
    // mutably for the duration of the call; the descriptor is borrowed and open.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            dir.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    usize::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::ERANGE))
}

/// Whether the calling process is single-threaded, asked of the kernel: `unshare(CLONE_VM)`
/// unshares nothing (the kernel does not implement it) but fails with EINVAL unless the
/// process has one thread and shares its address space and signal handlers with no other
/// task; on success it has no effect. One system call, where counting the threads in
/// `/proc/self/status` costs a procfs lookup and the file's generation.
pub fn single_threaded() -> io::Result<bool> {
    // SAFETY: unshare takes an integer; with CLONE_VM alone the kernel only checks the
    // conditions above and changes nothing (kernel/fork.c: check_unshare_flags, "pretend it
    // works if there is nothing to unshare").
    let rc = unsafe { libc::unshare(libc::CLONE_VM) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINVAL) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// `struct __user_cap_header_struct` with `_LINUX_CAPABILITY_VERSION_3`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct` (two of them for 64 capabilities).
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The calling thread's effective, permitted and inheritable sets (`capget(2)`).
pub fn capget() -> io::Result<[u64; 3]> {
    let mut header = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: the kernel reads the header and writes two `CapData` (version 3), both
    // borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    zero_or_errno(rc)?;
    let join = |lo: u32, hi: u32| u64::from(lo) | u64::from(hi) << 32;
    Ok([
        join(data[0].effective, data[1].effective),
        join(data[0].permitted, data[1].permitted),
        join(data[0].inheritable, data[1].inheritable),
    ])
}

/// Empties the effective, permitted and inheritable sets in one `capset(2)`.
pub fn capset_clear() -> io::Result<()> {
    let mut header = CapHeader {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [CapData::default(); 2];
    // SAFETY: the kernel reads the header (and may write its version field back) and reads
    // two `CapData` (version 3), all borrowed for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    };
    zero_or_errno(rc)
}

/// Empties the ambient set (`PR_CAP_AMBIENT_CLEAR_ALL`).
pub fn ambient_clear_all() -> io::Result<()> {
    let clear_all = libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong;
    prctl_ints(libc::PR_CAP_AMBIENT, clear_all, 0).map(drop)
}

/// A pidfd for the calling process (`pidfd_open(2)`, Linux 5.3): readable once the process
/// has exited, whatever it has exec'd meanwhile. Close-on-exec, as the kernel makes it.
pub fn pidfd_self() -> io::Result<OwnedFd> {
    // SAFETY: getpid has no preconditions; pidfd_open takes a pid and flags (0) and
    // returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0 as libc::c_uint) };
    owned_fd(rc)
}

/// A pidfd for process `pid` (`pidfd_open(2)`, Linux 5.3): it names that process and no
/// other, even once the number is reused. Close-on-exec, as the kernel makes it.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags (0) and returns a new descriptor or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
    owned_fd(rc)
}

/// `flock(2)` on `fd`: `op` is `LOCK_SH`, `LOCK_EX` or `LOCK_UN`, with `LOCK_NB` or not
/// (retried on EINTR). The lock belongs to the open file description: a copy of the
/// descriptor inherited across fork holds it too, until the last copy is closed.
pub fn flock(fd: BorrowedFd<'_>, op: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: the descriptor is borrowed for the call; flock takes two ints.
        let rc = unsafe { libc::flock(fd.as_raw_fd(), op) };
        if rc == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Sends `sig` to the process `pidfd` names (`pidfd_send_signal(2)`, Linux 5.1).
pub fn pidfd_send_signal(pidfd: BorrowedFd<'_>, sig: libc::c_int) -> io::Result<()> {
    // SAFETY: the descriptor is borrowed for the call; no siginfo (null), no flags.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            sig,
            std::ptr::null::<libc::siginfo_t>(),
            0 as libc::c_uint,
        )
    };
    zero_or_errno(rc)
}

/// Waits up to `timeout_ms` for `fd` to become readable (`poll(2)`, retried on EINTR);
/// returns whether it did.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout_ms: libc::c_int) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, borrowed mutably for the call.
        let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if rc >= 0 {
            return Ok(rc > 0);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Runs `body` in a grandchild of this process in a session of its own, and returns the pid
/// of the child in between, which exits as soon as it has forked: the caller reaps it with
/// [`reap_detacher`] (later, so that its fork overlaps the caller's own work). The
/// grandchild is then reparented to init or the nearest subreaper: no child that this
/// process's program could wait for or be confused by. It exits with `body`'s status and
/// never returns here.
///
/// Only for a single-threaded caller: after `fork` the child runs ordinary Rust code
/// (allocation included), which is sound only if no other thread held a lock at the fork.
pub fn spawn_detached(body: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    // SAFETY: fork has no memory preconditions; the caller is single-threaded (see above),
    // so the child's copy of the address space has no lock held by a vanished thread.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        // SAFETY: setsid takes no arguments; failure is reported by the exit status.
        let code = if unsafe { libc::setsid() } < 0 {
            1
        } else {
            // SAFETY: as above: this process is a copy of a single-threaded one.
            match unsafe { libc::fork() } {
                0 => body(),
                rc if rc < 0 => 1,
                _ => 0,
            }
        };
        // SAFETY: _exit ends this copy without running the parent's atexit handlers or
        // flushing its stdio buffers a second time.
        unsafe { libc::_exit(code) }
    }
    Ok(child)
}

/// Waits for the child [`spawn_detached`] returned; `Ok` if it forked the grandchild.
pub fn reap_detacher(child: libc::pid_t) -> io::Result<()> {
    match wait_child(child) {
        Ok(Some(0)) => Ok(()),
        // SIGCHLD ignored by whoever started us: the kernel reaped the child itself, and
        // its status is gone.
        Err(e) if e.raw_os_error() == Some(libc::ECHILD) => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Err(io::Error::other(
            "the detached child could not start its own child",
        )),
    }
}

/// Waits for `child` (retried on EINTR): its exit status, or 128 + the signal that ended
/// it (`None` only for a status that is neither, which waitpid without flags never gives).
fn wait_child(child: libc::pid_t) -> io::Result<Option<i32>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes one int, borrowed mutably for the call.
        let rc = unsafe { libc::waitpid(child, &mut status, 0) };
        if rc == child {
            break;
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
    Ok(if libc::WIFEXITED(status) {
        Some(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Some(128 + libc::WTERMSIG(status))
    } else {
        None
    })
}

/// `unshare(2)` with `flags` (`CLONE_NEWNS`, `CLONE_NEWUSER`).
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes an integer and changes only this process's namespaces.
    let rc = unsafe { libc::unshare(flags) };
    zero_or_errno(libc::c_long::from(rc))
}

/// `mount(2)` with no data: `source` and `fstype` may be absent (a propagation change, a
/// bind mount).
pub fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let src = source.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    // SAFETY: every pointer is a NUL-terminated string borrowed for the call, or null where
    // mount(2) allows it (no source, no file system type, no data).
    let rc = unsafe {
        libc::mount(
            src,
            target.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    zero_or_errno(libc::c_long::from(rc))
}

/// `umount2(2)` with `MNT_DETACH`, not following a link at `target`: the topmost mount
/// there leaves the namespace's tree at once (what still uses it keeps it).
pub fn umount_detach(target: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: `target` is a NUL-terminated string borrowed for the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH | libc::UMOUNT_NOFOLLOW) };
    zero_or_errno(libc::c_long::from(rc))
}

/// `mount(2)` of a new instance of the file system `fstype` on `target`, with `data`
/// (the file system's options).
pub fn mount_fs(
    fstype: &std::ffi::CStr,
    target: &std::ffi::CStr,
    flags: libc::c_ulong,
    data: &std::ffi::CStr,
) -> io::Result<()> {
    // SAFETY: every pointer is a NUL-terminated string borrowed for the call; the source is
    // the file system's name, which devpts ignores.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            flags,
            data.as_ptr().cast(),
        )
    };
    zero_or_errno(libc::c_long::from(rc))
}

/// `struct mount_attr` from `<linux/mount.h>`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `MOUNT_ATTR_RDONLY`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// Makes the mount whose root `fd` is read-only, or writable (`mount_setattr(2)`, Linux 5.12), leaving
/// its other flags as they are (a remount would have to repeat the locked ones).
pub fn mount_set_read_only(fd: BorrowedFd<'_>, read_only: bool) -> io::Result<()> {
    let (attr_set, attr_clr) = if read_only {
        (MOUNT_ATTR_RDONLY, 0)
    } else {
        (0, MOUNT_ATTR_RDONLY)
    };
    let attr = MountAttr {
        attr_set,
        attr_clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: the kernel reads one `mount_attr` of the size given, borrowed for the call;
    // the path is an empty NUL-terminated string with AT_EMPTY_PATH, naming `fd` itself.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    zero_or_errno(rc)
}

/// Runs `body` in a child process and returns its exit status (or 128 + the signal that
/// ended it). For probes that must not change the caller (a namespace, for `doctor`).
///
/// Only for a single-threaded caller, as [`spawn_detached`].
pub fn in_child(body: impl FnOnce() -> i32) -> io::Result<i32> {
    // SAFETY: fork has no memory preconditions; the caller is single-threaded.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        let code = body();
        // SAFETY: _exit ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    wait_child(child)?.ok_or_else(|| io::Error::other("the child neither exited nor was killed"))
}

/// Forks; the child runs `body` and `_exit`s with its status, never returning here. The
/// parent gets the child's pid. For the drain's job keeper, which forks the job before it
/// starts any thread.
///
/// Only for a single-threaded caller, as [`spawn_detached`].
pub fn fork_child(body: impl FnOnce() -> i32) -> io::Result<libc::pid_t> {
    // SAFETY: fork has no memory preconditions; the caller is single-threaded.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(io::Error::last_os_error());
    }
    if child == 0 {
        let code = body();
        // SAFETY: _exit ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(code) }
    }
    Ok(child)
}

/// Makes this process a child subreaper (`PR_SET_CHILD_SUBREAPER`, Linux 3.4): every
/// descendant orphaned below it, however it detached (a new session, a double fork), is
/// reparented to it rather than to init, so it can find and kill all of them.
pub fn set_child_subreaper() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_CHILD_SUBREAPER takes one integer and changes only a flag
    // of this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
    zero_or_errno(libc::c_long::from(rc))
}

/// Ends this process by signal `sig`, as the job it watched ended, so that its parent's
/// wait sees the same status: the default action is restored, no core is written, and the
/// signal is unblocked and raised. Falls back to exit status 128 + `sig` for a signal whose
/// default action does not end the process.
pub fn die_by_signal(sig: libc::c_int) -> ! {
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // Their results do not matter: if any step fails, the `_exit` below still ends the
    // process, with 128 + `sig`.
    // SAFETY: setrlimit reads one rlimit borrowed for the call; signal takes a number and
    // SIG_DFL; the sigset is initialised by sigemptyset before sigaddset and
    // pthread_sigmask read it; raise takes a number; _exit ends the process.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig)
    }
}

/// `struct open_how` from `<linux/openat2.h>` (libc's is non-exhaustive).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(2)` (Linux 5.6) with `RESOLVE_NO_SYMLINKS`: opens `path` (relative to `dir`, or
/// to the cwd) only if no component of it is a symlink. For paths that were resolved to
/// their real path earlier: a symlink met now means something was swapped in since.
pub fn open_no_symlinks(
    dir: Option<BorrowedFd<'_>>,
    path: &std::ffi::CStr,
    flags: libc::c_int,
) -> io::Result<OwnedFd> {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC) as u64,
        mode: 0,
        resolve: libc::RESOLVE_NO_SYMLINKS,
    };
    let dirfd = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `path` is NUL-terminated and `how` is one `open_how` of the size given, both
    // borrowed for the call; the kernel returns a new descriptor or -1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dirfd,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    owned_fd(rc)
}

/// As [`seccomp_set_filter`], with `SECCOMP_FILTER_FLAG_NEW_LISTENER`: returns the filter's
/// listener. The program never answers `SECCOMP_RET_USER_NOTIF`, so the listener hears no
/// system call; what it is for is that it polls `POLLHUP` once no task uses the filter,
/// which every descendant inherits and none can shed: the end of the last process of the
/// caller's tree. `EBUSY` if a filter already in force has a listener.
pub fn seccomp_set_filter_listener(prog: &[libc::sock_filter]) -> io::Result<OwnedFd> {
    let rc = seccomp_filter(prog, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?;
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::other("seccomp returned no descriptor"))?;
    // SAFETY: the kernel just made `fd` for us (close-on-exec), and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The most descriptors [`send_fds`] sends at once.
pub const MAX_FDS: usize = 8;

/// Sends `data` (1 to 64 bytes) on the Unix socket `sock` in one message, with `fds`
/// attached (`SCM_RIGHTS`, at most [`MAX_FDS`]).
pub fn send_fds(sock: BorrowedFd<'_>, data: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if data.is_empty() || data.len() > 64 || fds.len() > MAX_FDS {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut bytes = data.to_vec();
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    // Room for MAX_FDS descriptors, aligned as a cmsghdr.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; all-zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        let len = (std::mem::size_of::<RawFd>() * fds.len()) as u32;
        // SAFETY: CMSG_SPACE computes a size from a small constant.
        let space = unsafe { libc::CMSG_SPACE(len) } as usize;
        if space > std::mem::size_of_val(&control) {
            return Err(io::Error::other("no room for the descriptors"));
        }
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: `msg` has a control buffer of `space` bytes (within `control`), so the first
        // header fits; the data written is `fds.len()` RawFds, as CMSG_LEN says.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            if cmsg.is_null() {
                return Err(io::Error::other("no room for the descriptors"));
            }
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(len) as usize;
            let at = libc::CMSG_DATA(cmsg).cast::<RawFd>();
            for (i, fd) in fds.iter().enumerate() {
                std::ptr::write_unaligned(at.add(i), fd.as_raw_fd());
            }
        }
    }
    loop {
        // SAFETY: `msg` points at `iov`, `bytes` and `control`, which outlive the call.
        let rc = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        match rc {
            rc if rc >= 0 && rc as usize == bytes.len() => return Ok(()),
            rc if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            rc if rc < 0 => return Err(io::Error::last_os_error()),
            _ => return Err(io::Error::other("the message was not sent whole")),
        }
    }
}

/// Receives what [`send_fds`] sent: its bytes and its descriptors (close-on-exec,
/// `MSG_CMSG_CLOEXEC`); `Err` at end of file, or if anything did not fit.
pub fn recv_fds(sock: BorrowedFd<'_>) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut bytes = [0u8; 64];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain data; all-zero is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    let rc = loop {
        // SAFETY: `msg` points at buffers of the sizes it names, which outlive the call.
        let rc = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if rc < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        break rc;
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    if rc == 0 {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
    }
    let mut got = Vec::new();
    // SAFETY: the kernel filled `msg_controllen` bytes of `control`; the CMSG macros walk
    // only within them, and each SCM_RIGHTS header's data holds RawFds it just installed,
    // which are ours alone.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let n = ((*cmsg).cmsg_len as usize - (data as usize - cmsg as usize))
                    / std::mem::size_of::<RawFd>();
                for i in 0..n {
                    let fd = std::ptr::read_unaligned(data.cast::<RawFd>().add(i));
                    got.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    if msg.msg_flags & (libc::MSG_CTRUNC | libc::MSG_TRUNC) != 0 {
        return Err(io::Error::other("the message did not fit"));
    }
    Ok((bytes[..rc as usize].to_vec(), got))
}

/// A connected pair of Unix stream sockets, close-on-exec.
pub fn socket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut sv = [0 as RawFd; 2];
    // SAFETY: socketpair writes two descriptors into `sv`, which has room for them.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            sv.as_mut_ptr(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both were just made and are owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(sv[0]), OwnedFd::from_raw_fd(sv[1])) })
}
