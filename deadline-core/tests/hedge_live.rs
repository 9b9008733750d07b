//! A live hedge delay stays at its quantile while hedging works: the slow first attempts a
//! hedge overtakes are recorded with the time they ran, not left out, so the delay does not
//! fall to the latency of the fast copies that won, and hedging does not spread to the calls
//! that were never slow.

use deadline_core::budget::RetryBudget;
use deadline_core::virtual_time::ManualRuntime;
use deadline_core::{Clock, Dependency, Policy, Timer, ms};

/// Hedged at the live p95 (60 ms until the histogram holds enough latencies), with a retry
/// budget that grants every hedge this test asks for.
static STALLING: Dependency<ManualRuntime> = Dependency::new(
    Policy::required("stalling")
        .idempotent()
        .with_cap(ms(1_000))
        .with_hedge_at_p95(ms(60)),
)
.budget(RetryBudget::percent(100));

/// 200 calls, one after another, on virtual time: a first attempt answers in 20 ms, except
/// every tenth call's, which stalls for 500 ms; a hedge answers in 20 ms. Each stalled call
/// is hedged and the hedge wins. Before, only the winners were recorded: every latency in the
/// histogram was 20 ms, the live p95 fell to 20 ms, under the 60 ms fallback, and the hedge
/// delay read the fast copies' latency. Now each stalled first attempt counts with the time it
/// ran (the delay and the hedge's 20 ms), 20 latencies of 220 at or past the delay: the p95
/// lies among them, past the fallback, and only the stalled calls are hedged.
#[test]
fn the_slow_attempts_a_hedge_overtakes_keep_the_live_delay_at_its_quantile() {
    let timer = ManualRuntime::timer();
    for call in 0..200u32 {
        let mut attempt = 0;
        let answer = ManualRuntime::block_on(async {
            STALLING
                .run(|_| {
                    attempt += 1;
                    let this = attempt;
                    let took = if this == 1 && call % 10 == 9 {
                        ms(500)
                    } else {
                        ms(20)
                    };
                    let until = timer.now() + took;
                    async move {
                        timer.sleep_until(until).await;
                        Ok::<_, ()>(this)
                    }
                })
                .await
        })
        .expect("the clock moves");
        let expected = if call % 10 == 9 { 2 } else { 1 };
        assert_eq!(answer, Ok(expected), "call {call}");
    }
    let delay = STALLING.live_hedge_delay().expect("enough latencies");
    assert!(delay > ms(60), "the live p95 is {delay:?}");
    let counts = STALLING.counters().snapshot();
    assert_eq!((counts.calls, counts.successes), (200, 200));
    assert_eq!((counts.hedges, counts.hedge_wins), (20, 20), "{counts:?}");
    // Every first attempt is in the histogram (180 answers, 20 overtaken), and every hedge
    // that won (20).
    assert_eq!(STALLING.latency().count(), 220);
}
