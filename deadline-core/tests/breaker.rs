//! The circuit breaker's transitions under virtual time.

use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;

use deadline_core::breaker::{BreakerConfig, BreakerOutcome, BreakerState, CircuitBreaker};
use deadline_core::{Error, Instant, ms};

fn at(millis: u64) -> Instant {
    Instant::from_millis(millis)
}

/// Makes one call at `now` with `outcome`; panics if the breaker refuses it.
fn call(b: &CircuitBreaker, now: Instant, outcome: BreakerOutcome) {
    let permit = b
        .try_acquire(now)
        .expect("the breaker lets the call through");
    b.record(permit, outcome, now);
}

/// Opens on consecutive failures only.
fn consecutive(n: u32) -> BreakerConfig {
    BreakerConfig::DEFAULT
        .with_consecutive_failures(n)
        .with_failure_percent(0)
        .with_window(20)
        .with_min_calls(10)
        .with_cooldown(ms(1_000))
        .with_probes(2)
        .with_probe_timeout(ms(500))
}

/// Opens `b` (consecutive rule of `n`) at `now`.
fn trip(b: &CircuitBreaker, n: u32, now: Instant) {
    for _ in 0..n {
        call(b, now, BreakerOutcome::Failure);
    }
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn the_breaker_is_sync_and_const() {
    fn shared<T: Sync + Send>(_: &T) {}
    static BREAKER: CircuitBreaker = CircuitBreaker::new(BreakerConfig::DEFAULT);
    shared(&BREAKER);
    assert_eq!(BREAKER.state(), BreakerState::Closed);
}

#[test]
fn consecutive_failures_open_it_and_a_success_resets_the_run() {
    let b = CircuitBreaker::new(consecutive(3));
    call(&b, at(0), BreakerOutcome::Failure);
    call(&b, at(1), BreakerOutcome::Failure);
    call(&b, at(2), BreakerOutcome::Success);
    call(&b, at(3), BreakerOutcome::Failure);
    call(&b, at(4), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats().consecutive_failures, 2);
    call(&b, at(5), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.try_acquire(at(6)), Err(Error::CircuitOpen));
}

#[test]
fn a_timeout_opens_it_like_a_failure() {
    for outcome in [BreakerOutcome::Timeout, BreakerOutcome::Failure] {
        let b = CircuitBreaker::new(consecutive(2));
        call(&b, at(0), outcome);
        assert_eq!(b.state(), BreakerState::Closed);
        call(&b, at(1), outcome);
        assert_eq!(b.state(), BreakerState::Open, "{outcome:?}");
    }
    // Mixed, too.
    let b = CircuitBreaker::new(consecutive(2));
    call(&b, at(0), BreakerOutcome::Failure);
    call(&b, at(1), BreakerOutcome::Timeout);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn abandoned_calls_are_not_counted() {
    let b = CircuitBreaker::new(consecutive(2));
    call(&b, at(0), BreakerOutcome::Failure);
    call(&b, at(1), BreakerOutcome::Abandoned);
    assert_eq!(b.window_stats().calls, 1);
    call(&b, at(2), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn the_failure_ratio_opens_it_once_the_window_holds_min_calls() {
    let config = BreakerConfig::DEFAULT
        .with_consecutive_failures(0)
        .with_failure_percent(50)
        .with_window(10)
        .with_min_calls(10);
    let b = CircuitBreaker::new(config);
    // S F S F ... : never two failures in a row; 50% after ten outcomes.
    for i in 0..9u64 {
        let outcome = if i % 2 == 0 {
            BreakerOutcome::Success
        } else {
            BreakerOutcome::Failure
        };
        call(&b, at(i), outcome);
    }
    let stats = b.window_stats();
    assert_eq!((stats.calls, stats.failures), (9, 4));
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "nine outcomes are under min_calls"
    );
    call(&b, at(9), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn the_ratio_ignores_a_window_under_min_calls() {
    let config = BreakerConfig::DEFAULT
        .with_consecutive_failures(0)
        .with_failure_percent(50)
        .with_window(10)
        .with_min_calls(5);
    let b = CircuitBreaker::new(config);
    for i in 0..4 {
        call(&b, at(i), BreakerOutcome::Failure);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    call(&b, at(4), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn a_success_into_a_window_full_of_successes_changes_nothing_and_any_other_is_counted() {
    let config = BreakerConfig::DEFAULT
        .with_consecutive_failures(0)
        .with_failure_percent(50)
        .with_window(4)
        .with_min_calls(4);
    let b = CircuitBreaker::new(config);
    // Six successes: the last two go into a window full of successes (written as it was).
    for i in 0..6 {
        call(&b, at(i), BreakerOutcome::Success);
    }
    assert_eq!(b.window_stats().calls, 4);
    call(&b, at(6), BreakerOutcome::Failure); // S S S F: 25%
    // Each success after it is counted, until the failure has left the window.
    for i in 7..10 {
        call(&b, at(i), BreakerOutcome::Success);
        assert_eq!(b.window_stats().failures, 1, "after call {i}");
    }
    call(&b, at(10), BreakerOutcome::Success); // S S S S: the failure has left
    assert_eq!(b.window_stats().failures, 0);
    call(&b, at(11), BreakerOutcome::Failure); // S S S F: 25%
    assert_eq!(b.state(), BreakerState::Closed);
    call(&b, at(12), BreakerOutcome::Failure); // S S F F: 50%
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn the_window_slides() {
    let config = BreakerConfig::DEFAULT
        .with_consecutive_failures(0)
        .with_failure_percent(75)
        .with_window(4)
        .with_min_calls(4);
    let b = CircuitBreaker::new(config);
    let outcomes = [
        BreakerOutcome::Failure,
        BreakerOutcome::Failure,
        BreakerOutcome::Failure, // 3 of 3: under min_calls
        BreakerOutcome::Success, // 3 of 4, but a success never opens
        BreakerOutcome::Success, // F F S S: the oldest failure has left
        BreakerOutcome::Failure, // F S S F: 50%
    ];
    for (i, outcome) in (0..).zip(outcomes) {
        call(&b, at(i), outcome);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    let stats = b.window_stats();
    assert_eq!(
        (stats.calls, stats.failures, stats.consecutive_failures),
        (4, 2, 1)
    );
    call(&b, at(10), BreakerOutcome::Failure); // S S F F: 50%
    call(&b, at(11), BreakerOutcome::Failure); // S F F F: 75%
    assert_eq!(b.state(), BreakerState::Open);
}

#[test]
fn it_stays_open_for_exactly_the_cooldown() {
    let b = CircuitBreaker::new(consecutive(1));
    trip(&b, 1, at(100));
    assert_eq!(b.try_acquire(at(100)), Err(Error::CircuitOpen));
    assert_eq!(
        b.try_acquire(Instant::from_micros(1_099_999)),
        Err(Error::CircuitOpen)
    );
    assert_eq!(b.state(), BreakerState::Open);
    let probe = b.try_acquire(at(1_100)).expect("the cooldown is over");
    assert!(probe.is_probe());
    assert_eq!(b.state(), BreakerState::HalfOpen);
}

#[test]
fn a_cooldown_ending_between_milliseconds_ends_at_most_one_ms_late() {
    let b = CircuitBreaker::new(consecutive(1));
    trip(&b, 1, Instant::from_micros(100_400)); // cooldown ends at 1_100_400 us
    assert_eq!(
        b.try_acquire(Instant::from_micros(1_100_399)),
        Err(Error::CircuitOpen)
    );
    assert!(b.try_acquire(Instant::from_micros(1_101_000)).is_ok());
}

#[test]
fn half_open_admits_only_its_probes_and_closes_when_they_all_succeed() {
    let b = CircuitBreaker::new(consecutive(2));
    trip(&b, 2, at(0));
    let p1 = b.try_acquire(at(1_000)).expect("first probe");
    let p2 = b.try_acquire(at(1_001)).expect("second probe");
    assert!(p1.is_probe() && p2.is_probe());
    assert_eq!(b.try_acquire(at(1_002)), Err(Error::CircuitOpen));
    b.record(p1, BreakerOutcome::Success, at(1_010));
    assert_eq!(
        b.state(),
        BreakerState::HalfOpen,
        "one of two probes is not enough"
    );
    assert_eq!(b.try_acquire(at(1_011)), Err(Error::CircuitOpen));
    b.record(p2, BreakerOutcome::Success, at(1_020));
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats().calls, 0, "it closes with a fresh window");
    let p = b.try_acquire(at(1_021)).expect("closed");
    assert!(!p.is_probe());
    b.record(p, BreakerOutcome::Failure, at(1_022));
    assert_eq!(b.state(), BreakerState::Closed, "one failure of two needed");
}

#[test]
fn a_failed_probe_reopens_it_for_a_new_cooldown() {
    let b = CircuitBreaker::new(consecutive(1));
    trip(&b, 1, at(0));
    let p1 = b.try_acquire(at(1_000)).expect("probe");
    let p2 = b.try_acquire(at(1_000)).expect("probe");
    b.record(p1, BreakerOutcome::Timeout, at(1_300));
    assert_eq!(b.state(), BreakerState::Open);
    // The other probe's late success belongs to the finished round: ignored.
    b.record(p2, BreakerOutcome::Success, at(1_301));
    assert_eq!(b.state(), BreakerState::Open);
    assert_eq!(b.try_acquire(at(2_299)), Err(Error::CircuitOpen));
    assert!(b.try_acquire(at(2_300)).is_ok_and(|p| p.is_probe()));
}

#[test]
fn an_abandoned_probe_frees_its_slot() {
    let b = CircuitBreaker::new(consecutive(1));
    trip(&b, 1, at(0));
    let p1 = b.try_acquire(at(1_000)).expect("probe");
    let p2 = b.try_acquire(at(1_000)).expect("probe");
    assert_eq!(b.try_acquire(at(1_000)), Err(Error::CircuitOpen));
    b.record(p1, BreakerOutcome::Abandoned, at(1_001));
    let p3 = b.try_acquire(at(1_002)).expect("the freed slot");
    assert_eq!(b.try_acquire(at(1_002)), Err(Error::CircuitOpen));
    b.record(p2, BreakerOutcome::Success, at(1_003));
    b.record(p3, BreakerOutcome::Success, at(1_004));
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn dropped_probes_hold_their_slots_until_the_probe_timeout_only() {
    let b = CircuitBreaker::new(consecutive(1)); // probe timeout 500 ms
    trip(&b, 1, at(0));
    let lost = b.try_acquire(at(1_000)).expect("probe");
    let late = b.try_acquire(at(1_000)).expect("probe");
    drop(lost);
    assert_eq!(b.try_acquire(at(1_499)), Err(Error::CircuitOpen));
    // The round is over: a new one starts, with fresh slots.
    let p1 = b.try_acquire(at(1_500)).expect("a new round");
    let p2 = b.try_acquire(at(1_500)).expect("a new round");
    assert_ne!(p1.generation(), late.generation());
    assert_eq!(b.try_acquire(at(1_501)), Err(Error::CircuitOpen));
    // A result of the old round arrives: ignored.
    b.record(late, BreakerOutcome::Failure, at(1_550));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    b.record(p1, BreakerOutcome::Success, at(1_600));
    b.record(p2, BreakerOutcome::Success, at(1_600));
    assert_eq!(b.state(), BreakerState::Closed);
}

/// A dependency with little traffic: fewer probes come in one probe timeout than the breaker
/// needs. The successes of a round that timed out still count in the next one, so the breaker
/// closes once enough probes have succeeded, however slowly they came; only the slots of
/// probes that never answered are lost with the round.
#[test]
fn probes_that_succeed_slower_than_one_per_probe_timeout_still_close_it() {
    let b = CircuitBreaker::new(consecutive(1)); // 2 probes, probe timeout 500 ms
    trip(&b, 1, at(0));
    // One success a round, each round over before the next probe comes.
    call(&b, at(1_000), BreakerOutcome::Success);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    call(&b, at(1_600), BreakerOutcome::Success);
    assert_eq!(b.state(), BreakerState::Closed);
}

/// The same with a probe lost in the round that timed out: its slot is freed, the success
/// beside it is kept.
#[test]
fn a_round_that_times_out_keeps_its_successes_and_frees_its_silent_slots() {
    let b = CircuitBreaker::new(consecutive(1).with_probes(3));
    trip(&b, 1, at(0));
    let silent = b.try_acquire(at(1_000)).expect("probe");
    call(&b, at(1_000), BreakerOutcome::Success);
    // Past the probe timeout: a new round with the one success and two free slots.
    call(&b, at(1_600), BreakerOutcome::Success);
    assert_eq!(b.state(), BreakerState::HalfOpen);
    // The silent probe of the old round answers: ignored.
    b.record(silent, BreakerOutcome::Success, at(1_650));
    assert_eq!(b.state(), BreakerState::HalfOpen);
    call(&b, at(1_700), BreakerOutcome::Success);
    assert_eq!(b.state(), BreakerState::Closed);
}

#[test]
fn results_of_an_earlier_closed_period_are_ignored() {
    let b = CircuitBreaker::new(consecutive(2));
    let slow = b.try_acquire(at(0)).expect("closed");
    trip(&b, 2, at(1));
    let probes = [b.try_acquire(at(1_001)), b.try_acquire(at(1_001))];
    for p in probes {
        b.record(p.expect("probe"), BreakerOutcome::Success, at(1_002));
    }
    assert_eq!(b.state(), BreakerState::Closed);
    call(&b, at(1_003), BreakerOutcome::Failure);
    // The slow call of the first closed period fails now: it must not complete a run of two.
    b.record(slow, BreakerOutcome::Failure, at(1_004));
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.window_stats().calls, 1);
}

#[test]
fn instants_before_the_trip_keep_it_open() {
    let b = CircuitBreaker::new(consecutive(1));
    trip(&b, 1, at(50_000));
    for t in [49_999, 40_000, 0] {
        assert_eq!(b.try_acquire(at(t)), Err(Error::CircuitOpen), "at {t} ms");
    }
    assert!(b.try_acquire(at(51_000)).is_ok());
}

#[test]
fn it_works_far_from_the_clock_origin() {
    // Deadlines are kept modulo 2^28 ms; a breaker used after that wraps behaves the same.
    for base in [(1u64 << 28) - 300, 1 << 40, u64::MAX / 1_000 - 5_000] {
        let b = CircuitBreaker::new(consecutive(1));
        trip(&b, 1, at(base));
        assert_eq!(
            b.try_acquire(at(base + 999)),
            Err(Error::CircuitOpen),
            "base {base}"
        );
        let probe = b.try_acquire(at(base + 1_000)).expect("cooldown over");
        b.record(probe, BreakerOutcome::Success, at(base + 1_001));
        assert_eq!(b.state(), BreakerState::HalfOpen);
    }
}

#[test]
fn out_of_range_settings_are_clamped() {
    let config = BreakerConfig::DEFAULT
        .with_consecutive_failures(1_000)
        .with_failure_percent(0)
        .with_window(1_000)
        .with_min_calls(0)
        .with_probes(0)
        .with_cooldown(std::time::Duration::MAX);
    let b = CircuitBreaker::new(config);
    // The window holds MAX_WINDOW outcomes, and the consecutive rule is capped at it.
    for i in 0..u64::from(BreakerConfig::MAX_WINDOW) - 1 {
        call(&b, at(i), BreakerOutcome::Failure);
    }
    assert_eq!(b.state(), BreakerState::Closed);
    call(&b, at(100), BreakerOutcome::Failure);
    assert_eq!(b.state(), BreakerState::Open);
    let max = u64::try_from(BreakerConfig::MAX_DURATION.as_millis()).unwrap();
    assert_eq!(b.try_acquire(at(100 + max - 1)), Err(Error::CircuitOpen));
    // Zero probes are read as one.
    assert!(b.try_acquire(at(100 + max)).is_ok());
    assert_eq!(b.try_acquire(at(100 + max)), Err(Error::CircuitOpen));
}

/// Many threads race for the probes of one half-open round: exactly `probes` get one.
#[test]
fn racing_threads_get_exactly_the_probes() {
    const THREADS: u32 = 4;
    for probes in [1u32, 3, 10] {
        let b = CircuitBreaker::new(consecutive(1).with_probes(probes));
        trip(&b, 1, at(0));
        let granted = AtomicU32::new(0);
        thread::scope(|s| {
            for _ in 0..THREADS {
                s.spawn(|| {
                    for _ in 0..1_000 {
                        if b.try_acquire(at(1_000)).is_ok() {
                            granted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(granted.into_inner(), probes);
    }
}

/// Many threads report failures at once under a closed breaker: it opens, once, and every
/// thread then sees it open.
#[test]
fn racing_failures_open_it_once() {
    const THREADS: usize = 4;
    let b = CircuitBreaker::new(consecutive(5));
    let refused = AtomicU32::new(0);
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..1_000 {
                    match b.try_acquire(at(10)) {
                        Ok(p) => b.record(p, BreakerOutcome::Failure, at(10)),
                        Err(_) => {
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    assert_eq!(b.state(), BreakerState::Open);
    assert!(refused.into_inner() > 0);
    // One cooldown from the trip, not from a later one.
    assert!(b.try_acquire(at(1_010)).is_ok_and(|p| p.is_probe()));
}
