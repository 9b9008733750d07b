//! Properties of the call-timeout decision and of `Plan`, over random policies, random chains
//! of sequential and parallel steps, random deadlines and random clock steps (including a
//! clock that steps back, zero and huge budgets, and instants near the end of time).
//!
//! Each decision is checked against an oracle written here in `u128` nanoseconds, apart from
//! the library's saturating `Duration` arithmetic.

use std::collections::BTreeMap;
use std::time::Duration;

use deadline_core::call::{Decision, call_timeout};
use deadline_core::plan::{Plan, PlanFull};
use deadline_core::policy::Necessity;
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Deadline, Error, Instant, Policy};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

/// The plans under test hold at most this many steps.
const CAPACITY: usize = 8;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 1024,
        rng_seed: RngSeed::Fixed(0x5eed_b0d6),
        ..ProptestConfig::default()
    }
}

/// Durations from zero to `Duration::MAX`, weighted towards the milliseconds that matter.
fn duration() -> impl Strategy<Value = Duration> {
    prop_oneof![
        Just(Duration::ZERO),
        (0u64..2_000_000).prop_map(Duration::from_micros),
        (0u64..2_000_000_000).prop_map(Duration::from_nanos),
        any::<u64>().prop_map(Duration::from_micros),
        (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
        Just(Duration::MAX),
    ]
}

/// Instants near the origin, anywhere, and near the end of time.
fn instant() -> impl Strategy<Value = Instant> {
    prop_oneof![
        (0u64..5_000_000).prop_map(Instant::from_micros),
        any::<u64>().prop_map(Instant::from_micros),
        (0u64..5_000_000).prop_map(|back| Instant::from_micros(u64::MAX - back)),
        Just(Instant::MAX),
    ]
}

/// A clock step in microseconds: forward, none, or back.
fn clock_step() -> impl Strategy<Value = i128> {
    prop_oneof![
        (0i128..500_000),
        (-500_000i128..0),
        Just(0i128),
        any::<u64>().prop_map(i128::from),
        any::<u64>().prop_map(|b| -i128::from(b)),
    ]
}

fn policy() -> impl Strategy<Value = Policy<'static>> {
    (
        duration(),
        duration(),
        any::<bool>(),
        prop_oneof![Just(Duration::MAX), duration()],
    )
        .prop_map(|(cap, floor, required, connect)| {
            let necessity = if required {
                Necessity::Required
            } else {
                Necessity::Optional
            };
            Policy::required("dep")
                .with_cap(cap)
                .with_floor(floor)
                .with_necessity(necessity)
                .with_connect(connect)
        })
}

/// A chain of steps: each is a policy and whether it runs alongside the step before it.
/// Sometimes longer than the plan's capacity, to reach `PlanFull`.
fn chain() -> impl Strategy<Value = Vec<(Policy<'static>, bool)>> {
    proptest::collection::vec((policy(), any::<bool>()), 0..CAPACITY + 3)
}

fn nanos(d: Duration) -> u128 {
    d.as_nanos()
}

/// The instant `now` moved by `step` microseconds, clamped to the representable range.
fn moved(now: Instant, step: i128) -> Instant {
    let micros = (i128::from(now.as_micros()) + step).clamp(0, i128::from(u64::MAX));
    Instant::from_micros(u64::try_from(micros).unwrap())
}

/// The oracle for one decision: `min(left - reserve, cap)` in nanoseconds, the reserve rounded
/// up to whole microseconds (the core's unit), and whether it is a call (positive and at
/// least the floor).
fn oracle_available(policy: &Policy, deadline: Deadline, now: Instant, reserve: u128) -> u128 {
    let reserve = reserve.div_ceil(1_000) * 1_000;
    let left_micros = deadline
        .instant()
        .as_micros()
        .saturating_sub(now.as_micros());
    let left = u128::from(left_micros) * 1_000;
    left.saturating_sub(reserve).min(nanos(policy.cap()))
}

/// Checks one decision against the oracle and the guarantees of `call_timeout`.
fn check_decision(
    decision: Decision,
    policy: &Policy,
    deadline: Deadline,
    now: Instant,
    reserve: u128,
) -> Result<(), TestCaseError> {
    let available = oracle_available(policy, deadline, now, reserve);
    let fits = available > 0 && available >= nanos(policy.floor());
    match decision {
        Decision::Call(limits) => {
            prop_assert!(fits, "called with {available} ns available");
            let t = nanos(limits.timeout());
            prop_assert_eq!(t, available);
            prop_assert!(t > 0);
            prop_assert!(t <= nanos(policy.cap()));
            prop_assert!(t >= nanos(policy.floor()));
            let left = u128::from(
                deadline
                    .instant()
                    .as_micros()
                    .saturating_sub(now.as_micros()),
            ) * 1_000;
            prop_assert!(t <= left.saturating_sub(reserve));
            prop_assert!(limits.connect() <= limits.timeout());
            prop_assert!(limits.connect() <= policy.connect());
            prop_assert!(limits.until() <= deadline.instant());
            prop_assert!(limits.until() >= now);
            prop_assert!(limits.deadline() <= deadline);
            prop_assert!(decision.is_call());
            prop_assert_eq!(decision.timeout(), Some(limits.timeout()));
        }
        Decision::Skip(shortfall) | Decision::Fail(shortfall) => {
            prop_assert!(!fits, "not called with {available} ns available");
            prop_assert_eq!(nanos(shortfall.available()), available);
            prop_assert_eq!(shortfall.floor(), policy.floor());
            prop_assert_eq!(
                matches!(decision, Decision::Fail(_)),
                policy.is_required(),
                "a required step fails, an optional one is skipped"
            );
            // Deadline exceeded only when no time is left at all; time left but all of it
            // reserved is insufficient time.
            let left_micros = deadline
                .instant()
                .as_micros()
                .saturating_sub(now.as_micros());
            prop_assert_eq!(shortfall.left().as_micros(), u128::from(left_micros));
            let expected = if left_micros == 0 {
                Error::DeadlineExceeded
            } else {
                Error::InsufficientTime {
                    available: shortfall.available(),
                    floor: policy.floor(),
                }
            };
            prop_assert_eq!(shortfall.error(), expected);
            prop_assert!(!decision.is_call());
            prop_assert_eq!(decision.timeout(), None);
            prop_assert_eq!(decision.limits(), None);
        }
    }
    Ok(())
}

/// The groups of a chain, computed apart from `Plan`: a step added with `alongside` joins the
/// group of the step before it (or group 0 if it is first); any other step starts a new one.
fn oracle_groups(chain: &[(Policy<'static>, bool)]) -> Vec<usize> {
    let mut groups: Vec<usize> = Vec::with_capacity(chain.len());
    for &(_, alongside) in chain {
        let group = match (groups.last(), alongside) {
            (None, _) => 0,
            (Some(&g), true) => g,
            (Some(&g), false) => g + 1,
        };
        groups.push(group);
    }
    groups
}

/// `Plan::reserve`, computed apart: own work plus, for each later group, the largest floor of
/// its required steps (optional steps reserve nothing). Saturates like `Duration`.
fn oracle_reserve(chain: &[(Policy<'static>, bool)], own_work: Duration, step: usize) -> u128 {
    let groups = oracle_groups(chain);
    let mut floors: BTreeMap<usize, u128> = BTreeMap::new();
    for (i, (policy, _)) in chain.iter().enumerate() {
        if groups[i] > groups[step] && policy.is_required() {
            let entry = floors.entry(groups[i]).or_insert(0);
            *entry = (*entry).max(nanos(policy.floor()));
        }
    }
    let total = nanos(own_work) + floors.values().sum::<u128>();
    total.min(nanos(Duration::MAX))
}

/// `Plan::critical_path`, computed apart: for each group from the one holding `from`, the
/// largest `f` among its steps, summed. Saturates like `Duration`.
fn oracle_path(
    chain: &[(Policy<'static>, bool)],
    from: usize,
    f: impl Fn(usize, &Policy) -> u128,
) -> u128 {
    let groups = oracle_groups(chain);
    let Some(&first) = groups.get(from) else {
        return 0;
    };
    let mut longest: BTreeMap<usize, u128> = BTreeMap::new();
    for (i, (policy, _)) in chain.iter().enumerate() {
        if groups[i] >= first {
            let entry = longest.entry(groups[i]).or_insert(0);
            *entry = (*entry).max(f(i, policy));
        }
    }
    longest.values().sum::<u128>().min(nanos(Duration::MAX))
}

/// A per-step length that depends on the step's index as well as its policy.
fn length(id: usize, policy: &Policy) -> Duration {
    if id % 2 == 0 {
        policy.cap()
    } else {
        policy.floor()
    }
}

/// Builds a plan from a chain; returns the plan and how many steps it took.
fn build<'p>(
    chain: &'p [(Policy<'static>, bool)],
    deadline: Deadline,
    own_work: Duration,
) -> Result<(Plan<'p, CAPACITY>, usize), TestCaseError> {
    let mut plan: Plan<'p, CAPACITY> = Plan::new(deadline, own_work);
    let mut taken = 0;
    for (i, (policy, alongside)) in chain.iter().enumerate() {
        let pushed = if *alongside {
            plan.alongside(policy)
        } else {
            plan.then(policy)
        };
        if i < CAPACITY {
            prop_assert_eq!(pushed, Ok(i));
            taken += 1;
        } else {
            prop_assert_eq!(pushed, Err(PlanFull));
        }
    }
    prop_assert_eq!(plan.len(), taken);
    prop_assert_eq!(plan.is_empty(), taken == 0);
    Ok((plan, taken))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn call_timeout_keeps_every_guarantee(
        policy in policy(),
        deadline in instant().prop_map(Deadline::at),
        now in instant(),
        reserve in duration(),
    ) {
        let decision = call_timeout(&policy, deadline, reserve, now);
        check_decision(decision, &policy, deadline, now, nanos(reserve))?;
    }

    #[test]
    fn plan_reserve_is_own_work_plus_later_required_floors(
        chain in chain(),
        deadline in instant().prop_map(Deadline::at),
        own_work in duration(),
    ) {
        let (plan, taken) = build(&chain, deadline, own_work)?;
        let chain = &chain[..taken];
        let groups = oracle_groups(chain);
        for step in 0..taken {
            prop_assert_eq!(nanos(plan.reserve(step)), oracle_reserve(chain, own_work, step));
            prop_assert_eq!(plan.policy(step), Some(&chain[step].0));
            for other in 0..taken {
                let together = groups[step] == groups[other];
                prop_assert_eq!(plan.parallel(step, other), together);
                if together {
                    // Parallel steps share the wall clock: each is sized from the same
                    // time left, with the same reserve.
                    prop_assert_eq!(plan.reserve(step), plan.reserve(other));
                }
            }
        }
    }

    #[test]
    fn critical_path_sums_the_longest_step_of_each_group(
        chain in chain(),
        deadline in instant().prop_map(Deadline::at),
        own_work in duration(),
        past in 0usize..3,
    ) {
        let (plan, taken) = build(&chain, deadline, own_work)?;
        let chain = &chain[..taken];
        let groups = oracle_groups(chain);
        for from in 0..taken + past {
            let got = plan.critical_path(from, length);
            prop_assert_eq!(nanos(got), oracle_path(chain, from, |i, p| nanos(length(i, p))));
            if from >= taken {
                prop_assert_eq!(got, Duration::ZERO);
            }
            // The reserve is own work plus the required floors of the groups after this one.
            if let Some(next) = (from..taken).find(|&i| groups.get(from) < Some(&groups[i])) {
                let floors = plan.critical_path(next, |_, p| {
                    if p.is_required() { p.floor() } else { Duration::ZERO }
                });
                prop_assert_eq!(plan.reserve(from), own_work.saturating_add(floors));
            } else if from < taken {
                prop_assert_eq!(plan.reserve(from), own_work);
            }
        }
    }

    #[test]
    fn plan_decisions_along_a_chain_with_random_clock_steps(
        chain in chain(),
        deadline in instant().prop_map(Deadline::at),
        own_work in duration(),
        arrival in instant(),
        steps in proptest::collection::vec(clock_step(), CAPACITY + 3),
    ) {
        let (plan, taken) = build(&chain, deadline, own_work)?;
        prop_assert_eq!(plan.deadline(), deadline);
        prop_assert_eq!(plan.own_work(), own_work);
        let mut now = arrival;
        for (step, clock) in (0..taken).zip(&steps) {
            now = moved(now, *clock);
            let policy = &chain[step].0;
            let reserve = oracle_reserve(&chain[..taken], own_work, step);
            check_decision(plan.decide(step, now), policy, deadline, now, reserve)?;
        }
    }

    #[test]
    fn out_of_range_steps_never_panic(
        chain in chain(),
        deadline in instant().prop_map(Deadline::at),
        own_work in duration(),
        now in instant(),
        past in prop_oneof![Just(0usize), 0usize..4, Just(usize::MAX - 1), Just(usize::MAX)],
    ) {
        let (plan, taken) = build(&chain, deadline, own_work)?;
        let step = taken.saturating_add(past);
        prop_assert_eq!(plan.reserve(step), own_work);
        prop_assert_eq!(plan.policy(step), None);
        prop_assert!(!plan.parallel(step, 0));
        prop_assert!(!plan.parallel(0, step));
        prop_assert!(!plan.parallel(step, step));
        let decision = plan.decide(step, now);
        prop_assert!(matches!(decision, Decision::Fail(_)), "{decision:?}");
    }

    #[test]
    fn a_child_deadline_never_outlives_its_parent(
        root in instant().prop_map(Deadline::at),
        hops in proptest::collection::vec((instant(), duration()), 1..8),
    ) {
        let mut parent = root;
        for (now, timeout) in hops {
            let child = parent.child(timeout, now);
            prop_assert!(child <= parent);
            prop_assert!(child <= root);
            prop_assert!(child <= Deadline::after(now, timeout));
            prop_assert!(child.remaining(now) <= timeout);
            prop_assert!(child.remaining(now) <= parent.remaining(now));
            prop_assert!(child == parent || child == Deadline::after(now, timeout));
            parent = child;
        }
    }

    #[test]
    fn a_call_deadline_is_a_child_of_the_request_deadline(
        policy in policy(),
        deadline in instant().prop_map(Deadline::at),
        now in instant(),
        reserve in duration(),
    ) {
        if let Some(limits) = call_timeout(&policy, deadline, reserve, now).limits() {
            prop_assert!(limits.deadline() <= deadline);
            prop_assert_eq!(deadline.child(limits.timeout(), now), limits.deadline());
        }
    }

    #[test]
    fn instant_and_deadline_arithmetic_never_panics(
        a in instant(),
        b in instant(),
        d in duration(),
        millis in any::<u64>(),
        secs in any::<u64>(),
    ) {
        let (am, bm) = (u128::from(a.as_micros()), u128::from(b.as_micros()));
        let dm = d.as_micros();
        let max = u128::from(u64::MAX);

        prop_assert_eq!(u128::from((a + d).as_micros()), (am + dm).min(max));
        prop_assert_eq!(u128::from((a - d).as_micros()), am.saturating_sub(dm));
        prop_assert_eq!((a - b).as_micros(), am.saturating_sub(bm));
        prop_assert_eq!(a.saturating_add(d), a + d);
        prop_assert_eq!(a.saturating_sub(d), a - d);
        prop_assert_eq!(
            a.checked_add(d).map(|i| u128::from(i.as_micros())),
            Some(am + dm).filter(|&s| s <= max)
        );
        prop_assert_eq!(
            a.checked_sub(d).map(|i| u128::from(i.as_micros())),
            am.checked_sub(dm)
        );
        prop_assert_eq!(
            a.checked_duration_since(b).map(|x| x.as_micros()),
            am.checked_sub(bm)
        );
        prop_assert_eq!(a.saturating_duration_since(b), a - b);
        prop_assert_eq!(a.since_origin().as_micros(), am);
        prop_assert_eq!(u128::from(a.as_millis()), am / 1_000);
        prop_assert_eq!(
            u128::from(Instant::from_millis(millis).as_micros()),
            (u128::from(millis) * 1_000).min(max)
        );
        prop_assert_eq!(
            u128::from(Instant::from_secs(secs).as_micros()),
            (u128::from(secs) * 1_000_000).min(max)
        );

        let deadline = Deadline::after(a, d);
        prop_assert_eq!(deadline.instant(), a + d);
        // A reading before the arrival counts as the arrival: never more than `d` is left.
        prop_assert_eq!(deadline.remaining(b), (a + d) - b.max(a));
        prop_assert!(deadline.remaining(b) <= d);
        prop_assert_eq!(deadline.is_expired(b), b.max(a) >= a + d);
        prop_assert_eq!(Deadline::at(a + d).remaining(b), (a + d) - b);
        prop_assert_eq!(deadline.is_expired(b), deadline.remaining(b).is_zero());
        prop_assert!(deadline.shortened_by(d) <= deadline);
        prop_assert_eq!(deadline.min(Deadline::at(b)), Deadline::at((a + d).min(b)));
        prop_assert_eq!(Deadline::NEVER.min(deadline), deadline);
    }

    #[test]
    fn a_manual_clock_saturates_and_never_steps_back(
        start in instant(),
        moves in proptest::collection::vec((duration(), instant()), 0..8),
    ) {
        let clock = ManualClock::starting_at(start);
        let mut last = clock.now();
        prop_assert_eq!(last, start);
        for (by, to) in moves {
            let after = clock.advance(by);
            prop_assert_eq!(after, last + by);
            prop_assert_eq!(clock.now(), after);
            clock.set(to);
            prop_assert_eq!(clock.now(), after.max(to));
            last = clock.now();
        }
    }
}
