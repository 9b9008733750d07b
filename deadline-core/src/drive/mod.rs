//! One dependency call run under its policy: the sans-IO [`CallMachine`] that owns its whole
//! sequence, and the runtime-agnostic async [`Driver`] that runs it on any [`Timer`].
//!
//! The machine takes `now` and each attempt's result and says what to do next ([`Action`]:
//! start an attempt with these limits, cut one off, wait until this instant, done), and
//! tells an [`Observer`] of every step ([`Event`]). Every driver is a short loop over it:
//! the async [`Driver`] here, `deadline-std`'s blocking driver, the CLI's replays and
//! simulator. There is no second copy of the sequence anywhere, so the same failure ends
//! with the same [`CallError`] and [`Report`] on every runtime.
//!
//! [`Driver::run`] takes the call ([`Call`]: policy, request deadline, reserve, retry
//! budget, circuit breaker), a timer, a random source, a classifier for the attempt's errors
//! and the attempt itself (`FnMut(Limits) -> impl Future<Output = Result<T, E>>`), and:
//!
//! 1. computes the first attempt's limits at the clock's `now` ([`crate::call::call_timeout`]): an
//!    optional dependency under its floor is skipped ([`CallError::Skipped`]), a required one
//!    fails at once ([`CallError::Library`]), and the attempt function is never invoked;
//!    so is it when the call's circuit breaker is open
//!    ([`Error::CircuitOpen`](crate::Error::CircuitOpen));
//! 2. runs the attempt, racing it against a sleep until its [`Limits::until`];
//! 3. sends a hedge when one is due ([`HedgeState`](crate::call::HedgeState)), while the first is still running;
//! 4. on a failure (the attempt's error, classified by [`Classify`], or its timeout), asks
//!    [`RetryState::decide`](crate::call::RetryState::decide), sleeps the backoff, computes
//!    the limits again at the instant it really wakes, and starts the retry; with no retry
//!    allowed, it gives up, or waits for the other attempts if any still run;
//! 5. returns the first success; every attempt still running is dropped at that moment,
//!    which cancels it (so is everything, if the driver's own future is dropped).
//!
//! Every one of these decisions, and the error the call ends with, is the machine's.
//!
//! While several attempts run (a hedge was sent), a failure of one of them ends nothing: its
//! retry is decided at once, as after any failure, and runs beside the others (a hedge that
//! fails fast does not wait for a slow first attempt to end), as gRPC's hedging (gRFC A6)
//! sends its next copy at once when one fails; with no retry allowed, the driver waits for
//! the others. As in gRPC's hedging, two failures are exceptions: an
//! [`Outcome::Fatal`] or [`Outcome::Broken`] error cancels the other attempts and
//! ends the call at once, and a server's "do not retry"
//! ([`Pushback::DontRetry`](crate::Pushback::DontRetry)) stops further hedges and
//! rules out a retry, one already backing off included, while the attempts already running
//! may still win. A server's "retry after" that comes during a backoff postpones that retry
//! too.
//!
//! The first attempt is an original call and is [deposited](crate::budget::RetryBudget::deposit)
//! in the budget; each retry and each hedge withdraws a token. Retries count against the
//! policy's [`attempts`](crate::policy::RetryPolicy::attempts); hedges count against
//! [`max_hedges`](crate::policy::HedgePolicy::max_hedges) only. A retry's token is withdrawn
//! when the retry is decided, before its backoff; if the driver then wakes too late for it,
//! the breaker refuses it, or another attempt answers during the backoff, the token is not
//! given back (the budget errs towards fewer retries).
//!
//! # Circuit breaker
//!
//! With a breaker ([`Call::with_breaker`]), every attempt (the first, each retry, each
//! hedge) asks [`CircuitBreaker::try_acquire`](crate::breaker::CircuitBreaker::try_acquire) at the
//! instant it would start. A refusal before the first attempt ends the call with
//! [`Error::CircuitOpen`](crate::Error::CircuitOpen), the attempt function never invoked;
//! before a retry it ends the call ([`GiveUp::CircuitOpen`](crate::call::GiveUp::CircuitOpen))
//! with the last attempt's failure; before a hedge it stops the hedges until the next
//! retry. Each refusal is counted in [`Report::breaker_rejections`].
//!
//! Every attempt's result is reported to the breaker: a success, a failure (as
//! [`BreakerOutcome::of_attempt`](crate::breaker::BreakerOutcome::of_attempt) reads the
//! classification), a timeout, or [`Abandoned`](crate::breaker::BreakerOutcome::Abandoned) for an
//! attempt cancelled because the call ended otherwise. An attempt still running when the
//! driver's own future is dropped is reported as abandoned too, at that moment: a half-open
//! breaker's probe slot is freed at once, not after its probe timeout.
//!
//! Every decision is the course's; the driver only sleeps and polls. It reads the clock after
//! every wake-up and trusts the clock, not the timer: a sleep that ends late finds the
//! attempts whose timeouts have passed, and a backoff that ends past the deadline starts
//! nothing. The driver feeds nothing global: the budget, the random source and whatever
//! counters the [`Report`] goes to belong to the caller.
//!
//! # Memory
//!
//! No allocation: the attempt futures live in the driver's own future, in as many slots as
//! its [`Mode`] runs at once ([`MAX_IN_FLIGHT`] for [`Full`], one for [`DeadlineOnly`]), so
//! the driver's future is the machine, that many attempt futures and one sleep. It is `Send`
//! when the timer, its sleep, the random source, the classifier, the attempt function, its
//! future and its error are.
//!
//! # Example
//!
//! ```
//! use deadline_core::drive::Driver;
//! use deadline_core::virtual_time::ManualTimer;
//! use deadline_core::{Clock, Deadline, Instant, ms, Outcome, Policy, Timer};
//! use deadline_core::call::{Call, Limits};
//! use deadline_core::rng::SplitMix64;
//!
//! let timer = ManualTimer::new();
//! let t = &timer;
//! let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
//! let deadline = Deadline::after(Instant::ZERO, ms(200));
//! let call = Call::new(&b, deadline, ms(20));
//!
//! // B answers in 105 ms (simulated on the virtual timer).
//! let called = timer
//!     .run(Driver::new(call, t, SplitMix64::new(1)).run(
//!         |_| Outcome::Failed,
//!         |limits: Limits| async move {
//!             assert_eq!(limits.timeout(), ms(110)); // min(200 - 0 - 20, 110)
//!             t.sleep_until(t.now() + ms(105)).await;
//!             Ok::<_, ()>("price")
//!         },
//!     ))
//!     .unwrap();
//! assert_eq!(called.result, Ok("price"));
//! assert_eq!(called.report.ended, Instant::from_millis(105));
//! ```

mod attempt;
mod call_machine;
mod classify;
mod course;
mod event;
mod flight;
mod followups;
#[cfg(feature = "test-util")]
pub(crate) mod manual;
#[cfg(feature = "test-util")]
pub(crate) mod manual_runtime;
mod mode;
pub(crate) mod report;
mod run;
pub(crate) mod runtime;
pub(crate) mod scoped;
mod tally;
#[cfg(feature = "std")]
pub(crate) mod thread_deadline;

use core::future::Future;
use core::marker::PhantomData;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::call_context::Call;
use crate::call_timeout::Limits;
use crate::outcome::Outcome;
use crate::rng::{NoJitter, Rng};
use crate::time::Instant;
use crate::timer::Timer;

pub use attempt::{Attempt, InScope, InScopeFuture};
pub use call_machine::{Action, CallMachine};
pub use classify::{AnyErrorFails, Classify};
pub use event::{Event, EventKind, NoObserver, Observe, Observer};
use mode::Slots;
use mode::sealed::Room;
pub use mode::{DeadlineOnly, Full, Mode};
pub(crate) use report::CallError;
pub use report::{Called, Report};
pub(crate) use runtime::Runtime;

/// The most attempts one driven call has running at once (the first, its hedges, and the
/// retries of copies that failed while others ran). Hedges and retries beyond it wait for a
/// slot to free up.
pub const MAX_IN_FLIGHT: usize = 4;

/// Runs one dependency call under its policy on a [`Timer`]. See the [module docs](self).
#[derive(Debug)]
#[must_use = "a driver does nothing until `run` is awaited"]
///
/// A driver made with [`Driver::new`] runs the policy's retries, hedges, retry budget and
/// circuit breaker. One made with [`Driver::deadline_only`] makes one attempt with its
/// timeout from the time left, and nothing else: its code for retries, hedges, the budget
/// and the breaker is not in the program at all (its [`Mode`] is [`DeadlineOnly`]), which is what a
/// microcontroller with a call that never retries wants.
pub struct Driver<'c, Tm, R, O = NoObserver, M: Mode = Full> {
    call: Call<'c>,
    timer: Tm,
    rng: R,
    live_delay: Option<Duration>,
    observer: O,
    mode: PhantomData<M>,
}

impl<'c, Tm: Timer, R: Rng> Driver<'c, Tm, R> {
    /// A driver for `call` on `timer`, drawing jitter from `rng` (pass `&mut rng` to keep
    /// the generator).
    pub const fn new(call: Call<'c>, timer: Tm, rng: R) -> Self {
        Driver {
            call,
            timer,
            rng,
            live_delay: None,
            observer: NoObserver,
            mode: PhantomData,
        }
    }
}

impl<'c, Tm: Timer> Driver<'c, Tm, NoJitter, NoObserver, DeadlineOnly> {
    /// A driver for `call` on `timer` that makes one attempt, with its timeout from the time
    /// left, and nothing else: whatever retries, hedges, retry budget or breaker the call has
    /// are not used (and their code is not linked). Its report says
    /// [`GiveUp::Exhausted`](crate::call::GiveUp::Exhausted) when the attempt fails.
    ///
    /// ```
    /// use deadline_core::drive::Driver;
    /// use deadline_core::virtual_time::ManualTimer;
    /// use deadline_core::{Clock, Deadline, Instant, ms, Policy, Timer};
    /// use deadline_core::call::Call;
    ///
    /// let timer = ManualTimer::new();
    /// let t = &timer;
    /// let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    /// let call = Call::new(&b, Deadline::after(Instant::ZERO, ms(200)), ms(20));
    /// let called = timer
    ///     .run(Driver::deadline_only(call, t).run(|_| deadline_core::Outcome::Failed, |limits| async move {
    ///         t.sleep_until(t.now() + ms(105)).await;
    ///         Ok::<_, ()>(limits.timeout())
    ///     }))
    ///     .unwrap();
    /// assert_eq!(called.result, Ok(ms(110)));
    /// ```
    pub const fn deadline_only(call: Call<'c>, timer: Tm) -> Self {
        Driver {
            call,
            timer,
            // Never drawn from: a deadline-only call has no backoff.
            rng: NoJitter,
            live_delay: None,
            observer: NoObserver,
            mode: PhantomData,
        }
    }
}

impl<'c, Tm: Timer, R: Rng, O: Observer> Driver<'c, Tm, R, O, Full> {
    /// The same driver, hedging after `live` (such as the p95 of a live latency histogram)
    /// instead of the policy's fixed delay, when it is `Some`. (A deadline-only driver sends
    /// no hedge: it has no such setting.)
    pub const fn with_hedge_delay(mut self, live: Option<Duration>) -> Self {
        self.live_delay = live;
        self
    }
}

impl<'c, Tm: Timer, R: Rng, O: Observer, M: Mode> Driver<'c, Tm, R, O, M> {
    /// The same driver, telling `observer` of every step of the call ([`Event`]); pass
    /// `&mut observer` to keep it.
    pub fn with_observer<O2: Observer>(self, observer: O2) -> Driver<'c, Tm, R, O2, M> {
        Driver {
            call: self.call,
            timer: self.timer,
            rng: self.rng,
            live_delay: self.live_delay,
            observer,
            mode: PhantomData,
        }
    }

    /// Runs the call: `attempt` is invoked once per attempt (the first, each retry and each
    /// hedge) with that attempt's limits, and `classify` says what each attempt error means
    /// for retrying. Returns the first success, or why there is none, with a [`Report`].
    ///
    /// `classify` is any `FnMut(&E) -> Outcome`, so a closure needs no annotation on its
    /// argument (`|_| Outcome::Failed`); a [`Classify`] value `c` is passed as
    /// `|e| c.classify(e)`.
    ///
    /// The returned future ([`Drive`]) is written by hand, not an `async fn`: it is built
    /// once, in place, with its attempt slots and its sleep inside it.
    #[inline]
    pub fn run<A, F, T, E, C>(
        self,
        classify: C,
        attempt: A,
    ) -> Drive<'c, Tm, R, C, A, O, F, T, E, M>
    where
        A: FnMut(Limits) -> F,
        F: Future<Output = Result<T, E>>,
        C: FnMut(&E) -> Outcome,
    {
        self.into_drive(classify, attempt)
    }

    /// The call's future, with `attempt` starting each attempt.
    #[inline]
    fn into_drive<A, F, T, E, C>(
        self,
        classify: C,
        attempt: A,
    ) -> Drive<'c, Tm, R, C, A, O, F, T, E, M> {
        Drive::new(
            CallMachine::with_mode(self.call, self.live_delay),
            self.timer,
            self.rng,
            classify,
            attempt,
            self.observer,
        )
    }
}

/// The future of [`Driver::run_scoped`]: a [`Drive`] whose attempts run in their own scopes
/// on `Rt`.
pub type ScopedDrive<'c, Tm, R, C, A, O, Rt, F, T, E, M> =
    Drive<'c, Tm, R, C, InScope<Rt, A>, O, InScopeFuture<Rt, F>, T, E, M>;

impl<'c, Tm: Timer, R: Rng, O: Observer, M: Mode> Driver<'c, Tm, R, O, M> {
    /// Runs the call as [`run`](Self::run) does, each attempt inside its own scope on `Rt`
    /// ([`InScope`]): the attempt function itself and every poll of its future see the
    /// attempt's deadline as `Rt`'s current one, so calls made inside it inherit it.
    #[inline]
    pub fn run_scoped<Rt, A, F, T, E, C>(
        self,
        classify: C,
        attempt: A,
    ) -> ScopedDrive<'c, Tm, R, C, A, O, Rt, F, T, E, M>
    where
        Rt: Runtime,
        A: FnMut(Limits) -> F,
        F: Future<Output = Result<T, E>>,
        C: FnMut(&E) -> Outcome,
    {
        self.into_drive(classify, InScope::new(attempt))
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Driver::run`]: the call's machine, its attempts in flight (as many as
    /// its [`Mode`] runs at once: [`MAX_IN_FLIGHT`], or one) and its one sleep, all inside it.
    /// Dropping it drops every attempt still running, which cancels them.
    #[must_use = "futures do nothing unless polled"]
    pub struct Drive<'c, Tm: Timer, R, C, A, O, F, T, E, M: Mode> {
        run: run::Run<'c, Tm, R, C, A, O, T, E, M>,
        #[pin]
        slots: <M as Room>::Slots<F>,
        #[pin]
        sleep: Option<Tm::Sleep>,
    }
}

impl<'c, Tm: Timer, R, C, A, O, F, T, E, M: Mode> Drive<'c, Tm, R, C, A, O, F, T, E, M> {
    /// The future of `machine`'s call, before its first poll.
    #[inline]
    pub(crate) fn new(
        machine: CallMachine<'c, E, M>,
        timer: Tm,
        rng: R,
        classify: C,
        attempt: A,
        observer: O,
    ) -> Self {
        Drive {
            run: run::Run {
                machine,
                timer,
                rng,
                classify,
                attempt,
                observer,
                value: None,
                sleep_at: Instant::ZERO,
            },
            slots: <M::Slots<F> as Slots<F>>::empty(),
            sleep: None,
        }
    }

    /// The call's machine (to settle its deadline and hedge delay before the first poll).
    pub(crate) fn machine_mut(self: Pin<&mut Self>) -> &mut CallMachine<'c, E, M> {
        &mut self.project().run.machine
    }
}

impl<Tm, R, C, A, O, F, T, E, M: Mode> Future for Drive<'_, Tm, R, C, A, O, F, T, E, M>
where
    Tm: Timer,
    R: Rng,
    C: Classify<E>,
    A: Attempt<Future = F>,
    F: Future<Output = Result<T, E>>,
    O: Observer,
{
    type Output = Called<T, E>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Called<T, E>> {
        let this = self.project();
        let mut sleep = this.sleep;
        this.run.poll(cx, this.slots, &mut sleep)
    }
}
