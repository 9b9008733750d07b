//! A dependency's live advice against the lab's offline figures on the same latencies, its
//! treatment of timed-out attempts, its snapshot, and the clock reads of a call with the
//! advice on.

use std::cell::Cell;
use std::time::Duration;

use deadline_core::analysis::Sample;
use deadline_core::call::Limits;
use deadline_core::observe::Histogram;
use deadline_core::rng::{Rng, SplitMix64};
use deadline_core::runtime::{Onward, Runtime, note_sent, scope_timeout};
use deadline_core::virtual_time::{ManualRuntime, ManualSleep};
use deadline_core::wire::{
    DeadlineHeader, Incoming, Outgoing, Propagation, Protocol, ServerPolicy,
};
use deadline_core::{Clock, Deadline, Dependency, Instant, Outcome, Policy, Timer, ms};
use proptest::prelude::*;

/// The lab's kill fraction of `cap` over `latencies`: `Sample::kill_fraction`, which
/// `deadline lab` prints.
fn offline(latencies: &[Duration], cap: Duration) -> f64 {
    let mut sorted = latencies.to_vec();
    Sample::new(&mut sorted).unwrap().kill_fraction(cap)
}

/// The histogram's stated error around `cap`: the live kill fraction is the offline one at
/// some `T'` between `cap` less one bucket width (at most `cap / SUB_BUCKETS`) and `cap`.
fn within_the_error(live: f64, latencies: &[Duration], cap: Duration) -> bool {
    let width = Duration::from_micros(cap.as_micros() as u64 / Histogram::<736, 5>::SUB_BUCKETS);
    let low = cap
        .saturating_sub(width)
        .saturating_sub(Duration::from_micros(1));
    offline(latencies, cap) <= live && live <= offline(latencies, low)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Latencies recorded as answers (whole microseconds, fewer than a half-life, so the
    /// histogram holds them all): the live kill fraction of any cap is the lab's, within the
    /// histogram's error.
    #[test]
    fn the_live_kill_fraction_agrees_with_the_labs(
        latencies in prop::collection::vec(1u64..300_000, 1..4_000),
        cap in 1u64..320_000,
    ) {
        let latencies: Vec<Duration> = latencies.into_iter().map(Duration::from_micros).collect();
        let cap = Duration::from_micros(cap);
        let dep: Dependency<ManualRuntime> =
            Dependency::new(Policy::required("p").with_cap(cap));
        for &l in &latencies {
            dep.record_latency(l);
        }
        let advice = dep.advice().unwrap();
        prop_assert_eq!(advice.recorded, latencies.len() as u64);
        prop_assert!(
            within_the_error(advice.kill_fraction, &latencies, cap),
            "live {} offline {} at {cap:?}", advice.kill_fraction, offline(&latencies, cap)
        );
    }

    /// Answers and timeouts in any mix: every quantile's estimate lies between its bounds,
    /// the upper bound is there exactly when the quantile does not fall among the timed-out
    /// attempts, and the kill fraction and the estimates are the Kaplan-Meier product-limit
    /// estimate over the same buckets, worked here the textbook way.
    #[test]
    fn timed_out_attempts_are_censored(
        calls in prop::collection::vec((1u64..100_000, any::<bool>()), 1..4_000),
    ) {
        let dep: Dependency<ManualRuntime> =
            Dependency::new(Policy::required("p").with_cap(ms(50)));
        let mut timed_out = 0u64;
        for &(us, timeout) in &calls {
            let t = Duration::from_micros(us);
            if timeout {
                timed_out += 1;
                dep.record_timeout(t);
            } else {
                dep.record_latency(t);
            }
        }
        let a = dep.advice().unwrap();
        let n = calls.len() as u64;
        prop_assert_eq!((a.recorded, a.timed_out), (n, timed_out));
        prop_assert!(a.kill_fraction >= a.killed as f64 / n as f64 - 1e-9);
        prop_assert!(a.kill_fraction <= 1.0);
        let (survival, quantiles) = product_limit(&dep, &calls, ms(50), [0.5, 0.99, 0.999]);
        prop_assert!((a.kill_fraction - survival).abs() < 1e-9, "{} {}", a.kill_fraction, survival);
        for ((q, r), estimate) in [(500_000u64, a.p50), (990_000, a.p99), (999_000, a.p999)]
            .into_iter()
            .zip(quantiles)
        {
            let rank = (q * n).div_ceil(1_000_000).max(1);
            prop_assert_eq!(r.at_most.is_some(), rank + timed_out <= n);
            prop_assert_eq!(r.estimate, estimate);
            if let Some(e) = r.estimate {
                prop_assert!(r.at_least <= e);
                if let Some(high) = r.at_most {
                    prop_assert!(e <= high);
                }
            } else {
                prop_assert_eq!(r.at_most, None);
            }
        }
    }
}

/// The Kaplan-Meier estimate of `calls` (each a latency in microseconds, and whether it
/// timed out there: within 5 ms below `cap`, at `cap`), worked the textbook way at the
/// histogram's resolution: each call in
/// the bucket of `dep`'s histogram that holds it; at each bucket, `S *= 1 - answered /
/// running`, then its timeouts leave the attempts running. Returns `S` just before the
/// bucket that holds `cap` (0 if nothing ran that far), and for each quantile the first
/// bucket where the count ended, `(1 - S) n`, reaches the quantile's nearest rank, if any.
fn product_limit(
    dep: &Dependency<ManualRuntime>,
    calls: &[(u64, bool)],
    cap: Duration,
    quantiles: [f64; 3],
) -> (f64, [Option<Duration>; 3]) {
    let buckets: Vec<_> = dep.latency().buckets().collect();
    // Per bucket: the calls answered in it, and those that timed out in it.
    let mut ended = vec![(0u64, 0u64); buckets.len()];
    for &(us, timeout) in calls {
        let mut at = Duration::from_micros(us);
        // A timeout within 11 ms below the cap (at most half the cap) is the cap's, at the
        // cap: a next service told the cap less the hop's 5 ms allowance, rounded down to a
        // millisecond, answers its 5 ms reply margin before that.
        if timeout && at < cap && cap - at <= ms(11).min(cap / 2) {
            at = cap;
        }
        let i = buckets.partition_point(|b| b.high < at);
        if timeout {
            ended[i].1 += 1;
        } else {
            ended[i].0 += 1;
        }
    }
    let mut running = calls.len() as u64;
    let mut s = 1.0f64;
    let mut at_cap = None;
    let mut found = [None; 3];
    for (b, &(answered, cut)) in buckets.iter().zip(&ended) {
        if b.high >= cap && at_cap.is_none() {
            at_cap = Some(if running == 0 { 0.0 } else { s });
        }
        if answered > 0 {
            s *= 1.0 - answered as f64 / running as f64;
            for (q, f) in quantiles.iter().zip(&mut found) {
                let rank = (q * calls.len() as f64 - 1e-9).ceil().max(1.0);
                if f.is_none() && (1.0 - s) * calls.len() as f64 >= rank - 1e-6 {
                    *f = Some(b.high);
                }
            }
        }
        running -= answered + cut;
    }
    (at_cap.unwrap_or(0.0), found)
}

static CUT: Dependency<ManualRuntime> = Dependency::new(Policy::required("cut").with_cap(ms(50)));

/// Calls through the dependency's own `run`, on virtual time, some slower than the cap: the
/// attempts slower than 50 ms time out there and are recorded at 50 ms. The live kill
/// fraction agrees with the lab's on the latencies the dependency would have taken.
#[test]
fn the_kill_fraction_of_real_calls_agrees_with_the_labs() {
    let mut rng = SplitMix64::new(7);
    // Mostly 5 to 45 ms, one in eight 40 to 120 ms, each ending at a half millisecond (none
    // exactly at the cap).
    let latencies: Vec<Duration> = (0..3_000)
        .map(|_| {
            let slow = rng.next_u64() % 8 == 0;
            let ms = if slow {
                40 + rng.next_u64() % 80
            } else {
                5 + rng.next_u64() % 40
            };
            Duration::from_micros(ms * 1_000 + 500)
        })
        .collect();
    ManualRuntime::block_on(async {
        for &latency in &latencies {
            let answer = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                CUT.run(|_| async move {
                    let t = ManualRuntime::timer();
                    t.sleep_until(t.now() + latency).await;
                    Ok::<_, ()>(())
                })
                .await
            })
            .await
            .expect("inside the scope");
            assert_eq!(answer.is_ok(), latency <= ms(50));
        }
    })
    .unwrap();
    let advice = CUT.advice().unwrap();
    let slower = latencies.iter().filter(|&&l| l > ms(50)).count() as u64;
    assert_eq!(advice.timed_out, slower);
    assert_eq!(CUT.counters().snapshot().timeouts, slower);
    assert!(
        within_the_error(advice.kill_fraction, &latencies, ms(50)),
        "live {} offline {}",
        advice.kill_fraction,
        offline(&latencies, ms(50))
    );
    assert!(advice.kill_fraction > 0.05, "{advice:?}");

    // The snapshot holds the same: its advice is the dependency's.
    let snapshot = CUT.snapshot();
    assert_eq!(snapshot.name(), "cut");
    assert_eq!(snapshot.advice(), Some(advice));
    assert_eq!(snapshot.counters(), &CUT.counters().snapshot());
    assert_eq!(snapshot.latency().count(), 3_000);
}

thread_local! {
    /// The clock reads made through [`Counting`]'s timer on this thread.
    static READS: Cell<u64> = const { Cell::new(0) };
}

/// [`ManualRuntime`], with every reading of its clock counted.
struct Counting;

#[derive(Clone, Copy)]
struct CountingTimer;

impl Clock for CountingTimer {
    fn now(&self) -> Instant {
        READS.with(|r| r.set(r.get() + 1));
        ManualRuntime::now()
    }
}

impl Timer for CountingTimer {
    type Sleep = ManualSleep<'static>;

    fn sleep_until(&self, at: Instant) -> Self::Sleep {
        ManualRuntime::timer().sleep_until(at)
    }
}

impl Runtime for Counting {
    type Timer = CountingTimer;
    type Rng = SplitMix64;
    const KEEPS_SENT: bool = true;

    fn timer() -> CountingTimer {
        CountingTimer
    }
    fn rng() -> SplitMix64 {
        <ManualRuntime as Runtime>::rng()
    }
    fn current() -> Option<Deadline> {
        <ManualRuntime as Runtime>::current()
    }
    fn enter<R>(deadline: Deadline, f: impl FnOnce() -> R) -> R {
        <ManualRuntime as Runtime>::enter(deadline, f)
    }
    fn enter_attempt<R>(deadline: Deadline, f: impl FnOnce() -> R) -> (R, Option<Onward>) {
        <ManualRuntime as Runtime>::enter_attempt(deadline, f)
    }
}

static FIXED: Dependency<Counting> = Dependency::new(Policy::required("fixed").with_cap(ms(50)));
static ADAPTIVE: Dependency<Counting> = Dependency::new(
    Policy::required("adaptive")
        .with_cap(ms(50))
        .with_adaptive_cap(ms(50), ms(60)),
);

/// The clock reads of `calls` calls to `dep`, each taking 10 ms, but one in ten 80 ms: over
/// the cap, 50 ms or 60 ms, so each of those times out.
fn clock_reads(dep: &'static Dependency<'static, Counting>, calls: u64) -> u64 {
    READS.with(|r| r.set(0));
    ManualRuntime::block_on(async {
        for n in 0..calls {
            let latency = if n % 10 == 0 { ms(80) } else { ms(10) };
            let _ = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                dep.run(|_| async move {
                    let t = ManualRuntime::timer();
                    t.sleep_until(t.now() + latency).await;
                    Ok::<_, ()>(())
                })
                .await
            })
            .await;
        }
    })
    .unwrap();
    READS.with(Cell::get)
}

/// The advice is checked with the instant of the event that recorded the latest latency: a
/// dependency whose advice is checked (its adaptive cap moved, from 50 ms to its 60 ms
/// bound, as 10% of the calls time out) reads the clock exactly as often as one whose
/// advice is not, over enough calls for three checks.
#[test]
fn the_advice_reads_no_clock() {
    let calls = 3 * u64::from(Dependency::<Counting>::ADVICE_EVERY) + 10;
    let fixed = clock_reads(&FIXED, calls);
    let adaptive = clock_reads(&ADAPTIVE, calls);
    assert_eq!(
        (FIXED.cap(), ADAPTIVE.cap()),
        (ms(50), ms(60)),
        "the checks ran"
    );
    assert!(fixed >= calls);
    assert_eq!(
        adaptive, fixed,
        "clock reads with the advice checked, and without"
    );
}

/// Makes a dependency of `policy`: its panic's message if it is refused. `Policy::check`
/// must say the same without the panic.
fn made(policy: Policy<'static>) -> Result<(), String> {
    let made = std::panic::catch_unwind(|| {
        let _ = Dependency::<ManualRuntime>::new(policy);
    })
    .map_err(|panic| match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => (*panic.downcast::<&str>().expect("a message")).to_owned(),
    });
    assert_eq!(
        policy.check().map_err(|error| error.to_string()),
        made,
        "Policy::check and Dependency::new agree"
    );
    made
}

/// An adaptive cap whose lower bound is under the floor could move where every call is
/// refused (a required dependency's timeout under its floor), and a refused call records no
/// latency that could move it back: the dependency is refused where it is made, as a floor
/// above a fixed cap is (at compile time for a `static`).
#[test]
fn an_adaptive_cap_that_could_fall_under_the_floor_is_refused_where_the_dependency_is_made() {
    let floored = || Policy::required("B").with_cap(ms(100)).with_floor(ms(30));
    assert_eq!(
        made(floored().with_adaptive_cap(ms(10), ms(200))),
        Err(
            "the adaptive cap's lower bound is under the floor: a cap moved there would refuse \
             every call, and no latency would move it back; raise the min of \
             .with_adaptive_cap(..) to the floor at least"
                .to_owned()
        )
    );
    assert_eq!(made(floored().with_adaptive_cap(ms(30), ms(200))), Ok(()));
    assert_eq!(made(floored()), Ok(()));
}

/// An adaptive cap whose lower bound is under a microsecond could move where every call is
/// refused for want of time, whatever the floor, and nothing would move it back: refused
/// where the dependency is made. A lower bound of one microsecond is accepted.
#[test]
fn an_adaptive_cap_that_could_fall_under_a_microsecond_is_refused() {
    let optional = || Policy::optional("B").with_cap(ms(100));
    assert_eq!(
        made(optional().with_adaptive_cap(Duration::from_nanos(999), ms(200))),
        Err(
            "the adaptive cap's lower bound is under a microsecond: a cap moved there would \
             refuse every call, and no latency would move it back; raise the min of \
             .with_adaptive_cap(..)"
                .to_owned()
        )
    );
    assert_eq!(
        made(optional().with_adaptive_cap(Duration::from_micros(1), ms(200))),
        Ok(())
    );
}

/// With an adaptive cap the cap a call gets is the adaptive one, between its bounds: the
/// checks made where the dependency is made read those bounds, not the fixed cap it starts
/// from. A fixed cap under the floor is no reason to refuse a policy whose adaptive cap never
/// goes under it; a fixed hedge delay the adaptive cap can fall under is, since its hedges
/// would stop, in silence, once the cap moved there.
#[test]
fn with_an_adaptive_cap_the_checks_read_its_bounds() {
    assert_eq!(
        made(
            Policy::required("B")
                .with_cap(ms(20))
                .with_floor(ms(30))
                .with_adaptive_cap(ms(40), ms(100))
        ),
        Ok(())
    );
    let hedged = || {
        Policy::required("B")
            .idempotent()
            .with_cap(ms(100))
            .with_hedge_after(ms(60))
    };
    assert_eq!(made(hedged().with_adaptive_cap(ms(70), ms(200))), Ok(()));
    assert_eq!(
        made(hedged().with_adaptive_cap(ms(30), ms(200))),
        Err(
            "the hedge delay is not under the adaptive cap's lower bound: once the cap moves \
             there every attempt times out before its hedge is due; set one under it with \
             .with_hedge_after(..), raise the min of .with_adaptive_cap(..) above it, or hedge \
             with .with_hedge_at_p95(..)"
                .to_owned()
        )
    );
}

/// With an adaptive cap, `Policy::check` names its bounds before the hedge: a lower bound
/// under a microsecond is named, not the fixed hedge past it, and a deadline-only dependency
/// (which sends no hedge) refuses it as well; the hedge alone it accepts.
#[test]
fn with_an_adaptive_cap_the_bounds_are_named_before_the_hedge() {
    use deadline_core::drive::DeadlineOnly;
    use deadline_core::policy::PolicyError;

    let hedged = || {
        Policy::required("B")
            .idempotent()
            .with_cap(ms(100))
            .with_hedge_after(ms(60))
    };
    let only = |policy: Policy<'static>| {
        std::panic::catch_unwind(|| {
            let _: Dependency<ManualRuntime, DeadlineOnly> =
                Dependency::<ManualRuntime>::deadline_only(policy);
        })
        .is_ok()
    };
    let policy = hedged().with_adaptive_cap(Duration::ZERO, ms(200));
    assert_eq!(
        policy.check(),
        Err(PolicyError::AdaptiveMinUnderAMicrosecond)
    );
    assert!(!only(policy), "deadline_only refuses the lower bound");
    let policy = hedged()
        .with_floor(ms(40))
        .with_adaptive_cap(ms(30), ms(200));
    assert_eq!(policy.check(), Err(PolicyError::AdaptiveMinUnderFloor));
    assert!(!only(policy), "deadline_only refuses the lower bound");
    let policy = hedged().with_adaptive_cap(ms(30), ms(200));
    assert_eq!(policy.check(), Err(PolicyError::HedgeNotUnderAdaptiveMin));
    assert!(
        !only(policy),
        "deadline_only refuses a hedge it would never send"
    );
    assert!(
        only(policy.with_hedges(0)),
        "and accepts the policy without it"
    );
}

static SHORT: Dependency<ManualRuntime> =
    Dependency::new(Policy::required("short").with_cap(ms(50)));

/// An attempt that runs out of its caller's time, shorter than the cap, is recorded as every
/// timeout is: at its timeout, a lower bound of its latency, and counted apart as censored.
/// Left out, the latencies of a dependency that its callers wait for less than it takes would
/// be only the answers that came in time, and a dependency with no cap would show no
/// censoring at all. It is not the cap's kill: no attempt ran as long as the cap.
#[test]
fn an_attempt_cut_by_the_callers_deadline_is_recorded_as_censored() {
    let run = |budget: Duration, latency: Duration| {
        ManualRuntime::block_on(async {
            scope_timeout::<ManualRuntime, _>(budget, async {
                SHORT
                    .run(|_| async move {
                        let t = ManualRuntime::timer();
                        t.sleep_until(t.now() + latency).await;
                        Ok::<_, ()>(())
                    })
                    .reserve(ms(5))
                    .await
            })
            .await
            .expect("inside the scope")
        })
        .unwrap()
    };
    // 35 ms left, 5 of them reserved: 30 ms for an attempt that takes 40.
    for _ in 0..10 {
        assert!(run(ms(35), ms(40)).is_err());
    }
    assert_eq!(SHORT.counters().snapshot().timeouts, 10);
    assert_eq!(SHORT.latency().count(), 10);
    let advice = SHORT.advice().expect("latencies recorded");
    assert_eq!((advice.recorded, advice.timed_out), (10, 10));
    // Recorded at the 30 ms the attempts had: the histogram's bucket holding it.
    assert!(advice.p50.at_least >= ms(30) && advice.p50.at_least < ms(40));
    assert_eq!(advice.p50.at_most, None, "censored: only known from below");
    assert_eq!(advice.p50.estimate, None, "no attempt ran past 30 ms");
    assert_eq!((advice.killed, advice.kill_fraction), (0, 0.0));
}

static MIXED: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("mixed")
        .with_cap(ms(100))
        .with_cap_margin(ms(10))
        .with_adaptive_cap(ms(20), ms(400)),
);

/// A dependency that answers in 20 to 60 ms, called through its own `run` on virtual time
/// by two kinds of callers: half with 30 ms left, whose attempts slower than that their
/// deadline cuts, and half with a second. The cap (100 ms, adaptive from 20 to 400 ms) cuts
/// nothing. Counting every timeout as the cap's kill said that it killed over a third of the
/// attempts, and the adaptive cap doubled to 200 ms at its first check; read as censored
/// data, the kill fraction is 0, the quantiles are those of the callers that waited, and the
/// adaptive cap comes down to the p99.9 plus its margin.
#[test]
fn callers_with_less_time_than_the_dependency_takes_do_not_move_its_cap() {
    // 20 to 60 ms in 41 steps of a millisecond, walked in a scrambled order (17 is prime to
    // 41), each at a half millisecond: none at 30 ms exactly.
    let latency = |k: u64| Duration::from_micros((20 + (k * 17) % 41) * 1_000 + 500);
    // The adaptive cap is checked with the 4 096th latency, before it halves the histogram:
    // the figures are read from a snapshot taken just before it.
    let calls = 4_096u64;
    let mut cut = 0u64;
    let mut before = None;
    ManualRuntime::block_on(async {
        for k in 0..calls {
            if k == calls - 1 {
                before = Some(MIXED.snapshot());
            }
            let took = latency(k);
            // Even calls have 30 ms; odd ones wait a second. 41 is odd, so both kinds see
            // every latency.
            let budget = if k % 2 == 0 { ms(30) } else { ms(1_000) };
            let answer = scope_timeout::<ManualRuntime, _>(budget, async {
                MIXED
                    .run(|_| async move {
                        let t = ManualRuntime::timer();
                        t.sleep_until(t.now() + took).await;
                        Ok::<_, ()>(())
                    })
                    .await
            })
            .await;
            if budget == ms(30) && took > ms(30) {
                cut += 1;
                assert!(!matches!(answer, Ok(Ok(()))), "call {k} answered late");
            } else {
                assert!(matches!(answer, Ok(Ok(()))), "call {k}: {answer:?}");
            }
        }
    })
    .unwrap();
    // The last call waited a second and answered: the cuts are all in the snapshot.
    let before = before.expect("taken");
    assert_eq!(before.cap(), ms(100));
    let advice = before.advice().expect("latencies recorded");
    assert_eq!(advice.timed_out, cut);
    assert!(
        cut * 3 > calls,
        "{cut} of {calls} attempts cut by their callers"
    );
    assert_eq!((advice.killed, advice.kill_fraction), (0, 0.0));
    assert!(advice.enough && !advice.kills_too_many);
    // The median of 20 to 60 ms is 40 ms; with each cut attempt at its 30 ms it reads 30.
    let p50 = advice.p50.estimate.expect("measured");
    assert!(p50 >= ms(40) && p50 <= ms(42), "p50 {p50:?}");
    assert!(advice.p50.at_least < ms(32), "{:?}", advice.p50);
    // The p99.9 is the slowest, 60.5 ms (its bucket's upper bound, within 3.125%); it lies
    // among the timed-out attempts (no upper bound), where counting every timeout as the
    // cap's would have doubled the cap.
    let p999 = advice.p999.estimate.expect("measured");
    assert!(p999 >= ms(60) && p999 <= ms(63), "p99.9 {p999:?}");
    assert_eq!(advice.p999.at_most, None);
    // The check moved the adaptive cap there plus its 10 ms margin.
    let cap = MIXED.cap();
    assert!(
        cap >= ms(70) && cap <= ms(73),
        "the adaptive cap moved to {cap:?}"
    );
}

static EARLY: Dependency<ManualRuntime> =
    Dependency::new(Policy::required("early").with_cap(ms(50)));

/// Sends the time left until `deadline` onward as `Propagation::DEFAULT` writes it (5 ms kept
/// for the way back), and tells the runtime, as an adapter does.
fn send_onward(deadline: Deadline) -> Outgoing {
    let out = Propagation::DEFAULT
        .send(
            deadline,
            ManualRuntime::timer().now(),
            Incoming::NONE,
            DeadlineHeader::DeadlineMs,
        )
        .unwrap();
    note_sent::<ManualRuntime>(&out.sent());
    out
}

/// One attempt to `EARLY`'s next service: it sends the attempt's time left, less the usual
/// 5 ms allowance for the way back, tells the runtime, and after `after` the next service
/// answers 504 (`Err`), or, with `after` of `None`, answers at 10 ms.
async fn early_504(deadline: Deadline, after: Option<Duration>) -> Result<(), &'static str> {
    let t = ManualRuntime::timer();
    send_onward(deadline);
    match after {
        Some(after) => {
            t.sleep_until(t.now() + after).await;
            Err("504")
        }
        None => {
            t.sleep_until(t.now() + ms(10)).await;
            Ok(())
        }
    }
}

/// The cap's kills, seen through the next service: told the attempt's 50 ms less 5, it
/// answers 504 at 46 ms, inside the window below the cap. Such an attempt ran out of the
/// cap: recorded at the cap and counted as its kill. (Recorded when it came, in a bucket
/// below the cap, it read as cut by its caller, and the cap as killing none.) A 504 the next
/// service gives for its own reasons at 3 ms is not the cap's: it is censored where it came.
/// In 2 000 calls, 100 of each.
#[test]
fn a_next_service_running_out_of_the_caps_time_is_the_caps_kill_and_an_early_one_is_not() {
    ManualRuntime::block_on(async {
        for k in 0..2_000u32 {
            let after = match k % 20 {
                0 => Some(ms(46)),
                10 => Some(ms(3)),
                _ => None,
            };
            let answer = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                EARLY
                    .run(|limits: Limits| early_504(limits.deadline(), after))
                    .classify(|_| Outcome::TimedOut)
                    .await
            })
            .await
            .expect("inside the scope");
            assert_eq!(answer.is_ok(), after.is_none());
        }
    })
    .unwrap();
    let advice = EARLY.advice().unwrap();
    assert_eq!((advice.timed_out, advice.killed), (200, 100));
    // The 100 cut at 3 ms would have run on as the others: 100 of the 1 900.
    assert!(
        (advice.kill_fraction - 100.0 / 1_900.0).abs() < 1e-12,
        "{advice:?}"
    );
    assert!(advice.enough && advice.kills_too_many);
}

static OWN: Dependency<ManualRuntime> = Dependency::new(Policy::required("own").with_cap(ms(50)));

/// One attempt to `OWN`'s next service, which serves with this library's own default server
/// policy: the attempt sends its time left as `Propagation::DEFAULT` writes it, the request
/// takes `trip` each way, and the next service reads its deadline from the header as
/// `ServerPolicy::new` does (less its reply margin). A slow answer never comes: the next
/// service answers 504 (`Err`) at its deadline. A fast one comes at 10 ms.
async fn own_next_service(
    deadline: Deadline,
    slow: bool,
    trip: Duration,
) -> Result<(), &'static str> {
    let t = ManualRuntime::timer();
    let out = send_onward(deadline);
    let arrived = t.now() + trip;
    t.sleep_until(arrived).await;
    let headers: Vec<(&str, &[u8])> = out.headers().collect();
    let incoming = Incoming::read(|name| {
        headers
            .iter()
            .find(|(header, _)| *header == name)
            .map(|(_, value)| *value)
    });
    let served = ServerPolicy::new(Propagation::DEFAULT, ms(1_000))
        .accept(Protocol::Http, incoming, arrived, arrived, None)
        .expect("admitted: it was sent tens of milliseconds");
    let answered = if slow {
        served.instant()
    } else {
        arrived + ms(10)
    };
    t.sleep_until(answered + trip).await;
    if slow { Err("504") } else { Ok(()) }
}

/// The cap's kills, seen through a next service that is this library's own: told the
/// attempt's time less the hop's allowance, it answers 504 its reply margin before that,
/// about 10 ms before the cap (and up to a millisecond earlier, the header counting whole
/// milliseconds). Such an attempt ran out of the cap, and is its kill, whatever the time the
/// request takes on the way (here 0.3 ms and 1 ms each way). In 2 000 calls, 100 slow.
#[test]
fn a_next_service_of_this_librarys_own_running_out_of_the_caps_time_is_the_caps_kill() {
    for trip in [Duration::from_micros(300), ms(1)] {
        let dep = &OWN;
        let before = dep.advice().map_or(0, |advice| advice.killed);
        ManualRuntime::block_on(async {
            for k in 0..2_000u32 {
                let slow = k % 20 == 0;
                let answer = scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                    dep.run(|limits: Limits| own_next_service(limits.deadline(), slow, trip))
                        .await
                })
                .await
                .expect("inside the scope");
                assert_eq!(answer.is_ok(), !slow);
            }
        })
        .unwrap();
        let advice = dep.advice().unwrap();
        assert_eq!(
            advice.killed - before,
            100,
            "a trip of {trip:?}: {advice:?}"
        );
        dep.latency().reset();
    }
}

static NEARER: Dependency<ManualRuntime> =
    Dependency::new(Policy::required("nearer").with_cap(ms(50)));

/// Calls whose caller's deadline was nearer than the cap: each attempt is given what its
/// request has left, 45 or 49 ms, not the 50 ms cap. A slow answer is cut at 45 ms by the
/// driver, or answered 504 by a next service on this library (with 49 ms left: about
/// 10.4 ms under the cap): either way the caller's deadline cut it, not the cap, however
/// near the cap it came. The cap killed none. (Before, a timeout within the window below
/// the cap was read as the cap's whatever the attempt's own timeout, and the advice would
/// raise a cap that cut nothing.) In 2 000 calls, 100 slow of each kind.
#[test]
fn a_callers_cut_near_the_cap_is_not_the_caps_kill() {
    ManualRuntime::block_on(async {
        for k in 0..2_000u32 {
            let slow = k % 20;
            // The 504 with 49 ms left: it comes back about 10.4 ms under the cap, inside the
            // window below it.
            let left = if slow == 10 { ms(49) } else { ms(45) };
            let answer = scope_timeout::<ManualRuntime, _>(left, async {
                NEARER
                    .run(|limits: Limits| async move {
                        match slow {
                            // Never answers: the driver cuts it at its 45 ms.
                            0 => core::future::pending().await,
                            // Its next service's 504, as `own_next_service` gives it.
                            10 => {
                                own_next_service(
                                    limits.deadline(),
                                    true,
                                    Duration::from_micros(300),
                                )
                                .await
                            }
                            _ => {
                                own_next_service(
                                    limits.deadline(),
                                    false,
                                    Duration::from_micros(300),
                                )
                                .await
                            }
                        }
                    })
                    .await
            })
            .await;
            assert_eq!(
                answer.is_ok_and(|a| a.is_ok()),
                slow != 0 && slow != 10,
                "{k}"
            );
        }
    })
    .unwrap();
    let advice = NEARER.advice().unwrap();
    assert_eq!((advice.timed_out, advice.killed), (200, 0), "{advice:?}");
    // Each censored where it ended: the driver's cuts at 45 ms, the 504s at about 39.6 ms
    // (not at their attempts' 49 ms: the next service gave up there, not the dependency).
    let snapshot = NEARER.snapshot();
    let ended: Vec<(Duration, u32)> = snapshot
        .timeouts()
        .buckets()
        .map(|b| (b.high, b.count))
        .collect();
    assert_eq!(ended.len(), 2, "{ended:?}");
    assert!(ended[0].0 < ms(41) && ended[0].1 == 100, "{ended:?}");
    assert!(
        ended[1].0 >= ms(45) && ended[1].0 < ms(47) && ended[1].1 == 100,
        "{ended:?}"
    );
}

/// The timeouts are halved with the latencies: after a half-life of nothing but timeouts,
/// as many of each remain, and as many answers after them in the same bucket are answers,
/// not timeouts.
#[test]
fn the_timeouts_are_halved_with_the_latencies() {
    let dep: Dependency<ManualRuntime> = Dependency::new(Policy::required("p").with_cap(ms(50)));
    for _ in 0..Dependency::<ManualRuntime>::LATENCY_HALF_LIFE {
        dep.record_timeout(ms(50));
    }
    for _ in 0..2_048 {
        dep.record_latency(ms(50));
    }
    let snapshot = dep.snapshot();
    assert_eq!(snapshot.latency().count(), 4_096);
    assert_eq!(snapshot.timeouts().count(), 2_048);
    assert_eq!(dep.advice().unwrap().timed_out, 2_048);
}

/// A latency histogram emptied directly (`Dependency::latency().reset()`) leaves the
/// timeouts: ten at 30 ms, where three answers come after it. The snapshot and the advice
/// keep the bucket's timeouts to its three latencies (read as timed out: the documented
/// cost of emptying one histogram and not the other), and the other bucket's answers stay
/// answers.
#[test]
fn a_buckets_timeouts_are_kept_to_its_latencies() {
    let dep: Dependency<ManualRuntime> = Dependency::new(Policy::required("p").with_cap(ms(50)));
    for _ in 0..10 {
        dep.record_timeout(ms(30));
    }
    dep.latency().reset();
    for _ in 0..5 {
        dep.record_latency(ms(10));
    }
    for _ in 0..3 {
        dep.record_latency(ms(30));
    }
    assert_eq!(dep.snapshot().timeouts().count(), 3);
    let advice = dep.advice().unwrap();
    assert_eq!((advice.recorded, advice.timed_out), (8, 3));
}

/// An adaptive cap grows up to its `max`, above the fixed cap: the longest an attempt can wait
/// is that `max` (what outlives every attempt, a connection's stall limit, waits that long),
/// not the fixed cap, after which a connection stalled for a live attempt was given up; with
/// no fixed cap, `max` and not "never".
#[test]
fn the_longest_cap_is_an_adaptive_caps_upper_bound() {
    let adaptive = Policy::required("p")
        .idempotent()
        .with_cap(ms(50))
        .with_adaptive_cap(ms(200), ms(1_000));
    assert_eq!(adaptive.cap(), ms(50));
    assert_eq!(adaptive.longest_cap(), ms(1_000));
    let uncapped = Policy::required("p").with_adaptive_cap(ms(200), ms(1_000));
    assert_eq!(uncapped.longest_cap(), ms(1_000));
    assert_eq!(Policy::required("p").with_cap(ms(50)).longest_cap(), ms(50));
}

/// A hedge hides the slow copies it overtakes: one call in fifty has a first copy that would
/// take 150 ms, its hedge (sent at 20 ms) answers at 30 ms, and the slow copy is cancelled.
/// Each cancelled copy is recorded at the time it ran, censored as a timeout is: the p99 of
/// an attempt is then known to lie past 30 ms (no estimate under it), and no cap under 30 ms
/// is suggested. (The cancelled copies were dropped unrecorded, and the histogram held only
/// the 10 ms answers: a p99 of about 10 ms, and a suggested cap of about 20 ms, which would
/// kill one first copy in fifty, twenty times the stated 0.1%.)
#[test]
fn the_copies_a_hedge_overtook_weigh_in_the_quantiles() {
    static HEDGED: Dependency<ManualRuntime> = Dependency::new(
        Policy::required("hedged")
            .idempotent()
            .with_cap(ms(200))
            .with_hedge_after(ms(20)),
    );
    ManualRuntime::block_on(async {
        for call in 0..5_000_u32 {
            let copies = std::cell::Cell::new(0_u32);
            scope_timeout::<ManualRuntime, _>(ms(1_000), async {
                HEDGED
                    .run(|_| {
                        let copy = copies.get();
                        copies.set(copy + 1);
                        let latency = if copy == 0 && call % 50 == 0 {
                            ms(150)
                        } else {
                            ms(10)
                        };
                        async move {
                            let t = ManualRuntime::timer();
                            t.sleep_until(t.now() + latency).await;
                            Ok::<_, ()>(())
                        }
                    })
                    .await
            })
            .await
            .expect("inside the scope")
            .expect("an answer");
        }
    })
    .expect("the clock moves");
    assert_eq!(HEDGED.counters().snapshot().hedges, 100);
    let advice = HEDGED.advice().expect("advice");
    assert!(
        advice.p99.at_least >= ms(10) && advice.p99.estimate.is_none_or(|p99| p99 >= ms(30)),
        "{:?}",
        advice.p99
    );
    assert!(
        advice
            .suggested_cap
            .estimate
            .is_none_or(|cap| cap >= ms(30)),
        "{:?}",
        advice.suggested_cap
    );
}
