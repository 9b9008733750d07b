//! A helper the test binaries share: a loopback port that refuses every connect.

use std::net::SocketAddr;
use std::sync::Mutex;

/// The sockets that hold the closed ports, open until the test binary exits.
static HELD: Mutex<Vec<tokio::net::TcpSocket>> = Mutex::new(Vec::new());

/// A loopback port that refuses every connect for as long as the test binary runs: a socket
/// is bound to it and never listens. Bound without `SO_REUSEADDR`, that socket keeps the port
/// from every other one, so no listener bound later is given it. (A port taken from a
/// listener that was then closed could be given to the next listener any test binds, one
/// time in some 7 000 on Linux's default port range, and a connect meant to be refused would
/// reach it.)
pub(crate) fn closed_port() -> SocketAddr {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("a loopback port");
    let addr = socket.local_addr().expect("its port");
    HELD.lock().unwrap().push(socket);
    addr
}
