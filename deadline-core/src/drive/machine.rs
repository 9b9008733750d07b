//! The driver's state machine: one `poll` that reads the clock, polls the attempts in flight,
//! and asks the retry and hedge decisions what to start next.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use crate::budget::{Decision, Limits};
use crate::error::Error;
use crate::hedge::{HedgeDecision, HedgeState};
use crate::retry::{Call, GiveUp, Outcome, Pushback, RetryDecision, RetryState};
use crate::rng::Rng;
use crate::time::Instant;
use crate::timer::Timer;

use super::MAX_IN_FLIGHT;
use super::report::{CallError, Called, Report};

/// The attempt futures' storage: one pinned `Option` per slot, each a separate local of the
/// driver's async fn (so each can be pinned without `unsafe`).
pub(super) type Slots<'s, F> = [Pin<&'s mut Option<F>>; MAX_IN_FLIGHT];

/// Classifies an attempt's error for the retry decision.
///
/// Implemented for every `FnMut(&E) -> Outcome`, so a closure will do:
///
/// ```
/// use deadline_core::drive::Classify;
/// use deadline_core::retry::Outcome;
///
/// #[derive(Debug)]
/// enum MyError { ConnectionRefused, Status(u16) }
///
/// let mut classify = |e: &MyError| match e {
///     MyError::ConnectionRefused => Outcome::Refused,
///     MyError::Status(500..=599) => Outcome::Failed,
///     MyError::Status(_) => Outcome::Fatal,
/// };
/// assert_eq!(classify.classify(&MyError::Status(503)), Outcome::Failed);
/// ```
pub trait Classify<E> {
    /// What `error` means for retrying: see [`Outcome`].
    fn classify(&mut self, error: &E) -> Outcome;
}

impl<E, F: FnMut(&E) -> Outcome> Classify<E> for F {
    fn classify(&mut self, error: &E) -> Outcome {
        self(error)
    }
}

/// An attempt in flight: when its timeout ends, and its number.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    until: Instant,
    timeout: Duration,
    number: u32,
    hedge: bool,
}

/// The latest failure, for the result when the call gives up.
enum Last<E> {
    None,
    Error(E),
    TimedOut(Duration),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Not started: the first poll decides the first attempt.
    Start,
    /// Attempts in flight.
    Running,
    /// Waiting for a retry to start at `at`.
    Backoff { at: Instant },
}

/// Everything the driver knows between polls, apart from the pinned futures.
pub(super) struct Machine<'c, Tm, R, C, A, E> {
    pub(super) call: Call<'c>,
    pub(super) timer: Tm,
    pub(super) rng: R,
    pub(super) live_delay: Option<Duration>,
    pub(super) classify: C,
    pub(super) attempt: A,
    phase: Phase,
    retry: RetryState,
    hedge: HedgeState,
    in_flight: [Option<InFlight>; MAX_IN_FLIGHT],
    last: Last<E>,
    last_outcome: Outcome,
    /// A fatal error or a server's "do not retry" has been seen: it stands, whatever the
    /// attempts still running do afterwards.
    final_failure: bool,
    report: Report,
    sleep_at: Option<Instant>,
}

impl<'c, Tm, R, C, A, E> Machine<'c, Tm, R, C, A, E> {
    pub(super) fn new(
        call: Call<'c>,
        timer: Tm,
        rng: R,
        live_delay: Option<Duration>,
        classify: C,
        attempt: A,
    ) -> Self {
        Machine {
            call,
            timer,
            rng,
            live_delay,
            classify,
            attempt,
            phase: Phase::Start,
            retry: RetryState::new(),
            hedge: HedgeState::new(Instant::ZERO),
            in_flight: [None; MAX_IN_FLIGHT],
            last: Last::None,
            last_outcome: Outcome::Failed,
            final_failure: false,
            report: Report::default(),
            sleep_at: None,
        }
    }
}

impl<Tm, R, C, A, F, T, E> Machine<'_, Tm, R, C, A, E>
where
    Tm: Timer,
    R: Rng,
    C: Classify<E>,
    A: FnMut(Limits) -> F,
    F: Future<Output = Result<T, E>>,
{
    /// One poll of the whole call. It loops until it has either finished or armed a sleep
    /// for the earliest instant something is due, reading the clock again on every turn: a
    /// timer may wake late, and the clock, not the wake-up, says what is due.
    pub(super) fn poll(
        &mut self,
        cx: &mut Context<'_>,
        slots: &mut Slots<'_, F>,
        sleep: &mut Pin<&mut Option<Tm::Sleep>>,
    ) -> Poll<Called<T, E>> {
        loop {
            let now = self.timer.now();

            if self.phase == Phase::Start {
                match self.call.decide(now) {
                    Decision::Call(limits) => {
                        self.call.deposit(now);
                        self.hedge = HedgeState::new(now);
                        self.report.started = Some(now);
                        self.phase = Phase::Running;
                        self.launch(slots, limits, false);
                    }
                    Decision::Skip(s) => {
                        return Poll::Ready(self.finish(
                            slots,
                            sleep,
                            now,
                            Err(CallError::Skipped(s)),
                        ));
                    }
                    Decision::Fail(s) => {
                        let err = CallError::Library(s.error());
                        return Poll::Ready(self.finish(slots, sleep, now, Err(err)));
                    }
                }
            }

            // Poll every attempt in flight; drop those whose timeout has passed.
            for i in 0..MAX_IN_FLIGHT {
                let Some(flight) = self.in_flight.get(i).copied().flatten() else {
                    continue;
                };
                let Some(slot) = slots.get_mut(i) else {
                    continue;
                };
                let Some(fut) = slot.as_mut().as_pin_mut() else {
                    self.vacate(i);
                    continue;
                };
                match fut.poll(cx) {
                    Poll::Ready(Ok(value)) => {
                        slot.set(None);
                        self.vacate(i);
                        self.report.winner = Some(flight.number);
                        self.report.hedge_won = flight.hedge;
                        return Poll::Ready(self.finish(slots, sleep, now, Ok(value)));
                    }
                    Poll::Ready(Err(error)) => {
                        slot.set(None);
                        self.vacate(i);
                        let outcome = self.classify.classify(&error);
                        self.record_failure(now, Last::Error(error), outcome);
                        if outcome == Outcome::Fatal {
                            // Every copy would fail alike: cancel the others and stop now.
                            let reason = GiveUp::NotRetryable;
                            return Poll::Ready(self.give_up(slots, sleep, now, reason));
                        }
                    }
                    Poll::Pending if now >= flight.until => {
                        slot.set(None);
                        self.vacate(i);
                        self.report.timeouts = self.report.timeouts.saturating_add(1);
                        let last = Last::TimedOut(flight.timeout);
                        self.record_failure(now, last, Outcome::TimedOut);
                    }
                    Poll::Pending => {}
                }
            }

            let running = self.running();
            match self.phase {
                Phase::Running if running == 0 => {
                    let decision =
                        self.retry
                            .decide(&self.call, now, self.last_outcome, &mut self.rng);
                    match decision {
                        RetryDecision::Retry(retry) => {
                            self.phase = Phase::Backoff { at: retry.at };
                            continue;
                        }
                        RetryDecision::GiveUp(reason) => {
                            if reason == GiveUp::Throttled {
                                self.count_refusal();
                            }
                            return Poll::Ready(self.give_up(slots, sleep, now, reason));
                        }
                    }
                }
                Phase::Backoff { at } if now >= at => {
                    // Computed again at the instant the retry really starts.
                    match self.call.decide(now) {
                        Decision::Call(limits) => {
                            self.phase = Phase::Running;
                            self.hedge.restart(now);
                            self.report.retries = self.report.retries.saturating_add(1);
                            self.launch(slots, limits, false);
                            continue;
                        }
                        Decision::Skip(s) | Decision::Fail(s) => {
                            return Poll::Ready(self.give_up(
                                slots,
                                sleep,
                                now,
                                GiveUp::UnderFloor(s),
                            ));
                        }
                    }
                }
                Phase::Running if running < MAX_IN_FLIGHT => {
                    match self.hedge.decide(&self.call, now, self.live_delay) {
                        HedgeDecision::Send(limits) => {
                            self.launch(slots, limits, true);
                            continue;
                        }
                        HedgeDecision::Throttled => self.count_refusal(),
                        HedgeDecision::NotYet(_) | HedgeDecision::Stop(_) => {}
                    }
                }
                Phase::Start | Phase::Running | Phase::Backoff { .. } => {}
            }

            // Sleep until the earliest thing due after `now`.
            let target = self.next_wake(now);
            if self.sleep_at != Some(target) || sleep.is_none() {
                sleep.set(Some(self.timer.sleep_until(target)));
                self.sleep_at = Some(target);
            }
            let Some(timer) = sleep.as_mut().as_pin_mut() else {
                continue;
            };
            match timer.poll(cx) {
                Poll::Ready(()) => {
                    sleep.set(None);
                    self.sleep_at = None;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    /// Starts an attempt with `limits` in a free slot. With every slot taken (which the
    /// caller prevents) nothing starts.
    fn launch(&mut self, slots: &mut Slots<'_, F>, limits: Limits, hedge: bool) {
        let free = slots
            .iter_mut()
            .zip(self.in_flight.iter_mut())
            .find(|(slot, state)| state.is_none() && slot.is_none());
        let Some((slot, state)) = free else { return };
        slot.set(Some((self.attempt)(limits)));
        *state = Some(InFlight {
            until: limits.until,
            timeout: limits.timeout,
            number: self.report.attempts,
            hedge,
        });
        self.report.attempts = self.report.attempts.saturating_add(1);
        if hedge {
            self.report.hedges = self.report.hedges.saturating_add(1);
        }
    }

    /// Records a failed attempt (other attempts may still be running). The latest failure
    /// decides the retry, except that a fatal error or a server's "do not retry" stands once
    /// seen. A server's word applies to the hedges too (gRFC A6): "do not retry" stops them,
    /// a delay postpones the next one.
    fn record_failure(&mut self, now: Instant, last: Last<E>, outcome: Outcome) {
        if self.final_failure {
            return;
        }
        self.last = last;
        self.last_outcome = outcome;
        match outcome {
            Outcome::Fatal | Outcome::Pushback(Pushback::DontRetry) => {
                self.final_failure = true;
                self.hedge.stop();
            }
            Outcome::Pushback(Pushback::After(d)) => {
                self.hedge
                    .push_back(now.saturating_add(d), &self.call, self.live_delay);
            }
            Outcome::TimedOut | Outcome::Refused | Outcome::Failed => {}
        }
    }

    /// Marks slot `i` as free (its future has been dropped).
    fn vacate(&mut self, i: usize) {
        if let Some(state) = self.in_flight.get_mut(i) {
            *state = None;
        }
    }

    fn running(&self) -> usize {
        self.in_flight.iter().filter(|s| s.is_some()).count()
    }

    fn count_refusal(&mut self) {
        self.report.budget_refusals = self.report.budget_refusals.saturating_add(1);
    }

    /// The earliest instant after `now` at which something is due: an attempt's timeout,
    /// the end of the backoff, the next hedge (if a slot is free for it), and at the latest
    /// the deadline.
    fn next_wake(&self, now: Instant) -> Instant {
        let mut target = self.call.deadline.instant();
        for flight in self.in_flight.iter().flatten() {
            target = target.min(flight.until);
        }
        match self.phase {
            Phase::Backoff { at } => target = target.min(at),
            Phase::Running if self.running() < MAX_IN_FLIGHT => {
                if let Some(at) = self.hedge.next_at(&self.call, self.live_delay) {
                    if at > now {
                        target = target.min(at);
                    }
                }
            }
            Phase::Start | Phase::Running => {}
        }
        target
    }

    /// Ends the call after a failure with no retry to follow.
    fn give_up(
        &mut self,
        slots: &mut Slots<'_, F>,
        sleep: &mut Pin<&mut Option<Tm::Sleep>>,
        now: Instant,
        reason: GiveUp,
    ) -> Called<T, E> {
        self.report.gave_up = Some(reason);
        let last = core::mem::replace(&mut self.last, Last::None);
        let err = if self.call.deadline.is_expired(now) {
            CallError::Library(Error::DeadlineExceeded)
        } else {
            match last {
                Last::Error(e) => CallError::Attempt(e),
                Last::TimedOut(after) => CallError::Library(Error::Timeout { after }),
                Last::None => CallError::Library(Error::DeadlineExceeded),
            }
        };
        self.finish(slots, sleep, now, Err(err))
    }

    /// Drops every attempt still running (the losers) and the sleep, and builds the result.
    fn finish(
        &mut self,
        slots: &mut Slots<'_, F>,
        sleep: &mut Pin<&mut Option<Tm::Sleep>>,
        now: Instant,
        result: Result<T, CallError<E>>,
    ) -> Called<T, E> {
        for (slot, state) in slots.iter_mut().zip(self.in_flight.iter_mut()) {
            if slot.is_some() {
                slot.set(None);
                self.report.cancelled = self.report.cancelled.saturating_add(1);
            }
            *state = None;
        }
        sleep.set(None);
        self.sleep_at = None;
        self.report.ended = now;
        Called {
            result,
            report: self.report,
        }
    }
}
