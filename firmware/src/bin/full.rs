//! The checkout example on the one-line call in full mode: A retries once after a 5 ms
//! backoff, B hedges after its live p95 (after 110 ms, never within its timeout, until its
//! histogram holds enough latencies), C is as in the worked example; all three draw from the
//! default retry budget.
//!
//! It runs the worked example's fast and slow cases (no retry or hedge is due: the same trace),
//! then 62 requests in which B answers in 20 ms (its live p95 is read from them), then a case in
//! which A's first attempt fails and is retried, and B's first attempt stalls and its hedge,
//! sent after the live p95, answers: every trace checked line by line.

#![no_std]
#![no_main]

use core::fmt;
use core::pin::pin;

use cortex_m_rt::entry;
use cortex_m_semihosting::hprintln;
use deadline_core::policy::Backoff;
use deadline_core::{Dependency, Steps, ms};
use deadline_embassy::Embassy;
use deadline_firmware::checkout::{self, Case, FAST, OWN_WORK, Reply, SLOW, millis};
use deadline_firmware::trace::Trace;
use deadline_firmware::{Sizes, executor, fail, finish, one_line, start_clock};

/// A, user profile: one retry, 5 ms after a failure.
static A: Dependency<Embassy> = Dependency::new(
    checkout::A
        .idempotent()
        .with_retries(1)
        .with_backoff(Backoff::constant(ms(5))),
);
/// B, pricing: a hedged copy after the live p95, or after 110 ms (its cap: never) until the
/// histogram holds enough latencies.
static B: Dependency<Embassy> =
    Dependency::new(checkout::B.idempotent().with_hedge_at_p95(ms(110)));
/// C, recommendations (optional).
static C: Dependency<Embassy> = Dependency::new(checkout::C);
/// The request's calls in order, and its own work after them: each call's reserve.
static STEPS: Steps<Embassy, 3> = Steps::new([&A, &B, &C]).own_work(OWN_WORK);

/// Requests before the faults case in which every call answers at once, B in 20 ms: with
/// the worked example's two cases, 64 latencies of B, when its live p95 is read again.
const WARM_REQUESTS: u32 = 62;
/// The warm-up's requests: A, B and C answer their first attempts, B in 20 ms.
const WARM: Case = Case {
    name: "warm-up",
    replies: [
        &[Reply::Answer(ms(10))],
        &[Reply::Answer(ms(20))],
        &[Reply::Answer(ms(25))],
    ],
    expect: &[],
};

/// A's first attempt fails and is retried after its 5 ms backoff; B's first attempt stalls,
/// its hedge goes out after the live p95 and answers; C answers.
///
/// B's live p95 is the upper bound of the bucket that holds its 20 ms warm-up latencies: in
/// the compact histogram a dependency keeps on these targets (units of 1.024 ms), 20 ms is 20
/// units (19.53, rounded up), in the bucket of 20 and 21 units, so the hedge waits 21.504 ms:
/// sent at 17 + 21.504 ms, on the first tick after it, 39 ms.
const FAULTS: Case = Case {
    name: "faults case",
    replies: [
        &[Reply::Fail(ms(2)), Reply::Answer(ms(10))],
        &[Reply::Stall, Reply::Answer(ms(20))],
        &[Reply::Answer(ms(25))],
    ],
    expect: &[
        "faults case: A fails in 2 ms then answers in 10 ms, B stalls then answers in 20 ms, C answers in 25 ms; the client waits 200 ms, our own work takes 20 ms",
        "    0 ms  A  called, timeout 50 ms",
        "    7 ms  A  called, timeout 50 ms",
        "   17 ms  A  answered after 1 retry",
        "   17 ms  B  called, timeout 110 ms",
        "   39 ms  B  called, timeout 110 ms",
        "   59 ms  B  answered by its hedge (1 hedge sent)",
        "   59 ms  C  called, timeout 60 ms",
        "   84 ms  C  answered",
        "  104 ms  response sent: 200",
    ],
};

/// The line the warm-up must print: B's live hedge delay read from its histogram.
const WARMED: &[&str] =
    &["warm-up: 62 requests, B answering in 20 ms; B now hedges after 21.504 ms, its live p95"];

#[entry]
fn main() -> ! {
    executor::run(|spawner| match app() {
        Ok(task) => spawner.spawn(task),
        Err(_) => fail("the application task is already running"),
    })
}

/// The application: the worked example's cases, the warm-up, the faults case, each checked,
/// then the measurements.
#[embassy_executor::task]
async fn app() {
    start_clock();
    let mut ok = true;
    let mut sizes = Sizes {
        call: Some(one_line::one_call_future(&STEPS)),
        ..Sizes::default()
    };
    for case in [&FAST, &SLOW] {
        let mut trace = Trace::new(case.expect);
        let mut log = |line: fmt::Arguments<'_>| trace.line(line);
        let handled = {
            let request = pin!(one_line::handle(&STEPS, case, &mut log));
            sizes.request = core::mem::size_of_val(&*request);
            request.await
        };
        sizes.traced_call = Some(handled.call_future);
        ok &= trace.finish() && handled.status == 200;
    }

    // The same handler as the traced requests (one copy of the call's code), its lines not
    // printed.
    for _ in 0..WARM_REQUESTS {
        let handled = pin!(one_line::handle(&STEPS, &WARM, &mut |_| {})).await;
        ok &= handled.status == 200;
    }
    let mut trace = Trace::new(WARMED);
    match B.live_hedge_delay() {
        Some(delay) => {
            let us = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
            trace.line(format_args!(
                "warm-up: {WARM_REQUESTS} requests, B answering in {} ms; B now hedges after {}.{:03} ms, its live p95",
                millis(ms(20)),
                us / 1000,
                us % 1000
            ));
        }
        None => hprintln!("warm-up: B has no live hedge delay"),
    }
    ok &= trace.finish();

    let mut trace = Trace::new(FAULTS.expect);
    let mut log = |line: fmt::Arguments<'_>| trace.line(line);
    let handled = pin!(one_line::handle(&STEPS, &FAULTS, &mut log)).await;
    ok &= trace.finish() && handled.status == 200;

    finish(ok, sizes);
}
