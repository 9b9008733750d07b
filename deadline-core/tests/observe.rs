//! A scripted call seen three ways: the dependency's counters, the `metrics` recorder and the
//! `tracing` events. The call, on virtual time: attempt 0 hangs and times out at 20 ms, a
//! 5 ms backoff, attempt 1 fails at once, a 5 ms backoff, attempt 2 answers in 3 ms; the call
//! ends at 33 ms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::policy::Backoff;
use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Policy, Timer, ms};
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

static SCRIPTED: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("scripted")
        .idempotent()
        .with_cap(ms(20))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5))),
);

static SPENT: Dependency<ManualRuntime> = Dependency::new(
    Policy::optional("spent")
        .with_cap(ms(60))
        .with_floor(ms(25)),
);

/// What the scripted call and the skipped one gave.
type Ends = (
    Result<u32, CallError<&'static str>>,
    Result<(), CallError<()>>,
);

/// Runs the scripted call and the skipped one on this thread's virtual clock.
fn scripted_calls() -> Ends {
    let mut n = 0;
    let scripted = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(500), async {
        SCRIPTED
            .run(|_| {
                n += 1;
                let this = n;
                async move {
                    let t = ManualRuntime::timer();
                    match this {
                        1 => core::future::pending().await,
                        2 => Err("503"),
                        _ => {
                            t.sleep_until(t.now() + ms(3)).await;
                            Ok(this)
                        }
                    }
                }
            })
            .await
    }))
    .expect("the clock moves")
    .expect("the call ends inside its scope");
    // 10 ms left for an optional call whose floor is 25 ms: skipped.
    let skipped = ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(10), async {
        SPENT.run(|_| async { Ok::<_, ()>(()) }).await
    }))
    .expect("the clock moves")
    .expect("the call ends inside its scope");
    (scripted, skipped)
}

/// One tracing event: its level and message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    level: Level,
    message: String,
    dependency: String,
}

/// Keeps every event it is sent.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Vec<Seen>>>);

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
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.lock().unwrap().push(Seen {
            level: *event.metadata().level(),
            message: fields.message,
            dependency: fields.dependency,
        });
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn counters_metrics_and_tracing_see_every_step() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let collect = Collect::default();
    let (scripted, skipped) = metrics::with_local_recorder(&recorder, || {
        deadline_core::observe::describe_metrics();
        tracing::subscriber::with_default(collect.clone(), scripted_calls)
    });
    assert_eq!(scripted, Ok(3));
    assert!(matches!(skipped, Err(CallError::Skipped(_))), "{skipped:?}");

    // The dependency's own counters.
    let counts = SCRIPTED.counters().snapshot();
    assert_eq!(
        (
            counts.calls,
            counts.successes,
            counts.timeouts,
            counts.retries,
            counts.deadline_exceeded
        ),
        (1, 1, 1, 2, 0)
    );
    assert_eq!(SPENT.counters().snapshot().skipped, 1);
    // The histogram: attempt 0 at its 20 ms timeout, attempt 2's 3 ms answer.
    assert_eq!(SCRIPTED.latency().count(), 2);

    // The metrics recorder: the same counts, per dependency, and the call's duration with its
    // outcome; each described (`describe_metrics`), with its unit.
    let mut counters = std::collections::BTreeMap::new();
    let mut seconds = Vec::new();
    for (key, unit, description, value) in snapshot_vec(&snapshotter) {
        let name = key.key().name().to_owned();
        let label = |wanted: &str| {
            key.key()
                .labels()
                .find(|l| l.key() == wanted)
                .map(|l| l.value().to_owned())
                .unwrap_or_default()
        };
        let dependency = label("dependency");
        assert!(description.is_some(), "{name} is described");
        match value {
            DebugValue::Counter(n) => {
                assert_eq!(unit, Some(metrics::Unit::Count), "{name}");
                counters.insert((name, dependency), n);
            }
            DebugValue::Histogram(values) => {
                assert_eq!(name, "deadline_call_duration_seconds");
                assert_eq!(unit, Some(metrics::Unit::Seconds), "{name}");
                let outcome = label("outcome");
                seconds.extend(
                    values
                        .into_iter()
                        .map(|v| (dependency.clone(), outcome.clone(), v.into_inner())),
                );
            }
            DebugValue::Gauge(_) => {}
        }
    }
    let count = |name: &str, dep: &str| counters.get(&(name.to_owned(), dep.to_owned())).copied();
    assert_eq!(count("deadline_calls_total", "scripted"), Some(1));
    assert_eq!(count("deadline_successes_total", "scripted"), Some(1));
    assert_eq!(count("deadline_timeouts_total", "scripted"), Some(1));
    assert_eq!(count("deadline_retries_total", "scripted"), Some(2));
    assert_eq!(count("deadline_deadline_exceeded_total", "scripted"), None);
    assert_eq!(count("deadline_calls_total", "spent"), Some(1));
    assert_eq!(count("deadline_skipped_total", "spent"), Some(1));
    assert_eq!(
        seconds,
        vec![(
            "scripted".to_owned(),
            "success".to_owned(),
            Duration::from_millis(33).as_secs_f64()
        )]
    );

    // Tracing: one event per step, in order, at its level.
    let seen = collect.0.lock().unwrap().clone();
    let steps: Vec<(Level, &str, &str)> = seen
        .iter()
        .map(|s| (s.level, s.message.as_str(), s.dependency.as_str()))
        .collect();
    assert_eq!(
        steps,
        vec![
            (Level::DEBUG, "call started", "scripted"),
            (Level::DEBUG, "attempt timed out", "scripted"),
            (Level::DEBUG, "retry after backoff", "scripted"),
            (Level::DEBUG, "retry started", "scripted"),
            (Level::DEBUG, "attempt failed", "scripted"),
            (Level::DEBUG, "retry after backoff", "scripted"),
            (Level::DEBUG, "retry started", "scripted"),
            (Level::DEBUG, "attempt answered", "scripted"),
            (Level::DEBUG, "call answered", "scripted"),
            // Never above DEBUG for one call: in an outage every call would log it.
            (
                Level::DEBUG,
                "optional call skipped: too little time left",
                "spent"
            ),
            (Level::DEBUG, "call ended without an answer", "spent"),
        ]
    );
}

/// One entry of the recorder's snapshot.
type Entry = (
    metrics_util::CompositeKey,
    Option<metrics::Unit>,
    Option<metrics::SharedString>,
    DebugValue,
);

/// The recorder's snapshot as a vector.
fn snapshot_vec(snapshotter: &metrics_util::debugging::Snapshotter) -> Vec<Entry> {
    snapshotter.snapshot().into_vec()
}
