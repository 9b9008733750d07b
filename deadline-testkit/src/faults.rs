//! Fault injection, written once for every adapter: a dependency that hangs forever, one that
//! errors every time, a clock that steps back, a timer that fires late or never, and a hedge
//! whose loser never finishes. Each is an `async fn` generic over the [`Timer`], asserting as
//! it goes, for an adapter's tests to run on its runtime in virtual time
//! ([`for_each_fault!`](crate::for_each_fault) lists them).
//!
//! What every fault asserts:
//!
//! - **Nothing runs past the deadline plus a stated slack**: the call ends, on the runtime's
//!   own clock, no later than the request's deadline plus [`SLACK`] (one millisecond timer
//!   tick), plus the fault's own size where the fault is time itself (a clock 40 ms behind, a
//!   timer 30 ms late).
//! - **Nothing is left behind**: every attempt's future is dropped by the time the call ends
//!   (drop guards, [`Attempts::alive`]), and no attempt runs past its own timeout (plus the
//!   same slack).
//!
//! Panics, tasks, sockets and the server layer are runtime-specific: those faults live in the
//! adapters' own `tests/faults.rs`.

use core::future::{Future, pending};
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::Driver;
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::{Clock, Deadline, Instant, Policy, Timer, ms};

use crate::probe::Attempts;
use crate::scenarios::{Either, Unavailable, attempt, classify, race};
use crate::timers::Late;

/// The slack every fault allows past a deadline: one tick of a millisecond timer wheel
/// (tokio's), which may wake a sleep up to a tick after its instant.
pub const SLACK: Duration = ms(1);

/// The request's budget in every fault.
const BUDGET: Duration = ms(200);

/// Up to 3 attempts of at most 50 ms each, 5 ms apart.
const FLAKY: Policy = Policy::required("flaky")
    .idempotent()
    .with_cap(ms(50))
    .with_floor(ms(5))
    .with_retries(2)
    .with_backoff(Backoff::constant(ms(5)));

/// An attempt that never answers (a dependency that hangs forever), recorded in `probe`.
fn hang<C: Clock>(
    clock: C,
    probe: &Attempts,
    limits: Limits,
) -> impl Future<Output = Result<(), Unavailable>> {
    let guard = probe.begin(clock, limits);
    async move {
        let _guard = guard;
        pending::<()>().await;
        Ok(())
    }
}

/// No attempt of `probe` is alive, and none ran past its own timeout plus `slack`.
fn assert_cut_off(probe: &Attempts, slack: Duration) {
    assert_eq!(probe.alive(), 0, "an attempt outlived its call");
    for n in 0..probe.started() {
        let seen = probe.seen(n);
        let dropped = seen.dropped.expect("dropped");
        assert!(
            dropped <= seen.started + seen.timeout + slack,
            "attempt {n} ran {dropped:?} past a {:?} timeout started at {:?}",
            seen.timeout,
            seen.started
        );
    }
}

/// A dependency that hangs forever: each attempt is cut off at its timeout (50 ms) and
/// dropped, the retries come out of the same budget, and the call gives up by the deadline
/// with every attempt gone.
pub async fn dependency_hangs_forever<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let deadline = Deadline::after(t0, BUDGET);
    let probe = Attempts::new(t0);
    let called = Driver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        timer,
        SplitMix64::new(11),
    )
    .run(classify, |limits| hang(timer, &probe, limits))
    .await;
    assert!(
        called.result.is_err(),
        "a dependency that never answers cannot succeed"
    );
    assert_eq!(probe.started(), 3, "each attempt timed out and was retried");
    assert_eq!(called.report.timeouts, 3);
    assert!(called.report.ended <= deadline.instant().saturating_add(SLACK));
    assert!(timer.now() <= deadline.instant().saturating_add(SLACK));
    assert_cut_off(&probe, SLACK);
}

/// A dependency that errors every time: without a retry budget the call makes its 3
/// attempts and no more; with an empty budget (one original call deposits a tenth of a
/// token, no floor) it makes one. Either way it ends long before the deadline.
pub async fn dependency_errors_every_time<T: Timer + Copy>(timer: T) {
    for (budget, expected) in [
        (None, 3),
        (Some(RetryBudget::percent(10).with_floor_per_sec(0)), 1),
    ] {
        let t0 = timer.now();
        let deadline = Deadline::after(t0, BUDGET);
        let probe = Attempts::new(t0);
        let call = Call::new(&FLAKY, deadline, Duration::ZERO).with_budget_opt(budget.as_ref());
        let called = Driver::new(call, timer, SplitMix64::new(12))
            .run(classify, |limits| {
                attempt(timer, &probe, limits, ms(2), Err::<(), _>(Unavailable))
            })
            .await;
        assert_eq!(called.result, Err(CallError::Attempt(Unavailable)));
        assert_eq!(probe.started(), expected, "attempts with budget {budget:?}");
        if budget.is_some() {
            assert_eq!(called.report.gave_up, Some(GiveUp::Throttled));
        }
        assert!(called.report.ended <= deadline.instant());
        assert_eq!(probe.alive(), 0);
    }
}

/// A timer whose clock steps back by `by` on every other reading (an NTP step, or readings
/// from two threads arriving out of order). Its sleeps are the wrapped timer's.
#[derive(Debug)]
pub struct StepsBack<T> {
    timer: T,
    by: Duration,
    readings: core::sync::atomic::AtomicU32,
}

impl<T> StepsBack<T> {
    /// `timer`, whose every other reading is `by` earlier.
    pub const fn new(timer: T, by: Duration) -> Self {
        StepsBack {
            timer,
            by,
            readings: core::sync::atomic::AtomicU32::new(0),
        }
    }
}

impl<T: Clock> Clock for StepsBack<T> {
    fn now(&self) -> Instant {
        let n = self
            .readings
            .fetch_add(1, core::sync::atomic::Ordering::SeqCst);
        let now = self.timer.now();
        if n % 2 == 1 {
            now.saturating_sub(self.by)
        } else {
            now
        }
    }
}

impl<T: Timer> Timer for StepsBack<T> {
    type Sleep = T::Sleep;

    fn sleep_until(&self, at: Instant) -> T::Sleep {
        self.timer.sleep_until(at)
    }

    fn budget_spent(&self) -> bool {
        self.timer.budget_spent()
    }
}

/// A clock that steps back 40 ms on every other reading, against a dependency that hangs:
/// nothing panics, no more attempts start than the policy allows, and the call ends (on the
/// true clock) by the deadline plus the step plus [`SLACK`], every attempt dropped.
pub async fn clock_steps_back<T: Timer + Copy>(timer: T) {
    const STEP: Duration = ms(40);
    let stepping = StepsBack::new(timer, STEP);
    let t0 = timer.now();
    let deadline = Deadline::after(t0, BUDGET);
    let probe = Attempts::new(t0);
    let called = Driver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        &stepping,
        SplitMix64::new(13),
    )
    .run(classify, |limits| hang(timer, &probe, limits))
    .await;
    assert!(called.result.is_err());
    assert!(
        (1..=3).contains(&probe.started()),
        "{} attempts",
        probe.started()
    );
    assert!(timer.now() <= deadline.instant().saturating_add(STEP + SLACK));
    assert_cut_off(&probe, STEP + SLACK);
}

/// A timer that wakes every sleep 30 ms late (a busy runtime), against a dependency that
/// hangs: the driver trusts the clock, not the wake-up, so no attempt starts after the
/// deadline, and the call ends by the deadline plus the lateness plus [`SLACK`].
pub async fn timer_fires_late<T: Timer + Copy>(timer: T) {
    const LATE: Duration = ms(30);
    let late = Late::new(timer, LATE);
    let t0 = timer.now();
    let deadline = Deadline::after(t0, BUDGET);
    let probe = Attempts::new(t0);
    let called = Driver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        late,
        SplitMix64::new(14),
    )
    .run(classify, |limits| hang(timer, &probe, limits))
    .await;
    assert!(called.result.is_err());
    for n in 0..probe.started() {
        assert!(
            probe.seen(n).started < BUDGET,
            "attempt {n} started after the deadline"
        );
    }
    assert!(timer.now() <= deadline.instant().saturating_add(LATE + SLACK));
    assert_cut_off(&probe, LATE + SLACK);
}

/// A timer whose sleeps never complete, reading the wrapped timer's clock.
#[derive(Clone, Copy, Debug)]
pub struct Never<T>(pub T);

impl<T: Clock> Clock for Never<T> {
    fn now(&self) -> Instant {
        self.0.now()
    }
}

impl<T: Clock> Timer for Never<T> {
    type Sleep = core::future::Pending<()>;

    fn sleep_until(&self, _at: Instant) -> Self::Sleep {
        pending()
    }
}

/// A timer that never fires. The driver polls an attempt before it arms a sleep, so an
/// answer that is ready is still taken. A hanging attempt cannot be cut off by a timer that
/// never fires, so the request's own deadline, on the runtime's timer (what the server layer
/// or `scope_timeout` does), ends the call at the deadline and drops every attempt with it;
/// no retry starts in between.
pub async fn timer_never_fires<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let deadline = Deadline::after(t0, BUDGET);

    let quick = Attempts::new(t0);
    let called = Driver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        Never(timer),
        SplitMix64::new(15),
    )
    .run(classify, |limits| {
        let guard = quick.begin(timer, limits);
        async move {
            guard.complete();
            Ok::<_, Unavailable>("ready")
        }
    })
    .await;
    assert_eq!(called.result, Ok("ready"));
    assert_eq!(quick.alive(), 0);

    let probe = Attempts::new(t0);
    let request = Driver::new(
        Call::new(&FLAKY, deadline, Duration::ZERO),
        Never(timer),
        SplitMix64::new(16),
    )
    .run(classify, |limits| hang(timer, &probe, limits));
    let raced = race(request, timer.sleep_until(deadline.instant())).await;
    // Woken by the request's deadline, the driver reads the clock and finds the attempt past
    // its timeout (it gives up), or the deadline's own branch wins: either way, it is over.
    match raced {
        Either::Left(called) => assert!(called.result.is_err()),
        Either::Right(()) => {}
    }
    assert!(timer.now() <= deadline.instant().saturating_add(SLACK));
    assert_eq!(
        probe.started(),
        1,
        "no retry without a timer to time the first attempt out"
    );
    assert_eq!(
        probe.alive(),
        0,
        "the hung attempt is dropped with the request"
    );
    assert_eq!(
        probe.seen(0).dropped,
        Some(timer.now().saturating_duration_since(t0))
    );
}

/// A hedge whose loser never finishes: the first attempt hangs; at the 60 ms hedge delay a
/// copy goes out and answers 10 ms later; the first attempt is dropped at 70 ms, when the
/// hedge wins, and never completes.
pub async fn hedge_loser_never_finishes<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let policy = Policy::required("hedged")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(5))
        .with_hedge(HedgePolicy::new(ms(60), 1));
    let deadline = Deadline::after(t0, BUDGET);
    let probe = Attempts::new(t0);
    let called = Driver::new(
        Call::new(&policy, deadline, Duration::ZERO),
        timer,
        SplitMix64::new(17),
    )
    .run(classify, |limits| {
        let first = probe.started() == 0;
        let guard = probe.begin(timer, limits);
        let at = timer.now().saturating_add(ms(10));
        async move {
            if first {
                pending::<()>().await;
            }
            timer.sleep_until(at).await;
            guard.complete();
            Ok::<_, Unavailable>(if first { "loser" } else { "hedge" })
        }
    })
    .await;
    assert_eq!(called.result, Ok("hedge"));
    assert_eq!(called.report.ended.saturating_duration_since(t0), ms(70));
    let loser = probe.seen(0);
    assert_eq!(loser.completed, None, "the loser never finishes");
    assert_eq!(
        loser.dropped,
        Some(ms(70)),
        "and is dropped when the hedge wins"
    );
    assert_eq!(probe.alive(), 0);
}

/// Calls `$m!(name)` for every fault of [`faults`](self), so that each adapter's tests list
/// the same faults (see [`for_each_scenario!`](crate::for_each_scenario)).
#[macro_export]
macro_rules! for_each_fault {
    ($m:ident) => {
        $m!(dependency_hangs_forever);
        $m!(dependency_errors_every_time);
        $m!(clock_steps_back);
        $m!(timer_fires_late);
        $m!(timer_never_fires);
        $m!(hedge_loser_never_finishes);
    };
}
