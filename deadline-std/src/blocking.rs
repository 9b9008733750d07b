//! A blocking driver for one dependency call: the core's retry decisions, with thread sleeps.
//!
//! [`BlockingDriver::run`] is the blocking counterpart of the core's async
//! [`Driver`](deadline_core::drive::Driver), and like it a short loop over the core's
//! [`CallMachine`]: the machine says start an attempt with these limits (the time left, the
//! circuit breaker's leave), wait until this instant (a backoff: the [`Sleeper`] sleeps),
//! or done; the loop runs the attempt and tells the machine how it ended. Every decision is
//! the core's, the same as the async driver's.
//!
//! A blocking attempt cannot be cut off from outside: it enforces its own limits, typically by
//! handing them to its socket ([`crate::net::connect`], [`crate::net::Bounded`]), and reports a
//! socket timeout as its error, which the classifier maps to
//! [`Outcome::TimedOut`] (on Unix a socket's read or write timeout is
//! [`std::io::ErrorKind::WouldBlock`], on Windows `TimedOut`: read both). There are no hedges: a
//! hedge needs a second attempt running alongside the first.
//!
//! The [`Sleeper`] is injected: [`ThreadSleeper`] sleeps the thread on [`StdClock`], and a
//! `ManualClock` (feature `test-util`) "sleeps" by moving its own clock, so tests run in virtual
//! time.

use deadline_core::call::{Call, Limits};
use deadline_core::drive::{Action, CallMachine, Called, NoObserver};
use deadline_core::rng::Rng;
#[cfg(feature = "test-util")]
use deadline_core::virtual_time::ManualClock;
use deadline_core::{Clock, Instant, Outcome};

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

/// Virtual time: sleeping moves the clock to `at` at once (feature `test-util`).
#[cfg(feature = "test-util")]
impl Sleeper for ManualClock {
    fn sleep_until(&self, at: Instant) {
        self.set(at);
    }
}

/// Runs one dependency call under its policy, blocking the thread. See the [module docs](self).
///
/// ```
/// use deadline_core::{Clock, Deadline, Instant, ms, Outcome, Policy};
/// use deadline_core::call::Call;
/// use deadline_core::policy::Backoff;
/// use deadline_core::virtual_time::ManualClock;
/// use deadline_std::Entropy;
/// use deadline_std::blocking::BlockingDriver;
///
/// // B: up to 3 attempts, 10 ms between them; 200 ms left, 20 ms kept for our own work.
/// let b = Policy::required("B").idempotent().with_cap(ms(110)).with_floor(ms(30))
///     .with_retries(2).with_backoff(Backoff::constant(ms(10)));
/// let clock = ManualClock::new(); // virtual time: the sleeps move it
/// let call = Call::new(&b, Deadline::after(clock.now(), ms(200)), ms(20));
/// let mut timeouts = Vec::new();
/// let called = BlockingDriver::new(call, &clock, Entropy).run(
///     |_| Outcome::Failed,
///     |limits| {
///         timeouts.push(limits.timeout());
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
    /// or why there is none, with a [`Report`](deadline_core::drive::Report).
    ///
    /// It is a short loop over the core's [`CallMachine`], which makes every decision and owns
    /// their sequence, as it does for the async driver, so the same failure ends with the
    /// same [`CallError`](deadline_core::CallError) and report:
    ///
    /// - an optional dependency whose first timeout would be under its floor is skipped
    ///   ([`CallError::Skipped`](deadline_core::CallError::Skipped)), a required one
    ///   fails at once, and a call whose circuit breaker is open fails with
    ///   [`Error::CircuitOpen`](deadline_core::Error::CircuitOpen); then `attempt` is never
    ///   invoked;
    /// - an attempt error classified
    ///   [`Outcome::TimedOut`] is its own limit firing (the socket's read timeout at the
    ///   attempt's [`Limits::until`], or its connect limit before it): counted as a timeout,
    ///   and with no retry to follow, the call ends with
    ///   [`Error::Timeout`](deadline_core::Error::Timeout), as the async driver does when it
    ///   cuts an attempt off;
    /// - any other failure with no retry to follow ends it with the attempt's own error,
    ///   unless the request deadline has passed: then with
    ///   [`Error::DeadlineExceeded`](deadline_core::Error::DeadlineExceeded).
    pub fn run<A, T, E, C>(mut self, mut classify: C, mut attempt: A) -> Called<T, E>
    where
        A: FnMut(Limits) -> Result<T, E>,
        C: FnMut(&E) -> Outcome,
    {
        let mut machine = CallMachine::new(self.call);
        let mut observer = NoObserver;
        let mut value = None;
        loop {
            let now = self.sleeper.now();
            match machine.poll(now, &mut self.rng, &mut observer) {
                Action::Start { slot, limits } => match attempt(limits) {
                    Ok(answer) => {
                        value = Some(answer);
                        machine.succeeded(slot, self.sleeper.now(), &mut observer);
                    }
                    Err(error) => {
                        let outcome = classify(&error);
                        machine.failed(slot, error, outcome, self.sleeper.now(), &mut observer);
                    }
                },
                // The backoff. The sleep may end late: the machine decides again at the
                // instant we woke.
                Action::Wait { until } => self.sleeper.sleep_until(until),
                // An attempt runs to its end here (its own limits stop it), so none is ever
                // left running to cut off.
                Action::Cancel { .. } => {}
                Action::Done => return machine.finish(value, now),
            }
        }
    }
}
