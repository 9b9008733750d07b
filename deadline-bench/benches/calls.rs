//! The time one call takes, each way `deadline_bench` compares, in one run:
//!
//! ```text
//! cargo bench -p deadline-bench --bench calls
//! ```
//!
//! After criterion's report it prints each scenario's mean time per call over every
//! iteration this run timed (criterion's warm-up and samples), and its ratio to
//! `tokio::time::timeout` around the same future. Instruction counts, which a busy machine
//! does not disturb, come from `scripts/instructions.sh`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::Criterion;

/// Every iteration timed in this run: scenario -> (total time, calls).
static TIMED: Mutex<BTreeMap<&'static str, (Duration, u64)>> = Mutex::new(BTreeMap::new());

fn bench(c: &mut Criterion) {
    let runtime = deadline_bench::runtime();
    let mut group = c.benchmark_group("calls");
    for name in deadline_bench::SCENARIOS {
        group.bench_function(name, |b| {
            b.iter_custom(|calls| {
                let start = Instant::now();
                let sum = runtime.block_on(deadline_bench::run(name, calls));
                let took = start.elapsed();
                std::hint::black_box(sum);
                let mut timed = TIMED.lock().unwrap();
                let entry = timed.entry(name).or_default();
                entry.0 += took;
                entry.1 += calls;
                took
            });
        });
    }
    group.finish();
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    let timed = TIMED.lock().unwrap();
    let per_call = |name: &str| {
        timed
            .get(name)
            .filter(|(_, calls)| *calls > 0)
            .map(|(took, calls)| took.as_secs_f64() * 1e9 / *calls as f64)
    };
    let Some(base) = per_call("tokio_timeout") else {
        println!("(nothing timed)");
        return;
    };
    println!("\nmean time per call in this run, and against tokio::time::timeout:");
    for name in deadline_bench::SCENARIOS {
        if let Some(ns) = per_call(name) {
            println!("  {name:<28} {ns:>9.1} ns  {:>5.2}x", ns / base);
        }
    }
}
