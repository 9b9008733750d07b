//! What one call decision costs, next to the clock read that every decision needs.
//!
//! ```text
//! cargo bench -p deadline-core --bench per_call
//! ```
//!
//! After criterion's own report it prints the ratios, read back from criterion's estimates of
//! this same run: a decision (clock read included) against the clock read alone.

use std::hint::black_box;
use std::time::Instant as StdInstant;

use criterion::Criterion;

mod common;
use deadline_core::call::call_timeout;
use deadline_core::plan::Plan;
use deadline_core::{Deadline, Instant, Policy, ms};

const GROUP: &str = "per_call";

fn origin() -> StdInstant {
    static ORIGIN: std::sync::OnceLock<StdInstant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(StdInstant::now)
}

/// The clock read an adapter does: a monotonic std instant turned into core micros.
fn now() -> Instant {
    let micros = u64::try_from(origin().elapsed().as_micros()).unwrap_or(u64::MAX);
    Instant::from_micros(micros)
}

fn bench(c: &mut Criterion) {
    let a = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
    let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    let cc = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
    let deadline = Deadline::after(now(), ms(200));
    let mut plan: Plan<'_, 4> = Plan::new(deadline, ms(20));
    let first = plan.then(&a).unwrap();
    plan.then(&b).unwrap();
    plan.then(&cc).unwrap();

    let mut g = c.benchmark_group(GROUP);
    g.bench_function("clock_read", |bch| bch.iter(|| black_box(now())));
    g.bench_function("call_timeout", |bch| {
        bch.iter(|| call_timeout(black_box(&a), black_box(deadline), black_box(ms(50)), now()))
    });
    g.bench_function("plan_decide", |bch| {
        bch.iter(|| black_box(&plan).decide(black_box(first), now()))
    });
    g.finish();
}

fn main() {
    let started = std::time::SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    let Some(clock) = common::mean_ns(GROUP, "clock_read", started) else {
        println!("(no estimates found: run with `cargo bench`, not `--test`)");
        return;
    };
    println!("\nmeasured in this run (criterion mean estimates):");
    println!("  clock read alone            {clock:8.2} ns");
    for name in ["call_timeout", "plan_decide"] {
        if let Some(ns) = common::mean_ns(GROUP, name, started) {
            println!(
                "  {name:<14} + clock read  {ns:8.2} ns  = {:.2} x a clock read",
                ns / clock
            );
        }
    }
}
