//! A fault-injecting TCP proxy on loopback, between a client and its server.
//!
//! Each connection accepted is forwarded to the upstream address; each direction reads
//! chunks (one read of up to 16 KiB each) and writes each one out at its release instant,
//! in order: a chunk is never released before the one read before it. The faults:
//!
//! - [`Fault::Delay`]: each chunk is held `base ± jitter` (uniform), a network with
//!   latency that varies from packet to packet.
//! - [`Fault::Loss`]: a TCP stream cannot lose bytes (the receiver would see a corrupt
//!   stream, not a lossy network), and a user-space proxy never sees the kernel's segments.
//!   So loss is what it costs a TCP connection: `per_mille` of the chunks are held back
//!   `hold` (Linux's minimum retransmission timeout, 200 ms, for a segment lost and sent
//!   again), and everything behind them on that direction waits too, as TCP delivers in
//!   order. A lost SYN is not modelled: the kernel completes the handshake before the proxy
//!   sees the connection.
//!
//! A direction that reads the end of its stream forwards it (a shutdown of the write half)
//! once its queued chunks are out; a read or write that fails (a reset) tears the whole
//! connection down, both sockets closed. [`FaultProxy::open`] counts the connections still
//! open: after every client has gone, it must come back to zero.

use std::io;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::rng::{Rng, SplitMix64};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What the proxy does to the chunks it forwards.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fault {
    /// Forwarded as they come.
    None,
    /// Each chunk held `base ± jitter`, uniformly.
    Delay { base: Duration, jitter: Duration },
    /// `per_mille` chunks in a thousand held `hold`, and what follows them behind them.
    Loss { per_mille: u64, hold: Duration },
}

impl Fault {
    /// How long the next chunk is held.
    fn hold(self, rng: &mut SplitMix64) -> Duration {
        match self {
            Fault::None => Duration::ZERO,
            Fault::Delay { base, jitter } => {
                rng.duration_between(base.saturating_sub(jitter), base + jitter)
            }
            Fault::Loss { per_mille, hold } => {
                if rng.u64_between(0, 999) < per_mille {
                    hold
                } else {
                    Duration::ZERO
                }
            }
        }
    }
}

/// The most bytes read at once: one chunk.
const CHUNK: usize = 16 * 1024;
/// The most chunks queued in one direction before its reader waits.
const QUEUE: usize = 64;

/// The proxy: see the [module](self).
pub(crate) struct FaultProxy {
    addr: SocketAddr,
    open: Arc<AtomicUsize>,
    accepting: JoinHandle<()>,
}

impl FaultProxy {
    /// A proxy on a free loopback port to `upstream`, with `fault`, its random draws from
    /// `seed`.
    pub(crate) async fn start(upstream: SocketAddr, fault: Fault, seed: u64) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let open = Arc::new(AtomicUsize::new(0));
        let accepting = tokio::spawn({
            let open = open.clone();
            async move {
                let mut seeds = SplitMix64::new(seed);
                while let Ok((down, _)) = listener.accept().await {
                    let guard = Open::new(&open);
                    let seeds = (seeds.next_u64(), seeds.next_u64());
                    tokio::spawn(pipe(down, upstream, fault, seeds, guard));
                }
            }
        });
        FaultProxy {
            addr,
            open,
            accepting,
        }
    }

    /// Where clients connect.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The connections open now (each two sockets: the client's and the upstream one).
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

/// Counts one open connection until it is dropped.
struct Open(Arc<AtomicUsize>);

impl Open {
    fn new(open: &Arc<AtomicUsize>) -> Open {
        open.fetch_add(1, Ordering::SeqCst);
        Open(open.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One connection: `down` (the client's) to a new connection to `upstream`, both ways,
/// until both directions have ended, or one has failed.
async fn pipe(down: TcpStream, upstream: SocketAddr, fault: Fault, seeds: (u64, u64), _open: Open) {
    let Ok(up) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = down.set_nodelay(true);
    let _ = up.set_nodelay(true);
    let (down_read, down_write) = down.into_split();
    let (up_read, up_write) = up.into_split();
    let mut to_up = pin!(direction(down_read, up_write, fault, seeds.0));
    let mut to_down = pin!(direction(up_read, down_write, fault, seeds.1));
    tokio::select! {
        ended = &mut to_up => if ended.is_ok() {
            let _ = to_down.await;
        },
        ended = &mut to_down => if ended.is_ok() {
            let _ = to_up.await;
        },
    }
}

/// One direction: chunks read from `from`, each written to `to` at its release instant;
/// the end of the stream forwarded once every chunk is out. An error (a reset on either
/// side) ends it at once.
async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    fault: Fault,
    seed: u64,
) -> io::Result<()> {
    let (queue, mut chunks) = mpsc::channel::<(Instant, Bytes)>(QUEUE);
    let read = async move {
        let mut rng = SplitMix64::new(seed);
        let mut buf = vec![0; CHUNK];
        let mut release = Instant::now();
        loop {
            let n = from.read(&mut buf).await?;
            if n == 0 {
                return Ok::<(), io::Error>(());
            }
            // Never before the chunk read before it: the stream stays in order.
            release = release.max(Instant::now() + fault.hold(&mut rng));
            let chunk = Bytes::copy_from_slice(&buf[..n]);
            if queue.send((release, chunk)).await.is_err() {
                return Ok(());
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = chunks.recv().await {
            tokio::time::sleep_until(at).await;
            to.write_all(&chunk).await?;
        }
        to.shutdown().await
    };
    let mut read = pin!(read);
    let mut write = pin!(write);
    tokio::select! {
        // The end of the stream (or a failed read): the chunks queued still go out.
        read_ended = &mut read => {
            read_ended?;
            write.await
        }
        // The writer ends first only when a write failed.
        write_ended = &mut write => write_ended,
    }
}
