//! [`CallMachine`]: the whole sequence of one dependency call, sans-IO.
//!
//! The machine owns every step of a call: the first attempt or why there is none, each
//! attempt's timeout, hedges, retries after a backoff, the breaker's leave, and the result.
//! It never reads a clock and never sleeps: it takes `now` and each attempt's result, and
//! answers what to do next ([`Action`]) and when it next needs the clock
//! ([`poll_timeout`](CallMachine::poll_timeout)), the way quinn-proto's `Connection` and
//! smoltcp's `Interface` do. Every step is also told to an [`Observer`] as an [`Event`].
//!
//! A driver is a short loop over it: the async [`Driver`](super::Driver), the blocking
//! driver of `deadline-std`, the CLI's simulator. They agree because there is nothing else
//! to agree on.

use core::time::Duration;

use crate::breaker::BreakerOutcome;
use crate::call_context::Call;
use crate::call_timeout::Limits;
use crate::counters::Counters;
use crate::outcome::{Outcome, Pushback};
use crate::retry::{GiveUp, RetryDecision};
use crate::rng::Rng;
use crate::time::Instant;

use super::course::Course;
use super::event::{Event, EventKind, Observer};
use super::flight::Attempt;
use super::mode::sealed::Room;
use super::mode::{DeadlineOnly, Full, Mode, Records};
use super::report::{CallError, Called, Report};

/// What a driver does next, as [`CallMachine::poll`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use = "an action is the driver's next step"]
pub enum Action {
    /// Start an attempt in `slot` (below the mode's room, at most [`MAX_IN_FLIGHT`](super::MAX_IN_FLIGHT)) with these limits, then poll
    /// again. The attempt must end by [`Limits::until`]; a driver that can cut an attempt off
    /// (an async one) is told to, with [`Action::Cancel`].
    Start {
        /// Where the attempt runs: name its result with it.
        slot: usize,
        /// The attempt's timeout, deadline and connect limit.
        limits: Limits,
    },
    /// Drop the attempt in `slot`, which is still running: its timeout has passed, or the
    /// call has ended otherwise. Then poll again.
    Cancel {
        /// The attempt's slot.
        slot: usize,
    },
    /// Nothing is due before `until`: run the attempts in flight, and report the first that
    /// ends ([`succeeded`](CallMachine::succeeded), [`failed`](CallMachine::failed)); if none
    /// ends, sleep until `until`. Then poll again, with the clock's reading.
    Wait {
        /// The earliest instant something is due: an attempt's timeout, a hedge, the end of
        /// a backoff, at the latest the deadline.
        until: Instant,
    },
    /// The call is over: take its result with [`CallMachine::finish`].
    Done,
}

/// Where the call is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Not started: the first poll decides the first attempt.
    Start,
    /// Attempts in flight (or about to be retried).
    Running,
    /// Waiting for a retry to start at the end of its backoff (which the course keeps); copies
    /// started before it may still be running.
    Backoff,
    /// Over (with how it ended, until [`CallMachine::finish`] takes it); the attempts still
    /// marked in flight are to be cancelled.
    Done,
}

/// The whole sequence of one dependency call, sans-IO.
///
/// The machine owns every step of a call: the first attempt or why there is none, each
/// attempt's timeout, hedges, retries after a backoff, the breaker's leave, and the result.
/// It never reads a clock and never sleeps: it takes `now` and each attempt's result, and
/// answers what to do next ([`Action`]) and when it next needs the clock
/// ([`poll_timeout`](CallMachine::poll_timeout)), the way quinn-proto's `Connection` and
/// smoltcp's `Interface` do. Every step is also told to an [`Observer`] as an
/// [`Event`](super::Event).
///
/// A blocking driver, in virtual time, is this loop (the attempt here fails once, then
/// answers):
///
/// ```
/// use deadline_core::{Clock, Deadline, Instant, ms, Outcome, Policy};
/// use deadline_core::call::Call;
/// use deadline_core::policy::Backoff;
/// use deadline_core::rng::SplitMix64;
/// use deadline_core::virtual_time::ManualClock;
/// use deadline_core::drive::{Action, CallMachine, NoObserver};
///
/// let b = Policy::required("B").idempotent().with_cap(ms(110)).with_floor(ms(30))
///     .with_retries(1).with_backoff(Backoff::constant(ms(10)));
/// let clock = ManualClock::new();
/// let call = Call::new(&b, Deadline::after(clock.now(), ms(200)), ms(20));
/// let mut machine = CallMachine::<&str>::new(call);
/// let (mut rng, mut events) = (SplitMix64::new(1), NoObserver);
/// let mut tries = 0;
/// let value = loop {
///     match machine.poll(clock.now(), &mut rng, &mut events) {
///         Action::Start { slot, limits } => {
///             tries += 1;
///             clock.advance(ms(40)); // the attempt runs, within `limits`
///             if tries == 1 {
///                 machine.failed(slot, "503", Outcome::Failed, clock.now(), &mut events);
///             } else {
///                 machine.succeeded(slot, clock.now(), &mut events);
///             }
///         }
///         Action::Wait { until } => clock.set(until), // the backoff
///         Action::Cancel { .. } => unreachable!("one attempt at a time, run to its end"),
///         Action::Done => break "price",
///     }
/// };
/// let called = machine.finish(Some(value), clock.now());
/// assert_eq!(called.result, Ok("price"));
/// assert_eq!(called.report.retries, 1);
/// assert_eq!(called.report.ended, Instant::from_millis(90)); // 40 + 10 + 40
/// ```
#[derive(Debug)]
pub struct CallMachine<'c, E, M: Mode = Full> {
    course: Course<'c, E, M>,
    /// Where the call is: a byte, read at every step.
    stage: Stage,
    /// How the call ended, from the end until [`finish`](Self::finish) takes it.
    ended: Option<Result<(), CallError<E>>>,
    /// How many of the records hold an attempt in flight, in a full call (so that "none" is
    /// one compare); unused in a deadline-only one, whose one record says.
    running: u8,
    /// A copy failed (or timed out) and its retry is not decided yet, in a full call: decided
    /// at the next poll, even while other copies still run.
    retry_due: bool,
    /// The attempts were given their one more poll past a timeout ([`spare`](Self::spare)).
    spared: bool,
    /// The attempt running in each slot: room for as many as the mode runs at once.
    in_flight: <M as Room>::Records,
}

impl<'c, E> CallMachine<'c, E, Full> {
    /// The machine of `call`, before its first attempt.
    #[must_use]
    pub const fn new(call: Call<'c>) -> Self {
        CallMachine {
            course: Course::new(call),
            stage: Stage::Start,
            ended: None,
            running: 0,
            retry_due: false,
            spared: false,
            in_flight: <<Full as Room>::Records as Records>::EMPTY,
        }
    }

    /// The same machine, hedging after `live` (such as the p95 of a live latency histogram)
    /// instead of the policy's fixed delay, when it is `Some`. (A deadline-only machine sends
    /// no hedge: it has no such setting.)
    #[must_use]
    pub fn with_hedge_delay(mut self, live: Option<Duration>) -> Self {
        self.course.set_hedge_delay(live);
        self
    }
}

impl<'c, E> CallMachine<'c, E, DeadlineOnly> {
    /// The machine of `call` that makes one attempt, with its timeout from the time left, and
    /// nothing else (see [`Driver::deadline_only`](super::Driver::deadline_only)).
    #[must_use]
    pub const fn deadline_only(call: Call<'c>) -> Self {
        CallMachine {
            course: Course::new(call),
            stage: Stage::Start,
            ended: None,
            running: 0,
            retry_due: false,
            spared: false,
            in_flight: <<DeadlineOnly as Room>::Records as Records>::EMPTY,
        }
    }
}

impl<'c, E, M: Mode> CallMachine<'c, E, M> {
    /// The machine of `call` in mode `M`, hedging after `live` when it is `Some`: built in
    /// place, in one go (the driver's future holds it, and is moved as little as possible).
    #[inline]
    pub(crate) fn with_mode(call: Call<'c>, live: Option<Duration>) -> Self {
        CallMachine {
            course: Course::with_hedge_delay_of(call, live),
            stage: Stage::Start,
            ended: None,
            running: 0,
            retry_due: false,
            spared: false,
            in_flight: <M::Records as Records>::empty(),
        }
    }

    /// Before the first poll: the call's deadline becomes the earlier of its own and
    /// `deadline` (the one current when the call starts), and it hedges after `live` when
    /// that is `Some`. Nothing changes once the call has started.
    pub(crate) fn settle(&mut self, deadline: crate::deadline::Deadline, live: Option<Duration>) {
        if self.stage == Stage::Start {
            self.course.settle(deadline, live);
        }
    }

    /// The call this machine runs.
    #[must_use]
    pub const fn call(&self) -> &Call<'c> {
        self.course.call()
    }

    /// The report so far (its [`ended`](Report::ended) is [`Instant::ZERO`] until the call
    /// ends: [`finish`](Self::finish) gives the final one).
    #[must_use]
    pub fn report(&self) -> Report {
        self.course.report(Instant::ZERO)
    }

    /// Whether the call is over ([`poll`](Self::poll) answers [`Action::Done`]).
    #[must_use]
    pub fn is_done(&self) -> bool {
        self.stage == Stage::Done && self.running() == 0
    }

    /// Adds the call and what it did so far (its timeouts, retries, hedges, budget refusals
    /// and breaker rejections) to `counters`: for a call that did not end
    /// ([`is_unfinished`](Self::is_unfinished)), whose caller went away.
    pub(crate) fn record_steps(&self, counters: &Counters) {
        self.course.record_steps(counters);
    }

    /// Whether the call has started ([`has_started`](Self::has_started)) and not been
    /// [`finish`](Self::finish)ed: a call whose future is dropped in this state was left
    /// before it ended (its caller went away).
    #[must_use]
    #[inline]
    pub(crate) fn is_unfinished(&self) -> bool {
        match self.stage {
            Stage::Start => false,
            Stage::Running | Stage::Backoff => true,
            Stage::Done => self.ended.is_some(),
        }
    }

    /// Whether the call has started (its first [`poll`](Self::poll) has been made): before
    /// that, no attempt runs.
    #[must_use]
    pub fn has_started(&self) -> bool {
        self.stage != Stage::Start
    }

    /// The limits of the attempt running in `slot`, if one runs there.
    #[must_use]
    pub fn limits(&self, slot: usize) -> Option<Limits> {
        self.in_flight
            .all()
            .get(slot)
            .and_then(Option::as_ref)
            .map(|a| a.limits(self.call().policy))
    }

    /// The next step at `now`, drawing jitter from `rng`. Call it after every change: an
    /// attempt's result, a wake-up, the start of the call.
    // Each driver calls it from one place in its loop: inlined there, the action it returns
    // is matched away.
    #[inline(always)]
    pub fn poll<R: Rng + ?Sized, O: Observer + ?Sized>(
        &mut self,
        now: Instant,
        rng: &mut R,
        observer: &mut O,
    ) -> Action {
        if self.stage == Stage::Start {
            // The first poll: the first attempt, or why there is none.
            return match self.course.start(now) {
                Ok(first) => {
                    self.stage = Stage::Running;
                    // Nothing runs yet: the first slot is free.
                    self.launch_in(0, first, observer)
                }
                Err(error) => {
                    observer.on_event(&Event::new(now, EventKind::not_made(&error)));
                    self.end(Err(error), now, observer);
                    Action::Done
                }
            };
        }
        // A poll after one more poll was given (`spare`): what is due now is done, and an
        // attempt that comes to its timeout later may be given one more poll in its turn.
        self.spared = false;
        if self.stage != Stage::Done {
            // Past the first attempt's start: what the call needs for its retries and hedges.
            self.course.follow_up(now);
        }
        loop {
            if self.stage == Stage::Done {
                return match self.next_in_flight() {
                    Some(slot) => {
                        self.cancel(slot, now, observer);
                        Action::Cancel { slot }
                    }
                    None => Action::Done,
                };
            }

            // An attempt whose timeout has passed is cut off.
            if let Some(slot) = self.expired(now) {
                if let Some(late) = self.take(slot) {
                    let after = late.timeout();
                    let capped = late.is_capped(self.call().cap_micros());
                    let number = late.number();
                    self.course.timed_out(late, now);
                    if M::FULL {
                        self.retry_due = true;
                    }
                    observer.on_event(&Event::new(
                        now,
                        EventKind::TimedOut {
                            attempt: number,
                            after,
                            timeout: after,
                            capped,
                        },
                    ));
                }
                return Action::Cancel { slot };
            }

            let mut hedge = None;
            match self.stage {
                Stage::Running if self.running() == 0 && !M::FULL => {
                    // A deadline-only call makes one attempt: it has been made.
                    self.give_up(GiveUp::Exhausted, now, observer);
                    continue;
                }
                // After a failure, its retry is decided at once, even while other copies still
                // run: a failed hedge's retry does not wait for a slow first copy. It runs in
                // the slot the failure left, after its backoff.
                Stage::Running
                    if M::FULL
                        && (self.running() == 0
                            || (self.retry_due && self.running() < self.in_flight.all().len())) =>
                {
                    self.retry_due = false;
                    match self.course.retry(rng, now) {
                        RetryDecision::Retry(retry) => {
                            observer.on_event(&Event::new(
                                now,
                                EventKind::Backoff {
                                    until: retry.at,
                                    wait: retry.wait,
                                },
                            ));
                            self.course.back_off_until(retry.at);
                            self.stage = Stage::Backoff;
                            // A backoff of nothing (full jitter can draw zero): the retry
                            // starts now, not after a wait that has already ended.
                            continue;
                        }
                        RetryDecision::GiveUp(reason) => {
                            // With copies still running, the call waits for them (and may
                            // still hedge), and decides again if they fail too.
                            if self.running() == 0 {
                                self.give_up(reason, now, observer);
                            }
                            continue;
                        }
                    }
                }
                // Computed again at the instant the retry really starts (or at the deadline,
                // which no backoff outlasts: the restart then gives up).
                Stage::Backoff
                    if M::FULL
                        && (now >= self.course.backoff_end()
                            || self.call().deadline.is_expired(now)) =>
                {
                    self.stage = Stage::Running;
                    match self.course.restart(now) {
                        Ok(retry) => return self.launch(retry, observer),
                        Err(reason) => {
                            // Not made after all: with copies still running, the call waits
                            // for them, as when no retry is allowed.
                            if self.running() == 0 {
                                self.give_up(reason, now, observer);
                            }
                            continue;
                        }
                    }
                }
                Stage::Running if M::FULL && self.running() < self.in_flight.all().len() => {
                    // Worked out once per poll: sent now if due, else the wait ends there.
                    hedge = self.course.next_hedge();
                    if hedge.is_some_and(|due| now >= due) {
                        if let Some(sent) = self.course.send_hedge(now) {
                            return self.launch(sent, observer);
                        }
                        // Not sent (refused or stopped): when the next one is due, if ever.
                        hedge = self.course.next_hedge();
                    }
                }
                Stage::Start | Stage::Running | Stage::Backoff | Stage::Done => {}
            }
            return match self.wait_until(hedge) {
                Some(until) => Action::Wait { until },
                None => continue,
            };
        }
    }

    /// When the machine next needs the clock, if no attempt ends first: the earliest of the
    /// attempts' timeouts, the next hedge (when a slot is free for it), the end of the
    /// backoff, and at the latest the deadline. `None` (poll at once) before the first
    /// [`poll`](Self::poll), once the call is over, and while attempts run when one has ended
    /// since the latest poll and what follows it (a retry, or the end of the call) is not
    /// decided yet. (In a backoff, a copy that fails leaves the backoff's end as it is, or
    /// moves it by its pushback: that is the instant named.)
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.stage == Stage::Running && (self.retry_due || self.running() == 0) {
            return None;
        }
        let room = M::FULL && self.running() > 0 && self.running() < self.in_flight.all().len();
        let hedge = if room { self.course.next_hedge() } else { None };
        self.wait_until(hedge)
    }

    /// [`poll_timeout`](Self::poll_timeout), with `hedge` the next hedge's time when a slot is
    /// free for one while attempts run (it counts only if it is after the latest poll: one
    /// due then was sent or refused then).
    fn wait_until(&self, hedge: Option<Instant>) -> Option<Instant> {
        // The end of the backoff, or the next hedge.
        let next = match self.stage {
            Stage::Start | Stage::Done => return None,
            Stage::Backoff => Some(self.course.backoff_end()),
            Stage::Running => hedge.filter(|&at| at > self.course.latest_poll()),
        };
        let mut target = self.call().deadline.instant();
        for flight in self.in_flight.all().iter().flatten() {
            target = target.min(flight.until);
        }
        Some(next.map_or(target, |at| target.min(at)))
    }

    /// The attempt in `slot` answered at `now`: it wins, and the call is over (the attempts
    /// still running are to be cancelled: [`poll`](Self::poll) says which).
    #[inline]
    pub fn succeeded<O: Observer + ?Sized>(&mut self, slot: usize, now: Instant, observer: &mut O) {
        if self.stage == Stage::Done {
            // Too late: the call has ended; the attempt is cancelled at the next poll.
            return;
        }
        let Some(winner) = self.take(slot) else {
            return;
        };
        let number = winner.number();
        let took = now.saturating_duration_since(winner.started());
        self.course.succeeded(winner, now);
        observer.on_event(&Event::new(
            now,
            EventKind::Succeeded {
                attempt: number,
                took,
            },
        ));
        self.end(Ok(()), now, observer);
    }

    /// The attempt in `slot` failed at `now` with its own `error`, which the classifier read
    /// as `outcome`. A fatal error ends the call ([`GiveUp::NotRetryable`]); after any other,
    /// the next [`poll`](Self::poll) decides its retry, even while other attempts still run
    /// (the retry then runs beside them); with no retry allowed, the call waits for the
    /// attempts still running. A server's pushback that comes while another retry backs off
    /// applies to that retry: "do not retry" calls it off, "retry after" postpones it.
    pub fn failed<O: Observer + ?Sized>(
        &mut self,
        slot: usize,
        error: E,
        outcome: Outcome,
        now: Instant,
        observer: &mut O,
    ) {
        if self.stage == Stage::Done {
            // Too late: the call has ended; the attempt is cancelled at the next poll.
            return;
        }
        let Some(failed) = self.take(slot) else {
            return;
        };
        let attempt = failed.number();
        let timeout = failed.timeout();
        let capped = failed.is_capped(self.call().cap_micros());
        // The backoff's end before the failure: a pushback the course hears may move it.
        let backoff_end = self.course.backoff_end();
        let ran_out = self.course.failed(failed, error, outcome, now);
        if M::FULL {
            self.retry_due = true;
        }
        // An error that says the attempt ran out of time is its timeout: heard as one (the
        // dependency's histogram records it, as when the driver cuts an attempt off).
        let kind = match ran_out {
            Some(after) => EventKind::TimedOut {
                attempt,
                after,
                timeout,
                capped,
            },
            None => EventKind::Failed { attempt, outcome },
        };
        observer.on_event(&Event::new(now, kind));
        if matches!(outcome, Outcome::Fatal | Outcome::Broken) {
            self.give_up(GiveUp::NotRetryable, now, observer);
        } else if M::FULL && self.stage == Stage::Backoff {
            self.pushback_on_backoff(outcome, backoff_end, now, observer);
        }
    }

    /// The attempt in `slot` ended at `now` having sent nothing, refused no later than
    /// `refused_at` (the clock read again after the poll that found it; the call's events
    /// stay at `now`) for want of `needed` left before its deadline
    /// ([`Onward::Nothing`](crate::runtime::Onward::Nothing)). It never reached the
    /// dependency, so its breaker does not count it (the permit is handed back), and no
    /// latency of the dependency's is heard.
    ///
    /// When the time that was short was the attempt's own, it ran out of time, as if cut off:
    /// counted as a timeout, and the next [`poll`](Self::poll) decides its retry as after a
    /// timeout. That is when it had less than `needed` left at `refused_at`, and an attempt
    /// starting then would end later (its cap, not the deadline, ended it) with `needed` or
    /// more: it spent its time before it could send (waiting for a pooled connection, say).
    /// Otherwise the call's time was short, or would be for any attempt, or something else
    /// than time stopped it: no retry or hedge follows, and with no other attempt running,
    /// the call ends ([`GiveUp::NothingToSend`]) with the failure of an earlier attempt, if
    /// one failed, or else
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded); otherwise it waits for
    /// them.
    pub fn unsent<O: Observer + ?Sized>(
        &mut self,
        slot: usize,
        needed: Duration,
        refused_at: Instant,
        now: Instant,
        observer: &mut O,
    ) {
        if self.stage == Stage::Done {
            // Too late: the call has ended; the attempt is cancelled at the next poll.
            return;
        }
        let Some(unsent) = self.take(slot) else {
            return;
        };
        let number = unsent.number();
        let its_own_time = self.course.unsent(unsent, needed, refused_at, now);
        observer.on_event(&Event::new(now, EventKind::NotSent { attempt: number }));
        if M::FULL {
            // Decided at the next poll, as after a failure.
            self.retry_due = true;
            if !its_own_time && self.stage == Stage::Backoff {
                // The call's time is short: a retry backing off would have less time still.
                self.stage = Stage::Running;
            }
        }
    }

    /// A copy failed with `outcome` at `now` while a retry backs off: a server's word applies
    /// to that retry too, as it does to the hedges (gRFC A6). "Do not retry" calls the retry
    /// off: the next [`poll`](Self::poll) decides again, and gives up, or waits for the copies
    /// still running. "Retry after" postpones it until then, if that is later (the course
    /// keeps that instant for any retry of the call, whatever fails after it); a wait that
    /// would end at or past the deadline calls it off too (the next poll's decision gives up
    /// with [`GiveUp::BackoffPastDeadline`](crate::drive::GiveUp::BackoffPastDeadline)).
    ///
    /// `backoff_end` is the backoff's end before the failure was heard (the course has moved
    /// it to `now + wait` if that is later).
    fn pushback_on_backoff<O: Observer + ?Sized>(
        &mut self,
        outcome: Outcome,
        backoff_end: Instant,
        now: Instant,
        observer: &mut O,
    ) {
        match outcome {
            Outcome::Pushback(Pushback::DontRetry) => self.stage = Stage::Running,
            Outcome::Pushback(Pushback::After(wait)) => {
                let until = now.saturating_add(wait);
                if self.call().deadline.is_expired(until) {
                    self.stage = Stage::Running;
                } else if until > backoff_end {
                    observer.on_event(&Event::new(now, EventKind::Backoff { until, wait }));
                }
            }
            Outcome::Fatal
            | Outcome::Broken
            | Outcome::TimedOut
            | Outcome::Refused
            | Outcome::Failed => {}
        }
    }

    /// What the call returns, at `now`: `value` (the winner's answer) if an attempt
    /// succeeded, else why there is none, with the report. Call it once
    /// [`poll`](Self::poll) has answered [`Action::Done`].
    pub fn finish<T>(&mut self, value: Option<T>, now: Instant) -> Called<T, E> {
        let ended = self.ended.take();
        let result = match (ended, value) {
            (Some(Ok(())), Some(value)) => Ok(value),
            (Some(Err(error)), _) => Err(error),
            // Finished early (no result yet, or a success without its value): nobody waits
            // any more, or the driver lost the answer; either way there is none.
            (Some(Ok(())) | None, _) => Err(CallError::Library(crate::Error::DeadlineExceeded)),
        };
        self.course.end(result, now)
    }

    /// Starts `attempt` in a free slot and says so.
    fn launch<O: Observer + ?Sized>(&mut self, attempt: Attempt, observer: &mut O) -> Action {
        let free = self.in_flight.all().iter().position(Option::is_none);
        self.launch_in(free.unwrap_or(usize::MAX), attempt, observer)
    }

    /// Starts `attempt` in `slot` (which is free, or past the last when none is) and says so.
    #[inline(always)]
    fn launch_in<O: Observer + ?Sized>(
        &mut self,
        slot: usize,
        attempt: Attempt,
        observer: &mut O,
    ) -> Action {
        let len = self.in_flight.all().len();
        if slot >= len {
            // Every slot taken, which `poll` prevents: the attempt is not made (its breaker
            // permit handed back), and the machine waits for the deadline at the latest.
            let mut unmade = attempt;
            let at = unmade.started();
            if M::FULL {
                unmade.settle(self.call().breaker, BreakerOutcome::Abandoned, at);
            }
            return Action::Wait {
                until: self.call().deadline.instant(),
            };
        }
        let limits = attempt.limits(self.call().policy);
        observer.on_event(&Event::new(
            attempt.started(),
            EventKind::Started {
                attempt: attempt.number(),
                hedge: attempt.is_hedge(),
                timeout: limits.timeout(),
            },
        ));
        if let Some(state) = self.in_flight.all_mut().get_mut(slot) {
            debug_assert!(state.is_none(), "an attempt starts in a free slot");
            *state = Some(attempt);
            if M::FULL {
                // At most one per record: it cannot wrap.
                self.running = self.running.wrapping_add(1);
            }
        }
        Action::Start { slot, limits }
    }

    /// Gives up at `now` for `reason`: the call ends with the error the course chooses.
    fn give_up<O: Observer + ?Sized>(&mut self, reason: GiveUp, now: Instant, observer: &mut O) {
        let error = self.course.give_up(reason, now);
        observer.on_event(&Event::new(now, EventKind::GaveUp { reason }));
        self.end(Err(error), now, observer);
    }

    /// The call is over at `now` with `result`.
    fn end<O: Observer + ?Sized>(
        &mut self,
        result: Result<(), CallError<E>>,
        now: Instant,
        observer: &mut O,
    ) {
        observer.on_event(&Event::new(
            now,
            EventKind::Ended {
                ok: result.is_ok(),
                deadline: matches!(
                    result,
                    Err(CallError::Library(crate::Error::DeadlineExceeded))
                ),
            },
        ));
        self.stage = Stage::Done;
        self.ended = Some(result);
    }

    /// Cancels the attempt in `slot` because the call ended otherwise.
    fn cancel<O: Observer + ?Sized>(&mut self, slot: usize, now: Instant, observer: &mut O) {
        if let Some(loser) = self.take(slot) {
            let number = loser.number();
            let after = now.saturating_duration_since(loser.started());
            self.course.cancel(loser, now);
            observer.on_event(&Event::new(
                now,
                EventKind::Cancelled {
                    attempt: number,
                    after,
                },
            ));
        }
    }

    /// Whether the next [`poll`](Self::poll) at `now` would cut an attempt off (one runs past
    /// its timeout, and the call has not ended) that has not yet been [`spare`](Self::spare)d
    /// one more poll.
    pub(crate) fn would_cut(&self, now: Instant) -> bool {
        !self.spared && self.stage != Stage::Done && self.expired(now).is_some()
    }

    /// Gives the attempts one more poll before one is cut off: the driver's runtime says its
    /// task's "pending" may be its scheduler's (`Timer::budget_spent`). Not again until the
    /// next [`poll`](Self::poll), which cuts off what is still due.
    pub(crate) fn spare(&mut self) {
        self.spared = true;
    }

    /// The first slot whose attempt's timeout has passed at `now`.
    fn expired(&self, now: Instant) -> Option<usize> {
        if self.running() == 0 {
            return None;
        }
        self.in_flight
            .all()
            .iter()
            .position(|a| a.as_ref().is_some_and(|a| now >= a.until))
    }

    /// The first slot with an attempt in flight.
    fn next_in_flight(&self) -> Option<usize> {
        if self.running() == 0 {
            return None;
        }
        self.in_flight.all().iter().position(Option::is_some)
    }

    fn take(&mut self, slot: usize) -> Option<Attempt> {
        let taken = self
            .in_flight
            .all_mut()
            .get_mut(slot)
            .and_then(Option::take);
        if M::FULL && taken.is_some() {
            // One per record taken, counted when it started: it cannot wrap.
            self.running = self.running.wrapping_sub(1);
        }
        taken
    }

    /// How many attempts are in flight: counted in a full call, its one record looked at in a
    /// deadline-only one.
    #[inline(always)]
    fn running(&self) -> usize {
        if M::FULL {
            usize::from(self.running)
        } else {
            self.in_flight.all().iter().filter(|s| s.is_some()).count()
        }
    }
}

/// Hands back the breaker permits of `machine`'s attempts still in flight, unused: out of
/// line, since a call that ended holds none.
#[inline(never)]
fn abandon_in_flight<E, M: Mode>(machine: &mut CallMachine<'_, E, M>) {
    let breaker = machine.course.call().breaker;
    for flight in machine.in_flight.all_mut().iter_mut().flatten() {
        flight.abandon(breaker);
    }
}

impl<E, M: Mode> Drop for CallMachine<'_, E, M> {
    /// The attempts still in flight are abandoned: their breaker permits are handed back at
    /// once (a half-open breaker's probe slot is freed now, not after its probe timeout).
    // A call that ended holds none: the test is inlined where the driver's future is dropped.
    #[inline]
    fn drop(&mut self) {
        // Only a mode with a breaker holds permits.
        if M::FULL && self.running() != 0 && self.course.call().breaker.is_some() {
            abandon_in_flight(self);
        }
    }
}
