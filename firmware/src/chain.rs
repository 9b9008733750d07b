//! The checkout example as a request handler: A, then B, then C (optional, with a fallback),
//! then our own work, within the 200 ms the client waits.
//!
//! Each call goes through the core's driver on deadline-embassy's timer, its timeout computed
//! when it starts from the time left: `min(left - reserve, cap)`, the reserve being our own
//! work plus the floors of the required calls still to come. An optional call whose timeout
//! would be under its floor is skipped (its fallback is used); a required one fails the
//! request. The dependencies are embassy timers that answer after their latency.
//!
//! The handler reports each step through `log`, in the trace format of the host examples,
//! with times in whole milliseconds from the request's arrival (the tick is 1 ms).

use core::convert::Infallible;
use core::fmt;
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::drive::Driver;
use deadline_core::{Clock, Deadline, Instant, ms, Outcome, Policy};
use deadline_core::plan::Plan;
use deadline_embassy::{EmbassyTimer, to_embassy};

/// A, user profile: p50 10 ms (the floor), capped at 50 ms. Required.
pub static A: Policy = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
/// B, pricing: p50 30 ms, capped at 110 ms. Required.
pub static B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
/// C, recommendations: p50 25 ms, capped at 60 ms. Optional: it has a fallback.
pub static C: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// The calls, in order.
static DEPENDENCIES: [&Policy; 3] = [&A, &B, &C];
/// How long the client waits for the response.
pub const BUDGET: Duration = ms(200);
/// Our own work after the calls: merging, serializing, the trip back.
pub const OWN_WORK: Duration = ms(20);

/// One run of the handler: how fast the dependencies answer, and the trace it must print.
pub struct Case {
    /// A name for the printout.
    pub name: &'static str,
    /// The latencies of A, B and C.
    pub latency: [Duration; 3],
    /// The trace, line by line, as the worked example has it.
    pub expect: &'static [&'static str],
}

/// The worked example's fast case: A answers in 10 ms, B in 105 ms, C in 25 ms. C gets
/// 60 ms and the response goes out at 160 ms.
pub const FAST: Case = Case {
    name: "fast case",
    latency: [ms(10), ms(105), ms(25)],
    expect: &[
        "fast case: A answers in 10 ms, B in 105 ms, C in 25 ms; the client waits 200 ms, our own work takes 20 ms",
        "    0 ms  A  called, timeout 50 ms",
        "   10 ms  A  answered",
        "   10 ms  B  called, timeout 110 ms",
        "  115 ms  B  answered",
        "  115 ms  C  called, timeout 60 ms",
        "  140 ms  C  answered",
        "  160 ms  response sent: 200",
    ],
};

/// The worked example's slow case: A answers in 48 ms and B in 108 ms, so C would start at
/// 156 ms with 24 ms for it, under its 25 ms floor: C is skipped, and the response goes out
/// at 176 ms.
pub const SLOW: Case = Case {
    name: "slow case",
    latency: [ms(48), ms(108), ms(25)],
    expect: &[
        "slow case: A answers in 48 ms, B in 108 ms, C in 25 ms; the client waits 200 ms, our own work takes 20 ms",
        "    0 ms  A  called, timeout 50 ms",
        "   48 ms  A  answered",
        "   48 ms  B  called, timeout 110 ms",
        "  156 ms  B  answered",
        "  156 ms  C  skipped: 24 ms left for it < its 25 ms floor; fallback used",
        "  176 ms  response sent: 200",
    ],
};

/// `d` in whole milliseconds, rounded to the nearest.
fn millis(d: Duration) -> u64 {
    // Every duration here is far below u64::MAX microseconds.
    let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    micros.saturating_add(500) / 1000
}

/// Handles one request whose dependencies answer as `case` says, reporting each step through
/// `log`. Returns the response's HTTP status: 200, or the status of the error that failed the
/// request.
pub async fn handle(case: &Case, log: &mut dyn FnMut(fmt::Arguments<'_>)) -> u16 {
    let timer = EmbassyTimer;
    let arrival = timer.now();
    let deadline = Deadline::after(arrival, BUDGET);
    let since = |t: Instant| millis(t.saturating_duration_since(arrival));
    let [la, lb, lc] = case.latency.map(millis);
    log(format_args!(
        "{}: A answers in {la} ms, B in {lb} ms, C in {lc} ms; the client waits {} ms, our own work takes {} ms",
        case.name,
        millis(BUDGET),
        millis(OWN_WORK),
    ));

    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    // Slice iterators (two pointers each) keep the request's future small.
    for (policy, &latency) in DEPENDENCIES.iter().zip(&case.latency) {
        let Ok(step) = plan.then(policy) else {
            unreachable!("the plan holds three steps")
        };
        let Some(call) = plan.call(step) else {
            unreachable!("the step was just planned")
        };
        // The checkout example's calls never retry nor hedge: the deadline-only driver
        // carries none of that code.
        let called = Driver::deadline_only(call, timer)
            .run(
                |_: &Infallible| Outcome::Failed,
                |limits| {
                    // The simulated dependency: an embassy timer, timed from the call.
                    let answer = embassy_time::Timer::at(to_embassy(timer.now() + latency));
                    log(format_args!(
                        "{:>5} ms  {}  called, timeout {} ms",
                        since(timer.now()),
                        policy.name,
                        millis(limits.timeout())
                    ));
                    async move {
                        answer.await;
                        Ok::<(), Infallible>(())
                    }
                },
            )
            .await;
        let now = since(timer.now());
        match called.result {
            Ok(()) => log(format_args!("{now:>5} ms  {}  answered", policy.name)),
            Err(CallError::Skipped(s)) => log(format_args!(
                "{now:>5} ms  {}  skipped: {} ms left for it < its {} ms floor; fallback used",
                policy.name,
                millis(s.available()),
                millis(s.floor())
            )),
            // A required call under its floor, or (never, here) a timeout: the request fails
            // with the error's status.
            Err(error) => {
                let status = error.library().map_or(500, |e| e.http_status());
                log(format_args!("{now:>5} ms  {}  failed", policy.name));
                log(format_args!("{now:>5} ms  response sent: {status}"));
                return status;
            }
        }
    }
    embassy_time::Timer::at(to_embassy(timer.now() + OWN_WORK)).await;
    log(format_args!(
        "{:>5} ms  response sent: 200",
        since(timer.now())
    ));
    200
}
