//! The sans-IO machine's waits, driven through whole calls on a simulated clock: every
//! `Action::Wait` names the same instant as `poll_timeout` (a driver may sleep on either),
//! that instant is after the clock's reading (so a driver that sleeps until it never spins),
//! and every call ends. Calls with retries, backoff, hedges, a retry budget and a breaker, and
//! deadline-only ones, with attempts that answer, fail or outlive their timeout.
#![cfg(feature = "drive")]

use deadline_core::breaker::{BreakerConfig, CircuitBreaker};
use deadline_core::budget::RetryBudget;
use deadline_core::call::Call;
use deadline_core::drive::{Action, CallMachine, Mode, NoObserver};
use deadline_core::policy::{Backoff, HedgePolicy, Jitter};
use deadline_core::rng::SplitMix64;
use deadline_core::{Deadline, Instant, Outcome, Policy, ms};
use proptest::prelude::*;

/// The most steps one call may take: far more than any call here needs (at most 4 attempts
/// and their hedges, a handful of steps apiece). A call still going after it never ends.
const MAX_STEPS: usize = 1_000;

/// How one attempt goes: its latency, and whether it answers (0), fails (1) or is refused (2).
type Script = (u64, u8);

/// Runs `machine` to its end at `start`, each attempt going as the next entry of `script`
/// says (cycling); checks every wait, and returns how many attempts started.
fn run_checking_waits<M: Mode>(
    mut machine: CallMachine<'_, &'static str, M>,
    start: Instant,
    script: &[Script],
    seed: u64,
) -> Result<usize, TestCaseError> {
    let mut rng = SplitMix64::new(seed);
    let mut observer = NoObserver;
    let mut now = start;
    // What each slot's attempt does: when it ends, and how.
    let mut running: [Option<(Instant, u8)>; 4] = [None; 4];
    let mut started = 0usize;
    // What `poll_timeout` said once an attempt ended, before the machine was polled again.
    let mut promised: Option<Option<Instant>> = None;
    for _ in 0..MAX_STEPS {
        let action = machine.poll(now, &mut rng, &mut observer);
        // A driver that sleeps until `poll_timeout` misses nothing: when it names an instant,
        // a poll now only waits until then ("none" is a poll at once).
        if let Some(Some(at)) = promised.take() {
            prop_assert_eq!(
                action,
                Action::Wait { until: at },
                "poll_timeout named {:?} after an attempt ended at {:?}",
                at,
                now
            );
        }
        match action {
            Action::Start { slot, .. } => {
                let (latency, how) = script[started % script.len()];
                started += 1;
                prop_assert!(slot < running.len(), "slot {slot} past the room");
                running[slot] = Some((now + ms(latency), how));
            }
            Action::Cancel { slot } => running[slot] = None,
            Action::Wait { until } => {
                prop_assert_eq!(machine.poll_timeout(), Some(until));
                prop_assert!(until > now, "a wait until {until:?} at {now:?} would spin");
                // The first attempt to end before `until` ends; else the clock reaches it.
                let first = running
                    .iter()
                    .enumerate()
                    .filter_map(|(slot, r)| r.map(|(end, how)| (end, slot, how)))
                    .filter(|&(end, _, _)| end < until)
                    .min();
                match first {
                    Some((end, slot, how)) => {
                        now = end;
                        running[slot] = None;
                        match how {
                            0 => machine.succeeded(slot, now, &mut observer),
                            1 => machine.failed(slot, "503", Outcome::Failed, now, &mut observer),
                            _ => machine.failed(
                                slot,
                                "refused",
                                Outcome::Refused,
                                now,
                                &mut observer,
                            ),
                        }
                        promised = Some(machine.poll_timeout());
                    }
                    None => now = until,
                }
            }
            Action::Done => {
                let called = machine.finish(Some("answer"), now);
                prop_assert!(called.report.ended >= start);
                return Ok(started);
            }
        }
    }
    Err(TestCaseError::fail(format!(
        "the call did not end in {MAX_STEPS} steps"
    )))
}

/// A backoff of nothing (a constant zero, or full jitter drawing zero): the retry starts at
/// the failure's instant, with no wait that has already ended (a driver would arm a timer
/// for it and wake at once).
#[test]
fn a_backoff_of_nothing_starts_the_retry_at_once() {
    let policy = Policy::required("B")
        .idempotent()
        .with_cap(ms(7))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(0)));
    let start = Instant::from_millis(1_000);
    let call = Call::new(&policy, Deadline::after(start, ms(50)), ms(0));
    // Every attempt fails at once: three attempts, all at `start`, and no wait among them.
    let started = run_checking_waits(CallMachine::new(call), start, &[(0, 1)], 1).unwrap();
    assert_eq!(started, 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_wait_is_the_poll_timeout_and_after_now(
        budget_ms in 1u64..1_500,
        cap_ms in 1u64..500,
        floor_ms in 0u64..40,
        reserve_ms in 0u64..30,
        retries in 0u32..4,
        backoff_ms in 1u64..80,
        hedge_ms in 1u64..120,
        max_hedges in 0u32..3,
        floor_per_sec in 0u32..20,
        script in prop::collection::vec((0u64..600, 0u8..3), 1..8),
        seed in any::<u64>(),
    ) {
        let policy = Policy::required("B")
            .idempotent()
            .with_cap(ms(cap_ms))
            .with_floor(ms(floor_ms))
            .with_retries(retries)
            .with_backoff(Backoff::exponential(ms(backoff_ms)).with_jitter(Jitter::Full))
            .with_hedge(HedgePolicy::new(ms(hedge_ms), max_hedges));
        let budget = RetryBudget::percent(10).with_floor_per_sec(floor_per_sec);
        let breaker = CircuitBreaker::new(BreakerConfig::DEFAULT);
        let start = Instant::from_millis(1_000);
        let deadline = Deadline::after(start, ms(budget_ms));
        let call = Call::new(&policy, deadline, ms(reserve_ms))
            .with_budget(&budget)
            .with_breaker(&breaker);

        run_checking_waits(CallMachine::new(call), start, &script, seed)?;
        let only = run_checking_waits(CallMachine::deadline_only(call), start, &script, seed)?;
        prop_assert!(only <= 1);
    }
}

/// An attempt that failed leaves its retry to be decided: `poll_timeout` says to poll at
/// once, not the deadline (a driver that slept until then would give up there, unretried).
#[test]
fn a_failed_attempt_asks_for_a_poll_at_once() {
    let policy = Policy::required("B")
        .idempotent()
        .with_cap(ms(50))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(10)));
    let start = Instant::ZERO;
    let call = Call::new(&policy, Deadline::after(start, ms(200)), ms(0));
    let mut rng = SplitMix64::new(1);
    let at = Instant::from_millis;
    let mut full: CallMachine<'_, &str> = CallMachine::new(call);
    let mut only: CallMachine<'_, &str, deadline_core::drive::DeadlineOnly> =
        CallMachine::deadline_only(call);
    assert!(matches!(
        full.poll(at(0), &mut rng, &mut NoObserver),
        Action::Start { slot: 0, .. }
    ));
    assert!(matches!(
        only.poll(at(0), &mut rng, &mut NoObserver),
        Action::Start { slot: 0, .. }
    ));
    full.failed(0, "503", Outcome::Failed, at(20), &mut NoObserver);
    only.failed(0, "503", Outcome::Failed, at(20), &mut NoObserver);
    assert_eq!(full.poll_timeout(), None);
    assert_eq!(only.poll_timeout(), None);
    // Polled, the full call backs off until 30 and says so; the deadline-only one is over.
    assert_eq!(
        full.poll(at(20), &mut rng, &mut NoObserver),
        Action::Wait { until: at(30) }
    );
    assert_eq!(full.poll_timeout(), Some(at(30)));
    assert_eq!(only.poll(at(20), &mut rng, &mut NoObserver), Action::Done);
}

/// A server's "retry after" that ends the backoff where it already ends moves nothing, and
/// says nothing: one `Backoff` event for the one backoff. (It was said again.)
#[test]
fn a_pushback_that_moves_no_backoff_makes_no_event() {
    use deadline_core::Pushback;
    use deadline_core::drive::{EventKind, Observe};

    let policy = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(50)))
        .with_hedge(HedgePolicy::new(ms(10), 1));
    let start = Instant::ZERO;
    let call = Call::new(&policy, Deadline::after(start, ms(400)), ms(0));
    let mut machine: CallMachine<'_, &str> = CallMachine::new(call);
    let mut rng = SplitMix64::new(1);
    let mut backoffs = Vec::new();
    let mut observer = Observe(|event: &deadline_core::drive::Event| {
        if let EventKind::Backoff { until, .. } = event.kind {
            backoffs.push(until);
        }
    });
    let at = Instant::from_millis;
    // The first copy at 0, its hedge at 10.
    assert!(matches!(
        machine.poll(at(0), &mut rng, &mut observer),
        Action::Start { slot: 0, .. }
    ));
    assert!(matches!(
        machine.poll(at(0), &mut rng, &mut observer),
        Action::Wait { .. }
    ));
    assert!(matches!(
        machine.poll(at(10), &mut rng, &mut observer),
        Action::Start { slot: 1, .. }
    ));
    // The hedge fails at 20: a retry after the 50 ms backoff, at 70.
    machine.failed(1, "503", Outcome::Failed, at(20), &mut observer);
    assert_eq!(
        machine.poll(at(20), &mut rng, &mut observer),
        Action::Wait { until: at(70) }
    );
    // The first copy says "retry after 40 ms" at 30: at 70 too.
    let wait = Outcome::Pushback(Pushback::After(ms(40)));
    machine.failed(0, "429", wait, at(30), &mut observer);
    assert_eq!(
        machine.poll(at(30), &mut rng, &mut observer),
        Action::Wait { until: at(70) }
    );
    assert_eq!(backoffs, [at(70)]);
}
