//! Properties of the protections: the retry budget bounds retry amplification, a half-open
//! breaker admits no more than its probes, admission admits exactly what fits.

use std::collections::{BTreeSet, HashMap};

use deadline_core::breaker::{BreakerConfig, CircuitBreaker};
use deadline_core::breaker::{BreakerOutcome, Permit};
use deadline_core::budget::RetryBudget;
use deadline_core::wire::Admission;
use deadline_core::{Deadline, Error, Instant};
use proptest::prelude::*;

/// Sends `arrivals` (instants in microseconds, in the order given) to a dependency that always
/// fails; each request retries while its attempt cap and the budget allow. Returns all calls.
fn calls_against_a_dead_dependency(
    budget: &RetryBudget,
    arrivals: &[u64],
    max_attempts: u32,
) -> u64 {
    let mut calls = 0;
    for &t in arrivals {
        let now = Instant::from_micros(t);
        budget.deposit(now);
        calls += 1;
        let mut attempts = 1;
        while attempts < max_attempts && budget.try_withdraw(now) {
            calls += 1;
            attempts += 1;
        }
    }
    calls
}

/// Whole seconds of `t` microseconds.
fn second(t: u64) -> u64 {
    t / 1_000_000
}

proptest! {
    /// Against a dependency that always fails, with requests arriving at random instants (in
    /// any order: readings that go back count in the current window):
    /// `calls <= R + floor(R * percent / 100) + floor_per_sec * (last second - first second + 1)`.
    #[test]
    fn retry_amplification_is_bounded(
        arrivals in prop::collection::vec(0u64..30_000_000, 1..400),
        percent in 0u32..=300,
        floor in 0u32..=20,
        max_attempts in 1u32..=8,
        max_balance in prop::option::of(0u32..=50),
    ) {
        let mut budget = RetryBudget::percent(percent).with_floor_per_sec(floor);
        if let Some(cap) = max_balance {
            budget = budget.with_max_balance(cap);
        }
        let calls = calls_against_a_dead_dependency(&budget, &arrivals, max_attempts);
        let requests = arrivals.len() as u64;
        let first = second(*arrivals.iter().min().unwrap());
        let last = second(*arrivals.iter().max().unwrap());
        let bound = requests
            + requests * u64::from(percent) / 100
            + u64::from(floor) * (last - first + 1);
        prop_assert!(calls <= bound, "{calls} calls, bound {bound}");
        prop_assert!(calls <= requests * u64::from(max_attempts));
    }

    /// With instants in order and no attempt cap or balance cap, the bound is reached exactly:
    /// every deposit is spent, and every second with a request spends its floor.
    #[test]
    fn the_bound_is_tight_when_nothing_else_limits(
        mut arrivals in prop::collection::vec(0u64..30_000_000, 1..400),
        percent in 0u32..=300,
        floor in 0u32..=20,
    ) {
        arrivals.sort_unstable();
        let budget = RetryBudget::percent(percent).with_floor_per_sec(floor).with_max_balance(RetryBudget::MAX_BALANCE);
        let calls = calls_against_a_dead_dependency(&budget, &arrivals, u32::MAX);
        let requests = arrivals.len() as u64;
        let seconds = arrivals.iter().map(|&t| second(t)).collect::<BTreeSet<_>>().len() as u64;
        prop_assert_eq!(
            calls,
            requests + requests * u64::from(percent) / 100 + u64::from(floor) * seconds
        );
    }
}

/// One step of a breaker's life.
#[derive(Clone, Debug)]
enum Step {
    /// Time passes (ms).
    Advance(u64),
    /// A call asks for a permit.
    Acquire,
    /// The permit held at this index (modulo the number held) reports an outcome.
    Record(usize, u8),
    /// The permit held at this index is dropped without a result.
    Drop(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u64..1_500).prop_map(Step::Advance),
        Just(Step::Acquire),
        Just(Step::Acquire),
        (any::<usize>(), 0u8..4).prop_map(|(i, o)| Step::Record(i, o)),
        any::<usize>().prop_map(Step::Drop),
    ]
}

fn outcome(o: u8) -> BreakerOutcome {
    match o {
        0 => BreakerOutcome::Success,
        1 => BreakerOutcome::Failure,
        2 => BreakerOutcome::Timeout,
        _ => BreakerOutcome::Abandoned,
    }
}

proptest! {
    /// In random sequences of acquires, results, drops and time steps, a half-open round never
    /// has more than `probes` probes out (granted minus abandoned), and an open breaker admits
    /// nothing before its cooldown is over.
    #[test]
    fn a_half_open_breaker_never_admits_more_than_its_probes(
        steps in prop::collection::vec(step(), 1..300),
        probes in 1u32..=4,
        threshold in 1u32..=4,
        cooldown_ms in 1u64..2_000,
        probe_timeout_ms in 1u64..2_000,
    ) {
        let config = BreakerConfig::DEFAULT
            .with_consecutive_failures(threshold)
            .with_cooldown(std::time::Duration::from_millis(cooldown_ms))
            .with_probes(probes)
            .with_probe_timeout(std::time::Duration::from_millis(probe_timeout_ms));
        let b = CircuitBreaker::new(config);
        let mut now = 1_000_000u64; // ms
        let mut held: Vec<Permit> = Vec::new();
        // Per generation: probes granted minus probes handed back as abandoned.
        let mut out: HashMap<u32, i64> = HashMap::new();
        // When the breaker last opened (the ms of the failure that opened it).
        let mut opened_at: Option<u64> = None;
        for s in steps {
            match s {
                Step::Advance(d) => now += d,
                Step::Acquire => {
                    let was = b.state();
                    match b.try_acquire(Instant::from_millis(now)) {
                        Ok(p) => {
                            if was == deadline_core::breaker::BreakerState::Open {
                                let opened = opened_at.expect("opened by a recorded failure");
                                prop_assert!(now >= opened + cooldown_ms, "probe before the cooldown");
                            }
                            if p.is_probe() {
                                let n = out.entry(p.generation()).or_default();
                                *n += 1;
                                prop_assert!(*n <= i64::from(probes), "{} probes out", n);
                            }
                            held.push(p);
                        }
                        Err(e) => prop_assert_eq!(e, Error::CircuitOpen),
                    }
                }
                Step::Record(i, o) if !held.is_empty() => {
                    let p = held.remove(i % held.len());
                    let (generation, probe) = (p.generation(), p.is_probe());
                    let o = outcome(o);
                    let was = b.state();
                    b.record(p, o, Instant::from_millis(now));
                    if probe && o == BreakerOutcome::Abandoned {
                        if let Some(n) = out.get_mut(&generation) {
                            *n -= 1;
                        }
                    }
                    if was != deadline_core::breaker::BreakerState::Open
                        && b.state() == deadline_core::breaker::BreakerState::Open
                    {
                        prop_assert!(o.is_failure(), "only a failure opens it");
                        opened_at = Some(now);
                    }
                }
                Step::Drop(i) if !held.is_empty() => {
                    drop(held.remove(i % held.len()));
                }
                Step::Record(..) | Step::Drop(_) => {}
            }
        }
    }

    /// Admitted exactly when the deadline has not passed and the time left covers the need;
    /// never panics, whatever the instants.
    #[test]
    fn admitted_iff_the_time_left_covers_the_need(
        deadline in any::<u64>(),
        now in any::<u64>(),
        need in any::<u64>(),
        enqueued in any::<u64>(),
        max_queue in prop::option::of(any::<u64>()),
    ) {
        let need = std::time::Duration::from_micros(need);
        let admission = Admission::new(need);
        let d = Deadline::at(Instant::from_micros(deadline));
        let now_i = Instant::from_micros(now);
        let left = deadline.saturating_sub(now);
        let fits = left > 0 && u128::from(left) * 1_000 >= need.as_nanos();
        match admission.admit(d, now_i) {
            Ok(remaining) => {
                prop_assert!(fits);
                prop_assert_eq!(remaining, std::time::Duration::from_micros(left));
            }
            Err(e) => {
                prop_assert!(!fits);
                // Expired: the deadline's; some time left but too little: shed.
                let why = if left == 0 { Error::DeadlineExceeded } else { Error::Shed };
                prop_assert_eq!(e, why);
            }
        }
        if let Some(max) = max_queue {
            let queued = admission.with_max_queue_delay(std::time::Duration::from_micros(max));
            let waited = now.saturating_sub(enqueued);
            let queued = queued.admit_queued(d, Instant::from_micros(enqueued), now_i);
            prop_assert_eq!(queued.is_ok(), fits && waited <= max);
            // Expired: the deadline's, however long it waited.
            if left == 0 {
                prop_assert_eq!(queued, Err(Error::DeadlineExceeded));
            }
        }
    }
}
