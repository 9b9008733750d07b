//! [`Propagation`]: how the time left crosses a hop, out ([`Propagation::send`]) and in
//! ([`Propagation::incoming`]).

use core::time::Duration;

use super::error::WireError;
use super::grpc_timeout::GrpcTimeout;
use super::headers::{
    CONNECT_TIMEOUT_MS, DeadlineHeader, ENVOY_EXPECTED_RQ_TIMEOUT_MS, ENVOY_UPSTREAM_RQ_TIMEOUT_MS,
    GRPC_TIMEOUT, Incoming, X_DEADLINE_MS,
};
use super::millis::{ConnectTimeout, DeadlineMs};
use super::sent::Sent;
use crate::deadline::Deadline;
use crate::time::{Instant, duration_min, duration_saturating_sub};

/// How the time left crosses a hop: what a client keeps back for the network, and the most a
/// server believes.
///
/// - Sending: the budget sent is the time left minus [`allowance`](Propagation::allowance),
///   so the callee gives up a little before we do and its answer (or its error) still
///   arrives in time. When nothing is left after the allowance, nothing is sent and the call
///   is not made ([`WireError::Spent`]).
/// - Receiving: the local deadline is `now + min(budget, max)`, on the receiver's own clock.
///
/// Pass a call's own deadline ([`Limits::deadline`](crate::call::Limits::deadline)) to send that
/// call's timeout, or the request's [`Deadline`] to send all the time left.
///
/// ```
/// use deadline_core::wire::{Propagation, WireError};
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::call_timeout;
///
/// static HOP: Propagation = Propagation::DEFAULT.with_allowance(ms(2)).with_max(ms(5_000));
///
/// // The budget table: B starts with 1700 ms left and its cap is 500 ms.
/// let b = Policy::required("B").with_cap(ms(500)).with_floor(ms(100));
/// let deadline = Deadline::after(Instant::ZERO, ms(2_000));
/// let now = Instant::from_millis(300);
/// let limits = call_timeout(&b, deadline, ms(0), now).limits().unwrap();
/// assert_eq!(HOP.outgoing(limits.deadline(), now), Ok(ms(498)));
/// assert_eq!(HOP.encode_deadline_ms(limits.deadline(), now).unwrap().as_str(), "498");
///
/// // At the deadline, or within the allowance of it, nothing is sent.
/// assert_eq!(HOP.outgoing(deadline, Instant::from_millis(1_999)), Err(WireError::Spent));
///
/// // A client that claims a day gets the server's maximum.
/// let local = HOP.decode_deadline_ms(b"86400000", now).unwrap();
/// assert_eq!(local.remaining(now), ms(5_000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Propagation {
    /// Subtracted from the time left before it is sent: the network's share of one hop (the
    /// trip there and back, serialization). A few milliseconds within a data center.
    pub(crate) allowance: Duration,
    /// The largest budget this server accepts from a caller: incoming budgets are clamped to
    /// it, whatever the header says.
    pub(crate) max: Duration,
}

impl Propagation {
    /// Keeps back 5 ms per hop when sending; clamps incoming budgets to 30 s. Adjust with
    /// [`with_allowance`](Self::with_allowance) and [`with_max`](Self::with_max).
    pub const DEFAULT: Propagation = Propagation {
        allowance: Duration::from_millis(5),
        max: Duration::from_secs(30),
    };

    /// The same propagation, keeping back `allowance` when sending: the network's share of
    /// one hop.
    #[must_use]
    pub const fn with_allowance(mut self, allowance: Duration) -> Self {
        self.allowance = allowance;
        self
    }

    /// The same propagation, clamping incoming budgets to `max`.
    #[must_use]
    pub const fn with_max(mut self, max: Duration) -> Self {
        self.max = max;
        self
    }

    /// The budget to send at `now` for work that must end by `deadline`: the time left minus
    /// the allowance (saturating).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when that is zero: do not make the call.
    pub fn outgoing(&self, deadline: Deadline, now: Instant) -> Result<Duration, WireError> {
        let left = duration_saturating_sub(deadline.remaining(now), self.allowance);
        if left.is_zero() {
            Err(WireError::Spent)
        } else {
            Ok(left)
        }
    }

    /// One hop of a request: the time left for work that must end by `deadline` is written
    /// into `x-deadline-ms` when it is sent at `sent`, and read back by the next service when it
    /// arrives there at `arrived`, on that service's clock ([`encode_deadline_ms`] then
    /// [`decode_deadline_ms`]): what the next service's deadline is.
    ///
    /// [`encode_deadline_ms`]: Propagation::encode_deadline_ms
    /// [`decode_deadline_ms`]: Propagation::decode_deadline_ms
    ///
    /// ```
    /// use deadline_core::wire::{Propagation, WireError};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// // Sent at 50 ms with 145 ms to send, it arrives 2 ms later: 145 ms from then.
    /// let next = hop.hop(deadline, Instant::from_millis(50), Instant::from_millis(52)).unwrap();
    /// assert_eq!(next.instant(), Instant::from_millis(197));
    /// // Nothing left to send: the call is not made.
    /// let spent = hop.hop(deadline, Instant::from_millis(196), Instant::from_millis(198));
    /// assert_eq!(spent, Err(WireError::Spent));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when nothing is left to send: do not make the call.
    pub fn hop(
        &self,
        deadline: Deadline,
        sent: Instant,
        arrived: Instant,
    ) -> Result<Deadline, WireError> {
        let header = self.encode_deadline_ms(deadline, sent)?;
        self.decode_deadline_ms(header.as_bytes(), arrived)
    }

    /// The local deadline for a request that arrived at `now` with `budget`:
    /// `now + min(budget, max)`, saturating. A zero budget gives a deadline that has already
    /// passed.
    ///
    /// ```
    /// use deadline_core::wire::Propagation;
    /// use deadline_core::{Instant, ms};
    ///
    /// let server = Propagation::DEFAULT.with_allowance(ms(0)).with_max(ms(1_000));
    /// let now = Instant::from_millis(40);
    /// assert_eq!(server.incoming(ms(250), now).instant(), Instant::from_millis(290));
    /// assert_eq!(server.incoming(ms(9_000), now).instant(), Instant::from_millis(1_040));
    /// ```
    #[must_use]
    pub fn incoming(&self, budget: Duration, now: Instant) -> Deadline {
        Deadline::after(now, duration_min(budget, self.max))
    }

    /// The `grpc-timeout` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), encoded (rounded down).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when nothing is left to send: do not make the call.
    pub fn encode_grpc_timeout(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<GrpcTimeout, WireError> {
        self.outgoing(deadline, now)
            .and_then(GrpcTimeout::from_duration)
    }

    /// The `x-deadline-ms` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), in whole milliseconds (rounded down).
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when less than one millisecond is left to send: do not make the
    /// call.
    pub fn encode_deadline_ms(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<DeadlineMs, WireError> {
        self.outgoing(deadline, now)
            .and_then(DeadlineMs::from_duration)
    }

    /// The `connect-timeout-ms` value to send at `now` for work that must end by `deadline`:
    /// [`outgoing`](Propagation::outgoing), in whole milliseconds (rounded down).
    ///
    /// ```
    /// use deadline_core::wire::Propagation;
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.with_allowance(ms(5)).with_max(ms(10_000));
    /// let deadline = Deadline::after(Instant::ZERO, ms(300));
    /// let sent = hop.encode_connect_timeout(deadline, Instant::from_millis(6)).unwrap();
    /// assert_eq!(sent.as_str(), "289");
    /// let local = hop.decode_connect_timeout(sent.as_bytes(), Instant::ZERO).unwrap();
    /// assert_eq!(local.remaining(Instant::ZERO), ms(289));
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when less than one millisecond is left to send: do not make the
    /// call.
    pub fn encode_connect_timeout(
        &self,
        deadline: Deadline,
        now: Instant,
    ) -> Result<ConnectTimeout, WireError> {
        self.outgoing(deadline, now)
            .and_then(ConnectTimeout::from_duration)
    }

    /// The local deadline for a request that arrived at `now` with this `connect-timeout-ms`
    /// value: [`ConnectTimeout::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`ConnectTimeout::parse`].
    pub fn decode_connect_timeout(
        &self,
        value: &[u8],
        now: Instant,
    ) -> Result<Deadline, WireError> {
        ConnectTimeout::parse(value).map(|t| self.incoming(t.duration(), now))
    }

    /// The local deadline for a request that arrived at `now` with this `grpc-timeout` value:
    /// [`GrpcTimeout::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`GrpcTimeout::parse`]. What to do then (reject the request, or
    /// use a default budget) is the server's choice.
    pub fn decode_grpc_timeout(&self, value: &[u8], now: Instant) -> Result<Deadline, WireError> {
        GrpcTimeout::parse_duration(value).map(|left| self.incoming(left, now))
    }

    /// The local deadline for a request that arrived at `now` with this `x-deadline-ms`
    /// value: [`DeadlineMs::parse`], then [`incoming`](Propagation::incoming).
    ///
    /// # Errors
    ///
    /// A decoding error from [`DeadlineMs::parse`].
    pub fn decode_deadline_ms(&self, value: &[u8], now: Instant) -> Result<Deadline, WireError> {
        DeadlineMs::parse(value).map(|t| self.incoming(t.duration(), now))
    }

    /// The headers to write into a request made at `now` for work that must end by
    /// `deadline`, and what they tell the next service ([`Outgoing::sent`]): the one rule
    /// every client follows.
    ///
    /// The budget sent is the time left less the [allowance](Propagation::allowance), or the
    /// shortest valid timeout the request already carries in `already` (its caller's, such as
    /// tonic's `Request::set_timeout`: [`Incoming::shortest_valid`]), if that is shorter. It
    /// is written into `header` (both headers for [`DeadlineHeader::Both`]), and into every
    /// other deadline header the request already carries, so that none of them tells the next
    /// service more time than is left (a longer one, a stale one a proxy passed on, or one it
    /// cannot read); each rounded down to its header's unit.
    ///
    /// ```
    /// use deadline_core::wire::{DeadlineHeader, Incoming, Propagation, WireError};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.with_allowance(ms(5));
    /// let request = Deadline::after(Instant::ZERO, ms(200));
    /// let out = hop.send(request, Instant::from_millis(50), Incoming::NONE, DeadlineHeader::Both)?;
    /// let headers: Vec<_> = out.headers().collect();
    /// assert_eq!(headers, [("grpc-timeout", &b"145000u"[..]), ("x-deadline-ms", b"145")]);
    ///
    /// // A shorter timeout already on the request is kept; a longer one is replaced.
    /// let carrying = |value: &'static [u8]| Incoming::read(move |name| (name == "grpc-timeout").then_some(value));
    /// let out = hop.send(request, Instant::ZERO, carrying(b"50m"), DeadlineHeader::DeadlineMs)?;
    /// let headers: Vec<_> = out.headers().collect();
    /// assert_eq!(headers, [("grpc-timeout", &b"50000000n"[..]), ("x-deadline-ms", b"50")]);
    /// let out = hop.send(request, Instant::ZERO, carrying(b"10S"), DeadlineHeader::DeadlineMs)?;
    /// let headers: Vec<_> = out.headers().collect();
    /// assert_eq!(headers, [("grpc-timeout", &b"195000u"[..]), ("x-deadline-ms", b"195")]);
    ///
    /// // Within the allowance of the deadline, nothing is sent, and the call is not made.
    /// let spent = hop.send(request, Instant::from_millis(196), Incoming::NONE, DeadlineHeader::Both);
    /// assert_eq!(spent, Err(WireError::Spent));
    /// // Half a millisecond: `grpc-timeout` could say it, `x-deadline-ms` cannot.
    /// let half = Deadline::at(Instant::from_micros(5_500));
    /// assert_eq!(hop.send(half, Instant::ZERO, Incoming::NONE, DeadlineHeader::Both), Err(WireError::Spent));
    /// # Ok::<(), WireError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] when the budget is zero, or a header to write cannot carry it
    /// (under a millisecond for the millisecond headers): do not make the call.
    pub fn send(
        &self,
        deadline: Deadline,
        now: Instant,
        already: Incoming<'_>,
        header: DeadlineHeader,
    ) -> Result<Outgoing, WireError> {
        let left = self.outgoing(deadline, now)?;
        let budget = match already.shortest_valid() {
            Some(already) if already.is_zero() => return Err(WireError::Spent),
            Some(already) => duration_min(left, already),
            None => left,
        };
        let grpc = matches!(header, DeadlineHeader::GrpcTimeout | DeadlineHeader::Both)
            || already.has_grpc_timeout();
        let millis = matches!(header, DeadlineHeader::DeadlineMs | DeadlineHeader::Both)
            || already.has_x_deadline_ms();
        let connect =
            matches!(header, DeadlineHeader::ConnectTimeout) || already.has_connect_timeout_ms();
        let envoy = already.has_envoy_timeout_ms();
        let envoy_upstream = already.has_envoy_upstream_ms();
        let grpc_timeout = grpc
            .then(|| GrpcTimeout::from_duration(budget))
            .transpose()?;
        let x_deadline_ms = millis
            .then(|| DeadlineMs::from_duration(budget))
            .transpose()?;
        let connect_timeout_ms = connect
            .then(|| ConnectTimeout::from_duration(budget))
            .transpose()?;
        let envoy_timeout_ms = envoy
            .then(|| DeadlineMs::from_duration(budget))
            .transpose()?;
        let envoy_upstream_ms = envoy_upstream
            .then(|| DeadlineMs::from_duration(budget))
            .transpose()?;
        // What the next service is told is what the headers say, rounded down to their
        // units (the earliest, when there are several), not the budget they were written
        // from: its answer that it ran out comes back by that, up to a millisecond before the
        // budget's end.
        let told = [
            grpc_timeout.map(|t| t.duration()),
            x_deadline_ms.map(|t| t.duration()),
            connect_timeout_ms.map(|t| t.duration()),
            envoy_timeout_ms.map(|t| t.duration()),
            envoy_upstream_ms.map(|t| t.duration()),
        ]
        .into_iter()
        .flatten()
        .fold(budget, duration_min);
        Ok(Outgoing {
            grpc_timeout,
            x_deadline_ms,
            connect_timeout_ms,
            envoy_timeout_ms,
            envoy_upstream_ms,
            sent: Sent::new(deadline, now, told, self.allowance),
        })
    }

    /// Subtracted from the time left before it is sent: the network's share of one hop (the
    /// trip there and back, serialization). A few milliseconds within a data center.
    #[must_use]
    pub const fn allowance(&self) -> Duration {
        self.allowance
    }

    /// The least time left with which [`send`](Self::send) sends every header it writes: the
    /// allowance and a millisecond, the millisecond headers' unit (`grpc-timeout` alone can
    /// say less). A request that already carries a shorter timeout of its own may need more.
    ///
    /// ```
    /// use deadline_core::wire::{DeadlineHeader, Incoming, Propagation};
    /// use deadline_core::{Deadline, Instant, ms};
    ///
    /// let hop = Propagation::DEFAULT.with_allowance(ms(5));
    /// assert_eq!(hop.needs(), ms(6));
    /// let now = Instant::ZERO;
    /// let sends = |left| hop.send(Deadline::after(now, left), now, Incoming::NONE, DeadlineHeader::Both).is_ok();
    /// assert!(sends(ms(6)));
    /// assert!(!sends(ms(6) - core::time::Duration::from_micros(1)));
    /// ```
    #[must_use]
    pub const fn needs(&self) -> Duration {
        self.allowance.saturating_add(Duration::from_millis(1))
    }

    /// The largest budget this server accepts from a caller: incoming budgets are clamped to
    /// it, whatever the header says.
    #[must_use]
    pub const fn max(&self) -> Duration {
        self.max
    }
}

/// The header values to write into one outgoing request, and what was sent
/// ([`Propagation::send`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outgoing {
    grpc_timeout: Option<GrpcTimeout>,
    x_deadline_ms: Option<DeadlineMs>,
    connect_timeout_ms: Option<ConnectTimeout>,
    envoy_timeout_ms: Option<DeadlineMs>,
    envoy_upstream_ms: Option<DeadlineMs>,
    sent: Sent,
}

impl Outgoing {
    /// The headers to set, as (name, value) pairs: ASCII digits and one unit letter, always
    /// valid header values.
    pub fn headers(&self) -> impl Iterator<Item = (&'static str, &[u8])> {
        [
            self.grpc_timeout
                .as_ref()
                .map(|v| (GRPC_TIMEOUT, v.as_bytes())),
            self.x_deadline_ms
                .as_ref()
                .map(|v| (X_DEADLINE_MS, v.as_bytes())),
            self.connect_timeout_ms
                .as_ref()
                .map(|v| (CONNECT_TIMEOUT_MS, v.as_bytes())),
            self.envoy_timeout_ms
                .as_ref()
                .map(|v| (ENVOY_EXPECTED_RQ_TIMEOUT_MS, v.as_bytes())),
            self.envoy_upstream_ms
                .as_ref()
                .map(|v| (ENVOY_UPSTREAM_RQ_TIMEOUT_MS, v.as_bytes())),
        ]
        .into_iter()
        .flatten()
    }

    /// What the next service was told: when it was told to be done by, when to stop
    /// waiting for it, and which failures are its deadline's.
    #[must_use]
    pub const fn sent(&self) -> Sent {
        self.sent
    }
}
