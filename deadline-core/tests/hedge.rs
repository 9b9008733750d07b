//! The hedge decision: its schedule, the live delay, the timeout from the time left, the floor,
//! the shared budget, and the calls that are never hedged.

use std::time::Duration;

use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, HedgeDecision, HedgeState, NoHedge, RetryState};
use deadline_core::policy::{Backoff, HedgePolicy, PolicyError};
use deadline_core::rng::SplitMix64;
use deadline_core::{Deadline, Instant, Outcome, Policy, ms};

const DELAY: Duration = ms(60);

fn dep(max_hedges: u32) -> Policy<'static> {
    Policy::required("B")
        .idempotent()
        .with_cap(ms(400))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(DELAY, max_hedges))
}

fn deadline() -> Deadline {
    Deadline::after(Instant::ZERO, ms(1_000))
}

#[test]
fn hedge_k_is_due_k_delays_after_the_first_start() {
    let p = dep(3);
    let call = Call::new(&p, deadline(), ms(20));
    let first = Instant::from_millis(10);
    let mut h = HedgeState::new(first);
    let mut sent_at = Vec::new();
    while let Some(at) = h.next_at(&call, None) {
        assert!(sent_at.len() < 3, "more hedges than the policy's 3");
        assert_eq!(
            h.decide(&call, None, at - Duration::from_micros(1)),
            HedgeDecision::NotYet(at)
        );
        match h.decide(&call, None, at) {
            HedgeDecision::Send(limits) => {
                // The copy's timeout comes from the time left when it is sent.
                assert_eq!(
                    limits.timeout(),
                    (deadline().remaining(at) - ms(20)).min(p.cap())
                );
                sent_at.push(at);
            }
            other => panic!("{other:?}"),
        }
    }
    let expect: Vec<_> = (1..=3u32).map(|k| first + DELAY * k).collect();
    assert_eq!(sent_at, expect);
    assert_eq!(h.sent(), 3);
    assert_eq!(
        h.decide(&call, None, Instant::from_millis(500)),
        HedgeDecision::Stop(NoHedge::AllSent)
    );
}

#[test]
fn a_live_delay_replaces_the_fixed_one() {
    let p = dep(1);
    let call = Call::new(&p, deadline(), ms(0));
    let h = HedgeState::new(Instant::ZERO);
    assert_eq!(
        h.next_at(&call, Some(ms(35))),
        Some(Instant::from_millis(35))
    );
    assert_eq!(h.next_at(&call, None), Some(Instant::ZERO + DELAY));
    assert_eq!(HedgePolicy::new(DELAY, 1).delay_with(Some(ms(7))), ms(7));
}

#[test]
fn only_idempotent_calls_with_a_policy_are_hedged() {
    let none = Policy::required("B").with_cap(ms(400)).with_floor(ms(30));
    let call = Call::new(&none, deadline(), ms(0));
    let mut h = HedgeState::new(Instant::ZERO);
    assert_eq!(h.next_at(&call, None), None);
    assert_eq!(
        h.decide(&call, None, ms_at(500)),
        HedgeDecision::Stop(NoHedge::NotConfigured)
    );

    // A call that is not idempotent cannot be given a hedge at all (see below), so it is
    // never copied.
    let pay = Policy::required("pay")
        .with_cap(ms(500))
        .not_idempotent()
        .with_retries(1);
    let call = Call::new(&pay, deadline(), ms(0));
    assert_eq!(
        h.decide(&call, None, ms_at(500)),
        HedgeDecision::Stop(NoHedge::NotConfigured)
    );
    assert_eq!(h.sent(), 0);
}

fn ms_at(t: u64) -> Instant {
    Instant::from_millis(t)
}

#[test]
fn no_hedge_under_the_floor_and_none_after() {
    let p = dep(2);
    let reserve = ms(100);
    let call = Call::new(&p, deadline(), reserve);
    let mut h = HedgeState::new(Instant::ZERO);
    // At this instant the time left less the reserve is just under the floor.
    let late = deadline().instant() - reserve - p.floor() + Duration::from_micros(1);
    match h.decide(&call, None, late) {
        HedgeDecision::Stop(NoHedge::UnderFloor(s)) => {
            assert_eq!(s.available(), deadline().remaining(late) - reserve);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(h.next_at(&call, None), None);
    assert_eq!(h.sent(), 0);
}

#[test]
fn hedges_draw_from_the_same_budget_as_retries() {
    let p = dep(3)
        .idempotent()
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(5)));
    let budget = RetryBudget::percent(100).with_floor_per_sec(0);
    budget.deposit(Instant::ZERO); // one token for retries and hedges together
    let call = Call::new(&p, deadline(), ms(0)).with_budget(&budget);
    let mut h = HedgeState::new(Instant::ZERO);

    let at = h.next_at(&call, None).unwrap();
    assert!(matches!(h.decide(&call, None, at), HedgeDecision::Send(_)));
    assert_eq!(budget.balance(), 0);

    // The second hedge is refused, and the schedule moves on by one delay.
    let at2 = h.next_at(&call, None).unwrap();
    let refused_at = at2 + ms(3);
    assert_eq!(h.decide(&call, None, refused_at), HedgeDecision::Throttled);
    assert_eq!(h.next_at(&call, None), Some(refused_at + DELAY));
    assert_eq!(h.sent(), 1);

    // A retry finds the budget spent too.
    let mut r = RetryState::new();
    let d = r.decide(&call, Outcome::Failed, &mut SplitMix64::new(0), refused_at);
    assert!(d.retry().is_none());
}

/// `refused` says whether the hedge now due was refused already: set by a refusal, kept while
/// the same hedge is refused again, and cleared when a hedge is sent or a retry starts, so
/// that the next hedge's refusal is a refusal of its own (counted once each by the driver).
#[test]
fn a_refusal_is_of_the_hedge_due_until_one_is_sent_or_a_retry_starts() {
    let p = dep(3);
    let budget = RetryBudget::percent(100).with_floor_per_sec(0);
    let call = Call::new(&p, deadline(), ms(0)).with_budget(&budget);
    let mut h = HedgeState::new(Instant::ZERO);
    assert!(!h.refused());

    // The first hedge, refused twice: the same hedge.
    let at = h.next_at(&call, None).unwrap();
    assert_eq!(h.decide(&call, None, at), HedgeDecision::Throttled);
    assert!(h.refused());
    let again = h.next_at(&call, None).unwrap();
    assert_eq!(h.decide(&call, None, again), HedgeDecision::Throttled);
    assert!(h.refused());

    // A token comes: it is sent, and the next hedge has not been refused.
    budget.deposit(Instant::ZERO);
    let at = h.next_at(&call, None).unwrap();
    assert!(matches!(h.decide(&call, None, at), HedgeDecision::Send(_)));
    assert!(!h.refused());
    let at = h.next_at(&call, None).unwrap();
    assert_eq!(h.decide(&call, None, at), HedgeDecision::Throttled);
    assert!(h.refused());

    // A retry starts: its hedges are new ones.
    h.restart(at + ms(1));
    assert!(!h.refused());
}

#[test]
fn a_retry_restarts_the_schedule_and_a_pushback_delays_it() {
    let p = dep(3);
    let call = Call::new(&p, deadline(), ms(0));
    let mut h = HedgeState::new(Instant::ZERO);
    let retry_at = ms_at(100);
    h.restart(retry_at);
    assert_eq!(h.next_at(&call, None), Some(retry_at + DELAY));
    let not_before = retry_at + ms(200);
    h.push_back(not_before, &call, None);
    assert_eq!(h.next_at(&call, None), Some(not_before));
    h.stop();
    assert_eq!(h.next_at(&call, None), None);
    assert_eq!(
        h.decide(&call, None, ms_at(900)),
        HedgeDecision::Stop(NoHedge::Stopped)
    );
    h.restart(ms_at(400));
    assert_eq!(
        h.next_at(&call, None),
        Some(not_before.max(ms_at(400)) + DELAY)
    );
}

/// A hedge on a policy that has not said it is idempotent is refused where the policy is
/// built: at compile time for a `static`, with a panic for one built at run time.
#[test]
#[should_panic(expected = "hedges need an idempotent policy")]
fn a_hedge_without_idempotence_is_refused_where_the_policy_is_built() {
    let _ = Policy::required("pay")
        .with_cap(ms(500))
        .with_hedge_after(ms(50));
}

#[test]
#[should_panic(expected = "a policy that hedges cannot be made not idempotent")]
fn a_hedging_policy_cannot_be_made_not_idempotent() {
    let _ = Policy::required("get")
        .idempotent()
        .with_hedge_after(ms(50))
        .not_idempotent();
}

/// Hedges whose delay is not under the cap (none set, `with_hedges` alone, or one at the cap)
/// would be due only once each attempt had timed out: the dependency is refused where it is
/// made, at compile time for a `static`, with a panic at run time.
#[test]
fn a_hedge_that_could_never_be_due_is_refused_where_the_dependency_is_made() {
    use deadline_core::Dependency;
    use deadline_core::virtual_time::ManualRuntime;

    let capped = || Policy::required("B").idempotent().with_cap(ms(110));
    let made = |policy: Policy<'static>| {
        std::panic::catch_unwind(|| {
            let _ = Dependency::<ManualRuntime>::new(policy);
        })
        .map_err(panic_message)
    };
    let refused = Err(
        "the hedge delay is not under the cap: every attempt times out before its hedge is due; \
         set one with .with_hedge_after(..) under the cap, or .with_hedge_at_p95(..)"
            .to_owned(),
    );
    assert_eq!(made(capped().with_hedges(1)), refused);
    assert_eq!(made(capped().with_hedge_after(ms(110))), refused);
    // `Policy::check` says the same, without the panic.
    assert_eq!(
        capped().with_hedges(1).check(),
        Err(PolicyError::HedgeNotUnderCap)
    );
    assert_eq!(
        capped().with_hedge_after(ms(110)).check(),
        Err(PolicyError::HedgeNotUnderCap)
    );
    assert_eq!(
        refused,
        Err(PolicyError::HedgeNotUnderCap.to_string()),
        "the panic's message is the error's"
    );
    assert_eq!(capped().with_hedge_after(ms(60)).check(), Ok(()));
    assert_eq!(capped().with_hedge_at_p95(ms(200)).check(), Ok(()));
    // A delay under the cap, set before or after the number of hedges, or a live one.
    assert_eq!(
        made(capped().with_hedges(2).with_hedge_after(ms(60))),
        Ok(())
    );
    assert_eq!(
        made(capped().with_hedge_after(ms(60)).with_hedges(2)),
        Ok(())
    );
    assert_eq!(
        made(capped().with_hedges(1).with_hedge_at_p95(ms(200))),
        Ok(())
    );
}

/// A cap under a microsecond would never make a call (every call fails or is skipped for
/// want of time): refused where the dependency is made.
#[test]
#[should_panic(expected = "the cap is under a microsecond")]
fn a_cap_under_a_microsecond_is_refused_where_the_dependency_is_made() {
    use deadline_core::Dependency;
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::virtual_time::ManualRuntime;

    let _: Dependency<ManualRuntime, DeadlineOnly> = Dependency::<ManualRuntime>::deadline_only(
        Policy::optional("B").with_cap(Duration::from_nanos(999)),
    );
}

/// A cap of one microsecond can still make a call: accepted.
#[test]
fn a_cap_of_one_microsecond_is_accepted() {
    use deadline_core::Dependency;
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::virtual_time::ManualRuntime;

    let _: Dependency<ManualRuntime, DeadlineOnly> = Dependency::<ManualRuntime>::deadline_only(
        Policy::optional("B").with_cap(Duration::from_micros(1)),
    );
}

/// The message a panic carries, whichever type it has.
fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => (*panic.downcast::<&str>().expect("a message")).to_owned(),
    }
}

/// What `Policy::check`, `Dependency::new` and `Dependency::deadline_only` say of `policy`:
/// the error's text, or the panic's message, for each.
fn verdicts(policy: Policy<'static>) -> [Result<(), String>; 3] {
    use deadline_core::Dependency;
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::virtual_time::ManualRuntime;

    [
        policy.check().map_err(|error| error.to_string()),
        std::panic::catch_unwind(|| {
            let _: Dependency<ManualRuntime> = Dependency::new(policy);
        })
        .map_err(panic_message),
        std::panic::catch_unwind(|| {
            let _: Dependency<ManualRuntime, DeadlineOnly> =
                Dependency::<ManualRuntime>::deadline_only(policy);
        })
        .map_err(panic_message),
    ]
}

/// `Policy::check` names a cap or a floor that would never let a call be made, as
/// `Dependency::new` and `Dependency::deadline_only` refuse them (with its text as their
/// panic's message), and accepts their bounds.
#[test]
fn check_names_a_cap_or_a_floor_that_could_never_act() {
    let policy = || Policy::required("B");
    let refused = |error: PolicyError| {
        let text = Err(error.to_string());
        [text.clone(), text.clone(), text]
    };
    let cases = [
        (
            policy().with_cap(Duration::from_nanos(999)),
            Some(PolicyError::CapUnderAMicrosecond),
        ),
        (
            policy().with_cap(Duration::ZERO),
            Some(PolicyError::CapUnderAMicrosecond),
        ),
        (policy().with_cap(Duration::from_micros(1)), None),
        (
            policy().with_cap(ms(20)).with_floor(ms(30)),
            Some(PolicyError::FloorAboveCap),
        ),
        (policy().with_cap(ms(20)).with_floor(ms(20)), None),
        // The floor rounds up to whole microseconds, the cap down: 1 ns of floor is 1 us,
        // as much as a cap of 1.5 us, and 1.001 us of floor is 2 us, more.
        (
            policy()
                .with_cap(Duration::from_nanos(1_500))
                .with_floor(Duration::from_nanos(1)),
            None,
        ),
        (
            policy()
                .with_cap(Duration::from_nanos(1_500))
                .with_floor(Duration::from_nanos(1_001)),
            Some(PolicyError::FloorAboveCap),
        ),
        // No cap at all (the default) and a floor: every call can still be made.
        (policy().with_floor(ms(30)), None),
    ];
    for (policy, error) in cases {
        assert_eq!(policy.check(), error.map_or(Ok(()), Err), "{policy:?}");
        let expected = error.map_or([Ok(()), Ok(()), Ok(())], refused);
        assert_eq!(verdicts(policy), expected, "{policy:?}");
    }
}

/// When two settings could never act, the first in `Policy::check`'s order is named: the cap,
/// then the floor, and the hedge last, so that a hedge error (which a deadline-only
/// dependency does not refuse) never hides another.
#[test]
fn check_names_the_first_setting_in_its_order() {
    let hedged = || Policy::required("B").idempotent().with_hedge_after(ms(200));
    // A cap of zero is under a microsecond and under a floor of 1 us: the cap is named.
    assert_eq!(
        hedged()
            .with_cap(Duration::ZERO)
            .with_floor(Duration::from_micros(1))
            .check(),
        Err(PolicyError::CapUnderAMicrosecond)
    );
    // A floor above the cap and a hedge past it: the floor is named, and a deadline-only
    // dependency refuses it too.
    let policy = hedged().with_cap(ms(20)).with_floor(ms(30));
    assert_eq!(policy.check(), Err(PolicyError::FloorAboveCap));
    let text = Err(PolicyError::FloorAboveCap.to_string());
    assert_eq!(verdicts(policy), [text.clone(), text.clone(), text]);
    // The hedge alone: named by `check` and `Dependency::new`; `deadline_only` refuses any
    // hedge.
    let policy = hedged().with_cap(ms(110));
    let text = Err(PolicyError::HedgeNotUnderCap.to_string());
    let [check, new, only] = verdicts(policy);
    assert_eq!([check, new], [text.clone(), text]);
    assert!(only.unwrap_err().starts_with(ONE_ATTEMPT));
}

/// The start of `Dependency::deadline_only`'s refusal of a policy with retries or hedges.
const ONE_ATTEMPT: &str = "a deadline-only dependency makes one attempt per call";

/// A connect limit under a microsecond would refuse every connection (a configuration's
/// "0" for "no separate limit" reads so): named by `check`, refused by `Dependency::new` and
/// `Dependency::deadline_only`, after the cap and the floor and before the hedge. A
/// microsecond, or one rounded down to it, acts.
#[test]
fn check_names_a_connect_limit_that_could_never_act() {
    let policy = || Policy::required("B").idempotent().with_cap(ms(100));
    let text = Err(PolicyError::ConnectUnderAMicrosecond.to_string());
    for connect in [Duration::ZERO, Duration::from_nanos(999)] {
        assert_eq!(
            verdicts(policy().with_connect(connect)),
            [text.clone(), text.clone(), text.clone()],
            "{connect:?}"
        );
    }
    for connect in [
        Duration::from_micros(1),
        Duration::from_nanos(1_999),
        ms(20),
    ] {
        assert_eq!(
            verdicts(policy().with_connect(connect)),
            [Ok(()), Ok(()), Ok(())],
            "{connect:?}"
        );
    }
    // The floor comes first; the hedge after it.
    assert_eq!(
        policy()
            .with_floor(ms(200))
            .with_connect(Duration::ZERO)
            .check(),
        Err(PolicyError::FloorAboveCap)
    );
    assert_eq!(
        policy()
            .with_hedge_after(ms(200))
            .with_connect(Duration::ZERO)
            .check(),
        Err(PolicyError::ConnectUnderAMicrosecond)
    );
}

/// A deadline-only dependency makes one attempt per call: a policy with retries or hedges,
/// which it would never make, is refused where it is made, however its hedge is set (and a
/// hedge that could never be due is named by `Policy::check` and `Dependency::new`). The same
/// policy with its retries and hedges set to 0 is accepted.
#[test]
fn a_deadline_only_dependency_refuses_retries_and_hedges_it_would_never_make() {
    let hedge_never_due = Err(PolicyError::HedgeNotUnderCap.to_string());
    let base = || Policy::required("B").idempotent().with_cap(ms(110));
    for (policy, check) in [
        (base().with_hedge_after(ms(200)), hedge_never_due.clone()),
        (base().with_hedges(1), hedge_never_due),
        (base().with_hedge_after(ms(20)), Ok(())),
        (base().with_retries(2), Ok(())),
    ] {
        let [by_check, by_new, only] = verdicts(policy);
        assert_eq!([by_check, by_new], [check.clone(), check], "{policy:?}");
        let refusal = only.expect_err("refused by deadline_only");
        assert!(refusal.starts_with(ONE_ATTEMPT), "{refusal}");
        let [.., only] = verdicts(policy.with_retries(0).with_hedges(0));
        assert_eq!(only, Ok(()), "{policy:?}");
    }
}

/// A floor above the cap would never make a call: refused where the dependency is made.
#[test]
#[should_panic(expected = "the floor is above the cap")]
fn a_floor_above_the_cap_is_refused_where_the_dependency_is_made() {
    use deadline_core::Dependency;
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::virtual_time::ManualRuntime;

    let _: Dependency<ManualRuntime, DeadlineOnly> = Dependency::<ManualRuntime>::deadline_only(
        Policy::required("B").with_cap(ms(20)).with_floor(ms(30)),
    );
}
