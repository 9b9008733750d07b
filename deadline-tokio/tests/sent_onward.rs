//! A call that sends a deadline onward, inside `Dependency::run`, and fails once that deadline
//! is running out, is the attempt running out of time: counted as a timeout, and answered
//! 504 (`Error::Timeout`) if the call then gives up, never 502 as a failed dependency.
//!
//! Paused tokio time: every instant is exact.

use std::convert::Infallible;
use std::time::Duration;

use deadline_core::drive::DeadlineOnly;
use deadline_core::wire::{DeadlineHeader, Propagation};
use deadline_core::{CallError, Error, Policy, ms};
use deadline_tokio::layer::PropagateLayer;
use deadline_tokio::{Dependency, scope_timeout};
use http::{Request, Response};
use tower::{Layer, ServiceExt, service_fn};

/// A client under `PropagateLayer` whose next service never answers. The attempt has
/// 100.5 ms; the header carries whole milliseconds, 95 (100.5 less the 5 ms allowance,
/// rounded down), so the layer drops the call when those 95 ms and the allowance have run
/// out: at 100 ms, half a millisecond before the attempt's own end. Its error is the time sent
/// running out, not the next service failing.
#[tokio::test(start_paused = true)]
async fn a_call_cut_by_what_propagate_layer_sent_is_a_timeout() {
    static NEVER: Dependency<DeadlineOnly> = Dependency::deadline_only(
        Policy::required("never").with_cap(Duration::from_micros(100_500)),
    );
    let client = PropagateLayer::new(Propagation::DEFAULT, DeadlineHeader::DeadlineMs).layer(
        service_fn(|_: Request<()>| std::future::pending::<Result<Response<()>, Infallible>>()),
    );

    let called = scope_timeout(ms(1_000), async {
        NEVER
            .run(|_| client.clone().oneshot(Request::new(())))
            .report()
            .await
    })
    .await
    .expect("inside its scope");

    match called.result {
        Err(CallError::Library(Error::Timeout { after })) => assert_eq!(after, ms(100)),
        other => panic!("a timeout, not {other:?}"),
    }
    assert_eq!(NEVER.counters().snapshot().timeouts, 1);
}

/// An attempt with less time than the allowance has nothing to send: `PropagateLayer` fails
/// the call at once. That refusal is the attempt out of time, counted as a timeout and
/// answered 504, not a failed dependency (502).
#[tokio::test(start_paused = true)]
async fn nothing_left_to_send_is_the_attempts_timeout() {
    static SPENT: Dependency<DeadlineOnly> =
        Dependency::deadline_only(Policy::required("spent").with_cap(ms(100)));
    let client = PropagateLayer::new(Propagation::DEFAULT, DeadlineHeader::DeadlineMs).layer(
        service_fn(|_: Request<()>| async { Ok::<_, Infallible>(Response::new(())) }),
    );

    // 4 ms left: under the 5 ms allowance.
    let called = scope_timeout(
        ms(4),
        SPENT.run(|_| client.clone().oneshot(Request::new(()))),
    )
    .await
    .expect("inside its scope");

    let error = called.expect_err("nothing could be sent");
    assert_eq!(
        error.library(),
        Some(Error::Timeout { after: ms(0) }),
        "{error:?}"
    );
    assert_eq!(SPENT.counters().snapshot().timeouts, 1);
}
