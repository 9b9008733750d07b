//! The call-timeout decision: `timeout = min(left - reserve, cap)`, checked against the floor.

use core::time::Duration;

use crate::deadline::Deadline;
use crate::dependency_policy::{Necessity, Policy};
use crate::error::Error;
use crate::time::{Instant, duration_to_micros_ceil, micros_to_duration};

/// What to do about one call, decided at the instant it would start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[must_use]
pub enum Decision {
    /// Make the call with these limits.
    Call(Limits),
    /// Do not call: the dependency is optional and its timeout would fall under its floor.
    /// Use the fallback.
    Skip(Shortfall),
    /// Do not call: the dependency is required and its timeout would fall under its floor.
    /// Fail the request now ([`Shortfall::error`]); waiting would only postpone the failure.
    Fail(Shortfall),
}

impl Decision {
    /// The timeout to arm, if the call is to be made.
    #[must_use]
    pub const fn timeout(&self) -> Option<Duration> {
        match self {
            Decision::Call(limits) => Some(limits.timeout()),
            Decision::Skip(_) | Decision::Fail(_) => None,
        }
    }

    /// The limits, if the call is to be made.
    #[must_use]
    pub const fn limits(&self) -> Option<Limits> {
        match self {
            Decision::Call(limits) => Some(*limits),
            Decision::Skip(_) | Decision::Fail(_) => None,
        }
    }

    /// Whether the call is to be made.
    #[must_use]
    pub const fn is_call(&self) -> bool {
        matches!(self, Decision::Call(_))
    }
}

/// The limits of one call (or one attempt of it), in whole microseconds: read them as
/// [`Duration`]s with [`timeout`](Limits::timeout) and [`connect`](Limits::connect), and hand
/// the call's deadline on with [`deadline`](Limits::deadline).
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::call_timeout;
///
/// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)).with_connect(ms(20));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// let limits = call_timeout(&c, deadline, ms(20), Instant::from_millis(100)).limits().unwrap();
/// assert_eq!(limits.timeout(), ms(60));
/// assert_eq!(limits.connect(), ms(20));
/// assert_eq!(limits.until(), Instant::from_millis(160));
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Limits {
    /// The instant the call was decided: its deadline's start.
    start: Instant,
    /// The instant its timeout ends, `start + timeout`.
    until: Instant,
    /// The connect limit, never more than the timeout.
    connect_us: u64,
}

impl Limits {
    /// The limits of an attempt to `policy`'s dependency decided at `start` and ending at
    /// `until`: its connect limit is the policy's, never more than its timeout, as
    /// [`call_timeout`] decides it. (An attempt's record keeps only its start and end, and
    /// rebuilds its limits with this.)
    #[cfg(feature = "drive")]
    #[inline(always)]
    pub(crate) const fn of(policy: &Policy, start: Instant, until: Instant) -> Limits {
        let timeout = until.as_micros().saturating_sub(start.as_micros());
        Limits {
            start,
            until,
            connect_us: min_u64(policy.connect_micros(), timeout),
        }
    }

    /// The whole call's timeout: `min(left - reserve, cap)`. Use it as the read limit and as
    /// the time left sent to the callee.
    #[must_use]
    #[inline]
    pub const fn timeout(&self) -> Duration {
        micros_to_duration(self.timeout_micros())
    }

    /// [`timeout`](Limits::timeout) in whole microseconds.
    #[must_use]
    #[inline]
    pub const fn timeout_micros(&self) -> u64 {
        self.until
            .as_micros()
            .saturating_sub(self.start.as_micros())
    }

    /// The connect limit: the policy's, never more than the timeout.
    #[must_use]
    #[inline]
    pub const fn connect(&self) -> Duration {
        micros_to_duration(self.connect_us)
    }

    /// [`connect`](Limits::connect) in whole microseconds.
    #[must_use]
    #[inline]
    pub const fn connect_micros(&self) -> u64 {
        self.connect_us
    }

    /// The instant the call's timeout ends: `now + timeout`, never after the request deadline.
    #[must_use]
    #[inline]
    pub const fn until(&self) -> Instant {
        self.until
    }

    /// This call's deadline, to hand to the callee (it is a child of the request deadline).
    /// It starts when the call does, so its time left never exceeds the timeout.
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, ms, Policy};
    /// use deadline_core::call::call_timeout;
    ///
    /// let b = Policy::required("B").with_cap(ms(110));
    /// let now = Instant::from_millis(50);
    /// let limits = call_timeout(&b, Deadline::after(Instant::ZERO, ms(200)), ms(20), now)
    ///     .limits()
    ///     .unwrap();
    /// assert_eq!(limits.deadline(), Deadline::after(now, ms(110)));
    /// // A reading before the call's start counts as the start.
    /// assert_eq!(limits.deadline().remaining(Instant::from_millis(40)), ms(110));
    /// ```
    #[must_use]
    #[inline]
    pub const fn deadline(&self) -> Deadline {
        Deadline::between(self.start, self.until)
    }

    /// The connect limit for a connection opened at `now`: the policy's connect limit, but
    /// never more than the time left until [`until`](Limits::until) (zero once it has come).
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, ms, Policy};
    /// use deadline_core::call::call_timeout;
    ///
    /// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25)).with_connect(ms(20));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// let limits = call_timeout(&c, deadline, ms(20), Instant::from_millis(115)).limits().unwrap();
    /// assert_eq!(limits.connect_timeout(Instant::from_millis(115)), ms(20));
    /// // 10 ms before the attempt's end, the connect may take only those 10 ms.
    /// assert_eq!(limits.connect_timeout(Instant::from_millis(165)), ms(10));
    /// ```
    #[must_use]
    pub const fn connect_timeout(&self, now: Instant) -> Duration {
        micros_to_duration(min_u64(self.connect_us, self.deadline().left_micros(now)))
    }

    /// The read (and write) limit for an I/O operation of the attempt starting at `now`: the
    /// time left until [`until`](Limits::until), zero once it has come.
    #[must_use]
    pub const fn read_timeout(&self, now: Instant) -> Duration {
        self.deadline().remaining(now)
    }
}

impl core::fmt::Debug for Limits {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Limits")
            .field("timeout", &self.timeout())
            .field("connect", &self.connect())
            .field("until", &self.until)
            .finish()
    }
}

/// The smaller of two `u64`s, in a `const fn`.
#[inline(always)]
const fn min_u64(a: u64, b: u64) -> u64 {
    if a < b { a } else { b }
}

/// The timeout, in whole microseconds, that a call or a statement gets with `left` before
/// its deadline: the time left less `reserve`, at most `cap`; or, when that is zero or under
/// `floor`, the shortfall. The one rule of [`call_timeout`] and
/// [`statement_timeout`](crate::statement::statement_timeout).
#[inline(always)]
pub(crate) const fn within_budget(
    left: u64,
    reserve: u64,
    cap: u64,
    floor: u64,
) -> Result<u64, Shortfall> {
    let available = min_u64(left.saturating_sub(reserve), cap);
    if available == 0 || available < floor {
        Err(Shortfall {
            left_us: left,
            available_us: available,
            floor_us: floor,
        })
    } else {
        Ok(available)
    }
}

/// Why a call was not made: the time it would have had, and the floor it needed (in whole
/// microseconds, read as [`Duration`]s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Shortfall {
    left_us: u64,
    available_us: u64,
    floor_us: u64,
}

impl Shortfall {
    /// The time left at the decision, before the reserve: zero once the deadline has passed.
    #[must_use]
    pub const fn left(&self) -> Duration {
        micros_to_duration(self.left_us)
    }

    /// The timeout the call would have had (`min(left - reserve, cap)`), possibly zero.
    #[must_use]
    pub const fn available(&self) -> Duration {
        micros_to_duration(self.available_us)
    }

    /// The dependency's floor.
    #[must_use]
    pub const fn floor(&self) -> Duration {
        micros_to_duration(self.floor_us)
    }

    /// A shortfall of `available` under `floor` with `left` before the deadline, all in
    /// whole microseconds.
    pub(crate) const fn from_micros(left: u64, available: u64, floor: u64) -> Shortfall {
        Shortfall {
            left_us: left,
            available_us: available,
            floor_us: floor,
        }
    }

    /// The error a required call that was not made reports: [`Error::DeadlineExceeded`] when
    /// no time was left at all (the deadline had passed), else [`Error::InsufficientTime`],
    /// also when time was left but all of it was reserved (`available` is zero).
    ///
    /// ```
    /// use deadline_core::{Deadline, Error, Instant, ms, Policy};
    /// use deadline_core::call::{call_timeout, Decision};
    ///
    /// let b = Policy::required("B").with_cap(ms(110)).with_floor(ms(30));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// // 180 ms left, all of it reserved for later work: not enough time, but not past it.
    /// let Decision::Fail(s) = call_timeout(&b, deadline, ms(180), Instant::from_millis(20)) else {
    ///     unreachable!()
    /// };
    /// assert_eq!(s.error(), Error::InsufficientTime { available: ms(0), floor: ms(30) });
    /// // At the deadline, nothing is left: the deadline is exceeded.
    /// let Decision::Fail(s) = call_timeout(&b, deadline, ms(180), Instant::from_millis(200)) else {
    ///     unreachable!()
    /// };
    /// assert_eq!(s.error(), Error::DeadlineExceeded);
    /// ```
    #[must_use]
    pub const fn error(&self) -> Error {
        if self.left_us == 0 {
            Error::DeadlineExceeded
        } else {
            Error::InsufficientTime {
                available: self.available(),
                floor: self.floor(),
            }
        }
    }
}

/// Decides one call at `now`: `timeout = min(deadline.remaining(now) - reserve, policy.cap)`.
///
/// `reserve` is the time the caller needs after this call returns: its own remaining work
/// plus the floors of the required calls still to come ([`crate::plan::Plan`] computes it). The
/// call is made only when the timeout is positive and at least the policy's floor; otherwise
/// an optional dependency is skipped and a required one fails. All arithmetic saturates.
///
/// Guarantees, for a [`Decision::Call`]: `timeout <= remaining - reserve`, `timeout <= cap`,
/// `timeout >= floor`, `timeout > 0`, `connect <= timeout`, and `until <= deadline`.
///
/// ```
/// use deadline_core::{Deadline, Instant, ms, Policy};
/// use deadline_core::call::{call_timeout, Decision};
///
/// let c = Policy::optional("C").with_cap(ms(60)).with_floor(ms(25));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// // The checkout example's slow case: C starts at 156 ms; 200 - 156 - 20 = 24 ms is under its 25 ms floor.
/// let d = call_timeout(&c, deadline, ms(20), Instant::from_millis(156));
/// assert!(matches!(d, Decision::Skip(s) if s.available() == ms(24)));
/// ```
pub fn call_timeout(
    policy: &Policy,
    deadline: Deadline,
    reserve: Duration,
    now: Instant,
) -> Decision {
    decide_micros(policy, deadline, duration_to_micros_ceil(reserve), now)
}

/// [`call_timeout`] with the reserve in whole microseconds (a [`Call`](crate::call::Call) keeps it
/// so): one body that both callers share.
pub(crate) const fn decide_micros(
    policy: &Policy,
    deadline: Deadline,
    reserve: u64,
    now: Instant,
) -> Decision {
    decide_capped(policy, policy.cap_micros(), deadline, reserve, now)
}

/// [`decide_micros`] with a cap of `cap` microseconds in place of the policy's (a
/// dependency's adaptive cap). Inlined, so that [`decide_micros`] is what it was without it.
#[inline(always)]
pub(crate) const fn decide_capped(
    policy: &Policy,
    cap: u64,
    deadline: Deadline,
    reserve: u64,
    now: Instant,
) -> Decision {
    let left = deadline.left_micros(now);
    match within_budget(left, reserve, cap, policy.floor_micros()) {
        Ok(available) => Decision::Call(Limits {
            start: now,
            // At most the time left: no later than the deadline, so no overflow.
            until: Instant::from_micros(now.as_micros().wrapping_add(available)),
            connect_us: min_u64(policy.connect_micros(), available),
        }),
        Err(shortfall) => match policy.necessity {
            Necessity::Optional => Decision::Skip(shortfall),
            Necessity::Required => Decision::Fail(shortfall),
        },
    }
}
