//! A dependency's calls on the `metrics` facade: a hundred calls to a flaky pricing service
//! on virtual time, then the metrics as a dashboard would scrape them, and the
//! deadline-exceeded rate worked out from them.
//!
//! ```text
//! cargo run -p deadline-core --example metrics --features metrics,test-util
//! ```
//!
//! The recorder here keeps what it is sent (metrics-util's `DebuggingRecorder`); a service
//! installs an exporter instead (metrics-exporter-prometheus, for one), and the same counters
//! reach its dashboard.

use std::collections::BTreeMap;

use deadline_core::policy::Backoff;
use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Policy, Timer, ms};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};

/// Pricing: capped at 40 ms, two retries 5 ms apart, idempotent.
static PRICING: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("pricing")
        .idempotent()
        .with_cap(ms(40))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5))),
);

fn main() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        // Each metric's unit and description, for the exporter.
        deadline_core::observe::describe_metrics();
        for i in 0u64..100 {
            // Every seventh request arrives with 30 ms; the rest with 200 ms. The service
            // answers in 12 ms, but one attempt in five hangs.
            let budget = if i % 7 == 0 { ms(30) } else { ms(200) };
            let mut attempt = 0u64;
            let _ = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(budget, async {
                PRICING
                    .run(|_| {
                        attempt += 1;
                        let hangs = (i * 3 + attempt) % 5 == 0;
                        async move {
                            let t = ManualRuntime::timer();
                            if hangs {
                                core::future::pending::<()>().await;
                            }
                            t.sleep_until(t.now() + ms(12)).await;
                            Ok::<_, ()>(())
                        }
                    })
                    .await
            }));
        }
    });

    let mut counters = BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let labels: Vec<String> = key
            .key()
            .labels()
            .map(|l| format!("{}=\"{}\"", l.key(), l.value()))
            .collect();
        let name = format!("{}{{{}}}", key.key().name(), labels.join(","));
        match value {
            DebugValue::Counter(n) => {
                counters.insert(key.key().name().to_owned(), n);
                println!("{name} {n}");
            }
            DebugValue::Histogram(values) => {
                let mut v: Vec<f64> = values.into_iter().map(|v| v.into_inner()).collect();
                v.sort_by(f64::total_cmp);
                let p = |q: f64| v[((v.len() as f64 * q).ceil() as usize).saturating_sub(1)];
                println!(
                    "{name} count={} p50={:.3}s p99={:.3}s",
                    v.len(),
                    p(0.5),
                    p(0.99)
                );
            }
            DebugValue::Gauge(g) => println!("{name} {}", g.into_inner()),
        }
    }
    let calls = counters.get("deadline_calls_total").copied().unwrap_or(0);
    let exceeded = counters
        .get("deadline_deadline_exceeded_total")
        .copied()
        .unwrap_or(0);
    println!(
        "deadline-exceeded rate of pricing: {exceeded} of {calls} calls ({:.1}%)",
        100.0 * exceeded as f64 / calls.max(1) as f64
    );
    // The dependency's own counters agree with what the recorder was sent.
    assert_eq!(PRICING.counters().snapshot().calls, calls);
    assert_eq!(PRICING.counters().snapshot().deadline_exceeded, exceeded);
}
