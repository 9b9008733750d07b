//! A hostile server's pushback: the longest `Retry-After` and `grpc-retry-pushback-ms` values
//! end the call at once instead of waiting past the deadline.
#![cfg(feature = "drive")]

use std::cell::Cell;
use std::time::Duration;

use deadline_core::CallError;
use deadline_core::call::{Call, GiveUp};
use deadline_core::drive::Driver;
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::wire::{parse_grpc_pushback, parse_retry_after};
use deadline_core::{Clock, Deadline, Outcome, Policy, Pushback, Timer, ms};

const B: Policy = Policy::required("B")
    .idempotent()
    .with_cap(ms(100))
    .with_floor(ms(5))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(5)));

/// One call whose first attempt fails after 10 ms with `pushback`; returns the attempts
/// made, how long the call took and why it gave up.
fn call_with(pushback: Pushback) -> (u32, Duration, Option<GiveUp>) {
    let timer = ManualTimer::new();
    let t0 = timer.now();
    let call = Call::new(&B, Deadline::after(t0, ms(200)), Duration::ZERO);
    let attempts = Cell::new(0);
    let called = timer
        .run(Driver::new(call, &timer, SplitMix64::new(9)).run(
            |p: &Pushback| Outcome::Pushback(*p),
            |_| {
                attempts.set(attempts.get() + 1);
                let at = timer.now() + ms(10);
                let t = &timer;
                async move {
                    t.sleep_until(at).await;
                    Err::<(), _>(pushback)
                }
            },
        ))
        .expect("completes on virtual time");
    assert!(matches!(called.result, Err(CallError::Attempt(_))));
    (
        attempts.get(),
        called.report.ended.saturating_duration_since(t0),
        called.report.gave_up,
    )
}

#[test]
fn the_longest_pushbacks_end_the_call_at_once() {
    let hostile = [
        parse_retry_after(b"99999999999999999999999999").expect("digits"),
        parse_retry_after(b"3600").expect("digits"),
        parse_grpc_pushback(b"2147483647"),
    ];
    assert_eq!(hostile[0], Pushback::After(Duration::from_secs(u64::MAX)));
    for pushback in hostile {
        let (attempts, took, gave_up) = call_with(pushback);
        assert_eq!(attempts, 1, "{pushback:?}: no retry");
        assert_eq!(took, ms(10), "{pushback:?}: ended when the attempt failed");
        assert!(
            matches!(gave_up, Some(GiveUp::BackoffPastDeadline { .. })),
            "{pushback:?}: {gave_up:?}"
        );
    }
    // A negative or unreadable gRPC pushback means: do not retry.
    let (attempts, took, gave_up) = call_with(parse_grpc_pushback(b"-1"));
    assert_eq!((attempts, took), (1, ms(10)));
    assert_eq!(gave_up, Some(GiveUp::ServerSaidNo));
}
