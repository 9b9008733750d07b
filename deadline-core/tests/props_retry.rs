//! Property tests of the retry decision, driven through whole calls on a simulated clock:
//! no attempt starts after the deadline, attempts never exceed the cap, no backoff ends after
//! the deadline, every retry's timeout is at least the floor and at most the time left less
//! the reserve, jitter stays within its formula's bounds, a non-idempotent call that may have
//! run is never retried unless allowed, and retries stay within the budget.

use std::time::Duration;

use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, Decision, GiveUp, RetryDecision, RetryState};
use deadline_core::policy::{Backoff, Idempotence, Jitter};
use deadline_core::rng::SplitMix64;
use deadline_core::{Deadline, Instant, Outcome, Policy, Pushback, ms};
use proptest::prelude::*;

const JITTERS: [Jitter; 5] = [
    Jitter::None,
    Jitter::Full,
    Jitter::Equal,
    Jitter::Decorrelated,
    Jitter::Grpc,
];

fn outcome(k: u8, pushback_ms: u64) -> Outcome {
    match k % 7 {
        0 => Outcome::TimedOut,
        1 => Outcome::Refused,
        2 => Outcome::Failed,
        3 => Outcome::Pushback(Pushback::After(ms(pushback_ms))),
        4 => Outcome::Pushback(Pushback::DontRetry),
        5 => Outcome::Broken,
        _ => Outcome::Fatal,
    }
}

/// What one simulated call did.
#[derive(Debug, Default)]
struct Trace {
    /// (start, timeout) of each attempt.
    attempts: Vec<(Instant, Duration)>,
    /// (decided at, backoff end, outcome that led to it) of each retry.
    retries: Vec<(Instant, Instant, Outcome)>,
    gave_up: Option<(Outcome, GiveUp)>,
}

/// Runs one call: each attempt ends after its latency with its outcome, or times out at its
/// `until` (a timed-out attempt's outcome is `TimedOut`); after each failure the retry
/// decision says when to try again.
fn simulate(
    call: &Call<'_>,
    start: Instant,
    steps: &[(u64, u8)],
    pushback_ms: u64,
    seed: u64,
) -> Trace {
    let mut trace = Trace::default();
    let Decision::Call(mut limits) = call.decide(start) else {
        return trace;
    };
    let mut now = start;
    let mut state = RetryState::new();
    let mut rng = SplitMix64::new(seed);
    for i in 0.. {
        trace.attempts.push((now, limits.timeout()));
        let (latency, k) = steps[i % steps.len()];
        let ended = now + ms(latency);
        let (failed_at, out) = if ended >= limits.until() {
            (limits.until(), Outcome::TimedOut)
        } else {
            (ended, outcome(k, pushback_ms))
        };
        match state.decide(call, out, &mut rng, failed_at) {
            RetryDecision::Retry(r) => {
                trace.retries.push((failed_at, r.at, out));
                now = r.at;
                limits = r.limits;
            }
            RetryDecision::GiveUp(g) => {
                trace.gave_up = Some((out, g));
                break;
            }
        }
    }
    trace
}

fn policy_strategy() -> impl Strategy<Value = Policy<'static>> {
    (
        1u64..1_000,
        0u64..400,
        0u32..7,
        0u64..300,
        0usize..5,
        any::<bool>(),
    )
        .prop_map(|(cap, floor, attempts, base, jitter, idempotent)| {
            Policy::required("X")
                .with_cap(ms(cap))
                .with_floor(ms(floor))
                .with_idempotence(if idempotent {
                    Idempotence::Idempotent
                } else {
                    Idempotence::NotIdempotent
                })
                .with_retries(attempts.saturating_sub(1))
                .with_backoff(
                    Backoff::exponential(ms(base))
                        .with_max(ms(base * 10))
                        .with_jitter(JITTERS[jitter]),
                )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn retries_respect_the_deadline_the_cap_and_the_floor(
        policy in policy_strategy(),
        budget_ms in 0u64..3_000,
        reserve_ms in 0u64..500,
        start_ms in 0u64..100,
        steps in proptest::collection::vec((0u64..1_500, any::<u8>()), 1..10),
        pushback_ms in 0u64..800,
        seed in any::<u64>(),
    ) {
        let deadline = Deadline::after(Instant::ZERO, ms(budget_ms));
        let reserve = ms(reserve_ms);
        let call = Call::new(&policy, deadline, reserve);
        let trace = simulate(&call, Instant::from_millis(start_ms), &steps, pushback_ms, seed);

        // Attempts never exceed the cap.
        prop_assert!(trace.attempts.len() as u32 <= policy.retry().attempts());
        for &(start, timeout) in &trace.attempts {
            // No attempt starts at or after the deadline.
            prop_assert!(!deadline.is_expired(start));
            // Every timeout, the first's and each retry's: >= floor, <= left - reserve.
            prop_assert!(timeout >= policy.floor());
            prop_assert!(timeout <= deadline.remaining(start).saturating_sub(reserve));
            prop_assert!(timeout <= policy.cap());
        }
        for &(decided, at, out) in &trace.retries {
            // No backoff ends after the deadline.
            prop_assert!(at < deadline.instant());
            prop_assert!(at >= decided);
            // A pushback is honoured: the wait is at least what the server asked.
            if let Outcome::Pushback(Pushback::After(d)) = out {
                prop_assert!(at - decided >= d);
            }
            // A non-idempotent call that may have run is never retried.
            if !policy.is_idempotent() {
                prop_assert!(!matches!(out, Outcome::TimedOut | Outcome::Failed));
            }
            prop_assert!(!matches!(
                out,
                Outcome::Fatal | Outcome::Broken | Outcome::Pushback(Pushback::DontRetry)
            ));
        }
        if let Some((out, reason)) = trace.gave_up {
            if !policy.is_idempotent() && matches!(out, Outcome::TimedOut | Outcome::Failed)
            {
                prop_assert_eq!(reason, GiveUp::MayHaveRun);
            }
        }
    }

    #[test]
    fn jitter_stays_within_its_formula(
        base_us in 0u64..10_000_000,
        max_us in 0u64..100_000_000,
        n in 0u32..22,
        previous_us in 0u64..100_000_000,
        jitter in 0usize..5,
        ratio in 0usize..4,
        seed in any::<u64>(),
    ) {
        // 2 (AWS), 1.6 (gRPC), 1.5, 1: all exact for n <= 21 (see `Backoff::ceiling`).
        let (num, den) = [(2, 1), (8, 5), (3, 2), (1, 1)][ratio];
        let jitter = JITTERS[jitter];
        let b = Backoff::exponential(Duration::from_micros(base_us))
            .with_max(Duration::from_micros(max_us))
            .with_jitter(jitter)
            .with_multiplier(num, den);
        let d = b.delay(n, Duration::from_micros(previous_us), &mut SplitMix64::new(seed));
        let d = d.as_micros();

        // The reference, computed here in u128 with the ratio as given (not reduced).
        let (num, den) = if num > den { (u128::from(num), u128::from(den)) } else { (1, 1) };
        let (base, max) = (u128::from(base_us), u128::from(max_us));
        let (mut p, mut q) = (1u128, 1u128);
        for _ in 0..n {
            p *= num;
            q *= den;
        }
        let t = (base * p / q).min(max);
        let (lo, hi) = match jitter {
            Jitter::None => (t, t),
            Jitter::Full => (0, t),
            Jitter::Equal => (t / 2, t),
            Jitter::Decorrelated => {
                let prev = if previous_us == 0 { base } else { u128::from(previous_us) };
                (base.min(max), (prev * 3).max(base).min(max))
            }
            _ => (t * 4 / 5, t * 6 / 5),
        };
        prop_assert!(lo <= d && d <= hi, "{:?}: {} not in [{}, {}]", jitter, d, lo, hi);
    }

    /// Against a dependency that always fails, the retries granted to many requests stay
    /// within the budget: calls <= requests x (1 + percent) + floor x (seconds + 1).
    #[test]
    fn retry_amplification_is_bounded_by_the_budget(
        requests in 1usize..300,
        percent in 0u32..50,
        floor_per_sec in 0u32..5,
        gap_ms in 0u64..50,
        attempts in 1u32..6,
    ) {
        let policy = Policy::required("X").idempotent().with_cap(ms(100)).with_floor(ms(1))
            .with_retries(attempts - 1).with_backoff(Backoff::constant(ms(1)));
        let budget = RetryBudget::percent(percent).with_floor_per_sec(floor_per_sec);
        let mut rng = SplitMix64::new(7);
        let mut calls = 0u64;
        let mut last = Instant::ZERO;
        for i in 0..requests {
            let start = Instant::from_millis(i as u64 * gap_ms);
            let call = Call::new(&policy, Deadline::after(start, ms(1_000)), ms(0)).with_budget(&budget);
            call.deposit(start);
            calls += 1;
            let mut state = RetryState::new();
            let mut now = start + ms(2);
            while let RetryDecision::Retry(r) = state.decide(&call, Outcome::Failed, &mut rng, now) {
                calls += 1;
                now = r.at + ms(2);
            }
            last = last.max(now);
        }
        let seconds = last.as_millis() / 1_000 + 1;
        let bound = requests as u64
            + requests as u64 * u64::from(percent) / 100
            + u64::from(floor_per_sec) * seconds;
        prop_assert!(calls <= bound, "{} calls > bound {}", calls, bound);
        prop_assert!(calls <= requests as u64 * u64::from(attempts));
    }
}
