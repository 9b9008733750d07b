//! The driver's state machine: one `poll` that reads the clock, polls the attempts in flight,
//! and asks the call's [`Course`] what to start next. Every decision is the course's; the
//! machine only polls, sleeps and keeps the attempt futures.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::budget::Limits;
use crate::retry::{GiveUp, Outcome, RetryDecision};
use crate::rng::Rng;
use crate::time::Instant;
use crate::timer::Timer;

use super::MAX_IN_FLIGHT;
use super::course::{Attempt, Course};
use super::report::{CallError, Called};

/// The attempt futures' storage: one pinned `Option` per slot, each a separate local of the
/// driver's async fn (so each can be pinned without `unsafe`).
pub(super) type Slots<'s, F> = [Pin<&'s mut Option<F>>; MAX_IN_FLIGHT];

/// Classifies an attempt's error for the retry decision.
///
/// Implemented for every `FnMut(&E) -> Outcome`. The drivers take that closure type
/// directly, so a classifier passed to them needs no annotation (`|_| Outcome::Failed`); a
/// type of your own that implements this trait is passed as `|e| c.classify(e)`:
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
    course: Course<'c, E>,
    timer: Tm,
    rng: R,
    classify: C,
    attempt: A,
    phase: Phase,
    /// The attempt running in each slot.
    in_flight: [Option<Attempt<'c>>; MAX_IN_FLIGHT],
    sleep_at: Option<Instant>,
}

impl<'c, Tm, R, C, A, E> Machine<'c, Tm, R, C, A, E> {
    pub(super) const fn new(
        course: Course<'c, E>,
        timer: Tm,
        rng: R,
        classify: C,
        attempt: A,
    ) -> Self {
        Machine {
            course,
            timer,
            rng,
            classify,
            attempt,
            phase: Phase::Start,
            in_flight: [const { None }; MAX_IN_FLIGHT],
            sleep_at: None,
        }
    }
}

impl<'c, Tm, R, C, A, F, T, E> Machine<'c, Tm, R, C, A, E>
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
                match self.course.start(now) {
                    Ok(first) => {
                        self.phase = Phase::Running;
                        self.launch(slots, first);
                    }
                    Err(err) => return Poll::Ready(self.finish(slots, sleep, now, Err(err))),
                }
            }

            // Poll every attempt in flight; drop those whose timeout has passed.
            for i in 0..MAX_IN_FLIGHT {
                let Some(until) = self.until(i) else {
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
                        if let Some(winner) = self.vacate(i) {
                            self.course.succeeded(winner, now);
                        }
                        return Poll::Ready(self.finish(slots, sleep, now, Ok(value)));
                    }
                    Poll::Ready(Err(error)) => {
                        slot.set(None);
                        let Some(failed) = self.vacate(i) else {
                            continue;
                        };
                        let outcome = self.classify.classify(&error);
                        if self.course.failed(failed, error, outcome, now) {
                            // Every copy would fail alike: cancel the others and stop now.
                            let err = self.course.give_up(GiveUp::NotRetryable, now);
                            return Poll::Ready(self.finish(slots, sleep, now, Err(err)));
                        }
                    }
                    Poll::Pending if now >= until => {
                        slot.set(None);
                        if let Some(late) = self.vacate(i) {
                            self.course.timed_out(late, now);
                        }
                    }
                    Poll::Pending => {}
                }
            }

            let running = self.running();
            match self.phase {
                Phase::Running if running == 0 => match self.course.retry(&mut self.rng, now) {
                    RetryDecision::Retry(retry) => {
                        self.phase = Phase::Backoff { at: retry.at };
                        continue;
                    }
                    RetryDecision::GiveUp(reason) => {
                        let err = self.course.give_up(reason, now);
                        return Poll::Ready(self.finish(slots, sleep, now, Err(err)));
                    }
                },
                // Computed again at the instant the retry really starts.
                Phase::Backoff { at } if now >= at => match self.course.restart(now) {
                    Ok(retry) => {
                        self.phase = Phase::Running;
                        self.launch(slots, retry);
                        continue;
                    }
                    Err(reason) => {
                        let err = self.course.give_up(reason, now);
                        return Poll::Ready(self.finish(slots, sleep, now, Err(err)));
                    }
                },
                Phase::Running if running < MAX_IN_FLIGHT => {
                    if let Some(hedge) = self.course.hedge(now) {
                        self.launch(slots, hedge);
                        continue;
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

    /// Starts `attempt` in a free slot. With every slot taken (which the caller prevents)
    /// nothing starts, and the attempt is dropped (its breaker permit handed back).
    fn launch(&mut self, slots: &mut Slots<'_, F>, attempt: Attempt<'c>) {
        let free = slots
            .iter_mut()
            .zip(self.in_flight.iter_mut())
            .find(|(slot, state)| state.is_none() && slot.is_none());
        let Some((slot, state)) = free else { return };
        slot.set(Some((self.attempt)(attempt.limits())));
        *state = Some(attempt);
    }

    /// The end of the timeout of the attempt in slot `i`, if one runs there.
    fn until(&self, i: usize) -> Option<Instant> {
        self.in_flight
            .get(i)
            .and_then(Option::as_ref)
            .map(|a| a.limits().until)
    }

    /// Marks slot `i` as free (its future has been dropped) and returns its attempt.
    fn vacate(&mut self, i: usize) -> Option<Attempt<'c>> {
        self.in_flight.get_mut(i).and_then(Option::take)
    }

    fn running(&self) -> usize {
        self.in_flight.iter().filter(|s| s.is_some()).count()
    }

    /// The earliest instant after `now` at which something is due: an attempt's timeout,
    /// the end of the backoff, the next hedge (if a slot is free for it), and at the latest
    /// the deadline.
    fn next_wake(&self, now: Instant) -> Instant {
        let mut target = self.course.call().deadline.instant();
        for flight in self.in_flight.iter().flatten() {
            target = target.min(flight.limits().until);
        }
        match self.phase {
            Phase::Backoff { at } => target = target.min(at),
            Phase::Running if self.running() < MAX_IN_FLIGHT => {
                if let Some(at) = self.course.next_hedge() {
                    if at > now {
                        target = target.min(at);
                    }
                }
            }
            Phase::Start | Phase::Running => {}
        }
        target
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
            slot.set(None);
            if let Some(loser) = state.take() {
                self.course.cancel(loser, now);
            }
        }
        sleep.set(None);
        self.sleep_at = None;
        self.course.end(result, now)
    }
}
