//! What an attempt sent onward decides how its failure counts, on std's runtimes (plain
//! threads and `async-io`), as it does on tokio's: once the time sent is running out
//! ([`Sent::running_out_from`](deadline_core::wire::Sent::running_out_from)), a failure that
//! comes back is the attempt running out of time, not a failed dependency.
//!
//! Real clocks, and no duration asserted: each attempt sends a time whose running-out instant
//! is already behind it when it fails (1 ms told, 5 ms allowance), or an hour ahead of it.

use core::future::Future;
use core::pin::Pin;

use deadline_core::drive::DeadlineOnly;
use deadline_core::runtime::{KeepsSent, note_sent, scope_timeout};
use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
use deadline_core::{CallError, Clock, Deadline, Dependency, Error, Policy, ms};
use deadline_std::{AsyncIo, Blocking};

/// Sends a request whose deadline is `left_ms` from now (the headers tell it that less the
/// 5 ms allowance), tells the runtime `Rt`, and fails at once, as a next service's 504 does.
async fn sends_then_fails<Rt: KeepsSent>(left_ms: u64) -> Result<(), &'static str> {
    let now = Rt::timer().now();
    let out = Propagation::DEFAULT
        .send(
            Deadline::after(now, ms(left_ms)),
            now,
            Incoming::NONE,
            DeadlineHeader::DeadlineMs,
        )
        .unwrap();
    note_sent::<Rt>(&out.sent());
    Err("504 Gateway Timeout")
}

/// What a call here returns.
type Called = Result<(), CallError<&'static str>>;

/// One call to `dep` in a one-hour scope, run to its end by `block_on`: what it returned,
/// and the timeouts `dep` counted.
fn call<Rt: KeepsSent>(
    dep: &'static Dependency<Rt, DeadlineOnly>,
    left_ms: u64,
    block_on: &impl Fn(Pin<Box<dyn Future<Output = Called>>>) -> Called,
) -> (Called, u64) {
    let called = block_on(Box::pin(async move {
        scope_timeout::<Rt, _>(ms(3_600_000), async {
            dep.run(|_| sends_then_fails::<Rt>(left_ms)).await
        })
        .await
        .expect("inside its scope")
    }));
    (called, dep.counters().snapshot().timeouts)
}

/// On `Rt`, run by `block_on`: a call whose attempt sent 1 ms (running out already when it
/// fails) is the call's timeout; one whose attempt sent an hour is the dependency's failure.
fn what_was_sent_decides<Rt: KeepsSent>(
    runs_out: &'static Dependency<Rt, DeadlineOnly>,
    has_time: &'static Dependency<Rt, DeadlineOnly>,
    block_on: impl Fn(Pin<Box<dyn Future<Output = Called>>>) -> Called,
) {
    let (result, timeouts) = call(runs_out, 6, &block_on);
    assert!(
        matches!(result, Err(CallError::Library(Error::Timeout { .. }))),
        "{result:?}"
    );
    assert_eq!(timeouts, 1);

    // An hour sent: the same failure, at once, is the dependency's own.
    let (result, timeouts) = call(has_time, 3_600_000, &block_on);
    assert_eq!(result, Err(CallError::Attempt("504 Gateway Timeout")));
    assert_eq!(timeouts, 0);
}

#[test]
fn on_plain_threads_a_failure_once_what_was_sent_runs_out_is_a_timeout() {
    static RUNS_OUT: Dependency<Blocking, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("runs-out").with_cap(ms(60_000)));
    static HAS_TIME: Dependency<Blocking, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("has-time").with_cap(ms(60_000)));
    what_was_sent_decides(&RUNS_OUT, &HAS_TIME, Blocking::block_on);
}

#[test]
fn on_smol_a_failure_once_what_was_sent_runs_out_is_a_timeout() {
    static RUNS_OUT: Dependency<AsyncIo, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("runs-out").with_cap(ms(60_000)));
    static HAS_TIME: Dependency<AsyncIo, DeadlineOnly> =
        Dependency::deadline_only(Policy::required("has-time").with_cap(ms(60_000)));
    what_was_sent_decides(&RUNS_OUT, &HAS_TIME, smol::block_on);
}
