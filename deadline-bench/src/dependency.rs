//! The downstream dependency of the loopback benchmarks, in a process of its own: an axum
//! server whose every answer waits a latency drawn from a model (most answers fast, a few
//! slow, some failures), and which counts the requests it receives, hedges and retries
//! included. Each request draws on its own, so a hedge of a slow request is as likely to be
//! fast as any.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// How the dependency answers: a fast latency drawn uniformly from `fast`, or with
/// probability `slow_per_10k` / 10 000 the `slow` latency; and with probability
/// `fail_per_10k` / 10 000 a 503 after the fast latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Model {
    /// The fast latencies, uniformly (microseconds, from and to).
    pub fast: (u64, u64),
    /// Slow answers per 10 000.
    pub slow_per_10k: u64,
    /// The slow latency (microseconds).
    pub slow: u64,
    /// Failures (503) per 10 000.
    pub fail_per_10k: u64,
}

impl Model {
    /// The model as the `model` command writes it.
    #[must_use]
    pub fn command(&self) -> String {
        format!(
            "model {} {} {} {} {}",
            self.fast.0, self.fast.1, self.slow_per_10k, self.slow, self.fail_per_10k
        )
    }

    fn parse(args: &str) -> Option<Model> {
        let v: Vec<u64> = args
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        let [a, b, c, d, e] = v[..] else { return None };
        Some(Model {
            fast: (a, b.max(a)),
            slow_per_10k: c,
            slow: d,
            fail_per_10k: e,
        })
    }
}

/// The model in force, one atomic per field (the `model` command changes it while requests
/// run).
struct Current {
    fast_from: AtomicU64,
    fast_to: AtomicU64,
    slow_per_10k: AtomicU64,
    slow: AtomicU64,
    fail_per_10k: AtomicU64,
}

static CURRENT: Current = Current {
    fast_from: AtomicU64::new(1_000),
    fast_to: AtomicU64::new(3_000),
    slow_per_10k: AtomicU64::new(0),
    slow: AtomicU64::new(0),
    fail_per_10k: AtomicU64::new(0),
};
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static CONNECTIONS: AtomicU64 = AtomicU64::new(0);
static UNUSED: AtomicU64 = AtomicU64::new(0);
static DRAWS: AtomicU64 = AtomicU64::new(0);

fn set(model: Model) {
    CURRENT.fast_from.store(model.fast.0, Ordering::Relaxed);
    CURRENT.fast_to.store(model.fast.1, Ordering::Relaxed);
    CURRENT
        .slow_per_10k
        .store(model.slow_per_10k, Ordering::Relaxed);
    CURRENT.slow.store(model.slow, Ordering::Relaxed);
    CURRENT
        .fail_per_10k
        .store(model.fail_per_10k, Ordering::Relaxed);
}

/// SplitMix64: one well-mixed 64-bit value per draw number.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn answer() -> (StatusCode, &'static str) {
    RECEIVED.fetch_add(1, Ordering::Relaxed);
    let x = mix(DRAWS.fetch_add(1, Ordering::Relaxed));
    let (from, to) = (
        CURRENT.fast_from.load(Ordering::Relaxed),
        CURRENT.fast_to.load(Ordering::Relaxed),
    );
    let fast = from + (x >> 32) % (to - from + 1);
    let slow = (x % 10_000) < CURRENT.slow_per_10k.load(Ordering::Relaxed);
    let fail = ((x >> 16) % 10_000) < CURRENT.fail_per_10k.load(Ordering::Relaxed);
    let wait = if slow {
        CURRENT.slow.load(Ordering::Relaxed)
    } else {
        fast
    };
    tokio::time::sleep(Duration::from_micros(wait)).await;
    if fail {
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable\n")
    } else {
        (StatusCode::OK, "42\n")
    }
}

/// The child's main: serves the dependency with `model` on a multi-threaded runtime of
/// `threads` workers, and answers `cpu`, `received`, `connections`, `unused` and
/// `model A B C D E` on standard input until it closes.
pub fn child_main(model: Model, threads: usize) {
    set(model);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a runtime");
    let addr: SocketAddr = runtime.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("an address");
        let app = axum::Router::new().route("/", axum::routing::get(answer));
        // Counts the connections it accepts: a client that drops a request in flight (a
        // hedge's loser, a timeout) cannot use its HTTP/1.1 connection again.
        let listener = Counting(listener);
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    crate::child::serve_commands(&[addr], |command| {
        if command == "received" {
            return Some(RECEIVED.load(Ordering::Relaxed).to_string());
        }
        if command == "connections" {
            return Some(CONNECTIONS.load(Ordering::Relaxed).to_string());
        }
        if command == "unused" {
            return Some(UNUSED.load(Ordering::Relaxed).to_string());
        }
        let model = Model::parse(command.strip_prefix("model ")?)?;
        set(model);
        Some("ok".to_owned())
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// The dependency's listener: counts the connections it accepts, and of them those closed
/// before a byte arrived on them (a client that gave up on a connection it was opening: a
/// hedge dropped before its request was written, because the first attempt answered first).
struct Counting(TcpListener);

impl axum::serve::Listener for Counting {
    type Io = Counted;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Counted, SocketAddr) {
        loop {
            match self.0.accept().await {
                Ok((stream, addr)) => {
                    CONNECTIONS.fetch_add(1, Ordering::Relaxed);
                    return (
                        Counted {
                            stream,
                            used: false,
                        },
                        addr,
                    );
                }
                // Out of file descriptors, or a connection reset before it was accepted:
                // wait a moment rather than spin, as axum's own listener does.
                Err(_) => tokio::time::sleep(Duration::from_millis(1)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

/// An accepted connection: counted in `UNUSED` when it closes without a byte read from it.
struct Counted {
    stream: TcpStream,
    used: bool,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if !self.used {
            UNUSED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.used = true;
        }
        polled
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, data)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
