//! Cancellation on tokio: an abandoned request leaves no attempt and no task behind.

use deadline_core::policy::HedgePolicy;
use deadline_core::rng::SplitMix64;
use deadline_core::{Clock, Outcome, Policy, ms};
use deadline_testkit::Attempts;
use deadline_tokio::low_level::{call, drive};
use deadline_tokio::time::TokioClock;
use deadline_tokio::{remaining, scope_timeout};

static B: Policy = Policy::required("B")
    .idempotent()
    .with_cap(ms(150))
    .with_floor(ms(30))
    .with_hedge(HedgePolicy::new(ms(20), 1));

/// One request: a hedged call to B whose attempts each take 100 ms, recorded in `probe`.
async fn request(probe: &Attempts) {
    let _called = drive(
        call(&B, ms(20)),
        SplitMix64::new(7),
        |_| Outcome::Failed,
        |limits| {
            let guard = probe.begin(TokioClock, limits);
            async move {
                tokio::time::sleep(ms(100)).await;
                guard.complete();
                Ok::<_, ()>(remaining())
            }
        },
    )
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_aborted_request_task_drops_its_attempts_and_leaves_no_task() {
    static PROBE: std::sync::OnceLock<Attempts> = std::sync::OnceLock::new();
    let probe = PROBE.get_or_init(|| Attempts::new(TokioClock.now()));
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();

    // The request runs as its own task; the client gives up at 50 ms and the server aborts it.
    let task = tokio::spawn(scope_timeout(ms(200), request(probe)));
    tokio::time::sleep(ms(50)).await;
    assert_eq!(
        probe.started(),
        2,
        "the first attempt and its hedge are in flight"
    );
    assert_eq!(metrics.num_alive_tasks(), before + 1);
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());

    // Both attempts were dropped with the request, at 50 ms, and neither finished.
    for n in 0..2 {
        let seen = probe.seen(n);
        assert_eq!(seen.completed, None, "attempt {n} finished");
        assert!(seen.dropped.is_some(), "attempt {n} outlived its request");
    }
    assert_eq!(probe.alive(), 0);
    // The driver spawns nothing: no task outlives the request.
    assert_eq!(metrics.num_alive_tasks(), before);
}

#[tokio::test(start_paused = true)]
async fn the_request_deadline_drops_the_attempts_without_any_task() {
    let t0 = TokioClock.now();
    let probe = Attempts::new(t0);
    let metrics = tokio::runtime::Handle::current().metrics();
    // The request's own deadline, 50 ms, is shorter than the attempts: the driver's timeouts
    // (min(50 - 20, 150) = 30 ms) cut both attempts off; nothing runs on afterwards.
    scope_timeout(ms(50), request(&probe))
        .await
        .expect("inside its scope");
    let first = probe.seen(0);
    assert_eq!((first.timeout, first.completed), (ms(30), None));
    assert_eq!(first.dropped, Some(ms(30)));
    assert_eq!(probe.alive(), 0);
    assert_eq!(metrics.num_alive_tasks(), 0);
}
