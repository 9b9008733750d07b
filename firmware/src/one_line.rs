//! The checkout example as a request handler on the one-line call: each dependency a
//! `Dependency<Embassy>` static, the request's calls a `Steps` static, and each call
//! `DEP.run(|limits| ..).in_plan(&STEPS).await` inside the request's scope, as the README
//! recommends.
//!
//! The handler reports each step through `log`, in the trace format of the host examples, with
//! times in whole milliseconds from the request's arrival (the tick is 1 ms). A call that took
//! retries or hedges says so, from the dependency's own counters.

use core::fmt;
use core::future::IntoFuture;
use core::pin::pin;

use deadline_core::drive::{CallError, Mode, scope_timeout};
use deadline_core::{Clock, CounterSnapshot, Instant, Limits, Steps};
use deadline_embassy::{Embassy, EmbassyTimer, to_embassy};

use crate::checkout::{BUDGET, Case, Reply, millis};

/// The error of a simulated attempt that fails: a refusal, worth retrying.
#[derive(Debug)]
pub struct Refused;

/// What one request left behind: the response's status and the size of one call's future.
#[derive(Clone, Copy, Debug)]
pub struct Handled {
    /// The response's HTTP status: 200, or the status of the error that failed the request.
    pub status: u16,
    /// `size_of_val` of the future of one call (`DEP.run(..).in_plan(..)` awaited).
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
    scope_timeout::<Embassy, _>(BUDGET, calls(steps, case, log, arrival)).await
}

/// The request's calls, then its own work, inside its scope.
async fn calls<M: Mode>(
    steps: &'static Steps<'static, 'static, Embassy, 3, M>,
    case: &Case,
    log: &mut dyn FnMut(fmt::Arguments<'_>),
    arrival: Instant,
) -> Handled {
    let timer = EmbassyTimer;
    let since = |t: Instant| millis(t.saturating_duration_since(arrival));
    let names = steps.dependencies().map(|d| d.name());
    case.headline(names, log);
    let mut call_future = 0;
    // A slice iterator (two pointers) keeps the request's future small.
    for (i, &dep) in steps.dependencies().iter().enumerate() {
        let before = dep.counters().snapshot();
        let result = {
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
                        millis(limits.timeout())
                    ));
                    attempt(now, reply)
                })
                .in_plan(steps)
                .into_future()
            );
            call_future = core::mem::size_of_val(&*call);
            call.await
        };
        let now = since(timer.now());
        let name = dep.name();
        match result {
            Ok(()) => {
                let made = dep.counters().snapshot().since(&before);
                log(format_args!("{now:>5} ms  {name}  answered{}", Extra(made)));
            }
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
/// `reply` says.
async fn attempt(now: Instant, reply: Reply) -> Result<(), Refused> {
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

/// What a call did besides its first attempt, from its dependency's counters: nothing for a
/// call that took one attempt, `" after 1 retry"`, `" by its hedge (1 hedge)"` and so on.
struct Extra(CounterSnapshot);

impl fmt::Display for Extra {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let made = &self.0;
        if made.hedge_wins > 0 {
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
