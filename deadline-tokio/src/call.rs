//! One dependency call run by the core's driver on tokio, under the current deadline.

use core::future::Future;
use core::time::Duration;

use deadline_core::call::{Call, Limits};
use deadline_core::drive::{Called, Driver};
use deadline_core::rng::Rng;
use deadline_core::{Outcome, Policy};

use crate::clock::TokioTimer;
use crate::context::{Tokio, current_or_never};

/// A [`Call`] to `policy`'s dependency under the current deadline (see [`crate::scope`]),
/// keeping `reserve` for the work after it. Outside any scope the deadline never comes, so
/// the call gets the policy's cap.
#[inline]
pub fn call<'p>(policy: &'p Policy<'p>, reserve: Duration) -> Call<'p> {
    Call::new(policy, current_or_never(), reserve)
}

/// Runs one dependency call through the core's [`Driver`] on [`TokioTimer`]: timeouts,
/// retries, backoff and hedges as the policy says, within the call's deadline.
///
/// `rng` draws the backoff's jitter: pass [`Entropy`](crate::Entropy) (seeded from the
/// operating system, so calls do not retry in step), and a seeded generator only in tests.
///
/// Each attempt runs in a [`scope`](crate::scope) with the attempt's own deadline ([`Limits::deadline`]),
/// so calls made inside it inherit the shorter deadline. Everything lives in the returned
/// future (no allocation, no spawned task): an attempt that loses a hedge race or times out
/// is dropped, and dropping the returned future drops every attempt still running.
///
/// ```
/// use deadline_core::{Outcome, Policy, ms};
/// use deadline_tokio::{Entropy, remaining, scope_timeout};
/// use deadline_tokio::low_level::{call, drive};
///
/// static PRICING: Policy = Policy::required("pricing").with_cap(ms(110)).with_floor(ms(30));
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let called = scope_timeout(ms(200), async {
///     drive(call(&PRICING, ms(20)), Entropy, |_| Outcome::Failed, |_| async {
///         // Inside the attempt, the deadline is the attempt's: min(200 - 20, 110) = 110 ms.
///         let left = remaining();
///         tokio::time::sleep(ms(30)).await; // the dependency's latency
///         Ok::<_, &str>(left)
///     })
///     .await
/// })
/// .await
/// .expect("inside its scope");
/// assert_eq!(called.result, Ok(Some(ms(110))));
/// # }
/// ```
#[inline]
pub fn drive<'c, R, A, F, T, E, C>(
    call: Call<'c>,
    rng: R,
    classify: C,
    attempt: A,
) -> impl Future<Output = Called<T, E>> + use<'c, R, A, F, T, E, C>
where
    R: Rng,
    A: FnMut(Limits) -> F,
    F: Future<Output = Result<T, E>>,
    C: FnMut(&E) -> Outcome,
{
    // The attempt function itself runs inside the attempt's scope, as its future does.
    Driver::new(call, TokioTimer, rng).run_scoped::<Tokio, _, _, _, _, _>(classify, attempt)
}
