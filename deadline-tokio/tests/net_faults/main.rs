//! Faults on real sockets: what happens to a request when the network or the next host
//! misbehaves.
//!
//! The chain (see `chain.rs`): a client, then a front (axum with `DeadlineLayer`) whose
//! handler calls its dependency through `DependencyLayer` over hyper-util's client, which
//! connects through `connect::Connector`, then a back (axum with `DeadlineLayer`) that
//! queries PostgreSQL. Between the front and the back, one fault at a time: latency with
//! jitter and "5% loss" (a fault-injecting proxy, `proxy.rs`, where what loss means on a
//! TCP stream is written down), a blackholed host (a network namespace the test makes,
//! `peers.rs`), a listener whose accept queue is full, a peer that accepts and never reads,
//! a closed port; and a healthy network and a slow database to compare.
//!
//! Each scenario sends its requests one at a time, and checks each answer:
//!
//! - it reaches the client within the deadline the client sent plus 10 ms (the front
//!   answers 5 ms before the deadline, its reply margin, so the 10 ms are for the client's
//!   own scheduling on a loaded machine, not for the library);
//! - its status is one the scenario allows, for the reason it gives (504 for a deadline,
//!   502 for a dependency that could not be reached);
//! - once it is answered, nothing it started is left: no task, no socket, no proxied
//!   connection and no database query (`leftovers.rs`), within 2 s.
//!
//! This is real time on a real machine. The tests assert outcomes (statuses, reasons,
//! nothing left behind); the first bound, an answer within its deadline plus 10 ms, is a
//! measurement of the machine as much as of the library, so it is printed on every run and
//! asserted by the long run alone (`DEADLINE_NET_FAULTS_CHECK_TIME`, which
//! `bash scripts/net-faults.sh` sets: run it on a machine doing nothing else).
//! `DEADLINE_NET_FAULTS_REQUESTS` sets the requests per scenario (10 by default, which CI
//! runs); the long suite prints its figures (BENCHMARKS.md, "What happens on a bad
//! network"). Needs the
//! PostgreSQL at `DEADLINE_TEST_DATABASE_URL`, and root, for the network namespace.

mod chain;
#[path = "../common/mod.rs"]
mod common;
mod leftovers;
mod peers;
mod proxy;

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use deadline_core::ms;
use deadline_core::observe::CounterSnapshot;

use crate::chain::{Answer, client, send};
use crate::common::closed_port;
use crate::leftovers::{Count, Probe};
use crate::peers::{Blackhole, FullBacklog, NeverReads};
use crate::proxy::{Fault, FaultProxy};

/// How much later than its deadline an answer may reach the client.
const LATE: Duration = ms(10);

/// One scenario: where the front's calls go, and what the client should get.
struct Scenario {
    name: &'static str,
    /// The deadline the client sends.
    deadline: Duration,
    /// The back's database work per request.
    db_ms: u64,
    /// How the front reaches its dependency.
    path: Path,
    /// The bytes the front sends with each call.
    body: usize,
    /// The statuses the client may get.
    statuses: &'static [u16],
}

/// How the front reaches its dependency.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// Through the fault proxy, to the back.
    Proxy(Fault),
    /// A blackholed host.
    Blackhole,
    /// A listener whose accept queue is full.
    FullBacklog,
    /// A peer that accepts and never reads.
    NeverReads,
    /// A port nothing listens on.
    Closed,
}

/// What one scenario measured.
struct Figures {
    requests: usize,
    in_time: usize,
    /// The latest answer, relative to its deadline (negative: before it).
    latest: Duration,
    late_by: Option<Duration>,
    statuses: BTreeMap<String, usize>,
    /// Answers later than the deadline plus [`LATE`].
    late: Vec<String>,
    /// Answers whose status the scenario does not allow.
    wrong: Vec<String>,
    /// Requests after whose answer something was left.
    leftovers: Vec<String>,
    /// The longest wait for the counts to come back.
    settled: Duration,
    counters: CounterSnapshot,
    /// The proxy's random draws.
    seed: u64,
}

/// The scenarios run one at a time: each counts the sockets of the whole process.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Requests per scenario.
fn requests() -> usize {
    let requests = std::env::var("DEADLINE_NET_FAULTS_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10);
    assert!(
        requests > 0,
        "DEADLINE_NET_FAULTS_REQUESTS must be at least 1"
    );
    requests
}

/// The proxy's random draws: `DEADLINE_NET_FAULTS_SEED`, or the clock's.
fn seed() -> u64 {
    std::env::var("DEADLINE_NET_FAULTS_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(1, |d| u64::from(d.subsec_nanos()) ^ d.as_secs())
        })
}

/// Runs `scenario` on a runtime of its own (2 worker threads, as the CI machine has 2
/// cores), prints its figures, and checks the rules every scenario shares.
fn run(scenario: &Scenario) -> Figures {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let figures = runtime.block_on(measure(scenario));
    print(scenario, &figures);
    print_details(&figures);
    // A time bound is a measurement, not a test's assertion: the long run checks it
    // (`scripts/net-faults.sh`, on a machine doing nothing else); the short run prints it.
    if std::env::var_os("DEADLINE_NET_FAULTS_CHECK_TIME").is_some_and(|v| !v.is_empty()) {
        assert!(
            figures.late.is_empty(),
            "{}: answers later than the deadline plus {LATE:?}: {:#?}",
            scenario.name,
            figures.late
        );
    }
    assert!(
        figures.wrong.is_empty(),
        "{}: statuses other than {:?}: {:#?}",
        scenario.name,
        scenario.statuses,
        figures.wrong
    );
    assert!(
        figures.leftovers.is_empty(),
        "{}: left after the answer: {:#?}",
        scenario.name,
        figures.leftovers
    );
    figures
}

async fn measure(scenario: &Scenario) -> Figures {
    let seed = seed();
    let back = chain::back().await;
    // What stands between the front and the back, or in the back's place.
    let mut proxy = None;
    let mut blackhole = None;
    let mut backlog = None;
    let mut never_reads = None;
    let target = match scenario.path {
        Path::Proxy(fault) => proxy
            .insert(FaultProxy::start(back.addr, fault, seed).await)
            .addr(),
        Path::Blackhole => blackhole.insert(Blackhole::create()).addr(),
        Path::FullBacklog => backlog.insert(FullBacklog::start().await).addr(),
        Path::NeverReads => never_reads.insert(NeverReads::start().await).addr(),
        Path::Closed => closed_port(),
    };
    let (front, dependency) = chain::front(target, scenario.body).await;
    let probe = Probe::new().await;
    let client = client();

    // The back and its database connection warmed by one request with no hurry, as a
    // service is before it takes traffic.
    let warm = send(&client, back.addr, ms(10_000), 0).await;
    assert!(
        warm.status.is_some(),
        "{}: the back does not answer: {warm:?}",
        scenario.name
    );

    let proxied = || proxy.as_ref().map_or(0, FaultProxy::open);
    let held = || never_reads.as_ref().map_or(0, NeverReads::held);
    let baseline = probe.steady(proxied).await;
    let expected = || Count {
        sockets: baseline.sockets + held(),
        proxied: 0,
        queries: 0,
        ..baseline
    };

    let requests = requests();
    let mut figures = Figures {
        requests,
        in_time: 0,
        latest: Duration::ZERO,
        late_by: None,
        statuses: BTreeMap::new(),
        late: Vec::new(),
        wrong: Vec::new(),
        leftovers: Vec::new(),
        settled: Duration::ZERO,
        counters: CounterSnapshot::default(),
        seed: 0,
    };
    for i in 0..requests {
        let answer = send(&client, front.addr, scenario.deadline, scenario.db_ms).await;
        record(scenario, i, &answer, &mut figures);
        match probe.settle(expected, proxied).await {
            Ok(took) => figures.settled = figures.settled.max(took),
            Err((left, wanted)) => figures.leftovers.push(format!(
                "request {i} ({:?} after {:?}): {left:?}, where {wanted:?} was expected",
                answer.status, answer.took
            )),
        }
        if let Some(peer) = &never_reads {
            peer.release();
        }
    }
    figures.counters = dependency.counters().snapshot();
    figures.seed = seed;
    figures
}

/// Adds one answer to the figures.
fn record(scenario: &Scenario, i: usize, answer: &Answer, figures: &mut Figures) {
    let status = answer
        .status
        .map_or_else(|| "no answer".to_owned(), |s| s.to_string());
    *figures.statuses.entry(status).or_default() += 1;
    if answer.took <= scenario.deadline + LATE {
        figures.in_time += 1;
    } else {
        figures.late.push(format!(
            "request {i}: {:?} after {:?}: {}",
            answer.status, answer.took, answer.body
        ));
    }
    if answer.took > scenario.deadline {
        let late = answer.took - scenario.deadline;
        figures.late_by = Some(figures.late_by.map_or(late, |l| l.max(late)));
    } else {
        figures.latest = figures.latest.max(answer.took);
    }
    if !answer
        .status
        .is_some_and(|s| scenario.statuses.contains(&s))
    {
        figures.wrong.push(format!(
            "request {i}: {:?} after {:?}: {}",
            answer.status, answer.took, answer.body
        ));
    }
}

fn print(scenario: &Scenario, f: &Figures) {
    let statuses: Vec<String> = f
        .statuses
        .iter()
        .map(|(status, n)| format!("{status} x {n}"))
        .collect();
    let timing = match f.late_by {
        Some(late) => format!("the latest {:.1} ms after its deadline", millis(late)),
        None => format!(
            "the latest {:.1} ms before its deadline",
            millis(scenario.deadline - f.latest)
        ),
    };
    println!(
        "\nnet-faults | {} | {} requests, deadline {} ms | in time (deadline + 10 ms): {}/{} ({timing}) \
         | statuses: {} | left after an answer: {} (all gone within {:.1} ms) \
         | the front's dependency: {} calls, {} timeouts, {} retries ({} refused by the budget), {} deadline exceeded | seed {}",
        scenario.name,
        f.requests,
        scenario.deadline.as_millis(),
        f.in_time,
        f.requests,
        statuses.join(", "),
        f.leftovers.len(),
        millis(f.settled),
        f.counters.calls,
        f.counters.timeouts,
        f.counters.retries,
        f.counters.budget_refusals,
        f.counters.deadline_exceeded,
        f.seed,
    );
}

/// The first few of what went wrong, if anything did.
fn print_details(f: &Figures) {
    for (what, list) in [
        ("late", &f.late),
        ("status", &f.wrong),
        ("left", &f.leftovers),
    ] {
        for item in list.iter().take(3) {
            println!("net-faults |   {what}: {item}");
        }
    }
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1_000.0
}

/// The deadline of the scenarios that fail or may: 300 ms, room for the front's three
/// attempts of which each may spend 50 ms connecting.
const DEADLINE: Duration = ms(300);

#[test]
fn a_healthy_network() {
    // The reference: 5 ms of database work, 1 s to do it in. Every answer is a 200.
    run(&Scenario {
        name: "a healthy network",
        deadline: ms(1_000),
        db_ms: 5,
        path: Path::Proxy(Fault::None),
        body: 64,
        statuses: &[200],
    });
}

#[test]
fn a_slow_database() {
    // 2 s of database work in 300 ms: every answer is the deadline's, and every query is
    // cancelled on the server when the back gives up on it.
    let figures = run(&Scenario {
        name: "a slow database",
        deadline: DEADLINE,
        db_ms: 2_000,
        path: Path::Proxy(Fault::None),
        body: 64,
        statuses: &[504],
    });
    assert_eq!(figures.counters.successes, 0);
}

#[test]
fn delay_with_jitter() {
    // Each chunk held 100 ms +- 90 ms, each way: a round trip takes 20 to 380 ms. Answers
    // that make it in time are 200s; the rest are the deadline's.
    run(&Scenario {
        name: "100 ms +- 90 ms of delay per chunk",
        deadline: DEADLINE,
        db_ms: 5,
        path: Path::Proxy(Fault::Delay {
            base: ms(100),
            jitter: ms(90),
        }),
        body: 64,
        statuses: &[200, 504],
    });
}

#[test]
fn five_percent_loss() {
    // 5% of chunks held back 200 ms (a retransmission): most answers are 200s, a request
    // hit twice is the deadline's.
    run(&Scenario {
        name: "5% loss (a chunk in 20 held back 200 ms)",
        deadline: DEADLINE,
        db_ms: 5,
        path: Path::Proxy(Fault::Loss {
            per_mille: 50,
            hold: ms(200),
        }),
        body: 64,
        statuses: &[200, 504],
    });
}

#[test]
fn a_blackholed_peer() {
    // No connect ever completes: each of the three attempts gives up at its 50 ms connect
    // limit, counted as a timeout, and the call is the deadline's (504), at about 170 ms.
    let figures = run(&Scenario {
        name: "a blackholed host",
        deadline: DEADLINE,
        db_ms: 0,
        path: Path::Blackhole,
        body: 64,
        statuses: &[504],
    });
    connects_timed_out(&figures);
}

#[test]
fn a_full_listen_backlog() {
    // The kernel drops every SYN to a full accept queue: the same as a blackholed host.
    let figures = run(&Scenario {
        name: "a full listen backlog",
        deadline: DEADLINE,
        db_ms: 0,
        path: Path::FullBacklog,
        body: 64,
        statuses: &[504],
    });
    connects_timed_out(&figures);
}

#[test]
fn a_peer_that_accepts_and_never_reads() {
    // 16 MiB to send, more than the socket buffers hold: the write stalls, each attempt
    // runs out, and the answer is the deadline's.
    let figures = run(&Scenario {
        name: "a peer that accepts and never reads",
        deadline: DEADLINE,
        db_ms: 0,
        path: Path::NeverReads,
        body: 16 << 20,
        statuses: &[504],
    });
    assert_eq!(figures.counters.successes, 0);
    assert!(figures.counters.timeouts >= figures.counters.calls);
}

#[test]
fn a_closed_port() {
    // Refused at once, three times (a refused connect was never sent, so it is retried):
    // the dependency could not be reached, 502, long before the deadline.
    let figures = run(&Scenario {
        name: "a closed port",
        deadline: DEADLINE,
        db_ms: 0,
        path: Path::Closed,
        body: 64,
        statuses: &[502],
    });
    let c = figures.counters;
    assert_eq!(
        (c.timeouts, c.successes),
        (0, 0),
        "a refused connect is not a timeout"
    );
    retried_until_refused(c);
}

/// Every attempt timed out connecting, and every call was retried until its attempts or
/// the retry budget ran out.
fn connects_timed_out(figures: &Figures) {
    let n = figures.requests as u64;
    let c = figures.counters;
    assert_eq!((c.calls, c.successes), (n, 0));
    assert_eq!(
        c.timeouts,
        c.calls + c.retries,
        "each attempt given up at its connect limit, counted as a timeout"
    );
    retried_until_refused(c);
}

/// Each call whose attempts all failed ended after its two retries, or at a retry the
/// dependency's retry budget refused (it grants 10% of the calls, and 10 a second): with
/// `r` refused, at least `2 (calls - r)` retries were sent and at most `2 calls - r`.
fn retried_until_refused(c: CounterSnapshot) {
    let refused = c.budget_refusals;
    assert!(refused <= c.calls, "{c:?}");
    assert!(
        2 * (c.calls - refused) <= c.retries && c.retries <= 2 * c.calls - refused,
        "each call retried twice, or until the budget refused: {c:?}"
    );
}
