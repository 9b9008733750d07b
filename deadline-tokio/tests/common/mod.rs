//! Helpers the test binaries share: a loopback port that refuses every connect, and an
//! HTTP/2 server that refuses the first stream it is sent.

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

/// An HTTP/2 server on loopback that resets the first stream it is sent with
/// `REFUSED_STREAM` (closed before any processing, RFC 9113) and answers every later one
/// `200` with a gRPC status of 0; and the count of streams it was sent. It runs until the test
/// binary exits.
#[allow(dead_code)]
pub(crate) async fn refusing_first_stream()
-> (SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its port");
    let streams = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = streams.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let Ok(mut connection) = h2::server::handshake(socket).await else {
                    return;
                };
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    if seen.fetch_add(1, Ordering::SeqCst) == 0 {
                        respond.send_reset(h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    let response = http::Response::builder()
                        .status(200)
                        .header("content-type", "application/grpc")
                        .body(())
                        .expect("a response");
                    let Ok(mut body) = respond.send_response(response, false) else {
                        continue;
                    };
                    let mut trailers = http::HeaderMap::new();
                    trailers.insert("grpc-status", http::HeaderValue::from_static("0"));
                    let _ = body.send_trailers(trailers);
                }
            });
        }
    });
    (addr, streams)
}
