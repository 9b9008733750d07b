//! A blocking driver for one dependency call: the core's retry decisions, with thread sleeps.
//!
//! [`BlockingDriver::run`] is the blocking counterpart of the core's async
//! [`Driver`](deadline_core::drive::Driver): it computes the first attempt's limits from the
//! time left, runs the attempt, and on a failure asks the core's
//! [`RetryState::decide`] whether a retry fits, sleeps the backoff with its [`Sleeper`],
//! computes the limits again at the instant it wakes, and tries again, or gives up. Every
//! decision is the core's.
//!
//! A blocking attempt cannot be cut off from outside: it enforces its own limits, typically by
//! handing them to its socket ([`crate::net::connect`], [`crate::net::arm_read`]), and reports a
//! socket timeout as its error, which the classifier maps to [`Outcome::TimedOut`]. There are
//! no hedges: a hedge needs a second attempt running alongside the first.
//!
//! The [`Sleeper`] is injected: [`ThreadSleeper`] sleeps the thread on [`StdClock`], and a
//! [`ManualClock`] "sleeps" by moving its own clock, so tests run in virtual time.

use deadline_core::drive::{CallError, Called, Classify, Report};
use deadline_core::retry::{Call, GiveUp, Outcome, RetryDecision, RetryState};
use deadline_core::rng::Rng;
use deadline_core::{Clock, Decision, Error, Instant, Limits, ManualClock};

use crate::clock::StdClock;

/// A clock that can block the thread until it reads a given instant.
pub trait Sleeper: Clock {
    /// Blocks until the clock reads `at` or later; returns at once if it already does.
    fn sleep_until(&self, at: Instant);
}

impl<S: Sleeper + ?Sized> Sleeper for &S {
    fn sleep_until(&self, at: Instant) {
        (**self).sleep_until(at);
    }
}

/// Sleeps the thread ([`std::thread::sleep`]) on [`StdClock`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ThreadSleeper;

impl Clock for ThreadSleeper {
    fn now(&self) -> Instant {
        StdClock.now()
    }
}

impl Sleeper for ThreadSleeper {
    fn sleep_until(&self, at: Instant) {
        loop {
            let left = at.saturating_duration_since(self.now());
            if left.is_zero() {
                return;
            }
            std::thread::sleep(left);
        }
    }
}

/// Virtual time: sleeping moves the clock to `at` at once.
impl Sleeper for ManualClock {
    fn sleep_until(&self, at: Instant) {
        self.set(at);
    }
}

/// Runs one dependency call under its policy, blocking the thread. See the [module docs](self).
///
/// ```
/// use deadline_core::backoff::Backoff;
/// use deadline_core::retry::{Call, Outcome};
/// use deadline_core::rng::SplitMix64;
/// use deadline_core::{Clock, Deadline, Instant, ManualClock, Policy, ms};
/// use deadline_std::blocking::BlockingDriver;
///
/// // B: up to 3 attempts, 10 ms between them; 200 ms left, 20 ms kept for our own work.
/// let b = Policy::required("B", ms(110), ms(30)).with_attempts(3, Backoff::constant(ms(10)));
/// let clock = ManualClock::new(); // virtual time: the sleeps move it
/// let call = Call::new(&b, Deadline::after(clock.now(), ms(200)), ms(20));
/// let mut timeouts = Vec::new();
/// let called = BlockingDriver::new(call, &clock, SplitMix64::new(1)).run(
///     |_: &&str| Outcome::Failed,
///     |limits| {
///         timeouts.push(limits.timeout);
///         clock.advance(ms(40)); // the attempt's latency
///         if timeouts.len() == 1 { Err("503") } else { Ok("price") }
///     },
/// );
/// assert_eq!(called.result, Ok("price"));
/// // The retry starts at 40 + 10 = 50 ms: min(200 - 50 - 20, 110) = 110, then 130 is left.
/// assert_eq!(timeouts, [ms(110), ms(110)]);
/// assert_eq!(called.report.ended, Instant::from_millis(90));
/// ```
#[derive(Debug)]
#[must_use = "a driver does nothing until `run` is called"]
pub struct BlockingDriver<'c, S, R> {
    call: Call<'c>,
    sleeper: S,
    rng: R,
}

impl<'c, S: Sleeper, R: Rng> BlockingDriver<'c, S, R> {
    /// A driver for `call`, sleeping with `sleeper` and drawing jitter from `rng` (pass
    /// `&mut rng` to keep the generator).
    pub const fn new(call: Call<'c>, sleeper: S, rng: R) -> Self {
        BlockingDriver { call, sleeper, rng }
    }

    /// Runs the call: `attempt` is invoked once per attempt with that attempt's limits, and
    /// `classify` says what each attempt error means for retrying. Returns the first success,
    /// or why there is none, with a [`Report`].
    ///
    /// An attempt that fails after the request deadline ends the call with
    /// [`Error::DeadlineExceeded`]; one that fails before it, with no retry to follow, ends it
    /// with the attempt's own error. An optional dependency whose first timeout would be under
    /// its floor is skipped ([`CallError::Skipped`]) and a required one fails at once; then
    /// `attempt` is never invoked.
    pub fn run<A, T, E, C>(mut self, mut classify: C, mut attempt: A) -> Called<T, E>
    where
        A: FnMut(Limits) -> Result<T, E>,
        C: Classify<E>,
    {
        let call = self.call;
        let mut report = Report::default();
        let start = self.sleeper.now();
        report.ended = start;
        let mut limits = match call.decide(start) {
            Decision::Call(limits) => limits,
            Decision::Skip(shortfall) => {
                return Called::new(Err(CallError::Skipped(shortfall)), report);
            }
            Decision::Fail(shortfall) => {
                return Called::new(Err(CallError::Library(shortfall.error())), report);
            }
        };
        call.deposit(start);
        report.started = Some(start);
        let mut state = RetryState::new();
        loop {
            let number = report.attempts;
            report.attempts = report.attempts.saturating_add(1);
            let result = attempt(limits);
            let now = self.sleeper.now();
            report.ended = now;
            let error = match result {
                Ok(value) => {
                    report.winner = Some(number);
                    return Called::new(Ok(value), report);
                }
                Err(error) => error,
            };
            let outcome = classify.classify(&error);
            if outcome == Outcome::TimedOut {
                report.timeouts = report.timeouts.saturating_add(1);
            }
            let give_up = match state.decide(&call, now, outcome, &mut self.rng) {
                RetryDecision::Retry(retry) => {
                    self.sleeper.sleep_until(retry.at);
                    let woke = self.sleeper.now();
                    report.ended = woke;
                    // The sleep may have ended late: decide again at the instant we woke.
                    match call.decide(woke) {
                        Decision::Call(next) => {
                            limits = next;
                            report.retries = report.retries.saturating_add(1);
                            continue;
                        }
                        Decision::Skip(shortfall) | Decision::Fail(shortfall) => {
                            GiveUp::UnderFloor(shortfall)
                        }
                    }
                }
                RetryDecision::GiveUp(give_up) => give_up,
            };
            if give_up == GiveUp::Throttled {
                report.budget_refusals = report.budget_refusals.saturating_add(1);
            }
            report.gave_up = Some(give_up);
            let result = if call.deadline.is_expired(report.ended) {
                Err(CallError::Library(Error::DeadlineExceeded))
            } else {
                Err(CallError::Attempt(error))
            };
            return Called::new(result, report);
        }
    }
}
