//! `overload`: a real HTTP/2 server on loopback with a fixed capacity, offered twice that
//! capacity by an open-loop client, four ways: with `DeadlineLayer` and admission; with
//! tower's `ConcurrencyLimit` and `LoadShed`, with no queue and with a queue as long as the
//! library lets a request wait; and with neither. It prints what it measured:
//! goodput (answers within their deadline per second) as a share of the capacity, the
//! latency percentiles of the answers, the shed count, the answers that came after their
//! deadline, and the server's queue. It runs the four in `--rounds` rounds whose order
//! rotates, and prints each way's goodput over the rounds.
//!
//! ```text
//! cargo run -p deadline-load --release -- [--seconds 30] [--rounds 3] [--short-ms D --short-percent P] [--check]
//! ```
//!
//! - **The server** serves [`WORKERS`] requests at once, each holding a worker for [`WORK`]:
//!   a capacity of `WORKERS / WORK` requests per second. The work is a sleep on tokio's
//!   blocking pool, which keeps time to a few tens of microseconds (tokio's timer rounds each
//!   sleep up to a whole millisecond, which would make it about 11 ms, and the capacity about
//!   360 per second). The rest wait for a worker, in a queue whose length a monitor samples
//!   every second. The server runs on a runtime of its own, not the client's.
//! - **The client** sends requests at twice the capacity, on a fixed schedule whatever the
//!   answers (open loop), each with a 100 ms deadline, over one HTTP/2 connection: it sends
//!   `x-deadline-ms: 95`, keeping 5 ms for the trip as `Propagation` does, and counts an
//!   answer as late when it arrives more than 100 ms after it was sent. It
//!   stops sending after `--seconds`, then waits at most [`DRAIN`] for the answers still
//!   outstanding and counts the rest as unanswered. Every loop is bounded in count and time.
//!   With `--short-ms D --short-percent P`, P% of the requests, spread evenly, have a deadline
//!   of D ms instead (callers with less time: a queue bounded by its length serves some of
//!   them late; one bounded by each request's deadline does not).
//! - **With the library**, the server reads each request's deadline with `DeadlineLayer`,
//!   which refuses (503) a request with less time left than the work needs (`Admission`); a
//!   request waits for a worker at most `QueueAdmission::max_queue_delay`
//!   ([`MAX_QUEUE_DELAY`]) and never past the point where its work would no longer fit, then
//!   is shed (503) by the core's `QueueAdmission::admit_queued`; and the layer answers 504
//!   for a handler still running at its deadline.
//! - **With tower**, `ConcurrencyLimit` of [`WORKERS`] behind `LoadShed`: a request that
//!   finds every worker busy is refused at once (503), with no queue; and the same behind a
//!   `Buffer` of [`TOWER_QUEUE`] requests, [`MAX_QUEUE_DELAY`] of work at the capacity (the
//!   library's longest wait, as a queue tower can bound: by its length), a request that
//!   finds it full refused at once.
//! - **Without either**, the same handler waits for a worker however long it takes.
//!
//! With `--check` (the short run CI makes), it exits non-zero unless the outcome is the
//! expected one: with the library every 200 came within its deadline (with `--short-ms`, all
//! but 1% at most: an answer made in time now and then reaches the client past a short
//! deadline), requests were shed, and the latency of the 200s stayed under the deadline in
//! every window; with tower, both ways answered and shed (with `--short-ms`, behind the
//! buffer at least 10% of the 200s came late); without either, the queue and the latency grew
//! and answers came late. Speed itself is never asserted.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use deadline_core::analysis::{Sample as Latencies, SampleError};
use deadline_core::policy::Quantile;
use deadline_core::wire::Propagation;
use deadline_core::wire::{Admission, QueueAdmission};
use deadline_core::{Clock, Deadline, Error, ms};
use deadline_tokio::DeadlineLayer;
use deadline_tokio::time::TokioClock;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt, service_fn};

/// Requests the server works on at once.
const WORKERS: usize = 4;
/// How long each request's work takes.
const WORK: Duration = ms(10);
/// Requests per second the server can serve: `WORKERS / WORK`.
const CAPACITY: u64 = 400;
/// Requests per second offered: twice the capacity.
const OFFERED: u64 = 2 * CAPACITY;
/// Each request's deadline, sent in `x-deadline-ms` (less the allowance); with `--short-ms`,
/// the longer of the two.
const DEADLINE: Duration = ms(100);
/// What the client keeps back of its deadline for the trip (the per-hop allowance): it
/// sends `x-deadline-ms: 95` for its 100 ms.
const ALLOWANCE: Duration = ms(5);
/// With the library: the longest a request waits for a worker before it is shed.
const MAX_QUEUE_DELAY: Duration = ms(20);
/// With tower's queue: the requests its `Buffer` holds, [`MAX_QUEUE_DELAY`] of work at the
/// capacity (20 ms at 400 per second: 8).
const TOWER_QUEUE: usize = (MAX_QUEUE_DELAY.as_millis() as usize) * (CAPACITY as usize) / 1_000;
// The label of the way says 8.
const _: () = assert!(TOWER_QUEUE == 8);
/// After the last request is sent, how long the client waits for the answers still out.
const DRAIN: Duration = Duration::from_secs(10);
/// The windows the run's latency is reported in, to show whether it grows.
const WINDOWS: usize = 6;

/// How the server is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// `DeadlineLayer` with admission, and a queue wait bounded by the core's admission.
    Library,
    /// tower's `ConcurrencyLimit` of [`WORKERS`] behind `LoadShed`: no queue.
    Tower,
    /// The same behind a `Buffer` of [`TOWER_QUEUE`] requests.
    TowerQueue,
    /// The same handler with no deadline and no admission.
    Plain,
}

impl Mode {
    fn label(self) -> &'static str {
        match self {
            Mode::Library => "with DeadlineLayer + Admission",
            Mode::Tower => "with tower ConcurrencyLimit + LoadShed",
            Mode::TowerQueue => "with tower, behind a Buffer of 8",
            Mode::Plain => "without either",
        }
    }
}

/// One request's work: holds `permit` (a worker) for [`WORK`], on the blocking pool, and
/// gives it back when the work ends (also if the request is dropped before).
async fn work<P: Send + 'static>(permit: P) {
    let worked = tokio::task::spawn_blocking(move || {
        std::thread::sleep(WORK);
        drop(permit);
    });
    let _ = worked.await;
}

/// What became of one request, as the client saw it.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// When it was sent, from the start of the run.
    sent: Duration,
    /// From sending to the end of the answer's body.
    latency: Duration,
    /// The HTTP status, or `None` for a transport error.
    status: Option<StatusCode>,
    /// The request's deadline: an answer after it is late.
    deadline: Duration,
}

/// The response body both servers answer with.
type Body = Full<Bytes>;

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response
}

/// The handler with the library: waits for a worker no longer than admission allows, then
/// works.
async fn handler_with_library(
    workers: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
    admission: QueueAdmission,
) -> Result<Response<Body>, Infallible> {
    let shed = || {
        let status = StatusCode::from_u16(Error::Shed.http_status())
            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
        text(status, "request shed at admission\n")
    };
    let Some(deadline) = deadline_tokio::current() else {
        return Ok(text(StatusCode::INTERNAL_SERVER_ERROR, "no deadline\n"));
    };
    let enqueued = TokioClock.now();
    // Wait no longer than the queue delay admission allows, and never so long that the
    // work no longer fits before the deadline.
    let fits = deadline
        .remaining(enqueued)
        .saturating_sub(admission.admission().need());
    let wait = admission.max_queue_delay().min(fits);
    waiting.fetch_add(1, Ordering::Relaxed);
    let permit = tokio::time::timeout(wait, workers.acquire_owned()).await;
    waiting.fetch_sub(1, Ordering::Relaxed);
    let Ok(Ok(permit)) = permit else {
        return Ok(shed());
    };
    if admission
        .admit_queued(deadline, enqueued, TokioClock.now())
        .is_err()
    {
        return Ok(shed());
    }
    work(permit).await;
    Ok(text(StatusCode::OK, "ok\n"))
}

/// The handler without the library: waits for a worker however long it takes.
async fn handler_plain(
    workers: Arc<Semaphore>,
    waiting: Arc<AtomicUsize>,
) -> Result<Response<Body>, Infallible> {
    waiting.fetch_add(1, Ordering::Relaxed);
    let permit = workers.acquire_owned().await;
    waiting.fetch_sub(1, Ordering::Relaxed);
    let Ok(permit) = permit else {
        return Ok(text(StatusCode::INTERNAL_SERVER_ERROR, "closed\n"));
    };
    work(permit).await;
    Ok(text(StatusCode::OK, "ok\n"))
}

/// The work behind tower's limit: the worker is the limit's permit, held until the answer is
/// made.
async fn tower_work(_: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    work(()).await;
    Ok(text(StatusCode::OK, "ok\n"))
}

/// tower's answer to a request `LoadShed` refused: 503.
fn overloaded(
    result: Result<Response<Body>, tower::BoxError>,
) -> Result<Response<Body>, tower::BoxError> {
    Ok(result.unwrap_or_else(|_overloaded| text(StatusCode::SERVICE_UNAVAILABLE, "overloaded\n")))
}

/// Serves HTTP/2 on `listener` until its runtime is shut down.
async fn serve(mode: Mode, listener: std::net::TcpListener, waiting: Arc<AtomicUsize>) {
    let listener = TcpListener::from_std(listener).expect("a tokio listener");
    let workers = Arc::new(Semaphore::new(WORKERS));
    let admission = Admission::new(WORK).with_max_queue_delay(MAX_QUEUE_DELAY);
    let layer = DeadlineLayer::new(
        Propagation::DEFAULT
            .with_allowance(ms(0))
            .with_max(ms(10_000)),
        ms(1_000),
    )
    .with_admission(admission.admission());
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let (workers, waiting) = (Arc::clone(&workers), Arc::clone(&waiting));
        let mut http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        http2.max_concurrent_streams(1_000_000);
        let io = TokioIo::new(stream);
        match mode {
            Mode::Library => {
                let service = layer.layer(service_fn(move |_: Request<Incoming>| {
                    handler_with_library(Arc::clone(&workers), Arc::clone(&waiting), admission)
                }));
                tokio::spawn(http2.serve_connection(io, TowerToHyperService::new(service)));
            }
            Mode::Tower => {
                // The worker is the limit's permit, held until the answer is made.
                let service = ServiceBuilder::new()
                    .load_shed()
                    .concurrency_limit(WORKERS)
                    .service_fn(tower_work)
                    .map_result(overloaded);
                tokio::spawn(http2.serve_connection(io, TowerToHyperService::new(service)));
            }
            Mode::TowerQueue => {
                // A request waits in the buffer while every worker is busy; one that finds
                // the buffer full is shed.
                let service = ServiceBuilder::new()
                    .load_shed()
                    .buffer(TOWER_QUEUE)
                    .concurrency_limit(WORKERS)
                    .service_fn(tower_work)
                    .map_result(overloaded);
                tokio::spawn(http2.serve_connection(io, TowerToHyperService::new(service)));
            }
            Mode::Plain => {
                let service = service_fn(move |_: Request<Incoming>| {
                    handler_plain(Arc::clone(&workers), Arc::clone(&waiting))
                });
                tokio::spawn(http2.serve_connection(io, TowerToHyperService::new(service)));
            }
        }
    }
}

/// One run: the server in `mode`, offered twice its capacity for `seconds`.
async fn run(mode: Mode, seconds: u64, short: Option<Short>) -> Report {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    let address: SocketAddr = listener.local_addr().expect("local address");
    let waiting = Arc::new(AtomicUsize::new(0));
    // The server on a runtime of its own, apart from the client's: two workers, and the
    // blocking pool its work runs on.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the server's runtime");
    server.spawn(serve(mode, listener, Arc::clone(&waiting)));

    // The queue, sampled once a second (bounded: the run's seconds plus the drain).
    let queue = Arc::new(Mutex::new(Vec::new()));
    let monitor = {
        let (queue, waiting) = (Arc::clone(&queue), Arc::clone(&waiting));
        tokio::spawn(async move {
            for _ in 0..seconds + DRAIN.as_secs() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let len = waiting.load(Ordering::Relaxed);
                queue.lock().unwrap_or_else(|e| e.into_inner()).push(len);
            }
        })
    };

    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .http2_max_concurrent_reset_streams(1_000_000)
        .build_http();
    let uri: http::Uri = format!("http://{address}/").parse().expect("a valid URI");
    let total = OFFERED * seconds;
    let period = Duration::from_secs(1) / u32::try_from(OFFERED).unwrap_or(1);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for i in 0..total {
        let at = start + period * u32::try_from(i).unwrap_or(u32::MAX);
        tokio::time::sleep_until(at).await;
        let (client, uri) = (client.clone(), uri.clone());
        let deadline = short.map_or(DEADLINE, |short| short.deadline_of(i));
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            // The client's deadline, less the allowance, as the core encodes it.
            let now = TokioClock.now();
            let budget = Propagation::DEFAULT
                .with_allowance(ALLOWANCE)
                .with_max(DEADLINE)
                .encode_deadline_ms(Deadline::after(now, deadline), now)
                .expect("a deadline longer than the allowance is not spent");
            let request = Request::builder()
                .uri(uri)
                .header("x-deadline-ms", budget.as_bytes())
                .body(Full::new(Bytes::new()))
                .expect("a valid request");
            let status = match client.request(request).await {
                Ok(response) => {
                    let status = response.status();
                    match response.into_body().collect().await {
                        Ok(_) => Some(status),
                        Err(_) => None,
                    }
                }
                Err(_) => None,
            };
            Sample {
                sent: sent.duration_since(start),
                latency: sent.elapsed(),
                status,
                deadline,
            }
        }));
    }
    let offered_for = start.elapsed();

    // Collect the answers, waiting at most DRAIN past the last send.
    let drain_until = Instant::now() + DRAIN;
    let mut samples = Vec::with_capacity(tasks.len());
    let mut unanswered = 0u64;
    for task in tasks {
        let abort = task.abort_handle();
        match tokio::time::timeout_at(drain_until, task).await {
            Ok(Ok(sample)) => samples.push(sample),
            Ok(Err(_)) | Err(_) => {
                abort.abort();
                unanswered += 1;
            }
        }
    }
    // Until the last answer (or the end of the drain, if some never came).
    let elapsed = if unanswered > 0 {
        start.elapsed()
    } else {
        samples
            .iter()
            .map(|s| s.sent + s.latency)
            .max()
            .unwrap_or_default()
    };
    monitor.abort();
    // Everything the server still runs (the queue without the library) stops here.
    server.shutdown_background();
    let queue = queue.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Report::new(
        mode,
        seconds,
        total,
        offered_for,
        elapsed,
        samples,
        unanswered,
        queue,
        describe(short),
    )
}

/// The requests' deadlines, in words.
fn describe(short: Option<Short>) -> String {
    let ms = |d: Duration| d.as_millis();
    match short {
        None => format!("{} ms", ms(DEADLINE)),
        Some(short) => format!(
            "{} ms, {}% of them {} ms",
            ms(DEADLINE),
            short.percent,
            ms(short.deadline)
        ),
    }
}

/// The `q` quantile of sorted `values` by the core's nearest rank (an exact integer rank:
/// p99.9 of 1 000 values is the 999th); zero when empty.
///
/// # Panics
///
/// If `sorted` is not in ascending order.
fn percentile(sorted: &[Duration], q: Quantile) -> Duration {
    match Latencies::from_sorted(sorted) {
        Ok(sample) => sample.percentile(q),
        Err(SampleError::Empty) => Duration::ZERO,
        Err(unsorted) => panic!("a percentile of latencies not sorted: {unsorted}"),
    }
}

/// What one run measured.
#[derive(Debug)]
struct Report {
    mode: Mode,
    seconds: u64,
    sent: u64,
    offered_for: Duration,
    elapsed: Duration,
    ok: Vec<Duration>,
    ok_late: u64,
    shed: Vec<Duration>,
    timed_out: u64,
    other: u64,
    errors: u64,
    unanswered: u64,
    /// The p50 and p99 of the 200s sent in each window of the run, and how many.
    windows: Vec<(Duration, Duration, usize)>,
    queue: Vec<usize>,
    /// The requests' deadlines, as they are described.
    deadlines: String,
}

impl Report {
    /// Answers 200 within their deadline, per second, from the first request to the last
    /// answer.
    fn goodput(&self) -> f64 {
        (self.ok.len() as u64 - self.ok_late) as f64 / self.elapsed.as_secs_f64()
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        mode: Mode,
        seconds: u64,
        sent: u64,
        offered_for: Duration,
        elapsed: Duration,
        samples: Vec<Sample>,
        unanswered: u64,
        queue: Vec<usize>,
        deadlines: String,
    ) -> Report {
        let mut ok = Vec::new();
        let mut shed = Vec::new();
        let (mut ok_late, mut timed_out, mut other, mut errors) = (0, 0, 0, 0);
        let window = Duration::from_secs(seconds) / u32::try_from(WINDOWS).unwrap_or(1);
        let mut per_window: Vec<Vec<Duration>> = vec![Vec::new(); WINDOWS];
        for s in &samples {
            match s.status {
                Some(StatusCode::OK) => {
                    ok.push(s.latency);
                    if s.latency > s.deadline {
                        ok_late += 1;
                    }
                    let w = (s.sent.as_nanos() / window.as_nanos().max(1)) as usize;
                    per_window[w.min(WINDOWS - 1)].push(s.latency);
                }
                Some(StatusCode::SERVICE_UNAVAILABLE) => shed.push(s.latency),
                Some(StatusCode::GATEWAY_TIMEOUT) => timed_out += 1,
                Some(_) => other += 1,
                None => errors += 1,
            }
        }
        ok.sort_unstable();
        shed.sort_unstable();
        let windows = per_window
            .into_iter()
            .map(|mut w| {
                w.sort_unstable();
                (
                    percentile(&w, Quantile::P50),
                    percentile(&w, Quantile::P99),
                    w.len(),
                )
            })
            .collect();
        Report {
            mode,
            seconds,
            sent,
            offered_for,
            elapsed,
            ok,
            ok_late,
            shed,
            timed_out,
            other,
            errors,
            unanswered,
            windows,
            queue,
            deadlines,
        }
    }

    fn print(&self) {
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!("== {}", self.mode.label());
        println!(
            "offered: {} requests in {:.2} s ({} per second, twice the capacity of {} per second), deadline {}",
            self.sent,
            self.offered_for.as_secs_f64(),
            OFFERED,
            CAPACITY,
            self.deadlines,
        );
        let in_time = self.ok.len() as u64 - self.ok_late;
        println!(
            "answered 200: {} ({} within their deadline, {} after it)",
            self.ok.len(),
            in_time,
            self.ok_late
        );
        println!(
            "  throughput: {:.1} answers 200 per second, from the first request to the last \
             answer ({:.2} s); within their deadline: {:.1} per second",
            self.ok.len() as f64 / self.elapsed.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            in_time as f64 / self.elapsed.as_secs_f64()
        );
        println!(
            "  latency of the 200s: p50 {}, p99 {}, p99.9 {}, max {}",
            ms(percentile(&self.ok, Quantile::P50)),
            ms(percentile(&self.ok, Quantile::P99)),
            ms(percentile(&self.ok, Quantile::P999)),
            ms(self.ok.last().copied().unwrap_or_default())
        );
        println!(
            "shed (503): {}; latency p50 {}, p99 {}, p99.9 {}",
            self.shed.len(),
            ms(percentile(&self.shed, Quantile::P50)),
            ms(percentile(&self.shed, Quantile::P99)),
            ms(percentile(&self.shed, Quantile::P999))
        );
        println!(
            "504: {}; other status: {}; transport errors: {}; unanswered after a {} s drain: {}",
            self.timed_out,
            self.other,
            self.errors,
            DRAIN.as_secs(),
            self.unanswered
        );
        let windows: Vec<String> = self
            .windows
            .iter()
            .map(|(p50, p99, n)| format!("{}/{} ({n})", ms(*p50), ms(*p99)))
            .collect();
        println!(
            "200s by when they were sent, p50/p99 (count), {} windows: {}",
            WINDOWS,
            windows.join(", ")
        );
        match self.mode {
            // The handler's own wait for a worker is what the monitor samples; tower's
            // limit has no queue, and its buffer's is its own.
            Mode::Tower => {
                println!("server queue: none (a request that finds the workers busy is shed)")
            }
            Mode::TowerQueue => println!(
                "server queue: in tower's Buffer, not sampled (at most {TOWER_QUEUE}, then shed)"
            ),
            Mode::Library | Mode::Plain => println!(
                "server queue, sampled each second: {:?} (max {})",
                self.queue,
                self.queue.iter().max().copied().unwrap_or(0)
            ),
        }
        println!();
    }
}

/// The four runs side by side: goodput (200s within their deadline per second) as a share of
/// the nominal capacity and of the capacity measured without either (whose queue never
/// empties, so its workers never rest: its 200s per second are what the server can do).
fn summary(reports: &[&Report], without: &Report) {
    let measured = without.ok.len() as f64 / without.elapsed.as_secs_f64();
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    println!(
        "== side by side: {} per second offered for {} s, deadline {}; nominal capacity {} per second, \
         measured {:.1} per second (without either: its workers never rest)",
        OFFERED, without.seconds, without.deadlines, CAPACITY, measured
    );
    println!(
        "{:<40} {:>9} {:>10} {:>10} {:>9} {:>9} {:>8} {:>10} {:>10}",
        "", "goodput", "of 400/s", "measured", "200s", "in time", "shed", "p50", "p99"
    );
    for r in reports {
        let in_time = r.ok.len() as u64 - r.ok_late;
        let goodput = r.goodput();
        println!(
            "{:<40} {:>7.1}/s {:>9.1}% {:>9.1}% {:>9} {:>9} {:>8} {:>10} {:>10}",
            r.mode.label(),
            goodput,
            goodput * 100.0 / CAPACITY as f64,
            goodput * 100.0 / measured,
            r.ok.len(),
            in_time,
            r.shed.len(),
            ms(percentile(&r.ok, Quantile::P50)),
            ms(percentile(&r.ok, Quantile::P99)),
        );
    }
    println!();
}

/// The qualitative outcome `--check` asks for; the reasons it is not met. With callers at a
/// short deadline (`short`), an answer the server made in time now and then reaches the
/// client past it (about one in ten thousand, on the loopback): the library may then have up
/// to 1% of its 200s late, where a queue that does not know the deadlines has far more.
fn check(with: &Report, without: &Report, short: Option<Short>) -> Vec<String> {
    let mut failed = Vec::new();
    if with.ok.is_empty() {
        failed.push("with the library, nothing was answered 200".to_owned());
    }
    let late_allowed = if short.is_some() {
        with.ok.len() as u64 / 100
    } else {
        0
    };
    if with.ok_late > late_allowed {
        failed.push(format!(
            "with the library, {} answers 200 came after their deadline",
            with.ok_late
        ));
    }
    if with.shed.is_empty() {
        failed.push("with the library, nothing was shed at twice the capacity".to_owned());
    }
    if percentile(&with.shed, Quantile::P99) >= DEADLINE {
        failed.push("with the library, shedding took as long as the deadline".to_owned());
    }
    if let Some((_, p99, _)) = with
        .windows
        .iter()
        .find(|(_, p99, n)| *n > 0 && *p99 > DEADLINE)
    {
        failed.push(format!(
            "with the library, a window's p99 ({p99:?}) passed the deadline"
        ));
    }
    let first = without.windows.first().map_or(Duration::ZERO, |w| w.0);
    let last = without
        .windows
        .iter()
        .rev()
        .find(|w| w.2 > 0)
        .map_or(Duration::ZERO, |w| w.0);
    if last <= first * 2 {
        failed.push(format!(
            "without the library, the latency did not grow ({first:?} to {last:?})"
        ));
    }
    let grew = without
        .queue
        .windows(2)
        .take(without.seconds as usize)
        .any(|w| w[1] > w[0]);
    if !grew {
        failed.push(format!(
            "without the library, the queue did not grow: {:?}",
            without.queue
        ));
    }
    if without.ok_late == 0 && without.unanswered == 0 {
        failed.push("without the library, every answer came in time".to_owned());
    }
    failed
}

/// `--short-ms D --short-percent P`: P% of the requests with a deadline of D.
#[derive(Clone, Copy, Debug)]
struct Short {
    deadline: Duration,
    percent: u64,
}

impl Short {
    /// The deadline of request `i`: the short one for `percent` of the requests, spread
    /// evenly (request `i` is short when the count of short ones up to it goes up).
    fn deadline_of(self, i: u64) -> Duration {
        let before = i * self.percent / 100;
        let after = (i + 1) * self.percent / 100;
        if after > before {
            self.deadline
        } else {
            DEADLINE
        }
    }
}

/// The four ways, in the order of a first round.
const MODES: [Mode; 4] = [Mode::Library, Mode::Tower, Mode::TowerQueue, Mode::Plain];

fn main() {
    let mut seconds = 30u64;
    let mut rounds = 3usize;
    let mut check_outcome = false;
    let (mut short_ms, mut short_percent) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--seconds" => seconds = number_in(args.next(), 1, 600),
            "--rounds" => rounds = number_in(args.next(), 1, 20),
            // More than the allowance, so that something is sent; less than the deadline.
            "--short-ms" => short_ms = Some(number_in(args.next(), 10, 99)),
            "--short-percent" => short_percent = Some(number_in(args.next(), 1, 100)),
            "--check" => check_outcome = true,
            _ => usage(),
        }
    }
    let short = match (short_ms, short_percent) {
        (Some(ms_), Some(percent)) => Some(Short {
            deadline: ms(ms_),
            percent,
        }),
        (None, None) => None,
        _ => usage(),
    };
    // The client's runtime: one thread (each run's server has a runtime of its own).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    println!("load average at the start: {}\n", load_average());
    // Per way (in `MODES` order), its report of each round. Each round runs the four ways in
    // an order that rotates, so that none always runs first or last.
    let mut reports: [Vec<Report>; 4] = Default::default();
    for round in 0..rounds {
        println!("== round {} of {rounds}\n", round + 1);
        for turn in 0..MODES.len() {
            let way = (round + turn) % MODES.len();
            let report = runtime.block_on(run(MODES[way], seconds, short));
            report.print();
            reports[way].push(report);
        }
        let [with, tower, queued, without] = [0, 1, 2, 3].map(|way| &reports[way][round]);
        summary(&[with, tower, queued, without], without);
    }
    if rounds > 1 {
        over_rounds(&reports);
    }
    println!("load average at the end: {}", load_average());
    if check_outcome {
        let mut failed = Vec::new();
        let [with, tower, queued, without] = &reports;
        for (((with, tower), queued), without) in with.iter().zip(tower).zip(queued).zip(without) {
            failed.extend(check(with, without, short));
            for tower in [tower, queued] {
                if tower.ok.is_empty() || tower.shed.is_empty() {
                    failed.push(format!(
                        "{}: nothing was answered or nothing was shed",
                        tower.mode.label()
                    ));
                }
            }
            // What the short deadlines show: a queue bounded by its length serves many of
            // those callers after they gave up.
            if short.is_some() && queued.ok_late * 10 < queued.ok.len() as u64 {
                failed.push(format!(
                    "{}: with callers at the short deadline, only {} of {} answers 200 came late",
                    queued.mode.label(),
                    queued.ok_late,
                    queued.ok.len()
                ));
            }
        }
        for reason in &failed {
            eprintln!("check failed: {reason}");
        }
        if !failed.is_empty() {
            std::process::exit(1);
        }
        println!(
            "check passed: with the library the 200s met their deadlines ({} late of {}) and the excess was shed; without it the queue and the latency grew",
            reports[0].iter().map(|r| r.ok_late).sum::<u64>(),
            reports[0].iter().map(|r| r.ok.len()).sum::<usize>(),
        );
    }
}

/// The machine's load averages over 1, 5 and 15 minutes, from `/proc/loadavg` (or a dash).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "-".to_owned(),
        |text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        },
    )
}

/// Each way's goodput as a share of the nominal capacity, over the rounds: the median and
/// the range.
fn over_rounds(reports: &[Vec<Report>; 4]) {
    println!(
        "== over {} rounds: goodput as a share of the nominal capacity ({CAPACITY}/s), median (range)",
        reports[0].len()
    );
    for runs in reports {
        let mut shares: Vec<f64> = runs
            .iter()
            .map(|r| r.goodput() * 100.0 / CAPACITY as f64)
            .collect();
        shares.sort_by(f64::total_cmp);
        let mid = shares.len() / 2;
        let median = if shares.len() % 2 == 1 {
            shares[mid]
        } else {
            (shares[mid - 1] + shares[mid]) / 2.0
        };
        println!(
            "{:<40} {median:>6.1}% ({:.1}% to {:.1}%)",
            runs[0].mode.label(),
            shares[0],
            shares[shares.len() - 1]
        );
    }
    println!();
}

/// `arg` as a whole number from `low` to `high`, or the usage and exit 2.
fn number_in<T: std::str::FromStr + PartialOrd>(arg: Option<String>, low: T, high: T) -> T {
    arg.and_then(|s| s.parse().ok())
        .filter(|n| (low..=high).contains(n))
        .unwrap_or_else(|| usage())
}

fn usage() -> ! {
    eprintln!(
        "usage: overload [--seconds N (1 to 600, default 30)] [--rounds N (1 to 20, default 3)] [--short-ms D (10 to 99) --short-percent P (1 to 100)] [--check]"
    );
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `percent` of the requests get the short deadline, spread evenly: of every hundred in a
    /// row, exactly `percent`.
    #[test]
    fn the_short_deadlines_are_the_percent_asked_spread_evenly() {
        for percent in [1, 3, 50, 99, 100] {
            let short = Short {
                deadline: ms(25),
                percent,
            };
            for start in [0, 7, 1_000] {
                let count = (start..start + 100)
                    .filter(|&i| short.deadline_of(i) == ms(25))
                    .count();
                assert_eq!(count as u64, percent, "{percent}% from request {start}");
            }
        }
        let half = Short {
            deadline: ms(25),
            percent: 50,
        };
        let firsts: Vec<_> = (0..4).map(|i| half.deadline_of(i)).collect();
        assert_eq!(firsts, [DEADLINE, ms(25), DEADLINE, ms(25)]);
    }
}
