//! [`ServerPolicy`]: a server's rule for the deadline of each request it receives, and for
//! the requests it answers itself.

use core::time::Duration;

use super::answer::Answer;
use super::headers::Incoming;
use super::propagation::Propagation;
use super::protocol::Protocol;
use crate::admit::Admission;
use crate::deadline::Deadline;
use crate::time::Instant;

/// A server's rule for the deadline of each request: how its budget is read, what a request
/// without one gets, which requests are refused at once, and how long before the deadline
/// the server answers. One decision per request, [`accept`](Self::accept); a server layer
/// (deadline-tokio's `DeadlineLayer`) binds it to a server's requests.
///
/// ```
/// use deadline_core::wire::{Codec, Incoming, Propagation, Protocol, ServerPolicy};
/// use deadline_core::{Error, Instant, ms};
/// use deadline_core::wire::Admission;
///
/// // Callers are believed up to 10 s; silent ones get 1 s; the handler needs 20 ms at least.
/// const SERVER: ServerPolicy = ServerPolicy::new(Propagation::DEFAULT.with_max(ms(10_000)), ms(1_000))
///     .with_admission(Admission::new(ms(20)));
///
/// let now = Instant::from_millis(7);
/// let headers = |v: &'static [u8]| Incoming::read(move |name| (name == "grpc-timeout").then_some(v));
///
/// // 200 ms sent: the handler has 195 ms (5 ms are kept to answer in).
/// let deadline = SERVER.accept(Protocol::Grpc { codec: Codec::Proto }, headers(b"200m"), now, now, None).unwrap();
/// assert_eq!(deadline.remaining(now), ms(195));
/// // 10 ms sent, 20 ms needed: shed at once.
/// let shed = SERVER.accept(Protocol::Http, headers(b"10m"), now, now, None).unwrap_err();
/// assert_eq!((shed.error(), shed.status()), (Error::Shed, 503));
/// // No header: 1 s.
/// let default = SERVER.accept(Protocol::Http, Incoming::NONE, now, now, None).unwrap();
/// assert_eq!(default.remaining(now), ms(995));
/// // 200 ms sent, 190 ms of them spent waiting for the server to take the request: the
/// // 5 ms left are too few for the handler, which is not called.
/// let later = Instant::from_millis(7 + 190);
/// let shed = SERVER.accept(Protocol::Http, headers(b"200m"), now, later, None).unwrap_err();
/// assert_eq!(shed.error(), Error::Shed);
/// // A malformed header: 400, naming it.
/// let bad = SERVER.accept(Protocol::Http, headers(b"-5S"), now, now, None).unwrap_err();
/// assert_eq!(bad.body().as_str(), "malformed grpc-timeout header: header value has a sign\n");
/// ```
///
/// The reply margin, and what a server can and cannot do about its clients' timers: [the guide](crate::guide#clients-that-time-their-own-calls).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServerPolicy {
    propagation: Propagation,
    default_budget: Duration,
    admission: Admission,
    reply_margin: Duration,
}

/// The stretch before a handler's deadline in which its failure, whatever it is, is the
/// deadline's ([`ServerPolicy::failure_window`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FailureWindow(Duration);

impl FailureWindow {
    /// How long before the deadline it starts.
    #[must_use]
    pub const fn duration(self) -> Duration {
        self.0
    }

    /// The instant it starts, before `deadline` (at the clock's zero at the earliest).
    #[must_use]
    pub const fn starts(self, deadline: Deadline) -> Instant {
        deadline.instant().saturating_sub(self.0)
    }

    /// Whether a failure at `now` of a handler bounded by `deadline` is the deadline's: at
    /// or after the window's start.
    #[must_use]
    pub fn is_deadline_failure(self, deadline: Deadline, now: Instant) -> bool {
        now >= self.starts(deadline)
    }
}

impl ServerPolicy {
    /// The reply margin of [`ServerPolicy::new`]: 5 ms.
    pub const DEFAULT_REPLY_MARGIN: Duration = Duration::from_millis(5);

    /// Reads incoming budgets with `propagation`, clamped to its
    /// [maximum](Propagation::max); a request with no deadline header gets
    /// `default_budget` (clamped the same way). Answers
    /// [`DEFAULT_REPLY_MARGIN`](Self::DEFAULT_REPLY_MARGIN) before the deadline, and refuses
    /// only requests whose deadline, so shortened, has passed ([`Admission::DEFAULT`]): a
    /// request that arrives with no more than the reply margin left (a `grpc-timeout` of
    /// `5m` or less, with the default margin) is answered at once as out of time, its
    /// handler never called, since there is no time to answer it in.
    #[must_use]
    pub const fn new(propagation: Propagation, default_budget: Duration) -> Self {
        ServerPolicy {
            propagation,
            default_budget,
            admission: Admission::DEFAULT,
            reply_margin: Self::DEFAULT_REPLY_MARGIN,
        }
    }

    /// The same policy, shedding what `admission` refuses ([`Admission::admit`]): 503 /
    /// `UNAVAILABLE`, without calling the handler.
    #[must_use]
    pub const fn with_admission(mut self, admission: Admission) -> Self {
        self.admission = admission;
        self
    }

    /// The same policy, answering `margin` before each request's deadline (zero: at the
    /// deadline itself, which lets a client's own timer answer first).
    #[must_use]
    pub const fn with_reply_margin(mut self, margin: Duration) -> Self {
        self.reply_margin = margin;
        self
    }

    /// How incoming budgets are read.
    #[must_use]
    pub const fn propagation(&self) -> Propagation {
        self.propagation
    }

    /// The budget of a request without a deadline header.
    #[must_use]
    pub const fn default_budget(&self) -> Duration {
        self.default_budget
    }

    /// Which requests are refused at once.
    #[must_use]
    pub const fn admission(&self) -> Admission {
        self.admission
    }

    /// How long before a request's deadline the server answers.
    #[must_use]
    pub const fn reply_margin(&self) -> Duration {
        self.reply_margin
    }

    /// How long before the handler's deadline its failure is the deadline's, and answered as
    /// the deadline (504, `DEADLINE_EXCEEDED`) rather than passed on: two of the
    /// propagation's hop allowances and a millisecond. That is where a client layer inside,
    /// sending with the same allowance, fails as its deadline: it tells the next service the
    /// time left less one allowance, rounded down to its header's unit (a millisecond at
    /// most, for a budget under 27 hours), takes a failure within another allowance of that
    /// as the deadline's, and sends nothing with less than [`Propagation::needs`] left. A
    /// failure there passed on would reach the HTTP server, which closes the connection or
    /// resets the stream with no answer. (A request that already carries a shorter timeout of
    /// its own, such as tonic's `Request::set_timeout`, runs out by it, before the window: its
    /// failure is passed on.)
    ///
    /// ```
    /// use deadline_core::wire::{Propagation, ServerPolicy};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let policy = ServerPolicy::new(Propagation::DEFAULT.with_allowance(ms(5)), ms(1_000));
    /// let window = policy.failure_window();
    /// assert_eq!(window.duration(), ms(11));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// assert_eq!(window.starts(deadline), Instant::from_millis(189));
    /// assert!(window.is_deadline_failure(deadline, Instant::from_millis(189)));
    /// assert!(!window.is_deadline_failure(deadline, Instant::from_millis(188)));
    /// ```
    #[must_use]
    pub const fn failure_window(&self) -> FailureWindow {
        let allowance = self.propagation.allowance();
        FailureWindow(
            allowance
                .saturating_add(allowance)
                .saturating_add(Duration::from_millis(1)),
        )
    }

    /// The deadline of the handler of a request that arrived at `arrived` with `headers`,
    /// spoken in `protocol`, judged at `now`, inside a scope whose deadline is `enclosing`
    /// (if any; the earlier rules), or the answer to give it at once without calling the
    /// handler:
    ///
    /// 1. its budget is the earliest of its deadline headers ([`Incoming::budget`]), or the
    ///    default budget; clamped to the maximum; a deadline header that cannot be decoded
    ///    is answered 400 / `INVALID_ARGUMENT`, naming it;
    /// 2. the budget runs from when the request arrived, so the time it waited before it is
    ///    judged (for a server that was not ready to take it) is spent from it; the
    ///    handler's deadline is the request's less the reply margin;
    /// 3. a request whose deadline has passed by `now` is answered `DEADLINE_EXCEEDED`
    ///    (504), one with less time left than the admission rule needs is shed (503 /
    ///    `UNAVAILABLE`).
    ///
    /// A server that judges each request as it arrives passes the same instant twice.
    ///
    /// # Errors
    ///
    /// The [`Answer`] to give at once.
    pub fn accept(
        &self,
        protocol: Protocol,
        headers: Incoming<'_>,
        arrived: Instant,
        now: Instant,
        enclosing: Option<Deadline>,
    ) -> Result<Deadline, Answer> {
        let budget = headers
            .budget()
            .map_err(|malformed| Answer::malformed(protocol, malformed))?
            .unwrap_or(self.default_budget);
        let deadline = self
            .propagation
            .incoming(budget, arrived)
            .shortened_by(self.reply_margin);
        let deadline = enclosing.map_or(deadline, |outer| outer.min(deadline));
        match self.admission.admit(deadline, now) {
            Ok(_) => Ok(deadline),
            Err(error) => Err(Answer::new(protocol, error)),
        }
    }
}
