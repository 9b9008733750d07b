//! The retry-and-hedge budget next to tower's `TpsBudget`, in one run: cost per operation,
//! exactness of the ratio, and over-draw when threads race.
//!
//! ```text
//! cargo bench -p deadline-core --bench budget
//! ```
//!
//! Prints what it measured: criterion's timings, then the ratio of the two costs, then how
//! many retries each budget granted against how many its ratio allows.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Duration;

use criterion::Criterion;

mod common;
use deadline_core::Instant;
use deadline_core::budget::RetryBudget;
use tower::retry::budget::{Budget as _, TpsBudget};

const GROUP: &str = "budget";

/// A budget of ours with a percent ratio, no floor, and no cap on savings, so that it can be
/// compared with tower's, whose deposits only expire after their TTL.
fn ours(percent: u32) -> RetryBudget {
    RetryBudget::percent(percent)
        .with_floor_per_sec(0)
        .with_max_balance(u32::MAX)
}

/// tower's budget with the same ratio, no floor, and the longest TTL (nothing expires here).
fn towers(percent: u32) -> TpsBudget {
    TpsBudget::new(Duration::from_secs(60), 0, percent as f32 / 100.0)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group(GROUP);
    let b = ours(10);
    let now = Instant::from_secs(1);
    g.bench_function("deadline_deposit_withdraw", |bch| {
        bch.iter(|| {
            b.deposit(black_box(now));
            black_box(b.try_withdraw(black_box(now)))
        })
    });
    let t = towers(10);
    g.bench_function("tower_deposit_withdraw", |bch| {
        bch.iter(|| {
            t.deposit();
            black_box(t.withdraw())
        })
    });
    g.finish();
}

/// Deposits `calls` original calls, then withdraws until refused: the retries granted.
fn granted_after(calls: u32, deposit: impl Fn(), withdraw: impl Fn() -> bool) -> u32 {
    for _ in 0..calls {
        deposit();
    }
    let mut granted = 0;
    while withdraw() {
        granted += 1;
    }
    granted
}

/// Two threads, each making `calls` original calls and asking for a retry after every one.
/// Returns (deposits, grants). Grants must never exceed deposits x percent / 100.
fn race(calls: u32, deposit: &(impl Fn() + Sync), withdraw: &(impl Fn() -> bool + Sync)) -> u32 {
    let start = Barrier::new(2);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let mut granted = 0u32;
                    for _ in 0..calls {
                        deposit();
                        if withdraw() {
                            granted += 1;
                        }
                    }
                    granted
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    })
}

fn main() {
    let started = std::time::SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();

    if let (Some(ours_ns), Some(tower_ns)) = (
        common::mean_ns(GROUP, "deadline_deposit_withdraw", started),
        common::mean_ns(GROUP, "tower_deposit_withdraw", started),
    ) {
        println!("\ncost of one deposit + one withdrawal, single thread (criterion means):");
        println!("  deadline RetryBudget  {ours_ns:8.2} ns");
        println!("  tower TpsBudget       {tower_ns:8.2} ns");
        println!("  ratio deadline/tower  {:8.2}", ours_ns / tower_ns);
    } else {
        println!("(no timings from this run: run with `cargo bench`, not `--test`)");
    }

    let now = Instant::from_secs(1);
    println!(
        "\nretries granted after 1000 original calls (the ratio allows 1000 x percent / 100):"
    );
    println!("  percent  allowed  deadline  tower");
    for percent in [10, 25, 30, 60, 75] {
        let b = ours(percent);
        let t = towers(percent);
        let o = granted_after(1000, || b.deposit(now), || b.try_withdraw(now));
        let w = granted_after(1000, || t.deposit(), || t.withdraw());
        println!(
            "  {percent:>6}%  {:>7}  {o:>8}  {w:>5}",
            1000 * percent / 100
        );
    }

    let calls = 2_000_000;
    println!(
        "\ntwo threads racing, {calls} calls each, a retry asked after every call, 10% ratio:"
    );
    let allowed = 2 * calls / 10;
    let b = ours(10);
    let o = race(calls, &|| b.deposit(now), &|| b.try_withdraw(now));
    let t = towers(10);
    let w = race(calls, &|| t.deposit(), &|| t.withdraw());
    println!("  allowed at most  {allowed}");
    println!(
        "  deadline granted {o} ({})",
        if o <= allowed { "within" } else { "OVER-DRAWN" }
    );
    println!(
        "  tower granted    {w} ({})",
        if w <= allowed { "within" } else { "over-drawn" }
    );
}
