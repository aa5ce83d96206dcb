//! Escape attempts for landwall's escape suite (`tests/tests/escape.rs`). Not shipped.
//!
//! Each attempt subcommand tries to reach one thing an agent inside the wall must not reach,
//! and prints nothing on stdout but one final line:
//! - `ESCAPED <details>` (exit 0) if it reached its target;
//! - `BLOCKED <step>: <errno or reason>` (exit 1) if it did not.
//!
//! Usage errors exit 2. A few subcommands check something the wall must still *allow*
//! (`connect` to a listed port, `tty-ioctls`, `kill-child`): the same words apply, ESCAPED
//! meaning "reached its target".
//!
//! Attempts:
//! - `read PATH [NEEDLE]` (with NEEDLE, only content containing it counts), `list DIR`, `write PATH` (appends a line, creating the file if needed);
//! - `overwrite PATH`: change an existing file's content keeping its name (chmod and
//!   rewrite, rename over, unlink and create);
//! - `symlink TARGET LINK`: create LINK → TARGET, then read through LINK;
//! - `hardlink SRC DST`, `rename SRC DST`;
//! - `fd N [NAME]`: use an inherited descriptor (read it; a directory: openat NAME in it);
//! - `ptrace-attach PID`, `ptrace-seize PID`, `vm-read PID ADDR LEN`, `mem PID ADDR LEN`
//!   (through `/proc/PID/mem`), `pidfd-getfd PID N` (copy PID's descriptor N and read it);
//! - `kill PID SIG` (SIG: a number or a name such as `USR1`), `kill-child`;
//! - `abstract NAME`: connect to the abstract unix socket `@NAME`;
//! - `tiocsti [--high|--i386]`, `tioclinux [--high]`: on stdin, the plain ioctl number, with
//!   bit 32 set (CVE-2019-10063), or through the i386 system call entry (`int 0x80`);
//!   `tty-ioctls`: the ordinary terminal ioctls and devices; `other-tty PATH`: another
//!   terminal by its path (read what was typed, write to its screen, stop its output);
//! - `zombie-leader MARKER`: end the main thread while another runs on and starts a child;
//!   `cgroup-leave DIR`: start a child in the cgroup DIR with `clone3(CLONE_INTO_CGROUP)`;
//! - `mount DIR`, `userns-mount DIR`, `chroot-walk JAIL PATH`;
//! - `run PROG ARGS…`: exec PROG (a setuid or file-capability program) as a child and pass
//!   on its verdict; a refused exec is BLOCKED;
//! - `ids`: whether this process holds privilege (euid 0 with another real uid, or any
//!   effective capability) — run through a setuid or file-capability copy of this binary;
//! - `env`: whether loader or shell injection variables (`LD_*`, `BASH_ENV`, …) arrived, or
//!   a library named `*lwpreload*` is mapped;
//! - `connect HOST:PORT`, `mptcp HOST:PORT`;
//! - `open-dev PATH r|w|rw`, `kmsg NONCE` (writes a debug-level line to the kernel log).
//!
//! Launchers, run by the tests outside the wall:
//! - `parent [--child-cwd DIR] [--open N=PATH]… [--leak N=PATH]… [--report FILE] -- CMD…`:
//!   the process that launches the shim. `--open` holds PATH as descriptor N close-on-exec
//!   (for `/proc/<parent>/fd/N`); `--leak` holds it without close-on-exec, so the child
//!   inherits it. SIGUSR1 is blocked, and `--report` records whether one arrived. In CMD,
//!   `@PPID@` becomes this process's pid, `@ADDR@`/`@LEN@` the address and length of a secret
//!   in its memory. Exits with the child's status.
//! - `pty -- CMD…`: runs CMD with a new pty as its controlling terminal and stdio; relays its
//!   output to stderr (`child: …`); then prints `ESCAPED injected …` if input is waiting on
//!   the terminal (what the user's shell would read next), else `BLOCKED nothing injected`.
//! - `ctty PATH [--stdin] -- CMD…`: new session, PATH as controlling terminal on stdio (only
//!   stdin with `--stdin`), exec CMD.
//! - `pause`: sleep until a signal ends the process.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{exit, Command, Stdio};

use nix::errno::Errno;
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::unistd::Pid;

/// The raw system calls the safe crates do not wrap. Every `unsafe` block of this binary is
/// here.
mod raw {
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

    /// Bit 32 of an ioctl request: the kernel truncates `cmd` to 32 bits, a 64-bit filter
    /// compare does not (CVE-2019-10063).
    const HIGH_BIT: u64 = 1 << 32;

    // `c_ulong` is `u64` on 64-bit targets only.
    #[allow(clippy::useless_conversion)]
    fn request(cmd: libc::c_ulong, high: bool) -> u64 {
        let cmd = u64::from(cmd);
        if high {
            cmd | HIGH_BIT
        } else {
            cmd
        }
    }

    /// Ends the calling thread alone (`exit`, not `exit_group`): called from the main
    /// thread, the process shows as a zombie while its other threads run on.
    pub fn exit_thread() -> ! {
        // SAFETY: SYS_exit takes a status and never returns to this thread.
        unsafe {
            libc::syscall(libc::SYS_exit, 0);
        }
        unreachable!("SYS_exit returned")
    }

    /// `clone3` with CLONE_INTO_CGROUP into the cgroup `dir` (a directory descriptor), as a
    /// fork: returns the child's pid in the parent, 0 in the child.
    pub fn clone_into_cgroup(dir: BorrowedFd<'_>) -> io::Result<libc::pid_t> {
        #[repr(C)]
        struct CloneArgs {
            flags: u64,
            pidfd: u64,
            child_tid: u64,
            parent_tid: u64,
            exit_signal: u64,
            stack: u64,
            stack_size: u64,
            tls: u64,
            set_tid: u64,
            set_tid_size: u64,
            cgroup: u64,
        }
        const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;
        let args = CloneArgs {
            flags: CLONE_INTO_CGROUP,
            pidfd: 0,
            child_tid: 0,
            parent_tid: 0,
            exit_signal: libc::SIGCHLD as u64,
            stack: 0,
            stack_size: 0,
            tls: 0,
            set_tid: 0,
            set_tid_size: 0,
            cgroup: dir.as_raw_fd() as u64,
        };
        // SAFETY: clone3 reads one `clone_args` of the size given, borrowed for the call;
        // without a stack it forks, and the child returns here with 0 (this binary is
        // single-threaded at that point).
        let r = unsafe {
            libc::syscall(
                libc::SYS_clone3,
                &args as *const CloneArgs,
                std::mem::size_of::<CloneArgs>(),
            )
        };
        check(r).map(|p| p as libc::pid_t)
    }

    fn check(r: libc::c_long) -> io::Result<libc::c_long> {
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    /// TIOCSTI: pushes `ch` into the input queue of the terminal on `fd`.
    pub fn tiocsti(fd: BorrowedFd<'_>, ch: u8, high: bool) -> io::Result<()> {
        let ch: libc::c_char = ch as libc::c_char;
        // SAFETY: ioctl(fd, TIOCSTI, const char *): the kernel reads one byte from a pointer
        // to a live local.
        let r = unsafe {
            libc::syscall(
                libc::SYS_ioctl,
                fd.as_raw_fd(),
                request(libc::TIOCSTI, high),
                &ch as *const libc::c_char,
            )
        };
        check(r).map(drop)
    }

    /// TIOCSCTTY with `steal` (1): makes the terminal on `fd` the caller's controlling
    /// terminal, taking it from the session that has it (which needs CAP_SYS_ADMIN).
    pub fn tiocsctty(fd: BorrowedFd<'_>, steal: bool) -> io::Result<()> {
        // SAFETY: ioctl(fd, TIOCSCTTY, int): an integer argument, no memory of ours.
        let r = unsafe {
            libc::syscall(
                libc::SYS_ioctl,
                fd.as_raw_fd(),
                libc::TIOCSCTTY,
                libc::c_long::from(steal),
            )
        };
        check(r).map(drop)
    }

    /// TIOCSTI through the 32-bit system call entry (`int 0x80`, i386 numbers), which a
    /// seccomp filter written for x86_64 numbers alone would not recognise. The byte lives in
    /// a page mapped below 4 GiB, as 32-bit pointers need.
    #[cfg(target_arch = "x86_64")]
    pub fn tiocsti_i386(fd: BorrowedFd<'_>, ch: u8) -> io::Result<()> {
        /// `ioctl` in the i386 system call table.
        const NR_IOCTL_I386: u32 = 54;
        let page = low_page(&[ch])?;
        let addr = u32::try_from(page as usize).map_err(io::Error::other)?;
        let request = u32::try_from(libc::TIOCSTI).map_err(io::Error::other)?;
        let fd = u32::try_from(fd.as_raw_fd()).map_err(io::Error::other)?;
        // The kernel reads one byte at `addr`, inside the page mapped above.
        let ret = int80(NR_IOCTL_I386, fd, request, addr);
        // SAFETY: unmaps the page mapped above; nothing refers to it any more.
        unsafe { libc::munmap(page, 4096) };
        if ret < 0 {
            Err(io::Error::from_raw_os_error(-ret))
        } else {
            Ok(())
        }
    }

    /// TIOCLINUX with `subcode`; returns the byte the kernel wrote back.
    pub fn tioclinux(fd: BorrowedFd<'_>, subcode: u8, high: bool) -> io::Result<u8> {
        let mut buf = [subcode, 0, 0, 0, 0, 0, 0, 0];
        // SAFETY: ioctl(fd, TIOCLINUX, char *): the kernel reads the subcode from, and may
        // write a result into, an 8-byte local buffer that outlives the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_ioctl,
                fd.as_raw_fd(),
                request(libc::TIOCLINUX, high),
                buf.as_mut_ptr(),
            )
        };
        check(r).map(|_| buf[0])
    }

    /// TIOCGWINSZ: the terminal's window size (rows, columns).
    pub fn window_size(fd: BorrowedFd<'_>) -> io::Result<(u16, u16)> {
        let mut ws = libc::winsize {
            ws_row: 0,
            ws_col: 0,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: ioctl(fd, TIOCGWINSZ, struct winsize *) writes one winsize into a live
        // local of that type.
        let r = unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TIOCGWINSZ,
                &mut ws as *mut libc::winsize,
            )
        };
        check(r.into()).map(|_| (ws.ws_row, ws.ws_col))
    }

    /// `socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)`.
    pub fn mptcp_socket() -> io::Result<OwnedFd> {
        // SAFETY: socket(2) takes no pointers.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP) };
        check(fd.into())?;
        // SAFETY: socket(2) returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// A page below 4 GiB (32-bit pointers need one), holding `bytes` at its start.
    #[cfg(target_arch = "x86_64")]
    fn low_page(bytes: &[u8]) -> io::Result<*mut libc::c_void> {
        // SAFETY: mmap(2) with no address hint and no file maps a fresh anonymous page;
        // nothing else refers to it.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let n = bytes.len().min(4096);
        // SAFETY: the page is 4096 writable bytes, mapped just above; `n` is at most that.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), page.cast::<u8>(), n) };
        Ok(page)
    }

    /// An i386 system call (`int 0x80`): `nr` with three 32-bit arguments.
    #[cfg(target_arch = "x86_64")]
    fn int80(nr: u32, a: u32, b: u32, c: u32) -> i32 {
        let ret: i32;
        // SAFETY: `int 0x80` enters the kernel's i386 entry with eax = the call number and
        // ebx, ecx, edx = its arguments (rbx is reserved by the compiler, so it is swapped in
        // and out of a scratch register). Callers pass integers, or pointers into a page
        // below 4 GiB that they own; r8–r11 are clobbered and declared.
        unsafe {
            std::arch::asm!(
                "xchg {b}, rbx",
                "int 0x80",
                "xchg {b}, rbx",
                b = inout(reg) u64::from(a) => _,
                inlateout("eax") nr => ret,
                in("ecx") b,
                in("edx") c,
                out("r8") _,
                out("r9") _,
                out("r10") _,
                out("r11") _,
            );
        }
        ret
    }

    /// `socket(AF_UNIX, SOCK_STREAM, 0)` through the i386 entry: directly (`socket`, 359)
    /// or through `socketcall(SYS_SOCKET, args)` (102), whose arguments are in memory.
    #[cfg(target_arch = "x86_64")]
    pub fn unix_socket_i386(via_socketcall: bool) -> io::Result<OwnedFd> {
        let ret = if via_socketcall {
            let args: Vec<u8> = [1u32, 1, 0].iter().flat_map(|v| v.to_ne_bytes()).collect();
            let page = low_page(&args)?;
            let addr = u32::try_from(page as usize).map_err(io::Error::other)?;
            let ret = int80(102, 1, addr, 0);
            // SAFETY: unmaps the page mapped above; nothing refers to it any more.
            unsafe { libc::munmap(page, 4096) };
            ret
        } else {
            int80(359, 1, 1, 0)
        };
        if ret < 0 {
            return Err(io::Error::from_raw_os_error(-ret));
        }
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(ret) })
    }

    /// `io_uring_setup(4, params)`: a ring, or the error.
    pub fn io_uring_setup() -> io::Result<OwnedFd> {
        // struct io_uring_params is 120 bytes; zeroed asks for the defaults.
        let mut params = [0u8; 120];
        // SAFETY: the kernel reads and writes the 120-byte struct `params` points at.
        let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
        check(fd)?;
        let fd = RawFd::try_from(fd).map_err(io::Error::other)?;
        // SAFETY: io_uring_setup returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `KEY_SPEC_USER_KEYRING`.
    const USER_KEYRING: libc::c_long = -4;

    /// `add_key("user", name, value, USER_KEYRING)`: the new key's serial.
    pub fn add_key(name: &std::ffi::CStr, value: &[u8]) -> io::Result<libc::c_long> {
        // SAFETY: the type and description are NUL-terminated strings, the payload is
        // `value.len()` readable bytes; the kernel only reads them.
        let id = unsafe {
            libc::syscall(
                libc::SYS_add_key,
                c"user".as_ptr(),
                name.as_ptr(),
                value.as_ptr(),
                value.len(),
                USER_KEYRING,
            )
        };
        check(id)
    }

    /// The serial of the "user" key `name` in the user's keyrings (`KEYCTL_SEARCH`).
    pub fn find_key(name: &std::ffi::CStr) -> io::Result<libc::c_long> {
        // SAFETY: KEYCTL_SEARCH (10) reads the two NUL-terminated strings passed.
        let id = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                10 as libc::c_long,
                USER_KEYRING,
                c"user".as_ptr(),
                name.as_ptr(),
                0 as libc::c_long,
            )
        };
        check(id)
    }

    /// The payload of key `id` (`KEYCTL_READ`).
    pub fn read_key(id: libc::c_long) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; 4096];
        // SAFETY: KEYCTL_READ (11) writes at most `buf.len()` bytes into `buf`.
        let n = unsafe {
            libc::syscall(
                libc::SYS_keyctl,
                11 as libc::c_long,
                id,
                buf.as_mut_ptr(),
                buf.len(),
            )
        };
        let n = usize::try_from(check(n)?).map_err(io::Error::other)?;
        buf.truncate(n.min(4096));
        Ok(buf)
    }

    /// Unlinks key `id` from the user keyring (`KEYCTL_UNLINK`).
    pub fn unlink_key(id: libc::c_long) -> io::Result<()> {
        // SAFETY: KEYCTL_UNLINK (9) takes two integers.
        let r = unsafe { libc::syscall(libc::SYS_keyctl, 9 as libc::c_long, id, USER_KEYRING) };
        check(r).map(drop)
    }

    /// Borrows descriptor `fd` if it is open in this process (inherited ones included).
    pub fn inherited(fd: RawFd) -> io::Result<BorrowedFd<'static>> {
        // SAFETY: fcntl(F_GETFD) takes no pointers; it only asks whether `fd` is open.
        let r = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        check(r.into())?;
        // SAFETY: `fd` is open (checked just above) and this process never closes it: the
        // borrow lives as long as the process.
        Ok(unsafe { BorrowedFd::borrow_raw(fd) })
    }

    /// Duplicates `fd` onto exactly `target`, close-on-exec or not.
    pub fn dup_to(fd: BorrowedFd<'_>, target: RawFd, cloexec: bool) -> io::Result<OwnedFd> {
        let flags = if cloexec { libc::O_CLOEXEC } else { 0 };
        // SAFETY: dup3(2) takes no pointers; the caller chose `target` (above 2, not in use).
        let r = unsafe { libc::dup3(fd.as_raw_fd(), target, flags) };
        check(r.into())?;
        // SAFETY: dup3 returned `target`, now a descriptor this function alone owns.
        Ok(unsafe { OwnedFd::from_raw_fd(r) })
    }

    /// `pidfd_open(pid, 0)`.
    pub fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_open(2) takes no pointers.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = RawFd::try_from(check(r)?).map_err(io::Error::other)?;
        // SAFETY: pidfd_open returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `pidfd_getfd(pidfd, target, 0)`: a copy of another process's descriptor.
    pub fn pidfd_getfd(pidfd: BorrowedFd<'_>, target: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_getfd(2) takes no pointers.
        let r = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
        let fd = RawFd::try_from(check(r)?).map_err(io::Error::other)?;
        // SAFETY: pidfd_getfd returned a new descriptor that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Whether `sig` is pending for this process (it is blocked, so it waits there).
    pub fn pending(sig: libc::c_int) -> io::Result<bool> {
        // SAFETY: sigset_t is a plain bit set; all zeroes is a valid (empty) value.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: sigpending(2) writes one sigset_t into a live local.
        let r = unsafe { libc::sigpending(&mut set) };
        check(r.into())?;
        // SAFETY: sigismember reads the set initialised above.
        let r = unsafe { libc::sigismember(&set, sig) };
        check(r.into()).map(|r| r == 1)
    }
}

/// The result of an attempt.
enum Verdict {
    Escaped(String),
    Blocked(String),
}
use Verdict::{Blocked, Escaped};

/// `EACCES`, `EPERM`, …: the errno's name, or the error's text when it has none.
fn errname(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => format!("{:?}", Errno::from_raw(n)),
        None => e.to_string(),
    }
}

fn blocked(step: impl std::fmt::Display, e: &std::io::Error) -> Verdict {
    Blocked(format!("{step}: {}", errname(e)))
}

fn nix_blocked(step: impl std::fmt::Display, e: Errno) -> Verdict {
    Blocked(format!("{step}: {e:?}"))
}

fn usage(msg: &str) -> ! {
    eprintln!("lw-escape: {msg} (see the source for the subcommands)");
    exit(2)
}

/// Argument `i` of the subcommand, or a usage error naming it.
fn arg<'a>(args: &'a [OsString], i: usize, what: &str) -> &'a OsStr {
    args.get(i)
        .map(OsString::as_os_str)
        .unwrap_or_else(|| usage(&format!("missing {what}")))
}

fn num<T: std::str::FromStr>(s: &OsStr, what: &str) -> T {
    let text = s.to_string_lossy();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|v| v.to_string().parse().ok()),
        None => text.parse().ok(),
    };
    parsed.unwrap_or_else(|| usage(&format!("{what} is not a number: {text}")))
}

fn pid_arg(args: &[OsString], i: usize) -> Pid {
    Pid::from_raw(num(arg(args, i, "PID"), "PID"))
}

fn show(p: &Path) -> String {
    p.display().to_string()
}

// ---- Files.

fn read_file(path: &Path) -> Verdict {
    read_needle(path, None)
}

/// Reads PATH; with a needle, only content that contains it counts as reached.
fn read_needle(path: &Path, needle: Option<&OsStr>) -> Verdict {
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return blocked(format!("open {}", show(path)), &e),
    };
    let mut buf = Vec::new();
    if let Err(e) = f.read_to_end(&mut buf) {
        return blocked(format!("read {}", show(path)), &e);
    }
    let n = buf.len();
    match needle {
        Some(needle) if !contains(&buf, needle.as_bytes()) => Blocked(format!(
            "read {n} bytes from {} without {}",
            show(path),
            needle.to_string_lossy()
        )),
        Some(needle) => Escaped(format!(
            "read {n} bytes from {}, {} among them",
            show(path),
            needle.to_string_lossy()
        )),
        None => Escaped(format!("read {n} bytes from {}", show(path))),
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

fn list_dir(path: &Path) -> Verdict {
    match std::fs::read_dir(path) {
        Ok(entries) => Escaped(format!(
            "listed {} entries of {}",
            entries.count(),
            show(path)
        )),
        Err(e) => blocked(format!("list {}", show(path)), &e),
    }
}

fn write_file(path: &Path) -> Verdict {
    let opened = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path);
    match opened.and_then(|mut f| f.write_all(b"landwall-escape\n")) {
        Ok(()) => Escaped(format!("wrote {}", show(path))),
        Err(e) => blocked(format!("write {}", show(path)), &e),
    }
}

/// Replaces the content of an existing file (a git object) keeping its name, every way a
/// program could: make it writable and rewrite it; unlink it and create it anew; rename a
/// new file over it (from the cwd, which the agent may write). Only a changed content
/// counts.
fn overwrite(path: &Path) -> Verdict {
    use std::os::unix::fs::PermissionsExt;
    let before = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => return blocked(format!("read {}", show(path)), &e),
    };
    let changed = || std::fs::read(path).is_ok_and(|now| now != before);
    let poison = b"landwall-poisoned\n";
    let mut steps = Vec::new();
    // chmod is not a Landlock right: it succeeds either way, and only opens the next step.
    if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)) {
        steps.push(format!("chmod: {}", errname(&e)));
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(poison))
    {
        Ok(()) if changed() => return Escaped(format!("rewrote {}", show(path))),
        Ok(()) => steps.push("rewrite: unchanged".into()),
        Err(e) => steps.push(format!("rewrite: {}", errname(&e))),
    }
    let scratch = Path::new("lw-overwrite.tmp");
    match std::fs::write(scratch, poison).and_then(|()| std::fs::rename(scratch, path)) {
        Ok(()) if changed() => return Escaped(format!("renamed over {}", show(path))),
        Ok(()) => steps.push("rename over: unchanged".into()),
        Err(e) => steps.push(format!("rename over: {}", errname(&e))),
    }
    if let Err(e) = std::fs::remove_file(scratch) {
        if e.kind() != std::io::ErrorKind::NotFound {
            steps.push(format!("cleanup: {}", errname(&e)));
        }
    }
    match std::fs::remove_file(path).and_then(|()| std::fs::write(path, poison)) {
        Ok(()) if changed() => return Escaped(format!("replaced {}", show(path))),
        Ok(()) => steps.push("replace: unchanged".into()),
        Err(e) => steps.push(format!("replace: {}", errname(&e))),
    }
    Blocked(format!("overwrite {}: {}", show(path), steps.join(", ")))
}

fn symlink_then_read(target: &Path, link: &Path) -> Verdict {
    if let Err(e) = std::os::unix::fs::symlink(target, link) {
        return blocked(format!("symlink {}", show(link)), &e);
    }
    match read_file(link) {
        Escaped(d) => Escaped(format!("{d} (-> {})", show(target))),
        b => b,
    }
}

fn hardlink(src: &Path, dst: &Path) -> Verdict {
    match std::fs::hard_link(src, dst) {
        Ok(()) => Escaped(format!("linked {} as {}", show(src), show(dst))),
        Err(e) => blocked(format!("link {} {}", show(src), show(dst)), &e),
    }
}

fn rename(src: &Path, dst: &Path) -> Verdict {
    match std::fs::rename(src, dst) {
        Ok(()) => Escaped(format!("renamed {} to {}", show(src), show(dst))),
        Err(e) => blocked(format!("rename {} {}", show(src), show(dst)), &e),
    }
}

fn inherited_fd(fd: i32, name: Option<&OsStr>) -> Verdict {
    let borrowed = match raw::inherited(fd) {
        Ok(b) => b,
        Err(e) => return blocked(format!("descriptor {fd}"), &e),
    };
    let owned = match borrowed.try_clone_to_owned() {
        Ok(o) => o,
        Err(e) => return blocked(format!("dup descriptor {fd}"), &e),
    };
    let file = std::fs::File::from(owned);
    let is_dir = file.metadata().map(|m| m.is_dir()).unwrap_or(false);
    if is_dir {
        let name = name.unwrap_or_else(|| usage("descriptor is a directory: give NAME"));
        let opened = nix::fcntl::openat(
            file.as_fd(),
            name,
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        );
        let inner = match opened {
            Ok(o) => o,
            Err(e) => return nix_blocked(format!("openat({fd}, {})", name.to_string_lossy()), e),
        };
        let mut buf = Vec::new();
        return match std::fs::File::from(inner).read_to_end(&mut buf) {
            Ok(n) => Escaped(format!(
                "read {n} bytes of {} through inherited directory descriptor {fd}",
                name.to_string_lossy()
            )),
            Err(e) => blocked(format!("read through descriptor {fd}"), &e),
        };
    }
    let mut buf = [0u8; 4096];
    match std::os::unix::fs::FileExt::read_at(&file, &mut buf, 0) {
        Ok(n) => Escaped(format!("read {n} bytes from inherited descriptor {fd}")),
        Err(e) => blocked(format!("read descriptor {fd}"), &e),
    }
}

// ---- Processes.

fn ptrace_attach(pid: Pid) -> Verdict {
    use nix::sys::ptrace;
    use nix::sys::wait::{waitpid, WaitPidFlag};
    if let Err(e) = ptrace::attach(pid) {
        return nix_blocked(format!("PTRACE_ATTACH {pid}"), e);
    }
    // Wait for the attach stop, then let the process go on as it was.
    let waited = waitpid(pid, Some(WaitPidFlag::__WALL));
    let detached = ptrace::detach(pid, None);
    Escaped(format!(
        "attached to {pid} (wait: {waited:?}, detach: {detached:?})"
    ))
}

fn ptrace_seize(pid: Pid) -> Verdict {
    use nix::sys::ptrace;
    if let Err(e) = ptrace::seize(pid, ptrace::Options::empty()) {
        return nix_blocked(format!("PTRACE_SEIZE {pid}"), e);
    }
    let detached = ptrace::detach(pid, None);
    Escaped(format!("seized {pid} (detach: {detached:?})"))
}

fn vm_read(pid: Pid, addr: usize, len: usize) -> Verdict {
    use nix::sys::uio::{process_vm_readv, RemoteIoVec};
    let mut buf = vec![0u8; len];
    let remote = [RemoteIoVec { base: addr, len }];
    let mut local = [std::io::IoSliceMut::new(&mut buf)];
    match process_vm_readv(pid, &mut local, &remote) {
        Ok(n) => Escaped(format!(
            "read {n} bytes of {pid}'s memory: {:?}",
            String::from_utf8_lossy(&buf[..n])
        )),
        Err(e) => nix_blocked(format!("process_vm_readv {pid}"), e),
    }
}

/// Reads LEN bytes at ADDR of PID's memory through `/proc/PID/mem`.
fn proc_mem(pid: Pid, addr: u64, len: usize) -> Verdict {
    let path = format!("/proc/{pid}/mem");
    let f = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => return blocked(format!("open {path}"), &e),
    };
    let mut buf = vec![0u8; len];
    match std::os::unix::fs::FileExt::read_at(&f, &mut buf, addr) {
        Ok(n) => Escaped(format!(
            "read {n} bytes of {path}: {:?}",
            String::from_utf8_lossy(&buf[..n])
        )),
        Err(e) => blocked(format!("read {path}"), &e),
    }
}

/// Copies descriptor N out of PID with `pidfd_getfd` and reads it.
fn pidfd_getfd(pid: Pid, fd: i32) -> Verdict {
    let pidfd = match raw::pidfd_open(pid.as_raw()) {
        Ok(p) => p,
        Err(e) => return blocked(format!("pidfd_open {pid}"), &e),
    };
    let stolen = match raw::pidfd_getfd(pidfd.as_fd(), fd) {
        Ok(f) => f,
        Err(e) => return blocked(format!("pidfd_getfd {pid} {fd}"), &e),
    };
    let mut buf = [0u8; 4096];
    match std::os::unix::fs::FileExt::read_at(&std::fs::File::from(stolen), &mut buf, 0) {
        Ok(n) => Escaped(format!("read {n} bytes through {pid}'s descriptor {fd}")),
        Err(e) => blocked(format!("read {pid}'s descriptor {fd}"), &e),
    }
}

fn signal_arg(s: &OsStr) -> Signal {
    let text = s.to_string_lossy();
    if let Ok(n) = text.parse::<i32>() {
        return Signal::try_from(n).unwrap_or_else(|_| usage(&format!("no signal {n}")));
    }
    let name = if text.starts_with("SIG") {
        text.to_string()
    } else {
        format!("SIG{text}")
    };
    name.parse()
        .unwrap_or_else(|_| usage(&format!("no signal {text}")))
}

fn kill(pid: Pid, sig: Signal) -> Verdict {
    match nix::sys::signal::kill(pid, sig) {
        Ok(()) => Escaped(format!("sent {sig} to {pid}")),
        Err(e) => nix_blocked(format!("kill {pid} {sig}"), e),
    }
}

fn kill_child() -> Verdict {
    let mut child = match Command::new("/proc/self/exe")
        .arg("pause")
        .stdin(Stdio::null())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return blocked("spawn a child", &e),
    };
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let sent = nix::sys::signal::kill(pid, Signal::SIGTERM);
    if let Err(e) = sent {
        // Do not leave it behind.
        let _killed = child.kill();
        let _reaped = child.wait();
        return nix_blocked(format!("kill own child {pid}"), e);
    }
    match child.wait() {
        Ok(st) if st.signal() == Some(libc::SIGTERM) => {
            Escaped(format!("own child {pid} ended by SIGTERM"))
        }
        Ok(st) => Blocked(format!("own child {pid} ended otherwise: {st}")),
        Err(e) => blocked("wait for own child", &e),
    }
}

fn pause() -> ! {
    loop {
        nix::unistd::pause();
    }
}

// ---- Sockets.

fn abstract_connect(name: &OsStr) -> Verdict {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixStream};
    let addr = match SocketAddr::from_abstract_name(name.as_bytes()) {
        Ok(a) => a,
        Err(e) => return blocked("abstract address", &e),
    };
    match UnixStream::connect_addr(&addr) {
        Ok(_) => Escaped(format!("connected to @{}", name.to_string_lossy())),
        Err(e) => blocked(format!("connect @{}", name.to_string_lossy()), &e),
    }
}

fn sockaddr(s: &OsStr) -> std::net::SocketAddrV4 {
    s.to_string_lossy()
        .parse()
        .unwrap_or_else(|_| usage("HOST:PORT must be an IPv4 address and port"))
}

fn tcp_connect(addr: std::net::SocketAddrV4) -> Verdict {
    let timeout = std::time::Duration::from_secs(10);
    match std::net::TcpStream::connect_timeout(&addr.into(), timeout) {
        Ok(_) => Escaped(format!("connected to {addr} over TCP")),
        Err(e) => blocked(format!("connect {addr}"), &e),
    }
}

fn mptcp_connect(addr: std::net::SocketAddrV4) -> Verdict {
    let fd = match raw::mptcp_socket() {
        Ok(fd) => fd,
        Err(e) => return blocked("socket(AF_INET, SOCK_STREAM, IPPROTO_MPTCP)", &e),
    };
    let sa = nix::sys::socket::SockaddrIn::from(addr);
    match nix::sys::socket::connect(fd.as_raw_fd(), &sa) {
        Ok(()) => Escaped(format!("connected to {addr} over MPTCP")),
        Err(e) => nix_blocked(format!("connect {addr} (MPTCP)"), e),
    }
}

// ---- Terminals.

const INJECTED: &[u8] = b"#landwall-tiocsti\n";

/// How the ioctl is issued.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Plain,
    /// Bit 32 of the request set.
    High,
    /// Through the i386 system call entry.
    I386,
}

impl Encoding {
    fn from_args(args: &[OsString]) -> Encoding {
        match args.first().map(|a| a.to_string_lossy()) {
            None => Encoding::Plain,
            Some(a) if a == "--high" => Encoding::High,
            Some(a) if a == "--i386" => Encoding::I386,
            Some(a) => usage(&format!("unknown option {a}")),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Encoding::Plain => "",
            Encoding::High => " | 1<<32",
            Encoding::I386 => " (i386 entry)",
        }
    }
}

fn tiocsti(enc: Encoding) -> Verdict {
    let stdin = std::io::stdin();
    for &ch in INJECTED {
        let pushed = match enc {
            Encoding::Plain => raw::tiocsti(stdin.as_fd(), ch, false),
            Encoding::High => raw::tiocsti(stdin.as_fd(), ch, true),
            Encoding::I386 => raw::tiocsti_i386(stdin.as_fd(), ch),
        };
        if let Err(e) = pushed {
            return blocked(format!("TIOCSTI{}", enc.name()), &e);
        }
    }
    Escaped(format!(
        "pushed {} characters into the terminal's input",
        INJECTED.len()
    ))
}

/// TIOCSTI from a process with no terminal of its own (no controlling terminal, none on
/// descriptors 0–2, so landwall installs no terminal filter) into `path`, the controlling
/// terminal of another session (the user's shell): open it, leave our session to be able to
/// take a controlling terminal, take this one from its session (TIOCSCTTY, 1), push input.
/// The verdict ends with this process's seccomp mode, so that a test can tell it ran
/// without a filter.
fn tiocsti_elsewhere(path: &Path) -> Verdict {
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_else(|| "?".into());
    let term = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
    {
        Ok(t) => t,
        Err(e) => return blocked(format!("open {} (seccomp {seccomp})", show(path)), &e),
    };
    // Fails only for a process group leader, and TIOCSCTTY then fails too.
    let left = nix::unistd::setsid().is_ok();
    if let Err(e) = raw::tiocsctty(term.as_fd(), true) {
        let step = format!("TIOCSCTTY (left our session: {left}; seccomp {seccomp})");
        // Not ours: TIOCSTI is refused for a terminal that is not the caller's.
        return match raw::tiocsti(term.as_fd(), INJECTED[0], false) {
            Ok(()) => Escaped(format!("{step} failed, but TIOCSTI pushed input")),
            Err(e2) => Blocked(format!(
                "{step}: {}; TIOCSTI: {} (seccomp {seccomp})",
                errname(&e),
                errname(&e2)
            )),
        };
    }
    for &ch in INJECTED {
        if let Err(e) = raw::tiocsti(term.as_fd(), ch, false) {
            return blocked(format!("TIOCSTI after TIOCSCTTY (seccomp {seccomp})"), &e);
        }
    }
    Escaped(format!(
        "took {} as controlling terminal and pushed {} characters (seccomp {seccomp})",
        show(path),
        INJECTED.len()
    ))
}

/// TIOCL_GETSHIFTSTATE: harmless, and answered by any virtual console the caller controls.
const TIOCL_GETSHIFTSTATE: u8 = 6;

fn tioclinux(enc: Encoding) -> Verdict {
    let stdin = std::io::stdin();
    let high = match enc {
        Encoding::Plain => false,
        Encoding::High => true,
        Encoding::I386 => usage("tioclinux has no --i386"),
    };
    match raw::tioclinux(stdin.as_fd(), TIOCL_GETSHIFTSTATE, high) {
        Ok(state) => Escaped(format!(
            "TIOCLINUX reached the console (shift state {state})"
        )),
        Err(e) => blocked(
            format!("TIOCLINUX{}", if high { " | 1<<32" } else { "" }),
            &e,
        ),
    }
}

fn tty_ioctls() -> Verdict {
    use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
    let stdin = std::io::stdin();
    let (rows, cols) = match raw::window_size(stdin.as_fd()) {
        Ok(ws) => ws,
        Err(e) => return blocked("TIOCGWINSZ on stdin", &e),
    };
    let saved = match tcgetattr(stdin.as_fd()) {
        Ok(t) => t,
        Err(e) => return nix_blocked("tcgetattr", e),
    };
    let mut rawmode = saved.clone();
    cfmakeraw(&mut rawmode);
    if let Err(e) = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &rawmode) {
        return nix_blocked("tcsetattr raw", e);
    }
    if let Err(e) = tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &saved) {
        return nix_blocked("tcsetattr restore", e);
    }
    // Devices opened inside the wall (ioctl rights are checked at open).
    let tty = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    {
        Ok(t) => t,
        Err(e) => return blocked("open /dev/tty", &e),
    };
    if let Err(e) = raw::window_size(tty.as_fd()) {
        return blocked("TIOCGWINSZ on /dev/tty", &e);
    }
    if let Err(e) = std::fs::write("/dev/null", b"x") {
        return blocked("write /dev/null", &e);
    }
    let pty = match nix::pty::openpty(None, None) {
        Ok(p) => p,
        Err(e) => return nix_blocked("openpty", e),
    };
    if let Err(e) = tcgetattr(pty.slave.as_fd()) {
        return nix_blocked("tcgetattr on a new pty", e);
    }
    let mut slave = std::fs::File::from(pty.slave);
    if let Err(e) = slave.write_all(b"ok\n") {
        return blocked("write to a new pty", &e);
    }
    let mut got = [0u8; 8];
    match std::fs::File::from(pty.master).read(&mut got) {
        Ok(n) if n > 0 => Escaped(format!(
            "window {rows}x{cols}, raw mode set and restored, /dev/tty, /dev/null and a new pty work"
        )),
        Ok(_) => Blocked("nothing came through a new pty".into()),
        Err(e) => blocked("read a new pty", &e),
    }
}

/// Another terminal of the user's, named by its path (a pty outside the wall, with a
/// program busy on it): open it, then read what was typed into it, write a fake prompt to
/// its screen, and stop and restart its output. ESCAPED says what worked.
fn other_tty(path: &Path) -> Verdict {
    let term = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(t) => t,
        Err(e) => return blocked(format!("open {}", show(path)), &e),
    };
    let mut done = vec![format!("opened {}", show(path))];
    let mut buf = [0u8; 256];
    if let Ok(n) = (&term).read(&mut buf) {
        done.push(format!(
            "read {:?}",
            String::from_utf8_lossy(&buf[..n]).trim_end()
        ));
    }
    if (&term).write_all(b"\r\nPassword: ").is_ok() {
        done.push("wrote a fake prompt".into());
    }
    if nix::sys::termios::tcflow(term.as_fd(), nix::sys::termios::FlowArg::TCOOFF).is_ok()
        && nix::sys::termios::tcflow(term.as_fd(), nix::sys::termios::FlowArg::TCOON).is_ok()
    {
        done.push("stopped and restarted its output".into());
    }
    Escaped(done.join(", "))
}

/// A process whose main thread has exited while another thread runs on and starts a child
/// (`sh` looping, `MARKER-child` in its command line): its leader shows as a zombie (`Z`),
/// which a kill walk that passes over zombies misses. Never returns a verdict: run it in the
/// background, with MARKER in its own arguments.
fn zombie_leader(marker: &OsStr) -> Verdict {
    let mut child = OsString::from(marker);
    child.push("-child");
    let spawned = std::thread::Builder::new().spawn(move || {
        let _child = Command::new("sh")
            .args(["-c", "while :; do sleep 1; done"])
            .arg(&child)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    });
    if let Err(e) = spawned {
        return blocked("a thread", &e);
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    raw::exit_thread()
}

/// `clone3(CLONE_INTO_CGROUP)` into the cgroup `dir`: a child started in another cgroup
/// than its parent's (out from under the job's caps and its cgroup.kill).
fn cgroup_leave(dir: &Path) -> Verdict {
    let d = match std::fs::File::open(dir) {
        Ok(d) => d,
        Err(e) => return blocked(format!("open {}", show(dir)), &e),
    };
    match raw::clone_into_cgroup(d.as_fd()) {
        Err(e) => blocked("clone3(CLONE_INTO_CGROUP)", &e),
        Ok(0) => exit(0),
        Ok(child) => {
            let _waited = nix::sys::wait::waitpid(Pid::from_raw(child), None);
            Escaped(format!("a child started in {}", show(dir)))
        }
    }
}

// ---- Mounts and roots.

fn mount_tmpfs(dir: &Path) -> Result<(), Errno> {
    nix::mount::mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
}

fn mount(dir: &Path) -> Verdict {
    match mount_tmpfs(dir) {
        Ok(()) => {
            let undone = nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH);
            Escaped(format!(
                "mounted tmpfs on {} (unmounted: {undone:?})",
                show(dir)
            ))
        }
        Err(e) => nix_blocked(format!("mount tmpfs on {}", show(dir)), e),
    }
}

fn userns_mount(dir: &Path) -> Verdict {
    use nix::sched::{unshare, CloneFlags};
    if let Err(e) = unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS) {
        return nix_blocked("unshare(CLONE_NEWUSER|CLONE_NEWNS)", e);
    }
    match mount_tmpfs(dir) {
        Ok(()) => Escaped(format!(
            "mounted tmpfs on {} in a new user and mount namespace",
            show(dir)
        )),
        Err(e) => nix_blocked(
            format!("mount tmpfs on {} in a new user namespace", show(dir)),
            e,
        ),
    }
}

/// chroot into JAIL while the cwd stays outside it, walk `..` up to the real root, chroot
/// there, and read PATH: the classic chroot escape. A process without CAP_SYS_CHROOT first
/// makes a user namespace, where it has it.
fn chroot_walk(jail: &Path, target: &Path) -> Verdict {
    use nix::sched::{unshare, CloneFlags};
    use nix::unistd::{chdir, chroot};
    let mut how = "chroot";
    if let Err(e) = chroot(jail) {
        if e != Errno::EPERM {
            return nix_blocked(format!("chroot {}", show(jail)), e);
        }
        if let Err(e) = unshare(CloneFlags::CLONE_NEWUSER) {
            return nix_blocked("unshare(CLONE_NEWUSER) for CAP_SYS_CHROOT", e);
        }
        if let Err(e) = chroot(jail) {
            return nix_blocked(format!("chroot {} in a user namespace", show(jail)), e);
        }
        how = "chroot in a user namespace";
    }
    for _ in 0..64 {
        if let Err(e) = chdir("..") {
            return nix_blocked("chdir ..", e);
        }
    }
    if let Err(e) = chroot(".") {
        return nix_blocked("chroot . after walking up", e);
    }
    match read_file(target) {
        Escaped(d) => Escaped(format!("{how}, walked out: {d}")),
        Blocked(b) => Blocked(format!("{how}, walked out, then {b}")),
    }
}

// ---- Privilege.

fn run_program(args: &[OsString]) -> Verdict {
    let Some((prog, rest)) = args.split_first() else {
        usage("run needs a program")
    };
    let out = match Command::new(prog).args(rest).stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) => return blocked(format!("exec {}", prog.to_string_lossy()), &e),
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or("");
    if let Some(d) = line.strip_prefix("ESCAPED ") {
        Escaped(d.to_string())
    } else if let Some(d) = line.strip_prefix("BLOCKED ") {
        Blocked(d.to_string())
    } else {
        Blocked(format!(
            "no verdict from {} ({})",
            prog.to_string_lossy(),
            out.status
        ))
    }
}

fn cap_eff() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn ids() -> Verdict {
    let ids = match nix::unistd::getresuid() {
        Ok(ids) => ids,
        Err(e) => return nix_blocked("getresuid", e),
    };
    let caps = cap_eff();
    let held = caps != "0000000000000000";
    let detail = format!(
        "ruid {} euid {} suid {} CapEff {caps}",
        ids.real, ids.effective, ids.saved
    );
    if (ids.effective.is_root() && !ids.real.is_root()) || held {
        Escaped(format!("privileged: {detail}"))
    } else {
        Blocked(format!("no privilege: {detail}"))
    }
}

/// Variables that make a loader, a libc or a shell load or run something chosen by whoever
/// set them.
const INJECTION_VARS: &[&str] = &[
    "LD_",
    "BASH_ENV",
    "ENV",
    "BASH_FUNC_",
    "GLIBC_TUNABLES",
    "GCONV_PATH",
    "PROMPT_COMMAND",
    "PS4",
];

fn env_check() -> Verdict {
    let mut found: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .filter(|k| {
            INJECTION_VARS.iter().any(|p| {
                if p.ends_with('_') {
                    k.starts_with(p)
                } else {
                    k == p
                }
            })
        })
        .collect();
    match std::fs::read_to_string("/proc/self/maps") {
        Ok(maps) => {
            if maps.contains("lwpreload") {
                found.push("lwpreload library mapped".into());
            }
        }
        Err(e) => return blocked("read /proc/self/maps", &e),
    }
    if found.is_empty() {
        Blocked("no injection variable and no preloaded library".into())
    } else {
        Escaped(format!("arrived: {}", found.join(", ")))
    }
}

// ---- Devices.

fn open_dev(path: &Path, mode: &str) -> Verdict {
    use std::os::unix::fs::OpenOptionsExt;
    let mut o = std::fs::OpenOptions::new();
    // Never wait: a terminal has no input to read, a modem line no carrier.
    o.custom_flags(libc::O_NONBLOCK);
    match mode {
        "r" => o.read(true),
        "w" => o.write(true),
        "rw" => o.read(true).write(true),
        _ => usage("mode must be r, w or rw"),
    };
    let mut f = match o.open(path) {
        Ok(f) => f,
        Err(e) => return blocked(format!("open {} ({mode})", show(path)), &e),
    };
    if mode == "r" {
        let mut buf = [0u8; 512];
        return match f.read(&mut buf) {
            Ok(n) => Escaped(format!("opened {} and read {n} bytes", show(path))),
            Err(e) => Escaped(format!("opened {} (read: {})", show(path), errname(&e))),
        };
    }
    Escaped(format!("opened {} ({mode})", show(path)))
}

fn kmsg(nonce: &OsStr) -> Verdict {
    let mut f = match std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
        Ok(f) => f,
        Err(e) => return blocked("open /dev/kmsg for writing", &e),
    };
    let mut line = b"<7>landwall-escape ".to_vec();
    line.extend_from_slice(nonce.as_bytes());
    line.push(b'\n');
    match f.write_all(&line) {
        Ok(()) => Escaped("wrote a line into the kernel log".into()),
        Err(e) => blocked("write /dev/kmsg", &e),
    }
}

// ---- Launchers.

/// A secret in the launcher's memory, for `vm-read`.
static PARENT_SECRET: &[u8] = b"parent-memory-secret";

/// `N=PATH`.
fn fd_spec(s: &OsStr) -> (i32, PathBuf) {
    let b = s.as_bytes();
    let eq = b
        .iter()
        .position(|&c| c == b'=')
        .unwrap_or_else(|| usage("descriptor spec must be N=PATH"));
    let n: i32 = num(OsStr::from_bytes(&b[..eq]), "descriptor");
    if n <= 2 {
        usage("descriptor must be above 2");
    }
    (n, PathBuf::from(OsStr::from_bytes(&b[eq + 1..])))
}

/// Splits `OPTIONS… -- CMD…`.
fn split_cmd(args: &[OsString]) -> (&[OsString], &[OsString]) {
    let dash = args
        .iter()
        .position(|a| a == "--")
        .unwrap_or_else(|| usage("missing -- before the command"));
    let (opts, rest) = args.split_at(dash);
    let cmd = &rest[1..];
    if cmd.is_empty() {
        usage("no command after --");
    }
    (opts, cmd)
}

fn exit_code(st: std::process::ExitStatus) -> i32 {
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

fn parent(args: &[OsString]) -> ! {
    let (opts, cmd) = split_cmd(args);
    let mut child_cwd = None;
    let mut report = None;
    let mut held: Vec<OwnedFd> = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let flag = opts[i].to_string_lossy().into_owned();
        let value = arg(opts, i + 1, &flag);
        match flag.as_str() {
            "--child-cwd" => child_cwd = Some(PathBuf::from(value)),
            "--report" => report = Some(PathBuf::from(value)),
            "--open" | "--leak" => {
                let (n, path) = fd_spec(value);
                let f = std::fs::File::open(&path).unwrap_or_else(|e| {
                    eprintln!("lw-escape parent: open {}: {e}", show(&path));
                    exit(2)
                });
                // Opened onto `n` itself (the lowest free number): dup3 onto the same number
                // is EINVAL, so move it aside first; dup3 then replaces `n`, whose old owner is
                // released without closing it.
                let f = if f.as_raw_fd() == n {
                    let aside = f.try_clone().unwrap_or_else(|e| {
                        eprintln!("lw-escape parent: dup {}: {e}", show(&path));
                        exit(2)
                    });
                    let _released = std::os::fd::IntoRawFd::into_raw_fd(f);
                    aside
                } else {
                    f
                };
                let fd = raw::dup_to(f.as_fd(), n, flag == "--open").unwrap_or_else(|e| {
                    eprintln!("lw-escape parent: dup onto {n}: {e}");
                    exit(2)
                });
                held.push(fd);
            }
            _ => usage(&format!("unknown option {flag}")),
        }
        i += 2;
    }
    let mut usr1 = SigSet::empty();
    usr1.add(Signal::SIGUSR1);
    if let Err(e) = nix::sys::signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&usr1), None) {
        eprintln!("lw-escape parent: block SIGUSR1: {e}");
        exit(2)
    }
    let secret = std::hint::black_box(PARENT_SECRET);
    let pid = std::process::id().to_string();
    let addr = format!("{:#x}", secret.as_ptr() as usize);
    let len = secret.len().to_string();
    let subst = |a: &OsString| -> OsString {
        match a.to_str() {
            Some(s) => s
                .replace("@PPID@", &pid)
                .replace("@ADDR@", &addr)
                .replace("@LEN@", &len)
                .into(),
            None => a.clone(),
        }
    };
    let mut c = Command::new(subst(&cmd[0]));
    c.args(cmd[1..].iter().map(subst));
    if let Some(dir) = &child_cwd {
        c.current_dir(dir);
    }
    let status = c.status().unwrap_or_else(|e| {
        eprintln!("lw-escape parent: run {}: {e}", cmd[0].to_string_lossy());
        exit(2)
    });
    let got = raw::pending(libc::SIGUSR1).unwrap_or(false);
    if let Some(path) = report {
        let text = format!(
            "pid: {}\nsignals: {}\n",
            std::process::id(),
            if got { "SIGUSR1" } else { "none" }
        );
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("lw-escape parent: write {}: {e}", show(&path));
            exit(2)
        }
    }
    drop(held);
    exit(exit_code(status))
}

fn pty(args: &[OsString]) -> ! {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
    use nix::sys::termios::{tcgetattr, tcsetattr, LocalFlags, SetArg, SpecialCharacterIndices};
    let (_, cmd) = split_cmd(args);
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        eprintln!("lw-escape pty: {what}: {e}");
        exit(2)
    };
    let p = nix::pty::openpty(None, None).unwrap_or_else(|e| fail("openpty", &e));
    for fd in [p.master.as_fd(), p.slave.as_fd()] {
        fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).unwrap_or_else(|e| fail("cloexec", &e));
    }
    // Input waiting on the terminal must be readable without a newline and without blocking.
    let mut t = tcgetattr(p.slave.as_fd()).unwrap_or_else(|e| fail("tcgetattr", &e));
    t.local_flags
        .remove(LocalFlags::ICANON | LocalFlags::ECHO | LocalFlags::ECHONL);
    t.control_chars[SpecialCharacterIndices::VMIN as usize] = 0;
    t.control_chars[SpecialCharacterIndices::VTIME as usize] = 0;
    tcsetattr(p.slave.as_fd(), SetArg::TCSANOW, &t).unwrap_or_else(|e| fail("tcsetattr", &e));
    let slave_path = nix::unistd::ttyname(p.slave.as_fd()).unwrap_or_else(|e| fail("ttyname", &e));
    let exe = std::env::current_exe().unwrap_or_else(|e| fail("current_exe", &e));
    let status = Command::new(exe)
        .arg("ctty")
        .arg(&slave_path)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| fail("run the child", &e));
    // What the child wrote to its terminal.
    fcntl(p.master.as_fd(), FcntlArg::F_SETFL(OFlag::O_NONBLOCK))
        .unwrap_or_else(|e| fail("nonblocking master", &e));
    let mut out = Vec::new();
    let mut master = std::fs::File::from(p.master);
    let mut buf = [0u8; 4096];
    while let Ok(n) = master.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    for line in String::from_utf8_lossy(&out).replace('\r', "").lines() {
        eprintln!("child: {line}");
    }
    eprintln!("child: exit {}", exit_code(status));
    // What the user's shell would read next.
    let mut injected = Vec::new();
    let mut slave = std::fs::File::from(p.slave);
    while let Ok(n) = slave.read(&mut buf) {
        if n == 0 {
            break;
        }
        injected.extend_from_slice(&buf[..n]);
    }
    if injected.is_empty() {
        println!("BLOCKED nothing injected");
        exit(1)
    }
    println!(
        "ESCAPED injected {:?} into the terminal's input",
        String::from_utf8_lossy(&injected)
    );
    exit(0)
}

fn ctty(args: &[OsString]) -> ! {
    let (opts, cmd) = split_cmd(args);
    let path = PathBuf::from(arg(opts, 0, "terminal path"));
    let stdin_only = match opts.get(1).map(|o| o.to_string_lossy()) {
        None => false,
        Some(o) if o == "--stdin" => true,
        Some(o) => usage(&format!("unknown option {o}")),
    };
    let fail = |what: &str, e: &dyn std::fmt::Display| -> ! {
        eprintln!("lw-escape ctty: {what}: {e}");
        exit(2)
    };
    nix::unistd::setsid().unwrap_or_else(|e| fail("setsid", &e));
    // A session leader without a terminal that opens one (no O_NOCTTY) gets it as its
    // controlling terminal.
    let term = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| fail(&format!("open {}", show(&path)), &e));
    let targets: &[i32] = if stdin_only { &[0] } else { &[0, 1, 2] };
    let mut kept = Vec::new();
    for &n in targets {
        kept.push(raw::dup_to(term.as_fd(), n, false).unwrap_or_else(|e| fail("dup", &e)));
    }
    let sid = nix::sys::termios::tcgetsid(term.as_fd()).unwrap_or_else(|e| fail("tcgetsid", &e));
    if sid != nix::unistd::getpid() {
        fail(
            &format!("{} is not our controlling terminal", show(&path)),
            &sid,
        );
    }
    drop(term);
    let e = Command::new(&cmd[0]).args(&cmd[1..]).exec();
    // The descriptors 0–2 now belong to the exec'd program; only reached on failure.
    std::mem::forget(kept);
    fail(&format!("exec {}", cmd[0].to_string_lossy()), &e)
}

// ---- Unix sockets, io_uring, keyrings: the doors beside the wall.

/// `connect` a new stream socket to the path-named socket `path`.
fn unix_connect(path: &Path) -> Verdict {
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Escaped(format!("connected to {}", show(path))),
        Err(e) => blocked(format!("connect {}", show(path)), &e),
    }
}

/// `sendto` a datagram from a new datagram socket (`via`: "socket"), or from a datagram
/// `socketpair` re-pointed by `connect` ("pair-connect") or by `sendto` ("pair-sendto").
fn unix_send(path: &Path, via: &str) -> Verdict {
    use std::os::unix::net::UnixDatagram;
    let msg = b"landwall-escape";
    let sock = if via == "socket" {
        UnixDatagram::unbound()
    } else {
        UnixDatagram::pair().map(|(a, _b)| a)
    };
    let sock = match sock {
        Ok(s) => s,
        Err(e) => return blocked(format!("{via}: make a datagram socket"), &e),
    };
    let sent = if via == "pair-connect" {
        sock.connect(path).and_then(|()| sock.send(msg))
    } else {
        sock.send_to(msg, path)
    };
    match sent {
        Ok(_) => Escaped(format!("{via}: sent a datagram to {}", show(path))),
        Err(e) => blocked(format!("{via}: send to {}", show(path)), &e),
    }
}

/// A Unix socket made through the i386 entry (`socket`, or `socketcall` with `via`
/// "socketcall"), then connected to `path` with the native `connect`.
#[cfg(target_arch = "x86_64")]
fn unix_i386(path: &Path, via: &str) -> Verdict {
    use std::os::unix::net::UnixStream;
    let fd = match raw::unix_socket_i386(via == "socketcall") {
        Ok(fd) => fd,
        Err(e) => return blocked(format!("i386 {via}(AF_UNIX)"), &e),
    };
    let stream = UnixStream::from(fd);
    // std has no connect for an existing socket; a raw connect through nix.
    let un = match nix::sys::socket::UnixAddr::new(path) {
        Ok(u) => u,
        Err(e) => return nix_blocked("address", e),
    };
    match nix::sys::socket::connect(stream.as_raw_fd(), &un) {
        Ok(()) => Escaped(format!("i386 {via}: connected to {}", show(path))),
        Err(e) => nix_blocked(format!("i386 {via}: connect {}", show(path)), e),
    }
}

/// A stream socket pair, written and read: what runtimes build their pipes with. ESCAPED
/// means it works (the suite asserts it still does inside the wall).
fn stream_pair() -> Verdict {
    use std::os::unix::net::UnixStream;
    let (mut a, mut b) = match UnixStream::pair() {
        Ok(p) => p,
        Err(e) => return blocked("socketpair(AF_UNIX, SOCK_STREAM)", &e),
    };
    let mut got = [0u8; 4];
    match a.write_all(b"ping").and_then(|()| b.read_exact(&mut got)) {
        Ok(()) if &got == b"ping" => Escaped("a stream socket pair carries data".into()),
        Ok(()) => Blocked("the pair carried other bytes".into()),
        Err(e) => blocked("stream pair", &e),
    }
}

/// Binds a stream socket at `path` and connects to it: the agent's own socket.
fn own_socket(path: &Path) -> Verdict {
    use std::os::unix::net::{UnixListener, UnixStream};
    let listener = match UnixListener::bind(path) {
        Ok(l) => l,
        Err(e) => return blocked(format!("bind {}", show(path)), &e),
    };
    match UnixStream::connect(path).and_then(|_| listener.accept()) {
        Ok(_) => Escaped(format!("connected to its own socket {}", show(path))),
        Err(e) => blocked(format!("connect to its own {}", show(path)), &e),
    }
}

/// An io_uring instance (whose socket and connect operations bypass seccomp).
fn io_uring() -> Verdict {
    match raw::io_uring_setup() {
        Ok(_) => Escaped("made an io_uring instance".into()),
        Err(e) => blocked("io_uring_setup", &e),
    }
}

fn key_name(name: &OsStr) -> std::ffi::CString {
    std::ffi::CString::new(name.as_bytes()).unwrap_or_else(|_| usage("a key name has no NUL"))
}

/// Reads the "user" key `name` from the user's keyrings.
fn key_read(name: &OsStr) -> Verdict {
    let id = match raw::find_key(&key_name(name)) {
        Ok(id) => id,
        Err(e) => return blocked(format!("find key {}", name.to_string_lossy()), &e),
    };
    match raw::read_key(id) {
        Ok(v) => Escaped(format!(
            "read key {}: {}",
            name.to_string_lossy(),
            String::from_utf8_lossy(&v)
        )),
        Err(e) => blocked(format!("read key {}", name.to_string_lossy()), &e),
    }
}

/// Adds (or changes: add_key updates an existing key) the "user" key `name`.
fn key_add(name: &OsStr, value: &OsStr) -> Verdict {
    match raw::add_key(&key_name(name), value.as_bytes()) {
        Ok(id) => Escaped(format!("added key {} ({id})", name.to_string_lossy())),
        Err(e) => blocked(format!("add key {}", name.to_string_lossy()), &e),
    }
}

/// Removes the "user" key `name` from the user keyring (test cleanup).
fn key_unlink(name: &OsStr) -> Verdict {
    match raw::find_key(&key_name(name)).and_then(raw::unlink_key) {
        Ok(()) => Escaped(format!("unlinked key {}", name.to_string_lossy())),
        Err(e) => blocked(format!("unlink key {}", name.to_string_lossy()), &e),
    }
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let Some((sub, rest)) = args.split_first() else {
        usage("no subcommand")
    };
    let sub = sub.to_string_lossy().into_owned();
    let p = |i: usize, what: &str| PathBuf::from(arg(rest, i, what));
    let verdict = match sub.as_str() {
        "parent" => parent(rest),
        "pty" => pty(rest),
        "ctty" => ctty(rest),
        "pause" => pause(),
        "read" => read_needle(&p(0, "PATH"), rest.get(1).map(OsString::as_os_str)),
        "list" => list_dir(&p(0, "DIR")),
        "write" => write_file(&p(0, "PATH")),
        "overwrite" => overwrite(&p(0, "PATH")),
        "symlink" => symlink_then_read(&p(0, "TARGET"), &p(1, "LINK")),
        "hardlink" => hardlink(&p(0, "SRC"), &p(1, "DST")),
        "rename" => rename(&p(0, "SRC"), &p(1, "DST")),
        "fd" => inherited_fd(
            num(arg(rest, 0, "N"), "N"),
            rest.get(1).map(|s| s.as_os_str()),
        ),
        "ptrace-attach" => ptrace_attach(pid_arg(rest, 0)),
        "ptrace-seize" => ptrace_seize(pid_arg(rest, 0)),
        "vm-read" => vm_read(
            pid_arg(rest, 0),
            num(arg(rest, 1, "ADDR"), "ADDR"),
            num(arg(rest, 2, "LEN"), "LEN"),
        ),
        "mem" => proc_mem(
            pid_arg(rest, 0),
            num(arg(rest, 1, "ADDR"), "ADDR"),
            num(arg(rest, 2, "LEN"), "LEN"),
        ),
        "pidfd-getfd" => pidfd_getfd(pid_arg(rest, 0), num(arg(rest, 1, "N"), "N")),
        "kill" => kill(pid_arg(rest, 0), signal_arg(arg(rest, 1, "SIG"))),
        "kill-child" => kill_child(),
        "abstract" => abstract_connect(arg(rest, 0, "NAME")),
        "unix-connect" => unix_connect(&p(0, "PATH")),
        "unix-send" => unix_send(&p(1, "PATH"), &arg(rest, 0, "VIA").to_string_lossy()),
        #[cfg(target_arch = "x86_64")]
        "unix-i386" => unix_i386(&p(1, "PATH"), &arg(rest, 0, "VIA").to_string_lossy()),
        "io-uring" => io_uring(),
        "stream-pair" => stream_pair(),
        "own-socket" => own_socket(&p(0, "PATH")),
        "key-read" => key_read(arg(rest, 0, "NAME")),
        "key-add" => key_add(arg(rest, 0, "NAME"), arg(rest, 1, "VALUE")),
        "key-unlink" => key_unlink(arg(rest, 0, "NAME")),
        "connect" => tcp_connect(sockaddr(arg(rest, 0, "HOST:PORT"))),
        "mptcp" => mptcp_connect(sockaddr(arg(rest, 0, "HOST:PORT"))),
        "tiocsti" => tiocsti(Encoding::from_args(rest)),
        "tiocsti-elsewhere" => tiocsti_elsewhere(&p(0, "terminal path")),
        "other-tty" => other_tty(&p(0, "terminal path")),
        "zombie-leader" => zombie_leader(arg(rest, 0, "MARKER")),
        "cgroup-leave" => cgroup_leave(&p(0, "DIR")),
        "tioclinux" => tioclinux(Encoding::from_args(rest)),
        "tty-ioctls" => tty_ioctls(),
        "mount" => mount(&p(0, "DIR")),
        "userns-mount" => userns_mount(&p(0, "DIR")),
        "chroot-walk" => chroot_walk(&p(0, "JAIL"), &p(1, "PATH")),
        "run" => run_program(rest),
        "ids" => ids(),
        "env" => env_check(),
        "open-dev" => open_dev(&p(0, "PATH"), &arg(rest, 1, "MODE").to_string_lossy()),
        "kmsg" => kmsg(arg(rest, 0, "NONCE")),
        other => usage(&format!("unknown subcommand {other}")),
    };
    match verdict {
        Escaped(d) => {
            println!("ESCAPED {d}");
            exit(0)
        }
        Blocked(d) => {
            println!("BLOCKED {d}");
            exit(1)
        }
    }
}
