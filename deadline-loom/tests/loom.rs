//! Model checks of deadline-core's shared-state types under loom: every interleaving of a few threads
//! (within loom's preemption bound, `LOOM_MAX_PREEMPTIONS`) over the real code, whose
//! atomics are loom's when built with `--cfg loom`:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=3 cargo test -p deadline-loom --test loom --release
//! ```
//!
//! Each model prints how many interleavings it explored.
#![cfg(loom)]

use std::sync::atomic::{AtomicUsize, Ordering};

use deadline_core::breaker::BreakerOutcome;
use deadline_core::breaker::{BreakerConfig, BreakerState, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::observe::CounterEvent;
use deadline_core::observe::{Counters, Histogram};
use deadline_core::{Instant, ms};
use loom::sync::Arc;
use loom::thread;

/// Runs `model` under loom and prints how many interleavings it took.
///
/// Each model makes its value and reads it once before spawning threads: under loom,
/// deadline-core's atomics are made on first use, and loom (rightly) requires an object
/// shared between threads to be made before them.
fn explore(name: &str, model: impl Fn() + Sync + Send + 'static) {
    // Counted per model (tests run in parallel, so no shared counter).
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&runs);
    loom::model(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    let explored = runs.load(Ordering::Relaxed);
    println!("loom: {name}: {explored} interleavings explored");
    assert!(explored > 1, "{name}: loom explored a single interleaving");
}

const T0: Instant = Instant::from_secs(10);

/// Deposits and withdrawals racing: a withdrawal is granted only against whole tokens
/// deposited, and the balance is exactly what was deposited less what was granted (nothing
/// lost, nothing minted, never below zero).
#[test]
fn retry_budget_is_never_overdrawn_and_conserves_tokens() {
    explore("retry budget: deposits and grants", || {
        // 50%: two deposits buy one retry. No floor: only deposits pay.
        let budget = Arc::new(RetryBudget::percent(50).with_floor_per_sec(0));
        let _ = budget.available(T0);
        let depositor = {
            let budget = Arc::clone(&budget);
            thread::spawn(move || {
                budget.deposit(T0);
                budget.deposit(T0);
                u32::from(budget.try_withdraw(T0))
            })
        };
        let withdrawer = {
            let budget = Arc::clone(&budget);
            thread::spawn(move || {
                u32::from(budget.try_withdraw(T0)) + u32::from(budget.try_withdraw(T0))
            })
        };
        let granted = depositor.join().unwrap() + withdrawer.join().unwrap();
        assert!(
            granted <= 1,
            "{granted} retries granted on two 50% deposits"
        );
        assert_eq!(budget.balance_milli(), 2 * 500 - granted * 1_000);
    });
}

/// Three threads racing for the floor of one grant per second: exactly one gets it in that
/// second, whatever the order; a reading from an earlier second (a clock stepping back)
/// mints nothing new.
#[test]
fn retry_budget_floor_grants_at_most_its_count_per_second() {
    explore("retry budget: the floor per second", || {
        let budget = Arc::new(RetryBudget::percent(0).with_floor_per_sec(1));
        let _ = budget.available(T0);
        let racers: Vec<_> = [T0, T0, Instant::from_secs(9)]
            .into_iter()
            .map(|now| {
                let budget = Arc::clone(&budget);
                thread::spawn(move || u32::from(budget.try_withdraw(now)))
            })
            .collect();
        let granted: u32 = racers.into_iter().map(|t| t.join().unwrap()).sum();
        // The step-back reading may open the earlier second first, and then T0's second
        // grants its own one: at most one per distinct second, never more.
        assert!((1..=2).contains(&granted), "{granted} floor grants");
        assert_eq!(budget.floor_left(T0), 0);
    });
}

/// One failure in a row opens; the cooldown is 1 s; half-open lets 2 probes through.
fn breaker() -> CircuitBreaker {
    breaker_with(1, 2)
}

/// `failures` failures in a row open; the cooldown is 1 s; half-open lets `probes` probes
/// through.
fn breaker_with(failures: u32, probes: u32) -> CircuitBreaker {
    CircuitBreaker::new(
        BreakerConfig::DEFAULT
            .with_consecutive_failures(failures)
            .with_failure_percent(0)
            .with_window(20)
            .with_min_calls(10)
            .with_cooldown(ms(1_000))
            .with_probes(probes)
            .with_probe_timeout(ms(500)),
    )
}

/// An open breaker, its cooldown over at `after`.
fn opened() -> (CircuitBreaker, Instant) {
    let b = breaker();
    let permit = b
        .try_acquire(T0)
        .expect("a closed breaker lets the call through");
    b.record(permit, BreakerOutcome::Failure, T0);
    assert_eq!(b.state(), BreakerState::Open);
    let _ = b.window_stats();
    (b, Instant::from_millis(T0.as_millis() + 1_000))
}

/// Three threads racing for probes of a half-open breaker: at most two get a permit.
#[test]
fn breaker_half_open_admits_at_most_its_probes() {
    explore("breaker: probes of one half-open round", || {
        let (b, after) = opened();
        let b = Arc::new(b);
        let racers: Vec<_> = (0..3)
            .map(|_| {
                let b = Arc::clone(&b);
                thread::spawn(move || b.try_acquire(after).ok())
            })
            .collect();
        let permits: Vec<_> = racers
            .into_iter()
            .filter_map(|t| t.join().unwrap())
            .collect();
        assert!(permits.len() <= 2, "{} probes let through", permits.len());
        assert!(
            !permits.is_empty(),
            "a half-open breaker let no probe through"
        );
        assert!(permits.iter().all(|p| p.is_probe()));
        assert_eq!(b.state(), BreakerState::HalfOpen);
    });
}

/// Two probes that both succeed, racing: both are let through and the breaker always ends
/// closed. One that fails and one that succeeds, racing: it always ends open. No transition
/// is lost, and no caller is refused a free probe slot because it read the state just before
/// another half-opened the breaker.
#[test]
fn breaker_loses_no_transition() {
    for (name, second, expected) in [
        (
            "breaker: two probes succeed",
            BreakerOutcome::Success,
            BreakerState::Closed,
        ),
        (
            "breaker: one probe fails",
            BreakerOutcome::Failure,
            BreakerState::Open,
        ),
    ] {
        explore(name, move || {
            let (b, after) = opened();
            let b = Arc::new(b);
            let probes: Vec<_> = [BreakerOutcome::Success, second]
                .into_iter()
                .map(|outcome| {
                    let b = Arc::clone(&b);
                    thread::spawn(move || {
                        let permit = b.try_acquire(after);
                        let seen = permit.as_ref().map(|p| (p.generation(), p.is_probe())).ok();
                        if let Ok(permit) = permit {
                            b.record(permit, outcome, after);
                        }
                        seen.is_some()
                    })
                })
                .collect();
            let got: Vec<_> = probes.into_iter().map(|p| p.join().unwrap()).collect();
            assert_eq!(b.state(), expected, "permits granted: {got:?}");
            if expected == BreakerState::Closed {
                // Two callers, two probe slots: neither is refused.
                assert_eq!(got, [true, true]);
            }
        });
    }
}

/// A breaker that two failures in a row open, opened once and closed again by its probes
/// (so that every one of its atomics is made before the model's threads run), and the time
/// it closed at.
fn reclosed() -> (CircuitBreaker, Instant) {
    let b = breaker_with(2, 2);
    for _ in 0..2 {
        let permit = b.try_acquire(T0).expect("closed");
        b.record(permit, BreakerOutcome::Failure, T0);
    }
    let after = Instant::from_millis(T0.as_millis() + 1_000);
    let probes: Vec<_> = (0..2)
        .map(|_| b.try_acquire(after).expect("a probe"))
        .collect();
    for probe in probes {
        b.record(probe, BreakerOutcome::Success, after);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    (b, after)
}

/// A closed breaker that two failures in a row open, and two calls failing at once: in
/// every interleaving it ends open and refuses the next call, and it opened once (its first
/// probe after the cooldown has the generation that the two failures one after the other
/// give).
#[test]
fn breaker_trips_once_on_concurrent_failures() {
    // The two failures one after the other (a model of one thread: one run).
    let expected = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = std::sync::Arc::clone(&expected);
    loom::model(move || {
        let (b, now) = reclosed();
        for _ in 0..2 {
            let permit = b.try_acquire(now).expect("closed");
            b.record(permit, BreakerOutcome::Failure, now);
        }
        let later = Instant::from_millis(now.as_millis() + 1_000);
        *slot.lock().unwrap() = Some(b.try_acquire(later).expect("a probe").generation());
    });
    let expected = expected.lock().unwrap().expect("the sequential run ran");
    explore("breaker: two calls fail at once", move || {
        let (b, now) = reclosed();
        let b = Arc::new(b);
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let b = Arc::clone(&b);
                thread::spawn(move || {
                    let permit = b
                        .try_acquire(now)
                        .expect("a closed breaker lets both through");
                    b.record(permit, BreakerOutcome::Failure, now);
                })
            })
            .collect();
        for caller in callers {
            caller.join().unwrap();
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert!(b.try_acquire(now).is_err(), "an open breaker refuses");
        let later = Instant::from_millis(now.as_millis() + 1_000);
        let probe = b.try_acquire(later).expect("a probe after the cooldown");
        assert!(probe.is_probe());
        assert_eq!(probe.generation(), expected, "opened more than once");
    });
}

/// A breaker that lets one probe through per round: one caller hands its probe back unused
/// while another asks for one. No slot is lost and none is made: afterwards a third caller
/// gets a probe exactly when the second did not take (and keep) the slot.
#[test]
fn breaker_abandoned_probe_frees_its_slot() {
    explore("breaker: an abandoned probe and another caller", || {
        let b = breaker_with(1, 1);
        let permit = b.try_acquire(T0).expect("closed");
        b.record(permit, BreakerOutcome::Failure, T0);
        let after = Instant::from_millis(T0.as_millis() + 1_000);
        let first = b.try_acquire(after).expect("the round's one probe");
        let b = Arc::new(b);
        let abandoning = {
            let b = Arc::clone(&b);
            thread::spawn(move || b.record(first, BreakerOutcome::Abandoned, after))
        };
        let asking = {
            let b = Arc::clone(&b);
            thread::spawn(move || b.try_acquire(after).ok())
        };
        abandoning.join().unwrap();
        let second = asking.join().unwrap();
        let third = b.try_acquire(after);
        assert_eq!(
            third.is_ok(),
            second.is_none(),
            "second: {second:?}, third: {third:?}"
        );
        assert_eq!(b.state(), BreakerState::HalfOpen);
    });
}

/// Two threads recording latencies into one histogram: no update is lost.
#[test]
fn histogram_loses_no_update() {
    explore("histogram: concurrent records", || {
        // A small layout (32 buckets), so that reading every bucket stays cheap for loom.
        let h: Arc<Histogram<32, 2>> = Arc::new(Histogram::with_layout());
        let _ = h.count();
        let writers: Vec<_> = [ms(3), ms(3), ms(40)]
            .into_iter()
            .map(|latency| {
                let h = Arc::clone(&h);
                thread::spawn(move || h.record(latency))
            })
            .collect();
        h.record_n(ms(3), 2);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(h.count(), 5);
    });
}

/// Two threads counting events: no increment is lost.
#[test]
fn counters_lose_no_update() {
    explore("counters: concurrent increments", || {
        let c = Arc::new(Counters::new());
        let _ = c.snapshot();
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    c.record(CounterEvent::Call);
                    c.record_n(CounterEvent::Retry, 2);
                })
            })
            .collect();
        c.record(CounterEvent::Call);
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(c.get(CounterEvent::Call), 3);
        assert_eq!(c.get(CounterEvent::Retry), 4);
    });
}

/// A snapshot taken while a call is recorded never counts more outcomes than calls: a call's
/// success is counted after the call, and the snapshot reads the outcomes before the calls,
/// so one that sees the success sees its call. (Read in the other order, and all relaxed, a
/// snapshot could hold the success and not the call: a success rate above 1.)
#[test]
fn a_snapshot_never_counts_more_outcomes_than_calls() {
    explore("counters: a snapshot racing a call's record", || {
        let c = Arc::new(Counters::new());
        let _ = c.snapshot();
        let writer = {
            let c = Arc::clone(&c);
            thread::spawn(move || {
                c.record(CounterEvent::Call);
                c.record(CounterEvent::Success);
            })
        };
        let snapshot = c.snapshot();
        assert!(snapshot.successes <= snapshot.calls, "{snapshot:?}");
        writer.join().unwrap();
    });
}

/// A halving racing two records into the same bucket: each record lands before the halving
/// or after it, never in between (a halving that read the count and wrote back its half
/// would drop a record made between the two).
#[test]
fn histogram_halving_loses_no_record() {
    explore("histogram: records racing a halving", || {
        let h: Arc<Histogram<32, 2>> = Arc::new(Histogram::with_layout());
        h.record_n(ms(3), 4);
        let writer = {
            let h = Arc::clone(&h);
            thread::spawn(move || {
                h.record(ms(3));
                h.record(ms(3));
            })
        };
        h.halve();
        writer.join().unwrap();
        // Both records before the halving: 6 / 2 = 3; one on each side: 5 / 2 + 1 = 3; both
        // after it: 4 / 2 + 2 = 4. A halving that read the count and wrote back its half
        // around both records would leave 2.
        let count = h.count();
        assert!(count == 3 || count == 4, "{count} latencies after the race");
    });
}

/// Under `--cfg loom`, deadline-core's atomics are loom's: one used outside a model has no
/// execution to belong to, and loom refuses it. A core built with plain atomics (a build that
/// lost the switch in its `sync` module) would record here without a word, and the models
/// above would explore only the threads' start and end, checking none of the core's races.
#[test]
fn the_core_s_atomics_are_loom_s() {
    let h: Histogram<32, 2> = Histogram::with_layout();
    let used = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| h.record(ms(3))));
    let refused = used.expect_err("a core atomic used outside a loom model");
    let why = refused
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| refused.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        why.contains("outside a Loom model"),
        "refused, but not by loom: {why}"
    );
}
