//! The checkout example's chain as a request handler: A, then B, then C (optional), then our own work,
//! within the 200 ms the client waits.
//!
//! Each call goes through the core's driver with its timeout computed when it starts, from the
//! time left: `min(left - reserve, cap)`, the reserve being our own work plus the floors of
//! the required calls still to come. A call whose timeout would be under its floor is not
//! made: an optional one is skipped (its fallback is used), a required one fails the request.
//!
//! The handler is generic over the runtime's [`Timer`]; the dependencies are simulated on the
//! same timer ([`crate::sim`]). It reports each step through `log`, with times in milliseconds
//! from the request's arrival, rounded to the nearest millisecond.
//!
//! [`check`] compares how a request ended with what its [`Case`] expects: the status and
//! which dependencies were called, never the times. On a real timer the times drift by a
//! millisecond or so; the decisions do not (see [`check`]).

use core::convert::Infallible;
use core::fmt;
use core::time::Duration;

use deadline_core::CallError;
use deadline_core::drive::Driver;
use deadline_core::plan::Plan;
use deadline_core::rng::Rng;
use deadline_core::{Deadline, Instant, Outcome, Policy, Timer, ms};

use crate::sim;

/// A, user profile: p50 10 ms (the floor), p99.9 40 ms, capped at 50 ms. Required.
pub static A: Policy = Policy::required("A").with_cap(ms(50)).with_floor(ms(10));
/// B, pricing: p50 30 ms, p99.9 90 ms, capped at 110 ms. Required.
pub static B: Policy = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
/// C, recommendations: p50 25 ms, p99.9 120 ms, capped at 60 ms (less than its p99.9: it has
/// a fallback, so a page that loads sooner is worth more false timeouts). Optional.
pub static C: Policy = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// How long the client waits for the response.
pub const BUDGET: Duration = ms(200);
/// Our own work after the calls: merging, serializing, the trip back.
pub const OWN_WORK: Duration = ms(20);

/// How fast the dependencies answer in one run of the handler, and how the request must end.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// A name for the printout.
    pub name: &'static str,
    /// The latencies of A, B and C.
    pub latency: [Duration; 3],
    /// How the request must end, on any timer.
    pub expect: Expect,
}

/// How a request ends, apart from its times: what [`check`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    /// The response's HTTP status.
    pub status: u16,
    /// Whether A, B and C (in that order) were called.
    pub called: [bool; 3],
}

/// The checkout example: A answers in 10 ms, B in 105 ms, C in 25 ms. All three are called and
/// the request is answered.
pub const FAST: Case = Case {
    name: "fast case",
    latency: [ms(10), ms(105), ms(25)],
    expect: Expect {
        status: 200,
        called: [true, true, true],
    },
};

/// The checkout example's slow case: A answers in 48 ms and B in 108 ms, so C would start at 156 ms with
/// 24 ms for it, under its 25 ms floor: C is skipped, and the request is answered.
pub const SLOW: Case = Case {
    name: "slow case",
    latency: [ms(48), ms(108), ms(25)],
    expect: Expect {
        status: 200,
        called: [true, true, false],
    },
};

/// How the request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// When the response went out, from the request's arrival.
    pub at: Duration,
    /// Its HTTP status: 200, or the status of the error that failed the request.
    pub status: u16,
    /// Whether A, B and C (in that order) were called.
    pub called: [bool; 3],
}

impl Response {
    /// How it ended, apart from its time.
    #[must_use]
    pub const fn ending(&self) -> Expect {
        Expect {
            status: self.status,
            called: self.called,
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "status {}, called:", self.status)?;
        let names = [A.name(), B.name(), C.name()];
        let mut any = false;
        for (name, called) in names.into_iter().zip(self.called) {
            if called {
                write!(f, " {name}")?;
                any = true;
            }
        }
        if !any {
            write!(f, " none")?;
        }
        Ok(())
    }
}

/// Whether `response` ended as `case` expects (its status, and which dependencies were
/// called); on a mismatch, a message that says what was expected and what happened.
///
/// Only decisions are compared, and on a real timer they hold whatever the timer's drift:
///
/// - A simulated dependency answers when the clock reads its due instant, and no runtime
///   wakes a sleep before its instant, so nothing happens earlier than in the worked example; a late
///   wake only moves later instants later.
/// - An attempt times out only if, at the driver's poll, the clock has reached its timeout's
///   end while the dependency (polled first, reading the clock after the driver) has not
///   reached its answer. The answer is due `latency` after the attempt starts, the timeout
///   `timeout` after the decision: the dependencies here answer 2 ms (A and B, slow case) to
///   5 ms (B, fast case) before their timeouts, so a timeout needs the thread to stall that
///   long between the decision and the dependency's start, a few instructions apart.
/// - The slow case's skip of C has a 1 ms margin (24 ms < 25 ms floor), but in one direction
///   only: C's time is computed from the real clock when B has answered, at least 156 ms
///   after the arrival; any lateness makes that later and C's time smaller, so C stays
///   skipped.
/// - The fast case's C is called unless it starts over 40 ms late (of the 65 ms left after
///   our own work it needs its 25 ms floor); B's timeout stays at its 110 ms cap unless A
///   answers over 60 ms late (fast case) or over 22 ms late (slow case).
///
/// # Errors
///
/// The mismatch, as a sentence.
pub fn check(case: &Case, response: &Response) -> Result<(), String> {
    let got = response.ending();
    if got == case.expect {
        Ok(())
    } else {
        Err(format!(
            "{}: expected {}, got {}",
            case.name, case.expect, got
        ))
    }
}

/// `d` in whole milliseconds, rounded to the nearest.
fn millis(d: Duration) -> u128 {
    d.as_micros().saturating_add(500) / 1000
}

/// Handles one request whose dependencies answer as `case` says; reports each step through
/// `log` and returns how the request ended. `rng` draws any backoff's jitter: the runtime's
/// default random source in a program, a seeded one in a test.
pub async fn handle<T: Timer + Copy, R: Rng>(
    timer: T,
    rng: &mut R,
    case: &Case,
    log: &mut dyn FnMut(fmt::Arguments<'_>),
) -> Response {
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

    let policies = [&A, &B, &C];
    let mut made = [false; 3];
    let mut plan: Plan<'_, 3> = Plan::new(deadline, OWN_WORK);
    for (i, (policy, latency)) in policies.into_iter().zip(case.latency).enumerate() {
        let Ok(step) = plan.then(policy) else {
            unreachable!("the plan holds three steps")
        };
        let Some(call) = plan.call(step) else {
            unreachable!("the step was just planned")
        };
        let called = Driver::new(call, timer, &mut *rng)
            .run(
                |_| Outcome::Failed,
                |limits| {
                    // The dependency's answer is timed from here, before the printout.
                    let answer =
                        sim::dependency(timer, latency, Ok::<_, Infallible>(policy.name()));
                    log(format_args!(
                        "{:>5} ms  {}  called, timeout {} ms",
                        since(timer.now()),
                        policy.name(),
                        millis(limits.timeout())
                    ));
                    answer
                },
            )
            .await;
        if let Some(was_called) = made.get_mut(i) {
            *was_called = called.report.was_called();
        }
        let now = since(timer.now());
        match called.result {
            Ok(_) => log(format_args!("{now:>5} ms  {}  answered", policy.name())),
            Err(CallError::Skipped(s)) => log(format_args!(
                "{now:>5} ms  {}  skipped: {} ms left for it < its {} ms floor; fallback used",
                policy.name(),
                millis(s.available()),
                millis(s.floor())
            )),
            Err(CallError::Library(error)) => {
                log(format_args!(
                    "{now:>5} ms  {}  failed: {error}",
                    policy.name()
                ));
                log(format_args!(
                    "{now:>5} ms  response sent: {} ({error})",
                    error.http_status()
                ));
                return Response {
                    at: timer.now().saturating_duration_since(arrival),
                    status: error.http_status(),
                    called: made,
                };
            }
            Err(other) => unreachable!("the simulated dependencies never fail: {other:?}"),
        }
    }
    sim::until(timer, timer.now().saturating_add(OWN_WORK)).await;
    let at = timer.now().saturating_duration_since(arrival);
    log(format_args!("{:>5} ms  response sent: 200", millis(at)));
    Response {
        at,
        status: 200,
        called: made,
    }
}
