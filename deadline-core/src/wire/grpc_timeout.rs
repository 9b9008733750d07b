//! [`GrpcTimeout`]: gRPC's `grpc-timeout` header (1 to 8 ASCII digits, then a unit among
//! `H M S m u n`), and its [`GrpcUnit`].

use core::fmt;
use core::str::FromStr;
use core::time::Duration;

use super::digits::{check_prefix, parse_digits, write_decimal};
use super::error::WireError;

/// A `grpc-timeout` unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum GrpcUnit {
    /// `n`: nanoseconds.
    Nanos,
    /// `u`: microseconds.
    Micros,
    /// `m`: milliseconds.
    Millis,
    /// `S`: seconds.
    Seconds,
    /// `M`: minutes.
    Minutes,
    /// `H`: hours.
    Hours,
}

impl GrpcUnit {
    /// Every unit, the most precise first: the order in which encoding tries them.
    pub const ALL: [GrpcUnit; 6] = [
        GrpcUnit::Nanos,
        GrpcUnit::Micros,
        GrpcUnit::Millis,
        GrpcUnit::Seconds,
        GrpcUnit::Minutes,
        GrpcUnit::Hours,
    ];

    /// The unit's letter on the wire.
    ///
    /// ```
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::Millis.as_byte(), b'm');
    /// assert_eq!(GrpcUnit::Minutes.as_byte(), b'M');
    /// ```
    #[must_use]
    pub const fn as_byte(self) -> u8 {
        match self {
            GrpcUnit::Nanos => b'n',
            GrpcUnit::Micros => b'u',
            GrpcUnit::Millis => b'm',
            GrpcUnit::Seconds => b'S',
            GrpcUnit::Minutes => b'M',
            GrpcUnit::Hours => b'H',
        }
    }

    /// The unit a letter stands for (case-sensitive: `m` is milliseconds, `M` minutes).
    ///
    /// ```
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::from_byte(b'H'), Some(GrpcUnit::Hours));
    /// assert_eq!(GrpcUnit::from_byte(b'h'), None);
    /// ```
    #[must_use]
    pub const fn from_byte(byte: u8) -> Option<GrpcUnit> {
        match byte {
            b'n' => Some(GrpcUnit::Nanos),
            b'u' => Some(GrpcUnit::Micros),
            b'm' => Some(GrpcUnit::Millis),
            b'S' => Some(GrpcUnit::Seconds),
            b'M' => Some(GrpcUnit::Minutes),
            b'H' => Some(GrpcUnit::Hours),
            _ => None,
        }
    }

    /// The length of one unit: the most an encoded value can fall short of the duration it
    /// was encoded from.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::wire::GrpcUnit;
    ///
    /// assert_eq!(GrpcUnit::Minutes.as_duration(), Duration::from_secs(60));
    /// ```
    #[must_use]
    pub const fn as_duration(self) -> Duration {
        self.times(1)
    }

    /// `count` units, as [`times`](GrpcUnit::times) gives them, for a count that fits a `u32`
    /// (every `grpc-timeout` value does): each division is of a `u32` by a constant, where
    /// `Duration::from_nanos` and its kin divide a `u64` (a builtin call on a 32-bit
    /// microcontroller).
    const fn times_u32(self, count: u32) -> Duration {
        match self {
            GrpcUnit::Nanos => Duration::new((count / 1_000_000_000) as u64, count % 1_000_000_000),
            GrpcUnit::Micros => Duration::new(
                (count / 1_000_000) as u64,
                (count % 1_000_000).wrapping_mul(1_000),
            ),
            GrpcUnit::Millis => Duration::new(
                (count / 1_000) as u64,
                (count % 1_000).wrapping_mul(1_000_000),
            ),
            GrpcUnit::Seconds => Duration::from_secs(count as u64),
            // Below 2^32 × 3 600: no wrap.
            GrpcUnit::Minutes => Duration::from_secs((count as u64).wrapping_mul(60)),
            GrpcUnit::Hours => Duration::from_secs((count as u64).wrapping_mul(3_600)),
        }
    }

    /// `count` units, as a [`Duration`]. It cannot overflow for the counts `grpc-timeout`
    /// carries, and saturates for any larger count.
    #[must_use]
    pub const fn times(self, count: u64) -> Duration {
        match self {
            GrpcUnit::Nanos => Duration::from_nanos(count),
            GrpcUnit::Micros => Duration::from_micros(count),
            GrpcUnit::Millis => Duration::from_millis(count),
            GrpcUnit::Seconds => Duration::from_secs(count),
            GrpcUnit::Minutes => Duration::from_secs(count.saturating_mul(60)),
            GrpcUnit::Hours => Duration::from_secs(count.saturating_mul(3_600)),
        }
    }
}

/// A `grpc-timeout` header value: 1 to 8 ASCII digits and a unit, held in a 9-byte buffer.
///
/// Build one from the time left with [`GrpcTimeout::from_duration`] (or, with the per-hop
/// allowance, [`Propagation::encode_grpc_timeout`](crate::wire::Propagation::encode_grpc_timeout)), and read a peer's with
/// [`GrpcTimeout::parse`] (or [`Propagation::decode_grpc_timeout`](crate::wire::Propagation::decode_grpc_timeout)).
///
/// Encoding picks the most precise unit whose value fits in 8 digits and rounds down, so the
/// value sent is at most the duration and less than it by under one unit. Durations beyond
/// `99999999H` (over 11 000 years) are sent as `99999999H`.
///
/// Decoding follows the grammar strictly: no sign, no whitespace, 1 to 8 digits (leading
/// zeros allowed), one unit. A zero value (`0S`), which some peers send, is accepted and
/// means no time is left. Every value decodes without overflow: the largest, `99999999H`, is
/// far inside [`Duration`]'s range (clamp it with [`Propagation::max`](crate::wire::Propagation::max)).
///
/// Two values are equal when their text is equal (`1S` and `1000m` are not).
///
/// ```
/// use core::time::Duration;
/// use deadline_core::wire::{GrpcTimeout, GrpcUnit, WireError};
///
/// let t = GrpcTimeout::from_duration(Duration::from_millis(250)).unwrap();
/// assert_eq!(t.as_str(), "250000u");
/// assert_eq!(t.unit(), GrpcUnit::Micros);
///
/// // 100 s does not fit in 8 digits of microseconds: milliseconds it is.
/// let t = GrpcTimeout::from_duration(Duration::from_secs(100)).unwrap();
/// assert_eq!(t.as_str(), "100000m");
///
/// // A spent budget is not sent.
/// assert_eq!(GrpcTimeout::from_duration(Duration::ZERO), Err(WireError::Spent));
///
/// let t: GrpcTimeout = "0005S".parse().unwrap();
/// assert_eq!(t.duration(), Duration::from_secs(5));
/// assert_eq!(t.as_str(), "5S");
/// assert_eq!(GrpcTimeout::parse(b"-5S"), Err(WireError::Sign));
/// assert_eq!(GrpcTimeout::parse(b"123456789S"), Err(WireError::TooManyDigits));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct GrpcTimeout {
    value: u32,
    unit: GrpcUnit,
    bytes: [u8; 9],
    len: u8,
}

impl GrpcTimeout {
    /// The largest value `grpc-timeout` carries: 8 digits.
    pub const MAX_VALUE: u32 = 99_999_999;
    /// The most digits a `grpc-timeout` value has.
    pub const MAX_DIGITS: usize = 8;

    /// The value to send for `left`, the time left: the most precise unit whose value fits in
    /// 8 digits, rounded down.
    ///
    /// # Errors
    ///
    /// [`WireError::Spent`] if `left` is zero: nothing is sent and the call is not made.
    pub fn from_duration(left: Duration) -> Result<GrpcTimeout, WireError> {
        const MAX: u32 = GrpcTimeout::MAX_VALUE;
        let secs = left.as_secs();
        let nanos = left.subsec_nanos();
        // The finest unit whose count fits 8 digits, picked by comparing the seconds: under
        // 100 s the microseconds fit (at most 99 999 999), under 100 000 s the milliseconds.
        // The products are in u32: each bound keeps them below 10^8.
        let (count, unit) = if secs == 0 {
            if nanos == 0 {
                return Err(WireError::Spent);
            }
            if nanos <= MAX {
                (nanos, GrpcUnit::Nanos)
            } else {
                (nanos / 1_000, GrpcUnit::Micros)
            }
        } else if secs < 100 {
            let micros = (secs as u32).wrapping_mul(1_000_000);
            (micros.wrapping_add(nanos / 1_000), GrpcUnit::Micros)
        } else if secs < 100_000 {
            let millis = (secs as u32).wrapping_mul(1_000);
            (millis.wrapping_add(nanos / 1_000_000), GrpcUnit::Millis)
        } else if secs <= u64::from(MAX) {
            (secs as u32, GrpcUnit::Seconds)
        } else if secs < 6_000_000_000 {
            // Under (MAX + 1) minutes: `secs / 4` fits a u32, and `secs / 60` is its fifteenth.
            (((secs >> 2) as u32) / 15, GrpcUnit::Minutes)
        } else {
            (
                u32::try_from(secs / 3_600).map_or(MAX, |h| h.min(MAX)),
                GrpcUnit::Hours,
            )
        };
        Ok(GrpcTimeout::new(count, unit))
    }

    /// Decodes a `grpc-timeout` header value.
    ///
    /// # Errors
    ///
    /// [`WireError::Empty`], [`WireError::Whitespace`], [`WireError::Sign`],
    /// [`WireError::InvalidDigit`], [`WireError::TooManyDigits`], [`WireError::MissingUnit`]
    /// or [`WireError::UnknownUnit`], for a value outside the grammar.
    ///
    /// ```
    /// use core::time::Duration;
    /// use deadline_core::wire::{GrpcTimeout, WireError};
    ///
    /// assert_eq!(GrpcTimeout::parse(b"1M").unwrap().duration(), Duration::from_secs(60));
    /// assert_eq!(GrpcTimeout::parse(b"1 S"), Err(WireError::Whitespace));
    /// assert_eq!(GrpcTimeout::parse(b"15"), Err(WireError::MissingUnit));
    /// assert_eq!(GrpcTimeout::parse(b"15s"), Err(WireError::UnknownUnit));
    /// ```
    pub fn parse(value: &[u8]) -> Result<GrpcTimeout, WireError> {
        let (count, unit) = Self::parse_parts(value)?;
        Ok(GrpcTimeout::new(count, unit))
    }

    /// The time a `grpc-timeout` header value stands for, read as [`parse`](Self::parse)
    /// reads it, without keeping its text: what a server needs of it.
    pub(crate) fn parse_duration(value: &[u8]) -> Result<Duration, WireError> {
        let (count, unit) = Self::parse_parts(value)?;
        Ok(unit.times_u32(count))
    }

    /// A value's count (at most [`MAX_VALUE`](Self::MAX_VALUE)) and unit.
    fn parse_parts(value: &[u8]) -> Result<(u32, GrpcUnit), WireError> {
        check_prefix(value)?;
        let Some((&last, digits)) = value.split_last() else {
            return Err(WireError::Empty);
        };
        let unit = match GrpcUnit::from_byte(last) {
            Some(unit) => unit,
            None if last.is_ascii_digit() => return Err(WireError::MissingUnit),
            None => return Err(WireError::UnknownUnit),
        };
        let count = parse_digits(digits, Self::MAX_DIGITS)?;
        // At most 8 digits: the count is at most MAX_VALUE.
        let count = u32::try_from(count).map_or(Self::MAX_VALUE, |c| c.min(Self::MAX_VALUE));
        Ok((count, unit))
    }

    /// The value with `value <= MAX_VALUE` (callers guarantee it) in `unit`.
    fn new(value: u32, unit: GrpcUnit) -> GrpcTimeout {
        let mut bytes = [0u8; 9];
        let n = write_decimal(u64::from(value), &mut bytes);
        // `n` is 1 to 8: the unit goes right after the digits.
        if let Some(slot) = bytes.get_mut(n) {
            *slot = unit.as_byte();
        }
        GrpcTimeout {
            value,
            unit,
            bytes,
            len: u8::try_from(n.saturating_add(1)).unwrap_or(0),
        }
    }

    /// The number before the unit.
    #[must_use]
    pub const fn value(&self) -> u32 {
        self.value
    }

    /// The unit.
    #[must_use]
    pub const fn unit(&self) -> GrpcUnit {
        self.unit
    }

    /// The time the value stands for.
    #[must_use]
    pub const fn duration(&self) -> Duration {
        self.unit.times_u32(self.value)
    }
}

header_value_traits!(GrpcTimeout);
