//! A dependency whose latency distribution shifts, on virtual time: the p99.9 goes from
//! 40 ms to 120 ms and back. Two dependencies see the same calls: one with a fixed 50 ms cap,
//! one whose cap adapts between 30 ms and 200 ms. What is shown:
//!
//! - the fixed cap's kill fraction goes from under 0.1% to over 10% within
//!   `2 × LATENCY_HALF_LIFE` calls of the shift, and back under 0.1% within
//!   `10 × LATENCY_HALF_LIFE` calls of the return;
//! - its `WARN` fires while the kill fraction is high, never twice within its interval, and
//!   again as soon as the interval and the next check allow; none before the shift or after
//!   the return has settled;
//! - while the p99.9 lies above the fixed cap, its suggested cap says so (no upper bound);
//! - the adaptive cap's suggested cap follows the p99.9 plus its margin (130 ms, then 50 ms)
//!   within `8 × LATENCY_HALF_LIFE` calls of the shift and `10 × LATENCY_HALF_LIFE` calls
//!   of the return, and the adaptive cap stays inside its clamp throughout;
//! - the gauges (feature `metrics`) hold the last check's figures.
//!
//! These bounds come from the histogram's decay: it is halved every `LATENCY_HALF_LIFE`
//! (4 096) latencies, so the latencies of a past phase weigh half after each, and a p99.9
//! forgets a tail of 20% once it weighs under 0.1%, eight halvings later.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Instant, Policy, Timer, ms};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// The shortest time between two warnings: longer than the time between two checks (4 096
/// calls to each dependency, four to five minutes here), so that a check finds the last
/// warning too recent.
const INTERVAL: Duration = Duration::from_secs(600);

static FIXED: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("fixed")
        .with_cap(ms(50))
        .with_cap_margin(ms(10))
        .with_advice_interval(INTERVAL),
);

static ADAPTIVE: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("adaptive")
        .with_cap(ms(50))
        .with_cap_margin(ms(10))
        .with_adaptive_cap(ms(30), ms(200))
        .with_advice_interval(INTERVAL),
);

/// The `k`-th latency of a phase, from a cycle of a thousand whose p99.9 (rank 999) is
/// `top`: 800 (or 998) between 5 and 40 ms, the rest between 51 and 110 ms, two at `top`.
/// The cycle is walked in a scrambled order (389 is prime to 1 000).
fn latency(k: u64, shifted: bool) -> Duration {
    let i = (k * 389) % 1_000;
    let micros = if shifted {
        match i {
            0..800 => 10_000 + (i % 100) * 300,
            800..998 => 51_000 + (i - 800) * 300,
            _ => 120_000,
        }
    } else {
        match i {
            0..998 => 5_000 + (i % 100) * 300,
            _ => 40_000,
        }
    };
    Duration::from_micros(micros)
}

/// One call to `dep` whose attempt takes `latency`, in a request of one second.
async fn call(dep: &'static Dependency<'static, ManualRuntime>, latency: Duration) {
    let answer = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
        dep.run(|_| async move {
            let t = ManualRuntime::timer();
            t.sleep_until(t.now() + latency).await;
            Ok::<_, ()>(())
        })
        .await
    })
    .await;
    assert!(answer.is_ok(), "the request's scope never cuts these calls");
}

/// What the advice said after some call.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Calls made so far (to each dependency).
    calls: u64,
    at: Instant,
    fixed_kill: f64,
    fixed_within: bool,
    fixed_suggested: Option<Duration>,
    adaptive_suggested: Option<Duration>,
    adaptive_cap: Duration,
}

fn sample(calls: u64) -> Sample {
    let fixed = FIXED.advice().expect("latencies recorded");
    let adaptive = ADAPTIVE.advice().expect("latencies recorded");
    Sample {
        calls,
        at: ManualRuntime::now(),
        fixed_kill: fixed.kill_fraction,
        fixed_within: fixed.is_within_policy(),
        fixed_suggested: fixed.suggested_cap.estimate,
        adaptive_suggested: adaptive.suggested_cap.estimate,
        adaptive_cap: ADAPTIVE.cap(),
    }
}

/// A warning: the dependency it names, and the virtual clock when it was given.
#[derive(Clone, Debug)]
struct Warning {
    dependency: String,
    at: Instant,
}

/// Keeps the advice's warnings.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Warning>>>);

#[derive(Default)]
struct Fields {
    message: String,
    dependency: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "dependency" {
            self.dependency = value.to_owned();
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

impl Subscriber for Collect {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() == Level::WARN
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message.starts_with("timeout advice") {
            self.0.lock().unwrap().push(Warning {
                dependency: fields.dependency,
                at: ManualRuntime::now(),
            });
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Calls in each phase: before the shift, shifted, after it.
const BEFORE: u64 = 20_000;
const SHIFTED: u64 = 40_000;
const AFTER: u64 = 50_000;
/// The advice is sampled after every this many calls.
const EVERY: u64 = 256;

/// Runs the three phases, calling both dependencies with the same latencies.
fn run_phases() -> Vec<Sample> {
    let mut samples = Vec::new();
    ManualRuntime::block_on(async {
        let mut k = 0;
        for (phase, calls) in [(false, BEFORE), (true, SHIFTED), (false, AFTER)] {
            for _ in 0..calls {
                let latency = latency(k, phase);
                call(&FIXED, latency).await;
                call(&ADAPTIVE, latency).await;
                k += 1;
                if k % EVERY == 0 {
                    samples.push(sample(k));
                }
            }
        }
    })
    .expect("the clock moves");
    samples
}

/// The first sample from call `from` on (and before `to`) for which `test` holds.
fn first(samples: &[Sample], from: u64, to: u64, test: impl Fn(&Sample) -> bool) -> Option<Sample> {
    samples
        .iter()
        .find(|s| s.calls >= from && s.calls < to && test(s))
        .copied()
}

#[test]
fn caps_follow_a_shifting_distribution() {
    let half_life = u64::from(Dependency::<ManualRuntime>::LATENCY_HALF_LIFE);
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let collect = Collect::default();
    let samples = metrics::with_local_recorder(&recorder, || {
        tracing::subscriber::with_default(collect.clone(), run_phases)
    });
    let shift = BEFORE;
    let back = BEFORE + SHIFTED;
    let end = back + AFTER;
    let last_before = samples.iter().rfind(|s| s.calls <= shift).unwrap();
    let last = samples.last().unwrap();

    // Before the shift: the fixed cap kills nothing (the p99.9 is 40 ms), and its suggested
    // cap is the p99.9's bucket plus the margin: 50 to 51.25 ms.
    assert!(last_before.fixed_kill < 0.001, "{last_before:?}");
    let fifty =
        |d: Option<Duration>| d.is_some_and(|d| d >= ms(50) && d <= ms(40) + ms(40) / 32 + ms(10));
    assert!(fifty(last_before.fixed_suggested), "{last_before:?}");
    assert!(fifty(last_before.adaptive_suggested), "{last_before:?}");

    // Shifted: over 10% killed within two half-lives, and it stays so; the p99.9 lies above
    // the fixed cap, so its suggested cap has no upper bound.
    let high = first(&samples, shift, back, |s| s.fixed_kill > 0.10)
        .expect("the kill fraction goes over 10%");
    assert!(high.calls - shift <= 2 * half_life, "{high:?}");
    for s in samples
        .iter()
        .filter(|s| s.calls >= high.calls && s.calls <= back)
    {
        assert!(s.fixed_kill > 0.10, "{s:?}");
        assert_eq!(s.fixed_suggested, None, "{s:?}");
    }
    // The adaptive cap's suggested cap reaches the p99.9 (120 ms) plus its margin.
    let one_thirty = |d: Option<Duration>| {
        d.is_some_and(|d| d >= ms(130) && d <= ms(120) + ms(120) / 32 + ms(10))
    };
    let followed_up = first(&samples, shift, back, |s| one_thirty(s.adaptive_suggested))
        .expect("the suggested cap follows the p99.9 up");
    assert!(
        followed_up.calls - shift <= 8 * half_life,
        "{followed_up:?}"
    );
    for s in samples
        .iter()
        .filter(|s| s.calls >= followed_up.calls && s.calls <= back)
    {
        assert!(one_thirty(s.adaptive_suggested), "{s:?}");
    }

    // Back: under 0.1% within ten half-lives, and the suggested caps back to 50 ms.
    let low = first(&samples, back, end, |s| s.fixed_kill < 0.001)
        .expect("the kill fraction comes back under 0.1%");
    assert!(low.calls - back <= 10 * half_life, "{low:?}");
    assert!(last.fixed_kill < 0.001 && last.fixed_within, "{last:?}");
    let followed_down = first(&samples, back, end, |s| fifty(s.adaptive_suggested))
        .expect("the suggested cap follows the p99.9 down");
    assert!(
        followed_down.calls - back <= 10 * half_life,
        "{followed_down:?}"
    );
    assert!(
        fifty(last.fixed_suggested) && fifty(last.adaptive_suggested),
        "{last:?}"
    );

    // The adaptive cap stayed inside its clamp, and moved: up while the p99.9 was above it,
    // and back down with it.
    assert!(
        samples
            .iter()
            .all(|s| s.adaptive_cap >= ms(30) && s.adaptive_cap <= ms(200))
    );
    let top = samples.iter().map(|s| s.adaptive_cap).max().unwrap();
    assert!(top >= ms(130), "the adaptive cap rose to {top:?}");
    assert!(fifty(Some(last.adaptive_cap)), "{last:?}");

    // The warnings of the fixed cap: none before the shift, none once it settled back, never
    // two within the interval, and one again as soon as the interval and the next check
    // allow while the kill fraction is high.
    let warnings: Vec<Instant> = collect
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.dependency == "fixed")
        .map(|w| w.at)
        .collect();
    assert!(warnings.len() >= 4, "{} warnings", warnings.len());
    assert!(warnings[0] > last_before.at, "no warning before the shift");
    let settled = samples
        .iter()
        .filter(|s| s.calls > back && !s.fixed_within)
        .map(|s| s.calls)
        .max()
        .unwrap_or(back);
    let settled_at = samples.iter().find(|s| s.calls > settled).unwrap().at;
    // The time between two checks: `ADVICE_EVERY` calls to each dependency, the fixed one's
    // at most its 50 ms cap, the adaptive one's at most the slowest latency, 120 ms.
    let check_time = ms(50 + 120) * Dependency::<ManualRuntime>::ADVICE_EVERY;
    assert!(
        *warnings.last().unwrap() <= settled_at + check_time,
        "no warning once it settled"
    );
    let high_until = samples.iter().find(|s| s.calls >= back).unwrap().at;
    for pair in warnings.windows(2) {
        let gap = pair[1].saturating_duration_since(pair[0]);
        assert!(gap >= INTERVAL, "two warnings {gap:?} apart");
        if pair[1] <= high_until {
            assert!(gap <= INTERVAL + check_time, "a warning late by {gap:?}");
        }
    }

    println!(
        "over 10% {} calls after the shift; adaptive suggested cap at 130 ms after {}; under \
         0.1% {} calls after the return; adaptive back at 50 ms after {}; adaptive cap up to \
         {top:?}; {} warnings of the fixed cap",
        high.calls - shift,
        followed_up.calls - shift,
        low.calls - back,
        followed_down.calls - back,
        warnings.len()
    );

    // The gauges: the last check's figures, per dependency.
    let mut gauges = std::collections::BTreeMap::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        if let DebugValue::Gauge(v) = value {
            let dependency = key
                .key()
                .labels()
                .find(|l| l.key() == "dependency")
                .map(|l| l.value().to_owned())
                .unwrap_or_default();
            gauges.insert((key.key().name().to_owned(), dependency), v.into_inner());
        }
    }
    let gauge = |name: &str, dep: &str| gauges[&(name.to_owned(), dep.to_owned())];
    assert!(gauge("deadline_kill_fraction", "fixed") < 0.001);
    assert_eq!(gauge("deadline_cap_seconds", "fixed"), 0.05);
    let suggested = gauge("deadline_suggested_cap_seconds", "adaptive");
    assert!((0.050..=0.0513).contains(&suggested), "{suggested}");
    assert_eq!(
        gauge("deadline_cap_seconds", "adaptive"),
        ADAPTIVE.cap().as_secs_f64()
    );
}

/// When the advice moves an adaptive cap, the gauges it publishes are the cap's now in use:
/// one attempt in a hundred hangs past the 50 ms cap, the check at the 4 096th latency moves
/// the cap up, and the kill fraction published beside the new cap is the new cap's (none: no
/// attempt ran as long). (It was the old cap's 1%, beside the new cap, and an alert on it
/// kept firing until the next check, 4 096 latencies later.)
#[test]
fn the_gauges_after_a_move_are_the_new_caps() {
    static MOVED: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("moved")
            .with_cap(ms(50))
            .with_adaptive_cap(ms(20), ms(400)),
    );
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        ManualRuntime::block_on(async {
            for k in 0..u64::from(Dependency::<ManualRuntime>::ADVICE_EVERY) {
                let latency = if k % 100 == 0 { ms(500) } else { ms(10) };
                let _ = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                    MOVED
                        .run(|_| async move {
                            let t = ManualRuntime::timer();
                            t.sleep_until(t.now() + latency).await;
                            Ok::<_, ()>(())
                        })
                        .await
                })
                .await;
            }
        })
        .expect("the clock moves");
    });
    assert!(
        MOVED.cap() > ms(50),
        "the check moved the cap up: {:?}",
        MOVED.cap()
    );
    // One snapshot: taking it clears what the recorder holds.
    let snapshot = snapshotter.snapshot().into_vec();
    let gauge = |name: &str| {
        snapshot
            .iter()
            .find_map(|(key, _, _, value)| match value {
                DebugValue::Gauge(v) if key.key().name() == name => Some(v.into_inner()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no gauge {name}"))
    };
    assert_eq!(gauge("deadline_cap_seconds"), MOVED.cap().as_secs_f64());
    assert_eq!(gauge("deadline_kill_fraction"), 0.0);
}
