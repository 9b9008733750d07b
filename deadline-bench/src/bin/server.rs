//! `server`: what `DeadlineLayer` costs a server. An axum server on loopback, in a process of
//! its own, serves the same handler six ways (no layer; a layer that does nothing, which
//! shows what `Router::layer` itself costs; `DeadlineLayer` around the whole router, as the
//! library's documentation adds it; `DeadlineLayer` through `Router::layer`; tower's
//! `TimeoutLayer` through `Router::layer`, as axum's documentation adds it, and around the
//! whole router), each on its own port; this program loads
//! each in turn from its own runtime, in rounds whose order rotates, and prints each figure
//! as a ratio to no layer in the same round:
//!
//! - **at a fixed rate** (`--rate`, 10 000 requests per second by default, well under what
//!   the server can do): the server's own CPU time per request (`getrusage` of its process,
//!   read before and after the phase) and the latency, p50 and p99, from when each request
//!   went out, or from when it was due if its connection was still waiting for a slow answer
//!   then (corrected for coordinated omission). Every variant is offered the same load, so
//!   their CPU time per request compares like for like, whatever else the machine runs.
//! - **in a closed loop** (`--connections`, 32 by default, each with one request at a
//!   time): requests per second, which on a shared machine move with whatever else runs.
//!
//! ```text
//! cargo run -p deadline-bench --release --bin server -- [--rounds 9] [--seconds 3] [--rate 10000] [--connections 32] [--threads 1] [--quick]
//! ```
//!
//! The server's CPU time is split into user space (where every layer's work is) and the
//! kernel's (the sockets): the "user" column is the user-space share. The target's verdict
//! comes from the interval that holds the median of `DeadlineLayer`'s rounds' CPU ratios 95%
//! of the time (the sign test's): met when that whole interval is within 3%, not met when all
//! of it is beyond, and "cannot tell" otherwise, as is usual for timed rounds on a shared
//! machine.
//!
//! `--instructions [--quick]` counts instead, exactly and on any machine, what each variant
//! costs the server in user space per request over real sockets: the server process runs
//! under valgrind's callgrind, once loaded with 200 requests and once with 1 200 (20 and 120
//! with `--quick`), one after another over one keep-alive connection, and one request costs
//! the difference of the two counts over the difference of the two numbers (the start-up, the
//! connection and the first requests' warm-up cancel out). A layer's share of the server's
//! CPU time is about its share of these instructions times the user-space share above. Needs
//! valgrind.
//!
//! Every request carries `x-deadline-ms: 1000`; the handler hashes 1 KiB and answers with the
//! hash (`deadline_bench::apps`).

use std::net::SocketAddr;
use std::time::Duration;

use deadline_bench::apps::{DEADLINE_LAYER, VARIANTS, apps};
use deadline_bench::callgrind::{Counted, per_request, quick_arg, require_valgrind};
use deadline_bench::child::{Child, serve_commands};
use deadline_bench::load::{Load, Target, closed_loop, count, fixed_rate};
use deadline_bench::options::Options;
use deadline_bench::stats::{
    Interval, Side, load_average, median, median_interval, ms, percentile, range,
};
use deadline_core::policy::Quantile;

/// The child: the servers on one runtime of `threads` workers.
fn child_main(threads: usize) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a runtime");
    let addrs: Vec<SocketAddr> = runtime.block_on(async {
        let mut addrs = Vec::new();
        for app in apps() {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind loopback");
            addrs.push(listener.local_addr().expect("an address"));
            tokio::spawn(app.serve(listener));
        }
        addrs
    });
    serve_commands(&addrs, |_| None);
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// What the load sends to the server at `addr`: `GET /` with `x-deadline-ms: 1000`.
fn target(addr: SocketAddr) -> Target {
    Target::get_within(addr, "1000")
}

/// `--instructions`: each variant's user-space instructions per request over real sockets.
fn instructions_main(quick: bool) {
    require_valgrind("server --instructions");
    let (low, high): (u64, u64) = if quick { (20, 120) } else { (200, 1_200) };
    println!(
        "server --instructions: the server process under callgrind, {low} and then {high} requests over one keep-alive connection, per variant"
    );
    println!(
        "{:<33} {:>22} {:>12} {:>12}",
        "variant", "instructions/request", "vs no layer", "over it"
    );
    let (mut base, mut deadline) = (0, 0);
    for (v, name) in VARIANTS.iter().enumerate() {
        let fewer = callgrind_count(v, low);
        let more = callgrind_count(v, high);
        let per_request = per_request(name, (low, fewer), (high, more));
        if v == 0 {
            base = per_request;
        }
        println!(
            "{:<33} {:>22} {:>11.3}x {:>+12}",
            name,
            per_request,
            per_request as f64 / base.max(1) as f64,
            i128::from(per_request) - i128::from(base),
        );
        if v == DEADLINE_LAYER {
            deadline = per_request;
        }
    }
    // Every layer's work is in user space: its share of the server's CPU time is its share of
    // the user-space instructions times the user-space share of that time.
    let more = (deadline as f64 / base.max(1) as f64 - 1.0) * 100.0;
    // A layer that adds nothing (or less than nothing) is within 3% at any share.
    // Rounded down, to a tenth: at that share the layer is within 3%, not just past it.
    let share = if more > 0.0 {
        ((3000.0 / more).floor() / 10.0).min(100.0)
    } else {
        100.0
    };
    println!(
        "{} (around the router): {more:.2}% more user-space instructions per request; times the user-space share of the server's CPU time (the timed run's \"user\" column), within 3% of no layer while that share is at most {:.1}%",
        VARIANTS[DEADLINE_LAYER], share
    );
}

/// The instructions callgrind counted for a whole run of the server process in which variant
/// `variant` answered `requests` requests.
fn callgrind_count(variant: usize, requests: u64) -> u64 {
    let mut server = Counted::spawn(
        &format!("server-{variant}-{requests}"),
        &["--child", "--threads", "1"],
    );
    let load = deadline_bench::load::runtime().block_on(count(
        &target(server.child().addrs()[variant]),
        requests,
        Duration::from_secs(600),
    ));
    load.assert_all_ok(VARIANTS[variant], requests);
    server.finish()
}

/// One variant's figures in one round.
#[derive(Clone, Copy, Debug, Default)]
struct Phase {
    /// At the fixed rate: the server's CPU time per request, and the latency.
    cpu_per_request: Duration,
    /// The part of the server's CPU time in user space.
    user_share: f64,
    p50: Duration,
    p99: Duration,
    /// In the closed loop: answers per second.
    per_second: f64,
    /// Answers other than 200, and transport errors, in both.
    not_ok: u64,
    errors: u64,
}

/// Loads one variant at `rate`, measuring the child's CPU time around it: per request, and
/// the share of it in user space.
fn cpu_phase(
    runtime: &tokio::runtime::Runtime,
    child: &mut Child,
    run: impl std::future::Future<Output = Load>,
) -> (Load, Duration, f64) {
    let (before, user_before) = (child.cpu(), child.user_cpu());
    let load = runtime.block_on(run);
    let (cpu, user) = (child.cpu() - before, child.user_cpu() - user_before);
    let served = (load.ok.len() as u64 + load.not_ok).max(1);
    let share = user.as_secs_f64() / cpu.as_secs_f64().max(1e-9);
    (load, cpu / u32::try_from(served).unwrap_or(u32::MAX), share)
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--child") {
        let threads = args.nth(2).and_then(|t| t.parse().ok()).unwrap_or(1);
        child_main(threads);
        return;
    }
    if args.peek().map(String::as_str) == Some("--instructions") {
        instructions_main(quick_arg("server", args.skip(1)));
        return;
    }
    // The server's worker threads and the fixed-rate phase's requests per second, unless
    // told otherwise.
    const THREADS: usize = 1;
    const RATE: u32 = 10_000;
    let o = Options::parse(
        Options {
            rounds: 9,
            phase: Duration::from_secs(3),
            connections: 32,
            threads: Some(THREADS),
            rate: Some(RATE),
            quick: false,
            slow: None,
        },
        args,
    );
    let (threads, rate) = (o.threads.unwrap_or(THREADS), o.rate.unwrap_or(RATE));
    println!(
        "server: {} rounds; each variant {:.2} s at {} requests/s and {:.2} s in a closed loop of {} connections; \
         the server's runtime has {} worker thread(s); load average {}",
        o.rounds,
        o.phase.as_secs_f64(),
        rate,
        o.phase.as_secs_f64(),
        o.connections,
        threads,
        load_average().unwrap_or_default()
    );
    let threads = threads.to_string();
    let mut child = Child::spawn(&["--child", "--threads", &threads]);
    let targets: Vec<Target> = child.addrs().iter().map(|&addr| target(addr)).collect();
    let runtime = deadline_bench::load::runtime();
    // Warm-up: each variant once, not counted.
    for target in &targets {
        runtime.block_on(closed_loop(target, o.connections, o.phase / 3));
    }

    let mut phases: Vec<Vec<Phase>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..o.rounds {
        for i in 0..VARIANTS.len() {
            let v = (round + i) % VARIANTS.len();
            let (fixed, cpu_per_request, user_share) = cpu_phase(
                &runtime,
                &mut child,
                fixed_rate(&targets[v], o.connections, rate, o.phase),
            );
            let closed = runtime.block_on(closed_loop(&targets[v], o.connections, o.phase));
            phases[v].push(Phase {
                cpu_per_request,
                user_share,
                p50: percentile(&fixed.ok, Quantile::P50),
                p99: percentile(&fixed.ok, Quantile::P99),
                per_second: closed.per_second(),
                not_ok: fixed.not_ok + closed.not_ok,
                errors: fixed.errors + closed.errors,
            });
        }
        let line: Vec<String> = VARIANTS
            .iter()
            .zip(&phases)
            .map(|(name, p)| {
                let p = p[round];
                format!(
                    "{name} {:.2} us CPU, p99 {}, {:.0}/s",
                    p.cpu_per_request.as_secs_f64() * 1e6,
                    ms(p.p99),
                    p.per_second,
                )
            })
            .collect();
        println!("round {}: {}", round + 1, line.join("; "));
    }
    drop(child);

    println!(
        "\nat {} requests/s: the server's CPU time per request and the latency; in a closed loop of {} connections: requests/s",
        rate, o.connections
    );
    println!(
        "{:<33} {:>10} {:>24} {:>6} {:>10} {:>10} {:>12} {:>10}",
        "variant", "CPU", "vs no layer (range)", "user", "p50", "p99", "requests/s", "vs no layer"
    );
    let base = phases[0].clone();
    let mut deadline_ratios = Vec::new();
    for (v, name) in VARIANTS.iter().enumerate() {
        let p = &phases[v];
        let med = |f: fn(&Phase) -> f64| median(&p.iter().map(f).collect::<Vec<_>>());
        let ratios = |f: fn(&Phase) -> f64| -> Vec<f64> {
            p.iter().zip(&base).map(|(a, b)| f(a) / f(b)).collect()
        };
        let cpu_ratios = ratios(|p| p.cpu_per_request.as_secs_f64());
        let (lo, hi) = range(&cpu_ratios);
        let cpu_ratio = median(&cpu_ratios);
        if v == DEADLINE_LAYER {
            deadline_ratios.clone_from(&cpu_ratios);
        }
        println!(
            "{:<33} {:>7.2} us {:>9.3}x ({:.3}-{:.3}) {:>5.1}% {:>10} {:>10} {:>12.0} {:>9.3}x",
            name,
            med(|p| p.cpu_per_request.as_secs_f64()) * 1e6,
            cpu_ratio,
            lo,
            hi,
            med(|p| p.user_share) * 100.0,
            ms(Duration::from_secs_f64(med(|p| p.p50.as_secs_f64()))),
            ms(Duration::from_secs_f64(med(|p| p.p99.as_secs_f64()))),
            med(|p| p.per_second),
            median(&ratios(|p| p.per_second)),
        );
        let (not_ok, errors) = p
            .iter()
            .fold((0, 0), |(n, e), p| (n + p.not_ok, e + p.errors));
        if not_ok + errors > 0 {
            println!("  ({name}: {not_ok} answers other than 200, {errors} transport errors)");
        }
    }
    println!(
        "(medians over {} rounds; each ratio is taken within its round, then their median and range)",
        o.rounds
    );
    // The verdict from the interval that holds the median ratio 95% of the time (the sign
    // test's, from the rounds' order statistics), not from the median alone: timed rounds on
    // a shared machine spread wider than the 3% asked about.
    let pct = |r: f64| (r - 1.0) * 100.0;
    let m = pct(median(&deadline_ratios));
    let verdict = match median_interval(&deadline_ratios, 0.95) {
        Some(interval @ Interval { low, high, holds }) => {
            let word = match interval.side(1.03) {
                Side::Below => "met",
                Side::Above => "not met",
                Side::Across => "cannot tell",
            };
            format!(
                "{word} (median {m:+.1}%; the {:.0}% interval of the median {:+.1}% to {:+.1}%){}",
                holds * 1e2,
                pct(low),
                pct(high),
                if word == "cannot tell" {
                    "; `--instructions` counts it exactly"
                } else {
                    ""
                }
            )
        }
        None => format!(
            "cannot tell (median {m:+.1}%; too few rounds for an interval: 6 at least); `--instructions` counts it exactly"
        ),
    };
    println!(
        "target: {} (around the router) within 3% of no layer in CPU time per request: timed, {verdict}",
        VARIANTS[DEADLINE_LAYER],
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
