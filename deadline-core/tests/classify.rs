//! The classifier is a plain closure: no type annotation on its argument is needed.
#![cfg(feature = "drive")]

use deadline_core::CallError;
use deadline_core::call::{Call, Limits};
use deadline_core::drive::Driver;
use deadline_core::policy::Backoff;
use deadline_core::rng::SplitMix64;
use deadline_core::virtual_time::ManualTimer;
use deadline_core::{Deadline, Instant, Outcome, Policy, ms};

#[derive(Debug, PartialEq)]
enum MyError {
    Refused,
    Status(u16),
}

#[test]
fn an_unannotated_closure_classifies() {
    let timer = ManualTimer::new();
    let dep = Policy::required("D").with_cap(ms(100)).with_floor(ms(10));
    let call = Call::new(&dep, Deadline::after(Instant::ZERO, ms(500)), ms(0));
    let called = timer
        .run(Driver::new(call, &timer, SplitMix64::new(1)).run(
            |_| Outcome::Fatal,
            |_: Limits| async { Err::<(), _>(MyError::Status(400)) },
        ))
        .unwrap();
    assert_eq!(called.result, Err(CallError::Attempt(MyError::Status(400))));
}

#[test]
fn an_unannotated_closure_that_reads_the_error_classifies() {
    let timer = ManualTimer::new();
    let dep = Policy::required("D")
        .not_idempotent()
        .with_cap(ms(100))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5)));
    let call = Call::new(&dep, Deadline::after(Instant::ZERO, ms(500)), ms(0));
    let called = timer
        .run(Driver::new(call, &timer, SplitMix64::new(1)).run(
            |e| match e {
                MyError::Refused => Outcome::Refused,
                MyError::Status(500..=599) => Outcome::Failed,
                MyError::Status(_) => Outcome::Fatal,
            },
            |_: Limits| async { Err::<(), _>(MyError::Refused) },
        ))
        .unwrap();
    // Refused before it was sent: retried even though the policy is not idempotent.
    assert_eq!(called.report.retries, 1);
}
