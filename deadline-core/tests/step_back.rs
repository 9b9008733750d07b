//! A clock that steps back counts as no time passed: a deadline set with
//! [`Deadline::after`] remembers its start, so the time left never exceeds the budget, however
//! far before the arrival the clock reads, and no timeout armed from it does either.

use std::time::Duration;

use deadline_core::call::{Decision, call_timeout};
use deadline_core::{Deadline, Instant, Policy, ms};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(0x5eed_57e9),
        ..ProptestConfig::default()
    }
}

fn instant() -> impl Strategy<Value = Instant> {
    prop_oneof![
        Just(Instant::ZERO),
        (0u64..10_000_000).prop_map(Instant::from_micros),
        any::<u64>().prop_map(Instant::from_micros),
        Just(Instant::MAX),
    ]
}

fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..10_000_000).prop_map(Duration::from_micros),
        any::<u64>().prop_map(Duration::from_micros),
        Just(Duration::MAX),
    ]
}

#[test]
fn the_reported_case_a_clock_600_ms_before_arrival() {
    // Arrival at 10 s with 750 ms; the clock then reads 600 ms before the arrival.
    let arrival = Instant::from_millis(10_000);
    let deadline = Deadline::after(arrival, ms(750));
    let before = Instant::from_millis(9_400);
    assert_eq!(deadline.remaining(before), ms(750));
    assert!(!deadline.is_expired(before));
    let policy = Policy::required("pricing")
        .with_cap(ms(5_000))
        .with_floor(ms(10));
    let armed = call_timeout(&policy, deadline, ms(30), before).timeout();
    assert_eq!(armed, Some(ms(720)));
    // Time that really passes still counts.
    assert_eq!(deadline.remaining(Instant::from_millis(10_115)), ms(635));
}

#[test]
fn a_deadline_at_an_instant_has_no_known_start() {
    let deadline = Deadline::at(Instant::from_millis(750));
    assert_eq!(deadline.remaining(Instant::ZERO), ms(750));
    assert_eq!(deadline.remaining(Instant::from_millis(700)), ms(50));
}

#[test]
fn min_keeps_the_earlier_instant_and_the_later_start() {
    // The later start is the better lower bound on the real time.
    let early_start = Deadline::after(Instant::from_millis(0), ms(300)); // ends at 300
    let late_start = Deadline::after(Instant::from_millis(200), ms(400)); // ends at 600
    let both = early_start.min(late_start);
    assert_eq!(both.instant(), Instant::from_millis(300));
    assert_eq!(both, late_start.min(early_start));
    // Read at 0 ms, but the second request is known to have arrived at 200 ms: 100 ms left.
    assert_eq!(both.remaining(Instant::ZERO), ms(100));
    assert_eq!(
        late_start.min(early_start).remaining(Instant::ZERO),
        ms(100)
    );
}

#[test]
fn equality_and_ordering_are_the_instant_s() {
    let a = Deadline::after(Instant::from_millis(100), ms(100));
    let b = Deadline::at(Instant::from_millis(200));
    assert_eq!(a, b);
    assert_eq!(a.cmp(&b), core::cmp::Ordering::Equal);
    assert!(Deadline::at(Instant::from_millis(199)) < a);
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_time_left_never_exceeds_the_budget(
        arrival in instant(),
        budget in duration(),
        now in instant(),
        timeout in duration(),
        later in instant(),
        allowance in duration(),
    ) {
        let deadline = Deadline::after(arrival, budget);
        prop_assert!(deadline.remaining(now) <= budget);
        prop_assert_eq!(deadline.is_expired(now), deadline.remaining(now).is_zero());
        // Before the arrival, no time has passed.
        if now <= arrival {
            prop_assert_eq!(deadline.remaining(now), deadline.remaining(arrival));
        }
        // Derived deadlines keep the bound.
        prop_assert!(deadline.child(timeout, later).remaining(now) <= budget);
        prop_assert!(deadline.child(timeout, later).remaining(now) <= timeout);
        prop_assert!(deadline.shortened_by(allowance).remaining(now) <= budget);
        let other = Deadline::after(later, timeout);
        prop_assert!(deadline.min(other).remaining(now) <= budget);
        prop_assert!(deadline.min(other).remaining(now) <= timeout);
        prop_assert!(other.min(deadline).remaining(now) <= budget);
    }

    #[test]
    fn no_armed_timeout_exceeds_the_budget(
        arrival in instant(),
        budget in duration(),
        now in instant(),
        reserve in duration(),
        cap in duration(),
    ) {
        let deadline = Deadline::after(arrival, budget);
        let policy = Policy::required("dependency").with_cap(cap).with_floor(Duration::ZERO);
        if let Decision::Call(limits) = call_timeout(&policy, deadline, reserve, now) {
            prop_assert!(limits.timeout() <= budget);
            prop_assert!(limits.timeout() <= budget.saturating_sub(reserve));
            prop_assert!(limits.connect() <= limits.timeout());
            prop_assert!(limits.deadline().remaining(now) <= limits.timeout());
            prop_assert!(limits.deadline().remaining(Instant::ZERO) <= limits.timeout());
        }
    }
}
