//! [`Classify`]: what an attempt's error means for retrying.

use crate::outcome::Outcome;
use crate::time::Instant;

/// Classifies an attempt's error for the retry decision.
///
/// Implemented for every `FnMut(&E) -> Outcome`. The drivers take that closure type
/// directly, so a classifier passed to them needs no annotation (`|_| Outcome::Failed`); a
/// type of your own that implements this trait is passed as `|e| c.classify(e)`:
///
/// ```
/// use deadline_core::drive::Classify;
/// use deadline_core::Outcome;
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

/// The default classifier: every error is a failure ([`Outcome::Failed`]), retried as the
/// policy allows (a call that is not idempotent is not retried after one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AnyErrorFails;

impl<E> Classify<E> for AnyErrorFails {
    #[inline]
    fn classify(&mut self, _error: &E) -> Outcome {
        Outcome::Failed
    }
}

/// How an attempt's failure counts once what the attempt sent onward is running out, from
/// `running_out_from` on ([`Sent::running_out_from`](crate::wire::Sent::running_out_from)):
/// a failure a retry may fix ([`Outcome::Failed`], [`Outcome::Refused`]) that comes at `now`,
/// then or later, is the attempt running out of time ([`Outcome::TimedOut`]): the next
/// service answering that the time it was told ran out (a 504, an `UNAVAILABLE`), or the
/// connection closing, which comes back before the attempt's own end. The server's own
/// answers ([`Outcome::Fatal`], [`Outcome::Broken`], [`Outcome::Pushback`]) stand. The same rule as
/// [`Sent::is_deadline_failure`](crate::wire::Sent::is_deadline_failure), for an error the
/// library cannot look into.
#[must_use]
pub(super) fn once_sent(outcome: Outcome, running_out_from: Instant, now: Instant) -> Outcome {
    if now >= running_out_from && counts_once_sent(outcome) {
        Outcome::TimedOut
    } else {
        outcome
    }
}

/// Whether a failure of `outcome` is the attempt running out of time once what it sent runs
/// out ([`once_sent`]): one a retry may fix.
#[must_use]
pub(super) const fn counts_once_sent(outcome: Outcome) -> bool {
    matches!(outcome, Outcome::Failed | Outcome::Refused)
}
