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

use core::fmt;

use deadline_core::CallError;
use deadline_core::drive::Driver;
use deadline_core::plan::Plan;
use deadline_core::{Clock, Deadline, Instant, Outcome, Policy};
use deadline_embassy::{EmbassyTimer, to_embassy};

use crate::checkout::{self, BUDGET, Case, OWN_WORK, Reply, millis, millis_of, since};
use crate::one_line::Refused;

/// A, B and C's policies, as statics: the plan holds references to them.
static A: Policy = checkout::A;
/// B's policy.
static B: Policy = checkout::B;
/// C's policy.
static C: Policy = checkout::C;
/// The calls, in order.
static DEPENDENCIES: [&Policy; 3] = [&A, &B, &C];

/// Handles one request whose dependencies answer as `case` says, reporting each step through
/// `log`. Returns the response's HTTP status: 200, or the status of the error that failed the
/// request.
pub async fn handle(case: &Case, log: &mut dyn FnMut(fmt::Arguments<'_>)) -> u16 {
    let timer = EmbassyTimer;
    let arrival = timer.now();
    let deadline = Deadline::after(arrival, BUDGET);
    let since = |t: Instant| since(arrival, t);
    case.headline(DEPENDENCIES.map(|p| p.name()), log);

    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    // Slice iterators (two pointers each) keep the request's future small.
    for (i, policy) in DEPENDENCIES.iter().enumerate() {
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
                |_: &Refused| Outcome::Failed,
                |limits| {
                    // The simulated dependency: an embassy timer, timed from the call.
                    let reply = case.reply(i, 0);
                    let now = timer.now();
                    log(format_args!(
                        "{:>5} ms  {}  called, timeout {} ms",
                        since(now),
                        policy.name(),
                        millis_of(limits.timeout_micros())
                    ));
                    async move {
                        match reply {
                            Reply::Answer(d) => {
                                embassy_time::Timer::at(to_embassy(now + d)).await;
                                Ok(())
                            }
                            Reply::Fail(d) => {
                                embassy_time::Timer::at(to_embassy(now + d)).await;
                                Err(Refused)
                            }
                            Reply::Stall => core::future::pending().await,
                        }
                    }
                },
            )
            .await;
        let now = since(timer.now());
        match called.result {
            Ok(()) => log(format_args!("{now:>5} ms  {}  answered", policy.name())),
            Err(CallError::Skipped(s)) => log(format_args!(
                "{now:>5} ms  {}  skipped: {} ms left for it < its {} ms floor; fallback used",
                policy.name(),
                millis(s.available()),
                millis(s.floor())
            )),
            // A required call under its floor, or (never, here) a timeout: the request fails
            // with the error's status.
            Err(error) => {
                let status = error.library().map_or(500, |e| e.http_status());
                log(format_args!("{now:>5} ms  {}  failed", policy.name()));
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
