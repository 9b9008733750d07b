//! Admission control at the edge: shed a request whose time has already been eaten by the
//! queue, before any work is spent on it.

use core::time::Duration;

use crate::deadline::Deadline;
use crate::error::Error;
use crate::time::Instant;

/// When a request is admitted: the least time its handler needs.
///
/// ```
/// use deadline_core::{Deadline, Error, Instant, ms};
/// use deadline_core::wire::Admission;
///
/// // The handler needs 20 ms at the least.
/// let admission = Admission::new(ms(20));
/// // Sent with 100 ms; it waited 70 ms in the queue: 30 ms are left, enough.
/// let deadline = Deadline::after(Instant::ZERO, ms(100));
/// assert_eq!(admission.admit(deadline, Instant::from_millis(70)), Ok(ms(30)));
/// // It waited 85 ms: 15 ms are left, less than the handler needs. Answer at once.
/// let shed = admission.admit(deadline, Instant::from_millis(85)).unwrap_err();
/// assert_eq!(shed, Error::Shed);
/// assert_eq!(shed.http_status(), 503);
/// ```
///
/// A request that waited in an accept queue, a connection pool or an executor's run queue
/// arrives at its handler with less time than it was sent with. If what is left is less than
/// the handler needs at the least, the request will time out anyway; accepting it only steals
/// capacity from requests that can still finish (the load-shedding rule: "reject at the edge when queue
/// delay already consumes the budget, rather than accepting work that will time out anyway").
///
/// [`Admission::admit`] decides that at the instant the handler would start. The decision is
/// `O(1)`, allocates nothing and calls nothing, so a rejected request costs nothing further.
/// An adapter answers a rejection without calling the inner service, with the status of
/// [`Error::Shed`]: [`Error::http_status`] (503 Service Unavailable) or [`Error::grpc_code`]
/// (14 `UNAVAILABLE`), which tell the client the server is overloaded and another replica
/// may serve it.
///
/// [`Admission::with_max_queue_delay`] adds a queue-delay threshold ([`QueueAdmission`]), for
/// a server that keeps its own queue and wants to shed on a long one even when the request
/// itself would still have time (the queue is then the signal of overload, as in CoDel).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Admission {
    /// The least time the handler needs to produce an answer (for example its own p50): a
    /// request with less time left is shed.
    pub(crate) need: Duration,
}

impl Admission {
    /// Sheds only requests whose deadline has passed.
    pub const DEFAULT: Admission = Admission::new(Duration::ZERO);

    /// Sheds requests with less than `need` left when their handler would start.
    #[must_use]
    pub const fn new(need: Duration) -> Self {
        Admission { need }
    }

    /// The same rule where the requests wait in a queue of the server's own: also shedding
    /// those that waited longer than `max` in it ([`QueueAdmission::admit_queued`], which
    /// needs the instant each entered the queue). A server layer that admits each request
    /// once, when it is called (`DeadlineLayer`, which spends a wait before that from the
    /// budget), takes an [`Admission`], not this:
    ///
    /// ```compile_fail
    /// use deadline_core::ms;
    /// use deadline_core::wire::{Admission, Propagation, ServerPolicy};
    ///
    /// // A server policy admits at arrival: it has no queue delay to read.
    /// let server = ServerPolicy::new(Propagation::DEFAULT, ms(1_000))
    ///     .with_admission(Admission::new(ms(5)).with_max_queue_delay(ms(50)));
    /// ```
    #[must_use]
    pub const fn with_max_queue_delay(self, max: Duration) -> QueueAdmission {
        QueueAdmission {
            admission: self,
            max_queue_delay: max,
        }
    }

    /// Decides at `now`, the instant the handler would start, whether a request with
    /// `deadline` is served.
    ///
    /// Admitted when the deadline has not passed and the time left is at least
    /// [`need`](Self::need); the time left is returned, for the handler to spend.
    ///
    /// # Errors
    ///
    /// Answer at once, without calling the inner service:
    ///
    /// - [`Error::DeadlineExceeded`] when the deadline has already passed: the caller has
    ///   stopped waiting, and no other replica can do better (HTTP 504, gRPC
    ///   `DEADLINE_EXCEEDED`);
    /// - [`Error::Shed`] when some time is left but less than [`need`](Self::need): another
    ///   replica, or a later try, may serve it (HTTP 503, gRPC `UNAVAILABLE`).
    pub const fn admit(&self, deadline: Deadline, now: Instant) -> Result<Duration, Error> {
        let left = deadline.remaining(now);
        if deadline.is_expired(now) {
            Err(Error::DeadlineExceeded)
        } else if left.as_nanos() < self.need.as_nanos() {
            Err(Error::Shed)
        } else {
            Ok(left)
        }
    }

    /// The least time the handler needs to produce an answer (for example its own p50): a
    /// request with less time left is shed.
    #[must_use]
    pub const fn need(&self) -> Duration {
        self.need
    }
}

impl Default for Admission {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// An [`Admission`] for requests that wait in a queue of the server's own, with the longest
/// queue delay accepted: made by [`Admission::with_max_queue_delay`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueAdmission {
    admission: Admission,
    max_queue_delay: Duration,
}

impl QueueAdmission {
    /// As [`Admission::admit`], for a request that entered the queue at `enqueued`: also
    /// shed when it waited longer than [`max_queue_delay`](Self::max_queue_delay). A clock
    /// reading earlier than `enqueued` counts as no wait.
    ///
    /// ```
    /// use deadline_core::{Deadline, Error, Instant, ms};
    /// use deadline_core::wire::Admission;
    ///
    /// let admission = Admission::new(ms(5)).with_max_queue_delay(ms(50));
    /// let deadline = Deadline::after(Instant::ZERO, ms(1_000));
    /// let start = Instant::from_millis(60); // 60 ms after it was queued
    /// // Plenty of time left, but the queue is too long: shed.
    /// assert_eq!(admission.admit_queued(deadline, Instant::ZERO, start), Err(Error::Shed));
    /// ```
    ///
    /// # Errors
    ///
    /// - [`Error::DeadlineExceeded`] when the deadline has already passed, however long the
    ///   request waited: as [`Admission::admit`], no other replica can do better;
    /// - [`Error::Shed`] when the request waited too long or has too little time left.
    pub const fn admit_queued(
        &self,
        deadline: Deadline,
        enqueued: Instant,
        now: Instant,
    ) -> Result<Duration, Error> {
        let admitted = self.admission.admit(deadline, now);
        let waited = now.saturating_duration_since(enqueued);
        if admitted.is_ok() && waited.as_nanos() > self.max_queue_delay.as_nanos() {
            return Err(Error::Shed);
        }
        admitted
    }

    /// The rule on the time left, without the queue's.
    #[must_use]
    pub const fn admission(&self) -> Admission {
        self.admission
    }

    /// The longest queue delay accepted, whatever the time left.
    #[must_use]
    pub const fn max_queue_delay(&self) -> Duration {
        self.max_queue_delay
    }
}
