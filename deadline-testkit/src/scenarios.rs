//! The scenarios. Each is an `async fn` generic over the [`Timer`], asserting as it goes; an
//! adapter's tests run each of them on its runtime, in virtual time.
//!
//! Times are offsets from the instant the scenario starts (`t0`), so any clock origin works.
//! Every scenario ends by checking that no attempt's future outlives the call it belonged to.

use core::future::{Future, poll_fn};
use core::pin::pin;
use core::task::Poll;
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::budget::RetryBudget;
use deadline_core::call::{Call, GiveUp, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::plan::Plan;
use deadline_core::policy::{Backoff, HedgePolicy};
use deadline_core::rng::SplitMix64;
use deadline_core::{Deadline, Error, Outcome, Policy, Timer, ms};

use crate::probe::Attempts;
use crate::timers::Late;

/// A simulated dependency's failure: the server answered with an error a retry may fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unavailable;

/// The classifier of the simulated dependencies: [`Unavailable`] is [`Outcome::Failed`].
pub fn classify(_: &Unavailable) -> Outcome {
    Outcome::Failed
}

/// One attempt of a simulated dependency: recorded in `probe`, it answers `out` after
/// `latency` on `timer` (unless it is dropped first).
pub fn attempt<T: Timer + Copy, V>(
    timer: T,
    probe: &Attempts,
    limits: Limits,
    latency: Duration,
    out: V,
) -> impl Future<Output = V> {
    let guard = probe.begin(timer, limits);
    let at = timer.now().saturating_add(latency);
    async move {
        timer.sleep_until(at).await;
        guard.complete();
        out
    }
}

/// The outcome of [`race`].
#[derive(Debug)]
pub enum Either<A, B> {
    /// The first future finished first.
    Left(A),
    /// The second future finished first (the first was dropped).
    Right(B),
}

/// Polls `a` and `b` until one finishes; the other is dropped.
pub async fn race<A: Future, B: Future>(a: A, b: B) -> Either<A::Output, B::Output> {
    let (mut a, mut b) = (pin!(a), pin!(b));
    poll_fn(|cx| {
        if let Poll::Ready(x) = a.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(x));
        }
        b.as_mut().poll(cx).map(Either::Right)
    })
    .await
}

/// The checkout example's dependencies: A and B required, C optional.
const A: Policy = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
const B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
const C: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// The checkout example's budget and own work.
const BUDGET: Duration = ms(200);
const OWN_WORK: Duration = ms(20);

/// What a run of the checkout example's chain did.
struct Chain {
    probes: [Attempts; 3],
    c: Result<&'static str, CallError<Unavailable>>,
    response: Duration,
}

/// The checkout example's chain: A, then B, then C, each through the driver, with the planned reserve;
/// then our own work. Each dependency answers after the given latency.
async fn chain<T: Timer + Copy>(timer: T, latencies: [Duration; 3]) -> Chain {
    let t0 = timer.now();
    let deadline = Deadline::after(t0, BUDGET);
    let policies = [&A, &B, &C];
    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    let steps = policies.map(|p| plan.then(p).expect("three steps fit"));
    let probes = [Attempts::new(t0), Attempts::new(t0), Attempts::new(t0)];
    let mut rng = SplitMix64::new(0);
    let mut c = Ok("");
    for i in 0..3 {
        let call = Call::new(policies[i], deadline, plan.reserve(steps[i]));
        let (probe, latency, name) = (&probes[i], latencies[i], policies[i].name());
        let called: Called<&'static str, Unavailable> = Driver::new(call, timer, &mut rng)
            .run(classify, |limits| {
                attempt(timer, probe, limits, latency, Ok(name))
            })
            .await;
        c = called.result;
    }
    timer
        .sleep_until(timer.now().saturating_add(OWN_WORK))
        .await;
    let response = timer.now().saturating_duration_since(t0);
    Chain {
        probes,
        c,
        response,
    }
}

fn assert_all_dropped(probes: &[Attempts]) {
    for (i, p) in probes.iter().enumerate() {
        assert_eq!(p.alive(), 0, "an attempt of call {i} outlived its call");
    }
}

/// The checkout example: A starts at 0 ms with 50 ms and answers at 10; B starts at 10 with 110 and
/// answers at 115; C starts at 115 with 60 and answers at 140; the response goes out at 160.
pub async fn checkout_chain<T: Timer + Copy>(timer: T) {
    let run = chain(timer, [ms(10), ms(105), ms(25)]).await;
    let [a, b, c] = [0, 1, 2].map(|i| run.probes[i].seen(0));
    assert_eq!((a.started, a.timeout), (ms(0), ms(50)), "A");
    assert_eq!((b.started, b.timeout), (ms(10), ms(110)), "B");
    assert_eq!((c.started, c.timeout), (ms(115), ms(60)), "C");
    assert_eq!(
        [a.completed, b.completed, c.completed],
        [Some(ms(10)), Some(ms(115)), Some(ms(140))]
    );
    assert_eq!(run.c, Ok("C"));
    assert_eq!(run.response, ms(160), "the response goes out at 160 ms");
    assert_all_dropped(&run.probes);
}

/// The checkout example's slow case: A answers at 48 ms and B at 156; C would get
/// min(200 - 156 - 20, 60) = 24 ms, under its 25 ms floor, so it is skipped (never called)
/// and the response goes out at 176.
pub async fn checkout_slow_case<T: Timer + Copy>(timer: T) {
    let run = chain(timer, [ms(48), ms(108), ms(25)]).await;
    let b = run.probes[1].seen(0);
    assert_eq!((b.started, b.timeout), (ms(48), ms(110)), "B");
    assert_eq!(run.probes[2].started(), 0, "C must not be called");
    match run.c {
        Err(CallError::Skipped(s)) => assert_eq!((s.available(), s.floor()), (ms(24), ms(25))),
        other => panic!("C must be skipped at 156 ms, got {other:?}"),
    }
    assert_eq!(run.response, ms(176), "the response goes out at 176 ms");
    assert_all_dropped(&run.probes);
}

/// A retry within the budget: B's first attempt hangs and is cut off (and dropped) at its
/// 110 ms timeout; after a 10 ms backoff the retry starts at 120 ms with the timeout computed
/// again from the time left, min(200 - 120 - 20, 110) = 60 ms, and answers at 150.
pub async fn retry_within_the_budget<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let b = B
        .idempotent()
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(10)));
    let budget = RetryBudget::percent(10).with_floor_per_sec(5);
    let call = Call::new(&b, Deadline::after(t0, BUDGET), OWN_WORK).with_budget(&budget);
    let probe = Attempts::new(t0);
    let called = Driver::new(call, timer, SplitMix64::new(1))
        .run(classify, |limits| {
            let first = probe.started() == 0;
            let latency = if first { ms(500) } else { ms(30) };
            attempt(
                timer,
                &probe,
                limits,
                latency,
                Ok::<_, Unavailable>("price"),
            )
        })
        .await;
    assert_eq!(called.result, Ok("price"));
    let (first, retry) = (probe.seen(0), probe.seen(1));
    assert_eq!(first.timeout, ms(110));
    assert_eq!(first.completed, None, "the hung attempt must not finish");
    assert_eq!(first.dropped, Some(ms(110)), "cut off at its timeout");
    assert_eq!((retry.started, retry.timeout), (ms(120), ms(60)));
    assert_eq!(retry.completed, Some(ms(150)));
    let r = called.report;
    assert_eq!((r.attempts, r.retries, r.timeouts), (2, 1, 1));
    assert_eq!(r.ended.saturating_duration_since(t0), ms(150));
    assert_all_dropped(&[probe]);
}

/// A hedge that wins while its loser is cancelled: the first attempt is slow (140 ms); at the
/// 60 ms hedge delay a copy goes out with min(200 - 60 - 20, 150) = 120 ms, answers in 10 ms,
/// and at 70 ms the first attempt's future is dropped before it could finish.
pub async fn hedge_wins_and_its_loser_is_cancelled<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(ms(60), 1));
    let call = Call::new(&b, Deadline::after(t0, BUDGET), OWN_WORK);
    let probe = Attempts::new(t0);
    let called = Driver::new(call, timer, SplitMix64::new(2))
        .run(classify, |limits| {
            let n = probe.started();
            let latency = if n == 0 { ms(140) } else { ms(10) };
            attempt(timer, &probe, limits, latency, Ok::<_, Unavailable>(n))
        })
        .await;
    assert_eq!(called.result, Ok(1), "the hedge wins");
    let (loser, hedge) = (probe.seen(0), probe.seen(1));
    assert_eq!((hedge.started, hedge.timeout), (ms(60), ms(120)));
    assert_eq!(hedge.completed, Some(ms(70)));
    assert_eq!(loser.completed, None, "the loser must not finish");
    assert_eq!(
        loser.dropped,
        Some(ms(70)),
        "the loser is dropped when the hedge wins"
    );
    let r = called.report;
    assert!(r.hedge_won);
    assert_eq!((r.attempts, r.hedges, r.cancelled), (2, 1, 1));
    assert_all_dropped(&[probe]);
}

/// A backoff that would end after the deadline is not slept: the attempt fails at 40 ms, the
/// 70 ms backoff would end at 110 ms, past the 100 ms deadline, so the call gives up at 40 ms.
pub async fn backoff_past_the_deadline_gives_up_at_once<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(70)));
    let call = Call::new(&b, Deadline::after(t0, ms(100)), Duration::ZERO);
    let probe = Attempts::new(t0);
    let called = Driver::new(call, timer, SplitMix64::new(3))
        .run(classify, |limits| {
            attempt(timer, &probe, limits, ms(40), Err::<(), _>(Unavailable))
        })
        .await;
    assert_eq!(called.result, Err(CallError::Attempt(Unavailable)));
    assert_eq!(probe.started(), 1);
    assert_eq!(called.report.ended.saturating_duration_since(t0), ms(40));
    assert_eq!(
        called.report.gave_up,
        Some(GiveUp::BackoffPastDeadline {
            at: t0.saturating_add(ms(110))
        })
    );
    assert_all_dropped(&[probe]);
}

/// The deadline reached in the middle of a backoff: on a runtime that wakes every sleep 30 ms
/// late, the attempt fails at 70 ms, the 20 ms backoff was to end at 90 ms (before the 100 ms
/// deadline) but the driver wakes at 120 ms, reads the clock, and starts nothing.
pub async fn deadline_reached_in_the_middle_of_a_backoff<T: Timer + Copy>(timer: T) {
    let late = Late::new(timer, ms(30));
    let t0 = timer.now();
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(100))
        .with_floor(ms(5))
        .with_retries(2)
        .with_backoff(Backoff::constant(ms(20)));
    let deadline = Deadline::after(t0, ms(100));
    let call = Call::new(&b, deadline, Duration::ZERO);
    let probe = Attempts::new(t0);
    let called = Driver::new(call, late, SplitMix64::new(4))
        .run(classify, |limits| {
            attempt(late, &probe, limits, ms(40), Err::<(), _>(Unavailable))
        })
        .await;
    assert_eq!(probe.started(), 1, "no retry after the deadline");
    assert_eq!(probe.seen(0).completed, Some(ms(70)));
    assert_eq!(
        called.result,
        Err(CallError::Library(Error::DeadlineExceeded))
    );
    assert_eq!(called.report.ended.saturating_duration_since(t0), ms(120));
    assert_eq!(called.report.gave_up, Some(GiveUp::DeadlinePassed));
    assert_all_dropped(&[probe]);
}

/// Nobody waits any more: the client gives up at 50 ms while the first attempt and its hedge
/// (sent at 20 ms) are both in flight. Dropping the request drops both attempts at 50 ms;
/// neither finishes, and nothing of the request lives on.
pub async fn abandoned_request_cancels_its_attempts<T: Timer + Copy>(timer: T) {
    let t0 = timer.now();
    let b = Policy::required("B")
        .idempotent()
        .with_cap(ms(150))
        .with_floor(ms(30))
        .with_hedge(HedgePolicy::new(ms(20), 1));
    let call = Call::new(&b, Deadline::after(t0, BUDGET), OWN_WORK);
    let probe = Attempts::new(t0);
    let request = Driver::new(call, timer, SplitMix64::new(5)).run(classify, |limits| {
        attempt(timer, &probe, limits, ms(100), Ok::<_, Unavailable>(()))
    });
    let gone = timer.sleep_until(t0.saturating_add(ms(50)));
    let raced = race(request, gone).await;
    assert!(matches!(raced, Either::Right(())), "the client left first");
    assert_eq!(probe.started(), 2, "the first attempt and its hedge");
    for n in 0..2 {
        let seen = probe.seen(n);
        assert_eq!(seen.completed, None, "attempt {n} must not finish");
        assert_eq!(
            seen.dropped,
            Some(ms(50)),
            "attempt {n} dropped with the request"
        );
    }
    assert_all_dropped(&[probe]);
}

/// Calls `$m!(name)` for every scenario of the suite, so that each adapter's tests list the
/// same scenarios: define a macro that turns a scenario name into a test on your runtime.
///
/// ```
/// use deadline_core::virtual_time::ManualTimer;
///
/// // Each adapter turns a scenario name into a test on its runtime; here, statements that
/// // run it on the core's own virtual-time timer.
/// macro_rules! on_manual_timer {
///     ($name:ident) => {
///         let timer = ManualTimer::new();
///         timer.run(deadline_testkit::scenarios::$name(&timer)).unwrap();
///     };
/// }
/// deadline_testkit::for_each_scenario!(on_manual_timer);
/// ```
#[macro_export]
macro_rules! for_each_scenario {
    ($m:ident) => {
        $m!(checkout_chain);
        $m!(checkout_slow_case);
        $m!(retry_within_the_budget);
        $m!(hedge_wins_and_its_loser_is_cancelled);
        $m!(backoff_past_the_deadline_gives_up_at_once);
        $m!(deadline_reached_in_the_middle_of_a_backoff);
        $m!(abandoned_request_cancels_its_attempts);
    };
}
