//! Time: an [`Instant`] in microseconds from a clock's origin, and the [`Clock`] trait.

use core::fmt;
use core::ops::{Add, Sub};
use core::time::Duration;

/// Microseconds in one millisecond.
const MICROS_PER_MILLI: u64 = 1_000;
/// Microseconds in one second.
const MICROS_PER_SEC: u64 = 1_000_000;

/// Converts a [`Duration`] to whole microseconds, rounding down and saturating at `u64::MAX`.
///
/// In `u64` arithmetic only (no 128-bit multiply or division), so it is cheap on every
/// target, microcontrollers included.
#[must_use]
// The same code on every target, inlined where it is cheap: on a 64-bit host inlining these
// conversions saves about 3% of a downstream call that is really pending (`bash
// scripts/instructions.sh dependency_run_deadline_only_pending`: 2 536 -> 2 452
// instructions), while on a 32-bit microcontroller every copy repeats a 64-bit multiply and
// its overflow check: one copy there keeps the deadline-only firmware at 3.9 KiB of library
// code instead of 4.8 (`bash scripts/firmware.sh`). The same for each conversion below.
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
pub(crate) const fn duration_to_micros(d: Duration) -> u64 {
    // `subsec_micros` is below 1 000 000: the sum saturates only with the product.
    match d.as_secs().checked_mul(MICROS_PER_SEC) {
        Some(whole) => whole.saturating_add(d.subsec_micros() as u64),
        None => u64::MAX,
    }
}

/// Converts a [`Duration`] to whole microseconds, rounding up and saturating at `u64::MAX`:
/// for a bound that must not be undercut (a floor, a reserve).
///
/// A whole second is a whole number of microseconds, so only the nanoseconds round: no
/// division, no `u128`.
#[must_use]
// Inlined on 64-bit hosts, one copy on 32-bit targets: see `duration_to_micros`.
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
pub(crate) const fn duration_to_micros_ceil(d: Duration) -> u64 {
    match d.as_secs().checked_mul(MICROS_PER_SEC) {
        Some(whole) => whole.saturating_add(d.subsec_nanos().div_ceil(1_000) as u64),
        None => u64::MAX,
    }
}

/// Converts whole microseconds to a [`Duration`]: the same as [`Duration::from_micros`],
/// without a 64-bit division, which on a 32-bit microcontroller is a call into the division
/// builtin (about 0.9 KiB of code): the quotient is a multiply-high by the divisor's
/// reciprocal ([`mul_wide`]), the form compilers use for this division on 64-bit targets.
#[must_use]
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
pub(crate) const fn micros_to_duration(micros: u64) -> Duration {
    let secs = mul_wide(micros, DIV_1_000_000).0 >> 18;
    // `secs × 10^6 <= micros`, so the product does not wrap, and the remainder is below
    // 10^6: it fits a u32, and its low 32 bits are all of it.
    let rest = (micros as u32).wrapping_sub((secs as u32).wrapping_mul(MICROS_PER_SEC as u32));
    // At most 999 999 000, below 10^9: `Duration::new` never carries into the seconds. The
    // clamp never changes it; it shows the compiler so, which drops the carry and its panic.
    let nanos = rest.wrapping_mul(1_000);
    Duration::new(
        secs,
        if nanos < 1_000_000_000 {
            nanos
        } else {
            999_999_999
        },
    )
}

/// `a - b`, or zero if `b` is longer: `Duration::saturating_sub`, written so that the compiler
/// sees the nanoseconds stay below a second (no carry into the seconds, no panic path).
#[inline]
pub(crate) const fn duration_saturating_sub(a: Duration, b: Duration) -> Duration {
    const NANOS_PER_SEC: u32 = 1_000_000_000;
    let (secs, nanos) = if a.subsec_nanos() >= b.subsec_nanos() {
        (
            a.as_secs().checked_sub(b.as_secs()),
            a.subsec_nanos().wrapping_sub(b.subsec_nanos()),
        )
    } else {
        // Borrow a second: both nanoseconds are below 10^9, so the sum is below 2 × 10^9.
        let secs = match a.as_secs().checked_sub(b.as_secs()) {
            Some(secs) => secs.checked_sub(1),
            None => None,
        };
        (
            secs,
            a.subsec_nanos()
                .wrapping_add(NANOS_PER_SEC)
                .wrapping_sub(b.subsec_nanos()),
        )
    };
    match secs {
        // Below 10^9 either way; the clamp only shows it to the compiler.
        Some(secs) => Duration::new(
            secs,
            if nanos < NANOS_PER_SEC {
                nanos
            } else {
                NANOS_PER_SEC - 1
            },
        ),
        None => Duration::ZERO,
    }
}

/// The shorter of `a` and `b` (`b` when they are equal): `Duration::min`, seconds first.
#[inline]
pub(crate) const fn duration_min(a: Duration, b: Duration) -> Duration {
    if a.as_secs() > b.as_secs() {
        b
    } else if a.as_secs() < b.as_secs() || a.subsec_nanos() < b.subsec_nanos() {
        a
    } else {
        b
    }
}

/// The full 128-bit product `a × b`, as its `(high, low)` halves. The compiler makes it one
/// multiply on a 64-bit host and, on a Cortex-M, code no larger than the product written out
/// in 32-bit halves (`bash scripts/firmware.sh`), with no 128-bit builtin.
#[cfg_attr(target_pointer_width = "64", inline)]
#[cfg_attr(not(target_pointer_width = "64"), inline(never))]
pub(crate) const fn mul_wide(a: u64, b: u64) -> (u64, u64) {
    // Below 2^128: the product of two numbers below 2^64 does not wrap.
    let product = (a as u128).wrapping_mul(b as u128);
    // The halves, each cut to its 64 bits on purpose.
    ((product >> 64) as u64, product as u64)
}

/// `m = ceil(2^82 / 10^6)`: `x / 1 000 000` is `(x × m) >> (64 + 18)`, exactly, for every
/// `x`: the multiplier compilers use for this division on 64-bit targets.
const DIV_1_000_000: u64 = 0x431B_DE82_D7B6_34DB;

/// `x / 1 000`, exactly, for every `x`: `((x >> 3) × m) >> (64 + 4)` with
/// `m = ceil(2^68 / 125)` (`10^3 = 2^3 × 125`).
pub(crate) const fn div_1_000(x: u64) -> u64 {
    mul_wide(x >> 3, 0x20C4_9BA5_E353_F7CF).0 >> 4
}

/// A point in monotonic time: whole microseconds since the origin of the clock that made it.
///
/// One tick is one microsecond, so a `u64` spans more than 580 000 years: no real clock
/// overflows it, and the arithmetic saturates for the inputs that try. Instants from two
/// different clocks cannot be compared; across machines, pass the *time left* instead (see
/// [`crate::wire`]).
///
/// ```
/// use core::time::Duration;
/// use deadline_core::Instant;
///
/// let t = Instant::from_millis(10);
/// assert_eq!(t + Duration::from_millis(5), Instant::from_millis(15));
/// // Saturating: an earlier instant minus a later one is zero, not a panic.
/// assert_eq!(Instant::ZERO - t, Duration::ZERO);
/// assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
/// ```
///
/// The core's decisions never read a clock: every one takes `now` as an argument. An adapter
/// crate (tokio, std, embassy) implements [`Clock`] over its runtime's monotonic clock, and
/// tests use [`ManualClock`](crate::virtual_time::ManualClock) (feature `test-util`). The one reader is the optional driver (feature `drive`), which
/// reads its timer's clock after every wake-up.
///
/// All arithmetic on [`Instant`] saturates: a clock that steps back, a huge budget or an
/// overflowing sum gives the nearest representable answer, never a panic.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The clock's origin.
    pub const ZERO: Instant = Instant { micros: 0 };
    /// The latest representable instant: a deadline that never comes.
    pub const MAX: Instant = Instant { micros: u64::MAX };

    /// The instant `micros` microseconds after the origin.
    #[must_use]
    pub const fn from_micros(micros: u64) -> Self {
        Instant { micros }
    }

    /// The instant `millis` milliseconds after the origin, saturating at [`Instant::MAX`].
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Instant {
            micros: millis.saturating_mul(MICROS_PER_MILLI),
        }
    }

    /// The instant `secs` seconds after the origin, saturating at [`Instant::MAX`].
    #[must_use]
    pub const fn from_secs(secs: u64) -> Self {
        Instant {
            micros: secs.saturating_mul(MICROS_PER_SEC),
        }
    }

    /// Whole microseconds since the origin.
    #[must_use]
    pub const fn as_micros(self) -> u64 {
        self.micros
    }

    /// Whole milliseconds since the origin, rounded down.
    #[must_use]
    pub const fn as_millis(self) -> u64 {
        // `self.micros / 1 000`, as a multiply: no 64-bit division builtin.
        div_1_000(self.micros)
    }

    /// The time since the origin, as a [`Duration`].
    #[must_use]
    pub const fn since_origin(self) -> Duration {
        micros_to_duration(self.micros)
    }

    /// `self + d`, or `None` if that is past [`Instant::MAX`].
    #[must_use]
    pub const fn checked_add(self, d: Duration) -> Option<Instant> {
        // Whole microseconds in u64 (no 128-bit `as_micros`): past `u64::MAX` is `None`.
        let Some(whole) = d.as_secs().checked_mul(MICROS_PER_SEC) else {
            return None;
        };
        let Some(d) = whole.checked_add(d.subsec_micros() as u64) else {
            return None;
        };
        match self.micros.checked_add(d) {
            Some(micros) => Some(Instant { micros }),
            None => None,
        }
    }

    /// `self - d`, or `None` if that is before the origin.
    #[must_use]
    pub const fn checked_sub(self, d: Duration) -> Option<Instant> {
        // Whole microseconds in u64 (no 128-bit `as_micros`): past `u64::MAX` is `None`.
        let Some(whole) = d.as_secs().checked_mul(MICROS_PER_SEC) else {
            return None;
        };
        let Some(d) = whole.checked_add(d.subsec_micros() as u64) else {
            return None;
        };
        match self.micros.checked_sub(d) {
            Some(micros) => Some(Instant { micros }),
            None => None,
        }
    }

    /// `self + d`, saturating at [`Instant::MAX`].
    #[must_use]
    // Inlined on 64-bit hosts, one copy on 32-bit targets: see `duration_to_micros`.
    #[cfg_attr(target_pointer_width = "64", inline)]
    #[cfg_attr(not(target_pointer_width = "64"), inline(never))]
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_add(duration_to_micros(d)),
        }
    }

    /// `self - d`, saturating at [`Instant::ZERO`].
    #[must_use]
    pub const fn saturating_sub(self, d: Duration) -> Instant {
        Instant {
            micros: self.micros.saturating_sub(duration_to_micros(d)),
        }
    }

    /// The time from `earlier` to `self`, or `None` if `earlier` is later than `self`.
    #[must_use]
    pub const fn checked_duration_since(self, earlier: Instant) -> Option<Duration> {
        match self.micros.checked_sub(earlier.micros) {
            Some(micros) => Some(micros_to_duration(micros)),
            None => None,
        }
    }

    /// The time from `earlier` to `self`, or zero if `earlier` is later (a clock that stepped
    /// back).
    #[must_use]
    #[inline]
    pub const fn saturating_duration_since(self, earlier: Instant) -> Duration {
        micros_to_duration(self.micros.saturating_sub(earlier.micros))
    }
}

/// Saturating: `Instant::MAX + anything` is `Instant::MAX`.
impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        self.saturating_add(d)
    }
}

/// Saturating: an instant minus more than it holds is [`Instant::ZERO`].
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, d: Duration) -> Instant {
        self.saturating_sub(d)
    }
}

/// Saturating: the time from a later instant to an earlier one is zero.
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Instant({}us)", self.micros)
    }
}

/// A monotonic clock.
///
/// # Contract
///
/// - **Monotonic**: a later call never returns an earlier instant than an earlier call on the
///   same clock. The core still saturates if an implementation breaks this (a stepped-back
///   reading counts as no time passed), so a broken clock cannot make it panic.
/// - **Infallible**: `now` always returns; it never blocks and never fails.
/// - **One origin**: instants from one clock are comparable with each other only.
/// - **Cheap**: the library reads the clock about once per call decision.
///
/// The core's decisions never call `now`: they take the instant as an argument. The clock is
/// for the code that drives them: an adapter, your own loop, or the core's optional driver
/// (feature `drive`), which reads its [`Timer`](crate::Timer)'s clock after every wake-up.
pub trait Clock {
    /// The current instant.
    fn now(&self) -> Instant;
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now(&self) -> Instant {
        (**self).now()
    }
}

/// Shorthand for [`Duration::from_millis`], handy in tables of timeouts.
#[must_use]
pub const fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

#[cfg(test)]
mod tests {
    use core::time::Duration;

    use super::{duration_to_micros_ceil, micros_to_duration, mul_wide};

    /// Rounded up, saturating: the `u128` form's answer on the edges.
    #[test]
    fn duration_to_micros_ceil_is_the_nanoseconds_rounded_up() {
        let edges = [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999),
            Duration::from_nanos(1_000),
            Duration::from_nanos(1_001),
            Duration::new(1, 999_999_999),
            Duration::new(18_446_744_073_709, 551_615_000),
            Duration::new(18_446_744_073_709, 551_615_001),
            Duration::new(u64::MAX / 1_000_000, 999_999_999),
            Duration::MAX,
        ];
        for d in edges {
            let wide = u64::try_from(d.as_nanos().div_ceil(1_000)).unwrap_or(u64::MAX);
            assert_eq!(duration_to_micros_ceil(d), wide, "{d:?}");
        }
    }

    /// The conversion agrees with `Duration::from_micros` at the edges of the
    /// seconds and on a stream of pseudo-random values.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn the_halves_conversion_is_from_micros() {
        let mut values = [0, 1, 999_999, 1_000_000, 1_000_001, u64::MAX - 1, u64::MAX].to_vec();
        let mut x = 0x2545_F491_4F6C_DD1D_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.extend([x, x >> 20, x >> 40, (x >> 20) / 1_000_000 * 1_000_000]);
        }
        for micros in values {
            assert_eq!(
                micros_to_duration(micros),
                Duration::from_micros(micros),
                "{micros}"
            );
        }
    }

    /// The product agrees with the 128-bit one, at the edges and on a stream
    /// of pseudo-random operands.
    #[test]
    #[cfg_attr(
        miri,
        ignore = "a grid of many thousand cases: run natively, too slow under miri"
    )]
    fn the_halves_product_is_the_full_product() {
        let edges = [
            0,
            1,
            2,
            u64::from(u32::MAX),
            1 << 32,
            (1 << 32) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut operands = edges.to_vec();
        for _ in 0..2_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            operands.push(x);
        }
        for &a in &operands {
            for &b in operands.iter().step_by(37).chain(&edges) {
                let full = u128::from(a) * u128::from(b);
                let expected = ((full >> 64) as u64, full as u64);
                assert_eq!(mul_wide(a, b), expected, "{a} x {b}");
            }
        }
    }
}
