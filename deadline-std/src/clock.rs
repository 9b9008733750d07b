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
    /// represent that instant), on a whole microsecond of the instant's [`Fields`] when they
    /// are read.
    instant: std::time::Instant,
    /// The origin's [`Fields`] in whole microseconds ([`micros_of`]; negative when the
    /// platform's clock started less than a day before), if reading instants that way was
    /// found, when the origin was taken, to give std's own time differences ([`verify`]).
    base: Option<i64>,
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
        // On a whole microsecond: then an instant's microseconds since the origin are its
        // own whole microseconds less the origin's, exactly.
        let instant = Fields::of(instant)
            .and_then(|(_, nanos)| {
                instant.checked_sub(Duration::from_nanos(u64::from(nanos % 1_000)))
            })
            .unwrap_or(instant);
        Origin {
            instant,
            base: verify(instant, now),
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
    secs: i64,
    nanos: u32,
    /// 0: nothing written yet; 1: the seconds; 2: the seconds, then the nanoseconds; 3: any
    /// other shape.
    state: u8,
}

impl Fields {
    /// `t`'s seconds and nanoseconds, or `None` if it does not hash as those two.
    fn of(t: std::time::Instant) -> Option<(i64, u32)> {
        let mut fields = Fields::default();
        t.hash(&mut fields);
        (fields.state == 2 && fields.nanos < 1_000_000_000).then_some((fields.secs, fields.nanos))
    }

    fn seconds(&mut self, secs: i64) {
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
        self.seconds(secs);
    }

    fn write_u64(&mut self, secs: u64) {
        match i64::try_from(secs) {
            Ok(secs) => self.seconds(secs),
            // Past `i64::MAX` seconds: not read (std's subtraction converts it).
            Err(_) => self.state = 3,
        }
    }

    fn write_u32(&mut self, nanos: u32) {
        self.state = if self.state == 1 { 2 } else { 3 };
        self.nanos = nanos;
    }
}

/// An instant's [`Fields`] in whole microseconds (rounded down, towards the past), or `None`
/// outside `i64` (then the conversion is std's subtraction).
#[inline]
fn micros_of((secs, nanos): (i64, u32)) -> Option<i64> {
    // `nanos / 1 000` is below 10^6: a multiply-high, no division.
    secs.checked_mul(1_000_000)?
        .checked_add(i64::from(nanos / 1_000))
}

/// The origin's [`Fields`] in whole microseconds, if they give std's own time differences:
/// the instant hashes as seconds then nanoseconds, on a whole microsecond, and for `now` (the
/// first use, after the origin) and for the origin plus a few durations that cross second
/// boundaries, the difference of the fields' microseconds is std's `duration_since` in
/// microseconds. `None` otherwise: then every conversion takes std's subtraction.
fn verify(origin: std::time::Instant, now: std::time::Instant) -> Option<i64> {
    let fields = Fields::of(origin)?;
    if fields.1 % 1_000 != 0 {
        return None;
    }
    let base = micros_of(fields)?;
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
        let micros = micros_of(Fields::of(t)?)?.checked_sub(base)?;
        let since = t.checked_duration_since(origin)?;
        if u64::try_from(micros).ok() != Some(duration_to_micros(since)) {
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
    let since = origin
        .base
        .and_then(|base| micros_of(Fields::of(t)?)?.checked_sub(base));
    if let Some(since) = since {
        // Before the origin: zero.
        return Instant::from_micros(u64::try_from(since).unwrap_or(0));
    }
    match t.checked_duration_since(origin.instant) {
        Some(since) => Instant::from_micros(duration_to_micros(since)),
        None => Instant::ZERO,
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

    use super::{Fields, duration_to_micros, from_std, micros_of, origin, to_std};

    /// On Unix and Windows the fields are read: the fast path is the one tested and measured.
    #[cfg(any(unix, windows))]
    #[test]
    fn the_fields_are_verified_here() {
        assert!(origin().base.is_some());
    }

    /// The fields' difference is std's, over a spread of instants after the origin, and an
    /// instant before it converts to zero; a core instant converts back to the latest whole
    /// microsecond at or before the std one.
    #[test]
    fn the_fields_give_std_differences() {
        let origin = origin();
        let Some(base) = origin.base else {
            return;
        };
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = Duration::new(x >> 40, (x as u32) % 1_000_000_000);
            if let Some(t) = origin.instant.checked_add(d) {
                let micros = micros_of(Fields::of(t).unwrap()).unwrap();
                let since = t.duration_since(origin.instant);
                assert_eq!((micros - base) as u64, duration_to_micros(since));
                let core = from_std(t);
                assert_eq!(core.as_micros(), duration_to_micros(since));
                let back = to_std(core);
                assert!(back <= t && t - back < Duration::from_micros(1), "{d:?}");
            }
            if let Some(t) = origin.instant.checked_sub(d) {
                assert_eq!(from_std(t).as_micros(), 0, "{d:?} before the origin");
            }
        }
    }

    /// Whole microseconds, rounded towards the past (also before the platform's zero);
    /// `None` outside `i64`, which std's subtraction then converts.
    #[test]
    fn micros_of_rounds_down_and_refuses_overflow() {
        assert_eq!(micros_of((0, 0)), Some(0));
        assert_eq!(micros_of((0, 999)), Some(0));
        assert_eq!(micros_of((0, 1_000)), Some(1));
        assert_eq!(micros_of((5, 999_999_999)), Some(5_999_999));
        // -3 s + 0.5 s: 2.5 s before the platform's zero.
        assert_eq!(micros_of((-3, 500_000_000)), Some(-2_500_000));
        assert_eq!(micros_of((1 << 62, 0)), None);
        assert_eq!(micros_of((i64::MIN, 0)), None);
        // The last second that fits: its microseconds fit up to `i64::MAX`, not past it.
        let last = i64::MAX / 1_000_000;
        assert_eq!(micros_of((last, 775_807_999)), Some(i64::MAX));
        assert_eq!(micros_of((last, 775_808_000)), None);
    }

    /// A count of seconds past `i64::MAX` (a `u64` on Windows) is not read.
    #[test]
    fn seconds_past_i64_are_not_read() {
        use std::hash::Hasher;
        let mut fields = Fields::default();
        fields.write_u64(u64::MAX);
        fields.write_u32(0);
        assert_ne!(fields.state, 2);
        let mut fields = Fields::default();
        fields.write_u64(7);
        fields.write_u32(5);
        assert_eq!((fields.state, fields.secs, fields.nanos), (2, 7, 5));
    }
}
