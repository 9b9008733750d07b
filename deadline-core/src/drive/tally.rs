//! [`Tally`]: how a call counts what it did while it runs, for its [`Report`]: the whole
//! report for a call that may retry and hedge, a few bytes for a deadline-only call.

use crate::counters::{CounterEvent, Counters};
use crate::retry::GiveUp;
use crate::time::Instant;

use super::report::Report;

/// What a call counts while it runs; its [`Report`] at the end.
pub trait Tally: core::fmt::Debug {
    /// Before anything happened.
    const NEW: Self;

    /// Before anything happened, written field by field (where [`NEW`](Tally::NEW), a
    /// constant, may be copied whole from read-only memory).
    fn fresh() -> Self;

    /// The first attempt, number 0, started at `now`: the call started, and one attempt is
    /// launched (the first is counted here, not by [`launched`](Tally::launched)).
    fn started(&mut self, now: Instant);

    /// When the first attempt started ([`Instant::ZERO`] before).
    fn started_at(&self) -> Instant;

    /// An attempt after the first starts (a hedge, or a retry): its number, counting from 0.
    fn launched(&mut self, hedge: bool) -> u32;

    /// Attempt `number` won (a hedge, or not).
    fn won(&mut self, number: u32, hedge: bool);

    /// An attempt's timeout fired.
    fn timed_out(&mut self);

    /// An attempt was cancelled because the call ended otherwise.
    fn cancelled(&mut self);

    /// A retry started.
    fn retried(&mut self);

    /// The retry budget refused a retry or a hedge.
    fn budget_refused(&mut self);

    /// The circuit breaker refused an attempt.
    fn breaker_rejected(&mut self);

    /// The call gave up, for `reason`.
    fn gave_up(&mut self, reason: GiveUp);

    /// The report of the call, ended at `ended`.
    fn report(&self, ended: Instant) -> Report;

    /// Adds the call and what it did so far to `counters`, as [`Report::record_steps`] adds a
    /// report's (for a call that did not end: its caller went away).
    fn record_steps(&self, counters: &Counters);
}

impl Tally for Report {
    const NEW: Self = Report::EMPTY;

    #[inline]
    fn fresh() -> Self {
        Report::empty()
    }

    #[inline]
    fn started(&mut self, now: Instant) {
        debug_assert!(
            self.attempts == 0,
            "a call starts once, with its first attempt"
        );
        self.started = Some(now);
        self.attempts = 1;
    }

    #[inline]
    fn started_at(&self) -> Instant {
        self.started.unwrap_or(Instant::ZERO)
    }

    #[inline]
    fn launched(&mut self, hedge: bool) -> u32 {
        let number = self.attempts;
        self.attempts = self.attempts.saturating_add(1);
        if hedge {
            self.hedges = self.hedges.saturating_add(1);
        }
        number
    }

    #[inline]
    fn won(&mut self, number: u32, hedge: bool) {
        self.winner = Some(number);
        self.hedge_won = hedge;
    }

    #[inline]
    fn timed_out(&mut self) {
        self.timeouts = self.timeouts.saturating_add(1);
    }

    #[inline]
    fn cancelled(&mut self) {
        self.cancelled = self.cancelled.saturating_add(1);
    }

    #[inline]
    fn retried(&mut self) {
        self.retries = self.retries.saturating_add(1);
    }

    #[inline]
    fn budget_refused(&mut self) {
        self.budget_refusals = self.budget_refusals.saturating_add(1);
    }

    #[inline]
    fn breaker_rejected(&mut self) {
        self.breaker_rejections = self.breaker_rejections.saturating_add(1);
    }

    #[inline]
    fn gave_up(&mut self, reason: GiveUp) {
        self.gave_up = Some(reason);
    }

    #[inline]
    fn report(&self, ended: Instant) -> Report {
        Report { ended, ..*self }
    }

    fn record_steps(&self, counters: &Counters) {
        Report::record_steps(self, counters);
    }
}

/// The tally of a call that makes one attempt and nothing else (a
/// [`DeadlineOnly`](super::DeadlineOnly) one): 16 bytes where a [`Report`] is 112 on a 64-bit
/// target. Such a call never retries, never hedges and asks no budget or breaker, and it
/// gives up only when its one attempt is used ([`GiveUp::Exhausted`]) or failed for good
/// ([`GiveUp::NotRetryable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneAttempt {
    started: Instant,
    /// What happened, a bit each: [`STARTED`] (with its one attempt), [`WON`], [`TIMED_OUT`],
    /// [`CANCELLED`] (one attempt: each happens once at most).
    flags: u8,
    gave_up: Reason,
}

/// Why a one-attempt call gave up, in a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    None,
    Exhausted,
    NotRetryable,
    ServerSaidNo,
    MayHaveRun,
    Throttled,
    DeadlinePassed,
    CircuitOpen,
}

/// The call started (at `started`), with its one attempt.
const STARTED: u8 = 1;
/// Its attempt won.
const WON: u8 = 2;
/// Its attempt's timeout fired.
const TIMED_OUT: u8 = 8;
/// Its attempt was cancelled.
const CANCELLED: u8 = 16;

/// 1 if `flags` has `bit`, else 0.
const fn count(flags: u8, bit: u8) -> u32 {
    (flags & bit != 0) as u32
}

impl Tally for OneAttempt {
    const NEW: Self = OneAttempt {
        started: Instant::ZERO,
        flags: 0,
        gave_up: Reason::None,
    };

    #[inline]
    fn fresh() -> Self {
        Self::NEW
    }

    #[inline]
    fn started(&mut self, now: Instant) {
        self.started = now;
        self.flags |= STARTED;
    }

    #[inline]
    fn started_at(&self) -> Instant {
        self.started
    }

    #[inline]
    fn launched(&mut self, _hedge: bool) -> u32 {
        debug_assert!(false, "a one-attempt call launches none after its first");
        0
    }

    #[inline]
    fn won(&mut self, _number: u32, hedge: bool) {
        debug_assert!(!hedge, "a one-attempt call sends no hedge");
        self.flags |= WON;
    }

    #[inline]
    fn timed_out(&mut self) {
        self.flags |= TIMED_OUT;
    }

    #[inline]
    fn cancelled(&mut self) {
        self.flags |= CANCELLED;
    }

    #[inline]
    fn retried(&mut self) {
        debug_assert!(false, "a one-attempt call does not retry");
    }

    #[inline]
    fn budget_refused(&mut self) {
        debug_assert!(false, "a one-attempt call asks no retry budget");
    }

    #[inline]
    fn breaker_rejected(&mut self) {
        debug_assert!(false, "a one-attempt call asks no breaker");
    }

    #[inline]
    fn gave_up(&mut self, reason: GiveUp) {
        self.gave_up = match reason {
            GiveUp::Exhausted => Reason::Exhausted,
            GiveUp::NotRetryable => Reason::NotRetryable,
            GiveUp::ServerSaidNo => Reason::ServerSaidNo,
            GiveUp::MayHaveRun => Reason::MayHaveRun,
            GiveUp::Throttled => Reason::Throttled,
            GiveUp::DeadlinePassed => Reason::DeadlinePassed,
            GiveUp::CircuitOpen => Reason::CircuitOpen,
            // Reasons of a retry, which such a call never decides: its one attempt was used.
            GiveUp::BackoffPastDeadline { .. } | GiveUp::UnderFloor(_) | GiveUp::NothingToSend => {
                debug_assert!(false, "a one-attempt call does not retry");
                Reason::Exhausted
            }
        };
    }

    #[inline]
    fn report(&self, ended: Instant) -> Report {
        Report {
            attempts: count(self.flags, STARTED),
            timeouts: count(self.flags, TIMED_OUT),
            cancelled: count(self.flags, CANCELLED),
            winner: (self.flags & WON != 0).then_some(0),
            gave_up: match self.gave_up {
                Reason::None => None,
                Reason::Exhausted => Some(GiveUp::Exhausted),
                Reason::NotRetryable => Some(GiveUp::NotRetryable),
                Reason::ServerSaidNo => Some(GiveUp::ServerSaidNo),
                Reason::MayHaveRun => Some(GiveUp::MayHaveRun),
                Reason::Throttled => Some(GiveUp::Throttled),
                Reason::DeadlinePassed => Some(GiveUp::DeadlinePassed),
                Reason::CircuitOpen => Some(GiveUp::CircuitOpen),
            },
            started: (self.flags & STARTED != 0).then_some(self.started),
            ended,
            ..Report::EMPTY
        }
    }

    fn record_steps(&self, counters: &Counters) {
        // The call alone: it retries, hedges and asks nothing else, and once its one attempt
        // ends (a timeout among the ways) the call ends in the same poll, so a call dropped
        // before its end has nothing else to count.
        counters.record(CounterEvent::Call);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENDED: Instant = Instant::from_millis(90);

    /// The attempt won.
    fn won<T: Tally>(mut t: T) -> Report {
        t.started(Instant::from_millis(10));
        t.won(0, false);
        t.report(ENDED)
    }

    /// The attempt timed out, was counted as cancelled too, and the call gave up.
    fn gave_up<T: Tally>(mut t: T, reason: GiveUp) -> Report {
        t.started(Instant::ZERO);
        t.timed_out();
        t.cancelled();
        t.gave_up(reason);
        t.report(ENDED)
    }

    #[test]
    fn nothing_happened() {
        let one = OneAttempt::NEW.report(ENDED);
        assert_eq!(one, Report::NEW.report(ENDED));
        assert_eq!(one.started, None);
        assert_eq!(one.ended, ENDED);
    }

    #[test]
    fn the_attempt_won() {
        let one = won(OneAttempt::NEW);
        assert_eq!(one, won(Report::NEW));
        assert_eq!(one.winner, Some(0));
        assert_eq!(one.started, Some(Instant::from_millis(10)));
    }

    #[test]
    fn the_call_gave_up_for_each_reason_a_one_attempt_call_can_have() {
        for reason in [
            GiveUp::Exhausted,
            GiveUp::NotRetryable,
            GiveUp::ServerSaidNo,
            GiveUp::MayHaveRun,
            GiveUp::Throttled,
            GiveUp::DeadlinePassed,
            GiveUp::CircuitOpen,
        ] {
            let one = gave_up(OneAttempt::NEW, reason);
            assert_eq!(one, gave_up(Report::NEW, reason), "{reason:?}");
            assert_eq!(one.gave_up, Some(reason));
            assert_eq!((one.attempts, one.timeouts, one.cancelled), (1, 1, 1));
        }
    }

    #[test]
    fn a_one_attempt_tally_is_small() {
        assert!(size_of::<OneAttempt>() <= 16);
    }
}
