//! `downstream`: what the library costs and buys on a downstream call per request. A front
//! server (axum, in a process of its own) calls a loopback dependency (in another) on every
//! request, three ways, each on its own port (`deadline_bench::downstream`): plain reqwest
//! with a fixed timeout; `Dependency::run` behind `DeadlineLayer` (cap, two retries, a hedge at
//! the live p95, the retry budget, a breaker, the time left in the header); tower's
//! `Retry(TpsBudget)` + `Hedge` + `Timeout` with the same settings. The dependency answers in
//! 1 to 3 ms, and 2% of its answers take 40 ms (`--slow-ms` and `--slow-percent` set another
//! tail).
//!
//! This program loads each front in turn from its own runtime, in a closed loop of
//! `--connections` (32) connections, each request with a 200 ms deadline (`x-deadline-ms`),
//! in rounds whose order rotates (each variant's turn starts with 2 s of warm-up, not
//! counted: tower's latency histogram is emptied after two idle periods), and prints requests
//! per second, latency (p50, p99, p99.9), the front's CPU time per request, the requests and
//! connections the dependency received per request (and of those connections, the ones
//! closed before a request arrived on them), each against plain reqwest in the same round
//! (and, each round, the hedges the library's call sent by its own count and the live hedge
//! delay it read);
//! then the library's requests per second and p99 over tower's, round by round, with the
//! interval that holds the median of those ratios 95% of the time (the sign test's): the
//! verdict calls the library ahead (or lower) only when that whole interval is, and level
//! otherwise.
//!
//! ```text
//! cargo run -p deadline-bench --release --bin downstream -- [--slow-ms 40] [--slow-percent 2] [--rounds 9] [--seconds 3] [--connections 32] [--threads 1] [--quick]
//! ```
//!
//! `--instructions [--quick]` counts instead, exactly and on any machine, what each variant
//! costs the front in user space per request, its downstream call included: the front process
//! runs under valgrind's callgrind, once loaded with 200 requests and once with 1 200 (20 and
//! 120 with `--quick`), one after another over one keep-alive connection, and one request
//! costs the difference of the two counts over the difference of the two numbers (the
//! start-up, the connections and the first requests' warm-up cancel out; 5 requests go
//! before each load, whatever they answer, as the first requests under valgrind can run out
//! of time while valgrind translates the code they run). The dependency is
//! the same (with the default tail), so the count includes each variant's hedges and the
//! connections they cost; the program prints those beside it. Needs valgrind.

use std::net::SocketAddr;
use std::time::Duration;

use deadline_bench::callgrind::{Counted, per_request, quick_arg, require_valgrind};
use deadline_bench::child::{Child, serve_commands};
use deadline_bench::dependency::Model;
use deadline_bench::downstream::{DEPENDENCY, VARIANTS, apps};
use deadline_bench::load::{Target, closed_loop, count};
use deadline_bench::options::{Options, Slow};
use deadline_bench::stats::{Side, against, load_average, median, ms, percentile};
use deadline_core::observe::CounterEvent;
use deadline_core::policy::Quantile;

/// The dependency's slow answers unless told otherwise: 2% at 40 ms.
const SLOW: Slow = Slow {
    us: 40_000,
    per_10k: 200,
};

/// The dependency: 1 to 3 ms, and the `slow` answers.
fn model(slow: Slow) -> Model {
    Model {
        fast: (1_000, 3_000),
        slow_per_10k: slow.per_10k,
        slow: slow.us,
        fail_per_10k: 0,
    }
}

/// The front: the three servers, calling the dependency at `dependency`.
fn front_main(threads: usize, dependency: &str) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a runtime");
    let url = format!("http://{dependency}/");
    let addrs: Vec<SocketAddr> = runtime.block_on(async {
        let mut addrs = Vec::new();
        for app in apps(&url) {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind loopback");
            addrs.push(listener.local_addr().expect("an address"));
            tokio::spawn(app.serve(listener));
        }
        addrs
    });
    // The library's own count of the hedges it sent, which the dependency's count of requests
    // misses when a hedge is dropped before its request arrives; and its live hedge delay (the
    // p95 it read last), in microseconds, 0 while it has none.
    serve_commands(&addrs, |command| match command {
        "hedges" => Some(DEPENDENCY.counters().get(CounterEvent::Hedge).to_string()),
        "delay" => Some(
            DEPENDENCY
                .live_hedge_delay()
                .map_or(0, |d| d.as_micros())
                .to_string(),
        ),
        _ => None,
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// What the load sends to the front at `addr`: `GET /` with `x-deadline-ms: 200`.
fn target(addr: SocketAddr) -> Target {
    Target::get_within(addr, "200")
}

/// Requests sent before each counted load of `--instructions`, whatever they answer.
const WARM_UP: u64 = 5;

/// `--instructions`: each variant's user-space instructions per request in the front, its
/// downstream call included.
fn instructions_main(quick: bool) {
    require_valgrind("downstream --instructions");
    let (low, high): (u64, u64) = if quick { (20, 120) } else { (200, 1_200) };
    println!(
        "downstream --instructions: the front process under callgrind, {low} and then {high} requests over one keep-alive connection, per variant; \
         the dependency answers in 1-3 ms, 2% at 40 ms"
    );
    println!(
        "{:<16} {:>22} {:>12} {:>10} {:>13} {:>12} {:>12}",
        "variant",
        "instructions/request",
        "vs reqwest",
        "over it",
        "sent/request",
        "conns/1000",
        "hedges/1000"
    );
    let mut dependency = Child::spawn(&["--dependency"]);
    let dependency_addr = dependency.addrs()[0].to_string();
    let mut base = 0;
    let mut per_variant = Vec::new();
    for (v, name) in VARIANTS.iter().enumerate() {
        let fewer = counted_run(&mut dependency, &dependency_addr, v, low);
        let more = counted_run(&mut dependency, &dependency_addr, v, high);
        let requests = high - low;
        let per_request = per_request(name, (low, fewer.instructions), (high, more.instructions));
        if v == 0 {
            base = per_request;
        }
        let per =
            |f: fn(&Counts) -> u64| f(&more).saturating_sub(f(&fewer)) as f64 / requests as f64;
        // The library's hedges by its own count (the library is second in `VARIANTS`); the
        // others keep no count of their own.
        let hedges = if v == 1 {
            format!("{:.1}", per(|c| c.hedges) * 1e3)
        } else {
            "-".to_owned()
        };
        println!(
            "{:<16} {:>22} {:>11.3}x {:>+10} {:>13.4} {:>12.1} {:>12}",
            name,
            per_request,
            per_request as f64 / base.max(1) as f64,
            i128::from(per_request) - i128::from(base),
            per(|c| c.sent),
            per(|c| c.connections) * 1e3,
            hedges,
        );
        per_variant.push(per_request);
    }
    let (library, tower) = (per_variant[1], per_variant[2]);
    println!(
        "Dependency::run against tower's stack: {:.3}x the front's instructions per request ({:+})",
        library as f64 / tower.max(1) as f64,
        i128::from(library) - i128::from(tower)
    );
}

/// What one counted run of the front saw.
struct Counts {
    /// The instructions callgrind counted for the front's whole run.
    instructions: u64,
    /// Requests the dependency received during the load.
    sent: u64,
    /// Connections the dependency accepted during the load.
    connections: u64,
    /// Hedges the library's call sent, by its own count.
    hedges: u64,
}

/// Starts the front under callgrind, loads variant `variant` with [`WARM_UP`] requests and
/// then `requests` more, one after another over one keep-alive connection, and ends it.
fn counted_run(
    dependency: &mut Child,
    dependency_addr: &str,
    variant: usize,
    requests: u64,
) -> Counts {
    let mut front = Counted::spawn(
        &format!("downstream-{variant}-{requests}"),
        &["--front", "1", dependency_addr],
    );
    let target = target(front.child().addrs()[variant]);
    let runtime = deadline_bench::load::runtime();
    // Under valgrind the first requests are slow (valgrind translates the code they run the
    // first time), slow enough to run out of time: a few go first, in both runs, whatever
    // they answer.
    let _ = runtime.block_on(count(&target, WARM_UP, Duration::from_secs(600)));
    let (sent, connections) = (dependency.received(), dependency.connections());
    let load = runtime.block_on(count(&target, requests, Duration::from_secs(600)));
    load.assert_all_ok(VARIANTS[variant], requests);
    let hedges = hedges(front.child());
    let (sent, connections) = (
        dependency.received() - sent,
        dependency.connections() - connections,
    );
    Counts {
        instructions: front.finish(),
        sent,
        connections,
        hedges,
    }
}

/// One variant's figures in one round.
#[derive(Clone, Copy, Debug, Default)]
struct Phase {
    per_second: f64,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    cpu_per_request: Duration,
    /// Requests the dependency received per request answered.
    sent_per_request: f64,
    /// Connections the dependency accepted per 1 000 requests answered.
    connections_per_1000: f64,
    /// Of those, the ones closed before a request arrived on them, per 1 000 requests.
    unused_per_1000: f64,
    /// Hedges the library's call sent by its own count, per 1 000 requests (none for the
    /// other variants).
    hedges_per_1000: f64,
    /// The library's live hedge delay at the end of the phase (zero for the other variants).
    hedge_delay: Duration,
    not_ok: u64,
    errors: u64,
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    match args.peek().map(String::as_str) {
        Some("--dependency") => {
            // The default tail, which `--instructions` counts with; the timed run tells it the
            // tail it was given at once, with the `model` command.
            deadline_bench::dependency::child_main(model(SLOW), 1);
            return;
        }
        Some("--front") => {
            let rest: Vec<String> = args.skip(1).collect();
            let threads = rest.first().and_then(|t| t.parse().ok()).unwrap_or(1);
            front_main(threads, rest.get(1).map_or("", String::as_str));
            return;
        }
        Some("--instructions") => {
            instructions_main(quick_arg("downstream", args.skip(1)));
            return;
        }
        _ => {}
    }
    // The front server's worker threads, unless told otherwise.
    const THREADS: usize = 1;
    let o = Options::parse(
        Options {
            rounds: 9,
            phase: Duration::from_secs(3),
            connections: 32,
            threads: Some(THREADS),
            rate: None,
            quick: false,
            slow: Some(SLOW),
        },
        args,
    );
    let slow = o.slow.unwrap_or(SLOW);
    let threads = o.threads.unwrap_or(THREADS);
    println!(
        "downstream: {} rounds of {:.2} s per variant, {} connections, front runtime of {} worker thread(s); \
         the dependency answers in 1-3 ms, {}% at {} ms; load average {}",
        o.rounds,
        o.phase.as_secs_f64(),
        o.connections,
        threads,
        slow.percent(),
        slow.ms(),
        load_average().unwrap_or_default()
    );
    let mut dependency = Child::spawn(&["--dependency"]);
    dependency.ask(&model(slow).command());
    let threads = threads.to_string();
    let dep_addr = dependency.addrs()[0].to_string();
    let mut front = Child::spawn(&["--front", &threads, &dep_addr]);
    let targets: Vec<Target> = front.addrs().iter().map(|&addr| target(addr)).collect();
    let runtime = deadline_bench::load::runtime();
    // Warm-up, not counted: the connections, and each hedge's latency histogram.
    let warm = if o.quick {
        o.phase
    } else {
        Duration::from_secs(2)
    };
    for target in &targets {
        runtime.block_on(closed_loop(target, o.connections, warm));
    }

    let mut phases: Vec<Vec<Phase>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..o.rounds {
        for i in 0..VARIANTS.len() {
            let v = (round + i) % VARIANTS.len();
            // Warmed again first, not counted: tower's latency histogram is emptied after
            // two idle periods (a second each), which each variant's turn is for the others.
            runtime.block_on(closed_loop(&targets[v], o.connections, warm));
            let (cpu_before, sent_before) = (front.cpu(), dependency.received());
            let (connections_before, unused_before) =
                (dependency.connections(), dependency.unused());
            let hedges_before = hedges(&mut front);
            let load = runtime.block_on(closed_loop(&targets[v], o.connections, o.phase));
            let cpu = front.cpu() - cpu_before;
            let sent = dependency.received() - sent_before;
            let connections = dependency.connections() - connections_before;
            let unused = dependency.unused() - unused_before;
            let hedged = hedges(&mut front) - hedges_before;
            let served = (load.ok.len() as u64 + load.not_ok).max(1);
            phases[v].push(Phase {
                per_second: load.per_second(),
                p50: percentile(&load.ok, Quantile::P50),
                p99: percentile(&load.ok, Quantile::P99),
                p999: percentile(&load.ok, Quantile::P999),
                cpu_per_request: cpu / u32::try_from(served).unwrap_or(u32::MAX),
                sent_per_request: sent as f64 / served as f64,
                connections_per_1000: connections as f64 * 1e3 / served as f64,
                unused_per_1000: unused as f64 * 1e3 / served as f64,
                hedges_per_1000: hedged as f64 * 1e3 / served as f64,
                hedge_delay: if v == 1 {
                    hedge_delay(&mut front)
                } else {
                    Duration::ZERO
                },
                not_ok: load.not_ok,
                errors: load.errors,
            });
        }
        let line: Vec<String> = VARIANTS
            .iter()
            .zip(&phases)
            .enumerate()
            .map(|(v, (name, p))| {
                let p = p[round];
                let own = if v == 1 {
                    format!(
                        " ({:.1} hedges per 1 000, its live hedge delay {})",
                        p.hedges_per_1000,
                        ms(p.hedge_delay)
                    )
                } else {
                    String::new()
                };
                format!("{name} {:.0}/s, p99 {}{own}", p.per_second, ms(p.p99))
            })
            .collect();
        println!("round {}: {}", round + 1, line.join("; "));
    }
    drop(front);
    drop(dependency);

    println!(
        "\n{:<16} {:>11} {:>8} {:>10} {:>10} {:>10} {:>8} {:>12} {:>13} {:>12} {:>13}",
        "variant",
        "requests/s",
        "ratio",
        "p50",
        "p99",
        "p99.9",
        "ratio",
        "CPU/request",
        "sent/request",
        "conns/1000",
        "unused/1000"
    );
    let base = phases[0].clone();
    let mut summary = Vec::new();
    for (v, name) in VARIANTS.iter().enumerate() {
        let p = &phases[v];
        let med = |f: fn(&Phase) -> f64| median_of(p, f);
        let ratio = |f: fn(&Phase) -> f64| -> f64 {
            median(
                &p.iter()
                    .zip(&base)
                    .map(|(a, b)| f(a) / f(b))
                    .collect::<Vec<_>>(),
            )
        };
        let rps_ratio = ratio(|p| p.per_second);
        let p99_ratio = ratio(|p| p.p99.as_secs_f64());
        let secs = |x: f64| ms(Duration::from_secs_f64(x));
        println!(
            "{:<16} {:>11.0} {:>7.3}x {:>10} {:>10} {:>10} {:>7.3}x {:>9.2} us {:>13.4} {:>12.2} {:>13.2}",
            name,
            med(|p| p.per_second),
            rps_ratio,
            secs(med(|p| p.p50.as_secs_f64())),
            secs(med(|p| p.p99.as_secs_f64())),
            secs(med(|p| p.p999.as_secs_f64())),
            p99_ratio,
            med(|p| p.cpu_per_request.as_secs_f64()) * 1e6,
            med(|p| p.sent_per_request),
            med(|p| p.connections_per_1000),
            med(|p| p.unused_per_1000),
        );
        let (not_ok, errors) = p
            .iter()
            .fold((0, 0), |(n, e), p| (n + p.not_ok, e + p.errors));
        if not_ok + errors > 0 {
            println!("  ({name}: {not_ok} answers other than 200, {errors} transport errors)");
        }
        summary.push((rps_ratio, p99_ratio));
    }
    println!(
        "(medians over {} rounds; each ratio is to plain reqwest within its round, then their median)",
        o.rounds
    );
    let lib_median = |f: fn(&Phase) -> f64| median_of(&phases[1], f);
    println!(
        "Dependency::run by its own count: {:.2} hedges sent per 1 000 requests at a live hedge delay of {} \
         (the dependency received {:.2} requests beyond one per 1 000, and accepted {:.2} connections, {:.2} unused)",
        lib_median(|p| p.hedges_per_1000),
        ms(Duration::from_secs_f64(lib_median(|p| p
            .hedge_delay
            .as_secs_f64()))),
        lib_median(|p| (p.sent_per_request - 1.0) * 1e3),
        lib_median(|p| p.connections_per_1000),
        lib_median(|p| p.unused_per_1000),
    );
    // The library's call against tower's stack, round by round (both measured in the same
    // round): the median of the rounds' ratios, and the interval that holds it 95% of the
    // time (the sign test's, from the rounds' order statistics). "Ahead" only when the whole
    // interval is.
    let paired = |f: fn(&Phase) -> f64| -> Vec<f64> {
        phases[1]
            .iter()
            .zip(&phases[2])
            .map(|(lib, tower)| f(lib) / f(tower))
            .collect()
    };
    let rps_vs_tower = paired(|p| p.per_second);
    let p99_vs_tower = paired(|p| p.p99.as_secs_f64());
    let rps_verdict = against(&rps_vs_tower, 1.0, "ahead", "behind");
    let p99_verdict = against(&p99_vs_tower, 1.0, "higher", "lower");
    println!(
        "Dependency::run against tower's stack, round by round: requests/s {} ({} of {} rounds ahead); p99 {} ({} of {} rounds lower)",
        rps_verdict.text,
        rps_vs_tower.iter().filter(|r| **r > 1.0).count(),
        rps_vs_tower.len(),
        p99_verdict.text,
        p99_vs_tower.iter().filter(|r| **r < 1.0).count(),
        p99_vs_tower.len(),
    );
    let (lib, tower) = (summary[1], summary[2]);
    let met = lib.0 >= 0.95
        && lib.1 <= 0.5
        && rps_verdict.side == Some(Side::Above)
        && p99_verdict.side == Some(Side::Below);
    println!(
        "target: Dependency::run at least 0.95x plain reqwest's requests/s with p99 at most half of it, \
         ahead of tower on both: {} (against plain reqwest: requests/s {:.3}x, p99 {:.3}x; tower's stack {:.3}x and {:.3}x; \
         against tower's stack: requests/s {}, p99 {})",
        if met { "met" } else { "not met" },
        lib.0,
        lib.1,
        tower.0,
        tower.1,
        rps_verdict.word,
        p99_verdict.word,
    );
    println!(
        "load average at the end: {}",
        load_average().unwrap_or_default()
    );
    // Not a check of speed: a variant that answered nothing, or lost connections, did not
    // run as measured.
    if phases
        .iter()
        .flatten()
        .any(|p| p.per_second == 0.0 || p.errors > 0)
    {
        eprintln!("a variant answered nothing, or had transport errors");
        std::process::exit(1);
    }
}

/// The median over `phases` of one figure, `f`.
fn median_of(phases: &[Phase], f: fn(&Phase) -> f64) -> f64 {
    median(&phases.iter().map(f).collect::<Vec<_>>())
}

/// The hedges the library's call has sent so far, by its own count (the front answers it).
fn hedges(front: &mut Child) -> u64 {
    front.ask("hedges").parse().expect("a count")
}

/// The library's live hedge delay, as the front reads it now (zero while it has none).
fn hedge_delay(front: &mut Child) -> Duration {
    Duration::from_micros(front.ask("delay").parse().expect("microseconds"))
}
