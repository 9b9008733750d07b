//! [`Course`]: the bookkeeping and decisions of one call, under the
//! [`CallMachine`](super::CallMachine), which owns their sequence.
//!
//! What each attempt's end means (for the report, the circuit breaker, the retry and the
//! hedges), whether a retry or a hedge is made, and which error the call ends with are
//! decided here.

use core::time::Duration;

use crate::breaker::{BreakerOutcome, Permit};
use crate::call_context::Call;
use crate::call_timeout::{Decision, Limits};
use crate::counters::Counters;
use crate::error::Error;
use crate::hedge::{HedgeDecision, HedgeState};
use crate::outcome::{Outcome, Pushback};
use crate::retry::{GiveUp, RetryDecision};
use crate::rng::Rng;
use crate::time::Instant;

use super::flight::Attempt;
use super::followups::Kept;
use super::mode::sealed::Room;
use super::mode::{Full, Mode};
use super::report::{CallError, Called, Report};
use super::tally::Tally;

/// How the latest failed attempt ended: what the call's error is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
enum Failure<E> {
    /// The attempt ran out of time `after` it started: its timeout, or a shorter limit of
    /// its own (a connect limit).
    TimedOut { after: Duration },
    /// The attempt failed with its own error.
    Error(E),
    /// The attempt sent nothing: the time left was too short to send a request.
    NothingSent,
}

/// The course of one driven call: its report, its retry and hedge bookkeeping, its latest
/// failure, and every decision a driver asks for. It reads no clock and sleeps on nothing:
/// each method takes `now`, as read by the driver's clock.
///
/// A driver calls:
///
/// 1. [`start`](Course::start) once: the first attempt, or why the call is not made (an
///    optional dependency skipped, a required one under its floor, the breaker open);
/// 2. for each attempt that ends, [`succeeded`](Course::succeeded),
///    [`failed`](Course::failed) (the attempt's own error), [`timed_out`](Course::timed_out)
///    (the driver cut it off at [`Limits::until`]) or [`cancel`](Course::cancel) (it is
///    dropped because the call ended otherwise);
/// 3. after each failure, [`retry`](Course::retry) (even while other attempts run); after
///    sleeping until [`Retry::at`](crate::call::Retry::at),
///    [`restart`](Course::restart) at the instant it really woke;
/// 4. while an attempt runs, [`hedge`](Course::hedge) when [`next_hedge`](Course::next_hedge)
///    is due (an async driver only);
/// 5. [`give_up`](Course::give_up) for the call's error, and [`end`](Course::end) for what
///    the call returns.
///
/// The circuit breaker of the [`Call`] is asked before every attempt, and every attempt's
/// result is reported to it (an attempt cancelled, or dropped with the driver, as
/// [`Abandoned`](BreakerOutcome::Abandoned)).
///
#[derive(Debug)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(super) struct Course<'c, E, M: Mode = Full> {
    call: Call<'c>,
    /// What the call did so far, for its report.
    tally: <M as Room>::Tally,
    last: Option<Failure<E>>,
    /// The retry and hedge bookkeeping, kept only by a mode that retries and hedges.
    followups: <M as Room>::Followups,
}

impl<'c, E, M: Mode> Course<'c, E, M> {
    /// The course of `call`, before its first attempt.
    #[must_use]
    pub(super) const fn new(call: Call<'c>) -> Self {
        Course {
            call,
            tally: <M::Tally as Tally>::NEW,
            last: None,
            followups: <M::Followups as Kept>::NEW,
        }
    }

    /// The course of `call`, hedging after `live` when it is `Some`.
    #[inline]
    pub(super) fn with_hedge_delay_of(call: Call<'c>, live: Option<Duration>) -> Self {
        Course {
            call,
            tally: <M::Tally as Tally>::fresh(),
            last: None,
            followups: <M::Followups as Kept>::starting(live),
        }
    }

    /// Hedges after `live` (such as the p95 of a live latency histogram) instead of the
    /// policy's fixed delay, when it is `Some`.
    pub(super) fn set_hedge_delay(&mut self, live: Option<Duration>) {
        self.followups.set_live_delay(live);
    }

    /// Narrows the call's deadline to `deadline` and sets the live hedge delay, before the
    /// first attempt.
    pub(super) fn settle(&mut self, deadline: crate::deadline::Deadline, live: Option<Duration>) {
        self.call.deadline = self.call.deadline.min(deadline);
        if live.is_some() {
            self.followups.set_live_delay(live);
        }
    }

    /// The call this course runs.
    #[must_use]
    pub(super) const fn call(&self) -> &Call<'c> {
        &self.call
    }

    /// The report so far.
    #[must_use]
    pub(super) fn report(&self, now: Instant) -> Report {
        self.tally.report(now)
    }

    /// Adds the call and what it did so far to `counters` ([`Tally::record_steps`]).
    pub(super) fn record_steps(&self, counters: &Counters) {
        self.tally.record_steps(counters);
    }

    /// Starts the call at `now`: its first attempt, with its limits
    /// ([`crate::call::call_timeout`]), or why it is not made: an optional dependency under its
    /// floor is [`Skipped`](CallError::Skipped); a required one fails with
    /// [`Error::InsufficientTime`] (or [`Error::DeadlineExceeded`] with no time left); an
    /// open breaker fails it with [`Error::CircuitOpen`] (counted in
    /// [`Report::breaker_rejections`]). The first attempt is an original call and is
    /// deposited in the retry budget.
    ///
    /// # Errors
    ///
    /// The call's error when it is not made: end the call with it, and do not invoke the
    /// attempt.
    #[inline]
    pub(super) fn start(&mut self, now: Instant) -> Result<Attempt, CallError<E>> {
        let limits = match self.call.decide(now) {
            Decision::Call(limits) => limits,
            Decision::Skip(s) => return Err(CallError::Skipped(s)),
            Decision::Fail(s) => return Err(CallError::Library(s.error())),
        };
        let permit = self.admit(now).map_err(CallError::Library)?;
        if M::FULL {
            self.call.deposit(now);
        }
        // The retry and hedge bookkeeping is made when the call first needs it, from this
        // start (`Course::follow_up`).
        self.tally.started(now);
        Ok(Attempt {
            until: limits.until(),
            number: 0,
            hedge: false,
            started: now,
            permit,
        })
    }

    /// The attempt answered at `now`: it is the call's winner. Reported to the breaker as a
    /// success.
    pub(super) fn succeeded(&mut self, mut attempt: Attempt, now: Instant) {
        self.settle_breaker(&mut attempt, BreakerOutcome::Success, now);
        self.tally.won(attempt.number, attempt.hedge);
    }

    /// The attempt failed at `now` with its own `error`, which the classifier read as
    /// `outcome`. Returns how long it ran when it ran out of time (below): it is then a
    /// timeout, never a failure that ends the call. A failure that is not a timeout ends the
    /// call when it is [`Outcome::Fatal`] or [`Outcome::Broken`]: every other copy would fail alike, so cancel the
    /// attempts still running and [`give_up`](Course::give_up) with
    /// [`GiveUp::NotRetryable`].
    ///
    /// An error read as [`Outcome::TimedOut`] is a limit of the attempt's own running out: a
    /// socket's read timeout set from its limits (at [`until`](Limits::until)), a shorter
    /// connect limit (before it), or the time the next service was told (its 504, by its own
    /// margins before it). It counts as a timeout, exactly as if the driver had cut the
    /// attempt off ([`timed_out`](Course::timed_out)), after the time the attempt ran (never
    /// more than its timeout), and the error itself is dropped. So is any failure that comes
    /// at or after the attempt's [`until`](Limits::until) and is not an answer of the
    /// server's ([`Outcome::Fatal`], [`Outcome::Broken`], [`Outcome::Pushback`]): a client library's own timer set
    /// to the attempt's deadline (reqwest's, tonic's) fires at the same instant as the
    /// driver's, and whichever is polled first, the attempt ran out of time. Any other error
    /// is reported to the breaker as [`BreakerOutcome::of_attempt`]`(outcome)`.
    ///
    /// The latest failure decides the retry and the call's error, except that a fatal error
    /// or a server's "do not retry" stands once seen. A server's word applies to the hedges
    /// too (gRFC A6): "do not retry" stops them, a delay postpones the next one (and the
    /// [`CallMachine`](super::CallMachine) applies it to a retry backing off).
    pub(super) fn failed(
        &mut self,
        mut attempt: Attempt,
        error: E,
        outcome: Outcome,
        now: Instant,
    ) -> Option<Duration> {
        let out_of_time = outcome == Outcome::TimedOut
            || (now >= attempt.until && matches!(outcome, Outcome::Failed | Outcome::Refused));
        if out_of_time {
            let ran = now.saturating_duration_since(attempt.started);
            let after = ran.min(attempt.timeout());
            self.ran_out(attempt, after, now);
            return Some(after);
        }
        self.settle_breaker(&mut attempt, BreakerOutcome::of_attempt(outcome), now);
        self.record_failure(Failure::Error(error), outcome, now);
        None
    }

    /// The driver cut the attempt off at `now`, its timeout having passed with no answer.
    /// Reported to the breaker as a timeout.
    pub(super) fn timed_out(&mut self, attempt: Attempt, now: Instant) {
        let after = attempt.timeout();
        self.ran_out(attempt, after, now);
    }

    /// The attempt ran out of time `after` it started: counted and reported to the breaker as
    /// a timeout, and the call's latest failure.
    fn ran_out(&mut self, mut attempt: Attempt, after: Duration, now: Instant) {
        self.tally.timed_out();
        self.settle_breaker(&mut attempt, BreakerOutcome::Timeout, now);
        self.record_failure(Failure::TimedOut { after }, Outcome::TimedOut, now);
    }

    /// The attempt ended at `now` having sent nothing, refused no later than `refused_at`
    /// for want of `needed` left: not the dependency's failure, so its breaker permit is
    /// handed back, and no latency of the dependency's is heard.
    ///
    /// What it means for the call depends on whose time was short:
    ///
    /// - **The attempt's own**: time was what stopped it (it had less than `needed` left at
    ///   `refused_at`), its end was its cap's (an attempt starting at `refused_at` would end
    ///   later), and one starting then would have `needed` (it spent its time before sending:
    ///   waiting for a pooled connection, say). It ran out of time, as if cut off: counted in
    ///   [`Report::timeouts`], the call's latest failure a timeout ([`Error::Timeout`] if the
    ///   call ends), retried as a timeout is. (A retry whose backoff leaves it less than
    ///   `needed` is refused in turn, having sent nothing, and the call then ends.) Returns
    ///   `true`.
    /// - **Otherwise** (the call's time was short, or would be for any attempt, or was found
    ///   short already, or something else than time stopped it): neither a retry nor a hedge
    ///   follows, each meeting the same refusal. It is the call's failure only when no
    ///   attempt failed before it: an earlier attempt's answer or error stands, as it does
    ///   when the same lack of time stops a retry before it starts (under the floor), so
    ///   that a dependency's answer is not replaced by a deadline that has not passed.
    ///   Returns `false`.
    pub(super) fn unsent(
        &mut self,
        mut attempt: Attempt,
        needed: Duration,
        refused_at: Instant,
        now: Instant,
    ) -> bool {
        self.settle_breaker(&mut attempt, BreakerOutcome::Abandoned, now);
        let first = self.tally.started_at();
        if self.ran_short_of_its_own_time(&attempt, needed, refused_at) {
            let after = now
                .saturating_duration_since(attempt.started)
                .min(attempt.timeout());
            self.tally.timed_out();
            self.record_failure(Failure::TimedOut { after }, Outcome::TimedOut, now);
            return true;
        }
        if let Some(f) = self.followups.made(first) {
            f.nothing_sent = true;
            f.hedges.stop();
        }
        if self.last.is_none() {
            self.last = Some(Failure::NothingSent);
        }
        false
    }

    /// Whether `attempt`, refused no later than `refused_at` for want of `needed` left, ran
    /// short of its own time ([`unsent`](Course::unsent)).
    fn ran_short_of_its_own_time(
        &self,
        attempt: &Attempt,
        needed: Duration,
        refused_at: Instant,
    ) -> bool {
        if self.followups.get().is_some_and(|f| f.nothing_sent) {
            // The call's time was found short already.
            return false;
        }
        if attempt.until.saturating_duration_since(refused_at) >= needed {
            // Not time: something of the request's own stopped it (a timeout it already
            // carried), which a retry would meet again.
            return false;
        }
        match self.call.decide(refused_at) {
            Decision::Call(limits) => limits.until() > attempt.until && limits.timeout() >= needed,
            Decision::Skip(_) | Decision::Fail(_) => false,
        }
    }

    /// The attempt is dropped while still running because the call ended otherwise (another
    /// attempt won, or a fatal error ended it). Counted in [`Report::cancelled`], reported to
    /// the breaker as [`Abandoned`](BreakerOutcome::Abandoned).
    pub(super) fn cancel(&mut self, mut attempt: Attempt, now: Instant) {
        self.tally.cancelled();
        self.settle_breaker(&mut attempt, BreakerOutcome::Abandoned, now);
    }

    /// Decides, at `now`, whether to retry after the latest failure (other attempts may still
    /// be running): [`RetryState::decide`] with the latest failure's outcome. A refusal of the
    /// retry budget is counted in [`Report::budget_refusals`].
    pub(super) fn retry<R: Rng + ?Sized>(&mut self, rng: &mut R, now: Instant) -> RetryDecision {
        let first = self.tally.started_at();
        let Some(f) = self.followups.made(first) else {
            // A mode without retries has used its one attempt.
            return RetryDecision::GiveUp(GiveUp::Exhausted);
        };
        if f.nothing_sent {
            return RetryDecision::GiveUp(GiveUp::NothingToSend);
        }
        // A server's "retry after" on any copy holds the retry back, whatever failed since.
        let not_before = f.backoff_end;
        let decision = f
            .retry
            .decide_not_before(&self.call, f.last_outcome, not_before, rng, now);
        if decision == RetryDecision::GiveUp(GiveUp::Throttled) {
            self.tally.budget_refused();
        }
        decision
    }

    /// The machine is polled at `now` after its first attempt started: the retry and hedge
    /// bookkeeping is made, if it was not yet, and the poll kept (see
    /// [`latest_poll`](Course::latest_poll)). A mode that does not hedge keeps nothing.
    #[inline]
    pub(super) fn follow_up(&mut self, now: Instant) {
        let first = self.tally.started_at();
        if let Some(f) = self.followups.made(first) {
            f.latest_poll = f.latest_poll.max(now);
        }
    }

    /// The latest instant the machine was polled with since its first attempt started (the
    /// first attempt's start until the bookkeeping is made; [`Instant::ZERO`] in a mode that
    /// does not hedge).
    #[must_use]
    pub(super) fn latest_poll(&self) -> Instant {
        match self.followups.get() {
            Some(f) => f.latest_poll,
            None if M::FULL => self.tally.started_at(),
            None => Instant::ZERO,
        }
    }

    /// The call backs off until `end` before its retry (a mode without retries never does).
    pub(super) fn back_off_until(&mut self, end: Instant) {
        let first = self.tally.started_at();
        if let Some(f) = self.followups.made(first) {
            f.backoff_end = end;
        }
    }

    /// When the backoff set by [`back_off_until`](Course::back_off_until) ends (never, in a
    /// mode without retries).
    #[must_use]
    pub(super) fn backoff_end(&self) -> Instant {
        // Only a call that backed off asks (`back_off_until` made the bookkeeping).
        self.followups.get().map_or(Instant::MAX, |f| f.backoff_end)
    }

    /// Starts the retry at `now`, the instant the driver woke from its backoff: its limits
    /// are computed again from the time left then, and the breaker is asked.
    ///
    /// # Errors
    ///
    /// Why the retry is not made after all: [`GiveUp::DeadlinePassed`] (the driver woke
    /// after the deadline), [`GiveUp::UnderFloor`] (it woke so late that the timeout is now
    /// under the floor), or [`GiveUp::CircuitOpen`] (the breaker refused it; counted in
    /// [`Report::breaker_rejections`]). [`give_up`](Course::give_up) with it. The budget
    /// token taken by [`retry`](Course::retry) is not given back.
    pub(super) fn restart(&mut self, now: Instant) -> Result<Attempt, GiveUp> {
        if self.call.deadline.is_expired(now) {
            return Err(GiveUp::DeadlinePassed);
        }
        let limits = match self.call.decide(now) {
            Decision::Call(limits) => limits,
            Decision::Skip(s) | Decision::Fail(s) => return Err(GiveUp::UnderFloor(s)),
        };
        let permit = self.admit(now).map_err(|_| GiveUp::CircuitOpen)?;
        let first = self.tally.started_at();
        if let Some(f) = self.followups.made(first) {
            f.hedges.restart(now);
        }
        self.tally.retried();
        Ok(self.launch(limits, permit, false, now))
    }

    /// When the next hedge is due, or `None` if none will be sent (see
    /// [`HedgeState::next_at`]).
    #[must_use]
    pub(super) fn next_hedge(&self) -> Option<Instant> {
        if !M::FULL {
            return None;
        }
        let live = self.followups.live_delay();
        match self.followups.get() {
            Some(f) => f.hedges.next_at(&self.call, live),
            // Not made yet: as it will be, from the first attempt's start.
            None => HedgeState::new(self.tally.started_at()).next_at(&self.call, live),
        }
    }

    /// Sends a hedge at `now`, once [`next_hedge`](Self::next_hedge) says one is due, if it
    /// may be sent: the breaker is asked first (a refusal stops the hedges of this attempt
    /// and is counted in [`Report::breaker_rejections`]), then [`HedgeState::decide`] (a
    /// refusal of the retry budget is counted in [`Report::budget_refusals`], once for each
    /// hedge however often it is asked for again). Call it only
    /// while an attempt is running and the driver has room for another.
    pub(super) fn send_hedge(&mut self, now: Instant) -> Option<Attempt> {
        let first = self.tally.started_at();
        let Ok(permit) = self.admit(now) else {
            if let Some(f) = self.followups.made(first) {
                f.hedges.stop();
            }
            return None;
        };
        let live = self.followups.live_delay();
        let f = self.followups.made(first)?;
        let refused_before = f.hedges.refused();
        match f.hedges.decide(&self.call, live, now) {
            HedgeDecision::Send(limits) => Some(self.launch(limits, permit, true, now)),
            HedgeDecision::Throttled => {
                if !refused_before {
                    self.tally.budget_refused();
                }
                self.release(permit, now);
                None
            }
            HedgeDecision::NotYet(_) | HedgeDecision::Stop(_) => {
                self.release(permit, now);
                None
            }
        }
    }

    /// The call's error when it gives up at `now` for `reason` after its latest failure;
    /// `reason` goes into [`Report::gave_up`].
    ///
    /// This is the one place the error is chosen, for every driver:
    ///
    /// - [`Error::DeadlineExceeded`] if the request deadline has passed at `now`: nobody
    ///   waits for the answer any more, whatever the last attempt's failure;
    /// - else [`Error::Timeout`] if the latest failure was a timeout (the driver cut the
    ///   attempt off, or its own limit fired: see [`failed`](Course::failed));
    /// - else the attempt's own error, [`CallError::Attempt`].
    pub(super) fn give_up(&mut self, reason: GiveUp, now: Instant) -> CallError<E> {
        self.tally.gave_up(reason);
        if self.call.deadline.is_expired(now) {
            return CallError::Library(Error::DeadlineExceeded);
        }
        match self.last.take() {
            Some(Failure::Error(e)) => CallError::Attempt(e),
            Some(Failure::TimedOut { after }) => CallError::Library(Error::Timeout { after }),
            // Too little time to send anything: what is left of the deadline is spent.
            Some(Failure::NothingSent) => CallError::Library(Error::DeadlineExceeded),
            // Nothing failed (a driver that gives up before any attempt ended): only the
            // time can have run out.
            None => CallError::Library(Error::DeadlineExceeded),
        }
    }

    /// What the call returns: `result`, with the report, ended at `now`.
    pub(super) fn end<T>(&mut self, result: Result<T, CallError<E>>, now: Instant) -> Called<T, E> {
        Called::new(result, self.tally.report(now))
    }

    /// Asks the breaker, if any, for leave to start an attempt at `now`.
    fn admit(&mut self, now: Instant) -> Result<Option<Permit>, Error> {
        if !M::FULL {
            // A deadline-only call: no breaker is asked (none is linked).
            return Ok(None);
        }
        let Some(breaker) = self.call.breaker else {
            return Ok(None);
        };
        match breaker.try_acquire(now) {
            Ok(permit) => Ok(Some(permit)),
            Err(e) => {
                self.tally.breaker_rejected();
                Err(e)
            }
        }
    }

    /// Reports how `attempt` ended to the call's breaker. Only a mode with a breaker asks it for
    /// permits ([`admit`](Course::admit)), so in any other the breaker's code is not linked.
    #[inline]
    fn settle_breaker(&self, attempt: &mut Attempt, outcome: BreakerOutcome, now: Instant) {
        if M::FULL {
            attempt.settle(self.call.breaker, outcome, now);
        }
    }

    /// Hands back a permit whose attempt was not made after all.
    fn release(&self, permit: Option<Permit>, now: Instant) {
        if let (Some(breaker), Some(permit)) = (self.call.breaker, permit) {
            breaker.record(permit, BreakerOutcome::Abandoned, now);
        }
    }

    /// Counts an attempt after the first (a retry or a hedge) starting at `now` with `limits`.
    fn launch(
        &mut self,
        limits: Limits,
        permit: Option<Permit>,
        hedge: bool,
        now: Instant,
    ) -> Attempt {
        let number = self.tally.launched(hedge);
        Attempt {
            until: limits.until(),
            number,
            hedge,
            started: now,
            permit,
        }
    }

    /// Records the latest failure, unless a final one stands.
    fn record_failure(&mut self, failure: Failure<E>, outcome: Outcome, now: Instant) {
        let first = self.tally.started_at();
        let live = self.followups.live_delay();
        let Some(f) = self.followups.made(first) else {
            // One attempt, so nothing can stand before it.
            self.last = Some(failure);
            return;
        };
        if f.final_failure {
            return;
        }
        self.last = Some(failure);
        f.last_outcome = outcome;
        match outcome {
            Outcome::Fatal | Outcome::Broken | Outcome::Pushback(Pushback::DontRetry) => {
                f.final_failure = true;
                f.hedges.stop();
            }
            Outcome::Pushback(Pushback::After(d)) => {
                // Neither the next hedge nor the next retry goes before the server's time.
                let not_before = now.saturating_add(d);
                f.hedges.push_back(not_before, &self.call, live);
                f.backoff_end = f.backoff_end.max(not_before);
            }
            Outcome::TimedOut | Outcome::Refused | Outcome::Failed => {}
        }
    }
}
