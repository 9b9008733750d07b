//! The call-timeout decision: `timeout = min(left - reserve, cap)`, checked against the floor.

use core::time::Duration;

use crate::deadline::Deadline;
use crate::error::Error;
use crate::policy::{Necessity, Policy};
use crate::time::{Instant, duration_min, duration_saturating_sub};

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
            Decision::Call(limits) => Some(limits.timeout),
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

/// The limits of one call (or one attempt of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Limits {
    /// The whole call's timeout: `min(left - reserve, cap)`. Use it as the read limit and as
    /// the time left sent to the callee.
    pub timeout: Duration,
    /// The connect limit: the policy's, never more than `timeout`.
    pub connect: Duration,
    /// The instant the call's timeout ends: `now + timeout`, never after the request deadline.
    pub until: Instant,
    /// The instant the call was decided (`until - timeout`): its [`deadline`](Limits::deadline)'s
    /// start, kept so that handing the deadline on is two moves.
    start: Instant,
}

impl Limits {
    /// The limits of an attempt to `policy`'s dependency with `timeout`, decided at `start`
    /// and ending at `until`: its connect limit is the policy's, never more than `timeout`,
    /// as [`call_timeout`] decides it. (An attempt's record keeps only the timeout, the start
    /// and the end, and rebuilds the rest with this. `call_timeout` writes the same rule out
    /// itself: calling this from there, even always inlined, made `call_timeout` alone 20
    /// bytes larger on thumbv7em.)
    #[cfg(feature = "drive")]
    #[inline]
    pub(crate) const fn of(
        policy: &Policy,
        timeout: Duration,
        start: Instant,
        until: Instant,
    ) -> Limits {
        Limits {
            timeout,
            connect: duration_min(policy.connect, timeout),
            until,
            start,
        }
    }

    /// This call's deadline, to hand to the callee (it is a child of the request deadline).
    /// It starts when the call does, so its time left never exceeds `timeout`.
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, Policy, call_timeout, ms};
    ///
    /// let b = Policy::required("B").cap(ms(110));
    /// let now = Instant::from_millis(50);
    /// let limits = call_timeout(&b, Deadline::after(Instant::ZERO, ms(200)), ms(20), now)
    ///     .limits()
    ///     .unwrap();
    /// assert_eq!(limits.deadline(), Deadline::after(now, ms(110)));
    /// // A reading before the call's start counts as the start.
    /// assert_eq!(limits.deadline().remaining(Instant::from_millis(40)), ms(110));
    /// ```
    #[must_use]
    pub const fn deadline(&self) -> Deadline {
        Deadline::between(self.start, self.until)
    }

    /// The connect limit for a connection opened at `now`: the policy's connect limit, but
    /// never more than the time left until [`until`](Limits::until) (zero once it has come).
    ///
    /// ```
    /// use deadline_core::{Deadline, Instant, Policy, call_timeout, ms};
    ///
    /// let c = Policy::optional("C").cap(ms(60)).floor(ms(25)).connect(ms(20));
    /// let deadline = Deadline::after(Instant::ZERO, ms(200));
    /// let limits = call_timeout(&c, deadline, ms(20), Instant::from_millis(115)).limits().unwrap();
    /// assert_eq!(limits.connect_timeout(Instant::from_millis(115)), ms(20));
    /// // 10 ms before the attempt's end, the connect may take only those 10 ms.
    /// assert_eq!(limits.connect_timeout(Instant::from_millis(165)), ms(10));
    /// ```
    #[must_use]
    pub const fn connect_timeout(&self, now: Instant) -> Duration {
        duration_min(self.connect, self.read_timeout(now))
    }

    /// The read (and write) limit for an I/O operation of the attempt starting at `now`: the
    /// time left until [`until`](Limits::until), zero once it has come.
    #[must_use]
    pub const fn read_timeout(&self, now: Instant) -> Duration {
        self.deadline().remaining(now)
    }
}

/// The timeout a call or a statement gets with `left` before its deadline: the time left less
/// `reserve`, at most `cap`; or, when that is zero or under `floor`, the shortfall. The one
/// rule of [`call_timeout`] and [`statement_timeout`](crate::statement_timeout).
#[inline]
pub(crate) fn within_budget(
    left: Duration,
    reserve: Duration,
    cap: Duration,
    floor: Duration,
) -> Result<Duration, Shortfall> {
    let available = duration_min(duration_saturating_sub(left, reserve), cap);
    if zero_or_under(available, floor) {
        Err(Shortfall {
            left,
            available,
            floor,
        })
    } else {
        Ok(available)
    }
}

/// `now + timeout`, for a timeout a call was given at `now`: no more than the time left, which is
/// whole microseconds from `now` (or a later start) to the deadline, so the sum is at most the
/// deadline, and neither it nor the timeout's microseconds can pass `u64::MAX` (no saturation
/// to check; `Instant::saturating_add` gives the same).
#[inline]
const fn until(now: Instant, timeout: Duration) -> Instant {
    let micros = timeout
        .as_secs()
        .wrapping_mul(1_000_000)
        .wrapping_add(timeout.subsec_micros() as u64);
    Instant::from_micros(now.as_micros().wrapping_add(micros))
}

/// `d.is_zero() || d < floor`, seconds first: a `d` of more whole seconds than the floor is
/// neither (it is at least a second).
#[inline]
const fn zero_or_under(d: Duration, floor: Duration) -> bool {
    if d.as_secs() > floor.as_secs() {
        false
    } else if d.as_secs() < floor.as_secs() {
        true
    } else {
        d.subsec_nanos() < floor.subsec_nanos() || (d.as_secs() == 0 && d.subsec_nanos() == 0)
    }
}

/// Why a call was not made: the time it would have had, and the floor it needed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Shortfall {
    /// The time left at the decision, before the reserve: zero once the deadline has passed.
    pub left: Duration,
    /// The timeout the call would have had (`min(left - reserve, cap)`), possibly zero.
    pub available: Duration,
    /// The dependency's floor.
    pub floor: Duration,
}

impl Shortfall {
    /// The error a required call that was not made reports: [`Error::DeadlineExceeded`] when
    /// no time was left at all (the deadline had passed), else [`Error::InsufficientTime`],
    /// also when time was left but all of it was reserved (`available` is zero).
    ///
    /// ```
    /// use deadline_core::{Deadline, Decision, Error, Instant, Policy, call_timeout, ms};
    ///
    /// let b = Policy::required("B").cap(ms(110)).floor(ms(30));
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
        if self.left.is_zero() {
            Error::DeadlineExceeded
        } else {
            Error::InsufficientTime {
                available: self.available,
                floor: self.floor,
            }
        }
    }
}

/// Decides one call at `now`: `timeout = min(deadline.remaining(now) - reserve, policy.cap)`.
///
/// `reserve` is the time the caller needs after this call returns: its own remaining work
/// plus the floors of the required calls still to come ([`crate::Plan`] computes it). The
/// call is made only when the timeout is positive and at least the policy's floor; otherwise
/// an optional dependency is skipped and a required one fails. All arithmetic saturates.
///
/// Guarantees, for a [`Decision::Call`]: `timeout <= remaining - reserve`, `timeout <= cap`,
/// `timeout >= floor`, `timeout > 0`, `connect <= timeout`, and `until <= deadline`.
///
/// ```
/// use deadline_core::{Deadline, Decision, Instant, Policy, call_timeout, ms};
///
/// let c = Policy::optional("C").cap(ms(60)).floor(ms(25));
/// let deadline = Deadline::after(Instant::ZERO, ms(200));
/// // The checkout example's slow case: C starts at 156 ms; 200 - 156 - 20 = 24 ms is under its 25 ms floor.
/// let d = call_timeout(&c, deadline, ms(20), Instant::from_millis(156));
/// assert!(matches!(d, Decision::Skip(s) if s.available == ms(24)));
/// ```
// Inlined into callers in other crates on 64-bit hosts, where a call costs more than the
// decision; on 32-bit microcontrollers (built with LTO, sized for flash) the compiler decides,
// and keeps one copy for the core's several callers.
#[cfg_attr(target_pointer_width = "64", inline)]
pub fn call_timeout(
    policy: &Policy,
    deadline: Deadline,
    reserve: Duration,
    now: Instant,
) -> Decision {
    match within_budget(deadline.left(now), reserve, policy.cap, policy.floor) {
        Ok(available) => Decision::Call(Limits {
            timeout: available,
            connect: duration_min(policy.connect, available),
            until: until(now, available),
            start: now,
        }),
        Err(shortfall) => match policy.necessity {
            Necessity::Optional => Decision::Skip(shortfall),
            Necessity::Required => Decision::Fail(shortfall),
        },
    }
}
