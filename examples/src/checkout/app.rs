//! The checkout handler, written once: the application module that every runtime compiles.
//!
//! It names its runtime `Rt` (from the module around it) and nothing else of it: the
//! dependencies are `static`s, the request's plan is a `static`, and each call is one line.
//! The dependencies are simulated on the runtime's own timer; each answers
//! with the timeout its call was given, so the page shows the decisions.

use core::convert::Infallible;
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::runtime::{Runtime, scope_timeout};
use deadline_core::{Clock, Dependency, Policy, Steps, Timer, ms};

use super::Rt;
use crate::checkout::Page;

/// A, user profile: p50 10 ms (the floor), p99.9 40 ms, capped at 50 ms. Required.
pub static A: Dependency<Rt> =
    Dependency::new(Policy::required("A").with_cap(ms(50)).with_floor(ms(10)));
/// B, pricing: p50 30 ms, p99.9 90 ms, capped at 110 ms. Required.
pub static B: Dependency<Rt> =
    Dependency::new(Policy::required("B").with_cap(ms(110)).with_floor(ms(30)));
/// C, recommendations: capped at 60 ms, floor 25 ms. Optional: it has a fallback.
pub static C: Dependency<Rt> =
    Dependency::new(Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)));
/// The request calls A, then B, then C, and has 20 ms of its own work after them.
pub static CHECKOUT: Steps<Rt, 3> = Steps::new([&A, &B, &C]).own_work(ms(20));

/// A simulated dependency: it answers after `latency`, asleep on the runtime's timer, with
/// the timeout it was given.
async fn answer(latency: Duration, timeout: Duration) -> Result<Duration, Infallible> {
    let timer = Rt::timer();
    timer.sleep_until(timer.now().saturating_add(latency)).await;
    Ok(timeout)
}

/// The handler: three calls, one line each, under the request's current deadline.
///
/// # Errors
///
/// The first required call that fails.
pub async fn checkout(latency: [Duration; 3]) -> Result<Page, CallError<Infallible>> {
    let [la, lb, lc] = latency;
    let profile = A
        .run(|l| answer(la, l.timeout()))
        .in_plan(&CHECKOUT)
        .await?;
    let price = B
        .run(|l| answer(lb, l.timeout()))
        .in_plan(&CHECKOUT)
        .await?;
    let recommendations = C
        .run(|l| answer(lc, l.timeout()))
        .in_plan(&CHECKOUT)
        .await
        .ok();
    Ok(Page {
        profile,
        price,
        recommendations,
    })
}

/// One request with 200 ms, as the server's layer would set it.
///
/// # Errors
///
/// As [`checkout`].
pub async fn request(latency: [Duration; 3]) -> Result<Page, CallError<Infallible>> {
    // The scope cut at the deadline is the library's deadline error, as the call's own is.
    scope_timeout::<Rt, _>(ms(200), checkout(latency))
        .await
        .unwrap_or_else(|cut| Err(CallError::Library(cut)))
}
