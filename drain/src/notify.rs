//! `sd_notify` by hand: datagrams to `$NOTIFY_SOCKET` (a path, or an abstract name written
//! with a leading `@`). Nothing happens when the variable is unset.
//!
//! The socket is connected once, at start, before the daemon walls itself in: Landlock's
//! scoping (ABI 6) refuses sending to an abstract socket outside the wall, but lets a
//! datagram socket keep sending to the peer it was connected to before.

use std::ffi::OsStr;
use std::io;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The address `NOTIFY_SOCKET` names.
fn address(socket: &OsStr) -> io::Result<SocketAddr> {
    match socket.as_bytes().strip_prefix(b"@") {
        Some(name) => SocketAddr::from_abstract_name(name),
        None => SocketAddr::from_pathname(socket),
    }
}

/// A connection to the service manager, or none.
#[derive(Debug, Default)]
pub struct Notifier(Option<UnixDatagram>);

impl Notifier {
    /// Connects to `socket` (the value of `NOTIFY_SOCKET`), if set and not empty.
    pub fn connect(socket: Option<&OsStr>) -> io::Result<Notifier> {
        let Some(socket) = socket.filter(|s| !s.is_empty()) else {
            return Ok(Notifier(None));
        };
        let sock = UnixDatagram::unbound()?;
        sock.connect_addr(&address(socket)?)?;
        Ok(Notifier(Some(sock)))
    }

    /// Sends `state` (`READY=1`, `STOPPING=1`, …), if connected.
    pub fn send(&self, state: &str) -> io::Result<()> {
        match &self.0 {
            Some(sock) => sock.send(state.as_bytes()).map(drop),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_and_to_an_abstract_name() {
        let dir = std::env::temp_dir().join(format!("lw-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let path = dir.join("notify");
        let rx = UnixDatagram::bind(&path).expect("bind");
        let n = Notifier::connect(Some(path.as_os_str())).expect("connect");
        n.send("READY=1").expect("send");
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"READY=1");
        std::fs::remove_dir_all(&dir).expect("cleanup");

        let name = format!("lw-notify-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let rx = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        Notifier::connect(Some(OsStr::new(&format!("@{name}"))))
            .expect("connect")
            .send("STOPPING=1")
            .expect("send");
        let n = rx.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn nothing_without_a_socket() {
        Notifier::connect(None)
            .expect("no-op")
            .send("READY=1")
            .expect("no-op");
        Notifier::connect(Some(OsStr::new("")))
            .expect("no-op")
            .send("READY=1")
            .expect("no-op");
    }
}
