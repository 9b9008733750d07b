//! [`Event`]: one step of a call, as the [`CallMachine`](super::CallMachine) takes it, and the
//! [`Observer`] that hears of it (counters, tracing, metrics, a replay's trace).

use core::time::Duration;

use crate::call_timeout::Shortfall;
use crate::error::Error;
use crate::outcome::Outcome;
use crate::retry::GiveUp;
use crate::time::Instant;

use super::report::CallError;

/// One step of a call, at the instant it was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Event {
    /// When: the `now` the machine was given.
    pub at: Instant,
    /// What happened.
    pub kind: EventKind,
}

impl Event {
    /// `kind`, at `at`.
    #[must_use]
    pub const fn new(at: Instant, kind: EventKind) -> Self {
        Event { at, kind }
    }
}

/// What happened, with its reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum EventKind {
    /// An attempt started: the first (number 0), a retry, or a hedge (a copy sent while an
    /// earlier attempt still runs), with the timeout it was given.
    Started {
        /// The attempt's number, counting every attempt in the order they started.
        attempt: u32,
        /// Whether it is a hedge.
        hedge: bool,
        /// Its timeout, from the time left when it started.
        timeout: Duration,
    },
    /// An attempt answered: the call's winner.
    Succeeded {
        /// The attempt's number.
        attempt: u32,
        /// Its latency: from its start to its answer.
        took: Duration,
    },
    /// An attempt failed with its own error, classified as `outcome`.
    Failed {
        /// The attempt's number.
        attempt: u32,
        /// What the classifier made of the error.
        outcome: Outcome,
    },
    /// An attempt ran out of time: its timeout passed with no answer and it was cut off, or
    /// it ended with an error that says so (one classified [`Outcome::TimedOut`], or a
    /// failure at or after its timeout).
    TimedOut {
        /// The attempt's number.
        attempt: u32,
        /// How long it ran: its timeout, or less for an error that came before it.
        after: Duration,
        /// The timeout it was given: the call's cap, or less when the time left was less.
        timeout: Duration,
        /// Whether that timeout was the call's cap (the time left was more).
        capped: bool,
    },
    /// An attempt ended having sent nothing: it could not send its request, its time too short
    /// (or a timeout of the request's own spent:
    /// [`Onward::Nothing`](crate::runtime::Onward::Nothing)). Not the dependency's failure:
    /// its breaker does not count it, and no latency of the dependency's is heard. When its
    /// own time (its cap) was what was short, it ran out of time: counted as a timeout, and
    /// retried as one; when the call's time was, no retry or hedge follows
    /// ([`CallMachine::unsent`](super::CallMachine::unsent)).
    NotSent {
        /// The attempt's number.
        attempt: u32,
    },
    /// An attempt still running was dropped because the call ended otherwise (another
    /// attempt won, or a fatal error ended it).
    Cancelled {
        /// The attempt's number.
        attempt: u32,
        /// How long it had run: a lower bound of its latency.
        after: Duration,
    },
    /// A retry will start at `until`, after a backoff of `wait` (the jittered backoff, or the
    /// server's pushback when it gave one).
    Backoff {
        /// When the retry starts.
        until: Instant,
        /// The backoff.
        wait: Duration,
    },
    /// The call was not made: an optional dependency under its floor was skipped.
    Skipped {
        /// The timeout it would have had, and its floor.
        shortfall: Shortfall,
    },
    /// The call was not made, and failed at once: a required dependency under its floor, no
    /// time left, or an open circuit breaker.
    NotCalled {
        /// Why.
        error: Error,
    },
    /// No further retry is made, for `reason`.
    GaveUp {
        /// Why.
        reason: GiveUp,
    },
    /// The call is over: with an answer (`ok`), or without one; `deadline` when it ended
    /// with [`Error::DeadlineExceeded`] (time ran out for the whole request). Not the same
    /// as the counters' deadline exceeded
    /// ([`Called::is_deadline_exceeded`](super::Called::is_deadline_exceeded)), which also
    /// counts a call that gave up for want of time before the deadline passed (a backoff past
    /// it, a retry under the floor), and not a call that was never made.
    Ended {
        /// Whether an attempt answered.
        ok: bool,
        /// Whether the call ended with [`Error::DeadlineExceeded`].
        deadline: bool,
    },
}

impl EventKind {
    /// The event of a call that is not made, for its error.
    pub(super) fn not_made<E>(error: &CallError<E>) -> Self {
        match error {
            CallError::Skipped(shortfall) => EventKind::Skipped {
                shortfall: *shortfall,
            },
            CallError::Library(error) => EventKind::NotCalled { error: *error },
            // A call that is not made has no attempt error; kept total all the same.
            CallError::Attempt(_) => EventKind::NotCalled {
                error: Error::DeadlineExceeded,
            },
        }
    }
}

/// Hears of every step of a call ([`Event`]): counters, a tracing subscriber, a metrics
/// recorder, a replay's trace.
///
/// ```
/// use deadline_core::drive::{Event, EventKind, Observer};
///
/// /// Counts the attempts started.
/// #[derive(Default)]
/// struct Started(u32);
///
/// impl Observer for Started {
///     fn on_event(&mut self, event: &Event) {
///         if let EventKind::Started { .. } = event.kind {
///             self.0 += 1;
///         }
///     }
/// }
/// ```
pub trait Observer {
    /// One step of the call.
    fn on_event(&mut self, event: &Event);
}

/// Hears nothing: for a call whose steps nobody watches. It costs nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NoObserver;

impl Observer for NoObserver {
    #[inline]
    fn on_event(&mut self, _event: &Event) {}
}

impl<O: Observer + ?Sized> Observer for &mut O {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        (**self).on_event(event);
    }
}

/// A closure as an [`Observer`]: `Observe(|event| ...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Observe<F>(pub F);

impl<F: FnMut(&Event)> Observer for Observe<F> {
    #[inline]
    fn on_event(&mut self, event: &Event) {
        (self.0)(event);
    }
}
