//! A call that sends a deadline onward, inside `Dependency::run`, and fails once that deadline
//! is running out, is the attempt running out of time: counted as a timeout, and answered
//! 504 (`Error::Timeout`) if the call then gives up, never 502 as a failed dependency. An
//! attempt that can send nothing, its time being under the allowance, never reaches the
//! dependency: the call is out of time (`Error::DeadlineExceeded`), and neither the breaker
//! nor the retries count it.
//!
//! Paused tokio time: every instant is exact.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use deadline_core::breaker::{BreakerConfig, BreakerState};
use deadline_core::call::GiveUp;
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
/// the call at once. The dependency never saw it: the call ends as out of time
/// (`Error::DeadlineExceeded`, answered 504), neither a failed dependency (502) nor a timeout
/// of the dependency's.
#[tokio::test(start_paused = true)]
async fn nothing_left_to_send_is_out_of_time_not_the_dependencys_timeout() {
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
    assert_eq!(error.library(), Some(Error::DeadlineExceeded), "{error:?}");
    let counted = SPENT.counters().snapshot();
    assert_eq!((counted.timeouts, counted.deadline_exceeded), (0, 1));
}

/// Under deadline pressure (callers that arrive with less time than one hop keeps back),
/// every attempt sends nothing. The dependency is never reached, so its breaker must not
/// count those attempts, and no retry is spent on them. Twenty such calls (the default
/// breaker opens on 5 failures in a row), then a call with time: it is made and answered.
#[tokio::test(start_paused = true)]
async fn calls_that_send_nothing_never_open_the_breaker() {
    static PRICES: Dependency = Dependency::new(
        Policy::required("prices")
            .idempotent()
            .with_cap(ms(100))
            .with_retries(2),
    )
    .breaker(BreakerConfig::DEFAULT);
    static REACHED: AtomicU32 = AtomicU32::new(0);
    let client = PropagateLayer::new(Propagation::DEFAULT, DeadlineHeader::DeadlineMs).layer(
        service_fn(|_: Request<()>| async {
            REACHED.fetch_add(1, Ordering::Relaxed);
            Ok::<_, Infallible>(Response::new(()))
        }),
    );

    for _ in 0..20 {
        // 4 ms left: under the 5 ms allowance.
        let called = scope_timeout(ms(4), async {
            PRICES
                .run(|_| client.clone().oneshot(Request::new(())))
                .report()
                .await
        })
        .await
        .expect("inside its scope");
        let error = called.result.as_ref().expect_err("nothing could be sent");
        assert_eq!(error.library(), Some(Error::DeadlineExceeded), "{error:?}");
        assert_eq!(called.report.attempts, 1, "no retry: {:?}", called.report);
        assert_eq!(called.report.gave_up, Some(GiveUp::NothingToSend));
    }
    assert_eq!(REACHED.load(Ordering::Relaxed), 0, "nothing was sent");
    let counted = PRICES.counters().snapshot();
    assert_eq!(
        (counted.timeouts, counted.retries, counted.deadline_exceeded),
        (0, 0, 20)
    );
    let breaker = PRICES.circuit_breaker().expect("configured");
    assert_eq!(breaker.state(), BreakerState::Closed);

    let called = scope_timeout(
        ms(200),
        PRICES.run(|_| client.clone().oneshot(Request::new(()))),
    )
    .await
    .expect("inside its scope");
    assert!(called.is_ok(), "{:?}", called.map(|_| ()));
    assert_eq!(REACHED.load(Ordering::Relaxed), 1);
}

/// A query not started because the time left is under its statement policy's floor never
/// reached the database: the same as a request with nothing left to send.
#[tokio::test(start_paused = true)]
async fn a_statement_not_started_is_out_of_time_not_the_databases_timeout() {
    use deadline_core::statement::{StatementDecision, StatementPolicy};
    use deadline_tokio::low_level::decide_statement;

    const ORDERS: StatementPolicy = StatementPolicy::capped(ms(300)).with_floor(ms(40));
    static DB: Dependency = Dependency::new(
        Policy::required("orders db")
            .idempotent()
            .with_cap(ms(300))
            .with_retries(2),
    )
    .breaker(BreakerConfig::DEFAULT);

    // 25 ms left: under the 40 ms floor, the query is not started.
    let called = scope_timeout(
        ms(25),
        DB.run(|_| async {
            match decide_statement(&ORDERS) {
                StatementDecision::Set(_) => Ok(()),
                StatementDecision::DontStart(shortfall) => Err(shortfall.error()),
            }
        }),
    )
    .await
    .expect("inside its scope");
    let error = called.expect_err("not started");
    assert_eq!(error.library(), Some(Error::DeadlineExceeded), "{error:?}");
    let counted = DB.counters().snapshot();
    assert_eq!((counted.timeouts, counted.retries), (0, 0));
}
