//! [`PolicyError`]: a setting of a [`Policy`](crate::Policy) that could never act.

use core::fmt;

/// A setting of a [`Policy`](crate::Policy) that could never act: what
/// [`Policy::check`](crate::Policy::check) returns (the first it finds, in the order it
/// states), and what [`Dependency::new`](crate::Dependency::new) refuses with a panic (in a
/// `static` or a `const`, a compile error).
///
/// A policy read from a configuration file at run time can be checked first, and the file's
/// author told which setting to change, where a `Dependency` made with it would panic:
///
/// ```
/// use deadline_core::policy::PolicyError;
/// use deadline_core::{Policy, ms};
///
/// // As a configuration file might state it: a floor of 80 ms under a cap of 50 ms.
/// let (cap_ms, floor_ms) = (50, 80);
/// let policy = Policy::required("inventory").with_cap(ms(cap_ms)).with_floor(ms(floor_ms));
/// assert_eq!(policy.check(), Err(PolicyError::FloorAboveCap));
/// assert_eq!(
///     PolicyError::FloorAboveCap.to_string(),
///     "the floor is above the cap: no call would ever be made; lower .with_floor(..) or raise \
///      .with_cap(..)"
/// );
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum PolicyError {
    /// Without an adaptive cap, the cap is under a microsecond: it counts in whole
    /// microseconds, so every call would have no time at all, and none would be made.
    CapUnderAMicrosecond,
    /// Without an adaptive cap, the floor is above the cap: no call's timeout could reach the
    /// floor, so none would be made.
    FloorAboveCap,
    /// A fixed hedge delay is not under the cap, or none was set
    /// ([`Policy::with_hedges`](crate::Policy::with_hedges) alone): each attempt has timed
    /// out by the time its hedge is due, so none would be sent. A live delay, at a quantile
    /// of the latencies, is not refused: its fallback is used only until the histogram holds
    /// enough latencies, and the live quantile then replaces it.
    /// ([`Dependency::deadline_only`](crate::Dependency::deadline_only) refuses any hedge.)
    HedgeNotUnderCap,
    /// With feature `advice`, the adaptive cap's lower bound is under a microsecond: a cap
    /// moved there would refuse every call, and a refused call records no latency that
    /// could move it back.
    AdaptiveMinUnderAMicrosecond,
    /// With feature `advice`, the adaptive cap's lower bound is under the floor: a cap moved
    /// there would refuse every call, and nothing would move it back.
    AdaptiveMinUnderFloor,
    /// The connect limit ([`Policy::with_connect`](crate::Policy::with_connect)) is under a
    /// microsecond: it counts in whole microseconds, so every connection would be given no
    /// time at all, and every call would fail to connect.
    ConnectUnderAMicrosecond,
    /// With feature `advice`, a fixed hedge delay is not under the adaptive cap's lower
    /// bound, or none was set ([`Policy::with_hedges`](crate::Policy::with_hedges) alone):
    /// once the cap moves there, each attempt times out before its hedge is due.
    /// ([`Dependency::deadline_only`](crate::Dependency::deadline_only) refuses any hedge.)
    HedgeNotUnderAdaptiveMin,
}

impl PolicyError {
    /// What is wrong and which builder method changes it (the [`Display`](fmt::Display)
    /// text, and the panic message of [`Dependency::new`](crate::Dependency::new)). A program
    /// that reads its policies from a file names the file's own setting instead.
    #[must_use]
    pub const fn reason(self) -> &'static str {
        match self {
            PolicyError::CapUnderAMicrosecond => {
                "the cap is under a microsecond: no call would ever be made; raise .with_cap(..)"
            }
            PolicyError::FloorAboveCap => {
                "the floor is above the cap: no call would ever be made; lower .with_floor(..) \
                 or raise .with_cap(..)"
            }
            PolicyError::HedgeNotUnderCap => {
                "the hedge delay is not under the cap: every attempt times out before its hedge \
                 is due; set one with .with_hedge_after(..) under the cap, or \
                 .with_hedge_at_p95(..)"
            }
            PolicyError::AdaptiveMinUnderAMicrosecond => {
                "the adaptive cap's lower bound is under a microsecond: a cap moved there would \
                 refuse every call, and no latency would move it back; raise the min of \
                 .with_adaptive_cap(..)"
            }
            PolicyError::AdaptiveMinUnderFloor => {
                "the adaptive cap's lower bound is under the floor: a cap moved there would \
                 refuse every call, and no latency would move it back; raise the min of \
                 .with_adaptive_cap(..) to the floor at least"
            }
            PolicyError::ConnectUnderAMicrosecond => {
                "the connect limit is under a microsecond: every connection would be refused \
                 at once; raise .with_connect(..), or leave it unset for the call's timeout"
            }
            PolicyError::HedgeNotUnderAdaptiveMin => {
                "the hedge delay is not under the adaptive cap's lower bound: once the cap moves \
                 there every attempt times out before its hedge is due; set one under it with \
                 .with_hedge_after(..), raise the min of .with_adaptive_cap(..) above it, or \
                 hedge with .with_hedge_at_p95(..)"
            }
        }
    }
}

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.reason())
    }
}

impl core::error::Error for PolicyError {}
