//! Inner never outlives outer, whatever the order of construction: the deadline a future sees
//! is the earliest of every enclosing deadline at the moment it is polled. Paused time.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use deadline_core::wire::Propagation;
use deadline_core::{Clock, Deadline, Policy, ms};
use deadline_tokio::low_level::decide;
use deadline_tokio::time::TokioClock;
use deadline_tokio::{current, propagate, remaining, scope, scope_timeout};
use http::{Request, Response};
use tower::{Layer, Service, ServiceExt, service_fn};

#[tokio::test(start_paused = true)]
async fn a_longer_scope_built_outside_a_shorter_one_sees_the_shorter() {
    static SLOW: Policy = Policy::required("slow helper")
        .with_cap(ms(3_000))
        .with_floor(ms(10));
    // A helper future built before the request's scope, asking for 5 s.
    let helper = scope_timeout(ms(5_000), async {
        (remaining(), decide(&SLOW, ms(0)).timeout())
    });
    let (left, timeout) = scope_timeout(ms(200), helper)
        .await
        .expect("inside its scope")
        .expect("inside the helper's scope");
    assert_eq!(left, Some(ms(200)));
    // The call's timeout comes from the request's 200 ms, not the helper's 5 s.
    assert_eq!(timeout, Some(ms(200)));
}

#[tokio::test(start_paused = true)]
async fn the_rule_holds_for_scope_nested_in_scope_built_inside_out() {
    let now = TokioClock.now();
    let short = Deadline::after(now, ms(100));
    let long = Deadline::after(now, ms(900));
    // `scope(short, scope(long, f))`: the inner wrapper is built before the outer one is
    // entered.
    let seen = scope(short, scope(long, async { current() }))
        .await
        .expect("inside its scope")
        .expect("inside the inner scope");
    assert_eq!(seen, Some(short));
    // And the other way round: the earlier deadline wins either way.
    let seen = scope(long, scope(short, async { current() }))
        .await
        .expect("inside its scope")
        .expect("inside the inner scope");
    assert_eq!(seen, Some(short));
}

#[tokio::test(start_paused = true)]
async fn propagate_built_outside_a_scope_runs_with_the_scope_it_is_awaited_in() {
    let carried = propagate(async { remaining() });
    let left = scope_timeout(ms(100), async {
        tokio::time::sleep(ms(30)).await;
        carried.await
    })
    .await
    .expect("inside its scope");
    assert_eq!(left, Some(ms(70)));
}

/// A scope asking for longer than the deadline around it is bounded by that one too: in a
/// spawned task that carries a 200 ms request's deadline (`propagate`, which bounds nothing
/// itself), a 5 s scope over a second of work is cut at 200 ms, the deadline its work reads.
#[tokio::test(start_paused = true)]
async fn a_longer_scope_is_cut_at_the_earlier_deadline_around_it() {
    let start = tokio::time::Instant::now();
    let mut spawned = None;
    scope_timeout(ms(200), async {
        spawned = Some(tokio::spawn(propagate(scope_timeout(
            ms(5_000),
            tokio::time::sleep(ms(1_000)),
        ))));
    })
    .await
    .expect("inside its scope");
    assert_eq!(
        spawned.expect("spawned").await.unwrap(),
        Err(deadline_core::Error::DeadlineExceeded)
    );
    assert_eq!(start.elapsed(), ms(200));
}

#[tokio::test(start_paused = true)]
async fn the_enclosing_deadline_is_read_at_each_poll() {
    // A future polled first outside any scope, then moved into one: from then on it sees it.
    let mut first = true;
    let inner = std::pin::pin!(scope_timeout(
        ms(500),
        std::future::poll_fn(move |cx| {
            if first {
                first = false;
                cx.waker().wake_by_ref();
                std::task::Poll::Pending
            } else {
                std::task::Poll::Ready(remaining())
            }
        })
    ));
    let mut inner = inner;
    // Polled once with no enclosing scope: it is pending.
    assert!(futures_poll_once(inner.as_mut()).await.is_none());
    // Then finished inside a 50 ms scope.
    let left = scope_timeout(ms(50), inner)
        .await
        .expect("inside its scope")
        .expect("inside the inner scope");
    assert_eq!(left, Some(ms(50)));
}

/// Polls `fut` once, returning its output if it was ready.
async fn futures_poll_once<F: std::future::Future + Unpin>(fut: F) -> Option<F::Output> {
    let mut fut = fut;
    std::future::poll_fn(move |cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut fut).poll(cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn a_server_future_made_outside_a_scope_gives_its_handler_the_shorter_deadline() {
    let seen = Arc::new(Mutex::new(None));
    let server = deadline_tokio::DeadlineLayer::new(
        Propagation::DEFAULT
            .with_allowance(ms(5))
            .with_max(ms(10_000)),
        ms(50),
    )
    .with_reply_margin(Duration::ZERO)
    .layer(service_fn({
        let seen = seen.clone();
        move |_req: Request<()>| {
            let seen = seen.clone();
            async move {
                *seen.lock().unwrap() = remaining();
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }
    }));
    // The future is made (and the request's 50 ms default read) outside any scope...
    let mut server = server;
    let answer = server.ready().await.unwrap().call(Request::new(()));
    // ...and awaited inside a 30 ms one.
    scope_timeout(ms(30), answer)
        .await
        .expect("inside its scope")
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), Some(ms(30)));
}
