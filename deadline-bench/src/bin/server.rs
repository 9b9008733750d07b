//! `server`: what `DeadlineLayer` costs a server. An axum server on loopback, in a process of
//! its own, serves the same handler five ways (no layer; a layer that does nothing, which
//! shows what `Router::layer` itself costs; `DeadlineLayer` around the whole router, as the
//! library's documentation adds it; `DeadlineLayer` through `Router::layer`; tower's
//! `TimeoutLayer`, as axum's documentation adds it), each on its own port; this program loads
//! each in turn from its own runtime, in rounds whose order rotates, and prints each figure
//! as a ratio to no layer in the same round:
//!
//! - **at a fixed rate** (`--rate`, 10 000 requests per second by default, well under what
//!   the server can do): the server's own CPU time per request (`getrusage` of its process,
//!   read before and after the phase) and the latency, p50 and p99, from when each request
//!   was due. Every variant is offered the same load, so their CPU time per request compares
//!   like for like, whatever else the machine runs.
//! - **in a closed loop** (`--connections`, 32 by default, each with one request at a
//!   time): requests per second, which on a shared machine move with whatever else runs.
//!
//! ```text
//! cargo run -p deadline-bench --release --bin server -- [--rounds 9] [--seconds 3] [--rate 10000] [--connections 32] [--threads 1] [--quick]
//! ```
//!
//! Every request carries `x-deadline-ms: 1000`; the handler hashes 1 KiB and answers with the
//! hash (`deadline_bench::apps`).

use std::net::SocketAddr;
use std::time::Duration;

use deadline_bench::apps::{VARIANTS, apps};
use deadline_bench::child::{Child, serve_commands};
use deadline_bench::load::{Load, Target, closed_loop, fixed_rate};
use deadline_bench::options::Options;
use deadline_bench::stats::{load_average, median, ms, percentile, range};
use http::{HeaderName, HeaderValue};

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

/// One variant's figures in one round.
#[derive(Clone, Copy, Debug, Default)]
struct Phase {
    /// At the fixed rate: the server's CPU time per request, and the latency.
    cpu_per_request: Duration,
    p50: Duration,
    p99: Duration,
    /// In the closed loop: answers per second.
    per_second: f64,
    /// Answers other than 200, and transport errors, in both.
    not_ok: u64,
    errors: u64,
}

/// Loads one variant at `rate`, measuring the child's CPU time around it.
fn cpu_phase(
    runtime: &tokio::runtime::Runtime,
    child: &mut Child,
    run: impl std::future::Future<Output = Load>,
) -> (Load, Duration) {
    let before = child.cpu();
    let load = runtime.block_on(run);
    let cpu = child.cpu() - before;
    let served = (load.ok.len() as u64 + load.not_ok).max(1);
    (load, cpu / u32::try_from(served).unwrap_or(u32::MAX))
}

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--child") {
        let threads = args.nth(2).and_then(|t| t.parse().ok()).unwrap_or(1);
        child_main(threads);
        return;
    }
    let o = Options::parse(
        Options {
            rounds: 9,
            phase: Duration::from_secs(3),
            connections: 32,
            threads: 1,
            rate: 10_000,
            quick: false,
        },
        args,
    );
    println!(
        "server: {} rounds; each variant {:.2} s at {} requests/s and {:.2} s in a closed loop of {} connections; \
         the server's runtime has {} worker thread(s); load average {}",
        o.rounds,
        o.phase.as_secs_f64(),
        o.rate,
        o.phase.as_secs_f64(),
        o.connections,
        o.threads,
        load_average().unwrap_or_default()
    );
    let threads = o.threads.to_string();
    let mut child = Child::spawn(&["--child", "--threads", &threads]);
    let targets: Vec<Target> = child
        .addrs()
        .iter()
        .map(|&addr| Target {
            addr,
            path: "/",
            headers: vec![(
                HeaderName::from_static("x-deadline-ms"),
                HeaderValue::from_static("1000"),
            )],
        })
        .collect();
    let runtime = deadline_bench::load::runtime();
    // Warm-up: each variant once, not counted.
    for target in &targets {
        runtime.block_on(closed_loop(target, o.connections, o.phase / 3));
    }

    let mut phases: Vec<Vec<Phase>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..o.rounds {
        for i in 0..VARIANTS.len() {
            let v = (round + i) % VARIANTS.len();
            let (fixed, cpu_per_request) = cpu_phase(
                &runtime,
                &mut child,
                fixed_rate(&targets[v], o.connections, o.rate, o.phase),
            );
            let closed = runtime.block_on(closed_loop(&targets[v], o.connections, o.phase));
            phases[v].push(Phase {
                cpu_per_request,
                p50: percentile(&fixed.ok, 50.0),
                p99: percentile(&fixed.ok, 99.0),
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
        o.rate, o.connections
    );
    println!(
        "{:<30} {:>10} {:>24} {:>10} {:>10} {:>12} {:>10}",
        "variant", "CPU", "vs no layer (range)", "p50", "p99", "requests/s", "vs no layer"
    );
    let base = phases[0].clone();
    let mut cpu_ratio_deadline = 0.0;
    for (v, name) in VARIANTS.iter().enumerate() {
        let p = &phases[v];
        let med = |f: fn(&Phase) -> f64| median(&p.iter().map(f).collect::<Vec<_>>());
        let ratios = |f: fn(&Phase) -> f64| -> Vec<f64> {
            p.iter().zip(&base).map(|(a, b)| f(a) / f(b)).collect()
        };
        let cpu_ratios = ratios(|p| p.cpu_per_request.as_secs_f64());
        let (lo, hi) = range(&cpu_ratios);
        let cpu_ratio = median(&cpu_ratios);
        if VARIANTS[v] == "DeadlineLayer" {
            cpu_ratio_deadline = cpu_ratio;
        }
        println!(
            "{:<30} {:>7.2} us {:>9.3}x ({:.3}-{:.3}) {:>10} {:>10} {:>12.0} {:>9.3}x",
            name,
            med(|p| p.cpu_per_request.as_secs_f64()) * 1e6,
            cpu_ratio,
            lo,
            hi,
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
    println!(
        "target: DeadlineLayer (around the router) within 3% of no layer in CPU time per request: {} ({:+.1}%)",
        if cpu_ratio_deadline <= 1.03 {
            "met"
        } else {
            "not met"
        },
        (cpu_ratio_deadline - 1.0) * 100.0
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
