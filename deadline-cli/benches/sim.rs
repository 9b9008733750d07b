//! The simulator's speed: 1,000,000 requests per strategy, on one core.
//!
//! Run with `cargo bench -p deadline-cli --bench sim`. Criterion reports each strategy's time
//! per run of 1,000,000 requests and its throughput in requests (elements) per second; a line
//! per strategy with requests/s from one timed run is printed first.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deadline_cli::sim::{SimOptions, Strategy, run_strategy};

const REQUESTS: u64 = 1_000_000;

fn options() -> SimOptions {
    SimOptions {
        requests: REQUESTS,
        ..SimOptions::default()
    }
}

fn sim(c: &mut Criterion) {
    let options = options();
    for strategy in Strategy::ALL {
        let start = Instant::now();
        let report = run_strategy(strategy, &options);
        let took = start.elapsed();
        println!(
            "{:<18} {REQUESTS} requests in {:>7.1} ms: {:>5.1} M requests/s (answered {:.4})",
            strategy.name(),
            took.as_secs_f64() * 1e3,
            REQUESTS as f64 / took.as_secs_f64() / 1e6,
            report.answered
        );
    }
    let mut group = c.benchmark_group("sim_1m_requests");
    group.throughput(Throughput::Elements(REQUESTS));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for strategy in Strategy::ALL {
        group.bench_function(strategy.name(), |b| {
            b.iter(|| run_strategy(black_box(strategy), black_box(&options)));
        });
    }
    group.finish();
}

criterion_group!(benches, sim);
criterion_main!(benches);
