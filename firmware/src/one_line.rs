//! The checkout example as a request handler on the one-line call: each dependency a
//! `Dependency<Embassy>` static, the request's calls a `Steps` static, and each call
//! `DEP.run(|limits| ..).in_plan(&STEPS).await` inside the request's scope, as the README
//! recommends.
//!
//! The handler reports each step through `log`, in the trace format of the host examples, with
//! times in whole milliseconds from the request's arrival (the tick is 1 ms). A call that took
//! retries or hedges says so, from the dependency's own counters.

use core::fmt;
use core::future::{Future, IntoFuture};
use core::pin::pin;

use deadline_core::CallError;
use deadline_core::call::Limits;
use deadline_core::drive::{AnyErrorFails, Mode, Report};
use deadline_core::run::RunFuture;
use deadline_core::runtime::scope_timeout;
use deadline_core::{Clock, Dependency, Instant, Steps};
use deadline_embassy::{Embassy, EmbassyTimer, Entropy, to_embassy};

use crate::checkout::{BUDGET, Case, Reply, millis, millis_of, since};

/// The error of a simulated attempt that fails: a refusal, worth retrying.
#[derive(Debug)]
pub struct Refused;

/// What one request left behind: the response's status and the size of one of its calls'
/// futures.
#[derive(Clone, Copy, Debug)]
pub struct Handled {
    /// The response's HTTP status: 200, or the status of the error that failed the request.
    pub status: u16,
    /// `size_of_val` of the future of one traced call (`DEP.run(..).in_plan(..)` awaited,
    /// with the attempt function that logs and simulates the dependency).
    pub call_future: usize,
}

/// Handles one request whose dependencies (`steps`, in order) answer as `case` says, within
/// the checkout example's budget, reporting each step through `log`.
pub async fn handle<M: Mode>(
    steps: &'static Steps<'static, 'static, Embassy, 3, M>,
    case: &Case,
    log: &mut dyn FnMut(fmt::Arguments<'_>),
) -> Handled {
    let arrival = EmbassyTimer.now();
    // The scope cut at the deadline answers the deadline's status.
    scope_timeout::<Embassy, _>(BUDGET, calls(steps, case, log, arrival))
        .await
        .unwrap_or_else(|cut| Handled {
            status: cut.http_status(),
            call_future: 0,
        })
}

/// The request's calls, then its own work, inside its scope.
async fn calls<M: Mode>(
    steps: &'static Steps<'static, 'static, Embassy, 3, M>,
    case: &Case,
    log: &mut dyn FnMut(fmt::Arguments<'_>),
    arrival: Instant,
) -> Handled {
    let timer = EmbassyTimer;
    let since = |t: Instant| since(arrival, t);
    let names = steps.dependencies().map(|d| d.name());
    case.headline(names, log);
    let mut call_future = 0;
    // A slice iterator (two pointers) keeps the request's future small.
    for (i, &dep) in steps.dependencies().iter().enumerate() {
        let called = {
            let mut n = 0;
            let call = pin!(
                dep.run(|limits: Limits| {
                    let reply = case.reply(i, n);
                    n += 1;
                    let now = timer.now();
                    log(format_args!(
                        "{:>5} ms  {}  called, timeout {} ms",
                        since(now),
                        dep.name(),
                        millis_of(limits.timeout_micros())
                    ));
                    attempt(now, reply)
                })
                .in_plan(steps)
                .report()
                .into_future()
            );
            call_future = core::mem::size_of_val(&*call);
            call.await
        };
        let now = since(timer.now());
        let name = dep.name();
        match called.result {
            Ok(()) => log(format_args!(
                "{now:>5} ms  {name}  answered{}",
                Extra(called.report)
            )),
            Err(CallError::Skipped(s)) => log(format_args!(
                "{now:>5} ms  {name}  skipped: {} ms left for it < its {} ms floor; fallback used",
                millis(s.available()),
                millis(s.floor())
            )),
            // A required call under its floor, a call that timed out or failed: the request
            // fails with the error's status.
            Err(error) => {
                let status = error.library().map_or(502, |e| e.http_status());
                log(format_args!("{now:>5} ms  {name}  failed"));
                log(format_args!("{now:>5} ms  response sent: {status}"));
                return Handled {
                    status,
                    call_future,
                };
            }
        }
    }
    embassy_time::Timer::at(to_embassy(timer.now() + crate::checkout::OWN_WORK)).await;
    log(format_args!(
        "{:>5} ms  response sent: 200",
        since(timer.now())
    ));
    Handled {
        status: 200,
        call_future,
    }
}

/// One attempt of a simulated dependency started at `now`: it answers, fails or stalls as
/// `reply` says. It keeps the instant it ends and its answer.
fn attempt(now: Instant, reply: Reply) -> impl Future<Output = Result<(), Refused>> {
    let (end, answer) = match reply {
        Reply::Answer(d) => (Some(to_embassy(now + d)), Ok(())),
        Reply::Fail(d) => (Some(to_embassy(now + d)), Err(Refused)),
        Reply::Stall => (None, Ok(())),
    };
    async move {
        match end {
            Some(end) => {
                embassy_time::Timer::at(end).await;
                answer
            }
            None => core::future::pending().await,
        }
    }
}

/// The size of the future of `dep.run(attempt).in_plan(..)` awaited (a [`RunFuture`]),
/// without making one.
fn call_future_size<'d, 'n, M, A, F, T, E>(
    _dep: &'d Dependency<'n, Embassy, M>,
    _attempt: &A,
) -> usize
where
    M: Mode,
    A: FnMut(Limits) -> F,
    F: Future<Output = Result<T, E>>,
{
    core::mem::size_of::<RunFuture<'d, 'n, Embassy, A, AnyErrorFails, Entropy, F, T, E, M>>()
}

/// The size of one call's future with the smallest attempt: an embassy timer (the library's
/// share of a call, with a dependency that is one timer), A's call in `steps`.
pub fn one_call_future<M: Mode>(steps: &'static Steps<'static, 'static, Embassy, 3, M>) -> usize {
    let attempt = |_: Limits| async {
        embassy_time::Timer::after_millis(10).await;
        Ok::<(), Refused>(())
    };
    call_future_size(steps.dependencies()[0], &attempt)
}

/// What a call did besides its first attempt, from its report: nothing for a call that took
/// one attempt, `" after 1 retry"`, `" by its hedge (1 hedge sent)"` and so on.
struct Extra(Report);

impl fmt::Display for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let made = &self.0;
        if made.hedge_won {
            f.write_str(" by its hedge")?;
        }
        if made.retries > 0 {
            let s = if made.retries == 1 { "y" } else { "ies" };
            write!(f, " after {} retr{s}", made.retries)?;
        }
        if made.hedges > 0 {
            let s = if made.hedges == 1 { "" } else { "s" };
            write!(f, " ({} hedge{s} sent)", made.hedges)?;
        }
        Ok(())
    }
}
