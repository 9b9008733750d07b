//! A driven call's result and report, added to a dependency's counters.
#![cfg(feature = "drive")]

use deadline_core::drive::{Driver, ManualTimer};
use deadline_core::hedge::HedgePolicy;
use deadline_core::retry::{Call, Outcome};
use deadline_core::rng::SplitMix64;
use deadline_core::{Clock, Counters, Deadline, Instant, Limits, Policy, Timer, ms};

fn failed(_: &()) -> Outcome {
    Outcome::Failed
}

#[test]
fn an_optional_call_under_its_floor_counts_as_skipped() {
    let timer = ManualTimer::new();
    let c = Policy::optional("C", ms(60), ms(25));
    // 44 ms left, 20 ms reserved: 24 ms < 25 ms.
    let call = Call::new(&c, Deadline::after(Instant::ZERO, ms(44)), ms(20));
    let called = timer
        .run(
            Driver::new(call, &timer, SplitMix64::new(3))
                .run(failed, |_: Limits| async { Ok::<_, ()>(()) }),
        )
        .unwrap();
    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.skipped, s.successes), (1, 1, 0));
    assert_eq!(s.deadline_exceeded, 0);
}

#[test]
fn a_hedge_that_wins_counts_as_hedge_and_hedge_win() {
    let timer = ManualTimer::new();
    let t = &timer;
    let b = Policy::required("B", ms(150), ms(30)).with_hedge(HedgePolicy::new(ms(40), 1));
    let call = Call::new(&b, Deadline::after(Instant::ZERO, ms(200)), ms(0));
    let mut sent = 0;
    let called = timer
        .run(
            Driver::new(call, t, SplitMix64::new(3)).run(failed, |_: Limits| {
                sent += 1;
                // The first attempt takes 140 ms; the hedge, sent at 40 ms, answers in 20.
                let latency = if sent == 1 { ms(140) } else { ms(20) };
                let at = t.now() + latency;
                async move {
                    t.sleep_until(at).await;
                    Ok::<_, ()>(sent)
                }
            }),
        )
        .unwrap();
    assert_eq!(called.result, Ok(2));
    let counters = Counters::new();
    called.record(&counters);
    let s = counters.snapshot();
    assert_eq!((s.calls, s.successes, s.hedges, s.hedge_wins), (1, 1, 1, 1));
    assert_eq!((s.timeouts, s.retries, s.skipped), (0, 0, 0));
}
