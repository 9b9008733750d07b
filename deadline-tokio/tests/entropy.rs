//! The default random source on tokio: calls that fail together do not retry together.
//!
//! Sixteen calls each fail once and retry after a fully jittered backoff of up to 100 ms,
//! drawn in microseconds; tokio's timer fires on whole milliseconds (rounding up), so each
//! waits one of 100 lengths, each as likely (a wait of 0 takes a draw of exactly 0). With
//! `Entropy` they all retry after the same wait with a chance of 100^-15.

use deadline_core::policy::{Backoff, Jitter};
use deadline_core::{Outcome, Policy, ms};
use deadline_tokio::low_level::{call, drive};
use deadline_tokio::{Entropy, scope_timeout};
use tokio::time::Instant;

static B: Policy = Policy::required("B")
    .idempotent()
    .with_cap(ms(300))
    .with_floor(ms(10))
    .with_retries(1)
    .with_backoff(
        Backoff::exponential(ms(100))
            .with_max(ms(100))
            .with_jitter(Jitter::Full),
    );

#[tokio::test(start_paused = true)]
async fn sixteen_calls_retry_at_different_instants() {
    let start = Instant::now();
    let mut retries = Vec::new();
    for _ in 0..16 {
        let begun = Instant::now();
        let mut attempts = 0;
        let mut retried_after = None;
        let called = scope_timeout(ms(1_000), async {
            drive(
                call(&B, ms(0)),
                Entropy,
                |_| Outcome::Failed,
                |_| {
                    attempts += 1;
                    if attempts == 2 {
                        retried_after = Some(Instant::now() - begun);
                    }
                    let answer = if attempts == 1 { Err("503") } else { Ok(()) };
                    async move { answer }
                },
            )
            .await
        })
        .await
        .expect("inside its scope");
        assert_eq!(called.result, Ok(()));
        retries.push(retried_after.unwrap());
    }
    assert!(Instant::now() > start);
    retries.sort();
    retries.dedup();
    assert!(retries.len() > 1, "every call retried after {retries:?}");
}
