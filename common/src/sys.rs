//! The only module with `unsafe`: thin wrappers over the raw system calls the wall needs and
//! that neither `nix` nor `landlock` exposes. Each wrapper returns `io::Result`; none of them
//! decides policy.

use std::io;

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
    // SAFETY: prctl(PR_CAPBSET_DROP, cap) takes integers only and touches no memory of ours.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAPBSET_DROP,
            libc::c_ulong::from(cap),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether `cap` is still in the bounding set (`PR_CAPBSET_READ`); EINVAL past the last one.
pub fn capbset_read(cap: u32) -> io::Result<bool> {
    // SAFETY: prctl(PR_CAPBSET_READ, cap) takes integers only and touches no memory of ours.
    let rc = unsafe {
        libc::prctl(
            libc::PR_CAPBSET_READ,
            libc::c_ulong::from(cap),
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    match rc {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(io::Error::last_os_error()),
    }
}

/// The process's seccomp mode (`PR_GET_SECCOMP`): 0 none, 2 filter.
pub fn seccomp_mode() -> io::Result<i32> {
    // SAFETY: PR_GET_SECCOMP takes no pointer and only returns the mode.
    let rc = unsafe { libc::prctl(libc::PR_GET_SECCOMP, 0 as libc::c_ulong) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
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

/// Restores the default action of SIGPIPE. Rust's runtime ignores SIGPIPE at start-up, and an
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
