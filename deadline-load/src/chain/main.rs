//! `chain`: the propagation model's four strategies on real services. A client, an API (axum)
//! and an order service (axum) on loopback, and PostgreSQL; each request makes the order
//! service query the database, and a chosen share of the queries stall. It prints, per stall
//! share and per strategy, the share of requests answered in time, the queries and the
//! database time per request, and the share of database time spent after the client stopped
//! waiting, beside `deadline sim`'s figures for the same requests, stall share and seed.
//!
//! ```text
//! bash scripts/chain.sh [--requests 2000] [--stall-rate 0.05 ...] [--clients 3] [--seed 2] [--check]
//! ```
//!
//! `scripts/chain.sh` starts a throwaway PostgreSQL that logs every statement
//! (`scripts/postgres.sh start-logged`), runs this program against it
//! (`DEADLINE_TEST_DATABASE_URL`, `DEADLINE_PG_LOG`), and stops it.
//!
//! - **The model's numbers.** Each query is `SELECT pg_sleep(..)` for as long as the model's
//!   database would take: 40 to 60 ms, or with the given probability a stall of 1.5 to
//!   2.5 s; the client waits 1 s; a database try 300 ms; 3 tries; backoff from 25 ms to
//!   100 ms; a 10% budget with 10 retries a second (`deadline_cli::sim::Model::CALIBRATED`).
//!   The query times are drawn per request and per query from the seed, so the four strategies
//!   meet the same stalls.
//! - **The strategies** are written as their users would write them: [`plain`] without the
//!   library, [`propagated`] with it.
//! - **The figures are the server's.** Queries, their database time, and when each ended come
//!   from PostgreSQL's statement log ([`accounting`]), not from the services' clocks; the
//!   client's stop instant is compared with them on the same machine's clock.
//! - **Clients.** Each strategy has `--clients` clients (3 by default), each sending its next
//!   request when it stops waiting for the last one, as the model's one client does; the four
//!   strategies run at the same time, on their own services and connections. When every query
//!   stalls, each request takes about a second and asks for two retries, so 3 clients ask for
//!   at most 9 in any second: the retry budgets' floor of 10 a second covers them all, and the
//!   budgets refuse none, as in the model. (With more clients they start refusing.)
//!
//! Every loop is bounded: the clients stop after `--requests`, and the wait for the last
//! stalled queries after 30 s. With `--check` (the short run CI makes) it exits non-zero
//! unless the server's log accounts for every query and the strategies come in the order the
//! model predicts: the propagated deadline spends the least database time and the least after
//! the client left, and (with some queries stalling) answers as many requests as the retries,
//! which answer more than one try. Absolute times are never checked.

mod accounting;
mod plain;
mod pool;
mod propagated;
mod report;
mod run;
mod workload;

use std::time::{Duration, Instant};

use deadline_cli::output::fmt_percent;
use deadline_cli::sim::{self, Model, SimOptions, Strategy};
use tokio_postgres::{Config, NoTls};

use crate::report::{Row, model_figures};
use crate::run::Params;

/// The longest wait, after the last request, for the database to end the queries left
/// running.
const SETTLE: Duration = Duration::from_secs(30);

struct Options {
    requests: u64,
    stall_rates: Vec<f64>,
    clients: u64,
    seed: u64,
    check: bool,
}

fn main() {
    let options = options();
    let url = env("DEADLINE_TEST_DATABASE_URL");
    let log_path = env("DEADLINE_PG_LOG");
    let config: Config = url
        .parse()
        .unwrap_or_else(|e| fail(&format!("not a PostgreSQL URL: {url}: {e}")));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let failed = runtime.block_on(async {
        let observer = observer(&config).await;
        let mut failed = Vec::new();
        for (run, &stall_rate) in (0u32..).zip(&options.stall_rates) {
            let rows = run_share(&options, run, stall_rate, &config, &observer, &log_path).await;
            if options.check {
                failed.extend(report::check(&rows, stall_rate));
            }
        }
        failed
    });
    println!(
        "chain: the real chain's figures come from PostgreSQL's statement log; the model's from \
         `deadline sim`\nwith the same requests, stall share and seed. BENCHMARKS.md (\"What \
         propagation saves\") says where\nand why they differ."
    );
    if options.check {
        for reason in &failed {
            eprintln!("check failed: {reason}");
        }
        if !failed.is_empty() {
            std::process::exit(1);
        }
        println!(
            "check passed: the server logged every query; the propagated deadline spent the least \
             database time, and the least after the client left, in the order the model predicts"
        );
    }
}

/// Runs the four strategies at one stall share, prints their figures beside the model's, and
/// returns them.
async fn run_share(
    options: &Options,
    run: u32,
    stall_rate: f64,
    config: &Config,
    observer: &tokio_postgres::Client,
    log_path: &str,
) -> Vec<Row> {
    let offset = accounting::length(log_path)
        .unwrap_or_else(|e| fail(&format!("cannot read the server's log {log_path}: {e}")));
    let load_before = load_average();
    let started = Instant::now();
    let params = Params {
        run,
        requests: options.requests,
        stall_rate,
        seed: options.seed,
        clients: options.clients,
        config: config.clone(),
    };
    let tasks: Vec<_> = Strategy::ALL
        .iter()
        .map(|&strategy| tokio::spawn(run::run(strategy, params.clone())))
        .collect();
    let mut runs = Vec::new();
    for task in tasks {
        runs.push(task.await.expect("a strategy's run"));
    }
    let took = started.elapsed();
    let settled = settle(observer).await;
    let text = accounting::read_from(log_path, offset)
        .unwrap_or_else(|e| fail(&format!("cannot read the server's log {log_path}: {e}")));
    let log = accounting::parse(&text);
    let sim = sim::run(&SimOptions {
        requests: options.requests,
        stall_rate,
        seed: options.seed,
        model: Model::CALIBRATED,
    });
    let rows: Vec<Row> = runs
        .iter()
        .map(|strategy_run| {
            let logged: Vec<_> = log
                .queries
                .iter()
                .filter(|q| q.run == run && q.strategy == strategy_run.strategy.name())
                .collect();
            report::row(
                strategy_run,
                &logged,
                model_figures(&sim, strategy_run.strategy),
            )
        })
        .collect();
    println!(
        "== {} of queries stall: {} requests per strategy, {} clients per strategy, the four \
         strategies at once, seed {}",
        fmt_percent(stall_rate),
        options.requests,
        options.clients,
        options.seed
    );
    println!(
        "ran {:.1} s; load average (1, 5, 15 min) before {}, after {}",
        took.as_secs_f64(),
        load_before,
        load_average()
    );
    if !settled {
        println!(
            "(queries were still running {} s after the last request)",
            SETTLE.as_secs()
        );
    }
    if log.unfinished > 0 {
        println!(
            "({} queries started in the log without an end)",
            log.unfinished
        );
    }
    println!();
    print!("{}", report::render(&rows));
    let differences = report::differences(&rows);
    if !differences.is_empty() {
        println!("\nmore than 10% from the model:");
        for d in differences {
            println!("  {d}");
        }
    }
    println!();
    rows
}

/// Waits until the database runs none of the benchmark's queries (at most [`SETTLE`]):
/// whether it came to that.
async fn settle(observer: &tokio_postgres::Client) -> bool {
    let until = Instant::now() + SETTLE;
    while Instant::now() < until {
        let running: i64 = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE state = 'active' AND pid <> pg_backend_pid() AND strpos(query, $1) > 0",
                &[&workload::TAG],
            )
            .await
            .map_or(-1, |row| row.get(0));
        if running == 0 {
            // Each backend writes a statement's last line before it reads as idle.
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A connection of our own, whose queries the server does not log, after checking that the
/// server logs the benchmark's statements as [`accounting`] reads them.
async fn observer(config: &Config) -> tokio_postgres::Client {
    let connect = |config: Config| async move {
        let (client, connection) = config
            .connect(NoTls)
            .await
            .unwrap_or_else(|e| fail(&format!("cannot connect to the database: {e}")));
        tokio::spawn(connection);
        client
    };
    // The settings of the services' connections: the server's own.
    let plain = connect(config.clone()).await;
    let mut settings = Vec::new();
    for name in [
        "log_statement",
        "log_min_duration_statement",
        "log_line_prefix",
    ] {
        let value = plain
            .query_opt("SELECT setting FROM pg_settings WHERE name = $1", &[&name])
            .await
            .ok()
            .flatten()
            .map(|row| row.get::<_, String>(0));
        settings.push(value.unwrap_or_default());
    }
    if settings[0] != "all" || settings[1] != "0" || !settings[2].starts_with("%n [%p] ") {
        fail(&format!(
            "the server does not log statements as this program reads them (log_statement = \
             {:?}, log_min_duration_statement = {:?}, log_line_prefix = {:?}): start it with \
             `bash scripts/postgres.sh start-logged`, or run `bash scripts/chain.sh`",
            settings[0], settings[1], settings[2]
        ));
    }
    let mut quiet = config.clone();
    quiet.options("-c log_statement=none -c log_min_duration_statement=-1");
    connect(quiet).await
}

/// The machine's load average, as `/proc/loadavg` gives it.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        fail(&format!(
            "{name} is not set: run `bash scripts/chain.sh`, which starts a throwaway PostgreSQL \
             that logs its statements"
        ))
    })
}

fn fail(message: &str) -> ! {
    eprintln!("chain: {message}");
    std::process::exit(2);
}

fn options() -> Options {
    let mut options = Options {
        requests: sim::DEFAULT_REQUESTS,
        stall_rates: Vec::new(),
        clients: 3,
        seed: sim::DEFAULT_SEED,
        check: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match arg.as_str() {
            "--requests" => {
                options.requests = value()
                    .parse()
                    .ok()
                    .filter(|n| (1..=100_000).contains(n))
                    .unwrap_or_else(|| usage());
            }
            "--stall-rate" => options.stall_rates.push(
                value()
                    .parse()
                    .ok()
                    .filter(|p: &f64| (0.0..=1.0).contains(p))
                    .unwrap_or_else(|| usage()),
            ),
            "--clients" => {
                options.clients = value()
                    .parse()
                    .ok()
                    .filter(|n| (1..=16).contains(n))
                    .unwrap_or_else(|| usage());
            }
            "--seed" => options.seed = value().parse().unwrap_or_else(|_| usage()),
            "--check" => options.check = true,
            _ => usage(),
        }
    }
    if options.stall_rates.is_empty() {
        options.stall_rates = vec![0.0, 0.05, 1.0];
    }
    options
}

fn usage() -> ! {
    eprintln!(
        "usage: chain [--requests N (1 to 100000, default 2000)] [--stall-rate P (0 to 1; \
         repeat it; default 0, 0.05 and 1)] [--clients N (1 to 16, default 3)] [--seed N \
         (default 2)] [--check]"
    );
    std::process::exit(2);
}
