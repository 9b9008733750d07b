//! `Run::deadline`: a call given a deadline of its own runs within the earlier of it and the
//! current one, read when the call first runs, whichever way round they come.

use deadline_core::runtime::scope_timeout;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Deadline, Dependency, Policy, ms};

static PRICING: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("pricing")
        .with_cap(ms(500))
        .with_floor(ms(1)),
);

/// The timeout of one call to `PRICING` made `wait` into a scope of `scope`, given `own` as its
/// own deadline (from the start), if any.
fn timeout(scope: Option<u64>, own: Option<u64>, wait: u64) -> core::time::Duration {
    let call = async move {
        let t = ManualRuntime::timer();
        let start = t.now();
        // Built now, run after `wait`: the current deadline is read when it runs.
        let mut run = PRICING.run(|limits| async move { Ok::<_, ()>(limits.timeout()) });
        if let Some(own) = own {
            run = run.deadline(Deadline::after(start, ms(own)));
        }
        deadline_core::Timer::sleep_until(&t, start + ms(wait)).await;
        run.await
    };
    let answer = match scope {
        Some(scope) => ManualRuntime::block_on(scope_timeout::<ManualRuntime, _>(ms(scope), call))
            .map(|bounded| bounded.expect("inside its scope")),
        None => ManualRuntime::block_on(call),
    };
    answer.unwrap().unwrap()
}

#[test]
fn the_earlier_of_the_calls_own_deadline_and_the_current_one() {
    // Its own is earlier: 100 ms from the start, 10 ms in: 90 ms.
    assert_eq!(timeout(Some(200), Some(100), 10), ms(90));
    // The current one is earlier: 200 ms, 10 ms in: 190 ms.
    assert_eq!(timeout(Some(200), Some(300), 10), ms(190));
    // No scope: its own alone; neither: the cap.
    assert_eq!(timeout(None, Some(300), 10), ms(290));
    assert_eq!(timeout(None, None, 10), ms(500));
    assert_eq!(timeout(Some(200), None, 10), ms(190));
}
