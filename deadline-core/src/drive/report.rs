//! What a driven call returns: [`Called`], with its result and a [`Report`].

use core::fmt;
use core::time::Duration;

use crate::call_timeout::Shortfall;
use crate::counters::{CounterEvent, Counters};
use crate::error::Error;
use crate::retry::GiveUp;
use crate::time::Instant;

/// The end of one driven call: its result and a report of what it took.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
#[must_use]
pub struct Called<T, E> {
    /// The winning attempt's value, or why there is none.
    pub result: Result<T, CallError<E>>,
    /// Attempts, hedges, timeouts and the rest, for counters and traces.
    pub report: Report,
}

impl<T, E> Called<T, E> {
    /// A call's end, for a driver outside this crate (such as a blocking one).
    pub const fn new(result: Result<T, CallError<E>>, report: Report) -> Self {
        Called { result, report }
    }

    /// The value, or `fallback` on any failure: what an optional dependency does.
    #[must_use]
    pub fn or_fallback(self, fallback: T) -> T {
        self.result.unwrap_or(fallback)
    }

    /// Whether the call was made and ended because the request's deadline ran out: the
    /// deadline had passed when it gave up ([`Error::DeadlineExceeded`]), or too little time
    /// was left for another attempt ([`GiveUp::BackoffPastDeadline`],
    /// [`GiveUp::UnderFloor`], [`GiveUp::DeadlinePassed`], [`GiveUp::NothingToSend`]),
    /// whatever the last attempt's failure, which the call returns.
    ///
    /// A call that gave up with time to spare (its attempts exhausted, a call that may have
    /// run, a server's "do not retry", the retry budget, the breaker) did not, even when its
    /// last attempt timed out: that is a dependency too slow for its cap, not a deadline too
    /// short. Neither did a call that was not made (see [`CounterEvent::Skipped`]).
    #[must_use]
    pub fn is_deadline_exceeded(&self) -> bool {
        if self.result.is_ok() || !self.report.was_called() {
            return false;
        }
        matches!(
            self.result,
            Err(CallError::Library(Error::DeadlineExceeded))
        ) || matches!(
            self.report.gave_up,
            Some(
                GiveUp::BackoffPastDeadline { .. }
                    | GiveUp::UnderFloor(_)
                    | GiveUp::DeadlinePassed
                    | GiveUp::NothingToSend
            )
        )
    }

    /// Adds this call to a dependency's [`Counters`]: one [`CounterEvent::Call`]; a success; each
    /// attempt timeout, retry, hedge, budget refusal and breaker rejection; a hedge win;
    /// [`CounterEvent::Skipped`] when the call was not made for want of time (optional or
    /// required); [`CounterEvent::DeadlineExceeded`] when a call that was made ended because the
    /// deadline ran out ([`is_deadline_exceeded`](Called::is_deadline_exceeded)).
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, ms, Outcome, Policy};
    /// use deadline_core::call::{Call, Limits};
    /// use deadline_core::observe::Counters;
    /// use deadline_core::policy::Backoff;
    /// use deadline_core::rng::SplitMix64;
    /// use deadline_core::drive::Driver;
    /// use deadline_core::virtual_time::ManualTimer;
    ///
    /// // A dependency that never answers.
    /// let hang = |_: Limits| core::future::pending::<Result<(), ()>>();
    /// let counters = Counters::new();
    ///
    /// // Called with 50 ms left and a 100 ms cap: its timeout is the time left, and the
    /// // deadline passes with it.
    /// let timer = ManualTimer::new();
    /// let dep = Policy::required("D").with_cap(ms(100)).with_floor(ms(10));
    /// let call = Call::new(&dep, Deadline::after(Instant::ZERO, ms(50)), ms(0));
    /// let called = timer
    ///     .run(Driver::new(call, &timer, SplitMix64::new(1)).run(|_| Outcome::Failed, hang))
    ///     .unwrap();
    /// called.record(&counters);
    /// let snap = counters.snapshot();
    /// assert_eq!((snap.calls, snap.timeouts, snap.deadline_exceeded), (1, 1, 1));
    ///
    /// // Called with 500 ms left and a 100 ms cap, two attempts: both time out, and the call
    /// // gives up with 290 ms to spare. Two timeouts, but the deadline was not exceeded.
    /// let timer = ManualTimer::new();
    /// let dep = dep.idempotent().with_retries(1).with_backoff(Backoff::constant(ms(10)));
    /// let call = Call::new(&dep, Deadline::after(Instant::ZERO, ms(500)), ms(0));
    /// let called = timer
    ///     .run(Driver::new(call, &timer, SplitMix64::new(1)).run(|_| Outcome::Failed, hang))
    ///     .unwrap();
    /// called.record(&counters);
    /// let snap = counters.snapshot();
    /// assert_eq!((snap.calls, snap.timeouts, snap.deadline_exceeded), (2, 3, 1));
    /// assert_eq!(snap.deadline_exceeded_rate(), 0.5);
    /// ```
    pub fn record(&self, counters: &Counters) {
        let report = &self.report;
        report.record_steps(counters);
        match &self.result {
            Ok(_) => {
                counters.record(CounterEvent::Success);
                if report.hedge_won {
                    counters.record(CounterEvent::HedgeWin);
                }
            }
            Err(CallError::Skipped(_)) => counters.record(CounterEvent::Skipped),
            Err(CallError::Library(e)) if e.is_deadline() && !report.was_called() => {
                counters.record(CounterEvent::Skipped);
            }
            Err(_) => {
                if self.is_deadline_exceeded() {
                    counters.record(CounterEvent::DeadlineExceeded);
                }
            }
        }
    }
}

/// Why a driven call has no value.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum CallError<E> {
    /// An optional dependency was not called: its timeout at the start was under its floor.
    /// Use the fallback. The attempt function was never invoked.
    Skipped(Shortfall),
    /// The last attempt failed with the dependency's own error and no retry followed
    /// ([`Report::gave_up`] says why).
    Attempt(E),
    /// The call ended on one of the library's errors:
    ///
    /// - [`Error::InsufficientTime`] or [`Error::DeadlineExceeded`]: a required dependency
    ///   was not called, its timeout at the start being under its floor (the attempt
    ///   function was never invoked);
    /// - [`Error::CircuitOpen`]: the dependency's circuit breaker refused the first attempt
    ///   (the attempt function was never invoked);
    /// - [`Error::Timeout`]: the last attempt's timeout fired (or it ran out of its own
    ///   time before it could send anything) and no retry followed;
    /// - [`Error::DeadlineExceeded`]: the request deadline had passed when the call gave up
    ///   (whatever the last attempt's failure: nobody waits for it any more).
    ///
    /// The [`CallMachine`](super::CallMachine) is where the error of a call that was
    /// made is chosen, for every driver.
    Library(Error),
}

impl<E> CallError<E> {
    /// The library's error, if the call ended on one.
    #[must_use]
    pub const fn library(&self) -> Option<Error> {
        match self {
            CallError::Library(e) => Some(*e),
            CallError::Skipped(_) | CallError::Attempt(_) => None,
        }
    }

    /// The last attempt's own error, if the call ended on one.
    #[must_use]
    pub const fn attempt(&self) -> Option<&E> {
        match self {
            CallError::Attempt(e) => Some(e),
            CallError::Skipped(_) | CallError::Library(_) => None,
        }
    }

    /// The same error with the last attempt's own error mapped by `f`.
    pub fn map_attempt<F>(self, f: impl FnOnce(E) -> F) -> CallError<F> {
        match self {
            CallError::Skipped(shortfall) => CallError::Skipped(shortfall),
            CallError::Attempt(error) => CallError::Attempt(f(error)),
            CallError::Library(error) => CallError::Library(error),
        }
    }

    /// The last attempt's own error, or the rest of this error (the library's, or a skip)
    /// as a `CallError` of any attempt type.
    ///
    /// # Errors
    ///
    /// The error, when it is not the last attempt's own.
    pub fn into_attempt<F>(self) -> Result<E, CallError<F>> {
        match self {
            CallError::Skipped(shortfall) => Err(CallError::Skipped(shortfall)),
            CallError::Attempt(error) => Ok(error),
            CallError::Library(error) => Err(CallError::Library(error)),
        }
    }

    /// Whether an optional dependency was skipped.
    #[must_use]
    pub const fn is_skipped(&self) -> bool {
        matches!(self, CallError::Skipped(_))
    }

    /// The HTTP status a server answers with when this call fails its request: the
    /// library's error's ([`Error::http_status`]: 504 for a deadline or a timeout, 503 for an
    /// open breaker), 504 for a dependency skipped for want of time, and 502 (Bad Gateway)
    /// for the dependency's own failure.
    #[must_use]
    pub const fn http_status(&self) -> u16 {
        match self {
            CallError::Skipped(_) => 504,
            CallError::Attempt(_) => 502,
            CallError::Library(e) => e.http_status(),
        }
    }
}

/// The library's error as a call's: [`CallError::Library`]. So `?` on a
/// [`scope`](crate::runtime::scope)'s result, inside a function that returns a call's
/// result, passes the scope's [`Error::DeadlineExceeded`] on as the call's.
impl<E> From<Error> for CallError<E> {
    fn from(error: Error) -> Self {
        CallError::Library(error)
    }
}

impl<E: fmt::Display> fmt::Display for CallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::Skipped(s) => write!(
                f,
                "skipped: {} us available is under the floor of {} us",
                s.available().as_micros(),
                s.floor().as_micros()
            ),
            CallError::Attempt(e) => write!(f, "the last attempt failed: {e}"),
            CallError::Library(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> core::error::Error for CallError<E> {}

/// What one driven call took: enough to feed per-dependency counters and traces. Attempts
/// are numbered from 0 in the order they started.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Report {
    /// Attempts started in all: the first, the retries and the hedges. Zero when the call
    /// was not made.
    pub attempts: u32,
    /// Retries started (after a failure and a backoff).
    pub retries: u32,
    /// Hedges started (copies sent while an attempt was still running).
    pub hedges: u32,
    /// Attempts whose timeout fired, or that ran out of their own time before they could send
    /// anything ([`CallMachine::unsent`](super::CallMachine::unsent)).
    pub timeouts: u32,
    /// Retries and hedges the retry budget refused: the copies it kept from the dependency (a
    /// hedge refused is asked for again a delay later, and counts once however often it is
    /// refused).
    pub budget_refusals: u32,
    /// Attempts the circuit breaker refused: the first (the call was not made), a retry or
    /// a hedge.
    pub breaker_rejections: u32,
    /// Attempts dropped while still running because the call ended otherwise: another
    /// attempt won, or a fatal error ended the call. (When the driver's own future is
    /// dropped, no report is made.)
    pub cancelled: u32,
    /// The number of the attempt that succeeded, if one did.
    pub winner: Option<u32>,
    /// Whether the winner was a hedge.
    pub hedge_won: bool,
    /// Why no further retry was made, if the call failed after trying.
    pub gave_up: Option<GiveUp>,
    /// When the first attempt started (`None` if the call was not made).
    pub started: Option<Instant>,
    /// The clock's reading when the call ended.
    pub ended: Instant,
}

impl Report {
    /// The report of a call before anything happened.
    pub const EMPTY: Report = Report::empty();

    /// The report of a call before anything happened, as a function: called where a call
    /// starts, it is written field by field (the constant [`EMPTY`](Report::EMPTY) may be
    /// copied whole from read-only memory).
    #[inline]
    pub(crate) const fn empty() -> Report {
        Report {
            attempts: 0,
            retries: 0,
            hedges: 0,
            timeouts: 0,
            budget_refusals: 0,
            breaker_rejections: 0,
            cancelled: 0,
            winner: None,
            hedge_won: false,
            gave_up: None,
            started: None,
            ended: Instant::ZERO,
        }
    }

    /// Adds what the call did, whatever its end, to `counters`: one [`CounterEvent::Call`],
    /// and each attempt timeout, retry, hedge, budget refusal and breaker rejection.
    pub(crate) fn record_steps(&self, counters: &Counters) {
        counters.record(CounterEvent::Call);
        counters.record_n(CounterEvent::Timeout, self.timeouts);
        counters.record_n(CounterEvent::Retry, self.retries);
        counters.record_n(CounterEvent::Hedge, self.hedges);
        counters.record_n(CounterEvent::BudgetRefusal, self.budget_refusals);
        counters.record_n(CounterEvent::BreakerRejection, self.breaker_rejections);
    }

    /// Whether the dependency was called at all.
    #[must_use]
    pub const fn was_called(&self) -> bool {
        self.attempts > 0
    }

    /// The time from the first attempt's start to the end (zero if the call was not made).
    #[must_use]
    pub fn elapsed(&self) -> Duration {
        self.started
            .map_or(Duration::ZERO, |s| self.ended.saturating_duration_since(s))
    }
}
