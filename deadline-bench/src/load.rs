//! An HTTP/1.1 load generator for loopback servers, over a fixed number of keep-alive
//! connections, each with one request at a time, for a fixed time: in a closed loop, each
//! connection sends its next request as soon as the last answer's body has arrived (as
//! `wrk -c N` does), which finds the server's throughput; at a fixed rate, each connection
//! sends on a schedule, so that every server is offered the same load. Latency is measured
//! to the end of the answer's body, from sending, or at a fixed rate from when the request
//! was due if a slow answer held it back (corrected for coordinated omission). It runs in the benchmark's own process, on
//! its own runtime, never in the server's.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;

/// Where and what to send.
#[derive(Clone, Debug)]
pub struct Target {
    /// The server's address (loopback).
    pub addr: SocketAddr,
    /// The request's path.
    pub path: &'static str,
    /// Headers sent with every request.
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Target {
    /// `GET /` on the server at `addr`, with a deadline of `millis` (`x-deadline-ms`).
    #[must_use]
    pub fn get_within(addr: SocketAddr, millis: &'static str) -> Target {
        Target {
            addr,
            path: "/",
            headers: vec![(
                HeaderName::from_static("x-deadline-ms"),
                HeaderValue::from_static(millis),
            )],
        }
    }
}

/// What one load phase measured, as the client saw it.
#[derive(Clone, Debug, Default)]
pub struct Load {
    /// The latency of every 200 answer to the end of its body (from sending; at a fixed rate,
    /// from when it was due if a slow answer held it back), sorted.
    pub ok: Vec<Duration>,
    /// The 200 answers whose body had arrived by the phase's end (all of them for
    /// [`count`]): what [`Load::per_second`] counts.
    pub ok_in_phase: u64,
    /// Answers with any other status.
    pub not_ok: u64,
    /// Requests that failed in transport (a connection error).
    pub errors: u64,
    /// How long the phase ran: its set length (the answers still coming after it are in
    /// `ok` but not in `ok_in_phase`), or for [`count`] the time to its last answer.
    pub elapsed: Duration,
}

impl Load {
    /// Panics, naming `name`, unless every one of `requests` requests was answered 200.
    ///
    /// # Panics
    ///
    /// As said: a count of requests some of which failed is not a count of what was asked.
    pub fn assert_all_ok(&self, name: &str, requests: u64) {
        assert!(
            self.ok.len() as u64 == requests && self.errors == 0,
            "{name}: {} of {requests} requests answered 200, {} others, {} transport errors",
            self.ok.len(),
            self.not_ok,
            self.errors
        );
    }

    /// Answers 200 per second: those that came within the phase, over its length (so a slow
    /// last answer neither adds to the count nor stretches the time).
    #[must_use]
    pub fn per_second(&self) -> f64 {
        self.ok_in_phase as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Sends requests to `target` over `connections` connections for `duration`, each connection
/// one request at a time, each as soon as the last answer has arrived. A connection that
/// fails, or whose answer has not come 10 s after the phase's end, is opened again (at most
/// 100 times in a phase, so a server that is gone, or never answers, ends the phase).
pub async fn closed_loop(target: &Target, connections: usize, duration: Duration) -> Load {
    run(target, connections, duration, None).await
}

/// Sends `rate` requests per second to `target` for `duration`, spread over `connections`
/// connections, each one request at a time on its own schedule. A request whose connection is
/// still waiting for an answer when it is due goes out when the answer has come, and its
/// latency runs from when it was due.
pub async fn fixed_rate(
    target: &Target,
    connections: usize,
    rate: u32,
    duration: Duration,
) -> Load {
    let per_connection = Duration::from_secs(1) * u32::try_from(connections).unwrap_or(1) / rate;
    run(target, connections, duration, Some(per_connection)).await
}

async fn run(
    target: &Target,
    connections: usize,
    duration: Duration,
    interval: Option<Duration>,
) -> Load {
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = Vec::with_capacity(connections);
    for c in 0..connections {
        let target = target.clone();
        // The connections' schedules are spread evenly over one interval.
        let first = interval.map(|i| {
            start + i * u32::try_from(c).unwrap_or(0) / u32::try_from(connections).unwrap_or(1)
        });
        tasks.push(tokio::spawn(async move {
            one_connection(&target, end, first, interval).await
        }));
    }
    let mut load = Load::default();
    for task in tasks {
        let part = task.await.expect("a load task");
        load.ok.extend(part.ok);
        load.ok_in_phase += part.ok_in_phase;
        load.not_ok += part.not_ok;
        load.errors += part.errors;
    }
    load.elapsed = duration;
    load.ok.sort_unstable();
    load
}

async fn one_connection(
    target: &Target,
    end: Instant,
    mut due: Option<Instant>,
    interval: Option<Duration>,
) -> Load {
    let mut load = Load::default();
    let mut reconnects = 0;
    // When the last answer (or failure) on this connection came, across reconnects.
    let mut last_answer: Option<Instant> = None;
    'connect: while Instant::now() < end && reconnects < 100 {
        reconnects += 1;
        let Ok(mut sender) = connect(target.addr).await else {
            load.errors += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        // A request due before the connection was made waited for it (and for the task's
        // start), which is the generator's time, not the server's.
        let connected = Instant::now();
        while Instant::now() < end {
            let request = request(target);
            let sent = match (due, interval) {
                (Some(at), Some(every)) => {
                    if at >= end {
                        break 'connect;
                    }
                    // The next request is due one interval after this one was, however late
                    // this one goes out.
                    due = Some(at + every);
                    if last_answer.is_some_and(|answered| answered > at) {
                        // The last answer came after this request was due: the server's
                        // slowness held it back, and its latency runs from when it was due, or
                        // from when the connection was made if that was later (no coordinated
                        // omission).
                        at.max(connected)
                    } else {
                        // The connection waits for the schedule (or was still being made when
                        // this request was due); tokio's timer wakes at whole milliseconds, up
                        // to one late, which is the generator's and not counted: the latency
                        // runs from the wake.
                        tokio::time::sleep_until(at).await;
                        Instant::now()
                    }
                }
                _ => Instant::now(),
            };
            // A server that accepts and never answers ends the phase too: each exchange has
            // until the phase's end and a grace.
            let exchanged =
                tokio::time::timeout_at(end + ANSWER_GRACE, exchange(&mut sender, request)).await;
            let Ok(Ok(status)) = exchanged else {
                load.errors += 1;
                last_answer = Some(Instant::now());
                continue 'connect;
            };
            let answered = Instant::now();
            last_answer = Some(answered);
            if status == StatusCode::OK {
                load.ok.push(answered - sent);
                load.ok_in_phase += u64::from(answered <= end);
            } else {
                load.not_ok += 1;
            }
        }
        break;
    }
    load
}

/// Sends `requests` requests to `target` one after another over one keep-alive connection
/// (for a count of what the server does per request, `server --instructions`), within
/// `limit`. Stops at the first transport error.
pub async fn count(target: &Target, requests: u64, limit: Duration) -> Load {
    let start = Instant::now();
    let mut load = Load::default();
    let sent = tokio::time::timeout(limit, async {
        let mut sender = connect(target.addr).await?;
        for _ in 0..requests {
            sender.ready().await.map_err(std::io::Error::other)?;
            let sent = Instant::now();
            let response = sender
                .send_request(request(target))
                .await
                .map_err(std::io::Error::other)?;
            let status = response.status();
            response
                .into_body()
                .collect()
                .await
                .map_err(std::io::Error::other)?;
            if status == StatusCode::OK {
                load.ok.push(sent.elapsed());
            } else {
                load.not_ok += 1;
            }
        }
        Ok::<(), std::io::Error>(())
    })
    .await;
    if !matches!(sent, Ok(Ok(()))) {
        load.errors += 1;
    }
    load.elapsed = start.elapsed();
    load.ok_in_phase = load.ok.len() as u64;
    load.ok.sort_unstable();
    load
}

/// How long past a phase's end an answer may still come before it counts as an error.
const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// One request and its whole answer: the answer's status.
async fn exchange(
    sender: &mut SendRequest<Empty<Bytes>>,
    request: Request<Empty<Bytes>>,
) -> Result<StatusCode, ()> {
    sender.ready().await.map_err(drop)?;
    let response = sender.send_request(request).await.map_err(drop)?;
    let status = response.status();
    response.into_body().collect().await.map_err(drop)?;
    Ok(status)
}

/// An HTTP/1.1 connection to `addr`, without Nagle's delay, its driver spawned.
async fn connect(addr: SocketAddr) -> std::io::Result<SendRequest<Empty<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(conn);
    Ok(sender)
}

/// One request to `target`: its path, `Host` and headers.
fn request(target: &Target) -> Request<Empty<Bytes>> {
    let mut request = Request::get(target.path)
        .header(http::header::HOST, "127.0.0.1")
        .body(Empty::new())
        .expect("a valid request");
    for (name, value) in &target.headers {
        request.headers_mut().insert(name.clone(), value.clone());
    }
    request
}

/// A current-thread tokio runtime for the load generator: one thread, so that on a small
/// machine it leaves the other cores to the server.
#[must_use]
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}
