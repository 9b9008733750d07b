//! The retry decision: every reason to give up, pushback, the non-idempotent rule, the budget
//! drawn only for a retry that is made, and limits computed again for the retry's start.

use std::time::Duration;

use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, RetryDecision, RetryState};
use deadline_core::policy::RetryPolicy;
use deadline_core::policy::{Backoff, Idempotence, Jitter};
use deadline_core::rng::{Sequence, SplitMix64};
use deadline_core::wire::{parse_grpc_pushback, parse_retry_after};
use deadline_core::{Deadline, Instant, Policy, ms};
use deadline_core::{Outcome, Pushback};

const WAIT: Duration = ms(20);

fn dep() -> Policy<'static> {
    Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(50))
        .with_retries(2)
        .with_backoff(Backoff::constant(WAIT))
}

fn deadline() -> Deadline {
    Deadline::after(Instant::ZERO, ms(1_000))
}

fn decide(policy: &Policy, now: Instant, outcome: Outcome) -> RetryDecision {
    let call = Call::new(policy, deadline(), ms(100));
    RetryState::new().decide(&call, outcome, &mut SplitMix64::new(1), now)
}

#[test]
fn a_retry_gets_limits_computed_for_its_start() {
    let p = dep();
    let reserve = ms(100);
    let call = Call::new(&p, deadline(), reserve);
    let now = Instant::from_millis(650);
    let mut state = RetryState::new();
    let RetryDecision::Retry(r) =
        state.decide(&call, Outcome::Failed, &mut SplitMix64::new(1), now)
    else {
        panic!("a retry fits");
    };
    assert_eq!(r.at, now + WAIT);
    assert_eq!(r.wait, WAIT);
    assert_eq!(r.attempt, 2);
    // min(left at `at` - reserve, cap), and never past the deadline.
    assert_eq!(
        r.limits.timeout(),
        (deadline().remaining(r.at) - reserve).min(p.cap())
    );
    assert_eq!(r.limits.until(), r.at + r.limits.timeout());
    assert_eq!(
        (state.attempts(), state.retries(), state.previous_backoff()),
        (2, 1, WAIT)
    );
}

#[test]
fn attempts_stop_at_the_cap() {
    let p = dep();
    let call = Call::new(&p, deadline(), ms(0));
    let mut state = RetryState::new();
    let mut rng = SplitMix64::new(1);
    let mut now = Instant::ZERO;
    let mut retries = 0;
    loop {
        match state.decide(&call, Outcome::Failed, &mut rng, now) {
            RetryDecision::Retry(r) => {
                retries += 1;
                now = r.at + ms(1);
            }
            RetryDecision::GiveUp(g) => {
                assert_eq!(g, GiveUp::Exhausted);
                break;
            }
        }
    }
    assert_eq!(retries + 1, p.retry().attempts());
    assert_eq!(state.attempts(), p.retry().attempts());
}

#[test]
fn zero_attempts_reads_as_one() {
    let p = Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(50))
        .with_retries(0)
        .with_backoff(Backoff::constant(WAIT));
    assert_eq!(p.retry().attempts(), 1);
    assert_eq!(
        decide(&p, Instant::ZERO, Outcome::Failed),
        RetryDecision::GiveUp(GiveUp::Exhausted)
    );
    assert_eq!(RetryPolicy::new(0, Backoff::NONE).attempts(), 1);
}

#[test]
fn fatal_broken_and_dont_retry_are_never_retried() {
    let p = dep();
    assert_eq!(
        decide(&p, Instant::ZERO, Outcome::Fatal),
        RetryDecision::GiveUp(GiveUp::NotRetryable)
    );
    assert_eq!(
        decide(&p, Instant::ZERO, Outcome::Broken),
        RetryDecision::GiveUp(GiveUp::NotRetryable)
    );
    assert_eq!(
        decide(&p, Instant::ZERO, Outcome::Pushback(Pushback::DontRetry)),
        RetryDecision::GiveUp(GiveUp::ServerSaidNo)
    );
}

#[test]
fn a_policy_is_not_idempotent_unless_it_opts_in() {
    // A POST with retries: retried only when it was refused before it was sent.
    let post = Policy::required("checkout")
        .not_idempotent()
        .with_cap(ms(300))
        .with_floor(ms(50))
        .with_retries(2)
        .with_backoff(Backoff::constant(WAIT));
    assert!(!post.is_idempotent());
    assert!(
        !Policy::optional("C")
            .with_cap(ms(60))
            .with_floor(ms(25))
            .is_idempotent()
    );
    assert!(
        !Policy::required("B")
            .with_floor(ms(30))
            .with_cap(ms(90).saturating_add(ms(20)))
            .is_idempotent()
    );
    let now = Instant::ZERO;
    assert_eq!(
        decide(&post, now, Outcome::TimedOut),
        RetryDecision::GiveUp(GiveUp::MayHaveRun)
    );
    assert!(decide(&post, now, Outcome::Refused).retry().is_some());
    // Opting in, in the chain.
    let get = Policy::required("profile")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(50))
        .with_retries(2)
        .with_backoff(Backoff::constant(WAIT));
    assert!(get.is_idempotent());
    assert!(decide(&get, now, Outcome::TimedOut).retry().is_some());
}

#[test]
fn not_idempotent_is_retried_only_when_it_cannot_have_run() {
    let p = dep().with_idempotence(Idempotence::NotIdempotent);
    let now = Instant::ZERO;
    for outcome in [Outcome::TimedOut, Outcome::Failed] {
        assert_eq!(
            decide(&p, now, outcome),
            RetryDecision::GiveUp(GiveUp::MayHaveRun)
        );
    }
    for outcome in [Outcome::Refused, Outcome::Pushback(Pushback::After(ms(1)))] {
        assert!(decide(&p, now, outcome).retry().is_some(), "{outcome:?}");
    }
    // Idempotent calls are retried after a timeout.
    assert!(decide(&dep(), now, Outcome::TimedOut).retry().is_some());
}

#[test]
fn backoff_past_the_deadline_gives_up() {
    let p = dep();
    let now = deadline().instant() - WAIT;
    assert_eq!(
        decide(&p, now, Outcome::Failed),
        RetryDecision::GiveUp(GiveUp::BackoffPastDeadline {
            at: deadline().instant()
        })
    );
    // One microsecond earlier it would end before the deadline, but the timeout would be
    // under the floor.
    let earlier = now - Duration::from_micros(1);
    assert!(matches!(
        decide(&p, earlier, Outcome::Failed),
        RetryDecision::GiveUp(GiveUp::UnderFloor(_))
    ));
}

#[test]
fn timeout_under_the_floor_at_the_retry_gives_up() {
    let p = dep();
    let reserve = ms(100);
    // At `at` the time left less the reserve is one microsecond short of the floor.
    let at = deadline().instant() - reserve - p.floor() + Duration::from_micros(1);
    let now = at - WAIT;
    match decide(&p, now, Outcome::Failed) {
        RetryDecision::GiveUp(GiveUp::UnderFloor(s)) => {
            assert_eq!(s.available(), deadline().remaining(at) - reserve);
            assert_eq!(s.floor(), p.floor());
        }
        other => panic!("{other:?}"),
    }
    // A microsecond sooner and it fits, with exactly the floor.
    let fits = decide(&p, now - Duration::from_micros(1), Outcome::Failed);
    assert_eq!(fits.retry().map(|r| r.limits.timeout()), Some(p.floor()));
}

#[test]
fn a_pushback_is_the_wait_whether_longer_or_shorter_than_the_backoff() {
    let p = dep();
    let long = ms(70);
    let r = decide(&p, Instant::ZERO, Outcome::Pushback(Pushback::After(long)))
        .retry()
        .unwrap();
    assert_eq!((r.wait, r.at), (long, Instant::ZERO + long));
    // "Retry in 5 ms" (gRFC A6): 5 ms, not the policy's 20 ms backoff.
    let short = ms(5);
    let r = decide(&p, Instant::ZERO, Outcome::Pushback(Pushback::After(short)))
        .retry()
        .unwrap();
    assert_eq!((r.wait, r.at), (short, Instant::ZERO + short));
    // A pushback that ends after the deadline gives up.
    let far = decide(
        &p,
        Instant::ZERO,
        Outcome::Pushback(Pushback::After(ms(5_000))),
    );
    assert!(matches!(
        far,
        RetryDecision::GiveUp(GiveUp::BackoffPastDeadline { .. })
    ));
}

/// gRFC A6: "Retry in n ms. If this attempt also fails, retry delay will reset to initial
/// backoff for the following retry." An exponential backoff of 10, 20, 40, 80 ms: after two
/// failures (10, then 20 ms) a pushback of 5 ms, and the failure after it backs off 10 ms
/// again, then 20.
#[test]
fn after_a_pushback_the_backoff_starts_over() {
    let p = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_retries(5)
        .with_backoff(
            Backoff::exponential(ms(10))
                .with_max(ms(1_000))
                .with_jitter(Jitter::None),
        );
    let call = Call::new(&p, Deadline::after(Instant::ZERO, ms(10_000)), ms(0));
    let mut state = RetryState::new();
    let mut rng = SplitMix64::new(1);
    let mut now = Instant::ZERO;
    let mut waits = Vec::new();
    for outcome in [
        Outcome::Failed,
        Outcome::Failed,
        Outcome::Pushback(Pushback::After(ms(5))),
        Outcome::Failed,
        Outcome::Failed,
    ] {
        let retry = state
            .decide(&call, outcome, &mut rng, now)
            .retry()
            .expect("a retry fits");
        waits.push(retry.wait);
        now = retry.at + ms(1);
    }
    assert_eq!(waits, [ms(10), ms(20), ms(5), ms(10), ms(20)]);
}

#[test]
fn the_budget_is_drawn_only_for_a_retry_that_is_made() {
    let p = dep();
    let budget = RetryBudget::percent(100).with_floor_per_sec(0);
    budget.deposit(Instant::ZERO); // exactly one token
    let call = Call::new(&p, deadline(), ms(100)).with_budget(&budget);
    let mut rng = SplitMix64::new(1);

    // Giving up for any other reason leaves the token where it is.
    let late = deadline().instant() - ms(1);
    for outcome in [
        Outcome::Failed,
        Outcome::Fatal,
        Outcome::Pushback(Pushback::DontRetry),
    ] {
        let mut state = RetryState::new();
        assert!(
            state
                .decide(&call, outcome, &mut rng, late)
                .retry()
                .is_none()
        );
        assert_eq!(state, RetryState::new());
    }
    assert_eq!(budget.balance(), 1);

    // The retry takes it; the next one is refused and leaves the state alone.
    let mut state = RetryState::new();
    assert!(
        state
            .decide(&call, Outcome::Failed, &mut rng, Instant::ZERO)
            .retry()
            .is_some()
    );
    assert_eq!(budget.balance(), 0);
    let before = state;
    assert_eq!(
        state.decide(&call, Outcome::Failed, &mut rng, Instant::from_millis(30)),
        RetryDecision::GiveUp(GiveUp::Throttled)
    );
    assert_eq!(state, before);
}

#[test]
fn decorrelated_jitter_remembers_the_previous_wait() {
    let base = ms(10);
    let p = Policy::required("B")
        .idempotent()
        .with_cap(ms(300))
        .with_floor(ms(1))
        .with_retries(4)
        .with_backoff(
            Backoff::exponential(base)
                .with_max(ms(10_000))
                .with_jitter(Jitter::Decorrelated),
        );
    let call = Call::new(&p, Deadline::after(Instant::ZERO, ms(100_000)), ms(0));
    let mut state = RetryState::new();
    let mut rng = Sequence::new(&[u32::MAX]);
    let mut now = Instant::ZERO;
    let mut expect = base;
    for _ in 0..4 {
        let r = state
            .decide(&call, Outcome::Failed, &mut rng, now)
            .retry()
            .unwrap();
        expect *= 3;
        assert_eq!(r.wait, expect);
        assert_eq!(state.previous_backoff(), expect);
        now = r.at;
    }
}

#[test]
fn retry_after_parses_delay_seconds_only() {
    assert_eq!(
        parse_retry_after(b"0"),
        Some(Pushback::After(Duration::ZERO))
    );
    assert_eq!(
        parse_retry_after(b"\t42 "),
        Some(Pushback::After(Duration::from_secs(42)))
    );
    assert_eq!(
        parse_retry_after(b"99999999999999999999999"),
        Some(Pushback::After(Duration::from_secs(u64::MAX)))
    );
    for bad in [
        &b""[..],
        b" ",
        b"1.5",
        b"+3",
        b"-3",
        b"3s",
        b"Wed, 21 Oct 2015 07:28:00 GMT",
    ] {
        assert_eq!(
            parse_retry_after(bad),
            None,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn grpc_pushback_negative_or_garbage_means_do_not_retry() {
    assert_eq!(parse_grpc_pushback(b"0"), Pushback::After(Duration::ZERO));
    assert_eq!(parse_grpc_pushback(b"1500"), Pushback::After(ms(1_500)));
    assert_eq!(
        parse_grpc_pushback(b"2147483647"),
        Pushback::After(ms(2_147_483_647))
    );
    for bad in [
        &b"-1"[..],
        b"-2147483648",
        b"2147483648",
        b"",
        b"1.5",
        b"12ms",
        b"\xff",
    ] {
        assert_eq!(
            parse_grpc_pushback(bad),
            Pushback::DontRetry,
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

/// A gRPC answer whose status says the server may have acted on the request (it ran out of
/// time, or cut the call short) is not made safe to repeat by the server's word on when to
/// retry: a call that is not idempotent is not retried, one that is is retried as after any
/// timeout (the policy's backoff); the server's "do not retry" is heard.
#[test]
fn a_pushback_with_a_status_that_may_have_run_keeps_the_non_idempotent_rule() {
    use deadline_core::wire::ResponseHead;
    let answer_with = |status: &'static [u8], pushback: &'static [u8]| {
        ResponseHead::read(200, move |name| match name {
            "content-type" => Some(&b"application/grpc"[..]),
            "grpc-status" => Some(status),
            "grpc-retry-pushback-ms" => Some(pushback),
            _ => None,
        })
        .classify()
        .expect("a failure")
    };
    let answer = |status| answer_with(status, b"40");
    let not_idempotent = dep().with_idempotence(Idempotence::NotIdempotent);
    // DEADLINE_EXCEEDED and CANCELLED: the server may have acted.
    for status in [&b"4"[..], b"1"] {
        let outcome = answer(status);
        assert_eq!(
            decide(&not_idempotent, Instant::ZERO, outcome),
            RetryDecision::GiveUp(GiveUp::MayHaveRun),
            "grpc-status {status:?}"
        );
        let retry = decide(&dep(), Instant::ZERO, outcome)
            .retry()
            .expect("idempotent");
        assert_eq!(
            retry.wait, WAIT,
            "grpc-status {status:?}: the policy's backoff"
        );
        assert_eq!(
            decide(&dep(), Instant::ZERO, answer_with(status, b"-1")),
            RetryDecision::GiveUp(GiveUp::ServerSaidNo),
            "grpc-status {status:?}"
        );
    }
    // UNAVAILABLE and RESOURCE_EXHAUSTED with a pushback: the server declined it.
    for status in [&b"14"[..], b"8"] {
        let retry = decide(&not_idempotent, Instant::ZERO, answer(status)).retry();
        assert_eq!(
            retry.map(|r| r.wait),
            Some(ms(40)),
            "grpc-status {status:?}"
        );
    }
}
