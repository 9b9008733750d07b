//! The time one call takes, each way `deadline_bench` compares, in one run:
//!
//! ```text
//! cargo bench -p deadline-bench --bench calls
//! ```
//!
//! After criterion's report it times every scenario criterion ran again, in rounds of
//! `CALLS` calls whose order rotates (one round first that is not counted), and prints each
//! scenario's median time per call and its ratio, in the same round, to the scenario it is
//! compared with (`deadline_bench::base_of`: tokio's own timeout in the same setting), as
//! the median and the range over the rounds. With `--test`, as CI runs it, that is one
//! round of 1 000 calls, to prove it works. Instruction counts, which a busy machine does not
//! disturb, come from `scripts/instructions.sh`.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Instant;

use criterion::Criterion;
use deadline_bench::stats::{median, range};

/// The scenarios criterion ran in this run (those its filter kept).
static RAN: Mutex<BTreeSet<&'static str>> = Mutex::new(BTreeSet::new());

/// Calls per scenario in each of the summary's rounds.
const CALLS: u64 = 50_000;
/// The summary's counted rounds.
const ROUNDS: usize = 7;

fn bench(c: &mut Criterion, runtime: &tokio::runtime::Runtime) {
    let mut group = c.benchmark_group("calls");
    for name in deadline_bench::SCENARIOS {
        group.bench_function(name, |b| {
            RAN.lock().unwrap().insert(name);
            b.iter_custom(|calls| {
                let start = Instant::now();
                let sum = runtime.block_on(deadline_bench::run(name, calls));
                let took = start.elapsed();
                std::hint::black_box(sum);
                took
            });
        });
    }
    group.finish();
}

/// Nanoseconds per call of `calls` calls of `name`.
fn time(runtime: &tokio::runtime::Runtime, name: &str, calls: u64) -> f64 {
    let start = Instant::now();
    std::hint::black_box(runtime.block_on(deadline_bench::run(name, calls)));
    start.elapsed().as_secs_f64() * 1e9 / calls as f64
}

fn main() {
    let runtime = deadline_bench::runtime();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c, &runtime);
    c.final_summary();

    let ran = RAN.lock().unwrap().clone();
    let mut names: Vec<&str> = deadline_bench::SCENARIOS
        .into_iter()
        .filter(|name| ran.contains(name))
        .collect();
    if names.is_empty() {
        println!("(no scenario ran)");
        return;
    }
    // Each scenario's base runs in every round, filtered or not: a ratio is against it in
    // the same round.
    for base in names
        .clone()
        .iter()
        .filter_map(|name| deadline_bench::base_of(name))
    {
        if !names.contains(&base) {
            names.push(base);
        }
    }
    let base: Vec<Option<usize>> = names
        .iter()
        .map(|name| {
            let base = deadline_bench::base_of(name)?;
            names.iter().position(|n| *n == base)
        })
        .collect();
    let test = std::env::args().any(|arg| arg == "--test");
    let (rounds, calls) = if test { (1, 1_000) } else { (ROUNDS, CALLS) };
    for name in &names {
        time(&runtime, name, calls);
    }
    // Per scenario: nanoseconds per call, and the ratio to its base, one of each per round.
    let mut per_call = vec![Vec::new(); names.len()];
    let mut ratio = vec![Vec::new(); names.len()];
    for round in 0..rounds {
        let mut ns = vec![0.0; names.len()];
        for turn in 0..names.len() {
            let i = (turn + round) % names.len();
            ns[i] = time(&runtime, names[i], calls);
        }
        for i in 0..names.len() {
            per_call[i].push(ns[i]);
            if let Some(b) = base[i] {
                ratio[i].push(ns[i] / ns[b]);
            }
        }
    }
    println!(
        "\ntime per call, {rounds} rotating round(s) of {calls} calls after one not counted \
         (median; the ratio to tokio's timeout in the same setting and round, median and range):"
    );
    for (i, name) in names.iter().enumerate() {
        let ns = median(&per_call[i]);
        match base[i] {
            Some(b) => {
                let (low, high) = range(&ratio[i]);
                println!(
                    "  {name:<44} {ns:>9.1} ns  {:>5.2}x  ({low:.2}x to {high:.2}x) against {}",
                    median(&ratio[i]),
                    names[b],
                );
            }
            None => println!("  {name:<44} {ns:>9.1} ns"),
        }
    }
}
