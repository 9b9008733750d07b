//! The cancel request of a dropped query, sent with the connection's own TLS connector, and
//! the wait until the server has acted on it.
//!
//! A cancel request is a new connection to the server carrying the backend's process id and
//! secret key. PostgreSQL forks a child for it, which signals the backend (up to version 17,
//! twice: the backend and its process group) and exits, closing the connection. So once the
//! server has closed the cancel connection, every signal the cancel will ever send has been
//! sent. tokio-postgres's `CancelToken::cancel_query` returns when the request is written, not
//! when the server has acted on it; here the request goes through
//! `CancelToken::cancel_query_raw` over a [`CancelSocket`] that is given back when the request
//! is done with it, and read until the server closes it.

use std::io;
#[cfg(unix)]
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
#[cfg(unix)]
use tokio::net::UnixStream;
use tokio::sync::oneshot;
use tokio_postgres::config::Host;
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{CancelToken, Config};

/// PostgreSQL's port when the configuration names none.
const DEFAULT_PORT: u16 = 5432;

/// A TLS connector that a [`Database`](super::Database) can send its cancels through: any
/// `MakeTlsConnect` for [`CancelSocket`] that can be cloned and sent to another task.
///
/// The connectors generic over their stream, which is every common one, qualify as they
/// are: `tokio_postgres::NoTls`, postgres-native-tls's and postgres-openssl's
/// `MakeTlsConnector`, tokio-postgres-rustls's `MakeRustlsConnect`. Use the same connector
/// the connections use: the cancel then goes over TLS exactly when the connection does (its
/// `sslmode`), and fails, loudly, where the connection's would.
pub trait CancelTls:
    MakeTlsConnect<
        CancelSocket,
        Stream: Send,
        TlsConnect: Send + TlsConnect<CancelSocket, Future: Send>,
    > + Clone
    + Send
    + Sync
    + 'static
{
}

impl<M> CancelTls for M where
    M: MakeTlsConnect<
            CancelSocket,
            Stream: Send,
            TlsConnect: Send + TlsConnect<CancelSocket, Future: Send>,
        > + Clone
        + Send
        + Sync
        + 'static
{
}

/// Where a cancel request goes: the one server of a `tokio_postgres::Config`.
#[derive(Debug)]
pub(super) struct Target {
    addr: Addr,
    /// The name the TLS connector checks the server's certificate against.
    hostname: Option<String>,
    connect_timeout: Option<Duration>,
}

#[derive(Debug)]
enum Addr {
    /// A host name to resolve, or an address, and the port.
    Tcp(String, u16),
    /// A Unix socket's path.
    #[cfg(unix)]
    Unix(PathBuf),
}

impl Target {
    /// The server `config` connects to, as tokio-postgres reads it: its one `host` (or
    /// `hostaddr`) and its port. A configuration naming several hosts is refused: a cancel
    /// must reach the server its connection went to, which the configuration does not say.
    pub(super) fn from_config(config: &Config) -> io::Result<Target> {
        let refuse = |what: String| {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a cancel goes to the one server of the configuration, which {what}"),
            ))
        };
        let port = match config.get_ports() {
            [] => DEFAULT_PORT,
            [port] => *port,
            ports => return refuse(format!("names {} ports", ports.len())),
        };
        let connect_timeout = config.get_connect_timeout().copied();
        let addrs = config.get_hostaddrs();
        let target = match (config.get_hosts(), addrs) {
            ([Host::Tcp(name)], []) => Target {
                addr: Addr::Tcp(name.clone(), port),
                hostname: Some(name.clone()),
                connect_timeout,
            },
            ([Host::Tcp(name)], [addr]) => Target {
                addr: Addr::Tcp(addr.to_string(), port),
                hostname: Some(name.clone()),
                connect_timeout,
            },
            ([], [addr]) => Target {
                addr: Addr::Tcp(addr.to_string(), port),
                hostname: None,
                connect_timeout,
            },
            #[cfg(unix)]
            ([Host::Unix(dir)], []) => Target {
                addr: Addr::Unix(dir.join(format!(".s.PGSQL.{port}"))),
                hostname: None,
                connect_timeout,
            },
            ([], []) => return refuse("names no host".to_owned()),
            (hosts, addrs) => {
                return refuse(format!(
                    "names {} hosts and {} host addresses",
                    hosts.len(),
                    addrs.len()
                ));
            }
        };
        Ok(target)
    }

    async fn connect(&self) -> io::Result<Stream> {
        let connect = async {
            match &self.addr {
                Addr::Tcp(host, port) => {
                    let stream = TcpStream::connect((host.as_str(), *port)).await?;
                    stream.set_nodelay(true)?;
                    Ok(Stream::Tcp(stream))
                }
                #[cfg(unix)]
                Addr::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path).await?)),
            }
        };
        match self.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, connect)
                .await
                .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())),
            None => connect.await,
        }
    }
}

/// Why a cancel failed: the connect, the TLS connector, or the request.
pub(super) type CancelError = Box<dyn std::error::Error + Send + Sync>;

/// Sends the cancel request for `token`'s backend to `target` through `tls`, and waits until
/// the server has closed the cancel connection: by then it has signalled the backend.
pub(super) async fn cancel<M: CancelTls>(
    target: &Target,
    tls: &M,
    token: &CancelToken,
) -> Result<(), CancelError> {
    let tls = tls
        .clone()
        .make_tls_connect(target.hostname.as_deref().unwrap_or(""))
        .map_err(Into::into)?;
    let stream = target.connect().await?;
    let (back, returned) = oneshot::channel();
    let socket = CancelSocket {
        stream: Some(stream),
        back: Some(back),
    };
    token.cancel_query_raw(socket, tls).await?;
    // `cancel_query_raw` has dropped the socket, which gave its stream back.
    let mut stream = returned.await?;
    // Read until the server closes it. Whatever it sends (a TLS alert) is not ours to read:
    // only its end matters. A reset is an end too.
    let mut scratch = [0_u8; 256];
    loop {
        match stream.read(&mut scratch).await {
            Ok(0) | Err(_) => return Ok(()),
            Ok(_) => {}
        }
    }
}

#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    #[cfg(unix)]
    Unix(UnixStream),
}

/// The socket a cancel request goes over, the stream type a [`CancelTls`] connector
/// connects. It is used by the library alone; it appears in the connector's bound.
#[derive(Debug)]
pub struct CancelSocket {
    stream: Option<Stream>,
    /// Where the stream goes when the request is done with it.
    back: Option<oneshot::Sender<Stream>>,
}

impl CancelSocket {
    fn stream(&mut self) -> io::Result<&mut Stream> {
        self.stream
            .as_mut()
            .ok_or_else(|| io::ErrorKind::NotConnected.into())
    }
}

impl Drop for CancelSocket {
    fn drop(&mut self) {
        if let (Some(stream), Some(back)) = (self.stream.take(), self.back.take()) {
            let _ = back.send(stream);
        }
    }
}

impl AsyncRead for CancelSocket {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.stream()? {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for CancelSocket {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.stream()? {
            Stream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.stream()? {
            Stream::Tcp(s) => Pin::new(s).poll_flush(cx),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.stream()? {
            Stream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(unix)]
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}
