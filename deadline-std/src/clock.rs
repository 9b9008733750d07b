//! [`StdClock`]: the core's clock on [`std::time::Instant`].

use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::time::Duration;

use deadline_core::{Clock, Instant, duration_to_micros};

/// How far before the first use the origin lies, so that std instants taken before the first
/// conversion (a request's arrival time, say) still convert exactly.
const ORIGIN_MARGIN: Duration = Duration::from_secs(24 * 60 * 60);

/// The process-wide origin of the core instants made from std instants.
struct Origin {
    /// One day before the first time a conversion needed one (less on a platform that cannot
    /// represent that instant).
    instant: std::time::Instant,
    /// The origin's seconds and nanoseconds as [`Fields`] reads them, if reading them that way
    /// was found, when the origin was taken, to give std's own time differences ([`verify`]).
    fields: Option<(u64, u32)>,
}

/// The process-wide origin, taken at the first call (after it, one load and a test).
#[inline]
fn origin() -> &'static Origin {
    static ORIGIN: OnceLock<Origin> = OnceLock::new();
    ORIGIN.get_or_init(|| {
        let now = std::time::Instant::now();
        let mut margin = ORIGIN_MARGIN;
        let instant = loop {
            match now.checked_sub(margin) {
                Some(origin) => break origin,
                None if margin.is_zero() => break now,
                None => margin /= 2,
            }
        };
        Origin {
            instant,
            fields: verify(instant, now),
        }
    })
}

/// A std instant's seconds and nanoseconds, read through its `Hash` implementation.
///
/// `std::time::Instant` hides its value, and std's subtraction of two instants is a call into
/// the standard library (`Instant::saturating_duration_since`, about 55 instructions on Linux,
/// more than reading the clock). Its `Hash`, though, is derived: in std's Unix and Windows
/// implementations it hands the hasher the instant's seconds (`write_i64` or `write_u64`) and
/// then its nanoseconds (`write_u32`), and it is generic over the hasher, so for this one it
/// compiles to two moves.
/// What those two numbers mean is std's private business, so they are used only once
/// [`verify`] has found that they move exactly as std's own arithmetic says on this platform;
/// otherwise, or if the instant hashes in any other shape, the conversion is std's subtraction.
#[derive(Default)]
struct Fields {
    secs: u64,
    nanos: u32,
    /// 0: nothing written yet; 1: the seconds; 2: the seconds, then the nanoseconds; 3: any
    /// other shape.
    state: u8,
}

impl Fields {
    /// `t`'s seconds and nanoseconds, or `None` if it does not hash as those two.
    fn of(t: std::time::Instant) -> Option<(u64, u32)> {
        let mut fields = Fields::default();
        t.hash(&mut fields);
        (fields.state == 2 && fields.nanos < 1_000_000_000).then_some((fields.secs, fields.nanos))
    }

    fn seconds(&mut self, secs: u64) {
        self.state = if self.state == 0 { 1 } else { 3 };
        self.secs = secs;
    }
}

impl Hasher for Fields {
    fn finish(&self) -> u64 {
        0
    }

    fn write(&mut self, _: &[u8]) {
        self.state = 3;
    }

    fn write_i64(&mut self, secs: i64) {
        // Two's complement: `micros_between` takes differences modulo 2^64.
        self.seconds(secs as u64);
    }

    fn write_u64(&mut self, secs: u64) {
        self.seconds(secs);
    }

    fn write_u32(&mut self, nanos: u32) {
        self.state = if self.state == 1 { 2 } else { 3 };
        self.nanos = nanos;
    }
}

/// The time from the origin to a later (or the same) instant, both as [`Fields`] reads them,
/// in whole microseconds (rounded down, saturating at `u64::MAX`).
///
/// The seconds are two's-complement `i64` on Unix and `u64` on Windows: for an instant at or
/// after the origin the wrapping difference is the true one either way (below 2^64).
fn micros_between((origin_secs, origin_nanos): (u64, u32), (secs, nanos): (u64, u32)) -> u64 {
    let (secs, nanos) = if nanos >= origin_nanos {
        (
            secs.wrapping_sub(origin_secs),
            nanos.wrapping_sub(origin_nanos),
        )
    } else {
        (
            secs.wrapping_sub(origin_secs).wrapping_sub(1),
            nanos.wrapping_add(1_000_000_000).wrapping_sub(origin_nanos),
        )
    };
    // `nanos / 1 000` is below 10^6: the sum saturates only with the product.
    match secs.checked_mul(1_000_000) {
        Some(whole) => whole.saturating_add(u64::from(nanos / 1_000)),
        None => u64::MAX,
    }
}

/// The origin's [`Fields`], if they give std's own time differences: the instant hashes as
/// seconds then nanoseconds, and for `now` (the first use, after the origin) and for the
/// origin plus a few durations that cross second boundaries, the fields' difference in
/// microseconds is std's `duration_since` in microseconds. `None` otherwise: then every
/// conversion takes std's subtraction.
fn verify(origin: std::time::Instant, now: std::time::Instant) -> Option<(u64, u32)> {
    let base = Fields::of(origin)?;
    let probes = [
        Duration::ZERO,
        Duration::from_nanos(999),
        Duration::from_nanos(1_001),
        Duration::new(1, 500_000_001),
        Duration::new(86_399, 999_999_999),
        Duration::new(1_000_003, 7),
    ];
    let later = probes.iter().filter_map(|&d| origin.checked_add(d));
    for t in later.chain([now]) {
        let fields = Fields::of(t)?;
        let since = t.checked_duration_since(origin)?;
        if micros_between(base, fields) != duration_to_micros(since) {
            return None;
        }
    }
    Some(base)
}

/// Converts a std instant to a core [`Instant`]: whole microseconds since the process-wide
/// origin, rounded down.
///
/// The origin lies one day before the first conversion, so instants taken shortly before it
/// convert exactly; an instant before the origin gives [`Instant::ZERO`] (saturating, never a
/// panic).
///
/// ```
/// use deadline_std::{from_std, to_std};
///
/// let now = std::time::Instant::now();
/// let core = from_std(now);
/// assert!(to_std(core) <= now);
/// assert!(now - to_std(core) < std::time::Duration::from_micros(1));
/// ```
#[must_use]
#[inline]
pub fn from_std(t: std::time::Instant) -> Instant {
    let origin = origin();
    // std's comparison of instants is inlined; its subtraction is not.
    if t <= origin.instant {
        return Instant::ZERO;
    }
    match (origin.fields, Fields::of(t)) {
        (Some(base), Some(fields)) => Instant::from_micros(micros_between(base, fields)),
        _ => Instant::from_micros(duration_to_micros(t.duration_since(origin.instant))),
    }
}

/// Converts a core [`Instant`] to a std instant. An instant too far in the future for the
/// platform (such as [`Instant::MAX`]) gives a stand-in 30 years from now.
#[must_use]
pub fn to_std(t: Instant) -> std::time::Instant {
    checked_to_std(t).unwrap_or_else(far_future)
}

/// Converts a core [`Instant`] to a std instant, or `None` if the platform cannot represent it.
#[must_use]
pub fn checked_to_std(t: Instant) -> Option<std::time::Instant> {
    origin().instant.checked_add(t.since_origin())
}

/// A stand-in for "never" that every platform can represent: 30 years from now.
fn far_future() -> std::time::Instant {
    const THIRTY_YEARS: Duration = Duration::from_secs(86_400 * 365 * 30);
    let now = std::time::Instant::now();
    now.checked_add(THIRTY_YEARS).unwrap_or(now)
}

/// The core's [`Clock`] on [`std::time::Instant`], from a process-wide origin (see
/// [`from_std`]).
///
/// ```
/// use deadline_core::Clock;
/// use deadline_std::StdClock;
///
/// let a = StdClock.now();
/// let b = StdClock.now();
/// assert!(b >= a);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct StdClock;

impl Clock for StdClock {
    #[inline]
    fn now(&self) -> Instant {
        from_std(std::time::Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Fields, duration_to_micros, from_std, micros_between, origin};

    /// On Unix and Windows the fields are read: the fast path is the one tested and measured.
    #[cfg(any(unix, windows))]
    #[test]
    fn the_fields_are_verified_here() {
        assert!(origin().fields.is_some());
    }

    /// The fields' difference is std's, over a spread of instants after the origin, and an
    /// instant before it converts to zero.
    #[test]
    fn the_fields_give_std_differences() {
        let origin = origin();
        let Some(base) = origin.fields else {
            return;
        };
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = Duration::new(x >> 40, (x as u32) % 1_000_000_000);
            if let Some(t) = origin.instant.checked_add(d) {
                let fields = Fields::of(t).unwrap();
                let since = t.duration_since(origin.instant);
                assert_eq!(micros_between(base, fields), duration_to_micros(since));
                assert_eq!(from_std(t).as_micros(), duration_to_micros(since));
            }
            if let Some(t) = origin.instant.checked_sub(d) {
                assert_eq!(from_std(t).as_micros(), 0, "{d:?} before the origin");
            }
        }
    }

    /// Saturation: a difference past `u64::MAX` microseconds reads as `u64::MAX`; borrows
    /// across the second; seconds that wrap (two's complement) still differ by the right
    /// amount.
    #[test]
    fn micros_between_saturates_and_borrows() {
        assert_eq!(micros_between((0, 0), (1 << 62, 0)), u64::MAX);
        assert_eq!(micros_between((5, 999_999_999), (6, 0)), 0);
        assert_eq!(micros_between((5, 999_999_000), (6, 0)), 1);
        assert_eq!(micros_between((5, 500), (7, 400)), 1_999_999);
        assert_eq!(micros_between((7, 400), (7, 1_399)), 0);
        assert_eq!(micros_between((-3i64 as u64, 0), (2, 1_000)), 5_000_001);
    }
}
