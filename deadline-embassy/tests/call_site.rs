//! The one-line call on embassy, on the mock time driver: the same `Dependency` and the same
//! `run` as on tokio, with the current deadline in the runtime's static.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use deadline_core::CallError;
use deadline_core::policy::Backoff;
use deadline_core::runtime::{Runtime, remaining, scope_timeout};
use deadline_core::{Clock, Dependency, Policy, Timer, ms};
use deadline_embassy::Embassy;
use embassy_time::{Duration as EDuration, MockDriver};

/// The mock driver is one global clock: tests that move it take turns.
static DRIVER: Mutex<()> = Mutex::new(());

/// Polls `fut` to its end, moving the mock clock 1 ms whenever it is pending (at most 10 s).
fn run<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    for _ in 0..10_000 {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        MockDriver::get().advance(EDuration::from_millis(1));
    }
    panic!("the future did not end within 10 s of virtual time");
}

static PRICING: Dependency<Embassy> = Dependency::new(
    Policy::required("pricing")
        .idempotent()
        .with_cap(ms(40))
        .with_floor(ms(10))
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5))),
);

#[test]
fn a_retried_call_within_the_request_deadline() {
    let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let mut tries = 0;
    let answer = run(scope_timeout::<Embassy, _>(ms(200), async {
        PRICING
            .run(|limits| {
                tries += 1;
                let first = tries == 1;
                // The attempt function sees the attempt's own deadline.
                let left = remaining::<Embassy>();
                async move {
                    let t = Embassy::timer();
                    if first {
                        core::future::pending::<()>().await; // times out at 40 ms
                    }
                    t.sleep_until(t.now() + ms(12)).await;
                    Ok::<_, ()>((limits.timeout(), left))
                }
            })
            .reserve(ms(20))
            .await
    }));
    // The retry starts at 45 ms: min(200 - 45 - 20, 40) = 40 ms.
    assert_eq!(answer, Ok(Ok((ms(40), Some(ms(40))))));
    let counts = PRICING.counters().snapshot();
    assert_eq!((counts.calls, counts.timeouts, counts.retries), (1, 1, 1));
    // Outside the scope, no deadline is current.
    assert_eq!(Embassy::current(), None);
}

static PROFILE: Dependency<Embassy> = Dependency::new(
    Policy::required("profile")
        .with_cap(ms(40))
        .with_floor(ms(10)),
);

#[test]
fn a_spent_request_fails_the_required_call_uncalled() {
    let _turn = DRIVER.lock().unwrap_or_else(|e| e.into_inner());
    let mut called = false;
    // 25 ms left, 20 kept: 5 ms is under the 10 ms floor.
    let answer = run(scope_timeout::<Embassy, _>(ms(25), async {
        PROFILE
            .run(|_| {
                called = true;
                async { Ok::<_, ()>(()) }
            })
            .reserve(ms(20))
            .await
    }));
    assert!(
        matches!(answer, Ok(Err(CallError::Library(_)))),
        "{answer:?}"
    );
    assert!(!called);
}
